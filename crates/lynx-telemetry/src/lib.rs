//! Telemetry of the devices and the host a run measures on.
//!
//! The [`TelemetrySource`] trait is what a device's telemetry implements; the [`Sampler`] thread
//! reads every source at a fixed rate on the run's monotonic clock and writes the readings to the
//! run's raw-samples file as it goes; [`HostSource`] is the host's backend (Linux `/proc` and
//! `/sys`), and [`host_record`] the host's identity for the result. The NVML and ROCm SMI
//! backends (the telemetry issue, next) implement the same trait in their own crates.

pub mod cgroup;
mod host;
pub mod pci;
mod sampler;

pub use host::{
    available_memory_bytes, meminfo_field, parse_cpuinfo_mhz, parse_meminfo, parse_proc_stat, utilisation, CpuTimes,
    HostSource,
};
pub use sampler::{Sampler, SamplerError, TelemetrySource};

use lynx_schema::result::{CpuAllowance, HostRecord};
use lynx_schema::telemetry::{CallTime, SLOW_READING_S};
use lynx_schema::value::{Finite, Reported};
use std::path::Path;
use std::time::Instant;
use sysinfo::System;

/// The host's identity. Values the OS does not expose are `Unavailable` with the reason.
pub fn host_record() -> HostRecord {
    let mut system = System::new();
    system.refresh_cpu_all();
    system.refresh_memory();
    let cpu_model = system.cpus().first().map(|cpu| cpu.brand().trim().to_owned()).filter(|brand| !brand.is_empty());
    // Read once: the governors are those of the CPUs it lists.
    let allowance = cpu_allowance();
    HostRecord {
        cpu_model: known(cpu_model, "the OS reports no CPU model name"),
        physical_cores: known(System::physical_core_count().map(|n| n as u64), "the OS reports no physical core count"),
        logical_cpus: system.cpus().len() as u64,
        memory_bytes: system.total_memory(),
        os: known(System::long_os_version(), "the OS reports no name or version"),
        kernel: known(System::kernel_version(), "the OS reports no kernel version"),
        cpufreq_governor: Some(cpufreq_governor(Path::new("/sys/devices/system/cpu"), &allowance)),
        cpu_allowance: allowance,
        transparent_hugepages: Some(transparent_hugepages(Path::new("/sys/kernel/mm/transparent_hugepage/enabled"))),
        clocksource: Some(first_word(Path::new("/sys/devices/system/clocksource/clocksource0/current_clocksource"))),
        // A system call this crate does not make: lynx-runner's host record adds it.
        memory_policy: None,
        cpu_features: Some(host_cpu_features()),
    }
}

/// The instruction-set extensions libtorch's CPU kernels choose by, in the order they are
/// listed here: ATen's vectorised kernels by AVX2 (with FMA) or AVX-512 (F, BW, VL and DQ),
/// oneDNN's matmuls also by the VNNI, BF16 and FP16 extensions and by AMX's tiles (bf16, int8,
/// fp16); on Arm, NEON (`asimd`), SVE and the bf16 and int8 matrix instructions.
const CPU_FEATURES: [&str; 22] = [
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "asimd",
    "asimdhp",
    "sve",
    "sve2",
    "bf16",
    "i8mm",
    "sme",
    "sme2",
];

/// This host's CPU features that libtorch's CPU kernels choose by ([`HostRecord::cpu_features`]).
pub fn host_cpu_features() -> Reported<String> {
    cpu_features(Path::new("/proc/cpuinfo"))
}

/// Of [`CPU_FEATURES`], those the first processor in the /proc/cpuinfo at `file` offers
/// (x86's `flags`, Arm's `Features`), or "none"; why not where the file names no features.
fn cpu_features(file: &Path) -> Reported<String> {
    sys_setting(
        file,
        |text| {
            let line = text.lines().find(|line| line.starts_with("flags") || line.starts_with("Features"))?;
            let offered: std::collections::HashSet<&str> = line.split_once(':')?.1.split_whitespace().collect();
            let listed: Vec<&str> = CPU_FEATURES.iter().copied().filter(|f| offered.contains(f)).collect();
            Some(if listed.is_empty() { "none".to_owned() } else { listed.join(" ") })
        },
        |file, _| format!("{} names no CPU features (no flags or Features line)", file.display()),
    )
}

/// What `pick` finds in the /sys setting (or /proc file) at `file`, or why there is none: the
/// file unread, or `missing` of the file and what it holds.
fn sys_setting(
    file: &Path,
    pick: impl FnOnce(&str) -> Option<String>,
    missing: impl FnOnce(&Path, &str) -> String,
) -> Reported<String> {
    match std::fs::read_to_string(file) {
        Ok(text) => match pick(&text) {
            Some(word) => Reported::Known(word),
            None => Reported::unavailable(missing(file, text.trim())),
        },
        Err(e) => Reported::unavailable(format!("{}: {e}", file.display())),
    }
}

