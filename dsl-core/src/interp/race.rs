//! Shared-memory races, what compute-sanitizer's racecheck reports: two accesses of the same
//! bytes by different warps, at least one a write, that no synchronisation orders.
//!
//! The order is happens-before over vector clocks, one clock per warp of the cluster. A
//! warp releases what it has done (its clock joins the synchronisation object's, then
//! ticks) when it arrives at a CTA barrier, a named barrier (`bar.arrive` too), an
//! mbarrier (an arrival, a `tcgen05.commit`, or the completion of a copy it issued) or the
//! cluster barrier; it acquires (joins the object's clock of that generation or phase into
//! its own) when it passes the barrier, or when its `mbarrier.try_wait.parity` succeeds.
//! Every ordinary shared-memory access (`ld`/`st.shared{::cluster}`, `ldmatrix`,
//! `stmatrix`) is checked against the last write of its bytes and, for a write, against
//! every read since; a copy into shared memory (bulk, TMA, `st.async`, `cp.async`) counts
//! as a write of its issuing warp when it issues, and a TMA store's source as its read.
//!
//! Why warps, not threads: a warp's lanes execute each instruction together here, so
//! accesses of one warp are in program order, and one clock a warp keeps the clocks
//! `warps x warps` words (a 16-CTA cluster of 1024-thread CTAs: 1 MiB). Why the bytes of a
//! word share one record: accesses are at most 16 bytes and 4-aligned copies dominate; each
//! record keeps the byte mask it covered, so two warps writing different halves of a word
//! are not a race (a later access of the other half may then miss the first writer, never
//! report a race that is not one). MMA operand reads are not tracked here: the async-proxy
//! check covers them (a fence and a barrier before the MMA, its commit waited for before
//! the bytes are overwritten).

use std::collections::HashMap;

use super::SMEM_BASE;
use super::compile::Slot;
use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Machine, Warp, fault, lanes_of, reg};
use super::mbarrier::phases_seen;

/// No warp: an empty access record.
const NONE: u32 = u32::MAX;
/// Completed generations or phases of a synchronisation object whose clocks are kept: a
/// waiter acquires the one it waited for, which the object may have completed again since.
const KEPT: usize = 4;

/// One access of a word: the warp, its clock at the time, where, and which bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Access {
    pub(crate) warp: u32,
    pub(crate) clock: u32,
    pub(crate) pc: u32,
    pub(crate) mask: u8,
}

const NO_ACCESS: Access = Access {
    warp: NONE,
    clock: 0,
    pc: 0,
    mask: 0,
};

/// What is known of one 4-byte word: its last write and the reads since.
#[derive(Clone, Copy)]
struct Word {
    write: Access,
    /// The only read since the write, while `readers` is 0.
    read: Access,
    /// Index + 1 into [`Races::reader_sets`] once warps that nothing orders have read it.
    readers: u32,
}

const FRESH: Word = Word {
    write: NO_ACCESS,
    read: NO_ACCESS,
    readers: 0,
};

/// A synchronisation object's clock: the join of the releases of the generation (or phase)
/// under way, and of the last completed ones.
#[derive(Clone, Default)]
struct SyncClock {
    open: Vec<u32>,
    done: Vec<(u64, Vec<u32>)>,
}

impl SyncClock {
    fn release(&mut self, clock: &[u32]) {
        join(&mut self.open, clock);
    }

    fn complete(&mut self, generation: u64) {
        if self.done.len() == KEPT {
            self.done.remove(0);
        }
        self.done.push((generation, std::mem::take(&mut self.open)));
    }

    /// Joins the clock of completed generation `generation` into `into`; a generation no
    /// longer kept joins every clock kept (ordering more than the hardware does can hide a
    /// race, never invent one).
    fn acquire_into(&self, generation: u64, into: &mut [u32]) {
        if let Some((_, c)) = self.done.iter().find(|(g, _)| *g == generation) {
            join_into(into, c);
            return;
        }
        join_into(into, &self.open);
        for (_, c) in &self.done {
            join_into(into, c);
        }
    }
}

/// Grows `into` to `other`'s length and joins `other` into it.
fn join(into: &mut Vec<u32>, other: &[u32]) {
    if into.len() < other.len() {
        into.resize(other.len(), 0);
    }
    join_into(into, other);
}

/// The element-wise maximum of `into` and `other`, into `into`.
fn join_into(into: &mut [u32], other: &[u32]) {
    for (a, &b) in into.iter_mut().zip(other) {
        *a = (*a).max(b);
    }
}

