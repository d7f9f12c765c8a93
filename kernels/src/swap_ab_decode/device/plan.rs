//! Everything the kernel derives from its [`CompileKey`] at trace time: tile counts, how
//! work is split over threads, TMEM columns, and the shared-memory layouts.

use dsl_core::Target;
use dsl_core::layout::{ComposedLayout, Int, IntTuple, Layout, LayoutError, Swizzle, canonical};
use dsl_core::trace::Val;

use crate::swap_ab_decode::key::{MIN_MMA_HEADS, Schedule};
use crate::swap_ab_decode::{CompileKey, FP8_RECORD, HEAD_DIM, ROPE_DIM, THREADS, TILE};

/// Static facts of one compiled kernel.
#[derive(Clone, Debug)]
pub struct Plan {
    pub key: CompileKey,
    /// Heads the MMAs compute per cluster (H): the live ones, 8 padded to 16.
    pub heads: u32,
    /// Live heads per cluster (<= H); padded heads are computed but never loaded or stored.
    pub live_heads: u32,
    /// Clusters per token along the grid's z (64 and 128 heads: groups of 32).
    pub head_groups: u32,
    /// SWA tiles (KT) and compressed tiles (ET) of a token, and the rows of an SWA tile;
    /// a split cluster has C = KT + ET CTAs, a streamed one the key's `ctas`.
    pub swa_tiles: u32,
    pub extra_tiles: u32,
    pub swa_tile_rows: u32,
    /// Rows of a compressed tile: 128, or 64 in a split cluster of half tiles.
    pub extra_tile_rows: u32,
    pub cluster: u32,
    /// Live heads of a full group: the grid's z index times this is the group's first head.
    pub group_heads: u32,
    /// Score / P columns a softmax thread owns (H / 4: four column groups of warps).
    pub cols_per_thread: u32,
    /// 16-byte pieces of Q each thread loads (H * 512 / 8 / 512).
    pub q_pieces: u32,
    /// (live head, 32-dim chunk) output units, units per CTA, and 64-unit passes over them.
    pub units: u32,
    pub units_per_cta: u32,
    pub merge_passes: u32,
    /// TMEM (sm_100): O hi|lo of the four 128-dim M-blocks at columns `mb * 2H`, then S.
    pub s_column: u32,
    pub tmem_columns: u32,
    /// Teams of warps that stream tiles side by side in a CTA: 2 (of 8 warps each) in the
    /// sm_90a streamed schedule where their buffers fit, else 1 (the CTA).
    pub teams: u32,
    /// Rows of a team's KV buffer: 128, or 64 with two teams (a streamed tile's rows).
    pub kv_rows: u32,
    /// How the O MMA adds P's hi and lo halves.
    pub hi_lo: HiLo,
}

/// How the O MMA takes P = hi + lo (both bf16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HiLo {
    /// P `[2H, kv_rows]`: the halves are 2H columns of one MMA (one `N = 2H` instruction a
    /// K-step), whose two accumulators a head stage 6 sums.
    Columns,
    /// P `[H, 2 kv_rows]`: the hi rows, then the lo rows, two MMAs of `N = H` into one
    /// accumulator, half the registers. The 32-head streamed CTA takes it: its running O^T
    /// in two columns a head (64 registers a thread) made ptxas spill about 250 bytes at
    /// the 128-register cap. With 16 heads the two `N = 16` instructions a K-step measured
    /// 3-10% slower than one `N = 32` (H100), so the other kernels keep the columns.
    Accumulated,
}

impl HiLo {
    /// Accumulator columns a head: 2, or 1.
    pub fn columns(self) -> u32 {
        match self {
            HiLo::Columns => 2,
            HiLo::Accumulated => 1,
        }
    }
}

/// Threads that cooperate on one output unit in the merge (4 dims = 16 bytes each).
pub const THREADS_PER_UNIT: u32 = 8;

