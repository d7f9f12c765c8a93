//! `ldmatrix` and `stmatrix`: warp-collective moves of 8x8 b16 matrices between shared
//! memory and registers (sm_90a and sm_100a; `stmatrix` is sm_90+).
//!
//! For `matrices` = N (1, 2 or 4), lanes `8 m ..+ 8` pass the addresses of the 8 rows of
//! matrix `m` (16 bytes each, 16-byte aligned; the other lanes' addresses are ignored), and
//! register `m` of lane `t` holds row `t / 4`, elements `2 (t % 4)` and `+ 1` (the first in
//! the low half): the fragment of the PTX ISA's figure "ldmatrix fragment layout". With
//! `trans`, each lane holds the same positions of the transposed matrix. The copy atoms of
//! `tensor::atoms` partition tiles for these.

use super::memory::Smem;
use crate::ir::verify::rules;
use crate::ir::{MemOp, Op, Operand, SourceLoc, Ty};
use crate::trace::val::emit_effect;
use crate::trace::{Val, trace_error_at, with_builder};

/// `ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16`: this lane's `row` address, one b32
/// register (two b16) per matrix.
#[track_caller]
pub fn ldmatrix(row: Smem, matrices: usize, trans: bool) -> Vec<Val<u32>> {
    let loc = SourceLoc::caller();
    if let Err(e) = rules::matrix_count("ldmatrix", matrices) {
        trace_error_at(e, loc);
    }
    let addr = Operand::Reg(row.value().reg());
    let dst = with_builder(|b| {
        let dst: Vec<_> = (0..matrices).map(|_| b.new_reg(Ty::U32)).collect();
        let op = MemOp::LdMatrix {
            dst: dst.clone(),
            addr,
            trans,
        };
        b.push(Op::Mem(op), loc);
        dst
    });
    dst.into_iter().map(Val::from_reg).collect()
}

/// `stmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16`: the inverse of [`ldmatrix`], N =
/// `values.len()`.
#[track_caller]
pub fn stmatrix(row: Smem, values: &[Val<u32>], trans: bool) {
    let loc = SourceLoc::caller();
    if let Err(e) = rules::matrix_count("stmatrix", values.len()) {
        trace_error_at(e, loc);
    }
    let addr = Operand::Reg(row.value().reg());
    let src = values.iter().map(|v| v.reg()).collect();
    emit_effect(Op::Mem(MemOp::StMatrix { src, addr, trans }));
}
