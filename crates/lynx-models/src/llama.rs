//! Llama-style dense decoder: token embedding, `num_layers` pre-norm blocks of grouped-query
//! attention with rotary position embeddings and a SwiGLU MLP, a final RMSNorm and the lm head.
//!
//! - Llama: Touvron et al. 2023, "LLaMA: Open and Efficient Foundation Language Models",
//!   arXiv:2302.13971; GQA: Ainslie et al. 2023, arXiv:2305.13245; RoPE: Su et al. 2021,
//!   arXiv:2104.09864; SwiGLU: Shazeer 2020, arXiv:2002.05202.
//! - Reference implementation: Hugging Face `transformers`, `models/llama/modeling_llama.py`
//!   (rotate-half RoPE convention, `hidden_act = silu`).
//!
//! Attention runs through libtorch's `scaled_dot_product_attention` with `enable_gqa`, so key
//! and value heads are shared across query groups without being copied.

use crate::{kind_of, ModelError};
use lynx_core::config::{ModelShape, Precision};
use tch::{Device, Kind, Tensor};

/// Which positions the lm head is applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Every position: `[batch, tokens, vocab]` (for checking the model).
    All,
    /// Only the last position: `[batch, 1, vocab]`, as a serving engine computes them.
    Last,
}

/// Preallocated key and value cache: per layer `[batch, num_kv_heads, capacity, head_dim]`.
pub struct KvCache {
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
    len: i64,
    capacity: i64,
    batch: i64,
}

impl KvCache {
    /// A cache of `capacity` tokens for each of `batch` sequences of `model`.
    pub fn new(model: &LlamaModel, batch: i64, capacity: i64) -> Result<KvCache, ModelError> {
        let shape = [batch, model.num_kv_heads, capacity, model.head_dim];
        let options = (model.kind, model.device);
        let mut keys = Vec::with_capacity(model.blocks.len());
        let mut values = Vec::with_capacity(model.blocks.len());
        for _ in &model.blocks {
            keys.push(Tensor::f_zeros(shape, options)?);
            values.push(Tensor::f_zeros(shape, options)?);
        }
        Ok(KvCache { keys, values, len: 0, capacity, batch })
    }

    /// Tokens each sequence holds.
    pub fn len(&self) -> i64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> i64 {
        self.capacity
    }

    /// Forget every token; the memory stays allocated.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Hold `len` tokens per sequence whose keys and values are drawn from Normal(0, 1): a
    /// context for decode steps without running a prefill first. A decode step's work depends on
    /// how many tokens the cache holds, not on where their values came from.
    pub fn fill_random(&mut self, len: i64) -> Result<(), ModelError> {
        if len > self.capacity {
            return Err(ModelError::CacheFull { capacity: self.capacity, needed: len });
        }
        for layer in self.keys.iter().chain(&self.values) {
            let _ = layer.f_narrow(2, 0, len)?.f_normal_(0.0, 1.0)?;
        }
        self.len = len;
        Ok(())
    }

    /// Forget the tokens after the first `len`.
    pub fn truncate(&mut self, len: i64) {
        self.len = self.len.min(len.max(0));
    }
}

/// RMSNorm weight and epsilon.
struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    fn forward(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        let width = self.weight.size()[0];
        Ok(x.f_rms_norm([width], Some(&self.weight), self.eps)?)
    }
}

/// Grouped-query self-attention.
struct Attention {
    wq: Tensor,
    wk: Tensor,
    wv: Tensor,
    wo: Tensor,
}

/// SwiGLU MLP: down(silu(gate(x)) * up(x)).
struct Mlp {
    gate: Tensor,
    up: Tensor,
    down: Tensor,
}

/// One pre-norm decoder block.
struct Block {
    attention_norm: RmsNorm,
    attention: Attention,
    mlp_norm: RmsNorm,
    mlp: Mlp,
}

