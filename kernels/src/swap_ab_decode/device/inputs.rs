//! Stages 1-2: every global load of the tile first, then Q RoPE and KV dequantisation into
//! shared memory.

use dsl_core::arch::cvt::{
    UE8M0_ONE_MULTIPLY_MAX, bf16x2_to_f32x2, e2m1_block_scale, e2m1x8_scaled,
    e4m3x4_to_bf16x4_by_ue8m0, e4m3x4_to_bf16x4_scaled, f32x2_to_bf16x2, ue8m0_times_2_pow_120,
    ue8m0_to_bf16x2,
};
use dsl_core::arch::memory::{
    LoadOpts, load, load_vec, load_vec_if, store, store_if, store_vec, store_vec_if,
};
use dsl_core::arch::thread::ballot;
use dsl_core::layout::IntTuple;
use dsl_core::trace::{Bf16x2, Index, Pred, SmemTile, Tensor, Val, trace_error};
use dsl_macros::device;
use half::bf16;

use super::plan::{HeadGroup, Plan};
use super::smem::Buffers;
use super::team::Team;
use crate::swap_ab_decode::cache::{self, CHUNK_BYTES};
use crate::swap_ab_decode::query::{self, CHUNK};
use crate::swap_ab_decode::{ExtraRecord, HEAD_DIM, ROPE_START, THREADS, TILE};

/// One of the two slot lists and its paged cache.
#[derive(Clone, Copy)]
pub struct KvList {
    pub cache: Tensor<u8, 3>,
    pub idx: Tensor<i32, 2>,
    pub len: Tensor<i32, 1>,
    pub width: u32,
    pub page: u32,
    /// The record format (the SWA list is always fp8).
    pub record: ExtraRecord,
}

impl KvList {
    pub(super) fn is_fp4(&self) -> bool {
        self.record == ExtraRecord::Nvfp4
    }

    /// The packed values of a row: a byte a dim (fp8) or half a byte (NVFP4).
    pub(super) fn row_bytes(&self) -> u32 {
        if self.is_fp4() {
            HEAD_DIM as u32 / 2
        } else {
            HEAD_DIM as u32
        }
    }

    pub(super) fn record_bytes(&self) -> u32 {
        self.record.bytes() as u32
    }
}

/// The query side of one token.
#[derive(Clone, Copy)]
pub struct QueryInputs {
    pub q: Tensor<bf16, 3>,
    pub positions: Tensor<i64, 1>,
    pub cos_sin: Tensor<f32, 2>,
    pub token: Val<u32>,
    pub heads: HeadGroup,
}

const NC: LoadOpts = LoadOpts { nc: true };

/// Bytes in global memory seen through a layout (a record, a thread's chunks of it).
pub(super) type GlobalBytes = dsl_core::tensor::Tensor<u8, dsl_core::tensor::Global>;

/// Byte 0 of 16-byte chunk `chunk` of a record (the record mode of [`cache::layout`]).
pub(super) fn record_chunk(chunk: impl Index) -> IntTuple<Val<u32>> {
    IntTuple::tuple([leaf(0u32), leaf(chunk)])
}

pub(super) fn leaf(v: impl Index) -> IntTuple<Val<u32>> {
    IntTuple::Leaf(v.int())
}

/// How a tile's rows are gathered: `per_row` threads share a row; lane % rows_per_warp is
/// the row within the warp and lane / rows_per_warp the part, which owns 16-byte chunks
/// part, part + per_row, ... so that one warp-wide load covers per_row * 16 contiguous
/// bytes a row.
#[derive(Clone, Copy)]
pub struct RowMap {
    pub row: Val<u32>,
    pub(super) part: Val<u32>,
    pub(super) per_row: u32,
    rows: u32,
}

