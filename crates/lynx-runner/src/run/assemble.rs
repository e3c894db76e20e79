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
use lynx_schema::serving::ServingRecord;
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

/// The worker died serving the workload and bound its serving marker names: that entry, as the
/// marker prepared it (with the rates served before the one it died in), goes into the result
/// with why it failed (unless the result already holds it: it died after saving, before
/// clearing the marker).
fn record_serving_death(
    run: &RunDir,
    how: &str,
    kill: impl Fn(&str) -> Option<CellStatus>,
) -> Result<DiedIn, RunError> {
    let marker: ServingRecord = read_json(&run.serving_path(), "serving marker")?;
    let Some(mut served) = marker.served.into_iter().next() else {
        remove(&run.serving_path())?;
        return Ok(DiedIn::Elsewhere);
    };
    let what = format!("serving {} under the {} bound", served.workload, served.bound.name);
    let mut result: RunResult = read_json(&run.result_path(), "result")?;
    let record = result.serving.get_or_insert_with(|| ServingRecord::new(marker.server));
    if record.served.iter().any(|s| s.workload.name == served.workload.name && s.bound.name == served.bound.name) {
        remove(&run.serving_path())?;
        return Ok(DiedIn::Elsewhere);
    }
    let message = format!("the worker process died while serving: {how}");
    let why = kill(&message).and_then(|status| status.message().map(str::to_owned)).unwrap_or(message);
    // The rates it had served before are kept (the marker holds them): only the one it was
    // serving is lost.
    match &served.rates {
        Reported::Known(rates) if !rates.is_empty() => served.cut_short = Some(why),
        _ => served.rates = Reported::unavailable(why),
    }
    record.served.push(served);
    result.updated_at = rfc3339_utc(unix_now_s());
    write_json_atomic(&run.result_path(), &result)?;
    remove(&run.serving_path())?;
    Ok(DiedIn::Serving(what))
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
