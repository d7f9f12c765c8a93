//! The exact reference of the decode op: SPEC "Math" in f64, from the same bf16 Q (after RoPE,
//! rounded to bf16 as the kernel does) and the same bf16 KV rows the kernel sees.
//!
//! Only rows the SPEC calls valid are read (`i < min(len, width)`, `0 <= id < num_blocks *
//! page`), so NaN or garbage anywhere else cannot reach the result. The f64 result is rounded
//! once to f32 (the pre-cast output) and cast to MXFP8 with the kernel's own rounding
//! ([`OutputBuffers::write_mxfp8`]).

use std::thread;

use crate::formats::bf16;
use crate::swap_ab_decode::output::OutputBuffers;
use crate::swap_ab_decode::problem::{DecodeProblem, ProblemError};
use crate::swap_ab_decode::{HEAD_DIM, ROPE_DIM, ROPE_START, record};

/// Pairs of RoPE dims: pair f rotates dims 448 + 2f and 448 + 2f + 1.
const ROPE_PAIRS: usize = ROPE_DIM / 2;

/// What the op should produce for a [`DecodeProblem`].
#[derive(Clone, Debug, PartialEq)]
pub struct ReferenceOutput {
    /// Live heads.
    pub heads: usize,
    /// Output before the MXFP8 cast, `[s_q, heads, 512]`, after inverse RoPE.
    pub o: Vec<f32>,
    /// The problem's output buffers with the live groups written: every byte a kernel launch
    /// should leave behind.
    pub out: OutputBuffers,
}

impl ReferenceOutput {
    /// Tokens.
    pub fn s_q(&self) -> usize {
        self.out.layout.s_q
    }

    /// Pre-cast output of token b, head h.
    pub fn head_output(&self, b: usize, h: usize) -> &[f32] {
        let start = (b * self.heads + h) * HEAD_DIM;
        &self.o[start..start + HEAD_DIM]
    }
}

/// Computes the op for every token (tokens in parallel). Errors when the problem's shapes are
/// wrong ([`DecodeProblem::validate`]) or when a value the op reads has no defined result:
/// non-finite Q in a live head, non-finite cos/sin at a used position, or a valid row whose
/// values bf16 cannot hold exactly (SPEC "Records": cache writers guarantee they fit).
pub fn reference(problem: &DecodeProblem) -> Result<ReferenceOutput, ProblemError> {
    problem.validate()?;
    let s_q = problem.s_q();
    let heads = problem.heads();
    let mut o = vec![0f32; s_q * heads * HEAD_DIM];
    let workers = thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(s_q);
    let tokens_per_worker = s_q.div_ceil(workers);
    thread::scope(|scope| {
        let jobs: Vec<_> = o
            .chunks_mut(tokens_per_worker * heads * HEAD_DIM)
            .enumerate()
            .map(|(w, outputs)| {
                scope.spawn(move || {
                    for (i, token_out) in outputs.chunks_mut(heads * HEAD_DIM).enumerate() {
                        token_output(problem, w * tokens_per_worker + i, token_out)?;
                    }
                    Ok::<(), ProblemError>(())
                })
            })
            .collect();
        jobs.into_iter()
            .try_for_each(|job| job.join().expect("reference worker panicked"))
    })?;
    let mut out = problem.out.clone();
    out.write_mxfp8(&o, heads);
    Ok(ReferenceOutput { heads, o, out })
}

/// `[heads, 512]` output of token `b` into `out`.
fn token_output(problem: &DecodeProblem, b: usize, out: &mut [f32]) -> Result<(), ProblemError> {
    let queries = roped_queries(problem, b)?;
    let rows = valid_rows(problem, b)?;
    let cos_sin = problem.cos_sin_row(problem.positions[b] as usize);
    let scale = f64::from(problem.softmax_scale);
    for (h, (q, head_out)) in queries.iter().zip(out.chunks_mut(HEAD_DIM)).enumerate() {
        let logits: Vec<f64> = rows.iter().map(|kv| scale * dot(q, kv)).collect();
        let weights = attention_weights(&logits, f64::from(problem.sink[h]));
        let mut acc = [0f64; HEAD_DIM];
        for (p, kv) in weights.iter().zip(&rows) {
            for (a, &v) in acc.iter_mut().zip(kv) {
                *a += p * v;
            }
        }
        inverse_rope(&mut acc, cos_sin);
        for (o, a) in head_out.iter_mut().zip(acc) {
            *o = a as f32;
        }
    }
    Ok(())
}

