//! One run: warm-up, then every cell, with the result rewritten after each cell.

use crate::devices::Device;
use crate::libtorch::load_gpu_backends;
use crate::parity::ParityWeights;
use crate::store::write_json_atomic;
use crate::telemetry::RunTelemetry;
use crate::RunError;
use lynx_core::checks::measurement_checks;
use lynx_core::config::{source_layers, MeasureConfig, ModelShape, Suite};
use lynx_core::equilibrium::{Detector, Verdict, WindowStats};
use lynx_core::result::{
    CellRecord, CellShape, Check, ConfigRecord, FullDepth, HostRecord, RunResult, RunStatus, WarmupRecord,
    WeightsRecord, RESULT_SCHEMA,
};
use lynx_core::stats::{StatsError, StepTimeSummary};
use lynx_core::telemetry::Sample;
use lynx_core::time::{compact_utc, rfc3339_utc};
use lynx_core::value::Finite;
use lynx_models::{Checkpoint, KvCache, Model, ModelError};
use std::hash::{BuildHasher, Hasher};
use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Decode steps the warm-up runs before returning its KV cache to the starting context.
const WARMUP_CACHE_ROOM: i64 = 64;
/// How often warm-up consults the equilibrium detector and reports progress.
const WARMUP_CHECK_S: f64 = 0.5;

/// What to run.
pub struct Plan {
    pub suite: Suite,
    pub model: ModelShape,
    pub device: Device,
    pub host: HostRecord,
    /// Results go to `<results_dir>/<device slug>/<run id>.json`.
    pub results_dir: PathBuf,
    /// A Hugging Face safetensors checkpoint to read the weights from; drawn from the suite's
    /// seed when `None`.
    pub weights: Option<PathBuf>,
}

/// Hears how a run goes; the CLI prints from it.
pub trait Observer {
    /// The result file exists and will be kept current.
    fn started(&mut self, _result_path: &std::path::Path, _result: &RunResult) {}
    /// Warm-up is `elapsed_s` seconds in: the detector's last window so far, whether it meets the
    /// criteria (equilibrium then waits only for `min_s`), and the device's latest sample.
    fn warming(&mut self, _progress: &WarmupProgress) {}
    fn warmed(&mut self, _warmup: &WarmupRecord) {}
    fn checked(&mut self, _check: &Check) {}
    /// Cell `index` of `total` (from 1) is starting.
    fn cell_started(&mut self, _shape: &CellShape, _index: usize, _total: usize) {}
    fn cell_done(&mut self, _cell: &CellRecord) {}
}

/// Where warm-up stands, for the observer.
pub struct WarmupProgress<'a> {
    pub elapsed_s: f64,
    pub max_s: f64,
    pub window: Option<&'a WindowStats>,
    /// Whether the window meets every criterion.
    pub holds: bool,
    /// The device's latest telemetry sample.
    pub latest: Option<&'a Sample>,
}

/// A finished run.
pub struct Outcome {
    pub result: RunResult,
    pub path: PathBuf,
}