/// Output units a merge pass takes: one a group of [`THREADS_PER_UNIT`] threads.
pub const MERGE_SLOTS: u32 = THREADS as u32 / THREADS_PER_UNIT;

/// Words between the end of one head's row of the fp32 partial and the next row's start
/// ([`Plan::partial_layout`] says why).
const PARTIAL_ROW_PAD_WORDS: i64 = 4;

impl Plan {
    pub fn new(key: &CompileKey) -> Plan {
        let heads = key.mma_heads() as u32;
        let live_heads = key.heads_per_cluster() as u32;
        let swa_tiles = key.swa_tiles() as u32;
        let extra_tiles = key.extra_tiles() as u32;
        let cluster = key.cluster_size() as u32;
        let units = (HEAD_DIM as u32 / 32) * live_heads;
        let units_per_cta = units.div_ceil(cluster);
        let s_column = 8 * heads;
        let teams = if two_teams_fit(key) { 2 } else { 1 };
        Plan {
            key: *key,
            heads,
            live_heads,
            head_groups: key.head_groups() as u32,
            swa_tiles,
            extra_tiles,
            swa_tile_rows: key.swa_tile_rows() as u32,
            extra_tile_rows: key.extra_tile_rows() as u32,
            cluster,
            group_heads: key.max_heads_per_cluster() as u32,
            cols_per_thread: heads / 4,
            q_pieces: heads * HEAD_DIM as u32 / 8 / THREADS as u32,
            units,
            units_per_cta,
            merge_passes: units_per_cta.div_ceil(MERGE_SLOTS),
            s_column,
            tmem_columns: if s_column + heads <= 256 { 256 } else { 512 },
            teams,
            kv_rows: TILE as u32 / teams,
            hi_lo: match key.schedule {
                Schedule::Streamed { cta_heads, .. } if cta_heads > MIN_MMA_HEADS => {
                    HiLo::Accumulated
                }
                _ => HiLo::Columns,
            },
        }
    }

    pub fn target(&self) -> Target {
        self.key.target
    }

    pub fn streamed(&self) -> bool {
        matches!(self.key.schedule, Schedule::Streamed { .. })
    }

    /// Whether the CTAs of a token merge over a cluster (split, and streamed by more than
    /// one CTA): the cluster barriers around the pulls from peers' shared memory.
    pub fn merges_peers(&self) -> bool {
        !self.streamed() || self.cluster > 1
    }

    /// The partials a token's output merges: one per team of every CTA of the cluster,
    /// partial `p` of CTA `p / teams`, team `p % teams`.
    pub fn partials(&self) -> u32 {
        self.cluster * self.teams
    }

    /// The statistics (m, l) of every head, one entry per partial.
    pub fn stats_len(&self) -> u32 {
        self.partials() * 2 * self.heads
    }

    /// Rows of the KV buffer that a tile fills: `kv_rows`, or 64 in a split cluster whose
    /// every tile is 64 rows (half tiles, or SWA tiles only).
    pub fn live_rows(&self) -> u32 {
        if self.streamed() {
            return self.kv_rows;
        }
        let swa = if self.swa_tiles > 0 {
            self.swa_tile_rows
        } else {
            0
        };
        let extra = if self.extra_tiles > 0 {
            self.extra_tile_rows
        } else {
            0
        };
        swa.max(extra)
    }

