//! `lynx` end to end through the binary, on CPU with real libtorch: a run and its result file,
//! an interrupted run, and every kind of bad input.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Held by every test that runs a model: two runs sharing this machine's cores would distort
/// each other's timings (libtorch's threads spin while they wait).
static DEVICE: Mutex<()> = Mutex::new(());

const MODEL: &str = r#"
name = "test-small"
vocab_size = 4096
hidden_size = 256
num_layers = 2
rms_norm_eps = 1e-5
[attention]
kind = "gqa"
num_heads = 8
num_kv_heads = 2
rope_theta = 10000.0
[mlp]
intermediate_size = 704
"#;

const SUITE: &str = r#"
name = "test"
model = "test-small"
precision = "fp32"
seed = 11

# Loose bounds: these tests check the harness, not this shared machine's thermal state, so
# equilibrium is reached once min_s has passed (the detector has tests of its own).
[warmup]
min_s = 1.0
max_s = 3.0
window_s = 1.0
max_drift = 10.0
max_spread = 100.0
max_clock_drift = 10.0
max_power_drift = 10.0
max_temperature_change_c = 1000.0

[telemetry]
rate_hz = 20.0

[measure]
min_steps = 8
min_s = 0.3
max_steps = 200

[prefill]
batches = [1]
prompt_lens = [16, 256]

[decode]
batches = [1, 8]
ctxs = [512]
"#;

/// A models folder holding the test model and `suites/test.toml` (with `edit` applied).
fn models(edit: impl Fn(&str) -> String) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("suites")).unwrap();
    std::fs::write(dir.path().join("test-small.toml"), MODEL).unwrap();
    std::fs::write(dir.path().join("suites/test.toml"), edit(SUITE)).unwrap();
    dir
}

/// The config folder every test's lynx sees as XDG_CONFIG_HOME: `lynx keygen` (no --out) made
/// its default signing key there once, so runs are signed without --key.
fn config_home() -> &'static Path {
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
fn pubkey() -> String {
    config_home().join("lynx/lynx.pub").to_str().unwrap().to_owned()
}

fn lynx_command() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lynx"));
    command.env("XDG_CONFIG_HOME", config_home());
    command
}

fn lynx(args: &[&str]) -> Output {
    lynx_command().args(args).output().unwrap()
}

fn run_args<'a>(models: &'a Path, out: &'a Path) -> Vec<&'a str> {
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

/// The result files under `out` (a `.json.tmp` beside one is a write in progress).
fn result_files(out: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for device in std::fs::read_dir(out).into_iter().flatten() {
        for file in std::fs::read_dir(device.unwrap().path()).into_iter().flatten() {
            let path = file.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".json") && !name.ends_with(".intoto.json") {
                files.push(path);
            }
        }
    }
    files
}

