//! A GPU spin: one warp steps a 32-bit linear congruential generator a runtime number of
//! times and stores the result, so the loop is a dependent chain the assembler cannot drop.
//! The benchmarks queue it ahead of each timed CUDA-graph replay: while it runs, the host
//! queues the replay and its events, so the replay starts as soon as the spin ends and the
//! events time the GPU's work only.

use dsl_core::arch::memory::store;
use dsl_core::arch::thread::thread_idx_x;
use dsl_core::trace::{Tensor, Val, dyn_range, threads};
use dsl_macros::kernel;

/// The generator's multiplier and increment (Numerical Recipes' `ranqd1`).
const MULTIPLIER: u32 = 1_664_525;
const INCREMENT: u32 = 1_013_904_223;

/// `out[0]` = the generator's state after `steps` steps from 1.
#[kernel]
pub fn spin(out: Tensor<u32, 1>, steps: Val<u32>) {
    threads(32, 1, 1);
    let mut x = Val::<u32>::constant(1);
    for _step in dyn_range(0u32, steps) {
        x = x * MULTIPLIER + INCREMENT;
    }
    if thread_idx_x() == 0 {
        store(out.base(), x);
    }
}

/// What the kernel stores for `steps`.
pub fn reference(steps: u32) -> u32 {
    (0..steps).fold(1u32, |x, _| {
        x.wrapping_mul(MULTIPLIER).wrapping_add(INCREMENT)
    })
}

#[cfg(test)]
mod tests {
    use dsl_core::Target;
    use dsl_core::interp::{self, Arg, Launch, Memory};

    use super::{reference, spin};

    #[test]
    fn spin_steps_the_generator_in_the_interpreter() {
        for target in Target::ALL {
            let kernel = spin(target).unwrap();
            for steps in [0, 1, 777] {
                let mut mem = Memory::new();
                let out = mem.alloc_from("out", &[0u32]);
                let args = [Arg::contiguous(out, &[1]), Arg::U32(steps)];
                interp::run(&kernel, &mut mem, &args, &Launch::grid([1, 1, 1]))
                    .unwrap_or_else(|e| panic!("{target}, {steps} steps: {e}"));
                assert_eq!(
                    mem.read::<u32>(out),
                    [reference(steps)],
                    "{target}, {steps} steps"
                );
            }
        }
    }
}
