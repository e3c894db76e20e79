//! Suites and model shapes, as written in `models/suites/*.toml` and `models/*.toml`.
//!
//! Parsing refuses unknown keys (a misspelt key would otherwise silently fall back to a default)
//! and validates every size and threshold, naming the file and the key that is wrong.

pub mod hf;
mod lengths;
mod model;
mod scale;
mod suite;

pub use lengths::{Length, Lognormal, MOST_FILE_PAIRS};
pub use model::{
    Activation, Attention, AttentionBias, DenseMlp, Gqa, Mla, ModelShape, Moe, ParameterCount, RopeScaling, Router,
    SlidingLayers, SlidingWindow,
};
pub use scale::{shard, source_layers, Scale};
pub use suite::{
    DecodeGrid, Ladder, LatencyBound, MeasureConfig, ParityConfig, PrefillGrid, ServeConfig, SimulationConfig, Suite,
    TelemetryConfig, WarmupConfig, Workload,
};

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

/// Numeric precision of a model's weights (and, but for fp8, of its activations and KV cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Bf16,
    Fp16,
    /// e4m3 weights of the linear layers with bf16 activations, KV cache and other weights.
    Fp8,
}

impl Precision {
    pub const ALL: [Precision; 4] = [Precision::Fp32, Precision::Bf16, Precision::Fp16, Precision::Fp8];

    /// Bytes one weight element of a linear layer occupies.
    pub fn bytes(self) -> u64 {
        match self {
            Precision::Fp32 => 4,
            Precision::Bf16 | Precision::Fp16 => 2,
            Precision::Fp8 => 1,
        }
    }

    /// Bytes of one activation or KV-cache element.
    pub fn activation_bytes(self) -> u64 {
        match self {
            Precision::Fp8 => 2,
            other => other.bytes(),
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Precision::Fp32 => "fp32",
            Precision::Bf16 => "bf16",
            Precision::Fp16 => "fp16",
            Precision::Fp8 => "fp8",
        })
    }
}

/// Parse TOML, reporting an error on one line as `origin:line:column: message (in `source
/// line`)`, so that the key at fault is named whatever the message says.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &str, origin: &str) -> Result<T, ConfigError> {
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

pub(crate) struct Checker<'a> {
    pub(crate) origin: &'a str,
}

