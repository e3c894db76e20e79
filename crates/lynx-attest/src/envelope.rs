//! DSSE envelopes (secure-systems-lab/dsse, `protocol.md` and `envelope.md`) holding an in-toto
//! Statement v1 (in-toto/attestation, `spec/v1`) whose predicate is a lynx result.
//!
//! The signature is ECDSA P-256 with SHA-256, DER-encoded, over the pre-authentication encoding
//! of the exact payload bytes: no JSON canonicalisation is involved. Verification also accepts
//! the IEEE P1363 `r‖s` encoding, which the DSSE specification's own ECDSA example uses.

use crate::files::{open_bounded, read_bounded, Links};
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use lynx_schema::result::{hex, RunResult, RESULT_SCHEMA};
use lynx_schema::telemetry::SamplesLine;
use p256::ecdsa::signature::{Signer, Verifier};
use p256::ecdsa::{DerSignature, Signature as P1363Signature, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::path::Path;

pub const PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// Envelopes larger than this are refused before they are read: verification has bounded memory.
pub const MAX_ENVELOPE_BYTES: u64 = 256 << 20;
/// Envelopes carrying more signatures than this are refused at the `envelope` step before any is
/// checked: verification has bounded time too (a lab signs once, a countersigning party once
/// more; the million bogus signatures naming a trusted key that 256 MiB hold would otherwise
/// take minutes to check).
pub const MAX_SIGNATURES: usize = 64;

/// DSSE's pre-authentication encoding: `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`,
/// lengths as ASCII decimal byte counts.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!("DSSEv1 {} {} {} ", payload_type.len(), payload_type, payload.len()).into_bytes();
    out.extend_from_slice(payload);
    out
}

/// A DSSE envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    /// Base64 of the payload bytes.
    pub payload: String,
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSignature>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeSignature {
    /// An unauthenticated hint: the sha256 of the signer's public key DER.
    #[serde(default)]
    pub keyid: String,
    /// Base64 of the DER-encoded ECDSA signature.
    pub sig: String,
}

/// The in-toto Statement of a result: subject the samples file, predicate the result.
pub fn statement(samples_name: &str, samples_sha256: &str, result: &RunResult) -> serde_json::Value {
    serde_json::json!({
        "_type": STATEMENT_TYPE,
        "subject": [{ "name": samples_name, "digest": { "sha256": samples_sha256 } }],
        "predicateType": RESULT_SCHEMA,
        "predicate": result,
    })
}

/// An envelope of `payload` signed by `key`.
pub fn sign(payload: &[u8], key: &SigningKey) -> Envelope {
    let signature: DerSignature = key.sign(&pae(PAYLOAD_TYPE, payload));
    Envelope {
        payload: STANDARD.encode(payload),
        payload_type: PAYLOAD_TYPE.to_owned(),
        signatures: vec![EnvelopeSignature {
            keyid: crate::keys::key_id(key.verifying_key()),
            sig: STANDARD.encode(signature.as_bytes()),
        }],
    }
}

/// The envelope of a measured result: its statement (subject the samples file named by the
/// result, found beside `result_path`), signed by `key`, or with no signature when `key` is
/// `None` (an explicitly unsigned result, which `verify` reports as such).
pub fn seal(result_path: &Path, result: &RunResult, key: Option<&SigningKey>) -> std::io::Result<Envelope> {
    let name = &result.telemetry.samples_file;
    let digest = file_sha256(&result_path.with_file_name(name))?;
    let payload = serde_json::to_vec(&statement(name, &digest, result)).map_err(std::io::Error::other)?;
    Ok(match key {
        Some(key) => sign(&payload, key),
        None => {
            Envelope { payload: STANDARD.encode(&payload), payload_type: PAYLOAD_TYPE.to_owned(), signatures: vec![] }
        }
    })
}

/// Where the envelope of the result at `result_path` goes: `<run id>.intoto.json` beside it.
pub fn envelope_path(result_path: &Path) -> std::path::PathBuf {
    result_path.with_extension("intoto.json")
}

