//! The decode kernel's numerics, run by the CPU interpreter on both targets (the sm_100a
//! tcgen05/TMEM path and the sm_90a wgmma path), against the f64 reference and the SPEC's
//! contract: every snapshot key on every edge case of the SPEC plus a generated batch,
//! bitwise-identical repeated runs, and mutations that prove the check is live.

use std::sync::Mutex;

use dsl_core::Target;
use dsl_core::interp::Options;
use dsl_core::ir::{AluOp, BinaryOp, Block, Kernel, MemOp, Op, Operand, Space, Stmt};
use kernels::swap_ab_decode::HEAD_DIM;
use kernels::swap_ab_decode::engine::interpret;
use kernels::swap_ab_decode::numerics::PRECAST_TOLERANCE;
use kernels::swap_ab_decode::{
    CaseSpec, CompileKey, DecodeCase, compare, edge_cases, generate, reference, snapshot_keys,
    variant_keys,
};

/// Runs `work` over `items` on two threads (the CI machine has two cores).
fn in_parallel<T: Sync>(items: &[T], work: impl Fn(&T) -> Vec<String> + Sync) -> Vec<String> {
    let next = Mutex::new(0usize);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let i = {
                        let mut n = next.lock().unwrap();
                        *n += 1;
                        *n - 1
                    };
                    let Some(item) = items.get(i) else { break };
                    failures.lock().unwrap().extend(work(item));
                }
            });
        }
    });
    failures.into_inner().unwrap()
}

fn check_case(key: &CompileKey, case: &DecodeCase) -> Option<String> {
    let want = reference(&case.problem).unwrap_or_else(|e| panic!("{key} {}: {e}", case.name));
    match interpret(&case.problem, key.target, true, &Options::default()) {
        Ok(run) => {
            let report = compare(&want, &run.out, run.precast.as_deref());
            (!report.ok()).then(|| format!("{key} {}: {report}", case.name))
        }
        Err(e) => Some(format!("{key} {}: {e}", case.name)),
    }
}

