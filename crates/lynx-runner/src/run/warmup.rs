//! Warm-up: the heaviest decode step in a loop until the device reaches equilibrium or the
//! detector gives up.

use super::cell::issued;
use super::{Observer, WarmupProgress};
use crate::telemetry::RunTelemetry;
use crate::RunError;
use lynx_analysis::equilibrium::{Detector, Verdict};
use lynx_analysis::stats::StatsError;
use lynx_models::{KvCache, Model, ModelError};
use lynx_schema::config::{MeasureConfig, Suite};
use lynx_schema::result::{CellShape, CellStatus, PaceRecheck, WarmupRecord};
use lynx_schema::stats::StepAutocorrelation;
use lynx_schema::telemetry::Sample;
use lynx_schema::value::{Finite, Reported};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Decode steps the warm-up runs before returning its KV cache to the starting context.
const WARMUP_CACHE_ROOM: i64 = 64;
/// How often warm-up consults the equilibrium detector and reports progress.
const WARMUP_CHECK_S: f64 = 0.5;

/// The warm-up decode state at `batch` and `ctx`, with its first step run.
fn warmup_state(model: &Model, batch: u32, ctx: u32) -> Result<(KvCache, tch::Tensor), ModelError> {
    let mut cache = KvCache::new(model, i64::from(batch), i64::from(ctx) + WARMUP_CACHE_ROOM)?;
    cache.fill_random(i64::from(ctx))?;
    let tokens = model.random_tokens(i64::from(batch), 1)?;
    let tokens = issued(|| model.decode(&tokens, &mut cache))?.0;
    Ok((cache, tokens))
}

/// Loop the decode step at the suite's largest decode batch (at most
/// [`lynx_analysis::equilibrium::WARMUP_MAX_BATCH`]) and
/// context, the heaviest decode step among those `fits` lets through
/// ([`lynx_analysis::equilibrium::warmup_shape`]), until the detector, fed the step times and the
/// device's telemetry, sees equilibrium or gives up. A batch that runs out of memory all the same
/// is halved until one does not. `None` when `stop` was raised.
pub(super) fn warm_up(
    model: &Model,
    suite: &Suite,
    fits: impl Fn(CellShape) -> bool,
    observer: &mut dyn Observer,
    telemetry: &RunTelemetry,
    stop: &AtomicBool,
) -> Result<Option<WarmupRecord>, RunError> {
    let (mut batch, ctx) = lynx_analysis::equilibrium::warmup_shape(suite, fits);
    let model_error = |source| RunError::Model { context: "warm-up".to_owned(), source };
    let (mut cache, mut tokens) = loop {
        match warmup_state(model, batch, ctx) {
            Ok(state) => break state,
            Err(error)
                if batch > 1 && matches!(CellStatus::from_failure(error.to_string()), CellStatus::Oom { .. }) =>
            {
                batch /= 2;
            }
            Err(error) => return Err(model_error(error)),
        }
    };
    let config = &suite.warmup;
    let start_s = telemetry.now_s();
    let mut detector = Detector::new(config.clone(), start_s);
    let mut samples_seen = 0;
    let mut latest: Option<Sample> = None;
    let mut steps = 0u64;
    // Each step's start (s after warm-up began), time and KV cache length, for its
    // autocorrelation over the second half.
    let mut timeline: Vec<(f64, f64, f64)> = Vec::new();
    let mut next_check_s = 0.0;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        if cache.len() == cache.capacity() {
            cache.truncate(i64::from(ctx));
        }
        let cache_len = cache.len() as f64;
        let step_start = Instant::now();
        tokens = issued(|| model.decode(&tokens, &mut cache)).map_err(model_error)?.0;
        let step_s = step_start.elapsed().as_secs_f64();
        steps += 1;
        let now_s = telemetry.now_s();
        let elapsed_s = now_s - start_s;
        timeline.push((elapsed_s - step_s, step_s, cache_len));
        detector.push(now_s, step_s);
        if elapsed_s < next_check_s && elapsed_s < config.max_s {
            continue;
        }
        next_check_s = elapsed_s + WARMUP_CHECK_S;
        for sample in telemetry.device_samples_from(samples_seen) {
            samples_seen += 1;
            latest = Some(sample.clone());
            detector.push_sample(sample);
        }
        let (reached, window) = match detector.verdict(now_s)? {
            Verdict::Warming(window) => {
                observer.warming(&WarmupProgress {
                    elapsed_s,
                    max_s: config.max_s,
                    holds: window.as_ref().is_some_and(|w| detector.holds(w, elapsed_s)),
                    window: window.as_ref(),
                    latest: latest.as_ref(),
                });
                continue;
            }
            Verdict::Reached(window) => (true, Some(window)),
            Verdict::GaveUp(window) => (false, window),
        };
        return Ok(Some(WarmupRecord {
            duration_s: Finite::new(elapsed_s, "warm-up duration").map_err(StatsError::from)?,
            steps,
            batch,
            ctx,
            equilibrium_reached: reached,
            criteria: config.clone(),
            last_window: window,
            telemetry: Vec::new(),
            segment: None,
            step_autocorrelation: second_half_autocorrelation(&timeline, elapsed_s),
            after_sweep: None,
            link_at_end: None,
        }));
    }
}

