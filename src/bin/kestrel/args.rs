//! The command line: subcommands, their options and the parsers of their values.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kestrel::core::Target;
use kestrel::kernels::swap_ab_decode::{CompileKey, KeyError};

/// Inspect the SwapAB decode kernel for a compile key: PTX, ptxas resources, the
/// shared-memory map, and runs in the CPU interpreter with traces and memory snapshots.
#[derive(Debug, Parser)]
#[command(
    name = "kestrel",
    version,
    after_help = "A compile key is named like h16_nk128_ne512_fp8_p64x64_sm100a: live heads, \
                  SWA and compressed list widths, the compressed record format, the two page \
                  sizes, the schedule when it is not the split one (split64, stream or \
                  stream<CTAs>, as in h16_nk128_ne512_fp8_p64x64_stream2_sm100a, with h32 \
                  after it for 32 heads a streamed CTA on sm90a: streamh32, and h16 after \
                  split or split64 for a split cluster of 16 heads at 32 heads or more: \
                  split64h16) and the target. \
                  `kestrel keys` lists the keys whose PTX is snapshotted.\n\n\
                  Exit codes: 0 success, 1 failure, 2 usage mistake, 3 ptxas not installed."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the snapshot keys, one per line: a starting point for the other commands.
    Keys(KeysArgs),
    /// Print the PTX of the decode kernel (or of its debug entry point).
    Ptx(PtxArgs),
    /// Print the traced IR in its text form (the form `dsl-core/filetests/` are written in).
    Ir(IrArgs),
    /// Assemble the PTX with ptxas and print registers, spills, stack and shared memory.
    Ptxas(PtxasArgs),
    /// Print the shared-memory map: each buffer's offset, size, alignment and layout.
    Smem(SmemArgs),
    /// Run the kernel in the CPU interpreter and check it against the f64 reference.
    Run(RunArgs),
    /// The table of registers, spills, shared memory and PTX lines of every snapshot and
    /// variant key (the kernel docs' resources.md).
    Resources(ResourcesArgs),
    /// Review the pending snapshots a test run left: each distinct changed hunk once, with
    /// the snapshots it appears in, accepted or rejected per group.
    Review(ReviewArgs),
}

#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// The folder of the snapshots (insta's `.snap` and pending `.snap.new` files).
    #[arg(long, default_value = "tests/snapshots")]
    pub dir: std::path::PathBuf,
    /// Print every group and decide nothing.
    #[arg(long, conflicts_with_all = ["accept_all", "reject_all"])]
    pub list: bool,
    /// Accept every group without asking.
    #[arg(long, conflicts_with = "reject_all")]
    pub accept_all: bool,
    /// Reject every group without asking.
    #[arg(long)]
    pub reject_all: bool,
}

#[derive(Debug, Args)]
pub struct ResourcesArgs {
    /// Write the table to kernels/src/swap_ab_decode/resources.md instead of printing it.
    #[arg(long)]
    pub write: bool,
}

#[derive(Debug, Args)]
pub struct KeysArgs {
    /// Only the keys of this target (sm100a or sm90a); both when left out.
    #[arg(long, value_parser = parse_target)]
    pub target: Option<Target>,
}

#[derive(Debug, Args)]
pub struct PtxArgs {
    /// The compile key, e.g. h16_nk128_ne512_fp8_p64x64_sm100a.
    #[arg(value_parser = parse_key)]
    pub key: CompileKey,
    /// The debug entry point (`swap_ab_decode_debug`: also writes the fp32 output before
    /// the MXFP8 cast).
    #[arg(long)]
    pub debug: bool,
    /// Write the PTX to this file instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct IrArgs {
    /// The compile key, e.g. h16_nk128_ne512_fp8_p64x64_sm100a.
    #[arg(value_parser = parse_key)]
    pub key: CompileKey,
    /// The debug entry point (`swap_ab_decode_debug`).
    #[arg(long)]
    pub debug: bool,
    /// Write the text form to this file instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PtxasArgs {
    /// The compile key, e.g. h16_nk128_ne512_fp8_p64x64_sm100a.
    #[arg(value_parser = parse_key)]
    pub key: CompileKey,
    /// Assemble the debug entry point instead of the production one.
    #[arg(long)]
    pub debug: bool,
    /// Also print ptxas's own `-v` output.
    #[arg(long)]
    pub log: bool,
}

