//! Async-proxy bookkeeping of shared memory: which thread last wrote each byte with an
//! ordinary store and under which proxy-fence count, and which MMAs may still be reading
//! which 16-byte chunks, and which asynchronous copy last wrote each word (for the check
//! that its readers waited for it).

use super::SMEM_BASE;
use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Machine, Warp, fault};

/// An MMA whose shared-memory reads are in flight (for the async-proxy check).
pub(crate) struct Flight {
    pub(crate) chunks: Vec<u32>,
    pub(crate) issuer: u32,
    pub(crate) pc: u32,
    /// The mbarrier (CTA, offset) and phase its commit arrived on.
    pub(crate) commit: Option<(usize, u32, u64)>,
}

/// Async-proxy bookkeeping of one CTA's shared memory.
pub(crate) struct Proxy {
    /// Per byte: the cluster thread that last wrote it with an ordinary store, plus one.
    pub(crate) writer: Vec<u32>,
    /// Per byte: that thread's proxy-fence count at the time of the write.
    pub(crate) epoch: Vec<u32>,
    /// Per 16-byte chunk: in-flight MMAs reading it.
    pub(crate) busy: Vec<u16>,
    pub(crate) flights: Vec<Flight>,
}

/// When the data an asynchronous copy wrote may be touched by a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Until {
    /// A bulk or TMA load that completed its bytes on the mbarrier at (CTA, offset) in
    /// phase `phase`: a thread must have observed that phase through a successful wait.
    Phase { cta: usize, off: u32, phase: u64 },
    /// A `cp.async` of cluster thread `thread` that has not landed: nobody may touch it
    /// before that thread's `cp.async.wait_group` lands it.
    CpAsync { thread: u32 },
}

/// The asynchronous copy that last wrote some words of shared memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Landing {
    pub(crate) pc: u32,
    /// The issuing thread, in its CTA, and that CTA.
    pub(crate) thread: u32,
    pub(crate) cta: usize,
    pub(crate) until: Until,
}

/// Per CTA, made on the first asynchronous copy into it (kernels without copies pay
/// nothing): for each 4-byte word of shared memory, the copy that last wrote it. Copies
/// are 4-byte granular (cp.async moves 4, 8 or 16 aligned bytes, bulk and TMA copies
/// 16-byte multiples); an ordinary store of part of a word forgets the whole word.
pub(crate) struct Landed {
    /// Per word: index + 1 into `landings`, 0 when no pending copy wrote it last.
    words: Vec<u32>,
    landings: Vec<Landing>,
    /// Per landing: the words that still name it; a landing no word names is reused.
    refs: Vec<u32>,
    free: Vec<u32>,
}

impl Landed {
    pub(crate) fn new(smem_len: usize) -> Self {
        Landed {
            words: vec![0; smem_len.div_ceil(4)],
            landings: Vec::new(),
            refs: Vec::new(),
            free: Vec::new(),
        }
    }

    /// A new copy; its tag is what [`Landed::set`] records for the words it writes.
    pub(crate) fn add(&mut self, landing: Landing) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                self.landings[i as usize] = landing;
                i
            }
            None => {
                self.landings.push(landing);
                self.refs.push(0);
                self.landings.len() as u32 - 1
            }
        };
        i + 1
    }

    /// Forgets the copies that wrote `[off, off + len)` (an ordinary store overwrote it).
    pub(crate) fn clear(&mut self, off: usize, len: usize) {
        self.set(off, len, 0);
    }

    /// Records that the copy `tag` (0: none) last wrote bytes `[off, off + len)`.
    pub(crate) fn set(&mut self, off: usize, len: usize, tag: u32) {
        for word in off / 4..(off + len).div_ceil(4) {
            let old = std::mem::replace(&mut self.words[word], tag);
            if old == tag {
                continue;
            }
            if old != 0 {
                let r = &mut self.refs[old as usize - 1];
                *r -= 1;
                if *r == 0 {
                    self.free.push(old - 1);
                }
            }
            if tag != 0 {
                self.refs[tag as usize - 1] += 1;
            }
        }
    }

    /// The copies that wrote `[off, off + len)`, with the first byte of each run.
    fn tags(&self, off: usize, len: usize) -> impl Iterator<Item = (usize, &Landing)> {
        let mut last = 0;
        (off / 4..(off + len).div_ceil(4)).filter_map(move |word| {
            let t = self.words[word];
            if t == 0 || t == last {
                return None;
            }
            last = t;
            Some(((word * 4).max(off), &self.landings[t as usize - 1]))
        })
    }
}

