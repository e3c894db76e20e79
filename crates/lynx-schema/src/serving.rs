//! The serving phase's record (docs/SWEEPS.md, "Serving"): a real continuous-batching loop on the
//! device at the rates the simulation chose, each measured beside what the simulation predicts
//! at the same rate.

use crate::config::{LatencyBound, Workload};
use crate::result::{PaceRecheck, SlowSteps, StepMode};
use crate::value::{Finite, Reported};
use serde::{Deserialize, Serialize};

/// Everything the serving phase measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingRecord {
    /// How the server schedules: the batch cap, the prefill policy, the decode mode its steps run
    /// (each entry's `mode` says how its own steps ran).
    pub server: String,
    /// One entry a workload and bound the phase served.
    pub served: Vec<Served>,
    /// Why the loop issues its decode steps eagerly although the run's graph cells passed their
    /// check: capturing its graph steps failed, with this error, and every workload not yet
    /// served then was served with eager steps (one whose earlier rates were served with graph
    /// steps keeps them, its `cut_short` saying why the rest were not served); absent where no
    /// capture failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_steps_failed: Option<String>,
}

impl ServingRecord {
    /// The record of a server that has served nothing yet.
    pub fn new(server: impl Into<String>) -> ServingRecord {
        ServingRecord { server: server.into(), served: Vec::new(), graph_steps_failed: None }
    }
}

/// One workload under one bound: the lengths drawn and each rate served.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Served {
    pub workload: Workload,
    pub bound: LatencyBound,
    /// The drawn requests' input and output lengths.
    pub isl: LengthSample,
    pub osl: LengthSample,
    /// The server's batch cap (the simulation's best inside the bound).
    pub max_batch: u32,
    /// How the loop issued its decode steps: replayed as graphs, or (absent in a result, as in
    /// every result before lynx served with graphs) eagerly.
    #[serde(default, skip_serializing_if = "StepMode::is_eager")]
    pub mode: StepMode,
    /// The rates served (the simulation's latency-bounded rate, then 20% above it), or why none
    /// could be.
    pub rates: Reported<Vec<ServedRate>>,
    /// How many requests each rate's window holds and why, where `serve.most_requests` let the
    /// window grow until its simulation showed what the steady state's does (or says that none
    /// allowed did). Absent where the window is `serve.requests` long, and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<String>,
    /// Why the step down under the latency-bounded rate was not served where the measured p99s
    /// broke the bound there (its window would not fit what was left of the serving budget,
    /// `serve.total_s` cut to what was left of `serve.run_s`); absent
    /// where it was served, not needed, and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_down: Option<String>,
    /// Why the rates after those in `rates` were not served: a later rate's serving failed (a
    /// step's error, a GPU error that left the device context unusable, or the capture of the
    /// loop's graph steps), the worker died while serving it, or the run was stopped (then
    /// `stopped` is set too). The rates in `rates` were measured before it and are kept. Absent
    /// where every rate the phase started was served, where none was (then `rates` says why),
    /// and in results made before 2026-12-07, which lost the rates served before such a
    /// failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
    /// The run was stopped (a signal) after the rates in `rates` were served, before the rest
    /// were: the entry of a partial result, which a resume of the run replaces with the whole,
    /// serving only the rates after these. Absent where the entry is whole or ended otherwise,
    /// and in older results, whose stopped runs kept no rate of the workload being served.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stopped: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// An entry of `workload` under `bound` with made-up figures, a rate for each of `labels` (each
/// at 1.5 requests a second over 24 requests), stopped or not: for the tests of the crates that
/// read served entries, which a result's schema keeps from being built field by field there.
#[doc(hidden)]
pub fn served_fixture(workload: &Workload, bound: &LatencyBound, labels: &[&str], stopped: bool) -> Served {
    let figures = serde_json::json!({
        "ttft_p50_s": 0.2, "ttft_p99_s": 0.5, "tpot_p50_s": 0.04, "tpot_p99_s": 0.05,
        "output_tok_per_s_per_device": 10.0, "tok_per_s_per_user": 25.0,
    });
    let rate = |label: &str| {
        serde_json::json!({
            "label": label, "rate_per_s": 1.5, "requests": 24, "window_s": 30.0, "measured": figures,
            "simulated": figures, "relative_error": null, "within_bound": true,
            "overhead_s": [1e-4, 2e-4, 3e-4], "iterations": 200,
            "joules_per_output_token": { "unavailable": "no power" },
            "joules_per_token": { "unavailable": "no power" },
        })
    };
    let sample = serde_json::json!({ "mean": 8.0, "p50": 8.0, "p90": 8.0, "p99": 8.0, "min": 8, "max": 8 });
    serde_json::from_value(serde_json::json!({
        "workload": workload, "bound": bound, "isl": sample, "osl": sample, "max_batch": 8,
        "rates": labels.iter().map(|l| rate(l)).collect::<Vec<_>>(), "stopped": stopped,
    }))
    .expect("the fixture is a served entry")
}

