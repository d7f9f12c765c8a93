//! The machine: clusters, CTAs, warps and the scheduler, and the meaning of every compiled
//! op in one `match` ([`Machine::run_warp`]); tcgen05 and wgmma live in their own files.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::alu::{self, Bin, FULL};
use super::banks::{self, SharedAccess};
use super::barriers::Bar;
use super::compile::{Ins, NONE, Program, Slot};
use super::copy::{BulkGroups, CpGroups};
use super::cvt;
use super::debug::{Snapshot, SnapshotData, SnapshotRequest, SnapshotWhat, StagePoint, TraceEntry};
use super::error::{BlockedWarp, CtaId, Deadlock, Fault, FaultKind, InterpError, Site};
use super::mbarrier::Mbar;
use super::memory::{Memory, Smem, Tmem};
use super::proxy::{Landed, Proxy};
use super::race::Races;
use super::roles::Budget;
use super::{Launch, MAX_SMEM_BYTES, Options, Progress, RunStats};
use crate::ir::{ShflMode, SpecialReg};

/// Shared::cluster addresses of rank r are `(r + 1) << CLUSTER_SHIFT | offset`.
pub(crate) const CLUSTER_SHIFT: u32 = 24;

/// The launch, resolved and checked.
pub(crate) struct Config {
    pub(crate) grid: [u32; 3],
    pub(crate) cluster: [u32; 3],
    pub(crate) ctas_per_cluster: u32,
    pub(crate) smem: u32,
    pub(crate) block: [u32; 3],
    pub(crate) nthreads: u32,
    pub(crate) nwarps: u32,
}

impl Config {
    fn resolve(prog: &Program, launch: &Launch) -> Result<Config, InterpError> {
        let k = &prog.kernel;
        let err = |message: String| InterpError::Launch {
            kernel: k.name.clone(),
            message,
        };
        let block = k.launch.threads;
        let nthreads = k.threads_per_cta();
        if nthreads == 0 || nthreads > 1024 {
            return Err(err(format!("{nthreads} threads per CTA (1..=1024)")));
        }
        if launch.grid.contains(&0) {
            return Err(err(format!(
                "grid {:?} has an empty dimension",
                launch.grid
            )));
        }
        let cluster = match (launch.cluster, k.launch.cluster) {
            (Some(c), Some(fixed)) if c != fixed => {
                return Err(err(format!(
                    "cluster {c:?} but the kernel fixes its cluster to {fixed:?}"
                )));
            }
            (Some(c), _) => c,
            (None, Some(fixed)) => fixed,
            (None, None) => [1, 1, 1],
        };
        for d in 0..3 {
            if cluster[d] == 0 || launch.grid[d] % cluster[d] != 0 {
                return Err(err(format!(
                    "cluster {cluster:?} does not divide grid {:?}",
                    launch.grid
                )));
            }
        }
        let ctas_per_cluster: u32 = cluster.iter().product();
        if ctas_per_cluster > 16 {
            return Err(err(format!(
                "cluster of {ctas_per_cluster} CTAs: at most 16 (the non-portable maximum)"
            )));
        }
        let smem = launch.smem_bytes.unwrap_or(k.smem_bytes);
        if smem < k.smem_bytes {
            return Err(err(format!(
                "{smem} bytes of dynamic shared memory, but the kernel uses {}",
                k.smem_bytes
            )));
        }
        if smem > MAX_SMEM_BYTES {
            return Err(err(format!(
                "{smem} bytes of dynamic shared memory (at most {MAX_SMEM_BYTES})"
            )));
        }
        Ok(Config {
            grid: launch.grid,
            cluster,
            ctas_per_cluster,
            smem,
            block,
            nthreads,
            nwarps: nthreads.div_ceil(32),
        })
    }

    fn tid(&self, t: u32) -> [u32; 3] {
        let [x, y, _] = self.block;
        [t % x, (t / x) % y, t / (x * y)]
    }
}

/// A reconvergence-stack entry: an `If` that split the warp, or a loop.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// The pc of the `If` or `LoopBegin` that pushed it.
    tag: u32,
    saved: u32,
    /// Lanes still to run the else side (0 once it runs).
    else_mask: u32,
}

/// One warp: a coroutine over the compiled code.
#[derive(Default)]
pub(crate) struct Warp {
    pub(crate) cta: usize,
    pub(crate) cta_id: Option<CtaId>,
    pub(crate) id: u32,
    pub(crate) pc: u32,
    pub(crate) active: u32,
    /// Lanes that exist (all but the tail of a CTA whose size is not a multiple of 32).
    pub(crate) full: u32,
    stack: Vec<Frame>,
    pub(crate) regs: Vec<u64>,
    pub(crate) exited: bool,
    /// `bar.sync` arrival: barrier id and generation.
    pub(crate) bar_wait: Option<(usize, u64)>,
    /// `barrier.cluster.arrive` done in this phase.
    pub(crate) cluster_arrived: Option<u64>,
    /// Warpgroup rendezvous generation being waited for.
    pub(crate) wg_wait: Option<u64>,
    /// `setmaxnreg` rendezvous generation being waited for.
    pub(crate) nreg_wait: Option<u64>,
    /// Per slot: outstanding asynchronous writes (tcgen05.ld, wgmma) not yet waited for.
    pub(crate) pending: Vec<u16>,
    pub(crate) npending: u32,
    pub(crate) tc_pending: Vec<Slot>,
    /// The first `tcgen05.st` not yet followed by `tcgen05.wait::st`.
    pub(crate) tc_unwaited_st: Option<u32>,
    pub(crate) wg_uncommitted: Vec<Slot>,
    pub(crate) wg_groups: VecDeque<Vec<Slot>>,
    /// Per slot: lanes holding a value loaded from never-written tensor memory, and the
    /// cell it came from (for the message).
    poison: Vec<u32>,
    poison_from: HashMap<Slot, (u32, u32)>,
    stage: Option<u32>,
    traced_lane: Option<usize>,
}

impl Warp {
    pub(crate) fn add_pending(&mut self, s: Slot) {
        self.pending[s as usize] += 1;
        self.npending += 1;
    }

