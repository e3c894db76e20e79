//! The record of the GPU math libraries a run loaded (`harness.gpu_libraries`): each found in
//! the process's maps by its file's name and asked its version by its own call, against the real
//! CUDA libraries of PyPI's torch 2.11.0 wheels (no GPU or driver needed) and lynx-fakes'
//! stand-in ROCm ones. Loading them into this test's process is what a loaded GPU backend does.

use lynx_runner::libtorch::gpu_libraries;
use lynx_schema::result::GpuLibrary;
use lynx_schema::value::Reported;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// dlopen `path` for the rest of the process, as libtorch's GPU backend loads its libraries.
fn load(path: &Path) {
    let c_path = CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; the handle is kept open for the process's life.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    assert!(!handle.is_null(), "{} did not load", path.display());
}

/// The record's entry for the library at `path`.
fn entry(libraries: &[GpuLibrary], path: &Path) -> GpuLibrary {
    let file = path.display().to_string();
    libraries.iter().find(|l| l.file == file).unwrap_or_else(|| panic!("{file} not in {libraries:?}")).clone()
}

/// A Python with the full torch 2.11.0 wheels (`scripts/bench-python.sh`: `$LYNX_BENCH_PYTHON`,
/// which the test command sets, or the venv it makes once).
fn bench_python() -> PathBuf {
    if let Some(python) = std::env::var_os("LYNX_BENCH_PYTHON") {
        return PathBuf::from(python);
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench-python.sh");
    let output = Command::new("bash").arg(script).output().unwrap();
    assert!(output.status.success(), "scripts/bench-python.sh failed: {}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// The wheels' library files named `stem` and a version suffix under `site`'s `nvidia/*/lib`.
fn wheel_library(site: &Path, stem: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(site.join("nvidia"))
        .unwrap()
        .filter_map(|package| std::fs::read_dir(package.ok()?.path().join("lib")).ok())
        .flatten()
        .filter_map(|file| Some(file.ok()?.path()))
        .filter(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&format!("{stem}.so."))))
        .collect();
    assert_eq!(found.len(), 1, "{stem} under {}: {found:?}", site.display());
    found[0].clone()
}

/// cuDNN, cuBLAS, cuBLASLt and the CUDA runtime answer the versions their wheels are (the
/// wheel's version begins with the library's own `major.minor.patch`, or `major.minor` for the
/// runtime, which answers no patch level).
#[test]
fn the_cuda_libraries_answer_the_versions_of_their_wheels() {
    let python = bench_python();
    let script = "import json, os, torch, importlib.metadata as m\n\
                  site = os.path.dirname(os.path.dirname(torch.__file__))\n\
                  versions = {d.metadata['Name'].lower(): d.version for d in m.distributions()}\n\
                  print(json.dumps({'site': site, 'versions': versions}))";
    let output = Command::new(&python).args(["-c", script]).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let said: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let site = PathBuf::from(said["site"].as_str().unwrap());
    let wheel = |names: &[&str]| -> String {
        let versions = &said["versions"];
        names
            .iter()
            .find_map(|name| versions[*name].as_str())
            .unwrap_or_else(|| panic!("no wheel of {names:?} in {}", python.display()))
            .to_owned()
    };
    for (stem, name, wheels) in [
        ("libcudart", "CUDA runtime", &["nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"][..]),
        ("libcublasLt", "cuBLASLt", &["nvidia-cublas", "nvidia-cublas-cu12"][..]),
        ("libcublas", "cuBLAS", &["nvidia-cublas", "nvidia-cublas-cu12"][..]),
        ("libcudnn", "cuDNN", &["nvidia-cudnn-cu13", "nvidia-cudnn-cu12"][..]),
    ] {
        let path = wheel_library(&site, stem);
        load(&path);
        let recorded = entry(&gpu_libraries().expect("/proc/self/maps reads"), &path);
        assert_eq!(recorded.name, name);
        let Reported::Known(version) = &recorded.version else { panic!("{recorded:?}") };
        let wheel = wheel(wheels);
        assert!(wheel.starts_with(&format!("{version}.")), "{name} answered {version}; its wheel is {wheel}");
    }
}

/// The HIP runtime, rocBLAS and MIOpen, as lynx-fakes' stand-ins answer through the calls their
/// headers declare.
#[test]
fn the_rocm_libraries_answer_through_their_own_version_calls() {
    for (path, name, version) in [
        (lynx_fakes::HIP, "HIP runtime", "6.2.41133"),
        (lynx_fakes::ROCBLAS, "rocBLAS", "4.2.1.b7c3d1e2"),
        (lynx_fakes::MIOPEN, "MIOpen", "3.2.0"),
    ] {
        load(Path::new(path));
        let recorded = entry(&gpu_libraries().expect("/proc/self/maps reads"), Path::new(path));
        assert_eq!(recorded.name, name);
        assert_eq!(recorded.version, Reported::Known(version.to_owned()), "{path}");
        assert_eq!(recorded.words(), format!("{name} {version}"));
    }
}
