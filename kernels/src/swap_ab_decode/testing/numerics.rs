//! The SPEC's numerics contract, as one comparison that interpreter and GPU tests call:
//! [`compare`] a kernel's output buffers (and, where observable, its pre-cast f32 output)
//! with the [`ReferenceOutput`], then assert [`NumericsReport::ok`] and print the report.

use std::fmt;

use super::reference::ReferenceOutput;
use crate::formats::e4m3;
use crate::formats::mxfp8::{self, BLOCK};
use crate::swap_ab_decode::HEAD_DIM;
use crate::swap_ab_decode::output::{
    CHUNKS_PER_HEAD, GROUP_CODES, GROUP_SCALE_WORDS, OutputBuffers, live_groups, o_fused_unit,
};

/// Largest share of output codes that may differ from the reference (each by one step).
pub const MAX_DIFFERING_CODES: f64 = 0.02;
/// A chunk's scale may differ where its amax / 448 is this close (relative) to a power of two.
pub const SCALE_AMBIGUITY: f64 = 1e-3;
/// Pre-cast error bound per (token, head), relative to that head's max |o|.
pub const PRECAST_TOLERANCE: f64 = 2e-4;

/// The absolute floor of the pre-cast bound: half the smallest nonzero value the MXFP8
/// cast can write at its floored scale (amax floored at [`mxfp8::AMAX_FLOOR`]), about
/// 2.2e-16. An error below it cannot move the value onto another code of a chunk whose
/// amax is at the floor, so a head whose true output lies far below it (a sink of 88.7
/// puts it near 3.6e-37, where `ex2.approx.ftz` flushes the weights to zero) is held to
/// its output bytes, not to a relative bound no f32 kernel can meet.
pub fn precast_floor() -> f64 {
    0.5 * f64::from(mxfp8::decode_value(
        1,
        mxfp8::scale_exponent(mxfp8::AMAX_FLOOR),
    ))
}
/// Mismatches listed in the report's text.
const SHOWN: usize = 8;

/// A code more than one step from the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodeMismatch {
    pub token: usize,
    pub head: usize,
    pub dim: usize,
    pub kernel: u8,
    pub reference: u8,
}

/// A scale byte that differs from the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleMismatch {
    pub token: usize,
    pub head: usize,
    /// 32-dim chunk of the head.
    pub chunk: usize,
    pub kernel: u8,
    pub reference: u8,
}

/// A byte outside the live groups that the kernel changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StrayWrite {
    /// `"out_data"` or `"out_scale"`.
    pub tensor: &'static str,
    /// Index into the storage (codes, or i32 words).
    pub index: usize,
}

/// The pre-cast error of one (token, head).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadError {
    pub token: usize,
    pub head: usize,
    /// max |kernel - reference| over the head's 512 dims (infinite if the kernel has NaN).
    pub max_abs_error: f64,
    /// [`PRECAST_TOLERANCE`] times the reference head's max |o|.
    pub bound: f64,
}

/// Everything [`compare`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct NumericsReport {
    /// Live codes compared.
    pub codes: usize,
    /// Codes exactly one step from the reference.
    pub codes_one_step_off: usize,
    /// Codes further off (or NaN against a number) and outside the head's pre-cast bound
    /// ([`within_bound`]): must be 0.
    pub codes_beyond_one_step: usize,
    /// The first of those.
    pub first_codes_beyond_one_step: Vec<CodeMismatch>,
    /// Codes further off but within the head's pre-cast bound: allowed, reported.
    pub codes_beyond_one_step_within_bound: usize,
    /// Live scale bytes compared.
    pub scales: usize,
    /// Reference chunks whose amax / 448 is within [`SCALE_AMBIGUITY`] of a power of two.
    pub ambiguous_scales: usize,
    /// Scale bytes that differ in those chunks: allowed, reported.
    pub ambiguous_scales_differing: usize,
    /// Scale bytes that differ elsewhere: must be 0.
    pub scales_differing: usize,
    /// The first of those.
    pub first_scales_differing: Vec<ScaleMismatch>,
    /// Bytes outside the live groups the kernel changed: must be 0.
    pub stray_writes: usize,
    /// The first of those.
    pub first_stray_writes: Vec<StrayWrite>,
    /// Pre-cast error per (token, head), when the kernel's pre-cast output was given.
    pub precast: Option<Vec<HeadError>>,
}

