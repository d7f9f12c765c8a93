// A runtime loop cannot be left early.
use dsl_core::trace::{Tensor, Val, dyn_range, threads};
use dsl_macros::kernel;

#[kernel]
fn early_exit(out: Tensor<u32, 1>, n: Val<u32>) {
    threads(32, 1, 1);
    for i in dyn_range(0u32, n) {
        break;
    }
}

fn main() {}