impl Served {
    /// Whether this is the entry of the workload and the bound of these names.
    pub fn is_for(&self, workload: &str, bound: &str) -> bool {
        self.workload.name == workload && self.bound.name == bound
    }
}

/// Lengths drawn for a workload: their mean, percentiles and extremes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LengthSample {
    pub mean: Finite,
    pub p50: Finite,
    pub p90: Finite,
    pub p99: Finite,
    pub min: u32,
    pub max: u32,
}

/// One rate served, request by request and step by step: a line of the run folder's
/// `<run id>.served.jsonl`, appended as the rate ends. A diagnostic beside the result, not part
/// of it (nor signed): what the loop did, for working out afterwards, without the device, why it
/// and the simulation disagree where they do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedTrace {
    pub workload: String,
    pub bound: String,
    /// [`ServedRate::BOUNDED`], [`ServedRate::OVER`] or [`ServedRate::UNDER`].
    pub label: String,
    pub rate_per_s: f64,
    /// Each request that finished, in arrival order.
    pub requests: Vec<TracedRequest>,
    /// Every model step the loop ran, in order.
    pub steps: Vec<TracedStep>,
}

/// A request's timeline, in seconds from the load's first arrival.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TracedRequest {
    pub arrival_s: f64,
    pub first_token_s: f64,
    pub finish_s: f64,
    pub isl: u32,
    pub osl: u32,
}

/// One model step of the serving loop.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TracedStep {
    /// A prefill step (else decode).
    pub prefill: bool,
    pub batch: u32,
    /// A decode step's keys a row; a prefill step's padded prompt.
    pub len: u32,
    pub step_s: f64,
    /// When it started, in seconds on the arrivals' clock (absent in older traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    /// The step table's median time at the step's batch and length (absent where it has none):
    /// what the simulation draws this step around.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_s: Option<f64>,
    /// The first step of its kind since the loop waited, idle, for an arrival.
    pub after_idle: bool,
    /// The loop thread's CPU time during the step, how long it waited to run (runnable, not
    /// running), and its voluntary and involuntary context switches, as for a cell's steps
    /// ([`crate::result::ThreadOverSteps`]); absent where the kernel did not say, and in older
    /// traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_cpu_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_runnable_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voluntary_switches: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub involuntary_switches: Option<u64>,
    /// The calls libtorch's caching allocator made to the driver for memory during the step
    /// ([`crate::result::AllocatorOverSteps`]); absent on a CPU, where it could not be asked, and
    /// in older traces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_calls: Option<u64>,
}