/// Run `plan`, writing the result once parity has run, after warm-up and after every cell.
pub fn run(plan: Plan, observer: &mut dyn Observer) -> Result<Outcome, RunError> {
    let runtime = load_gpu_backends();
    // Nothing a run does needs gradients: inference mode skips autograd and version-counter
    // bookkeeping on every operation, as Python's torch.inference_mode() does.
    let _inference = crate::libtorch::InferenceMode::enter();
    let started_s = unix_now_s();
    let run_id = format!("{}-{:08x}", compact_utc(started_s), random_u32());
    let path = plan.results_dir.join(plan.device.slug()).join(format!("{run_id}.json"));
    let Plan { suite, model, device, host, weights, .. } = plan;
    let checkpoint = match &weights {
        Some(dir) if suite.scale.tp > 1 => {
            return Err(RunError::Config(format!(
                "--weights {} with scale.tp = {}: reading a tensor-parallel shard of a checkpoint is not supported; \
                 measure a shard with drawn weights",
                dir.display(),
                suite.scale.tp
            )));
        }
        Some(dir) => Some(Checkpoint::open(dir).map_err(|e| RunError::Weights(e.to_string()))?),
        None => None,
    };
    let weights_record = match &checkpoint {
        Some(c) => WeightsRecord::Checkpoint { dir: c.dir.display().to_string(), files: c.files.clone() },
        None => WeightsRecord::Random { seed: suite.seed },
    };
    let config =
        ConfigRecord::new(suite, model, weights_record).map_err(|e| RunError::Config(format!("suite: {e}")))?;
    let shape = config.device_shape().clone();
    // Layer i of the device's shape stands for this layer of the model (and its checkpoint).
    let layers = source_layers(&config.model, &shape);
    let (precision, seed, torch_device) = (config.suite.precision, config.suite.seed, device.torch);
    let build = |shape: &ModelShape, layers: &[u32], context: &str| {
        match &checkpoint {
            Some(c) => Model::load(shape, c, layers, Some((torch_device, precision))),
            None => Model::new(shape, precision, torch_device, seed),
        }
        .map_err(|e| model_error(context, e))
    };

    // Parity first: a checkpoint that cannot serve the model is bad input, found before any file
    // is written.
    let parity_weights = match &checkpoint {
        Some(c) => ParityWeights::Checkpoint(c, &layers),
        None => ParityWeights::Random(seed),
    };
    let parity =
        match crate::parity::measure(&shape, precision, torch_device, seed, parity_weights, &config.suite.parity) {
            Ok(logits) => crate::parity::judge(&logits, precision),
            Err(error @ ModelError::Weights(_)) => return Err(model_error("the parity model", error)),
            Err(error) => Check {
                name: "parity".to_owned(),
                passed: false,
                detail: format!("the parity run failed: {error}"),
                measured: None,
                limit: Finite::new(crate::parity::tolerance(precision), "parity limit").ok(),
            },
        };
    let samples_path = path.with_extension("samples.jsonl");
    let telemetry = RunTelemetry::start(&device, config.suite.telemetry.rate_hz, &samples_path)?;
    let mut result = RunResult {
        schema: RESULT_SCHEMA.to_owned(),
        run_id,
        status: RunStatus::Incomplete,
        started_at: rfc3339_utc(started_s),
        updated_at: rfc3339_utc(started_s),
        harness: crate::harness::describe(runtime),
        device: device.record.clone(),
        host,
        config,
        warmup: None,
        telemetry: telemetry.record.clone(),
        cells: Vec::new(),
        checks: vec![parity],
    };
    let save = |result: &mut RunResult| {
        result.updated_at = rfc3339_utc(unix_now_s());
        write_json_atomic(&path, result)
    };
    save(&mut result)?;
    observer.started(&path, &result);
    for check in &result.checks {
        observer.checked(check);
    }

    let suite = &result.config.suite;
    let model = build(&shape, &layers, &format!("building {} on {}", suite.model, device.record.device))?;
    let warmup_start_s = telemetry.now_s();
    let mut warmup = warm_up(&model, suite, observer, &telemetry)?;
    warmup.telemetry = telemetry.summaries(warmup_start_s, telemetry.now_s());
    observer.warmed(&warmup);
    result.warmup = Some(warmup);
    save(&mut result)?;

    // A layer subset is extrapolated to full depth from the same cell run with no layers.
    let head_only = match result.config.suite.scale.layers {
        Some(measured_layers) => {
            let mut head_shape = shape.clone();
            head_shape.num_layers = 0;
            if let Some(moe) = &mut head_shape.moe {
                moe.first_dense_layers = 0;
            }
            let head = build(&head_shape, &[], "building the head-only model")?;
            Some(HeadOnly { model: head, measured_layers, model_layers: result.config.model.num_layers })
        }
        None => None,
    };

    let all_cells = cells(&result.config.suite);
    for (index, shape) in all_cells.iter().copied().enumerate() {
        observer.cell_started(&shape, index + 1, all_cells.len());
        let cell = measure_cell(&model, head_only.as_ref(), shape, &result.config.suite.measure, &telemetry);
        observer.cell_done(&cell);
        result.cells.push(cell);
        save(&mut result)?;
    }
    let device_source = result.telemetry.sources.iter().find(|s| s.name == telemetry.device_source());
    let checks = measurement_checks(result.warmup.as_ref(), &result.cells, device_source);
    for check in &checks {
        observer.checked(check);
    }
    result.checks.extend(checks);
    telemetry.finish()?;
    result.status = RunStatus::Complete;
    save(&mut result)?;
    Ok(Outcome { result, path })
}

/// A model that could not be built: bad input when the checkpoint cannot serve it.
fn model_error(context: &str, error: ModelError) -> RunError {
    match error {
        ModelError::Weights(message) => RunError::Weights(format!("weights: {message}")),
        source => RunError::Model { context: context.to_owned(), source },
    }
}

