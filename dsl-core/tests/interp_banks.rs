//! The interpreter's shared-memory wavefront counts (`Options::shared_wavefronts`): one warp's
//! loads and stores with known bank patterns, each in its own stage, come back in program
//! order with the wavefronts Nsight Compute would count.

use dsl_core::Target;
use dsl_core::arch::memory::{load, store, store_vec_if};
use dsl_core::arch::sync::sync_threads;
use dsl_core::arch::thread::thread_idx_x;
use dsl_core::interp::{Arg, Launch, Memory, Options, SharedAccess, run_with};
use dsl_core::trace::{KernelParam, Tensor, Val, smem_alloc, stage, threads, trace_kernel};

fn accesses(options: &Options) -> Vec<SharedAccess> {
    let kernel = trace_kernel("banks", Target::Sm90a, || {
        threads(32, 1, 1);
        let out = Tensor::<u32, 1>::declare("out");
        let buf = smem_alloc("buf", 32 * 132, 16);
        let tid = thread_idx_x();
        stage("a: rows of 32 words");
        store(buf.addr() + tid * 128u32, tid);
        stage("b: rows of 33 words");
        store(buf.addr() + tid * 132u32, tid);
        sync_threads();
        stage("c: one word for every lane");
        let v: Val<u32> = load(buf.addr());
        stage("d: half a warp of 16-byte vectors");
        store_vec_if(buf.addr() + tid * 16u32, [v; 4], tid.lt(16u32));
        store(out.base() + tid.mul_wide(4), v);
    })
    .unwrap();
    let mut mem = Memory::new();
    let out = mem.alloc("out", 32 * 4);
    let stats = run_with(
        &kernel,
        &mut mem,
        &[Arg::contiguous(out, &[32])],
        &Launch::grid([1, 1, 1]),
        options,
    )
    .unwrap();
    stats.shared_accesses
}

#[test]
fn each_shared_access_counts_its_wavefronts_and_ideal() {
    let counted = accesses(&Options {
        shared_wavefronts: true,
        ..Options::default()
    });
    let rows: Vec<(&str, &str, u32, u64, u64, u64)> = counted
        .iter()
        .map(|a| {
            let stage = a.stage.as_deref().unwrap_or("-");
            (stage, a.op, a.bytes, a.executions, a.wavefronts, a.ideal)
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("a: rows of 32 words", "st.shared", 4, 1, 32, 1),
            ("b: rows of 33 words", "st.shared", 4, 1, 1, 1),
            ("c: one word for every lane", "ld.shared", 4, 1, 1, 1),
            (
                "d: half a warp of 16-byte vectors",
                "st.shared",
                16,
                1,
                2,
                2
            ),
        ]
    );
    assert_eq!(counted[0].excessive(), 31);
}

#[test]
fn nothing_is_counted_unless_asked() {
    assert!(accesses(&Options::default()).is_empty());
}
