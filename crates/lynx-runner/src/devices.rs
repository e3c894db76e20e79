//! The devices libtorch can run on, named as users name them, with their identity.

use crate::libtorch::load_gpu_backends;
use crate::RunError;
use lynx_analysis::estimate::{datasheet, Datasheet};
use lynx_schema::device::{slug, DeviceName};
use lynx_schema::result::{BoardRecord, DeviceRecord, HostLink, HostRecord, TrainedLink};
use lynx_schema::value::Reported;
use std::path::Path;

/// The variable that states a device's free memory instead of reading it.
pub const FREE_MEMORY_VAR: &str = "LYNX_FREE_MEMORY_BYTES";

/// The free memory stated by [`FREE_MEMORY_VAR`], if it is set to a number.
fn stated_free_memory() -> Option<u64> {
    std::env::var(FREE_MEMORY_VAR).ok().and_then(|v| v.trim().parse().ok())
}

/// Whether [`FREE_MEMORY_VAR`] states the free memory (what is free beside the model's weights,
/// for planning cells) rather than it being read.
pub fn free_memory_is_stated() -> bool {
    stated_free_memory().is_some()
}

/// The CPU's free memory: as stated by [`FREE_MEMORY_VAR`], else the host's `MemAvailable`
/// (which reading nothing allocates to obtain).
pub fn host_free_memory() -> Reported<(u64, &'static str)> {
    if let Some(stated) = stated_free_memory() {
        return Reported::Known((stated, "stated by LYNX_FREE_MEMORY_BYTES"));
    }
    lynx_telemetry::available_memory_bytes().map_or_else(
        || Reported::unavailable("/proc/meminfo gives no MemAvailable"),
        |bytes| Reported::Known((bytes, "the host's MemAvailable")),
    )
}

/// The libtorch device a device name maps to (a ROCm GPU is a CUDA-type device to libtorch).
pub fn torch_device(name: DeviceName) -> tch::Device {
    match name {
        DeviceName::Cpu => tch::Device::Cpu,
        DeviceName::Cuda(index) | DeviceName::Rocm(index) => tch::Device::Cuda(index as usize),
    }
}

/// A device lynx can run on.
#[derive(Debug, Clone)]
pub struct Device {
    pub record: DeviceRecord,
    /// The libtorch device it maps to.
    pub torch: tch::Device,
    /// Its largest cache, bytes: a CPU's from sysfs, an NVIDIA GPU's L2 from the CUDA driver;
    /// `None` for ROCm devices (not read) and wherever it cannot be had.
    pub cache_bytes: Option<u64>,
    /// The datasheet of a device that is not here, which a plan is made for ([`planned`]);
    /// `None` for every device lynx found.
    pub planned: Option<&'static Datasheet>,
}

impl Device {
    /// What the roofline probes need of this device.
    pub fn probe_target(&self) -> lynx_probes::roofline::Target {
        lynx_probes::roofline::Target {
            device: self.record.device,
            torch: self.torch,
            cache_bytes: self.cache_bytes,
            lib_dir: load_gpu_backends().lib_dir.known().cloned(),
            release_cached_memory: match self.record.device {
                DeviceName::Cpu => None,
                DeviceName::Cuda(_) | DeviceName::Rocm(_) => Some(release_cached_memory),
            },
        }
    }

    /// Memory free for a cell's allocations, and how it was had: `LYNX_FREE_MEMORY_BYTES` when
    /// set (to plan as if the device had that much free); on the CPU the host's available memory
    /// (`MemAvailable`); on a GPU the driver's free memory once libtorch's caching allocator has
    /// released the blocks it keeps for reuse (which the driver counts as used), through the CUDA
    /// shim; on a device planned and not here, its datasheet's memory. Unavailable where the shim
    /// is: those cells run, and one that does not fit is recorded as out of memory.
    pub fn free_memory(&self) -> Reported<(u64, &'static str)> {
        match (self.record.device, self.planned) {
            (DeviceName::Cpu, _) => host_free_memory(),
            _ if stated_free_memory().is_some() => host_free_memory(),
            (_, Some(sheet)) => Reported::Known((sheet.memory_bytes(), "the datasheet's memory")),
            (DeviceName::Cuda(index) | DeviceName::Rocm(index), None) => match crate::cuda::free_memory(index as usize)
            {
                Ok((free, _)) => Reported::Known((free, "the driver's free memory, libtorch's cache released")),
                Err(reason) => Reported::unavailable(reason),
            },
        }
    }

