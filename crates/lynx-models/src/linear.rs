//! A block's linear layer: a dense weight, or an fp8 (e4m3) weight multiplied through
//! libtorch's scaled matmul.
//!
//! fp8 follows the per-tensor recipe of Micikevicius et al. 2022 ("FP8 Formats for Deep
//! Learning", arXiv:2209.05433) as PyTorch's `_scaled_mm` takes it: weight ≈ w8 · s_w with s_w =
//! amax(|w|) / 448 (e4m3fn's largest finite value; 240 for the e4m3fnuz of MI300-class
//! devices, [`Fp8Format`]), inputs quantised the same way, and the product accumulated and
//! returned in bf16. Inputs are scaled dynamically (the amax of each input) until the model is
//! calibrated ([`crate::Model::calibrate_fp8`]); then statically, one scale per
//! layer, as serving engines run fp8.
//!
//! A copy of a model that only checks the parity of another (the host's, beside a GPU's) may
//! widen its e4m3 weights once ([`Linear::widen`]): it then multiplies in fp32 as libtorch's CPU
//! `_scaled_mm` does without oneDNN, with the same products, but converts each weight once
//! instead of in every call.

use crate::scalar_call;
use crate::{Convert, ModelError};
use tch::{Device, Kind, Tensor};

/// The 8-bit float a device's fp8 layers use: OCP e4m3fn (largest finite value 448) on NVIDIA
/// GPUs, CPUs and AMD from MI350; e4m3fnuz (largest 240: one more exponent bias, no negative
/// zero) on MI300-class AMD GPUs, whose matrix cores take no other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fp8Format {
    E4m3fn,
    E4m3fnuz,
}

impl Fp8Format {
    pub fn kind(self) -> Kind {
        match self {
            Fp8Format::E4m3fn => Kind::Float8e4m3fn,
            Fp8Format::E4m3fnuz => Kind::Float8e4m3fnuz,
        }
    }

    /// The largest finite value: a scale maps a tensor's amax to it.
    pub fn max(self) -> f64 {
        match self {
            Fp8Format::E4m3fn => 448.0,
            Fp8Format::E4m3fnuz => 240.0,
        }
    }

    /// The fp32 scale that maps values whose largest magnitude is `amax` (a scalar tensor) onto
    /// the format's range: `amax` / [`Fp8Format::max`], never below 1e-12.
    pub(crate) fn scale_for(self, amax: &Tensor) -> Result<Tensor, tch::TchError> {
        scalar_call(|| amax.f_div_scalar(self.max())?.f_clamp_min(1e-12))
    }

    pub fn name(self) -> &'static str {
        match self {
            Fp8Format::E4m3fn => "e4m3fn",
            Fp8Format::E4m3fnuz => "e4m3fnuz",
        }
    }
}

pub enum Linear {
    /// `[out, in]` weight at the model's element type.
    Dense { weight: Tensor, bias: Option<Tensor> },
    /// `[out, in]` e4m3 weight and its fp32 scale; the bias in bf16; how inputs are scaled; and,
    /// once [`Linear::widen`]ed, the weight in fp32 times its scale.
    Fp8 { weight: Tensor, scale: Tensor, bias: Option<Tensor>, input: Fp8Input, widened: Widened },
}

/// How an fp8 layer scales its input to e4m3. Dynamic: from the amax of every input (a
/// reduction and a division per call, before the matmul). Static, as serving engines run fp8:
/// one scale, calibrated once from the amax of the inputs a calibration pass gives the layer
/// ([`Fp8Input::begin_calibration`], then [`Fp8Input::end_calibration`]); an input beyond it
/// saturates at e4m3's largest value.
pub struct Fp8Input(std::sync::Mutex<InputScale>, Fp8Format);

enum InputScale {
    Dynamic,
    /// Calibrating: the largest |input| seen so far.
    Calibrating(Option<Tensor>),
    Static(Tensor),
}

impl Fp8Input {
    pub fn dynamic(format: Fp8Format) -> Fp8Input {
        Fp8Input(std::sync::Mutex::new(InputScale::Dynamic), format)
    }

