//! Where a model's weights come from: drawn from libtorch's global generator (seeded by the
//! model) at the model's initialiser scale, or read from a Hugging Face safetensors checkpoint.
//!
//! Every weight is asked for by its Hugging Face name (`model.layers.3.self_attn.q_proj.weight`),
//! so one construction path serves both: a random source ignores the name, a checkpoint source
//! looks it up, checks its shape against the model's and converts it to the run's element type
//! and device.

use crate::linear::{Fp8Format, Linear};
use crate::scalar_call;
use crate::{accumulation_kind, Checkpoint, Convert, ModelError};
use tch::{Device, Kind, Tensor};

/// How a weight is initialised when it is drawn rather than read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// Normal(0, std): projections, embeddings, biases.
    Normal,
    /// Ones: RMSNorm weights.
    Ones,
}

/// Supplies a model's weights at one precision on one device.
#[derive(Clone)]
pub struct WeightSource<'a> {
    pub kind: Kind,
    pub device: Device,
    /// The e4m3 format linear layers are quantised to, if they are.
    pub fp8: Option<Fp8Format>,
    /// Standard deviation of drawn weights.
    std: f64,
    /// Where weights are drawn (`device` unless [`WeightSource::drawn_on`] says otherwise).
    draw: Device,
    checkpoint: Option<&'a Checkpoint>,
}

impl<'a> WeightSource<'a> {
    /// Weights drawn at Normal(0, std).
    pub fn random(std: f64, kind: Kind, device: Device) -> WeightSource<'static> {
        WeightSource { kind, device, fp8: None, std, draw: device, checkpoint: None }
    }

    /// The same source with its weights drawn on `draw` and then moved to its device: the
    /// float64 reference is held on the CPU and, on a GPU run, drawn on the GPU, whose
    /// generator runs across the whole device instead of the host's cores.
    pub fn drawn_on(self, draw: Device) -> Self {
        WeightSource { draw, ..self }
    }

    /// Weights read from `checkpoint`.
    pub fn checkpoint(checkpoint: &'a Checkpoint, kind: Kind, device: Device) -> WeightSource<'a> {
        WeightSource { kind, device, fp8: None, std: 0.0, draw: device, checkpoint: Some(checkpoint) }
    }

    /// The same source with linear layers in `fp8`'s format, if given.
    pub fn with_fp8(self, fp8: Option<Fp8Format>) -> Self {
        WeightSource { fp8, ..self }
    }

    /// The linear layer `{prefix}.weight` (`[out, in]`) and, with `bias`, `{prefix}.bias`.
    pub fn linear(&self, prefix: &str, out: i64, input: i64, bias: bool) -> Result<Linear, ModelError> {
        let weight = self.tensor(&format!("{prefix}.weight"), &[out, input], Init::Normal)?;
        let bias = bias.then(|| self.tensor(&format!("{prefix}.bias"), &[out], Init::Normal)).transpose()?;
        Linear::new(weight, bias, self.fp8)
    }

    pub fn loaded(&self) -> Option<&'a Checkpoint> {
        self.checkpoint
    }

    /// The weight `name` of `shape` at the source's element type. Drawn weights come from the
    /// generator in fp32 at every element type, the float64 reference's included, so every
    /// precision holds the same values (fp32 and the reference exactly, the others rounded).
    /// libtorch draws fp32 normals on the CPU three to four times as fast as fp64 ones: drawing
    /// Llama 3.1 8B's two-layer parity model (its whole embedding and head, 1.5 billion
    /// weights) in fp64 took 52 s of a 2-core host's time, in fp32 26 s.
    pub fn tensor(&self, name: &str, shape: &[i64], init: Init) -> Result<Tensor, ModelError> {
        self.at(name, shape, init, self.kind)
    }

    /// The same at accumulation precision (sink logits, router biases).
    pub fn accumulator(&self, name: &str, shape: &[i64]) -> Result<Tensor, ModelError> {
        self.at(name, shape, Init::Normal, accumulation_kind(self.kind))
    }

    fn at(&self, name: &str, shape: &[i64], init: Init, kind: Kind) -> Result<Tensor, ModelError> {
        match self.checkpoint {
            Some(checkpoint) => self.convert(&checkpoint.get(name, shape)?, kind),
            None => match init {
                Init::Ones => Ok(Tensor::f_ones(shape, (kind, self.device))?),
                Init::Normal => normal(shape, self.std, (kind, self.device), self.draw, DRAWN_AT_ONCE),
            },
        }
    }

    /// `tensor` (read from the checkpoint and reshaped by the caller) at `kind` on the device.
    pub fn convert(&self, tensor: &Tensor, kind: Kind) -> Result<Tensor, ModelError> {
        Ok(tensor.f_to_device(self.device)?.f_to_kind(kind)?.f_contiguous()?)
    }
}