/// sha256 (hex) of a samples file, read in chunks: a regular file (never through a final
/// symbolic link) of at most [`MAX_SAMPLES_BYTES`].
pub fn file_sha256(path: &Path) -> std::io::Result<String> {
    Ok(read_samples(path, false)?.0)
}

/// The most bytes a samples file may hold: a day of sampling at the highest rate (100 Hz) from
/// both sources is about 3.5 GB.
pub const MAX_SAMPLES_BYTES: u64 = 16 << 30;
/// The longest line a samples file may hold (a line is a few hundred bytes).
const MAX_SAMPLES_LINE: usize = 1 << 20;

/// sha256 (hex) of the samples file `path`, and, with `parse`, the first line that is not a
/// samples line as lynx writes it (a segment header or a telemetry sample, ending in a newline),
/// if any.
fn read_samples(path: &Path, parse: bool) -> std::io::Result<(String, Option<String>)> {
    use std::io::Read;
    let mut file = open_bounded(path, MAX_SAMPLES_BYTES, Links::Refuse)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let (mut pending, mut number, mut bad) = (Vec::new(), 0usize, None);
    let check = |line: &[u8], number: usize, bad: &mut Option<String>| {
        if bad.is_none() {
            if let Err(e) = serde_json::from_slice::<SamplesLine>(line) {
                *bad = Some(format!("line {number} is not a samples line: {e}"));
            }
        }
    };
    loop {
        let n = file.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        if !parse {
            continue;
        }
        pending.extend_from_slice(&buffer[..n]);
        let mut start = 0;
        while let Some(end) = pending[start..].iter().position(|&b| b == b'\n') {
            number += 1;
            check(&pending[start..start + end], number, &mut bad);
            start += end + 1;
        }
        pending.drain(..start);
        if pending.len() > MAX_SAMPLES_LINE && bad.is_none() {
            bad = Some(format!("line {} is longer than {MAX_SAMPLES_LINE} bytes", number + 1));
            pending.clear();
        }
    }
    if !pending.is_empty() && bad.is_none() {
        bad = Some(format!("line {} is cut short (no newline ends it)", number + 1));
    }
    Ok((hex(&hasher.finalize()), bad))
}

/// The step of verification that failed, with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("unsigned: {0}")]
    Unsigned(String),
    #[error("read: {0}")]
    Read(String),
    #[error("envelope: {0}")]
    Envelope(String),
    #[error("base64: {0}")]
    Base64(String),
    #[error("signature: {0}")]
    Signature(String),
    #[error("payload type: {0}")]
    PayloadType(String),
    #[error("statement: {0}")]
    Statement(String),
    #[error("subject: {0}")]
    Subject(String),
    #[error("schema: {0}")]
    Schema(String),
    #[error("samples: {0}")]
    Samples(String),
}

impl VerifyError {
    /// The step's name, for machine-readable verdicts.
    pub fn step(&self) -> &'static str {
        match self {
            VerifyError::Unsigned(_) => "unsigned",
            VerifyError::Read(_) => "read",
            VerifyError::Envelope(_) => "envelope",
            VerifyError::Base64(_) => "base64",
            VerifyError::Signature(_) => "signature",
            VerifyError::PayloadType(_) => "payload_type",
            VerifyError::Statement(_) => "statement",
            VerifyError::Subject(_) => "subject",
            VerifyError::Schema(_) => "schema",
            VerifyError::Samples(_) => "samples",
        }
    }
}

/// Base64 in either alphabet DSSE allows, padded or not; non-canonical encodings (trailing bits
/// set) are refused by every engine.
fn decode_base64(text: &str) -> Result<Vec<u8>, VerifyError> {
    [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD]
        .iter()
        .find_map(|engine| engine.decode(text).ok())
        .ok_or_else(|| VerifyError::Base64("not canonical standard or URL-safe base64".to_owned()))
}

