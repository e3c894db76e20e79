//! One run: its folder and plan, a worker's turn on it (parity, warm-up, then every cell the
//! sweep still lacks, each journaled before the next), and its assembly into a result.

use crate::devices::Device;
use crate::journal::{read_json, Journal, RunDir};
use crate::libtorch::load_gpu_backends;
use crate::parity::ParityWeights;
use crate::store::write_json_atomic;
use crate::telemetry::{RunTelemetry, Segment};
use crate::RunError;
use lynx_analysis::checks::measurement_checks;
use lynx_analysis::derived::derive;
use lynx_analysis::equilibrium::{Detector, Verdict};
use lynx_analysis::latency::bounds_for;
use lynx_analysis::roofline::{cell_roofline, roofline_check};
use lynx_analysis::stats::StatsError;
use lynx_analysis::sweep;
use lynx_models::{Checkpoint, KvCache, Model, ModelError};
use lynx_probes::roofline::ProbePlan;
use lynx_schema::config::{source_layers, MeasureConfig, ModelShape, Suite};
use lynx_schema::derived::PriceInputs;
use lynx_schema::equilibrium::WindowStats;
use lynx_schema::result::{
    CellRecord, CellShape, CellStatus, Check, ConfigRecord, Reproduces, RunPlan, RunResult, RunStatus, WarmupRecord,
    WeightsRecord, RESULT_SCHEMA,
};
use lynx_schema::roofline::RooflineRecord;
use lynx_schema::stats::StepTimeSummary;
use lynx_schema::telemetry::Sample;
use lynx_schema::time::{compact_utc, rfc3339_utc};
use lynx_schema::value::Finite;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The largest batch warm-up decodes at.
const WARMUP_MAX_BATCH: u32 = 64;
/// Decode steps the warm-up runs before returning its KV cache to the starting context.
const WARMUP_CACHE_ROOM: i64 = 64;
/// How often warm-up consults the equilibrium detector and reports progress.
const WARMUP_CHECK_S: f64 = 0.5;

/// What to run.
pub struct Plan {
    pub suite: Suite,
    pub model: ModelShape,
    pub device: Device,
    /// Runs go to `<results_dir>/<device slug>/<run id>/`.
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
    /// Cell `index` (from 1) of at most `total` is starting (a ladder may stop early).
    fn cell_started(&mut self, _shape: &CellShape, _index: usize, _total: usize) {}
    fn cell_done(&mut self, _cell: &CellRecord) {}
    /// The roofline probes ran (burst before warm-up, sustained after).
    fn probed(&mut self, _roofline: &RooflineRecord) {}
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

/// A run assembled into its result.
pub struct Outcome {
    pub result: RunResult,
    pub path: PathBuf,
}

/// How a worker's turn on a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkEnd {
    /// The sweep has no cell left to run.
    Done,
    /// The stop flag was raised: the current step finished, the cell it belonged to was left
    /// out (it is measured again on resume), and the files are consistent.
    Stopped,
}

/// Create the run's folder and write its plan: nothing is measured yet. A suite whose scale
/// cannot cut the model, or a checkpoint folder that is not one, is refused first.
pub fn start(plan: &Plan) -> Result<RunDir, RunError> {
    start_plan(plan, None)
}

/// [`start`] for a run that reproduces a published result, which its result will name.
pub fn start_reproduction(plan: &Plan, reproduces: Reproduces) -> Result<RunDir, RunError> {
    start_plan(plan, Some(reproduces))
}

fn start_plan(plan: &Plan, reproduces: Option<Reproduces>) -> Result<RunDir, RunError> {
    ConfigRecord::new(plan.suite.clone(), plan.model.clone(), WeightsRecord::Random { seed: plan.suite.seed })
        .map_err(|e| RunError::Config(format!("suite: {e}")))?;
    if let Some(dir) = &plan.weights {
        Checkpoint::open(dir).map_err(|e| RunError::Weights(e.to_string()))?;
    }
    let started_s = unix_now_s();
    let run_id = format!("{}-{:08x}", compact_utc(started_s), random_u32());
    let run = RunDir::new(&plan.results_dir, &plan.device.slug(), &run_id);
    let record = RunPlan {
        run_id,
        started_at: rfc3339_utc(started_s),
        started_s,
        suite: plan.suite.clone(),
        model: plan.model.clone(),
        device: plan.device.record.device,
        weights: plan.weights.as_ref().map(|w| w.display().to_string()),
        binary_sha256: crate::harness::binary_sha256(),
        reproduces,
    };
    write_json_atomic(&run.plan_path(), &record)?;
    Ok(run)
}

