//! The decode kernel on a GPU against the f64 reference and the SPEC's numerics contract.
//! On an H200 the sm_90a build runs; the sm_100a test is ready for a Blackwell GPU and skips
//! with a line saying so elsewhere. Without a GPU every test prints a SKIPPED line and passes
//! (`KESTREL_REQUIRE_GPU=1`, set by the GPU bundle's runner, makes that a failure).

use std::sync::Arc;

use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use dsl_core::arch::memory::{load, store_if};
use dsl_core::arch::pdl::launch_dependents;
use dsl_core::arch::thread::{block_idx_x, thread_idx_x};
use dsl_core::jit::{self, Device, KernelArg, Launch, TensorArg};
use dsl_core::trace::{KernelParam, Tensor, Val, threads, trace_kernel};
use dsl_core::{Target, ptxas};
use kernels::swap_ab_decode::engine::{DeviceProblem, run_gpu};
use kernels::swap_ab_decode::{
    CaseSpec, CompileMode, DecodeArgs, DecodeCase, DecodeError, DeviceTensor, KeyError,
    MAX_CLUSTER, OutputBuffers, SwapAbDecode, THREADS, compare, edge_cases, generate, reference,
    snapshot_keys, variant_keys,
};

/// Counts this thread's heap allocations, so a test can show that a launch makes none.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl std::alloc::GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is the system allocator's.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from `alloc` above, that is, from the system allocator.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING_ALLOCATOR: CountingAllocator = CountingAllocator;

/// The driver's switch for its JIT disk cache.
const NO_JIT_CACHE: &str = "CUDA_CACHE_DISABLE";

fn gpu(target: Target) -> Option<Arc<Device>> {
    jit::test_device(target).map(Arc::new)
}

/// Runs `case` on the GPU (debug entry: the pre-cast output is checked too); the report
/// line, or the failure.
fn check_on_gpu(
    dev: &Arc<Device>,
    case: &DecodeCase,
    sm_budget: Option<usize>,
) -> Result<String, String> {
    let key = case.problem.key;
    let want = reference(&case.problem).map_err(|e| format!("{key} {}: {e}", case.name))?;
    let run = run_gpu(dev, &case.problem, true, sm_budget)
        .map_err(|e| format!("{key} {}: {e}", case.name))?;
    let report = compare(&want, &run.out, run.precast.as_deref());
    let line = format!(
        "{key} {:<28} s_q {:>3}: {:.3}% codes one step off, {} (+{} ambiguous) scale diffs, worst head error/bound {:.3}",
        case.name,
        case.problem.s_q(),
        100.0 * report.differing_fraction(),
        report.scales_differing,
        report.ambiguous_scales_differing,
        report
            .worst_head()
            .map_or(0.0, |h| h.max_abs_error / h.bound.max(f64::MIN_POSITIVE)),
    );
    if report.ok() {
        Ok(line)
    } else {
        Err(format!("{line}\n{report}"))
    }
}

fn run_all(dev: &Arc<Device>, cases: Vec<DecodeCase>) {
    run_all_on(dev, cases, None);
}

