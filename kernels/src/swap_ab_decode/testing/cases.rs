//! Decode problems to test kernels with, defined once for every engine (the CPU interpreter,
//! the GPU): [`edge_cases`] (small, named, one SPEC corner each) and [`generate`] (seeded,
//! realistic shapes and values, optionally with adversarial inputs mixed in).
//!
//! Realistic here means: sliding-window lists that name the latest `min(NK, pos + 1)` slots
//! of a request's ring of pages, compressed lists of distinct slots chosen among a request's
//! compressed rows, KV rows ~N(0, 1) with a per-row scale near 1 and a few outlier channels,
//! per-head query spreads that make softmax neither flat nor one-hot at `softmax_scale =
//! 1/sqrt(576)` (from hundreds of rows sharing the mass to about ten), sinks that take from
//! almost nothing to about half of it, and real RoPE tables.

use dsl_core::Target;
use half::bf16;

use crate::formats::{mxfp8, ue8m0};
use crate::swap_ab_decode::cache::PagedCache;
use crate::swap_ab_decode::output::{GROUP_SCALE_WORDS, OutputBuffers, OutputLayout, live_groups};
use crate::swap_ab_decode::problem::{DecodeProblem, ProblemError, SlotList};
use crate::swap_ab_decode::query::QueryBuffer;
use crate::swap_ab_decode::record::FP8_SCALE_GROUP;
use crate::swap_ab_decode::{CompileKey, ExtraRecord, HEAD_DIM, KeyError, ROPE_DIM, Schedule};

/// A named problem.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeCase {
    /// Short, unique within its key (`sink_pos_inf`, `gen_s7_sq64`).
    pub name: String,
    /// The inputs.
    pub problem: DecodeProblem,
}

/// What [`generate`] should build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaseSpec {
    /// The compile key (widths, pages, heads, record format).
    pub key: CompileKey,
    /// Tokens.
    pub s_q: usize,
    /// Mix in every adversarial input of [`edge_cases`] at random: invalid, past-the-end,
    /// duplicate and last-slot ids, odd lengths, NaN in unread memory, ±inf sinks, padded
    /// heads, padded strides, non-row-major scale strides.
    pub adversarial: bool,
}

/// The keys of real deployments (SPEC "Context") for `target`: 16 or 32 heads, NK 128, NE 512
/// (Flash) or 1024 (Pro), fp8 or NVFP4 compressed records; pages of 64 tokens on Hopper and
/// 128 on Blackwell, compressed pages a quarter of that (compress ratio 4).
pub fn realistic_keys(target: Target) -> Vec<CompileKey> {
    let page = match target {
        Target::Sm90a => 64,
        Target::Sm100a => 128,
    };
    let mut keys = Vec::new();
    for heads in [16, 32] {
        for extra_width in [512, 1024] {
            for extra_record in [ExtraRecord::Fp8, ExtraRecord::Nvfp4] {
                keys.push(CompileKey {
                    heads,
                    swa_width: 128,
                    extra_width,
                    extra_record,
                    swa_page: page,
                    extra_page: page / 4,
                    target,
                    schedule: Schedule::SPLIT,
                });
            }
        }
    }
    keys
}

/// Small keys that, with [`edge_cases`] of each, cover every key-level corner cheaply: 16 and
/// 32 heads, both compressed formats, an empty SWA list, an empty compressed list, widths that
/// leave the last tile partly past the list, small pages, and a streamed cluster whose
/// second CTA has no tile when the lists are short.
pub fn edge_case_keys(target: Target) -> Vec<CompileKey> {
    let key = |heads, swa_width, extra_width, extra_record, swa_page, extra_page| CompileKey {
        heads,
        swa_width,
        extra_width,
        extra_record,
        swa_page,
        extra_page,
        target,
        schedule: Schedule::SPLIT,
    };
    let streamed = |k: CompileKey| k.with_schedule(Schedule::STREAMED);
    vec![
        key(16, 64, 128, ExtraRecord::Fp8, 64, 64),
        key(32, 64, 128, ExtraRecord::Nvfp4, 64, 32),
        key(16, 128, 0, ExtraRecord::Fp8, 128, 16),
        key(32, 0, 128, ExtraRecord::Nvfp4, 64, 16),
        key(16, 96, 200, ExtraRecord::Nvfp4, 16, 8),
        streamed(key(16, 64, 256, ExtraRecord::Fp8, 64, 64)),
        streamed(key(32, 192, 200, ExtraRecord::Nvfp4, 16, 8)),
        streamed(key(16, 0, 128, ExtraRecord::Fp8, 64, 16)),
        key(16, 64, 128, ExtraRecord::Fp8, 64, 64).with_schedule(Schedule::streamed(2)),
    ]
}

