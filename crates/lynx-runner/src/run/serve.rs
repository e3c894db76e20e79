//! The serving phase (docs/SWEEPS.md, "Serving"): a real continuous-batching server on the
//! device, on the run's model, driven by a seeded Poisson schedule of requests.
//!
//! The server is the one the simulation models ([`lynx_analysis::sim`]): the decoding sequences
//! occupy the first rows of a KV pool of `max_batch` rows, each at its own position; a decode
//! step runs them all, attending each row's keys up to the longest row. Whole prompts are
//! prefilled in a step of their own (right-padded to the longest of the step, at most
//! `max_prefill_batch`), or, with chunked prefill, up to `chunk` prompt tokens after each decode
//! step, front of the queue first, each prompt in a row of its own above the running ones. A
//! finished sequence's row is taken by a running one from beyond the rows kept, so the running
//! rows stay the first ones; a prompt that finishes takes the first row after them. Every
//! output token is the model's greedy choice fed back; no request stops before its output
//! length.
//!
//! Where the run's graph steps passed their check, decode steps are replayed as graphs, as
//! serving engines run them: the step captured before the first request at each batch of
//! [`ladder_to`] the cap, over the pool's whole capacity (its kernels the same at every
//! position); a step of `n` sequences replays the smallest captured batch of at least `n`.

use super::graph::{Captured, Graphs};
use lynx_analysis::lengths::Lengths;
use lynx_analysis::rng::SplitMix64;
use lynx_analysis::sim::{ladder_to, Served, StepTable};
use lynx_models::{KvCache, Logits, Model, ModelError};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tch::{Kind, Tensor};

/// A server's limits, and how it issues its decode steps.
pub(super) struct Server {
    pub max_batch: u32,
    pub max_prefill_batch: u32,
    pub chunk: Option<u32>,
    /// Decode steps replayed as graphs captured this way (see [`serve`]), or issued eagerly.
    pub graphs: Option<Graphs>,
    /// How much longer each decode step takes (the test hook
    /// [`super::SIMULATE_SLOW_SERVING_VAR`]; zero otherwise).
    pub slower_decode: Duration,
    /// The prefill and decode tables whose time each step lasts at least (the test hook
    /// [`super::SIMULATE_CELL_PACE_VAR`]; none otherwise).
    pub at_least: Option<(StepTable, StepTable)>,
}

/// Why a load, or a workload's rates, were not served.
#[derive(Debug)]
pub(super) enum ServeError {
    /// Capturing the graph steps failed, before the first request (the step's eager run, its
    /// capture or its first replay): the load can still be served with eager steps.
    Capture(String),
    /// Why not, as the workload's entry records it (a step of the load failed, say).
    Failed(String),
}

impl From<ModelError> for ServeError {
    fn from(error: ModelError) -> Self {
        ServeError::Failed(super::cell::without_backtrace(&error.to_string()))
    }
}

impl From<tch::TchError> for ServeError {
    fn from(error: tch::TchError) -> Self {
        ModelError::from(error).into()
    }
}

/// What one load served gave.
pub(super) struct Load {
    /// Each request's timestamps, in arrival order (seconds from the first arrival's clock).
    pub served: Vec<Served>,
    /// The loop's own time in each iteration: the iteration's wall time less its model steps.
    pub overhead_s: Vec<f64>,
    /// The window on the run's telemetry clock: the first arrival to the last token.
    pub window_s: (f64, f64),
    /// Requests the time limit cut off (not in `served`).
    pub unfinished: usize,
    /// Every model step the loop ran, as the step tables would name it.
    pub steps: Vec<Step>,
    /// Each request's output tokens, where asked for (tests compare them with the request
    /// decoded alone).
    #[cfg_attr(not(test), allow(dead_code))]
    pub outputs: Option<Vec<Vec<i64>>>,
}

