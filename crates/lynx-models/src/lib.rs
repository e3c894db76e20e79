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

pub mod gqa;
pub mod mla;
pub mod mlp;
mod model;
pub mod moe;
pub mod rope;
pub mod weights;

use lynx_core::config::Precision;
use tch::Kind;

pub use model::{KvCache, Logits, Model};

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
}

/// The libtorch element type of a precision.
pub fn kind_of(precision: Precision) -> Result<Kind, ModelError> {
    match precision {
        Precision::Fp32 => Ok(Kind::Float),
        Precision::Bf16 => Ok(Kind::BFloat16),
        Precision::Fp16 => Ok(Kind::Half),
        Precision::Fp8 => Err(ModelError::Unsupported(
            "fp8 (e4m3 weights through libtorch's scaled matmul) is not implemented yet".to_owned(),
        )),
    }
}
