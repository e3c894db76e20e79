//! libtorch's CUDA graphs and caching allocator, which tch does not expose, through the shim
//! `csrc/cuda.cpp`.
//!
//! The shim is a shared library built against the headers of the libtorch lynx links and
//! embedded in the binary. It is loaded only once libtorch's GPU backend has loaded (its libtorch
//! symbols resolve against that library), from an anonymous in-memory file, so a CPU host with
//! no CUDA library never touches it. Where the build had no CUDA libtorch, or the backend did not
//! load here, [`shim`] says why, and so does every use of it.

use crate::libtorch::load_gpu_backends;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::OnceLock;

/// Bytes of the error text the shim may write.
const ERROR_LEN: usize = 512;

type GraphNew = unsafe extern "C" fn(*mut c_char, usize) -> *mut c_void;
type GraphBegin = unsafe extern "C" fn(*mut c_void, c_int, *mut c_char, usize) -> c_int;
type GraphStep = unsafe extern "C" fn(*mut c_void, *mut c_char, usize) -> c_int;
type GraphFree = unsafe extern "C" fn(*mut c_void);
type FreeMemory = unsafe extern "C" fn(c_int, *mut u64, *mut u64, *mut c_char, usize) -> c_int;
type AllocatorCalls = unsafe extern "C" fn(c_int, *mut u64, *mut c_char, usize) -> c_int;

/// The shim's entry points.
pub struct Shim {
    graph_new: GraphNew,
    graph_begin: GraphBegin,
    graph_end: GraphStep,
    graph_replay: GraphStep,
    graph_free: GraphFree,
    free_memory: FreeMemory,
    allocator_calls: AllocatorCalls,
}

#[cfg(lynx_cuda)]
static SHIM_LIBRARY: Option<&[u8]> = Some(include_bytes!(concat!(env!("OUT_DIR"), "/liblynx_cuda.so")));
#[cfg(not(lynx_cuda))]
static SHIM_LIBRARY: Option<&[u8]> = None;

/// The loaded shim, or why there is none (the same answer for the whole process).
pub fn shim() -> Result<&'static Shim, String> {
    static SHIM: OnceLock<Result<Shim, String>> = OnceLock::new();
    SHIM.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Shim, String> {
    let library = SHIM_LIBRARY
        .ok_or_else(|| "this lynx was built against a libtorch without CUDA, or without the CUDA headers".to_owned())?;
    // Why each backend did not load is the runtime's record (`lynx devices`, a result's harness).
    if !load_gpu_backends().gpu_backend_loaded() {
        return Err("no GPU backend of libtorch loaded".to_owned());
    }
    let handle = open_library(library, dlopen)?;
    let symbol = |name: &str| -> Result<*mut c_void, String> {
        let c_name = CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `handle` is a live dlopen handle and `c_name` a NUL-terminated symbol name.
        let address = unsafe { libc::dlsym(handle, c_name.as_ptr()) };
        if address.is_null() {
            Err(format!("the CUDA shim has no {name}"))
        } else {
            Ok(address)
        }
    };
    // SAFETY: each symbol is the extern "C" function of csrc/cuda.cpp with exactly this
    // signature; transmuting a non-null data pointer from dlsym to that function type is how
    // dlsym is used.
    unsafe {
        Ok(Shim {
            graph_new: std::mem::transmute::<*mut c_void, GraphNew>(symbol("lynx_cuda_graph_new")?),
            graph_begin: std::mem::transmute::<*mut c_void, GraphBegin>(symbol("lynx_cuda_graph_begin")?),
            graph_end: std::mem::transmute::<*mut c_void, GraphStep>(symbol("lynx_cuda_graph_end")?),
            graph_replay: std::mem::transmute::<*mut c_void, GraphStep>(symbol("lynx_cuda_graph_replay")?),
            graph_free: std::mem::transmute::<*mut c_void, GraphFree>(symbol("lynx_cuda_graph_free")?),
            free_memory: std::mem::transmute::<*mut c_void, FreeMemory>(symbol("lynx_cuda_free_memory")?),
            allocator_calls: std::mem::transmute::<*mut c_void, AllocatorCalls>(symbol("lynx_cuda_allocator_calls")?),
        })
    }
}