/// Most fp32 elements drawn at once (64 MiB): a larger weight is drawn in slabs of rows, each
/// converted into place, so that drawing a weight holds at most this much fp32 beside it (drawn
/// whole, Llama 3.1 8B's embedding table held 2.1 GB of fp32 beside the model being built).
pub const DRAWN_AT_ONCE: i64 = 1 << 24;

/// Normal(0, `std`) values of `shape` at `kind` on `device`, drawn in fp32 on `draw`, at most
/// `at_once` elements at a time. libtorch's CPU generator gives a tensor drawn in slabs of whole
/// multiples of 16 elements the values it gives the tensor drawn at once (it draws 16 at a time
/// and draws a tail that is not a multiple of 16 again), so a weight whose size is a multiple of
/// 16 (every large one) is drawn in slabs of such multiples, and any other at once; a GPU's
/// generator gives each call its own offset, so there the values differ from one draw of the
/// whole, and are the same for every model drawn on that kind of device.
pub(crate) fn normal(
    shape: &[i64],
    std: f64,
    (kind, device): (Kind, Device),
    draw: Device,
    at_once: i64,
) -> Result<Tensor, ModelError> {
    let drawn = |shape: &[i64]| -> Result<Tensor, ModelError> {
        let mut drawn = Tensor::f_randn(shape, (Kind::Float, draw))?;
        let _scaled = scalar_call(|| drawn.f_mul_scalar_(std))?;
        Ok(drawn)
    };
    let size: i64 = shape.iter().product();
    let row: i64 = shape.iter().skip(1).product();
    // Rows a slab holds: a multiple of 16, so every slab's size is one too.
    let rows = (at_once / row.max(1) / 16 * 16).max(16);
    if kind == Kind::Float || size <= at_once || size % 16 != 0 {
        return Ok(drawn(shape)?.f_to_kind(kind)?.f_to_device(device)?);
    }
    let whole = Tensor::f_empty(shape, (kind, device))?;
    let mut first = 0;
    while first < shape[0] {
        let n = rows.min(shape[0] - first);
        let slab = [&[n], &shape[1..]].concat();
        whole.f_narrow(0, first, n)?.f_copy_(&drawn(&slab)?)?;
        first += n;
    }
    Ok(whole)
}

/// RMSNorm over the last dimension (Zhang & Sennrich 2019, arXiv:1910.07467).
pub struct RmsNorm {
    pub(crate) weight: Tensor,
    pub(crate) eps: f64,
}

impl RmsNorm {
    pub fn new(source: &WeightSource, name: &str, width: i64, eps: f64) -> Result<RmsNorm, ModelError> {
        Ok(RmsNorm { weight: source.tensor(&format!("{name}.weight"), &[width], Init::Ones)?, eps })
    }

    pub fn to(&self, convert: &Convert) -> Result<RmsNorm, ModelError> {
        Ok(RmsNorm { weight: convert.weight(&self.weight)?, eps: self.eps })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        let width = self.weight.size()[0];
        Ok(x.f_rms_norm([width], Some(&self.weight), self.eps)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::with_generator;

    /// On the CPU a weight drawn in slabs holds the values it holds drawn at once (what every
    /// weight held before slabs), at every type a model keeps; a size that is not a multiple of
    /// 16 is drawn at once. Slabs of at most 2048 elements: 32 rows of 64 wide, 32 of 48 (the
    /// last of 4), 16 rows of 200 (over 2048, the fewest rows a slab holds), 2048 of a vector (the
    /// last 912).
    #[test]
    fn a_weight_drawn_in_slabs_holds_the_values_drawn_at_once() {
        for (shape, kind) in [
            (vec![1000i64, 64], Kind::BFloat16),
            (vec![1000, 64], Kind::Double),
            (vec![100, 48], Kind::Half),
            (vec![40, 200], Kind::BFloat16),
            (vec![5008], Kind::BFloat16),
            (vec![1111, 3], Kind::BFloat16),
        ] {
            let draw = |at_once| {
                with_generator(Some(7), || normal(&shape, 0.02, (kind, Device::Cpu), Device::Cpu, at_once)).unwrap()
            };
            let (once, slabs) = (draw(i64::MAX), draw(2048));
            assert_eq!((slabs.size(), slabs.kind()), (shape.clone(), kind));
            assert!(once.equal(&slabs), "{shape:?} at {kind:?}");
            assert!(once.f_abs().unwrap().max().double_value(&[]) > 0.0);
        }
    }
}
