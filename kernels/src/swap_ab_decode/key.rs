//! The compile key: everything the decode kernel is specialised on.

use std::fmt;

use dsl_core::Target;

use super::{FP4_RECORD, FP8_RECORD, MAX_CLUSTER, SWA_ROWS, TILE};

/// Record format of the compressed ("extra") KV list. The SWA list is always fp8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ExtraRecord {
    /// V4.1 fp8 record, 528 bytes.
    Fp8,
    /// V4.1 NVFP4 record, 288 bytes.
    Nvfp4,
}

impl ExtraRecord {
    /// Bytes of one record.
    pub fn bytes(self) -> usize {
        match self {
            ExtraRecord::Fp8 => FP8_RECORD,
            ExtraRecord::Nvfp4 => FP4_RECORD,
        }
    }

    /// The record format of `bytes`-byte records, if it is one.
    pub fn from_bytes(bytes: usize) -> Result<Self, KeyError> {
        match bytes {
            FP8_RECORD => Ok(ExtraRecord::Fp8),
            FP4_RECORD => Ok(ExtraRecord::Nvfp4),
            bytes => Err(KeyError::Record { bytes }),
        }
    }

    /// `fp8` or `nvfp4`, as in key names.
    pub fn short_name(self) -> &'static str {
        match self {
            ExtraRecord::Fp8 => "fp8",
            ExtraRecord::Nvfp4 => "nvfp4",
        }
    }
}

/// How a token's KV tiles are spread over CTAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Schedule {
    /// A cluster of C CTAs per token and group of up to `cta_heads` heads (32, or 16 for
    /// keys of 32 heads and more), one KV tile each (64 SWA rows, or `extra_rows` compressed
    /// rows: 128, or 64 for twice the CTAs with half the rows each), merged over distributed
    /// shared memory: the shortest chain per token, for steps with too few tokens to fill
    /// the GPU. Groups of 16 heads give a token twice the clusters, each with half the MMA
    /// columns, a 16-head partial and an inbox that fits ([`Schedule::SPLIT_16_HEADS`]).
    Split { extra_rows: usize, cta_heads: usize },
    /// A cluster of `ctas` CTAs per token and group of `cta_heads` heads (16, or 32 on
    /// sm_90a): each streams every `ctas`-th of the token's 128-row tiles (on sm_90a with 16
    /// heads, two teams of warps a CTA each stream 64-row tiles) through a software pipeline
    /// (the next tile's records in flight while the current one computes) with an online
    /// softmax, and the cluster merges the CTAs' partials over distributed shared memory as
    /// split does. One CTA ([`Schedule::STREAMED`]) for steps with enough tokens to fill the
    /// GPU, 2-4 for steps between. With 32 heads a CTA, one team of warps reads and
    /// dequantises a token's records once for all 32 heads, where two groups of 16 do it
    /// twice ([`Schedule::STREAMED_32_HEADS`]).
    Streamed { ctas: usize, cta_heads: usize },
}

