//! The canonical shared-memory layouts of MMA operands (PTX "canonical layouts" for tcgen05
//! and wgmma; CUTLASS `make_umma_desc` / `make_gmma_desc`): constructors, a recogniser that
//! turns a kernel author's tile into descriptor parameters, and the inverse that rebuilds
//! the layout the hardware reads from descriptor fields.
//!
//! An operand tile is a rank-2 [`ComposedLayout`] indexed `(mn, k)`: mode 0 runs along M
//! (for A) or N (for B), mode 1 along K. One MMA instruction reads `MN x mma_k` elements
//! with `mma_k * elem_bytes = 32` bytes (K = 16 for 16-bit types). In units of
//! `T = 16 / elem_bytes` elements (one 16-byte chunk) and `W` = the swizzle width in bytes
//! (128 / 64 / 32; a "row" of `A = W / elem_bytes` elements), the four forms are, in
//! elements:
//!
//! | major | swizzle  | one MMA step `[MN, mma_k]`                         | LBO          | SBO               |
//! |-------|----------|----------------------------------------------------|--------------|-------------------|
//! | K     | SW32-128 | `Sw o ((8,m),mma_k):((A,SBO),1)`                   | unused       | 8-row group step  |
//! | K     | none     | `Sw<0,4,3> o ((8,m),(T,2)):((T,SBO),(1,LBO))`      | K chunk step | 8-row group step  |
//! | MN    | SW32-128 | `Sw o ((A,m),(8,k)):((1,LBO),(A,SBO))`             | MN atom step | 8-K-row group step|
//! | MN    | none     | `Sw<0,4,3> o ((T,m),(8,k)):((1,SBO),(T,LBO))`      | 8-K-row step | MN chunk step     |
//!
//! LBO and SBO are byte distances. An offset the MMA never uses is encoded as 16 bytes
//! (field value 1, PTX's "assumed 1"). Across K steps only the start address moves, by the
//! layout's own offset of the step's first element.
//!
//! Alignment: the swizzle acts on the address bits, so every swizzle pattern the MMA reads
//! must start on a multiple of the pattern (1024 B for SW128). [`recognise`] requires that
//! (LBO/SBO multiples of the pattern, the start inside the first row of a pattern), which is
//! what makes the descriptor's base-offset field 0 and lets every writer (TMA, plain stores
//! through the same layout) and the MMA agree. The runtime tile base must be aligned to
//! [`ComposedLayout::alignment`].

use std::fmt;

use super::algebra::Layout;
use super::composed::ComposedLayout;
use super::int_tuple::IntTuple;
use super::swizzle::Swizzle;
use super::{LayoutError, LayoutErrorKind, err};

/// Which operand dimension is contiguous in shared memory.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Major {
    /// K is contiguous (PTX "K-major", transpose bit 0).
    K,
    /// M or N is contiguous (PTX "M-major"/"N-major", transpose bit 1).
    MN,
}

impl Major {
    /// The instruction encoding: 0 for K-major, 1 for MN-major (tcgen05 idesc bits 15/16,
    /// wgmma `imm-trans-a`/`imm-trans-b`).
    pub fn transpose_bit(self) -> u32 {
        match self {
            Major::K => 0,
            Major::MN => 1,
        }
    }

    pub fn from_transpose_bit(bit: u32) -> Major {
        if bit == 0 { Major::K } else { Major::MN }
    }
}

impl fmt::Display for Major {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Major::K => "K-major",
            Major::MN => "MN-major",
        })
    }
}

/// Largest byte offset a descriptor field holds: 14 bits of 16-byte units.
const DESCRIPTOR_LIMIT: i64 = 1 << 18;

/// PTX `matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4`: the 14-bit field value of a
/// shared-memory address or byte offset. The DSL ORs `matrix_descriptor_encode(addr)` of a
/// runtime address into a descriptor's static bits.
pub const fn matrix_descriptor_encode(bytes: u32) -> u64 {
    ((bytes & 0x3FFFF) >> 4) as u64
}

/// The swizzle's row in bytes: 128 / 64 / 32 for the MMA swizzles, 16 (one core-matrix row)
/// without swizzle.
fn row_bytes(swizzle: Swizzle) -> Result<i64, LayoutError> {
    match swizzle {
        s if s == Swizzle::B128 => Ok(128),
        s if s == Swizzle::B64 => Ok(64),
        s if s == Swizzle::B32 => Ok(32),
        s if s.is_identity() => Ok(16),
        other => err(
            LayoutErrorKind::NotCanonical,
            format!(
                "{other} is not an MMA operand swizzle: expected Sw<3,4,3> (128B), Sw<2,4,3> \
                 (64B), Sw<1,4,3> (32B) or Sw<0,4,3> (none)"
            ),
        ),
    }
}

