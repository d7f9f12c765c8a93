//! Four small kernels that exercise the DSL end to end, each with a host reference:
//! a warp-shuffle row reduction, data-dependent runtime branches and loops, a cluster
//! exchange over distributed shared memory with an mbarrier and PDL, and the GPU spin the
//! benchmarks queue ahead of their timed replays.

pub mod cluster_exchange;
pub mod divergent_loop;
pub mod row_reduce;
pub mod spin;
