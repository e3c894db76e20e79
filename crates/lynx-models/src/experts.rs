//! A mixture of experts' projections stacked `[experts, out, in]`, and the three ways a step runs
//! them without the host learning how many tokens each expert received. Copying per-expert
//! counts to the host in every MoE layer stalls the device's queue until the step so far has run
//! (the host then issues the rest late) and makes the step impossible to capture as a graph, so
//! a step never does it (docs/ARCHITECTURE.md, "What a step may not call").
//!
//! - [`ExpertKernel::Grouped`]: the (token, expert) pairs sorted by expert, the offsets of each
//!   expert's rows computed on the device (`index_add`, not `bincount`, whose CUDA kernel reads
//!   the largest id back to size its output), and libtorch's `_grouped_mm`. Used where its
//!   kernel reads the offsets where they are: on the CPU, and on CUDA devices with ATen's bf16
//!   grouped kernel (sm90 and sm100, found by probing `_scaled_grouped_mm`, which ATen allows on
//!   exactly those). Elsewhere ATen's fallback copies the offsets to the host, so it is not used.
//! - [`ExpertKernel::Gathered`]: each pair multiplied by its own expert's weight, gathered with
//!   `index_select`: reads `pairs` experts' weights, fewer than all of them while pairs < experts
//!   (decode at small batch).
//! - [`ExpertKernel::Every`]: every token through every expert, each weighted by its routing
//!   weight (zero where not chosen): reads every expert's weight once (as a grouped kernel does
//!   once the batch touches them all) and spends experts / k times the FLOPs it needs.
//!
//! e4m3 experts keep one scale per expert (amax / the format's largest value, as
//! [`crate::linear`] does per tensor) and run Gathered or Every on their dequantised values (e4m3 values are exact in bf16), with
//! the activations quantised per tensor as `_scaled_mm` takes them (statically once
//! calibrated, as every fp8 layer).

use crate::linear::{copy_e4m3, quantise_weight, Fp8Format, Fp8Input, Linear, Widened};
use crate::mlp::{activate, Mlp};
use crate::scalar_call;
use crate::{Convert, ModelError};
use lynx_schema::config::Activation;
use std::sync::OnceLock;
use tch::{Device, Kind, Tensor};

/// How a step runs the experts (see the module's documentation); results record it per cell.
pub use lynx_schema::result::ExpertKernel;

/// One projection of every expert: `[experts, out, in]`, with its bias `[experts, out]`.
struct Stacked {
    weight: Tensor,
    /// e4m3 weights' scale per expert, `[experts]` fp32, and how inputs are scaled to e4m3;
    /// `None` for dense weights.
    scale: Option<(Tensor, Fp8Input)>,
    bias: Option<Tensor>,
    /// e4m3 weights once [`Stacked::widen`]ed: dequantised to bf16 (the activations' element
    /// type under fp8) as every call would dequantise them.
    widened: Widened,
}

impl Stacked {
    /// A stack `[experts, out, in]` at its element type, or quantised to `fp8`'s format expert
    /// by expert (each with its own scale) into an e4m3 stack made first: beside the dense stack
    /// at most one expert's quantisation exists (stacking the quantised experts at the end held
    /// them all twice more, in bf16).
    fn of(weight: Tensor, bias: Option<Tensor>, fp8: Option<Fp8Format>) -> Result<Stacked, ModelError> {
        if fp8.is_none() {
            return Ok(Stacked { weight, scale: None, bias, widened: Widened::default() });
        }
        let experts = weight.size()[0];
        let mut filling = Filling::new(experts, &weight.f_select(0, 0)?, None, weight.kind(), fp8)?;
        filling.bias = bias;
        for e in 0..experts {
            filling.put(e, &weight.f_select(0, e)?)?;
        }
        filling.stacked()
    }