/// The live heads' queries of token `b` after RoPE, as the kernel's bf16 operand (SPEC step 2,
/// computed like the seed: `fma(e, c, -(o * s))` and `fma(o, c, e * s)` in f32, then rounded to
/// nearest even bf16).
fn roped_queries(problem: &DecodeProblem, b: usize) -> Result<Vec<[f64; HEAD_DIM]>, ProblemError> {
    let cos_sin = problem.cos_sin_row(problem.positions[b] as usize);
    if let Some(f) = cos_sin.iter().position(|v| !v.is_finite()) {
        return Err(ProblemError::Value {
            token: b,
            problem: format!(
                "cos_sin[{}, {f}] is {}; used rows must be finite",
                problem.positions[b], cos_sin[f]
            ),
        });
    }
    let mut queries = vec![[0f64; HEAD_DIM]; problem.heads()];
    for (h, q) in queries.iter_mut().enumerate() {
        let raw: [f32; HEAD_DIM] = std::array::from_fn(|d| problem.q.get(b, h, d).to_f32());
        if let Some(d) = raw.iter().position(|v| !v.is_finite()) {
            return Err(ProblemError::Value {
                token: b,
                problem: format!(
                    "q[{b}, {h}, {d}] is {}; live heads' queries must be finite",
                    raw[d]
                ),
            });
        }
        for (qd, &v) in q.iter_mut().zip(&raw[..ROPE_START]) {
            *qd = f64::from(v);
        }
        for f in 0..ROPE_PAIRS {
            let (e, o) = (raw[ROPE_START + 2 * f], raw[ROPE_START + 2 * f + 1]);
            let (c, s) = (cos_sin[f], cos_sin[f + ROPE_PAIRS]);
            q[ROPE_START + 2 * f] = f64::from(bf16::round(e.mul_add(c, -(o * s))).to_f32());
            q[ROPE_START + 2 * f + 1] = f64::from(bf16::round(o.mul_add(c, e * s)).to_f32());
        }
    }
    Ok(queries)
}

/// The bf16 KV rows token `b` attends to: the valid rows of the SWA list, then of the
/// compressed list (the order does not matter to the math). Invalid rows are never read.
fn valid_rows(problem: &DecodeProblem, b: usize) -> Result<Vec<[f64; HEAD_DIM]>, ProblemError> {
    let mut rows = Vec::new();
    for (name, list, cache) in [
        ("swa", &problem.swa, &problem.swa_cache),
        ("extra", &problem.extra, &problem.extra_cache),
    ] {
        for i in 0..list.limit(b) {
            let Some(slot) = cache.slot(list.id(b, i)) else {
                continue;
            };
            let row = record::decode_bf16(cache.format, cache.record(slot)).map_err(|err| {
                ProblemError::Value {
                    token: b,
                    problem: format!("{name} row {i} (slot {slot}): {err}"),
                }
            })?;
            rows.push(row.map(|v| f64::from(v.to_f32())));
        }
    }
    Ok(rows)
}

/// Softmax weights with an attention sink (SPEC steps 4-5): `p_i = exp(l_i - m) / (exp(sink -
/// m) + sum_j exp(l_j - m))`, m the max of the logits and the sink. No rows, or a sink of +inf,
/// leave all mass to the sink (all weights 0); a sink of -inf drops out.
fn attention_weights(logits: &[f64], sink: f64) -> Vec<f64> {
    if sink == f64::INFINITY {
        return vec![0.0; logits.len()];
    }
    let m = logits.iter().copied().fold(sink, f64::max);
    let exps: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
    let denominator = (sink - m).exp() + exps.iter().sum::<f64>();
    exps.iter().map(|e| e / denominator).collect()
}

/// Inverse RoPE of an output row (SPEC step 6): rotation by -theta of each GPT-J pair.
fn inverse_rope(o: &mut [f64; HEAD_DIM], cos_sin: &[f32]) {
    for f in 0..ROPE_PAIRS {
        let (c, s) = (f64::from(cos_sin[f]), f64::from(cos_sin[f + ROPE_PAIRS]));
        let (e, od) = (o[ROPE_START + 2 * f], o[ROPE_START + 2 * f + 1]);
        o[ROPE_START + 2 * f] = e * c + s * od;
        o[ROPE_START + 2 * f + 1] = od * c - s * e;
    }
}

