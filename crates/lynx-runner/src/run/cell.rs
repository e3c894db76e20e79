//! One cell measured: an untimed step, then timed steps until the suite's limits, summarised
//! into the cell's record with its telemetry.

use super::graph::{Graphs, StepBuffers};
use crate::host_load::ThreadUsage;
use crate::telemetry::RunTelemetry;
use lynx_analysis::memory::{decode_capacity, expected_decode_steps};
use lynx_models::{KvCache, Model, ModelError};
use lynx_schema::config::MeasureConfig;
use lynx_schema::result::{AttentionKernel, CellRecord, CellShape, StepMode};
use lynx_schema::stats::StepTimeSummary;
use lynx_schema::value::Finite;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tch::Tensor;

/// The model with no layers, for extrapolating a layer subset to full depth.
pub(super) struct HeadOnly {
    pub model: Model,
    pub measured_layers: u32,
    pub model_layers: u32,
}

/// Why a cell has no record.
enum CellFailure {
    /// A step failed: the cell is recorded as failed with this message.
    Failed(String),
    /// The measurement contradicted itself: a layer subset, which holds its head-only model,
    /// measured no slower than that model alone (the pace moved between the two). The cell is
    /// recorded as failed with this message, and is worth measuring once more.
    Contradicted(String),
    /// The stop flag was raised: the cell is left to be measured again.
    Stopped,
}

impl From<String> for CellFailure {
    fn from(message: String) -> Self {
        CellFailure::Failed(message)
    }
}

/// A libtorch error message without the C++ backtrace libtorch appends to it.
pub(super) fn without_backtrace(message: &str) -> String {
    let end = message.find("\nException raised from").or_else(|| message.find("\nframe #")).unwrap_or(message.len());
    message[..end].trim_end().to_owned()
}

/// Measure one cell; a failure of any step fails the cell with its message (out of memory or an
/// error). The cell's telemetry covers its own timed steps (not the head-only model's). With it,
/// whether the measurement contradicted itself ([`CellFailure::Contradicted`]: the cell is then
/// recorded as failed). `None` when `stop` was raised before the cell finished.
pub(super) fn measure_cell(
    model: &Model,
    head_only: Option<&HeadOnly>,
    shape: CellShape,
    limits: &MeasureConfig,
    graphs: &Graphs,
    telemetry: &RunTelemetry,
    stop: &AtomicBool,
) -> Option<(CellRecord, bool)> {
    let clock = || telemetry.now_s();
    // The head-only model runs on the measured model's device, whose allocator it counts too.
    let allocator = || crate::cuda::allocator_calls(model.device());
    let readers: Readers = (&clock, &allocator);
    let run = |model: &Model| -> Result<(StepTimeSummary, Measured), CellFailure> {
        let measured = match shape {
            CellShape::Prefill { batch, prompt_len } => {
                measure_prefill(model, batch, prompt_len, limits, readers, stop).map_err(|e| e.to_string())
            }
            CellShape::Decode { batch, ctx, mode: StepMode::Eager } => {
                measure_decode(model, batch, ctx, limits, readers, stop).map_err(|e| e.to_string())
            }
            CellShape::Decode { batch, ctx, mode: StepMode::Graph } => {
                measure_graph_decode(model, graphs, batch, ctx, limits, readers, stop)
            }
        }
        .map_err(|e| without_backtrace(&e))?
        .ok_or(CellFailure::Stopped)?;
        Ok((lynx_analysis::stats::summarise(&measured.step_s).map_err(|e| e.to_string())?, measured))
    };
    let summarised = run(model).and_then(|(summary, measured)| {
        let full_depth = match head_only {
            Some(head) => {
                let (head_summary, _) = run(&head.model).map_err(|e| match e {
                    CellFailure::Failed(message) => CellFailure::Failed(format!("head-only model: {message}")),
                    stopped => stopped,
                })?;
                let full_depth =
                    lynx_analysis::cell::extrapolate(&summary, head_summary, head.measured_layers, head.model_layers);
                Some(full_depth.map_err(CellFailure::Contradicted)?)
            }
            None => None,
        };
        let steps = summary.n as u64;
        let step_median_s = summary.median_s.get();
        let measured_s = Finite::new(measured.measured_s, "measured time").map_err(|e| e.to_string())?;
        let mut cell = lynx_analysis::cell::measured(shape, summary, measured_s, measured.ctx_end, full_depth)
            .map_err(|e| e.to_string())?;
        cell.telemetry = telemetry.summaries(measured.window_s.0, measured.window_s.1);
        let readings = telemetry.readings(measured.window_s.0, measured.window_s.1);
        // A CPU runs each kernel as it is issued: its issue time is its step time, which says
        // nothing of where a slow step's time went, and no step of it is launch-bound.
        let on_gpu = model.device() != tch::Device::Cpu;
        let records = lynx_analysis::cell::StepRecords {
            thread: &measured.thread,
            allocator: &measured.allocator_calls,
            issue_s: if on_gpu { &measured.issue_s } else { &[] },
        };
        cell.slow_steps = lynx_analysis::cell::slow_steps(&measured.start_s, &measured.step_s, &readings, records);
        cell.attention = measured.attention;
        cell.attended = measured.attended;
        cell.experts = model.expert_kernel(i64::try_from(shape.tokens_per_step()).unwrap_or(i64::MAX));
        cell.experts_touched = measured.experts_touched.and_then(|t| Finite::new(t, "experts touched").ok());
        let issue_median_s = lynx_analysis::stats::median(&measured.issue_s).map_err(|e| e.to_string())?;
        cell.issue_median_s = Finite::new(issue_median_s, "issue time").ok();
        cell.launch_bound = on_gpu.then(|| lynx_analysis::cell::launch_bound(issue_median_s, step_median_s));
        let tokens = steps * shape.tokens_per_step();
        cell.joules_per_token = cell
            .telemetry
            .iter()
            .find_map(|w| w.energy.as_ref())
            .and_then(|energy| Finite::new(energy.joules.get() / tokens as f64, "joules per token").ok());
        Ok(cell)
    });
    match summarised {
        Ok(cell) => Some((cell, false)),
        Err(CellFailure::Failed(message)) => Some((CellRecord::failed(shape, message), false)),
        Err(CellFailure::Contradicted(message)) => Some((CellRecord::failed(shape, message), true)),
        Err(CellFailure::Stopped) => None,
    }
}

