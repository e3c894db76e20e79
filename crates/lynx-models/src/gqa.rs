//! Grouped-query attention (Ainslie et al. 2023, arXiv:2305.13245) as the dense models of the
//! catalogue use it: Llama 3 (RoPE scaling), Mistral/Mixtral, Qwen2 (QKV bias), Qwen3 (RMSNorm on
//! query and key heads), gpt-oss (biases everywhere, attention sinks, a sliding window on every
//! other layer). Reference: Hugging Face `transformers`, `models/{llama,qwen3,gpt_oss}/modeling_*.py`.
//!
//! The fused path is libtorch's `scaled_dot_product_attention` with `enable_gqa`, so key and value
//! heads are shared by their query groups without being copied. Sinks have no fused form in
//! libtorch, so models with sinks take the explicit path (scores, softmax with the sink logit,
//! weighted sum), as the reference implementation does.

use crate::linear::Linear;
use crate::model::Place;
use crate::rope::{self, Rope, RopeTable};
use crate::scalar_call;
use crate::weights::{RmsNorm, WeightSource};
use crate::{accumulation_kind, Convert, ModelError};
use lynx_schema::config::{AttentionBias, Gqa};
use lynx_schema::result::AttentionKernel;
use tch::{Device, Kind, Tensor};

/// The cache of one GQA layer: `[batch, kv_heads, capacity, head_dim]` keys and values.
pub struct GqaCache {
    pub(crate) keys: Tensor,
    pub(crate) values: Tensor,
}

pub struct GqaAttention {
    /// The q, k and v projections as one layer ([`Linear::concat`]): the heads' queries, then
    /// the key heads, then the value heads, along its output.
    wqkv: Linear,
    wo: Linear,
    /// Per-head RMSNorm of queries and keys (Qwen3).
    qk_norm: Option<(RmsNorm, RmsNorm)>,
    /// Per-head sink logits, at accumulation precision (gpt-oss).
    sinks: Option<Tensor>,
    /// The window this layer attends within, if it slides.
    window: Option<i64>,
    pub(crate) rope: Rope,
    num_heads: i64,
    num_kv_heads: i64,
    head_dim: i64,
}

