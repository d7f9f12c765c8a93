//! Stages 8-9: pull every peer's partial of this CTA's output units over distributed shared
//! memory, merge with the sink, undo RoPE, cast to MXFP8 and store in the o-fused layout.

use dsl_core::arch::cluster::cluster_arrive_relaxed;
use dsl_core::arch::cvt::{f32x4_to_e4m3x4, ue8m0_round_up};
use dsl_core::arch::memory::{load, load_vec, store_if, store_u8, store_vec_if};
use dsl_core::arch::thread::shfl_xor;
use dsl_core::layout::IntTuple;
use dsl_core::trace::{E4m3, Index, Pred, Tensor, Val};
use dsl_macros::device;

use super::plan::{HeadGroup, MERGE_SLOTS, Plan, THREADS_PER_UNIT};
use super::smem::Buffers;
use crate::formats::{e4m3, mxfp8};
use crate::swap_ab_decode::output::{self, SCALE_WORD_BYTES};
use crate::swap_ab_decode::{LOG2E, ROPE_DIM, ROPE_START, THREADS, WV_GROUP_SIZE};

/// Dims of an output unit: one MXFP8 block of a head.
pub(super) const UNIT_DIMS: u32 = mxfp8::BLOCK as u32;

/// Values of a 32-dim unit each of its threads merges and stores.
pub(super) const VALUES_PER_THREAD: u32 = UNIT_DIMS / THREADS_PER_UNIT;

fn leaf(v: impl Index) -> IntTuple<Val<u32>> {
    IntTuple::Leaf(v.int())
}

/// The first output unit CTA `rank` owns.
pub(super) fn first_unit(plan: &Plan, rank: Val<u32>) -> Val<u32> {
    rank * plan.units_per_cta
}

/// The output units CTA `rank` owns: the first, and how many (the last CTA may own fewer
/// than the others).
pub(super) fn owned_units(plan: &Plan, rank: Val<u32>) -> (Val<u32>, Val<u32>) {
    let first = first_unit(plan, rank);
    (first, (plan.units - first).min(plan.units_per_cta))
}

/// Units a head has: its 32-dim chunks.
pub(super) const CHUNKS: u32 = output::CHUNKS_PER_HEAD as u32;

/// The first chunk inverse RoPE rotates (dims >= 448).
const ROPE_CHUNK: u32 = ROPE_START as u32 / UNIT_DIMS;

/// Where the slice `slice` of chunk `chunk` of head `head` starts in a partial: its head
/// and first dim.
pub(super) fn cell(head: Val<u32>, chunk: Val<u32>, slice: Val<u32>) -> (Val<u32>, Val<u32>) {
    (head, chunk * UNIT_DIMS + slice * VALUES_PER_THREAD)
}

/// A thread's output unit in one merge pass.
#[derive(Clone, Copy)]
pub(super) struct UnitSlot {
    /// Its index among this CTA's units; at or past their count the slot is idle.
    pub index: Val<u32>,
    /// `head * 16 + chunk`.
    pub unit: Val<u32>,
    /// The head in the key's group, and its 32-dim chunk.
    pub head: Val<u32>,
    pub chunk: Val<u32>,
}

/// Where every thread keeps one head through all the merge passes: the chunks of its head
/// a pass takes. That holds where a CTA's units are whole heads filling every slot of
/// every pass (a CTA that owns all 256 units of 16 heads: 4 passes, the 8 threads of a
/// slot taking 4 of the 16 chunks of their warp's head each pass). Then the head's
/// weights, its sink and its place in the output are a thread's once, not once a pass,
/// and most passes know at trace time that no chunk of theirs is rotated: the two-team
/// streamed CTA's merge, which nothing overlaps, issued 603 instructions a warp a token
/// instead of 855 (ptxas 13.5). Only where a head has several partials to weigh: with one
/// (the 32-head streamed CTA, sm_100a's streamed CTAs) a pass's weights are one max and one
/// sum, and in the 32-head CTA the head's values, which ptxas then holds across the token's
/// tiles, took it past the 128-register cap (8 bytes spilled, 0.7% slower on an H100).
/// None: the slots take the CTA's units in order.
pub(super) fn chunks_a_pass(plan: &Plan) -> Option<u32> {
    let fills = plan.units_per_cta == MERGE_SLOTS * plan.merge_passes
        && plan.units % plan.units_per_cta == 0
        && CHUNKS % plan.merge_passes == 0;
    (fills && plan.partials() > 1).then(|| CHUNKS / plan.merge_passes)
}

/// Whether a thread merges one head in every pass ([`chunks_a_pass`], or a single pass).
pub(super) fn one_head_a_thread(plan: &Plan) -> bool {
    plan.merge_passes == 1 || chunks_a_pass(plan).is_some()
}

