//! Has warm-up reached equilibrium? Judged on step time and on the device's telemetry.
//!
//! Over the trailing `window_s` seconds of steps (at least [`MIN_WINDOW_STEPS`] steps, reaching
//! further back when steps are slow):
//! - step-time drift: (median of the window's second half − median of its first half) /
//!   first-half median, a robust trend estimate that one slow step cannot move;
//! - step-time spread: interquartile range / median of the whole window;
//! - over the telemetry samples in the same span, where the source has the reading (at least
//!   [`MIN_SIGNAL_SAMPLES`] of them): the same relative drift of the SM (or core) clock and of
//!   power, and the change of temperature in °C between the halves' medians;
//! - hardware slowdown: any clock-event reason that is the device slowing itself
//!   ([`ThrottleReason::is_hardware_slowdown`]) in the window's second half.
//!
//! Equilibrium is reached once warm-up has run `min_s` and every judged figure is within its
//! bound and no slowdown is active; at `max_s` the detector gives up and the result says
//! equilibrium was not reached. A reading the source does not have is not judged, and the
//! window's figures say so (`None`). Thresholds and their sources: docs/EQUILIBRIUM.md.

use crate::stats::{Sorted, StatsError};
use lynx_schema::config::WarmupConfig;
use lynx_schema::equilibrium::WindowStats;
use lynx_schema::result::CellShape;
use lynx_schema::telemetry::{Sample, ThrottleReason};
use std::collections::VecDeque;

/// Fewest steps the window is judged on, so that a slow model still gets a fair test.
pub const MIN_WINDOW_STEPS: usize = 16;
/// Fewest telemetry samples of a reading in the window for its trend to be judged.
pub const MIN_SIGNAL_SAMPLES: usize = 8;

/// The largest batch warm-up decodes at.
pub const WARMUP_MAX_BATCH: u32 = 64;

/// The decode step warm-up loops: the suite's largest decode batch (at most
/// [`WARMUP_MAX_BATCH`]) at its longest context, the heaviest decode step, among those `fits`
/// lets through (the memory planner's verdict on that decode cell): the batch halves, then the
/// next shorter context is tried, so warm-up never loops a step the sweep would skip as not
/// fitting. Where none fits, batch 1 at the shortest context (the runner still halves a batch
/// that runs out of memory).
pub fn warmup_shape(suite: &lynx_schema::config::Suite, fits: impl Fn(CellShape) -> bool) -> (u32, u32) {
    let largest = suite.decode.ladder().batches().into_iter().max().unwrap_or(1).min(WARMUP_MAX_BATCH);
    let mut ctxs = suite.decode.ctxs.clone();
    ctxs.sort_unstable();
    ctxs.dedup();
    for &ctx in ctxs.iter().rev() {
        let mut batch = largest;
        loop {
            if fits(CellShape::decode(batch, ctx)) {
                return (batch, ctx);
            }
            if batch == 1 {
                break;
            }
            batch /= 2;
        }
    }
    (1, ctxs.first().copied().unwrap_or(1))
}

/// What the detector says at one moment.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Keep warming up; the window's figures so far, once there are enough steps.
    Warming(Option<WindowStats>),
    /// Equilibrium reached, with the figures that showed it.
    Reached(WindowStats),
    /// `max_s` passed without equilibrium.
    GaveUp(Option<WindowStats>),
}

/// Collects step times and telemetry samples (times on one clock) and judges them against a
/// [`WarmupConfig`].
#[derive(Debug, Clone)]
pub struct Detector {
    config: WarmupConfig,
    /// When warm-up started, on the clock every time here is given on.
    start_s: f64,
    /// (time at the step's end, step time in seconds), oldest first.
    steps: VecDeque<(f64, f64)>,
    /// The device's telemetry, oldest first.
    samples: VecDeque<Sample>,
}

/// (second-half median − first-half median) and the first-half median of `values` split at
/// `middle_s` (values are (time, value)); `None` below [`MIN_SIGNAL_SAMPLES`] or an empty half.
fn halves(values: &[(f64, f64)], middle_s: f64) -> Option<(f64, f64)> {
    if values.len() < MIN_SIGNAL_SAMPLES {
        return None;
    }
    let first: Vec<f64> = values.iter().filter(|v| v.0 < middle_s).map(|v| v.1).collect();
    let second: Vec<f64> = values.iter().filter(|v| v.0 >= middle_s).map(|v| v.1).collect();
    let first_median = Sorted::new(first).ok()?.median();
    Some((Sorted::new(second).ok()?.median() - first_median, first_median))
}