impl GqaAttention {
    /// Layer `layer` of a model with `config` (weights `{prefix}.q_proj.weight`, …), hidden width
    /// `hidden`, `heads`/`kv_heads` the heads this device holds (fewer than the model's under
    /// tensor parallelism).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        source: &WeightSource,
        prefix: &str,
        config: &Gqa,
        hidden: i64,
        head_dim: i64,
        (heads, kv_heads): (i64, i64),
        layer: u32,
        eps: f64,
    ) -> Result<GqaAttention, ModelError> {
        let (q_width, kv_width) = (heads * head_dim, kv_heads * head_dim);
        let linear =
            |name: &str, out: i64, input: i64, bias: bool| source.linear(&format!("{prefix}.{name}"), out, input, bias);
        let qkv_bias = config.bias != AttentionBias::None;
        let window = config.sliding_window.as_ref().and_then(|w| match w.layers {
            lynx_schema::config::SlidingLayers::All => Some(i64::from(w.size)),
            lynx_schema::config::SlidingLayers::Even => layer.is_multiple_of(2).then_some(i64::from(w.size)),
        });
        Ok(GqaAttention {
            wqkv: Linear::concat(&[
                &linear("q_proj", q_width, hidden, qkv_bias)?,
                &linear("k_proj", kv_width, hidden, qkv_bias)?,
                &linear("v_proj", kv_width, hidden, qkv_bias)?,
            ])?,
            wo: linear("o_proj", hidden, q_width, config.bias == AttentionBias::All)?,
            qk_norm: if config.qk_norm {
                Some((
                    RmsNorm::new(source, &format!("{prefix}.q_norm"), head_dim, eps)?,
                    RmsNorm::new(source, &format!("{prefix}.k_norm"), head_dim, eps)?,
                ))
            } else {
                None
            },
            sinks: if config.sinks { Some(source.accumulator(&format!("{prefix}.sinks"), &[heads])?) } else { None },
            window,
            rope: Rope::new(
                head_dim as u32,
                config.rope_theta,
                config.rope_scaling.as_ref(),
                source.kind,
                source.device,
            )?,
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_dim,
        })
    }

    pub fn to(&self, convert: &Convert) -> Result<GqaAttention, ModelError> {
        Ok(GqaAttention {
            wqkv: self.wqkv.to(convert)?,
            wo: self.wo.to(convert)?,
            qk_norm: match &self.qk_norm {
                Some((q, k)) => Some((q.to(convert)?, k.to(convert)?)),
                None => None,
            },
            sinks: self.sinks.as_ref().map(|s| convert.accumulator(s)).transpose()?,
            window: self.window,
            rope: self.rope.to(convert)?,
            num_heads: self.num_heads,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
        })
    }

    /// The window this layer attends within, if it slides.
    pub(crate) fn window(&self) -> Option<i64> {
        self.window
    }

    /// The shape of the layer's keys, and of its values: `[batch, kv heads, capacity, head dim]`.
    pub(crate) fn cache_shape(&self, batch: i64, capacity: i64) -> Vec<i64> {
        vec![batch, self.num_kv_heads, capacity, self.head_dim]
    }

    /// Attend `x` (`[batch, n, hidden]`, positions `start..start + n`) over the cache's first
    /// `start` tokens and itself, appending its keys and values to the cache.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        cache: &GqaCache,
        rope: &RopeTable,
        place: Place,
    ) -> Result<Tensor, ModelError> {
        let size = x.size();
        let (batch, n) = (size[0], size[1]);
        let (heads, kv_heads, width) = (self.num_heads, self.num_kv_heads, self.head_dim);
        let qkv = self.wqkv.forward(x)?;
        // `count` heads from head `first` of the merged output: `[batch, count, n, head dim]`.
        let heads_of = |first: i64, count: i64| -> Result<Tensor, ModelError> {
            Ok(qkv.f_narrow(-1, first * width, count * width)?.f_view([batch, n, count, width])?.f_transpose(1, 2)?)
        };
        let v = heads_of(heads + kv_heads, kv_heads)?;
        let (q, k) = match &self.qk_norm {
            // Queries and keys rotate alike: one rotation over both, then split.
            None => {
                let turned = rope::apply(&heads_of(0, heads + kv_heads)?, rope)?;
                (turned.f_narrow(1, 0, heads)?, turned.f_narrow(1, heads, kv_heads)?)
            }
            Some((q_norm, k_norm)) => (
                rope::apply(&q_norm.forward(&heads_of(0, heads)?)?, rope)?,
                rope::apply(&k_norm.forward(&heads_of(heads, kv_heads)?)?, rope)?,
            ),
        };
        let attended = match place {
            Place::Host(start) => self.attend_at(&q, &k, &v, cache, start)?,
            Place::Device { position, span, masks } => {
                let index = Place::write_index(position, &k)?;
                let _ = cache.keys.shallow_clone().f_scatter_(2, &index, &k)?;
                let _ = cache.values.shallow_clone().f_scatter_(2, &index, &v)?;
                let (cached_keys, cached_values) =
                    (cache.keys.f_narrow(2, 0, span)?, cache.values.f_narrow(2, 0, span)?);
                match &self.sinks {
                    None => {
                        let mask = masks.for_sdpa(self.window, (&q, &cached_keys, &cached_values))?;
                        Tensor::f_scaled_dot_product_attention(
                            &q,
                            &cached_keys,
                            &cached_values,
                            Some(&mask),
                            0.0,
                            false,
                            None,
                            true,
                        )?
                    }
                    Some(sinks) => {
                        // The mask's complement, made once a step as MLA's is.
                        let blocked = masks.blocked(self.window)?;
                        let rows = blocked.size()[0];
                        attend_with_sinks(
                            &q,
                            &cached_keys,
                            &cached_values,
                            Some(&blocked.f_view([rows, 1, 1, 1, span])?),
                            sinks,
                            self.num_kv_heads,
                        )?
                    }
                }
            }
        };
        let merged = attended.f_transpose(1, 2)?.f_reshape([batch, n, self.num_heads * self.head_dim])?;
        self.wo.forward(&merged)
    }

    /// Queries `q` at positions `start..start + n` (known on the host) over the cached keys they
    /// may see, after writing their keys `k` and values `v` to the cache.
    fn attend_at(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        cache: &GqaCache,
        start: i64,
    ) -> Result<Tensor, ModelError> {
        let n = q.size()[2];
        cache.keys.f_narrow(2, start, n)?.f_copy_(k)?;
        cache.values.f_narrow(2, start, n)?.f_copy_(v)?;
        // Keys this chunk can see: everything cached, or only the window for a sliding layer.
        let end = start + n;
        let first = self.first_key(start);
        let keys = cache.keys.f_narrow(2, first, end - first)?;
        let values = cache.values.f_narrow(2, first, end - first)?;
        Ok(match &self.sinks {
            None => {
                let (mask, is_causal) = self.fused_mask(start, n, first, q.device())?;
                Tensor::f_scaled_dot_product_attention(q, &keys, &values, mask.as_ref(), 0.0, is_causal, None, true)?
            }
            Some(sinks) => {
                // The explicit path has no `is_causal`: every chunk of several queries is masked.
                let blocked = (n > 1).then(|| blocked_mask(start, n, first, self.window, q.device())).transpose()?;
                attend_with_sinks(q, &keys, &values, blocked.as_ref(), sinks, self.num_kv_heads)?
            }
        })
    }

    /// The layer's linear projections.
    pub(crate) fn linears(&self) -> Vec<&Linear> {
        vec![&self.wqkv, &self.wo]
    }

    /// The first key a chunk of `n` queries at `start` sees: 0, or the window's start.
    fn first_key(&self, start: i64) -> i64 {
        self.window.map_or(0, |w| (start + 1 - w).max(0))
    }

    /// SDPA's mask and causal flag for `n` queries at `start` over keys from `first`.
    fn fused_mask(&self, start: i64, n: i64, first: i64, device: Device) -> Result<(Option<Tensor>, bool), ModelError> {
        let mask = attention_mask(start, n, first, self.window, device)?;
        let is_causal = mask.is_none() && n > 1;
        Ok((mask, is_causal))
    }

    /// The kernel a step of `n` tokens per sequence after the cache's first `start` attends with:
    /// SDPA's choice for the step's shapes, or the explicit path with sinks.
    /// The kernel a graph-safe decode step ([`crate::Model::decode_on_device`]) runs: one query
    /// per sequence over the cache's whole capacity under a boolean mask.
    pub fn device_kernel(&self, cache: &GqaCache) -> Result<AttentionKernel, ModelError> {
        if self.sinks.is_some() {
            return Ok(AttentionKernel::Explicit);
        }
        let size = cache.keys.size();
        let device = cache.keys.device();
        let queries = Tensor::f_empty([size[0], self.num_heads, 1, self.head_dim], (cache.keys.kind(), device))?;
        let position = Tensor::f_zeros([1], (tch::Kind::Int64, device))?;
        let keys = scalar_call(|| Tensor::f_arange(size[2], (tch::Kind::Int64, device)))?;
        let mask = crate::model::Place::device_mask(&position, &keys, self.window)?.f_view([1, 1, 1, size[2]])?;
        let choice = Tensor::f_internal_fused_sdp_choice(
            &queries,
            &cache.keys,
            &cache.values,
            Some(&mask),
            0.0,
            false,
            None,
            true,
        )?;
        AttentionKernel::from_sdp_backend(choice).ok_or(ModelError::NoAttentionKernel(choice))
    }

    pub fn kernel(&self, cache: &GqaCache, start: i64, n: i64) -> Result<AttentionKernel, ModelError> {
        if self.sinks.is_some() {
            return Ok(AttentionKernel::Explicit);
        }
        let size = cache.keys.size();
        let queries =
            Tensor::f_empty([size[0], self.num_heads, n, self.head_dim], (cache.keys.kind(), cache.keys.device()))?;
        let first = self.first_key(start);
        let keys = cache.keys.f_narrow(2, first, start + n - first)?;
        let values = cache.values.f_narrow(2, first, start + n - first)?;
        let (mask, is_causal) = self.fused_mask(start, n, first, queries.device())?;
        let choice =
            Tensor::f_internal_fused_sdp_choice(&queries, &keys, &values, mask.as_ref(), 0.0, is_causal, None, true)?;
        AttentionKernel::from_sdp_backend(choice).ok_or(ModelError::NoAttentionKernel(choice))
    }
}

