//! What the host lets this process use of its CPUs: the CPUs it may run on (its affinity) and the
//! CPU time its control groups allow it (a CFS quota, as a container's CPU limit sets), and how
//! long that quota has held it off its CPUs (throttled).
//!
//! A quota throttles the whole cgroup for the rest of a period (100 ms by default) once its
//! processes have used their share of it: a step in flight then waits, which is the kind of
//! stall a launch-bound GPU step or a CPU cell shows as a slow step. The kernel counts it in the
//! cgroup's `cpu.stat` (cgroup v2: `nr_throttled`, `throttled_usec`; v1: `nr_throttled`,
//! `throttled_time` in ns), the quota is `cpu.max` (v2: `QUOTA PERIOD` or `max PERIOD`) or
//! `cpu.cfs_quota_us` over `cpu.cfs_period_us` (v1, −1 for none), and the one that binds may be
//! set on any cgroup above the process's (Kubernetes sets the pod's and the container's), so each
//! is read from the process's cgroup up to its hierarchy's root.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where the cgroup hierarchies are mounted on Linux.
const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// The folders of this process's cgroup for `controller` ("cpu", "memory"), innermost first: the
/// folder /proc/self/cgroup names and each above it to the hierarchy's root (cgroup v1's
/// `ROOT/controller` where a v1 hierarchy holds the controller, else v2's `ROOT`, or `ROOT/unified`
/// beside v1 ones). Where the folder named does not exist (a container that sees its own cgroup at
/// the root without a cgroup namespace), the root alone. Empty where /proc/self/cgroup says
/// nothing of the controller or cannot be read.
pub fn folders(controller: &str) -> Vec<PathBuf> {
    let Ok(cgroup) = std::fs::read_to_string("/proc/self/cgroup") else { return Vec::new() };
    folders_in(&cgroup, Path::new(CGROUP_ROOT), controller)
}

/// [`folders`] from the text of a /proc/PID/cgroup file, under the mount root `root`.
pub fn folders_in(cgroup: &str, root: &Path, controller: &str) -> Vec<PathBuf> {
    // hierarchy-ID:controller-list:path; v2's unified hierarchy is `0::path`.
    let entries: Vec<(&str, &str)> = cgroup
        .lines()
        .filter_map(|line| {
            let (_, rest) = line.split_once(':')?;
            rest.split_once(':')
        })
        .collect();
    let v1 = entries.iter().find(|(controllers, _)| controllers.split(',').any(|c| c == controller));
    let (mount, path) = match v1 {
        Some((controllers, path)) => {
            // Mounted at ROOT/cpu,cpuacct with a ROOT/cpu link to it, usually; either will do.
            let mount = [root.join(controller), root.join(controllers)].into_iter().find(|m| m.is_dir());
            let Some(mount) = mount else { return Vec::new() };
            (mount, *path)
        }
        None => {
            let Some((_, path)) = entries.iter().find(|(controllers, _)| controllers.is_empty()) else {
                return Vec::new();
            };
            // Beside v1 hierarchies (a hybrid host) the unified one is at ROOT/unified.
            let unified = root.join("unified");
            (if unified.join("cgroup.controllers").is_file() { unified } else { root.to_path_buf() }, *path)
        }
    };
    let named = mount.join(path.trim().trim_start_matches('/'));
    if !named.is_dir() || !named.starts_with(&mount) {
        return vec![mount];
    }
    named.ancestors().take_while(|folder| folder.starts_with(&mount)).map(Path::to_path_buf).collect()
}

/// The CFS quota that binds this process, where one does.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuQuota {
    /// The least quota over its period among the folders read, in cores; `None` where none sets
    /// one.
    pub cores: Option<f64>,
    /// Where it was read (the file that sets the least), that none sets one, or why none could be
    /// read: for the result's reader.
    pub said: String,
}

/// The CFS quota of this process's cgroup and those above it ([`folders`] of "cpu").
pub fn cpu_quota() -> CpuQuota {
    quota_of(&folders("cpu"))
}

