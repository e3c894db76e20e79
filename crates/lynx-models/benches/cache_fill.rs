//! What filling a decode cell's KV cache with random tokens costs on the CPU: `KvCache::fill_random`
//! (each contiguous run of held tokens drawn alone) against one `normal_` over a tensor's held
//! tokens, a strided view when the cache has room past them (libtorch's CPU `normal_` then draws
//! one element at a time).
//!
//! `cargo bench -p lynx-models --bench cache_fill` prints one table for `lynx-ref-small` at a
//! few batches and contexts (the cache with 64 tokens of room past them, as a cell's has): the
//! median of five fills each way (STRIDED: one `normal_` over each layer's keys and values
//! narrowed to the held tokens, as lynx drew them until 2026-12-06) and their ratio.

mod common;

use lynx_models::{KvCache, Model};
use lynx_schema::config::{Attention, ModelShape, Precision};
use tch::{Device, Kind, Tensor};

/// The median of five fills.
fn timed(work: impl FnMut()) -> f64 {
    common::timed(5, || (), work)
}

fn main() {
    let text = include_str!("../../../models/lynx-ref-small.toml");
    let shape = ModelShape::from_toml(text, "models/lynx-ref-small.toml").expect("the catalogue's model parses");
    let model = Model::new(&shape, Precision::Fp32, Device::Cpu, 1).expect("the model builds");
    println!(
        "{:>5} {:>5} {:>10} {:>17} {:>18} {:>6}",
        "BATCH", "CTX", "MB", "FILL_RANDOM (ms)", "STRIDED (ms)", "RATIO"
    );
    let Attention::Gqa(gqa) = &shape.attention else { unreachable!("lynx-ref-small is a GQA model") };
    for (batch, ctx) in [(1i64, 1024i64), (8, 1024), (16, 4096)] {
        let mut cache = KvCache::new(&model, batch, ctx + 64).expect("the cache fits");
        let fill = timed(|| cache.fill_random(ctx).expect("the fill"));
        // The same tokens drawn as lynx drew them before: one `normal_` over each layer's keys
        // and values narrowed to the held tokens, in a stand-in of the cache's layout.
        let layout = [
            2 * i64::from(shape.num_layers),
            batch,
            i64::from(gqa.num_kv_heads),
            ctx + 64,
            i64::from(shape.head_dim()),
        ];
        let room = Tensor::zeros(layout, (Kind::Float, Device::Cpu));
        let one = timed(|| {
            for tensor in 0..layout[0] {
                let _ = room.get(tensor).narrow(2, 0, ctx).normal_(0.0, 1.0);
            }
        });
        let bytes = layout.iter().product::<i64>() * 4;
        println!(
            "{batch:>5} {ctx:>5} {:>10.1} {:>17.2} {:>18.2} {:>6.2}",
            bytes as f64 / 1e6,
            fill * 1e3,
            one * 1e3,
            one / fill
        );
    }
}