impl Schedule {
    /// Split with 128-row compressed tiles.
    pub const SPLIT: Schedule = Schedule::Split {
        extra_rows: TILE,
        cta_heads: MAX_HEADS_PER_CLUSTER,
    };
    /// Split with 64-row compressed tiles.
    pub const SPLIT_HALF_TILES: Schedule = Schedule::Split {
        extra_rows: SWA_ROWS,
        cta_heads: MAX_HEADS_PER_CLUSTER,
    };
    /// Split with 128-row compressed tiles, a cluster for every 16 heads (keys of 32 heads
    /// and more): a 32-head CTA's partial (64 KiB) leaves no room for the merge's inbox, so
    /// its cluster pulls the peers' units after a releasing cluster barrier, and its MMAs
    /// and softmax take twice the columns on the token's one dependent chain. Two clusters
    /// of 16 heads run that chain side by side, each dequantising the token's records (the
    /// second mostly from L2), where the SMs would otherwise idle.
    ///
    /// ```
    /// use kernels::swap_ab_decode::{CompileKey, KeyError, Schedule};
    ///
    /// let key: CompileKey = "h32_nk128_ne512_fp8_p64x64_split64h16_sm90a".parse()?;
    /// assert_eq!(key.head_groups(), 2);
    /// // 16 heads are one group of 16 already: that is `split64`.
    /// let small = CompileKey { heads: 16, ..key };
    /// assert!(matches!(small.validate(), Err(KeyError::SplitHeads { .. })));
    /// # Ok::<(), KeyError>(())
    /// ```
    pub const SPLIT_16_HEADS: Schedule = Schedule::Split {
        extra_rows: TILE,
        cta_heads: MIN_MMA_HEADS,
    };
    /// Split with 64-row compressed tiles, a cluster for every 16 heads (keys of 32 heads
    /// and more; [`Schedule::SPLIT_16_HEADS`] says why).
    ///
    /// ```
    /// use kernels::swap_ab_decode::{CompileKey, Schedule};
    ///
    /// let key: CompileKey = "h32_nk128_ne512_nvfp4_p64x64_split64h16_sm90a".parse()?;
    /// assert_eq!(key.schedule, Schedule::SPLIT_HALF_TILES_16_HEADS);
    /// // 2 SWA and 8 compressed CTAs a cluster, a cluster for each 16 of the 32 heads.
    /// assert_eq!((key.cluster_size(), key.head_groups()), (10, 2));
    /// # Ok::<(), kernels::swap_ab_decode::KeyError>(())
    /// ```
    pub const SPLIT_HALF_TILES_16_HEADS: Schedule = Schedule::Split {
        extra_rows: SWA_ROWS,
        cta_heads: MIN_MMA_HEADS,
    };
    /// One CTA streams all of a token's tiles: no cluster, no merge over peers.
    pub const STREAMED: Schedule = Schedule::Streamed {
        ctas: 1,
        cta_heads: MIN_MMA_HEADS,
    };
    /// One CTA streams all of a token's tiles for 32 heads (sm_90a).
    ///
    /// ```
    /// use kernels::swap_ab_decode::{CompileKey, KeyError, Schedule};
    ///
    /// assert_eq!(Schedule::STREAMED_32_HEADS.short_name(), "streamh32");
    /// let key: CompileKey = "h32_nk128_ne512_nvfp4_p64x64_streamh32_sm90a".parse()?;
    /// key.validate()?;
    /// // 16 heads fill no 32-head CTA.
    /// let small = CompileKey { heads: 16, ..key };
    /// assert!(matches!(small.validate(), Err(KeyError::StreamedHeads { .. })));
    /// # Ok::<(), KeyError>(())
    /// ```
    pub const STREAMED_32_HEADS: Schedule = Schedule::Streamed {
        ctas: 1,
        cta_heads: MAX_HEADS_PER_CLUSTER,
    };

    /// Streamed by a cluster of `ctas` CTAs of 16 heads each.
    pub const fn streamed(ctas: usize) -> Schedule {
        Schedule::Streamed {
            ctas,
            cta_heads: MIN_MMA_HEADS,
        }
    }

    /// `split` or `split64`, with `h16` after it for 16 heads a cluster (`splith16`,
    /// `split64h16`); `stream` or `stream<ctas>` (2 and more), with `h32` after it for 32
    /// heads a CTA (`streamh32`, `stream2h32`), as in key names.
    pub fn short_name(self) -> String {
        let (form, count, heads) = match self {
            Schedule::Split {
                extra_rows,
                cta_heads,
            } => (SPLIT_NAME, extra_rows, cta_heads),
            Schedule::Streamed { ctas, cta_heads } => (STREAM_NAME, ctas, cta_heads),
        };
        let unless = |value: usize, default: usize, prefix: &str| {
            if value == default {
                String::new()
            } else {
                format!("{prefix}{value}")
            }
        };
        format!(
            "{}{}{}",
            form.kind,
            unless(count, form.count, ""),
            unless(heads, form.heads, "h")
        )
    }

