//! Two results side by side (`lynx compare`, `lynx reproduce`): every figure both have, the
//! ratio of the second to the first, whether the second lies within the first's own spread and
//! within the tolerance of it, and one verdict over all of them.

use serde::{Deserialize, Serialize};

/// The relative difference beyond which a figure is materially different: 2%, MLPerf's bar for
/// an audit's reproduction of a submitted result.
pub const MATERIAL_DIFFERENCE: f64 = 0.02;

/// One figure of both results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// What the figure is, e.g. `decode batch 8 ctx 512: median step (s)`.
    pub figure: String,
    /// Whether more is better (throughput) or less (time).
    pub higher_is_better: bool,
    pub first: f64,
    pub second: f64,
    /// second / first (not finite where the first is zero; JSON writes that as null).
    pub ratio: f64,
    /// Whether `second` lies within the first result's own spread for this figure (a cell's step
    /// times from min to p99; the same bounds through 1/x for its tok/s), where it has one.
    pub within_spread: Option<bool>,
    /// Whether `second` lies within [`Comparison::tolerance`] of `first`: |ratio − 1| at most the
    /// tolerance; false where the ratio is not finite.
    pub within_tolerance: bool,
}

/// The side by side of two results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub first: String,
    pub second: String,
    /// What differs between the two runs' devices, software and configurations.
    pub differences: Vec<String>,
    pub rows: Vec<Row>,
    /// Figures only one of them has.
    pub unmatched: Vec<String>,
    /// The relative difference each row's `within_tolerance` is judged at
    /// ([`MATERIAL_DIFFERENCE`]).
    pub tolerance: f64,
    pub verdict: Verdict,
    /// The ids of the keys the first and the second result verified under, where both came
    /// from signed envelopes (`lynx compare`): a lab's result and a vendor's reproduction of it
    /// are vouched for by two. Absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signers: Option<[String; 2]>,
}

/// The verdict over every row of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub outcome: Outcome,
    /// Rows compared.
    pub figures: usize,
    /// Rows within the tolerance.
    pub within_tolerance: usize,
    /// Rows beyond the tolerance but within the first result's spread.
    pub within_spread_only: usize,
    /// Rows beyond the tolerance and outside the first's spread (or with none to lie in):
    /// materially different.
    pub different: usize,
    /// Of `different`, those on the worse side (slower, or less throughput).
    pub different_worse: usize,
    /// The row farthest from the first result, relatively (none when nothing was compared).
    pub worst: Option<Worst>,
    /// The test hooks each result was made with (`Harness::test_hooks`), where either was:
    /// that result's figures describe a test, not its device, whatever the outcome says of the
    /// figures. Absent where neither was (and in comparisons made before lynx said so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_hooks: Option<TestHooks>,
    /// The checks each result's own run failed, where either failed any: a reproduction is as
    /// good as the runs behind it, whatever the outcome says of the figures. Absent where
    /// neither failed one (and in comparisons made before lynx said so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_checks: Option<FailedChecks>,
}

impl Verdict {
    /// Whether the comparison is one of two devices' figures: neither result was made with test
    /// hooks set.
    pub fn of_devices(&self) -> bool {
        self.test_hooks.is_none()
    }
}

/// The test hooks of the first and of the second result, joined (`Harness::test_hooks`); at
/// least one is present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestHooks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second: Option<String>,
}

/// The checks the first and the second result's runs failed, in each result's order; at least
/// one side is present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedChecks {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<Vec<crate::result::CheckName>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second: Option<Vec<crate::result::CheckName>>,
}

/// The row farthest from the first result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Worst {
    pub figure: String,
    pub ratio: f64,
}

/// What a comparison says, over all its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every figure within the tolerance.
    Reproduced,
    /// Every figure within the tolerance or, beyond it, within the first result's own spread.
    WithinSpread,
    /// At least one figure is materially different: beyond the tolerance and outside the spread.
    Different,
    /// The two results have no figure in common.
    NothingCompared,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Reproduced => "reproduced",
            Outcome::WithinSpread => "within spread",
            Outcome::Different => "materially different",
            Outcome::NothingCompared => "nothing compared",
        }
    }
}
