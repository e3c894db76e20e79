//! Independent verification: Python's securesystemslib (installed by `scripts/sslib.sh`, which
//! this test runs when `LYNX_SSLIB_PYTHONPATH` does not name an installed copy) verifies lynx's
//! envelope with only the public key, and lynx verifies an envelope securesystemslib signed.

mod common;

use common::{key_pair, result, SAMPLES_FILE};
use lynx_attest::envelope::{file_sha256, statement};
use lynx_attest::{envelope_path, key_id, seal, verify, Envelope};
use lynx_schema::result::RunResult;
use std::path::{Path, PathBuf};
use std::process::Command;

fn manifest(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The folder holding securesystemslib, installing it once if need be.
fn sslib_path() -> String {
    if let Ok(path) = std::env::var("LYNX_SSLIB_PYTHONPATH") {
        return path;
    }
    let output = Command::new("bash").arg(manifest("../../scripts/sslib.sh")).output().unwrap();
    assert!(
        output.status.success(),
        "scripts/sslib.sh could not install securesystemslib: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// Run the securesystemslib side; its exit status and what it said.
fn sslib(args: &[&Path], keyid: &str) -> (bool, String) {
    let mut command = Command::new(std::env::var("LYNX_PYTHON").unwrap_or_else(|_| "python3".to_owned()));
    command.env("PYTHONPATH", sslib_path()).arg(manifest("tests/independent/sslib_dsse.py"));
    let [verb, rest @ ..] = args else { unreachable!() };
    command.arg(verb);
    for arg in rest {
        command.arg(arg);
    }
    let output = command.arg(keyid).output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), said)
}

#[test]
fn securesystemslib_verifies_lynx_and_lynx_verifies_securesystemslib() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::create_dir(&keys).unwrap();
    let (signing, verifying) = key_pair(&keys);
    let (private, public) = (keys.join("lynx.key"), keys.join("lynx.pub"));
    let keyid = key_id(&verifying);
    std::fs::write(dir.path().join(SAMPLES_FILE), "{\"kind\":\"telemetry\",\"source\":\"host\",\"t_s\":0.05}\n")
        .unwrap();

    // lynx signs; securesystemslib verifies with the public key alone.
    let result_path = dir.path().join("run.json");
    let envelope = seal(&result_path, &result(), Some(&signing)).unwrap();
    let ours = envelope_path(&result_path);
    std::fs::write(&ours, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let (ok, said) = sslib(&[Path::new("verify"), &ours, &public], &keyid);
    assert!(ok, "securesystemslib rejected lynx's envelope: {said}");

    // The same check fails on a signature that is not over these bytes, so it can fail.
    let mut forged = envelope.clone();
    let other = seal(&result_path, &RunResult { schema: "x".to_owned(), ..result() }, Some(&signing)).unwrap();
    forged.signatures = other.signatures;
    let forged_path = dir.path().join("forged.intoto.json");
    std::fs::write(&forged_path, serde_json::to_vec(&forged).unwrap()).unwrap();
    let (ok, said) = sslib(&[Path::new("verify"), &forged_path, &public], &keyid);
    assert!(!ok, "securesystemslib accepted a signature over other bytes: {said}");

    // securesystemslib signs lynx's statement with lynx's key; lynx verifies its envelope.
    let payload = dir.path().join("payload.json");
    let samples_sha256 = file_sha256(&dir.path().join(SAMPLES_FILE)).unwrap();
    std::fs::write(&payload, serde_json::to_vec(&statement(SAMPLES_FILE, &samples_sha256, &result())).unwrap())
        .unwrap();
    let theirs = dir.path().join("theirs.intoto.json");
    let (ok, said) = sslib(&[Path::new("sign"), &payload, &private, &theirs], &keyid);
    assert!(ok, "securesystemslib could not sign: {said}");
    let envelope: Envelope = serde_json::from_slice(&std::fs::read(&theirs).unwrap()).unwrap();
    assert_eq!(envelope.signatures[0].keyid, keyid);
    let verified =
        verify(&theirs, &verifying).unwrap_or_else(|e| panic!("lynx rejected securesystemslib's envelope: {e}"));
    assert_eq!(verified.result, result());
}
