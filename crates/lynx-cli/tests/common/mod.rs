//! What the end-to-end tests of the `lynx` binary share: the binary with the test signing key,
//! the fixture models folder (`tests/fixtures/models/`: a small GQA model and its fast suite),
//! and the repository's paths.

#![allow(dead_code)] // each test file uses its own part of this module

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, OnceLock};

/// Held by every test that runs a model, and by every test that keeps a core busy beside one (a
/// shortlist's simulations, a site's verifications, a validator's install, even a lynx started
/// only to list or refuse, whose libtorch load takes a core for a moment) in a file with one:
/// two of them sharing this machine's cores would distort each other's timings (libtorch's
/// threads spin while they wait), and a roofline probe measured beside a busy core is a ceiling
/// the cells then exceed.
pub static DEVICE: Mutex<()> = Mutex::new(());

/// Says what a test that needs something of this machine (a cluster, a tmpfs, a cgroup) did, ran
/// or skipped and why: on its stderr, and in its record file under Cargo's scratch folder for
/// tests, which scripts/test.sh prints at the end (a skip is never counted as a pass unseen).
pub fn record(file: &str, line: &str) {
    eprintln!("{line}");
    std::fs::write(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(file), format!("{line}\n")).unwrap();
}

/// The files under `dir`, at any depth.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .flat_map(|e| if e.path().is_dir() { files_under(&e.path()) } else { vec![e.path()] })
        .collect()
}

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
/// its default signing key there once, so runs are signed without --key. A static is never
/// dropped, so a temporary folder here would outlive the process: the folder is
/// `config-home-<pid>` in Cargo's scratch folder for tests (under `target/`), and each test
/// process first removes those of processes that have ended.
pub fn config_home() -> &'static Path {
    static HOME: OnceLock<PathBuf> = OnceLock::new();
    HOME.get_or_init(|| {
        let scratch = Path::new(env!("CARGO_TARGET_TMPDIR"));
        for entry in std::fs::read_dir(scratch).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let pid = name.to_str().and_then(|name| name.strip_prefix("config-home-"));
            if pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists()) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
        let home = scratch.join(format!("config-home-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home); // an ended process's, whose pid this one has
        std::fs::create_dir_all(&home).unwrap();
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
    let envelopes = lynx_attest::trust::find_envelopes(&[dir.to_path_buf()]).unwrap();
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

pub fn run_args<'a>(models: &'a Path, out: &'a Path) -> Vec<&'a str> {
    vec![
        "run",
        "--suite",
        "test",
        "--device",
        "cpu",
        "--models",
        models.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]
}

/// The run folders under `out` (`out/<device>/<run id>/`).
pub fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for device in std::fs::read_dir(out).into_iter().flatten() {
        for run in std::fs::read_dir(device.unwrap().path()).into_iter().flatten() {
            dirs.push(run.unwrap().path());
        }
    }
    dirs
}

/// The result files under `out`: `<run id>.json` in each run folder.
pub fn result_files(out: &Path) -> Vec<PathBuf> {
    run_dirs(out)
        .into_iter()
        .map(|dir| dir.join(format!("{}.json", dir.file_name().unwrap().to_string_lossy())))
        .filter(|path| path.exists())
        .collect()
}

/// The one result file under `out`.
pub fn result_file(out: &Path) -> PathBuf {
    let mut files = result_files(out);
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

pub fn seconds(value: &Value) -> f64 {
    let x = value.as_f64().unwrap_or_else(|| panic!("{value} is not a number"));
    assert!(x.is_finite() && x > 0.0, "{x}");
    x
}

/// Runs lynx expecting exit code 2 and one line on stderr; returns that line.
pub fn bad_input(args: &[&str]) -> String {
    let output = lynx(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: not one line: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}: printed {}", String::from_utf8_lossy(&output.stdout));
    stderr
}

/// Bad input in the test suite's text (`edit` applied): exit 2 with a line containing `names`.
pub fn bad_suite(edit: impl Fn(&str) -> String, names: &[&str]) {
    let models = models(edit);
    let out = tempfile::tempdir().unwrap();
    let line = bad_input(&run_args(models.path(), out.path()));
    for name in names {
        assert!(line.contains(name), "{line} does not name {name}");
    }
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a result was written for bad input");
    // A plan checks its inputs as the run does, and says the same.
    let planned = bad_input(&[run_args(models.path(), out.path()).as_slice(), &["--plan"]].concat());
    assert_eq!(planned, line, "the plan and the run refuse the suite differently");
}

/// A run of the test suite: its models folder, its results folder (both kept while in scope),
/// and its result file.
pub fn measured_run() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let output = lynx(&run_args(models.path(), out.path()));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result = result_file(out.path());
    (models, out, result)
}

/// Run Debian's chromium headless with `args`; its stdout and the console lines it logged.
pub fn chromium(args: &[&str]) -> (String, String) {
    let binary = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| Command::new(name).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("no chromium on this host: scripts/test.sh installs Debian's (apt-get install chromium)");
    let output = Command::new(binary)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"])
        .args(args)
        .output()
        .unwrap();
    assert!(output.status.success(), "chromium {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A suite of many short cells: a kill lands in a cell, between cells, in warm-up or in set-up.
pub fn many_cells(suite: &str) -> String {
    suite
        .replace("min_s = 1.0\nmax_s = 3.0", "min_s = 0.2\nmax_s = 3.0")
        .replace("min_steps = 8\nmin_s = 0.3\nmax_steps = 200", "min_steps = 5\nmin_s = 0.15\nmax_steps = 100")
        .replace("batches = [1, 8]\nctxs = [512]", "max_batch = 8\nctxs = [64, 256, 512]")
}

pub fn journal_of(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(format!("{}.journal.jsonl", dir.file_name().unwrap().to_string_lossy()))).unwrap_or_default()
}
