//! Sealing (hash the samples file, sign) and verifying a realistic result: the test result with
//! a 50 MB samples file beside it, about what a long run at 100 Hz on an eight-GPU node writes.
//! Verification time per result is what a buyer's shortlist over hundreds of results pays.

#[path = "../tests/common/mod.rs"]
mod common;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lynx_attest::{envelope_path, seal, verify};
use std::io::Write;

const SAMPLES_BYTES: usize = 50 * 1000 * 1000;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let (signing, verifying) = common::key_pair(dir.path());
    let result = common::result();

    // Sample lines as the sampler writes them, to 50 MB.
    let mut samples = std::io::BufWriter::new(std::fs::File::create(dir.path().join(common::SAMPLES_FILE)).unwrap());
    let (mut written, mut i) = (0, 0u64);
    while written < SAMPLES_BYTES {
        let line = format!(
            "{{\"kind\":\"telemetry\",\"source\":\"nvml:{}\",\"t_s\":{:.3},\"power_w\":{:.1},\"sm_clock_mhz\":1980,\"temperature_c\":{}}}\n",
            i % 8,
            i as f64 / 800.0,
            600.0 + (i % 97) as f64,
            60 + i % 7
        );
        samples.write_all(line.as_bytes()).unwrap();
        written += line.len();
        i += 1;
    }
    samples.into_inner().unwrap().sync_all().unwrap();

    let result_path = dir.path().join("run.json");
    let envelope = envelope_path(&result_path);
    let mut group = c.benchmark_group("result_50MB_samples");
    group.sample_size(10).throughput(Throughput::Bytes(SAMPLES_BYTES as u64));
    group.bench_function("seal_and_sign", |b| b.iter(|| seal(&result_path, &result, Some(&signing)).unwrap()));
    std::fs::write(&envelope, serde_json::to_vec(&seal(&result_path, &result, Some(&signing)).unwrap()).unwrap())
        .unwrap();
    group.bench_function("verify", |b| b.iter(|| verify(&envelope, &verifying).unwrap()));
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
