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
//!     [--engine auto|gpu|interpreter]
//! ```
//! The default key is `h32_nk128_ne512_fp8_p64x16_<target>` (the target of the GPU when there
//! is one, else sm_100a), with 4 tokens.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use dsl_core::interp::Options;
use dsl_core::jit::{self, Device};
use kernels::swap_ab_decode::engine::{EngineRun, interpret_kernel, run_gpu};
use kernels::swap_ab_decode::{
    CaseSpec, CompileKey, DecodeCase, ExtraRecord, case_file, compare, generate, reference,
    swap_ab_decode_debug,
};

struct Args {
    key: Option<CompileKey>,
    target: Option<Target>,
    tokens: usize,
    seed: u64,
    adversarial: bool,
    case: Option<PathBuf>,
    write_case: Option<PathBuf>,
    engine: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        key: None,
        target: None,
        tokens: 4,
        seed: 1,
        adversarial: false,
        case: None,
        write_case: None,
        engine: "auto".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--key" => args.key = Some(value()?.parse().map_err(|e| format!("--key: {e}"))?),
            "--target" => args.target = Some(value()?.parse()?),
            "--tokens" => args.tokens = value()?.parse().map_err(|e| format!("--tokens: {e}"))?,
            "--seed" => args.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--adversarial" => args.adversarial = true,
            "--case" => args.case = Some(value()?.into()),
            "--write-case" => args.write_case = Some(value()?.into()),
            "--engine" => args.engine = value()?,
            "-h" | "--help" => {
                return Err("usage: decode [--key NAME | --target sm100a|sm90a] [--tokens N] [--seed S] \
                     [--adversarial] [--case FILE] [--write-case FILE] [--engine auto|gpu|interpreter]"
                    .into());
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    if !matches!(args.engine.as_str(), "auto" | "gpu" | "interpreter") {
        return Err(format!(
            "--engine takes auto, gpu or interpreter, not `{}`",
            args.engine
        ));
    }
    Ok(args)
}

/// The GPU to use, when there is one whose architecture has a kestrel target.
fn gpu(engine: &str) -> Result<Option<Arc<Device>>, String> {
    if engine == "interpreter" || !jit::gpu_available() {
        return if engine == "gpu" {
            Err("--engine gpu: no CUDA driver or GPU on this machine".into())
        } else {
            Ok(None)
        };
    }
    let device = Device::open(0).map_err(|e| e.to_string())?;
    match device.target() {
        Some(_) => Ok(Some(Arc::new(device))),
        None if engine == "gpu" => Err(format!(
            "--engine gpu: {} has no kestrel target",
            device.info().name
        )),
        None => Ok(None),
    }
}

fn run() -> Result<bool, String> {
    let args = parse_args()?;
    let device = gpu(&args.engine)?;
    let target = args
        .key
        .map(|k| k.target)
        .or(args.target)
        .or_else(|| device.as_ref().and_then(|d| d.target()))
        .unwrap_or(Target::Sm100a);
    let case: DecodeCase = match &args.case {
        Some(path) => {
            let file = case_file::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            println!(
                "case file {}: {} ({} tokens)",
                path.display(),
                file.case.name,
                file.case.problem.s_q()
            );
            let mut case = file.case;
            case.problem.key.target = target;
            case
        }
        None => {
            let key = args.key.unwrap_or(CompileKey {
                heads: 32,
                swa_width: 128,
                extra_width: 512,
                extra_record: ExtraRecord::Fp8,
                swa_page: 64,
                extra_page: 16,
                target,
            });
            let spec = CaseSpec {
                key,
                s_q: args.tokens,
                adversarial: args.adversarial,
            };
            generate(args.seed, &spec).map_err(|e| e.to_string())?
        }
    };
    let key = case.problem.key;
    println!(
        "key {key}: cluster of {} CTAs, {} head group(s), {} tokens",
        key.cluster_size(),
        key.head_groups(),
        case.problem.s_q()
    );

    let traced = std::time::Instant::now();
    let kernel = swap_ab_decode_debug(target, &key).map_err(|e| e.to_string())?;
    let module = emit(&kernel).map_err(|e| e.to_string())?;
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
        Err(dsl_core::ptxas::PtxasError::NotFound) => {
            println!("ptxas not found (pip install nvidia-cuda-nvcc): not assembled");
            None
        }
        Err(e) => return Err(e.to_string()),
    };

    let want = reference(&case.problem).map_err(|e| e.to_string())?;
    if let Some(path) = &args.write_case {
        case_file::write(path, &case, Some(&want)).map_err(|e| e.to_string())?;
        println!(
            "wrote the case with its expected outputs to {}",
            path.display()
        );
    }
    let on_gpu = device.as_ref().filter(|d| d.target() == Some(target));
    let run: EngineRun = match on_gpu {
        Some(d) => run_gpu(d, &case.problem, true).map_err(|e| e.to_string())?,
        None => {
            if args.engine == "gpu" {
                return Err(format!("--engine gpu: the GPU cannot run {target} code"));
            }
            interpret_kernel(&kernel, &case.problem, true, &Options::default())
                .map_err(|e| e.to_string())?
        }
    };
    let report = compare(&want, &run.out, run.precast.as_deref());
    println!("{report}");

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
    let mismatches =
        report.codes_one_step_off + report.codes_beyond_one_step + report.scales_differing;
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
        report.ok(),
        registers
            .map(|r| format!(",\"registers\":{r}"))
            .unwrap_or_default()
    );
    Ok(report.ok())
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
