//! The figures buyers size fleets with, derived from a run's cells (DESIGN.md vocabulary): the
//! decode frontier, the prefill throughput table, latency-bounded throughput per workload and
//! bound (by [`crate::sim`]), joules per output token, and cost per million output tokens from a
//! price the user gives. docs/SWEEPS.md states the method.

use crate::latency::bounds_for;
use crate::lengths::{draw, Lengths};
use crate::sim::{max_rate, Persistence, SimSetup, Spread, StepTable, TablePoint};
use lynx_schema::config::{LatencyBound, SimulationConfig, Workload};
use lynx_schema::derived::{
    BoundedPoint, Derived, EagerGraph, FrontierLine, FrontierPoint, LatencyBounded, MeasuredBounded, PrefillPoint,
    PriceInputs,
};
use lynx_schema::result::{CellRecord, CellShape, CellStatus, ConfigRecord, StepMode, WarmupRecord};
use lynx_schema::serving::{Served, ServingRecord};
use lynx_schema::sweep::SweepLine;
use lynx_schema::value::{Finite, Reported};
use std::sync::atomic::AtomicBool;

/// Cost of a million output tokens at `tok_per_s` on a device rented at `price`.
pub fn usd_per_million(price: &PriceInputs, tok_per_s: f64) -> Reported<Finite> {
    let Some(per_hour) = price.usd_per_device_hour else {
        return Reported::Unavailable { unavailable: "no price per device-hour given (--price-per-hour)".to_owned() };
    };
    let useful_tokens_per_hour = 3600.0 * tok_per_s * price.utilisation.get();
    match Finite::new(per_hour.get() / useful_tokens_per_hour * 1e6, "cost per million tokens") {
        Ok(cost) if useful_tokens_per_hour > 0.0 => Reported::Known(cost),
        _ => Reported::Unavailable { unavailable: format!("no tokens at {tok_per_s} tok/s") },
    }
}

fn finite(value: f64, what: &str) -> Result<Finite, String> {
    Finite::new(value, what).map_err(|e| e.to_string())
}

/// Derive every figure from `cells` of a run configured as `config` (whose `warmup` measured how
/// its steps persisted).
pub fn derive(
    config: &ConfigRecord,
    (cells, warmup): (&[CellRecord], Option<&WarmupRecord>),
    serving: Option<&ServingRecord>,
    price: PriceInputs,
    sweep: Vec<SweepLine>,
    stop: Option<&AtomicBool>,
) -> Derived {
    let ok = || cells.iter().filter(|c| c.status == CellStatus::Ok);
    let decode = fastest_decode(cells);
    let mut frontier: Vec<FrontierLine> = Vec::new();
    for cell in &decode {
        let (CellShape::Decode { batch, ctx, mode }, Some(user), Some(device)) =
            (cell.shape, cell.tok_per_s_per_user, cell.tok_per_s_per_device)
        else {
            continue;
        };
        let point = FrontierPoint {
            batch,
            tok_per_s_per_user: user,
            tok_per_s_per_device: device,
            joules_per_token: cell.joules_per_token,
            mode,
        };
        match frontier.iter_mut().find(|line| line.ctx == ctx) {
            Some(line) => line.points.push(point),
            None => frontier.push(FrontierLine { ctx, points: vec![point] }),
        }
    }
    for line in &mut frontier {
        let all = line.points.clone();
        let dominated = |p: &FrontierPoint| {
            all.iter().any(|q| {
                q.tok_per_s_per_user >= p.tok_per_s_per_user
                    && q.tok_per_s_per_device >= p.tok_per_s_per_device
                    && (q.tok_per_s_per_user > p.tok_per_s_per_user || q.tok_per_s_per_device > p.tok_per_s_per_device)
            })
        };
        line.points.retain(|p| !dominated(p));
        line.points.sort_by(|a, b| a.tok_per_s_per_device.get().total_cmp(&b.tok_per_s_per_device.get()));
    }
    frontier.sort_by_key(|line| line.ctx);

    let prefill = ok()
        .filter_map(|cell| match (cell.shape, cell.median_s(), cell.tok_per_s_per_device) {
            (CellShape::Prefill { batch, prompt_len }, Some(median), Some(device)) => Some(PrefillPoint {
                batch,
                prompt_len,
                ttft_s: Finite::new(median, "ttft").ok()?,
                tok_per_s_per_device: device,
                joules_per_token: cell.joules_per_token,
            }),
            _ => None,
        })
        .collect();

    let tables = ServerTables::new(cells, persistence(warmup));
    let suite = &config.suite;
    let mut latency_bounded = Vec::new();
    for workload in &suite.workloads {
        for bound in bounds_for(&suite.bounds, &config.model) {
            let measured = serving.and_then(|s| measured_bounded(s, workload, &bound, &price));
            let served = measured.as_ref().map(|m| m.mode);
            let point = tables.point((workload, &bound, served), &suite.simulation, suite.seed, &price, stop);
            latency_bounded.push(LatencyBounded { workload: workload.clone(), bound, point, measured });
        }
    }
    Derived {
        frontier,
        prefill,
        latency_bounded,
        price,
        sweep,
        decode_modes: decode_modes(cells, &decode),
        eager_graph: eager_graph(cells),
    }
}

