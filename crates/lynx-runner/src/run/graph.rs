//! Decode steps as CUDA graphs (HIP graphs on ROCm): whether this process can capture them, the
//! graph-safe step captured once per cell and replayed, and the check that a replay computes what
//! the eager step does.
//!
//! A graph step reads its tokens and its cache position from device tensors and writes its
//! greedy tokens back over the tokens it read and the next position over the position, so that
//! every replay is the next step with no host work but the one launch.

use crate::cuda::CudaGraph;
use lynx_models::{KvCache, Logits, Model, ModelError};
use lynx_schema::config::Precision;
use lynx_schema::result::{AttentionKernel, Check, CheckName};
use lynx_schema::value::{Finite, Reported};
use tch::{Kind, Tensor};

/// A test hook: on a CPU, `LYNX_TEST_GRAPHS=reissue` makes graph mode available through a
/// stand-in that keeps the step at capture and issues it again at each replay (no graph exists),
/// so that the graph path (capture, the in-place position and tokens, the replay limit, the
/// parity check, graph lines and the reports) is tested on hosts without a GPU. A result made so
/// says it in its harness and its graph parity check.
pub const SIMULATE_GRAPHS_VAR: &str = "LYNX_TEST_GRAPHS";

/// What the hook's stand-in is called in a result.
const REISSUE: &str = "simulated by LYNX_TEST_GRAPHS=reissue: each replay issues the step again; no graph was captured";

/// How this process captures decode steps, or why it cannot.
#[derive(Debug, Clone)]
pub(crate) enum Graphs {
    /// libtorch's CUDAGraph on GPU `index`, through the CUDA shim.
    Cuda(usize),
    /// The test hook's stand-in ([`SIMULATE_GRAPHS_VAR`]).
    Reissue,
    Unavailable(String),
}

impl Graphs {
    /// Graphs on `device`: a GPU whose libtorch backend and the shim loaded.
    pub(crate) fn for_device(device: tch::Device) -> Graphs {
        match device {
            tch::Device::Cuda(index) => match crate::cuda::shim() {
                Ok(_) => Graphs::Cuda(index),
                Err(reason) => Graphs::Unavailable(reason),
            },
            _ if std::env::var(SIMULATE_GRAPHS_VAR).is_ok_and(|v| v == "reissue") => Graphs::Reissue,
            tch::Device::Cpu => Graphs::Unavailable(
                "graphs are captured on CUDA and ROCm devices only, and this run is on the CPU".to_owned(),
            ),
            other => Graphs::Unavailable(format!(
                "graphs are captured on CUDA and ROCm devices only, and this run is on {other:?}"
            )),
        }
    }

    /// The harness's record: available (with the stand-in named), or why not.
    pub(crate) fn record(&self) -> Reported<bool> {
        match self {
            Graphs::Cuda(_) => Reported::Known(true),
            Graphs::Reissue => Reported::unavailable(REISSUE),
            Graphs::Unavailable(reason) => Reported::unavailable(reason.clone()),
        }
    }

    pub(crate) fn available(&self) -> bool {
        !matches!(self, Graphs::Unavailable(_))
    }

    /// Capture the work `step` issues, to be run by [`Captured::replay`]. On a GPU the capture
    /// records the work without running it, with cuDNN's attention among SDPA's choices
    /// ([`Graphs::as_captured`]).
    pub(crate) fn capture<'a>(
        &self,
        step: impl FnMut() -> Result<(), ModelError> + 'a,
    ) -> Result<Captured<'a>, String> {
        match self {
            Graphs::Cuda(index) => {
                self.as_captured(|| CudaGraph::capture(*index, step)).map(|(graph, ())| Captured::Cuda(graph))
            }
            Graphs::Reissue => Ok(Captured::Reissue(Box::new(step))),
            Graphs::Unavailable(reason) => Err(reason.clone()),
        }
    }

    /// `work` as a capture issues it: on a GPU, with cuDNN's attention among SDPA's choices,
    /// which eager steps exclude (libtorch::CudnnAttentionForCapture: a graph's one shape pays
    /// cuDNN's plan once, and its masked call over a padded cache has no flash kernel). For the
    /// eager run before a capture and for the kernel a graph step will attend with. The stand-in
    /// issues its step again at each replay, eagerly, so it changes nothing there.
    pub(crate) fn as_captured<T>(&self, work: impl FnOnce() -> T) -> T {
        let _cudnn = matches!(self, Graphs::Cuda(_)).then(crate::libtorch::CudnnAttentionForCapture::allow);
        work()
    }

    /// The attention kernel the graph step over `cache` records: SDPA's choice as a capture
    /// makes it.
    pub(crate) fn attention_kernel(
        &self,
        model: &Model,
        cache: &KvCache,
    ) -> Result<Option<AttentionKernel>, ModelError> {
        self.as_captured(|| model.device_attention_kernel(cache))
    }
}

