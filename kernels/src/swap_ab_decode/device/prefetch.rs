//! The streamed schedule's stage 1 in three steps, so that a persistent CTA takes its next
//! token's inputs while it merges the current one: [`TokenLoads::issue`] (every global read
//! that waits on nothing: the position, Q, the lists' lengths and slot ids), then
//! [`TokenLoads::stage_ids`] (the slot ids into shared memory, masked by the lengths, and
//! the cos/sin reads, which wait on the position), then [`TokenInputs::store`] (Q after
//! RoPE and the cos/sin row into shared memory, once the merge no longer reads them).

use dsl_core::trace::{SmemTile, Val};
use dsl_macros::{Carry, device};

use super::inputs::{
    KvList, QueryWords, Rope, load_limit, load_position, load_query, load_rope, load_slot_ids,
    store_cos_sin, store_query, store_slot_ids,
};
use super::kernel::Ctx;
use super::smem::Buffers;

/// A list with tiles in the key, its slot ids' shared buffer `[width]` and the tiles of the
/// token before its first (the SWA list's, for the compressed one).
pub(super) struct StagedList<'a> {
    pub list: &'a KvList,
    pub ids: SmemTile,
    pub tiles_before: u32,
}

/// A token's stage-1 reads in flight.
pub(super) struct TokenLoads {
    token: Val<u32>,
    position: Val<i64>,
    q: QueryWords,
    limits: Vec<Val<i32>>,
    ids: Vec<Vec<Val<i32>>>,
}

/// What stage 1 still stores of a token once its slot ids are staged: Q and the cos/sin
/// row, and the lists' limits (min(length, width)) its streams take.
#[derive(Clone, Carry)]
pub(super) struct TokenInputs {
    q: QueryWords,
    rope: Rope,
    pub limits: Vec<Val<i32>>,
}

impl TokenLoads {
    /// Issues `token`'s reads; nothing here waits for one.
    #[device]
    pub fn issue(ctx: &Ctx<'_>, lists: &[StagedList<'_>], token: Val<u32>) -> TokenLoads {
        let query = ctx.for_token(token).query;
        TokenLoads {
            token,
            position: load_position(&query),
            q: load_query(ctx.plan, &query, ctx.tid),
            limits: lists.iter().map(|l| load_limit(l.list, token)).collect(),
            ids: lists
                .iter()
                .map(|l| load_slot_ids(l.list, token, ctx.tid))
                .collect(),
        }
    }

    /// The slot ids into their shared buffers (a barrier must follow before anyone reads
    /// them) and the cos/sin reads issued.
    #[device]
    pub fn stage_ids(self, ctx: &Ctx<'_>, lists: &[StagedList<'_>]) -> TokenInputs {
        for ((list, loaded), &limit) in lists.iter().zip(&self.ids).zip(&self.limits) {
            store_slot_ids(list.list, loaded, limit, &list.ids, ctx.tid);
        }
        let query = ctx.for_token(self.token).query;
        TokenInputs {
            rope: load_rope(&query, &self.q, self.position, ctx.tid),
            q: self.q,
            limits: self.limits,
        }
    }
}

impl TokenInputs {
    /// Q RoPE -> bf16 -> shared `[16, 512]`, and the cos/sin row for the epilogue.
    #[device]
    pub fn store(&self, buf: &Buffers) {
        store_query(buf, &self.q, &self.rope);
        store_cos_sin(buf, &self.rope);
    }
}
