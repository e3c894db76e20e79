//! A new run: its folder and plan, written before anything is measured.

use super::Plan;
use crate::journal::RunDir;
use crate::store::write_json_atomic;
use crate::unix_now_s;
use crate::RunError;
use lynx_models::Checkpoint;
use lynx_schema::result::{ConfigRecord, Reproduces, RunPlan, WeightsRecord};
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
