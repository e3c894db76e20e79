//! A block's linear layer: a dense weight, or an fp8 (e4m3) weight multiplied through
//! libtorch's scaled matmul.
//!
//! fp8 follows the per-tensor recipe of Micikevicius et al. 2022 ("FP8 Formats for Deep
//! Learning", arXiv:2209.05433) as PyTorch's `_scaled_mm` takes it: weight ≈ w8 · s_w with s_w =
//! amax(|w|) / 448 (e4m3's largest finite value), inputs quantised the same way, and the product
//! accumulated and returned in bf16. Inputs are scaled dynamically (the amax of each input) until
//! the model is calibrated ([`crate::Model::calibrate_fp8`]); then statically, one scale per
//! layer, as serving engines run fp8.

use crate::{Convert, ModelError};
use tch::{Device, Kind, Tensor};

/// Largest finite e4m3fn value.
pub(crate) const E4M3_MAX: f64 = 448.0;

pub enum Linear {
    /// `[out, in]` weight at the model's element type.
    Dense { weight: Tensor, bias: Option<Tensor> },
    /// `[out, in]` e4m3 weight and its fp32 scale; the bias in bf16; how inputs are scaled.
    Fp8 { weight: Tensor, scale: Tensor, bias: Option<Tensor>, input: Fp8Input },
}

/// How an fp8 layer scales its input to e4m3. Dynamic: from the amax of every input (a
/// reduction and a division per call, before the matmul). Static, as serving engines run fp8:
/// one scale, calibrated once from the amax of the inputs a calibration pass gives the layer
/// ([`Fp8Input::begin_calibration`], then [`Fp8Input::end_calibration`]); an input beyond it
/// saturates at e4m3's largest value.
pub struct Fp8Input(std::sync::Mutex<InputScale>);

enum InputScale {
    Dynamic,
    /// Calibrating: the largest |input| seen so far.
    Calibrating(Option<Tensor>),
    Static(Tensor),
}

impl Fp8Input {
    pub fn dynamic() -> Fp8Input {
        Fp8Input(std::sync::Mutex::new(InputScale::Dynamic))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, InputScale> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// From now on, record the largest |input| (inputs are still scaled dynamically meanwhile).
    pub fn begin_calibration(&self) {
        *self.state() = InputScale::Calibrating(None);
    }

    /// Keep the scale of the largest |input| seen since [`Fp8Input::begin_calibration`];
    /// dynamic again when the layer saw none. Whether it is static now.
    pub fn end_calibration(&self) -> Result<bool, ModelError> {
        let mut state = self.state();
        *state = match std::mem::replace(&mut *state, InputScale::Dynamic) {
            InputScale::Calibrating(Some(amax)) => InputScale::Static(amax.f_div_scalar(E4M3_MAX)?.f_clamp_min(1e-12)?),
            InputScale::Calibrating(None) | InputScale::Dynamic => InputScale::Dynamic,
            static_scale @ InputScale::Static(_) => static_scale,
        };
        Ok(matches!(*state, InputScale::Static(_)))
    }

    /// `x` in e4m3 and the fp32 scale that maps it back (x ≈ q · scale).
    pub(crate) fn quantise(&self, x: &Tensor) -> Result<(Tensor, Tensor), ModelError> {
        let mut state = self.state();
        match &mut *state {
            InputScale::Static(scale) => {
                let q = x.f_to_kind(Kind::Float)?.f_div(scale)?.f_clamp(-E4M3_MAX, E4M3_MAX)?;
                Ok((q.f_to_kind(Kind::Float8e4m3fn)?, scale.shallow_clone()))
            }
            InputScale::Dynamic => quantise(x),
            InputScale::Calibrating(seen) => {
                let amax = x.f_abs()?.f_max()?.f_to_kind(Kind::Float)?;
                *seen = Some(match seen.take() {
                    Some(before) => before.f_maximum(&amax)?,
                    None => amax,
                });
                quantise(x)
            }
        }
    }
}

/// e4m3 values and the fp32 scale that maps them back: x ≈ q · scale.
pub(crate) fn quantise(x: &Tensor) -> Result<(Tensor, Tensor), ModelError> {
    let amax = x.f_abs()?.f_max()?.f_to_kind(Kind::Float)?;
    let scale = amax.f_div_scalar(E4M3_MAX)?.f_clamp_min(1e-12)?;
    let q = x.f_to_kind(Kind::Float)?.f_div(&scale)?.f_to_kind(Kind::Float8e4m3fn)?;
    Ok((q, scale))
}

impl Linear {
    /// `weight` (and `bias`) as a dense layer, or quantised to e4m3 when `fp8`.
    pub fn new(weight: Tensor, bias: Option<Tensor>, fp8: bool) -> Result<Linear, ModelError> {
        if !fp8 {
            return Ok(Linear::Dense { weight, bias });
        }
        let (weight, scale) = quantise(&weight)?;
        let bias = bias.map(|b| b.f_to_kind(Kind::BFloat16)).transpose()?;
        Ok(Linear::Fp8 { weight, scale, bias, input: Fp8Input::dynamic() })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        match self {
            Linear::Dense { weight, bias } => Ok(x.f_linear(weight, bias.as_ref())?),
            Linear::Fp8 { weight, scale, bias, input } => {
                let size = x.size();
                let (features, out) = (size[size.len() - 1], weight.size()[0]);
                let (xq, x_scale) = input.quantise(&x.f_reshape([-1, features])?)?;
                // _scaled_mm takes the weight column-major: the transpose of the [out, in] tensor.
                let y = xq.f_internal_scaled_mm(
                    &weight.f_transpose(0, 1)?,
                    &x_scale,
                    scale,
                    bias.as_ref(),
                    None::<&Tensor>,
                    Kind::BFloat16,
                    false,
                )?;
                let mut shape = size;
                *shape.last_mut().expect("activations have a feature dimension") = out;
                Ok(y.f_reshape(shape.as_slice())?)
            }
        }
    }

