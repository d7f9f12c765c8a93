//! A whole decode case in one `.safetensors` file: every input in the kernel's own layout and
//! dtype, the compile key and scalars in the header's `__metadata__`, and optionally the
//! expected outputs. Loading a written file gives back the same case bit for bit (NaN payloads
//! and padding included), and writing a case again gives the same bytes (the header's keys
//! in order), so case and output files can be compared with `cmp`.
//!
//! # Tensors
//!
//! Multi-byte values are little-endian, as safetensors requires. Buffers that carry padding
//! or strides are stored whole, as their storage, so the padding (often NaN poison the kernel
//! must never read) survives.
//!
//! | name | dtype | shape | meaning |
//! | --- | --- | --- | --- |
//! | `q` | BF16 | `[s_q, token_stride]` | Q storage: the first `padded_heads * 512` elements of each row are the chunk-interleaved `[HP, 512]` query (element (h, d) at `(d / 16) * HP * 16 + h * 16 + d % 16`), the rest is padding |
//! | `swa_cache` | U8 | `[num_blocks, block_stride]` | SWA cache storage: the first `swa_page * 528` bytes of each row are the block's fp8 records |
//! | `extra_cache` | U8 | `[num_blocks, block_stride]` | compressed cache storage: `extra_page` records of `extra_record` bytes per row, then padding |
//! | `swa_idx`, `extra_idx` | I32 | `[rows, row_stride]` | slot-list storage: the first `width` = `swa_width` / `extra_width` (may be 0) ids of each row, then padding; `rows >= s_q`, `row_stride >= width` |
//! | `swa_len`, `extra_len` | I32 | `[n]`, `n >= s_q` | valid prefix lengths |
//! | `positions` | I64 | `[n]`, `n >= s_q` | query positions |
//! | `cos_sin` | F32 | `[max_pos, row_stride]` | row p: 32 cos then 32 sin, then padding; `row_stride >= 64` |
//! | `sink` | F32 | `[n]`, `n >= heads` | sink logits |
//! | `out_data` | F8_E4M3 | `[len]` | `out_data` storage before the launch; the tensor is `[s_q, groups, 4096]` with strides `out_data_strides` (last dim contiguous) |
//! | `out_scale` | I32 | `[len]` | `out_scale` storage before the launch; the tensor is `[s_q, groups, 32]` with strides `out_scale_strides` |
//! | `expected_o` | F32 | `[s_q, heads, 512]` | optional: the reference's pre-cast output |
//! | `expected_out_data` | F8_E4M3 | like `out_data` | optional: `out_data` storage after a correct launch |
//! | `expected_out_scale` | I32 | like `out_scale` | optional: `out_scale` storage after a correct launch |
//!
//! `s_q` and `token_stride` come from `q`'s shape, `num_blocks` and `block_stride` from the
//! caches' shapes. The three `expected_*` tensors come together or not at all.
//!
//! # Metadata (`__metadata__`, all values strings)
//!
//! | key | example | meaning |
//! | --- | --- | --- |
//! | `kestrel.case` | `swap_ab_decode/1` | format marker and version |
//! | `name` | `sink_pos_inf` | case name |
//! | `heads`, `swa_width`, `extra_width`, `swa_page`, `extra_page` | `16` | compile key fields |
//! | `extra_record` | `528` or `288` | compressed record bytes (fp8 or NVFP4) |
//! | `target` | `sm_100a` or `sm_90a` | compile key target |
//! | `padded_heads` | `16` | HP of `q` |
//! | `softmax_scale` | `0.041666668` | an f32, as its shortest round-trip decimal |
//! | `out_groups` | `2` | groups of both output tensors |
//! | `out_data_strides` | `8192,4096` | element strides of `out_data`'s token and group dims |
//! | `out_scale_strides` | `1,64,2` | element strides of `out_scale`'s token, group and word dims |
//!
//! # From PyTorch
//!
//! Writing a case (the tensors already in the kernel's layouts; `q_storage` is the
//! `[s_q, token_stride]` bf16 buffer the strided `q` lives in, `out_data` / `out_scale` the
//! flat storages the strided outputs live in):
//!
//! ```python
//! import torch
//! from safetensors.torch import save_file
//!
//! save_file(
//!     {
//!         "q": q_storage,                           # bfloat16 [s_q, token_stride]
//!         "swa_cache": swa_storage,                 # uint8 [num_blocks, block_stride]
//!         "extra_cache": extra_storage,             # uint8 [num_blocks, block_stride]
//!         "swa_idx": swa_idx.int(), "swa_len": swa_len.int(),
//!         "extra_idx": extra_idx.int(), "extra_len": extra_len.int(),
//!         "positions": positions.long(), "cos_sin": cos_sin.float(), "sink": sink.float(),
//!         "out_data": out_data_storage,             # float8_e4m3fn [len]
//!         "out_scale": out_scale_storage,           # int32 [len]
//!     },
//!     "case.safetensors",
//!     metadata={
//!         "kestrel.case": "swap_ab_decode/1", "name": "from_torch",
//!         "heads": "16", "swa_width": "128", "extra_width": "512", "extra_record": "528",
//!         "swa_page": "64", "extra_page": "16", "target": "sm_90a", "padded_heads": "16",
//!         "schedule": "split",  # optional; "stream" for the streamed schedule
//!         "softmax_scale": repr(softmax_scale), "out_groups": "2",
//!         "out_data_strides": "8192,4096", "out_scale_strides": "64,32,1",
//!     },
//! )
//! ```
//!
//! Reading one back into the kernel's arguments:
//!
//! ```python
//! from safetensors import safe_open
//!
//! with safe_open("case.safetensors", "pt") as f:
//!     meta, t = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
//! hp, s_q, groups = int(meta["padded_heads"]), t["q"].shape[0], int(meta["out_groups"])
//! q = t["q"][:, : hp * 512].view(s_q, hp, 512)
//! page, record = int(meta["extra_page"]), int(meta["extra_record"])
//! extra_cache = t["extra_cache"][:, : page * record].view(-1, page, record)
//! out_data = torch.as_strided(t["out_data"], (s_q, groups, 4096),
//!                             [int(s) for s in meta["out_data_strides"].split(",")] + [1])
//! out_scale = torch.as_strided(t["out_scale"], (s_q, groups, 32),
//!                              [int(s) for s in meta["out_scale_strides"].split(",")])
//! ```

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;

