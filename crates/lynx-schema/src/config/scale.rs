//! Running a model too large for one device: a subset of its layers, extrapolated to full depth,
//! and the shard one device holds under tensor parallelism.

use super::model::{Attention, ModelShape};
use serde::{Deserialize, Serialize};

/// How much of the model a run measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scale {
    /// Measure this many of the model's layers (with the full embedding and lm head) and
    /// extrapolate to full depth; all layers when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<u32>,
    /// Measure the shard one device holds under `tp`-way tensor parallelism.
    #[serde(default = "one")]
    pub tp: u32,
}

fn one() -> u32 {
    1
}

impl Default for Scale {
    fn default() -> Self {
        Scale { layers: None, tp: 1 }
    }
}

impl Scale {
    pub fn is_full(&self) -> bool {
        self.layers.is_none() && self.tp == 1
    }
}

/// The shape one device runs for `scale` of `shape`, or why it cannot be cut that way.
///
/// Layers: `k` of them, with as many dense layers as the model's share of dense layers gives
/// (rounded, at least one of each kind the model has when `k` ≥ 2), so a mixture-of-experts
/// model keeps its mix; sliding-window layouts keep their pattern from layer 0.
///
/// Tensor parallelism, as Megatron-LM and vLLM shard a decoder: query heads, the dense MLP's and
/// each expert's intermediate width, and the vocabulary (embedding and lm head) are divided by
/// `tp`; key/value heads too, or replicated to one per device when there are fewer than `tp`;
/// MLA's latent projections are replicated and its heads divided.
pub fn shard(shape: &ModelShape, scale: &Scale) -> Result<ModelShape, String> {
    let mut cut = shape.clone();
    if let Some(k) = scale.layers {
        if k == 0 || k > shape.num_layers {
            return Err(format!("scale.layers ({k}) must be from 1 to the model's {} layers", shape.num_layers));
        }
        cut.num_layers = k;
        if let Some(moe) = &mut cut.moe {
            let dense = shape.dense_layers();
            let share = (f64::from(k) * f64::from(dense) / f64::from(shape.num_layers)).round() as u32;
            moe.first_dense_layers =
                if dense > 0 && dense < shape.num_layers && k >= 2 { share.clamp(1, k - 1) } else { share.min(k) };
        }
    }
    let t = scale.tp;
    if t == 0 {
        return Err("scale.tp must be at least 1".to_owned());
    }
    if t == 1 {
        return Ok(cut);
    }
    let divide = |what: &str, value: u32| -> Result<u32, String> {
        if value.is_multiple_of(t) {
            Ok(value / t)
        } else {
            Err(format!("{what} ({value}) is not divisible by scale.tp ({t})"))
        }
    };
    match &mut cut.attention {
        Attention::Gqa(gqa) => {
            gqa.head_dim = Some(shape.head_dim());
            gqa.num_heads = divide("attention.num_heads", gqa.num_heads)?;
            gqa.num_kv_heads = if gqa.num_kv_heads >= t {
                divide("attention.num_kv_heads", gqa.num_kv_heads)?
            } else if t.is_multiple_of(gqa.num_kv_heads) {
                1
            } else {
                return Err(format!(
                    "attention.num_kv_heads ({}) neither divides nor is divided by scale.tp ({t})",
                    gqa.num_kv_heads
                ));
            };
        }
        Attention::Mla(mla) => mla.num_heads = divide("attention.num_heads", mla.num_heads)?,
    }
    if let Some(mlp) = &mut cut.mlp {
        mlp.intermediate_size = divide("mlp.intermediate_size", mlp.intermediate_size)?;
    }
    if let Some(moe) = &mut cut.moe {
        moe.intermediate_size = divide("moe.intermediate_size", moe.intermediate_size)?;
    }
    // Vocabulary-parallel embedding and lm head pad the vocabulary up to a multiple of tp.
    cut.vocab_size = cut.vocab_size.div_ceil(t);
    Ok(cut)
}

/// For each layer of `cut` (a layer subset of `full`, as [`shard`] or the parity check makes
/// it), the layer of `full` whose weights it stands for: its leading dense layers are the
/// model's first dense layers, its MoE layers the model's first MoE layers.
pub fn source_layers(full: &ModelShape, cut: &ModelShape) -> Vec<u32> {
    let dense = cut.dense_layers();
    (0..cut.num_layers).map(|i| if i < dense { i } else { full.dense_layers() + (i - dense) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(name: &str) -> ModelShape {
        let path = format!("{}/../../models/{name}.toml", env!("CARGO_MANIFEST_DIR"));
        ModelShape::from_toml(&std::fs::read_to_string(&path).unwrap(), &path).unwrap()
    }

    #[test]
    fn a_layer_subset_keeps_the_dense_and_moe_mix() {
        let deepseek = load("deepseek-r1");
        let cut = shard(&deepseek, &Scale { layers: Some(4), tp: 1 }).unwrap();
        assert_eq!((cut.num_layers, cut.dense_layers(), cut.moe_layers()), (4, 1, 3));
        let cut = shard(&deepseek, &Scale { layers: Some(40), tp: 1 }).unwrap();
        assert_eq!(cut.dense_layers(), 2, "round(40 × 3 / 61)");
        assert_eq!(
            source_layers(&deepseek, &shard(&deepseek, &Scale { layers: Some(4), tp: 1 }).unwrap()),
            [0, 3, 4, 5]
        );
        let mixtral = shard(&load("mixtral-8x7b"), &Scale { layers: Some(2), tp: 1 }).unwrap();
        assert_eq!(mixtral.dense_layers(), 0);
        assert!(shard(&deepseek, &Scale { layers: Some(62), tp: 1 }).is_err());
    }

    #[test]
    fn a_tensor_parallel_shard_divides_heads_widths_and_vocabulary() {
        let llama = load("llama-3.3-70b");
        let shard8 = shard(&llama, &Scale { layers: None, tp: 8 }).unwrap();
        let Attention::Gqa(gqa) = &shard8.attention else { panic!() };
        assert_eq!((gqa.num_heads, gqa.num_kv_heads, gqa.head_dim), (8, 1, Some(128)));
        assert_eq!(shard8.mlp.as_ref().unwrap().intermediate_size, 3584);
        assert_eq!(shard8.vocab_size, 16032);
        // One eighth of the weights, but for the replicated norms.
        let full = llama.parameters().total as f64;
        let part = shard8.parameters().total as f64;
        assert!((part * 8.0 / full - 1.0).abs() < 0.01, "{}", part * 8.0 / full);

        let deepseek = shard(&load("deepseek-r1"), &Scale { layers: Some(2), tp: 8 }).unwrap();
        let Attention::Mla(mla) = &deepseek.attention else { panic!() };
        assert_eq!((mla.num_heads, mla.kv_lora_rank), (16, 512), "latent replicated, heads divided");
        assert_eq!(deepseek.moe.as_ref().unwrap().intermediate_size, 256);

        let error = shard(&llama, &Scale { layers: None, tp: 3 }).unwrap_err();
        assert!(error.contains("attention.num_heads (64) is not divisible by scale.tp (3)"), "{error}");
    }

    #[test]
    fn kv_heads_fewer_than_tp_are_replicated() {
        let qwen = load("qwen3-30b-a3b");
        let cut = shard(&qwen, &Scale { layers: None, tp: 8 }).unwrap();
        let Attention::Gqa(gqa) = &cut.attention else { panic!() };
        assert_eq!((gqa.num_heads, gqa.num_kv_heads), (4, 1));
    }
}
