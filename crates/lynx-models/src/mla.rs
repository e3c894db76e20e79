//! Multi-head latent attention (DeepSeek-V2, arXiv:2405.04434; DeepSeek-V3, arXiv:2412.19437).
//! Reference: deepseek-ai/DeepSeek-V3 `inference/model.py`, class `MLA`, in its "absorb" mode,
//! which is how DeepSeek decodes.
//!
//! The cache holds, per token, the normalised `kv_lora_rank` latent and the `qk_rope_head_dim`
//! RoPE key shared by all heads (576 values for DeepSeek-V3, against 2 × 128 × 128 for plain
//! multi-head attention). Keys and values are never expanded: the key up-projection is absorbed
//! into the queries and the value up-projection applied after attention, so attention itself is
//! multi-query attention over the cache (one key/value head of width latent + rope). A decode
//! step runs it as two batched matmuls with the heads as rows (no fused SDPA kernel takes a
//! 576-wide head, and SDPA's math kernel would expand the keys for every head); a prompt chunk
//! runs it through libtorch's `scaled_dot_product_attention` with `enable_gqa`.

use crate::gqa::attention_mask;
use crate::linear::Linear;
use crate::model::Place;
use crate::rope::{self, yarn_mscale, Rope, RopeTable};
use crate::scalar_call;
use crate::weights::{Init, RmsNorm, WeightSource};
use crate::{accumulation_kind, Convert, ModelError};
use lynx_schema::config::{Mla, RopeScaling};
use lynx_schema::result::AttentionKernel;
use tch::{Device, Tensor};

/// Row order that turns `blocks` blocks of `block` rows, each ending in `rope` interleaved RoPE
/// rows, into the same blocks with those rows in halves: (0, 2, 4, …, 1, 3, 5, …).
pub fn rope_half_order(blocks: i64, block: i64, rope: i64, device: Device) -> Result<Tensor, ModelError> {
    let mut order = Vec::with_capacity((blocks * block) as usize);
    for b in 0..blocks {
        let start = b * block;
        order.extend(start..start + block - rope);
        let rope_start = start + block - rope;
        order.extend((0..rope).step_by(2).map(|i| rope_start + i));
        order.extend((1..rope).step_by(2).map(|i| rope_start + i));
    }
    Ok(Tensor::f_from_slice(&order)?.f_to_device(device)?)
}

/// The cache of one MLA layer: `[batch, capacity, kv_lora_rank + qk_rope_head_dim]`.
pub struct MlaCache {
    pub(crate) latent_and_rope: Tensor,
}

enum QueryProjection {
    /// Hidden → rank → norm → heads (DeepSeek-V3).
    LowRank {
        down: Linear,
        norm: RmsNorm,
        up: Linear,
    },
    Direct(Linear),
}

pub struct MlaAttention {
    query: QueryProjection,
    /// Hidden → latent + rope key, `[kv_lora_rank + rope, hidden]`.
    kv_down: Linear,
    kv_norm: RmsNorm,
    /// Latent → per-head key (nope part) and value, `[heads · (nope + v), kv_lora_rank]`. A
    /// dense matrix even under fp8: the absorbed attention multiplies by its per-head blocks.
    kv_up: Tensor,
    wo: Linear,
    pub(crate) rope: Rope,
    heads: i64,
    rank: i64,
    nope: i64,
    rope_dim: i64,
    v_dim: i64,
    softmax_scale: f64,
}

