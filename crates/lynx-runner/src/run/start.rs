//! A new run: its folder and plan, written before anything is measured; and, once it has
//! accepted its inputs, the wall time the rest of it is expected to take.

use super::Plan;
use crate::journal::RunDir;
use crate::store::write_json_atomic;
use crate::unix_now_s;
use crate::RunError;
use lynx_analysis::estimate::{wall_time, Planned, Rates, WallTime};
use lynx_models::Checkpoint;
use lynx_schema::config::Precision;
use lynx_schema::result::{
    CellRecord, Check, CheckName, ConfigRecord, DeviceRecord, Reproduces, RunPlan, RunResult, StepMode, WeightsRecord,
};
use lynx_schema::time::{compact_utc, rfc3339_utc};
use std::hash::{BuildHasher, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

/// Create the run's folder and write its plan: nothing is measured yet. A suite whose scale
/// cannot cut the model, or a checkpoint folder that is not one, is refused first.
pub fn start(plan: &Plan) -> Result<RunDir, RunError> {
    start_plan(plan, None)
}

/// [`start`] for a run that reproduces a published result, which its result will name.
pub fn start_reproduction(plan: &Plan, reproduces: Reproduces) -> Result<RunDir, RunError> {
    start_plan(plan, Some(reproduces))
}

fn start_plan(plan: &Plan, reproduces: Option<Reproduces>) -> Result<RunDir, RunError> {
    ConfigRecord::new(plan.suite.clone(), plan.model.clone(), WeightsRecord::Random { seed: plan.suite.seed })
        .map_err(|e| RunError::Config(format!("suite: {e}")))?;
    if let Some(dir) = &plan.weights {
        Checkpoint::open(dir).map_err(|e| RunError::Weights(e.to_string()))?;
    }
    let started_s = unix_now_s();
    let run_id = format!("{}-{:08x}", compact_utc(started_s), random_u32());
    let run = RunDir::new(&plan.results_dir, &plan.device.slug(), &run_id);
    let record = RunPlan {
        run_id,
        started_at: rfc3339_utc(started_s),
        started_s,
        suite: plan.suite.clone(),
        model: plan.model.clone(),
        device: plan.device.record.device,
        weights: plan.weights.as_ref().map(|w| w.display().to_string()),
        binary_sha256: crate::harness::binary_sha256(),
        reproduces,
        cpu_binding: Some(plan.cpus.clone()),
    };
    write_json_atomic(&run.plan_path(), &record)?;
    Ok(run)
}

/// The `*.safetensors` files of the checkpoint in `dir`, with their sizes in bytes, as a run's
/// result records them (only their headers are read), or why it is not a checkpoint.
pub fn checkpoint_files(dir: &std::path::Path) -> Result<Vec<(String, u64)>, RunError> {
    Ok(Checkpoint::open(dir).map_err(|e| RunError::Weights(e.to_string()))?.files)
}

/// A random suffix for run ids, from the OS-seeded hasher keys std already draws.
fn random_u32() -> u32 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    hasher.finish() as u32
}

/// The wall time the rest of `result`'s run is expected to take (the cells it lacks, with the
/// checks made so far), as one line for the user, or why there is no estimate: from the device's
/// datasheet (a CPU's assumed rates). Nothing is read from the device: a GPU's free memory is
/// taken as its memory less the weights.
pub fn estimate(result: &RunResult) -> Result<String, String> {
    estimate_at(result, &rates_of(&result.device, result.config.suite.precision)?)
}

/// The rates a step on `device` at `precision` is predicted from before anything is measured:
/// a GPU's datasheet (or why lynx has none), a CPU's assumed rates.
pub(super) fn rates_of(device: &DeviceRecord, precision: Precision) -> Result<Rates, String> {
    if crate::devices::torch_device(device.device) == tch::Device::Cpu {
        return Ok(Rates::cpu());
    }
    let sheet = crate::devices::datasheet_of(device)
        .ok_or_else(|| format!("lynx has no datasheet for {:?}", device.name.known().cloned().unwrap_or_default()))?;
    Ok(Rates::gpu(sheet, precision))
}

/// [`estimate`] made again from the ceilings `result`'s burst probes measured, once they have
/// run: for every device, a datasheet lynx lacks included.
pub fn estimate_from_ceilings(result: &RunResult) -> Result<String, String> {
    let gpu = crate::devices::torch_device(result.device.device) != tch::Device::Cpu;
    let ceilings = result.roofline.as_ref().ok_or("the roofline probes have not run")?;
    estimate_at(result, &Rates::measured(ceilings, result.config.suite.precision, gpu)?)
}

/// The wall time the rest of `result`'s run is expected to take at `rates`.
fn estimate_at(result: &RunResult, rates: &Rates) -> Result<String, String> {
    let config = &result.config;
    let shape = config.device_shape();
    let free_bytes = match crate::devices::torch_device(result.device.device) {
        tch::Device::Cpu => crate::devices::host_free_memory().known().map(|(free, _)| *free),
        _ => result.device.memory_bytes.known().map(|m| m.saturating_sub(shape.weight_bytes(config.suite.precision))),
    };
    let so_far = SoFar {
        checks: &result.checks,
        cells: &result.cells,
        burst_probed: result.roofline.is_some(),
        native_matmuls: lynx_probes::roofline::sustains_native_matmuls(result.device.device),
        served: result.serving.as_ref(),
    };
    let graphs = super::graph::Graphs::for_device(crate::devices::torch_device(result.device.device)).available();
    Ok(planned_wall_time(config, graphs, so_far, free_bytes, rates).to_string())
}

/// What a run has done so far, for the wall time of the rest of it.
#[derive(Clone, Copy)]
pub(super) struct SoFar<'a> {
    pub checks: &'a [Check],
    pub cells: &'a [CellRecord],
    /// Whether the burst roofline probes have run.
    pub burst_probed: bool,
    /// Whether the device runs cuBLASLt's matmul probes beside libtorch's (an NVIDIA GPU).
    pub native_matmuls: bool,
    /// What its serving phase has recorded.
    pub served: Option<&'a lynx_schema::serving::ServingRecord>,
}

/// The wall time the rest of a run of `config` is expected to take at `rates`, with
/// `free_bytes` free beside the weights where known: its decode modes those its graph parity
/// check allowed, or (before the check) graphs beside eager steps where `graphs` (the device's
/// process can capture them).
pub(super) fn planned_wall_time(
    config: &ConfigRecord,
    graphs: bool,
    so_far: SoFar,
    free_bytes: Option<u64>,
    rates: &Rates,
) -> WallTime {
    let modes = if so_far.checks.iter().any(|c| c.name == CheckName::GraphParity) {
        lynx_analysis::sweep::decode_modes(so_far.checks)
    } else if graphs {
        StepMode::ALL.to_vec()
    } else {
        vec![StepMode::Eager]
    };
    let bounds = lynx_analysis::latency::bounds_for(&config.suite.bounds, &config.model);
    let planned = Planned {
        suite: &config.suite,
        shape: config.device_shape(),
        model_layers: config.model.num_layers,
        bounds: &bounds,
        modes: &modes,
        free_bytes,
        done: so_far.cells,
        burst_probed: so_far.burst_probed,
        native_matmuls: so_far.native_matmuls,
        served: so_far.served,
    };
    wall_time(&planned, rates)
}
