//! The libtorch this process runs against, and its optional GPU backends.
//!
//! The linker drops `libtorch_cuda`/`libtorch_hip` from the binary when linking as-needed (no
//! symbol of theirs is referenced), so libtorch would never see a GPU. [`load_gpu_backends`]
//! loads them by hand, from the folder of the `libtorch_cpu` the process actually mapped, before
//! any device is queried. Where the library is absent (a CPU-only libtorch) or cannot load (no
//! CUDA libraries on this host), the reason is recorded and the run goes on on CPU.
//!
//! [`InferenceMode`] enters libtorch's inference mode, and [`exclude_cudnn_attention`] takes
//! cuDNN out of SDPA's choice, through a small C++ shim (`csrc/inference_mode.cpp`), since tch
//! exposes neither.
//!
//! This is the only module with `unsafe` code.

use lynx_schema::result::{BackendLoad, GpuLibrary};
use lynx_schema::value::Reported;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

extern "C" {
    fn lynx_inference_mode_enter() -> *mut c_void;
    fn lynx_inference_mode_exit(guard: *mut c_void);
    fn lynx_sdpa_set_cudnn(enabled: bool);
    fn lynx_sdpa_cudnn_enabled() -> bool;
}

/// Take cuDNN out of SDPA's choice for the rest of the process. On sm90 and sm100 with a recent
/// cuDNN, ATen tries cuDNN's attention first, and cuDNN builds one execution graph per problem
/// shape, the key length among its keys: tens of milliseconds of host time on every new shape. A
/// decode step attends one key more than the step before, and a serving loop's prompts vary in
/// length, so each paid a build (about 50 ms an eager decode step on an H200, where the graph
/// replay of the same step took 6.5 ms): figures of cuDNN's planner, not of the device. Flash,
/// memory-efficient and math attention keep no per-shape plan. Each cell still records the
/// kernel SDPA chose for it. A graph capture lets cuDNN back in for its while
/// ([`CudnnAttentionForCapture`]).
pub fn exclude_cudnn_attention() {
    // SAFETY: the shim sets one flag of libtorch's global context.
    unsafe { lynx_sdpa_set_cudnn(false) }
}

/// While it lives, SDPA may choose cuDNN's attention again; dropping it puts the flag back as it
/// was. For what a CUDA graph records: a captured step has one shape for all its replays, so
/// cuDNN builds its plan once, at capture, and the graph step's masked call over a padded cache
/// (which no flash kernel takes) runs on cuDNN instead of the math kernel. In the H200 run with
/// cuDNN excluded everywhere (docs/GPU-RUNS.md, run 3), Llama 3.1 8B's graph decode at batch 64
/// took 106 ms on math, against 10.5 ms eager on flash; on cuDNN, in the next run, 8.49 ms. Hold it only on the thread that
/// issues the step (the flag is the process's) and only around the capture, the eager run
/// before it and the query of the kernel it will choose.
pub struct CudnnAttentionForCapture {
    was: bool,
}

impl CudnnAttentionForCapture {
    pub fn allow() -> CudnnAttentionForCapture {
        let was = cudnn_attention_enabled();
        // SAFETY: as in exclude_cudnn_attention.
        unsafe { lynx_sdpa_set_cudnn(true) }
        CudnnAttentionForCapture { was }
    }
}

impl Drop for CudnnAttentionForCapture {
    fn drop(&mut self) {
        // SAFETY: as in exclude_cudnn_attention.
        unsafe { lynx_sdpa_set_cudnn(self.was) }
    }
}

/// Whether SDPA may still choose cuDNN's attention in this process.
pub fn cudnn_attention_enabled() -> bool {
    // SAFETY: the shim reads one flag of libtorch's global context.
    unsafe { lynx_sdpa_cudnn_enabled() }
}

/// libtorch's inference mode on this thread while it lives: no autograd, no version counters,
/// as under Python's `torch.inference_mode()`. Tensors made under it cannot later take part in
/// autograd, which lynx never uses. Not `Send`: the mode belongs to the thread that entered it.
pub struct InferenceMode {
    guard: *mut c_void,
}

impl InferenceMode {
    pub fn enter() -> InferenceMode {
        // SAFETY: the shim allocates a c10::InferenceMode guard and returns it; it takes no
        // arguments and cannot fail but by aborting on allocation failure.
        InferenceMode { guard: unsafe { lynx_inference_mode_enter() } }
    }
}

