// A kernel writes results through its parameters.
use dsl_core::trace::{Val, threads};
use dsl_macros::kernel;

#[kernel]
fn answer(n: Val<u32>) -> u32 {
    threads(32, 1, 1);
    42
}

fn main() {}
