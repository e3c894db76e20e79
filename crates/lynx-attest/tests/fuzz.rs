//! The verifier over arbitrary input: arbitrary bytes, byte-level mutations of a valid envelope,
//! and arbitrary JSON in each of its fields. Never a panic; always a verdict, in bounded time.

mod common;

use lynx_attest::{envelope_path, seal, verify, VerifyingKey};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Far beyond what verifying a few kilobytes takes; only a hang or a blow-up reaches it.
const HANG: Duration = Duration::from_secs(10);

/// The samples file every envelope here names, as it was sealed.
const SAMPLES: &str = "{}\n";

struct Fixture {
    key: VerifyingKey,
    envelope: Vec<u8>,
    payload: String,
}

/// A valid signed envelope, once for every case. (Its folder goes when it is made: a static is
/// never dropped, and a folder it held would outlive the process.)
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let (signing, key) = common::key_pair(dir.path());
        std::fs::write(dir.path().join(common::SAMPLES_FILE), SAMPLES).unwrap();
        let sealed = seal(&dir.path().join("run.json"), &common::result(), Some(&signing)).unwrap();
        let payload = sealed.payload.clone();
        Fixture { key, envelope: serde_json::to_vec(&sealed).unwrap(), payload }
    })
}

/// Verify `bytes` as an envelope beside the samples file it was sealed with, in a folder of this
/// case's own.
fn verify_bytes(bytes: &[u8]) -> Result<String, String> {
    let fixture = fixture();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(common::SAMPLES_FILE), SAMPLES).unwrap();
    let path: PathBuf = envelope_path(&dir.path().join("run.json"));
    std::fs::write(&path, bytes).unwrap();
    let start = Instant::now();
    let verdict = verify(&path, &fixture.key);
    let took = start.elapsed();
    assert!(took < HANG, "verification of {} bytes took {took:?}", bytes.len());
    verdict.map(|v| serde_json::to_string(&v.result).unwrap()).map_err(|e| e.step().to_owned())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_are_refused(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        prop_assert!(verify_bytes(&bytes).is_err());
    }

    /// Mutations may only be accepted if they leave what was signed as it was (JSON whitespace).
    #[test]
    fn mutations_of_a_valid_envelope_never_change_what_verifies(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..8)
    ) {
        let fixture = fixture();
        let mut bytes = fixture.envelope.clone();
        for (at, byte, kind) in edits {
            let i = at.index(bytes.len().max(1));
            match kind {
                0 if !bytes.is_empty() => bytes[i] = byte,
                1 => bytes.insert(i.min(bytes.len()), byte),
                _ if !bytes.is_empty() => { bytes.remove(i); }
                _ => {}
            }
        }
        if verify_bytes(&bytes).is_ok() {
            let envelope: lynx_attest::Envelope = serde_json::from_slice(&bytes).unwrap();
            prop_assert_eq!(envelope.payload, fixture.payload.clone());
        }
    }

    /// Each field replaced by arbitrary JSON (strings, numbers, nesting).
    #[test]
    fn arbitrary_json_in_each_field_is_refused(field in 0usize..3, value in json()) {
        let fixture = fixture();
        let mut envelope: serde_json::Value = serde_json::from_slice(&fixture.envelope).unwrap();
        let name = ["payload", "payloadType", "signatures"][field];
        if envelope[name] == value {
            return Ok(());
        }
        envelope[name] = value;
        prop_assert!(verify_bytes(&serde_json::to_vec(&envelope).unwrap()).is_err());
    }
}

fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        ".{0,40}".prop_map(serde_json::Value::from),
        "[A-Za-z0-9+/=_-]{0,200}".prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(6, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(serde_json::Value::from),
            proptest::collection::btree_map("[a-z]{0,8}", inner, 0..8)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}
