//! The decoder's behaviour on CPU with real libtorch, for a tiny model of every architecture in
//! the catalogue: shapes, KV-cached decoding against a full forward pass, causal masking.

use lynx_models::{KvCache, Logits, Model};
use lynx_schema::config::{ModelShape, Precision};
use tch::{Device, Kind, Tensor};

const DENSE: &str = r#"
name = "tiny-dense"
vocab_size = 97
hidden_size = 64
num_layers = 2
rms_norm_eps = 1e-5
init_std = 0.1
[attention]
kind = "gqa"
num_heads = 8
num_kv_heads = 2
rope_theta = 10000.0
[mlp]
intermediate_size = 160
"#;

/// Llama 3.1's RoPE scaling at a short original context, so every branch of it is used.
const LLAMA3: &str = r#"
name = "tiny-llama3"
vocab_size = 97
hidden_size = 64
num_layers = 2
rms_norm_eps = 1e-5
init_std = 0.1
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
rope_theta = 500000.0
rope_scaling = { type = "llama3", factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 64 }
[mlp]
intermediate_size = 160
"#;

const QWEN3: &str = r#"
name = "tiny-qwen3"
vocab_size = 97
hidden_size = 64
num_layers = 2
rms_norm_eps = 1e-6
init_std = 0.1
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
head_dim = 32
rope_theta = 1000000.0
qk_norm = true
bias = "qkv"
[mlp]
intermediate_size = 160
"#;

const MIXTRAL: &str = r#"
name = "tiny-mixtral"
vocab_size = 97
hidden_size = 64
num_layers = 2
rms_norm_eps = 1e-5
init_std = 0.1
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
rope_theta = 1000000.0
[moe]
num_experts = 8
experts_per_token = 2
intermediate_size = 48
router = { kind = "softmax" }
"#;

/// gpt-oss: biases, sinks, a sliding window shorter than the test sequences on even layers,
/// YaRN without truncation, expert biases, a biased router and the clamped SwiGLU.
const GPT_OSS: &str = r#"
name = "tiny-gpt-oss"
vocab_size = 97
hidden_size = 64
num_layers = 4
rms_norm_eps = 1e-5
init_std = 0.1
[attention]
kind = "gqa"
num_heads = 8
num_kv_heads = 2
head_dim = 16
rope_theta = 150000.0
rope_scaling = { type = "yarn", factor = 32.0, original_max_position = 64, beta_fast = 32.0, beta_slow = 1.0, truncate = false }
bias = "all"
sinks = true
sliding_window = { size = 4, layers = "even" }
[moe]
num_experts = 8
experts_per_token = 2
intermediate_size = 48
expert_bias = true
router = { kind = "softmax", bias = true }
[activation]
kind = "swiglu-clamped"
alpha = 1.702
limit = 7.0
"#;

/// DeepSeek-V3: MLA with a low-rank query, YaRN with mscale, one dense layer first, then experts
/// with group-limited sigmoid routing and a shared expert.
const DEEPSEEK: &str = r#"
name = "tiny-deepseek"
vocab_size = 97
hidden_size = 64
num_layers = 3
rms_norm_eps = 1e-6
init_std = 0.1
[attention]
kind = "mla"
num_heads = 4
q_lora_rank = 24
kv_lora_rank = 16
qk_nope_head_dim = 8
qk_rope_head_dim = 4
v_head_dim = 8
rope_theta = 10000.0
rope_scaling = { type = "yarn", factor = 40.0, original_max_position = 64, beta_fast = 32.0, beta_slow = 1.0, mscale = 1.0, mscale_all_dim = 1.0 }
[mlp]
intermediate_size = 128
[moe]
num_experts = 16
experts_per_token = 4
intermediate_size = 24
shared_experts = 1
first_dense_layers = 1
router = { kind = "sigmoid-grouped", groups = 4, topk_groups = 2, scaling = 2.5 }
"#;

