//! Request lengths drawn from a workload (fixed, or a mix: `lynx_schema::config::Length`), the
//! same seeded sequence for the simulation and the serving loop, and the summary of a drawn
//! sample a result records.

use crate::rng::SplitMix64;
use crate::stats::Sorted;
use lynx_schema::config::{Length, Workload};
use lynx_schema::serving::LengthSample;
use lynx_schema::value::Finite;

/// A request's input and output lengths, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lengths {
    pub isl: u32,
    pub osl: u32,
}

/// `n` requests' lengths from `workload`, seeded by `seed`: a lengths file's pairs are drawn
/// together (a uniform line each), every other length on its own.
pub fn draw(workload: &Workload, seed: u64, n: usize) -> Vec<Lengths> {
    // The lengths have a generator of their own, so that arrivals drawn from `seed` are the same
    // whatever the mix.
    let mut rng = SplitMix64(seed ^ 0x6C65_6E67_7468_7321);
    let pairs = workload.file_pairs();
    (0..n)
        .map(|_| match pairs {
            [] => Lengths { isl: one(&workload.isl, &mut rng), osl: one(&workload.osl, &mut rng) },
            pairs => {
                let [isl, osl] = pairs[rng.between(0, pairs.len() as u64 - 1) as usize];
                Lengths { isl, osl }
            }
        })
        .collect()
}

fn one(length: &Length, rng: &mut SplitMix64) -> u32 {
    match length {
        Length::Fixed(n) => *n,
        Length::RangeRatio { length: hi, .. } => rng.between(u64::from(length.min(&[], 0)), u64::from(*hi)) as u32,
        Length::Uniform { uniform: [lo, hi] } => rng.between(u64::from(*lo), u64::from(*hi)) as u32,
        Length::Lognormal { lognormal } => {
            let drawn = (lognormal.median.ln() + lognormal.sigma * rng.normal()).exp().round();
            drawn.clamp(f64::from(lognormal.min), f64::from(lognormal.max)) as u32
        }
        // A file's pairs are drawn above; a file that was never read gives nothing to draw.
        Length::File { .. } => 0,
    }
}

/// The mean, percentiles and extremes of drawn lengths; `None` for no lengths.
pub fn sample(lengths: impl Iterator<Item = u32>) -> Option<LengthSample> {
    let values: Vec<f64> = lengths.map(f64::from).collect();
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let sorted = Sorted::new(values).ok()?;
    let f = |v: f64| Finite::new(v, "length").ok();
    Some(LengthSample {
        mean: f(mean)?,
        p50: f(sorted.median())?,
        p90: f(sorted.quantile(0.9))?,
        p99: f(sorted.quantile(0.99))?,
        min: sorted.quantile(0.0) as u32,
        max: sorted.quantile(1.0) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::config::Lognormal;

    fn workload(isl: Length, osl: Length) -> Workload {
        Workload { name: "w".to_owned(), isl, osl }
    }

    fn moments(values: &[u32]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
        let var = values.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var)
    }

    /// Each sampler's mean and variance lie within a few standard errors of the distribution's,
    /// and every draw within its range.
    #[test]
    fn each_sampler_draws_its_distributions_moments() {
        let n = 20_000;
        // Uniform integers in [lo, hi]: mean (lo + hi) / 2, variance ((hi − lo + 1)² − 1) / 12.
        let uniform = |lo: u32, hi: u32| (f64::from(lo + hi) / 2.0, (f64::from(hi - lo + 1).powi(2) - 1.0) / 12.0);
        let cases = [
            (Length::Uniform { uniform: [100, 300] }, uniform(100, 300), (100, 300)),
            // InferenceX's 0.8 range ratio of 1024: [820, 1024].
            (Length::RangeRatio { range_ratio: 0.8, length: 1024 }, uniform(820, 1024), (820, 1024)),
        ];
        for (length, (mean, var), (lo, hi)) in cases {
            let drawn: Vec<u32> =
                draw(&workload(length.clone(), Length::Fixed(1)), 3, n).iter().map(|l| l.isl).collect();
            let (m, v) = moments(&drawn);
            assert!((m - mean).abs() < 4.0 * (var / n as f64).sqrt(), "{length}: mean {m} against {mean}");
            assert!((v / var - 1.0).abs() < 0.05, "{length}: variance {v} against {var}");
            assert!(drawn.iter().all(|&l| (lo..=hi).contains(&l)), "{length}");
        }
        // Lognormal, far from its bounds: ln(length) has mean ln(median) and variance sigma².
        let lognormal =
            Length::Lognormal { lognormal: Lognormal { median: 1000.0, sigma: 0.4, min: 1, max: 1_000_000 } };
        let drawn: Vec<f64> =
            draw(&workload(Length::Fixed(1), lognormal), 5, n).iter().map(|l| f64::from(l.osl).ln()).collect();
        let mean = drawn.iter().sum::<f64>() / n as f64;
        let var = drawn.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
        assert!((mean - 1000f64.ln()).abs() < 4.0 * 0.4 / (n as f64).sqrt(), "ln mean {mean}");
        assert!((var.sqrt() / 0.4 - 1.0).abs() < 0.03, "ln sd {}", var.sqrt());
        // Held to its bounds.
        let held = Length::Lognormal { lognormal: Lognormal { median: 100.0, sigma: 2.0, min: 50, max: 150 } };
        assert!(draw(&workload(held, Length::Fixed(1)), 5, 1000).iter().all(|l| (50..=150).contains(&l.isl)));
    }

    /// A file's pairs are drawn whole, each about equally often; fixed lengths never vary; the
    /// same seed draws the same sequence and another seed another.
    #[test]
    fn file_pairs_are_drawn_together_and_seeds_repeat() {
        let file = |pairs| Length::File { file: "l.csv".to_owned(), pairs };
        let w = workload(file(vec![[10, 1], [20, 2], [30, 3]]), file(vec![]));
        let drawn = draw(&w, 1, 30_000);
        for pair in [(10, 1), (20, 2), (30, 3)] {
            let count = drawn.iter().filter(|l| (l.isl, l.osl) == pair).count();
            assert!((count as f64 / 10_000.0 - 1.0).abs() < 0.05, "{pair:?}: {count}");
        }
        assert!(drawn.iter().all(|l| l.osl * 10 == l.isl));
        let fixed = draw(&Workload::fixed("c", 128, 64), 9, 100);
        assert!(fixed.iter().all(|l| *l == Lengths { isl: 128, osl: 64 }));
        let mix = workload(Length::Uniform { uniform: [1, 1000] }, Length::Fixed(1));
        assert_eq!(draw(&mix, 4, 50), draw(&mix, 4, 50));
        assert_ne!(draw(&mix, 4, 50), draw(&mix, 5, 50));
        let summary = sample(draw(&mix, 4, 1000).iter().map(|l| l.isl)).unwrap();
        assert!(summary.min >= 1 && summary.max <= 1000 && summary.p50.get() <= summary.p99.get());
    }
}