/// `SW128`, `SW64`, `SW32` or `interleave` (no swizzle), as PTX and CUTLASS name them.
fn swizzle_name(swizzle: Swizzle) -> &'static str {
    match row_bytes(swizzle) {
        Ok(128) => "SW128",
        Ok(64) => "SW64",
        Ok(32) => "SW32",
        _ => "interleave",
    }
}

/// The geometry of one canonical form: element size, major-ness and swizzle.
#[derive(Clone, Copy)]
struct Form {
    major: Major,
    swizzle: Swizzle,
    elem: i64,
    /// Swizzle row in bytes (16 without swizzle).
    row: i64,
}

impl Form {
    fn new(major: Major, swizzle: Swizzle, elem_bytes: u32) -> Result<Form, LayoutError> {
        let row = row_bytes(swizzle)?;
        if !matches!(elem_bytes, 1 | 2 | 4) {
            return err(
                LayoutErrorKind::Unsupported,
                format!(
                    "MMA operands have 1-, 2- or 4-byte elements (8-bit, 16-bit, tf32), got \
                     {elem_bytes}-byte elements"
                ),
            );
        }
        if major == Major::MN && elem_bytes == 4 {
            return err(
                LayoutErrorKind::Unsupported,
                "MN-major tf32 operands need the SWIZZLE_128B_BASE32B layout (Sw<2,5,2>), which \
                 is not modelled; store tf32 operands K-major",
            );
        }
        Ok(Form {
            major,
            swizzle,
            elem: i64::from(elem_bytes),
            row,
        })
    }

    fn swizzled(&self) -> bool {
        !self.swizzle.is_identity()
    }

    /// K elements of one MMA instruction (32 bytes).
    fn mma_k(&self) -> i64 {
        32 / self.elem
    }

    /// Elements in one 16-byte chunk.
    fn chunk(&self) -> i64 {
        16 / self.elem
    }

    /// Elements in one swizzle row (`chunk` without swizzle).
    fn row_elems(&self) -> i64 {
        self.row / self.elem
    }

    /// The MN step between blocks that share LBO/SBO: 8 rows (K-major) or one atom column
    /// (MN-major).
    fn mn_granule(&self) -> i64 {
        match self.major {
            Major::K => 8,
            Major::MN => self.row_elems(),
        }
    }

    fn name(&self) -> String {
        format!("{} {}", self.major, swizzle_name(self.swizzle))
    }

    /// The canonical form of one MMA step, in elements, for error messages.
    fn expected(&self) -> String {
        let sw = self.swizzle;
        let (a, t) = (self.row_elems(), self.chunk());
        let form = match (self.major, self.swizzled()) {
            (Major::K, true) => format!("{sw} o ((8,m),({a},k)):(({a},SBO),(1,_))"),
            (Major::K, false) => format!("{sw} o ((8,m),({t},2k)):(({t},SBO),(1,LBO))"),
            (Major::MN, true) => format!("{sw} o (({a},m),(8,k)):((1,LBO),({a},SBO))"),
            (Major::MN, false) => format!("{sw} o (({t},m),(8,k)):((1,SBO),({t},LBO))"),
        };
        format!(
            "{form} in {}-byte elements (LBO, SBO = byte offsets / {}; `_` = any step between \
             MMA K-steps)",
            self.elem, self.elem
        )
    }

    /// Byte offset of `(mn, kk)` inside one MMA step from its start, with the given LBO and
    /// SBO: what the hardware computes before swizzling.
    fn step_offset(&self, lbo: i64, sbo: i64, mn: i64, kk: i64) -> i64 {
        let (a, t, e, row) = (self.row_elems(), self.chunk(), self.elem, self.row);
        match (self.major, self.swizzled()) {
            (Major::K, true) => (mn % 8) * row + (mn / 8) * sbo + kk * e,
            (Major::K, false) => (mn % 8) * 16 + (mn / 8) * sbo + (kk % t) * e + (kk / t) * lbo,
            (Major::MN, true) => (mn % a) * e + (mn / a) * lbo + (kk % 8) * row + (kk / 8) * sbo,
            (Major::MN, false) => (mn % t) * e + (mn / t) * sbo + (kk % 8) * 16 + (kk / 8) * lbo,
        }
    }
}

