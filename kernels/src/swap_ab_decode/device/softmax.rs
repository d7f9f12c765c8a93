//! Stages 4-6 shared by both targets: softmax down each head's column of S, the P hi/lo
//! split, the column sums and this CTA's statistics.

use dsl_core::arch::cvt::{bf16x2_to_f32x2, f32x2_to_bf16x2};
use dsl_core::arch::memory::{load, load_vec, store, store_if, store_vec, store_vec_if};
use dsl_core::arch::thread::shfl_xor;
use dsl_core::trace::{Pred, SmemTile, Val};
use dsl_macros::device;

use super::plan::Plan;
use super::smem::Buffers;
use super::team::Team;

/// A softmax thread's rows and columns: with Q lane quadrants of 32 rows in the tile
/// ([`Plan::quadrants`]: 4, or 2 in a team's 64-row tile), the team's warp w covers rows
/// 32 (w % Q) .. + 32 and the column group w / Q of the heads (4 groups either way).
pub(super) fn row_and_group(plan: &Plan, team: &Team) -> (Val<u32>, Val<u32>, Val<u32>) {
    let quadrants = plan.quadrants();
    let quadrant = team.warp & (quadrants - 1);
    let group = team.warp >> quadrants.trailing_zeros();
    (quadrant, group, quadrant * 32 + team.lane)
}

/// The max a tile's probabilities are taken against.
#[derive(Clone, Copy)]
pub enum Reference<'a> {
    /// The tile's own column max: a CTA with one tile, whose (max, sum) the merge folds.
    TileMax,
    /// The running max M' = max(M, m) of the token's tiles so far and this one (online
    /// softmax), so that a tile's O adds to the running partial unscaled. The column's
    /// first softmax thread writes alpha = 2^(M - M') (row 0), the factor the running
    /// partial and sum take, and M' (row 1) to `rescale` `[2, H]`; [`fold_running`] makes
    /// M' the running max once every thread has read M.
    RunningMax(&'a SmemTile),
}

/// From this thread's scores (row t, columns 4 .. of its group): the probabilities
/// 2^(s * scale_log2 - max) of valid rows (0 elsewhere), the max taken per column as
/// `reference` says, written to P as bf16 hi and lo halves. Returns the fp32 probabilities
/// for the column sums.
#[device]
pub fn softmax_to_p(
    plan: &Plan,
    buf: &Buffers,
    scores: Vec<Val<f32>>,
    scale_log2: Val<f32>,
    team: &Team,
    reference: Reference<'_>,
) -> Vec<Val<f32>> {
    let lane = team.lane;
    let (quadrant, group, row) = row_and_group(plan, team);
    let cols = plan.cols_per_thread;
    let first_col = group * cols;
    let row_ok = load::<i32, _>(buf.valid.at1(row)) != 0;
    let logits: Vec<Val<f32>> = scores
        .iter()
        .map(|s| row_ok.select(*s * scale_log2, f32::NEG_INFINITY))
        .collect();

    // Column max over the tile's rows: over the warp's 32 rows ([`reduce_scatter`]), then
    // across the lane quadrants through shared memory.
    let (column, writer) = scattered_column(plan, lane);
    let max = reduce_scatter(&logits, lane, |a, b| a.max(b));
    store_if(buf.red_max.at(quadrant, first_col + column), max, writer);
    team.sync();
    let mut column_max = Vec::new();
    for k4 in 0..cols / 4 {
        let mut four = load_vec::<f32, 4, _>(buf.red_max.at(0u32, first_col + 4 * k4));
        for other in 1..plan.quadrants() {
            let theirs = load_vec::<f32, 4, _>(buf.red_max.at(other, first_col + 4 * k4));
            for e in 0..4 {
                four[e] = four[e].max(theirs[e]);
            }
        }
        if let Reference::RunningMax(rescale) = reference {
            let first_of_column = (lane == 0) & (quadrant == 0);
            four = running_max(buf, rescale, first_col + 4 * k4, four, first_of_column);
        }
        // A column with no valid row: keep exp() finite (every p is 0 anyway).
        column_max.extend(four.map(|m| (m == f32::NEG_INFINITY).select(0.0f32, m)));
    }
    let probs: Vec<Val<f32>> = logits
        .iter()
        .zip(&column_max)
        .map(|(x, m)| (*x - *m).ex2())
        .collect();

    // P = hi + lo, both bf16 (to ~16 bits): the O MMA adds the two halves' products.
    let mut hi = Vec::new();
    let mut lo = Vec::new();
    for pair in probs.chunks(2) {
        let high = f32x2_to_bf16x2(pair[0], pair[1]);
        let (h0, h1) = bf16x2_to_f32x2(high);
        hi.push(high.bitcast::<u32>());
        lo.push(f32x2_to_bf16x2(pair[0] - h0, pair[1] - h1).bitcast::<u32>());
    }
    for (half, words) in [(0, &hi), (1, &lo)] {
        let (col, p_row) = plan.p_coord(half, first_col, row);
        store_words(buf.p.at(col, p_row), words);
    }
    probs
}

