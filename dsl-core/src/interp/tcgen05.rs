//! tcgen05 with `cta_group::1` (PTX ISA 9.1 §9.7.16): tensor-memory allocation, the
//! `kind::f16` MMA from real shared-memory and instruction descriptors, commit to an
//! mbarrier, and `32x32b` loads and stores. MMAs execute when issued; their asynchrony is checked
//! through the async-proxy bookkeeping instead (see the module docs of `interp`).

use super::compile::Slot;
use super::desc::{self, Elem, InstrDesc, Major, SmemDesc, Swizzle};
use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Flow, Machine, Warp, fault, lanes_of, reg};
use super::memory::{SmemFault, TMEM_COLS, TmemAlloc, TmemFault};
use super::proxy::Flight;
use super::race::Touch;
use super::{SMEM_BASE, cvt};

/// How an MMA names the operand it reads, for messages.
pub(crate) struct Operand<'a> {
    pub(crate) name: &'a str,
    pub(crate) desc: SmemDesc,
    pub(crate) major: Major,
    pub(crate) rows: u32,
    pub(crate) elem: Elem,
    pub(crate) negate: bool,
}

impl Machine<'_> {
    fn tmem_fault(
        &self,
        w: &Warp,
        lane: Option<usize>,
        addr: Option<u64>,
        msg: String,
    ) -> InterpError {
        fault(self.prog, &self.cfg, w, FaultKind::Tmem, lane, addr, msg)
    }

    /// The value of `s`, which must be the same in every active lane.
    fn uniform(&self, w: &Warp, s: Slot, what: &str) -> Result<u64, InterpError> {
        let mut lanes = lanes_of(w.active);
        let first = lanes.next().expect("an executing warp has an active lane");
        let v = reg(&w.regs, s, first);
        if let Some(l) = lanes.find(|&l| reg(&w.regs, s, l) != v) {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Collective,
                Some(l),
                None,
                format!(
                    "the {what} must be the same in every lane: lane {first} has {v:#x}, lane \
                     {l} has {:#x}",
                    reg(&w.regs, s, l)
                ),
            ));
        }
        Ok(v)
    }

    /// `tcgen05.alloc`: warp-collective; the lowest free, aligned range of `ncols` columns.
    /// Blocks while there is no room (PTX: alloc blocks until columns are free).
    pub(crate) fn tc_alloc(
        &mut self,
        cl: &mut Cluster,
        w: &Warp,
        dst: Slot,
        ncols: u32,
    ) -> Result<Flow, InterpError> {
        self.require_full_warp(w, "tcgen05.alloc.sync.aligned")?;
        let addr = self.uniform(w, dst, "shared address of tcgen05.alloc")?;
        let tmem = &cl.ctas[w.cta].tmem;
        if tmem.relinquished {
            return Err(self.tmem_fault(
                w,
                None,
                None,
                "tcgen05.alloc after tcgen05.relinquish_alloc_permit: the CTA gave up its right \
                 to allocate"
                    .into(),
            ));
        }
        let Some(col) = tmem.find_free(ncols) else {
            return Ok(Flow::Block);
        };
        if addr % 4 != 0 {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Misaligned,
                Some(0),
                Some(addr),
                format!("tcgen05.alloc writes a b32 at {addr:#x}, which is not 4-byte aligned"),
            ));
        }
        if let Err(e) = cl.ctas[w.cta].smem.write(addr, &col.to_le_bytes()) {
            return Err(self.smem_fault(cl, w, 0, w.cta, addr, 4, "write", e));
        }
        let off = (addr - SMEM_BASE as u64) as usize;
        self.race_access(cl, w, 0, w.cta, off, 4, Touch::Writes("tcgen05.alloc"))?;
        let cta = &mut cl.ctas[w.cta];
        // The tensor core wrote the address, not a thread: nothing for the proxy check.
        if let Some(p) = cta.proxy.as_mut() {
            p.writer[off..off + 4].fill(0);
        }
        cta.tmem.allocs.push(TmemAlloc {
            col,
            ncols,
            warp: w.id,
        });
        cta.tmem.invalidate(col, ncols);
        Ok(Flow::Next)
    }

    /// `tcgen05.dealloc`: by the allocating warp, of a whole allocation.
    pub(crate) fn tc_dealloc(
        &mut self,
        cl: &mut Cluster,
        w: &Warp,
        taddr: Slot,
        ncols: u32,
    ) -> Result<(), InterpError> {
        self.require_full_warp(w, "tcgen05.dealloc.sync.aligned")?;
        let t = self.uniform(w, taddr, "TMEM address of tcgen05.dealloc")? as u32;
        let col = t & 0xffff;
        let tmem = &mut cl.ctas[w.cta].tmem;
        let Some(a) = tmem.allocs.iter().find(|a| a.col == col).copied() else {
            return Err(self.tmem_fault(
                w,
                None,
                Some(t as u64),
                format!(
                    "tcgen05.dealloc of TMEM address {t:#x}: no allocation starts at column {col}"
                ),
            ));
        };
        if t >> 16 != 0 || a.ncols != ncols || a.warp != w.id {
            return Err(self.tmem_fault(
                w,
                None,
                Some(t as u64),
                format!(
                    "tcgen05.dealloc of {ncols} columns at {t:#x} by warp {}: the allocation is \
                     {} columns at lane 0, column {} by warp {} (the allocating warp frees the \
                     whole allocation)",
                    w.id, a.ncols, a.col, a.warp
                ),
            ));
        }
        tmem.free(col);
        tmem.invalidate(col, ncols);
        Ok(())
    }

    /// Reads a `rows x 16` operand of 16-bit elements through a descriptor, checking every
    /// element; records the 16-byte chunks read.
    pub(crate) fn load_operand(
        &self,
        cl: &Cluster,
        w: &Warp,
        issuer: usize,
        op: &Operand,
        chunks: &mut Vec<u32>,
    ) -> Result<Vec<f64>, InterpError> {
        let cta = &cl.ctas[w.cta];
        let mut out = Vec::with_capacity(op.rows as usize * 16);
        let major = match op.major {
            Major::K => "K-major",
            Major::Mn => "MN-major",
        };
        for r in 0..op.rows {
            for k in 0..16 {
                let addr = op.desc.addr(op.major, r, k);
                let mut b = [0u8; 2];
                let at = |e: &str| {
                    format!(
                        "{} of `{}` reads element ({r}, k={k}) at shared {addr:#x} through the \
                         descriptor ({}, {major}): {e}",
                        op.name, self.prog.meta[w.pc as usize].op, op.desc
                    )
                };
                if let Err(e) = cta.smem.read(addr as u64, &mut b) {
                    let (kind, why) = match e {
                        SmemFault::OutOfBounds => (
                            FaultKind::OutOfBounds,
                            format!(
                                "outside the CTA's shared memory [{SMEM_BASE:#x}, {:#x})",
                                SMEM_BASE as usize + cta.smem.data.len()
                            ),
                        ),
                        SmemFault::Uninitialized(_) => (
                            FaultKind::Uninitialized,
                            "the bytes were never written".into(),
                        ),
                        SmemFault::Mbarrier(_) => {
                            (FaultKind::Mbarrier, "the bytes hold an mbarrier".into())
                        }
                    };
                    return Err(fault(
                        self.prog,
                        &self.cfg,
                        w,
                        kind,
                        None,
                        Some(addr as u64),
                        at(&why),
                    ));
                }
                let off = (addr - SMEM_BASE) as usize;
                if cta.landed.is_some() {
                    self.check_landed(cl, w, None, issuer, w.cta, off, 2, &at("the bytes"))?;
                }
                if let Some(p) = &cta.proxy {
                    for byte in off..off + 2 {
                        let writer = p.writer[byte];
                        if writer == 0 {
                            continue;
                        }
                        let t = writer as usize - 1;
                        let fenced = cl.fences[t] > p.epoch[byte];
                        let visible = if t == issuer {
                            fenced
                        } else {
                            cl.published[t] > p.epoch[byte]
                        };
                        if !visible {
                            let nt = self.cfg.nthreads as usize;
                            let why = format!(
                                "the bytes were written by thread {} of {} with an ordinary store \
                                 not followed by fence.proxy.async.shared::cta {}",
                                t % nt,
                                cl.ctas[t / nt].id,
                                if fenced {
                                    "and then a barrier (mbarrier arrive, bar.sync or cluster \
                                     arrive) before the MMA was issued"
                                } else {
                                    "(and a barrier) before the MMA was issued"
                                }
                            );
                            return Err(fault(
                                self.prog,
                                &self.cfg,
                                w,
                                FaultKind::AsyncProxyRace,
                                None,
                                Some(addr as u64),
                                at(&why),
                            ));
                        }
                    }
                    let ch = (off / 16) as u32;
                    if chunks.last() != Some(&ch) {
                        chunks.push(ch);
                    }
                }
                let bits = u16::from_le_bytes(b);
                let v = match op.elem {
                    Elem::Bf16 => cvt::bf16_to_f32(bits),
                    Elem::F16 | Elem::F32 => cvt::f16_to_f32(bits),
                } as f64;
                out.push(if op.negate { -v } else { v });
            }
        }
        Ok(out)
    }

    /// `tcgen05.mma.cta_group::1.kind::f16 [d], a_desc, b_desc, idesc, enable_input_d`:
    /// D[M, N] (+)= A[M, 16] . B[N, 16]^T, issued by one thread.
    pub(crate) fn tc_mma(
        &mut self,
        cl: &mut Cluster,
        w: &Warp,
        [d, a, b, idesc, acc]: [Slot; 5],
    ) -> Result<(), InterpError> {
        let issuers = w.active.count_ones();
        if issuers != 1 {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::MultipleIssuers,
                None,
                None,
                format!(
                    "tcgen05.mma is issued per thread: {issuers} active lanes (mask {:#010x}) \
                     would issue it {issuers} times; issue it from one elected thread",
                    w.active
                ),
            ));
        }
        let l = w.active.trailing_zeros() as usize;
        let taddr = reg(&w.regs, d, l) as u32;
        let (ad, bd) = (reg(&w.regs, a, l), reg(&w.regs, b, l));
        let id = reg(&w.regs, idesc, l) as u32;
        let accumulate = reg(&w.regs, acc, l) & 1 != 0;
        let bad = |what: String| {
            fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Descriptor,
                Some(l),
                None,
                what,
            )
        };
        let i: InstrDesc = desc::decode_idesc(id)
            .map_err(|e| bad(format!("instruction descriptor {id:#010x}: {e}")))?;
        let a_desc =
            desc::decode_sm100(ad).map_err(|e| bad(format!("A descriptor {ad:#018x}: {e}")))?;
        let b_desc =
            desc::decode_sm100(bd).map_err(|e| bad(format!("B descriptor {bd:#018x}: {e}")))?;
        for (name, dsc) in [("A", a_desc), ("B", b_desc)] {
            if dsc.swizzle == Swizzle::B128Base32 {
                return Err(bad(format!(
                    "{name} descriptor selects 128B swizzling with 32B atomicity, which 16-bit \
                     kind::f16 operands do not support (PTX Table 52)"
                )));
            }
        }
        let (lane0, col) = (taddr >> 16, taddr & 0xffff);
        if lane0 != 0 || col + i.n > TMEM_COLS {
            return Err(self.tmem_fault(
                w,
                Some(l),
                Some(taddr as u64),
                format!(
                    "tcgen05.mma D address {taddr:#x} (lane {lane0}, column {col}): D starts at \
                     lane 0 and its {} columns must fit in 512",
                    i.n
                ),
            ));
        }
        let issuer = self.cluster_thread(w, l);
        let mut chunks = Vec::new();
        let av = self.load_operand(
            cl,
            w,
            issuer,
            &Operand {
                name: "operand A",
                desc: a_desc,
                major: i.a_major,
                rows: i.m,
                elem: i.a,
                negate: i.negate_a,
            },
            &mut chunks,
        )?;
        let bv = self.load_operand(
            cl,
            w,
            issuer,
            &Operand {
                name: "operand B",
                desc: b_desc,
                major: i.b_major,
                rows: i.n,
                elem: i.b,
                negate: i.negate_b,
            },
            &mut chunks,
        )?;
        let n = i.n as usize;
        let mut row = vec![0u32; n];
        let tmem = &mut cl.ctas[w.cta].tmem;
        for m in 0..i.m {
            // D layouts for cta_group::1 (PTX §9.7.16.10.5, layouts D and F): M = 128 puts
            // row m in lane m; M = 64 uses lanes 0-15 of each 32-lane quarter.
            let lane = if i.m == 128 {
                m
            } else {
                32 * (m / 16) + m % 16
            };
            if accumulate {
                tmem.read(lane, col, &mut row)
                    .map_err(|e| self.tmem_err(w, l, e, "read D"))?;
            }
            let a_row = &av[m as usize * 16..m as usize * 16 + 16];
            for (c, cell) in row.iter_mut().enumerate() {
                let b_row = &bv[c * 16..c * 16 + 16];
                // The 16 products are exact in f64 and their sum nearly so; one rounding to
                // the accumulator format follows (the tensor core's internal order and
                // rounding are not documented).
                let mut sum: f64 = a_row.iter().zip(b_row).map(|(x, y)| x * y).sum();
                if accumulate {
                    sum += match i.d {
                        Elem::F32 => f32::from_bits(*cell) as f64,
                        _ => cvt::f16_to_f32(*cell as u16) as f64,
                    };
                }
                *cell = match i.d {
                    Elem::F32 => super::alu::f32_bits(sum as f32) as u32,
                    // An f16 element sits in the low half of its 32-bit cell (PTX
                    // §9.7.16.10.4.1).
                    _ => cvt::f64_to_f16(sum) as u32,
                };
            }
            tmem.write(lane, col, &row)
                .map_err(|e| self.tmem_err(w, l, e, "write D"))?;
        }
        if let Some(p) = cl.ctas[w.cta].proxy.as_mut() {
            chunks.sort_unstable();
            chunks.dedup();
            for &ch in &chunks {
                p.busy[ch as usize] += 1;
            }
            p.flights.push(Flight {
                chunks,
                issuer: (issuer % self.cfg.nthreads as usize) as u32,
                pc: w.pc,
                commit: None,
            });
        }
        Ok(())
    }

    fn tmem_err(&self, w: &Warp, l: usize, e: TmemFault, what: &str) -> InterpError {
        match e {
            TmemFault::NotAllocated { lane, col } => self.tmem_fault(
                w,
                Some(l),
                Some(((lane as u64) << 16) | col as u64),
                format!("{what}: TMEM lane {lane}, column {col} is not in a live tcgen05.alloc allocation"),
            ),
            TmemFault::Uninitialized { lane, col } => fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Uninitialized,
                Some(l),
                Some(((lane as u64) << 16) | col as u64),
                format!("{what}: TMEM lane {lane}, column {col} was never written"),
            ),
        }
    }

    /// `tcgen05.commit`: one arrive on the mbarrier per committing thread, after its MMAs
    /// (which already ran). The MMAs' shared-memory reads stay in flight until that phase
    /// completes.
    pub(crate) fn tc_commit(
        &mut self,
        cl: &mut Cluster,
        w: &Warp,
        mbar: Slot,
    ) -> Result<(), InterpError> {
        for l in lanes_of(w.active) {
            let addr = reg(&w.regs, mbar, l) as u32;
            let (c, off) = self.mbar_target(cl, w, l, addr, true)?;
            let phase = self.mbar_arrive(cl, w, l, c, off, 0)?;
            let issuer = w.id * 32 + l as u32;
            if let Some(p) = cl.ctas[w.cta].proxy.as_mut() {
                // The MMAs this commit covers complete together: one flight with the union
                // of their chunks, so a store checks one chunk list per commit.
                let key = Some((c, off, phase));
                let (mut merged, rest): (Vec<Flight>, Vec<Flight>) = std::mem::take(&mut p.flights)
                    .into_iter()
                    .partition(|f| (f.issuer == issuer && f.commit.is_none()) || f.commit == key);
                p.flights = rest;
                if let Some(first) = merged.first() {
                    let pc = first.pc;
                    let mut chunks = Vec::new();
                    for f in &mut merged {
                        for &ch in &f.chunks {
                            p.busy[ch as usize] -= 1;
                        }
                        chunks.append(&mut f.chunks);
                    }
                    chunks.sort_unstable();
                    chunks.dedup();
                    for &ch in &chunks {
                        p.busy[ch as usize] += 1;
                    }
                    p.flights.push(Flight {
                        chunks,
                        issuer,
                        pc,
                        commit: key,
                    });
                }
            }
            self.retire_flights(cl, w.cta);
        }
        Ok(())
    }

    /// The lane quadrant and first column a `32x32b` access of warp `w` names: warp w may
    /// access lanes `32 * (w % 4) ..+ 32` only (PTX §9.7.16.8.1), and the address (uniform
    /// across the warp) must start at its quadrant.
    fn quadrant(&self, w: &Warp, taddr: Slot, what: &str) -> Result<(u32, u32), InterpError> {
        self.require_full_warp(w, &format!("{what}.sync.aligned"))?;
        let t = self.uniform(w, taddr, &format!("TMEM address of {what}"))? as u32;
        let (base, col) = (t >> 16, t & 0xffff);
        let quad = 32 * (w.id % 4);
        if base != quad {
            return Err(self.tmem_fault(
                w,
                None,
                Some(t as u64),
                format!(
                    "warp {} may access TMEM lanes {quad}..{} only (warp w owns lanes 32 * (w % \
                     4) ..+ 32), but the address {t:#x} starts at lane {base}",
                    w.id,
                    quad + 31
                ),
            ));
        }
        Ok((base, col))
    }

    /// `tcgen05.ld.sync.aligned.32x32b.xN`: thread t reads lane `base + t`, columns
    /// `col .. col + N`. The registers count as pending until `tcgen05.wait::ld`; the
    /// warp's own stores must have been waited for.
    pub(crate) fn tc_ld(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        list: u32,
        n: u32,
        taddr: Slot,
    ) -> Result<(), InterpError> {
        let (base, col) = self.quadrant(w, taddr, "tcgen05.ld")?;
        if let Some(pc) = w.tc_unwaited_st {
            let m = &self.prog.meta[pc as usize];
            return Err(self.tmem_fault(
                w,
                None,
                None,
                format!(
                    "the tcgen05.st at {} may not have completed: wait for it with \
                     tcgen05.wait::st before reading tensor memory",
                    m.loc
                ),
            ));
        }
        let dsts = &self.prog.lists[list as usize..(list + n) as usize];
        let tmem = &cl.ctas[w.cta].tmem;
        let mut cells = vec![0u32; n as usize];
        for lane in 0..32usize {
            let unwritten = tmem
                .read_allocated(base + lane as u32, col, &mut cells)
                .map_err(|e| self.tmem_err(w, lane, e, "tcgen05.ld"))?;
            for (&s, &v) in dsts.iter().zip(&cells) {
                w.regs[s as usize * 32 + lane] = v as u64;
            }
            // Loading never-written cells is legal (an M = 64 result fills half of each
            // quadrant); using what was loaded is not: those lanes are poisoned.
            if let Some(c) = unwritten {
                let cell = (base + lane as u32, c);
                for (i, &s) in dsts.iter().enumerate() {
                    if !tmem.is_written(base + lane as u32, col + i as u32) {
                        w.poison(s, lane, cell);
                    }
                }
            }
        }
        for &s in dsts {
            w.add_pending(s);
            w.tc_pending.push(s);
        }
        Ok(())
    }

    /// `tcgen05.st.sync.aligned.32x32b.xN`: thread t writes lane `base + t`, columns
    /// `col .. col + N`, with the quadrant rule of the load. The cells are written at once;
    /// until `tcgen05.wait::st` the warp may not load tensor memory (the store may not have
    /// landed).
    pub(crate) fn tc_st(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        list: u32,
        n: u32,
        taddr: Slot,
    ) -> Result<(), InterpError> {
        let (base, col) = self.quadrant(w, taddr, "tcgen05.st")?;
        let srcs = &self.prog.lists[list as usize..(list + n) as usize];
        let tmem = &mut cl.ctas[w.cta].tmem;
        let mut cells = vec![0u32; n as usize];
        for lane in 0..32usize {
            for (c, &s) in cells.iter_mut().zip(srcs) {
                *c = reg(&w.regs, s, lane) as u32;
            }
            tmem.write(base + lane as u32, col, &cells)
                .map_err(|e| self.tmem_err(w, lane, e, "tcgen05.st"))?;
        }
        w.tc_unwaited_st.get_or_insert(w.pc);
        Ok(())
    }
}
