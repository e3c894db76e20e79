//! Benchmark suites (`models/suites/<name>.toml`).

use super::{parse, readable, Checker, ConfigError, Length, Precision, Scale};
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
    /// The request shapes the derived figures are computed for (ISL/OSL, e.g. 1k/1k chat).
    #[serde(default, rename = "workload")]
    pub workloads: Vec<Workload>,
    /// The latency bounds latency-bounded throughput is held to; MLPerf's server and interactive
    /// bounds of the nearest model when none are given (see [`crate::latency::default_bounds`]).
    #[serde(default, rename = "bound")]
    pub bounds: Vec<LatencyBound>,
    #[serde(default)]
    pub simulation: SimulationConfig,
    #[serde(default)]
    pub roofline: RooflineConfig,
    /// The serving phase, after the cells: a real serving loop on the device (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve: Option<ServeConfig>,
}

/// The serving phase (docs/SWEEPS.md, "Serving"): for each workload and bound it serves, the
/// simulation's latency-bounded rate and one 20% above it, each with `requests` requests on a
/// seeded Poisson schedule through a real continuous-batching loop on the device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// Requests served at each rate (the first tenth warms the server up and is left out of
    /// the percentiles).
    pub requests: u32,
    /// The workloads served, by name (empty: every workload of the suite).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<String>,
    /// The bounds served, by name (empty: every bound).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bounds: Vec<String>,
    /// Stop serving a rate after this long, and say so (the requests unfinished then are left
    /// out, and the rate's figures are marked incomplete).
    pub max_s: f64,
    /// Grow each workload's window, doubling from `requests` up to this many, until the
    /// simulation of the window shows what the steady state's does (the bound held at the
    /// latency-bounded rate, and broken 20% above it where the steady state breaks it), within
    /// `max_s` at each rate (docs/SWEEPS.md, "The window and the steady state"). Absent: every
    /// window is `requests` long, as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub most_requests: Option<u32>,
    /// The most seconds the serving phase may take in all, shared evenly among the workloads and
    /// bounds it serves: a window grows (`most_requests`) only while the rates it may serve (the
    /// latency-bounded rate, 20% above it, and 0.9× it should the bound break there) fit its
    /// share together, as simulated, and the step down under the latency-bounded rate is served
    /// only where its window still fits what is left of the share. The latency-bounded rate and
    /// 20% above it are served whatever the budget. Absent: no budget beyond `max_s` a rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_s: Option<f64>,
    /// The most seconds the run's process should take from its start to the serving phase's
    /// end: where the phase starts with less than `total_s` of this left (a slow sweep, a
    /// warm-up that ran long), its budget is what is left, so that the windows stay at
    /// `requests` and the step down goes unserved rather than the run running long. The
    /// latency-bounded rate and 20% above it are served whatever is left. Absent: the budget is
    /// `total_s` alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_s: Option<f64>,
}

impl ServeConfig {
    /// Whether the phase serves the workload and the bound of these names.
    pub fn serves(&self, workload: &str, bound: &str) -> bool {
        let named = |names: &[String], name: &str| names.is_empty() || names.iter().any(|n| n == name);
        named(&self.workloads, workload) && named(&self.bounds, bound)
    }

    /// The serving phase's budget when it starts `elapsed_s` into the run's process: `total_s`,
    /// cut to what is left of `run_s`; none where neither is set.
    pub fn budget_s(&self, elapsed_s: f64) -> Option<f64> {
        let left_s = self.run_s.map(|run_s| (run_s - elapsed_s).max(0.0));
        match (self.total_s, left_s) {
            (Some(total_s), Some(left_s)) => Some(total_s.min(left_s)),
            (total_s, left_s) => total_s.or(left_s),
        }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            requests: 200,
            workloads: Vec::new(),
            bounds: Vec::new(),
            max_s: 600.0,
            most_requests: None,
            total_s: None,
            run_s: None,
        }
    }
}

/// The roofline probes a run makes (docs/ROOFLINE.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RooflineConfig {
    /// Measure the device's ceilings before warm-up (bandwidth, burst matmul).
    pub probe: bool,
    /// Seconds of back-to-back matmuls for the sustained rate, after warm-up; 0 for none.
    pub sustained_s: f64,
}

impl Default for RooflineConfig {
    fn default() -> Self {
        RooflineConfig { probe: true, sustained_s: 10.0 }
    }
}