/// [`run_all`] with persistent grids sized to `sm_budget` SMs.
fn run_all_on(dev: &Arc<Device>, cases: Vec<DecodeCase>, sm_budget: Option<usize>) {
    let mut failures = Vec::new();
    for case in &cases {
        match check_on_gpu(dev, case, sm_budget) {
            Ok(line) => eprintln!("{line}"),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn gpu_decode_every_snapshot_key_at_four_sizes() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let mut cases = Vec::new();
    for key in snapshot_keys(Target::Sm90a) {
        // The largest batch is adversarial too: it is where millions of codes meet the
        // numerics contract's rarest cases (an output cancelled to near zero).
        let sizes = [(1, false), (7, true), (64, false), (300, true)];
        for (i, (s_q, adversarial)) in sizes.into_iter().enumerate() {
            let spec = CaseSpec {
                key,
                s_q,
                adversarial,
            };
            cases.push(generate(100 + i as u64, &spec).unwrap());
        }
    }
    run_all(&dev, cases);
}

/// The driver's own JIT, which may be an older ptxas than the one the snapshot checks run
/// (CUDA 13.0's against 13.5), degrades no production kernel: its verbose log has a
/// register report, no spill and no `C75xx` line for every snapshot and variant key.
/// A module the driver takes from its disk cache comes with an empty log, so the check
/// runs in a child process of this test binary with the cache off.
#[test]
fn gpu_decode_driver_jit_degrades_no_kernel() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    if std::env::var_os(NO_JIT_CACHE).is_none() {
        let name = "gpu_decode_driver_jit_degrades_no_kernel";
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", name, "--nocapture"])
            .env(NO_JIT_CACHE, "1")
            .status()
            .unwrap();
        assert!(status.success(), "{name} failed with the JIT cache off");
        return;
    }
    let decode = SwapAbDecode::new(dev)
        .unwrap()
        .with_mode(CompileMode::OnDemand);
    let mut degraded = Vec::new();
    for key in snapshot_keys(Target::Sm90a)
        .into_iter()
        .chain(variant_keys(Target::Sm90a))
    {
        let kernel = decode.kernel(&key).unwrap();
        let log = kernel.jit_log();
        match ptxas::read_log(&kernel.info().name, key.target, log.to_string()) {
            Ok(report) => {
                let spilled = report.spill_stores + report.spill_loads;
                eprintln!(
                    "{key}: driver JIT {} registers, {spilled} bytes spilled",
                    report.registers
                );
                if spilled > 0 {
                    degraded.push(format!("{key}: the driver's JIT spills:\n{log}"));
                }
            }
            Err(e) => degraded.push(format!("{key}: {e}")),
        }
    }
    assert!(degraded.is_empty(), "{}", degraded.join("\n"));
}

#[test]
fn gpu_decode_head_count_variant() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let mut cases = Vec::new();
    for key in variant_keys(Target::Sm90a) {
        cases.extend(edge_cases(&key).unwrap());
        for (i, s_q) in [1, 64].into_iter().enumerate() {
            cases.push(
                generate(
                    40 + i as u64,
                    &CaseSpec {
                        key,
                        s_q,
                        adversarial: s_q == 1,
                    },
                )
                .unwrap(),
            );
        }
    }
    run_all(&dev, cases);
}

#[test]
fn gpu_decode_every_edge_case() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let cases = snapshot_keys(Target::Sm90a)
        .iter()
        .flat_map(|key| edge_cases(key).unwrap())
        .collect();
    run_all(&dev, cases);
}

#[test]
fn gpu_decode_sm100a_numerics() {
    // Ready for a Blackwell GPU: the same checks through the tcgen05 build.
    let Some(dev) = gpu(Target::Sm100a) else {
        return;
    };
    let mut cases = Vec::new();
    for key in snapshot_keys(Target::Sm100a) {
        cases.extend(edge_cases(&key).unwrap());
        cases.push(
            generate(
                5,
                &CaseSpec {
                    key,
                    s_q: 64,
                    adversarial: false,
                },
            )
            .unwrap(),
        );
    }
    run_all(&dev, cases);
}

fn realistic(s_q: usize) -> DecodeCase {
    let key = snapshot_keys(Target::Sm90a)
        .into_iter()
        .find(|k| k.heads == 32 && k.extra_width == 1024)
        .unwrap();
    generate(
        21,
        &CaseSpec {
            key,
            s_q,
            adversarial: false,
        },
    )
    .unwrap()
}

/// Every run of `case` gave the same bytes (`between`: what the runs differ in), and they
/// meet the numerics contract.
fn assert_identical_and_in_contract(case: &DecodeCase, runs: &[OutputBuffers], between: &str) {
    assert!(
        runs.windows(2).all(|w| w[0] == w[1]),
        "outputs differ between {between}"
    );
    let report = compare(&reference(&case.problem).unwrap(), &runs[0], None);
    assert!(report.ok(), "{report}");
}

