//! The serving phase's plan and judgement (docs/SWEEPS.md, "Serving"): which rates the serving
//! loop serves for each workload and bound (the simulation's latency-bounded rate and one 20%
//! above it, on the server the simulation found best, then rates under it while the bound
//! breaks), what the simulation predicts at each for the very requests served, the figures of
//! what was served, the rate published, and the `simulation` and `serving_overhead` checks.

use crate::derived::bounded;
use crate::lengths::{draw, Lengths};
use crate::memory::Pool;
use crate::sim::{replicated, simulate, Figures, Replay, Replicated, Served, SimOutcome, SimSetup, StepTable};
use lynx_schema::config::{LatencyBound, ServeConfig, SimulationConfig, Suite, Workload};
use lynx_schema::derived::PriceInputs;
use lynx_schema::result::{CellRecord, CellShape, CellStatus, Check, CheckName, StepMode};
use lynx_schema::serving::{
    AtLoopPace, BatchOffLine, RelativeError, ServeFigures, ServedRate, ServingRecord, SimulatedDraws, SteadyState,
    StepSpread, TracedStep,
};
use lynx_schema::value::{Finite, Reported};
use std::sync::atomic::AtomicBool;

/// How far the measured p99s may lie from the simulated ones at the same rate.
pub const AGREEMENT: f64 = 0.15;

/// The most a serving loop's own time per iteration may take at its median, p90 and p99.
pub const OVERHEAD_LIMIT_S: f64 = 1e-3;

/// How much above the latency-bounded rate the second rate lies.
pub const OVER: f64 = 1.2;

/// The rates under the latency-bounded one that the loop serves, as fractions of it, one after
/// the other while the measured p99s break the bound: at the simulation's rate a measurement
/// lands on either side of the bound by chance (the rate is where the simulated p99 meets it),
/// and a published latency-bounded figure must be one measured inside its bound. One step: a
/// simulation right to a few percent puts 0.9× well inside the bound wherever the p99s grow with
/// the rate, and a second step would have cost the `cpu` suite's run its 5-minute goal (run 19,
/// docs/SWEEPS.md, where they did not grow).
pub const UNDER: [f64; 1] = [0.9];

/// The rate a served workload publishes: the fastest of its latency-bounded rate (`bounded`)
/// and the rates under it (`under`) whose measured p99s held the bound; the latency-bounded
/// rate where none did (its figures then say that the bound broke); `None` where it was not
/// served.
pub fn published(rates: &[ServedRate]) -> Option<&ServedRate> {
    let eligible = || rates.iter().filter(|r| r.label == ServedRate::BOUNDED || r.label == ServedRate::UNDER);
    eligible()
        .filter(|r| r.within_bound)
        .max_by(|a, b| a.rate_per_s.get().total_cmp(&b.rate_per_s.get()))
        .or_else(|| eligible().find(|r| r.label == ServedRate::BOUNDED))
}

/// The shapes (batch, prompt length) of the prefill cells among `cells` that measured their step.
pub fn measured_prefills(cells: &[CellRecord]) -> impl Iterator<Item = (u32, u32)> + '_ {
    cells.iter().filter(|c| c.status == CellStatus::Ok).filter_map(|c| match c.shape {
        CellShape::Prefill { batch, prompt_len } => Some((batch, prompt_len)),
        CellShape::Decode { .. } => None,
    })
}

/// Of the measured prefill `cells` (batch, prompt length), the one nearest the loop's prefill
/// `steps` (batch, padded length): nearest their median batch and median length, each on a log
/// scale (a batch twice too large as far off as one half too small), the first of equals; `None`
/// where either is empty. The cell timed again after a window ([`ServedRate::prefill_after`]).
pub fn nearest_prefill(cells: impl IntoIterator<Item = (u32, u32)>, steps: &[(u32, u32)]) -> Option<(u32, u32)> {
    let median = |mut values: Vec<f64>| -> Option<f64> {
        values.sort_by(f64::total_cmp);
        let n = values.len();
        (n > 0).then(|| if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 })
    };
    let batch = median(steps.iter().map(|&(b, _)| f64::from(b.max(1))).collect())?;
    let len = median(steps.iter().map(|&(_, l)| f64::from(l.max(1))).collect())?;
    let distance =
        |&(b, l): &(u32, u32)| (f64::from(b.max(1)) / batch).ln().powi(2) + (f64::from(l.max(1)) / len).ln().powi(2);
    cells.into_iter().fold(None, |best: Option<(u32, u32)>, cell| match best {
        Some(best) if distance(&best) <= distance(&cell) => Some(best),
        _ => Some(cell),
    })
}

/// The next rate under the latency-bounded one to serve after `served`: the next of [`UNDER`]'s
/// fractions of it, while neither it nor any rate under it served held the bound; `None` once
/// one held, all were served, or the latency-bounded rate was not.
pub fn next_under(served: &[ServedRate]) -> Option<f64> {
    let bounded = served.iter().find(|r| r.label == ServedRate::BOUNDED)?;
    let under: Vec<&ServedRate> = served.iter().filter(|r| r.label == ServedRate::UNDER).collect();
    if bounded.within_bound || under.iter().any(|r| r.within_bound) {
        return None;
    }
    UNDER.get(under.len()).map(|fraction| fraction * bounded.rate_per_s.get())
}

/// Seconds of a plan's share of the serving budget that `rates`, served before a stop, spent:
/// their windows and the steps timed again after each. At least what the process that served
/// them spent on them (it also allocated the pool and simulated), so a resume's step down fits
/// what that process had left of the share, or a little more, not the whole share.
pub fn spent_s(rates: &[ServedRate]) -> f64 {
    let timed = |steps: u64, median_s: f64| steps as f64 * median_s;
    rates
        .iter()
        .map(|rate| {
            let pace =
                rate.pace_after.as_ref().and_then(|r| r.known()).map_or(0.0, |p| timed(p.steps, p.median_s.get()));
            let prefill =
                rate.prefill_after.as_ref().and_then(|r| r.known()).map_or(0.0, |p| timed(p.steps, p.median_s.get()));
            rate.window_s.get() + pace + prefill
        })
        .sum()
}

/// The median measured / table time of a trace's prefill steps (`steps` in the order they ran)
/// that came right after another prefill step, and of those that came right after a decode
/// step ([`ServedRate::prefill_step_ratio_after_prefill`], `…_after_decode`); the first after
/// an idle gap, and those without a table time, left out of both.
pub fn prefill_ratios_by_previous(steps: &[TracedStep]) -> [Option<Finite>; 2] {
    [true, false].map(|after_prefill| {
        let ratios: Vec<f64> = steps
            .windows(2)
            .filter(|pair| pair[1].prefill && !pair[1].after_idle && pair[0].prefill == after_prefill)
            .filter_map(|pair| Some(pair[1].step_s / pair[1].table_s.filter(|&t| t > 0.0)?))
            .collect();
        Finite::new(crate::stats::median(&ratios).ok()?, "prefill step ratio").ok()
    })
}

/// A rate under the latency-bounded one (`under`) as a fraction of it; `None` for other rates.
pub(crate) fn under_fraction(rates: &[ServedRate], rate: &ServedRate) -> Option<f64> {
    let bounded = rates.iter().find(|r| r.label == ServedRate::BOUNDED)?;
    (rate.label == ServedRate::UNDER).then(|| rate.rate_per_s.get() / bounded.rate_per_s.get())
}

/// A served rate's name in the checks: its label, and for a rate under the latency-bounded
/// one its fraction of that rate.
fn rate_name(rates: &[ServedRate], rate: &ServedRate) -> String {
    match under_fraction(rates, rate) {
        Some(fraction) => format!("under ({fraction:.2}×)"),
        None => rate.label.clone(),
    }
}

/// One workload and bound to serve.
#[derive(Debug, Clone)]
pub struct Plan {
    pub workload: Workload,
    pub bound: LatencyBound,
    /// The requests served at each rate, in arrival order.
    pub lengths: Vec<Lengths>,
    pub seed: u64,
    pub max_batch: u32,
    pub max_prefill_batch: u32,
    pub chunk: Option<u32>,
    /// How the loop issues its decode steps: replayed as graphs (captured at the batches
    /// [`crate::sim::ladder_to`] gives the cap) or eagerly.
    pub mode: StepMode,
    /// (label, requests per second) planned, or why nothing can be served; rates under the
    /// latency-bounded one follow where the bound breaks there ([`next_under`]).
    pub rates: Result<Vec<(String, f64)>, String>,
    /// The requests the latency-bounded search simulates: the steady state each served rate is
    /// set beside ([`Plan::steady`]).
    pub steady_lengths: Vec<Lengths>,
    /// How the window was sized, where `serve.most_requests` let it grow ([`Plan::size_window`]).
    pub window: Option<String>,
    /// This plan's share of the serving phase's budget (`serve.total_s`, cut to what is left of
    /// `serve.run_s`: [`ServeConfig::budget_s`]), shared evenly among the plans: its window grows
    /// only while its rates fit it, and the step down is served only where it still fits what is
    /// left; `None` where the suite sets no budget.
    pub budget_s: Option<f64>,
}

