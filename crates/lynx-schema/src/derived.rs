//! The figures buyers size fleets with, derived from a run's cells (DESIGN.md vocabulary): the
//! decode frontier, the prefill throughput table, latency-bounded throughput per workload and
//! bound (by [`crate::sim`]), joules per output token, and cost per million output tokens from a
//! price the user gives. docs/SWEEPS.md states the method.

use crate::config::{LatencyBound, Workload};
use crate::result::{AttentionKernel, StepMode};
use crate::sweep::SweepLine;
use crate::value::{Finite, Reported};
use serde::{Deserialize, Serialize};

/// Everything derived from a run's cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Derived {
    /// The decode frontier at each measured context.
    pub frontier: Vec<FrontierLine>,
    /// Every prefill cell measured: time to first token and prefill throughput.
    pub prefill: Vec<PrefillPoint>,
    /// Latency-bounded throughput for each workload under each bound.
    pub latency_bounded: Vec<LatencyBounded>,
    /// The price inputs the cost figures use, as the user gave them.
    pub price: PriceInputs,
    /// How each line of the sweep ended.
    pub sweep: Vec<SweepLine>,
    /// Which decode mode the frontier and the latency-bounded figures use, where the run
    /// measured graph cells beside eager ones: at each shape the faster of the modes whose
    /// checks passed (absent when every decode cell was eager).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_modes: Option<String>,
    /// Each decode shape measured both eager and as a graph: what issuing the step's kernels
    /// one by one (the host CPU and libtorch's dispatcher) costs on this device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub eager_graph: Vec<EagerGraph>,
}

/// One decode shape measured in both modes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EagerGraph {
    pub batch: u32,
    pub ctx: u32,
    /// The cells' median steps (the full-depth estimates for a layer subset).
    pub eager_step_s: Finite,
    pub graph_step_s: Finite,
    /// eager_step_s / graph_step_s: above 1 where the graph is faster.
    pub eager_over_graph: Finite,
    /// The attention kernel each mode's cell ran. Where they differ (on an H200, flash eager and
    /// cuDNN in the graph, whose masked call over a padded cache no flash kernel takes), the ratio
    /// holds the kernels' difference beside the host's cost. Absent in results made before lynx
    /// derived them, and where a cell does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eager_attention: Option<AttentionKernel>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_attention: Option<AttentionKernel>,
}

/// The Pareto set of (tok/s/user, tok/s/device) over the decode cells at one context, ascending
/// in tok/s/device (so descending in tok/s/user).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontierLine {
    pub ctx: u32,
    pub points: Vec<FrontierPoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrontierPoint {
    pub batch: u32,
    pub tok_per_s_per_user: Finite,
    pub tok_per_s_per_device: Finite,
    pub joules_per_token: Option<Finite>,
    /// The decode mode of the cell the point comes from (absent: eager).
    #[serde(default, skip_serializing_if = "crate::result::StepMode::is_eager")]
    pub mode: crate::result::StepMode,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillPoint {
    pub batch: u32,
    pub prompt_len: u32,
    /// The median prefill step: time to first token with no queueing.
    pub ttft_s: Finite,
    pub tok_per_s_per_device: Finite,
    pub joules_per_token: Option<Finite>,
}

/// A price per device-hour and the share of hours the device does useful work. Never made up:
/// without a price, costs are unavailable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PriceInputs {
    pub usd_per_device_hour: Option<Finite>,
    pub utilisation: Finite,
}

/// One workload under one bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyBounded {
    pub workload: Workload,
    pub bound: LatencyBound,
    /// Simulated: the simulation's highest load inside the bound.
    pub point: Reported<BoundedPoint>,
    /// Measured: the serving loop at the simulation's latency-bounded rate, where the run had a
    /// serving phase that served this workload and bound. The published figure where present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<MeasuredBounded>,
}

impl LatencyBounded {
    /// How the simulated point was made, in words: [`BoundedPoint::how`], and beside a measured
    /// figure over how many requests ([`BoundedPoint::how_beside_measured`]).
    pub fn point_how(&self) -> String {
        match (&self.point, &self.measured) {
            (Reported::Known(p), Some(_)) => p.how_beside_measured(),
            (Reported::Known(p), None) => p.how().to_owned(),
            (Reported::Unavailable { .. }, _) => "simulated".to_owned(),
        }
    }
}

