//! How much a serving loop's prefill step costs over a cell's: `Model::prefill` into a cache of
//! exactly the prompt's length (the prefill cell's step) against `Model::prefill_rows` (the
//! serving loop's step: prompts made on the host, each row's first token taken at its own last
//! position) into that same cache, and into rows of a pool sized as the serving phase sizes it
//! (the cap's rows, each holding the longest prompt and output), back to back and, as the loop
//! runs them, each after three decode steps of the pool's other rows; on the CPU with
//! `lynx-ref-small`.
//!
//! `cargo bench -p lynx-models --bench prefill_paths` prints one table: the median step of each
//! and their ratios to the cell's. The serving phase's agreement with the simulation
//! (docs/SWEEPS.md) depends on these ratios, since the simulation charges the cells' step
//! times.

mod common;

use lynx_models::{KvCache, Model};
use lynx_schema::config::{ModelShape, Precision};
use tch::{Device, Kind, Tensor};

const STEPS: usize = 40;
/// The `cpu` suite's serving pool: a batch cap of 8, prompts of up to 64 tokens, outputs of 16.
const POOL_ROWS: i64 = 8;
const POOL_CAPACITY: i64 = 64 + 16;

/// The median seconds of `STEPS` runs of `step`, after one untimed run, each run after
/// `before` (not timed).
fn timed(before: impl FnMut(), mut step: impl FnMut()) -> f64 {
    step();
    common::timed(STEPS, before, step)
}

fn main() {
    let text = include_str!("../../../models/lynx-ref-small.toml");
    let shape = ModelShape::from_toml(text, "models/lynx-ref-small.toml").expect("the catalogue's model parses");
    let model = Model::new(&shape, Precision::Fp32, Device::Cpu, 1).expect("the model builds");
    let _inference = tch::no_grad_guard();
    let pool = KvCache::new(&model, POOL_ROWS, POOL_CAPACITY).unwrap();
    // The running sequences the loop decodes between prefill steps: the pool's first three
    // rows, 40 tokens in.
    let running = pool.rows(0, 3, 0).unwrap();
    let (tokens, positions) =
        (model.random_tokens(3, 1).unwrap(), Tensor::from_slice(&[40i64; 3]).to_kind(Kind::Int64));
    let decode = || {
        for _ in 0..3 {
            let logits = model.decode_rows(&tokens, &running, &positions, 41).unwrap();
            let _ = Vec::<i64>::try_from(&logits.argmax(-1, false).flatten(0, -1)).unwrap();
        }
    };
    println!(
        "{:>5} {:>5} {:>12} {:>16} {:>6} {:>15} {:>6} {:>17} {:>6}",
        "BATCH",
        "LEN",
        "PREFILL (ms)",
        "ROWS EXACT (ms)",
        "RATIO",
        "ROWS POOL (ms)",
        "RATIO",
        "AFTER DECODE (ms)",
        "RATIO"
    );
    for batch in [1i64, 2] {
        for len in [16i64, 32, 48, 64] {
            let prompts = model.random_tokens(batch, len).unwrap();
            let host: Vec<i64> = Vec::try_from(&prompts.flatten(0, -1)).unwrap();
            let last: Vec<i64> = vec![len - 1; batch as usize];
            // The cell's step.
            let mut exact = KvCache::new(&model, batch, len).unwrap();
            let cell = timed(
                || {},
                || {
                    let first = model.prefill(&prompts, &mut exact).unwrap();
                    let _ = Vec::<i64>::try_from(&first.flatten(0, -1)).unwrap();
                },
            );
            // The loop's step, into `cache`.
            let rows = |cache: &mut KvCache| {
                let prompts = Tensor::from_slice(&host).view([batch, len]);
                let last = Tensor::from_slice(&last);
                let first = model.prefill_rows(&prompts, &last, cache).unwrap();
                let _ = Vec::<i64>::try_from(&first.flatten(0, -1)).unwrap();
            };
            let in_exact = timed(|| {}, || rows(&mut exact));
            // Rows after three running sequences, as the loop's prefill lands.
            let mut in_pool = pool.rows(3, batch, 0).unwrap();
            let pool_rows = timed(|| {}, || rows(&mut in_pool));
            let after_decode = timed(decode, || rows(&mut in_pool));
            println!(
                "{batch:>5} {len:>5} {:>12.3} {:>16.3} {:>6.2} {:>15.3} {:>6.2} {:>17.3} {:>6.2}",
                cell * 1e3,
                in_exact * 1e3,
                in_exact / cell,
                pool_rows * 1e3,
                pool_rows / cell,
                after_decode * 1e3,
                after_decode / cell
            );
        }
    }
}
