//! Latency-bounded throughput: a seeded discrete-event simulation of a continuous-batching server
//! driven by the device's measured step-time tables (docs/SWEEPS.md has the method).
//!
//! Requests arrive as a Poisson process. Whole-prompt prefill (the default) admits waiting
//! requests into free batch slots in a prefill step of its own, which pauses decode; chunked
//! prefill instead adds up to `chunk` prompt tokens to each decode step. Every running sequence
//! gains one token per decode step. Step times come from the measured tables, interpolated
//! linearly over batch and length; nothing here is assumed about the device.

use crate::lengths::Lengths;
use crate::rng::SplitMix64;
use crate::stats::Sorted;
use lynx_schema::config::LatencyBound;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};

/// One measured step: `batch` sequences at length `len` (prompt length for prefill, context
/// for decode) took `step_s` (the median), at `power_w` where it was measured; `spread` is how
/// its steps varied, where known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TablePoint {
    pub batch: u32,
    pub len: u32,
    pub step_s: f64,
    pub power_w: Option<f64>,
    pub spread: Option<Spread>,
}

/// How a cell's step times varied, relative to its median: its fastest, 90th and 99th
/// percentile and slowest step over the median. The simulation draws each step's time from the
/// distribution these quantiles describe (linear between them), so that its queues see the
/// variation the device showed: a server's p99 latencies depend on it, not on the median alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Step time / median at cumulative probabilities 0, 0.5, 0.9, 0.99 and 1.
    factors: [f64; 5],
    /// The mean and standard deviation of the factor.
    mean: f64,
    sd: f64,
}

const SPREAD_PROBABILITIES: [f64; 5] = [0.0, 0.5, 0.9, 0.99, 1.0];

impl Spread {
    /// From a cell's min, p90, p99 and max over its median; `None` unless they are ordered and
    /// finite.
    pub fn new(min: f64, p90: f64, p99: f64, max: f64) -> Option<Spread> {
        let factors = [min, 1.0, p90, p99, max];
        let ordered = factors.windows(2).all(|w| w[0] <= w[1]) && factors.iter().all(|f| f.is_finite() && *f > 0.0);
        if !ordered {
            return None;
        }
        // Moments of the piecewise-linear quantile function, by the midpoint rule.
        let n = 10_000;
        let draws: Vec<f64> = (0..n).map(|i| quantile(&factors, (f64::from(i) + 0.5) / f64::from(n))).collect();
        let mean = draws.iter().sum::<f64>() / f64::from(n);
        let sd = (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / f64::from(n)).sqrt();
        Some(Spread { factors, mean, sd })
    }

    /// The 90th percentile step over the median.
    pub fn p90(&self) -> f64 {
        self.factors[2]
    }

    /// The factor of `steps` steps together (their total over one median): one draw for a single
    /// step, else the sum's normal approximation, held between the fastest and slowest.
    fn draw(&self, steps: u64, rng: &mut SplitMix64) -> f64 {
        if steps == 1 {
            return quantile(&self.factors, rng.unit());
        }
        let g = steps as f64;
        (g * self.mean + g.sqrt() * self.sd * rng.normal()).clamp(g * self.factors[0], g * self.factors[4])
    }
}

/// How long the device stays slow or fast: step times drawn independently of each other make a
/// request's latency, a sum of many steps, vary far less than it does where the device runs slow
/// or fast for stretches (on a shared CPU host, consecutive steps' times correlate at 0.4–0.75,
/// and the means of 15 steps vary 3–8 times as much as independent steps' would:
/// docs/SWEEPS.md, "Persistence"). It is measured over the warm-up's long run of identical
/// steps (`WarmupRecord::step_autocorrelation`) and carried by the decode step table. Each
/// step's time is drawn as the quantile of `√share · level + √(1 − share) · noise` (a Gaussian
/// copula, so that a single step still follows its cell's measured distribution), where
/// `level`, shared by every step whatever its shape, drifts in time as an Ornstein–Uhlenbeck
/// process that forgets with the time constant `time_s`, idle time included; `noise` is new for
/// every step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Persistence {
    /// The share of a step's variation that persists from step to step.
    pub share: f64,
    /// The time over which the persistent part decays to 1/e, in seconds.
    pub time_s: f64,
}

impl Persistence {
    /// From autocorrelations at lags 1 and 4 of steps of `step_s` seconds, fitted to
    /// `share · ρ^lag` (ρ the correlation of the level from one step to the next, at most 0.999);
    /// where the lag-4 correlation is not positive, or the fit would need a share above one, the
    /// level is all of the variation (share 1, ρ the lag-1 correlation). `None` where consecutive
    /// steps are not positively correlated, or where the time constant would not be a finite
    /// number of seconds.
    pub fn fit(lag_1: f64, lag_4: f64, step_s: f64) -> Option<Persistence> {
        if !(lag_1 > 0.0 && lag_1 <= 1.0 && step_s > 0.0 && step_s.is_finite()) {
            return None;
        }
        let mut rho = if lag_4 > 0.0 { (lag_4 / lag_1).powf(1.0 / 3.0).min(0.999) } else { lag_1 };
        let mut share = lag_1 / rho;
        if share > 1.0 {
            (share, rho) = (1.0, lag_1.min(0.999));
        }
        let time_s = -step_s / rho.ln();
        (time_s.is_finite() && time_s > 0.0).then_some(Persistence { share, time_s })
    }
}

/// The standard normal distribution function (Abramowitz and Stegun 7.1.26 for erf, within
/// 1.5e-7: step-time factors come from quantiles known to a few percent).
fn normal_cdf(x: f64) -> f64 {
    let z = x.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-z * z).exp();
    if x >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// Over a group of g steps whose level follows AR(1) with coefficient a = 1 − b, with
/// c_i = 1 + a + … + a^i and d_i = a^i for i < g: the level's sum over the group is z₀·a·c_(g−1)
/// plus noise of variance (1 − a²)·Σc², its end a^g·z₀ plus noise of variance 1 − a^(2g), the two
/// noises' covariance (1 − a²)·Σc·d. These are c_(g−1), a^g, Σc² and Σc·d.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LevelSums {
    c: f64,
    d: f64,
    cc: f64,
    cd: f64,
}

impl LevelSums {
    /// Term by term, or in closed form (for long groups: exact, and free of cancellation where
    /// g·b is not small).
    fn of(a: f64, b: f64, steps: u64, closed: bool) -> LevelSums {
        if closed {
            let g = steps as f64;
            let ag = (g * (-b).ln_1p()).exp();
            let one_minus_a2 = b * (2.0 - b);
            let sum_a = a * (1.0 - ag) / b;
            let sum_a2 = a * a * (1.0 - ag * ag) / one_minus_a2;
            let cd = ((1.0 - ag) / b - a * (1.0 - ag * ag) / one_minus_a2) / b;
            return LevelSums { c: (1.0 - ag) / b, d: ag, cc: (g - 2.0 * sum_a + sum_a2) / (b * b), cd };
        }
        let (mut c, mut d, mut cc, mut cd) = (0.0, 1.0, 0.0, 0.0);
        for _ in 0..steps {
            c = 1.0 + a * c;
            cc += c * c;
            cd += c * d;
            d *= a;
        }
        LevelSums { c, d, cc, cd }
    }
}

/// The longest group of steps [`Level::draw`] draws one step at a time. With a level that
/// persists, a group's total keeps the skew of its steps' distribution (a slow stretch makes
/// every step slow), which a normal approximation loses: measured against step-by-step draws it
/// undercounted the variance of 15-step groups by 12%, its lower tail cut off at the fastest
/// step. Over longer groups the steps' own noise averages out and the approximation holds.
const STEP_BY_STEP: u64 = 256;

/// The persistent level of [`Persistence`], and when it was last drawn.
struct Level {
    persistence: Persistence,
    z: f64,
    at_s: f64,
}

impl Level {
    /// The level at `t_s`: decayed from the last draw, with fresh variation for the time between.
    fn advance_to(&mut self, t_s: f64, rng: &mut SplitMix64) {
        let gap = t_s - self.at_s;
        if gap > 0.0 {
            let a = (-gap / self.persistence.time_s).exp();
            self.z = a * self.z + (-(-2.0 * gap / self.persistence.time_s).exp_m1()).sqrt() * rng.normal();
            self.at_s = t_s;
        }
    }

    /// The factor of `steps` steps of `step_s` seconds each together, starting at the level's
    /// time (see [`Spread::draw`] for independent steps): up to [`STEP_BY_STEP`] steps, each the
    /// quantile of its copula draw; a longer group, the sum's normal approximation, its
    /// persistent part the exact sum of the level over the group's steps given where it started
    /// (an AR(1) sequence with the step's coefficient). The level moves on to the group's end
    /// (the caller says when that was).
    fn draw(&mut self, spread: &Spread, step_s: f64, steps: u64, rng: &mut SplitMix64) -> f64 {
        let Persistence { share, time_s } = self.persistence;
        // The level's coefficient from one step to the next, a = 1 − b.
        let b = -(-step_s / time_s).exp_m1();
        let (a, one_minus_a2) = (1.0 - b, b * (2.0 - b));
        if steps <= STEP_BY_STEP {
            let mut total = 0.0;
            for _ in 0..steps {
                self.z = a * self.z + one_minus_a2.sqrt() * rng.normal();
                let x = share.sqrt() * self.z + (1.0 - share).sqrt() * rng.normal();
                total += quantile(&spread.factors, normal_cdf(x));
            }
            return total;
        }
        let g = steps as f64;
        let closed = steps > 1024 && g * b >= 1e-2;
        let LevelSums { c, d, cc, cd } = LevelSums::of(a, b, steps, closed);
        // Draw the level's end, then its sum given the end.
        let (var_sum, covariance) = (one_minus_a2 * cc, one_minus_a2 * cd);
        let var_end = -(2.0 * g * (-b).ln_1p()).exp_m1();
        let start = self.z;
        let end_noise = var_end.sqrt() * rng.normal();
        let (sum_given_end, var_left) = if var_end > 0.0 {
            (covariance / var_end * end_noise, var_sum - covariance * covariance / var_end)
        } else {
            (0.0, var_sum)
        };
        let level_sum = start * a * c + sum_given_end + var_left.max(0.0).sqrt() * rng.normal();
        self.z = d * start + end_noise;
        let total =
            g * spread.mean + spread.sd * (share.sqrt() * level_sum + ((1.0 - share) * g).sqrt() * rng.normal());
        total.clamp(g * spread.factors[0], g * spread.factors[4])
    }
}