/// A realistic problem for `spec`, the same for the same seed. Errors when `spec.key` is not
/// a valid key or `s_q` is 0.
pub fn generate(seed: u64, spec: &CaseSpec) -> Result<DecodeCase, ProblemError> {
    spec.key.validate()?;
    if spec.s_q == 0 {
        return Err(ProblemError::Shape {
            tensor: "q",
            problem: "s_q is 0: a launch needs at least one token".into(),
        });
    }
    let mut rng = Rng::new(seed ^ 0x5EED_CA5E);
    let geometry = if spec.adversarial {
        Geometry::adversarial(&spec.key, &mut rng)
    } else {
        Geometry::plain()
    };
    let mut problem = build(&mut rng, spec.key, spec.s_q, MAX_CONTEXT, geometry);
    if spec.adversarial {
        scramble(&mut rng, &mut problem);
    }
    let kind = if spec.adversarial { "adv" } else { "gen" };
    Ok(DecodeCase {
        name: format!("{kind}_s{seed}_sq{}", spec.s_q),
        problem,
    })
}

/// Small named problems (1 to 4 tokens each), one per SPEC edge case, for `key`. Each is
/// deterministic. Together with [`edge_case_keys`] they cover: ids -1, negative, past the end
/// and at the last slot; duplicate ids; lengths 0, negative, partial and beyond the width;
/// rows with NaN that are not selected; sinks of +inf and -inf; padded heads with NaN in
/// their Q; padded Q, cache and output strides; non-row-major scale strides; output groups
/// beyond the live ones; metadata longer than the batch; fp8 scales above 2^7.
pub fn edge_cases(key: &CompileKey) -> Result<Vec<DecodeCase>, KeyError> {
    key.validate()?;
    let plain = Geometry::plain();
    // Long enough for full lists about half the time, short enough for a small RoPE table.
    let edge_context = COMPRESS_RATIO * (key.extra_width + key.swa_width) as i64 * 3 / 2 + 64;
    let mut cases = Vec::new();
    let mut add = |name: &str,
                   s_q: usize,
                   geometry: Geometry,
                   tweak: &dyn Fn(&mut Rng, &mut DecodeProblem)| {
        let mut rng = Rng::new(cases.len() as u64 + 1);
        let mut problem = build(&mut rng, *key, s_q, edge_context, geometry);
        tweak(&mut rng, &mut problem);
        cases.push(DecodeCase {
            name: name.to_string(),
            problem,
        });
    };
    add("baseline", 2, plain, &|_, _| {});
    add("single_token", 1, plain, &|_, _| {});
    add("all_ids_invalid", 2, plain, &|_, p| {
        for_each_list(p, |_, list| list.ids.fill(-1));
    });
    add("negative_ids", 2, plain, &|rng, p| {
        spoil_ids(rng, p, 0.4, &|_, rng| *rng.pick(&[-1, -2, -100, i32::MIN]));
    });
    add("ids_past_end", 2, plain, &|rng, p| {
        spoil_ids(rng, p, 0.4, &|slots, rng| {
            *rng.pick(&[
                slots,
                slots.saturating_add(1),
                slots.saturating_add(4096),
                i32::MAX,
            ])
        });
    });
    add("last_slot", 2, plain, &|rng, p| {
        point_at_last_slot(rng, p, 0.3)
    });
    add("duplicate_ids", 3, plain, &|rng, p| {
        duplicate_ids(rng, p, 0.5)
    });
    add("len_zero", 2, plain, &|_, p| {
        for_each_list(p, |_, list| list.lens.fill(0));
    });
    add("len_zero_one_list", 2, plain, &|_, p| p.swa.lens[0] = 0);
    add("len_negative", 2, plain, &|_, p| {
        for_each_list(p, |_, list| {
            list.lens[0] = -1;
            list.lens[1] = i32::MIN;
        });
    });
    add("len_beyond_width", 2, plain, &|_, p| {
        for_each_list(p, |_, list| {
            list.lens[0] = list.width as i32 + 1;
            list.lens[1] = i32::MAX;
        });
    });
    add(
        "len_partial",
        3,
        Geometry {
            spare_blocks: 1,
            ..plain
        },
        &|rng, p| {
            for_each_list(p, |_, list| {
                for b in 0..list.lens.len() {
                    list.lens[b] = (list.limit(b) as f64 * rng.uniform()) as i32;
                }
            });
            point_past_len_at_garbage(rng, p);
        },
    );
    add(
        "nan_in_unselected_rows",
        2,
        Geometry {
            spare_blocks: 2,
            ..plain
        },
        &|rng, p| {
            poison_unselected_rows(p);
            point_past_len_at_garbage(rng, p);
        },
    );
    add("sink_pos_inf", 2, plain, &|_, p| p.sink.fill(f32::INFINITY));
    add("sink_neg_inf", 2, plain, &|_, p| {
        p.sink.fill(f32::NEG_INFINITY);
        // Token 1 has no valid row: 0/0 must still give 0.
        for_each_list(p, |_, list| list.lens[1] = 0);
    });
    add("sink_mixed", 2, plain, &|_, p| {
        for (h, s) in p.sink.iter_mut().enumerate() {
            *s = [f32::INFINITY, f32::NEG_INFINITY, 30.0, -30.0][h % 4];
        }
    });
    add(
        "padded_heads",
        2,
        Geometry {
            padded_heads_extra: 5,
            q_row_pad: 24,
            ..plain
        },
        &|_, _| {},
    );
    add(
        "padded_cache_blocks",
        2,
        Geometry {
            block_pad: 48,
            spare_blocks: 1,
            ..plain
        },
        &|_, _| {},
    );
    add(
        "out_scale_token_innermost",
        3,
        Geometry {
            out: OutKind::TokenInnermost,
            extra_groups: 1,
            ..plain
        },
        &|_, _| {},
    );
    add(
        "out_scale_group_innermost",
        2,
        Geometry {
            out: OutKind::GroupInnermost,
            extra_groups: 2,
            ..plain
        },
        &|_, _| {},
    );
    add(
        "out_padded_strides",
        2,
        Geometry {
            out: OutKind::Padded,
            extra_groups: 1,
            ..plain
        },
        &|_, _| {},
    );
    add(
        "metadata_longer_than_batch",
        2,
        Geometry {
            metadata_extra_rows: 3,
            ..plain
        },
        &|_, _| {},
    );
    add("wide_fp8_scales", 2, plain, &|rng, p| {
        widen_fp8_scales(rng, p)
    });
    add(
        "everything_at_once",
        4,
        Geometry::everything(),
        &|rng, p| scramble(rng, p),
    );
    Ok(cases)
}

