//! GPU benchmark of the decode kernel, timed as serving runs it: for heads {16, 32}, NK 128,
//! NE {512, 1024}, fp8 and NVFP4 compressed records and s_q {1, 32, 64, 128, 512}, every
//! schedule (`Schedule::candidates`: split with 128- and 64-row compressed tiles, with 32
//! heads also a cluster for every 16, streamed by 1 to 4 CTAs), the median, p10 and p90 of
//! CUDA-graph replays of one launch, the KV bytes it reads per second, and in the same run
//! the device's copy bandwidth, so every figure is also a ratio.
//!
//! Each timed replay is queued behind a short GPU spin (`kernels::basics::spin`, its step
//! count calibrated at start-up to about 30 us at the fastest clock the calibration sees):
//! while the spin runs, the host queues the start event, the replay and the end event, so
//! the replay starts as soon as the spin ends and the events time the GPU's work, not the
//! host's launch. Clocks are left alone.
//!
//! Every token reads its own KV rows (slot ids are distinct across the batch, as in a batch
//! of different sequences), and the replays rotate over independent slot sets, one graph
//! each, covering at least 256 MiB of cache, so the L2 cache (60 MB on an H200) does not
//! serve repeated replays. The query and output buffers are shared by the sets: they are
//! small beside the KV.
//!
//! Before a schedule's time counts, its output is checked: one launch on the first slot set,
//! over output buffers put back to their initial bytes, against the f64 reference by the
//! SPEC's numerics contract (`compare`). A row whose output is outside it prints `WRONG`,
//! its JSON row says `"output_ok":false`, and the run ends with exit status 1.
//!
//! The 61-layer chain, for H=16 NE=512 fp8 and H=32 NE=512 NVFP4 (the layer shape of
//! `serve_step`): one graph of 61 back-to-back launches of the schedule the host dispatches
//! (`SwapAbDecode::launch`, each a PDL dependent of the one before), each layer on its own
//! slot set as distinct layers read distinct KV, timed the same way and reported per layer
//! (graph time / 61) in JSON lines of their own (`"chain_layers":61`). Where 61 sets are
//! too few to cover the 256 MiB, graphs of further sets rotate.
//!
//! `cargo run --release --example bench_decode -- [--out results.jsonl] [--quick] [--only
//! HEADS,NE,RECORD,S_Q] [--schedule NAME] [--tokens S_Q,...] [--no-chain] [--part K/N]`; on
//! the GPU machine through `scripts/bench-gpu.sh`, which adds the PyTorch baseline.
//! `--quick` times a few replays, `--only 16,512,fp8,512` runs one configuration and
//! `--schedule stream` one schedule of it (`split`, `split64`, `stream`, `stream2`, ...; no
//! chains): under `ncu`, every `swap_ab_decode` launch is then the one to profile.
//! `--tokens 16,48,64` times those s_q instead of 1, 32, 64, 128 and 512, `--no-chain`
//! skips the chains. `--part 2/3` times every third configuration from the second (chains
//! with their configuration), so that a run too long for one sitting splits into runs that
//! together time every configuration once (`bench_torch.py bench --part` splits the same
//! way).

use std::fs::File;
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaEvent, CudaGraph, CudaSlice, CudaStream, DevicePtr};
use dsl_core::jit::{self, Device, KernelArg, Launch, LoadedKernel, TensorArg};
use half::bf16;
use kernels::basics::spin;
use kernels::swap_ab_decode::engine::DeviceProblem;
use kernels::swap_ab_decode::{
    CompileKey, DecodeArgs, DecodeProblem, DeviceTensor, ExtraRecord, MAX_CLUSTER, NumericsReport,
    OutputBuffers, OutputLayout, PagedCache, QueryBuffer, ReferenceOutput, Schedule, SlotList,
    SwapAbDecode, compare, reference,
};

