//! How busy the host's CPUs were with work that is not lynx's, while a cell was measured: the
//! `stability` check's second half (docs/SWEEPS.md, "Stability").
//!
//! Linux counts every CPU's busy time in /proc/stat and each process's own in /proc/PID/stat,
//! both in clock ticks of 1/100 s (USER_HZ). The busy time of the whole host less that of this
//! process (the worker, with the sampler thread) and of its parent (the supervisor), and in a
//! node's run of every process under the node's (the other devices' runs: [`NODE_PID_VAR`]),
//! over the cell's wall time, is the cores other processes kept busy. In a virtual machine /proc/stat
//! also counts the time its hypervisor ran something else while one of its CPUs could have run
//! (steal): it is in that busy time, and said apart. Beside them, how long a CFS quota on lynx's
//! cgroup (a container's CPU limit) held it off its CPUs ([`lynx_telemetry::cgroup`]).
//!
//! Where lynx may run on some of the host's CPUs only (a cpuset, `--cpus`), /proc/stat's
//! per-CPU lines say how busy the others were: the other load said apart from the CPUs lynx
//! runs on, as a lower bound (lynx's own processes other than the worker may have run there),
//! so that a shared node's other jobs are told from load beside lynx's own threads.

use std::time::Instant;

use lynx_schema::value::Finite;

/// Clock ticks per second in /proc/stat and /proc/PID/stat (USER_HZ, 100 on every Linux).
const TICKS_PER_S: f64 = 100.0;

/// The host's and lynx's CPU time at one instant.
pub struct HostLoad {
    at: Instant,
    ticks: HostTicks,
    own_ticks: OwnTicks,
    throttled: Option<lynx_telemetry::cgroup::Throttled>,
}

/// What other work kept the host's CPUs from lynx since a [`HostLoad`], on average, in cores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OtherLoad {
    /// Busy with anything but lynx's own processes, the hypervisor's steal included.
    pub cores: f64,
    /// Of them, stolen by the hypervisor.
    pub stolen_cores: f64,
    /// Of them, at least this many on CPUs the worker may not run on; `None` where it may run on
    /// every CPU the host counts (or the kernel does not say which it may).
    pub elsewhere_cores: Option<f64>,
}

/// The figures a record keeps of an [`OtherLoad`], where it said them and they are finite.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RecordedLoad {
    pub other_cpu_cores: Option<Finite>,
    pub stolen_cpu_cores: Option<Finite>,
    pub other_cpu_cores_elsewhere: Option<Finite>,
}

impl OtherLoad {
    /// The figures a record keeps of `other`.
    pub fn recorded(other: Option<OtherLoad>) -> RecordedLoad {
        let figure = |v: f64, what: &str| Finite::new(v, what).ok();
        match other {
            Some(o) => RecordedLoad {
                other_cpu_cores: figure(o.cores, "other CPU cores"),
                stolen_cpu_cores: figure(o.stolen_cores, "stolen CPU cores"),
                other_cpu_cores_elsewhere: o.elsewhere_cores.and_then(|c| figure(c, "other CPU cores elsewhere")),
            },
            None => RecordedLoad::default(),
        }
    }
}

impl HostLoad {
    /// Now; `None` where /proc does not say (not Linux).
    pub fn now() -> Option<HostLoad> {
        let throttled = lynx_telemetry::cgroup::Throttled::now();
        Some(HostLoad { at: Instant::now(), ticks: host_ticks()?, own_ticks: OwnTicks::now()?, throttled })
    }

    /// The seconds a CFS quota held lynx's cgroup (or one above it) off its CPUs since `self`;
    /// `None` where no cgroup counts its throttling.
    pub fn throttled_since(&self) -> Option<Finite> {
        let now = lynx_telemetry::cgroup::Throttled::now()?;
        Finite::new(now.since(self.throttled.as_ref()?), "throttled seconds").ok()
    }

    /// What other work kept the host's cores busy on average since `self`; `None` where /proc
    /// does not say or too little time passed to tell (under 0.2 s, two ticks of a core).
    pub fn other_load_since(&self) -> Option<OtherLoad> {
        let wall = self.at.elapsed().as_secs_f64();
        if wall < 0.2 {
            return None;
        }
        let now = host_ticks()?;
        let busy = now.busy.saturating_sub(self.ticks.busy);
        let stolen = now.steal.saturating_sub(self.ticks.steal);
        let own_now = OwnTicks::now()?;
        let own = own_now.since(&self.own_ticks);
        let mut load = OtherLoad::of_ticks(busy, stolen, own, wall);
        // Measured against the CPUs as the worker could run on them at the start; the worker's
        // own ticks all fell on them, its supervisor's and a node's other runs' may not have.
        if let (Some(then), Some(now)) = (self.ticks.elsewhere, now.elsewhere) {
            let beside = own.saturating_sub(own_now.worker_since(&self.own_ticks));
            load.elsewhere_cores = Some(load.elsewhere(now.saturating_sub(then), beside, wall));
        }
        Some(load)
    }
}