/// Output tensor layouts the generator uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutKind {
    RowMajor,
    /// Scales `[s_q, groups, 32]` with the token innermost.
    TokenInnermost,
    /// Scales with the group innermost: strides `(32 * groups, 1, groups)`.
    GroupInnermost,
    /// Both tensors row-major with gaps between rows and between scale words.
    Padded,
}

/// Buffer geometry beyond the key: padding, strides, spare memory. Whatever the kernel must
/// not read (padding, spare blocks, padded heads, unused table rows, metadata past the batch)
/// is always filled with NaN-heavy garbage.
#[derive(Clone, Copy, Debug)]
struct Geometry {
    padded_heads_extra: usize,
    /// Elements after each token's Q row.
    q_row_pad: usize,
    /// Bytes after each cache block's records.
    block_pad: usize,
    /// Cache blocks no request uses (garbage).
    spare_blocks: usize,
    /// Slot-list and metadata rows past `s_q`.
    metadata_extra_rows: usize,
    out: OutKind,
    /// Output groups past the live ones.
    extra_groups: usize,
}

impl Geometry {
    fn plain() -> Self {
        Geometry {
            padded_heads_extra: 0,
            q_row_pad: 0,
            block_pad: 0,
            spare_blocks: 0,
            metadata_extra_rows: 0,
            out: OutKind::RowMajor,
            extra_groups: 0,
        }
    }

    fn everything() -> Self {
        Geometry {
            padded_heads_extra: 3,
            q_row_pad: 40,
            block_pad: 16,
            spare_blocks: 2,
            metadata_extra_rows: 2,
            out: OutKind::TokenInnermost,
            extra_groups: 1,
        }
    }

    fn adversarial(key: &CompileKey, rng: &mut Rng) -> Self {
        Geometry {
            padded_heads_extra: *rng.pick(&[0, 3, key.heads]),
            q_row_pad: *rng.pick(&[0, 8, 512]),
            block_pad: *rng.pick(&[0, 16, 4096]),
            out: *rng.pick(&[
                OutKind::RowMajor,
                OutKind::TokenInnermost,
                OutKind::GroupInnermost,
                OutKind::Padded,
            ]),
            extra_groups: rng.below(3),
            ..Self::everything()
        }
    }
}

/// Tokens of one request share its caches: at most this many requests per batch, so large
/// batches hold several consecutive tokens of each request (like speculative decoding) and the
/// caches stay small enough for host-side tests.
const MAX_REQUESTS: usize = 8;
/// Compressed rows per token position (the compress ratio of the compressed list).
const COMPRESS_RATIO: i64 = 4;
/// Positions of generated (not edge) cases are drawn below this.
const MAX_CONTEXT: i64 = 16384;