/// One model step of the loop: its kind, batch, length (a decode step's keys a row, a prefill
/// step's padded prompt) and wall time.
#[derive(Debug, Clone, Copy)]
pub(super) struct Step {
    pub prefill: bool,
    pub batch: u32,
    pub len: u32,
    pub seconds: f64,
    /// When it started, in seconds on the arrivals' clock.
    pub start_s: f64,
    /// The first step of its kind since the loop waited, idle, for an arrival.
    pub after_idle: bool,
    /// What the loop's thread did during it, as for a cell's step (`None` where the kernel did
    /// not say).
    pub thread: Option<lynx_analysis::cell::ThreadStep>,
    /// The calls libtorch's caching allocator made to the driver for memory during it, as for a
    /// cell's step (`None` on a CPU, and where they could not be asked).
    pub allocator_calls: Option<u64>,
}

/// A sequence in the pool.
#[derive(Debug, Clone, Copy)]
struct Slot {
    request: usize,
    /// The pool row of a sequence being prefilled (a running sequence's row is its place among
    /// the running ones).
    row: i64,
    /// Tokens in the cache (prompt tokens prefilled so far, then generated ones).
    len: i64,
    /// Output tokens produced.
    produced: u32,
}

/// The prompt of request `i`: token ids drawn from the seed.
fn prompt(seed: u64, i: usize, len: u32, vocab: i64) -> Vec<i64> {
    let mut rng = SplitMix64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (0..len).map(|_| (rng.next_u64() % vocab as u64) as i64).collect()
}

/// The requests one load serves.
pub(super) struct Requests<'a> {
    /// Input and output lengths, in arrival order.
    pub lengths: &'a [Lengths],
    /// When each arrives, in seconds from the start.
    pub arrivals_s: &'a [f64],
    /// Seeds the prompts.
    pub seed: u64,
}

