//! CTA barriers: `bar.sync id` of the whole CTA and named barriers of a subset of its
//! warps (ids 0..16 shared between them), and the cluster barrier.

use super::error::{FaultKind, InterpError};
use super::machine::{Cluster, Flow, Machine, Warp, fault, lanes_of, mask_str};

#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Bar {
    pub(crate) arrived: u32,
    pub(crate) generation: u64,
}

impl Bar {
    /// Completes the barrier once every one of the CTA's `live` threads has arrived.
    pub(crate) fn complete_if_all_arrived(&mut self, live: u32) {
        if self.arrived > 0 && self.arrived >= live {
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
            bar.arrived += w.full.count_ones();
            w.bar_wait = Some((id, bar.generation));
            *progressed = true;
            bar.complete_if_all_arrived(cta.live_threads);
        }
        let (id, generation) = w.bar_wait.expect("arrived");
        if cl.ctas[w.cta].bars[id].generation > generation {
            w.bar_wait = None;
            Ok(Flow::Next)
        } else {
            Ok(Flow::Block)
        }
    }

    pub(crate) fn complete_cluster_barrier(cl: &mut Cluster) {
        if cl.cbar_arrived > 0 && cl.cbar_arrived >= cl.live_threads() {
            cl.cbar_arrived = 0;
            cl.cbar_phase += 1;
        }
    }
}