impl RowMap {
    /// The map of a tile of `rows` rows of `list` over `team`'s threads.
    #[device]
    pub fn new(team: &Team, rows: u32, list: &KvList) -> RowMap {
        let tid = team.tid;
        let per_row = team.threads / rows;
        let rows_per_warp = 32 / per_row;
        let lane = tid & 31u32;
        let index = lane / rows_per_warp;
        // A 16-byte store serves 8 lanes a wavefront: with 8 threads a row, 4 rows (an
        // aligned 4 of the 128-byte swizzle's chunk ^ row % 8) of two parts. Their bf16
        // chunks must lie in different aligned groups of 4 chunks, or the 4 rows of both
        // map onto the same 4 bank groups and every store of the dequantised tile takes two
        // wavefronts. An NVFP4 part's 32 dims are 4 chunks, so parts 2j and 2j + 1 already
        // do; an fp8 part's 16 dims are 2, so the fp8 lists pair parts p and p ^ 2 (index
        // bits 0 and 1 swapped). A warp-wide load still covers each row's bytes.
        let part = if per_row == 8 && !list.is_fp4() {
            (index & 4u32) | ((index & 1u32) << 1u32) | ((index >> 1u32) & 1u32)
        } else {
            index
        };
        RowMap {
            row: (tid >> 5) * rows_per_warp + lane % rows_per_warp,
            part,
            per_row,
            rows,
        }
    }

    /// The word, counted from a row's first scale byte, that holds the two e4m3 scales of
    /// this thread's NVFP4 chunk `k` of 32 values: chunk c = part + per_row k takes the
    /// row's scale bytes 2c and 2c + 1, both in word c / 2 (`per_row` even: no two threads'
    /// chunks share a word). One word a chunk, not all 32 scale bytes: registers.
    #[track_caller]
    pub fn fp4_scale_word(&self, k: u32) -> Val<u32> {
        if self.per_row % 2 != 0 {
            trace_error(format!(
                "{} threads a row split the NVFP4 scale words between threads",
                self.per_row
            ));
        }
        self.part / 2 + self.per_row / 2 * k
    }
}

/// This thread's slot of a tile: its id (-1 past the list's width) and position.
#[derive(Clone, dsl_macros::Carry)]
pub struct Slot {
    pub(super) id: Val<i32>,
    pos: Val<u32>,
}

/// Loads this thread's slot id of the tile starting at row `row0` of `list`.
#[device]
pub fn load_slot(list: &KvList, token: Val<u32>, map: &RowMap, row0: Val<u32>) -> Slot {
    let pos = row0 + map.row;
    let at = cache::slot_list_view(&list.idx).at((token, pos));
    let [id] = load_vec_if::<i32, 1, _>(at, pos < list.width, -1i32, NC);
    Slot { id, pos }
}

/// Streamed schedule, stage 1: this thread's share of the token's `list.width` slot ids
/// (-1 past the width), for [`store_slot_ids`]. They are loaded across the list's width, as
/// [`load_slot`] loads them, and masked by the limit as they are stored: loads predicated
/// on the limit would wait for the length's load first.
#[device]
pub fn load_slot_ids(list: &KvList, token: Val<u32>, tid: Val<u32>) -> Vec<Val<i32>> {
    let view = cache::slot_list_view(&list.idx);
    (0..list.width.div_ceil(THREADS as u32))
        .map(|k| {
            let pos = tid + k * THREADS as u32;
            let [id] = load_vec_if::<i32, 1, _>(view.at((token, pos)), pos < list.width, -1i32, NC);
            id
        })
        .collect()
}

/// Stores [`load_slot_ids`]'s ids into `ids` (`[width]` i32), -1 from row `limit`
/// ([`load_limit`]) on, so that each tile's gather waits on a shared-memory load rather than
/// a global one ahead of its record loads, and needs no limit of its own.
#[device]
pub fn store_slot_ids(
    list: &KvList,
    loaded: &[Val<i32>],
    limit: Val<i32>,
    ids: &SmemTile,
    tid: Val<u32>,
) {
    for (k, &id) in loaded.iter().enumerate() {
        let pos = tid + k as u32 * THREADS as u32;
        let live = pos.cast::<i32>() < limit;
        store_if(ids.at1(pos), live.select(id, -1i32), pos < list.width);
    }
}

