//! Suites and model shapes, as written in `models/*.toml` and `models/suites/*.toml`.
//!
//! Parsing refuses unknown keys (a misspelt key would otherwise silently fall back to a default)
//! and validates every size and threshold, naming the file and the key that is wrong.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A configuration file that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("{origin}: {message}")]
    Syntax { origin: String, message: String },
    #[error("{origin}: {key} {message}")]
    Invalid { origin: String, key: String, message: String },
}

/// Numeric precision of weights, activations and KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Bf16,
    Fp16,
}

impl Precision {
    /// Bytes one element occupies.
    pub fn bytes(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            Precision::Bf16 | Precision::Fp16 => 2,
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
        })
    }
}

/// The architecture family a model shape describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelFamily {
    /// Llama-style decoder: GQA attention with RoPE, RMSNorm, SwiGLU MLP.
    Dense,
}

/// The shape of a reference model (`models/<name>.toml`). Weights are never loaded: they are
/// drawn from a seeded generator at this shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelShape {
    pub name: String,
    pub family: ModelFamily,
    pub vocab_size: u32,
    pub hidden_size: u32,
    /// Width of the SwiGLU MLP's gate and up projections.
    pub intermediate_size: u32,
    pub num_layers: u32,
    pub num_heads: u32,
    /// Key/value heads; `num_heads` must be a multiple of it (grouped-query attention).
    pub num_kv_heads: u32,
    /// Width of one head; `hidden_size / num_heads` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
    pub rope_theta: f64,
    pub rms_norm_eps: f64,
    /// Whether the lm head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Standard deviation of the drawn weights (Llama's `initializer_range`).
    #[serde(default = "default_init_std")]
    pub init_std: f64,
}

fn default_init_std() -> f64 {
    0.02
}

impl ModelShape {
    /// Parse and validate a model file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<ModelShape, ConfigError> {
        let shape: ModelShape = parse(text, origin)?;
        shape.validate(origin)?;
        Ok(shape)
    }

    pub fn head_dim(&self) -> u32 {
        self.head_dim.unwrap_or(self.hidden_size / self.num_heads.max(1))
    }

    /// Total parameters: embedding, lm head (unless tied), per layer the four attention
    /// projections, the three MLP projections and two norms, and the final norm.
    pub fn parameter_count(&self) -> u64 {
        let hidden = u64::from(self.hidden_size);
        let vocab = u64::from(self.vocab_size);
        let q_width = u64::from(self.num_heads) * u64::from(self.head_dim());
        let kv_width = u64::from(self.num_kv_heads) * u64::from(self.head_dim());
        let attention = hidden * q_width * 2 + hidden * kv_width * 2;
        let mlp = 3 * hidden * u64::from(self.intermediate_size);
        let per_layer = attention + mlp + 2 * hidden;
        let lm_head = if self.tie_word_embeddings { 0 } else { vocab * hidden };
        vocab * hidden + lm_head + u64::from(self.num_layers) * per_layer + hidden
    }

    /// KV-cache bytes one token occupies across all layers at `precision`.
    pub fn kv_bytes_per_token(&self, precision: Precision) -> u64 {
        2 * u64::from(self.num_layers) * u64::from(self.num_kv_heads) * u64::from(self.head_dim()) * precision.bytes()
    }

    fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let check = Checker { origin };
        check.name("name", &self.name)?;
        for (key, value) in [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_layers", self.num_layers),
            ("num_heads", self.num_heads),
            ("num_kv_heads", self.num_kv_heads),
            ("head_dim", self.head_dim.unwrap_or(1)),
        ] {
            check.positive(key, value)?;
        }
        if !self.num_heads.is_multiple_of(self.num_kv_heads) {
            return Err(check.invalid(
                "num_heads",
                format!("({}) must be a multiple of num_kv_heads ({})", self.num_heads, self.num_kv_heads),
            ));
        }
        if self.head_dim.is_none() && !self.hidden_size.is_multiple_of(self.num_heads) {
            return Err(check.invalid(
                "head_dim",
                format!(
                    "is needed: hidden_size ({}) is not a multiple of num_heads ({})",
                    self.hidden_size, self.num_heads
                ),
            ));
        }
        if !self.head_dim().is_multiple_of(2) {
            return Err(check.invalid("head_dim", format!("({}) must be even for RoPE", self.head_dim())));
        }
        check.positive_real("rope_theta", self.rope_theta)?;
        check.positive_real("rms_norm_eps", self.rms_norm_eps)?;
        check.positive_real("init_std", self.init_std)
    }
}

