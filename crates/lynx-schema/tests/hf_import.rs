//! Import of published Hugging Face `config.json` files (tests/data/hf), and its errors.

use lynx_schema::config::hf::import;
use lynx_schema::config::{ConfigError, ModelShape};
use std::path::PathBuf;

fn data(file: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/hf").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn catalogue(name: &str) -> ModelShape {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../../models/{name}.toml"));
    ModelShape::from_toml(&std::fs::read_to_string(&path).unwrap(), name).unwrap()
}

#[test]
fn published_configs_import_to_the_catalogue_shapes() {
    for (file, name) in [
        ("Llama-3.1-8B.json", "llama-3.1-8b"),
        ("Mixtral-8x7B-v0.1.json", "mixtral-8x7b"),
        ("Qwen3-32B.json", "qwen3-32b"),
        ("Qwen3-30B-A3B.json", "qwen3-30b-a3b"),
        ("gpt-oss-120b.json", "gpt-oss-120b"),
        ("DeepSeek-R1.json", "deepseek-r1"),
    ] {
        let imported = import(&data(file), file, name).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(imported, catalogue(name), "{file}");
    }
}

#[test]
fn configs_outside_the_catalogue_import_with_their_published_counts() {
    // Mistral 7B: 7.24 B parameters (Mistral AI); Qwen2.5-7B: 7.61 B (Qwen2.5 model card).
    for (file, published) in [("Mistral-7B-v0.1.json", 7.24e9), ("Qwen2.5-7B.json", 7.61e9)] {
        let shape = import(&data(file), file, "m").unwrap();
        let total = shape.parameters().total as f64;
        assert!((total - published).abs() <= 0.01 * published, "{file}: {total}");
    }
    let mistral = import(&data("Mistral-7B-v0.1.json"), "m", "m").unwrap();
    let lynx_schema::config::Attention::Gqa(gqa) = &mistral.attention else { panic!("GQA") };
    assert_eq!(gqa.sliding_window.as_ref().map(|w| w.size), Some(4096));
    let qwen2 = import(&data("Qwen2.5-7B.json"), "q", "q").unwrap();
    let lynx_schema::config::Attention::Gqa(gqa) = &qwen2.attention else { panic!("GQA") };
    assert_eq!(gqa.bias, lynx_schema::config::AttentionBias::Qkv);
    assert_eq!(gqa.sliding_window, None, "use_sliding_window is false");
}

/// Import `file` with `edit` applied to its JSON object; the error's text.
fn import_error(file: &str, edit: impl Fn(&mut serde_json::Map<String, serde_json::Value>)) -> String {
    let mut value: serde_json::Value = serde_json::from_str(&data(file)).unwrap();
    edit(value.as_object_mut().unwrap());
    let error = import(&value.to_string(), "config.json", "m").unwrap_err();
    assert!(matches!(error, ConfigError::Invalid { .. } | ConfigError::Syntax { .. }));
    error.to_string()
}

#[test]
fn an_unsupported_model_type_is_named() {
    let error = import_error("Llama-3.1-8B.json", |c| {
        c.insert("model_type".into(), "gemma2".into());
    });
    assert!(error.starts_with("config.json: model_type 'gemma2' is not supported"), "{error}");
    assert!(error.contains("deepseek_v3"), "the supported types are listed: {error}");
}

#[test]
fn a_missing_field_is_named() {
    for (file, field) in [
        ("Llama-3.1-8B.json", "hidden_size"),
        ("Llama-3.1-8B.json", "model_type"),
        ("Mixtral-8x7B-v0.1.json", "num_local_experts"),
        ("DeepSeek-R1.json", "kv_lora_rank"),
        ("DeepSeek-R1.json", "n_group"),
        ("gpt-oss-120b.json", "layer_types"),
    ] {
        let error = import_error(file, |c| {
            c.remove(field);
        });
        assert_eq!(error, format!("config.json: {field} is missing"), "{file}");
    }
}

#[test]
fn what_lynx_cannot_represent_is_refused_by_name() {
    let cases: [(&str, &str, serde_json::Value); 5] = [
        ("Qwen3-30B-A3B.json", "norm_topk_prob", false.into()),
        ("Qwen3-32B.json", "use_sliding_window", true.into()),
        ("Llama-3.1-8B.json", "hidden_act", "gelu".into()),
        ("DeepSeek-R1.json", "topk_method", "greedy".into()),
        ("Llama-3.1-8B.json", "num_attention_heads", "32".into()),
    ];
    for (file, field, value) in cases {
        let error = import_error(file, |c| {
            c.insert(field.into(), value.clone());
        });
        assert!(error.starts_with(&format!("config.json: {field} ")), "{file}: {error}");
    }
    let error = import_error("Llama-3.1-8B.json", |c| {
        c["rope_scaling"]["rope_type"] = "longrope".into();
    });
    assert!(error.contains("rope_scaling.rope_type 'longrope' is not supported"), "{error}");
    let error = import("[1, 2]", "config.json", "m").unwrap_err().to_string();
    assert!(error.contains("JSON object"), "{error}");
    let error = import("{\"model_type\": ", "config.json", "m").unwrap_err().to_string();
    assert!(error.starts_with("config.json:1:"), "{error}");
}