/// A captured step. libtorch keys cuBLAS workspaces by stream, every capture runs on the
/// device's one capture stream (the CUDA shim's), and destroying one graph can release a
/// workspace that another live graph captured on that stream still uses
/// (pytorch/pytorch#193402): a graph is destroyed only when no live graph is replayed again.
/// Each cell (and the parity check) drops its graph before the next is captured; the serving
/// loop keeps its ladder of graphs alive together and drops them all when its load ends.
pub(crate) enum Captured<'a> {
    Cuda(CudaGraph),
    Reissue(Box<dyn FnMut() -> Result<(), ModelError> + 'a>),
}

impl Captured<'_> {
    /// Launch the step once (it runs asynchronously on a GPU).
    pub(crate) fn replay(&mut self) -> Result<(), String> {
        match self {
            Captured::Cuda(graph) => graph.replay(),
            Captured::Reissue(step) => step().map_err(|e| e.to_string()),
        }
    }
}

/// The device tensors a graph step reads and writes in place.
pub(crate) struct StepBuffers {
    /// `[batch, 1]` int64: the step's input tokens, then its greedy output, fed to the next step.
    pub tokens: Tensor,
    /// `[1]` int64: the cache position the step writes and attends up to; advanced by each step.
    pub position: Tensor,
    /// `[batch, 1, vocab]`: the step's logits, where a check needs them (copying them costs a
    /// step at large batch a visible share of its time, so measured cells keep none).
    pub logits: Option<Tensor>,
}

impl StepBuffers {
    /// Buffers for steps from position `position`, starting from `tokens`.
    pub(crate) fn new(tokens: &Tensor, position: i64, logits: Option<Tensor>) -> Result<StepBuffers, ModelError> {
        let at = lynx_models::scalar_call(|| Tensor::f_full([1], position, (Kind::Int64, tokens.device())))?;
        Ok(StepBuffers { tokens: tokens.f_detach_copy()?, position: at, logits })
    }

    /// Back to position `position` (the tokens stay).
    pub(crate) fn rewind(&self, position: i64) -> Result<(), ModelError> {
        let _ = lynx_models::scalar_call(|| self.position.shallow_clone().f_fill_(position))?;
        Ok(())
    }

    /// One graph-safe decode step over `cache`: the model's step at the position, its greedy
    /// tokens written over the tokens it read, the position advanced (and the logits kept where
    /// asked). Nothing here waits for the device.
    pub(crate) fn step(&self, model: &Model, cache: &KvCache) -> Result<(), ModelError> {
        let logits = model.decode_on_device(&self.tokens, cache, &self.position)?;
        self.tokens.shallow_clone().f_copy_(&logits.f_argmax(-1, false)?)?;
        let _ = lynx_models::scalar_call(|| self.position.shallow_clone().f_add_scalar_(1))?;
        if let Some(kept) = &self.logits {
            kept.shallow_clone().f_copy_(&logits)?;
        }
        Ok(())
    }
}

/// Sequences and cached tokens of the graph parity check.
const PARITY_BATCH: i64 = 2;
const PARITY_CTX: i64 = 16;
/// The cached tokens of each row of the check's second part: rows at their own positions.
const PARITY_ROWS: [i64; 2] = [PARITY_CTX, PARITY_CTX / 2 + 1];