/// [`cpu_quota`] over `folders`, innermost first.
pub fn quota_of(folders: &[PathBuf]) -> CpuQuota {
    let mut read = Vec::new();
    for folder in folders {
        let v2 = folder.join("cpu.max");
        if let Ok(text) = std::fs::read_to_string(&v2) {
            read.push((quota_v2(&text), v2));
            continue;
        }
        let v1 = folder.join("cpu.cfs_quota_us");
        let quota = std::fs::read_to_string(&v1).ok();
        let period = std::fs::read_to_string(folder.join("cpu.cfs_period_us")).ok();
        if let (Some(quota), Some(period)) = (quota, period) {
            read.push((quota_v1(&quota, &period), v1));
        }
    }
    let Some((_, innermost)) = read.first() else {
        // A hierarchy's root cgroup has no quota file (there is nothing above it to share).
        return CpuQuota {
            cores: None,
            said: match folders.first() {
                Some(folder) => format!("none: no CPU quota file in {} or above it", folder.display()),
                None => "not read: /proc/self/cgroup names no cgroup with the cpu controller".to_owned(),
            },
        };
    };
    let least = read
        .iter()
        .filter_map(|(cores, file)| Some((cores.as_ref().ok()?.as_ref()?, file)))
        .min_by(|a, b| a.0.total_cmp(b.0));
    match least {
        Some((cores, file)) => CpuQuota { cores: Some(*cores), said: format!("{cores:.2} cores: {}", file.display()) },
        None => match read.iter().find_map(|(cores, file)| cores.as_ref().err().map(|e| (e, file))) {
            Some((why, file)) => CpuQuota { cores: None, said: format!("not read: {}: {why}", file.display()) },
            None => CpuQuota {
                cores: None,
                said: match read.len() - 1 {
                    0 => format!("none: {} sets no quota", innermost.display()),
                    above => format!("none: {} sets no quota, nor do the {above} above it", innermost.display()),
                },
            },
        },
    }
}

/// Cores from cgroup v2's `cpu.max` (`QUOTA PERIOD` in µs, or `max PERIOD`): `None` for `max`.
fn quota_v2(text: &str) -> Result<Option<f64>, String> {
    let mut fields = text.split_whitespace();
    let (quota, period) = (fields.next(), fields.next().unwrap_or("100000"));
    match quota {
        Some("max") => Ok(None),
        Some(quota) => cores(quota, period),
        None => Err("empty".to_owned()),
    }
}

/// Cores from cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us`: `None` for −1.
fn quota_v1(quota: &str, period: &str) -> Result<Option<f64>, String> {
    if quota.trim().starts_with('-') {
        return Ok(None);
    }
    cores(quota.trim(), period.trim())
}

fn cores(quota: &str, period: &str) -> Result<Option<f64>, String> {
    let parsed = |v: &str| v.parse::<u64>().ok().filter(|&v| v > 0);
    match (parsed(quota), parsed(period)) {
        (Some(quota), Some(period)) => Ok(Some(quota as f64 / period as f64)),
        _ => Err(format!("not a quota and a period: {quota} {period}")),
    }
}

/// How long, and in how many periods, each cgroup over this process had been throttled by its
/// quota when read: a snapshot, to set a later one against ([`Throttled::since`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Throttled {
    counts: Vec<(PathBuf, ThrottleCount)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct ThrottleCount {
    periods: u64,
    seconds: f64,
}

impl Throttled {
    /// Now, for this process's cgroup and those above it; `None` where none has a `cpu.stat`
    /// that counts throttling (not Linux, no cpu controller, a kernel before CFS bandwidth).
    pub fn now() -> Option<Throttled> {
        Throttled::of(&folders("cpu"))
    }

    /// [`Throttled::now`] over `folders`.
    pub fn of(folders: &[PathBuf]) -> Option<Throttled> {
        let counts: Vec<(PathBuf, ThrottleCount)> = folders
            .iter()
            .filter_map(|folder| {
                let stat = std::fs::read_to_string(folder.join("cpu.stat")).ok()?;
                Some((folder.clone(), throttle_count(&stat)?))
            })
            .collect();
        (!counts.is_empty()).then_some(Throttled { counts })
    }

    /// The seconds a quota held the process's cgroup (or one above it) off its CPUs since
    /// `earlier`: the most any one cgroup counted (each counts the time it was throttled itself,
    /// so nested ones would count some twice); 0 where no period was throttled.
    pub fn since(&self, earlier: &Throttled) -> f64 {
        self.counts
            .iter()
            .filter_map(|(folder, now)| {
                let (_, then) = earlier.counts.iter().find(|(f, _)| f == folder)?;
                (now.periods > then.periods).then(|| (now.seconds - then.seconds).max(0.0))
            })
            .fold(0.0, f64::max)
    }
}

