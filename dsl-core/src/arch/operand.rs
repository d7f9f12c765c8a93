//! MMA operands in shared memory: a tile recognised as a canonical operand layout, and its
//! 64-bit matrix descriptor for tcgen05 (UMMA) or wgmma (GMMA), derived from the layout.
//!
//! The descriptor's start-address field is the only runtime part (the dynamic shared
//! memory's base is a register): it is computed once per tile, and each MMA block adds its
//! trace-time start offset (>> 4) to it.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::ir::SourceLoc;
use crate::layout::canonical::{self, CanonicalOperand};
use crate::layout::{ComposedLayout, GmmaSmemDesc, LayoutError, Major, Swizzle, UmmaSmemDesc};
use crate::trace::{SmemTile, Val, trace_error, trace_error_at};

/// [`canonical::recognise_as`], remembered per (layout, major-ness) for the whole process:
/// recognition checks every element of the tile, and every compile key of a kernel reuses
/// the same few tile layouts.
fn recognise_cached(tile: &SmemTile, major: Major) -> Result<CanonicalOperand, LayoutError> {
    type Cache = Mutex<HashMap<(ComposedLayout, Major), Result<CanonicalOperand, LayoutError>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (tile.layout().clone(), major);
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

impl DescFormat {
    /// The instruction family that reads this format, for messages.
    pub fn family(self) -> &'static str {
        match self {
            DescFormat::Umma => "tcgen05 (UMMA)",
            DescFormat::Gmma => "wgmma (GMMA)",
        }
    }
}

/// What an MMA instruction expects of one operand, for [`MnBlock::check`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct OperandExpectation<'s> {
    /// The instruction and its shape, e.g. `tcgen05.mma m128n16k16`.
    pub instr: &'s str,
    /// "A" or "B".
    pub role: &'static str,
    /// "M" or "N".
    pub dim: &'static str,
    /// The instruction's M or N.
    pub rows: i64,
    pub major: crate::layout::Major,
    pub format: DescFormat,
}

