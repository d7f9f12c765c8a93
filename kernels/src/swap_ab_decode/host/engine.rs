//! Running the decode kernel on a [`DecodeProblem`]: in the CPU interpreter (any machine) or
//! on a GPU through the host API. Both return the output buffers as the kernel left them
//! and, with the debug entry point, the fp32 output before the MXFP8 cast.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use dsl_core::Target;
use dsl_core::interp::{self, Arg, BufferId, InterpError, Launch, Memory, Options, Program};
use dsl_core::jit::{Device, JitError};
use dsl_core::trace::TraceError;

use super::launch::{
    CompileMode, DecodeArgs, DecodeError, DeviceTensor, SwapAbDecode, check_softmax_scale,
};
use super::problem::{DecodeProblem, SlotList};
use crate::swap_ab_decode::cache::PagedCache;
use crate::swap_ab_decode::output::OutputBuffers;
use crate::swap_ab_decode::query::{self, CHUNK};
use crate::swap_ab_decode::{CompileKey, HEAD_DIM, LOG2E, ROPE_DIM, trace_entry};

/// Which engine ran the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineKind {
    Interpreter,
    Gpu,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Interpreter => "interpreter",
            EngineKind::Gpu => "gpu",
        }
    }
}

/// What one run of the kernel produced.
#[derive(Clone, Debug)]
pub struct EngineRun {
    pub engine: EngineKind,
    pub key: CompileKey,
    /// The output tensors as the kernel left them (poison where it wrote nothing).
    pub out: OutputBuffers,
    /// `[s_q, heads, 512]` fp32 before the cast, from the debug entry point.
    pub precast: Option<Vec<f32>>,
    /// Wall time of the run (interpreter) or of the launch to the read-back (GPU).
    pub seconds: f64,
    /// Instructions the interpreter executed, counted per active lane.
    pub lane_instructions: Option<u64>,
    /// What the interpreter's debug hooks recorded (empty on the GPU).
    pub trace: Vec<interp::TraceEntry>,
    pub snapshots: Vec<interp::Snapshot>,
    /// With [`interp::Options::shared_wavefronts`]: the shared-memory wavefronts of each
    /// load and store (empty on the GPU).
    pub shared_accesses: Vec<interp::SharedAccess>,
}

/// Why a run failed. Every variant only wraps its cause, so its message and `source()` are
/// the cause's own (an error chain prints each message once).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Interp(#[from] InterpError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(transparent)]
    Jit(#[from] JitError),
    #[error(transparent)]
    Driver(#[from] cudarc::driver::DriverError),
    #[error(
        "the problem's key {problem} does not match the key {launched} that its buffers give \
         on this device: build the problem for the device's target"
    )]
    KeyMismatch {
        problem: Box<CompileKey>,
        launched: Box<CompileKey>,
    },
}

fn key_for(problem: &DecodeProblem, target: Target) -> CompileKey {
    CompileKey {
        target,
        ..problem.key
    }
}

/// Buffer sizes are never zero: a zero-width list still needs an address.
fn nonempty<T: Copy + Default>(v: &[T]) -> Vec<T> {
    if v.is_empty() {
        vec![T::default()]
    } else {
        v.to_vec()
    }
}

fn cache_arg(mem: &mut Memory, name: &str, cache: &PagedCache) -> Arg {
    let id = mem.alloc_from(name, &nonempty(&cache.bytes));
    let record = cache.record_bytes() as i64;
    Arg::tensor(
        id,
        &[cache.num_blocks as i64, cache.page as i64, record],
        &[cache.block_stride as i64, record, 1],
    )
}

/// The SMs the interpreter's grid is sized for: few, so that a persistent grid
/// ([`CompileKey::grid`]) walks its CTAs through several tokens in every case of more than
/// three tokens, as a GPU of 132 SMs (H100, H200) does from 133 tokens on.
pub const INTERPRETER_SMS: usize = 3;

fn slot_args(mem: &mut Memory, name: &str, list: &SlotList) -> (Arg, Arg) {
    let ids = mem.alloc_from(&format!("{name}_idx"), &nonempty(&list.ids));
    let lens = mem.alloc_from(&format!("{name}_len"), &nonempty(&list.lens));
    (
        Arg::tensor(
            ids,
            &[list.rows as i64, list.width as i64],
            &[list.row_stride as i64, 1],
        ),
        Arg::contiguous(lens, &[list.lens.len() as i64]),
    )
}

