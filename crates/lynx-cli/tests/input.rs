//! Bad input: one line naming what was wrong, exit code 2, and nothing written.

mod common;

use common::*;

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
    // Each GPU backend of libtorch is said to have loaded or not (with why), in words.
    assert!(line.contains("libtorch_cuda.so ") && line.contains("libtorch_hip.so not loaded: "), "{line}");
    assert!(!line.contains(": true") && !line.contains(": false"), "{line}");
}

#[test]
fn malformed_toml_is_bad_input() {
    bad_suite(|s| s.replace("seed = 11", "seed = = 11"), &["suites/test.toml"]);
}

#[test]
fn unknown_keys_are_bad_input() {
    bad_suite(|s| s.replace("seed = 11", "seed = 11\nbatchez = [2]"), &["suites/test.toml", "batchez"]);
    // A bound the serving phase names that the run does not hold to (its model's defaults
    // here) would serve nothing, saying nothing.
    bad_suite(
        |s| s.replace("[roofline]", "[serve]\nrequests = 20\nbounds = [\"Server\"]\n\n[roofline]"),
        &["suites/test.toml", "serve.bounds names 'Server'", "(server, interactive)"],
    );
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
    // A models folder that is not there is not the built-in catalogue's stand-in.
    for args in [&["run", "--models", "/no/such/models"][..], &["models", "--models", "/no/such/models"]] {
        let line = bad_input(args);
        assert!(line.contains("models folder /no/such/models"), "{line}");
    }
    let line = bad_input(&["run", "--models", "Cargo.toml"]);
    assert!(line.contains("models folder Cargo.toml: is not a folder"), "{line}");
}

/// Weights that cannot fit in the memory free now are refused before anything is built, where
/// building them had the kernel's out-of-memory killer end every worker the supervisor started:
/// the whole model on the device, and the parity check's float64 reference on the host. No
/// host has the 43 and 24 TiB these need.
#[test]
fn a_model_whose_weights_cannot_fit_is_refused_before_anything_is_built() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for (edit, says) in [
        (
            &(|s: &str| s.replace("num_layers = 2", "num_layers = 16777216")) as &dyn Fn(&str) -> String,
            "test-small: its weights need ",
        ),
        (
            &|s: &str| s.replace("vocab_size = 4096", "vocab_size = 16777216").replace("hidden_size = 256", "hidden_size = 65536"),
            "test-small: the parity check's float64 reference and its copy at fp32 (2 of the model's layers, with its whole \
             embedding and head) need",
        ),
    ] {
        let models = models(str::to_owned);
        let shape = models.path().join("test-small.toml");
        std::fs::write(&shape, edit(&std::fs::read_to_string(&shape).unwrap())).unwrap();
        let out = tempfile::tempdir().unwrap();
        let output = lynx(&run_args(models.path(), out.path()));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        let line = stderr.lines().last().unwrap_or_default();
        assert!(line.contains(says) && line.contains(" is free (the host's MemAvailable)"), "{stderr}");
        assert!(!stderr.contains("killed"), "{stderr}");
        assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a refused run left a folder");
        // Its plan is refused with the same line (the host's free memory read again).
        let planned = bad_input(&[run_args(models.path(), out.path()).as_slice(), &["--plan"]].concat());
        let need = |line: &str| line.split(" and ").next().unwrap_or_default().to_owned();
        assert_eq!(need(&planned), need(line), "{planned}");
        assert!(planned.contains(" is free (the host's MemAvailable)"), "{planned}");
    }
    // A node's runs all at once each build their parity reference at once, in one host's memory:
    // 64 references of about 0.8 GiB need more than this host has, where one fits; in turn, one
    // at a time, they fit.
    let models = models(str::to_owned);
    let shape = models.path().join("test-small.toml");
    std::fs::write(
        &shape,
        std::fs::read_to_string(&shape).unwrap().replace("vocab_size = 4096", "vocab_size = 131072"),
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let devices = vec!["cpu"; 64].join(",");
    let mut node = run_args(models.path(), out.path());
    let at = node.iter().position(|a| *a == "--device").unwrap();
    node.splice(at..at + 2, ["--devices", devices.as_str(), "--plan"]);
    let planned = lynx(&node);
    let stderr = String::from_utf8_lossy(&planned.stderr);
    assert_eq!(planned.status.code(), Some(2), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert!(
        line.contains(" of host memory for each of the node's 64 runs at once (")
            && line.contains("; `--one-at-a-time` runs them in turn) and "),
        "{stderr}"
    );
    node.push("--one-at-a-time");
    let in_turn = lynx(&node);
    assert!(in_turn.status.success(), "{}", String::from_utf8_lossy(&in_turn.stderr));
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a plan left a folder");
}

/// A suite none of whose cells fits beside the weights (its smallest prefill and decode cells
/// both skipped) is refused once the model is built, before warm-up loops a step no cell
/// measures; nothing is left in OUT.
#[test]
fn a_suite_no_cell_of_which_fits_is_refused_before_warm_up() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let output =
        lynx_command().args(run_args(models.path(), out.path())).env("LYNX_FREE_MEMORY_BYTES", "1").output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    assert!(line.contains("suite test: no cell fits on cpu beside the weights of test-small: the smallest prefill batch 1 prompt 16 needs"), "{line}");
    assert!(
        line.contains("and the smallest decode batch 1 ctx 512 needs")
            && line.contains("stated by LYNX_FREE_MEMORY_BYTES"),
        "{line}"
    );
    assert!(!stderr.contains("lynx: warm-up ") && !stderr.contains("equilibrium"), "{stderr}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a refused run left a folder");
    // Its plan is refused with the same line, before anything is built.
    let planned = lynx_command()
        .args([run_args(models.path(), out.path()).as_slice(), &["--plan"]].concat())
        .env("LYNX_FREE_MEMORY_BYTES", "1")
        .output()
        .unwrap();
    assert_eq!(planned.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&planned.stderr).trim_end(), line);
}