    /// Folder name of this device's results: the device's name in kebab case, and for a GPU the
    /// first block of its UUID (or its index), so the GPUs of one node stay apart.
    pub fn slug(&self) -> String {
        let name = self.record.name.known().map(|n| slug(n)).filter(|s| !s.is_empty());
        match self.record.device {
            DeviceName::Cpu => name.unwrap_or_else(|| "cpu".to_owned()),
            DeviceName::Cuda(index) | DeviceName::Rocm(index) => {
                let id = self
                    .record
                    .uuid
                    .known()
                    .and_then(|uuid| uuid.trim_start_matches("GPU-").split('-').next().map(str::to_owned));
                let kind = if matches!(self.record.device, DeviceName::Cuda(_)) { "cuda" } else { "rocm" };
                format!("{}-{}", name.unwrap_or_else(|| kind.to_owned()), id.unwrap_or_else(|| index.to_string()))
            }
        }
    }
}

/// The datasheet lynx holds `device` to (a GPU's whose name it matches, as
/// [`lynx_analysis::estimate::datasheet`] matches names), for the wall-time estimate's rates and
/// gpu-check's bandwidth claim; none for a CPU, or a GPU lynx has none for.
pub fn datasheet_of(device: &DeviceRecord) -> Option<&'static Datasheet> {
    match device.device {
        DeviceName::Cpu => None,
        DeviceName::Cuda(_) | DeviceName::Rocm(_) => device.name.known().and_then(|name| datasheet(name)),
    }
}

/// Hand the blocks libtorch's caching allocator keeps back to the driver (through the CUDA shim;
/// nothing where the shim is not loaded), before a native probe allocates outside libtorch.
fn release_cached_memory(target: &lynx_probes::roofline::Target) {
    if let tch::Device::Cuda(index) = target.torch {
        let _ = crate::cuda::free_memory(index);
    }
}

/// Whether libtorch's CUDA device type drives AMD GPUs: a ROCm build of libtorch is loaded.
/// (`tch::utils::has_hip` is not a reliable test: a ROCm libtorch registers its GPUs as CUDA
/// devices through hipified hooks.)
fn gpus_are_rocm() -> bool {
    lynx_models::runtime::is_rocm()
}

/// Every device libtorch can use: the CPU, then each GPU.
pub fn list(host: &HostRecord) -> Vec<Device> {
    load_gpu_backends();
    let count = u32::try_from(tch::Cuda::device_count()).unwrap_or(0);
    let gpu = |index| if gpus_are_rocm() { DeviceName::Rocm(index) } else { DeviceName::Cuda(index) };
    std::iter::once(cpu(host)).chain((0..count).map(|index| gpu_device(gpu(index), index, host))).collect()
}

/// The device `name`, if libtorch can use it.
pub fn find(name: DeviceName, host: &HostRecord) -> Result<Device, RunError> {
    find_in(name, &list(host))
}

/// The device `name` among `devices` (this host's [`list`]); where it is not there, why, with
/// the devices that are.
pub fn find_in(name: DeviceName, devices: &[Device]) -> Result<Device, RunError> {
    if let Some(device) = devices.iter().find(|d| d.record.device == name) {
        return Ok(device.clone());
    }
    let available: Vec<String> = devices.iter().map(|d| d.record.device.to_string()).collect();
    let hint = match name {
        DeviceName::Cuda(_) if gpus_are_rocm() => " (this libtorch drives AMD GPUs: name them rocm:N)".to_owned(),
        DeviceName::Rocm(_) if !gpus_are_rocm() && devices.len() > 1 => {
            " (this libtorch drives NVIDIA GPUs: name them cuda:N)".to_owned()
        }
        DeviceName::Cuda(_) | DeviceName::Rocm(_) if devices.len() == 1 => {
            let reasons: Vec<String> = load_gpu_backends()
                .gpu_backends
                .iter()
                .map(|backend| match &backend.loaded {
                    Reported::Known(true) => format!("{} loaded", backend.library),
                    Reported::Known(false) => format!("{} not loaded", backend.library),
                    Reported::Unavailable { unavailable } => format!("{} not loaded: {unavailable}", backend.library),
                })
                .collect();
            format!(" (libtorch sees no GPU; {})", reasons.join("; "))
        }
        _ => String::new(),
    };
    Err(RunError::UnknownDevice(format!("{name} is not a device here{hint}; available: {}", available.join(", "))))
}

