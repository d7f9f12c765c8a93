//! The IR's text form: a readable, exact rendering of a [`Kernel`](crate::ir::Kernel) that
//! parses back to the same kernel, for review (`kestrel ir KEY`) and for hand-written
//! kernels (the filetests of `dsl-core/filetests/`). `print(&parse(&print(k))?) ==
//! print(k)` and `parse(&print(k))? == *k` hold for every kernel the project traces.
//!
//! ```text
//! kernel row_reduce                    ; the header: name, target, launch bounds
//! target sm_100a
//! threads 256, 1, 1
//! cluster 2, 1, 1                      ; optional, as min_ctas_per_sm N and max_regs N
//! param x: tensor<f32, 2>              ; u32 ... | tensor<ELEM, RANK> | tensor_map<ELEM, RANK>
//! smem 1024                            ; dynamic shared memory bytes, then its named buffers
//! smem_buffer acc offset=0 bytes=1024 align=16 layout="(256):(1)"
//! stage 0 "1: load the row"            ; stage titles, numbered in order
//! reg %9: b32                          ; registers no line defines, with their types
//! {
//!     %0:u32 = sreg tid.x                                  @kernels/src/basics/x.rs:12:5
//!     %1:u64, %2:u64 = ...             ; definitions show their types; runs: %4..%7:f32
//!     %3:b32 = ld.global.nc.b32 [%1+16] if %8              ; a guarded load
//!     st.shared.b32 [%5], {%3, %4}
//!
//!     stage 0                          ; ---- the title, as a comment
//!     if %8 {                                              @file:line:col
//!     } else {
//!     }
//!     loop {                           ; loop { header; if !cond break; body }
//!     } while %10 {
//!     }
//!     comment "a free comment"
//! }
//! ```
//!
//! An op line is `DEFS = MNEMONIC.SUFFIXES ARG, ...`, then `if %P` for a guarded access,
//! `stage=N` (or `stage=none`) when the op's stage is not the one in force at its place in
//! the text, and `@file:line:column`, its source location (the parser gives an op without
//! one its own place in the text). Arguments are registers `%N`, immediates (decimal, `0x`
//! hex, `0f` hex f32 bits, decimal f32 such as `1.5`), addresses `[%N+offset]`, lists
//! `{%1, %2..%5}` and names. `;` starts a comment. [`OpKind`] lists the mnemonics.

mod kinds;
mod lex;
mod line;
mod ops;
mod parse;
mod print;
mod words;

pub use kinds::OpKind;
pub use parse::{ParseError, Pos, parse, parse_named};
pub use print::print;

#[cfg(test)]
mod tests;
