//! A run as two processes: the supervisor, which owns the run folder's fate and signs the
//! result, and a worker (`lynx worker RUN_DIR` in the binary; the supervisor is given how to start one,
//! so its logic is tested here with stand-in workers), which does all device work. A worker that dies
//! (a sticky CUDA error that aborts, a segfault in a kernel, the OOM killer) takes nothing with
//! it: its finished cells are in the journal, the cell it died in is journaled as failed, and
//! the supervisor starts a fresh worker for the rest. A worker whose GPU context a non-memory
//! CUDA error left unusable journals that cell and exits with [`EXIT_POISONED`]; the supervisor
//! starts a fresh worker the same way.
//!
//! Signals: SIGHUP is ignored ([`ignore_hangup`]). SIGINT and SIGTERM raise a flag. The worker finishes its current step, leaves the
//! cell it was in unjournaled and exits with [`EXIT_STOPPED`]; the supervisor forwards SIGTERM
//! to the worker, waits for it, then assembles and signs a `partial` result. The worker asks the
//! kernel to kill it when the supervisor dies (PR_SET_PDEATHSIG), so a killed `lynx run` leaves
//! no worker behind.

use crate::journal::RunDir;
use crate::run::DiedIn;
use crate::RunError;
use signal_hook::consts::{SIGINT, SIGTERM};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// The worker's exit code when a signal stopped it cleanly.
pub const EXIT_STOPPED: u8 = 3;
/// The worker's exit code when a GPU error left its device context unusable: the cell it struck
/// is journaled, and a fresh worker (a fresh context) runs the rest.
pub const EXIT_POISONED: u8 = 4;
/// The worker's exit code when the disk holding the run folder is full: it says nothing (the
/// supervisor says it once) and no new worker is started.
pub const EXIT_DISK_FULL: u8 = 5;
/// The environment variable that tells a worker its supervisor's pid.
pub const SUPERVISOR_PID: &str = "LYNX_SUPERVISOR_PID";
/// Worker deaths in a row with no cell journaled after which the supervisor gives up.
const MAX_FRUITLESS_DEATHS: u32 = 2;

/// The signal that asked this process to stop (0: none).
static SIGNAL: LazyLock<Arc<AtomicUsize>> = LazyLock::new(|| Arc::new(AtomicUsize::new(0)));
/// Raised with [`SIGNAL`]; the runner polls it between steps.
pub static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Whether [`ASSEMBLY_STOP`] is armed: signals raise it only from then on.
static ASSEMBLY_ARMED: AtomicBool = AtomicBool::new(false);
/// Raised by a stop signal that arrives once the result is being assembled (a run stopped by a
/// first signal is still assembled and signed; a signal during that assembly ends its
/// simulation).
static ASSEMBLY_STOP: AtomicBool = AtomicBool::new(false);

/// Route SIGINT and SIGTERM to the stop flag (once per process; later calls change nothing).
pub fn catch_stop_signals() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    REGISTERED.call_once(|| {
        for signal in [SIGINT, SIGTERM] {
            // Registration fails only for the signals signal-hook forbids (SIGKILL, SIGSTOP...).
            let _ = signal_hook::flag::register_usize(signal, Arc::clone(&SIGNAL), signal as usize);
            let _ = signal_hook::flag::register(signal, Arc::clone(&STOP));
            // SAFETY: the action only loads and stores atomics, which is async-signal-safe.
            let _ = unsafe {
                signal_hook::low_level::register(signal, || {
                    if ASSEMBLY_ARMED.load(Ordering::SeqCst) {
                        ASSEMBLY_STOP.store(true, Ordering::SeqCst);
                    }
                })
            };
        }
    });
}

/// Go on through a hangup (SIGHUP: the terminal `lynx run` was started in closed, an SSH
/// session dropped). A run measures on to its signed result whoever stopped watching, as it
/// does where nobody reads its output any more; its workers, started after this, inherit it.
/// SIGINT and SIGTERM still stop it.
pub fn ignore_hangup() {
    // SAFETY: SIG_IGN installs no handler; signal() with it is async-signal-safe.
    unsafe { libc::signal(libc::SIGHUP, libc::SIG_IGN) };
}