/// The warm-up's step timed again once the sweep is done ([`WarmupRecord::after_sweep`]): its
/// batch and context, the cache cycling back to the context every [`WARMUP_CACHE_ROOM`] steps as
/// in the warm-up, for as many steps and seconds as `limits` give a cell. A step that fails
/// (memory the cells left fragmented, say) is the reason it could not be timed, not the run's
/// end: the cells are measured. `None` when `stop` was raised.
pub(super) fn recheck(
    model: &Model,
    warmup: &WarmupRecord,
    limits: &MeasureConfig,
    stop: &AtomicBool,
) -> Option<Reported<PaceRecheck>> {
    let timed = || -> Result<Option<PaceRecheck>, String> {
        let (cache, mut tokens) = warmup_state(model, warmup.batch, warmup.ctx).map_err(|e| e.to_string())?;
        let cache = std::cell::RefCell::new(cache);
        // warmup_state's step took one place of the cache's room.
        let room = (WARMUP_CACHE_ROOM - 1) as u32;
        let back = || {
            cache.borrow_mut().truncate(i64::from(warmup.ctx));
            Ok::<(), ModelError>(())
        };
        let step = || {
            let (next, issue_s) = issued(|| model.decode(&tokens, &mut cache.borrow_mut()))?;
            tokens = next;
            Ok(issue_s)
        };
        let Some(measured) = super::cell::timed_steps(limits, (&|| 0.0, &|| None), stop, (room, back), step)
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let median = lynx_analysis::stats::median(&measured.step_s).map_err(|e| e.to_string())?;
        let equilibrium = warmup.last_window.as_ref().map(|w| w.median_step_s).filter(|m| *m > 0.0);
        Ok(Some(PaceRecheck {
            steps: measured.step_s.len() as u64,
            median_s: Finite::new(median, "re-timed warm-up step").map_err(|e| e.to_string())?,
            ratio: equilibrium.and_then(|m| Finite::new(median / m, "re-timed over equilibrium step").ok()),
        }))
    };
    match timed() {
        Ok(Some(recheck)) => Some(Reported::Known(recheck)),
        Ok(None) => None,
        Err(reason) => Some(not_timed_again(&reason)),
    }
}

/// The record of a warm-up step that failed with `reason` when timed again after the sweep.
pub(super) fn not_timed_again(reason: &str) -> Reported<PaceRecheck> {
    Reported::unavailable(format!("the warm-up step failed when timed again: {reason}"))
}

/// The autocorrelation of the warm-up's steps that started in its second half (the first half
/// is the device warming), each step's time against its KV cache's length.
fn second_half_autocorrelation(timeline: &[(f64, f64, f64)], elapsed_s: f64) -> Option<StepAutocorrelation> {
    let (step_s, lengths): (Vec<f64>, Vec<f64>) =
        timeline.iter().filter(|(start_s, _, _)| *start_s >= elapsed_s / 2.0).map(|&(_, s, len)| (s, len)).unzip();
    lynx_analysis::stats::autocorrelation(&step_s, &lengths)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the steps that started in the second half count, and at least 100 of them.
    #[test]
    fn the_autocorrelation_is_taken_over_the_second_half() {
        let mut rng = lynx_analysis::rng::SplitMix64(5);
        // 400 steps over 10 s: the first half slow and steady (a device warming), the second
        // varying independently.
        let timeline: Vec<(f64, f64, f64)> = (0..400)
            .map(|i| {
                let start_s = f64::from(i) * 0.025;
                let step_s = if i < 200 { 0.05 + 1e-4 * f64::from(i) } else { 0.025 * (1.0 + 0.05 * rng.normal()) };
                (start_s, step_s, f64::from(1024 + i % 64))
            })
            .collect();
        let a = second_half_autocorrelation(&timeline, 10.0).unwrap();
        assert_eq!(a.steps, 200);
        assert!((a.median_s.get() - 0.025).abs() < 0.002 && a.lag_1.get().abs() < 0.2, "{a:?}");
        // Warm-ups that ended where the second half began at step 299 (99 steps in it) and 298.
        assert_eq!(second_half_autocorrelation(&timeline[..398], 2.0 * (299.0 * 0.025)), None, "99 steps");
        assert_eq!(second_half_autocorrelation(&timeline[..398], 2.0 * (298.0 * 0.025)).unwrap().steps, 100);
    }
}
