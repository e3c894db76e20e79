//! Telemetry samples and their per-window summaries (DESIGN.md section 5, `telemetry`).
//!
//! A source's samples are points in time on the run's monotonic clock; a window (warm-up, one
//! cell's measurement) is summarised from the samples inside it. Definitions:
//! - achieved rate: samples in the window / window length;
//! - gaps: intervals between consecutive samples (and from the window's edges to the first and
//!   last sample) longer than twice the target period;
//! - coverage: the share of the window not inside a gap;
//! - energy: the difference of the source's cumulative energy counter between the first and last
//!   sample in the window where the source has one, else the trapezoidal integral of power over
//!   the samples, each labelled with its method;
//! - throttle fractions: the share of samples in which each reason was active.

use crate::stats::Sorted;
use lynx_schema::telemetry::{Energy, Sample, Spread, WindowSummary};
use lynx_schema::value::{Finite, NotFinite};
use std::collections::BTreeMap;

/// Summarise `samples` (sorted by time) of `source` over `[start_s, end_s]`, sampled at
/// `target_hz`; an error only if the window's bounds or rate are not finite.
pub fn summarise(
    source: &str,
    samples: &[Sample],
    start_s: f64,
    end_s: f64,
    target_hz: f64,
) -> Result<WindowSummary, NotFinite> {
    let inside: Vec<&Sample> = samples.iter().filter(|s| s.t_s >= start_s && s.t_s <= end_s).collect();
    let length = (end_s - start_s).max(0.0);
    let period = 1.0 / target_hz;
    // Gaps: between the edges and the samples, and between consecutive samples.
    let mut edges: Vec<f64> = Vec::with_capacity(inside.len() + 2);
    edges.push(start_s);
    edges.extend(inside.iter().map(|s| s.t_s));
    edges.push(end_s);
    let (mut gaps, mut uncovered) = (0u64, 0.0);
    for pair in edges.windows(2) {
        let interval = pair[1] - pair[0];
        if interval > 2.0 * period {
            gaps += 1;
            uncovered += interval;
        }
    }
    let finite = |x: f64| Finite::new(x, "telemetry").ok();
    let values = |get: &dyn Fn(&Sample) -> Option<f64>| -> Vec<f64> { inside.iter().filter_map(|s| get(s)).collect() };
    let spread = |v: Vec<f64>| -> Option<Spread> {
        let v = Sorted::new(v).ok()?;
        Some(Spread { min: finite(v.min())?, median: finite(v.median())?, max: finite(v.max())? })
    };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let power = values(&|s| s.power_w);
    let mut throttle = BTreeMap::new();
    for sample in &inside {
        for reason in &sample.throttle {
            *throttle.entry(*reason).or_insert(0u64) += 1;
        }
    }
    Ok(WindowSummary {
        source: source.to_owned(),
        start_s: Finite::new(start_s, "window start")?,
        end_s: Finite::new(end_s, "window end")?,
        samples: inside.len() as u64,
        target_hz: Finite::new(target_hz, "sample rate")?,
        achieved_hz: Finite::new(if length > 0.0 { inside.len() as f64 / length } else { 0.0 }, "achieved rate")?,
        coverage: Finite::new(if length > 0.0 { (1.0 - uncovered / length).clamp(0.0, 1.0) } else { 0.0 }, "coverage")?,
        gaps,
        power_mean_w: mean(&power).and_then(finite),
        power_max_w: power.iter().copied().reduce(f64::max).and_then(finite),
        energy: energy(&inside),
        sm_clock_mhz: spread(values(&|s| s.sm_clock_mhz)),
        mem_clock_mhz: spread(values(&|s| s.mem_clock_mhz)),
        temperature_max_c: values(&|s| s.temperature_c).into_iter().reduce(f64::max).and_then(finite),
        utilisation_mean: mean(&values(&|s| s.utilisation)).and_then(finite),
        throttle: throttle
            .into_iter()
            .filter_map(|(reason, count)| Some((reason, finite(count as f64 / inside.len() as f64)?)))
            .collect(),
    })
}

