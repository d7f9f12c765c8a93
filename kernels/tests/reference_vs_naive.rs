//! The reference against a second, deliberately naive implementation of the SPEC that shares
//! nothing with it but the format decoders: plain loops over the raw buffers (bytes, the
//! interleaved Q, strided outputs), the sink handled outside the max, and an MXFP8 cast built
//! from the e4m3 decoder alone (nearest code by exhaustive search, scale by doubling).
//!
//! Tolerances: both compute in f64, in different orders, and round once to f32, so outputs may
//! differ by one f32 ulp where the f64 values straddle a rounding boundary, plus f64 rounding
//! noise far below that (1e-10 of the head's max covers sums of a few thousand terms with
//! cancellation). Bytes must be identical wherever the two f32 chunks are identical, which
//! is nearly everywhere; elsewhere codes may be one step apart and scales may differ only next
//! to a power of two.

// Index loops that read like the SPEC's formulas are the point of a naive implementation.
#![allow(clippy::needless_range_loop)]

use dsl_core::Target;
use half::bf16;
use kernels::formats::{e2m1, e4m3, ue8m0};
use kernels::swap_ab_decode::{
    CaseSpec, DecodeCase, DecodeProblem, ExtraRecord, ReferenceOutput, edge_case_keys, edge_cases,
    generate, realistic_keys, reference,
};

const DIM: usize = 512;

struct Naive {
    o: Vec<f32>,
    data: Vec<u8>,
    scale: Vec<i32>,
}

fn naive(p: &DecodeProblem) -> Naive {
    let s_q = p.q.s_q;
    let heads = p.key.heads;
    let mut o = vec![0f32; s_q * heads * DIM];
    for b in 0..s_q {
        let pos = p.positions[b] as usize;
        let cos = &p.cos_sin[pos * 64..pos * 64 + 32];
        let sin = &p.cos_sin[pos * 64 + 32..pos * 64 + 64];
        let rows = naive_rows(p, b);
        for h in 0..heads {
            let mut q = vec![0f64; DIM];
            for d in 0..DIM {
                let at = b * p.q.token_stride + (d / 16) * p.q.padded_heads * 16 + h * 16 + d % 16;
                q[d] = f64::from(p.q.data[at].to_f32());
            }
            for f in 0..32 {
                let (e, od) = (q[448 + 2 * f] as f32, q[449 + 2 * f] as f32);
                q[448 + 2 * f] =
                    f64::from(bf16::from_f32(e.mul_add(cos[f], -(od * sin[f]))).to_f32());
                q[449 + 2 * f] = f64::from(bf16::from_f32(od.mul_add(cos[f], e * sin[f])).to_f32());
            }
            let sink = f64::from(p.sink[h]);
            let mut out = vec![0f64; DIM];
            if !rows.is_empty() && sink != f64::INFINITY {
                let logits: Vec<f64> = rows
                    .iter()
                    .map(|kv| {
                        f64::from(p.softmax_scale) * (0..DIM).map(|d| q[d] * kv[d]).sum::<f64>()
                    })
                    .collect();
                let m = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let sink_term = if sink == f64::NEG_INFINITY {
                    0.0
                } else {
                    (sink - m).exp()
                };
                let exps: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
                let denominator = sink_term + exps.iter().sum::<f64>();
                for d in 0..DIM {
                    out[d] =
                        rows.iter().zip(&exps).map(|(kv, e)| e * kv[d]).sum::<f64>() / denominator;
                }
            }
            for f in 0..32 {
                let (c, s) = (f64::from(cos[f]), f64::from(sin[f]));
                let (e, od) = (out[448 + 2 * f], out[449 + 2 * f]);
                out[448 + 2 * f] = e * c + s * od;
                out[449 + 2 * f] = od * c - s * e;
            }
            for d in 0..DIM {
                o[(b * heads + h) * DIM + d] = out[d] as f32;
            }
        }
    }
    let (data, scale) = naive_cast(p, &o);
    Naive { o, data, scale }
}

/// Token b's valid rows, decoded straight from the cache bytes.
fn naive_rows(p: &DecodeProblem, b: usize) -> Vec<Vec<f64>> {
    let mut rows = Vec::new();
    for (list, cache) in [(&p.swa, &p.swa_cache), (&p.extra, &p.extra_cache)] {
        let len = list.lens[b];
        let limit = if len <= 0 {
            0
        } else {
            (len as usize).min(list.width)
        };
        let record = cache.format.bytes();
        for i in 0..limit {
            let id = list.id(b, i);
            if id < 0 || id as i64 >= (cache.num_blocks * cache.page) as i64 {
                continue;
            }
            let id = id as usize;
            let at = (id / cache.page) * cache.block_stride + (id % cache.page) * record;
            let bytes = &cache.bytes[at..at + record];
            let row: Vec<f64> = (0..DIM)
                .map(|d| match cache.format {
                    ExtraRecord::Fp8 => {
                        f64::from(e4m3::decode(bytes[d]))
                            * f64::from(ue8m0::decode(bytes[512 + d / 32]))
                    }
                    ExtraRecord::Nvfp4 => {
                        let nibble = if d % 2 == 0 {
                            bytes[d / 2] & 0xF
                        } else {
                            bytes[d / 2] >> 4
                        };
                        f64::from(e2m1::decode(nibble))
                            * f64::from(e4m3::decode(bytes[256 + d / 16]))
                    }
                })
                .collect();
            rows.push(row);
        }
    }
    rows
}

