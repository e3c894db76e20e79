//! `lynx report`: the static results site.

use crate::args::TrustArgs;
use crate::BadInput;
use lynx_report::site::{Listed, Reproduction};
use std::path::{Path, PathBuf};

pub fn run(dirs: &[PathBuf], out: &Path, trust: TrustArgs) -> anyhow::Result<()> {
    super::folder_or_absent("--out", out)?;
    let trusted = super::trusted_keys(trust)?;
    let verdicts = super::verdicts(dirs, &trusted)?;
    let digests: Vec<Option<String>> =
        verdicts.iter().map(|(_, verdict)| verdict.as_ref().ok().map(|v| v.envelope_sha256.clone())).collect();
    let listed: Vec<Listed> = verdicts.into_iter().map(super::listing).collect();
    let reproductions = reproductions(&listed, &digests);
    let built = lynx_report::site::build_site(listed, &reproductions, out)
        .map_err(|e| BadInput(format!("--out {}: {e}", out.display())))?;
    sayln!("wrote {}", built.index.display());
    if !built.removed.is_empty() {
        let pages = if built.removed.len() == 1 { "page" } else { "pages" };
        sayln!(
            "removed {} result {pages} an earlier build left in {} that this one does not list there",
            built.removed.len(),
            out.display()
        );
    }
    Ok(())
}

/// Every verified result that reproduces another verified one of `listed` (its `reproduces`
/// names that envelope's sha256, which `digests` holds for each verified envelope: of the bytes
/// that verified), compared with it.
fn reproductions(listed: &[Listed], digests: &[Option<String>]) -> Vec<Reproduction> {
    let mut found = Vec::new();
    for (local, (local_file, verdict)) in listed.iter().enumerate() {
        let Ok((result, _)) = verdict else { continue };
        let Some(of) = &result.reproduces else { continue };
        let Some(published) = digests.iter().position(|d| d.as_deref() == Some(of.envelope_sha256.as_str())) else {
            continue;
        };
        let (published_file, Ok((original, _))) = &listed[published] else { continue };
        let comparison = lynx_analysis::compare::compare(
            &published_file.display().to_string(),
            original,
            &local_file.display().to_string(),
            result,
        );
        found.push(Reproduction { published, local, comparison });
    }
    found
}
