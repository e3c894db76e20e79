//! Where a PCI device (a GPU) sits relative to the host's CPUs, from sysfs: its NUMA node, the
//! CPUs local to it, and its link's width (`/sys/bus/pci/devices/DOMAIN:BUS:DEVICE.FUNCTION/`).

use crate::cgroup::cpus_in;
use lynx_schema::result::{HostLink, TrainedLink};
use lynx_schema::value::Reported;
use std::path::{Path, PathBuf};

/// Where sysfs lists the host's PCI devices.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// [`host_link_in`] for this host's sysfs, against the CPUs `allowed` (the host record's
/// allowance: the same list the result records).
pub fn host_link(bus_id: &str, allowed: Option<&str>) -> Reported<HostLink> {
    host_link_in(Path::new(PCI_DEVICES), bus_id, allowed)
}

/// The device `bus_id` names (as NVML gives it, `00000000:19:00.0`, or ROCm SMI,
/// `0000:19:00.0`) under the sysfs folder `devices`, against the CPUs `allowed` (a Linux CPU
/// list, where known); why not where its folder is not there.
pub fn host_link_in(devices: &Path, bus_id: &str, allowed: Option<&str>) -> Reported<HostLink> {
    let (name, folder) = match device_folder(devices, bus_id) {
        Ok(found) => found,
        Err(why) => return Reported::unavailable(why),
    };
    let read = |file: &str| read_in(&folder, file);
    let number = |file: &str| read(file).and_then(|text| text.parse::<u32>().ok());
    // The list as sysfs words it, beside the CPUs it names (a list that names none is not kept).
    let local = read("local_cpulist").and_then(|list| Some((cpus_in(&list)?, list)));
    let allowed_cpus_elsewhere = match (allowed.and_then(cpus_in), &local) {
        (Some(allowed), Some((local, _))) => Some(allowed.difference(local).count() as u64),
        _ => None,
    };
    let local_cpus = local.map(|(_, list)| list);
    Reported::Known(HostLink {
        pci_device: name,
        // −1 where the kernel knows no node for it; a non-number is as good as none.
        numa_node: read("numa_node").and_then(|text| text.parse::<u32>().ok()),
        local_cpus,
        allowed_cpus_elsewhere,
        link_width: number("current_link_width"),
        max_link_width: number("max_link_width"),
        max_link_speed: read("max_link_speed").filter(|speed| !speed.is_empty() && speed.len() <= 40),
    })
}

/// The sysfs folder under `devices` of the device `bus_id` names, with the name sysfs gives it;
/// why not where `bus_id` is no bus id or the folder is not there.
fn device_folder(devices: &Path, bus_id: &str) -> Result<(String, PathBuf), String> {
    let name =
        sysfs_name(bus_id).ok_or_else(|| format!("{bus_id:?} is not a PCI bus id (DOMAIN:BUS:DEVICE.FUNCTION)"))?;
    let folder = devices.join(&name);
    if !folder.is_dir() {
        return Err(format!("no {} (no sysfs, or not this host's device)", folder.display()));
    }
    Ok((name, folder))
}

/// The file `file` of the sysfs folder `folder`, trimmed; `None` where it cannot be read.
fn read_in(folder: &Path, file: &str) -> Option<String> {
    std::fs::read_to_string(folder.join(file)).ok().map(|text| text.trim().to_owned())
}

/// The link of the device `bus_id` names under the sysfs folder `devices` as trained now: its
/// speed and width. A GPU lowers its link's speed while idle, so this is read under load (the
/// end of warm-up). Why not where the folder is not there or says neither.
pub fn trained_link_in(devices: &Path, bus_id: &str) -> Reported<TrainedLink> {
    let folder = match device_folder(devices, bus_id) {
        Ok((_, folder)) => folder,
        Err(why) => return Reported::unavailable(why),
    };
    let read = |file: &str| read_in(&folder, file);
    // The kernel writes "Unknown" (or "Unknown speed") where the link's speed is not one it knows.
    let speed = read("current_link_speed")
        .filter(|speed| !speed.is_empty() && speed.len() <= 40 && !speed.starts_with("Unknown"));
    let width = read("current_link_width").and_then(|text| text.parse::<u32>().ok()).filter(|&w| w > 0);
    if speed.is_none() && width.is_none() {
        return Reported::unavailable(format!("{} says no current link speed or width", folder.display()));
    }
    Reported::Known(TrainedLink { speed, width })
}

