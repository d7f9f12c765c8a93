//! The host API refuses every kind of bad argument with its own message, before anything
//! reaches a GPU (these run without one).

use dsl_core::Target;
use dsl_core::ir::ElemTy;
use half::bf16;
use kernels::swap_ab_decode::{
    DecodeArgs, DecodeError, DeviceTensor, ExtraRecord, Gpu, KeyError, Schedule,
};

const S_Q: usize = 3;

fn at(n: u64) -> u64 {
    0x7000_0000 + n * 0x100_0000
}

fn valid() -> DecodeArgs {
    DecodeArgs {
        q: DeviceTensor::new::<bf16>(at(1), &[S_Q, 32, 40, 16], &[40 * 512 + 64, 40 * 16, 16, 1]),
        swa_cache: DeviceTensor::new::<u8>(at(2), &[10, 64, 528], &[64 * 528 + 256, 528, 1]),
        swa_idx: DeviceTensor::contiguous::<i32>(at(3), &[S_Q + 1, 128]),
        swa_len: DeviceTensor::contiguous::<i32>(at(4), &[S_Q]),
        extra_cache: DeviceTensor::contiguous::<u8>(at(5), &[20, 16, 288]),
        extra_idx: DeviceTensor::contiguous::<i32>(at(6), &[S_Q, 512]),
        extra_len: DeviceTensor::contiguous::<i32>(at(7), &[S_Q]),
        positions: DeviceTensor::contiguous::<i64>(at(8), &[S_Q]),
        cos_sin: DeviceTensor::contiguous::<f32>(at(9), &[4096, 64]),
        sink: DeviceTensor::contiguous::<f32>(at(10), &[32]),
        out_data: DeviceTensor::contiguous::<u8>(at(11), &[S_Q, 4, 4096]),
        out_scale: DeviceTensor::new::<i32>(at(12), &[S_Q, 4, 32], &[1, S_Q * 32, S_Q]),
        heads: 32,
        softmax_scale: 0.0417,
    }
}

fn error(change: impl FnOnce(&mut DecodeArgs)) -> String {
    let mut args = valid();
    change(&mut args);
    args.check(&Gpu::of_target(Target::Sm100a))
        .expect_err("the change must be refused")
        .to_string()
}

#[test]
fn a_valid_call_gives_its_key() {
    let call = valid().check(&Gpu::of_target(Target::Sm100a)).unwrap();
    assert_eq!(call.tokens, S_Q);
    assert_eq!(call.key.heads, 32);
    assert_eq!(call.key.swa_page, 64);
    assert_eq!(call.key.extra_page, 16);
    assert_eq!(call.key.extra_record, ExtraRecord::Nvfp4);
    // A few tokens of 32 heads: two clusters of 16 heads a token, each split into half
    // tiles, 2 SWA and 8 compressed CTAs.
    assert_eq!(call.key.schedule, Schedule::SPLIT_HALF_TILES_16_HEADS);
    assert_eq!(call.key.cluster_size(), 2 + 8);
    assert_eq!(call.key.head_groups(), 2);
    assert_eq!(call.key.target, Target::Sm100a);
}

