//! The wall time a run is expected to take, printed before it starts. The sweep is planned
//! exactly as the run will plan it ([`crate::sweep::plan`]), fed step times predicted from the
//! device's datasheet (peak memory bandwidth and dense matmul rate, each at the share of it
//! that measurements elsewhere reach) and the host's cost of issuing an eager step's kernels;
//! the phases before the cells (building the model, the probes, warm-up) are added. The run
//! prints it once its inputs are accepted (after the parity check, which it does not count),
//! and again from the ceilings its burst probes measured ([`Rates::measured`]) once they have
//! run. It is an estimate, never a figure of the device: nothing it says enters a result.

use crate::memory::{fit_memory, CellMemory};
use crate::roofline::{matmul_dtype, Ceilings};
use lynx_schema::config::{LatencyBound, ModelShape, Precision, Suite};
use lynx_schema::device::slug;
use lynx_schema::result::{CellRecord, CellShape, CellStatus, StepMode};
use lynx_schema::roofline::{Probe, RooflineRecord};
use lynx_schema::serving::{ServedRate, ServingRecord};
use lynx_schema::value::Finite;

/// One device's datasheet: HBM bandwidth and dense bf16 matmul rate (fp8: twice that on every
/// device listed), as ../shared/REFERENCES.md tabulates them (the H100 PCIe, which it does not,
/// from NVIDIA's H100 datasheet: 2.0 TB/s of HBM2e, 1,513 bf16 TFLOPS with sparsity, half that
/// dense; its product brief, PB-11133-001, says more than 2,000 GB/s), and its memory, for
/// planning a run on a device that is not here (`lynx run --plan --plan-as`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Datasheet {
    /// What the device's name holds as whole words (`H200` in `NVIDIA H200`).
    pub name: &'static str,
    /// Its name as its driver gives it (`NVIDIA H200`, `AMD Instinct MI300X`).
    pub full_name: &'static str,
    /// Whether ROCm drives it (an AMD GPU: `rocm:N`), else CUDA (`cuda:N`).
    pub rocm: bool,
    /// Its memory as the datasheet gives it, in GB of 2^30 bytes (`80GB` on an H100's board; the
    /// driver shows a little less, and frees less still beside its context).
    pub memory_gb: u32,
    pub bandwidth_bytes_per_s: f64,
    pub bf16_flops_per_s: f64,
}

/// The devices lynx has datasheet figures for.
pub const DATASHEETS: [Datasheet; 6] = [
    Datasheet {
        name: "H100 80GB HBM3",
        full_name: "NVIDIA H100 80GB HBM3",
        rocm: false,
        memory_gb: 80,
        bandwidth_bytes_per_s: 3.35e12,
        bf16_flops_per_s: 989e12,
    },
    Datasheet {
        name: "H100 PCIe",
        full_name: "NVIDIA H100 PCIe",
        rocm: false,
        memory_gb: 80,
        bandwidth_bytes_per_s: 2.0e12,
        bf16_flops_per_s: 756e12,
    },
    Datasheet {
        name: "H200",
        full_name: "NVIDIA H200",
        rocm: false,
        memory_gb: 141,
        bandwidth_bytes_per_s: 4.8e12,
        bf16_flops_per_s: 989e12,
    },
    Datasheet {
        name: "B200",
        full_name: "NVIDIA B200",
        rocm: false,
        memory_gb: 180,
        bandwidth_bytes_per_s: 8.0e12,
        bf16_flops_per_s: 2250e12,
    },
    Datasheet {
        name: "MI300X",
        full_name: "AMD Instinct MI300X",
        rocm: true,
        memory_gb: 192,
        bandwidth_bytes_per_s: 5.3e12,
        bf16_flops_per_s: 1300e12,
    },
    Datasheet {
        name: "MI355X",
        full_name: "AMD Instinct MI355X",
        rocm: true,
        memory_gb: 288,
        bandwidth_bytes_per_s: 8.0e12,
        bf16_flops_per_s: 2500e12,
    },
];

impl Datasheet {
    /// Its memory in bytes, as the datasheet gives it.
    pub fn memory_bytes(&self) -> u64 {
        u64::from(self.memory_gb) << 30
    }
}

/// The datasheet `name` names, for planning on a device that is not here: the one whose `name`
/// or driver's `full_name` it is, or the slug of either (`nvidia-h200`, as results and prices name
/// devices), case and spacing aside; else the only one whose full name holds its words as whole
/// words (`hbm3`). `Err` with those it could mean where it could mean several (`h100`: an H100
/// 80GB HBM3 or an H100 PCIe), empty where none.
pub fn datasheet_named(name: &str) -> Result<&'static Datasheet, Vec<&'static Datasheet>> {
    let wanted = slug(name);
    if wanted.is_empty() {
        return Err(Vec::new());
    }
    if let Some(sheet) = DATASHEETS.iter().find(|d| slug(d.name) == wanted || slug(d.full_name) == wanted) {
        return Ok(sheet);
    }
    let words = format!("-{wanted}-");
    let meant: Vec<&Datasheet> =
        DATASHEETS.iter().filter(|d| format!("-{}-", slug(d.full_name)).contains(&words)).collect();
    match meant[..] {
        [sheet] => Ok(sheet),
        _ => Err(meant),
    }
}

/// The datasheet of the device named `name` (as its driver names it), if lynx has one: the first
/// whose name stands in the device's as whole words (`NVIDIA H200 NVL` is an H200; `NVIDIA
/// GH200 480GB`, a Grace Hopper of other memory, is not).
pub fn datasheet(name: &str) -> Option<&'static Datasheet> {
    let words = format!(" {} ", name.split_whitespace().collect::<Vec<_>>().join(" "));
    DATASHEETS.iter().find(|d| words.contains(&format!(" {} ", d.name)))
}

