//! Timing shared by lynx-models' benches.
#![allow(dead_code)] // each bench uses its own part of this module

use std::time::Instant;

/// The median of `times` (the upper of the middle two for an even count).
pub fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// The median seconds of `work` over `rounds`, each round after `before` (not timed).
pub fn timed(rounds: usize, mut before: impl FnMut(), mut work: impl FnMut()) -> f64 {
    median(
        (0..rounds)
            .map(|_| {
                before();
                let start = Instant::now();
                work();
                start.elapsed().as_secs_f64()
            })
            .collect(),
    )
}
