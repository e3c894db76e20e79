//! Weights read from Hugging Face safetensors checkpoints that the tests write.

use lynx_models::moe::{MoeLayer, MoeLayout};
use lynx_models::rope::{self, Rope};
use lynx_models::weights::WeightSource;
use lynx_models::{Checkpoint, KvCache, Logits, Model};
use lynx_schema::config::{shard, Activation, ModelShape, Moe, Precision, Router, Scale};
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

    // Its head-only part (what a layer subset is extrapolated with) computes its head alone with
    // the model's own weights: the embedding, final norm and lm head, with no layer between.
    let head = model.head_only();
    let mut cache = KvCache::new(&head, 1, 6).unwrap();
    let logits = head.forward(&tokens, &mut cache, Logits::All).unwrap();
    let get = |name: &str| tensors.iter().find(|(n, _)| n == name).unwrap().1.shallow_clone();
    let x = Tensor::embedding(&get("model.embed_tokens.weight"), &tokens, -1, false, false);
    let head_only = x.rms_norm([32], Some(&get("model.norm.weight")), 1e-5).matmul(&get("lm_head.weight").tr());
    let diff = (&logits - &head_only).abs().max().double_value(&[]);
    assert!(diff < 1e-5, "max |Δ| = {diff}");
    assert!((&expected - &head_only).abs().max().double_value(&[]) > 1e-3, "the model itself keeps its layer");
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
    assert!(error.contains("model.embed_tokens.weight is I8; lynx reads fp32, bf16 and fp16"), "{error}");

    let empty = tempfile::tempdir().unwrap();
    let error = Checkpoint::open(empty.path()).err().unwrap().to_string();
    assert!(error.contains("no *.safetensors files"), "{error}");
}

/// Logits of `model` over a fixed prompt.
fn prompt_logits(model: &Model) -> Tensor {
    // Tokens every shard's vocabulary holds (the first 13 at tp 4).
    let tokens = Tensor::from_slice(&[3i64, 11, 12, 9, 2, 6]).view([1, 6]);
    let mut cache = KvCache::new(model, 1, 6).unwrap();
    model.forward(&tokens, &mut cache, Logits::All).unwrap()
}

/// A tensor-parallel shard of a checkpoint reads, of each tensor, the part the first device
/// holds: the model it builds is the one built from those parts cut by hand and stored whole.
/// The tiny Llama at tp 2 (2 of 4 query heads, 1 of 2 key/value heads, 24 of 48 MLP rows, 25
/// of 50 vocabulary rows) and at tp 4 (its 2 key/value heads replicated to 1 a device, 13 of
/// 50 vocabulary rows: padded up to a multiple of 4).
#[test]
fn a_tensor_parallel_shard_of_a_checkpoint_reads_the_first_devices_part() {
    let tensors = llama_tensors();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &tensors);
    for (tp, heads, kv, width, vocab) in [(2i64, 2i64, 1i64, 24i64, 25i64), (4, 1, 1, 12, 13)] {
        let sharded = shard(&shape(LLAMA), &Scale { layers: None, tp: tp as u32 }).unwrap();
        let checkpoint = Checkpoint::open(dir.path()).unwrap().shard(tp as u32);
        let model = Model::load(&sharded, &checkpoint, &[0], Some((Device::Cpu, Precision::Fp32))).unwrap();
        // The same parts, cut by hand: rows of column-parallel projections and of the
        // vocabulary, columns of row-parallel ones, norms whole.
        let by_hand: Vec<(String, Tensor)> = tensors
            .iter()
            .map(|(name, t)| {
                let part = match name.rsplit('.').nth(1).unwrap() {
                    "q_proj" => t.narrow(0, 0, heads * 8),
                    "k_proj" | "v_proj" => t.narrow(0, 0, kv * 8),
                    "o_proj" => t.narrow(1, 0, heads * 8),
                    "gate_proj" | "up_proj" => t.narrow(0, 0, width),
                    "down_proj" => t.narrow(1, 0, width),
                    "embed_tokens" | "lm_head" => t.narrow(0, 0, vocab),
                    _ => t.shallow_clone(),
                };
                (name.clone(), part.contiguous())
            })
            .collect();
        let cut = tempfile::tempdir().unwrap();
        write(cut.path(), &by_hand);
        let whole = Checkpoint::open(cut.path()).unwrap();
        let expected = Model::load(&sharded, &whole, &[0], Some((Device::Cpu, Precision::Fp32))).unwrap();
        let (logits, expected) = (prompt_logits(&model), prompt_logits(&expected));
        assert_eq!(logits.size(), [1, 6, vocab], "tp {tp}");
        assert!(logits.equal(&expected), "tp {tp}: the shard read other parts than the first device's");
        // Read unsharded, a shard's shapes are a checkpoint that cannot serve the model.
        let unsharded = Checkpoint::open(dir.path()).unwrap();
        let error = Model::load(&sharded, &unsharded, &[0], None).err().unwrap().to_string();
        assert!(error.contains(&format!("model.embed_tokens.weight has shape [50, 32]; the model needs [{vocab}, 32]")));
    }
    // A shard's part must be the share tp gives: a norm of another width is not one.
    let mut misshapen = llama_tensors();
    misshapen[1].1 = lynx_models::with_generator(None, || randn(&[40]));
    let other = tempfile::tempdir().unwrap();
    write(other.path(), &misshapen);
    let sharded = shard(&shape(LLAMA), &Scale { layers: None, tp: 2 }).unwrap();
    let checkpoint = Checkpoint::open(other.path()).unwrap().shard(2);
    let error = Model::load(&sharded, &checkpoint, &[0], None).err().unwrap().to_string();
    assert!(
        error.contains(
            "model.norm.weight has shape [40]; the model needs [32] (the first device's part of it, under 2-way"
        ),
        "{error}"
    );
}

