//! The commands that look at the traced kernel without running it: `keys`, `ptx`, `ir`,
//! `ptxas` and `smem`.

use std::fmt::Write as _;
use std::path::Path;

use kestrel::core::Target;
use kestrel::core::emit::ptx::{PtxModule, emit};
use kestrel::core::interp::MAX_SMEM_BYTES;
use kestrel::core::ir::Kernel;
use kestrel::core::ptxas::{self, PtxasError};
use kestrel::kernels::swap_ab_decode::{CompileKey, snapshot_keys, trace_entry};

use crate::args::{IrArgs, KeysArgs, PtxArgs, PtxasArgs, ResourcesArgs, SmemArgs};
use crate::failure::{Failure, Outcome};
use crate::output::{out, outln};

/// Traces the decode kernel (or its debug entry point) for `key` on the key's target.
pub fn trace(key: &CompileKey, debug: bool) -> Result<Kernel, Failure> {
    trace_entry(key, debug).map_err(|e| {
        Failure::failed(format!(
            "the kernel could not be traced for {key}; the kernel source or the DSL rejects \
             this key:\n{e}"
        ))
    })
}

/// Prints `kernel` as PTX.
pub fn emit_ptx(key: &CompileKey, kernel: &Kernel) -> Result<PtxModule, Failure> {
    emit(kernel).map_err(|e| {
        Failure::failed(format!(
            "the kernel traced for {key} cannot be printed as PTX: {e}"
        ))
    })
}

pub fn keys(args: &KeysArgs) -> Outcome {
    let targets = match args.target {
        Some(t) => vec![t],
        None => vec![Target::Sm100a, Target::Sm90a],
    };
    for target in targets {
        for key in snapshot_keys(target) {
            outln!("{key}");
        }
    }
    Ok(())
}

pub fn ptx(args: &PtxArgs) -> Outcome {
    let kernel = trace(&args.key, args.debug)?;
    let module = emit_ptx(&args.key, &kernel)?;
    write_text(
        "the PTX",
        &module.kernel,
        &module.text,
        args.output.as_deref(),
    )
}

pub fn ir(args: &IrArgs) -> Outcome {
    let kernel = trace(&args.key, args.debug)?;
    let text = kestrel::core::ir::text::print(&kernel);
    write_text("the IR", &kernel.name, &text, args.output.as_deref())
}

/// Prints `text` (what `kernel` is, as `what` says) to standard output or to `output`.
fn write_text(what: &str, kernel: &str, text: &str, output: Option<&Path>) -> Outcome {
    match output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| {
                Failure::failed(format!(
                    "could not write {what} to {}: {e}; check that the directory exists and \
                     is writable",
                    path.display()
                ))
            })?;
            eprintln!(
                "wrote {kernel} ({} lines) to {}",
                text.lines().count(),
                path.display()
            );
        }
        None => out!("{text}"),
    }
    Ok(())
}

