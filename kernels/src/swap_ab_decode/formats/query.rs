//! Q in the chunk-interleaved layout: within a token's row, element (h, d) sits at
//! `(d / 16) * HP * 16 + h * 16 + d % 16`, so the 16-dim chunk `c` of every head is contiguous
//! (`HP` = padded heads). Rows of consecutive tokens are `token_stride` elements apart.
//!
//! [`layout`] is that layout, the one the host packs and checks Q by.

use dsl_core::layout::{DynInt, Int, IntTuple, Layout, StaticOnly};
use dsl_core::tensor::{self, Global};
use dsl_core::trace::Tensor;

use super::cache::flat_strides;
use crate::formats::bf16::bf16;
use crate::swap_ab_decode::problem::ProblemError;
use crate::swap_ab_decode::{HEAD_DIM, ROPE_DIM};

/// Dims per interleaved chunk.
pub const CHUNK: usize = 16;

/// Q's layout in elements: `(token, head, dim) -> offset` with the dim a `(16, 32)` mode
/// (dim in its chunk, chunk), i.e. `(s_q, HP, (16, 32)) : (token_stride, 16, (1, 16 HP))`.
pub fn layout<D: DynInt>(tokens: Int<D>, padded_heads: Int<D>, token_stride: Int<D>) -> Layout<D> {
    let chunks = (HEAD_DIM / CHUNK) as i64;
    let chunk = CHUNK as i64;
    Layout::new(
        IntTuple::tuple([
            tokens.into(),
            padded_heads.clone().into(),
            IntTuple::tuple([chunk.into(), chunks.into()]),
        ]),
        IntTuple::tuple([
            token_stride.into(),
            chunk.into(),
            IntTuple::tuple([1.into(), (padded_heads * chunk).into()]),
        ]),
    )
    .expect("shape and stride of one profile")
}

/// [`layout`] with every extent and stride known.
pub fn host_layout(tokens: usize, padded_heads: usize, token_stride: usize) -> Layout {
    let int = |v: usize| Int::<StaticOnly>::Static(v as i64);
    layout(int(tokens), int(padded_heads), int(token_stride))
}

/// The strides of the rank-4 description `[s_q, 32, HP, 16]` (token, chunk, head, dim in
/// the chunk) that host APIs pass Q as, read off `layout`.
pub fn described_strides(layout: &Layout) -> [usize; 4] {
    let flat = flat_strides(layout);
    [flat[0], flat[3], flat[1], flat[2]]
}

/// The kernel's Q parameter (`[s_q, HP, 512]`, row stride `stride[0]`) through [`layout`].
#[track_caller]
pub fn device_view(q: &Tensor<bf16, 3>) -> tensor::Tensor<bf16, Global> {
    q.view_as(layout(
        Int::Dynamic(q.extent(0)),
        Int::Dynamic(q.extent(1)),
        Int::Dynamic(q.stride(0)),
    ))
}

/// cos_sin's layout in f32 elements: `(position, (pair, cos | sin))`, i.e.
/// `(rows, (32, 2)) : (row_stride, (1, 32))`: a position's 32 cosines, then its 32 sines.
pub fn cos_sin_layout<D: DynInt>(rows: Int<D>, row_stride: Int<D>) -> Layout<D> {
    let pairs = (ROPE_DIM / 2) as i64;
    Layout::new(
        IntTuple::tuple([rows.into(), IntTuple::tuple([pairs.into(), 2i64.into()])]),
        IntTuple::tuple([
            row_stride.into(),
            IntTuple::tuple([1i64.into(), pairs.into()]),
        ]),
    )
    .expect("shape and stride of one profile")
}

/// [`cos_sin_layout`] with every extent and stride known.
pub fn host_cos_sin_layout(rows: usize, row_stride: usize) -> Layout {
    let int = |v: usize| Int::<StaticOnly>::Static(v as i64);
    cos_sin_layout(int(rows), int(row_stride))
}