#[test]
fn gpu_decode_is_bitwise_identical_over_three_launches() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let case = realistic(64);
    let runs: Vec<OutputBuffers> = (0..3)
        .map(|_| run_gpu(&dev, &case.problem, false, None).unwrap().out)
        .collect();
    assert_identical_and_in_contract(&case, &runs, "launches");
    eprintln!("gpu_decode_is_bitwise_identical_over_three_launches: 3 launches, identical bytes");
}

/// A persistent grid (a streamed key of one CTA a token, more tokens than SMs) gives the
/// same bytes over launches and whatever SM budget sizes it: down to one CTA taking every
/// token.
#[test]
fn gpu_decode_persistent_grid_is_bitwise_identical_for_any_sm_budget() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let key = snapshot_keys(Target::Sm90a)
        .into_iter()
        .find(|k| {
            k.to_string()
                .starts_with("h16_nk128_ne512_fp8_p64x64_stream_")
        })
        .unwrap();
    let spec = CaseSpec {
        key,
        s_q: 300,
        adversarial: false,
    };
    let case = generate(22, &spec).unwrap();
    let budgets = [None, None, Some(7), Some(1)];
    let runs: Vec<OutputBuffers> = budgets
        .iter()
        .map(|&sms| run_gpu(&dev, &case.problem, false, sms).unwrap().out)
        .collect();
    assert_identical_and_in_contract(&case, &runs, "launches or SM budgets");
    let refused = SwapAbDecode::new(dev.clone()).unwrap().with_sm_budget(0);
    assert!(matches!(
        refused,
        Err(DecodeError::Key(KeyError::SmBudget { .. }))
    ));
    eprintln!(
        "gpu_decode_persistent_grid_is_bitwise_identical_for_any_sm_budget: {key}, 300 tokens, \
         the device's SMs twice, 7 and 1: identical bytes"
    );
}

#[test]
fn gpu_decode_launch_allocates_nothing_once_loaded() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let case = realistic(8);
    let decode = SwapAbDecode::new(dev.clone()).unwrap();
    let stream = dev.stream();
    let uploaded = DeviceProblem::upload(&case.problem, stream).unwrap();
    // Strict by default: the key is refused until warm-up compiles it.
    // SAFETY: refused before anything is enqueued.
    let refused = unsafe { decode.launch(stream, &uploaded.args) }.unwrap_err();
    assert!(
        matches!(refused, DecodeError::NotWarmedUp { .. }),
        "{refused}"
    );
    let shape = uploaded.args.check(decode.gpu()).unwrap().shape;
    decode.warmup(&shape).unwrap();
    // SAFETY: the uploaded buffers outlive every launch (the stream is synchronised below).
    unsafe { decode.launch(stream, &uploaded.args) }.unwrap();
    stream.synchronize().unwrap();
    let before = ALLOCATIONS.with(|n| n.get());
    for _ in 0..3 {
        // SAFETY: as above.
        unsafe { decode.launch(stream, &uploaded.args) }.unwrap();
    }
    let allocations = ALLOCATIONS.with(|n| n.get()) - before;
    stream.synchronize().unwrap();
    assert_eq!(allocations, 0, "3 launches of a loaded key allocated");
    eprintln!("gpu_decode_launch_allocates_nothing_once_loaded: 3 launches, 0 allocations");
}