/// The piecewise-linear quantile function through `factors` at [`SPREAD_PROBABILITIES`].
fn quantile(factors: &[f64; 5], p: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    let i = SPREAD_PROBABILITIES.windows(2).position(|w| p <= w[1]).unwrap_or(3);
    let (p0, p1) = (SPREAD_PROBABILITIES[i], SPREAD_PROBABILITIES[i + 1]);
    factors[i] + (p - p0) / (p1 - p0) * (factors[i + 1] - factors[i])
}

/// A step time looked up in a table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lookup {
    pub step_s: f64,
    pub power_w: Option<f64>,
    /// The length lay beyond the measured ones and was extrapolated.
    pub extrapolated: bool,
    /// How steps near this shape varied (the nearest measured point's at or below it).
    pub spread: Option<Spread>,
}

/// Step times over batch and length, from measured points, and how the device's step times
/// persisted where that was measured.
#[derive(Debug, Clone, Default)]
pub struct StepTable {
    /// Lines of points of equal length, ascending by where they are placed.
    lines: Vec<Line>,
    persistence: Option<Persistence>,
    /// Where given, each step is timed at its median here times the serving loop's pace at the
    /// moment it starts ([`StepTable::replayed`]), drawing nothing.
    replay: Option<Replay>,
}

/// The serving loop's steps of one kind in the order they ran: when each started (seconds on the
/// arrivals' clock, which the simulation shares) and its measured time over the step table's at
/// its shape. A simulation replaying them times a step starting at `t` at its table time times
/// the ratio of the loop's last step of that kind to start at or before `t` (the first's before
/// any): the host's pace as it moved through the window, in the order it moved, which the
/// steps' distribution alone ([`crate::serving::fed`]) does not carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Replay {
    starts_s: Vec<f64>,
    ratios: Vec<f64>,
}

impl Replay {
    /// From (start, measured / table time) pairs in any order; pairs that are not finite, or
    /// whose ratio is not above zero, are left out. `None` where none is left.
    pub fn new(steps: impl IntoIterator<Item = (f64, f64)>) -> Option<Replay> {
        let mut steps: Vec<(f64, f64)> =
            steps.into_iter().filter(|(start, ratio)| start.is_finite() && ratio.is_finite() && *ratio > 0.0).collect();
        if steps.is_empty() {
            return None;
        }
        steps.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(Replay { starts_s: steps.iter().map(|s| s.0).collect(), ratios: steps.iter().map(|s| s.1).collect() })
    }

    /// The fastest of the loop's paces.
    pub fn fastest(&self) -> f64 {
        self.ratios.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// The slowest of the loop's paces.
    pub fn slowest(&self) -> f64 {
        self.ratios.iter().copied().fold(0.0, f64::max)
    }

    /// The loop's pace at `t`: the ratio of its last step to start at or before `t`, or its
    /// first step's before any.
    pub fn ratio_at(&self, t: f64) -> f64 {
        let after = self.starts_s.partition_point(|&start| start <= t);
        self.ratios[after.saturating_sub(1)]
    }
}

/// The points measured at one length, ascending by batch, and the length the table places them
/// at: their own, or the length their steps attended ([`StepTable::placed`]).
#[derive(Debug, Clone)]
struct Line {
    len: u32,
    at: f64,
    points: Vec<TablePoint>,
}

impl StepTable {
    pub fn new(points: &[TablePoint]) -> StepTable {
        let mut lines: Vec<Line> = Vec::new();
        for point in points {
            match lines.iter_mut().find(|line| line.len == point.len) {
                Some(line) => line.points.push(*point),
                None => lines.push(Line { len: point.len, at: f64::from(point.len), points: vec![*point] }),
            }
        }
        lines.sort_by_key(|line| line.len);
        for line in &mut lines {
            line.points.sort_by_key(|p| p.batch);
        }
        StepTable { lines, persistence: None, replay: None }
    }

    /// The same table with each line of length `len` placed at `attended(len)` where that is a
    /// length at least `len` (else at `len`): the length its steps attended on average. A decode
    /// cell's steps grow their context from the cell's as they go, and a graph step attends its
    /// whole cache, so a cell labelled 1024 may have timed steps over 1024–1200 keys; lookups
    /// between and beyond lines then go by what was timed.
    pub fn placed(mut self, attended: impl Fn(u32) -> Option<f64>) -> StepTable {
        for line in &mut self.lines {
            if let Some(at) = attended(line.len).filter(|at| at.is_finite() && *at >= f64::from(line.len)) {
                line.at = at;
            }
        }
        self.lines.sort_by(|a, b| a.at.total_cmp(&b.at));
        self
    }

    /// The same table, its steps drawn with `persistence` (the simulation reads the decode
    /// table's).
    pub fn with_persistence(self, persistence: Option<Persistence>) -> StepTable {
        StepTable { persistence, ..self }
    }

    /// The same table, its steps timed by `replay` (where given) in place of drawn: each its
    /// median times the loop's pace when it starts.
    pub fn replayed(self, replay: Option<Replay>) -> StepTable {
        StepTable { replay, ..self }
    }

    /// The same table with the points of each batch re-timed by `at(batch)`: their step time
    /// multiplied by its factor and, where it gives one, their spread replaced (their power as it
    /// was): the device at another pace, or varying otherwise, than its cells measured.
    pub fn retimed(&self, at: impl Fn(u32) -> (f64, Option<Spread>)) -> StepTable {
        let mut table = self.clone();
        for point in table.lines.iter_mut().flat_map(|line| line.points.iter_mut()) {
            let (factor, spread) = at(point.batch);
            point.step_s *= factor;
            if spread.is_some() {
                point.spread = spread;
            }
        }
        table
    }

    /// The batches measured on any line, ascending.
    pub fn batches(&self) -> Vec<u32> {
        let mut batches: Vec<u32> = self.lines.iter().flat_map(|line| line.points.iter().map(|p| p.batch)).collect();
        batches.sort_unstable();
        batches.dedup();
        batches
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The largest batch measured on every line placed in `[from, to]`, and on the nearest line
    /// beyond each end (the lines an interpolation over that range reads).
    pub fn max_batch(&self, from: u32, to: u32) -> Option<u32> {
        let (from, to) = (f64::from(from), f64::from(to));
        let below = self.lines.iter().rposition(|line| line.at <= from).unwrap_or(0);
        let above = self.lines.iter().position(|line| line.at >= to).unwrap_or(self.lines.len().saturating_sub(1));
        self.lines.get(below..=above)?.iter().map(|line| line.points.last().map_or(0, |p| p.batch)).min()
    }

    /// The step time of `batch` at `len`. Within a line, linear between the measured batches
    /// (a batch below the smallest takes the smallest's time; above the largest, `None`). Across
    /// lines, linear between the two lines placed around `len`; below the shortest line its
    /// time, above the longest a straight line through the two longest (flagged as
    /// extrapolated).
    pub fn lookup(&self, batch: u32, len: f64) -> Option<Lookup> {
        let lines: Vec<(f64, Lookup)> =
            self.lines.iter().filter_map(|line| Some((line.at, along_batch(&line.points, batch)?))).collect();
        let (first, last) = (lines.first()?, lines.last()?);
        if len <= first.0 {
            return Some(first.1);
        }
        let (a, b, extrapolated) = match lines.windows(2).find(|w| len <= w[1].0) {
            Some(w) => (w[0], w[1], false),
            None if lines.len() >= 2 => (lines[lines.len() - 2], *last, true),
            None => return Some(Lookup { extrapolated: true, ..last.1 }),
        };
        // Two lines placed at one length (each at what its steps attended) give the longer's time.
        let f = if b.0 > a.0 { (len - a.0) / (b.0 - a.0) } else { 1.0 };
        Some(Lookup {
            step_s: (a.1.step_s + f * (b.1.step_s - a.1.step_s)).max(a.1.step_s.min(b.1.step_s)),
            power_w: match (a.1.power_w, b.1.power_w) {
                (Some(pa), Some(pb)) => Some((pa + f * (pb - pa)).max(0.0)),
                _ => None,
            },
            extrapolated,
            spread: if f < 0.5 { a.1.spread } else { b.1.spread },
        })
    }
}

fn along_batch(line: &[TablePoint], batch: u32) -> Option<Lookup> {
    let first = line.first()?;
    let at = |p: &TablePoint| Lookup { step_s: p.step_s, power_w: p.power_w, extrapolated: false, spread: p.spread };
    if batch <= first.batch {
        return Some(at(first));
    }
    let w = line.windows(2).find(|w| batch <= w[1].batch)?;
    let f = f64::from(batch - w[0].batch) / f64::from(w[1].batch - w[0].batch);
    Some(Lookup {
        step_s: w[0].step_s + f * (w[1].step_s - w[0].step_s),
        power_w: match (w[0].power_w, w[1].power_w) {
            (Some(a), Some(b)) => Some(a + f * (b - a)),
            _ => None,
        },
        extrapolated: false,
        spread: if f < 0.5 { w[0].spread } else { w[1].spread },
    })
}

/// The powers of two below `cap`, then `cap`: the batch caps the latency-bounded search tries,
/// and the batches a graph server captures its decode step at.
pub fn ladder_to(cap: u32) -> Vec<u32> {
    let mut batches: Vec<u32> =
        std::iter::successors(Some(1u32), |b| b.checked_mul(2)).take_while(|&b| b < cap).collect();
    batches.push(cap);
    batches
}

/// What is simulated: the server lynx's serving phase runs (docs/SWEEPS.md, "Serving").
#[derive(Debug, Clone)]
pub struct SimSetup<'a> {
    pub prefill: &'a StepTable,
    pub decode: &'a StepTable,
    /// Each request's input and output lengths, in arrival order.
    pub lengths: &'a [Lengths],
    /// Most sequences in the server at once (decoding, or prefilling with chunked prefill).
    pub max_batch: u32,
    /// Most prompts one whole-prompt prefill step takes.
    pub max_prefill_batch: u32,
    /// Chunked prefill: prompt tokens added to each decode step.
    pub chunk: Option<u32>,
    /// Decode steps replayed as graphs, as the serving loop runs them where the run's graph
    /// steps passed their check: captured at the batches [`ladder_to`] the cap gives, each over
    /// the pool's whole capacity, so a step of `b` sequences is charged at the smallest captured
    /// batch of at least `b` and the longest request's prompt and output (the work it does).
    pub graph_steps: bool,
    pub seed: u64,
    /// Which draw of the steps' variation: 0 is the simulation's own, and each other number
    /// another over the same requests and arrivals ([`replicated`]).
    pub draw: u64,
    /// Raised by a stop signal: the simulation ends at its next iteration with
    /// [`SimError::Stopped`].
    pub stop: Option<&'a AtomicBool>,
}

/// What one simulated load gave.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOutcome {
    /// Requests per second offered.
    pub rate_per_s: f64,
    pub ttft_p50_s: f64,
    pub ttft_p99_s: f64,
    pub tpot_p99_s: f64,
    pub tpot_p50_s: f64,
    /// Output tokens over the simulated time from the first arrival to the last completion.
    pub output_tok_per_s: f64,
    /// Output tokens over the load's steady part ([`steady_output_tok_per_s`]), or why it had
    /// none.
    pub steady_output_tok_per_s: Result<f64, NoSteadyPart>,
    /// Energy of the simulated steps over the output tokens, where every step's power was known.
    pub joules_per_output_token: Option<f64>,
    /// Some step's length lay beyond the measured ones.
    pub extrapolated: bool,
}

