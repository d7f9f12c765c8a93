//! Asynchronous copies: per-thread `cp.async` with its commit and wait groups, and the copy
//! engine's 1-D bulk loads and TMA box loads and stores (PTX §9.7.9.25, §9.7.9.27).
//!
//! - `cp.async` reads global memory when issued and lands in shared memory when its thread
//!   waits for its group (or exits); until then its destination is off limits to everyone.
//! - Bulk and TMA loads run when issued: data lands in every destination CTA and the bytes
//!   are completed on that CTA's mbarrier at once. What the program may observe of their
//!   asynchrony is checked instead (see `proxy.rs`): a thread touches the data only after
//!   it observed the mbarrier phase the copy completed on, and a copy may not overwrite
//!   shared memory an in-flight MMA still reads.
//! - TMA stores run when issued and are tracked by bulk groups; their shared-memory source
//!   must be visible to the async proxy, and a thread exits only after
//!   `cp.async.bulk.wait_group.read 0`.
//!
//! Tensor maps are decoded from the parameter bytes at every copy
//! ([`TensorMapDesc::from_interp_bytes`]), so a map the kernel was not given is a fault.

use std::collections::VecDeque;

use super::compile::{NONE, Slot};
use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Machine, Warp, fault, lanes_of, reg, resolve_cluster};
use super::proxy::{Landed, Landing, Until};
use super::race::Touch;
use super::{PARAM_BASE, PARAM_STRIDE, SMEM_BASE};
use crate::layout::Swizzle;
use crate::tensor_map::{MapSwizzle, TensorMapDesc};

/// A `cp.async` that has read its source and waits to land.
pub(crate) struct PendingCp {
    cta: usize,
    off: usize,
    data: [u8; 16],
    len: u8,
}

/// One thread's `cp.async` groups: the open one and the committed ones, oldest first.
#[derive(Default)]
pub(crate) struct CpGroups {
    open: Vec<PendingCp>,
    committed: VecDeque<Vec<PendingCp>>,
}

/// One thread's bulk stores: not yet committed, and committed groups not yet waited for.
#[derive(Default)]
pub(crate) struct BulkGroups {
    open: u32,
    committed: u32,
}

/// The shared-memory pattern of a map's swizzle (CuTe `Sw<B,4,3>` on byte addresses).
fn swizzle_of(s: MapSwizzle) -> Swizzle {
    match s {
        MapSwizzle::None => Swizzle::NONE,
        MapSwizzle::B32 => Swizzle::B32,
        MapSwizzle::B64 => Swizzle::B64,
        MapSwizzle::B128 => Swizzle::B128,
    }
}

/// One row of a box (its innermost dimension): the dense byte offset of the row in the
/// box, and the in-bounds elements `[lo, hi)` with the global address of element `lo`.
struct Row {
    at: usize,
    lo: usize,
    hi: usize,
    global: u64,
}

/// The rows of the box of `map` at element coordinates `coords` (innermost first), in
/// shared-memory order: elements outside the tensor are not in `lo..hi`.
fn box_rows(map: &TensorMapDesc, coords: &[i64]) -> Vec<Row> {
    let rank = map.rank();
    let (dims, boxd) = (map.dims(), map.box_dims());
    let es = map.elem().bytes();
    let row_bytes = boxd[0] as usize * es;
    let nrows: usize = boxd[1..].iter().map(|&b| b as usize).product();
    let lo = (-coords[0]).clamp(0, boxd[0] as i64);
    let hi = (dims[0] as i64 - coords[0]).clamp(lo, boxd[0] as i64);
    (0..nrows)
        .map(|r| {
            let mut rest = r;
            let mut inside = lo < hi;
            let mut global = map.address() as i64 + (coords[0] + lo) * es as i64;
            for d in 1..rank {
                let i = (rest % boxd[d] as usize) as i64;
                rest /= boxd[d] as usize;
                let g = coords[d] + i;
                inside &= (0..dims[d] as i64).contains(&g);
                global += g * map.stride(d) as i64;
            }
            let (lo, hi) = if inside {
                (lo as usize, hi as usize)
            } else {
                (0, 0)
            };
            Row {
                at: r * row_bytes,
                lo,
                hi,
                global: global as u64,
            }
        })
        .collect()
}