/// The mask for queries at `start..start + n` over keys at `first..start + n`, true where
/// attending is allowed: causal, and within `window` positions when the layer slides. `None`
/// where SDPA needs none: a single query sees every key it is given, and a prompt into an empty
/// cache with every key in the window is what `is_causal` does.
pub fn attention_mask(
    start: i64,
    n: i64,
    first: i64,
    window: Option<i64>,
    device: Device,
) -> Result<Option<Tensor>, ModelError> {
    let windowed = window.is_some_and(|w| n > 1 && start + n - first > w);
    if n == 1 || (start == 0 && first == 0 && !windowed) {
        return Ok(None);
    }
    explicit_mask(start, n, first, window, device).map(Some)
}

/// The mask of [`attention_mask`], always as a tensor `[n, start + n - first]`.
fn explicit_mask(start: i64, n: i64, first: i64, window: Option<i64>, device: Device) -> Result<Tensor, ModelError> {
    let (queries, keys) = positions(start, n, first, device)?;
    let mut allowed = keys.f_le_tensor(&queries)?;
    if let Some(w) = window {
        // Hugging Face's sliding mask: query − key < window.
        let near = queries.f_sub(&keys)?;
        allowed = allowed.f_logical_and(&scalar_call(|| near.f_lt(w))?)?;
    }
    Ok(allowed)
}

