//! `lynx keygen`: a signing key pair.

use crate::BadInput;
use std::path::PathBuf;

pub fn run(out: Option<PathBuf>, force: bool) -> anyhow::Result<()> {
    if let Some(out) = &out {
        super::folder_or_absent("--out", out)?;
    }
    let dir = out.or_else(lynx_attest::default_key_dir).ok_or_else(|| {
        BadInput("no --out and no default key folder (neither XDG_CONFIG_HOME nor HOME is set)".to_owned())
    })?;
    let id = lynx_attest::generate(&dir, force).map_err(|e| BadInput(e.to_string()))?;
    let (private, public) = lynx_attest::keys::key_paths(&dir);
    sayln!("wrote {} and {} (key id {id})", private.display(), public.display());
    Ok(())
}
