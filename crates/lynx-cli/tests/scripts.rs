//! The scripts under `scripts/`, each in its quick mode, and the README's two commands in the
//! README's order on a clean copy of the repository: a layout change that breaks one of them
//! fails here.

mod common;

use common::{files_under, repo_path, result_file, DEVICE};
use std::path::Path;
use std::process::{Command, Output};

/// `bash scripts/<script> args…` from the repository root, with the lynx under test.
fn script_command(root: &Path, script: &str, args: &[&str]) -> Command {
    let mut command = Command::new("bash");
    command
        .arg(root.join("scripts").join(script))
        .args(args)
        .current_dir(root)
        .env("LYNX_BIN", env!("CARGO_BIN_EXE_lynx"));
    command
}

/// [`script_command`], run.
fn script(root: &Path, script: &str, args: &[&str]) -> Output {
    script_command(root, script, args).output().unwrap()
}

fn succeeded(what: &str, output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what}: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn bench_eager_quick_prints_lynx_against_python_eager() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let output = script(Path::new(&repo_path("")), "bench-eager.sh", &["--quick"]);
    let table = succeeded("bench-eager.sh --quick", &output);
    assert!(table.contains("decode step, tiny") && table.contains("EAGER/LYNX"), "{table}");
    let row =
        table.lines().find(|l| l.split_whitespace().take(2).eq(["1", "128"])).unwrap_or_else(|| panic!("{table}"));
    let ratio: f64 = row.split_whitespace().nth(4).unwrap().parse().unwrap_or_else(|e| panic!("{row}: {e}"));
    assert!(ratio.is_finite() && ratio > 0.0, "{row}");
}

/// `scripts/served-steps.py` over a hand-made trace: each kind's steps with a table time,
/// grouped by pace over the kind's median, with the loop thread's CPU and wait shares of their
/// wall time (unknown for a step of a build that did not record them), then their median pace by
/// batch and by what came before (a step of either kind, or an idle gap); bad input gets one
/// line naming it and exit 2.
#[test]
fn served_steps_groups_the_loops_steps_by_pace_with_what_the_thread_did() {
    let scratch = tempfile::tempdir().unwrap();
    let decode = |step_s: f64, table_s: Option<f64>, cpu: f64, waited: f64| {
        serde_json::json!({"prefill": false, "batch": 1, "len": 16, "step_s": step_s, "table_s": table_s,
            "after_idle": false, "thread_cpu_s": cpu, "thread_runnable_s": waited})
    };
    let mut steps: Vec<serde_json::Value> = vec![decode(0.010, Some(0.010), 0.010, 0.0); 3];
    // The slow step at batch 2.
    let mut slow = decode(0.015, Some(0.010), 0.009, 0.006);
    slow["batch"] = serde_json::json!(2);
    steps.push(slow);
    // On a GPU, the caching allocator's calls to the driver in each step: the slow one called it
    // twice, the others not at all.
    for (step, calls) in steps.iter_mut().zip([0, 0, 0, 2]) {
        step["allocator_calls"] = serde_json::json!(calls);
    }
    steps.push(decode(0.020, None, 0.020, 0.0));
    steps.push(
        serde_json::json!({"prefill": true, "batch": 1, "len": 16, "step_s": 0.1, "table_s": 0.1, "after_idle": true}),
    );
    // A decode step after the prefill.
    steps.push(decode(0.012, Some(0.010), 0.012, 0.0));
    let trace = serde_json::json!({"label": "bounded", "rate_per_s": 1.25, "steps": steps});
    let path = scratch.path().join("run.served.jsonl");
    std::fs::write(&path, format!("{trace}\n")).unwrap();
    let run =
        |path: &Path| Command::new("python3").arg(repo_path("scripts/served-steps.py")).arg(path).output().unwrap();
    let table = succeeded("served-steps.py", &run(&path));
    assert_eq!(
        table.lines().collect::<Vec<_>>(),
        [
            "bounded at 1.250 req/s, decode: 5 steps with a table time, median measured/table 1.00",
            "  pace/median      1.0-1.1:    3 steps, mean    10.0 ms, on its CPU 100.0%, waiting to run   0.0%, the \
             allocator called the driver in 0 (0 calls)",
            "  pace/median      1.2-1.3:    1 steps, mean    12.0 ms, on its CPU 100.0%, waiting to run   0.0%",
            "  pace/median 1.4 and over:    1 steps, mean    15.0 ms, on its CPU  60.0%, waiting to run  40.0%, the \
             allocator called the driver in 1 (2 calls)",
            "  by batch, median measured/table (steps): 1: 1.00 (4), 2: 1.50 (1)",
            // The first step has none before it.
            "  by the step before, median measured/table (steps): after a decode step 1.00 (3), after a prefill step \
             1.20 (1)",
            "bounded at 1.250 req/s, prefill: 1 steps with a table time, median measured/table 1.00",
            "  pace/median      1.0-1.1:    1 steps, mean   100.0 ms, on its CPU     -, waiting to run     -",
            "  by batch, median measured/table (steps): 1: 1.00 (1)",
            // The prefill came after an idle gap (and a decode step): counted there alone.
            "  by the step before, median measured/table (steps): after an idle gap 1.00 (1)",
        ],
        "{table}"
    );
    std::fs::write(&path, format!("{trace}\nnot json\n")).unwrap();
    let output = run(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("run.served.jsonl line 2: not JSON") && stderr.lines().count() == 1, "{stderr}");
    // A step time that is no finite number (Python's JSON reads `Infinity`), named by its step.
    std::fs::write(&path, format!("{}\n", trace.to_string().replacen("0.015", "Infinity", 1))).unwrap();
    let output = run(&path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("line 1 step 3: step_s is not a finite non-negative number"), "{stderr}");
    // A label's control characters never reach the terminal.
    let mut hostile = trace.clone();
    hostile["label"] = serde_json::json!("\u{1b}[31mred");
    std::fs::write(&path, format!("{hostile}\n")).unwrap();
    let table = succeeded("served-steps.py", &run(&path));
    assert!(table.starts_with("?[31mred at 1.250 req/s") && !table.contains('\u{1b}'), "{table}");
}

/// A gpu-check table's line for `claim` (the line that starts with it).
fn claim_line<'a>(table: &'a str, claim: &str) -> &'a str {
    table.lines().find(|l| l.starts_with(claim)).unwrap_or_else(|| panic!("no {claim}: {table}"))
}

/// The claim column of a gpu-check table's line for `claim`: columns are two or more spaces
/// apart, a claim's words one.
fn verdict(table: &str, claim: &str) -> String {
    claim_line(table, claim).split("  ").map(str::trim).filter(|s| !s.is_empty()).nth(1).unwrap().to_owned()
}

