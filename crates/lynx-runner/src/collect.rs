//! `lynx collect`: gather results from many nodes into one results folder. Each envelope is
//! verified against the trusted keys before anything is copied; a tampered, unsigned or
//! untrusted one is refused, and so is one made with test hooks set (`Harness::test_hooks`: a
//! test's figures, never the device's published ones) and a second copy of a run already there
//! (the same run id): byte-identical copies are skipped, differing ones refused. A result is
//! copied as `lynx run` wrote it, into `<device slug>/<run id>/` under the same names: its
//! samples file, and where they are there its plan, journal and serving trace. The folder's
//! `index.json` lists every verified result in it.

use crate::store::{write_atomic, write_json_atomic};
use crate::RunError;
use lynx_attest::envelope::read_envelope;
use lynx_attest::files::{open_regular, Links};
use lynx_attest::trust::{find_envelopes, find_envelopes_except, verify_trusted};
use lynx_attest::Verified;
use lynx_attest::VerifyingKey;
use lynx_schema::device::{safe_name, slug};
use lynx_schema::fleet::{CollectIndex, Collected};
use std::path::{Path, PathBuf};

/// What happened to one envelope.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Copied to `to`; `failed_checks` names the checks its run failed (in the result's order):
    /// collected, and marked so in the index, as the result itself marks them.
    Collected { to: PathBuf, failed_checks: Vec<lynx_schema::result::CheckName> },
    /// Already there, byte for byte.
    Duplicate(PathBuf),
    /// Refused, with the reason.
    Refused(String),
}

/// Copy `from` to `to` durably: beside it first, then committed as every file lynx writes is.
/// The source is a regular file read as itself: a symbolic link in a results folder is refused,
/// never copied through (its target is not what was published).
fn copy(from: &Path, to: &Path) -> Result<(), RunError> {
    let mut source = open_regular(from, Links::Refuse).map_err(io(from))?;
    write_atomic(to, |file| std::io::copy(&mut source, file).map(drop))
}

/// An I/O error on `path`.
fn io(path: &Path) -> impl Fn(std::io::Error) -> RunError + '_ {
    move |source| RunError::Io { path: path.to_path_buf(), source }
}

/// Collect the envelopes under `sources` into `into`, trusting `keys`; then rewrite its index.
pub fn collect(sources: &[PathBuf], into: &Path, keys: &[VerifyingKey]) -> Result<Vec<(PathBuf, Outcome)>, RunError> {
    let mut outcomes = Vec::new();
    // What is already in `into` is never a source, however a source names it (`src` collected
    // into `src/all` as `src/../src`, or through a link to `src`): the folder an envelope lies
    // in is compared as the file system resolves it.
    let into_resolved = std::fs::canonicalize(into).map_err(io(into))?;
    let inside_into = |envelope: &Path| {
        envelope.starts_with(into)
            || envelope
                .parent()
                .and_then(|p| std::fs::canonicalize(p).ok())
                .is_some_and(|p| p.starts_with(&into_resolved))
    };
    let found = find_envelopes_except(sources, inside_into).map_err(|e| io(into)(e.into()))?;
    for envelope in found {
        let outcome = match verify_trusted(&envelope, keys) {
            Err(not) => Outcome::Refused(format!("{}: {}", not.kind, not.reason)),
            Ok(verified) => match verified.result.harness.test_hooks_reason() {
                Some(reason) => Outcome::Refused(format!("test hooks: {reason}")),
                None => place(&envelope, &verified, into, keys)
                    .unwrap_or_else(|e| Outcome::Refused(format!("could not be copied: {e}"))),
            },
        };
        outcomes.push((envelope, outcome));
    }
    write_index(into, keys)?;
    Ok(outcomes)
}

/// A folder name from text that came from a result, `name` of it (`slug` for a device, as `lynx
/// run` names its folder; `safe_name` for a run id, its case kept), at most 64 characters.
fn folder_name(text: &str, name: fn(&str) -> String) -> String {
    let name: String = name(text).chars().take(64).collect();
    if name.is_empty() {
        "unnamed".to_owned()
    } else {
        name
    }
}

/// The run's file named `<stem>.<extension>` beside its envelope `<stem>.intoto.json`.
fn beside(envelope: &Path, extension: &str) -> PathBuf {
    let name = envelope.file_name().unwrap_or_default().to_string_lossy();
    let stem = name.strip_suffix(".intoto.json").unwrap_or(&name);
    envelope.with_file_name(format!("{stem}.{extension}"))
}