/// A verified result.
#[derive(Debug)]
pub struct Verified {
    pub result: RunResult,
    pub key_id: String,
    pub samples_file: String,
    /// Signatures the envelope carries beside the one that verified (by other keys, or not
    /// verifying): reported, never trusted.
    pub other_signatures: usize,
    /// sha256 (hex) of the envelope's bytes that verified, as a reproduction names the envelope
    /// it reproduces: of those bytes, not of the file read again, which may since have changed.
    pub envelope_sha256: String,
    /// The other trusted keys whose signatures on it verify too (a result signed by a lab and
    /// countersigned by a vendor, both trusted), in the order the keys were given: filled where
    /// it is checked against several trusted keys (`trust`), empty from [`verify`] under one.
    pub also_signed_by: Vec<String>,
}

/// The bytes of the envelope file `path`: a regular file, not a symbolic link, of at most
/// [`MAX_ENVELOPE_BYTES`].
pub fn read_envelope(path: &Path) -> Result<Vec<u8>, VerifyError> {
    read_bounded(path, MAX_ENVELOPE_BYTES, Links::Refuse).map_err(|e| VerifyError::Read(e.to_string()))
}

/// Whether the base64 signature `sig` is `key`'s over `message`, in DER (as lynx writes it) or in
/// IEEE P1363 `r‖s` (as the DSSE specification's ECDSA example does); why not, naming each
/// encoding tried.
fn check_signature(key: &VerifyingKey, message: &[u8], sig: &str) -> Result<(), String> {
    let bytes = decode_base64(sig).map_err(|e| format!("its bytes are {e}"))?;
    let der = match DerSignature::try_from(bytes.as_slice()) {
        Ok(signature) => match key.verify(message, &signature) {
            Ok(()) => return Ok(()),
            Err(_) => "a DER signature that does not match".to_owned(),
        },
        Err(_) => "not DER".to_owned(),
    };
    let p1363 = match P1363Signature::from_slice(&bytes) {
        Ok(signature) => match key.verify(message, &signature) {
            Ok(()) => return Ok(()),
            Err(_) => "an r‖s signature that does not match".to_owned(),
        },
        Err(_) => format!("not IEEE P1363 r‖s ({} bytes, not 64)", bytes.len()),
    };
    Err(format!("as DER: {der}; as IEEE P1363: {p1363}"))
}