impl NumericsReport {
    /// Share of live codes that differ from the reference.
    pub fn differing_fraction(&self) -> f64 {
        let differing = self.codes_one_step_off
            + self.codes_beyond_one_step
            + self.codes_beyond_one_step_within_bound;
        differing as f64 / self.codes.max(1) as f64
    }

    /// (token, head) pairs over the pre-cast bound (NaN counts as over).
    pub fn precast_violations(&self) -> usize {
        self.precast.as_ref().map_or(0, |heads| {
            heads
                .iter()
                .filter(|e| e.max_abs_error.is_nan() || e.max_abs_error > e.bound)
                .count()
        })
    }

    /// The (token, head) with the largest error relative to its bound.
    pub fn worst_head(&self) -> Option<HeadError> {
        let ratio = |e: &HeadError| {
            if e.bound > 0.0 {
                e.max_abs_error / e.bound
            } else {
                e.max_abs_error * f64::INFINITY
            }
        };
        self.precast
            .as_ref()?
            .iter()
            .copied()
            .max_by(|a, b| ratio(a).total_cmp(&ratio(b)))
    }

    /// Whether the kernel meets the numerics contract.
    pub fn ok(&self) -> bool {
        self.codes_beyond_one_step == 0
            && self.differing_fraction() <= MAX_DIFFERING_CODES
            && self.scales_differing == 0
            && self.stray_writes == 0
            && self.precast_violations() == 0
    }
}

impl fmt::Display for NumericsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "numerics vs the f64 reference: {}",
            if self.ok() { "ok" } else { "FAILED" }
        )?;
        writeln!(
            f,
            "  e4m3 codes: {} compared, {:.3}% differ (limit {}%): {} one step off, {} further within the pre-cast bound (allowed), {} further (must be 0)",
            self.codes,
            100.0 * self.differing_fraction(),
            100.0 * MAX_DIFFERING_CODES,
            self.codes_one_step_off,
            self.codes_beyond_one_step_within_bound,
            self.codes_beyond_one_step
        )?;
        for m in &self.first_codes_beyond_one_step {
            writeln!(
                f,
                "    token {} head {} dim {}: kernel {:#04x} ({}), reference {:#04x} ({})",
                m.token,
                m.head,
                m.dim,
                m.kernel,
                e4m3::decode(m.kernel),
                m.reference,
                e4m3::decode(m.reference)
            )?;
        }
        writeln!(
            f,
            "  ue8m0 scales: {} compared, {} differ (must be 0); {} of the {} chunks within {:e} of a power of two differ (allowed)",
            self.scales,
            self.scales_differing,
            self.ambiguous_scales_differing,
            self.ambiguous_scales,
            SCALE_AMBIGUITY
        )?;
        for m in &self.first_scales_differing {
            writeln!(
                f,
                "    token {} head {} dims {}..{}: kernel {}, reference {}",
                m.token,
                m.head,
                m.chunk * BLOCK,
                (m.chunk + 1) * BLOCK,
                m.kernel,
                m.reference
            )?;
        }
        writeln!(
            f,
            "  bytes outside the live groups changed: {} (must be 0)",
            self.stray_writes
        )?;
        for w in &self.first_stray_writes {
            writeln!(f, "    {}[{}]", w.tensor, w.index)?;
        }
        match (&self.precast, self.worst_head()) {
            (Some(heads), Some(worst)) => writeln!(
                f,
                "  pre-cast f32: {} of {} (token, head) pairs over max({:e} * max|o|, {:.1e}); worst token {} head {}: error {:.3e}, bound {:.3e}",
                self.precast_violations(),
                heads.len(),
                PRECAST_TOLERANCE,
                precast_floor(),
                worst.token,
                worst.head,
                worst.max_abs_error,
                worst.bound
            ),
            _ => writeln!(f, "  pre-cast f32: not observed"),
        }
    }
}