const ALL: [&str; 6] = [DENSE, LLAMA3, QWEN3, MIXTRAL, GPT_OSS, DEEPSEEK];

fn shape(text: &str) -> ModelShape {
    ModelShape::from_toml(text, "test shape").unwrap()
}

fn model(text: &str) -> Model {
    Model::new(&shape(text), Precision::Fp32, Device::Cpu, 7).unwrap()
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

fn name(text: &str) -> String {
    shape(text).name
}

#[test]
fn logits_have_batch_tokens_vocab_shape() {
    for text in ALL {
        let model = model(text);
        let tokens = model.random_tokens(3, 5).unwrap();
        let mut cache = KvCache::new(&model, 3, 16).unwrap();
        let all = model.forward(&tokens, &mut cache, Logits::All).unwrap();
        assert_eq!(all.size(), [3, 5, 97], "{}", name(text));
        assert_eq!(all.kind(), Kind::Float);
        assert_eq!(cache.len(), 5);
        let mut cache = KvCache::new(&model, 3, 16).unwrap();
        let last = model.forward(&tokens, &mut cache, Logits::Last).unwrap();
        assert_eq!(last.size(), [3, 1, 97]);
        assert!(max_abs_diff(&last, &all.narrow(1, 4, 1)) < 1e-5, "{}", name(text));
        let next = model.decode(&model.random_tokens(3, 1).unwrap(), &mut cache).unwrap();
        assert_eq!(next.size(), [3, 1]);
        assert_eq!(cache.len(), 6);
    }
}

#[test]
fn cached_token_by_token_decoding_matches_a_full_forward() {
    for text in ALL {
        let model = model(text);
        let tokens = model.random_tokens(2, 12).unwrap();
        let mut full_cache = KvCache::new(&model, 2, 12).unwrap();
        let full = model.forward(&tokens, &mut full_cache, Logits::All).unwrap();
        // Logits must carry signal, or matching them would prove nothing.
        assert!(full.std(false).double_value(&[]) > 1e-3, "{}", name(text));

        let mut cache = KvCache::new(&model, 2, 12).unwrap();
        for position in 0..12 {
            let step = model.forward(&tokens.narrow(1, position, 1), &mut cache, Logits::All).unwrap();
            let diff = max_abs_diff(&step, &full.narrow(1, position, 1));
            assert!(diff < 1e-4, "{}: position {position}: max |Δ| = {diff}", name(text));
        }
    }
}

#[test]
fn a_chunk_after_cached_tokens_matches_a_full_forward() {
    // Exercises the explicit mask path (several new tokens after a non-empty cache), and for the
    // sliding window a chunk whose first queries see keys the last ones must not.
    for text in ALL {
        let model = model(text);
        let tokens = model.random_tokens(2, 11).unwrap();
        let mut full_cache = KvCache::new(&model, 2, 11).unwrap();
        let full = model.forward(&tokens, &mut full_cache, Logits::All).unwrap();
        let mut cache = KvCache::new(&model, 2, 11).unwrap();
        let _ = model.forward(&tokens.narrow(1, 0, 5), &mut cache, Logits::All).unwrap();
        let chunk = model.forward(&tokens.narrow(1, 5, 6), &mut cache, Logits::All).unwrap();
        let diff = max_abs_diff(&chunk, &full.narrow(1, 5, 6));
        assert!(diff < 1e-4, "{}: max |Δ| = {diff}", name(text));
    }
}

#[test]
fn a_position_sees_no_later_token() {
    for text in ALL {
        let model = model(text);
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
        // Not bit-exact for MoE models: the later token changes how tokens group per expert, so
        // the expert matmuls run over other row counts. A leak would move them by orders more.
        assert!(earlier < 1e-5, "{}: positions before the change moved by {earlier}", name(text));
        assert!(later > 1e-4, "{}: positions from the change on did not move ({later})", name(text));
    }
}

#[test]
fn a_sliding_window_layer_forgets_tokens_beyond_its_window() {
    // With every layer sliding over 4 tokens and one layer, position 9 cannot see position 2.
    let text = GPT_OSS.replace("layers = \"even\"", "layers = \"all\"").replace("num_layers = 4", "num_layers = 1");
    let model = model(&text);
    let tokens = model.random_tokens(1, 10).unwrap();
    let changed = tokens.copy();
    let _ = changed.narrow(1, 2, 1).fill_((tokens.int64_value(&[0, 2]) + 1) % 97);
    let last = |t: &Tensor| {
        let mut cache = KvCache::new(&model, 1, 10).unwrap();
        model.forward(t, &mut cache, Logits::Last).unwrap()
    };
    assert!(max_abs_diff(&last(&tokens), &last(&changed)) < 1e-6);
    // …but position 5 can (window 4: positions 2..=5).
    let upto = |t: &Tensor| {
        let mut cache = KvCache::new(&model, 1, 6).unwrap();
        model.forward(&t.narrow(1, 0, 6), &mut cache, Logits::Last).unwrap()
    };
    assert!(max_abs_diff(&upto(&tokens), &upto(&changed)) > 1e-4);
}

#[test]
fn the_order_of_earlier_tokens_matters() {
    // One layer, so that only rotary embeddings (not causal masking over several layers) can
    // tell the orders apart: without them on the keys, attention would be blind to order.
    for text in [DENSE, DEEPSEEK] {
        let mut one_layer = shape(text);
        one_layer.num_layers = 1;
        let model = Model::new(&one_layer, Precision::Fp32, Device::Cpu, 7).unwrap();
        let last = |order: [i64; 4]| {
            let tokens = Tensor::from_slice(&order).view([1, 4]);
            let mut cache = KvCache::new(&model, 1, 4).unwrap();
            model.forward(&tokens, &mut cache, Logits::Last).unwrap()
        };
        assert!(max_abs_diff(&last([10, 20, 30, 40]), &last([20, 10, 30, 40])) > 1e-4, "{}", name(text));
    }
}

#[test]
fn the_same_seed_draws_the_same_weights() {
    let tokens = Tensor::from_slice(&[1i64, 2, 3, 4]).view([1, 4]);
    let run = |seed| {
        let model = Model::new(&shape(DENSE), Precision::Fp32, Device::Cpu, seed).unwrap();
        let mut cache = KvCache::new(&model, 1, 4).unwrap();
        model.forward(&tokens, &mut cache, Logits::All).unwrap()
    };
    assert_eq!(max_abs_diff(&run(7), &run(7)), 0.0);
    assert!(max_abs_diff(&run(7), &run(8)) > 1e-3);
}

#[test]
fn a_full_cache_is_an_error_not_a_panic() {
    let model = model(DENSE);
    let mut cache = KvCache::new(&model, 1, 4).unwrap();
    let error = model.forward(&model.random_tokens(1, 5).unwrap(), &mut cache, Logits::Last).err().unwrap();
    assert_eq!(error.to_string(), "KV cache holds 4 tokens per sequence; 5 are needed");
}

#[test]
fn half_precisions_run_on_cpu() {
    for text in ALL {
        for precision in [Precision::Bf16, Precision::Fp16] {
            let model = Model::new(&shape(text), precision, Device::Cpu, 7).unwrap();
            let mut cache = KvCache::new(&model, 2, 8).unwrap();
            let next = model.prefill(&model.random_tokens(2, 8).unwrap(), &mut cache).unwrap();
            assert_eq!(next.size(), [2, 1], "{} {precision}", name(text));
        }
    }
}

#[test]
fn fp8_runs_every_architecture_where_the_scaled_matmul_exists() {
    // libtorch 2.11 has a CPU e4m3 scaled matmul; a device without one is refused up front.
    for text in ALL {
        let model = Model::new(&shape(text), Precision::Fp8, Device::Cpu, 7).unwrap();
        let mut cache = KvCache::new(&model, 2, 9).unwrap();
        let logits = model.forward(&model.random_tokens(2, 8).unwrap(), &mut cache, Logits::All).unwrap();
        assert_eq!(logits.size(), [2, 8, 97], "{}", name(text));
        assert!(logits.isfinite().all().int64_value(&[]) == 1, "{}", name(text));
        let next = model.decode(&model.random_tokens(2, 1).unwrap(), &mut cache).unwrap();
        assert_eq!(next.size(), [2, 1]);
    }
    match lynx_models::linear::fp8_format(Device::Cuda(0)) {
        Ok(_) => assert!(tch::Cuda::is_available(), "a device that is not there cannot run fp8"),
        Err(error) => assert!(error.to_string().starts_with("fp8 is not supported on Cuda(0)"), "{error}"),
    }
}

#[test]
fn a_randomly_filled_cache_is_a_context_to_decode_after() {
    for text in [DENSE, DEEPSEEK] {
        let model = model(text);
        let mut cache = KvCache::new(&model, 2, 10).unwrap();
        cache.fill_random(6).unwrap();
        assert_eq!(cache.len(), 6);
        let logits = model.forward(&model.random_tokens(2, 1).unwrap(), &mut cache, Logits::Last).unwrap();
        assert_eq!(cache.len(), 7);
        assert!(logits.isfinite().all().int64_value(&[]) == 1);
        // The context is attended to: a different random context gives different logits.
        let tokens = Tensor::from_slice(&[3i64, 4]).view([2, 1]);
        let again = |c: &mut KvCache| {
            c.fill_random(6).unwrap();
            model.forward(&tokens, c, Logits::Last).unwrap()
        };
        assert!(max_abs_diff(&again(&mut cache), &again(&mut cache)) > 1e-4, "{}", name(text));
        assert!(cache.fill_random(11).is_err());
    }
}

/// Regression (issue 15): each cell records the attention kernel its steps ran. MLA decode and
/// attention sinks run lynx's explicit matmuls; everything else asks libtorch which SDPA kernel
/// the shapes get (the CPU has a flash kernel and the math one).
#[test]
fn every_architecture_names_the_attention_kernel_of_a_step() {
    use lynx_schema::result::AttentionKernel;
    for text in ALL {
        let model = model(text);
        let mut cache = KvCache::new(&model, 2, 16).unwrap();
        let prefill = model.attention_kernel(&cache, 8).unwrap().unwrap();
        cache.fill_random(8).unwrap();
        let decode = model.attention_kernel(&cache, 1).unwrap().unwrap();
        let fused = [AttentionKernel::Flash, AttentionKernel::Math];
        // Experts: grouped where the CPU runs _grouped_mm (fp32); none for a dense model.
        let experts = model.expert_kernel(2);
        assert_eq!(experts.is_some(), shape(text).moe.is_some(), "{}", name(text));
        assert!(experts.is_none_or(|e| e == lynx_models::experts::ExpertKernel::Grouped), "{}", name(text));
        match name(text).as_str() {
            "tiny-gpt-oss" => assert_eq!((prefill, decode), (AttentionKernel::Explicit, AttentionKernel::Explicit)),
            "tiny-deepseek" => {
                assert!(fused.contains(&prefill) && decode == AttentionKernel::Explicit, "{prefill} {decode}")
            }
            other => assert!(fused.contains(&prefill) && fused.contains(&decode), "{other}: {prefill} {decode}"),
        }
    }
}

/// Regression (issue 15): the step a CUDA graph captures (its position held on the device, the
/// whole cache attended with later keys masked out, nothing read back to the host) gives the
/// eager step's logits, token after token, for every architecture (sliding windows past their
/// size, sinks, MLA, experts).
#[test]
fn the_device_positioned_step_gives_the_eager_steps_logits() {
    for text in ALL {
        let model = model(text);
        let mut eager = KvCache::new(&model, 2, 12).unwrap();
        eager.fill_random(5).unwrap();
        let on_device = eager.duplicate().unwrap();
        let mut position = Tensor::from_slice(&[5i64]);
        let mut tokens = model.random_tokens(2, 1).unwrap();
        for step in 0..6 {
            let expected = model.forward(&tokens, &mut eager, Logits::Last).unwrap();
            let actual = model.decode_on_device(&tokens, &on_device, &position).unwrap();
            assert_eq!(actual.size(), expected.size());
            let diff = max_abs_diff(&actual, &expected);
            assert!(diff < 1e-4, "{} step {step}: max |Δ| = {diff}", name(text));
            tokens = expected.argmax(-1, false);
            let _ = position.f_add_scalar_(1).unwrap();
        }
        assert_eq!(eager.len(), 11);
    }
}

/// Issue 16: a serving loop batches sequences of different lengths. A right-padded prefill takes
/// each prompt's first token from its own last position, and a decode step with one device-held
/// position a row gives every row the logits its sequence gets decoding alone, token after token,
/// for every architecture (windows past their size, sinks, MLA, experts); a row moved to another
/// slot decodes on as before.
#[test]
fn sequences_of_different_lengths_batched_in_rows_decode_as_they_do_alone() {
    let lens = [5i64, 9, 3];
    for text in ALL {
        let model = model(text);
        let prompts: Vec<Tensor> = lens
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                lynx_models::with_generator(Some(40 + i as u64), || {
                    Tensor::randint(97, [1, len], (Kind::Int64, Device::Cpu))
                })
            })
            .collect();
        // Each sequence alone: its prompt, then greedy steps.
        let mut alone: Vec<KvCache> = lens.iter().map(|_| KvCache::new(&model, 1, 24).unwrap()).collect();
        let mut next: Vec<Tensor> = prompts
            .iter()
            .zip(&mut alone)
            .map(|(prompt, cache)| model.forward(prompt, cache, Logits::Last).unwrap().argmax(-1, false))
            .collect();
        // Batched: the prompts right-padded with token 0 into rows of one pool.
        let pool = KvCache::new(&model, 3, 24).unwrap();
        let longest = *lens.iter().max().unwrap();
        let padded = Tensor::zeros([3, longest], (Kind::Int64, Device::Cpu));
        for (row, prompt) in prompts.iter().enumerate() {
            padded.narrow(0, row as i64, 1).narrow(1, 0, prompt.size()[1]).copy_(prompt);
        }
        let last = Tensor::from_slice(&lens.map(|l| l - 1));
        let mut rows = pool.rows(0, 3, 0).unwrap();
        let mut tokens = model.prefill_rows(&padded, &last, &mut rows).unwrap();
        assert_eq!(tokens, Tensor::cat(&next, 0), "{}: first tokens", name(text));
        let mut positions = Tensor::from_slice(&lens);
        let mut order = vec![0usize, 1, 2];
        for step in 0..8 {
            if step == 4 {
                // Sequence 0 finishes: the last row moves into its slot.
                pool.move_row(2, 0, lens[2] + 4).unwrap();
                order = vec![2, 1];
                tokens = Tensor::cat(&[tokens.narrow(0, 2, 1), tokens.narrow(0, 1, 1)], 0);
                positions = Tensor::from_slice(&[lens[2] + 4, lens[1] + 4]);
            }
            let batch = order.len() as i64;
            let span = positions.max().int64_value(&[]) + 1;
            let batched = model.decode_rows(&tokens, &pool.rows(0, batch, 0).unwrap(), &positions, span).unwrap();
            for (row, &i) in order.iter().enumerate() {
                let expected = model.forward(&next[i], &mut alone[i], Logits::Last).unwrap();
                let diff = max_abs_diff(&batched.narrow(0, row as i64, 1), &expected);
                assert!(diff < 1e-4, "{} step {step} sequence {i}: max |Δ| = {diff}", name(text));
                next[i] = expected.argmax(-1, false);
            }
            tokens = batched.argmax(-1, false);
            positions += 1;
        }
    }
}

