use dsl_core::Target;
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::thread::{shfl_xor, thread_idx_x};
use dsl_core::ir::SourceLoc;
use dsl_core::trace::control::{branch, for_loop};
use dsl_core::trace::{KernelParam, Tensor, Val, dyn_range, stage, threads, trace_kernel};

#[test]
fn traces_and_emits() {
    for target in Target::ALL {
        let k = trace_kernel("smoke", target, || {
            threads(128, 1, 1);
            let x = Tensor::<f32, 1>::declare("x");
            let n = Val::<u32>::declare("n");
            stage("1: load");
            let tid = thread_idx_x();
            let v: Val<f32> = load(x.base() + tid.mul_wide(4).bitcast::<i64>());
            let mut acc = v;
            let loc = SourceLoc::caller();
            (acc, ()) = branch(tid.lt(n), acc, &["acc"], loc, |arm, mut acc| {
                if arm {
                    acc *= 2.0;
                }
                (acc, ())
            });
            let acc = for_loop(dyn_range(0u32, n), acc, &["acc"], loc, |_i, acc| acc + 1.0);
            let red = acc + shfl_xor(acc, 1);
            store(x.base() + tid.mul_wide(4).bitcast::<i64>(), red);
        })
        .unwrap();
        let m = dsl_core::emit::ptx::emit(&k).unwrap();
        println!("{}", m.text);
    }
}

#[test]
fn assembles() {
    let target = Target::Sm90a;
    let k = trace_kernel("smoke2", target, || {
        threads(128, 1, 1);
        let x = Tensor::<f32, 1>::declare("x");
        let tid = thread_idx_x();
        let v: Val<f32> = load(x.base() + tid.mul_wide(4).bitcast::<i64>());
        let red = v + shfl_xor(v, 1);
        store(x.base() + tid.mul_wide(4).bitcast::<i64>(), red);
    })
    .unwrap();
    let m = dsl_core::emit::ptx::emit(&k).unwrap();
    let r = dsl_core::ptxas::assemble(&m).unwrap();
    println!("{r:?}");
}

#[test]
fn smem_bytes_free_is_the_limit_less_the_buffers_and_the_alignment() {
    use dsl_core::trace::{smem_alloc, smem_bytes_free};
    for target in Target::ALL {
        trace_kernel("smem_free", target, || {
            threads(32, 1, 1);
            let limit = target.max_smem_bytes();
            assert_eq!(smem_bytes_free(16), limit);
            smem_alloc("a", 100, 16);
            assert_eq!(smem_bytes_free(4), limit - 100);
            assert_eq!(smem_bytes_free(128), limit - 128);
            smem_alloc("b", limit - 128, 128);
            assert_eq!(smem_bytes_free(16), 0);
        })
        .unwrap();
    }
}