/// One request rate served: what the loop measured and what the simulation predicts there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServedRate {
    /// [`ServedRate::BOUNDED`], [`ServedRate::OVER`] or [`ServedRate::UNDER`].
    pub label: String,
    pub rate_per_s: Finite,
    /// Requests served; the first tenth (the server filling up) is left out of the percentiles,
    /// as in the simulation.
    pub requests: u32,
    /// Seconds from the first arrival to the last token.
    pub window_s: Finite,
    pub measured: ServeFigures,
    pub simulated: Reported<ServeFigures>,
    /// (measured − simulated) / simulated of p99 TTFT, p99 TPOT and output tok/s.
    pub relative_error: Option<RelativeError>,
    /// Whether the measured p99 TTFT and p99 TPOT are inside the bound.
    pub within_bound: bool,
    /// The loop's own time per iteration (not spent in model steps): p50, p90, p99 seconds.
    pub overhead_s: [Finite; 3],
    /// Iterations the loop ran.
    pub iterations: u64,
    /// The device's energy over the whole window (idle gaps included) per output token, and per
    /// input and output token; unavailable where the device's power was not measured.
    pub joules_per_output_token: Reported<Finite>,
    pub joules_per_token: Reported<Finite>,
    /// The loop's model steps against the step tables the simulation reads: the median over its
    /// decode steps of measured / table time at the step's batch and longest context, and the
    /// same over its prefill steps (absent where no step of that kind ran or the table has no
    /// time for it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_step_ratio: Option<Finite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_step_ratio: Option<Finite>,
    /// The same two medians over only the steps that came first of their kind after the loop had
    /// waited, idle, for an arrival (absent where none did). Steps after an idle gap run slower
    /// where the device's clocks or libtorch's CPU threads slowed down while idle, which the
    /// cells, measured back to back, never show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_step_ratio_after_idle: Option<Finite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_step_ratio_after_idle: Option<Finite>,
    /// The median measured / table time of the loop's prefill steps that came right after
    /// another prefill step, and of those that came right after a decode step (the first after
    /// an idle gap left out of both): a prefill cell times prefill steps back to back, while a
    /// server interleaves them with decode steps, which may leave the caches holding other
    /// data. Absent where no such step had a table time, and in results made before 2026-12-07.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_step_ratio_after_prefill: Option<Finite>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_step_ratio_after_decode: Option<Finite>,
    /// Requests serve.max_s cut off before their last token (left out of every figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished: Option<u32>,
    /// Host CPU cores that processes other than lynx's kept busy on average over the rate's
    /// serving, as for a cell (from /proc; absent where the host does not say, and in older
    /// results). Beside the step ratios it tells a busy host from a step the simulation leaves
    /// out, where the two disagree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_cores: Option<Finite>,
    /// Of `other_cpu_cores`, the cores a virtual machine's hypervisor stole over the rate's
    /// serving, as for a cell (absent where the host does not say, and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stolen_cpu_cores: Option<Finite>,
    /// Of `other_cpu_cores`, at least this many on host CPUs the worker could not run on, as for
    /// a cell (absent where it could run on every CPU, and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_cores_elsewhere: Option<Finite>,
    /// Seconds a CFS quota on lynx's cgroup, or on one above it, held it off its CPUs over the
    /// rate's serving, as for a cell (absent where no cgroup counts its throttling, and in older
    /// results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_throttled_s: Option<Finite>,
    /// Processes other than the worker that held a context on the device over the rate's
    /// serving, as for a cell (the larger of the counts as it began and as it ended; absent where
    /// the device does not say, and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_device_processes: Option<u32>,
    /// Where `simulated` is each figure's median over several draws of the steps' variation
    /// (the same requests and arrivals each time), how many and how far the p99s spread; absent
    /// where it is one draw's (results before the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated_draws: Option<SimulatedDraws>,
    /// The simulation run again once the rate was served, every step time scaled by the loop's
    /// own median step ratios (`decode_step_ratio`, `prefill_step_ratio`; 1 where absent): how
    /// far the simulated server is from the loop's once the device's pace at this rate is taken
    /// out. A diagnostic, not a prediction (the `simulation` check judges `simulated`): where the
    /// prediction is off but this agrees, the device ran at another pace than its cells, and the
    /// simulation's model of the server held. Results written before `at_loop_steps` existed hold
    /// it; later ones hold that in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_loop_pace: Option<AtLoopPace>,
    /// The simulation run again once the rate was served, fed the loop's own steps: at each
    /// measured batch, the median and the spread of the measured / table times of the loop's
    /// steps nearest it (where there were at least five; elsewhere every step time scaled by the
    /// kind's median ratio). A diagnostic like `at_loop_pace`, which it replaces: where the
    /// prediction is off but this agrees, the steps the loop met were not those its cells had
    /// measured, and the simulation's model of the server held. Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_loop_steps: Option<AtLoopPace>,
    /// The simulation run again once the rate was served, replaying the loop's steps in the order
    /// they ran: each simulated step timed at its table time times the measured / table ratio of
    /// the loop's last step of its kind to start at or before it (on the arrivals' clock, which
    /// the two share), drawing nothing, so one simulation. A diagnostic like `at_loop_steps`,
    /// which carries the steps' spread but not their order: where this agrees and that does
    /// not, the loop's steps ran slow (or fast) for a stretch, and the simulation's model of the
    /// server held; where this misses too, the server is what differs. Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_loop_replay: Option<AtLoopPace>,
    /// How the loop's decode steps, and its prefill steps, spread against their cells' (absent
    /// where no step of that kind ran, the tables have no spread there, and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_step_spread: Option<StepSpread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_step_spread: Option<StepSpread>,
    /// The loop's decode steps, and its prefill steps, slower against their tables than
    /// [`crate::result::SlowSteps::factor`] times the kind's median measured / table time, with
    /// the telemetry readings they overlapped and what the loop's thread did during them, as for
    /// a cell's slow steps: where the loop's steps ran slow for a stretch, whether the thread
    /// was off its CPU (the host's scheduler), waiting, or on it all along (the step's own work
    /// took longer). Absent where fewer than two steps of the kind had a table time, and in
    /// older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_slow_steps: Option<SlowSteps>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_slow_steps: Option<SlowSteps>,
    /// Batches the loop stepped at that no cell measured (the simulation charges them the
    /// straight line between measured neighbours) whose steps ran more than the `simulation`
    /// check's 15% off the pace of the loop's steps at measured batches: a step the table gets
    /// wrong, which the suite can measure (docs/SWEEPS.md, "Batches off the line"). Absent where
    /// none did, and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batches_off_line: Option<Vec<BatchOffLine>>,
    /// The steady state this window is set beside: the simulation at the same rate, on the same
    /// server, of as many requests as the latency-bounded search simulates. A window that starts
    /// from an idle server and holds a few dozen requests is not the steady state the bound is
    /// defined in (docs/SWEEPS.md, "The window and the steady state"); where the two verdicts
    /// differ, the window could not show what the steady state does. Absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyState>,
    /// The warm-up's step timed again right after the rate's window, as after the sweep
    /// ([`crate::result::WarmupRecord::after_sweep`]): whether the device still ran at its
    /// equilibrium pace once it had served the rate, or why it could not be timed. With the
    /// warm-up's `after_sweep` (or the rate before's) it brackets the window: where the loop's
    /// steps ran over their cells and the step timed again did too, the device's pace moved;
    /// where it did not, the loop's steps cost more of their own. Said, not judged. Absent where
    /// the run was stopped first, and in results made before 2026-12-07.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_after: Option<Reported<PaceRecheck>>,
    /// The measured prefill cell nearest the loop's prefill steps (their median batch and padded
    /// length) timed again right after `pace_after`, against the prefill table's time there: set
    /// beside `prefill_step_ratio`, whether the device's prefill pace moved (the two together)
    /// or the loop's prefill steps cost more or less of their own (apart). A prefill step is
    /// bound by the device's arithmetic where a decode step is bound by its memory, so the two
    /// paces can move apart (a GPU held at its power limit slows its arithmetic first; a shared
    /// CPU host's matrix units may be busy with another tenant's), which `pace_after`'s decode
    /// step cannot tell. Said, not judged. Absent where the loop ran no prefill step, the run was
    /// stopped first, and in results made before 2026-12-07.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefill_after: Option<Reported<PrefillRecheck>>,
}