/// Four consecutive columns' running max M' = max(M, `tile_max`), from the running
/// statistics; the `writer` stores their alpha and M' to `rescale`.
#[device]
fn running_max(
    buf: &Buffers,
    rescale: &SmemTile,
    first: Val<u32>,
    tile_max: [Val<f32>; 4],
    writer: Pred,
) -> [Val<f32>; 4] {
    let old = load_vec::<f32, 4, _>(buf.running_stat(0, first));
    let new: [Val<f32>; 4] = std::array::from_fn(|e| old[e].max(tile_max[e]));
    // Equal maxima keep the partial as it is (also -inf = -inf before any valid row).
    let alpha: [Val<f32>; 4] =
        std::array::from_fn(|e| (new[e] == old[e]).select(1.0f32, (old[e] - new[e]).ex2()));
    store_vec_if(rescale.at(0u32, first), alpha, writer);
    store_vec_if(rescale.at(1u32, first), new, writer);
    new
}

/// Stores 2 or 4 consecutive 32-bit words.
fn store_words(at: dsl_core::arch::memory::Smem, words: &[Val<u32>]) {
    match words {
        [a, b] => store_vec(at, [*a, *b]),
        [a, b, c, d] => store_vec(at, [*a, *b, *c, *d]),
        other => panic!(
            "P rows of {} words: a head group is 16 or 32 heads",
            other.len()
        ),
    }
}

/// Each head's column sum of the probabilities over the tile, per lane quadrant.
#[device]
pub fn column_sums(plan: &Plan, buf: &Buffers, probs: &[Val<f32>], team: &Team) {
    let (quadrant, group, _) = row_and_group(plan, team);
    let (column, writer) = scattered_column(plan, team.lane);
    let sum = reduce_scatter(probs, team.lane, |a, b| a + b);
    store_if(
        buf.red_sum
            .at(quadrant, group * plan.cols_per_thread + column),
        sum,
        writer,
    );
}

/// Reduces each of a thread's `columns` (the same columns in every lane) over the warp's 32
/// lanes by `combine`. Each of the first log2(n) butterfly rounds halves the columns a lane
/// holds: the lanes whose bit of that round is clear keep the low half and send the high
/// half to their partner, which keeps the high one. Lane l ends with column
/// [`scattered_column`] of l, which the 32 / n lanes that hold it agree on bitwise (each
/// round combines the same two values in both lanes). A plain butterfly over every column
/// shuffles 5 n times; this n - 1 + 5 - log2(n) times (6 instead of 20 for n = 4), which
/// matters beside the next tile's record loads that share the MIO queue with the shuffles.
#[device]
fn reduce_scatter(
    columns: &[Val<f32>],
    lane: Val<u32>,
    combine: impl Fn(Val<f32>, Val<f32>) -> Val<f32>,
) -> Val<f32> {
    let mut held = columns.to_vec();
    for shift in [16u32, 8, 4, 2, 1] {
        let half = held.len() / 2;
        held = if half == 0 {
            vec![combine(held[0], shfl_xor(held[0], shift))]
        } else {
            let high = (lane & shift) != 0u32;
            (0..half)
                .map(|i| {
                    let sent = high.select(held[i], held[half + i]);
                    let kept = high.select(held[half + i], held[i]);
                    combine(kept, shfl_xor(sent, shift))
                })
                .collect()
        };
    }
    held[0]
}