/// A problem for `key` with `s_q` tokens at positions below `max_context`.
fn build(
    rng: &mut Rng,
    key: CompileKey,
    s_q: usize,
    max_context: i64,
    geometry: Geometry,
) -> DecodeProblem {
    let requests = s_q.min(MAX_REQUESTS);
    let tokens_per_request = s_q.div_ceil(requests);
    let base_positions: Vec<i64> = (0..requests)
        .map(|_| {
            // A few young requests have fewer past tokens than the SWA width.
            let young = rng.chance(0.1);
            let limit = if young {
                (key.swa_width as i64).max(1)
            } else {
                max_context
            };
            rng.below(limit as usize) as i64
        })
        .collect();
    let position = |b: usize| base_positions[b % requests] + (b / requests) as i64;
    let rows = s_q + geometry.metadata_extra_rows;

    // SWA: each request owns a ring of pages long enough that no two positions of its
    // tokens' windows share a slot.
    let ring = (key.swa_width + tokens_per_request).div_ceil(key.swa_page) + 1;
    let mut swa_cache = new_cache(
        rng,
        ExtraRecord::Fp8,
        requests * ring + geometry.spare_blocks,
        key.swa_page,
        geometry,
    );
    let swa_blocks = rng.permutation(swa_cache.num_blocks);
    let swa_slot = |r: usize, pos: i64| {
        let p = pos as usize;
        swa_blocks[r * ring + (p / key.swa_page) % ring] * key.swa_page + p % key.swa_page
    };
    for (r, &base) in base_positions.iter().enumerate() {
        // The positions some token's window covers; the rest of the ring keeps older bytes.
        let oldest = (base - key.swa_width as i64 + 1).max(0);
        for pos in oldest..base + tokens_per_request as i64 {
            swa_cache.write_row(swa_slot(r, pos), &kv_row(rng));
        }
    }
    let mut swa = SlotList::empty(key.swa_width, rows);
    for b in 0..s_q {
        let pos = position(b);
        let len = (key.swa_width as i64).min(pos + 1);
        for (i, id) in swa.row_mut(b)[..len as usize].iter_mut().enumerate() {
            *id = swa_slot(b % requests, pos - i as i64) as i32;
        }
        swa.lens[b] = len as i32;
    }

    // Compressed: each request owns its compressed rows; the indexer picks up to NE of them.
    let compressed: Vec<usize> = base_positions
        .iter()
        .map(|&pos| {
            let available = ((pos + 1) / COMPRESS_RATIO) as usize;
            if available >= key.extra_width {
                key.extra_width + rng.below(key.extra_width / 2 + 1)
            } else {
                available
            }
        })
        .collect();
    let pages: Vec<usize> = compressed
        .iter()
        .map(|n| n.div_ceil(key.extra_page))
        .collect();
    let mut extra_cache = new_cache(
        rng,
        key.extra_record,
        pages.iter().sum::<usize>() + geometry.spare_blocks.max(1),
        key.extra_page,
        geometry,
    );
    let extra_blocks = rng.permutation(extra_cache.num_blocks);
    let first_page: Vec<usize> = pages
        .iter()
        .scan(0, |next, n| Some(std::mem::replace(next, *next + n)))
        .collect();
    let extra_slot = |r: usize, row: usize| {
        extra_blocks[first_page[r] + row / key.extra_page] * key.extra_page + row % key.extra_page
    };
    for (r, &n) in compressed.iter().enumerate() {
        for row in 0..n {
            extra_cache.write_row(extra_slot(r, row), &kv_row(rng));
        }
    }
    let mut extra = SlotList::empty(key.extra_width, rows);
    for b in 0..s_q {
        let r = b % requests;
        let picked = rng.sample(compressed[r], key.extra_width);
        for (id, row) in extra.row_mut(b).iter_mut().zip(&picked) {
            *id = extra_slot(r, *row) as i32;
        }
        extra.lens[b] = picked.len() as i32;
    }
    for list in [&mut swa, &mut extra] {
        for b in s_q..rows {
            // Rows past the batch: never read.
            list.row_mut(b).fill_with(|| rng.next_u64() as i32);
            list.lens[b] = rng.next_u64() as i32;
        }
    }

    let mut positions: Vec<i64> = (0..s_q).map(position).collect();
    let max_pos = *positions.iter().max().expect("s_q > 0") as usize + 1;
    let mut cos_sin = rope_table(max_pos);
    for p in (0..max_pos).filter(|p| !positions.contains(&(*p as i64))) {
        cos_sin[p * ROPE_DIM..(p + 1) * ROPE_DIM].fill(f32::NAN);
    }
    positions.extend((0..geometry.metadata_extra_rows).map(|_| rng.next_u64() as i64));

    let padded_heads = key.heads + geometry.padded_heads_extra;
    let mut plain = Vec::with_capacity(s_q * padded_heads * HEAD_DIM);
    for _ in 0..s_q {
        for h in 0..padded_heads {
            // Query spreads of 0.5 to 1.5 give logit spreads of ~0.75 to ~2.2 at 1/sqrt(576):
            // from hundreds of rows sharing the mass to about ten.
            let spread = 0.5 + (h % key.heads) as f64 / key.heads as f64;
            plain.extend((0..HEAD_DIM).map(|d| {
                if h >= key.heads {
                    bf16::from_f32([f32::NAN, f32::INFINITY, f32::NEG_INFINITY][d % 3])
                } else {
                    bf16::from_f32((rng.normal() * spread) as f32)
                }
            }));
        }
    }
    let q = QueryBuffer::pack(
        &plain,
        s_q,
        padded_heads,
        padded_heads * HEAD_DIM + geometry.q_row_pad,
        bf16::NAN,
    )
    .expect("generated Q geometry is consistent");

    let mut sink: Vec<f32> = (0..key.heads)
        .map(|_| (rng.uniform() * 8.0) as f32)
        .collect();
    sink.extend([f32::NAN; 3]);

    let groups = live_groups(key.heads) + geometry.extra_groups;
    let layout = output_layout(geometry.out, s_q, groups);
    let mut out = OutputBuffers::filled(layout, 0, 0);
    out.data.fill_with(|| rng.next_u64() as u8);
    out.scale.fill_with(|| rng.next_u64() as i32);

    DecodeProblem {
        key,
        q,
        swa_cache,
        swa,
        extra_cache,
        extra,
        positions,
        cos_sin,
        cos_sin_stride: ROPE_DIM,
        sink,
        softmax_scale: (1.0 / 576f64.sqrt()) as f32,
        out,
    }
}

