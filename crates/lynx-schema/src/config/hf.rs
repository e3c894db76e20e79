//! Import of a Hugging Face `config.json` into a model shape, for the model types whose
//! architecture lynx implements. Field meanings follow `transformers`' `configuration_*.py` of
//! each type, including their defaults for fields a config may leave out. Anything lynx cannot
//! represent exactly (an unsupported `model_type`, RoPE type, sliding-window layout, routing
//! rule) is an error naming the field, never a silent approximation. A checkpoint's
//! `quantization_config` is not carried over: precision is a suite setting.

use super::model::{
    Activation, Attention, AttentionBias, DenseMlp, Gqa, Mla, ModelShape, Moe, RopeScaling, Router, SlidingLayers,
    SlidingWindow,
};
use super::ConfigError;
use serde_json::{Map, Value};

/// The model types [`import`] understands.
pub const SUPPORTED_MODEL_TYPES: [&str; 8] =
    ["llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe", "gpt_oss", "deepseek_v3"];

/// The shape `name` described by the `config.json` text `json`; `origin` names the file in errors.
pub fn import(json: &str, origin: &str, name: &str) -> Result<ModelShape, ConfigError> {
    let value: Value = serde_json::from_str(json).map_err(|e| ConfigError::Syntax {
        origin: format!("{origin}:{}:{}", e.line(), e.column()),
        message: e.to_string(),
    })?;
    let Value::Object(fields) = value else {
        return Err(ConfigError::Syntax {
            origin: origin.to_owned(),
            message: "a config.json is a JSON object".to_owned(),
        });
    };
    let config = Fields { fields: &fields, origin };
    let model_type = config.string("model_type")?;
    if !SUPPORTED_MODEL_TYPES.contains(&model_type.as_str()) {
        return Err(config.invalid(
            "model_type",
            format!("'{model_type}' is not supported; supported: {}", SUPPORTED_MODEL_TYPES.join(", ")),
        ));
    }
    let hidden_size = config.u32("hidden_size")?;
    let num_layers = config.u32("num_hidden_layers")?;
    let attention = match model_type.as_str() {
        "deepseek_v3" => Attention::Mla(mla(&config)?),
        _ => Attention::Gqa(gqa(&config, &model_type, hidden_size, num_layers)?),
    };
    let (mlp, moe) = mlp_and_moe(&config, &model_type, num_layers)?;
    let activation = if model_type == "gpt_oss" {
        // transformers' GptOssExperts: alpha is a constant of the architecture, the limit a field.
        Activation::SwigluClamped { alpha: 1.702, limit: config.f64_or("swiglu_limit", 7.0)? }
    } else {
        let act = config.string_or("hidden_act", "silu")?;
        if act != "silu" {
            return Err(config.invalid("hidden_act", format!("'{act}' is not supported; lynx's MLPs use silu")));
        }
        Activation::Swiglu
    };
    let shape = ModelShape {
        name: name.to_owned(),
        vocab_size: config.u32("vocab_size")?,
        hidden_size,
        num_layers,
        rms_norm_eps: config.f64("rms_norm_eps")?,
        tie_word_embeddings: config.bool_or("tie_word_embeddings", false)?,
        init_std: config.f64_or("initializer_range", 0.02)?,
        attention,
        mlp,
        moe,
        activation,
    };
    // The same checks a catalogue file gets, through its TOML form.
    ModelShape::from_toml(&shape.to_toml(), origin)
}

fn gqa(config: &Fields, model_type: &str, hidden: u32, layers: u32) -> Result<Gqa, ConfigError> {
    let num_heads = config.u32("num_attention_heads")?;
    let num_kv_heads = config.u32_or("num_key_value_heads", num_heads)?;
    let head_dim = match config.optional("head_dim") {
        Some(_) => config.u32("head_dim")?,
        None if num_heads > 0 && hidden.is_multiple_of(num_heads) => hidden / num_heads,
        None => return Err(config.missing("head_dim")),
    };
    let bias = match model_type {
        // Qwen2 always has query, key and value biases and no output bias.
        "qwen2" => AttentionBias::Qkv,
        _ if config.bool_or("attention_bias", false)? => AttentionBias::All,
        _ => AttentionBias::None,
    };
    if config.bool_or("mlp_bias", false)? {
        return Err(config.invalid("mlp_bias", "true is not supported".to_owned()));
    }
    Ok(Gqa {
        num_heads,
        num_kv_heads,
        head_dim: Some(head_dim),
        rope_theta: config.f64_or("rope_theta", 10000.0)?,
        rope_scaling: rope_scaling(config)?,
        qk_norm: matches!(model_type, "qwen3" | "qwen3_moe"),
        bias,
        sinks: model_type == "gpt_oss",
        sliding_window: sliding_window(config, model_type, layers)?,
    })
}

