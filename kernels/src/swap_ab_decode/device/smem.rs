//! The kernel's shared memory: named, aligned buffers with their layouts.

use dsl_core::arch::memory::{Smem, store_vec};
use dsl_core::layout::{ComposedLayout, Int, Layout, Swizzle};
use dsl_core::trace::{Index, SmemTile, Val, smem_tile, trace_error};

use super::plan::Plan;
use super::team::{Team, buffer_name};
use crate::swap_ab_decode::{HEAD_DIM, ROPE_DIM};

/// The shared buffers one team of warps sees: its own (the KV tile, P and the scores, the
/// valid flags, the softmax scratch) and the CTA's (Q, the statistics, cos/sin). With two
/// teams ([`Plan::teams`]) [`Buffers::allocate`] gives one of these a team, the CTA's
/// buffers the same in both.
pub struct Buffers {
    /// `[kv_rows, 512]` bf16 KV tile (K-major SW128).
    pub kv: SmemTile,
    /// `[H, 512]` bf16 Q after RoPE (K-major SW128).
    pub q: SmemTile,
    /// P hi and lo, bf16 (MN-major, [`Plan::p_layout`]); on sm_90a over the scores
    /// stand-in, in the buffer `scores_p`.
    pub p: SmemTile,
    /// One i32 per KV row: 1 where the row takes part.
    pub valid: SmemTile,
    /// `[quadrants, H]` f32: per lane quadrant, each head's column max; then the column
    /// sums.
    pub red_max: SmemTile,
    pub red_sum: SmemTile,
    /// `[2 partials, H]` f32: row 2p holds partial p's per-head max, row 2p + 1 its sum
    /// ([`Plan::partials`]).
    pub stats: SmemTile,
    /// The 64 cos | sin values of the token's position.
    pub cos_sin: SmemTile,
    /// Rows of the KV tile ([`Plan::kv_rows`]).
    pub rows: u32,
    /// This team's index: its entry of `stats` while it streams.
    pub team: u32,
    /// Every team's fp32 partial `[H, 512]`, by team: over the team's KV tile's bytes when
    /// it is written after the team's last tile (split; streamed on sm_90a), its own buffer
    /// when each tile folds into it (streamed on sm_100a).
    pub partials: Vec<SmemTile>,
}

/// An unswizzled row-major layout of `shape` elements of `elem_bytes` bytes.
pub(super) fn plain(shape: &[i64], elem_bytes: u32) -> ComposedLayout {
    plain_from(0, shape, elem_bytes)
}

/// [`plain`] starting `first_byte` bytes into its buffer (a part of a buffer shared with
/// others).
pub(super) fn plain_from(first_byte: u32, shape: &[i64], elem_bytes: u32) -> ComposedLayout {
    let extents: Vec<Int> = shape.iter().map(|&e| Int::Static(e)).collect();
    let layout = Layout::row_major(&extents);
    ComposedLayout::new(Swizzle::NONE, i64::from(first_byte), layout, elem_bytes)
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
    /// The buffers of each of the plan's teams (one view a team), allocated team by team
    /// within each kind so that one team's map is the one-team kernel's.
    #[track_caller]
    pub fn allocate(plan: &Plan) -> Vec<Buffers> {
        let heads = plan.heads as i64;
        let rows = plan.kv_rows as i64;
        let teams: Vec<u32> = (0..plan.teams).collect();
        let name = buffer_name;
        let each = |make: &dyn Fn(u32) -> SmemTile| teams.iter().map(|&t| make(t)).collect();
        let kv: Vec<SmemTile> =
            each(&|t| smem_tile(&name("kv", t), checked("KV", plan.kv_layout())));
        let q = smem_tile("q", checked("Q", plan.q_layout()));
        let p_layout = checked("P", plan.p_layout());
        // sm_90a: the scores stand-in takes P's bytes (`Plan::scores_layout`).
        let p: Vec<SmemTile> = each(&|t| {
            if plan.target() == dsl_core::Target::Sm90a {
                smem_tile(
                    &name("scores_p", t),
                    checked("scores", plan.scores_layout()),
                )
                .view(p_layout.clone())
            } else {
                smem_tile(&name("p", t), p_layout.clone())
            }
        });
        let valid: Vec<SmemTile> = each(&|t| smem_tile(&name("valid", t), plain(&[rows], 4)));
        let quadrants = i64::from(plan.quadrants());
        let reductions: Vec<(SmemTile, SmemTile)> = teams
            .iter()
            .map(|&t| {
                (
                    smem_tile(&name("red_max", t), plain(&[quadrants, heads], 4)),
                    smem_tile(&name("red_sum", t), plain(&[quadrants, heads], 4)),
                )
            })
            .collect();
        let stats = smem_tile("stats", plain(&[2 * plan.partials() as i64, heads], 4));
        let cos_sin = smem_tile("cos_sin", plain(&[ROPE_DIM as i64], 4));
        let partial_layout = checked("partial", plan.partial_layout());
        // sm_90a keeps the streamed running O^T in registers and writes it after the last
        // tile, when the KV tile's bytes are free.
        let partials: Vec<SmemTile> = each(&|t| {
            if plan.streamed() && plan.target() == dsl_core::Target::Sm100a {
                smem_tile(&name("partial", t), partial_layout.clone())
            } else {
                kv[t as usize].view(partial_layout.clone())
            }
        });
        (0..teams.len())
            .map(|t| Buffers {
                kv: kv[t].clone(),
                q: q.clone(),
                p: p[t].clone(),
                valid: valid[t].clone(),
                red_max: reductions[t].0.clone(),
                red_sum: reductions[t].1.clone(),
                stats: stats.clone(),
                cos_sin: cos_sin.clone(),
                rows: plan.kv_rows,
                team: t as u32,
                partials: partials.clone(),
            })
            .collect()
    }

    /// Statistic `which` (0: max, 1: sum) of cluster CTA `rank`, per head.
    #[track_caller]
    pub fn stat(&self, rank: impl Index, which: u32, head: impl Index) -> Smem {
        match rank.int() {
            dsl_core::layout::Int::Static(r) => self.stats.at(2 * r + which as i64, head),
            dsl_core::layout::Int::Dynamic(r) => self.stats.at(r * 2 + which, head),
        }
    }

    /// This team's partial ([`Buffers::partials`]).
    pub fn partial(&self) -> &SmemTile {
        &self.partials[self.team as usize]
    }

    /// This team's running statistic `which` (0: max, 1: sum) of `head`, while it streams.
    #[track_caller]
    pub fn running_stat(&self, which: u32, head: impl Index) -> Smem {
        self.stat(self.team, which, head)
    }

    /// The team's threads store zeros over its whole partial.
    #[track_caller]
    pub fn zero_partial(&self, plan: &Plan, team: &Team) {
        let zero = Val::<u32>::constant(0);
        let dims = HEAD_DIM as u32;
        let pieces = plan.heads * dims / 4;
        for z in 0..pieces / team.threads {
            let first = (team.tid + z * team.threads) * 4;
            store_vec(self.partial().at(first / dims, first % dims), [zero; 4]);
        }
    }
}