    /// The 8-bit float the layer quantises its input to.
    pub fn format(&self) -> Fp8Format {
        self.1
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
            InputScale::Calibrating(Some(amax)) => InputScale::Static(self.1.scale_for(&amax)?),
            InputScale::Calibrating(None) | InputScale::Dynamic => InputScale::Dynamic,
            static_scale @ InputScale::Static(_) => static_scale,
        };
        Ok(matches!(*state, InputScale::Static(_)))
    }

    /// `x` in e4m3 and the fp32 scale that maps it back (x ≈ q · scale).
    pub(crate) fn quantise(&self, x: &Tensor) -> Result<(Tensor, Tensor), ModelError> {
        let format = self.1;
        let mut state = self.state();
        match &mut *state {
            InputScale::Static(scale) => {
                let q = x.f_to_kind(Kind::Float)?.f_div(scale)?;
                let q = scalar_call(|| q.f_clamp(-format.max(), format.max()))?;
                Ok((q.f_to_kind(format.kind())?, scale.shallow_clone()))
            }
            InputScale::Dynamic => quantise(x, format),
            InputScale::Calibrating(seen) => {
                let amax = x.f_abs()?.f_max()?.f_to_kind(Kind::Float)?;
                *seen = Some(match seen.take() {
                    Some(before) => before.f_maximum(&amax)?,
                    None => amax,
                });
                quantise(x, format)
            }
        }
    }
}

/// An e4m3 weight widened once ([`Linear::widen`]), or not (yet). Behind a lock, as an fp8
/// layer's input scale is: a model is shared between threads, and a tensor alone may not be.
#[derive(Default)]
pub struct Widened(std::sync::Mutex<Option<Tensor>>);

impl Widened {
    fn state(&self) -> std::sync::MutexGuard<'_, Option<Tensor>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The widened weight, if it was widened.
    pub(crate) fn get(&self) -> Option<Tensor> {
        self.state().as_ref().map(Tensor::shallow_clone)
    }

    /// Widen it with `make`, unless it already is. `make` runs without the lock held: it reads
    /// the weights as they are, which may ask whether they are widened.
    pub(crate) fn fill(&self, make: impl FnOnce() -> Result<Tensor, ModelError>) -> Result<(), ModelError> {
        if self.state().is_some() {
            return Ok(());
        }
        let wide = make()?;
        self.state().get_or_insert(wide);
        Ok(())
    }
}

/// `format` values and the fp32 scale that maps them back: x ≈ q · scale.
pub(crate) fn quantise(x: &Tensor, format: Fp8Format) -> Result<(Tensor, Tensor), ModelError> {
    let amax = x.f_abs()?.f_max()?.f_to_kind(Kind::Float)?;
    let scale = format.scale_for(&amax)?;
    let q = x.f_to_kind(Kind::Float)?.f_div(&scale)?.f_to_kind(format.kind())?;
    Ok((q, scale))
}

/// Copy the e4m3 `from` into `into` as bytes: copy kernels need not know the type.
pub(crate) fn copy_e4m3(into: &Tensor, from: &Tensor) -> Result<(), ModelError> {
    into.f_view_dtype(Kind::Uint8)?.f_copy_(&from.f_view_dtype(Kind::Uint8)?)?;
    Ok(())
}

/// A weight `[out, in]` in `format` and its fp32 scale: [`quantise`]'s values, bit for bit, of
/// `parts`' rows one after another, each widened to fp32 (and, an e4m3 part, times its own
/// scale), with one scale for the whole (its largest |value| / the format's largest). A weight
/// of more than `at_once` elements is widened a slab of rows at a time, in two passes (the
/// largest value, then the values), so that beside the parts only that much is ever widened:
/// quantised whole, a merged gate and up projection of Qwen3-32B widened to 2.1 GB beside its
/// parts, twice over. A smaller dense one is [`quantise`]d as it is.
pub(crate) fn quantise_weight(
    parts: &[(&Tensor, Option<&Tensor>)],
    format: Fp8Format,
    at_once: i64,
) -> Result<(Tensor, Tensor), ModelError> {
    let Some(&(first, _)) = parts.first() else {
        return Err(ModelError::Shape("no weights to quantise".to_owned()));
    };
    let [_, features] = first.size()[..] else {
        return Err(ModelError::Shape(format!("a weight to quantise is [out, in], not {:?}", first.size())));
    };
    let rows = (at_once / features.max(1)).max(1);
    // Each part's slabs of rows, widened (and dequantised).
    let slabs = |visit: &mut dyn FnMut(Tensor) -> Result<(), ModelError>| -> Result<(), ModelError> {
        for &(part, scale) in parts {
            let mut row = 0;
            while row < part.size()[0] {
                let n = rows.min(part.size()[0] - row);
                let wide = part.f_narrow(0, row, n)?.f_to_kind(Kind::Float)?;
                visit(match scale {
                    Some(scale) => wide.f_mul(scale)?,
                    None => wide,
                })?;
                row += n;
            }
        }
        Ok(())
    };
    let total: i64 = parts.iter().map(|(part, _)| part.size()[0]).sum();
    if let [(dense, None)] = parts {
        if total <= rows {
            return quantise(dense, format);
        }
    }
    let mut amax: Option<Tensor> = None;
    slabs(&mut |wide| {
        let largest = wide.f_abs()?.f_max()?;
        amax = Some(match amax.take() {
            Some(before) => before.f_maximum(&largest)?,
            None => largest,
        });
        Ok(())
    })?;
    let amax = amax.ok_or_else(|| ModelError::Shape("no weights to quantise".to_owned()))?;
    let scale = format.scale_for(&amax)?;
    let quantised = Tensor::f_empty([total, features], (format.kind(), first.device()))?;
    let mut row = 0;
    slabs(&mut |wide| {
        let n = wide.size()[0];
        copy_e4m3(&quantised.f_narrow(0, row, n)?, &wide.f_div(&scale)?.f_to_kind(format.kind())?)?;
        row += n;
        Ok(())
    })?;
    Ok((quantised, scale))
}

