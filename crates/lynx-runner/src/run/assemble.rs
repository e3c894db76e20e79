//! A run's result assembled from its journal, and the cell (or the serving phase's workload) of a
//! worker that died recorded as failed.

use super::{remove, Outcome};
use crate::journal::{read_json, Journal, RunDir};
use crate::store::write_json_atomic;
use crate::unix_now_s;
use crate::RunError;
use lynx_analysis::checks::measurement_checks;
use lynx_analysis::derived::derive;
use lynx_analysis::latency::bounds_for;
use lynx_analysis::roofline::{cell_roofline, roofline_check};
use lynx_analysis::sweep;
use lynx_schema::derived::PriceInputs;
use lynx_schema::result::{CellRecord, CellShape, CellStatus, CheckName, RunResult, RunStatus, WarmupRecord};
use lynx_schema::serving::{Served, ServingRecord};
use lynx_schema::time::rfc3339_utc;
use lynx_schema::value::Reported;
use std::sync::atomic::AtomicBool;

/// Where a worker that died was, now recorded as failed there.
#[derive(Debug, Clone, PartialEq)]
pub enum DiedIn {
    /// A cell, journaled as failed.
    Cell(CellShape),
    /// The serving phase, serving a workload under a bound (named here), recorded as failed.
    Serving(String),
    /// Neither: set-up, warm-up, between cells.
    Elsewhere,
}

/// A worker died (`how`) while working on `run`: the cell it was measuring, if any, is journaled
/// as failed with that reason, so the sweep moves past it; so is the workload and bound it was
/// serving, in the result, so the serving phase moves past it. A worker killed by SIGKILL in a
/// cell is out of memory (which ends its ladder) only with `oom_evidence` (the kernel's OOM
/// killer sends SIGKILL, and counts it); without, it was `killed` from outside, and the ladder
/// goes on.
pub fn record_worker_death(
    run: &RunDir,
    how: &str,
    sigkill: bool,
    oom_evidence: Option<&str>,
) -> Result<DiedIn, RunError> {
    // Killed by SIGKILL: out of memory, or killed from outside lynx (`message` said so).
    let kill = |message: &str| match (sigkill, oom_evidence) {
        (true, Some(evidence)) => Some(CellStatus::Oom { message: format!("{message}: out of memory ({evidence})") }),
        (true, None) => Some(CellStatus::Killed {
            message: format!(
                "{message}, with no out-of-memory kill counted (neither the memory cgroup's nor /proc/vmstat's \
                 oom_kill rose): killed from outside lynx"
            ),
        }),
        (false, _) => None,
    };
    if run.serving_path().exists() {
        return record_serving_death(run, how, kill);
    }
    let Some(shape) = run.current_cell()? else { return Ok(DiedIn::Elsewhere) };
    let (mut journal, cells) = Journal::open(&run.journal_path())?;
    if cells.iter().any(|c| c.shape == shape) {
        // It died after journaling the cell, before clearing the marker: between cells.
        remove(&run.current_path())?;
        return Ok(DiedIn::Elsewhere);
    }
    let message = format!("the worker process died during this cell: {how}");
    let mut cell = CellRecord::failed(shape, message.clone());
    if let Some(status) = kill(&message) {
        cell.status = status;
    }
    journal.append(&cell)?;
    remove(&run.current_path())?;
    Ok(DiedIn::Cell(shape))
}

/// The worker died serving the workload and bound its serving marker names: the result gets
/// the marker's entry as [`place_marker_entry`] places it.
fn record_serving_death(
    run: &RunDir,
    how: &str,
    kill: impl Fn(&str) -> Option<CellStatus>,
) -> Result<DiedIn, RunError> {
    let marker: ServingRecord = read_json(&run.serving_path(), "serving marker")?;
    let Some(served) = marker.served.into_iter().next() else {
        remove(&run.serving_path())?;
        return Ok(DiedIn::Elsewhere);
    };
    let what = format!("serving {} under the {} bound", served.workload, served.bound.name);
    let mut result: RunResult = read_json(&run.result_path(), "result")?;
    let record = result.serving.get_or_insert_with(|| ServingRecord::new(marker.server));
    let why = || {
        let message = format!("the worker process died while serving: {how}");
        kill(&message).and_then(|status| status.message().map(str::to_owned)).unwrap_or(message)
    };
    let placed = place_marker_entry(record, served, why);
    if placed != Placed::AlreadyHeld {
        result.updated_at = rfc3339_utc(unix_now_s());
        write_json_atomic(&run.result_path(), &result)?;
    }
    remove(&run.serving_path())?;
    Ok(if placed == Placed::Failed { DiedIn::Serving(what) } else { DiedIn::Elsewhere })
}