impl MlaAttention {
    /// Weights `{prefix}.q_a_proj.weight`, … (Hugging Face `deepseek_v3` names); `heads` is the
    /// number of heads this device holds.
    pub fn new(
        source: &WeightSource,
        prefix: &str,
        config: &Mla,
        hidden: i64,
        heads: i64,
        eps: f64,
    ) -> Result<MlaAttention, ModelError> {
        let nope = i64::from(config.qk_nope_head_dim);
        let rope_dim = i64::from(config.qk_rope_head_dim);
        let v_dim = i64::from(config.v_head_dim);
        let rank = i64::from(config.kv_lora_rank);
        let q_out = heads * (nope + rope_dim);
        let weight = |name: &str, shape: &[i64]| source.tensor(&format!("{prefix}.{name}.weight"), shape, Init::Normal);
        // DeepSeek's checkpoints keep the RoPE dimensions interleaved (pairs (0, 1), (2, 3), …);
        // lynx rotates halves, so the rows that produce them are reordered as they are read,
        // as transformers' `apply_rotary_pos_emb_interleave` reorders the activations.
        let rope_rows = |w: Tensor, blocks: i64, block: i64| -> Result<Linear, ModelError> {
            let w = if source.loaded().is_none() {
                w
            } else {
                w.f_index_select(0, &rope_half_order(blocks, block, rope_dim, w.device())?)?
            };
            Linear::new(w, None, source.fp8)
        };
        let query = match config.q_lora_rank {
            Some(q_rank) => {
                let q_rank = i64::from(q_rank);
                QueryProjection::LowRank {
                    down: source.linear(&format!("{prefix}.q_a_proj"), q_rank, hidden, false)?,
                    norm: RmsNorm::new(source, &format!("{prefix}.q_a_layernorm"), q_rank, eps)?,
                    up: rope_rows(weight("q_b_proj", &[q_out, q_rank])?, heads, nope + rope_dim)?,
                }
            }
            None => QueryProjection::Direct(rope_rows(weight("q_proj", &[q_out, hidden])?, heads, nope + rope_dim)?),
        };
        // softmax scale = (nope + rope)^-1/2, times mscale² under YaRN (HF DeepseekV3Attention).
        let mut softmax_scale = 1.0 / ((nope + rope_dim) as f64).sqrt();
        if let Some(RopeScaling::Yarn { factor, mscale_all_dim: Some(m), .. }) = &config.rope_scaling {
            if *m != 0.0 {
                softmax_scale *= yarn_mscale(*factor, *m).powi(2);
            }
        }
        Ok(MlaAttention {
            query,
            kv_down: rope_rows(weight("kv_a_proj_with_mqa", &[rank + rope_dim, hidden])?, 1, rank + rope_dim)?,
            kv_norm: RmsNorm::new(source, &format!("{prefix}.kv_a_layernorm"), rank, eps)?,
            kv_up: weight("kv_b_proj", &[heads * (nope + v_dim), rank])?,
            wo: source.linear(&format!("{prefix}.o_proj"), hidden, heads * v_dim, false)?,
            rope: Rope::new(
                config.qk_rope_head_dim,
                config.rope_theta,
                config.rope_scaling.as_ref(),
                source.kind,
                source.device,
            )?,
            heads,
            rank,
            nope,
            rope_dim,
            v_dim,
            softmax_scale,
        })
    }

    pub fn to(&self, convert: &Convert) -> Result<MlaAttention, ModelError> {
        Ok(MlaAttention {
            query: match &self.query {
                QueryProjection::LowRank { down, norm, up } => {
                    QueryProjection::LowRank { down: down.to(convert)?, norm: norm.to(convert)?, up: up.to(convert)? }
                }
                QueryProjection::Direct(w) => QueryProjection::Direct(w.to(convert)?),
            },
            kv_down: self.kv_down.to(convert)?,
            kv_norm: self.kv_norm.to(convert)?,
            kv_up: convert.weight(&self.kv_up)?,
            wo: self.wo.to(convert)?,
            rope: self.rope.to(convert)?,
            heads: self.heads,
            rank: self.rank,
            nope: self.nope,
            rope_dim: self.rope_dim,
            v_dim: self.v_dim,
            softmax_scale: self.softmax_scale,
        })
    }

    /// The shape of the layer's cache: `[batch, capacity, latent rank + rope dim]`.
    pub(crate) fn cache_shape(&self, batch: i64, capacity: i64) -> Vec<i64> {
        vec![batch, capacity, self.rank + self.rope_dim]
    }

    /// The layer's linear projections (the key/value up-projection is a dense matrix).
    pub(crate) fn linears(&self) -> Vec<&Linear> {
        let mut linears = match &self.query {
            QueryProjection::LowRank { down, up, .. } => vec![down, up],
            QueryProjection::Direct(w) => vec![w],
        };
        linears.extend([&self.kv_down, &self.wo]);
        linears
    }

