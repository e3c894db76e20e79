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
    // The digest a reproduction names the envelope by: of the very bytes that verified.
    assert_eq!(verified.envelope_sha256, lynx_attest::envelope::file_sha256(&path).unwrap());

    let (_other, _, stranger) = keys();
    let error = verify(&path, &stranger).unwrap_err();
    assert_eq!(error.step(), "signature", "{error}");
}

/// A lab's result and a vendor's reproduction are signed by two keys: each verifies against a
/// set of trusted keys under the one its signature names, and fails, naming every trusted key,
/// where it names none of them.
#[test]
fn a_result_verifies_against_the_trusted_key_its_signature_names() {
    use lynx_attest::trust::{check_against, verify_against};
    let (_l, lab_signing, lab) = keys();
    let (_v, vendor_signing, vendor) = keys();
    let (_s, _, stranger) = keys();
    let (lab_dir, vendor_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let lab_result = signed_result(lab_dir.path(), &lab_signing);
    let vendor_result = signed_result(vendor_dir.path(), &vendor_signing);
    let trusted = [lab, vendor];
    for (path, key) in [(&lab_result, &trusted[0]), (&vendor_result, &trusted[1])] {
        assert_eq!(check_against(path, &trusted).against, [lynx_attest::key_id(key)]);
        assert_eq!(verify_against(path, &trusted).unwrap().key_id, lynx_attest::key_id(key));
    }
    // One key: exactly what verify says against it.
    let alone = verify_against(&vendor_result, &trusted[..1]).unwrap_err();
    assert_eq!(alone, verify(&vendor_result, &trusted[0]).unwrap_err());
    // Several, none of them the signer: the signature step, naming each trusted key and the signer.
    let others = [trusted[0], stranger];
    let every = [lynx_attest::key_id(&others[0]), lynx_attest::key_id(&others[1])];
    assert_eq!(check_against(&vendor_result, &others).against, every);
    let error = verify_against(&vendor_result, &others).unwrap_err();
    assert_eq!(error.step(), "signature", "{error}");
    let said = error.to_string();
    assert!(said.contains("none of its 1 signatures names one of the 2 trusted keys"), "{said}");
    for key in [&trusted[0], &stranger, &trusted[1]] {
        assert!(said.contains(&lynx_attest::key_id(key)), "{said}");
    }
    // An unsigned result is unsigned under any set of keys, and none at all verifies nothing.
    let unsigned_dir = tempfile::tempdir().unwrap();
    let unsigned = sealed_result(unsigned_dir.path(), None);
    assert_eq!(verify_against(&unsigned, &trusted).unwrap_err().step(), "unsigned");
    assert_eq!(verify_against(&lab_result, &[]).unwrap_err().step(), "signature");
}

/// A result signed by a lab and countersigned by a vendor verifies under either key, names the
/// other where both are trusted, and does not depend on the order the keys were given in: a
/// signature naming one trusted key that does not verify leaves the one that does valid.
#[test]
fn a_countersigned_result_verifies_under_any_of_its_trusted_signers() {
    use lynx_attest::trust::{check_against, verify_trusted};
    let (_l, lab_signing, lab) = keys();
    let (_v, vendor_signing, vendor) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = signed_result(dir.path(), &lab_signing);
    let original: Envelope = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let payload = STANDARD.decode(&original.payload).unwrap();
    let write = |extra: &lynx_attest::envelope::EnvelopeSignature| {
        let mut envelope = original.clone();
        envelope.signatures.push(extra.clone());
        std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    };
    let (lab_id, vendor_id) = (lynx_attest::key_id(&lab), lynx_attest::key_id(&vendor));
    // Countersigned: the vendor's signature over the same payload.
    write(&lynx_attest::sign(&payload, &vendor_signing).signatures[0]);
    let checked = check_against(&path, &[lab, vendor]);
    let verified = checked.verdict.unwrap();
    assert_eq!((checked.against, verified.also_signed_by), (vec![lab_id.clone()], vec![vendor_id.clone()]));
    assert_eq!(verified.other_signatures, 1);
    let checked = check_against(&path, &[vendor, lab]);
    assert_eq!(
        (checked.against, checked.verdict.unwrap().also_signed_by),
        (vec![vendor_id.clone()], vec![lab_id.clone()])
    );
    let checked = check_against(&path, &[vendor]);
    assert_eq!(
        (checked.against, checked.verdict.unwrap().also_signed_by),
        (vec![vendor_id.clone()], Vec::<String>::new())
    );
    // The commands that list many results see the countersignature too.
    assert_eq!(verify_trusted(&path, &[lab, vendor]).unwrap().also_signed_by, vec![vendor_id.clone()]);
    // A signature naming the vendor that is not over this payload: whichever key comes first,
    // the lab's signature vouches for the result, and the vendor's alone does not.
    write(&lynx_attest::sign(b"another statement", &vendor_signing).signatures[0]);
    for keys in [[lab, vendor], [vendor, lab]] {
        let checked = check_against(&path, &keys);
        assert_eq!(checked.against, std::slice::from_ref(&lab_id), "{keys:?}");
        let verified = checked.verdict.unwrap();
        assert!(verified.also_signed_by.is_empty(), "{keys:?}");
        assert_eq!(verified.key_id, lab_id);
        assert_eq!(verify_trusted(&path, &keys).unwrap().key_id, lab_id);
    }
    let checked = check_against(&path, &[vendor]);
    assert_eq!(checked.against, [vendor_id]);
    assert_eq!(checked.verdict.unwrap_err().step(), "signature");
    assert_eq!(verify_trusted(&path, &[vendor]).unwrap_err().kind, lynx_attest::trust::Distrust::Rejected);
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
    let mut steps = std::collections::BTreeMap::new();
    for file in [&path, &samples] {
        let original = std::fs::read(file).unwrap();
        for i in 0..original.len() {
            let mut changed = original.clone();
            changed[i] ^= 0x01;
            std::fs::write(file, &changed).unwrap();
            let step = match verify(&path, &verifying) {
                Ok(_) => panic!("byte {i} of {} changed and still verified", file.display()),
                Err(error) => error.step(),
            };
            // A change to the samples file is caught by its digest; one to the envelope never
            // gets past the signature (everything after it is what the signature covers).
            let expected: &[&str] = if file == &samples { &["subject"] } else { &["envelope", "base64", "signature"] };
            assert!(expected.contains(&step), "byte {i} of {} refused at {step}", file.display());
            *steps.entry(step).or_insert(0) += 1;
            tried += 1;
        }
        std::fs::write(file, &original).unwrap();
    }
    verify(&path, &verifying).unwrap();
    println!("tamper evidence: {tried} single-byte changes tried, every one refused: {steps:?}");
    assert!(tried > 5000, "a small result still has thousands of bytes ({tried})");
}

/// Issue 17: changes to an envelope's structure rather than its bytes. A signature added by
/// another key, before or after lynx's, leaves it valid and is reported; a changed key id is
/// refused at the signature step; the payload re-encoded in the other base64 alphabet is the
/// same signed bytes and verifies; more than 64 signatures are refused at the envelope step.
#[test]
fn structural_changes_are_refused_or_reported() {
    let (_k, signing, verifying) = keys();
    let (_o, stranger, _) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = signed_result(dir.path(), &signing);
    let original: Envelope = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let with = |edit: &dyn Fn(&mut Envelope)| {
        let mut envelope = original.clone();
        edit(&mut envelope);
        std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
        verify(&path, &verifying)
    };
    let theirs = lynx_attest::sign(b"another statement", &stranger).signatures[0].clone();
    let added = with(&|e| e.signatures.push(theirs.clone())).unwrap();
    assert_eq!(added.other_signatures, 1);
    let reordered = with(&|e| e.signatures.insert(0, theirs.clone())).unwrap();
    assert_eq!(reordered.other_signatures, 1);
    let error = with(&|e| e.signatures[0].keyid = "0".repeat(64)).unwrap_err();
    assert_eq!(error.step(), "signature", "{error}");
    assert!(error.to_string().contains("names the given key"), "{error}");
    with(&|e| e.payload = URL_SAFE_NO_PAD.encode(STANDARD.decode(&e.payload).unwrap())).unwrap();
    assert_eq!(with(&|_| {}).unwrap().other_signatures, 0);
    // Verification's time is bounded: up to 64 signatures are read, more are refused unchecked.
    let most = lynx_attest::envelope::MAX_SIGNATURES;
    let many = with(&|e| e.signatures.extend(std::iter::repeat_n(theirs.clone(), most - 1))).unwrap();
    assert_eq!(many.other_signatures, most - 1);
    let error = with(&|e| e.signatures.extend(std::iter::repeat_n(theirs.clone(), most))).unwrap_err();
    assert_eq!(error.step(), "envelope", "{error}");
    assert!(error.to_string().contains("65 signatures; lynx checks envelopes of at most 64"), "{error}");
}

/// Issue 17: the IEEE P1363 (`r‖s`) encoding the DSSE specification's ECDSA example uses is
/// accepted beside DER; a signature that is neither says which encodings it failed as.
#[test]
fn p1363_signatures_verify_and_a_bad_signature_names_each_encoding() {
    use p256::ecdsa::signature::Signer;
    let (_k, signing, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = signed_result(dir.path(), &signing);
    let mut envelope: Envelope = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let payload = STANDARD.decode(&envelope.payload).unwrap();
    let raw: p256::ecdsa::Signature = signing.sign(&pae(&envelope.payload_type, &payload));
    envelope.signatures[0].sig = STANDARD.encode(raw.to_bytes());
    std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    verify(&path, &verifying).unwrap();

    envelope.signatures[0].sig = STANDARD.encode([7u8; 64]);
    std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let error = verify(&path, &verifying).unwrap_err().to_string();
    assert!(error.contains("as DER: not DER") && error.contains("as IEEE P1363"), "{error}");
    assert!(!error.contains("another key"), "{error}");
}

/// Issue 17: evidence is the file itself. A samples file replaced by a symbolic link (to
/// `/dev/zero`, which would otherwise be hashed for ever, or to a copy of itself) and an
/// envelope that is a link are refused at once; a samples file signed with a torn last line is
/// refused at the samples step.
#[test]
fn links_special_files_and_torn_samples_are_refused() {
    let (_k, signing, verifying) = keys();
    let dir = tempfile::tempdir().unwrap();
    let path = signed_result(dir.path(), &signing);
    let samples = dir.path().join(SAMPLES_FILE);
    let copy = dir.path().join("copy.jsonl");
    std::fs::rename(&samples, &copy).unwrap();
    for target in [Path::new("/dev/zero"), copy.as_path()] {
        std::os::unix::fs::symlink(target, &samples).unwrap();
        let start = std::time::Instant::now();
        let error = verify(&path, &verifying).unwrap_err();
        assert_eq!(error.step(), "subject", "{error}");
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert!(start.elapsed().as_secs() < 5);
        std::fs::remove_file(&samples).unwrap();
    }
    std::fs::rename(&copy, &samples).unwrap();
    verify(&path, &verifying).unwrap();
    let moved = dir.path().join("elsewhere.intoto.json");
    std::fs::rename(&path, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, &path).unwrap();
    assert_eq!(verify(&path, &verifying).unwrap_err().step(), "read");
    std::fs::remove_file(&path).unwrap();
    std::fs::rename(&moved, &path).unwrap();

    // Signed over a torn line: the digest matches, the line does not parse.
    let mut torn = std::fs::read(&samples).unwrap();
    torn.extend_from_slice(b"{\"kind\":\"telemetry\",\"sou{\"kind\":\"segment\",\"segment\":2,\"started_at\":\"x\"}\n");
    std::fs::write(&samples, &torn).unwrap();
    let result_path = dir.path().join("run.json");
    let envelope = seal(&result_path, &common::result(), Some(&signing)).unwrap();
    std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let error = verify(&path, &verifying).unwrap_err();
    assert_eq!(error.step(), "samples", "{error}");
    assert!(error.to_string().contains("line 2 is not a samples line"), "{error}");
    // And one cut short with no newline.
    let mut cut = torn[..torn.len() - 1].to_vec();
    cut.truncate(cut.len() - 30);
    std::fs::write(&samples, &cut).unwrap();
    let envelope = seal(&result_path, &common::result(), Some(&signing)).unwrap();
    std::fs::write(&path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let error = verify(&path, &verifying).unwrap_err().to_string();
    assert!(error.contains("line 2"), "{error}");
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
    std::fs::write(&samples, "{\"kind\":\"segment\",\"segment\":1,\"started_at\":\"x\"}\n").unwrap();
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