fn new_cache(
    rng: &mut Rng,
    format: ExtraRecord,
    blocks: usize,
    page: usize,
    geometry: Geometry,
) -> PagedCache {
    let stride = page * format.bytes() + geometry.block_pad;
    let mut cache = PagedCache::new(format, blocks.max(1), page, stride, 0)
        .expect("generated cache geometry is consistent");
    fill_garbage(rng, &mut cache.bytes);
    cache
}

fn output_layout(kind: OutKind, s_q: usize, groups: usize) -> OutputLayout {
    match kind {
        OutKind::RowMajor => OutputLayout::row_major(s_q, groups),
        OutKind::TokenInnermost => OutputLayout::token_innermost_scales(s_q, groups),
        OutKind::GroupInnermost => OutputLayout {
            scale_strides: [GROUP_SCALE_WORDS * groups, 1, groups],
            ..OutputLayout::row_major(s_q, groups)
        },
        OutKind::Padded => {
            let row = OutputLayout::row_major(s_q, groups);
            OutputLayout {
                data_strides: [row.data_strides[0] + 4096 + 16, row.data_strides[1] + 16],
                scale_strides: [
                    (2 * GROUP_SCALE_WORDS + 3) * groups + 7,
                    2 * GROUP_SCALE_WORDS + 3,
                    2,
                ],
                ..row
            }
        }
    }
}

/// Random bytes, half of them NaN codes of every format (0x7F, 0xFF: e4m3 NaN; 0xFF: ue8m0
/// NaN) so that reading any of it shows up.
fn fill_garbage(rng: &mut Rng, bytes: &mut [u8]) {
    for chunk in bytes.chunks_mut(8) {
        let random = rng.next_u64().to_le_bytes();
        for (byte, r) in chunk.iter_mut().zip(random) {
            *byte = if r & 0x80 == 0 {
                [0x7F, 0xFF][usize::from(r & 1)]
            } else {
                r
            };
        }
    }
}

/// Channels where every KV row is larger, and by how much: latent caches are RMS-normalised
/// per row, and the norm's weights leave a few channels (one here in the RoPE dims) well above
/// the rest in every row.
const OUTLIER_CHANNELS: [(usize, f32); 5] =
    [(37, 12.0), (101, 6.0), (260, 18.0), (333, 8.0), (470, 10.0)];

/// A latent KV row: N(0, 1) with a per-row scale near 1 (rows are normalised), times the
/// outlier channels' factors. Logits are then Gaussian across rows with ~1.5x the spread of
/// unit rows.
fn kv_row(rng: &mut Rng) -> [f32; HEAD_DIM] {
    let scale = (rng.normal() * 0.1).exp();
    let mut row: [f32; HEAD_DIM] = std::array::from_fn(|_| (rng.normal() * scale) as f32);
    for (channel, factor) in OUTLIER_CHANNELS {
        row[channel] *= factor;
    }
    row
}

/// RoPE table `[max_pos, 64]`: 32 cos then 32 sin of `p * 10000^(-f/32)`.
fn rope_table(max_pos: usize) -> Vec<f32> {
    let half = ROPE_DIM / 2;
    let mut table = Vec::with_capacity(max_pos * ROPE_DIM);
    for p in 0..max_pos {
        let angles: Vec<f64> = (0..half)
            .map(|f| p as f64 * 10000f64.powf(-(f as f64) / half as f64))
            .collect();
        table.extend(angles.iter().map(|a| a.cos() as f32));
        table.extend(angles.iter().map(|a| a.sin() as f32));
    }
    table
}