#[derive(Debug, Args)]
pub struct SmemArgs {
    /// The compile key, e.g. h16_nk128_ne512_fp8_p64x64_sm100a.
    #[arg(value_parser = parse_key)]
    pub key: CompileKey,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The compile key; with --case it may be left out (the file names it) or must match.
    #[arg(value_parser = parse_key)]
    pub key: Option<CompileKey>,
    /// Tokens (query rows) of the generated batch: the grid's y.
    #[arg(long, default_value_t = 1, conflicts_with = "case")]
    pub tokens: usize,
    /// Seed of the generated batch.
    #[arg(long, default_value_t = 1, conflicts_with = "case")]
    pub seed: u64,
    /// Mix adversarial inputs into the generated batch (invalid and duplicate slot ids, odd
    /// lengths, NaN in unread memory, infinite sinks, padded strides).
    #[arg(long, conflicts_with = "case")]
    pub adversarial: bool,
    /// Run the case stored in this `.safetensors` case file instead of a generated batch.
    #[arg(long, value_name = "FILE.safetensors")]
    pub case: Option<PathBuf>,
    /// Write what the kernel wrote (out_data codes, out_scale words, the pre-cast f32) to
    /// this `.safetensors` file, to check against a reference of your own.
    #[arg(long, value_name = "FILE.safetensors")]
    pub write_output: Option<PathBuf>,
    /// Print the instruction trace of one thread: CTA,THREAD with the CTA as x, x,y or x,y,z
    /// (blocks are (cluster rank, token, head group)), e.g. `0,37` or `1,0,37`.
    #[arg(long, value_name = "CTA,THREAD", value_parser = parse_trace_at)]
    pub trace: Option<TraceAt>,
    /// Snapshot memory of one CTA at a stage boundary: `smem:BUFFER` (a name from `kestrel
    /// smem`) or `tmem:COL0..COL1` (tensor-memory columns, all 128 lanes; sm100a only).
    #[arg(long, value_name = "smem:BUFFER|tmem:COL0..COL1", value_parser = parse_dump)]
    pub dump: Option<DumpWhat>,
    /// Only stages whose title contains TEXT (--trace); the stage to snapshot (--dump).
    #[arg(long, value_name = "TEXT")]
    pub stage: Option<String>,
    /// Take the snapshot when the CTA's first warp starts or ends the stage. That warp may be
    /// ahead of the others (and of the MMAs they issue): what a stage produces shows at the
    /// end of the stage that waits for it.
    #[arg(long, value_enum, default_value_t = At::Start, requires = "dump")]
    pub at: At,
    /// The CTA to snapshot: x, x,y or x,y,z.
    #[arg(long, value_name = "X[,Y[,Z]]", value_parser = parse_cta, requires = "dump")]
    pub cta: Option<[u32; 3]>,
    /// Also decode each shared-memory row as these values; tensor memory prints f32 or, with
    /// u32, hex words.
    #[arg(long = "as", value_enum, value_name = "TYPE", requires = "dump")]
    pub as_type: Option<ValueType>,
    /// Print at most N trace entries (default 2000) or N snapshot rows (default all).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Count the wavefronts of every shared-memory load and store, and print the total and
    /// the accesses with bank conflicts, worst first (the model of Nsight Compute's "L1
    /// Wavefronts Shared" and "Ideal"; MMA operand reads and copies are not counted).
    #[arg(long)]
    pub banks: bool,
}

/// The thread `--trace` follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceAt {
    pub block: [u32; 3],
    pub thread: u32,
}