/// An access the race check records: whether it reads or writes, and what makes it (the
/// report's subject: "the load", "the copy").
#[derive(Clone, Copy, Debug)]
pub(crate) enum Touch {
    Reads(&'static str),
    Writes(&'static str),
}

/// Two accesses that nothing orders: the earlier one, and whether the later one writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Conflict {
    pub(crate) earlier: Access,
    pub(crate) earlier_writes: bool,
    /// The byte offset (in the CTA's shared memory) of the word they share.
    pub(crate) offset: usize,
}

/// The race bookkeeping of one cluster.
pub(crate) struct Races {
    warps: usize,
    /// Row `w`: warp `w`'s vector clock.
    clocks: Vec<u32>,
    /// Per CTA, per hardware barrier.
    bars: Vec<Vec<SyncClock>>,
    /// Per (CTA, mbarrier offset).
    mbars: HashMap<(usize, u32), SyncClock>,
    cluster: SyncClock,
    /// Per CTA, per word of shared memory.
    words: Vec<Vec<Word>>,
    reader_sets: Vec<Vec<Access>>,
    free_sets: Vec<u32>,
}

impl Races {
    pub(crate) fn new(ctas: usize, warps_per_cta: usize, smem_bytes: usize) -> Races {
        let warps = ctas * warps_per_cta;
        let mut clocks = vec![0; warps * warps];
        for w in 0..warps {
            clocks[w * warps + w] = 1;
        }
        Races {
            warps,
            clocks,
            bars: vec![vec![SyncClock::default(); 16]; ctas],
            mbars: HashMap::new(),
            cluster: SyncClock::default(),
            words: vec![vec![FRESH; smem_bytes.div_ceil(4)]; ctas],
            reader_sets: Vec::new(),
            free_sets: Vec::new(),
        }
    }

    /// Warp `w` releases into `sync`: its clock joins the object's, then ticks.
    fn release(sync: &mut SyncClock, clocks: &mut [u32], warps: usize, w: usize) {
        sync.release(&clocks[w * warps..(w + 1) * warps]);
        clocks[w * warps + w] += 1;
    }

    /// Warp `w` acquires generation `generation` of `sync`.
    fn acquire(sync: &SyncClock, generation: u64, clocks: &mut [u32], warps: usize, w: usize) {
        sync.acquire_into(generation, &mut clocks[w * warps..(w + 1) * warps]);
    }

    /// Whether warp `w` has seen access `a` (its own, or released to it).
    fn ordered(&self, a: &Access, w: usize) -> bool {
        a.warp == w as u32 || self.clocks[w * self.warps + a.warp as usize] >= a.clock
    }

    pub(crate) fn bar_arrive(&mut self, cta: usize, id: usize, w: usize) {
        Self::release(&mut self.bars[cta][id], &mut self.clocks, self.warps, w);
    }

    pub(crate) fn bar_complete(&mut self, cta: usize, id: usize, generation: u64) {
        self.bars[cta][id].complete(generation);
    }

    pub(crate) fn bar_pass(&mut self, cta: usize, id: usize, generation: u64, w: usize) {
        let sync = &self.bars[cta][id];
        Self::acquire(sync, generation, &mut self.clocks, self.warps, w);
    }

    /// A release on the mbarrier at `off` of CTA `cta` (an arrival, or a copy completing).
    pub(crate) fn mbar_release(&mut self, cta: usize, off: u32, w: usize) {
        let sync = self.mbars.entry((cta, off)).or_default();
        Self::release(sync, &mut self.clocks, self.warps, w);
    }

    pub(crate) fn mbar_complete(&mut self, cta: usize, off: u32, phase: u64) {
        self.mbars.entry((cta, off)).or_default().complete(phase);
    }

    pub(crate) fn mbar_pass(&mut self, cta: usize, off: u32, phase: u64, w: usize) {
        let sync = self.mbars.entry((cta, off)).or_default();
        Self::acquire(sync, phase, &mut self.clocks, self.warps, w);
    }

    pub(crate) fn cluster_arrive(&mut self, w: usize) {
        Self::release(&mut self.cluster, &mut self.clocks, self.warps, w);
    }

    pub(crate) fn cluster_complete(&mut self, phase: u64) {
        self.cluster.complete(phase);
    }

    pub(crate) fn cluster_pass(&mut self, phase: u64, w: usize) {
        Self::acquire(&self.cluster, phase, &mut self.clocks, self.warps, w);
    }

