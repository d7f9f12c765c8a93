//! The parser's messages: each names the line and column of the mistake and what was
//! expected there.

use super::{parse, print};

const HEADER: &str = "kernel k\ntarget sm_90a\nthreads 32, 1, 1\nparam out: tensor<u32, 1>\n";

fn error(body: &str) -> String {
    parse(&format!("{HEADER}{{\n{body}}}\n"))
        .expect_err("the text is refused")
        .to_string()
}

#[test]
fn errors_say_where_and_what() {
    assert_eq!(
        error("    %0:u32 = frobnicate 1\n"),
        "6:14: unknown op `frobnicate`"
    );
    assert_eq!(
        error("    %0 = sreg tid.x\n"),
        "6:8: a defined register shows its type: `%N:u32`"
    );
    assert_eq!(
        error("    %0:u32 = add.u32 %1\n    %1:u32 = sreg tid.x\n"),
        "6:22: `add` needs a register or an immediate as argument 2"
    );
    assert_eq!(
        error("    %0:u32 = sreg tid.x\n    %0:f32 = mov 0\n"),
        "7:5: %0 is f32 here but u32 at 6:5"
    );
    assert_eq!(
        error("    %0:u32 = add.q32 %1, 1\n"),
        "6:14: `q32` is not a register type (one of pred, b16, b32, u32, s32, u64, s64, f32)"
    );
    assert_eq!(
        error("    %0:u32 = ld.param nope, 0\n"),
        "6:14: no parameter is named `nope`"
    );
    assert_eq!(
        error("    %0:u32 = mov %1\n"),
        "6:18: %1 has no type: no line defines it; declare it in the header with `reg %1: TYPE`"
    );
    assert_eq!(
        error("    %2:u32 = mov 0\n"),
        "1:1: %0 has no type: registers are numbered from %0 without gaps; declare it in the \
         header with `reg %0: TYPE`"
    );
    assert!(
        parse(&format!("{HEADER}{{\n    if %0 {{\n"))
            .unwrap_err()
            .to_string()
            .contains("a block is not closed"),
    );
    assert_eq!(
        parse("kernel k\ntarget sm_80\n").unwrap_err().to_string(),
        "2:8: `sm_80` is not a target (one of sm_90a, sm_100a)"
    );
}

#[test]
fn strings_immediates_and_locations_round_trip() {
    let text = format!(
        "{HEADER}smem 8\nsmem_buffer \"a b\" offset=0 bytes=8 align=8 layout=\"(2):(1) \\\"q\\\"\\n\"\n\
         stage 0 \"1: tab\\there\"\n{{\n\n    stage 0    ; ---- 1: tab\there\n    \
         %0:f32 = mov 0f3FC00000                                     @a file.rs:3:9\n    \
         %1:s32 = mov 0xFFFFFFFFFFFFFFFF stage=none                  @x.rs:1:2\n    \
         comment \"two\\nlines\"\n}}\n"
    );
    let kernel = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(kernel.smem_buffers[0].name, "a b");
    assert_eq!(
        kernel.smem_buffers[0].layout.as_deref(),
        Some("(2):(1) \"q\"\n")
    );
    assert_eq!(kernel.stages[0], "1: tab\there");
    assert_eq!(print(&kernel), text);
    let decimal = parse(&text.replace("0f3FC00000", "1.5")).unwrap();
    assert_eq!(decimal, kernel);
    let negative = parse(&text.replace("0xFFFFFFFFFFFFFFFF", "-1")).unwrap();
    assert_eq!(negative, kernel);
}
