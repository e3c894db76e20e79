//! The warm-up's equilibrium criteria as a result records them (lynx-analysis's `equilibrium`
//! judges them; the method is in docs/EQUILIBRIUM.md).

use crate::telemetry::ThrottleReason;
use serde::{Deserialize, Serialize};

/// The criteria values over the trailing window at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Steps in the window.
    pub steps: usize,
    /// Seconds the window spans, from its first step's end to its last's.
    pub span_s: f64,
    /// Median step time over the window.
    pub median_step_s: f64,
    /// Relative change of median step time from the first half to the second.
    pub drift: f64,
    /// Interquartile range of step time over the median.
    pub spread: f64,
    /// Relative change of the median SM (or core) clock between the halves.
    pub clock_drift: Option<f64>,
    /// Relative change of the median power between the halves.
    pub power_drift: Option<f64>,
    /// Change of the median temperature between the halves, °C.
    pub temperature_change_c: Option<f64>,
    /// Hardware slowdown reasons active in the second half.
    pub slowdown: Vec<ThrottleReason>,
}
