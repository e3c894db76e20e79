//! Mixture-of-experts MLP: a router picks `k` experts per token, each token's output is the
//! weighted sum of its experts' outputs, plus shared experts every token goes through.
//! Routers: Mixtral/Qwen3-MoE/gpt-oss (softmax, top-k, renormalised; Jiang et al. 2024,
//! arXiv:2401.04088) and DeepSeek-V3's group-limited sigmoid routing with a selection bias
//! (arXiv:2412.19437, section 2.1.2; reference `inference/model.py`, `Gate`).
//!
//! Experts run stacked ([`crate::experts`]): the pairs sorted by expert through one grouped
//! matmul, or each pair through its gathered expert, or every token through every expert,
//! chosen from the step's shape. Nothing in a layer waits on the host: the per-expert token
//! counts the reference implementations copy to the host stay on the device.

use crate::experts::{ExpertBank, ExpertKernel};
use crate::linear::Linear;
use crate::mlp::{MergedMlp, Mlp, GATE_UP_DOWN, W1_W3_W2};
use crate::scalar_call;
use crate::weights::{Init, WeightSource};
use crate::Checkpoint;
use crate::{accumulation_kind, Convert, ModelError};
use lynx_schema::config::{Activation, Moe, Router};
use std::sync::Mutex;
use tch::{Kind, Tensor};

pub struct MoeLayer {
    router: Tensor,
    /// Router bias (gpt-oss) or DeepSeek's selection bias, at accumulation precision.
    router_bias: Option<Tensor>,
    rule: Router,
    experts_per_token: i64,
    experts: ExpertBank,
    /// All shared experts as one MLP of `shared × intermediate` width, as DeepSeek builds them.
    shared: Option<MergedMlp>,
    /// While a step is tallied ([`crate::Model::tally_experts`]), the distinct experts each of the
    /// layer's calls routed to; `None` otherwise.
    tally: Mutex<Option<Vec<i64>>>,
}

/// Expert `e` of gpt-oss's stacked expert tensors, read alone and split into its gate, up and
/// down projections.
fn stacked_expert(
    source: &WeightSource,
    checkpoint: &Checkpoint,
    prefix: &str,
    e: i64,
    hidden: i64,
    width: i64,
) -> Result<Mlp, ModelError> {
    let read = |n: &str, shape: &[i64]| checkpoint.get_at(&format!("{prefix}.experts.{n}"), e, shape);
    let pair = read("gate_up_proj", &[hidden, 2 * width])?;
    let pair_bias = read("gate_up_proj_bias", &[2 * width])?;
    let down = read("down_proj", &[width, hidden])?;
    let down_bias = read("down_proj_bias", &[hidden])?;
    // Even columns are the gate, odd ones the up projection; stored [in, out].
    let half = |t: &Tensor, dim: i64, first: i64| t.f_slice(dim, first, 2 * width, 2);
    let linear = |weight: Tensor, bias: Tensor| -> Result<Linear, ModelError> {
        Linear::new(source.convert(&weight, source.kind)?, Some(source.convert(&bias, source.kind)?), source.fp8)
    };
    Ok(Mlp {
        gate: linear(half(&pair, 1, 0)?.f_transpose(0, 1)?, half(&pair_bias, 0, 0)?)?,
        up: linear(half(&pair, 1, 1)?.f_transpose(0, 1)?, half(&pair_bias, 0, 1)?)?,
        down: linear(down.f_transpose(0, 1)?, down_bias)?,
    })
}

/// The experts chosen for each token and their weights, `[tokens, k]` each.
pub struct Routing {
    pub experts: Tensor,
    pub weights: Tensor,
}

/// How a checkpoint names a mixture of experts' tensors (`p` is the layer's MLP prefix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoeLayout {
    /// Qwen3-MoE and DeepSeek-V3 (`p` = `model.layers.N.mlp`): router `p.gate.weight` (DeepSeek's
    /// selection bias `p.gate.e_score_correction_bias`), experts `p.experts.E.{gate,up,down}_proj`,
    /// shared experts `p.shared_experts.{gate,up,down}_proj`.
    Standard,
    /// Mixtral (`p` = `model.layers.N.block_sparse_moe`): router `p.gate.weight`, experts
    /// `p.experts.E.w1` (gate), `w3` (up), `w2` (down).
    Mixtral,
    /// gpt-oss (`p` = `model.layers.N.mlp`): router `p.router.{weight,bias}`; experts stacked,
    /// `p.experts.gate_up_proj` `[experts, hidden, 2 · width]` with gate and up interleaved along
    /// the last dimension, `gate_up_proj_bias` `[experts, 2 · width]`, `down_proj` `[experts,
    /// width, hidden]`, `down_proj_bias` `[experts, hidden]`.
    GptOss,
}