/// [`load_slot`] from the ids [`store_slot_ids`] put in shared memory.
#[device]
pub fn load_staged_slot(list: &KvList, ids: &SmemTile, map: &RowMap, row0: Val<u32>) -> Slot {
    let pos = row0 + map.row;
    Slot {
        id: staged_slot_id(list, ids, pos),
        pos,
    }
}

/// The staged slot id of row `pos` of `list`: -1 past the list's width.
#[track_caller]
pub(super) fn staged_slot_id(list: &KvList, ids: &SmemTile, pos: Val<u32>) -> Val<i32> {
    let [id] =
        load_vec_if::<i32, 1, _>(ids.at1(pos), pos.lt(list.width), -1i32, LoadOpts::default());
    id
}

/// The rows of `list` that take part for this token: min(length, width).
#[device]
pub fn load_limit(list: &KvList, token: Val<u32>) -> Val<i32> {
    let length: Val<i32> = load(list.len.view([None]).at(token));
    length.min(list.width as i32)
}

/// The token's position, clamped to the table (SPEC, Inputs): an out-of-range position
/// reads its nearest row, never outside `cos_sin`.
#[device]
pub fn load_position(query: &QueryInputs) -> Val<i64> {
    load::<i64, _>(query.positions.view([None]).at(query.token))
        .max(0i64)
        .min(query.cos_sin.extent(0) - 1i64)
}

/// This thread's pieces of Q and where they go.
#[derive(Clone, dsl_macros::Carry)]
pub struct QueryWords {
    words: Vec<[Val<u32>; 4]>,
    head: Val<u32>,
    d0: Val<u32>,
    /// The first dim of the thread's last piece, the only one that can reach RoPE dims.
    last_d: Val<u32>,
    chunks_per_round: u32,
}

/// Q: 16-byte pieces of the chunk-interleaved row (query::layout): piece tid + 512 k is
/// dims 8 (tid % 2) .. + 8 of chunk tid / (2H) + k * 512 / (2H) of head (tid % 2H) / 2.
/// Only a thread's last piece can reach the RoPE dims (pieces are dealt out in order of d).
#[device]
pub fn load_query(plan: &Plan, query: &QueryInputs, tid: Val<u32>) -> QueryWords {
    let heads = plan.heads;
    let chunk16 = tid / (2 * heads);
    let head = (tid % (2 * heads)) / 2;
    let in_chunk = (tid % 2) * 8;
    let d0 = chunk16 * CHUNK as u32 + in_chunk;
    let global_head = query.heads.head(head);
    let chunks_per_round = THREADS as u32 / (2 * heads);
    let dim = IntTuple::tuple([leaf(in_chunk), leaf(chunk16)]);
    let q_mine = query::device_view(&query.q).domain_offset(IntTuple::tuple([
        leaf(query.token),
        leaf(global_head),
        dim,
    ]));
    let mut words = Vec::new();
    for k in 0..plan.q_pieces {
        let chunk = IntTuple::tuple([leaf(0u32), leaf(k * chunks_per_round)]);
        let at = q_mine.at(IntTuple::tuple([leaf(0u32), leaf(0u32), chunk]));
        // Heads past the live ones only pad the MMA: they read nothing and stay zero.
        let piece = if plan.live_heads < heads {
            load_vec_if::<u32, 4, _>(at, head < plan.live_heads, 0u32, LoadOpts::default())
        } else {
            load_vec::<u32, 4, _>(at)
        };
        words.push(piece);
    }
    let last_d = d0 + (plan.q_pieces - 1) * chunks_per_round * CHUNK as u32;
    QueryWords {
        words,
        head,
        d0,
        last_d,
        chunks_per_round,
    }
}

/// One tile's records in this thread's registers, predicated: invalid rows read nothing
/// and keep zeros. From the shared-memory stage (`stage.rs`) only the validity and the
/// scales: the dequant loads each chunk of values as it goes.
#[derive(Clone, dsl_macros::Carry)]
pub struct Gathered {
    pub(super) valid: Pred,
    pub(super) kv_words: Vec<[Val<u32>; 4]>,
    pub(super) scale_words: Vec<Val<u32>>,
}

