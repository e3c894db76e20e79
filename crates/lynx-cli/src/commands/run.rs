//! `lynx run`: one device's run under a supervisor, or a node's runs (`--all-devices`,
//! `--devices`); and what `lynx reproduce` shares with it: supervising a run to its signed end.

use crate::args::{NodeArgs, RunArgs};
use crate::{BadInput, Exit};
use anyhow::Context;
use lynx_runner::supervisor;
use lynx_runner::{binding, devices, suite, Plan};
use lynx_schema::derived::PriceInputs;
use lynx_schema::device::DeviceName;
use lynx_schema::value::Reported;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub fn run(args: RunArgs) -> anyhow::Result<()> {
    if args.plan {
        return super::plan::plan(&args);
    }
    super::folder_or_absent("--out", &args.out)?;
    let price = super::price_inputs(args.price_per_hour, args.utilisation)?;
    // The key is read before anything is measured: a run that cannot be signed is refused.
    let signing_key = super::signing_key(&args.signing)?;
    if args.node.is_node() {
        return run_node(&args.node, args.cpus.as_ref(), args.out);
    }
    let resuming = args.resume.is_some();
    let run = match &args.resume {
        Some(dir) => resumable(dir, &args)?,
        None => {
            let host = lynx_runner::host_record();
            let device = match args.node.node_device.or(args.device) {
                Some(name) => devices::find(name, &host)?,
                None => devices::best(&host),
            };
            let default_suite = if device.record.device == DeviceName::Cpu { "cpu" } else { "standard" };
            let (suite, model) =
                suite::Catalogue::new(args.models).suite(args.suite.as_deref().unwrap_or(default_suite))?;
            // Bound before anything is measured or written: this process starts again there.
            let cpus = binding::resolve(args.cpus.as_ref(), &device)?;
            binding::bind_self(&cpus, &mut |line| esayln!("lynx: {line}"))?;
            let plan =
                Plan { suite, model, device, results_dir: args.out, weights: args.weights, cpus, runs_at_once: 1 };
            lynx_runner::start(&plan)?
        }
    };
    if let Some(file) = &args.report_run_dir {
        std::fs::write(file, run.dir.display().to_string())
            .map_err(|e| BadInput(format!("--report-run-dir {}: {e}", file.display())))?;
    }
    super::warn_of_test_hooks();
    execute(&run, resuming, signing_key.as_ref(), price).map(|_| ())
}

/// The devices a node runs on: every GPU (or the CPU on a host without one), or those listed,
/// each found here.
pub(super) fn node_devices(
    node: &NodeArgs,
    host: &lynx_schema::result::HostRecord,
) -> anyhow::Result<Vec<devices::Device>> {
    let here = devices::list(host);
    if node.devices.is_empty() {
        let (gpus, cpus): (Vec<devices::Device>, Vec<devices::Device>) =
            here.into_iter().partition(|d| d.record.device != DeviceName::Cpu);
        return Ok(if gpus.is_empty() { cpus.into_iter().take(1).collect() } else { gpus });
    }
    let mut found = Vec::new();
    for (i, &name) in node.devices.iter().enumerate() {
        // Two processes measuring one device at once each measure the other's load too.
        if !node.one_at_a_time && node.devices[..i].contains(&name) {
            esayln!(
                "lynx: warning: --devices names {name} more than once: its runs will share it at once, each \
                 measuring the other's load too (--one-at-a-time runs them in turn)"
            );
        }
        found.push(devices::find_in(name, &here)?);
    }
    Ok(found)
}