impl Drop for InferenceMode {
    fn drop(&mut self) {
        // SAFETY: `guard` came from lynx_inference_mode_enter on this thread (the type is not
        // Send) and is freed exactly once, here.
        unsafe { lynx_inference_mode_exit(self.guard) }
    }
}

/// The GPU backend libraries a libtorch distribution may carry, in the order they are tried.
const GPU_BACKENDS: [&str; 2] = ["libtorch_cuda.so", "libtorch_hip.so"];

/// The libtorch the process runs against.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// Folder of the loaded `libtorch_cpu.so`.
    pub lib_dir: Reported<PathBuf>,
    /// The version its distribution declares.
    pub version: Reported<String>,
    /// What [`load_gpu_backends`] did.
    pub gpu_backends: Vec<BackendLoad>,
    /// The GPU math libraries mapped once the backends had loaded: those libtorch's GPU
    /// backend runs on, found before anything else could map others; none where no backend
    /// loaded, `None` where /proc/self/maps could not be read.
    math_library_files: Option<Vec<(MathLibrary, PathBuf)>>,
    /// Their versions, asked the first time they are wanted (a command that reads results never
    /// calls into a GPU library).
    gpu_libraries: OnceLock<Option<Vec<GpuLibrary>>>,
}

impl Runtime {
    /// Whether a GPU backend of libtorch (libtorch_cuda, libtorch_hip) loaded.
    pub fn gpu_backend_loaded(&self) -> bool {
        self.gpu_backends.iter().any(|backend| matches!(backend.loaded, Reported::Known(true)))
    }

    /// The GPU math libraries the GPU backend loaded, each with the version it answers
    /// (`Harness::gpu_libraries`): an empty list where no backend loaded, `None` where the
    /// process's maps could not be read.
    pub fn gpu_libraries(&self) -> Option<Vec<GpuLibrary>> {
        let libraries = self.gpu_libraries.get_or_init(|| {
            let files = self.math_library_files.as_ref()?;
            Some(files.iter().map(|(library, path)| library_record(*library, path)).collect())
        });
        libraries.clone()
    }
}

/// Load the GPU backends once (later calls return the first outcome) and describe the runtime.
/// Call before any tch device query.
pub fn load_gpu_backends() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let lib_dir = loaded_libtorch_dir();
        let gpu_backends: Vec<BackendLoad> = GPU_BACKENDS
            .iter()
            .map(|library| BackendLoad {
                library: (*library).to_owned(),
                loaded: match &lib_dir {
                    Reported::Known(dir) => load(&dir.join(library)),
                    Reported::Unavailable { unavailable } => Reported::unavailable(unavailable.clone()),
                },
            })
            .collect();
        let version = match &lib_dir {
            Reported::Known(dir) => lynx_build::libtorch_version(dir).map_or_else(
                || Reported::unavailable(format!("no version.py or build-version beside {}", dir.display())),
                Reported::Known,
            ),
            Reported::Unavailable { unavailable } => Reported::unavailable(unavailable.clone()),
        };
        let mut runtime = Runtime {
            lib_dir,
            version,
            gpu_backends,
            math_library_files: Some(Vec::new()),
            gpu_libraries: OnceLock::new(),
        };
        // A CPU libtorch of a CUDA wheel maps the CUDA runtime too (its profiler links it): only
        // a loaded GPU backend's libraries are the ones a run's kernels come from.
        if runtime.gpu_backend_loaded() {
            runtime.math_library_files = math_library_files();
        }
        runtime
    })
}

/// A GPU math library whose version a run records, by how its file is named and how it answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum MathLibrary {
    CudaRuntime,
    Cublas,
    CublasLt,
    Cudnn,
    HipRuntime,
    Rocblas,
    Miopen,
}

/// Each library's file name up to its version suffix, in the order a record lists them.
const MATH_LIBRARIES: [(&str, MathLibrary); 7] = [
    ("libcudart.so", MathLibrary::CudaRuntime),
    ("libcublas.so", MathLibrary::Cublas),
    ("libcublasLt.so", MathLibrary::CublasLt),
    ("libcudnn.so", MathLibrary::Cudnn),
    ("libamdhip64.so", MathLibrary::HipRuntime),
    ("librocblas.so", MathLibrary::Rocblas),
    ("libMIOpen.so", MathLibrary::Miopen),
];