    /// Whether S on sm_90a splits K over the two warpgroups of a split CTA whose 128-row
    /// buffer holds 64 live rows (`mma::wgmma`): both compute those rows, so that no MMA
    /// reads the other 64 and they need not be zeroed. The tcgen05 S (M = 128) reads every
    /// row.
    ///
    /// ```
    /// use kernels::swap_ab_decode::CompileKey;
    /// use kernels::swap_ab_decode::plan::Plan;
    ///
    /// let half_tiles: CompileKey = "h16_nk128_ne512_fp8_p64x64_split64_sm90a".parse()?;
    /// let plan = Plan::new(&half_tiles);
    /// assert_eq!((plan.kv_rows, plan.live_rows()), (128, 64));
    /// assert!(plan.scores_split_k());
    /// // The second half of K's part: 64 rows of 16 heads' f32 scores from byte 4096.
    /// let part = plan.scores_half_layout(1)?;
    /// assert_eq!(part.end_bytes(), 4096 + 64 * 16 * 4);
    /// // A compressed tile of 128 rows fills the buffer: S is split by rows.
    /// let whole_tiles: CompileKey = "h16_nk128_ne512_fp8_p64x64_sm90a".parse()?;
    /// assert!(!Plan::new(&whole_tiles).scores_split_k());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scores_split_k(&self) -> bool {
        self.target() == Target::Sm90a
            && !self.streamed()
            && self.kv_rows == 128
            && self.live_rows() == 64
    }

    /// Lane quadrants of a KV buffer: 32-row groups, one per warp of a softmax column group.
    pub fn quadrants(&self) -> u32 {
        self.kv_rows / 32
    }

    /// A team's KV tile: `[kv_rows, 512 dims]` bf16, K-major, 128-byte swizzle (8 k-blocks).
    /// It is the A operand of S = KV . Q^T and, transposed, of O = KV^T . P.
    pub fn kv_layout(&self) -> Result<ComposedLayout, LayoutError> {
        canonical::k_major(Swizzle::B128, self.kv_rows as i64, HEAD_DIM as i64, 2)
    }

    /// Q after RoPE: `[H, 512]` bf16, K-major, 128-byte swizzle: the B operand of S.
    pub fn q_layout(&self) -> Result<ComposedLayout, LayoutError> {
        canonical::k_major(Swizzle::B128, self.heads as i64, HEAD_DIM as i64, 2)
    }

    /// P, bf16 and MN-major, the B operand of O ([`HiLo`]): `[2H, kv_rows]` (the H hi
    /// columns, then the H lo columns, contiguous in a row swizzled by its 4H bytes), or
    /// `[H, 2 kv_rows]` (rows `0 .. kv_rows` P_hi, the next `kv_rows` P_lo, each a canonical
    /// operand, rows swizzled by their 2H bytes).
    pub fn p_layout(&self) -> Result<ComposedLayout, LayoutError> {
        let (heads, rows) = (i64::from(self.heads), i64::from(self.kv_rows));
        match self.hi_lo {
            HiLo::Columns => canonical::mn_major(row_swizzle(4 * self.heads), 2 * heads, rows, 2),
            HiLo::Accumulated => {
                canonical::mn_major(row_swizzle(2 * self.heads), heads, 2 * rows, 2)
            }
        }
    }

    /// P's `(column, row)` of head column `col`, KV row `row` of `half` (0: hi, 1: lo).
    pub fn p_coord(&self, half: u32, col: Val<u32>, row: Val<u32>) -> (Val<u32>, Val<u32>) {
        match self.hi_lo {
            HiLo::Columns => (col + half * self.heads, row),
            HiLo::Accumulated => (col, row + half * self.kv_rows),
        }
    }

    /// The O MMA's accumulator columns: H a half of P, or H.
    pub fn outputs_columns(&self) -> u32 {
        self.hi_lo.columns() * self.heads
    }

    /// The fp32 partial output `[H, 512]`, its rows 512 + 4 words apart; it reuses the KV
    /// tile's bytes once both MMAs have read them. The O MMA's fragment gives the four
    /// lanes of a row group heads 2t + c (t = lane % 4) at one dim: rows 512 words apart
    /// put all four in one bank (a 4-way conflict on every store of the partial), rows
    /// 516 apart 8 banks apart. The merge reads 32 contiguous dims of one head a quarter
    /// warp, which any row stride keeps conflict-free.
    pub fn partial_layout(&self) -> Result<ComposedLayout, LayoutError> {
        let layout = Layout::new(
            IntTuple::tuple([
                IntTuple::from(i64::from(self.heads)),
                IntTuple::from(HEAD_DIM as i64),
            ]),
            IntTuple::tuple([
                IntTuple::from(HEAD_DIM as i64 + PARTIAL_ROW_PAD_WORDS),
                IntTuple::from(1),
            ]),
        )?;
        ComposedLayout::new(Swizzle::NONE, 0, layout, 4)
    }

    /// sm_90: the scores `[kv_rows, H]` f32 in shared memory, where sm_100 keeps them in
    /// TMEM. It takes P's bytes (both are 4 H bytes a row): every thread has read its scores
    /// before the column max's barrier, after which P is written. Rows of 64 or 128 bytes
    /// swizzled by their 16-byte pieces, so that the row-per-thread reads of eight lanes
    /// fall in distinct banks.
    pub fn scores_layout(&self) -> Result<ComposedLayout, LayoutError> {
        self.scores_rows_layout(self.kv_rows, 0)
    }

    /// Where S splits K ([`Plan::scores_split_k`]), the partial sums of its 64 live rows
    /// over half `half` of K: rows `64 half ..` of the stand-in.
    pub fn scores_half_layout(&self, half: u32) -> Result<ComposedLayout, LayoutError> {
        self.scores_rows_layout(64, half * 64 * 4 * self.heads)
    }

    fn scores_rows_layout(
        &self,
        rows: u32,
        first_byte: u32,
    ) -> Result<ComposedLayout, LayoutError> {
        let layout = Layout::row_major(&[
            Int::Static(i64::from(rows)),
            Int::Static(i64::from(self.heads)),
        ]);
        ComposedLayout::new(
            row_swizzle(4 * self.heads),
            i64::from(first_byte),
            layout,
            4,
        )
    }
}

