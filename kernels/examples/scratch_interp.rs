use dsl_core::Target;
use kernels::swap_ab_decode::engine::{interpret, interpreter_options};
use kernels::swap_ab_decode::{CaseSpec, compare, generate, realistic_keys, reference};
fn main() {
    let target: Target = std::env::args()
        .nth(1)
        .unwrap_or("sm100a".into())
        .parse()
        .unwrap();
    let idx: usize = std::env::args()
        .nth(2)
        .unwrap_or("0".into())
        .parse()
        .unwrap();
    let key = realistic_keys(target)[idx];
    let case = generate(
        1,
        &CaseSpec {
            key,
            s_q: 1,
            adversarial: false,
        },
    )
    .unwrap();
    let r = reference(&case.problem).unwrap();
    let t = std::time::Instant::now();
    match interpret(&case.problem, target, true, &interpreter_options()) {
        Ok(run) => {
            println!(
                "{key}: ran in {:?}, {} lane insts",
                t.elapsed(),
                run.lane_instructions.unwrap()
            );
            let rep = compare(&r, &run.out, run.precast.as_deref());
            println!("{rep}");
        }
        Err(e) => println!("{e}"),
    }
}