/// A prefill cell timed again after a served rate's window ([`ServedRate::prefill_after`]): as
/// the cell measured it, for as many steps and seconds as a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrefillRecheck {
    pub batch: u32,
    pub prompt_len: u32,
    pub steps: u64,
    pub median_s: Finite,
    /// `median_s` over the prefill table's time at the cell's shape (absent where the table has
    /// none there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Finite>,
}

/// A batch the serving loop stepped at that no cell measured, and how its steps ran against the
/// table's straight line there ([`ServedRate::batches_off_line`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchOffLine {
    /// A prefill step's batch (else a decode step's).
    pub prefill: bool,
    pub batch: u32,
    /// The loop's steps at this batch.
    pub steps: u32,
    /// Their median measured / table time over the median of the loop's steps of that kind at
    /// measured batches: 1.32 is a third slower than the table's line, the host's pace taken out.
    pub pace: Finite,
}

/// The simulated steady state at a served rate ([`ServedRate::steady`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    /// Requests simulated (the first tenth, the server filling up, left out of the percentiles).
    pub requests: u32,
    /// One draw of the steps' variation, as the latency-bounded search simulates.
    pub simulated: ServeFigures,
    /// Whether its p99 TTFT and p99 TPOT are inside the bound.
    pub within_bound: bool,
}

