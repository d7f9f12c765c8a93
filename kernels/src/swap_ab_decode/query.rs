//! Q in the chunk-interleaved layout: within a token's row, element (h, d) sits at
//! `(d / 16) * HP * 16 + h * 16 + d % 16`, so the 16-dim chunk `c` of every head is contiguous
//! (`HP` = padded heads). Rows of consecutive tokens are `token_stride` elements apart.

use super::HEAD_DIM;
use super::problem::ProblemError;
use crate::formats::bf16::bf16;

/// Dims per interleaved chunk.
pub const CHUNK: usize = 16;

/// Offset of element (h, d) inside a token's row of a chunk-interleaved Q with `padded_heads`.
pub fn chunk_interleaved_offset(padded_heads: usize, h: usize, d: usize) -> usize {
    (d / CHUNK) * padded_heads * CHUNK + h * CHUNK + d % CHUNK
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
        for (i, &value) in plain.iter().enumerate() {
            let (b, h, d) = (
                i / (padded_heads * HEAD_DIM),
                i / HEAD_DIM % padded_heads,
                i % HEAD_DIM,
            );
            q.set(b, h, d, value);
        }
        Ok(q)
    }

    /// The values as plain row-major `[s_q, padded_heads, 512]` (padding dropped).
    pub fn unpack(&self) -> Vec<bf16> {
        let mut plain = Vec::with_capacity(self.s_q * self.padded_heads * HEAD_DIM);
        for b in 0..self.s_q {
            for h in 0..self.padded_heads {
                plain.extend((0..HEAD_DIM).map(|d| self.get(b, h, d)));
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

    /// Index into `data` of element (h, d) of token b.
    pub fn offset(&self, b: usize, h: usize, d: usize) -> usize {
        assert!(
            b < self.s_q && h < self.padded_heads && d < HEAD_DIM,
            "q[{b}, {h}, {d}] out of range"
        );
        b * self.token_stride + chunk_interleaved_offset(self.padded_heads, h, d)
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
