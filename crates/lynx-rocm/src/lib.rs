//! AMD GPUs through ROCm SMI: the board record for the result and a telemetry source.
//!
//! librocm_smi64 is loaded at run time (never linked), so this crate builds everywhere; where the
//! library is missing, or present but `rsmi_init` fails (a host without an AMD GPU, such as one
//! with Debian's `librocm-smi64-1` and no amdgpu device), every call returns that reason.
//!
//! Readings (rocm_smi.h): socket power, current where the library has
//! `rsmi_dev_current_socket_power_get` (MI300 and newer report current power) else average,
//! labelled; the energy accumulator times its counter resolution; the system (SM) and memory
//! clocks; the hottest of the edge, junction and memory sensors; busy percent; VRAM in use.
//! Throttle status comes from the driver's `gpu_metrics` table beside the device's PCI function
//! in sysfs ([`metrics`]), where its version carries the ASIC-independent status.
//!
//! The tests run all of this against `lynx-fakes`' stand-in librocm_smi64 (5.x and 6.x).

mod ffi;
pub mod metrics;

pub use ffi::{Hip, RocmSmiLib, SmiError};
use lynx_schema::result::BoardRecord;
use lynx_schema::telemetry::Sample;
use lynx_schema::value::Reported;
use lynx_telemetry::{CallTimer, TelemetrySource};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where Linux lists PCI functions, each with the amdgpu driver's `gpu_metrics` beside it.
pub const PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// The process's ROCm SMI, loaded and initialised once, or why it cannot be used here.
pub fn rocm_smi() -> Result<&'static RocmSmiLib, String> {
    static SMI: OnceLock<Result<&'static RocmSmiLib, String>> = OnceLock::new();
    SMI.get_or_init(|| {
        RocmSmiLib::load().map(|lib| &*Box::leak(Box::new(lib))).map_err(|e| format!("ROCm SMI is unavailable: {e}"))
    })
    .clone()
}

/// ROCm SMI loaded from the library at `path` and initialised, kept for the process's life, or
/// why it cannot be.
pub fn open(path: &Path) -> Result<&'static RocmSmiLib, String> {
    RocmSmiLib::load_from(path)
        .map(|lib| &*Box::leak(Box::new(lib)))
        .map_err(|e| format!("ROCm SMI is unavailable: {e}"))
}

/// The SMI device for HIP ordinal `index` (found by its PCI bus id), or why there is none.
fn device(index: u32) -> Result<(&'static RocmSmiLib, u32), String> {
    let smi = rocm_smi()?;
    let bus = Hip::loaded()?.pci_bus_id(index)?;
    Ok((smi, smi_device_on_bus(smi, &bus)?))
}

/// The SMI device of `smi` on PCI bus `bus` (`dddd:bb:dd.f`), or why there is none.
pub fn smi_device_on_bus(smi: &'static RocmSmiLib, bus: &str) -> Result<u32, String> {
    let count = smi.device_count().map_err(|e| format!("rsmi_num_monitor_devices: {e}"))?;
    (0..count)
        .find(|&d| smi.pci_id(d).is_ok_and(|bdf| pci_bus_id(bdf) == bus))
        .ok_or_else(|| format!("none of the {count} devices ROCm SMI sees is on PCI bus {bus}"))
}

/// The SMI device of HIP ordinal `index` of `hip`, matched by PCI bus id.
pub fn smi_device_of(smi: &'static RocmSmiLib, hip: &Hip, index: u32) -> Result<u32, String> {
    smi_device_on_bus(smi, &hip.pci_bus_id(index)?)
}

fn device_of(smi: &'static RocmSmiLib, index: u32) -> Result<(&'static RocmSmiLib, u32), String> {
    let count = smi.device_count().map_err(|e| format!("rsmi_num_monitor_devices: {e}"))?;
    if index >= count {
        return Err(format!("ROCm SMI sees {count} devices; rocm:{index} is not among them"));
    }
    Ok((smi, index))
}

/// The device's marketing name and VRAM, for the device record.
pub fn name_and_memory(index: u32) -> (Reported<String>, Reported<u64>) {
    match device(index) {
        Ok((smi, d)) => (smi.name(d).into(), smi.memory_total(d).into()),
        Err(reason) => (Reported::unavailable(reason.clone()), Reported::unavailable(reason)),
    }
}

/// How many processes hold compute resources on `rocm:index` (found by its PCI bus id), or why
/// ROCm SMI cannot say.
pub fn processes(index: u32) -> Reported<u32> {
    match device(index) {
        Ok((smi, d)) => processes_of(smi, d),
        Err(reason) => Reported::unavailable(reason),
    }
}

