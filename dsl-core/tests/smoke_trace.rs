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

/// Unsigned division and remainder by a power of two trace as a shift and a mask (ptxas
/// assembles `div.u32 x, 2` as a division by a register); signed ones and other divisors
/// stay divisions. Each gives Rust's answer in the interpreter, at the edges of the range.
#[test]
fn unsigned_division_by_a_power_of_two_is_a_shift() {
    use dsl_core::interp::{Arg, Launch, Memory, run};
    let inputs: [u32; 8] = [0, 1, 7, 8, 0x7fff_ffff, 0x8000_0005, 0xffff_fff0, u32::MAX];
    let k = trace_kernel("pow2_div", Target::Sm90a, || {
        threads(32, 1, 1);
        let data = Tensor::<u32, 1>::declare("data");
        let out = Tensor::<u32, 1>::declare("out");
        let tid = thread_idx_x();
        let x: Val<u32> = load(data.base() + tid.mul_wide(4));
        let wide = x.cast::<u64>() * 0x1_0000_0001u64;
        let results = [
            x / 8u32,
            x % 16u32,
            (wide / 4u64).cast::<u32>(),
            ((wide % 0x100_0000_0000u64) >> 8u32).cast::<u32>(),
            (x.bitcast::<i32>() / 8i32).bitcast::<u32>(),
            x / 6u32,
            x % 6u32,
        ];
        for (i, r) in results.into_iter().enumerate() {
            store(out.base() + tid.mul_wide(28) + 4 * i as i64, r);
        }
    })
    .unwrap();
    let ptx = dsl_core::emit::ptx::emit(&k).unwrap().text;
    for (spelling, count) in [
        ("div.u32", 1),
        ("rem.u32", 1),
        ("div.u64", 0),
        ("rem.u64", 0),
        ("div.s32", 1),
    ] {
        assert_eq!(ptx.matches(spelling).count(), count, "{spelling} in\n{ptx}");
    }

    let mut mem = Memory::new();
    let mut rows = inputs.to_vec();
    rows.resize(32, 12345);
    let data = mem.alloc_from("data", &rows);
    let out = mem.alloc("out", 32 * 28);
    let args = [
        Arg::contiguous(data, &[32]),
        Arg::contiguous(out, &[32 * 7]),
    ];
    run(&k, &mut mem, &args, &Launch::grid([1, 1, 1])).unwrap();
    let got = mem.read::<u32>(out);
    for (t, &x) in rows.iter().enumerate() {
        let wide = u64::from(x) * 0x1_0000_0001;
        let want = [
            x / 8,
            x % 16,
            (wide / 4) as u32,
            ((wide % 0x100_0000_0000) >> 8) as u32,
            ((x as i32) / 8) as u32,
            x / 6,
            x % 6,
        ];
        assert_eq!(got[7 * t..7 * t + 7], want, "x = {x:#x}");
    }
}
