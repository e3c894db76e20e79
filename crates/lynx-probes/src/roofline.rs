//! The device's ceilings, measured in the run: libtorch's copy and matmul on every device, the
//! native CUDA probes on NVIDIA GPUs (`native`), and the Rust STREAM probes on the CPU (`cpu`).
//!
//! Torch-level probes are timed with the host clock around repetitions that end in a device
//! synchronise (on the CPU the work is synchronous); the native probes with CUDA events.

use crate::cpu::{stream, StreamKernel};
use crate::native::{cuda_wheel_dirs, native_bandwidth, native_matmul};
use lynx_analysis::roofline::{matmul_dtype, with_gaps};
use lynx_schema::config::Precision;
use lynx_schema::device::DeviceName;
use lynx_schema::roofline::{ElementType, Probe, ProbeKind, ProbePhase, RooflineRecord};
use lynx_schema::value::{Finite, Reported};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tch::{Kind, Tensor};

/// The device the probes run on.
#[derive(Debug, Clone)]
pub struct Target {
    pub device: DeviceName,
    /// The libtorch device it maps to.
    pub torch: tch::Device,
    /// Its largest cache, bytes, where known (recorded with the ceilings for the roofline check).
    pub cache_bytes: Option<u64>,
    /// The folder of the libtorch this process runs against: NVRTC and cuBLASLt are looked for in
    /// the CUDA wheels beside a pip libtorch.
    pub lib_dir: Option<std::path::PathBuf>,
    /// Releases the memory libtorch's caching allocator keeps for reuse, so the native probes,
    /// which allocate outside libtorch, find it free; `None` where there is nothing to release.
    pub release_cached_memory: Option<fn(&Target)>,
}

impl Target {
    /// Before a native probe: libtorch's cached blocks handed back to the driver.
    fn before_native(&self) {
        if let Some(release) = self.release_cached_memory {
            release(self);
        }
    }
}

/// Probe sizes for a device.
struct Sizes {
    /// f32 elements of each copy buffer.
    copy_elements: i64,
    /// The matmul's output side (n × n, the input n rows, the weight n rows).
    matmul_n: i64,
    /// Its inner dimension (the weight's row).
    matmul_k: i64,
    warmup: usize,
    repetitions: usize,
}

fn sizes(device: &Target) -> Sizes {
    match device.device {
        // 64 MiB buffers (beyond any CPU's last-level cache), 1024×4096×1024 matmuls (8.6 GFLOP):
        // libtorch's CPU bf16 kernel runs faster the longer its dot products, and a model's are
        // thousands long (this project's host: 20.7 GFLOP/s at 1024³, 21.9 at an inner 4096 and
        // 21.6–22.1 for Llama 3.1 8B's prefill projections; fp32 182, 184 and 98–127).
        DeviceName::Cpu => Sizes { copy_elements: 1 << 24, matmul_n: 1024, matmul_k: 4096, warmup: 2, repetitions: 5 },
        // 1 GiB buffers (many times any GPU's L2), 8192³ matmuls (1.1 TFLOP).
        _ => Sizes { copy_elements: 1 << 28, matmul_n: 8192, matmul_k: 8192, warmup: 3, repetitions: 20 },
    }
}

fn synchronize(device: &Target) {
    if let tch::Device::Cuda(index) = device.torch {
        tch::Cuda::synchronize(index as i64);
    }
}

fn known(value: f64, what: &str) -> Reported<Finite> {
    match Finite::new(value, what) {
        Ok(v) if value > 0.0 => Reported::Known(v),
        _ => Reported::Unavailable { unavailable: format!("{what} came out as {value}") },
    }
}

fn unavailable(reason: String) -> Reported<Finite> {
    Reported::Unavailable { unavailable: reason }
}