/// The model: weights on one device at one precision.
pub struct LlamaModel {
    embedding: Tensor,
    blocks: Vec<Block>,
    norm: RmsNorm,
    /// `None` when tied to the embedding.
    lm_head: Option<Tensor>,
    /// RoPE inverse frequencies, `[head_dim / 2]`, fp32.
    inv_freq: Tensor,
    num_heads: i64,
    num_kv_heads: i64,
    head_dim: i64,
    vocab_size: i64,
    kind: Kind,
    device: Device,
}

/// Draws weights from the global libtorch generator, seeded once by the caller.
struct WeightSource {
    std: f64,
    kind: Kind,
    device: Device,
}

impl WeightSource {
    /// Normal(0, std) weights of `shape`, drawn in fp32 so every precision sees the same values.
    fn normal(&self, shape: &[i64]) -> Result<Tensor, ModelError> {
        let drawn = Tensor::f_randn(shape, (Kind::Float, self.device))?.f_mul_scalar(self.std)?;
        Ok(drawn.f_to_kind(self.kind)?)
    }

    fn norm(&self, width: i64, eps: f64) -> Result<RmsNorm, ModelError> {
        Ok(RmsNorm { weight: Tensor::f_ones([width], (self.kind, self.device))?, eps })
    }
}

impl LlamaModel {
    /// Build `shape` on `device` at `precision` with weights drawn from `seed`.
    pub fn new(shape: &ModelShape, precision: Precision, device: Device, seed: u64) -> Result<LlamaModel, ModelError> {
        // libtorch seeds with an i64; the bit pattern is what matters.
        tch::manual_seed(seed as i64);
        let hidden = i64::from(shape.hidden_size);
        let head_dim = i64::from(shape.head_dim());
        let q_width = i64::from(shape.num_heads) * head_dim;
        let kv_width = i64::from(shape.num_kv_heads) * head_dim;
        let ffn = i64::from(shape.intermediate_size);
        let vocab = i64::from(shape.vocab_size);
        let source = WeightSource { std: shape.init_std, kind: kind_of(precision), device };

        let embedding = source.normal(&[vocab, hidden])?;
        let mut blocks = Vec::with_capacity(shape.num_layers as usize);
        for _ in 0..shape.num_layers {
            blocks.push(Block {
                attention_norm: source.norm(hidden, shape.rms_norm_eps)?,
                attention: Attention {
                    wq: source.normal(&[q_width, hidden])?,
                    wk: source.normal(&[kv_width, hidden])?,
                    wv: source.normal(&[kv_width, hidden])?,
                    wo: source.normal(&[hidden, q_width])?,
                },
                mlp_norm: source.norm(hidden, shape.rms_norm_eps)?,
                mlp: Mlp {
                    gate: source.normal(&[ffn, hidden])?,
                    up: source.normal(&[ffn, hidden])?,
                    down: source.normal(&[hidden, ffn])?,
                },
            });
        }
        let norm = source.norm(hidden, shape.rms_norm_eps)?;
        let lm_head = if shape.tie_word_embeddings { None } else { Some(source.normal(&[vocab, hidden])?) };
        // inv_freq[i] = theta^(-2i / head_dim) (RoPE paper, eq. 15).
        let exponents =
            Tensor::f_arange_start_step(0, head_dim, 2, (Kind::Float, device))?.f_div_scalar(head_dim as f64)?;
        let inv_freq = Tensor::f_full([head_dim / 2], shape.rope_theta, (Kind::Float, device))?
            .f_pow(&exponents)?
            .f_reciprocal()?;
        Ok(LlamaModel {
            embedding,
            blocks,
            norm,
            lm_head,
            inv_freq,
            num_heads: i64::from(shape.num_heads),
            num_kv_heads: i64::from(shape.num_kv_heads),
            head_dim,
            vocab_size: vocab,
            kind: source.kind,
            device,
        })
    }

    pub fn device(&self) -> Device {
        self.device
    }

    pub fn vocab_size(&self) -> i64 {
        self.vocab_size
    }

