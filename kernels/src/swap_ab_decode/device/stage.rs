//! The streamed schedule's stage of raw records: each row of a tile whole in shared memory,
//! brought by one bulk copy (`cp.async.bulk`) a row and completing on an mbarrier, one
//! phase a tile. The dequant reads it where the register path would have its loads.

use dsl_core::arch::copy::bulk_load;
use dsl_core::arch::mbarrier::{Mbarrier, init_fence};
use dsl_core::arch::memory::{LoadOpts, load_vec_if};
use dsl_core::layout::IntTuple;
use dsl_core::trace::{Pred, SmemTile, Val, smem_alloc, smem_bytes_free, smem_tile};
use dsl_macros::device;

use super::inputs::{
    Gathered, KvList, RowMap, Slot, leaf, names_a_record, record_chunk, record_of, staged_slot_id,
};
use super::smem::plain;
use crate::swap_ab_decode::cache::CHUNK_BYTES;
use crate::swap_ab_decode::{FP8_RECORD, TILE};

/// The stage `[128, 528]` bytes (a tile of fp8 records) and its barrier.
pub struct RawRows {
    records: SmemTile,
    full: Mbarrier,
}

/// Lanes of each of warps 8-15 that issue a copy: 16 of them copy the tile's 128 rows.
const ISSUERS_PER_WARP: u32 = TILE as u32 / 8;

impl RawRows {
    /// The stage and its barrier (initialised by thread 0; a barrier must follow), or none
    /// if the shared memory left does not hold a whole tile (sm_100a, whose streamed
    /// partial has its own buffer).
    #[track_caller]
    pub fn allocate_if_it_fits(tid: Val<u32>) -> Option<RawRows> {
        // The records (16-byte aligned), then the 8-byte barrier, in 16-byte steps.
        let bytes = TILE as u32 * FP8_RECORD as u32 + 16;
        (smem_bytes_free(16) >= bytes).then(|| RawRows::allocate(tid))
    }

    #[device]
    fn allocate(tid: Val<u32>) -> RawRows {
        let words = FP8_RECORD as i64 / 4;
        let records = smem_tile("raw_records", plain(&[TILE as i64, words], 4));
        let full = Mbarrier::at(smem_alloc("raw_full", 8, 8).addr());
        if tid == 0 {
            full.init(TILE as u32);
            init_fence();
        }
        RawRows { records, full }
    }

    /// Lanes 0-15 of warps 8-15 (which issue no S MMA) copy the record of row
    /// `row0 + 16 (warp - 8) + lane`, or arrive with nothing to copy (an invalid slot): a
    /// warp issues its lanes' copies one at a time. Every thread must have read the
    /// stage's previous tile.
    #[device]
    pub fn issue(&self, list: &KvList, ids: &SmemTile, row0: Val<u32>, tid: Val<u32>) {
        let (warp, lane) = (tid >> 5, tid & 31u32);
        let row = (warp - 8u32) * ISSUERS_PER_WARP + lane;
        if (warp >= 8u32) & (lane < ISSUERS_PER_WARP) {
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

    /// This thread's chunks of its row, as `gather` would load them, from the stage: zeros
    /// where the slot is invalid (whose row no copy wrote).
    #[track_caller]
    pub fn gathered(&self, list: &KvList, map: &RowMap, slot: &Slot) -> Gathered {
        assert!(!list.is_fp4(), "the stage holds fp8 records only");
        let valid = names_a_record(list, slot.id);
        let row_chunks = list.row_bytes() / CHUNK_BYTES as u32;
        let kv_words = (0..row_chunks / map.per_row)
            .map(|k| self.chunk(map, valid, k as usize))
            .collect();
        let at = self.records.at(map.row, 4 * row_chunks);
        let scale_words = load_vec_if::<u32, 4, _>(at, valid, 0u32, LoadOpts::default()).to_vec();
        Gathered {
            valid,
            kv_words,
            scale_words,
        }
    }

    /// Chunk `k` of [`RawRows::gathered`]'s tile again, with the validity of its first read.
    #[track_caller]
    pub fn chunk_again(&self, map: &RowMap, first: &Gathered, k: usize) -> [Val<u32>; 4] {
        self.chunk(map, first.valid, k)
    }

    #[track_caller]
    fn chunk(&self, map: &RowMap, valid: Pred, k: usize) -> [Val<u32>; 4] {
        let chunk = map.part + map.per_row * k as u32;
        load_vec_if::<u32, 4, _>(
            self.records.at(map.row, 4 * chunk),
            valid,
            0u32,
            LoadOpts::default(),
        )
    }
}