/// The plans of a run of `suite` under `bounds` whose cells are measured: the suite's workloads
/// and bounds that `serve` names, each on the simulation's best server over the step `tables`
/// ([`crate::derived::mode_tables`]) of the decode `mode` the loop issues its steps in (graphs
/// where the run's graph steps passed their check, else eager), within the phase's budget
/// `budget_s` ([`ServeConfig::budget_s`]; none: no budget). `stop`, once raised, ends the
/// simulation: a plan not found then says so.
pub fn plan(
    suite: &Suite,
    bounds: &[LatencyBound],
    (prefill, decode): (&StepTable, &StepTable),
    (serve, budget_s): (&ServeConfig, Option<f64>),
    mode: StepMode,
    stop: Option<&AtomicBool>,
) -> Vec<Plan> {
    let graph_steps = mode == StepMode::Graph;
    let price =
        PriceInputs { usd_per_device_hour: None, utilisation: Finite::new(1.0, "utilisation").expect("1 is finite") };
    let mut plans = Vec::new();
    let served =
        suite.workloads.iter().map(|w| bounds.iter().filter(|b| serve.serves(&w.name, &b.name)).count()).sum::<usize>();
    let budget_s = budget_s.map(|total| total / served.max(1) as f64);
    for workload in &suite.workloads {
        for bound in bounds.iter().filter(|b| serve.serves(&workload.name, &b.name)).cloned() {
            let lengths = draw(workload, suite.seed, serve.requests.min(SimulationConfig::MOST_REQUESTS) as usize);
            let steady_lengths =
                draw(workload, suite.seed, suite.simulation.requests.min(SimulationConfig::MOST_REQUESTS) as usize);
            let found =
                bounded((prefill, decode, graph_steps), &suite.simulation, suite.seed, workload, &bound, &price, stop);
            let (max_batch, max_prefill_batch, rates) = match found {
                Ok(point) => {
                    let rate = point.request_rate_per_s.get();
                    let rates =
                        vec![(ServedRate::BOUNDED.to_owned(), rate), (ServedRate::OVER.to_owned(), rate * OVER)];
                    (point.max_batch, point.max_prefill_batch, Ok(rates))
                }
                Err(reason) => (1, 1, Err(format!("the simulation found no latency-bounded rate: {reason}"))),
            };
            let mut plan = Plan {
                workload: workload.clone(),
                bound,
                lengths,
                seed: suite.seed,
                max_batch,
                max_prefill_batch,
                chunk: suite.simulation.chunked_prefill,
                mode,
                rates,
                steady_lengths,
                window: None,
                budget_s,
            };
            plan.size_window((prefill, decode), serve);
            plans.push(plan);
        }
    }
    plans
}

/// Rows of the serving loop's KV pool at batch cap `max_batch`: one more with chunked prefill,
/// whose prompts being prefilled sit in rows of their own above the running ones.
pub fn pool_rows(max_batch: u32, chunked: bool) -> u32 {
    max_batch.saturating_add(u32::from(chunked))
}

impl Plan {
    /// The KV pool (allocated whole, before the first request) and the largest steps the loop
    /// serving this plan runs, for the memory it needs. A whole-prompt prefill step takes at
    /// most the prefill batch, the batch cap and the requests there are.
    pub fn pool(&self) -> Pool {
        let longest = |length: fn(&Lengths) -> u32| self.lengths.iter().map(length).max().unwrap_or(1);
        let prompt = longest(|l| l.isl);
        let (prefill_batch, prefill_tokens) = match self.chunk {
            Some(chunk) => (1, chunk.min(prompt)),
            None => (self.max_prefill_batch.min(self.max_batch).min(self.lengths.len() as u32).max(1), prompt),
        };
        Pool {
            rows: pool_rows(self.max_batch, self.chunk.is_some()),
            capacity: longest(|l| l.isl + l.osl),
            prefill_batch,
            prefill_tokens,
            prefill_keys: prompt,
            graphs: self.mode == StepMode::Graph,
        }
    }

    /// The serving loop's expected wall time for this plan over the step tables: for each rate,
    /// the simulated window (first arrival to last token) of its requests; `None` when nothing
    /// is served.
    pub fn expected_s(&self, prefill: &StepTable, decode: &StepTable) -> Option<f64> {
        let rates = self.rates.as_ref().ok()?;
        let windows: Option<Vec<f64>> = rates.iter().map(|(_, rate)| self.window_s(prefill, decode, *rate)).collect();
        Some(windows?.iter().sum())
    }

    /// Whether a window of `window_s` still fits this plan's share of the serving budget once
    /// `spent_s` of it is gone (always, where the suite sets no budget): the one rule by which a
    /// window grows, the step down is served, and the wall-time estimate counts it.
    pub fn fits_budget(&self, spent_s: f64, window_s: f64) -> bool {
        self.budget_s.is_none_or(|budget_s| spent_s + window_s <= budget_s)
    }

    /// The simulated window of this plan's requests at `rate_per_s`, first arrival to last
    /// token; `None` where it cannot be simulated.
    pub fn window_s(&self, prefill: &StepTable, decode: &StepTable, rate_per_s: f64) -> Option<f64> {
        Some(self.span_s(&self.simulate(prefill, decode, rate_per_s).ok()?))
    }

    /// A simulation's window of this plan's requests, first arrival to last token: their output
    /// tokens over its throughput (which is computed over that span).
    fn span_s(&self, outcome: &SimOutcome) -> f64 {
        let tokens: f64 = self.lengths.iter().map(|l| f64::from(l.osl)).sum();
        tokens / outcome.output_tok_per_s
    }

    /// The simulated steady state at `rate_per_s`: the latency-bounded search's requests on this
    /// plan's server, one draw of the steps as the search simulates them (at the latency-bounded
    /// rate, the search's own figures).
    pub fn steady(&self, prefill: &StepTable, decode: &StepTable, rate_per_s: f64) -> Result<SteadyState, String> {
        let setup = SimSetup { lengths: &self.steady_lengths, ..self.setup(prefill, decode) };
        let outcome = simulate(&setup, rate_per_s).map_err(|e| e.to_string())?;
        let simulated = serve_figures(&outcome.into())?;
        Ok(SteadyState {
            requests: self.steady_lengths.len() as u32,
            within_bound: self.bound.holds(simulated.ttft_p99_s.get(), simulated.tpot_p99_s.get()),
            simulated,
        })
    }

    /// Grow the window, doubling from `serve.requests` up to `serve.most_requests`, to the
    /// smallest whose simulation (one draw) shows at every planned rate what the steady state's
    /// does: the bound held where the steady state holds it, and broken by more than
    /// [`AGREEMENT`] where the steady state breaks it, so that a measurement that agrees with the
    /// simulation breaks it too. A window whose simulated span (first arrival to last token) at
    /// some rate passes `serve.max_s` is not taken; where none shows the steady state, the
    /// largest taken is served, and [`Plan::window`] says that it cannot show it. A window a
    /// short run can afford is a few dozen requests, whose p99 is its slowest request or two and
    /// whose server starts idle: at 20% above the latency-bounded rate it often holds the bound
    /// that the steady state breaks (docs/SWEEPS.md, "The window and the steady state").
    pub fn size_window(&mut self, (prefill, decode): (&StepTable, &StepTable), serve: &ServeConfig) {
        let Some(most) = serve.most_requests.map(|m| m.min(SimulationConfig::MOST_REQUESTS)) else { return };
        let Ok(rates) = self.rates.clone() else { return };
        let steady: Result<Vec<bool>, String> =
            rates.iter().map(|(_, rate)| Ok(self.steady(prefill, decode, *rate)?.within_bound)).collect();
        let steady = match steady {
            Ok(steady) => steady,
            Err(reason) => {
                self.window = Some(format!("not grown: the steady state could not be simulated ({reason})"));
                return;
            }
        };
        let bound = self.bound.clone();
        let margin = 1.0 + AGREEMENT;
        let breaks =
            |f: &SimOutcome| f.ttft_p99_s > bound.ttft_p99_s * margin || f.tpot_p99_s > bound.tpot_p99_s * margin;
        let mut tried: Vec<u32> = Vec::new();
        let mut n = serve.requests;
        let shown = loop {
            let lengths = draw(&self.workload, self.seed, n as usize);
            let window = Plan { lengths, ..self.clone() };
            let outcomes: Result<Vec<SimOutcome>, String> =
                rates.iter().map(|(_, rate)| window.simulate(prefill, decode, *rate)).collect();
            let Ok(outcomes) = outcomes else { break false };
            if !tried.is_empty() && outcomes.iter().any(|o| window.span_s(o) > serve.max_s) {
                break false;
            }
            // Within the budget: the planned rates and the step down under the latency-bounded
            // rate, should the bound break there, served one after another.
            if !tried.is_empty() && self.budget_s.is_some() {
                let under_s = window.expected_under_s(prefill, decode);
                let planned_s: f64 = outcomes.iter().map(|o| window.span_s(o)).sum();
                if under_s.is_none_or(|under_s| !window.fits_budget(planned_s, under_s)) {
                    break false;
                }
            }
            self.lengths = window.lengths;
            tried.push(n);
            let shows = outcomes.iter().zip(&steady).all(|(o, &holds)| {
                if holds {
                    bound.holds(o.ttft_p99_s, o.tpot_p99_s)
                } else {
                    breaks(o)
                }
            });
            if shows || n >= most {
                break shows;
            }
            n = n.saturating_mul(2).min(most);
        };
        let list = tried.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        let steady_words = match steady.as_slice() {
            [true, false] => {
                format!("the bound held at the latency-bounded rate and broken {:.0}% above it", 100.0 * (OVER - 1.0))
            }
            _ => "the steady state's verdict at each rate".to_owned(),
        };
        self.window = Some(if shown {
            format!(
                "{} requests, the smallest window of {list} whose simulation shows what the steady state's does: {steady_words}",
                self.lengths.len()
            )
        } else {
            let allow = if self.budget_s.is_some() {
                "serve.most_requests, serve.max_s and the serving budget (serve.total_s, serve.run_s) allow"
            } else {
                "serve.most_requests and serve.max_s allow"
            };
            format!(
                "{} requests (of {list}, the most {allow}): its simulation does not show what the steady state's does \
                 ({steady_words}), so neither can its measurement",
                self.lengths.len()
            )
        });
    }

    /// The serving loop's expected wall time for the rate it serves under the latency-bounded
    /// one where the bound breaks there ([`UNDER`]'s first fraction): its simulated window;
    /// `None` when nothing is served.
    pub fn expected_under_s(&self, prefill: &StepTable, decode: &StepTable) -> Option<f64> {
        let rates = self.rates.as_ref().ok()?;
        let (_, bounded) = rates.iter().find(|(label, _)| label == ServedRate::BOUNDED)?;
        self.window_s(prefill, decode, UNDER[0] * bounded)
    }

    /// The simulation of this plan's server and requests over the step tables.
    fn setup<'a>(&'a self, prefill: &'a StepTable, decode: &'a StepTable) -> SimSetup<'a> {
        SimSetup {
            prefill,
            decode,
            lengths: &self.lengths,
            max_batch: self.max_batch,
            max_prefill_batch: self.max_prefill_batch,
            chunk: self.chunk,
            graph_steps: self.mode == StepMode::Graph,
            seed: self.seed,
            draw: 0,
            stop: None,
        }
    }

    /// One simulation (the simulation's own draw of the steps) at `rate_per_s` of the requests
    /// this plan serves.
    pub fn simulate(&self, prefill: &StepTable, decode: &StepTable, rate_per_s: f64) -> Result<SimOutcome, String> {
        simulate(&self.setup(prefill, decode), rate_per_s).map_err(|e| e.to_string())
    }

    /// What the simulation predicts at `rate_per_s` for the requests this plan serves, to set
    /// beside what the loop measured there: each figure's median over [`DRAWS`] draws of the
    /// steps' variation, and how far the p99s spread over them.
    pub fn predict(&self, prefill: &StepTable, decode: &StepTable, rate_per_s: f64) -> Result<Replicated, String> {
        replicated(&self.setup(prefill, decode), rate_per_s, DRAWS).map_err(|e| e.to_string())
    }
}

