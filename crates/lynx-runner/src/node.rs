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
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A node's runs: the devices, where the node's summary goes (`OUT/nodes/`), and whether the
/// devices run one after another instead of all at once.
pub struct NodePlan {
    pub devices: Vec<String>,
    pub out: PathBuf,
    pub one_at_a_time: bool,
}

/// Starts one device's run: `(device, file to write the run's folder to, log file, variables to
/// set in its environment)` to the running process (`lynx run --device D ... --report-run-dir
/// FILE` in the binary).
pub type Spawn<'a> = dyn FnMut(&str, &Path, std::fs::File, &[(&'static str, String)]) -> std::io::Result<Child> + 'a;

/// Set in each device's run of a node's runs all at once: the folder where the devices say they
/// have prepared ([`prepared_together`]), and this device's place among them and how many there
/// are (`INDEX/COUNT`).
pub const NODE_PREPARED_VAR: &str = "LYNX_NODE_PREPARED";
pub const NODE_PLACE_VAR: &str = "LYNX_NODE_PLACE";

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
    // The other devices' runs are lynx's own work, not the host's other load; all at once, each
    // waits for the others to prepare before it warms up.
    let prepared = dir.join("prepared");
    let count = plan.devices.len();
    if !plan.one_at_a_time {
        std::fs::create_dir_all(&prepared).map_err(io)?;
    }
    loop {
        while next < plan.devices.len() && (!plan.one_at_a_time || children.is_empty()) && !forwarded {
            let log = dir.join(format!("device-{next}.log"));
            say(format!("{} starting (log {})", plan.devices[next], log.display()));
            let log = std::fs::File::create(&log).map_err(io)?;
            let mut env = vec![(crate::host_load::NODE_PID_VAR, std::process::id().to_string())];
            if !plan.one_at_a_time {
                env.push((NODE_PREPARED_VAR, prepared.display().to_string()));
                env.push((NODE_PLACE_VAR, format!("{next}/{count}")));
            }
            children.push((next, spawn(&plan.devices[next], &report_file(dir, next), log, &env).map_err(io)?));
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
                    // The others no longer wait for it to prepare (it may have ended before). A
                    // marker that cannot be written (a full disk) leaves them to their longest wait.
                    if !plan.one_at_a_time {
                        let _ = std::fs::write(prepared.join(format!("ended-{index}")), b"");
                    }
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

/// Where a node's runs all at once stand before warm-up: each device's run prepares (parity's
/// float64 reference on the host's CPUs, the roofline's burst probes, its model built, graph
/// parity), says so, and waits until every other device's has too, or has ended, so that no
/// device warms up or measures beside another's preparing: the other devices' runs are lynx's
/// own work (`host_load`), which the `stability` check does not count, and their parity
/// references would keep every host CPU busy. `None` outside such a node's run (or where its
/// variables do not name one: set by hand, naming no process above this one, or a folder that
/// is not there; nothing is then written); `Some(false)` where
/// `stop` was raised while waiting, `Some(true)` once every device has prepared. A node's
/// process that is gone ends the wait too (nothing would then say that a device ended), and so
/// does an hour of it ([`LONGEST_WAIT`]: a marker the node could not write).
pub fn prepared_together(stop: &AtomicBool) -> Result<Option<bool>, RunError> {
    let (Ok(folder), Ok(place)) = (std::env::var(NODE_PREPARED_VAR), std::env::var(NODE_PLACE_VAR)) else {
        return Ok(None);
    };
    let Some(node) = crate::host_load::this_node() else {
        return Ok(None);
    };
    let alive = || Path::new(&format!("/proc/{node}")).exists();
    wait_prepared(Path::new(&folder), &place, stop, &alive, Duration::from_millis(100))
}

/// How many of a node's runs this process's runs beside, itself included ([`NODE_PLACE_VAR`]'s
/// count): 1 outside a node's runs all at once.
pub fn runs_at_once() -> u64 {
    let place = std::env::var(NODE_PLACE_VAR).unwrap_or_default();
    place
        .split_once('/')
        .and_then(|(_, count)| count.parse::<u64>().ok())
        .filter(|&n| (1..=4096).contains(&n))
        .unwrap_or(1)
}

/// The longest a device's run waits for the node's others to prepare.
const LONGEST_WAIT: Duration = Duration::from_secs(3600);

/// [`prepared_together`] in `folder` for the device at `place` (`INDEX/COUNT`), looking again
/// every `every` while `alive` says the node's process is there.
fn wait_prepared(
    folder: &Path,
    place: &str,
    stop: &AtomicBool,
    alive: &dyn Fn() -> bool,
    every: Duration,
) -> Result<Option<bool>, RunError> {
    let Some((index, count)) = place.split_once('/') else { return Ok(None) };
    let (Ok(index), Ok(count)) = (index.parse::<usize>(), count.parse::<usize>()) else { return Ok(None) };
    if index >= count || count > 4096 || !folder.is_dir() {
        return Ok(None);
    }
    let ready = folder.join(format!("ready-{index}"));
    std::fs::write(&ready, b"").map_err(|source| RunError::Io { path: ready, source })?;
    let began = std::time::Instant::now();
    loop {
        let done = (0..count)
            .all(|i| folder.join(format!("ready-{i}")).exists() || folder.join(format!("ended-{i}")).exists());
        if done || !alive() || began.elapsed() >= LONGEST_WAIT {
            return Ok(Some(true));
        }
        if stop.load(Ordering::SeqCst) {
            return Ok(Some(false));
        }
        std::thread::sleep(every);
    }
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
        link_at_end: result.as_ref().and_then(|r| Some(r.link_at_end()?.link_words())),
        link_short: result.as_ref().and_then(RunResult::link_short),
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
            let mut spawn = |device: &str, _report: &Path, log: std::fs::File, _: &[(&'static str, String)]| {
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

    /// A device's run waits until every other has said it prepared, or has ended, or the node's
    /// process is gone; it says it prepared itself first; a stop ends the wait; variables that
    /// name no node's runs make no wait.
    #[test]
    fn a_devices_run_warms_up_once_every_other_has_prepared_or_ended() {
        let folder = tempfile::tempdir().unwrap();
        let (stop, every) = (AtomicBool::new(false), Duration::from_millis(5));
        let alive = || true;
        for place in ["", "1", "2/2", "a/2", "0/0", "0/5000"] {
            assert_eq!(wait_prepared(folder.path(), place, &stop, &alive, every).unwrap(), None, "{place:?}");
        }
        assert_eq!(wait_prepared(&folder.path().join("gone"), "0/2", &stop, &alive, every).unwrap(), None);
        // The other says it prepared a moment later: the wait ends then, not before.
        let other = folder.path().join("ready-1");
        let began = std::time::Instant::now();
        let writer = std::thread::spawn({
            let other = other.clone();
            move || {
                std::thread::sleep(Duration::from_millis(200));
                std::fs::write(other, b"").unwrap();
            }
        });
        assert_eq!(wait_prepared(folder.path(), "0/2", &stop, &alive, every).unwrap(), Some(true));
        assert!(began.elapsed() >= Duration::from_millis(200) && folder.path().join("ready-0").exists());
        writer.join().unwrap();
        // One that ended (before it prepared) is not waited for; nor is any once the node is gone.
        std::fs::remove_file(&other).unwrap();
        std::fs::write(folder.path().join("ended-1"), b"").unwrap();
        assert_eq!(wait_prepared(folder.path(), "0/2", &stop, &alive, every).unwrap(), Some(true));
        assert_eq!(wait_prepared(folder.path(), "0/3", &stop, &|| false, every).unwrap(), Some(true));
        // A stop while waiting for the third.
        stop.store(true, Ordering::SeqCst);
        assert_eq!(wait_prepared(folder.path(), "1/3", &stop, &alive, every).unwrap(), Some(false));
    }
}