    /// How an fp8 layer scales its input; `None` for a dense layer.
    pub fn fp8_input(&self) -> Option<&Fp8Input> {
        match self {
            Linear::Dense { .. } => None,
            Linear::Fp8 { input, .. } => Some(input),
        }
    }

    pub fn bias(&self) -> Option<&Tensor> {
        match self {
            Linear::Dense { bias, .. } | Linear::Fp8 { bias, .. } => bias.as_ref(),
        }
    }

    /// The weight as a dense tensor at `kind` (dequantised for fp8).
    pub fn dense_weight(&self, kind: Kind) -> Result<Tensor, ModelError> {
        match self {
            Linear::Dense { weight, .. } => Ok(weight.f_to_kind(kind)?),
            Linear::Fp8 { weight, scale, .. } => Ok(weight.f_to_kind(Kind::Float)?.f_mul(scale)?.f_to_kind(kind)?),
        }
    }

    /// The same layer on `convert.device` at `convert.kind` (e4m3 again when `convert.fp8`).
    pub fn to(&self, convert: &Convert) -> Result<Linear, ModelError> {
        let bias = match self {
            Linear::Dense { bias, .. } | Linear::Fp8 { bias, .. } => convert.optional(bias)?,
        };
        let weight = convert.weight(&self.dense_weight(Kind::Float)?.f_to_kind(convert.kind)?)?;
        Linear::new(weight, bias, convert.fp8)
    }
}

/// Whether `device` can run the e4m3 scaled matmul; the reason it cannot otherwise.
pub fn fp8_supported(device: Device) -> Result<(), ModelError> {
    let probe = || -> Result<Tensor, tch::TchError> {
        let a = Tensor::f_ones([16, 16], (Kind::Float, device))?.f_to_kind(Kind::Float8e4m3fn)?;
        let one = Tensor::f_ones([], (Kind::Float, device))?;
        a.f_internal_scaled_mm(&a.f_transpose(0, 1)?, &one, &one, None::<Tensor>, None::<Tensor>, Kind::BFloat16, false)
    };
    probe().map(|_| ()).map_err(|error| {
        let first_line = error.to_string().lines().next().unwrap_or_default().to_owned();
        ModelError::Unsupported(format!(
            "fp8 is not supported on {device:?}: libtorch's e4m3 scaled matmul fails there ({first_line})"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_fp8_layer_approximates_the_dense_one() {
        tch::manual_seed(4);
        let w = Tensor::randn([48, 64], (Kind::Float, Device::Cpu)) * 0.05;
        let b = Tensor::randn([48], (Kind::Float, Device::Cpu)) * 0.05;
        let x = Tensor::randn([2, 3, 64], (Kind::Float, Device::Cpu));
        let dense = Linear::new(w.shallow_clone(), Some(b.shallow_clone()), false).unwrap().forward(&x).unwrap();
        let fp8 = Linear::new(w, Some(b), true).unwrap();
        assert!(matches!(fp8, Linear::Fp8 { .. }));
        let out = fp8.forward(&x.to_kind(Kind::BFloat16)).unwrap();
        assert_eq!(out.size(), [2, 3, 48]);
        assert_eq!(out.kind(), Kind::BFloat16);
        let error = (out.to_kind(Kind::Float) - &dense).norm().double_value(&[]) / dense.norm().double_value(&[]);
        // e4m3 keeps 3 mantissa bits: a few percent, not more.
        assert!(error > 1e-3 && error < 0.1, "relative error {error}");
    }

    #[test]
    fn this_cpu_runs_the_scaled_matmul() {
        // libtorch 2.11 has a CPU kernel; a device without one reports why instead.
        fp8_supported(Device::Cpu).unwrap();
    }
}
