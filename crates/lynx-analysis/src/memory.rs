//! What a cell needs of the device's memory beyond the model's weights (which are resident
//! before the first cell), so that a cell that cannot fit is recorded as skipped, with both
//! figures, instead of being allocated; and how many tokens a decode cell's KV cache holds.
//!
//! The estimate is the KV cache as lynx allocates it (every layer, the cache's whole capacity)
//! plus the step's largest transient tensors: the activations of one layer, the logits, the
//! experts' working set (gathered weights, or every expert's outputs) and attention scores where
//! the step materialises them (lynx's explicit paths; SDPA's fused kernels do not). It errs
//! high by a quarter for the allocator's rounding and fragmentation; a cell it lets through
//! that still runs out of memory is recorded as out of memory, as before.

use lynx_schema::config::{Attention, MeasureConfig, ModelShape, Precision};
use lynx_schema::result::CellShape;

/// The allowance on top of the estimate for the allocator's rounding and fragmentation.
const SLACK: f64 = 1.25;

/// A cell's memory beyond the resident weights.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CellMemory {
    /// The KV cache as allocated: batch × capacity tokens in every layer.
    pub kv_cache_bytes: u64,
    /// The step's largest transient tensors, with the slack.
    pub workspace_bytes: u64,
}

impl CellMemory {
    pub fn total_bytes(&self) -> u64 {
        self.kv_cache_bytes.saturating_add(self.workspace_bytes)
    }

    /// Why a cell with this estimate cannot run in `free_bytes`, or `None` when it fits.
    pub fn refusal(&self, free_bytes: u64) -> Option<String> {
        (self.total_bytes() > free_bytes).then(|| {
            format!(
                "needs an estimated {} (KV cache {}, workspace {}) beyond the weights; {} free",
                gib(self.total_bytes()),
                gib(self.kv_cache_bytes),
                gib(self.workspace_bytes),
                gib(free_bytes)
            )
        })
    }
}

/// `bytes` in GiB, two decimals: how refusals state memory.
pub fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The memory `cell` needs on `shape` at `precision`, its cache holding `capacity` tokens a
/// sequence.
pub fn cell_memory(shape: &ModelShape, precision: Precision, cell: CellShape, capacity: u64) -> CellMemory {
    let batch = u64::from(cell.batch());
    let (tokens_per_sequence, keys) = match cell {
        CellShape::Prefill { prompt_len, .. } => (u64::from(prompt_len), u64::from(prompt_len)),
        CellShape::Decode { .. } => (1, capacity),
    };
    CellMemory {
        kv_cache_bytes: shape.kv_cache_bytes(precision, batch, capacity),
        workspace_bytes: workspace_bytes(shape, precision, batch, tokens_per_sequence, keys),
    }
}

/// The serving loop's KV pool and its steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pool {
    /// Rows of the pool (the batch cap, and one more with chunked prefill).
    pub rows: u32,
    /// Tokens a row holds: the longest request, prompt and output.
    pub capacity: u32,
    /// The largest prefill step: prompts in it, and tokens of each (the longest prompt, or a
    /// chunk).
    pub prefill_batch: u32,
    pub prefill_tokens: u32,
    /// The most keys a prefill step's tokens attend: the longest prompt.
    pub prefill_keys: u32,
    /// Decode steps replayed as graphs, one captured at each batch of
    /// [`crate::sim::ladder_to`] the rows: each graph keeps its step's transient tensors, at most
    /// twice the largest's together (the batches double).
    pub graphs: bool,
}

/// The memory the serving loop needs on `shape` at `precision` beyond the weights: its whole
/// pool, allocated up front, and the workspace of the larger of its steps (a decode step of
/// every row attending the whole capacity, twice over with graphs, or its largest prefill step).
pub fn pool_memory(shape: &ModelShape, precision: Precision, pool: Pool) -> CellMemory {
    let rows = u64::from(pool.rows);
    let capacity = u64::from(pool.capacity);
    let graphs = if pool.graphs { 2 } else { 1 };
    let decode = workspace_bytes(shape, precision, rows, 1, capacity).saturating_mul(graphs);
    let prefill = workspace_bytes(
        shape,
        precision,
        u64::from(pool.prefill_batch),
        u64::from(pool.prefill_tokens),
        u64::from(pool.prefill_keys),
    );
    CellMemory { kv_cache_bytes: shape.kv_cache_bytes(precision, rows, capacity), workspace_bytes: decode.max(prefill) }
}

