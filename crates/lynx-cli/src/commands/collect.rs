//! `lynx collect`: verified results from many nodes into one results folder.

use crate::args::TrustArgs;
use crate::BadInput;
use lynx_report::escape::terminal_text;
use lynx_runner::collect::Outcome;
use std::path::{Path, PathBuf};

pub fn run(sources: &[PathBuf], into: &Path, trust: TrustArgs) -> anyhow::Result<()> {
    super::folder_or_absent("--into", into)?;
    let trusted = super::trusted_keys(trust)?;
    super::envelopes_named(sources)?;
    std::fs::create_dir_all(into).map_err(|e| BadInput(format!("--into {}: {e}", into.display())))?;
    let outcomes = lynx_runner::collect::collect(sources, into, &trusted)?;
    let mut refused = 0;
    for (envelope, outcome) in &outcomes {
        let shown = terminal_text(&envelope.display().to_string(), 300);
        match outcome {
            Outcome::Collected { to, failed_checks } if failed_checks.is_empty() => {
                sayln!("collected {shown} -> {}", to.display())
            }
            // Published as the result marks itself: its figures kept, the failure said.
            Outcome::Collected { to, failed_checks } => sayln!(
                "collected {shown} -> {}; its run FAILED its {} (checks_passed: false in the index)",
                to.display(),
                lynx_report::text::checks_named(failed_checks)
            ),
            Outcome::Duplicate(at) => sayln!("already collected {shown} (identical to {})", at.display()),
            Outcome::Refused(reason) => {
                refused += 1;
                sayln!("REFUSED {shown}: {}", terminal_text(reason, 600));
            }
        }
    }
    sayln!("index: {}", into.join("index.json").display());
    if refused == 0 {
        Ok(())
    } else {
        Err(anyhow::anyhow!("{refused} of {} results were refused", outcomes.len()))
    }
}
