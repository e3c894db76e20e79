//! Latency-bounded throughput: a seeded discrete-event simulation of a continuous-batching server
//! driven by the device's measured step-time tables (docs/SWEEPS.md has the method).
//!
//! Requests arrive as a Poisson process. Whole-prompt prefill (the default) admits waiting
//! requests into free batch slots in a prefill step of its own, which pauses decode; chunked
//! prefill instead adds up to `chunk` prompt tokens to each decode step. Every running sequence
//! gains one token per decode step. Step times come from the measured tables, interpolated
//! linearly over batch and length; nothing here is assumed about the device.

use crate::stats::Sorted;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One measured step: `batch` sequences at length `len` (prompt length for prefill, context
/// for decode) took `step_s`, at `power_w` where it was measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TablePoint {
    pub batch: u32,
    pub len: u32,
    pub step_s: f64,
    pub power_w: Option<f64>,
}

/// A step time looked up in a table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lookup {
    pub step_s: f64,
    pub power_w: Option<f64>,
    /// The length lay beyond the measured ones and was extrapolated.
    pub extrapolated: bool,
}

/// Step times over batch and length, from measured points.
#[derive(Debug, Clone, Default)]
pub struct StepTable {
    /// Lines of equal length, ascending by length; each line's points ascending by batch.
    lines: Vec<(u32, Vec<TablePoint>)>,
}

impl StepTable {
    pub fn new(points: &[TablePoint]) -> StepTable {
        let mut lines: Vec<(u32, Vec<TablePoint>)> = Vec::new();
        for point in points {
            match lines.iter_mut().find(|(len, _)| *len == point.len) {
                Some((_, line)) => line.push(*point),
                None => lines.push((point.len, vec![*point])),
            }
        }
        lines.sort_by_key(|(len, _)| *len);
        for (_, line) in &mut lines {
            line.sort_by_key(|p| p.batch);
        }
        StepTable { lines }
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// The largest batch measured on every line whose length lies in `[from, to]`, and on the
    /// nearest line beyond each end (the lines an interpolation over that range reads).
    pub fn max_batch(&self, from: u32, to: u32) -> Option<u32> {
        let below = self.lines.iter().rposition(|(len, _)| *len <= from).unwrap_or(0);
        let above = self.lines.iter().position(|(len, _)| *len >= to).unwrap_or(self.lines.len().saturating_sub(1));
        self.lines.get(below..=above)?.iter().map(|(_, line)| line.last().map_or(0, |p| p.batch)).min()
    }

    /// The step time of `batch` at `len`. Within a line, linear between the measured batches
    /// (a batch below the smallest takes the smallest's time; above the largest, `None`). Across
    /// lines, linear between the two lines around `len`; below the shortest line its time, above
    /// the longest a straight line through the two longest (flagged as extrapolated).
    pub fn lookup(&self, batch: u32, len: f64) -> Option<Lookup> {
        let lines: Vec<(f64, Lookup)> =
            self.lines.iter().filter_map(|(l, line)| Some((f64::from(*l), along_batch(line, batch)?))).collect();
        let (first, last) = (lines.first()?, lines.last()?);
        if len <= first.0 {
            return Some(first.1);
        }
        let (a, b, extrapolated) = match lines.windows(2).find(|w| len <= w[1].0) {
            Some(w) => (w[0], w[1], false),
            None if lines.len() >= 2 => (lines[lines.len() - 2], *last, true),
            None => return Some(Lookup { extrapolated: true, ..last.1 }),
        };
        let f = (len - a.0) / (b.0 - a.0);
        Some(Lookup {
            step_s: (a.1.step_s + f * (b.1.step_s - a.1.step_s)).max(a.1.step_s.min(b.1.step_s)),
            power_w: match (a.1.power_w, b.1.power_w) {
                (Some(pa), Some(pb)) => Some((pa + f * (pb - pa)).max(0.0)),
                _ => None,
            },
            extrapolated,
        })
    }
}

fn along_batch(line: &[TablePoint], batch: u32) -> Option<Lookup> {
    let first = line.first()?;
    let at = |p: &TablePoint| Lookup { step_s: p.step_s, power_w: p.power_w, extrapolated: false };
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
    })
}