/// A step's largest transient tensors, with the slack: `batch` sequences of
/// `tokens_per_sequence` new tokens, each attending `keys` keys.
fn workspace_bytes(shape: &ModelShape, precision: Precision, batch: u64, tokens_per_sequence: u64, keys: u64) -> u64 {
    let tokens = (batch * tokens_per_sequence) as f64;
    let act = precision.activation_bytes() as f64;
    let hidden = f64::from(shape.hidden_size);
    let dense_width = shape.mlp.as_ref().map_or(0.0, |m| f64::from(m.intermediate_size));
    let moe_width = shape.moe.as_ref().map_or(0.0, |m| f64::from(m.intermediate_size));
    let (heads, head_width) = match &shape.attention {
        Attention::Gqa(gqa) => (f64::from(gqa.num_heads), f64::from(shape.head_dim())),
        Attention::Mla(mla) => {
            (f64::from(mla.num_heads), f64::from(mla.kv_lora_rank) + f64::from(mla.qk_rope_head_dim))
        }
    };
    // One layer's activations: the residual and its norm, queries, keys and values, attention
    // output, and the MLP's gate, up and product, each alive at once at worst.
    let layer = tokens * (4.0 * hidden + 3.0 * heads * head_width + 3.0 * dense_width.max(moe_width)) * act;
    // Logits of the last position, at fp32, and the argmax's copy.
    let logits = 2.0 * batch as f64 * f64::from(shape.vocab_size) * 4.0;
    let experts = shape.moe.as_ref().map_or(0.0, |moe| {
        let pairs = tokens * f64::from(moe.experts_per_token);
        let count = f64::from(moe.num_experts);
        let expert_weights = 3.0 * hidden * moe_width * precision.activation_bytes() as f64;
        let outputs = |rows: f64| rows * (2.0 * moe_width + hidden) * act;
        // Gathered while pairs < experts (their weights copied), else every expert's outputs.
        if pairs < count {
            pairs * expert_weights + outputs(pairs)
        } else {
            outputs(count * tokens)
        }
    });
    let explicit_attention = match &shape.attention {
        Attention::Gqa(gqa) => gqa.sinks,
        Attention::Mla(_) => true,
    };
    // Scores at fp32 and their softmax, for every head, query and key.
    let scores = if explicit_attention { 2.0 * heads * tokens * keys as f64 * 4.0 } else { 0.0 };
    (SLACK * (layer + logits + experts + scores)) as u64
}

/// The memory the skip test holds `cell` to before it runs: its cache with the least room a
/// decode cell is measured with (`min_steps` timed steps; a prefill's prompt), which the run
/// and its wall-time estimate both judge against the free memory.
pub fn fit_memory(shape: &ModelShape, precision: Precision, cell: CellShape, limits: &MeasureConfig) -> CellMemory {
    let capacity = match cell {
        CellShape::Prefill { prompt_len, .. } => u64::from(prompt_len),
        CellShape::Decode { ctx, .. } => decode_capacity(ctx, limits.min_steps),
    };
    cell_memory(shape, precision, cell, capacity)
}

/// Whether `cell` fits in `free_bytes` by the skip test's estimate ([`fit_memory`]); where the
/// free memory is not known, it is taken to fit (a cell that then runs out is recorded so).
pub fn fits(
    shape: &ModelShape,
    precision: Precision,
    cell: CellShape,
    limits: &MeasureConfig,
    free_bytes: Option<u64>,
) -> bool {
    free_bytes.is_none_or(|free| fit_memory(shape, precision, cell, limits).refusal(free).is_none())
}