/// What each timed step is read against: the run's clock, and the calls libtorch's caching
/// allocator has made to the driver so far ([`crate::cuda::allocator_calls`]; `None` on a CPU).
pub(super) type Readers<'a> = (&'a dyn Fn() -> f64, &'a dyn Fn() -> Option<u64>);

/// A model's timed steps of one cell.
pub(super) struct Measured {
    pub(super) step_s: Vec<f64>,
    /// Wall time of the timed steps.
    measured_s: f64,
    /// Decode: the context at the last step.
    ctx_end: Option<u32>,
    /// The timed steps' span on the run's telemetry clock.
    window_s: (f64, f64),
    /// The attention kernel the steps ran.
    attention: Option<AttentionKernel>,
    /// Each timed step's host issue time.
    issue_s: Vec<f64>,
    /// Each timed step's start on the run's telemetry clock.
    start_s: Vec<f64>,
    /// What the thread running the steps did during each (none where the kernel does not say).
    thread: Vec<lynx_analysis::cell::ThreadStep>,
    /// The calls libtorch's caching allocator made to the driver for memory during each (none on
    /// a CPU, or where a step's could not be asked).
    allocator_calls: Vec<u64>,
    /// Graph steps: the keys each attends (the cache's capacity).
    attended: Option<u32>,
    /// A mixture of experts: the distinct experts the first untimed step routed to, on average
    /// over the MoE layers ([`Model::tally_experts`]).
    experts_touched: Option<f64>,
}

fn measure_prefill(
    model: &Model,
    batch: u32,
    prompt_len: u32,
    limits: &MeasureConfig,
    readers: Readers,
    stop: &AtomicBool,
) -> Result<Option<Measured>, ModelError> {
    let prompts = model.random_tokens(i64::from(batch), i64::from(prompt_len))?;
    let mut cache = KvCache::new(model, i64::from(batch), i64::from(prompt_len))?;
    let attention = model.attention_kernel(&cache, i64::from(prompt_len))?;
    let mut step = || issued(|| model.prefill(&prompts, &mut cache)).map(|(_, issue_s)| issue_s);
    let (_, experts_touched) = model.tally_experts(&mut step)?;
    let no_room = (u32::MAX, || Ok(()));
    Ok(timed_steps(limits, readers, stop, no_room, step)?.map(|m| Measured { attention, experts_touched, ..m }))
}

