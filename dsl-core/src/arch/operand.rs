//! MMA operands in shared memory: a tile recognised as a canonical operand layout, and its
//! 64-bit matrix descriptor for tcgen05 (UMMA) or wgmma (GMMA), derived from the layout.
//!
//! The descriptor's start-address field is the only runtime part (the dynamic shared
//! memory's base is a register): it is computed once per tile, and each MMA block adds its
//! trace-time start offset (>> 4) to it.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::layout::canonical::{self, CanonicalOperand};
use crate::layout::{GmmaSmemDesc, LayoutError, Major, UmmaSmemDesc};
use crate::trace::{SmemTile, Val, trace_error};

/// [`canonical::recognise_as`], remembered per (layout, major-ness) for the whole process:
/// recognition checks every element of the tile, and every compile key of a kernel reuses
/// the same few tile layouts.
fn recognise_cached(tile: &SmemTile, major: Major) -> Result<CanonicalOperand, LayoutError> {
    type Cache = Mutex<HashMap<(String, Major), Result<CanonicalOperand, LayoutError>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (tile.layout().to_string(), major);
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return hit.clone();
    }
    let result = canonical::recognise_as(tile.layout(), major);
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, result.clone());
    result
}

/// Which descriptor format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DescFormat {
    /// sm_100 `tcgen05.mma` shared-memory descriptor.
    Umma,
    /// sm_90 `wgmma` shared-memory descriptor.
    Gmma,
}

/// A canonical MMA operand tile with its descriptor in a register.
#[derive(Clone, Debug)]
pub struct SmemOperand {
    operand: Option<CanonicalOperand>,
    /// The descriptor of the tile's first MMA block.
    desc: Val<u64>,
}

impl SmemOperand {
    /// Recognises `tile` as a canonical `major` operand and builds its descriptor. A tile
    /// that is not canonical is a trace error that prints the layout and the expected form.
    #[track_caller]
    pub fn new(tile: &SmemTile, major: Major, format: DescFormat) -> Self {
        let recognised = recognise_cached(tile, major).and_then(|op| {
            let bits = match format {
                DescFormat::Umma => UmmaSmemDesc::for_operand(&op)?.bits_without_start_address(),
                DescFormat::Gmma => GmmaSmemDesc::for_operand(&op)?.bits_without_start_address(),
            };
            Ok((op, bits))
        });
        let (operand, static_bits) = match recognised {
            Ok((op, bits)) => (Some(op), bits),
            Err(e) => {
                trace_error(format!(
                    "shared buffer `{}` as an MMA operand: {e}",
                    tile.region().name
                ));
                (None, 0)
            }
        };
        let start = tile.base().value();
        let field = ((start >> 4) & 0x3fffu32).cast::<u64>();
        SmemOperand {
            operand,
            desc: field | static_bits,
        }
    }

    /// The recognised operand (absent after a trace error).
    pub fn operand(&self) -> Option<&CanonicalOperand> {
        self.operand.as_ref()
    }

    /// The descriptor of the MMA block whose first element is `(mn0, k0)`.
    #[track_caller]
    pub fn block(&self, mn0: i64, k0: i64) -> Val<u64> {
        let Some(op) = &self.operand else {
            return self.desc;
        };
        match op.block_start(mn0, k0) {
            Ok(start) => self.desc + (start as u64 >> 4),
            Err(e) => {
                trace_error(format!("MMA operand block: {e}"));
                self.desc
            }
        }
    }

    /// The descriptor of block `(mn0, k0)` moved by `extra_bytes` more (a runtime choice of
    /// block, e.g. per warpgroup; a multiple of 16 that keeps the block canonical).
    #[track_caller]
    pub fn block_plus(&self, mn0: i64, k0: i64, extra_bytes: Val<u32>) -> Val<u64> {
        self.block(mn0, k0) + (extra_bytes >> 4).cast::<u64>()
    }

    /// Bytes from the tile start to block `(mn0, k0)`.
    #[track_caller]
    pub fn block_offset(&self, mn0: i64, k0: i64) -> u32 {
        let Some(op) = &self.operand else {
            return 0;
        };
        op.block_start(mn0, k0).unwrap_or_else(|e| {
            trace_error(format!("MMA operand block: {e}"));
            0
        })
    }

    /// The descriptor of K-step `ks` (K = 32 bytes per step) at MN 0.
    #[track_caller]
    pub fn k_step(&self, ks: i64) -> Val<u64> {
        let k0 = self.operand.as_ref().map_or(0, |op| ks * op.mma_k());
        self.block(0, k0)
    }
}
