//! Assembles every PTX snapshot under `tests/snapshots/` with `ptxas` for its own target
//! and reports registers, spills and stack per kernel.
//!
//! Without ptxas the test prints a skip line, unless `KESTREL_REQUIRE_PTXAS=1` (set by the
//! README's test command and CI), which makes a missing ptxas a failure.

use std::path::{Path, PathBuf};

use dsl_core::Target;
use dsl_core::emit::ptx::PtxModule;
use dsl_core::ptxas;

/// Registers a thread may use at one CTA of 512 threads per SM (65536 / 512).
const MAX_REGISTERS: u32 = 128;

fn snapshot_ptx(text: &str) -> &str {
    // insta files: a `---` delimited header, then the snapshot body.
    let mut parts = text.splitn(3, "---\n");
    parts.next();
    parts.next();
    parts.next().unwrap_or("")
}

fn target_of(name: &str) -> Option<Target> {
    if name.contains("sm100a") {
        Some(Target::Sm100a)
    } else if name.contains("sm90a") {
        Some(Target::Sm90a)
    } else {
        None
    }
}

/// A ptxas a check needs: `found`, or where it is missing a failure (`missing`) when
/// `KESTREL_REQUIRE_PTXAS=1`, else a skip line (`skipped`) and none.
fn required(found: Option<PathBuf>, missing: &str, skipped: &str) -> Option<PathBuf> {
    if found.is_none() {
        assert!(
            std::env::var("KESTREL_REQUIRE_PTXAS").as_deref() != Ok("1"),
            "{missing}"
        );
        eprintln!("{skipped}");
    }
    found
}

#[test]
fn every_snapshot_assembles() {
    let Some(ptxas_path) = required(
        ptxas::find(),
        "ptxas is required (KESTREL_REQUIRE_PTXAS=1) but was not found: \
         pip install nvidia-cuda-nvcc, or set KESTREL_PTXAS",
        "SKIPPED ptxas check: ptxas not found (pip install nvidia-cuda-nvcc)",
    ) else {
        return;
    };
    assemble_snapshots(&ptxas_path, |_| true);
}

/// The GPU machines' drivers JIT the PTX with an older ptxas (CUDA 13.0's) than the
/// pinned one, and it degrades code the pinned one takes silently (`C7519`: a fence
/// injected where wgmmas in flight cross a branch). Every sm_90a snapshot, the kernels
/// those drivers run, must assemble under that release too: `$KESTREL_DRIVER_PTXAS`,
/// which `scripts/test.sh` installs; without it the test prints a skip line, unless
/// `KESTREL_REQUIRE_PTXAS=1`.
#[test]
fn every_sm90a_snapshot_assembles_under_the_drivers_ptxas() {
    let Some(ptxas_path) = required(
        std::env::var_os("KESTREL_DRIVER_PTXAS").map(PathBuf::from),
        "the driver's ptxas is required (KESTREL_REQUIRE_PTXAS=1) but KESTREL_DRIVER_PTXAS is \
         not set: run scripts/test.sh, or pip install nvidia-cuda-nvcc==13.0.88 and point \
         KESTREL_DRIVER_PTXAS at its ptxas",
        "SKIPPED driver ptxas check: KESTREL_DRIVER_PTXAS is not set",
    ) else {
        return;
    };
    println!("{}", ptxas::version(&ptxas_path).unwrap());
    assemble_snapshots(&ptxas_path, |target| target == Target::Sm90a);
}

/// Assembles the PTX snapshots of the targets `include` takes with `ptxas_path`: each must
/// assemble with no spill, no `C75xx` degradation and within the register limit.
fn assemble_snapshots(ptxas_path: &Path, include: impl Fn(Target) -> bool) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots");
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/snapshots exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    entries.sort();
    let mut failures = Vec::new();
    let mut assembled = 0;
    println!(
        "{:<70} {:>5} {:>7} {:>6}",
        "snapshot", "regs", "spills", "stack"
    );
    for path in entries {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let ptx = snapshot_ptx(&text);
        if !ptx.contains(".entry") {
            continue;
        }
        let target = target_of(&name).unwrap_or_else(|| panic!("{name}: no target in the name"));
        if !include(target) {
            continue;
        }
        let module = PtxModule {
            kernel: name.clone(),
            target,
            text: ptx.to_string(),
        };
        match ptxas::assemble_with(ptxas_path, &module) {
            Ok(r) => {
                assembled += 1;
                println!(
                    "{name:<70} {:>5} {:>7} {:>6}",
                    r.registers,
                    r.spill_stores + r.spill_loads,
                    r.stack_frame
                );
                // A warp-specialised kernel sets its budgets per role with setmaxnreg (checked
                // by its RegisterPlan); the entry count is then the block's share of the file.
                let limit = if ptx.contains("setmaxnreg") {
                    255
                } else {
                    MAX_REGISTERS
                };
                if r.spill_stores + r.spill_loads > 0 || r.registers > limit {
                    failures.push(format!(
                        "{name}: {} registers, {} bytes spilled (limit {limit} registers, no spills)",
                        r.registers,
                        r.spill_stores + r.spill_loads
                    ));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(assembled > 0, "no PTX snapshots found in {}", dir.display());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The resource table in the kernel's docs is what this ptxas reports, when it is the
/// release that wrote it (another release may allocate registers differently).
#[test]
fn the_resource_table_in_the_docs_is_current() {
    use kernels::swap_ab_decode::resources::{RESOURCES_FILE, resource_table};
    let Some(ptxas_path) = required(
        ptxas::find(),
        "ptxas is required (KESTREL_REQUIRE_PTXAS=1) but was not found",
        "SKIPPED resource table check: ptxas not found",
    ) else {
        return;
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("kernels")
        .join(RESOURCES_FILE);
    let written = std::fs::read_to_string(&path).expect("the resource table exists");
    let version = ptxas::version(&ptxas_path).unwrap();
    if !written.contains(&version) {
        eprintln!("SKIPPED resource table check: written by another ptxas than `{version}`");
        return;
    }
    let current = resource_table(&ptxas_path).unwrap();
    assert!(
        current == written,
        "{} is stale: run `cargo run --bin kestrel -- resources --write`",
        path.display()
    );
}
