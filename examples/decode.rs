//! The main job: the SwapAB decode kernel end to end, on whatever this machine has.
//!
//! Traces the kernel for a compile key and prints its PTX size, assembles it with ptxas when
//! one is found (registers, spills), runs it on a GPU when one with a matching architecture
//! is present and in the CPU interpreter otherwise, on a generated batch or on a case file,
//! and checks the output against the f64 reference with the SPEC's numerics contract. The
//! last line printed is one JSON object with the result.
//!
//! ```text
//! cargo run --release --example decode -- [--key NAME | --target sm100a|sm90a] [--tokens N]
//!     [--seed S] [--adversarial] [--case FILE.safetensors] [--write-case FILE.safetensors]
//!     [--write-output FILE.safetensors] [--engine auto|gpu|interpreter]
//! ```
//! The default key is `h32_nk128_ne512_fp8_p64x16_<target>` (the target of the GPU when there
//! is one, else sm_100a), with 4 tokens. `--case` replays the file's own key and target, so
//! it refuses `--key`, `--target`, `--tokens`, `--seed` and `--adversarial`.
//!
//! Exit codes, as for `kestrel`: 0 the check passed, 1 a failure (the numerics check, a
//! fault, a file that cannot be read), 2 a usage mistake.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use dsl_core::interp::{Options, Progress};
use dsl_core::jit::{self, Device};
use kernels::swap_ab_decode::engine::{EngineRun, interpret_kernel, run_gpu};
use kernels::swap_ab_decode::host::MAX_TOKENS;
use kernels::swap_ab_decode::{
    CaseSpec, CompileKey, DecodeCase, ExtraRecord, Gpu, LayerShape, case_file, compare, dispatch,
    generate, reference, swap_ab_decode_debug,
};

const USAGE: &str = "usage: decode [--key NAME | --target sm100a|sm90a] [--tokens N] [--seed S] \
     [--adversarial] [--case FILE] [--write-case FILE] [--write-output FILE] \
     [--engine auto|gpu|interpreter]";

/// Why the main job stopped: a usage mistake (exit 2) or a failure (exit 1).
enum Stop {
    Usage(String),
    Failed(String),
}

/// Anything displayable is a failure; usage mistakes are made with `Stop::Usage`.
impl<E: std::fmt::Display> From<E> for Stop {
    fn from(e: E) -> Self {
        Stop::Failed(e.to_string())
    }
}

#[derive(Debug, Default, PartialEq)]
struct Args {
    key: Option<CompileKey>,
    target: Option<Target>,
    tokens: Option<usize>,
    seed: Option<u64>,
    adversarial: bool,
    case: Option<PathBuf>,
    write_case: Option<PathBuf>,
    write_output: Option<PathBuf>,
    engine: String,
}

/// The parsed command line, or `None` for `--help`.
fn parse_args(argv: impl IntoIterator<Item = String>) -> Result<Option<Args>, String> {
    let mut args = Args {
        engine: "auto".into(),
        ..Args::default()
    };
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--key" => args.key = Some(value()?.parse().map_err(|e| format!("--key: {e}"))?),
            "--target" => args.target = Some(value()?.parse()?),
            "--tokens" => {
                args.tokens = Some(value()?.parse().map_err(|e| format!("--tokens: {e}"))?)
            }
            "--seed" => args.seed = Some(value()?.parse().map_err(|e| format!("--seed: {e}"))?),
            "--adversarial" => args.adversarial = true,
            "--case" => args.case = Some(value()?.into()),
            "--write-case" => args.write_case = Some(value()?.into()),
            "--write-output" => args.write_output = Some(value()?.into()),
            "--engine" => args.engine = value()?,
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    if !matches!(args.engine.as_str(), "auto" | "gpu" | "interpreter") {
        return Err(format!(
            "--engine takes auto, gpu or interpreter, not `{}`",
            args.engine
        ));
    }
    if args.case.is_some() {
        let given: Vec<&str> = [
            ("--key", args.key.is_some()),
            ("--target", args.target.is_some()),
            ("--tokens", args.tokens.is_some()),
            ("--seed", args.seed.is_some()),
            ("--adversarial", args.adversarial),
        ]
        .iter()
        .filter_map(|&(flag, set)| set.then_some(flag))
        .collect();
        if !given.is_empty() {
            return Err(format!(
                "--case replays the file's own key, target and batch, so {} cannot apply: \
                 drop {}, or generate a batch without --case",
                given.join(", "),
                if given.len() == 1 { "it" } else { "them" }
            ));
        }
    }
    if let Some(tokens) = args.tokens
        && !(1..=MAX_TOKENS).contains(&tokens)
    {
        return Err(format!(
            "--tokens {tokens}: a launch takes 1 to {MAX_TOKENS} tokens (the host API's limit, \
             the grid's y dimension)"
        ));
    }
    Ok(Some(args))
}