/// Seconds of each of `repetitions` runs of `work` after `warmup` untimed ones, each ended by a
/// synchronise.
fn timed(
    device: &Target,
    warmup: usize,
    repetitions: usize,
    mut work: impl FnMut() -> Result<(), tch::TchError>,
) -> Result<Vec<f64>, tch::TchError> {
    for _ in 0..warmup {
        work()?;
    }
    synchronize(device);
    let mut times = Vec::with_capacity(repetitions);
    for _ in 0..repetitions {
        let start = Instant::now();
        work()?;
        synchronize(device);
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(times)
}

/// The median of `values`; NaN (which [`known`] reports as unavailable) when there are none.
fn median(values: Vec<f64>) -> f64 {
    lynx_analysis::stats::median(&values).unwrap_or(f64::NAN)
}

/// libtorch's device-to-device copy of a random f32 buffer.
fn torch_copy(device: &Target) -> Probe {
    let sizes = sizes(device);
    let measured = (|| {
        let a = Tensor::f_rand([sizes.copy_elements], (Kind::Float, device.torch))?;
        let mut b = a.f_empty_like()?;
        timed(device, sizes.warmup, sizes.repetitions, || b.f_copy_(&a))
    })();
    let bytes = 2.0 * 4.0 * sizes.copy_elements as f64;
    Probe {
        name: "torch copy".to_owned(),
        kind: ProbeKind::Bandwidth,
        dtype: ElementType::F32,
        phase: ProbePhase::Burst,
        value: match measured {
            Ok(times) => known(bytes / median(times), "torch copy bandwidth"),
            Err(e) => unavailable(format!("libtorch: {e}")),
        },
        method: format!(
            "Tensor::copy_ of {} MiB of random f32 (2 x 4 bytes per element counted), median of {} after {} untimed, host \
             clock with a device synchronise",
            (sizes.copy_elements * 4) >> 20,
            sizes.repetitions,
            sizes.warmup
        ),
    }
}

/// The matmul element types `precision` and the device are probed in through libtorch.
fn torch_dtypes(device: &Target, precision: Option<Precision>) -> Vec<Precision> {
    match precision {
        Some(p) => vec![p],
        None if device.device == DeviceName::Cpu => vec![Precision::Fp32, Precision::Bf16],
        None => vec![Precision::Fp32, Precision::Bf16, Precision::Fp16, Precision::Fp8],
    }
}

/// One matmul of a random n×k input and a random n×k weight in `precision` as a model's linear
/// layer multiplies them, input × weightᵀ with the weight stored `[out, in]` (fp8: e4m3 through
/// `_scaled_mm`, whose second operand is that transposed weight). On a CPU without AVX-512,
/// libtorch's bf16 and fp16 kernels differ twentyfold by layout: 1 GFLOP/s for two row-major
/// operands on this project's host, against 20–25 for input × weightᵀ (fp32 170 and 182), so a
/// probe of `a × b` measured a kernel no model step runs, and every bf16 cell on such a CPU came
/// out at twenty times its "ceiling".
fn matmul_work(
    device: &Target,
    precision: Precision,
    n: i64,
    k: i64,
) -> Result<impl FnMut() -> Result<(), tch::TchError>, tch::TchError> {
    let kind = match precision {
        Precision::Fp32 => Kind::Float,
        Precision::Bf16 | Precision::Fp8 => Kind::BFloat16,
        Precision::Fp16 => Kind::Half,
    };
    let a = Tensor::f_randn([n, k], (kind, device.torch))?;
    let b = Tensor::f_randn([n, k], (kind, device.torch))?;
    let fp8 = if precision == Precision::Fp8 {
        let one = Tensor::f_ones([], (Kind::Float, device.torch))?;
        // _scaled_mm takes its second operand column-major: the weight [out, in] transposed, as an
        // fp8 linear layer gives it.
        Some((a.f_to_kind(Kind::Float8e4m3fn)?, b.f_to_kind(Kind::Float8e4m3fn)?.f_transpose(0, 1)?, one))
    } else {
        None
    };
    Ok(move || {
        match &fp8 {
            Some((a8, b8, one)) => {
                let _product =
                    a8.f_internal_scaled_mm(b8, one, one, None::<Tensor>, None::<Tensor>, Kind::BFloat16, false)?;
            }
            None => {
                let _product = a.f_linear::<Tensor>(&b, None)?;
            }
        }
        Ok(())
    })
}

/// libtorch matmul rates: burst (median of repetitions after a warm-up), or with `sustained_s`,
/// the median over the last third of that many seconds of back-to-back matmuls.
fn torch_matmul(device: &Target, precision: Precision, sustained: Option<(f64, &AtomicBool)>) -> Probe {
    let sustained_s = sustained.map(|(s, _)| s);
    let sizes = sizes(device);
    let (n, k) = (sizes.matmul_n, sizes.matmul_k);
    let flops = 2.0 * (n * n * k) as f64;
    let measured = (|| -> Result<f64, tch::TchError> {
        let mut work = matmul_work(device, precision, n, k)?;
        match sustained_s {
            None => Ok(flops / median(timed(device, sizes.warmup, sizes.repetitions, &mut work)?)),
            Some(seconds) => {
                let stop = sustained.map(|(_, stop)| stop);
                let start = Instant::now();
                let mut rates = Vec::new();
                while (start.elapsed().as_secs_f64() < seconds || rates.len() < 3)
                    && !stop.is_some_and(|s| s.load(Ordering::SeqCst))
                {
                    let t = timed(device, 0, 1, &mut work)?[0];
                    rates.push(flops / t);
                }
                let tail = rates.split_off(rates.len() * 2 / 3);
                Ok(median(tail))
            }
        }
    })();
    let phase = if sustained_s.is_some() { ProbePhase::Sustained } else { ProbePhase::Burst };
    Probe {
        name: "torch matmul".to_owned(),
        kind: ProbeKind::Matmul,
        dtype: matmul_dtype(precision),
        phase,
        value: match measured {
            Ok(rate) => known(rate, "torch matmul rate"),
            Err(e) => unavailable(format!("libtorch: {}", e.to_string().lines().next().unwrap_or_default())),
        },
        method: match sustained_s {
            None => format!(
                "{n}x{k}x{n} {} matmul of random inputs ({}), median of {} after {} untimed, host clock with a device \
                 synchronise",
                matmul_dtype(precision),
                if precision == Precision::Fp8 {
                    "e4m3 through _scaled_mm, bf16 out"
                } else {
                    "Tensor::linear: input x weight^T, as a model's linear layers"
                },
                sizes.repetitions,
                sizes.warmup
            ),
            Some(s) => format!(
                "{n}x{k}x{n} {} matmul of random inputs back to back for {s} s, median rate of the last third",
                matmul_dtype(precision)
            ),
        },
    }
}

/// The CPU's STREAM copy and triad, on all its cores.
fn cpu_stream() -> Vec<Probe> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let elements = crate::cpu::default_elements();
    [StreamKernel::Copy, StreamKernel::Triad]
        .into_iter()
        .map(|kernel| {
            let figure = stream(kernel, elements, threads, 10);
            Probe {
                name: format!("cpu {}", if kernel == StreamKernel::Copy { "copy" } else { "triad" }),
                kind: ProbeKind::Bandwidth,
                dtype: ElementType::F64,
                phase: ProbePhase::Burst,
                value: known(figure.median_bytes_per_s, "STREAM bandwidth"),
                method: format!(
                    "STREAM {} over {} MiB f64 arrays on {threads} threads (STREAM's byte count), median of {} after one \
                     untimed; best {:.1} GB/s",
                    if kernel == StreamKernel::Copy { "copy" } else { "triad" },
                    (elements * 8) >> 20,
                    figure.repetitions,
                    figure.best_bytes_per_s / 1e9
                ),
            }
        })
        .collect()
}