/// The suite's cells in the order they run: prefill, then decode, each by batch then length.
fn cells(suite: &Suite) -> Vec<CellShape> {
    let mut cells = Vec::new();
    for &batch in &suite.prefill.batches {
        for &prompt_len in &suite.prefill.prompt_lens {
            cells.push(CellShape::Prefill { batch, prompt_len });
        }
    }
    for &batch in &suite.decode.batches {
        for &ctx in &suite.decode.ctxs {
            cells.push(CellShape::Decode { batch, ctx });
        }
    }
    cells
}

/// Loop the decode step at the suite's largest batch and context (the heaviest decode step) until
/// the detector, fed the step times and the device's telemetry, sees equilibrium or gives up.
fn warm_up(
    model: &Model,
    suite: &Suite,
    observer: &mut dyn Observer,
    telemetry: &RunTelemetry,
) -> Result<WarmupRecord, RunError> {
    let batch = suite.decode.batches.iter().copied().max().unwrap_or(1);
    let ctx = suite.decode.ctxs.iter().copied().max().unwrap_or(1);
    let model_error = |source| RunError::Model { context: "warm-up".to_owned(), source };
    let mut cache = KvCache::new(model, i64::from(batch), i64::from(ctx) + WARMUP_CACHE_ROOM).map_err(model_error)?;
    cache.fill_random(i64::from(ctx)).map_err(model_error)?;
    let mut tokens = model.random_tokens(i64::from(batch), 1).map_err(model_error)?;
    let config = &suite.warmup;
    let start_s = telemetry.now_s();
    let mut detector = Detector::new(config.clone(), start_s);
    let mut samples_seen = 0;
    let mut latest: Option<Sample> = None;
    let mut steps = 0u64;
    let mut next_check_s = 0.0;
    loop {
        if cache.len() == cache.capacity() {
            cache.truncate(i64::from(ctx));
        }
        let step_start = Instant::now();
        tokens = decode_step(model, &tokens, &mut cache).map_err(model_error)?;
        let step_s = step_start.elapsed().as_secs_f64();
        steps += 1;
        let now_s = telemetry.now_s();
        let elapsed_s = now_s - start_s;
        detector.push(now_s, step_s);
        if elapsed_s < next_check_s && elapsed_s < config.max_s {
            continue;
        }
        next_check_s = elapsed_s + WARMUP_CHECK_S;
        for sample in telemetry.device_samples_from(samples_seen) {
            samples_seen += 1;
            latest = Some(sample.clone());
            detector.push_sample(sample);
        }
        let (reached, window) = match detector.verdict(now_s)? {
            Verdict::Warming(window) => {
                observer.warming(&WarmupProgress {
                    elapsed_s,
                    max_s: config.max_s,
                    holds: window.as_ref().is_some_and(|w| detector.holds(w, elapsed_s)),
                    window: window.as_ref(),
                    latest: latest.as_ref(),
                });
                continue;
            }
            Verdict::Reached(window) => (true, Some(window)),
            Verdict::GaveUp(window) => (false, window),
        };
        return Ok(WarmupRecord {
            duration_s: Finite::new(elapsed_s, "warm-up duration").map_err(StatsError::from)?,
            steps,
            batch,
            ctx,
            equilibrium_reached: reached,
            criteria: config.clone(),
            last_window: window,
            telemetry: Vec::new(),
        });
    }
}

/// One decode step; done when the new tokens are on the host.
fn decode_step(model: &Model, tokens: &tch::Tensor, cache: &mut KvCache) -> Result<tch::Tensor, ModelError> {
    let next = model.decode(tokens, cache)?;
    to_host(&next)?;
    Ok(next)
}

/// Copy generated tokens to the host, as a serving engine does each step. The copy waits for the
/// device to finish the step, so it is where a timed step ends.
fn to_host(tokens: &tch::Tensor) -> Result<(), ModelError> {
    let _on_host = tokens.f_to_device(tch::Device::Cpu)?;
    Ok(())
}

/// The model with no layers, for extrapolating a layer subset to full depth.
struct HeadOnly {
    model: Model,
    measured_layers: u32,
    model_layers: u32,
}