/// Checks a kernel's output against the reference, per the SPEC's numerics contract.
///
/// - Codes: within one e4m3 step of the reference's ([`e4m3::code_steps`]: +0 and -0 are
///   equal), at most [`MAX_DIFFERING_CODES`] differing. Where the kernel chose a different
///   scale, its codes are compared with the reference's f32 values cast under the kernel's
///   scale, so one scale disagreement is counted once, as a scale, not 32 more times.
/// - Scales: equal, except in chunks whose reference amax / 448 is within [`SCALE_AMBIGUITY`]
///   of a power of two (counted separately).
/// - Every byte of both storages outside the live groups equals the reference's, which is
///   the untouched initial content.
/// - `kernel_o`, the `[s_q, heads, 512]` pre-cast output where observable: per (token, head),
///   max abs error <= [`PRECAST_TOLERANCE`] * max |reference|.
///
/// Panics when `kernel` does not have the reference's layout and storage sizes, or `kernel_o`
/// is not `[s_q, heads, 512]`: that is a bug in the calling test.
pub fn compare(
    reference: &ReferenceOutput,
    kernel: &OutputBuffers,
    kernel_o: Option<&[f32]>,
) -> NumericsReport {
    let expected = &reference.out;
    assert_eq!(
        kernel.layout, expected.layout,
        "the kernel's outputs have another layout than the reference's"
    );
    assert_eq!(
        kernel.data.len(),
        expected.data.len(),
        "out_data storage sizes differ"
    );
    assert_eq!(
        kernel.scale.len(),
        expected.scale.len(),
        "out_scale storage sizes differ"
    );
    let (s_q, heads) = (reference.s_q(), reference.heads);
    let mut report = NumericsReport {
        codes: s_q * heads * HEAD_DIM,
        codes_one_step_off: 0,
        codes_beyond_one_step: 0,
        first_codes_beyond_one_step: Vec::new(),
        codes_beyond_one_step_within_bound: 0,
        scales: s_q * heads * CHUNKS_PER_HEAD,
        ambiguous_scales: 0,
        ambiguous_scales_differing: 0,
        scales_differing: 0,
        first_scales_differing: Vec::new(),
        stray_writes: 0,
        first_stray_writes: Vec::new(),
        precast: kernel_o.map(|o| precast_errors(reference, o)),
    };
    for b in 0..s_q {
        for h in 0..heads {
            let bound = precast_bound(reference.head_output(b, h));
            for cc in 0..CHUNKS_PER_HEAD {
                compare_chunk(reference, kernel, (b, h, cc), bound, &mut report);
            }
        }
    }
    count_stray_writes(expected, kernel, heads, &mut report);
    report
}

fn compare_chunk(
    reference: &ReferenceOutput,
    kernel: &OutputBuffers,
    (b, h, cc): (usize, usize, usize),
    bound: f64,
    report: &mut NumericsReport,
) {
    let values = &reference.head_output(b, h)[cc * BLOCK..(cc + 1) * BLOCK];
    let (g, ka) = o_fused_unit(h, cc);
    let (ref_ex, kernel_ex) = (
        reference.out.scale_byte(b, g, ka),
        kernel.scale_byte(b, g, ka),
    );
    let ambiguous = near_power_of_two(f64::from(mxfp8::block_amax(values) / e4m3::MAX));
    report.ambiguous_scales += usize::from(ambiguous);
    if ref_ex != kernel_ex {
        if ambiguous {
            report.ambiguous_scales_differing += 1;
        } else {
            report.scales_differing += 1;
            if report.first_scales_differing.len() < SHOWN {
                report.first_scales_differing.push(ScaleMismatch {
                    token: b,
                    head: h,
                    chunk: cc,
                    kernel: kernel_ex,
                    reference: ref_ex,
                });
            }
        }
    }
    for (j, &x) in values.iter().enumerate() {
        let ref_code = if ref_ex == kernel_ex {
            reference.out.code(b, g, ka, j)
        } else {
            mxfp8::encode_value(x, kernel_ex)
        };
        let kernel_code = kernel.code(b, g, ka, j);
        match e4m3::code_steps(kernel_code, ref_code) {
            Some(0) => {}
            Some(1) => report.codes_one_step_off += 1,
            Some(_) if within_bound(kernel_code, x, kernel_ex, bound) => {
                report.codes_beyond_one_step_within_bound += 1
            }
            _ => {
                report.codes_beyond_one_step += 1;
                if report.first_codes_beyond_one_step.len() < SHOWN {
                    report.first_codes_beyond_one_step.push(CodeMismatch {
                        token: b,
                        head: h,
                        dim: cc * BLOCK + j,
                        kernel: kernel_code,
                        reference: ref_code,
                    });
                }
            }
        }
    }
}

