//! Has warm-up reached equilibrium? A first detector on step time alone; the telemetry issue
//! adds clocks, power and temperature to the same test.
//!
//! Over the trailing `window_s` seconds of steps (at least [`MIN_WINDOW_STEPS`] steps, reaching
//! further back when steps are slow), two figures are computed:
//! - drift: (median of the window's second half − median of its first half) / first-half median,
//!   a robust trend estimate that one slow step cannot move;
//! - spread: interquartile range / median of the whole window.
//!
//! Equilibrium is reached once warm-up has run `min_s` and |drift| ≤ `max_drift` and spread ≤
//! `max_spread`; at `max_s` the detector gives up and the result says equilibrium was not reached.

use crate::config::WarmupConfig;
use crate::stats::{quantile_sorted, sorted_finite, StatsError};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Fewest steps the window is judged on, so that a slow model still gets a fair test.
pub const MIN_WINDOW_STEPS: usize = 16;

/// The criteria values over the trailing window at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    /// Steps in the window.
    pub steps: usize,
    /// Seconds the window spans, from its first step's end to its last's.
    pub span_s: f64,
    /// Median step time over the window.
    pub median_step_s: f64,
    /// Relative change of median step time from the first half to the second.
    pub drift: f64,
    /// Interquartile range of step time over the median.
    pub spread: f64,
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

/// Collects (time, step time) pairs and judges them against a [`WarmupConfig`].
#[derive(Debug, Clone)]
pub struct Detector {
    config: WarmupConfig,
    /// (seconds since warm-up start at the step's end, step time in seconds), oldest first.
    steps: VecDeque<(f64, f64)>,
}

impl Detector {
    pub fn new(config: WarmupConfig) -> Detector {
        Detector { config, steps: VecDeque::new() }
    }

    /// Record a step that ended `at_s` seconds into warm-up and took `step_s` seconds.
    pub fn push(&mut self, at_s: f64, step_s: f64) {
        self.steps.push_back((at_s, step_s));
        let window_start = at_s - self.config.window_s;
        while self.steps.len() > MIN_WINDOW_STEPS && self.steps[1].0 <= window_start {
            self.steps.pop_front();
        }
    }

    /// The window's figures, once it holds enough steps.
    pub fn window(&self) -> Result<Option<WindowStats>, StatsError> {
        if self.steps.len() < MIN_WINDOW_STEPS {
            return Ok(None);
        }
        let times: Vec<f64> = self.steps.iter().map(|&(_, step_s)| step_s).collect();
        let half = times.len() / 2;
        let first = sorted_finite(&times[..half])?;
        let second = sorted_finite(&times[times.len() - half..])?;
        let all = sorted_finite(&times)?;
        let first_median = quantile_sorted(&first, 0.5);
        let median = quantile_sorted(&all, 0.5);
        let span_s = self.steps.back().map_or(0.0, |s| s.0) - self.steps.front().map_or(0.0, |s| s.0);
        Ok(Some(WindowStats {
            steps: times.len(),
            span_s,
            median_step_s: median,
            drift: (quantile_sorted(&second, 0.5) - first_median) / first_median,
            spread: (quantile_sorted(&all, 0.75) - quantile_sorted(&all, 0.25)) / median,
        }))
    }

    /// The verdict `elapsed_s` seconds into warm-up.
    pub fn verdict(&self, elapsed_s: f64) -> Result<Verdict, StatsError> {
        let window = self.window()?;
        let settled = |w: &WindowStats| {
            w.span_s >= self.config.window_s.min(elapsed_s) * 0.5
                && w.drift.abs() <= self.config.max_drift
                && w.spread <= self.config.max_spread
        };
        Ok(match window {
            Some(w) if elapsed_s >= self.config.min_s && settled(&w) => Verdict::Reached(w),
            window if elapsed_s >= self.config.max_s => Verdict::GaveUp(window),
            window => Verdict::Warming(window),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> WarmupConfig {
        WarmupConfig { min_s: 5.0, max_s: 20.0, window_s: 2.0, max_drift: 0.02, max_spread: 0.10 }
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
        let mut d = Detector::new(config());
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
        let mut d = Detector::new(config());
        feed(&mut d, 0.0, 10.0, |t| 0.01 * (1.0 + 0.05 * t));
        match d.verdict(10.0).unwrap() {
            Verdict::Warming(Some(w)) => assert!(w.drift > 0.02, "{w:?}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn noisy_steps_are_not_equilibrium_and_max_s_gives_up() {
        let mut d = Detector::new(config());
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
    fn slow_steps_keep_the_minimum_window() {
        let mut d = Detector::new(config());
        feed(&mut d, 0.0, 20.0, |_| 1.0);
        assert_eq!(d.window().unwrap().unwrap().steps, MIN_WINDOW_STEPS);
    }

    #[test]
    fn too_few_steps_have_no_window() {
        let mut d = Detector::new(config());
        feed(&mut d, 0.0, 0.05, |_| 0.01);
        assert_eq!(d.verdict(30.0).unwrap(), Verdict::GaveUp(None));
    }
}