/// What is simulated.
#[derive(Debug, Clone)]
pub struct SimSetup<'a> {
    pub prefill: &'a StepTable,
    pub decode: &'a StepTable,
    pub isl: u32,
    pub osl: u32,
    /// Most sequences in the server at once (decoding, or prefilling with chunked prefill).
    pub max_batch: u32,
    /// Most prompts one whole-prompt prefill step takes.
    pub max_prefill_batch: u32,
    /// Chunked prefill: prompt tokens added to each decode step.
    pub chunk: Option<u32>,
    pub requests: u32,
    pub seed: u64,
}

/// What one simulated load gave.
#[derive(Debug, Clone, PartialEq)]
pub struct SimOutcome {
    /// Requests per second offered.
    pub rate_per_s: f64,
    pub ttft_p99_s: f64,
    pub tpot_p99_s: f64,
    pub tpot_p50_s: f64,
    /// Output tokens over the simulated time from the first arrival to the last completion.
    pub output_tok_per_s: f64,
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
}

/// A seeded generator (splitmix64): the same seed gives the same arrivals on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// A request's progress.
#[derive(Debug, Clone, Copy, Default)]
struct Request {
    arrival_s: f64,
    first_token_s: f64,
    finish_s: f64,
}

/// Simulated time and energy so far.
struct Clock {
    t: f64,
    energy_j: Option<f64>,
    extrapolated: bool,
}

impl Clock {
    fn spend(&mut self, lookup: Lookup, steps: u64) {
        let dt = lookup.step_s * steps as f64;
        self.t += dt;
        self.energy_j = match (self.energy_j, lookup.power_w) {
            (Some(e), Some(p)) => Some(e + p * dt),
            _ => None,
        };
        self.extrapolated |= lookup.extrapolated;
    }
}

/// Simulate `setup.requests` requests arriving at `rate_per_s`.
pub fn simulate(setup: &SimSetup, rate_per_s: f64) -> Result<SimOutcome, SimError> {
    if !(rate_per_s.is_finite() && rate_per_s > 0.0) {
        return Err(SimError::Setup(format!("request rate {rate_per_s} is not a positive number")));
    }
    if setup.max_batch == 0 || setup.max_prefill_batch == 0 || setup.requests == 0 || setup.osl == 0 {
        return Err(SimError::Setup("max batch, prefill batch, requests and OSL must be positive".to_owned()));
    }
    let n = setup.requests as usize;
    let mut requests = arrivals(setup.seed, n, rate_per_s);
    let decode =
        |batch: u32, ctx: f64| setup.decode.lookup(batch, ctx).ok_or(SimError::NoStepTime { what: "decode", batch });
    let prefill = |batch: u32, len: u32| {
        setup.prefill.lookup(batch, f64::from(len)).ok_or(SimError::NoStepTime { what: "prefill", batch })
    };
    let isl = f64::from(setup.isl);
    let decode_steps_each = u64::from(setup.osl - 1);

    let mut clock = Clock { t: 0.0, energy_j: Some(0.0), extrapolated: false };
    let mut next = 0; // the next request to arrive
    let mut waiting: VecDeque<usize> = VecDeque::new();
    // Chunked prefill: admitted requests and the prompt tokens each has left.
    let mut prefilling: VecDeque<(usize, u32)> = VecDeque::new();
    let mut server = Server { running: BinaryHeap::new(), steps: 0, start_sum: 0.0, starts: vec![0; n], completed: 0 };
    while server.completed < n {
        while next < n && requests[next].arrival_s <= clock.t {
            waiting.push_back(next);
            next += 1;
        }
        let in_server = server.running.len() + prefilling.len();
        let free = (setup.max_batch as usize).saturating_sub(in_server);
        if setup.chunk.is_some() {
            for _ in 0..free.min(waiting.len()) {
                let i = waiting.pop_front().expect("counted");
                prefilling.push_back((i, setup.isl));
            }
        }
        if server.running.is_empty() && prefilling.is_empty() && waiting.is_empty() {
            clock.t = requests[next].arrival_s; // idle until the next arrival
            continue;
        }
        let batch = server.running.len() as u32;
        // Mean context of the decoding sequences at this step: the prompt plus the tokens each
        // has generated.
        let ctx = |steps: u64, start_sum: f64| isl + 1.0 + steps as f64 - start_sum / f64::from(batch.max(1));

        if let Some(chunk) = setup.chunk.filter(|_| !prefilling.is_empty()) {
            // One mixed step: every decoding sequence gains a token, and up to `chunk` prompt
            // tokens are prefilled, front of the queue first.
            let (chunk_tokens, done) = take_chunk(&mut prefilling, chunk);
            if batch > 0 {
                clock.spend(decode(batch, ctx(server.steps, server.start_sum))?, 1);
                server.steps += 1;
            }
            clock.spend(prefill(1, chunk_tokens)?, 1);
            server.retire(clock.t, &mut requests);
            prefilling.retain(|(_, left)| *left > 0);
            for i in done {
                server.first_token(i, clock.t, decode_steps_each, &mut requests);
            }
            continue;
        }
        if setup.chunk.is_none() && free > 0 && !waiting.is_empty() {
            // A whole-prompt prefill step for as many waiting requests as fit.
            let k = free.min(waiting.len()).min(setup.max_prefill_batch as usize);
            clock.spend(prefill(k as u32, setup.isl)?, 1);
            for _ in 0..k {
                let i = waiting.pop_front().expect("counted");
                server.first_token(i, clock.t, decode_steps_each, &mut requests);
            }
            continue;
        }
        // Decode steps, as many as run with the same batch: until the next sequence finishes,
        // or (with a free slot) until the first step that ends after the next arrival.
        let Some(&Reverse((finish_step, _))) = server.running.peek() else {
            clock.t = clock.t.max(requests[next].arrival_s);
            continue;
        };
        let mut group = finish_step - server.steps;
        let now = decode(batch, ctx(server.steps, server.start_sum))?;
        if free > 0 && next < n {
            let until_arrival = ((requests[next].arrival_s - clock.t) / now.step_s).ceil().max(1.0);
            group = group.min(until_arrival as u64);
        }
        // The mean context grows by one per step; the group is charged at its middle.
        let middle = ctx(server.steps, server.start_sum) + (group - 1) as f64 / 2.0;
        clock.spend(decode(batch, middle)?, group);
        server.steps += group;
        server.retire(clock.t, &mut requests);
    }

    outcome(setup, rate_per_s, &requests, &clock)
}