/// A probe that could not run, and why.
fn unavailable_probe(name: &str, kind: ProbeKind, dtype: ElementType, phase: ProbePhase, reason: String) -> Probe {
    Probe { name: name.to_owned(), kind, dtype, phase, value: unavailable(reason), method: String::new() }
}

/// The CUDA ordinal the native probes run on, or why a device has no native probes.
fn cuda_ordinal(device: &Target) -> Result<u32, &'static str> {
    match device.device {
        DeviceName::Cuda(ordinal) => Ok(ordinal),
        DeviceName::Rocm(_) => Err("the native probes are CUDA kernels; ROCm devices are measured through libtorch"),
        DeviceName::Cpu => Err("the native probes are GPU kernels; the CPU is measured by the STREAM probes"),
    }
}

/// The native bandwidth kernels, or one probe saying why they could not run.
fn native_bandwidth_probes(device: &Target, lib_dir: Option<&std::path::Path>) -> Vec<Probe> {
    let ordinal = match cuda_ordinal(device) {
        Ok(ordinal) => ordinal,
        Err(reason) => {
            return vec![unavailable_probe(
                "native",
                ProbeKind::Bandwidth,
                ElementType::None,
                ProbePhase::Burst,
                reason.to_owned(),
            )]
        }
    };
    match native_bandwidth(ordinal, &cuda_wheel_dirs(lib_dir)) {
        Ok(figures) => figures
            .kernels
            .iter()
            .map(|(kernel, rate)| Probe {
                name: format!("native {kernel}"),
                kind: ProbeKind::Bandwidth,
                dtype: ElementType::F32,
                phase: ProbePhase::Burst,
                value: known(*rate, "native bandwidth"),
                method: format!(
                    "kernels/stream.cu {kernel} (NVRTC, 16-byte accesses) over {} MiB arrays, median of {} launches \
                     timed with CUDA events",
                    figures.array_bytes >> 20,
                    figures.repetitions
                ),
            })
            .collect(),
        Err(e) => vec![unavailable_probe(
            "native bandwidth",
            ProbeKind::Bandwidth,
            ElementType::F32,
            ProbePhase::Burst,
            e.to_string(),
        )],
    }
}