/// The MMA swizzle of rows of `row_bytes` bytes (P's rows, 2H or 4H bytes, and the scores',
/// 4H: H is 16 or 32), so that eight consecutive rows' 16-byte pieces fall in distinct
/// banks.
fn row_swizzle(row_bytes: u32) -> Swizzle {
    match row_bytes {
        32 => Swizzle::B32,
        64 => Swizzle::B64,
        128 => Swizzle::B128,
        other => unreachable!("rows of {other} bytes: the MMAs take 16 or 32 heads"),
    }
}

/// Whether two teams' buffers fit a CTA's shared memory beside the shared ones (sm_90a,
/// streamed, 16 heads): each team's KV tile, records' stage (528 bytes a row, fp8 or
/// NVFP4), scores and softmax scratch, and once Q, the slot ids of both lists, the
/// statistics of every partial and the cos/sin row, with 1 KiB for alignment. A team's
/// running O^T is 64 accumulator registers a thread at 16 heads: 32 heads are one team.
fn two_teams_fit(key: &CompileKey) -> bool {
    let Schedule::Streamed { ctas, cta_heads } = key.schedule else {
        return false;
    };
    if key.target != Target::Sm90a || cta_heads != MIN_MMA_HEADS {
        return false;
    }
    let heads = key.mma_heads();
    let rows = TILE / 2;
    let team = rows * HEAD_DIM * 2 + rows * FP8_RECORD + 16 + rows * heads * 4 + rows * 4;
    let scratch = 4 * 2 * heads * 4;
    let shared = heads * HEAD_DIM * 2
        + (key.swa_width + key.extra_width) * 4
        + 2 * ctas * 2 * heads * 4
        + ROPE_DIM * 4;
    2 * (team + scratch) + shared + 1024 <= Target::Sm90a.max_smem_bytes() as usize
}

/// This cluster's heads among the layer's: group `z` of the grid takes heads `32 z ..`.
#[derive(Clone, Copy, Debug)]
pub struct HeadGroup {
    /// The first global head, when there is more than one group.
    first: Option<dsl_core::trace::Val<u32>>,
}