/// Regression (issue 15): fp8 inputs are scaled statically, as serving engines run fp8: one
/// scale per layer, calibrated once, in place of an amax and a division in every call. On the
/// calibration prompt itself the static scales are the dynamic ones, so the logits are the same;
/// on another prompt inputs beyond a scale saturate, and the logits stay finite and near.
#[test]
fn fp8_input_scales_are_calibrated_once_and_keep_the_logits_close() {
    let prompt =
        |seed| lynx_models::with_generator(Some(seed), || Tensor::randint(97, [2, 12], (Kind::Int64, Device::Cpu)));
    let (calibration, other) = (prompt(8), prompt(9));
    for text in ALL {
        let full = Model::new(&shape(text), Precision::Bf16, Device::Cpu, 7).unwrap();
        let fp8 = Model::new(&shape(text), Precision::Fp8, Device::Cpu, 7).unwrap();
        let logits = |model: &Model, tokens: &Tensor| {
            let mut cache = KvCache::new(model, 2, 12).unwrap();
            model.forward(tokens, &mut cache, Logits::All).unwrap()
        };
        let error = |tokens: &Tensor| {
            let reference = logits(&full, tokens);
            (logits(&fp8, tokens) - &reference).norm().double_value(&[]) / reference.norm().double_value(&[])
        };
        let dynamic = error(&calibration);
        let layers = fp8.calibrate_fp8(&calibration).unwrap();
        assert!(layers >= 4 * shape(text).num_layers as usize, "{}: {layers} static scales", name(text));
        let same = error(&calibration);
        assert!((same - dynamic).abs() <= 1e-3 * dynamic, "{}: dynamic {dynamic}, static {same}", name(text));
        let elsewhere = error(&other);
        assert!(elsewhere.is_finite() && elsewhere < 0.5, "{}: {elsewhere} on another prompt", name(text));
        assert_eq!(full.calibrate_fp8(&calibration).unwrap(), 0, "a model without fp8 layers has nothing to calibrate");
    }
}

