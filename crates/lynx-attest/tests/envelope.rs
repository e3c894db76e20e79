//! DSSE envelopes of lynx results: the specification's PAE vector, signing and verification,
//! tamper evidence over every byte, and bad input to the verifier.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use lynx_attest::envelope::MAX_ENVELOPE_BYTES;
use lynx_attest::{envelope_path, pae, seal, verify, Envelope, VerifyError};
use p256::ecdsa::{SigningKey, VerifyingKey};
use std::path::{Path, PathBuf};

mod common;
use common::{data, key_pair, SAMPLES_FILE};

#[test]
fn pae_matches_the_specification() {
    let vectors: serde_json::Value = serde_json::from_slice(&std::fs::read(data("dsse-pae.json")).unwrap()).unwrap();
    for v in vectors["vectors"].as_array().unwrap() {
        let encoded = pae(v["payload_type"].as_str().unwrap(), v["payload"].as_str().unwrap().as_bytes());
        assert_eq!(encoded, v["pae"].as_str().unwrap().as_bytes());
    }
}

/// A key pair in a temporary folder.
fn keys() -> (tempfile::TempDir, SigningKey, VerifyingKey) {
    let dir = tempfile::tempdir().unwrap();
    let (signing, verifying) = key_pair(dir.path());
    (dir, signing, verifying)
}