impl Linear {
    /// `weight` (and `bias`) as a dense layer, or quantised to `fp8`'s format.
    pub fn new(weight: Tensor, bias: Option<Tensor>, fp8: Option<Fp8Format>) -> Result<Linear, ModelError> {
        let Some(format) = fp8 else {
            return Ok(Linear::Dense { weight, bias });
        };
        let (weight, scale) = quantise_weight(&[(&weight, None)], format, crate::weights::DRAWN_AT_ONCE)?;
        let bias = bias.map(|b| b.f_to_kind(Kind::BFloat16)).transpose()?;
        Ok(Linear::Fp8 { weight, scale, bias, input: Fp8Input::dynamic(format), widened: Widened::default() })
    }

    /// Widen an e4m3 layer's weight once to fp32 times its scale, and multiply at that width from
    /// now on: libtorch's CPU `_scaled_mm`, where no oneDNN kernel takes it (no AMX), widens both
    /// e4m3 operands to fp32, scales them and multiplies them in fp32 in every call, and on this
    /// project's host spends five sixths of the call doing so at the widths of Llama 3.1 8B (0.34 s
    /// against 0.06 s for the product alone, for 32 rows through a 14336×4096 layer). Only a copy
    /// that checks another's parity does this (a device's copy runs the kernel its cells
    /// measure); the products are the emulated kernel's, whichever kernel this host's
    /// `_scaled_mm` would choose. Whether the layer is e4m3 (a dense one is left as it is).
    pub fn widen(&self) -> Result<bool, ModelError> {
        let Linear::Fp8 { weight, scale, widened, .. } = self else { return Ok(false) };
        widened.fill(|| Ok(weight.f_to_kind(Kind::Float)?.f_mul(scale)?))?;
        Ok(true)
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        match self {
            Linear::Dense { weight, bias } => Ok(x.f_linear(weight, bias.as_ref())?),
            Linear::Fp8 { weight, scale, bias, input, widened } => {
                let size = x.size();
                let (features, out) = (size[size.len() - 1], weight.size()[0]);
                let (xq, x_scale) = input.quantise(&x.f_reshape([-1, features])?)?;
                let y = match widened.get() {
                    // As the emulated kernel: the input widened and scaled, an fp32 product, the
                    // bias added in fp32, and the sum rounded to bf16.
                    Some(wide) => {
                        let y = xq.f_to_kind(Kind::Float)?.f_mul(&x_scale)?.f_matmul(&wide.f_transpose(0, 1)?)?;
                        match bias {
                            Some(bias) => y.f_add(bias)?,
                            None => y,
                        }
                        .f_to_kind(Kind::BFloat16)?
                    }
                    // _scaled_mm takes the weight column-major: the transpose of the [out, in]
                    // tensor.
                    None => xq.f_internal_scaled_mm(
                        &weight.f_transpose(0, 1)?,
                        &x_scale,
                        scale,
                        bias.as_ref(),
                        None::<&Tensor>,
                        Kind::BFloat16,
                        false,
                    )?,
                };
                let mut shape = size;
                *shape.last_mut().expect("activations have a feature dimension") = out;
                Ok(y.f_reshape(shape.as_slice())?)
            }
        }
    }