fn sliding_window(config: &Fields, model_type: &str, layers: u32) -> Result<Option<SlidingWindow>, ConfigError> {
    match model_type {
        "mistral" | "mixtral" => Ok(config
            .optional("sliding_window")
            .map(|_| config.u32("sliding_window"))
            .transpose()?
            .map(|size| SlidingWindow { size, layers: SlidingLayers::All })),
        "qwen2" | "qwen3" | "qwen3_moe" => {
            if config.bool_or("use_sliding_window", false)? {
                return Err(config.invalid(
                    "use_sliding_window",
                    "true is not supported (Qwen's window on the layers past max_window_layers)".to_owned(),
                ));
            }
            Ok(None)
        }
        "gpt_oss" => {
            let size = config.u32("sliding_window")?;
            let Some(Value::Array(types)) = config.optional("layer_types") else {
                return Err(config.missing("layer_types"));
            };
            let sliding: Vec<bool> = types.iter().map(|t| t.as_str() == Some("sliding_attention")).collect();
            let layout = if sliding.iter().all(|&s| s) {
                SlidingLayers::All
            } else if sliding.iter().enumerate().all(|(i, &s)| s == (i % 2 == 0)) {
                SlidingLayers::Even
            } else {
                return Err(config.invalid(
                    "layer_types",
                    "only all-sliding or sliding on even layers (0, 2, …) is supported".to_owned(),
                ));
            };
            if sliding.len() != layers as usize {
                return Err(config
                    .invalid("layer_types", format!("lists {} layers; num_hidden_layers is {layers}", sliding.len())));
            }
            Ok(Some(SlidingWindow { size, layers: layout }))
        }
        _ => Ok(None),
    }
}

fn rope_scaling(config: &Fields) -> Result<Option<RopeScaling>, ConfigError> {
    let Some(Value::Object(fields)) = config.optional("rope_scaling") else {
        return Ok(None);
    };
    let scaling = Fields { fields, origin: config.origin };
    let kind = match scaling.optional("rope_type") {
        Some(_) => scaling.string("rope_type")?,
        None => scaling.string("type")?,
    };
    match kind.as_str() {
        "default" => Ok(None),
        "llama3" => Ok(Some(RopeScaling::Llama3 {
            factor: scaling.f64("factor")?,
            low_freq_factor: scaling.f64("low_freq_factor")?,
            high_freq_factor: scaling.f64("high_freq_factor")?,
            original_max_position: scaling.u32("original_max_position_embeddings")?,
        })),
        "yarn" => Ok(Some(RopeScaling::Yarn {
            factor: scaling.f64("factor")?,
            original_max_position: scaling.u32("original_max_position_embeddings")?,
            beta_fast: scaling.f64_or("beta_fast", 32.0)?,
            beta_slow: scaling.f64_or("beta_slow", 1.0)?,
            mscale: scaling.optional("mscale").map(|_| scaling.f64("mscale")).transpose()?,
            mscale_all_dim: scaling.optional("mscale_all_dim").map(|_| scaling.f64("mscale_all_dim")).transpose()?,
            truncate: scaling.bool_or("truncate", true)?,
        })),
        other => Err(scaling.invalid("rope_scaling.rope_type", format!("'{other}' is not supported (llama3, yarn)"))),
    }
}

fn mla(config: &Fields) -> Result<Mla, ConfigError> {
    Ok(Mla {
        num_heads: config.u32("num_attention_heads")?,
        q_lora_rank: config.optional("q_lora_rank").map(|_| config.u32("q_lora_rank")).transpose()?,
        kv_lora_rank: config.u32("kv_lora_rank")?,
        qk_nope_head_dim: config.u32("qk_nope_head_dim")?,
        qk_rope_head_dim: config.u32("qk_rope_head_dim")?,
        v_head_dim: config.u32("v_head_dim")?,
        rope_theta: config.f64_or("rope_theta", 10000.0)?,
        rope_scaling: rope_scaling(config)?,
    })
}