/// The canonical K-major `[mn, k]` tile: rows of one swizzle width, 8-row groups stacked
/// along MN (SBO = 8 rows), then k-blocks of one row width stacked after the whole MN
/// extent. Bf16 SW128 `[128, 512]` is `Sw<3,4,3> o ((8,16),(64,8)):((64,512),(1,8192))`
/// (k-blocks of 16 KiB, as TMA with a 64-element box writes them).
pub fn k_major(
    swizzle: Swizzle,
    mn: i64,
    k: i64,
    elem_bytes: u32,
) -> Result<ComposedLayout, LayoutError> {
    let form = Form::new(Major::K, swizzle, elem_bytes)?;
    let a = form.row_elems();
    let k_unit = a.max(form.mma_k());
    if mn < 8 || mn % 8 != 0 || k < k_unit || k % k_unit != 0 {
        return err(
            LayoutErrorKind::NotDivisible,
            format!(
                "a K-major {} tile of {elem_bytes}-byte elements needs MN a multiple of 8 and K \
                 a multiple of {k_unit}, got [{mn}, {k}]",
                swizzle_name(swizzle)
            ),
        );
    }
    let layout = Layout::new(
        crate::int_tuple!((8, { mn / 8 }), (a, { k / a })),
        crate::int_tuple!((a, { 8 * a }), (1, { mn * a })),
    )?;
    ComposedLayout::new(swizzle, 0, layout, elem_bytes)
}

/// The canonical MN-major `[mn, k]` tile: the transposed view of the K-major `[k, mn]` tile
/// (atoms of one swizzle row along MN by 8 K rows, K groups stacked first, SBO = 8 rows,
/// then atom columns, LBO = K rows). The seed's `KV^T` operand is exactly this view of the
/// `[128, 512]` KV tile: LBO 16384, SBO 1024.
pub fn mn_major(
    swizzle: Swizzle,
    mn: i64,
    k: i64,
    elem_bytes: u32,
) -> Result<ComposedLayout, LayoutError> {
    let form = Form::new(Major::MN, swizzle, elem_bytes)?;
    let a = form.row_elems();
    let k_unit = form.mma_k().max(8);
    if mn < a || mn % a != 0 || k < k_unit || k % k_unit != 0 {
        return err(
            LayoutErrorKind::NotDivisible,
            format!(
                "an MN-major {} tile of {elem_bytes}-byte elements needs MN a multiple of {a} \
                 and K a multiple of {k_unit}, got [{mn}, {k}]",
                swizzle_name(swizzle)
            ),
        );
    }
    let layout = Layout::new(
        crate::int_tuple!((a, { mn / a }), (8, { k / 8 })),
        crate::int_tuple!((1, { k * a }), (a, { 8 * a })),
    )?;
    ComposedLayout::new(swizzle, 0, layout, elem_bytes)
}

/// An operand tile recognised as canonical: what a descriptor needs, and where each MMA
/// block of the tile starts.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CanonicalOperand {
    tile: ComposedLayout,
    major: Major,
    leading_byte_offset: u32,
    stride_byte_offset: u32,
}

impl CanonicalOperand {
    /// The recognised tile.
    pub fn tile(&self) -> &ComposedLayout {
        &self.tile
    }

    pub fn major(&self) -> Major {
        self.major
    }

    pub fn swizzle(&self) -> Swizzle {
        self.tile.swizzle()
    }

    pub fn elem_bytes(&self) -> u32 {
        self.tile.elem_bytes()
    }

    /// LBO in bytes (16 when the MMA does not use it).
    pub fn leading_byte_offset(&self) -> u32 {
        self.leading_byte_offset
    }

    /// SBO in bytes (16 when the MMA does not use it).
    pub fn stride_byte_offset(&self) -> u32 {
        self.stride_byte_offset
    }

    /// Extent of mode 0 (M or N).
    pub fn mn_extent(&self) -> i64 {
        extent(&self.tile, 0)
    }

    /// Extent of mode 1 (K).
    pub fn k_extent(&self) -> i64 {
        extent(&self.tile, 1)
    }

    /// K elements one MMA instruction consumes (32 bytes: 16 for 16-bit types).
    pub fn mma_k(&self) -> i64 {
        32 / i64::from(self.elem_bytes())
    }

