//! `lynx compare`: two signed results side by side.

use crate::args::TrustArgs;
use std::path::Path;

pub fn run(first: &Path, second: &Path, trust: TrustArgs, json: bool) -> anyhow::Result<()> {
    let keys = super::trusted_keys(trust)?;
    let a = super::verified(first, &keys)?;
    let b = super::verified(second, &keys)?;
    let mut comparison = lynx_analysis::compare::compare(
        &first.display().to_string(),
        &a.result,
        &second.display().to_string(),
        &b.result,
    );
    // Who vouches for each side: a lab's result and a vendor's reproduction are two signers.
    comparison.signers = Some([a.key_id, b.key_id]);
    if json {
        println!("{}", serde_json::to_string_pretty(&comparison)?);
    } else {
        print!("{}", lynx_report::text::comparison(&comparison, "first", "second"));
    }
    Ok(())
}