/// The first GPU if there is one, else the CPU.
pub fn best(host: &HostRecord) -> Device {
    let mut devices = list(host);
    if devices.len() > 1 {
        devices.swap_remove(1)
    } else {
        devices.swap_remove(0)
    }
}

fn cpu(host: &HostRecord) -> Device {
    Device {
        record: DeviceRecord {
            device: DeviceName::Cpu,
            name: host.cpu_model.clone(),
            memory_bytes: Reported::Known(host.memory_bytes),
            uuid: Reported::unavailable("CPUs have no board UUID"),
            compute_capability: Reported::unavailable("not a CUDA device"),
            board: Reported::unavailable("a CPU has no GPU board"),
            host_link: None,
        },
        torch: torch_device(DeviceName::Cpu),
        cache_bytes: lynx_probes::cpu::largest_cache_bytes(),
        planned: None,
    }
}

/// A device that is not here, for a plan (`lynx run --plan --plan-as`): `sheet`'s device as
/// `name` (by default its kind's first, `cuda:0` or `rocm:0`), its name and memory the
/// datasheet's and nothing else known. A name of the other kind (`rocm:N` for an NVIDIA
/// datasheet) is refused.
pub fn planned(sheet: &'static Datasheet, name: Option<DeviceName>) -> Result<Device, RunError> {
    let device = match (name, sheet.rocm) {
        (None, false) => DeviceName::Cuda(0),
        (None, true) => DeviceName::Rocm(0),
        (Some(name @ DeviceName::Cuda(_)), false) | (Some(name @ DeviceName::Rocm(_)), true) => name,
        (Some(name), _) => {
            let kind = if sheet.rocm { "rocm:N" } else { "cuda:N" };
            return Err(RunError::Config(format!(
                "--plan-as {}: the {} is named {kind}, not {name}",
                sheet.name, sheet.full_name
            )));
        }
    };
    let why = format!("planned from the {} datasheet: the device is not here", sheet.name);
    Ok(Device {
        record: DeviceRecord {
            device,
            name: Reported::Known(sheet.full_name.to_owned()),
            memory_bytes: Reported::Known(sheet.memory_bytes()),
            uuid: Reported::unavailable(why.clone()),
            compute_capability: Reported::unavailable(why.clone()),
            board: Reported::unavailable(why),
            host_link: None,
        },
        torch: torch_device(device),
        cache_bytes: None,
        planned: Some(sheet),
    })
}

fn gpu_device(name: DeviceName, index: u32, host: &HostRecord) -> Device {
    let mut cache_bytes = None;
    let record = match name {
        DeviceName::Rocm(_) => {
            let (gpu_name, memory_bytes) = lynx_rocm::name_and_memory(index);
            DeviceRecord {
                device: name,
                name: gpu_name,
                memory_bytes,
                uuid: Reported::unavailable("AMD GPUs are identified by their serial and PCI bus (see board)"),
                compute_capability: Reported::unavailable("not a CUDA device"),
                board: lynx_rocm::board(index),
                host_link: None,
            }
        }
        _ => match lynx_probes::cuda_device(index) {
            Ok(cuda) => {
                cache_bytes = Some(cuda.l2_bytes).filter(|&bytes| bytes > 0);
                DeviceRecord {
                    device: name,
                    name: Reported::Known(cuda.name),
                    memory_bytes: Reported::Known(cuda.memory_bytes),
                    board: lynx_nvml::board(&cuda.uuid),
                    uuid: Reported::Known(cuda.uuid),
                    compute_capability: Reported::Known(cuda.compute_capability),
                    host_link: None,
                }
            }
            Err(error) => DeviceRecord {
                device: name,
                name: Reported::unavailable(error.to_string()),
                memory_bytes: Reported::unavailable(error.to_string()),
                uuid: Reported::unavailable(error.to_string()),
                compute_capability: Reported::unavailable(error.to_string()),
                board: Reported::unavailable(error.to_string()),
                host_link: None,
            },
        },
    };
    let allowed = host.cpu_allowance.as_ref().map(|allowance| allowance.cpus.as_str());
    let record = DeviceRecord { host_link: Some(host_link(&record.board, allowed)), ..record };
    Device { torch: torch_device(record.device), record, cache_bytes, planned: None }
}

