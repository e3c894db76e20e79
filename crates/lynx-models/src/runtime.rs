//! Which libtorch this process runs. A ROCm build of libtorch registers its GPUs as CUDA
//! devices through hipified hooks, so the device type does not tell CUDA from ROCm; the library
//! that was loaded does. And whether libtorch's CPU kernels may call oneDNN, which tch does not
//! expose (`csrc/onednn.cpp`).

use std::sync::OnceLock;

/// Whether the libtorch in this process is a ROCm build: `libtorch_hip.so` is mapped.
pub fn is_rocm() -> bool {
    static ROCM: OnceLock<bool> = OnceLock::new();
    *ROCM.get_or_init(|| std::fs::read_to_string("/proc/self/maps").is_ok_and(|maps| maps_hold_hip(&maps)))
}

/// Whether a `/proc/<pid>/maps` text maps libtorch's HIP library.
fn maps_hold_hip(maps: &str) -> bool {
    maps.lines().filter_map(|line| line.rsplit('/').next()).any(|file| file.starts_with("libtorch_hip.so"))
}

extern "C" {
    fn lynx_set_onednn(enabled: bool);
    fn lynx_onednn_enabled() -> bool;
}

/// Let libtorch's CPU kernels call oneDNN, or not, for the rest of the process (the flag is
/// libtorch's, for every thread; on by default). A measured run leaves it as libtorch sets it:
/// this is for a test that must run ATen's own CPU kernel where oneDNN would take the call (on
/// a CPU with AMX, the e4m3 scaled matmul, which oneDNN refuses in e4m3fnuz).
pub fn set_onednn(enabled: bool) {
    // SAFETY: the shim sets one flag of libtorch's global context.
    unsafe { lynx_set_onednn(enabled) }
}

/// Whether libtorch's CPU kernels may call oneDNN in this process.
pub fn onednn_enabled() -> bool {
    // SAFETY: the shim reads one flag of libtorch's global context.
    unsafe { lynx_onednn_enabled() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocm_is_told_by_the_library_mapped() {
        let cuda = "7f00-7f10 r-xp 0 08:01 1 /opt/torch/lib/libtorch_cuda.so\n";
        let rocm = "7f00-7f10 r-xp 0 08:01 1 /opt/rocm/torch/lib/libtorch_hip.so\n";
        assert!(!maps_hold_hip(cuda) && maps_hold_hip(rocm));
        // This test process links the CPU or CUDA wheel.
        assert!(!is_rocm());
    }
}