/// [`processes`] on SMI device `index` of `smi`.
pub fn processes_of(smi: &'static RocmSmiLib, index: u32) -> Reported<u32> {
    match device_of(smi, index) {
        Ok((smi, d)) => smi.processes_on(d).into(),
        Err(reason) => Reported::unavailable(reason),
    }
}

fn not_by_smi<T>(what: &str) -> Reported<T> {
    Reported::unavailable(format!("ROCm SMI does not report {what}"))
}

/// The board record of `rocm:index`, or why ROCm SMI cannot give it.
pub fn board(index: u32) -> Reported<BoardRecord> {
    match device(index) {
        Ok((smi, d)) => board_of(smi, d),
        Err(reason) => Reported::unavailable(reason),
    }
}

/// The PCI bus id (`dddd:bb:dd.f`) of a ROCm SMI BDFID: domain << 32 | bus << 8 | device << 3 |
/// function.
fn pci_bus_id(bdf: u64) -> String {
    format!("{:04x}:{:02x}:{:02x}.{}", bdf >> 32, (bdf >> 8) & 0xff, (bdf >> 3) & 0x1f, bdf & 0x7)
}

/// The board record of SMI device `index` of `smi`.
pub fn board_of(smi: &'static RocmSmiLib, index: u32) -> Reported<BoardRecord> {
    let (smi, d) = match device_of(smi, index) {
        Ok(found) => found,
        Err(reason) => return Reported::unavailable(reason),
    };
    let watts = |uw: Result<u64, SmiError>| Reported::from(uw).map_known(|uw| uw as f64 / 1e6);
    Reported::Known(BoardRecord {
        serial: smi.serial(d).into(),
        pci_bus_id: smi.pci_id(d).map(pci_bus_id).into(),
        vbios: smi.vbios(d).into(),
        driver_version: not_by_smi("the driver version through this library"),
        cuda_driver_version: Reported::unavailable("not an NVIDIA GPU"),
        power_limit_default_w: watts(smi.power_cap_default_uw(d)),
        power_limit_enforced_w: watts(smi.power_cap_uw(d)),
        ecc_enabled: not_by_smi("ECC mode through this library"),
        mig_enabled: Reported::unavailable("not an NVIDIA GPU"),
        persistence_mode: Reported::unavailable("not an NVIDIA GPU"),
    })
}

/// The telemetry of one AMD GPU.
pub struct RocmSource {
    smi: &'static RocmSmiLib,
    device: u32,
    current_power: bool,
    /// The device's `gpu_metrics`, open, or why its throttle status cannot be read.
    metrics: Result<(PathBuf, File), String>,
    /// The HIP ordinal the device was matched to, where it was.
    hip_index: Option<u32>,
}

impl RocmSource {
    /// The source for HIP ordinal `index` (its SMI device found by PCI bus id), or why it
    /// cannot be had.
    pub fn for_index(index: u32) -> Result<RocmSource, String> {
        let (smi, device) = device(index)?;
        let mut source = RocmSource::new(smi, device, Path::new(PCI_DEVICES))?;
        source.hip_index = Some(index);
        Ok(source)
    }

    /// The source for SMI device `index` of `smi`, with the device's `gpu_metrics` found under
    /// `pci_devices` (the real one is [`PCI_DEVICES`]) by its PCI bus id.
    pub fn new(smi: &'static RocmSmiLib, index: u32, pci_devices: &Path) -> Result<RocmSource, String> {
        let (smi, device) = device_of(smi, index)?;
        let metrics = smi
            .pci_id(device)
            .map_err(|e| format!("rsmi_dev_pci_id_get, to find gpu_metrics by: {e}"))
            .and_then(|bdf| {
                let path = pci_devices.join(pci_bus_id(bdf)).join("gpu_metrics");
                let file = File::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                Ok((path, file))
            })
            .and_then(|(path, file)| {
                // Only a table that gives the status now is worth reading at every sample.
                read_throttle(&file).map_err(|e| format!("{}: {e}", path.display()))?;
                Ok((path, file))
            });
        let current_power = smi.current_socket_power_uw(device).is_ok();
        Ok(RocmSource { smi, device, current_power, metrics, hip_index: None })
    }
}

/// The ASIC-independent throttle status in the `gpu_metrics` table open as `file`.
fn read_throttle(file: &File) -> Result<u64, String> {
    // The driver fills the table afresh on each read from offset 0; it is a few hundred bytes
    // (v1.3 is 120).
    let mut table = [0u8; 4096];
    let n = file.read_at(&mut table, 0).map_err(|e| e.to_string())?;
    metrics::indep_throttle_status(&table[..n])
}