/// `n` requests arriving at `rate_per_s` on a seeded Poisson schedule.
fn arrivals(seed: u64, n: usize, rate_per_s: f64) -> Vec<Request> {
    let mut rng = SplitMix64(seed);
    let mut arrival = 0.0;
    (0..n)
        .map(|_| {
            arrival += -rng.unit().ln() / rate_per_s;
            Request { arrival_s: arrival, ..Request::default() }
        })
        .collect()
}

/// Up to `chunk` prompt tokens taken from the front of `prefilling`: how many were taken, and
/// the requests whose prompts they finished.
fn take_chunk(prefilling: &mut VecDeque<(usize, u32)>, chunk: u32) -> (u32, Vec<usize>) {
    let mut budget = chunk;
    let mut done = Vec::new();
    for (i, left) in prefilling.iter_mut() {
        let take = budget.min(*left);
        *left -= take;
        budget -= take;
        if *left == 0 {
            done.push(*i);
        }
        if budget == 0 {
            break;
        }
    }
    (chunk - budget, done)
}

/// The figures of a finished simulation: p99 TTFT and TPOT over the requests after the first
/// tenth (the server filling up), throughput over the whole, energy per output token.
fn outcome(setup: &SimSetup, rate_per_s: f64, requests: &[Request], clock: &Clock) -> Result<SimOutcome, SimError> {
    let measured = &requests[requests.len() / 10..];
    let ttft = Sorted::new(measured.iter().map(|r| r.first_token_s - r.arrival_s).collect::<Vec<f64>>())?;
    let (tpot_p99_s, tpot_p50_s) = if setup.osl > 1 {
        let tpot = Sorted::new(
            measured.iter().map(|r| (r.finish_s - r.first_token_s) / f64::from(setup.osl - 1)).collect::<Vec<f64>>(),
        )?;
        (tpot.quantile(0.99), tpot.median())
    } else {
        (0.0, 0.0)
    };
    let last = requests.iter().map(|r| r.finish_s).fold(0.0, f64::max);
    let tokens = requests.len() as f64 * f64::from(setup.osl);
    Ok(SimOutcome {
        rate_per_s,
        ttft_p99_s: ttft.quantile(0.99),
        tpot_p99_s,
        tpot_p50_s,
        output_tok_per_s: tokens / (last - requests[0].arrival_s),
        joules_per_output_token: clock.energy_j.map(|e| e / tokens),
        extrapolated: clock.extrapolated,
    })
}

