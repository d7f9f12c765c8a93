//! One launch's worth of inputs: everything the decode kernel reads, and the output buffers
//! as they are before it runs.

use thiserror::Error;

use super::launch::check_softmax_scale;
use crate::swap_ab_decode::cache::PagedCache;
use crate::swap_ab_decode::output::OutputBuffers;
use crate::swap_ab_decode::query::QueryBuffer;
use crate::swap_ab_decode::{CompileKey, ExtraRecord, KeyError, ROPE_DIM};

/// Why a [`DecodeProblem`] (or a case file holding one) cannot be run.
#[derive(Clone, Debug, PartialEq, Error)]
#[non_exhaustive]
pub enum ProblemError {
    #[error(transparent)]
    Key(#[from] KeyError),
    /// A tensor's shape, strides or storage does not fit the key or the other tensors.
    #[error("{tensor}: {problem}")]
    Shape {
        tensor: &'static str,
        problem: String,
    },
    /// A value the op reads is outside what the SPEC defines (e.g. NaN in a live head's Q).
    #[error("token {token}: {problem}")]
    Value { token: usize, problem: String },
}

/// A slot list (`swa_idx`/`swa_len` or `extra_idx`/`extra_len`): row b of `ids` is token b's
/// candidate slot ids, of which the first `min(lens[b], width)` may be valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotList {
    /// Columns (NK or NE), from the compile key.
    pub width: usize,
    /// Rows of `ids`, at least `s_q` (metadata buffers may be longer than the batch).
    pub rows: usize,
    /// Elements from one row of `ids` to the next, at least `width` (an engine's metadata
    /// buffer may be wider than the key's list).
    pub row_stride: usize,
    /// `[rows, row_stride]` row-major storage: the first `width` of each row are slot ids
    /// (negative ids are invalid), the rest is padding the kernel never reads.
    pub ids: Vec<i32>,
    /// Valid prefix length per token, at least `s_q` entries; any i32 (clamped to 0..=width).
    pub lens: Vec<i32>,
}

impl SlotList {
    /// `rows` rows of `-1` with length 0.
    pub fn empty(width: usize, rows: usize) -> Self {
        SlotList {
            width,
            rows,
            row_stride: width,
            ids: vec![-1; rows * width],
            lens: vec![0; rows],
        }
    }

    /// Slot id `i` of token `b`'s row.
    pub fn id(&self, b: usize, i: usize) -> i32 {
        assert!(
            i < self.width,
            "column {i} of a {}-wide slot list",
            self.width
        );
        self.ids[b * self.row_stride + i]
    }

    /// Token `b`'s row of ids, writable.
    pub fn row_mut(&mut self, b: usize) -> &mut [i32] {
        let start = b * self.row_stride;
        &mut self.ids[start..start + self.width]
    }

    /// The same list stored with rows `row_stride` apart, the padding filled with `pad`.
    pub fn with_row_stride(&self, row_stride: usize, pad: i32) -> SlotList {
        assert!(
            row_stride >= self.width,
            "rows must hold their {} ids",
            self.width
        );
        let mut ids = vec![pad; self.rows * row_stride];
        for b in 0..self.rows {
            ids[b * row_stride..][..self.width]
                .copy_from_slice(&self.ids[b * self.row_stride..][..self.width]);
        }
        SlotList {
            row_stride,
            ids,
            ..self.clone()
        }
    }

    /// How many leading columns of token `b` are candidates: `min(len, width)`, 0 for a
    /// negative length.
    pub fn limit(&self, b: usize) -> usize {
        usize::try_from(self.lens[b]).map_or(0, |len| len.min(self.width))
    }

    fn validate(&self, name: &'static str, width: usize, s_q: usize) -> Result<(), ProblemError> {
        let fail = |problem: String| {
            Err(ProblemError::Shape {
                tensor: name,
                problem,
            })
        };
        if self.width != width {
            return fail(format!("is {} wide, the key says {width}", self.width));
        }
        if self.row_stride < width {
            return fail(format!(
                "has rows {} apart, narrower than its {width} ids; give each row at least {width}",
                self.row_stride
            ));
        }
        if self.rows < s_q || self.ids.len() != self.rows * self.row_stride {
            return fail(format!(
                "needs at least s_q = {s_q} rows of {} elements; has {} elements for {} rows",
                self.row_stride,
                self.ids.len(),
                self.rows
            ));
        }
        if self.lens.len() < s_q {
            return fail(format!("has {} lengths for {s_q} tokens", self.lens.len()));
        }
        Ok(())
    }
}

/// Every input of one decode launch, in the kernel's own layouts, plus the output buffers'
/// layout and contents before the launch (poison the kernel must leave alone outside the live
/// groups). Equality is bitwise (NaN payloads included).
#[derive(Clone, Debug)]
pub struct DecodeProblem {
    /// What the kernel is compiled for.
    pub key: CompileKey,
    /// Queries, not yet RoPEd, chunk-interleaved; `q.s_q` is the token count.
    pub q: QueryBuffer,
    /// SWA cache (fp8 records).
    pub swa_cache: PagedCache,
    /// SWA slot list (`key.swa_width` columns).
    pub swa: SlotList,
    /// Compressed cache (`key.extra_record` records).
    pub extra_cache: PagedCache,
    /// Compressed slot list (`key.extra_width` columns).
    pub extra: SlotList,
    /// Query positions, at least `s_q`.
    pub positions: Vec<i64>,
    /// `[max_pos, cos_sin_stride]`: the first 64 of row p are 32 cos then 32 sin for
    /// position p.
    pub cos_sin: Vec<f32>,
    /// Elements from one row of `cos_sin` to the next, at least 64.
    pub cos_sin_stride: usize,
    /// Per-head sink logits, at least `heads`.
    pub sink: Vec<f32>,
    /// Scale of q . kv before the softmax (natural-log units).
    pub softmax_scale: f32,
    /// Output buffers before the launch.
    pub out: OutputBuffers,
}