impl MoeLayer {
    /// The layer whose tensors `layout` names under `prefix`; `intermediate` is each expert's
    /// width on this device (divided under tensor parallelism).
    pub fn new(
        source: &WeightSource,
        prefix: &str,
        layout: MoeLayout,
        config: &Moe,
        hidden: i64,
        intermediate: i64,
    ) -> Result<MoeLayer, ModelError> {
        let experts = i64::from(config.num_experts);
        let router_name = if layout == MoeLayout::GptOss { "router" } else { "gate" };
        let router_bias = match config.router {
            Router::Softmax { bias: false } => None,
            Router::Softmax { bias: true } => {
                Some(source.accumulator(&format!("{prefix}.{router_name}.bias"), &[experts])?)
            }
            Router::SigmoidGrouped { .. } => {
                Some(source.accumulator(&format!("{prefix}.gate.e_score_correction_bias"), &[experts])?)
            }
        };
        let shared = if config.shared_experts > 0 {
            let width = intermediate * i64::from(config.shared_experts);
            let shared = Mlp::new(source, &format!("{prefix}.shared_experts"), GATE_UP_DOWN, hidden, width, false)?;
            Some(MergedMlp::new(shared)?)
        } else {
            None
        };
        // Experts are drawn or read dense, one by one in the order the reference draws them, and
        // stacked as they come (and quantised per expert for fp8).
        let dense = source.clone().with_fp8(None);
        let names = if layout == MoeLayout::Mixtral { W1_W3_W2 } else { GATE_UP_DOWN };
        let bank = match (layout, source.loaded()) {
            (MoeLayout::GptOss, Some(checkpoint)) => ExpertBank::new(
                experts,
                |e| stacked_expert(&dense, checkpoint, prefix, e, hidden, intermediate),
                source.kind,
                source.fp8,
            )?,
            _ => ExpertBank::new(
                experts,
                |e| {
                    let prefix = format!("{prefix}.experts.{e}");
                    Mlp::new(&dense, &prefix, names, hidden, intermediate, config.expert_bias)
                },
                source.kind,
                source.fp8,
            )?,
        };
        Ok(MoeLayer {
            router: source.tensor(&format!("{prefix}.{router_name}.weight"), &[experts, hidden], Init::Normal)?,
            router_bias,
            rule: config.router.clone(),
            experts_per_token: i64::from(config.experts_per_token),
            experts: bank,
            shared,
            tally: Mutex::new(None),
        })
    }

    pub fn to(&self, convert: &Convert) -> Result<MoeLayer, ModelError> {
        Ok(MoeLayer {
            router: convert.weight(&self.router)?,
            router_bias: self.router_bias.as_ref().map(|b| convert.accumulator(b)).transpose()?,
            rule: self.rule.clone(),
            experts_per_token: self.experts_per_token,
            experts: self.experts.to(convert)?,
            shared: self.shared.as_ref().map(|s| s.to(convert)).transpose()?,
            tally: Mutex::new(None),
        })
    }

    /// Start (`on`) or end tallying the distinct experts each call routes to; ending gives the
    /// tally.
    pub(crate) fn tallying(&self, on: bool) -> Vec<i64> {
        let mut tally = self.tally.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::replace(&mut *tally, on.then(Vec::new)).unwrap_or_default()
    }

    /// Count the distinct experts `routing` chose, where the layer is tallying. The count is read
    /// on the host, so it waits for the device: a tallied step is an untimed one.
    fn tally_routing(&self, routing: &Routing) -> Result<(), ModelError> {
        let mut tally = self.tally.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(counts) = tally.as_mut() {
            let chosen = routing.experts.f_reshape([-1])?;
            let seen = Tensor::f_zeros([self.router.size()[0]], (Kind::Float, chosen.device()))?;
            let seen = scalar_call(|| seen.f_index_fill(0, &chosen, 1.0))?;
            counts.push(seen.f_sum(Kind::Float)?.double_value(&[]).round() as i64);
        }
        Ok(())
    }

