//! Warp roles: which warps of a CTA produce, which consume, and with how many registers.
//!
//! A warp-specialised kernel splits its warps into roles by warpgroup (4 consecutive warps,
//! the unit of `wgmma` and of `setmaxnreg`) or by warp (a TMA producer warp, a tcgen05 MMA
//! warp). Roles that hold little state give registers to roles with large accumulators
//! ([`RegisterPlan::enter`], `setmaxnreg`). The register counts must add up:
//! `sum(warpgroup threads x its count) <= 65536` per CTA resident on the SM, which
//! [`RegisterPlan`] checks at trace time.

use crate::arch::sync::set_max_nreg;
use crate::arch::thread::warp_id;
use crate::ir::{REGISTER_FILE, SourceLoc};
use crate::trace::{Val, trace_error_at, with_builder};

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

/// The register budget of each warpgroup role, checked against the register file for the
/// kernel's launch bounds (`threads`, `min_ctas_per_sm`), which must be set before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisterPlan {
    /// Per warpgroup (in warpgroup order): registers per thread after its `setmaxnreg`.
    per_warpgroup: Vec<u32>,
}

impl RegisterPlan {
    /// Budgets for each warpgroup of the CTA, in order. The CTA must have exactly
    /// `per_warpgroup.len()` warpgroups, and its `min_ctas_per_sm` CTAs (1 when unset) must
    /// fit the register file.
    #[track_caller]
    pub fn new(per_warpgroup: &[u32]) -> Self {
        let loc = SourceLoc::caller();
        let (threads, ctas_per_sm) = with_builder(|b| {
            (
                b.launch.threads.iter().product::<u32>(),
                b.launch.min_ctas_per_sm.unwrap_or(1),
            )
        });
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

    /// Moves the calling warpgroup (`index`, a trace-time role) from the kernel's entry
    /// budget to its own: a `setmaxnreg.dec` when it is below the entry budget, `.inc` when
    /// above. Without a fixed entry count `setmaxnreg` reports why at the caller.
    #[track_caller]
    pub fn enter(&self, index: usize) {
        let target = self.per_warpgroup[index];
        match with_builder(|b| b.launch.entry_registers()) {
            Some(entry) if entry == target => {}
            Some(entry) => set_max_nreg(target, target > entry),
            None => set_max_nreg(target, true),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RegisterPlan;
    use crate::Target;
    use crate::ir::{Op, SyncOp};
    use crate::trace::{min_ctas_per_sm, threads, trace_kernel};

    /// 384 threads alone on the SM enter at 168 registers: the producer shrinks, the
    /// consumers grow.
    #[test]
    fn enter_moves_each_role_from_the_entry_budget() {
        let k = trace_kernel("plan", Target::Sm90a, || {
            threads(384, 1, 1);
            min_ctas_per_sm(1);
            let plan = RegisterPlan::new(&[40, 232, 232]);
            plan.enter(0);
            plan.enter(1);
        })
        .unwrap();
        assert_eq!(k.launch.entry_registers(), Some(168));
        let mut seen = Vec::new();
        k.body.for_each_inst(&mut |i| {
            if let Op::Sync(SyncOp::SetMaxNreg { regs, increase }) = i.op {
                seen.push((regs, increase));
            }
        });
        assert_eq!(seen, [(40, false), (232, true)]);
    }

    #[test]
    fn a_plan_beyond_the_register_file_is_a_trace_error() {
        let e = trace_kernel("plan", Target::Sm90a, || {
            threads(384, 1, 1);
            min_ctas_per_sm(2);
            RegisterPlan::new(&[40, 232, 232]);
        })
        .unwrap_err();
        assert_eq!(
            e.diagnostics[0].message,
            "register plan [40, 232, 232] x 2 CTA(s) per SM needs 129024 registers; the SM has 65536"
        );
    }
}