/// Throttled periods and seconds from a `cpu.stat`: v2's `throttled_usec` or v1's
/// `throttled_time` (ns); `None` where it counts neither.
fn throttle_count(stat: &str) -> Option<ThrottleCount> {
    let field = |name: &str| {
        stat.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
    };
    let seconds = match (field("throttled_usec"), field("throttled_time")) {
        (Some(us), _) => us as f64 / 1e6,
        (None, Some(ns)) => ns as f64 / 1e9,
        (None, None) => return None,
    };
    Some(ThrottleCount { periods: field("nr_throttled")?, seconds })
}

/// The CPUs this process may run on, as Linux lists them ("0-15", "0,2,4-7"), and how many:
/// /proc/self/status's `Cpus_allowed_list`; `None` where it does not say.
pub fn allowed_cpus() -> Option<(String, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let list = status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:"))?.trim();
    Some((list.to_owned(), count_cpus(list)?))
}

/// How many CPUs a Linux CPU list names ("0-3,8" is five).
pub fn count_cpus(list: &str) -> Option<u64> {
    Some(cpus_in(list)?.len() as u64)
}

/// Past the most CPUs a Linux kernel numbers (its `NR_CPUS` is at most 8192): a list naming a
/// CPU at or above this is not one Linux wrote.
pub const LINUX_MOST_CPUS: u64 = 1 << 16;

/// The CPUs a Linux CPU list names ("0-2,8" is 0, 1, 2, 8); `None` where it is not a list, or
/// names a CPU past any Linux numbers.
pub fn cpus_in(list: &str) -> Option<BTreeSet<u64>> {
    cpus_below(list, LINUX_MOST_CPUS).ok()
}

