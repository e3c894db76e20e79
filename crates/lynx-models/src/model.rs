//! The decoder every catalogue model shares: token embedding, `num_layers` pre-norm blocks of
//! attention (GQA or MLA) and an MLP (dense or mixture of experts), a final RMSNorm and the lm
//! head (Llama: Touvron et al. 2023, arXiv:2302.13971; the per-family parts cite their own
//! papers). Reference implementation: Hugging Face `transformers`, `modeling_{llama,mixtral,
//! qwen3,qwen3_moe,gpt_oss,deepseek_v3}.py`.

use crate::gqa::{GqaAttention, GqaCache};
use crate::linear::{Fp8Input, Linear};
use crate::mla::{MlaAttention, MlaCache};
use crate::mlp::{MergedMlp, Mlp, GATE_UP_DOWN};
use crate::moe::{MoeLayer, MoeLayout};
use crate::rope::RopeTable;
use crate::scalar_call;
use crate::weights::{Init, RmsNorm, WeightSource};
use crate::Checkpoint;
use crate::{accumulation_kind, holding, with_generator, Convert, ModelError};
use lynx_schema::config::{Activation, Attention, ModelShape, Precision};
use lynx_schema::result::AttentionKernel;
use tch::{Device, Kind, Tensor};

/// Layer `i` named as layer `i`.
fn identity(shape: &ModelShape) -> Vec<u32> {
    (0..shape.num_layers).collect()
}

/// Where a step's tokens go in the KV cache, and which cached keys they attend.
#[derive(Clone, Copy)]
pub(crate) enum Place<'a> {
    /// Positions `start..start + n`, known on the host: the first `start + n` keys.
    Host(i64),
    /// One token a sequence at the positions held on the device in `position` (`[1]` for every
    /// sequence alike, or `[batch]`, one a row; int64): the cache's first `span` keys, those
    /// after each row's position masked out by `masks`.
    Device { position: &'a Tensor, span: i64, masks: &'a StepMasks },
}

/// The masks of a step at device-held positions ([`Place::device_mask`]), one for each window
/// the model's layers attend within (none, or a sliding layer's), made once a step: a mask made
/// in every layer was one more kernel a layer for the host to issue (31 of a Llama 3.1 8B step's
/// about 550) and, in a graph, to run. Each mask's complement (the keys a row may not attend,
/// which MLA's explicit attention and gpt-oss's sink attention fill) and the additive mask SDPA
/// is given are made once too, the first time a layer asks.
pub(crate) struct StepMasks(Vec<WindowMasks>);

/// A step's masks for the layers attending within one window.
struct WindowMasks {
    window: Option<i64>,
    /// True where a row may attend a key, `[rows, span]`.
    allowed: Tensor,
    blocked: std::cell::OnceCell<Tensor>,
    /// For SDPA: the operands' sizes it was chosen for, and the additive mask (`[rows, 1, 1,
    /// span]`), or `None` where SDPA would choose another kernel for it than for the boolean
    /// one.
    additive: std::cell::OnceCell<(Vec<Vec<i64>>, Option<Tensor>)>,
}

/// ATen's number for its cuDNN attention kernel (`sdp::SDPBackend::cudnn_attention`).
const CUDNN_ATTENTION: i64 = 3;

/// What ATen's SDPA fills the keys a boolean mask blocks with, given the kernel it chose: −65504
/// for cuDNN (`convert_boolean_attn_mask_cudnn`, a workaround for cuDNN and −∞), −∞ for every
/// other kernel (`convert_boolean_attn_mask`).
fn blocked_fill(backend: i64) -> f64 {
    if backend == CUDNN_ATTENTION {
        -65504.0
    } else {
        f64::NEG_INFINITY
    }
}

impl StepMasks {
    /// The masks over keys `keys` (0..span) for rows at `position`, for each of `windows`.
    pub(crate) fn new(
        position: &Tensor,
        keys: &Tensor,
        windows: impl IntoIterator<Item = Option<i64>>,
    ) -> Result<StepMasks, ModelError> {
        let mut masks: Vec<WindowMasks> = Vec::new();
        for window in windows {
            if !masks.iter().any(|m| m.window == window) {
                masks.push(WindowMasks {
                    window,
                    allowed: Place::device_mask(position, keys, window)?,
                    blocked: std::cell::OnceCell::new(),
                    additive: std::cell::OnceCell::new(),
                });
            }
        }
        Ok(StepMasks(masks))
    }

    fn find(&self, window: Option<i64>) -> Result<&WindowMasks, ModelError> {
        self.0.iter().find(|m| m.window == window).ok_or_else(|| {
            let within = window.map_or_else(|| "the whole context".to_owned(), |w| format!("a window of {w}"));
            ModelError::Shape(format!("the step made no mask for a layer attending within {within}"))
        })
    }

    /// The complement of the mask of a layer that attends within `window`: true where a row may
    /// not attend a key, `[rows, span]`.
    pub(crate) fn blocked(&self, window: Option<i64>) -> Result<&Tensor, ModelError> {
        let masks = self.find(window)?;
        if let Some(made) = masks.blocked.get() {
            return Ok(made);
        }
        let made = masks.allowed.f_logical_not()?;
        Ok(masks.blocked.get_or_init(|| made))
    }

    /// The mask SDPA is given for a layer attending within `window` over `q`, `k` and `v`
    /// (`[rows, 1, 1, span]`): the additive mask ATen makes of the boolean one in every call (0
    /// where a row may attend a key, else [`blocked_fill`] of the kernel it chose, at the
    /// queries' element type), made once a step in two kernels, which saves each layer the
    /// kernels ATen's conversion runs (two for cuDNN, three for the others, whose zero it fills
    /// on the device); the boolean one where SDPA would choose another kernel for the additive
    /// mask than for the boolean one. Chosen once a step, by the first layer to ask (layers
    /// attending within one window have operands of one size; others choose for themselves).
    pub(crate) fn for_sdpa(
        &self,
        window: Option<i64>,
        (q, k, v): (&Tensor, &Tensor, &Tensor),
    ) -> Result<Tensor, ModelError> {
        let masks = self.find(window)?;
        let [rows, span] = masks.allowed.size()[..] else { unreachable!("a step's mask is [rows, span]") };
        let allowed = masks.allowed.f_view([rows, 1, 1, span])?;
        let sizes = vec![q.size(), k.size(), v.size()];
        let additive = match masks.additive.get() {
            Some((chosen_for, made)) if *chosen_for == sizes => made.as_ref().map(Tensor::shallow_clone),
            Some(_) => additive_for(&allowed, (q, k, v))?,
            None => {
                let made = additive_for(&allowed, (q, k, v))?;
                masks.additive.get_or_init(|| (sizes, made)).1.as_ref().map(Tensor::shallow_clone)
            }
        };
        Ok(additive.unwrap_or(allowed))
    }
}

