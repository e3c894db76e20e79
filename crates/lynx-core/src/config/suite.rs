//! Benchmark suites (`models/suites/<name>.toml`).

use super::{parse, Checker, ConfigError, Precision, Scale};
use serde::{Deserialize, Serialize};

/// A benchmark suite (`models/suites/<name>.toml`): one model at one precision, its warm-up, how
/// long each cell is measured, and the grid of prefill and decode cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub name: String,
    /// The model shape file `models/<model>.toml`.
    pub model: String,
    pub precision: Precision,
    /// A layer subset and/or a tensor-parallel shard, for models larger than one device.
    #[serde(default, skip_serializing_if = "Scale::is_full")]
    pub scale: Scale,
    /// Seed of the weight and token generators.
    pub seed: u64,
    #[serde(default)]
    pub warmup: WarmupConfig,
    #[serde(default)]
    pub measure: MeasureConfig,
    #[serde(default)]
    pub parity: ParityConfig,
    #[serde(default)]
    pub telemetry: TelemetryConfig,
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
    /// Largest relative change of the median SM (or core) clock between the window's halves.
    pub max_clock_drift: f64,
    /// Largest relative change of the median power between the window's halves.
    pub max_power_drift: f64,
    /// Largest change of the median temperature between the window's halves, °C.
    pub max_temperature_change_c: f64,
}

impl Default for WarmupConfig {
    fn default() -> Self {
        WarmupConfig {
            min_s: 60.0,
            max_s: 300.0,
            window_s: 10.0,
            max_drift: 0.02,
            max_spread: 0.10,
            max_clock_drift: 0.01,
            max_power_drift: 0.05,
            max_temperature_change_c: 1.0,
        }
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

/// The correctness gate: the device's logits for a fixed seeded prompt against a float64 CPU
/// reference of the same weights, on the model's first `layers` layers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ParityConfig {
    /// Layers of the model the check runs (at least one of each kind the model has).
    pub layers: u32,
    pub batch: u32,
    pub prompt_len: u32,
    /// Decode steps after the prompt, each fed the next token of the fixed sequence.
    pub decode_steps: u32,
}

impl Default for ParityConfig {
    fn default() -> Self {
        ParityConfig { layers: 2, batch: 2, prompt_len: 16, decode_steps: 8 }
    }
}

/// Telemetry sampling through the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// Samples per second of every source, 1 to 100.
    pub rate_hz: f64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig { rate_hz: 20.0 }
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
        check.positive_real("warmup.max_clock_drift", warmup.max_clock_drift)?;
        check.positive_real("warmup.max_power_drift", warmup.max_power_drift)?;
        check.positive_real("warmup.max_temperature_change_c", warmup.max_temperature_change_c)?;
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
        check.positive("scale.layers", self.scale.layers.unwrap_or(1))?;
        check.positive("scale.tp", self.scale.tp)?;
        if !(1.0..=100.0).contains(&self.telemetry.rate_hz) {
            return Err(check
                .invalid("telemetry.rate_hz", format!("must be from 1 to 100 (Hz), got {}", self.telemetry.rate_hz)));
        }
        check.positive("parity.layers", self.parity.layers)?;
        check.positive("parity.batch", self.parity.batch)?;
        check.positive("parity.prompt_len", self.parity.prompt_len)?;
        check.positive("parity.decode_steps", self.parity.decode_steps)?;
        check.sizes("prefill.batches", &self.prefill.batches)?;
        check.sizes("prefill.prompt_lens", &self.prefill.prompt_lens)?;
        check.sizes("decode.batches", &self.decode.batches)?;
        check.sizes("decode.ctxs", &self.decode.ctxs)
    }
}
