//! A worker's turn on a run: parity once per run, warm-up once per process (the device may have
//! cooled since the last), then every cell the sweep still lacks, each journaled before the next
//! starts.

use super::cell::{measure_cell, HeadOnly};
use super::graph::{graph_parity, Graphs};
use super::serve::ServeError;
use super::stopped;
use super::warmup::warm_up;
use super::{
    model_error, next_segment, poisons_the_context, remove, Observer, WorkEnd, SIMULATE_CONTRADICTION_VAR,
    SIMULATE_POISON_VAR,
};
use crate::devices::Device;
use crate::journal::{read_json, Journal, RunDir};
use crate::libtorch::{load_gpu_backends, Runtime};
use crate::parity::ParityWeights;
use crate::store::write_json_atomic;
use crate::telemetry::RunTelemetry;
use crate::timed;
use crate::unix_now_s;
use crate::RunError;
use lynx_analysis::latency::bounds_for;
use lynx_analysis::lengths::Lengths;
use lynx_analysis::memory::{fit_memory, gib};
use lynx_analysis::serving::LoopStep;
use lynx_analysis::sweep;
use lynx_models::{Checkpoint, Model, ModelError};
use lynx_probes::roofline::ProbePlan;
use lynx_schema::config::{source_layers, LatencyBound, ModelShape};
use lynx_schema::device::DeviceName;
use lynx_schema::result::{
    CellRecord, CellShape, CellStatus, Check, CheckName, ConfigRecord, Harness, HostRecord, RunPlan, RunResult,
    RunStatus, StepMode, WeightsRead, WeightsRecord, RESULT_SCHEMA,
};
use lynx_schema::roofline::ProbePhase;
use lynx_schema::serving::{Served, ServedRate, ServedTrace, ServingRecord, TracedRequest, TracedStep};
use lynx_schema::time::rfc3339_utc;
use lynx_schema::value::Finite;
use lynx_schema::value::Reported;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// Work on `run` until its sweep is done or `stop` is raised.
pub fn work(run: &RunDir, observer: &mut dyn Observer, stop: &AtomicBool) -> Result<WorkEnd, RunError> {
    // What serve.run_s counts from.
    let began = std::time::Instant::now();
    let runtime = load_gpu_backends();
    // Nothing a run does needs gradients: inference mode skips autograd and version-counter
    // bookkeeping on every operation, as Python's torch.inference_mode() does.
    let _inference = crate::libtorch::InferenceMode::enter();
    // Before any model attends: cuDNN's per-shape planning would be timed as the device's.
    crate::libtorch::exclude_cudnn_attention();
    let plan = run.read_plan()?;
    if let Some(binding) = &plan.cpu_binding {
        crate::binding::holds(binding)?;
    }
    let (journal, done) = Journal::open(&run.journal_path())?;
    let bounds = bounds_for(&plan.suite.bounds, &plan.model);
    let host = crate::host_record();
    let device = crate::devices::find(plan.device, &host)?;
    let earlier = earlier_result(run, &plan, &device)?;
    if earlier.as_ref().is_some_and(|earlier| nothing_left(&plan.suite, &bounds, &done, earlier)) {
        return Ok(WorkEnd::Done);
    }
    let setup = Setup::new(&plan, &device)?;
    setup.weights_fit(&device, earlier.is_none(), crate::node::runs_at_once())?;
    let graphs = Graphs::for_device(device.torch);
    // Parity once per run: a checkpoint that cannot serve the model is bad input, found before
    // anything is measured.
    let mut phases = Vec::new();
    let parity = match earlier.as_ref().and_then(|r| r.checks.iter().find(|c| c.name == CheckName::Parity)) {
        Some(check) => check.clone(),
        None => {
            let (check, inner) = timed(&mut phases, "parity", || setup.parity())?;
            phases.extend(inner);
            setup.layers_stored_as_parity_read()?;
            check
        }
    };
    let segment = next_segment(&run.samples_path())?;
    let telemetry = RunTelemetry::start(
        &device,
        setup.config.suite.telemetry.rate_hz,
        &run.samples_path(),
        segment,
        &rfc3339_utc(unix_now_s()),
    )?;
    let mut result = match earlier {
        Some(result) => resumed(result, &telemetry, runtime, &graphs),
        None => {
            let harness = crate::harness::describe(runtime, graphs.record());
            fresh(&plan, &device, host, setup.config.clone(), &telemetry, parity, harness)
        }
    };
    // Every process of the run was bound as its plan says (a resume binds itself the same).
    result.harness.cpu_binding = plan.cpu_binding.clone();
    // The journal is the record of the cells; the result carries them, and gains each new one.
    result.cells = done;
    let mut turn = Turn { run, result, journal, observer, telemetry, segment, device, graphs, stop, began, phases };
    let end = turn.measure(&setup, &bounds)?;
    remove(&run.current_path())?;
    turn.telemetry.finish()?;
    Ok(end)
}

/// What a turn builds its models from: the configuration as run, the shape the device holds,
/// the checkpoint layers it stands for, and where its weights come from.
pub(super) struct Setup {
    pub(super) config: ConfigRecord,
    pub(super) shape: ModelShape,
    layers: Vec<u32>,
    checkpoint: Option<Checkpoint>,
    torch: tch::Device,
}

impl Setup {
    pub(super) fn new(plan: &RunPlan, device: &Device) -> Result<Setup, RunError> {
        // Under tensor parallelism, the first device's shard of the checkpoint.
        let checkpoint = match &plan.weights {
            Some(dir) => Some(
                Checkpoint::open(Path::new(dir))
                    .map_err(|e| RunError::Weights(e.to_string()))?
                    .shard(plan.suite.scale.tp),
            ),
            None => None,
        };
        let weights = match &checkpoint {
            Some(c) => {
                WeightsRecord::Checkpoint { dir: c.dir.display().to_string(), files: c.files.clone(), read: None }
            }
            None => WeightsRecord::Random { seed: plan.suite.seed },
        };
        let config = ConfigRecord::new(plan.suite.clone(), plan.model.clone(), weights)
            .map_err(|e| RunError::Config(format!("suite: {e}")))?;
        let shape = config.device_shape().clone();
        // Layer i of the device's shape stands for this layer of the model (and its checkpoint).
        let layers = source_layers(&config.model, &shape);
        Ok(Setup { config, shape, layers, checkpoint, torch: device.torch })
    }

    /// Why `shape` cannot fit in `free` bytes, where it cannot (naming `source`, where the figure
    /// came from), with the bytes it is estimated to need and the bytes free.
    pub(super) fn refusal(&self, shape: CellShape, (free_bytes, source): (u64, &str)) -> Option<(String, u64, u64)> {
        let suite = &self.config.suite;
        let estimate = fit_memory(&self.shape, suite.precision, shape, &suite.measure);
        let reason = estimate.refusal(free_bytes)?;
        Some((format!("{reason} ({source})"), estimate.total_bytes(), free_bytes))
    }

    /// Refuse a suite none of whose cells fits in `free`, the memory beside the weights on
    /// `device`, where it is known: its smallest prefill and its smallest decode cell (memory
    /// grows with batch and length) both skipped, the run would warm up on a step no cell
    /// measures and publish nothing.
    pub(super) fn some_cell_fits(&self, device: DeviceName, free: Option<(u64, &str)>) -> Result<(), RunError> {
        let Some(free) = free else { return Ok(()) };
        let suite = &self.config.suite;
        let least = |values: Vec<u32>| values.into_iter().min().unwrap_or(1);
        let smallest = [
            CellShape::Prefill {
                batch: least(suite.prefill.ladder().batches()),
                prompt_len: least(suite.prefill.prompt_lens.clone()),
            },
            CellShape::decode(least(suite.decode.ladder().batches()), least(suite.decode.ctxs.clone())),
        ];
        let refused: Vec<String> = smallest
            .iter()
            .filter_map(|&shape| self.refusal(shape, free).map(|(message, ..)| format!("{shape} {message}")))
            .collect();
        if refused.len() < smallest.len() {
            return Ok(());
        }
        Err(RunError::Config(format!(
            "suite {}: no cell fits on {device} beside the weights of {}: the smallest {}; shorten the lengths, \
             lower the batches, or measure a layer subset (scale.layers)",
            suite.name,
            suite.model,
            refused.join(", and the smallest ")
        )))
    }