/// Shares of the datasheet a step is assumed to reach: the measured copy and bf16 matmul of an
/// H100 and an H200 against their datasheets (REFERENCES.md: 2.90 of 3.35 TB/s, 4.01 of 4.8;
/// 794.5 and 828 of 989 TFLOP/s).
const BANDWIDTH_SHARE: f64 = 0.85;
const MATMUL_SHARE: f64 = 0.8;
/// The host's cost of issuing one kernel of an eager step through libtorch's dispatcher, as
/// measured on the only GPU host lynx has run on (an H200's, 16 Xeon cores at 2.1 GHz): Llama
/// 3.1 8B's bf16 eager decode step at batch 1 issued its about 549 kernels in 9.45 ms and
/// 9.98 ms (docs/GPU-RUNS.md, runs 3 and 4), about 17 µs each. It was 5 µs, a guess, until
/// then, and every eager estimate came out about three times short.
const ISSUE_S_PER_KERNEL: f64 = 17e-6;
/// Kernels a layer's eager step issues (two norms, the merged q/k/v projection, RoPE, two cache
/// writes, attention, the output projection, two residual adds and the merged gate/up MLP:
/// about 17 at bf16), the extra an fp8 layer issues (each of its four linear layers quantises its
/// input in four kernels), and the extra a mixture of experts' routing and experts issue (the
/// Qwen3-30B-A3B subset's eager step at batch 16 issued 4 such layers in 2.57 ms on the H200).
const KERNELS_PER_LAYER: f64 = 17.0;
const KERNELS_PER_FP8_LAYER: f64 = 16.0;
const KERNELS_PER_MOE_LAYER: f64 = 20.0;
/// A replayed graph's launch.
const GRAPH_LAUNCH_S: f64 = 20e-6;
/// The burst roofline probes, before warm-up.
const BURST_PROBES_S: f64 = 15.0;
/// cuBLASLt's matmuls on an NVIDIA GPU (TF32, fp16, bf16), each sustained after warm-up beside
/// libtorch's one at the run's precision.
const NATIVE_MATMULS: f64 = 3.0;
/// Drawing random weights and KV caches on the host.
const HOST_DRAW_BYTES_PER_S: f64 = 1e9;
/// A host CPU lynx has no datasheet for: memory bandwidth and matmul rate assumed.
const CPU_BANDWIDTH_BYTES_PER_S: f64 = 20e9;
const CPU_FLOPS_PER_S: f64 = 100e9;

/// The rates a step time is predicted from, and where they come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    pub bandwidth_bytes_per_s: f64,
    pub flops_per_s: f64,
    /// Host seconds to issue one eager kernel (0 where issuing is running: a CPU).
    pub issue_s_per_kernel: f64,
    /// Whether the device is a GPU (weights and caches are drawn on it).
    pub gpu: bool,
    pub basis: String,
}

impl Rates {
    /// A GPU's rates at `precision` from its datasheet.
    pub fn gpu(sheet: &Datasheet, precision: Precision) -> Rates {
        let flops = match precision {
            Precision::Fp8 => 2.0 * sheet.bf16_flops_per_s,
            Precision::Fp32 => sheet.bf16_flops_per_s / 2.0,
            Precision::Bf16 | Precision::Fp16 => sheet.bf16_flops_per_s,
        };
        Rates {
            bandwidth_bytes_per_s: BANDWIDTH_SHARE * sheet.bandwidth_bytes_per_s,
            flops_per_s: MATMUL_SHARE * flops,
            issue_s_per_kernel: ISSUE_S_PER_KERNEL,
            gpu: true,
            basis: format!(
                "the {} datasheet: {:.2} TB/s at {:.0}%, {:.0} TFLOP/s {precision} at {:.0}%, {:.0} µs to issue an \
                 eager kernel",
                sheet.name,
                sheet.bandwidth_bytes_per_s / 1e12,
                BANDWIDTH_SHARE * 100.0,
                flops / 1e12,
                MATMUL_SHARE * 100.0,
                ISSUE_S_PER_KERNEL * 1e6
            ),
        }
    }

    /// A device's rates from the ceilings its burst probes measured: the best bandwidth probe and
    /// the best matmul probe at `precision`'s element type, each taken whole (a step reaches
    /// less, so the estimate leans short). Why not, where either was not measured.
    pub fn measured(ceilings: &RooflineRecord, precision: Precision, gpu: bool) -> Result<Rates, String> {
        let dtype = matmul_dtype(precision);
        let value = |probe: Option<&Probe>| probe.and_then(|p| p.value.known().map(|v| (v.get(), p.name.clone())));
        let (bandwidth, copy) = value(ceilings.bandwidth()).ok_or("no bandwidth probe measured a ceiling")?;
        let (flops, matmul) =
            value(ceilings.matmul(dtype)).ok_or_else(|| format!("no {dtype} matmul probe measured a ceiling"))?;
        let issue_s_per_kernel = if gpu { ISSUE_S_PER_KERNEL } else { 0.0 };
        let issue =
            if gpu { format!(", {:.0} µs to issue an eager kernel", ISSUE_S_PER_KERNEL * 1e6) } else { String::new() };
        Ok(Rates {
            bandwidth_bytes_per_s: bandwidth,
            flops_per_s: flops,
            issue_s_per_kernel,
            gpu,
            basis: format!(
                "this device's measured ceilings: {:.1} GB/s ({copy}), {:.1} GFLOP/s {dtype} ({matmul}){issue}",
                bandwidth / 1e9,
                flops / 1e9
            ),
        })
    }