/// Applies `f` to both slot lists, with their cache's slot count.
fn for_each_list(problem: &mut DecodeProblem, mut f: impl FnMut(usize, &mut SlotList)) {
    f(problem.swa_cache.slots(), &mut problem.swa);
    f(problem.extra_cache.slots(), &mut problem.extra);
}

/// Clamps a slot count to the i32 range of slot ids.
fn id_limit(slots: usize) -> i32 {
    i32::try_from(slots).unwrap_or(i32::MAX)
}

/// Replaces a share of each token's candidate ids with `bad(slots, rng)`.
fn spoil_ids(
    rng: &mut Rng,
    problem: &mut DecodeProblem,
    share: f64,
    bad: &dyn Fn(i32, &mut Rng) -> i32,
) {
    let s_q = problem.s_q();
    for_each_list(problem, |slots, list| {
        for b in 0..s_q {
            let limit = list.limit(b);
            for id in &mut list.row_mut(b)[..limit] {
                if rng.chance(share) {
                    *id = bad(id_limit(slots), rng);
                }
            }
        }
    });
}

/// Points a share of candidate ids at the cache's last slot, which gets a valid row.
fn point_at_last_slot(rng: &mut Rng, problem: &mut DecodeProblem, share: f64) {
    for cache in [&mut problem.swa_cache, &mut problem.extra_cache] {
        let last = cache.slots() - 1;
        cache.write_row(last, &kv_row(rng));
    }
    spoil_ids(rng, problem, share, &|slots, _| slots - 1);
    // At least one hit per non-empty list, whatever the dice said.
    for_each_list(problem, |slots, list| {
        if list.limit(0) > 0 {
            list.row_mut(0)[0] = id_limit(slots) - 1;
        }
    });
}

/// Copies earlier candidate ids of the same row over a share of the others.
fn duplicate_ids(rng: &mut Rng, problem: &mut DecodeProblem, share: f64) {
    let s_q = problem.s_q();
    for_each_list(problem, |_, list| {
        for b in 0..s_q {
            let limit = list.limit(b);
            let row = list.row_mut(b);
            for i in 1..limit {
                if rng.chance(share) {
                    row[i] = row[rng.below(i)];
                }
            }
        }
    });
}

/// Slots no token selects.
fn unselected_slots(problem: &DecodeProblem, list: &SlotList, cache: &PagedCache) -> Vec<usize> {
    let mut selected = vec![false; cache.slots()];
    for b in 0..problem.s_q() {
        for i in 0..list.limit(b) {
            if let Some(slot) = cache.slot(list.id(b, i)) {
                selected[slot] = true;
            }
        }
    }
    (0..cache.slots()).filter(|&s| !selected[s]).collect()
}

/// Turns every record no token selects into NaN: NaN data codes and NaN scales.
fn poison_unselected_rows(problem: &mut DecodeProblem) {
    for which in 0..2 {
        let (list, cache) = if which == 0 {
            (&problem.swa, &problem.swa_cache)
        } else {
            (&problem.extra, &problem.extra_cache)
        };
        let slots = unselected_slots(problem, list, cache);
        let cache = if which == 0 {
            &mut problem.swa_cache
        } else {
            &mut problem.extra_cache
        };
        for slot in slots {
            cache.record_mut(slot).fill(0xFF);
        }
    }
}

/// Gives about one fp8 record in eight (in each cache of fp8 records) scale bytes of 135 to
/// 140 in a third of its groups, with the codes re-encoded to the same values: scales above
/// 2^7, which no cache writer derives from an amax, but whose values bf16 holds. The kernel
/// dequantises the warps that hold one on a path of their own.
fn widen_fp8_scales(rng: &mut Rng, problem: &mut DecodeProblem) {
    for cache in [&mut problem.swa_cache, &mut problem.extra_cache] {
        if cache.format != ExtraRecord::Fp8 {
            continue;
        }
        for slot in 0..cache.slots() {
            if rng.uniform() >= 0.125 {
                continue;
            }
            let (data, scales) = cache.record_mut(slot).split_at_mut(HEAD_DIM);
            for (group, ex) in scales.iter_mut().enumerate() {
                if rng.uniform() >= 1.0 / 3.0 || *ex == ue8m0::NAN {
                    continue;
                }
                let wide = 135 + rng.below(6) as u8;
                let dims = group * FP8_SCALE_GROUP..(group + 1) * FP8_SCALE_GROUP;
                for code in &mut data[dims] {
                    *code = mxfp8::encode_value(mxfp8::decode_value(*code, *ex), wide);
                }
                *ex = wide;
            }
        }
    }
}

