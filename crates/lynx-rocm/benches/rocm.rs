//! Criterion: one reading of ROCm SMI device 0, where the library and a device are there; elsewhere the
//! reason is printed and nothing is benchmarked.
//!
//!     cargo bench -p lynx-rocm

use criterion::{criterion_group, criterion_main, Criterion};
use lynx_rocm::RocmSource;
use lynx_telemetry::TelemetrySource;

fn reading(c: &mut Criterion) {
    match RocmSource::for_index(0) {
        Ok(mut source) => {
            c.bench_function("rocm reading", |b| b.iter(|| std::hint::black_box(source.sample())));
        }
        Err(reason) => println!("rocm reading: not benchmarked: {reason}"),
    }
}

criterion_group!(benches, reading);
criterion_main!(benches);