#[test]
fn each_bad_argument_has_its_own_message() {
    let cases: Vec<(&str, String)> = vec![
        (
            "dtype must be bf16, got f32",
            error(|a| a.q.elem = ElemTy::F32),
        ),
        ("`q`: must have rank 4", error(|a| a.q.shape.push(1))),
        (
            "`q`: dims of a chunk (dim 3) must be 16, got 8",
            error(|a| a.q.shape[3] = 8),
        ),
        (
            "`q`: padded heads (dim 2) must be at least 32, got 24",
            error(|a| {
                a.q.shape[2] = 24;
                a.q.strides[1] = 24 * 16;
            }),
        ),
        (
            "`q`: chunks (dim 1) must be 32, got 16",
            error(|a| a.q.shape[1] = 16),
        ),
        (
            "`q`: stride[1] (chunks, HP * 16) must be 640, got 512",
            error(|a| a.q.strides[1] = 512),
        ),
        (
            "`q`: stride[2] (heads) must be 16, got 512",
            error(|a| a.q.strides[2] = 512),
        ),
        (
            "`q`: the token stride (stride[0]) must be at least 20480",
            error(|a| a.q.strides[0] = 512),
        ),
        (
            "`q`: the base address (1895825416) must be a multiple of 16",
            error(|a| a.q.ptr += 8),
        ),
        (
            "`q`: the token stride in bytes",
            error(|a| a.q.strides[0] += 4),
        ),
        ("`q`: null device pointer", error(|a| a.q.ptr = 0)),
        (
            "`swa_cache`: record bytes (last dim) must be 528, got 288",
            error(|a| {
                a.swa_cache.shape[2] = 288;
                a.swa_cache.strides = vec![64 * 288, 288, 1];
            }),
        ),
        (
            "`extra_cache`: record bytes (last dim) must be 528 or 288, got 300",
            error(|a| {
                a.extra_cache.shape[2] = 300;
                a.extra_cache.strides = vec![16 * 300, 300, 1];
            }),
        ),
        (
            "`swa_cache`: the block stride (stride[0]) must be at least 33792",
            error(|a| a.swa_cache.strides[0] = 528),
        ),
        (
            "`swa_cache`: the block stride in bytes",
            error(|a| a.swa_cache.strides[0] += 8),
        ),
        (
            "`swa_cache`: the slot stride (stride[1]) must be 528",
            error(|a| a.swa_cache.strides[1] = 600),
        ),
        (
            "`extra_cache`: dtype must be u8, got i32",
            error(|a| a.extra_cache.elem = ElemTy::I32),
        ),
        (
            "`swa_idx`: rows (dim 0) must be at least 3, got 2",
            error(|a| a.swa_idx.shape[0] = 2),
        ),
        (
            "`extra_idx`: stride[1] must be 1",
            error(|a| a.extra_idx.strides[1] = 2),
        ),
        (
            "`extra_len`: its length must be at least 3",
            error(|a| a.extra_len.shape[0] = 1),
        ),
        (
            "`positions`: dtype must be i64",
            error(|a| a.positions.elem = ElemTy::I32),
        ),
        (
            "`cos_sin`: the last dim must be 64",
            error(|a| a.cos_sin.shape[1] = 32),
        ),
        (
            "`cos_sin`: the row stride in bytes",
            error(|a| a.cos_sin.strides[0] = 66),
        ),
        (
            "`sink`: its length must be at least 32, got 16",
            error(|a| a.sink.shape[0] = 16),
        ),
        (
            "`out_data`: groups (dim 1) must be at least 4, got 2",
            error(|a| a.out_data.shape[1] = 2),
        ),
        (
            "`out_data`: tokens (dim 0) must be 3, got 4",
            error(|a| a.out_data.shape[0] = 4),
        ),
        (
            "`out_data`: stride[2] must be 1",
            error(|a| a.out_data.strides[2] = 2),
        ),
        (
            "`out_scale`: the last dim must be 32",
            error(|a| a.out_scale.shape[2] = 16),
        ),
        (
            "`out_scale`: dtype must be i32",
            error(|a| a.out_scale.elem = ElemTy::F32),
        ),
        (
            "softmax_scale must be a finite positive number",
            error(|a| a.softmax_scale = f32::NAN),
        ),
        (
            "live heads must be 8, 16, 32, 64 or 128, got 24",
            error(|a| a.heads = 24),
        ),
        (
            "the SWA page size must be a power of two, got 48",
            error(|a| {
                a.swa_cache.shape[1] = 48;
                a.swa_cache.strides[0] = 48 * 528;
            }),
        ),
        (
            "a token needs a KV tile",
            error(|a| {
                a.swa_idx.shape[1] = 0;
                a.extra_idx.shape[1] = 0;
            }),
        ),
        (
            "at most 65535 tokens",
            error(|a| {
                let n = 70_000;
                a.q.shape[0] = n;
                a.swa_idx.shape[0] = n;
                a.swa_len.shape[0] = n;
                a.extra_idx.shape[0] = n;
                a.extra_len.shape[0] = n;
                a.positions.shape[0] = n;
                a.out_data.shape[0] = n;
                a.out_scale.shape[0] = n;
            }),
        ),
    ];
    let mut messages = std::collections::BTreeSet::new();
    for (want, got) in &cases {
        assert!(got.contains(want), "expected `{want}` in `{got}`");
        assert!(
            messages.insert(got.clone()),
            "two cases gave the same message: {got}"
        );
    }
}

/// A refusal that keeps the kernel from a silent wrong answer: its message names the tensor
/// and says what to do.
fn refused(change: impl FnOnce(&mut DecodeArgs), tensor: &str, fix: &str) {
    let message = error(change);
    assert!(
        message.starts_with(&format!("`{tensor}`: ")),
        "the message must name `{tensor}`: {message}"
    );
    assert!(message.contains(fix), "expected `{fix}` in `{message}`");
}

