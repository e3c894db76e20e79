//! Weights read from Hugging Face safetensors checkpoints that the tests write.

use lynx_models::moe::{MoeLayer, MoeLayout};
use lynx_models::rope::{self, Rope};
use lynx_models::weights::WeightSource;
use lynx_models::{Checkpoint, KvCache, Logits, Model};
use lynx_schema::config::{Activation, ModelShape, Moe, Precision, Router};
use std::path::Path;
use tch::{Device, Kind, Tensor};

const LLAMA: &str = r#"
name = "tiny-llama"
vocab_size = 50
hidden_size = 32
num_layers = 1
rms_norm_eps = 1e-5
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
rope_theta = 10000.0
[mlp]
intermediate_size = 48
"#;

fn shape(text: &str) -> ModelShape {
    ModelShape::from_toml(text, "test").unwrap()
}

/// Normal(0, 0.3) values. Only ever called inside `with_generator`, which holds the lock on
/// libtorch's one global generator: any draw outside it could land inside another test's seeded
/// sequence.
fn randn(shape: &[i64]) -> Tensor {
    Tensor::randn(shape, (Kind::Float, Device::Cpu)) * 0.3
}

fn write(dir: &Path, tensors: &[(String, Tensor)]) {
    let named: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    Tensor::write_safetensors(&named, dir.join("model.safetensors")).unwrap();
}

/// Fixtures draw from libtorch's one global generator, holding lynx's lock on it so that tests
/// running on other threads cannot interleave their draws.
fn llama_tensors() -> Vec<(String, Tensor)> {
    lynx_models::with_generator(Some(21), draw_llama_tensors)
}

fn draw_llama_tensors() -> Vec<(String, Tensor)> {
    let mut t = vec![
        ("model.embed_tokens.weight".to_owned(), randn(&[50, 32])),
        ("model.norm.weight".to_owned(), randn(&[32]) + 1.0),
        ("lm_head.weight".to_owned(), randn(&[50, 32])),
    ];
    let p = "model.layers.0";
    for (name, shape) in [
        ("input_layernorm.weight", vec![32]),
        ("post_attention_layernorm.weight", vec![32]),
        ("self_attn.q_proj.weight", vec![32, 32]),
        ("self_attn.k_proj.weight", vec![16, 32]),
        ("self_attn.v_proj.weight", vec![16, 32]),
        ("self_attn.o_proj.weight", vec![32, 32]),
        ("mlp.gate_proj.weight", vec![48, 32]),
        ("mlp.up_proj.weight", vec![48, 32]),
        ("mlp.down_proj.weight", vec![32, 48]),
    ] {
        t.push((format!("{p}.{name}"), randn(&shape)));
    }
    t
}

/// A one-layer Llama written out op by op from the named tensors.
fn llama_by_hand(w: &[(String, Tensor)], tokens: &Tensor) -> Tensor {
    let get = |name: &str| w.iter().find(|(n, _)| n == name).unwrap().1.shallow_clone();
    let layer = |name: &str| get(&format!("model.layers.0.{name}"));
    let norm = |x: &Tensor, weight: Tensor| x.rms_norm([32], Some(&weight), 1e-5);
    let n = tokens.size()[1];
    let x = Tensor::embedding(&get("model.embed_tokens.weight"), tokens, -1, false, false);
    let h = norm(&x, layer("input_layernorm.weight"));
    let heads = |w: Tensor, count: i64| h.matmul(&w.tr()).view([1, n, count, 8]).transpose(1, 2);
    let table = Rope::new(8, 10000.0, None, Kind::Float, Device::Cpu).unwrap().table(0, n, Kind::Float).unwrap();
    let q = rope::apply(&heads(layer("self_attn.q_proj.weight"), 4), &table).unwrap();
    let k = rope::apply(&heads(layer("self_attn.k_proj.weight"), 2), &table)
        .unwrap()
        .repeat_interleave_self_int(2, 1, None);
    let v = heads(layer("self_attn.v_proj.weight"), 2).repeat_interleave_self_int(2, 1, None);
    let causal = Tensor::ones([n, n], (Kind::Bool, Device::Cpu)).triu(1);
    let scores = (q.matmul(&k.transpose(-1, -2)) / (8f64).sqrt()).masked_fill(&causal, f64::NEG_INFINITY);
    let attended = scores.softmax(-1, Kind::Float).matmul(&v).transpose(1, 2).reshape([1, n, 32]);
    let x = x + attended.matmul(&layer("self_attn.o_proj.weight").tr());
    let h = norm(&x, layer("post_attention_layernorm.weight"));
    let mlp = (h.matmul(&layer("mlp.gate_proj.weight").tr()).silu() * h.matmul(&layer("mlp.up_proj.weight").tr()))
        .matmul(&layer("mlp.down_proj.weight").tr());
    let x = x + mlp;
    norm(&x, get("model.norm.weight")).matmul(&get("lm_head.weight").tr())
}