/// The flag that ends assembly's simulation: raised by a stop signal from now on (one that
/// arrived before, which stopped the worker, does not raise it).
pub fn assembly_stop() -> &'static AtomicBool {
    ASSEMBLY_ARMED.store(true, Ordering::SeqCst);
    &ASSEMBLY_STOP
}

/// The signal that arrived while the result was assembled, if one did ([`assembly_stop`]).
pub fn stopped_in_assembly() -> Option<i32> {
    ASSEMBLY_STOP.load(Ordering::SeqCst).then(|| stop_signal().unwrap_or(libc::SIGTERM))
}

/// The signal that stopped this process, if one did.
pub fn stop_signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        signal => i32::try_from(signal).ok(),
    }
}

/// In a worker: die with the supervisor. `false` when the supervisor is already gone.
pub fn bind_to_supervisor() -> bool {
    let Some(supervisor) = std::env::var(SUPERVISOR_PID).ok().and_then(|p| p.parse::<i32>().ok()) else {
        return true; // started by hand: nothing to bind to
    };
    // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid take no pointers.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        // The supervisor may have died before the prctl: then the parent is no longer it.
        libc::getppid() == supervisor
    }
}

/// How supervision ended.
pub enum Supervised {
    /// The worker finished the sweep.
    Done,
    /// A signal stopped the run.
    Stopped(i32),
    /// The worker refused the run as bad input (it printed why).
    BadInput,
    /// Workers kept dying without progress; the last death, in words.
    GaveUp(String),
    /// The disk holding the run folder is full: the worker stopped with everything it had
    /// written whole.
    DiskFull,
}

/// The kernel's counts of out-of-memory kills: this process's cgroup's (`oom_kill` in its
/// memory cgroup's events, which count kills of its processes by any OOM killer) and the
/// whole system's (`oom_kill` in /proc/vmstat). A worker killed by SIGKILL was killed for memory
/// only if one of them rose while it ran.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OomKills {
    cgroup: Option<u64>,
    system: Option<u64>,
}

impl OomKills {
    fn now() -> OomKills {
        OomKills { cgroup: cgroup_oom_kills(), system: counter(Path::new("/proc/vmstat"), "oom_kill") }
    }

    /// Which count rose since `self`, in words; `None` when neither did (or neither is known).
    fn rose(&self) -> Option<String> {
        self.rose_by(OomKills::now())
    }

    fn rose_by(&self, now: OomKills) -> Option<String> {
        let rose = |before: Option<u64>, after: Option<u64>| matches!((before, after), (Some(b), Some(a)) if a > b);
        if rose(self.cgroup, now.cgroup) {
            Some("the memory cgroup counted an OOM kill".to_owned())
        } else if rose(self.system, now.system) {
            Some("the kernel's /proc/vmstat counted an OOM kill".to_owned())
        } else {
            None
        }
    }
}

/// `oom_kill` of this process's memory cgroup: cgroup v2's `memory.events`, or v1's
/// `memory.oom_control`; in the folder /proc/self/cgroup names, else at the mount's root (a
/// container sees its own cgroup there): the innermost of [`lynx_telemetry::cgroup::folders`]
/// that counts it.
fn cgroup_oom_kills() -> Option<u64> {
    lynx_telemetry::cgroup::folders("memory").iter().find_map(|folder| {
        ["memory.events", "memory.oom_control"].iter().find_map(|file| counter(&folder.join(file), "oom_kill"))
    })
}