    /// The schedule a [`Schedule::short_name`] names (`split`, `split64`, `splith16`,
    /// `split64h16`, `stream`, `stream2`, ..., `streamh32`, `stream2h32`, ...).
    pub fn from_short_name(name: &str) -> Option<Schedule> {
        let number = |n: &str| match n {
            n if n.is_empty() || n.starts_with('0') => None,
            n => n.parse::<usize>().ok(),
        };
        let (form, rest) = [SPLIT_NAME, STREAM_NAME]
            .into_iter()
            .find_map(|form| Some((form, name.strip_prefix(form.kind)?)))?;
        // Each part is written only where it is not the default: one name per schedule.
        let (count, heads) = match rest.split_once('h') {
            Some((count, heads)) => (count, number(heads).filter(|h| *h != form.heads)?),
            None => (rest, form.heads),
        };
        let count = match count {
            "" => form.count,
            n => number(n).filter(|c| *c != form.count)?,
        };
        Some((form.make)(count, heads))
    }

    /// The schedules a key may take (each key validates some of them), in the order a tie
    /// between their modelled times goes: split with 128- and with 64-row compressed
    /// tiles, the same with a cluster for every 16 heads, streamed by 1 to
    /// [`MAX_STREAMED_CTAS`] CTAs of 16 heads, then by one CTA of 32 (clusters of 32-head
    /// CTAs trace and run, but no GPU has timed them).
    pub fn candidates() -> impl Iterator<Item = Schedule> + Clone {
        [
            Schedule::SPLIT,
            Schedule::SPLIT_HALF_TILES,
            Schedule::SPLIT_16_HEADS,
            Schedule::SPLIT_HALF_TILES_16_HEADS,
        ]
        .into_iter()
        .chain((1..=MAX_STREAMED_CTAS).map(Schedule::streamed))
        .chain([Schedule::STREAMED_32_HEADS])
    }
}

/// How key names write a kind of schedule: its word, then a count (the split's compressed
/// rows, the streamed cluster's CTAs) and `h` with the heads a cluster or CTA takes, each
/// only where it differs from the kind's default.
#[derive(Clone, Copy)]
struct ScheduleName {
    kind: &'static str,
    count: usize,
    heads: usize,
    make: fn(usize, usize) -> Schedule,
}

const SPLIT_NAME: ScheduleName = ScheduleName {
    kind: "split",
    count: TILE,
    heads: MAX_HEADS_PER_CLUSTER,
    make: |extra_rows, cta_heads| Schedule::Split {
        extra_rows,
        cta_heads,
    },
};

const STREAM_NAME: ScheduleName = ScheduleName {
    kind: "stream",
    count: 1,
    heads: MIN_MMA_HEADS,
    make: |ctas, cta_heads| Schedule::Streamed { ctas, cta_heads },
};

/// The largest streamed cluster [`crate::swap_ab_decode::dispatch()`] considers. At NE 512
/// a cluster of 4 leaves its busiest CTA 3 of a token's 10 tiles of 64 rows, 3 leaves 4;
/// 5 would leave 2 (one a team) with a larger merge, while clusters of 5-8 fit only
/// three quarters of the SMs at once (`host/dispatch.rs`): not built, not measured.
pub const MAX_STREAMED_CTAS: usize = 4;

/// What a decode kernel is compiled for. The token count is a grid dimension, not part of
/// the key: one compiled kernel serves every decode step of a layer shape and schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompileKey {
    /// Live heads per GPU: 16 or 32 (the seed's), or 8, 64, 128 (other tensor-parallel
    /// sizes of the same models).
    pub heads: usize,
    /// Columns of the SWA slot list (NK).
    pub swa_width: usize,
    /// Columns of the compressed slot list (NE).
    pub extra_width: usize,
    /// Record format of the compressed list.
    pub extra_record: ExtraRecord,
    /// Slots per SWA cache page (a power of two).
    pub swa_page: usize,
    /// Slots per compressed cache page (a power of two).
    pub extra_page: usize,
    /// The architecture the kernel is built for.
    pub target: Target,
    /// How the token's tiles are spread over CTAs.
    pub schedule: Schedule,
}

