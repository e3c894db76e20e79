//! Which libtorch this process runs. A ROCm build of libtorch registers its GPUs as CUDA
//! devices through hipified hooks, so the device type does not tell CUDA from ROCm; the library
//! that was loaded does.

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
