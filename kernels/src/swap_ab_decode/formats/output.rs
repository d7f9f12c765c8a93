//! The MXFP8 "o-fused" output (SPEC math steps 7-8), laid out for the grouped output
//! projection: heads are grouped by 8; within a group, 32-dim chunk `cc` of group head `hg`
//! is unit `ka = cc * 8 + hg`.
//!
//! - `out_data` `[s_q, groups, 4096]` e4m3 codes: value `j` of unit `ka` at `ka * 32 + j`; the
//!   last dim is contiguous, the first two have element strides.
//! - `out_scale` `[s_q, groups, 32]` i32 with any element strides: the ue8m0 exponent of unit
//!   `ka` is byte `ka % 4` (little-endian) of element `ka / 4`.
//!
//! Only the live groups (`heads / 8`) are written; other groups keep their bytes.

use dsl_core::layout::{DynInt, Int, IntTuple, Layout, StaticOnly};
use dsl_core::tensor::{self, Global};
use dsl_core::trace::{E4m3, Tensor};

use super::cache::flat_strides;
use crate::formats::mxfp8::{self, BLOCK};
use crate::swap_ab_decode::problem::ProblemError;
use crate::swap_ab_decode::{HEAD_DIM, WV_GROUP_SIZE};

/// e4m3 codes per (token, group): 8 heads of 512 dims.
pub const GROUP_CODES: usize = WV_GROUP_SIZE * HEAD_DIM;
/// i32 scale words per (token, group): one byte per 32-code unit.
pub const GROUP_SCALE_WORDS: usize = GROUP_CODES / BLOCK / 4;
/// 32-dim chunks per head.
pub const CHUNKS_PER_HEAD: usize = HEAD_DIM / BLOCK;

/// Where chunk `cc` of head `h` goes: `(group, unit ka)`.
pub fn o_fused_unit(h: usize, cc: usize) -> (usize, usize) {
    (h / WV_GROUP_SIZE, cc * WV_GROUP_SIZE + h % WV_GROUP_SIZE)
}

/// Bytes of an `out_scale` element, the i32 word four ue8m0 exponents share.
pub const SCALE_WORD_BYTES: i64 = std::mem::size_of::<i32>() as i64;

/// `out_data`'s layout in e4m3 codes: `(token, head, dim)` with the head a
/// `(8, groups)` mode (head in its group, group) and the dim a `(32, 16)` mode (dim in its
/// chunk, chunk), i.e. `(s_q, (8, groups), (32, 16)) : (S0, (32, S1), (1, 256))` for the
/// element strides `S0, S1` of (token, group): the o-fused unit placement, as a layout.
pub fn data_layout<D: DynInt>(tokens: Int<D>, groups: Int<D>, strides: [Int<D>; 2]) -> Layout<D> {
    let [token_stride, group_stride] = strides;
    let (group, block) = (WV_GROUP_SIZE as i64, BLOCK as i64);
    Layout::new(
        IntTuple::tuple([
            tokens.into(),
            IntTuple::tuple([group.into(), groups.into()]),
            IntTuple::tuple([block.into(), (CHUNKS_PER_HEAD as i64).into()]),
        ]),
        IntTuple::tuple([
            token_stride.into(),
            IntTuple::tuple([block.into(), group_stride.into()]),
            IntTuple::tuple([1i64.into(), (block * group).into()]),
        ]),
    )
    .expect("shape and stride of one profile")
}