/// Timed steps a decode cell is expected to take, from an untimed step's time: enough for
/// `min_s` twice over (steps slow as the context grows, and a shared host's steps vary: a cell
/// whose cache room ran out would be measured for less than `min_s`), and never fewer than
/// `min_steps` or more than `max_steps`.
pub fn expected_decode_steps(limits: &MeasureConfig, step_s: f64) -> u32 {
    let for_time = if step_s > 0.0 && step_s.is_finite() {
        (2.0 * limits.min_s / step_s).ceil() + 2.0
    } else {
        f64::from(limits.max_steps)
    };
    (for_time.min(f64::from(limits.max_steps)) as u32).clamp(limits.min_steps.min(limits.max_steps), limits.max_steps)
}

/// Tokens a decode cell's cache holds: its context, its two untimed steps (the first pays for
/// first-call set-up; the second's time predicts the rest), and `steps` timed ones.
pub fn decode_capacity(ctx: u32, steps: u32) -> u64 {
    u64::from(ctx) + 2 + u64::from(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(extra: &str) -> ModelShape {
        ModelShape::from_toml(
            &format!("name = \"m\"\nvocab_size = 1000\nhidden_size = 64\nnum_layers = 4\nrms_norm_eps = 1e-5\n{extra}"),
            "m",
        )
        .unwrap()
    }

    fn dense() -> ModelShape {
        shape("[attention]\nkind = \"gqa\"\nnum_heads = 4\nnum_kv_heads = 2\nrope_theta = 1e4\n[mlp]\nintermediate_size = 128\n")
    }

    #[test]
    fn the_cache_is_counted_as_allocated_and_grows_with_batch_and_capacity() {
        let m = dense();
        let cell = |batch| CellShape::decode(batch, 100);
        let one = cell_memory(&m, Precision::Bf16, cell(1), 200);
        // 2 × kv_heads × head_dim elements per token per layer, 4 layers, 2 bytes.
        assert_eq!(one.kv_cache_bytes, 200 * 4 * (2 * 2 * 16) * 2);
        let eight = cell_memory(&m, Precision::Bf16, cell(8), 200);
        assert_eq!(eight.kv_cache_bytes, 8 * one.kv_cache_bytes);
        assert!(eight.workspace_bytes > one.workspace_bytes);
        assert_eq!(cell_memory(&m, Precision::Bf16, cell(1), 400).kv_cache_bytes, 2 * one.kv_cache_bytes);
    }

    #[test]
    fn a_cell_is_refused_only_past_the_free_memory_and_says_both_figures() {
        let estimate = CellMemory { kv_cache_bytes: 3 << 30, workspace_bytes: 1 << 30 };
        assert_eq!(estimate.refusal(4 << 30), None);
        let refusal = estimate.refusal((4 << 30) - 1).unwrap();
        assert!(
            refusal.contains("4.00 GiB (KV cache 3.00 GiB, workspace 1.00 GiB)") && refusal.contains("4.00 GiB free")
        );
    }

    #[test]
    fn explicit_attention_counts_its_scores() {
        let mla = shape(
            "[attention]\nkind = \"mla\"\nnum_heads = 8\nkv_lora_rank = 32\nqk_nope_head_dim = 16\nqk_rope_head_dim = 8\n\
             v_head_dim = 16\nrope_theta = 1e4\n[mlp]\nintermediate_size = 128\n",
        );
        let short = cell_memory(&mla, Precision::Fp32, CellShape::Prefill { batch: 1, prompt_len: 64 }, 64);
        let long = cell_memory(&mla, Precision::Fp32, CellShape::Prefill { batch: 1, prompt_len: 256 }, 256);
        // Scores grow with the square of the prompt; everything else linearly.
        assert!(long.workspace_bytes > 8 * short.workspace_bytes, "{short:?} {long:?}");
    }

    /// The serving loop's pool is counted whole, and its workspace is that of its larger step: a
    /// decode step of every row over the whole capacity against its largest prefill step.
    #[test]
    fn the_serving_pool_is_counted_whole_with_its_larger_step() {
        let m = dense();
        let pool = Pool { rows: 9, capacity: 300, prefill_batch: 1, prefill_tokens: 4, prefill_keys: 4, graphs: false };
        let memory = pool_memory(&m, Precision::Bf16, pool);
        assert_eq!(memory.kv_cache_bytes, m.kv_cache_bytes(Precision::Bf16, 9, 300));
        let decode = cell_memory(&m, Precision::Bf16, CellShape::decode(9, 299), 300);
        assert_eq!(memory.workspace_bytes, decode.workspace_bytes, "a decode step of every row is the larger");
        let graphs = pool_memory(&m, Precision::Bf16, Pool { graphs: true, ..pool });
        assert_eq!(graphs.workspace_bytes, 2 * decode.workspace_bytes, "a graph at each batch keeps its tensors");
        let long = Pool { prefill_batch: 8, prefill_tokens: 256, prefill_keys: 256, ..pool };
        let prefill = cell_memory(&m, Precision::Bf16, CellShape::Prefill { batch: 8, prompt_len: 256 }, 256);
        let memory = pool_memory(&m, Precision::Bf16, long);
        assert_eq!(memory.workspace_bytes, prefill.workspace_bytes, "eight prompts of 256 tokens are the larger");
        assert_eq!(memory.kv_cache_bytes, m.kv_cache_bytes(Precision::Bf16, 9, 300), "the pool, not the prompts");
        // A chunk's scores span every key of the prompt so far, not only the chunk's.
        let mla = shape(
            "[attention]\nkind = \"mla\"\nnum_heads = 8\nkv_lora_rank = 32\nqk_nope_head_dim = 16\nqk_rope_head_dim = 8\n\
             v_head_dim = 16\nrope_theta = 1e4\n[mlp]\nintermediate_size = 128\n",
        );
        let chunk = |keys| Pool {
            rows: 1,
            capacity: 8,
            prefill_batch: 1,
            prefill_tokens: 64,
            prefill_keys: keys,
            graphs: false,
        };
        let near = pool_memory(&mla, Precision::Fp32, chunk(64)).workspace_bytes;
        let far = pool_memory(&mla, Precision::Fp32, chunk(4096)).workspace_bytes;
        assert!(far > 16 * near, "{near} {far}");
    }

    /// A pool past what 64 bits count (a shape no validation has seen) saturates: it is
    /// refused at any free memory, and counting it does not overflow.
    #[test]
    fn a_pool_too_large_to_count_saturates() {
        let mut mla = shape(
            "[attention]\nkind = \"mla\"\nnum_heads = 8\nkv_lora_rank = 32\nqk_nope_head_dim = 16\nqk_rope_head_dim = 8\n\
             v_head_dim = 16\nrope_theta = 1e4\n[mlp]\nintermediate_size = 128\n",
        );
        if let Attention::Mla(attention) = &mut mla.attention {
            (attention.num_heads, attention.kv_lora_rank, attention.qk_rope_head_dim) = (u32::MAX, u32::MAX, u32::MAX);
        }
        let pool = Pool {
            rows: 65_536,
            capacity: 1 << 24,
            prefill_batch: 1,
            prefill_tokens: 1,
            prefill_keys: 1,
            graphs: true,
        };
        let memory = pool_memory(&mla, Precision::Fp32, pool);
        assert_eq!(memory.total_bytes(), u64::MAX);
        assert!(memory.refusal(u64::MAX - 1).is_some());
    }

    #[test]
    fn decode_steps_follow_the_first_step_within_the_limits() {
        let limits = MeasureConfig { min_steps: 20, min_s: 3.0, max_steps: 1000, ..MeasureConfig::default() };
        // 30 ms steps: 3 s takes 100; twice that and two more, 202.
        assert_eq!(expected_decode_steps(&limits, 0.03), 202);
        assert_eq!(expected_decode_steps(&limits, 1.0), 20, "never fewer than min_steps");
        assert_eq!(expected_decode_steps(&limits, 1e-6), 1000, "never more than max_steps");
        assert_eq!(expected_decode_steps(&limits, f64::NAN), 1000);
        assert_eq!(decode_capacity(1024, 127), 1024 + 2 + 127);
    }
}