/// Draws of the steps' variation the simulation's prediction at a served rate is the median of.
/// Over the `cpu` suite's 24 requests one draw's p99 TTFT lay anywhere in a band 5–20% wide
/// (10th to 90th percentile of 201 draws, runs 22–26 in docs/SWEEPS.md, "Draws"); the median of
/// 101 lay within 1% of the median of 201, and the 101 draws took under 3 ms.
pub const DRAWS: u32 = 101;

/// One of the serving loop's steps against the step tables: its batch, when it started (on the
/// arrivals' clock), its measured time over the table's at its shape, and the cells' 90th
/// percentile over their median there (where the table has one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopStep {
    pub batch: u32,
    pub start_s: f64,
    pub ratio: f64,
    pub cells_p90: Option<f64>,
}

/// The loop's `steps` of one kind as the simulation replays them ([`at_loop_replay`]): each
/// one's start and measured / table time, in the order they ran. `None` where there are none.
pub fn replay(steps: &[LoopStep]) -> Option<Replay> {
    Replay::new(steps.iter().map(|s| (s.start_s, s.ratio)))
}

/// The loop's steps nearest a measured batch that give that batch its own pace and spread in
/// [`at_loop_steps`]; a batch with fewer takes the median ratio over all the loop's steps of
/// its kind, and keeps its cells' spread.
pub const BATCH_STEPS: usize = 5;

/// The simulation of `plan` at `rate_per_s` once it was served, fed the loop's own steps (each
/// kind's table through [`fed`]), against the `measured` figures: where the prediction is off
/// and this is not, the steps the loop met were not the ones its cells measured (the device ran
/// at another pace, or varied more or less), and the simulated server is the loop's. Run 45 in
/// docs/SWEEPS.md: scaled by each kind's median ratio alone, the simulation still missed the
/// loop's p99s by up to 24%, since its steps ran 1.0× at batch 1 and 1.34× at batch 8.
pub fn at_loop_steps(
    plan: &Plan,
    (prefill, decode): (&StepTable, &StepTable),
    rate_per_s: f64,
    (prefill_steps, decode_steps): (&[LoopStep], &[LoopStep]),
    measured: &ServeFigures,
) -> Result<AtLoopPace, String> {
    let (prefill, decode) = (fed(prefill, prefill_steps), fed(decode, decode_steps));
    at_loop(serve_figures(&plan.predict(&prefill, &decode, rate_per_s)?.median)?, measured, "fed the loop's own steps")
}

/// The simulated figures of an `at_loop_*` simulation (`how` it was run) against the `measured`.
fn at_loop(simulated: ServeFigures, measured: &ServeFigures, how: &str) -> Result<AtLoopPace, String> {
    let relative_error =
        relative_error(measured, &simulated).ok_or_else(|| format!("a simulated figure is zero {how}"))?;
    Ok(AtLoopPace { simulated, relative_error })
}

/// The simulation of `plan` at `rate_per_s` once it was served, replaying the loop's steps in
/// the order they ran (each kind's table through [`StepTable::replayed`]; a kind with no replay
/// is drawn as predicted), against the `measured` figures: one simulation, since a replay draws
/// nothing. Where [`at_loop_steps`] misses and this does not, the loop's steps ran slow or fast
/// for a stretch, which their spread alone does not carry (run 70 in docs/SWEEPS.md: its first
/// 120 steps at 1.1-1.3x their tables, then 0.95x; the two slowest requests arrived in that
/// stretch).
pub fn at_loop_replay(
    plan: &Plan,
    (prefill, decode): (&StepTable, &StepTable),
    rate_per_s: f64,
    (prefill_replay, decode_replay): (Option<Replay>, Option<Replay>),
    measured: &ServeFigures,
) -> Result<AtLoopPace, String> {
    let (prefill, decode) = (prefill.clone().replayed(prefill_replay), decode.clone().replayed(decode_replay));
    at_loop(
        serve_figures(&plan.simulate(&prefill, &decode, rate_per_s)?.into())?,
        measured,
        "replaying the loop's steps",
    )
}

/// `table` fed the loop's `steps` of its kind: each step counts for the measured batch nearest
/// its own (the smaller of two as near); a batch with at least [`BATCH_STEPS`] of them has its
/// step time multiplied by their median ratio and is drawn from their spread, every other batch
/// has its time multiplied by the median ratio over all `steps` (the table as it is where there
/// are none).
pub fn fed(table: &StepTable, steps: &[LoopStep]) -> StepTable {
    use crate::sim::Spread;
    use crate::stats::Sorted;
    let Ok(all) = Sorted::new(steps.iter().map(|s| s.ratio).collect::<Vec<f64>>()) else {
        return table.clone();
    };
    let batches = table.batches();
    if batches.is_empty() {
        return table.clone();
    }
    let nearest = |batch: u32| {
        let above = batches.iter().position(|&b| b >= batch).unwrap_or(batches.len() - 1);
        match above.checked_sub(1) {
            Some(below) if batch - batches[below] <= batches[above].saturating_sub(batch) => batches[below],
            _ => batches[above],
        }
    };
    let nearest_steps: Vec<(u32, f64)> = steps.iter().map(|s| (nearest(s.batch), s.ratio)).collect();
    // Each measured batch's factor and spread, once: every line's point of that batch takes it.
    let paces: Vec<(u32, (f64, Option<Spread>))> = batches
        .iter()
        .map(|&batch| {
            let own: Vec<f64> = nearest_steps.iter().filter(|(b, _)| *b == batch).map(|(_, ratio)| *ratio).collect();
            let pace = match Sorted::new(own) {
                Ok(own) if own.len() >= BATCH_STEPS => {
                    let median = own.median();
                    let at = |q: f64| own.quantile(q) / median;
                    (median, Spread::new(at(0.0), at(0.9), at(0.99), at(1.0)))
                }
                _ => (all.median(), None),
            };
            (batch, pace)
        })
        .collect();
    table.retimed(|batch| paces.iter().find(|(b, _)| *b == batch).map_or((all.median(), None), |(_, pace)| *pace))
}

/// The batches of the loop's `steps` of one kind (`prefill`) that no cell of `table` measured,
/// each with at least [`BATCH_STEPS`] steps, whose median ratio lies more than [`AGREEMENT`] off
/// the median of the steps at measured batches (the host's pace then), ascending; none where no
/// step ran at a measured batch. The simulation charges such a batch the straight line between
/// its measured neighbours, which these steps say is wrong (docs/SWEEPS.md, "Batches off the
/// line": on this project's CPU host, decode at 3 ran 1.32x the line in every trace).
pub fn batches_off_line(table: &StepTable, steps: &[LoopStep], prefill: bool) -> Vec<BatchOffLine> {
    let measured = table.batches();
    let at_measured: Vec<f64> = steps.iter().filter(|s| measured.contains(&s.batch)).map(|s| s.ratio).collect();
    let Ok(pace) = crate::stats::median(&at_measured) else { return Vec::new() };
    let mut batches: Vec<u32> = steps.iter().map(|s| s.batch).filter(|b| !measured.contains(b)).collect();
    batches.sort_unstable();
    batches.dedup();
    let mut off = Vec::new();
    for batch in batches {
        let own: Vec<f64> = steps.iter().filter(|s| s.batch == batch).map(|s| s.ratio).collect();
        let Ok(median) = crate::stats::median(&own) else { continue };
        let Ok(relative) = finite(median / pace, "a batch's pace against the measured batches'") else { continue };
        if own.len() >= BATCH_STEPS && (relative.get() - 1.0).abs() > AGREEMENT {
            off.push(BatchOffLine { prefill, batch, steps: own.len() as u32, pace: relative });
        }
    }
    off
}

/// Whether the simulation meets a served rate's measurement once the steps the loop met are put
/// in for the cells' (fed their spread, then replaying them in order), in words for the
/// `simulation` check: each diagnostic the rate has, with the verdict on the simulated server
/// from the most faithful (the replay where recorded).
fn loop_verdicts(rate: &ServedRate) -> String {
    let off = |p: &AtLoopPace| (p.relative_error.ttft_p99.get(), p.relative_error.tpot_p99.get());
    let within = |p: &AtLoopPace| {
        let (ttft, tpot) = off(p);
        ttft.abs() <= AGREEMENT && tpot.abs() <= AGREEMENT
    };
    let figures = |how: &str, p: &AtLoopPace| {
        let (ttft, tpot) = off(p);
        format!("; {how}, the simulation gives p99 TTFT {:+.0}%, p99 TPOT {:+.0}%", 100.0 * ttft, 100.0 * tpot)
    };
    let verdict = |p: &AtLoopPace| {
        if within(p) {
            format!(", within {:.0}%: the simulated server held, the steps were not the cells'", 100.0 * AGREEMENT)
        } else {
            format!(", beyond {:.0}% too: the simulated server is not the loop's", 100.0 * AGREEMENT)
        }
    };
    let paced = rate.loop_paced();
    match (paced, &rate.at_loop_replay) {
        (paced, Some(replay)) => {
            let fed = paced.map_or(String::new(), |(how, p)| figures(how, p));
            let order = match paced {
                Some((_, p)) if !within(p) && within(replay) => {
                    " (the steps' spread alone missed: they ran slow or fast for a stretch, in an order it does not \
                     carry)"
                }
                _ => "",
            };
            format!(
                "{fed}{}{}{order}",
                figures("replaying the loop's steps in the order they ran", replay),
                verdict(replay)
            )
        }
        (Some((how, p)), None) => format!("{}{}", figures(how, p), verdict(p)),
        (None, None) => String::new(),
    }
}