    /// Number of MMA K-steps in the tile.
    pub fn k_steps(&self) -> i64 {
        self.k_extent() / self.mma_k()
    }

    fn form(&self) -> Form {
        Form::new(self.major, self.swizzle(), self.elem_bytes())
            .expect("a recognised operand has a valid form")
    }

    /// The descriptor start address (bytes from the aligned tile base) of the MMA block whose
    /// first element is `(mn0, k0)`: the layout's own offset of that element. `mn0` must be a
    /// multiple of 8 rows (K-major) or of one swizzle atom (MN-major), `k0` a multiple of
    /// [`Self::mma_k`]. LBO and SBO stay those of the operand.
    ///
    /// K-major bf16 SW128: `(0, 16 ks)` is `32 ks` inside a k-block. MN-major: `2 SBO` per
    /// K-step of 16.
    pub fn block_start(&self, mn0: i64, k0: i64) -> Result<u32, LayoutError> {
        let granule = self.form().mn_granule();
        let (mn, k, mma_k) = (self.mn_extent(), self.k_extent(), self.mma_k());
        if !(0..mn).contains(&mn0) || mn0 % granule != 0 || !(0..k).contains(&k0) || k0 % mma_k != 0
        {
            return err(
                LayoutErrorKind::OutOfRange,
                format!(
                    "MMA block at (mn {mn0}, k {k0}) of the {} operand {}: expected mn a multiple \
                     of {granule} below {mn} and k a multiple of {mma_k} below {k}",
                    self.form().name(),
                    self.tile
                ),
            );
        }
        let start = self.tile.linear_byte_offset_at(&[mn0, k0])?;
        Ok(u32::try_from(start).expect("recognise checked every step start"))
    }

    /// [`Self::block_start`] of K-step `ks` at MN 0.
    pub fn k_step_start(&self, ks: i64) -> Result<u32, LayoutError> {
        self.block_start(0, ks * self.mma_k())
    }
}

fn extent(tile: &ComposedLayout, mode: usize) -> i64 {
    tile.layout()
        .mode(mode)
        .map(|m| m.static_size())
        .unwrap_or(0)
}

/// Recognises `tile` as a canonical operand, finding its major-ness from which mode is
/// contiguous. See [`recognise_as`].
pub fn recognise(tile: &ComposedLayout) -> Result<CanonicalOperand, LayoutError> {
    check_rank(tile)?;
    let k_form = Form::new(Major::K, tile.swizzle(), tile.elem_bytes())?;
    let elem = i64::from(tile.elem_bytes());
    let at = |mn, k| tile.linear_byte_offset_at(&[mn, k]);
    let origin = at(0, 0)?;
    let k_contiguous = extent(tile, 1) > 1 && at(0, 1)? - origin == elem;
    let mn_contiguous = extent(tile, 0) > 1 && at(1, 0)? - origin == elem;
    match (k_contiguous, mn_contiguous) {
        (true, _) => recognise_as(tile, Major::K),
        (false, true) => recognise_as(tile, Major::MN),
        (false, false) => {
            let mn_form = Form::new(Major::MN, tile.swizzle(), tile.elem_bytes())
                .map(|f| format!(" or MN-major {}", f.expected()))
                .unwrap_or_default();
            err(
                LayoutErrorKind::NotCanonical,
                format!(
                    "not a canonical MMA operand layout: neither K (mode 1) nor MN (mode 0) has \
                     unit stride at the origin; expected K-major {}{mn_form}, got {tile}",
                    k_form.expected()
                ),
            )
        }
    }
}

fn check_rank(tile: &ComposedLayout) -> Result<(), LayoutError> {
    if tile.rank() != 2 {
        return err(
            LayoutErrorKind::NotCanonical,
            format!("an MMA operand tile is rank 2, (MN, K); got {tile}"),
        );
    }
    Ok(())
}