    /// Queries `[batch, heads, n, nope]` and RoPE'd `[batch, heads, n, rope]`.
    fn queries(&self, x: &Tensor, table: &RopeTable) -> Result<(Tensor, Tensor), ModelError> {
        let size = x.size();
        let q = match &self.query {
            QueryProjection::LowRank { down, norm, up } => up.forward(&norm.forward(&down.forward(x)?)?)?,
            QueryProjection::Direct(w) => w.forward(x)?,
        };
        let q = q.f_view([size[0], size[1], self.heads, self.nope + self.rope_dim])?.f_transpose(1, 2)?;
        let q_pe = rope::apply(&q.f_narrow(-1, self.nope, self.rope_dim)?, table)?;
        Ok((q.f_narrow(-1, 0, self.nope)?, q_pe))
    }

    /// Normalised latents `[batch, n, rank]` and RoPE'd shared keys `[batch, n, rope]`.
    fn latents(&self, x: &Tensor, table: &RopeTable) -> Result<(Tensor, Tensor), ModelError> {
        let kv = self.kv_down.forward(x)?;
        let latent = self.kv_norm.forward(&kv.f_narrow(-1, 0, self.rank)?)?;
        let k_pe = rope::apply(&kv.f_narrow(-1, self.rank, self.rope_dim)?.f_unsqueeze(1)?, table)?.f_squeeze_dim(1)?;
        Ok((latent, k_pe))
    }

    /// The up-projection split per head: key part `[heads, nope, rank]`, value part `[heads, v, rank]`.
    fn up_projections(&self) -> Result<(Tensor, Tensor), ModelError> {
        let w = self.kv_up.f_view([self.heads, self.nope + self.v_dim, self.rank])?;
        Ok((w.f_narrow(1, 0, self.nope)?, w.f_narrow(1, self.nope, self.v_dim)?))
    }

    /// Attend `x` (`[batch, n, hidden]`, positions `start..start + n`) through the compressed
    /// cache, appending its latents to it.
    pub(crate) fn forward(
        &self,
        x: &Tensor,
        cache: &MlaCache,
        table: &RopeTable,
        place: Place,
    ) -> Result<Tensor, ModelError> {
        let size = x.size();
        let (batch, n) = (size[0], size[1]);
        let (q_nope, q_pe) = self.queries(x, table)?;
        let (latent, k_pe) = self.latents(x, table)?;
        let (w_uk, w_uv) = self.up_projections()?;
        // Absorb the key up-projection into the queries: q_nope · W_ukᵀ lives in latent space.
        let q = Tensor::f_cat(&[&q_nope.f_matmul(&w_uk)?, &q_pe], -1)?;
        let attended = match place {
            Place::Host(start) => {
                let slot = cache.latent_and_rope.f_narrow(1, start, n)?;
                slot.f_narrow(-1, 0, self.rank)?.f_copy_(&latent)?;
                slot.f_narrow(-1, self.rank, self.rope_dim)?.f_copy_(&k_pe)?;
                let keys = cache.latent_and_rope.f_narrow(1, 0, start + n)?;
                if n == 1 {
                    self.attend_explicit(&q, &keys, None)?
                } else {
                    self.attend_sdpa(&q, &keys, start)?
                }
            }
            Place::Device { position, span, masks } => {
                let entry = Tensor::f_cat(&[&latent, &k_pe], -1)?;
                let index = Place::write_index(position, &entry)?;
                let _ = cache.latent_and_rope.shallow_clone().f_scatter_(1, &index, &entry)?;
                let blocked = masks.blocked(None)?;
                let rows = blocked.size()[0];
                let cached = cache.latent_and_rope.f_narrow(1, 0, span)?;
                self.attend_explicit(&q, &cached, Some(&blocked.f_view([rows, 1, span])?))?
            }
        };
        // Per-head value up-projection: [b, h, n, rank] · [h, rank, v].
        let out = attended.f_matmul(&w_uv.f_transpose(1, 2)?)?;
        let merged = out.f_transpose(1, 2)?.f_reshape([batch, n, self.heads * self.v_dim])?;
        self.wo.forward(&merged)
    }

