//! Five small kernels that exercise the DSL end to end, each with a host reference:
//! a warp-shuffle row reduction, data-dependent runtime branches and loops, a cluster
//! exchange over distributed shared memory with an mbarrier and PDL, a sum split over a
//! grid's CTAs that the last of them finishes (GPU-scope atomics and fences), and the GPU
//! spin the benchmarks queue ahead of their timed replays.

pub mod cluster_exchange;
pub mod divergent_loop;
pub mod row_reduce;
pub mod spin;
pub mod split_sum;
