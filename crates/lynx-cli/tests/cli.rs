//! `lynx` end to end through the binary, on CPU with real libtorch: a run and its result file,
//! an interrupted run, and every kind of bad input.

mod common;

use common::{config_home, lynx, lynx_command, models, pubkey, repo_path, DEVICE};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// The run folders under `out` (`out/<device>/<run id>/`).
fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for device in std::fs::read_dir(out).into_iter().flatten() {
        for run in std::fs::read_dir(device.unwrap().path()).into_iter().flatten() {
            dirs.push(run.unwrap().path());
        }
    }
    dirs
}

/// The result files under `out`: `<run id>.json` in each run folder.
fn result_files(out: &Path) -> Vec<PathBuf> {
    run_dirs(out)
        .into_iter()
        .map(|dir| dir.join(format!("{}.json", dir.file_name().unwrap().to_string_lossy())))
        .filter(|path| path.exists())
        .collect()
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
    assert_eq!(names, ["parity", "equilibrium", "telemetry_coverage", "roofline"], "{checks:?}");
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
    assert_eq!((&lines[0]["kind"], &lines[0]["segment"]), (&Value::from("segment"), &Value::from(1)));
    assert!(lines[1..].iter().all(|l| l["kind"] == "telemetry" && l["source"] == "host"));
    assert!(lines[1..].windows(2).all(|w| w[1]["t_s"].as_f64() > w[0]["t_s"].as_f64()));

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

    // The roofline: the CPU's ceilings were measured (libtorch copy and matmul, STREAM), burst
    // and, after warm-up, sustained; every cell is a sane share of them.
    let probes = result["roofline"]["probes"].as_array().unwrap();
    let value = |name: &str, phase: &str| {
        probes.iter().find(|p| p["name"] == name && p["phase"] == phase).map(|p| seconds(&p["value"]))
    };
    assert!(value("torch copy", "burst").unwrap() > 1e8, "{probes:?}");
    assert!(value("cpu triad", "burst").unwrap() > 1e8, "{probes:?}");
    assert!(value("torch matmul", "burst").unwrap() > 1e8, "{probes:?}");
    assert!(value("torch matmul", "sustained").unwrap() > 1e8, "{probes:?}");
    assert!(probes.iter().any(|p| p["name"] == "native" && p["value"]["unavailable"].is_string()));
    if std::path::Path::new("/sys/devices/system/cpu/cpu0/cache").exists() {
        // The last-level cache, which decides which cells the bandwidth ceiling bounds.
        assert!(result["roofline"]["cache_bytes"].as_u64().is_some_and(|b| b >= 1 << 16), "{}", result["roofline"]);
    }
    for cell in cells {
        let roofline = &cell["roofline"];
        let bandwidth = roofline["bandwidth_fraction"].as_f64().unwrap();
        let matmul = roofline["matmul_fraction"].as_f64().unwrap();
        assert!(bandwidth > 0.0 && bandwidth <= 1.05 && matmul > 0.0 && matmul <= 1.05, "{cell}");
        assert!(seconds(&roofline["work"]["bytes"]) > seconds(&roofline["work"]["weight_bytes"]) * 0.99);
    }
    assert!(stdout.contains("cells against the ceilings"), "{stdout}");

    // Derived figures: the frontier holds the undominated decode cells, the prefill table every
    // prefill cell, and the chat workload has a latency-bounded point under each default bound.
    let derived = &result["derived"];
    let frontier = derived["frontier"][0]["points"].as_array().unwrap();
    assert_eq!(derived["frontier"][0]["ctx"], 512);
    assert!(!frontier.is_empty() && frontier.len() <= 2, "{frontier:?}");
    for point in frontier {
        let cell = cells.iter().find(|c| c["step"] == "decode" && c["batch"] == point["batch"]).unwrap();
        assert_eq!(point["tok_per_s_per_device"], cell["tok_per_s_per_device"]);
    }
    assert_eq!(derived["prefill"].as_array().unwrap().len(), 2);
    let bounded = derived["latency_bounded"].as_array().unwrap();
    let bounds: Vec<&str> = bounded.iter().map(|b| b["bound"]["name"].as_str().unwrap()).collect();
    assert_eq!(bounds, ["server", "interactive"], "MLPerf's bounds of the nearest model by default");
    let server = &bounded[0]["point"];
    assert!(seconds(&server["ttft_p99_s"]) <= 2.0 && seconds(&server["tpot_p99_s"]) <= 0.2, "{server}");
    assert!(seconds(&server["output_tok_per_s_per_device"]) > 0.0);
    assert!(server["usd_per_million_output_tokens"]["unavailable"].is_string(), "no price, no cost: {server}");
    assert!(stdout.contains("latency-bounded throughput"), "{stdout}");

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
}

#[test]
fn a_first_run_makes_its_signing_key_and_says_where_it_is() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let output =
        lynx_command().args(run_args(models.path(), out.path())).env("XDG_CONFIG_HOME", empty.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let (private, public) = (empty.path().join("lynx/lynx.key"), empty.path().join("lynx/lynx.pub"));
    assert!(stderr.contains(private.to_str().unwrap()) && stderr.contains(public.to_str().unwrap()), "{stderr}");
    let envelope = result_file(out.path()).with_extension("intoto.json");
    let output = lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", public.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stdout));

    // The next run signs with the same key and makes none.
    let key = std::fs::read(&private).unwrap();
    let again = tempfile::tempdir().unwrap();
    let args: Vec<&str> =
        run_args(models.path(), again.path()).into_iter().map(|a| if a == "cpu" { "cuda:99" } else { a }).collect();
    let output = lynx_command().args(&args).env("XDG_CONFIG_HOME", empty.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&output.stderr).contains("made a signing key"));
    assert_eq!(std::fs::read(&private).unwrap(), key, "the key was replaced");
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

