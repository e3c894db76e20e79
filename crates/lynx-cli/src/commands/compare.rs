//! `lynx compare`: two signed results side by side.

use std::path::Path;

pub fn run(first: &Path, second: &Path, pubkey: &Path, json: bool) -> anyhow::Result<()> {
    let key = super::pubkey(pubkey)?;
    let a = super::verified(first, &key)?.result;
    let b = super::verified(second, &key)?.result;
    let comparison =
        lynx_analysis::compare::compare(&first.display().to_string(), &a, &second.display().to_string(), &b);
    if json {
        println!("{}", serde_json::to_string_pretty(&comparison)?);
    } else {
        print!("{}", lynx_report::text::comparison(&comparison, "first", "second"));
    }
    Ok(())
}
