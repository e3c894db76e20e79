//! `lynx`: benchmark how a device runs the public PyTorch stack.
//!
//! The only crate that prints. Exit codes: 0 success, 1 a run that failed, 2 bad input (unknown
//! device, missing or malformed suite or model file, bad arguments).

mod fleet;
mod output;
mod supervisor;

use anyhow::Context;
use clap::{Parser, Subcommand};
use lynx_core::derived::PriceInputs;
use lynx_core::device::DeviceName;
use lynx_core::result::VerifyVerdict;
use lynx_core::value::{Finite, Reported};
use lynx_runner::{devices, libtorch, suite, Plan, RunError};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "lynx", version, about = "Benchmark how a device runs the public PyTorch stack")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the devices libtorch can use, with name, memory and the libtorch that runs them.
    Devices {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// List the model catalogue (total and active parameters, weight and KV-cache bytes per
    /// precision), or import a Hugging Face config.json into it.
    Models {
        #[command(subcommand)]
        action: Option<ModelsAction>,
        /// A folder of model shape files that adds to or overrides the built-in catalogue.
        #[arg(long, env = "LYNX_MODELS_DIR", global = true)]
        models: Option<PathBuf>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Make an ECDSA P-256 signing key pair: DIR/lynx.key (PKCS#8 PEM, mode 0600) and
    /// DIR/lynx.pub (SPKI PEM).
    Keygen {
        /// The key folder; by default $XDG_CONFIG_HOME/lynx (or ~/.config/lynx).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace an existing key.
        #[arg(long)]
        force: bool,
    },
    /// Verify signed results (DSSE envelopes) against a pinned public key: exit 0 when every one
    /// is valid, otherwise 1 naming the first failed step of each.
    Verify {
        /// The `.intoto.json` envelopes; each one's samples file must be beside it.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The signer's public key (SPKI PEM).
        #[arg(long)]
        pubkey: PathBuf,
        /// Print one JSON verdict per file (an array) instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Warm the device up to equilibrium, sweep the suite's cells, derive the figures, sign the
    /// result. The run lives in OUT/<device>/<run id>/; a run that was killed resumes with
    /// --resume that folder. SIGINT or SIGTERM finish the current step and sign a partial result.
    Run {
        /// A suite's name (built in, or MODELS/suites/NAME.toml) or a suite file; by default
        /// `standard` on a GPU and `cpu` on the CPU.
        #[arg(long)]
        suite: Option<String>,
        /// cpu, cuda:N or rocm:N; the first GPU if there is one, else the CPU.
        #[arg(long)]
        device: Option<String>,
        /// A folder of model shape files and of suites/ that adds to or overrides the built-in
        /// catalogue.
        #[arg(long, env = "LYNX_MODELS_DIR")]
        models: Option<PathBuf>,
        /// The run lives in OUT/<device>/<run id>/. Local runs never go into the published record
        /// (`results/`): publishing is `lynx collect OUT --into results`.
        #[arg(long, default_value = "runs")]
        out: PathBuf,
        /// Read the weights from this Hugging Face safetensors checkpoint folder instead of
        /// drawing them from the suite's seed.
        #[arg(long)]
        weights: Option<PathBuf>,
        /// Sign the result with this key (PKCS#8 PEM); by default lynx.key in the default key
        /// folder (see `lynx keygen`).
        #[arg(long, conflicts_with = "unsigned")]
        key: Option<PathBuf>,
        /// Publish the result unsigned (its envelope has no signature; `lynx verify` says so).
        #[arg(long)]
        unsigned: bool,
        /// Resume the run in this folder: only the cells its journal lacks are run, with the
        /// configuration it was started with (a different --suite, --device or --weights is
        /// refused).
        #[arg(long, value_name = "RUN_DIR")]
        resume: Option<PathBuf>,
        /// Price of one device-hour in USD, for the cost per million output tokens (no price, no
        /// cost figure).
        #[arg(long, value_name = "USD")]
        price_per_hour: Option<f64>,
        /// Share of hours the device serves at the latency-bounded load, in (0, 1].
        #[arg(long, default_value_t = 1.0)]
        utilisation: f64,
        /// Run on every GPU of this node (the CPU when it has none): one `lynx run` process per
        /// device, one signed result each, and a node summary in OUT/nodes/.
        #[arg(long, conflicts_with_all = ["device", "resume", "devices"])]
        all_devices: bool,
        /// Run on these devices, one process each, as --all-devices does (e.g. cuda:0,cuda:2).
        #[arg(long, value_delimiter = ',', conflicts_with_all = ["device", "resume"])]
        devices: Vec<String>,
        /// With --all-devices or --devices: one device after another instead of all at once.
        #[arg(long)]
        one_at_a_time: bool,
        /// (internal) Write the run's folder to this file once it exists.
        #[arg(long, hide = true)]
        report_run_dir: Option<PathBuf>,
    },
    /// Measure the device's ceilings and print them: memory bandwidth (libtorch copy; STREAM on
    /// the CPU; native CUDA kernels on NVIDIA GPUs) and matmul rates (libtorch in every precision
    /// the device runs; cuBLASLt on NVIDIA GPUs), and how far libtorch is from the native ones.
    Roofline {
        /// cpu, cuda:N or rocm:N; the first GPU if there is one, else the CPU.
        #[arg(long)]
        device: Option<String>,
        /// Also measure sustained matmul rates, this many seconds each (0: burst only).
        #[arg(long, default_value_t = 0.0)]
        sustained_s: f64,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Rank devices for a workload from published results: verify each against the trusted keys
    /// (unsigned, untrusted and tampered results are listed with the reason, never ranked),
    /// re-derive latency-bounded throughput at the given p99 bounds from each result's cells,
    /// and rank by cost per million output tokens at the prices given.
    Shortlist {
        /// Folders (searched for *.intoto.json) or envelope files.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// MODEL:ISL/OSL, e.g. llama-3.1-8b:1024/1024.
        #[arg(long)]
        workload: String,
        /// p99 time to first token bound, e.g. 2s or 450ms.
        #[arg(long)]
        ttft_p99: String,
        /// p99 time per output token bound, e.g. 200ms.
        #[arg(long)]
        tpot_p99: String,
        /// DEVICE=USD_PER_HOUR, comma-separated or repeated; DEVICE is the device's name as in
        /// the result, or its slug (e.g. nvidia-h200; a name holding a comma must be given by slug).
        #[arg(long, value_delimiter = ',')]
        price: Vec<String>,
        /// Share of hours the devices serve at that load, in (0, 1].
        #[arg(long, default_value_t = 1.0)]
        utilisation: f64,
        /// A trusted public key (SPKI PEM); repeatable.
        #[arg(long)]
        pubkey: Vec<PathBuf>,
        /// A folder of trusted public keys (every *.pub in it).
        #[arg(long)]
        keys: Option<PathBuf>,
        /// table, markdown, csv or json.
        #[arg(long, default_value = "table")]
        format: String,
    },
    /// Two signed results side by side: every figure both have, the second over the first, and
    /// whether the second lies within the first's own spread; and how their devices, software
    /// and configurations differ.
    Compare {
        first: PathBuf,
        second: PathBuf,
        /// The public key both are verified against (SPKI PEM).
        #[arg(long)]
        pubkey: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Re-run a published result's exact configuration on this node: verify it, warn where the
    /// device or software differs, run, sign the local result (which records the published one's
    /// digest), and print published, local and local/published for every figure.
    Reproduce {
        /// The published `.intoto.json` (its samples file beside it).
        published: PathBuf,
        /// The publisher's public key.
        #[arg(long)]
        pubkey: PathBuf,
        /// cpu, cuda:N or rocm:N; by default the published device's name if this host has it,
        /// else the first GPU, else the CPU.
        #[arg(long)]
        device: Option<String>,
        /// The checkpoint folder, when the published run read its weights from one.
        #[arg(long)]
        weights: Option<PathBuf>,
        /// The local run lives in OUT/<device>/<run id>/.
        #[arg(long, default_value = "runs")]
        out: PathBuf,
        #[arg(long, conflicts_with = "unsigned")]
        key: Option<PathBuf>,
        #[arg(long)]
        unsigned: bool,
    },
    /// Export a signed result as CSV (one row per cell, every figure) or Markdown (the record,
    /// cells, roofline, derived figures and checks), after verifying it.
    Export {
        /// The `.intoto.json` envelope (its samples file beside it).
        file: PathBuf,
        #[arg(long)]
        pubkey: PathBuf,
        /// csv or markdown.
        #[arg(long, default_value = "markdown")]
        format: String,
    },
    /// Build a self-contained static site of results: SITE/index.html with every result's
    /// verification status, per-workload frontier plots, latency-bounded throughput and cost
    /// tables, roofline bars; a page per verified result with its record, checks, cells and a
    /// telemetry timeline. SVG plots, no network, no scripts.
    Report {
        /// Folders (searched for *.intoto.json) or envelope files.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The site's folder.
        #[arg(long)]
        out: PathBuf,
        /// A trusted public key; repeatable.
        #[arg(long)]
        pubkey: Vec<PathBuf>,
        /// A folder of trusted public keys (every *.pub in it).
        #[arg(long)]
        keys: Option<PathBuf>,
    },
    /// Gather results from many nodes into one results folder: verify each envelope against the
    /// trusted keys, copy it with its result and samples into DIR/<device>/<run id>/, refuse
    /// tampered, unsigned and untrusted ones and a second, different copy of a run, and write
    /// DIR/index.json. Exit 1 when anything was refused (the rest is collected).
    Collect {
        /// Folders (searched for *.intoto.json) or envelope files.
        #[arg(required = true)]
        sources: Vec<PathBuf>,
        #[arg(long)]
        into: PathBuf,
        #[arg(long)]
        pubkey: Vec<PathBuf>,
        #[arg(long)]
        keys: Option<PathBuf>,
    },
    /// (internal) The worker process of `lynx run`: device work on one run folder.
    #[command(hide = true)]
    Worker { run_dir: PathBuf },
}

#[derive(Subcommand)]
enum ModelsAction {
    /// Write the shape a Hugging Face config.json describes (model types llama, mistral,
    /// mixtral, qwen2, qwen3, qwen3_moe, gpt_oss, deepseek_v3) as models/NAME.toml.
    Import {
        /// The config.json.
        file: PathBuf,
        /// The model's name; by default the config's folder (or file) name in lower case.
        #[arg(long)]
        name: Option<String>,
        /// Where to write; by default models/NAME.toml under the current folder.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace an existing file.
        #[arg(long)]
        force: bool,
    },
}

/// An error in what the user gave: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct BadInput(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Before any device query, so libtorch sees the GPUs its backends drive.
    libtorch::load_gpu_backends();
    match dispatch(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) if error.downcast_ref::<Exit>().is_some() => {
            ExitCode::from(error.downcast_ref::<Exit>().map_or(1, |exit| exit.0))
        }
        Err(error) => {
            eprintln!("lynx: error: {error:#}");
            let bad_input = error.downcast_ref::<BadInput>().is_some()
                || error.downcast_ref::<RunError>().is_some_and(RunError::is_bad_input);
            ExitCode::from(if bad_input { 2 } else { 1 })
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Devices { json } => {
            let host = lynx_runner::host_record();
            let list = devices::list(&host);
            let runtime = libtorch::load_gpu_backends();
            if json {
                let records: Vec<_> = list.iter().map(|d| &d.record).collect();
                println!("{}", serde_json::to_string_pretty(&records)?);
            } else {
                print!("{}", output::devices_table(&list, runtime));
            }
            Ok(())
        }
        Command::Models { action: None, models, json } => {
            let shapes = suite::Catalogue::new(models).models()?;
            let summaries: Vec<_> = shapes.iter().map(lynx_core::catalogue::ModelSummary::of).collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&summaries)?);
            } else {
                print!("{}", output::models_table(&summaries));
            }
            Ok(())
        }
        Command::Models { action: Some(ModelsAction::Import { file, name, out, force }), .. } => {
            let name = name.unwrap_or_else(|| suite::model_name_for(&file));
            let out = out.unwrap_or_else(|| PathBuf::from("models").join(format!("{name}.toml")));
            let shape = suite::import_model(&file, &name, &out, force)?;
            let summary = lynx_core::catalogue::ModelSummary::of(&shape);
            println!("wrote {} ({})", out.display(), output::parameters_line(&summary));
            Ok(())
        }
        Command::Keygen { out, force } => {
            let dir = out.or_else(lynx_publish::default_key_dir).ok_or_else(|| {
                BadInput("no --out and no default key folder (neither XDG_CONFIG_HOME nor HOME is set)".to_owned())
            })?;
            let id = lynx_publish::generate(&dir, force).map_err(|e| BadInput(e.to_string()))?;
            let (private, public) = lynx_publish::keys::key_paths(&dir);
            println!("wrote {} and {} (key id {id})", private.display(), public.display());
            Ok(())
        }
        Command::Verify { files, pubkey, json } => {
            let key = lynx_publish::read_verifying_key(&pubkey).map_err(|e| BadInput(format!("--pubkey {e}")))?;
            let key_id = lynx_publish::key_id(&key);
            let verdicts: Vec<VerifyVerdict> = files
                .iter()
                .map(|file| {
                    let outcome = lynx_publish::verify(file, &key);
                    VerifyVerdict {
                        file: file.display().to_string(),
                        valid: outcome.is_ok(),
                        key_id: key_id.clone(),
                        failed_step: outcome.as_ref().err().map(|e| e.step().to_owned()),
                        message: outcome.err().map(|e| e.to_string()),
                    }
                })
                .collect();
            if json {
                println!("{}", serde_json::to_string_pretty(&verdicts)?);
            } else {
                for v in &verdicts {
                    match &v.message {
                        None => println!("{}: valid (signed by key {})", v.file, v.key_id),
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
        Command::Run {
            suite,
            device,
            models,
            out,
            weights,
            key,
            unsigned,
            resume,
            price_per_hour,
            utilisation,
            all_devices,
            devices,
            one_at_a_time,
            report_run_dir,
        } => {
            let device_name: Option<DeviceName> =
                device.as_deref().map(str::parse).transpose().map_err(|e| BadInput(format!("--device {e}")))?;
            let price = price_inputs(price_per_hour, utilisation)?;
            // The key is read before anything is measured: a run that cannot be signed is refused.
            let signing_key = if unsigned { None } else { Some(read_run_key(key.clone())?) };
            if all_devices || !devices.is_empty() {
                let host = lynx_runner::host_record();
                let names: Vec<String> = if devices.is_empty() {
                    let all = devices::list(&host);
                    let gpus: Vec<String> = all
                        .iter()
                        .filter(|d| d.record.device != DeviceName::Cpu)
                        .map(|d| d.record.device.to_string())
                        .collect();
                    if gpus.is_empty() {
                        vec!["cpu".to_owned()]
                    } else {
                        gpus
                    }
                } else {
                    for name in &devices {
                        let parsed: DeviceName = name.parse().map_err(|e| BadInput(format!("--devices {e}")))?;
                        devices::find(parsed, &host)?;
                    }
                    devices
                };
                let mut run_args = vec!["--out".to_owned(), out.display().to_string()];
                if let Some(models) = &models {
                    run_args.extend(["--models".to_owned(), models.display().to_string()]);
                }
                if let Some(suite) = &suite {
                    run_args.extend(["--suite".to_owned(), suite.clone()]);
                }
                if let Some(weights) = &weights {
                    run_args.extend(["--weights".to_owned(), weights.display().to_string()]);
                }
                match (&key, unsigned) {
                    (_, true) => run_args.push("--unsigned".to_owned()),
                    (Some(key), false) => run_args.extend(["--key".to_owned(), key.display().to_string()]),
                    (None, false) => {}
                }
                if let Some(price) = price_per_hour {
                    run_args.extend(["--price-per-hour".to_owned(), price.to_string()]);
                }
                run_args.extend(["--utilisation".to_owned(), utilisation.to_string()]);
                let plan = fleet::NodePlan { devices: names, run_args, out, one_at_a_time };
                let (summary, path) = fleet::run_node(&plan)?;
                print!("{}", output::node_summary(&summary));
                println!("node summary: {}", path.display());
                return if summary.runs.iter().all(|r| r.exit == "exit 0") {
                    Ok(())
                } else {
                    Err(anyhow::anyhow!("not every device's run succeeded; see the summary above"))
                };
            }
            let resuming = resume.is_some();
            let run = match resume {
                Some(dir) => resumable(&dir, suite.as_deref(), device_name, weights.as_deref(), models)?,
                None => {
                    let host = lynx_runner::host_record();
                    let device = match device_name {
                        Some(name) => devices::find(name, &host)?,
                        None => devices::best(&host),
                    };
                    let default_suite = if device.record.device == DeviceName::Cpu { "cpu" } else { "standard" };
                    let (suite, model) =
                        suite::Catalogue::new(models).suite(suite.as_deref().unwrap_or(default_suite))?;
                    lynx_runner::start(&Plan { suite, model, device, results_dir: out, weights })?
                }
            };
            if let Some(file) = &report_run_dir {
                std::fs::write(file, run.dir.display().to_string())
                    .map_err(|e| BadInput(format!("--report-run-dir {}: {e}", file.display())))?;
            }
            execute(&run, resuming, signing_key.as_ref(), price).map(|_| ())
        }
        Command::Roofline { device, sustained_s, json } => {
            let device_name: Option<DeviceName> =
                device.as_deref().map(str::parse).transpose().map_err(|e| BadInput(format!("--device {e}")))?;
            if !(sustained_s.is_finite() && sustained_s >= 0.0) {
                return Err(
                    BadInput(format!("--sustained-s {sustained_s}: must be a number of seconds, 0 or more")).into()
                );
            }
            let host = lynx_runner::host_record();
            let device = match device_name {
                Some(name) => devices::find(name, &host)?,
                None => devices::best(&host),
            };
            let _inference = libtorch::InferenceMode::enter();
            let plan = lynx_runner::roofline::ProbePlan {
                precision: None,
                sustained_s: Some(sustained_s).filter(|&s| s > 0.0),
            };
            let mut record = lynx_runner::roofline::burst(&device, &plan);
            lynx_runner::roofline::sustained(&device, &plan, &mut record);
            if json {
                println!("{}", serde_json::to_string_pretty(&record)?);
            } else {
                println!("{} ({})", device.record.device, device.record.name);
                print!("{}", output::roofline_table(&record));
            }
            Ok(())
        }
        Command::Shortlist { dirs, workload, ttft_p99, tpot_p99, price, utilisation, pubkey, keys, format } => {
            let format = output::Format::parse(&format).map_err(BadInput)?;
            let (model, shape) = workload
                .split_once(':')
                .ok_or_else(|| BadInput(format!("--workload {workload}: expected MODEL:ISL/OSL")))?;
            let (isl, osl) = shape
                .split_once('/')
                .and_then(|(i, o)| Some((i.parse::<u32>().ok()?, o.parse::<u32>().ok()?)))
                .filter(|&(i, o)| i > 0 && o > 0)
                .ok_or_else(|| BadInput(format!("--workload {workload}: ISL/OSL must be two positive token counts")))?;
            let ttft_p99_s = parse_duration(&ttft_p99).map_err(|e| BadInput(format!("--ttft-p99 {e}")))?;
            let tpot_p99_s = parse_duration(&tpot_p99).map_err(|e| BadInput(format!("--tpot-p99 {e}")))?;
            let prices = price
                .iter()
                .map(|p| {
                    let (device, usd) = p.rsplit_once('=')?;
                    let usd: f64 = usd.trim().parse().ok().filter(|u: &f64| u.is_finite() && *u > 0.0)?;
                    Some((device.trim().to_owned(), usd))
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| BadInput(format!("--price {}: expected DEVICE=USD_PER_HOUR", price.join(","))))?;
            price_inputs(None, utilisation)?;
            let trusted = trusted_keys(pubkey, keys)?;
            let files =
                lynx_publish::shortlist::find_envelopes(&dirs).map_err(|e| BadInput(format!("results folder: {e}")))?;
            let request = lynx_core::shortlist::Request {
                model: model.to_owned(),
                isl,
                osl,
                ttft_p99_s,
                tpot_p99_s,
                prices,
                utilisation,
            };
            let list = lynx_publish::shortlist::shortlist(&files, &trusted, &request);
            print!("{}", output::shortlist(&list, format)?);
            Ok(())
        }
        Command::Compare { first, second, pubkey, json } => {
            let key = lynx_publish::read_verifying_key(&pubkey).map_err(|e| BadInput(format!("--pubkey {e}")))?;
            let a = verified(&first, &key)?.result;
            let b = verified(&second, &key)?.result;
            let comparison =
                lynx_core::compare::compare(&first.display().to_string(), &a, &second.display().to_string(), &b);
            if json {
                println!("{}", serde_json::to_string_pretty(&comparison)?);
            } else {
                print!("{}", output::comparison(&comparison, "first", "second"));
            }
            Ok(())
        }
        Command::Reproduce { published, pubkey, device, weights, out, key, unsigned } => {
            let trusted = lynx_publish::read_verifying_key(&pubkey).map_err(|e| BadInput(format!("--pubkey {e}")))?;
            let original = verified(&published, &trusted)?.result;
            let signing_key = if unsigned { None } else { Some(read_run_key(key)?) };
            let device_name: Option<DeviceName> =
                device.as_deref().map(str::parse).transpose().map_err(|e| BadInput(format!("--device {e}")))?;
            let host = lynx_runner::host_record();
            let device = match device_name {
                Some(name) => devices::find(name, &host)?,
                None => devices::find(original.device.device, &host).unwrap_or_else(|_| devices::best(&host)),
            };
            if let lynx_core::result::WeightsRecord::Checkpoint { dir, .. } = &original.config.weights {
                if weights.is_none() {
                    return Err(BadInput(format!(
                        "the published run read its weights from a checkpoint ({dir}); give the same checkpoint with --weights"
                    ))
                    .into());
                }
            }
            for warning in output::reproduction_warnings(&original, &device, libtorch::load_gpu_backends()) {
                eprintln!("lynx: warning: {warning}");
            }
            let digest = lynx_publish::envelope::file_sha256(&published)
                .map_err(|e| BadInput(format!("{}: {e}", published.display())))?;
            let plan = Plan {
                suite: original.config.suite.clone(),
                model: original.config.model.clone(),
                device,
                results_dir: out,
                weights,
            };
            let reproduces = lynx_core::result::Reproduces {
                envelope: published.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
                envelope_sha256: digest,
                run_id: original.run_id.clone(),
                device: original.device.name.known().cloned().unwrap_or_else(|| original.device.device.to_string()),
            };
            let run = lynx_runner::start_reproduction(&plan, reproduces)?;
            let price = PriceInputs {
                usd_per_device_hour: original.derived.as_ref().and_then(|d| d.price.usd_per_device_hour),
                utilisation: original
                    .derived
                    .as_ref()
                    .map_or(Finite::new(1.0, "utilisation").expect("finite"), |d| d.price.utilisation),
            };
            let outcome = execute(&run, false, signing_key.as_ref(), price);
            let local = match &outcome {
                Ok(outcome) => outcome.result.clone(),
                Err(_) => lynx_runner::journal::read_json(&run.result_path(), "result")?,
            };
            let comparison = lynx_core::compare::compare(
                &published.display().to_string(),
                &original,
                &run.result_path().display().to_string(),
                &local,
            );
            print!("\n{}", output::comparison(&comparison, "published", "local"));
            outcome.map(|_| ())
        }
        Command::Export { file, pubkey, format } => {
            let format = match output::Format::parse(&format).map_err(BadInput)? {
                output::Format::Csv => output::Format::Csv,
                output::Format::Markdown => output::Format::Markdown,
                _ => return Err(BadInput(format!("--format {format}: use csv or markdown")).into()),
            };
            let key = lynx_publish::read_verifying_key(&pubkey).map_err(|e| BadInput(format!("--pubkey {e}")))?;
            let verified = verified(&file, &key)?;
            print!("{}", output::export(&verified.result, &verified.key_id, format));
            Ok(())
        }
        Command::Report { dirs, out, pubkey, keys } => {
            let trusted = trusted_keys(pubkey, keys)?;
            let index = lynx_publish::report::build_site(&dirs, &trusted, &out)
                .map_err(|e| BadInput(format!("--out {}: {e}", out.display())))?;
            println!("wrote {}", index.display());
            Ok(())
        }
        Command::Collect { sources, into, pubkey, keys } => {
            let trusted = trusted_keys(pubkey, keys)?;
            std::fs::create_dir_all(&into).map_err(|e| BadInput(format!("--into {}: {e}", into.display())))?;
            let outcomes = lynx_publish::collect::collect(&sources, &into, &trusted)?;
            let mut refused = 0;
            for (envelope, outcome) in &outcomes {
                let shown = output::terminal_text(&envelope.display().to_string(), 300);
                match outcome {
                    lynx_publish::collect::Outcome::Collected(to) => println!("collected {shown} -> {}", to.display()),
                    lynx_publish::collect::Outcome::Duplicate(at) => {
                        println!("already collected {shown} (identical to {})", at.display())
                    }
                    lynx_publish::collect::Outcome::Refused(reason) => {
                        refused += 1;
                        println!("REFUSED {shown}: {}", output::terminal_text(reason, 300));
                    }
                }
            }
            println!("index: {}", into.join("index.json").display());
            if refused == 0 {
                Ok(())
            } else {
                Err(anyhow::anyhow!("{refused} of {} results were refused", outcomes.len()))
            }
        }
        Command::Worker { run_dir } => {
            if !supervisor::bind_to_supervisor() {
                return Err(anyhow::anyhow!("the supervising lynx run is gone"));
            }
            supervisor::catch_stop_signals();
            let run = lynx_runner::RunDir::open(&run_dir)?;
            let mut progress = output::Progress::new();
            let end = lynx_runner::work(&run, &mut progress, &supervisor::STOP);
            drop(progress);
            match end? {
                lynx_runner::WorkEnd::Done => Ok(()),
                lynx_runner::WorkEnd::Stopped => Err(Exit(supervisor::EXIT_STOPPED).into()),
            }
        }
    }
}

/// Supervise `run` to its end, assemble, sign and report it; the outcome, or the error (exit
/// code) the run ends with.
fn execute(
    run: &lynx_runner::RunDir,
    resuming: bool,
    signing_key: Option<&lynx_publish::SigningKey>,
    price: PriceInputs,
) -> anyhow::Result<lynx_runner::Outcome> {
    supervisor::catch_stop_signals();
    let supervised = supervisor::supervise(run)?;
    if let supervisor::Supervised::BadInput = supervised {
        // The worker said why. A new run it refused before measuring leaves no folder.
        let measured = std::fs::metadata(run.journal_path()).is_ok_and(|m| m.len() > 0);
        if !resuming && !measured {
            let _ = std::fs::remove_dir_all(&run.dir);
        }
        return Err(Exit(2).into());
    }
    let outcome = lynx_runner::assemble(run, price)?;
    let envelope = lynx_publish::seal(&outcome.path, &outcome.result, signing_key)
        .with_context(|| format!("sealing {}", outcome.path.display()))?;
    let envelope_path = lynx_publish::envelope_path(&outcome.path);
    lynx_runner::write_json_atomic(&envelope_path, &envelope)?;
    print!("{}", output::run_summary(&outcome));
    match signing_key {
        Some(key) => {
            println!("signed: {} (key id {})", envelope_path.display(), lynx_publish::key_id(key.verifying_key()))
        }
        None => println!("UNSIGNED: {} (--unsigned)", envelope_path.display()),
    }
    match supervised {
        supervisor::Supervised::Stopped(signal) => {
            eprintln!(
                "lynx: stopped by signal {signal}: the partial result above is signed; resume with `lynx run --resume {}`",
                run.dir.display()
            );
            return Err(Exit(128 + signal as u8).into());
        }
        supervisor::Supervised::GaveUp(why) => {
            return Err(anyhow::anyhow!(
                "{why}: the partial result above is signed; resume with `lynx run --resume {}`",
                run.dir.display()
            ));
        }
        _ => {}
    }
    let failed: Vec<&str> = outcome.result.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
    if failed.is_empty() {
        Ok(outcome)
    } else {
        Err(anyhow::anyhow!(
            "the run failed its {} check; its figures are in {}",
            failed.join(", "),
            outcome.path.display()
        ))
    }
}

/// Verify `path` against `key`, or say why not (exit 1: a result that does not verify is not an
/// input error, it is the answer).
fn verified(path: &Path, key: &lynx_publish::VerifyingKey) -> anyhow::Result<lynx_publish::Verified> {
    lynx_publish::verify(path, key).map_err(|e| anyhow::anyhow!("{}: INVALID at {e}", path.display()))
}

/// The trusted public keys: each `--pubkey`, and every `*.pub` in `--keys`; none is bad input.
fn trusted_keys(pubkey: Vec<PathBuf>, keys: Option<PathBuf>) -> Result<Vec<lynx_publish::VerifyingKey>, BadInput> {
    let mut key_files = pubkey;
    if let Some(dir) = keys {
        let entries = std::fs::read_dir(&dir).map_err(|e| BadInput(format!("--keys {}: {e}", dir.display())))?;
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|e| e == "pub") {
                key_files.push(entry.path());
            }
        }
    }
    if key_files.is_empty() {
        return Err(BadInput("no trusted keys: give --pubkey KEY or --keys DIR".to_owned()));
    }
    key_files
        .iter()
        .map(|k| lynx_publish::read_verifying_key(k).map_err(|e| BadInput(format!("--pubkey {e}"))))
        .collect()
}

/// Seconds from `2s`, `450ms`, `0.2` (seconds) or `200us`.
fn parse_duration(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        (text, 1.0)
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(format!("{text}: expected a positive duration such as 2s, 450ms or 0.2")),
    }
}

/// The price inputs, checked.
fn price_inputs(price_per_hour: Option<f64>, utilisation: f64) -> Result<PriceInputs, BadInput> {
    let usd_per_device_hour = match price_per_hour {
        Some(p) if p.is_finite() && p > 0.0 => Finite::new(p, "price").ok(),
        Some(p) => return Err(BadInput(format!("--price-per-hour {p}: must be a positive number of USD"))),
        None => None,
    };
    if !(utilisation.is_finite() && utilisation > 0.0 && utilisation <= 1.0) {
        return Err(BadInput(format!("--utilisation {utilisation}: must be in (0, 1]")));
    }
    let utilisation = Finite::new(utilisation, "utilisation").map_err(|e| BadInput(e.to_string()))?;
    Ok(PriceInputs { usd_per_device_hour, utilisation })
}

/// The run in `dir`, after checking that whatever the command line also gave matches how it was
/// started, and that this is the binary that started it.
fn resumable(
    dir: &Path,
    suite: Option<&str>,
    device: Option<DeviceName>,
    weights: Option<&Path>,
    models: Option<PathBuf>,
) -> anyhow::Result<lynx_runner::RunDir> {
    let refuse = |what: String| BadInput(format!("--resume {}: {what}", dir.display()));
    let run = lynx_runner::RunDir::open(dir)?;
    let plan = run.read_plan()?;
    if let Some(name) = suite {
        let (suite, model) = suite::Catalogue::new(models).suite(name)?;
        let given = lynx_core::result::config_sha256(&suite, &model);
        let started = lynx_core::result::config_sha256(&plan.suite, &plan.model);
        if given != started {
            return Err(refuse(format!(
                "the suite '{name}' (config {}) differs from the one the run started with (config {}); \
                 resume without --suite, or start a new run",
                &given[..12],
                &started[..12]
            ))
            .into());
        }
    }
    if let Some(device) = device.filter(|d| *d != plan.device) {
        return Err(refuse(format!("the run measures {}, not {device}", plan.device)).into());
    }
    let given_weights = weights.map(|w| w.display().to_string());
    if weights.is_some() && given_weights != plan.weights {
        return Err(refuse(format!("the run's weights are {:?}, not {:?}", plan.weights, given_weights)).into());
    }
    if let (Reported::Known(started), Reported::Known(this)) =
        (&plan.binary_sha256, &lynx_runner::harness_binary_sha256())
    {
        if started != this {
            return Err(refuse(format!(
                "the run was started by another lynx build (binary sha256 {}…, this one {}…); resume it with that build",
                &started[..12],
                &this[..12]
            ))
            .into());
        }
    }
    Ok(run)
}

/// Exit with this code, having said why already.
#[derive(Debug, thiserror::Error)]
#[error("exit {0}")]
struct Exit(u8);

/// The run's signing key: `--key`, else lynx.key in the default key folder, made there (and
/// said so) when that folder has none; an unreadable key is bad input, refused before any
/// measurement.
fn read_run_key(key: Option<PathBuf>) -> Result<lynx_publish::SigningKey, BadInput> {
    let path = match key {
        Some(path) => path,
        None => {
            let dir = lynx_publish::default_key_dir().ok_or_else(|| BadInput("no --key and no default key folder (neither XDG_CONFIG_HOME nor HOME is set); pass --key or --unsigned".to_owned()))?;
            let (private, public) = lynx_publish::keys::key_paths(&dir);
            if !private.exists() {
                let id = lynx_publish::generate(&dir, false).map_err(|e| BadInput(format!("signing key {e}")))?;
                eprintln!(
                    "lynx: made a signing key for this run and the next: {} (key id {id}); publish its public half, {}, \
                     beside your results (results/keys/) so others can verify them",
                    private.display(),
                    public.display()
                );
            }
            private
        }
    };
    lynx_publish::read_signing_key(&path).map_err(|e| {
        BadInput(format!("signing key {e}; make one with `lynx keygen`, pass --key FILE, or run with --unsigned"))
    })
}