/// Dot product with independent partial sums, so the compiler can vectorise it.
fn dot(a: &[f64; HEAD_DIM], b: &[f64; HEAD_DIM]) -> f64 {
    let mut partial = [0f64; 8];
    for (x, y) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
        for k in 0..8 {
            partial[k] += x[k] * y[k];
        }
    }
    partial.iter().sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap_ab_decode::{CaseSpec, OutputLayout, edge_case_keys, generate};
    use dsl_core::Target;
    use half::bf16;

    fn problem() -> DecodeProblem {
        let key = edge_case_keys(Target::Sm100a)[0];
        generate(
            2,
            &CaseSpec {
                key,
                s_q: 2,
                adversarial: false,
            },
        )
        .unwrap()
        .problem
    }

    fn error_of(edit: impl FnOnce(&mut DecodeProblem)) -> String {
        let mut p = problem();
        edit(&mut p);
        reference(&p).unwrap_err().to_string()
    }

    #[test]
    fn inputs_without_a_defined_result_are_refused_with_the_reason() {
        let err = error_of(|p| p.q.set(1, 3, 7, bf16::NAN));
        assert!(
            err.contains("token 1") && err.contains("q[1, 3, 7] is NaN"),
            "{err}"
        );
        let err = error_of(|p| p.positions[0] = p.max_pos() as i64);
        assert!(err.contains("outside the cos_sin table"), "{err}");
        let err = error_of(|p| p.positions[1] = -1);
        assert!(err.contains("token 1: position -1"), "{err}");
        let err = error_of(|p| p.sink[2] = f32::NAN);
        assert!(err.contains("head 2 is NaN"), "{err}");
        let err = error_of(|p| {
            let pos = p.positions[0] as usize;
            p.cos_sin[pos * ROPE_DIM + 40] = f32::INFINITY;
        });
        assert!(
            err.contains("cos_sin") && err.contains("must be finite"),
            "{err}"
        );
        let err = error_of(|p| {
            let slot = p.swa_cache.slot(p.swa.id(0, 0)).unwrap();
            p.swa_cache.record_mut(slot)[HEAD_DIM] = 0xFF; // NaN scale of dims 0..32
        });
        assert!(
            err.contains("swa row 0") && err.contains("bf16 cannot hold exactly"),
            "{err}"
        );
        let err = error_of(|p| {
            p.swa.ids.pop();
        });
        assert!(err.contains("swa_idx"), "{err}");
        let err = error_of(|p| p.out.scale.truncate(3));
        assert!(
            err.contains("out_scale") && err.contains("shorter"),
            "{err}"
        );
    }

    #[test]
    fn tokens_are_independent_of_the_batch_around_them() {
        let p = problem();
        let both = reference(&p).unwrap();
        let mut first = p.clone();
        first.q.s_q = 1;
        first.q.data.truncate(first.q.token_stride);
        first.out = OutputBuffers::filled(OutputLayout::row_major(1, p.out.layout.groups), 0, 0);
        let alone = reference(&first).unwrap();
        assert_eq!(alone.o[..], both.o[..alone.o.len()]);
    }

    #[test]
    fn sink_takes_the_mass_it_is_due() {
        let w = attention_weights(&[0.0, 0.0], 0.0);
        assert!(w.iter().all(|&p| (p - 1.0 / 3.0).abs() < 1e-15));
        let w = attention_weights(&[0.0, 0.0], f64::NEG_INFINITY);
        assert_eq!(w, vec![0.5, 0.5]);
        assert_eq!(
            attention_weights(&[1.0, 2.0], f64::INFINITY),
            vec![0.0, 0.0]
        );
        assert!(attention_weights(&[], 0.3).is_empty());
        assert!(attention_weights(&[], f64::NEG_INFINITY).is_empty());
    }

    #[test]
    fn huge_logits_do_not_overflow() {
        let w = attention_weights(&[1000.0, 1000.0 - 2f64.ln()], 0.0);
        // 1000 - ln 2 carries an absolute rounding error of ~1e-13 into the exponent.
        assert!((w[0] - 2.0 / 3.0).abs() < 1e-12 && (w[1] - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn inverse_rope_undoes_the_rotation() {
        let theta: Vec<f32> = (0..ROPE_PAIRS).map(|f| 0.3 + f as f32).collect();
        let cos_sin: Vec<f32> = theta
            .iter()
            .map(|t| t.cos())
            .chain(theta.iter().map(|t| t.sin()))
            .collect();
        let mut o = [0f64; HEAD_DIM];
        for f in 0..ROPE_PAIRS {
            let (c, s) = (f64::from(cos_sin[f]), f64::from(cos_sin[f + ROPE_PAIRS]));
            // Rotate (1, 2) forward by theta, as RoPE does.
            o[ROPE_START + 2 * f] = c - 2.0 * s;
            o[ROPE_START + 2 * f + 1] = 2.0 * c + s;
        }
        inverse_rope(&mut o, &cos_sin);
        for f in 0..ROPE_PAIRS {
            // cos^2 + sin^2 of the f32 table is 1 within f32 rounding.
            assert!((o[ROPE_START + 2 * f] - 1.0).abs() < 1e-6);
            assert!((o[ROPE_START + 2 * f + 1] - 2.0).abs() < 1e-6);
        }
    }
}