#[test]
fn gpu_check_quick_prints_every_claim_and_keeps_what_it_ran() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("check");
    let archive = work.path().join("check.tgz");
    let root = repo_path("");
    // As on a GPU host: lynx on the libtorch of a Python with the full CUDA wheel (the one
    // scripts/bench-python.sh makes), found through that Python, not through the binary's rpath.
    // Graph cells through the CPU's stand-in, so that the run has what a GPU's has to judge.
    // bench-python.sh answers $LYNX_BENCH_PYTHON where it is set (and checks its torch).
    let python = succeeded("bench-python.sh", &script(Path::new(&root), "bench-python.sh", &[]))
        .lines()
        .last()
        .unwrap()
        .to_owned();
    let as_on_a_gpu_host = |args: &[&str]| {
        script_command(Path::new(&root), "gpu-check.sh", args)
            .env("LYNX_TEST_GRAPHS", "reissue")
            .env("LYNX_BENCH_PYTHON", &python)
            .env("LYNX_CHECK_HOST_TORCH", "1")
            .output()
            .unwrap()
    };
    let output = as_on_a_gpu_host(&[out.to_str().unwrap(), "--quick", "--archive", archive.to_str().unwrap()]);
    let table = succeeded("gpu-check.sh --quick", &output);
    // There libtorch_cuda loads (every CUDA library it needs is in the wheels), so the CUDA shim
    // is loaded for real, its symbols resolved against it, and a call through it (device 0's
    // memory, on a host with no GPU driver) comes back as the CUDA runtime's text, not a crash.
    let devices = std::fs::read_to_string(out.join("devices.txt")).unwrap();
    assert!(!devices.contains("libtorch_cuda.so not loaded"), "{devices}");
    assert!(
        devices.contains("CUDA graphs: unavailable (the CUDA shim loaded, but libtorch sees no GPU; the CUDA runtime says: CUDA error:"),
        "{devices}"
    );
    // The GPU math libraries it brought, each asked its version (the wheels' CUDA 13.0).
    assert!(devices.contains("GPU libraries: CUDA runtime 13.0, cuBLAS 13."), "{devices}");
    assert!(devices.contains(", cuBLASLt 13.") && devices.contains(", cuDNN 9."), "{devices}");
    assert!(table.contains("torch copy") && table.contains("GB/s"), "{table}");
    let verdict = |claim: &str| verdict(&table, claim);
    // Each run's estimates, the assumed rates' and the measured ceilings', beside its time.
    let estimates = claim_line(&table, "(gpu-check-quick) estimate against the run");
    assert!(
        estimates.contains("estimated wall time about ")
            && estimates.contains(" | after the probes, estimated wall time about ")
            && estimates.contains("; the process took ")
            && estimates.contains("; before warm-up: parity "),
        "{estimates}"
    );
    // What only a GPU can answer is skipped with its reason; the rest is judged and passes.
    for gpu_only in [
        "no other process held a context on the device",
        "best native kernel >= 85%",
        "power is instantaneous",
        "fp8 decode faster",
        "graph replay",
        "Llama 3.1 8B bf16 serving",
    ] {
        assert_eq!(verdict(gpu_only), "SKIP", "{gpu_only}: {table}");
    }
    for judged in ["every cell <= 105%", "gpu-check-quick: parity", "every suite produced a result"] {
        assert_eq!(verdict(judged), "PASS", "{judged}: {table}");
    }
    // Whether the device kept its equilibrium pace through the cells: shown, not judged.
    assert_eq!(verdict("gpu-check-quick: equilibrium, and its step timed again after the sweep"), "INFO", "{table}");
    assert!(table.contains("its step timed again after the sweep took"), "{table}");
    // The cells' stability too, with the check's own words, passed or failed.
    assert_eq!(verdict("gpu-check-quick: stability (cells' step-time CV)"), "INFO", "{table}");
    let stability = claim_line(&table, "gpu-check-quick: stability");
    assert!(stability.contains("passed: every cell's") || stability.contains("failed: unstable"), "{stability}");
    // And every cell's slow steps, summed by mode.
    assert_eq!(verdict("gpu-check-quick: slow steps against the telemetry readings"), "INFO", "{table}");
    assert!(table.contains("INFO    eager: ") && table.contains(" steps in "), "{table}");
    // And what the host allowed the run of its CPUs, with the cells a quota throttled.
    let allowed = "gpu-check-quick: host CPUs allowed, and cells a CPU quota throttled";
    assert_eq!(verdict(allowed), "INFO", "{table}");
    assert!(claim_line(&table, allowed).contains(" CPUs ("), "{table}");
    assert!(claim_line(&table, allowed).contains("; lynx bound none"), "{table}");
    // And the GPU math libraries the run's process loaded (the wheel's CUDA 13 ones, its CPU
    // device aside), with no host link for a CPU.
    let libraries = "gpu-check-quick: GPU libraries, and where the GPU sits";
    assert_eq!(verdict(libraries), "INFO", "{table}");
    let line = claim_line(&table, libraries);
    assert!(line.contains("libraries CUDA runtime 13.0, cuBLAS 13.") && line.contains(", cuDNN 9."), "{line}");
    assert!(!line.contains("PCI "), "{line}");
    // The whole check's time, shown on a CPU (the 8-minute goal is judged on a GPU).
    assert_eq!(verdict("the check's phases within 8 minutes"), "INFO", "{table}");
    assert!(table.contains("-second deadline: environment ") && table.contains(" s; the goal is a GPU's"), "{table}");
    assert!(table.contains(", gpu-check-quick "), "each phase's time: {table}");
    for kept in [
        "claims.txt",
        "devices.txt",
        "environment.txt",
        "roofline.json",
        "gpu-check-quick.log",
        "runs",
        "settings.txt",
        "elapsed.txt",
        "phases.txt",
        "devices.json",
    ] {
        assert!(out.join(kept).exists(), "{kept} is not under OUTDIR");
    }
    // The host as the check found it, to be read away from it: lynx's version and the libtorch
    // it resolved, the torch Python finds (whose summary heads the table), the driver's tools.
    let environment = std::fs::read_to_string(out.join("environment.txt")).unwrap();
    assert!(environment.contains(&format!("lynx {}", env!("CARGO_PKG_VERSION"))), "{environment}");
    assert!(
        environment.contains("libtorch_cpu.so => /") && !environment.contains("libtorch_cpu.so => not found"),
        "{environment}"
    );
    assert!(
        environment.contains("summary: torch ") && environment.contains("no GPU visible to torch"),
        "{environment}"
    );
    let torch = claim_line(&table, "environment: torch ");
    assert!(torch.contains("no GPU visible to torch"), "{torch}");
    // The host's CPU, whether it is a virtual machine and what its hypervisor took: this one is
    // (its cpuinfo has the flag), and CI's may be or not.
    let host = claim_line(&table, "environment: host: ");
    assert!(host.contains(" cores; ") && host.contains(" ticks of 10 ms in "), "{host}");
    assert!(host.contains("a virtual machine") || host.contains("no hypervisor flag"), "{host}");
    assert!(host.contains("; cpufreq governor "), "{host}");
    if Command::new("nvidia-smi").arg("-L").output().is_err() {
        assert!(environment.contains("no nvidia-smi on PATH"), "{environment}");
        assert!(!out.join("environment-end.txt").exists(), "a snapshot of boards no tool could read");
    }
    // The archive holds OUTDIR, and the table printed again from it elsewhere, running nothing
    // and writing nothing there (a folder brought back from a device may be read-only), is the
    // same table.
    let unpacked = work.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let untar = Command::new("tar").arg("xzf").arg(&archive).arg("-C").arg(&unpacked).status().unwrap();
    assert!(untar.success());
    std::fs::remove_dir_all(&out).unwrap();
    let kept = unpacked.join("check");
    std::fs::remove_file(kept.join("claims.txt")).unwrap();
    let again = script(Path::new(&root), "gpu-check.sh", &[kept.to_str().unwrap(), "--claims-only"]);
    assert_eq!(succeeded("gpu-check.sh --claims-only", &again), table);
    assert!(!kept.join("claims.txt").exists(), "--claims-only wrote into the folder it read");
    gpu_claims_are_judged_both_ways(&root, &kept);
    // The rest of a window after a fix: the suite run again into the folder the check filled
    // (here the one brought back and unpacked), its earlier result, log and time set aside, the
    // first pass's ceilings and phases kept, the whole table printed; here with its sampler at
    // 2 Hz and bound to one CPU, as a window testing whether the telemetry readings or the host
    // work's NUMA placement hold the steps up would run it.
    let first = result_file(&kept.join("runs"));
    let roofline = std::fs::read(kept.join("roofline.json")).unwrap();
    let slow_line = "gpu-check-quick: slow steps against the telemetry readings";
    assert!(claim_line(&table, slow_line).contains("; the sampler read its sources at 20 Hz"), "{table}");
    let kept_arg = kept.to_str().unwrap();
    let output = as_on_a_gpu_host(&[
        kept_arg,
        "--again",
        "--suites",
        "gpu-check-quick",
        "--deadline-s",
        "400",
        "--telemetry-hz",
        "02",
        "--cpus",
        "0",
    ]);
    let again = succeeded("gpu-check.sh --again", &output);
    let copy = std::fs::read_to_string(kept.join("telemetry-at-2-hz/suites/gpu-check-quick.toml")).unwrap();
    assert!(copy.ends_with("[telemetry]\nrate_hz = 2.0\n"), "{copy}");
    let rerun: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(result_file(&kept.join("runs"))).unwrap()).unwrap();
    assert_eq!(rerun["config"]["suite"]["telemetry"]["rate_hz"], 2.0, "the copy ran, not the built-in suite");
    assert_eq!(rerun["config"]["suite"]["name"], "gpu-check-quick");
    assert_eq!(rerun["harness"]["cpu_binding"], serde_json::json!({ "asked": "list", "cpus": "0" }), "bound");
    assert!(claim_line(&again, slow_line).contains("; the sampler read its sources at 2 Hz"), "{again}");
    let allowed = "gpu-check-quick: host CPUs allowed, and cells a CPU quota throttled";
    assert!(claim_line(&again, allowed).contains("1 CPUs (0), "), "{again}");
    assert!(claim_line(&again, allowed).contains("; bound to CPUs 0 (--cpus 0)"), "{again}");
    let aside = kept.join("earlier/pass-2");
    let set_aside = result_file(&aside.join("runs"));
    assert_eq!(set_aside.file_name(), first.file_name(), "the first pass's result, set aside");
    assert_ne!(result_file(&kept.join("runs")).file_name(), first.file_name(), "one result, the new one");
    assert!(aside.join("gpu-check-quick.log").exists() && kept.join("gpu-check-quick.log").exists());
    assert_eq!(std::fs::read(kept.join("roofline.json")).unwrap(), roofline, "no roofline phase ran again");
    assert_eq!(
        claim_line(&again, "the check's phases within 8 minutes"),
        claim_line(&table, "the check's phases within 8 minutes"),
        "judged on the first pass"
    );
    let pass = claim_line(&again, "(again) pass 2");
    assert!(
        pass.contains("INFO")
            && pass.contains("gpu-check-quick run again in ")
            && pass.contains("a 400-second deadline"),
        "{pass}"
    );
    assert!(pass.contains("what they replaced is under earlier/pass-2"), "{pass}");
    assert_eq!(crate::verdict(&again, "every suite produced a result"), "PASS", "{again}");
    assert!(!again.contains("(lynx builds)"), "one build made both: {again}");
    assert_eq!(std::fs::read_to_string(kept.join("again.txt")).unwrap().lines().count(), 1);
}

