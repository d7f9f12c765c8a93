//! The four tracing hazards of the design, each pinned by a test:
//! 1. a runtime variable assigned inside a runtime `if`/loop holds the merged value after;
//! 2. `let y = x;` does not alias a later-mutated `x`;
//! 3. changing a compile-time value inside a runtime region is a trace error with the
//!    source location;
//! 4. misuse is a Rust compile error (`tests/compile_fail.rs`, cases in `tests/ui/`).
//!
//! Each of hazards 1 and 2 is checked twice: structurally on the IR, and by running the
//! kernel in the interpreter against the values plain Rust would compute.

use dsl_core::Target;
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::thread::thread_idx_x;
use dsl_core::interp::{self, Arg, Launch, Memory};
use dsl_core::ir::{AluOp, Block, Kernel, MemOp, Op, Operand, Reg, Stmt};
use dsl_core::trace::{Tensor, Val, dyn_range, threads};
use dsl_macros::kernel;

/// The registers stored by `st` ops, in program order.
fn stored_regs(k: &Kernel) -> Vec<Reg> {
    let mut out = Vec::new();
    k.body.for_each_inst(&mut |i| {
        if let Op::Mem(MemOp::St { src, .. }) = &i.op {
            out.extend(src.iter().filter_map(|o| o.reg()));
        }
    });
    out
}

/// Registers written by a `mov` anywhere in `block`.
fn mov_targets(block: &Block) -> Vec<Reg> {
    let mut out = Vec::new();
    block.for_each_inst(&mut |i| {
        if let Op::Alu(AluOp::Mov { dst, .. }) = &i.op {
            out.push(*dst);
        }
    });
    out
}

fn loaded_regs(k: &Kernel) -> Vec<Reg> {
    let mut out = Vec::new();
    k.body.for_each_inst(&mut |i| {
        if let Op::Mem(MemOp::Ld { dst, .. }) = &i.op {
            out.extend(dst);
        }
    });
    out
}

#[kernel]
fn merge_after_if(data: Tensor<u32, 1>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    let addr = data.base() + tid.mul_wide(4);
    let mut x: Val<u32> = load(addr);
    if tid < 7 {
        x += 100;
    }
    store(addr, x);
}

#[test]
fn hazard_1_value_assigned_in_runtime_if_is_merged() {
    let k = merge_after_if(Target::Sm90a).unwrap();
    let stored = stored_regs(&k)[0];
    let Some(Stmt::If {
        then_body,
        else_body,
        ..
    }) = k.body.stmts.iter().find(|s| matches!(s, Stmt::If { .. }))
    else {
        panic!("no runtime if traced");
    };
    assert!(
        mov_targets(then_body).contains(&stored) && mov_targets(else_body).contains(&stored),
        "the value stored after the if must be written in both branches"
    );
}

#[kernel]
fn merge_after_loop(data: Tensor<u32, 1>, n: Val<u32>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    let addr = data.base() + tid.mul_wide(4);
    let mut x: Val<u32> = load(addr);
    let before = x;
    for i in dyn_range(0u32, n) {
        x = x * 3 + i;
    }
    store(addr, x);
    store(addr + 4096, before);
}

#[test]
fn hazard_1_and_2_loop_carried_value_and_copy() {
    let k = merge_after_loop(Target::Sm100a).unwrap();
    let loaded = loaded_regs(&k)[0];
    let stored = stored_regs(&k);
    let Some(Stmt::Loop { body, .. }) =
        k.body.stmts.iter().find(|s| matches!(s, Stmt::Loop { .. }))
    else {
        panic!("no runtime loop traced");
    };
    // 1: the value after the loop is the carried register the body writes back.
    assert!(mov_targets(body).contains(&stored[0]));
    // 2: `before` still names the loaded value, not the carried register.
    assert_eq!(stored[1], loaded);
    assert_ne!(stored[0], loaded);
}

#[kernel]
fn alias_then_mutate(data: Tensor<u32, 1>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    let addr = data.base() + tid.mul_wide(4);
    let mut x: Val<u32> = load(addr);
    let y = x;
    if tid == 0 {
        x += 1;
    }
    x += 2;
    store(addr, y);
    store(addr + 128, x);
}

#[test]
fn hazard_2_let_copy_does_not_alias() {
    let k = alias_then_mutate(Target::Sm90a).unwrap();
    let loaded = loaded_regs(&k)[0];
    let stored = stored_regs(&k);
    assert_eq!(
        stored[0], loaded,
        "y keeps the value x had when it was copied"
    );
    assert_ne!(stored[1], loaded);
}

/// Runs a one-CTA kernel over `data` (plus scalar `extra` arguments) in the interpreter on
/// both targets and returns the buffer afterwards, the same on each.
fn run_on_both_targets(
    kernel: fn(Target) -> Result<Kernel, dsl_core::trace::TraceError>,
    data: &[u32],
    extra: &[Arg],
) -> Vec<u32> {
    let results: Vec<Vec<u32>> = Target::ALL
        .iter()
        .map(|&target| {
            let k = kernel(target).unwrap_or_else(|e| panic!("{e}"));
            let mut mem = Memory::new();
            let buf = mem.alloc_from("data", data);
            let mut args = vec![Arg::contiguous(buf, &[data.len() as i64])];
            args.extend_from_slice(extra);
            interp::run(&k, &mut mem, &args, &Launch::grid([1, 1, 1]))
                .unwrap_or_else(|e| panic!("{target}: {e}"));
            mem.read::<u32>(buf)
        })
        .collect();
    assert_eq!(results[0], results[1], "the targets disagree");
    results.into_iter().next().unwrap()
}

