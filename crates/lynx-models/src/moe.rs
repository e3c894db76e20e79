//! Mixture-of-experts MLP: a router picks `k` experts per token, each token's output is the
//! weighted sum of its experts' outputs, plus shared experts every token goes through.
//! Routers: Mixtral/Qwen3-MoE/gpt-oss (softmax, top-k, renormalised; Jiang et al. 2024,
//! arXiv:2401.04088) and DeepSeek-V3's group-limited sigmoid routing with a selection bias
//! (arXiv:2412.19437, section 2.1.2; reference `inference/model.py`, `Gate`).
//!
//! Experts run batched: the (token, expert) pairs are sorted by expert, and each expert that
//! received tokens runs once over all of them. The loop is over experts, never over tokens. The
//! per-expert token counts come to the host to size those batches (one small copy per layer, as
//! in the reference implementations).

use crate::mlp::Mlp;
use crate::weights::WeightSource;
use crate::{accumulation_kind, Convert, ModelError};
use lynx_core::config::{Activation, Moe, Router};
use tch::{Device, Kind, Tensor};

pub struct MoeLayer {
    router: Tensor,
    /// Router bias (gpt-oss) or DeepSeek's selection bias, at accumulation precision.
    router_bias: Option<Tensor>,
    rule: Router,
    experts_per_token: i64,
    experts: Vec<Mlp>,
    /// All shared experts as one MLP of `shared × intermediate` width, as DeepSeek builds them.
    shared: Option<Mlp>,
}

/// The experts chosen for each token and their weights, `[tokens, k]` each.
pub struct Routing {
    pub experts: Tensor,
    pub weights: Tensor,
}

impl MoeLayer {
    /// `intermediate` is each expert's width on this device (divided under tensor parallelism).
    pub fn new(source: &WeightSource, config: &Moe, hidden: i64, intermediate: i64) -> Result<MoeLayer, ModelError> {
        let experts = i64::from(config.num_experts);
        let router_bias = match config.router {
            Router::Softmax { bias: false } => None,
            Router::Softmax { bias: true } | Router::SigmoidGrouped { .. } => {
                Some(source.normal_accumulator(&[experts])?)
            }
        };
        let shared = if config.shared_experts > 0 {
            Some(Mlp::new(source, hidden, intermediate * i64::from(config.shared_experts), false)?)
        } else {
            None
        };
        Ok(MoeLayer {
            router: source.normal(&[experts, hidden])?,
            router_bias,
            rule: config.router.clone(),
            experts_per_token: i64::from(config.experts_per_token),
            experts: (0..experts)
                .map(|_| Mlp::new(source, hidden, intermediate, config.expert_bias))
                .collect::<Result<_, _>>()?,
            shared,
        })
    }

    pub fn to(&self, convert: &Convert) -> Result<MoeLayer, ModelError> {
        Ok(MoeLayer {
            router: convert.weight(&self.router)?,
            router_bias: self.router_bias.as_ref().map(|b| convert.accumulator(b)).transpose()?,
            rule: self.rule.clone(),
            experts_per_token: self.experts_per_token,
            experts: self.experts.iter().map(|e| e.to(convert)).collect::<Result<_, _>>()?,
            shared: self.shared.as_ref().map(|s| s.to(convert)).transpose()?,
        })
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
                let keep = Tensor::f_zeros([tokens, groups], (Kind::Bool, choice.device()))?.f_scatter_value(
                    -1,
                    &best_groups,
                    1.0,
                )?;
                let keep =
                    keep.f_unsqueeze(-1)?.f_expand([tokens, groups, per_group], false)?.f_reshape([tokens, -1])?;
                let choice = choice.f_masked_fill(&keep.f_logical_not()?, f64::NEG_INFINITY)?;
                let (_, experts) = choice.f_topk(k, -1, true, true)?;
                let chosen = scores.f_gather(-1, &experts, false)?;
                let sum = chosen.f_sum_dim_intlist([-1i64].as_slice(), true, acc)?;
                Ok(Routing { experts, weights: chosen.f_div(&sum)?.f_mul_scalar(scaling)? })
            }
        }
    }

    /// The layer's output for `x` of `[batch, n, hidden]`.
    pub fn forward(&self, x: &Tensor, activation: &Activation) -> Result<Tensor, ModelError> {
        let size = x.size();
        let hidden = size[size.len() - 1];
        let flat = x.f_reshape([-1, hidden])?;
        let routing = self.route(&flat)?;
        let mut out = self.run_experts(&flat, &routing, activation)?;
        if let Some(shared) = &self.shared {
            out = out.f_add(&shared.forward(&flat, activation)?)?;
        }
        Ok(out.f_reshape(size.as_slice())?)
    }

    /// Σ over each token's experts of weight · expert(token), experts batched over their tokens.
    pub fn run_experts(&self, x: &Tensor, routing: &Routing, activation: &Activation) -> Result<Tensor, ModelError> {
        let k = self.experts_per_token;
        let flat_experts = routing.experts.f_reshape([-1])?;
        let order = flat_experts.f_argsort_stable(true, 0, false)?;
        let token_of = order.f_floor_divide_scalar(k)?;
        let sorted = x.f_index_select(0, &token_of)?;
        let counts_on_device = flat_experts.f_bincount::<Tensor>(None, self.experts.len() as i64)?;
        let counts = Vec::<i64>::try_from(counts_on_device.f_to_device(Device::Cpu)?)?;
        let mut outputs = Vec::new();
        let mut begin = 0;
        for (expert, &count) in self.experts.iter().zip(&counts) {
            if count > 0 {
                outputs.push(expert.forward(&sorted.f_narrow(0, begin, count)?, activation)?);
                begin += count;
            }
        }
        let weights = routing.weights.f_reshape([-1])?.f_index_select(0, &order)?;
        let weighted = Tensor::f_cat(&outputs, 0)?.f_mul(&weights.f_unsqueeze(1)?.f_to_kind(x.kind())?)?;
        Ok(x.f_zeros_like()?.f_index_add(0, &token_of, &weighted)?)
    }

    pub fn experts(&self) -> &[Mlp] {
        &self.experts
    }
}