impl OtherLoad {
    /// From the host's busy ticks over `wall_s` seconds (`stolen` of them the hypervisor's),
    /// and lynx's own: the busy time that was neither lynx's nor stolen, plus the stolen.
    ///
    /// The host's busy time is sampled at each tick while a process's own is counted to the
    /// nanosecond and scaled to ticks, so over a cell of a second or two lynx's own can come to
    /// more than the host's busy time less the steal. Taking lynx's from the host's less the
    /// steal, held at zero, keeps the stolen time in the other load: the steal is never lynx's,
    /// and the load it is part of is never less than it (as the host's busy time less lynx's
    /// whole once was, on a busy host: `tests/run.rs`'s unstable-cells test).
    fn of_ticks(busy: u64, stolen: u64, own: u64, wall_s: f64) -> OtherLoad {
        let stolen = stolen.min(busy);
        let others = (busy - stolen).saturating_sub(own) + stolen;
        let cores = |ticks: u64| (ticks as f64 / TICKS_PER_S / wall_s).max(0.0);
        OtherLoad { cores: cores(others), stolen_cores: cores(stolen), elsewhere_cores: None }
    }

    /// Of this load over `wall_s` seconds, the cores busy on CPUs the worker may not run on, from
    /// those CPUs' busy ticks, less `beside`: lynx's own ticks other than the worker's (its
    /// supervisor, a node's other runs), which may have fallen there. A lower bound, and never
    /// more than the load itself.
    fn elsewhere(&self, elsewhere: u64, beside: u64, wall_s: f64) -> f64 {
        (elsewhere.saturating_sub(beside) as f64 / TICKS_PER_S / wall_s).clamp(0.0, self.cores)
    }
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, to the nanosecond: getrusage's CPU
/// times are only as fresh as the scheduler's last tick) and context switches
/// (`getrusage(RUSAGE_THREAD)`) so far, as the kernel counts them: what a cell's slow steps are
/// set against ([`lynx_analysis::cell::ThreadStep`]).
#[derive(Debug, Clone, Copy)]
pub struct ThreadUsage {
    /// The monotonic clock, read outermost: first in [`ThreadUsage::before`], last in
    /// [`ThreadUsage::after`], so that a bracket's span holds every figure it counts.
    at: Instant,
    cpu_s: f64,
    voluntary: i64,
    involuntary: i64,
    /// How long it has waited to run, runnable but not running (the run-queue delay of
    /// /proc/thread-self/schedstat, to the nanosecond); `None` where the kernel does not say.
    runnable_s: Option<f64>,
}

impl ThreadUsage {
    /// Now, for the calling thread, to begin a bracket: the CPU clock read last, so that the
    /// other reads (the run-queue delay's file takes microseconds) fall outside the CPU time the
    /// bracket counts, as they fall outside the wall time it is set against; `None` where the
    /// kernel does not say (not Linux).
    pub fn before() -> Option<ThreadUsage> {
        Self::read(false)
    }

    /// Now, to end a bracket [`ThreadUsage::before`] began: the CPU clock read first.
    pub fn after() -> Option<ThreadUsage> {
        Self::read(true)
    }

