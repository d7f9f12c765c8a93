//! `kestrel run`: the kernel's debug entry point in the CPU interpreter on a generated batch
//! or a case file, checked against the f64 reference, with the trace and snapshot hooks.

use std::path::Path;

use kestrel::core::Target;
use kestrel::core::interp::{
    InterpError, Options, SharedAccess, SnapshotData, SnapshotRequest, SnapshotWhat, StagePoint,
    TraceRequest,
};
use kestrel::core::ir::Kernel;
use kestrel::kernels::swap_ab_decode::case_file::{self, CaseFileError};
use kestrel::kernels::swap_ab_decode::engine::{
    EngineError, EngineRun, INTERPRETER_SMS, interpret_kernel,
};
use kestrel::kernels::swap_ab_decode::host::MAX_TOKENS;
use kestrel::kernels::swap_ab_decode::{
    CaseSpec, CompileKey, DecodeCase, ReferenceOutput, compare, generate, reference,
};

use crate::args::{At, DumpWhat, RunArgs, TraceAt, ValueType};
use crate::dump::{format_smem, format_tmem, format_trace};
use crate::failure::{Failure, Outcome};
use crate::inspect::trace;
use crate::output::{out, outln};

/// Trace entries printed when `--limit` is not given.
const DEFAULT_TRACE_LIMIT: usize = 2000;
/// Trace entries recorded at most.
const MAX_TRACE_ENTRIES: usize = 1 << 22;

/// What is run, and how to say so in a command line.
struct Workload {
    key: CompileKey,
    case: DecodeCase,
    /// The expected outputs stored in the case file, if any.
    expected: Option<ReferenceOutput>,
    /// The command that reruns it (for hints in messages).
    command: String,
}

pub fn run(args: &RunArgs) -> Outcome {
    check_flags(args)?;
    let work = workload(args)?;
    let key = work.key;
    let problem = &work.case.problem;
    let reference = reference(problem).map_err(|e| {
        Failure::failed(format!(
            "the f64 reference cannot run case `{}`: {e}",
            work.case.name
        ))
    })?;
    let kernel = trace(&key, true)?;
    let grid = key.grid(problem.s_q(), INTERPRETER_SMS);
    let threads = kernel.threads_per_cta();
    let stages = match &args.stage {
        Some(text) => matching_stages(&kernel, text)?,
        None => Vec::new(),
    };
    let mut options = Options {
        trace: trace_request(args, grid, threads)?,
        shared_wavefronts: args.banks,
        ..Options::default()
    };
    let dump = match &args.dump {
        Some(what) => Some(Dump::request(
            args,
            what,
            &kernel,
            key,
            grid,
            &stages,
            &mut options,
        )?),
        None => None,
    };

    outln!(
        "{} for {key} in the CPU interpreter: case `{}`, {} token(s); grid ({},{},{}) = \
         (cluster rank, token, head group), {threads} threads a CTA",
        kernel.name,
        work.case.name,
        problem.s_q(),
        grid[0],
        grid[1],
        grid[2]
    );
    let run = interpret_kernel(&kernel, problem, true, &options)
        .map_err(|e| engine_failure(e, &work.command))?;
    if let Some(at) = args.trace {
        print_trace(args, at, &run, &kernel, grid)?;
    }
    if let Some(dump) = &dump {
        dump.print(args, &run, &options)?;
    }
    if args.banks {
        print_banks(&run.shared_accesses);
    }
    report(args, &work, &reference, &run)
}

/// Sites with bank conflicts printed by `--banks`, worst first.
const BANK_ROWS: usize = 20;