    /// Decode attention as two batched matmuls over the latent. Every head attends the same keys
    /// (the cached latents and RoPE keys, `[batch, len, rank + rope]`), so the heads are the rows
    /// of one matmul per sequence and nothing is copied per head: SDPA's fused kernels refuse a
    /// 576-wide head, and its math kernel expands the keys for all heads. `q` is `[batch, heads,
    /// 1, rank + rope]`; `blocked` (`[1 or batch, 1, len]`, true where a key may not be attended)
    /// leaves keys out; returns `[batch, heads, 1, rank]`.
    fn attend_explicit(&self, q: &Tensor, keys: &Tensor, blocked: Option<&Tensor>) -> Result<Tensor, ModelError> {
        let [batch, heads, n, width] = q.size()[..] else { unreachable!("queries are 4-d") };
        let acc = accumulation_kind(q.kind());
        let scores = q.f_reshape([batch, heads * n, width])?.f_bmm(&keys.f_transpose(1, 2)?)?.f_to_kind(acc)?;
        let mut scores = scalar_call(|| scores.f_mul_scalar(self.softmax_scale))?;
        if let Some(blocked) = blocked {
            scores = scalar_call(|| scores.f_masked_fill(blocked, f64::NEG_INFINITY))?;
        }
        let weights = scores.f_softmax(-1, acc)?.f_to_kind(keys.kind())?;
        let attended = weights.f_bmm(&keys.f_narrow(-1, 0, self.rank)?)?;
        Ok(attended.f_view([batch, heads, n, self.rank])?)
    }

    /// The kernel a step of `n` tokens per sequence after the cache's first `start` attends with:
    /// the explicit matmuls for one token, else SDPA's choice for the chunk's shapes.
    pub fn kernel(&self, cache: &MlaCache, start: i64, n: i64) -> Result<AttentionKernel, ModelError> {
        if n == 1 {
            return Ok(AttentionKernel::Explicit);
        }
        let cached = &cache.latent_and_rope;
        let batch = cached.size()[0];
        let queries =
            Tensor::f_empty([batch, self.heads, n, self.rank + self.rope_dim], (cached.kind(), cached.device()))?;
        let (keys, values, mask, is_causal) = self.sdpa_inputs(&cached.f_narrow(1, 0, start + n)?, start, n)?;
        let choice = Tensor::f_internal_fused_sdp_choice(
            &queries,
            &keys,
            &values,
            mask.as_ref(),
            0.0,
            is_causal,
            self.softmax_scale,
            true,
        )?;
        AttentionKernel::from_sdp_backend(choice).ok_or(ModelError::NoAttentionKernel(choice))
    }

    /// SDPA's keys and values (one head shared by all, `[batch, 1, len, ·]`) over cached `keys`
    /// (`[batch, len, rank + rope]`), and its mask and causal flag for `n` queries at `start`.
    fn sdpa_inputs(
        &self,
        keys: &Tensor,
        start: i64,
        n: i64,
    ) -> Result<(Tensor, Tensor, Option<Tensor>, bool), ModelError> {
        let keys = keys.f_unsqueeze(1)?;
        let values = keys.f_narrow(-1, 0, self.rank)?;
        let mask = attention_mask(start, n, 0, None, keys.device())?;
        let is_causal = mask.is_none() && n > 1;
        Ok((keys, values, mask, is_causal))
    }

    /// Attention of a chunk of queries at `start..` through SDPA, the heads sharing one key and
    /// value head (`enable_gqa`), causal within the chunk.
    fn attend_sdpa(&self, q: &Tensor, keys: &Tensor, start: i64) -> Result<Tensor, ModelError> {
        let (keys, values, mask, is_causal) = self.sdpa_inputs(keys, start, q.size()[2])?;
        Ok(Tensor::f_scaled_dot_product_attention(
            q,
            &keys,
            &values,
            mask.as_ref(),
            0.0,
            is_causal,
            self.softmax_scale,
            true,
        )?)
    }

