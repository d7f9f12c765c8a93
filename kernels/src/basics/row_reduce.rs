//! Row max and row sum of exponentials, one warp per row, reduced with `shfl.sync.bfly`:
//! the two statistics of a softmax. `x` is `[rows, COLS]` f32, row-major.

use dsl_core::arch::memory::{LoadOpts, load_vec_if, store_if};
use dsl_core::arch::thread::{block_idx_x, lane_id, shfl_xor, warp_id};
use dsl_core::trace::{Tensor, Val, threads, trace_error};
use dsl_macros::kernel;

/// Warps (rows) per CTA.
pub const WARPS: u32 = 4;

/// `max[r] = max_c x[r, c]`, `sum[r] = sum_c exp(x[r, c] - max[r])` for a compile-time
/// column count `cols` (a multiple of 128: each lane loads 16-byte pieces).
#[kernel]
pub fn row_reduce(
    #[comptime] cols: u32,
    x: Tensor<f32, 2>,
    max_out: Tensor<f32, 1>,
    sum_out: Tensor<f32, 1>,
    rows: Val<u32>,
) {
    if cols == 0 || cols % 128 != 0 {
        trace_error(format!(
            "row_reduce: cols must be a positive multiple of 128, got {cols}"
        ));
    }
    threads(32 * WARPS, 1, 1);
    let cta = block_idx_x();
    let row = cta * WARPS + warp_id();
    let lane = lane_id();
    let live = row < rows;
    let x = x.view([None, Some(1)]);
    let mut values = Vec::new();
    for piece in 0..cols / 128 {
        let at = x.at((row, lane * 4 + piece * 128));
        let v: [Val<f32>; 4] = load_vec_if(at, live, 0.0f32, LoadOpts { nc: true });
        values.extend(v);
    }
    let mut max = values[0];
    for v in &values[1..] {
        max = max.max(*v);
    }
    for shift in [16, 8, 4, 2, 1] {
        max = max.max(shfl_xor(max, shift));
    }
    let log2e = std::f32::consts::LOG2_E;
    let mut sum = Val::<f32>::constant(0.0);
    for v in &values {
        sum += ((*v - max) * log2e).ex2();
    }
    for shift in [16, 8, 4, 2, 1] {
        sum += shfl_xor(sum, shift);
    }
    let first_lane = live & (lane == 0);
    store_if(max_out.view([Some(1)]).at(row), max, first_lane);
    store_if(sum_out.view([Some(1)]).at(row), sum, first_lane);
}

/// The host computation the kernel must match (to the ex2 approximation's precision).
pub fn reference(x: &[f32], cols: usize) -> (Vec<f32>, Vec<f32>) {
    x.chunks(cols)
        .map(|row| {
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum = row.iter().map(|&v| ((v - max) as f64).exp()).sum::<f64>();
            (max, sum as f32)
        })
        .unzip()
}