/// Where a dead worker's serving marker entry went ([`place_marker_entry`]).
#[derive(Debug, PartialEq)]
enum Placed {
    /// Recorded as failed: the rate the worker died in is lost, those before it kept.
    Failed,
    /// Recorded as a stop left it, to be gone on with.
    Stopped,
    /// Not recorded: the result holds the entry whole already.
    AlreadyHeld,
}

/// A dead worker's serving marker entry `served` placed in `record`: recorded as failed, with
/// `why` the worker died (the rates the marker holds, served before the one it died in, are
/// kept), in place of the entry a stop cut short where the worker was going on with one; not
/// at all where `record` holds the entry whole (the worker died after saving it, before
/// clearing the marker). An entry that is itself stopped was written as the run stopped: it
/// goes into `record` as it is, for a resume to go on with.
fn place_marker_entry(record: &mut ServingRecord, mut served: Served, why: impl FnOnce() -> String) -> Placed {
    let held = record.served.iter_mut().find(|s| s.is_for(&served.workload.name, &served.bound.name));
    let placed = if served.stopped {
        Placed::Stopped
    } else if held.as_ref().is_some_and(|s| !s.stopped) {
        return Placed::AlreadyHeld;
    } else {
        let why = why();
        match &served.rates {
            Reported::Known(rates) if !rates.is_empty() => served.cut_short = Some(why),
            _ => served.rates = Reported::unavailable(why),
        }
        Placed::Failed
    };
    match held {
        Some(slot) => *slot = served,
        None => record.served.push(served),
    }
    placed
}

