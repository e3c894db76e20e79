//! Which results to believe: finding envelopes under folders, and verifying each against
//! whichever trusted key it names, with a verdict that says why one is not believed.

use crate::envelope::{verify, Envelope, VerifyError};
use crate::Verified;
use p256::ecdsa::VerifyingKey;
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};

/// Why a result is not believed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distrust {
    /// Its envelope carries no signature.
    Unsigned,
    /// Signed by a key that is not trusted.
    Untrusted,
    /// Under a trusted key it fails verification (tampered), or it is not an envelope at all.
    Rejected,
}

impl Distrust {
    /// The word shown and exported for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Distrust::Unsigned => "unsigned",
            Distrust::Untrusted => "untrusted",
            Distrust::Rejected => "rejected",
        }
    }
}

impl fmt::Display for Distrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A result that is not believed, and why in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotTrusted {
    pub kind: Distrust,
    pub reason: String,
}

/// Every `*.intoto.json` under `dirs` (files given directly are taken as they are), sorted, each
/// envelope once. Symlinks inside a folder are not followed, so a walk never leaves the folders
/// it was given nor loops; and envelopes of the same bytes (the same file reached twice, a copy
/// in another folder) are counted once, by their sha256, the first path in order kept.
pub fn find_envelopes(dirs: &[PathBuf]) -> walkdir::Result<Vec<PathBuf>> {
    find_envelopes_except(dirs, |_| false)
}

/// [`find_envelopes`] less the envelopes `left_out` names, left out before copies are counted
/// once: a copy left out never stands in for one kept.
pub fn find_envelopes_except(dirs: &[PathBuf], left_out: impl Fn(&Path) -> bool) -> walkdir::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for dir in dirs {
        found.extend(envelopes_under(dir)?.into_iter().filter(|path| !left_out(path)));
    }
    found.sort();
    found.dedup();
    let mut seen = std::collections::HashSet::new();
    // An envelope that cannot be read is kept: its verdict will say why.
    found.retain(|path| match crate::envelope::read_envelope(path) {
        Ok(bytes) => seen.insert(Sha256::digest(&bytes)),
        Err(_) => true,
    });
    Ok(found)
}

/// Every `*.intoto.json` file under `dir` (or `dir` itself, where it is one), in name order:
/// symbolic links inside it are not followed, and copies are kept.
pub fn envelopes_under(dir: &Path) -> walkdir::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(false).follow_root_links(true).sort_by_file_name() {
        let entry = entry?;
        if entry.file_type().is_file() && entry.file_name().to_string_lossy().ends_with(".intoto.json") {
            found.push(entry.into_path());
        }
    }
    Ok(found)
}

/// The key ids the signatures of the envelope at `path` name (an unauthenticated hint, DSSE's
/// `keyid`); none where it cannot be read as an envelope.
fn named_key_ids(path: &Path) -> Vec<String> {
    crate::envelope::read_envelope(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Envelope>(&bytes).ok())
        .map(|e| e.signatures.into_iter().map(|s| s.keyid).collect())
        .unwrap_or_default()
}

/// An envelope checked against trusted keys ([`check_against`]).
#[derive(Debug)]
pub struct Checked {
    /// The ids of the keys it was checked against: the trusted one whose signature verified (or
    /// the first its signatures name, where none verified), else every one given (the only one,
    /// where one was).
    pub against: Vec<String>,
    /// Where it verified, also the other trusted keys whose signatures verify
    /// (`Verified::also_signed_by`).
    pub verdict: Result<Verified, VerifyError>,
}

/// `path` checked under each trusted key among `keys` that its signatures name (`named`): the
/// first that verifies, with the others that verify too; else the first one's failure. `None`
/// where its signatures name no trusted key. The order the keys were given in changes only
/// which verifying key is named first, never whether it verifies: a signature that does not
/// verify beside one that does is one no trusted key vouches for, as DSSE counts signatures.
fn under_named(path: &Path, named: &[String], keys: &[VerifyingKey]) -> Option<Checked> {
    let mut checked: Vec<(String, Result<Verified, VerifyError>)> = keys
        .iter()
        .map(|k| (crate::keys::key_id(k), k))
        .filter(|(id, _)| named.contains(id))
        .map(|(id, k)| (id, verify(path, k)))
        .collect();
    if checked.is_empty() {
        return None;
    }
    let first = checked.iter().position(|(_, verdict)| verdict.is_ok()).unwrap_or(0);
    let (id, mut verdict) = checked.remove(first);
    if let Ok(verified) = &mut verdict {
        verified.also_signed_by = checked.into_iter().filter(|(_, v)| v.is_ok()).map(|(id, _)| id).collect();
    }
    Some(Checked { against: vec![id], verdict })
}

