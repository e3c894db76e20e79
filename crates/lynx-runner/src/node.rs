//! `lynx run --all-devices` (or `--devices LIST`): one `lynx run` process per device, all in
//! parallel by default, each its own supervisor and worker, so one device's fatal error cannot
//! take down the others; then a node summary of every device's result and status, and the spread
//! across devices of the same model.

use crate::journal::{read_json, RunDir};
use crate::{supervisor, RunError};
use lynx_analysis::fleet::spreads;
use lynx_schema::fleet::{DeviceExit, DeviceRun, DeviceRunStatus, NodeSummary};
use lynx_schema::result::RunResult;
use lynx_schema::result::RunStatus;
use lynx_schema::time::{compact_utc, rfc3339_utc};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

/// A node's runs: the devices, where the node's summary goes (`OUT/nodes/`), and whether the
/// devices run one after another instead of all at once.
pub struct NodePlan {
    pub devices: Vec<String>,
    pub out: PathBuf,
    pub one_at_a_time: bool,
}

/// Starts one device's run: `(device, file to write the run's folder to, log file)` to the
/// running process (`lynx run --device D ... --report-run-dir FILE` in the binary).
pub type Spawn<'a> = dyn FnMut(&str, &Path, std::fs::File) -> std::io::Result<Child> + 'a;

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map_or_else(|_| "node".to_owned(), |h| h.trim().to_owned())
}

/// Run every device of `plan`, each started by `spawn`; the summary and where it was written.
/// `say` hears each device start and end.
pub fn run_node(
    plan: &NodePlan,
    spawn: &mut Spawn,
    say: &mut dyn FnMut(String),
) -> Result<(NodeSummary, PathBuf), RunError> {
    let now = crate::unix_now_s();
    let node = lynx_schema::device::slug(&host_name());
    // The pid too: two jobs on one node (array tasks) may start in the same second.
    let dir = plan.out.join("nodes").join(format!("{node}-{}-{}", compact_utc(now), std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| RunError::Io { path: dir.clone(), source })?;
    supervisor::catch_stop_signals();
    let exits = run_devices(plan, &dir, spawn, say)?;
    let mut runs = Vec::new();
    let mut results = Vec::new();
    for (index, (device, exit)) in plan.devices.iter().zip(exits).enumerate() {
        let (run, sealed) = device_run(device, &report_file(&dir, index), exit);
        runs.push(run);
        // Only results that were sealed enter the comparison.
        results.extend(sealed);
    }
    let summary = NodeSummary { node, started_at: rfc3339_utc(now), runs, spreads: spreads(&results) };
    let path = dir.with_extension("json");
    crate::write_json_atomic(&path, &summary)?;
    Ok((summary, path))
}

/// Start the devices' runs (all at once, or one after another), forward a stop signal to them,
/// and wait for every one: each device's exit.
fn run_devices(
    plan: &NodePlan,
    dir: &Path,
    spawn: &mut Spawn,
    say: &mut dyn FnMut(String),
) -> Result<Vec<DeviceExit>, RunError> {
    let io = |source| RunError::Io { path: dir.to_path_buf(), source };
    let mut exits: Vec<Option<DeviceExit>> = vec![None; plan.devices.len()];
    let mut children: Vec<(usize, Child)> = Vec::new();
    let mut next = 0;
    let mut forwarded = false;
    loop {
        while next < plan.devices.len() && (!plan.one_at_a_time || children.is_empty()) && !forwarded {
            let log = dir.join(format!("device-{next}.log"));
            say(format!("{} starting (log {})", plan.devices[next], log.display()));
            let log = std::fs::File::create(&log).map_err(io)?;
            children.push((next, spawn(&plan.devices[next], &report_file(dir, next), log).map_err(io)?));
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
            match child.try_wait().map_err(io)? {
                Some(status) => {
                    let exit = match (status.code(), status.signal()) {
                        (Some(code), _) => DeviceExit::Code(code),
                        (None, Some(signal)) => DeviceExit::Signal(signal),
                        _ => DeviceExit::Unknown,
                    };
                    say(format!("{} ended ({exit})", plan.devices[index]));
                    exits[index] = Some(exit);
                }
                None => still.push((index, child)),
            }
        }
        children = still;
        std::thread::sleep(Duration::from_millis(50));
    }
    let not_started = if forwarded { DeviceExit::NotStarted } else { DeviceExit::Unknown };
    Ok(exits.into_iter().map(|exit| exit.unwrap_or(not_started)).collect())
}

/// Where device `index`'s run writes its run folder's path.
fn report_file(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("device-{index}.run"))
}

