//! The serving loop's own time per iteration against the 1 ms goal (issue 16; the seed's
//! "load-generator health: scheduling delay under 1 ms"): everything an iteration does besides
//! its model steps (admitting requests, building the step's inputs, reading its tokens into the
//! requests' timelines, retiring finished sequences and moving rows of the KV pool).
//!
//! `cargo bench -p lynx-runner --bench serving_loop` serves every request arriving at once (the
//! loop at its busiest: a full batch, admissions and retirements every few steps), whole-prompt
//! and chunked prefill, and prints one table: the loop's time per iteration at p50, p90, p99 and
//! its slowest, the median model step beside it, and whether p99 meets the goal. Two models:
//! a tiny one (2 layers, hidden 64), whose steps take a millisecond or two, so that thousands of
//! iterations give steady percentiles of what the host does (what a GPU run pays, where the row
//! moves are copies issued without waiting); and `lynx-ref-small`, on which the CPU also does the
//! row moves' copying inline, counted here: the loop's worst case.

use lynx_analysis::lengths::Lengths;
use lynx_analysis::stats::Sorted;
use lynx_models::Model;
use lynx_schema::config::{ModelShape, Precision};
use std::time::Instant;

/// The goal for the loop's own time per iteration, at p99 (the `serving_overhead` check's).
const GOAL_S: f64 = 1e-3;

/// The tiny model: steps fast enough for thousands of iterations.
const TINY: &str = r#"
name = "tiny"
vocab_size = 97
hidden_size = 64
num_layers = 2
rms_norm_eps = 1e-5
init_std = 0.1
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
rope_theta = 10000.0
[mlp]
intermediate_size = 128
"#;

fn main() {
    let small = include_str!("../../../models/lynx-ref-small.toml");
    let models = [("tiny", TINY, &[1u32, 8, 32, 128][..], 8u32), ("lynx-ref-small", small, &[8, 32][..], 2)];
    let _inference = tch::no_grad_guard();
    println!(
        "{:<15} {:<14} {:>5} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}",
        "MODEL",
        "PREFILL",
        "BATCH",
        "REQUESTS",
        "ITERATIONS",
        "P50 (ms)",
        "P90 (ms)",
        "P99 (ms)",
        "MAX (ms)",
        "STEP (ms)",
        "1 MS GOAL"
    );
    for (name, text, batches, requests_per_row) in models {
        let shape = ModelShape::from_toml(text, name).expect("the model parses");
        let model = Model::new(&shape, Precision::Fp32, tch::Device::Cpu, 1).expect("the model builds");
        for chunk in [None, Some(64)] {
            for &max_batch in batches {
                // Short requests, lengths varied so that sequences finish at different steps and
                // rows move.
                let n = (requests_per_row * max_batch).max(16) as usize;
                let lengths: Vec<Lengths> =
                    (0..n).map(|i| Lengths { isl: 16 + (i as u32 * 7) % 49, osl: 8 + (i as u32 * 5) % 17 }).collect();
                let arrivals_s = vec![0.0; n];
                let started = Instant::now();
                let (overhead, steps) = lynx_runner::loop_overhead(&model, max_batch, 8, chunk, &lengths, &arrivals_s)
                    .expect("the loop serves");
                // The quantiles the `serving_overhead` check takes (lynx-analysis' one definition).
                let overhead = Sorted::new(overhead).expect("the loop iterated, its times finite");
                let steps = Sorted::new(steps).expect("the loop stepped, its times finite");
                let p99 = overhead.quantile(0.99);
                println!(
                    "{:<15} {:<14} {:>5} {:>8} {:>10} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10.2} {:>9}",
                    name,
                    chunk.map_or("whole prompt".to_owned(), |c| format!("chunks of {c}")),
                    max_batch,
                    n,
                    overhead.len(),
                    overhead.median() * 1e3,
                    overhead.quantile(0.9) * 1e3,
                    p99 * 1e3,
                    overhead.max() * 1e3,
                    steps.median() * 1e3,
                    if p99 < GOAL_S { "met" } else { "MISSED" },
                );
                eprintln!("  ({:.1} s)", started.elapsed().as_secs_f64());
            }
        }
    }
}
