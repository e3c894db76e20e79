//! `lynx run --cpus`: the CPUs a run's processes are bound to. The CPU issuing a GPU's kernels
//! pays for every launch and copy that crosses to another NUMA node, so a lab may bind a run to
//! the CPUs local to its GPU (`gpu-local`) or to a list of its own; lynx binds nothing unless
//! asked, and records which (`harness.cpu_binding`).
//!
//! A process cannot bind itself in place: libtorch's OpenMP runtime sized its thread pool from
//! the CPUs the process could run on when it was loaded, before `main`, and keeps that size. So
//! `lynx run` binds its thread and starts itself again ([`bind_self`]): the new process, its
//! supervisor and every worker it starts run on those CPUs from their first instruction, with a
//! thread pool sized for them, as under `taskset` or `numactl`.
//!
//! Memory follows the CPUs without a binding of its own: under the kernel's default policy each
//! page is placed on the NUMA node of the CPU that first touches it, so a run bound to a node's
//! CPUs allocates there (elsewhere only once that node is full, where `numactl --membind` would
//! fail instead). A process started under another policy (`numactl --interleave`) keeps it: the
//! result records the policy lynx ran under ([`memory_policy`], `host.memory_policy`).

use crate::devices::Device;
use crate::RunError;
use lynx_schema::device::DeviceName;
use lynx_schema::result::CpuBinding;
use lynx_schema::value::Reported;
use lynx_telemetry::cgroup::{allowed_cpus, cpus_below, cpus_in};
use std::collections::BTreeSet;

/// Set in the process [`bind_self`] starts again, to the CPUs it bound: one that still runs
/// elsewhere says so instead of starting itself once more.
pub const REBOUND_VAR: &str = "LYNX_CPUS_BOUND";

/// The most CPUs a binding may name: a CPU numbered this or above is refused (glibc's
/// `cpu_set_t`, which `sched_setaffinity` takes here).
const MOST_CPUS: u64 = libc::CPU_SETSIZE as u64;

/// What `--cpus` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuChoice {
    /// The CPUs local to the run's GPU (its `local_cpulist` in sysfs) that the host allows.
    GpuLocal,
    /// These CPUs, as a Linux list names them; every one must be allowed.
    List(BTreeSet<u64>),
}

impl std::str::FromStr for CpuChoice {
    type Err = String;

    /// `gpu-local`, or a Linux CPU list (`0-15`, `0,2,4-7`) of CPUs numbered below 1024.
    fn from_str(text: &str) -> Result<CpuChoice, String> {
        if text == CpuBinding::GPU_LOCAL {
            return Ok(CpuChoice::GpuLocal);
        }
        match cpus_below(text, MOST_CPUS) {
            Ok(cpus) => Ok(CpuChoice::List(cpus)),
            Err(Some(high)) => Err(format!("{text:?} names CPU {high}: lynx binds CPUs numbered below {MOST_CPUS}")),
            Err(None) => Err(format!("{text:?} is neither gpu-local nor a CPU list (0-15, 0,2,4-7)")),
        }
    }
}

/// `cpus` as Linux lists them, each run of consecutive CPUs as a range: "0-3,8,10-11".
pub fn cpu_list(cpus: &BTreeSet<u64>) -> String {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for &cpu in cpus {
        match runs.last_mut() {
            Some((_, high)) if *high + 1 == cpu => *high = cpu,
            _ => runs.push((cpu, cpu)),
        }
    }
    let words: Vec<String> =
        runs.iter().map(|&(low, high)| if low == high { low.to_string() } else { format!("{low}-{high}") }).collect();
    words.join(",")
}

/// The CPUs this process may run on, as a list and a set; why not where Linux does not say.
fn allowed_now() -> Result<(String, BTreeSet<u64>), RunError> {
    allowed_cpus()
        .and_then(|(list, _)| Some((list.clone(), cpus_in(&list)?)))
        .ok_or_else(|| RunError::Config("--cpus: /proc/self/status lists no CPUs this process may run on".to_owned()))
}

