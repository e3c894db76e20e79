//! `lynx export`: a verified result as Markdown or CSV.

use crate::args::{ExportFormat, TrustArgs};
use std::path::Path;

pub fn run(file: &Path, trust: TrustArgs, format: ExportFormat) -> anyhow::Result<()> {
    let keys = super::trusted_keys(trust)?;
    let verified = super::verified(file, &keys)?;
    let signers = lynx_report::Signers { key_id: verified.key_id, also: verified.also_signed_by };
    say!("{}", lynx_report::listing::export(&verified.result, &signers, format.into()));
    Ok(())
}