    /// Run `tokens` (`[batch, n]`, int64) through the model after the tokens already in `cache`,
    /// appending their keys and values to it; returns fp32 logits for the positions `logits` asks.
    pub fn forward(&self, tokens: &Tensor, cache: &mut KvCache, logits: Logits) -> Result<Tensor, ModelError> {
        let size = tokens.size();
        let [batch, n] = size[..] else {
            return Err(ModelError::Shape(format!("tokens must be [batch, n], got {size:?}")));
        };
        if batch != cache.batch {
            return Err(ModelError::Shape(format!("tokens batch {batch} ≠ KV cache batch {}", cache.batch)));
        }
        let start = cache.len;
        if start + n > cache.capacity {
            return Err(ModelError::CacheFull { capacity: cache.capacity, needed: start + n });
        }
        let rope = self.rope(start, n)?;
        let mask = causal_mask(start, n, self.device)?;
        let mut x = Tensor::f_embedding(&self.embedding, tokens, -1, false, false)?;
        for (layer, block) in self.blocks.iter().enumerate() {
            let attended = block.attention.forward(
                &block.attention_norm.forward(&x)?,
                self,
                &rope,
                mask.as_ref(),
                (&cache.keys[layer], &cache.values[layer]),
                start,
            )?;
            x = x.f_add(&attended)?;
            x = x.f_add(&block.mlp.forward(&block.mlp_norm.forward(&x)?)?)?;
        }
        cache.len = start + n;
        let x = match logits {
            Logits::All => x,
            Logits::Last => x.f_narrow(1, n - 1, 1)?,
        };
        let head = self.lm_head.as_ref().unwrap_or(&self.embedding);
        Ok(self.norm.forward(&x)?.f_linear::<Tensor>(head, None)?.f_to_kind(Kind::Float)?)
    }

    /// The prefill step: `prompts` (`[batch, prompt_len]`) into an empty `cache`; returns each
    /// sequence's first generated token (greedy), `[batch, 1]`.
    pub fn prefill(&self, prompts: &Tensor, cache: &mut KvCache) -> Result<Tensor, ModelError> {
        cache.clear();
        Ok(self.forward(prompts, cache, Logits::Last)?.f_argmax(-1, false)?)
    }

