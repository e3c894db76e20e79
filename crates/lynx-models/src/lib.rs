//! Reference LLM models as tch modules: the KV cache and the prefill and decode steps the runner
//! times, for every architecture of the catalogue.
//!
//! One file per architecture family, assembled by [`Model`]: `gqa` (dense grouped-query
//! attention), `mla` (multi-head latent attention), `moe` (mixture of experts), with `mlp`,
//! `rope`, `weights` and `checkpoint` shared by them. Weights are drawn from a seeded generator at the model's
//! shape and initialiser scale (never zeros: a zero matmul runs measurably faster than a real one).
//! Every tensor operation uses tch's fallible `f_*` calls, so a failure (out of memory, an
//! unsupported precision) comes back as an error for the cell instead of a panic that would lose
//! the run; a call that takes a `Scalar` goes through [`scalar_call`] as well, which tch needs.

pub mod checkpoint;
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

pub use checkpoint::Checkpoint;
pub use model::{KvCache, Logits, Model};

/// Why a model could not be built or stepped.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The first line of libtorch's message (the rest is a C++ trace no reader wants).
    #[error("libtorch: {}", first_line(.0))]
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

/// The first line of a libtorch error, without tch's own prefix: one readable line for a check
/// detail or a cell's message.
pub fn first_line(error: &tch::TchError) -> String {
    let text = match error {
        tch::TchError::Torch(message) => message.clone(),
        other => other.to_string(),
    };
    text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned()
}

thread_local! {
    /// Set while [`scalar_call`] runs a call, so that the panic it catches is not printed.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run a libtorch call that takes a `Scalar` (`f_mul_scalar`, `f_masked_fill`, `f_clamp`,
/// `f_arange`, `f_full`, `f_fill_`...) so that its failure is an `Err`, as for every other call.
///
/// tch 0.24 drops such a call's temporary `Scalar` before it reads the call's error, and that
/// drop unwraps any pending error (`unsafe_torch!` in `Scalar`'s `Drop`): an out-of-memory inside
/// the call panics, with a backtrace, instead of returning `Err`. This catches that panic (quietly:
/// the process's panic hook is not called for it) and returns libtorch's message as the error.
pub fn scalar_call<T>(call: impl FnOnce() -> Result<T, tch::TchError>) -> Result<T, tch::TchError> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(|quiet| quiet.get()) {
                previous(info);
            }
        }));
    });
    let was = QUIET.with(|quiet| quiet.replace(true));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
    QUIET.with(|quiet| quiet.set(was));
    outcome.unwrap_or_else(|payload| {
        let text = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        Err(tch::TchError::Torch(torch_message(&text)))
    })
}

/// libtorch's message inside the text of tch's panic (`called `Result::unwrap()` on an `Err`
/// value: Torch("…")`), its escapes undone as far as its first line.
fn torch_message(panic: &str) -> String {
    let Some(start) = panic.find("Torch(\"") else { return panic.to_owned() };
    let inner = &panic[start + 7..];
    let first = inner.split("\\n").next().unwrap_or(inner);
    first.trim_end_matches(")").trim_end_matches('"').replace("\\\"", "\"")
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

#[cfg(test)]
mod scalar_tests {
    use super::*;
    use tch::{Device, Tensor};

    /// Regression (issue 17): a failing call that takes a `Scalar` panicked inside tch (an
    /// allocation too large for memory, a mask of the wrong shape); through `scalar_call` it is
    /// an `Err` holding libtorch's first line, and nothing is printed.
    #[test]
    fn a_failing_scalar_call_is_an_error_not_a_panic() {
        let huge = scalar_call(|| Tensor::f_full([1 << 50], 1.5, (Kind::Float, Device::Cpu)));
        let error = huge.expect_err("an allocation of 4 PiB cannot succeed");
        let line = first_line(&error);
        assert!(!line.is_empty() && !line.contains('\n') && !line.contains("Exception raised"), "{line}");
        let x = Tensor::f_zeros([2, 3], (Kind::Float, Device::Cpu)).unwrap();
        let mask = Tensor::f_ones([5], (Kind::Bool, Device::Cpu)).unwrap();
        let error = scalar_call(|| x.f_masked_fill(&mask, 0.0)).expect_err("shapes that do not broadcast");
        assert!(first_line(&error).contains("size"), "{error}");
        let fine = scalar_call(|| x.f_add_scalar(2.0)).unwrap();
        assert_eq!(fine.sum(Kind::Float).double_value(&[]), 12.0);
        // The model error carries the same single line.
        let message = ModelError::Torch(error).to_string();
        assert!(message.starts_with("libtorch: ") && message.lines().count() == 1, "{message}");
    }
}
