//! The roofline: the device's measured ceilings, the work each cell's step does, and the cell's
//! figures as fractions of the ceilings. docs/ROOFLINE.md states the formulas and what they
//! count.
//!
//! Every term of a step's work is a lower bound of what the step must move or compute, so an
//! achieved rate computed from it can only understate the truth: a cell above
//! [`MAX_FRACTION`] of a measured ceiling is a timing or counting bug, never a fast device.

use lynx_schema::config::{Attention, Gqa, ModelShape, Precision};
use lynx_schema::result::{CellRecord, CellShape, Check, CheckName};
use lynx_schema::roofline::{CellRoofline, ElementType, Gap, Probe, ProbeKind, ProbePhase, RooflineRecord, StepWork};
use lynx_schema::value::Finite;

/// The most of a ceiling a cell may reach before the `roofline` check fails.
pub const MAX_FRACTION: f64 = 1.05;

/// A step whose bytes are at most this many times the device's largest cache is not held to the
/// memory-bandwidth ceiling. Twice, not once: caches with adaptive replacement keep part of a
/// working set somewhat larger than themselves, which LRU would not.
pub const CACHE_RESIDENT_FACTOR: f64 = 2.0;

/// `probes` with the gaps between libtorch and the native probes filled in: bandwidth (best
/// native kernel against libtorch's copy) and matmul per element type and phase (cuBLASLt
/// against libtorch).
pub fn with_gaps(probes: Vec<Probe>) -> RooflineRecord {
    let best = |filter: &dyn Fn(&Probe) -> bool| {
        probes.iter().filter(|p| filter(p)).filter_map(|p| p.value.known().map(|v| v.get())).reduce(f64::max)
    };
    let mut gaps = Vec::new();
    let mut push = |what: String, native: Option<f64>, torch: Option<f64>| {
        if let (Some(native), Some(torch)) = (native, torch) {
            if let (Ok(n), Ok(t), Ok(r)) =
                (Finite::new(native, "native"), Finite::new(torch, "torch"), Finite::new(torch / native, "ratio"))
            {
                gaps.push(Gap { what, native: n, torch: t, ratio: r });
            }
        }
    };
    push(
        "bandwidth".to_owned(),
        best(&|p| p.kind == ProbeKind::Bandwidth && p.name.starts_with("native ")),
        best(&|p| p.kind == ProbeKind::Bandwidth && p.name == "torch copy"),
    );
    for dtype in [ElementType::Bf16, ElementType::Fp16] {
        for phase in [ProbePhase::Burst, ProbePhase::Sustained] {
            let of = |name: &'static str| {
                best(&|p| p.kind == ProbeKind::Matmul && p.name == name && p.dtype == dtype && p.phase == phase)
            };
            push(format!("matmul {dtype} {phase}"), of("cublaslt matmul"), of("torch matmul"));
        }
    }
    RooflineRecord { probes, gaps, cache_bytes: None }
}

/// The ceilings a roofline record holds: the best probe of each kind.
pub trait Ceilings {
    /// The memory-bandwidth ceiling: the highest bandwidth any probe measured.
    fn bandwidth(&self) -> Option<&Probe>;
    /// The matmul ceiling for `dtype`: the highest rate any probe measured in that element type.
    fn matmul(&self, dtype: ElementType) -> Option<&Probe>;
}

impl Ceilings for RooflineRecord {
    fn bandwidth(&self) -> Option<&Probe> {
        best(self, ProbeKind::Bandwidth, None)
    }

    fn matmul(&self, dtype: ElementType) -> Option<&Probe> {
        best(self, ProbeKind::Matmul, Some(dtype))
    }
}

fn best(record: &RooflineRecord, kind: ProbeKind, dtype: Option<ElementType>) -> Option<&Probe> {
    record
        .probes
        .iter()
        .filter(|p| p.kind == kind && dtype.is_none_or(|d| p.dtype == d))
        .filter_map(|p| p.value.known().map(|v| (v.get(), p)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, p)| p)
}

/// The element type of a run's matmuls at `precision` (fp8 weights multiply in e4m3).
pub fn matmul_dtype(precision: Precision) -> ElementType {
    match precision {
        Precision::Fp32 => ElementType::F32,
        Precision::Bf16 => ElementType::Bf16,
        Precision::Fp16 => ElementType::Fp16,
        Precision::Fp8 => ElementType::Fp8,
    }
}

