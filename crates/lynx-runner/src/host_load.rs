//! How busy the host's CPUs were with work that is not lynx's, while a cell was measured: the
//! `stability` check's second half (docs/SWEEPS.md, "Stability").
//!
//! Linux counts every CPU's busy time in /proc/stat and each process's own in /proc/PID/stat,
//! both in clock ticks of 1/100 s (USER_HZ). The busy time of the whole host less that of this
//! process (the worker, with the sampler thread) and of its parent (the supervisor), over the
//! cell's wall time, is the cores other processes kept busy.

use std::time::Instant;

/// Clock ticks per second in /proc/stat and /proc/PID/stat (USER_HZ, 100 on every Linux).
const TICKS_PER_S: f64 = 100.0;

/// The host's and lynx's CPU time at one instant.
pub struct HostLoad {
    at: Instant,
    busy_ticks: u64,
    own_ticks: u64,
}

impl HostLoad {
    /// Now; `None` where /proc does not say (not Linux).
    pub fn now() -> Option<HostLoad> {
        Some(HostLoad { at: Instant::now(), busy_ticks: host_busy_ticks()?, own_ticks: own_ticks()? })
    }

    /// The cores other processes kept busy on average since `self`; `None` where /proc does not
    /// say or too little time passed to tell (under 0.2 s, two ticks of a core).
    pub fn other_cores_since(&self) -> Option<f64> {
        let wall = self.at.elapsed().as_secs_f64();
        if wall < 0.2 {
            return None;
        }
        let busy = host_busy_ticks()?.saturating_sub(self.busy_ticks) as f64;
        let own = own_ticks()?.saturating_sub(self.own_ticks) as f64;
        Some(((busy - own) / TICKS_PER_S / wall).max(0.0))
    }
}

/// The calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`, to the nanosecond: getrusage's CPU
/// times are only as fresh as the scheduler's last tick) and context switches
/// (`getrusage(RUSAGE_THREAD)`) so far, as the kernel counts them: what a cell's slow steps are
/// set against ([`lynx_analysis::cell::ThreadStep`]).
#[derive(Debug, Clone, Copy)]
pub struct ThreadUsage {
    cpu_s: f64,
    voluntary: i64,
    involuntary: i64,
}

impl ThreadUsage {
    /// Now, for the calling thread; `None` where the kernel does not say (not Linux).
    #[cfg(target_os = "linux")]
    pub fn now() -> Option<ThreadUsage> {
        // SAFETY: zeroed rusage and timespec (integers only) are valid ones; getrusage and
        // clock_gettime each write one through the pointer they are given, which points at the
        // one made here, alive for the call.
        let (usage_rc, usage, clock_rc, cpu) = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            let mut cpu: libc::timespec = std::mem::zeroed();
            let usage_rc = libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
            let clock_rc = libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut cpu);
            (usage_rc, usage, clock_rc, cpu)
        };
        (usage_rc == 0 && clock_rc == 0).then(|| ThreadUsage {
            cpu_s: cpu.tv_sec as f64 + cpu.tv_nsec as f64 / 1e9,
            voluntary: usage.ru_nvcsw,
            involuntary: usage.ru_nivcsw,
        })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn now() -> Option<ThreadUsage> {
        None
    }

    /// What the thread did since `earlier`, taken on the same thread.
    pub fn since(&self, earlier: &ThreadUsage) -> lynx_analysis::cell::ThreadStep {
        let count = |now: i64, then: i64| u64::try_from(now - then).unwrap_or(0);
        lynx_analysis::cell::ThreadStep {
            cpu_s: (self.cpu_s - earlier.cpu_s).max(0.0),
            voluntary: count(self.voluntary, earlier.voluntary),
            involuntary: count(self.involuntary, earlier.involuntary),
        }
    }
}

/// Busy ticks of every CPU: the first line of /proc/stat less its idle and iowait columns.
fn host_busy_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    busy_of(stat.lines().next()?)
}

fn busy_of(cpu_line: &str) -> Option<u64> {
    let fields: Vec<u64> = cpu_line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
    let total: u64 = fields.iter().take(8).sum();
    Some(total - fields.get(3)? - fields.get(4).copied().unwrap_or(0))
}

/// User and system ticks of this process and of its parent.
fn own_ticks() -> Option<u64> {
    let parent = std::os::unix::process::parent_id();
    Some(process_ticks("self")? + process_ticks(&parent.to_string()).unwrap_or(0))
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

    #[test]
    fn proc_lines_are_read_as_the_kernel_writes_them() {
        assert_eq!(busy_of("cpu  100 5 50 1000 20 3 2 1 0 0"), Some(161));
        let stat = "4242 (lynx (worker) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 12 0 0";
        assert_eq!(ticks_of(stat), Some(325));
        assert_eq!(ticks_of("garbage"), None);
    }

    /// A thread spinning is on its CPU for nearly all of it (a busy host may take some); one
    /// asleep is off it, and its sleep is a voluntary switch.
    #[test]
    fn a_threads_usage_tells_running_from_waiting() {
        let Some(before) = ThreadUsage::now() else { return };
        let start = Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(200) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let spun = ThreadUsage::now().unwrap().since(&before);
        let wall = start.elapsed().as_secs_f64();
        assert!(spun.cpu_s > 0.02 && spun.cpu_s <= wall + 1e-3, "{spun:?} over {wall} s");
        let before = ThreadUsage::now().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = ThreadUsage::now().unwrap().since(&before);
        assert!(slept.voluntary >= 1 && slept.cpu_s < 0.02, "{slept:?}");
    }

    /// A thread of this process spinning is lynx's own time: it shows in the ticks subtracted
    /// from the host's, not in the other processes' share.
    #[test]
    fn this_process_own_work_is_counted_as_its_own() {
        let (Some(start), Some(before)) = (HostLoad::now(), own_ticks()) else { return };
        let until = Instant::now() + std::time::Duration::from_millis(600);
        let mut x = 0u64;
        while Instant::now() < until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let own = own_ticks().unwrap() - before;
        assert!(own >= 30, "0.6 s of spinning gave this process {own} ticks");
        assert!(start.other_cores_since().is_some_and(|c| c >= 0.0));
    }
}
