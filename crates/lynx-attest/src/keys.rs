//! Signing keys: ECDSA P-256, the private key as PKCS#8 PEM (mode 0600), the public key as SPKI
//! PEM; a key's id is the sha256 of its public key's DER.

use crate::files::{open_regular, read_text_bounded, Links, MOST_KEY_BYTES};
use p256::ecdsa::{SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use sha2::{Digest, Sha256};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// A key that could not be made, read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0} exists; pass --force to replace it")]
    Exists(PathBuf),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A private key others may read: refused, as ssh refuses one.
    #[error("{path} is readable by group or others (mode {mode:04o}); a private key must be its owner's alone: run `chmod 600 {path}`")]
    Exposed { path: PathBuf, mode: u32 },
}

fn file_error(path: &Path, message: impl std::fmt::Display) -> KeyError {
    KeyError::File { path: path.to_path_buf(), message: message.to_string() }
}

/// The private and public key files of a key folder.
pub fn key_paths(dir: &Path) -> (PathBuf, PathBuf) {
    (dir.join("lynx.key"), dir.join("lynx.pub"))
}

/// The default key folder: `$XDG_CONFIG_HOME/lynx`, else `~/.config/lynx`.
pub fn default_key_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))
        .map(|config| config.join("lynx"))
}

/// sha256 (hex) of the public key's DER: the key id.
pub fn key_id(key: &VerifyingKey) -> String {
    let der = key.to_public_key_der().expect("a P-256 public key encodes");
    lynx_schema::result::hex(&Sha256::digest(der.as_bytes()))
}

/// Make a key pair in `dir`: `lynx.key` (PKCS#8 PEM, 0600) and `lynx.pub` (SPKI PEM). An
/// existing key is kept unless `force`. Returns the key id.
pub fn generate(dir: &Path, force: bool) -> Result<String, KeyError> {
    let (private, public) = key_paths(dir);
    // Neither half is replaced unasked: a published lynx.pub names the key results verify under.
    for path in [&private, &public] {
        if path.exists() && !force {
            return Err(KeyError::Exists(path.clone()));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    let key = SigningKey::random(&mut rand_core::OsRng);
    let pem = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| file_error(&private, e))?;
    if force {
        let _ = std::fs::remove_file(&private);
    }
    // Created 0600 from the start: the key is never readable by others, not even briefly.
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&private)
        .map_err(|e| file_error(&private, e))?;
    file.write_all(pem.as_bytes()).and_then(|_| file.sync_all()).map_err(|e| file_error(&private, e))?;
    let verifying = *key.verifying_key();
    let public_pem = verifying.to_public_key_pem(LineEnding::LF).map_err(|e| file_error(&public, e))?;
    std::fs::write(&public, public_pem).map_err(|e| file_error(&public, e))?;
    Ok(key_id(&verifying))
}

/// The signing key in the PKCS#8 PEM file `path`, refused where its mode lets anyone but its
/// owner read it.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, KeyError> {
    use std::os::unix::fs::PermissionsExt;
    let file = open_regular(path, Links::Follow).map_err(|e| file_error(path, e))?;
    let mode = file.metadata().map_err(|e| file_error(path, e))?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(KeyError::Exposed { path: path.to_path_buf(), mode });
    }
    let pem = read_text_bounded(path, MOST_KEY_BYTES, Links::Follow).map_err(|e| file_error(path, e))?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| file_error(path, format!("not a P-256 PKCS#8 private key: {e}")))
}

/// The public key in the SPKI PEM file `path`.
pub fn read_verifying_key(path: &Path) -> Result<VerifyingKey, KeyError> {
    let pem = read_text_bounded(path, MOST_KEY_BYTES, Links::Follow).map_err(|e| file_error(path, e))?;
    VerifyingKey::from_public_key_pem(&pem).map_err(|e| file_error(path, format!("not a P-256 SPKI public key: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keys_are_made_private_kept_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let id = generate(dir.path(), false).unwrap();
        let (private, public) = key_paths(dir.path());
        assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(std::fs::read_to_string(&private).unwrap().starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(std::fs::read_to_string(&public).unwrap().starts_with("-----BEGIN PUBLIC KEY-----"));
        let signing = read_signing_key(&private).unwrap();
        assert_eq!(key_id(signing.verifying_key()), id);
        assert_eq!(key_id(&read_verifying_key(&public).unwrap()), id);
        assert_eq!(id.len(), 64);

        // Never replaced without --force; replaced with it.
        let before = std::fs::read(&private).unwrap();
        assert!(matches!(generate(dir.path(), false), Err(KeyError::Exists(_))));
        assert_eq!(std::fs::read(&private).unwrap(), before);
        let new_id = generate(dir.path(), true).unwrap();
        assert_ne!(new_id, id);
        assert_eq!(std::fs::metadata(&private).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn unreadable_or_foreign_keys_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_signing_key(&dir.path().join("none.key")).unwrap_err().to_string();
        assert!(missing.contains("none.key"), "{missing}");
        let junk = dir.path().join("junk.key");
        std::fs::write(&junk, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n").unwrap();
        std::fs::set_permissions(&junk, std::fs::Permissions::from_mode(0o600)).unwrap();
        let error = read_signing_key(&junk).unwrap_err().to_string();
        assert!(error.contains("junk.key") && error.contains("not a P-256 PKCS#8 private key"), "{error}");
    }

    /// Issue 17: a private key others may read is refused naming its mode and the fix, as ssh
    /// does; keygen keeps an existing lynx.pub (even without its lynx.key) unless forced.
    #[test]
    fn an_exposed_key_is_refused_and_a_public_key_is_never_replaced_unasked() {
        let dir = tempfile::tempdir().unwrap();
        generate(dir.path(), false).unwrap();
        let (private, public) = key_paths(dir.path());
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = read_signing_key(&private).unwrap_err().to_string();
        assert!(
            error.contains("(mode 0644)") && error.contains(&format!("chmod 600 {}", private.display())),
            "{error}"
        );
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o640)).unwrap();
        assert!(matches!(read_signing_key(&private), Err(KeyError::Exposed { mode: 0o640, .. })));
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(read_signing_key(&private).is_ok(), "read-only by its owner is private");

        std::fs::remove_file(&private).unwrap();
        let published = std::fs::read(&public).unwrap();
        let error = generate(dir.path(), false).unwrap_err().to_string();
        assert!(error.contains("lynx.pub exists; pass --force"), "{error}");
        assert_eq!(std::fs::read(&public).unwrap(), published, "the published key is kept");
        assert!(!private.exists(), "nothing half made");
        generate(dir.path(), true).unwrap();
        assert_ne!(std::fs::read(&public).unwrap(), published);
    }
}