/// Work on `run` until its sweep is done or `stop` is raised: parity (once per run), warm-up
/// (once per process: the device may have cooled since the last), then every cell the sweep
/// still lacks, each journaled before the next starts.
pub fn work(run: &RunDir, observer: &mut dyn Observer, stop: &AtomicBool) -> Result<WorkEnd, RunError> {
    let runtime = load_gpu_backends();
    // Nothing a run does needs gradients: inference mode skips autograd and version-counter
    // bookkeeping on every operation, as Python's torch.inference_mode() does.
    let _inference = crate::libtorch::InferenceMode::enter();
    let plan = run.read_plan()?;
    let (mut journal, mut done) = Journal::open(&run.journal_path())?;
    let bounds = bounds_for(&plan.suite.bounds, &plan.model);
    if sweep::plan(&plan.suite, &bounds, &done).next.is_none() && run.result_path().exists() {
        return Ok(WorkEnd::Done);
    }
    let host = crate::host_record();
    let device = crate::devices::find(plan.device, &host)?;
    let RunPlan { suite, model, weights, .. } = plan.clone();
    let checkpoint = match &weights {
        Some(dir) if suite.scale.tp > 1 => {
            return Err(RunError::Config(format!(
                "--weights {dir} with scale.tp = {}: reading a tensor-parallel shard of a checkpoint is not supported; \
                 measure a shard with drawn weights",
                suite.scale.tp
            )));
        }
        Some(dir) => Some(Checkpoint::open(Path::new(dir)).map_err(|e| RunError::Weights(e.to_string()))?),
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

    let earlier: Option<RunResult> =
        if run.result_path().exists() { Some(read_json(&run.result_path(), "result")?) } else { None };
    // Cells of two boards in one result would be no one board's figures.
    if let Some(before) = earlier.as_ref().and_then(|r| r.device.uuid.known()) {
        if device.record.uuid.known().is_some_and(|now| now != before) {
            return Err(RunError::Config(format!(
                "{}: the run was measuring the board {before}, and {} is now {}; start a new run",
                run.dir.display(),
                plan.device,
                device.record.uuid.known().map_or("", String::as_str)
            )));
        }
    }
    // Parity once per run: a checkpoint that cannot serve the model is bad input, found before
    // anything is measured.
    let parity = match earlier.as_ref().and_then(|r| r.checks.iter().find(|c| c.name == "parity")) {
        Some(check) => check.clone(),
        None => {
            let parity_weights = match &checkpoint {
                Some(c) => ParityWeights::Checkpoint(c, &layers),
                None => ParityWeights::Random(seed),
            };
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
            }
        }
    };
    let segment = next_segment(&run.samples_path())?;
    let telemetry = RunTelemetry::start(
        &device,
        config.suite.telemetry.rate_hz,
        &run.samples_path(),
        Segment::new(segment, rfc3339_utc(unix_now_s())),
    )?;
    let mut result = match earlier {
        Some(mut result) => {
            // Back to a run in progress: what the last assembly derived is derived again at the
            // end, from the whole journal.
            result.status = RunStatus::Incomplete;
            result.checks.retain(|c| c.name == "parity");
            result.derived = None;
            result.telemetry = telemetry.record.clone();
            result.harness = crate::harness::describe(runtime);
            result
        }
        None => RunResult {
            schema: RESULT_SCHEMA.to_owned(),
            run_id: plan.run_id.clone(),
            status: RunStatus::Incomplete,
            started_at: plan.started_at.clone(),
            updated_at: plan.started_at.clone(),
            harness: crate::harness::describe(runtime),
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
        },
    };
    result.cells = done.clone();
    let path = run.result_path();
    let save = |result: &mut RunResult| {
        result.updated_at = rfc3339_utc(unix_now_s());
        write_json_atomic(&path, result)
    };
    save(&mut result)?;
    observer.started(&path, &result);
    for check in &result.checks {
        observer.checked(check);
    }

    let suite = result.config.suite.clone();
    let probes = ProbePlan {
        precision: Some(suite.precision),
        sustained_s: Some(suite.roofline.sustained_s).filter(|&s| s > 0.0),
    };
    if suite.roofline.probe && result.roofline.is_none() {
        let record = lynx_probes::roofline::burst(&device.probe_target(), &probes);
        observer.probed(&record);
        result.roofline = Some(record);
        save(&mut result)?;
    }
    let model = build(&shape, &layers, &format!("building {} on {}", suite.model, device.record.device))?;
    let warmup_start_s = telemetry.now_s();
    let Some(mut warmup) = warm_up(&model, &suite, observer, &telemetry, stop)? else {
        telemetry.finish()?;
        return Ok(WorkEnd::Stopped);
    };
    warmup.telemetry = telemetry.summaries(warmup_start_s, telemetry.now_s());
    warmup.segment = Some(segment);
    observer.warmed(&warmup);
    match result.warmup {
        None => result.warmup = Some(warmup),
        Some(_) => result.resumed_warmups.push(warmup),
    }
    save(&mut result)?;
    // The sustained matmul rate, once per run, with the device at equilibrium.
    if let Some(record) = result.roofline.as_mut().filter(|r| r.probes.iter().all(|p| p.phase != "sustained")) {
        lynx_probes::roofline::sustained(&device.probe_target(), &probes, record);
        observer.probed(record);
        save(&mut result)?;
    }

    // A layer subset is extrapolated to full depth from the same cell run with no layers.
    let head_only = match suite.scale.layers {
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

    let most_cells = suite.prefill.ladder().batches().len() * suite.prefill.prompt_lens.len()
        + suite.decode.ladder().batches().len() * suite.decode.ctxs.len();
    let mut end = WorkEnd::Done;
    while let Some(shape) = sweep::plan(&suite, &bounds, &done).next {
        if stop.load(Ordering::SeqCst) {
            end = WorkEnd::Stopped;
            break;
        }
        write_json_atomic(&run.current_path(), &shape)?;
        observer.cell_started(&shape, done.len() + 1, most_cells);
        let Some(mut cell) = measure_cell(&model, head_only.as_ref(), shape, &suite.measure, &telemetry, stop) else {
            end = WorkEnd::Stopped;
            break;
        };
        cell.segment = Some(segment);
        journal.append(&cell)?;
        observer.cell_done(&cell);
        done.push(cell);
        result.cells = done.clone();
        save(&mut result)?;
        remove(&run.current_path())?;
    }
    remove(&run.current_path())?;
    telemetry.finish()?;
    Ok(end)
}

/// The number of the next segment of the samples file at `path`: one more than the segments it
/// holds (a process killed before its sampler started adds none).
fn next_segment(path: &Path) -> Result<u32, RunError> {
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(1),
        Err(source) => return Err(RunError::Io { path: path.to_path_buf(), source }),
    };
    let segments = text.split(|&b| b == b'\n').filter(|line| line.starts_with(br#"{"kind":"segment""#)).count();
    Ok(segments as u32 + 1)
}

/// Remove `path` if it is there.
fn remove(path: &Path) -> Result<(), RunError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(RunError::Io { path: path.to_path_buf(), source: e }),
        _ => Ok(()),
    }
}