/// A suite of many short cells: a kill lands in a cell, between cells, in warm-up or in set-up.
fn many_cells(suite: &str) -> String {
    suite
        .replace("min_s = 1.0\nmax_s = 3.0", "min_s = 0.2\nmax_s = 3.0")
        .replace("min_steps = 8\nmin_s = 0.3\nmax_steps = 200", "min_steps = 5\nmin_s = 0.15\nmax_steps = 100")
        .replace("batches = [1, 8]\nctxs = [512]", "max_batch = 8\nctxs = [64, 256, 512]")
}

/// The one run folder under `out`, once its plan is written.
fn wait_for_run_dir(out: &Path, child: &mut std::process::Child) -> PathBuf {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no run folder within 60 s");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its plan was seen");
        if let Some(dir) = run_dirs(out).pop() {
            let plan = dir.join(format!("{}.plan.json", dir.file_name().unwrap().to_string_lossy()));
            if plan.exists() {
                return dir;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `lynx run` started in the background with its output piped, and its run folder once the
/// plan is written.
fn spawn_run(models: &Path, out: &Path) -> (std::process::Child, PathBuf) {
    let mut child =
        lynx_command().args(run_args(models, out)).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let dir = wait_for_run_dir(out, &mut child);
    (child, dir)
}

fn journal_of(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join(format!("{}.journal.jsonl", dir.file_name().unwrap().to_string_lossy()))).unwrap_or_default()
}

fn cell_key(cell: &Value) -> String {
    format!("{} {} {}", cell["step"], cell["batch"], cell["prompt_len"].as_u64().or(cell["ctx"].as_u64()).unwrap())
}

/// A small deterministic generator for the kill times; its seed is printed on failure.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *state >> 33
}

#[test]
fn sigkill_at_twenty_random_moments_and_resume_loses_no_cell() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Twenty-two cells of at least 0.5 s each. A quarter of the kills land in the first second of
    // a process (set-up, parity, warm-up); the rest in the sweep, within 0.3 s of a cell being
    // journaled (in the next cell, or between cells), so each of those lets about one cell
    // finish and the run is still going at the twentieth kill.
    let models = models(|suite| {
        many_cells(suite)
            .replace("min_s = 0.15\nmax_steps = 100", "min_s = 0.5\nmax_steps = 100000")
            .replace("ctxs = [64, 256, 512]", "ctxs = [64, 128, 256, 512, 1024]")
    });
    let out = tempfile::tempdir().unwrap();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut state = seed;
    let quiet = |mut command: Command| {
        command.stdout(Stdio::null()).stderr(Stdio::null());
        command
    };
    let mut command = quiet(lynx_command());
    command.args(run_args(models.path(), out.path()));
    let mut child = command.spawn().unwrap();
    let dir = wait_for_run_dir(out.path(), &mut child);
    let dir_arg = dir.to_str().unwrap().to_owned();
    let mut journal = Vec::new();
    for kill in 1..=20 {
        if next_random(&mut state).is_multiple_of(4) {
            std::thread::sleep(Duration::from_millis(next_random(&mut state) % 1000));
        } else {
            let deadline = Instant::now() + Duration::from_secs(60);
            while journal_of(&dir).len() == journal.len() {
                assert!(Instant::now() < deadline, "seed {seed}: no cell within 60 s");
                assert!(child.try_wait().unwrap().is_none(), "seed {seed}: the run finished before kill {kill}");
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(Duration::from_millis(next_random(&mut state) % 300));
        }
        assert!(child.try_wait().unwrap().is_none(), "seed {seed}: the run finished before kill {kill}");
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let now = journal_of(&dir);
        assert!(now.starts_with(&journal), "seed {seed}: a journaled cell changed after kill {kill}");
        journal = now;
        if kill < 20 {
            let mut resume = quiet(lynx_command());
            resume.args(["run", "--resume", &dir_arg]);
            child = resume.spawn().unwrap();
        }
    }
    eprintln!("seed {seed}: {} of 22 cells journaled after 20 kills", journal.iter().filter(|&&b| b == b'\n').count());
    let last = lynx(&["run", "--resume", &dir_arg]);
    let said = format!("{}{}", String::from_utf8_lossy(&last.stdout), String::from_utf8_lossy(&last.stderr));
    // Twenty-one warm-ups on a shared 2-core machine: the checks of the machine's state
    // (equilibrium, telemetry coverage) may fail, and say so with exit 1; nothing else may.
    let machine_state = said
        .lines()
        .filter(|l| l.starts_with("check ") && l.contains("FAILED"))
        .all(|l| l.starts_with("check equilibrium FAILED") || l.starts_with("check telemetry_coverage FAILED"));
    assert!(last.status.success() || (last.status.code() == Some(1) && machine_state), "seed {seed}: {said}");
    assert!(journal_of(&dir).starts_with(&journal), "seed {seed}");

    let path = result_file(out.path());
    let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(result["status"], "complete", "seed {seed}");
    let mut keys: Vec<String> = result["cells"].as_array().unwrap().iter().map(cell_key).collect();
    let count = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), count, "seed {seed}: a cell appears twice: {keys:?}");
    let mut expected = vec!["\"prefill\" 1 16".to_owned(), "\"prefill\" 1 256".to_owned()];
    for ctx in [64, 128, 256, 512, 1024] {
        for batch in [1, 2, 4, 8] {
            expected.push(format!("\"decode\" {batch} {ctx}"));
        }
    }
    expected.sort();
    assert_eq!(keys, expected, "seed {seed}");
    // Each resumed process warmed the device up again.
    assert!(!result["resumed_warmups"].as_array().unwrap().is_empty(), "seed {seed}");
    let envelope = path.with_extension("intoto.json");
    let output = lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", &pubkey()]);
    assert!(output.status.success(), "seed {seed}: {}", String::from_utf8_lossy(&output.stdout));
}

