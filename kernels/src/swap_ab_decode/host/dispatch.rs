//! From runtime shapes to compile keys: `dispatch` for one call, `warmup_keys` for
//! everything a layer can hit, and the key set the PTX snapshots pin.

use dsl_core::Target;

use super::launch::MAX_TOKENS;
use crate::swap_ab_decode::device::plan::Plan;
use crate::swap_ab_decode::device::stream::busiest_cta_tiles;
use crate::swap_ab_decode::key::MIN_MMA_HEADS;
use crate::swap_ab_decode::{CompileKey, ExtraRecord, KeyError, MAX_CLUSTER, Schedule, TILE};

/// The shapes of a layer's decode calls that fix its kernel (the token count does not: it is
/// a grid dimension, so one kernel serves every decode step).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LayerShape {
    pub heads: usize,
    pub swa_width: usize,
    pub extra_width: usize,
    /// Bytes of a compressed record: 528 (fp8) or 288 (NVFP4).
    pub extra_record_bytes: usize,
    pub swa_page: usize,
    pub extra_page: usize,
}

/// Reads as the struct's fields (`heads: 16, swa_width: 128, ...`), so a message can show
/// the exact value to warm up.
impl std::fmt::Display for LayerShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "heads: {}, swa_width: {}, extra_width: {}, extra_record_bytes: {}, swa_page: {}, \
             extra_page: {}",
            self.heads,
            self.swa_width,
            self.extra_width,
            self.extra_record_bytes,
            self.swa_page,
            self.extra_page
        )
    }
}

/// The GPU a launch runs on, as [`dispatch`]'s model sees it: the target, the SMs a launch
/// of clusters spreads over (the device's), how many clusters of each size run at once
/// where the device was asked, and the SMs a persistent grid (a streamed key of one CTA a
/// token) is sized to: the device's, or fewer where
/// [`SwapAbDecode::with_sm_budget`](crate::swap_ab_decode::SwapAbDecode::with_sm_budget)
/// leaves some to other work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Gpu {
    target: Target,
    sms: usize,
    persistent_sms: usize,
    /// Entry n: how many clusters of n CTAs, each taking an SM, the device runs at once
    /// ([`Gpu::with_clusters_at_once`]); `None` where it was not asked.
    clusters_at_once: [Option<u16>; MAX_CLUSTER + 1],
}

impl Gpu {
    /// A GPU of `sms` SMs (a device's `sm_count`).
    pub fn new(target: Target, sms: usize) -> Result<Gpu, KeyError> {
        if sms == 0 {
            return Err(KeyError::Sms { sms });
        }
        Ok(Gpu {
            target,
            sms,
            persistent_sms: sms,
            clusters_at_once: [None; MAX_CLUSTER + 1],
        })
    }

    /// The GPU each target's model was checked on: an H100 SXM or H200 (132 SMs) for
    /// sm_90a, a B200 (148) for sm_100a. Code that knows its device passes its SM count to
    /// [`Gpu::new`] instead: an H100 PCIe has 114, an H20 78.
    pub fn of_target(target: Target) -> Gpu {
        let sms = match target {
            Target::Sm90a => 132,
            Target::Sm100a => 148,
        };
        Gpu::new(target, sms).expect("both targets' GPUs have SMs")
    }

    /// This GPU with persistent grids sized to `sms` of its SMs, 1 to all of them.
    pub fn with_persistent_sms(self, sms: usize) -> Result<Gpu, KeyError> {
        if sms == 0 || sms > self.sms {
            return Err(KeyError::SmBudget {
                sms,
                device_sms: self.sms,
            });
        }
        Ok(Gpu {
            persistent_sms: sms,
            ..self
        })
    }

    /// This GPU with the number of clusters of each size from 1 to [`MAX_CLUSTER`] CTAs
    /// that run at once, `at_once(ctas)`, each CTA taking a whole SM (as every key's does):
    /// a device's answer ([`dsl_core::jit::Device::clusters_at_once`]), which the rounds of
    /// a launch of clusters follow ([`modelled_us`]). A cluster's CTAs share a GPC, so this
    /// depends on how the chip's SMs fall into GPCs, not on their count alone; without it
    /// the model takes the fractions of the SMs measured on the H100 and H200.
    ///
    /// ```
    /// use dsl_core::Target;
    /// use kernels::swap_ab_decode::Gpu;
    ///
    /// // A GPU whose GPCs hold 16 clusters of 4 CTAs at once and nothing larger than 8.
    /// let gpu = Gpu::of_target(Target::Sm90a)
    ///     .with_clusters_at_once(|ctas| Ok::<_, ()>(match ctas {
    ///         1..=4 => 64 / ctas,
    ///         5..=8 => 8,
    ///         _ => 0,
    ///     }))
    ///     .unwrap();
    /// assert_eq!(gpu.ctas_at_once(4), Some(64));
    /// assert_eq!(gpu.ctas_at_once(10), None);
    /// ```
    pub fn with_clusters_at_once<E>(
        mut self,
        mut at_once: impl FnMut(u32) -> Result<u32, E>,
    ) -> Result<Gpu, E> {
        for (ctas, entry) in self.clusters_at_once.iter_mut().enumerate().skip(1) {
            let clusters = at_once(ctas as u32)?;
            // More clusters than SMs cannot run at once: a larger answer is capped there.
            *entry = Some(clusters.min(self.sms as u32) as u16);
        }
        Ok(self)
    }

