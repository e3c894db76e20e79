//! `lynx run --all-devices` (or `--devices LIST`): one `lynx run` process per device, all in
//! parallel by default, each its own supervisor and worker, so one device's fatal error cannot
//! take down the others; then a node summary of every device's result and status, and the spread
//! across devices of the same model.

use crate::supervisor;
use lynx_analysis::fleet::spreads;
use lynx_schema::fleet::{DeviceRun, NodeSummary};
use lynx_schema::result::RunResult;
use lynx_schema::time::{compact_utc, rfc3339_utc};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What every device's run is given, as `lynx run` arguments (suite, models, out, key, prices).
pub struct NodePlan {
    pub devices: Vec<String>,
    pub run_args: Vec<std::ffi::OsString>,
    pub out: PathBuf,
    pub one_at_a_time: bool,
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "node".to_owned(), |h| h.trim().to_owned())
}

/// Run every device of `plan`; the summary and where it was written.
pub fn run_node(plan: &NodePlan) -> anyhow::Result<(NodeSummary, PathBuf)> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let node = lynx_schema::device::slug(&host_name());
    // The pid too: two jobs on one node (array tasks) may start in the same second.
    let dir = plan.out.join("nodes").join(format!("{node}-{}-{}", compact_utc(now), std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let exe = std::env::current_exe()?;
    supervisor::catch_stop_signals();
    let spawn = |index: usize, device: &str| -> anyhow::Result<Child> {
        let log = std::fs::File::create(dir.join(format!("device-{index}.log")))?;
        Ok(Command::new(&exe)
            .arg("run")
            .args(["--device", device])
            .args(&plan.run_args)
            .arg("--report-run-dir")
            .arg(dir.join(format!("device-{index}.run")))
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()?)
    };
    let mut exits: Vec<Option<String>> = vec![None; plan.devices.len()];
    let mut children: Vec<(usize, Child)> = Vec::new();
    let mut next = 0;
    let mut forwarded = false;
    loop {
        while next < plan.devices.len() && (!plan.one_at_a_time || children.is_empty()) && !forwarded {
            eprintln!(
                "lynx: {} starting (log {})",
                plan.devices[next],
                dir.join(format!("device-{next}.log")).display()
            );
            children.push((next, spawn(next, &plan.devices[next])?));
            next += 1;
        }
        if children.is_empty() {
            break;
        }
        if !forwarded && supervisor::stop_signal().is_some() {
            forwarded = true;
            for (_, child) in &children {
                // SAFETY: kill takes no pointers; each pid is our own child, not yet reaped.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            }
        }
        let mut still = Vec::new();
        for (index, mut child) in children {
            match child.try_wait()? {
                Some(status) => {
                    let exit = match (status.code(), status.signal()) {
                        (Some(code), _) => format!("exit {code}"),
                        (None, Some(signal)) => format!("signal {signal}"),
                        _ => "unknown".to_owned(),
                    };
                    eprintln!("lynx: {} ended ({exit})", plan.devices[index]);
                    exits[index] = Some(exit);
                }
                None => still.push((index, child)),
            }
        }
        children = still;
        std::thread::sleep(Duration::from_millis(50));
    }
    if forwarded {
        for exit in exits.iter_mut().skip(next) {
            *exit = Some("not started (stopped by a signal)".to_owned());
        }
    }

    let mut runs = Vec::new();
    let mut results = Vec::new();
    for (index, device) in plan.devices.iter().enumerate() {
        let run_dir =
            std::fs::read_to_string(dir.join(format!("device-{index}.run"))).ok().map(|s| s.trim().to_owned());
        let run = run_dir.as_ref().and_then(|d| lynx_runner::RunDir::open(Path::new(d)).ok());
        let result: Option<RunResult> =
            run.as_ref().and_then(|run| lynx_runner::journal::read_json(&run.result_path(), "result").ok());
        let envelope = run.as_ref().map(|run| lynx_attest::envelope_path(&run.result_path()));
        let envelope = envelope.filter(|e| e.exists()).map(|e| e.display().to_string());
        let exit = exits[index].clone().unwrap_or_else(|| "unknown".to_owned());
        runs.push(DeviceRun {
            device: device.clone(),
            name: result.as_ref().and_then(|r| r.device.name.known().cloned()),
            run_dir,
            envelope: envelope.clone(),
            status: match (&result, &envelope) {
                (Some(r), Some(_)) => format!("{:?}", r.status).to_lowercase(),
                (Some(_), None) => "incomplete".to_owned(),
                (None, _) => "failed".to_owned(),
            },
            checks_passed: result.as_ref().is_some_and(|r| r.checks.iter().all(|c| c.passed)) && exit == "exit 0",
            exit,
        });
        // Only results that were sealed enter the comparison.
        if let (Some(result), Some(_)) = (result, envelope) {
            results.push(result);
        }
    }
    let summary = NodeSummary { node, started_at: rfc3339_utc(now), runs, spreads: spreads(&results) };
    let path = dir.with_extension("json");
    lynx_runner::write_json_atomic(&path, &summary)?;
    Ok((summary, path))
}