/// The column of a thread's group that lane `lane` holds after [`reduce_scatter`]
/// (lane / (32 / n) for n columns: the bits of the halving rounds, high first), and whether
/// it is the first lane holding it.
fn scattered_column(plan: &Plan, lane: Val<u32>) -> (Val<u32>, Pred) {
    let lanes_per_column = 32 / plan.cols_per_thread;
    (lane / lanes_per_column, (lane % lanes_per_column).eq(0u32))
}

/// Head `head`'s statistics over the tile: its max (0 when no row is valid) and sum of
/// probabilities, from the lane quadrants' partial reductions.
#[device]
fn tile_stats(plan: &Plan, buf: &Buffers, head: Val<u32>) -> (Val<f32>, Val<f32>) {
    let mut max = load::<f32, _>(buf.red_max.at(0u32, head));
    for quadrant in 1..plan.quadrants() {
        max = max.max(load::<f32, _>(buf.red_max.at(quadrant, head)));
    }
    (
        (max == f32::NEG_INFINITY).select(0.0f32, max),
        tile_sum(plan, buf, head),
    )
}

/// Head `head`'s sum of probabilities over the tile.
#[device]
fn tile_sum(plan: &Plan, buf: &Buffers, head: Val<u32>) -> Val<f32> {
    let mut sum = load::<f32, _>(buf.red_sum.at(0u32, head));
    for quadrant in 1..plan.quadrants() {
        sum += load::<f32, _>(buf.red_sum.at(quadrant, head));
    }
    sum
}

/// This CTA's statistics for the merge: per head the tile's max (0 when no row is valid)
/// and sum of probabilities.
#[device]
pub fn write_stats(plan: &Plan, buf: &Buffers, tid: Val<u32>, rank: Val<u32>) {
    if tid < plan.heads {
        let (max, sum) = tile_stats(plan, buf, tid);
        store(buf.stat(rank, 0, tid), max);
        store(buf.stat(rank, 1, tid), sum);
    }
}

/// The running statistics of a team that accumulates over tiles start empty: max -inf
/// (no tile yet), sum 0 (stored by the CTA's first threads).
#[device]
pub fn reset_running(plan: &Plan, buf: &Buffers, tid: Val<u32>) {
    if tid < plan.heads {
        store(buf.running_stat(0, tid), f32::NEG_INFINITY);
        store(buf.running_stat(1, tid), 0.0f32);
    }
}

/// Folds the tile's statistics into the running ones (online softmax), once every thread
/// has read the running max: per head the max becomes M' and the sum alpha S + s, with
/// alpha and M' as [`Reference::RunningMax`] wrote them to `rescale`. A tile without a
/// valid row changes nothing (alpha = 1, M' = M, s = 0).
#[device]
pub fn fold_running(plan: &Plan, buf: &Buffers, rescale: &SmemTile, team: &Team) {
    let tid = team.tid;
    if tid < plan.heads {
        let sum = tile_sum(plan, buf, tid);
        let old_sum: Val<f32> = load(buf.running_stat(1, tid));
        let alpha: Val<f32> = load(rescale.at(0u32, tid));
        store(
            buf.running_stat(0, tid),
            load::<f32, _>(rescale.at(1u32, tid)),
        );
        store(buf.running_stat(1, tid), old_sum.fma(alpha, sum));
    }
}

/// A streamed team of a cluster's CTA: its running statistics, kept in entry `team` while
/// it streams, move to its partial's entry `rank * teams + team`, where the peers read them
/// (entries below `teams` are peer 0's once the statistics are gathered).
#[device]
pub fn publish_running(plan: &Plan, buf: &Buffers, team: &Team, rank: Val<u32>) {
    if team.tid < plan.heads {
        let entry = match plan.teams {
            1 => rank,
            teams => rank * teams + buf.team,
        };
        for row in 0..2 {
            let value: Val<f32> = load(buf.running_stat(row, team.tid));
            store(buf.stat(entry, row, team.tid), value);
        }
    }
}