const NK: usize = 128;
const SWA_PAGE: usize = 64;
const EXTRA_PAGE: usize = 16;
const ROTATION_BYTES: usize = 256 << 20;
/// The most slot sets one configuration's single launches rotate over.
const MAX_SETS: usize = 512;
/// Layers of the model (DeepSeek V4's 61), launches of one chain graph.
const CHAIN_LAYERS: usize = 61;
/// The layer shapes (heads, NE, record) timed as chains too.
const CHAIN_SHAPES: [(usize, usize, ExtraRecord); 2] =
    [(16, 512, ExtraRecord::Fp8), (32, 512, ExtraRecord::Nvfp4)];
/// Untimed replays before the timed ones.
const WARMUP: usize = 5;
/// How long the spin ahead of a replay lasts: a few times the host's cost of queueing the
/// events and a graph launch.
const SPIN_US: f64 = 30.0;
/// Spin steps of a calibration probe: hundreds of microseconds, so the probe's own launch
/// is small beside it.
const PROBE_STEPS: u32 = 1 << 16;
/// How long the calibration spins before it times, for the clocks to rise from idle.
const CLOCK_RAMP: Duration = Duration::from_millis(200);

const USAGE: &str = "usage: bench_decode [--out results.jsonl] [--quick] \
                     [--only HEADS,NE,RECORD,S_Q] [--schedule NAME] [--tokens S_Q,S_Q,...] \
                     [--no-chain] [--part K/N]";
#[derive(Clone, Copy, PartialEq)]
struct Config {
    heads: usize,
    ne: usize,
    record: ExtraRecord,
    s_q: usize,
}

impl Config {
    /// Every configuration of `tokens` (s_q values), in the order they run.
    fn all(tokens: &[usize]) -> Vec<Config> {
        let mut all = Vec::new();
        for heads in [16, 32] {
            for ne in [512, 1024] {
                for record in [ExtraRecord::Fp8, ExtraRecord::Nvfp4] {
                    for &s_q in tokens {
                        all.push(Config {
                            heads,
                            ne,
                            record,
                            s_q,
                        });
                    }
                }
            }
        }
        all
    }

    /// The name `--only` takes: `HEADS,NE,RECORD,S_Q`.
    fn name(self) -> String {
        let record = self.record.short_name();
        format!("{},{},{record},{}", self.heads, self.ne, self.s_q)
    }

    fn chained(self) -> bool {
        CHAIN_SHAPES.contains(&(self.heads, self.ne, self.record))
    }
}

struct Options {
    out: Option<String>,
    quick: bool,
    only: Option<String>,
    schedule: Option<Schedule>,
    tokens: Vec<usize>,
    chain: bool,
    part: Part,
    help: bool,
}

/// `--part K/N`: the configurations whose index in `Config::all` is K - 1 modulo N.
#[derive(Clone, Copy)]
struct Part {
    k: usize,
    n: usize,
}

impl Part {
    const WHOLE: Part = Part { k: 1, n: 1 };

    fn parse(text: &str) -> Result<Part, String> {
        let bad = || format!("--part {text}: give K/N with 1 <= K <= N, e.g. 1/2");
        let (k, n) = text.split_once('/').ok_or_else(bad)?;
        let (k, n) = (
            k.parse::<usize>().map_err(|_| bad())?,
            n.parse::<usize>().map_err(|_| bad())?,
        );
        if k == 0 || k > n {
            return Err(bad());
        }
        Ok(Part { k, n })
    }

    fn holds(self, index: usize) -> bool {
        index % self.n == self.k - 1
    }
}

/// The s_q values timed unless `--tokens` says otherwise.
const TOKENS: [usize; 5] = [1, 32, 64, 128, 512];

/// `--tokens`' list: s_q values from 1 to 4096, comma-separated.
fn parse_tokens(list: &str) -> Result<Vec<usize>, String> {
    list.split(',')
        .map(|t| match t.parse::<usize>() {
            Ok(n) if (1..=4096).contains(&n) => Ok(n),
            _ => Err(format!(
                "--tokens {list}: give s_q values from 1 to 4096, comma-separated, e.g. 16,48,64"
            )),
        })
        .collect()
}