use dsl_core::Target;
use half::bf16;
use safetensors::tensor::{Dtype, SafeTensors, TensorView, View};
use thiserror::Error;

use super::cases::DecodeCase;
use super::reference::ReferenceOutput;
use crate::swap_ab_decode::cache::PagedCache;
use crate::swap_ab_decode::output::{OutputBuffers, OutputLayout};
use crate::swap_ab_decode::problem::{DecodeProblem, ProblemError, SlotList};
use crate::swap_ab_decode::query::QueryBuffer;
use crate::swap_ab_decode::{CompileKey, ExtraRecord, HEAD_DIM, ROPE_DIM, Schedule};

/// Value of the `kestrel.case` metadata key this module writes and reads.
pub const FORMAT: &str = "swap_ab_decode/1";
const FORMAT_KEY: &str = "kestrel.case";

/// A case as stored in a file.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseFile {
    /// The inputs and their name.
    pub case: DecodeCase,
    /// The expected outputs, if the file has them.
    pub expected: Option<ReferenceOutput>,
}

/// Why a case file could not be written or read; each message says what to fix. The
/// variants that add context to a cause print it inside their own message and do not
/// return it again from `source()`, so an error chain prints it once.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CaseFileError {
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("not a readable safetensors file: {0}")]
    Safetensors(safetensors::SafeTensorError),
    #[error("tensor `{0}` is missing; a case file needs every input tensor (see the module docs)")]
    MissingTensor(&'static str),
    #[error("tensor `{tensor}` is {found:?}; store it as {expected}")]
    Dtype {
        tensor: &'static str,
        expected: &'static str,
        found: Dtype,
    },
    #[error("tensor `{tensor}` has shape {found:?}; expected {expected}")]
    Shape {
        tensor: &'static str,
        expected: String,
        found: Vec<usize>,
    },
    #[error("metadata `{key}`: {problem}")]
    Metadata { key: &'static str, problem: String },
    #[error("the case in the file is not runnable: {0}")]
    Problem(ProblemError),
}

impl From<safetensors::SafeTensorError> for CaseFileError {
    fn from(e: safetensors::SafeTensorError) -> Self {
        CaseFileError::Safetensors(e)
    }
}

impl From<ProblemError> for CaseFileError {
    fn from(e: ProblemError) -> Self {
        CaseFileError::Problem(e)
    }
}

/// Serializes a case (and optionally its expected outputs) to the bytes of a case file.
pub fn to_bytes(
    case: &DecodeCase,
    expected: Option<&ReferenceOutput>,
) -> Result<Vec<u8>, CaseFileError> {
    let p = &case.problem;
    p.validate()?;
    let mut tensors = vec![
        Tensor::new(
            "q",
            Dtype::BF16,
            vec![p.s_q(), p.q.token_stride],
            bytes_of(&p.q.data, |v| v.to_le_bytes()),
        ),
        cache_tensor("swa_cache", &p.swa_cache),
        cache_tensor("extra_cache", &p.extra_cache),
        Tensor::new(
            "swa_idx",
            Dtype::I32,
            vec![p.swa.rows, p.swa.row_stride],
            bytes_of(&p.swa.ids, |v| v.to_le_bytes()),
        ),
        Tensor::new(
            "swa_len",
            Dtype::I32,
            vec![p.swa.lens.len()],
            bytes_of(&p.swa.lens, |v| v.to_le_bytes()),
        ),
        Tensor::new(
            "extra_idx",
            Dtype::I32,
            vec![p.extra.rows, p.extra.row_stride],
            bytes_of(&p.extra.ids, |v| v.to_le_bytes()),
        ),
        Tensor::new(
            "extra_len",
            Dtype::I32,
            vec![p.extra.lens.len()],
            bytes_of(&p.extra.lens, |v| v.to_le_bytes()),
        ),
        Tensor::new(
            "positions",
            Dtype::I64,
            vec![p.positions.len()],
            bytes_of(&p.positions, |v| v.to_le_bytes()),
        ),
        Tensor::new(
            "cos_sin",
            Dtype::F32,
            vec![p.max_pos(), p.cos_sin_stride],
            bytes_of(&p.cos_sin, |v| v.to_le_bytes()),
        ),
        Tensor::new(
            "sink",
            Dtype::F32,
            vec![p.sink.len()],
            bytes_of(&p.sink, |v| v.to_le_bytes()),
        ),
        Tensor::new(
            "out_data",
            Dtype::F8_E4M3,
            vec![p.out.data.len()],
            p.out.data.clone(),
        ),
        Tensor::new(
            "out_scale",
            Dtype::I32,
            vec![p.out.scale.len()],
            bytes_of(&p.out.scale, |v| v.to_le_bytes()),
        ),
    ];
    if let Some(expected) = expected {
        if expected.out.layout != p.out.layout
            || expected.out.data.len() != p.out.data.len()
            || expected.out.scale.len() != p.out.scale.len()
            || expected.o.len() != p.s_q() * p.heads() * HEAD_DIM
        {
            return Err(ProblemError::Shape {
                tensor: "expected outputs",
                problem: "do not match the case's output buffers; compute them with `reference` on this case".into(),
            }
            .into());
        }
        tensors.extend([
            Tensor::new(
                "expected_o",
                Dtype::F32,
                vec![p.s_q(), p.heads(), HEAD_DIM],
                bytes_of(&expected.o, |v| v.to_le_bytes()),
            ),
            Tensor::new(
                "expected_out_data",
                Dtype::F8_E4M3,
                vec![expected.out.data.len()],
                expected.out.data.clone(),
            ),
            Tensor::new(
                "expected_out_scale",
                Dtype::I32,
                vec![expected.out.scale.len()],
                bytes_of(&expected.out.scale, |v| v.to_le_bytes()),
            ),
        ]);
    }
    let key = p.key;
    let layout = p.out.layout;
    let metadata = [
        (FORMAT_KEY, FORMAT.to_string()),
        ("name", case.name.clone()),
        ("heads", key.heads.to_string()),
        ("swa_width", key.swa_width.to_string()),
        ("extra_width", key.extra_width.to_string()),
        ("extra_record", key.extra_record.bytes().to_string()),
        ("swa_page", key.swa_page.to_string()),
        ("extra_page", key.extra_page.to_string()),
        ("target", key.target.sm_name().to_string()),
        ("schedule", key.schedule.short_name()),
        ("padded_heads", p.q.padded_heads.to_string()),
        ("softmax_scale", format!("{:?}", p.softmax_scale)),
        ("out_groups", layout.groups.to_string()),
        ("out_data_strides", join(&layout.data_strides)),
        ("out_scale_strides", join(&layout.scale_strides)),
    ];
    serialize(&tensors, metadata)
}

/// Reads a case from the bytes of a case file, checking every dtype and shape.
pub fn from_bytes(bytes: &[u8]) -> Result<CaseFile, CaseFileError> {
    let file = SafeTensors::deserialize(bytes)?;
    let (_, header) = SafeTensors::read_metadata(bytes)?;
    let meta = Metadata(header.metadata().clone().unwrap_or_default());
    let format = meta.text(FORMAT_KEY)?;
    if format != FORMAT {
        return Err(CaseFileError::Metadata {
            key: FORMAT_KEY,
            problem: format!("is `{format}`; this reader understands `{FORMAT}`"),
        });
    }
    let key = CompileKey {
        heads: meta.number("heads")?,
        swa_width: meta.number("swa_width")?,
        extra_width: meta.number("extra_width")?,
        extra_record: ExtraRecord::from_bytes(meta.number("extra_record")?).map_err(|e| {
            CaseFileError::Metadata {
                key: "extra_record",
                problem: e.to_string(),
            }
        })?,
        swa_page: meta.number("swa_page")?,
        extra_page: meta.number("extra_page")?,
        target: Target::from_str(meta.text("target")?).map_err(|problem| {
            CaseFileError::Metadata {
                key: "target",
                problem,
            }
        })?,
        schedule: meta.schedule()?,
    };
    key.validate().map_err(ProblemError::from)?;

    let q_view = tensor(&file, "q", Dtype::BF16, "BF16 (torch.bfloat16)")?;
    let [s_q, token_stride] = shape::<2>(&q_view, "q", "[s_q, token_stride]")?;
    let q = QueryBuffer {
        s_q,
        padded_heads: meta.number("padded_heads")?,
        token_stride,
        data: values(&q_view, |b| bf16::from_le_bytes([b[0], b[1]])),
    };
    let swa_cache = read_cache(&file, "swa_cache", ExtraRecord::Fp8, key.swa_page)?;
    let extra_cache = read_cache(&file, "extra_cache", key.extra_record, key.extra_page)?;
    let swa = read_slot_list(&file, "swa_idx", "swa_len", key.swa_width)?;
    let extra = read_slot_list(&file, "extra_idx", "extra_len", key.extra_width)?;
    let positions = vector(&file, "positions", Dtype::I64, "I64 (torch.int64)", |b| {
        i64::from_le_bytes(b.try_into().expect("8 bytes"))
    })?;
    let cos_sin_view = tensor(&file, "cos_sin", Dtype::F32, "F32 (torch.float32)")?;
    let [_, cos_sin_stride] = shape::<2>(&cos_sin_view, "cos_sin", "[max_pos, row_stride]")?;
    if cos_sin_stride < ROPE_DIM {
        return Err(CaseFileError::Shape {
            tensor: "cos_sin",
            expected: "[max_pos, row_stride] with row_stride >= 64".into(),
            found: cos_sin_view.shape().to_vec(),
        });
    }
    let cos_sin = values(&cos_sin_view, f32_of);
    let sink = vector(&file, "sink", Dtype::F32, "F32 (torch.float32)", f32_of)?;
    let groups = meta.number("out_groups")?;
    let layout = OutputLayout {
        s_q,
        groups,
        data_strides: meta.numbers("out_data_strides")?,
        scale_strides: meta.numbers("out_scale_strides")?,
    };
    let out = read_outputs(&file, "out_data", "out_scale", layout)?;
    let problem = DecodeProblem {
        key,
        q,
        swa_cache,
        swa,
        extra_cache,
        extra,
        positions,
        cos_sin,
        cos_sin_stride,
        sink,
        softmax_scale: meta.text("softmax_scale")?.parse().map_err(|e| {
            CaseFileError::Metadata {
                key: "softmax_scale",
                problem: format!("is not an f32: {e}"),
            }
        })?,
        out,
    };
    problem.validate()?;

    let expected = if file.names().contains(&"expected_o") {
        let o_view = tensor(&file, "expected_o", Dtype::F32, "F32 (torch.float32)")?;
        let expected_shape = format!("[s_q, heads, 512] = [{s_q}, {}, 512]", key.heads);
        if shape::<3>(&o_view, "expected_o", &expected_shape)? != [s_q, key.heads, HEAD_DIM] {
            return Err(CaseFileError::Shape {
                tensor: "expected_o",
                expected: expected_shape,
                found: o_view.shape().to_vec(),
            });
        }
        let out = read_outputs(&file, "expected_out_data", "expected_out_scale", layout)?;
        for (name, len, want) in [
            ("expected_out_data", out.data.len(), problem.out.data.len()),
            (
                "expected_out_scale",
                out.scale.len(),
                problem.out.scale.len(),
            ),
        ] {
            if len != want {
                return Err(CaseFileError::Shape {
                    tensor: name,
                    expected: format!("[{want}], the length of the storage before the launch"),
                    found: vec![len],
                });
            }
        }
        Some(ReferenceOutput {
            heads: key.heads,
            o: values(&o_view, f32_of),
            out,
        })
    } else {
        None
    };
    let name = meta.text("name")?.to_string();
    Ok(CaseFile {
        case: DecodeCase { name, problem },
        expected,
    })
}

/// Writes a case file.
pub fn write(
    path: &Path,
    case: &DecodeCase,
    expected: Option<&ReferenceOutput>,
) -> Result<(), CaseFileError> {
    let bytes = to_bytes(case, expected)?;
    std::fs::write(path, bytes).map_err(|error| CaseFileError::Io {
        path: path.display().to_string(),
        error,
    })
}

/// Value of the `kestrel.output` metadata key of a file of raw kernel outputs.
pub const OUTPUT_FORMAT: &str = "swap_ab_decode_output/1";

/// The bytes of a file of what the kernel wrote, for a user's own reference to check:
/// `out_data` (the e4m3 codes as stored, `[len]`, with its strides in the metadata),
/// `out_scale` (the i32 words of ue8m0 bytes, `[len]`) and, from the debug entry point,
/// `precast` (`[s_q, heads, 512]` f32 before the cast).
pub fn outputs_to_bytes(
    out: &OutputBuffers,
    precast: Option<(&[f32], usize)>,
) -> Result<Vec<u8>, CaseFileError> {
    let layout = out.layout;
    let mut tensors = vec![
        Tensor::new(
            "out_data",
            Dtype::F8_E4M3,
            vec![out.data.len()],
            out.data.clone(),
        ),
        Tensor::new(
            "out_scale",
            Dtype::I32,
            vec![out.scale.len()],
            bytes_of(&out.scale, |v| v.to_le_bytes()),
        ),
    ];
    if let Some((values, heads)) = precast {
        tensors.push(Tensor::new(
            "precast",
            Dtype::F32,
            vec![layout.s_q, heads, HEAD_DIM],
            bytes_of(values, |v| v.to_le_bytes()),
        ));
    }
    let metadata = [
        ("kestrel.output", OUTPUT_FORMAT.to_string()),
        ("s_q", layout.s_q.to_string()),
        ("out_groups", layout.groups.to_string()),
        ("out_data_strides", join(&layout.data_strides)),
        ("out_scale_strides", join(&layout.scale_strides)),
    ];
    serialize(&tensors, metadata)
}

/// Writes [`outputs_to_bytes`] to `path`.
pub fn write_outputs(
    path: &Path,
    out: &OutputBuffers,
    precast: Option<(&[f32], usize)>,
) -> Result<(), CaseFileError> {
    let bytes = outputs_to_bytes(out, precast)?;
    std::fs::write(path, bytes).map_err(|error| CaseFileError::Io {
        path: path.display().to_string(),
        error,
    })
}

/// Reads a case file.
pub fn read(path: &Path) -> Result<CaseFile, CaseFileError> {
    let bytes = std::fs::read(path).map_err(|error| CaseFileError::Io {
        path: path.display().to_string(),
        error,
    })?;
    from_bytes(&bytes)
}

/// The safetensors bytes of `tensors` with string `metadata`, the same bytes every time:
/// safetensors writes the metadata in a `HashMap`'s order, which differs from one map to the
/// next, so the header is rewritten with its keys sorted.
fn serialize(
    tensors: &[Tensor],
    metadata: impl IntoIterator<Item = (&'static str, String)>,
) -> Result<Vec<u8>, CaseFileError> {
    let metadata: HashMap<String, String> = metadata
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let bytes = safetensors::serialize(tensors.iter().map(|t| (t.name, t)), Some(metadata))?;
    Ok(with_sorted_header(&bytes))
}

/// `bytes`, a safetensors file, with every object of its JSON header in key order and the
/// header padded with spaces to a multiple of 8 bytes, as safetensors pads it. The tensors'
/// data offsets count from the header's end, so they stay valid.
fn with_sorted_header(bytes: &[u8]) -> Vec<u8> {
    let (len, rest) = bytes.split_at(8);
    let len = u64::from_le_bytes(len.try_into().expect("8 bytes")) as usize;
    let (header, data) = rest.split_at(len);
    let mut header: serde_json::Value =
        serde_json::from_slice(header).expect("safetensors writes its header as JSON");
    header.sort_all_objects();
    let mut header = serde_json::to_vec(&header).expect("a JSON value serializes");
    header.resize(header.len().next_multiple_of(8), b' ');
    [&(header.len() as u64).to_le_bytes()[..], &header, data].concat()
}

/// One tensor to serialize.
struct Tensor {
    name: &'static str,
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl Tensor {
    fn new(name: &'static str, dtype: Dtype, shape: Vec<usize>, bytes: Vec<u8>) -> Self {
        Tensor {
            name,
            dtype,
            shape,
            bytes,
        }
    }
}

impl View for &Tensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn bytes_of<T: Copy, const N: usize>(values: &[T], le: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| le(v)).collect()
}

fn cache_tensor(name: &'static str, cache: &PagedCache) -> Tensor {
    Tensor::new(
        name,
        Dtype::U8,
        vec![cache.num_blocks, cache.block_stride],
        cache.bytes.clone(),
    )
}

fn join(strides: &[usize]) -> String {
    strides
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn f32_of(b: &[u8]) -> f32 {
    f32::from_le_bytes(b.try_into().expect("4 bytes"))
}

/// The `__metadata__` map.
struct Metadata(HashMap<String, String>);

impl Metadata {
    fn text(&self, key: &'static str) -> Result<&str, CaseFileError> {
        self.0.get(key).map(String::as_str).ok_or(CaseFileError::Metadata {
            key,
            problem: "is missing; a case file stores the compile key and scalars in its metadata (see the module docs)".into(),
        })
    }

    /// The optional `schedule` (`split`, `split64`, with `h16` after them for a cluster of
    /// 16 heads; `stream`, `stream<CTAs>`, with `h32` after them for 32 heads a CTA); files
    /// without it are split.
    fn schedule(&self) -> Result<Schedule, CaseFileError> {
        match self.0.get("schedule") {
            None => Ok(Schedule::SPLIT),
            Some(name) => Schedule::from_short_name(name).ok_or_else(|| CaseFileError::Metadata {
                key: "schedule",
                problem: format!(
                    "`{name}` is not a schedule: `split` or `split64`, either with `h16` \
                     after it for a cluster of 16 heads (`split64h16`), `stream` or `stream` \
                     and a CTA count (`stream2`), either with `h32` after it for 32 heads a \
                     CTA (`streamh32`)"
                ),
            }),
        }
    }

    fn number(&self, key: &'static str) -> Result<usize, CaseFileError> {
        let text = self.text(key)?;
        text.parse().map_err(|_| CaseFileError::Metadata {
            key,
            problem: format!("`{text}` is not a non-negative integer"),
        })
    }

    fn numbers<const N: usize>(&self, key: &'static str) -> Result<[usize; N], CaseFileError> {
        let text = self.text(key)?;
        let parsed: Option<Vec<usize>> = text.split(',').map(|s| s.trim().parse().ok()).collect();
        parsed
            .and_then(|v| v.try_into().ok())
            .ok_or(CaseFileError::Metadata {
                key,
                problem: format!("`{text}` is not {N} comma-separated non-negative integers"),
            })
    }
}

fn tensor<'a>(
    file: &SafeTensors<'a>,
    name: &'static str,
    dtype: Dtype,
    dtype_name: &'static str,
) -> Result<TensorView<'a>, CaseFileError> {
    let view = file
        .tensor(name)
        .map_err(|_| CaseFileError::MissingTensor(name))?;
    if view.dtype() != dtype {
        return Err(CaseFileError::Dtype {
            tensor: name,
            expected: dtype_name,
            found: view.dtype(),
        });
    }
    Ok(view)
}

fn shape<const N: usize>(
    view: &TensorView<'_>,
    name: &'static str,
    expected: &str,
) -> Result<[usize; N], CaseFileError> {
    view.shape().try_into().map_err(|_| CaseFileError::Shape {
        tensor: name,
        expected: expected.to_string(),
        found: view.shape().to_vec(),
    })
}

fn values<T>(view: &TensorView<'_>, from_le: impl Fn(&[u8]) -> T) -> Vec<T> {
    let size = view.dtype().bitsize() / 8;
    view.data().chunks_exact(size).map(from_le).collect()
}

fn vector<T>(
    file: &SafeTensors<'_>,
    name: &'static str,
    dtype: Dtype,
    dtype_name: &'static str,
    from_le: impl Fn(&[u8]) -> T,
) -> Result<Vec<T>, CaseFileError> {
    let view = tensor(file, name, dtype, dtype_name)?;
    shape::<1>(&view, name, "one dimension")?;
    Ok(values(&view, from_le))
}

fn read_cache(
    file: &SafeTensors<'_>,
    name: &'static str,
    format: ExtraRecord,
    page: usize,
) -> Result<PagedCache, CaseFileError> {
    let view = tensor(file, name, Dtype::U8, "U8 (torch.uint8)")?;
    let [num_blocks, block_stride] = shape::<2>(&view, name, "[num_blocks, block_stride]")?;
    Ok(PagedCache {
        format,
        num_blocks,
        page,
        block_stride,
        bytes: view.data().to_vec(),
    })
}

fn read_slot_list(
    file: &SafeTensors<'_>,
    ids_name: &'static str,
    lens_name: &'static str,
    width: usize,
) -> Result<SlotList, CaseFileError> {
    let view = tensor(file, ids_name, Dtype::I32, "I32 (torch.int32)")?;
    let [rows, row_stride] = shape::<2>(&view, ids_name, "[rows, row_stride]")?;
    if row_stride < width {
        return Err(CaseFileError::Shape {
            tensor: ids_name,
            expected: format!("[rows, row_stride] with row_stride >= {width} (the key's width)"),
            found: view.shape().to_vec(),
        });
    }
    let i32_of = |b: &[u8]| i32::from_le_bytes(b.try_into().expect("4 bytes"));
    Ok(SlotList {
        width,
        rows,
        row_stride,
        ids: values(&view, i32_of),
        lens: vector(file, lens_name, Dtype::I32, "I32 (torch.int32)", i32_of)?,
    })
}

fn read_outputs(
    file: &SafeTensors<'_>,
    data_name: &'static str,
    scale_name: &'static str,
    layout: OutputLayout,
) -> Result<OutputBuffers, CaseFileError> {
    let data_view = tensor(
        file,
        data_name,
        Dtype::F8_E4M3,
        "F8_E4M3 (torch.float8_e4m3fn)",
    )?;
    shape::<1>(&data_view, data_name, "[len]: the flat storage")?;
    let scale = vector(file, scale_name, Dtype::I32, "I32 (torch.int32)", |b| {
        i32::from_le_bytes(b.try_into().expect("4 bytes"))
    })?;
    Ok(OutputBuffers {
        layout,
        data: data_view.data().to_vec(),
        scale,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swap_ab_decode::{CaseSpec, edge_case_keys, edge_cases, generate, reference};

    fn small_case() -> DecodeCase {
        generate(
            4,
            &CaseSpec {
                key: edge_case_keys(Target::Sm100a)[0],
                s_q: 2,
                adversarial: false,
            },
        )
        .unwrap()
    }

    #[test]
    fn raw_outputs_are_written_as_the_kernel_left_them() {
        let case = small_case();
        let out = &case.problem.out;
        let heads = case.problem.heads();
        let precast: Vec<f32> = (0..case.problem.s_q() * heads * HEAD_DIM)
            .map(|i| i as f32 * 0.5)
            .collect();
        let bytes = outputs_to_bytes(out, Some((&precast, heads))).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        assert_eq!(file.tensor("out_data").unwrap().data(), &out.data[..]);
        let scale = file.tensor("out_scale").unwrap();
        assert_eq!(scale.data(), &bytes_of(&out.scale, |v| v.to_le_bytes())[..]);
        let stored = file.tensor("precast").unwrap();
        assert_eq!(stored.shape(), [case.problem.s_q(), heads, HEAD_DIM]);
        assert_eq!(stored.data(), &bytes_of(&precast, |v| v.to_le_bytes())[..]);
        let (_, metadata) = SafeTensors::read_metadata(&bytes).unwrap();
        let metadata = metadata.metadata().clone().unwrap();
        assert_eq!(metadata["kestrel.output"], OUTPUT_FORMAT);
        assert_eq!(
            metadata["out_scale_strides"],
            join(&out.layout.scale_strides)
        );
        let without = outputs_to_bytes(out, None).unwrap();
        assert!(
            SafeTensors::deserialize(&without)
                .unwrap()
                .tensor("precast")
                .is_err()
        );
    }

    #[test]
    fn the_same_case_is_written_as_the_same_bytes() {
        let case = small_case();
        let first = to_bytes(&case, None).unwrap();
        for _ in 0..8 {
            assert_eq!(to_bytes(&case, None).unwrap(), first);
        }
        let (_, header) = SafeTensors::read_metadata(&first).unwrap();
        let metadata = header.metadata().clone().unwrap();
        let len = u64::from_le_bytes(first[..8].try_into().unwrap()) as usize;
        let text = std::str::from_utf8(&first[8..8 + len]).unwrap();
        let mut keys: Vec<&String> = metadata.keys().collect();
        keys.sort();
        let positions: Vec<usize> = keys
            .iter()
            .map(|k| text.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(
            positions.is_sorted(),
            "metadata keys out of order in {text}"
        );
    }

    #[test]
    fn written_cases_load_back_bit_identical() {
        let key = edge_case_keys(Target::Sm90a)[3]; // no SWA list: zero-width tensors
        let mut cases = edge_cases(&key).unwrap();
        cases.retain(|c| {
            matches!(
                c.name.as_str(),
                "everything_at_once" | "padded_heads" | "out_padded_strides"
            )
        });
        cases.push(
            generate(
                9,
                &CaseSpec {
                    key: edge_case_keys(Target::Sm100a)[1],
                    s_q: 3,
                    adversarial: true,
                },
            )
            .unwrap(),
        );
        for case in cases {
            let expected = reference(&case.problem).unwrap();
            let loaded = from_bytes(&to_bytes(&case, Some(&expected)).unwrap()).unwrap();
            assert_eq!(loaded.case, case, "{}", case.name);
            assert_eq!(loaded.expected.as_ref(), Some(&expected));
            let bare = from_bytes(&to_bytes(&case, None).unwrap()).unwrap();
            assert_eq!(bare.expected, None);
        }
    }

    #[test]
    fn nan_payloads_survive() {
        let mut case = small_case();
        let q = &mut case.problem.q;
        q.token_stride += 1;
        q.data = vec![bf16::from_bits(0x7FC1); q.s_q * q.token_stride];
        *q.data.last_mut().unwrap() = bf16::from_bits(0xFF81);
        case.problem.sink.push(f32::from_bits(0x7FA0_0001));
        case.problem.cos_sin[0] = f32::from_bits(0xFFC0_1234);
        let loaded = from_bytes(&to_bytes(&case, None).unwrap()).unwrap().case;
        assert_eq!(loaded.problem.q.data.last().unwrap().to_bits(), 0xFF81);
        assert_eq!(loaded.problem.q.data[0].to_bits(), 0x7FC1);
        assert_eq!(loaded.problem.sink.last().unwrap().to_bits(), 0x7FA0_0001);
        assert_eq!(loaded.problem.cos_sin[0].to_bits(), 0xFFC0_1234);
        assert_eq!(loaded, case);
    }

    /// Slot lists and a cos/sin table whose rows are wider than their data, as an engine's
    /// metadata buffers may be: the file keeps the strides, and the kernel reads through them
    /// (the padding is slot 0 and NaN, which would change the output if it were read).
    #[test]
    fn strided_slot_lists_and_cos_sin_round_trip_and_decode_the_same() {
        let case = small_case();
        let mut strided = case.clone();
        let p = &mut strided.problem;
        p.swa = p.swa.with_row_stride(p.swa.width + 3, 0);
        p.extra = p.extra.with_row_stride(p.extra.width + 5, 0);
        let unaligned = p.with_cos_sin_stride(66, 0.0).validate().unwrap_err();
        assert!(
            unaligned.to_string().contains("multiple of 4"),
            "{unaligned}"
        );
        *p = p.with_cos_sin_stride(80, f32::NAN);
        p.validate().unwrap();
        let loaded = from_bytes(&to_bytes(&strided, None).unwrap()).unwrap().case;
        assert_eq!(loaded, strided);

        let run = |p: &DecodeProblem| {
            crate::swap_ab_decode::engine::interpret(p, p.key.target, false, &Default::default())
                .unwrap()
                .out
        };
        assert_eq!(run(&strided.problem), run(&case.problem));
    }

    #[test]
    fn files_round_trip_through_the_file_system() {
        let case = small_case();
        let path =
            std::env::temp_dir().join(format!("kestrel-case-{}.safetensors", std::process::id()));
        write(&path, &case, None).unwrap();
        let loaded = read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(loaded.case, case);
        let err = read(&path).unwrap_err();
        assert!(matches!(err, CaseFileError::Io { .. }), "{err}");
    }

    /// Rewrites one tensor or metadata entry of a valid file.
    fn tampered(
        edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>, &mut HashMap<String, String>),
    ) -> CaseFileError {
        let bytes = to_bytes(&small_case(), None).unwrap();
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let mut tensors: Vec<_> = file
            .tensors()
            .into_iter()
            .map(|(n, v)| (n, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
            .collect();
        let mut meta = SafeTensors::read_metadata(&bytes)
            .unwrap()
            .1
            .metadata()
            .clone()
            .unwrap();
        edit(&mut tensors, &mut meta);
        let views: Vec<(String, TensorView<'_>)> = tensors
            .iter()
            .map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap()))
            .collect();
        from_bytes(&safetensors::serialize(views, Some(meta)).unwrap()).unwrap_err()
    }

    #[test]
    fn bad_files_say_what_to_fix() {
        let err = tampered(|t, _| t.retain(|(n, ..)| n != "sink"));
        assert!(
            err.to_string().contains("tensor `sink` is missing"),
            "{err}"
        );
        let err = tampered(|t, _| {
            let q = t.iter_mut().find(|(n, ..)| n == "q").unwrap();
            q.1 = Dtype::F16;
        });
        assert!(err.to_string().contains("store it as BF16"), "{err}");
        let err = tampered(|t, _| {
            let idx = t.iter_mut().find(|(n, ..)| n == "swa_idx").unwrap();
            idx.2 = vec![idx.2[0] * 2, idx.2[1] / 2];
        });
        assert!(err.to_string().contains("the key's width"), "{err}");
        let err = tampered(|_, m| {
            m.insert("heads".into(), "24".into());
        });
        assert!(
            err.to_string()
                .contains("live heads must be 8, 16, 32, 64 or 128"),
            "{err}"
        );
        let err = tampered(|_, m| {
            m.remove("softmax_scale");
        });
        assert!(
            err.to_string()
                .contains("metadata `softmax_scale`: is missing"),
            "{err}"
        );
        let err = tampered(|_, m| {
            m.insert("out_scale_strides".into(), "1,2".into());
        });
        assert!(err.to_string().contains("3 comma-separated"), "{err}");
        let err = tampered(|_, m| {
            m.insert("padded_heads".into(), "8".into());
        });
        assert!(
            err.to_string()
                .contains("fewer than the key's 16 live heads"),
            "{err}"
        );
        let err = tampered(|_, m| {
            m.insert(FORMAT_KEY.into(), "swap_ab_decode/0".into());
        });
        assert!(err.to_string().contains("this reader understands"), "{err}");
    }
}
