//! `lynx run --plan`: what a run would do on this device, and about how long it would take,
//! with nothing measured and nothing written. The inputs are checked as a run checks them before
//! it measures (the suite and model, the checkpoint, the weights against the device's free
//! memory, some cell fitting beside them), and the sweep is planned as
//! [`lynx_analysis::estimate::wall_time`] plans it for the estimate a run prints as it starts:
//! over step times predicted from the device's datasheet (a CPU's assumed rates), so the cells a
//! run measures may differ where its measured steps cross a bound the predicted ones did not.

use super::start::{planned_wall_time, rates_of, SoFar};
use super::work::Setup;
use super::Plan;
use crate::devices::Device;
use crate::journal::RunDir;
use crate::RunError;
use lynx_analysis::estimate::WallTime;
use lynx_schema::result::{CellRecord, ConfigRecord, DeviceRecord, RunPlan, RunResult};
use lynx_schema::value::Reported;

/// A run planned and not started.
pub struct Forecast {
    pub device: DeviceRecord,
    /// The datasheet a device that is not here was planned from.
    pub planned: Option<&'static lynx_analysis::estimate::Datasheet>,
    pub config: ConfigRecord,
    /// The device's memory free beside the model's weights, and how that was had.
    pub free: Reported<(u64, String)>,
    /// Whether decode graphs would be captured and measured beside eager steps, or why not.
    pub graphs: Reported<bool>,
    /// Cells a resumed run already has.
    pub done: usize,
    /// Whether a resume would measure and serve nothing more (it assembles and signs the result
    /// again).
    pub nothing_left: bool,
    /// Workloads the suite's measured lengths do not cover ([`lynx_analysis::sweep::uncovered`]).
    pub gaps: Vec<lynx_analysis::sweep::LengthGap>,
    /// The planned sweep, serving phase and wall time, or why there is no estimate.
    pub wall_time: Result<WallTime, String>,
    /// The CPUs the run's processes would be bound to (`--cpus`; a resume's, as it started).
    pub cpu_binding: Option<lynx_schema::result::CpuBinding>,
}

/// A new run of `plan`, planned.
pub fn forecast(plan: &Plan) -> Result<Forecast, RunError> {
    let record = RunPlan {
        run_id: String::new(),
        started_at: String::new(),
        started_s: 0,
        suite: plan.suite.clone(),
        model: plan.model.clone(),
        device: plan.device.record.device,
        weights: plan.weights.as_ref().map(|w| w.display().to_string()),
        binary_sha256: Reported::unavailable("a plan runs nothing"),
        reproduces: None,
        cpu_binding: Some(plan.cpus.clone()),
    };
    forecast_of(&record, &plan.device, None, plan.runs_at_once)
}

/// The rest of the run in `run`, planned: its plan as it started, and the cells, checks and
/// probes it has so far.
pub fn forecast_resume(run: &RunDir, device: &Device) -> Result<Forecast, RunError> {
    let plan = run.read_plan()?;
    let earlier = if run.result_path().exists() {
        let mut result: RunResult = crate::journal::read_json(&run.result_path(), "result")?;
        // The journal is the record of the cells.
        result.cells = crate::journal::Journal::read(&run.journal_path())?;
        Some(result)
    } else {
        None
    };
    forecast_of(&plan, device, earlier.as_ref(), 1)
}

/// `runs_at_once`: how many of a node's runs this one would run beside, itself included.
fn forecast_of(
    plan: &RunPlan,
    device: &Device,
    earlier: Option<&RunResult>,
    runs_at_once: u64,
) -> Result<Forecast, RunError> {
    let setup = Setup::new(plan, device)?;
    setup.weights_fit(device, earlier.is_none(), runs_at_once)?;
    let suite = &setup.config.suite;
    // What the cells will find free: beside the weights, which are resident before the first.
    let free = match device.free_memory() {
        Reported::Known((free, source)) if crate::devices::free_memory_is_stated() => {
            Reported::Known((free, source.to_owned()))
        }
        Reported::Known((free, source)) => {
            let weights = setup.shape.weight_bytes(suite.precision);
            Reported::Known((
                free.saturating_sub(weights),
                format!("{source}, less the weights' {}", lynx_analysis::memory::gib(weights)),
            ))
        }
        Reported::Unavailable { unavailable } => Reported::Unavailable { unavailable },
    };
    let cells: &[CellRecord] = earlier.map_or(&[], |r| &r.cells);
    if cells.is_empty() {
        setup.some_cell_fits(device.record.device, free.known().map(|(bytes, source)| (*bytes, source.as_str())))?;
    }
    // A device that is not here is planned as its own host would run it: graphs captured
    // beside eager steps, as wherever libtorch's GPU backend loads.
    let (graphs, capture) = match device.planned {
        Some(_) => (Reported::Known(true), true),
        None => {
            let graphs = super::graph::Graphs::for_device(device.torch);
            (graphs.record(), graphs.available())
        }
    };
    let so_far = SoFar {
        checks: earlier.map_or(&[], |r| &r.checks),
        cells,
        burst_probed: earlier.is_some_and(|r| r.roofline.is_some()),
        native_matmuls: lynx_probes::roofline::sustains_native_matmuls(device.record.device),
        served: earlier.and_then(|r| r.serving.as_ref()),
    };
    // As a worker finds it as it starts.
    let bounds = lynx_analysis::latency::bounds_for(&suite.bounds, &setup.config.model);
    let nothing_left = earlier.is_some_and(|r| super::work::nothing_left(suite, &bounds, cells, r));
    let wall_time = rates_of(&device.record, suite.precision)
        .map(|rates| planned_wall_time(&setup.config, capture, so_far, free.known().map(|(bytes, _)| *bytes), &rates));
    Ok(Forecast {
        device: device.record.clone(),
        planned: device.planned,
        config: setup.config.clone(),
        free,
        graphs,
        done: cells.len(),
        nothing_left,
        gaps: lynx_analysis::sweep::uncovered(suite),
        wall_time,
        cpu_binding: plan.cpu_binding.clone(),
    })
}