fn parse_options(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut options = Options {
        out: None,
        quick: false,
        only: None,
        schedule: None,
        tokens: TOKENS.to_vec(),
        chain: true,
        part: Part::WHOLE,
        help: false,
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--out" => options.out = Some(args.next().ok_or("--out needs a file name")?),
            "--only" => {
                options.only = Some(args.next().ok_or("--only needs HEADS,NE,RECORD,S_Q")?);
            }
            "--schedule" => {
                let name = args.next().ok_or("--schedule needs a schedule name")?;
                let schedule = Schedule::candidates()
                    .find(|c| c.short_name() == name)
                    .ok_or_else(|| {
                        let names: Vec<String> =
                            Schedule::candidates().map(Schedule::short_name).collect();
                        format!(
                            "--schedule {name}: no such schedule; give one of {}",
                            names.join(", ")
                        )
                    })?;
                options.schedule = Some(schedule);
            }
            "--tokens" => {
                options.tokens = parse_tokens(&args.next().ok_or("--tokens needs a list")?)?;
            }
            "--quick" => options.quick = true,
            "--no-chain" => options.chain = false,
            "--part" => options.part = Part::parse(&args.next().ok_or("--part needs K/N")?)?,
            "--help" | "-h" => options.help = true,
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    if let Some(name) = &options.only {
        if !Config::all(&options.tokens)
            .iter()
            .any(|c| c.name() == *name)
        {
            return Err(format!(
                "--only {name}: no such configuration; give HEADS,NE,RECORD,S_Q with heads 16 \
                 or 32, NE 512 or 1024, record fp8 or nvfp4 and an s_q of --tokens (1, 32, \
                 64, 128 or 512 without it), e.g. 16,512,fp8,512"
            ));
        }
    }
    Ok(options)
}

/// xorshift64*: reproducible bytes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A cache of `records` valid records with random data and sane scales.
fn cache(format: ExtraRecord, records: usize, page: usize, rng: &mut Rng) -> PagedCache {
    let blocks = records.div_ceil(page);
    let record = format.bytes();
    let mut c = PagedCache::new(format, blocks, page, page * record, 0).expect("cache geometry");
    for r in c.bytes.chunks_mut(record) {
        for word in r.chunks_mut(8) {
            // Random data without the e4m3 NaN codes (0x7f, 0xff): timing data.
            let bits = (rng.next() & 0x7e7e_7e7e_7e7e_7e7e).to_le_bytes();
            word.copy_from_slice(&bits[..word.len()]);
        }
        match format {
            ExtraRecord::Fp8 => r[512..]
                .iter_mut()
                .for_each(|s| *s = 118 + (rng.next() % 8) as u8),
            ExtraRecord::Nvfp4 => r[256..]
                .iter_mut()
                .for_each(|s| *s = 0x30 + (rng.next() % 8) as u8),
        }
    }
    c
}

/// Slot lists for `sets` independent batches of `s_q` tokens over distinct slots.
fn slots(width: usize, s_q: usize, set: usize, rng: &mut Rng) -> SlotList {
    let mut ids: Vec<i32> = (0..s_q * width)
        .map(|i| (set * s_q * width + i) as i32)
        .collect();
    // Shuffle within each token's row: rows of a token are not in slot order.
    for row in ids.chunks_mut(width.max(1)) {
        for i in (1..row.len()).rev() {
            row.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
    }
    SlotList {
        width,
        rows: s_q,
        row_stride: width,
        ids,
        lens: vec![width as i32; s_q],
    }
}

fn problem(cfg: Config, sets: usize, rng: &mut Rng) -> (DecodeProblem, Vec<(SlotList, SlotList)>) {
    let key = CompileKey {
        heads: cfg.heads,
        swa_width: NK,
        extra_width: cfg.ne,
        extra_record: cfg.record,
        swa_page: SWA_PAGE,
        extra_page: EXTRA_PAGE,
        target: dsl_core::Target::Sm90a,
        schedule: Schedule::SPLIT,
    };
    let plain: Vec<bf16> = (0..cfg.s_q * cfg.heads * 512)
        .map(|_| bf16::from_f32((rng.next() % 2000) as f32 / 1000.0 - 1.0))
        .collect();
    let q = QueryBuffer::pack(&plain, cfg.s_q, cfg.heads, cfg.heads * 512, bf16::ZERO).expect("q");
    let lists: Vec<(SlotList, SlotList)> = (0..sets)
        .map(|set| {
            (
                slots(NK, cfg.s_q, set, rng),
                slots(cfg.ne, cfg.s_q, set, rng),
            )
        })
        .collect();
    let max_pos = 4096;
    let p = DecodeProblem {
        key,
        q,
        swa_cache: cache(ExtraRecord::Fp8, sets * cfg.s_q * NK, SWA_PAGE, rng),
        swa: lists[0].0.clone(),
        extra_cache: cache(cfg.record, sets * cfg.s_q * cfg.ne, EXTRA_PAGE, rng),
        extra: lists[0].1.clone(),
        positions: (0..cfg.s_q).map(|b| (b * 7 % max_pos) as i64).collect(),
        cos_sin: (0..max_pos * 64)
            .map(|i| ((i % 97) as f32 / 97.0).cos())
            .collect(),
        cos_sin_stride: 64,
        sink: vec![0.5; cfg.heads],
        softmax_scale: 1.0 / (576f32).sqrt(),
        out: OutputBuffers::filled(OutputLayout::row_major(cfg.s_q, cfg.heads / 8), 0, 0),
    };
    (p, lists)
}

fn kv_bytes(cfg: Config) -> usize {
    cfg.s_q * (NK * 528 + cfg.ne * cfg.record.bytes())
}

/// Median, p10 and p90 of a sample, in the sample's unit.
#[derive(Clone, Copy)]
struct Spread {
    median: f64,
    p10: f64,
    p90: f64,
}

impl Spread {
    fn of(mut sample: Vec<f64>) -> Spread {
        sample.sort_by(f64::total_cmp);
        let at = |p: f64| sample[((sample.len() - 1) as f64 * p).round() as usize];
        Spread {
            median: at(0.5),
            p10: at(0.1),
            p90: at(0.9),
        }
    }

    fn divided(self, by: f64) -> Spread {
        Spread {
            median: self.median / by,
            p10: self.p10 / by,
            p90: self.p90 / by,
        }
    }
}

fn event(stream: &CudaStream) -> CudaEvent {
    stream
        .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .expect("record an event")
}

fn elapsed_us(start: &CudaEvent, end: &CudaEvent) -> f64 {
    f64::from(start.elapsed_ms(end).expect("time two events")) * 1e3
}

/// Device-to-device copy bandwidth (bytes read + written per second) of 2 GiB copies.
fn copy_bandwidth(stream: &Arc<CudaStream>) -> f64 {
    let n = 1usize << 31;
    let src: CudaSlice<u8> = stream.alloc_zeros(n).expect("alloc");
    let mut dst: CudaSlice<u8> = stream.alloc_zeros(n).expect("alloc");
    let mut times = Vec::new();
    for i in 0..12 {
        let start = event(stream);
        stream.memcpy_dtod(&src, &mut dst).unwrap();
        let us = elapsed_us(&start, &event(stream));
        if i >= 2 {
            times.push(us);
        }
    }
    2.0 * n as f64 / (Spread::of(times).median * 1e-6)
}

fn upload_i32(stream: &Arc<CudaStream>, v: &[i32]) -> (CudaSlice<i32>, u64) {
    let s = stream.clone_htod(v).unwrap();
    let p = s.device_ptr(stream).0;
    (s, p)
}

/// A configuration's inputs on the device: one call per slot set, all on one upload of the
/// caches.
struct Inputs {
    calls: Vec<DecodeArgs>,
    /// The problem of the first call's slot set, whose output each schedule is checked on.
    problem: DecodeProblem,
    /// The buffers the calls address, kept alive with them.
    uploaded: DeviceProblem,
    _ids: Vec<CudaSlice<i32>>,
}

impl Inputs {
    fn upload(cfg: Config, sets: usize, stream: &Arc<CudaStream>, rng: &mut Rng) -> Inputs {
        let (problem, lists) = problem(cfg, sets, rng);
        let uploaded = DeviceProblem::upload(&problem, stream).expect("upload");
        let mut ids = Vec::new();
        let mut calls = Vec::new();
        for (swa, extra) in &lists {
            let (a, pa) = upload_i32(stream, &swa.ids);
            let (b, pb) = upload_i32(stream, &extra.ids);
            ids.extend([a, b]);
            let mut args = uploaded.args.clone();
            args.swa_idx = DeviceTensor::contiguous::<i32>(pa, &[cfg.s_q, NK]);
            args.extra_idx = DeviceTensor::contiguous::<i32>(pb, &[cfg.s_q, cfg.ne]);
            calls.push(args);
        }
        Inputs {
            calls,
            problem,
            uploaded,
            _ids: ids,
        }
    }
}

/// The GPU spin queued ahead of each timed replay, with the step count that makes it
/// about `SPIN_US` long.
struct Spin {
    kernel: Arc<LoadedKernel>,
    /// Where the spin stores its result, kept alive for the launches that address it.
    _out: CudaSlice<u32>,
    out_ptr: u64,
    steps: u32,
}

impl Spin {
    /// The spin on `device`, its steps calibrated on the fastest of a few probes once the
    /// clocks have had time to rise: at lower clocks it only lasts longer.
    fn calibrated(device: &Device, stream: &Arc<CudaStream>) -> Spin {
        let target = device.target().expect("a device with a kestrel target");
        let kernel = device
            .kernel("spin", "", target, || spin::spin(target))
            .expect("load the spin kernel");
        let out = stream.alloc_zeros::<u32>(1).expect("alloc");
        let out_ptr = out.device_ptr(stream).0;
        let mut spin = Spin {
            kernel,
            _out: out,
            out_ptr,
            steps: PROBE_STEPS,
        };
        let ramp = Instant::now();
        while ramp.elapsed() < CLOCK_RAMP {
            spin.enqueue(stream);
            stream.synchronize().expect("synchronize");
        }
        let fastest = (0..20)
            .map(|_| {
                let start = event(stream);
                spin.enqueue(stream);
                elapsed_us(&start, &event(stream))
            })
            .fold(f64::INFINITY, f64::min);
        spin.steps = (f64::from(PROBE_STEPS) * SPIN_US / fastest).ceil() as u32;
        spin
    }

    fn enqueue(&self, stream: &CudaStream) {
        let args = [
            KernelArg::Tensor(TensorArg::contiguous::<u32, 1>(self.out_ptr, [1])),
            KernelArg::U32(self.steps),
        ];
        // SAFETY: the spin writes the one u32 of `_out`, which lives as long as `self`.
        unsafe { self.kernel.launch(stream, Launch::new([1, 1, 1]), &args) }
            .expect("launch the spin");
    }
}

/// A graph of what `launch` queues on `stream`, instantiated and uploaded (so that its first
/// replay costs no more than the others).
fn capture(stream: &Arc<CudaStream>, launch: impl FnOnce()) -> CudaGraph {
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .expect("begin a capture");
    launch();
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .expect("end the capture")
        .expect("the capture recorded a launch");
    graph.upload().expect("upload the graph");
    graph
}

/// What every measurement shares.
struct Bench {
    decode: SwapAbDecode,
    stream: Arc<CudaStream>,
    spin: Spin,
    /// Timed replays of a single-launch and of a chain graph.
    replays: usize,
    chain_replays: usize,
    /// The one schedule to time (`--schedule`), or every candidate.
    schedule: Option<Schedule>,
}

impl Bench {
    /// One graph per call, each one launch of `schedule`.
    fn single_graphs(&self, calls: &[DecodeArgs], schedule: Schedule) -> Vec<CudaGraph> {
        let launch = |call| {
            // SAFETY: every tensor addresses a live upload of its shape, kept (in `Inputs`)
            // until the graphs are dropped.
            unsafe {
                self.decode
                    .launch_with_schedule(&self.stream, call, schedule)
            }
            .expect("launch");
        };
        calls
            .iter()
            .map(|call| capture(&self.stream, || launch(call)))
            .collect()
    }

    /// One graph per `CHAIN_LAYERS` calls, launched back to back as the host dispatches them.
    fn chain_graphs(&self, calls: &[DecodeArgs]) -> Vec<CudaGraph> {
        let launch = |layers: &[DecodeArgs]| {
            for call in layers {
                // SAFETY: as in `single_graphs`.
                unsafe { self.decode.launch(&self.stream, call) }.expect("launch");
            }
        };
        calls
            .chunks_exact(CHAIN_LAYERS)
            .map(|layers| capture(&self.stream, || launch(layers)))
            .collect()
    }

    /// Launches `schedule` once on the first slot set, over output buffers restored to their
    /// initial bytes, and checks what it wrote against the f64 reference by the SPEC's
    /// numerics contract: a time counts only for a kernel whose answer is right.
    fn check(
        &self,
        inputs: &mut Inputs,
        reference: &ReferenceOutput,
        schedule: Schedule,
    ) -> NumericsReport {
        let stream = &self.stream;
        inputs
            .uploaded
            .restore_outputs(&inputs.problem, stream)
            .expect("restore the outputs");
        // SAFETY: as in `single_graphs`.
        unsafe {
            self.decode
                .launch_with_schedule(stream, &inputs.calls[0], schedule)
        }
        .expect("launch");
        let out = inputs
            .uploaded
            .read_outputs(&inputs.problem, stream)
            .expect("read the outputs");
        compare(reference, &out, None)
    }

    /// The GPU time of `replays` replays in microseconds, after `WARMUP` untimed ones;
    /// replay i launches `graphs[i % len]`, behind the spin, with the events around the
    /// replay only. The host queues all of them before it reads a time.
    fn time(&self, graphs: &[CudaGraph], replays: usize) -> Spread {
        let events: Vec<(CudaEvent, CudaEvent)> = (0..WARMUP + replays)
            .map(|i| {
                self.spin.enqueue(&self.stream);
                let start = event(&self.stream);
                graphs[i % graphs.len()].launch().expect("launch a graph");
                (start, event(&self.stream))
            })
            .collect();
        Spread::of(
            events[WARMUP..]
                .iter()
                .map(|(start, end)| elapsed_us(start, end))
                .collect(),
        )
    }
}

/// One measured row: a single launch of `schedule`, or a chain of it.
struct Row {
    cfg: Config,
    schedule: Schedule,
    dispatched: bool,
    /// Per launch, in microseconds.
    us: Spread,
    sets: usize,
    chain_layers: Option<usize>,
    /// Whether a single launch's output met the numerics contract ([`Bench::check`]); a
    /// chain launches the dispatched schedule, whose single launch is checked.
    output_ok: Option<bool>,
}

impl Row {
    fn gbs(&self) -> f64 {
        kv_bytes(self.cfg) as f64 / (self.us.median * 1e-6) / 1e9
    }

    fn json(&self, copy: f64) -> String {
        let Config {
            heads,
            ne,
            record,
            s_q,
        } = self.cfg;
        let chain = self
            .chain_layers
            .map_or(String::new(), |n| format!(",\"chain_layers\":{n}"));
        let checked = self
            .output_ok
            .map_or(String::new(), |ok| format!(",\"output_ok\":{ok}"));
        format!(
            "{{\"heads\":{heads},\"nk\":{NK},\"ne\":{ne},\"record\":\"{}\",\"s_q\":{s_q},\
             \"schedule\":\"{}\",\"dispatched\":{}{chain}{checked},\"kernel_us\":{:.3},\"p10_us\":{:.3},\
             \"p90_us\":{:.3},\"kv_bytes\":{},\"copy_gbs\":{:.1},\"sets\":{}}}",
            record.short_name(),
            self.schedule.short_name(),
            self.dispatched,
            self.us.median,
            self.us.p10,
            self.us.p90,
            kv_bytes(self.cfg),
            copy / 1e9,
            self.sets
        )
    }

    /// The configuration's columns of both printed tables.
    fn prefix(&self) -> String {
        let Config {
            heads,
            ne,
            record,
            s_q,
        } = self.cfg;
        format!(
            "{heads:>5} {ne:>5} {:>6} {s_q:>5} {:>8} {:>10.1} {:>8.1} {:>8.1}",
            record.short_name(),
            self.schedule.short_name(),
            self.us.median,
            self.us.p10,
            self.us.p90
        )
    }
}

/// Times both schedules of `cfg` and, when `chain`, its chain, printing the single launches
/// as they come; returns their rows, the chain's last.
fn run_config(bench: &Bench, cfg: Config, chain: bool, copy: f64, rng: &mut Rng) -> Vec<Row> {
    let rotation = ROTATION_BYTES.div_ceil(kv_bytes(cfg)).clamp(1, MAX_SETS);
    let sets = if chain {
        rotation.max(CHAIN_LAYERS)
    } else {
        rotation
    };
    let mut inputs = Inputs::upload(cfg, sets, &bench.stream, rng);
    let reference = reference(&inputs.problem).expect("the benchmark's problem has a reference");
    let dispatched = inputs.calls[0]
        .check(bench.decode.gpu())
        .expect("valid call")
        .key;
    let mut rows = Vec::new();
    for schedule in Schedule::candidates() {
        let key = dispatched.with_schedule(schedule);
        if key.validate().is_err() || bench.schedule.is_some_and(|s| s != schedule) {
            continue;
        }
        bench.decode.kernel(&key).expect("compile");
        let graphs = bench.single_graphs(&inputs.calls[..rotation], schedule);
        let us = bench.time(&graphs, bench.replays);
        let report = bench.check(&mut inputs, &reference, schedule);
        if !report.ok() {
            eprintln!("{} {}: {report}", cfg.name(), schedule.short_name());
        }
        let row = Row {
            cfg,
            schedule,
            dispatched: schedule == dispatched.schedule,
            us,
            sets: rotation,
            chain_layers: None,
            output_ok: Some(report.ok()),
        };
        println!(
            "{} {:>10.1} {:>9.0} {:>7.1}% {:>6}",
            row.prefix(),
            kv_bytes(cfg) as f64 / 1e6,
            row.gbs(),
            100.0 * row.gbs() * 1e9 / copy,
            if report.ok() { "ok" } else { "WRONG" }
        );
        rows.push(row);
    }
    if chain {
        let graphs = bench.chain_graphs(&inputs.calls);
        rows.push(Row {
            cfg,
            schedule: dispatched.schedule,
            dispatched: true,
            us: bench
                .time(&graphs, bench.chain_replays)
                .divided(CHAIN_LAYERS as f64),
            sets: graphs.len() * CHAIN_LAYERS,
            chain_layers: Some(CHAIN_LAYERS),
            output_ok: None,
        });
    }
    rows
}

/// The chains' block: per-layer times beside the single launch of the same schedule.
fn print_chains(rows: &[Row]) {
    println!(
        "\n{CHAIN_LAYERS}-layer chains: one graph of {CHAIN_LAYERS} PDL launches of the \
         dispatched schedule, time per layer (graph time / {CHAIN_LAYERS})"
    );
    println!(
        "{:>5} {:>5} {:>6} {:>5} {:>8} {:>10} {:>8} {:>8} {:>10} {:>10}",
        "heads",
        "NE",
        "extra",
        "s_q",
        "schedule",
        "layer us",
        "p10 us",
        "p90 us",
        "graph us",
        "of single"
    );
    for chain in rows.iter().filter(|r| r.chain_layers.is_some()) {
        let single = rows
            .iter()
            .find(|r| r.chain_layers.is_none() && r.dispatched && r.cfg == chain.cfg);
        println!(
            "{} {:>10.1} {:>10}",
            chain.prefix(),
            chain.us.median * CHAIN_LAYERS as f64,
            single.map_or("-".into(), |s| format!(
                "{:.2}x",
                chain.us.median / s.us.median
            ))
        );
    }
}

/// The results file, created before the measurements so that a bad path fails at once.
fn results_file(path: Option<&str>) -> Option<File> {
    path.map(|p| {
        File::create(p).unwrap_or_else(|e| {
            eprintln!("error: cannot create the results file {p}: {e}");
            std::process::exit(2)
        })
    })
}

fn main() {
    let options = parse_options(std::env::args().skip(1)).unwrap_or_else(|e| {
        eprintln!("error: {e}\n{USAGE}");
        std::process::exit(2)
    });
    if options.help {
        println!("{USAGE}");
        return;
    }
    if !jit::gpu_available() {
        eprintln!("bench_decode needs an NVIDIA GPU with a CUDA driver; none was found");
        std::process::exit(2);
    }
    let mut out = results_file(options.out.as_deref());
    let device = Arc::new(Device::open(0).expect("open device 0"));
    let decode = SwapAbDecode::new(device.clone()).expect("a device with a kestrel target");
    let stream = device.stream().clone();
    let info = device.info();
    let copy = copy_bandwidth(&stream);
    let spin = Spin::calibrated(&device, &stream);
    println!(
        "device: {} (compute capability {}.{}), copy bandwidth {:.0} GB/s (read + write); \
         spin ahead of each replay: {} steps, {SPIN_US:.0} us at the calibration's fastest clock",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        copy / 1e9,
        spin.steps
    );
    // Which launches of clusters take a second round: dispatch counts rounds with these.
    let held: Vec<String> = (1..=MAX_CLUSTER)
        .filter_map(|ctas| Some(format!("{ctas}: {}", decode.gpu().ctas_at_once(ctas)?)))
        .collect();
    println!(
        "CTAs of clusters of n at once (n: CTAs; of {} SMs): {}",
        info.sm_count,
        held.join(", ")
    );
    let bench = Bench {
        decode,
        stream,
        spin,
        replays: if options.quick { 5 } else { 200 },
        chain_replays: if options.quick { 5 } else { 50 },
        schedule: options.schedule,
    };
    println!(
        "{:>5} {:>5} {:>6} {:>5} {:>8} {:>10} {:>8} {:>8} {:>10} {:>9} {:>8} {:>6}",
        "heads",
        "NE",
        "extra",
        "s_q",
        "schedule",
        "median us",
        "p10 us",
        "p90 us",
        "KV MB",
        "KV GB/s",
        "of copy",
        "output"
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut rows = Vec::new();
    for (index, cfg) in Config::all(&options.tokens).into_iter().enumerate() {
        if !options.part.holds(index) || options.only.as_ref().is_some_and(|o| *o != cfg.name()) {
            continue;
        }
        // A chain launches the dispatched schedule: `--schedule` leaves chains out.
        let chain = options.chain && options.schedule.is_none() && cfg.chained();
        for row in run_config(&bench, cfg, chain, copy, &mut rng) {
            if let Some(f) = out.as_mut() {
                writeln!(f, "{}", row.json(copy)).expect("write the results file");
            }
            rows.push(row);
        }
    }
    if rows.iter().any(|r| r.chain_layers.is_some()) {
        print_chains(&rows);
    }
    let wrong: Vec<String> = rows
        .iter()
        .filter(|r| r.output_ok == Some(false))
        .map(|r| format!("{} {}", r.cfg.name(), r.schedule.short_name()))
        .collect();
    if !wrong.is_empty() {
        eprintln!(
            "error: outputs outside the numerics contract (reports above), their times \
             mean nothing: {}",
            wrong.join("; ")
        );
        std::process::exit(1);
    }
}