    /// The same attention with keys and values expanded per head and no cache, over a whole
    /// sequence from position 0: the form MLA is defined in, to check the compressed path against.
    #[cfg(test)]
    fn forward_uncompressed(&self, x: &Tensor, table: &RopeTable) -> Result<Tensor, ModelError> {
        let size = x.size();
        let (batch, n) = (size[0], size[1]);
        let (q_nope, q_pe) = self.queries(x, table)?;
        let (latent, k_pe) = self.latents(x, table)?;
        let kv =
            latent.f_linear::<Tensor>(&self.kv_up, None)?.f_view([batch, n, self.heads, self.nope + self.v_dim])?;
        let kv = kv.f_transpose(1, 2)?;
        let k_nope = kv.f_narrow(-1, 0, self.nope)?;
        let v = kv.f_narrow(-1, self.nope, self.v_dim)?;
        let k_pe = k_pe.f_unsqueeze(1)?.f_expand([batch, self.heads, n, self.rope_dim], false)?;
        let q = Tensor::f_cat(&[&q_nope, &q_pe], -1)?;
        let k = Tensor::f_cat(&[&k_nope, &k_pe], -1)?;
        let attended =
            Tensor::f_scaled_dot_product_attention::<Tensor>(&q, &k, &v, None, 0.0, n > 1, self.softmax_scale, false)?;
        let merged = attended.f_transpose(1, 2)?.f_reshape([batch, n, self.heads * self.v_dim])?;
        self.wo.forward(&merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    #[test]
    fn interleaved_rope_rows_are_put_in_halves() {
        let order = Vec::<i64>::try_from(rope_half_order(2, 6, 4, Device::Cpu).unwrap()).unwrap();
        assert_eq!(order, [0, 1, 2, 4, 3, 5, 6, 7, 8, 10, 9, 11]);
    }

    #[test]
    fn compressed_cache_decoding_matches_the_uncompressed_forward() {
        let config = Mla {
            num_heads: 4,
            q_lora_rank: Some(24),
            kv_lora_rank: 16,
            qk_nope_head_dim: 8,
            qk_rope_head_dim: 4,
            v_head_dim: 6,
            rope_theta: 10000.0,
            rope_scaling: None,
        };
        let (mla, x) = crate::with_generator(Some(5), || {
            let source = WeightSource::random(0.2, Kind::Float, Device::Cpu);
            let mla = MlaAttention::new(&source, "attn", &config, 32, 4, 1e-6).unwrap();
            (mla, Tensor::randn([2, 7, 32], (Kind::Float, Device::Cpu)))
        });
        let full = mla.forward_uncompressed(&x, &mla.rope.table(0, 7, Kind::Float).unwrap()).unwrap();
        assert!(full.std(false).double_value(&[]) > 1e-3);

        // A 3-token prompt, then token by token through the compressed cache.
        let cache = MlaCache { latent_and_rope: Tensor::zeros(mla.cache_shape(2, 7), (Kind::Float, Device::Cpu)) };
        let prompt = mla
            .forward(&x.narrow(1, 0, 3), &cache, &mla.rope.table(0, 3, Kind::Float).unwrap(), Place::Host(0))
            .unwrap();
        let mut pieces = vec![prompt];
        for position in 3..7 {
            let table = mla.rope.table(position, 1, Kind::Float).unwrap();
            pieces.push(mla.forward(&x.narrow(1, position, 1), &cache, &table, Place::Host(position)).unwrap());
        }
        let cached = Tensor::cat(&pieces, 1);
        let diff = (cached - &full).abs().max().double_value(&[]);
        assert!(diff < 1e-5, "max |Δ| = {diff}");

        // Regression (issue 15): decode attends by explicit matmuls, as SDPA did before it.
        let q = crate::with_generator(None, || Tensor::randn([2, 4, 1, 20], (Kind::Float, Device::Cpu)));
        let keys = cache.latent_and_rope.narrow(1, 0, 7);
        let explicit = mla.attend_explicit(&q, &keys, None).unwrap();
        let sdpa = mla.attend_sdpa(&q, &keys, 6).unwrap();
        assert_eq!(explicit.size(), [2, 4, 1, 16]);
        let diff = (explicit - sdpa).abs().max().double_value(&[]);
        assert!(diff < 1e-6, "explicit against SDPA: max |Δ| = {diff}");
    }
}
