//! TMA tensor maps on the host: what a `cp.async.bulk.tensor` copy reads to find a box of a
//! global tensor. One description, checked once ([`TensorMapDesc::tiled`]), feeds both
//! back ends: the JIT encodes it with the driver's `cuTensorMapEncodeTiled`
//! (`jit::tensor_map`), and the interpreter receives it in kestrel's own 128-byte form
//! ([`TensorMapDesc::to_interp_bytes`]), which it decodes and checks again
//! ([`TensorMapDesc::from_interp_bytes`]) before every copy, so a map the kernel was never
//! given, or one corrupted in parameter memory, is a fault and not a silent copy.
//!
//! Units follow the driver: dimensions and box sizes in elements, innermost first; strides
//! in bytes, for dimensions 1.. (dimension 0 is dense).

use std::fmt;

use crate::ir::{ElemTy, TENSOR_MAP_BYTES};

/// Most dimensions a tiled tensor map has.
pub const MAX_RANK: usize = 5;

/// How a box is swizzled in shared memory (the `Sw<B,4,3>` patterns, in bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MapSwizzle {
    None,
    B32,
    B64,
    B128,
}

impl MapSwizzle {
    /// Bytes of the innermost box row the pattern spans (the largest allowed).
    pub fn span(self) -> Option<u32> {
        match self {
            MapSwizzle::None => None,
            MapSwizzle::B32 => Some(32),
            MapSwizzle::B64 => Some(64),
            MapSwizzle::B128 => Some(128),
        }
    }

    fn code(self) -> u8 {
        match self {
            MapSwizzle::None => 0,
            MapSwizzle::B32 => 1,
            MapSwizzle::B64 => 2,
            MapSwizzle::B128 => 3,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => MapSwizzle::None,
            1 => MapSwizzle::B32,
            2 => MapSwizzle::B64,
            3 => MapSwizzle::B128,
            _ => return None,
        })
    }
}

/// A tensor map description that failed the hardware's rules.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("tensor map: {0}")]
pub struct TensorMapError(pub String);

/// A tiled tensor map: a global tensor and the box one copy moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMapDesc {
    elem: ElemTy,
    rank: u8,
    address: u64,
    dims: [u64; MAX_RANK],
    /// Byte strides of dimensions 1..rank (index 0 unused: dimension 0 is dense).
    strides: [u64; MAX_RANK],
    box_dims: [u32; MAX_RANK],
    swizzle: MapSwizzle,
}

const MAGIC: &[u8; 4] = b"KTMA";

impl TensorMapDesc {
    /// A map of the tensor at `address` with `dims` elements per dimension (innermost
    /// first) and `strides` bytes between consecutive indices of dimensions 1.. (one fewer
    /// than `dims`), moving boxes of `box_dims` elements, swizzled in shared memory by
    /// `swizzle`. Out-of-bounds elements of a box read as zero.
    pub fn tiled(
        elem: ElemTy,
        address: u64,
        dims: &[u64],
        strides: &[u64],
        box_dims: &[u32],
        swizzle: MapSwizzle,
    ) -> Result<Self, TensorMapError> {
        let rank = dims.len();
        let err = |m: String| Err(TensorMapError(m));
        if !(1..=MAX_RANK).contains(&rank) {
            return err(format!(
                "rank {rank}: a tiled map has 1 to {MAX_RANK} dimensions"
            ));
        }
        if strides.len() + 1 != rank || box_dims.len() != rank {
            return err(format!(
                "{rank} dimension(s) need {} stride(s) (dimension 0 is dense) and {rank} box \
                 size(s); got {} and {}",
                rank - 1,
                strides.len(),
                box_dims.len()
            ));
        }
        let mut d = TensorMapDesc {
            elem,
            rank: rank as u8,
            address,
            dims: [1; MAX_RANK],
            strides: [0; MAX_RANK],
            box_dims: [1; MAX_RANK],
            swizzle,
        };
        d.dims[..rank].copy_from_slice(dims);
        d.strides[1..rank].copy_from_slice(strides);
        d.box_dims[..rank].copy_from_slice(box_dims);
        d.check()?;
        Ok(d)
    }

