//! Summary statistics of step times.
//!
//! Percentiles use linear interpolation between closest ranks (Hyndman & Fan 1996, definition 7;
//! numpy's and R's default), so p50 of an even-sized sample is the mean of the middle two. The
//! coefficient of variation is the sample standard deviation (n − 1) over the mean, and is
//! undefined for fewer than two samples.

use lynx_schema::stats::{StepAutocorrelation, StepTimeSummary, AUTOCORRELATION_MIN_STEPS};
use lynx_schema::value::{Finite, NotFinite};

/// Why a set of samples has no summary.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("no samples to summarise")]
    Empty,
    #[error(transparent)]
    NotFinite(#[from] NotFinite),
}

/// Finite samples sorted ascending, at least one: the only input the quantiles take, so no
/// caller can hand them unsorted data or pick a middle element by hand.
#[derive(Debug, Clone, PartialEq)]
pub struct Sorted(Vec<f64>);

impl Sorted {
    /// `samples` sorted, refusing an empty set and non-finite values.
    pub fn new(samples: impl Into<Vec<f64>>) -> Result<Sorted, StatsError> {
        let mut samples = samples.into();
        if samples.is_empty() {
            return Err(StatsError::Empty);
        }
        for &sample in &samples {
            Finite::new(sample, "a sample")?;
        }
        samples.sort_by(f64::total_cmp);
        Ok(Sorted(samples))
    }

    /// The `q`-quantile, 0 ≤ q ≤ 1 (clamped): Hyndman & Fan definition 7.
    pub fn quantile(&self, q: f64) -> f64 {
        let rank = q.clamp(0.0, 1.0) * (self.0.len() - 1) as f64;
        let below = rank.floor() as usize;
        let above = rank.ceil() as usize;
        self.0[below] + (self.0[above] - self.0[below]) * (rank - below as f64)
    }

    /// The median: the mean of the middle two of an even-sized sample.
    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The smallest sample.
    pub fn min(&self) -> f64 {
        self.0[0]
    }

    /// The largest sample.
    pub fn max(&self) -> f64 {
        self.0[self.0.len() - 1]
    }

    /// The samples, ascending.
    pub fn as_slice(&self) -> &[f64] {
        &self.0
    }