/// `out_scale`'s layout in bytes (of its i32 words): `(token, head, chunk) -> ` the byte of
/// the chunk's ue8m0 exponent, with the head a `((4, 2), groups)` mode, i.e.
/// `(s_q, ((4, 2), groups), 16) : (4 T0, ((1, 4 T2), 4 T1), 8 T2)` for the word strides
/// `T0, T1, T2`: unit `ka = 8 chunk + head in group` is byte `ka % 4` of word `ka / 4`.
pub fn scale_layout<D: DynInt>(
    tokens: Int<D>,
    groups: Int<D>,
    word_strides: [Int<D>; 3],
) -> Layout<D> {
    let [token, group, word] = word_strides.map(|s| s * SCALE_WORD_BYTES);
    let per_word = SCALE_WORD_BYTES;
    let words_per_chunk = WV_GROUP_SIZE as i64 / per_word;
    Layout::new(
        IntTuple::tuple([
            tokens.into(),
            IntTuple::tuple([
                IntTuple::tuple([per_word.into(), words_per_chunk.into()]),
                groups.into(),
            ]),
            (CHUNKS_PER_HEAD as i64).into(),
        ]),
        IntTuple::tuple([
            token.into(),
            IntTuple::tuple([
                IntTuple::tuple([1i64.into(), word.clone().into()]),
                group.into(),
            ]),
            (word * words_per_chunk).into(),
        ]),
    )
    .expect("shape and stride of one profile")
}

/// The debug output's layout in f32: `(token, head, (dim in its chunk, chunk))`, i.e.
/// `(s_q, heads, (32, 16)) : (P0, P1, (1, 32))` for the element strides `P0, P1`.
pub fn precast_layout<D: DynInt>(tokens: Int<D>, heads: Int<D>, strides: [Int<D>; 2]) -> Layout<D> {
    let [token_stride, head_stride] = strides;
    let block = BLOCK as i64;
    Layout::new(
        IntTuple::tuple([
            tokens.into(),
            heads.into(),
            IntTuple::tuple([block.into(), (CHUNKS_PER_HEAD as i64).into()]),
        ]),
        IntTuple::tuple([
            token_stride.into(),
            head_stride.into(),
            IntTuple::tuple([1i64.into(), block.into()]),
        ]),
    )
    .expect("shape and stride of one profile")
}

/// The head and 32-dim chunk whose values unit `ka` of group `g` holds
/// ([`o_fused_unit`]'s inverse).
fn head_and_chunk(g: usize, ka: usize) -> (usize, usize) {
    (g * WV_GROUP_SIZE + ka % WV_GROUP_SIZE, ka / WV_GROUP_SIZE)
}

/// The i32 word and its byte a byte offset of `out_scale` names.
fn word_and_byte(byte_offset: usize) -> (usize, usize) {
    let per_word = SCALE_WORD_BYTES as usize;
    (byte_offset / per_word, byte_offset % per_word)
}

/// The strides of the rank-3 description `[s_q, groups, 4096]` of `out_data`, read off a
/// [`data_layout`].
pub fn described_data_strides(layout: &Layout) -> [usize; 3] {
    let flat = flat_strides(layout);
    [flat[0], flat[2], flat[3]]
}

/// The strides of the rank-3 description `[s_q, heads, 512]` of `precast`, read off a
/// [`precast_layout`].
pub fn described_precast_strides(layout: &Layout) -> [usize; 3] {
    let flat = flat_strides(layout);
    [flat[0], flat[1], flat[2]]
}

/// The kernel's `out` parameter through [`data_layout`].
#[track_caller]
pub fn data_view(out: &Tensor<E4m3, 3>) -> tensor::Tensor<E4m3, Global> {
    let strides = [out.stride(0), out.stride(1)].map(Int::Dynamic);
    out.view_as(data_layout(
        Int::Dynamic(out.extent(0)),
        Int::Dynamic(out.extent(1)),
        strides,
    ))
}

/// The kernel's `out_scale` parameter's bytes through [`scale_layout`].
#[track_caller]
pub fn scale_view(out_scale: &Tensor<i32, 3>) -> tensor::Tensor<u8, Global> {
    let strides = [0, 1, 2].map(|d| Int::Dynamic(out_scale.stride(d)));
    out_scale.view_as_elements(scale_layout(
        Int::Dynamic(out_scale.extent(0)),
        Int::Dynamic(out_scale.extent(1)),
        strides,
    ))
}

