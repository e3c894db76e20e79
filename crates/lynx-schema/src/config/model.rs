//! The shape of a reference model (`models/<name>.toml`) and what follows from it: parameter
//! counts, weight bytes, KV-cache bytes.
//!
//! A shape is composed of parts rather than named by family: attention is grouped-query (`gqa`,
//! Llama, Mistral, Qwen, gpt-oss) or multi-head latent (`mla`, DeepSeek-V2/V3); the MLP of each
//! layer is dense or a mixture of experts. Counting follows the layers the reference
//! implementations build (Hugging Face `transformers` `modeling_*.py` of each model type).

use super::{parse, Checker, ConfigError, Precision};
use serde::{Deserialize, Serialize};
use std::num::Saturating;

/// The most any one size of a shape may be (a width, a count of layers, heads or experts): 64
/// times the widest real one (Gemma's 262,144-token vocabulary), and small enough that a sum of
/// two stays within 32 bits.
pub const MOST_SIZE: u32 = 1 << 24;

/// The most parameters a shape may count: some five hundred times the largest published models,
/// and few enough that every byte count of it (4 bytes a parameter, the KV cache of the largest
/// batch and context a suite allows) is exact in 64 bits. Counting saturates rather than wraps,
/// so a shape past this is refused, never miscounted.
pub const MOST_PARAMETERS: u64 = 1_000_000_000_000_000;

/// A count that saturates at `u64::MAX` rather than wrapping (or, in a debug build, panicking)
/// on a shape no validation has seen: `Saturating<u64>` of `value`.
fn saturating(value: impl Into<u64>) -> Saturating<u64> {
    Saturating(value.into())
}

/// A model shape. Weights are drawn at this shape from a seeded generator, or loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelShape {
    pub name: String,
    pub vocab_size: u32,
    pub hidden_size: u32,
    pub num_layers: u32,
    pub rms_norm_eps: f64,
    /// Whether the lm head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Standard deviation of drawn weights (the model's `initializer_range`).
    #[serde(default = "default_init_std")]
    pub init_std: f64,
    pub attention: Attention,
    /// The MLP of every layer that is not a mixture of experts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp: Option<DenseMlp>,
    /// The mixture of experts of every layer from `moe.first_dense_layers` on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<Moe>,
    /// The gated activation of every MLP and expert.
    #[serde(default, skip_serializing_if = "Activation::is_default")]
    pub activation: Activation,
}

fn default_init_std() -> f64 {
    0.02
}

/// Self-attention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Attention {
    /// Grouped-query attention (multi-head when `num_kv_heads == num_heads`).
    Gqa(Gqa),
    /// Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434): keys and values are
    /// compressed into a `kv_lora_rank` latent that the cache holds, beside a shared RoPE key.
    Mla(Mla),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gqa {
    pub num_heads: u32,
    /// Key/value heads; `num_heads` must be a multiple of it.
    pub num_kv_heads: u32,
    /// Width of a head; `hidden_size / num_heads` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    pub rope_theta: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<RopeScaling>,
    /// RMSNorm of each query and key head before RoPE (Qwen3).
    #[serde(default, skip_serializing_if = "is_false")]
    pub qk_norm: bool,
    #[serde(default, skip_serializing_if = "AttentionBias::is_none")]
    pub bias: AttentionBias,
    /// A learned per-head logit that joins every softmax and takes its share of the weight
    /// (gpt-oss's attention sinks).
    #[serde(default, skip_serializing_if = "is_false")]
    pub sinks: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<SlidingWindow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mla {
    pub num_heads: u32,
    /// Rank of the query compression; queries are projected directly when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_lora_rank: Option<u32>,
    /// Rank of the key/value latent the cache holds.
    pub kv_lora_rank: u32,
    /// Per-head query/key width without position information.
    pub qk_nope_head_dim: u32,
    /// Per-head query/key width that carries RoPE (the key part is shared by all heads).
    pub qk_rope_head_dim: u32,
    pub v_head_dim: u32,
    pub rope_theta: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_scaling: Option<RopeScaling>,
}

/// Which attention projections have a bias.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttentionBias {
    #[default]
    None,
    /// Query, key and value (Qwen2).
    Qkv,
    /// Query, key, value and output (gpt-oss).
    All,
}