/// A prefill cell's step timed again ([`lynx_schema::serving::ServedRate::prefill_after`]): as the
/// cell measured it (an untimed step first), for as many steps and seconds as `limits` give a
/// cell, without its telemetry. The steps' times; `None` where `stop` was raised.
pub(super) fn retime_prefill(
    model: &Model,
    batch: u32,
    prompt_len: u32,
    limits: &MeasureConfig,
    stop: &AtomicBool,
) -> Result<Option<Vec<f64>>, ModelError> {
    Ok(measure_prefill(model, batch, prompt_len, limits, (&|| 0.0, &|| None), stop)?.map(|m| m.step_s))
}

/// A decode cell's cache, sized by running its two untimed steps with `untimed`: it holds the
/// context, the two untimed steps, and the timed steps the cell is expected to take (from the
/// second untimed step's time; at least `min_steps`), not `max_steps` of room it would never
/// use; and that room, in steps. Where the steps run faster than the second untimed step
/// predicted and use the room before `min_s`, they go back to the cell's context and go on
/// ([`timed_steps`]): a cell is always measured for `min_s`. The first untimed step's routing is
/// tallied ([`Model::tally_experts`]): the distinct experts it touched, for a mixture of experts.
fn sized_cache(
    model: &Model,
    batch: u32,
    ctx: u32,
    limits: &MeasureConfig,
    mut untimed: impl FnMut(&mut KvCache) -> Result<(), ModelError>,
) -> Result<(KvCache, u32, Option<f64>), ModelError> {
    let (batch, ctx_tokens) = (i64::from(batch), i64::from(ctx));
    let cache_for = |steps: u32| -> Result<KvCache, ModelError> {
        let capacity = i64::try_from(decode_capacity(ctx, steps)).unwrap_or(i64::MAX);
        let mut cache = KvCache::new(model, batch, capacity)?;
        cache.fill_random(ctx_tokens)?;
        Ok(cache)
    };
    let mut cache = cache_for(limits.min_steps)?;
    let ((), experts_touched) = model.tally_experts(|| untimed(&mut cache))?;
    let second = Instant::now();
    untimed(&mut cache)?;
    let steps = expected_decode_steps(limits, second.elapsed().as_secs_f64());
    if steps > limits.min_steps {
        // The small cache goes first; a larger one that does not fit leaves the cell at
        // min_steps of room.
        drop(cache);
        cache = match cache_for(steps) {
            Ok(larger) => larger,
            Err(_) => cache_for(limits.min_steps)?,
        };
    }
    let room = u32::try_from(cache.capacity() - ctx_tokens - 2).unwrap_or(limits.min_steps).max(1);
    cache.truncate(ctx_tokens);
    Ok((cache, room, experts_touched))
}

/// The context at a decode cell's last step: its context plus its steps, less one, where the
/// steps went back to the context each time they had used `room`, at most the room's end.
fn ctx_end(ctx: u32, steps: usize, room: u32) -> Option<u32> {
    let reached = u32::try_from(steps).unwrap_or(u32::MAX).min(room);
    Some(ctx.saturating_add(reached.saturating_sub(1)))
}

/// An eager decode cell: each step issued by the host (see [`sized_cache`] for its room).
fn measure_decode(
    model: &Model,
    batch: u32,
    ctx: u32,
    limits: &MeasureConfig,
    readers: Readers,
    stop: &AtomicBool,
) -> Result<Option<Measured>, ModelError> {
    let mut tokens = model.random_tokens(i64::from(batch), 1)?;
    let (cache, room, experts_touched) = sized_cache(model, batch, ctx, limits, |cache| {
        tokens = issued(|| model.decode(&tokens, cache))?.0;
        Ok(())
    })?;
    let attention = model.attention_kernel(&cache, 1)?;
    let cache = std::cell::RefCell::new(cache);
    let back = || {
        cache.borrow_mut().truncate(i64::from(ctx));
        Ok::<(), ModelError>(())
    };
    let measured = timed_steps(limits, readers, stop, (room, back), || {
        let (next, issue_s) = issued(|| model.decode(&tokens, &mut cache.borrow_mut()))?;
        tokens = next;
        Ok::<f64, ModelError>(issue_s)
    })?;
    Ok(measured.map(|m| Measured { ctx_end: ctx_end(ctx, m.step_s.len(), room), attention, experts_touched, ..m }))
}