/// The additive mask for SDPA over `q`, `k` and `v` of the boolean mask `allowed` (`[rows, 1,
/// 1, span]`, and so is the additive one), or `None` where SDPA would choose another kernel for
/// it than for the boolean mask.
fn additive_for(allowed: &Tensor, (q, k, v): (&Tensor, &Tensor, &Tensor)) -> Result<Option<Tensor>, ModelError> {
    let choice = |mask: &Tensor| Tensor::f_internal_fused_sdp_choice(q, k, v, Some(mask), 0.0, false, None, true);
    let boolean = choice(allowed)?;
    // The values ATen makes: zero where allowed, the fill elsewhere, at the queries' type
    // (−65504 rounds there as ATen's does).
    let additive = Tensor::f_where_scalar(allowed, 0.0, blocked_fill(boolean))?.f_to_kind(q.kind())?;
    Ok((choice(&additive)? == boolean).then_some(additive))
}

impl Place<'_> {
    /// For a step at the device-held positions: true for the keys each row may attend (at or
    /// before its position, and within `window` positions of it for a sliding layer), `[p, span]`
    /// for `p` positions.
    pub(crate) fn device_mask(position: &Tensor, keys: &Tensor, window: Option<i64>) -> Result<Tensor, ModelError> {
        let rows = position.f_unsqueeze(1)?;
        let keys = keys.f_unsqueeze(0)?;
        let mut allowed = keys.f_le_tensor(&rows)?;
        if let Some(w) = window {
            // Hugging Face's sliding mask: query − key < window.
            let first = scalar_call(|| rows.f_sub_scalar(w))?;
            allowed = allowed.f_logical_and(&keys.f_gt_tensor(&first)?)?;
        }
        Ok(allowed)
    }

    /// The index `scatter_` writes a step's entries `like` (`[batch, …]`, one token a row) with:
    /// each row's device-held position, in every element of the row.
    pub(crate) fn write_index(position: &Tensor, like: &Tensor) -> Result<Tensor, ModelError> {
        let size = like.size();
        let mut view = vec![1i64; size.len()];
        view[0] = position.size()[0];
        Ok(position.f_view(view.as_slice())?.f_expand(size.as_slice(), false)?)
    }
}

/// Which positions the lm head is applied to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Every position: `[batch, tokens, vocab]` (for checking the model).
    All,
    /// Only the last position: `[batch, 1, vocab]`, as a serving engine computes them.
    Last,
}

enum AttentionLayer {
    Gqa(GqaAttention),
    Mla(MlaAttention),
}

enum MlpLayer {
    Dense(MergedMlp),
    Moe(Box<MoeLayer>),
}

struct Block {
    attention_norm: RmsNorm,
    attention: AttentionLayer,
    mlp_norm: RmsNorm,
    mlp: MlpLayer,
}

enum LayerCache {
    Gqa(GqaCache),
    Mla(MlaCache),
}

/// Preallocated KV cache of every layer, for `batch` sequences of up to `capacity` tokens.
///
/// The layers' tensors of one shape are views of one tensor, stacked on a first dimension (a
/// slab): moving a sequence from one row to another is then one copy per slab, not one per
/// layer (a server moves rows between steps, and each copy is a kernel the host issues).
pub struct KvCache {
    layers: Vec<LayerCache>,
    slabs: Vec<Slab>,
    /// Where each layer's tensors lie in the slabs.
    layout: Vec<LayerLayout>,
    len: i64,
    capacity: i64,
    batch: i64,
}

/// Layers' cache tensors of one shape, stacked: `[tensors, batch, ...]`.
struct Slab {
    tensor: Tensor,
    /// The slab's token dimension.
    token_dim: i64,
}

/// A layer's tensors, each as (slab, index on the slab's first dimension).
#[derive(Clone, Copy)]
enum LayerLayout {
    Gqa { keys: (usize, i64), values: (usize, i64) },
    Mla { latent_and_rope: (usize, i64) },
}

/// The layers' cache tensors as views of `slabs`.
fn layer_views(slabs: &[Slab], layout: &[LayerLayout]) -> Result<Vec<LayerCache>, ModelError> {
    let view = |(slab, index): (usize, i64)| slabs[slab].tensor.f_select(0, index);
    layout
        .iter()
        .map(|layer| match *layer {
            LayerLayout::Gqa { keys, values } => {
                Ok(LayerCache::Gqa(GqaCache { keys: view(keys)?, values: view(values)? }))
            }
            LayerLayout::Mla { latent_and_rope } => {
                Ok(LayerCache::Mla(MlaCache { latent_and_rope: view(latent_and_rope)? }))
            }
        })
        .collect()
}