#[test]
fn gpu_decode_replays_from_a_cuda_graph() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let case = realistic(32);
    let decode = SwapAbDecode::new(dev.clone()).unwrap();
    // A stream of this test's own: the capture takes in whatever is enqueued on it.
    let stream = dev.context().new_stream().unwrap();
    let mut uploaded = DeviceProblem::upload(&case.problem, &stream).unwrap();
    decode
        .kernel(&uploaded.args.check(decode.gpu()).unwrap().key)
        .unwrap();
    stream.synchronize().unwrap();
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .unwrap();
    // SAFETY: the uploaded buffers outlive every replay below.
    let launched = unsafe { decode.launch(&stream, &uploaded.args) };
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    launched.unwrap();
    let graph = graph.unwrap().expect("the capture recorded the launch");
    // Nothing ran during the capture: the outputs still hold their poison.
    assert_eq!(
        uploaded.read_outputs(&case.problem, &stream).unwrap(),
        case.problem.out
    );
    for _ in 0..3 {
        graph.launch().unwrap();
    }
    stream.synchronize().unwrap();
    let out = uploaded.read_outputs(&case.problem, &stream).unwrap();
    let report = compare(&reference(&case.problem).unwrap(), &out, None);
    assert!(report.ok(), "{report}");
    // The benchmark's check: outputs put back to their poison, then one more replay.
    uploaded.restore_outputs(&case.problem, &stream).unwrap();
    assert_eq!(
        uploaded.read_outputs(&case.problem, &stream).unwrap(),
        case.problem.out
    );
    graph.launch().unwrap();
    let again = uploaded.read_outputs(&case.problem, &stream).unwrap();
    assert_eq!(
        again, out,
        "a replay after restored outputs differs from the first"
    );
    eprintln!(
        "gpu_decode_replays_from_a_cuda_graph: 4 replays, output meets the contract, the same \
         after the outputs were restored"
    );
}

/// Copies `src` to `dst` (u32 words), letting its dependents start at once: a dependent that
/// read `dst` before `griddepcontrol.wait` would see stale data.
fn early_release_copy(target: Target) -> dsl_core::ir::Kernel {
    trace_kernel("early_release_copy", target, || {
        threads(256, 1, 1);
        let dst = Tensor::<u32, 1>::declare("dst");
        let src = Tensor::<u32, 1>::declare("src");
        let n = Val::<u32>::declare("n");
        launch_dependents();
        let i = block_idx_x() * 256u32 + thread_idx_x();
        let at = i.mul_wide(4);
        let v: Val<u32> = load(src.base() + at);
        // Only in range: the grid is rounded up to whole CTAs.
        let ok = i.lt(n);
        store_if(dst.base() + at, v, ok);
    })
    .unwrap()
}

#[test]
fn gpu_decode_waits_for_its_pdl_predecessor() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let case = realistic(64);
    let decode = SwapAbDecode::new(dev.clone())
        .unwrap()
        .with_mode(CompileMode::OnDemand);
    let stream = dev.stream();
    // Q on the device is zeros until the producer copies the real Q over it.
    let mut zero_q = case.problem.clone();
    zero_q.q.data.fill(half::bf16::ZERO);
    let uploaded = DeviceProblem::upload(&zero_q, stream).unwrap();
    let words = case.problem.q.data.len() / 2;
    let real_q: Vec<u32> = case
        .problem
        .q
        .data
        .chunks(2)
        .map(|p| p[0].to_bits() as u32 | (p[1].to_bits() as u32) << 16)
        .collect();
    let staging = stream.clone_htod(&real_q).unwrap();
    let q_ptr = uploaded.args.q.ptr;
    let copy = dev.load(&early_release_copy(Target::Sm90a)).unwrap();
    let args = [
        KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(q_ptr, [words as i64])),
        KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(
            cudarc::driver::DevicePtr::device_ptr(&staging, stream).0,
            [words as i64],
        )),
        KernelArg::U32(words as u32),
    ];
    // Two launches back to back on one stream: the copy, then the decode as its PDL
    // dependent (the host API always launches with PDL).
    unsafe {
        copy.launch(
            stream,
            Launch::new([(words as u32).div_ceil(256), 1, 1]),
            &args,
        )
        .unwrap();
        decode.launch(stream, &uploaded.args).unwrap();
    }
    let out = uploaded.read_outputs(&case.problem, stream).unwrap();
    let report = compare(&reference(&case.problem).unwrap(), &out, None);
    assert!(report.ok(), "{report}");
    eprintln!("gpu_decode_waits_for_its_pdl_predecessor: the decode saw the copied Q");
}

