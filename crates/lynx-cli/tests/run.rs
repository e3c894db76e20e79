//! `lynx run` end to end through the binary on CPU with real libtorch: the result file and its figures, the signing key, and `lynx devices` and `lynx roofline`.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

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
    assert!(harness.get("test_hooks").is_none(), "no test hook was set: {harness}");
    // No --cpus: lynx bound nothing, and says so.
    assert_eq!(harness["cpu_binding"], serde_json::json!({ "asked": "none" }), "{harness}");
    assert!(!String::from_utf8_lossy(&output.stderr).contains("bound to"));
    assert!(!stdout.contains("test hooks"), "{stdout}");
    assert!(!String::from_utf8_lossy(&output.stderr).contains("test hooks"));
    assert_eq!(result["config"]["sha256"].as_str().unwrap().len(), 64);
    assert_eq!(result["config"]["model"]["name"], "test-small");

    let checks = result["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    // The host has no throttle state: no throttling check is claimed for it.
    assert_eq!(names, ["parity", "equilibrium", "telemetry_coverage", "stability", "roofline"], "{checks:?}");
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
    // How alike its consecutive steps were, over its second half's: at least 100 steps, which
    // this short warm-up may not reach (the unit tests of warmup.rs and lynx-analysis's stats
    // cover the figure itself).
    let (autocorrelation, steps) = (&warmup["step_autocorrelation"], warmup["steps"].as_u64().unwrap());
    match autocorrelation["steps"].as_u64() {
        Some(half) => {
            assert!((100..steps).contains(&half), "{half} of {steps} steps: {warmup}");
            for lag in ["lag_1", "lag_4"] {
                assert!(autocorrelation[lag].as_f64().unwrap().abs() <= 1.0, "{autocorrelation}");
            }
            assert!(seconds(&autocorrelation["median_s"]) > 0.0, "{autocorrelation}");
            assert!(stdout.contains("steps' autocorrelation"), "{stdout}");
        }
        // The second half is by time: where the steps slow through the warm-up it holds fewer
        // than half of them (a fresh clone's run: 209 steps, under 100 in the second half). With
        // 400 or more, the second half would have to run three times slower than the first.
        None => assert!(autocorrelation.is_null() && steps < 400, "{warmup}"),
    }
    // Its step timed again once the sweep was done, as long as a cell (8 steps, 0.3 s at least),
    // against the median of its last window; said in the equilibrium check, not judged.
    let again = &warmup["after_sweep"];
    assert!(again["steps"].as_u64().unwrap() >= 8 && seconds(&again["median_s"]) > 0.0, "{again}");
    let ratio = seconds(&again["ratio"]);
    let equilibrium_median = seconds(&warmup["last_window"]["median_step_s"]);
    assert!((ratio - seconds(&again["median_s"]) / equilibrium_median).abs() < 1e-9, "{warmup}");
    let equilibrium = checks.iter().find(|c| c["name"] == "equilibrium").unwrap();
    let words = format!("its step timed again after the sweep took {ratio:.2}× its equilibrium median");
    assert!(equilibrium["detail"].as_str().unwrap().contains(&words), "{equilibrium}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("lynx: warm-up: {words}")), "{stderr}");

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
            // The context at the last step: the context and every step's token, or the end of
            // the cache's room where the steps used it before min_s and went back to the context.
            let ctx_end = cell["ctx_end"].as_u64().unwrap();
            assert!(512 < ctx_end && ctx_end < 512 + steps, "{cell}");
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
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.extend(["--key", "/no/such/lynx.key"]);
    let line = bad_input(&args);
    assert!(line.contains("/no/such/lynx.key") && line.contains("--unsigned"), "{line}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a run started without its key");

    // Issue 17: a private key its group or others may read is refused, naming the mode and the
    // fix, as ssh refuses one; nothing is measured.
    use std::os::unix::fs::PermissionsExt;
    let keys = tempfile::tempdir().unwrap();
    assert!(lynx(&["keygen", "--out", keys.path().to_str().unwrap()]).status.success());
    let key = keys.path().join("lynx.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut args = run_args(models.path(), out.path());
    args.extend(["--key", key.to_str().unwrap()]);
    let line = bad_input(&args);
    assert!(line.contains("(mode 0644)") && line.contains(&format!("chmod 600 {}", key.display())), "{line}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a run started with an exposed key");
}

/// Nobody reading any more (`lynx run … | head`, a log reader that died) ends nothing: the run
/// goes on to its signed result and the exit code its checks give. Before, the first line
/// printed after the reader left panicked (exit 101) and the run was left incomplete. A command
/// that only prints ends with its own exit code too. Nor does a hangup (SIGHUP), which killed
/// the run.
#[test]
fn a_run_whose_output_nobody_reads_goes_on_to_its_signed_result() {
    use std::process::Stdio;
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(str::to_owned);
    // A run that ended whole: complete, its exit code the one its checks give; its result file.
    let whole = |out: &std::path::Path, status: std::process::ExitStatus| {
        let path = result_file(out);
        let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(result["status"], "complete", "{status:?}");
        let passed = result["checks"].as_array().unwrap().iter().all(|c| c["passed"] == true);
        assert_eq!(status.code(), Some(if passed { 0 } else { 1 }), "{}", result["checks"]);
        path
    };
    let out = tempfile::tempdir().unwrap();
    let mut child = lynx_command()
        .args(run_args(models.path(), out.path()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Both readers gone before lynx prints its first line.
    drop(child.stdout.take());
    drop(child.stderr.take());
    let path = whole(out.path(), child.wait().unwrap());
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    let envelope = path.with_file_name(format!("{stem}.intoto.json"));
    let verify = lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", &pubkey()]);
    assert!(verify.status.success(), "{}", String::from_utf8_lossy(&verify.stdout));

    let mut export = lynx_command()
        .args(["export", envelope.to_str().unwrap(), "--pubkey", &pubkey(), "--format", "csv"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(export.stdout.take());
    let output = export.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));

    // A hangup (the terminal closed) mid-run, to the supervisor and its worker, ends nothing
    // either: the run goes on to its signed result.
    let out = tempfile::tempdir().unwrap();
    let mut child = lynx_command()
        .args(run_args(models.path(), out.path()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let worker = loop {
        assert!(std::time::Instant::now() < deadline, "no worker within 120 s");
        let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", child.id())).unwrap_or_default();
        if let Some(pid) = children.split_whitespace().next() {
            break pid.parse::<i32>().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // SAFETY: kill takes no pointers.
    unsafe {
        libc::kill(worker, libc::SIGHUP);
        libc::kill(child.id() as i32, libc::SIGHUP);
    }
    whole(out.path(), child.wait().unwrap());
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
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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

    // Issue 17: a published lynx.pub is kept even where its lynx.key is gone, unless forced.
    let published = std::fs::read(keys.join("lynx.pub")).unwrap();
    std::fs::remove_file(keys.join("lynx.key")).unwrap();
    let line = bad_input(&["keygen", "--out", keys_arg]);
    assert!(line.contains("lynx.pub exists") && line.contains("--force"), "{line}");
    assert_eq!(std::fs::read(keys.join("lynx.pub")).unwrap(), published, "the public key was overwritten");
    assert!(lynx(&["keygen", "--out", keys_arg, "--force"]).status.success());

    // A public key that is not one is bad input; so is a private key given as the public one.
    let line = bad_input(&["verify", "x.intoto.json", "--pubkey", "/no/such/lynx.pub"]);
    assert!(line.contains("/no/such/lynx.pub"), "{line}");
    let line = bad_input(&["verify", "x.intoto.json", "--pubkey", keys.join("lynx.key").to_str().unwrap()]);
    assert!(line.contains("not a P-256 SPKI public key"), "{line}");
}

#[test]
fn devices_lists_the_cpu_with_its_libtorch() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let output = lynx(&["devices"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let cpu = stdout.lines().find(|l| l.starts_with("cpu ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(cpu.contains("GiB") && cpu.contains("libtorch 2.11.0"), "{cpu}");
    // And what a run here would be allowed of the CPUs, with the host's settings.
    assert!(stdout.lines().any(|l| l.starts_with("host: ") && l.contains(" CPUs, ")), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("host: clock source ")), "{stdout}");
    // Among them the memory policy lynx runs under: the default, as this test starts it.
    assert!(stdout.contains("; memory policy local (the default) on memory nodes "), "{stdout}");
    // And the CPU features libtorch's kernels choose by, read from /proc/cpuinfo.
    let features = stdout.split("; CPU features ").nth(1).unwrap_or_else(|| panic!("{stdout}"));
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags") || l.starts_with("Features")).unwrap();
    let first = features.split_whitespace().next().unwrap();
    assert!(first == "none" || flags.split_whitespace().any(|f| f == first), "{features} against {flags}");

    let output = lynx(&["devices", "--json"]);
    let devices: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(devices[0]["device"], "cpu");
    assert!(devices[0]["memory_bytes"].as_u64().unwrap() > 0);
    // Beside each record, the datasheet lynx holds the device to: said as null for a CPU, so that
    // gpu-check can tell a list from a build that named none.
    assert_eq!(devices[0].get("datasheet"), Some(&Value::Null), "{devices}");
    assert!(String::from_utf8_lossy(&lynx(&["devices"]).stdout).contains(" DATASHEET "));
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

/// `lynx run --plan` plans a run and measures and writes nothing (no run folder, no signing
/// key): every cell of the planned sweep with its predicted step and memory, those that would
/// not fit marked and not counted, the serving phase, and the estimate a run prints as it
/// starts. A suite none of whose cells fits is refused as the run refuses it.
#[test]
fn a_plan_measures_and_writes_nothing() {
    let out = tempfile::tempdir().unwrap();
    let runs = out.path().join("runs");
    let keys = tempfile::tempdir().unwrap();
    let plan = |free: Option<&str>, extra: &[&str]| {
        let mut command = lynx_command();
        command.args([["run", "--plan", "--out", runs.to_str().unwrap()].as_slice(), extra].concat());
        command.env("XDG_CONFIG_HOME", keys.path());
        if let Some(free) = free {
            command.env("LYNX_FREE_MEMORY_BYTES", free);
        }
        command.output().unwrap()
    };
    // The cells a plan lists: (shape, whether it is measured).
    let cells = |stdout: &str| -> Vec<(String, bool)> {
        let table = stdout.split_once("CELL  ").expect("a table of cells").1;
        table
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("prefill") || l.starts_with("decode"))
            .map(|l| (l.split("  ").next().unwrap().to_owned(), l.trim_end().ends_with("  measure")))
            .collect()
    };
    let counted = |stdout: &str| -> usize {
        let estimate = stdout.lines().find(|l| l.starts_with("estimated wall time about ")).expect("an estimate");
        let before = estimate.split(" cells; ").next().unwrap();
        before.rsplit(' ').next().unwrap().parse().unwrap()
    };

    let output = plan(None, &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.starts_with("plan: suite cpu: lynx-ref-small ("), "{stdout}");
    assert!(stdout.contains("nothing is measured or written"), "{stdout}");
    assert!(stdout.contains("free beside the weights: ") && stdout.contains("less the weights'"), "{stdout}");
    assert!(stdout.contains("\nweights: drawn from the seed "), "{stdout}");
    let all = cells(&stdout);
    assert!(all.len() > 20 && all.iter().all(|(_, measured)| *measured), "{stdout}");
    assert_eq!(counted(&stdout), all.len(), "{stdout}");
    assert!(stdout.contains("serving short under the server bound: bounded "), "{stdout}");
    assert!(!runs.exists(), "a plan made the run folder");
    assert!(std::fs::read_dir(keys.path()).unwrap().next().is_none(), "a plan made a signing key");

    // With less free memory than the largest cells need, those are marked and not counted.
    let output = plan(Some("60000000"), &[]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let some = cells(&stdout);
    let measured = some.iter().filter(|(_, measured)| *measured).count();
    assert!(measured > 0 && measured < some.len(), "{stdout}");
    assert_eq!(counted(&stdout), measured, "{stdout}");
    assert!(stdout.contains("skip: it needs an estimated "), "{stdout}");
    assert!(stdout.contains("free beside the weights: 0.06 GiB (stated by LYNX_FREE_MEMORY_BYTES)"), "{stdout}");

    // None fits: refused as the run refuses it, in one line, and nothing written.
    let output = plan(Some("100"), &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("suite cpu: no cell fits on cpu beside the weights of lynx-ref-small"), "{stderr}");
    assert!(output.stdout.is_empty() && !runs.exists());

    // An --out the run could not write into is refused as the run refuses it.
    let file = out.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let line = bad_input(&["run", "--plan", "--out", file.to_str().unwrap()]);
    assert!(line.contains(&format!("--out {}: is not a folder", file.display())), "{line}");

    // A node's plan is each device's: here the CPU, planned once for each time it is named.
    let output = plan(None, &["--devices", "cpu,cpu", "--one-at-a-time"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.matches("plan: suite cpu: ").count(), 2, "{stdout}");
    assert!(stdout.contains("\nnode: 2 device(s), one after another, the sum of their estimates: about "), "{stdout}");
    assert!(!runs.exists(), "a node's plan made the run folder");

    // As JSON: the same cells, each predicted step and memory, and the node's estimate.
    let output = plan(Some("60000000"), &["--json", "--devices", "cpu,cpu"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let first = &json["plans"][0];
    let rows = first["cells"].as_array().unwrap();
    assert_eq!(rows.len(), some.len());
    assert_eq!(first["estimate"]["cells"], measured);
    assert_eq!(rows.iter().filter(|r| r["skipped"].is_null()).count(), measured);
    assert!(rows
        .iter()
        .all(|r| r["predicted_step_s"].as_f64().unwrap() > 0.0 && r["memory_bytes"].as_u64().unwrap() > 0));
    assert_eq!(first["free_beside_weights"]["bytes"], 60000000);
    assert!(first["predicted"].as_str().unwrap().starts_with("a host CPU assumed to reach"), "{first}");
    let total = first["estimate"]["total_s"].as_f64().unwrap();
    assert_eq!(json["node"]["devices"], 2);
    assert_eq!(json["node"]["estimated_s"].as_f64().unwrap(), total, "at once, the longest device's");
    assert!(!runs.exists(), "a plan made the run folder");
}

/// `lynx run --plan --plan-as DATASHEET` plans for a device that is not here from lynx's
/// datasheet for it: its memory (less the weights) for the cells, its rates for the steps, graph
/// cells beside eager ones, and the line that says it is planned; a datasheet lynx lacks, a
/// device of the other kind and a plan-as without --plan are refused in one line.
#[test]
fn a_plan_for_a_device_not_here_takes_its_datasheet() {
    let out = tempfile::tempdir().unwrap();
    let runs = out.path().join("runs");
    let plan = |extra: &[&str]| {
        let output = lynx(&[["run", "--plan", "--out", runs.to_str().unwrap()].as_slice(), extra].concat());
        assert!(output.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let stdout = plan(&["--plan-as", "h100 80gb hbm3", "--suite", "gpu-check-llama-bf16"]);
    assert!(stdout.starts_with("plan: suite gpu-check-llama-bf16: llama-3.1-8b ("), "{stdout}");
    assert!(stdout.contains(" at bf16 on cuda:0 (NVIDIA H100 80GB HBM3); nothing is measured"), "{stdout}");
    assert!(stdout.contains("\nplanned from lynx's H100 80GB HBM3 datasheet (3.35 TB/s, 989 dense bf16 TFLOP/s, 80 GB): the device is not here"), "{stdout}");
    // 80 GiB less Llama 3.1 8B's 14.96 GiB of bf16 weights.
    assert!(
        stdout.contains("free beside the weights: 65.04 GiB (the datasheet's memory, less the weights' 14.96 GiB)"),
        "{stdout}"
    );
    assert!(stdout.contains("decode steps: eager and graph"), "{stdout}");
    assert!(stdout.contains("\ndecode batch 1 ctx 1024 graph  "), "graph cells planned: {stdout}");
    assert!(stdout.contains("from the H100 80GB HBM3 datasheet: 3.35 TB/s at 85%"), "{stdout}");
    // An AMD datasheet is a ROCm device; --device names which.
    let stdout = plan(&["--plan-as", "MI300X", "--device", "rocm:3", "--suite", "gpu-check-moe"]);
    assert!(stdout.contains(" on rocm:3 (AMD Instinct MI300X)"), "{stdout}");
    // The standard suite's largest decode batches do not fit beside the weights on an H200, and
    // are planned as skipped with both figures.
    let stdout = plan(&["--plan-as", "H200"]);
    assert!(stdout.contains("plan: suite standard: "), "{stdout}");
    assert!(stdout.contains("skip: it needs an estimated ") && stdout.contains("126.04 GiB free"), "{stdout}");
    let json: Value = serde_json::from_str(&plan(&["--plan-as", "B200", "--json"])).unwrap();
    assert_eq!(json["plans"][0]["planned_from_datasheet"], "B200");
    assert_eq!(json["plans"][0]["device_name"], "NVIDIA B200");
    assert_eq!(json["plans"][0]["graphs"], true);
    assert!(!runs.exists(), "a plan made the run folder");

    let line = bad_input(&["run", "--plan", "--plan-as", "A100"]);
    assert!(
        line.contains(
            "lynx has no datasheet named \"A100\"; it has H100 80GB HBM3, H100 PCIe, H200, B200, MI300X, MI355X"
        ),
        "{line}"
    );
    // A name that could mean two datasheets names both; a device's slug names its own.
    let line = bad_input(&["run", "--plan", "--plan-as", "h100"]);
    assert!(line.contains("\"h100\" could mean any of H100 80GB HBM3, H100 PCIe: name one"), "{line}");
    let json: Value = serde_json::from_str(&plan(&["--plan-as", "nvidia-h100-pcie", "--json"])).unwrap();
    assert_eq!(json["plans"][0]["planned_from_datasheet"], "H100 PCIe");
    let line = bad_input(&["run", "--plan", "--plan-as", "H200", "--device", "rocm:0"]);
    assert!(line.contains("--plan-as H200: the NVIDIA H200 is named cuda:N, not rocm:0"), "{line}");
    let line = bad_input(&["run", "--plan-as", "H200"]);
    assert!(line.contains("--plan"), "{line}");
}

/// Regression (issue 15): a cell whose estimated memory exceeds the device's free memory is
/// recorded as skipped with both figures, never allocated, and ends its batch ladder as out of
/// memory would. The free memory is stated, so the planner is tested on any host.
#[test]
fn a_cell_that_cannot_fit_is_skipped_with_both_figures_and_ends_its_ladder() {
    use lynx_analysis::memory::{cell_memory, decode_capacity};
    use lynx_schema::config::{ModelShape, Precision};
    use lynx_schema::result::CellShape;
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let shape = ModelShape::from_toml(&fixture("models/test-small.toml"), "test-small").unwrap();
    let need = |batch| {
        let cell = CellShape::decode(batch, 512);
        cell_memory(&shape, Precision::Fp32, cell, decode_capacity(512, 8)).total_bytes()
    };
    let free = (need(1) + need(8)) / 2;
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    // Its plan says so before anything runs.
    let planned = lynx_command()
        .args([run_args(models.path(), out.path()).as_slice(), &["--plan"]].concat())
        .env("LYNX_FREE_MEMORY_BYTES", free.to_string())
        .output()
        .unwrap();
    let plan = String::from_utf8_lossy(&planned.stdout);
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let row = plan.lines().find(|l| l.starts_with("decode batch 8 ctx 512 ")).expect("the cell is planned");
    assert!(row.contains("skip: it needs an estimated"), "{plan}");
    assert!(plan.lines().any(|l| l.starts_with("decode batch 1 ctx 512 ") && l.ends_with("  measure")), "{plan}");
    let output = lynx_command()
        .args(run_args(models.path(), out.path()))
        .env("LYNX_FREE_MEMORY_BYTES", free.to_string())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("decode batch 8 ctx 512: does not fit: needs an estimated"), "{stdout}");
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let cells = result["cells"].as_array().unwrap();
    let decode = |batch: u64| cells.iter().find(|c| c["step"] == "decode" && c["batch"] == batch).unwrap();
    assert_eq!(decode(1)["status"], "ok");
    let skipped = decode(8);
    assert_eq!(skipped["status"], "skipped", "{skipped}");
    assert_eq!(skipped["needed_bytes"], need(8));
    assert_eq!(skipped["free_bytes"], free);
    assert!(skipped["message"].as_str().unwrap().ends_with("free (stated by LYNX_FREE_MEMORY_BYTES)"), "{skipped}");
    assert!(skipped["step_time"].is_null());
    let ends: Vec<&str> =
        result["derived"]["sweep"].as_array().unwrap().iter().map(|l| l["end"].as_str().unwrap()).collect();
    assert!(ends.contains(&"does not fit at batch 8"), "{ends:?}");
    // Warm-up looped no step the sweep skipped: the largest batch that fits at that context.
    let fitting = [8, 4, 2, 1].into_iter().find(|&batch| need(batch) <= free).unwrap();
    assert_eq!(
        (fitting, &result["warmup"]["batch"], &result["warmup"]["ctx"]),
        (4, &Value::from(4), &Value::from(512))
    );
}

/// Issue 15: where graph parity passed, each decode context is climbed eager and as a graph; a
/// graph cell records its mode and the padded keys its steps attend (its roofline counts them);
/// the derived figures use the faster mode at each shape and say so; the summary, the result
/// and the CSV export show both modes side by side. A CPU has no graphs, so the test hook's
/// stand-in (each replay issues the step again) drives the same path, and the result says so.
#[test]
fn graph_cells_are_measured_beside_eager_ones_once_graph_parity_passed() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let output =
        lynx_command().args(run_args(models.path(), out.path())).env("LYNX_TEST_GRAPHS", "reissue").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("decode batch 8 ctx 512 graph"), "{stdout}");
    // Before it starts, the run says how long it expects to take, and on what that rests; and
    // that it was started with a test hook set.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let hooks = "lynx: warning: test hooks set (LYNX_TEST_GRAPHS=reissue): this run's figures will describe a test, \
                 not the device; its result records the hooks, and lynx shortlist and lynx collect will not take it";
    assert_eq!(stderr.lines().filter(|l| *l == hooks).count(), 1, "{stderr}");
    let estimate = stderr
        .lines()
        .find(|l| l.starts_with("lynx: estimated wall time about "))
        .unwrap_or_else(|| panic!("{stderr}"));
    // Two prefill cells, and each decode batch eager and as a graph.
    assert!(estimate.contains(", 6 cells;") && estimate.contains("a host CPU assumed"), "{estimate}");
    // Made again once the burst probes have measured the CPU's ceilings.
    let again = stderr
        .lines()
        .find(|l| l.starts_with("lynx: after the probes, estimated wall time about "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(again.contains(", 6 cells;") && again.contains("from this device's measured ceilings: "), "{again}");
    // The test suite decodes its 256/64 workload at 256..319 tokens and measures 512 only.
    assert!(
        stderr.contains(
            "lynx: warning: workload chat: its decode contexts from 256 tokens are shorter than the shortest \
             decode context measured (512)"
        ),
        "{stderr}"
    );
    assert!(stdout.contains("eager against graph") && stdout.contains("EAGER/GRAPH"), "{stdout}");
    assert!(stdout.contains("check graph_parity passed"), "{stdout}");

    let path = result_file(out.path());
    let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(result["status"], "complete");
    let graphs = result["harness"]["graphs"]["unavailable"].as_str().unwrap();
    assert!(graphs.contains("simulated by LYNX_TEST_GRAPHS"), "{graphs}");
    let check = result["checks"].as_array().unwrap().iter().find(|c| c["name"] == "graph_parity").unwrap();
    assert_eq!(check["passed"], true, "{check}");
    assert!(check["measured"].as_f64().unwrap() <= check["limit"].as_f64().unwrap(), "{check}");

    let cells = result["cells"].as_array().unwrap();
    let decode = |batch: u64, mode: &str| {
        cells
            .iter()
            .find(|c| {
                c["step"] == "decode"
                    && c["batch"] == batch
                    && c.get("mode").map_or("eager", |m| m.as_str().unwrap()) == mode
            })
            .unwrap_or_else(|| panic!("no {mode} decode cell at batch {batch}: {cells:?}"))
    };
    for batch in [1, 8] {
        let (eager, graph) = (decode(batch, "eager"), decode(batch, "graph"));
        assert!(eager.get("mode").is_none() && eager.get("attended").is_none(), "{eager}");
        assert_eq!((&graph["status"], &graph["mode"]), (&Value::from("ok"), &Value::from("graph")), "{graph}");
        let steps = graph["step_time"]["n"].as_u64().unwrap();
        let attended = graph["attended"].as_u64().unwrap();
        // The cache holds the context, two untimed steps and the room for the timed ones; the
        // last step's context is the context and every step's token, or the room's end where the
        // steps used the room before min_s and went back to the context.
        let ctx_end = graph["ctx_end"].as_u64().unwrap();
        assert!(attended >= ctx_end + 3, "{graph}");
        assert!(ctx_end == 512 + steps - 1 || (ctx_end == attended - 3 && ctx_end < 512 + steps - 1), "{graph}");
        // Work per step from the roofline figures: the padded graph step counts more bytes.
        let bytes =
            |cell: &Value| seconds(&cell["roofline"]["achieved_bytes_per_s"]) * seconds(&cell["step_time"]["median_s"]);
        assert!(bytes(graph) > bytes(eager), "graph {} bytes against eager {}", bytes(graph), bytes(eager));
    }

    let derived = &result["derived"];
    let pairs = derived["eager_graph"].as_array().unwrap();
    assert_eq!(pairs.len(), 2, "{pairs:?}");
    for pair in pairs {
        let ratio = pair["eager_over_graph"].as_f64().unwrap();
        let expected = pair["eager_step_s"].as_f64().unwrap() / pair["graph_step_s"].as_f64().unwrap();
        assert!((ratio - expected).abs() < 1e-9, "{pair}");
    }
    assert!(derived["decode_modes"].as_str().unwrap().contains("faster passing mode"), "{derived}");
    // Each frontier point is the faster of the two cells at its shape.
    for line in derived["frontier"].as_array().unwrap() {
        for point in line["points"].as_array().unwrap() {
            let batch = point["batch"].as_u64().unwrap();
            let median = |mode| decode(batch, mode)["step_time"]["median_s"].as_f64().unwrap();
            let faster = if median("graph") < median("eager") { "graph" } else { "eager" };
            assert_eq!(point.get("mode").map_or("eager", |m| m.as_str().unwrap()), faster, "{point}");
        }
    }
    let modes: Vec<&str> =
        derived["sweep"].as_array().unwrap().iter().filter_map(|l| l.get("mode")?.as_str()).collect();
    assert_eq!(modes, ["graph"], "one graph line, at ctx 512");

    let envelope = path.with_extension("intoto.json");
    let export = lynx(&["export", envelope.to_str().unwrap(), "--pubkey", &pubkey(), "--format", "csv"]);
    assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
    let csv = String::from_utf8(export.stdout).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let graph_rows = csv.lines().skip(1).filter(|l| l.split(',').nth(column("mode")) == Some("graph")).count();
    assert_eq!(graph_rows, 2, "{csv}");
}

/// Issue 16: a suite with `[serve]` ends with a real serving loop on the device at the
/// simulation's latency-bounded rate and 20% above it, for a request-length mix. The result
/// records each rate measured beside the simulation at the same rate, the drawn lengths, the
/// loop's own time and the window's energy; the latency-bounded figure it publishes is the
/// measured one, with the simulated one beside it; the `simulation` and `serving_overhead`
/// checks judge them, and the run exits as its checks say.
#[test]
fn a_serving_phase_measures_the_simulations_rates_on_the_device() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| {
        suite.replace(
            "[roofline]",
            "[[workload]]\nname = \"mix\"\nisl = { uniform = [8, 48] }\nosl = { range_ratio = 0.5, length = 12 }\n\n\
             [[bound]]\nname = \"loose\"\nttft_p99_s = 4.0\ntpot_p99_s = 0.5\n\n\
             [serve]\nrequests = 128\nworkloads = [\"mix\"]\nmax_s = 60.0\n\n[roofline]",
        )
    });
    let out = tempfile::tempdir().unwrap();
    let output = lynx(&run_args(models.path(), out.path()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("serving mix 8-48/0.5-1×12 under the loose bound at"), "{stderr}");
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    assert_eq!(result["status"], "complete", "{stderr}");
    let served = &result["serving"]["served"];
    assert_eq!(served.as_array().unwrap().len(), 1, "one workload under one bound: {served}");
    let served = &served[0];
    assert_eq!((&served["workload"]["name"], &served["bound"]["name"]), (&Value::from("mix"), &Value::from("loose")));
    let (isl, osl) = (&served["isl"], &served["osl"]);
    assert!(isl["min"].as_u64().unwrap() >= 8 && isl["max"].as_u64().unwrap() <= 48, "{isl}");
    assert!(osl["min"].as_u64().unwrap() >= 6 && osl["max"].as_u64().unwrap() <= 12, "{osl}");
    assert!(seconds(&isl["p50"]) <= seconds(&isl["p99"]), "{isl}");
    let rates = served["rates"].as_array().unwrap_or_else(|| panic!("{served}"));
    let labels: Vec<&str> = rates.iter().map(|r| r["label"].as_str().unwrap()).collect();
    // Then, while the measured p99s break the bound at the simulation's latency-bounded rate and
    // every rate under it so far, one rate under it (0.9×).
    assert_eq!(labels[..2], ["bounded", "over"]);
    stepped_down_while_the_bound_broke(rates);
    let bounded = &result["derived"]["latency_bounded"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["workload"]["name"] == "mix")
        .unwrap()
        .clone();
    let rate = |r: &Value| seconds(&r["rate_per_s"]);
    assert!((rate(&rates[0]) - seconds(&bounded["point"]["request_rate_per_s"])).abs() < 1e-12, "{bounded}");
    // The simulated point beside the measurement models the server that measured it.
    assert_eq!(bounded["point"]["decode_steps"], "eager", "{bounded}");
    assert!((rate(&rates[1]) / rate(&rates[0]) - 1.2).abs() < 1e-9);
    for r in rates {
        assert_eq!(r["requests"], 128, "{r}");
        // Beside the window, the steady state at its rate: the search's requests, simulated.
        assert_eq!(r["steady"]["requests"], bounded["point"]["requests"], "{r}");
        let steady = &r["steady"]["simulated"];
        assert_eq!(
            r["steady"]["within_bound"],
            seconds(&steady["ttft_p99_s"]) <= 4.0 && seconds(&steady["tpot_p99_s"]) <= 0.5
        );
        let (measured, simulated) = (&r["measured"], &r["simulated"]);
        assert!(seconds(&measured["ttft_p50_s"]) <= seconds(&measured["ttft_p99_s"]), "{r}");
        assert!(seconds(&measured["tpot_p50_s"]) > 0.0 && seconds(&simulated["tpot_p50_s"]) > 0.0, "{r}");
        // Output tokens over the window: the requests' tokens over the span they were served in.
        let tokens = seconds(&measured["output_tok_per_s_per_device"]) * seconds(&r["window_s"]);
        assert!(tokens > 128.0 * 6.0 * 0.9 && tokens < 128.0 * 12.0 * 1.1, "{r}");
        // And over its steady part (between the server's fill and the last arrival), measured and
        // simulated alike: a figure, or why the window had none.
        for figures in [measured, simulated] {
            let steady = &figures["steady_output_tok_per_s_per_device"];
            assert!(
                steady.as_f64().is_some_and(|tok| tok > 0.0)
                    || steady["unavailable"].as_str().is_some_and(|why| why.starts_with("no steady part: ")),
                "{r}"
            );
        }
        let error = &r["relative_error"];
        let expected = seconds(&measured["tpot_p99_s"]) / seconds(&simulated["tpot_p99_s"]) - 1.0;
        assert!((error["tpot_p99"].as_f64().unwrap() - expected).abs() < 1e-9, "{r}");
        // The simulated figures are medians over 101 draws of the steps, their p99s' spread
        // between its 10th and 90th percentiles.
        let draws = &r["simulated_draws"];
        assert_eq!(draws["draws"], 101, "{r}");
        for figure in ["ttft_p99_s", "tpot_p99_s"] {
            let range: Vec<f64> = draws[figure].as_array().unwrap().iter().map(seconds).collect();
            assert!(range[0] <= seconds(&simulated[figure]) && seconds(&simulated[figure]) <= range[1], "{r}");
        }
        // And the simulation again fed the loop's own steps, the measurement against it.
        assert!(r.get("at_loop_pace").is_none(), "{r}");
        let paced = &r["at_loop_steps"];
        let expected = seconds(&measured["ttft_p99_s"]) / seconds(&paced["simulated"]["ttft_p99_s"]) - 1.0;
        assert!((paced["relative_error"]["ttft_p99"].as_f64().unwrap() - expected).abs() < 1e-9, "{r}");
        // And replaying them in the order they ran: one simulation, the measurement against it.
        let replayed = &r["at_loop_replay"];
        let expected = seconds(&measured["ttft_p99_s"]) / seconds(&replayed["simulated"]["ttft_p99_s"]) - 1.0;
        assert!((replayed["relative_error"]["ttft_p99"].as_f64().unwrap() - expected).abs() < 1e-9, "{r}");
        // And how the loop's decode steps spread against their cells': at their 90th percentile,
        // at or above their median ratio, beside the cells' own (at least their median).
        let spread = &r["decode_step_spread"];
        assert!(seconds(&spread["loop_p90"]) >= seconds(&r["decode_step_ratio"]) * (1.0 - 1e-12), "{r}");
        assert!(seconds(&spread["cells_p90"]) >= 1.0, "{r}");
        // And the loop's slow steps of each kind against their tables, with what its thread did:
        // never more time on its CPU and waiting to run together than the steps' wall time.
        for kind in ["decode_slow_steps", "prefill_slow_steps"] {
            let slow = &r[kind];
            assert!(slow["steps"].as_u64().unwrap() >= 2 && slow["slow"].as_u64() <= slow["steps"].as_u64(), "{r}");
            let thread = &slow["thread"];
            for part in ["slow", "others"] {
                let (cpu, wall) =
                    (seconds(&thread[format!("{part}_cpu_s")]), seconds(&thread[format!("{part}_wall_s")]));
                let waited = thread[format!("{part}_runnable_s")].as_f64().filter(|w| *w >= 0.0);
                let waited = waited.unwrap_or_else(|| panic!("{kind} {part}: {r}"));
                assert!(cpu + waited <= wall + 1e-6 * slow["steps"].as_f64().unwrap(), "{kind} {part}: {r}");
            }
        }
        // And the warm-up's step timed again once the window was over, as after the sweep (as
        // long as a cell, against the warm-up's equilibrium median), said as the rate ends.
        let again = &r["pace_after"];
        assert!(again["steps"].as_u64().unwrap() >= 8 && seconds(&again["median_s"]) > 0.0, "{r}");
        let ratio = seconds(&again["ratio"]);
        let equilibrium_median = seconds(&result["warmup"]["last_window"]["median_step_s"]);
        assert!((ratio - seconds(&again["median_s"]) / equilibrium_median).abs() < 1e-9, "{r}");
        let words = format!("the warm-up's step timed again after the window took {ratio:.2}× its equilibrium median");
        assert!(stderr.contains(&words), "{stderr}");
        // Then the measured prefill cell nearest the loop's prefill steps, as long as a cell,
        // against the prefill table there.
        let again = &r["prefill_after"];
        let (batch, prompt_len) = (&again["batch"], &again["prompt_len"]);
        let cells = result["cells"].as_array().unwrap();
        let that_cell = |c: &Value| {
            c["step"] == "prefill" && c["status"] == "ok" && &c["batch"] == batch && &c["prompt_len"] == prompt_len
        };
        assert!(cells.iter().any(that_cell), "a measured prefill cell: {again}");
        assert!(again["steps"].as_u64().unwrap() >= 5 && seconds(&again["median_s"]) > 0.0, "{r}");
        let ratio = seconds(&again["ratio"]);
        let words = format!(
            "the prefill cell at batch {batch}, prompt {prompt_len}, timed again after the window, took {ratio:.2}× the table"
        );
        assert!(stderr.contains(&words), "{stderr}");
        let overhead: Vec<f64> = r["overhead_s"].as_array().unwrap().iter().map(seconds).collect();
        assert!(overhead[0] <= overhead[1] && overhead[1] <= overhead[2], "{r}");
        assert!(r["iterations"].as_u64().unwrap() >= 128, "{r}");
        assert!(r["decode_step_ratio"].as_f64().unwrap() > 0.0, "{r}");
        // The first request arrives after the loop starts: its steps, at least, follow an idle gap.
        assert!(r["decode_step_ratio_after_idle"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["prefill_step_ratio_after_idle"].as_f64().unwrap() > 0.0, "{r}");
        // Arrivals during decode steps are prefilled after one: that ratio is there, and said.
        let after_decode = r["prefill_step_ratio_after_decode"].as_f64().unwrap_or_else(|| panic!("{r}"));
        assert!(stderr.contains(&format!("after a decode step {after_decode:.2}× their tables")), "{stderr}");
        // Linux's /proc says how busy other processes kept the host while the rate was served
        // (128 requests take over half a second here; /proc's ticks cannot tell under 0.2 s).
        assert!(seconds(&r["window_s"]) < 0.2 || r["other_cpu_cores"].as_f64().is_some_and(|c| c >= 0.0), "{r}");
        // Of them, what a hypervisor stole (this host is a virtual machine; none stolen is 0).
        assert!(seconds(&r["window_s"]) < 0.2 || r["stolen_cpu_cores"].as_f64().is_some_and(|c| c >= 0.0), "{r}");
        eprintln!(
            "served window {} s, other processes {} cores, stolen {}",
            r["window_s"], r["other_cpu_cores"], r["stolen_cpu_cores"]
        );
        assert!(r["joules_per_output_token"].is_object() || r["joules_per_output_token"].is_number(), "{r}");
        assert_eq!(
            r["within_bound"],
            seconds(&measured["ttft_p99_s"]) <= 4.0 && seconds(&measured["tpot_p99_s"]) <= 0.5
        );
    }
    // The published latency-bounded figure is the measured one, the simulated one beside it,
    // with the batch cap of the server that measured it; its steps ran eagerly (a CPU).
    let measured = &bounded["measured"];
    assert_eq!(measured["max_batch"], served["max_batch"], "{bounded}");
    assert!(measured.get("mode").is_none(), "{bounded}");
    let published = published_rate(rates);
    assert_eq!(measured["output_tok_per_s_per_device"], published["measured"]["output_tok_per_s_per_device"]);
    assert_eq!(
        measured["steady_output_tok_per_s_per_device"],
        published["measured"]["steady_output_tok_per_s_per_device"]
    );
    assert!(stdout.contains("STEADY PART: TOK/S is over the whole window"), "{stdout}");
    assert_eq!(measured["within_bound"], published["within_bound"], "{bounded}");
    // Over how many requests each was made: the window's, and the search's steady state.
    assert_eq!(measured["requests"], published["requests"], "{bounded}");
    assert!(stdout.contains("serving phase (measured at") && stdout.contains("P99 TTFT MEASURED/SIM"), "{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains("mix 8-48/0.5-1×12") && l.contains(" loose ")).collect();
    assert!(
        rows.iter().any(|l| l.contains(" measured over 128 requests"))
            && rows.iter().any(|l| l.contains(&format!(" simulated over {} requests ", bounded["point"]["requests"]))),
        "{stdout}"
    );
    let checks = result["checks"].as_array().unwrap();
    let check = |name: &str| checks.iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("{checks:?}"));
    assert!(check("simulation")["limit"].as_f64() == Some(0.15), "{checks:?}");
    assert!(check("serving_overhead")["limit"].as_f64() == Some(1e-3), "{checks:?}");
    assert_eq!(output.status.success(), checks.iter().all(|c| c["passed"] == true), "{stderr}");

    // Beside the result, each rate served request by request and step by step: the requests
    // the figures were computed from, in arrival order, and every step with the table's time
    // for it (a diagnostic, for working out offline why the loop and the simulation differ).
    let path = result_file(out.path()).with_extension("served.jsonl");
    let traces: Vec<Value> = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(traces.len(), rates.len(), "a line a rate served");
    for (trace, rate) in traces.iter().zip(rates) {
        assert_eq!(
            (&trace["workload"], &trace["bound"], &trace["label"]),
            (&Value::from("mix"), &Value::from("loose"), &rate["label"])
        );
        assert_eq!(trace["rate_per_s"], rate["rate_per_s"]);
        let requests = trace["requests"].as_array().unwrap();
        assert_eq!(requests.len(), 128);
        let mut arrival = 0.0;
        for request in requests {
            let (at, first, last) = (
                request["arrival_s"].as_f64().unwrap(),
                seconds(&request["first_token_s"]),
                seconds(&request["finish_s"]),
            );
            assert!(arrival <= at && at < first && first <= last, "{request}");
            arrival = at;
            let (isl, osl) = (request["isl"].as_u64().unwrap(), request["osl"].as_u64().unwrap());
            assert!((8..=48).contains(&isl) && (6..=12).contains(&osl), "{request}");
        }
        // The rate's measured figures are these requests': its p99s over those after the first
        // tenth (numpy's default percentile), its throughput over all of them, from the first
        // arrival to the last token.
        let quantile = |mut xs: Vec<f64>, q: f64| {
            xs.sort_by(f64::total_cmp);
            let rank = q * (xs.len() - 1) as f64;
            let (below, above) = (rank.floor() as usize, rank.ceil() as usize);
            xs[below] + (xs[above] - xs[below]) * (rank - below as f64)
        };
        let times = |r: &Value| {
            let osl = r["osl"].as_f64().unwrap();
            let at = r["arrival_s"].as_f64().unwrap();
            let (first, last) = (seconds(&r["first_token_s"]), seconds(&r["finish_s"]));
            (first - at, (osl > 1.0).then(|| (last - first) / (osl - 1.0)), last, osl)
        };
        let judged: Vec<_> = requests[requests.len() / 10..].iter().map(times).collect();
        let ttft = quantile(judged.iter().map(|t| t.0).collect(), 0.99);
        let tpot = quantile(judged.iter().filter_map(|t| t.1).collect(), 0.99);
        let last = requests.iter().map(|r| times(r).2).fold(0.0, f64::max);
        let tok_per_s =
            requests.iter().map(|r| times(r).3).sum::<f64>() / (last - requests[0]["arrival_s"].as_f64().unwrap());
        let measured = &rate["measured"];
        for (figure, from_trace) in
            [("ttft_p99_s", ttft), ("tpot_p99_s", tpot), ("output_tok_per_s_per_device", tok_per_s)]
        {
            let recorded = seconds(&measured[figure]);
            assert!((recorded / from_trace - 1.0).abs() < 1e-9, "{figure}: {recorded}, the trace's {from_trace}");
        }
        let steps = trace["steps"].as_array().unwrap();
        let prefill = steps.iter().filter(|s| s["prefill"] == true).count();
        assert!(prefill > 0 && prefill < steps.len(), "prefill and decode steps");
        // Each step starts on the arrivals' clock after the one before it ended, and the first
        // once the first request has arrived.
        let mut free_at = requests[0]["arrival_s"].as_f64().unwrap();
        for step in steps {
            assert!(seconds(&step["step_s"]) > 0.0 && seconds(&step["table_s"]) > 0.0, "{step}");
            assert!(step["batch"].as_u64().unwrap() >= 1 && step["len"].as_u64().unwrap() >= 1, "{step}");
            let start = seconds(&step["start_s"]);
            assert!(start >= free_at - 1e-9, "{step} starts before {free_at}");
            free_at = start + seconds(&step["step_s"]);
            // What the loop's thread did during it, as the kernel accounts for it: on its CPU and
            // waiting to run, within the step's wall time.
            let cpu = step["thread_cpu_s"].as_f64().filter(|c| *c >= 0.0).unwrap_or_else(|| panic!("{step}"));
            let waited = step["thread_runnable_s"].as_f64().filter(|w| *w >= 0.0).unwrap_or_else(|| panic!("{step}"));
            assert!(cpu + waited <= seconds(&step["step_s"]) + 1e-6, "{step}");
            assert!(step["voluntary_switches"].is_u64() && step["involuntary_switches"].is_u64(), "{step}");
        }
        // The rate's slow steps are judged over the same steps: each kind's with a table time.
        let rate_steps = |prefill: bool| steps.iter().filter(|s| s["prefill"] == prefill).count() as u64;
        assert_eq!(rate["decode_slow_steps"]["steps"].as_u64(), Some(rate_steps(false)), "{rate}");
        assert_eq!(rate["prefill_slow_steps"]["steps"].as_u64(), Some(rate_steps(true)), "{rate}");
        // Every output token but each request's first comes from a decode step.
        let tokens: u64 = steps.iter().filter(|s| s["prefill"] == false).map(|s| s["batch"].as_u64().unwrap()).sum();
        let decoded: u64 = requests.iter().map(|r| r["osl"].as_u64().unwrap() - 1).sum();
        assert!(tokens >= decoded, "{tokens} sequence steps decoded {decoded} tokens");
    }
}

/// Issue 16: 20% above the latency-bounded rate the measured p99s cross the bound where the
/// steady state's simulation crosses it, once the window is long enough to show it:
/// `serve.most_requests` grows the window from 20 requests, doubling, until its simulation
/// breaks the bound there by more than the check's agreement and holds it at the
/// latency-bounded rate. Each rate served holds its steady state (the simulation at that rate of
/// the search's 2000 requests), the latency-bounded rate's the search's own figures. A tight
/// TTFT bound: a queue that grows shows within a few hundred of the small model's requests; a
/// decode line at 24 tokens, where the short requests decode (charged the 512-token line's
/// steps, the simulation's server is slower than the loop's, and the crossing it predicts
/// lies further above the loop's).
///
/// The crossing is the claim of a loop whose steps run at their cells' pace. On a shared host
/// they do not: three runs of this suite, one after another, found the latency-bounded rate at
/// 122 to 204 requests/s, and CI's run at d6c0d9c measured the loop's steps at the rate above at
/// 0.82, 0.75 and 0.89× their cells in three tries, the last holding the bound at 0.248 s (its
/// simulation fed the loop's own steps held it too, at 0.217 s). So the test hook
/// `LYNX_TEST_CELL_PACE` holds each of the loop's steps to at least its table's time, as a
/// device that keeps its cells' pace would (steps slower than their cells only make the
/// crossing surer); what is tested is the window, the real loop's queue and the judgement.
#[test]
fn the_rate_above_the_bound_crosses_it_in_a_window_long_enough_to_show_it() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (stdout, result) =
        serve_short_with(("tight", 0.25, 0.5), ("most_requests = 5000", "[24, 512]"), ("LYNX_TEST_CELL_PACE", "1"));
    // The result says it was made with the hook, and so does its summary.
    assert_eq!(result["harness"]["test_hooks"], serde_json::json!(["LYNX_TEST_CELL_PACE=1"]));
    let said = "these figures come from a run made with test hooks set (LYNX_TEST_CELL_PACE=1): they describe a test";
    assert!(stdout.contains(said), "{stdout}");
    let served = &result["serving"]["served"][0];
    let window = served["window"].as_str().unwrap_or_else(|| panic!("{served}"));
    let rates = served["rates"].as_array().unwrap_or_else(|| panic!("{served}"));
    let requests = rates[0]["requests"].as_u64().unwrap();
    assert!(window.starts_with(&format!("{requests} requests, the smallest window of 20, 40")), "{window}");
    assert!(requests > 20 && rates[1]["requests"] == requests, "{served}");
    let point = &short_latency_bounded(&result, "tight")["point"];
    let (bounded, over) = (&rates[0], &rates[1]);
    for figure in ["ttft_p99_s", "tpot_p99_s"] {
        let (steady, search) = (seconds(&bounded["steady"]["simulated"][figure]), seconds(&point[figure]));
        assert!((steady / search - 1.0).abs() < 1e-9, "{figure}: {steady} against the search's {search}");
    }
    assert_eq!(bounded["steady"]["requests"], point["requests"], "{bounded}");
    assert_eq!(bounded["steady"]["within_bound"], true, "{bounded}");
    assert_eq!(over["steady"]["within_bound"], false, "{over}");
    for r in rates {
        eprintln!(
            "{} over {requests} requests: measured p99 TTFT {} s, simulated {} s, fed the loop's steps {} s; the steady \
             state's {} s; bound 0.25 s; steps against the tables: decode {}, prefill {}",
            r["label"],
            r["measured"]["ttft_p99_s"],
            r["simulated"]["ttft_p99_s"],
            r["at_loop_steps"]["simulated"]["ttft_p99_s"],
            r["steady"]["simulated"]["ttft_p99_s"],
            r["decode_step_ratio"],
            r["prefill_step_ratio"]
        );
    }
    for kind in ["decode_step_ratio", "prefill_step_ratio"] {
        let pace = over[kind].as_f64();
        assert!(pace.is_some_and(|p| p >= 0.99), "{kind} {pace:?}: the hook holds the steps to their cells' pace");
    }
    assert_eq!(over["within_bound"], false, "the rate above the bound held it: {over}");
    let check = result["checks"].as_array().unwrap().iter().find(|c| c["name"] == "simulation").unwrap().clone();
    let detail = check["detail"].as_str().unwrap();
    assert!(detail.contains("short tight broke it 20% above the rate, as its steady state does"), "{detail}");
    let line = format!("the steady state, simulated over {} requests", point["requests"]);
    assert!(
        stdout.lines().any(|l| l.contains("(over): ") && l.contains(&line) && l.contains("the bound broken")),
        "{stdout}"
    );
}

/// Issue 16: where the measured p99s break the bound at the simulation's latency-bounded rate,
/// the loop serves 0.9× it, and the published measured figure
/// is the fastest rate that held the bound, with its fraction of the simulated rate. The test
/// hook makes every decode step 25 ms longer at the latency-bounded rate alone, past the 20 ms
/// TPOT bound, as a device slower there than in its cells would.
#[test]
fn a_bound_broken_at_the_simulated_rate_is_served_again_under_it() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (stdout, result) = serve_short(("tight", 4.0, 0.02), ("LYNX_TEST_SLOW_SERVING", "25"));
    let served = &result["serving"]["served"][0];
    let rates = served["rates"].as_array().unwrap_or_else(|| panic!("{served}"));
    let labels: Vec<&str> = rates.iter().map(|r| r["label"].as_str().unwrap()).collect();
    assert_eq!(labels[..3], ["bounded", "over", "under"], "{served}");
    assert_eq!(rates[0]["within_bound"], false, "25 ms decode steps break a 20 ms TPOT bound: {}", rates[0]);
    assert!(seconds(&rates[0]["measured"]["tpot_p99_s"]) >= 0.025, "{}", rates[0]);
    stepped_down_while_the_bound_broke(rates);
    let bounded = short_latency_bounded(&result, "tight");
    let (measured, published) = (&bounded["measured"], published_rate(rates));
    assert_eq!(measured["request_rate_per_s"], published["rate_per_s"], "{bounded}");
    assert_eq!(measured["within_bound"], published["within_bound"], "{bounded}");
    let check = result["checks"].as_array().unwrap().iter().find(|c| c["name"] == "simulation").unwrap().clone();
    let detail = check["detail"].as_str().unwrap();
    if published["label"] == "under" {
        // Held under the simulated rate: published there, with how far under, and said so.
        let fraction = seconds(&published["rate_per_s"]) / seconds(&rates[0]["rate_per_s"]);
        assert!((seconds(&measured["of_simulated_rate"]) - fraction).abs() < 1e-9, "{bounded}");
        let words = format!("measured over {} requests at {fraction:.2}× the simulated rate", published["requests"]);
        assert!(stdout.lines().any(|l| l.contains("short 16/8") && l.contains(&words)), "{words}: {stdout}");
        assert!(!detail.contains("break the bound at the simulation's latency-bounded rate"), "{detail}");
    } else {
        // Broken at every rate served: the latency-bounded rate's figures, bound broken.
        assert!(measured.get("of_simulated_rate").is_none(), "{bounded}");
        assert!(detail.contains("the rate published, and at 0.90× it"), "{detail}");
    }
    assert!(
        detail.contains("short tight bounded: p99 TTFT"),
        "the slowed rate disagrees with the simulation: {detail}"
    );
}

/// Issue 16: the serving phase's budget (`serve.total_s`, cut to what is left of `serve.run_s`)
/// keeps a run's length bounded: the latency-bounded rate and 20% above it are served whatever
/// it is, and the step down under a broken bound only where its window fits what is left; here
/// none is left, by either key, and the result and the summary say why it was not served.
#[test]
fn a_step_down_that_does_not_fit_the_serving_budget_is_not_served() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // A process is more than a second in when it starts serving: nothing is left of run_s.
    for (key, seconds) in [("total_s", 0.5), ("run_s", 1.0)] {
        let serve = format!("{key} = {seconds:?}");
        let (stdout, result) =
            serve_short_with(("tight", 4.0, 0.02), (&serve, "[512]"), ("LYNX_TEST_SLOW_SERVING", "25"));
        assert_eq!(result["config"]["suite"]["serve"][key], seconds);
        let served = &result["serving"]["served"][0];
        let rates = served["rates"].as_array().unwrap_or_else(|| panic!("{served}"));
        let labels: Vec<&str> = rates.iter().map(|r| r["label"].as_str().unwrap()).collect();
        assert_eq!(labels, ["bounded", "over"], "{key}: {served}");
        assert_eq!(rates[0]["within_bound"], false, "25 ms decode steps break a 20 ms TPOT bound: {}", rates[0]);
        let why = served["step_down"].as_str().unwrap_or_else(|| panic!("{key}: no step_down: {served}"));
        assert!(
            why.starts_with("the step down to ")
                && why.contains("share of the serving budget (serve.total_s, serve.run_s) were left"),
            "{why}"
        );
        assert!(why.contains("0 s of this workload's 0 s share"), "{key}: {why}");
        assert!(stdout.lines().any(|l| l.ends_with(why)), "the summary says why: {stdout}");
    }
}

/// A run of the test suite that serves a `short` workload (16 tokens in, 8 out, 20 requests)
/// under one bound (name, p99 TTFT, p99 TPOT), with a test hook's variable set: its summary and
/// its result, complete.
fn serve_short(bound: (&str, f64, f64), hook: (&str, &str)) -> (String, Value) {
    serve_short_with(bound, ("", "[512]"), hook)
}

/// As [`serve_short`], with `serve` added to the `[serve]` section and decode lines at `ctxs`.
fn serve_short_with(bound: (&str, f64, f64), (serve, ctxs): (&str, &str), hook: (&str, &str)) -> (String, Value) {
    let (name, ttft, tpot) = bound;
    let models = models(|suite| {
        suite.replace("ctxs = [512]", &format!("ctxs = {ctxs}")).replace(
            "[roofline]",
            &format!(
                "[[workload]]\nname = \"short\"\nisl = 16\nosl = 8\n\n\
                 [[bound]]\nname = \"{name}\"\nttft_p99_s = {ttft:?}\ntpot_p99_s = {tpot:?}\n\n\
                 [serve]\nrequests = 20\nworkloads = [\"short\"]\nbounds = [\"{name}\"]\nmax_s = 60.0\n{serve}\n\
                 [roofline]"
            ),
        )
    });
    let out = tempfile::tempdir().unwrap();
    let output = lynx_command().args(run_args(models.path(), out.path())).env(hook.0, hook.1).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    assert_eq!(result["status"], "complete", "{stderr}");
    (String::from_utf8_lossy(&output.stdout).into_owned(), result)
}

/// The `short` workload's latency-bounded entry under the bound `name`.
fn short_latency_bounded(result: &Value, name: &str) -> Value {
    let entries = result["derived"]["latency_bounded"].as_array().unwrap();
    let found = entries.iter().find(|b| b["workload"]["name"] == "short" && b["bound"]["name"] == name);
    found.unwrap_or_else(|| panic!("no short workload under {name}: {entries:?}")).clone()
}

/// A served workload's rates after `bounded` and `over`: `under` ones at 0.9× (the one step) the
/// latency-bounded rate, each served only where the bound broke at that rate and every rate
/// under it before.
fn stepped_down_while_the_bound_broke(rates: &[Value]) {
    let held = |r: &Value| r["within_bound"].as_bool().unwrap();
    let bounded = seconds(&rates[0]["rate_per_s"]);
    let under = &rates[2..];
    assert!(under.len() <= 1, "{rates:?}");
    for (i, r) in under.iter().enumerate() {
        assert_eq!(r["label"], "under", "{rates:?}");
        assert!((seconds(&r["rate_per_s"]) / bounded - [0.9][i]).abs() < 1e-9, "{rates:?}");
        assert!(
            !held(&rates[0]) && under[..i].iter().all(|r| !held(r)),
            "served only while the bound broke: {rates:?}"
        );
    }
    println!("rates served: {:?}", rates.iter().map(|r| (&r["label"], held(r))).collect::<Vec<_>>());
}

/// The rate a served workload publishes: the fastest of `bounded` and the `under` rates that held
/// the bound, else `bounded`.
fn published_rate(rates: &[Value]) -> &Value {
    let eligible = || rates.iter().filter(|r| r["label"] == "bounded" || r["label"] == "under");
    eligible().find(|r| r["within_bound"] == true).unwrap_or(&rates[0])
}

/// Issue 15: where the run's graph steps passed their check, the serving loop replays its decode
/// steps as graphs, as serving engines do, and is simulated over the graph cells: the record says
/// so (`mode`, the server's words), every step of the loop is looked up at a captured batch and
/// the pool's capacity, and the measured figures stand beside that simulation. A CPU has no
/// graphs: the test hook's stand-in drives the same path.
#[test]
fn a_serving_phase_replays_graph_steps_where_graph_cells_passed_their_check() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (stdout, result) = serve_short(("loose", 4.0, 0.5), ("LYNX_TEST_GRAPHS", "reissue"));
    let server = result["serving"]["server"].as_str().unwrap();
    assert!(server.contains("replayed as a graph captured at 1, 2, 4"), "{server}");
    assert!(stdout.contains("replayed as a graph"), "the summary names the server: {stdout}");
    let served = &result["serving"]["served"][0];
    assert_eq!(served["mode"], "graph", "{served}");
    let rates = served["rates"].as_array().unwrap_or_else(|| panic!("{served}"));
    stepped_down_while_the_bound_broke(rates);
    for r in rates {
        assert_eq!(r["requests"], 20, "{r}");
        // Each decode step is looked up at its captured batch and the pool's capacity (24 keys),
        // which the graph cells' table has: a ratio, not a gap.
        assert!(r["decode_step_ratio"].as_f64().is_some_and(|x| x > 0.0), "{r}");
        assert!(r["relative_error"]["tpot_p99"].as_f64().is_some(), "{r}");
    }
    // The published figure says which server measured it, with that server's batch cap.
    let bounded = short_latency_bounded(&result, "loose");
    let measured = &bounded["measured"];
    assert_eq!((&measured["mode"], &measured["max_batch"]), (&Value::from("graph"), &served["max_batch"]), "{bounded}");
    assert!(stdout.lines().any(|l| l.contains("short 16/8") && l.contains("measured (graph steps)")), "{stdout}");
    // Beside it, the simulation of that graph server at the rate it was served at.
    let point = &bounded["point"];
    assert_eq!(point["decode_steps"], "graph", "{bounded}");
    let published = published_rate(rates);
    assert_eq!(published["rate_per_s"], measured["request_rate_per_s"], "{bounded}");
    assert_eq!(point["request_rate_per_s"], rates[0]["rate_per_s"], "{bounded}\n{served}\n{stdout}");
    assert!(stdout.lines().any(|l| l.contains("short 16/8") && l.contains("simulated (graph steps)")), "{stdout}");
}

/// Issue 16: a cell whose steps vary past the suite's CV bound is measured once more, and the
/// `stability` check fails naming every cell still unstable; each cell records the host CPU
/// cores other processes kept busy while it ran (and of them the hypervisor's steal), where it ran
/// long enough to tell, and how long the thread running its steps waited to run. (A bound of
/// 0.0001% leaves no cell stable.)
#[test]
fn unstable_cells_are_measured_again_and_fail_the_stability_check() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| suite.replace("max_cv = 100.0", "max_cv = 0.000001"));
    let out = tempfile::tempdir().unwrap();
    let output = lynx(&run_args(models.path(), out.path()));
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let cells = result["cells"].as_array().unwrap();
    for cell in cells {
        let why = cell["remeasured"].as_str().unwrap_or_else(|| panic!("{cell}"));
        assert!(why.contains("step-time CV") && why.contains("above 0.0%"), "{why}");
        // With where the set-aside measurement's slow steps fell.
        assert!(why.contains("steps over 1.2× the median"), "{why}");
        // /proc counts in 10 ms ticks: a cell measured in under 0.2 s is too short to tell.
        let short = cell["measured_s"].as_f64().unwrap() < 0.2;
        assert!(short || cell["other_cpu_cores"].as_f64().is_some_and(|c| c >= 0.0), "{cell}");
        // Of them, the hypervisor's steal (this host is a virtual machine; none stolen is 0).
        let stolen = cell["stolen_cpu_cores"].as_f64();
        assert!(short || stolen.is_some_and(|s| s >= 0.0 && s <= cell["other_cpu_cores"].as_f64().unwrap() + 1e-9));
        // What the thread running the steps did, how long it waited to run included (Linux
        // says it in /proc/thread-self/schedstat), within the steps' wall time.
        let thread = &cell["slow_steps"]["thread"];
        for (waited, wall) in [("slow_runnable_s", "slow_wall_s"), ("others_runnable_s", "others_wall_s")] {
            let (waited, wall) = (thread[waited].as_f64(), thread[wall].as_f64().unwrap_or(0.0));
            assert!(waited.is_some_and(|w| w >= 0.0 && w <= wall + 1e-6), "{thread}");
        }
    }
    let check = result["checks"].as_array().unwrap().iter().find(|c| c["name"] == "stability").unwrap().clone();
    assert_eq!(check["passed"], false, "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert_eq!(detail.matches("step-time CV").count(), cells.len(), "{detail}");
    assert!(detail.contains("decode batch 8 ctx 512:"), "{detail}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("check stability FAILED"), "{stdout}");
}

/// A process that keeps one CPU busy until it is dropped (its process group killed and it
/// reaped), and for two minutes at most should this test be killed first.
struct Busy(std::process::Child);

impl Busy {
    fn start() -> Busy {
        use std::os::unix::process::CommandExt;
        let child = std::process::Command::new("timeout")
            .args(["120", "sh", "-c", "while :; do :; done"])
            .process_group(0)
            .spawn()
            .unwrap();
        Busy(child)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        // SAFETY: kill takes no pointers; the group is the child's own, made at its spawn.
        unsafe { libc::kill(-(self.0.id() as libc::pid_t), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// Issue 16: cells measured while another process keeps the host's CPUs busy are not stable
/// however steady their steps: each is measured once more, records the cores the other process
/// kept busy, and the `stability` check fails naming them. The busy process is this test's, not
/// lynx's, so lynx counts it as another's.
#[test]
fn a_busy_process_beside_the_cells_fails_the_stability_check() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| suite.replace("max_other_cpu_cores = 64.0", "max_other_cpu_cores = 0.2"));
    let out = tempfile::tempdir().unwrap();
    let busy = Busy::start();
    let output = lynx(&run_args(models.path(), out.path()));
    drop(busy);
    assert_eq!(output.status.code(), Some(1), "{}", String::from_utf8_lossy(&output.stderr));
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let cells = result["cells"].as_array().unwrap();
    for cell in cells {
        // Measured for 0.3 s at least, long enough for /proc's 10 ms ticks to tell.
        let cores = cell["other_cpu_cores"].as_f64().unwrap_or_else(|| panic!("{cell}"));
        assert!(cores > 0.2, "a busy shell loop beside the cell: {cell}");
        let why = cell["remeasured"].as_str().unwrap_or_else(|| panic!("{cell}"));
        assert!(why.contains("other processes kept") && why.contains("(limit 0.20)"), "{why}");
    }
    let check = result["checks"].as_array().unwrap().iter().find(|c| c["name"] == "stability").unwrap().clone();
    assert_eq!(check["passed"], false, "{check}");
    let detail = check["detail"].as_str().unwrap();
    assert_eq!(detail.matches("host CPU cores busy (limit 0.20)").count(), cells.len(), "{detail}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("check stability FAILED"), "{stdout}");
}

/// A cgroup of this test's own with a CFS quota (a container's CPU limit), removed when dropped
/// (once the processes in it have ended).
struct QuotaCgroup(PathBuf);

impl QuotaCgroup {
    /// Under cgroup v1's cpu hierarchy, or v2's with its cpu controller enabled for its children;
    /// why not where neither can be made (no such hierarchy, or not root).
    fn make(cores: f64) -> Result<QuotaCgroup, String> {
        let name = format!("lynx-test-quota-{}", std::process::id());
        let period = 100_000u64;
        let quota = (cores * period as f64) as u64;
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let v2 = Path::new("/sys/fs/cgroup");
        let (dir, file, text) = if v1.join("cpu.cfs_quota_us").is_file() {
            (v1.join(&name), "cpu.cfs_quota_us", format!("{quota}"))
        } else if std::fs::read_to_string(v2.join("cgroup.subtree_control")).is_ok_and(|c| c.contains("cpu")) {
            (v2.join(&name), "cpu.max", format!("{quota} {period}"))
        } else {
            return Err("no cgroup v1 cpu hierarchy, nor a v2 one that gives its children the cpu controller".into());
        };
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let made = QuotaCgroup(dir);
        std::fs::write(made.0.join(file), text).map_err(|e| format!("{}: {e}", made.0.join(file).display()))?;
        Ok(made)
    }
}

impl Drop for QuotaCgroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Cells measured while a CFS quota on lynx's cgroup throttles it (a container given less CPU
/// time than libtorch's threads use) timed the quota as much as the device: the result records
/// the quota with the CPUs, each cell the seconds it was throttled, and the `stability` check
/// fails naming the quota and what to do. Needs a cgroup it can make: where it cannot, the test
/// says so and checks nothing, and its record (which scripts/test.sh prints) says it did not run.
#[test]
fn a_cpu_quota_that_throttles_the_cells_fails_the_stability_check() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let record_file = "cpu-quota-test.txt";
    let _ = std::fs::remove_file(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(record_file));
    // Under the two threads libtorch runs on this 2-core host: each cell is throttled.
    let cgroup = match QuotaCgroup::make(0.8) {
        Ok(cgroup) => cgroup,
        Err(why) => {
            record(
                record_file,
                &format!("cpu-quota test SKIPPED: no cgroup with a CPU quota could be made here ({why})"),
            );
            return;
        }
    };
    // The test suite's loose bounds allow any throttling; a suite's default allows none.
    let models = models(|suite| suite.replace("max_cpu_throttled_s = 3600.0", "max_cpu_throttled_s = 0.0"));
    let out = tempfile::tempdir().unwrap();
    // The shell moves itself into the cgroup, then becomes lynx (with the tests' config folder);
    // a cgroup that will not take it (a v2 hierarchy that delegates elsewhere) exits 97 first.
    let output = std::process::Command::new("sh")
        .env("XDG_CONFIG_HOME", config_home())
        .args(["-c", r#"echo $$ > "$1" || exit 97; shift; exec "$@""#, "sh"])
        .arg(cgroup.0.join("cgroup.procs"))
        .arg(env!("CARGO_BIN_EXE_lynx"))
        .args(run_args(models.path(), out.path()))
        .output()
        .unwrap();
    drop(cgroup);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(97) {
        record(
            record_file,
            &format!("cpu-quota test SKIPPED: the cgroup made would not take a process ({})", stderr.trim()),
        );
        return;
    }
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let allowed = &result["host"]["cpu_allowance"];
    assert!((allowed["quota_cores"].as_f64().unwrap() - 0.8).abs() < 1e-9, "{allowed}");
    assert!(allowed["quota"].as_str().unwrap().starts_with("0.80 cores: /sys/fs/cgroup/"), "{allowed}");
    let cells = result["cells"].as_array().unwrap();
    let throttled: Vec<&Value> = cells.iter().filter(|c| c["cpu_throttled_s"].as_f64().unwrap() > 0.0).collect();
    assert!(!throttled.is_empty(), "no cell was throttled: {cells:?}");
    for cell in &throttled {
        let why = cell["remeasured"].as_str().unwrap_or_else(|| panic!("{cell}"));
        assert!(why.contains("its cgroup's CPU quota held lynx off its CPUs for"), "{why}");
    }
    let check = result["checks"].as_array().unwrap().iter().find(|c| c["name"] == "stability").unwrap().clone();
    assert_eq!(check["passed"], false, "{check}");
    assert!(check["detail"].as_str().unwrap().contains("(give the run more CPU time: the container's CPU limit)"));
    // Said as the run starts, with the CPUs.
    let cpus = allowed["cpus"].as_str().unwrap();
    let said = format!("host: {} CPUs, a CPU quota of 0.80 cores ({cpus}; quota 0.80 cores: ", allowed["cpu_count"]);
    assert!(stderr.contains(&said), "{said} in {stderr}");
    // The result describes a run, not a test: nothing of the cgroup is a test hook.
    assert!(result["harness"]["test_hooks"].is_null(), "{}", result["harness"]);
    let ran = format!(
        "cpu-quota test RAN: {} of the {} cells of a run under a CPU quota of 0.80 cores were throttled",
        throttled.len(),
        cells.len()
    );
    record(record_file, &ran);
}

/// `--cpus LIST`: lynx binds itself to the CPUs and starts again on them, so that its worker and
/// libtorch's threads run there from the start (one CPU: one thread); the result records the
/// binding and the allowance it made; a resume binds itself as the run started (else its thread
/// count and CPUs would differ from the cells', and it would be refused), and one whose plan
/// names CPUs this host does not allow, or no CPU list, is refused naming the run.
#[test]
fn a_run_bound_to_a_cpu_list_runs_there_and_a_resume_binds_itself_the_same() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    // Its plan says so, binding nothing and writing nothing.
    let planned =
        lynx(&[run_args(models.path(), out.path()).as_slice(), &["--cpus", "0", "--plan", "--json"]].concat());
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let plan: Value = serde_json::from_slice(&planned.stdout).unwrap();
    assert_eq!(plan["plans"][0]["cpu_binding"], serde_json::json!({ "asked": "list", "cpus": "0" }), "{plan}");
    assert!(!String::from_utf8_lossy(&planned.stderr).contains("starting again"));
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a plan wrote a run");
    let output = lynx(&[run_args(models.path(), out.path()).as_slice(), &["--cpus", "0"]].concat());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("lynx: bound to CPUs 0; starting again on them"), "{stderr}");
    // The run's first lines say so, beside the host's allowance.
    assert!(stderr.contains("lynx: bound to CPUs 0 (--cpus 0)"), "{stderr}");
    let path = result_file(out.path());
    let result: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(result["harness"]["cpu_binding"], serde_json::json!({ "asked": "list", "cpus": "0" }));
    assert_eq!(result["host"]["cpu_allowance"]["cpus"], "0", "{}", result["host"]);
    // Memory is not bound apart: the worker allocated under the default policy, and says so.
    let policy = result["host"]["memory_policy"].as_str().unwrap_or_default();
    assert!(policy.starts_with("local (the default) on memory nodes "), "{}", result["host"]);
    assert_eq!(result["harness"]["torch_threads"], 1, "libtorch's threads were sized for one CPU");
    // Each cell whose host load was measured says what of it lay on the CPUs the run could not
    // run on (this host's others), within the whole.
    let cells = result["cells"].as_array().unwrap();
    let loaded: Vec<&Value> = cells.iter().filter(|c| c["other_cpu_cores"].is_number()).collect();
    assert!(!loaded.is_empty(), "no cell measured the host's load: {}", result["cells"]);
    for cell in loaded {
        let (whole, elsewhere) =
            (cell["other_cpu_cores"].as_f64().unwrap(), cell["other_cpu_cores_elsewhere"].as_f64());
        assert!(elsewhere.is_some_and(|e| (0.0..=whole).contains(&e)), "{cell}");
    }
    // The export says how the run was bound.
    let envelope = path.with_extension("intoto.json");
    let export = lynx(&["export", envelope.to_str().unwrap(), "--pubkey", &pubkey(), "--format", "markdown"]);
    let markdown = String::from_utf8_lossy(&export.stdout);
    assert!(markdown.contains("| CPU binding | CPUs 0 (--cpus 0) |"), "{markdown}");
    // A reproduction elsewhere is not held to another node's CPU numbers: it says so, and binds
    // what it is given.
    let key = pubkey();
    let reproduce = ["reproduce", envelope.to_str().unwrap(), "--pubkey", &key, "--plan"];
    let planned = lynx(&reproduce);
    let stderr = String::from_utf8_lossy(&planned.stderr);
    assert!(planned.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "lynx: warning: the published run was bound to CPUs 0 (--cpus 0) on its node; this one binds none (give \
             --cpus to bind it)"
        ),
        "{stderr}"
    );
    let line = bad_input(&[reproduce.as_slice(), &["--cpus", "1023"]].concat());
    assert!(line.contains("--cpus: CPUs 1023 are not ones this process may run on ("), "{line}");
    // A result bound to its GPU's CPUs, reproduced where there is no GPU to take that to: its
    // reproduction binds nothing, and is not refused for it.
    let mut json: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    json["harness"]["cpu_binding"] = serde_json::json!({ "asked": "gpu-local", "cpus": "0-55" });
    let local: lynx_schema::result::RunResult = serde_json::from_value(json).unwrap();
    let gpu_local = path.with_file_name("gpu-local.json");
    std::fs::write(&gpu_local, serde_json::to_vec_pretty(&local).unwrap()).unwrap();
    let trusted = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let sealed = lynx_attest::seal(&gpu_local, &local, Some(&trusted)).unwrap();
    let sealed_path = lynx_attest::envelope_path(&gpu_local);
    std::fs::write(&sealed_path, serde_json::to_vec(&sealed).unwrap()).unwrap();
    let planned = lynx(&["reproduce", sealed_path.to_str().unwrap(), "--pubkey", &key, "--plan"]);
    let stderr = String::from_utf8_lossy(&planned.stderr);
    assert!(planned.status.success(), "{stderr}");
    assert!(!stderr.contains("bound") && !String::from_utf8_lossy(&planned.stdout).contains("bound to"), "{stderr}");

    let dir = path.parent().unwrap().to_str().unwrap().to_owned();
    let resumed = lynx(&["run", "--resume", &dir]);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(stderr.contains("lynx: bound to CPUs 0; starting again on them"), "{stderr}");

    let plan_path = path.with_extension("plan.json");
    let mut plan: Value = serde_json::from_slice(&std::fs::read(&plan_path).unwrap()).unwrap();
    assert_eq!(plan["cpu_binding"], serde_json::json!({ "asked": "list", "cpus": "0" }));
    let journal = journal_of(path.parent().unwrap());
    for (cpus, says) in [
        ("1023", "CPUs 1023 are not ones this process may run on ("),
        ("0-99999999999", "not a CPU list lynx can bind"),
    ] {
        plan["cpu_binding"]["cpus"] = Value::from(cpus);
        std::fs::write(&plan_path, serde_json::to_vec(&plan).unwrap()).unwrap();
        let line = bad_input(&["run", "--resume", &dir]);
        assert!(line.contains(&format!("--resume {dir}: the run is bound to CPUs {cpus}: {says}")), "{line}");
        assert!(journal_of(path.parent().unwrap()) == journal, "the refused resume wrote to the journal");
    }
}
