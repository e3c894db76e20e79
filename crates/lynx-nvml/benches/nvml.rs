//! Criterion: one reading of an NVML source.
//! - `nvml reading (stand-in library)`: through lynx-fakes' libnvidia-ml, whose entry points
//!   return at once, so the figure is lynx's and nvml-wrapper's own cost per reading (the
//!   batched field call, the fallbacks, decoding), on any host.
//! - `nvml reading (device 0)`: the first real device, where the driver and a GPU are there;
//!   elsewhere the reason is printed and nothing is benchmarked.
//!
//!     cargo bench -p lynx-nvml

use criterion::{criterion_group, criterion_main, Criterion};
use lynx_nvml::NvmlSource;
use lynx_telemetry::TelemetrySource;
use std::path::Path;

fn stand_in(c: &mut Criterion) {
    let nvml = lynx_nvml::open(Path::new(lynx_fakes::NVML)).expect("the stand-in libnvidia-ml loads");
    let mut source = NvmlSource::new(nvml, lynx_fakes::NVML_FULL_UUID).expect("the stand-in's device 0");
    c.bench_function("nvml reading (stand-in library)", |b| b.iter(|| std::hint::black_box(source.sample())));
}

fn device(c: &mut Criterion) {
    match lynx_nvml::nvml().map_err(|e| e.to_string()).and_then(|nvml| {
        let uuid = nvml.device_by_index(0).and_then(|d| d.uuid()).map_err(|e| e.to_string())?;
        NvmlSource::for_uuid(&uuid).map_err(|e| e.to_string())
    }) {
        Ok(mut source) => {
            c.bench_function("nvml reading (device 0)", |b| b.iter(|| std::hint::black_box(source.sample())));
        }
        Err(reason) => println!("nvml reading (device 0): not benchmarked: {reason}"),
    }
}

criterion_group!(benches, stand_in, device);
criterion_main!(benches);