    /// A host CPU's assumed rates.
    pub fn cpu() -> Rates {
        Rates {
            bandwidth_bytes_per_s: CPU_BANDWIDTH_BYTES_PER_S,
            flops_per_s: CPU_FLOPS_PER_S,
            issue_s_per_kernel: 0.0,
            gpu: false,
            basis: format!(
                "a host CPU assumed to reach {:.0} GB/s and {:.0} GFLOP/s",
                CPU_BANDWIDTH_BYTES_PER_S / 1e9,
                CPU_FLOPS_PER_S / 1e9
            ),
        }
    }
}

/// What a run is expected to take.
#[derive(Debug, Clone, PartialEq)]
pub struct WallTime {
    /// Everything, with warm-up at its `min_s`.
    pub total_s: f64,
    /// Of `total_s`, what comes before warm-up: the burst probes and drawing the weights (the
    /// parity check not counted). A node's runs all at once each wait there until every one has
    /// prepared, so the node takes the longest preparation and then the longest rest.
    pub prepare_s: f64,
    /// How much longer a warm-up that never reaches equilibrium makes it (`max_s` − `min_s`).
    pub warmup_extra_s: f64,
    /// How much longer the serving phase takes where the bound breaks at every latency-bounded
    /// rate and the loop serves each workload again under it ([`crate::serving::UNDER`]).
    pub under_extra_s: f64,
    /// Cells the planned sweep measures (skipped ones not counted).
    pub cells: usize,
    pub basis: String,
    /// Each cell the sweep is planned to reach over the predicted step times, in the order it
    /// would reach them, skipped ones included.
    pub planned: Vec<PlannedCell>,
    /// What the serving phase is planned to serve over the predicted step times.
    pub serving: Vec<PlannedServing>,
}

/// A cell of the planned sweep: its predicted step, and its memory beyond the weights, or why
/// it would be skipped.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    pub shape: CellShape,
    pub step_s: f64,
    pub memory: CellMemory,
    /// Why it would not fit (then it is never run), or `None`.
    pub skipped: Option<String>,
}

/// One workload served under one bound, as planned over the predicted step times.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedServing {
    pub workload: String,
    pub bound: String,
    /// (label, requests per second) of each rate left to serve, or why nothing would be served.
    pub rates: Result<Vec<(String, f64)>, String>,
    /// The labels of the rates a stop kept, in the order they were served (the step down's among
    /// them), which a resume does not serve again (empty where the workload is served afresh).
    pub kept: Vec<String>,
    /// Requests served at each rate.
    pub requests: usize,
    /// Seconds expected, the rates together (0 where none is served).
    pub expected_s: f64,
}

impl std::fmt::Display for WallTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let minutes = |s: f64| (s / 60.0).ceil();
        let under = if self.under_extra_s > 0.0 {
            format!(
                ", {} if the serving loop also serves under a latency-bounded rate where the bound broke",
                minutes(self.total_s + self.warmup_extra_s + self.under_extra_s)
            )
        } else {
            String::new()
        };
        write!(
            f,
            "estimated wall time about {} min ({} if warm-up runs to its max_s{under}), {} cells; from {}; an \
             estimate, not a measurement",
            minutes(self.total_s),
            minutes(self.total_s + self.warmup_extra_s),
            self.cells,
            self.basis
        )
    }
}

/// What a run's estimate needs.
pub struct Planned<'a> {
    pub suite: &'a Suite,
    /// The shape the device runs (a layer subset's or a shard's).
    pub shape: &'a ModelShape,
    /// The model's own layer count, for a layer subset's full-depth step.
    pub model_layers: u32,
    pub bounds: &'a [LatencyBound],
    /// The decode modes the run is expected to measure.
    pub modes: &'a [StepMode],
    /// The device's free memory, where known: cells that would not fit are skipped.
    pub free_bytes: Option<u64>,
    /// Cells a resumed run already has.
    pub done: &'a [CellRecord],
    /// Whether the burst roofline probes have run (the sustained ones run after warm-up).
    pub burst_probed: bool,
    /// Whether cuBLASLt's matmuls are measured beside libtorch's (an NVIDIA GPU): after warm-up
    /// each of its three element types is sustained for the suite's `sustained_s` as well.
    pub native_matmuls: bool,
    /// What a resumed run's serving phase has recorded: a workload served (or given up) is not
    /// planned again, and one a stop cut short only for the planned rates after those it kept.
    pub served: Option<&'a ServingRecord>,
}