/// A worker died (`how`) while working on `run`: the cell it was measuring, if any, is journaled
/// as failed with that reason, so the sweep moves past it. A worker killed by SIGKILL in a cell
/// is taken as out of memory (the kernel's OOM killer sends SIGKILL), which ends its ladder.
pub fn record_worker_death(run: &RunDir, how: &str, sigkill: bool) -> Result<Option<CellShape>, RunError> {
    let Some(shape) = run.current_cell()? else { return Ok(None) };
    let (mut journal, cells) = Journal::open(&run.journal_path())?;
    if cells.iter().any(|c| c.shape == shape) {
        // It died after journaling the cell, before clearing the marker: between cells.
        remove(&run.current_path())?;
        return Ok(None);
    }
    let message = format!("the worker process died during this cell: {how}");
    let mut cell = CellRecord::failed(shape, message.clone());
    if sigkill {
        cell.status = CellStatus::Oom {
            message: format!("{message} (the kernel's out-of-memory killer sends SIGKILL when host memory runs out)"),
        };
    }
    journal.append(&cell)?;
    remove(&run.current_path())?;
    Ok(Some(shape))
}

/// Assemble the run's result from its journal: every journaled cell, the checks, the derived
/// figures at `price`, and the status (complete when the sweep has no cell left, else partial).
pub fn assemble(run: &RunDir, price: PriceInputs) -> Result<Outcome, RunError> {
    let path = run.result_path();
    if !path.exists() {
        return Err(RunError::Incomplete(format!(
            "the run in {} stopped before its first result was written (parity or set-up); nothing was measured",
            run.dir.display()
        )));
    }
    let mut result: RunResult = read_json(&path, "result")?;
    let (_, cells) = Journal::open(&run.journal_path())?;
    let bounds = bounds_for(&result.config.suite.bounds, &result.config.model);
    let plan = sweep::plan(&result.config.suite, &bounds, &cells);
    result.status = if plan.next.is_none() { RunStatus::Complete } else { RunStatus::Partial };
    result.cells = cells;
    result.checks.retain(|c| c.name == "parity");
    let warmups: Vec<&WarmupRecord> = result.warmup.iter().chain(&result.resumed_warmups).collect();
    let device_source = result.telemetry.sources.iter().find(|s| s.name == result.telemetry.device_source);
    let checks = measurement_checks(&warmups, &result.cells, device_source);
    result.checks.extend(checks);
    if let Some(ceilings) = &result.roofline {
        for cell in &mut result.cells {
            // A layer subset's figures are full-depth estimates: its work is the full depth's.
            let mut shape = result.config.device_shape().clone();
            if cell.full_depth.is_some() {
                shape.num_layers = result.config.model.num_layers;
                if let (Some(moe), Some(full)) = (&mut shape.moe, &result.config.model.moe) {
                    moe.first_dense_layers = full.first_dense_layers;
                }
            }
            cell.roofline = cell_roofline(&shape, result.config.suite.precision, cell, ceilings);
        }
        result.checks.extend(roofline_check(&result.cells, ceilings));
    }
    result.derived = Some(derive(&result.config, &result.cells, price, plan.lines));
    result.updated_at = rfc3339_utc(unix_now_s());
    write_json_atomic(&path, &result)?;
    Ok(Outcome { result, path })
}