/// Why a set of fields is not a valid [`CompileKey`], or a [`Gpu`] description is not one
/// [`dispatch`] can use.
///
/// [`Gpu`]: crate::swap_ab_decode::Gpu
/// [`dispatch`]: crate::swap_ab_decode::dispatch()
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    #[error("live heads must be 8, 16, 32, 64 or 128, got {heads}")]
    Heads { heads: usize },
    #[error(
        "`{name}` is not a compile key name: expected h<heads>_nk<NK>_ne<NE>_<fp8|nvfp4>_p<swa page>x<extra page>[_<schedule>]_<sm90a|sm100a>, the schedule split64, stream or stream<CTAs> (none: split), split ones with h16 after them for 16 heads a cluster, streamed ones with h32 for 32 heads a CTA (sm90a), e.g. h16_nk128_ne512_fp8_p64x64_sm100a or h16_nk128_ne512_fp8_p64x64_stream_sm100a"
    )]
    Name { name: String },
    #[error(
        "compressed records must be V4.1 fp8 ({FP8_RECORD} bytes) or NVFP4 ({FP4_RECORD} bytes), got {bytes} bytes"
    )]
    Record { bytes: usize },
    #[error("the {list} page size must be a power of two, got {page}")]
    Page { list: &'static str, page: usize },
    #[error(
        "swa_width {swa_width} and extra_width {extra_width} give {tiles} CTAs per token \
         (split: ceil(NK/64) + ceil(NE/128), or ceil(NE/64) with 64-row compressed tiles); a \
         token needs a KV tile and a cluster holds \
         1 to {MAX_CLUSTER}"
    )]
    Cluster {
        swa_width: usize,
        extra_width: usize,
        tiles: usize,
    },
    #[error(
        "a streamed cluster of {ctas} CTAs for {tiles} KV tiles of 128 rows a token: give 1 \
         to min({tiles}, {MAX_CLUSTER}) CTAs, so that every CTA has a tile"
    )]
    StreamedCtas { ctas: usize, tiles: usize },
    #[error("a GPU of {sms} SMs: give the device's SM count")]
    Sms { sms: usize },
    #[error(
        "an SM budget of {sms} for a device of {device_sms} SMs: give between 1 and {device_sms} \
         (the SMs a persistent launch may fill, e.g. fewer to leave some to another stream)"
    )]
    SmBudget { sms: usize, device_sms: usize },
    #[error("split compressed tiles have 64 or 128 rows, got {rows}")]
    SplitRows { rows: usize },
    #[error(
        "a split cluster takes 32 heads, or 16 where the key has 32 or more; got {cta_heads} \
         heads a cluster for {heads} heads: use `split` or `split64` (up to 32 heads a \
         cluster)"
    )]
    SplitHeads { cta_heads: usize, heads: usize },
    #[error(
        "a streamed CTA takes 16 heads, or 32 on sm_90a where the key has 32 or more; got \
         {cta_heads} heads a CTA for {heads} heads on {target}: use `stream` (16 heads a CTA)"
    )]
    StreamedHeads {
        cta_heads: usize,
        heads: usize,
        target: Target,
    },
}

/// The live-head counts the kernel is built for.
pub(crate) fn check_heads(heads: usize) -> Result<(), KeyError> {
    if matches!(heads, 8 | 16 | 32 | 64 | 128) {
        Ok(())
    } else {
        Err(KeyError::Heads { heads })
    }
}