/// One `lynx run` per device of the node, each given this process's own command line unchanged
/// and `--node-device` naming its device (so every option the user set reaches it as given,
/// `--cpus` too, which each resolves for its own device), and the node summary.
fn run_node(node: &NodeArgs, cpus: Option<&binding::CpuChoice>, out: PathBuf) -> anyhow::Result<()> {
    let host = lynx_runner::host_record();
    let found = node_devices(node, &host)?;
    // Each device's run binds itself (to its own GPU's CPUs, for gpu-local); one that cannot is
    // bad input here, before any starts.
    for device in &found {
        binding::resolve(cpus, device)?;
    }
    let names: Vec<String> = found.iter().map(|device| device.record.device.to_string()).collect();
    let plan = lynx_runner::node::NodePlan { devices: names, out, one_at_a_time: node.one_at_a_time };
    super::warn_of_test_hooks();
    // The node goes on through a hangup as each of its runs does, to write its summary.
    supervisor::ignore_hangup();
    let exe = std::env::current_exe()?;
    let mut spawn = |device: &str, report: &Path, log: std::fs::File, env: &[(&'static str, String)]| {
        Command::new(&exe)
            .args(std::env::args_os().skip(1))
            .args(["--node-device", device])
            .arg("--report-run-dir")
            .arg(report)
            .envs(env.iter().map(|(name, value)| (name, value)))
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
    };
    let (summary, path) = lynx_runner::node::run_node(&plan, &mut spawn, &mut |line| esayln!("lynx: {line}"))?;
    say!("{}", lynx_report::text::node_summary(&summary));
    sayln!("node summary: {}", path.display());
    if summary.runs.iter().all(|r| r.exit.succeeded()) {
        Ok(())
    } else {
        Err(anyhow::anyhow!("not every device's run succeeded; see the summary above"))
    }
}

/// Supervise `run` to its end, assemble, sign and report it; the outcome, or the error (exit
/// code) the run ends with.
pub fn execute(
    run: &lynx_runner::RunDir,
    resuming: bool,
    signing_key: Option<&lynx_attest::SigningKey>,
    price: PriceInputs,
) -> anyhow::Result<lynx_runner::Outcome> {
    supervisor::catch_stop_signals();
    supervisor::ignore_hangup();
    let exe = std::env::current_exe()?;
    let mut worker = || {
        let mut command = Command::new(&exe);
        command.arg("worker").arg(&run.dir);
        command
    };
    // A full disk, in the worker or here, is said once, in one line naming the folder.
    let disk_full = || -> anyhow::Error {
        esayln!(
            "lynx: the disk holding {} is full: the run stopped, and everything measured so far is kept whole; free \
             space and resume with `lynx run --resume {}`",
            run.dir.display(),
            run.dir.display()
        );
        Exit(1).into()
    };
    let said = |error: lynx_runner::RunError| if error.is_disk_full() { disk_full() } else { error.into() };
    let supervised = supervisor::supervise(run, &mut worker, &mut |line| esayln!("lynx: {line}")).map_err(said)?;
    if let supervisor::Supervised::DiskFull = supervised {
        return Err(disk_full());
    }
    if let supervisor::Supervised::BadInput = supervised {
        // The worker said why. A new run it refused before measuring leaves no folder.
        let measured = std::fs::metadata(run.journal_path()).is_ok_and(|m| m.len() > 0);
        if !resuming && !measured {
            let _ = std::fs::remove_dir_all(&run.dir);
            // And the device's folder it made, where no other run is in it.
            if let Some(device) = run.dir.parent() {
                let _ = std::fs::remove_dir(device);
            }
        }
        return Err(Exit(2).into());
    }
    let outcome = lynx_runner::assemble(run, price, Some(supervisor::assembly_stop())).map_err(said)?;
    let envelope = lynx_attest::seal(&outcome.path, &outcome.result, signing_key)
        .with_context(|| format!("sealing {}", outcome.path.display()))?;
    let envelope_path = lynx_attest::envelope_path(&outcome.path);
    lynx_runner::write_json_atomic(&envelope_path, &envelope).map_err(said)?;
    say!("{}", lynx_report::text::run_summary(&outcome.result, &outcome.path));
    match signing_key {
        Some(key) => {
            sayln!("signed: {} (key id {})", envelope_path.display(), lynx_attest::key_id(key.verifying_key()))
        }
        None => sayln!("UNSIGNED: {} (--unsigned)", envelope_path.display()),
    }
    let sealed = if signing_key.is_some() { "signed" } else { "unsigned (--unsigned)" };
    match supervised {
        supervisor::Supervised::Stopped(signal) => {
            esayln!(
                "lynx: stopped by signal {signal}: the partial result above is {sealed}; resume with `lynx run --resume {}`",
                run.dir.display()
            );
            return Err(Exit(128 + signal as u8).into());
        }
        supervisor::Supervised::GaveUp(why) => {
            return Err(anyhow::anyhow!(
                "{why}: the partial result above is {sealed}; resume with `lynx run --resume {}`",
                run.dir.display()
            ));
        }
        _ => {}
    }
    if let Some(signal) = supervisor::stopped_in_assembly() {
        esayln!(
            "lynx: stopped by signal {signal} while the result was assembled: the result above is {sealed} without the \
             latency-bounded figures the simulation had not reached; `lynx run --resume {}` assembles it again",
            run.dir.display()
        );
        return Err(Exit(128 + signal as u8).into());
    }
    let failed = outcome.result.failed_checks();
    if failed.is_empty() {
        Ok(outcome)
    } else {
        Err(anyhow::anyhow!(
            "the run failed its {}; its figures are in {}",
            lynx_report::text::checks_named(&failed),
            outcome.path.display()
        ))
    }
}

/// The run in `dir`, after checking that whatever the command line also gave matches how it was
/// started, and that this is the binary that started it.
pub(super) fn resumable(dir: &Path, args: &RunArgs) -> anyhow::Result<lynx_runner::RunDir> {
    let refuse = |what: String| BadInput(format!("--resume {}: {what}", dir.display()));
    let run = lynx_runner::RunDir::open(dir)?;
    let mut plan = run.read_plan()?;
    // Bound as it started, before anything below reads how this process runs (its threads, its
    // CPUs): this process starts again there. A plan of the resume binds nothing.
    if let Some(cpus) = plan.cpu_binding.as_ref().filter(|_| !args.plan) {
        binding::bind_self(cpus, &mut |line| esayln!("lynx: {line}")).map_err(|e| match e.is_bad_input() {
            true => anyhow::Error::from(refuse(e.to_string())),
            false => e.into(),
        })?;
    }
    let earlier: Option<lynx_schema::result::RunResult> = match run.result_path().exists() {
        true => Some(lynx_runner::journal::read_json(&run.result_path(), "result")?),
        false => None,
    };
    if let Some(name) = &args.suite {
        let (suite, model) = suite::Catalogue::new(args.models.clone()).suite(name)?;
        let given = lynx_schema::result::config_sha256(&suite, &model);
        let started = lynx_schema::result::config_sha256(&plan.suite, &plan.model);
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
    if let Some(device) = args.device.filter(|d| *d != plan.device) {
        return Err(refuse(format!("the run measures {}, not {device}", plan.device)).into());
    }
    // A checkpoint at another path than the run began with (moved, or another node's mount of
    // it) is taken once the run has recorded what its model read: each worker holds its own read
    // to that digest, and refuses other weights. Before that, it would be parity's weights.
    let given_weights = args.weights.as_ref().map(|w| w.display().to_string());
    let recorded = earlier.as_ref().is_some_and(|r| r.config.weights.read().is_some());
    let moved = given_weights.is_some() && given_weights != plan.weights;
    if moved && !recorded {
        return Err(refuse(format!(
            "the run's weights are {}, not {} (a checkpoint at another path is taken only once the run has recorded \
             what its model read of it)",
            plan.weights.as_deref().unwrap_or("drawn from its suite's seed"),
            given_weights.as_deref().unwrap_or_default()
        ))
        .into());
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
    // Cells measured under another libtorch, on another number of its threads, or with graphs
    // where there were none (or none where there were), would not be one run's figures.
    if let Some(earlier) = &earlier {
        let differences = lynx_runner::resume_differences(earlier, lynx_runner::libtorch::load_gpu_backends());
        if !differences.is_empty() {
            return Err(
                refuse(format!("{}; resume it as it was started, or start a new run", differences.join("; "))).into()
            );
        }
    }
    // Every check passed: the plan names where the workers now read the checkpoint (the result
    // keeps the folder the run began with). A plan of the resume writes nothing.
    if moved && !args.plan {
        plan.weights = given_weights;
        lynx_runner::write_json_atomic(&run.plan_path(), &plan)?;
    }
    Ok(run)
}
