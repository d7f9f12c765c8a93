//! A serving process's use of the decode kernel: shapes -> warm-up -> check -> a whole
//! decode step of a 61-layer model.
//!
//! On a GPU (sm_90a or sm_100a): one `SwapAbDecode` (strict: nothing compiles after
//! warm-up), the layer shape's keys compiled and timed, every layer's arguments checked
//! once, then the 61 layers launched back to back on one stream (each launch is a PDL
//! dependent of the one before) inside a CUDA-graph capture; the graph is replayed and
//! timed with CUDA events, and the first and last layers' outputs are checked against the
//! f64 reference.
//!
//! Without a GPU it does the same steps on the CPU interpreter for two layers: the key is
//! traced once (its warm-up), each layer's inputs are checked, run and compared.
//!
//! ```text
//! cargo run --release --example serve_step -- [--tokens N] [--replays R]
//! ```

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use dsl_core::Target;
use dsl_core::interp::Options;
use dsl_core::jit::{self, Device};
use kernels::swap_ab_decode::engine::{DeviceProblem, interpret_kernel};
use kernels::swap_ab_decode::{
    CaseSpec, DecodeProblem, Gpu, LayerShape, SwapAbDecode, compare, dispatch, generate, reference,
    trace_entry,
};

/// Layers of the model (DeepSeek V4's 61).
const LAYERS: usize = 61;
/// Layers the interpreter runs when there is no GPU.
const CPU_LAYERS: usize = 2;

/// One layer's decode shapes: 32 live heads (a tensor-parallel share), a 128-slot sliding
/// window and 512 compressed slots of NVFP4 records.
const SHAPE: LayerShape = LayerShape {
    heads: 32,
    swa_width: 128,
    extra_width: 512,
    extra_record_bytes: 288,
    swa_page: 64,
    extra_page: 16,
};

/// The batch of layer `layer`: its own caches and slot lists, the same shapes.
fn layer_batch(layer: usize, gpu: &Gpu, tokens: usize) -> Result<DecodeProblem, String> {
    let key = dispatch(&SHAPE, tokens, gpu).map_err(|e| e.to_string())?;
    let spec = CaseSpec {
        key,
        s_q: tokens,
        adversarial: false,
    };
    Ok(generate(1 + layer as u64, &spec)
        .map_err(|e| e.to_string())?
        .problem)
}

fn option(name: &str, default: usize) -> Result<usize, String> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .ok_or(format!("{name} needs a value"))?
            .parse()
            .map_err(|e| format!("{name}: {e}")),
        None => Ok(default),
    }
}

fn on_gpu(device: Arc<Device>, tokens: usize, replays: usize) -> Result<bool, String> {
    let decode = SwapAbDecode::new(device.clone()).map_err(|e| e.to_string())?;
    let gpu = *decode.gpu();
    let started = Instant::now();
    let keys = decode.warmup(&SHAPE).map_err(|e| e.to_string())?;
    println!(
        "warm-up: {} key(s) compiled cold in {:.3} s ({})",
        keys.len(),
        started.elapsed().as_secs_f64(),
        keys.iter()
            .map(|k| k.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );

    let stream = device
        .context()
        .new_stream()
        .map_err(|e| format!("a stream of its own for the capture: {e}"))?;
    let mut problems = Vec::with_capacity(LAYERS);
    let mut layers = Vec::with_capacity(LAYERS);
    let mut key = None;
    for layer in 0..LAYERS {
        let problem = layer_batch(layer, &gpu, tokens)?;
        let uploaded = DeviceProblem::upload(&problem, &stream).map_err(|e| e.to_string())?;
        let call = uploaded
            .args
            .check(&gpu)
            .map_err(|e| format!("layer {layer}: {e}"))?;
        key = Some(call.key);
        problems.push(problem);
        layers.push(uploaded);
    }
    stream.synchronize().map_err(|e| e.to_string())?;
    let key = key.ok_or("no layers")?;
    println!("check: the arguments of {LAYERS} layers fit key {key}");

    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(|e| e.to_string())?;
    let mut launched = Ok(());
    for layer in &layers {
        // SAFETY: every tensor addresses a live upload of its shape, kept until the end.
        launched = unsafe { decode.launch(&stream, &layer.args) }.map(|_| ());
        if launched.is_err() {
            break;
        }
    }
    // End the capture whatever happened, so the stream is usable and the error is the
    // launch's own.
    let graph = stream.end_capture(CUgraphInstantiate_flags(0));
    launched.map_err(|e| e.to_string())?;
    let graph = graph
        .map_err(|e| e.to_string())?
        .ok_or("the capture recorded nothing")?;

    graph.launch().map_err(|e| e.to_string())?;
    stream.synchronize().map_err(|e| e.to_string())?;
    let event = || {
        stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| e.to_string())
    };
    let start = event()?;
    for _ in 0..replays {
        graph.launch().map_err(|e| e.to_string())?;
    }
    let end = event()?;
    let ms = start.elapsed_ms(&end).map_err(|e| e.to_string())? as f64;
    let per_step = ms * 1e3 / replays as f64;
    println!(
        "decode step: {LAYERS} layers x {tokens} token(s) in one CUDA graph, {replays} replays: \
         {per_step:.1} us a step, {:.2} us a layer",
        per_step / LAYERS as f64
    );

    let mut ok = true;
    for layer in [0, LAYERS - 1] {
        let out = layers[layer]
            .read_outputs(&problems[layer], &stream)
            .map_err(|e| e.to_string())?;
        let want = reference(&problems[layer]).map_err(|e| e.to_string())?;
        let report = compare(&want, &out, None);
        println!(
            "layer {layer}: numerics {}",
            if report.ok() { "ok" } else { "FAILED" }
        );
        ok &= report.ok();
    }
    Ok(ok)
}

fn on_cpu(tokens: usize) -> Result<bool, String> {
    let gpu = Gpu::of_target(Target::Sm100a);
    let key = dispatch(&SHAPE, tokens, &gpu).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let kernel = trace_entry(&key, true).map_err(|e| e.to_string())?;
    println!(
        "no GPU: the CPU interpreter stands in for {CPU_LAYERS} of {LAYERS} layers; warm-up \
         (trace of {key}) {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let mut ok = true;
    for layer in 0..CPU_LAYERS {
        let problem = layer_batch(layer, &gpu, tokens)?;
        problem
            .validate()
            .map_err(|e| format!("layer {layer}: {e}"))?;
        let run = interpret_kernel(&kernel, &problem, true, &Options::default())
            .map_err(|e| e.to_string())?;
        let want = reference(&problem).map_err(|e| e.to_string())?;
        let report = compare(&want, &run.out, run.precast.as_deref());
        println!(
            "layer {layer}: {:.2} s in the interpreter, numerics {}",
            run.seconds,
            if report.ok() { "ok" } else { "FAILED" }
        );
        ok &= report.ok();
    }
    Ok(ok)
}

fn main() -> ExitCode {
    let result = (|| {
        let tokens = option("--tokens", 4)?;
        let replays = option("--replays", 20)?.max(1);
        if jit::gpu_available() {
            let device = Device::open(0).map_err(|e| e.to_string())?;
            if device.target().is_some() {
                return on_gpu(Arc::new(device), tokens, replays);
            }
            println!(
                "{} has no kestrel target: running on the CPU",
                device.info().name
            );
        }
        on_cpu(tokens.min(2))
    })();
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
