//! Reference LLM models as tch modules: the KV cache and the prefill and decode steps the runner
//! times, for every architecture of the catalogue.
//!
//! One file per architecture family, assembled by [`Model`]: `gqa` (dense grouped-query
//! attention), `mla` (multi-head latent attention), `moe` (mixture of experts), with `mlp`,
//! `rope` and `weights` shared by them. Weights are drawn from a seeded generator at the model's
//! shape and initialiser scale (never zeros: a zero matmul runs measurably faster than a real one).
//! Every tensor operation uses tch's fallible `f_*` calls, so a failure (out of memory, an
//! unsupported precision) comes back as an error for the cell instead of a panic that would lose
//! the run.

pub mod experts;
pub mod gqa;
pub mod linear;
pub mod mla;
pub mod mlp;
mod model;
pub mod moe;
pub mod rope;
pub mod runtime;
pub mod weights;

use lynx_schema::config::Precision;
use tch::Kind;

pub use model::{KvCache, Logits, Model};
pub use weights::Checkpoint;

/// Why a model could not be built or stepped.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    #[error("KV cache holds {capacity} tokens per sequence; {needed} are needed")]
    CacheFull { capacity: i64, needed: i64 },
    #[error("{0}")]
    Shape(String),
    #[error("{0}")]
    Unsupported(String),
    /// ATen's `_fused_sdp_choice` answered with no kernel (its `error`, or a number it does not
    /// define).
    #[error("libtorch has no attention kernel for these shapes (it answered {0})")]
    NoAttentionKernel(i64),
    /// A checkpoint that cannot serve the model: missing, misshapen or quantised tensors.
    #[error("weights: {0}")]
    Weights(String),
}

/// Run `draw` holding the lock on libtorch's global random generator, after seeding it with
/// `seed` when one is given. libtorch has one generator per process (tch exposes no other), so a
/// seeded sequence of draws is reproducible only if no other thread draws in between: every
/// draw lynx makes goes through here.
pub fn with_generator<T>(seed: Option<u64>, draw: impl FnOnce() -> T) -> T {
    static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _held = GENERATOR.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(seed) = seed {
        // libtorch seeds with an i64; the bit pattern is what matters.
        tch::manual_seed(seed as i64);
    }
    draw()
}

/// The element type reductions and softmaxes accumulate in: fp32, or fp64 in the float64
/// reference the parity check compares against.
pub fn accumulation_kind(kind: Kind) -> Kind {
    if kind == Kind::Double {
        Kind::Double
    } else {
        Kind::Float
    }
}

/// Copies a model's tensors to another device and element type.
pub struct Convert {
    pub device: tch::Device,
    pub kind: Kind,
    /// The e4m3 format the blocks' linear layers become, if they do.
    pub fp8: Option<linear::Fp8Format>,
}

impl Convert {
    /// A weight, in the target element type.
    pub fn weight(&self, t: &tch::Tensor) -> Result<tch::Tensor, ModelError> {
        Ok(t.f_to_device(self.device)?.f_to_kind(self.kind)?)
    }

    /// A tensor kept at accumulation precision (sink logits, router biases, RoPE frequencies).
    pub fn accumulator(&self, t: &tch::Tensor) -> Result<tch::Tensor, ModelError> {
        Ok(t.f_to_device(self.device)?.f_to_kind(accumulation_kind(self.kind))?)
    }

    pub fn optional(&self, t: &Option<tch::Tensor>) -> Result<Option<tch::Tensor>, ModelError> {
        t.as_ref().map(|t| self.weight(t)).transpose()
    }
}

/// The libtorch element type of a precision's activations (and of the weights outside linear
/// layers): bf16 under fp8 weights.
pub fn kind_of(precision: Precision) -> Kind {
    match precision {
        Precision::Fp32 => Kind::Float,
        Precision::Bf16 | Precision::Fp8 => Kind::BFloat16,
        Precision::Fp16 => Kind::Half,
    }
}

/// How a model of `precision` is held on `device`: activation kind and whether linear layers
/// are e4m3, or why `device` cannot run it.
pub fn holding(precision: Precision, device: tch::Device) -> Result<Convert, ModelError> {
    let fp8 = (precision == Precision::Fp8).then(|| linear::fp8_format(device)).transpose()?;
    Ok(Convert { device, kind: kind_of(precision), fp8 })
}