/// Whether two envelopes' bytes carry the same payload of the same type (the same signed
/// statement, however signed).
fn same_statement(a: &[u8], b: &[u8]) -> bool {
    let parse = |bytes: &[u8]| serde_json::from_slice::<lynx_attest::Envelope>(bytes).ok();
    matches!((parse(a), parse(b)), (Some(a), Some(b)) if a.payload == b.payload && a.payload_type == b.payload_type)
}

/// Copy a verified envelope (with its samples, result, plan, journal and serving trace) into
/// `into`, unless its run is there.
fn place(envelope: &Path, verified: &Verified, into: &Path, keys: &[VerifyingKey]) -> Result<Outcome, RunError> {
    let result = &verified.result;
    let device_dir = into.join(folder_name(&result.device.name_or_kind(), slug));
    let run_id = folder_name(&result.run_id, safe_name);
    let dir = device_dir.join(&run_id);
    let target = dir.join(format!("{run_id}.intoto.json"));
    // Before 2026-12-07 collect named a run's folder and files by its id in lower case: a run
    // collected then is there under that name, and is not collected twice. What lies there is
    // that run only where it verifies and names this run's id (another run's id may be this
    // one's in lower case).
    let lower = run_id.to_ascii_lowercase();
    let legacy = device_dir.join(&lower).join(format!("{lower}.intoto.json"));
    let collected_before =
        |path: &Path| path.exists() && verify_trusted(path, keys).is_ok_and(|v| v.result.run_id == result.run_id);
    let there = if target.exists() { Some(&target) } else { Some(&legacy).filter(|path| collected_before(path)) };
    if let Some(collected) = there {
        let read = |path: &Path| read_envelope(path).map_err(|e| io(path)(std::io::Error::other(e.to_string())));
        let (there, here) = (read(collected)?, read(envelope)?);
        if there == here {
            return Ok(Outcome::Duplicate(collected.clone()));
        }
        let differently_signed = same_statement(&there, &here).then(|| {
            let also: String = verified.also_signed_by.iter().map(|id| format!(", also by key {id}")).collect();
            format!(
                ", the same signed result with other signatures (this copy: signed by key {}{also}); the collected copy \
                 is kept, as reproductions name an envelope by its sha256",
                verified.key_id
            )
        });
        return Ok(Outcome::Refused(format!(
            "duplicate: run {} is already collected at {}{}",
            result.run_id,
            collected.display(),
            differently_signed.unwrap_or_else(|| " with different contents".to_owned())
        )));
    }
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let samples = envelope.with_file_name(&verified.samples_file);
    copy(&samples, &dir.join(&verified.samples_file))?;
    let result_json = beside(envelope, "json");
    if result_json.symlink_metadata().is_ok() {
        copy(&result_json, &dir.join(format!("{run_id}.json")))?;
    }
    // What the run wrote beside its result, none of it signed: its plan (what it was asked to
    // do), its journal (each cell as it finished) and, where it served, the serving loop's
    // trace. Each is copied where it is a plain file (a link there is left behind, as it is not
    // what the run wrote).
    for extension in ["plan.json", "journal.jsonl", "served.jsonl"] {
        let file = beside(envelope, extension);
        if file.symlink_metadata().is_ok_and(|meta| meta.file_type().is_file()) {
            copy(&file, &dir.join(format!("{run_id}.{extension}")))?;
        }
    }
    // The envelope last: a folder with it is a whole result.
    copy(envelope, &target)?;
    Ok(Outcome::Collected { to: target, failed_checks: result.failed_checks() })
}

/// Rewrite `into/index.json` from the verified envelopes in `into`.
pub fn write_index(into: &Path, keys: &[VerifyingKey]) -> Result<(), RunError> {
    let mut results = Vec::new();
    let found = find_envelopes(&[into.to_path_buf()]).map_err(|e| io(into)(e.into()))?;
    for envelope in found {
        if let Ok(verified) = verify_trusted(&envelope, keys) {
            let r = &verified.result;
            results.push(Collected {
                envelope: envelope.strip_prefix(into).unwrap_or(&envelope).display().to_string(),
                run_id: r.run_id.clone(),
                device: r.device.name_or_kind(),
                model: r.config.model.name.clone(),
                suite: r.config.suite.name.clone(),
                status: r.status.to_string(),
                checks_passed: r.checks.iter().all(|c| c.passed),
                key_id: verified.key_id.clone(),
                also_signed_by: Some(verified.also_signed_by.clone()).filter(|ids| !ids.is_empty()),
            });
        }
    }
    let index = CollectIndex { updated_at: lynx_schema::time::rfc3339_utc(crate::unix_now_s()), results };
    write_json_atomic(&into.join("index.json"), &index)
}
