//! Where a model's weights come from: drawn from libtorch's global generator, seeded once by the
//! model, at the model's initialiser scale.

use crate::{accumulation_kind, Convert, ModelError};
use tch::{Device, Kind, Tensor};

/// Draws weights at one precision on one device.
pub struct WeightSource {
    /// Standard deviation of drawn weights.
    pub std: f64,
    pub kind: Kind,
    pub device: Device,
}

impl WeightSource {
    /// Normal(0, std) values of `shape`, drawn at accumulation precision (fp32, or fp64 for the
    /// reference) so every low precision rounds the same values.
    pub fn normal(&self, shape: &[i64]) -> Result<Tensor, ModelError> {
        let drawn = Tensor::f_randn(shape, (accumulation_kind(self.kind), self.device))?.f_mul_scalar(self.std)?;
        Ok(drawn.f_to_kind(self.kind)?)
    }

    /// Normal(0, std) values kept at accumulation precision (sink logits, router biases).
    pub fn normal_accumulator(&self, shape: &[i64]) -> Result<Tensor, ModelError> {
        Ok(Tensor::f_randn(shape, (accumulation_kind(self.kind), self.device))?.f_mul_scalar(self.std)?)
    }

    /// An RMSNorm weight of `width` ones, as the models initialise them.
    pub fn ones(&self, width: i64) -> Result<Tensor, ModelError> {
        Ok(Tensor::f_ones([width], (self.kind, self.device))?)
    }
}

/// RMSNorm over the last dimension (Zhang & Sennrich 2019, arXiv:1910.07467).
pub struct RmsNorm {
    pub(crate) weight: Tensor,
    pub(crate) eps: f64,
}

impl RmsNorm {
    pub fn new(source: &WeightSource, width: i64, eps: f64) -> Result<RmsNorm, ModelError> {
        Ok(RmsNorm { weight: source.ones(width)?, eps })
    }

    pub fn to(&self, convert: &Convert) -> Result<RmsNorm, ModelError> {
        Ok(RmsNorm { weight: convert.weight(&self.weight)?, eps: self.eps })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        let width = self.weight.size()[0];
        Ok(x.f_rms_norm([width], Some(&self.weight), self.eps)?)
    }
}
