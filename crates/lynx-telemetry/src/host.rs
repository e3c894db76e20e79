//! The host's telemetry from Linux's `/proc` and `/sys`: per-core utilisation (`/proc/stat`),
//! core frequency (cpufreq, else `/proc/cpuinfo`), memory in use (`/proc/meminfo`), the hottest
//! thermal zone or hwmon sensor, and package energy from RAPL (`/sys/class/powercap`), with power
//! derived from it. What the machine does not expose is listed with the reason.

use crate::sampler::TelemetrySource;
use lynx_schema::telemetry::Sample;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Shortest span per-core utilisation is computed over: `/proc/stat` counts in jiffies (10 ms at
/// the usual USER_HZ of 100), so over one 10 ms sample each core would read as 0 or 1.
const STAT_EVERY: Duration = Duration::from_millis(100);
/// How often memory in use is re-read: it changes slowly, and each read costs a `/proc` walk.
const MEMINFO_EVERY: Duration = Duration::from_secs(1);

/// How often `/proc/cpuinfo` is re-read when cpufreq is missing: the kernel builds that file for
/// every CPU on each read (it cost most of a host reading here), and where cpufreq is missing the
/// figure it reports is usually the nominal rate anyway.
const CPUINFO_EVERY: Duration = Duration::from_secs(1);

/// A `/proc` file kept open and re-read from the start into a reused buffer: no open and close
/// per reading.
struct ProcFile {
    file: Option<File>,
    text: String,
}

impl ProcFile {
    fn open(path: &str) -> ProcFile {
        ProcFile { file: File::open(path).ok(), text: String::new() }
    }

    fn read(&mut self) -> Option<&str> {
        let file = self.file.as_mut()?;
        self.text.clear();
        file.seek(SeekFrom::Start(0)).ok()?;
        file.read_to_string(&mut self.text).ok()?;
        Some(&self.text)
    }
}

/// Busy and total jiffies of one CPU line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
}

/// The per-core lines (`cpu0`, `cpu1`, …) of `/proc/stat`. Idle time is `idle + iowait`.
pub fn parse_proc_stat(text: &str) -> Vec<CpuTimes> {
    text.lines()
        .filter(|line| line.starts_with("cpu") && line.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|line| {
            let fields: Vec<u64> = line.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
            let total: u64 = fields.iter().take(8).sum();
            let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
            CpuTimes { busy: total - idle, total }
        })
        .collect()
}

/// Per-core utilisation between two `/proc/stat` readings.
pub fn utilisation(before: &[CpuTimes], after: &[CpuTimes]) -> Vec<f64> {
    before
        .iter()
        .zip(after)
        .map(|(b, a)| {
            let total = a.total.saturating_sub(b.total);
            if total == 0 {
                0.0
            } else {
                a.busy.saturating_sub(b.busy) as f64 / total as f64
            }
        })
        .collect()
}

/// Bytes in use from `/proc/meminfo`: MemTotal − MemAvailable.
pub fn parse_meminfo(text: &str) -> Option<u64> {
    Some(meminfo_field(text, "MemTotal:")?.saturating_sub(meminfo_field(text, "MemAvailable:")?))
}

/// Bytes of `/proc/meminfo`'s field `name` (given in kB).
pub fn meminfo_field(text: &str, name: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The host's memory available to a new allocation without swapping (`MemAvailable`), bytes.
pub fn available_memory_bytes() -> Option<u64> {
    meminfo_field(&std::fs::read_to_string("/proc/meminfo").ok()?, "MemAvailable:")
}

/// The `cpu MHz` of each processor in `/proc/cpuinfo`.
pub fn parse_cpuinfo_mhz(text: &str) -> Vec<f64> {
    text.lines().filter(|l| l.starts_with("cpu MHz")).filter_map(|l| l.split(':').nth(1)?.trim().parse().ok()).collect()
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

fn read_number(path: &Path) -> Option<f64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Files matching `dir/*prefix*/name` (or `dir/name*` when `name` ends in `*`).
fn files(dir: impl AsRef<Path>, entry_prefix: &str, name: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(entry_prefix)))
        .flat_map(|p| {
            let base = name.trim_end_matches('*');
            if name.ends_with('*') {
                std::fs::read_dir(&p)
                    .map(|d| {
                        d.filter_map(|e| e.ok().map(|e| e.path()))
                            .filter(|f| {
                                let n = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                                n.starts_with(base) && n.ends_with("_input")
                            })
                            .collect::<Vec<_>>()
                    })
                    .unwrap_or_default()
            } else {
                vec![p.join(name)]
            }
        })
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found
}