    /// Dequantise e4m3 weights once, to bf16 as a step's call does (the same values, each
    /// `ids`'s row as [`Stacked::dense`] would make it), and take them from there from now on
    /// (see [`Linear::widen`]). Whether the weights are e4m3.
    fn widen(&self) -> Result<bool, ModelError> {
        if self.scale.is_none() {
            return Ok(false);
        }
        self.widened.fill(|| self.dense(None, Kind::BFloat16))?;
        Ok(true)
    }

    /// The weights at `kind`, dequantised for e4m3: `[experts, out, in]`, or only `ids`'s.
    fn dense(&self, ids: Option<&Tensor>, kind: Kind) -> Result<Tensor, ModelError> {
        if let Some(wide) = self.widened.get().filter(|wide| wide.kind() == kind) {
            return Ok(match ids {
                Some(ids) => wide.f_index_select(0, ids)?,
                None => wide,
            });
        }
        let weight = match (ids, &self.scale) {
            // e4m3 rows gathered as bytes: index kernels need not know the type.
            (Some(ids), Some(_)) => {
                self.weight.f_view_dtype(Kind::Uint8)?.f_index_select(0, ids)?.f_view_dtype(self.weight.kind())?
            }
            (Some(ids), None) => self.weight.f_index_select(0, ids)?,
            (None, _) => self.weight.shallow_clone(),
        };
        match &self.scale {
            None => Ok(weight),
            Some((scale, _)) => {
                let scale = match ids {
                    Some(ids) => scale.f_index_select(0, ids)?,
                    None => scale.shallow_clone(),
                };
                Ok(weight.f_to_kind(kind)?.f_mul(&scale.f_reshape([-1, 1, 1])?.f_to_kind(kind)?)?)
            }
        }
    }

    /// `x` as the weights see it: for e4m3 weights, quantised to e4m3 and back as `_scaled_mm`
    /// takes activations (one scale for the tensor: the layer's static one once calibrated).
    fn input(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        let Some((_, input)) = &self.scale else { return Ok(x.shallow_clone()) };
        let (q, scale) = input.quantise(x)?;
        Ok(q.f_to_kind(Kind::Float)?.f_mul(&scale)?.f_to_kind(x.kind())?)
    }

    /// Rows of `x` (`[pairs, in]`) each through expert `ids[row]`: `[pairs, out]`.
    fn gathered(&self, x: &Tensor, ids: &Tensor) -> Result<Tensor, ModelError> {
        let x = self.input(x)?;
        let weight = self.dense(Some(ids), x.kind())?;
        let y = x.f_unsqueeze(1)?.f_bmm(&weight.f_transpose(1, 2)?)?.f_squeeze_dim(1)?;
        self.with_bias(y, |b| b.f_index_select(0, ids))
    }

    /// `x` (`[tokens, in]`, or `[experts, tokens, in]`) through every expert: `[experts, tokens,
    /// out]`.
    fn every(&self, x: &Tensor) -> Result<Tensor, ModelError> {
        let x = self.input(x)?;
        let weight = self.dense(None, x.kind())?;
        let y = x.f_matmul(&weight.f_transpose(1, 2)?)?;
        self.with_bias(y, |b| b.f_unsqueeze(1))
    }

    /// Rows of `x` sorted by expert, expert `e`'s ending at `offsets[e]`, each through its expert.
    fn grouped(&self, x: &Tensor, offsets: &Tensor, ids: &Tensor) -> Result<Tensor, ModelError> {
        let y = x.f_internal_grouped_mm(&self.weight.f_transpose(1, 2)?, Some(offsets), None::<&Tensor>, None)?;
        self.with_bias(y, |b| b.f_index_select(0, ids))
    }

    fn with_bias(
        &self,
        y: Tensor,
        shaped: impl Fn(&Tensor) -> Result<Tensor, tch::TchError>,
    ) -> Result<Tensor, ModelError> {
        match &self.bias {
            Some(bias) => Ok(y.f_add(&shaped(&bias.f_to_kind(y.kind())?)?)?),
            None => Ok(y),
        }
    }

