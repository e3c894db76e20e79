//! Step-time statistics as a result records them (computed by lynx-analysis's `stats`).

use crate::value::Finite;
use serde::{Deserialize, Serialize};

/// The distribution of one cell's step times, in seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTimeSummary {
    /// Number of timed steps.
    pub n: usize,
    /// Median step time.
    pub median_s: Finite,
    /// 90th percentile step time.
    pub p90_s: Finite,
    /// 99th percentile step time.
    pub p99_s: Finite,
    /// Fastest step.
    pub min_s: Finite,
    /// Slowest step.
    pub max_s: Finite,
    /// Coefficient of variation (sample standard deviation / mean); `None` for one step.
    pub cv: Option<Finite>,
}

/// The fewest steps whose autocorrelation lynx records.
pub const AUTOCORRELATION_MIN_STEPS: usize = 100;

/// How alike consecutive steps were over a long run of identical steps (the warm-up's steps
/// after its first half), in the order they ran, after a least-squares fit over the step index
/// and the KV cache's length is taken away (the cache grows a token a step and is cut back, and
/// the device warms: trends that are not its steps varying): the autocorrelation at a lag of one
/// step and of four. Where a device runs slow or fast for stretches longer than a step (a busy
/// host, clocks that move), consecutive steps are alike, and a request's latency, a sum of many
/// steps, varies more than independent steps would make it vary; the simulation of
/// latency-bounded throughput draws its step times so (docs/SWEEPS.md, "Persistence"). A cell's
/// few seconds of steps cannot show this: its own mean and trend absorb the slow variation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StepAutocorrelation {
    /// The steps it was computed over.
    pub steps: u64,
    /// Their median time, the time between lags.
    pub median_s: Finite,
    pub lag_1: Finite,
    pub lag_4: Finite,
}