/// gpt-oss's stacked experts, read one expert at a time, and as a tensor-parallel shard: each
/// expert's first half of its interleaved gate/up columns (so the first gate and up rows), and
/// its down projection's first rows (stored [in, out]).
#[test]
fn gpt_oss_stacked_experts_read_as_a_shard_keep_their_first_gate_and_up_rows() {
    let (experts, hidden, width) = (2i64, 8i64, 6i64);
    let (gate_up, gate_up_bias, down, down_bias, router, router_bias) = lynx_models::with_generator(Some(24), || {
        (
            randn(&[experts, hidden, 2 * width]),
            randn(&[experts, 2 * width]),
            randn(&[experts, width, hidden]),
            randn(&[experts, hidden]),
            randn(&[experts, hidden]),
            randn(&[experts]),
        )
    });
    let p = "model.layers.0.mlp";
    let named = |gate_up: &Tensor, gate_up_bias: &Tensor, down: &Tensor| {
        vec![
            (format!("{p}.router.weight"), router.shallow_clone()),
            (format!("{p}.router.bias"), router_bias.shallow_clone()),
            (format!("{p}.experts.gate_up_proj"), gate_up.contiguous()),
            (format!("{p}.experts.gate_up_proj_bias"), gate_up_bias.contiguous()),
            (format!("{p}.experts.down_proj"), down.contiguous()),
            (format!("{p}.experts.down_proj_bias"), down_bias.shallow_clone()),
        ]
    };
    let (whole, cut) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(whole.path(), &named(&gate_up, &gate_up_bias, &down));
    write(
        cut.path(),
        &named(&gate_up.narrow(2, 0, width), &gate_up_bias.narrow(1, 0, width), &down.narrow(1, 0, width / 2)),
    );
    let config = Moe {
        num_experts: experts as u32,
        experts_per_token: 2,
        intermediate_size: (width / 2) as u32,
        shared_experts: 0,
        first_dense_layers: 0,
        expert_bias: true,
        router: Router::Softmax { bias: true },
    };
    let layer = |checkpoint: &Checkpoint| {
        let source = WeightSource::checkpoint(checkpoint, Kind::Float, Device::Cpu);
        MoeLayer::new(&source, p, MoeLayout::GptOss, &config, hidden, width / 2).unwrap()
    };
    let sharded = Checkpoint::open(whole.path()).unwrap().shard(2);
    let (layer, expected) = (layer(&sharded), layer(&Checkpoint::open(cut.path()).unwrap()));
    let x = lynx_models::with_generator(Some(25), || randn(&[3, hidden]));
    let activation = Activation::SwigluClamped { alpha: 1.702, limit: 7.0 };
    for e in 0..experts {
        let (actual, wanted) = (layer.expert(e).unwrap(), expected.expert(e).unwrap());
        assert!(
            actual.forward(&x, &activation).unwrap().equal(&wanted.forward(&x, &activation).unwrap()),
            "expert {e}"
        );
    }
}

/// A safetensors file written byte by byte: `header` as its JSON header, then `data` bytes.
fn raw(dir: &Path, file: &str, header: &str, data: usize) {
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.resize(bytes.len() + data, 0);
    std::fs::write(dir.join(file), bytes).unwrap();
}