/// Runs the problem in the CPU interpreter for `target` (sm_100a or sm_90a: both paths of
/// the kernel run here). With `precast`, the debug entry point also captures the fp32
/// output before the cast.
pub fn interpret(
    problem: &DecodeProblem,
    target: Target,
    precast: bool,
    options: &Options,
) -> Result<EngineRun, EngineError> {
    let key = key_for(problem, target);
    let kernel = trace_entry(&key, precast)?;
    interpret_kernel(&kernel, problem, precast, options)
}

/// Runs an already traced decode kernel (e.g. one a test mutated) on `problem`; `precast`
/// says whether it is the debug entry point.
pub fn interpret_kernel(
    kernel: &dsl_core::ir::Kernel,
    problem: &DecodeProblem,
    precast: bool,
    options: &Options,
) -> Result<EngineRun, EngineError> {
    let key = key_for(problem, kernel.target);
    check_softmax_scale(problem.softmax_scale).map_err(EngineError::Decode)?;
    let program = Program::compile(kernel)?;
    let mut mem = Memory::new();
    let q = &problem.q;
    let q_id = mem.alloc_from("q", &q.data);
    let mut args = vec![Arg::tensor(
        q_id,
        &[q.s_q as i64, q.padded_heads as i64, HEAD_DIM as i64],
        &[q.token_stride as i64, HEAD_DIM as i64, 1],
    )];
    args.push(cache_arg(&mut mem, "swa_cache", &problem.swa_cache));
    let (swa_idx, swa_len) = slot_args(&mut mem, "swa", &problem.swa);
    args.extend([swa_idx, swa_len]);
    args.push(cache_arg(&mut mem, "extra_cache", &problem.extra_cache));
    let (extra_idx, extra_len) = slot_args(&mut mem, "extra", &problem.extra);
    args.extend([extra_idx, extra_len]);
    let positions = mem.alloc_from("positions", &problem.positions);
    args.push(Arg::contiguous(
        positions,
        &[problem.positions.len() as i64],
    ));
    let cos_sin = mem.alloc_from("cos_sin", &problem.cos_sin);
    args.push(Arg::tensor(
        cos_sin,
        &[problem.max_pos() as i64, ROPE_DIM as i64],
        &[problem.cos_sin_stride as i64, 1],
    ));
    let sink = mem.alloc_from("sink", &problem.sink);
    args.push(Arg::contiguous(sink, &[problem.sink.len() as i64]));
    let out = &problem.out;
    let layout = &out.layout;
    let data = mem.alloc_from("out_data", &out.data);
    args.push(Arg::tensor(
        data,
        &[layout.s_q as i64, layout.groups as i64, 4096],
        &[
            layout.data_strides[0] as i64,
            layout.data_strides[1] as i64,
            1,
        ],
    ));
    let scale = mem.alloc_from("out_scale", &out.scale);
    args.push(Arg::tensor(
        scale,
        &[layout.s_q as i64, layout.groups as i64, 32],
        &layout.scale_strides.map(|s| s as i64),
    ));
    args.push(Arg::F32((problem.softmax_scale as f64 * LOG2E) as f32));
    let heads = key.heads;
    let precast_id: Option<BufferId> = precast.then(|| {
        let id = mem.alloc_from("precast", &vec![f32::NAN; q.s_q * heads * HEAD_DIM]);
        args.push(Arg::contiguous(
            id,
            &[q.s_q as i64, heads as i64, HEAD_DIM as i64],
        ));
        id
    });
    let launch = Launch::grid(key.grid(q.s_q, INTERPRETER_SMS));
    let stats = program.run(&mut mem, &args, &launch, options)?;
    Ok(EngineRun {
        engine: EngineKind::Interpreter,
        key,
        out: OutputBuffers {
            layout: out.layout,
            data: mem.read(data),
            scale: mem.read(scale),
        },
        precast: precast_id.map(|id| mem.read(id)),
        seconds: stats.wall.as_secs_f64(),
        lane_instructions: Some(stats.lane_instructions),
        trace: stats.trace,
        snapshots: stats.snapshots,
        shared_accesses: stats.shared_accesses,
    })
}

/// The problem's buffers on a GPU, with the [`DecodeArgs`] that address them.
pub struct DeviceProblem {
    pub args: DecodeArgs,
    /// Keeps the device buffers alive.
    pub buffers: Vec<CudaSlice<u8>>,
    out_data: usize,
    out_scale: usize,
}