/// `--banks`: the run's shared-memory wavefronts, and the accesses that conflict, one row a
/// source site (the instructions traced from one call, e.g. a loop's unrolled stores).
fn print_banks(accesses: &[SharedAccess]) {
    let wavefronts: u64 = accesses.iter().map(|a| a.wavefronts).sum();
    let excessive: u64 = accesses.iter().map(SharedAccess::excessive).sum();
    outln!(
        "\nshared-memory wavefronts of ld/st.shared: {wavefronts}, of which {excessive} ({:.1}%) \
         from bank conflicts, over {} instructions",
        100.0 * excessive as f64 / wavefronts.max(1) as f64,
        accesses.len()
    );
    let mut sites: Vec<(SharedAccess, usize)> = Vec::new();
    for a in accesses.iter().filter(|a| a.excessive() > 0) {
        let same = |(s, _): &&mut (SharedAccess, usize)| {
            (s.op, s.bytes, s.loc, &s.stage) == (a.op, a.bytes, a.loc, &a.stage)
        };
        match sites.iter_mut().find(same) {
            Some((site, n)) => {
                site.executions += a.executions;
                site.wavefronts += a.wavefronts;
                site.ideal += a.ideal;
                *n += 1;
            }
            None => sites.push((a.clone(), 1)),
        }
    }
    sites.sort_by_key(|(s, _)| std::cmp::Reverse(s.excessive()));
    for (s, instructions) in sites.iter().take(BANK_ROWS) {
        outln!(
            "  {:>9} excessive  {:.1} wavefronts a warp (ideal {:.1})  {}.{} x{instructions} \
             instruction(s), {} warp executions  {}  [{}]",
            s.excessive(),
            s.wavefronts as f64 / s.executions as f64,
            s.ideal as f64 / s.executions as f64,
            s.op,
            8 * s.bytes,
            s.executions,
            s.loc,
            s.stage.as_deref().unwrap_or("-"),
        );
    }
    if sites.len() > BANK_ROWS {
        outln!("  ... and {} more sites", sites.len() - BANK_ROWS);
    }
}

/// Options that only mean something beside another.
fn check_flags(args: &RunArgs) -> Result<(), Failure> {
    if args.stage.is_some() && args.trace.is_none() && args.dump.is_none() {
        return Err(Failure::usage(
            "--stage selects the stages --trace prints or the stage --dump snapshots: give \
             --trace CTA,THREAD or --dump smem:BUFFER as well",
        ));
    }
    if args.limit.is_some() && args.trace.is_none() && args.dump.is_none() {
        return Err(Failure::usage(
            "--limit caps what --trace or --dump prints: give one of them as well",
        ));
    }
    if args.dump.is_some() && args.stage.is_none() {
        return Err(Failure::usage(
            "--dump needs --stage TEXT: the stage at whose start or end (--at) to take the \
             snapshot; `kestrel run KEY --dump ... --stage 3:` for stage 3",
        ));
    }
    Ok(())
}

/// What `--trace` asks the interpreter to record, checked against the grid and the CTA.
fn trace_request(
    args: &RunArgs,
    grid: [u32; 3],
    threads: u32,
) -> Result<Option<TraceRequest>, Failure> {
    let Some(at) = args.trace else {
        return Ok(None);
    };
    check_block(at.block, grid, "--trace")?;
    if at.thread >= threads {
        return Err(Failure::usage(format!(
            "--trace: thread {} does not exist: a CTA has threads 0..{threads}",
            at.thread
        )));
    }
    Ok(Some(TraceRequest {
        block: at.block,
        thread: at.thread,
        // A thread of the decode kernel runs a few thousand instructions: record them all,
        // so that the stage filter and the count of what is not shown are exact.
        max_entries: MAX_TRACE_ENTRIES,
    }))
}

/// Prints the recorded trace of `--trace`'s thread, in the selected stages.
fn print_trace(
    args: &RunArgs,
    at: TraceAt,
    run: &EngineRun,
    kernel: &Kernel,
    grid: [u32; 3],
) -> Outcome {
    let [x, y, z] = at.block;
    let keep = |stage: Option<&str>| {
        args.stage
            .as_ref()
            .is_none_or(|t| stage.is_some_and(|s| s.contains(t.as_str())))
    };
    let limit = args.limit.unwrap_or(DEFAULT_TRACE_LIMIT);
    let (text, hidden) = format_trace(&run.trace, &keep, limit);
    outln!(
        "\ntrace of thread {} (warp {}, lane {}) of block ({x},{y},{z}){}:",
        at.thread,
        at.thread / 32,
        at.thread % 32,
        args.stage
            .as_ref()
            .map(|t| format!(", stages containing `{t}`"))
            .unwrap_or_default()
    );
    if text.is_empty() {
        return Err(Failure::failed(format!(
            "the thread executed no instruction{}: check the CTA against the grid \
             ({},{},{}) and the stage against the kernel's stages ({})",
            if args.stage.is_some() {
                " in the selected stages"
            } else {
                ""
            },
            grid[0],
            grid[1],
            grid[2],
            kernel.stages.join(" | ")
        )));
    }
    out!("{text}");
    if hidden > 0 {
        outln!("  ... {hidden} more entries not shown; raise --limit (now {limit})");
    }
    Ok(())
}

/// A `--dump` snapshot: of what, in which CTA, at which stages.
struct Dump<'a> {
    what: &'a DumpWhat,
    cta: [u32; 3],
    stages: &'a [String],
    /// The buffer's offset in shared memory (0 for tensor memory).
    base: u32,
}

