//! The PTX of the five basic kernels, per target, as reviewed snapshots
//! (`cargo insta review` blesses a change). `tests/ptxas.rs` assembles every snapshot.

use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use kernels::basics::{cluster_exchange, divergent_loop, row_reduce, spin, split_sum};

fn check(name: &str, kernel: dsl_core::ir::Kernel) {
    let module = emit(&kernel).expect("emits");
    insta::assert_snapshot!(
        format!("{name}__{}", kernel.target.short_name()),
        module.text
    );
}

#[test]
fn row_reduce_ptx() {
    for target in Target::ALL {
        check(
            "row_reduce__cols256",
            row_reduce::row_reduce(target, 256).unwrap(),
        );
    }
}

#[test]
fn divergent_loop_ptx() {
    for target in Target::ALL {
        check(
            "divergent_loop",
            divergent_loop::divergent_loop(target).unwrap(),
        );
    }
}

#[test]
fn cluster_exchange_ptx() {
    for target in Target::ALL {
        check(
            "cluster_exchange__c4",
            cluster_exchange::cluster_exchange(target, 4).unwrap(),
        );
    }
}

#[test]
fn split_sum_ptx() {
    for target in Target::ALL {
        check(
            "split_sum__per_thread4",
            split_sum::split_sum(target, 4).unwrap(),
        );
    }
}

#[test]
fn spin_ptx() {
    for target in Target::ALL {
        check("spin", spin::spin(target).unwrap());
    }
}

#[test]
fn emission_is_deterministic() {
    let a = emit(&row_reduce::row_reduce(Target::Sm100a, 512).unwrap()).unwrap();
    let b = emit(&row_reduce::row_reduce(Target::Sm100a, 512).unwrap()).unwrap();
    assert_eq!(a.text, b.text);
}
