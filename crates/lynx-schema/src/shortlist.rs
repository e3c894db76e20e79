//! A buyer's shortlist: verified results ranked by the cost of a million output tokens at the
//! buyer's own latency bound, request shape and price (`lynx shortlist`).

use crate::config::{Length, Precision, Workload};
use crate::derived::BoundedPoint;
use crate::value::Reported;
use serde::{Deserialize, Serialize};

/// What the buyer asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The catalogue model the workload runs (a result of another model is not ranked).
    pub model: String,
    /// Input and output lengths, each fixed or a mix; a fixed length is the number it was
    /// before mixes could be asked for (JSON readers of a fixed request see no change). A
    /// lengths file's pairs are in `isl`, as in a suite's workload.
    pub isl: Length,
    pub osl: Length,
    pub ttft_p99_s: f64,
    pub tpot_p99_s: f64,
    /// Device (by slug of its name) → USD per device-hour.
    pub prices: Vec<(String, f64)>,
    pub utilisation: f64,
    /// Only results measured at this precision are ranked (absent: every precision, each
    /// entry saying its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
}

impl Request {
    /// The buyer's request shape as a workload (named `request`).
    pub fn workload(&self) -> Workload {
        Workload { name: "request".to_owned(), isl: self.isl.clone(), osl: self.osl.clone() }
    }
}

/// One verified result of the requested model, with its figures at the buyer's bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The envelope, as found.
    pub file: String,
    /// The device's name in the result (text from the result: escape before display).
    pub device: String,
    /// The device's slug, which `--price` names.
    pub device_slug: String,
    pub run_id: String,
    /// The precision the result measured the model at (absent in listings made before it was
    /// shown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// The id of the trusted key that signed it.
    pub key_id: String,
    pub usd_per_device_hour: Option<f64>,
    /// The simulated point at the buyer's bound (its cost where a price was given).
    pub point: Reported<BoundedPoint>,
    /// Measured: the result's serving phase at the rate it published, where it served the
    /// buyer's request shape (lengths drawn alike, [`Workload::same_lengths`]) under the buyer's
    /// exact bound; `point` is then the simulation of that server and those lengths. Ranked by
    /// where present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<crate::derived::MeasuredBounded>,
    /// Every check the result made passed.
    pub checks_passed: bool,
    /// The names of the checks that failed.
    pub failed_checks: Vec<String>,
    /// What was measured when not the whole model on one device (a layer subset, a shard).
    pub measured_part: Option<String>,
}

/// A result that was not ranked, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Excluded {
    pub file: String,
    /// `rejected` (failed verification), `unsigned`, `untrusted`, `other model`, `other
    /// precision` (where the request names one), `test hooks` (made with a `LYNX_TEST_…`
    /// variable set: `Harness::test_hooks`), `no figure`.
    pub kind: String,
    pub reason: String,
}

/// The ranking: cheapest first among the priced entries with a figure, then the unpriced by
/// throughput; then what was left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Shortlist {
    pub request: Request,
    pub ranked: Vec<Entry>,
    pub excluded: Vec<Excluded>,
    /// The ranked results with a figure, by device: one summary per device, precision and part
    /// measured, in the ranking's order of their medians.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceSummary>,
}

/// The ranked results of one device at one precision that measured the same part of the model
/// (a lab publishes one result per device of a node: eight H200s are eight results): how many,
/// how many passed their checks, and the spread of the figure each was ranked by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    /// The device's name in its first result (text from a result: escape before display).
    pub device: String,
    pub device_slug: String,
    pub precision: Precision,
    /// As [`Entry::measured_part`]: `None` for the whole model on one device.
    pub measured_part: Option<String>,
    pub results: u32,
    /// How many of them passed every check.
    pub checks_passed: u32,
    /// How many were ranked by a measured figure (the rest by a simulated one).
    pub measured: u32,
    pub output_tok_per_s_per_device: Range,
    /// Where the device was priced.
    pub usd_per_million_output_tokens: Option<Range>,
}

/// The smallest, middle and largest of a set of figures (the median of an even count is the
/// mean of its middle two).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Range {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}