/// The serving loop's figures at the rate it published for `workload` under `bound`.
fn measured_bounded(
    serving: &ServingRecord,
    workload: &Workload,
    bound: &LatencyBound,
    price: &PriceInputs,
) -> Option<MeasuredBounded> {
    let served = serving.served.iter().find(|s| s.workload == *workload && s.bound.name == bound.name)?;
    measured_at_published_rate(served, price)
}

/// The figures of `served` at its published rate (`crate::serving::published`: its
/// latency-bounded rate, or the fastest rate under it that held the bound where that one broke
/// it), where it served that rate.
pub(crate) fn measured_at_published_rate(served: &Served, price: &PriceInputs) -> Option<MeasuredBounded> {
    let rates = served.rates.known()?;
    let rate = crate::serving::published(rates)?;
    let of_simulated_rate = crate::serving::under_fraction(rates, rate)
        .and_then(|fraction| Finite::new(fraction, "fraction of the simulated rate").ok());
    let m = &rate.measured;
    Some(MeasuredBounded {
        request_rate_per_s: rate.rate_per_s,
        output_tok_per_s_per_device: m.output_tok_per_s_per_device,
        tok_per_s_per_user: m.tok_per_s_per_user,
        ttft_p99_s: m.ttft_p99_s,
        tpot_p99_s: m.tpot_p99_s,
        within_bound: rate.within_bound,
        joules_per_output_token: rate.joules_per_output_token.clone(),
        usd_per_million_output_tokens: usd_per_million(price, m.output_tok_per_s_per_device.get()),
        max_batch: Some(served.max_batch),
        mode: served.mode,
        of_simulated_rate,
        requests: Some(rate.requests),
        steady_output_tok_per_s_per_device: m.steady_output_tok_per_s_per_device.clone(),
    })
}

/// Each decode shape with a successful cell in both modes, eager against graph.
pub fn eager_graph(cells: &[CellRecord]) -> Vec<EagerGraph> {
    let ok = |mode: StepMode| {
        cells.iter().filter(move |c| c.status == CellStatus::Ok && c.shape.mode() == mode && c.shape.is_decode())
    };
    let mut pairs = Vec::new();
    for eager in ok(StepMode::Eager) {
        let same = |c: &&CellRecord| c.shape.batch() == eager.shape.batch() && c.shape.length() == eager.shape.length();
        let Some(graph) = ok(StepMode::Graph).find(same) else { continue };
        let (Some(eager_s), Some(graph_s)) = (eager.median_s(), graph.median_s()) else { continue };
        let (Ok(eager_step_s), Ok(graph_step_s), Ok(ratio)) =
            (finite(eager_s, "eager step"), finite(graph_s, "graph step"), finite(eager_s / graph_s, "eager/graph"))
        else {
            continue;
        };
        pairs.push(EagerGraph {
            batch: eager.shape.batch(),
            ctx: eager.shape.length(),
            eager_step_s,
            graph_step_s,
            eager_over_graph: ratio,
            eager_attention: eager.attention,
            graph_attention: graph.attention,
        });
    }
    pairs
}

/// The decode cells the derived figures use: at each (batch, context) the successful cell with
/// the shortest median step, whichever mode issued it. Graph cells exist only in a run whose
/// graph parity check passed, so every mode here passed its checks.
pub fn fastest_decode(cells: &[CellRecord]) -> Vec<&CellRecord> {
    let mut chosen: Vec<&CellRecord> = Vec::new();
    for cell in cells.iter().filter(|c| c.status == CellStatus::Ok && c.shape.is_decode()) {
        let Some(median) = cell.median_s() else { continue };
        let same = |c: &&CellRecord| c.shape.batch() == cell.shape.batch() && c.shape.length() == cell.shape.length();
        match chosen.iter().position(same) {
            Some(i) if chosen[i].median_s().is_some_and(|m| m <= median) => {}
            Some(i) => chosen[i] = cell,
            None => chosen.push(cell),
        }
    }
    chosen
}