/// A benchmark suite (`models/suites/<name>.toml`): one model at one precision, its warm-up, how
/// long each cell is measured, and the grid of prefill and decode cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub name: String,
    /// The model shape file `models/<model>.toml`.
    pub model: String,
    pub precision: Precision,
    /// Seed of the weight and token generators.
    pub seed: u64,
    #[serde(default)]
    pub warmup: WarmupConfig,
    #[serde(default)]
    pub measure: MeasureConfig,
    pub prefill: PrefillGrid,
    pub decode: DecodeGrid,
}

/// Warm-up to equilibrium (DESIGN.md section 6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WarmupConfig {
    /// Warm up for at least this long.
    pub min_s: f64,
    /// Give up on equilibrium after this long, and say so in the result.
    pub max_s: f64,
    /// The trailing window the drift and spread are judged over.
    pub window_s: f64,
    /// Largest relative change of the median step time between the window's halves.
    pub max_drift: f64,
    /// Largest interquartile range of step time over the window, relative to its median.
    pub max_spread: f64,
}

impl Default for WarmupConfig {
    fn default() -> Self {
        WarmupConfig { min_s: 60.0, max_s: 300.0, window_s: 10.0, max_drift: 0.02, max_spread: 0.10 }
    }
}

/// How long each cell is measured: at least `min_steps` steps and `min_s` seconds, and never more
/// than `max_steps` steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MeasureConfig {
    pub min_steps: u32,
    pub min_s: f64,
    pub max_steps: u32,
}

impl Default for MeasureConfig {
    fn default() -> Self {
        MeasureConfig { min_steps: 10, min_s: 3.0, max_steps: 500 }
    }
}

/// Prefill cells: every batch size at every prompt length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefillGrid {
    pub batches: Vec<u32>,
    pub prompt_lens: Vec<u32>,
}

/// Decode cells: every batch size at every starting context length. The KV cache grows by one
/// token per measured step from there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeGrid {
    pub batches: Vec<u32>,
    pub ctxs: Vec<u32>,
}

impl Suite {
    /// Parse and validate a suite file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Suite, ConfigError> {
        let suite: Suite = parse(text, origin)?;
        suite.validate(origin)?;
        Ok(suite)
    }

    /// Check the suite as it stands (after any command-line overrides); `origin` names it.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let check = Checker { origin };
        check.name("name", &self.name)?;
        check.name("model", &self.model)?;
        let warmup = &self.warmup;
        check.non_negative("warmup.min_s", warmup.min_s)?;
        check.positive_real("warmup.window_s", warmup.window_s)?;
        check.positive_real("warmup.max_drift", warmup.max_drift)?;
        check.positive_real("warmup.max_spread", warmup.max_spread)?;
        check.non_negative("warmup.max_s", warmup.max_s)?;
        if warmup.max_s < warmup.min_s {
            return Err(check.invalid(
                "warmup.max_s",
                format!("({}) must be at least warmup.min_s ({})", warmup.max_s, warmup.min_s),
            ));
        }
        check.positive("measure.min_steps", self.measure.min_steps)?;
        check.non_negative("measure.min_s", self.measure.min_s)?;
        if self.measure.max_steps < self.measure.min_steps {
            return Err(check.invalid(
                "measure.max_steps",
                format!("({}) must be at least measure.min_steps ({})", self.measure.max_steps, self.measure.min_steps),
            ));
        }
        check.sizes("prefill.batches", &self.prefill.batches)?;
        check.sizes("prefill.prompt_lens", &self.prefill.prompt_lens)?;
        check.sizes("decode.batches", &self.decode.batches)?;
        check.sizes("decode.ctxs", &self.decode.ctxs)
    }
}

/// Parse TOML, reporting an error on one line as `origin:line:column: message (in `source
/// line`)`, so that the key at fault is named whatever the message says.
fn parse<T: serde::de::DeserializeOwned>(text: &str, origin: &str) -> Result<T, ConfigError> {
    toml::from_str(text).map_err(|error| {
        let message = error.message().replace('\n', " ");
        let Some(span) = error.span() else {
            return ConfigError::Syntax { origin: origin.to_owned(), message };
        };
        let before = &text[..span.start.min(text.len())];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
        ConfigError::Syntax {
            origin: format!("{origin}:{}:{}", before.matches('\n').count() + 1, before.len() - line_start + 1),
            message: format!("{message} (in `{}`)", text[line_start..line_end].trim()),
        }
    })
}

struct Checker<'a> {
    origin: &'a str,
}