/// The value of the `name value` line `name` in the file `path`.
fn counter(path: &Path, name: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// The work a run has recorded: the lines in its journal (cells journaled, read without its
/// lock), the workloads its serving phase has served or given up on (in its result; not one a
/// stop cut short), and a failed capture of the serving loop's graph steps (after which the
/// phase serves eagerly).
fn progress(run: &RunDir) -> usize {
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(default)]
        stopped: bool,
    }
    #[derive(serde::Deserialize)]
    struct Served {
        served: Vec<Entry>,
        graph_steps_failed: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct Warmup {
        after_sweep: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct Result {
        serving: Option<Served>,
        warmup: Option<Warmup>,
        #[serde(default)]
        resumed_warmups: Vec<Warmup>,
    }
    let cells = std::fs::read(run.journal_path()).map_or(0, |bytes| bytes.iter().filter(|&&b| b == b'\n').count());
    let Ok(result) = crate::journal::read_json::<Result>(&run.result_path(), "result") else { return cells };
    let served = result
        .serving
        .map_or(0, |s| s.served.iter().filter(|e| !e.stopped).count() + usize::from(s.graph_steps_failed.is_some()));
    // A warm-up step timed again after the sweep (or that struck the error) is progress too.
    let rechecked = result.warmup.iter().chain(&result.resumed_warmups).filter(|w| w.after_sweep.is_some()).count();
    cells + served + rechecked
}

/// A worker's death in words, and whether SIGKILL caused it.
fn death(status: ExitStatus) -> (String, bool) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("exited with code {code}"), false),
        (None, Some(signal)) => {
            let name = match signal {
                libc::SIGKILL => "SIGKILL",
                libc::SIGSEGV => "SIGSEGV",
                libc::SIGABRT => "SIGABRT",
                libc::SIGBUS => "SIGBUS",
                libc::SIGFPE => "SIGFPE",
                libc::SIGILL => "SIGILL",
                _ => "a signal",
            };
            (format!("was killed by signal {signal} ({name})"), signal == libc::SIGKILL)
        }
        (None, None) => ("ended without an exit status".to_owned(), false),
    }
}