fn finite(value: f64, what: &str) -> Finite {
    // The formulas multiply finite sizes; a non-finite result would be a bug in them.
    Finite::new(value, what).unwrap_or_else(|_| Finite::new(0.0, what).expect("0 is finite"))
}

/// The work of one step of `cell` on `shape` at `precision`. A decode cell's context is taken as
/// the mean over its measured steps: `ctx` at the first and `ctx_end` at the last. A graph
/// cell's step reads and attends all the `attended` keys of its padded cache instead (a figure
/// must never look better than the work the step did). A mixture of experts reads the weights of
/// the experts its tokens were routed to: `touched` of them a layer where the cell tallied them,
/// else the number expected under uniform routing.
pub fn step_work(
    shape: &ModelShape,
    precision: Precision,
    cell: CellShape,
    ctx_end: Option<u32>,
    attended: Option<u32>,
    touched: Option<f64>,
) -> StepWork {
    let params = shape.parameters();
    let hidden = f64::from(shape.hidden_size);
    let vocab = f64::from(shape.vocab_size);
    let act = precision.activation_bytes() as f64;
    // Bytes of a weight that is not a block's linear layer (bf16 under fp8).
    let other_bytes = act;
    let (tokens, logit_rows) = match cell {
        CellShape::Prefill { batch, prompt_len } => (f64::from(batch) * f64::from(prompt_len), f64::from(batch)),
        CellShape::Decode { batch, .. } => (f64::from(batch), f64::from(batch)),
    };

    // Weights: all of them, less the embedding table (only the rows looked up are read; a tied
    // table is read whole as the lm head), less the experts the batch is not expected to touch.
    let mut weight_bytes = shape.weight_bytes(precision) as f64;
    if !shape.tie_word_embeddings {
        let table = params.embedding as f64 * other_bytes;
        weight_bytes -= table - (tokens * hidden * other_bytes).min(table);
    }
    if let Some(moe) = &shape.moe {
        let experts = f64::from(moe.num_experts);
        let per_token = f64::from(moe.experts_per_token.min(moe.num_experts));
        // Expected distinct experts among `tokens` draws of `per_token` under uniform routing. A
        // trained router is not uniform: its tokens share fewer experts, which a tally counts.
        let expected = experts * (1.0 - (1.0 - per_token / experts).powf(tokens));
        let touched = touched.map_or(expected, |t| t.clamp(per_token.min(experts), experts));
        let expert_bytes = 3.0 * hidden * f64::from(moe.intermediate_size) * precision.bytes() as f64;
        weight_bytes -= f64::from(shape.moe_layers()) * (experts - touched) * expert_bytes;
    }

    // KV cache.
    let (kv_read_bytes, kv_write_bytes) = match cell {
        CellShape::Prefill { batch, prompt_len } => {
            (0.0, f64::from(batch) * shape.kv_bytes(precision, u64::from(prompt_len)) as f64)
        }
        CellShape::Decode { batch, ctx, .. } => {
            let mean_ctx = (u64::from(ctx) + u64::from(ctx_end.unwrap_or(ctx))) / 2;
            let read = attended.map_or(mean_ctx, u64::from);
            let batch = f64::from(batch);
            (batch * shape.kv_bytes(precision, read) as f64, batch * shape.kv_bytes_per_token(precision) as f64)
        }
    };
    let activation_bytes = 2.0 * tokens * hidden * act * f64::from(shape.num_layers) + logit_rows * vocab * act;

    // FLOPs: every linear weight a token uses, twice (multiply and add); the lm head only for the
    // rows that get logits.
    let lm_head = vocab * hidden;
    let untied_head = if shape.tie_word_embeddings { 0.0 } else { lm_head };
    let per_token = params.active as f64 - params.embedding as f64 - untied_head;
    let matmul_flops = 2.0 * tokens * per_token + 2.0 * logit_rows * lm_head;
    let attention_flops = attention_flops(shape, cell, ctx_end, attended);
    let bytes = weight_bytes + kv_read_bytes + kv_write_bytes + activation_bytes;
    StepWork {
        weight_bytes: finite(weight_bytes, "weight bytes"),
        kv_read_bytes: finite(kv_read_bytes, "kv read bytes"),
        kv_write_bytes: finite(kv_write_bytes, "kv write bytes"),
        activation_bytes: finite(activation_bytes, "activation bytes"),
        bytes: finite(bytes, "bytes"),
        matmul_flops: finite(matmul_flops, "matmul flops"),
        attention_flops: finite(attention_flops, "attention flops"),
        flops: finite(matmul_flops + attention_flops, "flops"),
    }
}