impl<'a> Dump<'a> {
    /// Checks the request and adds a snapshot at each selected stage to `options`.
    fn request(
        args: &RunArgs,
        what: &'a DumpWhat,
        kernel: &Kernel,
        key: CompileKey,
        grid: [u32; 3],
        stages: &'a [String],
        options: &mut Options,
    ) -> Result<Dump<'a>, Failure> {
        let cta = args.cta.unwrap_or([0, 0, 0]);
        check_block(cta, grid, "--cta")?;
        let (snapshot, base) = snapshot_of(args, what, kernel, key)?;
        for stage in stages {
            options.snapshots.push(SnapshotRequest {
                block: cta,
                stage: stage.clone(),
                at: match args.at {
                    At::Start => StagePoint::Start,
                    At::End => StagePoint::End,
                },
                what: snapshot.clone(),
            });
        }
        Ok(Dump {
            what,
            cta,
            stages,
            base,
        })
    }

    /// Prints every snapshot the run took.
    fn print(&self, args: &RunArgs, run: &EngineRun, options: &Options) -> Outcome {
        let [x, y, z] = self.cta;
        let at = match args.at {
            At::Start => "start",
            At::End => "end",
        };
        if run.snapshots.is_empty() {
            return Err(Failure::failed(format!(
                "no snapshot was taken: no warp of block ({x},{y},{z}) reached the {at} of {}. \
                 A CTA skips stages 3-6 when its KV tile has no valid row; try another \
                 --cta or --stage",
                quoted(self.stages)
            )));
        }
        for snap in &run.snapshots {
            let stage = &options.snapshots[snap.request].stage;
            let (title, (text, hidden)) = self.format(args, &snap.data);
            outln!(
                "\n{title} of block ({x},{y},{z}) at the {at} of stage `{stage}` (taken by warp {}):",
                snap.warp
            );
            out!("{text}");
            if hidden > 0 {
                outln!("  ... {hidden} more rows not shown; raise --limit");
            }
        }
        Ok(())
    }

    /// A snapshot's title and its rows (with the count of rows `--limit` left out).
    fn format(&self, args: &RunArgs, data: &SnapshotData) -> (String, (String, usize)) {
        let limit = args.limit.unwrap_or(usize::MAX);
        let base = self.base;
        match (data, self.what) {
            (SnapshotData::Smem(bytes), DumpWhat::Smem(name)) => (
                format!(
                    "shared buffer `{name}` ({} bytes from offset {base:#x})",
                    bytes.len()
                ),
                format_smem(bytes, base, args.as_type, limit),
            ),
            (SnapshotData::Tmem(lanes), DumpWhat::Tmem { col0, col1 }) => (
                format!(
                    "tensor memory columns {col0}..{col1}, lanes 0..128 ({})",
                    if args.as_type == Some(ValueType::U32) {
                        "32-bit words"
                    } else {
                        "f32"
                    }
                ),
                format_tmem(lanes, *col0, args.as_type == Some(ValueType::U32), limit),
            ),
            _ => unreachable!("snapshots are of what was requested"),
        }
    }
}

/// The memory `--dump` copies, and the shared buffer's offset (0 for tensor memory).
fn snapshot_of(
    args: &RunArgs,
    what: &DumpWhat,
    kernel: &Kernel,
    key: CompileKey,
) -> Result<(SnapshotWhat, u32), Failure> {
    match what {
        DumpWhat::Smem(name) => {
            let Some(b) = kernel.smem_buffers.iter().find(|b| &b.name == name) else {
                let names: Vec<&str> = kernel
                    .smem_buffers
                    .iter()
                    .map(|b| b.name.as_str())
                    .collect();
                return Err(Failure::usage(format!(
                    "--dump: the kernel for {key} has no shared buffer `{name}`; its \
                     buffers are {} (`kestrel smem {key}` shows the map)",
                    names.join(", ")
                )));
            };
            let snapshot = SnapshotWhat::Smem {
                offset: b.offset,
                bytes: b.bytes,
            };
            Ok((snapshot, b.offset))
        }
        DumpWhat::Tmem { col0, col1 } => {
            if key.target != Target::Sm100a {
                return Err(Failure::usage(format!(
                    "--dump tmem: tensor memory exists only on sm100a (tcgen05) keys; {key} \
                     is for {}, where the MMAs accumulate in registers and the scores go \
                     to the shared buffer `scores_p`, which P overwrites in stage 4 (try \
                     --dump smem:scores_p --stage 4: --at start --as f32)",
                    key.target
                )));
            }
            if args.as_type == Some(ValueType::Bf16) {
                return Err(Failure::usage(
                    "--dump tmem: tensor-memory cells are 32-bit; use --as f32 (the \
                     default) or --as u32 (hex)",
                ));
            }
            let snapshot = SnapshotWhat::Tmem {
                lane: 0,
                lanes: 128,
                col: *col0,
                cols: col1 - col0,
            };
            Ok((snapshot, 0))
        }
    }
}

