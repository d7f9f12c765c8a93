// Arguments that are not DSL parameters must be marked #[comptime].
use dsl_core::trace::{Tensor, threads};
use dsl_macros::kernel;

#[kernel]
fn tiles(out: Tensor<u32, 1>, count: usize) {
    threads(32, 1, 1);
}

fn main() {}