/// The bytes of `values` as the device holds them.
fn host_bytes<T: Copy>(values: &[T]) -> &[u8] {
    // SAFETY: T is a plain numeric type; its bytes are read, not reinterpreted back.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

fn upload<T: Copy>(stream: &Arc<CudaStream>, values: &[T]) -> Result<CudaSlice<u8>, EngineError> {
    if values.is_empty() {
        return Ok(stream.clone_htod(&[0u8; 16])?);
    }
    Ok(stream.clone_htod(host_bytes(values))?)
}

impl DeviceProblem {
    /// Copies `problem`'s inputs and output buffers to the device of `stream`.
    pub fn upload(problem: &DecodeProblem, stream: &Arc<CudaStream>) -> Result<Self, EngineError> {
        let mut buffers = Vec::new();
        let mut put = |bytes: CudaSlice<u8>| -> u64 {
            let ptr = bytes.device_ptr(stream).0;
            buffers.push(bytes);
            ptr
        };
        let q = &problem.q;
        let q_ptr = put(upload(stream, &q.data)?);
        let cache = |ptr: u64, c: &PagedCache| {
            DeviceTensor::new::<u8>(
                ptr,
                &[c.num_blocks, c.page, c.record_bytes()],
                &[c.block_stride, c.record_bytes(), 1],
            )
        };
        let swa_cache = cache(
            put(upload(stream, &problem.swa_cache.bytes)?),
            &problem.swa_cache,
        );
        let swa_idx = put(upload(stream, &problem.swa.ids)?);
        let swa_len = put(upload(stream, &problem.swa.lens)?);
        let extra_cache = cache(
            put(upload(stream, &problem.extra_cache.bytes)?),
            &problem.extra_cache,
        );
        let extra_idx = put(upload(stream, &problem.extra.ids)?);
        let extra_len = put(upload(stream, &problem.extra.lens)?);
        let positions = put(upload(stream, &problem.positions)?);
        let cos_sin = put(upload(stream, &problem.cos_sin)?);
        let sink = put(upload(stream, &problem.sink)?);
        let layout = problem.out.layout;
        let out_data_ptr = put(upload(stream, &problem.out.data)?);
        let out_scale_ptr = put(upload(stream, &problem.out.scale)?);
        let list = |ptr: u64, l: &SlotList| {
            DeviceTensor::new::<i32>(ptr, &[l.rows, l.width], &[l.row_stride, 1])
        };
        let args = DecodeArgs {
            q: DeviceTensor::new::<half::bf16>(
                q_ptr,
                &[q.s_q, HEAD_DIM / CHUNK, q.padded_heads, CHUNK],
                &query::described_strides(&q.layout()),
            ),
            swa_cache,
            swa_idx: list(swa_idx, &problem.swa),
            swa_len: DeviceTensor::contiguous::<i32>(swa_len, &[problem.swa.lens.len()]),
            extra_cache,
            extra_idx: list(extra_idx, &problem.extra),
            extra_len: DeviceTensor::contiguous::<i32>(extra_len, &[problem.extra.lens.len()]),
            positions: DeviceTensor::contiguous::<i64>(positions, &[problem.positions.len()]),
            cos_sin: DeviceTensor::new::<f32>(
                cos_sin,
                &[problem.max_pos(), ROPE_DIM],
                &[problem.cos_sin_stride, 1],
            ),
            sink: DeviceTensor::contiguous::<f32>(sink, &[problem.sink.len()]),
            out_data: DeviceTensor::new::<u8>(
                out_data_ptr,
                &[layout.s_q, layout.groups, 4096],
                &[layout.data_strides[0], layout.data_strides[1], 1],
            ),
            out_scale: DeviceTensor::new::<i32>(
                out_scale_ptr,
                &[layout.s_q, layout.groups, 32],
                &layout.scale_strides,
            ),
            heads: problem.heads(),
            softmax_scale: problem.softmax_scale,
        };
        let n = buffers.len();
        Ok(DeviceProblem {
            args,
            buffers,
            out_data: n - 2,
            out_scale: n - 1,
        })
    }

    /// Puts `problem`'s initial output bytes back over the device's output buffers, so that
    /// the next launch's output is its own: a launch that writes nothing then leaves the
    /// initial bytes, not an earlier launch's answer.
    ///
    /// ```no_run
    /// use kernels::swap_ab_decode::engine::DeviceProblem;
    /// use kernels::swap_ab_decode::{CaseSpec, SwapAbDecode, generate, realistic_keys};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let device = std::sync::Arc::new(dsl_core::jit::Device::open(0)?);
    /// let stream = device.stream();
    /// let key = realistic_keys(dsl_core::Target::Sm90a)[0];
    /// let case = generate(7, &CaseSpec { key, s_q: 4, adversarial: false })?;
    /// let mut uploaded = DeviceProblem::upload(&case.problem, stream)?;
    /// let decode = SwapAbDecode::new(device.clone())?;
    /// // SAFETY: the uploaded buffers outlive the launch, which the read-back waits for.
    /// unsafe { decode.launch(stream, &uploaded.args) }?;
    /// uploaded.restore_outputs(&case.problem, stream)?;
    /// assert_eq!(uploaded.read_outputs(&case.problem, stream)?, case.problem.out);
    /// # Ok(())
    /// # }
    /// ```
    pub fn restore_outputs(
        &mut self,
        problem: &DecodeProblem,
        stream: &Arc<CudaStream>,
    ) -> Result<(), EngineError> {
        let out = &problem.out;
        stream.memcpy_htod(host_bytes(&out.data), &mut self.buffers[self.out_data])?;
        stream.memcpy_htod(host_bytes(&out.scale), &mut self.buffers[self.out_scale])?;
        Ok(())
    }

    /// The output buffers as they are on the device now.
    pub fn read_outputs(
        &self,
        problem: &DecodeProblem,
        stream: &Arc<CudaStream>,
    ) -> Result<OutputBuffers, EngineError> {
        let data = stream.clone_dtoh(&self.buffers[self.out_data])?;
        let scale_bytes = stream.clone_dtoh(&self.buffers[self.out_scale])?;
        let scale = scale_bytes
            .chunks_exact(4)
            .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        Ok(OutputBuffers {
            layout: problem.out.layout,
            data,
            scale,
        })
    }
}

/// Runs the problem's own key on `device` through the host API (the production entry
/// point, or the debug one with `precast`; its schedule pinned, so that a test of a key
/// runs that key whatever [`dispatch`] would pick for its token count), waits, and reads
/// the outputs back; `sm_budget` sizes a persistent grid to fewer SMs than the device's
/// ([`SwapAbDecode::with_sm_budget`]).
///
/// [`dispatch`]: crate::swap_ab_decode::dispatch()
pub fn run_gpu(
    device: &Arc<Device>,
    problem: &DecodeProblem,
    precast: bool,
    sm_budget: Option<usize>,
) -> Result<EngineRun, EngineError> {
    // A tool runs one-off shapes: compile the key here rather than refuse it.
    let mut decode = SwapAbDecode::new(device.clone())?.with_mode(CompileMode::OnDemand);
    if let Some(sms) = sm_budget {
        decode = decode.with_sm_budget(sms)?;
    }
    let stream = device.stream();
    let uploaded = DeviceProblem::upload(problem, stream)?;
    let heads = problem.heads();
    let s_q = problem.s_q();
    let precast_buf = if precast {
        Some(stream.clone_htod(&vec![f32::NAN; s_q * heads * HEAD_DIM])?)
    } else {
        None
    };
    let schedule = problem.key.schedule;
    let launched = uploaded
        .args
        .check(decode.gpu())?
        .with_schedule(schedule)
        .map_err(DecodeError::from)?
        .key;
    if launched != problem.key {
        return Err(EngineError::KeyMismatch {
            problem: Box::new(problem.key),
            launched: Box::new(launched),
        });
    }
    stream.synchronize()?;
    let start = Instant::now();
    let call = match &precast_buf {
        Some(buf) => {
            let tensor =
                DeviceTensor::contiguous::<f32>(buf.device_ptr(stream).0, &[s_q, heads, HEAD_DIM]);
            // SAFETY: every tensor addresses a live buffer of its shape (uploaded above).
            unsafe { decode.launch_debug(stream, &uploaded.args, &tensor, Some(schedule))? }
        }
        // SAFETY: as above.
        None => unsafe { decode.launch_with_schedule(stream, &uploaded.args, schedule)? },
    };
    stream.synchronize()?;
    let seconds = start.elapsed().as_secs_f64();
    let out = uploaded.read_outputs(problem, stream)?;
    let precast = match &precast_buf {
        Some(buf) => Some(stream.clone_dtoh(buf)?),
        None => None,
    };
    Ok(EngineRun {
        engine: EngineKind::Gpu,
        key: call.key,
        out,
        precast,
        seconds,
        lane_instructions: None,
        trace: Vec::new(),
        snapshots: Vec::new(),
        shared_accesses: Vec::new(),
    })
}