    /// `shape` on the device, with the checkpoint's `layers` (and what it read of them) or
    /// weights drawn from the seed.
    fn build(
        &self,
        shape: &ModelShape,
        layers: &[u32],
        context: &str,
    ) -> Result<(Model, Option<WeightsRead>), RunError> {
        let suite = &self.config.suite;
        match &self.checkpoint {
            Some(c) => {
                let (model, read) = c.reading(|| Model::load(shape, c, layers, Some((self.torch, suite.precision))));
                model.map(|model| (model, Some(read)))
            }
            None => Model::new(shape, suite.precision, self.torch, suite.seed).map(|model| (model, None)),
        }
        .map_err(|e| model_error(context, e))
    }

    /// Refuse, before anything is built, weights that cannot fit in the memory free now: the
    /// parity check's float64 reference and its copy at the run's precision (where `parity` is
    /// still to run) in the host's, the measured model in the device's. Building them would fail
    /// part-way, or on a host end the worker (and perhaps others) at the kernel's out-of-memory
    /// killer, again for every fresh worker. A stated free memory
    /// ([`crate::devices::FREE_MEMORY_VAR`]) is what is free beside the weights, for planning
    /// cells, so it refuses nothing here; nor does a free memory that cannot be read. Of a node's
    /// `runs_at_once` runs all at once, every one builds its parity reference at once, in the
    /// one host's memory.
    pub(super) fn weights_fit(&self, device: &Device, parity: bool, runs_at_once: u64) -> Result<(), RunError> {
        if crate::devices::free_memory_is_stated() {
            return Ok(());
        }
        let suite = &self.config.suite;
        let scaled = "measure a layer subset (scale.layers) or a tensor-parallel shard (scale.tp)";
        // A device planned and not here runs beside another host's memory, not this one's.
        if parity && device.planned.is_none() {
            let cut = crate::parity::parity_shape(&self.shape, suite.parity.layers);
            let beside = device.torch != tch::Device::Cpu;
            let widened = crate::parity::host_copy_widens(suite.precision, beside);
            let need = crate::parity::host_bytes(&self.shape, suite.parity.layers, suite.precision, beside);
            let runs = runs_at_once.max(1);
            if let Reported::Known((free, source)) = crate::devices::host_free_memory() {
                if need.saturating_mul(runs) > free {
                    let each = match runs {
                        1 => String::new(),
                        n => format!(
                            " for each of the node's {n} runs at once ({} in all; `--one-at-a-time` runs them in \
                             turn)",
                            gib(need.saturating_mul(n))
                        ),
                    };
                    return Err(RunError::Config(format!(
                        "{}: the parity check's float64 reference and its copy at {}{} ({} of the model's \
                         layers, with its whole embedding and head) need {} of host memory{each} and {} is free \
                         ({source})",
                        suite.model,
                        suite.precision,
                        if widened { ", its e4m3 weights widened too," } else { "" },
                        cut.num_layers,
                        gib(need),
                        gib(free)
                    )));
                }
            }
        }
        let need = self.shape.weight_bytes(suite.precision);
        if let Reported::Known((free, source)) = device.free_memory() {
            if need > free {
                return Err(RunError::Config(format!(
                    "{}: its weights need {} at {} on {} and {} is free ({source}); {scaled}",
                    suite.model,
                    gib(need),
                    suite.precision,
                    device.record.device,
                    gib(free)
                )));
            }
        }
        Ok(())
    }

    /// The parity check of the device's logits against the float64 reference, and where its
    /// seconds went.
    fn parity(&self) -> Result<(Check, crate::Phases), RunError> {
        let suite = &self.config.suite;
        let weights = match &self.checkpoint {
            Some(c) => ParityWeights::Checkpoint(c, &self.layers),
            None => ParityWeights::Random(suite.seed),
        };
        match crate::parity::measure(&self.shape, suite.precision, self.torch, suite.seed, weights, &suite.parity) {
            Ok(logits) => Ok((crate::parity::judge(&logits, suite.precision), logits.phases)),
            Err(error @ ModelError::Weights(_)) => Err(model_error("the parity model", error)),
            Err(error) => Ok((
                Check {
                    name: CheckName::Parity,
                    passed: false,
                    detail: format!("the parity run failed: {error}"),
                    measured: None,
                    limit: Finite::new(crate::parity::tolerance(suite.precision), "parity limit").ok(),
                },
                Vec::new(),
            )),
        }
    }

    /// Once the parity check has read its layers of the checkpoint, hold every other layer the
    /// model will read to them, from the headers alone: each tensor the parity model read from
    /// its layer of the same kind (dense or MoE), named for the other layer, must be stored with
    /// the same element type and shape. A tensor missing or misshapen past the parity check's
    /// layers is refused now, before the probes and any result, not when the model is built (a
    /// checkpoint with Hugging Face's index is held to it when opened; one without, a single file
    /// or files sharded by hand, is caught here).
    fn layers_stored_as_parity_read(&self) -> Result<(), RunError> {
        let Some(checkpoint) = &self.checkpoint else { return Ok(()) };
        let cut = crate::parity::parity_shape(&self.shape, self.config.suite.parity.layers);
        // The checkpoint layer each of the parity model's layers stands for.
        let read: Vec<u32> = source_layers(&self.shape, &cut).iter().map(|&i| self.layers[i as usize]).collect();
        let names = checkpoint.names_read();
        for (i, &layer) in self.layers.iter().enumerate() {
            let dense = (i as u32) < self.shape.dense_layers();
            let Some(j) = (0..cut.num_layers).find(|&j| (j < cut.dense_layers()) == dense) else { continue };
            let (from, to) = (format!(".layers.{}.", read[j as usize]), format!(".layers.{layer}."));
            if from == to {
                continue;
            }
            for name in names.iter().filter(|name| name.contains(&from)) {
                checkpoint
                    .stored_like(&name.replacen(&from, &to, 1), name)
                    .map_err(|e| model_error("the measured model", e))?;
            }
        }
        Ok(())
    }

    /// `model` with no layers, for extrapolating a layer subset to full depth.
    fn head_only(&self, model: &Model) -> Option<HeadOnly> {
        let measured_layers = self.config.suite.scale.layers?;
        Some(HeadOnly { model: model.head_only(), measured_layers, model_layers: self.config.model.num_layers })
    }
}

/// How a plan's serving ended short of its rates, where it did ([`Served::step_down`],
/// [`Served::cut_short`], [`Served::stopped`]).
#[derive(Debug, Default)]
struct PlanEnds {
    step_down: Option<String>,
    cut_short: Option<String>,
    stopped: bool,
    /// Capturing the loop's graph steps failed at a later rate, with this error: the rates served
    /// before are kept, and the workloads after are served with eager steps.
    capture_failed: Option<String>,
}

/// The result's entry for `plan`: its lengths drawn, `rates` and how they ended; `None` when it
/// drew none.
fn served_entry(
    plan: &lynx_analysis::serving::Plan,
    rates: Reported<Vec<ServedRate>>,
    ends: PlanEnds,
) -> Option<Served> {
    let sample = |column: fn(&Lengths) -> u32| lynx_analysis::lengths::sample(plan.lengths.iter().map(column));
    Some(Served {
        workload: plan.workload.clone(),
        bound: plan.bound.clone(),
        isl: sample(|l| l.isl)?,
        osl: sample(|l| l.osl)?,
        max_batch: plan.max_batch,
        mode: plan.mode,
        rates,
        window: plan.window.clone(),
        step_down: ends.step_down,
        cut_short: ends.cut_short,
        stopped: ends.stopped,
    })
}

/// Why the step down to `rate` is not served: its simulated window over the step `tables` would
/// not fit what is left of `plan`'s share of the serving budget (serve.total_s, cut to what was
/// left of serve.run_s) after `elapsed_s` of serving; `None` where it fits, or the suite sets no
/// budget.
fn over_budget(
    plan: &lynx_analysis::serving::Plan,
    (prefill, decode): (&lynx_analysis::sim::StepTable, &lynx_analysis::sim::StepTable),
    rate: f64,
    elapsed_s: f64,
) -> Option<String> {
    let budget_s = plan.budget_s?;
    let window_s = plan.window_s(prefill, decode, rate).unwrap_or(f64::INFINITY);
    (!plan.fits_budget(elapsed_s, window_s)).then(|| {
        let left_s = (budget_s - elapsed_s).max(0.0);
        let window = if window_s.is_finite() {
            format!("about {window_s:.0} s")
        } else {
            "a time no simulation gave".to_owned()
        };
        format!(
            "the step down to {rate:.4} requests/s was not served: its window of {} requests takes {window}, and \
             {left_s:.0} s of this workload's {budget_s:.0} s share of the serving budget (serve.total_s, serve.run_s) \
             were left",
            plan.lengths.len()
        )
    })
}