/// The debug entry point's `precast` parameter through [`precast_layout`].
#[track_caller]
pub fn precast_view(precast: &Tensor<f32, 3>) -> tensor::Tensor<f32, Global> {
    let strides = [precast.stride(0), precast.stride(1)].map(Int::Dynamic);
    precast.view_as(precast_layout(
        Int::Dynamic(precast.extent(0)),
        Int::Dynamic(precast.extent(1)),
        strides,
    ))
}

/// Groups a kernel with `heads` live heads writes.
pub fn live_groups(heads: usize) -> usize {
    heads / WV_GROUP_SIZE
}

/// Shapes and element strides of the two output tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputLayout {
    /// Tokens.
    pub s_q: usize,
    /// Groups in the tensors, at least the live ones.
    pub groups: usize,
    /// `out_data` strides of (token, group), in elements; the last dim is contiguous.
    pub data_strides: [usize; 2],
    /// `out_scale` strides of (token, group, word), in i32 elements.
    pub scale_strides: [usize; 3],
}

impl OutputLayout {
    /// Both tensors contiguous, row-major.
    pub fn row_major(s_q: usize, groups: usize) -> Self {
        OutputLayout {
            s_q,
            groups,
            data_strides: [groups * GROUP_CODES, GROUP_CODES],
            scale_strides: [groups * GROUP_SCALE_WORDS, GROUP_SCALE_WORDS, 1],
        }
    }

    /// Row-major data; scales with the token innermost (`[s_q, groups, 32]` with strides
    /// `(1, 32 * s_q, s_q)`), as a transposed scale buffer of the projection GEMM would be.
    pub fn token_innermost_scales(s_q: usize, groups: usize) -> Self {
        OutputLayout {
            scale_strides: [1, GROUP_SCALE_WORDS * s_q, s_q],
            ..Self::row_major(s_q, groups)
        }
    }

    /// `out_data` as [`data_layout`].
    pub fn data_layout(&self) -> Layout {
        let [t, g] = self.data_strides.map(static_int);
        data_layout(static_int(self.s_q), static_int(self.groups), [t, g])
    }

    /// `out_scale` as [`scale_layout`].
    pub fn scale_layout(&self) -> Layout {
        let strides = self.scale_strides.map(static_int);
        scale_layout(static_int(self.s_q), static_int(self.groups), strides)
    }

    /// Index of code `j` of (token b, group g).
    pub fn data_index(&self, b: usize, g: usize, j: usize) -> usize {
        debug_assert!(b < self.s_q && g < self.groups && j < GROUP_CODES);
        b * self.data_strides[0] + g * self.data_strides[1] + j
    }

    /// Index of scale word `w` of (token b, group g).
    pub fn scale_index(&self, b: usize, g: usize, w: usize) -> usize {
        debug_assert!(b < self.s_q && g < self.groups && w < GROUP_SCALE_WORDS);
        b * self.scale_strides[0] + g * self.scale_strides[1] + w * self.scale_strides[2]
    }

    /// Elements `out_data` spans.
    pub fn data_len(&self) -> usize {
        self.data_index(self.s_q - 1, self.groups - 1, GROUP_CODES - 1) + 1
    }

    /// Elements `out_scale` spans.
    pub fn scale_len(&self) -> usize {
        self.scale_index(self.s_q - 1, self.groups - 1, GROUP_SCALE_WORDS - 1) + 1
    }