/// A checkpoint file that is not what its header says gets one error naming the file and what is
/// wrong, when it is opened (before any tensor is read); a tensor of a type lynx does not read,
/// when it is asked for.
#[test]
fn a_corrupt_or_hostile_checkpoint_file_is_refused_naming_it() {
    let opened = |files: &[(&str, &str, usize)]| {
        let dir = tempfile::tempdir().unwrap();
        for (file, header, data) in files {
            raw(dir.path(), file, header, *data);
        }
        Checkpoint::open(dir.path()).map(|_| ()).err().map(|e| e.to_string()).unwrap_or_default()
    };
    let tensor = |name: &str, dtype: &str, shape: &str, offsets: &str| {
        format!(r#"{{"{name}":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#)
    };
    for (files, said) in [
        (vec![("a.safetensors", "", 0)], "a.safetensors: its header is not a safetensors header: EOF"),
        (vec![("a.safetensors", "{not json", 0)], "a.safetensors: its header is not a safetensors header"),
        (vec![("a.safetensors", r#"{"w":{"dtype":"F32"}}"#, 0)], "a.safetensors: tensor w: missing field"),
        (
            vec![("a.safetensors", &tensor("w", "F32", "[2, 2]", "[0, 16]"), 8)],
            "tensor w lies at bytes 0..16 of a data section of 8",
        ),
        (vec![("a.safetensors", &tensor("w", "F32", "[2, 2]", "[8, 4]"), 16)], "tensor w lies at bytes 8..4"),
        (
            vec![("a.safetensors", &tensor("w", "F32", "[2, 3]", "[0, 16]"), 16)],
            "tensor w of F32 [2, 3] holds 16 bytes",
        ),
        (vec![("a.safetensors", &tensor("w", "F32", "[-1]", "[0, 4]"), 4)], "a.safetensors: tensor w: invalid value"),
        (vec![("a.safetensors", &tensor("w", "F32", "[4294967296, 4294967296]", "[0, 4]"), 4)], "tensor w has shape"),
        (
            vec![
                ("a.safetensors", &tensor("w", "F32", "[1]", "[0, 4]"), 4),
                ("b.safetensors", &tensor("w", "F32", "[1]", "[0, 4]"), 4),
            ],
            "tensor w is in both a.safetensors and b.safetensors",
        ),
    ] {
        let error = opened(&files);
        assert!(error.contains(said), "{files:?}: {error}");
    }
    // A header that claims more bytes than the file has, and a file too short to say.
    for (bytes, said) in [
        (
            u64::MAX.to_le_bytes().to_vec(),
            format!("not a safetensors file: a header of {} bytes in a file of 8", u64::MAX),
        ),
        (vec![1, 0, 0], "not a safetensors file (3 bytes)".to_owned()),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.safetensors"), bytes).unwrap();
        let error = Checkpoint::open(dir.path()).err().unwrap().to_string();
        assert!(error.contains(&said), "{error}");
    }

    // Hugging Face's index of a sharded checkpoint names a file that did not download, or a
    // tensor no file holds; an index that agrees with the files says nothing; one that is not an
    // index is refused naming it.
    let indexed = |index: &str| {
        let dir = tempfile::tempdir().unwrap();
        raw(dir.path(), "model-00001-of-00002.safetensors", &tensor("a", "F32", "[1]", "[0, 4]"), 4);
        std::fs::write(dir.path().join("model.safetensors.index.json"), index).unwrap();
        Checkpoint::open(dir.path()).map(|_| ()).err().map(|e| e.to_string()).unwrap_or_default()
    };
    let error = indexed(
        r#"{"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}"#,
    );
    assert!(
        error.contains(
            "model.safetensors.index.json: it names 1 file(s) the folder lacks (model-00002-of-00002.safetensors): the \
             checkpoint is incomplete"
        ),
        "{error}"
    );
    let error = indexed(
        r#"{"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}}"#,
    );
    assert!(error.contains("it names 1 tensor(s) no file holds (c)"), "{error}");
    assert_eq!(indexed(r#"{"weight_map": {"a": "model-00001-of-00002.safetensors"}}"#), "");
    let error = indexed("[1, 2]");
    assert!(error.contains("model.safetensors.index.json: not a safetensors index"), "{error}");

    // A folder named as a checkpoint file, and a FIFO (opening which would wait for a writer).
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("a.safetensors")).unwrap();
    let error = Checkpoint::open(dir.path()).err().unwrap().to_string();
    assert!(error.contains("a.safetensors: not a regular file"), "{error}");
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("a.safetensors");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let error = Checkpoint::open(dir.path()).err().unwrap().to_string();
    assert!(error.contains("a.safetensors: not a regular file"), "{error}");

    // Block-scaled fp8 stored as it is: indexed, and refused by its type when asked for.
    let dir = tempfile::tempdir().unwrap();
    raw(dir.path(), "a.safetensors", &tensor("w", "F8_E4M3", "[2, 2]", "[0, 4]"), 4);
    let checkpoint = Checkpoint::open(dir.path()).unwrap();
    let error = checkpoint.get("w", &[2, 2]).err().unwrap().to_string();
    assert!(error.contains("tensor w is F8_E4M3; lynx reads fp32, bf16 and fp16 checkpoints"), "{error}");
    let error = checkpoint.get_at("w", 2, &[2]).err().unwrap().to_string();
    assert!(error.contains("tensor w has shape [2, 2], with no entry 2 along its first dimension"), "{error}");
}

/// What a model read of a checkpoint: each of its 12 tensors once with its bytes, and one
/// digest over a line a tensor in name order, the same whatever was read before it, which a
/// shard's parts and another byte change; a tensor that reads differently the second time (its
/// file rewritten while lynx reads it) is refused.
#[test]
fn what_a_model_read_of_a_checkpoint_is_counted_and_digested() {
    use lynx_schema::result::hex;
    use sha2::{Digest, Sha256};
    let tensors = llama_tensors();
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &tensors);
    let load = |checkpoint: &Checkpoint, shape: &ModelShape| {
        let (model, read) =
            checkpoint.reading(|| Model::load(shape, checkpoint, &[0], Some((Device::Cpu, Precision::Fp32))));
        model.map(|_| read)
    };
    let checkpoint = Checkpoint::open(dir.path()).unwrap();
    let read = load(&checkpoint, &shape(LLAMA)).unwrap();
    let bytes = |t: &Tensor| -> Vec<u8> {
        let values: Vec<f32> = Vec::try_from(t.contiguous().flatten(0, -1)).unwrap();
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    let mut lines: Vec<String> = tensors
        .iter()
        .map(|(name, t)| format!("{name} F32 {:?} {}\n", t.size(), hex(&Sha256::digest(bytes(t)))))
        .collect();
    lines.sort();
    assert_eq!((read.tensors, read.bytes), (12, tensors.iter().map(|(_, t)| bytes(t).len() as u64).sum()));
    assert_eq!(read.sha256, hex(&Sha256::digest(lines.concat())));
    // The names read, and a tensor held to one of them from the headers alone.
    let mut names: Vec<String> = tensors.iter().map(|(name, _)| name.clone()).collect();
    names.sort();
    assert_eq!(checkpoint.names_read(), names);
    let (q, o, k) = (
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.o_proj.weight",
        "model.layers.0.self_attn.k_proj.weight",
    );
    assert!(checkpoint.stored_like(q, o).is_ok());
    let error = checkpoint.stored_like(k, o).err().unwrap().to_string();
    assert!(
        error.ends_with(&format!(
            "tensor {k} is F32 [16, 32], where {o}, which the model read as it will read it, is F32 [32, 32]"
        )),
        "{error}"
    );
    let error = checkpoint.stored_like("model.layers.1.self_attn.o_proj.weight", o).err().unwrap().to_string();
    assert!(
        error.ends_with(&format!(
            "no tensor model.layers.1.self_attn.o_proj.weight (the model reads it as it read {o})"
        )),
        "{error}"
    );
    // Read again, by the same checkpoint (everything read before) or another: the same.
    assert_eq!(load(&checkpoint, &shape(LLAMA)).unwrap(), read);
    assert_eq!(load(&Checkpoint::open(dir.path()).unwrap(), &shape(LLAMA)).unwrap(), read);
    // A shard reads the same tensors, parts of them.
    let sharded = shard(&shape(LLAMA), &Scale { layers: None, tp: 2 }).unwrap();
    let part = load(&Checkpoint::open(dir.path()).unwrap().shard(2), &sharded).unwrap();
    assert_eq!(part.tensors, 12);
    assert!(part.bytes < read.bytes && part.sha256 != read.sha256, "{part:?}");
    // The last byte of the file (of a tensor's data) changed in place: the checkpoint that read
    // it before refuses it, a fresh one reads another digest.
    let path = dir.path().join("model.safetensors");
    let mut file = std::fs::read(&path).unwrap();
    *file.last_mut().unwrap() ^= 1;
    std::fs::write(&path, file).unwrap();
    let error = load(&checkpoint, &shape(LLAMA)).err().unwrap().to_string();
    assert!(
        error.contains("read again is not what was read before: the checkpoint changed while lynx read it"),
        "{error}"
    );
    let changed = load(&Checkpoint::open(dir.path()).unwrap(), &shape(LLAMA)).unwrap();
    assert_eq!((changed.tensors, changed.bytes), (read.tensors, read.bytes));
    assert_ne!(changed.sha256, read.sha256);
}