/// Check `path` against the trusted keys its signatures name, with verification's own verdict
/// (the step that failed, and why). With one key this is [`verify`] against it; with several,
/// an envelope none of whose signatures names one of them fails at `signature`, naming them all.
/// A result signed by one party and its reproduction signed by another are each verified under
/// their own signer's key this way.
pub fn check_against(path: &Path, keys: &[VerifyingKey]) -> Checked {
    let named = named_key_ids(path);
    if let Some(checked) = under_named(path, &named, keys) {
        return checked;
    }
    let against: Vec<String> = keys.iter().map(crate::keys::key_id).collect();
    let Some(first) = keys.first() else {
        let verdict = Err(VerifyError::Signature("no trusted key was given to verify it against".to_owned()));
        return Checked { against, verdict };
    };
    let verdict = match verify(path, first) {
        // Unread, unsigned and malformed envelopes fail as they would under any one key.
        Err(VerifyError::Signature(_)) if keys.len() > 1 => Err(VerifyError::Signature(format!(
            "none of its {} signatures names one of the {} trusted keys ({}); they name {}",
            named.len(),
            keys.len(),
            against.join(", "),
            named.join(", ")
        ))),
        other => other,
    };
    Checked { against, verdict }
}

/// [`check_against`]'s verdict alone.
pub fn verify_against(path: &Path, keys: &[VerifyingKey]) -> Result<Verified, VerifyError> {
    check_against(path, keys).verdict
}

/// Verify `path` against the trusted keys its signatures name.
pub fn verify_trusted(path: &Path, keys: &[VerifyingKey]) -> Result<Verified, NotTrusted> {
    let rejected = |e: VerifyError| NotTrusted { kind: Distrust::Rejected, reason: e.to_string() };
    let named = named_key_ids(path);
    if let Some(checked) = under_named(path, &named, keys) {
        return checked.verdict.map_err(rejected);
    }
    match keys.first().map(|key| verify(path, key)) {
        Some(Err(VerifyError::Unsigned(reason))) => Err(NotTrusted { kind: Distrust::Unsigned, reason }),
        Some(Err(e @ (VerifyError::Read(_) | VerifyError::Envelope(_) | VerifyError::Base64(_)))) => Err(rejected(e)),
        _ => Err(NotTrusted {
            kind: Distrust::Untrusted,
            reason: format!(
                "signed by {}, not one of the {} trusted keys",
                if named.is_empty() { "no key".to_owned() } else { format!("key {}", named.join(", ")) },
                keys.len()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 14): a symlink inside a results folder is not followed out of it.
    #[test]
    fn finding_envelopes_does_not_follow_symlinks_out_of_the_folder() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("elsewhere.intoto.json"), "{}").unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("run")).unwrap();
        std::fs::write(dir.path().join("run/a.intoto.json"), "{}").unwrap();
        std::fs::write(dir.path().join("run/a.json"), "{}").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        let found = find_envelopes(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(found, [dir.path().join("run/a.intoto.json")]);
        // Issue 17: a symlink loop inside the folder, the folder given twice and a copy of the
        // envelope elsewhere in it: still one envelope.
        std::os::unix::fs::symlink(dir.path(), dir.path().join("run/loop")).unwrap();
        std::fs::create_dir(dir.path().join("copy")).unwrap();
        std::fs::copy(dir.path().join("run/a.intoto.json"), dir.path().join("copy/b.intoto.json")).unwrap();
        let twice = [dir.path().to_path_buf(), dir.path().join("run")];
        assert_eq!(find_envelopes(&twice).unwrap(), [dir.path().join("copy/b.intoto.json")]);
        // A file given directly is taken as it is.
        let direct = outside.path().join("elsewhere.intoto.json");
        assert_eq!(find_envelopes(std::slice::from_ref(&direct)).unwrap(), [direct]);
    }
}