/// A request shape: input (prompt) and output lengths, in tokens, each fixed or a mix
/// ([`Length`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// A short name, e.g. `chat`, `summarise`, `reason`.
    pub name: String,
    /// Input sequence length.
    pub isl: Length,
    /// Output sequence length.
    pub osl: Length,
}

impl Workload {
    /// A workload of fixed lengths.
    pub fn fixed(name: &str, isl: u32, osl: u32) -> Workload {
        Workload { name: name.to_owned(), isl: Length::Fixed(isl), osl: Length::Fixed(osl) }
    }

    /// The pairs of its lengths file, if it draws from one (empty until the suite is read).
    pub fn file_pairs(&self) -> &[[u32; 2]] {
        match &self.isl {
            Length::File { pairs, .. } => pairs,
            _ => &[],
        }
    }

    /// The longest input and output lengths a request can draw.
    pub fn max_lengths(&self) -> (u32, u32) {
        (self.isl.max(self.file_pairs(), 0), self.osl.max(self.file_pairs(), 1))
    }

    /// The shortest input and output lengths a request can draw.
    pub fn min_lengths(&self) -> (u32, u32) {
        (self.isl.min(self.file_pairs(), 0), self.osl.min(self.file_pairs(), 1))
    }

    /// Typical input and output lengths ([`Length::typical`]).
    pub fn typical_lengths(&self) -> (f64, f64) {
        (self.isl.typical(self.file_pairs(), 0), self.osl.typical(self.file_pairs(), 1))
    }

    /// Whether requests drawn from `self` and from `other` draw their lengths alike: the same
    /// lengths (a range ratio the same as the uniform range it spans, which draws the same
    /// integers), or the same pairs of a lengths file whatever the file was called. Names are
    /// not compared.
    pub fn same_lengths(&self, other: &Workload) -> bool {
        match (self.file_pairs(), other.file_pairs()) {
            ([], []) => {
                self.isl.file().is_none()
                    && other.isl.file().is_none()
                    && self.isl.spans() == other.isl.spans()
                    && self.osl.spans() == other.osl.spans()
            }
            (mine, theirs) => mine == theirs,
        }
    }

    /// `self` checked as a suite's workload would be, with `origin` naming where it was given:
    /// one line naming the length at fault when requests could not be drawn from it.
    pub fn check(&self, origin: &str) -> Result<(), ConfigError> {
        self.validate(&Checker { origin }, "workload")
    }

    pub(crate) fn validate(&self, check: &Checker, key: &str) -> Result<(), ConfigError> {
        check.name(&format!("{key}.name"), &self.name)?;
        self.isl.validate(check, &format!("{key}.isl"))?;
        self.osl.validate(check, &format!("{key}.osl"))?;
        if self.isl.file() != self.osl.file() {
            return Err(check.invalid(
                key,
                "draws lengths from a file for one of isl and osl only: a file's pairs give both (name the same \
                 file for each)"
                    .to_owned(),
            ));
        }
        if let Length::File { pairs, .. } = &self.osl {
            if !pairs.is_empty() {
                return Err(check.invalid(&format!("{key}.osl.pairs"), "belong to isl's file only".to_owned()));
            }
        }
        // TPOT, and a user's token rate, are measured over the tokens after the first (MLPerf:
        // (latency - TTFT) / (output tokens - 1)): requests of one output token have none. (A
        // file not yet read has no pairs, and is judged once it is.)
        if self.osl.max(self.file_pairs(), 1) == 1 {
            return Err(check.invalid(
                &format!("{key}.osl"),
                "gives every request one output token: TPOT, and a user's token rate, are measured over the \
                 tokens after the first; give at least 2"
                    .to_owned(),
            ));
        }
        Ok(())
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.name, self.isl, self.osl)
    }
}

/// A p99 latency bound on time to first token and time per output token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyBound {
    /// e.g. `server`, `interactive`.
    pub name: String,
    pub ttft_p99_s: f64,
    pub tpot_p99_s: f64,
    /// Where the bound comes from, when it is not the suite's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl LatencyBound {
    /// Whether a p99 TTFT and a p99 TPOT (seconds) are inside the bound.
    pub fn holds(&self, ttft_p99_s: f64, tpot_p99_s: f64) -> bool {
        ttft_p99_s <= self.ttft_p99_s && tpot_p99_s <= self.tpot_p99_s
    }
}

