//! The gated MLP of dense layers and of each expert: down(act(gate(x), up(x))), with the
//! activation the model uses (SwiGLU, Shazeer 2020, arXiv:2002.05202; or gpt-oss's clamped form).

use crate::weights::{Init, WeightSource};
use crate::{Convert, ModelError};
use lynx_core::config::Activation;
use tch::Tensor;

/// One gated MLP. Weights are `[out, in]` as `linear` takes them.
pub struct Mlp {
    pub(crate) gate: Tensor,
    pub(crate) up: Tensor,
    pub(crate) down: Tensor,
    /// Biases of gate, up and down (gpt-oss experts).
    pub(crate) bias: Option<[Tensor; 3]>,
}

/// The Hugging Face names of an MLP's gate, up and down projections.
pub const GATE_UP_DOWN: [&str; 3] = ["gate_proj", "up_proj", "down_proj"];
/// Mixtral's names for them.
pub const W1_W3_W2: [&str; 3] = ["w1", "w3", "w2"];

impl Mlp {
    /// The MLP whose projections are `{prefix}.{names[i]}.weight` (and `.bias` with `bias`).
    pub fn new(
        source: &WeightSource,
        prefix: &str,
        names: [&str; 3],
        hidden: i64,
        intermediate: i64,
        bias: bool,
    ) -> Result<Mlp, ModelError> {
        let [gate, up, down] = names;
        let weight = |name: &str, shape: &[i64]| source.tensor(&format!("{prefix}.{name}.weight"), shape, Init::Normal);
        let bias_of = |name: &str, width: i64| source.tensor(&format!("{prefix}.{name}.bias"), &[width], Init::Normal);
        Ok(Mlp {
            gate: weight(gate, &[intermediate, hidden])?,
            up: weight(up, &[intermediate, hidden])?,
            down: weight(down, &[hidden, intermediate])?,
            bias: if bias {
                Some([bias_of(gate, intermediate)?, bias_of(up, intermediate)?, bias_of(down, hidden)?])
            } else {
                None
            },
        })
    }

    pub fn to(&self, convert: &Convert) -> Result<Mlp, ModelError> {
        Ok(Mlp {
            gate: convert.weight(&self.gate)?,
            up: convert.weight(&self.up)?,
            down: convert.weight(&self.down)?,
            bias: match &self.bias {
                Some([g, u, d]) => Some([convert.weight(g)?, convert.weight(u)?, convert.weight(d)?]),
                None => None,
            },
        })
    }

    pub fn forward(&self, x: &Tensor, activation: &Activation) -> Result<Tensor, ModelError> {
        let bias = |i: usize| self.bias.as_ref().map(|b| &b[i]);
        let gate = x.f_linear(&self.gate, bias(0))?;
        let up = x.f_linear(&self.up, bias(1))?;
        let hidden = activate(&gate, &up, activation)?;
        Ok(hidden.f_linear(&self.down, bias(2))?)
    }
}

/// The gated activation of `gate` and `up`.
pub fn activate(gate: &Tensor, up: &Tensor, activation: &Activation) -> Result<Tensor, ModelError> {
    match *activation {
        Activation::Swiglu => Ok(gate.f_silu()?.f_mul(up)?),
        Activation::SwigluClamped { alpha, limit } => {
            // gpt-oss (openai/gpt-oss, torch/model.py `swiglu`): gate clamped from above, up on
            // both sides; gate · sigmoid(alpha · gate) · (up + 1).
            let gate = gate.f_clamp_max(limit)?;
            let up = up.f_clamp(-limit, limit)?;
            let glu = gate.f_mul(&gate.f_mul_scalar(alpha)?.f_sigmoid()?)?;
            Ok(glu.f_mul(&up.f_add_scalar(1.0)?)?)
        }
    }
}