#[test]
fn gpu_sm100a_build_is_refused_on_this_device() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let case = realistic(1);
    let blackwell = SwapAbDecode::for_target(dev.clone(), Target::Sm100a)
        .unwrap()
        .with_mode(CompileMode::OnDemand);
    let uploaded = DeviceProblem::upload(&case.problem, dev.stream()).unwrap();
    // SAFETY: refused before any launch.
    let err = unsafe { blackwell.launch(dev.stream(), &uploaded.args) }.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, DecodeError::Jit(_)), "{text}");
    assert!(text.contains("sm_100a") && text.contains("9.0"), "{text}");
    eprintln!("gpu_sm100a_build_is_refused_on_this_device: {text}");
}

/// The device's clusters at once, which dispatch counts a launch's rounds with: the
/// launch probe's answer for each cluster size (printed), the same as each snapshot key's
/// own kernel's where the key runs clusters of that size, and what the instance's model
/// uses. One CTA of every key fills an SM, so the probe, which takes the device's largest
/// shared memory, stands for all of them.
#[test]
fn gpu_decode_dispatch_counts_the_devices_clusters_at_once() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let info = dev.info();
    let (sms, smem) = (info.sm_count, info.max_dynamic_smem_per_block);
    let decode = SwapAbDecode::new(dev.clone()).unwrap();
    let mut at_once = vec![0];
    for ctas in 1..=MAX_CLUSTER as u32 {
        let clusters = dev.clusters_at_once(ctas, THREADS as u32, smem).unwrap();
        eprintln!(
            "{}: {clusters} clusters of {ctas} at once ({} of {sms} SMs)",
            info.name,
            clusters * ctas
        );
        assert!(clusters * ctas <= sms, "{clusters} clusters of {ctas}");
        assert!(clusters <= *at_once.last().unwrap() || ctas == 1);
        if ctas <= 8 {
            assert!(clusters > 0, "portable clusters of {ctas} CTAs must run");
        }
        let modelled = decode.gpu().ctas_at_once(ctas as usize);
        assert_eq!(
            modelled,
            (clusters > 0).then_some((clusters * ctas) as usize)
        );
        at_once.push(clusters);
    }
    assert_eq!(at_once[1], sms, "one CTA an SM");
    let mut sizes_seen = Vec::new();
    for key in snapshot_keys(Target::Sm90a) {
        let ctas = key.cluster_size();
        if sizes_seen.contains(&ctas) {
            continue;
        }
        sizes_seen.push(ctas);
        let kernel = decode.kernel(&key).unwrap();
        let own = kernel.clusters_at_once([ctas as u32, 1, 1]).unwrap();
        assert_eq!(own, at_once[ctas], "{key}: its kernel against the probe");
    }
    eprintln!("cluster sizes checked against their keys' kernels: {sizes_seen:?}");
}