/// 4 × heads × (key width) × keys per query token and layer; for MLA the absorbed form, whose
/// keys are the latent plus the RoPE key and whose values are the latent. A padded graph step
/// computes over all `attended` keys in every layer (the mask hides, it does not skip).
fn attention_flops(shape: &ModelShape, cell: CellShape, ctx_end: Option<u32>, attended: Option<u32>) -> f64 {
    let (heads, qk_width, v_width) = match &shape.attention {
        Attention::Gqa(gqa) => {
            let d = f64::from(shape.head_dim());
            (f64::from(gqa.num_heads), d, d)
        }
        Attention::Mla(mla) => (
            f64::from(mla.num_heads),
            f64::from(mla.kv_lora_rank) + f64::from(mla.qk_rope_head_dim),
            f64::from(mla.kv_lora_rank),
        ),
    };
    let window = match &shape.attention {
        Attention::Gqa(Gqa { sliding_window: Some(w), .. }) => f64::from(w.size),
        _ => f64::INFINITY,
    };
    let full = f64::from(shape.full_attention_layers());
    let sliding = f64::from(shape.num_layers) - full;
    // Keys attended summed over the query tokens of one sequence, for full and sliding layers.
    let (keys_full, keys_sliding) = match cell {
        CellShape::Decode { .. } if attended.is_some() => {
            let keys = f64::from(attended.unwrap_or(0));
            (keys, keys)
        }
        CellShape::Decode { ctx, .. } => {
            let mean = (f64::from(ctx) + f64::from(ctx_end.unwrap_or(ctx))) / 2.0 + 1.0;
            (mean, mean.min(window))
        }
        CellShape::Prefill { prompt_len, .. } => {
            let l = f64::from(prompt_len);
            let w = window.min(l);
            // Σ_{i=1..L} min(i, w) = w(w+1)/2 + (L − w)·w.
            (l * (l + 1.0) / 2.0, w * (w + 1.0) / 2.0 + (l - w) * w)
        }
    };
    let batch = f64::from(cell.batch());
    2.0 * heads * (qk_width + v_width) * batch * (full * keys_full + sliding * keys_sliding)
}

/// `cell`'s figures against `ceilings`, for a run of `shape` at `precision`; `None` for a cell
/// without a step time.
pub fn cell_roofline(
    shape: &ModelShape,
    precision: Precision,
    cell: &CellRecord,
    ceilings: &RooflineRecord,
) -> Option<CellRoofline> {
    let median_s = cell.median_s()?;
    let touched = cell.experts_touched.map(Finite::get);
    let work = step_work(shape, precision, cell.shape, cell.ctx_end, cell.attended, touched);
    let bytes_per_s = work.bytes.get() / median_s;
    let flops_per_s = work.flops.get() / median_s;
    let fraction = |achieved: f64, ceiling: Option<&Probe>| {
        ceiling.and_then(|p| p.value.known()).and_then(|c| Finite::new(achieved / c.get(), "fraction").ok())
    };
    Some(CellRoofline {
        achieved_bytes_per_s: Finite::new(bytes_per_s, "bytes per second").ok()?,
        achieved_flops_per_s: Finite::new(flops_per_s, "FLOP per second").ok()?,
        bandwidth_fraction: fraction(bytes_per_s, ceilings.bandwidth()),
        matmul_fraction: fraction(flops_per_s, ceilings.matmul(matmul_dtype(precision))),
        work,
    })
}