/// How the loop's steps of one kind spread against the cells': the 90th percentile of their
/// ratios beside the median of their cells' own 90th percentile, over the steps whose shape has
/// a cell spread; `None` where none has.
pub fn step_spread(steps: &[LoopStep]) -> Option<StepSpread> {
    let ratios: Vec<f64> = steps.iter().filter(|s| s.cells_p90.is_some()).map(|s| s.ratio).collect();
    let cells: Vec<f64> = steps.iter().filter_map(|s| s.cells_p90).collect();
    let loop_p90 = crate::stats::Sorted::new(ratios).ok()?.quantile(0.9);
    Some(StepSpread {
        loop_p90: finite(loop_p90, "the loop's 90th percentile step ratio").ok()?,
        cells_p90: finite(crate::stats::median(&cells).ok()?, "the cells' 90th percentile step").ok()?,
    })
}

/// The spread of a prediction's p99s as the result records it.
pub fn simulated_draws(predicted: &Replicated) -> Result<SimulatedDraws, String> {
    let pair = |(low, high): (f64, f64), what: &str| Ok::<_, String>([finite(low, what)?, finite(high, what)?]);
    Ok(SimulatedDraws {
        draws: predicted.draws,
        ttft_p99_s: pair(predicted.ttft_p99_s, "simulated p99 TTFT")?,
        tpot_p99_s: pair(predicted.tpot_p99_s, "simulated p99 TPOT")?,
    })
}

fn finite(value: f64, what: &str) -> Result<Finite, String> {
    Finite::new(value, what).map_err(|e| e.to_string())
}

/// A served (or simulated) load's figures as the result records them.
pub fn serve_figures(f: &Figures) -> Result<ServeFigures, String> {
    Ok(ServeFigures {
        ttft_p50_s: finite(f.ttft_p50_s, "p50 TTFT")?,
        ttft_p99_s: finite(f.ttft_p99_s, "p99 TTFT")?,
        tpot_p50_s: finite(f.tpot_p50_s, "p50 TPOT")?,
        tpot_p99_s: finite(f.tpot_p99_s, "p99 TPOT")?,
        output_tok_per_s_per_device: finite(f.output_tok_per_s, "output tok/s")?,
        tok_per_s_per_user: finite(1.0 / f.tpot_p50_s.max(f64::MIN_POSITIVE), "tok/s/user")?,
        steady_output_tok_per_s_per_device: Some(steady_figure(f.steady_output_tok_per_s)?),
    })
}

/// A load's steady-part throughput as the result records it: the figure, or why it had none.
pub fn steady_figure(steady: Result<f64, crate::sim::NoSteadyPart>) -> Result<Reported<Finite>, String> {
    Ok(match steady {
        Ok(tok_per_s) => Reported::Known(finite(tok_per_s, "steady output tok/s")?),
        Err(none) => Reported::Unavailable { unavailable: none.to_string() },
    })
}

/// (measured − simulated) / simulated for each figure the check compares.
pub fn relative_error(measured: &ServeFigures, simulated: &ServeFigures) -> Option<RelativeError> {
    let rel = |m: Finite, s: Finite| Finite::new((m.get() - s.get()) / s.get(), "relative error").ok();
    Some(RelativeError {
        ttft_p99: rel(measured.ttft_p99_s, simulated.ttft_p99_s)?,
        tpot_p99: rel(measured.tpot_p99_s, simulated.tpot_p99_s)?,
        output_tok_per_s: rel(measured.output_tok_per_s_per_device, simulated.output_tok_per_s_per_device)?,
    })
}

/// The figures of the requests the loop served, from their timestamps.
pub fn measured_figures(served: &[Served]) -> Result<Figures, String> {
    crate::sim::figures(served.iter().copied()).map_err(|e| e.to_string())
}

/// The serving phase's checks: `simulation` (at every rate served, measured p99 TTFT and TPOT
/// within 15% of the simulated ones, and the bound held at each published rate: the
/// latency-bounded one, or one of the rates under it served where the bound broke there) and
/// `serving_overhead` (the loop's own time per iteration under 1 ms at p50, p90 and p99). None
/// when nothing was served.
pub fn checks(serving: &ServingRecord) -> Vec<Check> {
    let entries: Vec<(String, &[ServedRate])> = serving
        .served
        .iter()
        .filter_map(|s| s.rates.known().map(|rates| (format!("{} {}", s.workload.name, s.bound.name), &rates[..])))
        .collect();
    let rates: Vec<(String, &ServedRate)> = entries
        .iter()
        .flat_map(|(entry, rates)| rates.iter().map(move |r| (format!("{entry} {}", rate_name(rates, r)), r)))
        .collect();
    if rates.is_empty() {
        return Vec::new();
    }
    let mut worst = 0.0f64;
    let mut faults = Vec::new();
    for (name, rate) in &rates {
        match &rate.relative_error {
            Some(e) => {
                let off = e.ttft_p99.get().abs().max(e.tpot_p99.get().abs());
                worst = worst.max(off);
                if off > AGREEMENT {
                    faults.push(disagreement(name, rate, e));
                }
            }
            None => faults.push(format!("{name}: no simulated figures to compare")),
        }
    }
    // The bound at each published rate, and where it was a rate under the simulation's.
    let mut stepped = Vec::new();
    for (entry, rates) in &entries {
        let Some(published) = published(rates) else { continue };
        if !published.within_bound {
            let tried: Vec<String> =
                rates.iter().filter_map(|r| under_fraction(rates, r)).map(|f| format!("{f:.2}×")).collect();
            let tried = if tried.is_empty() { String::new() } else { format!(", and at {} it", tried.join(" and ")) };
            faults.push(format!(
                "{entry}: the measured p99s break the bound at the simulation's latency-bounded rate, the rate \
                 published{tried}"
            ));
        } else if let Some(fraction) = under_fraction(rates, published) {
            stepped.push(format!(
                "{entry} broke it at the simulation's latency-bounded rate and held it at {fraction:.2}× that rate, \
                 the rate published"
            ));
        }
    }
    // Whether the rate above the bound crossed it where the steady state's simulation does: what
    // that rate is served to show; said, not judged (a window too short cannot show it).
    let above: Vec<String> = entries
        .iter()
        .filter_map(|(entry, rates)| {
            let over = rates.iter().find(|r| r.label == ServedRate::OVER)?;
            let steady = over.steady.as_ref()?;
            let measured = if over.within_bound { "held" } else { "broke" };
            let above = format!("{:.0}% above the rate", 100.0 * (OVER - 1.0));
            Some(match (over.within_bound, steady.within_bound) {
                (false, false) | (true, true) => format!("{entry} {measured} it {above}, as its steady state does"),
                (_, steady_held) => format!(
                    "{entry} {measured} it {above}, where its steady state {}: the window of {} requests did not \
                     show the steady state",
                    if steady_held { "holds it" } else { "breaks it" },
                    over.requests
                ),
            })
        })
        .collect();
    let above = if above.is_empty() { String::new() } else { format!("; the bound: {}", above.join("; ")) };
    let simulation = Check {
        name: CheckName::Simulation,
        passed: faults.is_empty(),
        detail: if faults.is_empty() {
            let stepped = if stepped.is_empty() { String::new() } else { format!(" ({})", stepped.join("; ")) };
            format!(
                "at {} rates served, measured p99 TTFT and TPOT within {:.0}% of the simulation's (worst {:.1}%), \
                 and every bound held at its published rate{stepped}{above}",
                rates.len(),
                100.0 * AGREEMENT,
                100.0 * worst
            )
        } else {
            format!("{}{above}", faults.join("; "))
        },
        measured: Finite::new(worst, "worst relative error").ok(),
        limit: Finite::new(AGREEMENT, "agreement").ok(),
    };
    let slowest = rates.iter().map(|(_, r)| r.overhead_s[2].get()).fold(0.0, f64::max);
    let over: Vec<String> = rates
        .iter()
        .filter(|(_, r)| r.overhead_s.iter().any(|o| o.get() > OVERHEAD_LIMIT_S))
        .map(|(name, r)| {
            format!(
                "{name}: {:.2}/{:.2}/{:.2} ms",
                1e3 * r.overhead_s[0].get(),
                1e3 * r.overhead_s[1].get(),
                1e3 * r.overhead_s[2].get()
            )
        })
        .collect();
    let overhead = Check {
        name: CheckName::ServingOverhead,
        passed: over.is_empty(),
        detail: if over.is_empty() {
            format!(
                "the loop's own time per iteration stayed under 1 ms at p50, p90 and p99 (worst p99 {:.3} ms)",
                1e3 * slowest
            )
        } else {
            format!("the loop's own time per iteration (p50/p90/p99) passed 1 ms: {}", over.join("; "))
        },
        measured: Finite::new(slowest, "p99 overhead").ok(),
        limit: Finite::new(OVERHEAD_LIMIT_S, "overhead limit").ok(),
    };
    vec![simulation, overhead]
}

/// Why a served rate's measured p99s lie beyond the `simulation` check's agreement with the
/// simulated ones: by how much, what moved (its steps against their cells, the host's and the
/// device's other load), what the simulation fed the loop's own steps concludes, and what the
/// suite can measure. The figures behind those verdicts (the draws' spread, the steps' own
/// spread, the slow steps and what the loop's thread did in them) are the rate's, printed with it
/// (the progress line, the summary's SIM lines, the site), and not said again here.
fn disagreement(name: &str, rate: &ServedRate, e: &RelativeError) -> String {
    // Steps that ran at another speed than the cells' say the device changed; the first steps
    // after an idle gap, whether it slowed down while idle.
    let idle = step_ratios(rate.decode_step_ratio_after_idle, rate.prefill_step_ratio_after_idle)
        .map_or(String::new(), |(_, ratios)| format!("; the first after an idle gap {ratios}"));
    let steps = step_ratios(rate.decode_step_ratio, rate.prefill_step_ratio)
        .map(|(which, ratios)| format!("its {which} steps took {ratios} the cells' times{idle}"));
    // And whether the device itself still ran at its equilibrium pace once the window was over,
    // at a decode step and at a prefill cell.
    let said: Vec<String> =
        steps.into_iter().chain(rate.pace_after_words()).chain(rate.prefill_after_words()).collect();
    let steps = if said.is_empty() { String::new() } else { format!(" ({})", said.join("; ")) };
    // How busy other processes kept the host meanwhile: a host's load, not a step the simulation
    // leaves out, where it was high; and whether another process shared the device itself.
    let mut others = rate.other_cpu_cores.map_or(String::new(), |c| {
        let of_them = crate::checks::of_the_other_load(rate.stolen_cpu_cores, rate.other_cpu_cores_elsewhere);
        let of_them = if of_them.is_empty() { String::new() } else { format!(" ({})", of_them.join("; ")) };
        format!(", while other processes kept {:.2} host CPU cores busy{of_them}", c.get())
    });
    if let Some(n) = rate.other_device_processes.filter(|&n| n > 0) {
        others.push_str(&format!(", while {n} other process(es) held a context on the device"));
    }
    // And whether a CPU quota on lynx's cgroup stopped the loop for the rest of a period.
    if let Some(s) = rate.cpu_throttled_s.map(Finite::get).filter(|&s| s > 0.0) {
        others.push_str(&format!(", while {}", crate::checks::Throttled(s)));
    }
    // Whether the simulated server is the loop's once the steps the loop met are put in for the
    // cells': their spread, and where it was recorded their order, which alone says it (a slow
    // stretch is an order).
    let paced = loop_verdicts(rate);
    // Batches no cell measured whose steps the table's line got wrong: what the suite can measure
    // to make the simulation better.
    let off_line = rate.batches_off_line_words().map_or(String::new(), |words| {
        format!(
            "; batches no cell measured ran off the table's line (against the loop's pace at measured batches): \
             {words}, which the suite can measure"
        )
    });
    format!(
        "{name}: p99 TTFT {:+.0}%, p99 TPOT {:+.0}% against the simulation{steps}{others}{paced}{off_line}",
        100.0 * e.ttft_p99.get(),
        100.0 * e.tpot_p99.get()
    )
}

