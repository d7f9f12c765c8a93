//! kestrel: a CuTe-style kernel DSL in Rust that traces to PTX.
//!
//! Kernel authors write GPU kernels as ordinary Rust functions marked [`#[kernel]`](kernel).
//! Calling such a function *traces* it: plain Rust values (integers, bools, the compile key,
//! layouts) are compile-time constants and fold away, while DSL values
//! ([`Val<T>`](dsl_core::trace::Val), [`Pred`](dsl_core::trace::Pred)) are registers and
//! become instructions. The trace is a small typed IR ([`core::ir::Kernel`]) that is printed
//! as PTX for Blackwell (`sm_100a`: tcgen05 and tensor memory) or Hopper (`sm_90a`: wgmma),
//! loaded and launched through the CUDA driver, or run on the CPU by an interpreter that
//! checks every access.
//!
//! ```
//! use dsl_core::Target;
//! use dsl_core::arch::memory::{load, store};
//! use dsl_core::arch::thread::thread_idx_x;
//! use dsl_core::interp::{Arg, Launch, Memory, run};
//! use dsl_core::trace::{Tensor, Val, threads};
//! use dsl_macros::kernel;
//!
//! /// x[i] = x[i] * factor for the 32 threads of one warp; `factor` is baked into the PTX.
//! #[kernel]
//! fn scale(#[comptime] factor: f32, x: Tensor<f32, 1>) {
//!     threads(32, 1, 1);
//!     let at = x.base() + thread_idx_x().mul_wide(4);
//!     let v: Val<f32> = load(at);
//!     store(at, v * factor);
//! }
//!
//! // Trace for a target and a compile-time argument: the IR of one kernel.
//! let kernel = scale(Target::Sm100a, 3.0)?;
//! // Print it as PTX (3.0 is the immediate 0f40400000)...
//! let ptx = dsl_core::emit::ptx::emit(&kernel)?.text;
//! assert!(ptx.contains(".target sm_100a") && ptx.contains("0f40400000"));
//! // ...or run it on the CPU.
//! let mut mem = Memory::new();
//! let x = mem.alloc_from("x", &(0..32).map(|i| i as f32).collect::<Vec<_>>());
//! run(&kernel, &mut mem, &[Arg::contiguous(x, &[32])], &Launch::grid([1, 1, 1]))?;
//! assert_eq!(mem.read::<f32>(x)[5], 15.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # The guide
//!
//! [`guide`] is the kernel author's guide, a chapter a module; every example in it is a
//! test that traces, prints or runs a kernel and checks the result.
//!
//! 1. [The tracing model](guide::tracing): compile time and run time, what `#[kernel]`
//!    generates, `#[comptime]` arguments, `#[device]` helpers, stages, reading the PTX.
//! 2. [Control flow](guide::control_flow): `if` on a `bool` or a `Pred`, merges, runtime
//!    loops, `&&` and `||`, the hazards, `#[derive(Carry)]`.
//! 3. [Memory](guide::memory): tensors, addresses with trace-time offsets, predicated
//!    loads, shared memory.
//! 4. [Layouts and swizzles](guide::layouts): `Layout`, `Swizzle`, `ComposedLayout`,
//!    `SmemTile` addresses, `displacement`.
//! 5. [MMA operands and descriptors](guide::mma_operands): canonical K- and MN-major
//!    layouts, `SmemOperand`, instruction descriptors, stepping K, the checked MMA atoms.
//! 6. [Tensor cores](guide::tensor_cores): tensor memory and tcgen05 on `sm_100a`, wgmma on
//!    `sm_90a`.
//! 7. [Synchronisation](guide::synchronisation): mbarriers, clusters and distributed shared
//!    memory, programmatic dependent launch.
//! 8. [Running kernels](guide::running): the interpreter and what it checks, the JIT,
//!    `ptxas`, snapshots.
//! 9. [Writing a variant](guide::variants): how the decode kernel is organised and how to
//!    add a variant that reuses its stages.
//! 10. [What errors look like](guide::errors): trace errors with the author's line and
//!     stage, compile errors, interpreter faults.
//! 11. [Tensors and partitioning](guide::tensors): `Tensor<E, Engine>` over global, shared,
//!     tensor memory and registers; `slice`, `local_tile`, `local_partition`, `at`;
//!     vectorised copies; tiled-MMA partitioning for wgmma and tcgen05.
//! 12. [Copies and TMA](guide::copies): `cp.async`, bulk copies completing on mbarriers,
//!     tensor maps on the host and TMA loads, multicast and stores in the kernel, and what
//!     the interpreter checks.
//! 13. [Pipelines](guide::pipelines): `TmaPipeline` and `PipelineState`, the producer and
//!     consumer protocol, the tcgen05 flavour, misuse and deadlock reports.
//! 14. [Warp specialisation](guide::warp_specialisation): roles, register budgets, named
//!     barriers, persistent tiles, and the GEMM (`kernels::gemm`) walked through.
//!
//! # Crates
//!
//! | crate | re-exported as | what it holds |
//! | --- | --- | --- |
//! | `dsl-core` | [`kestrel::core`](crate::core) | the IR, tracing, layouts, the op set, the PTX printer, the interpreter, the JIT |
//! | `dsl-macros` | [`kernel`], [`device`], [`Carry`] | the attribute and derive macros |
//! | `kernels` | [`kestrel::kernels`](crate::kernels) | the five basic kernels and the SwapAB decode kernel with its host API |

pub use dsl_core as core;
pub use dsl_macros::{Carry, device, kernel};
pub use kernels;

pub mod guide {
    //! The kernel author's guide. Read the chapters in order; each builds on the one before.
    //!
    //! The examples use the paths the project's own kernels use (`kernels/` depends on
    //! `dsl-core` and `dsl-macros` directly): `dsl_core::..` for the DSL and
    //! `dsl_macros::kernel`. [The tracing model](tracing#outside-this-workspace) says what
    //! changes for a crate that depends on `kestrel` alone.

    #[doc = include_str!("guide/tracing.md")]
    pub mod tracing {}

    #[doc = include_str!("guide/control_flow.md")]
    pub mod control_flow {}

    #[doc = include_str!("guide/memory.md")]
    pub mod memory {}

    #[doc = include_str!("guide/layouts.md")]
    pub mod layouts {}

    #[doc = include_str!("guide/mma_operands.md")]
    pub mod mma_operands {}

    #[doc = include_str!("guide/tensor_cores.md")]
    pub mod tensor_cores {}

    #[doc = include_str!("guide/synchronisation.md")]
    pub mod synchronisation {}

    #[doc = include_str!("guide/running.md")]
    pub mod running {}

    #[doc = include_str!("guide/variants.md")]
    pub mod variants {}

    #[doc = include_str!("guide/errors.md")]
    pub mod errors {}

    #[doc = include_str!("guide/tensors.md")]
    pub mod tensors {}

    #[doc = include_str!("guide/copies.md")]
    pub mod copies {}

    #[doc = include_str!("guide/pipelines.md")]
    pub mod pipelines {}

    #[doc = include_str!("guide/warp_specialisation.md")]
    pub mod warp_specialisation {}
}

/// The README's Rust excerpts, compiled with the doctests so that they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
