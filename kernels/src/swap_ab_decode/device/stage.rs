//! The streamed schedule's stage of raw records: each row of a team's tile whole in shared
//! memory, brought by one bulk copy (`cp.async.bulk`) a row and completing on an mbarrier,
//! one phase a tile. The dequant reads it where the register path would have its loads.

use dsl_core::arch::copy::bulk_load;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{LoadOpts, load_vec_if};
use dsl_core::layout::IntTuple;
use dsl_core::trace::{SmemTile, Val, smem_alloc, smem_bytes_free, smem_tile};
use dsl_macros::device;

use super::inputs::{
    Gathered, KvList, RowMap, Slot, leaf, names_a_record, record_chunk, record_of, staged_slot_id,
};
use super::plan::Plan;
use super::smem::{plain, plain_from};
use super::team::{Team, buffer_name};
use crate::swap_ab_decode::FP8_RECORD;
use crate::swap_ab_decode::cache::CHUNK_BYTES;

/// A team's stage `[kv_rows, 528]` bytes (a tile of records, fp8 or NVFP4: 528 bytes hold
/// either) and its barrier.
pub struct RawRows {
    records: SmemTile,
    full: Mbarrier,
    rows: u32,
}

/// Every team's stage, one buffer: team t's rows from row `t kv_rows`. Its barriers lie
/// after it, so that once the tiles are done the whole buffer is free for other data (the
/// streamed cluster's merge inbox, `inbox.rs`).
pub struct Stages {
    pub all: SmemTile,
    pub teams: Vec<RawRows>,
}

impl Stages {
    /// The stages of the plan's teams and their barriers (initialised by the CTA's thread
    /// 0; a barrier must follow), or none if the shared memory left does not hold them
    /// (sm_100a, whose streamed partial has its own buffer; the 32-head CTA).
    #[device]
    pub fn allocate_if_they_fit(plan: &Plan, tid: Val<u32>) -> Option<Stages> {
        let rows = plan.kv_rows;
        let words = FP8_RECORD as i64 / 4;
        // The records (16-byte aligned), then an 8-byte barrier a team, in 16-byte steps.
        let bytes = plan.teams * (rows * FP8_RECORD as u32 + 16);
        if smem_bytes_free(16) < bytes {
            return None;
        }
        let all = smem_tile(
            "raw_records",
            plain(&[i64::from(plan.teams * rows), words], 4),
        );
        let teams = (0..plan.teams)
            .map(|team| {
                let first = team * rows * FP8_RECORD as u32;
                let records = all.view(plain_from(first, &[i64::from(rows), words], 4));
                let full = Mbarrier::at(smem_alloc(&buffer_name("raw_full", team), 8, 8).addr());
                if tid == 0 {
                    full.init(rows);
                    init_fence();
                }
                RawRows {
                    records,
                    full,
                    rows,
                }
            })
            .collect();
        Some(Stages { all, teams })
    }
}

/// What the lanes that issue a phase of the stage know of the phase before it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PhaseBefore {
    /// They waited for it: it was the tile they just dequantised.
    Waited,
    /// An empty phase (copies past the team's last tile, or of a first list with no tile
    /// for it) that no one waited for.
    Unseen,
}

/// A phase of the stage to issue, and what its issuers know of the phase before it.
#[derive(Clone, Copy)]
pub struct StagePhase {
    pub phase: Val<u32>,
    pub before: PhaseBefore,
}

impl RawRows {
    /// The stage's phase `phase`: the lanes of the team's second half of warps (which issue
    /// no S MMA) copy a row each, 16 lanes a warp: lane l of the half's warp w the record of
    /// row `row0 + 16 w + l`, or they arrive with nothing to copy (an invalid slot); a warp
    /// issues its lanes' copies one at a time. Every thread of the team must have read the
    /// stage's previous tile. Eight copies in each of the team's warps, the S warpgroup's
    /// between its MMAs' issue and wait, measured 1.3-2.2% slower on an H100
    /// (docs/performance.md).
    ///
    /// Where the issuing lanes have not waited for the phase before ([`PhaseBefore::Unseen`]),
    /// each first waits for it (a fresh barrier's phase -1 counts as complete): the team
    /// waits on every phase it reads, but not on its empty ones (the copies past its last
    /// tile, a first list with no tile for it), and an arrival made while the phase before
    /// is still open would count towards that phase.
    #[device]
    pub fn issue(
        &self,
        list: &KvList,
        ids: &SmemTile,
        row0: Val<u32>,
        StagePhase { phase, before }: StagePhase,
        team: &Team,
    ) {
        let (warp, lane) = (team.tid >> 5, team.tid & 31u32);
        let issuers = team.warps() / 2;
        let per_warp = self.rows / issuers;
        let row = (warp - issuers) * per_warp + lane;
        if (warp >= issuers) & (lane < per_warp) {
            if before == PhaseBefore::Unseen {
                self.wait((phase + 1u32) & 1u32);
            }
            let (valid, record) = record_of(list, staged_slot_id(list, ids, row0 + row));
            let bytes = list.record_bytes();
            self.full.arrive_expect_tx(valid.select(bytes, 0u32));
            if valid {
                let src = record.at(IntTuple::tuple([leaf(0u32), record_chunk(0u32)]));
                bulk_load(self.records.at(row, 0u32), src, bytes, self.full);
            }
        }
    }

    /// Waits for the tile whose phase parity is `parity`.
    #[device]
    pub fn wait(&self, parity: Val<u32>) {
        self.full.wait(parity);
    }

    /// This thread's row of the stage as `gather` would load it: its validity and its
    /// scales (zeros where the slot is invalid, whose row no copy wrote); the dequant reads
    /// each chunk of values with [`RawRows::chunk`] as it goes, so that no register holds
    /// them all.
    #[track_caller]
    pub fn gathered(&self, list: &KvList, map: &RowMap, slot: &Slot) -> Gathered {
        let valid = names_a_record(list, slot.id);
        let row_words = list.row_bytes() / 4;
        let scale_words = if list.is_fp4() {
            (0..list.row_bytes() / CHUNK_BYTES as u32 / map.per_row)
                .map(|k| {
                    let word = row_words + map.fp4_scale_word(k);
                    let [scales] = load_vec_if::<u32, 1, _>(
                        self.records.at(map.row, word),
                        valid,
                        0u32,
                        LoadOpts::default(),
                    );
                    scales
                })
                .collect()
        } else {
            let at = self.records.at(map.row, row_words);
            load_vec_if::<u32, 4, _>(at, valid, 0u32, LoadOpts::default()).to_vec()
        };
        Gathered {
            valid,
            kv_words: Vec::new(),
            scale_words,
        }
    }

    /// This thread's chunk `k` of values of [`RawRows::gathered`]'s row (zeros where the
    /// slot is invalid).
    #[track_caller]
    pub fn chunk(&self, map: &RowMap, tile: &Gathered, k: usize) -> [Val<u32>; 4] {
        let valid = tile.valid;
        let chunk = map.part + map.per_row * k as u32;
        load_vec_if::<u32, 4, _>(
            self.records.at(map.row, 4 * chunk),
            valid,
            0u32,
            LoadOpts::default(),
        )
    }
}
