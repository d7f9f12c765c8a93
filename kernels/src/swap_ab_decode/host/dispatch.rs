//! From runtime shapes to compile keys: `dispatch` for one call, `warmup_keys` for
//! everything a layer can hit, and the key set the PTX snapshots pin.

use dsl_core::Target;

use crate::swap_ab_decode::key::STREAMED_FROM_TOKENS;
use crate::swap_ab_decode::{CompileKey, ExtraRecord, KeyError, Schedule};

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
/// the schedule of [`Schedule::for_tokens`], or the streamed one where a split cluster
/// cannot hold the token's tiles.
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
/// let many = dispatch(&shape, 512, Target::Sm90a)?;
/// assert_eq!((one.schedule, many.schedule), (Schedule::Split, Schedule::Streamed));
/// assert_eq!(warmup_keys(&shape, Target::Sm90a)?, vec![one, many]);
/// # Ok::<(), kernels::swap_ab_decode::KeyError>(())
/// ```
pub fn dispatch(shape: &LayerShape, tokens: usize, target: Target) -> Result<CompileKey, KeyError> {
    let key = CompileKey {
        heads: shape.heads,
        swa_width: shape.swa_width,
        extra_width: shape.extra_width,
        extra_record: ExtraRecord::from_bytes(shape.extra_record_bytes)?,
        swa_page: shape.swa_page,
        extra_page: shape.extra_page,
        target,
        schedule: Schedule::for_tokens(tokens),
    };
    match key.validate() {
        Ok(()) => Ok(key),
        Err(KeyError::Cluster { .. }) if key.schedule == Schedule::Split => {
            let streamed = key.with_schedule(Schedule::Streamed);
            streamed.validate()?;
            Ok(streamed)
        }
        Err(e) => Err(e),
    }
}

/// Every key a layer of this shape can hit on `target`, whatever its token count: compile
/// these at start-up and no decode step compiles (the token count is a grid dimension;
/// it only picks between the split and the streamed schedule).
pub fn warmup_keys(shape: &LayerShape, target: Target) -> Result<Vec<CompileKey>, KeyError> {
    let mut keys = vec![dispatch(shape, 1, target)?];
    let streamed = dispatch(shape, STREAMED_FROM_TOKENS, target)?;
    if !keys.contains(&streamed) {
        keys.push(streamed);
    }
    Ok(keys)
}

/// The keys whose PTX is kept as reviewed snapshots. Split: heads {16, 32} x {fp8, NVFP4}
/// x (NK, NE) in {(128, 512), (128, 1024)} with 64-slot pages, partial tiles (NK 100,
/// NE 300) and the smallest cluster (NK 64, NE 0). Streamed: both record formats at
/// (128, 512), partial tiles, and no compressed list.
pub fn snapshot_keys(target: Target) -> Vec<CompileKey> {
    let key = |heads, swa_width, extra_width, extra_record| CompileKey {
        heads,
        swa_width,
        extra_width,
        extra_record,
        swa_page: 64,
        extra_page: 64,
        target,
        schedule: Schedule::Split,
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
    keys.extend(streamed.map(|k| k.with_schedule(Schedule::Streamed)));
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
        key(8, 512, ExtraRecord::Fp8, Schedule::Split),
        key(8, 1024, ExtraRecord::Nvfp4, Schedule::Split),
        key(64, 512, ExtraRecord::Nvfp4, Schedule::Split),
        key(128, 1024, ExtraRecord::Fp8, Schedule::Split),
        key(32, 1024, ExtraRecord::Fp8, Schedule::Streamed),
        key(8, 512, ExtraRecord::Nvfp4, Schedule::Streamed),
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
        assert_eq!((key.schedule, key.cluster_size()), (Schedule::Split, 6));
        let many = dispatch(&shape(), STREAMED_FROM_TOKENS, Target::Sm100a).unwrap();
        assert_eq!(many, key.with_schedule(Schedule::Streamed));
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
        let key = dispatch(&long, 1, Target::Sm90a).unwrap();
        assert_eq!((key.schedule, key.tiles()), (Schedule::Streamed, 17));
        assert!(matches!(
            key.with_schedule(Schedule::Split).validate(),
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
        for tokens in [1, 2, STREAMED_FROM_TOKENS - 1, STREAMED_FROM_TOKENS, 4096] {
            assert!(keys.contains(&dispatch(&shape(), tokens, Target::Sm90a).unwrap()));
        }
        assert_eq!(keys.len(), 2);
    }

    #[test]
    fn snapshot_keys_are_valid_and_distinct() {
        let keys = snapshot_keys(Target::Sm100a);
        assert_eq!(keys.len(), 16);
        for k in &keys {
            k.validate().unwrap();
        }
        let names: std::collections::BTreeSet<String> =
            keys.iter().map(|k| k.to_string()).collect();
        assert_eq!(names.len(), keys.len());
        assert!(keys.iter().any(|k| k.cluster_size() == 1));
    }
}