impl HeadGroup {
    /// The group of this CTA (`%ctaid.z`) when the plan has several, else the only one.
    #[track_caller]
    pub fn of_this_cta(plan: &Plan) -> Self {
        HeadGroup {
            first: (plan.head_groups > 1)
                .then(|| dsl_core::arch::thread::block_idx_z() * plan.group_heads),
        }
    }

    /// The global head index of local head `local`.
    #[track_caller]
    pub fn head(&self, local: dsl_core::trace::Val<u32>) -> dsl_core::trace::Val<u32> {
        match self.first {
            Some(first) => first + local,
            None => local,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap_ab_decode::{ExtraRecord, swap_ab_decode};

    /// S splits over K on sm_90a exactly where a split CTA's 128-row buffer holds 64 live
    /// rows: half tiles, or SWA tiles only; not where a compressed tile fills the buffer,
    /// nor in streamed CTAs, nor on sm_100a, whose S reads every row.
    #[test]
    fn scores_split_over_k_only_where_a_split_cta_holds_64_rows() {
        let split = |key: &str| Plan::new(&key.parse::<CompileKey>().unwrap()).scores_split_k();
        for key in [
            "h16_nk128_ne512_fp8_p64x64_split64_sm90a",
            "h32_nk128_ne512_fp8_p64x64_split64h16_sm90a",
            "h32_nk100_ne300_nvfp4_p64x64_split64_sm90a",
            "h16_nk64_ne0_fp8_p64x64_sm90a",
        ] {
            assert!(split(key), "{key}");
        }
        for key in [
            "h16_nk128_ne512_fp8_p64x64_sm90a",
            "h16_nk0_ne512_fp8_p64x64_sm90a",
            "h16_nk128_ne512_fp8_p64x64_stream_sm90a",
            "h32_nk128_ne512_nvfp4_p64x64_streamh32_sm90a",
            "h16_nk128_ne512_fp8_p64x64_split64_sm100a",
        ] {
            assert!(!split(key), "{key}");
        }
    }

    /// Where the plan gives a CTA two teams, their buffers fit: the estimate in
    /// `two_teams_fit` never lets a key trace past the shared memory a CTA may take, and
    /// it gives one team only where the slot ids leave too little room.
    #[test]
    fn two_teams_only_where_their_buffers_fit() {
        let key = |extra_record, extra_width, ctas| CompileKey {
            heads: 16,
            swa_width: 128,
            extra_width,
            extra_record,
            swa_page: 64,
            extra_page: 64,
            target: Target::Sm90a,
            schedule: Schedule::streamed(ctas),
        };
        let mut teams_seen = Vec::new();
        for record in [ExtraRecord::Fp8, ExtraRecord::Nvfp4] {
            for extra_width in [0, 300, 512, 1024, 1536, 1600, 2048] {
                for ctas in [1, 4] {
                    let key = key(record, extra_width, ctas);
                    if key.validate().is_err() {
                        continue;
                    }
                    let plan = Plan::new(&key);
                    let kernel = swap_ab_decode(key.target, &key).unwrap_or_else(|e| panic!("{e}"));
                    assert!(kernel.smem_bytes <= Target::Sm90a.max_smem_bytes(), "{key}");
                    teams_seen.push((record, extra_width, plan.teams));
                }
            }
        }
        for record in [ExtraRecord::Fp8, ExtraRecord::Nvfp4] {
            assert!(teams_seen.contains(&(record, 1024, 2)), "{teams_seen:?}");
            assert!(teams_seen.contains(&(record, 2048, 1)), "{teams_seen:?}");
        }
        let sm100 = CompileKey {
            target: Target::Sm100a,
            ..key(ExtraRecord::Fp8, 512, 1)
        };
        assert_eq!(Plan::new(&sm100).teams, 1);
    }
}