/// Serve `requests` on `model`; `None` when `stop` was raised. Requests not finished by `max_s`
/// are left out. `clock` is the run's telemetry clock, for the window; with `keep_outputs` the
/// load keeps every request's output tokens.
pub(super) fn serve(
    model: &Model,
    server: &Server,
    requests: &Requests,
    max_s: f64,
    clock: &dyn Fn() -> f64,
    keep_outputs: bool,
    stop: &AtomicBool,
) -> Result<Option<Load>, ServeError> {
    let (lengths, arrivals_s, seed) = (requests.lengths, requests.arrivals_s, requests.seed);
    let n = lengths.len();
    let device = model.device();
    let capacity = lengths.iter().map(|l| i64::from(l.isl + l.osl)).max().unwrap_or(1);
    // With chunked prefill the pool has a row more than the cap: the rows being prefilled sit
    // apart from the running ones, and a prompt that finishes takes the first row after those,
    // whoever holds it moving to a free row first.
    let rows = i64::from(lynx_analysis::serving::pool_rows(server.max_batch, server.chunk.is_some()));
    let pool = KvCache::new(model, rows, capacity)?;
    let tokens = Tensor::f_zeros([rows, 1], (Kind::Int64, device))?;
    let positions = Tensor::f_zeros([rows], (Kind::Int64, device))?;
    let prompts: Vec<Vec<i64>> =
        lengths.iter().enumerate().map(|(i, l)| prompt(seed, i, l.isl, model.vocab_size())).collect();
    // A decode step of the first `b` rows: each reads its token at its position on the device,
    // attends the pool's first `span` keys (those after its position masked), writes its greedy
    // token over the one it read and advances its position; the tokens chosen. An eager step
    // spans the longest row; a graph step the pool's whole capacity.
    let decode_step = |b: i64, span: i64| -> Result<Tensor, ModelError> {
        let logits =
            model.decode_rows(&tokens.f_narrow(0, 0, b)?, &pool.rows(0, b, 0)?, &positions.f_narrow(0, 0, b)?, span)?;
        let chosen = logits.f_argmax(-1, false)?;
        tokens.f_narrow(0, 0, b)?.f_copy_(&chosen)?;
        let mut advanced = positions.f_narrow(0, 0, b)?;
        let _ = lynx_models::scalar_call(|| advanced.f_add_scalar_(1))?;
        Ok(chosen)
    };
    let graph_step = move |b: i64| decode_step(b, capacity).map(|_| ());
    let graph_error = |e: String| ModelError::Unsupported(format!("graph step: {e}"));
    // Captured before the first request, untimed, as serving engines capture theirs at start-up:
    // each after one eager run (libraries initialise lazily), and replayed once (a graph's first
    // launch uploads it). Those runs write at position 0 of rows no sequence holds yet (each
    // starts from position 0: a position must stay inside the pool). Every graph is kept until
    // the load ends (destroying one while another is still replayed can free a workspace the
    // other uses: run/graph.rs).
    let mut graphs: Vec<(i64, Captured)> = Vec::new();
    if let Some(how) = &server.graphs {
        let rewind = || lynx_models::scalar_call(|| positions.shallow_clone().f_fill_(0)).map(|_| ());
        let mut capture = |b: i64| -> Result<(), String> {
            rewind().map_err(|e| e.to_string())?;
            how.as_captured(|| graph_step(b)).map_err(|e| format!("the eager run before capture at batch {b}: {e}"))?;
            let mut captured = how.capture(move || graph_step(b)).map_err(|e| format!("at batch {b}: {e}"))?;
            rewind().map_err(|e| e.to_string())?;
            captured.replay().map_err(|e| format!("the first replay at batch {b}: {e}"))?;
            graphs.push((b, captured));
            Ok(())
        };
        for b in ladder_to(server.max_batch).into_iter().map(i64::from) {
            capture(b).map_err(|e| ServeError::Capture(super::cell::without_backtrace(&e)))?;
        }
        rewind()?;
    }

    let mut times = vec![Served { arrival_s: 0.0, first_token_s: 0.0, finish_s: 0.0, isl: 0, osl: 0 }; n];
    let mut done = vec![false; n];
    let mut waiting: VecDeque<usize> = VecDeque::new();
    // The pool's rows: the running sequences first; (chunked prefill) those being prefilled in
    // rows of their own above them.
    let mut running: Vec<Slot> = Vec::new();
    let mut prefilling: VecDeque<Slot> = VecDeque::new();
    let mut overhead_s = Vec::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut next = 0;
    let mut completed = 0;
    // Whether the loop has waited, idle, since its last decode and its last prefill step.
    let mut idled = [false; 2];
    let start = Instant::now();
    let window_start = clock();
    let mut outputs: Vec<Vec<i64>> = vec![Vec::new(); if keep_outputs { n } else { 0 }];
    let mut keep = |request: usize, token: i64| {
        if let Some(output) = outputs.get_mut(request) {
            output.push(token);
        }
    };
    let now = || start.elapsed().as_secs_f64();
    while completed < n {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        if now() > max_s {
            break;
        }
        let began = now();
        while next < n && arrivals_s[next] <= began {
            waiting.push_back(next);
            next += 1;
        }
        let free = (server.max_batch as usize).saturating_sub(running.len() + prefilling.len());
        if server.chunk.is_some() {
            for _ in 0..free.min(waiting.len()) {
                let request = waiting.pop_front().expect("counted");
                let row = free_row(rows, running.len(), &prefilling, None)?;
                prefilling.push_back(Slot { request, row, len: 0, produced: 0 });
            }
        }
        if running.is_empty() && prefilling.is_empty() && waiting.is_empty() {
            // Idle until the next arrival: not the loop's time.
            if let Some(&at) = arrivals_s.get(next) {
                let wait = at - now();
                if wait > 0.0 {
                    std::thread::sleep(Duration::from_secs_f64(wait));
                    idled = [true; 2];
                }
            }
            continue;
        }
        let mut in_steps = 0.0;
        // A model step (its kind, batch and length as the step tables name them), timed until its
        // tokens are on the host: (its tokens, when they were).
        let mut timed = |(prefill, batch, len): (bool, usize, i64),
                         step: &mut dyn FnMut() -> Result<Vec<i64>, ModelError>|
         -> Result<(Vec<i64>, f64), ModelError> {
            let calls_before = crate::cuda::allocator_calls(device);
            let usage = crate::host_load::ThreadUsage::before();
            let from = now();
            let out = step()?;
            if !prefill && !server.slower_decode.is_zero() {
                std::thread::sleep(server.slower_decode);
            }
            if let Some((prefill_table, decode_table)) = &server.at_least {
                let table = if prefill { prefill_table } else { decode_table };
                let left = table.lookup(batch as u32, len as f64).map_or(0.0, |l| from + l.step_s - now());
                if left > 0.0 {
                    std::thread::sleep(Duration::from_secs_f64(left));
                }
            }
            let at = now();
            let thread = usage
                .zip(crate::host_load::ThreadUsage::after())
                .map(|(before, after)| after.over_step(&before, at - from));
            let allocator_calls = calls_before
                .zip(crate::cuda::allocator_calls(device))
                .map(|(before, after)| after.saturating_sub(before));
            in_steps += at - from;
            let after_idle = std::mem::take(&mut idled[usize::from(prefill)]);
            steps.push(Step {
                prefill,
                batch: batch as u32,
                len: len as u32,
                seconds: at - from,
                start_s: from,
                after_idle,
                thread,
                allocator_calls,
            });
            Ok((out, at))
        };
        if server.chunk.is_none() && free > 0 && !waiting.is_empty() {
            // A whole-prompt prefill step into the rows after the running ones.
            let k = free.min(waiting.len()).min(server.max_prefill_batch as usize);
            let admitted: Vec<usize> = waiting.drain(..k).collect();
            let longest = admitted.iter().map(|&i| lengths[i].isl).max().unwrap_or(1) as usize;
            let mut padded = vec![0i64; k * longest];
            for (row, &i) in admitted.iter().enumerate() {
                padded[row * longest..row * longest + prompts[i].len()].copy_from_slice(&prompts[i]);
            }
            let last: Vec<i64> = admitted.iter().map(|&i| i64::from(lengths[i].isl) - 1).collect();
            let isls: Vec<i64> = admitted.iter().map(|&i| i64::from(lengths[i].isl)).collect();
            let b = running.len() as i64;
            let (first, at) = timed((true, k, longest as i64), &mut || {
                let prompts = Tensor::f_from_slice(&padded)?.f_view([k as i64, longest as i64])?.f_to_device(device)?;
                let last = Tensor::f_from_slice(&last)?.f_to_device(device)?;
                let first = model.prefill_rows(&prompts, &last, &mut pool.rows(b, k as i64, 0)?)?;
                tokens.f_narrow(0, b, k as i64)?.f_copy_(&first)?;
                positions.f_narrow(0, b, k as i64)?.f_copy_(&Tensor::f_from_slice(&isls)?.f_to_device(device)?)?;
                Ok(Vec::<i64>::try_from(&first.f_to_device(tch::Device::Cpu)?.f_flatten(0, -1)?)?)
            })?;
            for (&i, &token) in admitted.iter().zip(&first) {
                keep(i, token);
                times[i].first_token_s = at;
                let row = running.len() as i64;
                running.push(Slot { request: i, row, len: i64::from(lengths[i].isl), produced: 1 });
            }
        } else {
            let n = running.len() as i64;
            let decoded = if n == 0 {
                None
            } else if let Some((b, graph)) = graphs.iter_mut().find(|(b, _)| *b >= n) {
                let b = *b;
                Some(timed((false, b as usize, capacity), &mut || {
                    if b > n {
                        // The rows beyond the running ones (free, or holding a prompt being
                        // prefilled) write at the pool's last position, which no sequence attends
                        // before it has written there itself; their tokens are set when theirs
                        // are.
                        let mut spare = positions.f_narrow(0, n, b - n)?;
                        let _ = lynx_models::scalar_call(|| spare.f_fill_(capacity - 1))?;
                    }
                    graph.replay().map_err(graph_error)?;
                    Ok(Vec::<i64>::try_from(
                        &tokens.f_narrow(0, 0, n)?.f_to_device(tch::Device::Cpu)?.f_flatten(0, -1)?,
                    )?)
                })?)
            } else {
                let span = running.iter().map(|s| s.len).max().unwrap_or(0) + 1;
                Some(timed((false, n as usize, span), &mut || {
                    let chosen = decode_step(n, span)?;
                    Ok(Vec::<i64>::try_from(&chosen.f_to_device(tch::Device::Cpu)?.f_flatten(0, -1)?)?)
                })?)
            };
            if let Some((chosen, at)) = decoded {
                for (slot, &token) in running.iter_mut().zip(&chosen) {
                    keep(slot.request, token);
                    slot.len += 1;
                    slot.produced += 1;
                    if slot.produced == lengths[slot.request].osl {
                        times[slot.request].finish_s = at;
                    }
                }
            }
            if let Some(chunk) = server.chunk {
                // Prompt pieces, front of the queue first, each into its own row.
                let mut budget = chunk;
                let mut finished_prompts = 0;
                for slot in prefilling.iter_mut() {
                    if budget == 0 {
                        break;
                    }
                    let isl = i64::from(lengths[slot.request].isl);
                    let take = i64::from(budget).min(isl - slot.len);
                    budget -= take as u32;
                    let row = slot.row;
                    let piece = prompts[slot.request][slot.len as usize..(slot.len + take) as usize].to_vec();
                    let from = slot.len;
                    let (first, at) = timed((true, 1, take), &mut || {
                        let piece = Tensor::f_from_slice(&piece)?.f_view([1, take])?.f_to_device(device)?;
                        let mut cache = pool.rows(row, 1, from)?;
                        let logits = model.forward(&piece, &mut cache, Logits::Last)?;
                        if from + take < isl {
                            return Ok(Vec::new());
                        }
                        let first = logits.f_argmax(-1, false)?;
                        tokens.f_narrow(0, row, 1)?.f_copy_(&first)?;
                        let mut at = positions.f_narrow(0, row, 1)?;
                        let _ = lynx_models::scalar_call(|| at.f_fill_(isl))?;
                        Ok(Vec::<i64>::try_from(&first.f_to_device(tch::Device::Cpu)?.f_flatten(0, -1)?)?)
                    })?;
                    slot.len += take;
                    if slot.len == isl {
                        keep(slot.request, first[0]);
                        slot.produced = 1;
                        times[slot.request].first_token_s = at;
                        finished_prompts += 1;
                    }
                }
                // Prompts finish front first; each takes the first row after the running ones.
                for _ in 0..finished_prompts {
                    let slot = prefilling.pop_front().expect("counted");
                    let b = running.len() as i64;
                    if slot.row != b {
                        if let Some(at) = prefilling.iter().position(|s| s.row == b) {
                            let to = free_row(rows, running.len(), &prefilling, Some(slot.row))?;
                            move_row(&pool, &tokens, &positions, b, to, prefilling[at].len)?;
                            prefilling[at].row = to;
                        }
                        move_row(&pool, &tokens, &positions, slot.row, b, slot.len)?;
                    }
                    running.push(slot);
                }
            }
        }
        // Retire the finished sequences. The unfinished ones must fill the first rows: each one
        // beyond them takes a freed row below (the fewest moves). Rows being prefilled stay.
        let before = running.len();
        let unfinished = |slot: &Slot| slot.produced < lengths[slot.request].osl;
        for slot in running.iter().filter(|s| !unfinished(s)) {
            if lengths[slot.request].osl == 1 {
                times[slot.request].finish_s = times[slot.request].first_token_s;
            }
            done[slot.request] = true;
            completed += 1;
        }
        let kept = running.iter().filter(|s| unfinished(s)).count();
        if kept < before {
            let holes: Vec<usize> = (0..kept).filter(|&r| !unfinished(&running[r])).collect();
            let movers: Vec<usize> = (kept..before).filter(|&r| unfinished(&running[r])).collect();
            for (to, from) in holes.into_iter().zip(movers) {
                move_row(&pool, &tokens, &positions, from as i64, to as i64, running[from].len)?;
                running[to] = running[from];
            }
            running.truncate(kept);
        }
        overhead_s.push((now() - began - in_steps).max(0.0));
    }
    let window_end = clock();
    let served: Vec<Served> = (0..n)
        .filter(|&i| done[i])
        .map(|i| Served { arrival_s: arrivals_s[i], isl: lengths[i].isl, osl: lengths[i].osl, ..times[i] })
        .collect();
    Ok(Some(Load {
        unfinished: n - served.len(),
        served,
        overhead_s,
        window_s: (window_start, window_end),
        steps,
        outputs: keep_outputs.then_some(outputs),
    }))
}