/// A result sealed in `dir` by `key` (unsigned without one): `run.intoto.json` beside
/// `run.samples.jsonl`.
fn sealed_result(dir: &Path, key: Option<&SigningKey>) -> PathBuf {
    let result = common::result();
    std::fs::write(dir.join(SAMPLES_FILE), "{\"kind\":\"telemetry\",\"source\":\"host\",\"t_s\":0.05}\n").unwrap();
    let result_path = dir.join("run.json");
    let path = envelope_path(&result_path);
    assert_eq!(path, dir.join("run.intoto.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&seal(&result_path, &result, key).unwrap()).unwrap()).unwrap();
    path
}

fn signed_result(dir: &Path, key: &SigningKey) -> PathBuf {
    sealed_result(dir, Some(key))
}

#[test]
fn an_unsigned_result_is_reported_as_unsigned() {
    let (_k, _, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = sealed_result(dir.path(), None);
    let error = verify(&path, &verifying).unwrap_err();
    assert_eq!(error.step(), "unsigned", "{error}");
}

#[test]
fn a_signed_result_verifies_with_its_key_only() {
    let (_k, signing, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = signed_result(dir.path(), &signing);
    let verified = verify(&path, &verifying).unwrap();
    assert_eq!(verified.samples_file, "run.samples.jsonl");
    assert_eq!(verified.result.schema, "https://lynxbench.dev/result/v1");

    let (_other, _, stranger) = keys();
    let error = verify(&path, &stranger).unwrap_err();
    assert_eq!(error.step(), "signature", "{error}");
}

#[test]
fn the_url_safe_alphabet_is_accepted() {
    let (_k, signing, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = signed_result(dir.path(), &signing);
    let mut envelope: Envelope = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    envelope.payload = URL_SAFE_NO_PAD.encode(STANDARD.decode(&envelope.payload).unwrap());
    envelope.signatures[0].sig = URL_SAFE_NO_PAD.encode(STANDARD.decode(&envelope.signatures[0].sig).unwrap());
    std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    verify(&path, &verifying).unwrap();
}

#[test]
fn every_single_byte_change_fails_verification() {
    let (_k, signing, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = signed_result(dir.path(), &signing);
    let samples = dir.path().join(SAMPLES_FILE);
    let mut tried = 0;
    for file in [&path, &samples] {
        let original = std::fs::read(file).unwrap();
        for i in 0..original.len() {
            let mut changed = original.clone();
            changed[i] ^= 0x01;
            std::fs::write(file, &changed).unwrap();
            assert!(verify(&path, &verifying).is_err(), "byte {i} of {} changed and still verified", file.display());
            tried += 1;
        }
        std::fs::write(file, &original).unwrap();
    }
    verify(&path, &verifying).unwrap();
    println!("tamper evidence: {tried} single-byte changes tried, every one refused");
    assert!(tried > 5000, "a small result still has thousands of bytes ({tried})");
}

#[test]
fn bad_input_is_a_typed_error_not_a_panic() {
    let (_k, _, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.intoto.json");
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty", Vec::new(), "envelope"),
        ("not JSON", b"hello".to_vec(), "envelope"),
        ("truncated", br#"{"payload": "aGVsbG8", "payloadTy"#.to_vec(), "envelope"),
        ("deeply nested", deep.into_bytes(), "envelope"),
        ("wrong types", br#"{"payload": 1, "payloadType": [], "signatures": {}}"#.to_vec(), "envelope"),
        (
            "duplicate keys",
            br#"{"payload": "", "payload": "", "payloadType": "x", "signatures": []}"#.to_vec(),
            "envelope",
        ),
        ("not base64", br#"{"payload": "!!", "payloadType": "x", "signatures": []}"#.to_vec(), "base64"),
        // "hello" is aGVsbG8=; aGVsbG9= decodes to it too, with trailing bits set.
        (
            "non-canonical base64",
            br#"{"payload": "aGVsbG9=", "payloadType": "x", "signatures": []}"#.to_vec(),
            "base64",
        ),
        ("mixed alphabets", br#"{"payload": "a-+_", "payloadType": "x", "signatures": []}"#.to_vec(), "base64"),
        ("unsigned", br#"{"payload": "aGVsbG8=", "payloadType": "x", "signatures": []}"#.to_vec(), "unsigned"),
        (
            "an unknown signature encoding",
            br#"{"payload": "aGVsbG8=", "payloadType": "x", "signatures": [{"keyid": "k", "sig": "AAAA"}]}"#.to_vec(),
            "signature",
        ),
    ];
    for (what, bytes, step) in cases {
        std::fs::write(&path, &bytes).unwrap();
        let error: VerifyError = verify(&path, &verifying).unwrap_err();
        assert_eq!(error.step(), step, "{what}: {error}");
    }
    // Larger than an envelope may be: refused from its size, without reading it.
    let huge = std::fs::File::create(&path).unwrap();
    huge.set_len(MAX_ENVELOPE_BYTES + 1).unwrap();
    assert_eq!(verify(&path, &verifying).unwrap_err().step(), "read");
}

/// A correctly signed statement whose predicate is not a lynx result fails at the schema step:
/// a field the schema does not name, a value of the wrong type, a missing section.
#[test]
fn a_signed_predicate_outside_the_schema_fails_at_schema() {
    let (_k, signing, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let samples = dir.path().join(SAMPLES_FILE);
    std::fs::write(&samples, "{}\n").unwrap();
    let digest = lynx_attest::envelope::file_sha256(&samples).unwrap();
    let result: serde_json::Value = serde_json::from_slice(&std::fs::read(data("result.json")).unwrap()).unwrap();
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 3] = [
        ("predicate.marketing", |r| r["marketing"] = serde_json::json!({"tflops": 9000})),
        ("missing field `cells`", |r| {
            r.as_object_mut().unwrap().remove("cells");
        }),
        ("invalid type", |r| r["checks"] = serde_json::json!("all passed")),
    ];
    for (expected, edit) in edits {
        let mut predicate = result.clone();
        edit(&mut predicate);
        let statement = serde_json::json!({
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "run.samples.jsonl", "digest": {"sha256": digest}}],
            "predicateType": "https://lynxbench.dev/result/v1",
            "predicate": predicate,
        });
        let path = dir.path().join("run.intoto.json");
        let envelope = lynx_attest::sign(&serde_json::to_vec(&statement).unwrap(), &signing);
        std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
        let error = verify(&path, &verifying).unwrap_err();
        assert_eq!(error.step(), "schema", "{expected}: {error}");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
}