/// A graph decode cell: the graph-safe step run twice untimed (which sizes the cache as an
/// eager cell's is sized), captured once over the cell's cache, replayed once untimed, then
/// replayed for the timed steps from position `ctx`, each ended by copying its tokens to the
/// host. Every step attends the cache's whole capacity, which the cell records.
fn measure_graph_decode(
    model: &Model,
    graphs: &Graphs,
    batch: u32,
    ctx: u32,
    limits: &MeasureConfig,
    readers: Readers,
    stop: &AtomicBool,
) -> Result<Option<Measured>, String> {
    let model_error = |e: ModelError| e.to_string();
    let start = i64::from(ctx);
    let tokens = model.random_tokens(i64::from(batch), 1).map_err(model_error)?;
    let buffers = StepBuffers::new(&tokens, start, None).map_err(model_error)?;
    let (cache, room, experts_touched) = sized_cache(model, batch, ctx, limits, |cache| {
        buffers.step(model, cache)?;
        to_host(&buffers.tokens)
    })
    .map_err(model_error)?;
    buffers.rewind(start).map_err(model_error)?;
    let attention = graphs.attention_kernel(model, &cache).map_err(model_error)?;
    let mut captured = graphs.capture(|| buffers.step(model, &cache))?;
    // The first replay uploads the graph: untimed, and its position is used again.
    captured.replay()?;
    to_host(&buffers.tokens).map_err(model_error)?;
    buffers.rewind(start).map_err(model_error)?;
    let back = || buffers.rewind(start).map_err(model_error);
    let measured = timed_steps(limits, readers, stop, (room, back), || {
        let issue = Instant::now();
        captured.replay()?;
        let issue_s = issue.elapsed().as_secs_f64();
        to_host(&buffers.tokens).map_err(model_error)?;
        Ok::<f64, String>(issue_s)
    })?;
    let attended = u32::try_from(cache.capacity()).ok();
    Ok(measured.map(|m| Measured {
        ctx_end: ctx_end(ctx, m.step_s.len(), room),
        attention,
        attended,
        experts_touched,
        ..m
    }))
}

/// Issue a step with `call` and end it by copying its tokens to the host, as a serving engine
/// does each step (the copy waits for the device); the tokens and the seconds until `call`
/// returned, the host's issue time.
pub(super) fn issued(call: impl FnOnce() -> Result<Tensor, ModelError>) -> Result<(Tensor, f64), ModelError> {
    let start = Instant::now();
    let tokens = call()?;
    let issue_s = start.elapsed().as_secs_f64();
    to_host(&tokens)?;
    Ok((tokens, issue_s))
}

/// Copy generated tokens to the host, as a serving engine does each step. The copy waits for the
/// device to finish the step, so it is where a timed step ends.
fn to_host(tokens: &Tensor) -> Result<(), ModelError> {
    let _on_host = tokens.f_to_device(tch::Device::Cpu)?;
    Ok(())
}