/// `--again` runs suites into a folder a check filled, on that check's device and settings: it
/// refuses a folder no check filled, no suites, and a device or kind of check of its own, and a
/// suite's name that is a path (its log is written as OUTDIR/NAME.log), before it moves anything.
#[test]
fn gpu_check_again_refuses_what_it_cannot_run_again() {
    let root = repo_path("");
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().to_str().unwrap();
    let run = |args: &[&str]| {
        let output = script(Path::new(&root), "gpu-check.sh", args);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {output:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert!(run(&[folder, "--again", "--suites", "gpu-check-quick"]).contains("--again needs an OUTDIR a check filled"));
    std::fs::write(out.path().join("settings.txt"), "device=cpu\nsuites=gpu-check-quick\nquick=true\n").unwrap();
    let kept = out.path().join("runs/cpu/run");
    std::fs::create_dir_all(&kept).unwrap();
    assert!(run(&[folder, "--again"]).contains("--again needs --suites"));
    for (own, value) in [("--device", "cuda:1"), ("--datasheet-tbs", "3.35")] {
        assert!(run(&[folder, "--again", "--suites", "gpu-check-quick", own, value]).contains("from"), "{own}");
    }
    assert!(run(&[folder, "--again", "--suites", "gpu-check-quick", "--quick"]).contains("takes the device, --quick"));
    assert!(run(&[folder, "--again", "--claims-only", "--suites", "gpu-check-quick"]).contains("give one"));
    for name in ["../gpu-check-quick", "a/b", ".hidden"] {
        let error = run(&[folder, "--again", "--suites", name]);
        assert!(error.contains(&format!("'{name}' is not a suite's name")), "{error}");
    }
    // A sampler's rate a suite could not take, or with nothing to run, or hiding a models folder.
    for rate in ["0", "101", "2.5", "x"] {
        let error = run(&[folder, "--again", "--suites", "gpu-check-quick", "--telemetry-hz", rate]);
        assert!(error.contains(&format!("--telemetry-hz {rate} is not a whole number of hertz")), "{error}");
    }
    assert!(run(&[folder, "--claims-only", "--telemetry-hz", "2"]).contains("give one"));
    // CPUs to bind the runs to that are none, or with nothing to run.
    for cpus in ["banana", "0-", "1,,2", "gpu"] {
        let error = run(&[folder, "--again", "--suites", "gpu-check-quick", "--cpus", cpus]);
        assert!(error.contains(&format!("--cpus {cpus} is neither gpu-local nor a CPU list")), "{error}");
    }
    assert!(run(&[folder, "--claims-only", "--cpus", "0"]).contains("give one"));
    let hidden = script_command(
        Path::new(&root),
        "gpu-check.sh",
        &[folder, "--again", "--suites", "gpu-check-quick", "--telemetry-hz", "2"],
    )
    .env("LYNX_MODELS_DIR", out.path())
    .output()
    .unwrap();
    assert_eq!(hidden.status.code(), Some(2), "{hidden:?}");
    assert!(String::from_utf8_lossy(&hidden.stderr).contains("would hide LYNX_MODELS_DIR"), "{hidden:?}");
    assert!(kept.exists() && !out.path().join("earlier").exists(), "nothing was moved");
}

/// gpu-check's archive comes back from a device only if it is at most 16 MiB: one over its cap
/// is made again without the telemetry samples and serving traces, which OUTDIR's left-out.txt
/// names; one under it holds everything. (A lynx that is not there ends the script at once, as
/// any end does, with its archive made.)
#[test]
fn gpu_check_archive_leaves_out_samples_that_would_not_come_back() {
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("check");
    let run = out.join("runs/host/r1");
    std::fs::create_dir_all(&run).unwrap();
    // Bytes no compressor shrinks much: 200 kB of samples and 100 kB of a serving trace.
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect()
    };
    std::fs::write(run.join("r1.samples.jsonl"), noise(200_000)).unwrap();
    std::fs::write(run.join("r1.served.jsonl"), noise(100_000)).unwrap();
    std::fs::write(run.join("r1.json"), "{}").unwrap();
    let archive = work.path().join("check.tgz");
    let check = |extra: &[&str]| {
        let args = [[out.to_str().unwrap(), "--archive", archive.to_str().unwrap()].as_slice(), extra].concat();
        let output = script_command(Path::new(&repo_path("")), "gpu-check.sh", &args)
            .env("LYNX_BIN", work.path().join("no-lynx"))
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{}", String::from_utf8_lossy(&output.stderr));
        let listed = Command::new("tar").arg("tzf").arg(&archive).output().unwrap();
        assert!(listed.status.success());
        let size = std::fs::metadata(&archive).unwrap().len();
        (
            String::from_utf8_lossy(&listed.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
            size,
        )
    };
    let (listed, said, size) = check(&[]);
    assert!(size > 300_000, "{size} bytes");
    for file in ["r1.samples.jsonl", "r1.served.jsonl", "r1.json"] {
        assert!(listed.contains(&format!("check/runs/host/r1/{file}")), "{file}: {listed}");
    }
    assert!(!out.join("left-out.txt").exists() && !said.contains("left out"), "{said}");

    let (listed, said, size) = check(&["--archive-max-bytes", "65536"]);
    assert!(size <= 65536, "{size} bytes");
    assert!(listed.contains("check/runs/host/r1/r1.json") && listed.contains("check/left-out.txt"), "{listed}");
    assert!(!listed.contains(".samples.jsonl") && !listed.contains(".served.jsonl"), "{listed}");
    assert!(said.contains("the archive left out the telemetry samples and serving traces"), "{said}");
    let left_out = std::fs::read_to_string(out.join("left-out.txt")).unwrap();
    assert!(left_out.contains("over 65536; they were left out of it:"), "{left_out}");
    assert!(left_out.contains("./runs/host/r1/r1.samples.jsonl\n./runs/host/r1/r1.served.jsonl"), "{left_out}");
    // A cap that is no number of bytes is refused before anything runs.
    let output =
        script(Path::new(&repo_path("")), "gpu-check.sh", &[out.to_str().unwrap(), "--archive-max-bytes", "1e6"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--archive-max-bytes 1e6 is not a whole number"));
}

/// The table's GPU claims, which no CPU run reaches, judged from a folder made to read as an
/// H200's: the CPU run's result as each GPU suite's, with an NVML board and power source, energy
/// counted, native and cuBLASLt ceilings and a Python matmul figure. Every claim passes where the
/// figures are good, and the ones they fall short of fail where they are not.
fn gpu_claims_are_judged_both_ways(root: &str, kept: &Path) {
    use serde_json::{json, Value};
    let result_path = result_file(&kept.join("runs"));
    let cpu: Value = serde_json::from_slice(&std::fs::read(&result_path).unwrap()).unwrap();
    let copy = 4.3e12;
    // A serving phase as the schema has it (parsed by its type first): one workload under one
    // bound, a rate simulated and one not, and a workload that could not be served.
    let figures = |ttft: f64| {
        json!({"ttft_p50_s": ttft / 2.0, "ttft_p99_s": ttft, "tpot_p50_s": 0.008, "tpot_p99_s": 0.01,
               "output_tok_per_s_per_device": 5000.0, "tok_per_s_per_user": 125.0})
    };
    let rate = |label: &str, simulated: Value| {
        json!({"label": label, "rate_per_s": 12.5, "requests": 100, "window_s": 20.0, "measured": figures(0.5),
               "simulated": simulated, "relative_error": null, "within_bound": true,
               "overhead_s": [1e-4, 2e-4, 3e-4], "iterations": 3000, "joules_per_output_token": 0.1,
               "joules_per_token": 0.01, "decode_step_ratio": 1.02})
    };
    // The latency-bounded rate's simulation as it is recorded now: medians over draws, their
    // spread, and the simulation again fed the loop's own steps.
    let mut bounded = rate("bounded", figures(0.45));
    bounded["simulated_draws"] = json!({"draws": 101, "ttft_p99_s": [0.41, 0.49], "tpot_p99_s": [0.0095, 0.0105]});
    bounded["at_loop_steps"] = json!({"simulated": figures(0.5),
                                      "relative_error": {"ttft_p99": 0.0, "tpot_p99": 0.0, "output_tok_per_s": 0.0}});
    bounded["at_loop_replay"] = json!({"simulated": figures(0.52),
                                       "relative_error": {"ttft_p99": -0.04, "tpot_p99": 0.0, "output_tok_per_s": 0.0}});
    bounded["decode_step_spread"] = json!({"loop_p90": 1.031, "cells_p90": 1.02});
    bounded["batches_off_line"] = json!([{"prefill": false, "batch": 16, "steps": 40, "pace": 1.21}]);
    // The loop's decode steps slow against their tables, and what its thread did in them; its
    // prefill steps had none slow, and are not said.
    bounded["decode_slow_steps"] = json!({"factor": 1.2, "steps": 50, "slow": 5, "during_readings": [],
        "thread": {"slow_preempted": 1, "others_preempted": 9, "slow_blocked": 0, "others_blocked": 0,
            "slow_cpu_s": 0.05, "slow_wall_s": 0.05, "others_cpu_s": 0.45, "others_wall_s": 0.45,
            "slow_runnable_s": 0.0, "others_runnable_s": 0.0},
        "allocator": {"slow": 0, "others": 0, "calls": 0}});
    bounded["prefill_slow_steps"] = json!({"factor": 1.2, "steps": 10, "slow": 0, "during_readings": []});
    bounded["steady"] = json!({"requests": 2000, "simulated": figures(1.9), "within_bound": true});
    // The warm-up's step timed again after each window: at the latency-bounded rate, and one
    // that could not be at the rate above it.
    bounded["pace_after"] = json!({"steps": 31, "median_s": 0.0671, "ratio": 1.02});
    let mut over = rate("over", json!({"unavailable": "the simulation saturated"}));
    over["pace_after"] = json!({"unavailable": "the warm-up step failed when timed again: out of memory"});
    // The loop's prefill steps by the step before them: both kinds at the first rate, only
    // after a decode step at the second.
    bounded["prefill_step_ratio_after_prefill"] = json!(1.01);
    bounded["prefill_step_ratio_after_decode"] = json!(1.05);
    over["prefill_step_ratio_after_decode"] = json!(0.98);
    // And the prefill cell nearest the loop's prefill steps, likewise.
    bounded["prefill_after"] = json!({"batch": 2, "prompt_len": 1024, "steps": 12, "median_s": 0.0931, "ratio": 1.04});
    over["prefill_after"] = json!({"unavailable": "its step at batch 2, prompt 1024 failed: out of memory"});
    // The throughput over the window's steady part: measured, and none in the simulated window.
    bounded["measured"]["steady_output_tok_per_s_per_device"] = json!(5600.0);
    bounded["simulated"]["steady_output_tok_per_s_per_device"] =
        json!({"unavailable": "no steady part: the arrivals spanned 7.9 s"});
    let lengths = json!({"mean": 900.0, "p50": 910.0, "p90": 1000.0, "p99": 1020.0, "min": 819, "max": 1024});
    let bound = json!({"name": "server", "ttft_p99_s": 2.0, "tpot_p99_s": 0.1});
    let workload = json!({"name": "short", "isl": {"range_ratio": 0.8, "length": 1024}, "osl": 128});
    let serving = json!({"server": "batch cap 64, whole prompts, graph steps", "served": [
        {"workload": workload, "bound": bound, "isl": lengths, "osl": lengths, "max_batch": 64, "mode": "graph",
         "rates": [bounded, over]},
        {"workload": workload, "bound": bound, "isl": lengths, "osl": lengths, "max_batch": 64,
         "rates": {"unavailable": "no rate keeps this bound"}},
    ]});
    serde_json::from_value::<lynx_schema::serving::ServingRecord>(serving.clone())
        .expect("the schema's serving record");
    // `counter`: each run's energy counter over its power integrated, summed over its windows;
    // its first window reads 12% higher and its second 12% lower, as 1-second windows did on the
    // H200 (resolution, which the sum does not see).
    let make = |folder: &Path, native_triad: f64, graph_share: f64, fp8_faster: bool, serving: &Value, counter: f64| {
        std::fs::create_dir_all(folder.join("runs/h200/run")).unwrap();
        let suites = ["gpu-check-llama-bf16", "gpu-check-llama-fp8", "gpu-check-moe", "gpu-check-mla"];
        std::fs::write(
            folder.join("settings.txt"),
            format!(
                "device=cuda:0\nsuites={}\nquick=false\ndatasheet_tbs=4.8\npython_tflops=700\ndeadline_s=570\n",
                suites.join(",")
            ),
        )
        .unwrap();
        let probe = |name: &str, kind: &str, dtype: &str, value: f64| json!({"name": name, "kind": kind, "dtype": dtype, "phase": "burst", "value": value, "method": "test"});
        let roofline = json!({"probes": [
            probe("native copy", "bandwidth", "f32", copy),
            probe("native triad", "bandwidth", "f32", native_triad),
            probe("cublaslt matmul", "matmul", "bf16", 690e12),
        ]});
        std::fs::write(folder.join("roofline.json"), roofline.to_string()).unwrap();
        for suite in suites {
            let mut result = cpu.clone();
            result["config"]["suite"]["name"] = json!(suite);
            result["device"]["uuid"] = json!("GPU-00112233-4455-6677-8899-aabbccddeeff");
            result["device"]["board"] = json!({"name": "NVIDIA H200"});
            // The bf16 run's host link and GPU libraries (a build that records them); the MoE
            // run's link unknown; the others' from a build before either.
            if suite == "gpu-check-llama-bf16" {
                result["device"]["host_link"] = json!({"pci_device": "0000:9a:00.0", "numa_node": 1,
                    "local_cpus": "56-111", "allowed_cpus_elsewhere": 56, "link_width": 16, "max_link_width": 16,
                    "max_link_speed": "32.0 GT/s PCIe"});
                result["warmup"]["link_at_end"] = json!({"speed": "16.0 GT/s PCIe", "width": 16});
                result["harness"]["gpu_libraries"] = json!([
                    {"name": "cuBLAS", "file": "/w/libcublas.so.13", "version": "13.1.0"},
                    {"name": "cuDNN", "file": "/w/libcudnn.so.9", "version": {"unavailable": "no cudnnGetProperty"}}]);
            }
            if suite == "gpu-check-moe" {
                result["device"]["host_link"] = json!({"unavailable": "no /sys/bus/pci/devices/0000:9a:00.0"});
                result["warmup"]["link_at_end"] = json!({"unavailable": "where the GPU sits is unknown"});
            }
            if suite != "gpu-check-llama-bf16" {
                result["harness"].as_object_mut().unwrap().remove("gpu_libraries");
            }
            result["telemetry"]["device_source"] = json!("nvml");
            result["telemetry"]["sources"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "nvml", "labels": {"power_w": "NVML_FI_DEV_POWER_INSTANT"}, "unavailable": {}}));
            for (i, cell) in result["cells"].as_array_mut().unwrap().iter_mut().enumerate() {
                let mut nvml = cell["telemetry"][0].clone();
                nvml["end_s"] = json!(nvml["start_s"].as_f64().unwrap() + 2.0);
                nvml["source"] = json!("nvml");
                nvml["power_mean_w"] = json!(500.0);
                let resolution = [1.12, 0.88].get(i).copied().unwrap_or(1.0);
                nvml["energy"] = json!({"joules": 500.0 * 2.0 * counter * resolution, "method": "counter"});
                cell["telemetry"].as_array_mut().unwrap().push(nvml);
                cell["other_device_processes"] = json!(0);
                // One cell's slow steps, most of them during the sampler's NVML readings; how long
                // its thread waited to run, where the caching allocator called the driver, and the
                // hypervisor's steal, where a lynx build recorded them (the fp8 suite's as older
                // builds did, without).
                cell["slow_steps"] = if i == 0 {
                    json!({"factor": 1.2, "steps": 100, "slow": 10, "during_readings": [
                        {"source": "nvml", "readings": 20, "reading_median_s": 0.0018, "slow": 8, "others_share": 0.1},
                        {"source": "nvml", "readings": 3, "reading_median_s": 0.004, "slow": 3, "others_share": 0.0,
                         "over_s": 0.001}],
                        "thread": {"slow_preempted": 7, "others_preempted": 9, "slow_blocked": 1, "others_blocked": 0,
                            "slow_cpu_s": 0.05, "slow_wall_s": 0.1, "others_cpu_s": 0.891, "others_wall_s": 0.9,
                            "slow_runnable_s": 0.03, "others_runnable_s": 0.0},
                        "allocator": {"slow": 4, "others": 9, "calls": 26},
                        "issue": {"slow_issue_s": 0.06, "slow_wall_s": 0.1, "others_issue_s": 0.81,
                            "others_wall_s": 0.9}})
                } else {
                    Value::Null
                };
                if suite == "gpu-check-llama-fp8" {
                    if let Some(thread) = cell.pointer_mut("/slow_steps/thread").and_then(Value::as_object_mut) {
                        thread.remove("slow_runnable_s");
                        thread.remove("others_runnable_s");
                    }
                    if let Some(slow) = cell.get_mut("slow_steps").and_then(Value::as_object_mut) {
                        slow.remove("allocator");
                        slow.remove("issue");
                    }
                    cell.as_object_mut().unwrap().remove("stolen_cpu_cores");
                } else {
                    cell["stolen_cpu_cores"] = json!(if i == 0 { 0.12 } else { 0.01 });
                    cell["other_cpu_cores_elsewhere"] = json!(if i == 0 { 3.5 } else { 0.25 });
                }
                if cell["step"] == "decode" && cell["batch"] == 16 {
                    cell["batch"] = json!(64);
                    let faster = (suite == "gpu-check-llama-fp8") == fp8_faster;
                    cell["step_time"]["median_s"] = json!(if faster { 0.010 } else { 0.020 });
                }
                if cell["step"] == "decode" && cell["batch"] == 1 && cell["mode"] == "graph" {
                    cell["roofline"]["achieved_bytes_per_s"] = json!(graph_share * copy);
                }
                if let Some(fraction) = cell["roofline"]["bandwidth_fraction"].as_f64() {
                    cell["roofline"]["bandwidth_fraction"] = json!(fraction.min(1.0));
                }
            }
            if suite == "gpu-check-llama-bf16" {
                result["serving"] = serving.clone();
                // The latency-bounded search's own point for the served workload: its many
                // requests reach the steady state a window of 100 does not.
                result["derived"]["latency_bounded"] = json!([{"workload": workload, "bound": bound, "point": {
                    "request_rate_per_s": 12.5, "requests": 2000, "ttft_p99_s": 1.9, "tpot_p99_s": 0.05,
                    "output_tok_per_s_per_device": 9000.0}}]);
                result["checks"].as_array_mut().unwrap().extend([
                    json!({"name": "simulation", "passed": false, "detail": "short server over: p99 TTFT +20%"}),
                    json!({"name": "serving_overhead", "passed": true, "detail": "0.1/0.2/0.3 ms"}),
                ]);
            }
            // The bf16 run's samples: 40 NVML readings, 2 of them slow (their calls timed), beside
            // the host's, which are not counted; the other runs' samples are not in the folder.
            result["telemetry"]["samples_file"] = json!(format!("{suite}.samples.jsonl"));
            if suite == "gpu-check-llama-bf16" {
                let calls = |clock: f64, fields: f64| {
                    json!([{"call": "nvmlDeviceGetFieldValues", "s": fields},
                           {"call": "nvmlDeviceGetClockInfo(SM)", "s": clock},
                           {"call": "nvmlDeviceGetMemoryInfo", "s": 0.00001}])
                };
                let mut lines = vec![json!({"kind": "segment", "segment": 1, "started_at": "2026-12-06T00:00:00Z"})];
                for i in 0..40 {
                    let mut nvml =
                        json!({"kind": "telemetry", "source": "nvml", "t_s": 0.05 * i as f64, "read_s": 0.0003});
                    // A slow reading's time is its calls'.
                    for (at, clock, fields) in [(7, 0.0021, 0.0001), (30, 0.0043, 0.0012)] {
                        if i == at {
                            nvml["slow_calls"] = calls(clock, fields);
                            nvml["read_s"] = json!(clock + fields + 0.00001);
                        }
                    }
                    lines.push(nvml);
                    lines.push(json!({"kind": "telemetry", "source": "host", "t_s": 0.05 * i as f64,
                        "slow_calls": calls(1.0, 1.0)}));
                }
                let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
                std::fs::write(folder.join(format!("runs/h200/run/{suite}.samples.jsonl")), text + "{\"kind\":\"tel")
                    .unwrap();
            }
            // The MoE run's: three quick NVML readings, none kept their calls.
            if suite == "gpu-check-moe" {
                let text: String = [0.0002, 0.0004, 0.0003]
                    .iter()
                    .map(|read_s| {
                        format!("{}\n", json!({"kind": "telemetry", "source": "nvml", "t_s": 1.0, "read_s": read_s}))
                    })
                    .collect();
                std::fs::write(folder.join(format!("runs/h200/run/{suite}.samples.jsonl")), text).unwrap();
            }
            let file = folder.join(format!("runs/h200/run/{suite}.json"));
            std::fs::write(file, result.to_string()).unwrap();
        }
    };
    let claims = |folder: &Path| {
        let output = script(Path::new(root), "gpu-check.sh", &[folder.to_str().unwrap(), "--claims-only"]);
        let table = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(!stderr.contains("Traceback"), "{stderr}");
        (output.status.code(), table)
    };
    let scratch = tempfile::tempdir().unwrap();
    let good = scratch.path().join("good");
    make(&good, 4.2e12, 0.8, true, &serving, 1.01);
    std::fs::write(good.join("elapsed.txt"), "470\n").unwrap();
    let (code, table) = claims(&good);
    for gpu in [
        "cuda:0 is its NVML board",
        "power is instantaneous",
        "energy counter within 5%",
        "best native kernel >= 85%",
        "cuBLASLt bf16 >= 95%",
        "graph replay gives the eager step's logits",
        "Llama 3.1 8B bf16 batch-1 graph decode >= 70%",
        "fp8 decode faster than bf16",
        "MoE and MLA cells complete",
        "every cell <= 105%",
        "no other process held a context on the device",
        "every suite produced a result",
        "the check's phases within 8 minutes",
        "Llama 3.1 8B bf16 serving loop replays its decode steps as graphs",
        "gpu-check-llama-bf16: simulated server is the loop's",
    ] {
        assert_eq!(verdict(&table, gpu), "PASS", "{gpu}: {table}");
    }
    assert!(table.contains("worst 4% (p99 TTFT or TPOT) at 12.50/s (bounded), over 1 rate(s) served"), "{table}");
    assert!(table.contains("native copy: 4.30 TB/s of 4.80"), "the best kernel is named: {table}");
    // Judged over each run's windows summed; the single windows shown, not judged.
    assert!(table.contains("each run's windows summed: gpu-check-llama-bf16: +1.0% over"), "{table}");
    assert_eq!(verdict(&table, "(energy) single cell windows against mean power x length"), "INFO");
    // Slow steps summed by mode against each source's readings, for stable runs too.
    assert_eq!(verdict(&table, "gpu-check-llama-bf16: slow steps against the telemetry readings"), "INFO");
    assert!(
        table.contains(
            "eager: 10 of 100 steps in 1 cells over 1.2x their median; of them 8 during nvml's readings (the other \
             steps: 10%; a reading's median 1.80 ms), 3 during nvml's readings over 1 ms (the other steps: 0%; a \
             reading's median 4.00 ms); the thread running them was preempted in 7 (the other steps: \
             10%), waited off its CPU in 1 (the other steps: 0%), on its CPU for 50% of their time (the other steps: \
             99%), waiting to run for 30% (the other steps: 0%); the host issued them in 60% of their time, 6.00 ms a \
             step (the other steps: 90%, 9.00 ms); libtorch's allocator called the driver for memory in \
             4 of them (the other steps: 10%; 26 calls over all the steps); the hypervisor stole at most 0.12 host \
             cores during a cell; other processes kept at least 3.50 host cores busy on CPUs lynx could not run on \
             during a cell"
        ),
        "{table}"
    );
    // The GPU library's slow readings, and the calls that took their time, slowest first (the
    // host's readings and a line torn by a kill left out); where the samples are not there, so.
    let readings = claim_line(&table, "gpu-check-llama-bf16: GPU library readings over 1 ms, and their calls");
    assert!(
        readings.contains(
            "2 of its 40 readings (a reading took 0.300 ms at the median, 5.510 ms at p99, 5.510 ms at most); their \
             calls, slowest first: nvmlDeviceGetClockInfo(SM) median 4.30 ms, largest 4.30 ms; \
             nvmlDeviceGetFieldValues median 1.20 ms, largest 1.20 ms; nvmlDeviceGetMemoryInfo median 0.01 ms, \
             largest 0.01 ms"
        ),
        "{readings}"
    );
    // The GPU libraries and where the GPU sits, where a run recorded them.
    let sits = |name: &str| claim_line(&table, &format!("{name}: GPU libraries, and where the GPU sits"));
    assert_eq!(verdict(&table, "gpu-check-llama-bf16: GPU libraries, and where the GPU sits"), "INFO");
    assert!(
        sits("gpu-check-llama-bf16").ends_with(
            "libraries cuBLAS 13.1.0, cuDNN (version unknown: no cudnnGetProperty); PCI 0000:9a:00.0 on NUMA node 1 \
             (CPUs 56-111), 56 CPUs lynx could run on off it; link x16 of x16, 32.0 GT/s PCIe at most; at the end of \
             warm-up 16.0 GT/s PCIe x16"
        ),
        "{table}"
    );
    assert!(
        sits("gpu-check-moe").ends_with(
            "host link unknown (no /sys/bus/pci/devices/0000:9a:00.0); at the end of warm-up unread (where the GPU \
             sits is unknown)"
        ),
        "{table}"
    );
    assert!(!table.contains("gpu-check-llama-fp8: GPU libraries"), "{table}");
    let moe = claim_line(&table, "gpu-check-moe: GPU library readings over 1 ms, and their calls");
    let quick = "none of its 3 readings (a reading took 0.300 ms at the median, 0.400 ms at p99, 0.400 ms at most)";
    assert!(moe.contains(quick), "{moe}");
    let fp8 = claim_line(&table, "gpu-check-llama-fp8: GPU library readings over 1 ms, and their calls");
    assert!(fp8.contains("not known: the run's samples file is not here"), "{fp8}");
    // A result from a build that recorded neither says neither.
    let fp8 = claim_line(&table, "gpu-check-llama-fp8: slow steps against the telemetry readings");
    assert!(fp8.contains("on its CPU for 50% of their time (the other steps: 99%)"), "{fp8}");
    for newer in ["waiting to run", "hypervisor", "allocator", "issued"] {
        assert!(!fp8.contains(newer), "{newer}: {fp8}");
    }
    assert!(table.contains("worst 13.1% over 2.00 s; 8 of"), "{table}");
    assert!(table.contains("(eager/graph) gpu-check-llama-bf16"), "{table}");
    assert_eq!(verdict(&table, "gpu-check-llama-bf16: serving loop's own time < 1 ms"), "PASS", "{table}");
    assert_eq!(verdict(&table, "gpu-check-llama-bf16: simulation within 15%"), "INFO", "{table}");
    assert!(table.contains("at 12.50/s (bounded)") && table.contains("not simulated"), "{table}");
    assert!(
        table.contains(
            "simulated 450 ms / 10.0 ms / 5000 (no steady part) tok/s (median of 101 draws; p99s' 10th-90th percentiles 410-490 ms, \
             9.5-10.5 ms); steps/table decode 1.02, prefill -; fed the loop's own steps, simulated 500 ms (+0%) / \
             10.0 ms (+0%); replaying them in order, simulated 520 ms (-4%) / 10.0 ms (+0%); batches no cell measured, \
             off the table's line: decode batch 16 at 1.21x (40 steps); decode steps' p90 over the tables' median 1.03 (the cells' 1.02); decode \
             steps over 1.2x their median step/table: 5 of 50, the thread running them was preempted in 1 (the other \
             steps: 20%), waited off its CPU in 0 (the other steps: 0%), on its CPU for 100% of their time (the other \
             steps: 100%), waiting to run for 0% (the other steps: 0%), libtorch's allocator called the driver for \
             memory in 0 of them (the other steps: 0%; 0 calls over all the steps); prefill steps after a prefill \
             1.01x, after a decode step 1.05x their tables; the warm-up's step timed again after the window took \
             1.02x its equilibrium median (67.1 ms over 31 steps); the prefill cell at batch 2, \
             prompt 1024, timed again after the window, took 1.04x the table (93.1 ms over 12 steps); steady state (2000 \
             simulated): 1900 ms / 10.0 ms, bound held, in the window held"
        ),
        "{table}"
    );
    assert!(
        table.contains(
            "prefill steps after a decode step 0.98x their tables; the warm-up's step could not be timed again after \
             the window: the warm-up step failed when timed again: \
             out of memory; the prefill cell could not be timed again after the window: its step at batch 2, prompt 1024 \
             failed: out of memory"
        ),
        "{table}"
    );
    assert!(table.contains("served short under server (graph steps) at 12.50/s"), "{table}");
    assert!(table.contains("measured p99 TTFT 500 ms / TPOT 10.0 ms / 5000 (steady 5600) tok/s, simulated"), "{table}");
    assert!(table.contains("served short under server (eager steps)"), "{table}");
    assert!(table.contains("not served: no rate keeps this bound"), "{table}");
    assert!(
        table.contains(
            "INFO    at 12.50/s the search's 2000 simulated requests give p99 TTFT 1900 ms / TPOT 50.0 ms / 9000 tok/s; the window's 100 measured \
             500 ms / 10.0 ms / 5000 (steady 5600) tok/s"
        ),
        "{table}"
    );
    assert_eq!(
        verdict(&table, "gpu-check-llama-bf16: served short under server (graph steps): window against steady state"),
        "INFO"
    );
    assert_eq!(code, Some(0), "{table}");
    assert!(
        table.contains("eager: fp8 10.00 ms, bf16 20.00 ms (0.500x); graph: fp8 10.00 ms, bf16 20.00 ms (0.500x)"),
        "{table}"
    );
    // With no --datasheet-tbs the native kernel is held to the datasheet `lynx devices --json`
    // names for the device (lynx's own, an H100's here: the list is made by the same code as the
    // binary's); a device lynx has none for is not judged, nor is one listed by a lynx build that
    // named no datasheet.
    let settings = std::fs::read_to_string(good.join("settings.txt")).unwrap();
    std::fs::write(good.join("settings.txt"), settings.replace("datasheet_tbs=4.8", "datasheet_tbs=")).unwrap();
    let bandwidth = "best native kernel >= 85% of the datasheet bandwidth";
    let listed = |name: &str| {
        let sheet = lynx_analysis::estimate::datasheet(name);
        json!([{"device": "cuda:0", "name": name, "datasheet": serde_json::to_value(sheet).unwrap()}])
    };
    let older_build = json!([{"device": "cuda:0", "name": "NVIDIA H200"}]);
    let pcie = "native copy: 4.30 TB/s of 2.00 (the H100 PCIe datasheet)";
    for (devices, shown, judged) in [
        (listed("NVIDIA H100 80GB HBM3"), "native copy: 4.30 TB/s of 3.35 (the H100 80GB HBM3 datasheet)", "PASS"),
        (listed("NVIDIA H100 PCIe"), pcie, "PASS"),
        (
            listed("NVIDIA A100-SXM4-80GB"),
            "lynx has no datasheet for NVIDIA A100-SXM4-80GB: give --datasheet-tbs",
            "SKIP",
        ),
        (listed("NVIDIA GH200 480GB"), "lynx has no datasheet for NVIDIA GH200 480GB: give --datasheet-tbs", "SKIP"),
        (
            older_build,
            "devices.json names no datasheet for NVIDIA H200 (a lynx build before 2026-12-06): give --datasheet-tbs",
            "SKIP",
        ),
        (json!([]), "the device's name was not found (devices.json): give --datasheet-tbs", "SKIP"),
    ] {
        std::fs::write(good.join("devices.json"), devices.to_string()).unwrap();
        let (_, table) = claims(&good);
        assert_eq!(verdict(&table, bandwidth), judged, "{table}");
        assert!(table.contains(shown), "{table}");
    }
    std::fs::write(good.join("settings.txt"), settings).unwrap();
    assert!(!table.contains("(ceilings)") && !table.contains("(lynx builds)"), "{table}");
    // Where the folder holds no roofline phase's figures (it was cut, or only --again ran), the
    // bf16 run's own roofline stands in, saying so; results from two lynx builds (a fix between
    // passes) are named.
    let roofline = std::fs::read(good.join("roofline.json")).unwrap();
    let bf16_path = good.join("runs/h200/run/gpu-check-llama-bf16.json");
    let bf16_before = std::fs::read(&bf16_path).unwrap();
    let mut bf16: Value = serde_json::from_slice(&bf16_before).unwrap();
    bf16["roofline"] = serde_json::from_slice(&roofline).unwrap();
    bf16["harness"]["binary_sha256"] = json!("0123456789abcdef");
    std::fs::write(&bf16_path, bf16.to_string()).unwrap();
    std::fs::remove_file(good.join("roofline.json")).unwrap();
    let (code, table) = claims(&good);
    assert_eq!(verdict(&table, bandwidth), "PASS", "{table}");
    assert!(table.contains("native copy: 4.30 TB/s of 4.80"), "{table}");
    assert!(
        table.contains("no roofline phase's figures (roofline.json): gpu-check-llama-bf16's own roofline stands in"),
        "{table}"
    );
    let builds = claim_line(&table, "(lynx builds)");
    assert!(builds.contains("gpu-check-llama-bf16: commit ") && builds.contains("binary 0123456789ab"), "{builds}");
    assert_eq!(code, Some(0), "{table}");
    std::fs::write(good.join("roofline.json"), roofline).unwrap();
    std::fs::write(&bf16_path, bf16_before).unwrap();
    // As graphs fp8 must be the faster; eagerly (launch-bound at batch 64, where fp8's extra
    // kernels cost the host) no more than 5% slower.
    let fp8_path = good.join("runs/h200/run/gpu-check-llama-fp8.json");
    let fp8_at = |eager_s: f64, graph_s: f64| {
        let mut fp8: Value = serde_json::from_slice(&std::fs::read(&fp8_path).unwrap()).unwrap();
        for cell in fp8["cells"].as_array_mut().unwrap() {
            if cell["step"] == "decode" && cell["batch"] == 64 {
                let graph = cell["mode"] == "graph";
                cell["step_time"]["median_s"] = json!(if graph { graph_s } else { eager_s });
                if !graph {
                    cell["launch_bound"] = json!(true);
                    cell["issue_median_s"] = json!(eager_s * 0.95);
                }
            }
        }
        std::fs::write(&fp8_path, fp8.to_string()).unwrap();
        claims(&good)
    };
    let (code, table) = fp8_at(0.0208, 0.010);
    assert_eq!(verdict(&table, "fp8 decode faster than bf16"), "PASS", "{table}");
    assert!(table.contains("eager: fp8 20.80 ms, issued in 19.76, bf16 20.00 ms (1.040x)"), "{table}");
    assert_eq!(code, Some(0), "{table}");
    let (code, table) = fp8_at(0.0212, 0.010);
    assert_eq!(verdict(&table, "fp8 decode faster than bf16"), "FAIL", "{table}");
    assert_eq!(code, Some(1), "{table}");
    let (code, table) = fp8_at(0.010, 0.030);
    assert_eq!(verdict(&table, "fp8 decode faster than bf16"), "FAIL", "{table}");
    assert!(table.contains("graph: fp8 30.00 ms, bf16 20.00 ms (1.500x)"), "{table}");
    assert_eq!(code, Some(1), "{table}");
    let bad = scratch.path().join("bad");
    // A serving loop whose graph steps could not be captured served eagerly.
    let mut eager_serving = serving.clone();
    eager_serving["graph_steps_failed"] = json!("at batch 1: capturing the step: CUDA error: operation not permitted");
    eager_serving["served"][0].as_object_mut().unwrap().remove("mode");
    // And replaying the loop's steps, the simulation missed it: another server than the loop's.
    eager_serving["served"][0]["rates"][0]["at_loop_replay"]["relative_error"]["ttft_p99"] = json!(0.31);
    let parsed: lynx_schema::serving::ServingRecord = serde_json::from_value(eager_serving.clone()).unwrap();
    assert!(parsed.graph_steps_failed.is_some(), "the schema's field");
    make(&bad, 3.0e12, 0.3, false, &eager_serving, 1.08);
    std::fs::write(bad.join("elapsed.txt"), "530\n").unwrap();
    std::fs::write(
        bad.join("phases.txt"),
        "environment\t1000\nroofline\t1004\ngpu-check-llama-bf16\t1060\nend\t1530\n",
    )
    .unwrap();
    std::fs::write(bad.join("roofline.json"), r#"{"probes": [{"name": "native copy", "kind": "bandwidth", "dtype": "f32", "phase": "burst", "value": 3.0e12, "method": "test"}]}"#).unwrap();
    // Another process on the device while a cell was measured.
    let moe_path = bad.join("runs/h200/run/gpu-check-moe.json");
    let mut moe: Value = serde_json::from_slice(&std::fs::read(&moe_path).unwrap()).unwrap();
    moe["cells"][0]["other_device_processes"] = json!(2);
    std::fs::write(&moe_path, moe.to_string()).unwrap();
    let (code, table) = claims(&bad);
    let shared = claim_line(&table, "no other process held a context on the device");
    assert!(shared.contains("FAIL") && shared.contains("gpu-check-moe ") && shared.contains(": 2"), "{shared}");
    for short in [
        "energy counter within 5%",
        "best native kernel >= 85%",
        "cuBLASLt bf16 >= 95%",
        "Llama 3.1 8B bf16 batch-1 graph decode >= 70%",
        "fp8 decode faster than bf16",
        "Llama 3.1 8B bf16 serving loop replays its decode steps as graphs",
        "gpu-check-llama-bf16: simulated server is the loop's",
        "the check's phases within 8 minutes",
    ] {
        assert_eq!(verdict(&table, short), "FAIL", "{short}: {table}");
    }
    assert!(
        table.contains(
            "530 s, against the 570-second deadline: environment 4 s, roofline 56 s, gpu-check-llama-bf16 470 s"
        ),
        "{table}"
    );
    assert!(table.contains("capturing them failed, so it served eagerly: at batch 1"), "{table}");
    assert_eq!(code, Some(1), "{table}");
}

/// A bandwidth that is not one is bad input, before anything runs.
#[test]
fn gpu_check_refuses_a_datasheet_that_is_not_a_bandwidth() {
    for bad in ["0", "fast", "-1", "4.8.1"] {
        let output = script(Path::new(&repo_path("")), "gpu-check.sh", &["/tmp/unused", "--datasheet-tbs", bad]);
        assert_eq!(output.status.code(), Some(2), "{bad}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&format!("--datasheet-tbs {bad} is not a bandwidth in TB/s")), "{stderr}");
    }
}

/// A deadline too close for a phase: the phase is not started, the table says so and why, and
/// the check fails, in about the time the phases that fit take.
#[test]
fn gpu_check_starts_no_phase_it_cannot_finish_before_its_deadline() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let out = tempfile::tempdir().unwrap();
    let root = repo_path("");
    let started = std::time::Instant::now();
    let output =
        script(Path::new(&root), "gpu-check.sh", &[out.path().to_str().unwrap(), "--quick", "--deadline-s", "48"]);
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{table}\n{}", String::from_utf8_lossy(&output.stderr));
    for phase in ["roofline", "gpu-check-quick"] {
        let line = verdict(&table, &format!("({phase}) deadline"));
        assert_eq!(line, "INFO", "{table}");
    }
    assert!(table.contains("not started: under 20 s left before the 48-second deadline"), "{table}");
    assert_eq!(verdict(&table, "every suite produced a result"), "FAIL", "{table}");
    assert!(started.elapsed().as_secs() < 48, "the check overran its deadline: {table}");
    // A phase that ran with less than its time (devices, 23 s of its 30) is named as cut.
    assert!(verdict(&table, "(devices) deadline") == "INFO" && table.contains("cut to"), "{table}");
    let bad = script(Path::new(&root), "gpu-check.sh", &["--deadline-s", "0"]);
    assert_eq!(bad.status.code(), Some(2));
    let nothing_kept =
        script(Path::new(&root), "gpu-check.sh", &[out.path().join("none").to_str().unwrap(), "--claims-only"]);
    assert_eq!(nothing_kept.status.code(), Some(2));
}

/// A suite that runs to its time limit is stopped there, and the table says that its result
/// (if any) holds only what it had measured by then. A stand-in lynx whose `run` never ends, so
/// that the limit is what ends it: with a 75-second deadline the suite gets about 33 s.
#[test]
fn gpu_check_says_which_suite_its_time_limit_stopped() {
    let work = tempfile::tempdir().unwrap();
    let fake = work.path().join("lynx");
    std::fs::write(
        &fake,
        "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'lynx 0.0.0 (stand-in)' ;;\n  devices) echo 'cpu: stand-in' ;;\n  \
         roofline) echo '{\"probes\": []}' ;;\n  run) exec sleep 600 ;;\nesac\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = work.path().join("check");
    let started = std::time::Instant::now();
    let output = script_command(
        Path::new(&repo_path("")),
        "gpu-check.sh",
        &[out.to_str().unwrap(), "--quick", "--deadline-s", "75"],
    )
    .env("LYNX_BIN", &fake)
    .output()
    .unwrap();
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{table}\n{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(verdict(&table, "(gpu-check-quick) deadline"), "INFO", "{table}");
    let line = claim_line(&table, "(gpu-check-quick) deadline");
    assert!(line.contains("-second limit: its result holds what it had measured by then"), "{line}");
    let environment = std::fs::read_to_string(out.join("environment.txt")).unwrap();
    assert!(environment.contains("lynx 0.0.0 (stand-in)"), "{environment}");
    assert!(started.elapsed().as_secs() < 75, "the check overran its deadline: {table}");
}

/// The processes whose command line names `text`.
fn processes_naming(text: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let line = std::fs::read(e.path().join("cmdline")).ok()?;
            let line = String::from_utf8_lossy(&line).replace('\0', " ");
            line.contains(text).then_some(line)
        })
        .collect()
}

/// A SIGTERM to gpu-check.sh while it runs a suite reaches that lynx run, which stops after its
/// step in flight and writes a partial result; the phases left are not started, the table is
/// printed with what there is, and no process of the check is left running.
#[test]
fn sigterm_to_gpu_check_stops_its_lynx_and_prints_the_table() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let out = tempfile::tempdir().unwrap();
    let folder = out.path().join("check");
    let root = repo_path("");
    let mut child = script_command(Path::new(&root), "gpu-check.sh", &[folder.to_str().unwrap(), "--quick"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(240);
    while !files_under(&folder.join("runs")).iter().any(|f| f.to_string_lossy().ends_with(".plan.json")) {
        assert!(std::time::Instant::now() < deadline, "the suite's run did not start within 240 s");
        assert!(child.try_wait().unwrap().is_none(), "the check ended before its run started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    // SAFETY: kill takes no pointers.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let stopped = std::time::Instant::now();
    let output = child.wait_with_output().unwrap();
    let table = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stopped.elapsed().as_secs() < 60, "the check took {:?} to stop: {stderr}", stopped.elapsed());
    assert!(table.contains("every suite produced a result"), "the table was printed: {table}\n{stderr}");
    let log = std::fs::read_to_string(folder.join("gpu-check-quick.log")).unwrap();
    assert!(log.contains("stopped by signal 15"), "lynx heard the signal: {log}");
    let results: Vec<_> = files_under(&folder.join("runs"))
        .into_iter()
        .filter(|f| {
            f.extension().is_some_and(|e| e == "json")
                && !f.to_string_lossy().contains(".plan.")
                && !f.to_string_lossy().contains(".current.")
        })
        .collect();
    let statuses: Vec<String> = results
        .iter()
        .filter_map(|f| serde_json::from_slice::<serde_json::Value>(&std::fs::read(f).ok()?).ok())
        .filter_map(|v| v["status"].as_str().map(str::to_owned))
        .collect();
    assert!(statuses.iter().any(|s| s == "partial"), "a partial result was written: {results:?} {statuses:?}\n{log}");
    let left = processes_naming(folder.to_str().unwrap());
    assert!(left.is_empty(), "processes of the check still running: {left:?}");
}

/// The repository's files as a clean checkout has them: every file git tracks or would track
/// (so uncommitted work is tested too), nothing it ignores.
fn clean_copy(to: &Path) {
    let root = repo_path("");
    let listed = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(listed.status.success(), "git ls-files: {}", String::from_utf8_lossy(&listed.stderr));
    for name in listed.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = std::str::from_utf8(name).unwrap();
        let from = Path::new(&root).join(name);
        if !from.is_file() {
            continue; // deleted in the working tree
        }
        std::fs::create_dir_all(to.join(name).parent().unwrap()).unwrap();
        std::fs::copy(&from, to.join(name)).unwrap();
    }
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(["-c", "user.name=lynx tests", "-c", "user.email=tests@lynxbench.invalid"])
            .args(args)
            .current_dir(to)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "the working tree"]);
}

/// README: `scripts/lynx run`, then `scripts/test.sh`. The run must make its key, say where,
/// and leave the published record as it was, so the test suite's check of `results/` still
/// passes. (The run uses the fixture suite rather than `cpu` to keep this test short; the test
/// command's own check of `results/` is the part of it a run could break.)
#[test]
fn the_readmes_two_commands_work_in_the_readmes_order_on_a_clean_copy() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let clone = tempfile::tempdir().unwrap();
    clean_copy(clone.path());
    let suite = clone.path().join("test-suite.toml");
    std::fs::write(&suite, common::fixture("models/suites/test.toml").replace("test-small", "lynx-ref-small")).unwrap();
    let config = tempfile::tempdir().unwrap();
    let output = Command::new("bash")
        .args(["scripts/lynx", "run", "--suite", suite.to_str().unwrap()])
        .current_dir(clone.path())
        .env("LYNX_BIN", env!("CARGO_BIN_EXE_lynx"))
        .env("XDG_CONFIG_HOME", config.path())
        .env_remove("LYNX_MODELS_DIR")
        .output()
        .unwrap();
    let stdout = succeeded("scripts/lynx run", &output);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("made a signing key") && stderr.contains("lynx.pub"), "{stderr}");
    assert!(stdout.contains("signed: runs/"), "{stdout}");

    // Nothing the run wrote is in the published record, or anywhere git would see it.
    std::fs::remove_file(&suite).unwrap();
    let status = Command::new("git").args(["status", "--porcelain"]).current_dir(clone.path()).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "", "the run left files git sees");
    let unverified = common::unverified(&clone.path().join("results"), &clone.path().join("results/keys"));
    assert!(unverified.is_empty(), "{unverified:?} do not verify against results/keys");
}