/// Measure one cell; a failure of any step fails the cell with its message. The cell's
/// telemetry covers its own timed steps (not the head-only model's).
fn measure_cell(
    model: &Model,
    head_only: Option<&HeadOnly>,
    shape: CellShape,
    limits: &MeasureConfig,
    telemetry: &RunTelemetry,
) -> CellRecord {
    let clock = || telemetry.now_s();
    let run = |model: &Model| -> Result<(StepTimeSummary, Measured), String> {
        let measured = match shape {
            CellShape::Prefill { batch, prompt_len } => measure_prefill(model, batch, prompt_len, limits, &clock),
            CellShape::Decode { batch, ctx } => measure_decode(model, batch, ctx, limits, &clock),
        }
        .map_err(|e| e.to_string())?;
        Ok((StepTimeSummary::from_samples(&measured.step_s).map_err(|e| e.to_string())?, measured))
    };
    let summarised = run(model).and_then(|(summary, measured)| {
        let full_depth = match head_only {
            Some(head) => {
                let (head_summary, _) = run(&head.model).map_err(|e| format!("head-only model: {e}"))?;
                Some(FullDepth::extrapolate(&summary, head_summary, head.measured_layers, head.model_layers)?)
            }
            None => None,
        };
        let steps = summary.n as u64;
        let measured_s = Finite::new(measured.measured_s, "measured time").map_err(|e| e.to_string())?;
        let mut cell = CellRecord::measured(shape, summary, measured_s, measured.ctx_end, full_depth)
            .map_err(|e| e.to_string())?;
        cell.telemetry = telemetry.summaries(measured.window_s.0, measured.window_s.1);
        let tokens = steps * shape.tokens_per_step();
        cell.joules_per_token = cell
            .telemetry
            .iter()
            .find_map(|w| w.energy.as_ref())
            .and_then(|energy| Finite::new(energy.joules.get() / tokens as f64, "joules per token").ok());
        Ok(cell)
    });
    summarised.unwrap_or_else(|message| CellRecord::failed(shape, message))
}

/// A model's timed steps of one cell.
struct Measured {
    step_s: Vec<f64>,
    /// Wall time of the timed steps.
    measured_s: f64,
    /// Decode: the context at the last step.
    ctx_end: Option<u32>,
    /// The timed steps' span on the run's telemetry clock.
    window_s: (f64, f64),
}

fn measure_prefill(
    model: &Model,
    batch: u32,
    prompt_len: u32,
    limits: &MeasureConfig,
    clock: &dyn Fn() -> f64,
) -> Result<Measured, ModelError> {
    let prompts = model.random_tokens(i64::from(batch), i64::from(prompt_len))?;
    let mut cache = KvCache::new(model, i64::from(batch), i64::from(prompt_len))?;
    let mut step = || to_host(&model.prefill(&prompts, &mut cache)?);
    step()?;
    timed_steps(limits, clock, step)
}

fn measure_decode(
    model: &Model,
    batch: u32,
    ctx: u32,
    limits: &MeasureConfig,
    clock: &dyn Fn() -> f64,
) -> Result<Measured, ModelError> {
    let ctx = i64::from(ctx);
    let mut cache = KvCache::new(model, i64::from(batch), ctx + i64::from(limits.max_steps))?;
    cache.fill_random(ctx)?;
    let mut tokens = model.random_tokens(i64::from(batch), 1)?;
    tokens = decode_step(model, &tokens, &mut cache)?;
    cache.truncate(ctx);
    let mut measured = timed_steps(limits, clock, || {
        tokens = decode_step(model, &tokens, &mut cache)?;
        Ok(())
    })?;
    measured.ctx_end = Some(u32::try_from(cache.len() - 1).unwrap_or(u32::MAX));
    Ok(measured)
}

/// Run `step` at least `min_steps` times and `min_s` seconds, at most `max_steps` times.
fn timed_steps(
    limits: &MeasureConfig,
    clock: &dyn Fn() -> f64,
    mut step: impl FnMut() -> Result<(), ModelError>,
) -> Result<Measured, ModelError> {
    let mut step_s = Vec::new();
    let window_start = clock();
    let start = Instant::now();
    while step_s.len() < limits.max_steps as usize
        && (step_s.len() < limits.min_steps as usize || start.elapsed().as_secs_f64() < limits.min_s)
    {
        let step_start = Instant::now();
        step()?;
        step_s.push(step_start.elapsed().as_secs_f64());
    }
    Ok(Measured { step_s, measured_s: start.elapsed().as_secs_f64(), ctx_end: None, window_s: (window_start, clock()) })
}

fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A random suffix for run ids, from the OS-seeded hasher keys std already draws.
fn random_u32() -> u32 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    hasher.finish() as u32
}