impl TelemetrySource for RocmSource {
    fn name(&self) -> String {
        format!("rocm-smi:{}", self.device)
    }

    fn unavailable(&self) -> Vec<(String, String)> {
        let mut missing = Vec::new();
        if let Err(reason) = &self.metrics {
            missing.push(("throttle".to_owned(), format!("the driver's gpu_metrics table: {reason}")));
        }
        if let Err(reason) = self.smi.clock_mhz(self.device, 0) {
            missing.push(("sm_clock_mhz".to_owned(), reason.to_string()));
            missing.push(("mem_clock_mhz".to_owned(), reason.to_string()));
        }
        missing
    }

    fn labels(&self) -> Vec<(String, String)> {
        let power = if self.current_power {
            "rsmi_dev_current_socket_power_get (current socket power)"
        } else {
            "rsmi_dev_power_ave_get (average socket power): no current-power reading in this library or device"
        };
        let mut labels = vec![
            ("power_w".to_owned(), power.to_owned()),
            (
                "device".to_owned(),
                match self.hip_index {
                    Some(hip) => {
                        format!("ROCm SMI device {} for HIP ordinal {hip}, matched by PCI bus id", self.device)
                    }
                    None => format!("ROCm SMI device {}", self.device),
                },
            ),
        ];
        if let Ok((path, _)) = &self.metrics {
            labels.push((
                "throttle".to_owned(),
                format!("indep_throttle_status of {} (gpu_metrics v1.3), by throttler group", path.display()),
            ));
        }
        labels
    }

    fn sample(&mut self) -> Sample {
        let (smi, d) = (self.smi, self.device);
        // Each call timed: a reading slower than SLOW_READING_S keeps what each took.
        let mut calls = CallTimer::start();
        let power_w = if self.current_power {
            let power = smi.current_socket_power_uw(d);
            calls.lap("rsmi_dev_current_socket_power_get");
            power
        } else {
            let power = smi.average_power_uw(d);
            calls.lap("rsmi_dev_power_ave_get");
            power
        }
        .ok()
        .map(|uw| uw as f64 / 1e6);
        let energy_j = smi.energy_uj(d).ok().map(|uj| uj / 1e6);
        calls.lap("rsmi_dev_energy_count_get");
        let sm_clock_mhz = smi.clock_mhz(d, 0).ok();
        calls.lap("rsmi_dev_gpu_clk_freq_get(system)");
        let mem_clock_mhz = smi.clock_mhz(d, 4).ok();
        calls.lap("rsmi_dev_gpu_clk_freq_get(memory)");
        let temperature_c = (0..3).filter_map(|sensor| smi.temperature_c(d, sensor).ok()).reduce(f64::max);
        calls.lap("rsmi_dev_temp_metric_get(edge, junction, memory)");
        let utilisation = smi.busy_percent(d).ok().map(|p| f64::from(p) / 100.0);
        calls.lap("rsmi_dev_busy_percent_get");
        let memory_used_bytes = smi.memory_used(d).ok();
        calls.lap("rsmi_dev_memory_usage_get");
        let throttle = match &self.metrics {
            Ok((_, file)) => read_throttle(file).map(metrics::throttle_reasons).unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        calls.lap("gpu_metrics (throttle status)");
        Sample {
            t_s: 0.0,
            read_s: None,
            power_w,
            energy_j,
            sm_clock_mhz,
            mem_clock_mhz,
            temperature_c,
            utilisation,
            memory_used_bytes,
            core_utilisation: Vec::new(),
            core_mhz: Vec::new(),
            throttle,
            slow_calls: calls.if_slow(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rocm_smi_loads_or_says_why_not() {
        let installed = [
            "/usr/lib/librocm_smi64.so.1",
            "/usr/lib/x86_64-linux-gnu/librocm_smi64.so.1",
            "/opt/rocm/lib/librocm_smi64.so.1",
        ]
        .iter()
        .any(|p| std::path::Path::new(p).exists());
        match rocm_smi() {
            Ok(smi) => assert!(smi.device_count().is_ok(), "an initialised ROCm SMI counts its devices"),
            Err(reason) => {
                eprintln!("{reason}");
                if installed {
                    // The real library loaded; on a host without an AMD GPU its init fails, and
                    // that failure is what lynx reports.
                    assert!(reason.starts_with("ROCm SMI is unavailable: rsmi_init failed: "), "{reason}");
                } else {
                    assert!(reason.contains("librocm_smi64 cannot be loaded"), "{reason}");
                }
                assert_eq!(board(0), Reported::unavailable(reason.clone()));
                assert_eq!(RocmSource::for_index(0).err(), Some(reason));
            }
        }
    }
}