/// This thread's 16-byte chunk `k` of values of its row (its `k`-th: part + per_row k).
pub type ChunkWords<'a> = &'a dyn Fn(usize) -> [Val<u32>; 4];

impl Gathered {
    /// Chunk `k` of the values this thread holds in registers.
    pub fn held(&self, k: usize) -> [Val<u32>; 4] {
        self.kv_words[k]
    }
}

/// Issues the loads of this thread's chunks of its slot's record; `limit` is the list's
/// [`load_limit`], or none where the slot ids past it are -1 already
/// ([`store_slot_ids`]).
#[device]
pub fn gather(list: &KvList, map: &RowMap, slot: &Slot, limit: Option<Val<i32>>) -> Gathered {
    let in_range = limit.map(|limit| slot.pos.cast::<i32>() < limit);
    let (listed_slot, record) = record_of(list, slot.id);
    let valid = match in_range {
        Some(in_range) => in_range & listed_slot,
        None => listed_slot,
    };
    let row_chunks = list.row_bytes() / CHUNK_BYTES as u32;
    let chunks = my_chunks(&record, map);
    let kv_words = (0..row_chunks / map.per_row)
        .map(|k| load_chunk(&chunks, map, valid, k as usize))
        .collect();
    let scale_words = if list.is_fp4() {
        (0..row_chunks / map.per_row)
            .map(|k| {
                let byte = map.fp4_scale_word(k) * 4;
                let at = record.at(IntTuple::tuple([
                    leaf(0u32),
                    IntTuple::tuple([leaf(byte % 16), leaf(row_chunks + byte / 16)]),
                ]));
                let [word] = load_vec_if::<u32, 1, _>(at, valid, 0u32, NC);
                word
            })
            .collect()
    } else {
        let at = record.at(IntTuple::tuple([leaf(0u32), record_chunk(row_chunks)]));
        load_vec_if::<u32, 4, _>(at, valid, 0u32, NC).to_vec()
    };
    Gathered {
        valid,
        kv_words,
        scale_words,
    }
}

/// This thread's chunks of `record`: 16-byte chunk `part + per_row k` is its chunk `k`.
#[track_caller]
fn my_chunks(record: &GlobalBytes, map: &RowMap) -> GlobalBytes {
    record.domain_offset(IntTuple::tuple([leaf(0u32), record_chunk(map.part)]))
}

/// Chunk `k` of [`my_chunks`].
#[track_caller]
fn load_chunk(chunks: &GlobalBytes, map: &RowMap, valid: Pred, k: usize) -> [Val<u32>; 4] {
    let at = chunks.at(IntTuple::tuple([
        leaf(0u32),
        record_chunk(map.per_row * k as u32),
    ]));
    load_vec_if::<u32, 4, _>(at, valid, 0u32, NC)
}

/// Chunk `k` of [`gather`]'s tile again, from global memory.
#[track_caller]
pub fn gather_chunk(list: &KvList, map: &RowMap, slot: &Slot, k: usize) -> [Val<u32>; 4] {
    let (valid, record) = record_of(list, slot.id);
    load_chunk(&my_chunks(&record, map), map, valid, k)
}

/// Whether `slot_id` names a record of `list`'s cache (not -1, not past its slots), and the
/// record's bytes.
#[device]
pub(super) fn record_of(list: &KvList, slot_id: Val<i32>) -> (Pred, GlobalBytes) {
    let valid = names_a_record(list, slot_id);
    let page_shift = list.page.trailing_zeros();
    let block = (slot_id >> page_shift).bitcast::<u32>();
    let in_page = (slot_id & (list.page as i32 - 1)).bitcast::<u32>();
    let at_slot = IntTuple::tuple([leaf(in_page), leaf(block)]);
    let record = cache::device_view(&list.cache, list.page, list.record_bytes())
        .domain_offset(IntTuple::tuple([at_slot, record_chunk(0u32)]));
    (valid, record)
}

/// Whether `slot_id` names a record of `list`'s cache: not -1, not past its slots.
#[device]
pub(super) fn names_a_record(list: &KvList, slot_id: Val<i32>) -> Pred {
    let slots = list.cache.extent(0) * list.page as i64;
    (slot_id >= 0) & (slot_id.cast::<i64>() < slots)
}

