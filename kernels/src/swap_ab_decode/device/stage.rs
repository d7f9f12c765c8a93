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
use super::smem::plain;
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

impl RawRows {
    /// Team `team`'s stage and its barrier (initialised by the CTA's thread 0; a barrier
    /// must follow), or none if the shared memory left does not hold a whole tile
    /// (sm_100a, whose streamed partial has its own buffer).
    #[track_caller]
    pub fn allocate_if_it_fits(plan: &Plan, team: u32, tid: Val<u32>) -> Option<RawRows> {
        // The records (16-byte aligned), then the 8-byte barrier, in 16-byte steps.
        let bytes = plan.kv_rows * FP8_RECORD as u32 + 16;
        (smem_bytes_free(16) >= bytes).then(|| RawRows::allocate(plan.kv_rows, team, tid))
    }

    #[device]
    fn allocate(rows: u32, team: u32, tid: Val<u32>) -> RawRows {
        let words = FP8_RECORD as i64 / 4;
        let records = smem_tile(
            &buffer_name("raw_records", team),
            plain(&[i64::from(rows), words], 4),
        );
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
    }

    /// The lanes of the team's second half of warps (which issue no S MMA) copy a row each,
    /// 16 lanes a warp: lane l of the half's warp w the record of row `row0 + 16 w + l`, or
    /// they arrive with nothing to copy (an invalid slot); a warp issues its lanes' copies
    /// one at a time. Every thread of the team must have read the stage's previous tile.
    #[device]
    pub fn issue(&self, list: &KvList, ids: &SmemTile, row0: Val<u32>, team: &Team) {
        let (warp, lane) = (team.tid >> 5, team.tid & 31u32);
        let issuers = team.warps() / 2;
        let per_warp = self.rows / issuers;
        let row = (warp - issuers) * per_warp + lane;
        if (warp >= issuers) & (lane < per_warp) {
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
