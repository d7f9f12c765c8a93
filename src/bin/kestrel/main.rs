//! `kestrel`: inspect the SwapAB decode kernel for one compile key — its PTX, its IR, what ptxas
//! makes of it, its shared-memory map, and a run in the CPU interpreter with a numerics
//! report, a per-thread instruction trace and snapshots of shared or tensor memory; and the
//! review of pending PTX snapshots, each distinct change once.
//!
//! Exit codes: 0 success, 1 failure (a fault, a failed numerics check, ptxas rejecting the
//! PTX, a file that cannot be read), 2 a usage mistake (a bad key or option), 3 a tool the
//! command needs (ptxas) is missing.

mod args;
mod dump;
mod failure;
mod inspect;
mod output;
mod review;
mod run;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = failure::without_panics(|| match cli.command {
        Command::Keys(a) => inspect::keys(&a),
        Command::Ptx(a) => inspect::ptx(&a),
        Command::Ir(a) => inspect::ir(&a),
        Command::Ptxas(a) => inspect::ptxas(&a),
        Command::Smem(a) => inspect::smem(&a),
        Command::Run(a) => run::run(&a),
        Command::Resources(a) => inspect::resources(&a),
        Command::Review(a) => review::review(&a),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
