//! `lynx verify`: signed results against pinned public keys, each under the one its signature
//! names. A valid result's line also says what its own run said of it where that falls short
//! (test hooks set, stopped early, checks failed): a signature vouches for who made the figures,
//! not that they passed.

use crate::args::TrustArgs;
use lynx_schema::result::{RunStatus, VerifyVerdict};
use std::path::PathBuf;

pub fn run(paths: &[PathBuf], trust: TrustArgs, json: bool) -> anyhow::Result<()> {
    let keys = super::trusted_keys(trust)?;
    let files = super::envelopes_named(paths)?;
    let verdicts: Vec<VerifyVerdict> = files
        .iter()
        .map(|file| {
            let checked = lynx_attest::trust::check_against(file, &keys);
            let outcome = checked.verdict;
            let also = outcome.as_ref().ok().map(|v| v.also_signed_by.clone()).filter(|ids| !ids.is_empty());
            let others = outcome.as_ref().ok().map(|v| v.other_signatures).filter(|&n| n > 0);
            let hooks =
                outcome.as_ref().ok().and_then(|v| v.result.harness.test_hooks.clone()).filter(|h| !h.is_empty());
            let status = outcome.as_ref().ok().map(|v| v.result.status);
            let failed_checks =
                outcome.as_ref().ok().map(|v| v.result.failed_checks()).filter(|failed| !failed.is_empty());
            VerifyVerdict {
                file: file.display().to_string(),
                valid: outcome.is_ok(),
                key_id: checked.against.join(", "),
                failed_step: outcome.as_ref().err().map(|e| e.step().to_owned()),
                message: outcome.err().map(|e| e.to_string()),
                other_signatures: others.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                also_signed_by: also,
                test_hooks: hooks,
                status,
                failed_checks,
            }
        })
        .collect();
    if json {
        sayln!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        use lynx_report::escape::{inert, terminal_text};
        for v in &verdicts {
            let v = &VerifyVerdict { file: inert(&v.file), message: v.message.as_deref().map(inert), ..v.clone() };
            match &v.message {
                None => {
                    let also = v.also_signed_by.as_deref().unwrap_or_default();
                    let also_words: String = also.iter().map(|id| format!("; also by key {id}")).collect();
                    // Signatures no trusted key verifies: by other keys, or not over this result.
                    let unverified = v.other_signatures.map_or(0, |n| n as usize).saturating_sub(also.len());
                    let others = match unverified {
                        0 => String::new(),
                        n => format!(
                            "; it also carries {n} other signature{} that no trusted key verifies",
                            if n == 1 { "" } else { "s" }
                        ),
                    };
                    // A valid signature on a test's figures says so on the same line.
                    let hooks = v.test_hooks.as_ref().map_or(String::new(), |hooks| {
                        format!(
                            "; made with test hooks set ({}): a test's figures, not the device's",
                            terminal_text(&hooks.join(", "), 300)
                        )
                    });
                    // What the signature vouches for, where its own run said the figures fall short.
                    let stood = match v.status {
                        Some(RunStatus::Partial) => "; a partial result: its run stopped before every cell ran",
                        Some(RunStatus::Incomplete) => "; an incomplete result: written while its run was still going",
                        Some(RunStatus::Complete) | None => "",
                    };
                    let failed = v.failed_checks.as_deref().map_or(String::new(), |names| {
                        format!(
                            "; its run FAILED its {}: figures it marked not to publish as the device's",
                            lynx_report::text::checks_named(names)
                        )
                    });
                    sayln!("{}: valid (signed by key {}{also_words}{others}){hooks}{stood}{failed}", v.file, v.key_id);
                }
                Some(message) => sayln!("{}: INVALID at {message}", v.file),
            }
        }
    }
    let invalid = verdicts.iter().filter(|v| !v.valid).count();
    if invalid == 0 {
        Ok(())
    } else {
        Err(anyhow::anyhow!("{invalid} of {} results failed verification", verdicts.len()))
    }
}