    fn fp8_input(&self) -> Option<&Fp8Input> {
        self.scale.as_ref().map(|(_, input)| input)
    }

    /// Expert `e`'s projection as a layer of its own.
    fn expert(&self, e: i64) -> Result<Linear, ModelError> {
        let kind = if self.scale.is_some() { Kind::BFloat16 } else { self.weight.kind() };
        let id = Tensor::f_from_slice(&[e])?.f_to_device(self.weight.device())?;
        let bias = self.bias.as_ref().map(|b| b.f_select(0, e)).transpose()?;
        Ok(Linear::Dense { weight: self.dense(Some(&id), kind)?.f_select(0, 0)?, bias })
    }

    fn to(&self, convert: &Convert) -> Result<Stacked, ModelError> {
        let kind = if self.scale.is_some() { Kind::Float } else { self.weight.kind() };
        let weight = convert.weight(&self.dense(None, kind)?)?;
        Stacked::of(weight, convert.optional(&self.bias)?, convert.fp8)
    }
}

/// Every routed expert of one layer, stacked.
pub struct ExpertBank {
    gate: Stacked,
    up: Stacked,
    down: Stacked,
    /// Whether [`ExpertKernel::Grouped`] runs here without a copy to the host.
    grouped: bool,
}

/// One projection of every expert being stacked: `[experts, out, in]` (and its bias), made at
/// the first expert's size and filled expert by expert; in e4m3, each expert quantised with a
/// scale of its own as it comes.
struct Filling {
    weight: Tensor,
    bias: Option<Tensor>,
    /// The e4m3 format and the experts' scales (`[experts]` fp32, made with the stack and filled
    /// as they come), where the stack is e4m3.
    fp8: Option<(Fp8Format, Tensor)>,
}

impl Filling {
    /// A stack of `count` projections the size of `expert` (`[out, in]`) and of `bias`, at `kind`
    /// or in `fp8`'s format (its bias at `kind`).
    fn new(
        count: i64,
        expert: &Tensor,
        bias: Option<&Tensor>,
        kind: Kind,
        fp8: Option<Fp8Format>,
    ) -> Result<Filling, ModelError> {
        let stacked =
            |t: &Tensor, kind: Kind| Tensor::f_empty([&[count], t.size().as_slice()].concat(), (kind, t.device()));
        Ok(Filling {
            weight: stacked(expert, fp8.map_or(kind, Fp8Format::kind))?,
            bias: bias.map(|b| stacked(b, kind)).transpose()?,
            fp8: fp8
                .map(|format| Ok::<_, ModelError>((format, Tensor::f_empty([count], (Kind::Float, expert.device()))?)))
                .transpose()?,
        })
    }

    /// Expert `e`'s weight (`[out, in]`; experts come in order), quantised first where the stack
    /// is e4m3.
    fn put(&mut self, e: i64, weight: &Tensor) -> Result<(), ModelError> {
        let mut row = self.weight.f_select(0, e)?;
        match &mut self.fp8 {
            None => {
                row.f_copy_(weight)?;
            }
            Some((format, scales)) => {
                let (q, scale) = quantise_weight(&[(weight, None)], *format, crate::weights::DRAWN_AT_ONCE)?;
                copy_e4m3(&row, &q)?;
                scales.f_select(0, e)?.f_copy_(&scale)?;
            }
        }
        Ok(())
    }

    /// Expert `e`'s projection `linear`, at `kind`, into the stack of `count` (made at the first,
    /// in `fp8`'s format where given).
    fn place(
        slot: &mut Option<Filling>,
        linear: &Linear,
        e: i64,
        (count, kind, fp8): (i64, Kind, Option<Fp8Format>),
    ) -> Result<(), ModelError> {
        let weight = linear.dense_weight(kind)?;
        let filling = match slot {
            Some(filling) => filling,
            None => slot.insert(Filling::new(count, &weight, linear.bias(), kind, fp8)?),
        };
        filling.put(e, &weight)?;
        match (&filling.bias, linear.bias()) {
            (Some(stack), Some(bias)) => {
                stack.f_select(0, e)?.f_copy_(bias)?;
            }
            (None, None) => {}
            (Some(_), None) => {
                return Err(ModelError::Shape(format!(
                    "expert {e}'s projection has no bias, and the first expert's has one"
                )))
            }
            (None, Some(_)) => {
                return Err(ModelError::Shape(format!(
                    "expert {e}'s projection has a bias, and the first expert's has none"
                )))
            }
        }
        Ok(())
    }

