//! Running NVIDIA's `ptxas` on emitted modules: the assembler check of every snapshot and
//! the source of the register, spill and stack figures reported per kernel.
//!
//! `ptxas` is found through `$KESTREL_PTXAS`, then `$PATH`, then the location the PyPI
//! package `nvidia-cuda-nvcc` installs it to under the active Python, then the virtual
//! environment `scripts/test.sh` installs it into (`target/tools/py` of the workspace).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::emit::ptx::PtxModule;

/// What ptxas reported for one kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxasReport {
    pub registers: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub stack_frame: u32,
    /// The full `-v` output.
    pub log: String,
}

/// Why assembling failed.
#[derive(Debug, thiserror::Error)]
pub enum PtxasError {
    #[error(
        "ptxas was not found: run scripts/test.sh once (it installs nvidia-cuda-nvcc=={PINNED_NVCC} \
         into target/tools), or `pip install nvidia-cuda-nvcc=={PINNED_NVCC}` (the release the \
         resource table records) and put its ptxas on PATH or in KESTREL_PTXAS"
    )]
    NotFound,
    #[error("could not run ptxas at {path}: {source}")]
    Run {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("ptxas rejected `{kernel}` for {target}:\n{log}")]
    Rejected {
        kernel: String,
        target: crate::Target,
        log: String,
    },
    /// ptxas accepted the module but reported that it dropped or degraded a request:
    /// `C7508` (`setmaxnreg` ignored) or `C7513` (every wgmma serialised). These come as
    /// info lines with exit code 0, so they are checked here.
    #[error("ptxas degraded `{kernel}` for {target} ({code}): {line}")]
    Degraded {
        kernel: String,
        target: crate::Target,
        code: String,
        line: String,
    },
    #[error("could not read ptxas's report for `{kernel}`:\n{log}")]
    Unparsed { kernel: String, log: String },
}

/// The `nvidia-cuda-nvcc` release `scripts/test.sh` installs and the resource table records.
pub const PINNED_NVCC: &str = "13.5.37";

/// The ptxas executable to use, if there is one.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KESTREL_PTXAS") {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join("ptxas");
            if p.is_file() {
                return Some(p);
            }
        }
    }
    python_package_ptxas().or_else(test_script_ptxas)
}

/// `ptxas` in the virtual environment `scripts/test.sh` makes under the workspace's
/// `target/tools/py` (`lib/python3.X/site-packages/nvidia/cu13/bin/ptxas`).
fn test_script_ptxas() -> Option<PathBuf> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/py/lib");
    std::fs::read_dir(lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|python| python.path().join("site-packages/nvidia/cu13/bin/ptxas"))
        .find(|p| p.is_file())
}

/// `ptxas` from the `nvidia-cuda-nvcc` wheel (`site-packages/nvidia/cu13/bin/ptxas` or the
/// older `nvidia/cuda_nvcc/bin/ptxas`).
fn python_package_ptxas() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ])
        .output()
        .ok()?;
    let site = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    ["nvidia/cu13/bin/ptxas", "nvidia/cuda_nvcc/bin/ptxas"]
        .iter()
        .map(|rel| site.join(rel))
        .find(|p| p.is_file())
}

/// The version line of a ptxas (`Cuda compilation tools, release 13.5, V13.5.37`).
pub fn version(ptxas: &Path) -> Result<String, PtxasError> {
    let output = Command::new(ptxas)
        .arg("--version")
        .output()
        .map_err(|source| PtxasError::Run {
            path: ptxas.to_path_buf(),
            source,
        })?;
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .find(|l| l.contains("release"))
        .unwrap_or_else(|| text.lines().last().unwrap_or(""))
        .trim()
        .to_string())
}

/// Assembles `module` for its own target with `-v` and returns the resource report.
pub fn assemble(module: &PtxModule) -> Result<PtxasReport, PtxasError> {
    let ptxas = find().ok_or(PtxasError::NotFound)?;
    assemble_with(&ptxas, module)
}

