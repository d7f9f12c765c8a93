//! Helpers the interpreter's test binaries share.

use dsl_core::interp::{FaultKind, InterpError};
use dsl_core::ir::SourceLoc;
use dsl_core::trace::Pred;
use dsl_core::trace::control::branch;

/// A runtime `if` without merged values, for kernels traced without `#[kernel]`.
pub fn when(cond: Pred, body: impl FnOnce()) {
    let mut body = Some(body);
    branch(cond, (), &[], SourceLoc::caller(), |t, ()| {
        if t && let Some(b) = body.take() {
            b();
        }
        ((), ())
    });
}

/// `e` is a fault of `kind` whose message contains every needle.
pub fn expect(e: &InterpError, kind: FaultKind, needles: &[&str]) {
    let f = e.fault().unwrap_or_else(|| panic!("not a fault: {e}"));
    assert_eq!(f.kind, kind, "{e}");
    let text = e.to_string();
    for n in needles {
        assert!(text.contains(n), "`{n}` missing from:\n{text}");
    }
}