/// The CPUs a Linux CPU list names, every one below `most`; where not, the CPU it names at or
/// above `most`, or `None` where it is not a list. Read range by range, so that a huge range is
/// refused before it is counted out.
pub fn cpus_below(list: &str, most: u64) -> Result<BTreeSet<u64>, Option<u64>> {
    let mut cpus = BTreeSet::new();
    for part in list.split(',') {
        let part = part.trim();
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let (low, high) = (low.parse::<u64>().map_err(|_| None)?, high.parse::<u64>().map_err(|_| None)?);
        if high < low {
            return Err(None);
        }
        if high >= most {
            return Err(Some(high));
        }
        cpus.extend(low..=high);
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn cpu_lists_are_counted_as_linux_writes_them() {
        assert_eq!(count_cpus("0-1"), Some(2));
        assert_eq!(count_cpus("0,2,4-7"), Some(6));
        assert_eq!(count_cpus("5"), Some(1));
        assert_eq!(count_cpus("3-1"), None);
        assert_eq!(cpus_in("8,0-2"), Some(BTreeSet::from([0, 1, 2, 8])));
        assert_eq!(cpus_in(" 0-1\n"), Some(BTreeSet::from([0, 1])));
        // A range no kernel writes is refused before it is counted out.
        assert_eq!(cpus_in("0-18446744073709551615"), None);
        assert_eq!(cpus_below("0-3,1023", 1024).map(|cpus| cpus.len()), Ok(5));
        assert_eq!(cpus_below("0-3,1020-1030", 1024), Err(Some(1030)));
        assert_eq!(cpus_below("0-x", 1024), Err(None));
        assert_eq!(count_cpus(""), None);
        if cfg!(target_os = "linux") {
            let (list, n) = allowed_cpus().expect("Linux says");
            assert!(n >= 1 && count_cpus(&list) == Some(n), "{list}");
        }
    }

    /// cgroup v1: the cpu controller's own hierarchy, the process's folder and each above it, and
    /// the least quota among them binds (a pod's 2 cores over its container's unlimited one).
    #[test]
    fn a_v1_hierarchy_is_read_from_the_process_folder_up() {
        let root = tempfile::tempdir().unwrap();
        let cpu = root.path().join("cpu,cpuacct");
        let pod = cpu.join("kubepods/pod1");
        let container = pod.join("c1");
        write(&cpu.join("cpu.cfs_quota_us"), "-1\n");
        write(&cpu.join("cpu.cfs_period_us"), "100000\n");
        write(&pod.join("cpu.cfs_quota_us"), "200000\n");
        write(&pod.join("cpu.cfs_period_us"), "100000\n");
        write(&container.join("cpu.cfs_quota_us"), "-1\n");
        write(&container.join("cpu.cfs_period_us"), "100000\n");
        let cgroup = "12:memory:/kubepods/pod1/c1\n4:cpu,cpuacct:/kubepods/pod1/c1\n0::/\n";
        let found = folders_in(cgroup, root.path(), "cpu");
        assert_eq!(found, [container.clone(), pod.clone(), cpu.join("kubepods"), cpu.clone()]);
        let quota = quota_of(&found);
        assert_eq!(quota.cores, Some(2.0), "{quota:?}");
        assert!(quota.said.starts_with("2.00 cores: ") && quota.said.ends_with("pod1/cpu.cfs_quota_us"), "{quota:?}");
        // No quota anywhere: said so, naming where it looked.
        write(&pod.join("cpu.cfs_quota_us"), "-1\n");
        let none = quota_of(&found);
        assert_eq!(none.cores, None);
        // (The folder between the pod and the root holds no quota file of its own.)
        assert!(
            none.said.starts_with("none: ") && none.said.ends_with("sets no quota, nor do the 2 above it"),
            "{none:?}"
        );
        let alone = quota_of(&found[..1]);
        assert!(
            alone.said.starts_with("none: ") && alone.said.ends_with("c1/cpu.cfs_quota_us sets no quota"),
            "{alone:?}"
        );
    }

    /// cgroup v2: `0::path` under the root, `cpu.max` in each folder; a container that sees its
    /// own cgroup at the root (the named path absent) reads the root alone.
    #[test]
    fn a_v2_hierarchy_is_read_from_its_cpu_max() {
        let root = tempfile::tempdir().unwrap();
        write(&root.path().join("cgroup.controllers"), "cpu memory\n");
        let job = root.path().join("system.slice/lynx.scope");
        write(&root.path().join("system.slice/cpu.max"), "max 100000\n");
        write(&job.join("cpu.max"), "150000 100000\n");
        let found = folders_in("0::/system.slice/lynx.scope\n", root.path(), "cpu");
        assert_eq!(found, [job.clone(), root.path().join("system.slice"), root.path().to_path_buf()]);
        assert_eq!(quota_of(&found).cores, Some(1.5));
        let inside = folders_in("0::/elsewhere/pod\n", root.path(), "cpu");
        assert_eq!(inside, [root.path().to_path_buf()]);
        let quota = quota_of(&inside);
        assert_eq!(quota.cores, None);
        assert!(
            quota.said.starts_with("none: no CPU quota file in") && quota.said.ends_with("or above it"),
            "{quota:?}"
        );
        // Nothing about the controller at all.
        assert!(folders_in("garbage", root.path(), "cpu").is_empty());
        assert_eq!(quota_of(&[]).said, "not read: /proc/self/cgroup names no cgroup with the cpu controller");
        // A file that says nothing a quota can be: why, with its path.
        write(&job.join("cpu.max"), "lots 100000\n");
        let bad = quota_of(&found[..1]);
        assert!(bad.cores.is_none() && bad.said.contains("not a quota and a period: lots 100000"), "{bad:?}");
    }

    /// Throttled time is counted from the periods a quota throttled: v2 in µs, v1 in ns; the most
    /// any one folder counted, and none where no new period was throttled.
    #[test]
    fn throttling_is_the_most_any_folder_counted_since() {
        let root = tempfile::tempdir().unwrap();
        let (inner, outer) = (root.path().join("a/b"), root.path().join("a"));
        write(&inner.join("cpu.stat"), "usage_usec 5\nnr_periods 10\nnr_throttled 2\nthrottled_usec 30000\n");
        write(&outer.join("cpu.stat"), "nr_periods 10\nnr_throttled 1\nthrottled_time 5000000\n");
        let folders = [inner.clone(), outer.clone()];
        let before = Throttled::of(&folders).unwrap();
        assert_eq!(before.since(&before), 0.0);
        write(&inner.join("cpu.stat"), "usage_usec 9\nnr_periods 12\nnr_throttled 4\nthrottled_usec 75000\n");
        write(&outer.join("cpu.stat"), "nr_periods 12\nnr_throttled 2\nthrottled_time 15000000\n");
        let after = Throttled::of(&folders).unwrap();
        assert!((after.since(&before) - 0.045).abs() < 1e-12, "{after:?}");
        // A cpu.stat without throttling counts (a kernel without CFS bandwidth) is no figure.
        write(&inner.join("cpu.stat"), "usage_usec 9\n");
        assert!(Throttled::of(&folders[..1]).is_none());
    }
}