/// One device's line of the summary from the run folder its run reported in `report` (if it got
/// that far), and its result when that was sealed.
fn device_run(device: &str, report: &Path, exit: DeviceExit) -> (DeviceRun, Option<RunResult>) {
    let run_dir = std::fs::read_to_string(report).ok().map(|s| s.trim().to_owned());
    let run = run_dir.as_ref().and_then(|d| RunDir::open(Path::new(d)).ok());
    let result: Option<RunResult> = run.as_ref().and_then(|run| read_json(&run.result_path(), "result").ok());
    let envelope = run.as_ref().map(|run| lynx_attest::envelope_path(&run.result_path()));
    let envelope = envelope.filter(|e| e.exists()).map(|e| e.display().to_string());
    let line = DeviceRun {
        device: device.to_owned(),
        name: result.as_ref().and_then(|r| r.device.name.known().cloned()),
        run_dir,
        envelope: envelope.clone(),
        status: match (&result, &envelope) {
            (Some(r), Some(_)) if r.status == RunStatus::Complete => DeviceRunStatus::Complete,
            (Some(r), Some(_)) if r.status == RunStatus::Partial => DeviceRunStatus::Partial,
            (Some(_), _) => DeviceRunStatus::Incomplete,
            (None, _) => DeviceRunStatus::Failed,
        },
        checks_passed: result.as_ref().is_some_and(|r| r.checks.iter().all(|c| c.passed)) && exit.succeeded(),
        exit,
    };
    (line, result.filter(|_| envelope.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// Stand-in device runs: each writes the order it ran in, and exits with its device's code.
    #[test]
    fn every_device_runs_and_ends_in_the_summary_one_at_a_time_when_asked() {
        for one_at_a_time in [false, true] {
            let out = tempfile::tempdir().unwrap();
            let order = out.path().join("order");
            let plan = NodePlan { devices: vec!["0".into(), "3".into()], out: out.path().to_path_buf(), one_at_a_time };
            let mut spawn = |device: &str, _report: &Path, log: std::fs::File| {
                Command::new("sh")
                    .args([
                        "-c",
                        &format!(
                            "echo start {device} >> {0}; sleep 0.3; echo end {device} >> {0}; exit {device}",
                            order.display()
                        ),
                    ])
                    .stdout(log)
                    .stdin(Stdio::null())
                    .spawn()
            };
            let mut said = Vec::new();
            let (summary, path) = run_node(&plan, &mut spawn, &mut |line| said.push(line)).unwrap();
            assert!(path.is_file());
            let exits: Vec<DeviceExit> = summary.runs.iter().map(|r| r.exit).collect();
            assert_eq!(exits, [DeviceExit::Code(0), DeviceExit::Code(3)]);
            assert!(
                summary.runs.iter().all(|r| r.status == DeviceRunStatus::Failed && !r.checks_passed),
                "no run folder was reported"
            );
            let order = std::fs::read_to_string(&order).unwrap();
            let overlapped = order.lines().nth(1).is_some_and(|l| l.starts_with("start"));
            assert_eq!(overlapped, !one_at_a_time, "{order}");
            assert_eq!(said.len(), 4, "{said:?}");
        }
    }
}