/// The continuous-batching simulation behind latency-bounded throughput (docs/SWEEPS.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimulationConfig {
    /// Requests simulated at each load; the first tenth warms the simulated server up and is
    /// left out of the percentiles.
    pub requests: u32,
    /// Most sequences decoding at once; by default the largest decode batch measured without
    /// failure at every context the workload passes through.
    pub max_batch: Option<u32>,
    /// Prefill in chunks of this many tokens, batched with the decode step (chunked prefill);
    /// by default whole prompts are prefilled in their own steps, pausing decode.
    pub chunked_prefill: Option<u32>,
}

impl SimulationConfig {
    /// The most requests a load may simulate (and a serving phase serve at one rate): each is a
    /// few dozen bytes and a few events, so this bounds what deriving a result can allocate.
    pub const MOST_REQUESTS: u32 = 100_000;
}

impl Default for SimulationConfig {
    fn default() -> Self {
        SimulationConfig { requests: 2000, max_batch: None, chunked_prefill: None }
    }
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
    /// The largest step-time coefficient of variation a stable cell has (the `stability`
    /// check); by default 5% on a GPU and 10% on a CPU ([`MeasureConfig::max_cv_on`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cv: Option<f64>,
    /// The most host CPU cores that processes other than lynx's may keep busy on average during
    /// a stable cell; by default [`MeasureConfig::DEFAULT_MAX_OTHER_CPU_CORES`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_other_cpu_cores: Option<f64>,
    /// The most seconds a CPU quota on lynx's cgroup may hold it off its CPUs during a stable
    /// cell; by default none ([`MeasureConfig::max_cpu_throttled_s`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_cpu_throttled_s: Option<f64>,
}

impl MeasureConfig {
    pub const DEFAULT_MAX_CV_GPU: f64 = 0.05;
    pub const DEFAULT_MAX_CV_CPU: f64 = 0.10;
    pub const DEFAULT_MAX_OTHER_CPU_CORES: f64 = 0.25;

    /// The CV bound on a GPU (`gpu`) or a CPU.
    pub fn max_cv_on(&self, gpu: bool) -> f64 {
        self.max_cv.unwrap_or(if gpu { Self::DEFAULT_MAX_CV_GPU } else { Self::DEFAULT_MAX_CV_CPU })
    }

    pub fn max_other_cpu_cores(&self) -> f64 {
        self.max_other_cpu_cores.unwrap_or(Self::DEFAULT_MAX_OTHER_CPU_CORES)
    }

    /// A throttled step timed the quota as much as the device: by default a stable cell was not
    /// throttled at all.
    pub fn max_cpu_throttled_s(&self) -> f64 {
        self.max_cpu_throttled_s.unwrap_or(0.0)
    }
}

impl Default for MeasureConfig {
    fn default() -> Self {
        MeasureConfig {
            min_steps: 10,
            min_s: 3.0,
            max_steps: 500,
            max_cv: None,
            max_other_cpu_cores: None,
            max_cpu_throttled_s: None,
        }
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

/// Prefill cells: a ladder of batch sizes (`batches`, or `max_batch`: see [`Ladder`]) at every
/// prompt length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefillGrid {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u32>,
    pub prompt_lens: Vec<u32>,
}

impl PrefillGrid {
    pub fn ladder(&self) -> Ladder {
        Ladder { batches: self.batches.clone(), max_batch: self.max_batch }
    }
}

/// Decode cells: a ladder of batch sizes (`batches`, or `max_batch`: see [`Ladder`]) at every
/// starting context length. The KV cache grows by one token per measured step from there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeGrid {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u32>,
    pub ctxs: Vec<u32>,
}

impl DecodeGrid {
    pub fn ladder(&self) -> Ladder {
        Ladder { batches: self.batches.clone(), max_batch: self.max_batch }
    }
}

/// The batch sizes one line of a sweep climbs: the listed `batches`, or (with `max_batch`)
/// 1, 2, 4, … up to `max_batch`. Climbing stops early at the first batch that runs out of
/// memory or whose step time passes the suite's largest latency bound.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Ladder {
    pub batches: Vec<u32>,
    pub max_batch: Option<u32>,
}

impl Ladder {
    /// The batch sizes in the order they run (ascending).
    pub fn batches(&self) -> Vec<u32> {
        match self.max_batch {
            Some(max) => std::iter::successors(Some(1u32), |b| b.checked_mul(2)).take_while(|&b| b <= max).collect(),
            None => {
                let mut batches = self.batches.clone();
                batches.sort_unstable();
                batches.dedup();
                batches
            }
        }
    }

