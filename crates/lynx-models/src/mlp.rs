//! The gated MLP of dense layers and of each expert: down(act(gate(x), up(x))), with the
//! activation the model uses (SwiGLU, Shazeer 2020, arXiv:2002.05202; or gpt-oss's clamped form).

use crate::linear::Linear;
use crate::scalar_call;
use crate::weights::WeightSource;
use crate::{Convert, ModelError};
use lynx_schema::config::Activation;
use tch::Tensor;

/// One gated MLP.
pub struct Mlp {
    pub(crate) gate: Linear,
    pub(crate) up: Linear,
    pub(crate) down: Linear,
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
        Ok(Mlp {
            gate: source.linear(&format!("{prefix}.{gate}"), intermediate, hidden, bias)?,
            up: source.linear(&format!("{prefix}.{up}"), intermediate, hidden, bias)?,
            down: source.linear(&format!("{prefix}.{down}"), hidden, intermediate, bias)?,
        })
    }

    pub fn to(&self, convert: &Convert) -> Result<Mlp, ModelError> {
        Ok(Mlp { gate: self.gate.to(convert)?, up: self.up.to(convert)?, down: self.down.to(convert)? })
    }

    pub fn forward(&self, x: &Tensor, activation: &Activation) -> Result<Tensor, ModelError> {
        let hidden = activate(&self.gate.forward(x)?, &self.up.forward(x)?, activation)?;
        self.down.forward(&hidden)
    }
}

/// A dense block's MLP, or a MoE layer's shared experts, as it runs: the gate and up projections
/// as one layer ([`Linear::concat`], gate's features first), then down. Routed experts keep
/// their three projections ([`Mlp`]), stacked across experts instead.
pub struct MergedMlp {
    gate_up: Linear,
    down: Linear,
}

impl MergedMlp {
    pub fn new(mlp: Mlp) -> Result<MergedMlp, ModelError> {
        Ok(MergedMlp { gate_up: Linear::concat(&[&mlp.gate, &mlp.up])?, down: mlp.down })
    }

    pub fn to(&self, convert: &Convert) -> Result<MergedMlp, ModelError> {
        Ok(MergedMlp { gate_up: self.gate_up.to(convert)?, down: self.down.to(convert)? })
    }

    pub fn forward(&self, x: &Tensor, activation: &Activation) -> Result<Tensor, ModelError> {
        let both = self.gate_up.forward(x)?;
        let width = self.down.in_features();
        let hidden = activate(&both.f_narrow(-1, 0, width)?, &both.f_narrow(-1, width, width)?, activation)?;
        self.down.forward(&hidden)
    }

    /// Its layers: the merged gate/up, then down.
    pub fn linears(&self) -> [&Linear; 2] {
        [&self.gate_up, &self.down]
    }
}

/// The gated activation of `gate` and `up`.
pub fn activate(gate: &Tensor, up: &Tensor, activation: &Activation) -> Result<Tensor, ModelError> {
    match *activation {
        Activation::Swiglu => Ok(gate.f_silu()?.f_mul(up)?),
        Activation::SwigluClamped { alpha, limit } => {
            // gpt-oss (openai/gpt-oss, torch/model.py `swiglu`): gate clamped from above, up on
            // both sides; gate · sigmoid(alpha · gate) · (up + 1).
            let gate = scalar_call(|| gate.f_clamp_max(limit))?;
            let up = scalar_call(|| up.f_clamp(-limit, limit))?;
            let glu = gate.f_mul(&scalar_call(|| gate.f_mul_scalar(alpha))?.f_sigmoid()?)?;
            Ok(glu.f_mul(&scalar_call(|| up.f_add_scalar(1.0))?)?)
        }
    }
}