/// Recognises `tile` as the canonical `major` operand layout of its swizzle, checking every
/// element of every MMA K-step against the form (so any equivalent nesting of the shape is
/// accepted), and the alignment and field-range rules. The error names the expected form,
/// prints the tile and the first element that differs.
pub fn recognise_as(tile: &ComposedLayout, major: Major) -> Result<CanonicalOperand, LayoutError> {
    check_rank(tile)?;
    let form = Form::new(major, tile.swizzle(), tile.elem_bytes())?;
    let not_canonical = |why: String| {
        LayoutError::new(
            LayoutErrorKind::NotCanonical,
            format!(
                "not a canonical {} layout: expected {}, got {tile}: {why}",
                form.name(),
                form.expected()
            ),
        )
    };
    let (mn, k) = (extent(tile, 0), extent(tile, 1));
    let (granule, mma_k) = (form.mn_granule(), form.mma_k());
    if mn < 8 || mn % 8 != 0 || k < mma_k || k % mma_k != 0 {
        return Err(not_canonical(format!(
            "the tile is [{mn}, {k}]; MN must be a multiple of 8 and K of the MMA step {mma_k}"
        )));
    }
    if major == Major::MN && mn > granule && mn % granule != 0 {
        return Err(not_canonical(format!(
            "MN {mn} spans more than one {granule}-element swizzle atom but is not a multiple of it"
        )));
    }

    let at = |mn, k| tile.linear_byte_offset_at(&[mn, k]);
    let origin = at(0, 0)?;
    let distance = |mn1, k1| at(mn1, k1).map(|o| o - origin);
    // The two strides the MMA reads, where the tile is big enough to use them.
    let (t, a) = (form.chunk(), form.row_elems());
    let (lbo, sbo) = match (major, form.swizzled()) {
        (Major::K, true) => (None, (mn > 8).then(|| distance(8, 0)).transpose()?),
        (Major::K, false) => (
            Some(distance(0, t)?),
            (mn > 8).then(|| distance(8, 0)).transpose()?,
        ),
        (Major::MN, true) => (
            (mn > a).then(|| distance(a, 0)).transpose()?,
            (mma_k > 8).then(|| distance(0, 8)).transpose()?,
        ),
        (Major::MN, false) => (
            (mma_k > 8).then(|| distance(0, 8)).transpose()?,
            (mn > t).then(|| distance(t, 0)).transpose()?,
        ),
    };
    let (lbo_or_unused, sbo_or_unused) = (lbo.unwrap_or(16), sbo.unwrap_or(16));

    for ks in 0..k / mma_k {
        let start = at(0, ks * mma_k)?;
        for m in 0..mn {
            for kk in 0..mma_k {
                let got = at(m, ks * mma_k + kk)?;
                let want = start + form.step_offset(lbo_or_unused, sbo_or_unused, m, kk);
                if got != want {
                    return Err(not_canonical(format!(
                        "element (mn {m}, k {}) is at linear byte {got}, the form (LBO {}, SBO {}) \
                         puts it at {want}",
                        ks * mma_k + kk,
                        describe(lbo),
                        describe(sbo),
                    )));
                }
            }
        }
        check_step_alignment(&form, tile, ks, start)?;
    }
    for (name, value) in [("LBO", lbo), ("SBO", sbo)] {
        if let Some(v) = value {
            check_offset_field(&form, tile, name, v)?;
        }
    }
    Ok(CanonicalOperand {
        tile: tile.clone(),
        major,
        leading_byte_offset: lbo_or_unused as u32,
        stride_byte_offset: sbo_or_unused as u32,
    })
}

fn describe(offset: Option<i64>) -> String {
    offset.map_or_else(|| "unused".to_string(), |v| format!("{v} B"))
}

/// A K-step's start must be encodable and, with a swizzle, lie in the first row of a
/// pattern-aligned atom (K-major: with the 32-byte step inside that row).
fn check_step_alignment(
    form: &Form,
    tile: &ComposedLayout,
    ks: i64,
    start: i64,
) -> Result<(), LayoutError> {
    let period = tile.swizzle().period();
    let in_pattern = start % period;
    let fits_row = match form.major {
        Major::K => in_pattern + 32 <= form.row,
        Major::MN => in_pattern == 0,
    };
    if start % 16 != 0 || !(0..DESCRIPTOR_LIMIT).contains(&start) || (form.swizzled() && !fits_row)
    {
        let rule = if form.swizzled() {
            match form.major {
                Major::K => format!(
                    "the {period}-byte swizzle pattern it reads must start on a multiple of \
                     {period} (start % {period} + 32 <= {}); otherwise the descriptor's \
                     base-offset field would be needed, which this project does not use",
                    form.row
                ),
                Major::MN => format!(
                    "it must be a multiple of the {period}-byte swizzle pattern; otherwise the \
                     descriptor's base-offset field would be needed, which this project does \
                     not use"
                ),
            }
        } else {
            "descriptors address shared memory in 16-byte units".to_string()
        };
        return err(
            LayoutErrorKind::Misaligned,
            format!(
                "{} operand {tile}: K-step {ks} starts at byte {start}; expected a multiple of 16 \
                 below {DESCRIPTOR_LIMIT}: {rule}",
                form.name()
            ),
        );
    }
    Ok(())
}