/// Checks an MMA's A `[M, K]` and B `[N, K]` blocks, each given with the instruction's M or
/// N and the major-ness it was built for, at K-step `k_step`: every mismatch is a trace error
/// at the caller; true when the MMA may be issued.
#[track_caller]
pub(crate) fn check_a_and_b(
    instr: &str,
    format: DescFormat,
    (a, m, a_major): (&MnBlock<'_>, u32, crate::layout::Major),
    (b, n, b_major): (&MnBlock<'_>, u32, crate::layout::Major),
    k_step: i64,
) -> bool {
    let expect = |role, dim, rows: u32, major| OperandExpectation {
        instr,
        role,
        dim,
        rows: i64::from(rows),
        major,
        format,
    };
    let a_ok = a.check(&expect("A", "M", m, a_major), k_step);
    let b_ok = b.check(&expect("B", "N", n, b_major), k_step);
    a_ok && b_ok
}

/// For a tile that is not canonical: the constructor call that builds the canonical tile of
/// its shape, swizzle and element size, and what it prints, when there is one.
fn canonical_hint(tile: &SmemTile, major: Major) -> String {
    let layout = tile.layout();
    if layout.rank() != 2 {
        return String::new();
    }
    let extent = |mode| layout.layout().mode(mode).map(|m| m.static_size());
    let (Ok(mn), Ok(k)) = (extent(0), extent(1)) else {
        return String::new();
    };
    let (swizzle, elem) = (layout.swizzle(), layout.elem_bytes());
    let (name, built) = match major {
        Major::K => ("k_major", canonical::k_major(swizzle, mn, k, elem)),
        Major::MN => ("mn_major", canonical::mn_major(swizzle, mn, k, elem)),
    };
    let Ok(built) = built else {
        return String::new();
    };
    let swizzle_name = match swizzle {
        s if s == Swizzle::B128 => "B128",
        s if s == Swizzle::B64 => "B64",
        s if s == Swizzle::B32 => "B32",
        _ => "NONE",
    };
    format!(
        "; `canonical::{name}(Swizzle::{swizzle_name}, {mn}, {k}, {elem})` builds the canonical \
         tile of this shape: {built}"
    )
}

/// A canonical MMA operand tile with its descriptor in a register.
#[derive(Clone, Debug)]
pub struct SmemOperand {
    operand: Option<CanonicalOperand>,
    /// The descriptor of the tile's first MMA block.
    desc: Val<u64>,
    /// The shared buffer's name, for messages.
    name: String,
    format: DescFormat,
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
                    "shared buffer `{}` as an MMA operand: {e}{}",
                    tile.region().name,
                    canonical_hint(tile, major)
                ));
                (None, 0)
            }
        };
        let start = tile.base().value();
        let field = ((start >> 4) & 0x3fffu32).cast::<u64>();
        SmemOperand {
            operand,
            desc: field | static_bits,
            name: tile.region().name.clone(),
            format,
        }
    }

    /// The same operand with its start address moved at run time by `units` of 16 bytes (the
    /// descriptor's address unit; e.g. stage `s` of a ring): the caller has checked that the
    /// move is a multiple of the swizzle period, so the static fields still describe the tile.
    pub(crate) fn moved_by_16_byte_units(mut self, units: Val<u32>) -> Self {
        self.desc += units.cast::<u64>();
        self
    }

    /// The name of the shared buffer the operand lives in.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which MMA family the descriptor is encoded for.
    pub fn format(&self) -> DescFormat {
        self.format
    }

    /// `[MN, K]` of the tile, as recognised (absent after a trace error).
    pub fn shape(&self) -> Option<(i64, i64)> {
        self.operand
            .as_ref()
            .map(|op| (op.mn_extent(), op.k_extent()))
    }

    /// The MMA block of `M` (or `N`) rows starting at row `mn0` of a taller tile, for a
    /// checked MMA atom (`sm100::tcgen05::MmaF16Bf16Ss`, `sm90::wgmma::MmaF16Bf16Ss`): the
    /// atom checks that `mn0` starts a block and that the instruction's rows fit below the
    /// tile's extent. A plain `&SmemOperand` given to an atom must be exactly M (or N) rows.
    pub fn at_mn(&self, mn0: i64) -> MnBlock<'_> {
        MnBlock {
            operand: self,
            mn0,
            whole: false,
            extra_bytes: None,
        }
    }

    /// The recognised operand (absent after a trace error).
    pub fn operand(&self) -> Option<&CanonicalOperand> {
        self.operand.as_ref()
    }

    /// The recognised major-ness; K-major for a tile that was not recognised (its error is
    /// already reported).
    pub fn major(&self) -> Major {
        self.operand.as_ref().map_or(Major::K, |c| c.major())
    }

    /// The descriptor of the MMA block whose first element is `(mn0, k0)`.
    #[track_caller]
    pub fn block(&self, mn0: i64, k0: i64) -> Val<u64> {
        if self.operand.is_none() {
            return self.desc;
        }
        self.desc + (u64::from(self.block_offset(mn0, k0)) >> 4)
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
        // A match, not unwrap_or_else: a closure would report its own line, not the caller's.
        match op.block_start(mn0, k0) {
            Ok(start) => start,
            Err(e) => {
                trace_error(format!("MMA operand block: {e}"));
                0
            }
        }
    }

    /// The descriptor of K-step `ks` (K = 32 bytes per step) at MN 0.
    #[track_caller]
    pub fn k_step(&self, ks: i64) -> Val<u64> {
        let k0 = self.operand.as_ref().map_or(0, |op| ks * op.mma_k());
        self.block(0, k0)
    }
}

/// An operand as an MMA atom reads it: a whole tile, or the block of the instruction's rows
/// starting at row `mn0` of a taller tile ([`SmemOperand::at_mn`]), optionally moved by a
/// runtime byte offset ([`MnBlock::plus`], e.g. one block per warpgroup).
#[derive(Clone, Copy, Debug)]
pub struct MnBlock<'a> {
    operand: &'a SmemOperand,
    mn0: i64,
    /// Made from a plain `&SmemOperand`: the tile must be exactly the instruction's rows.
    whole: bool,
    extra_bytes: Option<Val<u32>>,
}

