//! A failed command: the message the user sees and the exit code.

use std::fmt::Display;

/// Exit code of a failure (a fault, a failed check, a file that cannot be read).
pub const FAILED: u8 = 1;
/// Exit code of a usage mistake (clap uses the same for the ones it finds).
pub const USAGE: u8 = 2;
/// Exit code when a tool the command needs is not installed.
pub const MISSING_TOOL: u8 = 3;

/// Why a command failed; the message says what to do about it.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub code: u8,
}

impl Failure {
    pub fn failed(message: impl Display) -> Self {
        Failure {
            message: message.to_string(),
            code: FAILED,
        }
    }

    pub fn usage(message: impl Display) -> Self {
        Failure {
            message: message.to_string(),
            code: USAGE,
        }
    }

    pub fn missing_tool(message: impl Display) -> Self {
        Failure {
            message: message.to_string(),
            code: MISSING_TOOL,
        }
    }
}

pub type Outcome = Result<(), Failure>;