impl MathLibrary {
    fn name(self) -> &'static str {
        match self {
            MathLibrary::CudaRuntime => "CUDA runtime",
            MathLibrary::Cublas => "cuBLAS",
            MathLibrary::CublasLt => "cuBLASLt",
            MathLibrary::Cudnn => "cuDNN",
            MathLibrary::HipRuntime => "HIP runtime",
            MathLibrary::Rocblas => "rocBLAS",
            MathLibrary::Miopen => "MIOpen",
        }
    }
}

/// The GPU math libraries mapped into this process (the CUDA or HIP runtime, cuBLAS, cuBLASLt,
/// cuDNN, rocBLAS, MIOpen), each with the version it answers through its own version call (none
/// of which needs a GPU or a driver); an empty list where none is mapped (a CPU-only libtorch, or
/// a GPU backend that did not load); `None` where /proc/self/maps cannot be read.
pub fn gpu_libraries() -> Option<Vec<GpuLibrary>> {
    Some(math_library_files()?.iter().map(|(library, path)| library_record(*library, path)).collect())
}

/// The math libraries mapped into this process now, by kind and file.
fn math_library_files() -> Option<Vec<(MathLibrary, PathBuf)>> {
    Some(mapped_math_libraries(&std::fs::read_to_string("/proc/self/maps").ok()?))
}

/// The record of the math library `library` loaded from `path`, its version asked of it.
fn library_record(library: MathLibrary, path: &Path) -> GpuLibrary {
    GpuLibrary { name: library.name().to_owned(), file: path.display().to_string(), version: version_of(library, path) }
}

/// The math libraries among the files `/proc/self/maps` text `maps` maps, once each, in
/// [`MATH_LIBRARIES`]' order (and by path within a kind: two copies of one are both listed).
fn mapped_math_libraries(maps: &str) -> Vec<(MathLibrary, PathBuf)> {
    let mut found: Vec<(usize, MathLibrary, PathBuf)> = Vec::new();
    for path in maps.lines().filter_map(mapped_path).map(Path::new) {
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else { continue };
        let kind = MATH_LIBRARIES.iter().enumerate().find(|(_, (stem, _))| {
            name.strip_prefix(stem).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        });
        if let Some((order, (_, library))) = kind {
            if !found.iter().any(|(_, _, p)| p == path) {
                found.push((order, *library, path.to_path_buf()));
            }
        }
    }
    found.sort_by(|a, b| (a.0, &a.2).cmp(&(b.0, &b.2)));
    found.into_iter().map(|(_, library, path)| (library, path)).collect()
}

/// `major.minor.patch` from the three numbers a library's properties call answers.
fn dotted(parts: &[i64]) -> String {
    parts.iter().map(i64::to_string).collect::<Vec<_>>().join(".")
}

/// The CUDA runtime's version number (1000 × major + 10 × minor) as `major.minor`.
fn cuda_runtime_version(number: c_int) -> String {
    format!("{}.{}", number / 1000, (number % 1000) / 10)
}

/// The HIP runtime's version number (10000000 × major + 100000 × minor + patch) as
/// `major.minor.patch`.
fn hip_runtime_version(number: c_int) -> String {
    format!("{}.{}.{}", number / 10_000_000, (number % 10_000_000) / 100_000, number % 100_000)
}

/// The version the library at `path`, already mapped, answers: asked of the copy the process
/// loaded (dlopen with RTLD_NOLOAD loads nothing), or why it could not be.
fn version_of(library: MathLibrary, path: &Path) -> Reported<String> {
    let Ok(c_path) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return Reported::unavailable(format!("{} has a NUL byte", path.display()));
    };
    // SAFETY: `c_path` is a valid NUL-terminated string; RTLD_NOLOAD returns the loaded copy or
    // NULL and runs no initialiser. The reference it takes is given back below.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return Reported::unavailable(format!("{} is mapped but not loaded by that path", path.display()));
    }
    let version = ask_version(library, handle);
    // SAFETY: `handle` came from the dlopen above, and is closed once; the library stays loaded
    // by whoever loaded it first.
    unsafe { libc::dlclose(handle) };
    version
}