impl Checker<'_> {
    fn invalid(&self, key: &str, message: String) -> ConfigError {
        ConfigError::Invalid { origin: self.origin.to_owned(), key: key.to_owned(), message }
    }

    fn name(&self, key: &str, value: &str) -> Result<(), ConfigError> {
        let ok = !value.is_empty()
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if ok {
            Ok(())
        } else {
            Err(self.invalid(key, format!("'{value}' must be a non-empty name of letters, digits, '-', '_' or '.'")))
        }
    }

    fn positive(&self, key: &str, value: u32) -> Result<(), ConfigError> {
        if value > 0 {
            Ok(())
        } else {
            Err(self.invalid(key, "must be greater than 0, got 0".to_owned()))
        }
    }

    fn positive_real(&self, key: &str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(self.invalid(key, format!("must be a finite number greater than 0, got {value}")))
        }
    }

    fn non_negative(&self, key: &str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && value >= 0.0 {
            Ok(())
        } else {
            Err(self.invalid(key, format!("must be a finite number of at least 0, got {value}")))
        }
    }

    fn sizes(&self, key: &str, values: &[u32]) -> Result<(), ConfigError> {
        if values.is_empty() {
            return Err(self.invalid(key, "must list at least one size".to_owned()));
        }
        match values.iter().find(|&&v| v == 0) {
            Some(_) => Err(self.invalid(key, format!("must hold sizes greater than 0, got {values:?}"))),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = r#"
        name = "tiny"
        family = "dense"
        vocab_size = 256
        hidden_size = 64
        intermediate_size = 172
        num_layers = 2
        num_heads = 4
        num_kv_heads = 2
        rope_theta = 10000.0
        rms_norm_eps = 1e-5
    "#;

    const SUITE: &str = r#"
        name = "t"
        model = "tiny"
        precision = "fp32"
        seed = 1
        [prefill]
        batches = [1]
        prompt_lens = [16, 32]
        [decode]
        batches = [1, 4]
        ctxs = [32]
    "#;

    #[test]
    fn parses_a_model_and_counts_its_parameters() {
        let m = ModelShape::from_toml(MODEL, "tiny.toml").unwrap();
        assert_eq!(m.head_dim(), 16);
        // embed 256*64 + lm head 256*64 + 2 layers * (q,o 64*64*2 + k,v 64*32*2 + mlp 3*64*172
        // + norms 128) + final norm 64
        let per_layer = 64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 172 + 128;
        assert_eq!(m.parameter_count(), 2 * 256 * 64 + 2 * per_layer + 64);
        assert_eq!(m.kv_bytes_per_token(Precision::Bf16), 2 * 2 * 2 * 16 * 2);
    }

    #[test]
    fn llama_3_1_8b_shape_has_its_published_parameter_count() {
        let text = r#"
            name = "llama-3.1-8b"
            family = "dense"
            vocab_size = 128256
            hidden_size = 4096
            intermediate_size = 14336
            num_layers = 32
            num_heads = 32
            num_kv_heads = 8
            rope_theta = 500000.0
            rms_norm_eps = 1e-5
        "#;
        let m = ModelShape::from_toml(text, "x").unwrap();
        assert_eq!(m.parameter_count(), 8_030_261_248);
    }

    #[test]
    fn suite_defaults_fill_warmup_and_measure() {
        let s = Suite::from_toml(SUITE, "t.toml").unwrap();
        assert_eq!(s.warmup, WarmupConfig::default());
        assert_eq!(s.warmup.min_s, 60.0);
        assert_eq!(s.measure, MeasureConfig::default());
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        let text = SUITE.replace("seed = 1", "seed = 1\nsede = 2");
        let error = Suite::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(error.starts_with("t.toml:6:1: unknown field `sede`"), "{error}");
        assert!(error.ends_with("(in `sede = 2`)"), "{error}");
        assert_eq!(error.lines().count(), 1, "{error}");
    }

    #[test]
    fn zero_and_negative_sizes_are_refused() {
        let zero = SUITE.replace("batches = [1, 4]", "batches = [1, 0]");
        let error = Suite::from_toml(&zero, "t.toml").unwrap_err();
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "decode.batches"), "{error}");

        let negative = SUITE.replace("prompt_lens = [16, 32]", "prompt_lens = [-16]");
        let error = Suite::from_toml(&negative, "t.toml").unwrap_err().to_string();
        assert!(error.contains("prompt_lens") && error.contains("-16"), "{error}");

        let heads = MODEL.replace("num_kv_heads = 2", "num_kv_heads = 3");
        let error = ModelShape::from_toml(&heads, "tiny.toml").unwrap_err().to_string();
        assert!(error.contains("num_heads"), "{error}");
    }

    #[test]
    fn warmup_bounds_must_be_ordered() {
        let text = format!("{SUITE}\n[warmup]\nmin_s = 10.0\nmax_s = 5.0\n");
        let error = Suite::from_toml(&text, "t.toml").unwrap_err();
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "warmup.max_s"), "{error}");
    }
}