    pub(crate) fn poison(&mut self, s: Slot, lane: usize, cell: (u32, u32)) {
        self.poison[s as usize] |= 1 << lane;
        self.poison_from.entry(s).or_insert(cell);
    }

    pub(crate) fn retire_pending(&mut self, s: Slot) {
        let p = &mut self.pending[s as usize];
        if *p > 0 {
            *p -= 1;
            self.npending -= 1;
        }
    }
}

/// A warpgroup rendezvous for `wgmma.mma_async`.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Rendezvous {
    pub(crate) arrived: u8,
    pub(crate) pc: u32,
    pub(crate) generation: u64,
}

pub(crate) struct Cta {
    pub(crate) id: CtaId,
    pub(crate) smem: Smem,
    pub(crate) tmem: Tmem,
    pub(crate) mbars: HashMap<u32, Mbar>,
    pub(crate) bars: [Bar; 16],
    pub(crate) live_threads: u32,
    pub(crate) groups: Vec<Rendezvous>,
    pub(crate) proxy: Option<Proxy>,
    /// Which asynchronous copy last wrote each word (made by the first copy).
    pub(crate) landed: Option<Landed>,
    /// Per warpgroup: its register budget (`setmaxnreg`).
    pub(crate) budgets: Vec<Budget>,
}

pub(crate) struct Cluster {
    pub(crate) ctas: Vec<Cta>,
    pub(crate) warps: Vec<Warp>,
    pub(crate) cbar_arrived: u32,
    pub(crate) cbar_phase: u64,
    /// Per cluster thread: `fence.proxy.async` executed so far, and that count as of the
    /// thread's last barrier arrival.
    pub(crate) fences: Vec<u32>,
    pub(crate) published: Vec<u32>,
    /// (cluster thread, CTA, mbarrier offset) -> completed phases of that mbarrier the
    /// thread has seen through a successful wait.
    pub(crate) observed: HashMap<(u32, u32, u32), u64>,
    /// Per cluster thread with copies in flight: its `cp.async` groups and bulk stores.
    pub(crate) cp_async: HashMap<u32, CpGroups>,
    pub(crate) bulk: HashMap<u32, BulkGroups>,
    /// With [`Options::race_check`]: the happens-before bookkeeping of shared memory.
    pub(crate) races: Option<Races>,
}

impl Cluster {
    pub(crate) fn live_threads(&self) -> u32 {
        self.ctas.iter().map(|c| c.live_threads).sum()
    }
}

pub(crate) struct Machine<'a> {
    pub(crate) prog: &'a Program,
    pub(crate) mem: &'a mut Memory,
    pub(crate) params: Vec<Vec<u8>>,
    pub(crate) cfg: Config,
    pub(crate) opts: &'a Options,
    /// Registers per thread at kernel entry, when the kernel fixes them.
    pub(crate) entry_regs: Option<u32>,
    lane_insts: u64,
    warp_insts: u64,
    /// `warp_insts` when the current cluster started (the watchdog budget is per cluster).
    cluster_start: u64,
    trace: Vec<TraceEntry>,
    snapshots: Vec<Snapshot>,
    /// Per snapshot request: the stage ids it names, and whether it was taken.
    snap_stages: Vec<Vec<u32>>,
    snap_done: Vec<bool>,
    /// Per instruction, with [`Options::shared_wavefronts`]: its shared-memory wavefronts.
    pub(crate) banks: Option<Vec<banks::Counts>>,
}