/// How the serving loop's steps of one kind spread against the cells': where they ran slow for a
/// stretch, which their median ratio to the tables hides, `loop_p90` lies well above
/// `cells_p90`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSpread {
    /// The 90th percentile over the loop's steps of measured / table time at each step's shape.
    pub loop_p90: Finite,
    /// The median over the same steps of the cells' own 90th percentile step over their median
    /// at each step's shape.
    pub cells_p90: Finite,
}

/// The simulation at the serving loop's own steps (or pace), and the measurement against it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AtLoopPace {
    /// Each figure's median over the same draws as `simulated`'s (in `at_loop_replay`, the one
    /// simulation's: a replay draws nothing).
    pub simulated: ServeFigures,
    pub relative_error: RelativeError,
}

/// How the simulated p99s of one served rate vary over draws of the steps' variation: over a
/// few dozen requests a p99 is the slowest requests', and the steps' variation alone moves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulatedDraws {
    pub draws: u32,
    /// The 10th and 90th percentiles over the draws.
    pub ttft_p99_s: [Finite; 2],
    pub tpot_p99_s: [Finite; 2],
}

impl ServedRate {
    /// The requests its window drew: those served and those serve.max_s cut off (each rate of a
    /// window serves all its requests or counts those cut off).
    pub fn window_requests(&self) -> usize {
        self.requests as usize + self.unfinished.unwrap_or(0) as usize
    }

    /// The label of the simulation's latency-bounded rate.
    pub const BOUNDED: &'static str = "bounded";
    /// The label of the rate 20% above it.
    pub const OVER: &'static str = "over";
    /// The label of the rate 0.9× it, served only where the measured p99s broke the bound there.
    pub const UNDER: &'static str = "under";

    /// The simulation at the loop's own steps, or in a result from before it at the loop's
    /// median pace, and the words that say which (`fed the loop's own steps`, `at the loop's own
    /// step pace`).
    pub fn loop_paced(&self) -> Option<(&'static str, &AtLoopPace)> {
        let steps = self.at_loop_steps.as_ref().map(|p| ("fed the loop's own steps", p));
        steps.or_else(|| self.at_loop_pace.as_ref().map(|p| ("at the loop's own step pace", p)))
    }

    /// The batches off the table's line in words (`decode batch 3 at 1.32× (225 steps), …`);
    /// `None` where none is recorded.
    pub fn batches_off_line_words(&self) -> Option<String> {
        let batches = self.batches_off_line.as_ref().filter(|b| !b.is_empty())?;
        let words: Vec<String> = batches
            .iter()
            .map(|b| {
                let kind = if b.prefill { "prefill" } else { "decode" };
                format!("{kind} batch {} at {:.2}× ({} steps)", b.batch, b.pace.get(), b.steps)
            })
            .collect();
        Some(words.join(", "))
    }

    /// The loop's slow steps of each kind, where it had any, in words: how many, the telemetry
    /// readings they overlapped and what the loop's thread did during them (`decode: 5 of its
    /// 220 steps over 1.2× their median measured / table time; …`); `None` where no kind had a
    /// slow step recorded.
    pub fn slow_steps_words(&self) -> Option<String> {
        let words: Vec<String> = [("decode", &self.decode_slow_steps), ("prefill", &self.prefill_slow_steps)]
            .into_iter()
            .filter_map(|(kind, slow)| {
                let slow = slow.as_ref().filter(|s| s.slow > 0)?;
                Some(format!("{kind}: {}", slow.words("their median measured / table time")))
            })
            .collect();
        (!words.is_empty()).then(|| words.join("; "))
    }

    /// [`ServedRate::pace_after`] in words (`the warm-up's step timed again after the window took
    /// 1.02× its equilibrium median (67.1 ms over 31 steps)`); `None` where it is not recorded.
    pub fn pace_after_words(&self) -> Option<String> {
        Some(self.pace_after.as_ref()?.recheck_words("the warm-up's step", "after the window"))
    }