    /// The decode step: one token per sequence (`[batch, 1]`) after the `cache`'s context;
    /// returns the next token of each (greedy), `[batch, 1]`.
    pub fn decode(&self, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor, ModelError> {
        Ok(self.forward(tokens, cache, Logits::Last)?.f_argmax(-1, false)?)
    }

    /// Uniformly random token ids, `[batch, len]`, from the global generator.
    pub fn random_tokens(&self, batch: i64, len: i64) -> Result<Tensor, ModelError> {
        Ok(Tensor::f_randint(self.vocab_size, [batch, len], (Kind::Int64, self.device))?)
    }

    /// cos and sin of the rotation angles for positions `start..start + n`, `[n, head_dim]` each,
    /// in the model's precision (both halves repeat the frequencies: the rotate-half convention).
    fn rope(&self, start: i64, n: i64) -> Result<(Tensor, Tensor), ModelError> {
        let positions = Tensor::f_arange_start(start, start + n, (Kind::Float, self.device))?;
        let angles = positions.f_unsqueeze(1)?.f_mul(&self.inv_freq.f_unsqueeze(0)?)?;
        let angles = Tensor::f_cat(&[&angles, &angles], -1)?;
        Ok((angles.f_cos()?.f_to_kind(self.kind)?, angles.f_sin()?.f_to_kind(self.kind)?))
    }
}

/// The attention mask for `n` new tokens after `start` cached ones. `None` where SDPA's own
/// handling is exact: one new token attends to everything, and a prompt into an empty cache uses
/// `is_causal`. Otherwise a boolean `[n, start + n]` mask, true where attending is allowed.
fn causal_mask(start: i64, n: i64, device: Device) -> Result<Option<Tensor>, ModelError> {
    if n == 1 || start == 0 {
        return Ok(None);
    }
    let query_positions = Tensor::f_arange_start(start, start + n, (Kind::Int64, device))?.f_unsqueeze(1)?;
    let key_positions = Tensor::f_arange(start + n, (Kind::Int64, device))?.f_unsqueeze(0)?;
    Ok(Some(key_positions.f_le_tensor(&query_positions)?))
}

/// x · cos + rotate_half(x) · sin, for `x` of `[batch, heads, n, head_dim]`.
fn apply_rope(x: &Tensor, (cos, sin): &(Tensor, Tensor)) -> Result<Tensor, ModelError> {
    let half = x.size()[3] / 2;
    let first = x.f_narrow(3, 0, half)?;
    let second = x.f_narrow(3, half, half)?;
    let rotated = Tensor::f_cat(&[&second.f_neg()?, &first], 3)?;
    Ok(x.f_mul(cos)?.f_add(&rotated.f_mul(sin)?)?)
}

impl Attention {
    fn forward(
        &self,
        x: &Tensor,
        model: &LlamaModel,
        rope: &(Tensor, Tensor),
        mask: Option<&Tensor>,
        (cache_keys, cache_values): (&Tensor, &Tensor),
        start: i64,
    ) -> Result<Tensor, ModelError> {
        let size = x.size();
        let (batch, n) = (size[0], size[1]);
        let heads = |w: &Tensor, count: i64| -> Result<Tensor, ModelError> {
            Ok(x.f_linear::<Tensor>(w, None)?.f_view([batch, n, count, model.head_dim])?.f_transpose(1, 2)?)
        };
        let q = apply_rope(&heads(&self.wq, model.num_heads)?, rope)?;
        let k = apply_rope(&heads(&self.wk, model.num_kv_heads)?, rope)?;
        let v = heads(&self.wv, model.num_kv_heads)?;
        cache_keys.f_narrow(2, start, n)?.f_copy_(&k)?;
        cache_values.f_narrow(2, start, n)?.f_copy_(&v)?;
        let keys = cache_keys.f_narrow(2, 0, start + n)?;
        let values = cache_values.f_narrow(2, 0, start + n)?;
        let is_causal = start == 0 && n > 1;
        let attended = Tensor::f_scaled_dot_product_attention(&q, &keys, &values, mask, 0.0, is_causal, None, true)?;
        let merged = attended.f_transpose(1, 2)?.f_reshape([batch, n, model.num_heads * model.head_dim])?;
        Ok(merged.f_linear::<Tensor>(&self.wo, None)?)
    }
}

impl Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        let gate = x.f_linear::<Tensor>(&self.gate, None)?.f_silu()?;
        let up = x.f_linear::<Tensor>(&self.up, None)?;
        Ok(gate.f_mul(&up)?.f_linear::<Tensor>(&self.down, None)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cos/sin of RoPE for `positions` at head_dim 8, theta 10 000.
    fn table(start: i64, n: i64) -> (Tensor, Tensor) {
        let inv_freq = Tensor::from_slice(&[0.0f32, 2.0, 4.0, 6.0])
            .divide_scalar(8.0)
            .exp2()
            .pow_tensor_scalar(10000f64.log2())
            .reciprocal();
        let positions = Tensor::arange_start(start, start + n, (Kind::Float, Device::Cpu));
        let angles = positions.unsqueeze(1) * inv_freq.unsqueeze(0);
        let angles = Tensor::cat(&[&angles, &angles], -1);
        (angles.cos(), angles.sin())
    }

    #[test]
    fn rope_scores_depend_only_on_relative_position() {
        tch::manual_seed(3);
        let q = Tensor::randn([1, 1, 1, 8], (Kind::Float, Device::Cpu));
        let k = Tensor::randn([1, 1, 1, 8], (Kind::Float, Device::Cpu));
        let score = |qpos: i64, kpos: i64| {
            let rq = apply_rope(&q, &table(qpos, 1)).unwrap();
            let rk = apply_rope(&k, &table(kpos, 1)).unwrap();
            (rq * rk).sum(Kind::Float).double_value(&[])
        };
        assert!((score(5, 2) - score(105, 102)).abs() < 1e-4);
        assert!((score(5, 2) - score(5, 4)).abs() > 1e-3, "position must matter");
        let at_zero = apply_rope(&q, &table(0, 1)).unwrap();
        assert!((at_zero - &q).abs().max().double_value(&[]) < 1e-7);
    }
}