/// `dlopen` of `path`: the handle, never closed (so the function pointers taken from it stay
/// valid for the process), or the loader's reason.
fn dlopen(path: &std::path::Path) -> Result<*mut c_void, String> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: `c_path` is a valid NUL-terminated path to a shared library's bytes.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        Err(dl_error())
    } else {
        Ok(handle)
    }
}

/// The shared library `bytes`, opened with `open`: from an anonymous in-memory file, and where
/// that fails (a sandbox that will not map one executable, say), from a file in a private
/// temporary folder (mode 0700) that is removed once it is loaded. Both reasons where neither
/// loads.
fn open_library<H>(bytes: &[u8], open: impl Fn(&std::path::Path) -> Result<H, String>) -> Result<H, String> {
    let in_memory = match in_memory_file(bytes) {
        Ok(path) => match open(std::path::Path::new(&path)) {
            Ok(handle) => return Ok(handle),
            Err(reason) => reason,
        },
        Err(reason) => reason,
    };
    let on_disk = (|| {
        use std::os::unix::fs::PermissionsExt;
        let folder = tempfile::Builder::new()
            .prefix("lynx-shim-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(|e| e.to_string())?;
        let path = folder.path().join("liblynx_cuda.so");
        std::fs::write(&path, bytes).map_err(|e| format!("writing {}: {e}", path.display()))?;
        open(&path)
        // The folder and the file go here; the loader keeps its own mapping.
    })();
    on_disk
        .map_err(|on_disk| format!("loading the CUDA shim: from memory: {in_memory}; from a temporary file: {on_disk}"))
}

/// `bytes` in an anonymous in-memory file (`memfd_create`), as a path `dlopen` can open.
fn in_memory_file(bytes: &[u8]) -> Result<String, String> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    let name = CString::new("liblynx_cuda.so").map_err(|e| e.to_string())?;
    // SAFETY: `name` is NUL-terminated; memfd_create returns a new descriptor or -1.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned to this process and is owned by nothing else. The file is
    // leaked below so the descriptor stays open for dlopen (which keeps its own mapping).
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes).map_err(|e| format!("writing the CUDA shim to memory: {e}"))?;
    std::mem::forget(file);
    Ok(format!("/proc/self/fd/{fd}"))
}

/// The text of the last dlerror on this thread.
fn dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call on
    // this thread; it is copied at once.
    unsafe {
        let message = libc::dlerror();
        if message.is_null() {
            "no message".to_owned()
        } else {
            CStr::from_ptr(message).to_string_lossy().into_owned()
        }
    }
}

/// Run a shim call that reports failure as a non-zero return with text in its error buffer.
fn call(f: impl FnOnce(*mut c_char, usize) -> c_int) -> Result<(), String> {
    let mut error = [0 as c_char; ERROR_LEN];
    if f(error.as_mut_ptr(), ERROR_LEN) == 0 {
        return Ok(());
    }
    // SAFETY: the shim NUL-terminates what it writes within ERROR_LEN, and the buffer starts
    // zeroed, so it holds a NUL-terminated string either way.
    Err(unsafe { CStr::from_ptr(error.as_ptr()) }.to_string_lossy().into_owned())
}

/// A captured CUDA graph (hipGraph on ROCm libtorch): the work issued during
/// [`CudaGraph::capture`], launched again by [`CudaGraph::replay`] with no host work per kernel.
/// The tensors the work read and wrote must outlive it: replays use the same memory.
pub struct CudaGraph {
    handle: *mut c_void,
    shim: &'static Shim,
}