/// Why a load could not be simulated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("no measured {what} step covers batch {batch} (the largest measured batch is smaller)")]
    NoStepTime { what: &'static str, batch: u32 },
    #[error("{0}")]
    Setup(String),
    #[error("simulated latencies: {0}")]
    Latencies(#[from] crate::stats::StatsError),
    #[error("not simulated: a stop signal arrived while the simulation ran")]
    Stopped,
}

/// A request's progress.
#[derive(Debug, Clone, Copy, Default)]
struct Request {
    arrival_s: f64,
    first_token_s: f64,
    finish_s: f64,
}

/// Simulated time and energy so far, and the generator of step-time variation.
struct Clock {
    t: f64,
    energy_j: Option<f64>,
    extrapolated: bool,
    noise: SplitMix64,
    /// Where the warm-up measured how alike consecutive steps were.
    level: Option<Level>,
}

impl Clock {
    /// `steps` steps of the looked-up shape: each its median, or drawn from its spread (with the
    /// device's persistent level where it is known), or, where its table replays the loop's
    /// steps, its median times the loop's pace when it starts (one step after another).
    fn spend(&mut self, lookup: Lookup, steps: u64, replay: Option<&Replay>) {
        let dt = match replay {
            Some(replay) => {
                let mut t = self.t;
                for _ in 0..steps {
                    t += lookup.step_s * replay.ratio_at(t);
                }
                t - self.t
            }
            None => {
                let factor = match (lookup.spread, &mut self.level) {
                    (Some(spread), Some(level)) => {
                        level.advance_to(self.t, &mut self.noise);
                        level.draw(&spread, lookup.step_s, steps, &mut self.noise)
                    }
                    (Some(spread), None) => spread.draw(steps, &mut self.noise),
                    (None, _) => steps as f64,
                };
                lookup.step_s * factor
            }
        };
        self.t += dt;
        if let Some(level) = &mut self.level {
            level.at_s = self.t;
        }
        self.energy_j = match (self.energy_j, lookup.power_w) {
            (Some(e), Some(p)) => Some(e + p * dt),
            _ => None,
        };
        self.extrapolated |= lookup.extrapolated;
    }
}

/// Simulate the requests of `setup.lengths` arriving at `rate_per_s`.
///
/// The server is the one lynx's serving loop runs: a batch of decoding sequences in the first
/// rows of a KV pool, each step attending every row's keys up to the longest row (so a decode
/// step is charged at the batch's longest context, the work it does; with graph steps, at the
/// captured batch and the pool's whole capacity); whole prompts prefilled
/// in a step of their own, right-padded to the longest prompt of that step; or, with chunked
/// prefill, up to `chunk` prompt tokens after each decode step, front of the queue first.
pub fn simulate(setup: &SimSetup, rate_per_s: f64) -> Result<SimOutcome, SimError> {
    if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
        return Err(SimError::Setup(format!("request rate {rate_per_s} is not a positive number")));
    }
    if setup.max_batch == 0 || setup.max_prefill_batch == 0 || setup.lengths.is_empty() {
        return Err(SimError::Setup("max batch, prefill batch and requests must be positive".to_owned()));
    }
    if setup.lengths.iter().any(|l| l.isl == 0 || l.osl == 0) {
        return Err(SimError::Setup("every request needs an input and an output token".to_owned()));
    }
    let lengths = setup.lengths;
    let n = lengths.len();
    let mut requests = arrivals(setup.seed, n, rate_per_s);
    let capacity = lengths.iter().map(|l| f64::from(l.isl) + f64::from(l.osl)).fold(0.0, f64::max);
    let captured = setup.graph_steps.then(|| ladder_to(setup.max_batch));
    let decode = |batch: u32, ctx: f64| {
        let (batch, ctx) = match &captured {
            Some(batches) => (batches.iter().copied().find(|&b| b >= batch).unwrap_or(batch), capacity),
            None => (batch, ctx),
        };
        setup.decode.lookup(batch, ctx).ok_or(SimError::NoStepTime { what: "decode", batch })
    };
    let prefill = |batch: u32, len: u32| {
        setup.prefill.lookup(batch, f64::from(len)).ok_or(SimError::NoStepTime { what: "prefill", batch })
    };

    // Step-time variation has a generator of its own: the arrivals are the same with or without.
    let noise = SplitMix64(setup.seed ^ 0x7374_6570_2074_696D ^ setup.draw.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut clock = Clock { t: 0.0, energy_j: Some(0.0), extrapolated: false, noise, level: None };
    if let Some(persistence) = setup.decode.persistence {
        // The level starts in its stationary distribution, from the noise's own generator.
        let z = clock.noise.normal();
        clock.level = Some(Level { persistence, z, at_s: 0.0 });
    }
    let mut next = 0; // the next request to arrive
    let mut waiting: VecDeque<usize> = VecDeque::new();
    // Chunked prefill: admitted requests and the prompt tokens each has left.
    let mut prefilling: VecDeque<(usize, u32)> = VecDeque::new();
    let mut server = Server { running: BinaryHeap::new(), steps: 0, offsets: BTreeMap::new(), completed: 0 };
    while server.completed < n {
        if setup.stop.is_some_and(|stop| stop.load(Ordering::Relaxed)) {
            return Err(SimError::Stopped);
        }
        while next < n && requests[next].arrival_s <= clock.t {
            waiting.push_back(next);
            next += 1;
        }
        let in_server = server.running.len() + prefilling.len();
        let free = (setup.max_batch as usize).saturating_sub(in_server);
        if setup.chunk.is_some() {
            for _ in 0..free.min(waiting.len()) {
                let i = waiting.pop_front().expect("counted");
                prefilling.push_back((i, lengths[i].isl));
            }
        }
        if server.running.is_empty() && prefilling.is_empty() && waiting.is_empty() {
            clock.t = requests[next].arrival_s; // idle until the next arrival
            continue;
        }
        let batch = server.running.len() as u32;

        if let Some(chunk) = setup.chunk.filter(|_| !prefilling.is_empty()) {
            // One mixed iteration: every decoding sequence gains a token, then up to `chunk`
            // prompt tokens are prefilled, front of the queue first, a step for each prompt's
            // piece.
            if batch > 0 {
                clock.spend(decode(batch, server.longest(0))?, 1, setup.decode.replay.as_ref());
                server.steps += 1;
            }
            for piece in take_chunk(&mut prefilling, chunk) {
                clock.spend(prefill(1, piece.tokens)?, 1, setup.prefill.replay.as_ref());
                if let Some(i) = piece.finished {
                    server.first_token(i, clock.t, lengths[i], &mut requests);
                }
            }
            server.retire(clock.t, &mut requests, lengths);
            prefilling.retain(|(_, left)| *left > 0);
            continue;
        }
        if setup.chunk.is_none() && free > 0 && !waiting.is_empty() {
            // A whole-prompt prefill step for as many waiting requests as fit, padded to the
            // longest of their prompts.
            let k = free.min(waiting.len()).min(setup.max_prefill_batch as usize);
            let longest = waiting.iter().take(k).map(|&i| lengths[i].isl).max().unwrap_or(1);
            clock.spend(prefill(k as u32, longest)?, 1, setup.prefill.replay.as_ref());
            for _ in 0..k {
                let i = waiting.pop_front().expect("counted");
                server.first_token(i, clock.t, lengths[i], &mut requests);
            }
            continue;
        }
        // Decode steps, as many as run with the same batch: until the next sequence finishes,
        // or (with a free slot) until the step in flight when the next request arrives, which
        // the loop admits as that step ends. The group is cut to the steps that end before the
        // arrival however slow each is drawn ([`arrival_group`]); the steps nearer it are run
        // one at a time, so that an arrival waits at most the step in flight.
        let Some(&Reverse((finish_step, _))) = server.running.peek() else {
            clock.t = clock.t.max(requests[next].arrival_s);
            continue;
        };
        let mut group = finish_step - server.steps;
        if free > 0 && next < n {
            let until_s = requests[next].arrival_s - clock.t;
            let steps = |g: u64| -> Result<(f64, f64), SimError> {
                let at = decode(batch, server.longest(0) + (g - 1) as f64 / 2.0)?;
                let (fastest, slowest) = step_factors(&at, setup.decode.replay.as_ref());
                Ok((at.step_s * fastest, at.step_s * slowest))
            };
            group = arrival_group(group, until_s, steps)?;
        }
        // The longest context grows by one per step; the group is charged at its middle.
        clock.spend(decode(batch, server.longest(0) + (group - 1) as f64 / 2.0)?, group, setup.decode.replay.as_ref());
        server.steps += group;
        server.retire(clock.t, &mut requests, lengths);
    }

    outcome(rate_per_s, &requests, lengths, &clock)
}

/// The least and the most one step of `lookup`'s shape can take over its median as the
/// simulation times it: the fastest and slowest of the loop's paces where its steps are
/// replayed, else the fastest and slowest step of the spread (each drawn step, and a group's
/// total over its steps, lies within them), else exactly its median.
fn step_factors(lookup: &Lookup, replay: Option<&Replay>) -> (f64, f64) {
    match (replay, lookup.spread) {
        (Some(replay), _) => (replay.fastest(), replay.slowest()),
        (None, Some(spread)) => (spread.factors[0], spread.factors[4]),
        (None, None) => (1.0, 1.0),
    }
}

/// The decode steps to run as one group, at most `group`, where the next request arrives in
/// `until_s` seconds and `steps(g)` gives the least and the most a step of a group of `g` may
/// take: where every step takes exactly its time, the steps up to the one the arrival finds in
/// flight; else the most that end before the arrival however slow each is, or, where not even
/// one does, that one step. A group planned at the steps' median pace instead ran past the
/// arrival by its drawn steps' excess over their median (a skewed spread's mean alone is a few
/// percent of a group that may last seconds), which an arriving request then waited as well: at
/// loads where a long request decodes alone, p99 TTFT came out several times a prefill step
/// (docs/SWEEPS.md, "A decode group ends at an arrival").
fn arrival_group(
    group: u64,
    until_s: f64,
    steps: impl Fn(u64) -> Result<(f64, f64), SimError>,
) -> Result<u64, SimError> {
    // Each sized at the first step's shape, then again at the shape the group is charged at.
    let (fastest, slowest) = steps(1)?;
    if fastest == slowest {
        let reaching = |step_s: f64| if step_s > 0.0 { (until_s / step_s).ceil().max(1.0) as u64 } else { group };
        let first = group.min(reaching(slowest));
        return Ok(first.min(reaching(steps(first)?.1)));
    }
    let fitting = |step_s: f64| if step_s > 0.0 { (until_s / step_s).floor().max(0.0) as u64 } else { group };
    let first = group.min(fitting(slowest));
    if first <= 1 {
        return Ok(1);
    }
    Ok(first.min(fitting(steps(first)?.1)).max(1))
}

/// What simulations of one load give over several draws of the steps' variation, the same
/// requests and arrivals each time ([`replicated`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Replicated {
    /// Each figure's median over the draws (a figure's median need not be the same draw's as
    /// another's).
    pub median: Figures,
    /// How many draws.
    pub draws: u32,
    /// The 10th and 90th percentiles of p99 TTFT and of p99 TPOT over the draws.
    pub ttft_p99_s: (f64, f64),
    pub tpot_p99_s: (f64, f64),
}