impl<'a> From<&'a SmemOperand> for MnBlock<'a> {
    fn from(operand: &'a SmemOperand) -> Self {
        MnBlock {
            operand,
            mn0: 0,
            whole: true,
            extra_bytes: None,
        }
    }
}

impl<'a> MnBlock<'a> {
    /// The same block moved by `bytes` more at run time (a multiple of 16 that keeps the block
    /// canonical, e.g. `group * operand.block_offset(64, 0)`); only the static part is checked.
    pub fn plus(self, bytes: Val<u32>) -> Self {
        MnBlock {
            extra_bytes: Some(bytes),
            ..self
        }
    }

    pub fn operand(&self) -> &'a SmemOperand {
        self.operand
    }

    pub fn mn0(&self) -> i64 {
        self.mn0
    }

    /// Checks this block against one operand of an MMA instruction at K-step `k_step`,
    /// reporting every mismatch as a trace error at the caller; false when the MMA must not
    /// be issued.
    #[track_caller]
    pub(crate) fn check(&self, expect: &OperandExpectation<'_>, k_step: i64) -> bool {
        let OperandExpectation {
            instr,
            role,
            dim,
            rows,
            major,
            format,
        } = *expect;
        let op = self.operand;
        let Some(canonical) = &op.operand else {
            // Not canonical: already reported where the operand was made.
            return false;
        };
        let (mn, k) = (canonical.mn_extent(), canonical.k_extent());
        let shape = format!("`{}` [{mn}, {k}]", op.name);
        // The closure below cannot be `#[track_caller]`: take the author's location here.
        let loc = SourceLoc::caller();
        let mut ok = true;
        let mut fail = |message: String| {
            trace_error_at(format!("{instr}: {message}"), loc);
            ok = false;
        };
        if op.format != format {
            fail(format!(
                "expects {role} with a {} descriptor, got {shape} with a {} descriptor \
                 (`SmemOperand::new(.., DescFormat::{format:?})`)",
                format.family(),
                op.format.family()
            ));
        }
        if canonical.elem_bytes() != 2 {
            fail(format!(
                "expects {role} of 16-bit elements (bf16 or f16), got {shape} of {}-byte elements",
                canonical.elem_bytes()
            ));
        }
        if canonical.major() != major {
            fail(format!(
                "expects {role} {major} (as the instruction descriptor says), got {shape} {}",
                canonical.major()
            ));
        }
        if self.whole {
            if mn != rows {
                let hint = if mn > rows {
                    format!("; for {rows} rows of the taller tile use `.at_mn(first_row)`")
                } else {
                    String::new()
                };
                fail(format!(
                    "expects {role} to be [{dim}, K] = [{rows}, K], got {shape}{hint}"
                ));
            }
        } else if self.mn0 < 0 || self.mn0 + rows > mn {
            fail(format!(
                "expects {role} rows [{}, {}) ({dim} = {rows}) inside {shape}",
                self.mn0,
                self.mn0 + rows
            ));
        } else if let Err(e) = canonical.block_start(self.mn0, 0) {
            fail(format!("{role} block: {e}"));
        }
        let steps = canonical.k_steps();
        if !(0..steps).contains(&k_step) {
            fail(format!(
                "expects a K-step of {role} in 0..{steps} ({shape}: {} elements a step), got \
                 K-step {k_step}",
                canonical.mma_k()
            ));
        }
        ok
    }

    /// The descriptor of this block at K-step `k_step` (after [`MnBlock::check`]).
    #[track_caller]
    pub(crate) fn desc(&self, k_step: i64) -> Val<u64> {
        let op = self.operand;
        let k0 = op.operand.as_ref().map_or(0, |c| k_step * c.mma_k());
        match self.extra_bytes {
            Some(extra) => op.block_plus(self.mn0, k0, extra),
            None => op.block(self.mn0, k0),
        }
    }
}