    /// Checks that the layout serves `s_q` tokens and `heads` live heads and that no two
    /// elements of either tensor share memory.
    pub fn validate(&self, s_q: usize, heads: usize) -> Result<(), ProblemError> {
        let fail = |tensor, problem: String| Err(ProblemError::Shape { tensor, problem });
        if self.s_q != s_q {
            return fail(
                "out_data",
                format!("has {} tokens, the problem {s_q}", self.s_q),
            );
        }
        if self.groups < live_groups(heads).max(1) {
            return fail(
                "out_data",
                format!(
                    "has {} groups; {heads} heads need {}",
                    self.groups,
                    live_groups(heads)
                ),
            );
        }
        let mut rows: Vec<usize> = (0..self.s_q)
            .flat_map(|b| (0..self.groups).map(move |g| (b, g)))
            .map(|(b, g)| self.data_index(b, g, 0))
            .collect();
        rows.sort_unstable();
        if rows.windows(2).any(|w| w[1] - w[0] < GROUP_CODES) {
            return fail(
                "out_data",
                format!(
                    "strides {:?} make (token, group) rows of 4096 codes overlap",
                    self.data_strides
                ),
            );
        }
        let mut words: Vec<usize> = (0..self.s_q)
            .flat_map(|b| {
                (0..self.groups).flat_map(move |g| (0..GROUP_SCALE_WORDS).map(move |w| (b, g, w)))
            })
            .map(|(b, g, w)| self.scale_index(b, g, w))
            .collect();
        words.sort_unstable();
        if words.windows(2).any(|w| w[0] == w[1]) {
            return fail(
                "out_scale",
                format!(
                    "strides {:?} map two elements to the same i32",
                    self.scale_strides
                ),
            );
        }
        Ok(())
    }
}

fn static_int(v: usize) -> Int<StaticOnly> {
    Int::Static(v as i64)
}

/// `layout`'s offset of (token b, head h, `dim`).
fn offset(layout: &Layout, b: usize, h: usize, dim: usize) -> usize {
    layout
        .offset_at(&[b as i64, h as i64, dim as i64])
        .expect("a coordinate of the layout's rank") as usize
}

/// The two output tensors' storage: what a launch starts from, or what it left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputBuffers {
    /// Shapes and strides.
    pub layout: OutputLayout,
    /// `out_data` storage, at least `layout.data_len()` e4m3 codes.
    pub data: Vec<u8>,
    /// `out_scale` storage, at least `layout.scale_len()` words.
    pub scale: Vec<i32>,
}

impl OutputBuffers {
    /// Storage of exactly the spans of `layout`, filled with `data_fill` and `scale_fill`.
    pub fn filled(layout: OutputLayout, data_fill: u8, scale_fill: i32) -> Self {
        OutputBuffers {
            layout,
            data: vec![data_fill; layout.data_len()],
            scale: vec![scale_fill; layout.scale_len()],
        }
    }

    /// Checks the layout and that the storage covers it.
    pub fn validate(&self, s_q: usize, heads: usize) -> Result<(), ProblemError> {
        self.layout.validate(s_q, heads)?;
        if self.data.len() < self.layout.data_len() {
            return Err(ProblemError::Shape {
                tensor: "out_data",
                problem: format!(
                    "storage of {} codes is shorter than the {} its strides span",
                    self.data.len(),
                    self.layout.data_len()
                ),
            });
        }
        if self.scale.len() < self.layout.scale_len() {
            return Err(ProblemError::Shape {
                tensor: "out_scale",
                problem: format!(
                    "storage of {} words is shorter than the {} its strides span",
                    self.scale.len(),
                    self.layout.scale_len()
                ),
            });
        }
        Ok(())
    }

    /// Code `j` of unit `ka` of (token b, group g).
    pub fn code(&self, b: usize, g: usize, ka: usize, j: usize) -> u8 {
        let (h, cc) = head_and_chunk(g, ka);
        self.data[offset(&self.layout.data_layout(), b, h, cc * BLOCK + j)]
    }

    /// The ue8m0 exponent of unit `ka` of (token b, group g).
    pub fn scale_byte(&self, b: usize, g: usize, ka: usize) -> u8 {
        let (h, cc) = head_and_chunk(g, ka);
        self.exponent(&self.layout.scale_layout(), b, h, cc)
    }

    /// The exponent of chunk `cc` of head `h` of token b, at its byte of `scale` (the
    /// words' little-endian bytes, as the kernel stores them).
    fn exponent(&self, scale: &Layout, b: usize, h: usize, cc: usize) -> u8 {
        let (word, byte) = word_and_byte(offset(scale, b, h, cc));
        self.scale[word].to_le_bytes()[byte]
    }

