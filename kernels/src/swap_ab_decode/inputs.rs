//! Stages 1-2: every global load of the tile first, then Q RoPE and KV dequantisation into
//! shared memory.

use dsl_core::arch::cvt::{
    bf16x2_mul, bf16x2_to_f32x2, e2m1x2_to_bf16x2, e4m3_to_bf16x2_splat, e4m3x4_to_bf16x4_scaled,
    f32x2_to_bf16x2, ue8m0_to_bf16x2,
};
use dsl_core::arch::memory::{
    LoadOpts, load, load_vec, load_vec_if, store, store_vec, store_vec_if,
};
use dsl_core::layout::IntTuple;
use dsl_core::trace::{Index, Pred, Tensor, Val};
use dsl_macros::device;
use half::bf16;

use super::cache::{self, CHUNK_BYTES};
use super::plan::{HeadGroup, Plan};
use super::query::{self, CHUNK};
use super::smem::Buffers;
use super::{ExtraRecord, HEAD_DIM, ROPE_START, THREADS, TILE};

/// One of the two slot lists and its paged cache.
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
    fn is_fp4(&self) -> bool {
        self.record == ExtraRecord::Nvfp4
    }

    /// The packed values of a row: a byte a dim (fp8) or half a byte (NVFP4).
    fn row_bytes(&self) -> u32 {
        if self.is_fp4() {
            HEAD_DIM as u32 / 2
        } else {
            HEAD_DIM as u32
        }
    }

    fn record_bytes(&self) -> u32 {
        self.record.bytes() as u32
    }
}

/// The query side of one token.
pub struct QueryInputs {
    pub q: Tensor<bf16, 3>,
    pub positions: Tensor<i64, 1>,
    pub cos_sin: Tensor<f32, 2>,
    pub token: Val<u32>,
    pub heads: HeadGroup,
}

const NC: LoadOpts = LoadOpts { nc: true };

/// Byte 0 of 16-byte chunk `chunk` of a record (the record mode of [`cache::layout`]).
fn record_chunk(chunk: impl Index) -> IntTuple<Val<u32>> {
    IntTuple::tuple([leaf(0u32), leaf(chunk)])
}

fn leaf(v: impl Index) -> IntTuple<Val<u32>> {
    IntTuple::Leaf(v.int())
}

