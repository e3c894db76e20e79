//! The CUDA probe kernels compile to PTX with the real NVRTC (no GPU or driver needed), from
//! PyPI's nvidia-cuda-nvrtc wheel: `scripts/nvrtc.sh`, which this test runs when
//! `LYNX_NVRTC_DIR` does not name an installed copy.

use lynx_probes::native::{compile_stream_ptx, load_nvrtc, ptx_entries, STREAM_ENTRIES};
use std::path::PathBuf;
use std::process::Command;

/// The folder holding libnvrtc.so.13, installing it once if need be.
fn nvrtc_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("LYNX_NVRTC_DIR") {
        return PathBuf::from(dir);
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/nvrtc.sh");
    let output = Command::new("bash").arg(script).output().unwrap();
    assert!(output.status.success(), "scripts/nvrtc.sh failed: {}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

#[test]
fn the_stream_kernels_compile_for_hopper_and_ampere_with_every_entry_point() {
    load_nvrtc(&[nvrtc_dir()]).expect("NVRTC loads from the wheel's folder");
    for arch in ["compute_90", "compute_80"] {
        let ptx = compile_stream_ptx(arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(ptx.contains(&format!(".target sm_{}", &arch[8..])), "{arch}: {}", &ptx[..ptx.len().min(400)]);
        let mut entries = ptx_entries(&ptx);
        entries.sort();
        let mut expected: Vec<String> = STREAM_ENTRIES.iter().map(|s| s.to_string()).collect();
        expected.sort();
        assert_eq!(entries, expected, "{arch}");
        // 16-byte accesses: the float4 loads and stores are vector instructions.
        assert!(ptx.contains("ld.global.nc.v4.f32") || ptx.contains("ld.global.v4.f32"), "{arch}: no 16-byte loads");
        assert!(ptx.contains("st.global.v4.f32"), "{arch}: no 16-byte stores");
        // Regression (issue 15): each thread keeps several 16-byte loads in flight. The copy's
        // unrolled round issues four loads before its first store.
        let copy = ptx.split(".entry lynx_copy").nth(1).unwrap().split(".entry").next().unwrap();
        let first_store = copy.find("st.global.v4.f32").unwrap();
        let loads = copy[..first_store].matches("ld.global.nc.v4.f32").count();
        assert!(loads >= 4, "{arch}: {loads} loads before the copy's first store");
    }
}

#[test]
fn a_kernel_that_does_not_compile_is_an_error_naming_the_compiler() {
    load_nvrtc(&[nvrtc_dir()]).expect("NVRTC loads from the wheel's folder");
    let error = lynx_probes::native::compile_stream_ptx("compute_1").unwrap_err();
    assert!(error.to_string().contains("NVRTC could not compile"), "{error}");
}
