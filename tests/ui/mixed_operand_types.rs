// Operand types must agree: no implicit conversion between u32 and f32 registers.
use dsl_core::trace::{Tensor, Val, threads};
use dsl_macros::kernel;

#[kernel]
fn mixed(out: Tensor<f32, 1>, n: Val<u32>, scale: Val<f32>) {
    threads(32, 1, 1);
    let x = n + scale;
}

fn main() {}