/// Like [`assemble`] with an explicit ptxas.
pub fn assemble_with(ptxas: &Path, module: &PtxModule) -> Result<PtxasReport, PtxasError> {
    let dir =
        std::env::temp_dir().join(format!("kestrel-ptxas-{}-{}", std::process::id(), unique()));
    std::fs::create_dir_all(&dir).map_err(|source| PtxasError::Run {
        path: dir.clone(),
        source,
    })?;
    let src = dir.join(format!("{}.ptx", module.kernel));
    let obj = dir.join(format!("{}.cubin", module.kernel));
    std::fs::write(&src, &module.text).map_err(|source| PtxasError::Run {
        path: src.clone(),
        source,
    })?;
    let output = Command::new(ptxas)
        .arg(format!("-arch={}", module.target.sm_name()))
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .map_err(|source| PtxasError::Run {
            path: ptxas.to_path_buf(),
            source,
        });
    let _ = std::fs::remove_dir_all(&dir);
    let output = output?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() {
        return Err(PtxasError::Rejected {
            kernel: module.kernel.clone(),
            target: module.target,
            log,
        });
    }
    read_log(&module.kernel, module.target, log)
}

/// What the `-v` log of a module ptxas accepted says of `kernel` (also the driver JIT's
/// verbose log, [`crate::jit::LoadedKernel::jit_log`]): its report, or the `C75xx`
/// degradation or unreadable log that makes it a failure.
///
/// ```
/// use dsl_core::Target;
/// use dsl_core::ptxas::{self, PtxasError};
/// let log = "ptxas info    : Used 70 registers, used 1 barriers\n\
///            ptxas info    : 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads";
/// assert_eq!(ptxas::read_log("k", Target::Sm90a, log.into())?.registers, 70);
/// let fenced = format!("ptxas info    : (C7519) warpgroup.arrive is injected\n{log}");
/// assert!(matches!(
///     ptxas::read_log("k", Target::Sm90a, fenced),
///     Err(PtxasError::Degraded { .. })
/// ));
/// # Ok::<(), PtxasError>(())
/// ```
pub fn read_log(
    kernel: &str,
    target: crate::Target,
    log: String,
) -> Result<PtxasReport, PtxasError> {
    if let Some((code, line)) = degradation(&log) {
        return Err(PtxasError::Degraded {
            kernel: kernel.to_string(),
            target,
            code,
            line,
        });
    }
    parse_report(&log).ok_or_else(|| PtxasError::Unparsed {
        kernel: kernel.to_string(),
        log,
    })
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The first `C75xx` diagnostic in a ptxas log (`info (C7513) ...`), with its line.
pub fn degradation(log: &str) -> Option<(String, String)> {
    log.lines().find_map(|line| {
        let at = line.find("(C75")?;
        let code = line[at + 1..].split(')').next()?;
        let digits = code.strip_prefix('C')?;
        (digits.len() == 4 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| (code.to_string(), line.trim().to_string()))
    })
}

/// Reads `Used N registers` and `S bytes stack frame, A bytes spill stores, B bytes spill
/// loads` out of a `ptxas -v` log.
pub fn parse_report(log: &str) -> Option<PtxasReport> {
    let number_before = |line: &str, word: &str| -> Option<u32> {
        let at = line.find(word)?;
        line[..at].split_whitespace().last()?.parse().ok()
    };
    let mut registers = None;
    let mut frame = None;
    for line in log.lines() {
        if line.contains("Used") && line.contains("registers") {
            registers = number_before(line, "registers");
        }
        if line.contains("stack frame") {
            frame = Some((
                number_before(line, "bytes stack frame")?,
                number_before(line, "bytes spill stores")?,
                number_before(line, "bytes spill loads")?,
            ));
        }
    }
    let (stack_frame, spill_stores, spill_loads) = frame?;
    Some(PtxasReport {
        registers: registers?,
        spill_stores,
        spill_loads,
        stack_frame,
        log: log.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::degradation;

    #[test]
    fn c75xx_info_lines_are_degradations() {
        let log = "ptxas info    : (C7508) 'setmaxnreg' ignored; unable to determine register count at entry\nptxas info    : Used 40 registers";
        let (code, line) = degradation(log).unwrap();
        assert_eq!(code, "C7508");
        assert!(line.contains("setmaxnreg"));
        let wgmma = "ptxas info    : (C7513) Potential Performance Loss: wgmma.mma_async instructions are serialized";
        assert_eq!(degradation(wgmma).unwrap().0, "C7513");
        assert_eq!(
            degradation("ptxas info    : Used 40 registers, 0 bytes smem"),
            None
        );
        assert_eq!(degradation("warning (C7000) something"), None);
    }
}