/// LBO/SBO must be encodable and, with a swizzle, whole patterns (so every group the MMA
/// reads starts on a pattern boundary).
fn check_offset_field(
    form: &Form,
    tile: &ComposedLayout,
    name: &str,
    value: i64,
) -> Result<(), LayoutError> {
    let unit = if form.swizzled() {
        tile.swizzle().period()
    } else {
        16
    };
    if value % unit != 0 || !(0..DESCRIPTOR_LIMIT).contains(&value) {
        return err(
            LayoutErrorKind::Misaligned,
            format!(
                "{} operand {tile}: {name} is {value} bytes; expected a multiple of {unit} below \
                 {DESCRIPTOR_LIMIT}{}",
                form.name(),
                if form.swizzled() {
                    " (every group the MMA reads must start on a swizzle-pattern boundary)"
                } else {
                    " (descriptor fields count 16-byte units)"
                }
            ),
        );
    }
    Ok(())
}

/// The descriptor fields [`hardware_layout`] interprets.
pub(crate) struct DescriptorFields {
    pub(crate) swizzle: Swizzle,
    pub(crate) start_address: u32,
    pub(crate) leading_byte_offset: u32,
    pub(crate) stride_byte_offset: u32,
}

/// The layout the hardware reads for an `[mn, k]` operand of `elem_bytes` elements described
/// by `fields` (the inverse of [`recognise`]): offsets are absolute shared-memory byte
/// addresses, `offset_bytes()` is the start address.
pub(crate) fn hardware_layout(
    fields: &DescriptorFields,
    major: Major,
    mn: i64,
    k: i64,
    elem_bytes: u32,
) -> Result<ComposedLayout, LayoutError> {
    let form = Form::new(major, fields.swizzle, elem_bytes)?;
    let (t, a, e) = (form.chunk(), form.row_elems(), form.elem);
    let lbo = i64::from(fields.leading_byte_offset) / e;
    let sbo = i64::from(fields.stride_byte_offset) / e;
    let shape_error = |what: &str| {
        LayoutError::new(
            LayoutErrorKind::Unsupported,
            format!(
                "a {} operand of {elem_bytes}-byte elements cannot be [{mn}, {k}]: {what}",
                form.name()
            ),
        )
    };
    // One mode of extent `n` made of groups of `group` elements `inner` apart, groups
    // `outer` apart.
    let grouped = |n: i64, group: i64, inner: i64, outer: i64, what: &str| {
        if n < 1 || (n > group && n % group != 0) {
            Err(shape_error(what))
        } else if n <= group {
            Ok((IntTuple::from(n), IntTuple::from(inner)))
        } else {
            Ok((
                crate::int_tuple!(group, { n / group }),
                crate::int_tuple!(inner, outer),
            ))
        }
    };
    let (mn_mode, k_mode) = match (major, form.swizzled()) {
        (Major::K, true) => {
            if k * e > form.row {
                return Err(shape_error("K must fit in one swizzle row"));
            }
            (
                grouped(mn, 8, a, sbo, "MN must be a multiple of 8")?,
                grouped(k, k, 1, 0, "K must be positive")?,
            )
        }
        (Major::K, false) => (
            grouped(mn, 8, t, sbo, "MN must be a multiple of 8")?,
            grouped(k, t, 1, lbo, "K must be a multiple of a 16-byte chunk")?,
        ),
        (Major::MN, true) => (
            grouped(mn, a, 1, lbo, "MN must be a multiple of the swizzle atom")?,
            grouped(k, 8, a, sbo, "K must be a multiple of 8")?,
        ),
        (Major::MN, false) => (
            grouped(mn, t, 1, sbo, "MN must be a multiple of a 16-byte chunk")?,
            grouped(k, 8, t, lbo, "K must be a multiple of 8")?,
        ),
    };
    let layout = Layout::new(
        IntTuple::tuple([mn_mode.0, k_mode.0]),
        IntTuple::tuple([mn_mode.1, k_mode.1]),
    )?;
    ComposedLayout::new(
        fields.swizzle,
        i64::from(fields.start_address),
        layout,
        elem_bytes,
    )
}
