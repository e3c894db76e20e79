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

use lynx_schema::result::BackendLoad;
use lynx_schema::value::Reported;
use std::ffi::{c_void, CStr, CString};
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
}

/// Load the GPU backends once (later calls return the first outcome) and describe the runtime.
/// Call before any tch device query.
pub fn load_gpu_backends() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let lib_dir = loaded_libtorch_dir();
        let gpu_backends = GPU_BACKENDS
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
        Runtime { lib_dir, version, gpu_backends }
    })
}

/// The folder of the `libtorch_cpu.so` mapped into this process, from `/proc/self/maps`.
fn loaded_libtorch_dir() -> Reported<PathBuf> {
    let maps = match std::fs::read_to_string("/proc/self/maps") {
        Ok(maps) => maps,
        Err(error) => return Reported::unavailable(format!("cannot read /proc/self/maps: {error}")),
    };
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(Path::new)
        .find(|path| path.file_name().is_some_and(|name| name == "libtorch_cpu.so"))
        .and_then(Path::parent)
        .map_or_else(
            || Reported::unavailable("libtorch_cpu.so is not mapped into this process"),
            |dir| Reported::Known(dir.to_path_buf()),
        )
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

    #[test]
    fn a_missing_backend_is_a_reason_not_a_crash() {
        let outcome = load(Path::new("/nonexistent/libtorch_cuda.so"));
        assert!(matches!(outcome, Reported::Unavailable { unavailable } if unavailable.contains("does not exist")));
    }
}