/// The binding `choice` makes for a run on `device`, against the CPUs this process may run on;
/// why not where it cannot be made (a CPU device asked for its GPU's CPUs, a GPU whose local CPUs
/// sysfs does not name, CPUs the host does not allow).
pub fn resolve(choice: Option<&CpuChoice>, device: &Device) -> Result<CpuBinding, RunError> {
    let Some(choice) = choice else {
        return Ok(CpuBinding::none());
    };
    let (allowed_list, allowed) = allowed_now()?;
    resolve_against(choice, device.record.device, device.record.host_link.as_ref(), (&allowed_list, &allowed))
}

/// [`resolve`] against the CPUs `allowed` (as listed, and as a set), for the GPU whose host link
/// is `link`.
fn resolve_against(
    choice: &CpuChoice,
    device: DeviceName,
    link: Option<&Reported<lynx_schema::result::HostLink>>,
    (allowed_list, allowed): (&str, &BTreeSet<u64>),
) -> Result<CpuBinding, RunError> {
    let refuse = |why: String| RunError::Config(format!("--cpus: {why}"));
    match choice {
        CpuChoice::GpuLocal => {
            if device == DeviceName::Cpu {
                return Err(refuse(
                    "gpu-local binds a run to its GPU's CPUs, and the cpu device has no GPU; give a CPU list"
                        .to_owned(),
                ));
            }
            let local = match link {
                Some(Reported::Known(link)) => link.local_cpus.as_deref().and_then(|list| Some((list, cpus_in(list)?))),
                Some(Reported::Unavailable { unavailable }) => {
                    return Err(refuse(format!("where {device} sits is unknown ({unavailable}); give a CPU list")))
                }
                None => None,
            };
            let Some((local_list, local)) = local else {
                return Err(refuse(format!("sysfs names no CPUs local to {device}; give a CPU list")));
            };
            let cpus: BTreeSet<u64> = local.intersection(allowed).copied().collect();
            if cpus.is_empty() {
                return Err(refuse(format!(
                    "none of the CPUs local to {device} ({local_list}) is one this process may run on ({allowed_list})"
                )));
            }
            Ok(CpuBinding { asked: CpuBinding::GPU_LOCAL.to_owned(), cpus: Some(cpu_list(&cpus)) })
        }
        CpuChoice::List(cpus) => {
            let outside: BTreeSet<u64> = cpus.difference(allowed).copied().collect();
            if !outside.is_empty() {
                return Err(refuse(format!(
                    "CPUs {} are not ones this process may run on ({allowed_list})",
                    cpu_list(&outside)
                )));
            }
            Ok(CpuBinding { asked: CpuBinding::LIST.to_owned(), cpus: Some(cpu_list(cpus)) })
        }
    }
}

/// What [`bind_self`] did where it returned.
#[derive(Debug, PartialEq, Eq)]
pub enum Bound {
    /// Nothing was asked.
    Unbound,
    /// This process already runs on exactly the binding's CPUs.
    Already,
}

/// Hold this process to `binding`: where it names CPUs and the process may run on others too,
/// bind it to them and start it again with the same arguments (this call then never returns);
/// `say` hears that first. A binding naming CPUs this process may not run on (a resume on
/// another host, or in a narrower cgroup) is refused, and so is a process started again that
/// still runs elsewhere.
pub fn bind_self(binding: &CpuBinding, say: &mut dyn FnMut(String)) -> Result<Bound, RunError> {
    let Some(list) = &binding.cpus else {
        return Ok(Bound::Unbound);
    };
    let refuse = |why: String| RunError::Config(format!("the run is bound to CPUs {list}: {why}"));
    let want = cpus_below(list, MOST_CPUS).map_err(|_| refuse("not a CPU list lynx can bind".to_owned()))?;
    let (allowed_list, allowed) = allowed_now()?;
    if allowed == want {
        return Ok(Bound::Already);
    }
    if !want.is_subset(&allowed) {
        let outside = cpu_list(&want.difference(&allowed).copied().collect());
        return Err(refuse(format!("CPUs {outside} are not ones this process may run on ({allowed_list})")));
    }
    if std::env::var_os(REBOUND_VAR).is_some() {
        return Err(refuse(format!(
            "lynx bound itself to them and started again, and still runs on {allowed_list} (a cgroup's cpuset?)"
        )));
    }
    set_affinity(&want).map_err(|e| refuse(format!("sched_setaffinity: {e}")))?;
    say(format!("bound to CPUs {list}; starting again on them, so that libtorch's threads are sized for them"));
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    let exe = std::env::current_exe().map_err(|source| RunError::Io { path: "/proc/self/exe".into(), source })?;
    use std::os::unix::process::CommandExt;
    let source = std::process::Command::new(&exe).args(std::env::args_os().skip(1)).env(REBOUND_VAR, list).exec();
    Err(RunError::Io { path: exe, source })
}

