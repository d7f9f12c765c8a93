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
            other => Err(KeyError::Record(other)),
        }
    }

    fn short_name(self) -> &'static str {
        match self {
            ExtraRecord::Fp8 => "fp8",
            ExtraRecord::Nvfp4 => "nvfp4",
        }
    }
}

/// What a decode kernel is compiled for. The token count is a grid dimension, not part of
/// the key: one compiled kernel serves every decode step of a layer shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CompileKey {
    /// Live heads per GPU: 16 or 32.
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
}

/// Why a set of fields is not a valid [`CompileKey`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("live heads must be 16 or 32, got {0}")]
    Heads(usize),
    #[error(
        "compressed records must be V4.1 fp8 ({FP8_RECORD} bytes) or NVFP4 ({FP4_RECORD} bytes), got {0} bytes"
    )]
    Record(usize),
    #[error("the {list} page size must be a power of two, got {page}")]
    Page { list: &'static str, page: usize },
    #[error(
        "swa_width {swa_width} and extra_width {extra_width} give {tiles} KV tiles per token \
         (ceil(NK/64) + ceil(NE/128)); a cluster holds 1 to {MAX_CLUSTER}"
    )]
    Cluster {
        swa_width: usize,
        extra_width: usize,
        tiles: usize,
    },
}

impl CompileKey {
    /// Checks every field; the error says which one is wrong and what is allowed.
    pub fn validate(&self) -> Result<(), KeyError> {
        if !matches!(self.heads, 16 | 32) {
            return Err(KeyError::Heads(self.heads));
        }
        for (list, page) in [("SWA", self.swa_page), ("compressed", self.extra_page)] {
            if !page.is_power_of_two() {
                return Err(KeyError::Page { list, page });
            }
        }
        let tiles = self.cluster_size();
        if !(1..=MAX_CLUSTER).contains(&tiles) {
            return Err(KeyError::Cluster {
                swa_width: self.swa_width,
                extra_width: self.extra_width,
                tiles,
            });
        }
        Ok(())
    }

    /// SWA tiles (KT = ceil(NK / 64)): cluster ranks `0..KT` take SWA rows.
    pub fn swa_tiles(&self) -> usize {
        self.swa_width.div_ceil(SWA_ROWS)
    }

    /// Compressed tiles (ET = ceil(NE / 128)).
    pub fn extra_tiles(&self) -> usize {
        self.extra_width.div_ceil(TILE)
    }

    /// CTAs per cluster, one per KV tile (C = KT + ET).
    pub fn cluster_size(&self) -> usize {
        self.swa_tiles() + self.extra_tiles()
    }
}

impl fmt::Display for CompileKey {
    /// A name usable in file names: `h16_nk128_ne512_fp8_p64x64_sm100a`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "h{}_nk{}_ne{}_{}_p{}x{}_{}",
            self.heads,
            self.swa_width,
            self.extra_width,
            self.extra_record.short_name(),
            self.swa_page,
            self.extra_page,
            self.target.short_name()
        )
    }
}