/// The complement of [`explicit_mask`], made as such (true where a query may not attend a key:
/// a later key, or one a window or more behind), rather than made and then inverted.
fn blocked_mask(start: i64, n: i64, first: i64, window: Option<i64>, device: Device) -> Result<Tensor, ModelError> {
    let (queries, keys) = positions(start, n, first, device)?;
    let mut blocked = keys.f_gt_tensor(&queries)?;
    if let Some(w) = window {
        let near = queries.f_sub(&keys)?;
        blocked = blocked.f_logical_or(&scalar_call(|| near.f_ge(w))?)?;
    }
    Ok(blocked)
}

/// The positions of queries `start..start + n`, `[n, 1]`, and of keys `first..start + n`, `[1, s]`.
fn positions(start: i64, n: i64, first: i64, device: Device) -> Result<(Tensor, Tensor), ModelError> {
    let end = start + n;
    let queries = scalar_call(|| Tensor::f_arange_start(start, end, (Kind::Int64, device)))?.f_unsqueeze(1)?;
    let keys = scalar_call(|| Tensor::f_arange_start(first, end, (Kind::Int64, device)))?.f_unsqueeze(0)?;
    Ok((queries, keys))
}

/// softmax([q·kᵀ · scale, sink]) without the sink's column, times v: attention in which a learned
/// per-head logit takes a share of the weight (gpt-oss). Queries `[b, h, n, d]`, keys and values
/// `[b, kv_heads, s, d]`; query heads are grouped over key heads without copying them. `blocked`
/// (true where a query may not attend a key) leaves keys out.
fn attend_with_sinks(
    q: &Tensor,
    keys: &Tensor,
    values: &Tensor,
    blocked: Option<&Tensor>,
    sinks: &Tensor,
    kv_heads: i64,
) -> Result<Tensor, ModelError> {
    let [b, h, n, d] = q.size()[..] else { unreachable!("queries are 4-d") };
    let s = keys.size()[2];
    let group = h / kv_heads;
    let q = q.f_reshape([b, kv_heads, group, n, d])?;
    let keys = keys.f_unsqueeze(2)?;
    let values = values.f_unsqueeze(2)?;
    let acc = accumulation_kind(q.kind());
    let scores = q.f_matmul(&keys.f_transpose(-1, -2)?)?.f_to_kind(acc)?;
    let mut scores = scalar_call(|| scores.f_mul_scalar(1.0 / (d as f64).sqrt()))?;
    if let Some(blocked) = blocked {
        scores = scalar_call(|| scores.f_masked_fill(blocked, f64::NEG_INFINITY))?;
    }
    let sink = sinks.f_reshape([1, kv_heads, group, 1, 1])?.f_expand([b, kv_heads, group, n, 1], false)?;
    let weights = Tensor::f_cat(&[&scores, &sink], -1)?.f_softmax(-1, acc)?.f_narrow(-1, 0, s)?;
    let attended = weights.f_to_kind(values.kind())?.f_matmul(&values)?;
    Ok(attended.f_reshape([b, h, n, d])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sinks path's mask, made blocked, is the complement of the allowed one at every
    /// chunk, cache position and window, the sliding window's edge included.
    #[test]
    fn the_blocked_mask_is_the_allowed_masks_complement() {
        for (start, n, window) in [(0, 5, None), (3, 4, None), (0, 9, Some(4)), (6, 5, Some(4)), (10, 3, Some(2))] {
            let first = window.map_or(0, |w: i64| (start + 1 - w).max(0));
            let allowed = explicit_mask(start, n, first, window, Device::Cpu).unwrap();
            let blocked = blocked_mask(start, n, first, window, Device::Cpu).unwrap();
            assert_eq!(blocked.size(), allowed.size());
            assert!(blocked.equal(&allowed.logical_not()), "start {start}, {n} queries, window {window:?}");
        }
    }
}