/// The first word of the file at `file` (a /sys setting), or why there is none.
fn first_word(file: &Path) -> Reported<String> {
    sys_setting(
        file,
        |text| text.split_whitespace().next().map(str::to_owned),
        |file, _| format!("{} is empty", file.display()),
    )
}

/// The transparent huge page mode Linux's `enabled` file (at `file`) marks with brackets:
/// "always [madvise] never" is `madvise`.
fn transparent_hugepages(file: &Path) -> Reported<String> {
    sys_setting(
        file,
        |text| text.split_whitespace().find_map(|w| Some(w.strip_prefix('[')?.strip_suffix(']')?.to_owned())),
        |file, text| format!("{}: no mode marked in {text:?}", file.display()),
    )
}

/// The scaling governors, under `cpus` (Linux's /sys/devices/system/cpu), of the CPUs `allowance`
/// lets this process run on: the one they share, or each with how many CPUs run it where they
/// differ.
fn cpufreq_governor(cpus: &Path, allowance: &Option<CpuAllowance>) -> Reported<String> {
    let allowed = allowance.as_ref().and_then(|a| cgroup::cpus_in(&a.cpus)).unwrap_or_default();
    // Each governor met, with how many of the CPUs run it, in the order first met.
    let mut governors: Vec<(String, usize)> = Vec::new();
    for cpu in allowed {
        let file = cpus.join(format!("cpu{cpu}/cpufreq/scaling_governor"));
        let Ok(governor) = std::fs::read_to_string(&file) else { continue };
        let governor = governor.trim().to_owned();
        match governors.iter_mut().find(|(g, _)| *g == governor) {
            Some((_, on)) => *on += 1,
            None => governors.push((governor, 1)),
        }
    }
    match governors.as_slice() {
        [] => Reported::unavailable(format!(
            "no cpufreq governor under {} for this process's CPUs (most virtual machines expose none)",
            cpus.display()
        )),
        [(one, _)] => Reported::Known(one.clone()),
        several => {
            Reported::Known(several.iter().map(|(g, on)| format!("{g} on {on} CPUs")).collect::<Vec<_>>().join(", "))
        }
    }
}

/// The CPUs this process may run on and its cgroups' CPU quota; `None` where the OS does not
/// list the CPUs (not Linux).
pub fn cpu_allowance() -> Option<CpuAllowance> {
    let (cpus, cpu_count) = cgroup::allowed_cpus()?;
    let quota = cgroup::cpu_quota();
    Some(CpuAllowance {
        cpus,
        cpu_count,
        quota_cores: quota.cores.and_then(|cores| Finite::new(cores, "CPU quota").ok()),
        quota: quota.said,
    })
}

/// The calls of one reading, timed one after another: a source that times its calls keeps
/// them in [`lynx_schema::telemetry::Sample::slow_calls`] where the reading was slow.
pub struct CallTimer {
    began: Instant,
    last: Instant,
    calls: Vec<(&'static str, f64)>,
}

impl CallTimer {
    /// The reading's first call starts now.
    pub fn start() -> CallTimer {
        let now = Instant::now();
        CallTimer { began: now, last: now, calls: Vec::new() }
    }

    /// `call` ended now: it took the time since the last one ended.
    pub fn lap(&mut self, call: &'static str) {
        let now = Instant::now();
        self.calls.push((call, now.duration_since(self.last).as_secs_f64()));
        self.last = now;
    }

    /// Each call's time, where the reading took longer than [`SLOW_READING_S`]; else none.
    pub fn if_slow(self) -> Vec<CallTime> {
        if self.last.duration_since(self.began).as_secs_f64() <= SLOW_READING_S {
            return Vec::new();
        }
        self.calls.into_iter().map(|(call, s)| CallTime { call: call.to_owned(), s }).collect()
    }
}

fn known<T>(value: Option<T>, reason: &str) -> Reported<T> {
    value.map_or_else(|| Reported::unavailable(reason), Reported::Known)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reading's calls are kept, each with its own time, only where the whole took longer than
    /// `SLOW_READING_S`.
    #[test]
    fn a_call_timer_keeps_the_calls_of_a_slow_reading_only() {
        // Two calls that do nothing: quick, unless the thread was preempted between them (on a
        // busy host it can be, for a timeslice), so one of five tries will do.
        let quick = || {
            let mut timer = CallTimer::start();
            timer.lap("first");
            timer.lap("second");
            timer.if_slow().is_empty()
        };
        assert!((0..5).any(|_| quick()));
        let mut slow = CallTimer::start();
        slow.lap("first");
        std::thread::sleep(std::time::Duration::from_secs_f64(2.0 * SLOW_READING_S));
        slow.lap("second");
        let calls = slow.if_slow();
        assert_eq!(calls.iter().map(|c| c.call.as_str()).collect::<Vec<_>>(), ["first", "second"]);
        assert!(calls[1].s >= 2.0 * SLOW_READING_S && calls[0].s < calls[1].s, "{calls:?}");
    }

    /// The governor the CPUs share, or each with how many CPUs run it; none where cpufreq is not
    /// there (this project's virtual machine has none).
    #[test]
    fn the_governor_is_read_for_the_cpus_the_process_may_use() {
        let sys = tempfile::tempdir().unwrap();
        let allowance = |cpus: &str| {
            let cpu_count = cgroup::count_cpus(cpus).unwrap();
            Some(CpuAllowance { cpus: cpus.to_owned(), cpu_count, quota_cores: None, quota: "none".to_owned() })
        };
        let none = cpufreq_governor(sys.path(), &allowance("0-2"));
        assert!(none.reason().is_some_and(|r| r.contains("no cpufreq governor under")), "{none:?}");
        assert!(cpufreq_governor(sys.path(), &None).reason().is_some(), "no CPUs listed, none read");
        let set = |cpu: u64, governor: &str| {
            let folder = sys.path().join(format!("cpu{cpu}/cpufreq"));
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("scaling_governor"), format!("{governor}\n")).unwrap();
        };
        for cpu in 0..4 {
            set(cpu, "performance");
        }
        assert_eq!(cpufreq_governor(sys.path(), &allowance("0-2")), Reported::Known("performance".to_owned()));
        // CPU 3 is not the process's: its governor is not counted.
        set(3, "ondemand");
        set(0, "powersave");
        assert_eq!(
            cpufreq_governor(sys.path(), &allowance("0-2")),
            Reported::Known("powersave on 1 CPUs, performance on 2 CPUs".to_owned())
        );
    }