/// The serving loop's own time in each iteration (wall time less its model steps) and its model
/// steps' times, serving `lengths` arriving at `arrivals_s` on `model` with at most `max_batch`
/// sequences, whole-prompt prefill of up to `max_prefill_batch` prompts a step or chunks of
/// `chunk` tokens: the loop the serving phase runs, for `cargo bench -p lynx-runner --bench
/// serving_loop` (the `serving_overhead` check holds the loop's time under 1 ms).
pub fn loop_overhead(
    model: &Model,
    max_batch: u32,
    max_prefill_batch: u32,
    chunk: Option<u32>,
    lengths: &[Lengths],
    arrivals_s: &[f64],
) -> Result<(Vec<f64>, Vec<f64>), ModelError> {
    let server =
        Server { max_batch, max_prefill_batch, chunk, graphs: None, slower_decode: Duration::ZERO, at_least: None };
    let requests = Requests { lengths, arrivals_s, seed: 1 };
    let stop = AtomicBool::new(false);
    // Nothing raises this stop, so the load is always served.
    // Without graphs nothing is captured: every error is a step's.
    let load = serve(model, &server, &requests, f64::INFINITY, &|| 0.0, false, &stop).map_err(|e| match e {
        ServeError::Failed(reason) | ServeError::Capture(reason) => ModelError::Unsupported(reason),
    })?;
    let Some(load) = load else {
        return Ok((Vec::new(), Vec::new()));
    };
    Ok((load.overhead_s, load.steps.iter().map(|s| s.seconds).collect()))
}

