//! A sum split over the CTAs of a grid, finished in the same launch: each CTA sums its
//! slice, stores its partial and counts itself in with a GPU-scope atomic add; the CTA
//! that finds every other one counted adds the partials and puts the counter back to 0 for
//! the next launch. The partials are added in CTA order, whichever CTA comes last, so the
//! result is bitwise the same on every launch. This is how a kernel merges work that it
//! splits over CTAs with no cluster (and so no distributed shared memory) in common.

use dsl_core::arch::memory::{AtomOrder, Smem, atomic_add, load, store};
use dsl_core::arch::sync::{fence_acq_rel_gpu, sync_threads};
use dsl_core::arch::thread::{block_idx_x, grid_dim_x, lane_id, shfl_xor, thread_idx_x, warp_id};
use dsl_core::layout::ComposedLayout;
use dsl_core::trace::{SmemTile, Tensor, Val, dyn_range, smem_tile, threads};
use dsl_macros::{device, kernel};

/// Threads per CTA.
pub const THREADS: u32 = 128;
const WARPS: u32 = THREADS / 32;
/// The shared word after the warps' sums: the count the CTA's add returned.
const COUNT_SLOT: u32 = WARPS;

/// `sum[0]` = the sum of `x`, whose `grid x 128 x per_thread` values CTA c reads from
/// `c x 128 x per_thread` on (thread t: values t, t + 128, ...). `partials` holds a value
/// per CTA; `count` is one u32, 0 before each launch, and 0 again after it.
#[kernel]
pub fn split_sum(
    #[comptime] per_thread: u32,
    x: Tensor<f32, 1>,
    partials: Tensor<f32, 1>,
    count: Tensor<u32, 1>,
    sum: Tensor<f32, 1>,
) {
    threads(THREADS, 1, 1);
    let scratch = smem_tile(
        "scratch",
        ComposedLayout::row_major(&[i64::from(WARPS + 1)], 4).expect("4-byte words compose"),
    );
    let (tid, cta, ctas) = (thread_idx_x(), block_idx_x(), grid_dim_x());
    let (x, partials) = (x.view([Some(1)]), partials.view([Some(1)]));

    let first = cta * (THREADS * per_thread) + tid;
    let mut own = Val::<f32>::constant(0.0);
    for i in 0..per_thread {
        own += load::<f32, _>(x.at(first + i * THREADS));
    }
    let partial = cta_sum(own, &scratch);
    if tid == 0 {
        store(partials.at(cta), partial);
        fence_acq_rel_gpu();
        let before = atomic_add(count.base(), 1u32, AtomOrder::AcqRel);
        store(count_slot(&scratch), before);
    }
    sync_threads();
    let before: Val<u32> = load(count_slot(&scratch));
    if before == ctas - 1 {
        fence_acq_rel_gpu();
        let mut all = Val::<f32>::constant(0.0);
        for c in dyn_range(tid, ctas).step_by(THREADS) {
            all += load::<f32, _>(partials.at(c));
        }
        let total = cta_sum(all, &scratch);
        if tid == 0 {
            store(sum.view([Some(1)]).at(0u32), total);
            store(count.base(), 0u32);
        }
    }
}

fn count_slot(scratch: &SmemTile) -> Smem {
    scratch.at1(COUNT_SLOT)
}

/// The CTA's sum of one value a thread, on every thread: a butterfly over each warp (every
/// lane ends with the same bits), then the warps' sums in warp order. Ends past a barrier
/// after which `scratch`'s warp sums may be written again.
#[device]
fn cta_sum(v: Val<f32>, scratch: &SmemTile) -> Val<f32> {
    let mut v = v;
    for shift in [16, 8, 4, 2, 1] {
        v += shfl_xor(v, shift);
    }
    if lane_id() == 0 {
        store(scratch.at1(warp_id()), v);
    }
    sync_threads();
    let mut total = load::<f32, _>(scratch.at1(0u32));
    for w in 1..WARPS {
        total += load::<f32, _>(scratch.at1(w));
    }
    sync_threads();
    total
}

/// What the kernel stores in `sum[0]` for `x` over `ctas` CTAs: the same additions in the
/// same order.
pub fn reference(x: &[f32], ctas: usize) -> f32 {
    let per_cta = x.len() / ctas;
    let threads = THREADS as usize;
    let partials: Vec<f32> = x
        .chunks(per_cta)
        .map(|slice| {
            let own: Vec<f32> = (0..threads)
                .map(|t| slice[t..].iter().step_by(threads).fold(0.0, |a, v| a + v))
                .collect();
            reference_cta_sum(&own)
        })
        .collect();
    let all: Vec<f32> = (0..threads)
        .map(|t| {
            partials
                .iter()
                .skip(t)
                .step_by(threads)
                .fold(0.0, |a, v| a + v)
        })
        .collect();
    reference_cta_sum(&all)
}

/// [`cta_sum`] on the host: `values` holds one value per thread.
fn reference_cta_sum(values: &[f32]) -> f32 {
    let warp_sums: Vec<f32> = values
        .chunks(32)
        .map(|warp| {
            let mut lanes = warp.to_vec();
            for shift in [16, 8, 4, 2, 1] {
                lanes = (0..32).map(|l| lanes[l] + lanes[l ^ shift]).collect();
            }
            lanes[0]
        })
        .collect();
    warp_sums[1..].iter().fold(warp_sums[0], |a, v| a + v)
}

#[cfg(test)]
mod tests {
    use dsl_core::Target;
    use dsl_core::interp::{self, Arg, Launch, Memory, Options};

    use super::{THREADS, reference, split_sum};

    /// With the CTAs run first to last and last to first, so that CTA 0 is the last to count
    /// itself in as well as the last CTA; twice each, the second launch finding the counter
    /// the first put back.
    #[test]
    fn split_sum_adds_every_ctas_partial_in_the_interpreter() {
        let per_thread = 3;
        for target in Target::ALL {
            let kernel = split_sum(target, per_thread).unwrap();
            for ctas in [1usize, 2, 5, 130] {
                let n = ctas * (THREADS * per_thread) as usize;
                let x: Vec<f32> = (0..n)
                    .map(|i| ((i * 7919) % 1000) as f32 / 64.0 - 7.0)
                    .collect();
                let mut mem = Memory::new();
                let xs = mem.alloc_from("x", &x);
                let partials = mem.alloc_from("partials", &vec![0.0f32; ctas]);
                let count = mem.alloc_from("count", &[0u32]);
                let sum = mem.alloc_from("sum", &[f32::NAN]);
                let args = [
                    Arg::contiguous(xs, &[n as i64]),
                    Arg::contiguous(partials, &[ctas as i64]),
                    Arg::contiguous(count, &[1]),
                    Arg::contiguous(sum, &[1]),
                ];
                let launch = Launch::grid([ctas as u32, 1, 1]);
                for (run, clusters_last_first) in [false, false, true, true].into_iter().enumerate()
                {
                    let options = Options {
                        clusters_last_first,
                        ..Options::default()
                    };
                    mem.write(sum, 0, &[f32::NAN]);
                    interp::run_with(&kernel, &mut mem, &args, &launch, &options)
                        .unwrap_or_else(|e| panic!("{target}, {ctas} CTAs: {e}"));
                    let what = format!("{target}, {ctas} CTAs, run {run}");
                    assert_eq!(mem.read::<u32>(count), [0], "{what}: the counter is reset");
                    assert_eq!(
                        mem.read::<f32>(sum)[0].to_bits(),
                        reference(&x, ctas).to_bits(),
                        "{what}"
                    );
                }
            }
        }
    }
}