#[test]
fn a_llama_checkpoint_computes_what_its_tensors_say() {
    let dir = tempfile::tempdir().unwrap();
    let tensors = llama_tensors();
    write(dir.path(), &tensors);
    let checkpoint = Checkpoint::open(dir.path()).unwrap();
    assert_eq!(checkpoint.files.len(), 1);
    let model = Model::load(&shape(LLAMA), &checkpoint, &[0], Some((Device::Cpu, Precision::Fp32))).unwrap();
    let tokens = Tensor::from_slice(&[3i64, 14, 15, 9, 2, 6]).view([1, 6]);
    let mut cache = KvCache::new(&model, 1, 6).unwrap();
    let logits = model.forward(&tokens, &mut cache, Logits::All).unwrap();
    let expected = llama_by_hand(&tensors, &tokens);
    let diff = (&logits - &expected).abs().max().double_value(&[]);
    assert!(diff < 1e-4, "max |Δ| = {diff}");
    assert!(expected.abs().max().double_value(&[]) > 0.1);
}

const MIXTRAL: &str = r#"
name = "tiny-mixtral"
vocab_size = 50
hidden_size = 32
num_layers = 1
rms_norm_eps = 1e-5
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
rope_theta = 10000.0
[moe]
num_experts = 4
experts_per_token = 2
intermediate_size = 24
router = { kind = "softmax" }
"#;

/// The tiny Mixtral's tensors under Mixtral's names (`w1`, `w3`, `w2` for gate, up, down;
/// `swap` writes gate and up the wrong way round) or under the standard ones.
fn moe_tensors(mixtral_names: bool, swap: bool) -> Vec<(String, Tensor)> {
    lynx_models::with_generator(Some(22), || draw_moe_tensors(mixtral_names, swap))
}

fn draw_moe_tensors(mixtral_names: bool, swap: bool) -> Vec<(String, Tensor)> {
    let mut t: Vec<(String, Tensor)> = draw_llama_tensors().into_iter().filter(|(n, _)| !n.contains(".mlp.")).collect();
    let (block, [gate, up, down]) = if mixtral_names {
        ("block_sparse_moe", ["w1", "w3", "w2"])
    } else {
        ("mlp", ["gate_proj", "up_proj", "down_proj"])
    };
    t.push((format!("model.layers.0.{block}.gate.weight"), randn(&[4, 32])));
    for e in 0..4 {
        let (g, u) = (randn(&[24, 32]), randn(&[24, 32]));
        let (g, u) = if swap { (u, g) } else { (g, u) };
        t.push((format!("model.layers.0.{block}.experts.{e}.{gate}.weight"), g));
        t.push((format!("model.layers.0.{block}.experts.{e}.{up}.weight"), u));
        t.push((format!("model.layers.0.{block}.experts.{e}.{down}.weight"), randn(&[32, 24])));
    }
    t
}

#[test]
fn mixtral_names_read_the_same_experts_as_the_standard_ones() {
    let logits = |tensors: Vec<(String, Tensor)>| {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &tensors);
        let checkpoint = Checkpoint::open(dir.path()).unwrap();
        let model = Model::load(&shape(MIXTRAL), &checkpoint, &[0], Some((Device::Cpu, Precision::Fp32))).unwrap();
        let mut cache = KvCache::new(&model, 1, 5).unwrap();
        model.forward(&Tensor::from_slice(&[1i64, 2, 3, 4, 5]).view([1, 5]), &mut cache, Logits::All).unwrap()
    };
    let standard = logits(moe_tensors(false, false));
    let diff = (&logits(moe_tensors(true, false)) - &standard).abs().max().double_value(&[]);
    assert!(diff < 1e-6, "Mixtral's names read other tensors: {diff}");
    // w1 is the gate and w3 the up projection: written the other way round, the model differs.
    let swapped = (&logits(moe_tensors(true, true)) - &standard).abs().max().double_value(&[]);
    assert!(swapped > 1e-4, "{swapped}");
}

