//! `lynx verify`: signed results against a pinned public key.

use lynx_schema::result::VerifyVerdict;
use std::path::{Path, PathBuf};

pub fn run(files: &[PathBuf], pubkey: &Path, json: bool) -> anyhow::Result<()> {
    let key = super::pubkey(pubkey)?;
    let key_id = lynx_attest::key_id(&key);
    let verdicts: Vec<VerifyVerdict> = files
        .iter()
        .map(|file| {
            let outcome = lynx_attest::verify(file, &key);
            let others = outcome.as_ref().ok().map(|v| v.other_signatures).filter(|&n| n > 0);
            let hooks =
                outcome.as_ref().ok().and_then(|v| v.result.harness.test_hooks.clone()).filter(|h| !h.is_empty());
            VerifyVerdict {
                file: file.display().to_string(),
                valid: outcome.is_ok(),
                key_id: key_id.clone(),
                failed_step: outcome.as_ref().err().map(|e| e.step().to_owned()),
                message: outcome.err().map(|e| e.to_string()),
                other_signatures: others.map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                test_hooks: hooks,
            }
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&verdicts)?);
    } else {
        use lynx_report::escape::{inert, terminal_text};
        for v in &verdicts {
            let v = &VerifyVerdict { file: inert(&v.file), message: v.message.as_deref().map(inert), ..v.clone() };
            match &v.message {
                None => {
                    let others = v.other_signatures.map_or(String::new(), |n| {
                        format!(
                            "; it also carries {n} other signature{}, not checked against this key and not trusted",
                            if n == 1 { "" } else { "s" }
                        )
                    });
                    // A valid signature on a test's figures says so on the same line.
                    let hooks = v.test_hooks.as_ref().map_or(String::new(), |hooks| {
                        format!(
                            "; made with test hooks set ({}): a test's figures, not the device's",
                            terminal_text(&hooks.join(", "), 300)
                        )
                    });
                    println!("{}: valid (signed by key {}{others}){hooks}", v.file, v.key_id);
                }
                Some(message) => println!("{}: INVALID at {message}", v.file),
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