/// cos | sin at the query position for this thread's RoPE dims, and the whole row's
/// 16-byte pieces for shared memory.
#[derive(Clone, dsl_macros::Carry)]
pub struct Rope {
    applies: Pred,
    cosines: [Val<f32>; 4],
    sines: [Val<f32>; 4],
    piece: Val<u32>,
    loader: Pred,
    words: [Val<u32>; 4],
}

/// Loads the cos | sin values `query` needs (after the KV loads: the position may arrive
/// later than the slot ids).
#[device]
pub fn load_rope(query: &QueryInputs, q: &QueryWords, position: Val<i64>, tid: Val<u32>) -> Rope {
    let applies = q.last_d >= ROPE_START as u32;
    let pair0 = (q.last_d.max(ROPE_START as u32) - ROPE_START as u32) / 2;
    // The clamped position is below the table's rows, which the host keeps within 32 bits.
    let cs_row = query::cos_sin_device_view(&query.cos_sin)
        .domain_offset(IntTuple::tuple([leaf(position.cast::<u32>()), leaf(0u32)]));
    let pair = |half: u32| {
        cs_row.at(IntTuple::tuple([
            leaf(0u32),
            IntTuple::tuple([leaf(pair0), leaf(half)]),
        ]))
    };
    let cosines = load_vec_if::<f32, 4, _>(pair(0), applies, 1.0f32, NC);
    let sines = load_vec_if::<f32, 4, _>(pair(1), applies, 0.0f32, NC);
    let piece = tid % 16;
    let loader = tid < 16;
    let at = cs_row.at(IntTuple::tuple([leaf(0u32), leaf(piece * 4)]));
    let words = load_vec_if::<u32, 4, _>(at, loader, 0u32, NC);
    Rope {
        applies,
        cosines,
        sines,
        piece,
        loader,
        words,
    }
}

/// Q RoPE (fp32, GPT-J pairs) -> bf16 -> shared [H, 512].
#[device]
pub fn store_query(buf: &Buffers, q: &QueryWords, rope: &Rope) {
    let q_store = buf.q.at(q.head, q.d0);
    for (k, words) in q.words.iter().enumerate() {
        let mut words = *words;
        if k + 1 == q.words.len() {
            for w in 0..4 {
                let (even, odd) = bf16x2_to_f32x2(words[w].bitcast());
                let (c, s) = (rope.cosines[w], rope.sines[w]);
                let rotated_even = even.fma(c, -(odd * s));
                let rotated_odd = odd.fma(c, even * s);
                let rotated = f32x2_to_bf16x2(rotated_even, rotated_odd).bitcast::<u32>();
                words[w] = rope.applies.select(rotated, words[w]);
            }
        }
        let shift = buf
            .q
            .displacement(0, (k as u32 * q.chunks_per_round * CHUNK as u32) as i64);
        store_vec(q_store + shift, words);
    }
}

/// The cos | sin row to shared memory, for the epilogue's inverse RoPE.
#[device]
pub fn store_cos_sin(buf: &Buffers, rope: &Rope) {
    store_vec_if(buf.cos_sin.at1(rope.piece * 4), rope.words, rope.loader);
}

/// How [`store_tile`] scales fp8 records.
pub enum Fp8Dequant<'a> {
    /// Two multiplies a pair (2^120, then the scale): exact for every scale, in one straight
    /// block.
    TwoMultiplies,
    /// One multiply a pair, the scale times 2^120 as one bf16 ([`ue8m0_times_2_pow_120`]):
    /// exact up to a scale of 2^7. A cache writer that derives the scale from the amax never
    /// writes a larger one, but bf16 may still hold such values: a warp with one among its
    /// rows (or a NaN scale) stores its chunks again, with two multiplies a pair, from the
    /// records' chunks `reload` loads again (one a call, the scales kept from the first
    /// pass). That pass comes after the common one and reloads rather than keeping the
    /// records, so that no register is held across the common path: at the streamed
    /// schedule's 128-register cap, branching around the whole dequant or keeping the codes
    /// for the second pass spilled 80-124 bytes, and reloading every chunk at once (from
    /// the shared-memory stage) 20-84.
    OneMultiply { reload: ChunkWords<'a> },
}