/// A model that could not be built: bad input when the checkpoint cannot serve it.
fn model_error(context: &str, error: ModelError) -> RunError {
    match error {
        ModelError::Weights(message) => RunError::Weights(format!("weights: {message}")),
        source => RunError::Model { context: context.to_owned(), source },
    }
}

/// The warm-up decode state at `batch` and `ctx`, with its first step run.
fn warmup_state(model: &Model, batch: u32, ctx: u32) -> Result<(KvCache, tch::Tensor), ModelError> {
    let mut cache = KvCache::new(model, i64::from(batch), i64::from(ctx) + WARMUP_CACHE_ROOM)?;
    cache.fill_random(i64::from(ctx))?;
    let tokens = model.random_tokens(i64::from(batch), 1)?;
    let tokens = decode_step(model, &tokens, &mut cache)?;
    Ok((cache, tokens))
}

/// Loop the decode step at the suite's largest decode batch (at most [`WARMUP_MAX_BATCH`]) and
/// context, the heaviest decode step, until the detector, fed the step times and the device's
/// telemetry, sees equilibrium or gives up. A batch that does not fit is halved until one does.
/// `None` when `stop` was raised.
fn warm_up(
    model: &Model,
    suite: &Suite,
    observer: &mut dyn Observer,
    telemetry: &RunTelemetry,
    stop: &AtomicBool,
) -> Result<Option<WarmupRecord>, RunError> {
    let mut batch = suite.decode.ladder().batches().into_iter().max().unwrap_or(1).min(WARMUP_MAX_BATCH);
    let ctx = suite.decode.ctxs.iter().copied().max().unwrap_or(1);
    let model_error = |source| RunError::Model { context: "warm-up".to_owned(), source };
    let (mut cache, mut tokens) = loop {
        match warmup_state(model, batch, ctx) {
            Ok(state) => break state,
            Err(error)
                if batch > 1 && matches!(CellStatus::from_failure(error.to_string()), CellStatus::Oom { .. }) =>
            {
                batch /= 2;
            }
            Err(error) => return Err(model_error(error)),
        }
    };
    let config = &suite.warmup;
    let start_s = telemetry.now_s();
    let mut detector = Detector::new(config.clone(), start_s);
    let mut samples_seen = 0;
    let mut latest: Option<Sample> = None;
    let mut steps = 0u64;
    let mut next_check_s = 0.0;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
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
        return Ok(Some(WarmupRecord {
            duration_s: Finite::new(elapsed_s, "warm-up duration").map_err(StatsError::from)?,
            steps,
            batch,
            ctx,
            equilibrium_reached: reached,
            criteria: config.clone(),
            last_window: window,
            telemetry: Vec::new(),
            segment: None,
        }));
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

/// Why a cell has no record.
enum CellFailure {
    /// A step failed: the cell is recorded as failed with this message.
    Failed(String),
    /// The stop flag was raised: the cell is left to be measured again.
    Stopped,
}

impl From<String> for CellFailure {
    fn from(message: String) -> Self {
        CellFailure::Failed(message)
    }
}

/// A libtorch error message without the C++ backtrace libtorch appends to it.
fn without_backtrace(message: &str) -> String {
    let end = message.find("\nException raised from").or_else(|| message.find("\nframe #")).unwrap_or(message.len());
    message[..end].trim_end().to_owned()
}

/// Measure one cell; a failure of any step fails the cell with its message (out of memory or an
/// error). The cell's telemetry covers its own timed steps (not the head-only model's). `None`
/// when `stop` was raised before the cell finished.
fn measure_cell(
    model: &Model,
    head_only: Option<&HeadOnly>,
    shape: CellShape,
    limits: &MeasureConfig,
    telemetry: &RunTelemetry,
    stop: &AtomicBool,
) -> Option<CellRecord> {
    let clock = || telemetry.now_s();
    let run = |model: &Model| -> Result<(StepTimeSummary, Measured), CellFailure> {
        let measured = match shape {
            CellShape::Prefill { batch, prompt_len } => measure_prefill(model, batch, prompt_len, limits, &clock, stop),
            CellShape::Decode { batch, ctx } => measure_decode(model, batch, ctx, limits, &clock, stop),
        }
        .map_err(|e| without_backtrace(&e.to_string()))?
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
                Some(lynx_analysis::cell::extrapolate(&summary, head_summary, head.measured_layers, head.model_layers)?)
            }
            None => None,
        };
        let steps = summary.n as u64;
        let measured_s = Finite::new(measured.measured_s, "measured time").map_err(|e| e.to_string())?;
        let mut cell = lynx_analysis::cell::measured(shape, summary, measured_s, measured.ctx_end, full_depth)
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
    match summarised {
        Ok(cell) => Some(cell),
        Err(CellFailure::Failed(message)) => Some(CellRecord::failed(shape, message)),
        Err(CellFailure::Stopped) => None,
    }
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
    stop: &AtomicBool,
) -> Result<Option<Measured>, ModelError> {
    let prompts = model.random_tokens(i64::from(batch), i64::from(prompt_len))?;
    let mut cache = KvCache::new(model, i64::from(batch), i64::from(prompt_len))?;
    let mut step = || to_host(&model.prefill(&prompts, &mut cache)?);
    step()?;
    timed_steps(limits, clock, stop, step)
}