    /// [`ServedRate::prefill_after`] in words (`the prefill cell at batch 2, prompt 64, timed
    /// again after the window took 1.04× the table (93.1 ms over 17 steps)`); `None` where it is
    /// not recorded.
    pub fn prefill_after_words(&self) -> Option<String> {
        Some(match self.prefill_after.as_ref()? {
            Reported::Known(again) => {
                let cell = format!("the prefill cell at batch {}, prompt {}", again.batch, again.prompt_len);
                let over = format!("{:.1} ms over {} steps", 1e3 * again.median_s.get(), again.steps);
                match again.ratio {
                    Some(ratio) => {
                        format!("{cell}, timed again after the window, took {:.2}× the table ({over})", ratio.get())
                    }
                    None => format!("{cell}, timed again after the window, took {over}"),
                }
            }
            Reported::Unavailable { unavailable } => {
                format!("the prefill cell could not be timed again after the window: {unavailable}")
            }
        })
    }

    /// The loop's prefill steps by the step before them in words (`prefill steps after a
    /// prefill 1.02×, after a decode step 1.04× their tables`), each that was recorded; `None`
    /// where neither was.
    pub fn prefill_order_words(&self) -> Option<String> {
        let words: Vec<String> = [
            ("after a prefill", self.prefill_step_ratio_after_prefill),
            ("after a decode step", self.prefill_step_ratio_after_decode),
        ]
        .into_iter()
        .filter_map(|(after, ratio)| Some(format!("{after} {:.2}×", ratio?.get())))
        .collect();
        (!words.is_empty()).then(|| format!("prefill steps {} their tables", words.join(", ")))
    }

    /// The decode and the prefill steps' spread against their cells' in words, each kind that
    /// has one: `decode 1.45× (the cells' 1.08×), prefill …`; `None` where neither has.
    pub fn step_spread_words(&self) -> Option<String> {
        let words: Vec<String> = [("decode", &self.decode_step_spread), ("prefill", &self.prefill_step_spread)]
            .into_iter()
            .filter_map(|(kind, spread)| {
                let s = spread.as_ref()?;
                Some(format!("{kind} {:.2}× (the cells' {:.2}×)", s.loop_p90.get(), s.cells_p90.get()))
            })
            .collect();
        (!words.is_empty()).then(|| words.join(", "))
    }
}

/// Latency and throughput of a served (or simulated) load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServeFigures {
    pub ttft_p50_s: Finite,
    pub ttft_p99_s: Finite,
    /// MLPerf's TPOT: (latency − TTFT) / (output tokens − 1) a request, p50 and p99 over them.
    pub tpot_p50_s: Finite,
    pub tpot_p99_s: Finite,
    /// Output tokens over the window, per device.
    pub output_tok_per_s_per_device: Finite,
    /// 1 / median TPOT.
    pub tok_per_s_per_user: Finite,
    /// Output tokens a second over the window's steady part: from one request lifetime (the
    /// 90th percentile of arrival to last token) after the first arrival, when the server has
    /// filled, to the last arrival, before it drains; a request's tokens after its first counted
    /// as coming evenly until its last. What the server sustains at the rate, where
    /// `output_tok_per_s_per_device` counts the fill and the drain too. Unavailable where the
    /// arrivals spanned under two lifetimes; absent in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_output_tok_per_s_per_device: Option<Reported<Finite>>,
}

/// A window's output tok/s in words, with its steady part's beside it where it had one (`92.6
/// (steady 92.1)`): the window's alone where the steady part's is unavailable or not recorded.
pub fn tok_per_s_words(window: Finite, steady: Option<&Reported<Finite>>) -> String {
    match steady {
        Some(Reported::Known(steady)) => format!("{:.1} (steady {:.1})", window.get(), steady.get()),
        _ => format!("{:.1}", window.get()),
    }
}

/// Relative errors of the simulation against the measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelativeError {
    pub ttft_p99: Finite,
    pub tpot_p99: Finite,
    pub output_tok_per_s: Finite,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window's output tok/s is shown with its steady part's beside it where it had one, and
    /// alone where it had none or the result predates the field.
    #[test]
    fn a_throughput_is_shown_with_its_steady_parts_where_it_had_one() {
        let f = |v: f64| Finite::new(v, "t").unwrap();
        assert_eq!(tok_per_s_words(f(100.04), Some(&Reported::Known(f(107.86)))), "100.0 (steady 107.9)");
        let none = Reported::Unavailable { unavailable: "no steady part: the arrivals spanned 3.0 s".to_owned() };
        assert_eq!(tok_per_s_words(f(100.04), Some(&none)), "100.0");
        assert_eq!(tok_per_s_words(f(100.04), None), "100.0");
    }
}
