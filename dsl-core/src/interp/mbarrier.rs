//! mbarrier objects (PTX §9.7.13.15): initialisation, arrivals, transaction counts and
//! phases, and which completed phases each thread has observed through a successful wait
//! (what the async-proxy checks ask before a thread may touch data a copy or an MMA
//! completed on that barrier).

use super::SMEM_BASE;
use super::compile::Slot;
use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Machine, Warp, fault, lanes_of, reg, resolve_cluster};

/// An mbarrier object's state (PTX §9.7.13.15.2): expected count, pending arrivals,
/// transaction count and the number of completed phases.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mbar {
    pub(crate) count: u32,
    pub(crate) pending: u32,
    pub(crate) tx: i64,
    pub(crate) phase: u64,
}

impl Machine<'_> {
    /// Records, per waiting thread, the mbarrier phases its successful wait has seen: the
    /// latest completed phase of the awaited parity.
    pub(crate) fn observe(&self, cl: &mut Cluster, w: &Warp, bar: Slot, parity: Slot) {
        for l in lanes_of(w.active) {
            let off = (reg(&w.regs, bar, l) as u32).wrapping_sub(SMEM_BASE);
            let seen = phases_seen(cl.ctas[w.cta].mbars[&off].phase, reg(&w.regs, parity, l));
            let t = self.cluster_thread(w, l) as u32;
            let e = cl.observed.entry((t, w.cta as u32, off)).or_insert(0);
            *e = (*e).max(seen);
        }
    }

    /// The CTA and offset of the mbarrier at `addr` (shared::cta, or shared::cluster when
    /// `remote`), which must be initialised.
    pub(crate) fn mbar_target(
        &self,
        cl: &Cluster,
        w: &Warp,
        lane: usize,
        addr: u32,
        remote: bool,
    ) -> Result<(usize, u32), InterpError> {
        let ncta = cl.ctas.len();
        let target = if remote {
            resolve_cluster(w.cta, ncta, addr)
        } else {
            Some((w.cta, addr as u64))
        };
        let bad = |kind, msg: String| {
            fault(
                self.prog,
                &self.cfg,
                w,
                kind,
                Some(lane),
                Some(addr as u64),
                msg,
            )
        };
        let Some((c, a)) = target else {
            return Err(bad(
                FaultKind::OutOfBounds,
                format!(
                    "shared::cluster address {addr:#x} names a rank outside the cluster of {ncta}"
                ),
            ));
        };
        let smem = &cl.ctas[c].smem;
        let off = smem.offset(a, 8).map_err(|_| {
            bad(
                FaultKind::OutOfBounds,
                format!(
                    "mbarrier address {a:#x} is outside the CTA's shared memory [{SMEM_BASE:#x}, \
                     {:#x})",
                    SMEM_BASE as usize + smem.data.len()
                ),
            )
        })? as u32;
        if a % 8 != 0 {
            return Err(bad(
                FaultKind::Misaligned,
                format!("mbarrier address {a:#x} is not 8-byte aligned"),
            ));
        }
        if !cl.ctas[c].mbars.contains_key(&off) {
            return Err(bad(
                FaultKind::Mbarrier,
                format!(
                    "no initialised mbarrier at shared {a:#x} of {}",
                    cl.ctas[c].id
                ),
            ));
        }
        Ok((c, off))
    }

    pub(crate) fn mbar_init(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        bar: Slot,
        count: Slot,
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let a = reg(&w.regs, bar, l) as u32;
            let n = reg(&w.regs, count, l) as u32;
            let bad = |kind, msg: String| {
                fault(self.prog, &self.cfg, w, kind, Some(l), Some(a as u64), msg)
            };
            let cta = &mut cl.ctas[w.cta];
            let off = cta.smem.offset(a as u64, 8).map_err(|_| {
                bad(
                    FaultKind::OutOfBounds,
                    format!("mbarrier.init at {a:#x}, outside the CTA's shared memory"),
                )
            })?;
            if a % 8 != 0 {
                return Err(bad(
                    FaultKind::Misaligned,
                    format!("mbarrier at {a:#x} is not 8-byte aligned"),
                ));
            }
            if n == 0 || n >= 1 << 20 {
                return Err(bad(
                    FaultKind::Mbarrier,
                    format!("mbarrier.init count {n}: the count is 1 ..= 2^20 - 1"),
                ));
            }
            cta.mbars.insert(
                off as u32,
                Mbar {
                    count: n,
                    pending: n,
                    tx: 0,
                    phase: 0,
                },
            );
            cta.smem.mbar_words.set_range(off / 8, 1, true);
            cta.smem.has_mbars = true;
        }
        Ok(())
    }

    /// One arrival (after adding `tx` to the transaction count) on the mbarrier at `off`
    /// of CTA `c`. A phase completes when its pending arrivals and transaction count both
    /// reach zero (PTX §9.7.13.15.6); the barrier then starts the next phase with its count.
    pub(crate) fn mbar_arrive(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lane: usize,
        c: usize,
        off: u32,
        tx: i64,
    ) -> Result<u64, InterpError> {
        let mb = cl.ctas[c]
            .mbars
            .get_mut(&off)
            .expect("checked by mbar_target");
        if mb.pending == 0 {
            let msg = format!(
                "an arrival on the mbarrier at shared {:#x} beyond its count {} in phase {} \
                 (the phase waits for tx-count {})",
                SMEM_BASE + off,
                mb.count,
                mb.phase,
                mb.tx
            );
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Mbarrier,
                Some(lane),
                None,
                msg,
            ));
        }
        let phase = mb.phase;
        self.mbar_tx(cl, w, Some(lane), c, off, tx, "arrive.expect_tx")?;
        let mb = cl.ctas[c].mbars.get_mut(&off).expect("checked");
        mb.pending -= 1;
        mb.complete_if_done();
        self.race_mbar(cl, w, c, off, phase, true);
        Ok(phase)
    }

    /// Adds `tx` to the transaction count of the mbarrier at `off` of CTA `c` without
    /// arriving: positive for an expect-tx, negative for a copy's complete-tx. The count
    /// may go negative (bytes may land before they are expected) within the hardware's
    /// range. Returns the phase the transactions count towards.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mbar_tx(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lane: Option<usize>,
        c: usize,
        off: u32,
        tx: i64,
        what: &str,
    ) -> Result<u64, InterpError> {
        let id = cl.ctas[c].id;
        let mb = cl.ctas[c]
            .mbars
            .get_mut(&off)
            .expect("checked by mbar_target");
        let count = mb.tx + tx;
        if count.abs() > TX_LIMIT {
            let msg = format!(
                "{what} of {tx} makes the tx-count of the mbarrier at shared {:#x} of {} {count} \
                 in phase {}: it ranges over -(2^20 - 1) ..= 2^20 - 1",
                SMEM_BASE + off,
                id,
                mb.phase
            );
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Mbarrier,
                lane,
                None,
                msg,
            ));
        }
        mb.tx = count;
        let phase = mb.phase;
        if tx != 0 {
            mb.complete_if_done();
        }
        // A copy's bytes completing release what its issuer did before issuing it.
        self.race_mbar(cl, w, c, off, phase, tx < 0);
        Ok(phase)
    }
}

/// How many phases of an mbarrier that has completed `completed` a successful
/// `try_wait.parity parity` has seen: up to the latest completed phase of that parity
/// (0 when none has completed, as for a fresh barrier's wait for parity 1).
pub(crate) fn phases_seen(completed: u64, parity: u64) -> u64 {
    if completed > 0 && (completed - 1) & 1 == parity & 1 {
        completed
    } else {
        completed.saturating_sub(1)
    }
}

/// The largest magnitude of an mbarrier's tx-count (PTX §9.7.13.15.1).
const TX_LIMIT: i64 = (1 << 20) - 1;

impl Mbar {
    /// A phase completes when its pending arrivals and transaction count both reach zero
    /// (PTX §9.7.13.15.6); the barrier then starts the next phase with its count.
    fn complete_if_done(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.phase += 1;
            self.pending = self.count;
        }
    }
}
