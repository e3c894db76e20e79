//! The roofline as a result records it: the device's measured ceilings (probes), and each
//! cell's step work and its figures as fractions of the ceilings (lynx-analysis's `roofline`
//! computes them; docs/ROOFLINE.md states the formulas).

use crate::value::{Finite, Reported};
use serde::{Deserialize, Serialize};

/// What a probe measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    /// Memory bandwidth, bytes per second.
    Bandwidth,
    /// Matrix-multiply rate, floating-point operations per second.
    Matmul,
}

/// When a probe ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbePhase {
    /// After a short warm-up of its own.
    Burst,
    /// Back to back for a while, after the device reached equilibrium.
    Sustained,
}

impl std::fmt::Display for ProbePhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProbePhase::Burst => "burst",
            ProbePhase::Sustained => "sustained",
        })
    }
}

/// The element type a probe moves or multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ElementType {
    #[serde(rename = "f64")]
    F64,
    #[serde(rename = "f32")]
    F32,
    #[serde(rename = "tf32")]
    Tf32,
    #[serde(rename = "bf16")]
    Bf16,
    #[serde(rename = "fp16")]
    Fp16,
    #[serde(rename = "fp8")]
    Fp8,
    /// No one type: a probe that could not run names none.
    #[serde(rename = "-")]
    None,
}

impl ElementType {
    /// The name as results spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            ElementType::F64 => "f64",
            ElementType::F32 => "f32",
            ElementType::Tf32 => "tf32",
            ElementType::Bf16 => "bf16",
            ElementType::Fp16 => "fp16",
            ElementType::Fp8 => "fp8",
            ElementType::None => "-",
        }
    }
}

impl std::fmt::Display for ElementType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One measured ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// e.g. `native copy`, `native triad`, `torch copy`, `cpu triad`, `torch matmul`,
    /// `cublaslt matmul`.
    pub name: String,
    pub kind: ProbeKind,
    /// The element type (`-` for a probe of no one type that could not run).
    pub dtype: ElementType,
    /// Bandwidth probes are `burst`.
    pub phase: ProbePhase,
    /// Bytes per second (bandwidth) or FLOP per second (matmul); or why there is none.
    pub value: Reported<Finite>,
    /// How it was measured: sizes, repetitions, statistic, timer.
    pub method: String,
}

/// The device's measured ceilings, from every probe that ran.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RooflineRecord {
    pub probes: Vec<Probe>,
    /// What libtorch reaches against the native probes, where both ran.
    #[serde(default)]
    pub gaps: Vec<Gap>,
    /// The device's largest cache (a CPU's last level, a GPU's L2), bytes, where it is known: a
    /// step whose bytes fit in lynx-analysis's `CACHE_RESIDENT_FACTOR` times it may be served from the cache,
    /// so the memory-bandwidth ceiling does not bound it (see lynx-analysis's `roofline_check`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_bytes: Option<u64>,
}

/// libtorch's ceiling against the native one of the same kind (and element type).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// e.g. `bandwidth`, `matmul bf16 burst`.
    pub what: String,
    pub native: Finite,
    pub torch: Finite,
    /// torch / native.
    pub ratio: Finite,
}

/// The work one step does, each term a lower bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepWork {
    /// Weights read: every weight the step's tokens use (for a mixture of experts, the experts
    /// the batch is expected to touch under uniform routing), with the embedding table counted
    /// as the rows looked up.
    pub weight_bytes: Finite,
    /// KV cache read by attention (decode: every cached token of every sequence).
    pub kv_read_bytes: Finite,
    /// KV cache written (decode: one token per sequence; prefill: the whole prompt).
    pub kv_write_bytes: Finite,
    /// The residual stream read and written once per layer, and the logits written.
    pub activation_bytes: Finite,
    pub bytes: Finite,
    /// 2 × (weights each token multiplies) per token; the lm head for the tokens that get logits.
    pub matmul_flops: Finite,
    /// QKᵀ and PV: 4 × heads × head width × keys attended, per query token and layer.
    pub attention_flops: Finite,
    pub flops: Finite,
}

/// A cell's figures against the ceilings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRoofline {
    pub work: StepWork,
    /// Bytes and FLOPs of a median step over the median step time.
    pub achieved_bytes_per_s: Finite,
    pub achieved_flops_per_s: Finite,
    /// Shares of the bandwidth and matmul ceilings, where they were measured.
    pub bandwidth_fraction: Option<Finite>,
    pub matmul_fraction: Option<Finite>,
}
