//! Ordinary loads and stores (`ld`/`st` of global, shared and distributed shared memory):
//! bounds, alignment, written bytes, and the reports that name the buffer or window.

use super::SMEM_BASE;
use super::compile::Slot;
use super::error::{FaultKind, InterpError};
use super::machine::{
    CLUSTER_SHIFT, Cluster, Machine, Warp, fault, lanes_of, pred_mask, reg, resolve_cluster,
};
use super::memory::{GlobalFault, SmemFault};
use super::race::Touch;
use crate::ir::{AccessTy, Space};

impl Machine<'_> {
    /// Reads for a load or an MMA: bytes at `address` of `space` into `out`.
    pub(crate) fn read_space(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lane: usize,
        space: Space,
        address: u64,
        out: &mut [u8],
    ) -> Result<(), InterpError> {
        match space {
            Space::Global => self.mem.read_global(address, out).map_err(|e| {
                let GlobalFault::OutOfBounds(why) = e;
                self.mem_fault(w, lane, address, out.len(), "global read", why)
            }),
            Space::Shared | Space::SharedCluster => {
                let (c, a) = self.shared_target(cl, w, lane, space, address, out.len())?;
                cl.ctas[c]
                    .smem
                    .read(a, out)
                    .map_err(|e| self.smem_fault(cl, w, lane, c, a, out.len(), "read", e))?;
                let off = (a - SMEM_BASE as u64) as usize;
                if cl.ctas[c].landed.is_some() {
                    let t = self.cluster_thread(w, lane);
                    self.check_landed(cl, w, Some(lane), t, c, off, out.len(), "the load reads")?;
                }
                self.race_access(cl, w, lane, c, off, out.len(), Touch::Reads("the load"))
            }
        }
    }

    /// The CTA and shared::cta address an ld/st.shared{::cluster} address names.
    pub(crate) fn shared_target(
        &self,
        cl: &Cluster,
        w: &Warp,
        lane: usize,
        space: Space,
        address: u64,
        len: usize,
    ) -> Result<(usize, u64), InterpError> {
        if space == Space::Shared {
            return Ok((w.cta, address));
        }
        resolve_cluster(w.cta, cl.ctas.len(), address as u32).ok_or_else(|| {
            self.mem_fault(
                w,
                lane,
                address,
                len,
                "shared::cluster access",
                format!(
                    "the address names rank {} but the cluster has {} CTA(s)",
                    (address >> CLUSTER_SHIFT) - 1,
                    cl.ctas.len()
                ),
            )
        })
    }

    pub(crate) fn mem_fault(
        &self,
        w: &Warp,
        lane: usize,
        address: u64,
        len: usize,
        what: &str,
        why: String,
    ) -> InterpError {
        fault(
            self.prog,
            &self.cfg,
            w,
            FaultKind::OutOfBounds,
            Some(lane),
            Some(address),
            format!("{what} of {len} byte(s) at {address:#x}: {why}"),
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn smem_fault(
        &self,
        cl: &Cluster,
        w: &Warp,
        lane: usize,
        c: usize,
        a: u64,
        len: usize,
        what: &str,
        e: SmemFault,
    ) -> InterpError {
        let cta = &cl.ctas[c];
        let whose = if c == w.cta {
            "the CTA's".to_string()
        } else {
            format!("{}'s", cta.id)
        };
        let end = SMEM_BASE as usize + cta.smem.data.len();
        let (kind, msg) = match e {
            SmemFault::OutOfBounds => (
                FaultKind::OutOfBounds,
                format!(
                    "shared {what} of {len} byte(s) at {a:#x} is outside {whose} shared memory \
                     [{SMEM_BASE:#x}, {end:#x})"
                ),
            ),
            SmemFault::Uninitialized(off) => (
                FaultKind::Uninitialized,
                format!(
                    "shared {what} of {len} byte(s) at {a:#x}: byte {:#x} of {whose} shared \
                     memory was never written",
                    SMEM_BASE + off
                ),
            ),
            SmemFault::Mbarrier(off) => (
                FaultKind::Mbarrier,
                format!(
                    "shared {what} of {len} byte(s) at {a:#x} touches the live mbarrier object \
                     at {:#x}; mbarriers are accessed with mbarrier.* only",
                    SMEM_BASE + off
                ),
            ),
        };
        fault(self.prog, &self.cfg, w, kind, Some(lane), Some(a), msg)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn load(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        space: Space,
        ty: AccessTy,
        n: u32,
        d: &[Slot; 4],
        addr: Slot,
        offset: i32,
        pred: Slot,
    ) -> Result<(), InterpError> {
        let size = ty.bytes() as usize;
        let total = size * n as usize;
        self.count_wavefronts(w, space, addr, offset, pred, total);
        for l in lanes_of(pred_mask(&w.regs, w.active, pred)) {
            let address = effective(space, reg(&w.regs, addr, l), offset);
            if address % total as u64 != 0 {
                return Err(self.misaligned(w, l, address, total, "load"));
            }
            let mut buf = [0u8; 32];
            self.read_space(cl, w, l, space, address, &mut buf[..total])?;
            for (i, &dst) in d.iter().take(n as usize).enumerate() {
                let mut v = [0u8; 8];
                v[..size].copy_from_slice(&buf[i * size..(i + 1) * size]);
                w.regs[dst as usize * 32 + l] = u64::from_le_bytes(v);
            }
        }
        Ok(())
    }

    pub(crate) fn misaligned(
        &self,
        w: &Warp,
        lane: usize,
        address: u64,
        total: usize,
        what: &str,
    ) -> InterpError {
        fault(
            self.prog,
            &self.cfg,
            w,
            FaultKind::Misaligned,
            Some(lane),
            Some(address),
            format!(
                "a {total}-byte {what} at {address:#x} is not {total}-byte aligned (accesses, \
                 vectors included, must be aligned to their full size)"
            ),
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn store(
        &mut self,
        cl: &mut Cluster,
        w: &Warp,
        space: Space,
        ty: AccessTy,
        n: u32,
        s: &[Slot; 4],
        addr: Slot,
        offset: i32,
        pred: Slot,
    ) -> Result<(), InterpError> {
        let size = ty.bytes() as usize;
        let total = size * n as usize;
        self.count_wavefronts(w, space, addr, offset, pred, total);
        for l in lanes_of(pred_mask(&w.regs, w.active, pred)) {
            let address = effective(space, reg(&w.regs, addr, l), offset);
            if address % total as u64 != 0 {
                return Err(self.misaligned(w, l, address, total, "store"));
            }
            let mut buf = [0u8; 32];
            for (i, &src) in s.iter().take(n as usize).enumerate() {
                let v = reg(&w.regs, src, l).to_le_bytes();
                buf[i * size..(i + 1) * size].copy_from_slice(&v[..size]);
            }
            let bytes = &buf[..total];
            match space {
                Space::Global => self.mem.write_global(address, bytes).map_err(|e| {
                    let GlobalFault::OutOfBounds(why) = e;
                    self.mem_fault(w, l, address, total, "global write", why)
                })?,
                Space::Shared | Space::SharedCluster => {
                    self.write_shared(cl, w, l, space, address, bytes)?
                }
            }
        }
        Ok(())
    }

    /// `atom.global.add.u32`: each active lane in lane order adds its `s` to the u32 at its
    /// address and gets the value it replaced in `d`.
    pub(crate) fn atomic_add(
        &mut self,
        w: &mut Warp,
        d: Slot,
        addr: Slot,
        offset: i32,
        s: Slot,
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let address = effective(Space::Global, reg(&w.regs, addr, l), offset);
            if address % 4 != 0 {
                return Err(self.misaligned(w, l, address, 4, "atomic"));
            }
            let fault = |m: &Self, why| m.mem_fault(w, l, address, 4, "atomic add", why);
            let mut old = [0u8; 4];
            self.mem
                .read_global(address, &mut old)
                .map_err(|GlobalFault::OutOfBounds(why)| fault(self, why))?;
            let old = u32::from_le_bytes(old);
            let sum = old.wrapping_add(reg(&w.regs, s, l) as u32);
            self.mem
                .write_global(address, &sum.to_le_bytes())
                .map_err(|GlobalFault::OutOfBounds(why)| fault(self, why))?;
            w.regs[d as usize * 32 + l] = u64::from(old);
        }
        Ok(())
    }

    /// A thread's write of `bytes` at `address` of shared memory (its CTA's, or another's
    /// through shared::cluster): bounds, mbarrier objects, and the async-proxy bookkeeping.
    pub(crate) fn write_shared(
        &mut self,
        cl: &mut Cluster,
        w: &Warp,
        lane: usize,
        space: Space,
        address: u64,
        bytes: &[u8],
    ) -> Result<(), InterpError> {
        let total = bytes.len();
        let (c, a) = self.shared_target(cl, w, lane, space, address, total)?;
        let off = cl.ctas[c]
            .smem
            .write(a, bytes)
            .map_err(|e| self.smem_fault(cl, w, lane, c, a, total, "write", e))?;
        if cl.ctas[c].landed.is_some() {
            let t = self.cluster_thread(w, lane);
            self.check_landed(cl, w, Some(lane), t, c, off, total, "the store writes")?;
            if let Some(landed) = cl.ctas[c].landed.as_mut() {
                landed.clear(off, total);
            }
        }
        self.race_access(cl, w, lane, c, off, total, Touch::Writes("the store"))?;
        self.track_store(cl, w, lane, c, off, total)
    }

    /// With [`super::Options::shared_wavefronts`]: the wavefronts of this warp's access of
    /// its own CTA's shared memory (`ld`/`st.shared`; distributed shared memory, which
    /// another SM serves, is not counted).
    fn count_wavefronts(
        &mut self,
        w: &Warp,
        space: Space,
        addr: Slot,
        offset: i32,
        pred: Slot,
        bytes: usize,
    ) {
        let Some(counts) = self.banks.as_mut() else {
            return;
        };
        if space != Space::Shared {
            return;
        }
        let lanes: Vec<(usize, u64)> = lanes_of(pred_mask(&w.regs, w.active, pred))
            .map(|l| (l, effective(space, reg(&w.regs, addr, l), offset)))
            .collect();
        counts[w.pc as usize].add(&lanes, bytes);
    }
}

/// The byte address of `[reg + offset]` in a state space (shared addresses are 32-bit).
#[inline]
pub(crate) fn effective(space: Space, base: u64, offset: i32) -> u64 {
    match space {
        Space::Global => base.wrapping_add(offset as i64 as u64),
        Space::Shared | Space::SharedCluster => (base as u32).wrapping_add(offset as u32) as u64,
    }
}