/// Whether this process runs where `binding` holds it: a worker of a bound run runs on exactly
/// its CPUs (its supervisor bound itself before starting it); why not where it runs elsewhere.
pub fn holds(binding: &CpuBinding) -> Result<(), RunError> {
    let Some(list) = &binding.cpus else {
        return Ok(());
    };
    let (allowed_list, allowed) = allowed_now()?;
    match cpus_below(list, MOST_CPUS) {
        Ok(want) if want == allowed => Ok(()),
        _ => Err(RunError::Config(format!(
            "the run is bound to CPUs {list}, and this process runs on {allowed_list}: its cells would be measured \
             elsewhere (start it with `lynx run --resume`, which binds itself)"
        ))),
    }
}

/// The memory policy this process allocates under and the memory nodes its cpuset allows, in
/// words: "local (the default) on memory nodes 0-1", "interleave over nodes 0-1 on memory nodes
/// 0-1"; why not where the kernel does not say. The policy is the calling thread's
/// (`get_mempolicy`), which a process's threads inherit from the one that started them, and
/// which `numactl` sets before it starts lynx.
pub fn memory_policy() -> Reported<String> {
    let status = match std::fs::read_to_string("/proc/self/status") {
        Ok(status) => status,
        Err(error) => return Reported::unavailable(format!("cannot read /proc/self/status: {error}")),
    };
    let Some(mems) = status.lines().find_map(|line| line.strip_prefix("Mems_allowed_list:")).map(str::trim) else {
        return Reported::unavailable("/proc/self/status names no Mems_allowed_list");
    };
    match thread_memory_policy() {
        Ok((mode, nodes)) => Reported::Known(format!("{} on memory nodes {mems}", policy_words(mode, &nodes))),
        Err(error) => Reported::unavailable(format!("get_mempolicy: {error}")),
    }
}

/// A memory policy's words ([`memory_policy`]) with their node lists taken out: the same policy
/// on hosts of other NUMA layouts reads the same ("interleave over nodes on memory nodes", as
/// `numactl --interleave=all` sets it on two nodes or eight), another one does not.
pub fn policy_kind(words: &str) -> String {
    let mut kept = Vec::new();
    let mut tokens = words.split_whitespace().peekable();
    while let Some(token) = tokens.next() {
        if token == "node" || token == "nodes" {
            kept.push("nodes");
            tokens.next_if(|list| list.starts_with(|c: char| c.is_ascii_digit()));
        } else {
            kept.push(token);
        }
    }
    kept.join(" ")
}

/// `mode` and `nodes` of a memory policy (linux/mempolicy.h) in words.
fn policy_words(mode: i32, nodes: &BTreeSet<u64>) -> String {
    const MPOL_F_NUMA_BALANCING: i32 = 1 << 13;
    const MPOL_F_RELATIVE_NODES: i32 = 1 << 14;
    const MPOL_F_STATIC_NODES: i32 = 1 << 15;
    let flags = MPOL_F_NUMA_BALANCING | MPOL_F_RELATIVE_NODES | MPOL_F_STATIC_NODES;
    let list = cpu_list(nodes);
    let of = |one: &str, many: &str| if nodes.len() == 1 { format!("{one} {list}") } else { format!("{many} {list}") };
    let mut words = match mode & !flags {
        0 => "local (the default)".to_owned(),
        1 if nodes.is_empty() => "local (preferred, no node named)".to_owned(),
        1 => of("preferred node", "preferred nodes"),
        2 => format!("bind to {}", of("node", "nodes")),
        3 => format!("interleave over {}", of("node", "nodes")),
        4 => "local".to_owned(),
        5 => of("preferred node", "preferred nodes"),
        6 => format!("weighted interleave over {}", of("node", "nodes")),
        other => format!("policy {other} over {}", of("node", "nodes")),
    };
    for (flag, name) in [
        (MPOL_F_STATIC_NODES, "static nodes"),
        (MPOL_F_RELATIVE_NODES, "relative nodes"),
        (MPOL_F_NUMA_BALANCING, "NUMA balancing"),
    ] {
        if mode & flag != 0 {
            words.push_str(&format!(" ({name})"));
        }
    }
    words
}