impl AttentionBias {
    fn is_none(&self) -> bool {
        *self == AttentionBias::None
    }
}

/// Attention limited to the last `size` positions, on some layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidingWindow {
    pub size: u32,
    pub layers: SlidingLayers,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SlidingLayers {
    All,
    /// Layers 0, 2, 4, …; the others attend to everything (gpt-oss).
    Even,
}

/// Rotary-embedding frequency scaling for long context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum RopeScaling {
    /// Llama 3.1's: low frequencies divided by `factor`, high ones kept, a smooth ramp between.
    Llama3 { factor: f64, low_freq_factor: f64, high_freq_factor: f64, original_max_position: u32 },
    /// YaRN (Peng et al. 2023, arXiv:2309.00071), as Hugging Face `transformers` computes it
    /// (`_compute_yarn_parameters`).
    Yarn {
        factor: f64,
        original_max_position: u32,
        beta_fast: f64,
        beta_slow: f64,
        /// With `mscale_all_dim`, sets the cos/sin scale to mscale(factor, mscale) /
        /// mscale(factor, mscale_all_dim); without them it is mscale(factor, 1) (DeepSeek gives
        /// both, gpt-oss neither).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mscale: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mscale_all_dim: Option<f64>,
        /// Whether the correction range is rounded to whole dimensions (gpt-oss: false).
        #[serde(default = "yes")]
        truncate: bool,
    },
}

fn yes() -> bool {
    true
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// A dense gated MLP: down(act(gate(x)) · up(x)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DenseMlp {
    pub intermediate_size: u32,
}

/// A mixture-of-experts MLP.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moe {
    /// Routed experts.
    pub num_experts: u32,
    /// Routed experts each token goes to (top-k).
    pub experts_per_token: u32,
    /// Intermediate width of one expert.
    pub intermediate_size: u32,
    /// Experts every token goes through besides the routed ones (DeepSeek), each of
    /// `intermediate_size`.
    #[serde(default)]
    pub shared_experts: u32,
    /// Leading layers that keep the dense MLP (DeepSeek-V3: 3).
    #[serde(default)]
    pub first_dense_layers: u32,
    /// Whether the experts' projections have biases (gpt-oss).
    #[serde(default, skip_serializing_if = "is_false")]
    pub expert_bias: bool,
    pub router: Router,
}

/// How a token's experts and their weights are chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Router {
    /// Softmax over the router logits, top-k, weights renormalised to sum to one (Mixtral,
    /// Qwen3-MoE; gpt-oss's softmax over the top-k logits is the same).
    Softmax {
        /// Whether the router projection has a bias (gpt-oss).
        #[serde(default)]
        bias: bool,
    },
    /// DeepSeek-V3: sigmoid scores; experts chosen among the `topk_groups` best of `groups`
    /// groups using a learned selection bias; weights are the chosen scores renormalised and
    /// multiplied by `scaling`.
    SigmoidGrouped { groups: u32, topk_groups: u32, scaling: f64 },
}

/// The gated activation of MLPs and experts.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Activation {
    /// silu(gate) · up.
    #[default]
    Swiglu,
    /// gpt-oss: gate and up clamped to `limit`, gate · sigmoid(alpha · gate) · (up + 1).
    SwigluClamped { alpha: f64, limit: f64 },
}

impl Activation {
    fn is_default(&self) -> bool {
        *self == Activation::Swiglu
    }
}

