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

/// Registers of a role's budget that fragments may not use: the addresses, indices, loop
/// counters, barrier phases and descriptors every role keeps live besides its fragments.
/// ptxas needs about this many in the producer and consumer loops of the GEMM and decode
/// kernels; a role whose fragments leave fewer spills (C75xx) or fails to assemble.
pub const ROLE_HEADROOM: u32 = 24;

/// Counts a register fragment of `words` 32-bit registers (`what`, for the message) made
/// at `loc` against the budget of the role being traced, if any: a trace error when the
/// role's fragments would need more than its budget less [`ROLE_HEADROOM`]. Fragments made
/// in a role count until the role's region ends (the trace cannot see when a register
/// dies, so this is the live count when they are all used at the end, as accumulators are).
pub(crate) fn count_fragment(words: usize, what: &str, loc: SourceLoc) {
    let over = with_builder(|b| {
        let role = b.role.as_mut()?;
        let before = role.fragments;
        role.fragments += words as u32;
        let usable = role.budget.saturating_sub(ROLE_HEADROOM);
        (role.fragments > usable && before <= usable).then(|| {
            format!(
                "role {} runs with {} registers a thread (its `RegisterPlan` budget), and this \
                 {what} of {words} 32-bit registers brings its register fragments to {}, more \
                 than the {usable} left after {ROLE_HEADROOM} for addresses, indices and loop \
                 counters: give the role a larger budget in `RegisterPlan::new`, or use smaller \
                 tiles or fewer fragments at once",
                role.index, role.budget, role.fragments
            )
        })
    });
    if let Some(message) = over {
        trace_error_at(message, loc);
    }
}

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
    /// above. Without a fixed entry count `setmaxnreg` reports why at the caller. Until the
    /// runtime region it is called in ends, register fragments are counted against the
    /// budget ([`ROLE_HEADROOM`]).
    #[track_caller]
    pub fn enter(&self, index: usize) {
        let target = self.per_warpgroup[index];
        with_builder(|b| b.enter_role(index, target));
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
    use crate::ir::{Op, SourceLoc, SyncOp};
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

    /// The producer (40 registers) may hold 16 in fragments; an N = 64 accumulator is 32. The
    /// consumers' 232 hold an N = 256 one (128), and code after the role's region is free.
    fn roles_kernel(producer_n: u32) -> Result<crate::ir::Kernel, crate::trace::TraceError> {
        use crate::arch::sm90::wgmma::Accumulator;
        use crate::trace::control::branch;
        trace_kernel("roles", Target::Sm90a, || {
            threads(384, 1, 1);
            min_ctas_per_sm(1);
            let plan = RegisterPlan::new(&[40, 232, 232]);
            let producer = super::warpgroup_index().eq(0u32);
            branch(producer, (), &[], SourceLoc::caller(), |t, ()| {
                if t {
                    plan.enter(0);
                    Accumulator::zeros(producer_n);
                } else {
                    plan.enter(1);
                    Accumulator::zeros(256);
                    Accumulator::zeros(128);
                }
                ((), ())
            });
            Accumulator::zeros(256);
        })
    }

    #[test]
    fn fragments_within_a_role_budget_trace() {
        roles_kernel(32).unwrap();
    }

    #[test]
    fn fragments_beyond_a_role_budget_are_a_trace_error_at_the_allocation() {
        let e = roles_kernel(64).unwrap_err();
        assert_eq!(e.diagnostics.len(), 1, "{e}");
        let d = &e.diagnostics[0];
        assert_eq!(
            d.message,
            "role 0 runs with 40 registers a thread (its `RegisterPlan` budget), and this wgmma \
             accumulator of 32 32-bit registers brings its register fragments to 32, more than \
             the 16 left after 24 for addresses, indices and loop counters: give the role a \
             larger budget in `RegisterPlan::new`, or use smaller tiles or fewer fragments at \
             once"
        );
        let src = include_str!("roles.rs");
        let line = src.lines().nth(d.loc.line as usize - 1).unwrap();
        assert!(line.contains("Accumulator::zeros(producer_n)"), "{line}");
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