/// The numerics check against the f64 reference (and the case file's expected outputs),
/// the outputs to `--write-output`, and the interpreter's speed.
fn report(
    args: &RunArgs,
    work: &Workload,
    reference: &ReferenceOutput,
    run: &EngineRun,
) -> Outcome {
    let report = compare(reference, &run.out, run.precast.as_deref());
    outln!("\n{}", report.to_string().trim_end());
    if let Some(path) = &args.write_output {
        let precast = run.precast.as_deref().map(|p| (p, work.key.heads));
        case_file::write_outputs(path, &run.out, precast).map_err(|e| {
            Failure::failed(format!(
                "could not write the outputs: {e}; check that the directory exists"
            ))
        })?;
        outln!(
            "wrote the kernel's raw outputs (out_data codes, out_scale words, pre-cast f32) to {}",
            path.display()
        );
    }
    if let Some(expected) = &work.expected {
        compare_with_expected(expected, reference, run);
    }
    let lane_instructions = run.lane_instructions.unwrap_or(0);
    outln!(
        "interpreter: {lane_instructions} lane-instructions in {:.3} s ({:.1} M \
         lane-instructions/s)",
        run.seconds,
        lane_instructions as f64 / run.seconds.max(1e-9) / 1e6
    );
    if !report.ok() {
        return Err(Failure::failed(format!(
            "the kernel's output does not meet the numerics contract (report above); `{} \
             --trace CTA,THREAD` or `--dump smem:BUFFER --stage TEXT` show what a CTA computed",
            work.command
        )));
    }
    Ok(())
}

/// The case file's expected outputs against the run, for information.
fn compare_with_expected(expected: &ReferenceOutput, reference: &ReferenceOutput, run: &EngineRun) {
    if expected.out.layout == run.out.layout
        && expected.out.data.len() == run.out.data.len()
        && expected.out.scale.len() == run.out.scale.len()
        && expected.o.len() == reference.o.len()
    {
        let against_file = compare(expected, &run.out, run.precast.as_deref());
        outln!(
            "against the case file's expected outputs (for information):\n{}",
            against_file.to_string().trim_end()
        );
    } else {
        outln!("the case file's expected outputs have another shape: not compared");
    }
}

/// The case to run: from the file, or generated for the key.
fn workload(args: &RunArgs) -> Result<Workload, Failure> {
    if let Some(path) = &args.case {
        let file = case_file::read(path).map_err(|e| case_failure(path, e))?;
        let key = file.case.problem.key;
        if let Some(given) = args.key
            && given != key
        {
            return Err(Failure::usage(format!(
                "{} holds a case for {key}, not {given}: leave KEY out or give {key}",
                path.display()
            )));
        }
        return Ok(Workload {
            key,
            case: file.case,
            expected: file.expected,
            command: format!("kestrel run --case {}", path.display()),
        });
    }
    let Some(key) = args.key else {
        return Err(Failure::usage(
            "give a compile key (e.g. `kestrel run h16_nk64_ne0_fp8_p64x64_sm100a`; `kestrel \
             keys` lists some) or a case file with --case FILE.safetensors",
        ));
    };
    if !(1..=MAX_TOKENS).contains(&args.tokens) {
        return Err(Failure::usage(format!(
            "--tokens {}: a launch takes 1 to {MAX_TOKENS} tokens (the host API's limit, the \
             grid's y dimension)",
            args.tokens
        )));
    }
    let spec = CaseSpec {
        key,
        s_q: args.tokens,
        adversarial: args.adversarial,
    };
    let case = generate(args.seed, &spec)
        .map_err(|e| Failure::failed(format!("could not generate a batch for {key}: {e}")))?;
    Ok(Workload {
        key,
        case,
        expected: None,
        command: format!(
            "kestrel run {key} --tokens {} --seed {}{}",
            args.tokens,
            args.seed,
            if args.adversarial {
                " --adversarial"
            } else {
                ""
            }
        ),
    })
}