/// KV dequant -> shared [kv_rows, 512] bf16, and each row's valid flag. Chunk k of this
/// thread is chunk 0 moved by per_row * k chunks along the row: a whole number of 64-dim
/// k-blocks.
#[device]
pub fn store_tile(
    buf: &Buffers,
    list: &KvList,
    map: &RowMap,
    tile: &Gathered,
    words: ChunkWords<'_>,
    team: &Team,
    fp8: Fp8Dequant<'_>,
) {
    let chunks = (list.row_bytes() / CHUNK_BYTES as u32 / map.per_row) as usize;
    if list.is_fp4() {
        store_fp4_chunks(buf, map, tile, chunks, words);
    } else {
        store_fp8_chunks(buf, map, tile, chunks, words, &fp8);
    }
    store(buf.valid.at1(map.row), tile.valid.select(1i32, 0i32));
    if map.rows < buf.rows {
        // The rows no slot fills never take part: one thread clears each, as two threads
        // storing the same word with nothing ordering them race.
        let unfilled = buf.rows - map.rows;
        store_if(
            buf.valid.at1(map.rows + team.tid),
            0i32,
            team.tid < unfilled,
        );
    }
}

/// How far this thread's chunk `k` lies from its chunk 0 in the tile: per_row * k chunks of
/// `dims_per_chunk` dims along the row.
fn chunk_shift(buf: &Buffers, map: &RowMap, k: usize, dims_per_chunk: u32) -> i64 {
    buf.kv
        .displacement(0, (map.per_row * k as u32 * dims_per_chunk) as i64)
}

/// NVFP4: 16 bytes = dims [32 c, 32 c + 32); their e4m3 scales are bytes 2 (c % 2) and
/// 2 (c % 2) + 1 of the chunk's scale word (c % 2 = part % 2: per_row is even).
#[device]
fn store_fp4_chunks(
    buf: &Buffers,
    map: &RowMap,
    tile: &Gathered,
    chunks: usize,
    chunk: ChunkWords<'_>,
) {
    let (row, part) = (map.row, map.part);
    let first_scale = (part % 2) * 2;
    for k in 0..chunks {
        let words = chunk(k);
        let scale_word = tile.scale_words[k];
        let scales = [first_scale, first_scale + 1u32].map(|b| e2m1_block_scale(scale_word, b));
        for w in 0..4 {
            // Words 0-1 are dims [32 c, 32 c + 16), words 2-3 the next 16.
            let dims = e2m1x8_scaled(words[w], scales[w / 2]).map(|pair| pair.bitcast::<u32>());
            let first = buf.kv.at(row, part * 32 + 8 * w as u32);
            store_vec(first + chunk_shift(buf, map, k, 32), dims);
        }
    }
}

/// fp8: 16 bytes = dims [16 c, 16 c + 16), scaled by their ue8m0 byte as `dequant` says.
#[device]
fn store_fp8_chunks(
    buf: &Buffers,
    map: &RowMap,
    tile: &Gathered,
    chunks: usize,
    chunk: ChunkWords<'_>,
    dequant: &Fp8Dequant<'_>,
) {
    let two_multiplies = |words: ChunkWords<'_>| {
        for k in 0..chunks {
            let scale = ue8m0_to_bf16x2(fp8_scale_exponent(map, tile, k));
            store_fp8_chunk(buf, map, k, words(k), |w| e4m3x4_to_bf16x4_scaled(w, scale));
        }
    };
    match dequant {
        Fp8Dequant::TwoMultiplies => two_multiplies(chunk),
        Fp8Dequant::OneMultiply { reload } => {
            let exponent = |k| fp8_scale_exponent(map, tile, k);
            let widest = (1..chunks).fold(exponent(0), |widest, k| widest.max(exponent(k)));
            let wide_warp = ballot(widest > UE8M0_ONE_MULTIPLY_MAX) != 0u32;
            for k in 0..chunks {
                let factor = ue8m0_times_2_pow_120(exponent(k));
                let words = chunk(k);
                store_fp8_chunk(buf, map, k, words, |w| e4m3x4_to_bf16x4_by_ue8m0(w, factor));
            }
            if wide_warp {
                two_multiplies(reload);
            }
        }
    }
}

