//! Criterion: one reading of each telemetry backend available on this host. A backend that is
//! not available is named with the reason, not benchmarked and not counted.
//!
//!     cargo bench -p lynx-telemetry --bench backends
//!
//! The host's source carries slow readings between their reads (utilisation every 100 ms,
//! memory and `/proc/cpuinfo` every second), so back-to-back readings measure the amortised cost
//! per sample at a high rate; `--bench sampler` gives a full reading's cost and the sampling
//! thread's CPU share. The NVML and ROCm SMI sources have the same benchmark in their crates
//! (`cargo bench -p lynx-nvml`, `cargo bench -p lynx-rocm`).

use criterion::{criterion_group, criterion_main, Criterion};
use lynx_telemetry::{HostSource, TelemetrySource};

fn host(c: &mut Criterion) {
    let mut host = HostSource::new();
    c.bench_function("host reading", |b| b.iter(|| std::hint::black_box(host.sample())));
}

criterion_group!(benches, host);
criterion_main!(benches);
