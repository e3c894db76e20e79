//! Native CUDA ceilings: memory bandwidth from the kernels in `kernels/stream.cu` (compiled with
//! NVRTC for the device's own architecture) and matmul rates through cuBLASLt, each timed with
//! CUDA events and reported as the median of repeated runs.
//!
//! Every library is loaded at run time: libcuda (the driver), libnvrtc and libcublasLt. Their
//! presence is checked before any cudarc call (cudarc panics when a library is missing); libnvrtc
//! and libcublasLt are also looked for in folders the caller names (the CUDA wheels beside a pip
//! libtorch), and loaded from there globally so that cudarc finds them by name.

use cudarc::cublaslt::{CudaBlasLT, Matmul, MatmulConfig};
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits};
use cudarc::nvrtc::CompileOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The bandwidth kernels' source.
pub const STREAM_SOURCE: &str = include_str!("../../../kernels/stream.cu");
/// The kernels `STREAM_SOURCE` defines.
pub const STREAM_ENTRIES: [&str; 4] = ["lynx_fill_random", "lynx_copy", "lynx_triad", "lynx_read"];
/// Threads per block of every bandwidth kernel (`lynx_read` reduces through 256 shared floats).
pub const BLOCK: u32 = 256;
/// Resident blocks per SM the grid is sized for (2048 threads per SM on Hopper and most others).
const BLOCKS_PER_SM: u32 = 8;
/// Bandwidth buffers: at least this many bytes per array, and at least eight times the L2.
const MIN_ARRAY_BYTES: u64 = 1 << 30;
/// Timed repetitions of each bandwidth kernel and of each burst matmul.
const REPETITIONS: usize = 20;

/// Why a native probe could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NativeUnavailable {
    #[error("no CUDA driver (libcuda) on this host")]
    NoDriver,
    #[error("no NVRTC library: {0}")]
    NoNvrtc(String),
    #[error("no cuBLASLt library: {0}")]
    NoCublasLt(String),
    #[error("NVRTC could not compile kernels/stream.cu: {0}")]
    Compile(String),
    #[error("CUDA driver: {0}")]
    Driver(String),
    #[error("cuBLASLt: {0}")]
    Blas(String),
    #[error("timing: {0}")]
    Timing(#[from] lynx_analysis::stats::StatsError),
    /// cudarc panicked (its cuBLASLt workspace allocation unwraps, for one): the probe is
    /// unavailable for the reason it gave, and the run goes on.
    #[error("{0} panicked: {1}")]
    Panicked(&'static str, String),
}

/// `probe` with a panic inside it (cudarc's) turned into the probe's reason.
fn without_panics<T>(
    what: &'static str,
    probe: impl FnOnce() -> Result<T, NativeUnavailable>,
) -> Result<T, NativeUnavailable> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(probe)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "no message".to_owned());
        Err(NativeUnavailable::Panicked(what, message.lines().next().unwrap_or_default().to_owned()))
    })
}

impl From<cudarc::driver::DriverError> for NativeUnavailable {
    fn from(error: cudarc::driver::DriverError) -> Self {
        NativeUnavailable::Driver(error.to_string())
    }
}

/// Load `library` (a file name such as `libnvrtc.so.13`) from the first of `dirs` that has it,
/// globally, so that a later `dlopen` of the same name finds it loaded. Returns the path loaded.
fn preload(library: &str, companions: &[&str], dirs: &[PathBuf]) -> Option<PathBuf> {
    let dir = dirs.iter().find(|d| d.join(library).is_file())?;
    for name in companions.iter().chain(std::iter::once(&library)) {
        let path = dir.join(name);
        if path.is_file() {
            // SAFETY: loading a CUDA library runs its initialisers, which only set up the library;
            // it stays loaded for the life of the process (the handle is leaked on purpose).
            let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL;
            if let Ok(lib) = unsafe { libloading::os::unix::Library::open(Some(&path), flags) } {
                std::mem::forget(lib);
            }
        }
    }
    Some(dir.join(library))
}

/// Make libnvrtc loadable: present on the library path, or preloaded from one of `dirs`.
pub fn load_nvrtc(dirs: &[PathBuf]) -> Result<(), NativeUnavailable> {
    // SAFETY: only tries to load the library; no NVRTC call is made.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(());
    }
    let loaded = preload("libnvrtc.so.13", &["libnvrtc-builtins.so.13.0"], dirs);
    // SAFETY: as above.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(());
    }
    Err(NativeUnavailable::NoNvrtc(match loaded {
        Some(path) => format!("{} did not load", path.display()),
        None => format!("libnvrtc.so.13 is not on the library path nor in {}", show(dirs)),
    }))
}