impl Machine<'_> {
    /// Faults when cluster thread `t` touches bytes `[off, off + len)` of CTA `c` that an
    /// asynchronous copy wrote and `t` has not waited for: data a bulk or TMA load wrote
    /// is visible to a thread once it observed the mbarrier phase the copy completed on,
    /// and a `cp.async` destination only once the copy landed.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_landed(
        &self,
        cl: &Cluster,
        w: &Warp,
        lane: Option<usize>,
        t: usize,
        c: usize,
        off: usize,
        len: usize,
        what: &str,
    ) -> Result<(), InterpError> {
        let Some(landed) = cl.ctas[c].landed.as_ref() else {
            return Ok(());
        };
        for (byte, l) in landed.tags(off, len) {
            let m = &self.prog.meta[l.pc as usize];
            let issued = format!(
                "the {} issued at {} by thread {} of {}",
                m.op, m.loc, l.thread, cl.ctas[l.cta].id
            );
            let why = match l.until {
                Until::Phase { cta, off, phase } => {
                    if cl
                        .observed
                        .get(&(t as u32, cta as u32, off))
                        .is_some_and(|&seen| seen > phase)
                    {
                        continue;
                    }
                    let state = match cl.ctas[cta].mbars.get(&off) {
                        Some(mb) if mb.phase > phase => "it has completed".to_string(),
                        Some(mb) => format!(
                            "it has not completed: {} of {} arrivals pending, tx-count {}",
                            mb.pending, mb.count, mb.tx
                        ),
                        None => "the mbarrier was invalidated".to_string(),
                    };
                    format!(
                        "{issued} completes on phase {phase} of the mbarrier at shared {:#x} of \
                         {}, which this thread has not observed with mbarrier.try_wait.parity \
                         (parity {}; {state})",
                        SMEM_BASE + off,
                        cl.ctas[cta].id,
                        phase & 1
                    )
                }
                Until::CpAsync { thread } => format!(
                    "{issued} has not landed: it lands when thread {} waits for its group with \
                     cp.async.wait_group (other threads see it after that and a barrier)",
                    thread % self.cfg.nthreads
                ),
            };
            let addr = SMEM_BASE as u64 + byte as u64;
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::AsyncProxyRace,
                lane,
                Some(addr),
                format!("{what} at shared {addr:#x} of {}: {why}", cl.ctas[c].id),
            ));
        }
        Ok(())
    }

    /// A thread's barrier arrival makes its proxy fences count for MMAs issued after it.
    pub(crate) fn publish(&self, cl: &mut Cluster, w: &Warp, lane: usize) {
        let t = self.cluster_thread(w, lane);
        cl.published[t] = cl.fences[t];
    }

    /// Async-proxy bookkeeping of an ordinary store: who wrote each byte, and whether an
    /// MMA may still be reading it.
    pub(crate) fn track_store(
        &self,
        cl: &mut Cluster,
        w: &Warp,
        lane: usize,
        c: usize,
        off: usize,
        len: usize,
    ) -> Result<(), InterpError> {
        let t = self.cluster_thread(w, lane);
        let epoch = cl.fences[t];
        let Some(proxy) = cl.ctas[c].proxy.as_mut() else {
            return Ok(());
        };
        for b in off..off + len {
            proxy.writer[b] = t as u32 + 1;
            proxy.epoch[b] = epoch;
        }
        self.require_no_in_flight_reader(cl, w, lane, c, off, len)
    }

    /// Faults when an MMA still in flight may read bytes `[off, off + len)` of CTA `c` that
    /// `lane` of `w` is about to overwrite.
    pub(crate) fn require_no_in_flight_reader(
        &self,
        cl: &Cluster,
        w: &Warp,
        lane: usize,
        c: usize,
        off: usize,
        len: usize,
    ) -> Result<(), InterpError> {
        let t = self.cluster_thread(w, lane);
        match self.in_flight_reader(cl, t, c, off, len) {
            None => Ok(()),
            Some((ch, msg)) => Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::AsyncProxyRace,
                Some(lane),
                Some(SMEM_BASE as u64 + ch as u64 * 16),
                msg,
            )),
        }
    }

    /// The first 16-byte chunk of `[off, off + len)` of CTA `c` that an in-flight MMA may
    /// still read when cluster thread `t` overwrites it, with the report: the MMA may still
    /// read the chunk unless `t` waited for the phase its commit arrived on.
    fn in_flight_reader(
        &self,
        cl: &Cluster,
        t: usize,
        c: usize,
        off: usize,
        len: usize,
    ) -> Option<(usize, String)> {
        let proxy = cl.ctas[c].proxy.as_ref()?;
        let chunks = off / 16..(off + len).div_ceil(16);
        if chunks.clone().all(|ch| proxy.busy[ch] == 0) {
            return None;
        }
        for ch in chunks {
            if proxy.busy[ch] == 0 {
                continue;
            }
            // Flights are sorted chunk lists, and runs of them share a commit: look each
            // commit up once.
            let mut last: Option<((usize, u32, u64), bool)> = None;
            let racing = proxy.flights.iter().find(|f| {
                if f.chunks.binary_search(&(ch as u32)).is_err() {
                    return false;
                }
                let Some(key @ (mc, mo, ph)) = f.commit else {
                    return true;
                };
                let seen = match last {
                    Some((k, seen)) if k == key => seen,
                    _ => {
                        let seen = cl
                            .observed
                            .get(&(t as u32, mc as u32, mo))
                            .is_some_and(|&seen| seen > ph);
                        last = Some((key, seen));
                        seen
                    }
                };
                !seen
            });
            let Some(f) = racing else { continue };
            let m = &self.prog.meta[f.pc as usize];
            let state = match f.commit {
                None => "it was not committed yet".to_string(),
                Some((mc, mo, ph)) => format!(
                    "this thread has not waited for phase {ph} of the mbarrier at shared {:#x} of \
                     {} that it was committed to",
                    SMEM_BASE + mo,
                    cl.ctas[mc].id
                ),
            };
            return Some((
                ch,
                format!(
                    "overwrites shared memory at {:#x} that the {} issued at {} by thread {} may \
                     still be reading: {state}",
                    SMEM_BASE as usize + ch * 16,
                    m.op,
                    m.loc,
                    f.issuer
                ),
            ));
        }
        None
    }

    /// Drops the in-flight MMA reads of CTA `c` whose commit phase has completed.
    pub(crate) fn retire_flights(&self, cl: &mut Cluster, c: usize) {
        let done: Vec<bool> = {
            let Some(proxy) = cl.ctas[c].proxy.as_ref() else {
                return;
            };
            proxy
                .flights
                .iter()
                .map(|f| match f.commit {
                    // Two phases later every thread that took part has moved on; keeping the
                    // flight longer only costs memory.
                    Some((mc, mo, ph)) => cl.ctas[mc]
                        .mbars
                        .get(&mo)
                        .is_none_or(|mb| mb.phase > ph + 1),
                    None => false,
                })
                .collect()
        };
        let proxy = cl.ctas[c].proxy.as_mut().expect("checked");
        let mut done = done.into_iter();
        let flights = std::mem::take(&mut proxy.flights);
        for f in flights {
            if done.next().expect("one flag per flight") {
                for &ch in &f.chunks {
                    proxy.busy[ch as usize] -= 1;
                }
            } else {
                proxy.flights.push(f);
            }
        }
    }
}