/// The decoding sequences.
struct Server {
    /// By the decode step each finishes at.
    running: BinaryHeap<Reverse<(u64, usize)>>,
    /// Decode steps so far.
    steps: u64,
    /// Sum over running sequences of the step each started at (for their mean context).
    start_sum: f64,
    starts: Vec<u64>,
    completed: usize,
}

impl Server {
    /// Request `i`'s first token came at `t`: it starts decoding (or is done, for OSL 1).
    fn first_token(&mut self, i: usize, t: f64, decode_steps_each: u64, requests: &mut [Request]) {
        requests[i].first_token_s = t;
        if decode_steps_each == 0 {
            requests[i].finish_s = t;
            self.completed += 1;
        } else {
            self.starts[i] = self.steps;
            self.start_sum += self.steps as f64;
            self.running.push(Reverse((self.steps + decode_steps_each, i)));
        }
    }

    /// Finish the sequences whose last decode step has run, at `t`.
    fn retire(&mut self, t: f64, requests: &mut [Request]) {
        while let Some(&Reverse((finish, i))) = self.running.peek() {
            if finish > self.steps {
                break;
            }
            self.running.pop();
            requests[i].finish_s = t;
            self.start_sum -= self.starts[i] as f64;
            self.completed += 1;
        }
    }
}

/// Whether a simulated load keeps p99 TTFT and p99 TPOT inside the bound.
fn within(outcome: &SimOutcome, ttft_p99_s: f64, tpot_p99_s: f64) -> bool {
    outcome.ttft_p99_s <= ttft_p99_s && outcome.tpot_p99_s <= tpot_p99_s
}