/// The GPU to run on, or why the interpreter runs instead.
fn choose_engine(engine: &str, target: Target) -> Result<(Option<Arc<Device>>, String), Stop> {
    let interpreter = |why: String| -> Result<(Option<Arc<Device>>, String), Stop> {
        if engine == "gpu" {
            Err(Stop::Failed(format!("--engine gpu: {why}")))
        } else {
            Ok((None, why))
        }
    };
    if engine == "interpreter" {
        return Ok((None, "asked for with --engine interpreter".into()));
    }
    if !jit::driver_present() {
        return interpreter("no CUDA driver on this machine".into());
    }
    if !jit::gpu_available() {
        return interpreter("the CUDA driver sees no GPU".into());
    }
    let device = Device::open(0)?;
    let info = device.info();
    match device.target() {
        Some(t) if t == target => {
            let why = format!("{} runs {t} code", info.name);
            Ok((Some(Arc::new(device)), why))
        }
        Some(t) => interpreter(format!(
            "{} runs {t} code, and the key is built for {target}",
            info.name
        )),
        None => interpreter(format!(
            "{} (compute capability {}.{}) has no kestrel target",
            info.name, info.compute_capability.0, info.compute_capability.1
        )),
    }
}

/// The target a GPU present on this machine runs, if any (without opening a context when
/// there is no driver).
fn gpu_target(engine: &str) -> Option<Target> {
    if engine == "interpreter" || !jit::gpu_available() {
        return None;
    }
    Device::open(0).ok().and_then(|d| d.target())
}

/// A line on stderr at each tenth of the clusters, once a run has taken long enough for a
/// user to wonder whether it still runs.
fn report_progress(p: &Progress) {
    let tenth = |done: u32| done * 10 / p.clusters_total.max(1);
    let crossed = tenth(p.clusters_done) != tenth(p.clusters_done - 1);
    if crossed && p.elapsed.as_secs_f64() >= 2.0 {
        eprintln!(
            "interpreter: {} of {} clusters in {:.1} s",
            p.clusters_done,
            p.clusters_total,
            p.elapsed.as_secs_f64()
        );
    }
}

