//! `lynx export`: a verified result as Markdown or CSV.

use crate::args::{ExportFormat, TrustArgs};
use std::path::Path;

pub fn run(file: &Path, trust: TrustArgs, format: ExportFormat) -> anyhow::Result<()> {
    let keys = super::trusted_keys(trust)?;
    let verified = super::verified(file, &keys)?;
    print!("{}", lynx_report::listing::export(&verified.result, &verified.key_id, format.into()));
    Ok(())
}