/// A thread's unit in merge pass `pass` ([`chunks_a_pass`]: one head through the passes;
/// otherwise slot `tid / 8` of pass `pass` takes the CTA's unit `slot + 64 pass`, the idle
/// slots past the CTA's units its last one).
pub(super) fn unit_of(plan: &Plan, pass: u32, tid: Val<u32>, rank: Val<u32>) -> UnitSlot {
    let slot = tid / THREADS_PER_UNIT;
    let index = slot + pass * MERGE_SLOTS;
    match chunks_a_pass(plan) {
        Some(per_pass) => {
            let first_head = rank * (plan.units_per_cta / CHUNKS);
            let head = first_head + slot / per_pass;
            let chunk = slot % per_pass + pass * per_pass;
            UnitSlot {
                index,
                unit: head * CHUNKS + chunk,
                head,
                chunk,
            }
        }
        None => {
            let (first, count) = owned_units(plan, rank);
            let unit = first + index.min(count - 1);
            UnitSlot {
                index,
                unit,
                head: unit / CHUNKS,
                chunk: unit % CHUNKS,
            }
        }
    }
}

/// Stage 8: per merge pass, the 4 fp32 values of this thread's slice of its unit from every
/// partial ([`Plan::partials`]: each team's of every peer), in partial order.
#[device]
pub fn pull_partials(
    plan: &Plan,
    buf: &Buffers,
    tid: Val<u32>,
    rank: Val<u32>,
) -> Vec<Vec<[Val<f32>; 4]>> {
    let slice = tid % THREADS_PER_UNIT;
    let mut pulls = Vec::new();
    for pass in 0..plan.merge_passes {
        let unit = unit_of(plan, pass, tid, rank);
        let (head, dim) = cell(unit.head, unit.chunk, slice);
        let locals: Vec<_> = buf.partials.iter().map(|p| p.at(head, dim)).collect();
        let mut parts = Vec::new();
        for part in 0..plan.partials() {
            let local = locals[(part % plan.teams) as usize];
            // A cluster of one reads its own partials without the DSMEM window.
            parts.push(if plan.cluster == 1 {
                load_vec::<f32, 4, _>(local)
            } else {
                load_vec::<f32, 4, _>(local.in_cta(part / plan.teams))
            });
        }
        pulls.push(parts);
    }
    pulls
}

/// Stage 8: every peer's statistics into this CTA's copy of the table.
#[device]
pub fn gather_stats(plan: &Plan, buf: &Buffers, tid: Val<u32>, rank: Val<u32>) {
    let entries = plan.stats_len();
    let per_cta = 2 * plan.heads * plan.teams;
    for k in 0..entries.div_ceil(THREADS as u32) {
        let entry = tid + THREADS as u32 * k;
        let i = entry.min(entries - 1);
        let peer = i / per_cta;
        let at = buf.stats.at(i / plan.heads, i % plan.heads);
        let value: Val<f32> = load(at.in_cta(peer));
        // The threads past the last entry load it too but do not store it: two threads
        // storing one word with nothing ordering them race.
        store_if(at, value, peer != rank && entry < entries);
    }
}

/// What stage 9 reads and writes in global memory, and the token whose rows it writes.
pub struct EpilogueTensors {
    pub token: Val<u32>,
    pub heads: HeadGroup,
    pub out: Tensor<E4m3, 3>,
    pub out_scale: Tensor<i32, 3>,
    /// The debug epilogue's `[s_q, heads, 512]` fp32 output before the cast.
    pub precast: Option<Tensor<f32, 3>>,
}

/// Stage 9's sink logit of this thread's head in every merge pass (one, where a thread
/// keeps its head: [`one_head_a_thread`]), CTA `rank` of the token's cluster. It depends
/// on the head alone: the split schedule loads it with the tile's inputs, a streamed CTA
/// before stage 7's barrier. Loaded by the pass itself, its trip to memory came after the
/// cluster barrier and the DSMEM pulls, on the one token's chain that a launch of few
/// tokens is.
#[device]
pub fn load_sinks(
    plan: &Plan,
    (tid, rank): (Val<u32>, Val<u32>),
    sink: Tensor<f32, 1>,
    heads: &HeadGroup,
) -> Vec<Val<f32>> {
    let heads_a_thread = if one_head_a_thread(plan) {
        1
    } else {
        plan.merge_passes
    };
    (0..heads_a_thread)
        .map(|pass| {
            let head = unit_of(plan, pass, tid, rank).head;
            load(sink.view([None]).at(heads.head(head)))
        })
        .collect()
}