impl Checker<'_> {
    pub(crate) fn invalid(&self, key: &str, message: String) -> ConfigError {
        ConfigError::Invalid { origin: self.origin.to_owned(), key: key.to_owned(), message }
    }

    pub(crate) fn name(&self, key: &str, value: &str) -> Result<(), ConfigError> {
        let ok = !value.is_empty()
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
        if ok {
            Ok(())
        } else {
            Err(self.invalid(key, format!("'{value}' must be a non-empty name of letters, digits, '-', '_' or '.'")))
        }
    }

    pub(crate) fn positive(&self, key: &str, value: u32) -> Result<(), ConfigError> {
        if value > 0 {
            Ok(())
        } else {
            Err(self.invalid(key, "must be greater than 0, got 0".to_owned()))
        }
    }

    pub(crate) fn positive_real(&self, key: &str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && value > 0.0 {
            Ok(())
        } else {
            Err(self.invalid(key, format!("must be a finite number greater than 0, got {}", readable(value))))
        }
    }

    pub(crate) fn non_negative(&self, key: &str, value: f64) -> Result<(), ConfigError> {
        if value.is_finite() && value >= 0.0 {
            Ok(())
        } else {
            Err(self.invalid(key, format!("must be a finite number of at least 0, got {}", readable(value))))
        }
    }

    /// A list of sizes: at least one and at most [`MOST_LISTED`], each from 1 to `most`.
    pub(crate) fn sizes(&self, key: &str, values: &[u32], most: u32) -> Result<(), ConfigError> {
        if values.is_empty() {
            return Err(self.invalid(key, "must list at least one size".to_owned()));
        }
        self.listed(key, values.len(), MOST_LISTED)?;
        if values.contains(&0) {
            return Err(self.invalid(key, format!("must hold sizes greater than 0, got {values:?}")));
        }
        match values.iter().find(|&&v| v > most) {
            Some(v) => Err(self.invalid(key, format!("must hold sizes of at most {most}, got {v}"))),
            None => Ok(()),
        }
    }

    /// A list of `len` entries, at most `most`.
    pub(crate) fn listed(&self, key: &str, len: usize, most: usize) -> Result<(), ConfigError> {
        if len <= most {
            Ok(())
        } else {
            Err(self.invalid(key, format!("lists {len} entries; at most {most} are allowed")))
        }
    }

    /// A count from 1 to `most`.
    pub(crate) fn count(&self, key: &str, value: u32, most: u32) -> Result<(), ConfigError> {
        self.positive(key, value)?;
        self.at_most(key, value, most)
    }

    /// A count from `least` to `most`; `why` says why not fewer.
    pub(crate) fn within(&self, key: &str, value: u32, least: u32, most: u32, why: &str) -> Result<(), ConfigError> {
        if (least..=most).contains(&value) {
            Ok(())
        } else {
            Err(self.invalid(key, format!("must be from {least} ({why}) to {most}, got {value}")))
        }
    }

    /// A count of at most `most`.
    pub(crate) fn at_most(&self, key: &str, value: u32, most: u32) -> Result<(), ConfigError> {
        if value <= most {
            Ok(())
        } else {
            Err(self.invalid(key, format!("must be at most {most}, got {value}")))
        }
    }

    /// A duration in seconds from 0 to `most`.
    pub(crate) fn seconds(&self, key: &str, value: f64, most: f64) -> Result<(), ConfigError> {
        self.non_negative(key, value)?;
        self.real_at_most(key, value, most, " s")
    }

    /// A number of at most `most` (`unit` after it in the message).
    pub(crate) fn real_at_most(&self, key: &str, value: f64, most: f64, unit: &str) -> Result<(), ConfigError> {
        if value <= most {
            Ok(())
        } else {
            Err(self.invalid(key, format!("must be at most {}{unit}, got {}{unit}", readable(most), readable(value))))
        }
    }
}

/// The most entries a list of sizes in a suite may have (batches, prompt lengths, contexts).
pub const MOST_LISTED: usize = 256;