/// Fills the ids past each token's length with ids of slots no token selects (garbage or
/// NaN records): a kernel that reads past the length picks them up.
fn point_past_len_at_garbage(rng: &mut Rng, problem: &mut DecodeProblem) {
    let s_q = problem.s_q();
    let garbage = [
        unselected_slots(problem, &problem.swa, &problem.swa_cache),
        unselected_slots(problem, &problem.extra, &problem.extra_cache),
    ];
    for (list, garbage) in [&mut problem.swa, &mut problem.extra]
        .into_iter()
        .zip(&garbage)
    {
        if garbage.is_empty() {
            continue;
        }
        for b in 0..s_q {
            let limit = list.limit(b);
            for id in &mut list.row_mut(b)[limit..] {
                *id = *rng.pick(garbage) as i32;
            }
        }
    }
}

/// Every adversarial input at random: bad, duplicate and last-slot ids, odd lengths, ids past
/// the length at garbage, ±inf sinks.
fn scramble(rng: &mut Rng, problem: &mut DecodeProblem) {
    point_at_last_slot(rng, problem, 0.02);
    duplicate_ids(rng, problem, 0.05);
    spoil_ids(rng, problem, 0.1, &|slots, rng| {
        *rng.pick(&[
            -1,
            -1,
            -1,
            i32::MIN,
            slots,
            slots.saturating_add(7),
            i32::MAX,
        ])
    });
    let s_q = problem.s_q();
    for_each_list(problem, |_, list| {
        for b in 0..s_q {
            let width = list.width as i32;
            list.lens[b] = match rng.below(10) {
                0 => 0,
                1 => -1 - rng.below(1000) as i32,
                2 => width + 1 + rng.below(1000) as i32,
                3 => list.lens[b] / 2,
                _ => list.lens[b],
            };
        }
    });
    point_past_len_at_garbage(rng, problem);
    // About a fifth of the heads get an infinite sink, at least one of each sign.
    let heads = problem.key.heads;
    for sink in &mut problem.sink[..heads] {
        *sink = match rng.below(10) {
            0 => f32::INFINITY,
            1 => f32::NEG_INFINITY,
            _ => *sink,
        };
    }
    let first = rng.below(heads);
    problem.sink[first] = f32::INFINITY;
    problem.sink[(first + 1 + rng.below(heads - 1)) % heads] = f32::NEG_INFINITY;
}

/// SplitMix64: tiny, seedable, and good enough to draw test data.
struct Rng {
    state: u64,
    /// The second normal of the last Box-Muller pair.
    spare_normal: Option<f64>,
}

impl Rng {
    fn new(seed: u64) -> Self {
        Rng {
            state: seed,
            spare_normal: None,
        }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * 2f64.powi(-53)
    }