    /// How many CTAs of `cluster`-CTA clusters run at once, one an SM (every key takes
    /// more than half of an SM's shared memory); `None` where no such cluster can run.
    /// A device's answer where it was asked ([`Gpu::with_clusters_at_once`]), otherwise
    /// fractions of the SMs: a cluster's CTAs share a GPC, so larger clusters leave SMs
    /// idle. The fractions are at or below what an H100 80GB HBM3's driver answers for
    /// every size (of its 132 SMs, clusters of 2 fill all, of 3 take 117, of 4 120, of
    /// 5-8 102-120, of 9-16 70-112), which its timings' steps agree with: `stream4` took
    /// one round's time to 30 tokens (30 clusters of 4) and two at 31.
    pub fn ctas_at_once(&self, cluster: usize) -> Option<usize> {
        if let Some(Some(clusters)) = self.clusters_at_once.get(cluster) {
            return (*clusters > 0).then_some(usize::from(*clusters) * cluster);
        }
        let usable = match cluster {
            1 | 2 => self.sms,
            3 | 4 => self.sms * 9 / 10,
            5..=8 => self.sms * 3 / 4,
            _ => self.sms * 11 / 20,
        };
        Some((usable / cluster).max(1) * cluster)
    }

    pub fn target(&self) -> Target {
        self.target
    }

    pub fn sms(&self) -> usize {
        self.sms
    }

    pub fn persistent_sms(&self) -> usize {
        self.persistent_sms
    }
}

/// The key of a call of `tokens` query tokens with these shapes on `gpu`, validated: of the
/// schedules the key allows ([`Schedule::candidates`]), the one whose launch the model of
/// [`modelled_us`] says is shortest.
///
/// ```
/// use dsl_core::Target;
/// use kernels::swap_ab_decode::{Gpu, LayerShape, Schedule, dispatch, warmup_keys};
///
/// let shape = LayerShape {
///     heads: 16,
///     swa_width: 128,
///     extra_width: 512,
///     extra_record_bytes: 528,
///     swa_page: 64,
///     extra_page: 16,
/// };
/// let h200 = Gpu::of_target(Target::Sm90a);
/// let one = dispatch(&shape, 1, &h200)?;
/// let some = dispatch(&shape, 64, &h200)?;
/// let many = dispatch(&shape, 512, &h200)?;
/// assert_eq!(one.schedule, Schedule::SPLIT_HALF_TILES);
/// assert_eq!(some.schedule, Schedule::streamed(2));
/// assert_eq!(many.schedule, Schedule::STREAMED);
/// assert!(warmup_keys(&shape, &h200)?.contains(&some));
/// // Persistent grids of 16 SMs: 512 tokens go to clusters, which take every SM.
/// let shared = h200.with_persistent_sms(16)?;
/// assert_eq!(dispatch(&shape, 512, &shared)?.schedule, Schedule::streamed(2));
/// # Ok::<(), kernels::swap_ab_decode::KeyError>(())
/// ```
pub fn dispatch(shape: &LayerShape, tokens: usize, gpu: &Gpu) -> Result<CompileKey, KeyError> {
    let keys = candidates(shape, gpu.target)?.map(|key| (key, round_us(&key)));
    Ok(fastest(keys, tokens, gpu))
}

/// The key of every schedule `shape` takes on `target`, in [`Schedule::candidates`]'
/// order; where it takes none, the first one's error.
fn candidates(
    shape: &LayerShape,
    target: Target,
) -> Result<impl Iterator<Item = CompileKey> + Clone, KeyError> {
    let base = CompileKey {
        heads: shape.heads,
        swa_width: shape.swa_width,
        extra_width: shape.extra_width,
        extra_record: ExtraRecord::from_bytes(shape.extra_record_bytes)?,
        swa_page: shape.swa_page,
        extra_page: shape.extra_page,
        target,
        schedule: Schedule::SPLIT,
    };
    let keys = Schedule::candidates().map(move |schedule| base.with_schedule(schedule));
    let mut valid = keys.clone().filter(|key| key.validate().is_ok()).peekable();
    if valid.peek().is_none() {
        let mut errors = keys.filter_map(|key| key.validate().err());
        return Err(errors.next().expect("Schedule::candidates is never empty"));
    }
    Ok(valid)
}

/// Of `keys`, each with its modelled time of one round ([`round_us`]), the one whose
/// launch for `tokens` tokens on `gpu` is shortest; the first of equals.
fn fastest(keys: impl Iterator<Item = (CompileKey, f64)>, tokens: usize, gpu: &Gpu) -> CompileKey {
    let modelled =
        |(key, per_round): (CompileKey, f64)| (rounds(&key, tokens, gpu) as f64 * per_round, key);
    let mut keys = keys.map(modelled);
    let first = keys.next().expect("a layer takes at least one schedule");
    keys.fold(
        first,
        |best, next| if next.0 < best.0 { next } else { best },
    )
    .1
}