/// The highest request rate whose p99 TTFT and TPOT stay inside the bound, and what the
/// simulation gave there; `None` when even a load a ten-thousandth of the server's capacity
/// breaks the bound (a bound tighter than one step admits no load). The rate is found by
/// bisection on a log scale to 0.1%; the same arrivals (scaled) are used at every rate. A bound
/// that holds even at 100 times the server's capacity gives the saturated outcome.
pub fn max_rate(setup: &SimSetup, ttft_p99_s: f64, tpot_p99_s: f64) -> Result<Option<SimOutcome>, SimError> {
    // The decode-only capacity at the largest batch, in requests per second: an upper estimate.
    let full = setup
        .decode
        .lookup(setup.max_batch, f64::from(setup.isl) + f64::from(setup.osl) / 2.0)
        .ok_or(SimError::NoStepTime { what: "decode", batch: setup.max_batch })?;
    let capacity = f64::from(setup.max_batch) / (f64::from(setup.osl) * full.step_s);
    let mut high = 2.0 * capacity;
    for _ in 0..8 {
        let outcome = simulate(setup, high)?;
        if !within(&outcome, ttft_p99_s, tpot_p99_s) {
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
    if !within(&best, ttft_p99_s, tpot_p99_s) {
        return Ok(None);
    }
    while high / low > 1.001 {
        let middle = (low * high).sqrt();
        let outcome = simulate(setup, middle)?;
        if within(&outcome, ttft_p99_s, tpot_p99_s) {
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

    /// A table whose step time is `step_s` for every batch up to `max_batch` and every length.
    fn flat(step_s: f64, max_batch: u32) -> StepTable {
        StepTable::new(&[
            TablePoint { batch: 1, len: 1, step_s, power_w: Some(100.0) },
            TablePoint { batch: max_batch, len: 1, step_s, power_w: Some(100.0) },
        ])
    }

    fn setup<'a>(prefill: &'a StepTable, decode: &'a StepTable, max_batch: u32) -> SimSetup<'a> {
        SimSetup {
            prefill,
            decode,
            isl: 128,
            osl: 64,
            max_batch,
            max_prefill_batch: max_batch,
            chunk: None,
            requests: 1000,
            seed: 7,
        }
    }

    #[test]
    fn lookup_interpolates_over_batch_and_length_and_flags_extrapolation() {
        let table = StepTable::new(&[
            TablePoint { batch: 1, len: 100, step_s: 1.0, power_w: None },
            TablePoint { batch: 4, len: 100, step_s: 4.0, power_w: None },
            TablePoint { batch: 1, len: 200, step_s: 2.0, power_w: None },
            TablePoint { batch: 4, len: 200, step_s: 8.0, power_w: None },
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
    }

    #[test]
    fn at_very_low_load_p99_ttft_is_the_prefill_time() {
        let prefill = flat(0.25, 8);
        let decode = flat(0.01, 8);
        let setup = setup(&prefill, &decode, 8);
        // One request every 10 000 s on average: no two ever overlap.
        let outcome = simulate(&setup, 1e-4).unwrap();
        assert!((outcome.ttft_p99_s - 0.25).abs() < 1e-9, "{outcome:?}");
        assert!((outcome.tpot_p99_s - 0.01).abs() < 1e-9, "{outcome:?}");
        assert!((outcome.joules_per_output_token.unwrap() - 100.0 * (0.25 + 63.0 * 0.01) / 64.0).abs() < 1e-9);
    }

    #[test]
    fn throughput_saturates_at_max_batch_over_tpot() {
        // Prefill almost free; decode 20 ms at any batch up to 16: at most 16 / 0.02 = 800 tok/s.
        let prefill = flat(1e-9, 16);
        let decode = flat(0.02, 16);
        let mut setup = setup(&prefill, &decode, 16);
        setup.osl = 512;
        let overloaded = simulate(&setup, 1000.0).unwrap();
        assert!((overloaded.output_tok_per_s / 800.0 - 1.0).abs() < 0.01, "{overloaded:?}");
        let bounded = max_rate(&setup, 1e9, 1.0).unwrap().unwrap();
        assert!(bounded.output_tok_per_s <= 800.0 * 1.0001, "{bounded:?}");
    }

    #[test]
    fn a_bound_tighter_than_one_decode_step_admits_no_load() {
        let prefill = flat(0.05, 8);
        let decode = flat(0.03, 8);
        let setup = setup(&prefill, &decode, 8);
        assert_eq!(max_rate(&setup, 10.0, 0.029).unwrap(), None);
        let loose = max_rate(&setup, 10.0, 0.031).unwrap().unwrap();
        assert!(loose.tpot_p99_s <= 0.031 && loose.rate_per_s > 0.0, "{loose:?}");
    }

    #[test]
    fn the_same_seed_gives_the_same_answer_and_another_seed_another() {
        let prefill = StepTable::new(&[
            TablePoint { batch: 1, len: 128, step_s: 0.05, power_w: None },
            TablePoint { batch: 8, len: 128, step_s: 0.2, power_w: None },
        ]);
        let decode = StepTable::new(&[
            TablePoint { batch: 1, len: 128, step_s: 0.01, power_w: None },
            TablePoint { batch: 8, len: 128, step_s: 0.02, power_w: None },
            TablePoint { batch: 1, len: 256, step_s: 0.012, power_w: None },
            TablePoint { batch: 8, len: 256, step_s: 0.03, power_w: None },
        ]);
        let a = setup(&prefill, &decode, 8);
        let first = max_rate(&a, 1.0, 0.05).unwrap().unwrap();
        assert_eq!(first, max_rate(&a, 1.0, 0.05).unwrap().unwrap());
        let b = SimSetup { seed: 8, ..a.clone() };
        assert_ne!(simulate(&a, first.rate_per_s).unwrap(), simulate(&b, first.rate_per_s).unwrap());
        assert!(first.ttft_p99_s <= 1.0 && first.tpot_p99_s <= 0.05 && first.joules_per_output_token.is_none());
    }

    #[test]
    fn chunked_prefill_keeps_decoding_while_prompts_fill() {
        let prefill = StepTable::new(&[
            TablePoint { batch: 1, len: 16, step_s: 0.004, power_w: None },
            TablePoint { batch: 1, len: 128, step_s: 0.02, power_w: None },
        ]);
        let decode = flat(0.01, 8);
        let mut chunked = setup(&prefill, &decode, 8);
        chunked.chunk = Some(64);
        let low = simulate(&chunked, 1e-4).unwrap();
        // Alone, a 128-token prompt takes two 64-token chunks of (interpolated) 0.012 s each.
        let chunk_s = 0.004 + (64.0 - 16.0) / (128.0 - 16.0) * (0.02 - 0.004);
        assert!((low.ttft_p99_s - 2.0 * chunk_s).abs() < 1e-9, "{low:?}");
        let busy = max_rate(&chunked, 1.0, 0.05).unwrap().unwrap();
        assert!(busy.tpot_p99_s <= 0.05 && busy.output_tok_per_s > 0.0, "{busy:?}");
    }
}