    /// How many samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: a `Sorted` holds at least one sample.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Median of `samples`.
pub fn median(samples: &[f64]) -> Result<f64, StatsError> {
    Ok(Sorted::new(samples)?.median())
}

/// Coefficient of variation with the sample (n − 1) standard deviation; `None` below two samples.
pub fn coefficient_of_variation(samples: &[f64]) -> Option<f64> {
    if samples.len() < 2 {
        return None;
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(variance.sqrt() / mean)
}

/// Summarise step times in seconds.
pub fn summarise(step_s: &[f64]) -> Result<StepTimeSummary, StatsError> {
    let sorted = Sorted::new(step_s)?;
    let at = |q: f64, what: &str| Finite::new(sorted.quantile(q), what);
    Ok(StepTimeSummary {
        n: sorted.len(),
        median_s: at(0.5, "median step time")?,
        p90_s: at(0.9, "p90 step time")?,
        p99_s: at(0.99, "p99 step time")?,
        min_s: at(0.0, "min step time")?,
        max_s: at(1.0, "max step time")?,
        cv: coefficient_of_variation(sorted.as_slice()).map(|cv| Finite::new(cv, "step time CV")).transpose()?,
    })
}

/// The lag-1 and lag-4 autocorrelation of steps in the order they ran, each taking `lengths`
/// tokens of KV cache, after the least-squares fit over the step index and the cache length is
/// taken away (see [`StepAutocorrelation`]); `None` below [`AUTOCORRELATION_MIN_STEPS`] steps or
/// where nothing is left to correlate. The usual estimator: lagged products over n, over the
/// variance.
pub fn autocorrelation(step_s: &[f64], lengths: &[f64]) -> Option<StepAutocorrelation> {
    let n = step_s.len();
    if n < AUTOCORRELATION_MIN_STEPS || lengths.len() != n || step_s.iter().chain(lengths).any(|x| !x.is_finite()) {
        return None;
    }
    let count = n as f64;
    let centred = |xs: &[f64]| -> Vec<f64> {
        let mean = xs.iter().sum::<f64>() / count;
        xs.iter().map(|x| x - mean).collect()
    };
    let index: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let (y, index, length) = (centred(step_s), centred(&index), centred(lengths));
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    // The normal equations over the two centred regressors; over the index alone where the
    // cache's length is constant or moves with the index.
    let (ii, il, ll) = (dot(&index, &index), dot(&index, &length), dot(&length, &length));
    let (iy, ly) = (dot(&index, &y), dot(&length, &y));
    let det = ii * ll - il * il;
    let (b_index, b_length) = if ll > 0.0 && det > 1e-9 * ii * ll {
        ((ll * iy - il * ly) / det, (ii * ly - il * iy) / det)
    } else {
        (iy / ii, 0.0)
    };
    let residuals: Vec<f64> = (0..n).map(|i| y[i] - b_index * index[i] - b_length * length[i]).collect();
    let variance = dot(&residuals, &residuals) / count;
    let median_s = median(step_s).ok()?;
    // Below rounding of the steps' scale (they are finite): nothing left to correlate.
    if variance <= (median_s.abs() * 1e-12).powi(2) {
        return None;
    }
    let at = |lag: usize| {
        let products: f64 = residuals.windows(lag + 1).map(|w| w[0] * w[lag]).sum();
        Finite::new(products / count / variance, "step time autocorrelation").ok()
    };
    Some(StepAutocorrelation {
        steps: n as u64,
        median_s: Finite::new(median_s, "median step time").ok()?,
        lag_1: at(1)?,
        lag_4: at(4)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn percentiles_match_hand_computed_values() {
        // 1..=10: rank for p90 is 0.9 * 9 = 8.1 → 9 + 0.1 * (10 - 9) = 9.1;
        // p99: rank 8.91 → 9.91; median: rank 4.5 → 5.5.
        let samples: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let s = summarise(&samples).unwrap();
        assert_eq!(s.n, 10);
        assert!(close(s.median_s.get(), 5.5));
        assert!(close(s.p90_s.get(), 9.1));
        assert!(close(s.p99_s.get(), 9.91));
        assert!(close(s.min_s.get(), 1.0));
        assert!(close(s.max_s.get(), 10.0));
    }

    #[test]
    fn cv_matches_hand_computed_value() {
        // mean 5, squared deviations 9+1+1+9 = 20, sample variance 20/3, sd 2.5819889, cv 0.5163978.
        let cv = coefficient_of_variation(&[2.0, 4.0, 6.0, 8.0]).unwrap();
        assert!((cv - 0.516_397_779_494_322).abs() < 1e-12);
        assert_eq!(coefficient_of_variation(&[3.0]), None);
    }

    #[test]
    fn odd_median_is_the_middle_sample() {
        assert!(close(median(&[3.0, 1.0, 2.0]).unwrap(), 2.0));
    }

    /// Regression (issue 14): an even-sized sample's median is the mean of the middle two, not
    /// the upper-middle value `values[len / 2]` that two probes took.
    #[test]
    fn even_median_is_the_mean_of_the_middle_two() {
        assert!(close(median(&[4.0, 1.0, 2.0, 3.0]).unwrap(), 2.5));
        let sorted = Sorted::new(vec![4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(sorted.as_slice(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!((sorted.min(), sorted.max(), sorted.len()), (1.0, 4.0, 4));
    }

    #[test]
    fn one_sample_has_no_spread() {
        let s = summarise(&[0.25]).unwrap();
        assert_eq!(s.cv, None);
        assert!(close(s.p99_s.get(), 0.25));
    }

    /// Steps that vary independently are not alike; steps that drift slowly (an AR(1) process
    /// with coefficient 0.8) are, at 0.8 and 0.8⁴; a warming device's trend and a KV cache
    /// that grows a token a step and is cut back every 64 are taken away first, so that neither
    /// reads as persistence.
    #[test]
    fn autocorrelation_tells_persistent_steps_from_independent_ones_and_ignores_trends() {
        let mut rng = crate::rng::SplitMix64(7);
        let n = 4000;
        let white: Vec<f64> = (0..n).map(|_| 1.0 + 0.05 * rng.normal()).collect();
        let mut level = 0.0;
        let persistent: Vec<f64> = (0..n)
            .map(|_| {
                level = 0.8 * level + 0.6 * rng.normal();
                1.0 + 0.05 * level
            })
            .collect();
        let flat = vec![1024.0; n];
        let sawtooth: Vec<f64> = (0..n).map(|i| 1024.0 + (i % 64) as f64).collect();
        // A trend of 0.4 and a sawtooth of 0.32 against noise of 0.05: left in, each would read
        // as near-perfect persistence.
        let trended: Vec<f64> = white
            .iter()
            .zip(&sawtooth)
            .enumerate()
            .map(|(i, (s, len))| s + 1e-4 * i as f64 + 5e-3 * (len - 1024.0))
            .collect();
        let of = |steps: &[f64], lengths: &[f64]| {
            let a = autocorrelation(steps, lengths).unwrap();
            assert_eq!(a.steps, steps.len() as u64);
            (a.lag_1.get(), a.lag_4.get())
        };
        let (w1, w4) = of(&white, &flat);
        assert!(w1.abs() < 0.05 && w4.abs() < 0.05, "independent: {w1} {w4}");
        let (p1, p4) = of(&persistent, &sawtooth);
        assert!((p1 - 0.8).abs() < 0.05 && (p4 - 0.8f64.powi(4)).abs() < 0.06, "persistent: {p1} {p4}");
        let (t1, t4) = of(&trended, &sawtooth);
        assert!(t1.abs() < 0.05 && t4.abs() < 0.05, "trends taken away: {t1} {t4}");
        let line: Vec<f64> = (0..200).map(|i| 0.01 + 1e-4 * f64::from(i)).collect();
        assert_eq!(autocorrelation(&line, &flat[..200]), None, "steps on a line have nothing to correlate");
        let few = AUTOCORRELATION_MIN_STEPS - 1;
        assert_eq!(autocorrelation(&white[..few], &flat[..few]), None);
        assert_eq!(autocorrelation(&white, &flat[..10]), None, "a length for every step");
    }

    #[test]
    fn empty_and_non_finite_samples_are_errors() {
        assert_eq!(summarise(&[]), Err(StatsError::Empty));
        assert!(matches!(summarise(&[1.0, f64::NAN]), Err(StatsError::NotFinite(_))));
    }
}