impl PartialEq for DecodeProblem {
    fn eq(&self, other: &Self) -> bool {
        let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        self.key == other.key
            && self.q == other.q
            && self.swa_cache == other.swa_cache
            && self.swa == other.swa
            && self.extra_cache == other.extra_cache
            && self.extra == other.extra
            && self.positions == other.positions
            && bits(&self.cos_sin) == bits(&other.cos_sin)
            && self.cos_sin_stride == other.cos_sin_stride
            && bits(&self.sink) == bits(&other.sink)
            && self.softmax_scale.to_bits() == other.softmax_scale.to_bits()
            && self.out == other.out
    }
}

impl DecodeProblem {
    /// Tokens in the launch.
    pub fn s_q(&self) -> usize {
        self.q.s_q
    }

    /// Live heads.
    pub fn heads(&self) -> usize {
        self.key.heads
    }

    /// Rows of the cos/sin table.
    pub fn max_pos(&self) -> usize {
        self.cos_sin.len() / self.cos_sin_stride.max(1)
    }

    /// The (cos, sin) table row of position `pos`: 32 cos then 32 sin.
    pub fn cos_sin_row(&self, pos: usize) -> &[f32] {
        let start = pos * self.cos_sin_stride;
        &self.cos_sin[start..start + ROPE_DIM]
    }

    /// The same problem with the cos/sin table's rows `row_stride` apart, the padding filled
    /// with `pad`.
    pub fn with_cos_sin_stride(&self, row_stride: usize, pad: f32) -> DecodeProblem {
        assert!(row_stride >= ROPE_DIM, "cos_sin rows hold 64 values");
        let mut cos_sin = vec![pad; self.max_pos() * row_stride];
        for p in 0..self.max_pos() {
            cos_sin[p * row_stride..][..ROPE_DIM].copy_from_slice(self.cos_sin_row(p));
        }
        DecodeProblem {
            cos_sin,
            cos_sin_stride: row_stride,
            ..self.clone()
        }
    }

    /// Checks every shape against the key and the other tensors, and the scalars the kernel
    /// indexes with (positions) or cannot give a meaning to (NaN sink, a softmax_scale that is not finite and positive).
    pub fn validate(&self) -> Result<(), ProblemError> {
        self.key.validate()?;
        let s_q = self.s_q();
        let heads = self.heads();
        self.q.validate()?;
        if self.q.padded_heads < heads {
            return Err(ProblemError::Shape {
                tensor: "q",
                problem: format!(
                    "has {} heads, fewer than the key's {heads} live heads",
                    self.q.padded_heads
                ),
            });
        }
        for (name, cache, format, page) in [
            (
                "swa_cache",
                &self.swa_cache,
                ExtraRecord::Fp8,
                self.key.swa_page,
            ),
            (
                "extra_cache",
                &self.extra_cache,
                self.key.extra_record,
                self.key.extra_page,
            ),
        ] {
            cache.validate(name)?;
            if cache.format != format || cache.page != page {
                return Err(ProblemError::Shape {
                    tensor: name,
                    problem: format!(
                        "holds {:?} records in pages of {}; the key says {format:?} in pages of {page}",
                        cache.format, cache.page
                    ),
                });
            }
        }
        self.swa.validate("swa_idx", self.key.swa_width, s_q)?;
        self.extra
            .validate("extra_idx", self.key.extra_width, s_q)?;
        let shape = |tensor, problem: String| Err(ProblemError::Shape { tensor, problem });
        if self.positions.len() < s_q {
            return shape(
                "positions",
                format!("has {} entries for {s_q} tokens", self.positions.len()),
            );
        }
        if self.cos_sin_stride < ROPE_DIM || self.cos_sin_stride % 4 != 0 {
            return shape(
                "cos_sin",
                format!(
                    "has rows {} apart; the kernel loads 16-byte pieces of rows of 64 values, \
                     so give a row stride of at least 64 that is a multiple of 4",
                    self.cos_sin_stride
                ),
            );
        }
        if self.cos_sin.len() % self.cos_sin_stride != 0 || self.cos_sin.is_empty() {
            return shape(
                "cos_sin",
                format!(
                    "{} values do not make [max_pos, {}] rows",
                    self.cos_sin.len(),
                    self.cos_sin_stride
                ),
            );
        }
        if self.sink.len() < heads {
            return shape(
                "sink",
                format!("has {} entries for {heads} heads", self.sink.len()),
            );
        }
        if let Err(e) = check_softmax_scale(self.softmax_scale) {
            return shape("softmax_scale", e.to_string());
        }
        self.out.validate(s_q, heads)?;
        for (token, &pos) in self.positions[..s_q].iter().enumerate() {
            if usize::try_from(pos).map_or(true, |p| p >= self.max_pos()) {
                return Err(ProblemError::Value {
                    token,
                    problem: format!(
                        "position {pos} is outside the cos_sin table's {} rows; extend the table",
                        self.max_pos()
                    ),
                });
            }
        }
        if let Some(h) = self.sink[..heads].iter().position(|s| s.is_nan()) {
            return Err(ProblemError::Shape {
                tensor: "sink",
                problem: format!("head {h} is NaN; the SPEC defines finite and ±inf sinks only"),
            });
        }
        Ok(())
    }
}