#[test]
fn arguments_clap_refuses_are_one_line_and_no_command_shows_the_usage() {
    let line = bad_input(&["export", "x.intoto.json", "--pubkey", "k.pub", "--format", "yaml"]);
    assert!(line.contains("'yaml'") && line.contains("possible values"), "{line}");
    let line = bad_input(&["shortlist", "results", "--workload", "m", "--ttft-p99", "1s", "--tpot-p99", "1s"]);
    assert!(line.contains("--workload") && line.contains("MODEL:ISL/OSL"), "{line}");
    let output = lynx(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("Usage: lynx <COMMAND>"));
}

/// Issue 17: a suite, key or model "file" that is a device or a FIFO is refused at once, one
/// line naming it (before, `--suite /dev/zero` grew to 8.5 GB and a FIFO hung for ever).
#[test]
fn special_files_are_refused_without_being_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("suite.toml");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let start = std::time::Instant::now();
    for suite in ["/dev/zero", fifo.to_str().unwrap()] {
        let line = bad_input(&["run", "--suite", suite, "--device", "cpu", "--unsigned"]);
        assert!(line.contains(suite) && line.contains("not a regular file"), "{line}");
    }
    let line = bad_input(&["run", "--suite", "test", "--device", "cpu", "--key", "/dev/zero"]);
    assert!(line.contains("/dev/zero") && line.contains("not a regular file"), "{line}");
    let line = bad_input(&["verify", "x.intoto.json", "--pubkey", fifo.to_str().unwrap()]);
    assert!(line.contains("not a regular file"), "{line}");
    let line = bad_input(&["models", "import", "/dev/zero"]);
    assert!(line.contains("not a regular file"), "{line}");
    assert!(start.elapsed().as_secs() < 30, "{:?}", start.elapsed());
}

/// Issue 17: every duration of a suite is bounded (the sustained probe of 1e300 s ran for 11
/// minutes), and the number is printed as a reader writes it.
#[test]
fn unbounded_durations_are_bad_input() {
    bad_suite(
        |s| s.replace("sustained_s = 0.5", "sustained_s = 1e300"),
        &["roofline.sustained_s", "at most 3600 s, got 1e300 s"],
    );
    bad_suite(|s| s.replace("window_s = 1.0", "window_s = 10.0"), &["warmup.window_s", "warmup.max_s"]);
    bad_suite(|s| format!("{s}\n[parity]\nlayers = 3\n"), &["parity.layers (3)", "2 layers"]);
    bad_suite(
        |s| s.replace("max_cpu_throttled_s = 3600.0", "max_cpu_throttled_s = 1e9"),
        &["measure.max_cpu_throttled_s", "at most 3600 s"],
    );
    bad_suite(
        |s| s.replace("max_cpu_throttled_s = 3600.0", "max_cpu_throttled_s = -1.0"),
        &["measure.max_cpu_throttled_s"],
    );
}

