//! What the signing tests and the benchmark share: the test result and a fresh key pair.
#![allow(dead_code)] // each test file uses its own part

use lynx_attest::{generate, read_signing_key, read_verifying_key, SigningKey, VerifyingKey};
use lynx_schema::result::RunResult;
use std::path::{Path, PathBuf};

/// The samples file the test result names.
pub const SAMPLES_FILE: &str = "run.samples.jsonl";

/// A file of tests/data.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// The test result (tests/data/result.json), naming [`SAMPLES_FILE`] as its samples file.
pub fn result() -> RunResult {
    let mut result: RunResult = serde_json::from_slice(&std::fs::read(data("result.json")).unwrap()).unwrap();
    result.telemetry.samples_file = SAMPLES_FILE.to_owned();
    result
}

/// A key pair made by `generate` in `dir` and read back from its PEM files.
pub fn key_pair(dir: &Path) -> (SigningKey, VerifyingKey) {
    generate(dir, false).unwrap();
    let (private, public) = lynx_attest::keys::key_paths(dir);
    (read_signing_key(&private).unwrap(), read_verifying_key(&public).unwrap())
}