/// The kernel's cos_sin parameter (`[rows, 64]` f32, row stride `stride[0]`) through
/// [`cos_sin_layout`].
#[track_caller]
pub fn cos_sin_device_view(cos_sin: &Tensor<f32, 2>) -> tensor::Tensor<f32, Global> {
    cos_sin.view_as(cos_sin_layout(
        Int::Dynamic(cos_sin.extent(0)),
        Int::Dynamic(cos_sin.stride(0)),
    ))
}

/// The strides of the rank-2 description `[rows, 64]` of cos_sin, read off `layout`.
pub fn cos_sin_described_strides(layout: &Layout) -> [usize; 2] {
    let flat = flat_strides(layout);
    [flat[0], flat[1]]
}

/// Offset of element (h, d) inside a token's row of a chunk-interleaved Q with `padded_heads`.
pub fn chunk_interleaved_offset(padded_heads: usize, h: usize, d: usize) -> usize {
    element(
        &host_layout(1, padded_heads, padded_heads * HEAD_DIM),
        0,
        h,
        d,
    )
}

/// Index of element (h, d) of token b under a Q `layout`.
fn element(layout: &Layout, b: usize, h: usize, d: usize) -> usize {
    layout
        .offset_at(&[b as i64, h as i64, d as i64])
        .expect("a coordinate of the layout's rank") as usize
}

/// The whole Q buffer of one launch: `s_q` rows of `token_stride` bf16 elements; the first
/// `padded_heads * 512` of each row hold the chunk-interleaved [HP, 512] values, the rest is
/// padding the kernel never reads. Equality is bitwise (NaN payloads included).
#[derive(Clone, Debug)]
pub struct QueryBuffer {
    /// Tokens.
    pub s_q: usize,
    /// HP: heads in the layout, at least the live heads.
    pub padded_heads: usize,
    /// Elements from one token's row to the next (the tensor's `stride[0]`).
    pub token_stride: usize,
    /// `s_q * token_stride` elements.
    pub data: Vec<bf16>,
}

impl PartialEq for QueryBuffer {
    fn eq(&self, other: &Self) -> bool {
        (self.s_q, self.padded_heads, self.token_stride)
            == (other.s_q, other.padded_heads, other.token_stride)
            && self
                .data
                .iter()
                .map(|v| v.to_bits())
                .eq(other.data.iter().map(|v| v.to_bits()))
    }
}

impl QueryBuffer {
    /// A buffer filled with `fill` (padding included).
    pub fn new(
        s_q: usize,
        padded_heads: usize,
        token_stride: usize,
        fill: bf16,
    ) -> Result<Self, ProblemError> {
        let q = QueryBuffer {
            s_q,
            padded_heads,
            token_stride,
            data: vec![fill; s_q * token_stride],
        };
        q.validate()?;
        Ok(q)
    }

    /// Packs plain row-major `[s_q, padded_heads, 512]` values; padding gets `fill`.
    pub fn pack(
        plain: &[bf16],
        s_q: usize,
        padded_heads: usize,
        token_stride: usize,
        fill: bf16,
    ) -> Result<Self, ProblemError> {
        if plain.len() != s_q * padded_heads * HEAD_DIM {
            return Err(ProblemError::Shape {
                tensor: "q",
                problem: format!(
                    "{} plain values for [s_q, HP, 512] = [{s_q}, {padded_heads}, 512]",
                    plain.len()
                ),
            });
        }
        let mut q = Self::new(s_q, padded_heads, token_stride, fill)?;
        let layout = q.layout();
        for (i, &value) in plain.iter().enumerate() {
            let (b, h, d) = (
                i / (padded_heads * HEAD_DIM),
                i / HEAD_DIM % padded_heads,
                i % HEAD_DIM,
            );
            q.data[element(&layout, b, h, d)] = value;
        }
        Ok(q)
    }

    /// The values as plain row-major `[s_q, padded_heads, 512]` (padding dropped).
    pub fn unpack(&self) -> Vec<bf16> {
        let mut plain = Vec::with_capacity(self.s_q * self.padded_heads * HEAD_DIM);
        let layout = self.layout();
        for b in 0..self.s_q {
            for h in 0..self.padded_heads {
                plain.extend((0..HEAD_DIM).map(|d| self.data[element(&layout, b, h, d)]));
            }
        }
        plain
    }