    fn set_exponent(&mut self, scale: &Layout, b: usize, h: usize, cc: usize, ex: u8) {
        let (word, byte) = word_and_byte(offset(scale, b, h, cc));
        let mut bytes = self.scale[word].to_le_bytes();
        bytes[byte] = ex;
        self.scale[word] = i32::from_le_bytes(bytes);
    }

    /// Casts `o` (`[s_q, heads, 512]` f32) to MXFP8 into the live groups, like the kernel's
    /// epilogue; bytes of other groups and between elements stay as they are.
    pub fn write_mxfp8(&mut self, o: &[f32], heads: usize) {
        let s_q = self.layout.s_q;
        assert_eq!(
            o.len(),
            s_q * heads * HEAD_DIM,
            "o is not [s_q, heads, 512]"
        );
        let (data, scale) = (self.layout.data_layout(), self.layout.scale_layout());
        for b in 0..s_q {
            for h in 0..heads {
                for cc in 0..CHUNKS_PER_HEAD {
                    let start = (b * heads + h) * HEAD_DIM + cc * BLOCK;
                    let chunk: &[f32; BLOCK] =
                        o[start..start + BLOCK].try_into().expect("32 values");
                    let (ex, codes) = mxfp8::encode_block(chunk);
                    let at = offset(&data, b, h, cc * BLOCK);
                    self.data[at..at + BLOCK].copy_from_slice(&codes);
                    self.set_exponent(&scale, b, h, cc, ex);
                }
            }
        }
    }