/// The serving loop's figures at the simulation's latency-bounded rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredBounded {
    pub request_rate_per_s: Finite,
    pub output_tok_per_s_per_device: Finite,
    pub tok_per_s_per_user: Finite,
    pub ttft_p99_s: Finite,
    pub tpot_p99_s: Finite,
    /// Whether the measured p99s held the bound at that rate.
    pub within_bound: bool,
    /// The device's energy over the whole serving window per output token.
    pub joules_per_output_token: Reported<Finite>,
    pub usd_per_million_output_tokens: Reported<Finite>,
    /// The served server's batch cap (absent in results made before lynx recorded it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_batch: Option<u32>,
    /// How the serving loop issued its decode steps: replayed as graphs, or (absent) eagerly.
    #[serde(default, skip_serializing_if = "StepMode::is_eager")]
    pub mode: StepMode,
    /// The rate's fraction of the simulation's latency-bounded rate, where the measured p99s
    /// broke the bound there and this rate, served under it, held it (absent where the rate is
    /// the simulation's, and in results made before lynx served rates under it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of_simulated_rate: Option<Finite>,
    /// The requests the serving window served at that rate, from an idle server: its figures are
    /// that window's, not the steady state's of the simulated point beside it (docs/SWEEPS.md,
    /// "The window and the steady state"; absent in results made before lynx recorded it here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u32>,
    /// Output tokens a second over the window's steady part, or why it had none
    /// (`ServeFigures::steady_output_tok_per_s_per_device`; absent in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_output_tok_per_s_per_device: Option<Reported<Finite>>,
}

impl MeasuredBounded {
    /// How the figure was made, in words: `measured`, and the graph steps where the loop
    /// replayed them.
    pub fn how(&self) -> &'static str {
        match self.mode {
            StepMode::Eager => "measured",
            StepMode::Graph => "measured (graph steps)",
        }
    }

    /// The window it was measured over, in words (" over 24 requests"); empty where the result
    /// does not say.
    pub fn window(&self) -> String {
        self.requests.map_or(String::new(), |n| format!(" over {n} requests"))
    }

    /// Its output tok/s in words, with the steady part's beside it where it had one.
    pub fn tok_per_s(&self) -> String {
        crate::serving::tok_per_s_words(
            self.output_tok_per_s_per_device,
            self.steady_output_tok_per_s_per_device.as_ref(),
        )
    }

    /// Where the rate is under the simulation's latency-bounded rate, by how much, in words
    /// (" at 0.90× the simulated rate"); empty where it is that rate.
    pub fn under_simulated_rate(&self) -> String {
        self.of_simulated_rate.map_or(String::new(), |f| format!(" at {:.2}× the simulated rate", f.get()))
    }
}

/// The highest load the simulated server sustains inside a bound, and its figures there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoundedPoint {
    pub request_rate_per_s: Finite,
    pub output_tok_per_s_per_device: Finite,
    /// 1 / median TPOT at that load.
    pub tok_per_s_per_user: Finite,
    pub ttft_p99_s: Finite,
    pub tpot_p99_s: Finite,
    /// The simulated server's limits: the batch cap (the configured one, or the one of 1, 2, 4,
    /// … up to the largest measured that gave the most throughput inside the bound).
    pub max_batch: u32,
    pub max_prefill_batch: u32,
    pub chunked_prefill: Option<u32>,
    pub requests: u32,
    pub joules_per_output_token: Reported<Finite>,
    pub usd_per_million_output_tokens: Reported<Finite>,
    /// Some simulated step's length lay beyond the measured ones (extrapolated linearly).
    pub extrapolated: bool,
    /// Where the serving phase measured this workload and bound: how the simulated server issues
    /// its decode steps, the serving loop's way (graph: replayed at a captured batch over the
    /// pool's whole capacity; eager), so that the simulated figure beside the measured one
    /// describes the same server. Absent: each decode step in the faster passing mode at its
    /// shape (`Derived::decode_modes`), issued at exactly its rows and context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_steps: Option<StepMode>,
    /// Output tokens a second over the simulated load's steady part, or why it had none
    /// (`ServeFigures::steady_output_tok_per_s_per_device`; absent in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_output_tok_per_s_per_device: Option<Reported<Finite>>,
}

impl BoundedPoint {
    /// Its output tok/s in words, with the steady part's beside it where it had one.
    pub fn tok_per_s(&self) -> String {
        crate::serving::tok_per_s_words(
            self.output_tok_per_s_per_device,
            self.steady_output_tok_per_s_per_device.as_ref(),
        )
    }

    /// How the figure was made, in words: `simulated`, and the graph steps where the simulated
    /// server is the serving loop's graph server.
    pub fn how(&self) -> &'static str {
        match self.decode_steps {
            Some(StepMode::Graph) => "simulated (graph steps)",
            Some(StepMode::Eager) | None => "simulated",
        }
    }

    /// How it was made beside a measured figure, in words: [`BoundedPoint::how`] and over how
    /// many requests (the steady state the measured window's figures are not).
    pub fn how_beside_measured(&self) -> String {
        format!("{} over {} requests", self.how(), self.requests)
    }
}
