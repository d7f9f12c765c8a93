//! `ldmatrix` and `stmatrix` (PTX ISA §9.7.14.5.15-16): warp-collective moves of 8x8
//! matrices of b16 between shared memory and registers.
//!
//! Matrix `m` of an `.xN` op has its 8 rows at the addresses lanes `8 m ..+ 8` hold, each
//! row 8 consecutive b16 (16 bytes, 16-byte aligned). Register `m` of lane `t` holds row
//! `t / 4`, elements `2 (t % 4)` and `+ 1`, the first in the low half; `.trans` gives each
//! lane the same positions of the transposed matrix.

use super::compile::Slot;
use super::error::InterpError;
use super::machine::{Cluster, Machine, Warp, reg};
use crate::ir::Space;

/// Bytes of one matrix row.
const ROW_BYTES: usize = 16;

/// The lane and register half holding element (`row`, `col`) of a matrix as stored.
fn holder(row: usize, col: usize, trans: bool) -> (usize, usize) {
    let (r, c) = if trans { (col, row) } else { (row, col) };
    (4 * r + c / 2, c % 2)
}

impl Machine<'_> {
    /// `ldmatrix` (`store` false) or `stmatrix` of `n` matrices, registers
    /// `lists[list..list + n]`, row addresses in `addr`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn matrix(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        list: u32,
        n: u32,
        addr: Slot,
        trans: bool,
        store: bool,
    ) -> Result<(), InterpError> {
        let what = if store { "stmatrix" } else { "ldmatrix" };
        self.require_full_warp(w, &format!("{what}.sync.aligned"))?;
        let slots = self.prog.lists[list as usize..(list + n) as usize].to_vec();
        for (m, &s) in slots.iter().enumerate() {
            for row in 0..8 {
                let lane = 8 * m + row;
                let address = reg(&w.regs, addr, lane) as u32 as u64;
                if address % ROW_BYTES as u64 != 0 {
                    return Err(self.misaligned(
                        w,
                        lane,
                        address,
                        ROW_BYTES,
                        &format!("{what} row"),
                    ));
                }
                let mut bytes = [0u8; ROW_BYTES];
                if store {
                    for col in 0..8 {
                        let (t, half) = holder(row, col, trans);
                        let v = (reg(&w.regs, s, t) >> (16 * half)) as u16;
                        bytes[2 * col..2 * col + 2].copy_from_slice(&v.to_le_bytes());
                    }
                    self.write_shared(cl, w, lane, Space::Shared, address, &bytes)?;
                } else {
                    self.read_space(cl, w, lane, Space::Shared, address, &mut bytes)?;
                    for col in 0..8 {
                        let (t, half) = holder(row, col, trans);
                        let v = u16::from_le_bytes([bytes[2 * col], bytes[2 * col + 1]]) as u64;
                        let cell = &mut w.regs[s as usize * 32 + t];
                        *cell =
                            (*cell & !(0xffff << (16 * half)) & 0xffff_ffff) | (v << (16 * half));
                    }
                }
            }
        }
        Ok(())
    }
}
