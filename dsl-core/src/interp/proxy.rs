//! Async-proxy bookkeeping of shared memory: which thread last wrote each byte with an
//! ordinary store and under which proxy-fence count, and which MMAs may still be reading
//! which 16-byte chunks.

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

impl Machine<'_> {
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
        let chunks = off / 16..(off + len).div_ceil(16);
        if chunks.clone().all(|ch| proxy.busy[ch] == 0) {
            return Ok(());
        }
        let proxy = cl.ctas[c].proxy.as_ref().expect("checked");
        for ch in chunks {
            if proxy.busy[ch] == 0 {
                continue;
            }
            // The MMA may still read the chunk unless this thread waited for the phase its
            // commit arrived on.
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
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::AsyncProxyRace,
                Some(lane),
                Some(SMEM_BASE as u64 + ch as u64 * 16),
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
        Ok(())
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
