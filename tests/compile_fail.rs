//! Misuse of the DSL is a Rust compile error with a message that says what to do.
//! Each case in `tests/ui/` is named after the mistake; its `.stderr` is the expected error.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