/// A number as a reader wants it in a message: plain where that is short, in scientific
/// notation where Rust's plain form would run to hundreds of digits (`1e300`, `1e-300`).
pub fn readable(value: f64) -> String {
    let magnitude = value.abs();
    if value.is_finite() && magnitude != 0.0 && !(1e-4..1e12).contains(&magnitude) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: &str = r#"
        name = "tiny"
        vocab_size = 256
        hidden_size = 64
        num_layers = 2
        rms_norm_eps = 1e-5
        [attention]
        kind = "gqa"
        num_heads = 4
        num_kv_heads = 2
        rope_theta = 10000.0
        [mlp]
        intermediate_size = 172
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
        let count = m.parameters();
        assert_eq!(count.total, 2 * 256 * 64 + 2 * per_layer + 64);
        assert_eq!(count.active, count.total);
        assert_eq!(count.embedding, 256 * 64);
        assert_eq!(count.linear, 2 * (64 * 64 * 2 + 64 * 32 * 2 + 3 * 64 * 172));
        assert_eq!(m.kv_bytes_per_token(Precision::Bf16), 2 * 2 * 2 * 16 * 2);
        assert_eq!(m.kv_bytes_per_token(Precision::Fp8), m.kv_bytes_per_token(Precision::Bf16));
        assert_eq!(m.weight_bytes(Precision::Fp8), count.linear + 2 * (count.total - count.linear));
        assert_eq!(m.kv_bytes(Precision::Fp32, 10), 10 * m.kv_bytes_per_token(Precision::Fp32));
    }

    #[test]
    fn moe_counts_idle_experts_as_inactive() {
        let text = MODEL.replace(
            "[mlp]\n        intermediate_size = 172",
            "[moe]\nnum_experts = 8\nexperts_per_token = 2\nintermediate_size = 32\nshared_experts = 1\n\
             [moe.router]\nkind = \"softmax\"",
        );
        let m = ModelShape::from_toml(&text, "moe.toml").unwrap();
        let expert = 3 * 64 * 32;
        let count = m.parameters();
        let attention = 64 * 64 * 2 + 64 * 32 * 2;
        let router = 64 * 8;
        assert_eq!(count.total, 2 * 256 * 64 + 2 * (attention + 9 * expert + router + 128) + 64);
        assert_eq!(count.total - count.active, 2 * 6 * expert);
    }

    #[test]
    fn sliding_window_layers_stop_growing_at_their_window() {
        let text = MODEL
            .replace("rope_theta = 10000.0", "rope_theta = 10000.0\nsliding_window = { size = 4, layers = \"even\" }");
        let m = ModelShape::from_toml(&text, "sw.toml").unwrap();
        let per_layer_token = 2 * 2 * 16 * 4;
        assert_eq!(m.kv_bytes_per_token(Precision::Fp32), per_layer_token);
        assert_eq!(m.kv_bytes(Precision::Fp32, 100), (100 + 4) * per_layer_token);
    }

    /// A shape whose counts would overflow 64 bits is refused, naming what is too large, and
    /// counting it saturates rather than wrapping or panicking; the largest a file may hold
    /// counts exactly.
    #[test]
    fn shapes_too_large_to_count_are_refused_and_counting_them_saturates() {
        let refused = |text: String| ModelShape::from_toml(&text, "big.toml").unwrap_err().to_string();
        let error = refused(MODEL.replace("hidden_size = 64", "hidden_size = 4294967295"));
        assert!(error.contains("hidden_size must be at most 16777216, got 4294967295"), "{error}");
        let error = refused(
            MODEL
                .replace("hidden_size = 64", &format!("hidden_size = {}", model::MOST_SIZE))
                .replace("num_layers = 2", &format!("num_layers = {}", model::MOST_SIZE)),
        );
        assert!(error.contains("shape counts over 1.8e19 parameters, more than the 1e15"), "{error}");
        let error = refused(
            MODEL.replace("num_layers = 2", "num_layers = 100000000").replace("vocab_size = 256", "vocab_size = 1"),
        );
        assert!(error.contains("num_layers must be at most"), "{error}");
        // Just over the bound, counted exactly: 2 layers of a wide MLP.
        let wide = MODEL.replace("intermediate_size = 172", &format!("intermediate_size = {}", model::MOST_SIZE));
        let wide =
            wide.replace("hidden_size = 64", "hidden_size = 16777216").replace("num_heads = 4", "num_heads = 4096");
        let error = refused(wide.replace("num_kv_heads = 2", "num_kv_heads = 4096"));
        assert!(error.contains("shape counts 3.") && error.contains("e15 parameters"), "{error}");

        let mut unchecked = ModelShape::from_toml(MODEL, "tiny.toml").unwrap();
        unchecked.hidden_size = u32::MAX;
        unchecked.num_layers = u32::MAX;
        unchecked.vocab_size = u32::MAX;
        let count = unchecked.parameters();
        assert_eq!((count.total, count.linear), (u64::MAX, u64::MAX));
        assert_eq!(unchecked.weight_bytes(Precision::Fp32), u64::MAX);
        assert_eq!(unchecked.kv_cache_bytes(Precision::Fp32, u64::MAX, 2), u64::MAX);
    }

    #[test]
    fn a_moe_model_without_dense_layers_needs_no_mlp() {
        let text = MODEL.replace("[mlp]\n        intermediate_size = 172", "");
        let error = ModelShape::from_toml(&text, "m.toml").unwrap_err().to_string();
        assert!(error.contains("mlp is needed"), "{error}");
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

        let text = MODEL.replace("num_kv_heads = 2", "num_kv_heads = 2\nnum_kv_head = 2");
        let error = ModelShape::from_toml(&text, "m.toml").unwrap_err().to_string();
        assert!(error.contains("num_kv_head"), "{error}");
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
        assert!(error.contains("attention.num_heads"), "{error}");
    }

    #[test]
    fn warmup_bounds_must_be_ordered() {
        let text = format!("{SUITE}\n[warmup]\nmin_s = 10.0\nmax_s = 5.0\n");
        let error = Suite::from_toml(&text, "t.toml").unwrap_err();
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "warmup.max_s"), "{error}");
    }

    /// `[serve]` is bounded and names only workloads the suite has; absent, a suite serializes
    /// as before (no `serve` key).
    #[test]
    fn a_serving_phase_is_bounded_and_names_the_suites_workloads() {
        let workload = "\n[[workload]]\nname = \"chat\"\nisl = 8\nosl = 8\n";
        let with = |serve: &str| Suite::from_toml(&format!("{SUITE}{workload}\n[serve]\n{serve}"), "t.toml");
        let suite = with("requests = 40\nworkloads = [\"chat\"]").unwrap();
        assert_eq!(suite.serve.as_ref().map(|s| (s.requests, s.max_s)), Some((40, 600.0)));
        for (serve, key) in [
            ("requests = 5", "serve.requests"),
            ("requests = 200000", "serve.requests"),
            ("max_s = 0.0", "serve.max_s"),
            ("requests = 40\nmost_requests = 39", "serve.most_requests"),
            ("most_requests = 200000", "serve.most_requests"),
            ("max_s = 1e300", "serve.max_s"),
            ("total_s = 0.0", "serve.total_s"),
            ("total_s = 1e300", "serve.total_s"),
            ("run_s = -1.0", "serve.run_s"),
            ("run_s = 1e300", "serve.run_s"),
            ("workloads = [\"reason\"]", "serve.workloads"),
        ] {
            let error = with(serve).unwrap_err();
            assert!(matches!(&error, ConfigError::Invalid { key: k, .. } if k == key), "{serve}: {error}");
        }
        let plain = Suite::from_toml(SUITE, "t.toml").unwrap();
        assert!(plain.serve.is_none() && !serde_json::to_string(&plain).unwrap().contains("serve"));
        // Neither budget key set: none is written, and the phase has no budget.
        let serve = with("requests = 40").unwrap().serve.unwrap();
        let written = serde_json::to_string(&serve).unwrap();
        assert!(!written.contains("total_s") && !written.contains("run_s"), "{written}");
        assert_eq!(serve.budget_s(100.0), None);
    }

    /// The serving phase's budget: `serve.total_s`, cut to what is left of `serve.run_s` when the
    /// phase starts, never below nothing.
    #[test]
    fn the_serving_budget_is_total_s_cut_to_what_run_s_leaves() {
        let serve = |total_s: Option<f64>, run_s: Option<f64>| ServeConfig { total_s, run_s, ..Default::default() };
        assert_eq!(serve(Some(110.0), None).budget_s(250.0), Some(110.0));
        assert_eq!(serve(Some(110.0), Some(280.0)).budget_s(150.0), Some(110.0));
        assert_eq!(serve(Some(110.0), Some(280.0)).budget_s(193.0), Some(87.0));
        assert_eq!(serve(Some(110.0), Some(280.0)).budget_s(300.0), Some(0.0));
        assert_eq!(serve(None, Some(280.0)).budget_s(200.0), Some(80.0));
    }

    /// Issue 17: every duration, count and rate a suite sets has an upper bound the check
    /// enforces, naming the key and the bound; a huge number is printed readably (`1e300`, not
    /// 301 digits).
    #[test]
    fn every_duration_count_and_rate_is_bounded() {
        let cases = [
            ("[roofline]\nsustained_s = 1e300", "roofline.sustained_s", "at most 3600 s, got 1e300 s"),
            ("[warmup]\nmin_s = 1e6\nmax_s = 1e7", "warmup.min_s", "at most 86400 s"),
            ("[warmup]\nmax_s = 1e9", "warmup.max_s", "at most 86400 s"),
            ("[warmup]\nmin_s = 1.0\nmax_s = 5.0\nwindow_s = 10.0", "warmup.window_s", "at most warmup.max_s"),
            ("[measure]\nmin_s = 1e5", "measure.min_s", "at most 3600 s"),
            ("[measure]\nmax_steps = 4000000000", "measure.max_steps", "at most 1000000"),
            ("[parity]\nbatch = 100000", "parity.batch", "at most 64"),
            ("[parity]\ndecode_steps = 2000000", "parity.decode_steps", "at most 1024"),
            ("[parity]\nprompt_len = 4000000000", "parity.prompt_len", "at most 4096"),
            ("[scale]\ntp = 100000", "scale.tp", "at most 4096"),
            ("[simulation]\nmax_batch = 4000000000", "simulation.max_batch", "at most 65536"),
            ("[simulation]\nchunked_prefill = 4000000000", "simulation.chunked_prefill", "at most 16777216"),
            ("[[bound]]\nname = \"b\"\nttft_p99_s = 1e300\ntpot_p99_s = 0.1", "bound[0].ttft_p99_s", "at most 86400 s"),
            ("[[workload]]\nname = \"w\"\nisl = 4000000000\nosl = 8", "workload[0].isl", "at most 16777216"),
            (
                "[[workload]]\nname = \"w\"\nisl = { uniform = [1, 4000000000] }\nosl = 8",
                "workload[0].isl.uniform",
                "at most 16777216",
            ),
            ("[telemetry]\nrate_hz = 1e300", "telemetry.rate_hz", "got 1e300"),
        ];
        for (section, key, says) in cases {
            let error = Suite::from_toml(&format!("{SUITE}\n{section}\n"), "t.toml").unwrap_err();
            assert!(matches!(&error, ConfigError::Invalid { key: k, .. } if k == key), "{section}: {error}");
            assert!(error.to_string().contains(says), "{section}: {error}");
        }
        for (grid, list) in [("[decode]", "ctxs = [32]"), ("[prefill]", "prompt_lens = [16, 32]")] {
            let text = SUITE.replacen(list, &list.replace("32]", "4000000000]"), 1);
            assert!(text != SUITE && Suite::from_toml(&text, "t.toml").is_err(), "{grid}");
        }
        let long: Vec<String> = (1..=300).map(|n| n.to_string()).collect();
        let many = SUITE.replace("ctxs = [32]", &format!("ctxs = [{}]", long.join(", ")));
        assert!(Suite::from_toml(&many, "t.toml").unwrap_err().to_string().contains("at most 256"));
        let workloads = "[[workload]]\nname = \"w\"\nisl = 8\nosl = 8\n".repeat(65);
        let error = Suite::from_toml(&format!("{SUITE}\n{workloads}"), "t.toml").unwrap_err();
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "workload"), "{error}");
        let batches = SUITE.replace("batches = [1, 4]", "batches = [1, 1000000]");
        assert!(Suite::from_toml(&batches, "t.toml").unwrap_err().to_string().contains("at most 65536"));
        assert_eq!(readable(1e300), "1e300");
        assert_eq!(readable(0.25), "0.25");
        assert_eq!(readable(-3.0), "-3");
    }

    /// Issue 17: `[simulation] requests` is bounded, so that no suite makes deriving a result
    /// allocate without limit.
    #[test]
    fn simulated_requests_are_bounded() {
        let text = format!("{SUITE}\n[simulation]\nrequests = 1000000000\n");
        let error = Suite::from_toml(&text, "t.toml").unwrap_err();
        assert!(matches!(&error, ConfigError::Invalid { key, .. } if key == "simulation.requests"), "{error}");
        assert!(error.to_string().contains("to 100000"), "{error}");
    }
}