/// Which of a rate's steps ran against the step tables (decode and prefill, or decode alone)
/// and their ratios in words; `None` without a decode ratio.
fn step_ratios(decode: Option<Finite>, prefill: Option<Finite>) -> Option<(&'static str, String)> {
    match (decode, prefill) {
        (Some(d), Some(p)) => Some(("decode and prefill", format!("{:.2}× and {:.2}×", d.get(), p.get()))),
        (Some(d), None) => Some(("decode", format!("{:.2}×", d.get()))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// The cell timed again after a window is the one nearest the loop's median prefill step, on
    /// a log scale in both batch and length.
    #[test]
    fn the_prefill_cell_timed_again_is_the_one_nearest_the_loops_median_step() {
        let cells = [(1, 16), (2, 16), (1, 32), (2, 32), (1, 64), (2, 64)];
        // Mostly single prompts of 36 to 50 tokens: batch 1, 43 tokens, nearer 32 than 64 (log).
        let steps = [(1, 36), (1, 43), (2, 50), (1, 40), (1, 48)];
        assert_eq!(super::nearest_prefill(cells, &steps), Some((1, 32)));
        // Pairs of long prompts.
        assert_eq!(super::nearest_prefill(cells, &[(2, 60), (2, 58), (1, 64)]), Some((2, 64)));
        // Past every cell, the largest; the first of equals.
        assert_eq!(super::nearest_prefill(cells, &[(8, 512)]), Some((2, 64)));
        assert_eq!(super::nearest_prefill([(1, 16), (1, 64)], &[(1, 32)]), Some((1, 16)));
        assert_eq!(super::nearest_prefill(cells, &[]), None);
        assert_eq!(super::nearest_prefill([], &steps), None);
    }

    use super::*;
    use lynx_schema::serving::{LengthSample, Served};

    /// Prefill steps are split by the step that ran just before them: those after an idle gap,
    /// the first step and those without a table time count in neither.
    #[test]
    fn prefill_steps_are_told_apart_by_the_step_before_them() {
        let step = |prefill: bool, step_s: f64, table_s: Option<f64>, after_idle: bool| TracedStep {
            prefill,
            batch: 1,
            len: 32,
            step_s,
            start_s: None,
            table_s,
            after_idle,
            thread_cpu_s: None,
            thread_runnable_s: None,
            voluntary_switches: None,
            involuntary_switches: None,
            allocator_calls: None,
        };
        let steps = [
            step(true, 9.0, Some(1.0), true),   // the first: before nothing
            step(true, 1.02, Some(1.0), false), // after a prefill
            step(false, 0.5, Some(0.5), false), // a decode step
            step(true, 2.08, Some(2.0), false), // after a decode step
            step(true, 3.0, Some(1.0), true),   // after an idle gap: neither
            step(false, 0.5, Some(0.5), false), //
            step(true, 1.06, Some(1.0), false), // after a decode step
            step(false, 0.5, Some(0.5), false), //
            step(true, 1.0, None, false),       // no table time: neither
            step(true, 1.04, Some(1.0), false), // after a prefill
        ];
        let [after_prefill, after_decode] = prefill_ratios_by_previous(&steps);
        assert!((after_prefill.unwrap().get() - 1.03).abs() < 1e-9, "{after_prefill:?}");
        assert!((after_decode.unwrap().get() - 1.05).abs() < 1e-9, "{after_decode:?}");
        assert_eq!(prefill_ratios_by_previous(&steps[..4]).map(|r| r.map(Finite::get)), [Some(1.02), Some(1.04)]);
        // A decode step before the only prefill step: none after a prefill.
        assert_eq!(prefill_ratios_by_previous(&steps[2..4]).map(|r| r.map(Finite::get)), [None, Some(1.04)]);
        assert_eq!(prefill_ratios_by_previous(&[]), [None, None]);
    }

    #[test]
    fn the_rates_a_stop_kept_spent_their_windows_and_rechecks() {
        let workload = Workload {
            name: "mix".to_owned(),
            isl: lynx_schema::config::Length::Fixed(8),
            osl: lynx_schema::config::Length::Fixed(8),
        };
        let bound = LatencyBound { name: "loose".to_owned(), ttft_p99_s: 4.0, tpot_p99_s: 0.5, source: None };
        let entry = lynx_schema::serving::served_fixture(&workload, &bound, &[ServedRate::BOUNDED], true);
        let mut rates = entry.rates.known().unwrap().clone();
        assert_eq!(spent_s(&rates), 30.0, "the fixture's window");
        rates[0].pace_after = Some(Reported::Known(lynx_schema::result::PaceRecheck {
            steps: 15,
            median_s: lynx_schema::value::Finite::new(0.1, "median").unwrap(),
            ratio: None,
        }));
        rates[0].prefill_after = Some(Reported::unavailable("stopped first"));
        assert!((spent_s(&rates) - 31.5).abs() < 1e-9, "{}", spent_s(&rates));
        rates.push(rates[0].clone());
        assert!((spent_s(&rates) - 63.0).abs() < 1e-9, "{}", spent_s(&rates));
        assert_eq!(spent_s(&[]), 0.0);
    }

    fn f(v: f64) -> Finite {
        Finite::new(v, "test").unwrap()
    }

    fn figures(ttft: f64, tpot: f64) -> ServeFigures {
        ServeFigures {
            ttft_p50_s: f(ttft / 2.0),
            ttft_p99_s: f(ttft),
            tpot_p50_s: f(tpot),
            tpot_p99_s: f(tpot),
            output_tok_per_s_per_device: f(100.0),
            tok_per_s_per_user: f(1.0 / tpot),
            steady_output_tok_per_s_per_device: None,
        }
    }

    fn rate(label: &str, measured: (f64, f64), simulated: (f64, f64), overhead_p99: f64) -> ServedRate {
        let (measured, simulated) = (figures(measured.0, measured.1), figures(simulated.0, simulated.1));
        ServedRate {
            label: label.to_owned(),
            rate_per_s: f(1.0),
            requests: 40,
            window_s: f(40.0),
            relative_error: relative_error(&measured, &simulated),
            within_bound: measured.ttft_p99_s.get() <= 2.0 && measured.tpot_p99_s.get() <= 0.1,
            measured,
            simulated: Reported::Known(simulated),
            overhead_s: [f(1e-5), f(1e-4), f(overhead_p99)],
            iterations: 500,
            joules_per_output_token: Reported::unavailable("no power"),
            joules_per_token: Reported::unavailable("no power"),
            decode_step_ratio: Some(f(0.8)),
            prefill_step_ratio: None,
            decode_step_ratio_after_idle: Some(f(1.3)),
            prefill_step_ratio_after_idle: None,
            prefill_step_ratio_after_prefill: None,
            prefill_step_ratio_after_decode: None,
            unfinished: None,
            other_cpu_cores: None,
            stolen_cpu_cores: None,
            other_cpu_cores_elsewhere: None,
            cpu_throttled_s: None,
            other_device_processes: None,
            simulated_draws: None,
            at_loop_pace: None,
            at_loop_steps: None,
            at_loop_replay: None,
            batches_off_line: None,
            decode_step_spread: None,
            prefill_step_spread: None,
            decode_slow_steps: None,
            prefill_slow_steps: None,
            steady: None,
            pace_after: None,
            prefill_after: None,
        }
    }

    fn record(rates: Vec<ServedRate>) -> ServingRecord {
        let sample = LengthSample { mean: f(10.0), p50: f(10.0), p90: f(10.0), p99: f(10.0), min: 10, max: 10 };
        ServingRecord {
            served: vec![Served {
                workload: Workload::fixed("w", 10, 10),
                bound: LatencyBound { name: "server".to_owned(), ttft_p99_s: 2.0, tpot_p99_s: 0.1, source: None },
                isl: sample.clone(),
                osl: sample,
                max_batch: 4,
                mode: StepMode::Eager,
                rates: Reported::Known(rates),
                window: None,
                step_down: None,
                cut_short: None,
                stopped: false,
            }],
            ..ServingRecord::new("test")
        }
    }

    /// The published measured figure of a served workload (as the shortlist takes it where a
    /// result served the buyer's shape) is its latency-bounded rate's, with its server's cap;
    /// none where only other rates were served.
    #[test]
    fn the_published_measured_figure_is_the_bounded_rates() {
        let price = PriceInputs { usd_per_device_hour: None, utilisation: f(1.0) };
        let served =
            record(vec![rate("over", (2.5, 0.09), (2.4, 0.09), 1e-4), rate("bounded", (1.0, 0.05), (1.0, 0.05), 1e-4)]);
        let measured = crate::derived::measured_at_published_rate(&served.served[0], &price).unwrap();
        assert_eq!((measured.ttft_p99_s.get(), measured.max_batch, measured.mode), (1.0, Some(4), StepMode::Eager));
        let over_only = record(vec![rate("over", (2.5, 0.09), (2.4, 0.09), 1e-4)]);
        assert!(crate::derived::measured_at_published_rate(&over_only.served[0], &price).is_none());
    }

    /// `rate` served at `per_s` requests a second.
    fn at(mut rate: ServedRate, per_s: f64) -> ServedRate {
        rate.rate_per_s = f(per_s);
        rate
    }

    /// Where the measured p99s break the bound at the simulation's latency-bounded rate, the
    /// loop serves 0.9× it, published where it held the bound (with its fraction of the
    /// simulated rate); where it broke the bound too, the latency-bounded rate's figures are
    /// published, bound broken, and the check fails.
    #[test]
    fn a_bound_broken_at_the_simulated_rate_steps_down_until_one_holds() {
        let price = PriceInputs { usd_per_device_hour: None, utilisation: f(1.0) };
        let (held, broke) = (((1.0, 0.05), (1.0, 0.05)), ((1.0, 0.104), (1.0, 0.1)));
        let bounded_held = vec![at(rate("bounded", held.0, held.1, 1e-4), 2.0)];
        assert_eq!(next_under(&bounded_held), None, "the bound held: nothing under it is served");
        let mut served = vec![
            at(rate("bounded", broke.0, broke.1, 1e-4), 2.0),
            at(rate("over", (3.0, 0.2), (2.9, 0.19), 1e-4), 2.4),
        ];
        assert_eq!(next_under(&served), Some(0.9 * 2.0));
        let mut all_broke = served.clone();
        all_broke.push(at(rate("under", broke.0, broke.1, 1e-4), 1.8));
        assert_eq!(next_under(&all_broke), None, "one step down at most");
        served.push(at(rate("under", held.0, held.1, 1e-4), 1.8));
        assert_eq!(next_under(&served), None);
        assert_eq!(published(&served).map(|r| r.rate_per_s.get()), Some(1.8));

        let stepped = record(served);
        let measured = crate::derived::measured_at_published_rate(&stepped.served[0], &price).unwrap();
        assert!(measured.within_bound && measured.request_rate_per_s.get() == 1.8, "{measured:?}");
        assert!((measured.of_simulated_rate.unwrap().get() - 0.9).abs() < 1e-12);
        assert_eq!(measured.under_simulated_rate(), " at 0.90× the simulated rate");
        let judged = checks(&stepped);
        assert!(judged[0].passed, "{}", judged[0].detail);
        assert!(
            judged[0].detail.contains(
                "w server broke it at the simulation's latency-bounded rate and held it at 0.90× that rate, the rate \
                 published"
            ),
            "{}",
            judged[0].detail
        );

        let broken = record(all_broke);
        let measured = crate::derived::measured_at_published_rate(&broken.served[0], &price).unwrap();
        assert!(!measured.within_bound && measured.request_rate_per_s.get() == 2.0, "{measured:?}");
        assert_eq!((measured.of_simulated_rate, measured.under_simulated_rate()), (None, String::new()));
        let judged = checks(&broken);
        assert!(!judged[0].passed, "{}", judged[0].detail);
        assert!(judged[0].detail.contains("published, and at 0.90× it"), "{}", judged[0].detail);
        // A rate under the simulated one is named by its fraction of it.
        let far = record(vec![
            at(rate("bounded", broke.0, broke.1, 1e-4), 2.0),
            at(rate("under", (1.0, 0.125), (1.0, 0.1), 1e-4), 1.8),
        ]);
        let judged = checks(&far);
        assert!(
            judged[0].detail.contains("w server under (0.90×): p99 TTFT +0%, p99 TPOT +25%"),
            "{}",
            judged[0].detail
        );
    }

    /// The simulation check passes within 15% (either sign) with the bound held at the bounded
    /// rate, and fails naming the rate past 15%, with its steps' speed against the cells', or
    /// where the bound broke; the overhead check holds every percentile under 1 ms.
    #[test]
    fn the_checks_judge_agreement_the_bound_and_the_loops_time() {
        let good = record(vec![
            rate("bounded", (1.0, 0.05), (1.1, 0.055), 5e-4),
            rate("over", (2.4, 0.09), (2.1, 0.08), 5e-4),
        ]);
        let checks = checks(&good);
        assert!(checks.iter().all(|c| c.passed), "{checks:?}");
        assert!((checks[0].measured.unwrap().get() - 0.3 / 2.1).abs() < 1e-9, "{checks:?}");
        // The rate above the bound, against its steady state: said, not judged.
        let steady = |held| SteadyState {
            requests: 2000,
            simulated: figures(if held { 1.9 } else { 3.0 }, 0.09),
            within_bound: held,
        };
        let mut over = rate("over", (2.4, 0.09), (2.1, 0.08), 5e-4);
        over.steady = Some(steady(false));
        let bounded = rate("bounded", (1.0, 0.05), (1.1, 0.055), 5e-4);
        let detail = &super::checks(&record(vec![bounded.clone(), over.clone()]))[0].detail;
        assert!(
            detail.ends_with("; the bound: w server broke it 20% above the rate, as its steady state does"),
            "{detail}"
        );
        let mut short = rate("over", (1.5, 0.09), (1.6, 0.09), 5e-4);
        short.requests = 24;
        short.steady = Some(steady(false));
        let checks = super::checks(&record(vec![bounded, short]));
        assert!(checks[0].passed, "{checks:?}");
        assert!(
            checks[0].detail.ends_with(
                "w server held it 20% above the rate, where its steady state breaks it: the window of 24 requests did \
                 not show the steady state"
            ),
            "{}",
            checks[0].detail
        );
        let mut far = rate("bounded", (1.0, 0.05), (1.0, 0.04), 2e-3);
        far.other_cpu_cores = Some(f(0.75));
        let predicted = Replicated {
            median: Figures {
                ttft_p50_s: 0.5,
                ttft_p99_s: 1.0,
                tpot_p50_s: 0.04,
                tpot_p99_s: 0.04,
                output_tok_per_s: 1.0,
                steady_output_tok_per_s: Ok(1.0),
            },
            draws: 31,
            ttft_p99_s: (0.9, 1.1),
            tpot_p99_s: (0.038, 0.042),
        };
        far.simulated_draws = Some(simulated_draws(&predicted).unwrap());
        // A simulation at the loop's own steps, against what `far` measured.
        let measured = far.measured.clone();
        let against = |simulated: ServeFigures| {
            Some(AtLoopPace { relative_error: relative_error(&measured, &simulated).unwrap(), simulated })
        };
        far.at_loop_steps = against(figures(1.02, 0.049));
        let step = |ratio, cells_p90| LoopStep { batch: 1, start_s: 0.0, ratio, cells_p90 };
        far.decode_step_spread = step_spread(&[step(1.0, Some(1.04)), step(1.6, Some(1.1)), step(0.9, None)]);
        // The loop's slow steps and what its thread did during them.
        let thread = [crate::cell::ThreadStep { cpu_s: 0.01, voluntary: 0, involuntary: 0, runnable_s: Some(0.0) }; 4];
        let (starts, step_s) = ([0.0, 0.1, 0.2, 0.3], [0.01, 0.01, 0.01, 0.02]);
        let records = crate::cell::StepRecords { thread: &thread, ..Default::default() };
        far.decode_slow_steps = crate::cell::slow_steps_by_pace(&starts, &step_s, &step_s, &[], records);
        assert!(far.slow_steps_words().is_some() && far.step_spread_words().is_some());
        let checks = super::checks(&record(vec![far.clone()]));
        // The check says what failed, by how much and what the diagnostics conclude; the figures
        // behind them (the draws' spread, the steps' spread, the slow steps) are the rate's own,
        // printed with it, and not said again here.
        assert!(
            checks[0].detail.ends_with(
                "while other processes kept 0.75 host CPU cores busy; fed the loop's own steps, the simulation gives \
                 p99 TTFT -2%, p99 TPOT +2%, within 15%: the simulated server held, the steps were not the cells'"
            ),
            "{}",
            checks[0].detail
        );
        assert!(!checks[0].passed && checks[0].detail.contains("w server bounded: p99 TTFT +0%, p99 TPOT +25%"));
        // Beside the host's other load, whether another process shared the device itself.
        let mut shared = far.clone();
        shared.other_device_processes = Some(1);
        let detail = &super::checks(&record(vec![shared.clone()]))[0].detail;
        assert!(
            detail.contains(
                ", while other processes kept 0.75 host CPU cores busy, while 1 other process(es) held a context on \
                 the device"
            ),
            "{detail}"
        );
        // Of the host's other load, what a virtual machine's hypervisor stole, where it stole any.
        shared.stolen_cpu_cores = Some(f(0.3));
        let detail = &super::checks(&record(vec![shared.clone()]))[0].detail;
        assert!(detail.contains("0.75 host CPU cores busy (the hypervisor stole 0.30 of them), while 1"), "{detail}");
        // And how much of it at least was on CPUs lynx could not run on.
        shared.other_cpu_cores_elsewhere = Some(f(0.5));
        let detail = &super::checks(&record(vec![shared.clone()]))[0].detail;
        assert!(
            detail.contains(
                "0.75 host CPU cores busy (the hypervisor stole 0.30 of them; at least 0.50 of them on CPUs lynx could \
                 not run on (another job's? a node is measured alone)), while 1"
            ),
            "{detail}"
        );
        // And a CPU quota that throttled lynx while it served.
        shared.cpu_throttled_s = Some(f(0.25));
        let detail = &super::checks(&record(vec![shared]))[0].detail;
        assert!(
            detail.contains(
                "on the device, while its cgroup's CPU quota held lynx off its CPUs for 250.0 ms (give the run more CPU \
                 time: the container's CPU limit)"
            ),
            "{detail}"
        );
        // Where the simulation fed the loop's own steps misses too, the server is what differs.
        let mut unexplained = far.clone();
        unexplained.at_loop_steps = against(figures(1.3, 0.05));
        let detail = &super::checks(&record(vec![unexplained.clone()]))[0].detail;
        assert!(
            detail.contains("p99 TTFT -23%, p99 TPOT +0%, beyond 15% too: the simulated server is not the loop's"),
            "{detail}"
        );
        // Unless replaying the loop's steps in the order they ran meets the measurement: then
        // the order (a slow stretch) is what their spread alone missed, and the server held.
        let mut stretch = unexplained.clone();
        stretch.at_loop_replay = against(figures(1.05, 0.05));
        let detail = &super::checks(&record(vec![stretch.clone()]))[0].detail;
        assert!(
            detail.contains(
                "fed the loop's own steps, the simulation gives p99 TTFT -23%, p99 TPOT +0%; replaying the loop's steps \
                 in the order they ran, the simulation gives p99 TTFT -5%, p99 TPOT +0%, within 15%: the simulated \
                 server held, the steps were not the cells' (the steps' spread alone missed: they ran slow or fast for \
                 a stretch, in an order it does not carry)"
            ),
            "{detail}"
        );
        assert!(!detail.contains("not the loop's"), "{detail}");
        // And where the replay misses too, the server is what differs, whatever the spread said.
        stretch.at_loop_replay = against(figures(1.4, 0.05));
        stretch.at_loop_steps = far.at_loop_steps.clone();
        let detail = &super::checks(&record(vec![stretch]))[0].detail;
        assert!(
            detail.contains(
                "fed the loop's own steps, the simulation gives p99 TTFT -2%, p99 TPOT +2%; replaying the loop's steps in \
                 the order they ran, the simulation gives p99 TTFT -29%, p99 TPOT +0%, beyond 15% too: the simulated \
                 server is not the loop's"
            ),
            "{detail}"
        );
        assert!(
            checks[0].detail.contains(
                "0.80× the cells' times; the first after an idle gap 1.30×), while other processes kept 0.75 host CPU \
                 cores busy"
            ),
            "{}",
            checks[0].detail
        );
        // The warm-up's step and the nearest prefill cell timed again after the window are said
        // beside the loop's steps.
        let mut timed_again = far.clone();
        timed_again.pace_after = Some(Reported::Known(lynx_schema::result::PaceRecheck {
            steps: 24,
            median_s: f(0.0621),
            ratio: Some(f(1.04)),
        }));
        timed_again.prefill_after =
            Some(Reported::unavailable("its step at batch 1, prompt 64 failed: CUDA out of memory"));
        let detail = &super::checks(&record(vec![timed_again]))[0].detail;
        assert!(
            detail.contains(
                "the first after an idle gap 1.30×; the warm-up's step timed again after the window took 1.04× its \
                 equilibrium median (62.1 ms over 24 steps); the prefill cell could not be timed again after the \
                 window: its step at batch 1, prompt 64 failed: CUDA out of memory), while other processes"
            ),
            "{detail}"
        );
        assert!(!checks[1].passed && checks[1].detail.contains("2.00 ms"), "{}", checks[1].detail);
        let broken = record(vec![rate("bounded", (2.5, 0.05), (2.4, 0.05), 1e-4)]);
        let checks = super::checks(&broken);
        assert!(!checks[0].passed && checks[0].detail.contains("break the bound"), "{}", checks[0].detail);
        let none = ServingRecord::new("");
        assert!(super::checks(&none).is_empty(), "nothing served, nothing claimed");
    }

    /// The pool the loop allocates: the batch cap's rows (one more with chunked prefill) of the
    /// longest request, and its largest prefill step: as many prompts as a step takes, at the
    /// longest prompt, or one chunk attending the longest prompt.
    #[test]
    fn a_plans_pool_is_the_loops() {
        let lengths = [(40, 8), (100, 2), (12, 30)].map(|(isl, osl)| Lengths { isl, osl }).to_vec();
        let bound = LatencyBound { name: "b".into(), ttft_p99_s: 1.0, tpot_p99_s: 0.1, source: None };
        let mut plan = Plan {
            workload: Workload::fixed("w", 100, 30),
            bound,
            lengths,
            seed: 1,
            max_batch: 8,
            max_prefill_batch: 16,
            chunk: None,
            mode: StepMode::Eager,
            rates: Ok(Vec::new()),
            steady_lengths: Vec::new(),
            window: None,
            budget_s: None,
        };
        let whole = plan.pool();
        assert_eq!(
            whole,
            Pool { rows: 8, capacity: 102, prefill_batch: 3, prefill_tokens: 100, prefill_keys: 100, graphs: false },
            "no step prefills more prompts than there are requests"
        );
        plan.chunk = Some(64);
        let chunked = plan.pool();
        assert_eq!(
            chunked,
            Pool { rows: 9, capacity: 102, prefill_batch: 1, prefill_tokens: 64, prefill_keys: 100, graphs: false }
        );
        plan.mode = StepMode::Graph;
        assert!(plan.pool().graphs);
        assert_eq!(pool_rows(u32::MAX, true), u32::MAX);
    }

    /// The loop's steps' spread against the cells': the 90th percentile of the ratios of steps
    /// whose shape has a cell spread, beside the median of those cells' own; none without one.
    #[test]
    fn the_loops_step_spread_is_set_beside_the_cells() {
        let step = |ratio, cells_p90| LoopStep { batch: 4, start_s: 0.0, ratio, cells_p90 };
        let steps: Vec<LoopStep> = (1..=10).map(|i| step(f64::from(i) / 10.0 + 0.5, Some(1.1))).collect();
        let spread = step_spread(&steps).unwrap();
        assert!((spread.loop_p90.get() - 1.41).abs() < 1e-12 && spread.cells_p90.get() == 1.1, "{spread:?}");
        let mut with_unknown = steps.clone();
        with_unknown.push(step(9.0, None));
        assert_eq!(step_spread(&with_unknown), Some(spread), "a step with no cell spread is left out");
        assert_eq!(step_spread(&[step(1.0, None)]), None);
        assert_eq!(step_spread(&[]), None);
    }

    /// Fed the loop's own steps, each measured batch takes the median ratio of the loop's steps
    /// nearest it (the smaller of two as near) and their spread, where there are
    /// `BATCH_STEPS` of them; every other batch the median over all the steps of its kind.
    #[test]
    fn a_table_fed_the_loops_steps_takes_each_batchs_own_pace_and_spread() {
        use crate::sim::TablePoint;
        let point =
            |batch, len| TablePoint { batch, len, step_s: 0.01 * f64::from(batch), power_w: None, spread: None };
        let table = StepTable::new(&[point(1, 16), point(4, 16), point(8, 16), point(1, 128), point(8, 128)]);
        assert_eq!(table.batches(), [1, 4, 8]);
        let step = |batch, ratio| LoopStep { batch, start_s: 0.0, ratio, cells_p90: None };
        // Batch 1: five steps at 1.0..1.4, and one of batch 2 (nearer 1 than 4) at 1.2: median
        // 1.2. Batch 8: five steps of batches 7 and 8 at 0.8. Batch 4: the steps of batches 5
        // and 6 (6 is as near 4 as 8, and counts for the smaller), two: too few, so it takes the
        // median over all thirteen: 1.1.
        let mut steps: Vec<LoopStep> = (0..5).map(|i| step(1, 1.0 + 0.1 * f64::from(i))).collect();
        steps.push(step(2, 1.2));
        steps.extend([7, 7, 8, 8, 8].map(|b| step(b, 0.8)));
        steps.extend([step(5, 3.0), step(6, 3.0)]);
        let fed = fed(&table, &steps);
        let at = |batch, len| fed.lookup(batch, len).unwrap();
        assert!((at(1, 16.0).step_s - 0.012).abs() < 1e-12, "{:?}", at(1, 16.0));
        assert!((at(1, 128.0).step_s - 0.012).abs() < 1e-12, "every line alike");
        assert!((at(8, 16.0).step_s - 0.064).abs() < 1e-12, "{:?}", at(8, 16.0));
        // Batch 1's six steps (1.0, 1.1, 1.2, 1.2, 1.3 and 1.4) give it their spread over their
        // median: a 90th percentile of 1.35.
        let spread = at(1, 16.0).spread.unwrap();
        assert!((spread.p90() - 1.35 / 1.2).abs() < 1e-12, "{spread:?}");
        let all = crate::stats::median(&steps.iter().map(|s| s.ratio).collect::<Vec<f64>>()).unwrap();
        assert!((all - 1.1).abs() < 1e-12, "{all}");
        assert!((at(4, 16.0).step_s - 0.04 * all).abs() < 1e-12 && at(4, 16.0).spread.is_none(), "{:?}", at(4, 16.0));
        // No steps: the table as it is.
        assert_eq!(super::fed(&table, &[]).lookup(8, 16.0), table.lookup(8, 16.0));
    }

    /// A batch no cell measured whose steps ran more than 15% off the pace of the loop's steps at
    /// measured batches is named, with how far and over how many steps, in the result and in a
    /// failed check's detail; one nearer the line, or with under five steps, is not.
    #[test]
    fn batches_the_tables_line_got_wrong_are_named() {
        use crate::sim::TablePoint;
        let point = |batch| TablePoint { batch, len: 16, step_s: 0.01, power_w: None, spread: None };
        let table = StepTable::new(&[point(1), point(4), point(8)]);
        let steps = |batch, ratio, n| vec![LoopStep { batch, start_s: 0.0, ratio, cells_p90: None }; n];
        let loop_steps: Vec<LoopStep> = [
            steps(1, 1.1, 10),
            steps(4, 1.1, 10),
            steps(3, 1.1 * 1.32, 6),
            steps(2, 1.12, 6),
            steps(5, 2.0, 3),
            steps(7, 0.88, 5),
        ]
        .concat();
        let off = batches_off_line(&table, &loop_steps, false);
        let named: Vec<(u32, u32)> = off.iter().map(|b| (b.batch, b.steps)).collect();
        assert_eq!(named, [(3, 6), (7, 5)], "{off:?}");
        assert!((off[0].pace.get() - 1.32).abs() < 1e-9 && (off[1].pace.get() - 0.8).abs() < 1e-9, "{off:?}");
        assert!(off.iter().all(|b| !b.prefill));
        // No step at a measured batch: no pace to set them against.
        assert_eq!(batches_off_line(&table, &steps(3, 2.0, 9), false), []);
        let mut served = rate("bounded", (1.0, 0.05), (0.5, 0.05), 1e-4);
        served.batches_off_line = Some(off);
        let detail = &super::checks(&record(vec![served]))[0].detail;
        assert!(
            detail.contains(
                "; batches no cell measured ran off the table's line (against the loop's pace at measured batches): \
                 decode batch 3 at 1.32× (6 steps), decode batch 7 at 0.80× (5 steps), which the suite can measure"
            ),
            "{detail}"
        );
    }

    /// Fed the loop's own steps, the simulation agrees with a loop whose steps ran at their
    /// batches' ratios: where no request waits for another, TTFT is one prefill step and TPOT one
    /// decode step, each that many times as long; a kind the loop ran no step of keeps its table.
    #[test]
    fn the_simulation_fed_the_loops_steps_meets_a_loop_that_ran_them() {
        use crate::sim::TablePoint;
        let table = |step_s| {
            let point = |batch| TablePoint { batch, len: 1, step_s, power_w: None, spread: None };
            StepTable::new(&[point(1), point(8)])
        };
        let (prefill, decode) = (table(0.05), table(0.01));
        let bound = LatencyBound { name: "b".into(), ttft_p99_s: 1.0, tpot_p99_s: 0.1, source: None };
        let plan = Plan {
            workload: Workload::fixed("w", 16, 8),
            bound,
            lengths: vec![Lengths { isl: 16, osl: 8 }; 24],
            seed: 3,
            max_batch: 8,
            max_prefill_batch: 8,
            chunk: None,
            mode: StepMode::Eager,
            rates: Ok(Vec::new()),
            steady_lengths: Vec::new(),
            window: None,
            budget_s: None,
        };
        // One request every 1000 s: none waits for another, every step is at batch 1.
        let rate = 1e-3;
        let predicted = serve_figures(&plan.predict(&prefill, &decode, rate).unwrap().median).unwrap();
        assert!((predicted.ttft_p99_s.get() - 0.05).abs() < 1e-9 && (predicted.tpot_p99_s.get() - 0.01).abs() < 1e-9);
        let steps = |ratio| vec![LoopStep { batch: 1, start_s: 0.0, ratio, cells_p90: None }; BATCH_STEPS];
        let (prefill_steps, decode_steps) = (steps(2.0), steps(3.0));
        let slower = figures(0.1, 0.03);
        let paced = at_loop_steps(&plan, (&prefill, &decode), rate, (&prefill_steps, &decode_steps), &slower).unwrap();
        assert!((paced.simulated.ttft_p99_s.get() - 0.1).abs() < 1e-9, "{paced:?}");
        assert!((paced.simulated.tpot_p99_s.get() - 0.03).abs() < 1e-9, "{paced:?}");
        assert!(paced.relative_error.ttft_p99.get().abs() < 1e-9 && paced.relative_error.tpot_p99.get().abs() < 1e-9);
        let decode_only = at_loop_steps(&plan, (&prefill, &decode), rate, (&[], &decode_steps), &slower).unwrap();
        assert!((decode_only.simulated.ttft_p99_s.get() - 0.05).abs() < 1e-9, "{decode_only:?}");
        assert!((decode_only.relative_error.ttft_p99.get() - 1.0).abs() < 1e-9, "{decode_only:?}");

        // Replaying them in the order they ran: the first twelve requests' steps at 2x (prefill)
        // and 3x (decode) their tables, the rest at 1x, gives those requests' TTFT and TPOT at
        // that pace and the p99s theirs; the same slow steps, run after the last request
        // finished, slow none of them.
        let arrivals = crate::sim::arrival_times(plan.seed, plan.lengths.len(), rate);
        let replays = |slow: &dyn Fn(usize) -> bool| {
            // As the runner builds them: from the loop's steps, through `replay`.
            let kind = |ratio: f64| {
                let steps: Vec<LoopStep> = (arrivals.iter().enumerate())
                    .map(|(i, &at)| LoopStep {
                        batch: 1,
                        start_s: at,
                        ratio: if slow(i) { ratio } else { 1.0 },
                        cells_p90: None,
                    })
                    .collect();
                replay(&steps)
            };
            (kind(2.0), kind(3.0))
        };
        assert_eq!(replay(&[]), None, "no steps of a kind: that kind is drawn as predicted");
        let replayed = at_loop_replay(&plan, (&prefill, &decode), rate, replays(&|i| i < 12), &slower).unwrap();
        assert!((replayed.simulated.ttft_p99_s.get() - 0.1).abs() < 1e-9, "{replayed:?}");
        assert!((replayed.simulated.tpot_p99_s.get() - 0.03).abs() < 1e-9, "{replayed:?}");
        let after: Vec<f64> = arrivals.iter().map(|at| at + arrivals[23] + 10.0).collect();
        let kind = |ratio: f64| {
            Replay::new(
                arrivals
                    .iter()
                    .map(|&at| (at, 1.0))
                    .chain(after.iter().enumerate().filter(|(i, _)| *i < 12).map(|(_, &at)| (at, ratio))),
            )
        };
        let replayed = at_loop_replay(&plan, (&prefill, &decode), rate, (kind(2.0), kind(3.0)), &slower).unwrap();
        assert!((replayed.simulated.ttft_p99_s.get() - 0.05).abs() < 1e-9, "{replayed:?}");
        assert!((replayed.simulated.tpot_p99_s.get() - 0.01).abs() < 1e-9, "{replayed:?}");
    }

    /// Issue 16: the steady state a served rate is set beside is the latency-bounded search's own
    /// simulation (at the latency-bounded rate, its figures). A window of 24 requests from an
    /// idle server holds the bound 20% above that rate, where the steady state breaks it;
    /// `serve.most_requests` grows the window, doubling, to the smallest whose simulation breaks
    /// it there by more than the check's agreement and still holds it at the latency-bounded
    /// rate, and says so; one it may not grow far enough, or that serve.max_s cuts short, says
    /// that it cannot show the steady state. Over the step tables of the published `cpu` run
    /// 20261202T182418Z (its `short` mix under the server bound).
    #[test]
    fn a_window_grows_until_its_simulation_shows_what_the_steady_state_does() {
        use crate::derived::{mode_tables, persistence};
        use lynx_schema::config::Suite;
        use lynx_schema::result::RunResult;
        let run = "20261202T182418Z-bb6a46e8";
        let path = crate::catalogue_dir().join(format!("../results/amd-epyc/{run}/{run}.json"));
        let result: RunResult = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let (prefill, decode) = mode_tables(&result.cells, StepMode::Eager, persistence(result.warmup.as_ref()));
        let suite = |most_requests: Option<u32>, max_s: f64| {
            let serve = ServeConfig {
                requests: 24,
                workloads: vec!["short".into()],
                most_requests,
                max_s,
                ..Default::default()
            };
            Suite { serve: Some(serve), ..result.config.suite.clone() }
        };
        let bound = LatencyBound { name: "server".into(), ttft_p99_s: 2.0, tpot_p99_s: 0.1, source: None };
        let planned = |most_requests: Option<u32>, max_s: f64| {
            let suite = suite(most_requests, max_s);
            let serve = suite.serve.clone().unwrap();
            let budget_s = serve.budget_s(0.0);
            plan(&suite, std::slice::from_ref(&bound), (&prefill, &decode), (&serve, budget_s), StepMode::Eager, None)
                .remove(0)
        };
        let short = planned(None, 90.0);
        let rates = short.rates.clone().unwrap();
        let (bounded, over) = (rates[0].1, rates[1].1);
        assert_eq!((short.lengths.len(), short.steady_lengths.len(), &short.window), (24, 2000, &None));
        // The steady state: held at the latency-bounded rate (the search's point, at the bound),
        // broken 20% above it; the 24-request window holds it at both.
        let steady = |plan: &Plan, rate| plan.steady(&prefill, &decode, rate).unwrap();
        assert!(steady(&short, bounded).within_bound && !steady(&short, over).within_bound);
        assert_eq!(steady(&short, bounded).requests, 2000);
        let window = |plan: &Plan, rate| plan.simulate(&prefill, &decode, rate).unwrap();
        let held = |o: SimOutcome| bound.holds(o.ttft_p99_s, o.tpot_p99_s);
        assert!(held(window(&short, bounded)) && held(window(&short, over)), "{:?}", window(&short, over));
        // Grown: the smallest doubling that shows the crossing with the margin.
        let grown = planned(Some(1000), 90.0);
        let n = grown.lengths.len();
        assert!(n > 24 && n <= 1000 && [48, 96, 192, 384, 768, 1000].contains(&n), "{n}");
        let broken = |o: SimOutcome| o.ttft_p99_s > 2.0 * (1.0 + AGREEMENT) || o.tpot_p99_s > 0.1 * (1.0 + AGREEMENT);
        assert!(held(window(&grown, bounded)) && broken(window(&grown, over)), "{:?}", window(&grown, over));
        let half = Plan { lengths: draw(&grown.workload, grown.seed, n / 2), ..grown.clone() };
        assert!(!broken(window(&half, over)) || !held(window(&half, bounded)), "{n} is not the smallest");
        let words = grown.window.clone().unwrap();
        assert!(words.starts_with(&format!("{n} requests, the smallest window of 24, 48")), "{words}");
        // Not allowed to grow far enough, or cut by serve.max_s: the window says it cannot show it.
        let capped = planned(Some(n as u32 / 2), 90.0);
        assert_eq!(capped.lengths.len(), n / 2);
        assert!(capped.window.unwrap().contains("does not show what the steady state's does"));
        let cut = planned(Some(1000), 1.0);
        assert_eq!(cut.lengths.len(), 24, "the first window is served as before");
        assert!(cut.window.unwrap().starts_with("24 requests (of 24, the most"));

        // A budget for the phase (serve.total_s): the window grows only while the two rates and
        // the step down under the bounded rate fit it together, as simulated.
        let budgeted = |total_s: f64| {
            let mut suite = suite(Some(1000), 90.0);
            suite.serve.as_mut().unwrap().total_s = Some(total_s);
            let serve = suite.serve.clone().unwrap();
            let budget_s = serve.budget_s(0.0);
            plan(&suite, std::slice::from_ref(&bound), (&prefill, &decode), (&serve, budget_s), StepMode::Eager, None)
                .remove(0)
        };
        let together = |plan: &Plan| {
            [bounded, over, UNDER[0] * bounded]
                .iter()
                .map(|&r| plan.window_s(&prefill, &decode, r).unwrap())
                .sum::<f64>()
        };
        let roomy = budgeted(3.0 * together(&grown));
        assert_eq!((roomy.lengths.len(), roomy.budget_s), (n, Some(3.0 * together(&grown))));
        // Room for the half window's rates, not the whole one's: it stops growing short of n.
        let tight = budgeted(0.5 * (together(&half) + together(&grown)));
        assert!(tight.lengths.len() < n, "{}", tight.lengths.len());
        assert!(together(&tight) <= tight.budget_s.unwrap() || tight.lengths.len() == 24);
        let words = tight.window.unwrap();
        assert!(
            words.contains(
                "the most serve.most_requests, serve.max_s and the serving budget (serve.total_s, serve.run_s) allow"
            ),
            "{words}"
        );
        // The first window is served whatever the budget.
        assert_eq!(budgeted(1.0).lengths.len(), 24);
    }
}