/// In words, which modes the derived figures use, where any graph cell was measured: `graph at
/// 10 of 12 decode shapes, eager at 2`.
fn decode_modes(cells: &[CellRecord], chosen: &[&CellRecord]) -> Option<String> {
    if !cells.iter().any(|c| c.shape.mode() == StepMode::Graph) {
        return None;
    }
    let graph = chosen.iter().filter(|c| c.shape.mode() == StepMode::Graph).count();
    Some(format!(
        "the faster passing mode at each decode shape: graph at {graph} of {} decode shapes, eager at {}",
        chosen.len(),
        chosen.len() - graph
    ))
}

/// Latency-bounded throughput of `workload` under `bound` from a run's `cells` (those that
/// succeeded), as [`derive`] computes it: for a buyer's own request shape and bound.
/// `served`: the mode of the serving loop that measured this very shape and bound, whose server
/// the simulation then models ([`ServerTables::point`]).
pub fn latency_bounded_from_cells(
    (cells, warmup): (&[CellRecord], Option<&WarmupRecord>),
    simulation: &SimulationConfig,
    seed: u64,
    (workload, bound, served): (&Workload, &LatencyBound, Option<StepMode>),
    price: &PriceInputs,
) -> Reported<BoundedPoint> {
    ServerTables::new(cells, persistence(warmup)).point((workload, bound, served), simulation, seed, price, None)
}

/// The step tables of the servers a simulated latency-bounded point may model: the faster
/// passing mode at each decode shape, and each mode alone (the serving loop's).
struct ServerTables<'c> {
    cells: &'c [CellRecord],
    persistence: Option<Persistence>,
    fastest: (StepTable, StepTable),
}

impl<'c> ServerTables<'c> {
    fn new(cells: &'c [CellRecord], persistence: Option<Persistence>) -> Self {
        let (prefill, decode) = step_tables(cells);
        ServerTables { cells, persistence, fastest: (prefill, decode.with_persistence(persistence)) }
    }

    /// The simulated latency-bounded point. Beside a serving loop's measurement (`served`, the
    /// mode it issued its decode steps in) the simulated server is that loop's, as it was planned
    /// ([`crate::serving::plan`]): the simulated and the measured figure then describe one
    /// server at one rate. Otherwise each decode step is issued in the faster passing mode at its
    /// shape, at exactly its rows and context.
    fn point(
        &self,
        (workload, bound, served): (&Workload, &LatencyBound, Option<StepMode>),
        simulation: &SimulationConfig,
        seed: u64,
        price: &PriceInputs,
        stop: Option<&AtomicBool>,
    ) -> Reported<BoundedPoint> {
        let found = match served {
            Some(mode) => {
                let (prefill, decode) = mode_tables(self.cells, mode, self.persistence);
                bounded((&prefill, &decode, mode == StepMode::Graph), simulation, seed, workload, bound, price, stop)
                    .map(|point| BoundedPoint { decode_steps: Some(mode), ..point })
            }
            None => {
                let (prefill, decode) = &self.fastest;
                bounded((prefill, decode, false), simulation, seed, workload, bound, price, stop)
            }
        };
        found.map_or_else(|unavailable| Reported::Unavailable { unavailable }, Reported::Known)
    }
}

/// The step-time tables of a server whose decode steps are issued as `mode` says (the serving
/// loop's: graphs where the run's graph steps passed their check, else eager): the prefill cells
/// and the decode cells of that mode that succeeded, their steps drawn with `persistence`.
pub fn mode_tables(cells: &[CellRecord], mode: StepMode, persistence: Option<Persistence>) -> (StepTable, StepTable) {
    let of_mode: Vec<CellRecord> =
        cells.iter().filter(|c| !c.shape.is_decode() || c.shape.mode() == mode).cloned().collect();
    let (prefill, decode) = step_tables(&of_mode);
    (prefill, decode.with_persistence(persistence))
}

