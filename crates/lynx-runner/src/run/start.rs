//! A new run: its folder and plan, written before anything is measured; and, once it has
//! accepted its inputs, the wall time the rest of it is expected to take.

use super::Plan;
use crate::journal::RunDir;
use crate::store::write_json_atomic;
use crate::unix_now_s;
use crate::RunError;
use lynx_analysis::estimate::{datasheet, wall_time, Planned, Rates};
use lynx_models::Checkpoint;
use lynx_schema::result::{CheckName, ConfigRecord, Reproduces, RunPlan, RunResult, StepMode, WeightsRecord};
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
    };
    write_json_atomic(&run.plan_path(), &record)?;
    Ok(run)
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
    let gpu = crate::devices::torch_device(result.device.device) != tch::Device::Cpu;
    let rates = if gpu {
        let name = result.device.name.known().cloned().unwrap_or_default();
        let sheet = datasheet(&name).ok_or_else(|| format!("lynx has no datasheet for {name:?}"))?;
        Rates::gpu(sheet, result.config.suite.precision)
    } else {
        Rates::cpu()
    };
    estimate_at(result, &rates)
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
    let precision = config.suite.precision;
    let torch = crate::devices::torch_device(result.device.device);
    let free_bytes = match torch {
        tch::Device::Cpu => crate::devices::host_free_memory().known().map(|(free, _)| *free),
        _ => result.device.memory_bytes.known().map(|m| m.saturating_sub(shape.weight_bytes(precision))),
    };
    let modes = if result.checks.iter().any(|c| c.name == CheckName::GraphParity) {
        lynx_analysis::sweep::decode_modes(&result.checks)
    } else if super::graph::Graphs::for_device(torch).available() {
        StepMode::ALL.to_vec()
    } else {
        vec![StepMode::Eager]
    };
    let bounds = lynx_analysis::latency::bounds_for(&config.suite.bounds, &config.model);
    let planned = Planned {
        suite: &config.suite,
        shape,
        model_layers: config.model.num_layers,
        bounds: &bounds,
        modes: &modes,
        free_bytes,
        done: &result.cells,
        burst_probed: result.roofline.is_some(),
    };
    Ok(wall_time(&planned, rates).to_string())
}