    #[cfg(target_os = "linux")]
    fn read(clock_first: bool) -> Option<ThreadUsage> {
        let early_at = (!clock_first).then(Instant::now);
        let run_delay = || schedstat_now(run_delay_s);
        let early = (!clock_first).then(run_delay);
        // SAFETY: zeroed rusage and timespec (integers only) are valid ones; getrusage and
        // clock_gettime each write one through the pointer they are given, which points at the
        // one made here, alive for the call.
        let (usage_rc, usage, clock_rc, cpu) = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            let mut cpu: libc::timespec = std::mem::zeroed();
            let (usage_rc, clock_rc) = if clock_first {
                let clock_rc = libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut cpu);
                (libc::getrusage(libc::RUSAGE_THREAD, &mut usage), clock_rc)
            } else {
                let usage_rc = libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
                (usage_rc, libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut cpu))
            };
            (usage_rc, usage, clock_rc, cpu)
        };
        let runnable_s = early.unwrap_or_else(run_delay);
        let at = early_at.unwrap_or_else(Instant::now);
        (usage_rc == 0 && clock_rc == 0).then(|| ThreadUsage {
            at,
            cpu_s: cpu.tv_sec as f64 + cpu.tv_nsec as f64 / 1e9,
            voluntary: usage.ru_nvcsw,
            involuntary: usage.ru_nivcsw,
            runnable_s,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn read(_clock_first: bool) -> Option<ThreadUsage> {
        None
    }

    /// The wall time from `earlier`'s first reading to `self`'s last: the step it brackets and
    /// the readings around it.
    pub fn span_s(&self, earlier: &ThreadUsage) -> f64 {
        self.at.saturating_duration_since(earlier.at).as_secs_f64()
    }

    /// The thread's CPU time between the CPU clock readings of `earlier` and `self`, as the clock
    /// says it, the readings' own edges included.
    fn cpu_since(&self, earlier: &ThreadUsage) -> f64 {
        (self.cpu_s - earlier.cpu_s).max(0.0)
    }

    /// What the thread did in a step of `step_s` seconds of wall time that `earlier` and `self`
    /// bracket, taken on the same thread.
    ///
    /// Both figures are kept within the step, which the bracket's readings lie outside. The CPU
    /// clock is read nearest the step on both sides, so its time is the step's and the clock's
    /// own call; but whatever falls between a CPU clock reading and the step's clock (a timer
    /// interrupt, which in a virtual machine can take tens of microseconds) is charged to the
    /// thread, and the wider a build's readings the likelier one falls there (a debug build's
    /// served steps came to 12–29 µs more CPU time than wall time), so the CPU time counted is
    /// at most the step's wall time. The run-queue delay is read outermost, and a wait to run
    /// that fell between a delay reading and the step (the thread preempted in the readings, a
    /// timeslice of milliseconds) was not the step's: the wait counted is the delay over the
    /// bracket less the bracket's time outside the step, short of the step's own wait by no more
    /// than the readings' few microseconds. The two together are then never more than the step
    /// lasted.
    pub fn over_step(&self, earlier: &ThreadUsage, step_s: f64) -> lynx_analysis::cell::ThreadStep {
        let count = |now: i64, then: i64| u64::try_from(now - then).unwrap_or(0);
        let step_s = step_s.max(0.0);
        let outside_s = (self.span_s(earlier) - step_s).max(0.0);
        lynx_analysis::cell::ThreadStep {
            cpu_s: self.cpu_since(earlier).min(step_s),
            voluntary: count(self.voluntary, earlier.voluntary),
            involuntary: count(self.involuntary, earlier.involuntary),
            runnable_s: self
                .runnable_s
                .zip(earlier.runnable_s)
                .map(|(now, then)| (now - then - outside_s).clamp(0.0, step_s)),
        }
    }
}

#[cfg(target_os = "linux")]
thread_local! {
    /// The calling thread's /proc/thread-self/schedstat (the link resolves to the thread that
    /// opens it), opened once: a read at offset 0 of the open file has the kernel write its
    /// figures anew, in about a tenth of the time an open, a read and a close take
    /// (docs/SWEEPS.md, "Where the slow steps fell").
    static SCHEDSTAT: Option<std::fs::File> = std::fs::File::open("/proc/thread-self/schedstat").ok();
}

/// `parse` of the calling thread's schedstat line as the kernel writes it now (time on its CPU,
/// time waiting to run, timeslices), read again from the file [`SCHEDSTAT`] keeps open.
#[cfg(target_os = "linux")]
fn schedstat_now<T>(parse: impl FnOnce(&str) -> Option<T>) -> Option<T> {
    SCHEDSTAT.with(|file| {
        let mut read = [0u8; 128];
        let n = std::os::unix::fs::FileExt::read_at(file.as_ref()?, &mut read, 0).ok()?;
        parse(std::str::from_utf8(&read[..n]).ok()?)
    })
}

/// The run-queue delay of a /proc/PID/schedstat line (time on the CPU, time waiting to run,
/// timeslices; nanoseconds), in seconds.
fn run_delay_s(schedstat: &str) -> Option<f64> {
    let waited: u64 = schedstat.split_whitespace().nth(1)?.parse().ok()?;
    Some(waited as f64 / 1e9)
}

/// Every CPU's ticks from the first line of /proc/stat: busy (all but idle and iowait, steal
/// included) and stolen; and the busy ticks of the CPUs the calling thread may not run on, from
/// their own lines, where there are such CPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
struct HostTicks {
    busy: u64,
    steal: u64,
    elsewhere: Option<u64>,
}

fn host_ticks() -> Option<HostTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    // The calling thread's: the one that measures, bound as the worker was.
    let allowed = std::fs::read_to_string("/proc/thread-self/status").ok().and_then(|status| {
        lynx_telemetry::cgroup::cpus_in(status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:"))?)
    });
    ticks_of_stat(&stat, allowed.as_ref())
}

/// [`HostTicks`] of a /proc/stat text, against the CPUs `allowed` where known.
fn ticks_of_stat(stat: &str, allowed: Option<&std::collections::BTreeSet<u64>>) -> Option<HostTicks> {
    let mut lines = stat.lines();
    let (busy, steal) = ticks_of_cpu_line(lines.next()?.strip_prefix("cpu ")?)?;
    let elsewhere = allowed.and_then(|allowed| {
        let mut outside = None;
        // The per-CPU lines follow the first, `cpuN ...`, one for each CPU online.
        for line in lines.map_while(|line| line.strip_prefix("cpu")) {
            let (cpu, ticks) = line.split_once(' ')?;
            if !allowed.contains(&cpu.parse::<u64>().ok()?) {
                outside = Some(outside.unwrap_or(0) + ticks_of_cpu_line(ticks)?.0);
            }
        }
        outside
    });
    Some(HostTicks { busy, steal, elsewhere })
}

/// Busy and stolen ticks of a /proc/stat CPU line's figures (the `cpu` or `cpuN` name taken off).
fn ticks_of_cpu_line(figures: &str) -> Option<(u64, u64)> {
    let fields: Vec<u64> = figures.split_whitespace().map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
    let total: u64 = fields.iter().take(8).sum();
    let busy = total - fields.get(3)? - fields.get(4).copied().unwrap_or(0);
    Some((busy, fields.get(7).copied().unwrap_or(0)))
}

/// Set by a node's run (`lynx run --all-devices` or `--devices`) in each device's run to its own
/// pid: the processes under it are lynx's own, and a cell counts the other devices' runs beside
/// it as lynx's work, not as the host's other load (a node's runs all at once are one
/// benchmark; `--one-at-a-time` gives each device the host to itself).
pub const NODE_PID_VAR: &str = "LYNX_NODE_PID";

/// User and system ticks of each of lynx's processes at one instant, by pid: this process and
/// its parent (the worker and its supervisor), and in a node's run every process under the
/// node's.
#[derive(Debug, Clone, Default, PartialEq)]
struct OwnTicks(std::collections::BTreeMap<u32, u64>);

impl OwnTicks {
    /// Now; `None` where /proc does not say this process's.
    fn now() -> Option<OwnTicks> {
        let mut lynx = vec![std::os::unix::process::parent_id()];
        if let Some(node) = this_node() {
            lynx.extend(process_tree(node));
        }
        let mut ticks = OwnTicks::of(lynx);
        ticks.0.insert(std::process::id(), process_ticks("self")?);
        Some(ticks)
    }

    /// The processes `pids` (those /proc says).
    fn of(pids: impl IntoIterator<Item = u32>) -> OwnTicks {
        OwnTicks(pids.into_iter().filter_map(|pid| Some((pid, process_ticks(&pid.to_string())?))).collect())
    }

    /// The ticks lynx's processes ran since `earlier`: each one's growth, and all of one that
    /// started since (a device's new worker). One that ended since is not counted for the time
    /// it ran before it ended, which the host's other load then holds.
    fn since(&self, earlier: &OwnTicks) -> u64 {
        self.0.iter().map(|(pid, now)| now.saturating_sub(earlier.0.get(pid).copied().unwrap_or(0))).sum()
    }

    /// Of [`OwnTicks::since`], this process's (the worker's).
    fn worker_since(&self, earlier: &OwnTicks) -> u64 {
        let pid = std::process::id();
        let ticks = |own: &OwnTicks| own.0.get(&pid).copied().unwrap_or(0);
        ticks(self).saturating_sub(ticks(earlier))
    }
}

/// The node's run this process runs under ([`node_pid`] of [`NODE_PID_VAR`]), decided once: a
/// cell's every reading asks, and the answer holds for the process's life.
pub(crate) fn this_node() -> Option<u32> {
    static NODE: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *NODE.get_or_init(|| std::env::var(NODE_PID_VAR).ok().as_deref().and_then(node_pid))
}

/// The node's run this process runs under, from [`NODE_PID_VAR`]'s `value`, where it is one of
/// this process's three nearest ancestors (its supervisor's parent, for a worker) and not init:
/// a variable set by hand to another process does not make that process's work lynx's.
pub(crate) fn node_pid(value: &str) -> Option<u32> {
    let node: u32 = value.trim().parse().ok()?;
    let mut pid = std::process::id();
    for _ in 0..3 {
        pid = parent_of(pid)?;
        if pid == node {
            return (node > 1).then_some(node);
        }
    }
    None
}

/// The parent of process `pid` (field 4 of its /proc/PID/stat).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// `root` and every process under it, from each thread's list of the children it started
/// (/proc/PID/task/TID/children); `root` alone where the kernel keeps no such lists.
fn process_tree(root: u32) -> Vec<u32> {
    let mut tree = vec![root];
    let mut next = 0;
    // A node's runs are a few processes deep and wide; the bound keeps a strange /proc finite.
    while next < tree.len() && tree.len() < 4096 {
        let pid = tree[next];
        next += 1;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            tree.extend(children.split_whitespace().filter_map(|child| child.parse::<u32>().ok()));
        }
    }
    tree
}