/// The window's energy: counter difference where the source has a counter, else power
/// integrated by trapezoids.
fn energy(inside: &[&Sample]) -> Option<Energy> {
    let counted: Vec<(f64, f64)> = inside.iter().filter_map(|s| Some((s.t_s, s.energy_j?))).collect();
    if counted.len() >= 2 {
        let joules = counted[counted.len() - 1].1 - counted[0].1;
        return Some(Energy { joules: Finite::new(joules, "energy").ok()?, method: "counter".to_owned() });
    }
    let powered: Vec<(f64, f64)> = inside.iter().filter_map(|s| Some((s.t_s, s.power_w?))).collect();
    if powered.len() < 2 {
        return None;
    }
    let joules: f64 = powered.windows(2).map(|p| (p[1].0 - p[0].0) * (p[1].1 + p[0].1) / 2.0).sum();
    Some(Energy { joules: Finite::new(joules, "energy").ok()?, method: "power integration".to_owned() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::telemetry::ThrottleReason;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Samples every `period` from `from` to `to` inclusive, built by `make`.
    fn series(from: f64, to: f64, period: f64, make: impl Fn(f64) -> Sample) -> Vec<Sample> {
        let n = ((to - from) / period).round() as usize;
        (0..=n).map(|i| make(from + i as f64 * period)).collect()
    }

    #[test]
    fn summaries_match_hand_computed_values() {
        // 10 Hz for 1 s: 11 samples at t = 0.0 … 1.0; power ramps 100 → 200 W; clocks alternate.
        let samples = series(0.0, 1.0, 0.1, |t| Sample {
            t_s: t,
            power_w: Some(100.0 + 100.0 * t),
            sm_clock_mhz: Some(if (t * 10.0).round() as i64 % 2 == 0 { 1980.0 } else { 1755.0 }),
            temperature_c: Some(50.0 + 10.0 * t),
            throttle: if t >= 0.75 { vec![ThrottleReason::SwPowerCap] } else { vec![] },
            ..Sample::default()
        });
        let s = summarise("test", &samples, 0.0, 1.0, 10.0).unwrap();
        assert_eq!(s.samples, 11);
        assert!(close(s.achieved_hz.get(), 11.0));
        assert_eq!(s.gaps, 0);
        assert!(close(s.coverage.get(), 1.0));
        assert!(close(s.power_mean_w.unwrap().get(), 150.0));
        assert!(close(s.power_max_w.unwrap().get(), 200.0));
        // ∫ (100 + 100 t) dt over [0, 1] = 150 J; trapezoids are exact for a line.
        let energy = s.energy.unwrap();
        assert_eq!(energy.method, "power integration");
        assert!(close(energy.joules.get(), 150.0));
        let clock = s.sm_clock_mhz.unwrap();
        assert_eq!((clock.min.get(), clock.median.get(), clock.max.get()), (1755.0, 1980.0, 1980.0));
        assert!(close(s.temperature_max_c.unwrap().get(), 60.0));
        // t = 0.8, 0.9, 1.0 of 11 samples.
        assert!(close(s.throttle[&ThrottleReason::SwPowerCap].get(), 3.0 / 11.0));
        assert!(s.mem_clock_mhz.is_none() && s.utilisation_mean.is_none());
    }

    #[test]
    fn a_counter_gives_the_energy_and_agrees_with_integrated_power() {
        // A constant 250 W with a counter that integrates it: both ways give 250 J per second.
        let samples = series(10.0, 12.0, 0.05, |t| Sample {
            t_s: t,
            power_w: Some(250.0),
            energy_j: Some(1_000.0 + 250.0 * t),
            ..Sample::default()
        });
        let by_counter = summarise("c", &samples, 10.0, 12.0, 20.0).unwrap().energy.unwrap();
        assert_eq!(by_counter.method, "counter");
        assert!(close(by_counter.joules.get(), 500.0));
        let without_counter: Vec<Sample> = samples.iter().map(|s| Sample { energy_j: None, ..s.clone() }).collect();
        let integrated = summarise("c", &without_counter, 10.0, 12.0, 20.0).unwrap().energy.unwrap();
        assert!((integrated.joules.get() - by_counter.joules.get()).abs() < 1e-6);
    }

    #[test]
    fn gaps_reduce_coverage() {
        // 10 Hz over [0, 2] but nothing between 0.5 and 1.5: one 1 s gap, coverage 50%.
        let samples: Vec<Sample> = series(0.0, 2.0, 0.1, |t| Sample { t_s: t, ..Sample::default() })
            .into_iter()
            .filter(|s| s.t_s <= 0.5 + 1e-9 || s.t_s >= 1.5 - 1e-9)
            .collect();
        let s = summarise("g", &samples, 0.0, 2.0, 10.0).unwrap();
        assert_eq!(s.gaps, 1);
        assert!(close(s.coverage.get(), 0.5));
        // No samples at all: the whole window is one gap.
        let empty = summarise("g", &[], 0.0, 2.0, 10.0).unwrap();
        assert!(summarise("g", &[], 0.0, f64::NAN, 10.0).is_err());
        assert_eq!((empty.samples, empty.gaps), (0, 1));
        assert!(close(empty.coverage.get(), 0.0));
        assert!(empty.energy.is_none());
    }
}
