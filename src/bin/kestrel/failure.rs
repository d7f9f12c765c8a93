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

/// Runs `command`, turning a panic inside the kernel source or a library (an input they do
/// not handle yet) into a failure that says so, instead of a backtrace.
pub fn without_panics(command: impl FnOnce() -> Outcome) -> Outcome {
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::Mutex;

    static PANIC: Mutex<Option<String>> = Mutex::new(None);
    let previous = panic::take_hook();
    panic::set_hook(Box::new(|info| {
        let at = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_else(|| "an unknown place".into());
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        if let Ok(mut slot) = PANIC.lock() {
            *slot = Some(format!("{message} (at {at})"));
        }
    }));
    let result = panic::catch_unwind(AssertUnwindSafe(command));
    panic::set_hook(previous);
    result.unwrap_or_else(|_| {
        let what = PANIC
            .lock()
            .ok()
            .and_then(|mut slot| slot.take())
            .unwrap_or_else(|| "a panic".into());
        Err(Failure::failed(format!(
            "internal error: {what}.\n  This is not a usage mistake: the kernel source or a \
             library does not handle this input (yet). `kestrel keys` lists keys that work; \
             please report the command line."
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_failure() {
        let failure = without_panics(|| panic!("H must be 16 or 32")).unwrap_err();
        assert_eq!(failure.code, FAILED);
        assert!(
            failure
                .message
                .starts_with("internal error: H must be 16 or 32 (at src/bin/kestrel/failure.rs:"),
            "{}",
            failure.message
        );
        assert!(without_panics(|| Ok(())).is_ok());
    }
}