    /// Uniform in 0..n (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        self.uniform() < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Standard normal (Box-Muller, both values of each pair used).
    fn normal(&mut self) -> f64 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        let radius = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        let (sin, cos) = (std::f64::consts::TAU * self.uniform()).sin_cos();
        self.spare_normal = Some(radius * sin);
        radius * cos
    }

    /// A random permutation of 0..n.
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut items: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            items.swap(i, self.below(i + 1));
        }
        items
    }

    /// min(k, n) distinct values of 0..n in random order.
    fn sample(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut picked = self.permutation(n);
        picked.truncate(k);
        picked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_key() -> CompileKey {
        edge_case_keys(Target::Sm100a)[0]
    }

    #[test]
    fn every_edge_case_is_valid_and_named_uniquely() {
        for key in edge_case_keys(Target::Sm90a) {
            let cases = edge_cases(&key).unwrap();
            let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), cases.len(), "{key}");
            for case in &cases {
                case.problem
                    .validate()
                    .unwrap_or_else(|e| panic!("{key} {}: {e}", case.name));
                assert!(
                    (1..=4).contains(&case.problem.s_q()),
                    "{} is too big for the interpreter",
                    case.name
                );
            }
        }
    }

    #[test]
    fn generation_is_deterministic_and_seed_dependent() {
        let spec = CaseSpec {
            key: small_key(),
            s_q: 3,
            adversarial: true,
        };
        assert_eq!(generate(5, &spec).unwrap(), generate(5, &spec).unwrap());
        assert_ne!(
            generate(5, &spec).unwrap().problem.q,
            generate(6, &spec).unwrap().problem.q
        );
    }

    #[test]
    fn realistic_lists_are_mostly_full_and_valid() {
        for key in realistic_keys(Target::Sm100a).into_iter().step_by(3) {
            let case = generate(
                11,
                &CaseSpec {
                    key,
                    s_q: 16,
                    adversarial: false,
                },
            )
            .unwrap();
            let p = &case.problem;
            p.validate().unwrap();
            let mut valid = 0;
            for b in 0..p.s_q() {
                for (list, cache) in [(&p.swa, &p.swa_cache), (&p.extra, &p.extra_cache)] {
                    valid += (0..list.limit(b))
                        .filter(|&i| cache.slot(list.id(b, i)).is_some())
                        .count();
                }
            }
            let capacity = p.s_q() * (key.swa_width + key.extra_width);
            assert!(
                valid * 2 > capacity,
                "{key}: only {valid} of {capacity} candidates valid"
            );
        }
    }

    #[test]
    fn adversarial_generation_covers_the_corners() {
        let key = realistic_keys(Target::Sm90a)[0];
        let p = generate(
            3,
            &CaseSpec {
                key,
                s_q: 64,
                adversarial: true,
            },
        )
        .unwrap()
        .problem;
        p.validate().unwrap();
        let lens: Vec<i32> = p.swa.lens[..64]
            .iter()
            .chain(&p.extra.lens[..64])
            .copied()
            .collect();
        assert!(lens.contains(&0));
        assert!(lens.iter().any(|&l| l < 0));
        assert!(lens.iter().any(|&l| l > key.swa_width as i32));
        let ids: Vec<i32> = (0..64)
            .flat_map(|b| (0..p.extra.limit(b)).map(move |i| (b, i)))
            .map(|(b, i)| p.extra.id(b, i))
            .collect();
        let slots = p.extra_cache.slots() as i32;
        assert!(ids.iter().any(|&id| id < 0));
        assert!(ids.iter().any(|&id| id >= slots));
        assert!(ids.contains(&(slots - 1)));
        assert!(p.sink.contains(&f32::INFINITY));
        assert!(p.sink.contains(&f32::NEG_INFINITY));
    }

    /// Max weight and effective row count (1 / sum p^2 over the rows' share) of each live head
    /// of token `b`
    /// (RoPE left out: it rotates a pair, and barely changes these statistics).
    fn softmax_shape(p: &DecodeProblem, b: usize) -> Vec<(f64, f64)> {
        let mut rows = Vec::new();
        for (list, cache) in [(&p.swa, &p.swa_cache), (&p.extra, &p.extra_cache)] {
            for i in 0..list.limit(b) {
                if let Some(slot) = cache.slot(list.id(b, i)) {
                    rows.push(crate::swap_ab_decode::record::decode(
                        cache.format,
                        cache.record(slot),
                    ));
                }
            }
        }
        (0..p.key.heads)
            .map(|h| {
                let logits: Vec<f64> = rows
                    .iter()
                    .map(|kv| {
                        let dot: f64 = (0..HEAD_DIM)
                            .map(|d| f64::from(p.q.get(b, h, d).to_f32()) * f64::from(kv[d]))
                            .sum();
                        f64::from(p.softmax_scale) * dot
                    })
                    .collect();
                let sink = f64::from(p.sink[h]);
                let m = logits.iter().copied().fold(sink, f64::max);
                let weights: Vec<f64> = logits.iter().map(|l| (l - m).exp()).collect();
                let total = weights.iter().sum::<f64>() + (sink - m).exp();
                let max_p = weights.iter().copied().fold(0.0, f64::max) / total;
                let rows_mass: f64 = weights.iter().sum();
                let effective = rows_mass * rows_mass / weights.iter().map(|w| w * w).sum::<f64>();
                (max_p, effective)
            })
            .collect()
    }

    #[test]
    fn softmax_is_neither_flat_nor_one_hot() {
        let key = realistic_keys(Target::Sm90a)[1];
        let p = generate(
            21,
            &CaseSpec {
                key,
                s_q: 2,
                adversarial: false,
            },
        )
        .unwrap()
        .problem;
        let shapes: Vec<(f64, f64)> = (0..2).flat_map(|b| softmax_shape(&p, b)).collect();
        let rows = (key.swa_width + key.extra_width) as f64;
        for &(max_p, effective) in &shapes {
            assert!(max_p > 2.0 / rows && max_p < 0.9, "max p {max_p}");
            assert!(
                effective > 1.5 && effective < rows * 0.9,
                "effective rows {effective}"
            );
        }
        assert!(
            shapes.iter().any(|s| s.1 < 30.0),
            "some heads concentrate on a few rows"
        );
        assert!(
            shapes.iter().any(|s| s.1 > 200.0),
            "some heads spread over many rows"
        );
    }

    #[test]
    fn bad_keys_and_empty_batches_are_errors() {
        let bad = CompileKey {
            heads: 24,
            ..small_key()
        };
        assert_eq!(edge_cases(&bad).unwrap_err(), KeyError::Heads { heads: 24 });
        let err = generate(
            1,
            &CaseSpec {
                key: bad,
                s_q: 1,
                adversarial: false,
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("8, 16, 32, 64 or 128"), "{err}");
        let err = generate(
            1,
            &CaseSpec {
                key: small_key(),
                s_q: 0,
                adversarial: false,
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("at least one token"), "{err}");
    }

    #[test]
    fn rng_normal_has_unit_variance() {
        let mut rng = Rng::new(1);
        let n = 20000;
        let samples: Vec<f64> = (0..n).map(|_| rng.normal()).collect();
        let mean = samples.iter().sum::<f64>() / n as f64;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.03 && (var - 1.0).abs() < 0.05,
            "mean {mean} var {var}"
        );
    }
}