/// The modelled time of a launch of `key` for `tokens` tokens on `gpu`, in microseconds
/// at 1.98 GHz: the rounds of CTAs it takes ([`rounds`]) times the time of one CTA, a
/// streamed CTA's by the tiles of its busiest one ([`busiest_cta_tiles`]); each of
/// [`MODEL_US`]'s constants times how often [`round_terms`] counts it. The constants are a
/// least-squares fit (relative error) to the H100 timings in `host/sweeps/` (every
/// candidate schedule, 16 and 32 heads, NE 512 and 1024, fp8 and NVFP4, s_q 1 to 512; a
/// test refits them); the model picks what was measured fastest there or one within 10%
/// of it, and so it does on the H200 tables of revisions fe8b635 and 3d2a3d0, not fitted.
/// Only the ratios between schedules matter; sm_100a assumes the same ratios (not
/// measured).
pub fn modelled_us(key: &CompileKey, tokens: usize, gpu: &Gpu) -> f64 {
    rounds(key, tokens, gpu) as f64 * round_us(key)
}

/// The modelled time of one round of `key`'s CTAs.
fn round_us(key: &CompileKey) -> f64 {
    round_terms(key)
        .iter()
        .zip(MODEL_US)
        .map(|(n, us)| n * us)
        .sum()
}

/// The model's constants in microseconds, indexed by the terms below:
/// - a split CTA (one tile, the cluster merge) with 128-row compressed tiles, of 16 and of
///   32 heads, then with 64-row ones ([`SPLIT_CTA`]);
/// - a streamed CTA's setup and epilogue ([`STREAM_START`]), each 128 rows its teams
///   stream together ([`STREAM_ROWS`]), and the cluster merge ([`CLUSTER_MERGE`]);
/// - each 128 rows of a streamed CTA of 32 heads, by compressed record (fp8, NVFP4;
///   [`STREAM_32_HEADS_ROWS`]): one team of warps, its tile ahead in registers (fp8's
///   stage does not fit beside its buffers), one dequant for twice the heads: about 1.7
///   times a 16-head CTA's.
const MODEL_US: [f64; MODEL_TERMS] = [9.9, 12.7, 8.7, 11.15, 6.7, 4.3, 0.85, 7.44, 7.27];
const MODEL_TERMS: usize = 9;
const SPLIT_CTA: [[usize; 2]; 2] = [[0, 1], [2, 3]];
const STREAM_START: usize = 4;
const STREAM_ROWS: usize = 5;
const CLUSTER_MERGE: usize = 6;
const STREAM_32_HEADS_ROWS: [usize; 2] = [7, 8];

/// How many times one round of `key`'s CTAs takes each of [`MODEL_US`].
fn round_terms(key: &CompileKey) -> [f64; MODEL_TERMS] {
    let mut terms = [0.0; MODEL_TERMS];
    match key.schedule {
        Schedule::Split { extra_rows, .. } => {
            let heads = usize::from(key.mma_heads() > MIN_MMA_HEADS);
            terms[SPLIT_CTA[usize::from(extra_rows < TILE)][heads]] = 1.0;
        }
        Schedule::Streamed { ctas, cta_heads } => {
            let plan = Plan::new(key);
            let rows = f64::from(busiest_cta_tiles(&plan) * plan.kv_rows) / TILE as f64;
            let rows_term = if cta_heads > MIN_MMA_HEADS {
                STREAM_32_HEADS_ROWS[usize::from(key.extra_record == ExtraRecord::Nvfp4)]
            } else {
                STREAM_ROWS
            };
            terms[STREAM_START] = 1.0;
            terms[rows_term] = rows;
            if ctas > 1 {
                terms[CLUSTER_MERGE] = 1.0;
            }
        }
    }
    terms
}

/// The rounds of CTAs a launch of `key` for `tokens` tokens takes on `gpu`: a persistent
/// grid's CTA walks the tokens of its row of the grid ([`CompileKey::grid`]), one after
/// another; clusters take as many rounds as [`Gpu::ctas_at_once`] of them fit in the GPU's
/// (none: a key whose cluster cannot run takes more rounds than any other).
fn rounds(key: &CompileKey, tokens: usize, gpu: &Gpu) -> usize {
    if key.is_persistent() {
        let rows = key.grid(tokens, gpu.persistent_sms)[1] as usize;
        return tokens.div_ceil(rows.max(1));
    }
    let cluster = key.cluster_size();
    let ctas = tokens * key.head_groups() * cluster;
    gpu.ctas_at_once(cluster)
        .map_or(usize::MAX, |at_once| ctas.div_ceil(at_once))
}