/// The graph parity check: on `model` (the measured one), a captured step replayed twice gives
/// the eager step's logits for the same cache and tokens, each replay advancing the position and
/// feeding its own tokens back; and a captured step of rows at their own positions over a pool
/// of more keys than any row holds (the serving loop's graph step) gives each row the logits of
/// its eager step alone.
///
/// Each replay is held to two bounds. Against the eager step, [`eager_tolerance`]: neither side
/// is exact, since the eager step attends the keys it holds and the graph step a padded cache
/// under a mask, and SDPA may choose a different kernel for each (on an H200, flash for the one
/// and cuDNN for the other, whose fp8 logits on Llama 3.1 8B differed by up to 3.30e-1). Against
/// the same graph-safe step run uncaptured, on the same inputs with the same kernels,
/// [`capture_tolerance`]: this isolates what a capture can break. A replay that reads a stale
/// position, token or cache row gives other logits altogether (a relative error of order one)
/// and fails both.
pub(crate) fn graph_parity(model: &Model, graphs: &Graphs, precision: Precision) -> Check {
    let (limit, capture_limit) = (eager_tolerance(precision), capture_tolerance(precision));
    let outcome = replayed_errors(model, graphs)
        .map_err(|e| format!("the graph step could not be captured or replayed: {e}"))
        .and_then(|steps| {
            let rows = row_errors(model, graphs).map_err(|e| {
                format!("the graph step of rows at their own positions could not be captured or replayed: {e}")
            })?;
            Ok((steps, rows))
        });
    let (passed, detail, measured) = match outcome {
        Ok((steps, rows)) => {
            let Verdict { passed, worst, capture } = verdict(&steps, &rows, precision);
            let how = if matches!(graphs, Graphs::Reissue) { format!("; {REISSUE}") } else { String::new() };
            let [first, second] = PARITY_ROWS;
            let detail = format!(
                "a replayed graph step's logits against the eager step's, two steps at batch {PARITY_BATCH} after \
                 {PARITY_CTX} cached tokens (worst {:.2e}), and one step of rows after {first} and {second} cached \
                 tokens against each row's eager step alone (worst {:.2e}): worst relative error {worst:.2e} at \
                 {precision} (limit {limit:e}: {}); against the same graph-safe steps run uncaptured, the same \
                 kernels on the same inputs, worst {capture:.2e} (limit {capture_limit:e}: what a capture alone \
                 changes){how}",
                most(&steps.eager),
                most(&rows.eager),
                kernels(model, graphs),
            );
            (passed, detail, Finite::new(worst, "graph parity error").ok())
        }
        Err(error) => (false, error, None),
    };
    Check { name: CheckName::GraphParity, passed, detail, measured, limit: Finite::new(limit, "parity limit").ok() }
}

/// The check's figures: the worst error against the eager step and against the uncaptured one,
/// and whether each is finite and within its bound.
struct Verdict {
    passed: bool,
    worst: f64,
    capture: f64,
}

fn verdict(steps: &Errors, rows: &Errors, precision: Precision) -> Verdict {
    let worst = most(&steps.eager).max(most(&rows.eager));
    let capture = most(&steps.uncaptured).max(most(&rows.uncaptured));
    let every = [&steps.eager, &rows.eager, &steps.uncaptured, &rows.uncaptured];
    let finite = every.iter().all(|errors| errors.iter().all(|e| e.is_finite()));
    let passed = finite && worst <= eager_tolerance(precision) && capture <= capture_tolerance(precision);
    Verdict { passed, worst, capture }
}

/// The largest of `errors` (NaN is not larger: [`verdict`] fails it as not finite).
fn most(errors: &[f64]) -> f64 {
    errors.iter().copied().fold(0.0, f64::max)
}

/// The bound a replayed step's logits are held to against the same graph-safe step run
/// uncaptured (the same kernels on the same inputs): what graph parity once allowed against the
/// eager step, twice what the parity check once allowed each side against float64. A correct
/// capture computes what the uncaptured step does, so its figure is expected near zero wherever
/// the kernels are deterministic; it is kept at these bounds until a GPU run has measured it.
pub(crate) fn capture_tolerance(precision: Precision) -> f64 {
    match precision {
        Precision::Fp32 => 2e-4,
        Precision::Bf16 => 1e-1,
        Precision::Fp16 => 2e-2,
        Precision::Fp8 => 4e-1,
    }
}

