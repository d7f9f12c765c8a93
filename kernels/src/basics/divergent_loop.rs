//! Data-dependent control flow: each thread runs a Collatz trajectory of its own length
//! (a runtime `while` whose trip count differs per lane), with a runtime `if` inside and
//! values carried around the loop and merged out of the branch, plus a runtime `for` over a
//! per-thread count. The outputs only come out right if every merge and loop-carried value
//! is right in every lane.

use dsl_core::arch::memory::{load, store};
use dsl_core::arch::thread::{block_idx_x, thread_idx_x};
use dsl_core::trace::{Tensor, Val, dyn_range, threads};
use dsl_macros::kernel;

/// Threads per CTA.
pub const THREADS: u32 = 128;

/// For each `i < n`: `steps[i]` = Collatz steps from `start[i]` to 1 (at most `limit`),
/// `peak[i]` = the largest value reached, `mix[i]` = a checksum of a runtime loop of
/// `start[i] % 8` iterations with a branch inside, mixed with the final and the pre-loop
/// value of the trajectory.
#[kernel]
pub fn divergent_loop(
    start: Tensor<u32, 1>,
    steps_out: Tensor<u32, 1>,
    peak_out: Tensor<u32, 1>,
    mix_out: Tensor<u32, 1>,
    n: Val<u32>,
    limit: Val<u32>,
) {
    threads(THREADS, 1, 1);
    let cta = block_idx_x();
    let i = cta * THREADS + thread_idx_x();
    if i < n {
        let first: Val<u32> = load(start.view([Some(1)]).at(i));
        let mut x = first;
        let mut steps = Val::<u32>::constant(0);
        let mut peak = x;
        while x != 1 && steps < limit {
            if (x & 1) == 0 {
                x >>= 1;
            } else {
                x = x * 3 + 1;
            }
            peak = peak.max(x);
            steps += 1;
        }
        // `kept` must keep the value from before the loop below, whatever it does to `x`.
        let kept = x;
        let mut mix = first;
        for k in dyn_range(0u32, first & 7) {
            if k > 2 {
                mix = mix * 31 + k;
            } else {
                mix ^= k << 4;
            }
            x += 1;
        }
        store(steps_out.view([Some(1)]).at(i), steps);
        store(peak_out.view([Some(1)]).at(i), peak);
        store(mix_out.view([Some(1)]).at(i), mix + kept * 1000 + x * 7);
    }
}

/// What the kernel computes for one start value.
pub fn reference(start: u32, limit: u32) -> (u32, u32, u32) {
    let (mut x, mut steps, mut peak) = (start, 0u32, start);
    while x != 1 && steps < limit {
        x = if x % 2 == 0 {
            x / 2
        } else {
            x.wrapping_mul(3).wrapping_add(1)
        };
        peak = peak.max(x);
        steps += 1;
    }
    let kept = x;
    let mut mix = start;
    for k in 0..start & 7 {
        if k > 2 {
            mix = mix.wrapping_mul(31).wrapping_add(k);
        } else {
            mix ^= k << 4;
        }
        x = x.wrapping_add(1);
    }
    let mix = mix
        .wrapping_add(kept.wrapping_mul(1000))
        .wrapping_add(x.wrapping_mul(7));
    (steps, peak, mix)
}