/// The calling thread's memory policy: its mode (flags included) and the nodes it names.
#[cfg(target_os = "linux")]
fn thread_memory_policy() -> std::io::Result<(i32, BTreeSet<u64>)> {
    // Past the 1024 nodes a Linux kernel numbers at most: the call refuses a mask shorter than
    // the kernel's count of nodes.
    const WORDS: usize = 17;
    let mut mode: libc::c_int = 0;
    let mut mask: [libc::c_ulong; WORDS] = [0; WORDS];
    let bits = WORDS as libc::c_ulong * libc::c_ulong::from(libc::c_ulong::BITS);
    // SAFETY: get_mempolicy writes one int through `mode` and at most `bits` bits through
    // `mask`, both made here and alive for the call; a null address with no flags asks for the
    // calling thread's policy, and nothing else is read or written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            bits,
            std::ptr::null_mut::<libc::c_void>(),
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let width = libc::c_ulong::BITS as usize;
    let nodes = (0..WORDS * width).filter(|&bit| mask[bit / width] >> (bit % width) & 1 == 1).map(|b| b as u64);
    Ok((mode, nodes.collect()))
}

#[cfg(not(target_os = "linux"))]
fn thread_memory_policy() -> std::io::Result<(i32, BTreeSet<u64>)> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "memory policies are Linux's"))
}