/// Run workers on `run` until its sweep is done, a signal stops it, or workers keep dying. Each
/// worker is the process `worker` makes (`lynx worker RUN_DIR` in the binary), told this
/// process's pid; `say` hears what happened to a worker that died.
pub fn supervise(
    run: &RunDir,
    worker: &mut dyn FnMut() -> Command,
    say: &mut dyn FnMut(String),
) -> Result<Supervised, RunError> {
    let io = |source| RunError::Io { path: run.dir.clone(), source };
    let mut fruitless = 0;
    loop {
        let before = progress(run);
        let kills_before = OomKills::now();
        let mut child = worker().env(SUPERVISOR_PID, std::process::id().to_string()).spawn().map_err(io)?;
        let mut forwarded = false;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(io)? {
                break status;
            }
            if !forwarded && stop_signal().is_some() {
                forwarded = true;
                // SAFETY: kill takes no pointers; the pid is our own child, not yet reaped.
                unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        match status.code() {
            Some(0) => return Ok(Supervised::Done),
            Some(2) => return Ok(Supervised::BadInput),
            Some(code) if code == i32::from(EXIT_STOPPED) => {
                return Ok(Supervised::Stopped(stop_signal().unwrap_or(libc::SIGTERM)));
            }
            Some(code) if code == i32::from(EXIT_DISK_FULL) => return Ok(Supervised::DiskFull),
            Some(code) if code == i32::from(EXIT_POISONED) && progress(run) > before => {
                if let Some(signal) = stop_signal() {
                    return Ok(Supervised::Stopped(signal));
                }
                fruitless = 0;
                say("a GPU error left the worker's device context unusable; starting a new worker for the work left"
                    .to_owned());
                continue;
            }
            _ => {}
        }
        let (how, sigkill) = death(status);
        let evidence = kills_before.rose();
        let died_in = crate::run::record_worker_death(run, &how, sigkill, evidence.as_deref())?;
        if let Some(signal) = stop_signal() {
            return Ok(Supervised::Stopped(signal));
        }
        say(match &died_in {
            DiedIn::Cell(shape) => format!("the worker {how} during {shape}; that cell is recorded as failed"),
            DiedIn::Serving(what) => format!("the worker {how} {what}; that is recorded as failed"),
            DiedIn::Elsewhere => format!("the worker {how} outside any cell"),
        });
        if died_in != DiedIn::Elsewhere || progress(run) > before {
            fruitless = 0;
        } else {
            fruitless += 1;
            if fruitless >= MAX_FRUITLESS_DEATHS {
                return Ok(Supervised::GaveUp(format!(
                    "the worker {how}, {fruitless} times in a row with no progress"
                )));
            }
        }
        say("starting a new worker for the work left".to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Journal;
    use lynx_schema::result::{CellShape, CellStatus};

    fn shell(script: &'static str) -> impl FnMut() -> Command {
        move || {
            let mut command = Command::new("sh");
            command.args(["-c", script]);
            command
        }
    }

    fn run_dir() -> (tempfile::TempDir, RunDir) {
        let out = tempfile::tempdir().unwrap();
        let run = RunDir::new(out.path(), "cpu", "r");
        std::fs::create_dir_all(&run.dir).unwrap();
        (out, run)
    }

    #[test]
    fn a_worker_that_finishes_or_refuses_its_input_ends_supervision() {
        let (_out, run) = run_dir();
        let mut said = Vec::new();
        let done = supervise(&run, &mut shell("exit 0"), &mut |line| said.push(line)).unwrap();
        assert!(matches!(done, Supervised::Done));
        let refused = supervise(&run, &mut shell("exit 2"), &mut |line| said.push(line)).unwrap();
        assert!(matches!(refused, Supervised::BadInput));
        assert!(said.is_empty(), "{said:?}");
    }

    /// A worker killed by SIGKILL in a cell from outside (no OOM kill counted) has that cell
    /// journaled as `killed`, not out of memory (issue 17: it reported a capacity limit never
    /// reached), and a new worker started; workers that keep dying with no progress end
    /// supervision.
    #[test]
    fn killed_workers_lose_only_their_cell_and_fruitless_deaths_give_up() {
        let (_out, run) = run_dir();
        let shape = CellShape::decode(4, 128);
        crate::store::write_json_atomic(&run.current_path(), &shape).unwrap();
        let mut said = Vec::new();
        let end = supervise(&run, &mut shell("kill -9 $$"), &mut |line| said.push(line)).unwrap();
        let Supervised::GaveUp(why) = end else { panic!("supervision did not give up") };
        assert!(why.contains("SIGKILL") && why.contains("2 times in a row"), "{why}");
        let (_, cells) = Journal::open(&run.journal_path()).unwrap();
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].shape, shape);
        assert!(
            matches!(&cells[0].status, CellStatus::Killed { message } if message.contains("SIGKILL")),
            "{:?}",
            cells[0].status
        );
        assert!(said[0].contains(&format!("during {shape}")), "{said:?}");
        assert!(!run.current_path().exists(), "the cell marker outlived the death it recorded");
    }

    /// The OOM-kill counters read as the kernel writes them, and only a rise is evidence.
    #[test]
    fn an_oom_kill_counts_only_where_a_counter_rose() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("memory.events");
        std::fs::write(&events, "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n").unwrap();
        assert_eq!(counter(&events, "oom_kill"), Some(2));
        assert_eq!(counter(&events, "oom"), Some(2), "a prefix of another name is not it");
        let before = OomKills { cgroup: Some(2), system: Some(5) };
        assert_eq!(before.rose_by(before), None);
        let cgroup = before.rose_by(OomKills { cgroup: Some(3), system: Some(6) }).unwrap();
        assert!(cgroup.contains("cgroup"), "{cgroup}");
        let system = before.rose_by(OomKills { cgroup: Some(2), system: Some(6) }).unwrap();
        assert!(system.contains("vmstat"), "{system}");
        let unknown = OomKills { cgroup: None, system: None };
        assert_eq!(unknown.rose_by(before), None, "no count known before: no evidence");
        // On Linux at least the system's count is there to compare against.
        assert!(OomKills::now().system.is_some());
    }

    /// Regression (issue 15): a worker whose GPU context an error poisoned journals its cell and
    /// exits with EXIT_POISONED; the supervisor starts a fresh one, which finishes. A poisoned
    /// exit with nothing journaled is a death like any other.
    #[test]
    fn a_poisoned_worker_is_replaced_and_the_next_one_finishes() {
        let (_out, run) = run_dir();
        let journal = run.journal_path();
        // First worker: journal a line and exit poisoned; the second sees it and finishes.
        let script =
            format!("if [ -s {0} ]; then exit 0; fi; echo '{{}}' >> {0}; exit {EXIT_POISONED}", journal.display());
        let mut worker = move || {
            let mut command = Command::new("sh");
            command.args(["-c", &script]);
            command
        };
        let mut said = Vec::new();
        let end = supervise(&run, &mut worker, &mut |line| said.push(line)).unwrap();
        assert!(matches!(end, Supervised::Done));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("device context unusable; starting a new worker"), "{said:?}");
        let end = supervise(&run, &mut shell("exit 4"), &mut |line| said.push(line)).unwrap();
        assert!(matches!(end, Supervised::GaveUp(_)), "no progress: no replacement without end");
    }
}
