#!/usr/bin/env python3
"""The SwapAB sparse decode attention in plain PyTorch: the baseline the kernel is measured against.

`decode_torch` computes the SwapAB decode op (see the kernels crate's `swap_ab_decode` docs) from the kernel's own
inputs (chunk-interleaved bf16 Q, paged V4.1 fp8 / NVFP4 KV records, slot lists, RoPE table,
sinks) into the kernel's own outputs (MXFP8 codes and ue8m0 scales in the o-fused layout),
batched over tokens with ordinary tensor ops: gathers by index tensors, masks, bf16 matmuls
with fp32 results. It is written for speed on a GPU within those means, and it captures into a
CUDA graph.

Commands:

    python3 scripts/bench_torch.py check CASE.safetensors [CASE.safetensors ...] [--device DEV]
        Runs decode_torch on each case file (the format of the kernels crate's `case_file`
        module, written with its expected outputs) and checks the output bytes against the
        SPEC's numerics contract: every e4m3 code equal to the expected one or one code step
        away, at most 2% of them off, scale bytes equal except where the chunk's amax / 448 lies
        within 1e-3 of a power of two, no byte outside the live groups changed. It also reports
        the pre-cast fp32 error per head against the SPEC's 2e-4 * max|o| bound. Exits 1 if any
        case fails.

    python3 scripts/bench_torch.py bench --out results.json [--device cuda] [--s-q 1,32,128,512]
                                         [--warmup N] [--reps N]
        Times decode_torch eager and CUDA-graphed on random valid inputs for every real layer
        shape (16 or 32 heads, SWA width 128 on 64-token pages, extra width 512 or 1024 on
        16-token pages, fp8 or NVFP4 extra records) and each token count, rotating among enough
        input sets that their KV bytes exceed 256 MiB so that no call finds its KV in L2.
        Eager calls are timed with CUDA events around each call. Graphed calls are timed as the
        kernel benchmark times its own: one graph per input set, each timed replay queued
        behind a short GPU spin (torch.cuda._sleep, calibrated at start-up to about 30 us at
        the fastest clock the calibration sees) so that the host's launch is hidden, with the
        events around the replay only. Writes a JSON array, one object per configuration
        (heads, nk, ne, record bytes, s_q, eager_us median, graph_us median with graph_p10_us
        and graph_p90_us, kv_bytes one call reads, input_sets rotated), and prints a table.
        `--device cpu` runs the eager path only (a smoke test).

Needs only torch (with CUDA for timing) and safetensors.
"""

import argparse
import functools
import json
import math
import statistics
import sys
import time

import torch
from safetensors import safe_open

HEAD_DIM = 512
ROPE_DIM = 64
ROPE_START = HEAD_DIM - ROPE_DIM
ROPE_PAIRS = ROPE_DIM // 2
Q_CHUNK = 16  # dims per chunk of the chunk-interleaved Q layout
FP8_RECORD = 528  # 512 e4m3 codes, then 16 ue8m0 scales (one per 32 dims)
FP8_SCALE_DIMS = 32
FP4_RECORD = 288  # 256 bytes of e2m1 pairs, then 32 e4m3 scales (one per 16 dims)
FP4_SCALE_DIMS = 16
GROUP_HEADS = 8  # heads per group of the o-fused output
MX_BLOCK = 32  # dims per MXFP8 scale
E4M3_MAX = 448.0
AMAX_FLOOR = 1e-10
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


# ---------------------------------------------------------------------------------------------
# The op
# ---------------------------------------------------------------------------------------------