pub(crate) fn run(
    prog: &Program,
    mem: &mut Memory,
    params: Vec<Vec<u8>>,
    launch: &Launch,
    opts: &Options,
) -> Result<RunStats, InterpError> {
    let start = Instant::now();
    let cfg = Config::resolve(prog, launch)?;
    let snap_stages = opts
        .snapshots
        .iter()
        .map(|r| {
            let ids: Vec<u32> = (0..prog.kernel.stages.len() as u32)
                .filter(|&i| prog.kernel.stages[i as usize] == r.stage)
                .collect();
            if ids.is_empty() {
                Err(InterpError::Launch {
                    kernel: prog.kernel.name.clone(),
                    message: format!(
                        "a snapshot names stage `{}`, which the kernel lacks",
                        r.stage
                    ),
                })
            } else {
                Ok(ids)
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut m = Machine {
        prog,
        mem,
        params,
        snap_done: vec![false; opts.snapshots.len()],
        snap_stages,
        cfg,
        opts,
        entry_regs: prog.kernel.launch.entry_registers(),
        lane_insts: 0,
        warp_insts: 0,
        cluster_start: 0,
        trace: Vec::new(),
        snapshots: Vec::new(),
        banks: opts
            .shared_wavefronts
            .then(|| vec![banks::Counts::default(); prog.code.len()]),
    };
    let [gx, gy, gz] = m.cfg.grid;
    let [cx, cy, cz] = m.cfg.cluster;
    let clusters_total = gx.div_ceil(cx) * gy.div_ceil(cy) * gz.div_ceil(cz);
    let mut origins: Vec<[u32; 3]> = (0..gz)
        .step_by(cz as usize)
        .flat_map(|z| {
            (0..gy)
                .step_by(cy as usize)
                .flat_map(move |y| (0..gx).step_by(cx as usize).map(move |x| [x, y, z]))
        })
        .collect();
    if opts.clusters_last_first {
        origins.reverse();
    }
    let mut clusters = 0;
    for origin in origins {
        m.run_cluster(origin)?;
        clusters += 1;
        if let Some(report) = m.opts.progress {
            report(&Progress {
                clusters_done: clusters,
                clusters_total,
                elapsed: start.elapsed(),
            });
        }
    }
    Ok(RunStats {
        lane_instructions: m.lane_insts,
        warp_instructions: m.warp_insts,
        wall: start.elapsed(),
        clusters,
        ctas: clusters * m.cfg.ctas_per_cluster,
        register_bytes_per_warp: prog.warp_register_bytes(),
        trace: m.trace,
        snapshots: m.snapshots,
        shared_accesses: shared_accesses(prog, m.banks.as_deref()),
    })
}

/// A fault at the warp's current op.
pub(crate) fn fault(
    prog: &Program,
    cfg: &Config,
    w: &Warp,
    kind: FaultKind,
    lane: Option<usize>,
    address: Option<u64>,
    message: String,
) -> InterpError {
    let thread = lane.map(|l| w.id * 32 + l as u32);
    InterpError::Fault(Box::new(Fault {
        kind,
        site: site(prog, w),
        thread,
        tid: thread.map(|t| cfg.tid(t)),
        address,
        message,
    }))
}

/// The counted `ld.shared` / `st.shared` instructions that ran, in program order.
fn shared_accesses(prog: &Program, counts: Option<&[banks::Counts]>) -> Vec<SharedAccess> {
    let Some(counts) = counts else {
        return Vec::new();
    };
    counts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.executions > 0)
        .map(|(pc, c)| {
            let meta = &prog.meta[pc];
            SharedAccess {
                op: meta.op,
                stage: prog.stage_title(pc),
                loc: meta.loc,
                bytes: c.bytes,
                executions: c.executions,
                wavefronts: c.wavefronts,
                ideal: c.ideal,
            }
        })
        .collect()
}

fn site(prog: &Program, w: &Warp) -> Site {
    let meta = &prog.meta[w.pc as usize];
    Site {
        op: meta.op,
        stage: prog.stage_title(w.pc as usize),
        loc: meta.loc,
        cta: w.cta_id.expect("a warp belongs to a CTA"),
        warp: w.id,
    }
}

/// Lanes of `m` whose predicate `p` holds (all of `m` when there is no predicate).
#[inline]
pub(crate) fn pred_mask(regs: &[u64], m: u32, p: Slot) -> u32 {
    if p == NONE {
        return m;
    }
    let p = p as usize * 32;
    let mut out = 0;
    for l in 0..32 {
        out |= ((regs[p + l] & 1) as u32) << l;
    }
    out & m
}

#[inline]
pub(crate) fn reg(regs: &[u64], s: Slot, lane: usize) -> u64 {
    regs[s as usize * 32 + lane]
}

/// The lanes of `m`, lowest first.
pub(crate) fn lanes_of(m: u32) -> impl Iterator<Item = usize> {
    let mut mm = m;
    std::iter::from_fn(move || {
        (mm != 0).then(|| {
            let l = mm.trailing_zeros() as usize;
            mm &= mm - 1;
            l
        })
    })
}

pub(crate) fn mask_str(m: u32) -> String {
    format!("{m:#010x}")
}

/// Where a shared::cluster address points: the CTA index in the cluster and the
/// shared::cta address there.
pub(crate) fn resolve_cluster(own: usize, ncta: usize, addr: u32) -> Option<(usize, u64)> {
    let hi = addr >> CLUSTER_SHIFT;
    if hi == 0 {
        return Some((own, addr as u64));
    }
    let rank = (hi - 1) as usize;
    (rank < ncta).then_some((rank, (addr & ((1 << CLUSTER_SHIFT) - 1)) as u64))
}

/// What an op tells the warp loop.
pub(crate) enum Flow {
    Next,
    Block,
}

impl<'a> Machine<'a> {
    fn new_cluster(&self, origin: [u32; 3]) -> Cluster {
        let cfg = &self.cfg;
        let [cx, cy, _] = cfg.cluster;
        let ncta = cfg.ctas_per_cluster as usize;
        let nslots = self.prog.nslots as usize;
        let mut ctas = Vec::with_capacity(ncta);
        let mut warps = Vec::with_capacity(ncta * cfg.nwarps as usize);
        for rank in 0..ncta as u32 {
            let pos = [rank % cx, (rank / cx) % cy, rank / (cx * cy)];
            let id = CtaId {
                block: [origin[0] + pos[0], origin[1] + pos[1], origin[2] + pos[2]],
                rank,
            };
            let smem_len = cfg.smem as usize;
            ctas.push(Cta {
                id,
                smem: Smem::new(smem_len),
                tmem: Tmem::new(),
                mbars: HashMap::new(),
                bars: [Bar::default(); 16],
                live_threads: cfg.nthreads,
                groups: vec![Rendezvous::default(); cfg.nwarps.div_ceil(4) as usize],
                proxy: self.opts.async_proxy_check.then(|| Proxy {
                    writer: vec![0; smem_len],
                    epoch: vec![0; smem_len],
                    busy: vec![0; smem_len.div_ceil(16)],
                    flights: Vec::new(),
                }),
                landed: None,
                budgets: vec![
                    Budget {
                        regs: self.entry_regs.unwrap_or(0),
                        ..Budget::default()
                    };
                    cfg.nwarps.div_ceil(4) as usize
                ],
            });
            for wid in 0..cfg.nwarps {
                let lanes = (cfg.nthreads - wid * 32).min(32);
                let full = if lanes == 32 { FULL } else { (1 << lanes) - 1 };
                let mut regs = vec![0u64; nslots * 32];
                for &(s, v) in &self.prog.consts {
                    regs[s as usize * 32..s as usize * 32 + 32].fill(v);
                }
                let traced_lane = self.opts.trace.as_ref().and_then(|t| {
                    (t.block == id.block && t.thread / 32 == wid)
                        .then_some((t.thread % 32) as usize)
                });
                warps.push(Warp {
                    cta: rank as usize,
                    cta_id: Some(id),
                    id: wid,
                    active: full,
                    full,
                    regs,
                    pending: vec![0; nslots],
                    poison: vec![0; nslots],
                    traced_lane,
                    ..Warp::default()
                });
            }
        }
        let nthreads = ncta * cfg.nthreads as usize;
        Cluster {
            ctas,
            warps,
            cbar_arrived: 0,
            cbar_phase: 0,
            fences: vec![0; nthreads],
            published: vec![0; nthreads],
            observed: HashMap::new(),
            cp_async: HashMap::new(),
            bulk: HashMap::new(),
            races: self
                .opts
                .race_check
                .then(|| Races::new(ncta, cfg.nwarps as usize, cfg.smem as usize)),
        }
    }

    fn run_cluster(&mut self, origin: [u32; 3]) -> Result<(), InterpError> {
        let mut cl = self.new_cluster(origin);
        self.cluster_start = self.warp_insts;
        loop {
            let mut progress = false;
            let mut all_exited = true;
            for i in 0..cl.warps.len() {
                if cl.warps[i].exited {
                    continue;
                }
                let mut w = std::mem::take(&mut cl.warps[i]);
                let r = self.run_warp(&mut cl, &mut w);
                cl.warps[i] = w;
                progress |= r?;
                all_exited &= cl.warps[i].exited;
            }
            if all_exited {
                return Ok(());
            }
            if !progress {
                return Err(self.deadlock(&cl));
            }
        }
    }

    fn deadlock(&self, cl: &Cluster) -> InterpError {
        let blocked = cl
            .warps
            .iter()
            .filter(|w| !w.exited)
            .map(|w| BlockedWarp {
                site: site(self.prog, w),
                waiting_for: self.describe_wait(cl, w),
            })
            .collect();
        let exited = cl
            .ctas
            .iter()
            .enumerate()
            .filter_map(|(c, cta)| {
                let ids: Vec<String> = cl
                    .warps
                    .iter()
                    .filter(|w| w.cta == c && w.exited)
                    .map(|w| w.id.to_string())
                    .collect();
                (!ids.is_empty()).then(|| format!("{}: warps [{}]", cta.id, ids.join(", ")))
            })
            .collect();
        InterpError::Deadlock(Box::new(Deadlock {
            kernel: self.prog.kernel.name.clone(),
            blocked,
            exited,
        }))
    }

    /// What the blocked warp `w` waits for, with the state of that object.
    fn describe_wait(&self, cl: &Cluster, w: &Warp) -> String {
        let cta = &cl.ctas[w.cta];
        match &self.prog.code[w.pc as usize] {
            Ins::BarSync { id } | Ins::NamedBar { id, .. } => {
                self.describe_bar(cl, w, *id as usize)
            }
            Ins::SetMaxNreg { regs, .. } => self.describe_nreg(cl, w, *regs),
            Ins::MbarWait { bar, parity } => {
                let Some(l) = lanes_of(w.active).next() else {
                    return "an mbarrier (no active lane)".into();
                };
                let addr = reg(&w.regs, *bar, l) as u32;
                let p = reg(&w.regs, *parity, l) & 1;
                match cta
                    .smem
                    .offset(addr as u64, 8)
                    .ok()
                    .and_then(|o| cta.mbars.get(&(o as u32)))
                {
                    Some(mb) => format!(
                        "the phase of parity {p} of the mbarrier at shared {addr:#x} to complete \
                         (it is in phase {} with {} of {} arrivals pending and tx-count {})",
                        mb.phase, mb.pending, mb.count, mb.tx
                    ),
                    None => format!("the mbarrier at shared {addr:#x} (not initialised)"),
                }
            }
            Ins::ClusterWait => format!(
                "the cluster barrier: {} of {} live threads of the cluster arrived in phase {}{}",
                cl.cbar_arrived,
                cl.live_threads(),
                cl.cbar_phase,
                if w.cluster_arrived.is_none() {
                    "; this warp never arrived (barrier.cluster.wait without \
                     barrier.cluster.arrive)"
                } else {
                    ""
                }
            ),
            Ins::WgMma(_) => {
                let g = &cta.groups[(w.id / 4) as usize];
                let missing: Vec<String> = (0..4)
                    .filter(|i| g.arrived >> i & 1 == 0)
                    .map(|i| (4 * (w.id / 4) + i).to_string())
                    .collect();
                format!(
                    "the other warps of warpgroup {} at this wgmma.mma_async (missing warps [{}])",
                    w.id / 4,
                    missing.join(", ")
                )
            }
            Ins::TcAlloc { ncols, .. } => {
                let held: Vec<String> = cta
                    .tmem
                    .allocs
                    .iter()
                    .map(|a| format!("{} columns at {} by warp {}", a.ncols, a.col, a.warp))
                    .collect();
                format!(
                    "{ncols} free TMEM columns (held: {})",
                    if held.is_empty() {
                        "none".into()
                    } else {
                        held.join(", ")
                    }
                )
            }
            other => format!("nothing known ({other:?})"),
        }
    }

    /// Runs `w` until it blocks or exits; whether it changed any state.
    fn run_warp(&mut self, cl: &mut Cluster, w: &mut Warp) -> Result<bool, InterpError> {
        let prog = self.prog;
        let mut progressed = false;
        loop {
            let pc = w.pc as usize;
            let ins = &prog.code[pc];
            if w.npending != 0 || !w.poison_from.is_empty() {
                self.check_pending(w, pc)?;
            }
            let m = w.active;
            match ins {
                Ins::Mov { d, a } => alu::map1(&mut w.regs, m, *d, *a, |x| x),
                Ins::Un { op, d, a } => alu::unary(*op, &mut w.regs, m, *d, *a),
                Ins::Bin { op, d, a, b } => {
                    alu::binary(*op, &mut w.regs, m, *d, *a, *b).map_err(|lane| {
                        fault(
                            prog,
                            &self.cfg,
                            w,
                            FaultKind::DivideByZero,
                            Some(lane),
                            None,
                            format!(
                                "{} by zero (dividend {:#x}); PTX leaves the result unspecified",
                                if matches!(
                                    op,
                                    Bin::RemS32 | Bin::RemU32 | Bin::RemS64 | Bin::RemU64
                                ) {
                                    "remainder"
                                } else {
                                    "division"
                                },
                                reg(&w.regs, *a, lane)
                            ),
                        )
                    })?
                }
                Ins::Tern { op, d, abc } => alu::ternary(*op, &mut w.regs, m, *d, *abc),
                Ins::Setp { cmp, ty, d, a, b } => {
                    let (cmp, ty) = (*cmp, *ty);
                    alu::map2(&mut w.regs, m, *d, *a, *b, |x, y| {
                        alu::compare(cmp, ty, x, y) as u64
                    })
                }
                Ins::Selp { d, a, b, p } => {
                    alu::map3(&mut w.regs, m, *d, [*a, *b, *p], |x, y, c| {
                        if c & 1 != 0 { x } else { y }
                    })
                }
                Ins::Convert {
                    from,
                    to,
                    rnd,
                    d,
                    a,
                } => {
                    let (from, to, rnd) = (*from, *to, *rnd);
                    alu::map1(&mut w.regs, m, *d, *a, |x| alu::convert(from, to, rnd, x))
                }
                Ins::Pack { half, d, lo, hi } => {
                    let (half, mask) = (*half, (1u64 << *half) - 1);
                    alu::map2(&mut w.regs, m, *d, *lo, *hi, |l, h| {
                        (h & mask) << half | (l & mask)
                    })
                }
                Ins::Unpack { half, lo, hi, a } => {
                    let (half, mask) = (*half, (1u64 << *half) - 1);
                    let src = *a;
                    alu::map1(&mut w.regs, m, *hi, src, |x| (x >> half) & mask);
                    alu::map1(&mut w.regs, m, *lo, src, |x| x & mask);
                }
                Ins::Prmt { d, a, b, c } => {
                    alu::map3(&mut w.regs, m, *d, [*a, *b, *c], |x, y, z| {
                        alu::prmt(x as u32, y as u32, z as u32) as u64
                    })
                }
                Ins::Packed { op, d, abc } => {
                    let op = *op;
                    alu::map3(&mut w.regs, m, *d, *abc, |x, y, z| cvt::packed(op, x, y, z))
                }
                Ins::LdParam {
                    d,
                    param,
                    offset,
                    bytes,
                } => {
                    let p = &self.params[*param as usize];
                    let mut b = [0u8; 8];
                    let (o, n) = (*offset as usize, *bytes as usize);
                    b[..n].copy_from_slice(&p[o..o + n]);
                    let v = u64::from_le_bytes(b);
                    alu::map1(&mut w.regs, m, *d, *d, |_| v);
                }
                Ins::Ld {
                    space,
                    ty,
                    n,
                    d,
                    addr,
                    offset,
                    pred,
                } => self.load(cl, w, *space, *ty, *n, d, *addr, *offset, *pred)?,
                Ins::St {
                    space,
                    ty,
                    n,
                    s,
                    addr,
                    offset,
                    pred,
                } => self.store(cl, w, *space, *ty, *n, s, *addr, *offset, *pred)?,
                Ins::AtomAdd { d, addr, offset, s } => {
                    self.atomic_add(w, *d, *addr, *offset, *s)?
                }
                Ins::Special { d, reg: sr } => {
                    let v = self.special(cl, w, *sr);
                    let base = *d as usize * 32;
                    for l in lanes_of(m) {
                        w.regs[base + l] = v[l] as u64;
                    }
                }
                Ins::BarSync { id } => {
                    if let Flow::Block = self.bar_sync(cl, w, *id as usize, &mut progressed)? {
                        return Ok(progressed);
                    }
                }
                Ins::NamedBar { id, threads, wait } => {
                    if let Flow::Block =
                        self.named_bar(cl, w, *id as usize, *threads, *wait, &mut progressed)?
                    {
                        return Ok(progressed);
                    }
                }
                Ins::SetMaxNreg { regs, increase } => {
                    if let Flow::Block =
                        self.set_max_nreg(cl, w, *regs, *increase, &mut progressed)?
                    {
                        return Ok(progressed);
                    }
                }
                Ins::CpAsync {
                    dst,
                    src,
                    bytes,
                    src_bytes,
                } => self.cp_async(cl, w, [*dst, *src, *src_bytes], *bytes)?,
                Ins::CpAsyncCommit => self.cp_async_commit(cl, w),
                Ins::CpAsyncWait { n } => self.cp_async_wait(cl, w, m, *n as usize)?,
                Ins::BulkLoad {
                    dst,
                    src,
                    bytes,
                    bar,
                } => self.bulk_load(cl, w, [*dst, *src, *bytes, *bar])?,
                Ins::StoreAsync { dst, n, s, bar } => {
                    self.store_async(cl, w, [*dst, *bar], &s[..*n as usize])?
                }
                Ins::TensorLoad {
                    dst,
                    map,
                    coords,
                    rank,
                    bar,
                    mask,
                } => self.tensor_load(cl, w, [*dst, *map, *bar, *mask], *coords, *rank)?,
                Ins::TensorStore {
                    src,
                    map,
                    coords,
                    rank,
                } => self.tensor_store(cl, w, [*src, *map], *coords, *rank)?,
                Ins::BulkCommit => self.bulk_commit(cl, w),
                Ins::BulkWait { n } => self.bulk_wait(cl, w, *n),
                Ins::PrefetchMap { map } => self.prefetch_map(w, *map)?,
                Ins::BulkPrefetch { src, bytes } => self.bulk_prefetch(w, [*src, *bytes])?,
                Ins::MbarExpectTx { bar, tx } => {
                    for l in lanes_of(m) {
                        let addr = reg(&w.regs, *bar, l) as u32;
                        let tx = reg(&w.regs, *tx, l) as u32;
                        let (c, off) = self.mbar_target(cl, w, l, addr, false)?;
                        self.mbar_tx(cl, w, Some(l), c, off, tx as i64, "expect_tx")?;
                    }
                }
                Ins::Shfl { mode, d, a, b, c } => {
                    self.require_full_warp(w, "shfl.sync with member mask 0xffffffff")?;
                    let (src, bv) = (alu::lanes(&w.regs, *a), alu::lanes(&w.regs, *b));
                    let (cval, seg) = (c & 0x1f, (c >> 8) & 0x1f);
                    let base = *d as usize * 32;
                    let mut out = alu::lanes(&w.regs, *d);
                    for lane in 0..32u32 {
                        // PTX §9.7.9.6: segment bounds from c, source lane per mode.
                        let bval = (bv[lane as usize] as u32) & 0x1f;
                        let max_lane = (lane & seg) | (cval & !seg);
                        let min_lane = lane & seg;
                        let (j, ok) = match mode {
                            ShflMode::Up => {
                                let j = lane as i32 - bval as i32;
                                (j, j >= max_lane as i32)
                            }
                            ShflMode::Down => {
                                let j = (lane + bval) as i32;
                                (j, j <= max_lane as i32)
                            }
                            ShflMode::Bfly => {
                                let j = (lane ^ bval) as i32;
                                (j, j <= max_lane as i32)
                            }
                            ShflMode::Idx => {
                                let j = (min_lane | (bval & !seg)) as i32;
                                (j, j <= max_lane as i32)
                            }
                        };
                        let j = if ok { j as usize } else { lane as usize };
                        if w.full >> lane & 1 == 0 {
                            continue;
                        }
                        if w.full >> j & 1 == 0 {
                            return Err(fault(
                                prog,
                                &self.cfg,
                                w,
                                FaultKind::Collective,
                                Some(lane as usize),
                                None,
                                format!(
                                    "shfl.sync reads lane {j}, past the end of the CTA (the \
                                     value is undefined)"
                                ),
                            ));
                        }
                        out[lane as usize] = src[j];
                    }
                    w.regs[base..base + 32].copy_from_slice(&out);
                }
                Ins::Ballot { d, p } => {
                    self.require_full_warp(w, "vote.sync.ballot with member mask 0xffffffff")?;
                    let v = pred_mask(&w.regs, m, *p) as u64;
                    alu::map1(&mut w.regs, m, *d, *d, |_| v);
                }
                Ins::Elect { d } => {
                    self.require_full_warp(w, "elect.sync with member mask 0xffffffff")?;
                    let leader = m.trailing_zeros();
                    let base = *d as usize * 32;
                    for l in lanes_of(m) {
                        w.regs[base + l] = (l as u32 == leader) as u64;
                    }
                }
                Ins::ProxyFence => {
                    for l in lanes_of(m) {
                        cl.fences[self.cluster_thread(w, l)] += 1;
                    }
                }
                Ins::Nop => {}
                Ins::MbarInit { bar, count } => self.mbar_init(cl, w, *bar, *count)?,
                Ins::MbarArrive { bar, tx, remote } => {
                    for l in lanes_of(m) {
                        let addr = reg(&w.regs, *bar, l) as u32;
                        let tx = if *tx == NONE {
                            0
                        } else {
                            reg(&w.regs, *tx, l) as u32
                        };
                        let (c, off) = self.mbar_target(cl, w, l, addr, *remote)?;
                        self.mbar_arrive(cl, w, l, c, off, tx as i64)?;
                        self.publish(cl, w, l);
                    }
                }
                Ins::MbarWait { bar, parity } => {
                    let mut done = true;
                    for l in lanes_of(m) {
                        let addr = reg(&w.regs, *bar, l) as u32;
                        let (c, off) = self.mbar_target(cl, w, l, addr, false)?;
                        let p = reg(&w.regs, *parity, l) & 1;
                        // try_wait.parity p succeeds once the phase of parity p completed,
                        // i.e. while the current phase has the other parity (PTX
                        // §9.7.13.15.16): a fresh barrier blocks wait(0) and passes wait(1).
                        done &= cl.ctas[c].mbars[&off].phase & 1 != p;
                    }
                    if !done {
                        return Ok(progressed);
                    }
                    if self.opts.async_proxy_check {
                        self.observe(cl, w, *bar, *parity);
                    }
                    self.race_mbar_pass(cl, w, *bar, *parity);
                }
                Ins::ClusterArrive => {
                    self.require_aligned(w, "barrier.cluster.arrive.aligned")?;
                    if w.cluster_arrived.is_some() {
                        return Err(fault(
                            prog,
                            &self.cfg,
                            w,
                            FaultKind::ClusterBarrier,
                            None,
                            None,
                            "a second barrier.cluster.arrive before the barrier completed (each \
                             thread arrives once per phase)"
                                .into(),
                        ));
                    }
                    w.cluster_arrived = Some(cl.cbar_phase);
                    cl.cbar_arrived += w.full.count_ones();
                    for l in lanes_of(m) {
                        self.publish(cl, w, l);
                    }
                    self.race_cluster_arrive(cl, w);
                    Self::complete_cluster_barrier(cl);
                }
                Ins::ClusterWait => {
                    self.require_aligned(w, "barrier.cluster.wait.aligned")?;
                    // Without its own arrival the phase cannot complete: the warp waits
                    // forever, as on the hardware, and the deadlock report says why.
                    let Some(phase) = w.cluster_arrived else {
                        return Ok(progressed);
                    };
                    if cl.cbar_phase <= phase {
                        return Ok(progressed);
                    }
                    w.cluster_arrived = None;
                    self.race_cluster_pass(cl, w, phase);
                }
                Ins::Mapa { d, a, rank } => {
                    let ncta = self.cfg.ctas_per_cluster;
                    for l in lanes_of(m) {
                        let addr = reg(&w.regs, *a, l) as u32;
                        let r = reg(&w.regs, *rank, l) as u32;
                        if r >= ncta || addr >> CLUSTER_SHIFT != 0 {
                            return Err(fault(
                                prog,
                                &self.cfg,
                                w,
                                FaultKind::OutOfBounds,
                                Some(l),
                                Some(addr as u64),
                                format!(
                                    "mapa of shared::cta address {addr:#x} to rank {r}: the \
                                     cluster has {ncta} CTA(s) and shared::cta addresses are \
                                     below {:#x}",
                                    1u32 << CLUSTER_SHIFT
                                ),
                            ));
                        }
                        w.regs[*d as usize * 32 + l] = ((r + 1) << CLUSTER_SHIFT | addr) as u64;
                    }
                }
                Ins::TcAlloc { dst, ncols } => {
                    if let Flow::Block = self.tc_alloc(cl, w, *dst, *ncols)? {
                        return Ok(progressed);
                    }
                }
                Ins::TcRelinquish => {
                    self.require_full_warp(w, "tcgen05.relinquish_alloc_permit.sync.aligned")?;
                    cl.ctas[w.cta].tmem.relinquished = true;
                }
                Ins::TcDealloc { taddr, ncols } => self.tc_dealloc(cl, w, *taddr, *ncols)?,
                Ins::TcMma {
                    d,
                    a,
                    b,
                    idesc,
                    acc,
                } => self.tc_mma(cl, w, [*d, *a, *b, *idesc, *acc])?,
                Ins::TcCommit { mbar } => self.tc_commit(cl, w, *mbar)?,
                Ins::TcLd { list, n, taddr } => self.tc_ld(cl, w, *list, *n, *taddr)?,
                Ins::TcWaitLd => {
                    for s in std::mem::take(&mut w.tc_pending) {
                        w.retire_pending(s);
                    }
                }
                Ins::TcSt { list, n, taddr } => self.tc_st(cl, w, *list, *n, *taddr)?,
                Ins::TcWaitSt => w.tc_unwaited_st = None,
                Ins::Matrix {
                    list,
                    n,
                    addr,
                    trans,
                    store,
                } => self.matrix(cl, w, *list, *n, *addr, *trans, *store)?,
                Ins::WgFence => self.require_full_warp(w, "wgmma.fence.sync.aligned")?,
                Ins::WgMma(op) => {
                    if let Flow::Block = self.wg_mma(cl, w, *op, &mut progressed)? {
                        return Ok(progressed);
                    }
                }
                Ins::WgCommit => {
                    self.require_full_warp(w, "wgmma.commit_group.sync.aligned")?;
                    let group = std::mem::take(&mut w.wg_uncommitted);
                    w.wg_groups.push_back(group);
                }
                Ins::WgWait { n } => {
                    self.require_full_warp(w, "wgmma.wait_group.sync.aligned")?;
                    while w.wg_groups.len() > *n as usize {
                        for s in w.wg_groups.pop_front().expect("non-empty") {
                            w.retire_pending(s);
                        }
                    }
                }
                Ins::If { c, else_pc } => {
                    let cm = pred_mask(&w.regs, m, *c);
                    let (t, e) = (m & cm, m & !cm);
                    if e == 0 {
                        w.pc += 1;
                    } else if t == 0 {
                        w.pc = *else_pc;
                    } else {
                        w.stack.push(Frame {
                            tag: pc as u32,
                            saved: m,
                            else_mask: e,
                        });
                        w.active = t;
                        w.pc += 1;
                    }
                    continue;
                }
                Ins::Else { if_pc, end_pc } => {
                    match w.stack.last_mut() {
                        Some(f) if f.tag == *if_pc && f.else_mask != 0 => {
                            w.active = f.else_mask;
                            f.else_mask = 0;
                            w.pc += 1;
                        }
                        _ => w.pc = *end_pc,
                    }
                    continue;
                }
                Ins::EndIf { if_pc } => {
                    if let Some(f) = w.stack.last()
                        && f.tag == *if_pc
                    {
                        w.active = f.saved;
                        w.stack.pop();
                    }
                    w.pc += 1;
                    continue;
                }
                Ins::LoopBegin => {
                    w.stack.push(Frame {
                        tag: pc as u32,
                        saved: m,
                        else_mask: 0,
                    });
                    w.pc += 1;
                    continue;
                }
                Ins::LoopTest { c, exit_pc } => {
                    let stay = pred_mask(&w.regs, m, *c);
                    if stay == 0 {
                        let f = w.stack.pop().expect("loop frame");
                        w.active = f.saved;
                        w.pc = *exit_pc;
                    } else {
                        w.active = stay;
                        w.pc += 1;
                    }
                    continue;
                }
                Ins::LoopEnd { head_pc } => {
                    w.pc = *head_pc;
                    self.tick(w, m)?;
                    continue;
                }
                Ins::Stage { id } => {
                    if !self.opts.snapshots.is_empty() {
                        if let Some(prev) = w.stage {
                            self.snapshot(cl, w, prev, StagePoint::End);
                        }
                        self.snapshot(cl, w, *id, StagePoint::Start);
                    }
                    w.stage = Some(*id);
                    w.pc += 1;
                    continue;
                }
                Ins::Exit => {
                    if !self.opts.snapshots.is_empty()
                        && let Some(prev) = w.stage
                    {
                        self.snapshot(cl, w, prev, StagePoint::End);
                    }
                    self.exit_warp(cl, w)?;
                    return Ok(true);
                }
            }
            progressed = true;
            if let Some(l) = w.traced_lane
                && m >> l & 1 != 0
            {
                self.record_trace(w, pc, l);
            }
            self.tick(w, m)?;
            w.pc += 1;
        }
    }

    /// Counts an executed instruction and enforces the instruction budget.
    #[inline]
    fn tick(&mut self, w: &Warp, m: u32) -> Result<(), InterpError> {
        self.warp_insts += 1;
        self.lane_insts += m.count_ones() as u64;
        if self.warp_insts - self.cluster_start > self.opts.max_warp_instructions {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Watchdog,
                None,
                None,
                format!(
                    "{} warp-instructions executed in this cluster \
                     (Options::max_warp_instructions); a runtime loop may never end",
                    self.opts.max_warp_instructions
                ),
            ));
        }
        Ok(())
    }

    /// Faults on a read of a register whose asynchronous producer has not been waited for;
    /// forgets pending writes to registers this op overwrites.
    fn check_pending(&self, w: &mut Warp, pc: usize) -> Result<(), InterpError> {
        let meta = &self.prog.meta[pc];
        let (at, nuse, ndef) = (meta.use_at as usize, meta.nuse as usize, meta.ndef as usize);
        // wgmma reads its own in-flight accumulators (a chain of MMAs into one accumulator
        // needs no wait in between) and re-runs while its warpgroup gathers.
        if matches!(self.prog.code[pc], Ins::WgMma(_)) {
            return Ok(());
        }
        {
            for &s in &self.prog.uses[at..at + nuse] {
                if s != NONE && w.pending[s as usize] != 0 {
                    let by = if w.tc_pending.contains(&s) {
                        "a tcgen05.ld not yet followed by tcgen05.wait::ld"
                    } else {
                        "a wgmma.mma_async whose group was not yet waited for with wgmma.wait_group"
                    };
                    return Err(fault(
                        self.prog,
                        &self.cfg,
                        w,
                        FaultKind::AsyncRegister,
                        None,
                        None,
                        format!("reads a register written by {by}"),
                    ));
                }
            }
        }
        if !w.poison_from.is_empty() {
            for &s in &self.prog.uses[at..at + nuse] {
                let bad = if s == NONE {
                    0
                } else {
                    w.poison[s as usize] & w.active
                };
                if bad != 0 {
                    let lane = bad.trailing_zeros() as usize;
                    let (tl, tc) = w.poison_from[&s];
                    return Err(fault(
                        self.prog,
                        &self.cfg,
                        w,
                        FaultKind::Uninitialized,
                        Some(lane),
                        None,
                        format!(
                            "uses a value that tcgen05.ld loaded from never-written tensor memory \
                             (TMEM lane {tl}, column {tc} is the first such cell)"
                        ),
                    ));
                }
            }
        }
        for &s in &self.prog.uses[at + nuse..at + nuse + ndef] {
            if s != NONE {
                while w.pending[s as usize] != 0 {
                    w.retire_pending(s);
                }
                if w.poison[s as usize] != 0 {
                    w.poison[s as usize] &= !w.active;
                    if w.poison[s as usize] == 0 {
                        w.poison_from.remove(&s);
                    }
                }
            }
        }
        Ok(())
    }

    fn record_trace(&mut self, w: &Warp, pc: usize, lane: usize) {
        let Some(req) = &self.opts.trace else { return };
        if self.trace.len() >= req.max_entries {
            return;
        }
        let meta = &self.prog.meta[pc];
        let Some(i) = meta.inst else { return };
        let inst = &self.prog.insts[i as usize];
        let values = inst
            .op
            .defs()
            .into_iter()
            .map(|r| {
                let s = self.prog.reg_slot[r.index()];
                (r, self.prog.kernel.reg_ty(r), reg(&w.regs, s, lane))
            })
            .collect();
        self.trace.push(TraceEntry {
            stage: self.prog.stage_title(pc),
            op: meta.op,
            loc: meta.loc,
            values,
        });
    }

    fn snapshot(&mut self, cl: &Cluster, w: &Warp, stage: u32, at: StagePoint) {
        let cta = &cl.ctas[w.cta];
        for (i, req) in self.opts.snapshots.iter().enumerate() {
            let SnapshotRequest {
                block,
                at: when,
                what,
                ..
            } = req;
            if self.snap_done[i]
                || *when != at
                || *block != cta.id.block
                || !self.snap_stages[i].contains(&stage)
            {
                continue;
            }
            self.snap_done[i] = true;
            let data = match *what {
                SnapshotWhat::Smem { offset, bytes } => SnapshotData::Smem(
                    (offset..offset + bytes)
                        .map(|o| {
                            let o = o as usize;
                            (o < cta.smem.data.len() && cta.smem.written.get(o))
                                .then(|| cta.smem.data[o])
                        })
                        .collect(),
                ),
                SnapshotWhat::Tmem {
                    lane,
                    lanes,
                    col,
                    cols,
                } => SnapshotData::Tmem(
                    (lane..lane + lanes)
                        .map(|l| cta.tmem.peek(l, col, cols))
                        .collect(),
                ),
            };
            self.snapshots.push(Snapshot {
                request: i,
                warp: w.id,
                data,
            });
        }
    }

    /// `.sync` ops with a full member mask: every existing lane of the warp takes part (the
    /// lanes past the end of a CTA whose size is not a multiple of 32 count as exited).
    pub(crate) fn require_full_warp(&self, w: &Warp, what: &str) -> Result<(), InterpError> {
        if w.active != w.full {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Collective,
                None,
                None,
                format!(
                    "{what} needs all {} lanes of the warp, but the active mask is {}",
                    w.full.count_ones(),
                    mask_str(w.active)
                ),
            ));
        }
        Ok(())
    }

    /// `.aligned` barriers: every existing lane of the warp executes it together.
    fn require_aligned(&self, w: &Warp, what: &str) -> Result<(), InterpError> {
        if w.active != w.full {
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::DivergentBarrier,
                None,
                None,
                format!(
                    "{what} reached by lanes {} of the warp's {}: the whole warp must execute it \
                     together",
                    mask_str(w.active),
                    mask_str(w.full)
                ),
            ));
        }
        Ok(())
    }

    /// A thread's index in its cluster: CTA-major, then warp, then lane.
    pub(crate) fn cluster_thread(&self, w: &Warp, lane: usize) -> usize {
        w.cta * self.cfg.nthreads as usize + w.id as usize * 32 + lane
    }

    fn special(&self, cl: &Cluster, w: &Warp, sr: SpecialReg) -> [u32; 32] {
        let cfg = &self.cfg;
        let id = cl.ctas[w.cta].id;
        std::array::from_fn(|l| {
            let t = w.id * 32 + l as u32;
            let tid = cfg.tid(t);
            match sr {
                SpecialReg::TidX => tid[0],
                SpecialReg::TidY => tid[1],
                SpecialReg::TidZ => tid[2],
                SpecialReg::NtidX => cfg.block[0],
                SpecialReg::CtaidX => id.block[0],
                SpecialReg::CtaidY => id.block[1],
                SpecialReg::CtaidZ => id.block[2],
                SpecialReg::NctaidX => cfg.grid[0],
                SpecialReg::NctaidY => cfg.grid[1],
                SpecialReg::NctaidZ => cfg.grid[2],
                SpecialReg::LaneId => l as u32,
                SpecialReg::ClusterCtaRank => id.rank,
                SpecialReg::ClusterNctaRank => cfg.ctas_per_cluster,
            }
        })
    }

    fn exit_warp(&mut self, cl: &mut Cluster, w: &mut Warp) -> Result<(), InterpError> {
        self.copies_at_exit(cl, w)?;
        w.exited = true;
        let cta = &mut cl.ctas[w.cta];
        cta.live_threads -= w.full.count_ones();
        let before = cta.bars.map(|b| b.generation);
        // Barriers count live threads only: an exit can complete one.
        for bar in cta.bars.iter_mut() {
            bar.complete_if_all_arrived(cta.live_threads);
        }
        Self::race_bars_completed(cl, w.cta, &before);
        let cta = &cl.ctas[w.cta];
        if cta.live_threads == 0
            && let Some(a) = cta.tmem.allocs.first()
        {
            let msg = format!(
                "the CTA exited holding {} TMEM column(s) at column {} allocated by warp {}; \
                 tcgen05.dealloc every allocation before exit",
                a.ncols, a.col, a.warp
            );
            return Err(fault(
                self.prog,
                &self.cfg,
                w,
                FaultKind::Leak,
                None,
                None,
                msg,
            ));
        }
        Self::complete_cluster_barrier(cl);
        Ok(())
    }
}
