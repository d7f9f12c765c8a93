//! From runtime shapes to compile keys: `dispatch` for one call, `warmup_keys` for
//! everything a layer can hit, and the key set the PTX snapshots pin.

use dsl_core::Target;

use crate::swap_ab_decode::key::MIN_MMA_HEADS;
use crate::swap_ab_decode::{CompileKey, ExtraRecord, KeyError, Schedule, TILE};

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

/// The key of a call of `tokens` query tokens with these shapes on `target`, validated:
/// of the schedules the key allows ([`Schedule::candidates`]), the one whose launch the
/// model of [`modelled_us`] says is shortest.
///
/// ```
/// use dsl_core::Target;
/// use kernels::swap_ab_decode::{LayerShape, Schedule, dispatch, warmup_keys};
///
/// let shape = LayerShape {
///     heads: 16,
///     swa_width: 128,
///     extra_width: 512,
///     extra_record_bytes: 528,
///     swa_page: 64,
///     extra_page: 16,
/// };
/// let one = dispatch(&shape, 1, Target::Sm90a)?;
/// let some = dispatch(&shape, 64, Target::Sm90a)?;
/// let many = dispatch(&shape, 512, Target::Sm90a)?;
/// assert_eq!(one.schedule, Schedule::Split { extra_rows: 64 });
/// assert_eq!(some.schedule, Schedule::streamed(2));
/// assert_eq!(many.schedule, Schedule::STREAMED);
/// assert!(warmup_keys(&shape, Target::Sm90a)?.contains(&some));
/// # Ok::<(), kernels::swap_ab_decode::KeyError>(())
/// ```
pub fn dispatch(shape: &LayerShape, tokens: usize, target: Target) -> Result<CompileKey, KeyError> {
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
    let mut best: Option<(f64, CompileKey)> = None;
    let mut first_error = None;
    for schedule in Schedule::candidates() {
        let key = base.with_schedule(schedule);
        match key.validate() {
            Ok(()) => {
                let us = modelled_us(&key, tokens);
                if best.is_none_or(|(b, _)| us < b) {
                    best = Some((us, key));
                }
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match (best, first_error) {
        (Some((_, key)), _) => Ok(key),
        (None, Some(e)) => Err(e),
        (None, None) => unreachable!("Schedule::candidates is never empty"),
    }
}

/// The modelled time of a launch of `key` for `tokens` tokens, in microseconds of an H200
/// at 1.98 GHz: rounds of the CTAs the GPU holds at once (`ctas_at_once`) times the time of
/// one CTA. The constants are fitted to `examples/bench_decode.rs --tokens 8,16,...,128`
/// on the H200 (every schedule, 16 and 32 heads, NE 512 and 1024);
/// the model picks what was measured fastest there, or one within 10% of it. Only the
/// ratios between schedules matter; sm_100a assumes a B200's SM count and the same ratios
/// (not measured).
pub fn modelled_us(key: &CompileKey, tokens: usize) -> f64 {
    /// A split CTA (one tile, the cluster merge), with 128- and 64-row compressed tiles, by
    /// the MMAs' head count (16 or 32).
    const SPLIT_CTA_US: [[f64; 2]; 2] = [[11.6, 17.0], [10.7, 14.7]];
    /// A streamed CTA: its setup and epilogue, each 128-row tile, and the cluster merge.
    const STREAM_START_US: f64 = 3.5;
    const STREAM_TILE_US: f64 = 7.35;
    const CLUSTER_MERGE_US: f64 = 2.0;
    /// A streamed CTA of 32 heads against one of 16, per tile, by compressed record
    /// (fp8, NVFP4): one team of warps, its tile ahead in registers (fp8's stage does not
    /// fit beside a 32-head CTA's buffers), one dequant for twice the heads. Fitted to
    /// timings on an H100 at H=32 NE 512 s_q 512 (the test below has them).
    const STREAM_32_HEADS_TILE: [f64; 2] = [1.77, 1.7];
    let cluster = key.cluster_size();
    let ctas = tokens * key.head_groups() * cluster;
    let rounds = ctas.div_ceil(ctas_at_once(key.target, cluster)) as f64;
    let per_cta = match key.schedule {
        Schedule::Split { extra_rows } => {
            let heads = usize::from(key.mma_heads() > 16);
            SPLIT_CTA_US[usize::from(extra_rows < TILE)][heads]
        }
        Schedule::Streamed { ctas, cta_heads } => {
            let merge = if ctas > 1 { CLUSTER_MERGE_US } else { 0.0 };
            let tile = if cta_heads > MIN_MMA_HEADS {
                STREAM_TILE_US
                    * STREAM_32_HEADS_TILE[usize::from(key.extra_record == ExtraRecord::Nvfp4)]
            } else {
                STREAM_TILE_US
            };
            STREAM_START_US + merge + key.tiles().div_ceil(ctas) as f64 * tile
        }
    };
    rounds * per_cta
}

/// CTAs of `cluster`-CTA clusters that run at once, one a SM (every key takes more than
/// half of an SM's shared memory). A cluster's CTAs share a GPC, so larger clusters leave
/// SMs idle: on the H200 (132 SMs) 128 CTAs in pairs ran in one round, 96 in clusters of
/// 3, 4 and 6 did but 128 in clusters of 4 did not, and 80 in clusters of 10 did not.
fn ctas_at_once(target: Target, cluster: usize) -> usize {
    let sms = match target {
        Target::Sm90a => 132,
        Target::Sm100a => 148,
    };
    let usable = match cluster {
        1 | 2 => sms,
        3..=8 => sms * 9 / 10,
        _ => sms * 11 / 20,
    };
    (usable / cluster).max(1) * cluster
}

/// Every key a layer of this shape can hit on `target`, whatever its token count: compile
/// these at start-up and no decode step compiles (the token count is a grid dimension;
/// it only picks the schedule).
pub fn warmup_keys(shape: &LayerShape, target: Target) -> Result<Vec<CompileKey>, KeyError> {
    let mut keys: Vec<CompileKey> = Vec::new();
    // Past a few waves of the largest GPU every schedule's time grows in proportion to
    // the token count, so the pick no longer changes.
    for tokens in 1..=WARMUP_TOKENS {
        let key = dispatch(shape, tokens, target)?;
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    Ok(keys)
}

/// Token counts [`warmup_keys`] tries.
const WARMUP_TOKENS: usize = 2048;

/// The keys whose PTX is kept as reviewed snapshots. Split: heads {16, 32} x {fp8, NVFP4}
/// x (NK, NE) in {(128, 512), (128, 1024)} with 64-slot pages, partial tiles (NK 100,
/// NE 300) and the smallest cluster (NK 64, NE 0). Streamed by one CTA: both record formats
/// at (128, 512), partial tiles, and no compressed list; by a cluster: 2 CTAs at (128, 512)
/// fp8, 3 over partial NVFP4 tiles; by one CTA of 32 heads (sm_90a): 32 heads NVFP4 at
/// (128, 512); split with 64-row compressed tiles: 16 heads fp8 at (128, 512) and 32 heads
/// NVFP4 over partial tiles.
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
    let half_tiles = Schedule::Split { extra_rows: 64 };
    keys.push(key(16, 128, 512, ExtraRecord::Fp8).with_schedule(half_tiles));
    keys.push(key(32, 100, 300, ExtraRecord::Nvfp4).with_schedule(half_tiles));
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

    #[test]
    fn dispatch_builds_and_checks_the_key() {
        let key = dispatch(&shape(), 1, Target::Sm100a).unwrap();
        assert_eq!(key.extra_record, ExtraRecord::Nvfp4);
        // One token: split into half tiles, 2 SWA and 8 compressed CTAs.
        let half_tiles = Schedule::Split { extra_rows: 64 };
        assert_eq!((key.schedule, key.cluster_size()), (half_tiles, 10));
        let some = dispatch(&shape(), 16, Target::Sm100a).unwrap();
        assert_eq!((some.schedule, some.cluster_size()), (Schedule::SPLIT, 6));
        let many = dispatch(&shape(), 4096, Target::Sm100a).unwrap();
        assert_eq!(many, key.with_schedule(Schedule::STREAMED));
        let bad = LayerShape {
            extra_record_bytes: 300,
            ..shape()
        };
        assert_eq!(
            dispatch(&bad, 1, Target::Sm100a),
            Err(KeyError::Record { bytes: 300 })
        );
        let bad = LayerShape {
            heads: 24,
            ..shape()
        };
        assert_eq!(
            dispatch(&bad, 1, Target::Sm90a),
            Err(KeyError::Heads { heads: 24 })
        );
        let bad = LayerShape {
            swa_page: 48,
            ..shape()
        };
        assert!(matches!(
            dispatch(&bad, 1, Target::Sm90a),
            Err(KeyError::Page { page: 48, .. })
        ));
        let long = LayerShape {
            extra_width: 2048,
            ..shape()
        };
        // 17 tiles are more than a split cluster holds: a cluster of 4 streams them.
        let key = dispatch(&long, 1, Target::Sm90a).unwrap();
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
            dispatch(&bad, 1, Target::Sm90a),
            Err(KeyError::Cluster { tiles: 0, .. })
        ));
    }

    #[test]
    fn warmup_has_the_key_of_every_token_count() {
        let keys = warmup_keys(&shape(), Target::Sm90a).unwrap();
        // Every token count a launch takes, past the ones warm-up tries.
        for tokens in 1..=crate::swap_ab_decode::host::MAX_TOKENS {
            assert!(keys.contains(&dispatch(&shape(), tokens, Target::Sm90a).unwrap()));
        }
        let schedules: Vec<Schedule> = keys.iter().map(|k| k.schedule).collect();
        assert_eq!(
            schedules,
            [
                Schedule::Split { extra_rows: 64 },
                Schedule::SPLIT,
                Schedule::streamed(2),
                Schedule::STREAMED,
                Schedule::STREAMED_32_HEADS
            ]
        );
    }

    const NOT_TIMED: f64 = f64::NAN;

    /// Split, split with 64-row compressed tiles, and streamed by 1 to 4 CTAs of 16 heads:
    /// the schedules of the sweeps timed before 32-head streamed CTAs existed.
    const SIXTEEN_HEAD_SCHEDULES: [Schedule; 6] = [
        Schedule::SPLIT,
        Schedule::Split { extra_rows: 64 },
        Schedule::STREAMED,
        Schedule::streamed(2),
        Schedule::streamed(3),
        Schedule::streamed(4),
    ];

    /// Per (heads, NE, compressed record bytes, s_q): the medians in microseconds of each
    /// of a sweep's schedules, as timed on the GPU.
    type Sweep<const N: usize> = [(usize, usize, usize, usize, [f64; N])];

    /// For every row of `sweep`, the schedule the model finds shortest among the sweep's
    /// `schedules` that the row's key takes must be one it timed, within 10% of the
    /// fastest; where the sweep timed every candidate, that is [`dispatch`]'s pick.
    fn assert_picks_within_10_percent<const N: usize>(schedules: [Schedule; N], sweep: &Sweep<N>) {
        let every_candidate = Schedule::candidates().all(|c| schedules.contains(&c));
        for &(heads, extra_width, extra_record_bytes, tokens, times) in sweep {
            let layer = LayerShape {
                heads,
                extra_width,
                extra_record_bytes,
                ..shape()
            };
            let key = dispatch(&layer, tokens, Target::Sm90a).unwrap();
            let mut picked: Option<(f64, Schedule)> = None;
            for schedule in Schedule::candidates().filter(|c| schedules.contains(c)) {
                let candidate = key.with_schedule(schedule);
                let us = modelled_us(&candidate, tokens);
                if candidate.validate().is_ok() && picked.is_none_or(|(best, _)| us < best) {
                    picked = Some((us, schedule));
                }
            }
            let (_, picked) = picked.unwrap();
            if every_candidate {
                assert_eq!(picked, key.schedule);
            }
            let at = schedules.iter().position(|s| *s == picked).unwrap();
            let fastest = times.iter().cloned().fold(f64::INFINITY, f64::min);
            assert!(
                times[at] <= 1.1 * fastest,
                "{heads} heads, NE {extra_width}, {extra_record_bytes}-byte records, {tokens} \
                 tokens: picked {picked:?} at {} us, the fastest took {fastest} us",
                times[at]
            );
        }
    }

    /// The H200 sweeps the model is fitted to (`bench_decode --quick --tokens ...`, fp8,
    /// NK 128; split with 64-row compressed tiles where the second sweep timed it).
    #[test]
    fn the_model_picks_what_the_h200_measured_fastest() {
        assert_picks_within_10_percent(
            SIXTEEN_HEAD_SCHEDULES,
            &[
                (16, 512, 528, 1, [11.9, 11.0, 39.5, 25.8, 20.2, 19.3]),
                (16, 512, 528, 8, [12.3, 19.4, 40.3, 25.8, 20.5, 19.3]),
                (16, 512, 528, 16, [13.4, 29.0, 42.2, 27.2, 22.0, 20.7]),
                (16, 512, 528, 24, [22.5, NOT_TIMED, 42.1, 28.1, 22.3, 21.1]),
                (16, 512, 528, 32, [23.2, NOT_TIMED, 42.6, 27.9, 23.0, 37.0]),
                (16, 512, 528, 48, [32.8, NOT_TIMED, 42.6, 28.8, 40.9, 37.7]),
                (16, 512, 528, 64, [42.0, NOT_TIMED, 43.4, 29.2, 41.2, 53.8]),
                (16, 512, 528, 96, [60.4, NOT_TIMED, 44.3, 52.7, 59.5, 70.9]),
                (16, 512, 528, 128, [78.9, NOT_TIMED, 44.9, 54.0, 78.0, 88.0]),
                (32, 512, 528, 1, [16.7, 14.4, 40.2, 25.8, 20.3, 19.3]),
                (32, 512, 528, 8, [17.5, 25.9, 40.9, 26.6, 20.7, 19.7]),
                (32, 512, 528, 16, [18.6, 39.9, 42.2, 27.9, 22.4, 36.6]),
                (32, 512, 528, 32, [32.8, NOT_TIMED, 42.9, 28.7, 40.3, 53.1]),
                (32, 512, 528, 64, [60.9, NOT_TIMED, 44.2, 52.8, 76.4, 86.4]),
                (
                    32,
                    512,
                    528,
                    128,
                    [120.3, NOT_TIMED, 84.6, 102.2, 133.7, 155.1],
                ),
                (16, 1024, 528, 8, [23.3, NOT_TIMED, 69.7, 40.5, 28.8, 27.1]),
                (16, 1024, 528, 16, [33.2, NOT_TIMED, 69.9, 41.3, 29.3, 27.6]),
                (16, 1024, 528, 32, [52.9, NOT_TIMED, 70.1, 41.6, 30.2, 50.8]),
                (
                    16,
                    1024,
                    528,
                    64,
                    [100.6, NOT_TIMED, 71.3, 43.2, 55.9, 74.1],
                ),
                (
                    16,
                    1024,
                    528,
                    128,
                    [189.0, NOT_TIMED, 72.8, 80.8, 105.9, 121.5],
                ),
                (32, 1024, 528, 16, [46.3, NOT_TIMED, 69.9, 41.2, 29.6, 50.0]),
                (32, 1024, 528, 32, [75.1, NOT_TIMED, 70.7, 42.5, 54.6, 73.2]),
            ],
        );
    }

    /// The README's H200 table of revision fe8b635 (`scripts/bench-gpu.sh`: 200 replays,
    /// every schedule; fp8 and NVFP4 compressed records, NK 128), to which the model was not
    /// fitted (its pick was the fastest in all 40 rows there).
    #[test]
    fn the_model_picks_what_the_h200_measured_fastest_at_fe8b635() {
        assert_picks_within_10_percent(SIXTEEN_HEAD_SCHEDULES, SWEEP_FE8B635);
    }

    #[rustfmt::skip]
    const SWEEP_FE8B635: &Sweep<6> = &[
        (16, 512, 528, 1, [12.1, 11.4, 30.1, 20.1, 18.5, 15.9]),
        (16, 512, 528, 32, [22.1, 44.0, 30.5, 20.4, 19.5, 28.7]),
        (16, 512, 528, 64, [39.8, 82.9, 30.4, 21.2, 34.7, 41.6]),
        (16, 512, 528, 128, [74.7, 154.4, 31.7, 38.5, 65.8, 67.7]),
        (16, 512, 528, 512, [272.0, 587.4, 109.6, 139.3, 216.5, 231.0]),
        (16, 1024, 528, 1, [12.8, NOT_TIMED, 46.7, 28.0, 23.0, 19.7]),
        (16, 1024, 528, 32, [51.1, NOT_TIMED, 46.4, 28.4, 24.6, 36.6]),
        (16, 1024, 528, 64, [97.0, NOT_TIMED, 46.3, 29.2, 44.8, 53.7]),
        (16, 1024, 528, 128, [181.3, NOT_TIMED, 47.7, 54.4, 85.1, 87.8]),
        (16, 1024, 528, 512, [691.3, NOT_TIMED, 172.7, 203.6, 283.6, 301.5]),
        (32, 512, 528, 1, [15.0, 14.2, 30.0, 20.0, 18.7, 15.7]),
        (32, 512, 528, 32, [28.9, 58.9, 30.3, 20.9, 34.5, 40.6]),
        (32, 512, 528, 64, [52.8, 113.4, 31.6, 37.1, 64.1, 66.1]),
        (32, 512, 528, 128, [100.8, 215.1, 57.0, 71.1, 111.4, 118.3]),
        (32, 512, 528, 512, [373.0, 826.6, 207.2, 270.0, 414.3, 442.8]),
        (32, 1024, 528, 1, [15.8, NOT_TIMED, 45.9, 27.9, 23.3, 19.9]),
        (32, 1024, 528, 32, [66.2, NOT_TIMED, 45.9, 28.9, 44.0, 52.5]),
        (32, 1024, 528, 64, [128.3, NOT_TIMED, 47.9, 53.5, 84.2, 86.3]),
        (32, 1024, 528, 128, [241.6, NOT_TIMED, 88.7, 104.1, 146.3, 154.7]),
        (32, 1024, 528, 512, [929.6, NOT_TIMED, 331.0, 396.3, 542.6, 578.4]),
        (16, 512, 288, 1, [11.6, 10.9, 31.0, 20.3, 18.6, 16.1]),
        (16, 512, 288, 32, [21.0, 42.8, 31.4, 20.8, 19.5, 29.1]),
        (16, 512, 288, 64, [37.7, 81.2, 31.4, 21.2, 34.9, 42.0]),
        (16, 512, 288, 128, [70.8, 151.6, 32.4, 38.3, 65.2, 68.0]),
        (16, 512, 288, 512, [259.6, 580.3, 112.4, 141.2, 220.0, 233.4]),
        (16, 1024, 288, 1, [12.3, NOT_TIMED, 48.7, 28.7, 23.4, 20.2]),
        (16, 1024, 288, 32, [48.6, NOT_TIMED, 48.5, 29.2, 24.5, 37.1]),
        (16, 1024, 288, 64, [92.5, NOT_TIMED, 48.3, 29.7, 44.7, 54.1]),
        (16, 1024, 288, 128, [172.4, NOT_TIMED, 48.9, 55.6, 85.7, 88.9]),
        (16, 1024, 288, 512, [657.6, NOT_TIMED, 177.7, 206.4, 287.0, 306.8]),
        (32, 512, 288, 1, [14.5, 13.7, 30.2, 20.3, 18.7, 15.8]),
        (32, 512, 288, 32, [27.5, 57.3, 30.8, 21.1, 34.5, 41.2]),
        (32, 512, 288, 64, [50.4, 110.4, 31.8, 37.8, 64.4, 66.5]),
        (32, 512, 288, 128, [95.5, 207.9, 57.7, 71.6, 110.5, 118.1]),
        (32, 512, 288, 512, [356.3, 805.1, 213.1, 274.8, 420.7, 449.0]),
        (32, 1024, 288, 1, [15.1, NOT_TIMED, 46.9, 28.6, 23.6, 20.1]),
        (32, 1024, 288, 32, [63.5, NOT_TIMED, 47.1, 29.6, 44.2, 53.5]),
        (32, 1024, 288, 64, [122.1, NOT_TIMED, 48.2, 54.4, 83.9, 87.2]),
        (32, 1024, 288, 128, [231.7, NOT_TIMED, 90.4, 106.0, 146.5, 157.2]),
        (32, 1024, 288, 512, [891.1, NOT_TIMED, 344.1, 406.0, 549.7, 591.2]),
    ];

    /// The README's H200 table of revision 3d2a3d0 (`scripts/bench-gpu.sh`, as above), to
    /// which the model was not fitted either (its pick was the fastest in all 40 rows).
    #[test]
    fn the_model_picks_what_the_h200_measured_fastest_at_3d2a3d0() {
        assert_picks_within_10_percent(SIXTEEN_HEAD_SCHEDULES, SWEEP_3D2A3D0);
    }

    #[rustfmt::skip]
    const SWEEP_3D2A3D0: &Sweep<6> = &[
        (16, 512, 528, 1, [11.9, 11.3, 29.0, 18.7, 17.7, 15.0]),
        (16, 512, 528, 32, [22.4, 43.5, 28.9, 19.2, 19.0, 27.1]),
        (16, 512, 528, 64, [40.3, 81.9, 29.1, 20.1, 33.3, 39.2]),
        (16, 512, 528, 128, [74.6, 152.4, 30.5, 36.1, 62.1, 63.5]),
        (16, 512, 528, 512, [272.9, 582.1, 103.7, 131.1, 205.4, 218.0]),
        (16, 512, 288, 1, [11.4, 11.2, 30.0, 19.2, 17.8, 15.2]),
        (16, 512, 288, 32, [21.2, 42.9, 29.9, 19.6, 19.0, 27.4]),
        (16, 512, 288, 64, [37.5, 81.1, 29.8, 20.4, 33.6, 39.7]),
        (16, 512, 288, 128, [69.5, 151.0, 31.0, 36.5, 62.7, 64.4]),
        (16, 512, 288, 512, [254.9, 578.9, 107.0, 133.3, 209.7, 219.9]),
        (16, 1024, 528, 1, [12.9, NOT_TIMED, 44.9, 26.9, 22.2, 18.8]),
        (16, 1024, 528, 32, [51.7, NOT_TIMED, 44.6, 27.0, 23.7, 35.0]),
        (16, 1024, 528, 64, [98.0, NOT_TIMED, 44.6, 27.9, 42.8, 51.1]),
        (16, 1024, 528, 128, [183.3, NOT_TIMED, 46.1, 52.4, 81.2, 83.5]),
        (16, 1024, 528, 512, [698.3, NOT_TIMED, 166.3, 194.8, 271.3, 287.0]),
        (16, 1024, 288, 1, [12.4, NOT_TIMED, 46.9, 28.0, 22.9, 19.3]),
        (16, 1024, 288, 32, [48.7, NOT_TIMED, 46.6, 28.0, 24.0, 35.7]),
        (16, 1024, 288, 64, [92.3, NOT_TIMED, 46.5, 28.6, 43.3, 51.9]),
        (16, 1024, 288, 128, [172.6, NOT_TIMED, 47.6, 53.5, 82.4, 85.3]),
        (16, 1024, 288, 512, [658.6, NOT_TIMED, 172.8, 199.6, 278.3, 295.7]),
        (32, 512, 528, 1, [14.5, 13.7, 28.7, 18.7, 17.9, 15.3]),
        (32, 512, 528, 32, [28.4, 55.6, 28.7, 19.6, 32.7, 38.6]),
        (32, 512, 528, 64, [51.6, 107.1, 29.8, 34.8, 60.7, 62.4]),
        (32, 512, 528, 128, [97.5, 202.3, 54.0, 67.0, 105.8, 112.6]),
        (32, 512, 528, 512, [362.6, 775.9, 197.3, 253.8, 395.2, 422.1]),
        (32, 512, 288, 1, [14.0, 13.3, 29.5, 19.3, 18.0, 15.5]),
        (32, 512, 288, 32, [27.5, 54.1, 29.5, 20.0, 33.1, 39.2]),
        (32, 512, 288, 64, [49.7, 103.9, 30.6, 35.8, 61.4, 63.4]),
        (32, 512, 288, 128, [92.7, 195.7, 55.1, 67.4, 105.6, 112.6]),
        (32, 512, 288, 512, [348.6, 757.6, 203.3, 260.3, 403.2, 428.5]),
        (32, 1024, 528, 1, [15.5, NOT_TIMED, 44.3, 26.7, 22.5, 19.1]),
        (32, 1024, 528, 32, [64.2, NOT_TIMED, 44.3, 27.7, 42.3, 50.3]),
        (32, 1024, 528, 64, [124.2, NOT_TIMED, 45.8, 51.5, 81.0, 83.2]),
        (32, 1024, 528, 128, [234.8, NOT_TIMED, 85.4, 99.8, 140.6, 148.5]),
        (32, 1024, 528, 512, [902.3, NOT_TIMED, 321.4, 380.5, 521.7, 556.9]),
        (32, 1024, 288, 1, [14.9, NOT_TIMED, 46.1, 27.7, 23.0, 19.5]),
        (32, 1024, 288, 32, [61.3, NOT_TIMED, 45.9, 28.3, 42.7, 51.5]),
        (32, 1024, 288, 64, [118.1, NOT_TIMED, 47.5, 52.6, 81.3, 84.4]),
        (32, 1024, 288, 128, [223.6, NOT_TIMED, 88.3, 102.7, 141.8, 151.8]),
        (32, 1024, 288, 512, [859.5, NOT_TIMED, 333.0, 393.2, 532.1, 573.1]),
    ];

    /// 32 heads, NK 128: streamed CTAs of 16 heads against one of 32, timed in one run on
    /// an H100 (`bench_decode --quick`, 5 replays, twice, the mean of the two medians; the
    /// 32-head figures also fit the model's `STREAM_32_HEADS_TILE`).
    #[test]
    fn the_model_picks_what_the_h100_measured_fastest_for_32_head_ctas() {
        assert_picks_within_10_percent(
            [Schedule::STREAMED, Schedule::STREAMED_32_HEADS],
            &[
                (32, 512, 528, 512, [197.4, 168.5]),
                (32, 512, 288, 512, [203.4, 166.3]),
            ],
        );
    }

    #[test]
    fn snapshot_keys_are_valid_and_distinct() {
        assert_eq!(snapshot_keys(Target::Sm90a).len(), 21);
        let keys = snapshot_keys(Target::Sm100a);
        assert_eq!(keys.len(), 20);
        for k in &keys {
            k.validate().unwrap();
        }
        let names: std::collections::BTreeSet<String> =
            keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(names.len(), keys.len());
        assert!(keys.iter().any(|k| k.cluster_size() == 1));
    }
}
