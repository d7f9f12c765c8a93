//! Differential fuzzing of the IR with random small kernels (`fuzz/`): on the CPU each one
//! must pass `ir::verify`, print PTX, round-trip through the text form, compute the same
//! words in the interpreter before and after the round trip, and assemble with ptxas; on
//! the GPU (`gpu_*`, skipped without one) it must compute exactly the interpreter's words.
//!
//! `KESTREL_FUZZ_SEEDS=a..b` (or one seed) runs other seeds than the defaults; a failure
//! names its seed and prints the kernel's IR text. `KESTREL_FUZZ_DUMP=DIR` also writes each
//! failing case there: `seed-N.kir`, `seed-N.ptx` and, from the GPU test, `seed-N.words`
//! (every differing word: column, thread, the GPU's word, the interpreter's).

mod fuzz;

use std::path::Path;

use cudarc::driver::DevicePtr;
use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use dsl_core::ir::Kernel;
use dsl_core::ir::text::{parse, print};
use dsl_core::ir::verify::verify;
use dsl_core::jit::{self, KernelArg, TensorArg};
use dsl_core::ptxas;

use fuzz::run::{differing_words, first_difference, interpret};
use fuzz::{Case, generate, seeds_from_env};

/// Seeds the CPU test runs by default.
const CPU_SEEDS: std::ops::Range<u64> = 0..400;
/// Of the default seeds, every this many is also assembled: a ptxas run costs about 100 ms,
/// thirty times the other checks of a case. Seeds named in `KESTREL_FUZZ_SEEDS` all are.
const ASSEMBLE_EVERY: u64 = 8;
/// Seeds the GPU test runs by default (each is one launch).
const GPU_SEEDS: std::ops::Range<u64> = 0..1000;

/// Failures shown in full (with the kernel's text); the rest are listed by seed.
const SHOWN: usize = 3;

/// A failure message: what went wrong for which seed, with the kernel's text to reproduce it.
fn failure(case: &Case, what: &str) -> String {
    format!(
        "seed {} (rerun: KESTREL_FUZZ_SEEDS={}): {what}\n{}",
        case.seed,
        case.seed,
        print(&case.kernel)
    )
}

/// Writes a failing case's kernel (and, from the GPU test, its differing words) into
/// `KESTREL_FUZZ_DUMP`, when that is set.
fn dump(case: &Case, words: Option<(&[u32], &[u32])>) {
    let Some(dir) = std::env::var_os("KESTREL_FUZZ_DUMP") else {
        return;
    };
    let dir = Path::new(&dir);
    let file = |ext: &str| dir.join(format!("seed-{}.{ext}", case.seed));
    let write = |ext: &str, text: String| {
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(file(ext), text))
            .unwrap_or_else(|e| panic!("KESTREL_FUZZ_DUMP: cannot write {:?}: {e}", file(ext)));
    };
    write("kir", print(&case.kernel));
    if let Ok(module) = emit(&case.kernel) {
        write("ptx", module.text);
    }
    if let Some((want, got)) = words {
        write("words", differing_words(case, want, got));
    }
}

/// Panics with the failures of a run over `seeds`, if there were any.
fn report(failures: &[(u64, String)], seeds: &std::ops::Range<u64>, side: &str) {
    if failures.is_empty() {
        return;
    }
    let failed: Vec<String> = failures.iter().map(|(s, _)| s.to_string()).collect();
    let shown: Vec<&str> = failures
        .iter()
        .take(SHOWN)
        .map(|(_, m)| m.as_str())
        .collect();
    panic!(
        "{} of the {} seeds {}..{} failed {side} ({}); the first {}:\n\n{}",
        failures.len(),
        seeds.end - seeds.start,
        seeds.start,
        seeds.end,
        failed.join(", "),
        shown.len(),
        shown.join("\n\n")
    );
}

fn for_target(kernel: &Kernel, target: Target) -> Kernel {
    let mut k = kernel.clone();
    k.target = target;
    k
}

