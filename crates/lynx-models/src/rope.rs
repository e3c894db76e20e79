//! Rotary position embeddings (Su et al. 2021, "RoFormer", arXiv:2104.09864) with the
//! long-context frequency scalings the catalogue's models use: Llama 3.1's and YaRN (Peng et al.
//! 2023, arXiv:2309.00071). Frequencies follow Hugging Face `transformers`'
//! `modeling_rope_utils.py`; rotation uses its rotate-half convention.

use crate::scalar_call;
use crate::{accumulation_kind, Convert, ModelError};
use lynx_schema::config::RopeScaling;
use std::f64::consts::PI;
use tch::{Device, Kind, Tensor};

/// A head's rotary frequencies and the scale applied to its cos and sin.
pub struct Rope {
    /// Inverse frequencies, `[rotary_dim / 2]`, fp64 (cast to the accumulation type per table).
    inv_freq: Tensor,
    /// Multiplies cos and sin (YaRN's attention factor; 1 otherwise).
    attention_factor: f64,
}

/// The cos and sin tables for a run of positions, `[n, rotary_dim]` each; `sin`'s first half
/// negated (rotate-half's sign, taken out of [`apply`]).
pub struct RopeTable {
    pub cos: Tensor,
    pub sin: Tensor,
}

impl Rope {
    /// RoPE over `rotary_dim` dimensions with base `theta` and optional `scaling`, for a model
    /// of element type `kind` on `device`.
    pub fn new(
        rotary_dim: u32,
        theta: f64,
        scaling: Option<&RopeScaling>,
        kind: Kind,
        device: Device,
    ) -> Result<Rope, ModelError> {
        let (inv_freq, attention_factor) = inverse_frequencies(rotary_dim, theta, scaling);
        let inv_freq = Tensor::f_from_slice(&inv_freq)?.f_to_kind(accumulation_kind(kind))?.f_to_device(device)?;
        Ok(Rope { inv_freq, attention_factor })
    }

    /// The same frequencies at `convert`'s accumulation precision on its device.
    pub fn to(&self, convert: &Convert) -> Result<Rope, ModelError> {
        Ok(Rope { inv_freq: convert.accumulator(&self.inv_freq)?, attention_factor: self.attention_factor })
    }

    /// cos and sin for positions `start..start + n` in `kind`, the angles computed at the
    /// accumulation precision the frequencies are kept in.
    pub fn table(&self, start: i64, n: i64, kind: Kind) -> Result<RopeTable, ModelError> {
        let device = self.inv_freq.device();
        self.table_at(&scalar_call(|| Tensor::f_arange_start(start, start + n, (self.inv_freq.kind(), device)))?, kind)
    }

    /// cos and sin for the positions held in `positions` (`[n]`, on the device), so a step need
    /// not know its position on the host.
    pub fn table_at(&self, positions: &Tensor, kind: Kind) -> Result<RopeTable, ModelError> {
        let positions = positions.f_to_kind(self.inv_freq.kind())?;
        let angles = positions.f_unsqueeze(1)?.f_mul(&self.inv_freq.f_unsqueeze(0)?)?;
        // The first half negated: cos is even, so the cosines are rotate-half's, and the sines
        // carry rotate-half's sign, which [`apply`] then needs no kernel for.
        let angles = Tensor::f_cat(&[&angles.f_neg()?, &angles], -1)?;
        // This runs every step: no kernel for a scale of 1 or a cast to the same type.
        let scale = |t: Tensor| -> Result<Tensor, ModelError> {
            let t =
                if self.attention_factor == 1.0 { t } else { scalar_call(|| t.f_mul_scalar(self.attention_factor))? };
            Ok(if t.kind() == kind { t } else { t.f_to_kind(kind)? })
        };
        Ok(RopeTable { cos: scale(angles.f_cos()?)?, sin: scale(angles.f_sin()?)? })
    }
}

impl RopeTable {
    /// A table of one position a row (`[rows, rotary_dim]`) shaped `[rows, 1, 1, rotary_dim]`, so
    /// that it turns each row of a step's `[batch, heads, 1, …]` at its own position.
    pub fn per_row(self) -> Result<RopeTable, ModelError> {
        let size = self.cos.size();
        let shape = [size[0], 1, 1, size[1]];
        Ok(RopeTable { cos: self.cos.f_view(shape)?, sin: self.sin.f_view(shape)? })
    }
}