/// The highest of the pool's `rows` above the `running` ones that no sequence being prefilled
/// holds, nor `taken`: prompts are prefilled at the top, away from where the running rows grow.
/// The pool has a row more than the batch cap, so there always is one.
fn free_row(rows: i64, running: usize, prefilling: &VecDeque<Slot>, taken: Option<i64>) -> Result<i64, ModelError> {
    (running as i64..rows)
        .rev()
        .find(|&r| Some(r) != taken && prefilling.iter().all(|s| s.row != r))
        .ok_or_else(|| ModelError::Shape(format!("no free row among {rows} with {running} running")))
}

/// Row `from` of the pool (its first `len` cached tokens, its next token and position) over row
/// `to`.
fn move_row(
    pool: &KvCache,
    tokens: &Tensor,
    positions: &Tensor,
    from: i64,
    to: i64,
    len: i64,
) -> Result<(), ModelError> {
    if from == to {
        return Ok(());
    }
    pool.move_row(from, to, len)?;
    tokens.f_narrow(0, to, 1)?.f_copy_(&tokens.f_narrow(0, from, 1)?)?;
    positions.f_narrow(0, to, 1)?.f_copy_(&positions.f_narrow(0, from, 1)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::config::{ModelShape, Precision};

    const TINY: &str = r#"
name = "tiny"
vocab_size = 97
hidden_size = 64
num_layers = 2
rms_norm_eps = 1e-5
init_std = 0.1
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
rope_theta = 10000.0
sliding_window = { size = 6, layers = "even" }
[mlp]
intermediate_size = 128
"#;

    /// Request `i`'s output decoded alone: its prompt, then greedy tokens fed back.
    fn alone(model: &Model, prompt: &[i64], osl: u32) -> Vec<i64> {
        let mut cache = KvCache::new(model, 1, prompt.len() as i64 + i64::from(osl)).unwrap();
        let mut input = Tensor::from_slice(prompt).view([1, -1]);
        let mut out = Vec::new();
        for _ in 0..osl {
            let next = model.forward(&input, &mut cache, Logits::Last).unwrap().argmax(-1, false);
            out.push(next.int64_value(&[0, 0]));
            input = next.view([1, 1]);
        }
        out
    }

    /// The serving loop's bookkeeping (rows taken by the last running sequence, rows being
    /// prefilled moved down, padded prompts, chunks across prompts, one-token outputs) keeps every
    /// request on its own sequence: each gets exactly the tokens it gets decoded alone, with
    /// whole-prompt and with chunked prefill, eager and with graph steps (through the stand-in
    /// that issues the captured step again at each replay: the rows a captured batch runs beyond
    /// the running ones, free or being prefilled, must not disturb any), and its times are in
    /// order.
    #[test]
    fn every_request_gets_the_tokens_it_gets_decoded_alone() {
        let shape = ModelShape::from_toml(TINY, "tiny.toml").unwrap();
        let model = Model::new(&shape, Precision::Fp32, tch::Device::Cpu, 7).unwrap();
        let mixed: Vec<Lengths> =
            [(5, 4), (9, 1), (3, 6), (12, 3), (4, 5), (7, 2), (2, 7)].map(|(isl, osl)| Lengths { isl, osl }).to_vec();
        // Some arrive together, some while others decode.
        let mixed_arrivals_s = [0.0, 0.0, 0.0, 0.0, 0.02, 0.04, 0.3];
        // Sequences that finish together, several in one iteration, at a cap of 4 (with chunks
        // of 3, while rows behind them are being prefilled).
        let together: Vec<Lengths> = (0..9).map(|i| Lengths { isl: 2 + i % 4, osl: 3 + i / 6 }).collect();
        let together_arrivals_s = [0.0; 9];
        // A prompt that finishes while the first row after the running ones holds another prompt,
        // part prefilled: that one moves to a free row first (cap 3, chunks of 4).
        let displaced: Vec<Lengths> = [(3, 5), (6, 4), (6, 3), (4, 2)].map(|(isl, osl)| Lengths { isl, osl }).to_vec();
        // Five sequences decoding while three long prompts are prefilled a chunk at a time, at a
        // cap of 8: a graph step of five replays the batch of 8, whose rows beyond the five
        // include rows being prefilled.
        let overlapping: Vec<Lengths> =
            (0..8).map(|i| if i < 5 { Lengths { isl: 2, osl: 24 } } else { Lengths { isl: 12, osl: 3 } }).collect();
        // A pool of three tokens a row, shorter than the ladder of captured batches (1 to 8).
        let short: Vec<Lengths> = (0..9).map(|_| Lengths { isl: 1, osl: 2 }).collect();
        let cases = [
            (&overlapping, &together_arrivals_s[..8], 8, [None, Some(2)]),
            (&short, &together_arrivals_s[..], 8, [None, Some(1)]),
            (&mixed, &mixed_arrivals_s[..], 3, [None, Some(7)]),
            (&together, &together_arrivals_s[..], 4, [None, Some(3)]),
            (&displaced, &together_arrivals_s[..4], 3, [None, Some(4)]),
        ];
        let modes: &[Option<Graphs>] = &[None, Some(Graphs::Reissue)];
        for (lengths, arrivals_s, max_batch, chunk, graphs) in cases.into_iter().flat_map(|(l, a, b, chunks)| {
            chunks.into_iter().flat_map(move |chunk| modes.iter().cloned().map(move |graphs| (l, a, b, chunk, graphs)))
        }) {
            let requests = Requests { lengths, arrivals_s, seed: 3 };
            let server = Server {
                max_batch,
                max_prefill_batch: 2,
                chunk,
                graphs: graphs.clone(),
                slower_decode: Duration::ZERO,
                at_least: None,
            };
            let stop = AtomicBool::new(false);
            let start = Instant::now();
            let clock = || start.elapsed().as_secs_f64();
            let load = serve(&model, &server, &requests, 60.0, &clock, true, &stop).unwrap().unwrap();
            assert_eq!((load.served.len(), load.unfinished), (lengths.len(), 0), "{chunk:?}");
            let outputs = load.outputs.unwrap();
            for (i, l) in lengths.iter().enumerate() {
                let expected = alone(&model, &prompt(3, i, l.isl, 97), l.osl);
                assert_eq!(outputs[i], expected, "request {i} with chunk {chunk:?}");
                let s = load.served[i];
                assert!(s.arrival_s <= s.first_token_s && s.first_token_s <= s.finish_s, "{i}: {s:?}");
                assert_eq!(s.osl, l.osl);
            }
            let decodes = load.steps.iter().filter(|s| !s.prefill).count();
            // The first steps wait for nothing; the last request arrives after the others are done
            // (the loop idles): its prefill and its first decode step come after an idle gap.
            assert!(!load.steps[0].after_idle, "{:?}", load.steps[0]);
            if arrivals_s.last() == Some(&0.3) {
                let after: Vec<bool> = load.steps.iter().filter(|s| s.after_idle).map(|s| s.prefill).collect();
                assert!(after.contains(&true) && after.contains(&false), "{:?}", load.steps);
            }
            assert!(load.overhead_s.len() >= decodes, "an iteration for each decode step at least");
            if graphs.is_some() {
                // Graph steps run at a captured batch over the pool's whole capacity.
                let capacity = lengths.iter().map(|l| l.isl + l.osl).max().unwrap();
                let batches = ladder_to(max_batch);
                for step in load.steps.iter().filter(|s| !s.prefill) {
                    assert!(batches.contains(&step.batch) && step.len == capacity, "{step:?} against {batches:?}");
                }
            }
            match chunk {
                None => assert!(load.steps.iter().any(|s| !s.prefill && s.batch == max_batch), "{:?}", load.steps),
                // A mixed iteration: a decode step, then a prompt piece.
                Some(_) => assert!(load.steps.windows(2).any(|w| !w[0].prefill && w[1].prefill), "{:?}", load.steps),
            }
        }
    }

    /// A capture of the graph steps that fails is a capture error, naming the batch and the
    /// reason, before any request is served: the phase then serves with eager steps.
    #[test]
    fn a_capture_that_fails_is_a_capture_error() {
        let shape = ModelShape::from_toml(TINY, "tiny.toml").unwrap();
        let model = Model::new(&shape, Precision::Fp32, tch::Device::Cpu, 7).unwrap();
        let lengths = [Lengths { isl: 3, osl: 2 }; 2];
        let requests = Requests { lengths: &lengths, arrivals_s: &[0.0, 0.0], seed: 3 };
        let stop = AtomicBool::new(false);
        let refused = Graphs::Unavailable("no graph here".to_owned());
        let server = Server {
            max_batch: 2,
            max_prefill_batch: 2,
            chunk: None,
            graphs: Some(refused),
            slower_decode: Duration::ZERO,
            at_least: None,
        };
        match serve(&model, &server, &requests, 60.0, &|| 0.0, false, &stop) {
            Err(ServeError::Capture(reason)) => assert_eq!(reason, "at batch 1: no graph here"),
            other => panic!("{:?}", other.map(|l| l.map(|l| l.served.len()))),
        }
    }
}