    fn validate(&self, check: &Checker, grid: &str) -> Result<(), ConfigError> {
        match self.max_batch {
            Some(_) if !self.batches.is_empty() => {
                Err(check
                    .invalid(&format!("{grid}.max_batch"), format!("and {grid}.batches are alternatives: give one")))
            }
            Some(max) => check.count(&format!("{grid}.max_batch"), max, Suite::MOST_BATCH),
            None => check.sizes(&format!("{grid}.batches"), &self.batches, Suite::MOST_BATCH),
        }
    }
}

impl Suite {
    /// Parse and validate a suite file's text; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Suite, ConfigError> {
        let suite: Suite = parse(text, origin)?;
        suite.validate(origin)?;
        Ok(suite)
    }

    /// The longest a duration of a suite may be (warm-up, a latency bound, serving one rate): a
    /// day. Every duration, count and rate a suite sets has an upper bound, so that no setting
    /// can make a phase endless or an allocation unbounded (issue 17).
    pub const MOST_SECONDS: f64 = 86_400.0;
    /// The longest a cell's `measure.min_s` or the sustained probe may ask for: an hour.
    pub const MOST_PROBE_SECONDS: f64 = 3_600.0;
    /// The most steps a cell measures (`measure.max_steps`).
    pub const MOST_STEPS: u32 = 1_000_000;
    /// The largest batch a ladder, the parity check or the simulation may name.
    pub const MOST_BATCH: u32 = 65_536;
    /// The longest prompt, context or request length, in tokens (16 Mi).
    pub const MOST_TOKENS: u32 = 1 << 24;
    /// The most layers `scale.layers` and `parity.layers` may name (a model's own depth bounds
    /// them further when the suite meets its model).
    pub const MOST_LAYERS: u32 = 10_000;
    /// The most devices a tensor-parallel shard may be cut for.
    pub const MOST_TP: u32 = 4_096;
    /// The parity check's bounds: it runs a float64 reference on the host, so its prompt, batch
    /// and decode steps are kept to what a correctness check needs (defaults 16, 2 and 8).
    pub const MOST_PARITY_TOKENS: u32 = 4_096;
    pub const MOST_PARITY_BATCH: u32 = 64;
    pub const MOST_PARITY_STEPS: u32 = 1_024;
    /// The most workloads and bounds a suite may list (each is simulated at assembly).
    pub const MOST_WORKLOADS: usize = 64;
    pub const MOST_BOUNDS: usize = 16;

    /// Check the suite as it stands (after any command-line overrides); `origin` names it.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let check = Checker { origin };
        check.name("name", &self.name)?;
        check.name("model", &self.model)?;
        let warmup = &self.warmup;
        check.seconds("warmup.min_s", warmup.min_s, Self::MOST_SECONDS)?;
        check.positive_real("warmup.window_s", warmup.window_s)?;
        check.positive_real("warmup.max_drift", warmup.max_drift)?;
        check.positive_real("warmup.max_spread", warmup.max_spread)?;
        check.positive_real("warmup.max_clock_drift", warmup.max_clock_drift)?;
        check.positive_real("warmup.max_power_drift", warmup.max_power_drift)?;
        check.positive_real("warmup.max_temperature_change_c", warmup.max_temperature_change_c)?;
        check.seconds("warmup.max_s", warmup.max_s, Self::MOST_SECONDS)?;
        if warmup.max_s < warmup.min_s {
            return Err(check.invalid(
                "warmup.max_s",
                format!("({}) must be at least warmup.min_s ({})", readable(warmup.max_s), readable(warmup.min_s)),
            ));
        }
        if warmup.window_s > warmup.max_s {
            return Err(check.invalid(
                "warmup.window_s",
                format!(
                    "({} s) must be at most warmup.max_s ({} s): equilibrium is judged over a window the warm-up \
                     can fill",
                    readable(warmup.window_s),
                    readable(warmup.max_s)
                ),
            ));
        }
        let measure = &self.measure;
        check.count("measure.min_steps", measure.min_steps, Self::MOST_STEPS)?;
        check.positive_real("measure.max_cv", measure.max_cv.unwrap_or(1.0))?;
        check.real_at_most("measure.max_cv", measure.max_cv.unwrap_or(1.0), 100.0, "")?;
        check.positive_real("measure.max_other_cpu_cores", measure.max_other_cpu_cores.unwrap_or(1.0))?;
        check.real_at_most("measure.max_other_cpu_cores", measure.max_other_cpu_cores.unwrap_or(1.0), 4096.0, "")?;
        check.non_negative("measure.max_cpu_throttled_s", measure.max_cpu_throttled_s())?;
        check.real_at_most("measure.max_cpu_throttled_s", measure.max_cpu_throttled_s(), 3600.0, " s")?;
        check.seconds("measure.min_s", measure.min_s, Self::MOST_PROBE_SECONDS)?;
        check.at_most("measure.max_steps", measure.max_steps, Self::MOST_STEPS)?;
        if measure.max_steps < measure.min_steps {
            return Err(check.invalid(
                "measure.max_steps",
                format!("({}) must be at least measure.min_steps ({})", measure.max_steps, measure.min_steps),
            ));
        }
        check.count("scale.layers", self.scale.layers.unwrap_or(1), Self::MOST_LAYERS)?;
        check.count("scale.tp", self.scale.tp, Self::MOST_TP)?;
        if !(1.0..=100.0).contains(&self.telemetry.rate_hz) {
            return Err(check.invalid(
                "telemetry.rate_hz",
                format!("must be from 1 to 100 (Hz), got {}", readable(self.telemetry.rate_hz)),
            ));
        }
        check.count("parity.layers", self.parity.layers, Self::MOST_LAYERS)?;
        check.count("parity.batch", self.parity.batch, Self::MOST_PARITY_BATCH)?;
        check.count("parity.prompt_len", self.parity.prompt_len, Self::MOST_PARITY_TOKENS)?;
        check.count("parity.decode_steps", self.parity.decode_steps, Self::MOST_PARITY_STEPS)?;
        self.prefill.ladder().validate(&check, "prefill")?;
        check.sizes("prefill.prompt_lens", &self.prefill.prompt_lens, Self::MOST_TOKENS)?;
        self.decode.ladder().validate(&check, "decode")?;
        check.sizes("decode.ctxs", &self.decode.ctxs, Self::MOST_TOKENS)?;
        check.listed("workload", self.workloads.len(), Self::MOST_WORKLOADS)?;
        check.listed("bound", self.bounds.len(), Self::MOST_BOUNDS)?;
        for (i, workload) in self.workloads.iter().enumerate() {
            workload.validate(&check, &format!("workload[{i}]"))?;
        }
        for (i, bound) in self.bounds.iter().enumerate() {
            check.name(&format!("bound[{i}].name"), &bound.name)?;
            for (key, seconds) in [("ttft_p99_s", bound.ttft_p99_s), ("tpot_p99_s", bound.tpot_p99_s)] {
                let key = format!("bound[{i}].{key}");
                check.positive_real(&key, seconds)?;
                check.real_at_most(&key, seconds, Self::MOST_SECONDS, " s")?;
            }
        }
        let simulation = &self.simulation;
        let most = SimulationConfig::MOST_REQUESTS;
        check.within(
            "simulation.requests",
            simulation.requests,
            100,
            most,
            "the p99 of fewer is the slowest request",
        )?;
        check.seconds("roofline.sustained_s", self.roofline.sustained_s, Self::MOST_PROBE_SECONDS)?;
        check.count("simulation.max_batch", simulation.max_batch.unwrap_or(1), Self::MOST_BATCH)?;
        check.count("simulation.chunked_prefill", simulation.chunked_prefill.unwrap_or(1), Self::MOST_TOKENS)?;
        if let Some(serve) = &self.serve {
            check.within(
                "serve.requests",
                serve.requests,
                20,
                most,
                "the p90 of fewer is within one request of the slowest",
            )?;
            if let Some(most_requests) = serve.most_requests {
                check.within(
                    "serve.most_requests",
                    most_requests,
                    serve.requests,
                    most,
                    "a window grows from serve.requests",
                )?;
            }
            check.positive_real("serve.max_s", serve.max_s)?;
            check.seconds("serve.max_s", serve.max_s, Self::MOST_SECONDS)?;
            for (key, seconds) in [("serve.total_s", serve.total_s), ("serve.run_s", serve.run_s)] {
                if let Some(seconds) = seconds {
                    check.positive_real(key, seconds)?;
                    check.seconds(key, seconds, Self::MOST_SECONDS)?;
                }
            }
            for name in &serve.workloads {
                if !self.workloads.iter().any(|w| &w.name == name) {
                    return Err(
                        check.invalid("serve.workloads", format!("names '{name}', which is no workload of the suite"))
                    );
                }
            }
            for (i, name) in serve.bounds.iter().enumerate() {
                check.name(&format!("serve.bounds[{i}]"), name)?;
            }
        }
        Ok(())
    }
}