/// cuBLASLt's matmul rates (burst, or sustained over `sustained_s`), or a probe saying why they
/// could not run; and the fp8 probe cuBLASLt cannot make here.
fn native_matmul_probes(
    device: &Target,
    lib_dir: Option<&std::path::Path>,
    sustained: Option<(f64, &AtomicBool)>,
) -> Vec<Probe> {
    let sustained_s = sustained.map(|(s, _)| s);
    let phase = if sustained_s.is_some() { ProbePhase::Sustained } else { ProbePhase::Burst };
    let ordinal = match cuda_ordinal(device) {
        Ok(ordinal) => ordinal,
        Err(reason) => {
            return vec![unavailable_probe("native", ProbeKind::Matmul, ElementType::None, phase, reason.to_owned())]
        }
    };
    let mut probes = match native_matmul(ordinal, &cuda_wheel_dirs(lib_dir), sustained) {
        Ok(rates) => rates
            .iter()
            .map(|rate| Probe {
                name: "cublaslt matmul".to_owned(),
                kind: ProbeKind::Matmul,
                dtype: rate.dtype.element_type(),
                phase,
                value: known(rate.sustained.unwrap_or(rate.burst), "cuBLASLt rate"),
                method: format!(
                    "cuBLASLt {}x{}x{} {} (fp32 accumulate) on random inputs, {}",
                    rate.shape.0,
                    rate.shape.1,
                    rate.shape.2,
                    rate.dtype.element_type(),
                    match sustained_s {
                        Some(s) => format!("back to back for {s} s, median of the last third, CUDA events"),
                        None => "median of 20 launches after 3 untimed, CUDA events; best of the shapes".to_owned(),
                    }
                ),
            })
            .collect(),
        Err(e) => {
            vec![unavailable_probe("cublaslt matmul", ProbeKind::Matmul, ElementType::None, phase, e.to_string())]
        }
    };
    probes.push(unavailable_probe(
        "cublaslt matmul",
        ProbeKind::Matmul,
        ElementType::Fp8,
        phase,
        "cudarc's cuBLASLt wrapper has no fp8 matmul (it needs scale pointers); fp8 is measured through \
         libtorch's _scaled_mm"
            .to_owned(),
    ));
    probes
}

/// What to probe.
pub struct ProbePlan<'a> {
    /// Matmul only in this precision (a run); every precision the device has when `None`.
    pub precision: Option<Precision>,
    /// Also measure sustained matmul rates for this many seconds each.
    pub sustained_s: Option<f64>,
    /// Raised by a stop signal: a sustained probe ends at its next matmul and is not recorded.
    pub stop: &'a AtomicBool,
}

/// Measure the burst ceilings of `device`: bandwidth (libtorch copy; STREAM on the CPU; the native
/// kernels on NVIDIA GPUs) and matmul (libtorch; cuBLASLt on NVIDIA GPUs). libtorch's operands
/// are drawn from its global generator, as are [`sustained`]'s: a caller that also makes seeded
/// draws in this process holds its lock on that generator around both (lynx-runner holds
/// lynx-models' `with_generator`).
pub fn burst(device: &Target, plan: &ProbePlan) -> RooflineRecord {
    let lib_dir = device.lib_dir.clone();
    let mut probes = vec![torch_copy(device)];
    if device.device == DeviceName::Cpu {
        probes.extend(cpu_stream());
    }
    device.before_native();
    probes.extend(native_bandwidth_probes(device, lib_dir.as_deref()));
    for precision in torch_dtypes(device, plan.precision) {
        probes.push(torch_matmul(device, precision, None));
    }
    if device.device != DeviceName::Cpu {
        device.before_native();
        probes.extend(native_matmul_probes(device, lib_dir.as_deref(), None));
    }
    RooflineRecord { cache_bytes: device.cache_bytes, ..with_gaps(probes) }
}

/// Whether [`sustained`] measures cuBLASLt's matmuls beside libtorch's on `device` (an NVIDIA
/// GPU's, each of its three element types), as a run's wall-time estimate needs to know.
pub fn sustains_native_matmuls(device: DeviceName) -> bool {
    matches!(device, DeviceName::Cuda(_))
}

/// Sustained matmul rates (after the device reached equilibrium), added to `record`. `false`
/// when `plan.stop` was raised: then `record` is left as it was, for a resumed run to measure.
pub fn sustained(device: &Target, plan: &ProbePlan, record: &mut RooflineRecord) -> bool {
    let Some(seconds) = plan.sustained_s else { return true };
    let lib_dir = device.lib_dir.clone();
    let mut probes = Vec::new();
    for precision in torch_dtypes(device, plan.precision) {
        probes.push(torch_matmul(device, precision, Some((seconds, plan.stop))));
    }
    if sustains_native_matmuls(device.device) && !plan.stop.load(Ordering::SeqCst) {
        device.before_native();
        probes.extend(native_matmul_probes(device, lib_dir.as_deref(), Some((seconds, plan.stop))));
    }
    if plan.stop.load(Ordering::SeqCst) {
        return false;
    }
    record.probes.extend(probes);
    *record = RooflineRecord { cache_bytes: record.cache_bytes, ..with_gaps(std::mem::take(&mut record.probes)) };
    true
}
