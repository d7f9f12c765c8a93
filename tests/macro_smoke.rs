use dsl_core::Target;
use dsl_core::arch::memory::{load, store};
use dsl_core::arch::thread::thread_idx_x;
use dsl_core::trace::{Tensor, Val, dyn_range, threads};
use dsl_macros::{device, kernel};

#[device]
fn clamp_add(x: Val<u32>, n: Val<u32>) -> Val<u32> {
    let mut y = x;
    if x > n {
        y = n;
    } else if x == 3 {
        y += 7;
    }
    y
}

#[kernel]
fn demo(#[comptime] unroll: u32, out: Tensor<u32, 1>, n: Val<u32>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    let mut acc = Val::<u32>::constant(0);
    let mut count = 0u32;
    for k in 0..unroll {
        acc += k;
        count += 1;
    }
    for i in dyn_range(0u32, n) {
        if (i & 1) == 1 && tid < 16 {
            acc += i;
        }
    }
    let mut j = Val::<u32>::constant(0);
    while j < n {
        j += 2;
    }
    let v = clamp_add(acc + j + count, n);
    let addr = out.base() + tid.mul_wide(4);
    let old: Val<u32> = load(addr);
    store(addr, old + v);
}

#[test]
fn macro_kernel_traces() {
    let k = demo(Target::Sm90a, 3).unwrap();
    let m = dsl_core::emit::ptx::emit(&k).unwrap();
    println!("{}", m.text);
}

/// A parameter struct: its fields become the kernel's parameters, in order.
#[derive(dsl_macros::KernelParam)]
struct CopyParams {
    src: Tensor<u32, 1>,
    dst: Tensor<u32, 1>,
    n: Val<u32>,
}

#[kernel]
fn copy_with_params(params: CopyParams, scale: Val<u32>) {
    threads(32, 1, 1);
    let tid = thread_idx_x();
    if tid < params.n {
        let x: Val<u32> = load(params.src.base() + tid.mul_wide(4));
        store(params.dst.base() + tid.mul_wide(4), x * scale);
    }
}

#[test]
fn a_parameter_struct_declares_its_fields_in_order() {
    let kernel = copy_with_params(Target::Sm90a).expect("traces");
    let names: Vec<&str> = kernel.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["src", "dst", "n", "scale"]);
}