/// One head's share of the merge: each partial's weight 2^(m - M) (none where the partial
/// saw no row), 1 / (the sink's weight + the weighted sums), and whether the head has any
/// weight at all (M: the largest of the partials' maxima and the sink).
struct HeadWeights {
    /// The head in the key's group.
    head: Val<u32>,
    weights: Vec<Val<f32>>,
    inverse: Val<f32>,
    ok: Pred,
}

impl HeadWeights {
    #[device]
    fn of(plan: &Plan, buf: &Buffers, head: Val<u32>, sink_logit: Val<f32>) -> HeadWeights {
        let sink2 = sink_logit * LOG2E as f32;
        let mut maxima = Vec::new();
        let mut sums = Vec::new();
        let mut big = sink2;
        for part in 0..plan.partials() {
            let m: Val<f32> = load(buf.stat(part, 0, head));
            let l: Val<f32> = load(buf.stat(part, 1, head));
            big = (l > 0.0f32).select(big.max(m), big);
            maxima.push(m);
            sums.push(l);
        }
        big = ((big == f32::INFINITY) | (big == f32::NEG_INFINITY)).select(0.0f32, big);
        let mut denominator = (sink2 - big).ex2();
        let mut weights = Vec::new();
        for (m, l) in maxima.into_iter().zip(sums) {
            let weight = (l > 0.0f32).select((m - big).ex2(), 0.0f32);
            denominator = weight.fma(l, denominator);
            weights.push(weight);
        }
        let ok = (denominator > 0.0f32) & (sink_logit != f32::INFINITY);
        // One reciprocal for the head's values: a division each is a MUFU and a slow-path
        // branch each (1.5 ulp against 0.5, far inside the numerics contract).
        HeadWeights {
            head,
            weights,
            inverse: denominator.rcp(),
            ok,
        }
    }
}

/// Stage 9, pass by pass ([`MergeAndStore::pass`]): combine the peers' partials with their
/// statistics and the sink, inverse RoPE, MXFP8 cast, store in the o-fused layout.
pub struct MergeAndStore<'a> {
    plan: &'a Plan,
    buf: &'a Buffers,
    pulls: &'a [Vec<[Val<f32>; 4]>],
    /// The sink logit of each head a thread merges ([`load_sinks`]).
    sinks: &'a [Val<f32>],
    tid: Val<u32>,
    rank: Val<u32>,
    tensors: &'a EpilogueTensors,
    out: GlobalView<E4m3>,
    out_scale: GlobalView<u8>,
    precast: Option<GlobalView<f32>>,
    slice: Val<u32>,
    /// The output units this CTA owns.
    count: Val<u32>,
    /// The weights of the one head a thread merges in every pass ([`one_head_a_thread`]);
    /// otherwise each pass weighs its own.
    one_head: Option<HeadWeights>,
}

type GlobalView<T> = dsl_core::tensor::Tensor<T, dsl_core::tensor::Global>;

impl<'a> MergeAndStore<'a> {
    /// The views and this thread's place that every pass shares, from `pulls`
    /// ([`pull_partials`]) and `sinks` ([`load_sinks`]).
    #[device]
    pub fn new(
        plan: &'a Plan,
        buf: &'a Buffers,
        pulls: &'a [Vec<[Val<f32>; 4]>],
        sinks: &'a [Val<f32>],
        (tid, rank): (Val<u32>, Val<u32>),
        tensors: &'a EpilogueTensors,
    ) -> Self {
        let out = output::data_view(&tensors.out);
        let out_scale = output::scale_view(&tensors.out_scale);
        let precast = tensors.precast.as_ref().map(output::precast_view);
        let slice = tid % THREADS_PER_UNIT;
        let (_, count) = owned_units(plan, rank);
        let one_head = one_head_a_thread(plan).then(|| {
            let head = unit_of(plan, 0, tid, rank).head;
            HeadWeights::of(plan, buf, head, sinks[0])
        });
        MergeAndStore {
            plan,
            buf,
            pulls,
            sinks,
            tid,
            rank,
            tensors,
            out,
            out_scale,
            precast,
            slice,
            count,
            one_head,
        }
    }

    /// Merge passes in all.
    pub fn passes(&self) -> usize {
        self.pulls.len()
    }

    /// Whether pass `pass` may hold a chunk that RoPE rotated (dims >= 448): known at trace
    /// time where a thread keeps its head ([`chunks_a_pass`]: pass p takes chunks
    /// `[k p, k p + k)`).
    fn may_rotate(&self, pass: u32) -> bool {
        chunks_a_pass(self.plan).is_none_or(|k| (pass + 1) * k > ROPE_CHUNK)
    }