#[test]
fn a_row_major_q_is_refused() {
    refused(
        |a| {
            a.q.shape = vec![S_Q, 40, 512];
            a.q.strides = vec![40 * 512, 512, 1];
        },
        "q",
        "describe it as [s_q, 32, HP, 16] with strides [token stride, HP * 16, 16, 1], and \
         repack a row-major q first (QueryBuffer::pack",
    );
}

#[test]
fn outputs_whose_elements_share_addresses_are_refused() {
    let fix = "give every output element its own address";
    refused(|a| a.out_data.strides = vec![0, 0, 1], "out_data", fix);
    refused(|a| a.out_scale.strides = vec![0, 0, 0], "out_scale", fix);
    // Groups 4096 bytes apart but tokens only 8192: token 1 lands on group 2 of token 0.
    refused(
        |a| a.out_data.strides = vec![8192, 4096, 1],
        "out_data",
        fix,
    );
}

#[test]
fn outputs_that_alias_another_tensor_are_refused() {
    let fix = "give each output its own buffer";
    refused(|a| a.out_data.ptr = a.q.ptr, "out_data", "overlap `q`");
    refused(
        |a| a.out_scale.ptr = a.sink.ptr,
        "out_scale",
        "overlap `sink`",
    );
    refused(
        |a| a.out_scale.ptr = a.out_data.ptr + 4096,
        "out_scale",
        "overlap `out_data`",
    );
    refused(|a| a.out_data.ptr = a.swa_cache.ptr + 64, "out_data", fix);
}

#[test]
fn a_cos_sin_without_rows_is_refused() {
    refused(
        |a| a.cos_sin.shape[0] = 0,
        "cos_sin",
        "pass the table with a row for every position the batch uses",
    );
}

#[test]
fn a_precast_buffer_is_checked_like_an_output() {
    let args = valid();
    let precast = |ptr, strides: &[usize]| DeviceTensor::new::<f32>(ptr, &[S_Q, 32, 512], strides);
    let contiguous = [32 * 512, 512, 1];
    let ok = precast(at(13), &contiguous);
    assert!(
        args.check_debug(&Gpu::of_target(Target::Sm100a), &ok)
            .is_ok()
    );
    let message = |p: &DeviceTensor| {
        args.check_debug(&Gpu::of_target(Target::Sm100a), p)
            .expect_err("the precast buffer must be refused")
            .to_string()
    };
    let aliased = message(&precast(at(11), &contiguous));
    assert!(
        aliased.starts_with("`precast`: ") && aliased.contains("overlap `out_data`"),
        "{aliased}"
    );
    let shared = message(&precast(at(13), &[0, 512, 1]));
    assert!(
        shared.starts_with("`precast`: ") && shared.contains("its own address"),
        "{shared}"
    );
    let shape = message(&DeviceTensor::contiguous::<f32>(at(13), &[S_Q, 16, 512]));
    assert!(
        shape.contains("`precast`: shape must be [3, 32, 512]"),
        "{shape}"
    );
}

#[test]
fn key_errors_keep_their_type() {
    let mut args = valid();
    args.heads = 16;
    args.extra_cache.shape[1] = 12;
    args.extra_cache.strides = vec![12 * 288, 288, 1];
    match args.check(&Gpu::of_target(Target::Sm90a)) {
        Err(DecodeError::Key(KeyError::Page { page: 12, .. })) => {}
        other => panic!("expected a page error, got {other:?}"),
    }
}

/// The messages of `err` and of every cause under it, as an error chain (anyhow's `{:#}`)
/// prints them.
fn chain(err: &dyn std::error::Error) -> Vec<String> {
    let mut out = vec![err.to_string()];
    let mut cause = err.source();
    while let Some(e) = cause {
        out.push(e.to_string());
        cause = e.source();
    }
    out
}

#[test]
fn wrapped_errors_print_their_cause_once() {
    let mut args = valid();
    args.heads = 24;
    let decode = args.check(&Gpu::of_target(Target::Sm100a)).unwrap_err();
    assert!(matches!(
        decode,
        DecodeError::Key(KeyError::Heads { heads: 24 })
    ));
    let engine = kernels::swap_ab_decode::engine::EngineError::from(decode);
    let printed = chain(&engine).join(": ");
    assert_eq!(
        printed.matches("live heads must be").count(),
        1,
        "the chain repeats its cause: {printed}"
    );
}