    /// Warp `w`'s access at `pc` of bytes `[off, off + len)` of CTA `cta`'s shared memory:
    /// the first earlier access it conflicts with, if any, else it is recorded.
    pub(crate) fn access(
        &mut self,
        cta: usize,
        off: usize,
        len: usize,
        w: usize,
        pc: u32,
        touch: Touch,
    ) -> Result<(), Conflict> {
        let clock = self.clocks[w * self.warps + w];
        for word in off / 4..(off + len).div_ceil(4) {
            let lo = off.max(word * 4) - word * 4;
            let hi = (off + len).min(word * 4 + 4) - word * 4;
            let mask = ((1u32 << hi) - (1u32 << lo)) as u8;
            let now = Access {
                warp: w as u32,
                clock,
                pc,
                mask,
            };
            match touch {
                Touch::Writes(_) => self.write_word(cta, word, now)?,
                Touch::Reads(_) => self.read_word(cta, word, now)?,
            }
        }
        Ok(())
    }

    /// Whether `earlier` conflicts with warp `w`'s access of bytes `mask`.
    fn races(&self, earlier: &Access, w: usize, mask: u8) -> bool {
        earlier.warp != NONE && earlier.mask & mask != 0 && !self.ordered(earlier, w)
    }

    fn read_word(&mut self, cta: usize, word: usize, now: Access) -> Result<(), Conflict> {
        let w = now.warp as usize;
        let state = self.words[cta][word];
        if self.races(&state.write, w, now.mask) {
            return Err(Conflict {
                earlier: state.write,
                earlier_writes: true,
                offset: word * 4,
            });
        }
        if state.readers != 0 {
            let set = &mut self.reader_sets[state.readers as usize - 1];
            match set.iter_mut().find(|a| a.warp == now.warp) {
                Some(a) => {
                    *a = Access {
                        mask: a.mask | now.mask,
                        ..now
                    }
                }
                None => set.push(now),
            }
            return Ok(());
        }
        let read = state.read;
        let slot = &mut self.words[cta][word];
        if read.warp == NONE || read.warp == now.warp {
            slot.read = Access {
                mask: now.mask | if read.warp == NONE { 0 } else { read.mask },
                ..now
            };
        } else if self.ordered(&read, w) && read.mask & !now.mask == 0 {
            // Whatever is ordered after this read is ordered after the earlier one too.
            self.words[cta][word].read = now;
        } else {
            let set = match self.free_sets.pop() {
                Some(i) => {
                    self.reader_sets[i as usize].extend([read, now]);
                    i
                }
                None => {
                    self.reader_sets.push(vec![read, now]);
                    self.reader_sets.len() as u32 - 1
                }
            };
            let slot = &mut self.words[cta][word];
            slot.readers = set + 1;
            slot.read = NO_ACCESS;
        }
        Ok(())
    }

    fn write_word(&mut self, cta: usize, word: usize, now: Access) -> Result<(), Conflict> {
        let w = now.warp as usize;
        let state = self.words[cta][word];
        let conflict = |earlier: Access, earlier_writes| Conflict {
            earlier,
            earlier_writes,
            offset: word * 4,
        };
        if self.races(&state.write, w, now.mask) {
            return Err(conflict(state.write, true));
        }
        if state.readers != 0 {
            let set = &self.reader_sets[state.readers as usize - 1];
            if let Some(r) = set.iter().find(|r| self.races(r, w, now.mask)) {
                return Err(conflict(*r, false));
            }
            self.reader_sets[state.readers as usize - 1].clear();
            self.free_sets.push(state.readers - 1);
        } else if self.races(&state.read, w, now.mask) {
            return Err(conflict(state.read, false));
        }
        self.words[cta][word] = Word {
            write: now,
            read: NO_ACCESS,
            readers: 0,
        };
        Ok(())
    }
}

impl Machine<'_> {
    /// The cluster-wide index of warp `w` for the race bookkeeping.
    fn race_warp(&self, w: &Warp) -> usize {
        w.cta * self.cfg.nwarps as usize + w.id as usize
    }

