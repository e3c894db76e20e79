//! The catalogue in `models/` against the figures its models were published with.
//!
//! A count matches a published figure when it is within 1% of it. Two active counts were
//! published to two significant digits only, DeepSeek-R1's "37B" and Qwen3-30B-A3B's "3.3B";
//! for those a count matches within one unit of the last digit, since such figures are rounded or
//! truncated: the published configs give 36.62 B (without the embedding table) and 3.353 B
//! (with it), and no way of counting lands within 1% of either figure. Publishers also differ on
//! whether the embedding table counts towards active parameters; each figure below says how it
//! was counted.

use lynx_schema::config::{ModelShape, Precision};
use std::path::PathBuf;

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

fn load(name: &str) -> ModelShape {
    let path = models_dir().join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let shape = ModelShape::from_toml(&text, &path.display().to_string()).unwrap();
    assert_eq!(shape.name, name);
    shape
}

/// A published figure: its value and the number of significant digits it was given with.
struct Published {
    value: f64,
    digits: u32,
}

const fn figure(value: f64, digits: u32) -> Published {
    Published { value, digits }
}

fn assert_matches(what: &str, ours: u64, published: &Published) {
    let ours = ours as f64;
    let unit = 10f64.powi(published.value.log10().floor() as i32 + 1 - published.digits as i32);
    let allowed = if published.digits <= 2 { unit } else { 0.01 * published.value };
    assert!(
        (ours - published.value).abs() <= allowed,
        "{what}: ours {:.4} B, published {:.4} B (allowed ±{:.4} B)",
        ours / 1e9,
        published.value / 1e9,
        allowed / 1e9
    );
}

/// How a publisher counted active parameters.
enum Active {
    /// All parameters a token uses, the embedding table included.
    WithEmbedding(Published),
    /// The same without the input embedding table.
    WithoutEmbedding(Published),
}

/// (model, published total, published active, source)
fn published() -> Vec<(&'static str, Published, Option<Active>, &'static str)> {
    vec![
        ("llama-3.1-8b", figure(8.03e9, 3), None, "Meta, Llama 3.1 model card"),
        ("llama-3.3-70b", figure(70.6e9, 3), None, "Meta, Llama 3.3 model card / HF safetensors total"),
        ("llama-3.1-405b", figure(405.9e9, 4), None, "HF safetensors total of meta-llama/Llama-3.1-405B"),
        (
            "mixtral-8x7b",
            figure(46.7e9, 3),
            Some(Active::WithEmbedding(figure(12.9e9, 3))),
            "Mistral AI, Mixtral of Experts (arXiv:2401.04088)",
        ),
        (
            "gpt-oss-120b",
            figure(116.83e9, 5),
            Some(Active::WithoutEmbedding(figure(5.13e9, 3))),
            "OpenAI, gpt-oss-120b model card, table 1",
        ),
        (
            "deepseek-r1",
            figure(671e9, 3),
            Some(Active::WithoutEmbedding(figure(37e9, 2))),
            "DeepSeek-V3 technical report (arXiv:2412.19437)",
        ),
        ("qwen3-32b", figure(32.8e9, 3), None, "Qwen3-32B model card"),
        ("qwen3-30b-a3b", figure(30.5e9, 3), Some(Active::WithEmbedding(figure(3.3e9, 2))), "Qwen3-30B-A3B model card"),
    ]
}

#[test]
fn parameter_counts_match_the_published_figures() {
    for (name, total, active, source) in published() {
        let count = load(name).parameters();
        assert_matches(&format!("{name} total ({source})"), count.total, &total);
        match active {
            None => assert_eq!(count.active, count.total, "{name} is dense"),
            Some(Active::WithEmbedding(figure)) => {
                assert_matches(&format!("{name} active ({source})"), count.active, &figure)
            }
            Some(Active::WithoutEmbedding(figure)) => {
                assert_matches(&format!("{name} active ({source})"), count.active - count.embedding, &figure)
            }
        }
    }
}

#[test]
fn qwen3_non_embedding_counts_match_their_cards() {
    // The Qwen3 cards also give the count without both embedding matrices.
    for (name, published) in [("qwen3-32b", figure(31.2e9, 3)), ("qwen3-30b-a3b", figure(29.9e9, 3))] {
        let count = load(name).parameters();
        assert_matches(name, count.total - 2 * count.embedding, &published);
    }
}

#[test]
fn kv_cache_bytes_per_token_follow_the_attention_shape() {
    // layers × (2 × kv heads × head dim, or latent + rope key for MLA) × 2 bytes at bf16.
    let expected = [
        ("llama-3.1-8b", 32 * 2 * 8 * 128 * 2),    // 128 KiB, the figure usually quoted
        ("llama-3.3-70b", 80 * 2 * 8 * 128 * 2),   // 320 KiB
        ("llama-3.1-405b", 126 * 2 * 8 * 128 * 2), // 504 KiB
        ("mixtral-8x7b", 32 * 2 * 8 * 128 * 2),    // 128 KiB
        ("gpt-oss-120b", 18 * 2 * 8 * 64 * 2),     // the 18 full-attention layers
        ("deepseek-r1", 61 * (512 + 64) * 2),      // 68.6 KiB: MLA's compressed cache
        ("qwen3-32b", 64 * 2 * 8 * 128 * 2),       // 256 KiB
        ("qwen3-30b-a3b", 48 * 2 * 4 * 128 * 2),   // 96 KiB
    ];
    for (name, bytes) in expected {
        let shape = load(name);
        assert_eq!(shape.kv_bytes_per_token(Precision::Bf16), bytes, "{name}");
        assert_eq!(shape.kv_bytes_per_token(Precision::Fp32), 2 * bytes, "{name}");
        assert_eq!(shape.kv_bytes_per_token(Precision::Fp8), bytes, "{name}: fp8 weights keep a bf16 cache");
    }
    // gpt-oss's 18 sliding-window layers hold at most 128 tokens each.
    let gpt_oss = load("gpt-oss-120b");
    assert_eq!(gpt_oss.kv_bytes(Precision::Bf16, 4096), (18 * 4096 + 18 * 128) * 2 * 8 * 64 * 2);
}

#[test]
fn weight_bytes_follow_the_precision() {
    for (name, ..) in published() {
        let shape = load(name);
        let count = shape.parameters();
        assert_eq!(shape.weight_bytes(Precision::Bf16), 2 * count.total, "{name}");
        assert_eq!(shape.weight_bytes(Precision::Fp32), 4 * count.total, "{name}");
        let fp8 = shape.weight_bytes(Precision::Fp8);
        assert!(fp8 < shape.weight_bytes(Precision::Bf16) && fp8 > count.total, "{name}: {fp8}");
    }
    // DeepSeek-R1's fp8 checkpoint is about 642 GiB (fp8 linear weights; bf16 embeddings, norms).
    let deepseek = load("deepseek-r1").weight_bytes(Precision::Fp8) as f64 / (1u64 << 30) as f64;
    assert!((620.0..660.0).contains(&deepseek), "{deepseek} GiB");
}

#[test]
fn every_catalogue_file_parses() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(models_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            load(&name);
            names.push(name);
        }
    }
    for (name, ..) in published() {
        assert!(names.iter().any(|n| n == name), "{name} missing from models/");
    }
}