    /// Inverse GPT-J RoPE of this thread's values `o` of chunk `chunk` on dims >= 448
    /// (identity elsewhere).
    #[device]
    fn inverse_rope(&self, chunk: Val<u32>, o: [Val<f32>; 4]) -> Vec<Val<f32>> {
        let (buf, slice) = (self.buf, self.slice);
        let is_rope = chunk >= ROPE_CHUNK;
        let pair0 = (chunk * 16 + slice * 2).max(ROPE_CHUNK * 16) - ROPE_CHUNK * 16;
        let cosines = load_vec::<f32, 2, _>(buf.cos_sin.at1(pair0));
        let sines = load_vec::<f32, 2, _>(buf.cos_sin.at1(pair0 + ROPE_DIM as u32 / 2));
        let mut x = Vec::new();
        for pair in 0..2 {
            let c = is_rope.select(cosines[pair], 1.0f32);
            let s = is_rope.select(sines[pair], 0.0f32);
            let (even, odd) = (o[2 * pair], o[2 * pair + 1]);
            x.push(even.fma(c, s * odd));
            x.push(odd.fma(c, -(s * even)));
        }
        x
    }

    /// Merge pass `pass`.
    #[device]
    pub fn pass(&self, pass: usize) {
        let (plan, buf, pulls, tid, rank) = (self.plan, self.buf, self.pulls, self.tid, self.rank);
        let (tensors, slice, count) = (self.tensors, self.slice, self.count);
        let token = tensors.token;
        let (out, out_scale, precast) = (&self.out, &self.out_scale, &self.precast);
        let parts = &pulls[pass];
        let unit = unit_of(plan, pass as u32, tid, rank);
        let active = unit.index < count;
        let own;
        let head = match &self.one_head {
            Some(head) => head,
            None => {
                own = HeadWeights::of(plan, buf, unit.head, self.sinks[pass]);
                &own
            }
        };
        let chunk = unit.chunk;
        let global_head = tensors.heads.head(head.head);
        let mut acc = [Val::<f32>::constant(0.0); 4];
        for (part, weight) in parts.iter().zip(&head.weights) {
            for e in 0..4 {
                acc[e] = part[e].fma(*weight, acc[e]);
            }
        }
        let o = acc.map(|a| head.ok.select(a * head.inverse, 0.0f32));
        if pass + 1 == pulls.len() && plan.merges_peers() {
            // Every pulled value is consumed: peers may leave once all of them got here too
            // (the split barrier's wait is the last thing before exit).
            cluster_arrive_relaxed();
        }
        let x = if self.may_rotate(pass as u32) {
            self.inverse_rope(chunk, o)
        } else {
            o.to_vec()
        };
        // This thread's values of the unit: dims of chunk `chunk` from `first_dim`.
        let first_dim = slice * VALUES_PER_THREAD;
        let dims = IntTuple::tuple([leaf(first_dim), leaf(chunk)]);
        if let Some(precast) = &precast {
            let at = IntTuple::tuple([leaf(token), leaf(global_head), dims.clone()]);
            store_vec_if(precast.at(at), [x[0], x[1], x[2], x[3]], active);
        }

        // MXFP8: ue8m0 = ceil(log2(amax / 448)) over the 32-dim chunk (8 threads).
        let mut amax = x[0].abs().max(x[1].abs()).max(x[2].abs().max(x[3].abs()));
        for shift in [4, 2, 1] {
            amax = amax.max(shfl_xor(amax, shift));
        }
        let amax = amax.max(mxfp8::AMAX_FLOOR);
        let exponent = ue8m0_round_up(amax * (1.0 / e4m3::MAX));
        let inverse = ((254u32 - exponent) << 23).bitcast::<f32>();
        let codes = f32x4_to_e4m3x4([
            x[0] * inverse,
            x[1] * inverse,
            x[2] * inverse,
            x[3] * inverse,
        ]);

        let in_group = global_head % WV_GROUP_SIZE as u32;
        let group = global_head / WV_GROUP_SIZE as u32;
        let head = IntTuple::tuple([leaf(in_group), leaf(group)]);
        store_if(
            out.at(IntTuple::tuple([leaf(token), head, dims])),
            codes,
            active,
        );
        // The scale layout's head mode splits the head in its group by scale-word byte.
        let per_word = SCALE_WORD_BYTES as u32;
        let word_byte = IntTuple::tuple([leaf(in_group % per_word), leaf(in_group / per_word)]);
        let scale_head = IntTuple::tuple([word_byte, leaf(group)]);
        let scale_at = out_scale.at(IntTuple::tuple([leaf(token), scale_head, leaf(chunk)]));
        store_u8(scale_at, exponent, Some(active & (slice == 0)));
    }
}
