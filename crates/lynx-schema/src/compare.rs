//! Two results side by side (`lynx compare`, `lynx reproduce`): every figure both have, the
//! ratio of the second to the first, and whether the second lies within the first's own spread.

use serde::{Deserialize, Serialize};

/// One figure of both results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What the figure is, e.g. `decode batch 8 ctx 512: median step (s)`.
    pub figure: String,
    /// Whether more is better (throughput) or less (time).
    pub higher_is_better: bool,
    pub first: f64,
    pub second: f64,
    /// second / first.
    pub ratio: f64,
    /// Whether `second` lies within the first result's own spread for this figure (a cell's step
    /// times from min to p99; the same bounds through 1/x for its tok/s), where it has one.
    pub within_spread: Option<bool>,
}

/// The side by side of two results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub first: String,
    pub second: String,
    /// What differs between the two runs' devices, software and configuration.
    pub differences: Vec<String>,
    pub rows: Vec<Row>,
    /// Figures only one of them has.
    pub unmatched: Vec<String>,
}
