//! The command line: subcommands, their options and the parsers of their values.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
use kestrel::core::Target;
use kestrel::kernels::swap_ab_decode::{CompileKey, KeyError};

/// Inspect the SwapAB decode kernel for a compile key: PTX, ptxas resources and the
/// shared-memory map.
#[derive(Debug, Parser)]
#[command(
    name = "kestrel",
    version,
    after_help = "A compile key is named like h16_nk128_ne512_fp8_p64x64_sm100a: live heads, \
                  SWA and compressed list widths, the compressed record format, the two page \
                  sizes and the target. `kestrel keys` lists the keys whose PTX is snapshotted.\n\n\
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
    /// Assemble the PTX with ptxas and print registers, spills, stack and shared memory.
    Ptxas(PtxasArgs),
    /// Print the shared-memory map: each buffer's offset, size, alignment and layout.
    Smem(SmemArgs),
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

/// A compile key by name; the error shows the expected form whatever was wrong.
pub fn parse_key(name: &str) -> Result<CompileKey, String> {
    name.parse::<CompileKey>().map_err(|e| match e {
        KeyError::Name(_) => format!("{e}; `kestrel keys` lists valid names"),
        other => format!(
            "`{name}` is not a valid compile key: {other}. The form is \
             h<heads>_nk<NK>_ne<NE>_<fp8|nvfp4>_p<swa page>x<extra page>_<sm90a|sm100a>, e.g. \
             h16_nk128_ne512_fp8_p64x64_sm100a; `kestrel keys` lists valid names"
        ),
    })
}

fn parse_target(s: &str) -> Result<Target, String> {
    s.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_keys_show_the_form() {
        assert!(
            parse_key("h24_nk128_ne512_fp8_p64x64_sm100a")
                .unwrap_err()
                .contains("h<heads>")
        );
    }
}