/// The error [`SIMULATE_POISON_VAR`] strikes a cell or the serving phase with.
fn simulated_poison() -> String {
    format!("CUDA error: an illegal memory access was encountered (simulated by {SIMULATE_POISON_VAR})")
}

/// The failed capture of the serving loop's graph steps that the test hook's value `what` makes
/// in the first worker: a GPU error that leaves the context unusable (`serving-capture` at every
/// rate, `serving-capture-over` at the rate 20% above the latency-bounded one), or out of
/// memory, which does not (`serving-capture-oom`); `None` for other values.
fn simulated_capture_failure(what: &str) -> Option<String> {
    let error = match what {
        "serving-capture" | "serving-capture-over" => "CUDA error: operation not permitted when stream is capturing",
        "serving-capture-oom" => "CUDA out of memory. Tried to allocate 2.00 GiB",
        _ => return None,
    };
    Some(format!("at batch 1: capturing the step: libtorch: {error} (simulated by {SIMULATE_POISON_VAR}={what})"))
}

/// Whether a run of `suite` under `bounds` whose journal holds `done` and whose result so far is
/// `earlier` has nothing left to measure or serve: no cell left to plan, every workload served.
pub(super) fn nothing_left(
    suite: &lynx_schema::config::Suite,
    bounds: &[LatencyBound],
    done: &[CellRecord],
    earlier: &RunResult,
) -> bool {
    sweep::plan(suite, bounds, done, &sweep::decode_modes(&earlier.checks)).next.is_none()
        && serving_done(suite, bounds, earlier.serving.as_ref())
}

/// Whether the serving phase has served (or said why it could not serve) every workload and
/// bound `suite` asks for under `bounds` (nothing, without `[serve]`); an entry a stop cut short
/// is not served yet.
pub(super) fn serving_done(
    suite: &lynx_schema::config::Suite,
    bounds: &[LatencyBound],
    serving: Option<&ServingRecord>,
) -> bool {
    let Some(serve) = &suite.serve else { return true };
    let served = |workload: &str, bound: &str| {
        serving.is_some_and(|r| r.served.iter().any(|s| s.is_for(workload, bound) && !s.stopped))
    };
    suite
        .workloads
        .iter()
        .all(|w| bounds.iter().filter(|b| serve.serves(&w.name, &b.name)).all(|b| served(&w.name, &b.name)))
}

/// Each of the loop's steps with what its kind's table gives at its shape (`None` where the
/// table has no time there): looked up once, for the trace and the step ratios alike.
fn looked_up<'a>(
    steps: &'a [super::serve::Step],
    (prefill, decode): (&lynx_analysis::sim::StepTable, &lynx_analysis::sim::StepTable),
) -> Vec<(&'a super::serve::Step, Option<lynx_analysis::sim::Lookup>)> {
    steps.iter().map(|s| (s, if s.prefill { prefill } else { decode }.lookup(s.batch, f64::from(s.len)))).collect()
}

/// What the loop did at one rate, request by request and step by step, beside the tables'
/// time for each step.
fn trace(
    plan: &lynx_analysis::serving::Plan,
    label: &str,
    rate: f64,
    load: &super::serve::Load,
    steps: &[(&super::serve::Step, Option<lynx_analysis::sim::Lookup>)],
) -> ServedTrace {
    let requests = load
        .served
        .iter()
        .map(|s| TracedRequest {
            arrival_s: s.arrival_s,
            first_token_s: s.first_token_s,
            finish_s: s.finish_s,
            isl: s.isl,
            osl: s.osl,
        })
        .collect();
    let steps = steps
        .iter()
        .map(|(s, at)| TracedStep {
            prefill: s.prefill,
            batch: s.batch,
            len: s.len,
            step_s: s.seconds,
            start_s: Some(s.start_s),
            table_s: at.map(|at| at.step_s),
            after_idle: s.after_idle,
            thread_cpu_s: s.thread.map(|t| t.cpu_s),
            thread_runnable_s: s.thread.and_then(|t| t.runnable_s),
            voluntary_switches: s.thread.map(|t| t.voluntary),
            involuntary_switches: s.thread.map(|t| t.involuntary),
            allocator_calls: s.allocator_calls,
        })
        .collect();
    ServedTrace {
        workload: plan.workload.name.clone(),
        bound: plan.bound.name.clone(),
        label: label.to_owned(),
        rate_per_s: rate,
        requests,
        steps,
    }
}

/// The loop's steps of one kind (with `after_idle`, only those that came first after an idle
/// gap), each with its batch, its measured / table time at its shape and the cells' 90th
/// percentile step over their median there (where the table has a spread).
fn step_ratios(
    steps: &[(&super::serve::Step, Option<lynx_analysis::sim::Lookup>)],
    prefill: bool,
    after_idle: bool,
) -> Vec<LoopStep> {
    steps
        .iter()
        .filter(|(s, _)| s.prefill == prefill && (s.after_idle || !after_idle))
        .filter_map(|(s, at)| {
            let at = at.as_ref()?;
            Some(LoopStep {
                batch: s.batch,
                start_s: s.start_s,
                ratio: s.seconds / at.step_s,
                cells_p90: at.spread.map(|spread| spread.p90()),
            })
        })
        .collect()
}

/// The loop's steps of one kind that have a table time, slow by their measured / table time
/// against the kind's median ([`lynx_analysis::cell::slow_steps_by_pace`]), set against the
/// telemetry `readings` over the window (on the run's clock, where the loop's clock starts at
/// `window_start_s`) and the loop thread's accounting (where every step has one).
fn slow_loop_steps(
    steps: &[(&super::serve::Step, Option<lynx_analysis::sim::Lookup>)],
    prefill: bool,
    readings: &[lynx_analysis::cell::Readings],
    window_start_s: f64,
) -> Option<lynx_schema::result::SlowSteps> {
    let timed: Vec<(&super::serve::Step, f64)> = steps
        .iter()
        .filter(|(s, _)| s.prefill == prefill)
        .filter_map(|(s, at)| Some((*s, at.as_ref()?.step_s)))
        .collect();
    let starts: Vec<f64> = timed.iter().map(|(s, _)| window_start_s + s.start_s).collect();
    let step_s: Vec<f64> = timed.iter().map(|(s, _)| s.seconds).collect();
    let pace: Vec<f64> = timed.iter().map(|(s, table_s)| s.seconds / table_s).collect();
    let thread: Vec<lynx_analysis::cell::ThreadStep> = timed.iter().filter_map(|(s, _)| s.thread).collect();
    let allocator: Vec<u64> = timed.iter().filter_map(|(s, _)| s.allocator_calls).collect();
    let records = lynx_analysis::cell::StepRecords { thread: &thread, allocator: &allocator, issue_s: &[] };
    lynx_analysis::cell::slow_steps_by_pace(&starts, &step_s, &pace, readings, records)
}

/// The median of measured / table time over steps as [`step_ratios`] gives them.
fn median_ratio(steps: &[LoopStep]) -> Option<Finite> {
    let ratios: Vec<f64> = steps.iter().map(|s| s.ratio).collect();
    Finite::new(lynx_analysis::stats::median(&ratios).ok()?, "step ratio").ok()
}

/// The serving phase's server in words.
fn server_words(suite: &lynx_schema::config::Suite, mode: StepMode) -> String {
    let prefill = match suite.simulation.chunked_prefill {
        Some(chunk) => format!("chunked prefill of {chunk} tokens after each decode step"),
        None => "whole prompts prefilled in steps of their own (right-padded)".to_owned(),
    };
    let decode = match mode {
        StepMode::Eager => "each decode step issued eagerly, attending every row up to the longest",
        StepMode::Graph => {
            "each decode step replayed as a graph captured at 1, 2, 4, ... and the cap sequences (the smallest at \
             least the running ones), attending every row over the pool's whole capacity"
        }
    };
    format!(
        "continuous batching in a KV pool of the batch cap's rows; {decode}; {prefill}, eagerly; greedy tokens fed \
         back, no early stop"
    )
}