fn run(args: Args) -> Result<bool, Stop> {
    let mut stored = None;
    let case: DecodeCase = match &args.case {
        Some(path) => {
            let file = case_file::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            println!(
                "case file {}: {} ({} tokens, key {})",
                path.display(),
                file.case.name,
                file.case.problem.s_q(),
                file.case.problem.key
            );
            stored = file.expected;
            file.case
        }
        None => {
            let target = args
                .key
                .map(|k| k.target)
                .or(args.target)
                .or_else(|| gpu_target(&args.engine))
                .unwrap_or(Target::Sm100a);
            let tokens = args.tokens.unwrap_or(4);
            let layer = LayerShape {
                heads: 32,
                swa_width: 128,
                extra_width: 512,
                extra_record_bytes: ExtraRecord::Fp8.bytes(),
                swa_page: 64,
                extra_page: 16,
            };
            let key = match args.key {
                Some(key) => key,
                None => dispatch(&layer, tokens, &Gpu::of_target(target))?,
            };
            let spec = CaseSpec {
                key,
                s_q: tokens,
                adversarial: args.adversarial,
            };
            generate(args.seed.unwrap_or(1), &spec)?
        }
    };
    let key = case.problem.key;
    let target = key.target;
    let (device, why) = choose_engine(&args.engine, target)?;
    println!(
        "engine: {} ({why})",
        if device.is_some() {
            "gpu"
        } else {
            "interpreter"
        }
    );
    println!(
        "key {key}: cluster of {} CTAs, {} head group(s), {} tokens",
        key.cluster_size(),
        key.head_groups(),
        case.problem.s_q()
    );

    let traced = std::time::Instant::now();
    let kernel = swap_ab_decode_debug(target, &key)?;
    let module = emit(&kernel)?;
    println!(
        "traced and emitted in {:.1} ms: {} PTX lines, {} bytes of shared memory",
        traced.elapsed().as_secs_f64() * 1e3,
        module.text.lines().count(),
        kernel.smem_bytes
    );
    let registers = match dsl_core::ptxas::assemble(&module) {
        Ok(r) => {
            println!(
                "ptxas {}: {} registers, {} bytes spilled, {} bytes of stack",
                target,
                r.registers,
                r.spill_stores + r.spill_loads,
                r.stack_frame
            );
            Some(r.registers)
        }
        Err(e @ dsl_core::ptxas::PtxasError::NotFound) => {
            println!("{e}: not assembled");
            None
        }
        Err(e) => return Err(e.into()),
    };

    let want = reference(&case.problem)?;
    if let Some(path) = &args.write_case {
        case_file::write(path, &case, Some(&want))?;
        println!(
            "wrote the case with its expected outputs to {}",
            path.display()
        );
    }
    let run: EngineRun = match &device {
        Some(d) => run_gpu(d, &case.problem, true, None)?,
        None => {
            let options = Options {
                progress: Some(report_progress),
                ..Options::default()
            };
            interpret_kernel(&kernel, &case.problem, true, &options)?
        }
    };
    let report = compare(&want, &run.out, run.precast.as_deref());
    println!("{report}");
    let stored_ok = match &stored {
        Some(expected) => {
            let against = compare(expected, &run.out, run.precast.as_deref());
            println!(
                "against the expected outputs stored in the case file: {}",
                if against.ok() { "ok" } else { "FAILED" }
            );
            against.ok()
        }
        None => true,
    };
    if let Some(path) = &args.write_output {
        let precast = run.precast.as_deref().map(|p| (p, key.heads));
        case_file::write_outputs(path, &run.out, precast)?;
        println!(
            "wrote the kernel's raw outputs (out_data codes, out_scale words, pre-cast f32) to {}",
            path.display()
        );
    }

    let tokens = case.problem.s_q();
    let max_ref_abs = want.o.iter().fold(0f64, |m, &x| m.max(x.abs() as f64));
    let max_abs_err = run
        .precast
        .as_ref()
        .map(|p| {
            p.iter()
                .zip(&want.o)
                .fold(0f64, |m, (&a, &b)| m.max((a as f64 - b as f64).abs()))
        })
        .unwrap_or(f64::NAN);
    let mismatches = report.codes_one_step_off
        + report.codes_beyond_one_step_within_bound
        + report.codes_beyond_one_step
        + report.scales_differing;
    let speed = match run.lane_instructions {
        Some(n) => {
            let per_second = n as f64 / run.seconds;
            println!(
                "interpreter: {:.2} s for {tokens} token(s) ({:.3} s a token), {:.0} M lane-instructions/s",
                run.seconds,
                run.seconds / tokens as f64,
                per_second / 1e6
            );
            format!(
                ",\"seconds_per_token\":{:.4},\"lane_instructions_per_second\":{per_second:.0}",
                run.seconds / tokens as f64
            )
        }
        None => format!(",\"launch_to_readback_seconds\":{:.6}", run.seconds),
    };
    println!(
        "{{\"target\":\"{target}\",\"key\":\"{key}\",\"tokens\":{tokens},\"max_abs_err\":{max_abs_err:.6e},\"max_ref_abs\":{max_ref_abs:.6e},\"mxfp8_mismatches\":{mismatches},\"engine\":\"{}\",\"ok\":{}{speed}{}}}",
        run.engine.name(),
        report.ok() && stored_ok,
        registers
            .map(|r| format!(",\"registers\":{r}"))
            .unwrap_or_default()
    );
    Ok(report.ok() && stored_ok)
}

fn main() -> ExitCode {
    let result = match parse_args(std::env::args().skip(1)) {
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Some(args)) => run(args),
        Err(usage) => Err(Stop::Usage(format!("{usage}\n{USAGE}"))),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Stop::Failed(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        Err(Stop::Usage(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Option<Args>, String> {
        parse_args(line.split_whitespace().map(str::to_string))
    }

    #[test]
    fn help_is_not_an_error() {
        assert_eq!(parse("--help"), Ok(None));
        assert_eq!(parse("--tokens 2 -h"), Ok(None));
    }

    #[test]
    fn a_case_refuses_the_flags_of_a_generated_batch() {
        let args = parse("--case c.safetensors --engine interpreter")
            .unwrap()
            .unwrap();
        assert_eq!(args.case, Some(PathBuf::from("c.safetensors")));
        let err =
            parse("--case c.safetensors --target sm90a --tokens 3 --adversarial").unwrap_err();
        assert!(
            err.contains("so --target, --tokens, --adversarial cannot apply: drop them"),
            "{err}"
        );
        let err = parse("--seed 4 --case c.safetensors").unwrap_err();
        assert!(err.contains("so --seed cannot apply: drop it"), "{err}");
    }

    #[test]
    fn too_many_tokens_is_refused_before_anything_runs() {
        let err = parse("--tokens 100000000").unwrap_err();
        assert!(
            err.contains("--tokens 100000000: a launch takes 1 to 65535 tokens"),
            "{err}"
        );
        assert!(parse("--tokens 0").is_err());
        assert_eq!(
            parse("--tokens 65535").unwrap().unwrap().tokens,
            Some(65535)
        );
    }
}
