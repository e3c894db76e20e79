//! `lynx export`: a verified result as Markdown or CSV.

use crate::args::ExportFormat;
use std::path::Path;

pub fn run(file: &Path, pubkey: &Path, format: ExportFormat) -> anyhow::Result<()> {
    let key = super::pubkey(pubkey)?;
    let verified = super::verified(file, &key)?;
    print!("{}", lynx_report::listing::export(&verified.result, &verified.key_id, format.into()));
    Ok(())
}
