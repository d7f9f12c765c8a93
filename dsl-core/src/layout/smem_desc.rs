//! The 64-bit shared-memory matrix descriptor of both MMA generations, written once: the
//! fields sm_90 (wgmma) and sm_100 (tcgen05) place alike, their checks and their decoding.
//! What differs (bits 46-63: sm_100's fixed version bits and LBO mode, the layout type's
//! width and place) is each format's [`DescFormat`]: [`super::GmmaSmemDesc`] and
//! [`super::UmmaSmemDesc`] are this type over the two formats.
//!
//! The shared fields (PTX ISA §9.7.15.5.1.2.2 and §9.7.16.4.1):
//!
//! | bits  | field |
//! |-------|-------|
//! | 0-13  | start address >> 4 (shared::cta byte address, 16-byte aligned) |
//! | 16-29 | leading dimension byte offset (LBO) >> 4 |
//! | 32-45 | stride dimension byte offset (SBO) >> 4 |
//! | 49-51 | base offset (swizzle pattern phase; 0 for pattern-aligned operands) |
//!
//! Bits 14-15 and 30-31 are unused in both and kept 0.

use std::fmt;
use std::hash::Hash;

use super::canonical::{self, CanonicalOperand, DescriptorFields, Major, matrix_descriptor_encode};
use super::composed::ComposedLayout;
use super::swizzle::Swizzle;
use super::{LayoutError, LayoutErrorKind, err};

/// What one descriptor format adds to the shared fields of [`SmemDesc`].
pub trait DescFormat: Copy + Eq + Hash {
    /// The swizzle field's type.
    type LayoutType: Copy;
    /// The descriptor's name in `Debug` output.
    const NAME: &'static str;

    /// The format's fields at their defaults, with `layout_type`.
    fn with_layout(layout_type: Self::LayoutType) -> Self;
    fn layout_type(&self) -> Self::LayoutType;
    fn set_layout_type(self, layout_type: Self::LayoutType) -> Self;
    fn layout_type_of(swizzle: Swizzle) -> Result<Self::LayoutType, LayoutError>;
    /// The format's bits (46-63) of the 64-bit descriptor.
    fn bits(&self) -> u64;
    /// The format's fields from descriptor bits, rejecting what the format keeps 0 or fixed
    /// (the shared unused bits 14-15 and 30-31 included, so that one message names them all).
    fn decode(bits: u64) -> Result<Self, LayoutError>;
    /// The swizzle the hardware applies through this descriptor, or why its reading is not
    /// modelled.
    fn hardware_swizzle(&self) -> Result<Swizzle, LayoutError>;
    /// `Debug`'s fields after the stride byte offset, and the closing brace.
    fn fmt_rest(&self, base_offset: u8, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// A shared-memory matrix descriptor of format `F`, built by checked setters.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmemDesc<F: DescFormat> {
    start_address: u32,
    leading_byte_offset: u32,
    stride_byte_offset: u32,
    base_offset: u8,
    format: F,
}

impl<F: DescFormat> SmemDesc<F> {
    /// A descriptor with zero addresses and offsets and the given layout type.
    pub fn new(layout_type: F::LayoutType) -> Self {
        SmemDesc {
            start_address: 0,
            leading_byte_offset: 0,
            stride_byte_offset: 0,
            base_offset: 0,
            format: F::with_layout(layout_type),
        }
    }

    /// The descriptor of the first MMA block of a canonical operand tile (start address =
    /// the tile's offset from its aligned base, LBO/SBO/layout type from the layout, base
    /// offset 0). Fails with the expected form if the tile is not canonical.
    pub fn for_layout(tile: &ComposedLayout) -> Result<Self, LayoutError> {
        Self::for_operand(&canonical::recognise(tile)?)
    }

    /// The descriptor of a recognised operand's MMA block at `(0, 0)`; move it to another
    /// block with `with_start_address(op.block_start(mn0, k0)?)`.
    pub fn for_operand(op: &CanonicalOperand) -> Result<Self, LayoutError> {
        Self::new(F::layout_type_of(op.swizzle())?)
            .with_start_address(op.block_start(0, 0)?)?
            .with_leading_byte_offset(op.leading_byte_offset())?
            .with_stride_byte_offset(op.stride_byte_offset())
    }

    /// Bits 0-13: the shared::cta byte address of the operand's first element (before
    /// swizzling), a multiple of 16 below 2^18.
    pub fn with_start_address(self, bytes: u32) -> Result<Self, LayoutError> {
        Ok(SmemDesc {
            start_address: check_field("start address", bytes)?,
            ..self
        })
    }

    /// Bits 16-29: LBO in bytes, a multiple of 16 below 2^18.
    pub fn with_leading_byte_offset(self, bytes: u32) -> Result<Self, LayoutError> {
        Ok(SmemDesc {
            leading_byte_offset: check_field("leading byte offset", bytes)?,
            ..self
        })
    }

    /// Bits 32-45: SBO in bytes, a multiple of 16 below 2^18.
    pub fn with_stride_byte_offset(self, bytes: u32) -> Result<Self, LayoutError> {
        Ok(SmemDesc {
            stride_byte_offset: check_field("stride byte offset", bytes)?,
            ..self
        })
    }