/// Assemble the run's result from its journal: every journaled cell, the checks, the derived
/// figures at `price`, and the status (complete when the sweep has no cell left, else partial).
///
/// `stop`, once raised, ends the simulation: latency-bounded figures not yet simulated are
/// recorded as unavailable with that reason, and the rest of the result is assembled as usual.
pub fn assemble(run: &RunDir, price: PriceInputs, stop: Option<&AtomicBool>) -> Result<Outcome, RunError> {
    let path = run.result_path();
    if !path.exists() {
        return Err(RunError::Incomplete(format!(
            "the run in {} stopped before its first result was written (parity or set-up); nothing was measured",
            run.dir.display()
        )));
    }
    let mut result: RunResult = read_json(&path, "result")?;
    let (_, cells) = Journal::open(&run.journal_path())?;
    let bounds = bounds_for(&result.config.suite.bounds, &result.config.model);
    let plan = sweep::plan(&result.config.suite, &bounds, &cells, &sweep::decode_modes(&result.checks));
    let served = super::work::serving_done(&result.config.suite, &bounds, result.serving.as_ref());
    result.status = if plan.next.is_none() && served { RunStatus::Complete } else { RunStatus::Partial };
    result.cells = cells;
    result.checks.retain(|c| matches!(c.name, CheckName::Parity | CheckName::GraphParity));
    let warmups: Vec<&WarmupRecord> = result.warmup.iter().chain(&result.resumed_warmups).collect();
    let device_source = result.telemetry.sources.iter().find(|s| s.name == result.telemetry.device_source);
    let checks = measurement_checks(&warmups, &result.cells, device_source, result.device.board.known());
    result.checks.extend(checks);
    let measure = &result.config.suite.measure;
    let gpu = result.device.device != lynx_schema::device::DeviceName::Cpu;
    let bounds = lynx_analysis::checks::StabilityBounds::of(measure, gpu);
    result.checks.extend(lynx_analysis::checks::stability(&result.cells, &bounds));
    if let Some(ceilings) = &result.roofline {
        for cell in &mut result.cells {
            // A layer subset's figures are full-depth estimates: its work is the full depth's.
            let mut shape = result.config.device_shape().clone();
            if cell.full_depth.is_some() {
                shape.num_layers = result.config.model.num_layers;
                if let (Some(moe), Some(full)) = (&mut shape.moe, &result.config.model.moe) {
                    moe.first_dense_layers = full.first_dense_layers;
                }
            }
            cell.roofline = cell_roofline(&shape, result.config.suite.precision, cell, ceilings);
        }
        result.checks.extend(roofline_check(&result.cells, ceilings));
    }
    if let Some(serving) = &result.serving {
        result.checks.extend(lynx_analysis::serving::checks(serving));
    }
    result.derived = Some(derive(
        &result.config,
        (&result.cells, result.warmup.as_ref()),
        result.serving.as_ref(),
        price,
        plan.lines,
        stop,
    ));
    result.updated_at = rfc3339_utc(unix_now_s());
    write_json_atomic(&path, &result)?;
    Ok(Outcome { result, path })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry of workload `name` holding rates labelled `rates`, stopped or not.
    fn entry(name: &str, rates: &[&str], stopped: bool, cut_short: Option<&str>) -> Served {
        let workload = lynx_schema::config::Workload::fixed(name, 8, 8);
        let bound = lynx_schema::config::LatencyBound {
            name: "loose".to_owned(),
            ttft_p99_s: 4.0,
            tpot_p99_s: 0.5,
            source: None,
        };
        let entry = lynx_schema::serving::served_fixture(&workload, &bound, rates, stopped);
        Served { cut_short: cut_short.map(str::to_owned), ..entry }
    }

    fn labels(served: &Served) -> Vec<&str> {
        served.rates.known().map_or(Vec::new(), |rates| rates.iter().map(|r| r.label.as_str()).collect())
    }

    const DIED: &str = "the worker process died while serving: killed by signal 6";

    #[test]
    fn a_worker_that_dies_in_a_rate_loses_that_rate_alone() {
        let mut record = ServingRecord::new("test");
        record.served.push(entry("other", &["bounded", "over"], false, None));
        let placed = place_marker_entry(&mut record, entry("mix", &["bounded"], false, Some(DIED)), || DIED.to_owned());
        assert_eq!(placed, Placed::Failed);
        assert_eq!(labels(&record.served[1]), ["bounded"]);
        assert_eq!(record.served[1].cut_short.as_deref(), Some(DIED));
        // Dead before its first rate: no rate, and why.
        let placed = place_marker_entry(&mut record, entry("short", &[], false, None), || DIED.to_owned());
        assert_eq!(placed, Placed::Failed);
        assert_eq!(record.served[2].rates, Reported::unavailable(DIED));
    }

    #[test]
    fn a_worker_that_dies_going_on_after_a_stop_replaces_the_stopped_entry() {
        let mut record = ServingRecord::new("test");
        record.served.push(entry("mix", &["bounded"], true, Some("the run was stopped")));
        // The marker holds the rates served before the stop and since.
        let marker = entry("mix", &["bounded", "over"], false, Some(DIED));
        assert_eq!(place_marker_entry(&mut record, marker, || DIED.to_owned()), Placed::Failed);
        assert_eq!(record.served.len(), 1);
        assert!(!record.served[0].stopped);
        assert_eq!(labels(&record.served[0]), ["bounded", "over"]);
        assert_eq!(record.served[0].cut_short.as_deref(), Some(DIED));
    }

    #[test]
    fn a_worker_that_dies_recording_a_stop_leaves_the_entry_to_go_on_with() {
        let stopped = entry("mix", &["bounded"], true, Some("the run was stopped"));
        // Before the result was saved with it, and after.
        for held in [None, Some(stopped.clone())] {
            let mut record = ServingRecord::new("test");
            record.served.extend(held);
            let placed = place_marker_entry(&mut record, stopped.clone(), || unreachable!("no death to say"));
            assert_eq!(placed, Placed::Stopped);
            assert_eq!(record.served, std::slice::from_ref(&stopped));
        }
    }

    #[test]
    fn a_worker_that_dies_after_saving_its_entry_changes_nothing() {
        let whole = entry("mix", &["bounded", "over"], false, None);
        let mut record = ServingRecord::new("test");
        record.served.push(whole.clone());
        let marker = entry("mix", &["bounded", "over"], false, Some(DIED));
        assert_eq!(place_marker_entry(&mut record, marker, || DIED.to_owned()), Placed::AlreadyHeld);
        assert_eq!(record.served, [whole]);
    }
}