    /// The rules of `cuTensorMapEncodeTiled` (CUDA driver API, and PTX ISA 5.5).
    fn check(&self) -> Result<(), TensorMapError> {
        let err = |m: String| Err(TensorMapError(m));
        let esize = self.elem.bytes() as u64;
        if self.address % 16 != 0 {
            return err(format!(
                "global address {:#x} is not 16-byte aligned",
                self.address
            ));
        }
        for i in 0..self.rank() {
            let n = self.dims[i];
            if n == 0 || n > 1 << 31 {
                return err(format!(
                    "dimension {i} has {n} elements; allowed 1 ..= 2^31"
                ));
            }
            let b = self.box_dims[i];
            if b == 0 || b > 256 {
                return err(format!("box dimension {i} is {b}; allowed 1 ..= 256"));
            }
        }
        for i in 1..self.rank() {
            let s = self.strides[i];
            if s % 16 != 0 || s >= 1 << 40 {
                return err(format!(
                    "stride of dimension {i} is {s} bytes; it must be a multiple of 16 below 2^40 \
                     (pad the rows)"
                ));
            }
        }
        let row = self.box_dims[0] as u64 * esize;
        if row % 16 != 0 {
            return err(format!(
                "the box's innermost extent is {row} bytes; it must be a multiple of 16"
            ));
        }
        if let Some(span) = self.swizzle.span()
            && row > span as u64
        {
            return err(format!(
                "the box's innermost extent is {row} bytes, more than the {span}-byte swizzle \
                 spans; split the box or use a wider swizzle"
            ));
        }
        Ok(())
    }

    pub fn elem(&self) -> ElemTy {
        self.elem
    }

    pub fn rank(&self) -> usize {
        self.rank as usize
    }

    pub fn address(&self) -> u64 {
        self.address
    }

    /// Elements per dimension, innermost first.
    pub fn dims(&self) -> &[u64] {
        &self.dims[..self.rank()]
    }

    /// Byte stride of dimension `i` (dimension 0: the element size).
    pub fn stride(&self, i: usize) -> u64 {
        if i == 0 {
            self.elem.bytes() as u64
        } else {
            self.strides[i]
        }
    }

    /// Byte strides of dimensions 1.., as the driver takes them.
    pub fn strides(&self) -> &[u64] {
        &self.strides[1..self.rank()]
    }

    /// Box elements per dimension, innermost first.
    pub fn box_dims(&self) -> &[u32] {
        &self.box_dims[..self.rank()]
    }

    pub fn swizzle(&self) -> MapSwizzle {
        self.swizzle
    }

    /// Bytes one box occupies in shared memory, which a load completes on its mbarrier
    /// (out-of-bounds elements included: they are filled with zeros).
    pub fn box_bytes(&self) -> u32 {
        self.box_dims().iter().product::<u32>() * self.elem.bytes() as u32
    }

    /// The map in kestrel's own 128-byte form, as the interpreter reads it from the kernel
    /// parameter.
    pub fn to_interp_bytes(&self) -> [u8; TENSOR_MAP_BYTES] {
        let mut out = [0u8; TENSOR_MAP_BYTES];
        out[0..4].copy_from_slice(MAGIC);
        out[4] = elem_code(self.elem);
        out[5] = self.rank;
        out[6] = self.swizzle.code();
        out[8..16].copy_from_slice(&self.address.to_le_bytes());
        for i in 0..MAX_RANK {
            out[16 + 8 * i..][..8].copy_from_slice(&self.dims[i].to_le_bytes());
            out[56 + 8 * i..][..8].copy_from_slice(&self.strides[i].to_le_bytes());
            out[96 + 4 * i..][..4].copy_from_slice(&self.box_dims[i].to_le_bytes());
        }
        out
    }

