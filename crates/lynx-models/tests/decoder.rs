//! The decoder's behaviour on CPU with real libtorch: shapes, KV-cache decoding against a full
//! forward pass, and causal masking.

use lynx_core::config::{ModelShape, Precision};
use lynx_models::{KvCache, LlamaModel, Logits};
use tch::{Device, Kind, Tensor};

fn shape() -> ModelShape {
    ModelShape::from_toml(
        r#"
        name = "test-tiny"
        family = "dense"
        vocab_size = 97
        hidden_size = 64
        intermediate_size = 160
        num_layers = 2
        num_heads = 8
        num_kv_heads = 2
        rope_theta = 10000.0
        rms_norm_eps = 1e-5
        init_std = 0.1
        "#,
        "test-tiny",
    )
    .unwrap()
}

fn model() -> LlamaModel {
    LlamaModel::new(&shape(), Precision::Fp32, Device::Cpu, 7).unwrap()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

#[test]
fn logits_have_batch_tokens_vocab_shape() {
    let model = model();
    let tokens = model.random_tokens(3, 5).unwrap();
    let mut cache = KvCache::new(&model, 3, 16).unwrap();
    let all = model.forward(&tokens, &mut cache, Logits::All).unwrap();
    assert_eq!(all.size(), [3, 5, 97]);
    assert_eq!(all.kind(), Kind::Float);
    assert_eq!(cache.len(), 5);
    let mut cache = KvCache::new(&model, 3, 16).unwrap();
    let last = model.forward(&tokens, &mut cache, Logits::Last).unwrap();
    assert_eq!(last.size(), [3, 1, 97]);
    assert!(max_abs_diff(&last, &all.narrow(1, 4, 1)) < 1e-5);
    let next = model.decode(&model.random_tokens(3, 1).unwrap(), &mut cache).unwrap();
    assert_eq!(next.size(), [3, 1]);
    assert_eq!(cache.len(), 6);
}

#[test]
fn cached_token_by_token_decoding_matches_a_full_forward() {
    let model = model();
    let tokens = model.random_tokens(2, 12).unwrap();
    let mut full_cache = KvCache::new(&model, 2, 12).unwrap();
    let full = model.forward(&tokens, &mut full_cache, Logits::All).unwrap();
    // Logits must carry signal, or matching them would prove nothing.
    assert!(full.std(false).double_value(&[]) > 1e-3);

    let mut cache = KvCache::new(&model, 2, 12).unwrap();
    for position in 0..12 {
        let step = model.forward(&tokens.narrow(1, position, 1), &mut cache, Logits::All).unwrap();
        let diff = max_abs_diff(&step, &full.narrow(1, position, 1));
        assert!(diff < 1e-4, "position {position}: max |Δ| = {diff}");
    }
}

#[test]
fn a_chunk_after_cached_tokens_matches_a_full_forward() {
    // Exercises the explicit mask path: several new tokens after a non-empty cache.
    let model = model();
    let tokens = model.random_tokens(2, 9).unwrap();
    let mut full_cache = KvCache::new(&model, 2, 9).unwrap();
    let full = model.forward(&tokens, &mut full_cache, Logits::All).unwrap();
    let mut cache = KvCache::new(&model, 2, 9).unwrap();
    let _ = model.forward(&tokens.narrow(1, 0, 5), &mut cache, Logits::All).unwrap();
    let chunk = model.forward(&tokens.narrow(1, 5, 4), &mut cache, Logits::All).unwrap();
    let diff = max_abs_diff(&chunk, &full.narrow(1, 5, 4));
    assert!(diff < 1e-4, "max |Δ| = {diff}");
}

#[test]
fn a_position_sees_no_later_token() {
    let model = model();
    let tokens = model.random_tokens(1, 8).unwrap();
    let changed = tokens.copy();
    let _ = changed.narrow(1, 5, 1).fill_((tokens.int64_value(&[0, 5]) + 1) % 97);
    let run = |t: &Tensor| {
        let mut cache = KvCache::new(&model, 1, 8).unwrap();
        model.forward(t, &mut cache, Logits::All).unwrap()
    };
    let (before, after) = (run(&tokens), run(&changed));
    let earlier = max_abs_diff(&before.narrow(1, 0, 5), &after.narrow(1, 0, 5));
    let later = max_abs_diff(&before.narrow(1, 5, 3), &after.narrow(1, 5, 3));
    assert!(earlier < 1e-6, "positions before the change moved by {earlier}");
    assert!(later > 1e-3, "positions from the change on did not move ({later})");
}

#[test]
fn the_order_of_earlier_tokens_matters() {
    // One layer, so that only rotary embeddings (not causal masking over several layers) can
    // tell the orders apart: without them on the keys, attention would be blind to order.
    let mut one_layer = shape();
    one_layer.num_layers = 1;
    let model = LlamaModel::new(&one_layer, Precision::Fp32, Device::Cpu, 7).unwrap();
    let last = |order: [i64; 4]| {
        let tokens = Tensor::from_slice(&order).view([1, 4]);
        let mut cache = KvCache::new(&model, 1, 4).unwrap();
        model.forward(&tokens, &mut cache, Logits::Last).unwrap()
    };
    assert!(max_abs_diff(&last([10, 20, 30, 40]), &last([20, 10, 30, 40])) > 1e-4);
}

#[test]
fn the_same_seed_draws_the_same_weights() {
    let tokens = Tensor::from_slice(&[1i64, 2, 3, 4]).view([1, 4]);
    let run = |seed| {
        let model = LlamaModel::new(&shape(), Precision::Fp32, Device::Cpu, seed).unwrap();
        let mut cache = KvCache::new(&model, 1, 4).unwrap();
        model.forward(&tokens, &mut cache, Logits::All).unwrap()
    };
    assert_eq!(max_abs_diff(&run(7), &run(7)), 0.0);
    assert!(max_abs_diff(&run(7), &run(8)) > 1e-3);
}

#[test]
fn a_full_cache_is_an_error_not_a_panic() {
    let model = model();
    let mut cache = KvCache::new(&model, 1, 4).unwrap();
    let error = model.forward(&model.random_tokens(1, 5).unwrap(), &mut cache, Logits::Last).err().unwrap();
    assert_eq!(error.to_string(), "KV cache holds 4 tokens per sequence; 5 are needed");
}

#[test]
fn half_precisions_run_on_cpu() {
    for precision in [Precision::Bf16, Precision::Fp16] {
        let model = LlamaModel::new(&shape(), precision, Device::Cpu, 7).unwrap();
        let mut cache = KvCache::new(&model, 2, 8).unwrap();
        let next = model.prefill(&model.random_tokens(2, 8).unwrap(), &mut cache).unwrap();
        assert_eq!(next.size(), [2, 1], "{precision}");
    }
}

#[test]
fn a_randomly_filled_cache_is_a_context_to_decode_after() {
    let model = model();
    let mut cache = KvCache::new(&model, 2, 10).unwrap();
    cache.fill_random(6).unwrap();
    assert_eq!(cache.len(), 6);
    let logits = model.forward(&model.random_tokens(2, 1).unwrap(), &mut cache, Logits::Last).unwrap();
    assert_eq!(cache.len(), 7);
    // The context is attended to: a different random context gives different logits.
    let tokens = Tensor::from_slice(&[3i64, 4]).view([2, 1]);
    let again = |c: &mut KvCache| {
        c.fill_random(6).unwrap();
        model.forward(&tokens, c, Logits::Last).unwrap()
    };
    assert!(max_abs_diff(&again(&mut cache), &again(&mut cache)) > 1e-4);
    assert!(logits.isfinite().all().int64_value(&[]) == 1);
    assert!(cache.fill_random(11).is_err());
}