def decode_torch(q, swa_cache, swa_idx, swa_len, extra_cache, extra_idx, extra_len, positions,
                 cos_sin, sink, heads, softmax_scale, out_data, out_scale):
    """Runs the decode op: writes the live groups of `out_data` and `out_scale` in place and
    returns the pre-cast output, fp32 `[s_q, heads, 512]`.

    - q: bf16 `[s_q, HP, 512]`, chunk-interleaved: the `HP * 512` elements of a token are
      contiguous and element (h, d) sits at flat offset (d/16)*HP*16 + h*16 + d%16 of them;
      `stride(0)` is the token stride.
    - swa_cache: uint8 `[num_blocks, page, 528]` fp8 records; extra_cache: uint8
      `[num_blocks, page, 528 or 288]`. The last two dims are contiguous, `stride(0)` may exceed
      `page * record` but must be a multiple of 8 bytes (the kernel's host API asks for 16).
    - swa_idx / extra_idx: int32 `[>= s_q, width]` slot ids (block * page + offset);
      swa_len / extra_len: int32 `[>= s_q]` valid prefix lengths.
    - positions: int64 `[>= s_q]`; cos_sin: fp32 `[max_pos, 64]` (32 cos, then 32 sin).
    - sink: fp32 `[>= heads]`; heads: live heads (16 or 32); softmax_scale: a float.
    - out_data: uint8 (e4m3 codes) `[s_q, groups, 4096]`, last dim contiguous;
      out_scale: int32 `[s_q, groups, 32]`, any strides.

    Only device-side work, no host synchronisation: it can be captured into a CUDA graph once
    it has run eagerly on the device.
    """
    s_q = q.shape[0]
    cs = cos_sin[positions[:s_q]][:, None]  # [s_q, 1, 64]
    cos, sin = cs[..., :ROPE_PAIRS], cs[..., ROPE_PAIRS:]
    queries = roped_queries(q, heads, cos, sin)
    lists = []
    for cache, idx, lens in ((swa_cache, swa_idx, swa_len), (extra_cache, extra_idx, extra_len)):
        if idx.shape[1] == 0:
            continue  # a list of width 0 has no rows
        records, valid = gather_records(cache, idx[:s_q], lens[:s_q])
        lists.append((dequantize(records), valid))
    o = attend(queries, lists, sink[:heads], softmax_scale)
    inverse_rope(o, cos, sin)
    codes, exponents = mxfp8_cast(o)
    write_o_fused(codes, exponents, out_data, out_scale)
    return o


