//! Stages 8-9: pull every peer's partial of this CTA's output units over distributed shared
//! memory, merge with the sink, undo RoPE, cast to MXFP8 and store in the o-fused layout.

use dsl_core::arch::cluster::cluster_arrive_relaxed;
use dsl_core::arch::cvt::{f32x4_to_e4m3x4, ue8m0_round_up};
use dsl_core::arch::memory::{load, load_vec, store_if, store_u8, store_vec_if};
use dsl_core::arch::thread::shfl_xor;
use dsl_core::layout::IntTuple;
use dsl_core::trace::{E4m3, Index, Tensor, Val};
use dsl_macros::device;

use super::plan::{HeadGroup, Plan, THREADS_PER_UNIT};
use super::smem::Buffers;
use crate::formats::{e4m3, mxfp8};
use crate::swap_ab_decode::output::{self, SCALE_WORD_BYTES};
use crate::swap_ab_decode::{HEAD_DIM, LOG2E, ROPE_DIM, ROPE_START, THREADS, WV_GROUP_SIZE};

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

/// Where the slice `slice` of unit `unit` (head * 16 + 32-dim chunk) starts in a partial:
/// its head and first dim.
pub(super) fn unit_cell(unit: Val<u32>, slice: Val<u32>) -> (Val<u32>, Val<u32>) {
    let chunks = HEAD_DIM as u32 / UNIT_DIMS;
    let head = unit / chunks;
    (
        head,
        (unit % chunks) * UNIT_DIMS + slice * VALUES_PER_THREAD,
    )
}

/// A thread's unit slot in merge pass `pass`: its index among this CTA's units, whether it
/// is a real one, and the unit (head * 16 + 32-dim chunk).
pub(super) fn unit_of(
    plan: &Plan,
    pass: u32,
    tid: Val<u32>,
    rank: Val<u32>,
) -> (Val<u32>, Val<u32>) {
    let (first, count) = owned_units(plan, rank);
    let index = tid / THREADS_PER_UNIT + pass * (THREADS as u32 / THREADS_PER_UNIT);
    let unit = first + index.min(count - 1);
    (index, unit)
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
        let (_, unit) = unit_of(plan, pass, tid, rank);
        let (head, dim) = unit_cell(unit, slice);
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
        let i = (tid + THREADS as u32 * k).min(entries - 1);
        let peer = i / per_cta;
        let at = buf.stats.at(i / plan.heads, i % plan.heads);
        let value: Val<f32> = load(at.in_cta(peer));
        store_if(at, value, peer != rank);
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

/// Stage 9's sink logit of this thread's unit in every merge pass, CTA `rank` of the
/// token's cluster. It depends on the head alone: the split schedule loads it with the
/// tile's inputs, a streamed CTA before stage 7's barrier. Loaded by the pass itself, its
/// trip to memory came after the cluster barrier and the DSMEM pulls, on the one token's
/// chain that a launch of few tokens is.
#[device]
pub fn load_sinks(
    plan: &Plan,
    (tid, rank): (Val<u32>, Val<u32>),
    sink: Tensor<f32, 1>,
    heads: &HeadGroup,
) -> Vec<Val<f32>> {
    (0..plan.merge_passes)
        .map(|pass| {
            let (_, unit) = unit_of(plan, pass, tid, rank);
            load(sink.view([None]).at(heads.head(unit / 16)))
        })
        .collect()
}

/// Stage 9, pass by pass ([`MergeAndStore::pass`]): combine the peers' partials with their
/// statistics and the sink, inverse RoPE, MXFP8 cast, store in the o-fused layout.
pub struct MergeAndStore<'a> {
    plan: &'a Plan,
    buf: &'a Buffers,
    pulls: &'a [Vec<[Val<f32>; 4]>],
    /// Each pass's sink logit ([`load_sinks`]).
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
        }
    }

    /// Merge passes in all.
    pub fn passes(&self) -> usize {
        self.pulls.len()
    }

    /// Merge pass `pass`.
    #[device]
    pub fn pass(&self, pass: usize) {
        let (plan, buf, pulls, tid, rank) = (self.plan, self.buf, self.pulls, self.tid, self.rank);
        let (tensors, slice, count) = (self.tensors, self.slice, self.count);
        let token = tensors.token;
        let (out, out_scale, precast) = (&self.out, &self.out_scale, &self.precast);
        let parts = &pulls[pass];
        let (index, unit) = unit_of(plan, pass as u32, tid, rank);
        let active = index < count;
        let head = unit / 16;
        let chunk = unit % 16;
        let global_head = tensors.heads.head(head);
        let sink_logit = self.sinks[pass];
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
        let mut acc = [Val::<f32>::constant(0.0); 4];
        for part in 0..plan.partials() as usize {
            let weight = (sums[part] > 0.0f32).select((maxima[part] - big).ex2(), 0.0f32);
            denominator = weight.fma(sums[part], denominator);
            for e in 0..4 {
                acc[e] = parts[part][e].fma(weight, acc[e]);
            }
        }
        let ok = (denominator > 0.0f32) & (sink_logit != f32::INFINITY);
        // One reciprocal for the four values: a division each is a MUFU and a slow-path
        // branch each (1.5 ulp against 0.5, far inside the numerics contract).
        let inverse = denominator.rcp();
        let o = acc.map(|a| ok.select(a * inverse, 0.0f32));
        if pass + 1 == pulls.len() && plan.merges_peers() {
            // Every pulled value is consumed: peers may leave once all of them got here too
            // (the split barrier's wait is the last thing before exit).
            cluster_arrive_relaxed();
        }

        // Inverse GPT-J RoPE on dims >= 448 (identity elsewhere).
        let rope_chunk = ROPE_START as u32 / 32;
        let is_rope = chunk >= rope_chunk;
        let pair0 = (chunk * 16 + slice * 2).max(rope_chunk * 16) - rope_chunk * 16;
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