/// Bind the calling thread (the process's only one that matters: [`bind_self`] then replaces
/// the process) to `cpus`.
fn set_affinity(cpus: &BTreeSet<u64>) -> std::io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET is given numbers below
    // CPU_SETSIZE (checked by every caller), and sched_setaffinity reads the set it is given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus {
            libc::CPU_SET(cpu as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::result::HostLink;

    fn choice(text: &str) -> CpuChoice {
        text.parse().unwrap()
    }

    fn link(local_cpus: Option<&str>) -> Reported<HostLink> {
        Reported::Known(HostLink {
            pci_device: "0000:19:00.0".to_owned(),
            numa_node: Some(1),
            local_cpus: local_cpus.map(str::to_owned),
            allowed_cpus_elsewhere: None,
            link_width: Some(16),
            max_link_width: Some(16),
            max_link_speed: None,
        })
    }

    fn allowed(list: &str) -> (String, BTreeSet<u64>) {
        (list.to_owned(), cpus_in(list).unwrap())
    }

    /// A memory policy is said as numactl sets it: its mode, its nodes and its flags.
    #[test]
    fn a_memory_policy_is_said_with_its_nodes() {
        let nodes = |list: &str| cpus_in(list).unwrap_or_default();
        assert_eq!(policy_words(0, &nodes("")), "local (the default)");
        assert_eq!(policy_words(1, &nodes("1")), "preferred node 1");
        assert_eq!(policy_words(1, &nodes("")), "local (preferred, no node named)");
        assert_eq!(policy_words(2, &nodes("0-1")), "bind to nodes 0-1");
        assert_eq!(policy_words(3, &nodes("0,2")), "interleave over nodes 0,2");
        assert_eq!(policy_words(3 | 1 << 15, &nodes("0-3")), "interleave over nodes 0-3 (static nodes)");
        assert_eq!(policy_words(4, &nodes("")), "local");
        assert_eq!(policy_words(5, &nodes("2-3")), "preferred nodes 2-3");
        assert_eq!(policy_words(2 | 1 << 13, &nodes("1")), "bind to node 1 (NUMA balancing)");
        assert_eq!(policy_words(9, &nodes("0")), "policy 9 over node 0");
    }

    /// A policy's kind leaves its node lists out: the same policy on another host's layout is
    /// the same kind, another policy (or the same with another flag) is not.
    #[test]
    fn a_memory_policys_kind_leaves_its_nodes_out() {
        let on = |mode: i32, nodes: &str, mems: &str| {
            policy_words(mode, &cpus_in(nodes).unwrap_or_default()) + " on memory nodes " + mems
        };
        let kind = |mode, nodes, mems| policy_kind(&on(mode, nodes, mems));
        assert_eq!(kind(0, "", "0"), "local (the default) on memory nodes");
        assert_eq!(kind(0, "", "0"), kind(0, "", "0-7"));
        assert_eq!(kind(3, "0-1", "0-1"), "interleave over nodes on memory nodes");
        assert_eq!(kind(3, "0", "0"), kind(3, "0-7", "0-7"), "one node or eight");
        assert_ne!(kind(3, "0-1", "0-1"), kind(0, "", "0-1"));
        assert_ne!(kind(2, "1", "0-1"), kind(1, "1", "0-1"), "bind is not preferred");
        assert_ne!(kind(3 | 1 << 15, "0-3", "0-3"), kind(3, "0-3", "0-3"), "static nodes");
        assert_eq!(kind(1, "", "0"), "local (preferred, no nodes named) on memory nodes");
    }

    /// The policy read is the one the thread runs under: a thread that sets one (as numactl does
    /// before it starts lynx) reads it back, and the default again once it sets that.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_memory_policy_read_is_the_threads_own() {
        let set = |mode: libc::c_int, node: Option<u64>| {
            let mask: libc::c_ulong = node.map_or(0, |n| 1 << n);
            let (pointer, bits) = match node {
                Some(_) => (&mask as *const libc::c_ulong, libc::c_ulong::from(libc::c_ulong::BITS)),
                None => (std::ptr::null(), 0),
            };
            // SAFETY: set_mempolicy reads at most `bits` bits from `mask`, alive for the call, and
            // sets the calling thread's policy (this test's own thread, which ends with it).
            unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, pointer, bits) }
        };
        let said = std::thread::spawn(move || {
            let default = memory_policy();
            // The first memory node the cpuset allows.
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let mems = status.lines().find_map(|line| line.strip_prefix("Mems_allowed_list:")).unwrap();
            let node = *cpus_in(mems.trim()).unwrap().first().unwrap();
            assert_eq!(set(1, Some(node)), 0, "set_mempolicy: {}", std::io::Error::last_os_error());
            let preferred = memory_policy();
            assert_eq!(set(0, None), 0);
            (default, node, preferred, memory_policy())
        })
        .join()
        .unwrap();
        let (default, node, preferred, again) = said;
        let words = |r: &Reported<String>| r.known().cloned().unwrap_or_else(|| panic!("{r:?}"));
        assert!(words(&default).starts_with("local (the default) on memory nodes "), "{default:?}");
        assert!(words(&preferred).starts_with(&format!("preferred node {node} on memory nodes ")), "{preferred:?}");
        assert_eq!(again, default);
    }

    #[test]
    fn a_cpu_list_is_read_and_written_as_linux_lists_cpus() {
        assert_eq!(choice("gpu-local"), CpuChoice::GpuLocal);
        let CpuChoice::List(cpus) = choice("8,0-3,10,11,2") else { panic!("a list") };
        assert_eq!(cpu_list(&cpus), "0-3,8,10-11");
        assert_eq!(cpu_list(&BTreeSet::from([5])), "5");
        for bad in ["", "gpu", "3-1", "0,,1", "-1", "0-", "a-b", "1 2"] {
            let error = bad.parse::<CpuChoice>().unwrap_err();
            assert!(error.contains("neither gpu-local nor a CPU list"), "{bad:?}: {error}");
        }
        // A huge range is refused by its end, not counted out.
        let error = "0-18446744073709551614".parse::<CpuChoice>().unwrap_err();
        assert!(error.contains("lynx binds CPUs numbered below 1024"), "{error}");
    }

    #[test]
    fn gpu_local_is_the_gpus_cpus_that_the_host_allows() {
        let (list, set) = allowed("0-7,56-63");
        let link = link(Some("56-111,168-223"));
        let binding = resolve_against(&CpuChoice::GpuLocal, DeviceName::Cuda(0), Some(&link), (&list, &set)).unwrap();
        assert_eq!(binding, CpuBinding { asked: "gpu-local".to_owned(), cpus: Some("56-63".to_owned()) });
        assert_eq!(binding.words(), "CPUs 56-63, those local to the GPU (--cpus gpu-local)");
        // None of them allowed, none named, none known, or no GPU at all: refused, saying why.
        let (list, set) = allowed("0-7");
        let error = resolve_against(&CpuChoice::GpuLocal, DeviceName::Cuda(0), Some(&link), (&list, &set));
        let error = error.unwrap_err().to_string();
        assert!(
            error.contains("none of the CPUs local to cuda:0 (56-111,168-223) is one this process may run on (0-7)")
        );
        let unnamed = self::link(None);
        let error = resolve_against(&CpuChoice::GpuLocal, DeviceName::Cuda(1), Some(&unnamed), (&list, &set));
        assert!(error.unwrap_err().to_string().contains("sysfs names no CPUs local to cuda:1"));
        let unknown = Reported::unavailable("no sysfs");
        let error = resolve_against(&CpuChoice::GpuLocal, DeviceName::Rocm(0), Some(&unknown), (&list, &set));
        assert!(error.unwrap_err().to_string().contains("where rocm:0 sits is unknown (no sysfs)"));
        let error = resolve_against(&CpuChoice::GpuLocal, DeviceName::Cpu, None, (&list, &set)).unwrap_err();
        assert!(matches!(error, RunError::Config(_)) && error.to_string().contains("the cpu device has no GPU"));
    }

    #[test]
    fn a_list_must_name_only_cpus_the_host_allows() {
        let (list, set) = allowed("0-3");
        let binding = resolve_against(&choice("1,2"), DeviceName::Cpu, None, (&list, &set)).unwrap();
        assert_eq!(binding, CpuBinding { asked: "list".to_owned(), cpus: Some("1-2".to_owned()) });
        assert_eq!(binding.words(), "CPUs 1-2 (--cpus 1-2)");
        let error = resolve_against(&choice("2-6"), DeviceName::Cpu, None, (&list, &set)).unwrap_err();
        assert!(error.to_string().contains("CPUs 4-6 are not ones this process may run on (0-3)"), "{error}");
        assert_eq!(
            resolve(None, &crate::devices::find(DeviceName::Cpu, &crate::host_record()).unwrap()).unwrap(),
            CpuBinding::none()
        );
    }

    #[test]
    fn a_process_on_its_binding_stays_and_one_asked_for_cpus_it_may_not_use_is_refused() {
        let (list, _) = allowed_now().unwrap();
        let mut said = Vec::new();
        let here = CpuBinding { asked: "list".to_owned(), cpus: Some(list) };
        assert_eq!(bind_self(&here, &mut |line| said.push(line)).unwrap(), Bound::Already);
        assert_eq!(bind_self(&CpuBinding::none(), &mut |line| said.push(line)).unwrap(), Bound::Unbound);
        let elsewhere = CpuBinding { asked: "list".to_owned(), cpus: Some("1023".to_owned()) };
        let error = bind_self(&elsewhere, &mut |line| said.push(line)).unwrap_err();
        assert!(error.to_string().contains("the run is bound to CPUs 1023: CPUs 1023 are not ones this process may"));
        let hostile = CpuBinding { asked: "list".to_owned(), cpus: Some("0-99999999999".to_owned()) };
        let error = bind_self(&hostile, &mut |line| said.push(line)).unwrap_err();
        assert!(error.to_string().contains("not a CPU list lynx can bind"), "{error}");
        assert!(said.is_empty(), "{said:?}");
        // A worker checks the same, and never moves.
        assert!(holds(&here).is_ok() && holds(&CpuBinding::none()).is_ok());
        let error = holds(&elsewhere).unwrap_err().to_string();
        assert!(error.starts_with("the run is bound to CPUs 1023, and this process runs on "), "{error}");
        assert!(holds(&hostile).is_err());
    }
}
