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
fn arguments_clap_refuses_are_one_line_and_no_command_shows_the_usage() {
    let line = bad_input(&["export", "x.intoto.json", "--pubkey", "k.pub", "--format", "yaml"]);
    assert!(line.contains("'yaml'") && line.contains("possible values"), "{line}");
    let line = bad_input(&["shortlist", "results", "--workload", "m", "--ttft-p99", "1s", "--tpot-p99", "1s"]);
    assert!(line.contains("--workload") && line.contains("MODEL:ISL/OSL"), "{line}");
    let output = lynx(&[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("Usage: lynx <COMMAND>"));
}
