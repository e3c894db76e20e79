//! Helpers for the build scripts of the crates that link libtorch.
//!
//! [`link_libtorch`] gives every binary and test of the calling crate an rpath to the libtorch
//! that torch-sys built against, so nothing needs LD_LIBRARY_PATH, and records that libtorch's
//! version. [`harness_metadata`] records what a result's `harness` section needs to know about
//! the build. Both run at build time only; they panic with a message, as build scripts do.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set an rpath to torch-sys's libtorch folder for the calling crate's binaries, tests and
/// benches, and export its version as `LYNX_LIBTORCH_BUILD_VERSION` (empty when unknown).
///
/// The calling crate must depend on `torch-sys` directly: cargo hands `DEP_TCH_LIBTORCH_LIB`
/// (torch-sys declares `links = "tch"`) only to direct dependents.
pub fn link_libtorch() {
    let lib = std::env::var("DEP_TCH_LIBTORCH_LIB")
        .expect("DEP_TCH_LIBTORCH_LIB is unset: the crate must depend on torch-sys directly");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{lib}");
    let version = libtorch_version(Path::new(&lib)).unwrap_or_default();
    println!("cargo:rustc-env=LYNX_LIBTORCH_BUILD_VERSION={version}");
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
}

/// Compile the C++ file `source` (relative to the calling crate) against torch-sys's libtorch
/// headers, with the flags torch-sys compiles its own shim with, and link it into the crate.
pub fn compile_libtorch_shim(source: &str, name: &str) {
    let lib = PathBuf::from(
        std::env::var("DEP_TCH_LIBTORCH_LIB").expect("DEP_TCH_LIBTORCH_LIB is unset: depend on torch-sys directly"),
    );
    let root = lib.parent().expect("libtorch's lib folder has a parent");
    println!("cargo:rerun-if-changed={source}");
    cc::Build::new()
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(root.join("include"))
        .include(root.join("include/torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag("-D_GLIBCXX_USE_CXX11_ABI=1")
        .file(source)
        .compile(name);
}

/// Build the C++ file `source` (relative to the calling crate) as the shared library
/// `$OUT_DIR/lib{name}.so` against torch-sys's libtorch and CUDA headers, its libtorch symbols
/// left to resolve against the libtorch_cuda the process loads, and set the cfg `{name}`.
/// Where the libtorch has no CUDA part, or no CUDA runtime headers are found (`CUDA_HOME`, the
/// wheel's `nvidia/cu*/include`, `/usr/local/cuda`), nothing is built, the cfg stays unset and a
/// warning says why: the binary then reports CUDA graphs as unavailable with that reason.
pub fn build_cuda_shim(source: &str, name: &str) {
    println!("cargo:rustc-check-cfg=cfg({name})");
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=CUDA_HOME");
    let lib = PathBuf::from(
        std::env::var("DEP_TCH_LIBTORCH_LIB").expect("DEP_TCH_LIBTORCH_LIB is unset: depend on torch-sys directly"),
    );
    let root = lib.parent().expect("libtorch's lib folder has a parent");
    if !lib.join("libtorch_cuda.so").exists() {
        println!("cargo:warning=no CUDA graphs: {} has no libtorch_cuda.so", lib.display());
        return;
    }
    let Some(cuda_include) = cuda_headers(root) else {
        println!("cargo:warning=no CUDA graphs: no cuda_runtime_api.h in CUDA_HOME, the wheel or /usr/local/cuda");
        return;
    };
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join(format!("lib{name}.so"));
    let compiler = cc::Build::new().cpp(true).get_compiler();
    let status = Command::new(compiler.path())
        .args(["-shared", "-fPIC", "-O2", "-std=c++17", "-D_GLIBCXX_USE_CXX11_ABI=1", "-w"])
        .arg("-I")
        .arg(root.join("include"))
        .arg("-I")
        .arg(root.join("include/torch/csrc/api/include"))
        .arg("-I")
        .arg(&cuda_include)
        .arg(source)
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("running {}: {e}", compiler.path().display()));
    assert!(status.success(), "compiling {source} against {} failed", root.display());
    println!("cargo:rustc-cfg={name}");
}

/// The folder holding `cuda_runtime_api.h` for a libtorch at `root` (site-packages/torch).
fn cuda_headers(root: &Path) -> Option<PathBuf> {
    let wheel = root.parent().map(|site| site.join("nvidia"));
    let wheel_includes = wheel
        .and_then(|nvidia| std::fs::read_dir(nvidia).ok())
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok().map(|e| e.path().join("include")));
    std::env::var_os("CUDA_HOME")
        .map(|home| PathBuf::from(home).join("include"))
        .into_iter()
        .chain(wheel_includes)
        .chain(std::iter::once(PathBuf::from("/usr/local/cuda/include")))
        .find(|dir| dir.join("cuda_runtime_api.h").exists())
}

