//! How much a serving loop's decode step costs over a cell's: `Model::decode` (the eager cell's
//! step: the position known on the host, every row at the same length, no mask) against
//! `Model::decode_rows` (the serving loop's step: a position per row held on the device, keys
//! masked per row) at the same batch and context, on the CPU with `lynx-ref-small`.
//!
//! `cargo bench -p lynx-models --bench decode_paths` prints one table: the median step of each
//! and their ratio. The serving phase's agreement with the simulation (docs/SWEEPS.md) depends
//! on this ratio, since the simulation charges the cells' step times.

mod common;

use common::median;
use lynx_models::{KvCache, Model};
use lynx_schema::config::{ModelShape, Precision};
use std::time::Instant;
use tch::{Device, Kind, Tensor};

const STEPS: usize = 60;

fn main() {
    let text = include_str!("../../../models/lynx-ref-small.toml");
    let shape = ModelShape::from_toml(text, "models/lynx-ref-small.toml").expect("the catalogue's model parses");
    let model = Model::new(&shape, Precision::Fp32, Device::Cpu, 1).expect("the model builds");
    let _inference = tch::no_grad_guard();
    println!("{:>5} {:>5} {:>14} {:>18} {:>6}", "BATCH", "CTX", "DECODE (ms)", "DECODE_ROWS (ms)", "RATIO");
    for batch in [1i64, 2, 4, 8, 16] {
        for ctx in [32i64, 128, 1024] {
            let tokens = model.random_tokens(batch, 1).unwrap();
            // The cell's step: the cache at `ctx`, growing one token a step.
            let mut cache = KvCache::new(&model, batch, ctx + STEPS as i64 + 8).unwrap();
            cache.fill_random(ctx).unwrap();
            let _ = model.decode(&tokens, &mut cache).unwrap();
            let cell: Vec<f64> = (0..STEPS)
                .map(|_| {
                    let start = Instant::now();
                    let next = model.decode(&tokens, &mut cache).unwrap();
                    let _ = Vec::<i64>::try_from(&next.flatten(0, -1)).unwrap();
                    start.elapsed().as_secs_f64()
                })
                .collect();
            // The serving loop's step: each row at `ctx` on the device, `ctx + 1` keys attended.
            let mut rows = KvCache::new(&model, batch, ctx + 8).unwrap();
            rows.fill_random(ctx).unwrap();
            let positions = Tensor::from_slice(&vec![ctx; batch as usize]).to_kind(Kind::Int64);
            let serve: Vec<f64> = (0..=STEPS)
                .map(|_| {
                    let start = Instant::now();
                    let logits = model.decode_rows(&tokens, &rows, &positions, ctx + 1).unwrap();
                    let next = logits.argmax(-1, false);
                    let _ = Vec::<i64>::try_from(&next.flatten(0, -1)).unwrap();
                    start.elapsed().as_secs_f64()
                })
                .skip(1)
                .collect();
            let (cell, serve) = (median(cell), median(serve));
            println!("{batch:>5} {ctx:>5} {:>14.3} {:>18.3} {:>6.2}", cell * 1e3, serve * 1e3, serve / cell);
        }
    }
}