/// Simulate `setup` at `rate_per_s` `draws` times (at least once), with draws 0, 1, … of the
/// steps' variation. Where a load is a few dozen requests, its p99s are its slowest requests',
/// and one draw of the steps moves them by several percent: the median over draws is what the
/// simulation predicts for those requests, and the percentiles how far the steps' variation
/// alone moves them.
pub fn replicated(setup: &SimSetup, rate_per_s: f64, draws: u32) -> Result<Replicated, SimError> {
    let outcomes = (0..u64::from(draws.max(1)))
        .map(|draw| simulate(&SimSetup { draw, ..setup.clone() }, rate_per_s))
        .collect::<Result<Vec<SimOutcome>, SimError>>()?;
    let sorted = |figure: fn(&SimOutcome) -> f64| Sorted::new(outcomes.iter().map(figure).collect::<Vec<f64>>());
    let (ttft_p99, tpot_p99) = (sorted(|o| o.ttft_p99_s)?, sorted(|o| o.tpot_p99_s)?);
    Ok(Replicated {
        median: Figures {
            ttft_p50_s: sorted(|o| o.ttft_p50_s)?.median(),
            ttft_p99_s: ttft_p99.median(),
            tpot_p50_s: sorted(|o| o.tpot_p50_s)?.median(),
            tpot_p99_s: tpot_p99.median(),
            output_tok_per_s: sorted(|o| o.output_tok_per_s)?.median(),
            steady_output_tok_per_s: match outcomes
                .iter()
                .map(|o| o.steady_output_tok_per_s)
                .collect::<Result<Vec<f64>, _>>()
            {
                Ok(steady) => Ok(crate::stats::median(&steady)?),
                Err(none) => Err(none),
            },
        },
        draws: outcomes.len() as u32,
        ttft_p99_s: (ttft_p99.quantile(0.1), ttft_p99.quantile(0.9)),
        tpot_p99_s: (tpot_p99.quantile(0.1), tpot_p99.quantile(0.9)),
    })
}

/// `n` requests arriving at `rate_per_s` on a seeded Poisson schedule.
fn arrivals(seed: u64, n: usize, rate_per_s: f64) -> Vec<Request> {
    arrival_times(seed, n, rate_per_s)
        .into_iter()
        .map(|arrival_s| Request { arrival_s, ..Request::default() })
        .collect()
}

/// When each of `n` requests arrives at `rate_per_s` on the Poisson schedule seeded by `seed`,
/// in seconds from the start: the serving loop's schedule, and the simulation's.
pub fn arrival_times(seed: u64, n: usize, rate_per_s: f64) -> Vec<f64> {
    let mut rng = SplitMix64(seed);
    let mut arrival = 0.0;
    (0..n)
        .map(|_| {
            arrival += -rng.unit().ln() / rate_per_s;
            arrival
        })
        .collect()
}

/// Prompt tokens of one request prefilled in a mixed iteration.
struct Piece {
    tokens: u32,
    /// The request whose prompt this piece finished.
    finished: Option<usize>,
}

/// Up to `chunk` prompt tokens taken from the front of `prefilling`, a piece per prompt.
fn take_chunk(prefilling: &mut VecDeque<(usize, u32)>, chunk: u32) -> Vec<Piece> {
    let mut budget = chunk;
    let mut pieces = Vec::new();
    for (i, left) in prefilling.iter_mut() {
        let take = budget.min(*left);
        *left -= take;
        budget -= take;
        pieces.push(Piece { tokens: take, finished: (*left == 0).then_some(*i) });
        if budget == 0 {
            break;
        }
    }
    pieces
}

/// The figures of a finished simulation: TTFT and TPOT percentiles over the requests after the
/// first tenth (the server filling up), throughput over the whole, energy per output token.
fn outcome(rate_per_s: f64, requests: &[Request], lengths: &[Lengths], clock: &Clock) -> Result<SimOutcome, SimError> {
    let figures = figures(requests.iter().zip(lengths).map(|(r, l)| Served {
        arrival_s: r.arrival_s,
        first_token_s: r.first_token_s,
        finish_s: r.finish_s,
        isl: l.isl,
        osl: l.osl,
    }))?;
    let tokens: f64 = lengths.iter().map(|l| f64::from(l.osl)).sum();
    Ok(SimOutcome {
        rate_per_s,
        ttft_p50_s: figures.ttft_p50_s,
        ttft_p99_s: figures.ttft_p99_s,
        tpot_p99_s: figures.tpot_p99_s,
        tpot_p50_s: figures.tpot_p50_s,
        output_tok_per_s: figures.output_tok_per_s,
        steady_output_tok_per_s: figures.steady_output_tok_per_s,
        joules_per_output_token: clock.energy_j.map(|e| e / tokens),
        extrapolated: clock.extrapolated,
    })
}

/// One request as a server (simulated or real) served it, in seconds on one clock.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Served {
    pub arrival_s: f64,
    pub first_token_s: f64,
    pub finish_s: f64,
    pub isl: u32,
    pub osl: u32,
}

/// Latency percentiles and throughput of served requests, computed alike for the simulation and
/// the serving loop.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    pub ttft_p50_s: f64,
    pub ttft_p99_s: f64,
    /// MLPerf's TPOT, (latency − TTFT) / (output tokens − 1) a request, over the requests of more
    /// than one output token (figures are refused where there are none).
    pub tpot_p50_s: f64,
    pub tpot_p99_s: f64,
    /// Output tokens of every request over the time from the first arrival to the last token.
    pub output_tok_per_s: f64,
    /// Output tokens over the load's steady part ([`steady_output_tok_per_s`]), or why it had
    /// none.
    pub steady_output_tok_per_s: Result<f64, NoSteadyPart>,
}

impl From<SimOutcome> for Figures {
    fn from(o: SimOutcome) -> Figures {
        Figures {
            ttft_p50_s: o.ttft_p50_s,
            ttft_p99_s: o.ttft_p99_s,
            tpot_p50_s: o.tpot_p50_s,
            tpot_p99_s: o.tpot_p99_s,
            output_tok_per_s: o.output_tok_per_s,
            steady_output_tok_per_s: o.steady_output_tok_per_s,
        }
    }
}

/// The figures of `served` requests (in arrival order): percentiles over those after the first
/// tenth, throughput over all.
pub fn figures(served: impl Iterator<Item = Served>) -> Result<Figures, SimError> {
    let served: Vec<Served> = served.collect();
    let measured = &served[served.len() / 10..];
    let ttft = Sorted::new(measured.iter().map(|r| r.first_token_s - r.arrival_s).collect::<Vec<f64>>())?;
    let tpots: Vec<f64> =
        measured.iter().filter(|r| r.osl > 1).map(|r| (r.finish_s - r.first_token_s) / f64::from(r.osl - 1)).collect();
    // TPOT is measured over the tokens after the first: where no request had any, there is no
    // TPOT (nor a user's token rate, its inverse) to state.
    if tpots.is_empty() {
        return Err(SimError::Setup(
            "no request measured had more than one output token: TPOT, and a user's token rate, are measured \
             over the tokens after the first"
                .to_owned(),
        ));
    }
    let tpot = Sorted::new(tpots)?;
    let (tpot_p99_s, tpot_p50_s) = (tpot.quantile(0.99), tpot.median());
    let first = served.iter().map(|r| r.arrival_s).fold(f64::INFINITY, f64::min);
    let last = served.iter().map(|r| r.finish_s).fold(0.0, f64::max);
    let tokens: f64 = served.iter().map(|r| f64::from(r.osl)).sum();
    Ok(Figures {
        ttft_p50_s: ttft.median(),
        ttft_p99_s: ttft.quantile(0.99),
        tpot_p50_s,
        tpot_p99_s,
        output_tok_per_s: tokens / (last - first),
        steady_output_tok_per_s: steady_output_tok_per_s(&served),
    })
}

/// Why a load had no steady part: its arrivals spanned less than two request lifetimes (the
/// 90th percentile over its requests of arrival to last token), so the server was still filling
/// when the last request arrived.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoSteadyPart {
    pub arrivals_s: f64,
    pub lifetime_s: f64,
}

impl std::fmt::Display for NoSteadyPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no steady part: the arrivals spanned {:.1} s, under two request lifetimes (a request lived {:.1} s from \
             arrival to last token, 90th percentile), so the server was still filling when the last request arrived",
            self.arrivals_s, self.lifetime_s
        )
    }
}