    /// Bits 49-51: base offset, 0..=7 (PTX: `(pattern start address >> 7) & 7` when the
    /// swizzle pattern does not start on its natural boundary).
    pub fn with_base_offset(self, base_offset: u8) -> Result<Self, LayoutError> {
        if base_offset > 7 {
            return err(
                LayoutErrorKind::InvalidEncoding,
                format!("descriptor base offset {base_offset}: expected 0..=7 (3 bits)"),
            );
        }
        Ok(SmemDesc {
            base_offset,
            ..self
        })
    }

    /// The swizzle field (bits 62-63 on sm_90, 61-63 on sm_100).
    pub fn with_layout_type(self, layout_type: F::LayoutType) -> Self {
        SmemDesc {
            format: self.format.set_layout_type(layout_type),
            ..self
        }
    }

    /// Start address in bytes.
    pub fn start_address(&self) -> u32 {
        self.start_address
    }

    /// LBO in bytes.
    pub fn leading_byte_offset(&self) -> u32 {
        self.leading_byte_offset
    }

    /// SBO in bytes.
    pub fn stride_byte_offset(&self) -> u32 {
        self.stride_byte_offset
    }

    pub fn base_offset(&self) -> u8 {
        self.base_offset
    }

    pub fn layout_type(&self) -> F::LayoutType {
        self.format.layout_type()
    }

    pub(super) fn format(&self) -> &F {
        &self.format
    }

    pub(super) fn with_format(self, format: F) -> Self {
        SmemDesc { format, ..self }
    }

    /// The 64-bit descriptor.
    pub fn bits(&self) -> u64 {
        self.bits_without_start_address() | matrix_descriptor_encode(self.start_address)
    }

    /// Every bit except the start address: the static part the DSL ORs a runtime
    /// `matrix_descriptor_encode(address)` into.
    pub fn bits_without_start_address(&self) -> u64 {
        matrix_descriptor_encode(self.leading_byte_offset) << 16
            | matrix_descriptor_encode(self.stride_byte_offset) << 32
            | u64::from(self.base_offset) << 49
            | self.format.bits()
    }

    /// Decodes descriptor bits, rejecting what the format keeps 0 or fixed and invalid
    /// layout types.
    pub fn from_bits(bits: u64) -> Result<Self, LayoutError> {
        Ok(SmemDesc {
            start_address: field_bytes(bits, 0),
            leading_byte_offset: field_bytes(bits, 16),
            stride_byte_offset: field_bytes(bits, 32),
            base_offset: (bits >> 49 & 0b111) as u8,
            format: F::decode(bits)?,
        })
    }

    /// The layout the hardware reads through this descriptor for an `[mn, k]` operand of
    /// `elem_bytes` elements stored `major` (from the instruction's transpose bit or
    /// `imm-trans`): byte offsets are shared::cta addresses. (The interpreter decodes
    /// descriptors on its own, so that it does not share this module's mistakes.) Base
    /// offsets other than 0, and what the format's [`DescFormat::hardware_swizzle`] rejects,
    /// are not modelled and give an error.
    pub fn operand_layout(
        &self,
        major: Major,
        mn: i64,
        k: i64,
        elem_bytes: u32,
    ) -> Result<ComposedLayout, LayoutError> {
        let context = || format!("decoding {self:?}");
        if self.base_offset != 0 {
            return err(
                LayoutErrorKind::Unsupported,
                format!(
                    "{}: base offset {} is not modelled (operands must start on swizzle-pattern \
                     boundaries)",
                    context(),
                    self.base_offset
                ),
            );
        }
        let fields = DescriptorFields {
            swizzle: self
                .format
                .hardware_swizzle()
                .map_err(|e| e.context(context()))?,
            start_address: self.start_address,
            leading_byte_offset: self.leading_byte_offset,
            stride_byte_offset: self.stride_byte_offset,
        };
        canonical::hardware_layout(&fields, major, mn, k, elem_bytes)
            .map_err(|e| e.context(context()))
    }
}

impl<F: DescFormat> fmt::Debug for SmemDesc<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {{ bits: {:#018x}, start_address: {:#x}, leading_byte_offset: {}, \
             stride_byte_offset: {}",
            F::NAME,
            self.bits(),
            self.start_address,
            self.leading_byte_offset,
            self.stride_byte_offset,
        )?;
        self.format.fmt_rest(self.base_offset, f)
    }
}

/// Bytes of the 14-bit field at `shift`.
fn field_bytes(bits: u64, shift: u32) -> u32 {
    ((bits >> shift & 0x3FFF) << 4) as u32
}

/// A byte address or offset that a 14-bit, 16-byte-unit field holds exactly.
fn check_field(name: &str, bytes: u32) -> Result<u32, LayoutError> {
    if bytes % 16 != 0 || bytes >= 1 << 18 {
        return err(
            LayoutErrorKind::InvalidEncoding,
            format!(
                "descriptor {name} {bytes:#x}: expected a multiple of 16 below 0x40000 (14 bits \
                 of 16-byte units)"
            ),
        );
    }
    Ok(bytes)
}