/// Issue 17: control characters and bidi overrides in what a user gave come back inert in the
/// one error line (a suite name holding ESC and U+202E).
#[test]
fn errors_echo_no_control_characters() {
    let models = models(|s| s.replace("name = \"test\"", "name = \"t\u{1b}[2J\u{202e}x\""));
    let out = tempfile::tempdir().unwrap();
    let line = bad_input(&run_args(models.path(), out.path()));
    assert!(!line.contains(['\u{1b}', '\u{202e}']), "{line:?}");
    assert!(line.contains("\\u{1b}[2J\\u{202e}x"), "{line}");
}

/// Issue 17 item 11: small things a user hits, each one line and exit 2.
#[test]
fn a_file_where_a_folder_is_expected_and_negative_prices_are_one_line() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    let models = models(str::to_owned);
    let line = bad_input(&run_args(models.path(), file.path()));
    assert!(line.contains(path) && line.contains("not a folder"), "{line}");
    assert_eq!(line.matches(path).count(), 1, "the path once: {line}");
    let line = bad_input(&["keygen", "--out", path]);
    assert!(line.contains(path) && line.contains("not a folder"), "{line}");
    assert_eq!(line.matches(path).count(), 1, "the path once: {line}");
    // A site or a collection written where a file is: said before anything is verified.
    let (results, keys) = (repo_path("results"), repo_path("results/keys"));
    for (flag, command) in [("--out", "report"), ("--into", "collect")] {
        let line = bad_input(&[command, &results, flag, path, "--keys", &keys]);
        assert_eq!(line.trim_end(), format!("lynx: error: {flag} {path}: is not a folder"), "{command}");
    }
    let line = bad_input(&["run", "--suite", "test", "--price-per-hour", "-1"]);
    assert!(line.contains("--price-per-hour") && line.contains("positive"), "{line}");
    let line = bad_input(&["roofline", "--sustained-s", "1e300"]);
    assert!(line.contains("--sustained-s") && line.contains("3600"), "{line}");
}

#[test]
fn a_cpu_binding_that_cannot_be_made_is_bad_input() {
    let models = models(str::to_owned);
    let out = tempfile::tempdir().unwrap();
    let run = run_args(models.path(), out.path());
    for (cpus, says) in [
        (
            "gpu-local",
            "--cpus: gpu-local binds a run to its GPU's CPUs, and the cpu device has no GPU; give a CPU list",
        ),
        ("1023", "--cpus: CPUs 1023 are not ones this process may run on ("),
        ("banana", "\"banana\" is neither gpu-local nor a CPU list (0-15, 0,2,4-7)"),
        ("0-4096", "\"0-4096\" names CPU 4096: lynx binds CPUs numbered below 1024"),
    ] {
        // The run and its plan refuse it alike, before anything is written.
        for plan in [&[][..], &["--plan"]] {
            let line = bad_input(&[run.as_slice(), &["--cpus", cpus], plan].concat());
            assert!(line.contains(says), "{cpus}: {line}");
        }
        assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "{cpus}: a run folder was written");
    }
    // A node's runs each bind themselves; one that could not is refused before any starts.
    let (models, out_dir) = (models.path().to_str().unwrap(), out.path().to_str().unwrap());
    let node = ["run", "--suite", "test", "--models", models, "--out", out_dir, "--all-devices", "--cpus", "gpu-local"];
    let line = bad_input(&node);
    assert!(line.contains("the cpu device has no GPU"), "{line}");
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a node's folder was written");
    // A node's list naming a device this host does not have is refused, run and plan alike,
    // naming it and the devices there are.
    for plan in [&[][..], &["--plan"]] {
        let listed = ["run", "--suite", "test", "--models", models, "--out", out_dir, "--devices", "cpu,cuda:7"];
        let line = bad_input(&[&listed[..], plan].concat());
        assert!(line.contains("cuda:7 is not a device here") && line.contains("available: cpu"), "{line}");
    }
    assert!(std::fs::read_dir(out.path()).unwrap().next().is_none(), "a node's folder was written");
    // A resume is bound as it started.
    let line = bad_input(&["run", "--resume", out.path().to_str().unwrap(), "--cpus", "0"]);
    assert!(line.contains("'--resume <RUN_DIR>' cannot be used with '--cpus <gpu-local|LIST>'"), "{line}");
}
