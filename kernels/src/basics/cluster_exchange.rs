//! A cluster of CTAs exchanging data through distributed shared memory: each CTA fills a
//! shared buffer (the writes counted by an mbarrier), the cluster barrier publishes it,
//! and every CTA reads its neighbour's buffer with `mapa` + `ld.shared::cluster`. The
//! kernel is a PDL dependent: it waits for its predecessor before reading global memory.

use dsl_core::arch::cluster::{cluster_arrive, cluster_arrive_relaxed, cluster_wait};
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::pdl::{grid_dependency_wait, launch_dependents};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::{block_idx_x, cluster_cta_rank, thread_idx_x};
use dsl_core::layout::ComposedLayout;
use dsl_core::trace::{Tensor, Val, cluster_dims, smem_alloc, smem_tile, threads};
use dsl_macros::kernel;

/// Threads per CTA (one buffer element each).
pub const THREADS: u32 = 128;

/// `out[c * 128 + t] = input[p * 128 + t] * (p + 1) + r` where `r` is CTA `c`'s rank in its
/// cluster of `cluster` CTAs and `p` the CTA of rank `(r + 1) % cluster` in the same cluster.
#[kernel]
pub fn cluster_exchange(#[comptime] cluster: u32, input: Tensor<u32, 1>, out: Tensor<u32, 1>) {
    threads(THREADS, 1, 1);
    cluster_dims(cluster, 1, 1);
    let buffer = smem_tile(
        "buffer",
        ComposedLayout::row_major(&[i64::from(THREADS)], 4).expect("4-byte words compose"),
    );
    let barrier = Mbarrier::at(smem_alloc("filled", 8, 8).addr());
    let tid = thread_idx_x();
    let cta = block_idx_x();
    let rank = cluster_cta_rank();

    if tid == 0 {
        barrier.init(THREADS);
        init_fence();
    }
    sync_threads();

    grid_dependency_wait();
    let global = cta * THREADS + tid;
    let v: Val<u32> = load(input.view([Some(1)]).at(global));
    let slot = buffer.at1(tid);
    store(slot, v * (rank + 1));
    barrier.arrive();
    barrier.wait(0u32);

    // Every CTA's buffer is complete before anyone reads a peer's.
    cluster_arrive();
    cluster_wait();
    let peer = (rank + 1) % cluster;
    let from_peer: Val<u32> = load(slot.in_cta(peer));
    launch_dependents();
    store(out.view([Some(1)]).at(global), from_peer + rank);

    // Nobody exits while a peer may still read its shared memory.
    cluster_arrive_relaxed();
    cluster_wait();
}

/// What the kernel writes for `input`, with grid `input.len() / 128` CTAs.
pub fn reference(input: &[u32], cluster: u32) -> Vec<u32> {
    let t = THREADS as usize;
    let ctas = input.len() / t;
    let mut out = vec![0u32; input.len()];
    for c in 0..ctas {
        let rank = (c as u32) % cluster;
        let peer_rank = (rank + 1) % cluster;
        let peer = c - rank as usize + peer_rank as usize;
        for i in 0..t {
            out[c * t + i] = input[peer * t + i]
                .wrapping_mul(peer_rank + 1)
                .wrapping_add(rank);
        }
    }
    out
}