/// The address of `symbol` in the library `handle` names, or why there is none.
fn symbol(handle: *mut c_void, symbol: &str) -> Result<*mut c_void, String> {
    let name = CString::new(symbol).expect("a symbol name has no NUL byte");
    // SAFETY: `handle` is a live dlopen handle and `name` a NUL-terminated string.
    let address = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if address.is_null() {
        Err(format!("the library has no {symbol}"))
    } else {
        Ok(address)
    }
}

/// Ask the library `handle` names for its version, by its own call (each as its vendor's header
/// declares it; a non-zero status is that call's error).
fn ask_version(library: MathLibrary, handle: *mut c_void) -> Reported<String> {
    type Property = unsafe extern "C" fn(c_int, *mut c_int) -> c_int;
    type Version = unsafe extern "C" fn(*mut c_int) -> c_int;
    // libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL.
    let properties = |name: &str| -> Result<String, String> {
        // SAFETY: the symbol is the library's `xGetProperty(libraryPropertyType, int *)`.
        let call: Property = unsafe { std::mem::transmute::<*mut c_void, Property>(symbol(handle, name)?) };
        let mut parts = Vec::new();
        for property in 0..3 {
            let mut value: c_int = 0;
            // SAFETY: `value` is a live int for the call to write.
            match unsafe { call(property, &mut value) } {
                0 => parts.push(i64::from(value)),
                status => return Err(format!("{name} answered status {status}")),
            }
        }
        Ok(dotted(&parts))
    };
    let number = |name: &str| -> Result<c_int, String> {
        // SAFETY: the symbol is the runtime's `xRuntimeGetVersion(int *)`.
        let call: Version = unsafe { std::mem::transmute::<*mut c_void, Version>(symbol(handle, name)?) };
        let mut value: c_int = 0;
        // SAFETY: `value` is a live int for the call to write.
        match unsafe { call(&mut value) } {
            0 => Ok(value),
            status => Err(format!("{name} answered status {status}")),
        }
    };
    let answer = match library {
        MathLibrary::CudaRuntime => number("cudaRuntimeGetVersion").map(cuda_runtime_version),
        MathLibrary::HipRuntime => number("hipRuntimeGetVersion").map(hip_runtime_version),
        MathLibrary::Cublas => properties("cublasGetProperty"),
        MathLibrary::CublasLt => properties("cublasLtGetProperty"),
        MathLibrary::Cudnn => properties("cudnnGetProperty"),
        MathLibrary::Miopen => miopen_version(handle),
        MathLibrary::Rocblas => rocblas_version(handle),
    };
    answer.map_or_else(Reported::unavailable, Reported::Known)
}

/// MIOpen's `miopenGetVersion(size_t *major, size_t *minor, size_t *patch)`.
fn miopen_version(handle: *mut c_void) -> Result<String, String> {
    type Call = unsafe extern "C" fn(*mut usize, *mut usize, *mut usize) -> c_int;
    // SAFETY: the symbol is MIOpen's miopenGetVersion, as miopen.h declares it.
    let call: Call = unsafe { std::mem::transmute::<*mut c_void, Call>(symbol(handle, "miopenGetVersion")?) };
    let (mut major, mut minor, mut patch) = (0usize, 0usize, 0usize);
    // SAFETY: three live size_t for the call to write.
    match unsafe { call(&mut major, &mut minor, &mut patch) } {
        0 => Ok(format!("{major}.{minor}.{patch}")),
        status => Err(format!("miopenGetVersion answered status {status}")),
    }
}

/// rocBLAS's version string: its size, then the string (`rocblas_get_version_string_size`,
/// `rocblas_get_version_string`), at most 256 bytes of it.
fn rocblas_version(handle: *mut c_void) -> Result<String, String> {
    type Size = unsafe extern "C" fn(*mut usize) -> c_int;
    type Text = unsafe extern "C" fn(*mut c_char, usize) -> c_int;
    // SAFETY: the symbols are rocBLAS's, as rocblas.h declares them.
    let (size, text): (Size, Text) = unsafe {
        (
            std::mem::transmute::<*mut c_void, Size>(symbol(handle, "rocblas_get_version_string_size")?),
            std::mem::transmute::<*mut c_void, Text>(symbol(handle, "rocblas_get_version_string")?),
        )
    };
    let mut length = 0usize;
    // SAFETY: a live size_t for the call to write.
    match unsafe { size(&mut length) } {
        0 => {}
        status => return Err(format!("rocblas_get_version_string_size answered status {status}")),
    }
    if length == 0 || length > 256 {
        return Err(format!("rocblas_get_version_string_size answered {length} bytes"));
    }
    let mut buffer = vec![0 as c_char; length];
    // SAFETY: `buffer` holds `length` bytes for the call to fill.
    match unsafe { text(buffer.as_mut_ptr(), length) } {
        0 => {}
        status => return Err(format!("rocblas_get_version_string answered status {status}")),
    }
    buffer[length - 1] = 0;
    // SAFETY: the buffer is NUL-terminated at its last byte at the latest.
    Ok(unsafe { CStr::from_ptr(buffer.as_ptr()) }.to_string_lossy().into_owned())
}

