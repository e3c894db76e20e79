//! `lynx collect`: gather results from many nodes into one results folder. Each envelope is
//! verified against the trusted keys before anything is copied; a tampered, unsigned or
//! untrusted one is refused, and so is a second copy of a run already there (the same run id):
//! byte-identical copies are skipped, differing ones refused. The folder's `index.json` lists
//! every verified result in it.

use crate::trust::{find_envelopes, verify_trusted};
use lynx_schema::device::slug;
use lynx_schema::fleet::{CollectIndex, Collected};
use p256::ecdsa::VerifyingKey;
use std::path::{Path, PathBuf};

/// What happened to one envelope.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Collected(PathBuf),
    /// Already there, byte for byte.
    Duplicate(PathBuf),
    /// Refused, with the reason.
    Refused(String),
}

fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
    let temporary = PathBuf::from(format!("{}.tmp", to.display()));
    std::fs::copy(from, &temporary)?;
    std::fs::File::open(&temporary)?.sync_all()?;
    std::fs::rename(&temporary, to)
}

/// Collect the envelopes under `sources` into `into`, trusting `keys`; then rewrite its index.
pub fn collect(sources: &[PathBuf], into: &Path, keys: &[VerifyingKey]) -> std::io::Result<Vec<(PathBuf, Outcome)>> {
    let mut outcomes = Vec::new();
    for envelope in find_envelopes(sources)? {
        if envelope.starts_with(into) {
            continue;
        }
        let outcome = match verify_trusted(&envelope, keys) {
            Err(not) => Outcome::Refused(format!("{}: {}", not.kind, not.reason)),
            Ok(verified) => place(&envelope, &verified, into)
                .unwrap_or_else(|e| Outcome::Refused(format!("could not be copied: {e}"))),
        };
        outcomes.push((envelope, outcome));
    }
    write_index(into, keys)?;
    Ok(outcomes)
}

/// A folder name from text that came from a result: its slug, at most 64 characters.
fn folder_name(text: &str) -> String {
    let name: String = slug(text).chars().take(64).collect();
    if name.is_empty() {
        "unnamed".to_owned()
    } else {
        name
    }
}

/// Copy a verified envelope (with its samples and result) into `into`, unless its run is there.
fn place(envelope: &Path, verified: &crate::Verified, into: &Path) -> std::io::Result<Outcome> {
    let result = &verified.result;
    let device = result.device.name.known().cloned().unwrap_or_else(|| result.device.device.to_string());
    let run_id = folder_name(&result.run_id);
    let dir = into.join(folder_name(&device)).join(&run_id);
    let target = dir.join(format!("{run_id}.intoto.json"));
    if target.exists() {
        return Ok(if std::fs::read(&target)? == std::fs::read(envelope)? {
            Outcome::Duplicate(target)
        } else {
            Outcome::Refused(format!(
                "duplicate: run {} is already collected at {} with different contents",
                result.run_id,
                target.display()
            ))
        });
    }
    std::fs::create_dir_all(&dir)?;
    let samples = envelope.with_file_name(&verified.samples_file);
    copy(&samples, &dir.join(&verified.samples_file))?;
    let result_json = PathBuf::from(envelope.to_string_lossy().replace(".intoto.json", ".json"));
    if result_json.exists() {
        copy(&result_json, &dir.join(format!("{run_id}.json")))?;
    }
    // The envelope last: a folder with it is a whole result.
    copy(envelope, &target)?;
    Ok(Outcome::Collected(target))
}

/// Rewrite `into/index.json` from the verified envelopes in `into`.
pub fn write_index(into: &Path, keys: &[VerifyingKey]) -> std::io::Result<()> {
    let mut results = Vec::new();
    for envelope in find_envelopes(&[into.to_path_buf()])? {
        if let Ok(verified) = verify_trusted(&envelope, keys) {
            let r = &verified.result;
            results.push(Collected {
                envelope: envelope.strip_prefix(into).unwrap_or(&envelope).display().to_string(),
                run_id: r.run_id.clone(),
                device: r.device.name.known().cloned().unwrap_or_else(|| r.device.device.to_string()),
                model: r.config.model.name.clone(),
                suite: r.config.suite.name.clone(),
                status: format!("{:?}", r.status).to_lowercase(),
                checks_passed: r.checks.iter().all(|c| c.passed),
                key_id: verified.key_id.clone(),
            });
        }
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let index = CollectIndex { updated_at: lynx_schema::time::rfc3339_utc(now), results };
    let path = into.join("index.json");
    let temporary = into.join("index.json.tmp");
    std::fs::write(&temporary, serde_json::to_vec_pretty(&index).map_err(std::io::Error::other)?)?;
    std::fs::File::open(&temporary)?.sync_all()?;
    std::fs::rename(&temporary, path)
}
