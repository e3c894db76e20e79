//! Compiles the stand-in vendor libraries into `OUT_DIR`, with the C compiler `cc` finds (the
//! one torch-sys's build already needs).

use std::path::Path;
use std::process::Command;

fn shared_library(source: &str, out: &Path, defines: &[&str]) {
    std::fs::create_dir_all(out.parent().expect("a library path has a folder")).expect("create the output folder");
    let compiler = cc::Build::new().get_compiler();
    let mut command: Command = compiler.to_command();
    command
        .args(["-shared", "-fPIC", "-O1", "-std=c11", "-Wall", "-Werror"])
        .args(defines)
        .arg(source)
        .arg("-o")
        .arg(out);
    let status = command.status().unwrap_or_else(|e| panic!("running the C compiler for {source}: {e}"));
    assert!(status.success(), "compiling {source} failed: {status}");
    println!("cargo:rerun-if-changed={source}");
}

fn main() {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    shared_library("c/nvml.c", &out.join("nvml/libnvidia-ml.so.1"), &[]);
    shared_library("c/rocm_smi.c", &out.join("rocm5/librocm_smi64.so.1"), &["-DRSMI_MAJOR=5"]);
    shared_library("c/rocm_smi.c", &out.join("rocm6/librocm_smi64.so.1"), &["-DRSMI_MAJOR=6"]);
    shared_library("c/rocm_smi.c", &out.join("rocm6x3/librocm_smi64.so.1"), &["-DRSMI_MAJOR=6", "-DDEVICES=3"]);
    shared_library("c/hip.c", &out.join("hip/libamdhip64.so.6"), &[]);
    shared_library("c/rocblas.c", &out.join("rocblas/librocblas.so.4"), &[]);
    shared_library("c/miopen.c", &out.join("miopen/libMIOpen.so.1"), &[]);
}