/// What `--dump` copies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpWhat {
    Smem(String),
    Tmem { col0: u32, col1: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum At {
    Start,
    End,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ValueType {
    F32,
    Bf16,
    U32,
}

/// A compile key by name; the error shows the expected form whatever was wrong.
pub fn parse_key(name: &str) -> Result<CompileKey, String> {
    name.parse::<CompileKey>().map_err(|e| match e {
        KeyError::Name { .. } => format!("{e}; `kestrel keys` lists valid names"),
        other => format!(
            "`{name}` is not a valid compile key: {other}. The form is \
             h<heads>_nk<NK>_ne<NE>_<fp8|nvfp4>_p<swa page>x<extra page>[_<schedule>]_\
             <sm90a|sm100a>, e.g. h16_nk128_ne512_fp8_p64x64_sm100a; `kestrel keys` lists \
             valid names"
        ),
    })
}

fn parse_target(s: &str) -> Result<Target, String> {
    s.parse()
}

fn numbers(s: &str, what: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|n| {
            n.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{s}`: {what} must be comma-separated numbers"))
        })
        .collect()
}

fn parse_cta(s: &str) -> Result<[u32; 3], String> {
    match numbers(s, "a CTA")?[..] {
        [x] => Ok([x, 0, 0]),
        [x, y] => Ok([x, y, 0]),
        [x, y, z] => Ok([x, y, z]),
        _ => Err(format!("`{s}`: a CTA is x, x,y or x,y,z")),
    }
}

fn parse_trace_at(s: &str) -> Result<TraceAt, String> {
    let n = numbers(s, "CTA,THREAD")?;
    let (thread, block) = match n[..] {
        [x, t] => (t, [x, 0, 0]),
        [x, y, t] => (t, [x, y, 0]),
        [x, y, z, t] => (t, [x, y, z]),
        _ => {
            return Err(format!(
                "`{s}`: expected CTA,THREAD with the CTA as x, x,y or x,y,z (e.g. `0,37`: \
                 thread 37 of CTA 0)"
            ));
        }
    };
    Ok(TraceAt { block, thread })
}

fn parse_dump(s: &str) -> Result<DumpWhat, String> {
    let form = "expected smem:BUFFER (e.g. smem:kv) or tmem:COL0..COL1 (e.g. tmem:0..32)";
    if let Some(name) = s.strip_prefix("smem:") {
        if name.is_empty() {
            return Err(format!("`{s}`: no buffer name; {form}"));
        }
        return Ok(DumpWhat::Smem(name.to_string()));
    }
    if let Some(range) = s.strip_prefix("tmem:") {
        let (a, b) = range
            .split_once("..")
            .ok_or_else(|| format!("`{s}`: {form}"))?;
        let (col0, col1) = match (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            (Ok(a), Ok(b)) => (a, b),
            _ => return Err(format!("`{s}`: columns must be numbers; {form}")),
        };
        if col0 >= col1 || col1 > 512 {
            return Err(format!(
                "`{s}`: the columns must satisfy COL0 < COL1 <= 512 (tensor memory has 512 \
                 columns)"
            ));
        }
        return Ok(DumpWhat::Tmem { col0, col1 });
    }
    Err(format!("`{s}`: {form}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse() {
        assert_eq!(
            parse_trace_at("1,0,37"),
            Ok(TraceAt {
                block: [1, 0, 0],
                thread: 37
            })
        );
        assert!(parse_trace_at("37").is_err());
        assert_eq!(parse_cta("2,1"), Ok([2, 1, 0]));
        assert_eq!(
            parse_dump("tmem:0..32"),
            Ok(DumpWhat::Tmem { col0: 0, col1: 32 })
        );
        assert!(parse_dump("tmem:32..0").is_err());
        assert_eq!(parse_dump("smem:kv"), Ok(DumpWhat::Smem("kv".into())));
        assert!(
            parse_key("h24_nk128_ne512_fp8_p64x64_sm100a")
                .unwrap_err()
                .contains("h<heads>")
        );
    }
}