#[test]
fn gpt_oss_stacked_experts_split_into_their_gate_up_and_down() {
    let (experts, hidden, width) = (3i64, 8i64, 5i64);
    type Drawn = (Vec<Tensor>, Vec<Tensor>, Vec<Tensor>, Vec<[Tensor; 3]>, [Tensor; 3]);
    let (gates, ups, downs, biases, [router, router_bias, x]): Drawn = lynx_models::with_generator(Some(23), || {
        (
            (0..experts).map(|_| randn(&[width, hidden])).collect(),
            (0..experts).map(|_| randn(&[width, hidden])).collect(),
            (0..experts).map(|_| randn(&[hidden, width])).collect(),
            (0..experts).map(|_| [randn(&[width]), randn(&[width]), randn(&[hidden])]).collect(),
            [randn(&[experts, hidden]), randn(&[experts]), randn(&[4, hidden])],
        )
    });
    // gpt-oss stores [in, out] and interleaves gate (even columns) with up (odd columns).
    let gate_up = Tensor::stack(
        &(0..experts as usize)
            .map(|e| Tensor::stack(&[gates[e].tr(), ups[e].tr()], -1).reshape([hidden, 2 * width]))
            .collect::<Vec<_>>(),
        0,
    );
    let gate_up_bias = Tensor::stack(
        &biases.iter().map(|b| Tensor::stack(&[&b[0], &b[1]], -1).reshape([2 * width])).collect::<Vec<_>>(),
        0,
    );
    let down = Tensor::stack(&downs.iter().map(|d| d.tr()).collect::<Vec<_>>(), 0);
    let down_bias = Tensor::stack(&biases.iter().map(|b| b[2].shallow_clone()).collect::<Vec<_>>(), 0);
    let p = "model.layers.0.mlp";
    let tensors = vec![
        (format!("{p}.router.weight"), router),
        (format!("{p}.router.bias"), router_bias),
        (format!("{p}.experts.gate_up_proj"), gate_up),
        (format!("{p}.experts.gate_up_proj_bias"), gate_up_bias),
        (format!("{p}.experts.down_proj"), down),
        (format!("{p}.experts.down_proj_bias"), down_bias),
    ];
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &tensors);
    let checkpoint = Checkpoint::open(dir.path()).unwrap();
    let config = Moe {
        num_experts: experts as u32,
        experts_per_token: 2,
        intermediate_size: width as u32,
        shared_experts: 0,
        first_dense_layers: 0,
        expert_bias: true,
        router: Router::Softmax { bias: true },
    };
    let source = WeightSource::checkpoint(&checkpoint, Kind::Float, Device::Cpu);
    let layer = MoeLayer::new(&source, p, MoeLayout::GptOss, &config, hidden, width).unwrap();
    let activation = Activation::SwigluClamped { alpha: 1.702, limit: 7.0 };
    for e in 0..experts as usize {
        let gate = (x.matmul(&gates[e].tr()) + &biases[e][0]).clamp_max(7.0);
        let up = (x.matmul(&ups[e].tr()) + &biases[e][1]).clamp(-7.0, 7.0);
        let glu = &gate * (&gate * 1.702).sigmoid();
        let expected = (glu * (up + 1.0)).matmul(&downs[e].tr()) + &biases[e][2];
        let actual = layer.expert(e as i64).unwrap().forward(&x, &activation).unwrap();
        let diff = (actual - expected).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "expert {e}: max |Δ| = {diff}");
    }
}

#[test]
fn a_checkpoint_that_cannot_serve_the_model_says_which_tensor() {
    let load = |tensors: Vec<(String, Tensor)>| {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &tensors);
        let checkpoint = Checkpoint::open(dir.path()).unwrap();
        Model::load(&shape(LLAMA), &checkpoint, &[0], Some((Device::Cpu, Precision::Fp32))).err().unwrap().to_string()
    };
    let missing: Vec<_> = llama_tensors().into_iter().filter(|(n, _)| !n.ends_with("k_proj.weight")).collect();
    let error = load(missing);
    assert!(error.contains("no tensor model.layers.0.self_attn.k_proj.weight"), "{error}");

    let mut misshapen = llama_tensors();
    misshapen[0].1 = lynx_models::with_generator(None, || randn(&[49, 32]));
    let error = load(misshapen);
    assert!(error.contains("model.embed_tokens.weight has shape [49, 32]; the model needs [50, 32]"), "{error}");

    let mut quantised = llama_tensors();
    quantised[0].1 = Tensor::zeros([50, 32], (Kind::Int8, Device::Cpu));
    let error = load(quantised);
    assert!(error.contains("model.embed_tokens.weight is Int8"), "{error}");

    let empty = tempfile::tempdir().unwrap();
    let error = Checkpoint::open(empty.path()).err().unwrap().to_string();
    assert!(error.contains("no *.safetensors files"), "{error}");
}