#[test]
fn sigint_signs_a_partial_result_that_verifies_and_resume_completes_it() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(many_cells);
    let out = tempfile::tempdir().unwrap();
    let (child, dir) = spawn_run(models.path(), out.path());
    let deadline = Instant::now() + Duration::from_secs(120);
    while journal_of(&dir).iter().filter(|&&b| b == b'\n').count() < 2 {
        assert!(Instant::now() < deadline, "no two cells within 120 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill takes no pointers; the pid is our child's, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped by signal 2"), "{stderr}");
    let path = result_file(out.path());
    let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(result["status"], "partial");
    let partial_cells = result["cells"].as_array().unwrap().len();
    assert!((2..14).contains(&partial_cells), "{partial_cells} cells");
    let envelope = path.with_extension("intoto.json");
    let verify = lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", &pubkey()]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));

    let output = lynx(&["run", "--resume", dir.to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(result["status"], "complete");
    assert_eq!(result["cells"].as_array().unwrap().len(), 14);
    let cells = result["cells"].as_array().unwrap();
    // The result's cells are the journal's, with their roofline figures added at assembly.
    let without_roofline = |cell: &Value| {
        let mut cell = cell.clone();
        cell.as_object_mut().unwrap().remove("roofline");
        cell
    };
    let journaled: Vec<Value> = journal_cells(&dir).iter().map(without_roofline).collect();
    let assembled: Vec<Value> = cells.iter().map(without_roofline).collect();
    assert_eq!(assembled[..partial_cells], journaled[..partial_cells]);
    // The resumed process is the samples file's second segment, and measured the later cells.
    assert!(cells[..partial_cells].iter().all(|c| c["segment"] == 1), "{cells:?}");
    assert!(cells[partial_cells..].iter().all(|c| c["segment"] == 2), "{cells:?}");
    assert_eq!(result["resumed_warmups"][0]["segment"], 2);
    let samples =
        std::fs::read_to_string(path.with_file_name(result["telemetry"]["samples_file"].as_str().unwrap())).unwrap();
    let segments: Vec<Value> = samples
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["kind"] == "segment")
        .map(|l| l["segment"].clone())
        .collect();
    assert_eq!(segments, [1, 2]);
}