impl Machine<'_> {
    /// The tensor map at generic address `addr`: a kernel parameter's, decoded and
    /// checked from its bytes.
    fn tensor_map(&self, w: &Warp, lane: usize, addr: u64) -> Result<TensorMapDesc, InterpError> {
        let bad = |msg: String| {
            fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Descriptor,
                Some(lane),
                Some(addr),
                msg,
            )
        };
        let rel = addr.wrapping_sub(PARAM_BASE);
        let index = rel / PARAM_STRIDE;
        if addr < PARAM_BASE || rel % PARAM_STRIDE != 0 || index >= self.params.len() as u64 {
            return Err(bad(format!(
                "the tensor-map operand {addr:#x} is not the address of a kernel parameter \
                 (cvta.param of a tensor-map parameter; parameters are at {PARAM_BASE:#x} + \
                 {PARAM_STRIDE} * index, {} of them)",
                self.params.len()
            )));
        }
        let p = &self.prog.kernel.params[index as usize];
        TensorMapDesc::from_interp_bytes(&self.params[index as usize]).map_err(|e| {
            bad(format!(
                "parameter #{index} `{}` does not hold a valid tensor map: {e}",
                p.name
            ))
        })
    }

    /// The map of a tensor copy and its coordinates, checked against each other.
    fn map_and_coords(
        &self,
        w: &Warp,
        lane: usize,
        map: Slot,
        coords: u32,
        rank: u32,
    ) -> Result<(TensorMapDesc, Vec<i64>), InterpError> {
        let desc = self.tensor_map(w, lane, reg(&w.regs, map, lane))?;
        if desc.rank() != rank as usize {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Descriptor,
                Some(lane),
                None,
                format!(
                    "a {rank}-D tensor copy with a rank-{} tensor map ({desc})",
                    desc.rank()
                ),
            ));
        }
        let cs = self.prog.lists[coords as usize..(coords + rank) as usize]
            .iter()
            .map(|&s| reg(&w.regs, s, lane) as u32 as i32 as i64)
            .collect();
        Ok((desc, cs))
    }

    /// Checks a shared-memory operand of a bulk or tensor copy is aligned: 16 bytes, and
    /// for a swizzled box the swizzle's period. The hardware asks 128 bytes of a swizzled
    /// box and applies the pattern to the address bits; the interpreter asks the period
    /// (1024 bytes for 128B, 512 for 64B, 256 for 32B) so that the box starts a pattern,
    /// as the MMA descriptors that read it assume (base offset 0).
    fn check_copy_alignment(
        &self,
        w: &Warp,
        lane: usize,
        addr: u64,
        swizzle: MapSwizzle,
        what: &str,
    ) -> Result<(), InterpError> {
        let need = swizzle_of(swizzle).period().max(16) as u64;
        if addr % need != 0 {
            let why = if need == 16 {
                "bulk and tensor copies need 16-byte aligned shared memory".to_string()
            } else {
                format!(
                    "a {swizzle:?}-swizzled box starts a swizzle pattern ({need}-byte aligned; \
                     the offset within the pattern is {})",
                    addr % need
                )
            };
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Misaligned,
                Some(lane),
                Some(addr),
                format!("{what} at shared {addr:#x}: {why}"),
            ));
        }
        Ok(())
    }

    /// The CTA and mbarrier offset a copy completes on: the mbarrier at shared::cluster
    /// address `bar`, which must live in the destination's CTA `c`.
    fn copy_mbar(
        &self,
        cl: &Cluster,
        w: &Warp,
        lane: usize,
        bar: u32,
        c: usize,
    ) -> Result<u32, InterpError> {
        let (bc, off) = self.mbar_target(cl, w, lane, bar, true)?;
        if bc != c {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Mbarrier,
                Some(lane),
                Some(bar as u64),
                format!(
                    "the copy writes {}'s shared memory but completes on an mbarrier of {}: \
                     the mbarrier must be in the destination CTA",
                    cl.ctas[c].id, cl.ctas[bc].id
                ),
            ));
        }
        Ok(off)
    }

    /// Writes `bytes` at shared::cta address `addr` of CTA `c` as the copy engine does (the
    /// async proxy: no proxy fence needed before an MMA reads it), tagged with `landing`
    /// for the readers' check. Faults where an in-flight MMA still reads the bytes.
    #[allow(clippy::too_many_arguments)]
    fn engine_write(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lane: usize,
        c: usize,
        addr: u64,
        bytes: &[u8],
        landing: Option<u32>,
    ) -> Result<(), InterpError> {
        let len = bytes.len();
        let off = cl.ctas[c]
            .smem
            .write(addr, bytes)
            .map_err(|e| self.smem_fault(cl, w, lane, c, addr, len, "copy write", e))?;
        self.require_no_in_flight_reader(cl, w, lane, c, off, len)?;
        self.race_access(cl, w, lane, c, off, len, Touch::Writes("the copy"))?;
        let cta = &mut cl.ctas[c];
        if let Some(p) = cta.proxy.as_mut() {
            p.writer[off..off + len].fill(0);
        }
        if let (Some(tag), Some(l)) = (landing, cta.landed.as_mut()) {
            l.set(off, len, tag);
        }
        Ok(())
    }

    /// The CTA and shared::cta address that the shared::cluster destination `d` of lane
    /// `lane`'s `len`-byte copy (`what`) names, or a fault if no CTA of the cluster has that
    /// rank.
    fn copy_destination(
        &self,
        cl: &Cluster,
        w: &Warp,
        lane: usize,
        d: u32,
        len: usize,
        what: &str,
    ) -> Result<(usize, u64), InterpError> {
        let ncta = cl.ctas.len();
        resolve_cluster(w.cta, ncta, d).ok_or_else(|| {
            self.mem_fault(
                w,
                lane,
                d as u64,
                len,
                what,
                format!("the address names a rank outside the cluster of {ncta}"),
            )
        })
    }

    /// A landing record for a copy issued by `lane` that completes on phase `phase` of the
    /// mbarrier at `off` of CTA `c` (None when the async-proxy check is off).
    fn phase_landing(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lane: usize,
        c: usize,
        off: u32,
    ) -> Option<u32> {
        if !self.opts.async_proxy_check {
            return None;
        }
        let phase = cl.ctas[c].mbars[&off].phase;
        let len = cl.ctas[c].smem.data.len();
        let landed = cl.ctas[c].landed.get_or_insert_with(|| Landed::new(len));
        Some(landed.add(Landing {
            pc: w.pc,
            thread: w.id * 32 + lane as u32,
            cta: w.cta,
            until: Until::Phase { cta: c, off, phase },
        }))
    }

    /// `cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`.
    pub(crate) fn bulk_load(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        [dst, src, bytes, bar]: [Slot; 4],
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let (d, s) = (reg(&w.regs, dst, l) as u32, reg(&w.regs, src, l));
            let n = reg(&w.regs, bytes, l) as u32;
            self.bulk_range(w, l, s, n, "bulk copy")?;
            let mut data = vec![0u8; n as usize];
            self.mem
                .read_global(s, &mut data)
                .expect("bulk_range has checked the range");
            let (c, a) = self.copy_destination(cl, w, l, d, n as usize, "bulk copy destination")?;
            self.check_copy_alignment(w, l, a, MapSwizzle::None, "bulk copy destination")?;
            let off = self.copy_mbar(cl, w, l, reg(&w.regs, bar, l) as u32, c)?;
            let landing = self.phase_landing(cl, w, l, c, off);
            self.engine_write(cl, w, l, c, a, &data, landing)?;
            self.mbar_tx(cl, w, Some(l), c, off, -(n as i64), "complete_tx")?;
        }
        Ok(())
    }

    /// `st.async.shared::cluster.mbarrier::complete_tx::bytes`: the values of `src` into a
    /// cluster CTA's shared memory (aligned to their size), completing on that CTA's
    /// mbarrier; its readers see them once they have waited for that phase.
    pub(crate) fn store_async(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        [dst, bar]: [Slot; 2],
        src: &[Slot],
    ) -> Result<(), InterpError> {
        let bytes = 4 * src.len();
        for l in lanes_of(w.active) {
            let d = reg(&w.regs, dst, l) as u32;
            let (c, a) = self.copy_destination(cl, w, l, d, bytes, "st.async destination")?;
            if a % bytes as u64 != 0 {
                return Err(self.misaligned(w, l, a, bytes, "st.async destination"));
            }
            let data: Vec<u8> = src
                .iter()
                .flat_map(|&s| (reg(&w.regs, s, l) as u32).to_le_bytes())
                .collect();
            let off = self.copy_mbar(cl, w, l, reg(&w.regs, bar, l) as u32, c)?;
            let landing = self.phase_landing(cl, w, l, c, off);
            self.engine_write(cl, w, l, c, a, &data, landing)?;
            self.mbar_tx(cl, w, Some(l), c, off, -(bytes as i64), "complete_tx")?;
        }
        Ok(())
    }

    /// Checks the global range a 1-D bulk operation (`what`) of lane `l` reads: `n` bytes
    /// at `s`, a positive multiple of 16, 16-byte aligned, inside one allocation.
    fn bulk_range(
        &self,
        w: &Warp,
        l: usize,
        s: u64,
        n: u32,
        what: &str,
    ) -> Result<(), InterpError> {
        if n == 0 || n % 16 != 0 {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Misaligned,
                Some(l),
                None,
                format!("a {what} of {n} bytes: the size is a positive multiple of 16"),
            ));
        }
        if s % 16 != 0 {
            return Err(self.misaligned(w, l, s, 16, &format!("{what} source")));
        }
        self.mem.check_global(s, n as u64).map_err(|e| {
            let super::memory::GlobalFault::OutOfBounds(why) = e;
            self.mem_fault(w, l, s, n as usize, &format!("{what} global read"), why)
        })
    }

    /// `cp.async.bulk.prefetch.L2.global`: only a hint, but a prefetch of memory the
    /// kernel could not read is a bug in it, so its range is checked like a bulk copy's.
    pub(crate) fn bulk_prefetch(
        &self,
        w: &Warp,
        [src, bytes]: [Slot; 2],
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let (s, n) = (reg(&w.regs, src, l), reg(&w.regs, bytes, l) as u32);
            self.bulk_range(w, l, s, n, "bulk prefetch")?;
        }
        Ok(())
    }

    /// `cp.async.bulk.tensor.Nd.shared::cluster.global.tile.mbarrier::complete_tx::bytes`,
    /// multicast to the CTAs of `mask` when it is not NONE.
    pub(crate) fn tensor_load(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        [dst, map, bar, mask]: [Slot; 4],
        coords: u32,
        rank: u32,
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let (desc, cs) = self.map_and_coords(w, l, map, coords, rank)?;
            let (d, b) = (reg(&w.regs, dst, l) as u32, reg(&w.regs, bar, l) as u32);
            let ncta = cl.ctas.len();
            // Destination CTAs with the shared::cta address of the box and the mbarrier.
            let mut targets = Vec::new();
            if mask == NONE {
                let bytes = desc.box_bytes() as usize;
                let (c, a) = self.copy_destination(cl, w, l, d, bytes, "TMA load destination")?;
                targets.push((c, a, self.copy_mbar(cl, w, l, b, c)?));
            } else {
                let m = reg(&w.regs, mask, l) as u16 as u32;
                if m == 0 || m >> ncta != 0 {
                    return Err(fault(
                        self.prog,
                        &self.cfg,
                        w,
                        FaultKind::OutOfBounds,
                        Some(l),
                        None,
                        format!(
                            "multicast mask {m:#06x} names no CTA or a rank outside the cluster \
                             of {ncta}"
                        ),
                    ));
                }
                // The same CTA-relative offsets in every destination.
                let low = (1u32 << super::machine::CLUSTER_SHIFT) - 1;
                for c in lanes_of(m) {
                    let cluster_addr =
                        |a: u32| ((c as u32 + 1) << super::machine::CLUSTER_SHIFT) | (a & low);
                    let off = self.copy_mbar(cl, w, l, cluster_addr(b), c)?;
                    targets.push((c, (d & low) as u64, off));
                }
            }
            let box_bytes = desc.box_bytes() as usize;
            for &(c, a, _) in &targets {
                self.check_copy_alignment(w, l, a, desc.swizzle(), "TMA load destination")?;
                cl.ctas[c]
                    .smem
                    .offset(a, box_bytes)
                    .map_err(|e| self.smem_fault(cl, w, l, c, a, box_bytes, "TMA load write", e))?;
            }
            // The box, densely, out-of-bounds elements zero.
            let es = desc.elem().bytes();
            let mut image = vec![0u8; box_bytes];
            for row in box_rows(&desc, &cs) {
                if row.lo == row.hi {
                    continue;
                }
                let out = &mut image[row.at + row.lo * es..row.at + row.hi * es];
                let len = out.len();
                self.mem.read_global(row.global, out).map_err(|e| {
                    let super::memory::GlobalFault::OutOfBounds(why) = e;
                    self.mem_fault(w, l, row.global, len, "TMA global read", why)
                })?;
            }
            let sw = swizzle_of(desc.swizzle());
            for (c, a, off) in targets {
                let landing = self.phase_landing(cl, w, l, c, off);
                for (i, chunk) in image.chunks(16).enumerate() {
                    let at = sw.apply(a as i64 + 16 * i as i64) as u64;
                    self.engine_write(cl, w, l, c, at, chunk, landing)?;
                }
                self.mbar_tx(cl, w, Some(l), c, off, -(box_bytes as i64), "complete_tx")?;
            }
        }
        Ok(())
    }

    /// `cp.async.bulk.tensor.Nd.global.shared::cta.tile.bulk_group`: the box from shared
    /// memory into the tensor (out-of-bounds elements are not written).
    pub(crate) fn tensor_store(
        &mut self,
        cl: &mut Cluster,
        w: &Warp,
        [src, map]: [Slot; 2],
        coords: u32,
        rank: u32,
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let (desc, cs) = self.map_and_coords(w, l, map, coords, rank)?;
            let a = reg(&w.regs, src, l) as u32 as u64;
            self.check_copy_alignment(w, l, a, desc.swizzle(), "TMA store source")?;
            let box_bytes = desc.box_bytes() as usize;
            let sw = swizzle_of(desc.swizzle());
            let t = self.cluster_thread(w, l);
            let mut image = vec![0u8; box_bytes];
            for (i, chunk) in image.chunks_mut(16).enumerate() {
                let at = sw.apply(a as i64 + 16 * i as i64) as u64;
                let len = chunk.len();
                let cta = &cl.ctas[w.cta];
                cta.smem
                    .read(at, chunk)
                    .map_err(|e| self.smem_fault(cl, w, l, w.cta, at, len, "TMA store read", e))?;
                let off = (at - SMEM_BASE as u64) as usize;
                if let Some(p) = cta.proxy.as_ref()
                    && let Some(byte) = (off..off + len).find(|&b| {
                        let writer = p.writer[b];
                        writer != 0 && {
                            let wt = writer as usize - 1;
                            let seen = if wt == t {
                                cl.fences[wt]
                            } else {
                                cl.published[wt]
                            };
                            seen <= p.epoch[b]
                        }
                    })
                {
                    let wt = p.writer[byte] as usize - 1;
                    let nt = self.cfg.nthreads as usize;
                    return Err(fault(
                        self.prog,
                        &self.cfg,
                        w,
                        FaultKind::AsyncProxyRace,
                        Some(l),
                        Some(SMEM_BASE as u64 + byte as u64),
                        format!(
                            "the TMA store reads shared {:#x}, written by thread {} of {} with \
                             an ordinary store not followed by fence.proxy.async.shared::cta \
                             (and a barrier, when another thread issues the copy) before the \
                             copy was issued",
                            SMEM_BASE as usize + byte,
                            wt % nt,
                            cl.ctas[wt / nt].id
                        ),
                    ));
                }
                self.check_landed(cl, w, Some(l), t, w.cta, off, len, "the TMA store reads")?;
                self.race_access(cl, w, l, w.cta, off, len, Touch::Reads("the TMA store"))?;
            }
            let es = desc.elem().bytes();
            for row in box_rows(&desc, &cs) {
                if row.lo == row.hi {
                    continue;
                }
                let bytes = &image[row.at + row.lo * es..row.at + row.hi * es];
                self.mem.write_global(row.global, bytes).map_err(|e| {
                    let super::memory::GlobalFault::OutOfBounds(why) = e;
                    self.mem_fault(w, l, row.global, bytes.len(), "TMA global write", why)
                })?;
            }
            cl.bulk.entry(t as u32).or_default().open += 1;
        }
        Ok(())
    }

    /// `prefetch.tensormap`: the operand must name a tensor map.
    pub(crate) fn prefetch_map(&self, w: &Warp, map: Slot) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            self.tensor_map(w, l, reg(&w.regs, map, l))?;
        }
        Ok(())
    }

    pub(crate) fn bulk_commit(&self, cl: &mut Cluster, w: &Warp) {
        for l in lanes_of(w.active) {
            let g = cl.bulk.entry(self.cluster_thread(w, l) as u32).or_default();
            g.committed += 1;
            g.open = 0;
        }
    }

    /// `cp.async.bulk.wait_group{.read} n`: the stores ran when issued, so only the
    /// bookkeeping of what is still unwaited changes.
    pub(crate) fn bulk_wait(&self, cl: &mut Cluster, w: &Warp, n: u32) {
        for l in lanes_of(w.active) {
            let t = self.cluster_thread(w, l) as u32;
            if let Some(g) = cl.bulk.get_mut(&t) {
                g.committed = g.committed.min(n);
                if g.committed == 0 && g.open == 0 {
                    cl.bulk.remove(&t);
                }
            }
        }
    }

    /// `cp.async [dst], [src], bytes{, src_bytes}`: reads the source now; the data lands
    /// at the thread's `cp.async.wait_group`.
    pub(crate) fn cp_async(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        [dst, src, src_bytes]: [Slot; 3],
        bytes: u32,
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let (d, s) = (reg(&w.regs, dst, l) as u32 as u64, reg(&w.regs, src, l));
            let total = bytes as usize;
            if d % bytes as u64 != 0 {
                return Err(self.misaligned(w, l, d, total, "cp.async destination"));
            }
            if s % bytes as u64 != 0 {
                return Err(self.misaligned(w, l, s, total, "cp.async source"));
            }
            let n = if src_bytes == NONE {
                bytes
            } else {
                reg(&w.regs, src_bytes, l) as u32
            };
            if n > bytes {
                return Err(fault(
                    self.prog,
                    &self.cfg,
                    w,
                    FaultKind::OutOfBounds,
                    Some(l),
                    Some(s),
                    format!(
                        "cp.async of {bytes} bytes reads {n}: the source size is at most the copy's"
                    ),
                ));
            }
            let mut data = [0u8; 16];
            self.mem
                .read_global(s, &mut data[..n as usize])
                .map_err(|e| {
                    let super::memory::GlobalFault::OutOfBounds(why) = e;
                    self.mem_fault(w, l, s, n as usize, "cp.async global read", why)
                })?;
            let cta = &cl.ctas[w.cta];
            let off = cta
                .smem
                .offset(d, total)
                .map_err(|e| self.smem_fault(cl, w, l, w.cta, d, total, "cp.async write", e))?;
            if let Some(word) = cta.smem.touches_mbar(off, total) {
                return Err(self.smem_fault(
                    cl,
                    w,
                    l,
                    w.cta,
                    d,
                    total,
                    "cp.async write",
                    super::memory::SmemFault::Mbarrier(word),
                ));
            }
            let t = self.cluster_thread(w, l);
            self.check_landed(cl, w, Some(l), t, w.cta, off, total, "cp.async writes")?;
            self.race_access(cl, w, l, w.cta, off, total, Touch::Writes("cp.async"))?;
            if self.opts.async_proxy_check {
                let len = cl.ctas[w.cta].smem.data.len();
                let landed = cl.ctas[w.cta]
                    .landed
                    .get_or_insert_with(|| Landed::new(len));
                let tag = landed.add(Landing {
                    pc: w.pc,
                    thread: w.id * 32 + l as u32,
                    cta: w.cta,
                    until: Until::CpAsync { thread: t as u32 },
                });
                landed.set(off, total, tag);
            }
            cl.cp_async
                .entry(t as u32)
                .or_default()
                .open
                .push(PendingCp {
                    cta: w.cta,
                    off,
                    data,
                    len: bytes as u8,
                });
        }
        Ok(())
    }

    pub(crate) fn cp_async_commit(&self, cl: &mut Cluster, w: &Warp) {
        for l in lanes_of(w.active) {
            let g = cl
                .cp_async
                .entry(self.cluster_thread(w, l) as u32)
                .or_default();
            let open = std::mem::take(&mut g.open);
            g.committed.push_back(open);
        }
    }

    /// `cp.async.wait_group n`: lands the thread's groups but the newest `n`.
    pub(crate) fn cp_async_wait(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lanes: u32,
        n: usize,
    ) -> Result<(), InterpError> {
        for l in lanes_of(lanes) {
            let t = self.cluster_thread(w, l) as u32;
            let Some(g) = cl.cp_async.get_mut(&t) else {
                continue;
            };
            let mut landing = Vec::new();
            while g.committed.len() > n {
                landing.extend(g.committed.pop_front().expect("non-empty"));
            }
            if g.committed.is_empty() && g.open.is_empty() {
                cl.cp_async.remove(&t);
            }
            for cp in landing {
                let addr = SMEM_BASE as u64 + cp.off as u64;
                let len = cp.len as usize;
                cl.ctas[cp.cta]
                    .smem
                    .write(addr, &cp.data[..len])
                    .map_err(|e| {
                        self.smem_fault(cl, w, l, cp.cta, addr, len, "cp.async write", e)
                    })?;
                if let Some(landed) = cl.ctas[cp.cta].landed.as_mut() {
                    landed.clear(cp.off, len);
                }
                // cp.async writes through the generic proxy, like a store of its thread.
                self.track_store(cl, w, l, cp.cta, cp.off, len)?;
            }
        }
        Ok(())
    }

    /// At exit: the warp's `cp.async`s land (the hardware finishes them), and bulk stores
    /// must have been waited for, or the CTA could release their source while the copy
    /// engine still reads it.
    pub(crate) fn copies_at_exit(&self, cl: &mut Cluster, w: &Warp) -> Result<(), InterpError> {
        if !cl.cp_async.is_empty() {
            for l in lanes_of(w.full) {
                if let Some(g) = cl.cp_async.get_mut(&(self.cluster_thread(w, l) as u32)) {
                    let open = std::mem::take(&mut g.open);
                    g.committed.push_back(open);
                }
            }
            self.cp_async_wait(cl, w, w.full, 0)?;
        }
        if cl.bulk.is_empty() {
            return Ok(());
        }
        for l in lanes_of(w.full) {
            let t = self.cluster_thread(w, l) as u32;
            if let Some(g) = cl.bulk.get(&t) {
                return Err(fault(
                    self.prog,
                    &self.cfg,
                    w,
                    FaultKind::Leak,
                    Some(l),
                    None,
                    format!(
                        "the thread exits with {} bulk store group(s) not waited for and {} \
                         store(s) not committed: cp.async.bulk.commit_group, then \
                         cp.async.bulk.wait_group.read 0 before exit (the copy engine may \
                         still read the shared-memory source)",
                        g.committed, g.open
                    ),
                ));
            }
        }
        Ok(())
    }
}