/// The wall time of `run` at `rates`.
pub fn wall_time(run: &Planned, rates: &Rates) -> WallTime {
    let suite = run.suite;
    let precision = suite.precision;
    let draw = |bytes: f64| bytes / if rates.gpu { rates.bandwidth_bytes_per_s / 4.0 } else { HOST_DRAW_BYTES_PER_S };
    // The burst probes run before warm-up, the sustained ones after it.
    let probed = run.done.is_empty() && suite.roofline.probe;
    let burst_s = if probed && !run.burst_probed { BURST_PROBES_S } else { 0.0 };
    let sustained = 1.0 + if run.native_matmuls { NATIVE_MATMULS } else { 0.0 };
    let sustained_s = if probed { sustained * suite.roofline.sustained_s } else { 0.0 };
    let prepare_s = burst_s + draw(run.shape.weight_bytes(precision) as f64);
    let mut total_s = prepare_s + suite.warmup.min_s + sustained_s;
    let head = run.suite.scale.layers.map(|_| crate::cell::head_only_shape(run.shape));
    let mut cells = run.done.to_vec();
    let mut measured = 0;
    let mut planned = Vec::new();
    while let Some(cell) = crate::sweep::plan(suite, run.bounds, &cells, run.modes).next {
        let step = step_s(run.shape, precision, cell, rates);
        let memory = fit_memory(run.shape, precision, cell, &suite.measure);
        if let Some(refusal) = run.free_bytes.and_then(|free| memory.refusal(free)) {
            let mut skipped = CellRecord::failed(cell, String::new());
            skipped.status =
                CellStatus::Skipped { message: refusal.clone(), needed_bytes: memory.total_bytes(), free_bytes: 0 };
            cells.push(skipped);
            planned.push(PlannedCell { shape: cell, step_s: step, memory, skipped: Some(refusal) });
            continue;
        }
        planned.push(PlannedCell { shape: cell, step_s: step, memory, skipped: None });
        let head_step = head.as_ref().map(|h| step_s(h, precision, cell, rates));
        total_s += cell_s(suite, cell, step) + head_step.map_or(0.0, |s| cell_s(suite, cell, s));
        total_s += draw(memory.kv_cache_bytes as f64) * if head.is_some() { 2.0 } else { 1.0 };
        // The sweep judges a layer subset by its full-depth step.
        let judged = match (head_step, suite.scale.layers) {
            (Some(h), Some(layers)) if layers > 0 => crate::cell::full_depth_s(h, step, layers, run.model_layers),
            _ => step,
        };
        cells.push(planned_cell(cell, judged));
        measured += 1;
    }
    // The warm-up's step timed again after the sweep, as long as a cell.
    let (batch, ctx) = crate::equilibrium::warmup_shape(suite, |cell| {
        crate::memory::fits(run.shape, precision, cell, &suite.measure, run.free_bytes)
    });
    let again = CellShape::Decode { batch, ctx, mode: StepMode::Eager };
    let again_s = cell_s(suite, again, step_s(run.shape, precision, again, rates));
    total_s += again_s;
    // The serving phase: each rate's simulated window over the planned step times.
    let mut under_extra_s = 0.0;
    let mut serving = Vec::new();
    if let Some(serve) = &suite.serve {
        // The loop replays graph steps where the run measures them (and their check passes).
        let mode = if run.modes.contains(&StepMode::Graph) { StepMode::Graph } else { StepMode::Eager };
        // Medians suffice for a wall time: no warm-up has measured how steps persist.
        let (prefill, decode) = crate::derived::mode_tables(&cells, mode, None);
        // The phase's budget, cut to what serve.run_s leaves after everything before it.
        let budget_s = serve.budget_s(total_s);
        for mut plan in crate::serving::plan(suite, run.bounds, (&prefill, &decode), (serve, budget_s), mode, None) {
            // As the run: a layer subset is not served.
            if let Some(layers) = suite.scale.layers {
                serving.push(PlannedServing {
                    workload: plan.workload.name.clone(),
                    bound: plan.bound.name.clone(),
                    rates: Err(format!(
                        "the run measures {layers} of the model's layers: a serving loop serves whole models only"
                    )),
                    kept: Vec::new(),
                    requests: 0,
                    expected_s: 0.0,
                });
                continue;
            }
            let recorded =
                run.served.and_then(|r| r.served.iter().find(|s| s.is_for(&plan.workload.name, &plan.bound.name)));
            if recorded.is_some_and(|s| !s.stopped) {
                continue;
            }
            // A workload a stop cut short serves the planned rates after those it kept.
            let kept_rates = recorded.and_then(|s| s.rates.known()).map_or(&[][..], Vec::as_slice);
            let kept: Vec<String> = kept_rates.iter().map(|r| r.label.clone()).collect();
            let kept_planned = kept.iter().filter(|label| *label != ServedRate::UNDER).count();
            // On the window the kept rates were served on, as the run goes on with them.
            if let Some(first) = kept_rates.first() {
                let n = first.window_requests();
                if n != plan.lengths.len() {
                    plan.lengths = crate::lengths::draw(&plan.workload, plan.seed, n);
                }
            }
            let all_rates = plan.rates.as_ref().map_or(0, Vec::len);
            let served_rates = all_rates.saturating_sub(kept_planned) as f64;
            let left = if all_rates > 0 { served_rates / all_rates as f64 } else { 0.0 };
            let planned_s =
                plan.expected_s(&prefill, &decode).map_or(0.0, |s| (s * left).min(serve.max_s * served_rates));
            // Each rate served is followed by the warm-up's step timed again, and by the prefill
            // cell nearest its prompts (here, taken one at a time), each as long as a cell.
            let prompts: Vec<(u32, u32)> = plan.lengths.iter().map(|l| (1, l.isl)).collect();
            let prefill_cells = crate::serving::measured_prefills(&cells);
            let prefill_again_s = crate::serving::nearest_prefill(prefill_cells, &prompts).map_or(0.0, |(b, l)| {
                let cell = CellShape::Prefill { batch: b, prompt_len: l };
                cell_s(suite, cell, step_s(run.shape, precision, cell, rates))
            });
            let after_s = again_s + prefill_again_s;
            total_s += planned_s + after_s * served_rates;
            let under_s = plan.expected_under_s(&prefill, &decode).map_or(0.0, |s| s.min(serve.max_s));
            // The step down is served only where it fits what is left of the plan's budget, of
            // which the rates a stop kept spent a part.
            let spent_s = crate::serving::spent_s(kept_rates) + planned_s;
            if under_s > 0.0 && plan.fits_budget(spent_s, under_s) {
                under_extra_s += under_s + after_s;
            }
            serving.push(PlannedServing {
                workload: plan.workload.name.clone(),
                bound: plan.bound.name.clone(),
                rates: plan.rates.map(|rates| rates.into_iter().filter(|(label, _)| !kept.contains(label)).collect()),
                kept,
                requests: plan.lengths.len(),
                expected_s: planned_s,
            });
        }
    }
    WallTime {
        total_s,
        prepare_s,
        under_extra_s,
        warmup_extra_s: (suite.warmup.max_s - suite.warmup.min_s).max(0.0),
        cells: measured,
        basis: rates.basis.clone(),
        planned,
        serving,
    }
}

