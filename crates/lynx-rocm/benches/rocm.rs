//! Criterion: one reading of a ROCm SMI source.
//! - `rocm reading (stand-in library)`: through lynx-fakes' librocm_smi64 5.x and a stand-in
//!   `gpu_metrics` file, so the figure is lynx's own cost per reading (the library calls, the
//!   clock tables, one read of the metrics table), on any host.
//! - `rocm reading (device 0)`: the first real device, where ROCm SMI and an AMD GPU are there;
//!   elsewhere the reason is printed and nothing is benchmarked.
//!
//!     cargo bench -p lynx-rocm

use criterion::{criterion_group, criterion_main, Criterion};
use lynx_rocm::RocmSource;
use lynx_telemetry::TelemetrySource;
use std::path::Path;

fn stand_in(c: &mut Criterion) {
    let smi = lynx_rocm::open(Path::new(lynx_fakes::ROCM_SMI_5)).expect("the stand-in librocm_smi64 loads");
    let sysfs = tempfile::tempdir().expect("a temporary folder");
    let function = sysfs.path().join("0000:83:00.0");
    std::fs::create_dir(&function).expect("the function's folder");
    std::fs::write(function.join("gpu_metrics"), lynx_rocm::metrics::v1_3_table(1)).expect("the table");
    let mut source = RocmSource::new(smi, 0, sysfs.path()).expect("the stand-in's device 0");
    c.bench_function("rocm reading (stand-in library)", |b| b.iter(|| std::hint::black_box(source.sample())));
}

fn device(c: &mut Criterion) {
    match RocmSource::for_index(0) {
        Ok(mut source) => {
            c.bench_function("rocm reading (device 0)", |b| b.iter(|| std::hint::black_box(source.sample())));
        }
        Err(reason) => println!("rocm reading (device 0): not benchmarked: {reason}"),
    }
}

criterion_group!(benches, stand_in, device);
criterion_main!(benches);