fn every_key_meets_the_contract(keys: Vec<CompileKey>) {
    let failures = in_parallel(&keys, |key| {
        let mut cases = edge_cases(key).unwrap();
        cases.push(
            generate(
                7,
                &CaseSpec {
                    key: *key,
                    s_q: 2,
                    adversarial: true,
                },
            )
            .unwrap(),
        );
        cases.iter().filter_map(|c| check_case(key, c)).collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn sm100a_every_snapshot_key_on_every_edge_case() {
    every_key_meets_the_contract(snapshot_keys(Target::Sm100a));
}

#[test]
fn sm90a_every_snapshot_key_on_every_edge_case() {
    every_key_meets_the_contract(snapshot_keys(Target::Sm90a));
}

/// The head-count variant (8 heads padded to 16; 64 and 128 heads as groups of 32).
#[test]
fn head_count_variant_on_every_edge_case() {
    every_key_meets_the_contract(Target::ALL.into_iter().flat_map(variant_keys).collect());
}

fn realistic_case(target: Target, heads: usize, s_q: usize) -> DecodeCase {
    let key = snapshot_keys(target)
        .into_iter()
        .find(|k| k.heads == heads && k.extra_width == 1024)
        .unwrap();
    generate(
        11,
        &CaseSpec {
            key,
            s_q,
            adversarial: false,
        },
    )
    .unwrap()
}

#[test]
fn repeated_runs_are_bitwise_identical_and_match_the_production_entry() {
    for target in Target::ALL {
        let case = realistic_case(target, 32, 2);
        let debug = interpret(&case.problem, target, true, &Options::default()).unwrap();
        let again = interpret(&case.problem, target, true, &Options::default()).unwrap();
        let production = interpret(&case.problem, target, false, &Options::default()).unwrap();
        assert_eq!(debug.out.data, again.out.data);
        assert_eq!(debug.out.scale, again.out.scale);
        let precast_bits = |v: &Option<Vec<f32>>| {
            v.as_ref()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(precast_bits(&debug.precast), precast_bits(&again.precast));
        assert_eq!(
            production.out.data, debug.out.data,
            "{target}: the debug epilogue changed the output"
        );
        assert_eq!(production.out.scale, debug.out.scale);
    }
}

#[test]
fn an_out_of_range_position_reads_the_nearest_cos_sin_row() {
    for target in Target::ALL {
        let key = snapshot_keys(target)
            .into_iter()
            .find(|k| k.heads == 16 && k.extra_width == 0)
            .unwrap();
        let case = generate(
            5,
            &CaseSpec {
                key,
                s_q: 2,
                adversarial: false,
            },
        )
        .unwrap();
        let rows = case.problem.max_pos() as i64;
        let mut outside = case.problem.clone();
        outside.positions[0] = rows + 1000;
        outside.positions[1] = -5;
        let mut clamped = case.problem.clone();
        clamped.positions[0] = rows - 1;
        clamped.positions[1] = 0;
        let run = |p| interpret(p, target, true, &Options::default());
        let got = run(&outside).unwrap_or_else(|e| panic!("{target}: {e}"));
        let want = run(&clamped).unwrap();
        assert_eq!(got.out.data, want.out.data, "{target}");
        assert_eq!(got.out.scale, want.out.scale, "{target}");
    }
}

/// A sink of 88.7 puts a head's output near 1e-36 (its rows' weights exp(l - 88.7) are
/// below f32's normal range). On the GPU `ex2.approx.ftz` flushes those weights, so the
/// pre-cast output of the head is 0 while the output bytes are still the reference's: the
/// contract accepts that through its cast-tied floor, and the interpreter's run too.
#[test]
fn a_sink_of_88_7_meets_the_contract_through_the_floor() {
    let key = snapshot_keys(Target::Sm100a)
        .into_iter()
        .find(|k| k.heads == 16 && k.extra_width == 0)
        .unwrap();
    let mut case = generate(
        3,
        &CaseSpec {
            key,
            s_q: 1,
            adversarial: false,
        },
    )
    .unwrap();
    case.problem.sink[0] = 88.7;
    let want = reference(&case.problem).unwrap();
    let head_max = want
        .head_output(0, 0)
        .iter()
        .fold(0f32, |m, x| m.max(x.abs()));
    assert!(
        head_max > 0.0 && f64::from(head_max) < 1e-30,
        "the case must be in the flushed range: {head_max}"
    );
    let run = interpret(&case.problem, key.target, true, &Options::default()).unwrap();
    let report = compare(&want, &run.out, run.precast.as_deref());
    assert!(report.ok(), "{report}");

    let mut flushed = run.precast.clone().unwrap();
    flushed[..HEAD_DIM].fill(0.0);
    let report = compare(&want, &run.out, Some(&flushed));
    assert!(report.ok(), "a flushed head is refused: {report}");
    let head = &report.precast.as_ref().unwrap()[0];
    assert!(
        head.max_abs_error > PRECAST_TOLERANCE * f64::from(head_max),
        "the relative bound alone holds, so the case no longer tests the floor"
    );
}

#[test]
fn softmax_scale_must_be_finite_and_positive_on_every_path() {
    let key = snapshot_keys(Target::Sm100a)
        .into_iter()
        .find(|k| k.heads == 16 && k.extra_width == 0)
        .unwrap();
    let case = generate(
        3,
        &CaseSpec {
            key,
            s_q: 1,
            adversarial: false,
        },
    )
    .unwrap();
    for scale in [0.0, -0.04, f32::INFINITY, f32::NAN] {
        let mut problem = case.problem.clone();
        problem.softmax_scale = scale;
        let refused = |what: &str, message: String| {
            assert!(
                message.contains("softmax_scale must be a finite positive number"),
                "{what} accepted or misreported softmax_scale {scale}: {message}"
            );
        };
        refused("validate", problem.validate().unwrap_err().to_string());
        refused("reference", reference(&problem).unwrap_err().to_string());
        let run = interpret(&problem, Target::Sm100a, false, &Options::default());
        refused("the interpreter", run.unwrap_err().to_string());
        let file = DecodeCase {
            name: "scale".into(),
            problem,
        };
        let written = kernels::swap_ab_decode::case_file::to_bytes(&file, None);
        refused("a case file", written.unwrap_err().to_string());
    }
}

/// Applies `f` to every instruction of `block`, nested blocks included.
fn for_each_op_mut(block: &mut Block, f: &mut dyn FnMut(&mut Op, Option<u32>)) {
    for stmt in &mut block.stmts {
        match stmt {
            Stmt::Inst(i) => f(&mut i.op, i.stage.map(|s| s.0)),
            Stmt::If {
                then_body,
                else_body,
                ..
            } => {
                for_each_op_mut(then_body, f);
                for_each_op_mut(else_body, f);
            }
            Stmt::Loop { header, body, .. } => {
                for_each_op_mut(header, f);
                for_each_op_mut(body, f);
            }
            Stmt::Stage(_) | Stmt::Comment(_) => {}
        }
    }
}

/// The static bits of the first shared-memory descriptor the kernel builds (`field | bits`)
/// that `change` accepts (the KV operand of S = KV . Q^T), changed; returns 1 if found.
fn mutate_first_descriptor(kernel: &mut Kernel, change: &dyn Fn(u64) -> Option<u64>) -> usize {
    let mut changed = 0;
    for_each_op_mut(&mut kernel.body, &mut |op, _| {
        if let Op::Alu(AluOp::Binary {
            op: BinaryOp::Or,
            b: Operand::Imm(bits),
            ..
        }) = op
        {
            if changed == 0 {
                if let Some(new) = change(*bits) {
                    *bits = new;
                    changed = 1;
                }
            }
        }
    });
    changed
}

/// Runs a mutated kernel on `case` and returns the report's verdict (or the fault).
fn mutated_verdict(
    case: &DecodeCase,
    target: Target,
    mutate: impl Fn(&mut Kernel) -> usize,
) -> Result<bool, String> {
    let key = CompileKey {
        target,
        ..case.problem.key
    };
    let mut kernel = kernels::swap_ab_decode::swap_ab_decode_debug(target, &key).unwrap();
    assert!(
        mutate(&mut kernel) > 0,
        "the mutation found nothing to change"
    );
    let run = kernels::swap_ab_decode::engine::interpret_kernel(
        &kernel,
        &case.problem,
        true,
        &Options::default(),
    )
    .map_err(|e| e.to_string())?;
    let want = reference(&case.problem).unwrap();
    Ok(compare(&want, &run.out, run.precast.as_deref()).ok())
}

const SBO_FIELD: u64 = 0x3fff << 32;
const LAYOUT_SM100: u64 = 0x7 << 61;

#[test]
fn mutations_of_the_mma_operands_are_caught() {
    let target = Target::Sm100a;
    let case = realistic_case(target, 32, 1);
    // The unmutated kernel passes (the baseline of the comparisons below).
    assert_eq!(mutated_verdict(&case, target, |_| 1), Ok(true));

    // SBO of the K-major SW128 operands (1024 B: field 64) off by 16 bytes.
    let sbo = mutated_verdict(&case, target, |k| {
        mutate_first_descriptor(k, &|bits| {
            (bits & SBO_FIELD == 64 << 32 && bits & (1 << 46) != 0).then_some(bits + (1 << 32))
        })
    });
    assert_eq!(sbo, Ok(false), "a wrong SBO went unnoticed");

    // The 128-byte swizzle (layout type 2) read as the 64-byte one (4).
    let swizzle = mutated_verdict(&case, target, |k| {
        mutate_first_descriptor(k, &|bits| {
            (bits & LAYOUT_SM100 == 2 << 61).then_some((bits & !LAYOUT_SM100) | (4 << 61))
        })
    });
    assert_eq!(swizzle, Ok(false), "a wrong swizzle mode went unnoticed");
}

#[test]
fn dropping_the_p_lo_half_is_caught() {
    for target in Target::ALL {
        let case = realistic_case(target, 32, 2);
        let softmax_stage =
            |k: &Kernel| k.stages.iter().position(|s| s.starts_with("4:")).unwrap() as u32;
        let verdict = mutated_verdict(&case, target, |k| {
            let stage = softmax_stage(k);
            // Stage 4 stores P hi, then P lo, to shared memory: zero the second store.
            let mut stores = 0;
            let mut changed = 0;
            for_each_op_mut(&mut k.body, &mut |op, s| {
                if s == Some(stage) {
                    if let Op::Mem(MemOp::St {
                        space: Space::Shared,
                        src,
                        pred: None,
                        ..
                    }) = op
                    {
                        if src.len() >= 2 {
                            stores += 1;
                            if stores == 2 {
                                src.iter_mut().for_each(|v| *v = Operand::Imm(0));
                                changed += 1;
                            }
                        }
                    }
                }
            });
            changed
        });
        assert_eq!(
            verdict,
            Ok(false),
            "{target}: P without its lo half still passed"
        );
    }
}