    /// The filled stack; an e4m3 one with its scales, its bias in bf16.
    fn stacked(self) -> Result<Stacked, ModelError> {
        let Some((format, scales)) = self.fp8 else {
            return Ok(Stacked { weight: self.weight, scale: None, bias: self.bias, widened: Widened::default() });
        };
        let bias = self.bias.map(|b| b.f_to_kind(Kind::BFloat16)).transpose()?;
        let scale = Some((scales, Fp8Input::dynamic(format)));
        Ok(Stacked { weight: self.weight, scale, bias, widened: Widened::default() })
    }
}

impl ExpertBank {
    /// `count` experts, made in order by `expert` (drawn or read dense), stacked at `kind` on
    /// their device, in e4m3 when `fp8`. Each expert is copied (in e4m3, quantised) into the
    /// stacks as it comes and dropped, so that beside the stacks at most one expert's projections
    /// exist: stacking a layer's experts held all at once needed twice the layer's experts (11 GB
    /// more for the float64 parity reference of DeepSeek-R1's 8-way shard, which no host-memory
    /// check counted); and quantising dense stacks at the end held them beside the e4m3 ones,
    /// with a projection's experts twice more in bf16 while it was quantised (for a layer of
    /// gpt-oss-120b, 11.7 GB at the peak where its e4m3 bank takes 3.2 GB; building Mixtral 8x7B's
    /// two-layer model at fp8 on this project's host peaked at 7.0 GB that way, 4.2 GB then). An
    /// e4m3 stack's scales are one tensor, made with it: a small tensor kept for every expert
    /// among each expert's transient ones split the space the allocator had freed, so that the
    /// next expert's could not reuse it (gpt-oss-120b's one-layer model at fp8, 5.5 GB of
    /// weights: peak 9.9 GB then, 8.3 GB with the scales as one tensor, 5.8 GB since weights are
    /// drawn in slabs, `weights::normal`, which also took Mixtral's to 3.9 GB).
    pub fn new(
        count: i64,
        mut expert: impl FnMut(i64) -> Result<Mlp, ModelError>,
        kind: Kind,
        fp8: Option<Fp8Format>,
    ) -> Result<ExpertBank, ModelError> {
        let [mut gate, mut up, mut down] = [None, None, None];
        for e in 0..count {
            let mlp = expert(e)?;
            Filling::place(&mut gate, &mlp.gate, e, (count, kind, fp8))?;
            Filling::place(&mut up, &mlp.up, e, (count, kind, fp8))?;
            Filling::place(&mut down, &mlp.down, e, (count, kind, fp8))?;
        }
        let stack = |filling: Option<Filling>| match filling {
            Some(filling) => filling.stacked(),
            None => Err(ModelError::Shape("a mixture of experts with no experts".to_owned())),
        };
        let gate = stack(gate)?;
        let grouped = fp8.is_none() && grouped_mm_reads_offsets_on_device(gate.weight.device(), kind);
        Ok(ExpertBank { gate, up: stack(up)?, down: stack(down)?, grouped })
    }

    pub fn to(&self, convert: &Convert) -> Result<ExpertBank, ModelError> {
        Ok(ExpertBank {
            gate: self.gate.to(convert)?,
            up: self.up.to(convert)?,
            down: self.down.to(convert)?,
            grouped: convert.fp8.is_none() && grouped_mm_reads_offsets_on_device(convert.device, convert.kind),
        })
    }