/// Run `step` (which returns its issue time) at least `min_steps` times and `min_s` seconds, at
/// most `max_steps` times; `None` when `stop` is raised first (checked between steps, so a step
/// in flight finishes). After every `room` steps (a decode cell's cache room) `back` takes the
/// steps back to the cell's context, between two timed steps. Each step's start is read from
/// `clock`, and the caching allocator's calls to the driver so far from `allocator`
/// ([`crate::cuda::allocator_calls`]) before and after it, outside the thread's bracket.
pub(super) fn timed_steps<E>(
    limits: &MeasureConfig,
    (clock, allocator): Readers,
    stop: &AtomicBool,
    (room, mut back): (u32, impl FnMut() -> Result<(), E>),
    mut step: impl FnMut() -> Result<f64, E>,
) -> Result<Option<Measured>, E> {
    let mut step_s = Vec::new();
    let mut issue_s = Vec::new();
    let mut start_s = Vec::new();
    let mut thread = Vec::new();
    let mut allocator_calls = Vec::new();
    let window_start = clock();
    let start = Instant::now();
    while step_s.len() < limits.max_steps as usize
        && (step_s.len() < limits.min_steps as usize || start.elapsed().as_secs_f64() < limits.min_s)
    {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        if !step_s.is_empty() && step_s.len() % room.max(1) as usize == 0 {
            back()?;
        }
        start_s.push(clock());
        let calls_before = allocator();
        let usage = ThreadUsage::before();
        let step_start = Instant::now();
        issue_s.push(step()?);
        let wall_s = step_start.elapsed().as_secs_f64();
        step_s.push(wall_s);
        // A step the kernel did not account for leaves the cell with no thread record.
        if let (Some(before), Some(after)) = (usage, ThreadUsage::after()) {
            thread.push(after.over_step(&before, wall_s));
        }
        // And one whose allocator could not be asked, with no allocator record.
        if let (Some(before), Some(after)) = (calls_before, allocator()) {
            allocator_calls.push(after.saturating_sub(before));
        }
    }
    let measured_s = start.elapsed().as_secs_f64();
    let window_s = (window_start, clock());
    Ok(Some(Measured {
        step_s,
        measured_s,
        ctx_end: None,
        window_s,
        attention: None,
        issue_s,
        start_s,
        thread,
        allocator_calls,
        attended: None,
        experts_touched: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a decode cell whose steps ran faster than its second untimed step predicted
    /// used its cache's room before `min_s` and stopped short of it (a run on a busy host measured
    /// a cell for 0.2987 s of its 0.3). The steps now go back to the cell's context after every
    /// room's worth, between two timed steps, and the cell is measured for `min_s`.
    #[test]
    fn steps_go_back_to_the_context_after_each_room_and_run_for_min_s() {
        let limits = MeasureConfig { min_steps: 1, min_s: 0.03, max_steps: 100_000, ..MeasureConfig::default() };
        let backs = std::cell::Cell::new(0usize);
        let taken = std::cell::Cell::new(0u32);
        let back = || {
            backs.set(backs.get() + 1);
            taken.set(0);
            Ok::<(), String>(())
        };
        // A stand-in for the caching allocator's count: every third step calls the driver twice.
        let calls = std::cell::Cell::new(0u64);
        let allocator = || Some(calls.get());
        let measured = timed_steps(&limits, (&|| 0.0, &allocator), &AtomicBool::new(false), (3, back), || {
            // A step past the room would write outside the cache.
            assert!(taken.get() < 3, "a step past the room");
            taken.set(taken.get() + 1);
            if taken.get() == 3 {
                calls.set(calls.get() + 2);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
            Ok::<f64, String>(0.0)
        })
        .unwrap()
        .unwrap();
        let n = measured.step_s.len();
        assert!(measured.measured_s >= limits.min_s && n > 3, "{n} steps in {} s", measured.measured_s);
        assert_eq!(backs.get(), (n - 1) / 3, "back after each 3 steps, never before the first");
        let expected: Vec<u64> = (1..=n).map(|i| if i % 3 == 0 { 2 } else { 0 }).collect();
        assert_eq!(measured.allocator_calls, expected, "each step's own calls");
        assert_eq!(ctx_end(512, n, 3), Some(514));
        assert_eq!(ctx_end(512, 2, 3), Some(513));
    }

    /// A mixture of experts' cells tally the experts their first untimed step touched: a decode
    /// step of one sequence its k in every layer, a prompt more; a dense model's cells none.
    #[test]
    fn a_mixture_of_experts_cell_tallies_the_experts_it_touched() {
        let shape = |moe: &str| {
            let text = format!(
                "name = \"tiny\"\nvocab_size = 97\nhidden_size = 64\nnum_layers = 2\nrms_norm_eps = 1e-5\n\
                 [attention]\nkind = \"gqa\"\nnum_heads = 4\nnum_kv_heads = 2\nrope_theta = 10000.0\n{moe}"
            );
            lynx_schema::config::ModelShape::from_toml(&text, "tiny").unwrap()
        };
        let moe =
            "[moe]\nnum_experts = 8\nexperts_per_token = 2\nintermediate_size = 48\nrouter = { kind = \"softmax\" }\n";
        let build = |shape| Model::new(&shape, lynx_schema::config::Precision::Fp32, tch::Device::Cpu, 5).unwrap();
        let (mixture, dense) = (build(shape(moe)), build(shape("[mlp]\nintermediate_size = 96\n")));
        let limits = MeasureConfig { min_steps: 2, min_s: 0.0, max_steps: 4, ..MeasureConfig::default() };
        let (clock, stop) = (|| 0.0, AtomicBool::new(false));
        let readers: Readers = (&clock, &|| None);
        let decode = |model: &Model, batch| measure_decode(model, batch, 8, &limits, readers, &stop).unwrap().unwrap();
        assert_eq!(decode(&mixture, 1).experts_touched, Some(2.0));
        let prefill = measure_prefill(&mixture, 4, 16, &limits, readers, &stop).unwrap().unwrap();
        assert!(prefill.experts_touched.is_some_and(|t| t > 2.0 && t <= 8.0), "{:?}", prefill.experts_touched);
        assert_eq!(decode(&dense, 1).experts_touched, None);
    }
}