/// sysfs's name of the device `bus_id` names: its domain in four hex digits (or as many as it
/// needs), bus, device and function in lower case; `None` where it is not a bus id.
fn sysfs_name(bus_id: &str) -> Option<String> {
    let mut parts = bus_id.trim().split(':');
    let (domain, bus, slot) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (device, function) = slot.split_once('.')?;
    let hex = |text: &str, most: usize| {
        (!text.is_empty() && text.len() <= most && text.chars().all(|c| c.is_ascii_hexdigit()))
            .then(|| u32::from_str_radix(text, 16).ok())
            .flatten()
    };
    let (domain, bus, device, function) = (hex(domain, 8)?, hex(bus, 2)?, hex(device, 2)?, hex(function, 1)?);
    Some(format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs PCI device folder holding `files`.
    fn device(root: &Path, name: &str, files: &[(&str, &str)]) {
        let folder = root.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        for (file, text) in files {
            std::fs::write(folder.join(file), format!("{text}\n")).unwrap();
        }
    }

    /// NVML's bus id, with its eight-digit domain, names sysfs's four-digit folder; ROCm SMI's
    /// is sysfs's already; anything else is no bus id.
    #[test]
    fn bus_ids_are_named_as_sysfs_names_them() {
        assert_eq!(sysfs_name("00000000:19:00.0").as_deref(), Some("0000:19:00.0"));
        assert_eq!(sysfs_name("0000:9A:00.0").as_deref(), Some("0000:9a:00.0"));
        assert_eq!(sysfs_name("00010000:01:00.1").as_deref(), Some("10000:01:00.1"));
        for bad in ["", "19:00.0", "0000:19:00", "0000:19:00.0:1", "zz:19:00.0", "0000:190:00.0", "../../etc:00:00.0"] {
            assert_eq!(sysfs_name(bad), None, "{bad}");
        }
    }

    /// A GPU on NUMA node 1 with lynx allowed onto both nodes' CPUs: the count of CPUs elsewhere,
    /// the link, and the warning that says how to bind; on its own node's CPUs, none.
    #[test]
    fn a_gpu_on_another_node_than_some_allowed_cpus_is_told() {
        let root = tempfile::tempdir().unwrap();
        device(
            root.path(),
            "0000:9a:00.0",
            &[
                ("numa_node", "1"),
                ("local_cpulist", "56-111,168-223"),
                ("current_link_width", "16"),
                ("max_link_width", "16"),
                ("max_link_speed", "32.0 GT/s PCIe"),
            ],
        );
        let link = host_link_in(root.path(), "00000000:9A:00.0", Some("0-223")).known().cloned().unwrap();
        assert_eq!(link.pci_device, "0000:9a:00.0");
        assert_eq!(link.numa_node, Some(1));
        assert_eq!(link.allowed_cpus_elsewhere, Some(112));
        assert_eq!(
            link.words(),
            "PCI 0000:9a:00.0 on NUMA node 1 (CPUs 56-111,168-223; 112 CPUs lynx could run on are elsewhere); \
             link x16 of x16, 32.0 GT/s PCIe at most"
        );
        let warnings = link.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].starts_with("lynx may run on 112 CPUs outside the GPU's NUMA node 1 (56-111,168-223)"));
        assert!(
            warnings[0]
                .ends_with("`lynx run --cpus gpu-local` (or start it under `numactl --cpunodebind=1 --membind=1`)"),
            "{}",
            warnings[0]
        );
        let bound = host_link_in(root.path(), "0000:9a:00.0", Some("56-60")).known().cloned().unwrap();
        assert_eq!(bound.allowed_cpus_elsewhere, Some(0));
        assert!(bound.words().contains("(CPUs 56-111,168-223; every CPU lynx could run on is local)"));
        assert_eq!(bound.warnings(), Vec::<String>::new());
    }

    /// A virtual machine's GPU: no NUMA node, no local CPU list, a link trained at x8 of x16.
    #[test]
    fn a_gpu_with_no_node_and_a_narrow_link_says_so() {
        let root = tempfile::tempdir().unwrap();
        device(
            root.path(),
            "0000:00:05.0",
            &[("numa_node", "-1"), ("current_link_width", "8"), ("max_link_width", "16"), ("max_link_speed", "")],
        );
        let link = host_link_in(root.path(), "00000000:00:05.0", Some("0-15")).known().cloned().unwrap();
        assert_eq!((link.numa_node, link.local_cpus.as_deref(), link.allowed_cpus_elsewhere), (None, None, None));
        assert_eq!(
            link.words(),
            "PCI 0000:00:05.0 on no NUMA node the kernel names (where lynx could run unknown); link x8 of x16"
        );
        assert_eq!(link.warnings(), ["the GPU's PCIe link trained at x8 of the x16 it can"]);
    }

    /// The link as trained, read under load: its speed and width; a speed the kernel does not
    /// know is none, and a device that says neither (a virtual bus's) is a reason. Short of what
    /// the board can, it is said so; at what it can, nothing.
    #[test]
    fn a_link_as_trained_is_read_and_told_when_it_runs_short() {
        let root = tempfile::tempdir().unwrap();
        let files = [
            ("numa_node", "0"),
            ("current_link_width", "16"),
            ("max_link_width", "16"),
            ("current_link_speed", "16.0 GT/s PCIe"),
            ("max_link_speed", "32.0 GT/s PCIe"),
        ];
        device(root.path(), "0000:19:00.0", &files);
        device(root.path(), "0000:1a:00.0", &[("current_link_speed", "Unknown"), ("current_link_width", "8")]);
        device(root.path(), "0000:1b:00.0", &[("current_link_speed", "Unknown speed"), ("current_link_width", "0")]);
        let trained = trained_link_in(root.path(), "00000000:19:00.0").known().cloned().unwrap();
        assert_eq!(trained, TrainedLink { speed: Some("16.0 GT/s PCIe".to_owned()), width: Some(16) });
        assert_eq!(trained.words(), "16.0 GT/s PCIe x16");
        let link = host_link_in(root.path(), "0000:19:00.0", None).known().cloned().unwrap();
        let short = trained.short_of(&link).expect("16 of 32 GT/s is short");
        assert!(short
            .starts_with("the GPU's PCIe link ran at 16.0 GT/s PCIe x16 under load, short of the 32.0 GT/s PCIe x16"));
        let full = TrainedLink { speed: Some("32.0 GT/s PCIe".to_owned()), width: Some(16) };
        assert_eq!(full.short_of(&link), None);
        let narrow = TrainedLink { width: Some(8), ..full.clone() };
        assert!(narrow.short_of(&link).is_some_and(|w| w.contains("x8 under load")));
        let unknown = trained_link_in(root.path(), "0000:1a:00.0").known().cloned().unwrap();
        assert_eq!((unknown.speed, unknown.width), (None, Some(8)));
        assert_eq!(TrainedLink { speed: None, width: Some(16) }.short_of(&link), None, "no speed: nothing to judge");
        let neither = trained_link_in(root.path(), "0000:1b:00.0");
        assert!(matches!(&neither, Reported::Unavailable { unavailable } if unavailable.contains("no current link")));
        let missing = trained_link_in(root.path(), "0000:1c:00.0");
        assert!(matches!(&missing, Reported::Unavailable { unavailable } if unavailable.starts_with("no ")));
        assert!(matches!(trained_link_in(root.path(), "../x"), Reported::Unavailable { .. }));
    }

    /// This host's own PCI devices read as a GPU's would be (no link files on a virtual bus, a
    /// NUMA node of −1 in most virtual machines); a host without sysfs says why.
    #[test]
    fn this_hosts_pci_devices_read_as_a_gpus_would() {
        let listed: Vec<String> = std::fs::read_dir(PCI_DEVICES)
            .map(|dir| dir.filter_map(|entry| Some(entry.ok()?.file_name().to_string_lossy().into_owned())).collect())
            .unwrap_or_default();
        if listed.is_empty() {
            let said = host_link("0000:00:00.0", None);
            assert!(matches!(&said, Reported::Unavailable { unavailable } if unavailable.contains("no ")), "{said:?}");
        }
        let allowed = crate::cgroup::allowed_cpus().map(|(list, _)| list);
        for name in listed {
            let Reported::Known(link) = host_link(&name, allowed.as_deref()) else { panic!("{name} did not read") };
            assert_eq!(link.pci_device, name);
            assert!(link.words().starts_with(&format!("PCI {name} on ")), "{}", link.words());
        }
    }

    /// No folder for the device, or no bus id: why, never a panic.
    #[test]
    fn a_device_sysfs_does_not_list_is_a_reason() {
        let root = tempfile::tempdir().unwrap();
        let missing = host_link_in(root.path(), "0000:19:00.0", None);
        assert!(matches!(&missing, Reported::Unavailable { unavailable } if unavailable.contains("0000:19:00.0")));
        let bad = host_link_in(root.path(), "not a bus", None);
        assert!(matches!(&bad, Reported::Unavailable { unavailable } if unavailable.contains("not a PCI bus id")));
    }
}