fn measure_decode(
    model: &Model,
    batch: u32,
    ctx: u32,
    limits: &MeasureConfig,
    clock: &dyn Fn() -> f64,
    stop: &AtomicBool,
) -> Result<Option<Measured>, ModelError> {
    let ctx = i64::from(ctx);
    let mut cache = KvCache::new(model, i64::from(batch), ctx + i64::from(limits.max_steps))?;
    cache.fill_random(ctx)?;
    let mut tokens = model.random_tokens(i64::from(batch), 1)?;
    tokens = decode_step(model, &tokens, &mut cache)?;
    cache.truncate(ctx);
    let measured = timed_steps(limits, clock, stop, || {
        tokens = decode_step(model, &tokens, &mut cache)?;
        Ok(())
    })?;
    Ok(measured.map(|m| Measured { ctx_end: Some(u32::try_from(cache.len() - 1).unwrap_or(u32::MAX)), ..m }))
}

/// Run `step` at least `min_steps` times and `min_s` seconds, at most `max_steps` times; `None`
/// when `stop` is raised first (checked between steps, so a step in flight finishes).
fn timed_steps(
    limits: &MeasureConfig,
    clock: &dyn Fn() -> f64,
    stop: &AtomicBool,
    mut step: impl FnMut() -> Result<(), ModelError>,
) -> Result<Option<Measured>, ModelError> {
    let mut step_s = Vec::new();
    let window_start = clock();
    let start = Instant::now();
    while step_s.len() < limits.max_steps as usize
        && (step_s.len() < limits.min_steps as usize || start.elapsed().as_secs_f64() < limits.min_s)
    {
        if stop.load(Ordering::SeqCst) {
            return Ok(None);
        }
        let step_start = Instant::now();
        step()?;
        step_s.push(step_start.elapsed().as_secs_f64());
    }
    let measured_s = start.elapsed().as_secs_f64();
    Ok(Some(Measured { step_s, measured_s, ctx_end: None, window_s: (window_start, clock()) }))
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