/// The RAPL package domains under `powercap` (`intel-rapl:N/energy_uj`, each with its counter's
/// range; sub-domains `intel-rapl:N:M` count within them, and AMD's are named so too), or why the
/// host's package energy cannot be measured: none there, or a counter this process may not read
/// (`energy_uj` is readable by root alone since the November 2020 fix for the PLATYPUS power
/// side channel, CVE-2020-8694: Linux 5.10, and the stable kernels it went back to), which
/// would otherwise leave power missing with no reason given.
fn rapl_domains(powercap: &Path) -> Result<Vec<(PathBuf, f64)>, String> {
    let domains: Vec<(PathBuf, f64)> = files(powercap, "intel-rapl:", "energy_uj")
        .into_iter()
        .filter(|p| {
            p.parent().and_then(|d| d.file_name()).is_some_and(|n| n.to_string_lossy().matches(':').count() == 1)
        })
        .map(|p| {
            let range = read_number(&p.with_file_name("max_energy_range_uj")).unwrap_or(f64::MAX);
            (p, range)
        })
        .collect();
    if domains.is_empty() {
        return Err(format!("no RAPL package domain in {}", powercap.display()));
    }
    for (path, _) in &domains {
        if let Err(e) = std::fs::read_to_string(path) {
            return Err(rapl_unreadable(path, &e));
        }
        if read_number(path).is_none() {
            return Err(format!("RAPL's energy counter {} holds no number", path.display()));
        }
    }
    Ok(domains)
}

/// Why the RAPL counter at `path` could not be read (`error`), and what would let lynx read it.
fn rapl_unreadable(path: &Path, error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "RAPL's energy counter {} is readable by root alone (since the fix for the PLATYPUS side \
             channel, CVE-2020-8694): run lynx as root, or make the counters readable (chmod a+r \
             /sys/class/powercap/intel-rapl:*/energy_uj), to measure the host's package energy",
            path.display()
        ),
        _ => format!("RAPL's energy counter {} cannot be read: {error}", path.display()),
    }
}

/// The host as a telemetry source.
pub struct HostSource {
    stat: ProcFile,
    meminfo: ProcFile,
    cpuinfo: ProcFile,
    /// The last `/proc/cpuinfo` frequencies and when they were read.
    cpuinfo_mhz: Option<(Instant, Vec<f64>)>,
    /// The last memory in use and when it was read.
    memory: Option<(Instant, Option<u64>)>,
    /// The `/proc/stat` reading utilisation is measured from, when it was taken, and the last
    /// utilisation computed.
    previous: Option<(Instant, Vec<CpuTimes>)>,
    cores: Vec<f64>,
    cpufreq: Vec<PathBuf>,
    temperatures: Vec<PathBuf>,
    /// RAPL package domains: (energy_uj file, max_energy_range_uj).
    rapl: Vec<(PathBuf, f64)>,
    /// Accumulated energy across counter wraps, and the last raw readings.
    energy_j: f64,
    last_raw_uj: Vec<f64>,
    last_energy: Option<(Instant, f64)>,
    unavailable: Vec<(String, String)>,
}

impl HostSource {
    pub fn new() -> HostSource {
        let cpufreq = files("/sys/devices/system/cpu", "cpu", "cpufreq/scaling_cur_freq");
        let mut temperatures = files("/sys/class/thermal", "thermal_zone", "temp");
        temperatures.extend(files("/sys/class/hwmon", "hwmon", "temp*"));
        let (rapl, no_rapl) = match rapl_domains(Path::new("/sys/class/powercap")) {
            Ok(domains) => (domains, None),
            Err(why) => (Vec::new(), Some(why)),
        };
        let mut unavailable = Vec::new();
        let mut missing = |field: &str, reason: &str| unavailable.push((field.to_owned(), reason.to_owned()));
        if cpufreq.is_empty() {
            missing(
                "sm_clock_mhz",
                "no cpufreq in /sys; the frequency is /proc/cpuinfo's, read once a second, which a VM may report \
                 as the nominal rate",
            );
        }
        if temperatures.is_empty() {
            missing("temperature_c", "no thermal zone or hwmon sensor in /sys");
        }
        if let Some(why) = &no_rapl {
            missing("power_w", why);
            missing("energy_j", why);
        }
        missing("mem_clock_mhz", "not exposed for host memory");
        missing("throttle", "Linux exposes no per-sample throttle state for CPUs");
        HostSource {
            stat: ProcFile::open("/proc/stat"),
            meminfo: ProcFile::open("/proc/meminfo"),
            cpuinfo: ProcFile::open("/proc/cpuinfo"),
            cpuinfo_mhz: None,
            memory: None,
            previous: None,
            cores: Vec::new(),
            cpufreq,
            temperatures,
            last_raw_uj: vec![f64::NAN; rapl.len()],
            rapl,
            energy_j: 0.0,
            last_energy: None,
            unavailable,
        }
    }