/// Whether a code more than one step from the reference's still stands within the head's
/// pre-cast bound of the reference value, give or take the cast's own rounding (half the
/// larger gap beside the code). A step is an eighth of the value down to 2^-5 of the scale
/// and 2^-9 of the scale below, so near zero, and in a chunk far below its head's max, one
/// step is finer than the bound: an output that cancellation left small keeps the absolute
/// error of the terms it summed and may land several codes away.
fn within_bound(kernel_code: u8, x: f32, ex: u8, bound: f64) -> bool {
    let value = |code: u8| f64::from(mxfp8::decode_value(code, ex));
    let magnitude = kernel_code & !0x80;
    let gap_below = value(magnitude) - value(magnitude.saturating_sub(1));
    let gap_above = value((magnitude + 1).min(e4m3::MAX_CODE)) - value(magnitude);
    let error = (value(kernel_code) - f64::from(x)).abs();
    error <= bound + 0.5 * gap_below.max(gap_above)
}

/// Whether `x > 0` lies within [`SCALE_AMBIGUITY`] (relative) of a power of two.
fn near_power_of_two(x: f64) -> bool {
    let nearest = 2f64.powf(x.log2().round());
    (x / nearest - 1.0).abs() <= SCALE_AMBIGUITY
}

fn count_stray_writes(
    expected: &OutputBuffers,
    kernel: &OutputBuffers,
    heads: usize,
    report: &mut NumericsReport,
) {
    let layout = expected.layout;
    let mut live_data = vec![false; expected.data.len()];
    let mut live_scale = vec![false; expected.scale.len()];
    for b in 0..layout.s_q {
        for g in 0..live_groups(heads) {
            let start = layout.data_index(b, g, 0);
            live_data[start..start + GROUP_CODES].fill(true);
            for w in 0..GROUP_SCALE_WORDS {
                live_scale[layout.scale_index(b, g, w)] = true;
            }
        }
    }
    let data_strays = (0..expected.data.len())
        .filter(|&i| !live_data[i] && kernel.data[i] != expected.data[i])
        .map(|index| StrayWrite {
            tensor: "out_data",
            index,
        });
    let scale_strays = (0..expected.scale.len())
        .filter(|&i| !live_scale[i] && kernel.scale[i] != expected.scale[i])
        .map(|index| StrayWrite {
            tensor: "out_scale",
            index,
        });
    for stray in data_strays.chain(scale_strays) {
        report.stray_writes += 1;
        if report.first_stray_writes.len() < SHOWN {
            report.first_stray_writes.push(stray);
        }
    }
}

/// The pre-cast error bound of one (token, head): [`PRECAST_TOLERANCE`] times the reference
/// head's max |o|, at least [`precast_floor`].
fn precast_bound(expected: &[f32]) -> f64 {
    let max_abs = expected
        .iter()
        .fold(0f64, |m, &x| m.max(f64::from(x).abs()));
    (PRECAST_TOLERANCE * max_abs).max(precast_floor())
}

