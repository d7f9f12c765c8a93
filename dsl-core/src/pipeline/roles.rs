//! Warp roles: which warps of a CTA produce, which consume, and with how many registers.
//!
//! A warp-specialised kernel splits its warps into roles by warpgroup (4 consecutive warps,
//! the unit of `wgmma` and of `setmaxnreg`) or by warp (a TMA producer warp, a tcgen05 MMA
//! warp). Roles that hold little state give registers to roles with large accumulators:
//! [`Warpgroup::shrink_registers`] / [`Warpgroup::grow_registers`] (`setmaxnreg`). The
//! register counts must add up: `sum(warpgroup threads x its count) <= 65536` per CTA
//! resident on the SM, which [`RegisterPlan`] checks at trace time.

use crate::arch::sync::set_max_nreg;
use crate::arch::thread::{elect_one, warp_id};
use crate::ir::SourceLoc;
use crate::trace::{Pred, Val, trace_error_at, with_builder};

/// Registers per SM on Hopper and Blackwell.
const REGISTER_FILE: u32 = 65536;

/// The warpgroup this thread belongs to (warp / 4), uniform across the warp.
#[track_caller]
pub fn warpgroup_index() -> Val<u32> {
    warp_id() >> 2
}

/// This warp's index within its warpgroup (0..4).
#[track_caller]
pub fn warp_in_warpgroup() -> Val<u32> {
    warp_id() & 3u32
}

/// One thread of the warp (`elect.sync`), for issuing copies and MMAs that one thread
/// issues on behalf of the role.
#[track_caller]
pub fn elect_one_thread() -> Pred {
    elect_one()
}

/// The register budget of each warpgroup role, checked against the register file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterPlan {
    /// Per warpgroup (in warpgroup order): registers per thread after its `setmaxnreg`.
    per_warpgroup: Vec<u32>,
}

impl RegisterPlan {
    /// Budgets for each warpgroup of the CTA, in order. The CTA must have exactly
    /// `per_warpgroup.len()` warpgroups, and `ctas_per_sm` CTAs must fit the register file.
    #[track_caller]
    pub fn new(per_warpgroup: &[u32], ctas_per_sm: u32) -> Self {
        let loc = SourceLoc::caller();
        let threads = with_builder(|b| b.launch.threads.iter().product::<u32>());
        if threads != 128 * per_warpgroup.len() as u32 {
            trace_error_at(
                format!(
                    "a register plan for {} warpgroup(s) in a CTA of {threads} threads: give one \
                     budget per warpgroup of 128 threads",
                    per_warpgroup.len()
                ),
                loc,
            );
        }
        let total: u32 = per_warpgroup.iter().map(|r| r * 128).sum::<u32>() * ctas_per_sm;
        if total > REGISTER_FILE {
            trace_error_at(
                format!(
                    "register plan {per_warpgroup:?} x {ctas_per_sm} CTA(s) per SM needs {total} \
                     registers; the SM has {REGISTER_FILE}"
                ),
                loc,
            );
        }
        RegisterPlan {
            per_warpgroup: per_warpgroup.to_vec(),
        }
    }

    /// The budget of warpgroup `index`.
    pub fn registers(&self, index: usize) -> u32 {
        self.per_warpgroup[index]
    }

    /// The entry budget every warp starts with: what ptxas allocates when the kernel fixes
    /// `.minnctapersm` and its block size (65536 / threads / CTAs, down to a multiple of 8).
    pub fn entry_registers(&self, ctas_per_sm: u32) -> u32 {
        let threads = 128 * self.per_warpgroup.len() as u32;
        (REGISTER_FILE / threads / ctas_per_sm.max(1) / 8 * 8).min(255)
    }

    /// Moves the calling warpgroup (`index`, a trace-time role) to its budget: a
    /// `setmaxnreg.dec` when it is below the entry budget, `.inc` when above.
    #[track_caller]
    pub fn enter(&self, index: usize, ctas_per_sm: u32) {
        let target = self.per_warpgroup[index];
        let entry = self.entry_registers(ctas_per_sm);
        if target != entry {
            set_max_nreg(target, target > entry);
        }
    }
}