def roped_queries(q, heads, cos, sin):
    """The live heads' queries as the kernel's bf16 operand, `[s_q, heads, 512]`: de-interleaved,
    RoPE applied to dims >= 448 in GPT-J pairs (e' = e*c - o*s, o' = o*c + e*s), rounded to bf16.

    The kernel computes each rotated value as one fp32 fused multiply-add, fma(e, c, -(o*s)) and
    fma(o, c, e*s). Here e*c is formed in fp64, where the product of two fp32 values is exact,
    the fp32 product o*s is subtracted, and the sum is rounded to fp32: the fused result, unless
    the fp64 rounding of the sum lands exactly on an fp32 halfway point.
    """
    s_q, padded_heads, _ = q.shape
    plain = (q.reshape(s_q, HEAD_DIM // Q_CHUNK, padded_heads, Q_CHUNK)[:, :, :heads]
             .transpose(1, 2).reshape(s_q, heads, HEAD_DIM))
    pairs = plain[..., ROPE_START:].float().unflatten(-1, (ROPE_PAIRS, 2))
    e, o = pairs[..., 0], pairs[..., 1]
    c = cos.double()
    e_rot = (e.double() * c - (o * sin).double()).float()
    o_rot = (o.double() * c + (e * sin).double()).float()
    rotated = torch.stack((e_rot, o_rot), -1).flatten(-2).to(torch.bfloat16)
    return torch.cat((plain[..., :ROPE_START], rotated), -1)


def gather_records(cache, idx, lens):
    """The records a slot list names, uint8 `[s_q, width, record]`, and which rows are valid,
    bool `[s_q, width]`.

    Row i of token b is valid iff i < min(len[b], width), id >= 0 and id < num_blocks * page.
    Invalid rows gather slot 0 instead (so nothing outside the cache is read) and are then
    zeroed, which dequantizes to exact zeros whatever slot 0 holds. Records travel as 8-byte
    words: eight times fewer elements for the gather than bytes.
    """
    num_blocks, page, record = cache.shape
    width = idx.shape[1]
    ids = idx.long()
    limit = lens.clamp(0, width)
    valid = ((torch.arange(width, device=idx.device) < limit[:, None])
             & (ids >= 0) & (ids < num_blocks * page))
    slots = torch.where(valid, ids, 0)
    words = cache.view(torch.int64)[slots // page, slots % page]
    words.masked_fill_(~valid[..., None], 0)
    return words.view(torch.uint8), valid


def dequantize(records):
    """bf16 `[s_q, width, 512]` rows of fp8 (528 B) or NVFP4 (288 B) records. Both are exact in
    bf16 for the values cache writers produce: e4m3 x 2^k and e2m1 x e4m3 need at most five
    significant bits."""
    if records.shape[-1] == FP8_RECORD:
        values = records[..., :HEAD_DIM].view(torch.float8_e4m3fn).to(torch.bfloat16)
        scales = pow2(records[..., HEAD_DIM:].int() - 127).to(torch.bfloat16)
        return (values.unflatten(-1, (-1, FP8_SCALE_DIMS)) * scales[..., None]).flatten(-2)
    if records.shape[-1] == FP4_RECORD:
        pairs = e2m1_pairs(records.device)[records[..., :HEAD_DIM // 2].long()]
        scales = records[..., HEAD_DIM // 2:].view(torch.float8_e4m3fn).to(torch.bfloat16)
        return (pairs.reshape(*records.shape[:-1], -1, FP4_SCALE_DIMS) * scales[..., None]).flatten(-2)
    raise ValueError(f"records of {records.shape[-1]} bytes: expected {FP8_RECORD} (fp8) or "
                     f"{FP4_RECORD} (NVFP4)")


@functools.cache
def e2m1_pairs(device):
    """bf16 `[256, 2]`: the two e2m1 values of every byte, low nibble (the even dim) first. Built
    once per device, on the first eager call (not inside a graph capture)."""
    values = torch.tensor(E2M1_VALUES, dtype=torch.bfloat16)
    byte = torch.arange(256)
    return torch.stack((values[byte & 15], values[byte >> 4]), -1).to(device)


def pow2(k):
    """2^k as fp32, exactly, for an int32 tensor k in [-127, 128] (128 gives inf): the exponent
    field set directly; 2^-127 is the subnormal 0x00400000."""
    bits = torch.where(k > -127, (k + 127) << 23, 1 << 22)
    return bits.to(torch.int32).view(torch.float32)


def matmul_f32(a, b):
    """Batched a @ b of bf16 tensors with fp32 accumulation and an fp32 result. cuBLAS does this
    directly; elsewhere the operands go to fp32 first (exact: bf16 products fit fp32)."""
    if a.is_cuda:
        return torch.bmm(a, b, out_dtype=torch.float32)
    return torch.bmm(a.float(), b.float())


def attend(queries, lists, sink, softmax_scale):
    """Softmax attention with a sink over the valid rows of every list, fp32 `[s_q, heads, 512]`.

    p_i = exp(l_i - m) / (exp(sink - m) + sum_j exp(l_j - m)), l = softmax_scale * q . kv in
    fp32 from bf16 operands. A sink of +inf takes all the mass (o = 0), -inf drops out, and a
    token without valid rows gets o = 0. P goes into the second matmul as bf16 hi + lo parts,
    as in the kernel, so the product keeps about 16 bits of P instead of bf16's 8.
    """
    heads = queries.shape[1]
    logits = torch.cat([
        matmul_f32(queries, kv.transpose(1, 2)).mul_(softmax_scale).masked_fill_(~valid[:, None], -math.inf)
        for kv, valid in lists
    ], -1)
    # Shift by the largest finite logit or sink (0 if there is none): every finite term is then
    # <= 1 and the denominator is 0 (nothing takes mass), infinite (sink = +inf) or >= 1.
    finite_sink = torch.where(sink.isfinite(), sink, -math.inf)
    shift = torch.maximum(logits.amax(-1), finite_sink)
    shift = shift.masked_fill(shift == -math.inf, 0.0)
    weights = torch.exp(logits - shift[..., None])
    denominator = torch.exp(sink - shift) + weights.sum(-1)
    p = weights / denominator.clamp_min(1.0)[..., None]
    p_hi = p.to(torch.bfloat16)
    p_split = torch.cat((p_hi, (p - p_hi.float()).to(torch.bfloat16)), 1)  # [s_q, 2 * heads, rows]
    o, start = None, 0
    for kv, _ in lists:
        part = matmul_f32(p_split[..., start:start + kv.shape[1]], kv)
        o = part if o is None else o + part
        start += kv.shape[1]
    return o[:, :heads] + o[:, heads:]


def inverse_rope(o, cos, sin):
    """Rotates dims >= 448 of `o` back by -theta, in place: e' = e*c + s*o, o' = o*c - s*e."""
    pairs = o[..., ROPE_START:].unflatten(-1, (ROPE_PAIRS, 2))
    e, od = pairs[..., 0], pairs[..., 1]
    o[..., ROPE_START:] = torch.stack((e * cos + sin * od, od * cos - sin * e), -1).flatten(-2)


def mxfp8_cast(o):
    """MXFP8 of `o` per 32-dim chunk: e4m3 codes, uint8 `[s_q, heads, 16, 32]`, and ue8m0
    exponents, uint8 `[s_q, heads, 16]`. The exponent is amax / 448 (amax floored at 1e-10)
    rounded up to a power of two; the codes are x * 2^(127 - exponent) rounded to nearest even
    with saturation to +-448."""
    chunks = o.unflatten(-1, (HEAD_DIM // MX_BLOCK, MX_BLOCK))
    amax = chunks.abs().amax(-1).clamp_min(AMAX_FLOOR)
    exponents = ue8m0_round_up(amax * (1.0 / E4M3_MAX))
    return e4m3_codes(chunks, exponents), exponents


def ue8m0_round_up(x):
    """The ue8m0 code of the smallest power of two >= x, for fp32 x in the normal range (what
    cvt.rp.satfinite.ue8m0x2 gives there): the exponent field, plus one if any mantissa bit is
    set, saturated at 254."""
    bits = x.view(torch.int32)
    return ((bits >> 23) + ((bits & 0x7FFFFF) != 0).int()).clamp_max(254).to(torch.uint8)


def e4m3_codes(chunks, exponents):
    """e4m3 codes of `chunks` `[..., 32]` under per-chunk ue8m0 `exponents` `[...]`.

    PyTorch's cast to float8_e4m3fn rounds to nearest even; past 448 it gave NaN in some
    releases and saturates in others, so clamping to +-448 first pins down the saturation of
    cvt.rn.satfinite on every release (NaN stays NaN)."""
    scaled = chunks * pow2(127 - exponents.int())[..., None]
    return scaled.clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).view(torch.uint8)


def write_o_fused(codes, exponents, out_data, out_scale):
    """Stores the live groups in the o-fused layout: chunk cc of head h is unit
    ka = cc * 8 + h % 8 of group h / 8; its codes go to out_data[b, g, ka*32 : ka*32 + 32] and
    its exponent to byte ka % 4 (little-endian) of out_scale[b, g, ka / 4]."""
    s_q, heads = codes.shape[:2]
    groups = heads // GROUP_HEADS
    units = HEAD_DIM // MX_BLOCK
    data = codes.view(s_q, groups, GROUP_HEADS, units, MX_BLOCK).transpose(2, 3)
    out_data[:, :groups].copy_(data.reshape(s_q, groups, GROUP_HEADS * HEAD_DIM))
    scale_bytes = exponents.view(s_q, groups, GROUP_HEADS, units).transpose(2, 3)
    words = scale_bytes.reshape(s_q, groups, -1, 4).contiguous().view(torch.int32)
    out_scale[:, :groups].copy_(words.squeeze(-1))


# ---------------------------------------------------------------------------------------------
# check: case files against the numerics contract
# ---------------------------------------------------------------------------------------------

MAX_DIFFERING_CODES = 0.02
SCALE_AMBIGUITY = 1e-3
PRECAST_TOLERANCE = 2e-4


def load_case(path, device):
    """A case file's metadata, decode_torch's arguments (on `device`), the output storages those
    arguments view, and the expected outputs: o, fp32 `[s_q, heads, 512]`, and the output
    storages after a correct launch."""
    with safe_open(path, "pt") as f:
        meta = f.metadata()
        t = {k: f.get_tensor(k).to(device) for k in f.keys()}
    if "expected_o" not in t:
        raise SystemExit(f"{path}: has no expected outputs; write it with them to check it")
    padded_heads, groups = int(meta["padded_heads"]), int(meta["out_groups"])
    s_q = t["q"].shape[0]
    data_strides = [int(s) for s in meta["out_data_strides"].split(",")] + [1]
    scale_strides = [int(s) for s in meta["out_scale_strides"].split(",")]

    def cache(name, page, record):
        return t[name][:, :page * record].view(-1, page, record)

    def outputs(data, scale):
        """The strided `[s_q, groups, 4096]` and `[s_q, groups, 32]` views of two storages."""
        return (torch.as_strided(data, (s_q, groups, GROUP_HEADS * HEAD_DIM), data_strides),
                torch.as_strided(scale, (s_q, groups, 32), scale_strides))

    storages = (t["out_data"].view(torch.uint8), t["out_scale"])
    out_data, out_scale = outputs(*storages)
    args = dict(
        q=t["q"][:, :padded_heads * HEAD_DIM].view(s_q, padded_heads, HEAD_DIM),
        swa_cache=cache("swa_cache", int(meta["swa_page"]), FP8_RECORD),
        swa_idx=t["swa_idx"], swa_len=t["swa_len"],
        extra_cache=cache("extra_cache", int(meta["extra_page"]), int(meta["extra_record"])),
        extra_idx=t["extra_idx"], extra_len=t["extra_len"],
        positions=t["positions"], cos_sin=t["cos_sin"], sink=t["sink"],
        heads=int(meta["heads"]), softmax_scale=float(meta["softmax_scale"]),
        out_data=out_data, out_scale=out_scale,
    )
    expected = (t["expected_o"], (t["expected_out_data"].view(torch.uint8), t["expected_out_scale"]))
    return meta, args, storages, outputs, expected


def per_head(data, scale, heads):
    """The live groups of o-fused outputs back in head order: codes uint8 `[s_q, heads, 16, 32]`,
    exponents uint8 `[s_q, heads, 16]` (the inverse of write_o_fused)."""
    s_q = data.shape[0]
    groups, units = heads // GROUP_HEADS, HEAD_DIM // MX_BLOCK
    codes = data[:, :groups].reshape(s_q, groups, units, GROUP_HEADS, MX_BLOCK).transpose(2, 3)
    scale_bytes = scale[:, :groups].contiguous().view(torch.uint8).view(s_q, groups, units, GROUP_HEADS)
    return (codes.reshape(s_q, heads, units, MX_BLOCK),
            scale_bytes.transpose(2, 3).reshape(s_q, heads, units))


def code_steps(a, b):
    """Adjacent e4m3 codes between `a` and `b` in value order (+0 and -0 coincide); 0 for two
    NaN codes, a large number for one."""
    def rank(code):
        magnitude = (code & 0x7F).int()
        return torch.where(code >= 0x80, -magnitude, magnitude)
    nan_a, nan_b = (a & 0x7F) == 0x7F, (b & 0x7F) == 0x7F
    steps = (rank(a) - rank(b)).abs()
    return torch.where(nan_a | nan_b, torch.where(nan_a & nan_b, 0, 1 << 20), steps)


def within_bound(codes, exponents, expected, bound):
    """Where a code stands within `bound` (per chunk, broadcast) of the expected value, give or
    take half the larger gap beside it: the numerics contract's rule for codes more than one
    step off (near zero one step is finer than the absolute pre-cast bound)."""
    def value(code):
        e4m3 = code.view(torch.float8_e4m3fn).double()
        return e4m3 * pow2(exponents.int() - 127).double()[..., None]
    magnitude = codes & 0x7F
    gap_below = value(magnitude) - value((magnitude.int() - 1).clamp_min(0).to(torch.uint8))
    gap_above = value((magnitude.int() + 1).clamp_max(0x7E).to(torch.uint8)) - value(magnitude)
    error = (value(codes) - expected.double()).abs()
    return error <= bound + 0.5 * torch.maximum(gap_below, gap_above)


def check_case(path, device):
    """Runs one case file and compares with its expected outputs. Returns whether it meets the
    contract, a report line, and the counts of codes one step off, further off but within the
    pre-cast bound, further still, and in all."""
    meta, args, storages, outputs, (exp_o, exp_storages) = load_case(path, device)
    heads, s_q = args["heads"], args["q"].shape[0]
    before = [s.cpu().clone() for s in storages]
    o = decode_torch(**args).cpu()
    after = [s.cpu() for s in storages]
    exp_o, exp_storages = exp_o.cpu(), [s.cpu() for s in exp_storages]

    codes, exponents = per_head(*outputs(*after), heads)
    exp_codes, exp_exponents = per_head(*outputs(*exp_storages), heads)
    exp_chunks = exp_o.unflatten(-1, (HEAD_DIM // MX_BLOCK, MX_BLOCK))
    ratio = exp_chunks.abs().amax(-1).clamp_min(AMAX_FLOOR).double() / E4M3_MAX
    ambiguous = (ratio / torch.exp2(ratio.log2().round()) - 1).abs() <= SCALE_AMBIGUITY
    scale_differs = exponents != exp_exponents
    # Where a scale differs, compare with the expected values cast under ours, so that one
    # scale disagreement counts once, as a scale.
    reference_codes = torch.where(scale_differs[..., None], e4m3_codes(exp_chunks, exponents), exp_codes)
    head_bound = PRECAST_TOLERANCE * exp_o.abs().amax(-1)
    steps = code_steps(codes, reference_codes)
    excused = within_bound(codes, exponents, exp_chunks, head_bound.double()[..., None, None])
    one_step = int((steps == 1).sum())
    within, beyond = int(((steps > 1) & excused).sum()), int(((steps > 1) & ~excused).sum())
    bad_scales = int((scale_differs & ~ambiguous).sum())

    # Bytes outside the live groups must keep their initial values.
    live = [torch.zeros_like(s, dtype=torch.bool) for s in before]
    for view in outputs(*live):
        view[:, :heads // GROUP_HEADS] = True
    strays = sum(int(((b != a) & ~m).sum()) for b, a, m in zip(before, after, live))

    head_error = (o - exp_o).abs().amax(-1)
    precast_over = int(((head_error > head_bound) | head_error.isnan()).sum())
    worst = float((head_error / head_bound.clamp_min(1e-30)).max())

    total = codes.numel()
    differing = (one_step + within + beyond) / total
    ok = (beyond == 0 and differing <= MAX_DIFFERING_CODES and bad_scales == 0 and strays == 0
          and precast_over == 0)
    line = (f"{'ok  ' if ok else 'FAIL'} {meta['name']:<26} h{heads} nk{meta['swa_width']} "
            f"ne{meta['extra_width']} r{meta['extra_record']} s_q {s_q:<3}| codes {total}: "
            f"{one_step} one step off ({100 * differing:.3f}%), {within} further within the "
            f"pre-cast bound, {beyond} further | scales "
            f"{exponents.numel()}: {bad_scales} differ, {int((scale_differs & ambiguous).sum())} of "
            f"{int(ambiguous.sum())} near 2^k differ | stray writes {strays} | pre-cast heads over "
            f"bound {precast_over}, worst error/bound {worst:.3f}")
    return ok, line, (one_step, within, beyond, total)


def run_check(args):
    device = torch.device(args.device)
    failures, counts = 0, (0, 0, 0, 0)
    for path in args.cases:
        ok, line, case_counts = check_case(path, device)
        print(f"{path}: {line}" if args.paths else line, flush=True)
        failures += not ok
        counts = tuple(a + b for a, b in zip(counts, case_counts))
    one_step, within, beyond, total = counts
    print(f"{len(args.cases) - failures} passed, {failures} failed "
          f"({one_step} of {total} codes one step off, {100 * one_step / max(total, 1):.4f}%; "
          f"{within} further within the pre-cast bound, {beyond} further) on {device}")
    return 1 if failures else 0


# ---------------------------------------------------------------------------------------------
# bench: eager and CUDA-graphed timings on random valid inputs
# ---------------------------------------------------------------------------------------------

SWA_WIDTH = 128
SWA_PAGE = 64
EXTRA_PAGE = 16
ROTATION_BYTES = 256 << 20  # several times an H200's L2
MAX_POS = 8192
SPIN_US = 30.0  # a few times the host's cost of queueing the events and a replay
SPIN_PROBE_CYCLES = 1 << 20  # hundreds of microseconds: the probe's own launch is small beside it
CLOCK_RAMP_S = 0.2  # spinning before the calibration times, for the clocks to rise from idle


def random_cache(slots, page, record, device):
    """A cache of ceil(slots / page) contiguous blocks of random records whose values are sane:
    fp8 codes without the NaN code and ue8m0 scales 2^-9 .. 2^-1; NVFP4 codes of any value and
    e4m3 scales 0.5 .. 2."""
    blocks = -(-slots // page)

    def randint(low, high, size):
        return torch.randint(low, high, size, dtype=torch.uint8, device=device)

    if record == FP8_RECORD:
        codes = randint(0, 0x7F, (blocks, page, HEAD_DIM)) | (randint(0, 2, (blocks, page, HEAD_DIM)) << 7)
        scales = randint(118, 127, (blocks, page, HEAD_DIM // 32))
    else:
        codes = randint(0, 256, (blocks, page, HEAD_DIM // 2))
        scales = randint(0x30, 0x41, (blocks, page, HEAD_DIM // 16))
    return torch.cat((codes, scales), -1)


def random_list(s_q, width, slots, device):
    """Full slot lists of distinct random slots among `slots`: ids int32 `[s_q, width]` and lengths."""
    ids = torch.randperm(slots, device=device)[:s_q * width].view(s_q, width).int()
    return ids, torch.full((s_q,), width, dtype=torch.int32, device=device)


def rope_table(device):
    """cos/sin of the usual RoPE (base 10000) for positions below MAX_POS, fp32 `[MAX_POS, 64]`."""
    inv_freq = 10000.0 ** (-torch.arange(ROPE_PAIRS, dtype=torch.float64) / ROPE_PAIRS)
    theta = torch.arange(MAX_POS, dtype=torch.float64)[:, None] * inv_freq
    return torch.cat((theta.cos(), theta.sin()), -1).float().to(device)


def random_inputs(heads, extra_width, record, s_q, cos_sin, device):
    """decode_torch's arguments for one call: every token with its own KV rows."""
    swa_slots, extra_slots = s_q * SWA_WIDTH, s_q * extra_width
    swa_idx, swa_len = random_list(s_q, SWA_WIDTH, swa_slots, device)
    extra_idx, extra_len = random_list(s_q, extra_width, extra_slots, device)
    groups = heads // GROUP_HEADS
    return dict(
        q=torch.randn(s_q, heads, HEAD_DIM, device=device).to(torch.bfloat16),
        swa_cache=random_cache(swa_slots, SWA_PAGE, FP8_RECORD, device),
        swa_idx=swa_idx, swa_len=swa_len,
        extra_cache=random_cache(extra_slots, EXTRA_PAGE, record, device),
        extra_idx=extra_idx, extra_len=extra_len,
        positions=torch.randint(0, MAX_POS, (s_q,), device=device),
        cos_sin=cos_sin,
        sink=torch.rand(heads, device=device) * 8,
        heads=heads, softmax_scale=576 ** -0.5,
        out_data=torch.zeros(s_q, groups, GROUP_HEADS * HEAD_DIM, dtype=torch.uint8, device=device),
        out_scale=torch.zeros(s_q, groups, 32, dtype=torch.int32, device=device),
    )


def median_us(run, count, warmup, reps, device):
    """Median time in microseconds of run(i) over `reps` calls after `warmup` calls, call i using
    input set i % count: CUDA events around each call on a GPU, the wall clock on a CPU (the
    eager timing)."""
    for i in range(warmup):
        run(i % count)
    if device.type == "cuda":
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(reps)]
        for r, (start, end) in enumerate(events):
            start.record()
            run((warmup + r) % count)
            end.record()
        torch.cuda.synchronize()
        times = [start.elapsed_time(end) * 1e3 for start, end in events]
    else:
        times = []
        for r in range(reps):
            start = time.perf_counter()
            run((warmup + r) % count)
            times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def spin_cycles():
    """The torch.cuda._sleep cycle count that spins SPIN_US at the fastest of a few timed probes,
    taken once the clocks have had time to rise: at a lower clock the spin only lasts longer."""
    deadline = time.perf_counter() + CLOCK_RAMP_S
    while time.perf_counter() < deadline:
        torch.cuda._sleep(SPIN_PROBE_CYCLES)
        torch.cuda.synchronize()
    fastest = math.inf
    for _ in range(20):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(SPIN_PROBE_CYCLES)
        end.record()
        end.synchronize()
        fastest = min(fastest, start.elapsed_time(end) * 1e3)
    return math.ceil(SPIN_PROBE_CYCLES * SPIN_US / fastest)


def replay_us(graphs, warmup, reps, cycles):
    """Median, p10 and p90 in microseconds of `reps` replays after `warmup` untimed ones, replay
    i of graphs[i % len(graphs)]: each queued behind a GPU spin of `cycles` so that the host's
    launch is hidden, with CUDA events around the replay only."""
    events = []
    for i in range(warmup + reps):
        torch.cuda._sleep(cycles)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graphs[i % len(graphs)].replay()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    times = sorted(start.elapsed_time(end) * 1e3 for start, end in events[warmup:])
    at = lambda p: times[round((len(times) - 1) * p)]
    return at(0.5), at(0.1), at(0.9)


def captured_graphs(sets):
    """One CUDA graph of decode_torch per input set, sharing a memory pool (they replay one at a
    time, in order), after a warm-up on a side stream."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            decode_torch(**sets[0])
    torch.cuda.current_stream().wait_stream(side)
    pool = torch.cuda.graph_pool_handle()
    graphs = []
    for inputs in sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool):
            decode_torch(**inputs)
        graphs.append(graph)
    return graphs


def bench_config(heads, extra_width, record, s_q, cos_sin, args, device, cycles):
    """Times one configuration (the graphed calls behind spins of `cycles`); returns its JSON
    object."""
    kv_bytes = s_q * (SWA_WIDTH * FP8_RECORD + extra_width * record)
    count = max(2, -(-ROTATION_BYTES // kv_bytes))
    sets = [random_inputs(heads, extra_width, record, s_q, cos_sin, device) for _ in range(count)]
    eager_us = median_us(lambda i: decode_torch(**sets[i]), count, args.warmup, args.reps, device)
    graph = (None, None, None)
    if device.type == "cuda":
        graph = replay_us(captured_graphs(sets), args.warmup, args.reps, cycles)
    graph_us, graph_p10_us, graph_p90_us = (None if t is None else round(t, 2) for t in graph)
    return dict(heads=heads, nk=SWA_WIDTH, ne=extra_width, record=record, s_q=s_q,
                eager_us=round(eager_us, 2), graph_us=graph_us, graph_p10_us=graph_p10_us,
                graph_p90_us=graph_p90_us, kv_bytes=kv_bytes, input_sets=count)


def run_bench(args):
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: pass --device cpu for an eager smoke test")
    torch.manual_seed(0)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    cycles = spin_cycles() if device.type == "cuda" else None
    print(f"decode_torch on {name}, torch {torch.__version__}: {args.reps} calls after "
          f"{args.warmup}, rotating input sets of >= {ROTATION_BYTES >> 20} MiB of KV in all; "
          f"eager: median of events around each call; graph: median (p10-p90) of replays, each "
          f"behind a spin of {cycles} cycles ({SPIN_US:.0f} us at the calibration's fastest clock)")
    print(f"{'heads':>5} {'nk':>4} {'ne':>5} {'record':>6} {'s_q':>4} {'sets':>5} {'kv MB':>8} "
          f"{'eager us':>10} {'graph us (p10-p90)':>24}")
    cos_sin = rope_table(device)
    results = []
    configs = [(heads, extra_width, record, s_q) for heads in (16, 32)
               for extra_width in (512, 1024) for record in (FP8_RECORD, FP4_RECORD)
               for s_q in args.s_q]
    k, n = args.part
    for heads, extra_width, record, s_q in configs[k - 1::n]:
        r = bench_config(heads, extra_width, record, s_q, cos_sin, args, device, cycles)
        if device.type == "cuda":
            torch.cuda.empty_cache()  # hand the last configuration's memory back
        results.append(r)
        graph = "-" if r["graph_us"] is None else (
            f"{r['graph_us']:.1f} ({r['graph_p10_us']:.1f}-{r['graph_p90_us']:.1f})")
        print(f"{heads:>5} {SWA_WIDTH:>4} {extra_width:>5} {record:>6} {s_q:>4} "
              f"{r['input_sets']:>5} {r['kv_bytes'] / 1e6:>8.2f} {r['eager_us']:>10.1f} "
              f"{graph:>24}", flush=True)
    with open(args.out, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(r) for r in results) + "\n]\n")
    print(f"wrote {len(results)} configurations to {args.out}")
    return 0


def part(text):
    """`--part K/N`, 1 <= K <= N."""
    k, _, n = text.partition("/")
    if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise argparse.ArgumentTypeError(f"{text}: give K/N with 1 <= K <= N, e.g. 1/2")
    return int(k), int(n)


def main():
    default_device = "cuda" if torch.cuda.is_available() else "cpu"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="check decode_torch against case files")
    check.add_argument("cases", nargs="+", help=".safetensors case files with expected outputs")
    check.add_argument("--device", default=default_device)
    check.add_argument("--paths", action="store_true", help="prefix each line with the file path")
    bench = commands.add_parser("bench", help="time decode_torch eager and CUDA-graphed")
    bench.add_argument("--out", required=True, help="JSON file for the results")
    bench.add_argument("--device", default=default_device)
    bench.add_argument("--s-q", type=lambda s: [int(v) for v in s.split(",")], default=[1, 32, 128, 512],
                       help="token counts, comma-separated (default 1,32,128,512)")
    bench.add_argument("--warmup", type=int, default=10,
                       help="untimed calls (and replays) first (default 10)")
    bench.add_argument("--part", type=part, default=(1, 1), metavar="K/N",
                       help="every N-th configuration from the K-th, in bench_decode's order, "
                            "so that parts run apart time each configuration once (default 1/1)")
    bench.add_argument("--reps", type=int, default=50,
                       help="timed calls, and timed replays (default 50)")
    args = parser.parse_args()
    with torch.inference_mode():
        return run_check(args) if args.command == "check" else run_bench(args)


if __name__ == "__main__":
    sys.exit(main())