    /// Layers that read the same input, as one: their `[out, in]` weights stacked along the
    /// output and their biases likewise, as serving engines merge a block's q/k/v projections
    /// and its gate/up projections (vLLM's `QKVParallelLinear`, `MergedColumnParallelLinear`):
    /// one matmul, and in fp8 one input quantisation, where there were several. The parts' output
    /// features follow one another in `parts`' order. An fp8 whole is quantised again as one
    /// tensor (one weight scale, its largest part's), as engines requantise merged fp8 weights.
    pub fn concat(parts: &[&Linear]) -> Result<Linear, ModelError> {
        let fp8 = match parts.first() {
            Some(Linear::Fp8 { input, .. }) => Some(input.format()),
            Some(Linear::Dense { .. }) => None,
            None => return Err(ModelError::Shape("no layers to merge".to_owned())),
        };
        if parts.iter().any(|p| p.fp8_input().map(Fp8Input::format) != fp8) {
            return Err(ModelError::Shape("layers of different precisions cannot be merged".to_owned()));
        }
        let biases: Vec<&Tensor> = parts.iter().filter_map(|p| p.bias()).collect();
        let bias = match biases.len() {
            0 => None,
            n if n == parts.len() => Some(Tensor::f_cat(&biases, 0)?),
            _ => return Err(ModelError::Shape("layers with and without a bias cannot be merged".to_owned())),
        };
        let Some(format) = fp8 else {
            let kind = match parts[0] {
                Linear::Dense { weight, .. } => weight.kind(),
                Linear::Fp8 { .. } => Kind::Float,
            };
            let weights = parts.iter().map(|p| p.dense_weight(kind)).collect::<Result<Vec<_>, _>>()?;
            return Linear::new(Tensor::f_cat(&weights, 0)?, bias, None);
        };
        // The parts dequantised and quantised again as one, a slab at a time (never the whole
        // widened beside them).
        let quantised: Vec<(&Tensor, Option<&Tensor>)> = parts
            .iter()
            .filter_map(|p| match p {
                Linear::Fp8 { weight, scale, .. } => Some((weight, Some(scale))),
                Linear::Dense { .. } => None,
            })
            .collect();
        let (weight, scale) = quantise_weight(&quantised, format, crate::weights::DRAWN_AT_ONCE)?;
        let bias = bias.map(|b| b.f_to_kind(Kind::BFloat16)).transpose()?;
        Ok(Linear::Fp8 { weight, scale, bias, input: Fp8Input::dynamic(format), widened: Widened::default() })
    }