/// Every key a layer of this shape can hit on `gpu`, whatever its token count: compile
/// these at start-up and no decode step compiles (the token count is a grid dimension;
/// it only picks the schedule). Every token count a launch takes is tried; the model's
/// time of a schedule is its rounds times a constant, so this costs no more than a few
/// arithmetic operations a count.
pub fn warmup_keys(shape: &LayerShape, gpu: &Gpu) -> Result<Vec<CompileKey>, KeyError> {
    let schedules: Vec<(CompileKey, f64)> = candidates(shape, gpu.target)?
        .map(|key| (key, round_us(&key)))
        .collect();
    let mut keys: Vec<CompileKey> = Vec::new();
    for tokens in 1..=MAX_TOKENS {
        let key = fastest(schedules.iter().copied(), tokens, gpu);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    Ok(keys)
}

/// The keys whose PTX is kept as reviewed snapshots. Split: heads {16, 32} x {fp8, NVFP4}
/// x (NK, NE) in {(128, 512), (128, 1024)} with 64-slot pages, partial tiles (NK 100,
/// NE 300) and the smallest cluster (NK 64, NE 0). Streamed by one CTA: both record formats
/// at (128, 512), partial tiles, and no compressed list; by a cluster: 2 CTAs at (128, 512)
/// fp8, 3 over partial NVFP4 tiles; by one CTA of 32 heads (sm_90a): 32 heads NVFP4 at
/// (128, 512); split with 64-row compressed tiles: 16 heads fp8 at (128, 512) and 32 heads
/// NVFP4 over partial tiles, and 32 heads fp8 at (128, 512) in two clusters of 16 heads.
pub fn snapshot_keys(target: Target) -> Vec<CompileKey> {
    let key = |heads, swa_width, extra_width, extra_record| CompileKey {
        heads,
        swa_width,
        extra_width,
        extra_record,
        swa_page: 64,
        extra_page: 64,
        target,
        schedule: Schedule::SPLIT,
    };
    let mut keys = Vec::new();
    for heads in [16, 32] {
        for extra_record in [ExtraRecord::Fp8, ExtraRecord::Nvfp4] {
            for (nk, ne) in [(128, 512), (128, 1024)] {
                keys.push(key(heads, nk, ne, extra_record));
            }
        }
    }
    keys.push(key(16, 100, 300, ExtraRecord::Fp8));
    keys.push(key(32, 100, 300, ExtraRecord::Nvfp4));
    keys.push(key(16, 64, 0, ExtraRecord::Fp8));
    keys.push(key(32, 64, 0, ExtraRecord::Fp8));
    let streamed = [
        key(16, 128, 512, ExtraRecord::Fp8),
        key(16, 128, 512, ExtraRecord::Nvfp4),
        key(16, 100, 300, ExtraRecord::Nvfp4),
        key(16, 64, 0, ExtraRecord::Fp8),
    ];
    keys.extend(streamed.map(|k| k.with_schedule(Schedule::STREAMED)));
    keys.push(key(16, 128, 512, ExtraRecord::Fp8).with_schedule(Schedule::streamed(2)));
    keys.push(key(16, 100, 300, ExtraRecord::Nvfp4).with_schedule(Schedule::streamed(3)));
    if target == Target::Sm90a {
        keys.push(key(32, 128, 512, ExtraRecord::Nvfp4).with_schedule(Schedule::STREAMED_32_HEADS));
    }
    let half_tiles = Schedule::SPLIT_HALF_TILES;
    keys.push(key(16, 128, 512, ExtraRecord::Fp8).with_schedule(half_tiles));
    keys.push(key(32, 100, 300, ExtraRecord::Nvfp4).with_schedule(half_tiles));
    keys.push(
        key(32, 128, 512, ExtraRecord::Fp8).with_schedule(Schedule::SPLIT_HALF_TILES_16_HEADS),
    );
    keys
}

/// Keys of the head-count variant, which serving code meets at other tensor-parallel sizes
/// of the same models: 8 heads (padded to 16 in the MMAs) and 64 or 128 heads (groups of
/// 32 heads over the grid's z, a cluster each); streamed, 32 heads (two groups of 16) and
/// 8.
pub fn variant_keys(target: Target) -> Vec<CompileKey> {
    let key = |heads, extra_width, extra_record, schedule| CompileKey {
        heads,
        swa_width: 128,
        extra_width,
        extra_record,
        swa_page: 64,
        extra_page: 64,
        target,
        schedule,
    };
    vec![
        key(8, 512, ExtraRecord::Fp8, Schedule::SPLIT),
        key(8, 1024, ExtraRecord::Nvfp4, Schedule::SPLIT),
        key(64, 512, ExtraRecord::Nvfp4, Schedule::SPLIT),
        key(128, 1024, ExtraRecord::Fp8, Schedule::SPLIT),
        key(32, 1024, ExtraRecord::Fp8, Schedule::STREAMED),
        key(8, 512, ExtraRecord::Nvfp4, Schedule::STREAMED),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> LayerShape {
        LayerShape {
            heads: 32,
            swa_width: 128,
            extra_width: 512,
            extra_record_bytes: 288,
            swa_page: 64,
            extra_page: 16,
        }
    }

    /// The GPUs of the sweeps below: an H100 SXM or H200, 132 SMs.
    fn hopper() -> Gpu {
        Gpu::of_target(Target::Sm90a)
    }

    /// Clusters of 1 to 16 CTAs at once on an H100 80GB HBM3 (driver 580.159.04), as its
    /// driver answers (`Device::clusters_at_once` with a decode CTA's footprint, the same
    /// as each snapshot key's kernel's; `gpu_decode_dispatch_counts_the_devices_clusters_at_once`).
    const H100_CLUSTERS_AT_ONCE: [u32; MAX_CLUSTER] =
        [132, 66, 39, 30, 22, 17, 15, 15, 9, 7, 7, 7, 7, 7, 7, 7];

    /// [`hopper`] with that H100's answers, as a `SwapAbDecode` on it sees it.
    fn h100_as_asked() -> Gpu {
        hopper()
            .with_clusters_at_once(|ctas| Ok::<_, ()>(H100_CLUSTERS_AT_ONCE[ctas as usize - 1]))
            .unwrap()
    }

    #[test]
    fn dispatch_builds_and_checks_the_key() {
        let key = dispatch(&shape(), 1, &Gpu::of_target(Target::Sm100a)).unwrap();
        assert_eq!(key.extra_record, ExtraRecord::Nvfp4);
        // One token: two clusters of 16 heads, each split into half tiles, 2 SWA and 8
        // compressed CTAs.
        let half_tiles = Schedule::SPLIT_HALF_TILES_16_HEADS;
        assert_eq!((key.schedule, key.cluster_size()), (half_tiles, 10));
        assert_eq!(key.head_groups(), 2);
        let some = dispatch(&shape(), 16, &Gpu::of_target(Target::Sm100a)).unwrap();
        assert_eq!((some.schedule, some.cluster_size()), (Schedule::SPLIT, 6));
        let many = dispatch(&shape(), 4096, &Gpu::of_target(Target::Sm100a)).unwrap();
        assert_eq!(many, key.with_schedule(Schedule::STREAMED));
        let bad = LayerShape {
            extra_record_bytes: 300,
            ..shape()
        };
        assert_eq!(
            dispatch(&bad, 1, &Gpu::of_target(Target::Sm100a)),
            Err(KeyError::Record { bytes: 300 })
        );
        let bad = LayerShape {
            heads: 24,
            ..shape()
        };
        assert_eq!(
            dispatch(&bad, 1, &Gpu::of_target(Target::Sm90a)),
            Err(KeyError::Heads { heads: 24 })
        );
        let bad = LayerShape {
            swa_page: 48,
            ..shape()
        };
        assert!(matches!(
            dispatch(&bad, 1, &Gpu::of_target(Target::Sm90a)),
            Err(KeyError::Page { page: 48, .. })
        ));
        let long = LayerShape {
            extra_width: 2048,
            ..shape()
        };
        // 17 tiles are more than a split cluster holds: a cluster of 4 streams them.
        let key = dispatch(&long, 1, &Gpu::of_target(Target::Sm90a)).unwrap();
        assert_eq!((key.schedule, key.tiles()), (Schedule::streamed(4), 17));
        assert!(matches!(
            key.with_schedule(Schedule::SPLIT).validate(),
            Err(KeyError::Cluster { tiles: 18, .. })
        ));
        let bad = LayerShape {
            swa_width: 0,
            extra_width: 0,
            ..shape()
        };
        assert!(matches!(
            dispatch(&bad, 1, &Gpu::of_target(Target::Sm90a)),
            Err(KeyError::Cluster { tiles: 0, .. })
        ));
    }

    /// Where the H100's own answer moves a pick: 30 clusters of 4 run at once, so
    /// `stream4` takes one round to 30 tokens. On that H100 (`bench_decode --quick`, H=16
    /// NE 512 fp8) it took 16.4 and 16.6 us at 29 and 30 tokens against 18.6 and 18.9 for
    /// `stream3`, and 26.9 at 31 (a second round) against 18.9. The fractions of the SMs
    /// hold 29 clusters of 4 and gave 30 tokens to `stream3`.
    #[test]
    fn the_h100s_own_clusters_at_once_give_30_tokens_to_stream4() {
        let layer = LayerShape {
            heads: 16,
            extra_record_bytes: 528,
            ..shape()
        };
        let pick = |tokens, gpu: &Gpu| dispatch(&layer, tokens, gpu).unwrap().schedule;
        assert_eq!(pick(29, &h100_as_asked()), Schedule::streamed(4));
        assert_eq!(pick(30, &h100_as_asked()), Schedule::streamed(4));
        assert_eq!(pick(31, &h100_as_asked()), Schedule::streamed(3));
        assert_eq!(pick(29, &hopper()), Schedule::streamed(4));
        assert_eq!(pick(30, &hopper()), Schedule::streamed(3));
    }

    /// The device's clusters at once decide a launch's rounds: at 32 tokens of 16 heads (NE
    /// 512, fp8) `stream4` is 32 clusters of 4, which the H100 did not hold at once (its
    /// driver answers 30: 16.6 us at 30 tokens against 27.1 at 32), so it takes `stream3`;
    /// a chip whose GPCs hold them takes `stream4`, and one that runs no cluster above 2
    /// CTAs is never given one.
    #[test]
    fn the_devices_clusters_at_once_decide_the_rounds() {
        let layer = LayerShape {
            heads: 16,
            extra_record_bytes: 528,
            ..shape()
        };
        let at_32 = |gpu: &Gpu| dispatch(&layer, 32, gpu).unwrap().schedule;
        assert_eq!(at_32(&hopper()), Schedule::streamed(3));
        let fits = |held: fn(u32) -> u32| {
            hopper()
                .with_clusters_at_once(|ctas| Ok::<_, ()>(held(ctas)))
                .unwrap()
        };
        assert_eq!(at_32(&fits(|ctas| 132 / ctas)), Schedule::streamed(4));
        assert_eq!(
            at_32(&fits(|ctas| if ctas == 4 { 28 } else { 132 / ctas })),
            Schedule::streamed(3)
        );
        let pairs_only = fits(|ctas| if ctas <= 2 { 132 / ctas } else { 0 });
        assert_eq!(pairs_only.ctas_at_once(3), None);
        for tokens in 1..=MAX_TOKENS {
            for layer in [layer, shape()] {
                let key = dispatch(&layer, tokens, &pairs_only).unwrap();
                assert!(key.cluster_size() <= 2, "{key} at {tokens} tokens");
            }
        }
        let refused = hopper().with_clusters_at_once(|_| Err("no driver"));
        assert_eq!(refused, Err("no driver"));
    }

    /// A persistent grid's rounds follow the SMs it is sized to; clusters take the
    /// device's. With fewer SMs for the persistent grid, it wins fewer token counts.
    #[test]
    fn dispatch_weighs_the_sm_budget() {
        let shape = LayerShape {
            heads: 16,
            extra_record_bytes: 528,
            ..shape()
        };
        let persistent = |gpu: &Gpu| {
            (1..=2048)
                .filter(|&tokens| dispatch(&shape, tokens, gpu).unwrap().is_persistent())
                .collect::<Vec<_>>()
        };
        let budget = |sms| persistent(&hopper().with_persistent_sms(sms).unwrap());
        let (full, most, half) = (budget(132), budget(100), budget(66));
        assert_eq!((full.len(), full[0]), (1916, 67));
        assert_eq!((most.len(), most[0]), (344, 67));
        // Half the SMs: a pair a token over all of them takes the same rounds, each shorter.
        assert!(half.is_empty());
        let key = dispatch(&shape, 512, &hopper()).unwrap();
        let rounds_of = |sms| rounds(&key, 512, &hopper().with_persistent_sms(sms).unwrap());
        assert_eq!([rounds_of(132), rounds_of(66), rounds_of(7)], [4, 8, 74]);
        // An H20's 78 SMs: the persistent grid takes 512 tokens in 7 rounds.
        let h20 = Gpu::new(Target::Sm90a, 78).unwrap();
        assert_eq!(rounds(&key, 512, &h20), 7);
        assert_eq!(
            hopper().with_persistent_sms(133),
            Err(KeyError::SmBudget {
                sms: 133,
                device_sms: 132
            })
        );
        assert_eq!(Gpu::new(Target::Sm90a, 0), Err(KeyError::Sms { sms: 0 }));
    }

    #[test]
    fn warmup_has_the_key_of_every_token_count() {
        let gpus = [
            hopper(),
            hopper().with_persistent_sms(100).unwrap(),
            hopper().with_persistent_sms(7).unwrap(),
            Gpu::new(Target::Sm90a, 78).unwrap(),
            Gpu::of_target(Target::Sm100a),
        ];
        for gpu in &gpus {
            let keys = warmup_keys(&shape(), gpu).unwrap();
            for tokens in 1..=MAX_TOKENS {
                let key = dispatch(&shape(), tokens, gpu).unwrap();
                assert!(keys.contains(&key), "{gpu:?}: {key} at {tokens} tokens");
            }
        }
        let keys = warmup_keys(&shape(), &hopper()).unwrap();
        let schedules: Vec<Schedule> = keys.iter().map(|k| k.schedule).collect();
        assert_eq!(
            schedules,
            [
                Schedule::SPLIT_HALF_TILES_16_HEADS,
                Schedule::SPLIT_16_HEADS,
                Schedule::SPLIT,
                Schedule::streamed(3),
                Schedule::streamed(2),
                Schedule::STREAMED,
                Schedule::STREAMED_32_HEADS
            ]
        );
        // Persistent grids of 7 SMs: clusters take every token count.
        let shared = warmup_keys(&shape(), &gpus[2]).unwrap();
        assert!(shared.iter().all(|k| !k.is_persistent()), "{shared:?}");
    }

    /// One configuration's timings in a sweep: [`dispatch`]'s key for its shape (NK 128)
    /// and token count, the token count, and the median in microseconds of each schedule
    /// it timed.
    type Timings = (CompileKey, usize, Vec<(Schedule, f64)>);

    /// The single launches of `examples/bench_decode.rs`'s JSON lines (its chains left
    /// out), by configuration.
    fn timings(jsonl: &str, gpu: &Gpu) -> Vec<Timings> {
        let mut by_config: std::collections::BTreeMap<_, Vec<(Schedule, f64)>> = Default::default();
        for line in jsonl.lines() {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            if row.get("chain_layers").is_some() {
                continue;
            }
            let field = |name: &str| row[name].as_u64().unwrap() as usize;
            assert_eq!(field("nk"), 128, "the model's checks assume NK 128");
            let record = match row["record"].as_str().unwrap() {
                "fp8" => 528,
                "nvfp4" => 288,
                other => panic!("record {other}"),
            };
            let config = (field("heads"), field("ne"), record, field("s_q"));
            let schedule = Schedule::from_short_name(row["schedule"].as_str().unwrap()).unwrap();
            let us = row["kernel_us"].as_f64().unwrap();
            by_config.entry(config).or_default().push((schedule, us));
        }
        let config = |((heads, extra_width, extra_record_bytes, tokens), times)| {
            let layer = LayerShape {
                heads,
                extra_width,
                extra_record_bytes,
                ..shape()
            };
            (dispatch(&layer, tokens, gpu).unwrap(), tokens, times)
        };
        by_config.into_iter().map(config).collect()
    }

    /// For every configuration of `jsonl`, the schedule the model finds shortest among the
    /// ones timed there that its key takes must be within 10% of the fastest timed; where
    /// every candidate was timed, that is [`dispatch`]'s pick. Checked with the model's
    /// fractions of the SMs and with the H100's own clusters at once.
    fn assert_picks_within_10_percent(jsonl: &str) {
        for gpu in [hopper(), h100_as_asked()] {
            assert_picks_within_10_percent_on(jsonl, &gpu);
        }
    }

    fn assert_picks_within_10_percent_on(jsonl: &str, gpu: &Gpu) {
        let sweep = timings(jsonl, gpu);
        assert!(!sweep.is_empty());
        for (key, tokens, times) in sweep {
            let timed = |schedule: Schedule| times.iter().find(|(s, _)| *s == schedule);
            let modelled =
                |schedule: Schedule| modelled_us(&key.with_schedule(schedule), tokens, gpu);
            let picked = Schedule::candidates()
                .filter(|&s| timed(s).is_some() && key.with_schedule(s).validate().is_ok())
                .min_by(|&a, &b| modelled(a).total_cmp(&modelled(b)))
                .unwrap();
            if Schedule::candidates()
                .all(|s| timed(s).is_some() || key.with_schedule(s).validate().is_err())
            {
                assert_eq!(picked, key.schedule);
            }
            let (_, picked_us) = timed(picked).unwrap();
            let (fastest, fastest_us) = times.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
            assert!(
                *picked_us <= 1.1 * fastest_us,
                "{key} at {tokens} tokens: picked {picked:?} at {picked_us} us, {fastest:?} \
                 took {fastest_us} us"
            );
        }
    }

    /// The timings the model is fitted to: on an H100 (driver 580.159, SM clock up to 1980
    /// MHz, copy bandwidth 3015 GB/s), every candidate schedule, fp8 and NVFP4, NK 128: the
    /// table of revision c22970f in docs/performance.md (`scripts/bench-gpu.sh`, 200
    /// replays, s_q 1 to 512; from its markdown, to 0.1 us) and the token counts between
    /// (`bench_decode --no-chain --tokens ...`: 2 to 320 at c22970f; 12 to 280 at 5888d25,
    /// the same kernels, where the first refit's picks were checked).
    const H100_FITTED: [&str; 3] = [
        include_str!("sweeps/h100-c22970f.jsonl"),
        include_str!("sweeps/h100-c22970f-tokens.jsonl"),
        include_str!("sweeps/h100-5888d25-tokens.jsonl"),
    ];

    #[test]
    fn the_model_picks_what_the_h100_measured_fastest() {
        for jsonl in H100_FITTED {
            assert_picks_within_10_percent(jsonl);
        }
    }

    /// The constants are the least-squares fit of the model's relative error to
    /// [`H100_FITTED`], rounded: a sweep added there shows here whether they need a refit.
    #[test]
    fn the_constants_are_the_fit_to_the_h100_timings() {
        let mut normal = [[0.0; MODEL_TERMS]; MODEL_TERMS];
        let mut sums = [0.0; MODEL_TERMS];
        for jsonl in H100_FITTED {
            for (key, tokens, times) in timings(jsonl, &hopper()) {
                for (schedule, us) in times {
                    let key = key.with_schedule(schedule);
                    let rounds = rounds(&key, tokens, &hopper()) as f64;
                    let row = round_terms(&key).map(|n| n * rounds / us);
                    for i in 0..MODEL_TERMS {
                        sums[i] += row[i];
                        for j in 0..MODEL_TERMS {
                            normal[i][j] += row[i] * row[j];
                        }
                    }
                }
            }
        }
        let fitted = solve(normal, sums);
        for (i, (shipped, fitted)) in MODEL_US.iter().zip(fitted).enumerate() {
            assert!(
                (shipped - fitted).abs() <= 0.02 * fitted,
                "MODEL_US[{i}] is {shipped}; the fit gives {fitted:.3}"
            );
        }
    }

    /// `a x = b` by Gaussian elimination with partial pivoting (`a` nonsingular).
    fn solve<const N: usize>(mut a: [[f64; N]; N], mut b: [f64; N]) -> [f64; N] {
        for col in 0..N {
            let pivot = (col..N)
                .max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))
                .unwrap();
            a.swap(col, pivot);
            b.swap(col, pivot);
            let (above, below) = a.split_at_mut(col + 1);
            let pivot_row = &above[col];
            for (offset, row) in below.iter_mut().enumerate() {
                let factor = row[col] / pivot_row[col];
                for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *x -= factor * p;
                }
                b[col + 1 + offset] -= factor * b[col];
            }
        }
        let mut x = [0.0; N];
        for row in (0..N).rev() {
            let rest: f64 = (row + 1..N).map(|k| a[row][k] * x[k]).sum();
            x[row] = (b[row] - rest) / a[row][row];
        }
        x
    }

    /// The H100 table of revision 7cfb8e0 (`scripts/bench-gpu.sh`) and its sweep at 2 to 24
    /// tokens (`bench_decode --no-chain --tokens ...`): the split schedules' inboxes took
    /// 5-8% off them after the fit; the picks still hold.
    #[test]
    fn the_model_picks_what_the_h100_measured_fastest_with_the_split_inboxes() {
        assert_picks_within_10_percent(include_str!("sweeps/h100-7cfb8e0.jsonl"));
        assert_picks_within_10_percent(include_str!("sweeps/h100-7cfb8e0-tokens.jsonl"));
    }

    /// The H100 table of revision 4e46c92 (`scripts/bench-gpu.sh`), whose streamed clusters
    /// merge through inboxes (`stream3` 3-4% faster at 32 tokens), to which the model was
    /// not fitted.
    #[test]
    fn the_model_picks_what_the_h100_measured_fastest_with_the_streamed_inboxes() {
        assert_picks_within_10_percent(include_str!("sweeps/h100-4e46c92.jsonl"));
    }

    /// A sweep of every schedule at 1 to 16 tokens on an H100 (`bench_decode --no-chain
    /// --tokens ...`) of the split clusters of 16 heads (revision f36b313's kernels but for
    /// where thread 0 expects its inbox's bytes), to which the model was not fitted: its
    /// pick is the fastest in all 64 configurations. Then the table of revision 425b138
    /// (`scripts/bench-gpu.sh`, those kernels as they landed): the fastest in all 40 rows.
    #[test]
    fn the_model_picks_what_the_h100_measured_fastest_with_16_head_split_clusters() {
        assert_picks_within_10_percent(include_str!("sweeps/h100-f36b313-tokens.jsonl"));
        assert_picks_within_10_percent(include_str!("sweeps/h100-425b138.jsonl"));
    }

    /// The H100 table of revision e6934cb (`scripts/bench-gpu.sh`), whose two-team streamed
    /// CTAs merge a head a warp (1-2% faster from 64 tokens), to which the model was not
    /// fitted: the fastest in all 40 rows.
    #[test]
    fn the_model_picks_what_the_h100_measured_fastest_with_a_head_a_warp_in_the_merge() {
        assert_picks_within_10_percent(include_str!("sweeps/h100-e6934cb.jsonl"));
    }

    /// The H100 tables of revision bb25223 (`scripts/bench-gpu.sh`, stopped by the device's
    /// time limit after 24 configurations) and of 01df333 (the same kernels, all 40 in two
    /// parts; the first part's rows from its printed table, to 0.1 us), whose two-team CTAs
    /// meet at their own barriers before the CTA's: the fastest in every configuration.
    #[test]
    fn the_model_picks_what_the_h100_measured_fastest_with_the_team_barriers() {
        assert_picks_within_10_percent(include_str!("sweeps/h100-bb25223.jsonl"));
        assert_picks_within_10_percent(include_str!("sweeps/h100-01df333.jsonl"));
    }

    /// A sweep of every schedule at 1 to 16 tokens on an H100 (`bench_decode --no-chain
    /// --tokens 1,2,4,8,16`) of revision 0c68bb8, whose split CTAs of 64 live rows split S
    /// over K, to which the model was not fitted: its pick is the fastest in all 40
    /// configurations.
    #[test]
    fn the_model_picks_what_the_h100_measured_fastest_with_s_split_over_k() {
        assert_picks_within_10_percent(include_str!("sweeps/h100-0c68bb8-tokens.jsonl"));
    }

    /// The H200 tables of revisions fe8b635 and 3d2a3d0 in docs/performance.md
    /// (`scripts/bench-gpu.sh`; no 32-head streamed CTA then), to which the model was not
    /// fitted.
    #[test]
    fn the_model_picks_what_the_h200_measured_fastest() {
        assert_picks_within_10_percent(include_str!("sweeps/h200-fe8b635.jsonl"));
        assert_picks_within_10_percent(include_str!("sweeps/h200-3d2a3d0.jsonl"));
    }

    #[test]
    fn snapshot_keys_are_valid_and_distinct() {
        assert_eq!(snapshot_keys(Target::Sm90a).len(), 22);
        let keys = snapshot_keys(Target::Sm100a);
        assert_eq!(keys.len(), 21);
        for k in &keys {
            k.validate().unwrap();
        }
        let names: std::collections::BTreeSet<String> =
            keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(names.len(), keys.len());
        assert!(keys.iter().any(|k| k.cluster_size() == 1));
    }
}