impl CompileKey {
    /// Checks every field; the error says which one is wrong and what is allowed.
    pub fn validate(&self) -> Result<(), KeyError> {
        check_heads(self.heads)?;
        for (list, page) in [("SWA", self.swa_page), ("compressed", self.extra_page)] {
            if !page.is_power_of_two() {
                return Err(KeyError::Page { list, page });
            }
        }
        // A token without a KV tile has no CTA to run it.
        let tiles = self.cluster_size().min(self.tiles());
        if !(1..=MAX_CLUSTER).contains(&tiles) {
            return Err(KeyError::Cluster {
                swa_width: self.swa_width,
                extra_width: self.extra_width,
                tiles,
            });
        }
        if let Schedule::Split {
            extra_rows,
            cta_heads,
        } = self.schedule
        {
            if extra_rows != SWA_ROWS && extra_rows != TILE {
                return Err(KeyError::SplitRows { rows: extra_rows });
            }
            // With fewer than 32 heads a cluster of 16 is the default split's kernel.
            let narrow_ok = cta_heads == MIN_MMA_HEADS && self.heads >= MAX_HEADS_PER_CLUSTER;
            if cta_heads != MAX_HEADS_PER_CLUSTER && !narrow_ok {
                return Err(KeyError::SplitHeads {
                    cta_heads,
                    heads: self.heads,
                });
            }
        }
        if let Schedule::Streamed { ctas, cta_heads } = self.schedule {
            if !(1..=self.tiles().min(MAX_CLUSTER)).contains(&ctas) {
                return Err(KeyError::StreamedCtas {
                    ctas,
                    tiles: self.tiles(),
                });
            }
            // 32 heads a CTA keep the running O^T in registers (sm_90a's wgmma accumulator;
            // sm_100a folds it into a shared-memory partial that does not fit beside the
            // tile), and with fewer heads would compute padding.
            let wide_ok = self.target == Target::Sm90a && self.heads >= MAX_HEADS_PER_CLUSTER;
            if cta_heads != MIN_MMA_HEADS && !(cta_heads == MAX_HEADS_PER_CLUSTER && wide_ok) {
                return Err(KeyError::StreamedHeads {
                    cta_heads,
                    heads: self.heads,
                    target: self.target,
                });
            }
        }
        Ok(())
    }

    /// SWA tiles: KT = ceil(NK / 64) split (cluster ranks `0..KT` take SWA rows), or
    /// ceil(NK / 128) streamed.
    pub fn swa_tiles(&self) -> usize {
        self.swa_width.div_ceil(self.swa_tile_rows())
    }

    /// Rows of an SWA tile: 64 split (two CTAs share the window), 128 streamed.
    pub fn swa_tile_rows(&self) -> usize {
        match self.schedule {
            Schedule::Split { .. } => SWA_ROWS,
            Schedule::Streamed { .. } => TILE,
        }
    }

    /// Rows of a compressed tile: the split schedule's `extra_rows`, 128 streamed.
    pub fn extra_tile_rows(&self) -> usize {
        match self.schedule {
            Schedule::Split { extra_rows, .. } => extra_rows,
            Schedule::Streamed { .. } => TILE,
        }
    }

    /// Compressed tiles (ET = ceil(NE / rows of a compressed tile)).
    pub fn extra_tiles(&self) -> usize {
        self.extra_width.div_ceil(self.extra_tile_rows())
    }

    /// KV tiles of a token (KT + ET).
    pub fn tiles(&self) -> usize {
        self.swa_tiles() + self.extra_tiles()
    }

    /// CTAs per cluster: one per KV tile split (C = KT + ET), `ctas` streamed.
    pub fn cluster_size(&self) -> usize {
        match self.schedule {
            Schedule::Split { .. } => self.tiles(),
            Schedule::Streamed { ctas, .. } => ctas,
        }
    }

    /// Groups of heads that get a cluster each (the grid's z): groups of the schedule's 32
    /// or 16 heads split, 16 or 32 streamed; fewer heads are one group.
    pub fn head_groups(&self) -> usize {
        self.heads.div_ceil(self.max_heads_per_cluster())
    }

    /// The launch grid for `tokens` query tokens on a device of `sms` SMs: (C, Y, head
    /// groups), a cluster of C CTAs per token and group of heads. Y is s_q, except where a
    /// streamed key runs one CTA a token: then the grid is persistent, Y as many tokens as
    /// the SMs hold at once (one CTA an SM), and each CTA walks tokens y, y + Y, ... so that
    /// it loads the next token's inputs and first records while it merges the current one
    /// (`device/stream.rs`).
    ///
    /// ```
    /// use kernels::swap_ab_decode::CompileKey;
    /// let streamed: CompileKey = "h32_nk128_ne512_fp8_p64x64_stream_sm90a".parse()?;
    /// // Two head groups share 132 SMs: 66 CTAs each, walking 512 tokens.
    /// assert_eq!(streamed.grid(512, 132), [1, 66, 2]);
    /// let cluster: CompileKey = "h16_nk128_ne512_fp8_p64x64_stream3_sm90a".parse()?;
    /// assert_eq!(cluster.grid(32, 132), [3, 32, 1]);
    /// # Ok::<(), kernels::swap_ab_decode::KeyError>(())
    /// ```
    pub fn grid(&self, tokens: usize, sms: usize) -> [u32; 3] {
        let groups = self.head_groups();
        let rows = if self.is_persistent() {
            tokens.min((sms / groups).max(1))
        } else {
            tokens
        };
        [self.cluster_size() as u32, rows as u32, groups as u32]
    }