fn case_failure(path: &Path, e: CaseFileError) -> Failure {
    match &e {
        CaseFileError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound => {
            Failure::failed(format!(
                "case file {} not found: check the path (a case file is a .safetensors file in \
                 the swap_ab_decode case format, see `kernels::swap_ab_decode::case_file`)",
                path.display()
            ))
        }
        CaseFileError::Io { .. } => {
            Failure::failed(format!("{e}: check that the file is readable"))
        }
        _ => Failure::failed(format!("{} is not a usable case file: {e}", path.display())),
    }
}

/// Checks a CTA against the grid, saying what each coordinate means.
fn check_block(block: [u32; 3], grid: [u32; 3], option: &str) -> Result<(), Failure> {
    let names = ["cluster rank", "token", "head group"];
    for d in 0..3 {
        if block[d] >= grid[d] {
            return Err(Failure::usage(format!(
                "{option}: block ({},{},{}) is outside the grid ({},{},{}): its {} must be below \
                 {} (blocks are (cluster rank, token, head group))",
                block[0], block[1], block[2], grid[0], grid[1], grid[2], names[d], grid[d]
            )));
        }
    }
    Ok(())
}

/// The distinct stage titles containing `text`.
fn matching_stages(kernel: &Kernel, text: &str) -> Result<Vec<String>, Failure> {
    let mut found: Vec<String> = Vec::new();
    for s in &kernel.stages {
        if s.contains(text) && !found.contains(s) {
            found.push(s.clone());
        }
    }
    if found.is_empty() {
        let mut titles: Vec<&str> = Vec::new();
        for s in &kernel.stages {
            if !titles.contains(&s.as_str()) {
                titles.push(s);
            }
        }
        return Err(Failure::usage(format!(
            "--stage `{text}` matches no stage title; the kernel's stages are:\n  {}",
            titles.join("\n  ")
        )));
    }
    Ok(found)
}

fn quoted(stages: &[String]) -> String {
    stages
        .iter()
        .map(|s| format!("stage `{s}`"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// An interpreter or trace failure, with what to run next.
fn engine_failure(e: EngineError, command: &str) -> Failure {
    match &e {
        EngineError::Interp(InterpError::Fault(fault)) => {
            let [x, y, z] = fault.site.cta.block;
            let thread = fault.thread.unwrap_or(fault.site.warp * 32);
            let stage = fault
                .site
                .stage
                .as_ref()
                .map(|s| {
                    let number = s.split(':').next().unwrap_or(s);
                    format!(" --stage \"{number}:\"")
                })
                .unwrap_or_default();
            Failure::failed(format!(
                "the kernel faulted in the interpreter:\n{e}\n  To see what led there: \
                 `{command} --trace {x},{y},{z},{thread}{stage}`"
            ))
        }
        EngineError::Interp(InterpError::Deadlock(d)) => {
            let hint = d
                .blocked
                .first()
                .map(|b| {
                    let [x, y, z] = b.site.cta.block;
                    format!(
                        "\n  To see how a blocked warp got there: `{command} --trace \
                         {x},{y},{z},{}`",
                        b.site.warp * 32
                    )
                })
                .unwrap_or_default();
            Failure::failed(format!(
                "the kernel deadlocked in the interpreter:\n{e}{hint}"
            ))
        }
        _ => Failure::failed(format!("the interpreter could not run the kernel: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use kestrel::core::interp::{CtaId, Fault, FaultKind, Site};
    use kestrel::core::ir::SourceLoc;

    use super::*;

    #[test]
    fn a_fault_says_which_thread_to_trace() {
        let fault = Fault {
            kind: FaultKind::OutOfBounds,
            site: Site {
                op: "ld.shared",
                stage: Some("4: softmax down each head's column".into()),
                loc: SourceLoc {
                    file: "kernels/src/swap_ab_decode/device/softmax.rs",
                    line: 36,
                    column: 18,
                },
                cta: CtaId {
                    block: [2, 1, 0],
                    rank: 2,
                },
                warp: 3,
            },
            thread: Some(101),
            tid: Some([101, 0, 0]),
            address: Some(0x40_0000),
            message: "shared address past the CTA's window".into(),
        };
        let failure = engine_failure(
            EngineError::Interp(InterpError::Fault(Box::new(fault))),
            "kestrel run KEY --tokens 2 --seed 1",
        );
        assert_eq!(failure.code, crate::failure::FAILED);
        assert!(
            failure.message.contains("out-of-bounds access"),
            "{}",
            failure.message
        );
        assert!(
            failure
                .message
                .contains("`kestrel run KEY --tokens 2 --seed 1 --trace 2,1,0,101 --stage \"4:\"`"),
            "{}",
            failure.message
        );
    }
}