    pub fn len(&self) -> i64 {
        self.gate.weight.size()[0]
    }

    /// Dequantise the bank's e4m3 projections once (see [`Linear::widen`]); whether they are e4m3.
    pub fn widen(&self) -> Result<bool, ModelError> {
        let mut widened = false;
        for stacked in [&self.gate, &self.up, &self.down] {
            widened |= stacked.widen()?;
        }
        Ok(widened)
    }

    /// How the bank's e4m3 projections scale their inputs (none for dense experts).
    pub fn fp8_inputs(&self) -> impl Iterator<Item = &Fp8Input> {
        [&self.gate, &self.up, &self.down].into_iter().filter_map(Stacked::fp8_input)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How a step with `pairs` (token, expert) pairs runs the experts.
    pub fn kernel(&self, pairs: i64) -> ExpertKernel {
        if self.grouped {
            ExpertKernel::Grouped
        } else if pairs < self.len() {
            ExpertKernel::Gathered
        } else {
            ExpertKernel::Every
        }
    }

    /// Expert `e` alone, as an MLP (for checking the bank against one expert's definition).
    pub fn expert(&self, e: i64) -> Result<Mlp, ModelError> {
        Ok(Mlp { gate: self.gate.expert(e)?, up: self.up.expert(e)?, down: self.down.expert(e)? })
    }

    /// Σ over each token's experts of weight · expert(token), for `x` of `[tokens, hidden]` and
    /// its routing (`experts`, `weights`: `[tokens, k]`), run by `kernel`.
    pub fn run(
        &self,
        x: &Tensor,
        (experts, weights): (&Tensor, &Tensor),
        activation: &Activation,
        kernel: ExpertKernel,
    ) -> Result<Tensor, ModelError> {
        let k = experts.size()[1];
        let ids = experts.f_reshape([-1])?;
        let weights = weights.f_reshape([-1])?;
        let mlp = |project: &dyn Fn(&Stacked, &Tensor) -> Result<Tensor, ModelError>, input: &Tensor| {
            let hidden = activate(&project(&self.gate, input)?, &project(&self.up, input)?, activation)?;
            project(&self.down, &hidden)
        };
        match kernel {
            ExpertKernel::Every => {
                let out = mlp(&|s, input| s.every(input), x)?;
                // [tokens, experts] routing weights, zero where an expert was not chosen.
                let combine = Tensor::f_zeros([x.size()[0], self.len()], (weights.kind(), x.device()))?.f_scatter(
                    1,
                    experts,
                    &weights.f_reshape([-1, k])?,
                )?;
                let weighted = out.f_mul(&combine.f_transpose(0, 1)?.f_unsqueeze(-1)?.f_to_kind(out.kind())?)?;
                Ok(weighted.f_sum_dim_intlist([0i64].as_slice(), false, out.kind())?)
            }
            ExpertKernel::Gathered => {
                let token_of = scalar_call(|| {
                    Tensor::f_arange(ids.size()[0], (Kind::Int64, x.device()))?.f_floor_divide_scalar(k)
                })?;
                let out = mlp(&|s, input| s.gathered(input, &ids), &x.f_index_select(0, &token_of)?)?;
                combine_pairs(x, &token_of, &out, &weights)
            }
            ExpertKernel::Grouped => {
                let order = ids.f_argsort_stable(true, 0, false)?;
                let token_of = scalar_call(|| order.f_floor_divide_scalar(k))?;
                let sorted_ids = ids.f_index_select(0, &order)?;
                let counts = Tensor::f_zeros([self.len()], (Kind::Int64, x.device()))?.f_index_add(
                    0,
                    &ids,
                    &ids.f_ones_like()?,
                )?;
                let offsets = counts.f_cumsum(0, Kind::Int)?;
                let sorted = x.f_index_select(0, &token_of)?;
                let out = mlp(&|s, input| s.grouped(input, &offsets, &sorted_ids), &sorted)?;
                combine_pairs(x, &token_of, &out, &weights.f_index_select(0, &order)?)
            }
        }
    }
}

/// Σ per token of its pairs' outputs (`[pairs, hidden]`, pair i belonging to `token_of[i]`)
/// times their weights.
fn combine_pairs(x: &Tensor, token_of: &Tensor, out: &Tensor, weights: &Tensor) -> Result<Tensor, ModelError> {
    let weighted = out.f_mul(&weights.f_unsqueeze(1)?.f_to_kind(out.kind())?)?;
    Ok(x.f_zeros_like()?.f_index_add(0, token_of, &weighted.f_to_kind(x.kind())?)?)
}

/// Whether libtorch's `_grouped_mm` at `kind` on `device` reads its offsets on the device: on the
/// CPU (no device), and on CUDA in bf16 where ATen has its grouped kernel (sm90, sm100; probed
/// once a process through `_scaled_grouped_mm`, allowed on exactly those). Not on ROCm, whose
/// libtorch registers its devices as CUDA but has no such kernel.
fn grouped_mm_reads_offsets_on_device(device: Device, kind: Kind) -> bool {
    match device {
        Device::Cpu => matches!(kind, Kind::Float | Kind::Half | Kind::BFloat16),
        Device::Cuda(index) if kind == Kind::BFloat16 && !crate::runtime::is_rocm() => {
            static PROBED: OnceLock<bool> = OnceLock::new();
            *PROBED.get_or_init(|| scaled_grouped_mm_runs(Device::Cuda(index)))
        }
        _ => false,
    }
}

fn scaled_grouped_mm_runs(device: Device) -> bool {
    let probe = || -> Result<Tensor, tch::TchError> {
        let a = Tensor::f_ones([32, 32], (Kind::Float, device))?.f_to_kind(Kind::Float8e4m3fn)?;
        let b = Tensor::f_ones([2, 32, 32], (Kind::Float, device))?.f_to_kind(Kind::Float8e4m3fn)?;
        let offsets = Tensor::f_from_slice(&[16i32, 32])?.f_to_device(device)?;
        let scale_a = Tensor::f_ones([32], (Kind::Float, device))?;
        let scale_b = Tensor::f_ones([2, 32], (Kind::Float, device))?;
        a.f_internal_scaled_grouped_mm(
            &b.f_transpose(1, 2)?,
            &scale_a,
            &scale_b,
            Some(&offsets),
            None::<&Tensor>,
            None::<&Tensor>,
            Kind::BFloat16,
            false,
        )
    };
    probe().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linear::quantise;

    fn linear(out: i64, input: i64, bias: bool) -> Linear {
        let draw = |shape: &[i64]| Tensor::randn(shape, (Kind::Float, Device::Cpu));
        let (weight, bias) = crate::with_generator(None, || (draw(&[out, input]), bias.then(|| draw(&[out]))));
        Linear::Dense { weight, bias }
    }

    /// Experts stacked as they come hold each expert's projections (and biases) at their
    /// indices, as stacking them all at once did, dense and in e4m3; an expert whose bias differs
    /// from the first's is refused.
    #[test]
    fn experts_stacked_as_they_come_hold_each_experts_projections() {
        let mlps: Vec<Mlp> = (0..3)
            .map(|_| Mlp { gate: linear(6, 4, true), up: linear(6, 4, true), down: linear(4, 6, true) })
            .collect();
        let copy = |l: &Linear| match l {
            Linear::Dense { weight, bias } => {
                Linear::Dense { weight: weight.copy(), bias: bias.as_ref().map(Tensor::copy) }
            }
            Linear::Fp8 { .. } => unreachable!("the test's experts are dense"),
        };
        let make = |e: i64| {
            let m = &mlps[e as usize];
            Ok(Mlp { gate: copy(&m.gate), up: copy(&m.up), down: copy(&m.down) })
        };
        let bank = ExpertBank::new(3, make, Kind::Float, None).unwrap();
        let all_at_once = |pick: fn(&Mlp) -> &Linear| {
            let weights: Vec<Tensor> = mlps.iter().map(|m| pick(m).dense_weight(Kind::Float).unwrap()).collect();
            let biases: Vec<Tensor> = mlps.iter().map(|m| pick(m).bias().unwrap().shallow_clone()).collect();
            (Tensor::stack(&weights, 0), Tensor::stack(&biases, 0))
        };
        for (stacked, pick) in
            [(&bank.gate, (|m| &m.gate) as fn(&Mlp) -> &Linear), (&bank.up, |m| &m.up), (&bank.down, |m| &m.down)]
        {
            let (weight, bias) = all_at_once(pick);
            assert!(stacked.weight.equal(&weight) && stacked.bias.as_ref().unwrap().equal(&bias));
        }
        assert_eq!(bank.len(), 3);
        // In e4m3: each expert quantised with its own scale, as before.
        let fp8 = ExpertBank::new(3, make, Kind::Float, Some(Fp8Format::E4m3fn)).unwrap();
        for e in 0..3 {
            let (q, scale) =
                quantise(&mlps[e as usize].up.dense_weight(Kind::Float).unwrap(), Fp8Format::E4m3fn).unwrap();
            let id = Tensor::from_slice(&[e]);
            let expected = q.to_kind(Kind::Float) * scale;
            assert!(fp8.up.dense(Some(&id), Kind::Float).unwrap().squeeze_dim(0).equal(&expected), "expert {e}");
        }
        // Converted from the dense bank, as a model's copy at fp8 is: each expert quantised from
        // its weight at the copy's element type.
        let convert = Convert { device: Device::Cpu, kind: Kind::BFloat16, fp8: Some(Fp8Format::E4m3fn) };
        let converted = bank.to(&convert).unwrap();
        for e in 0..3 {
            let (q, scale) =
                quantise(&mlps[e as usize].down.dense_weight(Kind::BFloat16).unwrap(), Fp8Format::E4m3fn).unwrap();
            let id = Tensor::from_slice(&[e]);
            let expected = q.to_kind(Kind::Float) * scale;
            assert!(
                converted.down.dense(Some(&id), Kind::Float).unwrap().squeeze_dim(0).equal(&expected),
                "expert {e}"
            );
        }
        assert_eq!(converted.down.bias.as_ref().unwrap().kind(), Kind::BFloat16);
        // Widened once (to bf16, the activations' type under fp8), the e4m3 bank holds the values
        // every call made and runs as before, by each kernel the CPU takes.
        let x =
            crate::with_generator(None, || Tensor::randn([5, 4], (Kind::Float, Device::Cpu))).to_kind(Kind::BFloat16);
        let routing = (
            Tensor::from_slice2(&[[0i64, 2], [1, 0], [2, 1], [0, 1], [2, 0]]),
            &Tensor::full([5, 2], 0.5, (Kind::Float, Device::Cpu)),
        );
        let runs = |bank: &ExpertBank| {
            [ExpertKernel::Gathered, ExpertKernel::Every]
                .map(|kernel| bank.run(&x, (&routing.0, routing.1), &Activation::Swiglu, kernel).unwrap())
        };
        let before = runs(&fp8);
        assert!(fp8.widen().unwrap() && !bank.widen().unwrap());
        assert!(fp8.up.widened.get().is_some_and(|wide| wide.kind() == Kind::BFloat16));
        for (before, after) in before.iter().zip(runs(&fp8)) {
            assert!(before.equal(&after));
        }
        let unbiased = |e: i64| {
            let bias = e == 0;
            Ok(Mlp { gate: linear(6, 4, bias), up: linear(6, 4, bias), down: linear(4, 6, bias) })
        };
        let refused = ExpertBank::new(2, unbiased, Kind::Float, None).err().unwrap().to_string();
        assert_eq!(refused, "expert 1's projection has no bias, and the first expert's has one");
    }
}