/// Parameter counts of a shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParameterCount {
    /// Every parameter.
    pub total: u64,
    /// The parameters one token's forward pass uses: all but the experts it is not routed to.
    /// Includes the whole embedding table.
    pub active: u64,
    /// The input embedding table (a lookup, no arithmetic), which some publishers leave out of
    /// their active count.
    pub embedding: u64,
    /// The weights of the blocks' linear layers (attention projections, MLPs, experts): the ones
    /// lynx holds in e4m3 at fp8. Embeddings, lm head, routers, norms, biases and MLA's
    /// key/value up-projection (which the absorbed attention multiplies by blocks) stay bf16.
    pub linear: u64,
}

impl ModelShape {
    /// Parse and validate a model file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<ModelShape, ConfigError> {
        let shape: ModelShape = parse(text, origin)?;
        shape.validate(origin)?;
        Ok(shape)
    }

    /// The shape as catalogue TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a model shape serialises to TOML")
    }

    /// Layers whose MLP is the mixture of experts.
    pub fn moe_layers(&self) -> u32 {
        self.moe.as_ref().map_or(0, |moe| self.num_layers.saturating_sub(moe.first_dense_layers))
    }

    pub fn dense_layers(&self) -> u32 {
        self.num_layers - self.moe_layers()
    }

    /// Parameter counts of the whole model.
    pub fn parameters(&self) -> ParameterCount {
        let hidden = saturating(self.hidden_size);
        let vocab = saturating(self.vocab_size);
        let (attention_linear, attention_other) = self.attention_parameters();
        let mlp_weights = |intermediate: u32| Saturating(3) * hidden * saturating(intermediate);
        let dense = self.mlp.as_ref().map_or(Saturating(0), |mlp| mlp_weights(mlp.intermediate_size));
        let norms_per_layer = Saturating(2) * hidden;

        let mut total_linear = saturating(self.num_layers) * attention_linear + saturating(self.dense_layers()) * dense;
        let mut other = saturating(self.num_layers) * (attention_other + norms_per_layer) + hidden;
        let mut inactive = Saturating(0);
        if let Some(moe) = &self.moe {
            let layers = saturating(self.moe_layers());
            let expert_weights = mlp_weights(moe.intermediate_size);
            let expert_biases = if moe.expert_bias {
                Saturating(2) * saturating(moe.intermediate_size) + hidden
            } else {
                Saturating(0)
            };
            let router = hidden * saturating(moe.num_experts)
                + match moe.router {
                    Router::Softmax { bias: true } | Router::SigmoidGrouped { .. } => saturating(moe.num_experts),
                    Router::Softmax { bias: false } => Saturating(0),
                };
            let experts = saturating(moe.num_experts) + saturating(moe.shared_experts);
            total_linear += layers * experts * expert_weights;
            other += layers * (experts * expert_biases + router);
            let idle = saturating(moe.num_experts - moe.experts_per_token.min(moe.num_experts));
            inactive = layers * idle * (expert_weights + expert_biases);
        }
        let embedding = vocab * hidden;
        let lm_head = if self.tie_word_embeddings { Saturating(0) } else { vocab * hidden };
        let total = total_linear + other + embedding + lm_head;
        ParameterCount { total: total.0, active: (total - inactive).0, embedding: embedding.0, linear: total_linear.0 }
    }

    /// (linear weights, other parameters) of one layer's attention.
    fn attention_parameters(&self) -> (Saturating<u64>, Saturating<u64>) {
        let hidden = saturating(self.hidden_size);
        match &self.attention {
            Attention::Gqa(gqa) => {
                let head_dim = saturating(self.head_dim());
                let q = saturating(gqa.num_heads) * head_dim;
                let kv = saturating(gqa.num_kv_heads) * head_dim;
                let linear = Saturating(2) * hidden * q + Saturating(2) * hidden * kv;
                let bias = match gqa.bias {
                    AttentionBias::None => Saturating(0),
                    AttentionBias::Qkv => q + Saturating(2) * kv,
                    AttentionBias::All => q + Saturating(2) * kv + hidden,
                };
                let qk_norm = if gqa.qk_norm { Saturating(2) * head_dim } else { Saturating(0) };
                let sinks = if gqa.sinks { saturating(gqa.num_heads) } else { Saturating(0) };
                (linear, bias + qk_norm + sinks)
            }
            Attention::Mla(mla) => {
                let heads = saturating(mla.num_heads);
                let qk_head = saturating(mla.qk_nope_head_dim) + saturating(mla.qk_rope_head_dim);
                let kv_rank = saturating(mla.kv_lora_rank);
                let (q_linear, q_norm) = match mla.q_lora_rank {
                    Some(rank) => (hidden * saturating(rank) + saturating(rank) * heads * qk_head, saturating(rank)),
                    None => (hidden * heads * qk_head, Saturating(0)),
                };
                let kv_down = hidden * (kv_rank + saturating(mla.qk_rope_head_dim));
                let kv_up = kv_rank * heads * (saturating(mla.qk_nope_head_dim) + saturating(mla.v_head_dim));
                let output = heads * saturating(mla.v_head_dim) * hidden;
                (q_linear + kv_down + output, q_norm + kv_rank + kv_up)
            }
        }
    }

    /// Width of a GQA head (`hidden_size / num_heads` unless given); for MLA, the query/key
    /// head width (nope + rope).
    pub fn head_dim(&self) -> u32 {
        match &self.attention {
            Attention::Gqa(gqa) => gqa.head_dim.unwrap_or(self.hidden_size / gqa.num_heads.max(1)),
            Attention::Mla(mla) => mla.qk_nope_head_dim.saturating_add(mla.qk_rope_head_dim),
        }
    }

    /// Bytes of all weights at `precision`. At fp8 the blocks' linear weights take one byte and
    /// everything else stays bf16 (see [`ParameterCount::linear`]).
    pub fn weight_bytes(&self, precision: Precision) -> u64 {
        let count = self.parameters();
        let (total, linear) = (saturating(count.total), saturating(count.linear));
        match precision {
            Precision::Fp8 => (linear + Saturating(2) * (total - linear)).0,
            other => (total * saturating(other.bytes())).0,
        }
    }

    /// KV-cache bytes one more token of context adds, across the layers that keep every token
    /// (sliding-window layers stop growing at their window). The cache is kept at the
    /// activation precision (bf16 under fp8 weights).
    pub fn kv_bytes_per_token(&self, precision: Precision) -> u64 {
        (self.kv_elements_per_token_per_layer()
            * saturating(self.full_attention_layers())
            * saturating(precision.activation_bytes()))
        .0
    }

    /// KV-cache bytes of one sequence holding `ctx` tokens.
    pub fn kv_bytes(&self, precision: Precision, ctx: u64) -> u64 {
        let sliding = saturating(self.num_layers - self.full_attention_layers());
        let window = match &self.attention {
            Attention::Gqa(Gqa { sliding_window: Some(w), .. }) => u64::from(w.size),
            _ => 0,
        };
        let tokens = saturating(self.full_attention_layers()) * saturating(ctx) + sliding * saturating(ctx.min(window));
        (tokens * self.kv_elements_per_token_per_layer() * saturating(precision.activation_bytes())).0
    }

    /// Bytes lynx's KV cache allocates for `batch` sequences of `capacity` tokens: every layer
    /// holds `capacity` tokens (a sliding layer's cache is not cut to its window).
    pub fn kv_cache_bytes(&self, precision: Precision, batch: u64, capacity: u64) -> u64 {
        (saturating(batch)
            * saturating(capacity)
            * saturating(self.num_layers)
            * self.kv_elements_per_token_per_layer()
            * saturating(precision.activation_bytes()))
        .0
    }

    /// Cached elements per token per layer: key and value heads for GQA, the latent and the
    /// shared RoPE key for MLA.
    fn kv_elements_per_token_per_layer(&self) -> Saturating<u64> {
        match &self.attention {
            Attention::Gqa(gqa) => Saturating(2) * saturating(gqa.num_kv_heads) * saturating(self.head_dim()),
            Attention::Mla(mla) => saturating(mla.kv_lora_rank) + saturating(mla.qk_rope_head_dim),
        }
    }

    /// Layers that attend to the whole context.
    pub fn full_attention_layers(&self) -> u32 {
        match &self.attention {
            Attention::Gqa(Gqa { sliding_window: Some(w), .. }) => match w.layers {
                SlidingLayers::All => 0,
                SlidingLayers::Even => self.num_layers / 2,
            },
            _ => self.num_layers,
        }
    }

    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let check = Checker { origin };
        check.name("name", &self.name)?;
        check.count("vocab_size", self.vocab_size, MOST_SIZE)?;
        check.count("hidden_size", self.hidden_size, MOST_SIZE)?;
        check.count("num_layers", self.num_layers, MOST_SIZE)?;
        check.positive_real("rms_norm_eps", self.rms_norm_eps)?;
        check.positive_real("init_std", self.init_std)?;
        match &self.attention {
            Attention::Gqa(gqa) => self.validate_gqa(&check, gqa)?,
            Attention::Mla(mla) => validate_mla(&check, mla)?,
        }
        if let Some(mlp) = &self.mlp {
            check.count("mlp.intermediate_size", mlp.intermediate_size, MOST_SIZE)?;
        }
        if self.dense_layers() > 0 && self.mlp.is_none() {
            return Err(check.invalid("mlp", format!("is needed: {} layers have a dense MLP", self.dense_layers())));
        }
        if let Some(moe) = &self.moe {
            self.validate_moe(&check, moe)?;
        }
        if let Activation::SwigluClamped { alpha, limit } = self.activation {
            check.positive_real("activation.alpha", alpha)?;
            check.positive_real("activation.limit", limit)?;
        }
        let total = self.parameters().total;
        if total > MOST_PARAMETERS {
            let counted = if total == u64::MAX { "over 1.8e19".to_owned() } else { super::readable(total as f64) };
            let most = super::readable(MOST_PARAMETERS as f64);
            return Err(check
                .invalid("shape", format!("counts {counted} parameters, more than the {most} a model file may hold")));
        }
        Ok(())
    }

    fn validate_gqa(&self, check: &Checker, gqa: &Gqa) -> Result<(), ConfigError> {
        check.count("attention.num_heads", gqa.num_heads, MOST_SIZE)?;
        check.count("attention.num_kv_heads", gqa.num_kv_heads, MOST_SIZE)?;
        check.count("attention.head_dim", gqa.head_dim.unwrap_or(1), MOST_SIZE)?;
        check.positive_real("attention.rope_theta", gqa.rope_theta)?;
        if !gqa.num_heads.is_multiple_of(gqa.num_kv_heads) {
            return Err(check.invalid(
                "attention.num_heads",
                format!("({}) must be a multiple of attention.num_kv_heads ({})", gqa.num_heads, gqa.num_kv_heads),
            ));
        }
        if gqa.head_dim.is_none() && !self.hidden_size.is_multiple_of(gqa.num_heads) {
            return Err(check.invalid(
                "attention.head_dim",
                format!(
                    "is needed: hidden_size ({}) is not a multiple of attention.num_heads ({})",
                    self.hidden_size, gqa.num_heads
                ),
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(check.invalid("attention.head_dim", format!("({}) must be even for RoPE", self.head_dim())));
        }
        if let Some(window) = &gqa.sliding_window {
            check.count("attention.sliding_window.size", window.size, MOST_SIZE)?;
        }
        check_rope_scaling(check, gqa.rope_scaling.as_ref())?;
        Ok(())
    }

    fn validate_moe(&self, check: &Checker, moe: &Moe) -> Result<(), ConfigError> {
        check.count("moe.num_experts", moe.num_experts, MOST_SIZE)?;
        check.count("moe.experts_per_token", moe.experts_per_token, MOST_SIZE)?;
        check.count("moe.intermediate_size", moe.intermediate_size, MOST_SIZE)?;
        check.at_most("moe.shared_experts", moe.shared_experts, MOST_SIZE)?;
        if moe.experts_per_token > moe.num_experts {
            return Err(check.invalid(
                "moe.experts_per_token",
                format!("({}) exceeds moe.num_experts ({})", moe.experts_per_token, moe.num_experts),
            ));
        }
        if moe.first_dense_layers > self.num_layers {
            return Err(check.invalid(
                "moe.first_dense_layers",
                format!("({}) exceeds num_layers ({})", moe.first_dense_layers, self.num_layers),
            ));
        }
        if let Router::SigmoidGrouped { groups, topk_groups, scaling } = moe.router {
            check.count("moe.router.groups", groups, MOST_SIZE)?;
            check.count("moe.router.topk_groups", topk_groups, MOST_SIZE)?;
            check.positive_real("moe.router.scaling", scaling)?;
            if !moe.num_experts.is_multiple_of(groups) || topk_groups > groups {
                return Err(check.invalid(
                    "moe.router",
                    format!(
                        "groups ({groups}) must divide num_experts ({}) and be at least topk_groups ({topk_groups})",
                        moe.num_experts
                    ),
                ));
            }
            let per_group = moe.num_experts / groups;
            if topk_groups * per_group < moe.experts_per_token {
                return Err(check.invalid(
                    "moe.router.topk_groups",
                    format!("({topk_groups}) groups hold fewer experts than experts_per_token"),
                ));
            }
        }
        Ok(())
    }
}

fn validate_mla(check: &Checker, mla: &Mla) -> Result<(), ConfigError> {
    check.count("attention.num_heads", mla.num_heads, MOST_SIZE)?;
    check.count("attention.q_lora_rank", mla.q_lora_rank.unwrap_or(1), MOST_SIZE)?;
    check.count("attention.kv_lora_rank", mla.kv_lora_rank, MOST_SIZE)?;
    check.count("attention.qk_nope_head_dim", mla.qk_nope_head_dim, MOST_SIZE)?;
    check.count("attention.qk_rope_head_dim", mla.qk_rope_head_dim, MOST_SIZE)?;
    check.count("attention.v_head_dim", mla.v_head_dim, MOST_SIZE)?;
    check.positive_real("attention.rope_theta", mla.rope_theta)?;
    if !mla.qk_rope_head_dim.is_multiple_of(2) {
        return Err(check.invalid("attention.qk_rope_head_dim", "must be even for RoPE".to_owned()));
    }
    check_rope_scaling(check, mla.rope_scaling.as_ref())?;
    Ok(())
}

fn check_rope_scaling(check: &Checker, scaling: Option<&RopeScaling>) -> Result<(), ConfigError> {
    match scaling {
        None => Ok(()),
        Some(RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position }) => {
            check.positive_real("attention.rope_scaling.factor", *factor)?;
            check.positive_real("attention.rope_scaling.low_freq_factor", *low_freq_factor)?;
            check.positive_real("attention.rope_scaling.high_freq_factor", *high_freq_factor)?;
            check.positive("attention.rope_scaling.original_max_position", *original_max_position)?;
            if high_freq_factor <= low_freq_factor {
                return Err(check.invalid(
                    "attention.rope_scaling.high_freq_factor",
                    "must be greater than low_freq_factor".to_owned(),
                ));
            }
            Ok(())
        }
        Some(RopeScaling::Yarn {
            factor, original_max_position, beta_fast, beta_slow, mscale, mscale_all_dim, ..
        }) => {
            check.positive_real("attention.rope_scaling.factor", *factor)?;
            check.positive("attention.rope_scaling.original_max_position", *original_max_position)?;
            check.positive_real("attention.rope_scaling.beta_fast", *beta_fast)?;
            check.positive_real("attention.rope_scaling.beta_slow", *beta_slow)?;
            check.non_negative("attention.rope_scaling.mscale", mscale.unwrap_or(0.0))?;
            check.non_negative("attention.rope_scaling.mscale_all_dim", mscale_all_dim.unwrap_or(0.0))
        }
    }
}
