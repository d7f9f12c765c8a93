//! Tracing and PTX emission of the decode kernel per compile key: what a serving process pays
//! the first time it meets a key (the CuTe DSL takes seconds per compile; this should take
//! milliseconds). `cargo bench -p kernels --bench trace_emit`.

use criterion::{Criterion, criterion_group, criterion_main};
use dsl_core::Target;
use dsl_core::emit::ptx::emit;
use kernels::swap_ab_decode::{snapshot_keys, swap_ab_decode};

fn trace_and_emit(c: &mut Criterion) {
    let mut group = c.benchmark_group("trace+emit");
    group.sample_size(20);
    for target in Target::ALL {
        for key in snapshot_keys(target).into_iter().filter(|k| {
            k.swa_width == 128 && k.extra_record == kernels::swap_ab_decode::ExtraRecord::Fp8
        }) {
            group.bench_function(key.to_string(), |b| {
                b.iter(|| {
                    let kernel = swap_ab_decode(target, &key).expect("traces");
                    emit(&kernel).expect("emits").text.len()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, trace_and_emit);
criterion_main!(benches);