    /// Decodes and re-checks [`TensorMapDesc::to_interp_bytes`]'s form.
    pub fn from_interp_bytes(bytes: &[u8]) -> Result<Self, TensorMapError> {
        let err = |m: &str| Err(TensorMapError(m.to_string()));
        if bytes.len() != TENSOR_MAP_BYTES || &bytes[0..4] != MAGIC {
            return err("the parameter does not hold a tensor map made by TensorMapDesc");
        }
        let u64_at = |o: usize| u64::from_le_bytes(bytes[o..o + 8].try_into().expect("8 bytes"));
        let u32_at = |o: usize| u32::from_le_bytes(bytes[o..o + 4].try_into().expect("4 bytes"));
        let (Some(elem), Some(swizzle)) =
            (elem_from_code(bytes[4]), MapSwizzle::from_code(bytes[6]))
        else {
            return err("unknown element type or swizzle code");
        };
        let rank = bytes[5];
        if !(1..=MAX_RANK as u8).contains(&rank) {
            return err("rank outside 1 ..= 5");
        }
        let d = TensorMapDesc {
            elem,
            rank,
            address: u64_at(8),
            dims: std::array::from_fn(|i| u64_at(16 + 8 * i)),
            strides: std::array::from_fn(|i| u64_at(56 + 8 * i)),
            box_dims: std::array::from_fn(|i| u32_at(96 + 4 * i)),
            swizzle,
        };
        d.check()?;
        Ok(d)
    }
}

const ELEMS: [ElemTy; 7] = [
    ElemTy::U8,
    ElemTy::I32,
    ElemTy::I64,
    ElemTy::U32,
    ElemTy::F32,
    ElemTy::Bf16,
    ElemTy::E4m3,
];

fn elem_code(e: ElemTy) -> u8 {
    ELEMS
        .iter()
        .position(|&x| x == e)
        .expect("every ElemTy is listed") as u8
        + 1
}

fn elem_from_code(c: u8) -> Option<ElemTy> {
    ELEMS.get((c as usize).checked_sub(1)?).copied()
}

impl fmt::Display for TensorMapDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} map {:?} (strides {:?} B), box {:?}, swizzle {:?}",
            self.elem.name(),
            self.dims(),
            self.strides(),
            self.box_dims(),
            self.swizzle
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16_rows() -> TensorMapDesc {
        TensorMapDesc::tiled(
            ElemTy::Bf16,
            0x1000,
            &[4096, 2048],
            &[8192],
            &[64, 128],
            MapSwizzle::B128,
        )
        .unwrap()
    }

    #[test]
    fn round_trips_through_the_interpreter_form() {
        let d = bf16_rows();
        assert_eq!(
            TensorMapDesc::from_interp_bytes(&d.to_interp_bytes()),
            Ok(d)
        );
        assert_eq!(d.box_bytes(), 64 * 128 * 2);
        assert_eq!(d.stride(0), 2);
        assert_eq!(d.stride(1), 8192);
    }

    #[test]
    fn refuses_what_the_driver_refuses() {
        let tiled = |dims: &[u64], strides: &[u64], b: &[u32], sw| {
            TensorMapDesc::tiled(ElemTy::Bf16, 0x1000, dims, strides, b, sw)
                .unwrap_err()
                .0
        };
        assert!(tiled(&[64, 64], &[100], &[64, 64], MapSwizzle::B128).contains("multiple of 16"));
        assert!(
            tiled(&[128, 64], &[256], &[128, 64], MapSwizzle::B128).contains("128-byte swizzle")
        );
        assert!(tiled(&[64, 64], &[128], &[64, 300], MapSwizzle::None).contains("1 ..= 256"));
        assert!(tiled(&[64], &[], &[4], MapSwizzle::None).contains("multiple of 16"));
        assert!(tiled(&[64, 64], &[], &[64, 64], MapSwizzle::None).contains("stride(s)"));
        let misaligned =
            TensorMapDesc::tiled(ElemTy::U8, 0x1008, &[64], &[], &[64], MapSwizzle::None);
        assert!(misaligned.unwrap_err().0.contains("16-byte aligned"));
    }

    #[test]
    fn a_corrupted_map_is_refused() {
        let mut bytes = bf16_rows().to_interp_bytes();
        bytes[56 + 8] = 3; // stride of dimension 1 no longer a multiple of 16
        assert!(TensorMapDesc::from_interp_bytes(&bytes).is_err());
        assert!(TensorMapDesc::from_interp_bytes(&[0u8; 128]).is_err());
    }
}
