//! wgmma (sm_90a, PTX ISA 9.1 §9.7.15): `wgmma.mma_async.m64nNk16.f32.bf16.bf16` is
//! collective over the four warps of a warpgroup, which meet at the op; the last to arrive
//! runs it for all four. Accumulators count as pending until `wgmma.wait_group`.

use super::compile::{WgA, WgMmaIns};
use super::desc::{self, Elem, Major};
use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Flow, Machine, Warp, fault, reg};
use super::tcgen05::Operand;

impl Machine<'_> {
    pub(crate) fn wg_mma(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        op: WgMmaIns,
        progressed: &mut bool,
    ) -> Result<Flow, InterpError> {
        let g = (w.id / 4) as usize;
        if w.wg_wait.is_none() {
            self.require_full_warp(w, "wgmma.mma_async.sync.aligned")?;
            if 4 * g as u32 + 3 >= self.cfg.nwarps {
                return Err(fault(
                    self.prog,
                    &self.cfg,
                    w,
                    FaultKind::Collective,
                    None,
                    None,
                    format!(
                        "warpgroup {g} has only {} warp(s): wgmma needs four (a CTA of a \
                         multiple of 128 threads)",
                        self.cfg.nwarps - 4 * g as u32
                    ),
                ));
            }
            let rv = &mut cl.ctas[w.cta].groups[g];
            if rv.arrived != 0 && rv.pc != w.pc {
                let other = &self.prog.meta[rv.pc as usize];
                return Err(fault(
                    self.prog,
                    &self.cfg,
                    w,
                    FaultKind::Collective,
                    None,
                    None,
                    format!(
                        "warp {} reached this wgmma.mma_async while warps of its warpgroup wait \
                         at another one ({} at {}): the warpgroup diverged",
                        w.id, other.op, other.loc
                    ),
                ));
            }
            rv.pc = w.pc;
            rv.arrived |= 1 << (w.id % 4);
            w.wg_wait = Some(rv.generation);
            *progressed = true;
            if rv.arrived == 0xf {
                self.wg_execute(cl, w, g, op)?;
                let rv = &mut cl.ctas[w.cta].groups[g];
                rv.arrived = 0;
                rv.generation += 1;
            }
        }
        let generation = w.wg_wait.expect("arrived");
        if cl.ctas[w.cta].groups[g].generation > generation {
            w.wg_wait = None;
            Ok(Flow::Next)
        } else {
            Ok(Flow::Block)
        }
    }

    /// Runs the MMA for the four warps of warpgroup `g` (`w` is one of them, taken out of
    /// the cluster's warp list while it runs).
    fn wg_execute(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        g: usize,
        op: WgMmaIns,
    ) -> Result<(), InterpError> {
        let WgMmaIns {
            n,
            list,
            a,
            b,
            scale,
            ta,
            tb,
        } = op;
        let first = w.cta * self.cfg.nwarps as usize + 4 * g;
        let own = w.id as usize % 4;
        // A fragment in registers has no descriptor to agree on.
        let a_desc_slot = match a {
            WgA::Desc(s) => Some(s),
            WgA::Regs(_) => None,
        };
        let a_desc_of = |regs: &[u64], l| a_desc_slot.map_or(0, |s| reg(regs, s, l));
        // Descriptors and scale-d are per thread but must agree across the warpgroup.
        let (ad, bd, sc) = (
            a_desc_of(&w.regs, 0),
            reg(&w.regs, b, 0),
            reg(&w.regs, scale, 0) & 1,
        );
        for i in 0..4 {
            let regs = if i == own {
                &w.regs
            } else {
                &cl.warps[first + i].regs
            };
            for l in 0..32 {
                let got = (a_desc_of(regs, l), reg(regs, b, l), reg(regs, scale, l) & 1);
                if got != (ad, bd, sc) {
                    return Err(fault(
                        self.prog,
                        &self.cfg,
                        w,
                        FaultKind::Collective,
                        Some(l),
                        None,
                        format!(
                            "thread {} of the warpgroup passes descriptors {:#x}/{:#x} and \
                             scale-d {}, thread 0 passes {ad:#x}/{bd:#x} and {sc}: they must \
                             agree",
                            32 * i + l,
                            got.0,
                            got.1,
                            got.2
                        ),
                    ));
                }
            }
        }
        let bad = |what: String| {
            fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Descriptor,
                None,
                None,
                what,
            )
        };
        let b_desc =
            desc::decode_sm90(bd).map_err(|e| bad(format!("B descriptor {bd:#018x}: {e}")))?;
        let major = |t: u8| if t == 1 { Major::Mn } else { Major::K };
        let issuer = self.cluster_thread(w, 0);
        let mut chunks = Vec::new();
        let a_frag = match a {
            WgA::Desc(_) => None,
            WgA::Regs(list) => Some(&self.prog.lists[list as usize..list as usize + 4]),
        };
        let av = match a_frag {
            None => {
                let a_desc = desc::decode_sm90(ad)
                    .map_err(|e| bad(format!("A descriptor {ad:#018x}: {e}")))?;
                self.load_operand(
                    cl,
                    w,
                    issuer,
                    &Operand {
                        name: "operand A",
                        desc: a_desc,
                        major: major(ta),
                        rows: 64,
                        elem: Elem::Bf16,
                        negate: false,
                    },
                    &mut chunks,
                )?
            }
            Some(frag) => {
                let mut av = vec![0.0f64; 64 * 16];
                for i in 0..4 {
                    let regs = if i == own {
                        &w.regs
                    } else {
                        &cl.warps[first + i].regs
                    };
                    for l in 0..32usize {
                        // The A fragment of m64nNk16 (ptx-reference.md §17, CUTLASS
                        // ALayout_64x16): register j of lane l of warp i holds row
                        // 16i + l/4 + 8(j&1), columns 2(l%4) + 8(j>>1) + {0, 1} (low half
                        // first).
                        for (j, &s) in frag.iter().enumerate() {
                            let word = reg(regs, s, l) as u32;
                            let row = 16 * i + l / 4 + 8 * (j & 1);
                            let col = 2 * (l % 4) + 8 * (j >> 1);
                            for (h, bits) in [word & 0xffff, word >> 16].into_iter().enumerate() {
                                av[row * 16 + col + h] = f32::from_bits(bits << 16) as f64;
                            }
                        }
                    }
                }
                av
            }
        };
        let bv = self.load_operand(
            cl,
            w,
            issuer,
            &Operand {
                name: "operand B",
                desc: b_desc,
                major: major(tb),
                rows: n,
                elem: Elem::Bf16,
                negate: false,
            },
            &mut chunks,
        )?;
        let acc = &self.prog.lists[list as usize..(list + n / 2) as usize];
        for i in 0..4 {
            let warp = if i == own {
                &mut *w
            } else {
                &mut cl.warps[first + i]
            };
            for l in 0..32usize {
                for (k, &s) in acc.iter().enumerate() {
                    // The m64nN f32 accumulator fragment (PTX §9.7.15.5.1.1.1, CUTLASS
                    // CLayout_64xN): warp i holds rows 16i.., register k of lane l is
                    // row 16i + l/4 + 8((k>>1)&1), column 8(k>>2) + 2(l%4) + (k&1).
                    let row = 16 * i + l / 4 + 8 * ((k >> 1) & 1);
                    let col = 8 * (k >> 2) + 2 * (l % 4) + (k & 1);
                    let mut sum: f64 = av[row * 16..row * 16 + 16]
                        .iter()
                        .zip(&bv[col * 16..col * 16 + 16])
                        .map(|(x, y)| x * y)
                        .sum();
                    let cell = &mut warp.regs[s as usize * 32 + l];
                    if sc != 0 {
                        sum += f32::from_bits(*cell as u32) as f64;
                    }
                    *cell = super::alu::f32_bits(sum as f32);
                }
            }
            // PTX: neither the accumulator nor A's registers may be touched before a
            // wait_group covers this MMA.
            for &s in acc.iter().chain(a_frag.into_iter().flatten()) {
                warp.add_pending(s);
                warp.wg_uncommitted.push(s);
            }
        }
        Ok(())
    }
}
