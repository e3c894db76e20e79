//! Criterion: one reading of the first NVML device, where the library and a device are there; elsewhere the
//! reason is printed and nothing is benchmarked.
//!
//!     cargo bench -p lynx-nvml

use criterion::{criterion_group, criterion_main, Criterion};
use lynx_nvml::NvmlSource;
use lynx_telemetry::TelemetrySource;

fn reading(c: &mut Criterion) {
    match lynx_nvml::nvml().and_then(|nvml| {
        let uuid = nvml.device_by_index(0).and_then(|d| d.uuid()).map_err(|e| e.to_string())?;
        NvmlSource::for_uuid(&uuid)
    }) {
        Ok(mut source) => {
            c.bench_function("nvml reading", |b| b.iter(|| std::hint::black_box(source.sample())));
        }
        Err(reason) => println!("nvml reading: not benchmarked: {reason}"),
    }
}

criterion_group!(benches, reading);
criterion_main!(benches);