/// The `roofline` check: no cell above [`MAX_FRACTION`] of a measured ceiling. `None` when no
/// ceiling was measured (a check that cannot be evaluated is left out, not passed). A cell whose
/// step bytes fit in [`CACHE_RESIDENT_FACTOR`] times the device's cache is held to the matmul
/// ceiling only: the bandwidth probes measure memory, and such a step may not reach it.
pub fn roofline_check(cells: &[CellRecord], ceilings: &RooflineRecord) -> Option<Check> {
    if ceilings.bandwidth().is_none() && ceilings.probes.iter().all(|p| p.kind != ProbeKind::Matmul) {
        return None;
    }
    let cache_resident = |work: &StepWork| {
        ceilings.cache_bytes.is_some_and(|cache| work.bytes.get() <= CACHE_RESIDENT_FACTOR * cache as f64)
    };
    let mut worst: Option<(f64, String)> = None;
    let mut exempt = 0;
    for cell in cells {
        let Some(roofline) = &cell.roofline else { continue };
        let bandwidth = if cache_resident(&roofline.work) {
            exempt += usize::from(roofline.bandwidth_fraction.is_some());
            None
        } else {
            roofline.bandwidth_fraction
        };
        for (fraction, ceiling) in [(bandwidth, "memory bandwidth"), (roofline.matmul_fraction, "matmul rate")] {
            if let Some(f) = fraction.map(Finite::get) {
                if worst.as_ref().is_none_or(|(w, _)| f > *w) {
                    worst = Some((f, format!("{} at {:.0}% of the measured {ceiling}", cell.shape, f * 100.0)));
                }
            }
        }
    }
    let (fraction, detail) = worst?;
    let passed = fraction <= MAX_FRACTION;
    let exempt = match (exempt, ceilings.cache_bytes) {
        (0, _) | (_, None) => String::new(),
        (n, Some(cache)) => format!(
            " ({n} cell{} with step bytes within {CACHE_RESIDENT_FACTOR}x the {:.1} MiB cache held to the matmul \
             ceiling only)",
            if n == 1 { "" } else { "s" },
            cache as f64 / (1u64 << 20) as f64
        ),
    };
    Some(Check {
        name: CheckName::Roofline,
        passed,
        detail: if passed {
            format!("the highest share of a ceiling: {detail}{exempt}")
        } else {
            format!(
                "{detail}: above {:.0}% of a measured ceiling is a timing or counting bug{exempt}",
                MAX_FRACTION * 100.0
            )
        },
        measured: Finite::new(fraction, "roofline fraction").ok(),
        limit: Finite::new(MAX_FRACTION, "roofline limit").ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::value::Reported;

    fn dense() -> ModelShape {
        ModelShape::from_toml(
            r#"
name = "tiny"
vocab_size = 1000
hidden_size = 64
num_layers = 2
rms_norm_eps = 1e-5
[attention]
kind = "gqa"
num_heads = 4
num_kv_heads = 2
rope_theta = 10000.0
[mlp]
intermediate_size = 128
"#,
            "tiny",
        )
        .unwrap()
    }

    #[test]
    fn the_gap_is_torch_over_native() {
        let named =
            |name: &str, kind, dtype: ElementType, value| Probe { name: name.into(), ..probe(kind, dtype, value) };
        let record = with_gaps(vec![
            named("native copy", ProbeKind::Bandwidth, ElementType::F32, 4.0e12),
            named("native triad", ProbeKind::Bandwidth, ElementType::F32, 4.2e12),
            named("torch copy", ProbeKind::Bandwidth, ElementType::F32, 3.78e12),
            named("cublaslt matmul", ProbeKind::Matmul, ElementType::Bf16, 800e12),
            named("torch matmul", ProbeKind::Matmul, ElementType::Bf16, 720e12),
            named("torch matmul", ProbeKind::Matmul, ElementType::Fp16, 700e12),
        ]);
        let gaps: Vec<(&str, f64)> = record.gaps.iter().map(|g| (g.what.as_str(), g.ratio.get())).collect();
        assert_eq!(gaps.len(), 2, "{gaps:?}");
        assert_eq!(gaps[0].0, "bandwidth");
        assert!((gaps[0].1 - 0.9).abs() < 1e-12, "against the best native kernel");
        assert_eq!(gaps[1].0, "matmul bf16 burst");
        assert!((gaps[1].1 - 0.9).abs() < 1e-12);
    }

    /// A graph step attends its whole padded cache: its KV reads and attention FLOPs are those
    /// of the capacity, never of the (smaller) context, and nothing else changes.
    #[test]
    fn a_padded_graph_step_counts_the_keys_it_attends() {
        let shape = dense();
        let eager = step_work(&shape, Precision::Fp32, CellShape::decode(2, 100), Some(100), None, None);
        let graph_shape = CellShape::Decode { batch: 2, ctx: 100, mode: lynx_schema::result::StepMode::Graph };
        let graph = step_work(&shape, Precision::Fp32, graph_shape, Some(100), Some(300), None);
        assert_eq!(graph.kv_read_bytes.get(), 3.0 * eager.kv_read_bytes.get());
        assert!((graph.attention_flops.get() / eager.attention_flops.get() - 300.0 / 101.0).abs() < 1e-12);
        assert_eq!(graph.weight_bytes, eager.weight_bytes);
        assert_eq!(graph.matmul_flops, eager.matmul_flops);
    }

    /// A mixture of experts reads its touched experts' weights: the count a cell tallied where it
    /// has one (held between k and all the experts), else the count uniform routing expects.
    #[test]
    fn a_tallied_expert_count_sets_the_expert_weights_read() {
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/qwen3-30b-a3b.toml")).unwrap();
        let shape = ModelShape::from_toml(&text, "qwen3-30b-a3b").unwrap();
        let moe = shape.moe.clone().unwrap();
        let (experts, k) = (f64::from(moe.num_experts), f64::from(moe.experts_per_token));
        let expert_bytes = 3.0 * f64::from(shape.hidden_size) * f64::from(moe.intermediate_size) * 2.0;
        let layers = f64::from(shape.moe_layers());
        let weights = |touched: Option<f64>| {
            step_work(&shape, Precision::Bf16, CellShape::decode(64, 1024), Some(1024), None, touched)
                .weight_bytes
                .get()
        };
        let uniform = experts * (1.0 - (1.0 - k / experts).powf(64.0));
        assert!((weights(Some(uniform)) - weights(None)).abs() < 1.0, "the uniform count is the default");
        let fewer = weights(Some(40.0));
        assert!((weights(None) - fewer - layers * (uniform - 40.0) * expert_bytes).abs() < 1.0);
        assert_eq!(weights(Some(1.0)), weights(Some(k)), "at least k experts a token");
        assert_eq!(weights(Some(1e9)), weights(Some(experts)), "at most all of them");
    }

    #[test]
    fn decode_work_by_hand() {
        // hidden 64, 4 heads of 16, 2 KV heads: per layer q, o 64×64 each, k, v 64×32 each
        // (12 288), MLP 3×64×128 (24 576), norms 128; embedding and lm head 64 000 each; final
        // norm 64. Total 2×(12 288 + 24 576 + 128) + 128 000 + 64 = 202 048 parameters.
        let shape = dense();
        assert_eq!(shape.parameters().total, 202_048);
        let work = step_work(&shape, Precision::Fp32, CellShape::decode(2, 100), Some(100), None, None);
        // Weights: all 202 048 × 4 bytes, less the embedding table (256 000 bytes) plus the two
        // rows looked up (2 × 64 × 4).
        assert_eq!(work.weight_bytes.get(), 808_192.0 - 256_000.0 + 512.0);
        // KV: 2 layers × 2 (K, V) × 2 heads × 16 × 4 bytes = 512 bytes per token.
        assert_eq!(work.kv_read_bytes.get(), 2.0 * 100.0 * 512.0);
        assert_eq!(work.kv_write_bytes.get(), 2.0 * 512.0);
        // Residual stream: 2 × 2 tokens × 64 × 4 bytes × 2 layers; logits 2 × 1000 × 4.
        assert_eq!(work.activation_bytes.get(), 2048.0 + 8000.0);
        // Matmuls: 2 tokens × 2 × (202 048 − 64 000 − 64 000) + 2 × 2 × 64 000.
        assert_eq!(work.matmul_flops.get(), 4.0 * 74_048.0 + 256_000.0);
        // Attention: 2 × 4 heads × (16 + 16) × 2 sequences × 2 layers × 101 keys.
        assert_eq!(work.attention_flops.get(), 2.0 * 4.0 * 32.0 * 2.0 * 2.0 * 101.0);
    }

    #[test]
    fn prefill_attention_is_causal() {
        let work =
            step_work(&dense(), Precision::Fp32, CellShape::Prefill { batch: 1, prompt_len: 10 }, None, None, None);
        // 55 keys over 10 causal positions.
        assert_eq!(work.attention_flops.get(), 2.0 * 4.0 * 32.0 * 2.0 * 55.0);
        assert_eq!(work.kv_read_bytes.get(), 0.0);
        assert_eq!(work.kv_write_bytes.get(), 10.0 * 512.0);
    }

    fn probe(kind: ProbeKind, dtype: ElementType, value: f64) -> Probe {
        Probe {
            name: "test".into(),
            kind,
            dtype,
            phase: ProbePhase::Burst,
            value: Reported::Known(Finite::new(value, "v").unwrap()),
            method: String::new(),
        }
    }

    fn cell(median_s: f64) -> CellRecord {
        let shape = CellShape::decode(2, 100);
        let summary = crate::stats::summarise(&[median_s; 3]).unwrap();
        crate::cell::measured(shape, summary, Finite::new(1.0, "t").unwrap(), Some(100), None).unwrap()
    }

    #[test]
    fn fractions_against_the_best_probe_and_the_check() {
        let shape = dense();
        let ceilings = with_gaps(vec![
            probe(ProbeKind::Bandwidth, ElementType::F32, 1e9),
            probe(ProbeKind::Bandwidth, ElementType::F32, 2e9),
            probe(ProbeKind::Matmul, ElementType::Bf16, 1e15),
            probe(ProbeKind::Matmul, ElementType::F32, 1e12),
        ]);
        let mut fast = cell(1e-3);
        let roofline = cell_roofline(&shape, Precision::Fp32, &fast, &ceilings).unwrap();
        let bytes = roofline.work.bytes.get();
        assert!((roofline.achieved_bytes_per_s.get() - bytes / 1e-3).abs() < 1e-6);
        assert!((roofline.bandwidth_fraction.unwrap().get() - bytes / 1e-3 / 2e9).abs() < 1e-12);
        let flops = roofline.work.flops.get();
        assert!((roofline.matmul_fraction.unwrap().get() - flops / 1e-3 / 1e12).abs() < 1e-12, "the f32 ceiling");
        fast.roofline = Some(roofline);
        let check = roofline_check(&[fast], &ceilings).unwrap();
        assert!(check.passed, "{check:?}");

        // An impossible timing: the same work in a thousandth of the time moves more than the
        // memory can.
        let mut impossible = cell(bytes / 2e9 / 1.2);
        impossible.roofline = cell_roofline(&shape, Precision::Fp32, &impossible, &ceilings);
        let check = roofline_check(&[impossible], &ceilings).unwrap();
        assert!(!check.passed && check.detail.contains("120% of the measured memory bandwidth"), "{check:?}");
        assert_eq!(roofline_check(&[], &RooflineRecord::default()), None, "no ceilings, no check");
    }

    #[test]
    fn a_step_that_fits_in_the_cache_is_held_to_the_matmul_ceiling_only() {
        let shape = dense();
        let bandwidth_only = |cache_bytes| RooflineRecord {
            cache_bytes,
            ..with_gaps(vec![
                probe(ProbeKind::Bandwidth, ElementType::F32, 2e9),
                probe(ProbeKind::Matmul, ElementType::F32, 1e15),
            ])
        };
        let bytes = step_work(&shape, Precision::Fp32, cell(1.0).shape, cell(1.0).ctx_end, None, None).bytes.get();
        // Three times the bandwidth ceiling: a DRAM-sized step cannot, a cache-resident one can.
        let mut fast = cell(bytes / 2e9 / 3.0);
        fast.roofline = cell_roofline(&shape, Precision::Fp32, &fast, &bandwidth_only(None));
        let cells = [fast];
        let failed = |cache_bytes: Option<u64>| !roofline_check(&cells, &bandwidth_only(cache_bytes)).unwrap().passed;
        assert!(failed(None), "no cache size known: held to the bandwidth ceiling");
        // The step's bytes against twice the cache: just within, and just beyond.
        let within = (bytes / CACHE_RESIDENT_FACTOR).ceil() as u64;
        let check = roofline_check(&cells, &bandwidth_only(Some(within))).unwrap();
        assert!(check.passed, "{check:?}");
        assert!(check.detail.contains("(1 cell with step bytes within 2x the"), "{check:?}");
        assert!(failed(Some(within - 2)), "a step larger than twice the cache is held to the bandwidth ceiling");
        // The exemption is from the bandwidth ceiling only: an impossible matmul rate still fails.
        let matmul_bound = RooflineRecord {
            cache_bytes: Some(u64::MAX),
            ..with_gaps(vec![probe(ProbeKind::Matmul, ElementType::F32, 1.0)])
        };
        let mut impossible = cell(1e-3);
        impossible.roofline = cell_roofline(&shape, Precision::Fp32, &impossible, &matmul_bound);
        assert!(!roofline_check(&[impossible], &matmul_bound).unwrap().passed);
        // Recorded only where known.
        let json = serde_json::to_string(&bandwidth_only(None)).unwrap();
        assert!(!json.contains("cache_bytes"), "{json}");
    }
}