/// How the device's step times persisted from one step to the next, from the run's warm-up
/// (docs/SWEEPS.md, "Persistence"); `None` where the warm-up did not record it (the simulation
/// then draws steps independently, as for results made before it was recorded).
pub fn persistence(warmup: Option<&WarmupRecord>) -> Option<Persistence> {
    let a = warmup?.step_autocorrelation?;
    Persistence::fit(a.lag_1.get(), a.lag_4.get(), a.median_s.get())
}

/// The prefill and decode step-time tables of the cells that succeeded (median step times, the
/// full-depth estimate for a layer subset; mean power where measured).
fn step_tables(cells: &[CellRecord]) -> (StepTable, StepTable) {
    let prefill: Vec<&CellRecord> =
        cells.iter().filter(|c| c.status == CellStatus::Ok && matches!(c.shape, CellShape::Prefill { .. })).collect();
    let table = |cells: &[&CellRecord]| {
        let points: Vec<TablePoint> = cells
            .iter()
            .filter_map(|c| {
                Some(TablePoint {
                    batch: c.shape.batch(),
                    len: c.shape.length(),
                    // A step takes time: a signed result claiming otherwise has no table point.
                    step_s: c.median_s().filter(|s| *s > 0.0)?,
                    power_w: c.power_mean_w(),
                    spread: c.step_time.as_ref().and_then(|t| {
                        let median = t.median_s.get();
                        Spread::new(
                            t.min_s.get() / median,
                            t.p90_s.get() / median,
                            t.p99_s.get() / median,
                            t.max_s.get() / median,
                        )
                    }),
                })
            })
            .collect();
        StepTable::new(&points)
    };
    let decode = fastest_decode(cells);
    let line_attended = |len: u32| {
        let at: Vec<f64> = decode.iter().filter(|c| c.shape.length() == len).filter_map(|c| attended(c)).collect();
        crate::stats::median(&at).ok()
    };
    (table(&prefill), table(&decode).placed(line_attended))
}

/// The mean length a decode cell's timed steps attended, where its record says: a graph step's
/// whole cache, or the midpoint of an eager cell's context and its context at its last step
/// (its steps grow the context from one to the other, starting again from the context if they
/// filled the cache's room).
fn attended(cell: &CellRecord) -> Option<f64> {
    let ctx = f64::from(cell.shape.length());
    match (cell.attended, cell.ctx_end) {
        (Some(keys), _) => Some(f64::from(keys)),
        (None, Some(end)) => Some((ctx + f64::from(end)) / 2.0),
        (None, None) => None,
    }
}

/// The simulated server for `lengths` over the step tables, and the batch caps worth trying: the
/// configured one, else 1, 2, 4, … and the largest batch measured at every context the requests
/// pass through (a tight TPOT bound may be met only by capping the batch). The setup's
/// `max_batch` is the largest cap.
pub fn server<'a>(
    (prefill, decode, graph_steps): (&'a StepTable, &'a StepTable, bool),
    simulation: &SimulationConfig,
    seed: u64,
    lengths: &'a [Lengths],
    stop: Option<&'a AtomicBool>,
) -> Result<(SimSetup<'a>, Vec<u32>), String> {
    if prefill.is_empty() || decode.is_empty() {
        return Err("the run measured no prefill or no decode cell without failure".to_owned());
    }
    let shortest = lengths.iter().map(|l| l.isl).min().ok_or("no requests")?;
    let longest = lengths.iter().map(|l| l.isl).max().unwrap_or(shortest);
    let longest_context = lengths.iter().map(|l| l.isl + l.osl).max().unwrap_or(longest);
    let max_prefill_batch = prefill.max_batch(shortest, longest).ok_or("no prefill batch measured")?;
    let caps = match simulation.max_batch {
        Some(cap) => vec![cap],
        None => {
            let largest = decode
                .max_batch(shortest, longest_context)
                .ok_or("no decode batch measured at the workload's contexts")?;
            crate::sim::ladder_to(largest)
        }
    };
    let max_batch = caps.iter().copied().max().unwrap_or(1);
    let chunk = simulation.chunked_prefill;
    let setup =
        SimSetup { prefill, decode, lengths, max_batch, max_prefill_batch, chunk, graph_steps, seed, draw: 0, stop };
    Ok((setup, caps))
}

