//! CTA barriers: `bar.sync id` of the whole CTA and named barriers of a subset of its
//! warps (ids 0..16 shared between them), and the cluster barrier.

use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Flow, Machine, Warp, fault, lanes_of, mask_str};

/// One of a CTA's 16 hardware barriers, in its current generation.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Bar {
    pub(crate) arrived: u32,
    pub(crate) generation: u64,
    /// The thread count of the named-barrier arrivals of this generation; 0 while it is
    /// empty or used as `bar.sync id` of the whole CTA.
    pub(crate) expected: u32,
    /// The warps (bit per warp of the CTA) that arrived at the named barrier in this
    /// generation.
    pub(crate) warps: u32,
}

impl Bar {
    /// Completes a whole-CTA barrier once every one of the CTA's `live` threads has
    /// arrived (a named barrier waits for its count, whoever exits).
    pub(crate) fn complete_if_all_arrived(&mut self, live: u32) {
        if self.expected == 0 && self.arrived > 0 && self.arrived >= live {
            self.arrived = 0;
            self.generation += 1;
        }
    }
}

impl Machine<'_> {
    /// `bar.sync id`: every live thread of the CTA arrives, whole warps at a time.
    pub(crate) fn bar_sync(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        id: usize,
        progressed: &mut bool,
    ) -> Result<Flow, InterpError> {
        if w.bar_wait.is_none() {
            if w.active != w.full {
                return Err(fault(
                    self.prog,
                    &self.cfg,
                    w,
                    FaultKind::DivergentBarrier,
                    None,
                    None,
                    format!(
                        "bar.sync {id} reached by lanes {} of the warp's {}: every thread of the \
                         CTA must arrive, and a warp arrives whole",
                        mask_str(w.active),
                        mask_str(w.full)
                    ),
                ));
            }
            for l in lanes_of(w.active) {
                self.publish(cl, w, l);
            }
            let cta = &mut cl.ctas[w.cta];
            let bar = &mut cta.bars[id];
            if bar.expected != 0 {
                let msg = format!(
                    "bar.sync {id} of the whole CTA while barrier {id} is in use as a named \
                     barrier of {} threads ({} arrived): both sides must use the same count",
                    bar.expected, bar.arrived
                );
                return Err(fault(
                    self.prog,
                    &self.cfg,
                    w,
                    FaultKind::DivergentBarrier,
                    None,
                    None,
                    msg,
                ));
            }
            bar.arrived += w.full.count_ones();
            let before = bar.generation;
            w.bar_wait = Some((id, before));
            *progressed = true;
            bar.complete_if_all_arrived(cta.live_threads);
            self.race_bar_arrive(cl, w, id, before);
        }
        let (id, generation) = w.bar_wait.expect("arrived");
        if cl.ctas[w.cta].bars[id].generation > generation {
            w.bar_wait = None;
            self.race_bar_pass(cl, w, id, generation);
            Ok(Flow::Next)
        } else {
            Ok(Flow::Block)
        }
    }

    /// `bar.sync id, threads` (`wait`) / `bar.arrive id, threads`: a barrier between
    /// `threads` threads (whole warps) of the CTA; it completes when that many arrived,
    /// and only the waiting side blocks.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn named_bar(
        &mut self,
        cl: &mut Cluster,
        w: &mut Warp,
        id: usize,
        threads: u32,
        wait: bool,
        progressed: &mut bool,
    ) -> Result<Flow, InterpError> {
        if w.bar_wait.is_none() {
            let what = if wait { "bar.sync" } else { "bar.arrive" };
            let bad = |kind, msg: String| fault(self.prog, &self.cfg, w, kind, None, None, msg);
            if w.active != w.full {
                return Err(bad(
                    FaultKind::DivergentBarrier,
                    format!(
                        "{what} {id}, {threads} reached by lanes {} of the warp's {}: a warp \
                         arrives whole",
                        mask_str(w.active),
                        mask_str(w.full)
                    ),
                ));
            }
            let cta_threads = self.cfg.nwarps * 32;
            if threads == 0 || threads % 32 != 0 || threads > cta_threads {
                return Err(bad(
                    FaultKind::DivergentBarrier,
                    format!(
                        "{what} {id}, {threads}: the count is a positive multiple of 32 (whole \
                         warps), at most the CTA's {cta_threads}"
                    ),
                ));
            }
            let bar = &cl.ctas[w.cta].bars[id];
            if bar.arrived > 0 && bar.expected != threads {
                let other = if bar.expected == 0 {
                    format!("bar.sync {id} of the whole CTA")
                } else {
                    format!("a count of {}", bar.expected)
                };
                return Err(bad(
                    FaultKind::DivergentBarrier,
                    format!(
                        "{what} {id}, {threads} while {} thread(s) arrived at barrier {id} with \
                         {other}: every participant gives the same count",
                        bar.arrived
                    ),
                ));
            }
            if bar.warps >> w.id & 1 != 0 {
                return Err(bad(
                    FaultKind::DivergentBarrier,
                    format!(
                        "{what} {id}, {threads}: warp {} arrives a second time before the \
                         barrier completed ({} of {threads} threads arrived)",
                        w.id, bar.arrived
                    ),
                ));
            }
            for l in lanes_of(w.active) {
                self.publish(cl, w, l);
            }
            let bar = &mut cl.ctas[w.cta].bars[id];
            // The hardware counts a warp as 32 threads, whatever lanes exist.
            bar.arrived += 32;
            bar.expected = threads;
            bar.warps |= 1 << w.id;
            *progressed = true;
            let generation = bar.generation;
            if bar.arrived == threads {
                *bar = Bar {
                    generation: generation + 1,
                    ..Bar::default()
                };
            }
            self.race_bar_arrive(cl, w, id, generation);
            if !wait {
                return Ok(Flow::Next);
            }
            w.bar_wait = Some((id, generation));
        }
        let (id, generation) = w.bar_wait.expect("arrived");
        if cl.ctas[w.cta].bars[id].generation > generation {
            w.bar_wait = None;
            self.race_bar_pass(cl, w, id, generation);
            Ok(Flow::Next)
        } else {
            Ok(Flow::Block)
        }
    }

    /// What a warp blocked at barrier `id` waits for.
    pub(crate) fn describe_bar(&self, cl: &Cluster, w: &Warp, id: usize) -> String {
        let cta = &cl.ctas[w.cta];
        let bar = &cta.bars[id];
        if bar.expected == 0 {
            return format!(
                "barrier {id}: {} of {} live threads of the CTA arrived",
                bar.arrived, cta.live_threads
            );
        }
        let warps: Vec<String> = (0..32)
            .filter(|i| bar.warps >> i & 1 != 0)
            .map(|i: u32| i.to_string())
            .collect();
        format!(
            "named barrier {id}: {} of {} threads arrived (warps [{}])",
            bar.arrived,
            bar.expected,
            warps.join(", ")
        )
    }

    pub(crate) fn complete_cluster_barrier(cl: &mut Cluster) {
        if cl.cbar_arrived > 0 && cl.cbar_arrived >= cl.live_threads() {
            cl.cbar_arrived = 0;
            if let Some(races) = cl.races.as_mut() {
                races.cluster_complete(cl.cbar_phase);
            }
            cl.cbar_phase += 1;
        }
    }
}