/// Loads the tile's `rows` slots of `list` starting at row `row0`, Q and cos/sin, then
/// writes Q (RoPEd) and the dequantised KV rows to shared memory, the valid flag of each
/// row and the cos|sin row. Invalid rows read nothing and are written as zeros. Returns
/// whether the tile has any row inside the list's length (the same in every thread).
#[device]
#[allow(clippy::too_many_arguments)]
pub fn stage_inputs(
    plan: &Plan,
    list: &KvList,
    query: &QueryInputs,
    buf: &Buffers,
    tid: Val<u32>,
    row0: Val<u32>,
    rows: u32,
) -> Pred {
    let threads = THREADS as u32;
    // Gather mapping: `per_row` threads share a row; lane % rows_per_warp is the row within
    // the warp and lane / rows_per_warp the part, which owns 16-byte chunks part, part +
    // per_row, ... so that one warp-wide load covers per_row * 16 contiguous bytes a row.
    let per_row = threads / rows;
    let rows_per_warp = 32 / per_row;
    let lane = tid & 31u32;
    let row = (tid >> 5) * rows_per_warp + lane % rows_per_warp;
    let part = lane / rows_per_warp;
    let token = query.token;

    // Slot ids first: they do not wait for the length (one dependent round trip less).
    let slot_pos = row0 + row;
    let id_addr = cache::slot_list_view(&list.idx).at((token, slot_pos));
    let [slot_id] = load_vec_if::<i32, 1, _>(id_addr, slot_pos < list.width, -1i32, NC);
    let length: Val<i32> = load(list.len.view([None]).at(token));
    let limit = length.min(list.width as i32);
    // Clamped to the table (SPEC, Inputs): an out-of-range position reads its nearest row,
    // never outside `cos_sin`.
    let position: Val<i64> = load::<i64, _>(query.positions.view([None]).at(token))
        .max(0i64)
        .min(query.cos_sin.extent(0) - 1i64);
    let live = row0.cast::<i32>() < limit;
    let in_range = slot_pos.cast::<i32>() < limit;

    // Q: 16-byte pieces of the chunk-interleaved row (query::layout): piece tid + 512 k is
    // dims 8 (tid % 2) .. + 8 of chunk tid / (2H) + k * 512 / (2H) of head (tid % 2H) / 2.
    // Only a thread's last piece can reach the RoPE dims (pieces are dealt out in order of d).
    let heads = plan.heads;
    let chunk16 = tid / (2 * heads);
    let head = (tid % (2 * heads)) / 2;
    let in_chunk = (tid % 2) * 8;
    let d0 = chunk16 * CHUNK as u32 + in_chunk;
    let global_head = query.heads.head(head);
    let chunks_per_round = threads / (2 * heads);
    let dim = IntTuple::tuple([leaf(in_chunk), leaf(chunk16)]);
    let q_mine = query::device_view(&query.q).domain_offset(IntTuple::tuple([
        leaf(token),
        leaf(global_head),
        dim,
    ]));
    let mut q_words = Vec::new();
    for k in 0..plan.q_pieces {
        let chunk = IntTuple::tuple([leaf(0u32), leaf(k * chunks_per_round)]);
        let at = q_mine.at(IntTuple::tuple([leaf(0u32), leaf(0u32), chunk]));
        // Heads past the live ones only pad the MMA: they read nothing and stay zero.
        let words = if plan.live_heads < heads {
            load_vec_if::<u32, 4, _>(at, head < plan.live_heads, 0u32, LoadOpts::default())
        } else {
            load_vec::<u32, 4, _>(at)
        };
        q_words.push(words);
    }
    let last_d = d0 + (plan.q_pieces - 1) * chunks_per_round * CHUNK as u32;

    // KV gather, predicated: invalid rows read nothing and keep zeros.
    let slots = list.cache.extent(0) * list.page as i64;
    let valid = in_range & (slot_id >= 0) & (slot_id.cast::<i64>() < slots);
    let page_shift = list.page.trailing_zeros();
    let block = (slot_id >> page_shift).bitcast::<u32>();
    let in_page = (slot_id & (list.page as i32 - 1)).bitcast::<u32>();
    let slot = IntTuple::tuple([leaf(in_page), leaf(block)]);
    let record = cache::device_view(&list.cache, list.page, list.record_bytes())
        .domain_offset(IntTuple::tuple([slot, record_chunk(0u32)]));
    let row_chunks = list.row_bytes() / CHUNK_BYTES as u32;
    let my_chunks = record.domain_offset(IntTuple::tuple([leaf(0u32), record_chunk(part)]));
    let mut kv_words = Vec::new();
    for k in 0..row_chunks / per_row {
        let at = my_chunks.at(IntTuple::tuple([leaf(0u32), record_chunk(per_row * k)]));
        kv_words.push(load_vec_if::<u32, 4, _>(at, valid, 0u32, NC));
    }
    let scales = |chunk: u32| {
        let at = record.at(IntTuple::tuple([
            leaf(0u32),
            record_chunk(row_chunks + chunk),
        ]));
        load_vec_if::<u32, 4, _>(at, valid, 0u32, NC)
    };
    let mut scale_words = scales(0).to_vec();
    if list.is_fp4() {
        scale_words.extend(scales(1));
    }

    // cos | sin at the query position (after the KV loads: the position may arrive later
    // than the slot ids). The whole row also goes to shared memory for the epilogue.
    let rope = last_d >= ROPE_START as u32;
    let pair0 = (last_d.max(ROPE_START as u32) - ROPE_START as u32) / 2;
    // The clamped position is below the table's rows, which the host keeps within 32 bits.
    let cs_row = query::cos_sin_device_view(&query.cos_sin)
        .domain_offset(IntTuple::tuple([leaf(position.cast::<u32>()), leaf(0u32)]));
    let pair = |half: u32| {
        cs_row.at(IntTuple::tuple([
            leaf(0u32),
            IntTuple::tuple([leaf(pair0), leaf(half)]),
        ]))
    };
    let cosines = load_vec_if::<f32, 4, _>(pair(0), rope, 1.0f32, NC);
    let sines = load_vec_if::<f32, 4, _>(pair(1), rope, 0.0f32, NC);
    let cs_piece = tid % 16;
    let cs_loader = tid < 16;
    let cs_at = cs_row.at(IntTuple::tuple([leaf(0u32), leaf(cs_piece * 4)]));
    let cs_words = load_vec_if::<u32, 4, _>(cs_at, cs_loader, 0u32, NC);

    // Q RoPE (fp32, GPT-J pairs) -> bf16 -> shared [H, 512].
    let q_store = buf.q.at(head, d0);
    for (k, words) in q_words.iter().enumerate() {
        let mut words = *words;
        if k + 1 == q_words.len() {
            for w in 0..4 {
                let (even, odd) = bf16x2_to_f32x2(words[w].bitcast());
                let (c, s) = (cosines[w], sines[w]);
                let rotated_even = even.fma(c, -(odd * s));
                let rotated_odd = odd.fma(c, even * s);
                let rotated = f32x2_to_bf16x2(rotated_even, rotated_odd).bitcast::<u32>();
                words[w] = rope.select(rotated, words[w]);
            }
        }
        let shift = buf
            .q
            .displacement(0, (k as u32 * chunks_per_round * CHUNK as u32) as i64);
        store_vec(q_store + shift, words);
    }

    // KV dequant -> shared [128, 512] bf16. Chunk k of this thread is chunk 0 moved by
    // per_row * k chunks along the row: a whole number of 64-dim k-blocks.
    for (k, words) in kv_words.iter().enumerate() {
        let dims_per_chunk = if list.is_fp4() { 32 } else { 16 };
        let shift_dims = (per_row * k as u32 * dims_per_chunk) as i64;
        if list.is_fp4() {
            // 16 bytes = dims [32 c, 32 c + 32); their e4m3 scales are bytes 2c, 2c + 1 of
            // the record's 32 scale bytes: word c / 2, bytes 2 (c % 2) and 2 (c % 2) + 1.
            let first_word = (per_row / 2) * k as u32;
            let mut scale_word = scale_words[first_word as usize];
            for extra in 1..per_row / 2 {
                let pick = (part / 2) == extra;
                scale_word = pick.select(scale_words[(first_word + extra) as usize], scale_word);
            }
            let shift = (part % 2) * 16;
            let low_scale = e4m3_to_bf16x2_splat((scale_word >> shift) & 0xffu32);
            let high_scale = e4m3_to_bf16x2_splat((scale_word >> (shift + 8)) & 0xffu32);
            for w in 0..4 {
                let scale = if w < 2 { low_scale } else { high_scale };
                let dims: [Val<u32>; 4] = std::array::from_fn(|byte| {
                    bf16x2_mul(e2m1x2_to_bf16x2(words[w], byte as u8), scale).bitcast()
                });
                let first = buf.kv.at(row, part * 32 + 8 * w as u32);
                store_vec(first + buf.kv.displacement(0, shift_dims), dims);
            }
        } else {
            // 16 bytes = dims [16 c, 16 c + 16), scaled by ue8m0 byte g = c / 2 of the
            // record's 16 scale bytes; g's static part is (per_row / 2) k, part / 2 adds
            // 0..per_row/2 inside the same word.
            let g0 = (per_row / 2) * k as u32;
            let e =
                (scale_words[(g0 / 4) as usize] >> (8 * (g0 % 4)) >> ((part / 2) * 8)) & 0xffu32;
            let scale = ue8m0_to_bf16x2(e);
            for half in 0..2 {
                let [a, b] = e4m3x4_to_bf16x4_scaled(words[2 * half], scale);
                let [c, d] = e4m3x4_to_bf16x4_scaled(words[2 * half + 1], scale);
                let dims = [a, b, c, d].map(|x| x.bitcast::<u32>());
                let first = buf.kv.at(row, part * 16 + 8 * half as u32);
                store_vec(first + buf.kv.displacement(0, shift_dims), dims);
            }
        }
    }
    store(buf.valid.at1(row), valid.select(1i32, 0i32));
    if rows < TILE as u32 {
        // The rows no slot fills never take part.
        store(buf.valid.at1(rows + tid % (TILE as u32 - rows)), 0i32);
    }
    store_vec_if(buf.cos_sin.at1(cs_piece * 4), cs_words, cs_loader);
    live
}

/// Zeros rows `rows..128` of the KV tile, which a 64-row SWA tile does not fill: the S MMA
/// reads all 128 rows (their scores are masked, but must not be uninitialised memory).
#[device]
pub fn zero_stale_rows(buf: &Buffers, tid: Val<u32>, rows: u32) {
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