    /// The layer's input features.
    pub fn in_features(&self) -> i64 {
        match self {
            Linear::Dense { weight, .. } | Linear::Fp8 { weight, .. } => weight.size()[1],
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

/// The e4m3 format `device` runs libtorch's scaled matmul in, or the reason it runs neither. A
/// ROCm GPU tries e4m3fnuz first (MI300-class matrix cores take only it; ATen refuses it from
/// MI350 on, which takes e4m3fn); every other device runs e4m3fn.
pub fn fp8_format(device: Device) -> Result<Fp8Format, ModelError> {
    let formats: &[Fp8Format] = match device {
        Device::Cuda(_) if crate::runtime::is_rocm() => &[Fp8Format::E4m3fnuz, Fp8Format::E4m3fn],
        _ => &[Fp8Format::E4m3fn],
    };
    let mut reasons = Vec::new();
    for &format in formats {
        match scaled_mm_runs(device, format) {
            Ok(()) => return Ok(format),
            Err(error) => {
                reasons.push(format!("{}: {}", format.name(), error.to_string().lines().next().unwrap_or_default()))
            }
        }
    }
    Err(ModelError::Unsupported(format!(
        "fp8 is not supported on {device:?}: libtorch's e4m3 scaled matmul fails there ({})",
        reasons.join("; ")
    )))
}

/// A 16×16 scaled matmul in `format` on `device`.
fn scaled_mm_runs(device: Device, format: Fp8Format) -> Result<(), tch::TchError> {
    let a = Tensor::f_ones([16, 16], (Kind::Float, device))?.f_to_kind(format.kind())?;
    let one = Tensor::f_ones([], (Kind::Float, device))?;
    let _product = a.f_internal_scaled_mm(
        &a.f_transpose(0, 1)?,
        &one,
        &one,
        None::<Tensor>,
        None::<Tensor>,
        Kind::BFloat16,
        false,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A weight quantised a slab of rows at a time holds [`quantise`]'s values of the whole, bit
    /// for bit: one dense part (its slabs of 7 rows, the last of 6), and e4m3 parts dequantised
    /// and quantised again as one (whose first part's largest value is not the whole's).
    #[test]
    fn a_weight_quantised_in_slabs_is_the_whole_quantised() {
        let (dense, small, large) = crate::with_generator(Some(9), || {
            (
                Tensor::randn([48, 64], (Kind::Float, Device::Cpu)).to_kind(Kind::BFloat16),
                Tensor::randn([20, 64], (Kind::Float, Device::Cpu)) * 0.1,
                Tensor::randn([36, 64], (Kind::Float, Device::Cpu)),
            )
        });
        let bits = |t: &Tensor| t.view_dtype(Kind::Uint8);
        let format = Fp8Format::E4m3fn;
        let (whole, scale) = quantise(&dense, format).unwrap();
        let (slabs, slab_scale) = quantise_weight(&[(&dense, None)], format, 7 * 64).unwrap();
        assert!(bits(&whole).equal(&bits(&slabs)) && scale.equal(&slab_scale));
        let parts = [quantise(&small, format).unwrap(), quantise(&large, format).unwrap()];
        let widened: Vec<Tensor> = parts.iter().map(|(q, s)| q.to_kind(Kind::Float) * s).collect();
        let (whole, scale) = quantise(&Tensor::cat(&widened, 0), format).unwrap();
        let refs: Vec<(&Tensor, Option<&Tensor>)> = parts.iter().map(|(q, s)| (q, Some(s))).collect();
        for at_once in [5 * 64, 1 << 20] {
            let (slabs, slab_scale) = quantise_weight(&refs, format, at_once).unwrap();
            assert_eq!(slabs.size(), [56, 64]);
            assert!(bits(&whole).equal(&bits(&slabs)) && scale.equal(&slab_scale), "{at_once}");
        }
        assert!(scale.double_value(&[]) > parts[0].1.double_value(&[]));
        // A tensor that is not [out, in] is refused, as are no parts at all.
        let refused = quantise_weight(&[(&dense.flatten(0, 1), None)], format, 64).unwrap_err().to_string();
        assert!(refused.contains("is [out, in], not [3072]"), "{refused}");
        assert!(quantise_weight(&[], format, 64).is_err());
    }

    /// Widened once, an e4m3 layer gives the scaled matmul's products (dynamic and calibrated,
    /// with and without a bias), and a dense layer is left as it is.
    #[test]
    fn a_widened_fp8_layer_gives_the_scaled_matmuls_products() {
        let (w, b, x) = crate::with_generator(Some(9), || {
            (
                Tensor::randn([96, 128], (Kind::Float, Device::Cpu)) * 0.05,
                Tensor::randn([96], (Kind::Float, Device::Cpu)) * 0.05,
                Tensor::randn([3, 5, 128], (Kind::Float, Device::Cpu)).to_kind(Kind::BFloat16),
            )
        });
        for bias in [None, Some(&b)] {
            let layer = || Linear::new(w.shallow_clone(), bias.map(Tensor::shallow_clone), Some(Fp8Format::E4m3fn));
            let (scaled, widened) = (layer().unwrap(), layer().unwrap());
            assert!(widened.widen().unwrap() && widened.widen().unwrap(), "an e4m3 layer widens, twice alike");
            for calibrated in [false, true] {
                if calibrated {
                    for layer in [&scaled, &widened] {
                        layer.fp8_input().unwrap().begin_calibration();
                        let _calibration = layer.forward(&x).unwrap();
                        assert!(layer.fp8_input().unwrap().end_calibration().unwrap());
                    }
                }
                let (a, b) = (scaled.forward(&x).unwrap(), widened.forward(&x).unwrap());
                assert_eq!((b.size(), b.kind()), (a.size(), a.kind()));
                // The same fp32 products, summed in whatever order each matmul blocks them, then
                // rounded to bf16: equal but for the odd last bit.
                let apart = (a.to_kind(Kind::Float) - b.to_kind(Kind::Float)).abs();
                let bound = a.to_kind(Kind::Float).abs() * 2f64.powi(-7) + 1e-6;
                let (far, most) = (apart.gt_tensor(&bound).sum(Kind::Int64).int64_value(&[]), apart.max());
                assert_eq!(far, 0, "bias {}, calibrated {calibrated}: {most}", bias.is_some());
            }
        }
        let dense = Linear::new(w.shallow_clone(), None, None).unwrap();
        assert!(!dense.widen().unwrap());
    }

    #[test]
    fn this_cpu_runs_the_scaled_matmul_in_e4m3fn() {
        // libtorch 2.11 has a CPU kernel; a device without one reports why instead.
        assert_eq!(fp8_format(Device::Cpu).unwrap(), Fp8Format::E4m3fn);
    }
}