impl CudaGraph {
    /// Capture the work `issue` issues on GPU `device`; `issue`'s own outcome beside the graph.
    /// A failure in `issue` ends the capture and is the error.
    pub fn capture<T, E: std::fmt::Display>(
        device: usize,
        issue: impl FnOnce() -> Result<T, E>,
    ) -> Result<(CudaGraph, T), String> {
        let shim = shim()?;
        let mut error = [0 as c_char; ERROR_LEN];
        // SAFETY: graph_new takes an error buffer of ERROR_LEN bytes and returns a new graph or
        // NULL.
        let handle = unsafe { (shim.graph_new)(error.as_mut_ptr(), ERROR_LEN) };
        if handle.is_null() {
            // SAFETY: as in `call`.
            return Err(unsafe { CStr::from_ptr(error.as_ptr()) }.to_string_lossy().into_owned());
        }
        let graph = CudaGraph { handle, shim };
        let index = c_int::try_from(device).map_err(|e| e.to_string())?;
        // SAFETY: `handle` is a live graph; the error buffer is ERROR_LEN bytes.
        call(|e, n| unsafe { (shim.graph_begin)(graph.handle, index, e, n) })?;
        let issued = issue();
        // SAFETY: as above; the capture begun above is ended whatever `issue` returned.
        let ended = call(|e, n| unsafe { (shim.graph_end)(graph.handle, e, n) });
        let value = issued.map_err(|e| format!("capturing the step: {e}"))?;
        ended.map_err(|e| format!("ending the capture: {e}"))?;
        Ok((graph, value))
    }

    /// Launch the captured work once.
    pub fn replay(&self) -> Result<(), String> {
        // SAFETY: `handle` is a live, captured graph; the error buffer is ERROR_LEN bytes.
        call(|e, n| unsafe { (self.shim.graph_replay)(self.handle, e, n) })
    }
}

impl Drop for CudaGraph {
    fn drop(&mut self) {
        // SAFETY: `handle` came from graph_new and is freed once, here; the shim catches every
        // exception, so this never unwinds.
        unsafe { (self.shim.graph_free)(self.handle) }
    }
}

/// GPU `device`'s free memory once libtorch's caching allocator has released the blocks it keeps
/// for reuse (which the driver counts as used): (free, total) bytes.
pub fn free_memory(device: usize) -> Result<(u64, u64), String> {
    let shim = shim()?;
    let index = c_int::try_from(device).map_err(|e| e.to_string())?;
    let (mut free, mut total) = (0u64, 0u64);
    // SAFETY: the out-pointers are valid for the call; the error buffer is ERROR_LEN bytes.
    call(|e, n| unsafe { (shim.free_memory)(index, &mut free, &mut total, e, n) })?;
    Ok((free, total))
}

