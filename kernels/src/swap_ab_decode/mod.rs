//! The DeepSeek-V4.1 "SwapAB" sparse decode attention: one query token attends to a
//! sliding-window list and a compressed list of paged KV rows, with an attention sink, and
//! writes MXFP8 in the o-fused layout.
//!
//! The folders are the design:
//! - [`device`]: the kernel, traced once per [`CompileKey`] for either target: the entry
//!   points and the two schedules (split, streamed), the loads and dequant, the MMA stage,
//!   the softmax, the merge and epilogue, the shared-memory map;
//! - [`formats`]: the tensors both sides agree on, GPU-free: [`record`] (V4.1 fp8 / NVFP4
//!   records), [`cache`] (paged caches), [`query`] (chunk-interleaved Q), [`output`]
//!   (o-fused MXFP8 with strided scales);
//! - [`host`]: what a serving engine calls: [`SwapAbDecode`] (compile, check, launch),
//!   [`dispatch()`] (the key and schedule for a layer and a token count), [`engine`] (GPU or
//!   interpreter runs of a [`problem::DecodeProblem`]), [`resources`] (ptxas figures);
//! - `testing` (the `testing` feature): `reference()`, the op in f64; `compare`, the SPEC's
//!   numerics contract as a report; `cases`, named edge cases and seeded realistic cases;
//!   `case_file`, one case per `.safetensors` file, readable from PyTorch. A serving build
//!   leaves them (and their dependencies) out.
//!
//! # Resources per key
//!

#![doc = include_str!("resources.md")]

pub mod device;
pub mod formats;
pub mod host;
pub mod key;
#[cfg(feature = "testing")]
pub mod testing;

// The modules under their short names, as the rest of the crate and its users name them.
pub use device::{kernel, plan};
pub use formats::{cache, output, query, record};
pub use host::{dispatch, engine, problem, resources};
#[cfg(feature = "testing")]
pub use testing::{case_file, cases, numerics, reference};

pub use cache::PagedCache;
#[cfg(feature = "testing")]
pub use case_file::{CaseFile, CaseFileError};
#[cfg(feature = "testing")]
pub use cases::{CaseSpec, DecodeCase, edge_case_keys, edge_cases, generate, realistic_keys};
pub use dispatch::{Gpu, LayerShape, dispatch, snapshot_keys, variant_keys, warmup_keys};
pub use host::{Bound, CompileMode, DecodeArgs, DecodeError, DeviceTensor, SwapAbDecode};
pub use kernel::{entry_name, swap_ab_decode, swap_ab_decode_debug, trace_entry};
pub use key::{CompileKey, ExtraRecord, KeyError, MAX_STREAMED_CTAS, Schedule};
#[cfg(feature = "testing")]
pub use numerics::{NumericsReport, compare};
pub use output::{OutputBuffers, OutputLayout};
pub use problem::{DecodeProblem, ProblemError, SlotList};
pub use query::QueryBuffer;
#[cfg(feature = "testing")]
pub use reference::{ReferenceOutput, reference};

/// Dimensions of a latent KV row (K and V are the same row).
pub const HEAD_DIM: usize = 512;
/// Trailing dims of a row that carry rotary position embedding.
pub const ROPE_DIM: usize = 64;
/// First RoPE dim.
pub const ROPE_START: usize = HEAD_DIM - ROPE_DIM;
/// Rows of a compressed-list KV tile (the MMA's M).
pub const TILE: usize = 128;
/// Rows of a sliding-window KV tile.
pub const SWA_ROWS: usize = 64;
/// Threads of a CTA (16 warps: 4 TMEM lane quadrants x 4 column groups).
pub const THREADS: usize = 512;
/// Largest cluster (non-portable size on sm_90 and sm_100).
pub const MAX_CLUSTER: usize = 16;
/// Bytes of a V4.1 fp8 record: 512 e4m3 values, then 16 ue8m0 scales.
pub const FP8_RECORD: usize = 528;
/// Bytes of a V4.1 NVFP4 record: 256 bytes of e2m1 pairs, then 32 e4m3 scales.
pub const FP4_RECORD: usize = 288;
/// Heads per group of the grouped output projection (o-fused layout).
pub const WV_GROUP_SIZE: usize = 8;
/// log2(e).
pub const LOG2E: f64 = std::f64::consts::LOG2_E;