impl KvCache {
    /// A cache of `capacity` tokens for each of `batch` sequences of `model`.
    pub fn new(model: &Model, batch: i64, capacity: i64) -> Result<KvCache, ModelError> {
        // Each distinct shape with how many tensors have it; each tensor its place.
        let mut shapes: Vec<(Vec<i64>, i64, i64)> = Vec::new(); // (shape, token dim, count)
        let mut place = |shape: Vec<i64>, token_dim: i64| -> (usize, i64) {
            match shapes.iter().position(|(s, _, _)| *s == shape) {
                Some(at) => {
                    shapes[at].2 += 1;
                    (at, shapes[at].2 - 1)
                }
                None => {
                    shapes.push((shape, token_dim, 1));
                    (shapes.len() - 1, 0)
                }
            }
        };
        let layout: Vec<LayerLayout> = model
            .blocks
            .iter()
            .map(|block| match &block.attention {
                AttentionLayer::Gqa(a) => {
                    let shape = a.cache_shape(batch, capacity);
                    LayerLayout::Gqa { keys: place(shape.clone(), 2), values: place(shape, 2) }
                }
                AttentionLayer::Mla(a) => {
                    LayerLayout::Mla { latent_and_rope: place(a.cache_shape(batch, capacity), 1) }
                }
            })
            .collect();
        let slabs = shapes
            .into_iter()
            .map(|(shape, token_dim, count)| {
                let stacked: Vec<i64> = std::iter::once(count).chain(shape).collect();
                Ok(Slab { tensor: Tensor::f_zeros(stacked, (model.kind, model.device))?, token_dim: token_dim + 1 })
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        let layers = layer_views(&slabs, &layout)?;
        Ok(KvCache { layers, slabs, layout, len: 0, capacity, batch })
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

    /// Hold `len` tokens per sequence whose cached values are drawn from Normal(0, 1): a context
    /// for decode steps without running a prefill first. A decode step's work depends on how many
    /// tokens the cache holds, not on where their values came from.
    pub fn fill_random(&mut self, len: i64) -> Result<(), ModelError> {
        if len > self.capacity {
            return Err(ModelError::CacheFull { capacity: self.capacity, needed: len });
        }
        with_generator(None, || self.fill_layers(len))?;
        self.len = len;
        Ok(())
    }

    /// Draw the first `len` tokens of every slab. On a CPU each contiguous run of them (one
    /// sequence's tokens of one head, say) is drawn alone: libtorch's CPU `normal_` draws a
    /// contiguous tensor with its vectorised path and any other one element at a time, about ten
    /// times slower (`cargo bench -p lynx-models --bench cache_fill`); on a GPU one kernel draws
    /// each slab's tokens.
    fn fill_layers(&self, len: i64) -> Result<(), ModelError> {
        for slab in &self.slabs {
            let size = slab.tensor.size();
            let token_dim = slab.token_dim as usize;
            let outer: i64 = size[..token_dim].iter().product();
            let inner: i64 = size[token_dim + 1..].iter().product();
            let mut runs = slab.tensor.f_view([outer, size[token_dim], inner])?.f_narrow(1, 0, len)?;
            if slab.tensor.device() != Device::Cpu || len == size[token_dim] {
                let _ = runs.f_normal_(0.0, 1.0)?;
                continue;
            }
            for run in 0..outer {
                let _ = runs.f_select(0, run)?.f_normal_(0.0, 1.0)?;
            }
        }
        Ok(())
    }

    /// A copy of this cache in new memory: the same tokens, values and capacity.
    pub fn duplicate(&self) -> Result<KvCache, ModelError> {
        let slabs = self
            .slabs
            .iter()
            .map(|slab| Ok(Slab { tensor: copy(&slab.tensor)?, token_dim: slab.token_dim }))
            .collect::<Result<Vec<_>, ModelError>>()?;
        let layers = layer_views(&slabs, &self.layout)?;
        Ok(KvCache {
            layers,
            slabs,
            layout: self.layout.clone(),
            len: self.len,
            capacity: self.capacity,
            batch: self.batch,
        })
    }

    /// Forget the tokens after the first `len`.
    pub fn truncate(&mut self, len: i64) {
        self.len = self.len.min(len.max(0));
    }

    /// Sequences the cache holds.
    pub fn batch(&self) -> i64 {
        self.batch
    }

    /// The `n` sequences from row `from`, holding `len` tokens each, as a cache of their own that
    /// shares this one's memory: what a step writes through it lands in these rows.
    pub fn rows(&self, from: i64, n: i64, len: i64) -> Result<KvCache, ModelError> {
        if from < 0 || n < 1 || from + n > self.batch || !(0..=self.capacity).contains(&len) {
            return Err(ModelError::Shape(format!(
                "rows {from}..{} holding {len} tokens of a cache of {} rows of {} tokens",
                from + n,
                self.batch,
                self.capacity
            )));
        }
        let slabs = self
            .slabs
            .iter()
            .map(|slab| Ok(Slab { tensor: slab.tensor.f_narrow(1, from, n)?, token_dim: slab.token_dim }))
            .collect::<Result<Vec<_>, ModelError>>()?;
        let layers = layer_views(&slabs, &self.layout)?;
        Ok(KvCache { layers, slabs, layout: self.layout.clone(), len, capacity: self.capacity, batch: n })
    }

    /// Copy the first `len` tokens of row `from` over row `to` (a server moving a sequence to
    /// keep its running ones in the first rows): one copy per slab, whatever the layer count.
    pub fn move_row(&self, from: i64, to: i64, len: i64) -> Result<(), ModelError> {
        if len == 0 || from == to {
            return Ok(());
        }
        let rows = 0..self.batch;
        if !rows.contains(&from) || !rows.contains(&to) || !(0..=self.capacity).contains(&len) {
            return Err(ModelError::Shape(format!(
                "moving {len} tokens from row {from} to row {to} of a cache of {} rows of {} tokens",
                self.batch, self.capacity
            )));
        }
        for slab in &self.slabs {
            let row = |at: i64| slab.tensor.f_narrow(1, at, 1)?.f_narrow(slab.token_dim, 0, len);
            row(to)?.f_copy_(&row(from)?)?;
        }
        Ok(())
    }
}

/// `t` in new memory.
fn copy(t: &Tensor) -> Result<Tensor, ModelError> {
    let mut copy = t.f_empty_like()?;
    copy.f_copy_(t)?;
    Ok(copy)
}

/// A model: weights on one device at one precision.
pub struct Model {
    embedding: Tensor,
    blocks: Vec<Block>,
    norm: RmsNorm,
    /// `None` when tied to the embedding.
    lm_head: Option<Tensor>,
    activation: Activation,
    vocab_size: i64,
    kind: Kind,
    device: Device,
}

impl Model {
    /// Build `shape` on `device` at `precision` with weights drawn from `seed`.
    pub fn new(shape: &ModelShape, precision: Precision, device: Device, seed: u64) -> Result<Model, ModelError> {
        let at = holding(precision, device)?;
        with_generator(Some(seed), || {
            let source = WeightSource::random(shape.init_std, at.kind, device).with_fp8(at.fp8);
            Model::build(shape, &source, &identity(shape))
        })
    }

    /// `shape` in float64 on the CPU with weights drawn from `seed` on `draw` (the device the
    /// check measures, so that a GPU draws them): the reference the parity check measures a
    /// device against, after [`Model::to`] gives the device the same weights.
    pub fn reference(shape: &ModelShape, seed: u64, draw: Device) -> Result<Model, ModelError> {
        with_generator(Some(seed), || {
            let source = WeightSource::random(shape.init_std, Kind::Double, Device::Cpu).drawn_on(draw);
            Model::build(shape, &source, &identity(shape))
        })
    }

    /// `shape` with its weights read from `checkpoint` (Hugging Face names), at `precision` on
    /// `device` (`None`: float64 on the CPU, the parity reference). `layers[i]` is the checkpoint
    /// layer that layer `i` of `shape` reads, for a shape cut from a larger model.
    pub fn load(
        shape: &ModelShape,
        checkpoint: &Checkpoint,
        layers: &[u32],
        at: Option<(Device, Precision)>,
    ) -> Result<Model, ModelError> {
        let at = match at {
            Some((device, precision)) => holding(precision, device)?,
            None => Convert { device: Device::Cpu, kind: Kind::Double, fp8: None },
        };
        Model::build(shape, &WeightSource::checkpoint(checkpoint, at.kind, at.device).with_fp8(at.fp8), layers)
    }

    /// The same weights on `device` at `precision`.
    pub fn to(&self, device: Device, precision: Precision) -> Result<Model, ModelError> {
        let convert = holding(precision, device)?;
        let blocks = self
            .blocks
            .iter()
            .map(|block| {
                Ok(Block {
                    attention_norm: block.attention_norm.to(&convert)?,
                    attention: match &block.attention {
                        AttentionLayer::Gqa(a) => AttentionLayer::Gqa(a.to(&convert)?),
                        AttentionLayer::Mla(a) => AttentionLayer::Mla(a.to(&convert)?),
                    },
                    mlp_norm: block.mlp_norm.to(&convert)?,
                    mlp: match &block.mlp {
                        MlpLayer::Dense(m) => MlpLayer::Dense(m.to(&convert)?),
                        MlpLayer::Moe(m) => MlpLayer::Moe(Box::new(m.to(&convert)?)),
                    },
                })
            })
            .collect::<Result<_, ModelError>>()?;
        Ok(Model {
            embedding: convert.weight(&self.embedding)?,
            blocks,
            norm: self.norm.to(&convert)?,
            lm_head: convert.optional(&self.lm_head)?,
            activation: self.activation.clone(),
            vocab_size: self.vocab_size,
            kind: convert.kind,
            device,
        })
    }

    /// Every weight of `shape`, in a fixed order, from `source`; layer `i` is named as the
    /// checkpoint's layer `layers[i]`.
    fn build(shape: &ModelShape, source: &WeightSource, layers: &[u32]) -> Result<Model, ModelError> {
        if layers.len() != shape.num_layers as usize {
            return Err(ModelError::Shape(format!("{} layer names for {} layers", layers.len(), shape.num_layers)));
        }
        let hidden = i64::from(shape.hidden_size);
        let vocab = i64::from(shape.vocab_size);
        let eps = shape.rms_norm_eps;
        let embedding = source.tensor("model.embed_tokens.weight", &[vocab, hidden], Init::Normal)?;
        let mut blocks = Vec::with_capacity(shape.num_layers as usize);
        for (layer, &name) in (0..shape.num_layers).zip(layers) {
            let prefix = format!("model.layers.{name}");
            let attention = match &shape.attention {
                Attention::Gqa(gqa) => AttentionLayer::Gqa(GqaAttention::new(
                    source,
                    &format!("{prefix}.self_attn"),
                    gqa,
                    hidden,
                    i64::from(shape.head_dim()),
                    (i64::from(gqa.num_heads), i64::from(gqa.num_kv_heads)),
                    name,
                    eps,
                )?),
                Attention::Mla(mla) => AttentionLayer::Mla(MlaAttention::new(
                    source,
                    &format!("{prefix}.self_attn"),
                    mla,
                    hidden,
                    i64::from(mla.num_heads),
                    eps,
                )?),
            };
            let mlp = match &shape.moe {
                Some(moe) if layer >= moe.first_dense_layers => {
                    let mixtral =
                        source.loaded().is_some_and(|c| c.contains(&format!("{prefix}.block_sparse_moe.gate.weight")));
                    let (block, layout) = if moe.expert_bias {
                        ("mlp", MoeLayout::GptOss)
                    } else if mixtral {
                        ("block_sparse_moe", MoeLayout::Mixtral)
                    } else {
                        ("mlp", MoeLayout::Standard)
                    };
                    let width = i64::from(moe.intermediate_size);
                    MlpLayer::Moe(Box::new(MoeLayer::new(
                        source,
                        &format!("{prefix}.{block}"),
                        layout,
                        moe,
                        hidden,
                        width,
                    )?))
                }
                _ => {
                    let width = shape.mlp.as_ref().map(|m| m.intermediate_size).ok_or_else(|| {
                        ModelError::Shape(format!("layer {layer} has a dense MLP but the model has no [mlp]"))
                    })?;
                    MlpLayer::Dense(MergedMlp::new(Mlp::new(
                        source,
                        &format!("{prefix}.mlp"),
                        GATE_UP_DOWN,
                        hidden,
                        i64::from(width),
                        false,
                    )?)?)
                }
            };
            blocks.push(Block {
                attention_norm: RmsNorm::new(source, &format!("{prefix}.input_layernorm"), hidden, eps)?,
                attention,
                mlp_norm: RmsNorm::new(source, &format!("{prefix}.post_attention_layernorm"), hidden, eps)?,
                mlp,
            });
        }
        let norm = RmsNorm::new(source, "model.norm", hidden, eps)?;
        let lm_head = if shape.tie_word_embeddings {
            None
        } else {
            Some(source.tensor("lm_head.weight", &[vocab, hidden], Init::Normal)?)
        };
        Ok(Model {
            embedding,
            blocks,
            norm,
            lm_head,
            activation: shape.activation.clone(),
            vocab_size: vocab,
            kind: source.kind,
            device: source.device,
        })
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// The model's embedding, final norm and head alone, sharing this model's tensors (nothing
    /// is copied, drawn or read): the head-only model a layer subset is extrapolated with, which
    /// as a model of its own held a second copy of the embedding and head on the device (2.1 GB
    /// for Llama 3.1 8B at bf16) that no memory estimate counted.
    pub fn head_only(&self) -> Model {
        Model {
            embedding: self.embedding.shallow_clone(),
            blocks: Vec::new(),
            norm: RmsNorm { weight: self.norm.weight.shallow_clone(), eps: self.norm.eps },
            lm_head: self.lm_head.as_ref().map(Tensor::shallow_clone),
            activation: self.activation.clone(),
            vocab_size: self.vocab_size,
            kind: self.kind,
            device: self.device,
        }
    }

    pub fn vocab_size(&self) -> i64 {
        self.vocab_size
    }

    /// Run `tokens` (`[batch, n]`, int64) through the model after the tokens already in `cache`,
    /// appending their keys and values to it; returns logits at accumulation precision (fp32, fp64
    /// for the reference) for the positions `logits` asks.
    pub fn forward(&self, tokens: &Tensor, cache: &mut KvCache, logits: Logits) -> Result<Tensor, ModelError> {
        let x = self.hidden(tokens, cache)?;
        self.head(&x, logits)
    }

    /// The final hidden states of `tokens` (`[batch, n]`) after the tokens already in `cache`,
    /// appending their keys and values to it.
    fn hidden(&self, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor, ModelError> {
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
        // Every layer of a model shares its RoPE configuration: one table per forward.
        let table = match self.blocks.first().map(|b| &b.attention) {
            Some(AttentionLayer::Gqa(a)) => Some(a.rope.table(start, n, self.kind)?),
            Some(AttentionLayer::Mla(a)) => Some(a.rope.table(start, n, self.kind)?),
            None => None,
        };
        let x = self.layers(tokens, cache, table.as_ref(), Place::Host(start))?;
        cache.len = start + n;
        Ok(x)
    }

    /// One decode step whose kernels and their host-side arguments are the same at every
    /// position, so that it can be captured once as a graph and replayed: it reads `tokens`
    /// (`[batch, 1]`) at the position held on the device in `position` (`[1]`, int64), writes
    /// their keys and values there, and attends over the cache's whole capacity with the keys
    /// after the position masked out. Nothing here reads a value back to the host, and the
    /// cache's host-side length is left alone. Returns the last position's logits, as
    /// [`Model::forward`] does. The attention work is that of the whole capacity.
    pub fn decode_on_device(&self, tokens: &Tensor, cache: &KvCache, position: &Tensor) -> Result<Tensor, ModelError> {
        self.decode_rows(tokens, cache, position, cache.capacity)
    }

    /// One decode step of sequences at different lengths, as a serving engine batches them: row
    /// `r` reads `tokens[r]` at the position `positions[r]` held on the device (`positions` is
    /// `[batch]`, or `[1]` for every row alike; int64), writes its keys and values there, and
    /// attends the cache's first `span` keys with those after its position masked out (`span`
    /// is one more than the largest position, or more). Returns logits `[batch, 1, vocab]`; the
    /// cache's host-side length is left alone. The attention work is that of `span` keys a row.
    pub fn decode_rows(
        &self,
        tokens: &Tensor,
        cache: &KvCache,
        positions: &Tensor,
        span: i64,
    ) -> Result<Tensor, ModelError> {
        let size = tokens.size();
        if size != [cache.batch, 1] {
            return Err(ModelError::Shape(format!("tokens must be [{}, 1], got {size:?}", cache.batch)));
        }
        let rows = positions.size();
        if rows != [1] && rows != [cache.batch] {
            return Err(ModelError::Shape(format!("positions must be [1] or [{}], got {rows:?}", cache.batch)));
        }
        if !(1..=cache.capacity).contains(&span) {
            return Err(ModelError::CacheFull { capacity: cache.capacity, needed: span });
        }
        let table = match self.blocks.first().map(|b| &b.attention) {
            Some(AttentionLayer::Gqa(a)) => Some(a.rope.table_at(positions, self.kind)?.per_row()?),
            Some(AttentionLayer::Mla(a)) => Some(a.rope.table_at(positions, self.kind)?.per_row()?),
            None => None,
        };
        let keys = scalar_call(|| Tensor::f_arange(span, (Kind::Int64, self.device)))?;
        let windows = self.blocks.iter().map(|b| match &b.attention {
            AttentionLayer::Gqa(a) => a.window(),
            AttentionLayer::Mla(_) => None,
        });
        let masks = StepMasks::new(positions, &keys, windows)?;
        let x =
            self.layers(tokens, cache, table.as_ref(), Place::Device { position: positions, span, masks: &masks })?;
        self.head(&x, Logits::Last)
    }

    /// The prefill step of prompts of different lengths, padded on the right to one length as a
    /// serving engine batches them: `prompts` (`[batch, len]`) into an empty `cache`, and each
    /// row's first generated token (greedy, `[batch, 1]`) from the logits at its own last prompt
    /// position, `last` (`[batch]`, int64, on the device). A row's padding comes after its
    /// prompt, so causal attention keeps it out of the prompt's tokens; its keys and values are
    /// in the cache past the row's length, where a decode step's mask keeps them out and its
    /// writes replace them.
    pub fn prefill_rows(&self, prompts: &Tensor, last: &Tensor, cache: &mut KvCache) -> Result<Tensor, ModelError> {
        cache.clear();
        let x = self.hidden(prompts, cache)?;
        let [batch, _, hidden] = x.size()[..] else { unreachable!("hidden states are 3-d") };
        let index = last.f_view([batch, 1, 1])?.f_expand([batch, 1, hidden], false)?;
        let x = x.f_gather(1, &index, false)?;
        Ok(self.head(&x, Logits::All)?.f_argmax(-1, false)?)
    }

    /// The blocks over `tokens` placed at `place` in `cache`: the last block's output.
    fn layers(
        &self,
        tokens: &Tensor,
        cache: &KvCache,
        table: Option<&RopeTable>,
        place: Place,
    ) -> Result<Tensor, ModelError> {
        let mut x = Tensor::f_embedding(&self.embedding, tokens, -1, false, false)?;
        for (block, layer_cache) in self.blocks.iter().zip(&cache.layers) {
            let table = table.expect("a model with blocks has a RoPE table");
            let normed = block.attention_norm.forward(&x)?;
            let attended = match (&block.attention, layer_cache) {
                (AttentionLayer::Gqa(a), LayerCache::Gqa(c)) => a.forward(&normed, c, table, place)?,
                (AttentionLayer::Mla(a), LayerCache::Mla(c)) => a.forward(&normed, c, table, place)?,
                _ => return Err(ModelError::Shape("KV cache built for another model".to_owned())),
            };
            x = x.f_add(&attended)?;
            let normed = block.mlp_norm.forward(&x)?;
            let mlp = match &block.mlp {
                MlpLayer::Dense(mlp) => mlp.forward(&normed, &self.activation)?,
                MlpLayer::Moe(moe) => moe.forward(&normed, &self.activation)?,
            };
            x = x.f_add(&mlp)?;
        }
        Ok(x)
    }

    /// The final norm and lm head over the positions of `x` (`[batch, n, hidden]`) that `logits`
    /// asks, at accumulation precision.
    fn head(&self, x: &Tensor, logits: Logits) -> Result<Tensor, ModelError> {
        let n = x.size()[1];
        let x = match logits {
            Logits::All => x.shallow_clone(),
            Logits::Last => x.f_narrow(1, n - 1, 1)?,
        };
        let head = self.lm_head.as_ref().unwrap_or(&self.embedding);
        Ok(self.norm.forward(&x)?.f_linear::<Tensor>(head, None)?.f_to_kind(accumulation_kind(self.kind))?)
    }

    /// The attention kernel a step of `n` tokens per sequence after the `cache`'s context runs:
    /// the first layer's (the layers of a model attend alike, but gpt-oss's sliding ones, whose
    /// sinks take the explicit path as every layer of gpt-oss does).
    pub fn attention_kernel(&self, cache: &KvCache, n: i64) -> Result<Option<AttentionKernel>, ModelError> {
        let start = cache.len;
        match (self.blocks.first().map(|b| &b.attention), cache.layers.first()) {
            (Some(AttentionLayer::Gqa(a)), Some(LayerCache::Gqa(c))) => a.kernel(c, start, n).map(Some),
            (Some(AttentionLayer::Mla(a)), Some(LayerCache::Mla(c))) => a.kernel(c, start, n).map(Some),
            (None, _) => Ok(None),
            _ => Err(ModelError::Shape("KV cache built for another model".to_owned())),
        }
    }

    /// The attention kernel a graph-safe decode step ([`Model::decode_on_device`]) over `cache`
    /// runs: SDPA's choice for one masked query over the whole capacity (MLA and gpt-oss's sinks
    /// attend explicitly).
    pub fn device_attention_kernel(&self, cache: &KvCache) -> Result<Option<AttentionKernel>, ModelError> {
        match (self.blocks.first().map(|b| &b.attention), cache.layers.first()) {
            (Some(AttentionLayer::Gqa(a)), Some(LayerCache::Gqa(c))) => a.device_kernel(c).map(Some),
            (Some(AttentionLayer::Mla(_)), Some(LayerCache::Mla(_))) => Ok(Some(AttentionKernel::Explicit)),
            (None, _) => Ok(None),
            _ => Err(ModelError::Shape("KV cache built for another model".to_owned())),
        }
    }

    /// Calibrate every e4m3 layer's input scale once, as serving engines run fp8: the largest
    /// |input| each layer sees over `tokens` (`[batch, n]`, a prompt from its own seed), / the
    /// format's largest value (448, or 240 for e4m3fnuz), kept static from then on in place of an
    /// amax and a division in every call. How many layers took a static scale (0 for a model
    /// without fp8 layers).
    pub fn calibrate_fp8(&self, tokens: &Tensor) -> Result<usize, ModelError> {
        let inputs = self.fp8_inputs();
        if inputs.is_empty() {
            return Ok(0);
        }
        // The prompt may be drawn on the host (the parity check's is): the model's own device
        // runs it (a host prompt failed the first GPU run's fp8 parity in `index_select`).
        let tokens = tokens.f_to_device(self.device())?;
        inputs.iter().for_each(|input| input.begin_calibration());
        let mut cache = KvCache::new(self, tokens.size()[0], tokens.size()[1])?;
        let pass = self.forward(&tokens, &mut cache, Logits::Last);
        let mut calibrated = 0;
        for input in &inputs {
            calibrated += usize::from(input.end_calibration()?);
        }
        let _logits = pass?;
        Ok(calibrated)
    }

    /// Widen every e4m3 weight once to what a call widens it to (fp32 times its scale in a linear
    /// layer, as libtorch's CPU `_scaled_mm` computes without oneDNN; bf16 in a mixture of
    /// experts' stacks) and multiply at that width from now on: the same products, with one
    /// conversion of each weight where each call made one ([`crate::linear::Linear::widen`]).
    /// For a copy that only checks another's parity: on this project's 2-core host the parity
    /// check's host copy of Llama 3.1 8B's two layers at fp8 took 36 s to make, calibrate and
    /// run, 15 s widened. How many layers (a mixture of experts' bank counts once) were e4m3.
    pub fn widen_fp8(&self) -> Result<usize, ModelError> {
        let mut widened = 0;
        for block in &self.blocks {
            let mut linears = match &block.attention {
                AttentionLayer::Gqa(a) => a.linears(),
                AttentionLayer::Mla(a) => a.linears(),
            };
            match &block.mlp {
                MlpLayer::Dense(m) => linears.extend(m.linears()),
                MlpLayer::Moe(m) => widened += m.widen_fp8()?,
            }
            for linear in linears {
                widened += usize::from(linear.widen()?);
            }
        }
        Ok(widened)
    }

    /// The e4m3 format the model's fp8 layers use (`None` without fp8 layers).
    pub fn fp8_format(&self) -> Option<crate::linear::Fp8Format> {
        self.fp8_inputs().first().map(|input| input.format())
    }

    /// How each e4m3 layer scales its inputs.
    fn fp8_inputs(&self) -> Vec<&Fp8Input> {
        let mut inputs = Vec::new();
        for block in &self.blocks {
            let attention = match &block.attention {
                AttentionLayer::Gqa(a) => a.linears(),
                AttentionLayer::Mla(a) => a.linears(),
            };
            inputs.extend(attention.into_iter().filter_map(Linear::fp8_input));
            match &block.mlp {
                MlpLayer::Dense(m) => inputs.extend(m.linears().into_iter().filter_map(Linear::fp8_input)),
                MlpLayer::Moe(m) => inputs.extend(m.fp8_inputs()),
            }
        }
        inputs
    }

    /// How a step of `tokens` tokens (batch × tokens a sequence) runs a mixture of experts' layers;
    /// `None` for a dense model.
    pub fn expert_kernel(&self, tokens: i64) -> Option<lynx_schema::result::ExpertKernel> {
        self.moe_layers().next().map(|moe| moe.kernel(tokens))
    }

    /// The model's mixture-of-experts layers, in order.
    fn moe_layers(&self) -> impl Iterator<Item = &MoeLayer> {
        self.blocks.iter().filter_map(|block| match &block.mlp {
            MlpLayer::Moe(moe) => Some(moe.as_ref()),
            MlpLayer::Dense(_) => None,
        })
    }

    /// Run `step`, tallying the distinct experts each mixture-of-experts layer routes its tokens
    /// to; the step's value and the mean count over the layers' calls (`None` for a dense model).
    /// Each count is read on the host, so the step waits for the device in every MoE layer: tally
    /// an untimed step only.
    pub fn tally_experts<T>(
        &self,
        step: impl FnOnce() -> Result<T, ModelError>,
    ) -> Result<(T, Option<f64>), ModelError> {
        for layer in self.moe_layers() {
            layer.tallying(true);
        }
        let value = step();
        let counts: Vec<i64> = self.moe_layers().flat_map(|layer| layer.tallying(false)).collect();
        let mean = (!counts.is_empty()).then(|| counts.iter().sum::<i64>() as f64 / counts.len() as f64);
        Ok((value?, mean))
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
        Ok(with_generator(None, || Tensor::f_randint(self.vocab_size, [batch, len], (Kind::Int64, self.device)))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::config::{ModelShape, Precision};

    /// A random fill draws Normal(0, 1) values into the first `len` tokens of every layer's
    /// cache tensors, GQA's and MLA's, and leaves the tokens past them as they were.
    #[test]
    fn a_random_fill_draws_the_held_tokens_and_no_others() {
        let gqa = "name = \"gqa\"\nvocab_size = 97\nhidden_size = 64\nnum_layers = 2\nrms_norm_eps = 1e-5\n\
                   [attention]\nkind = \"gqa\"\nnum_heads = 8\nnum_kv_heads = 2\nrope_theta = 10000.0\n\
                   [mlp]\nintermediate_size = 160\n";
        let mla = "name = \"mla\"\nvocab_size = 97\nhidden_size = 64\nnum_layers = 2\nrms_norm_eps = 1e-6\n\
                   [attention]\nkind = \"mla\"\nnum_heads = 4\nq_lora_rank = 24\nkv_lora_rank = 16\n\
                   qk_nope_head_dim = 8\nqk_rope_head_dim = 4\nv_head_dim = 8\nrope_theta = 10000.0\n\
                   [mlp]\nintermediate_size = 128\n";
        for (file, text) in [("gqa", gqa), ("mla", mla)] {
            let model =
                Model::new(&ModelShape::from_toml(text, file).unwrap(), Precision::Fp32, Device::Cpu, 1).unwrap();
            let mut cache = KvCache::new(&model, 8, 40).unwrap();
            cache.fill_random(25).unwrap();
            assert_eq!(cache.len(), 25);
            let mut drawn = Vec::new();
            for layer in &cache.layers {
                let tensors = match layer {
                    LayerCache::Gqa(c) => vec![(&c.keys, 2), (&c.values, 2)],
                    LayerCache::Mla(c) => vec![(&c.latent_and_rope, 1)],
                };
                for (tensor, token_dim) in tensors {
                    let held = tensor.narrow(token_dim, 0, 25);
                    assert_eq!(held.eq(0.0).sum(Kind::Int64).int64_value(&[]), 0, "{file}: a held token is zero");
                    let past = tensor.narrow(token_dim, 25, 15);
                    assert_eq!(past.ne(0.0).sum(Kind::Int64).int64_value(&[]), 0, "{file}: a token past 25 was drawn");
                    drawn.push(held.flatten(0, -1));
                }
            }
            let drawn = Tensor::cat(&drawn, 0);
            let (mean, std) = (drawn.mean(Kind::Double).double_value(&[]), drawn.std(true).double_value(&[]));
            assert!(drawn.size()[0] >= 5_000, "{file}: too few values to judge");
            assert!(mean.abs() < 0.05 && (std - 1.0).abs() < 0.05, "{file}: mean {mean}, std {std}");
        }
    }

    /// A step's masks are made once for each window its layers attend within (gpt-oss
    /// alternates a 128-position window with none), each the mask a layer made for itself.
    #[test]
    fn a_steps_masks_are_made_once_a_window() {
        let position = Tensor::from_slice(&[3i64, 6]);
        let keys = Tensor::arange(8, (Kind::Int64, Device::Cpu));
        let masks = StepMasks::new(&position, &keys, [None, Some(2), None, Some(2)]).unwrap();
        assert_eq!(masks.0.len(), 2);
        for window in [None, Some(2)] {
            let mask = Place::device_mask(&position, &keys, window).unwrap();
            assert!(masks.find(window).unwrap().allowed.equal(&mask));
            assert!(masks.blocked(window).unwrap().equal(&mask.logical_not()));
            // Made once: the second ask answers the same tensor.
            assert_eq!(masks.blocked(window).unwrap().data_ptr(), masks.blocked(window).unwrap().data_ptr());
        }
        // Row 1 at position 6 within 2: keys 5 and 6.
        let row: Vec<bool> = Vec::try_from(masks.find(Some(2)).unwrap().allowed.get(1)).unwrap();
        assert_eq!(row, [false, false, false, false, false, true, true, false]);
        let missing = masks.find(Some(3)).err().unwrap().to_string();
        assert_eq!(missing, "the step made no mask for a layer attending within a window of 3");
    }

    /// SDPA is given the additive mask ATen would make of the boolean one (0, or −∞ where this
    /// CPU's kernel is chosen; cuDNN's fill is −65504), made once a step at the queries' type,
    /// and attends exactly as with the boolean mask; operands of another size choose afresh.
    #[test]
    fn sdpa_is_given_the_additive_mask_aten_would_make_once_a_step() {
        assert_eq!(blocked_fill(CUDNN_ATTENTION), -65504.0);
        assert_eq!(blocked_fill(0), f64::NEG_INFINITY);
        let position = Tensor::from_slice(&[3i64, 6]);
        let keys = Tensor::arange(8, (Kind::Int64, Device::Cpu));
        let masks = StepMasks::new(&position, &keys, [None, Some(2)]).unwrap();
        let (q, k, v) = with_generator(Some(5), || {
            let draw = |heads: i64, n: i64| Tensor::randn([2, heads, n, 16], (Kind::Float, Device::Cpu));
            (draw(4, 1), draw(2, 8), draw(2, 8))
        });
        for kind in [Kind::Float, Kind::BFloat16] {
            let (q, k, v) = (q.to_kind(kind), k.to_kind(kind), v.to_kind(kind));
            for window in [None, Some(2)] {
                let masks = StepMasks::new(&position, &keys, [window]).unwrap();
                let mask = masks.for_sdpa(window, (&q, &k, &v)).unwrap();
                assert_eq!((mask.kind(), mask.size()), (kind, vec![2, 1, 1, 8]));
                let allowed = masks.find(window).unwrap().allowed.view([2, 1, 1, 8]);
                let expected = Tensor::zeros([], (kind, Device::Cpu)).where_scalarother(&allowed, f64::NEG_INFINITY);
                assert!(mask.equal(&expected), "{kind:?} {window:?}");
                assert_eq!(mask.data_ptr(), masks.for_sdpa(window, (&q, &k, &v)).unwrap().data_ptr(), "made once");
                let attend = |mask: &Tensor| {
                    Tensor::scaled_dot_product_attention(&q, &k, &v, Some(mask), 0.0, false, None, true)
                };
                assert!(attend(&mask).equal(&attend(&allowed)), "{kind:?} {window:?}");
            }
        }
        // Queries of another size (here 8 heads) choose for themselves; the step's choice stays.
        let mask = masks.for_sdpa(None, (&q, &k, &v)).unwrap();
        let wider = Tensor::zeros([2, 8, 1, 16], (Kind::Float, Device::Cpu));
        let other = masks.for_sdpa(None, (&wider, &k, &v)).unwrap();
        assert!(other.equal(&mask) && other.data_ptr() != mask.data_ptr());
        assert_eq!(masks.for_sdpa(None, (&q, &k, &v)).unwrap().data_ptr(), mask.data_ptr());
    }

    /// Every layer's keys and values of one shape are views of one slab, so that a server's row
    /// move is one copy (one kernel on a GPU) rather than two per layer; the views alias the
    /// slab, so what a layer writes is what the move copies.
    #[test]
    fn a_row_move_is_one_copy_for_all_layers_of_a_shape() {
        let text = include_str!("../../../models/lynx-ref-small.toml");
        let mut shape = ModelShape::from_toml(text, "lynx-ref-small.toml").unwrap();
        shape.num_layers = shape.num_layers.min(4);
        let model = Model::new(&shape, Precision::Fp32, Device::Cpu, 1).unwrap();
        let pool = KvCache::new(&model, 3, 8).unwrap();
        assert_eq!(pool.slabs.len(), 1, "keys and values of every layer in one slab");
        assert_eq!(pool.slabs[0].tensor.size()[0], 2 * pool.layers.len() as i64);
        let LayerCache::Gqa(last) = pool.layers.last().unwrap() else { panic!("a GQA model") };
        let _ = last.values.narrow(0, 2, 1).narrow(2, 0, 5).fill_(7.0);
        pool.move_row(2, 0, 5).unwrap();
        assert_eq!(last.values.narrow(0, 0, 1).narrow(2, 0, 5).mean(Kind::Float).double_value(&[]), 7.0);
        assert_eq!(last.values.narrow(0, 0, 1).narrow(2, 5, 3).abs().sum(Kind::Float).double_value(&[]), 0.0);
        let rows = pool.rows(1, 2, 0).unwrap();
        rows.move_row(1, 0, 5).unwrap();
        let LayerCache::Gqa(moved) = pool.layers.last().unwrap() else { panic!("a GQA model") };
        assert_eq!(moved.values.narrow(0, 1, 1).narrow(2, 0, 5).mean(Kind::Float).double_value(&[]), 7.0);
        assert!(pool.move_row(0, 3, 1).is_err() && pool.move_row(0, 1, 9).is_err());
    }

    /// The float64 reference holds the values an fp32 model of the same seed draws, exactly
    /// (both are drawn in fp32): every weight, widened, is that model's.
    #[test]
    fn the_reference_holds_the_weights_an_fp32_model_draws() {
        let text = include_str!("../../../models/lynx-ref-small.toml");
        let mut shape = ModelShape::from_toml(text, "lynx-ref-small.toml").unwrap();
        shape.num_layers = 2;
        let reference = Model::reference(&shape, 7, Device::Cpu).unwrap();
        let fp32 = Model::new(&shape, Precision::Fp32, Device::Cpu, 7).unwrap();
        assert_eq!(reference.embedding.kind(), Kind::Double);
        // Every weight, in the order the models hold them: what the test claims, rather than
        // logits that follow from it.
        let weights = |model: &Model| -> Vec<Tensor> {
            let mut all = vec![model.embedding.shallow_clone(), model.norm.weight.shallow_clone()];
            all.extend(model.lm_head.iter().map(Tensor::shallow_clone));
            for block in &model.blocks {
                all.extend([block.attention_norm.weight.shallow_clone(), block.mlp_norm.weight.shallow_clone()]);
                let mut linears = match &block.attention {
                    AttentionLayer::Gqa(a) => a.linears(),
                    AttentionLayer::Mla(a) => a.linears(),
                };
                if let MlpLayer::Dense(m) = &block.mlp {
                    linears.extend(m.linears());
                }
                all.extend(linears.into_iter().map(|l| l.dense_weight(Kind::Double).unwrap()));
            }
            all.into_iter().map(|t| t.to_kind(Kind::Double)).collect()
        };
        let (held, drawn) = (weights(&reference), weights(&fp32));
        assert_eq!(held.len(), drawn.len());
        assert!(held.len() > 6, "the blocks' linear layers too: {}", held.len());
        for (i, (a, b)) in held.iter().zip(&drawn).enumerate() {
            assert!(a.equal(b), "weight {i} of {}", held.len());
        }
        let other = Model::reference(&shape, 8, Device::Cpu).unwrap();
        assert!(!other.embedding.equal(&reference.embedding));
    }
}
