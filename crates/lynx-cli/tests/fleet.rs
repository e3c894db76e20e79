//! A node's runs (`--all-devices`, `--devices`) and the fleet launchers: the Kubernetes manifest and the Slurm template on a one-node cluster.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The checks of the machine's state. Two cores shared with the test runner are not a quiet
/// device: these may fail (exit 1) in a run that is otherwise whole; no other check may.
const MACHINE_STATE: [&str; 3] = ["equilibrium", "telemetry_coverage", "roofline"];

/// The checks that failed in the result of the run in `run_dir`: (name, detail).
fn failed_checks(run_dir: &Path) -> Vec<(String, String)> {
    let result = run_dir.join(format!("{}.json", run_dir.file_name().unwrap().to_string_lossy()));
    let result: Value = serde_json::from_slice(&std::fs::read(result).unwrap()).unwrap();
    result["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] != true)
        .map(|c| (c["name"].as_str().unwrap().to_owned(), c["detail"].to_string()))
        .collect()
}

/// Whether a device's run ended as a whole run on this shared machine may: exit 0, or exit 1
/// with only checks of the machine's state failed (which the test's log then names).
fn whole_run(exit: &str, failed: &[(String, String)]) -> bool {
    let machine_state = failed.iter().all(|(name, _)| MACHINE_STATE.contains(&name.as_str()));
    if exit == "exit 1" && machine_state && !failed.is_empty() {
        eprintln!("fleet test: a device's run failed checks of this machine's state: {failed:?}");
    }
    (exit == "exit 0" && failed.is_empty()) || (exit == "exit 1" && machine_state && !failed.is_empty())
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
        let failed = failed_checks(Path::new(runs[i]["run_dir"].as_str().unwrap()));
        assert!(whole_run(runs[i]["exit"].as_str().unwrap(), &failed), "{summary}\nfailed checks: {failed:?}");
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
    // Installing and running the validator keeps a core busy beside the node tests' runs.
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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
    let record_file = "slurm-test.txt";
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
        record(
            record_file,
            &format!("slurm test SKIPPED: the daemons cannot start on this machine: {}", stderr.trim()),
        );
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
    let envelopes = lynx_attest::trust::find_envelopes(std::slice::from_ref(&out)).unwrap();
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
    record(record_file, &line);
}

#[test]
fn devices_run_in_turn_or_by_default_all_at_once() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(many_cells);
    // All at once, each cell measured for at least 0.3 s: /proc counts the host's load in 10 ms
    // ticks, and a cell measured in under 0.2 s records none. Room for the steps that takes: on
    // a fast host this model's prefill of 16 tokens ran its 100 steps in 0.16 s.
    let counted = self::models(|s| {
        let longer = many_cells(s).replace("min_s = 0.15\nmax_steps = 100", "min_s = 0.3\nmax_steps = 2000");
        assert!(longer.contains("max_steps = 2000"), "{longer}");
        longer
    });
    let runs = |node: &[&str]| {
        let out = tempfile::tempdir().unwrap();
        let models = if node.contains(&"--one-at-a-time") { &models } else { &counted };
        let output = lynx(&node_args(models.path(), out.path(), node));
        let mut results: Vec<Value> = result_files(out.path())
            .iter()
            .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
            .collect();
        results.sort_by_key(|r| r["started_at"].as_str().unwrap().to_owned());
        (output, results, out)
    };
    let (output, results, _out) = runs(&["--devices", "cpu,cpu", "--one-at-a-time"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let summary_path = stdout.lines().find_map(|l| l.strip_prefix("node summary: ")).expect("a node summary");
    let summary: Value = serde_json::from_slice(&std::fs::read(summary_path).unwrap()).unwrap();
    let every = summary["runs"].as_array().unwrap();
    assert_eq!(output.status.success(), every.iter().all(|run| run["exit"] == "exit 0"), "{stderr}{summary}");
    for run in every {
        assert_eq!(run["status"], "complete", "{summary}");
        let failed = failed_checks(Path::new(run["run_dir"].as_str().unwrap()));
        assert!(whole_run(run["exit"].as_str().unwrap(), &failed), "{stderr}{summary}\nfailed checks: {failed:?}");
    }
    assert!(!stderr.contains("more than once"), "in turn, nothing is shared");
    // In turn, no device waits for another to prepare.
    let node_dir = Path::new(summary_path).with_extension("");
    for log in ["device-0.log", "device-1.log"] {
        let log = std::fs::read_to_string(node_dir.join(log)).unwrap();
        assert!(log.contains("before warm-up: ") && !log.contains("waiting for the node's"), "{log}");
    }
    assert_eq!(results.len(), 2);
    // RFC 3339 UTC strings of one format order as times: the second began after the first ended.
    assert!(results[1]["started_at"].as_str() >= results[0]["updated_at"].as_str(), "{results:?}");

    // By default both at once: the second began before the first ended. Two CPU "devices" share
    // two cores, so the checks of the machine's state (equilibrium, coverage, and the roofline,
    // whose ceilings were probed while the other run competed) may fail; each run is still
    // complete and sealed.
    let (output, results, _out) = runs(&["--devices", "cpu,cpu"]);
    assert_eq!(results.len(), 2, "{}", String::from_utf8_lossy(&output.stderr));
    let warning = "lynx: warning: --devices names cpu more than once: its runs will share it at once";
    assert!(String::from_utf8_lossy(&output.stderr).contains(warning), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(results[1]["started_at"].as_str() < results[0]["updated_at"].as_str(), "{results:?}");
    // Each waited until the other had prepared (parity, the probes, its model) before it warmed
    // up, and said how long; the node said when each ended.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary_path = stdout.lines().find_map(|l| l.strip_prefix("node summary: ")).expect("a node summary");
    let node_dir = Path::new(summary_path).with_extension("");
    for index in 0..2 {
        let log = std::fs::read_to_string(node_dir.join(format!("device-{index}.log"))).unwrap();
        let before = log.lines().find(|l| l.contains("before warm-up: ")).unwrap_or_else(|| panic!("{log}"));
        assert!(before.contains(", waiting for the node's other devices "), "{before}");
        for marker in [format!("ready-{index}"), format!("ended-{index}")] {
            assert!(node_dir.join("prepared").join(&marker).exists(), "no {marker}");
        }
    }
    for result in &results {
        assert_eq!(result["status"], "complete");
        let failed: Vec<&Value> = result["checks"].as_array().unwrap().iter().filter(|c| c["passed"] != true).collect();
        assert!(failed.iter().all(|c| MACHINE_STATE.contains(&c["name"].as_str().unwrap())), "{failed:?}");
    }
    // Each run's cells count the other device's run, which kept both cores busy beside them, as
    // lynx's own, not as the host's other load: a node's runs all at once are one benchmark.
    // The median cell of both runs, as another process on this shared machine may load some.
    let mut loads: Vec<f64> = results
        .iter()
        .flat_map(|r| r["cells"].as_array().unwrap().iter().filter_map(|c| c["other_cpu_cores"].as_f64()))
        .collect();
    loads.sort_by(f64::total_cmp);
    let cells: usize = results.iter().map(|r| r["cells"].as_array().unwrap().len()).sum();
    assert!(loads.len() == cells && loads[loads.len() / 2] < 0.3, "other load of each of {cells} cells: {loads:?}");
}
