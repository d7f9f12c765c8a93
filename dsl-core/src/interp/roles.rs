//! Warp roles' register budgets: `setmaxnreg.{inc,dec}.sync.aligned` (PTX §9.7.19.5).
//! Each warpgroup holds a per-thread register count, starting at the kernel's entry count;
//! the CTA's warpgroups share a pool of 64K registers. The four warps of a warpgroup meet
//! at the op; the last to arrive applies it for all four. An `.inc` the pool cannot cover
//! waits until other warpgroups `.dec` (a deadlock if none does), as on the hardware.

use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Flow, Machine, Warp, fault};
use crate::ir::REGISTER_FILE;

/// A warpgroup's budget and its rendezvous at `setmaxnreg`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Budget {
    /// Registers per thread the warpgroup holds.
    pub(crate) regs: u32,
    /// Warps (bit per warp of the warpgroup) waiting at the op at `pc`.
    pub(crate) arrived: u8,
    pub(crate) pc: u32,
    pub(crate) generation: u64,
}

impl Machine<'_> {
    pub(crate) fn set_max_nreg(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        regs: u32,
        increase: bool,
        progressed: &mut bool,
    ) -> Result<Flow, InterpError> {
        let g = (w.id / 4) as usize;
        let what = if increase {
            "setmaxnreg.inc"
        } else {
            "setmaxnreg.dec"
        };
        let bad = |w: &Warp, msg: String| {
            fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Collective,
                None,
                None,
                msg,
            )
        };
        if w.nreg_wait.is_none() {
            self.require_full_warp(w, "setmaxnreg.sync.aligned")?;
            if 4 * g as u32 + 3 >= self.cfg.nwarps {
                return Err(bad(
                    w,
                    format!(
                        "warpgroup {g} has only {} warp(s): setmaxnreg is executed by the four \
                         warps of a warpgroup",
                        self.cfg.nwarps - 4 * g as u32
                    ),
                ));
            }
            if self.entry_regs.is_none() {
                return Err(bad(
                    w,
                    format!(
                        "{what} {regs} in a kernel whose entry register count is unknown (no \
                         max_regs, nor threads with min_ctas_per_sm): ptxas ignores it (C7508)"
                    ),
                ));
            }
            let b = &mut cl.ctas[w.cta].budgets[g];
            if b.arrived != 0 && b.pc != w.pc {
                let other = &self.prog.meta[b.pc as usize];
                let msg = format!(
                    "warp {} reached this {what} while warps of its warpgroup wait at another \
                     setmaxnreg ({} at {}): the warpgroup diverged",
                    w.id, other.op, other.loc
                );
                return Err(bad(w, msg));
            }
            b.pc = w.pc;
            b.arrived |= 1 << (w.id % 4);
            w.nreg_wait = Some(b.generation);
            *progressed = true;
        }
        let generation = w.nreg_wait.expect("arrived");
        let cta = &mut cl.ctas[w.cta];
        let b = cta.budgets[g];
        if b.generation > generation {
            w.nreg_wait = None;
            return Ok(Flow::Next);
        }
        if b.arrived != 0xf {
            return Ok(Flow::Block);
        }
        if (increase && regs < b.regs) || (!increase && regs > b.regs) {
            return Err(bad(
                w,
                format!(
                    "{what} {regs}: warpgroup {g} holds {} registers per thread; .inc may only \
                     raise the count and .dec only lower it",
                    b.regs
                ),
            ));
        }
        let held = cta.budgets.iter().map(|b| b.regs * 128).sum::<u32>();
        let need = held - b.regs * 128 + regs * 128;
        if need > REGISTER_FILE {
            // Waits for other warpgroups to give registers back.
            return Ok(Flow::Block);
        }
        let b = &mut cta.budgets[g];
        b.regs = regs;
        b.arrived = 0;
        b.generation += 1;
        w.nreg_wait = None;
        *progressed = true;
        Ok(Flow::Next)
    }

    /// What a warp blocked at `setmaxnreg` waits for.
    pub(crate) fn describe_nreg(&self, cl: &Cluster, w: &Warp, regs: u32) -> String {
        let g = (w.id / 4) as usize;
        let cta = &cl.ctas[w.cta];
        let b = &cta.budgets[g];
        if b.arrived != 0xf {
            let missing: Vec<String> = (0..4)
                .filter(|i| b.arrived >> i & 1 == 0)
                .map(|i| (4 * g as u32 + i).to_string())
                .collect();
            return format!(
                "the other warps of warpgroup {g} at this setmaxnreg (missing warps [{}])",
                missing.join(", ")
            );
        }
        let held: Vec<String> = cta
            .budgets
            .iter()
            .enumerate()
            .map(|(i, b)| format!("warpgroup {i}: {}", b.regs))
            .collect();
        let total = cta.budgets.iter().map(|b| b.regs * 128).sum::<u32>();
        format!(
            "{} more registers for warpgroup {g} to grow from {} to {regs} per thread: the CTA's \
             pool of {REGISTER_FILE} has {} free (per thread: {})",
            (regs - b.regs) * 128,
            b.regs,
            REGISTER_FILE - total.min(REGISTER_FILE),
            held.join(", ")
        )
    }
}
