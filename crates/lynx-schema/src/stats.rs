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