/// x · cos + rotate_half(x) · sin over the last dimension of `x` (`[…, n, rotary_dim]`).
pub fn apply(x: &Tensor, table: &RopeTable) -> Result<Tensor, ModelError> {
    let size = x.size();
    let half = size[size.len() - 1] / 2;
    let first = x.f_narrow(-1, 0, half)?;
    let second = x.f_narrow(-1, half, half)?;
    // x·cos + rotate_half(x)·sin, where rotate_half(x) = [−second, first]: the table's sines
    // carry the minus ([`Rope::table_at`]), so three kernels (a cat, a mul and an addcmul, which
    // also rounds once instead of three times) where there were five.
    let swapped = Tensor::f_cat(&[&second, &first], -1)?;
    Ok(x.f_mul(&table.cos)?.f_addcmul_(&swapped, &table.sin)?)
}

/// YaRN's magnitude correction: 0.1 · m · ln(scale) + 1 for scale > 1.
pub fn yarn_mscale(scale: f64, m: f64) -> f64 {
    if scale <= 1.0 {
        1.0
    } else {
        0.1 * m * scale.ln() + 1.0
    }
}

/// Inverse frequencies (`rotary_dim / 2` of them) and the cos/sin scale.
pub fn inverse_frequencies(rotary_dim: u32, theta: f64, scaling: Option<&RopeScaling>) -> (Vec<f64>, f64) {
    let dim = f64::from(rotary_dim);
    // inv_freq[i] = theta^(-2i / dim) (RoFormer, eq. 15).
    let base: Vec<f64> = (0..rotary_dim / 2).map(|i| 1.0 / theta.powf(2.0 * f64::from(i) / dim)).collect();
    match scaling {
        None => (base, 1.0),
        Some(&RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position }) => {
            let context = f64::from(original_max_position);
            let low_freq_wavelen = context / low_freq_factor;
            let high_freq_wavelen = context / high_freq_factor;
            let scaled = base
                .iter()
                .map(|&freq| {
                    let wavelen = 2.0 * PI / freq;
                    if wavelen < high_freq_wavelen {
                        freq
                    } else if wavelen > low_freq_wavelen {
                        freq / factor
                    } else {
                        let smooth = (context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                        (1.0 - smooth) * freq / factor + smooth * freq
                    }
                })
                .collect();
            (scaled, 1.0)
        }
        Some(&RopeScaling::Yarn {
            factor,
            original_max_position,
            beta_fast,
            beta_slow,
            mscale,
            mscale_all_dim,
            truncate,
        }) => {
            let attention_factor = match (mscale, mscale_all_dim) {
                (Some(m), Some(all)) if m != 0.0 && all != 0.0 => yarn_mscale(factor, m) / yarn_mscale(factor, all),
                _ => yarn_mscale(factor, 1.0),
            };
            // The dimension whose wavelength fits `rotations` times into the original context.
            let correction_dim = |rotations: f64| {
                dim * (f64::from(original_max_position) / (rotations * 2.0 * PI)).ln() / (2.0 * theta.ln())
            };
            let (mut low, mut high) = (correction_dim(beta_fast), correction_dim(beta_slow));
            if truncate {
                low = low.floor();
                high = high.ceil();
            }
            let low = low.max(0.0);
            let high = high.min(dim - 1.0);
            let high = if low == high { high + 0.001 } else { high };
            let scaled = base
                .iter()
                .enumerate()
                .map(|(i, &extrapolated)| {
                    let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                    let keep = 1.0 - ramp;
                    (extrapolated / factor) * (1.0 - keep) + extrapolated * keep
                })
                .collect();
            (scaled, attention_factor)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1e-30)
    }

    /// apply is rotate-half's rotation (Hugging Face's `apply_rotary_pos_emb`): each pair
    /// (x[i], x[i + d/2]) at position p turned by the angle p·inv_freq[i], checked element by
    /// element in float64 against the formula written out.
    #[test]
    fn apply_turns_each_pair_by_its_angle() {
        let (dim, start, n) = (8i64, 3i64, 4i64);
        let rope = Rope::new(dim as u32, 10_000.0, None, Kind::Double, Device::Cpu).unwrap();
        let x = crate::with_generator(None, || Tensor::randn([2, n, dim], (Kind::Double, Device::Cpu)));
        let turned = apply(&x, &rope.table(start, n, Kind::Double).unwrap()).unwrap();
        let (inv_freq, _) = inverse_frequencies(dim as u32, 10_000.0, None);
        let half = dim / 2;
        for row in 0..2 {
            for t in 0..n {
                for i in 0..half {
                    let angle = (start + t) as f64 * inv_freq[i as usize];
                    let (a, b) = (x.double_value(&[row, t, i]), x.double_value(&[row, t, i + half]));
                    let (first, second) = (a * angle.cos() - b * angle.sin(), b * angle.cos() + a * angle.sin());
                    assert!((turned.double_value(&[row, t, i]) - first).abs() < 1e-12);
                    assert!((turned.double_value(&[row, t, i + half]) - second).abs() < 1e-12);
                }
            }
        }
    }

    #[test]
    fn default_frequencies_are_theta_powers() {
        let (freqs, factor) = inverse_frequencies(8, 10000.0, None);
        assert_eq!(factor, 1.0);
        for (i, f) in freqs.iter().enumerate() {
            assert!(close(*f, 10000f64.powf(-(2.0 * i as f64) / 8.0)), "{i}: {f}");
        }
    }

    #[test]
    fn llama3_scaling_keeps_high_frequencies_and_divides_low_ones() {
        let scaling = RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position: 8192,
        };
        let (base, _) = inverse_frequencies(128, 500000.0, None);
        let (scaled, factor) = inverse_frequencies(128, 500000.0, Some(&scaling));
        assert_eq!(factor, 1.0);
        // Wavelength below 8192 / 4 = 2048 positions: unchanged; above 8192: divided by 8.
        for (b, s) in base.iter().zip(&scaled) {
            let wavelen = 2.0 * PI / b;
            if wavelen < 2048.0 {
                assert!(close(*s, *b));
            } else if wavelen > 8192.0 {
                assert!(close(*s, b / 8.0));
            } else {
                assert!(*s < *b && *s > b / 8.0, "medium frequencies interpolate");
            }
        }
        // The highest frequency is untouched; the lowest is divided by the factor.
        assert!(close(scaled[0], 1.0) && close(scaled[63], base[63] / 8.0));
    }

    #[test]
    fn yarn_attention_factor_follows_the_mscale_convention() {
        let yarn = |mscale, mscale_all_dim| RopeScaling::Yarn {
            factor: 40.0,
            original_max_position: 4096,
            beta_fast: 32.0,
            beta_slow: 1.0,
            mscale,
            mscale_all_dim,
            truncate: true,
        };
        // DeepSeek gives mscale = mscale_all_dim = 1: the cos/sin scale cancels to 1.
        let (freqs, factor) = inverse_frequencies(64, 10000.0, Some(&yarn(Some(1.0), Some(1.0))));
        assert!(close(factor, 1.0));
        // Without them it is 0.1 ln(40) + 1.
        let (_, factor) = inverse_frequencies(64, 10000.0, Some(&yarn(None, None)));
        assert!(close(factor, 0.1 * 40f64.ln() + 1.0));
        // High frequencies extrapolate (unchanged), low ones interpolate (divided by the factor).
        let (base, _) = inverse_frequencies(64, 10000.0, None);
        assert!(close(freqs[0], base[0]));
        assert!(close(freqs[31], base[31] / 40.0));
    }

    #[test]
    fn rotation_preserves_norms_and_relative_positions() {
        let rope = Rope::new(8, 10000.0, None, Kind::Float, Device::Cpu).unwrap();
        let (q, k) = crate::with_generator(Some(3), || {
            (
                Tensor::randn([1, 1, 1, 8], (Kind::Float, Device::Cpu)),
                Tensor::randn([1, 1, 1, 8], (Kind::Float, Device::Cpu)),
            )
        });
        let at = |x: &Tensor, p| apply(x, &rope.table(p, 1, Kind::Float).unwrap()).unwrap();
        let score = |qp, kp| (at(&q, qp) * at(&k, kp)).sum(Kind::Float).double_value(&[]);
        assert!((score(5, 2) - score(105, 102)).abs() < 1e-4);
        assert!((score(5, 2) - score(5, 4)).abs() > 1e-3, "position must matter");
        assert!((at(&q, 0) - &q).abs().max().double_value(&[]) < 1e-7);
        let norm = |x: &Tensor| x.norm().double_value(&[]);
        assert!((norm(&at(&q, 37)) - norm(&q)).abs() < 1e-5);
    }
}
