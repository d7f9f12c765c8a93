// A value assigned inside a possibly-runtime `if` must be Carry.
use dsl_core::arch::thread::thread_idx_x;
use dsl_core::trace::{Tensor, threads};
use dsl_macros::kernel;

struct Config {
    rows: u32,
}

#[kernel]
fn configure(out: Tensor<u32, 1>) {
    threads(32, 1, 1);
    let mut config = Config { rows: 1 };
    if thread_idx_x() < 3 {
        config = Config { rows: 2 };
    }
}

fn main() {}