/// The result an earlier process on this run left, if any; refused when the device is now
/// another board (cells of two boards in one result would be no one board's figures).
fn earlier_result(run: &RunDir, plan: &RunPlan, device: &Device) -> Result<Option<RunResult>, RunError> {
    if !run.result_path().exists() {
        return Ok(None);
    }
    let earlier: RunResult = read_json(&run.result_path(), "result")?;
    if let Some(before) = earlier.device.uuid.known() {
        if device.record.uuid.known().is_some_and(|now| now != before) {
            return Err(RunError::Config(format!(
                "{}: the run was measuring the board {before}, and {} is now {}; start a new run",
                run.dir.display(),
                plan.device,
                device.record.uuid.known().map_or("", String::as_str)
            )));
        }
    }
    Ok(Some(earlier))
}

/// Back to a run in progress: what the last assembly derived is derived again at the end, from
/// the whole journal.
fn resumed(mut result: RunResult, telemetry: &RunTelemetry, runtime: &Runtime, graphs: &Graphs) -> RunResult {
    result.status = RunStatus::Incomplete;
    result.checks.retain(|c| matches!(c.name, CheckName::Parity | CheckName::GraphParity));
    result.derived = None;
    result.telemetry = telemetry.record.clone();
    // The cells measured before were measured under the earlier processes' test hooks: a resume
    // without them does not make those cells a device's (nor does one with others).
    // So with the variables that steer libtorch and its libraries.
    let (earlier_hooks, earlier_environment) = (result.harness.test_hooks.take(), result.harness.environment.take());
    // The GPU libraries are the earlier processes' (a resume refuses others), or not recorded
    // where theirs were not.
    let recorded_libraries = result.harness.gpu_libraries.is_some();
    result.harness = crate::harness::describe(runtime, graphs.record());
    if !recorded_libraries {
        result.harness.gpu_libraries = None;
    }
    result.harness.test_hooks = crate::harness::every_setting(earlier_hooks, result.harness.test_hooks.take());
    result.harness.environment = crate::harness::every_variable(earlier_environment, result.harness.environment.take());
    result
}

/// The first result of a new run.
fn fresh(
    plan: &RunPlan,
    device: &Device,
    host: HostRecord,
    config: ConfigRecord,
    telemetry: &RunTelemetry,
    parity: Check,
    harness: Harness,
) -> RunResult {
    RunResult {
        schema: RESULT_SCHEMA.to_owned(),
        run_id: plan.run_id.clone(),
        status: RunStatus::Incomplete,
        started_at: plan.started_at.clone(),
        updated_at: plan.started_at.clone(),
        harness,
        device: device.record.clone(),
        host,
        config,
        warmup: None,
        resumed_warmups: Vec::new(),
        telemetry: telemetry.record.clone(),
        cells: Vec::new(),
        checks: vec![parity],
        derived: None,
        roofline: None,
        reproduces: plan.reproduces.clone(),
        fp8_input_scales: None,
        serving: None,
    }
}

/// One process's turn on a run, its result kept current on disk after each step.
struct Turn<'a> {
    run: &'a RunDir,
    result: RunResult,
    journal: Journal,
    observer: &'a mut dyn Observer,
    telemetry: RunTelemetry,
    segment: u32,
    device: Device,
    /// How this process captures decode steps as graphs, or why it cannot.
    graphs: Graphs,
    stop: &'a AtomicBool,
    /// When this process began its work on the run (serve.run_s counts from it).
    began: std::time::Instant,
    /// What this process did before warm-up, and the seconds each took.
    phases: crate::Phases,
}