/// A tallied step counts the distinct experts each MoE layer routed its tokens to, and gives the
/// logits the step gives untallied: a decode step of one token touches exactly its k experts in
/// every layer, a prompt of many tokens between k and all of them; a dense model has no tally,
/// and a tally ends with its step.
#[test]
fn a_tallied_step_counts_the_experts_its_tokens_touched() {
    let mixtral = model(MIXTRAL);
    let run = |model: &Model, tokens: &Tensor| {
        let mut cache = KvCache::new(model, tokens.size()[0], 64).unwrap();
        model.forward(tokens, &mut cache, Logits::All).unwrap()
    };
    let one = Tensor::from_slice(&[5i64]).view([1, 1]);
    let (logits, touched) = mixtral.tally_experts(|| Ok(run(&mixtral, &one))).unwrap();
    assert_eq!(touched, Some(2.0), "one token touches its k = 2 experts in each layer");
    assert!(logits.equal(&run(&mixtral, &one)), "tallying changed the step");
    let prompt = lynx_models::with_generator(Some(31), || Tensor::randint(97, [4, 16], (Kind::Int64, Device::Cpu)));
    let (_, touched) = mixtral.tally_experts(|| Ok(run(&mixtral, &prompt))).unwrap();
    let touched = touched.unwrap();
    assert!((2.0..=8.0).contains(&touched) && touched > 2.0, "64 tokens over 8 experts: {touched}");
    let (_, after) = mixtral.tally_experts(|| Ok(run(&mixtral, &one))).unwrap();
    assert_eq!(after, Some(2.0), "a tally holds its own step's counts only");
    let dense = model(LLAMA3);
    assert_eq!(dense.tally_experts(|| Ok(run(&dense, &one))).unwrap().1, None);
}