    /// Package energy in joules, accumulated across counter wraps; the power since the last call.
    fn energy(&mut self) -> (Option<f64>, Option<f64>) {
        if self.rapl.is_empty() {
            return (None, None);
        }
        for (i, (path, range)) in self.rapl.iter().enumerate() {
            let Some(raw) = read_number(path) else { return (None, None) };
            let last = self.last_raw_uj[i];
            if last.is_finite() {
                let delta = if raw >= last { raw - last } else { raw + range - last };
                self.energy_j += delta / 1e6;
            }
            self.last_raw_uj[i] = raw;
        }
        let now = Instant::now();
        let power = self.last_energy.and_then(|(at, joules)| {
            let dt = now.duration_since(at).as_secs_f64();
            (dt > 0.0).then(|| (self.energy_j - joules) / dt)
        });
        self.last_energy = Some((now, self.energy_j));
        (Some(self.energy_j), power)
    }
}

impl Default for HostSource {
    fn default() -> Self {
        HostSource::new()
    }
}

impl TelemetrySource for HostSource {
    fn name(&self) -> String {
        "host".to_owned()
    }

    fn unavailable(&self) -> Vec<(String, String)> {
        self.unavailable.clone()
    }

    fn sample(&mut self) -> Sample {
        let due = |last: Option<Instant>, every: Duration| last.is_none_or(|at| at.elapsed() >= every);
        if due(self.previous.as_ref().map(|(at, _)| *at), STAT_EVERY) {
            let times = self.stat.read().map(parse_proc_stat).unwrap_or_default();
            if let Some((_, before)) = &self.previous {
                self.cores = if before.len() == times.len() { utilisation(before, &times) } else { Vec::new() };
            }
            self.previous = Some((Instant::now(), times));
        }
        let cores = self.cores.clone();
        if due(self.memory.map(|(at, _)| at), MEMINFO_EVERY) {
            self.memory = Some((Instant::now(), self.meminfo.read().and_then(parse_meminfo)));
        }
        let core_mhz: Vec<f64> = if self.cpufreq.is_empty() {
            match &self.cpuinfo_mhz {
                Some((at, mhz)) if at.elapsed() < CPUINFO_EVERY => mhz.clone(),
                _ => {
                    let mhz = self.cpuinfo.read().map(parse_cpuinfo_mhz).unwrap_or_default();
                    self.cpuinfo_mhz = Some((Instant::now(), mhz.clone()));
                    mhz
                }
            }
        } else {
            self.cpufreq.iter().filter_map(|p| read_number(p)).map(|khz| khz / 1000.0).collect()
        };
        let temperature =
            self.temperatures.iter().filter_map(|p| read_number(p)).map(|milli| milli / 1000.0).reduce(f64::max);
        let (energy_j, power_w) = self.energy();
        Sample {
            t_s: 0.0,
            // The sampler times the reading.
            read_s: None,
            power_w,
            energy_j,
            sm_clock_mhz: mean(&core_mhz),
            core_mhz,
            mem_clock_mhz: None,
            temperature_c: temperature,
            utilisation: (!cores.is_empty()).then(|| cores.iter().sum::<f64>() / cores.len() as f64),
            memory_used_bytes: self.memory.and_then(|(_, bytes)| bytes),
            core_utilisation: cores,
            throttle: Vec::new(),
            slow_calls: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 35 5 0 0 0 0 0\nintr 1\n";

    #[test]
    fn proc_stat_gives_per_core_utilisation() {
        let before = parse_proc_stat(STAT);
        assert_eq!(before, [CpuTimes { busy: 10, total: 50 }, CpuTimes { busy: 10, total: 50 }]);
        let after = parse_proc_stat("cpu0 35 0 5 60 0 0 0 0 0 0\ncpu1 5 0 5 85 5 0 0 0 0 0\n");
        // cpu0: 30 busy of 50 jiffies; cpu1: 0 of 50.
        assert_eq!(utilisation(&before, &after), [0.6, 0.0]);
    }

    #[test]
    fn meminfo_and_cpuinfo_parse() {
        let meminfo = "MemTotal:       1000 kB\nMemFree:         100 kB\nMemAvailable:    400 kB\n";
        assert_eq!(meminfo_field(meminfo, "MemAvailable:"), Some(400 * 1024));
        assert_eq!(parse_meminfo(meminfo), Some(600 * 1024));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
        let cpuinfo = "processor : 0\ncpu MHz\t\t: 2000.0\nprocessor : 1\ncpu MHz\t\t: 3000.0\n";
        assert_eq!(parse_cpuinfo_mhz(cpuinfo), [2000.0, 3000.0]);
        assert_eq!(mean(&parse_cpuinfo_mhz(cpuinfo)), Some(2500.0));
    }

    /// Package domains are found (sub-domains and other zones left out), each with its counter's
    /// range; where there are none, or a counter cannot be read, the reason names the file and
    /// what would let lynx read it.
    #[test]
    fn rapl_domains_are_found_or_their_absence_explained() {
        let root = tempfile::tempdir().unwrap();
        let powercap = root.path();
        assert_eq!(rapl_domains(powercap).unwrap_err(), format!("no RAPL package domain in {}", powercap.display()));
        for (zone, energy) in [("intel-rapl:0", "1000"), ("intel-rapl:0:0", "5"), ("intel-rapl-mmio:0", "7")] {
            std::fs::create_dir(powercap.join(zone)).unwrap();
            std::fs::write(powercap.join(zone).join("energy_uj"), energy).unwrap();
        }
        std::fs::write(powercap.join("intel-rapl:0").join("max_energy_range_uj"), "262143328850").unwrap();
        let domains = rapl_domains(powercap).unwrap();
        assert_eq!(domains, [(powercap.join("intel-rapl:0/energy_uj"), 262143328850.0)]);
        // A second package whose counter is not a file that reads (a folder stands in for one
        // this process may not read: these tests may run as root, who reads any file).
        std::fs::create_dir_all(powercap.join("intel-rapl:1/energy_uj")).unwrap();
        let why = rapl_domains(powercap).unwrap_err();
        let counter = powercap.join("intel-rapl:1/energy_uj");
        assert!(why.starts_with(&format!("RAPL's energy counter {} cannot be read: ", counter.display())), "{why}");
        let denied = rapl_unreadable(&counter, &std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        assert!(denied.contains("is readable by root alone") && denied.contains("CVE-2020-8694"), "{denied}");
        std::fs::remove_dir(&counter).unwrap();
        std::fs::write(&counter, "not a number").unwrap();
        assert!(rapl_domains(powercap).unwrap_err().ends_with("holds no number"));
    }

    #[test]
    fn the_host_samples_what_it_has_and_names_what_it_lacks() {
        let mut host = HostSource::new();
        let first = host.sample();
        std::thread::sleep(STAT_EVERY);
        let second = host.sample();
        assert!(second.memory_used_bytes.is_some_and(|b| b > 0));
        assert!(first.core_utilisation.is_empty(), "utilisation needs two readings");
        assert!(!second.core_utilisation.is_empty());
        assert!(second.core_utilisation.iter().all(|u| (0.0..=1.0).contains(u)));
        assert!(second.core_mhz.is_empty() || second.core_mhz.len() == second.core_utilisation.len());
        assert_eq!(second.sm_clock_mhz, mean(&second.core_mhz));
        // Every reading is either there or listed as unavailable with a reason.
        let missing = host.unavailable();
        let named = |field: &str| missing.iter().any(|(f, reason)| f == field && !reason.is_empty());
        assert!(second.temperature_c.is_some() || named("temperature_c"));
        assert!(second.energy_j.is_some() || named("energy_j"));
        assert!(named("mem_clock_mhz"));
    }
}
