//! What the end-to-end tests of the `lynx` binary share: the binary with the test signing key,
//! the fixture models folder (`tests/fixtures/models/`: a small GQA model and its fast suite),
//! and the repository's paths.

#![allow(dead_code)] // each test file uses its own part of this module

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// Held by every test that runs a model: two runs sharing this machine's cores would distort
/// each other's timings (libtorch's threads spin while they wait).
pub static DEVICE: Mutex<()> = Mutex::new(());

/// `relative` in the repository.
pub fn repo_path(relative: &str) -> String {
    format!("{}/../../{relative}", env!("CARGO_MANIFEST_DIR"))
}

/// A fixture file's text (`tests/fixtures/<relative>`).
pub fn fixture(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A models folder holding the fixture model and `suites/test.toml` (with `edit` applied).
pub fn models(edit: impl Fn(&str) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("suites")).unwrap();
    std::fs::write(dir.path().join("test-small.toml"), fixture("models/test-small.toml")).unwrap();
    std::fs::write(dir.path().join("suites/test.toml"), edit(&fixture("models/suites/test.toml"))).unwrap();
    dir
}

/// The config folder every test's lynx sees as XDG_CONFIG_HOME: `lynx keygen` (no --out) made
/// its default signing key there once, so runs are signed without --key.
pub fn config_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let home = tempfile::tempdir().unwrap().keep();
        let output =
            Command::new(env!("CARGO_BIN_EXE_lynx")).arg("keygen").env("XDG_CONFIG_HOME", &home).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        home
    })
}

/// The public half of the default test key.
pub fn pubkey() -> String {
    config_home().join("lynx/lynx.pub").to_str().unwrap().to_owned()
}

/// The lynx binary under test, with the test signing key.
pub fn lynx_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lynx"));
    command.env("XDG_CONFIG_HOME", config_home());
    command
}

pub fn lynx(args: &[&str]) -> Output {
    lynx_command().args(args).output().unwrap()
}

/// The envelopes under `dir` that verify against none of the public keys in `keys`.
pub fn unverified(dir: &Path, keys: &Path) -> Vec<PathBuf> {
    let envelopes = lynx_publish::shortlist::find_envelopes(&[dir.to_path_buf()]).unwrap();
    assert!(!envelopes.is_empty(), "{} holds no result", dir.display());
    let key_files: Vec<PathBuf> = std::fs::read_dir(keys).unwrap().map(|e| e.unwrap().path()).collect();
    envelopes
        .into_iter()
        .filter(|envelope| {
            !key_files.iter().any(|key| {
                lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", key.to_str().unwrap()]).status.success()
            })
        })
        .collect()
}