/// A cell with every step at `step`, as the sweep planner reads it.
fn planned_cell(shape: CellShape, step: f64) -> CellRecord {
    let summary = crate::stats::summarise(&[step; 3]);
    let one = Finite::new(1.0, "measured time");
    match (summary, one) {
        (Ok(summary), Ok(one)) => crate::cell::measured(shape, summary, one, None, None)
            .unwrap_or_else(|_| CellRecord::failed(shape, "no estimate".to_owned())),
        _ => CellRecord::failed(shape, "no estimate".to_owned()),
    }
}

/// One cell's time: its untimed steps (a graph's capture and first replay too) and its timed
/// steps, at least `min_steps` and `min_s`, at most `max_steps`.
fn cell_s(suite: &Suite, cell: CellShape, step: f64) -> f64 {
    let limits = &suite.measure;
    let timed = ((limits.min_s / step).ceil().max(f64::from(limits.min_steps))).min(f64::from(limits.max_steps));
    let untimed = match cell {
        CellShape::Prefill { .. } => 1.0,
        CellShape::Decode { mode: StepMode::Eager, .. } => 2.0,
        CellShape::Decode { mode: StepMode::Graph, .. } => 4.0,
    };
    (timed + untimed) * step
}

/// A step's predicted time: the longer of its bytes at the bandwidth and its FLOPs at the
/// matmul rate, and (eager) of issuing its kernels; a graph step adds one launch.
pub fn step_s(shape: &ModelShape, precision: Precision, cell: CellShape, rates: &Rates) -> f64 {
    let attended = match cell {
        CellShape::Decode { ctx, mode: StepMode::Graph, .. } => Some(ctx.saturating_add(64)),
        _ => None,
    };
    let work = crate::roofline::step_work(shape, precision, cell, None, attended, None);
    let roof = (work.bytes.get() / rates.bandwidth_bytes_per_s).max(work.flops.get() / rates.flops_per_s);
    let per_layer = KERNELS_PER_LAYER + if precision == Precision::Fp8 { KERNELS_PER_FP8_LAYER } else { 0.0 };
    let kernels = per_layer * f64::from(shape.num_layers) + KERNELS_PER_MOE_LAYER * f64::from(shape.moe_layers()) + 5.0;
    match cell.mode() {
        StepMode::Eager => roof.max(kernels * rates.issue_s_per_kernel),
        StepMode::Graph => roof + GRAPH_LAUNCH_S,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    /// A new run of `suite` on `model` under `bounds`, eager, its free memory not known.
    fn fresh<'a>(suite: &'a Suite, model: &'a ModelShape, bounds: &'a [LatencyBound]) -> Planned<'a> {
        Planned {
            suite,
            shape: model,
            model_layers: model.num_layers,
            bounds,
            modes: &[StepMode::Eager],
            free_bytes: None,
            done: &[],
            burst_probed: false,
            native_matmuls: false,
            served: None,
        }
    }

    /// The catalogue's suite `name` and its model.
    fn catalogued(name: &str) -> (Suite, ModelShape) {
        let suite = Suite::from_toml(&catalogue(&format!("suites/{name}.toml")), name).unwrap();
        let model = ModelShape::from_toml(&catalogue(&format!("{}.toml", suite.model)), &suite.model).unwrap();
        (suite, model)
    }

    /// Issue 15: the standard suite, estimated on an H200 from its datasheet with graph lines
    /// (the figure `lynx run` prints there), fits in 20 minutes.
    #[test]
    fn the_standard_suite_is_estimated_within_20_minutes_on_an_h200() {
        let (suite, model) = catalogued("standard");
        let bounds = crate::latency::bounds_for(&suite.bounds, &model);
        let rates = Rates::gpu(datasheet("NVIDIA H200").unwrap(), suite.precision);
        let planned = Planned {
            modes: &StepMode::ALL,
            free_bytes: Some(120 << 30),
            native_matmuls: true,
            ..fresh(&suite, &model, &bounds)
        };
        let estimate = wall_time(&planned, &rates);
        println!("{estimate} ({:.0} s)", estimate.total_s);
        assert!(estimate.total_s <= 20.0 * 60.0, "{estimate}");
        assert!(estimate.cells > 50, "{estimate}");
        assert!(estimate.to_string().contains("H200 datasheet: 4.80 TB/s"), "{estimate}");
        // cuBLASLt's three sustained matmuls are counted beside libtorch's, each as long.
        let without = wall_time(&Planned { native_matmuls: false, ..planned }, &rates);
        let three = 3.0 * suite.roofline.sustained_s;
        assert!(three > 0.0 && (estimate.total_s - without.total_s - three).abs() < 1e-9, "{estimate:?} {without:?}");
        // Without graph lines it is shorter, and a resumed run with cells done is shorter still.
        let eager = wall_time(&Planned { modes: &[StepMode::Eager], ..planned }, &rates);
        assert!(eager.total_s < estimate.total_s && eager.cells < estimate.cells);
        // Serving under a rate where the bound broke is counted apart, as a longest case.
        assert!(estimate.under_extra_s > 0.0, "{estimate}");
        assert!(estimate.to_string().contains("if the serving loop also serves under a latency-bounded rate"));
    }

    /// Issue 16: the `cpu` suite, estimated on the assumed host CPU (the figure `lynx run`
    /// prints there), serving under a broken bound included, fits in 5 minutes; its serving
    /// phase's budget is what keeps it there where the host is slower (docs/SWEEPS.md, "The
    /// serving budget").
    #[test]
    fn the_cpu_suite_is_estimated_within_5_minutes() {
        let (suite, model) = catalogued("cpu");
        let bounds = crate::latency::bounds_for(&suite.bounds, &model);
        let planned = fresh(&suite, &model, &bounds);
        let estimate = wall_time(&planned, &Rates::cpu());
        println!("{estimate} ({:.0} s, {:.0} s more under)", estimate.total_s, estimate.under_extra_s);
        assert!(estimate.total_s + estimate.under_extra_s <= 5.0 * 60.0, "{estimate}");
        // Made again once the burst probes have run, it no longer counts them.
        let after = wall_time(&Planned { burst_probed: true, ..planned }, &Rates::cpu());
        assert!((estimate.total_s - after.total_s - BURST_PROBES_S).abs() < 1e-9, "{estimate:?} {after:?}");
        // Both before warm-up: the burst probes and drawing the weights, at the host's rate.
        let draw_s = model.weight_bytes(suite.precision) as f64 / HOST_DRAW_BYTES_PER_S;
        assert!((estimate.prepare_s - BURST_PROBES_S - draw_s).abs() < 1e-9, "{estimate:?}");
        assert!((after.prepare_s - draw_s).abs() < 1e-9 && draw_s > 0.0, "{after:?}");
        assert!(suite.serve.as_ref().and_then(|s| s.total_s).is_some(), "the cpu suite's serving has a budget");
        // And a budget for the run up to the phase's end, with room left of the 5 minutes.
        let run_s = suite.serve.as_ref().and_then(|s| s.run_s);
        assert!(run_s.is_some_and(|run_s| run_s <= 5.0 * 60.0 - 15.0), "{run_s:?}");
    }

    /// A resumed run's estimate leaves out the workloads its serving phase recorded, and counts
    /// of one a stop cut short only the planned rates after those it kept.
    #[test]
    fn a_resumes_estimate_serves_only_what_is_left() {
        let (suite, model) = catalogued("cpu");
        let bounds = crate::latency::bounds_for(&suite.bounds, &model);
        let planned = fresh(&suite, &model, &bounds);
        let all = wall_time(&planned, &Rates::cpu());
        let served: Vec<&PlannedServing> = all.serving.iter().filter(|s| s.rates.is_ok()).collect();
        let [short] = served[..] else { panic!("the cpu suite serves one workload: {all:?}") };
        let workload = suite.workloads.iter().find(|w| w.name == short.workload).unwrap();
        let bound = bounds.iter().find(|b| b.name == short.bound).unwrap();
        let entry =
            |rates: &[&str], stopped: bool| lynx_schema::serving::served_fixture(workload, bound, rates, stopped);
        let record = |served| ServingRecord { served: vec![served], ..ServingRecord::new("test") };
        // Served whole: nothing left of the phase.
        let whole = record(entry(&["bounded", "over"], false));
        let after = wall_time(&Planned { served: Some(&whole), ..planned }, &Rates::cpu());
        assert!(after.serving.iter().all(|s| s.workload != short.workload), "{after:?}");
        assert!(after.total_s < all.total_s - short.expected_s, "{all:?} {after:?}");
        // Stopped after its latency-bounded rate: half its planned window left, and one rate's
        // re-timings.
        let on_window = |requests: usize| {
            let mut entry = entry(&["bounded"], true);
            if let lynx_schema::value::Reported::Known(rates) = &mut entry.rates {
                rates[0].requests = requests as u32;
            }
            record(entry)
        };
        let stopped = on_window(short.requests);
        let going_on = wall_time(&Planned { served: Some(&stopped), ..planned }, &Rates::cpu());
        let left = going_on.serving.iter().find(|s| s.workload == short.workload).unwrap();
        assert!((left.expected_s - short.expected_s / 2.0).abs() < 1e-9, "{left:?} {short:?}");
        // Served on another window than this process would grow: the rest is planned on it.
        let other = if short.requests == 24 { 48 } else { 24 };
        let elsewhere = wall_time(&Planned { served: Some(&on_window(other)), ..planned }, &Rates::cpu());
        let left_there = elsewhere.serving.iter().find(|s| s.workload == short.workload).unwrap();
        assert_eq!(left_there.requests, other, "{left_there:?}");
        assert!((left_there.expected_s < left.expected_s) == (other < short.requests), "{left_there:?} {left:?}");
        // Listed with the rate left, the rate kept named.
        let labels = |s: &PlannedServing| s.rates.as_ref().unwrap().iter().map(|(l, _)| l.clone()).collect::<Vec<_>>();
        assert_eq!((labels(short), short.kept.clone()), (vec!["bounded".to_owned(), "over".to_owned()], vec![]));
        assert_eq!((labels(left), left.kept.clone()), (vec!["over".to_owned()], vec!["bounded".to_owned()]));
        // Stopped in its step down: no planned rate left, every rate kept named.
        let stepping = record(entry(&["bounded", "over", "under"], true));
        let stepping = wall_time(&Planned { served: Some(&stepping), ..planned }, &Rates::cpu());
        let left = stepping.serving.iter().find(|s| s.workload == short.workload).unwrap();
        assert_eq!(
            (labels(left), left.kept.clone()),
            (vec![], vec!["bounded".to_owned(), "over".to_owned(), "under".to_owned()])
        );
        assert_eq!(left.expected_s, 0.0, "{left:?}");
        assert!(after.total_s < going_on.total_s && going_on.total_s < all.total_s, "{going_on:?}");
    }

    /// The estimate lists the cells it planned (what `lynx run --plan` prints), skipped ones
    /// marked and not counted, and the serving it planned; a layer subset is planned no serving,
    /// as a run serves none.
    #[test]
    fn the_plan_behind_the_estimate_is_listed() {
        let (suite, model) = catalogued("cpu");
        let bounds = crate::latency::bounds_for(&suite.bounds, &model);
        let planned = fresh(&suite, &model, &bounds);
        let all = wall_time(&planned, &Rates::cpu());
        assert_eq!(all.planned.len(), all.cells);
        assert!(all.planned.iter().all(|c| c.skipped.is_none() && c.step_s > 0.0 && c.memory.total_bytes() > 0));
        let served: Vec<_> = all.serving.iter().filter(|s| s.rates.is_ok()).collect();
        assert!(!served.is_empty() && served.iter().all(|s| s.requests > 0 && s.expected_s > 0.0), "{all:?}");
        // Free memory between the smallest and the largest cell's: some skipped, not counted.
        let largest = all.planned.iter().map(|c| c.memory.total_bytes()).max().unwrap();
        let some = wall_time(&Planned { free_bytes: Some(largest / 2), ..planned }, &Rates::cpu());
        let skipped = some.planned.iter().filter(|c| c.skipped.is_some()).count();
        assert!(skipped > 0 && some.cells == some.planned.len() - skipped, "{some:?}");
        // A layer subset: no serving planned, none counted.
        let mut subset = suite.clone();
        subset.scale.layers = Some(1);
        let scaled = wall_time(&Planned { suite: &subset, ..planned }, &Rates::cpu());
        assert!(!scaled.serving.is_empty(), "{scaled:?}");
        for serving in &scaled.serving {
            let why = serving.rates.as_ref().unwrap_err();
            assert!(why.contains("a serving loop serves whole models only"), "{why}");
            assert_eq!(serving.expected_s, 0.0);
        }
        assert_eq!(scaled.under_extra_s, 0.0);
    }

    /// Once the burst probes have run, the estimate is made again from the ceilings they
    /// measured (the best bandwidth probe, the matmul probe at the run's element type; the
    /// probes are then no longer counted: the cpu suite's test); without a ceiling for either
    /// there is no such estimate.
    #[test]
    fn the_estimate_made_again_from_measured_ceilings() {
        use lynx_schema::roofline::{ElementType, ProbeKind, ProbePhase};
        use lynx_schema::value::Reported;
        let probe = |name: &str, kind, dtype, value: f64| Probe {
            name: name.to_owned(),
            kind,
            dtype,
            phase: ProbePhase::Burst,
            value: Reported::Known(Finite::new(value, "probe").unwrap()),
            method: String::new(),
        };
        let mut ceilings = RooflineRecord {
            probes: vec![
                probe("torch copy", ProbeKind::Bandwidth, ElementType::F32, 15e9),
                probe("cpu copy", ProbeKind::Bandwidth, ElementType::F64, 17e9),
                probe("torch matmul", ProbeKind::Matmul, ElementType::Bf16, 900e9),
                probe("torch matmul", ProbeKind::Matmul, ElementType::F32, 80e9),
            ],
            ..RooflineRecord::default()
        };
        let rates = Rates::measured(&ceilings, Precision::Fp32, false).unwrap();
        assert_eq!((rates.bandwidth_bytes_per_s, rates.flops_per_s, rates.issue_s_per_kernel), (17e9, 80e9, 0.0));
        assert_eq!(
            rates.basis,
            "this device's measured ceilings: 17.0 GB/s (cpu copy), 80.0 GFLOP/s f32 (torch matmul)"
        );
        assert_eq!(Rates::measured(&ceilings, Precision::Bf16, true).unwrap().issue_s_per_kernel, ISSUE_S_PER_KERNEL);
        let why = Rates::measured(&ceilings, Precision::Fp8, true).unwrap_err();
        assert_eq!(why, "no fp8 matmul probe measured a ceiling");
        ceilings.probes.retain(|p| p.kind == ProbeKind::Matmul);
        assert_eq!(
            Rates::measured(&ceilings, Precision::Fp32, false).unwrap_err(),
            "no bandwidth probe measured a ceiling"
        );
    }

    /// The time limit `scripts/gpu-check.sh` gives a suite (its `want=` line for the suite, or
    /// the `*)` default).
    fn gpu_check_limit_s(suite: &str) -> f64 {
        let script =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/gpu-check.sh")).unwrap();
        let want = |pattern: &str| {
            let line = script.lines().find(|l| l.trim_start().starts_with(pattern) && l.contains("want="))?;
            line.split("want=").nth(1)?.trim_end_matches(" ;;").trim().parse().ok()
        };
        want(&format!("{suite})"))
            .or_else(|| want("*)"))
            .unwrap_or_else(|| panic!("no limit for {suite} in gpu-check.sh"))
    }

    /// Each suite of the prepared GPU check, estimated on an H200 from its datasheet (with graph
    /// lines, warm-up at its longest, and a rate served under each latency-bounded one), takes at most half the time limit gpu-check.sh gives
    /// it: the other half is start-up, drawing the weights, the parity and graph checks and the
    /// datasheet's optimism. A suite that outgrew its limit would be cut on the one GPU window.
    #[test]
    fn every_gpu_check_suite_fits_half_its_limit_on_an_h200() {
        for name in ["gpu-check-llama-bf16", "gpu-check-llama-fp8", "gpu-check-moe", "gpu-check-mla"] {
            let (suite, full) = catalogued(name);
            let shape = lynx_schema::config::shard(&full, &suite.scale).unwrap();
            let bounds = crate::latency::bounds_for(&suite.bounds, &full);
            let planned = Planned {
                shape: &shape,
                modes: &StepMode::ALL,
                free_bytes: Some(120 << 30),
                native_matmuls: true,
                ..fresh(&suite, &full, &bounds)
            };
            let estimate = wall_time(&planned, &Rates::gpu(datasheet("NVIDIA H200").unwrap(), suite.precision));
            let longest = estimate.total_s + estimate.warmup_extra_s + estimate.under_extra_s;
            let limit = gpu_check_limit_s(name);
            println!("{name}: {estimate} ({longest:.0} s at most, of a {limit:.0} s limit)");
            assert!(estimate.cells >= 2, "{name}: {estimate}");
            assert!(longest <= limit / 2.0, "{name}: {longest:.0} s against a {limit:.0} s limit: {estimate}");
        }
    }

    /// A step's prediction: a memory-bound graph decode step at batch 1 (the weights once at the
    /// bandwidth), an eager one launch-bound on an H200 as measured there (Llama 3.1 8B's,
    /// 8.9-10.3 ms), compute-bound prefill at batch 64, an eager step never shorter than issuing
    /// its kernels, and a graph step free of that floor.
    #[test]
    fn a_step_is_predicted_from_its_work_and_its_issue_cost() {
        let (_, model) = catalogued("standard");
        let rates = Rates::gpu(datasheet("NVIDIA H200").unwrap(), Precision::Bf16);
        let weights = model.weight_bytes(Precision::Bf16) as f64 / rates.bandwidth_bytes_per_s;
        let graph_decode = CellShape::Decode { batch: 1, ctx: 1024, mode: StepMode::Graph };
        let decode = step_s(&model, Precision::Bf16, graph_decode, &rates);
        // Its bytes (the weights a step reads, one embedding row a token, and the cache it
        // attends) at the bandwidth, and one launch.
        let bytes =
            crate::roofline::step_work(&model, Precision::Bf16, graph_decode, None, Some(1024 + 64), None).bytes;
        assert!((decode - (bytes.get() / rates.bandwidth_bytes_per_s + GRAPH_LAUNCH_S)).abs() < 1e-12, "{decode}");
        assert!(decode > 0.8 * weights && decode < 1.5 * weights, "{decode} against {weights}");
        let eager = step_s(&model, Precision::Bf16, CellShape::decode(1, 1024), &rates);
        let issue = (17.0 * f64::from(model.num_layers) + 5.0) * ISSUE_S_PER_KERNEL;
        assert_eq!(eager, issue, "launch-bound: {eager} against the weights' {weights}");
        assert!((0.0085..0.0105).contains(&eager), "{eager}");
        let tiny = {
            let mut shape = model.clone();
            shape.num_layers = 1;
            shape.vocab_size = 1000;
            shape
        };
        let eager = step_s(&tiny, Precision::Bf16, CellShape::decode(1, 16), &rates);
        assert!((eager - 22.0 * ISSUE_S_PER_KERNEL).abs() < 1e-12, "{eager}");
        // An fp8 layer also quantises each linear layer's input.
        let fp8 = Rates::gpu(datasheet("NVIDIA H200").unwrap(), Precision::Fp8);
        let eager_fp8 = step_s(&tiny, Precision::Fp8, CellShape::decode(1, 16), &fp8);
        assert!((eager_fp8 - 38.0 * ISSUE_S_PER_KERNEL).abs() < 1e-12, "{eager_fp8}");
        let graph = CellShape::Decode { batch: 1, ctx: 16, mode: StepMode::Graph };
        assert!(step_s(&tiny, Precision::Bf16, graph, &rates) < eager);
        let prefill = step_s(&model, Precision::Bf16, CellShape::Prefill { batch: 64, prompt_len: 1024 }, &rates);
        let flops = 2.0 * 64.0 * 1024.0 * model.parameters().active as f64 / rates.flops_per_s;
        // Every linear weight twice a token, less the embedding table (looked up, not multiplied).
        assert!(prefill > 0.85 * flops && prefill <= flops, "{prefill} against {flops}");
    }

    #[test]
    fn a_device_without_a_datasheet_has_none() {
        assert!(datasheet("NVIDIA A100-SXM4-80GB").is_none());
        assert_eq!(datasheet("NVIDIA H100 PCIe").unwrap().bandwidth_bytes_per_s, 2.0e12, "not the SXM board's");
        assert!(datasheet("NVIDIA GH200 480GB").is_none(), "a Grace Hopper is not an H200");
        assert_eq!(datasheet("NVIDIA H100 80GB HBM3").unwrap().name, "H100 80GB HBM3");
        assert_eq!(datasheet("NVIDIA H200 NVL").unwrap().name, "H200");
        assert_eq!(datasheet("AMD Instinct MI300X").unwrap().bandwidth_bytes_per_s, 5.3e12);
        assert!(Rates::cpu().basis.contains("assumed"));
    }

    /// A device planned and not here is named by its datasheet (case and spacing aside), and the
    /// name its record then carries, its driver's, finds the same datasheet for its rates.
    #[test]
    fn a_datasheet_is_named_as_lynx_names_it_or_as_its_driver_does() {
        for sheet in &DATASHEETS {
            assert_eq!(datasheet(sheet.full_name), Some(sheet), "{}", sheet.full_name);
            assert_eq!(datasheet_named(sheet.name), Ok(sheet));
            assert_eq!(datasheet_named(&sheet.full_name.to_lowercase()), Ok(sheet));
            assert!(sheet.memory_bytes() >= 80 << 30, "{}", sheet.name);
            assert_eq!(sheet.rocm, sheet.full_name.starts_with("AMD "), "{}", sheet.name);
        }
        assert_eq!(datasheet_named("  h100   80gb hbm3 ").unwrap().memory_bytes(), 80 << 30);
        assert_eq!(datasheet_named("nvidia-h200").unwrap().name, "H200", "a device's slug");
        assert_eq!(datasheet_named("nvidia-h100-pcie").unwrap().name, "H100 PCIe");
        assert_eq!(datasheet_named("HBM3").unwrap().name, "H100 80GB HBM3", "the only one it could mean");
        let meant = |name: &str| datasheet_named(name).unwrap_err().iter().map(|d| d.name).collect::<Vec<_>>();
        assert_eq!(meant("H100"), ["H100 80GB HBM3", "H100 PCIe"], "an H100 PCIe is not the SXM board's datasheet");
        assert_eq!(meant("nvidia h1"), Vec::<&str>::new(), "whole words only");
        assert_eq!(meant("A100"), Vec::<&str>::new());
        assert_eq!(meant(" - "), Vec::<&str>::new());
    }
}