fn process_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    ticks_of(&stat)
}

/// utime + stime (fields 14 and 15) of a /proc/PID/stat line; the command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its last `)`.
fn ticks_of(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keep the calling thread on its CPU, computing, until `until`.
    fn spin_until(until: Instant) {
        let mut x = 0u64;
        while Instant::now() < until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn recorded_keeps_each_finite_figure_and_drops_the_rest() {
        let figures = |o| {
            let r = OtherLoad::recorded(o);
            let get = |f: Option<Finite>| f.map(|f| f.get());
            (get(r.other_cpu_cores), get(r.stolen_cpu_cores), get(r.other_cpu_cores_elsewhere))
        };
        let load = |cores, stolen_cores, elsewhere_cores| OtherLoad { cores, stolen_cores, elsewhere_cores };
        assert_eq!(figures(Some(load(1.5, 0.25, Some(1.0)))), (Some(1.5), Some(0.25), Some(1.0)));
        assert_eq!(figures(Some(load(f64::NAN, 0.0, None))), (None, Some(0.0), None));
        assert_eq!(figures(Some(load(0.5, 0.0, Some(f64::INFINITY)))), (Some(0.5), Some(0.0), None));
        assert_eq!(figures(None), (None, None, None));
    }

    #[test]
    fn proc_lines_are_read_as_the_kernel_writes_them() {
        assert_eq!(ticks_of_cpu_line(" 100 5 50 1000 20 3 2 1 0 0"), Some((161, 1)));
        // A kernel too old to count steal (before 2.6.11) gives seven columns.
        assert_eq!(ticks_of_cpu_line(" 100 5 50 1000 20 3 2"), Some((160, 0)));
        assert_eq!(ticks_of_cpu_line(" 1 2 x 1000"), None);
        assert_eq!(ticks_of_cpu_line(" 1 2 3"), None, "no idle column");
        // The per-CPU lines: those of CPUs the thread may not run on are summed apart (here CPU 2
        // and 3, of four; CPU 5 is offline, so not listed); where it may run on all, none are.
        let stat = "cpu  400 0 100 4000 0 0 0 10 0 0\ncpu0 100 0 20 1000 0 0 0 0 0 0\n\
                    cpu1 100 0 20 1000 0 0 0 0 0 0\ncpu2 150 0 30 1000 0 0 0 10 0 0\ncpu3 50 0 30 1000 0 0 0 0 0 0\n\
                    intr 12345 0 0\nctxt 999\n";
        let cpus = |list: &str| lynx_telemetry::cgroup::cpus_in(list).unwrap();
        let on = |list: &str| ticks_of_stat(stat, Some(&cpus(list)));
        assert_eq!(on("0-1"), Some(HostTicks { busy: 510, steal: 10, elsewhere: Some(270) }), "steal is busy time");
        assert_eq!(on("0-1,5").unwrap().elsewhere, Some(270));
        assert_eq!(on("0-3").unwrap().elsewhere, None);
        assert_eq!(on("0-7").unwrap().elsewhere, None);
        assert_eq!(ticks_of_stat(stat, None).unwrap().elsewhere, None);
        assert_eq!(ticks_of_stat("cpu0 1 2 3 4\n", None), None, "no first line of every CPU");
        assert_eq!(run_delay_s("295800905 151638 22\n"), Some(151638e-9));
        assert_eq!(run_delay_s("garbage"), None);
        let stat = "4242 (lynx (worker) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 12 0 0";
        assert_eq!(ticks_of(stat), Some(325));
        assert_eq!(ticks_of("garbage"), None);
    }

    /// The other load is the host's busy ticks less lynx's own and the stolen ones, plus the
    /// stolen: never less than the steal, even where lynx's own time (counted to the nanosecond)
    /// came to more than the host's ticks (sampled) less the steal.
    #[test]
    fn the_stolen_time_is_always_part_of_the_other_load() {
        let at = |busy, stolen, own| OtherLoad::of_ticks(busy, stolen, own, 2.0);
        let load = |cores, stolen_cores| OtherLoad { cores, stolen_cores, elsewhere_cores: None };
        assert_eq!(at(300, 20, 100), load(1.0, 0.1));
        assert_eq!(at(300, 0, 100), load(1.0, 0.0));
        // lynx's own 290 ticks against 280 of the host's not stolen: the 20 stolen remain.
        assert_eq!(at(300, 20, 290), load(0.1, 0.1));
        assert_eq!(at(100, 0, 150), load(0.0, 0.0));
    }

    /// The load on CPUs the worker may not run on is those CPUs' busy time less lynx's other
    /// processes' (which may have run there): never more than the whole other load.
    #[test]
    fn the_load_elsewhere_is_a_lower_bound_within_the_whole() {
        let whole = OtherLoad::of_ticks(600, 0, 100, 2.0);
        assert_eq!(whole.cores, 2.5);
        assert_eq!(whole.elsewhere(400, 0, 2.0), 2.0);
        assert_eq!(whole.elsewhere(400, 60, 2.0), 1.7, "a sibling run's 60 ticks may have fallen there");
        assert_eq!(whole.elsewhere(40, 60, 2.0), 0.0);
        assert_eq!(whole.elsewhere(900, 0, 2.0), 2.5, "never more than the whole");
    }

    /// A process spinning on a CPU this thread may not run on is load elsewhere: at least most
    /// of its core, and within the whole other load. On a host of one CPU there is no elsewhere,
    /// and the figure is absent.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_on_a_cpu_lynx_may_not_run_on_is_load_elsewhere() {
        use std::os::unix::process::CommandExt;
        let allowed = |pid: i32| {
            // SAFETY: a zeroed cpu_set_t is an empty set; sched_getaffinity writes at most its
            // size into the one made here.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            let rc = unsafe { libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
            assert_eq!(rc, 0);
            (0..libc::CPU_SETSIZE as usize).filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) }).collect::<Vec<_>>()
        };
        let pin = |cpu: usize| {
            // SAFETY: as above; CPU_SET writes within the set, below CPU_SETSIZE.
            let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
            unsafe { libc::CPU_SET(cpu, &mut set) };
            set
        };
        let cpus = allowed(0);
        let (first, second) = (cpus[0], cpus.get(1).copied());
        // This thread alone is bound to the first CPU, as a bound worker's threads are.
        let this_thread = pin(first);
        // SAFETY: binds the calling thread (pid 0) to a set made above.
        assert_eq!(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &this_thread) }, 0);
        let Some(second) = second else {
            let start = HostLoad::now().unwrap();
            assert_eq!(start.ticks.elsewhere, None, "one CPU: nowhere else");
            return;
        };
        let spinner = pin(second);
        let mut spin = std::process::Command::new("sh");
        spin.args(["-c", "while :; do :; done"]);
        // SAFETY: between fork and exec the child only binds itself to a set copied into it.
        unsafe {
            spin.pre_exec(move || match libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &spinner) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
        let mut child = spin.spawn().unwrap();
        let child_ticks = || process_ticks(&child.id().to_string()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let (start, spun_before) = (HostLoad::now().unwrap(), child_ticks());
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let (other, spun) = (start.other_load_since().unwrap(), child_ticks() - spun_before);
        let wall = start.at.elapsed().as_secs_f64();
        child.kill().unwrap();
        child.wait().unwrap();
        // The child's core, however much of CPU 1 it got beside the other tests' threads.
        let child_cores = spun as f64 / TICKS_PER_S / wall;
        let elsewhere = other.elsewhere_cores.expect("the thread may not run on every CPU");
        assert!(child_cores > 0.1, "the spinning child ran {spun} ticks in {wall} s");
        assert!(
            elsewhere >= 0.8 * child_cores - 0.05 && elsewhere <= other.cores,
            "{other:?} beside a process spinning on CPU {second} for {child_cores:.2} cores"
        );
    }

    /// A thread spinning is on its CPU for nearly all of it (a busy host may take some); one
    /// asleep is off it, and its sleep is a voluntary switch.
    #[test]
    fn a_threads_usage_tells_running_from_waiting() {
        let Some(before) = ThreadUsage::before() else { return };
        let start = Instant::now();
        spin_until(start + std::time::Duration::from_millis(200));
        let wall = start.elapsed().as_secs_f64();
        let spun = ThreadUsage::after().unwrap().over_step(&before, wall);
        assert!(spun.cpu_s > 0.02 && spun.cpu_s <= wall + 1e-3, "{spun:?} over {wall} s");
        let before = ThreadUsage::before().unwrap();
        let start = Instant::now();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let wall = start.elapsed().as_secs_f64();
        let slept = ThreadUsage::after().unwrap().over_step(&before, wall);
        assert!(slept.voluntary >= 1 && slept.cpu_s < 0.02, "{slept:?}");
    }

    /// A bracket counts the CPU time between its two clock reads and no more: the other reads
    /// (the run-queue delay's file above all) lie outside it, as they lie outside the wall time a
    /// step's bracket is set against. A thousand brackets around nothing but a wall-clock
    /// reading: their CPU time within 4 µs each of their wall time (the thread's CPU clock is a
    /// system call, whose own time it partly counts: about 1.3 µs a bracket on this project's
    /// host; with the file read inside, as it first was, about 10).
    #[test]
    fn a_bracket_counts_no_cpu_time_of_its_own_reads() {
        let (mut cpu, mut wall) = (0.0, 0.0);
        for _ in 0..1000 {
            let Some(before) = ThreadUsage::before() else { return };
            let start = Instant::now();
            let step_s = start.elapsed().as_secs_f64();
            wall += step_s;
            cpu += ThreadUsage::after().unwrap().cpu_since(&before);
        }
        assert!(cpu <= wall + 1000.0 * 4e-6, "{cpu} s of CPU time over {wall} s of wall time");
    }

    /// Each thread reads its own run-queue delay: the file it keeps open is its own task's, and
    /// reading it again gives the kernel's figures anew.
    #[cfg(target_os = "linux")]
    #[test]
    fn each_thread_keeps_its_own_schedstat_open() {
        let opened = || {
            use std::os::fd::AsRawFd;
            let fd = SCHEDSTAT.with(|f| f.as_ref().map(|f| f.as_raw_fd())).expect("Linux has the file");
            let path = std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap();
            // SAFETY: gettid takes nothing and only returns the calling thread's id.
            let tid = unsafe { libc::gettid() };
            (path, std::path::PathBuf::from(format!("/proc/{}/task/{tid}/schedstat", std::process::id())))
        };
        let (path, own) = opened();
        assert_eq!(path, own);
        let (path, own) = std::thread::spawn(opened).join().unwrap();
        assert_eq!(path, own, "another thread opens its own");
        // Its first figure is the thread's time on its CPU: a spin of 100 ms shows in it.
        let on_cpu_ns = || schedstat_now(|line| line.split_whitespace().next()?.parse::<u64>().ok()).unwrap();
        let before = on_cpu_ns();
        spin_until(Instant::now() + std::time::Duration::from_millis(100));
        let after = on_cpu_ns();
        assert!(after >= before + 10_000_000, "{before} ns, then {after} ns after a 100 ms spin");
    }

    /// A thread spinning beside more spinning threads than the host has cores waits to run for
    /// part of its time, and the kernel's run-queue delay says so, within its wall time.
    #[test]
    fn a_thread_that_must_wait_for_a_cpu_is_seen_waiting() {
        let Some(before) = ThreadUsage::before() else { return };
        assert!(before.runnable_s.is_some(), "Linux says a thread's run-queue delay in /proc/thread-self/schedstat");
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let start = Instant::now();
        let until = start + std::time::Duration::from_millis(400);
        let others: Vec<_> = (0..2 * cores).map(|_| std::thread::spawn(move || spin_until(until))).collect();
        spin_until(until);
        let wall = start.elapsed().as_secs_f64();
        let waited = ThreadUsage::after().unwrap().over_step(&before, wall);
        others.into_iter().for_each(|t| t.join().unwrap());
        let runnable = waited.runnable_s.expect("the kernel said before, and after");
        assert!(runnable > 0.01 && runnable <= wall, "{waited:?} over {wall} s beside {} spinners", 2 * cores);
    }

    /// A wait to run that fell in a bracket's readings, outside the step (a preemption there
    /// holds the thread for a timeslice of milliseconds), is not the step's, nor is CPU time
    /// there: here the thread spins and waits to run beside spinners between the bracket's
    /// first readings and a step of nothing, and the step is counted as having run and waited
    /// no longer than it lasted. The readings before this counted that wait as the step's, and
    /// a cell's slow steps were seen waiting to run for longer than they lasted (`tests/run.rs`,
    /// now and then on a busy host).
    #[test]
    fn a_wait_to_run_outside_the_step_is_not_the_steps() {
        let Some(before) = ThreadUsage::before() else { return };
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let until = Instant::now() + std::time::Duration::from_millis(300);
        let others: Vec<_> = (0..2 * cores).map(|_| std::thread::spawn(move || spin_until(until))).collect();
        spin_until(until);
        let start = Instant::now();
        let step_s = start.elapsed().as_secs_f64();
        let after = ThreadUsage::after().unwrap();
        others.into_iter().for_each(|t| t.join().unwrap());
        // The bracket as a whole did wait: the kernel counted it.
        let whole = after.over_step(&before, after.span_s(&before));
        assert!(whole.runnable_s.unwrap() > 0.01 && whole.cpu_s > 0.01, "{whole:?}");
        let step = after.over_step(&before, step_s);
        assert!(step.cpu_s + step.runnable_s.unwrap() <= step_s, "{step:?} over a step of {step_s} s");
    }

    /// A node's run is named by a process above this one, not by any other; the processes under
    /// a root are found through the kernel's lists of children, and their work counted as lynx's.
    #[test]
    fn the_processes_under_a_nodes_run_are_lynxs_own() {
        let parent = std::os::unix::process::parent_id();
        assert_eq!(node_pid(&format!(" {parent}\n")), (parent > 1).then_some(parent));
        assert_eq!(node_pid("1"), None, "init is never a node's run");
        assert_eq!(node_pid(&std::process::id().to_string()), None, "not an ancestor: this process");
        assert_eq!(node_pid("x"), None);
        let mut sibling = std::process::Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let tree = process_tree(std::process::id());
        if std::fs::metadata(format!("/proc/{}/task/{}/children", std::process::id(), std::process::id())).is_err() {
            eprintln!("this kernel keeps no lists of children: a node's other runs would count as the host's load");
            sibling.kill().unwrap();
            sibling.wait().unwrap();
            return;
        }
        assert!(tree.contains(&sibling.id()), "{tree:?} lacks {}", sibling.id());
        let before = OwnTicks::of(tree.clone());
        std::thread::sleep(std::time::Duration::from_millis(600));
        let after = OwnTicks::of(tree);
        sibling.kill().unwrap();
        sibling.wait().unwrap();
        let spun = after.0[&sibling.id()].saturating_sub(before.0[&sibling.id()]);
        assert!(spun >= 20 && after.since(&before) >= spun, "0.6 s of a spinning child gave {spun} ticks");
        // A process that started since is counted whole; one that ended is not counted.
        let started = OwnTicks(std::collections::BTreeMap::from([(7, 5), (9, 40)]));
        let earlier = OwnTicks(std::collections::BTreeMap::from([(7, 2), (8, 100)]));
        assert_eq!(started.since(&earlier), 3 + 40);
    }

    /// A thread of this process spinning is lynx's own time: it shows in the ticks subtracted
    /// from the host's, not in the other processes' share.
    #[test]
    fn this_process_own_work_is_counted_as_its_own() {
        let (Some(start), Some(before)) = (HostLoad::now(), OwnTicks::now()) else { return };
        spin_until(Instant::now() + std::time::Duration::from_millis(600));
        let own = OwnTicks::now().unwrap().since(&before);
        assert!(own >= 30, "0.6 s of spinning gave this process {own} ticks");
        let other = start.other_load_since().unwrap();
        assert!(other.cores >= 0.0 && (0.0..=other.cores + 1e-9).contains(&other.stolen_cores), "{other:?}");
    }
}