impl Detector {
    /// A detector for a warm-up that started at `start_s`.
    pub fn new(config: WarmupConfig, start_s: f64) -> Detector {
        Detector { config, start_s, steps: VecDeque::new(), samples: VecDeque::new() }
    }

    /// Record a step that ended at `at_s` and took `step_s` seconds.
    pub fn push(&mut self, at_s: f64, step_s: f64) {
        self.steps.push_back((at_s, step_s));
        let window_start = at_s - self.config.window_s;
        while self.steps.len() > MIN_WINDOW_STEPS && self.steps[1].0 <= window_start {
            self.steps.pop_front();
        }
        let oldest = self.steps.front().map_or(at_s, |s| s.0);
        while self.samples.front().is_some_and(|s| s.t_s < oldest) {
            self.samples.pop_front();
        }
    }

    /// Record a telemetry sample of the device (samples arrive in time order).
    pub fn push_sample(&mut self, sample: Sample) {
        self.samples.push_back(sample);
    }

    /// The window's figures, once it holds enough steps.
    pub fn window(&self) -> Result<Option<WindowStats>, StatsError> {
        if self.steps.len() < MIN_WINDOW_STEPS {
            return Ok(None);
        }
        let times: Vec<f64> = self.steps.iter().map(|&(_, step_s)| step_s).collect();
        let half = times.len() / 2;
        let first_median = Sorted::new(&times[..half])?.median();
        let second_median = Sorted::new(&times[times.len() - half..])?.median();
        let all = Sorted::new(times.as_slice())?;
        let median = all.median();
        let (from_s, to_s) = (self.steps.front().map_or(0.0, |s| s.0), self.steps.back().map_or(0.0, |s| s.0));
        let middle_s = (from_s + to_s) / 2.0;
        let inside: Vec<&Sample> = self.samples.iter().filter(|s| s.t_s >= from_s && s.t_s <= to_s).collect();
        let signal = |get: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, f64)> {
            inside.iter().filter_map(|s| Some((s.t_s, get(s)?))).collect()
        };
        let relative = |values: Vec<(f64, f64)>| halves(&values, middle_s).map(|(change, base)| change / base);
        let mut slowdown: Vec<ThrottleReason> = inside
            .iter()
            .filter(|s| s.t_s >= middle_s)
            .flat_map(|s| s.throttle.iter().copied().filter(|r| r.is_hardware_slowdown()))
            .collect();
        slowdown.sort();
        slowdown.dedup();
        Ok(Some(WindowStats {
            steps: times.len(),
            span_s: to_s - from_s,
            median_step_s: median,
            drift: (second_median - first_median) / first_median,
            spread: (all.quantile(0.75) - all.quantile(0.25)) / median,
            clock_drift: relative(signal(&|s| s.sm_clock_mhz)),
            power_drift: relative(signal(&|s| s.power_w)),
            temperature_change_c: halves(&signal(&|s| s.temperature_c), middle_s).map(|(change, _)| change),
            slowdown,
        }))
    }

    /// Whether window `w`, seen `elapsed_s` into warm-up, meets every criterion (equilibrium is
    /// reached when it does after `min_s`).
    pub fn holds(&self, w: &WindowStats, elapsed_s: f64) -> bool {
        let within = |value: Option<f64>, bound: f64| value.is_none_or(|v| v.abs() <= bound);
        let c = &self.config;
        w.span_s >= c.window_s.min(elapsed_s) * 0.5
            && w.drift.abs() <= c.max_drift
            && w.spread <= c.max_spread
            && within(w.clock_drift, c.max_clock_drift)
            && within(w.power_drift, c.max_power_drift)
            && within(w.temperature_change_c, c.max_temperature_change_c)
            && w.slowdown.is_empty()
    }

    /// The verdict at `now_s` (on the detector's clock).
    pub fn verdict(&self, now_s: f64) -> Result<Verdict, StatsError> {
        let elapsed_s = now_s - self.start_s;
        let window = self.window()?;
        let c = &self.config;
        Ok(match window {
            Some(w) if elapsed_s >= c.min_s && self.holds(&w, elapsed_s) => Verdict::Reached(w),
            window if elapsed_s >= c.max_s => Verdict::GaveUp(window),
            window => Verdict::Warming(window),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Warm-up loops the heaviest decode step the memory planner lets through: the largest
    /// batch (at most 64) at the longest context, halved, then at a shorter context; and batch 1
    /// at the shortest where none fits.
    #[test]
    fn warm_up_loops_the_heaviest_decode_step_that_fits() {
        let suite =
            lynx_schema::config::Suite::from_toml(&crate::catalogue("suites/standard.toml"), "standard").unwrap();
        let batches = suite.decode.ladder().batches();
        let (most_batch, most_ctx) = (*batches.iter().max().unwrap(), *suite.decode.ctxs.iter().max().unwrap());
        assert!(most_batch > WARMUP_MAX_BATCH && suite.decode.ctxs.len() > 1, "{batches:?} {:?}", suite.decode.ctxs);
        assert_eq!(warmup_shape(&suite, |_| true), (WARMUP_MAX_BATCH, most_ctx));
        let least_ctx = *suite.decode.ctxs.iter().min().unwrap();
        assert_eq!(warmup_shape(&suite, |_| false), (1, least_ctx));
        // Room for 8 sequences' worth of the longest context's tokens: batch 8 there.
        let room = |cell: CellShape| u64::from(cell.batch()) * u64::from(cell.length()) <= 8 * u64::from(most_ctx);
        assert_eq!(warmup_shape(&suite, room), (8, most_ctx));
        // Room for less than one sequence of the longest context: the next shorter one.
        let next = *suite.decode.ctxs.iter().filter(|&&c| c < most_ctx).max().unwrap();
        let room = |cell: CellShape| cell.length() <= next;
        assert_eq!(warmup_shape(&suite, room), (WARMUP_MAX_BATCH, next));
    }

    fn config() -> WarmupConfig {
        WarmupConfig { min_s: 5.0, max_s: 20.0, window_s: 2.0, ..WarmupConfig::default() }
    }

    /// Feed back-to-back steps taking `step_s(t)` seconds from `from_s` up to `until_s`.
    fn feed(detector: &mut Detector, from_s: f64, until_s: f64, mut step_s: impl FnMut(f64) -> f64) {
        let mut t = from_s;
        while t < until_s {
            let step = step_s(t);
            t += step;
            detector.push(t, step);
        }
    }

    #[test]
    fn steady_steps_reach_equilibrium_only_after_min_s() {
        let mut d = Detector::new(config(), 0.0);
        feed(&mut d, 0.0, 3.0, |_| 0.01);
        assert!(matches!(d.verdict(3.0).unwrap(), Verdict::Warming(Some(_))));
        feed(&mut d, 3.0, 5.0, |_| 0.01);
        match d.verdict(5.0).unwrap() {
            Verdict::Reached(w) => {
                assert_eq!(w.drift, 0.0);
                assert!(w.span_s > 1.9 && w.span_s <= 2.01, "{w:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_drifting_step_time_is_not_equilibrium() {
        // Step time grows 5% per second, as on a device still heating up and throttling.
        let mut d = Detector::new(config(), 0.0);
        feed(&mut d, 0.0, 10.0, |t| 0.01 * (1.0 + 0.05 * t));
        match d.verdict(10.0).unwrap() {
            Verdict::Warming(Some(w)) => assert!(w.drift > 0.02, "{w:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn noisy_steps_are_not_equilibrium_and_max_s_gives_up() {
        let mut d = Detector::new(config(), 0.0);
        let mut n = 0;
        feed(&mut d, 0.0, 20.0, |_| {
            n += 1;
            if n % 2 == 0 {
                0.01
            } else {
                0.02
            }
        });
        match d.verdict(20.0).unwrap() {
            Verdict::GaveUp(Some(w)) => assert!(w.spread > 0.10, "{w:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn small_noise_around_a_constant_is_equilibrium() {
        // ±3% jitter around 10 ms from a fixed pseudo-random sequence: no trend, small spread.
        let mut d = Detector::new(config(), 0.0);
        let mut state = 7u64;
        feed(&mut d, 0.0, 6.0, |_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let jitter = ((state >> 40) as f64 / (1u64 << 24) as f64 - 0.5) * 0.06;
            0.01 * (1.0 + jitter)
        });
        match d.verdict(6.0).unwrap() {
            Verdict::Reached(w) => assert!(w.spread > 0.0 && w.spread <= 0.10 && w.drift.abs() <= 0.02, "{w:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn slow_steps_keep_the_minimum_window() {
        let mut d = Detector::new(config(), 0.0);
        feed(&mut d, 0.0, 20.0, |_| 1.0);
        assert_eq!(d.window().unwrap().unwrap().steps, MIN_WINDOW_STEPS);
    }

    #[test]
    fn too_few_steps_have_no_window() {
        let mut d = Detector::new(config(), 0.0);
        feed(&mut d, 0.0, 0.05, |_| 0.01);
        assert_eq!(d.verdict(30.0).unwrap(), Verdict::GaveUp(None));
    }

    /// Steady 10 ms steps up to `until_s`, with a telemetry sample every 50 ms from `signal(t)`.
    fn with_telemetry(until_s: f64, signal: impl Fn(f64) -> Sample) -> Detector {
        let mut d = Detector::new(config(), 0.0);
        feed(&mut d, 0.0, until_s, |_| 0.01);
        let mut t = 0.0;
        while t <= until_s {
            d.push_sample(Sample { t_s: t, ..signal(t) });
            t += 0.05;
        }
        d
    }

    #[test]
    fn a_warming_temperature_is_detected_only_after_it_settles() {
        // Temperature climbs 2 °C/s until t = 8 s, then holds: steady steps, steady clocks.
        let temperature = |t: f64| 40.0 + 2.0 * t.min(8.0);
        let signal =
            |t: f64| Sample { temperature_c: Some(temperature(t)), sm_clock_mhz: Some(1980.0), ..Sample::default() };
        let warming = with_telemetry(7.0, signal);
        match warming.verdict(7.0).unwrap() {
            Verdict::Warming(Some(w)) => assert!(w.temperature_change_c.unwrap() > 1.0, "{w:?}"),
            other => panic!("still heating at 7 s: {other:?}"),
        }
        let settled = with_telemetry(11.0, signal);
        match settled.verdict(11.0).unwrap() {
            Verdict::Reached(w) => {
                assert!(w.temperature_change_c.unwrap().abs() < 1e-9 && w.clock_drift == Some(0.0), "{w:?}")
            }
            other => panic!("settled by 11 s: {other:?}"),
        }
    }

    #[test]
    fn a_falling_clock_or_rising_power_is_not_equilibrium() {
        // B200 clocks fall from 1965 MHz under back-to-back kernels (flashinfer-ai/flashinfer#2899).
        let falling = with_telemetry(10.0, |t| Sample { sm_clock_mhz: Some(1965.0 - 40.0 * t), ..Sample::default() });
        assert!(matches!(falling.verdict(10.0).unwrap(), Verdict::Warming(Some(w)) if w.clock_drift.unwrap() < -0.01));
        let rising = with_telemetry(10.0, |t| Sample { power_w: Some(500.0 * (1.0 + 0.2 * t)), ..Sample::default() });
        assert!(matches!(rising.verdict(10.0).unwrap(), Verdict::Warming(Some(w)) if w.power_drift.unwrap() > 0.05));
    }

    #[test]
    fn a_hardware_slowdown_blocks_equilibrium() {
        let throttled = with_telemetry(10.0, |t| Sample {
            sm_clock_mhz: Some(1980.0),
            throttle: if t > 9.5 { vec![ThrottleReason::HwThermalSlowdown] } else { vec![] },
            ..Sample::default()
        });
        match throttled.verdict(10.0).unwrap() {
            Verdict::Warming(Some(w)) => assert_eq!(w.slowdown, [ThrottleReason::HwThermalSlowdown]),
            other => panic!("{other:?}"),
        }
        // Idling is not a slowdown.
        let idle = with_telemetry(10.0, |_| Sample { throttle: vec![ThrottleReason::GpuIdle], ..Sample::default() });
        assert!(matches!(idle.verdict(10.0).unwrap(), Verdict::Reached(_)));
    }

    #[test]
    fn readings_a_source_lacks_are_not_judged() {
        let bare = with_telemetry(10.0, |_| Sample::default());
        match bare.verdict(10.0).unwrap() {
            Verdict::Reached(w) => {
                assert!(w.clock_drift.is_none() && w.power_drift.is_none() && w.temperature_change_c.is_none())
            }
            other => panic!("{other:?}"),
        }
    }
}