/// The MXFP8 o-fused cast from first principles.
fn naive_cast(p: &DecodeProblem, o: &[f32]) -> (Vec<u8>, Vec<i32>) {
    let layout = p.out.layout;
    let mut data = p.out.data.clone();
    let mut scale = p.out.scale.clone();
    let heads = p.key.heads;
    for b in 0..p.q.s_q {
        for h in 0..heads {
            for cc in 0..16 {
                let chunk = &o[(b * heads + h) * DIM + cc * 32..][..32];
                let amax = chunk
                    .iter()
                    .fold(1e-10f32, |m, x| if x.abs() > m { x.abs() } else { m });
                // Smallest 2^k with 448 * 2^k >= amax (exact comparisons in f64).
                let mut k = -127;
                while 448.0 * 2f64.powi(k) < f64::from(amax) && k < 127 {
                    k += 1;
                }
                let ex = (k + 127) as u8;
                let (g, ka) = (h / 8, cc * 8 + h % 8);
                for (j, &x) in chunk.iter().enumerate() {
                    let at = b * layout.data_strides[0] + g * layout.data_strides[1] + ka * 32 + j;
                    data[at] = nearest_e4m3(f64::from(x) * 2f64.powi(-k));
                }
                let word = b * layout.scale_strides[0]
                    + g * layout.scale_strides[1]
                    + (ka / 4) * layout.scale_strides[2];
                let mut bytes = scale[word].to_le_bytes();
                bytes[ka % 4] = ex;
                scale[word] = i32::from_le_bytes(bytes);
            }
        }
    }
    (data, scale)
}

/// The e4m3 code nearest to x (ties to the even code), saturating at 448, by trying them all.
fn nearest_e4m3(x: f64) -> u8 {
    let sign = if x.is_sign_negative() { 0x80 } else { 0 };
    let mut best = 0u8;
    for code in 1..=0x7Eu8 {
        let (d_best, d_code) = (
            (f64::from(e4m3::decode(best)) - x.abs()).abs(),
            (f64::from(e4m3::decode(code)) - x.abs()).abs(),
        );
        if d_code < d_best || (d_code == d_best && code % 2 == 0) {
            best = code;
        }
    }
    sign | best
}

fn check(case: &DecodeCase) {
    let p = &case.problem;
    let label = format!("{} {}", p.key, case.name);
    let reference: ReferenceOutput = reference(p).unwrap_or_else(|e| panic!("{label}: {e}"));
    let naive = naive(p);
    let heads = p.key.heads;
    let mut identical_chunks = 0;
    let mut chunks = 0;
    for b in 0..p.q.s_q {
        for h in 0..heads {
            let r = reference.head_output(b, h);
            let n = &naive.o[(b * heads + h) * DIM..][..DIM];
            let head_max = r.iter().fold(0f32, |m, x| m.max(x.abs()));
            for d in 0..DIM {
                let tolerance = f32::EPSILON * r[d].abs().max(n[d].abs()) + 1e-10 * head_max;
                assert!(
                    (r[d] - n[d]).abs() <= tolerance,
                    "{label}: token {b} head {h} dim {d}: {} vs {}",
                    r[d],
                    n[d]
                );
            }
            for cc in 0..16 {
                chunks += 1;
                let (rc, nc) = (&r[cc * 32..cc * 32 + 32], &n[cc * 32..cc * 32 + 32]);
                let (g, ka) = (h / 8, cc * 8 + h % 8);
                let layout = p.out.layout;
                let word = layout.scale_index(b, g, ka / 4);
                let (r_ex, n_ex) = (
                    reference.out.scale[word].to_le_bytes()[ka % 4],
                    naive.scale[word].to_le_bytes()[ka % 4],
                );
                let codes = layout.data_index(b, g, ka * 32)..layout.data_index(b, g, ka * 32) + 32;
                // Equal as numbers: the sign of a zero output is not specified (the kernel's
                // accumulator decides it), and +0 and -0 codes are the same value.
                if rc == nc {
                    identical_chunks += 1;
                    assert_eq!(
                        r_ex, n_ex,
                        "{label}: scale of token {b} head {h} chunk {cc}"
                    );
                    for i in codes {
                        assert_eq!(
                            e4m3::code_steps(reference.out.data[i], naive.data[i]),
                            Some(0),
                            "{label}: code of token {b} head {h} chunk {cc}"
                        );
                    }
                } else {
                    let amax = rc.iter().fold(1e-10f32, |m, x| m.max(x.abs())) / 448.0;
                    let near_pow2 = (amax / 2f32.powf(amax.log2().round()) - 1.0).abs() < 1e-5;
                    assert!(
                        r_ex == n_ex || near_pow2,
                        "{label}: scale of token {b} head {h} chunk {cc}"
                    );
                    if r_ex == n_ex {
                        for i in codes {
                            assert!(
                                e4m3::code_steps(reference.out.data[i], naive.data[i])
                                    .is_some_and(|s| s <= 1),
                                "{label}"
                            );
                        }
                    }
                }
            }
        }
    }
    assert!(
        identical_chunks * 100 >= chunks * 99,
        "{label}: only {identical_chunks} of {chunks} chunks equal"
    );
    // Everything outside the live groups is the initial poison in both.
    let layout = p.out.layout;
    for i in 0..p.out.data.len() {
        let live = (0..p.q.s_q).any(|b| {
            (0..heads / 8).any(|g| {
                (layout.data_index(b, g, 0)..layout.data_index(b, g, 0) + 4096).contains(&i)
            })
        });
        if !live {
            assert_eq!(
                reference.out.data[i], p.out.data[i],
                "{label}: out_data[{i}] outside the live groups changed"
            );
            assert_eq!(naive.data[i], p.out.data[i]);
        }
    }
    assert_eq!(
        reference.out.scale, naive.scale,
        "{label}: scale words (live and not) differ"
    );
}