/// The version a libtorch `lib` folder's distribution declares: `../version.py` in a PyTorch
/// package, `../build-version` in a libtorch archive.
pub fn libtorch_version(lib: &Path) -> Option<String> {
    let root = lib.parent()?;
    if let Ok(text) = std::fs::read_to_string(root.join("version.py")) {
        return text.lines().find_map(|line| {
            let value = line.strip_prefix("__version__")?.trim_start().strip_prefix('=')?.trim();
            Some(value.trim_matches(|c| c == '\'' || c == '"').to_owned())
        });
    }
    let text = std::fs::read_to_string(root.join("build-version")).ok()?;
    Some(text.trim().to_owned())
}

/// Export, as compile-time environment variables of the calling crate:
/// `LYNX_GIT_COMMIT` (empty outside a git checkout; `-dirty` appended when the tree has
/// uncommitted changes), `LYNX_RUSTC`, `LYNX_BUILD_PROFILE` and `LYNX_TCH_VERSION` (from the
/// workspace's Cargo.lock).
pub fn harness_metadata() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let commit = git(&manifest_dir, &["rev-parse", "HEAD"]).unwrap_or_default();
    let dirty =
        git(&manifest_dir, &["status", "--porcelain", "--untracked-files=no"]).is_some_and(|status| !status.is_empty());
    let commit = if dirty && !commit.is_empty() { format!("{commit}-dirty") } else { commit };
    println!("cargo:rustc-env=LYNX_GIT_COMMIT={commit}");

    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let rustc_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    println!("cargo:rustc-env=LYNX_RUSTC={rustc_version}");
    println!("cargo:rustc-env=LYNX_BUILD_PROFILE={}", std::env::var("PROFILE").unwrap_or_default());

    let lock = workspace_root(&manifest_dir).join("Cargo.lock");
    let tch = std::fs::read_to_string(&lock).ok().and_then(|text| locked_version(&text, "tch"));
    println!("cargo:rustc-env=LYNX_TCH_VERSION={}", tch.unwrap_or_default());
    println!("cargo:rerun-if-changed={}", lock.display());

    if let Some(git_dir) = git(&manifest_dir, &["rev-parse", "--absolute-git-dir"]) {
        println!("cargo:rerun-if-changed={git_dir}/HEAD");
        println!("cargo:rerun-if-changed={git_dir}/index");
        if let Some(head_ref) = git(&manifest_dir, &["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={git_dir}/{head_ref}");
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn workspace_root(manifest_dir: &Path) -> PathBuf {
    manifest_dir.ancestors().find(|dir| dir.join("Cargo.lock").exists()).unwrap_or(manifest_dir).to_path_buf()
}

/// The version of package `name` in a Cargo.lock's text.
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let wanted = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    lines.find(|line| line.trim() == wanted)?;
    let line = lines.next()?.trim();
    Some(line.strip_prefix("version = \"")?.strip_suffix('"')?.to_owned())
}

/// Embed the model catalogue in the calling crate: writes `$OUT_DIR/catalogue.rs`, which
/// defines `EMBEDDED_MODELS` and `EMBEDDED_SUITES`, each a sorted `&[(name, toml text)]` of the
/// `*.toml` files of `models` (relative to the calling crate) and of its `suites/` folder.
pub fn embed_catalogue(models: &str) {
    let dir = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR")).join(models);
    let list = |folder: &Path| -> String {
        println!("cargo:rerun-if-changed={}", folder.display());
        let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
            .unwrap_or_else(|e| panic!("the model catalogue {}: {e}", folder.display()))
            .map(|entry| entry.expect("a readable catalogue entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        files
            .iter()
            .map(|path| {
                let name = path.file_stem().and_then(|s| s.to_str()).expect("a UTF-8 catalogue file name");
                let path = path.canonicalize().expect("a catalogue file's path");
                format!("    ({name:?}, include_str!({:?})),\n", path.display().to_string())
            })
            .collect()
    };
    let text = format!(
        "/// The model shapes built into the binary: (name, TOML).\npub static EMBEDDED_MODELS: &[(&str, &str)] = &[\n{}];\n\
         /// The suites built into the binary: (name, TOML).\npub static EMBEDDED_SUITES: &[(&str, &str)] = &[\n{}];\n",
        list(&dir),
        list(&dir.join("suites"))
    );
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("catalogue.rs");
    std::fs::write(&out, text).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_locked_version() {
        let lock = "[[package]]\nname = \"tch\"\nversion = \"0.24.0\"\n\n[[package]]\nname = \"tch-x\"\n";
        assert_eq!(locked_version(lock, "tch").as_deref(), Some("0.24.0"));
        assert_eq!(locked_version(lock, "torch-sys"), None);
    }

    #[test]
    fn reads_a_pytorch_version_file() {
        let root = std::env::temp_dir().join(format!("lynx-build-test-{}", std::process::id()));
        std::fs::create_dir_all(root.join("lib")).unwrap();
        std::fs::write(root.join("version.py"), "from typing import Optional\n__version__ = '2.11.0+cu130'\n").unwrap();
        assert_eq!(libtorch_version(&root.join("lib")).as_deref(), Some("2.11.0+cu130"));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