/// Every CPU-side check of one case.
fn check(case: &Case, ptxas: Option<&Path>) -> Result<(), String> {
    let kernel = &case.kernel;
    verify(kernel).map_err(|e| format!("ir::verify rejects it: {e}"))?;
    let text = print(kernel);
    let parsed = parse(&text).map_err(|e| {
        let line = text.lines().nth(e.line as usize - 1).unwrap_or("");
        format!("the printed text does not parse: {e}\n  {line}")
    })?;
    if print(&parsed) != text {
        return Err("print(parse(text)) differs from the text".into());
    }
    if parsed != *kernel {
        return Err("the parsed kernel differs from the traced one".into());
    }
    let want = interpret(case, kernel).map_err(|e| format!("the interpreter fails: {e}"))?;
    let got = interpret(case, &parsed)
        .map_err(|e| format!("the interpreter fails on the parsed kernel: {e}"))?;
    if let Some(d) = first_difference(case, &want, &got) {
        return Err(format!("the parsed kernel computes other words: {d}"));
    }
    for target in Target::ALL {
        let module = emit(&for_target(kernel, target)).map_err(|e| format!("{target}: {e}"))?;
        let again = emit(&for_target(&parsed, target)).map_err(|e| format!("{target}: {e}"))?;
        if again.text != module.text {
            return Err(format!("{target}: the parsed kernel prints other PTX"));
        }
        if let Some(p) = ptxas {
            ptxas::assemble_with(p, &module).map_err(|e| format!("{e}\n{}", module.text))?;
        }
    }
    Ok(())
}

#[test]
fn fuzz_kernels_verify_round_trip_interpret_and_assemble() {
    let ptxas = ptxas::find();
    if ptxas.is_none() {
        if std::env::var("KESTREL_REQUIRE_PTXAS").as_deref() == Ok("1") {
            panic!(
                "ptxas is required (KESTREL_REQUIRE_PTXAS=1) but was not found: set KESTREL_PTXAS"
            );
        }
        eprintln!("SKIPPED fuzz ptxas check: ptxas not found (set KESTREL_PTXAS)");
    }
    let named = seeds_from_env();
    let every = if named.is_some() { 1 } else { ASSEMBLE_EVERY };
    let seeds = named.unwrap_or(CPU_SEEDS);
    let mut failures = Vec::new();
    for seed in seeds.clone() {
        let ptxas = ptxas.as_deref().filter(|_| seed % every == 0);
        let result = generate(seed, Target::Sm90a).and_then(|case| {
            check(&case, ptxas).map_err(|e| {
                dump(&case, None);
                failure(&case, &e)
            })?;
            // The GPU machine regenerates the case from its seed.
            let again = generate(seed, Target::Sm90a)?;
            if again.kernel != case.kernel || again.inputs != case.inputs || again.n != case.n {
                return Err(failure(&case, "a second generation from the seed differs"));
            }
            Ok(())
        });
        if let Err(e) = result {
            failures.push((seed, e));
        }
    }
    report(&failures, &seeds, "on the CPU");
}

/// One case on the GPU: `out` as the kernel leaves it.
fn launch(dev: &jit::Device, case: &Case) -> Result<Vec<u32>, String> {
    let stream = dev.stream();
    let k = dev.load(&case.kernel).map_err(|e| e.to_string())?;
    let words = case.out_words();
    let out = stream
        .alloc_zeros::<u32>(words)
        .map_err(|e| e.to_string())?;
    let mut inputs = Vec::new();
    for (_, data) in &case.inputs {
        inputs.push(stream.clone_htod(data).map_err(|e| e.to_string())?);
    }
    let tensor = |ptr: u64, len: usize| {
        KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(ptr, [len as i64]))
    };
    let mut args = vec![tensor(out.device_ptr(stream).0, words)];
    for (buf, (_, data)) in inputs.iter().zip(&case.inputs) {
        args.push(tensor(buf.device_ptr(stream).0, data.len()));
    }
    args.push(KernelArg::U32(case.n));
    // SAFETY: every tensor argument is a live buffer of the length given with it, read
    // back (or dropped) only after the stream has run the launch.
    unsafe { k.launch(stream, jit::Launch::new([case.grid, 1, 1]), &args) }
        .map_err(|e| e.to_string())?;
    stream.clone_dtoh(&out).map_err(|e| e.to_string())
}

#[test]
fn gpu_fuzz_kernels_match_the_interpreter() {
    let Some(dev) = jit::test_device(Target::Sm90a) else {
        return;
    };
    let mut failures = Vec::new();
    let seeds = seeds_from_env().unwrap_or(GPU_SEEDS);
    for seed in seeds.clone() {
        let result = generate(seed, Target::Sm90a).and_then(|case| {
            let want = interpret(&case, &case.kernel)
                .map_err(|e| failure(&case, &format!("interp: {e}")))?;
            let got = launch(&dev, &case).map_err(|e| failure(&case, &format!("GPU: {e}")))?;
            match first_difference(&case, &want, &got) {
                Some(d) => {
                    dump(&case, Some((&want, &got)));
                    Err(failure(
                        &case,
                        &format!("the GPU computes other words: {d}"),
                    ))
                }
                None => Ok(()),
            }
        });
        if let Err(e) = result {
            failures.push((seed, e));
        }
    }
    report(&failures, &seeds, "on the GPU");
}