/// The ue8m0 byte of this thread's chunk `k`: byte g = c / 2 of the record's 16 scale bytes,
/// whose static part is (per_row / 2) k; part / 2 adds 0..per_row/2 inside the same word.
fn fp8_scale_exponent(map: &RowMap, tile: &Gathered, k: usize) -> Val<u32> {
    let g0 = (map.per_row / 2) * k as u32;
    let word = tile.scale_words[(g0 / 4) as usize];
    (word >> (8 * (g0 % 4)) >> ((map.part / 2) * 8)) & 0xffu32
}

/// Chunk `k` of this thread, each word of four e4m3 bytes dequantised by `dequant`.
fn store_fp8_chunk(
    buf: &Buffers,
    map: &RowMap,
    k: usize,
    words: [Val<u32>; 4],
    dequant: impl Fn(Val<u32>) -> [Val<Bf16x2>; 2],
) {
    for half in 0..2 {
        let [a, b] = dequant(words[2 * half]);
        let [c, d] = dequant(words[2 * half + 1]);
        let dims = [a, b, c, d].map(|x| x.bitcast::<u32>());
        let first = buf.kv.at(map.row, map.part * 16 + 8 * half as u32);
        store_vec(first + chunk_shift(buf, map, k, 16), dims);
    }
}

/// Split schedule: loads the tile's `rows` slots of `list` starting at row `row0`, Q and
/// cos/sin, then writes Q (RoPEd) and the dequantised KV rows to shared memory, the valid
/// flag of each row and the cos|sin row. Returns whether the tile has any row inside the
/// list's length (the same in every thread).
#[device]
pub fn stage_inputs(
    plan: &Plan,
    list: &KvList,
    query: &QueryInputs,
    buf: &Buffers,
    team: &Team,
    row0: Val<u32>,
    rows: u32,
) -> Pred {
    let tid = team.tid;
    let map = RowMap::new(team, rows, list);
    // Slot ids first: they do not wait for the length (one dependent round trip less).
    let slot = load_slot(list, query.token, &map, row0);
    let limit = load_limit(list, query.token);
    let position = load_position(query);
    let live = row0.cast::<i32>() < limit;
    let q = load_query(plan, query, tid);
    let tile = gather(list, &map, &slot, Some(limit));
    let rope = load_rope(query, &q, position, tid);
    store_query(buf, &q, &rope);
    // One multiply a pair measured 0.99-1.02x here on the H200, slower in most shapes (this
    // kernel's time is not in its one tile's dequant); the streamed schedule takes it.
    let words = |k| tile.held(k);
    store_tile(
        buf,
        list,
        &map,
        &tile,
        &words,
        team,
        Fp8Dequant::TwoMultiplies,
    );
    store_cos_sin(buf, &rope);
    live
}

/// Zeros rows `rows..128` of the KV tile, which a 64-row tile does not fill: the S MMA
/// reads all 128 rows (their scores are masked, but must not be uninitialised memory),
/// unless it splits K over the first 64 ([`Plan::scores_split_k`]). Nothing to do for a
/// full tile.
#[device]
pub fn zero_stale_rows(plan: &Plan, buf: &Buffers, tid: Val<u32>, rows: u32) {
    if rows == TILE as u32 || plan.scores_split_k() {
        return;
    }
    let threads = THREADS as u32;
    let chunks_per_row = HEAD_DIM as u32 * 2 / 16;
    let stale_chunks = (TILE as u32 - rows) * chunks_per_row;
    let zero = Val::<u32>::constant(0);
    for k in 0..stale_chunks / threads {
        let chunk = tid + threads * k;
        let row = rows + chunk / chunks_per_row;
        let dim = (chunk % chunks_per_row) * 8;
        store_vec(buf.kv.at(row, dim), [zero; 4]);
    }
}