    /// Checks the geometry.
    pub fn validate(&self) -> Result<(), ProblemError> {
        let fail = |problem: String| {
            Err(ProblemError::Shape {
                tensor: "q",
                problem,
            })
        };
        if self.s_q == 0 {
            return fail("s_q is 0: a launch needs at least one token".into());
        }
        let row = self.padded_heads * HEAD_DIM;
        if self.token_stride < row {
            return fail(format!(
                "token stride {} is below HP * 512 = {row}: token rows would overlap",
                self.token_stride
            ));
        }
        if self.data.len() != self.s_q * self.token_stride {
            return fail(format!(
                "holds {} elements, expected s_q * token_stride = {} * {}",
                self.data.len(),
                self.s_q,
                self.token_stride
            ));
        }
        Ok(())
    }

    /// The buffer's [`layout`].
    pub fn layout(&self) -> Layout {
        host_layout(self.s_q, self.padded_heads, self.token_stride)
    }

    /// Index into `data` of element (h, d) of token b.
    pub fn offset(&self, b: usize, h: usize, d: usize) -> usize {
        assert!(
            b < self.s_q && h < self.padded_heads && d < HEAD_DIM,
            "q[{b}, {h}, {d}] out of range"
        );
        element(&self.layout(), b, h, d)
    }

    /// Element (h, d) of token b.
    pub fn get(&self, b: usize, h: usize, d: usize) -> bf16 {
        self.data[self.offset(b, h, d)]
    }

    /// Sets element (h, d) of token b.
    pub fn set(&mut self, b: usize, h: usize, d: usize, value: bf16) {
        let i = self.offset(b, h, d);
        self.data[i] = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_interleave_16_dim_chunks_of_all_heads() {
        assert_eq!(chunk_interleaved_offset(16, 0, 0), 0);
        assert_eq!(chunk_interleaved_offset(16, 0, 15), 15);
        assert_eq!(chunk_interleaved_offset(16, 1, 0), 16);
        assert_eq!(chunk_interleaved_offset(16, 0, 16), 256);
        assert_eq!(chunk_interleaved_offset(20, 3, 37), 2 * 320 + 48 + 5);
    }

    #[test]
    fn offsets_cover_a_row_exactly_once() {
        let hp = 24;
        let mut seen = vec![false; hp * HEAD_DIM];
        for h in 0..hp {
            for d in 0..HEAD_DIM {
                let o = chunk_interleaved_offset(hp, h, d);
                assert!(!seen[o], "offset {o} twice");
                seen[o] = true;
            }
        }
    }

    #[test]
    fn the_rank_4_description_has_the_layouts_strides() {
        let (hp, stride) = (24, 24 * 512 + 8);
        let layout = host_layout(3, hp, stride);
        assert_eq!(described_strides(&layout), [stride, hp * CHUNK, CHUNK, 1]);
    }

    #[test]
    fn pack_then_unpack_is_the_identity_and_keeps_padding() {
        let (s_q, hp, stride) = (3, 17, 17 * 512 + 40);
        let plain: Vec<bf16> = (0..s_q * hp * HEAD_DIM)
            .map(|i| bf16::from_f32(i as f32))
            .collect();
        let q = QueryBuffer::pack(&plain, s_q, hp, stride, bf16::NAN).unwrap();
        assert_eq!(q.unpack(), plain);
        assert!(q.data[hp * HEAD_DIM..stride].iter().all(|v| v.is_nan()));
        assert_eq!(
            q.get(1, 2, 20),
            bf16::from_f32(((hp + 2) * HEAD_DIM + 20) as f32)
        );
    }

    #[test]
    fn overlapping_rows_are_refused() {
        let err = QueryBuffer::new(2, 16, 16 * 512 - 1, bf16::ZERO).unwrap_err();
        assert!(err.to_string().contains("overlap"), "{err}");
    }
}