    /// The values the live groups stand for, as `[s_q, heads, 512]` f32.
    pub fn read_mxfp8(&self, heads: usize) -> Vec<f32> {
        let s_q = self.layout.s_q;
        let mut o = vec![0f32; s_q * heads * HEAD_DIM];
        let (data, scale) = (self.layout.data_layout(), self.layout.scale_layout());
        for b in 0..s_q {
            for h in 0..heads {
                for cc in 0..CHUNKS_PER_HEAD {
                    let ex = self.exponent(&scale, b, h, cc);
                    let at = offset(&data, b, h, cc * BLOCK);
                    for j in 0..BLOCK {
                        o[(b * heads + h) * HEAD_DIM + cc * BLOCK + j] =
                            mxfp8::decode_value(self.data[at + j], ex);
                    }
                }
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_o(s_q: usize, heads: usize) -> Vec<f32> {
        (0..s_q * heads * HEAD_DIM)
            .map(|i| {
                ((i as f32 * 0.377).sin() * (1 + i % 7) as f32)
                    * 10f32.powi((i / HEAD_DIM % 5) as i32 - 2)
            })
            .collect()
    }

    #[test]
    fn units_interleave_heads_of_a_group() {
        assert_eq!(o_fused_unit(0, 0), (0, 0));
        assert_eq!(o_fused_unit(7, 0), (0, 7));
        assert_eq!(o_fused_unit(0, 1), (0, 8));
        assert_eq!(o_fused_unit(9, 15), (1, 121));
    }

    #[test]
    fn scale_bytes_are_little_endian_within_words() {
        let mut out = OutputBuffers::filled(OutputLayout::row_major(1, 1), 0, 0);
        let scale = out.layout.scale_layout();
        // Units 5 and 7: heads 5 and 7 of group 0, chunk 0.
        out.set_exponent(&scale, 0, 5, 0, 0xAB);
        out.set_exponent(&scale, 0, 7, 0, 0x81);
        assert_eq!(out.scale[1] as u32, 0x8100_AB00);
        assert_eq!(out.scale_byte(0, 0, 5), 0xAB);
    }

    /// The layouts place chunk `cc` of head `h` where the o-fused unit rule says.
    #[test]
    fn the_layouts_are_the_o_fused_placement() {
        for layout in [
            OutputLayout::row_major(3, 4),
            OutputLayout::token_innermost_scales(3, 4),
        ] {
            let (data, scale) = (layout.data_layout(), layout.scale_layout());
            for (b, h, cc) in [(0, 0, 0), (1, 9, 15), (2, 31, 7), (2, 12, 3)] {
                let (g, ka) = o_fused_unit(h, cc);
                for j in [0, 5, 31] {
                    let want = layout.data_index(b, g, ka * BLOCK + j);
                    assert_eq!(offset(&data, b, h, cc * BLOCK + j), want);
                }
                let want = (layout.scale_index(b, g, ka / 4), ka % 4);
                assert_eq!(word_and_byte(offset(&scale, b, h, cc)), want);
            }
        }
    }

    #[test]
    fn round_trip_through_both_scale_layouts() {
        let (s_q, heads) = (3, 16);
        let o = sample_o(s_q, heads);
        for layout in [
            OutputLayout::row_major(s_q, 2),
            OutputLayout::token_innermost_scales(s_q, 2),
        ] {
            layout.validate(s_q, heads).unwrap();
            let mut out = OutputBuffers::filled(layout, 0, 0);
            out.write_mxfp8(&o, heads);
            let back = out.read_mxfp8(heads);
            for (i, (&x, &y)) in o.iter().zip(&back).enumerate() {
                let chunk = &o[i / BLOCK * BLOCK..][..BLOCK];
                let step = mxfp8::block_amax(chunk) / 448.0 * 2.0 * 2f32.powi(-10);
                assert!(
                    (x - y).abs() <= (x.abs() / 16.0).max(step),
                    "{i}: {x} vs {y}"
                );
            }
        }
    }

    #[test]
    fn token_innermost_scales_hold_the_same_bytes() {
        let (s_q, heads) = (4, 32);
        let o = sample_o(s_q, heads);
        let mut row_major = OutputBuffers::filled(OutputLayout::row_major(s_q, 4), 0, 0);
        let mut innermost =
            OutputBuffers::filled(OutputLayout::token_innermost_scales(s_q, 4), 0, 0);
        row_major.write_mxfp8(&o, heads);
        innermost.write_mxfp8(&o, heads);
        assert_eq!(row_major.data, innermost.data);
        for b in 0..s_q {
            for g in 0..4 {
                for ka in 0..GROUP_CODES / BLOCK {
                    assert_eq!(
                        row_major.scale_byte(b, g, ka),
                        innermost.scale_byte(b, g, ka)
                    );
                }
            }
        }
        assert_eq!(innermost.layout.scale_index(1, 0, 0), 1);
        assert_ne!(row_major.scale, innermost.scale);
    }

    #[test]
    fn groups_past_the_live_ones_keep_their_bytes() {
        let (s_q, heads) = (2, 16);
        let layout = OutputLayout {
            data_strides: [5 * GROUP_CODES + 64, GROUP_CODES],
            ..OutputLayout::row_major(s_q, 5)
        };
        let mut out = OutputBuffers::filled(layout, 0xEE, -1);
        out.write_mxfp8(&sample_o(s_q, heads), heads);
        for b in 0..s_q {
            for g in 2..5 {
                for j in 0..GROUP_CODES {
                    assert_eq!(out.data[layout.data_index(b, g, j)], 0xEE);
                }
                for w in 0..GROUP_SCALE_WORDS {
                    assert_eq!(out.scale[layout.scale_index(b, g, w)], -1);
                }
            }
        }
        assert!(
            out.data[5 * GROUP_CODES..5 * GROUP_CODES + 64]
                .iter()
                .all(|&c| c == 0xEE)
        );
    }

    #[test]
    fn aliasing_layouts_are_refused() {
        let mut layout = OutputLayout::row_major(2, 2);
        layout.scale_strides = [32, 32, 1];
        let err = layout.validate(2, 16).unwrap_err();
        assert!(err.to_string().contains("same i32"), "{err}");
        let mut layout = OutputLayout::row_major(2, 2);
        layout.data_strides = [GROUP_CODES, GROUP_CODES];
        assert!(layout.validate(2, 16).is_err());
        assert!(OutputLayout::row_major(2, 1).validate(2, 16).is_err());
    }
}
