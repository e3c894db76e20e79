//! Reference LLM models as tch modules: the KV cache and the prefill and decode steps the runner
//! times.
//!
//! Weights are drawn from a seeded generator at the model's shape and realistic scale (never
//! zeros: a zero matmul runs measurably faster than a real one). Every tensor operation uses
//! tch's fallible `f_*` calls, so a failure (out of memory, an unsupported precision) comes back
//! as an error for the cell instead of a panic that would lose the run.

pub mod llama;

use lynx_core::config::Precision;
use tch::Kind;

pub use llama::{KvCache, LlamaModel, Logits};

/// Why a model could not be built or stepped.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
    #[error("KV cache holds {capacity} tokens per sequence; {needed} are needed")]
    CacheFull { capacity: i64, needed: i64 },
    #[error("{0}")]
    Shape(String),
}

/// The libtorch element type of a precision.
pub fn kind_of(precision: Precision) -> Kind {
    match precision {
        Precision::Fp32 => Kind::Float,
        Precision::Bf16 => Kind::BFloat16,
        Precision::Fp16 => Kind::Half,
    }
}