#[test]
fn hazard_1_merged_values_in_the_interpreter() {
    let data: Vec<u32> = (0..32).map(|t| 1000 + t).collect();
    let got = run_on_both_targets(merge_after_if, &data, &[]);
    let want: Vec<u32> = data
        .iter()
        .enumerate()
        .map(|(t, &x)| if t < 7 { x + 100 } else { x })
        .collect();
    assert_eq!(got, want);

    let n = 5u32;
    let mut data: Vec<u32> = (0..32 + 1024).map(|i| 7 * i as u32 + 1).collect();
    let got = run_on_both_targets(merge_after_loop, &data, &[Arg::U32(n)]);
    for t in 0..32 {
        let before = data[t];
        data[t] = (0..n).fold(before, |x, i| x.wrapping_mul(3).wrapping_add(i));
        data[t + 1024] = before;
    }
    assert_eq!(got, data);
}

#[test]
fn hazard_2_copy_keeps_its_value_in_the_interpreter() {
    let data: Vec<u32> = (0..64).map(|i| 10 * i).collect();
    let got = run_on_both_targets(alias_then_mutate, &data, &[]);
    let mut want = data.clone();
    for t in 0..32 {
        let x = data[t];
        want[t] = x;
        want[t + 32] = x + u32::from(t == 0) + 2;
    }
    assert_eq!(got, want);
}

#[kernel]
fn count_in_runtime_if(data: Tensor<u32, 1>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    let mut count = 0u32;
    if tid < 3 {
        count += 1;
    }
    store(data.base(), Val::<u32>::constant(count));
}

#[test]
fn hazard_3_compile_time_value_changed_in_runtime_if() {
    let err = count_in_runtime_if(Target::Sm90a).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("compile-time value `count`"), "{text}");
    assert!(text.contains("runtime if"), "{text}");
    assert!(text.contains("0 became 1"), "{text}");
    assert!(text.contains("tests/tracing_hazards.rs:"), "{text}");
    let d = &err.diagnostics[0];
    let source = include_str!("tracing_hazards.rs");
    let line = source.lines().nth(d.loc.line as usize - 1).unwrap();
    assert!(line.contains("if tid < 3"), "points at `{line}`");
}

#[kernel]
fn flag_in_runtime_loop(data: Tensor<u32, 1>, n: Val<u32>) {
    threads(32, 1, 1);
    let mut seen = false;
    let mut total = Val::<u32>::constant(0);
    for i in dyn_range(0u32, n) {
        total += i;
        seen = true;
    }
    let _ = seen;
    store(data.base(), total);
}

#[test]
fn hazard_3_compile_time_value_changed_in_runtime_loop() {
    let text = flag_in_runtime_loop(Target::Sm100a)
        .unwrap_err()
        .to_string();
    assert!(text.contains("compile-time value `seen`"), "{text}");
    assert!(text.contains("runtime loop"), "{text}");
}

#[kernel]
fn vec_grows_in_runtime_if(data: Tensor<u32, 1>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    let mut parts = vec![tid];
    if tid > 4 {
        parts = vec![tid, tid + 1];
    }
    store(data.base(), parts[0]);
}

#[test]
fn hazard_3_vec_length_changed_in_runtime_if() {
    let text = vec_grows_in_runtime_if(Target::Sm90a)
        .unwrap_err()
        .to_string();
    assert!(text.contains("`parts`"), "{text}");
    assert!(text.contains("length 1 became 2"), "{text}");
}

#[kernel]
fn value_leaks_out_of_branch(data: Tensor<u32, 1>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    let mut defined_inside = Vec::new();
    if tid > 4 {
        defined_inside.push(tid * 2);
    }
    // `push` is not an assignment, so nothing merges the pushed value: using it here is
    // reported instead of silently reading a register the else path never wrote.
    store(data.base(), defined_inside[0]);
}

#[test]
fn value_used_outside_its_branch_is_reported() {
    let text = value_leaks_out_of_branch(Target::Sm90a)
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("defined inside a runtime if/loop body"),
        "{text}"
    );
}

#[kernel]
fn compile_time_if_traces_one_arm(#[comptime] wide: bool, data: Tensor<u32, 1>) {
    threads(32, 1, 1);
    let mut v = thread_idx_x();
    let mut steps = 0;
    if wide {
        v *= 4;
        steps += 1;
    } else {
        v += 1;
    }
    store(data.base(), v + steps);
}

#[test]
fn compile_time_if_is_plain_rust() {
    for wide in [true, false] {
        let k = compile_time_if_traces_one_arm(Target::Sm90a, wide).unwrap();
        assert!(k.body.stmts.iter().all(|s| !matches!(s, Stmt::If { .. })));
        let mut ops = Vec::new();
        k.body.for_each_inst(&mut |i| ops.push(i.op.name()));
        assert_eq!(ops.contains(&"mul"), wide);
        let mut imm = Vec::new();
        k.body.for_each_inst(&mut |i| {
            if let Op::Alu(AluOp::Binary {
                b: Operand::Imm(v), ..
            }) = &i.op
            {
                imm.push(*v)
            }
        });
        assert_eq!(imm, if wide { vec![4, 1] } else { vec![1] });
    }
}