/// The one result file under `out`.
fn result_file(out: &Path) -> PathBuf {
    let mut files = result_files(out);
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

fn seconds(value: &Value) -> f64 {
    let x = value.as_f64().unwrap_or_else(|| panic!("{value} is not a number"));
    assert!(x.is_finite() && x > 0.0, "{x}");
    x
}

#[test]
fn a_run_writes_every_cell_with_sane_figures() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let output = lynx(&run_args(models.path(), out.path()));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("decode batch 8 ctx 512"), "{stdout}");

    let path = result_file(out.path());
    assert!(path.to_str().unwrap().ends_with(".json"));
    let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(result["status"], "complete");
    assert_eq!(result["schema"], "https://lynxbench.dev/result/v1");
    assert_eq!(result["device"]["device"], "cpu");

    let harness = &result["harness"];
    assert_eq!(harness["tch_version"], "0.24.0");
    assert!(harness["libtorch_runtime_version"].as_str().unwrap().starts_with("2.11.0"), "{harness}");
    assert!(harness["libtorch_build_version"].as_str().unwrap().starts_with("2.11.0"), "{harness}");
    assert_eq!(harness["binary_sha256"].as_str().unwrap().len(), 64);
    assert_eq!(result["config"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(result["config"]["model"]["name"], "test-small");

    let checks = result["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    // The host has no throttle state: no throttling check is claimed for it.
    assert_eq!(names, ["parity", "equilibrium", "telemetry_coverage"], "{checks:?}");
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    let parity = checks.iter().find(|c| c["name"] == "parity").expect("every run checks parity");
    assert_eq!(parity["passed"], true, "{parity}");
    assert!(seconds(&parity["measured"]) < parity["limit"].as_f64().unwrap(), "{parity}");
    assert!(stdout.contains("check parity passed"), "{stdout}");

    // Telemetry: the host sampled through the run, into the samples file beside the result.
    let telemetry = &result["telemetry"];
    assert_eq!(telemetry["rate_hz"], 20.0);
    assert_eq!(telemetry["sources"][0]["name"], "host");
    assert!(telemetry["sources"][0]["unavailable"]["mem_clock_mhz"].is_string(), "{telemetry}");
    let samples_file = path.with_file_name(telemetry["samples_file"].as_str().unwrap());
    let samples = std::fs::read_to_string(&samples_file).unwrap();
    let lines: Vec<Value> = samples.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() >= 20, "{} samples in a run of several seconds", lines.len());
    assert!(lines.iter().all(|l| l["kind"] == "telemetry" && l["source"] == "host"));
    assert!(lines.windows(2).all(|w| w[1]["t_s"].as_f64() > w[0]["t_s"].as_f64()));

    let warmup = &result["warmup"];
    assert!(seconds(&warmup["duration_s"]) >= 1.0, "warm-up shorter than min_s: {warmup}");
    let window = &warmup["telemetry"][0];
    assert_eq!(window["source"], "host");
    assert!(window["coverage"].as_f64().unwrap() > 0.5, "{window}");
    assert!(window["samples"].as_u64().unwrap() >= 10, "{window}");
    assert!(warmup["steps"].as_u64().unwrap() > 0);

    let cells = result["cells"].as_array().unwrap();
    let names: Vec<String> = cells
        .iter()
        .map(|c| format!("{} {} {}", c["step"], c["batch"], c["prompt_len"].as_u64().or(c["ctx"].as_u64()).unwrap()))
        .collect();
    assert_eq!(names, ["\"prefill\" 1 16", "\"prefill\" 1 256", "\"decode\" 1 512", "\"decode\" 8 512"]);
    for cell in cells {
        assert_eq!(cell["status"], "ok", "{cell}");
        let t = &cell["step_time"];
        assert!(t["n"].as_u64().unwrap() >= 8, "{cell}");
        let (min, median, p90, p99, max) = (
            seconds(&t["min_s"]),
            seconds(&t["median_s"]),
            seconds(&t["p90_s"]),
            seconds(&t["p99_s"]),
            seconds(&t["max_s"]),
        );
        assert!(min <= median && median <= p90 && p90 <= p99 && p99 <= max, "{t}");
        assert!(t["cv"].as_f64().unwrap() >= 0.0);
        // A cell measures at least min_s (0.3 s) unless it reached max_steps (200) first.
        let steps = t["n"].as_u64().unwrap();
        assert!(steps <= 200 && (steps == 200 || seconds(&cell["measured_s"]) >= 0.3), "{cell}");
        let window = &cell["telemetry"][0];
        assert_eq!(window["source"], "host", "{cell}");
        let span = window["end_s"].as_f64().unwrap() - window["start_s"].as_f64().unwrap();
        assert!((span - cell["measured_s"].as_f64().unwrap()).abs() < 0.05, "the window is the timed steps: {cell}");
        let per_device = seconds(&cell["tok_per_s_per_device"]);
        let batch = cell["batch"].as_f64().unwrap();
        if cell["step"] == "decode" {
            assert!((per_device - batch / median).abs() <= 1e-9 * per_device, "{cell}");
            assert!((seconds(&cell["tok_per_s_per_user"]) - 1.0 / median).abs() <= 1e-9 / median);
            assert_eq!(cell["ctx_end"].as_u64().unwrap(), 512 + steps - 1, "{cell}");
        } else {
            let tokens = batch * cell["prompt_len"].as_f64().unwrap();
            assert!((per_device - tokens / median).abs() <= 1e-9 * per_device, "{cell}");
            assert!(cell["tok_per_s_per_user"].is_null());
        }
    }
    let median = |i: usize| cells[i]["step_time"]["median_s"].as_f64().unwrap();
    assert!(median(3) > median(2), "decode at batch 8 ({}) not slower than at batch 1 ({})", median(3), median(2));
    assert!(median(1) > median(0), "prefill of 256 tokens not slower than of 16");

    // Signed with the default key: the envelope beside the result verifies, and holds the result.
    let envelope = path.with_extension("intoto.json");
    assert!(stdout.contains(&format!("signed: {}", envelope.display())), "{stdout}");
    let envelope_arg = envelope.to_str().unwrap();
    let output = lynx(&["verify", envelope_arg, "--pubkey", &pubkey(), "--json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts[0]["valid"], true, "{verdicts}");
    let signed: Value = serde_json::from_slice(&std::fs::read(&envelope).unwrap()).unwrap();
    use base64::Engine;
    let payload = base64::engine::general_purpose::STANDARD.decode(signed["payload"].as_str().unwrap()).unwrap();
    let statement: Value = serde_json::from_slice(&payload).unwrap();
    assert_eq!(statement["predicate"], result, "the envelope holds the result as written");
    assert_eq!(statement["subject"][0]["name"], telemetry["samples_file"]);

    // One more sample line makes the samples file's digest wrong: exit 1 naming the step.
    std::fs::write(&samples_file, format!("{samples}{{}}\n")).unwrap();
    let output = lynx(&["verify", envelope_arg, "--pubkey", &pubkey(), "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts[0]["failed_step"], "subject", "{verdicts}");
}

#[test]
fn a_run_without_a_readable_key_is_refused_before_measuring() {
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.extend(["--key", "/no/such/lynx.key"]);
    let line = bad_input(&args);
    assert!(line.contains("/no/such/lynx.key") && line.contains("--unsigned"), "{line}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a run started without its key");

    // No key in the default folder either.
    let empty = tempfile::tempdir().unwrap();
    let output =
        lynx_command().args(run_args(models.path(), out.path())).env("XDG_CONFIG_HOME", empty.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("lynx keygen"));
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a run started without its key");
}

#[test]
fn keygen_makes_a_private_key_only_its_owner_reads_and_never_overwrites_it_unasked() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let keys_arg = keys.to_str().unwrap();
    let output = lynx(&["keygen", "--out", keys_arg]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mode = std::fs::metadata(keys.join("lynx.key")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    let first = std::fs::read(keys.join("lynx.key")).unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(std::fs::read_to_string(keys.join("lynx.pub")).unwrap().starts_with("-----BEGIN PUBLIC KEY-----"));

    let line = bad_input(&["keygen", "--out", keys_arg]);
    assert!(line.contains("--force"), "{line}");
    assert_eq!(std::fs::read(keys.join("lynx.key")).unwrap(), first, "the key was overwritten");

    let output = lynx(&["keygen", "--out", keys_arg, "--force"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_ne!(std::fs::read(keys.join("lynx.key")).unwrap(), first, "--force made no new key");

    // A public key that is not one is bad input; so is a private key given as the public one.
    let line = bad_input(&["verify", "x.intoto.json", "--pubkey", "/no/such/lynx.pub"]);
    assert!(line.contains("/no/such/lynx.pub"), "{line}");
    let line = bad_input(&["verify", "x.intoto.json", "--pubkey", keys.join("lynx.key").to_str().unwrap()]);
    assert!(line.contains("not a P-256 SPKI public key"), "{line}");
}

#[test]
fn an_interrupted_run_keeps_the_cells_it_measured() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Many slow cells, so the run is still going when it is killed after the first.
    let models = models(|suite| {
        suite.replace("min_s = 0.3", "min_s = 1.0").replace("ctxs = [512]", "ctxs = [64, 128, 256, 512, 1024, 2048]")
    });
    let out = tempfile::tempdir().unwrap();
    let mut child = lynx_command()
        .args(run_args(models.path(), out.path()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let cells_in = |path: &Path| -> usize {
        std::fs::read(path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
            .map_or(0, |r| r["cells"].as_array().map_or(0, Vec::len))
    };
    loop {
        assert!(Instant::now() < deadline, "no cell written within 120 s");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be interrupted");
        if result_files(out.path()).iter().any(|path| cells_in(path) >= 1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let path = result_file(out.path());
    let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(result["status"], "incomplete");
    // The samples stop where the run did, under a name that says they are partial; nothing
    // half-written has a final name, and an unfinished run has no envelope.
    let samples = path.with_file_name(result["telemetry"]["samples_file"].as_str().unwrap());
    assert!(!samples.exists(), "{} exists after a killed run", samples.display());
    let partial = std::fs::read_to_string(format!("{}.partial", samples.display())).unwrap();
    assert!(partial.lines().count() > 10, "{} sample lines", partial.lines().count());
    assert!(!path.with_extension("intoto.json").exists());
    let cells = result["cells"].as_array().unwrap();
    assert!(!cells.is_empty() && cells.len() < 10, "{} cells", cells.len());
    for cell in cells {
        assert_eq!(cell["status"], "ok");
        seconds(&cell["step_time"]["median_s"]);
    }
}

/// Runs lynx expecting exit code 2 and one line on stderr; returns that line.
fn bad_input(args: &[&str]) -> String {
    let output = lynx(args);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: not one line: {stderr}");
    assert!(output.stdout.is_empty(), "{args:?}: printed {}", String::from_utf8_lossy(&output.stdout));
    stderr
}

/// Bad input in the test suite's text (`edit` applied): exit 2 with a line containing `names`.
fn bad_suite(edit: impl Fn(&str) -> String, names: &[&str]) {
    let models = models(edit);
    let out = tempfile::tempdir().unwrap();
    let line = bad_input(&run_args(models.path(), out.path()));
    for name in names {
        assert!(line.contains(name), "{line} does not name {name}");
    }
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a result was written for bad input");
}

#[test]
fn unknown_devices_are_bad_input() {
    let models = models(str::to_owned);
    let models = models.path().to_str().unwrap();
    for device in ["gpu", "cuda:", "cuda:x", "tpu:0"] {
        let line = bad_input(&["run", "--suite", "test", "--models", models, "--device", device]);
        assert!(line.contains(&format!("'{device}'")), "{line}");
    }
    let line = bad_input(&["run", "--suite", "test", "--models", models, "--device", "cuda:99"]);
    assert!(line.contains("cuda:99 is not a device here"), "{line}");
}

#[test]
fn malformed_toml_is_bad_input() {
    bad_suite(|s| s.replace("seed = 11", "seed = = 11"), &["suites/test.toml"]);
}

#[test]
fn unknown_keys_are_bad_input() {
    bad_suite(|s| s.replace("seed = 11", "seed = 11\nbatchez = [2]"), &["suites/test.toml", "batchez"]);
}

#[test]
fn zero_and_negative_sizes_are_bad_input() {
    bad_suite(|s| s.replace("batches = [1, 8]", "batches = [0, 8]"), &["decode.batches"]);
    bad_suite(|s| s.replace("prompt_lens = [16, 256]", "prompt_lens = [-16]"), &["prompt_lens", "-16"]);
    bad_suite(|s| s.replace("min_steps = 8", "min_steps = 0"), &["measure.min_steps"]);
    bad_suite(|s| s.replace("min_s = 1.0", "min_s = -1.0"), &["warmup.min_s"]);
}

#[test]
fn missing_files_are_bad_input() {
    bad_suite(
        |s| s.replace("model = \"test-small\"", "model = \"no-such-model\""),
        &["no-such-model.toml", "does not exist"],
    );
    let models = models(str::to_owned);
    let line = bad_input(&["run", "--suite", "nonexistent", "--models", models.path().to_str().unwrap()]);
    assert!(line.contains("suites/nonexistent.toml") && line.contains("does not exist"), "{line}");
    let line = bad_input(&["run", "--suite", "/no/such/suite.toml"]);
    assert!(line.contains("/no/such/suite.toml"), "{line}");
}

#[test]
fn devices_lists_the_cpu_with_its_libtorch() {
    let output = lynx(&["devices"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let cpu = stdout.lines().find(|l| l.starts_with("cpu ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(cpu.contains("GiB") && cpu.contains("libtorch 2.11.0"), "{cpu}");

    let output = lynx(&["devices", "--json"]);
    let devices: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(devices[0]["device"], "cpu");
    assert!(devices[0]["memory_bytes"].as_u64().unwrap() > 0);
}

fn repo_path(relative: &str) -> String {
    format!("{}/../../{relative}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn models_lists_the_catalogue() {
    let output = lynx(&["models", "--models", &repo_path("models")]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in ["llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b", "mixtral-8x7b", "gpt-oss-120b", "deepseek-r1"] {
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{name} missing:\n{stdout}");
    }
    let deepseek = stdout.lines().find(|l| l.starts_with("deepseek-r1")).unwrap();
    assert!(deepseek.contains("671.03 B") && deepseek.contains("8 of 256 +1"), "{deepseek}");

    let output = lynx(&["models", "--json", "--models", &repo_path("models")]);
    let models: Value = serde_json::from_slice(&output.stdout).unwrap();
    let llama = models.as_array().unwrap().iter().find(|m| m["name"] == "llama-3.1-8b").unwrap();
    assert_eq!(llama["parameters"], 8_030_261_248u64);
    assert_eq!(llama["kv_bytes_per_token"]["bf16"], 131_072);
    assert_eq!(llama["weight_bytes"]["fp32"], 4 * 8_030_261_248u64);
}

#[test]
fn models_import_writes_a_catalogue_file() {
    let dir = tempfile::tempdir().unwrap();
    // A Hugging Face snapshot folder: the model is named after it.
    let snapshot = dir.path().join("Qwen3-32B");
    std::fs::create_dir(&snapshot).unwrap();
    std::fs::copy(repo_path("crates/lynx-core/tests/data/hf/Qwen3-32B.json"), snapshot.join("config.json")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lynx"))
        .args(["models", "import", "Qwen3-32B/config.json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("32.76 B parameters"));
    let written = std::fs::read_to_string(dir.path().join("models/qwen3-32b.toml")).unwrap();
    let catalogue = std::fs::read_to_string(repo_path("models/qwen3-32b.toml")).unwrap();
    let parse = |text: &str| lynx_core::config::ModelShape::from_toml(text, "x").unwrap();
    assert_eq!(parse(&written), parse(&catalogue));

    // The file now exists: importing again is refused without --force.
    let again = |extra: &[&str]| {
        let mut args = vec!["models", "import", "Qwen3-32B/config.json"];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_lynx")).args(&args).current_dir(dir.path()).output().unwrap()
    };
    let refused = again(&[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("pass --force"));
    assert!(again(&["--force"]).status.success());

    // --out and --name.
    let out = dir.path().join("elsewhere/ds.toml");
    let output = lynx(&[
        "models",
        "import",
        &repo_path("crates/lynx-core/tests/data/hf/DeepSeek-R1.json"),
        "--name",
        "my-r1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(parse(&std::fs::read_to_string(&out).unwrap()).name, "my-r1");
}

#[test]
fn importing_what_lynx_cannot_model_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"model_type": "gemma2", "hidden_size": 8}"#).unwrap();
    let out = dir.path().join("m.toml");
    let line = bad_input(&["models", "import", config.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(line.contains("model_type 'gemma2' is not supported"), "{line}");
    assert!(!out.exists());
    let line = bad_input(&["models", "import", "/no/such/config.json"]);
    assert!(line.contains("/no/such/config.json") && line.contains("does not exist"), "{line}");
}

#[test]
fn a_scaled_run_states_what_it_measured_and_extrapolated() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| {
        format!("{suite}\n[scale]\nlayers = 2\ntp = 2\n")
            .replace("batches = [1, 8]", "batches = [2]")
            .replace("prompt_lens = [16, 256]", "prompt_lens = [64]")
    });
    // Layers heavy enough that two of them clearly outweigh the embedding and lm head.
    let wide = MODEL
        .replace("num_layers = 2", "num_layers = 8")
        .replace("intermediate_size = 704", "intermediate_size = 4096");
    std::fs::write(models.path().join("test-small.toml"), wide).unwrap();
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.push("--unsigned");
    let output = lynx(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("UNSIGNED: "), "{stdout}");
    let envelope = result_file(out.path()).with_extension("intoto.json");
    let output = lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", &pubkey()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("INVALID at unsigned"), "{output:?}");
    assert!(stdout.contains("measured: 2 layers, the shard of one device of 2-way tensor parallelism"), "{stdout}");

    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let measured = &result["config"]["measured"];
    assert_eq!(measured["shape"]["num_layers"], 2);
    assert_eq!(measured["shape"]["attention"]["num_heads"], 4);
    assert_eq!(measured["shape"]["mlp"]["intermediate_size"], 2048);
    let not_measured: Vec<&str> =
        measured["not_measured"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(not_measured.iter().any(|n| n.contains("tensor-parallel collectives")), "{not_measured:?}");
    assert!(not_measured.iter().any(|n| n.contains("6 of the model's 8 layers")), "{not_measured:?}");

    for cell in result["cells"].as_array().unwrap() {
        assert_eq!(cell["status"], "ok", "{cell}");
        let full = &cell["full_depth"];
        let (measured_median, head, estimate) = (
            seconds(&cell["step_time"]["median_s"]),
            seconds(&full["head_only"]["median_s"]),
            seconds(&full["median_s"]),
        );
        assert!(head < measured_median && measured_median < estimate, "{cell}");
        assert!((estimate - (head + 4.0 * (measured_median - head))).abs() < 1e-12, "{cell}");
        let batch = cell["batch"].as_f64().unwrap();
        let tokens = batch * cell["prompt_len"].as_f64().unwrap_or(1.0);
        assert!((seconds(&cell["tok_per_s_per_device"]) - tokens / estimate).abs() < 1e-9 * tokens / estimate);
    }
}

#[test]
fn a_scale_the_model_cannot_take_is_bad_input() {
    bad_suite(|s| format!("{s}\n[scale]\ntp = 3\n"), &["not divisible by scale.tp (3)"]);
    bad_suite(|s| format!("{s}\n[scale]\nlayers = 5\n"), &["scale.layers (5)"]);
}

/// Write `tensors` (name, shape) as an F32 safetensors file, values from a fixed sequence; the
/// format as published (8-byte header length, JSON header, raw little-endian data).
fn write_safetensors(path: &Path, tensors: &[(&str, Vec<usize>)], skip: &str) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    let mut state = 12345u64;
    for (name, shape) in tensors.iter().filter(|(n, _)| *n != skip) {
        let count: usize = shape.iter().product();
        let begin = data.len();
        let is_norm = name.ends_with("norm.weight");
        for _ in 0..count {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let uniform = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let value = if is_norm { 1.0 + 0.1 * uniform } else { 0.1 * uniform };
            data.extend_from_slice(&value.to_le_bytes());
        }
        header.insert(
            (*name).to_owned(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [begin, data.len()]}),
        );
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    file.extend_from_slice(&data);
    std::fs::write(path, file).unwrap();
}

/// The Hugging Face tensors of the test model (2 layers, GQA 8/2 heads of 32, MLP 704).
fn test_small_tensors() -> Vec<(&'static str, Vec<usize>)> {
    let mut tensors = vec![
        ("model.embed_tokens.weight", vec![4096, 256]),
        ("model.norm.weight", vec![256]),
        ("lm_head.weight", vec![4096, 256]),
    ];
    for layer in ["model.layers.0", "model.layers.1"] {
        for (name, shape) in [
            ("input_layernorm.weight", vec![256]),
            ("post_attention_layernorm.weight", vec![256]),
            ("self_attn.q_proj.weight", vec![256, 256]),
            ("self_attn.k_proj.weight", vec![64, 256]),
            ("self_attn.v_proj.weight", vec![64, 256]),
            ("self_attn.o_proj.weight", vec![256, 256]),
            ("mlp.gate_proj.weight", vec![704, 256]),
            ("mlp.up_proj.weight", vec![704, 256]),
            ("mlp.down_proj.weight", vec![256, 704]),
        ] {
            tensors.push((Box::leak(format!("{layer}.{name}").into_boxed_str()), shape));
        }
    }
    tensors
}

#[test]
fn a_run_reads_weights_from_a_checkpoint() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| {
        suite.replace("batches = [1, 8]", "batches = [2]").replace("prompt_lens = [16, 256]", "prompt_lens = [32]")
    });
    let weights = tempfile::tempdir().unwrap();
    write_safetensors(&weights.path().join("model.safetensors"), &test_small_tensors(), "");
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.extend(["--weights", weights.path().to_str().unwrap()]);
    let output = lynx(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let record = &result["config"]["weights"];
    assert_eq!(record["origin"], "checkpoint", "{record}");
    assert_eq!(record["files"][0][0], "model.safetensors");
    assert_eq!(result["checks"][0]["passed"], true, "{}", result["checks"]);
    assert!(result["cells"].as_array().unwrap().iter().all(|c| c["status"] == "ok"));

    // A checkpoint without one of the model's tensors is bad input, found before any result.
    let broken = tempfile::tempdir().unwrap();
    write_safetensors(
        &broken.path().join("model.safetensors"),
        &test_small_tensors(),
        "model.layers.1.mlp.down_proj.weight",
    );
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.extend(["--weights", broken.path().to_str().unwrap()]);
    let line = bad_input(&args);
    assert!(line.contains("no tensor model.layers.1.mlp.down_proj.weight"), "{line}");
    assert!(result_files(out.path()).is_empty());
}
