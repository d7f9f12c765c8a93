//! The memory formats the host and the kernel agree on, GPU-free: records, paged caches,
//! the chunk-interleaved query and the o-fused output.

pub mod cache;
pub mod output;
pub mod query;
pub mod record;
