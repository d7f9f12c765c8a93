//! Three small kernels that exercise the DSL end to end, each with a host reference:
//! a warp-shuffle row reduction, data-dependent runtime branches and loops, and a cluster
//! exchange over distributed shared memory with an mbarrier and PDL.

pub mod cluster_exchange;
pub mod divergent_loop;
pub mod row_reduce;