/// The latency-bounded point of `workload` under `bound` on a server whose steps take the
/// tables' times (with `graph_steps`, its decode steps replayed as graphs: [`SimSetup`]).
pub(crate) fn bounded(
    (prefill, decode, graph_steps): (&StepTable, &StepTable, bool),
    simulation: &SimulationConfig,
    seed: u64,
    workload: &Workload,
    bound: &LatencyBound,
    price: &PriceInputs,
    stop: Option<&AtomicBool>,
) -> Result<BoundedPoint, String> {
    // A signed result's suite is not trusted to be one a suite file could hold.
    if simulation.requests > SimulationConfig::MOST_REQUESTS {
        return Err(format!(
            "simulation.requests is {}, above the {} a suite may ask for",
            simulation.requests,
            SimulationConfig::MOST_REQUESTS
        ));
    }
    let lengths = draw(workload, seed, simulation.requests as usize);
    let (setup, caps) = server((prefill, decode, graph_steps), simulation, seed, &lengths, stop)?;
    let mut best: Option<(u32, crate::sim::SimOutcome)> = None;
    for cap in caps {
        let setup = SimSetup { max_batch: cap, max_prefill_batch: setup.max_prefill_batch.min(cap), ..setup.clone() };
        let found = max_rate(&setup, bound).map_err(|e| format!("simulation: {e}"))?;
        if let Some(outcome) = found {
            if best.as_ref().is_none_or(|(_, b)| outcome.output_tok_per_s > b.output_tok_per_s) {
                best = Some((cap, outcome));
            }
        }
    }
    let (max_batch, outcome) = best.ok_or_else(|| {
        format!(
            "no load keeps p99 TTFT within {} s and p99 TPOT within {} s at any batch cap: the steps are too slow",
            bound.ttft_p99_s, bound.tpot_p99_s
        )
    })?;
    let max_prefill_batch = setup.max_prefill_batch.min(max_batch);
    let tok_per_s = outcome.output_tok_per_s;
    Ok(BoundedPoint {
        request_rate_per_s: finite(outcome.rate_per_s, "request rate")?,
        output_tok_per_s_per_device: finite(tok_per_s, "output tok/s/device")?,
        tok_per_s_per_user: finite(1.0 / outcome.tpot_p50_s.max(f64::MIN_POSITIVE), "tok/s/user")?,
        ttft_p99_s: finite(outcome.ttft_p99_s, "p99 TTFT")?,
        tpot_p99_s: finite(outcome.tpot_p99_s, "p99 TPOT")?,
        max_batch,
        max_prefill_batch,
        chunked_prefill: simulation.chunked_prefill,
        requests: simulation.requests,
        joules_per_output_token: match outcome.joules_per_output_token {
            Some(j) => Reported::Known(finite(j, "joules per output token")?),
            None => Reported::Unavailable {
                unavailable: "power was not measured in every cell the simulation used".to_owned(),
            },
        },
        usd_per_million_output_tokens: usd_per_million(price, tok_per_s),
        extrapolated: outcome.extrapolated,
        decode_steps: None,
        steady_output_tok_per_s_per_device: Some(crate::serving::steady_figure(outcome.steady_output_tok_per_s)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::result::AttentionKernel;

    #[test]
    fn a_tight_tpot_bound_is_met_by_capping_the_batch() {
        // A CPU-like device: batch 1 decodes in 31 ms, batch 2 in 60 ms, batch 16 in 70 ms. Under
        // a 40 ms TPOT bound only sequences decoding alone qualify, so the best server caps the
        // batch at 1 rather than letting any two overlap.
        let point = |batch, len, step_s| TablePoint { batch, len, step_s, power_w: None, spread: None };
        let decode = StepTable::new(&[point(1, 128, 0.031), point(2, 128, 0.060), point(16, 128, 0.070)]);
        let prefill = StepTable::new(&[point(1, 128, 0.16)]);
        let workload = Workload::fixed("chat", 128, 128);
        let bound = LatencyBound { name: "interactive".into(), ttft_p99_s: 10.0, tpot_p99_s: 0.04, source: None };
        let price = PriceInputs { usd_per_device_hour: None, utilisation: Finite::new(1.0, "u").unwrap() };
        let simulation = SimulationConfig::default();
        let best = bounded((&prefill, &decode, false), &simulation, 1, &workload, &bound, &price, None).unwrap();
        assert_eq!(best.max_batch, 1);
        let uncapped = SimulationConfig { max_batch: Some(16), ..SimulationConfig::default() };
        let at_16 = bounded((&prefill, &decode, false), &uncapped, 1, &workload, &bound, &price, None).unwrap();
        assert!(
            best.output_tok_per_s_per_device.get() > 2.0 * at_16.output_tok_per_s_per_device.get(),
            "capped {best:?} against uncapped {at_16:?}"
        );
    }

    /// Issue 17: a result whose suite asks for more simulated requests than a suite file may is
    /// given no figure, with why, instead of an allocation that aborts the process.
    #[test]
    fn too_many_simulated_requests_give_no_figure_rather_than_an_abort() {
        let point = |batch, len, step_s| TablePoint { batch, len, step_s, power_w: None, spread: None };
        let decode = StepTable::new(&[point(1, 128, 0.01)]);
        let prefill = StepTable::new(&[point(1, 128, 0.1)]);
        let workload = Workload::fixed("chat", 128, 128);
        let bound = LatencyBound { name: "b".into(), ttft_p99_s: 10.0, tpot_p99_s: 1.0, source: None };
        let price = PriceInputs { usd_per_device_hour: None, utilisation: Finite::new(1.0, "u").unwrap() };
        let huge = SimulationConfig { requests: 1_000_000_000, ..SimulationConfig::default() };
        let error = bounded((&prefill, &decode, false), &huge, 1, &workload, &bound, &price, None).unwrap_err();
        assert!(error.contains("1000000000") && error.contains("100000"), "{error}");
    }

    #[test]
    fn cost_follows_price_throughput_and_utilisation() {
        let price = PriceInputs {
            usd_per_device_hour: Some(Finite::new(3.6, "p").unwrap()),
            utilisation: Finite::new(0.5, "u").unwrap(),
        };
        // 1000 tok/s at half utilisation: 1.8 M useful tokens an hour for $3.60: $2 per million.
        let Reported::Known(cost) = usd_per_million(&price, 1000.0) else { panic!() };
        assert!((cost.get() - 2.0).abs() < 1e-12);
        let no_price = PriceInputs { usd_per_device_hour: None, ..price };
        assert!(matches!(usd_per_million(&no_price, 1000.0), Reported::Unavailable { .. }));
    }

    fn decode_cell(batch: u32, ctx: u32, mode: StepMode, median_s: f64) -> CellRecord {
        let summary = crate::stats::summarise(&[median_s; 3]).unwrap();
        let shape = CellShape::Decode { batch, ctx, mode };
        crate::cell::measured(shape, summary, Finite::new(1.0, "t").unwrap(), None, None).unwrap()
    }

    fn prefill_cell(batch: u32, prompt_len: u32, median_s: f64) -> CellRecord {
        let summary = crate::stats::summarise(&[median_s; 3]).unwrap();
        let shape = CellShape::Prefill { batch, prompt_len };
        crate::cell::measured(shape, summary, Finite::new(1.0, "t").unwrap(), None, None).unwrap()
    }

    /// The simulation draws steps with the persistence the run's warm-up measured: a device
    /// whose steps stay slow for stretches meets a TPOT bound at a lower rate than one whose
    /// steps vary as much but independently. No recorded autocorrelation, none assumed.
    #[test]
    fn the_warm_up_s_autocorrelation_makes_steps_persist_in_the_simulation() {
        let varied = |median_s: f64| -> Vec<f64> {
            [0.96, 0.98, 1.0, 1.0, 1.01, 1.03, 1.06, 1.1, 1.2, 0.99, 1.0, 1.02].iter().map(|f| f * median_s).collect()
        };
        let cell = |shape, median_s| {
            let summary = crate::stats::summarise(&varied(median_s)).unwrap();
            crate::cell::measured(shape, summary, Finite::new(1.0, "t").unwrap(), None, None).unwrap()
        };
        let mut cells = vec![cell(CellShape::Prefill { batch: 1, prompt_len: 128 }, 0.01)];
        for batch in [1, 2, 4, 8] {
            cells.push(cell(CellShape::decode(batch, 256), 0.02 + 0.001 * f64::from(batch)));
        }
        let autocorrelation = |lag_1: f64, lag_4: f64| lynx_schema::stats::StepAutocorrelation {
            steps: 1000,
            median_s: Finite::new(0.02, "t").unwrap(),
            lag_1: Finite::new(lag_1, "t").unwrap(),
            lag_4: Finite::new(lag_4, "t").unwrap(),
        };
        let warmup = |a| WarmupRecord {
            duration_s: Finite::new(61.0, "t").unwrap(),
            steps: 3000,
            batch: 8,
            ctx: 256,
            equilibrium_reached: true,
            criteria: lynx_schema::config::WarmupConfig::default(),
            last_window: None,
            telemetry: Vec::new(),
            segment: Some(1),
            step_autocorrelation: a,
            after_sweep: None,
            link_at_end: None,
        };
        let (persistent, independent, unrecorded) =
            (warmup(Some(autocorrelation(0.8, 0.6))), warmup(Some(autocorrelation(-0.1, 0.0))), warmup(None));
        assert_eq!(persistence(Some(&persistent)), Persistence::fit(0.8, 0.6, 0.02));
        assert!(persistence(Some(&persistent)).is_some());
        assert_eq!(
            (persistence(Some(&independent)), persistence(Some(&unrecorded)), persistence(None)),
            (None, None, None)
        );

        let workload = Workload::fixed("chat", 128, 64);
        let bound = LatencyBound { name: "b".into(), ttft_p99_s: 2.0, tpot_p99_s: 0.03, source: None };
        let price = PriceInputs { usd_per_device_hour: None, utilisation: Finite::new(1.0, "u").unwrap() };
        let rate = |warmup: Option<&WarmupRecord>| match latency_bounded_from_cells(
            (&cells, warmup),
            &SimulationConfig::default(),
            7,
            (&workload, &bound, None),
            &price,
        ) {
            Reported::Known(point) => point.request_rate_per_s.get(),
            Reported::Unavailable { unavailable } => panic!("{unavailable}"),
        };
        let (steps_persist, steps_independent) = (rate(Some(&persistent)), rate(Some(&unrecorded)));
        assert_eq!(steps_independent, rate(None));
        assert!(steps_persist < 0.95 * steps_independent, "{steps_persist} against {steps_independent} requests/s");
    }

    /// Issue 16: beside a serving loop's measurement, the simulated point models that loop's
    /// server as it was planned (its mode's cells; graph steps charged at a captured batch over
    /// the pool's whole capacity), so that the simulated and the measured figure describe one
    /// server at one rate; with no measurement beside it, the faster passing mode at each shape.
    #[test]
    fn the_simulated_point_beside_a_measurement_models_the_measured_server() {
        let mut cells = vec![prefill_cell(1, 128, 0.05), prefill_cell(4, 128, 0.15)];
        // Graph steps faster than eager at every shape; longer contexts slower.
        for (batch, eager_s, graph_s) in [(1, 0.020, 0.010), (2, 0.022, 0.012), (4, 0.026, 0.016), (8, 0.034, 0.026)] {
            for (ctx, longer) in [(128, 1.0), (256, 1.5)] {
                cells.push(decode_cell(batch, ctx, StepMode::Eager, eager_s * longer));
                cells.push(decode_cell(batch, ctx, StepMode::Graph, graph_s * longer));
            }
        }
        let workload = Workload::fixed("chat", 128, 64);
        let bound = LatencyBound { name: "b".into(), ttft_p99_s: 2.0, tpot_p99_s: 0.04, source: None };
        let price = PriceInputs { usd_per_device_hour: None, utilisation: Finite::new(1.0, "u").unwrap() };
        let simulation = SimulationConfig::default();
        let tables = ServerTables::new(&cells, None);
        let point = |served| match tables.point((&workload, &bound, served), &simulation, 7, &price, None) {
            Reported::Known(point) => point,
            Reported::Unavailable { unavailable } => panic!("{served:?}: {unavailable}"),
        };
        let planned = |mode: StepMode| {
            let (prefill, decode) = mode_tables(&cells, mode, None);
            let graph_steps = mode == StepMode::Graph;
            bounded((&prefill, &decode, graph_steps), &simulation, 7, &workload, &bound, &price, None).unwrap()
        };
        let ideal = point(None);
        let (prefill, decode) = step_tables(&cells);
        let fastest = bounded((&prefill, &decode, false), &simulation, 7, &workload, &bound, &price, None).unwrap();
        assert_eq!((&ideal, ideal.how()), (&fastest, "simulated"));
        for (mode, how) in [(StepMode::Eager, "simulated"), (StepMode::Graph, "simulated (graph steps)")] {
            let served = point(Some(mode));
            assert_eq!((served.decode_steps, served.how()), (Some(mode), how));
            // The rate the serving plan found and served at: the two figures stand at one rate.
            assert_eq!(served.request_rate_per_s, planned(mode).request_rate_per_s, "{mode:?}");
        }
        // The graph server pays its padded batches and the pool's whole capacity, which the
        // faster mode at each exact shape does not: a figure beside its measurement is not that one.
        let graph = point(Some(StepMode::Graph));
        assert!(
            graph.output_tok_per_s_per_device.get() < ideal.output_tok_per_s_per_device.get(),
            "graph server {graph:?} against the faster mode at each shape {ideal:?}"
        );
    }

    /// A signed result can claim a step of no time (or less): such a cell is no point of a step
    /// table, which the simulation would otherwise divide by.
    #[test]
    fn a_step_of_no_time_is_no_table_point() {
        let mut instant = decode_cell(8, 128, StepMode::Eager, 0.03);
        let zero = Finite::new(0.0, "t").unwrap();
        let step = instant.step_time.as_mut().unwrap();
        (step.median_s, step.min_s, step.p90_s, step.p99_s, step.max_s) = (zero, zero, zero, zero, zero);
        let (_, decode) = step_tables(&[decode_cell(1, 128, StepMode::Eager, 0.02), instant]);
        assert_eq!(decode.max_batch(128, 128), Some(1));
    }

    /// A decode line is read at the length its cells' steps attended: the midpoint of an eager
    /// cell's context and its last step's, a graph cell's whole cache (the median over the
    /// line's cells), or the cell's context where the record says neither.
    #[test]
    fn decode_lines_are_placed_where_their_steps_attended() {
        let with = |mut cell: CellRecord, ctx_end: Option<u32>, attended: Option<u32>| {
            (cell.ctx_end, cell.attended) = (ctx_end, attended);
            cell
        };
        let cells = [
            with(decode_cell(1, 100, StepMode::Eager, 0.010), Some(139), None),
            with(decode_cell(8, 100, StepMode::Graph, 0.020), Some(139), Some(160)),
            with(decode_cell(1, 300, StepMode::Eager, 0.030), None, None),
        ];
        let (_, decode) = step_tables(&cells);
        // The 100-token line is at 119.5 (batch 1) and 160 (batch 8): its median, 139.75.
        let at = |batch, len| decode.lookup(batch, len).unwrap().step_s;
        assert_eq!(at(1, 139.75), 0.010);
        assert!((at(1, 219.875) - 0.020).abs() < 1e-12, "halfway from 139.75 to 300: {}", at(1, 219.875));
        assert_eq!(at(1, 300.0), 0.030);
    }

    /// At each decode shape the faster mode's cell feeds the derived figures, whichever it is;
    /// each shape measured both ways gives its eager/graph ratio; a run without graph cells says
    /// nothing about modes.
    #[test]
    fn the_faster_mode_at_each_shape_is_used_and_named() {
        let attending = |mut cell: CellRecord, kernel| {
            cell.attention = Some(kernel);
            cell
        };
        let cells = [
            attending(decode_cell(1, 128, StepMode::Eager, 0.020), AttentionKernel::Flash),
            attending(decode_cell(1, 128, StepMode::Graph, 0.010), AttentionKernel::Cudnn),
            decode_cell(8, 128, StepMode::Eager, 0.030),
            decode_cell(8, 128, StepMode::Graph, 0.040),
            decode_cell(16, 128, StepMode::Eager, 0.050),
        ];
        let chosen: Vec<(u32, StepMode)> =
            fastest_decode(&cells).iter().map(|c| (c.shape.batch(), c.shape.mode())).collect();
        assert_eq!(chosen, [(1, StepMode::Graph), (8, StepMode::Eager), (16, StepMode::Eager)]);
        let words = decode_modes(&cells, &fastest_decode(&cells)).unwrap();
        assert!(words.ends_with("graph at 1 of 3 decode shapes, eager at 2"), "{words}");
        let pairs = eager_graph(&cells);
        assert_eq!(pairs.len(), 2);
        assert_eq!((pairs[0].batch, pairs[0].eager_over_graph.get()), (1, 2.0));
        assert_eq!(
            (pairs[0].eager_attention, pairs[0].graph_attention),
            (Some(AttentionKernel::Flash), Some(AttentionKernel::Cudnn)),
            "each mode's kernel is carried beside the ratio"
        );
        assert_eq!((pairs[1].eager_attention, pairs[1].graph_attention), (None, None));
        assert!((pairs[1].eager_over_graph.get() - 0.75).abs() < 1e-12);
        let (_, decode) = step_tables(&cells);
        assert_eq!(decode.max_batch(128, 128), Some(16));
        let eager_only = &cells[2..3];
        assert_eq!(decode_modes(eager_only, &fastest_decode(eager_only)), None);
        assert!(eager_graph(eager_only).is_empty());
    }
}