/// Verify the envelope file `path` against `key`: parse, decode, rebuild PAE, check the
/// signature, the payload, statement and predicate types, the samples file's digest (the file
/// named by the subject, beside the envelope) and the predicate's schema.
pub fn verify(path: &Path, key: &VerifyingKey) -> Result<Verified, VerifyError> {
    let bytes = read_envelope(path)?;
    let envelope: Envelope = serde_json::from_slice(&bytes).map_err(|e| VerifyError::Envelope(e.to_string()))?;
    if envelope.signatures.len() > MAX_SIGNATURES {
        return Err(VerifyError::Envelope(format!(
            "{} signatures; lynx checks envelopes of at most {MAX_SIGNATURES}",
            envelope.signatures.len()
        )));
    }
    let payload = decode_base64(&envelope.payload)?;
    if envelope.signatures.is_empty() {
        return Err(VerifyError::Unsigned(
            "the result was published with --unsigned; nothing vouches for it".to_owned(),
        ));
    }
    let message = pae(&envelope.payload_type, &payload);
    // The key id is an unauthenticated hint (DSSE); with a pinned key it must name that key, so
    // that no byte of the envelope can change without verification noticing.
    let pinned = crate::keys::key_id(key);
    let naming: Vec<&EnvelopeSignature> = envelope.signatures.iter().filter(|s| s.keyid == pinned).collect();
    if naming.is_empty() {
        let named: Vec<&str> = envelope.signatures.iter().map(|s| s.keyid.as_str()).collect();
        return Err(VerifyError::Signature(format!(
            "none of its {} signatures names the given key ({pinned}); they name {}",
            envelope.signatures.len(),
            named.join(", ")
        )));
    }
    let mut failures = Vec::new();
    let verifies =
        naming.iter().any(|s| check_signature(key, &message, &s.sig).map_err(|why| failures.push(why)).is_ok());
    if !verifies {
        return Err(VerifyError::Signature(format!(
            "the signature naming the given key ({pinned}) does not verify: {}",
            failures.join("; ")
        )));
    }
    if envelope.payload_type != PAYLOAD_TYPE {
        return Err(VerifyError::PayloadType(format!("{:?}, not {PAYLOAD_TYPE:?}", envelope.payload_type)));
    }
    let statement: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|e| VerifyError::Statement(format!("not JSON: {e}")))?;
    if statement["_type"] != STATEMENT_TYPE {
        return Err(VerifyError::Statement(format!("_type {}, not {STATEMENT_TYPE:?}", statement["_type"])));
    }
    if statement["predicateType"] != RESULT_SCHEMA {
        return Err(VerifyError::Statement(format!(
            "predicateType {}, not {RESULT_SCHEMA:?}",
            statement["predicateType"]
        )));
    }
    let subject = statement["subject"].as_array().filter(|s| s.len() == 1).map(|s| &s[0]).ok_or_else(|| {
        VerifyError::Subject("the statement must have exactly one subject (the samples file)".to_owned())
    })?;
    let (Some(name), Some(expected)) = (subject["name"].as_str(), subject["digest"]["sha256"].as_str()) else {
        return Err(VerifyError::Subject("the subject needs a name and a sha256 digest".to_owned()));
    };
    if name.contains('/') || name.contains('\\') || name.starts_with('.') {
        return Err(VerifyError::Subject(format!("{name:?} is not a file name beside the envelope")));
    }
    let samples = path.with_file_name(name);
    let (actual, bad_line) =
        read_samples(&samples, true).map_err(|e| VerifyError::Subject(format!("{}: {e}", samples.display())))?;
    if actual != expected {
        return Err(VerifyError::Subject(format!("{name} has sha256 {actual}; the statement says {expected}")));
    }
    let predicate = &statement["predicate"];
    let result: RunResult =
        serde_json::from_value(predicate.clone()).map_err(|e| VerifyError::Schema(e.to_string()))?;
    // Serde ignores what the schema does not name; writing the result back must give the
    // predicate exactly, so no field outside the schema travels under the signature unchecked.
    let canonical = serde_json::to_value(&result).map_err(|e| VerifyError::Schema(e.to_string()))?;
    if let Some(path) = first_difference(predicate, &canonical, "predicate") {
        return Err(VerifyError::Schema(format!("{path} is not in the result schema as lynx writes it")));
    }
    if result.schema != RESULT_SCHEMA {
        return Err(VerifyError::Schema(format!("schema {:?}, not {RESULT_SCHEMA:?}", result.schema)));
    }
    // Last: a samples file whose every byte is signed may still hold a line lynx cannot have
    // written whole (one torn by a full disk before the fix of issue 17).
    if let Some(bad) = bad_line {
        return Err(VerifyError::Samples(format!("{name}: {bad}")));
    }
    let other_signatures = envelope.signatures.len() - 1;
    let envelope_sha256 = hex(&Sha256::digest(&bytes));
    Ok(Verified {
        result,
        key_id: pinned,
        samples_file: name.to_owned(),
        other_signatures,
        envelope_sha256,
        also_signed_by: Vec::new(),
    })
}

/// The first place (a JSON path) where `given` differs from `canonical`, if any.
fn first_difference(given: &serde_json::Value, canonical: &serde_json::Value, path: &str) -> Option<String> {
    use serde_json::Value;
    match (given, canonical) {
        (Value::Object(a), Value::Object(b)) => {
            if let Some(key) = a.keys().find(|k| !b.contains_key(*k)).or_else(|| b.keys().find(|k| !a.contains_key(*k)))
            {
                return Some(format!("{path}.{key}"));
            }
            a.iter().find_map(|(key, value)| first_difference(value, &b[key], &format!("{path}.{key}")))
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            a.iter().zip(b).enumerate().find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}[{i}]")))
        }
        (a, b) if a == b => None,
        _ => Some(path.to_owned()),
    }
}