fn load_cublaslt(dirs: &[PathBuf]) -> Result<(), NativeUnavailable> {
    // SAFETY: only tries to load the library.
    if unsafe { cudarc::cublaslt::sys::is_culib_present() } {
        return Ok(());
    }
    preload("libcublasLt.so.13", &["libcublas.so.13"], dirs);
    // SAFETY: as above.
    if unsafe { cudarc::cublaslt::sys::is_culib_present() } {
        return Ok(());
    }
    Err(NativeUnavailable::NoCublasLt(format!("libcublasLt.so.13 is not on the library path nor in {}", show(dirs))))
}

fn show(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "any folder given".to_owned();
    }
    dirs.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// The folders beside a pip libtorch (`site-packages/torch/lib`) where the CUDA wheels put their
/// libraries, and `$LYNX_NVRTC_DIR`.
pub fn cuda_wheel_dirs(libtorch_lib: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("LYNX_NVRTC_DIR").map(PathBuf::from).into_iter().collect();
    if let Some(site) = libtorch_lib.and_then(|lib| lib.parent()).and_then(Path::parent) {
        for sub in ["nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib", "nvidia/cublas/lib"] {
            dirs.push(site.join(sub));
        }
    }
    dirs
}

/// Compile the bandwidth kernels to PTX for `arch` (e.g. `compute_90`).
pub fn compile_stream_ptx(arch: &str) -> Result<String, NativeUnavailable> {
    let options = CompileOptions {
        // cudarc wants a 'static option; one string per architecture compiled for is leaked.
        arch: Some(Box::leak(arch.to_owned().into_boxed_str())),
        ..CompileOptions::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(STREAM_SOURCE, options)
        .map(|ptx| ptx.to_src())
        .map_err(|e| NativeUnavailable::Compile(e.to_string()))
}

/// The kernels a PTX module defines (its `.entry` directives).
pub fn ptx_entries(ptx: &str) -> Vec<String> {
    ptx.lines()
        .filter_map(|line| line.split(".entry").nth(1))
        .filter_map(|rest| rest.trim().split(['(', ' ']).next())
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A grid for a grid-stride kernel over `elements` float4s on a device with `sms`
/// multiprocessors: enough blocks to fill every SM, never more than there is work for.
pub fn launch_config(elements: u64, sms: u32) -> LaunchConfig {
    let needed = elements.div_ceil(u64::from(BLOCK)).max(1);
    let grid = needed.min(u64::from(sms.max(1) * BLOCKS_PER_SM)) as u32;
    LaunchConfig { grid_dim: (grid, 1, 1), block_dim: (BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Bytes one launch of a bandwidth kernel moves over `elements` float4s.
pub fn kernel_bytes(kernel: &str, elements: u64) -> u64 {
    16 * elements
        * match kernel {
            "lynx_copy" => 2,
            "lynx_triad" => 3,
            _ => 1,
        }
}

/// A device's native memory bandwidth.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeBandwidth {
    /// (kernel, median bytes per second) for copy, triad and read.
    pub kernels: Vec<(&'static str, f64)>,
    pub array_bytes: u64,
    pub repetitions: usize,
}

fn context(ordinal: u32) -> Result<Arc<CudaContext>, NativeUnavailable> {
    // SAFETY: only tries to load libcuda; cudarc panics on first use without it.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(NativeUnavailable::NoDriver);
    }
    Ok(CudaContext::new(ordinal as usize)?)
}

fn milliseconds(
    context: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    launch: impl FnOnce() -> Result<(), NativeUnavailable>,
) -> Result<f64, NativeUnavailable> {
    let start = context.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    let end = context.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
    start.record(stream)?;
    launch()?;
    end.record(stream)?;
    Ok(f64::from(start.elapsed_ms(&end)?))
}

fn median(values: Vec<f64>) -> Result<f64, NativeUnavailable> {
    Ok(lynx_analysis::stats::median(&values)?)
}

/// Measure copy, triad and read on device `ordinal`: arrays of at least 1 GiB and eight times the
/// L2, random contents, one untimed launch each, then the median of [`REPETITIONS`] launches
/// timed with CUDA events.
pub fn native_bandwidth(ordinal: u32, library_dirs: &[PathBuf]) -> Result<NativeBandwidth, NativeUnavailable> {
    without_panics("the native bandwidth probe", || bandwidth(ordinal, library_dirs))
}

fn bandwidth(ordinal: u32, library_dirs: &[PathBuf]) -> Result<NativeBandwidth, NativeUnavailable> {
    let context = context(ordinal)?;
    load_nvrtc(library_dirs)?;
    let major = context.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = context.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let sms = context.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?.max(1) as u32;
    let l2 = context.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?.max(0) as u64;
    let ptx = compile_stream_ptx(&format!("compute_{major}{minor}"))?;
    let module = context.load_module(cudarc::nvrtc::Ptx::from_src(ptx))?;
    let function = |name: &str| module.load_function(name).map_err(NativeUnavailable::from);
    let (fill, copy, triad, read) =
        (function("lynx_fill_random")?, function("lynx_copy")?, function("lynx_triad")?, function("lynx_read")?);
    let stream = context.default_stream();

    let array_bytes = MIN_ARRAY_BYTES.max(8 * l2).next_multiple_of(16);
    let elements = array_bytes / 16;
    let config = launch_config(elements, sms);
    let mut arrays: Vec<CudaSlice<f32>> = Vec::new();
    for seed in 1..=3u64 {
        let mut array = stream.alloc_zeros::<f32>(4 * elements as usize)?;
        // SAFETY: lynx_fill_random(float4*, u64, u64) over `elements` float4s of `array`.
        unsafe { stream.launch_builder(&fill).arg(&mut array).arg(&elements).arg(&seed).launch(config) }?;
        arrays.push(array);
    }
    let mut partial = stream.alloc_zeros::<f32>(config.grid_dim.0 as usize)?;
    let [a, b, c] = &mut arrays[..] else { unreachable!("three arrays") };
    let scalar = 3.0f32;
    let mut kernels = Vec::new();
    for name in ["lynx_copy", "lynx_triad", "lynx_read"] {
        let mut times = Vec::new();
        for repetition in 0..=REPETITIONS {
            let ms = milliseconds(&context, &stream, || {
                // SAFETY: each kernel's parameters as kernels/stream.cu declares them; every
                // array holds `elements` float4s and `partial` one float per block.
                unsafe {
                    match name {
                        "lynx_copy" => stream.launch_builder(&copy).arg(&*a).arg(&mut *c).arg(&elements).launch(config),
                        "lynx_triad" => stream
                            .launch_builder(&triad)
                            .arg(&mut *a)
                            .arg(&*b)
                            .arg(&*c)
                            .arg(&scalar)
                            .arg(&elements)
                            .launch(config),
                        _ => stream.launch_builder(&read).arg(&*a).arg(&mut partial).arg(&elements).launch(config),
                    }
                }
                .map(|_| ())
                .map_err(NativeUnavailable::from)
            })?;
            if repetition > 0 {
                times.push(ms / 1e3);
            }
        }
        kernels.push((
            match name {
                "lynx_copy" => "copy",
                "lynx_triad" => "triad",
                _ => "read",
            },
            kernel_bytes(name, elements) as f64 / median(times)?,
        ));
    }
    Ok(NativeBandwidth { kernels, array_bytes, repetitions: REPETITIONS })
}

/// The element types cuBLASLt is probed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NativeDtype {
    /// f32 storage, TF32 tensor-core compute.
    Tf32,
    Fp16,
    Bf16,
}

impl NativeDtype {
    /// The element type results name it by.
    pub fn element_type(self) -> lynx_schema::roofline::ElementType {
        use lynx_schema::roofline::ElementType;
        match self {
            NativeDtype::Tf32 => ElementType::Tf32,
            NativeDtype::Fp16 => ElementType::Fp16,
            NativeDtype::Bf16 => ElementType::Bf16,
        }
    }
}

/// A matmul rate.
#[derive(Debug, Clone, PartialEq)]
pub struct NativeMatmul {
    pub dtype: NativeDtype,
    /// (m, n, k) of the shape that gave the rate.
    pub shape: (u64, u64, u64),
    /// FLOP per second: the median of [`REPETITIONS`] launches after three untimed ones.
    pub burst: f64,
    /// FLOP per second over the last third of `sustained_s` seconds of back-to-back launches;
    /// `None` when not asked for.
    pub sustained: Option<f64>,
}

/// The large shapes matmul is probed at; the best is reported.
pub const MATMUL_SHAPES: [(u64, u64, u64); 2] = [(8192, 8192, 8192), (16384, 8192, 4096)];

/// Host-drawn values in [-1, 1) for a matrix of `n` elements, as `T` (never zeros throughout).
fn random_values<T>(n: usize, seed: u64, convert: impl Fn(f32) -> T) -> Vec<T> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            convert(((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
        })
        .collect()
}

/// One shape's operands on the device, for [`matmul_rate`].
struct MatmulOperands<T> {
    a: CudaSlice<T>,
    b: CudaSlice<T>,
    c: CudaSlice<T>,
    config: MatmulConfig,
    flops: f64,
}

impl<T: DeviceRepr + ValidAsZeroBits + Copy> MatmulOperands<T>
where
    CudaBlasLT: Matmul<T>,
{
    /// Random m×k and k×n operands and a zeroed m×n product, column-major.
    fn new(
        stream: &Arc<CudaStream>,
        (m, n, k): (u64, u64, u64),
        convert: impl Fn(f32) -> T + Copy,
    ) -> Result<Self, NativeUnavailable> {
        Ok(MatmulOperands {
            a: stream.clone_htod(&random_values((m * k) as usize, 1, convert))?,
            b: stream.clone_htod(&random_values((k * n) as usize, 2, convert))?,
            c: stream.alloc_zeros::<T>((m * n) as usize)?,
            config: MatmulConfig {
                transa: false,
                transb: false,
                transc: false,
                m,
                n,
                k,
                alpha: 1.0,
                lda: m as i64,
                ldb: k as i64,
                beta: 0.0,
                ldc: m as i64,
                stride_a: None,
                stride_b: None,
                stride_c: None,
                stride_bias: None,
                batch_size: None,
            },
            flops: 2.0 * (m * n * k) as f64,
        })
    }

    /// One product, issued on the blas handle's stream.
    fn launch(&mut self, blas: &CudaBlasLT) -> Result<(), NativeUnavailable> {
        // SAFETY: a is m×k, b is k×n and c is m×n, column-major with the leading dimensions the
        // config gives; no bias, no epilogue.
        unsafe { blas.matmul(self.config, &self.a, &self.b, &mut self.c, None, None) }
            .map_err(|e| NativeUnavailable::Blas(e.to_string()))
    }
}

/// The burst rate of each of [`MATMUL_SHAPES`] (the median of [`REPETITIONS`] products after
/// three untimed ones), and the best shape's; with `sustained`, that shape's sustained rate too:
/// the median over the last third of `seconds` of back-to-back products. Only the best shape,
/// the one kept, is sustained: a sustained run of each (as until 2026-12-06) doubled the probe's
/// time. Each shape's operands are freed before the next shape's are made, and the best shape's
/// made again for the sustained seconds, so that the probe holds one shape's at a time (under
/// 1 GiB), as it did, beside a model on the device.
fn matmul_rate<T: DeviceRepr + ValidAsZeroBits + Copy>(
    context: &Arc<CudaContext>,
    blas: &CudaBlasLT,
    dtype: NativeDtype,
    sustained: Option<(f64, &AtomicBool)>,
    convert: impl Fn(f32) -> T + Copy,
) -> Result<NativeMatmul, NativeUnavailable>
where
    CudaBlasLT: Matmul<T>,
{
    let stream = context.default_stream();
    let mut best: Option<NativeMatmul> = None;
    for shape in MATMUL_SHAPES {
        let mut operands = MatmulOperands::new(&stream, shape, convert)?;
        for _ in 0..3 {
            operands.launch(blas)?;
        }
        let mut times = Vec::new();
        for _ in 0..REPETITIONS {
            times.push(milliseconds(context, &stream, || operands.launch(blas))? / 1e3);
        }
        let burst = operands.flops / median(times)?;
        if best.as_ref().is_none_or(|b| burst > b.burst) {
            best = Some(NativeMatmul { dtype, shape, burst, sustained: None });
        }
    }
    let mut best = best.ok_or_else(|| NativeUnavailable::Blas("no shape ran".to_owned()))?;
    if let Some((seconds, stop)) = sustained {
        let mut operands = MatmulOperands::new(&stream, best.shape, convert)?;
        operands.launch(blas)?;
        let start = Instant::now();
        let mut rates = Vec::new();
        while start.elapsed().as_secs_f64() < seconds && !stop.load(Ordering::SeqCst) {
            rates.push(operands.flops / (milliseconds(context, &stream, || operands.launch(blas))? / 1e3));
        }
        let tail = rates.split_off(rates.len() * 2 / 3);
        best.sustained = Some(median(if tail.is_empty() { rates } else { tail })?);
    }
    Ok(best)
}

/// Matmul rates through cuBLASLt on device `ordinal` in TF32, fp16 and bf16 (fp32 accumulate),
/// the best of [`MATMUL_SHAPES`]; with `sustained` (seconds, and a stop flag that ends it early),
/// also the sustained rate.
pub fn native_matmul(
    ordinal: u32,
    library_dirs: &[PathBuf],
    sustained: Option<(f64, &AtomicBool)>,
) -> Result<Vec<NativeMatmul>, NativeUnavailable> {
    without_panics("cuBLASLt", || {
        let context = context(ordinal)?;
        load_cublaslt(library_dirs)?;
        let blas = CudaBlasLT::new(context.default_stream()).map_err(|e| NativeUnavailable::Blas(e.to_string()))?;
        Ok(vec![
            matmul_rate(&context, &blas, NativeDtype::Tf32, sustained, |x| x)?,
            matmul_rate(&context, &blas, NativeDtype::Fp16, sustained, half::f16::from_f32)?,
            matmul_rate(&context, &blas, NativeDtype::Bf16, sustained, half::bf16::from_f32)?,
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 15): cudarc unwraps its cuBLASLt workspace allocation; a panic inside a
    /// probe is that probe's reason, not the end of the run.
    #[test]
    fn a_panic_inside_a_probe_becomes_its_reason() {
        let outcome: Result<(), _> = without_panics("cuBLASLt", || panic!("workspace: out of memory\nmore"));
        let reason = outcome.unwrap_err().to_string();
        assert_eq!(reason, "cuBLASLt panicked: workspace: out of memory");
        assert_eq!(without_panics("x", || Ok(7)).unwrap(), 7);
    }

    #[test]
    fn launches_fill_every_sm_and_never_exceed_the_work() {
        let config = launch_config(1 << 26, 132);
        assert_eq!(config.block_dim, (256, 1, 1));
        assert_eq!(config.grid_dim, (132 * 8, 1, 1));
        assert_eq!(launch_config(1000, 132).grid_dim, (4, 1, 1), "1000 float4s need four blocks of 256");
        assert_eq!(launch_config(0, 132).grid_dim, (1, 1, 1));
        assert_eq!(launch_config(1 << 20, 0).grid_dim, (8, 1, 1), "a device reporting no SMs still runs");
    }

    #[test]
    fn kernel_bytes_count_sixteen_bytes_per_access() {
        assert_eq!(kernel_bytes("lynx_copy", 10), 320);
        assert_eq!(kernel_bytes("lynx_triad", 10), 480);
        assert_eq!(kernel_bytes("lynx_read", 10), 160);
    }

    #[test]
    fn entries_are_read_from_ptx() {
        let ptx = ".visible .entry lynx_copy(\n\t.param .u64 a\n)\n.visible .entry lynx_read(\n";
        assert_eq!(ptx_entries(ptx), ["lynx_copy", "lynx_read"]);
    }

    /// Without a driver the probes say so; with one, a device no host has is the driver's own
    /// error, never "no driver" (so the test asserts something on either host, skipping nothing).
    #[test]
    fn without_a_driver_the_probes_say_so() {
        // SAFETY: only tries to load libcuda.
        if unsafe { cudarc::driver::sys::is_culib_present() } {
            for error in [native_bandwidth(u32::MAX, &[]).unwrap_err(), native_matmul(u32::MAX, &[], None).unwrap_err()]
            {
                assert!(matches!(error, NativeUnavailable::Driver(_) | NativeUnavailable::Panicked(..)), "{error}");
            }
            return;
        }
        assert_eq!(native_bandwidth(0, &[]).unwrap_err(), NativeUnavailable::NoDriver);
        assert_eq!(native_matmul(0, &[], None).unwrap_err(), NativeUnavailable::NoDriver);
    }
}