fn journal_cells(dir: &Path) -> Vec<Value> {
    String::from_utf8(journal_of(dir)).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn a_worker_that_crashes_in_a_cell_loses_only_that_cell() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(many_cells);
    let out = tempfile::tempdir().unwrap();
    let (child, dir) = spawn_run(models.path(), out.path());
    let current = dir.join(format!("{}.current.json", dir.file_name().unwrap().to_string_lossy()));
    let deadline = Instant::now() + Duration::from_secs(120);
    // Wait until the worker is early in a cell (at least 0.15 s each): one after the first,
    // named by current.json 20 to 80 ms ago and not journaled yet. Then crash it as a sticky
    // device error would.
    let in_a_cell = || -> bool {
        let Ok(age) = std::fs::metadata(&current).and_then(|m| m.modified()).map(|t| t.elapsed().unwrap_or_default())
        else {
            return false;
        };
        let Ok(shape) = std::fs::read(&current).map(|b| serde_json::from_slice::<Value>(&b)) else { return false };
        let Ok(shape) = shape else { return false };
        let journaled = journal_cells(&dir);
        !journaled.is_empty()
            && !journaled.iter().any(|c| cell_key(c) == cell_key(&shape))
            && (Duration::from_millis(20)..Duration::from_millis(80)).contains(&age)
    };
    while !in_a_cell() {
        assert!(Instant::now() < deadline, "no cell in progress within 120 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id())).unwrap();
    let worker: i32 = children.split_whitespace().next().expect("the supervisor has a worker").parse().unwrap();
    // SIGABRT, as libtorch's std::terminate raises on an error it cannot recover from. (A
    // SIGSEGV sent by kill() is absorbed once by Rust's stack-overflow handler.)
    // SAFETY: kill takes no pointers.
    unsafe { libc::kill(worker, libc::SIGABRT) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("was killed by signal 6 (SIGABRT) during"), "{stderr}");
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    assert_eq!(result["status"], "complete");
    let cells = result["cells"].as_array().unwrap();
    let failed: Vec<&Value> = cells.iter().filter(|c| c["status"] != "ok").collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["status"], "error");
    assert!(failed[0]["message"].as_str().unwrap().contains("SIGABRT"), "{}", failed[0]);
    assert_eq!(cells.len(), 14, "the sweep went on past the crashed cell");
    assert!(String::from_utf8_lossy(&output.stdout).contains("cells that failed:"));
}

#[test]
fn a_cell_too_big_for_memory_is_recorded_as_out_of_memory_and_the_sweep_goes_on() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // The test model's KV cache is 1 KiB per token, in four tensors (K and V of two layers): a
    // batch whose cache at context 65536 is sixteen times this machine's memory (each tensor
    // four times) cannot be allocated.
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let total_kib: u64 = meminfo.lines().next().unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    let huge = (16 * total_kib * 1024 / (65_536 * 1024)).next_power_of_two();
    let models = models(|suite| {
        many_cells(suite)
            .replace("max_batch = 8\nctxs = [64, 256, 512]", &format!("batches = [2, {huge}]\nctxs = [65536, 64]"))
            .replace("max_steps = 100", "max_steps = 20")
    });
    let out = tempfile::tempdir().unwrap();
    let output = lynx(&run_args(models.path(), out.path()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    // Warm-up runs few, slow steps at this context and may not judge equilibrium reached, and the
    // batch-8192 steps can starve the sampling thread of this 2-core machine: those two checks of
    // the machine's state may fail (exit 1); every other must pass.
    let failed: Vec<&Value> = result["checks"].as_array().unwrap().iter().filter(|c| c["passed"] != true).collect();
    assert!(failed.iter().all(|c| c["name"] == "equilibrium" || c["name"] == "telemetry_coverage"), "{failed:?}");
    assert_eq!(output.status.success(), failed.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    let cells = result["cells"].as_array().unwrap();
    let keys: Vec<String> = cells.iter().map(cell_key).collect();
    let d = |batch: u64, ctx: u64| format!("\"decode\" {batch} {ctx}");
    // At 65536 the ladder stops at the batch that did not fit; at 64 it climbs on.
    assert_eq!(keys[2..], [d(2, 65536), d(huge, 65536), d(2, 64), d(huge, 64)], "{keys:?}");
    let oom = &cells[3];
    assert_eq!(oom["status"], "oom", "{oom}");
    let message = oom["message"].as_str().unwrap();
    assert!(message.contains("allocate") && !message.contains("frame #"), "{oom}");
    assert!(cells.iter().filter(|c| c["status"] != "ok").count() == 1, "{cells:?}");
    let lines = result["derived"]["sweep"].as_array().unwrap();
    assert_eq!(lines[2]["end"], format!("out of memory at batch {huge}"));
    assert!(stdout.contains("out of memory"), "{stdout}");
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
    let line = bad_input(&["run", "--suite", "nonexistent"]);
    assert!(line.contains("'nonexistent'") && line.contains("no built-in suite"), "{line}");
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

#[test]
fn models_lists_the_catalogue() {
    // Built into the binary: listed from any folder, with no models folder.
    let elsewhere = tempfile::tempdir().unwrap();
    let output =
        lynx_command().arg("models").current_dir(elsewhere.path()).env_remove("LYNX_MODELS_DIR").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in ["llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b", "mixtral-8x7b", "gpt-oss-120b", "deepseek-r1"] {
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{name} missing:\n{stdout}");
    }
    let deepseek = stdout.lines().find(|l| l.starts_with("deepseek-r1")).unwrap();
    assert!(deepseek.contains("671.03 B") && deepseek.contains("8 of 256 +1"), "{deepseek}");

    let output = lynx_command().args(["models", "--json"]).current_dir(elsewhere.path()).output().unwrap();
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
    let wide = common::fixture("models/test-small.toml")
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

#[test]
fn roofline_measures_and_prints_the_cpus_ceilings() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let output = lynx(&["roofline", "--device", "cpu"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for line in ["torch copy", "cpu copy", "cpu triad", "torch matmul  f32", "torch matmul  bf16"] {
        assert!(stdout.contains(line), "no {line}: {stdout}");
    }
    assert!(stdout.contains("GB/s") && stdout.contains("FLOP/s"), "{stdout}");
    assert!(stdout.contains("the native probes are GPU kernels"), "{stdout}");

    let output = lynx(&["roofline", "--device", "cpu", "--json", "--sustained-s", "0.3"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let record: Value = serde_json::from_slice(&output.stdout).unwrap();
    let probes = record["probes"].as_array().unwrap();
    let measured: Vec<&Value> = probes.iter().filter(|p| p["value"].is_number()).collect();
    assert!(measured.len() >= 7, "{probes:?}");
    for probe in measured {
        seconds(&probe["value"]);
    }
    assert!(probes.iter().any(|p| p["phase"] == "sustained" && p["value"].is_number()), "{probes:?}");

    let line = bad_input(&["roofline", "--device", "cuda:7"]);
    assert!(line.contains("cuda:7"), "{line}");
    let line = bad_input(&["roofline", "--sustained-s=-1"]);
    assert!(line.contains("--sustained-s"), "{line}");
}

/// A run of the test suite: its models folder, its results folder (both kept while in scope),
/// and its result file.
fn measured_run() -> (tempfile::TempDir, tempfile::TempDir, PathBuf) {
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let output = lynx(&run_args(models.path(), out.path()));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result = result_file(out.path());
    (models, out, result)
}

/// A copy of the run at `result_path` as another device's result: `name` for the device, step
/// times multiplied by `slower`, written as `<stem>.json` with its samples file into `dir`, and
/// sealed with `key` (unsigned when `None`). Returns the envelope's path.
fn publish_as(
    result_path: &Path,
    dir: &Path,
    stem: &str,
    name: &str,
    slower: f64,
    key: Option<&lynx_publish::SigningKey>,
) -> PathBuf {
    let mut json: Value = serde_json::from_slice(&std::fs::read(result_path).unwrap()).unwrap();
    json["device"]["name"] = Value::from(name);
    for cell in json["cells"].as_array_mut().unwrap() {
        if let Some(step) = cell["step_time"].as_object_mut() {
            for field in ["median_s", "p90_s", "p99_s", "min_s", "max_s"] {
                let t = step[field].as_f64().unwrap();
                step.insert(field.to_owned(), Value::from(t * slower));
            }
        }
    }
    let samples = result_path.with_file_name(json["telemetry"]["samples_file"].as_str().unwrap());
    let samples_name = format!("{stem}.samples.jsonl");
    std::fs::copy(samples, dir.join(&samples_name)).unwrap();
    json["telemetry"]["samples_file"] = Value::from(samples_name);
    let result: lynx_core::result::RunResult = serde_json::from_value(json).unwrap();
    let path = dir.join(format!("{stem}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&result).unwrap()).unwrap();
    let envelope = lynx_publish::seal(&path, &result, key).unwrap();
    let envelope_path = lynx_publish::envelope_path(&path);
    std::fs::write(&envelope_path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    envelope_path
}

#[test]
fn shortlist_ranks_verified_results_by_cost_and_lists_the_rest_with_reasons() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_models, _out, measured) = measured_run();

    let trusted = lynx_publish::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    lynx_publish::generate(other_dir.path(), false).unwrap();
    let untrusted = lynx_publish::read_signing_key(&other_dir.path().join("lynx.key")).unwrap();
    let published = tempfile::tempdir().unwrap();
    let dir = published.path();
    let hostile = "<script>document.body.setAttribute('data-pwned','1')</script>\
                   <img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">\u{1b}[2J";
    publish_as(&measured, dir, "alpha", "Alpha GPU", 1.0, Some(&trusted));
    publish_as(&measured, dir, "beta", "Beta GPU", 3.0, Some(&trusted));
    publish_as(&measured, dir, "hostile", hostile, 1.0, Some(&trusted));
    let tampered = publish_as(&measured, dir, "tampered", "Tampered GPU", 0.1, Some(&trusted));
    let samples = dir.join("tampered.samples.jsonl");
    let mut bytes = std::fs::read(&samples).unwrap();
    bytes.extend_from_slice(b"{}\n");
    std::fs::write(&samples, bytes).unwrap();
    publish_as(&measured, dir, "unsigned", "Unsigned GPU", 0.1, None);
    publish_as(&measured, dir, "untrusted", "Untrusted GPU", 0.1, Some(&untrusted));
    // Deeply nested JSON where an envelope should be: refused unparsed, never a crash.
    std::fs::write(dir.join("nested.intoto.json"), format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))).unwrap();
    // A device name of a megabyte, signed: ranked, but shown cut short.
    publish_as(&measured, dir, "huge", &"H".repeat(1 << 20), 1.0, Some(&trusted));

    let dir_arg = dir.to_str().unwrap();
    let args = |format: &str| {
        vec![
            "shortlist".to_owned(),
            dir_arg.to_owned(),
            "--workload".to_owned(),
            "test-small:256/64".to_owned(),
            "--ttft-p99".to_owned(),
            "2s".to_owned(),
            "--tpot-p99".to_owned(),
            "200ms".to_owned(),
            "--price".to_owned(),
            "Alpha GPU=2.0,beta-gpu=1.0".to_owned(),
            "--price".to_owned(),
            // Its name holds commas, the price list's separator: priced by its slug.
            format!("{}=5.0", lynx_core::device::slug(hostile)),
            "--utilisation".to_owned(),
            "0.5".to_owned(),
            "--pubkey".to_owned(),
            pubkey(),
            "--format".to_owned(),
            format.to_owned(),
        ]
    };
    let run = |format: &str| {
        let output = lynx_command().args(args(format)).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let list: Value = serde_json::from_str(&run("json")).unwrap();
    let ranked = list["ranked"].as_array().unwrap();
    let devices: Vec<&str> = ranked.iter().map(|e| e["device"].as_str().unwrap()).collect();
    assert_eq!(devices[..3], ["Alpha GPU", "Beta GPU", hostile], "{list}");
    assert_eq!(devices[3].len(), 1 << 20, "the unpriced device ranks after the priced ones");
    // The ranking matches costs computed by hand from the same figures.
    let mut costs = Vec::new();
    for (entry, price) in ranked.iter().zip([2.0, 1.0, 5.0]) {
        let point = &entry["point"];
        let tok_per_s = seconds(&point["output_tok_per_s_per_device"]);
        let by_hand = price / (3600.0 * tok_per_s * 0.5) * 1e6;
        let cost = seconds(&point["usd_per_million_output_tokens"]);
        assert!((cost - by_hand).abs() <= 1e-9 * by_hand, "{entry}");
        assert!(seconds(&point["ttft_p99_s"]) <= 2.0 && seconds(&point["tpot_p99_s"]) <= 0.2, "{entry}");
        assert_eq!(entry["checks_passed"], true);
        costs.push(by_hand);
    }
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    // The same bound and shape as the run's own chat workload under its server bound: the same
    // figure the run derived.
    let own: Value = serde_json::from_slice(&std::fs::read(&measured).unwrap()).unwrap();
    let server =
        own["derived"]["latency_bounded"].as_array().unwrap().iter().find(|b| b["bound"]["name"] == "server").unwrap();
    assert_eq!(ranked[0]["point"]["output_tok_per_s_per_device"], server["point"]["output_tok_per_s_per_device"]);

    let excluded = list["excluded"].as_array().unwrap();
    let kind = |stem: &str| {
        excluded
            .iter()
            .find(|x| x["file"].as_str().unwrap().ends_with(&format!("{stem}.intoto.json")))
            .map(|x| (x["kind"].as_str().unwrap().to_owned(), x["reason"].as_str().unwrap().to_owned()))
            .unwrap_or_else(|| panic!("{stem} not excluded: {list}"))
    };
    let (k, reason) = kind("tampered");
    assert!(k == "rejected" && reason.starts_with("subject"), "{k}: {reason}");
    assert_eq!(kind("unsigned").0, "unsigned");
    let (k, reason) = kind("untrusted");
    assert!(k == "untrusted" && reason.contains("not one of the 1 trusted keys"), "{k}: {reason}");
    let (k, reason) = kind("nested");
    assert!(k == "rejected" && reason.starts_with("envelope"), "{k}: {reason}");
    assert_eq!(excluded.len(), 4, "{excluded:?}");

    // Text from results is text: no escape sequence reaches the terminal, no tag the Markdown.
    let table = run("table");
    assert!(!table.contains('\u{1b}'), "{table}");
    assert!(table.contains("Alpha GPU") && table.contains("not ranked:"), "{table}");
    let markdown = run("markdown");
    assert!(!markdown.contains("<script>") && markdown.contains("&lt;script&gt;"), "{markdown}");
    assert!(!markdown.contains("<img"), "{markdown}");
    let csv = run("csv");
    assert_eq!(csv.lines().next().unwrap().split(',').count(), 11, "{csv}");
    assert!(csv.contains("Beta GPU"), "{csv}");

    // Exports of one result from the one schema: a CSV row per cell with every column, and
    // Markdown whose hostile device name is text.
    let hostile_envelope = dir.join("hostile.intoto.json");
    let export = |format: &str| {
        let output = lynx(&["export", hostile_envelope.to_str().unwrap(), "--pubkey", &pubkey(), "--format", format]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let csv = export("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + own["cells"].as_array().unwrap().len(), "{csv}");
    assert!(lines.iter().all(|l| l.split(',').count() == 21), "{csv}");
    assert!(lines[0].starts_with("step,batch,prompt_len,ctx,status"), "{csv}");
    let markdown = export("markdown");
    assert!(markdown.contains("&lt;script&gt;") && !markdown.contains("<script>") && !markdown.contains('\u{1b}'));
    assert!(markdown.contains("## Cells") && markdown.contains("## Checks"), "{markdown}");
    let output = lynx(&["export", tampered.to_str().unwrap(), "--pubkey", &pubkey()]);
    assert_eq!(output.status.code(), Some(1), "a tampered result is not exported");

    // The site, from the same folder, in a real headless browser: every result listed with its
    // verification, every plot drawn, the hostile name shown as text and no script run.
    let site = tempfile::tempdir().unwrap();
    let output = lynx(&["report", dir_arg, "--out", site.path().to_str().unwrap(), "--pubkey", &pubkey()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = site.path().join("index.html");
    let (dom, console) = chromium(&["--dump-dom", &format!("file://{}", index.display())]);
    // The hostile text names the attribute; only a script that ran would set it on <body>.
    assert!(!dom.contains("data-pwned=\""), "a script from a result ran: {dom}");
    assert!(!dom.contains("<script") && !dom.contains("<img"), "markup from a result became elements");
    assert!(dom.contains("&lt;script&gt;document.body"), "the hostile name is shown as text");
    assert_eq!(dom.matches("class=\"result\"").count(), 8, "four verified, four excluded");
    assert!(!dom.contains(&"H".repeat(1000)), "a megabyte name is cut short in the site");
    for shown in ["Alpha GPU", "Beta GPU", "rejected: subject", "unsigned", "untrusted"] {
        assert!(dom.contains(shown), "no {shown} in the site");
    }
    // One frontier plot (one workload), bandwidth and matmul bars.
    assert_eq!(dom.matches("<svg").count(), 3, "{dom}");
    assert_eq!(dom.matches("class=\"series\"").count(), 4, "one frontier series per verified device");
    let errors: Vec<&str> = console.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(errors.is_empty(), "console messages: {errors:?}");
    let page = std::fs::read_dir(site.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("result-"))
        .unwrap();
    let (dom, console) = chromium(&["--dump-dom", &format!("file://{}", page.display())]);
    assert!(dom.contains("Telemetry") && dom.contains("<svg") && !dom.contains("data-pwned=\""), "{dom}");
    assert!(!console.contains("CONSOLE"), "{console}");
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("site-index.png");
    chromium(&[
        &format!("--screenshot={}", screenshot.display()),
        "--window-size=1200,2000",
        &format!("file://{}", index.display()),
    ]);
    assert!(std::fs::metadata(&screenshot).unwrap().len() > 10_000, "screenshot {}", screenshot.display());
    println!("screenshot of the site: {}", screenshot.display());

    // Collect the folder into one results folder: the four verified results, nothing else;
    // collecting again skips identical copies; a different copy of a collected run is refused.
    let collected = tempfile::tempdir().unwrap();
    let into = collected.path().to_str().unwrap();
    let output = lynx(&["collect", dir_arg, "--into", into, "--pubkey", &pubkey()]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("collected ")).count(), 4, "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("REFUSED ")).count(), 4, "{said}");
    let index: Value = serde_json::from_slice(&std::fs::read(collected.path().join("index.json")).unwrap()).unwrap();
    assert_eq!(index["results"].as_array().unwrap().len(), 4, "{index}");
    let again = lynx(&["collect", dir_arg, "--into", into, "--pubkey", &pubkey()]);
    let said = String::from_utf8_lossy(&again.stdout).into_owned();
    assert_eq!(said.lines().filter(|l| l.starts_with("already collected ")).count(), 4, "{said}");
    let other = tempfile::tempdir().unwrap();
    publish_as(&measured, other.path(), "alpha-again", "Alpha GPU", 2.0, Some(&trusted));
    let output = lynx(&["collect", other.path().to_str().unwrap(), "--into", into, "--pubkey", &pubkey()]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.code() == Some(1) && said.contains("REFUSED") && said.contains("different contents"),
        "{said}"
    );
    let report =
        lynx(&["report", into, "--out", site.path().join("collected").to_str().unwrap(), "--pubkey", &pubkey()]);
    assert!(report.status.success(), "the collected folder still verifies and builds a site");

    // Bad input: exit 2, one line naming it.
    let key = pubkey();
    let bad = |workload: &str, ttft: &str, key: &str| {
        bad_input(&[
            "shortlist",
            dir_arg,
            "--workload",
            workload,
            "--ttft-p99",
            ttft,
            "--tpot-p99",
            "1s",
            "--pubkey",
            key,
        ])
    };
    assert!(bad("test-small", "2s", &key).contains("MODEL:ISL/OSL"));
    assert!(bad("test-small:0/64", "2s", &key).contains("positive token counts"));
    assert!(bad("test-small:256/64", "fast", &key).contains("--ttft-p99"));
    assert!(bad("test-small:256/64", "2s", "/no/such.pub").contains("/no/such.pub"));
    let line = bad_input(&["shortlist", dir_arg, "--workload", "m:1/1", "--ttft-p99", "1s", "--tpot-p99", "1s"]);
    assert!(line.contains("no trusted keys"), "{line}");
}

#[test]
fn reproduce_reruns_the_published_configuration_and_gives_the_ratio_of_every_figure() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_models, _out, published_result) = measured_run();
    let published = published_result.with_extension("intoto.json");
    let original: Value = serde_json::from_slice(&std::fs::read(&published_result).unwrap()).unwrap();

    // The reproduction needs no models folder: the configuration comes from the signed result.
    let local_out = tempfile::tempdir().unwrap();
    let key = pubkey();
    let output = lynx(&[
        "reproduce",
        published.to_str().unwrap(),
        "--pubkey",
        &key,
        "--out",
        local_out.path().to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let local_result = result_file(local_out.path());
    let local: Value = serde_json::from_slice(&std::fs::read(&local_result).unwrap()).unwrap();
    assert_eq!(local["config"]["sha256"], original["config"]["sha256"], "the same configuration, by digest");
    let digest = lynx_publish::envelope::file_sha256(&published).unwrap();
    assert_eq!(local["reproduces"]["envelope_sha256"], Value::from(digest));
    assert_eq!(local["reproduces"]["run_id"], original["run_id"]);
    let verify = lynx(&["verify", local_result.with_extension("intoto.json").to_str().unwrap(), "--pubkey", &key]);
    assert!(verify.status.success(), "the reproduction is signed");

    // The ratio table is complete: every cell both measured, both ways, and the derived and
    // roofline figures; `lynx compare` gives the same rows.
    let output = lynx(&[
        "compare",
        published.to_str().unwrap(),
        local_result.with_extension("intoto.json").to_str().unwrap(),
        "--pubkey",
        &key,
        "--json",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = comparison["rows"].as_array().unwrap();
    let cells = original["cells"].as_array().unwrap().len();
    assert_eq!(rows.iter().filter(|r| r["figure"].as_str().unwrap().ends_with("median step (s)")).count(), cells);
    assert_eq!(rows.iter().filter(|r| r["figure"].as_str().unwrap().ends_with("tok/s/device")).count(), cells + 2);
    assert!(rows.iter().any(|r| r["figure"].as_str().unwrap().starts_with("roofline torch matmul")));
    for row in rows {
        let (first, second, ratio) =
            (row["first"].as_f64().unwrap(), row["second"].as_f64().unwrap(), row["ratio"].as_f64().unwrap());
        assert!((ratio - second / first).abs() <= 1e-9 * ratio, "{row}");
    }
    assert!(comparison["unmatched"].as_array().unwrap().is_empty(), "{comparison}");
    assert!(stdout.contains("LOCAL/PUBLISHED") && stdout.contains("WITHIN PUBLISHED'S SPREAD"), "{stdout}");
    assert_eq!(stdout.lines().filter(|l| l.contains(": median step (s)")).count(), cells, "{stdout}");

    // A published result that does not verify is not reproduced.
    let other = tempfile::tempdir().unwrap();
    lynx_publish::generate(other.path(), false).unwrap();
    let output =
        lynx(&["reproduce", published.to_str().unwrap(), "--pubkey", other.path().join("lynx.pub").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("INVALID at signature"));
}

/// Run Debian's chromium headless with `args`; its stdout and the console lines it logged.
fn chromium(args: &[&str]) -> (String, String) {
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

#[test]
fn the_published_record_verifies_and_builds_the_site() {
    let results = repo_path("results");
    let keys = repo_path("results/keys");
    let unverified = common::unverified(Path::new(&results), Path::new(&keys));
    assert!(unverified.is_empty(), "{unverified:?} do not verify against results/keys");
    let envelopes = lynx_publish::shortlist::find_envelopes(&[PathBuf::from(&results)]).unwrap();
    let site = tempfile::tempdir().unwrap();
    let output = lynx(&["report", &results, "--keys", &keys, "--out", site.path().to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = std::fs::read_to_string(site.path().join("index.html")).unwrap();
    assert_eq!(index.matches("class=\"result\"").count(), envelopes.len());
    assert!(!index.contains("class=\"bad\">rejected") && !index.contains("untrusted"), "{index}");
}

/// `run_args` for a node: `--device cpu` replaced by `node` (a device list and its options).
fn node_args<'a>(models: &'a Path, out: &'a Path, node: &[&'a str]) -> Vec<&'a str> {
    let mut args = run_args(models, out);
    let at = args.iter().position(|a| *a == "--device").unwrap();
    args.splice(at..at + 2, node.iter().copied());
    args
}

#[test]
fn all_devices_gives_one_result_per_device_and_a_killed_device_leaves_the_others_whole() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(many_cells);
    let out = tempfile::tempdir().unwrap();
    // Three CPU "devices": the node's device list overridden, one process each. They share this
    // machine's two cores, so they run in turn, each measuring alone as a GPU would (the parallel
    // default is tested below).
    let args = node_args(models.path(), out.path(), &["--devices", "cpu,cpu,cpu", "--one-at-a-time"]);
    let mut parent = lynx_command().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let nodes = out.path().join("nodes");
    let deadline = Instant::now() + Duration::from_secs(120);
    // Wait until the second device's run has journaled a cell.
    let killed_dir = loop {
        assert!(Instant::now() < deadline, "the second device journaled no cell within 120 s");
        assert!(parent.try_wait().unwrap().is_none(), "the node run ended early");
        let node = std::fs::read_dir(&nodes).ok().and_then(|mut d| d.next()).map(|e| e.unwrap().path());
        let second = node.and_then(|n| std::fs::read_to_string(n.join("device-1.run")).ok());
        if let Some(dir) = second.map(|s| PathBuf::from(s.trim())).filter(|d| !journal_of(d).is_empty()) {
            break dir;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Kill the second device's process outright, as a fatal error would.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", parent.id())).unwrap();
    let pids: Vec<i32> = children.split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 1, "one device at a time: {children}");
    // SAFETY: kill takes no pointers.
    unsafe { libc::kill(pids[0], libc::SIGKILL) };
    let output = parent.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let summary_path = stdout.lines().find_map(|l| l.strip_prefix("node summary: ")).expect("a node summary");
    let summary: Value = serde_json::from_slice(&std::fs::read(summary_path).unwrap()).unwrap();
    let runs = summary["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!((&runs[1]["exit"], &runs[1]["status"]), (&Value::from("signal 9"), &Value::from("incomplete")));
    assert_eq!(runs[1]["run_dir"].as_str().unwrap(), killed_dir.to_str().unwrap(), "resumable from the summary");
    for line in String::from_utf8(journal_of(&killed_dir)).unwrap().lines() {
        serde_json::from_str::<Value>(line).expect("the killed run's journal is whole");
    }
    for i in [0, 2] {
        assert_eq!(runs[i]["status"], "complete", "{summary}");
        assert_eq!(runs[i]["exit"], "exit 0", "{summary}");
        let envelope = runs[i]["envelope"].as_str().unwrap();
        let verify = lynx(&["verify", envelope, "--pubkey", &pubkey()]);
        assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    }
    // The two whole results of the same CPU are compared cell by cell.
    let spreads = summary["spreads"].as_array().unwrap();
    assert!(!spreads.is_empty() && spreads.iter().all(|s| s["devices"] == 2), "{summary}");
    assert!(stdout.contains("spread across devices of the same model"), "{stdout}");
}

/// The folder holding kubernetes-validate, installing it once if need be.
fn kvalidate_path() -> String {
    if let Ok(path) = std::env::var("LYNX_KVALIDATE_PYTHONPATH") {
        return path;
    }
    let output = Command::new("bash").arg(repo_path("scripts/kvalidate.sh")).output().unwrap();
    assert!(output.status.success(), "scripts/kvalidate.sh: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[test]
fn the_kubernetes_manifest_validates_against_the_kubernetes_schema() {
    let validate = |file: &str| {
        Command::new(std::env::var("LYNX_PYTHON").unwrap_or_else(|_| "python3".to_owned()))
            .env("PYTHONPATH", kvalidate_path())
            .args(["-m", "kubernetes_validate", "--strict", file])
            .output()
            .unwrap()
    };
    let manifest = repo_path("scripts/kubernetes/lynx-job.yaml");
    let output = validate(&manifest);
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && said.contains("passed"), "{said}");
    // The validator is real: a misspelt field fails it.
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(text.contains("completionMode: Indexed") && text.contains("nvidia.com/gpu"));
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, text.replace("parallelism: 2", "paralelism: 2")).unwrap();
    let output = validate(bad.to_str().unwrap());
    assert!(!output.status.success(), "a misspelt field passed validation");
}

/// Stops the local Slurm cluster's daemons (only those it started) when the test ends.
struct Cluster(PathBuf);

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(repo_path("scripts/slurm/local-cluster.sh")).arg("stop").arg(&self.0).status();
    }
}

#[test]
fn slurm_runs_the_sbatch_template_as_a_job_array_and_every_result_verifies() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // What this test did, for CI's log (scripts/test.sh prints it): ran, or skipped and why.
    let record = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("slurm-test.txt");
    let work = tempfile::tempdir().unwrap();
    let cluster_dir = work.path().join("cluster");
    std::fs::create_dir(&cluster_dir).unwrap();
    let start = Command::new("bash")
        .arg(repo_path("scripts/slurm/local-cluster.sh"))
        .arg("start")
        .arg(&cluster_dir)
        .output()
        .unwrap();
    let _cluster = Cluster(cluster_dir.clone());
    let stderr = String::from_utf8_lossy(&start.stderr).into_owned();
    if start.status.code() == Some(3) {
        let line = format!("slurm test SKIPPED: the daemons cannot start on this machine: {}", stderr.trim());
        eprintln!("{line}");
        std::fs::write(&record, format!("{line}\n")).unwrap();
        return;
    }
    assert!(start.status.success(), "local-cluster.sh start: {stderr}");
    let conf = String::from_utf8(start.stdout).unwrap().trim().to_owned();

    let models = models(str::to_owned);
    let out = work.path().join("results");
    let output = Command::new("sbatch")
        .current_dir(work.path())
        .env("SLURM_CONF", &conf)
        .env("XDG_CONFIG_HOME", config_home())
        .env("LYNX", env!("CARGO_BIN_EXE_lynx"))
        .env("LYNX_OUT", &out)
        .env("LYNX_SUITE", "test")
        .env("LYNX_MODELS_DIR", models.path())
        .args(["--wait", "--array=0-1", "--time=10"])
        .arg(repo_path("scripts/slurm/lynx.sbatch"))
        .output()
        .unwrap();
    let logs: String = std::fs::read_dir(work.path())
        .unwrap()
        .filter_map(|e| {
            let path = e.ok()?.path();
            path.extension().is_some_and(|x| x == "out").then(|| std::fs::read_to_string(path).unwrap_or_default())
        })
        .collect();
    assert!(
        output.status.success(),
        "sbatch: {}{}\n{logs}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let envelopes = lynx_publish::shortlist::find_envelopes(std::slice::from_ref(&out)).unwrap();
    assert_eq!(envelopes.len(), 2, "one result per array task: {envelopes:?}\n{logs}");
    for envelope in &envelopes {
        let verify = lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", &pubkey()]);
        assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));
    }
    let summaries = std::fs::read_dir(out.join("nodes"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"));
    assert_eq!(summaries.count(), 2, "a node summary per task");
    let line =
        format!("slurm test RAN: a 2-task job array on a local slurmctld/slurmd, {} results verified", envelopes.len());
    eprintln!("{line}");
    std::fs::write(&record, format!("{line}\n")).unwrap();
}

#[test]
fn devices_run_in_turn_or_by_default_all_at_once() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(many_cells);
    let runs = |node: &[&str]| {
        let out = tempfile::tempdir().unwrap();
        let output = lynx(&node_args(models.path(), out.path(), node));
        let mut results: Vec<Value> = result_files(out.path())
            .iter()
            .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
            .collect();
        results.sort_by_key(|r| r["started_at"].as_str().unwrap().to_owned());
        (output, results)
    };
    let (output, results) = runs(&["--devices", "cpu,cpu", "--one-at-a-time"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(results.len(), 2);
    // RFC 3339 UTC strings of one format order as times: the second began after the first ended.
    assert!(results[1]["started_at"].as_str() >= results[0]["updated_at"].as_str(), "{results:?}");

    // By default both at once: the second began before the first ended. Two CPU "devices" share
    // two cores, so the checks of the machine's state (equilibrium, coverage, and the roofline,
    // whose ceilings were probed while the other run competed) may fail; each run is still
    // complete and sealed.
    let (output, results) = runs(&["--devices", "cpu,cpu"]);
    assert_eq!(results.len(), 2, "{}", String::from_utf8_lossy(&output.stderr));
    assert!(results[1]["started_at"].as_str() < results[0]["updated_at"].as_str(), "{results:?}");
    for result in &results {
        assert_eq!(result["status"], "complete");
        let failed: Vec<&Value> = result["checks"].as_array().unwrap().iter().filter(|c| c["passed"] != true).collect();
        assert!(
            failed
                .iter()
                .all(|c| ["equilibrium", "telemetry_coverage", "roofline"].contains(&c["name"].as_str().unwrap())),
            "{failed:?}"
        );
    }
}