    /// Checks and records `lane` of `w` touching bytes `[off, off + len)` of CTA `c`'s
    /// shared memory.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn race_access(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lane: usize,
        c: usize,
        off: usize,
        len: usize,
        touch: Touch,
    ) -> Result<(), InterpError> {
        let me = self.race_warp(w);
        let Some(races) = cl.races.as_mut() else {
            return Ok(());
        };
        let Err(conflict) = races.access(c, off, len, me, w.pc, touch) else {
            return Ok(());
        };
        let what = match touch {
            Touch::Reads(who) => format!("{who} reads"),
            Touch::Writes(who) => format!("{who} writes"),
        };
        let earlier = conflict.earlier;
        let nwarps = self.cfg.nwarps;
        let (other_cta, other_warp) = (earlier.warp / nwarps, earlier.warp % nwarps);
        let m = &self.prog.meta[earlier.pc as usize];
        let addr = SMEM_BASE as u64 + conflict.offset as u64;
        let did = if conflict.earlier_writes {
            "wrote"
        } else {
            "read"
        };
        let msg = format!(
            "{what} at shared {addr:#x} of {}: warp {other_warp} of {} {did} these bytes with \
             the {} at {}, and nothing orders the two accesses (no barrier, mbarrier wait or \
             cluster barrier that this warp passed after that warp arrived)",
            cl.ctas[c].id, cl.ctas[other_cta as usize].id, m.op, m.loc
        );
        Err(fault(
            self.prog,
            &self.cfg,
            w,
            FaultKind::SharedRace,
            Some(lane),
            Some(addr),
            msg,
        ))
    }

    /// `w` arrives at barrier `id` of its CTA; `before` is the barrier's generation before
    /// the arrival, which the arrival may have completed.
    pub(crate) fn race_bar_arrive(&self, cl: &mut Cluster, w: &Warp, id: usize, before: u64) {
        let me = self.race_warp(w);
        let after = cl.ctas[w.cta].bars[id].generation;
        if let Some(races) = cl.races.as_mut() {
            races.bar_arrive(w.cta, id, me);
            if after > before {
                races.bar_complete(w.cta, id, before);
            }
        }
    }

    /// `w` passes barrier `id` of its CTA, whose generation `generation` completed.
    pub(crate) fn race_bar_pass(&self, cl: &mut Cluster, w: &Warp, id: usize, generation: u64) {
        let me = self.race_warp(w);
        if let Some(races) = cl.races.as_mut() {
            races.bar_pass(w.cta, id, generation, me);
        }
    }

    /// Barriers of CTA `cta` that completed without an arrival (a warp exited): `before`
    /// holds their generations before.
    pub(crate) fn race_bars_completed(cl: &mut Cluster, cta: usize, before: &[u64; 16]) {
        let Some(races) = cl.races.as_mut() else {
            return;
        };
        for (id, (bar, &b)) in cl.ctas[cta].bars.iter().zip(before).enumerate() {
            if bar.generation > b {
                races.bar_complete(cta, id, b);
            }
        }
    }

    /// `w` releases on the mbarrier at `off` of CTA `c` (an arrival, or the completion of a
    /// copy it issued) when `release`; `before` is the barrier's phase before the op.
    pub(crate) fn race_mbar(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        c: usize,
        off: u32,
        before: u64,
        release: bool,
    ) {
        let me = self.race_warp(w);
        let after = cl.ctas[c].mbars.get(&off).map_or(before, |mb| mb.phase);
        if let Some(races) = cl.races.as_mut() {
            if release {
                races.mbar_release(c, off, me);
            }
            if after > before {
                races.mbar_complete(c, off, before);
            }
        }
    }

    /// `w`'s `mbarrier.try_wait.parity` succeeded: each lane acquires the latest completed
    /// phase of the parity it waited for.
    pub(crate) fn race_mbar_pass(&self, cl: &mut Cluster, w: &Warp, bar: Slot, parity: Slot) {
        if cl.races.is_none() {
            return;
        }
        let me = self.race_warp(w);
        for l in lanes_of(w.active) {
            let off = (reg(&w.regs, bar, l) as u32).wrapping_sub(SMEM_BASE);
            let seen = phases_seen(cl.ctas[w.cta].mbars[&off].phase, reg(&w.regs, parity, l));
            // A fresh barrier passes a wait for parity 1: no phase, nothing to acquire.
            if let (Some(races), Some(phase)) = (cl.races.as_mut(), seen.checked_sub(1)) {
                races.mbar_pass(w.cta, off, phase, me);
            }
        }
    }

    pub(crate) fn race_cluster_arrive(&self, cl: &mut Cluster, w: &Warp) {
        let me = self.race_warp(w);
        if let Some(races) = cl.races.as_mut() {
            races.cluster_arrive(me);
        }
    }

    pub(crate) fn race_cluster_pass(&self, cl: &mut Cluster, w: &Warp, phase: u64) {
        let me = self.race_warp(w);
        if let Some(races) = cl.races.as_mut() {
            races.cluster_pass(phase, me);
        }
    }
}