/// The bound a replayed step's logits are held to against the eager step's: the capture's, or
/// the precision's parity bound where that is looser ([`crate::parity::tolerance`]: fp8's
/// 7.5e-1). Each side is the device's own computation of the model, allowed that far from
/// float64, so their difference is allowed as much. On the H200 the worst rows were 5.22e-2 and
/// 2.86e-2 at bf16 and 3.30e-1 and 2.65e-1 at fp8 (docs/GPU-RUNS.md, runs 3 and 4), eager flash
/// against math or cuDNN in the graph: fp8's within 20% of the capture's bound of 4e-1.
pub(crate) fn eager_tolerance(precision: Precision) -> f64 {
    capture_tolerance(precision).max(crate::parity::tolerance(precision))
}

/// The attention kernels the two sides of the check run, where SDPA chooses them.
fn kernels(model: &Model, graphs: &Graphs) -> String {
    let chosen = || -> Result<(String, String), ModelError> {
        let mut cache = KvCache::new(model, PARITY_BATCH, PARITY_CTX + 2)?;
        let graph = graphs.attention_kernel(model, &cache)?;
        cache.fill_random(PARITY_CTX)?;
        let eager = model.attention_kernel(&cache, 1)?;
        let name = |k: Option<AttentionKernel>| k.map_or("none", |k| k.as_str()).to_owned();
        Ok((name(eager), name(graph)))
    };
    let kernels = match chosen() {
        Ok((eager, graph)) if eager == graph => format!("; both attend with {eager}"),
        Ok((eager, graph)) => {
            format!(", and they attend with different kernels, {eager} eager and {graph} in the graph")
        }
        Err(error) => format!("; their attention kernels unknown: {error}"),
    };
    format!("neither side is exact{kernels}")
}

/// Each sequence's relative logit error of a part's replays: against the eager step, and
/// against the same graph-safe step run uncaptured.
struct Errors {
    eager: Vec<f64>,
    uncaptured: Vec<f64>,
}

/// The errors of two replays against two eager steps, and against the graph-safe step run
/// uncaptured twice over a copy of the same cache with the same tokens.
fn replayed_errors(model: &Model, graphs: &Graphs) -> Result<Errors, String> {
    let torch = |e: tch::TchError| e.to_string();
    let model_error = |e: ModelError| e.to_string();
    let mut eager = KvCache::new(model, PARITY_BATCH, PARITY_CTX + 2).map_err(model_error)?;
    eager.fill_random(PARITY_CTX).map_err(model_error)?;
    let cache = eager.duplicate().map_err(model_error)?;
    let uncaptured_cache = eager.duplicate().map_err(model_error)?;
    let first = model.random_tokens(PARITY_BATCH, 1).map_err(model_error)?;
    let expected_first = model.forward(&first, &mut eager, Logits::Last).map_err(model_error)?;
    let logits = || expected_first.f_zeros_like().map_err(torch);
    let buffers = StepBuffers::new(&first, PARITY_CTX, Some(logits()?)).map_err(model_error)?;
    let uncaptured = StepBuffers::new(&first, PARITY_CTX, Some(logits()?)).map_err(model_error)?;
    let kept =
        |buffers: &StepBuffers| buffers.logits.as_ref().map(Tensor::shallow_clone).ok_or("the step keeps its logits");
    let (replayed, alike) = (kept(&buffers)?, kept(&uncaptured)?);
    // One eager run of the graph step first, as capture wants (libraries initialise lazily);
    // it writes the same keys and values the first replay does.
    graphs.as_captured(|| buffers.step(model, &cache)).map_err(model_error)?;
    buffers.tokens.shallow_clone().f_copy_(&first).map_err(torch)?;
    buffers.rewind(PARITY_CTX).map_err(model_error)?;
    let mut captured = graphs.capture(|| buffers.step(model, &cache))?;
    captured.replay()?;
    graphs.as_captured(|| uncaptured.step(model, &uncaptured_cache)).map_err(model_error)?;
    let mut errors = Errors {
        eager: crate::parity::relative_errors(&replayed, &expected_first).map_err(torch)?,
        uncaptured: crate::parity::relative_errors(&replayed, &alike).map_err(torch)?,
    };
    // The second step's tokens are those the first replay chose, for the other two steps too.
    let second = buffers.tokens.f_detach_copy().map_err(torch)?;
    let expected_second = model.forward(&second, &mut eager, Logits::Last).map_err(model_error)?;
    uncaptured.tokens.shallow_clone().f_copy_(&second).map_err(torch)?;
    captured.replay()?;
    graphs.as_captured(|| uncaptured.step(model, &uncaptured_cache)).map_err(model_error)?;
    errors.eager.extend(crate::parity::relative_errors(&replayed, &expected_second).map_err(torch)?);
    errors.uncaptured.extend(crate::parity::relative_errors(&replayed, &alike).map_err(torch)?);
    Ok(errors)
}

