//! The kernel's shared memory: named, aligned buffers with their layouts.

use dsl_core::arch::memory::{Smem, store_vec};
use dsl_core::layout::{ComposedLayout, Int, Layout, Swizzle};
use dsl_core::trace::{Index, SmemTile, Val, smem_tile, trace_error};

use super::plan::Plan;
use crate::swap_ab_decode::{HEAD_DIM, ROPE_DIM, THREADS, TILE};

/// Every shared buffer of the kernel.
pub struct Buffers {
    /// `[128, 512]` bf16 KV tile (K-major SW128).
    pub kv: SmemTile,
    /// The fp32 partial `[H, 512]`: over the KV tile's bytes when it is written after the
    /// CTA's last tile (split; streamed on sm_90a), its own buffer when each tile folds
    /// into it (streamed on sm_100a).
    pub partial: SmemTile,
    /// `[H, 512]` bf16 Q after RoPE (K-major SW128).
    pub q: SmemTile,
    /// `[2H, 128]` bf16 P hi | lo (MN-major); on sm_90a over the scores stand-in, in the
    /// buffer `scores_p`.
    pub p: SmemTile,
    /// One i32 per KV row: 1 where the row takes part.
    pub valid: SmemTile,
    /// `[4, H]` f32: per lane quadrant, each head's column max; then the column sums.
    pub red_max: SmemTile,
    pub red_sum: SmemTile,
    /// `[2C, H]` f32: row 2r holds CTA r's per-head max, row 2r + 1 its sum.
    pub stats: SmemTile,
    /// The 64 cos | sin values of the token's position.
    pub cos_sin: SmemTile,
}

/// An unswizzled row-major layout of `shape` elements of `elem_bytes` bytes.
pub(super) fn plain(shape: &[i64], elem_bytes: u32) -> ComposedLayout {
    let extents: Vec<Int> = shape.iter().map(|&e| Int::Static(e)).collect();
    let layout = Layout::row_major(&extents);
    ComposedLayout::new(Swizzle::NONE, 0, layout, elem_bytes)
        .expect("an unswizzled layout composes")
}

/// A plan's layout, or a trace error at the allocation that asked for it.
#[track_caller]
pub(super) fn checked(
    what: &str,
    layout: Result<ComposedLayout, dsl_core::layout::LayoutError>,
) -> ComposedLayout {
    match layout {
        Ok(layout) => layout,
        Err(e) => {
            trace_error(format!("{what} layout: {e}"));
            plain(&[1], 4)
        }
    }
}

impl Buffers {
    #[track_caller]
    pub fn allocate(plan: &Plan) -> Buffers {
        let heads = plan.heads as i64;
        let kv = smem_tile("kv", checked("KV", plan.kv_layout()));
        let q = smem_tile("q", checked("Q", plan.q_layout()));
        let p_layout = checked("P", plan.p_layout());
        // sm_90a: the scores stand-in takes P's bytes (`Plan::scores_layout`).
        let p = if plan.target() == dsl_core::Target::Sm90a {
            smem_tile("scores_p", checked("scores", plan.scores_layout())).view(p_layout)
        } else {
            smem_tile("p", p_layout)
        };
        let valid = smem_tile("valid", plain(&[TILE as i64], 4));
        let red_max = smem_tile("red_max", plain(&[4, heads], 4));
        let red_sum = smem_tile("red_sum", plain(&[4, heads], 4));
        let stats = smem_tile("stats", plain(&[2 * plan.cluster as i64, heads], 4));
        let cos_sin = smem_tile("cos_sin", plain(&[ROPE_DIM as i64], 4));
        let partial_layout = checked("partial", plan.partial_layout());
        // sm_90a keeps the streamed running O^T in registers and writes it after the last
        // tile, when the KV tile's bytes are free.
        let partial = if plan.streamed() && plan.target() == dsl_core::Target::Sm100a {
            smem_tile("partial", partial_layout)
        } else {
            kv.view(partial_layout)
        };
        Buffers {
            kv,
            partial,
            q,
            p,
            valid,
            red_max,
            red_sum,
            stats,
            cos_sin,
        }
    }

    /// Statistic `which` (0: max, 1: sum) of cluster CTA `rank`, per head.
    #[track_caller]
    pub fn stat(&self, rank: impl Index, which: u32, head: impl Index) -> Smem {
        match rank.int() {
            dsl_core::layout::Int::Static(r) => self.stats.at(2 * r + which as i64, head),
            dsl_core::layout::Int::Dynamic(r) => self.stats.at(r * 2 + which, head),
        }
    }

    /// Stores zeros over the whole partial.
    #[track_caller]
    pub fn zero_partial(&self, plan: &Plan, tid: Val<u32>) {
        let zero = Val::<u32>::constant(0);
        let dims = HEAD_DIM as u32;
        let pieces = plan.heads * dims / 4;
        for z in 0..pieces / THREADS as u32 {
            let first = (tid + z * THREADS as u32) * 4;
            store_vec(self.partial.at(first / dims, first % dims), [zero; 4]);
        }
    }
}