    #[test]
    fn the_transparent_huge_page_mode_is_the_bracketed_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("enabled");
        std::fs::write(&file, "always [madvise] never\n").unwrap();
        assert_eq!(transparent_hugepages(&file), Reported::Known("madvise".to_owned()));
        std::fs::write(&file, "always madvise never\n").unwrap();
        assert!(transparent_hugepages(&file).reason().is_some_and(|r| r.contains("no mode marked")));
        assert!(transparent_hugepages(&dir.path().join("absent")).reason().is_some());
    }

    /// The CPU features are those libtorch's kernels choose by, in a fixed order, from the first
    /// processor's x86 `flags` or Arm `Features`.
    #[test]
    fn the_cpu_features_are_those_libtorchs_kernels_choose_by() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cpuinfo");
        let features = |text: &str| {
            std::fs::write(&file, text).unwrap();
            cpu_features(&file)
        };
        let known = |words: &str| Reported::Known(words.to_owned());
        // An Intel Xeon with AMX (its flags cut), then a second processor that is not read.
        let sapphire = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse2 amx_int8 avx2 \
                        avx512f avx512bw fma avx512_bf16 amx_bf16 avx512vl avx512dq amx_tile avx512_fp16 \
                        avx512_vnni avx_vnni\n\nprocessor\t: 1\nflags\t\t: fpu\n";
        assert_eq!(
            features(sapphire),
            known(
                "avx2 fma avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16 avx512_fp16 avx_vnni amx_tile \
                 amx_bf16 amx_int8"
            )
        );
        assert_eq!(features("processor\t: 0\nflags\t\t: fpu sse2 avx fma avx2\n"), known("avx2 fma"));
        assert_eq!(features("processor\t: 0\nflags\t\t: fpu sse2\n"), known("none"));
        // An Arm server (Neoverse V2's Features, cut).
        assert_eq!(
            features("processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd aes sve sve2 asimdhp bf16 i8mm\n"),
            known("asimd asimdhp sve sve2 bf16 i8mm")
        );
        assert!(features("processor\t: 0\n").reason().is_some_and(|r| r.contains("names no CPU features")));
        assert!(cpu_features(&dir.path().join("absent")).reason().is_some());
    }

    #[test]
    fn a_setting_is_the_first_word_of_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("current_clocksource");
        std::fs::write(&file, "tsc\n").unwrap();
        assert_eq!(first_word(&file), Reported::Known("tsc".to_owned()));
        std::fs::write(&file, "\n").unwrap();
        assert!(first_word(&file).reason().is_some_and(|r| r.ends_with("is empty")));
        assert!(first_word(&dir.path().join("absent")).reason().is_some());
    }

    #[test]
    fn the_host_has_cpus_and_memory() {
        let host = host_record();
        assert!(host.logical_cpus >= 1);
        assert!(host.memory_bytes > 0);
        if cfg!(target_os = "linux") {
            // Linux always exposes its kernel release, and the CPUs a process may run on.
            assert!(host.kernel.known().is_some_and(|k| !k.is_empty()), "{:?}", host.kernel);
            let allowed = host.cpu_allowance.expect("Linux lists the CPUs");
            assert!(allowed.cpu_count >= 1 && allowed.cpu_count <= host.logical_cpus, "{allowed:?}");
            let said_cores = allowed.quota.split_once(" cores: ").and_then(|(cores, _)| cores.parse::<f64>().ok());
            assert_eq!(allowed.quota_cores.map(|c| format!("{:.2}", c.get())), said_cores.map(|c| format!("{c:.2}")));
            assert!(["none: ", "not read: "].iter().any(|s| allowed.quota.starts_with(s)) || said_cores.is_some());
        }
    }
}