/// Output tokens a second over a load's steady part: from one request lifetime (the 90th
/// percentile over the requests of arrival to last token) after the first arrival, when the
/// server has filled, to the last arrival, before it drains. The window's throughput counts the
/// fill and the drain too, and where a request lives long against the arrivals' span (a 1024-token
/// answer on a GPU) it lies well under what the server sustains at the rate; this leaves them
/// out (over the arrivals the part met: a Poisson draw, which over a short part need not come
/// at the rate's mean). A request's tokens after its first are counted as coming evenly between its first
/// token and its last (one a decode step, and a server's steps alike), so only the requests
/// that span either end of the part are apportioned. A load whose arrivals span less than two
/// lifetimes has no steady part.
pub fn steady_output_tok_per_s(served: &[Served]) -> Result<f64, NoSteadyPart> {
    let first = served.iter().map(|r| r.arrival_s).fold(f64::INFINITY, f64::min);
    let last = served.iter().map(|r| r.arrival_s).fold(f64::NEG_INFINITY, f64::max);
    let lives: Vec<f64> = served.iter().map(|r| r.finish_s - r.arrival_s).collect();
    let lifetime_s = Sorted::new(lives).map_or(f64::INFINITY, |lives| lives.quantile(0.9));
    let (from, to) = (first + lifetime_s, last);
    if !(to - from >= lifetime_s && to > from) {
        return Err(NoSteadyPart { arrivals_s: (last - first).max(0.0), lifetime_s });
    }
    // Tokens request `r` had produced by time `t`.
    let produced = |r: &Served, t: f64| {
        if t < r.first_token_s {
            0.0
        } else if t >= r.finish_s || r.osl <= 1 {
            f64::from(r.osl)
        } else {
            1.0 + f64::from(r.osl - 1) * (t - r.first_token_s) / (r.finish_s - r.first_token_s)
        }
    };
    let tokens: f64 = served.iter().map(|r| produced(r, to) - produced(r, from)).sum();
    Ok(tokens / (to - from))
}

/// The decoding sequences.
struct Server {
    /// By the decode step each finishes at.
    running: BinaryHeap<Reverse<(u64, usize)>>,
    /// Decode steps so far.
    steps: u64,
    /// For each running sequence, its prompt length less the step it started at (its context at
    /// step s is that + s + 1), counted: the largest gives the longest context.
    offsets: BTreeMap<i64, u32>,
    completed: usize,
}

impl Server {
    /// Request `i`'s first token came at `t`: it starts decoding (or is done, for OSL 1).
    fn first_token(&mut self, i: usize, t: f64, lengths: Lengths, requests: &mut [Request]) {
        requests[i].first_token_s = t;
        if lengths.osl == 1 {
            requests[i].finish_s = t;
            self.completed += 1;
        } else {
            *self.offsets.entry(Self::offset(lengths, self.steps)).or_default() += 1;
            self.running.push(Reverse((self.steps + u64::from(lengths.osl - 1), i)));
        }
    }

    fn offset(lengths: Lengths, start: u64) -> i64 {
        i64::from(lengths.isl) - start as i64
    }

    /// The longest context of the running sequences `ahead` steps from now (keys a decode step
    /// attends: the prompt and the tokens generated, with the step's own).
    fn longest(&self, ahead: u64) -> f64 {
        let offset = self.offsets.keys().next_back().copied().unwrap_or(0);
        (offset + (self.steps + ahead) as i64 + 1) as f64
    }

    /// Finish the sequences whose last decode step has run, at `t`.
    fn retire(&mut self, t: f64, requests: &mut [Request], lengths: &[Lengths]) {
        while let Some(&Reverse((finish, i))) = self.running.peek() {
            if finish > self.steps {
                break;
            }
            self.running.pop();
            requests[i].finish_s = t;
            let start = finish - u64::from(lengths[i].osl - 1);
            let offset = Self::offset(lengths[i], start);
            if let Some(count) = self.offsets.get_mut(&offset) {
                *count -= 1;
                if *count == 0 {
                    self.offsets.remove(&offset);
                }
            }
            self.completed += 1;
        }
    }
}

