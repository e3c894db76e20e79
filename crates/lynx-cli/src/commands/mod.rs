//! One module per subcommand, each a `run` taking its parsed arguments; and what several of them
//! share: trusted keys, verification, the run's signing key.

mod collect;
mod compare;
mod devices;
mod export;
mod keygen;
mod models;
mod plan;
mod report;
mod reproduce;
mod roofline;
mod run;
mod shortlist;
mod verify;
mod worker;

use crate::args::{Command, SigningArgs, TrustArgs};
use crate::BadInput;
use lynx_schema::derived::PriceInputs;
use lynx_schema::value::Finite;
use std::path::{Path, PathBuf};

/// Run `command`.
pub fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Devices { json } => devices::run(json),
        Command::Models(args) => models::run(args),
        Command::Keygen { out, force } => keygen::run(out, force),
        Command::Verify { files, trust, json } => verify::run(&files, trust, json),
        Command::Run(args) => run::run(args),
        Command::Roofline { device, sustained_s, json } => roofline::run(device, sustained_s, json),
        Command::Shortlist(args) => shortlist::run(args),
        Command::Compare { first, second, trust, json } => compare::run(&first, &second, trust, json),
        Command::Reproduce(args) => reproduce::run(args),
        Command::Export { file, trust, format } => export::run(&file, trust, format),
        Command::Report { dirs, out, trust } => report::run(&dirs, &out, trust),
        Command::Collect { sources, into, trust } => collect::run(&sources, &into, trust),
        Command::Worker { run_dir } => worker::run(&run_dir),
    }
}

/// A folder lynx writes into (`--out`): a folder, or not there yet (it is made); anything else
/// is bad input, said once.
fn folder_or_absent(flag: &str, path: &Path) -> Result<(), BadInput> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_dir() => Err(BadInput(format!("{flag} {}: is not a folder", path.display()))),
        _ => Ok(()),
    }
}

/// The public key in `path` (`--pubkey`); unreadable is bad input.
fn pubkey(path: &Path) -> Result<lynx_attest::VerifyingKey, BadInput> {
    lynx_attest::read_verifying_key(path).map_err(|e| BadInput(format!("--pubkey {e}")))
}

/// Before a run measures anything: where test hooks are set in this environment, that its
/// result will record them and describe a test, not the device (an `export` left over from a
/// test session is caught before the run's minutes are spent, not after).
fn warn_of_test_hooks() {
    if let Some(hooks) = lynx_runner::test_hooks_set() {
        esayln!(
            "lynx: warning: test hooks set ({}): this run's figures will describe a test, not the device; its \
             result records the hooks, and lynx shortlist and lynx collect will not take it",
            lynx_report::escape::terminal_text(&hooks.join(", "), 300)
        );
    }
}

/// Verify `path` under the trusted key its signature names, or say why not (exit 1: a result
/// that does not verify is not an input error, it is the answer). A path that is not there, or
/// a folder where one envelope is asked for, is bad input.
fn verified(path: &Path, keys: &[lynx_attest::VerifyingKey]) -> anyhow::Result<lynx_attest::Verified> {
    if given(path)?.is_dir() {
        return Err(BadInput(format!("{}: is a folder; give one envelope (*.intoto.json)", path.display())).into());
    }
    lynx_attest::trust::verify_against(path, keys).map_err(|e| anyhow::anyhow!("{}: INVALID at {e}", path.display()))
}

/// The trusted public keys: each `--pubkey`, and every `*.pub` in `--keys`; none is bad input.
fn trusted_keys(trust: TrustArgs) -> Result<Vec<lynx_attest::VerifyingKey>, BadInput> {
    let mut key_files = trust.pubkey;
    if let Some(dir) = trust.keys {
        let entries = std::fs::read_dir(&dir).map_err(|e| BadInput(format!("--keys {}: {e}", dir.display())))?;
        let mut in_dir: Vec<PathBuf> =
            entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "pub")).collect();
        // In name order, so that what names the trusted keys names them alike on every host.
        in_dir.sort();
        key_files.extend(in_dir);
    }
    if key_files.is_empty() {
        return Err(BadInput("no trusted keys: give --pubkey KEY or --keys DIR".to_owned()));
    }
    let mut keys: Vec<lynx_attest::VerifyingKey> = Vec::with_capacity(key_files.len());
    for file in &key_files {
        let key = pubkey(file)?;
        // The same key given twice (by --pubkey and in --keys) is one trusted key.
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    Ok(keys)
}

/// An envelope and its verdict: what verified, or why it is not believed (kind, reason).
type Verdict = (PathBuf, Result<lynx_attest::Verified, (String, String)>);