#[test]
fn agrees_on_every_edge_case_of_every_edge_key() {
    for key in edge_case_keys(Target::Sm100a) {
        for case in edge_cases(&key).unwrap() {
            check(&case);
        }
    }
}

#[test]
fn agrees_on_generated_cases() {
    for (i, key) in realistic_keys(Target::Sm90a).into_iter().enumerate() {
        for adversarial in [false, true] {
            let spec = CaseSpec {
                key,
                s_q: 1 + i % 3,
                adversarial,
            };
            check(&generate(i as u64, &spec).unwrap());
        }
    }
}

#[test]
fn edge_cases_whose_answer_is_known_give_it() {
    let key = edge_case_keys(Target::Sm100a)[1];
    let cases = edge_cases(&key).unwrap();
    let by_name = |name: &str| {
        cases
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no case {name}"))
    };
    for name in [
        "all_ids_invalid",
        "len_zero",
        "len_negative",
        "sink_pos_inf",
    ] {
        let r = reference(&by_name(name).problem).unwrap();
        assert!(
            r.o.iter().all(|&x| x == 0.0),
            "{name}: the sink takes all the mass"
        );
    }
    let sink_neg_inf = reference(&by_name("sink_neg_inf").problem).unwrap();
    assert!(sink_neg_inf.o[..key.heads * DIM].iter().any(|&x| x != 0.0));
    assert!(
        sink_neg_inf.o[key.heads * DIM..].iter().all(|&x| x == 0.0),
        "no rows and no sink: 0"
    );
    // A length beyond the width reads exactly the full rows.
    let mut full = by_name("len_beyond_width").problem.clone();
    for list in [&mut full.swa, &mut full.extra] {
        list.lens[0] = list.width as i32;
        list.lens[1] = list.width as i32;
    }
    assert_eq!(
        reference(&by_name("len_beyond_width").problem).unwrap().o,
        reference(&full).unwrap().o
    );
}

#[test]
fn unread_memory_cannot_change_the_result() {
    let key = edge_case_keys(Target::Sm90a)[4];
    let case = edge_cases(&key)
        .unwrap()
        .into_iter()
        .find(|c| c.name == "nan_in_unselected_rows")
        .unwrap();
    let before = reference(&case.problem).unwrap();
    // Zero every byte of both caches that no valid row covers, and the Q padding: same result.
    let mut cleaned = case.problem.clone();
    for which in 0..2 {
        let (list, cache) = if which == 0 {
            (&case.problem.swa, &case.problem.swa_cache)
        } else {
            (&case.problem.extra, &case.problem.extra_cache)
        };
        let mut keep = vec![false; cache.bytes.len()];
        for b in 0..case.problem.q.s_q {
            for i in 0..list.limit(b) {
                if let Some(slot) = cache.slot(list.id(b, i)) {
                    let at = cache.record_offset(slot);
                    keep[at..at + cache.record_bytes()].fill(true);
                }
            }
        }
        let target = if which == 0 {
            &mut cleaned.swa_cache
        } else {
            &mut cleaned.extra_cache
        };
        for (byte, keep) in target.bytes.iter_mut().zip(keep) {
            if !keep {
                *byte = 0;
            }
        }
    }
    assert_eq!(reference(&cleaned).unwrap().o, before.o);
}