/// Each row's errors of a replayed step of rows at their own positions, attending the pool's
/// whole capacity with the keys after each row's position masked (the step the serving loop
/// replays): against the row's eager step alone over a cache of its own tokens, and against the
/// same step of rows run uncaptured (the eager run capture wants).
fn row_errors(model: &Model, graphs: &Graphs) -> Result<Errors, String> {
    let torch = |e: tch::TchError| e.to_string();
    let model_error = |e: ModelError| e.to_string();
    let rows = PARITY_ROWS.len() as i64;
    let capacity = PARITY_CTX + 2;
    let mut pool = KvCache::new(model, rows, capacity).map_err(model_error)?;
    pool.fill_random(PARITY_CTX).map_err(model_error)?;
    let tokens = model.random_tokens(rows, 1).map_err(model_error)?;
    let mut expected = Vec::new();
    for (row, &len) in (0..).zip(&PARITY_ROWS) {
        let mut alone = pool.rows(row, 1, len).and_then(|r| r.duplicate()).map_err(model_error)?;
        let token = tokens.f_narrow(0, row, 1).map_err(torch)?;
        expected.push(model.forward(&token, &mut alone, Logits::Last).map_err(model_error)?);
    }
    let positions = Tensor::f_from_slice(&PARITY_ROWS).and_then(|p| p.f_to_device(model.device())).map_err(torch)?;
    let logits =
        expected[0].f_zeros_like().and_then(|l| l.f_expand([rows, 1, -1], false)?.f_contiguous()).map_err(torch)?;
    // Each run writes the same keys and values at the same positions, so the eager run that
    // capture wants and the replay leave the pool alike, and read it alike.
    let step = || -> Result<(), ModelError> {
        let out = model.decode_rows(&tokens, &pool, &positions, capacity)?;
        logits.shallow_clone().f_copy_(&out)?;
        Ok(())
    };
    graphs.as_captured(step).map_err(model_error)?;
    let alike = logits.f_detach_copy().map_err(torch)?;
    let _ = logits.shallow_clone().f_zero_().map_err(torch)?;
    let mut captured = graphs.capture(step)?;
    captured.replay()?;
    let mut errors =
        Errors { eager: Vec::new(), uncaptured: crate::parity::relative_errors(&logits, &alike).map_err(torch)? };
    for (row, expected) in (0..).zip(&expected) {
        errors.eager.extend(
            crate::parity::relative_errors(&logits.f_narrow(0, row, 1).map_err(torch)?, expected).map_err(torch)?,
        );
    }
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parity::{parity_shape, tests::catalogue_parity_shapes};

    /// The check passes through the stand-in on a CPU for every catalogue architecture (dense,
    /// MoE, MLA, sinks and sliding windows): two replays, each advancing the position and feeding
    /// its tokens back, give the eager steps' logits; and a step of rows at their own positions
    /// over a longer pool gives each row its eager step's logits alone (rows sharing one position
    /// instead would fail this: the shorter row would attend keys it never wrote).
    #[test]
    fn replays_give_the_eager_steps_logits() {
        for shape in catalogue_parity_shapes() {
            let model = Model::new(&parity_shape(&shape, 2), Precision::Fp32, tch::Device::Cpu, 3).unwrap();
            let check = graph_parity(&model, &Graphs::Reissue, Precision::Fp32);
            assert!(check.passed, "{}: {check:?}", shape.name);
            assert!(check.measured.unwrap().get() < 1e-5, "{}: {check:?}", shape.name);
            assert!(check.detail.contains("simulated by LYNX_TEST_GRAPHS"), "{}", check.detail);
            // Neither side is exact: the limit is graph parity's own, and the detail names the
            // kernels each side attends with.
            assert_eq!(check.limit.unwrap().get(), eager_tolerance(Precision::Fp32), "{}", shape.name);
            assert!(check.detail.contains("(limit 2e-4: neither side is exact"), "{}", check.detail);
            assert!(check.detail.contains(" attend with "), "{}", check.detail);
            // The stand-in issues the uncaptured step's very work again: nothing differs.
            assert!(
                check.detail.contains(
                    "against the same graph-safe steps run uncaptured, the same kernels on the same inputs, worst \
                     0.00e0 (limit 2e-4: what a capture alone changes)"
                ),
                "{}",
                check.detail
            );
        }
    }

    /// Against the eager step a replay may differ by what two kernels' rounding does (up to the
    /// precision's parity bound); against the same step uncaptured, only by the capture's bound.
    #[test]
    fn a_replay_is_held_to_the_eager_step_by_the_kernels_and_to_the_uncaptured_step_by_the_capture() {
        let errors =
            |eager: f64, uncaptured: f64| Errors { eager: vec![eager, 0.0], uncaptured: vec![0.0, uncaptured] };
        let judged = |eager: f64, uncaptured: f64, precision| {
            let v = verdict(&errors(eager, uncaptured), &errors(0.0, 0.0), precision);
            let rows = verdict(&errors(0.0, 0.0), &errors(eager, uncaptured), precision);
            assert_eq!((v.passed, v.worst, v.capture), (rows.passed, rows.worst, rows.capture));
            v
        };
        // The H200's fp8 rows: flash eager against cuDNN in the graph.
        let h200 = judged(3.30e-1, 0.0, Precision::Fp8);
        assert!(h200.passed && h200.worst == 3.30e-1 && h200.capture == 0.0);
        // Kernels further apart, within fp8's parity bound, pass where the capture changed nothing ...
        assert!(judged(6e-1, 0.0, Precision::Fp8).passed);
        assert!(!judged(8e-1, 0.0, Precision::Fp8).passed);
        // ... and a capture that changed the logits by less fails where it is over its own bound.
        assert!(!judged(4.5e-1, 4.5e-1, Precision::Fp8).passed);
        assert!(!judged(1e-1, 3e-2, Precision::Fp16).passed);
        assert!(!judged(0.0, f64::NAN, Precision::Bf16).passed);
        assert!(!judged(f64::INFINITY, 0.0, Precision::Bf16).passed);
        assert_eq!(
            [Precision::Fp32, Precision::Bf16, Precision::Fp16, Precision::Fp8].map(eager_tolerance),
            [2e-4, 1e-1, 2e-2, 7.5e-1]
        );
        assert_eq!(
            [Precision::Fp32, Precision::Bf16, Precision::Fp16, Precision::Fp8].map(capture_tolerance),
            [2e-4, 1e-1, 2e-2, 4e-1]
        );
    }

    /// A step advances its position on the device; a rewind puts it back.
    #[test]
    fn a_step_advances_the_position_and_a_rewind_puts_it_back() {
        let model = Model::new(&catalogue_parity_shapes()[0], Precision::Fp32, tch::Device::Cpu, 3).unwrap();
        let mut cache = KvCache::new(&model, 1, 8).unwrap();
        cache.fill_random(4).unwrap();
        let tokens = model.random_tokens(1, 1).unwrap();
        let buffers = StepBuffers::new(&tokens, 4, None).unwrap();
        buffers.step(&model, &cache).unwrap();
        assert_eq!(buffers.position.int64_value(&[0]), 5);
        buffers.rewind(4).unwrap();
        assert_eq!(buffers.position.int64_value(&[0]), 4);
    }

    /// Where graphs are unavailable the check fails with the reason (it is not made on such a
    /// run; this is what a capture that fails on a GPU records).
    #[test]
    fn a_step_that_cannot_be_captured_fails_the_check_with_the_reason() {
        let model = Model::new(&catalogue_parity_shapes()[0], Precision::Fp32, tch::Device::Cpu, 3).unwrap();
        let check = graph_parity(&model, &Graphs::Unavailable("no GPU here".into()), Precision::Fp32);
        assert!(!check.passed && check.detail.contains("no GPU here"), "{check:?}");
    }

    #[test]
    fn a_cpu_has_no_graphs_unless_the_hook_asks() {
        if std::env::var(SIMULATE_GRAPHS_VAR).is_err() {
            let graphs = Graphs::for_device(tch::Device::Cpu);
            assert!(!graphs.available());
            assert!(matches!(graphs.record(), Reported::Unavailable { .. }));
        }
    }
}