fn precast_errors(reference: &ReferenceOutput, kernel_o: &[f32]) -> Vec<HeadError> {
    assert_eq!(
        kernel_o.len(),
        reference.o.len(),
        "the kernel's pre-cast output is not [s_q, heads, 512]"
    );
    let heads = reference.heads;
    (0..reference.s_q())
        .flat_map(|b| (0..heads).map(move |h| (b, h)))
        .map(|(b, h)| {
            let expected = reference.head_output(b, h);
            let got = &kernel_o[(b * heads + h) * HEAD_DIM..][..HEAD_DIM];
            let max_abs_error = expected
                .iter()
                .zip(got)
                .map(|(&x, &y)| (f64::from(x) - f64::from(y)).abs())
                .fold(
                    0f64,
                    |m, e| if e.is_nan() { f64::INFINITY } else { m.max(e) },
                );
            HeadError {
                token: b,
                head: h,
                max_abs_error,
                bound: precast_bound(expected),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap_ab_decode::output::{GROUP_SCALE_WORDS, OutputLayout};

    const HEADS: usize = 16;
    const S_Q: usize = 2;

    /// A reference over token-innermost scales with a poisoned third group, from smooth values.
    fn synthetic() -> ReferenceOutput {
        let o: Vec<f32> = (0..S_Q * HEADS * HEAD_DIM)
            .map(|i| ((i as f32 * 0.61).sin() + 0.1) * (1 + i / HEAD_DIM % 3) as f32)
            .collect();
        let initial = OutputBuffers::filled(OutputLayout::token_innermost_scales(S_Q, 3), 0xFF, -1);
        let mut out = initial.clone();
        out.write_mxfp8(&o, HEADS);
        ReferenceOutput {
            heads: HEADS,
            o,
            out,
        }
    }

    fn data_index(r: &ReferenceOutput, b: usize, h: usize, dim: usize) -> usize {
        let (g, ka) = o_fused_unit(h, dim / BLOCK);
        r.out.layout.data_index(b, g, ka * BLOCK + dim % BLOCK)
    }

    /// The code one step above (in value order) a positive finite code.
    fn next_up(code: u8) -> u8 {
        assert!(code < 0x7E);
        code + 1
    }

    #[test]
    fn the_reference_meets_the_contract_against_itself() {
        let r = synthetic();
        let report = compare(&r, &r.out, Some(&r.o));
        assert!(report.ok(), "{report}");
        assert_eq!(report.codes, S_Q * HEADS * HEAD_DIM);
        assert_eq!(report.scales, S_Q * HEADS * CHUNKS_PER_HEAD);
        assert_eq!(report.differing_fraction(), 0.0);
        assert!(report.to_string().contains(": ok"));
    }

    #[test]
    fn a_code_two_steps_off_fails() {
        let r = synthetic();
        let mut kernel = r.out.clone();
        let i = data_index(&r, 1, 9, 100);
        kernel.data[i] = next_up(next_up(kernel.data[i] & 0x7F)) | (kernel.data[i] & 0x80);
        let report = compare(&r, &kernel, None);
        assert_eq!(report.codes_beyond_one_step, 1);
        assert_eq!(report.first_codes_beyond_one_step[0].head, 9);
        assert_eq!(report.first_codes_beyond_one_step[0].dim, 100);
        assert!(!report.ok());
        assert!(
            report.to_string().contains("token 1 head 9 dim 100"),
            "{report}"
        );
    }

    #[test]
    fn codes_near_zero_are_held_to_the_precast_bound() {
        let mut r = synthetic();
        let (b, h, dim) = (1, 5, 3);
        let head = (b * HEADS + h) * HEAD_DIM;
        // amax / 448 just above 2^-2 makes the scale 2^-1: the coarsest a head's max allows,
        // where the steps near zero (2^-9 of the scale) are largest against the bound.
        r.o[head] = 448.0 * 0.2525;
        r.o[head + dim] = -14.6 / 512.0 * 0.5;
        r.out.write_mxfp8(&r.o, HEADS);
        let (g, ka) = o_fused_unit(h, 0);
        assert_eq!(
            mxfp8::decode_value(1, r.out.scale_byte(b, g, ka)),
            0.5 / 512.0
        );
        let i = data_index(&r, b, h, dim);
        assert_eq!(r.out.data[i], 0x8F);
        // Three steps toward zero is 0.0025 from the reference, inside the bound (0.0226);
        // across zero to +15 steps is 0.0289, outside it.
        for (code, within, ok) in [(0x8C, 1, true), (0x0F, 0, false)] {
            let mut kernel = r.out.clone();
            kernel.data[i] = code;
            let report = compare(&r, &kernel, None);
            assert_eq!(
                report.codes_beyond_one_step_within_bound, within,
                "{code:#04x}"
            );
            assert_eq!(report.codes_beyond_one_step, 1 - within, "{code:#04x}");
            assert_eq!(report.ok(), ok, "{code:#04x}: {report}");
        }
    }

    #[test]
    fn one_step_off_is_fine_below_two_percent_only() {
        let r = synthetic();
        let mut kernel = r.out.clone();
        let total = S_Q * HEADS * HEAD_DIM;
        let mut bumped = 0;
        for n in (0..total).step_by(67) {
            let (b, h, dim) = (n / (HEADS * HEAD_DIM), n / HEAD_DIM % HEADS, n % HEAD_DIM);
            let i = data_index(&r, b, h, dim);
            if kernel.data[i] & 0x7F < 0x7E {
                kernel.data[i] = next_up(kernel.data[i] & 0x7F) | (kernel.data[i] & 0x80);
                bumped += 1;
            }
        }
        let report = compare(&r, &kernel, None);
        assert_eq!(report.codes_one_step_off, bumped);
        assert!(report.ok(), "{report}");
        for n in (0..total).step_by(31) {
            let (b, h, dim) = (n / (HEADS * HEAD_DIM), n / HEAD_DIM % HEADS, n % HEAD_DIM);
            let i = data_index(&r, b, h, dim);
            kernel.data[i] ^= 0x01;
        }
        let report = compare(&r, &kernel, None);
        assert!(
            report.differing_fraction() > MAX_DIFFERING_CODES && !report.ok(),
            "{report}"
        );
    }

    #[test]
    fn zeros_of_either_sign_are_equal() {
        let mut r = synthetic();
        r.o[..BLOCK].fill(0.0);
        let initial = OutputBuffers::filled(r.out.layout, 0xFF, -1);
        r.out = initial;
        r.out.write_mxfp8(&r.o, HEADS);
        let mut kernel = r.out.clone();
        let i = data_index(&r, 0, 0, 3);
        assert_eq!(kernel.data[i], 0x00);
        kernel.data[i] = 0x80;
        assert_eq!(compare(&r, &kernel, None).codes_one_step_off, 0);
    }

    /// A reference whose chunk (token 0, head 0, dims 0..32) has amax = 448 * 2^-3 * factor.
    fn with_chunk_amax(factor: f32) -> ReferenceOutput {
        let mut r = synthetic();
        for (j, x) in r.o[..BLOCK].iter_mut().enumerate() {
            *x = 56.0 * factor * (j as f32 + 1.0) / BLOCK as f32;
        }
        r.out = OutputBuffers::filled(r.out.layout, 0xFF, -1);
        r.out.write_mxfp8(&r.o, HEADS);
        r
    }

    /// The reference's outputs with chunk (0, 0, 0) cast under the next larger scale.
    fn with_next_scale(r: &ReferenceOutput) -> OutputBuffers {
        let mut kernel = r.out.clone();
        let ex = r.out.scale_byte(0, 0, 0) + 1;
        for j in 0..BLOCK {
            let i = kernel.layout.data_index(0, 0, j);
            kernel.data[i] = mxfp8::encode_value(r.o[j], ex);
        }
        let word = kernel.layout.scale_index(0, 0, 0);
        kernel.scale[word] = (kernel.scale[word] & !0xFF) | i32::from(ex);
        kernel
    }

    #[test]
    fn another_scale_is_allowed_only_next_to_a_power_of_two() {
        let near = with_chunk_amax(1.0 - 1e-5);
        let report = compare(&near, &with_next_scale(&near), None);
        assert_eq!(
            (report.ambiguous_scales_differing, report.scales_differing),
            (1, 0)
        );
        assert!(report.ambiguous_scales >= 1);
        assert_eq!(
            report.codes_beyond_one_step, 0,
            "codes are judged under the kernel's scale"
        );
        assert!(report.ok(), "{report}");

        let far = with_chunk_amax(0.7);
        let report = compare(&far, &with_next_scale(&far), None);
        assert_eq!(
            (report.ambiguous_scales_differing, report.scales_differing),
            (0, 1)
        );
        assert!(!report.ok());
        assert!(
            report.to_string().contains("token 0 head 0 dims 0..32"),
            "{report}"
        );
    }

    #[test]
    fn writes_outside_the_live_groups_fail() {
        let r = synthetic();
        for poke in 0..3 {
            let mut kernel = r.out.clone();
            match poke {
                0 => kernel.data[r.out.layout.data_index(1, 2, 7)] = 0,
                1 => kernel.scale[r.out.layout.scale_index(0, 2, GROUP_SCALE_WORDS - 1)] = 0,
                _ => *kernel.data.last_mut().unwrap() = 0,
            }
            let report = compare(&r, &kernel, None);
            assert_eq!(report.stray_writes, 1, "poke {poke}");
            assert!(!report.ok());
        }
    }

    #[test]
    fn precast_errors_are_bounded_per_token_and_head() {
        let r = synthetic();
        let head_max = r.head_output(1, 5).iter().fold(0f32, |m, x| m.max(x.abs()));
        let at = (HEADS + 5) * HEAD_DIM + 17;
        for (error, ok) in [(1e-4, true), (3e-4, false), (f32::NAN, false)] {
            let mut o = r.o.clone();
            o[at] += error * head_max;
            let report = compare(&r, &r.out, Some(&o));
            assert_eq!(report.ok(), ok, "{error}: {report}");
            let worst = report.worst_head().unwrap();
            assert_eq!((worst.token, worst.head), (1, 5));
        }
        // A head the reference says is zero is held to the cast's floor, no tighter.
        let mut zero = r.clone();
        zero.o[..HEAD_DIM].fill(0.0);
        let floor = precast_floor();
        assert!((1e-16..1e-15).contains(&floor), "{floor}");
        for (error, violations) in [(0.9 * floor, 0), (2.0 * floor, 1)] {
            let mut o = zero.o.clone();
            o[3] = error as f32;
            let report = compare(&zero, &zero.out, Some(&o));
            assert_eq!(report.precast_violations(), violations, "{error}");
        }
    }
}
