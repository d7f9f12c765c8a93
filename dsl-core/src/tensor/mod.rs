//! Tensors: one operand type for every memory, and the partitioning that MMA atoms and
//! copies need.
//!
//! A [`Tensor<E, Engine>`](Tensor) is an engine (where the elements live) composed with a
//! [`Layout`](crate::layout::Layout) (coordinate -> element offset), with the element type
//! `E` in the type, as CuTe's `Tensor<Engine, Layout>`:
//!
//! | engine | made by | offsets | indexing gives |
//! |---|---|---|---|
//! | [`Global`] | [`trace::Tensor::view`](crate::trace::Tensor::view) of a kernel parameter | `Val<i64>`: runtime extents and strides | [`Gmem`](crate::arch::memory::Gmem) |
//! | [`Shared`] | [`SmemTile::tensor`](crate::trace::SmemTile::tensor) (swizzle included) | `Val<u32>` | [`Smem`](crate::arch::memory::Smem) |
//! | [`Tmem`] | [`Tensor::tmem`], [`Tcgen05Tiled::partition_fragment_c`] | TMEM address units | [`TmemAddr`](crate::arch::sm100::tcgen05::TmemAddr) |
//! | [`Regs`] | [`Tensor::load`], [`WgmmaThread::partition_fragment_c`] | trace-time only | registers |
//!
//! The algebra never changes the engine: [`Tensor::slice`] fixes a mode,
//! [`Tensor::local_tile`] picks a tile of a static tiler at a (runtime) tile coordinate,
//! [`Tensor::local_partition`] gives one thread's elements under a thread layout; each moves
//! the offset (a runtime part where a coordinate is a runtime value) and replaces the
//! layout. A swizzle (shared memory) acts on the whole byte offset from the tile's aligned
//! base, so a partition of a swizzled tile addresses exactly the parent's bytes.
//!
//! [`Tensor::load`], [`Tensor::store`] and [`Tensor::copy_to`] move a per-thread tensor
//! through `arch::memory`, each access as wide as both layouts allow (a run of elements
//! that the layouts make contiguous and aligned, at most 16 bytes; in a swizzled tile at
//! most one 16-byte chunk). A runtime stride is assumed unaligned unless the author
//! promises otherwise ([`Tensor::assume_aligned`]) or states it ([`crate::trace::Tensor::view`]
//! with a static stride).
//!
//! [`mma`] tiles the MMA atoms over a CTA tile and partitions A, B and C for them.
//!
//! # A GEMM tile, end to end
//!
//! C[128, 64] = A[128, 64] . B[64, 64]^T on sm_90a with two consumer warpgroups (the same
//! shape of code serves tcgen05 through [`Tcgen05Tiled`]):
//!
//! ```
//! use dsl_core::Target;
//! use dsl_core::arch::sm90::wgmma::{self, MmaF16Bf16Ss};
//! use dsl_core::arch::sync::{fence_proxy_async_shared, sync_threads};
//! use dsl_core::arch::thread::{block_idx_x, thread_idx_x};
//! use dsl_core::layout::{Layout, Major, Swizzle, canonical};
//! use dsl_core::tensor::WgmmaTiled;
//! use dsl_core::trace::{KernelParam, Tensor, smem_tile, threads, trace_kernel};
//! use half::bf16;
//!
//! let kernel = trace_kernel("gemm_tile", Target::Sm90a, || {
//!     threads(256, 1, 1);
//!     let (a, b, c) = (
//!         Tensor::<bf16, 2>::declare("a"),
//!         Tensor::<bf16, 2>::declare("b"),
//!         Tensor::<f32, 2>::declare("c"),
//!     );
//!     // Row-major operands: the K (or N) stride is 1, known to the author.
//!     let ga = a.view([None, Some(1)]).assume_aligned(8);
//!     let gb = b.view([None, Some(1)]).assume_aligned(8);
//!     let gc = c.view([None, Some(1)]).assume_aligned(2);
//!     let tid = thread_idx_x();
//!     // This CTA's tiles: row block blockIdx.x of A and C, K block 0.
//!     let ga = ga.local_tile(&[128, 64], (block_idx_x(), 0));
//!     let gb = gb.local_tile(&[64, 64], (0, 0));
//!     let gc = gc.local_tile(&[128, 64], (block_idx_x(), 0));
//!     // Swizzled shared tiles, K-major as the MMA reads them.
//!     let sa = smem_tile("a", canonical::k_major(Swizzle::B128, 128, 64, 2).unwrap()).tensor::<bf16>();
//!     let sb = smem_tile("b", canonical::k_major(Swizzle::B128, 64, 64, 2).unwrap()).tensor::<bf16>();
//!     // 256 threads, 8 along K fastest, each moving 8 consecutive bf16 (16 bytes) a step.
//!     let copier: Layout = "(32,8):(8,1)".parse().unwrap();
//!     let v = Some(&[1, 8][..]);
//!     ga.local_partition(&copier, tid, v).copy_to(&sa.local_partition(&copier, tid, v));
//!     gb.local_partition(&copier, tid, v).copy_to(&sb.local_partition(&copier, tid, v));
//!     fence_proxy_async_shared();
//!     sync_threads();
//!     // Two warpgroups stacked along M, one m64n64k16 atom each.
//!     let mma = WgmmaTiled::ss(MmaF16Bf16Ss::bf16(64, Major::K, Major::K), 2, 128, 64);
//!     let thr = mma.thread(tid);
//!     let acc = thr.partition_fragment_c();
//!     let (ta, tb) = (thr.partition_a(&sa, Major::K), thr.partition_b(&sb));
//!     wgmma::fence();
//!     thr.gemm(&acc, &ta, &tb, false);
//!     wgmma::commit_group();
//!     wgmma::wait_group(0);
//!     // Each thread's accumulator goes where the fragment layout says, two floats a store.
//!     thr.partition_c(&gc).store(&acc);
//! })
//! .unwrap();
//! let ptx = dsl_core::emit::ptx::emit(&kernel).unwrap().text;
//! assert!(ptx.contains("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"));
//! assert!(ptx.contains("st.global.v2.f32"));
//! assert!(ptx.contains("ld.global.v4.b32"));
//! ```

pub mod atoms;
mod compose;
mod copy;
mod engine;
pub mod mma;
mod view;

pub use atoms::{MatrixAtom, MatrixThread, TiledMatrix, TmemCopy};
pub use engine::{Engine, Global, MemEngine, Regs, Shared, SplitOffset, TensorInt, Tmem};
pub use mma::{Tcgen05Tiled, WgmmaOperandA, WgmmaThread, WgmmaTiled};
pub use view::{IntoCoord, Tensor};
