//! `lynx compare`: two signed results side by side.

use crate::args::TrustArgs;
use std::path::Path;

pub fn run(first: &Path, second: &Path, trust: TrustArgs, json: bool) -> anyhow::Result<()> {
    let keys = super::trusted_keys(trust)?;
    let a = super::verified(first, &keys)?;
    let b = super::verified(second, &keys)?;
    if a.result == b.result {
        // One result against itself (the same file, a copy, a countersigned copy): every ratio
        // is 1 by construction, which the verdict would otherwise call a reproduction.
        esayln!(
            "lynx: warning: both are the same result (run {}): compared with itself, it is within 2% by construction",
            lynx_report::escape::terminal_text(&a.result.run_id, 100)
        );
    }
    let mut comparison = lynx_analysis::compare::compare(
        &first.display().to_string(),
        &a.result,
        &second.display().to_string(),
        &b.result,
    );
    // Who vouches for each side: a lab's result and a vendor's reproduction are two signers.
    comparison.signers = Some([a.key_id, b.key_id]);
    if json {
        sayln!("{}", serde_json::to_string_pretty(&comparison)?);
    } else {
        say!("{}", lynx_report::text::comparison(&comparison, "first", "second"));
    }
    Ok(())
}
