//! `lynx report`: the static results site.

use crate::args::TrustArgs;
use crate::BadInput;
use std::path::{Path, PathBuf};

pub fn run(dirs: &[PathBuf], out: &Path, trust: TrustArgs) -> anyhow::Result<()> {
    let trusted = super::trusted_keys(trust)?;
    let listed = super::listed(dirs, &trusted)?;
    let index =
        lynx_report::site::build_site(listed, out).map_err(|e| BadInput(format!("--out {}: {e}", out.display())))?;
    println!("wrote {}", index.display());
    Ok(())
}
