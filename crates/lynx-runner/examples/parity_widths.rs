//! The parity check's median errors on each catalogue model at its real widths, on this host's
//! CPU kernels: the measurements behind `lynx_runner::parity::tolerance` (the table in
//! docs/ARCHITECTURE.md, "Parity").
//!
//! `cargo run --release -p lynx-runner --example parity_widths -- [MODEL…]` (default: the whole
//! catalogue). Each model's two-layer parity shape is cut from the smallest tensor-parallel
//! shard (tp 1, 2, 4, 8, 16) whose float64 reference and copy at the precision fit in
//! `LYNX_PARITY_GIB` GiB (default 15): the float64 reference of a whole 70B layer does not fit
//! a 24 GiB host. Slow: about 25 minutes for the catalogue on a 2-core host.

use lynx_runner::parity::{judge, measure, parity_shape, ParityWeights};
use lynx_schema::config::{shard, ModelShape, ParityConfig, Precision, Scale};

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
    let budget_gib: f64 = std::env::var("LYNX_PARITY_GIB").ok().and_then(|v| v.parse().ok()).unwrap_or(15.0);
    let mut names: Vec<String> = std::env::args().skip(1).collect();
    if names.is_empty() {
        let mut found: Vec<String> = std::fs::read_dir(&root)
            .expect("the catalogue")
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.strip_suffix(".toml").map(str::to_owned))
            .collect();
        found.sort();
        names = found;
    }
    // The seed gpu-check's suites use; the check's default sequence (2 layers, batch 2, 16
    // prompt tokens, 8 decode steps).
    let (seed, config) = (20261201, ParityConfig::default());
    println!("model | shard | precision | the check's detail");
    for name in names {
        let text = match std::fs::read_to_string(root.join(format!("{name}.toml"))) {
            Ok(text) => text,
            Err(error) => {
                eprintln!("{name}: {error}");
                std::process::exit(2);
            }
        };
        let shape = ModelShape::from_toml(&text, &name).expect("a catalogue model");
        let fits = [1, 2, 4, 8, 16].into_iter().find_map(|tp| {
            let sharded = shard(&shape, &Scale { layers: None, tp }).ok()?;
            let cut = parity_shape(&sharded, config.layers);
            let bytes = cut.weight_bytes(Precision::Fp32) * 2 + cut.weight_bytes(Precision::Bf16);
            (bytes as f64 / f64::from(1u32 << 30) <= budget_gib).then_some((tp, sharded))
        });
        let Some((tp, sharded)) = fits else {
            println!("{name} | no shard fits {budget_gib} GiB | |");
            continue;
        };
        for precision in [Precision::Fp32, Precision::Fp16, Precision::Bf16, Precision::Fp8] {
            let weights = ParityWeights::Random(seed);
            let line = match measure(&sharded, precision, tch::Device::Cpu, seed, weights, &config) {
                Ok(logits) => judge(&logits, precision).detail,
                Err(error) => format!("failed: {error}"),
            };
            println!("{name} | tp {tp} | {precision} | {line}");
        }
    }
}