pub fn ptxas(args: &PtxasArgs) -> Outcome {
    let key = &args.key;
    let kernel = trace(key, args.debug)?;
    let module = emit_ptx(key, &kernel)?;
    let report = ptxas::assemble(&module).map_err(|e| match e {
        PtxasError::NotFound => {
            let env = match std::env::var_os("KESTREL_PTXAS") {
                Some(p) => format!(
                    "\n  KESTREL_PTXAS is set to {}, which is not a file: fix or unset it.",
                    std::path::Path::new(&p).display()
                ),
                None => String::new(),
            };
            Failure::missing_tool(format!(
                "{e}.{env}\n  `kestrel ptx {key}` prints the PTX without assembling it."
            ))
        }
        PtxasError::Rejected { .. } => Failure::failed(format!(
            "{e}\n  The emitted PTX is invalid for {target}: write it out with `kestrel ptx \
             {key} -o {key}.ptx` and look at the lines ptxas names.",
            target = key.target
        )),
        other => Failure::failed(format!(
            "{other}\n  Check that KESTREL_PTXAS (or the ptxas on PATH) is a working ptxas."
        )),
    })?;
    let ptxas_path = ptxas::find()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let smem = kernel.smem_bytes;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} for {key} ({}), assembled by {ptxas_path}",
        module.kernel, key.target
    );
    let _ = writeln!(
        out,
        "  registers      {} per thread ({} threads per CTA)",
        report.registers,
        kernel.threads_per_cta()
    );
    let _ = writeln!(out, "  spill stores   {} bytes", report.spill_stores);
    let _ = writeln!(out, "  spill loads    {} bytes", report.spill_loads);
    let _ = writeln!(out, "  stack frame    {} bytes", report.stack_frame);
    let _ = writeln!(
        out,
        "  dynamic smem   {smem} bytes ({:.1} KiB of the {} KiB a CTA may take)",
        smem as f64 / 1024.0,
        MAX_SMEM_BYTES / 1024
    );
    let _ = writeln!(out, "  PTX lines      {}", module.text.lines().count());
    let _ = writeln!(out, "  instructions   {} (IR, static)", kernel.inst_count());
    if report.spill_stores > 0 || report.spill_loads > 0 {
        let _ = writeln!(
            out,
            "  note: the kernel spills; `kestrel ptxas {key} --log` shows ptxas's report"
        );
    }
    out!("{out}");
    if args.log {
        outln!("\nptxas -v:\n{}", report.log.trim_end());
    }
    Ok(())
}

pub fn smem(args: &SmemArgs) -> Outcome {
    let key = &args.key;
    let kernel = trace(key, false)?;
    out!("{}", smem_map(key, &kernel));
    Ok(())
}

/// The shared-memory map as a table, with the total against the CTA limit.
fn smem_map(key: &CompileKey, kernel: &Kernel) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "dynamic shared memory of {} for {key} ({}): {} buffers",
        kernel.name,
        key.target,
        kernel.smem_buffers.len()
    );
    let name_width = kernel
        .smem_buffers
        .iter()
        .map(|b| b.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "  {:<name_width$}  {:>15}  {:>7}  {:>5}  layout",
        "name", "offset", "bytes", "align"
    );
    let mut used = 0u64;
    for b in &kernel.smem_buffers {
        used += u64::from(b.bytes);
        let _ = writeln!(
            out,
            "  {:<name_width$}  {:>7} {:>7}  {:>7}  {:>5}  {}",
            b.name,
            b.offset,
            format!("{:#x}", b.offset),
            b.bytes,
            b.align,
            b.layout.as_deref().unwrap_or("(raw bytes, no layout)")
        );
    }
    let total = kernel.smem_bytes;
    let padding = u64::from(total).saturating_sub(used);
    let _ = writeln!(
        out,
        "total {total} bytes ({:.1} KiB; {padding} bytes of alignment padding) of the {} KiB \
         ({MAX_SMEM_BYTES} bytes) a CTA may take: {}",
        total as f64 / 1024.0,
        MAX_SMEM_BYTES / 1024,
        if total <= MAX_SMEM_BYTES {
            format!("{} bytes free", MAX_SMEM_BYTES - total)
        } else {
            format!("OVER by {} bytes", total - MAX_SMEM_BYTES)
        }
    );
    out
}

pub fn resources(args: &ResourcesArgs) -> Outcome {
    let ptxas_path = ptxas::find().ok_or_else(|| {
        Failure::missing_tool(
            "ptxas was not found: install it with `pip install nvidia-cuda-nvcc`, put it on \
             PATH, or point KESTREL_PTXAS at it",
        )
    })?;
    let table = kestrel::kernels::swap_ab_decode::resources::resource_table(&ptxas_path)
        .map_err(Failure::failed)?;
    if args.write {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("kernels")
            .join(kestrel::kernels::swap_ab_decode::resources::RESOURCES_FILE);
        std::fs::write(&path, &table)
            .map_err(|e| Failure::failed(format!("writing {}: {e}", path.display())))?;
        outln!("wrote {}", path.display());
    } else {
        out!("{table}");
    }
    Ok(())
}