/// Where the GPU whose board is `board` sits on the host's PCI tree, by the board's bus id,
/// against the CPUs `allowed` (the host record's), or why that is not known.
fn host_link(board: &Reported<BoardRecord>, allowed: Option<&str>) -> Reported<HostLink> {
    match board {
        Reported::Known(board) => match &board.pci_bus_id {
            Reported::Known(bus) => lynx_telemetry::pci::host_link(bus, allowed),
            Reported::Unavailable { unavailable } => {
                Reported::unavailable(format!("the board's PCI bus id is unknown: {unavailable}"))
            }
        },
        Reported::Unavailable { unavailable } => Reported::unavailable(format!("the board is unknown: {unavailable}")),
    }
}

/// A GPU's PCIe link as trained now, from this host's sysfs ([`link_now_in`]).
pub fn link_now(device: &DeviceRecord) -> Option<Reported<TrainedLink>> {
    link_now_in(device, Path::new(lynx_telemetry::pci::PCI_DEVICES))
}

/// A GPU's PCIe link as trained now ([`lynx_telemetry::pci::trained_link_in`] under the sysfs
/// folder `devices`), read where its host link was (the device record's `pci_device`); why not
/// where that is unknown; `None` for a CPU and a record made before lynx read host links.
fn link_now_in(device: &DeviceRecord, devices: &Path) -> Option<Reported<TrainedLink>> {
    if device.device == DeviceName::Cpu {
        return None;
    }
    Some(match device.host_link.as_ref()? {
        Reported::Known(link) => lynx_telemetry::pci::trained_link_in(devices, &link.pci_device),
        Reported::Unavailable { unavailable } => {
            Reported::unavailable(format!("where the GPU sits is unknown: {unavailable}"))
        }
    })
}

/// Processes other than this worker holding a context on `device` now: the driver's count (NVML,
/// or ROCm SMI's compute processes) less one, the worker's own (it holds one while it measures;
/// the pids are not compared, as in a container the driver gives the host's); `None` where the
/// device does not say: a CPU, a driver without the process lists.
pub fn other_processes(device: &DeviceRecord) -> Option<u32> {
    match device.device {
        DeviceName::Cuda(_) => device.uuid.known().and_then(|uuid| lynx_nvml::processes(uuid).known().copied()),
        DeviceName::Rocm(index) => lynx_rocm::processes(index).known().copied(),
        DeviceName::Cpu => None,
    }
    .map(|count| count.saturating_sub(1))
}

/// `work` done, with the other processes on `device` over it: the larger of [`other_processes`]
/// as it begins and as it ends.
pub fn other_processes_over<T>(device: &DeviceRecord, work: impl FnOnce() -> T) -> (T, Option<u32>) {
    let before = other_processes(device);
    let done = work();
    (done, before.max(other_processes(device)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CPU has no link to read; a GPU whose place on the PCI tree is unknown says why; one whose
    /// place is known is read from sysfs there: the folder its host link named (NVML's bus id,
    /// with its eight-digit domain, found as sysfs's four-digit one), not another device's.
    #[test]
    fn a_gpus_link_is_read_where_its_host_link_was() {
        let cpu = cpu(&crate::host_record()).record;
        assert_eq!(link_now(&cpu), None);
        let mut gpu = DeviceRecord { device: DeviceName::Cuda(0), ..cpu };
        assert_eq!(link_now(&gpu), None, "a record from before host links");
        gpu.host_link = Some(Reported::unavailable("the board is unknown: no NVML"));
        let said = link_now(&gpu).unwrap();
        assert_eq!(said, Reported::unavailable("where the GPU sits is unknown: the board is unknown: no NVML"));
        let sysfs = tempfile::tempdir().unwrap();
        for (name, speed, width) in [("0000:19:00.0", "16.0 GT/s PCIe", "16"), ("0000:1a:00.0", "2.5 GT/s PCIe", "1")] {
            let folder = sysfs.path().join(name);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("current_link_speed"), format!("{speed}\n")).unwrap();
            std::fs::write(folder.join("current_link_width"), format!("{width}\n")).unwrap();
        }
        gpu.host_link = Some(lynx_telemetry::pci::host_link_in(sysfs.path(), "00000000:19:00.0", None));
        let read = link_now_in(&gpu, sysfs.path()).unwrap().known().cloned().expect("the link files are there");
        assert_eq!(read, TrainedLink { speed: Some("16.0 GT/s PCIe".to_owned()), width: Some(16) });
        std::fs::remove_dir_all(sysfs.path().join("0000:19:00.0")).unwrap();
        let gone = link_now_in(&gpu, sysfs.path()).unwrap();
        assert!(
            matches!(&gone, Reported::Unavailable { unavailable } if unavailable.contains("0000:19:00.0")),
            "{gone:?}"
        );
    }
}