    /// Whether the launch grid is persistent ([`CompileKey::grid`]): a streamed key of one
    /// CTA a token.
    pub fn is_persistent(&self) -> bool {
        matches!(self.schedule, Schedule::Streamed { ctas: 1, .. })
    }

    /// Live heads one cluster computes.
    pub fn heads_per_cluster(&self) -> usize {
        self.heads.min(self.max_heads_per_cluster())
    }

    /// Heads one cluster takes at most: the schedule's 32 or 16.
    pub fn max_heads_per_cluster(&self) -> usize {
        match self.schedule {
            Schedule::Split { cta_heads, .. } | Schedule::Streamed { cta_heads, .. } => cta_heads,
        }
    }

    /// This key with another schedule.
    pub fn with_schedule(self, schedule: Schedule) -> CompileKey {
        CompileKey { schedule, ..self }
    }

    /// Heads the MMAs compute per cluster: the live ones, padded to 16 where fewer (the P
    /// operand's rows of 2H bf16 need at least 32 bytes for a swizzled MN-major layout, and
    /// the softmax gives each of 4 column groups of warps 4 columns at least).
    pub fn mma_heads(&self) -> usize {
        self.heads_per_cluster().max(MIN_MMA_HEADS)
    }
}

/// Heads one cluster takes at most (the TMEM and shared-memory budget of the seed's H = 32).
pub const MAX_HEADS_PER_CLUSTER: usize = 32;
/// Heads the MMAs compute at least; fewer live heads are padded.
pub const MIN_MMA_HEADS: usize = 16;

impl std::str::FromStr for CompileKey {
    type Err = KeyError;

    /// Parses the [`Display`](fmt::Display) name back (`h16_nk128_ne512_fp8_p64x64_sm100a`).
    fn from_str(name: &str) -> Result<Self, KeyError> {
        let bad = || KeyError::Name {
            name: name.to_string(),
        };
        let parts: Vec<&str> = name.split('_').collect();
        let (h, nk, ne, record, pages, schedule, target) = match parts[..] {
            [h, nk, ne, record, pages, target] => {
                (h, nk, ne, record, pages, Schedule::SPLIT, target)
            }
            [h, nk, ne, record, pages, stream, target] => {
                // The default split has no schedule part: one name per key.
                let schedule = Schedule::from_short_name(stream)
                    .filter(|s| *s != Schedule::SPLIT)
                    .ok_or_else(bad)?;
                (h, nk, ne, record, pages, schedule, target)
            }
            _ => return Err(bad()),
        };
        let number = |s: &str, prefix: &str| -> Result<usize, KeyError> {
            s.strip_prefix(prefix)
                .and_then(|n| n.parse().ok())
                .ok_or_else(bad)
        };
        let (swa_page, extra_page) = pages
            .strip_prefix('p')
            .and_then(|p| p.split_once('x'))
            .ok_or_else(bad)?;
        let key = CompileKey {
            heads: number(h, "h")?,
            swa_width: number(nk, "nk")?,
            extra_width: number(ne, "ne")?,
            extra_record: match record {
                "fp8" => ExtraRecord::Fp8,
                "nvfp4" => ExtraRecord::Nvfp4,
                _ => return Err(bad()),
            },
            swa_page: number(swa_page, "")?,
            extra_page: number(extra_page, "")?,
            target: target.parse().map_err(|_| bad())?,
            schedule,
        };
        key.validate()?;
        Ok(key)
    }
}