/// The highest request rate whose p99 TTFT and TPOT stay inside the bound, and what the
/// simulation gave there; `None` when even a load a ten-thousandth of the server's capacity
/// breaks the bound (a bound tighter than one step admits no load). The rate is found by
/// bisection on a log scale to 0.1%; the same arrivals (scaled) are used at every rate. A bound
/// that holds even at 100 times the server's capacity gives the saturated outcome.
pub fn max_rate(setup: &SimSetup, bound: &LatencyBound) -> Result<Option<SimOutcome>, SimError> {
    let within = |outcome: &SimOutcome| bound.holds(outcome.ttft_p99_s, outcome.tpot_p99_s);
    // The decode-only capacity at the largest batch, in requests per second: an upper estimate.
    let n = setup.lengths.len().max(1) as f64;
    let isl = setup.lengths.iter().map(|l| f64::from(l.isl)).sum::<f64>() / n;
    let osl = setup.lengths.iter().map(|l| f64::from(l.osl)).sum::<f64>() / n;
    let full = setup
        .decode
        .lookup(setup.max_batch, isl + osl / 2.0)
        .ok_or(SimError::NoStepTime { what: "decode", batch: setup.max_batch })?;
    let capacity = f64::from(setup.max_batch) / (osl.max(1.0) * full.step_s);
    let mut high = 2.0 * capacity;
    for _ in 0..8 {
        let outcome = simulate(setup, high)?;
        if !within(&outcome) {
            break;
        }
        if high > 100.0 * capacity {
            // A bound so loose that even a queue growing through the whole simulation stays
            // inside it: the server is saturated, and its saturated throughput is the answer.
            return Ok(Some(outcome));
        }
        high *= 2.0;
    }
    let mut low = high * 1e-4;
    let mut best = simulate(setup, low)?;
    if !within(&best) {
        return Ok(None);
    }
    while high / low > 1.001 {
        let middle = (low * high).sqrt();
        let outcome = simulate(setup, middle)?;
        if within(&outcome) {
            low = middle;
            best = outcome;
        } else {
            high = middle;
        }
    }
    Ok(Some(best))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound of `ttft_p99_s` and `tpot_p99_s`.
    fn bound(ttft_p99_s: f64, tpot_p99_s: f64) -> LatencyBound {
        LatencyBound { name: "test".into(), ttft_p99_s, tpot_p99_s, source: None }
    }

    /// A table whose step time is `step_s` for every batch up to `max_batch` and every length.
    fn flat(step_s: f64, max_batch: u32) -> StepTable {
        StepTable::new(&[
            TablePoint { batch: 1, len: 1, step_s, power_w: Some(100.0), spread: None },
            TablePoint { batch: max_batch, len: 1, step_s, power_w: Some(100.0), spread: None },
        ])
    }

    /// 50 ms prefill and 10 ms decode steps at batches 1 to 8, each varying with `spread`.
    fn prefill_and_decode(spread: Option<Spread>) -> (StepTable, StepTable) {
        let point = |batch, step_s| TablePoint { batch, len: 1, step_s, power_w: None, spread };
        (StepTable::new(&[point(1, 0.05), point(8, 0.05)]), StepTable::new(&[point(1, 0.01), point(8, 0.01)]))
    }

    fn lengths(isl: u32, osl: u32) -> Vec<Lengths> {
        vec![Lengths { isl, osl }; 1000]
    }

    fn setup<'a>(
        prefill: &'a StepTable,
        decode: &'a StepTable,
        lengths: &'a [Lengths],
        max_batch: u32,
    ) -> SimSetup<'a> {
        SimSetup {
            prefill,
            decode,
            lengths,
            max_batch,
            max_prefill_batch: max_batch,
            chunk: None,
            graph_steps: false,
            seed: 7,
            draw: 0,
            stop: None,
        }
    }

    /// A graph server's decode step runs at a captured batch over the pool's whole capacity: it
    /// is charged so (a table whose steps grow with batch and context makes it slower), and at
    /// a batch and context the table has, exactly as the eager server at that shape.
    #[test]
    fn graph_steps_are_charged_at_the_captured_batch_and_the_whole_capacity() {
        assert_eq!(ladder_to(1), [1]);
        assert_eq!(ladder_to(12), [1, 2, 4, 8, 12]);
        assert_eq!(ladder_to(16), [1, 2, 4, 8, 16]);
        // Prefill steps take no time to speak of; a decode step 1 ms a sequence and 1 µs a key.
        let prefill = flat(1e-9, 8);
        let points: Vec<TablePoint> = [1u32, 2, 4, 8]
            .iter()
            .flat_map(|&b| {
                [64u32, 128, 512].map(|ctx| TablePoint {
                    batch: b,
                    len: ctx,
                    step_s: 1e-3 * f64::from(b) + 1e-6 * f64::from(ctx),
                    power_w: None,
                    spread: None,
                })
            })
            .collect();
        let decode = StepTable::new(&points);
        // Three requests a microsecond apart, prompts of 8 and outputs of 120, 60 and 30: a
        // capacity of 128 keys. The second and third are prefilled together, then decode 29
        // steps beside the first (batch 3) until the third finishes, and the second 30 more
        // (batch 2): its TPOT is the median.
        let lengths = [(8, 120), (8, 60), (8, 30)].map(|(isl, osl)| Lengths { isl, osl }).to_vec();
        let eager = setup(&prefill, &decode, &lengths, 4);
        let graph = SimSetup { graph_steps: true, ..eager.clone() };
        let (eager, graph) = (simulate(&eager, 1e6).unwrap(), simulate(&graph, 1e6).unwrap());
        // Batch 3 runs captured at 4, every step over all 128 keys.
        let charged = (29.0 * (4e-3 + 128e-6) + 30.0 * (2e-3 + 128e-6)) / 59.0;
        assert!((graph.tpot_p50_s - charged).abs() < 1e-9, "{} against {charged}", graph.tpot_p50_s);
        assert!(graph.tpot_p50_s > eager.tpot_p50_s && graph.tpot_p99_s > eager.tpot_p99_s, "{eager:?} {graph:?}");
    }

    /// Issue 17: a raised stop flag ends a simulation (and the search for a bounded rate) at its
    /// next iteration; with the flag down the same setup simulates.
    #[test]
    fn a_stop_signal_ends_the_simulation() {
        let (prefill, decode) = (flat(0.05, 8), flat(0.01, 8));
        let lengths = lengths(64, 64);
        let stop = AtomicBool::new(false);
        let setup = SimSetup { stop: Some(&stop), ..setup(&prefill, &decode, &lengths, 8) };
        assert!(simulate(&setup, 1.0).is_ok());
        stop.store(true, Ordering::SeqCst);
        assert_eq!(simulate(&setup, 1.0).unwrap_err(), SimError::Stopped);
        assert_eq!(max_rate(&setup, &bound(2.0, 0.2)).unwrap_err(), SimError::Stopped);
    }

    /// A spread's draws follow its quantiles (a single step) and its moments (many together); a
    /// spread of ones is no spread.
    #[test]
    fn step_times_are_drawn_from_the_measured_spread() {
        let spread = Spread::new(0.9, 1.2, 1.5, 2.0).unwrap();
        let mut rng = SplitMix64(1);
        let mut single: Vec<f64> = (0..20_000).map(|_| spread.draw(1, &mut rng)).collect();
        single.sort_by(f64::total_cmp);
        let at = |q: f64| single[(q * single.len() as f64) as usize];
        assert!((at(0.5) - 1.0).abs() < 0.01 && (at(0.9) - 1.2).abs() < 0.01, "{} {}", at(0.5), at(0.9));
        assert!(single[0] >= 0.9 && single[single.len() - 1] <= 2.0);
        let mean = single.iter().sum::<f64>() / single.len() as f64;
        assert!((mean - spread.mean).abs() < 0.01 && spread.mean > 1.0, "right-skewed: mean {mean}");
        let groups: Vec<f64> = (0..5000).map(|_| spread.draw(100, &mut rng) / 100.0).collect();
        let group_mean = groups.iter().sum::<f64>() / groups.len() as f64;
        assert!((group_mean - spread.mean).abs() < 0.005, "{group_mean}");
        assert_eq!(Spread::new(1.0, 1.0, 1.0, 1.0).unwrap().draw(7, &mut rng), 7.0);
        assert_eq!(Spread::new(1.1, 1.0, 1.2, 1.3), None, "a minimum above the median is no spread");
    }

    /// The level's persistence comes from the lags as `share · ρ^lag`, within its limits.
    #[test]
    fn persistence_is_fitted_from_the_lags() {
        let close = |p: Option<Persistence>, share: f64, rho: f64, step_s: f64| {
            let p = p.unwrap();
            let fitted_rho = (-step_s / p.time_s).exp();
            assert!((p.share - share).abs() < 1e-9 && (fitted_rho - rho).abs() < 1e-9, "{p:?}: ρ {fitted_rho}");
        };
        close(Persistence::fit(0.8 * 0.9, 0.8 * 0.9f64.powi(4), 0.05), 0.8, 0.9, 0.05);
        close(Persistence::fit(0.5, -0.1, 0.05), 1.0, 0.5, 0.05);
        close(Persistence::fit(0.3, 0.3, 0.05), 0.3 / 0.999, 0.999, 0.05);
        close(Persistence::fit(0.5, 0.01, 0.05), 1.0, 0.5, 0.05);
        assert_eq!(Persistence::fit(-0.1, 0.2, 0.05), None, "steps not alike persist nothing");
        assert_eq!(Persistence::fit(0.5, 0.2, 0.0), None);
    }

    /// A signed result is not trusted to hold a warm-up a device could give: whatever lags and
    /// step time it claims, the fit is a share in (0, 1] and a positive, finite time (or none),
    /// and a simulation with it ends with finite figures.
    #[test]
    fn any_recorded_persistence_simulates_to_finite_figures() {
        let spread = Spread::new(0.8, 1.2, 1.5, 2.0);
        let point = |batch, step_s| TablePoint { batch, len: 1, step_s, power_w: None, spread };
        let prefill = StepTable::new(&[point(1, 0.05), point(8, 0.05)]);
        let lengths = lengths(128, 2000);
        assert_eq!(Persistence::fit(0.999, -1.0, f64::MAX), None, "a time constant past the largest number");
        for (lag_1, lag_4, step_s) in
            [(1.0, 1.0, 1e-300), (1.0, 1e-300, 1e300), (1e-300, 1.0, 0.05), (0.999, -1.0, 1e300), (1.0, 1.0, 1.0)]
        {
            let persistence = Persistence::fit(lag_1, lag_4, step_s).unwrap();
            assert!(persistence.share > 0.0 && persistence.share <= 1.0 && persistence.time_s > 0.0, "{persistence:?}");
            let decode = StepTable::new(&[point(1, 0.01), point(8, 0.01)]).with_persistence(Some(persistence));
            let outcome = simulate(&setup(&prefill, &decode, &lengths[..50], 8), 1.0).unwrap();
            assert!(outcome.tpot_p99_s.is_finite() && outcome.tpot_p99_s > 0.0, "{persistence:?}: {outcome:?}");
        }
    }

    /// With a persistent level, one step at a time still follows the cell's quantiles, while
    /// consecutive steps are alike and a group's total varies as the level's sum says (and as
    /// the same steps drawn one at a time), several times more than independent steps' would.
    #[test]
    fn persistent_steps_keep_their_distribution_and_make_sums_vary_more() {
        let spread = Spread::new(0.9, 1.2, 1.5, 2.0).unwrap();
        let persistence = Persistence { share: 0.8, time_s: 1.0 };
        let step_s = 0.1;
        let rho = (-step_s / persistence.time_s).exp();
        let mut rng = SplitMix64(3);
        let fresh = |rng: &mut SplitMix64| Level { persistence, z: rng.normal(), at_s: 0.0 };
        let mut level = fresh(&mut rng);
        let single: Vec<f64> = (0..50_000).map(|_| level.draw(&spread, step_s, 1, &mut rng)).collect();
        let mean = single.iter().sum::<f64>() / single.len() as f64;
        let var = single.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / single.len() as f64;
        let lag_1 = single.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum::<f64>() / single.len() as f64 / var;
        assert!(lag_1 > 0.6 && lag_1 < 0.8 * rho, "consecutive steps alike: {lag_1}");
        let mut sorted = single.clone();
        sorted.sort_by(f64::total_cmp);
        let at = |q: f64| sorted[(q * sorted.len() as f64) as usize];
        assert!((at(0.5) - 1.0).abs() < 0.03 && (at(0.9) - 1.2).abs() < 0.03, "{} {}", at(0.5), at(0.9));
        assert!((mean - spread.mean).abs() < 0.03, "{mean} against {}", spread.mean);

        // Groups from a level in its stationary distribution: 15 steps one at a time, against
        // the level's variance; 600 steps in the normal approximation, against one at a time;
        // both several times the variance of independent steps.
        let moments = |draws: &[f64]| {
            let m = draws.iter().sum::<f64>() / draws.len() as f64;
            (m, draws.iter().map(|x| (x - m).powi(2)).sum::<f64>() / draws.len() as f64)
        };
        let level_var = |g: u64| {
            let gf = g as f64;
            let level: f64 = gf + 2.0 * (1..g).map(|k| (gf - k as f64) * rho.powi(k as i32)).sum::<f64>();
            spread.sd.powi(2) * ((1.0 - persistence.share) * gf + persistence.share * level)
        };
        let (short, long) = (15u64, 600u64);
        let draws = |n: usize, g: u64, rng: &mut SplitMix64| -> Vec<f64> {
            (0..n).map(|_| fresh(rng).draw(&spread, step_s, g, rng)).collect()
        };
        let one_by_one_long: Vec<f64> = (0..2000)
            .map(|_| {
                let mut level = fresh(&mut rng);
                (0..long).map(|_| level.draw(&spread, step_s, 1, &mut rng)).sum()
            })
            .collect();
        let ((m_short, v_short), (m_long, v_long), (m_one, v_one)) = (
            moments(&draws(20_000, short, &mut rng)),
            moments(&draws(2000, long, &mut rng)),
            moments(&one_by_one_long),
        );
        let independent = |g: u64, rng: &mut SplitMix64| -> f64 {
            moments(&(0..20_000).map(|_| spread.draw(g, rng)).collect::<Vec<_>>()).1
        };
        // The linear formula slightly overstates a skewed quantile function's correlation.
        assert!((v_short / level_var(short) - 1.0).abs() < 0.2, "15 steps: {v_short} against {}", level_var(short));
        assert!((v_long / v_one - 1.0).abs() < 0.15, "600 steps approximated {v_long} against one by one {v_one}");
        assert!(v_short > 5.0 * independent(short, &mut rng) && v_long > 5.0 * independent(long, &mut rng));
        for (m, g) in [(m_short, short), (m_long, long), (m_one, long)] {
            assert!((m / g as f64 - spread.mean).abs() < 0.01, "mean {m} of {g} steps");
        }

        // The sums in closed form are the sums term by term.
        for (b, steps) in [(0.01, 2000u64), (0.3, 1500), (1e-4, 5000)] {
            let (term, closed) = (LevelSums::of(1.0 - b, b, steps, false), LevelSums::of(1.0 - b, b, steps, true));
            for (x, y) in [(term.c, closed.c), (term.d, closed.d), (term.cc, closed.cc), (term.cd, closed.cd)] {
                assert!((x - y).abs() <= 1e-7 * x.abs().max(1e-300), "b {b}: {term:?} against {closed:?}");
            }
        }
    }

    /// A device that stays slow or fast for stretches makes some requests' every step slow: the
    /// p99 TPOT grows, the median hardly moves. Without recorded autocorrelation the draws are
    /// those of independent steps, as before it was recorded.
    #[test]
    fn persistent_steps_lengthen_p99_tpot_not_the_median() {
        // Prefill steps too short to matter, so that a request's TPOT is its decode steps'.
        let with = |spread: Option<Spread>| {
            let point = |batch, step_s, spread| TablePoint { batch, len: 1, step_s, power_w: None, spread };
            (
                StepTable::new(&[point(1, 1e-5, None), point(8, 1e-5, None)]),
                StepTable::new(&[point(1, 0.01, spread), point(8, 0.01, spread)]),
            )
        };
        let spread = Spread::new(0.8, 1.2, 1.5, 2.0).unwrap();
        let (prefill, independent_decode) = with(Some(spread));
        // Consecutive 50 ms steps alike at 0.7: the level forgets over about 0.45 s.
        let persistence = Persistence::fit(0.7, 0.5, 0.05);
        let persistent_decode = independent_decode.clone().with_persistence(persistence);
        let lengths = lengths(128, 32);
        let independent = setup(&prefill, &independent_decode, &lengths, 8);
        let persistent = setup(&prefill, &persistent_decode, &lengths, 8);
        let rate = 0.2 * simulate(&independent, 1e4).unwrap().output_tok_per_s / 32.0;
        let (a, b) = (simulate(&independent, rate).unwrap(), simulate(&persistent, rate).unwrap());
        assert!(b.tpot_p99_s > 1.1 * a.tpot_p99_s, "independent {a:?} against persistent {b:?}");
        assert!((b.tpot_p50_s / a.tpot_p50_s - 1.0).abs() < 0.05, "independent {a:?} against persistent {b:?}");
    }

    /// Near saturation, steps that vary make a server's p99 TTFT longer than steps that all take
    /// their median: the queue sees the slow ones. At low load the median still rules.
    #[test]
    fn varying_steps_lengthen_the_tail_of_a_busy_server() {
        let (steady_prefill, steady_decode) = prefill_and_decode(None);
        let (varied_prefill, varied_decode) = prefill_and_decode(Spread::new(0.8, 1.5, 3.0, 4.0));
        let lengths = lengths(128, 32);
        let steady = setup(&steady_prefill, &steady_decode, &lengths, 8);
        let varied = setup(&varied_prefill, &varied_decode, &lengths, 8);
        // 70% of the steady server's saturated throughput.
        let busy = 0.7 * simulate(&steady, 1e4).unwrap().output_tok_per_s / 32.0;
        let (a, b) = (simulate(&steady, busy).unwrap(), simulate(&varied, busy).unwrap());
        assert!(b.ttft_p99_s > 1.2 * a.ttft_p99_s, "steady {a:?} against varied {b:?}");
        let idle = simulate(&varied, 1e-4).unwrap();
        assert!(idle.ttft_p99_s < 0.05 * 4.0 && idle.ttft_p50_s < 0.05 * 1.6, "{idle:?}");
    }

    /// A load's steady part runs from one request lifetime after the first arrival to the last
    /// arrival. Hand-worked: eleven requests arrive a second apart (at 0 to 10 s), each with five
    /// output tokens, its first 0.5 s after it arrives and its last 2 s later: every lifetime is
    /// 2.5 s, the part is 2.5 to 10 s. Requests 3 to 7 give all five tokens in it; request 1
    /// gives 2 (it had 3 by 2.5 s), request 2 gives 4 (its first came at 2.5 s), request 8 gives
    /// 4 and request 9 gives 2 (by 10 s), request 10 none: 37 tokens over 7.5 s.
    #[test]
    fn the_steady_part_counts_the_tokens_between_the_fill_and_the_last_arrival() {
        let request = |a: f64| Served { arrival_s: a, first_token_s: a + 0.5, finish_s: a + 2.5, isl: 8, osl: 5 };
        let served: Vec<Served> = (0..=10).map(|a| request(f64::from(a))).collect();
        let steady = steady_output_tok_per_s(&served).unwrap();
        assert!((steady - 37.0 / 7.5).abs() < 1e-9, "{steady}");
        // The window counts the fill and the drain: 55 tokens over 12.5 s.
        let window = figures(served.iter().copied()).unwrap();
        assert!((window.output_tok_per_s - 55.0 / 12.5).abs() < 1e-9, "{window:?}");
        assert_eq!(window.steady_output_tok_per_s, Ok(steady));
        // Four arrivals over 3 s, each living 2.5 s: the server was still filling at the last.
        let none = steady_output_tok_per_s(&served[..4]).unwrap_err();
        assert_eq!(none, NoSteadyPart { arrivals_s: 3.0, lifetime_s: 2.5 });
        assert!(none.to_string().contains("spanned 3.0 s, under two request lifetimes"), "{none}");
        assert_eq!(figures(served[..4].iter().copied()).unwrap().steady_output_tok_per_s, Err(none));
    }

    /// Requests of one output token have no TPOT: where no request measured had more, there are
    /// no figures (before, TPOT was 0 and a user's token rate 1/0, printed as a 308-digit
    /// number); one request of two tokens among them is enough.
    #[test]
    fn requests_of_one_output_token_have_no_tpot() {
        let request = |a: f64, osl| Served { arrival_s: a, first_token_s: a + 0.5, finish_s: a + 1.5, isl: 8, osl };
        let ones: Vec<Served> = (0..20).map(|a| request(f64::from(a), 1)).collect();
        let error = figures(ones.iter().copied()).unwrap_err().to_string();
        assert!(error.contains("no request measured had more than one output token"), "{error}");
        let mut mixed = ones;
        mixed[15] = request(15.0, 2);
        assert_eq!(figures(mixed.into_iter()).unwrap().tpot_p99_s, 1.0);
    }

    /// Where a request lives long against the span of the arrivals, the window's throughput lies
    /// under the offered load by the fill and the drain; the steady part's is the offered load.
    #[test]
    fn the_steady_part_of_a_simulated_load_sustains_the_offered_load() {
        let (prefill, decode) = (flat(0.005, 64), flat(0.01, 64));
        let lengths = vec![Lengths { isl: 64, osl: 256 }; 400];
        let rate = 10.0;
        let outcome = simulate(&setup(&prefill, &decode, &lengths, 64), rate).unwrap();
        // The load offered: the requests after the first over the arrivals' span (this seed's
        // arrivals, not the rate's mean), 256 tokens each.
        let arrivals = arrival_times(7, 400, rate);
        let offered = 399.0 * 256.0 / (arrivals[399] - arrivals[0]);
        let steady = outcome.steady_output_tok_per_s.unwrap();
        assert!((steady / offered - 1.0).abs() < 0.03, "steady {steady} against offered {offered}");
        assert!(outcome.output_tok_per_s < 0.95 * steady, "{outcome:?}");
        // The median over draws, as for the other figures.
        let replicated = replicated(&setup(&prefill, &decode, &lengths, 64), rate, 3).unwrap();
        assert_eq!(replicated.median.steady_output_tok_per_s, Ok(steady), "the steps do not vary");
    }

    /// Over a few dozen requests, each draw of the steps' variation gives its own p99s: the
    /// replicated figures are their medians with the 10th and 90th percentiles beside them;
    /// draw 0 is the simulation's own, and steps at their medians leave nothing to vary.
    #[test]
    fn replicated_draws_give_the_median_and_the_spread_of_the_p99s() {
        let lengths = vec![Lengths { isl: 128, osl: 16 }; 24];
        let (prefill, decode) = prefill_and_decode(Spread::new(0.8, 1.3, 2.0, 2.5));
        let decode = decode.with_persistence(Persistence::fit(0.6, 0.3, 0.01));
        let varied = setup(&prefill, &decode, &lengths, 8);
        let rate = 0.6 * simulate(&varied, 1e4).unwrap().output_tok_per_s / 16.0;
        let one = replicated(&varied, rate, 1).unwrap();
        let own = simulate(&varied, rate).unwrap();
        assert_eq!((one.draws, one.median.ttft_p99_s, one.median.tpot_p99_s), (1, own.ttft_p99_s, own.tpot_p99_s));
        assert_eq!(replicated(&varied, rate, 0).unwrap(), one, "at least one draw");
        let many = replicated(&varied, rate, 31).unwrap();
        assert_eq!(many, replicated(&varied, rate, 31).unwrap(), "the draws are seeded");
        assert_eq!(many.draws, 31);
        for (range, median) in [(many.ttft_p99_s, many.median.ttft_p99_s), (many.tpot_p99_s, many.median.tpot_p99_s)] {
            assert!(range.0 <= median && median <= range.1, "{many:?}");
            assert!(range.1 > 1.02 * range.0, "the draws differ: {many:?}");
        }
        let second = simulate(&SimSetup { draw: 1, ..varied.clone() }, rate).unwrap();
        assert_ne!(second, own, "another draw, other step times");
        let (prefill, decode) = prefill_and_decode(None);
        let steady = replicated(&setup(&prefill, &decode, &lengths, 8), rate, 31).unwrap();
        assert_eq!(steady.ttft_p99_s, (steady.median.ttft_p99_s, steady.median.ttft_p99_s), "{steady:?}");
        assert_eq!(steady.tpot_p99_s, (steady.median.tpot_p99_s, steady.median.tpot_p99_s), "{steady:?}");
    }

    #[test]
    fn lookup_interpolates_over_batch_and_length_and_flags_extrapolation() {
        let table = StepTable::new(&[
            TablePoint { batch: 1, len: 100, step_s: 1.0, power_w: None, spread: None },
            TablePoint { batch: 4, len: 100, step_s: 4.0, power_w: None, spread: None },
            TablePoint { batch: 1, len: 200, step_s: 2.0, power_w: None, spread: None },
            TablePoint { batch: 4, len: 200, step_s: 8.0, power_w: None, spread: None },
        ]);
        let at = |b, l| table.lookup(b, l).unwrap();
        assert_eq!(at(2, 100.0).step_s, 2.0);
        assert_eq!(at(2, 150.0).step_s, 3.0, "mean of 2 and 4");
        assert_eq!(at(1, 50.0).step_s, 1.0, "below the shortest line: its time");
        assert!(!at(1, 150.0).extrapolated);
        let beyond = at(1, 300.0);
        assert!((beyond.step_s - 3.0).abs() < 1e-12 && beyond.extrapolated);
        assert_eq!(table.lookup(5, 100.0), None, "no batch beyond the measured");
        assert_eq!(table.max_batch(100, 200), Some(4));

        // Placed at the lengths their steps attended (120 and 250), the lines are read there; a
        // placement below a line's own length, or not known, leaves it where it was.
        let placed = table.clone().placed(|len| Some(if len == 100 { 120.0 } else { 250.0 }));
        let at = |b, l| placed.lookup(b, l).unwrap();
        assert_eq!(at(1, 120.0).step_s, 1.0);
        assert_eq!(at(1, 100.0).step_s, 1.0, "below the shortest line: its time");
        assert!((at(1, 185.0).step_s - 1.5).abs() < 1e-12, "halfway from 120 to 250");
        assert!(!at(1, 250.0).extrapolated && at(1, 251.0).extrapolated);
        assert_eq!(placed.max_batch(120, 250), Some(4));
        let kept = table.clone().placed(|len| (len == 200).then_some(150.0));
        assert_eq!(kept.lookup(1, 150.0).unwrap().step_s, 1.5, "both lines where they were");
        // Two lines placed at one length: the longer's time, never a division by nothing.
        let same = table.placed(|_| Some(200.0));
        assert_eq!(same.lookup(1, 300.0).unwrap().step_s, 2.0);
    }

    #[test]
    fn at_very_low_load_p99_ttft_is_the_prefill_time() {
        let prefill = flat(0.25, 8);
        let decode = flat(0.01, 8);
        let lengths = lengths(128, 64);
        let setup = setup(&prefill, &decode, &lengths, 8);
        // One request every 10 000 s on average: no two ever overlap.
        let outcome = simulate(&setup, 1e-4).unwrap();
        assert!((outcome.ttft_p99_s - 0.25).abs() < 1e-9, "{outcome:?}");
        assert!((outcome.tpot_p99_s - 0.01).abs() < 1e-9, "{outcome:?}");
        assert!((outcome.joules_per_output_token.unwrap() - 100.0 * (0.25 + 63.0 * 0.01) / 64.0).abs() < 1e-9);
    }

    /// A request arriving while another decodes alone waits for the step in flight, then its
    /// prefill, however long the other has left and however its steps vary: the loop admits it
    /// as that step ends. A group planned at the steps' median pace ran past the arrival by its
    /// drawn excess (here about a tenth of up to 20 s of steps).
    #[test]
    fn an_arrival_waits_for_the_step_in_flight_not_for_a_group_of_steps() {
        let prefill = flat(0.05, 8);
        let spread = Spread::new(0.95, 1.3, 1.6, 2.0).unwrap();
        assert!(spread.mean > 1.05, "{spread:?}");
        let point = |batch| TablePoint { batch, len: 1, step_s: 0.01, power_w: None, spread: Some(spread) };
        let independent = StepTable::new(&[point(1), point(8)]);
        let persistent = independent.clone().with_persistence(Some(Persistence { share: 0.5, time_s: 0.5 }));
        let replayed = independent.clone().replayed(Replay::new([(0.0, 1.0), (100.0, 1.4), (2000.0, 0.9)]));
        let lengths = vec![Lengths { isl: 16, osl: 2000 }; 300];
        for decode in [&independent, &persistent, &replayed] {
            let setup = setup(&prefill, decode, &lengths, 8);
            // One request every 40 s on average, each 20 s of steps or more: about half arrive
            // while another decodes.
            let outcome = simulate(&setup, 0.025).unwrap();
            // Its prefill, and at most the slowest step (2 × 10 ms; the replay's 1.4 × 10 ms).
            assert!(outcome.ttft_p99_s <= 0.05 + 0.02 + 1e-9, "{outcome:?}");
            assert!(outcome.ttft_p99_s > 0.05, "some arrivals find a step in flight: {outcome:?}");
        }
        // The group: the steps that end before the arrival at the slowest, else the one in
        // flight; steps of exactly one time, up to the one in flight.
        let at = |fastest: f64, slowest: f64| move |_: u64| Ok::<(f64, f64), SimError>((fastest, slowest));
        assert_eq!(arrival_group(1000, 1.0, at(0.01, 0.02)), Ok(50));
        assert_eq!(arrival_group(30, 1.0, at(0.01, 0.02)), Ok(30));
        assert_eq!(arrival_group(1000, 0.015, at(0.01, 0.02)), Ok(1));
        assert_eq!(arrival_group(1000, 1.005, at(0.01, 0.01)), Ok(101));
        assert_eq!(arrival_group(1000, 0.001, at(0.01, 0.01)), Ok(1));
        // Sized again at the shape the group is charged at (longer contexts, slower steps).
        let growing = |g: u64| {
            let step_s = 0.01 + 1e-4 * g as f64;
            Ok((step_s / 2.0, step_s))
        };
        assert_eq!(arrival_group(1000, 1.0, growing), Ok(50));
        assert_eq!(arrival_group(1000, 1.0, |g| Ok((0.01 + 1e-4 * g as f64, 0.01 + 1e-4 * g as f64))), Ok(50));
    }

    #[test]
    fn throughput_saturates_at_max_batch_over_tpot() {
        // Prefill almost free; decode 20 ms at any batch up to 16: at most 16 / 0.02 = 800 tok/s.
        let prefill = flat(1e-9, 16);
        let decode = flat(0.02, 16);
        let lengths = lengths(128, 512);
        let setup = setup(&prefill, &decode, &lengths, 16);
        let overloaded = simulate(&setup, 1000.0).unwrap();
        assert!((overloaded.output_tok_per_s / 800.0 - 1.0).abs() < 0.01, "{overloaded:?}");
        let bounded = max_rate(&setup, &bound(1e9, 1.0)).unwrap().unwrap();
        assert!(bounded.output_tok_per_s <= 800.0 * 1.0001, "{bounded:?}");
    }

    #[test]
    fn a_bound_tighter_than_one_decode_step_admits_no_load() {
        let prefill = flat(0.05, 8);
        let decode = flat(0.03, 8);
        let lengths = lengths(128, 64);
        let setup = setup(&prefill, &decode, &lengths, 8);
        assert_eq!(max_rate(&setup, &bound(10.0, 0.029)).unwrap(), None);
        let loose = max_rate(&setup, &bound(10.0, 0.031)).unwrap().unwrap();
        assert!(loose.tpot_p99_s <= 0.031 && loose.rate_per_s > 0.0, "{loose:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_answer_and_another_seed_another() {
        let prefill = StepTable::new(&[
            TablePoint { batch: 1, len: 128, step_s: 0.05, power_w: None, spread: None },
            TablePoint { batch: 8, len: 128, step_s: 0.2, power_w: None, spread: None },
        ]);
        let decode = StepTable::new(&[
            TablePoint { batch: 1, len: 128, step_s: 0.01, power_w: None, spread: None },
            TablePoint { batch: 8, len: 128, step_s: 0.02, power_w: None, spread: None },
            TablePoint { batch: 1, len: 256, step_s: 0.012, power_w: None, spread: None },
            TablePoint { batch: 8, len: 256, step_s: 0.03, power_w: None, spread: None },
        ]);
        let lengths = lengths(128, 64);
        let a = setup(&prefill, &decode, &lengths, 8);
        let first = max_rate(&a, &bound(1.0, 0.05)).unwrap().unwrap();
        assert_eq!(first, max_rate(&a, &bound(1.0, 0.05)).unwrap().unwrap());
        let b = SimSetup { seed: 8, ..a.clone() };
        assert_ne!(simulate(&a, first.rate_per_s).unwrap(), simulate(&b, first.rate_per_s).unwrap());
        assert!(first.ttft_p99_s <= 1.0 && first.tpot_p99_s <= 0.05 && first.joules_per_output_token.is_none());
    }

    #[test]
    fn chunked_prefill_keeps_decoding_while_prompts_fill() {
        let prefill = StepTable::new(&[
            TablePoint { batch: 1, len: 16, step_s: 0.004, power_w: None, spread: None },
            TablePoint { batch: 1, len: 128, step_s: 0.02, power_w: None, spread: None },
        ]);
        let decode = flat(0.01, 8);
        let lengths = lengths(128, 64);
        let mut chunked = setup(&prefill, &decode, &lengths, 8);
        chunked.chunk = Some(64);
        let low = simulate(&chunked, 1e-4).unwrap();
        // Alone, a 128-token prompt takes two 64-token chunks of (interpolated) 0.012 s each.
        let chunk_s = 0.004 + (64.0 - 16.0) / (128.0 - 16.0) * (0.02 - 0.004);
        assert!((low.ttft_p99_s - 2.0 * chunk_s).abs() < 1e-9, "{low:?}");
        let busy = max_rate(&chunked, &bound(1.0, 0.05)).unwrap().unwrap();
        assert!(busy.tpot_p99_s <= 0.05 && busy.output_tok_per_s > 0.0, "{busy:?}");
    }

    /// Replaying a loop whose steps all ran at one pace is the tables at that pace: the same
    /// figures as the tables re-timed by it, whatever spread they had (a replay draws nothing),
    /// with whole prompts prefilled and with chunked prefill.
    #[test]
    fn a_replay_at_one_pace_is_the_tables_at_that_pace() {
        let lengths = lengths(64, 32);
        let (prefill, decode) = prefill_and_decode(None);
        let (slow_prefill, slow_decode) = (prefill.retimed(|_| (1.3, None)), decode.retimed(|_| (1.3, None)));
        let (prefill, decode) = prefill_and_decode(Some(Spread::new(0.9, 1.2, 1.5, 2.0).unwrap()));
        let steady = || Replay::new((0..50).map(|i| (f64::from(i), 1.3)));
        let (prefill, decode) = (prefill.replayed(steady()), decode.replayed(steady()));
        for chunk in [None, Some(16)] {
            let expected =
                simulate(&SimSetup { chunk, ..setup(&slow_prefill, &slow_decode, &lengths, 8) }, 20.0).unwrap();
            let mut replayed = SimSetup { chunk, ..setup(&prefill, &decode, &lengths, 8) };
            let first = simulate(&replayed, 20.0).unwrap();
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs();
            assert!(close(first.ttft_p99_s, expected.ttft_p99_s), "{chunk:?}: {first:?} against {expected:?}");
            assert!(close(first.tpot_p99_s, expected.tpot_p99_s), "{chunk:?}: {first:?} against {expected:?}");
            assert!(
                close(first.output_tok_per_s, expected.output_tok_per_s),
                "{chunk:?}: {first:?} against {expected:?}"
            );
            replayed.draw = 5;
            assert_eq!(simulate(&replayed, 20.0).unwrap(), first, "{chunk:?}: a replay draws nothing");
        }
    }

    /// The same steps replayed in another order give other figures: a slow stretch slows the
    /// requests in the window where it fell, and none where it falls after the last of them.
    #[test]
    fn a_replayed_slow_stretch_slows_the_requests_it_falls_on() {
        let (prefill, decode) = prefill_and_decode(None);
        let lengths = vec![Lengths { isl: 64, osl: 32 }; 200];
        let run = |decode_replay: Option<Replay>| {
            let decode = decode.clone().replayed(decode_replay);
            simulate(&setup(&prefill, &decode, &lengths, 8), 20.0).unwrap()
        };
        let level = run(None);
        // Two seconds of decode steps at 3x their table, early in the window or after its end.
        let stretch = |from: f64| {
            Replay::new((0..4000).map(|i| {
                let t = f64::from(i) * 0.01;
                (t, if (from..from + 2.0).contains(&t) { 3.0 } else { 1.0 })
            }))
        };
        let early = run(stretch(3.0));
        let late = run(stretch(35.0));
        assert!(late.tpot_p99_s <= level.tpot_p99_s * 1.0001, "{late:?} against {level:?}");
        assert!(early.tpot_p99_s > 1.5 * level.tpot_p99_s, "{early:?} against {level:?}");
        assert!(early.ttft_p99_s > level.ttft_p99_s, "{early:?} against {level:?}");
        assert_eq!(Replay::new([(f64::NAN, 1.0), (0.0, 0.0)]), None, "nothing finite and positive to replay");
        let replay = Replay::new([(2.0, 3.0), (1.0, 2.0)]).unwrap();
        assert_eq!(
            [replay.ratio_at(0.0), replay.ratio_at(1.5), replay.ratio_at(2.0), replay.ratio_at(9.0)],
            [2.0, 2.0, 3.0, 3.0]
        );
    }
}