fn mlp_and_moe(config: &Fields, model_type: &str, layers: u32) -> Result<(Option<DenseMlp>, Option<Moe>), ConfigError> {
    let dense = || -> Result<Option<DenseMlp>, ConfigError> {
        Ok(Some(DenseMlp { intermediate_size: config.u32("intermediate_size")? }))
    };
    match model_type {
        "llama" | "mistral" | "qwen2" | "qwen3" => Ok((dense()?, None)),
        "mixtral" => Ok((None, Some(softmax_moe(config, ("num_local_experts", "intermediate_size"), false)?))),
        "qwen3_moe" => {
            if config.u32_or("decoder_sparse_step", 1)? != 1 {
                return Err(
                    config.invalid("decoder_sparse_step", "only 1 (every layer sparse) is supported".to_owned())
                );
            }
            if config.optional("mlp_only_layers").and_then(Value::as_array).is_some_and(|l| !l.is_empty()) {
                return Err(
                    config.invalid("mlp_only_layers", "dense layers among sparse ones are not supported".to_owned())
                );
            }
            require_normalised_top_k(config)?;
            Ok((None, Some(softmax_moe(config, ("num_experts", "moe_intermediate_size"), false)?)))
        }
        // gpt-oss's experts and router have biases.
        "gpt_oss" => Ok((None, Some(softmax_moe(config, ("num_local_experts", "intermediate_size"), true)?))),
        "deepseek_v3" => {
            if config.u32_or("moe_layer_freq", 1)? != 1 {
                return Err(config.invalid("moe_layer_freq", "only 1 is supported".to_owned()));
            }
            let scoring = config.string_or("scoring_func", "sigmoid")?;
            let method = config.string_or("topk_method", "noaux_tc")?;
            if scoring != "sigmoid" || method != "noaux_tc" {
                return Err(config.invalid(
                    "topk_method",
                    format!("'{method}' with scoring '{scoring}' is not supported (noaux_tc with sigmoid)"),
                ));
            }
            require_normalised_top_k(config)?;
            let first_dense_layers = config.u32_or("first_k_dense_replace", 0)?.min(layers);
            Ok((
                if first_dense_layers > 0 { dense()? } else { None },
                Some(Moe {
                    num_experts: config.u32("n_routed_experts")?,
                    experts_per_token: config.u32("num_experts_per_tok")?,
                    intermediate_size: config.u32("moe_intermediate_size")?,
                    shared_experts: config.u32_or("n_shared_experts", 0)?,
                    first_dense_layers,
                    expert_bias: false,
                    router: Router::SigmoidGrouped {
                        groups: config.u32("n_group")?,
                        topk_groups: config.u32("topk_group")?,
                        scaling: config.f64_or("routed_scaling_factor", 1.0)?,
                    },
                }),
            ))
        }
        other => unreachable!("model type {other} was checked against SUPPORTED_MODEL_TYPES"),
    }
}

/// A mixture of experts with the softmax router in every layer; `(experts, width)` name the
/// model type's fields for the expert count and one expert's width.
fn softmax_moe(config: &Fields, (experts, width): (&str, &str), biases: bool) -> Result<Moe, ConfigError> {
    Ok(Moe {
        num_experts: config.u32(experts)?,
        experts_per_token: config.u32("num_experts_per_tok")?,
        intermediate_size: config.u32(width)?,
        shared_experts: 0,
        first_dense_layers: 0,
        expert_bias: biases,
        router: Router::Softmax { bias: biases },
    })
}

fn require_normalised_top_k(config: &Fields) -> Result<(), ConfigError> {
    if config.bool_or("norm_topk_prob", true)? {
        Ok(())
    } else {
        Err(config.invalid(
            "norm_topk_prob",
            "false is not supported: lynx's routers renormalise the top-k weights".to_owned(),
        ))
    }
}

/// Typed access to a config's fields, with errors naming the file and the field.
struct Fields<'a> {
    fields: &'a Map<String, Value>,
    origin: &'a str,
}

impl Fields<'_> {
    fn invalid(&self, key: &str, message: String) -> ConfigError {
        ConfigError::Invalid { origin: self.origin.to_owned(), key: key.to_owned(), message }
    }

    fn missing(&self, key: &str) -> ConfigError {
        self.invalid(key, "is missing".to_owned())
    }

    /// The field's value; JSON `null` counts as absent.
    fn optional(&self, key: &str) -> Option<&Value> {
        self.fields.get(key).filter(|v| !v.is_null())
    }

    fn string(&self, key: &str) -> Result<String, ConfigError> {
        match self.optional(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.invalid(key, format!("must be a string, got {other}"))),
            None => Err(self.missing(key)),
        }
    }

    fn string_or(&self, key: &str, default: &str) -> Result<String, ConfigError> {
        self.optional(key).map_or(Ok(default.to_owned()), |_| self.string(key))
    }

    fn u32(&self, key: &str) -> Result<u32, ConfigError> {
        let value = self.optional(key).ok_or_else(|| self.missing(key))?;
        value
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| self.invalid(key, format!("must be a whole number from 0 to {}, got {value}", u32::MAX)))
    }

    fn u32_or(&self, key: &str, default: u32) -> Result<u32, ConfigError> {
        self.optional(key).map_or(Ok(default), |_| self.u32(key))
    }

    fn f64(&self, key: &str) -> Result<f64, ConfigError> {
        let value = self.optional(key).ok_or_else(|| self.missing(key))?;
        value.as_f64().ok_or_else(|| self.invalid(key, format!("must be a number, got {value}")))
    }

    fn f64_or(&self, key: &str, default: f64) -> Result<f64, ConfigError> {
        self.optional(key).map_or(Ok(default), |_| self.f64(key))
    }

    fn bool_or(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.optional(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(self.invalid(key, format!("must be true or false, got {other}"))),
        }
    }
}