impl fmt::Display for CompileKey {
    /// A name usable in file names: `h16_nk128_ne512_fp8_p64x64_sm100a` (split),
    /// `..._split64_...` (split into 64-row compressed tiles), `..._split64h16_...` (a
    /// cluster for every 16 heads),
    /// `h16_nk128_ne512_fp8_p64x64_stream_sm100a` (streamed by one CTA), `..._stream2_...`
    /// (by a cluster of two).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "h{}_nk{}_ne{}_{}_p{}x{}_",
            self.heads,
            self.swa_width,
            self.extra_width,
            self.extra_record.short_name(),
            self.swa_page,
            self.extra_page,
        )?;
        if self.schedule != Schedule::SPLIT {
            write!(f, "{}_", self.schedule.short_name())?;
        }
        write!(f, "{}", self.target.short_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let key = CompileKey {
            heads: 64,
            swa_width: 100,
            extra_width: 300,
            extra_record: ExtraRecord::Nvfp4,
            swa_page: 64,
            extra_page: 16,
            target: Target::Sm90a,
            schedule: Schedule::SPLIT,
        };
        let name = key.to_string();
        assert_eq!(name, "h64_nk100_ne300_nvfp4_p64x16_sm90a");
        assert_eq!(name.parse::<CompileKey>(), Ok(key));
        let streamed = key.with_schedule(Schedule::STREAMED);
        assert_eq!(
            streamed.to_string(),
            "h64_nk100_ne300_nvfp4_p64x16_stream_sm90a"
        );
        assert_eq!(streamed.to_string().parse::<CompileKey>(), Ok(streamed));
        let pair = key.with_schedule(Schedule::streamed(2));
        assert_eq!(
            pair.to_string(),
            "h64_nk100_ne300_nvfp4_p64x16_stream2_sm90a"
        );
        assert_eq!(pair.to_string().parse::<CompileKey>(), Ok(pair));
        let half = key.with_schedule(Schedule::SPLIT_HALF_TILES);
        assert_eq!(
            half.to_string(),
            "h64_nk100_ne300_nvfp4_p64x16_split64_sm90a"
        );
        assert_eq!(half.to_string().parse::<CompileKey>(), Ok(half));
        let wide = key.with_schedule(Schedule::Streamed {
            ctas: 2,
            cta_heads: 32,
        });
        assert_eq!(
            wide.to_string(),
            "h64_nk100_ne300_nvfp4_p64x16_stream2h32_sm90a"
        );
        assert_eq!(wide.to_string().parse::<CompileKey>(), Ok(wide));
        let wide = key.with_schedule(Schedule::STREAMED_32_HEADS);
        assert_eq!(wide.to_string().parse::<CompileKey>(), Ok(wide));
        let narrow = key.with_schedule(Schedule::SPLIT_16_HEADS);
        assert_eq!(
            narrow.to_string(),
            "h64_nk100_ne300_nvfp4_p64x16_splith16_sm90a"
        );
        assert_eq!(narrow.to_string().parse::<CompileKey>(), Ok(narrow));
        assert_eq!(narrow.head_groups(), 4);
        let narrow_half = key.with_schedule(Schedule::SPLIT_HALF_TILES_16_HEADS);
        assert_eq!(
            narrow_half.to_string(),
            "h64_nk100_ne300_nvfp4_p64x16_split64h16_sm90a"
        );
        assert_eq!(
            narrow_half.to_string().parse::<CompileKey>(),
            Ok(narrow_half)
        );
        assert_eq!(
            key.with_schedule(Schedule::Split {
                extra_rows: 128,
                cta_heads: 8
            })
            .validate(),
            Err(KeyError::SplitHeads {
                cta_heads: 8,
                heads: 64
            })
        );
        assert_eq!(
            key.with_schedule(Schedule::Split {
                extra_rows: 32,
                cta_heads: 32
            })
            .validate(),
            Err(KeyError::SplitRows { rows: 32 })
        );
        for bad in [
            "stream0",
            "stream02",
            "streamx",
            "strea",
            "split",
            "split128",
            "split64h32",
            "splith",
            "split128h16",
            "stream1",
            "split32",
            "streamh16",
            "stream1h32",
            "streamh",
            "streamh64",
            "stream2h",
            "splith32",
        ] {
            let name = format!("h64_nk100_ne300_nvfp4_p64x16_{bad}_sm90a");
            assert!(matches!(
                name.parse::<CompileKey>(),
                Err(KeyError::Name { .. }
                    | KeyError::Cluster { .. }
                    | KeyError::SplitRows { .. }
                    | KeyError::StreamedHeads { .. })
            ));
        }
        // 32 heads a streamed CTA: sm_90a only, and only for 32 heads or more.
        for (name, heads, target) in [
            (
                "h16_nk128_ne512_fp8_p64x64_streamh32_sm90a",
                16,
                Target::Sm90a,
            ),
            (
                "h32_nk128_ne512_fp8_p64x64_streamh32_sm100a",
                32,
                Target::Sm100a,
            ),
        ] {
            assert_eq!(
                name.parse::<CompileKey>(),
                Err(KeyError::StreamedHeads {
                    cta_heads: 32,
                    heads,
                    target
                })
            );
        }
        assert_eq!(
            "h24_nk128_ne512_fp8_p64x64_sm100a".parse::<CompileKey>(),
            Err(KeyError::Heads { heads: 24 })
        );
        assert!(matches!(
            "h16_nk128".parse::<CompileKey>(),
            Err(KeyError::Name { .. })
        ));
        assert!(matches!(
            "h16_nk128_ne512_fp7_p64x64_sm100a".parse::<CompileKey>(),
            Err(KeyError::Name { .. })
        ));
    }

    /// A V4.1 layer's key (NK 128, NE 512 fp8) with `heads`, on `target`, by `schedule`.
    fn layer(heads: usize, target: Target, schedule: Schedule) -> CompileKey {
        CompileKey {
            heads,
            swa_width: 128,
            extra_width: 512,
            extra_record: ExtraRecord::Fp8,
            swa_page: 64,
            extra_page: 64,
            target,
            schedule,
        }
    }

    #[test]
    fn only_one_cta_a_token_makes_a_persistent_grid() {
        let key = |heads, schedule| layer(heads, Target::Sm90a, schedule);
        let streamed = key(16, Schedule::STREAMED);
        assert_eq!(streamed.grid(512, 132), [1, 132, 1]);
        assert_eq!(streamed.grid(100, 132), [1, 100, 1]);
        // Two head groups share the SMs; a budget below the groups still runs one CTA each.
        assert_eq!(key(32, Schedule::STREAMED).grid(512, 132), [1, 66, 2]);
        assert_eq!(key(32, Schedule::STREAMED).grid(512, 1), [1, 1, 2]);
        assert_eq!(key(16, Schedule::streamed(3)).grid(512, 132), [3, 512, 1]);
        // 32 heads a CTA: one group, every SM.
        assert_eq!(
            key(32, Schedule::STREAMED_32_HEADS).grid(512, 132),
            [1, 132, 1]
        );
        assert_eq!(
            key(64, Schedule::STREAMED_32_HEADS).grid(512, 132),
            [1, 66, 2]
        );
        assert_eq!(key(16, Schedule::SPLIT).grid(512, 132)[1], 512);
    }

    #[test]
    fn head_groups_and_padding() {
        let key = |heads| layer(heads, Target::Sm100a, Schedule::SPLIT);
        assert_eq!((key(8).head_groups(), key(8).mma_heads()), (1, 16));
        assert_eq!((key(16).head_groups(), key(16).mma_heads()), (1, 16));
        assert_eq!((key(32).head_groups(), key(32).mma_heads()), (1, 32));
        assert_eq!((key(64).head_groups(), key(64).mma_heads()), (2, 32));
        assert_eq!((key(128).head_groups(), key(128).mma_heads()), (4, 32));
        let streamed = |heads| key(heads).with_schedule(Schedule::STREAMED);
        assert_eq!(
            (streamed(8).head_groups(), streamed(8).mma_heads()),
            (1, 16)
        );
        assert_eq!(
            (streamed(32).head_groups(), streamed(32).mma_heads()),
            (2, 16)
        );
        assert_eq!(
            (streamed(128).head_groups(), streamed(128).mma_heads()),
            (8, 16)
        );
        assert_eq!(
            (streamed(16).swa_tiles(), streamed(16).cluster_size()),
            (1, 1)
        );
    }
}
