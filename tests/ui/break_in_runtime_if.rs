// A runtime branch cannot leave a loop.
use dsl_core::arch::thread::thread_idx_x;
use dsl_core::trace::{Tensor, threads};
use dsl_macros::kernel;

#[kernel]
fn early_exit(out: Tensor<u32, 1>) {
    threads(32, 1, 1);
    for _ in 0..4 {
        if thread_idx_x() < 3 {
            break;
        }
    }
}

fn main() {}
