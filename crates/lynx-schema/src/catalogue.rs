//! What `lynx models` reports about each model shape.

use crate::config::{Attention, ModelShape, Precision};
use serde::Serialize;
use std::collections::BTreeMap;

/// A model's size at a glance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSummary {
    pub name: String,
    /// `gqa` or `mla`.
    pub attention: &'static str,
    pub layers: u32,
    /// For mixtures of experts, how many there are and how many each token uses.
    pub experts: Option<ExpertCount>,
    pub parameters: u64,
    /// Parameters one token uses, the embedding table included.
    pub active_parameters: u64,
    /// The input embedding table.
    pub embedding_parameters: u64,
    /// Weight bytes at each precision.
    pub weight_bytes: BTreeMap<String, u64>,
    /// KV-cache bytes one more token of context adds, at each precision.
    pub kv_bytes_per_token: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExpertCount {
    /// Routed experts per MoE layer.
    pub routed: u32,
    /// Routed experts each token goes to.
    pub per_token: u32,
    /// Shared experts every token goes through.
    pub shared: u32,
}

impl ModelSummary {
    pub fn of(shape: &ModelShape) -> ModelSummary {
        let count = shape.parameters();
        let per_precision =
            |f: &dyn Fn(Precision) -> u64| Precision::ALL.iter().map(|&p| (p.to_string(), f(p))).collect();
        ModelSummary {
            name: shape.name.clone(),
            attention: match shape.attention {
                Attention::Gqa(_) => "gqa",
                Attention::Mla(_) => "mla",
            },
            layers: shape.num_layers,
            experts: shape.moe.as_ref().map(|moe| ExpertCount {
                routed: moe.num_experts,
                per_token: moe.experts_per_token,
                shared: moe.shared_experts,
            }),
            parameters: count.total,
            active_parameters: count.active,
            embedding_parameters: count.embedding,
            weight_bytes: per_precision(&|p| shape.weight_bytes(p)),
            kv_bytes_per_token: per_precision(&|p| shape.kv_bytes_per_token(p)),
        }
    }
}