impl Turn<'_> {
    /// `shape` recorded as skipped when the memory it is estimated to need (with the least room
    /// a decode cell is measured with) exceeds the device's free memory; `None` when it fits or
    /// the free memory is not known.
    fn does_not_fit(&self, setup: &Setup, shape: CellShape) -> Option<CellRecord> {
        let (message, needed_bytes, free_bytes) = self.refusal(setup, shape)?;
        let mut cell = CellRecord::failed(shape, String::new());
        cell.status = CellStatus::Skipped { message, needed_bytes, free_bytes };
        Some(cell)
    }

    /// Why `shape` cannot fit in the device's free memory, where it cannot.
    fn refusal(&self, setup: &Setup, shape: CellShape) -> Option<(String, u64, u64)> {
        setup.refusal(shape, *self.device.free_memory().known()?)
    }

    /// Measure a cell with the host's other load beside it; a cell that is not stable (its CV
    /// or the host's other load past the suite's bounds) is measured once more, and the second
    /// measurement kept with why the first was set aside. `None` when `stop` was raised.
    fn measure_stable(
        &self,
        model: &Model,
        head_only: Option<&HeadOnly>,
        shape: CellShape,
        limits: &lynx_schema::config::MeasureConfig,
    ) -> Option<CellRecord> {
        let gpu = self.device.record.device != DeviceName::Cpu;
        let bounds = lynx_analysis::checks::StabilityBounds::of(limits, gpu);
        let measure = || {
            let load = crate::host_load::HostLoad::now();
            let (cell, others) = crate::devices::other_processes_over(&self.device.record, || {
                measure_cell(model, head_only, shape, limits, &self.graphs, &self.telemetry, self.stop)
            });
            let (mut cell, contradicted) = cell?;
            crate::host_load::RecordedLoad {
                other_cpu_cores: cell.other_cpu_cores,
                stolen_cpu_cores: cell.stolen_cpu_cores,
                other_cpu_cores_elsewhere: cell.other_cpu_cores_elsewhere,
            } = crate::host_load::OtherLoad::recorded(load.as_ref().and_then(|l| l.other_load_since()));
            cell.cpu_throttled_s = load.and_then(|l| l.throttled_since());
            cell.other_device_processes = others;
            Some((cell, contradicted))
        };
        let (first, contradicted) = measure()?;
        let simulated = std::env::var(SIMULATE_CONTRADICTION_VAR).is_ok_and(|v| v == shape.to_string())
            && self.segment == 1
            && first.status == CellStatus::Ok;
        let why = if contradicted || simulated {
            // A layer subset holds its head-only model: measured no slower than it, the two
            // measurements saw the device (or the host) at different paces, and neither is kept.
            let said = first
                .status
                .message()
                .map_or_else(|| format!("simulated by {SIMULATE_CONTRADICTION_VAR}"), str::to_owned);
            format!("{}: {said}", lynx_analysis::checks::CONTRADICTED)
        } else {
            let Some(why) = lynx_analysis::checks::unstable(&first, &bounds) else { return Some(first) };
            if first.status != CellStatus::Ok {
                return Some(first);
            }
            // Where the first measurement's slow steps fell, and what its thread did in them: the
            // first is set aside, and this is all of it the result keeps.
            let fell = first
                .slow_steps
                .as_ref()
                .map_or_else(String::new, |s| format!(" ({})", lynx_analysis::checks::slow_steps_words(s)));
            format!("the first measurement was not stable: {why}{fell}")
        };
        let (mut again, _) = measure()?;
        again.remeasured = Some(why);
        Some(again)
    }

    /// Record what the measured model read of its checkpoint; or, where an earlier worker on
    /// this run recorded it, refuse a checkpoint that now reads differently: its cells would
    /// describe two sets of weights as one.
    fn record_read(&mut self, read: WeightsRead) -> Result<(), RunError> {
        let WeightsRecord::Checkpoint { dir, read: recorded, .. } = &mut self.result.config.weights else {
            return Ok(());
        };
        match recorded {
            Some(earlier) if *earlier != read => Err(RunError::Weights(format!(
                "{dir}: the checkpoint changed since this run began: the model read {} tensors of {} bytes, sha256 {}, \
                 where the run's first worker read {} of {}, sha256 {}",
                read.tensors, read.bytes, read.sha256, earlier.tensors, earlier.bytes, earlier.sha256
            ))),
            Some(_) => Ok(()),
            None => {
                let published = self.result.reproduces.as_ref().and_then(|r| r.weights_read.as_ref());
                if let Some(published) = published.filter(|&published| *published != read) {
                    self.observer.warned(&format!(
                        "the weights this reproduction read are not the published run's: {} tensors of {} bytes, \
                         sha256 {}, where the published run read {} of {}, sha256 {}; its figures will compare two \
                         devices on other weights",
                        read.tensors, read.bytes, read.sha256, published.tensors, published.bytes, published.sha256
                    ));
                }
                *recorded = Some(read);
                self.save()
            }
        }
    }

    /// Write the result as it stands.
    fn save(&mut self) -> Result<(), RunError> {
        self.result.updated_at = rfc3339_utc(unix_now_s());
        write_json_atomic(&self.run.result_path(), &self.result)
    }

    /// Probes, warm-up and the cells the sweep still lacks.
    fn measure(&mut self, setup: &Setup, bounds: &[LatencyBound]) -> Result<WorkEnd, RunError> {
        self.save()?;
        self.observer.started(&self.run.result_path(), &self.result);
        for check in &self.result.checks {
            self.observer.checked(check);
        }
        let suite = &setup.config.suite;
        let probes = ProbePlan {
            precision: Some(suite.precision),
            sustained_s: Some(suite.roofline.sustained_s).filter(|&s| s > 0.0),
            stop: self.stop,
        };
        if suite.roofline.probe && self.result.roofline.is_none() {
            let target = self.device.probe_target();
            // The probes draw their random operands from libtorch's global generator, which
            // lynx-probes cannot lock (it may not import lynx-models): they hold its lock here, so
            // that no seeded draw of another thread (a test's, beside this run) is moved by them.
            let burst = timed(&mut self.phases, "roofline probes", || {
                lynx_models::with_generator(None, || lynx_probes::roofline::burst(&target, &probes))
            });
            self.result.roofline = Some(burst);
            self.observer.probed(&self.result);
            self.save()?;
        }
        let context = format!("building {} on {}", suite.model, self.device.record.device);
        let (model, read) =
            timed(&mut self.phases, "building the model", || setup.build(&setup.shape, &setup.layers, &context))?;
        if let Some(read) = read {
            self.record_read(read)?;
        }
        let start = std::time::Instant::now();
        self.result.fp8_input_scales =
            crate::parity::calibrate_fp8(&model, suite).map_err(|e| model_error(&context, e))?;
        if self.result.fp8_input_scales.is_some() {
            self.phases.push(("fp8 calibration", start.elapsed().as_secs_f64()));
        }
        if self.result.cells.is_empty() {
            setup.some_cell_fits(self.device.record.device, self.device.free_memory().known().copied())?;
        }
        self.check_graphs(&model, suite.precision)?;
        // A node's devices all at once warm up only once every one has prepared.
        let start = std::time::Instant::now();
        match crate::node::prepared_together(self.stop)? {
            Some(false) => return Ok(WorkEnd::Stopped),
            Some(true) => self.phases.push(("waiting for the node's other devices", start.elapsed().as_secs_f64())),
            None => {}
        }
        self.observer.prepared(&self.phases);
        if !self.warm(&model, setup)? {
            return Ok(WorkEnd::Stopped);
        }
        // The sustained matmul rate, once per run, with the device at equilibrium.
        if let Some(record) =
            self.result.roofline.as_mut().filter(|r| r.probes.iter().all(|p| p.phase != ProbePhase::Sustained))
        {
            let target = self.device.probe_target();
            if !lynx_models::with_generator(None, || lynx_probes::roofline::sustained(&target, &probes, record)) {
                return Ok(WorkEnd::Stopped);
            }
            self.observer.probed(&self.result);
            self.save()?;
        }
        let head_only = setup.head_only(&model);
        match self.sweep(&model, head_only.as_ref(), setup, bounds)? {
            WorkEnd::Done => match self.recheck(&model, setup)? {
                WorkEnd::Done => self.serve(&model, setup),
                end => Ok(end),
            },
            end => Ok(end),
        }
    }

    /// The serving phase, where the suite asks for one: each workload and bound it names not yet
    /// served, at the simulation's latency-bounded rate and 20% above (and under it where the
    /// bound broke there: [`Self::serve_plan`]), the record saved after
    /// each. A workload whose KV pool would not fit in the device's free memory is not served
    /// (the record says why); one whose serving struck a GPU error that leaves the device context
    /// unusable is recorded as failed and ends this process, for a fresh one to serve the rest.
    /// Where capturing the loop's graph steps fails, the phase goes on with eager steps
    /// ([`Turn::serve_eagerly`]).
    fn serve(&mut self, model: &Model, setup: &Setup) -> Result<WorkEnd, RunError> {
        let suite = &setup.config.suite;
        let Some(serve) = &suite.serve else { return Ok(WorkEnd::Done) };
        let bounds = bounds_for(&suite.bounds, &setup.config.model);
        let mode = self.serving_mode();
        let persistence = lynx_analysis::derived::persistence(self.result.warmup.as_ref());
        let (prefill, decode) = lynx_analysis::derived::mode_tables(&self.result.cells, mode, persistence);
        let budget_s = serve.budget_s(self.began.elapsed().as_secs_f64());
        if std::env::var(super::SIMULATE_STOP_VAR).is_ok_and(|v| v == "serving-plan") && self.segment == 1 {
            self.stop.store(true, Ordering::Relaxed);
        }
        let plans =
            lynx_analysis::serving::plan(suite, &bounds, (&prefill, &decode), (serve, budget_s), mode, Some(self.stop));
        let server = server_words(suite, mode);
        let record = self.result.serving.get_or_insert_with(|| ServingRecord::new(server.clone()));
        let recorded = record.served.clone();
        for plan in plans {
            // A stop during the simulation leaves plans that found no rate because of it, and one
            // between plans leaves the next unstarted: neither is recorded as not served.
            if self.stop.load(Ordering::Relaxed) {
                return Ok(WorkEnd::Stopped);
            }
            // An entry recorded is served, but one a stop cut short (`stopped`) is gone on with.
            let entry = recorded.iter().find(|s| s.is_for(&plan.workload.name, &plan.bound.name));
            if entry.is_some_and(|s| !s.stopped) {
                continue;
            }
            let (plan, resumed) = match entry.map(|entry| (entry, stopped::going_on(&plan, entry))) {
                None => (plan, Vec::new()),
                Some((_, Ok((plan, rates)))) => {
                    let labels: Vec<&str> = rates.iter().map(|r| r.label.as_str()).collect();
                    self.observer.serving(&format!(
                        "{} under the {} bound: going on after its rates served before the run was stopped ({})",
                        plan.workload,
                        plan.bound.name,
                        labels.join(", ")
                    ));
                    (plan, rates)
                }
                Some((entry, Err(why))) => {
                    self.keep_stopped(entry, &why)?;
                    continue;
                }
            };
            let mut ends = PlanEnds::default();
            let rates = match (&plan.rates, suite.scale.layers) {
                (_, Some(layers)) => Err(format!(
                    "the run measures {layers} of the model's layers: a serving loop serves whole models only"
                )),
                (Err(reason), _) => Err(reason.clone()),
                (Ok(rates), None) => match (self.pool_does_not_fit(setup, &plan), entry) {
                    // Going on after a stop, the rates served before it are kept, and say why
                    // those after them were not served.
                    (Some(reason), Some(entry)) => {
                        self.keep_stopped(entry, &reason)?;
                        continue;
                    }
                    (Some(reason), None) => Err(format!("not served: {reason}")),
                    (None, _) => {
                        self.mark_serving(&plan, &resumed)?;
                        let tables = (&prefill, &decode);
                        match self.serve_plan(model, &plan, rates, resumed, serve.max_s, tables, &mut ends)? {
                            Some(Ok(rates)) => Ok(rates),
                            Some(Err(ServeError::Failed(reason))) => Err(reason),
                            Some(Err(ServeError::Capture(reason))) => return self.serve_eagerly(model, setup, reason),
                            None => {
                                remove(&self.run.serving_path())?;
                                return Ok(WorkEnd::Stopped);
                            }
                        }
                    }
                },
            };
            if let (true, Ok(rates)) = (ends.stopped, &rates) {
                self.record_stopped(&plan, rates.clone(), ends)?;
                return Ok(WorkEnd::Stopped);
            }
            let failure = rates.as_ref().err().or(ends.cut_short.as_ref());
            let poisoned = failure.is_some_and(|reason| poisons_the_context(reason));
            let capture_failed = ends.capture_failed.take();
            self.record_served(&plan, rates, ends)?;
            remove(&self.run.serving_path())?;
            if let Some(reason) = capture_failed {
                return self.serve_eagerly(model, setup, reason);
            }
            if poisoned {
                return Ok(WorkEnd::Poisoned);
            }
        }
        Ok(WorkEnd::Done)
    }

    /// The run was stopped after `plan` served some of its rates: they are recorded with the
    /// entry marked stopped, for a resume to go on from ([`stopped::going_on`]). The serving
    /// marker says so first, so that a worker that dies on the way leaves the same entry.
    fn record_stopped(
        &mut self,
        plan: &lynx_analysis::serving::Plan,
        rates: Vec<ServedRate>,
        ends: PlanEnds,
    ) -> Result<(), RunError> {
        let Some(entry) = served_entry(plan, Reported::Known(rates), ends) else { return Ok(()) };
        self.write_marker(entry.clone())?;
        self.put_served(entry)?;
        remove(&self.run.serving_path())
    }

    /// A resume could not go on with `entry`, which a stop cut short (`why`): its rates stay as
    /// measured, and the entry says why those after them were not served.
    fn keep_stopped(&mut self, entry: &Served, why: &str) -> Result<(), RunError> {
        let kept = Served {
            cut_short: Some(format!("the run was stopped, and its resume could not go on with them: {why}")),
            stopped: false,
            ..entry.clone()
        };
        self.put_served(kept)
    }

    /// Capturing the serving loop's graph steps failed with `reason` (before a rate's first
    /// request): the record says so and its server's words become the eager server's, and the
    /// workloads not yet recorded (the one being served, where the capture failed at its first
    /// rate; else those after it, its rates served with graph steps kept) are served with eager
    /// steps; by a fresh process where the failure is a GPU error that leaves the device context
    /// unusable. A published figure is then measured on the server that could run, rather than
    /// lost with the capture.
    fn serve_eagerly(&mut self, model: &Model, setup: &Setup, reason: String) -> Result<WorkEnd, RunError> {
        self.observer.serving(&format!("with eager steps: capturing the graph steps failed ({reason})"));
        if let Some(record) = &mut self.result.serving {
            record.server = server_words(&setup.config.suite, StepMode::Eager);
            record.graph_steps_failed = Some(reason.clone());
        }
        self.save()?;
        remove(&self.run.serving_path())?;
        if poisons_the_context(&reason) {
            return Ok(WorkEnd::Poisoned);
        }
        // With the failure recorded the mode is eager: nothing is captured again.
        self.serve(model, setup)
    }

    /// How the serving loop issues its decode steps: replayed as graphs where this process can
    /// capture them, the run's graph parity check passed, graph cells were measured (the loop
    /// then runs the server those cells describe) and no earlier capture of the loop's graph
    /// steps failed; else eagerly.
    fn serving_mode(&self) -> StepMode {
        if self.result.serving.as_ref().is_some_and(|r| r.graph_steps_failed.is_some()) {
            return StepMode::Eager;
        }
        let checked = sweep::decode_modes(&self.result.checks).contains(&StepMode::Graph);
        let measured = self
            .result
            .cells
            .iter()
            .any(|c| c.status == CellStatus::Ok && c.shape.is_decode() && c.shape.mode() == StepMode::Graph);
        if self.graphs.available() && checked && measured {
            StepMode::Graph
        } else {
            StepMode::Eager
        }
    }

    /// Each of `plan`'s rates served in turn, then, while the measured p99s break the bound at
    /// the latency-bounded rate and every rate under it served so far, the next rate under it
    /// ([`lynx_analysis::serving::next_under`]): the rates, or why none could be served; `None`
    /// when `stop` was raised before a rate was served. A rate under it whose arrivals alone
    /// would outlast serve.max_s is not started, and the step down ends there; so does one whose
    /// simulated window would not fit what is left of the plan's share of the serving budget
    /// (`ends.step_down` then says why). Where a rate fails after others were served, those are
    /// kept and the plan ends there (`ends.cut_short` says why); the serving marker holds the
    /// rates served so far, so a worker that dies in a later rate loses only that rate. So does a
    /// stop: the rates served before it are returned, with `ends.stopped` set. `served` holds
    /// those a stop cut short before this process (none where the plan starts afresh): the
    /// planned rates among them are not served again, the step down goes on from them, and the
    /// share of the budget they spent ([`lynx_analysis::serving::spent_s`]) is not spent
    /// again.
    #[allow(clippy::too_many_arguments)]
    fn serve_plan(
        &mut self,
        model: &Model,
        plan: &lynx_analysis::serving::Plan,
        rates: &[(String, f64)],
        mut served: Vec<ServedRate>,
        max_s: f64,
        tables: (&lynx_analysis::sim::StepTable, &lynx_analysis::sim::StepTable),
        ends: &mut PlanEnds,
    ) -> Result<Option<Result<Vec<ServedRate>, ServeError>>, RunError> {
        // At least the arrivals' span: a load that cannot end in time is not started.
        let expected_s = |rate: f64| plan.lengths.len() as f64 / rate;
        let started = std::time::Instant::now();
        // The rates a stop kept spent the plan's share too: the step down fits what is left.
        let spent_before_s = lynx_analysis::serving::spent_s(&served);
        let before: Vec<String> = served.iter().map(|r| r.label.clone()).collect();
        let mut planned = rates.iter().filter(|(label, _)| !before.contains(label)).cloned();
        loop {
            let (label, rate) = match planned.next() {
                Some(next) => next,
                None => match lynx_analysis::serving::next_under(&served) {
                    Some(rate) if expected_s(rate) <= max_s => {
                        if let Some(reason) =
                            over_budget(plan, tables, rate, spent_before_s + started.elapsed().as_secs_f64())
                        {
                            // Recorded with the rates served, and said with them.
                            ends.step_down = Some(reason);
                            break;
                        }
                        (ServedRate::UNDER.to_owned(), rate)
                    }
                    _ => break,
                },
            };
            let expected_s = expected_s(rate);
            if expected_s > max_s {
                return Ok(Some(Err(ServeError::Failed(format!(
                    "at {rate:.4} requests/s ({label}), {} requests take about {expected_s:.0} s to arrive, more than \
                     serve.max_s ({max_s} s)",
                    plan.lengths.len(),
                )))));
            }
            self.observer.serving(&format!(
                "{} under the {} bound at {rate:.3} requests/s ({label}), {} requests, batch cap {}",
                plan.workload,
                plan.bound.name,
                plan.lengths.len(),
                plan.max_batch
            ));
            let hook = std::env::var(SIMULATE_POISON_VAR).ok().filter(|_| self.segment == 1);
            let capture = hook
                .as_deref()
                .filter(|&hook| {
                    plan.mode == StepMode::Graph && (hook != "serving-capture-over" || label == ServedRate::OVER)
                })
                .and_then(simulated_capture_failure);
            let struck = match hook.as_deref() {
                Some("serving") => true,
                Some("serving-over") => label == ServedRate::OVER,
                _ => false,
            };
            let outcome = if struck {
                Some(Err(ServeError::Failed(simulated_poison())))
            } else if let Some(reason) = capture {
                Some(Err(ServeError::Capture(reason)))
            } else {
                self.serve_rate(model, plan, &label, rate, max_s, tables)?
            };
            match outcome {
                Some(Ok(rate)) => {
                    served.push(rate);
                    self.mark_serving(plan, &served)?;
                }
                Some(Err(ServeError::Failed(message))) => {
                    let reason = format!("serving {label} failed: {message}");
                    if served.is_empty() {
                        return Ok(Some(Err(ServeError::Failed(reason))));
                    }
                    ends.cut_short = Some(reason);
                    break;
                }
                // At a later rate, the rates served with graph steps are kept.
                Some(Err(ServeError::Capture(reason))) if !served.is_empty() => {
                    ends.cut_short =
                        Some(format!("capturing the loop's graph steps for the {label} rate failed: {reason}"));
                    ends.capture_failed = Some(reason);
                    break;
                }
                Some(Err(capture @ ServeError::Capture(_))) => return Ok(Some(Err(capture))),
                None if served.is_empty() => return Ok(None),
                None => {
                    ends.stopped = true;
                    ends.cut_short = Some(stopped::STOPPED.to_owned());
                    break;
                }
            }
        }
        Ok(Some(Ok(served)))
    }

    /// Why `plan`'s KV pool, allocated whole before its first request, cannot fit in the
    /// device's free memory; `None` when it fits or the free memory is not known.
    fn pool_does_not_fit(&self, setup: &Setup, plan: &lynx_analysis::serving::Plan) -> Option<String> {
        let (free_bytes, source) = *self.device.free_memory().known()?;
        let pool = plan.pool();
        let estimate = lynx_analysis::memory::pool_memory(&setup.shape, setup.config.suite.precision, pool);
        let reason = estimate.refusal(free_bytes)?;
        Some(format!(
            "the serving loop's KV pool of {} rows of {} tokens {reason} ({source})",
            pool.rows, pool.capacity
        ))
    }

    /// The marker naming the workload and bound about to be served, with the entry the result
    /// gets for it should this process die before it is done (the supervisor says how).
    fn mark_serving(&self, plan: &lynx_analysis::serving::Plan, served: &[ServedRate]) -> Result<(), RunError> {
        let died = "the worker process died while serving";
        let (rates, ends) = if served.is_empty() {
            (Reported::unavailable(died), PlanEnds::default())
        } else {
            (Reported::Known(served.to_vec()), PlanEnds { cut_short: Some(died.to_owned()), ..PlanEnds::default() })
        };
        let Some(entry) = served_entry(plan, rates, ends) else { return Ok(()) };
        self.write_marker(entry)
    }

    /// The serving marker, holding `entry` (its server the one `entry`'s steps ran on).
    fn write_marker(&self, entry: Served) -> Result<(), RunError> {
        let server = server_words(&self.result.config.suite, entry.mode);
        let marker = ServingRecord { served: vec![entry], ..ServingRecord::new(server) };
        write_json_atomic(&self.run.serving_path(), &marker)
    }

    /// One workload and bound served (or why not), saved.
    fn record_served(
        &mut self,
        plan: &lynx_analysis::serving::Plan,
        rates: Result<Vec<ServedRate>, String>,
        ends: PlanEnds,
    ) -> Result<(), RunError> {
        let Some(served) = served_entry(plan, rates.map_or_else(Reported::unavailable, Reported::Known), ends) else {
            return Ok(());
        };
        self.put_served(served)
    }

    /// `served` said and saved in the result, in place of the entry of its workload and bound a
    /// stop cut short, where there is one.
    fn put_served(&mut self, served: Served) -> Result<(), RunError> {
        self.observer.served(&served);
        if let Some(record) = &mut self.result.serving {
            match record.served.iter_mut().find(|s| s.stopped && s.is_for(&served.workload.name, &served.bound.name)) {
                Some(slot) => *slot = served,
                None => record.served.push(served),
            }
        }
        self.save()
    }

    /// One rate served and compared with the simulation: `None` when `stop` was raised; why not
    /// when a step or the capture of the graph steps failed.
    fn serve_rate(
        &mut self,
        model: &Model,
        plan: &lynx_analysis::serving::Plan,
        label: &str,
        rate: f64,
        max_s: f64,
        tables: (&lynx_analysis::sim::StepTable, &lynx_analysis::sim::StepTable),
    ) -> Result<Option<Result<ServedRate, ServeError>>, RunError> {
        use lynx_analysis::serving::{
            at_loop_replay, at_loop_steps, batches_off_line, measured_figures, relative_error, replay, serve_figures,
            simulated_draws, step_spread,
        };
        let arrivals = lynx_analysis::sim::arrival_times(plan.seed, plan.lengths.len(), rate);
        let server = super::serve::Server {
            max_batch: plan.max_batch,
            max_prefill_batch: plan.max_prefill_batch,
            chunk: plan.chunk,
            graphs: (plan.mode == StepMode::Graph).then(|| self.graphs.clone()),
            slower_decode: std::env::var(super::SIMULATE_SLOW_SERVING_VAR)
                .ok()
                .filter(|_| label == ServedRate::BOUNDED)
                .and_then(|ms| ms.parse::<f64>().ok())
                .and_then(|ms| std::time::Duration::try_from_secs_f64(ms / 1e3).ok())
                .unwrap_or_default(),
            at_least: std::env::var_os(super::SIMULATE_CELL_PACE_VAR).map(|_| (tables.0.clone(), tables.1.clone())),
        };
        let requests = super::serve::Requests { lengths: &plan.lengths, arrivals_s: &arrivals, seed: plan.seed };
        let clock = || self.telemetry.now_s();
        let host = crate::host_load::HostLoad::now();
        let (served, other_device_processes) = crate::devices::other_processes_over(&self.device.record, || {
            super::serve::serve(model, &server, &requests, max_s, &clock, false, self.stop)
        });
        let load = match served {
            Ok(Some(load)) => load,
            Ok(None) => return Ok(None),
            Err(error) => return Ok(Some(Err(error))),
        };
        let crate::host_load::RecordedLoad { other_cpu_cores, stolen_cpu_cores, other_cpu_cores_elsewhere } =
            crate::host_load::OtherLoad::recorded(host.as_ref().and_then(|h| h.other_load_since()));
        let cpu_throttled_s = host.and_then(|h| h.throttled_since());
        let steps = looked_up(&load.steps, tables);
        let traced = trace(plan, label, rate, &load, &steps);
        crate::store::append_json_line(&self.run.served_trace_path(), &traced)?;
        if load.served.len() < 10 {
            return Ok(Some(Err(ServeError::Failed(format!(
                "only {} of {} requests finished within serve.max_s ({max_s} s)",
                load.served.len(),
                plan.lengths.len()
            )))));
        }
        // The device's pace once the window is over (absent where the run is being stopped: the
        // rate served is kept all the same).
        let pace_after = self.pace_now(model);
        // And the prefill cell nearest the loop's prefill steps.
        let prefill_after = self.prefill_now(model, &steps, tables.0);
        let finite = |v: f64, what: &str| Finite::new(v, what).map_err(|e| e.to_string());
        let built = (|| -> Result<ServedRate, String> {
            let measured = serve_figures(&measured_figures(&load.served)?)?;
            let predicted = plan.predict(tables.0, tables.1, rate);
            let simulated = predicted.as_ref().map_err(Clone::clone).and_then(|p| serve_figures(&p.median));
            let relative = simulated.as_ref().ok().and_then(|s| relative_error(&measured, s));
            let (decode_steps, prefill_steps) = (step_ratios(&steps, false, false), step_ratios(&steps, true, false));
            let (decode_ratio, prefill_ratio) = (median_ratio(&decode_steps), median_ratio(&prefill_steps));
            let [after_prefill, after_decode] = lynx_analysis::serving::prefill_ratios_by_previous(&traced.steps);
            let paced = at_loop_steps(plan, tables, rate, (&prefill_steps, &decode_steps), &measured);
            let replayed =
                at_loop_replay(plan, tables, rate, (replay(&prefill_steps), replay(&decode_steps)), &measured);
            let overhead = lynx_analysis::stats::Sorted::new(load.overhead_s.clone()).map_err(|e| e.to_string())?;
            let window = self.telemetry.summaries(load.window_s.0, load.window_s.1);
            let readings = self.telemetry.readings(load.window_s.0, load.window_s.1);
            let output: f64 = load.served.iter().map(|s| f64::from(s.osl)).sum();
            let input: f64 = load.served.iter().map(|s| f64::from(s.isl)).sum();
            let energy = window.first().and_then(|w| w.energy.as_ref()).map(|e| e.joules.get());
            let per = |tokens: f64, what: &str| match energy {
                Some(joules) if load.unfinished == 0 => Finite::new(joules / tokens, what)
                    .map_or_else(|e| Reported::unavailable(e.to_string()), Reported::Known),
                Some(_) => Reported::unavailable(
                    "requests were cut off by serve.max_s: the window's energy is not theirs alone",
                ),
                None => Reported::unavailable("the device's energy was not measured over the window"),
            };
            Ok(ServedRate {
                label: label.to_owned(),
                rate_per_s: finite(rate, "rate")?,
                requests: load.served.len() as u32,
                window_s: finite(load.window_s.1 - load.window_s.0, "window")?,
                within_bound: plan.bound.holds(measured.ttft_p99_s.get(), measured.tpot_p99_s.get()),
                measured,
                simulated: simulated.map_or_else(Reported::unavailable, Reported::Known),
                relative_error: relative,
                overhead_s: [
                    finite(overhead.median(), "overhead")?,
                    finite(overhead.quantile(0.9), "overhead")?,
                    finite(overhead.quantile(0.99), "overhead")?,
                ],
                iterations: load.overhead_s.len() as u64,
                joules_per_output_token: per(output, "joules per output token"),
                joules_per_token: per(output + input, "joules per token"),
                unfinished: (load.unfinished > 0).then_some(load.unfinished as u32),
                decode_step_ratio: decode_ratio,
                prefill_step_ratio: prefill_ratio,
                decode_step_ratio_after_idle: median_ratio(&step_ratios(&steps, false, true)),
                prefill_step_ratio_after_idle: median_ratio(&step_ratios(&steps, true, true)),
                prefill_step_ratio_after_prefill: after_prefill,
                prefill_step_ratio_after_decode: after_decode,
                other_cpu_cores,
                stolen_cpu_cores,
                other_cpu_cores_elsewhere,
                cpu_throttled_s,
                other_device_processes,
                simulated_draws: predicted.ok().and_then(|p| simulated_draws(&p).ok()),
                at_loop_pace: None,
                at_loop_steps: paced.ok(),
                at_loop_replay: replayed.ok(),
                decode_step_spread: step_spread(&decode_steps),
                prefill_step_spread: step_spread(&prefill_steps),
                decode_slow_steps: slow_loop_steps(&steps, false, &readings, load.window_s.0),
                prefill_slow_steps: slow_loop_steps(&steps, true, &readings, load.window_s.0),
                batches_off_line: {
                    let mut off = batches_off_line(tables.0, &prefill_steps, true);
                    off.extend(batches_off_line(tables.1, &decode_steps, false));
                    (!off.is_empty()).then_some(off)
                },
                steady: plan.steady(tables.0, tables.1, rate).ok(),
                pace_after,
                prefill_after,
            })
        })();
        Ok(Some(built.map_err(ServeError::Failed)))
    }

    /// The measured prefill cell nearest the loop's prefill `steps` timed again now, against the
    /// `prefill` table's time there ([`ServedRate::prefill_after`]); `None` where the loop ran no
    /// prefill step, no prefill cell was measured, or `stop` was raised.
    fn prefill_now(
        &self,
        model: &Model,
        steps: &[(&super::serve::Step, Option<lynx_analysis::sim::Lookup>)],
        prefill: &lynx_analysis::sim::StepTable,
    ) -> Option<Reported<lynx_schema::serving::PrefillRecheck>> {
        let loop_steps: Vec<(u32, u32)> =
            steps.iter().filter(|(s, _)| s.prefill).map(|(s, _)| (s.batch, s.len)).collect();
        let cells = lynx_analysis::serving::measured_prefills(&self.result.cells);
        let (batch, prompt_len) = lynx_analysis::serving::nearest_prefill(cells, &loop_steps)?;
        let timed = super::cell::retime_prefill(model, batch, prompt_len, &self.result.config.suite.measure, self.stop);
        let recheck = |step_s: Vec<f64>| -> Result<lynx_schema::serving::PrefillRecheck, String> {
            let median = lynx_analysis::stats::median(&step_s).map_err(|e| e.to_string())?;
            let table_s = prefill.lookup(batch, f64::from(prompt_len)).map(|l| l.step_s).filter(|&t| t > 0.0);
            Ok(lynx_schema::serving::PrefillRecheck {
                batch,
                prompt_len,
                steps: step_s.len() as u64,
                median_s: Finite::new(median, "re-timed prefill step").map_err(|e| e.to_string())?,
                ratio: table_s.and_then(|t| Finite::new(median / t, "re-timed prefill step over the table").ok()),
            })
        };
        match timed {
            Ok(None) => None,
            Ok(Some(step_s)) => Some(recheck(step_s).map_or_else(Reported::unavailable, Reported::Known)),
            Err(e) => {
                Some(Reported::unavailable(format!("its step at batch {batch}, prompt {prompt_len} failed: {e}")))
            }
        }
    }

    /// This process's warm-up step timed again now, as after the sweep ([`ServedRate::pace_after`]);
    /// `None` where the process did not warm up or `stop` was raised.
    fn pace_now(&self, model: &Model) -> Option<Reported<lynx_schema::result::PaceRecheck>> {
        let warmup = self.result.resumed_warmups.last().or(self.result.warmup.as_ref())?;
        super::warmup::recheck(model, warmup, &self.result.config.suite.measure, self.stop)
    }

    /// The graph parity check, once per run, where this process can capture graphs: graph
    /// lines are measured only after it passed (a resumed run keeps its verdict). Its time is
    /// one of the phases before warm-up.
    fn check_graphs(&mut self, model: &Model, precision: lynx_schema::config::Precision) -> Result<(), RunError> {
        if !self.graphs.available() || self.result.checks.iter().any(|c| c.name == CheckName::GraphParity) {
            return Ok(());
        }
        let check = timed(&mut self.phases, "graph parity", || graph_parity(model, &self.graphs, precision));
        self.observer.checked(&check);
        self.result.checks.push(check);
        self.save()
    }

    /// Warm up to equilibrium (or give up) and record it; `false` when `stop` was raised.
    fn warm(&mut self, model: &Model, setup: &Setup) -> Result<bool, RunError> {
        let start_s = self.telemetry.now_s();
        // Warm-up loops no step the sweep would skip as not fitting (`Turn::does_not_fit`).
        let suite = &setup.config.suite;
        let free = self.device.free_memory().known().map(|(free, _)| *free);
        let fits = |cell| lynx_analysis::memory::fits(&setup.shape, suite.precision, cell, &suite.measure, free);
        let Some(mut warmup) = warm_up(model, suite, fits, &mut *self.observer, &self.telemetry, self.stop)? else {
            return Ok(false);
        };
        // Read as the last step ends, before the GPU idles and lowers its link's speed.
        warmup.link_at_end = crate::devices::link_now(&self.device.record);
        warmup.telemetry = self.telemetry.summaries(start_s, self.telemetry.now_s());
        warmup.segment = Some(self.segment);
        self.observer.warmed(&warmup);
        match self.result.warmup {
            None => self.result.warmup = Some(warmup),
            Some(_) => self.result.resumed_warmups.push(warmup),
        }
        self.save()?;
        Ok(true)
    }

    /// The warm-up step timed again, once this process's warm-up has seen the sweep done
    /// ([`WarmupRecord::after_sweep`]). `Stopped` when `stop` was raised; `Poisoned` where the
    /// step struck a GPU error that leaves the device context unusable (recorded, for a fresh
    /// process to serve); else `Done`.
    fn recheck(&mut self, model: &Model, setup: &Setup) -> Result<WorkEnd, RunError> {
        let warmup = match self.result.resumed_warmups.last_mut() {
            Some(last) => last,
            None => match self.result.warmup.as_mut() {
                Some(first) => first,
                None => return Ok(WorkEnd::Done),
            },
        };
        if warmup.after_sweep.is_some() {
            return Ok(WorkEnd::Done);
        }
        // The test hook's `after-sweep` strikes the first worker's step with a GPU error.
        let recheck = if std::env::var(SIMULATE_POISON_VAR).is_ok_and(|v| v == "after-sweep") && self.segment == 1 {
            Some(super::warmup::not_timed_again(&simulated_poison()))
        } else {
            super::warmup::recheck(model, warmup, &setup.config.suite.measure, self.stop)
        };
        let Some(recheck) = recheck else { return Ok(WorkEnd::Stopped) };
        let poisoned = recheck.reason().is_some_and(poisons_the_context);
        warmup.after_sweep = Some(recheck);
        self.observer.rechecked(warmup);
        self.save()?;
        Ok(if poisoned { WorkEnd::Poisoned } else { WorkEnd::Done })
    }

    /// Every cell the sweep still lacks, each journaled before the next starts.
    fn sweep(
        &mut self,
        model: &Model,
        head_only: Option<&HeadOnly>,
        setup: &Setup,
        bounds: &[LatencyBound],
    ) -> Result<WorkEnd, RunError> {
        let suite = &setup.config.suite;
        let modes = sweep::decode_modes(&self.result.checks);
        let most_cells = suite.prefill.ladder().batches().len() * suite.prefill.prompt_lens.len()
            + suite.decode.ladder().batches().len() * suite.decode.ctxs.len() * modes.len();
        while let Some(shape) = sweep::plan(suite, bounds, &self.result.cells, &modes).next {
            if self.stop.load(Ordering::SeqCst) {
                return Ok(WorkEnd::Stopped);
            }
            write_json_atomic(&self.run.current_path(), &shape)?;
            self.observer.cell_started(&shape, self.result.cells.len() + 1, most_cells);
            let simulated =
                std::env::var(SIMULATE_POISON_VAR).is_ok_and(|v| v == shape.to_string()) && self.segment == 1;
            let mut cell = match self.does_not_fit(setup, shape) {
                Some(skipped) => skipped,
                None if simulated => CellRecord::failed(shape, simulated_poison()),
                None => match self.measure_stable(model, head_only, shape, &suite.measure) {
                    Some(cell) => cell,
                    None => return Ok(WorkEnd::Stopped),
                },
            };
            cell.segment = Some(self.segment);
            self.journal.append(&cell)?;
            self.observer.cell_done(&cell);
            let poisoned = cell.status.message().is_some_and(poisons_the_context);
            self.result.cells.push(cell);
            self.save()?;
            remove(&self.run.current_path())?;
            if poisoned {
                return Ok(WorkEnd::Poisoned);
            }
        }
        Ok(WorkEnd::Done)
    }
}