/// Every envelope under `dirs` (each there, each folder holding one: [`envelopes_named`]), one
/// copy of each, each verified against the trusted `keys`.
fn verdicts(dirs: &[PathBuf], keys: &[lynx_attest::VerifyingKey]) -> Result<Vec<Verdict>, BadInput> {
    envelopes_named(dirs)?;
    let files = lynx_attest::trust::find_envelopes(dirs).map_err(|e| BadInput(format!("results folder: {e}")))?;
    Ok(files
        .into_iter()
        .map(|file| {
            let verdict =
                lynx_attest::trust::verify_trusted(&file, keys).map_err(|not| (not.kind.to_string(), not.reason));
            (file, verdict)
        })
        .collect())
}

/// What a path given on the command line is; one that is not there is bad input, naming it.
fn given(path: &Path) -> Result<std::fs::Metadata, BadInput> {
    std::fs::metadata(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))
}

/// Every `*.intoto.json` under `folder`, in name order. A folder with none, or one that cannot
/// be walked, is bad input: a command that found nothing to read must not verify, rank, report
/// or collect as if it had read something (a misspelt or empty folder).
fn envelopes_in(folder: &Path) -> Result<Vec<PathBuf>, BadInput> {
    let found = lynx_attest::trust::envelopes_under(folder)
        .map_err(|e| BadInput(format!("{}: cannot be searched for envelopes: {e}", folder.display())))?;
    if found.is_empty() {
        return Err(BadInput(format!("{}: a folder with no *.intoto.json envelope under it", folder.display())));
    }
    Ok(found)
}

/// The envelopes the paths a command was given name: a file as it is (whatever its name: its
/// verdict says what it holds), a folder as every `*.intoto.json` under it ([`envelopes_in`]),
/// in name order. A path that is not there, or a folder with none, is bad input.
fn envelopes_named(paths: &[PathBuf]) -> Result<Vec<PathBuf>, BadInput> {
    let mut files = Vec::new();
    for path in paths {
        if given(path)?.is_dir() {
            files.extend(envelopes_in(path)?);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// An envelope's verdict as a listing shows it: its verified result and who signed it, or why
/// not.
fn listing((file, verdict): Verdict) -> lynx_report::site::Listed {
    (file, verdict.map(|v| (v.result, lynx_report::Signers { key_id: v.key_id, also: v.also_signed_by })))
}

/// Every envelope under `dirs`, each verified against the trusted `keys`: its verified result
/// and who signed it, or why it is not believed (kind, reason).
fn listed(dirs: &[PathBuf], keys: &[lynx_attest::VerifyingKey]) -> Result<Vec<lynx_report::site::Listed>, BadInput> {
    Ok(verdicts(dirs, keys)?.into_iter().map(listing).collect())
}

/// The price inputs (`--price-per-hour`, `--utilisation`), already checked by their parsers.
fn price_inputs(price_per_hour: Option<f64>, utilisation: f64) -> Result<PriceInputs, BadInput> {
    let finite = |value: f64, what: &str| Finite::new(value, what).map_err(|e| BadInput(e.to_string()));
    Ok(PriceInputs {
        usd_per_device_hour: price_per_hour.map(|p| finite(p, "--price-per-hour")).transpose()?,
        utilisation: finite(utilisation, "--utilisation")?,
    })
}

/// The run's signing key (`None` for `--unsigned`): `--key`, else lynx.key in the default key
/// folder, made there (and said so) when that folder has none; an unreadable key is bad input,
/// refused before any measurement.
fn signing_key(signing: &SigningArgs) -> Result<Option<lynx_attest::SigningKey>, BadInput> {
    if signing.unsigned {
        return Ok(None);
    }
    let path: PathBuf = match &signing.key {
        Some(path) => path.clone(),
        None => {
            let dir = lynx_attest::default_key_dir().ok_or_else(|| {
                BadInput(
                    "no --key and no default key folder (neither XDG_CONFIG_HOME nor HOME is set); pass --key or \
                     --unsigned"
                        .to_owned(),
                )
            })?;
            let (private, public) = lynx_attest::keys::key_paths(&dir);
            if !private.exists() {
                let id = lynx_attest::generate(&dir, false).map_err(|e| BadInput(format!("signing key {e}")))?;
                esayln!(
                    "lynx: made a signing key for this run and the next: {} (key id {id}); publish its public half, {}, \
                     beside your results (results/keys/) so others can verify them",
                    private.display(),
                    public.display()
                );
            }
            private
        }
    };
    lynx_attest::read_signing_key(&path).map(Some).map_err(|e| match e {
        exposed @ lynx_attest::KeyError::Exposed { .. } => BadInput(format!("signing key {exposed}")),
        e => BadInput(format!("signing key {e}; make one with `lynx keygen`, pass --key FILE, or run with --unsigned")),
    })
}