/// The folder of the `libtorch_cpu.so` mapped into this process, from `/proc/self/maps`.
fn loaded_libtorch_dir() -> Reported<PathBuf> {
    let maps = match std::fs::read_to_string("/proc/self/maps") {
        Ok(maps) => maps,
        Err(error) => return Reported::unavailable(format!("cannot read /proc/self/maps: {error}")),
    };
    maps.lines()
        .filter_map(mapped_path)
        .map(Path::new)
        .find(|path| path.file_name().is_some_and(|name| name == "libtorch_cpu.so"))
        .and_then(Path::parent)
        .map_or_else(
            || Reported::unavailable("libtorch_cpu.so is not mapped into this process"),
            |dir| Reported::Known(dir.to_path_buf()),
        )
}

/// The file a line of /proc/self/maps maps (everything after its fifth field, spaces in the
/// path kept), or `None` for an anonymous mapping.
fn mapped_path(line: &str) -> Option<&str> {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start();
        rest = &rest[rest.find(char::is_whitespace)?..];
    }
    Some(rest.trim()).filter(|path| !path.is_empty())
}

/// dlopen `path` for good, with its symbols global so libtorch's registries see them.
fn load(path: &Path) -> Reported<bool> {
    if !path.exists() {
        return Reported::unavailable(format!(
            "{} does not exist (a libtorch built without this backend)",
            path.display()
        ));
    }
    let Ok(c_path) = CString::new(path.as_os_str().as_encoded_bytes()) else {
        return Reported::unavailable(format!("{} has a NUL byte", path.display()));
    };
    // SAFETY: `c_path` is a valid NUL-terminated string. The handle is never closed: the library
    // registers libtorch hooks that must outlive every tensor.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if !handle.is_null() {
        return Reported::Known(true);
    }
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call on
    // this thread; it is copied at once.
    let error = unsafe {
        let message = libc::dlerror();
        if message.is_null() {
            "dlopen failed without a message".to_owned()
        } else {
            CStr::from_ptr(message).to_string_lossy().into_owned()
        }
    };
    Reported::unavailable(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shim reaches libtorch's own flag: a worker takes cuDNN out of SDPA's choice, a
    /// capture lets it back in for as long as it holds the guard, and the flag is out again after
    /// (one test: the flag is the process's, and tests run on threads of one process).
    #[test]
    fn a_worker_takes_cudnn_out_of_sdpas_choice_and_a_capture_lets_it_back_in() {
        exclude_cudnn_attention();
        assert!(!cudnn_attention_enabled());
        {
            let _capture = CudnnAttentionForCapture::allow();
            assert!(cudnn_attention_enabled());
            {
                let _nested = CudnnAttentionForCapture::allow();
                assert!(cudnn_attention_enabled());
            }
            assert!(cudnn_attention_enabled(), "an inner guard gives back what the outer one set");
        }
        assert!(!cudnn_attention_enabled());
    }

    #[test]
    fn finds_the_libtorch_this_test_runs_against() {
        let _ = tch::Tensor::from(1.0f64); // make sure libtorch is in use
        let runtime = load_gpu_backends();
        let dir = runtime.lib_dir.known().expect("libtorch_cpu.so is mapped");
        assert!(dir.join("libtorch_cpu.so").exists());
        let version = runtime.version.known().expect("the wheel declares its version");
        assert!(version.starts_with("2.11.0"), "{version}");
        assert_eq!(runtime.gpu_backends.len(), 2);
    }

    #[test]
    fn inference_mode_makes_inference_tensors_and_ends_with_its_guard() {
        let inside = {
            let _mode = InferenceMode::enter();
            tch::Tensor::from(1.0f64) + 1.0
        };
        assert!(inside.is_inference());
        assert!(!(tch::Tensor::from(1.0f64) + 1.0).is_inference());
    }

    /// The math libraries are found by their files' names up to the version suffix (not
    /// cuDNN's sub-libraries, nor a cuBLAS named like cuBLASLt), once each, in the record's order.
    #[test]
    fn the_math_libraries_are_found_in_the_maps_by_name() {
        let maps = "\
7f00-7f01 r-xp 00000000 08:01 1 /w/nvidia/cudnn/lib/libcudnn.so.9
7f01-7f02 r--p 00001000 08:01 1 /w/nvidia/cudnn/lib/libcudnn.so.9
7f02-7f03 r-xp 00000000 08:01 2 /w/nvidia/cudnn/lib/libcudnn_ops.so.9
7f03-7f04 r-xp 00000000 08:01 3 /w/nvidia/cu13/lib/libcublasLt.so.13
7f04-7f05 r-xp 00000000 08:01 4 /w/nvidia/cu13/lib/libcublas.so.13
7f05-7f06 r-xp 00000000 08:01 5 /w/nvidia/cu13/lib/libcudart.so.13
7f06-7f07 r-xp 00000000 08:01 6 /w/torch/lib/libtorch_cuda.so
7f07-7f08 rw-p 00000000 00:00 0
7f08-7f09 r-xp 00000000 08:01 7 /opt/rocm/lib/libMIOpen.so.1.0.60200
7f09-7f0a r-xp 00000000 08:01 8                          /opt/my rocm/lib/libamdhip64.so
7f0a-7f0b r-xp 00000000 08:01 9 /opt/rocm/lib/librocblas.so.4.2
";
        let found: Vec<(MathLibrary, String)> =
            mapped_math_libraries(maps).into_iter().map(|(l, p)| (l, p.display().to_string())).collect();
        assert_eq!(
            found,
            [
                (MathLibrary::CudaRuntime, "/w/nvidia/cu13/lib/libcudart.so.13".to_owned()),
                (MathLibrary::Cublas, "/w/nvidia/cu13/lib/libcublas.so.13".to_owned()),
                (MathLibrary::CublasLt, "/w/nvidia/cu13/lib/libcublasLt.so.13".to_owned()),
                (MathLibrary::Cudnn, "/w/nvidia/cudnn/lib/libcudnn.so.9".to_owned()),
                (MathLibrary::HipRuntime, "/opt/my rocm/lib/libamdhip64.so".to_owned()),
                (MathLibrary::Rocblas, "/opt/rocm/lib/librocblas.so.4.2".to_owned()),
                (MathLibrary::Miopen, "/opt/rocm/lib/libMIOpen.so.1.0.60200".to_owned()),
            ]
        );
        assert!(mapped_math_libraries("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libcublasXt.so.13\n").is_empty());
    }

    /// The runtimes' version numbers in the vendors' encodings.
    #[test]
    fn the_runtimes_version_numbers_are_decoded_as_their_headers_encode_them() {
        assert_eq!(cuda_runtime_version(13000), "13.0");
        assert_eq!(cuda_runtime_version(12080), "12.8");
        assert_eq!(hip_runtime_version(60241133), "6.2.41133");
        assert_eq!(dotted(&[9, 19, 0]), "9.19.0");
    }

    /// Where no GPU backend loaded (the tests' libtorch, whose CPU part maps the CUDA runtime
    /// all the same), the record says no GPU library was loaded, rather than nothing; where one
    /// did (`LD_LIBRARY_PATH` at a full CUDA wheel), it names the attention library among them.
    #[test]
    fn the_runtime_records_the_gpu_libraries_of_a_loaded_backend_only() {
        let runtime = load_gpu_backends();
        let libraries = runtime.gpu_libraries().expect("/proc/self/maps reads");
        if runtime.gpu_backend_loaded() {
            assert!(libraries.iter().any(|l| l.name == "cuDNN" || l.name == "MIOpen"), "{libraries:?}");
        } else {
            assert_eq!(libraries, Vec::new());
        }
    }

    #[test]
    fn a_missing_backend_is_a_reason_not_a_crash() {
        let outcome = load(Path::new("/nonexistent/libtorch_cuda.so"));
        assert!(matches!(outcome, Reported::Unavailable { unavailable } if unavailable.contains("does not exist")));
    }
}