/// The calls libtorch's caching allocator has made to the driver for `device`'s memory so far
/// (allocations and frees; a step that makes none was served from the blocks it keeps), for
/// bracketing a step: `None` on a CPU, and where the shim is not loaded or could not say.
pub fn allocator_calls(device: tch::Device) -> Option<u64> {
    let tch::Device::Cuda(index) = device else { return None };
    let shim = shim().ok()?;
    let index = c_int::try_from(index).ok()?;
    let mut calls = 0u64;
    // SAFETY: the out-pointer is valid for the call; the error buffer is ERROR_LEN bytes.
    call(|e, n| unsafe { (shim.allocator_calls)(index, &mut calls, e, n) }).ok()?;
    Some(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 15): a host without a GPU backend never loads the shim and says why;
    /// capturing a graph there is that reason, not a crash. Where the backend did load but there
    /// is no GPU (the full CUDA wheel on a CPU host), the shim loads and each call through it is
    /// the CUDA runtime's error as text.
    #[test]
    fn without_a_gpu_graphs_are_unavailable_with_the_reason() {
        if tch::Cuda::is_available() {
            return assert!(shim().is_ok(), "{:?}", shim().err());
        }
        match shim() {
            Err(reason) => {
                assert!(
                    reason.contains("no GPU backend of libtorch loaded") || reason.contains("without CUDA"),
                    "{reason}"
                );
                assert_eq!(CudaGraph::capture(0, || Ok::<(), String>(())).err().unwrap(), reason);
                assert_eq!(free_memory(0).unwrap_err(), reason);
                assert_eq!(allocator_calls(tch::Device::Cuda(0)), None);
            }
            Ok(_) => {
                let error = CudaGraph::capture(0, || Ok::<(), String>(())).err().expect("no GPU to capture on");
                assert!(error.contains("CUDA"), "{error}");
                let error = free_memory(0).unwrap_err();
                assert!(error.contains("CUDA") && !error.contains('\n'), "{error}");
                // The allocator has no device 0 to count for: what it throws ("Invalid device
                // argument", checked with the CUDA 13 wheel of scripts/bench-python.sh) is caught.
                assert_eq!(allocator_calls(tch::Device::Cuda(0)), None);
            }
        }
        assert_eq!(allocator_calls(tch::Device::Cpu), None, "a CPU has no caching allocator to ask");
    }

    /// Where the in-memory file cannot be opened (a sandbox may refuse to map one executable),
    /// the shim is opened from a private temporary file instead, which is gone once it is
    /// loaded; where neither opens, both reasons are given.
    #[test]
    fn the_shim_is_opened_from_a_temporary_file_where_memory_will_not_do() {
        use std::os::unix::fs::PermissionsExt;
        let bytes = b"\x7fELF not really";
        let seen = std::cell::RefCell::new(Vec::new());
        let opened = open_library(bytes, |path| {
            seen.borrow_mut().push(path.to_owned());
            if path.starts_with("/proc/self/fd") {
                return Err("refused".to_owned());
            }
            assert_eq!(std::fs::read(path).unwrap(), bytes);
            let folder = path.parent().unwrap();
            assert_eq!(std::fs::metadata(folder).unwrap().permissions().mode() & 0o777, 0o700);
            Ok(path.to_owned())
        })
        .unwrap();
        assert_eq!(seen.borrow().len(), 2, "{seen:?}");
        assert!(!opened.exists() && !opened.parent().unwrap().exists(), "{} is left behind", opened.display());
        let error = open_library(bytes, |_| Err::<(), _>("no".to_owned())).unwrap_err();
        assert_eq!(error, "loading the CUDA shim: from memory: no; from a temporary file: no");
        // Where memory does, nothing is written.
        let path = open_library(bytes, |path| Ok(path.to_owned())).unwrap();
        assert!(path.starts_with("/proc/self/fd"), "{}", path.display());
    }

    /// A build against a libtorch with a CUDA part (the pinned wheel, as in CI) embeds the shim,
    /// so the binary has it to load on a GPU host.
    #[test]
    fn a_build_against_a_cuda_libtorch_embeds_the_shim() {
        let _ = tch::Tensor::from(1.0f64); // make sure libtorch is mapped
        let lib_dir = load_gpu_backends().lib_dir.known().cloned().expect("libtorch_cpu.so is mapped");
        if lib_dir.join("libtorch_cuda.so").exists() {
            let library = SHIM_LIBRARY.expect("the build found libtorch_cuda and the CUDA headers");
            assert_eq!(&library[..4], b"\x7fELF");
        }
    }

    /// `nm -D` of `path`: its defined dynamic symbols, or (with `undefined`) the strong ones it
    /// needs, without their version suffixes.
    fn dynamic_symbols(path: &std::path::Path, undefined: bool) -> std::collections::BTreeSet<String> {
        let which = if undefined { "--undefined-only" } else { "--defined-only" };
        let output = std::process::Command::new("nm").args(["-D", which]).arg(path).output().expect("nm runs");
        assert!(output.status.success(), "nm -D {}: {}", path.display(), String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (kind, name) = (fields.get(fields.len().wrapping_sub(2))?, fields.last()?);
                // Weak references ('w', 'v') may stay unresolved.
                (!undefined || *kind == "U").then(|| name.split('@').next().unwrap_or(name).to_owned())
            })
            .collect()
    }

    /// The shim leaves its libtorch and CUDA symbols undefined, to resolve against the GPU
    /// backend once it has loaded: every one must be exported by that backend, the libraries it
    /// needs (found as the dynamic loader would, in the wheel's own and its CUDA wheels' folders)
    /// or the process's own libraries. A symbol no library exports (an inline or hidden function
    /// of libtorch's headers, say) would stop `dlopen` on the first GPU host, and no CPU host
    /// ever loads the shim; this finds it here.
    #[test]
    fn every_symbol_the_shim_needs_is_exported_by_the_libtorch_it_was_built_against() {
        let _ = tch::Tensor::from(1.0f64); // make sure libtorch is mapped
        let lib_dir = load_gpu_backends().lib_dir.known().cloned().expect("libtorch_cpu.so is mapped");
        let Some(library) = SHIM_LIBRARY else {
            assert!(!lib_dir.join("libtorch_cuda.so").exists(), "a CUDA libtorch and no shim");
            return;
        };
        let scratch = tempfile::tempdir().unwrap();
        let shim = scratch.path().join("liblynx_cuda.so");
        std::fs::write(&shim, library).unwrap();
        // Folders searched: the wheel's lib, its CUDA wheels' (site-packages/nvidia/*/lib), the
        // system's.
        let mut folders = vec![lib_dir.clone()];
        if let Some(site) = lib_dir.parent().and_then(|torch| torch.parent()) {
            if let Ok(entries) = std::fs::read_dir(site.join("nvidia")) {
                folders.extend(entries.filter_map(|e| e.ok()).map(|e| e.path().join("lib")));
            }
        }
        let arch = std::env::consts::ARCH;
        folders.extend(
            [
                format!("/lib/{arch}-linux-gnu"),
                format!("/usr/lib/{arch}-linux-gnu"),
                "/lib64".into(),
                "/usr/lib64".into(),
            ]
            .map(std::path::PathBuf::from),
        );
        // The process's own libraries, then the backend and every library it needs that is here
        // (a missing one, such as cuBLAS on this host, exports nothing the shim may rely on).
        let mut pending: Vec<String> = [
            "libtorch_cuda.so",
            "libtorch_cpu.so",
            "libc10.so",
            "libstdc++.so.6",
            "libgcc_s.so.1",
            "libm.so.6",
            "libc.so.6",
        ]
        .map(Into::into)
        .into();
        let mut seen = std::collections::BTreeSet::new();
        let mut exported = std::collections::BTreeSet::new();
        while let Some(name) = pending.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            let Some(path) = folders.iter().map(|f| f.join(&name)).find(|p| p.exists()) else { continue };
            exported.extend(dynamic_symbols(&path, false));
            let needed = std::process::Command::new("readelf").arg("-d").arg(&path).output().expect("readelf runs");
            pending.extend(String::from_utf8_lossy(&needed.stdout).lines().filter_map(|line| {
                let at = line.find("Shared library: [")? + "Shared library: [".len();
                Some(line[at..].trim_end_matches(']').to_owned())
            }));
        }
        assert!(seen.contains("libc10_cuda.so"), "libtorch_cuda.so's needs were not read: {seen:?}");
        let needed = dynamic_symbols(&shim, true);
        assert!(needed.iter().any(|s| s.contains("CUDAGraph")), "{needed:?}");
        let missing: Vec<&String> = needed.difference(&exported).collect();
        assert!(missing.is_empty(), "the CUDA shim needs symbols no library exports: {missing:?}");
    }
}