/// A small batch for the compute-sanitizer runs (memcheck, racecheck, synccheck): ten
/// keys (split: 16 heads fp8 in full and in half tiles, 32 heads NVFP4 with NE 1024, the
/// one-CTA cluster, 32 heads fp8 in half tiles as two clusters of 16 heads; streamed: 16
/// heads fp8 by one CTA and by a cluster of two, SWA only, NVFP4 by one CTA, the 32-head
/// CTA) on the edge cases that stress bounds (ids past the end, invalid ids, padded heads
/// and cache blocks) plus a 3-token generated case each, with persistent grids of two CTAs.
#[test]
fn gpu_decode_sanitizer_batch() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let wanted = [
        "ids_past_end",
        "negative_ids",
        "last_slot",
        "padded_heads",
        "padded_cache_blocks",
        "everything_at_once",
    ];
    let keys: Vec<_> = snapshot_keys(Target::Sm90a)
        .into_iter()
        .filter(|k| {
            let name = k.to_string();
            [
                "h16_nk128_ne512_fp8",
                "h32_nk128_ne1024_nvfp4",
                "h16_nk64_ne0",
                "h16_nk128_ne512_nvfp4_p64x64_stream_",
                "h32_nk128_ne512_nvfp4_p64x64_streamh32_",
                "h32_nk128_ne512_fp8_p64x64_split64h16_",
            ]
            .iter()
            .any(|n| name.starts_with(n))
        })
        .collect();
    // Split: the four and 32 heads in two clusters of 16; streamed: the 16-head fp8 ones (1
    // and 2 CTAs), the SWA-only one, the NVFP4 one (two teams staging both record formats)
    // and the 32-head CTA (one team, its records in registers).
    assert_eq!(keys.len(), 10);
    let mut cases = Vec::new();
    for key in keys {
        cases.extend(
            edge_cases(&key)
                .unwrap()
                .into_iter()
                .filter(|c| wanted.contains(&c.name.as_str())),
        );
        cases.push(
            generate(
                3,
                &CaseSpec {
                    key,
                    s_q: 3,
                    adversarial: true,
                },
            )
            .unwrap(),
        );
    }
    // Two SMs: a streamed CTA of one a token takes tokens 0 and 2 of three, so the
    // sanitizers see a CTA go on to its next token.
    run_all_on(&dev, cases, Some(2));
}

#[test]
fn gpu_decode_from_cudarc_views_on_a_raw_stream() {
    let Some(dev) = gpu(Target::Sm90a) else {
        return;
    };
    let case = realistic(4);
    let stream = dev.stream();
    let mut uploaded = DeviceProblem::upload(&case.problem, stream).unwrap();
    let decode = SwapAbDecode::new(dev.clone()).unwrap();
    let plain = uploaded.args.clone();
    decode
        .warmup(&plain.check(decode.gpu()).unwrap().shape)
        .unwrap();
    {
        // Q through a read view, out_data through a write view, out_scale through the slice.
        let n = uploaded.buffers.len();
        let (inputs, outputs) = uploaded.buffers.split_at_mut(n - 2);
        let (data, scale) = outputs.split_at_mut(1);
        let q_view = inputs[0].slice(..);
        let short = inputs[0].slice(..16);
        let refused = DeviceTensor::input::<half::bf16, u8>(
            "q",
            &short,
            stream,
            &plain.q.shape,
            &plain.q.strides,
        )
        .err()
        .expect("a 16-byte view is too short for Q");
        assert!(
            refused.to_string().contains("of a 16-byte buffer"),
            "{refused}"
        );
        let q = DeviceTensor::input::<half::bf16, u8>(
            "q",
            &q_view,
            stream,
            &plain.q.shape,
            &plain.q.strides,
        )
        .unwrap();
        let mut data_view = data[0].slice_mut(..);
        let out_data = DeviceTensor::output::<u8, u8>(
            "out_data",
            &mut data_view,
            stream,
            &plain.out_data.shape,
            &plain.out_data.strides,
        )
        .unwrap();
        let out_scale = DeviceTensor::output::<i32, u8>(
            "out_scale",
            &mut scale[0],
            stream,
            &plain.out_scale.shape,
            &plain.out_scale.strides,
        )
        .unwrap();
        let args = DecodeArgs {
            q: q.tensor().clone(),
            out_data: out_data.tensor().clone(),
            out_scale: out_scale.tensor().clone(),
            ..plain.clone()
        };
        // SAFETY: every tensor addresses a live buffer of its shape; the guards are dropped
        // (recording the accesses) only after the launch is enqueued.
        unsafe { decode.launch_on_raw_stream(stream.cu_stream(), &args) }.unwrap();
    }
    let out = uploaded.read_outputs(&case.problem, stream).unwrap();
    let report = compare(&reference(&case.problem).unwrap(), &out, None);
    assert!(report.ok(), "{report}");
    eprintln!("gpu_decode_from_cudarc_views_on_a_raw_stream: output meets the contract");
}