    /// Each token's experts and weights, for `x` of `[tokens, hidden]`.
    pub fn route(&self, x: &Tensor) -> Result<Routing, ModelError> {
        let acc = accumulation_kind(x.kind());
        let logits = x.f_linear::<Tensor>(&self.router, None)?.f_to_kind(acc)?;
        let k = self.experts_per_token;
        match self.rule {
            Router::Softmax { .. } => {
                let logits = match &self.router_bias {
                    Some(bias) => logits.f_add(bias)?,
                    None => logits,
                };
                let (top, experts) = logits.f_topk(k, -1, true, true)?;
                // Softmax over the chosen logits equals the full softmax renormalised over them.
                Ok(Routing { experts, weights: top.f_softmax(-1, acc)? })
            }
            Router::SigmoidGrouped { groups, topk_groups, scaling } => {
                let scores = logits.f_sigmoid()?;
                let bias = self.router_bias.as_ref().expect("grouped routers have a selection bias");
                let choice = scores.f_add(bias)?;
                let tokens = choice.size()[0];
                let groups = i64::from(groups);
                let per_group = choice.size()[1] / groups;
                // A group's score is the sum of its two best experts' (DeepSeek-V3 `Gate`).
                let grouped = choice.f_view([tokens, groups, per_group])?;
                let group_scores = grouped.f_topk(2.min(per_group), -1, true, false)?.0.f_sum_dim_intlist(
                    [-1i64].as_slice(),
                    false,
                    acc,
                )?;
                let (_, best_groups) = group_scores.f_topk(i64::from(topk_groups), -1, true, false)?;
                let none = Tensor::f_zeros([tokens, groups], (Kind::Bool, choice.device()))?;
                let keep = scalar_call(|| none.f_scatter_value(-1, &best_groups, 1.0))?;
                let keep =
                    keep.f_unsqueeze(-1)?.f_expand([tokens, groups, per_group], false)?.f_reshape([tokens, -1])?;
                let dropped = keep.f_logical_not()?;
                let choice = scalar_call(|| choice.f_masked_fill(&dropped, f64::NEG_INFINITY))?;
                let (_, experts) = choice.f_topk(k, -1, true, true)?;
                let chosen = scores.f_gather(-1, &experts, false)?;
                let sum = chosen.f_sum_dim_intlist([-1i64].as_slice(), true, acc)?;
                let weights = chosen.f_div(&sum)?;
                Ok(Routing { experts, weights: scalar_call(|| weights.f_mul_scalar(scaling))? })
            }
        }
    }

    /// The layer's output for `x` of `[batch, n, hidden]`.
    pub fn forward(&self, x: &Tensor, activation: &Activation) -> Result<Tensor, ModelError> {
        let size = x.size();
        let hidden = size[size.len() - 1];
        let flat = x.f_reshape([-1, hidden])?;
        let routing = self.route(&flat)?;
        self.tally_routing(&routing)?;
        let mut out = self.run_experts(&flat, &routing, activation)?;
        if let Some(shared) = &self.shared {
            out = out.f_add(&shared.forward(&flat, activation)?)?;
        }
        Ok(out.f_reshape(size.as_slice())?)
    }

    /// Σ over each token's experts of weight · expert(token), run the way the step's shape and
    /// the device call for.
    pub fn run_experts(&self, x: &Tensor, routing: &Routing, activation: &Activation) -> Result<Tensor, ModelError> {
        self.run_experts_with(x, routing, activation, self.kernel(x.size()[0]))
    }

    /// How a step of `tokens` tokens runs the experts.
    pub fn kernel(&self, tokens: i64) -> ExpertKernel {
        self.experts.kernel(tokens * self.experts_per_token)
    }

    /// The same, run by `kernel`.
    pub fn run_experts_with(
        &self,
        x: &Tensor,
        routing: &Routing,
        activation: &Activation,
        kernel: ExpertKernel,
    ) -> Result<Tensor, ModelError> {
        self.experts.run(x, (&routing.experts, &routing.weights), activation, kernel)
    }

    /// How the layer's e4m3 projections scale their inputs: shared and routed experts'.
    /// Its e4m3 layers widened once (see [`Linear::widen`]): how many were e4m3.
    pub(crate) fn widen_fp8(&self) -> Result<usize, ModelError> {
        let mut widened = usize::from(self.experts.widen()?);
        for linear in self.shared.iter().flat_map(MergedMlp::linears) {
            widened += usize::from(linear.widen()?);
        }
        Ok(widened)
    }

    pub(crate) fn fp8_inputs(&self) -> Vec<&crate::linear::Fp8Input> {
        let shared = self.shared.iter().flat_map(MergedMlp::linears).filter_map(Linear::fp8_input);
        shared.chain(self.experts.fp8_inputs()).collect()
    }

    /// Routed expert `e` alone, as an MLP.
    pub fn expert(&self, e: i64) -> Result<Mlp, ModelError> {
        self.experts.expert(e)
    }
}
