//! Standard output that a closed pipe (`kestrel ptx KEY | head`) ends quietly instead of
//! with a panic.

use std::io::{ErrorKind, Write};

/// Writes `text` to standard output; exits 0 when the reader has gone away.
pub fn write(text: &str) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: could not write to standard output: {e}");
        std::process::exit(i32::from(crate::failure::FAILED));
    }
}

/// `print!` through [`write`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write(&format!($($arg)*))
    };
}

/// `println!` through [`write`].
macro_rules! outln {
    () => {
        $crate::output::write("\n")
    };
    ($($arg:tt)*) => {
        $crate::output::write(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub(crate) use {out, outln};
