//! NVIDIA devices through NVML: the board's identity for the result, and a telemetry source.
//!
//! nvml-wrapper loads libnvidia-ml at run time, so this crate builds everywhere and, on a host
//! without the NVIDIA driver, every call reports why NVML is unavailable instead of failing to
//! start. A libtorch `cuda:N` device is matched to its NVML device by the UUID the CUDA driver
//! gives it, never by index (CUDA_VISIBLE_DEVICES and NVML order devices differently).
//!
//! Readings (NVML API reference): power from the instantaneous field `NVML_FI_DEV_POWER_INSTANT`
//! through `nvmlDeviceGetFieldValues` where the device has it, else the averaged field or
//! `nvmlDeviceGetPowerUsage` (a 1-second average on Ampere and newer), labelled as such; the
//! total-energy counter (mJ); SM and memory clocks; the hotter of the GPU and memory (HBM)
//! temperatures; utilisation; memory used; and the clock-event (throttle) reasons, decoded into
//! names. Power, energy and memory temperature come from one batched `nvmlDeviceGetFieldValues`
//! call per sample, each falling back to its own call where the field does not answer.
//!
//! A source reads the device once when it is made: whatever the device does not answer then is
//! listed in [`TelemetrySource::unavailable`] with NVML's reason, so a reading that is never
//! there (throttle reasons, above all) is never mistaken for a reading of zero.
//!
//! The tests run all of this against `lynx-fakes`' stand-in libnvidia-ml.

use lynx_schema::result::BoardRecord;
use lynx_schema::telemetry::{Sample, ThrottleReason};
use lynx_schema::value::Reported;
use lynx_telemetry::{CallTimer, TelemetrySource};
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_MEMORY_TEMP, NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
};
use nvml_wrapper::{Device, Nvml};
use std::path::Path;
use std::sync::OnceLock;

/// Why NVML, or a device in it, cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NvmlUnavailable {
    /// libnvidia-ml could not be loaded or initialised from the loader's search path.
    #[error("NVML is unavailable: {0}")]
    Init(String),
    /// The library at `path` could not be loaded or initialised.
    #[error("NVML is unavailable from {path}: {reason}")]
    Open { path: String, reason: String },
    /// NVML knows no device by this UUID.
    #[error("NVML has no device {uuid}: {reason}")]
    NoDevice { uuid: String, reason: String },
}

/// The process's NVML handle (libnvidia-ml.so.1 from the loader's search path), initialised
/// once and kept for the process's life (devices borrow it), or why NVML cannot be used here.
pub fn nvml() -> Result<&'static Nvml, NvmlUnavailable> {
    static NVML: OnceLock<Result<&'static Nvml, NvmlUnavailable>> = OnceLock::new();
    NVML.get_or_init(|| Nvml::init().map(leak).map_err(|e| NvmlUnavailable::Init(e.to_string()))).clone()
}

/// NVML loaded from the library at `path`, initialised and kept for the process's life, or why
/// it cannot be. Each call loads and initialises it again (NVML counts its initialisations).
pub fn open(path: &Path) -> Result<&'static Nvml, NvmlUnavailable> {
    Nvml::builder()
        .lib_path(path.as_os_str())
        .init()
        .map(leak)
        .map_err(|e| NvmlUnavailable::Open { path: path.display().to_string(), reason: e.to_string() })
}

fn leak(nvml: Nvml) -> &'static Nvml {
    Box::leak(Box::new(nvml))
}

fn device(nvml: &'static Nvml, uuid: &str) -> Result<Device<'static>, NvmlUnavailable> {
    nvml.device_by_uuid(uuid).map_err(|e| NvmlUnavailable::NoDevice { uuid: uuid.to_owned(), reason: e.to_string() })
}

fn reported<T>(result: Result<T, NvmlError>) -> Reported<T> {
    result.map_err(|e| e.to_string()).into()
}

/// `read` through the process's NVML, or why NVML cannot be used.
fn through_nvml<T>(read: impl FnOnce(&'static Nvml) -> Reported<T>) -> Reported<T> {
    match nvml() {
        Ok(nvml) => read(nvml),
        Err(reason) => Reported::unavailable(reason.to_string()),
    }
}

/// The board record of the GPU with `uuid`, or why NVML cannot give it.
pub fn board(uuid: &str) -> Reported<BoardRecord> {
    through_nvml(|nvml| board_of(nvml, uuid))
}

/// The board record of the GPU with `uuid`, read through `nvml`.
pub fn board_of(nvml: &'static Nvml, uuid: &str) -> Reported<BoardRecord> {
    let device = match device(nvml, uuid) {
        Ok(device) => device,
        Err(reason) => return Reported::unavailable(reason.to_string()),
    };
    let watts = |milliwatts: Result<u32, _>| reported(milliwatts).map_known(|mw| f64::from(mw) / 1000.0);
    Reported::Known(BoardRecord {
        serial: reported(device.serial()),
        pci_bus_id: reported(device.pci_info().map(|p| p.bus_id)),
        vbios: reported(device.vbios_version()),
        driver_version: reported(nvml.sys_driver_version()),
        cuda_driver_version: reported(nvml.sys_cuda_driver_version())
            .map_known(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        power_limit_default_w: watts(device.power_management_limit_default()),
        power_limit_enforced_w: watts(device.enforced_power_limit()),
        ecc_enabled: reported(device.is_ecc_enabled().map(|e| e.currently_enabled)),
        mig_enabled: reported(device.mig_mode().map(|m| m.current != 0)),
        persistence_mode: reported(device.is_in_persistent_mode()),
    })
}

/// How many processes hold a context on the GPU with `uuid` (compute or graphics, each process
/// once), or why NVML cannot say. The pids are not compared with lynx's own: in a container
/// NVML gives the host's pids, which the container's are not.
pub fn processes(uuid: &str) -> Reported<u32> {
    through_nvml(|nvml| processes_of(nvml, uuid))
}

/// [`processes`], read through `nvml`.
pub fn processes_of(nvml: &'static Nvml, uuid: &str) -> Reported<u32> {
    let device = match device(nvml, uuid) {
        Ok(device) => device,
        Err(reason) => return Reported::unavailable(reason.to_string()),
    };
    let listed = device.running_compute_processes().and_then(|compute| {
        let graphics = device.running_graphics_processes()?;
        Ok(compute.into_iter().chain(graphics).map(|p| p.pid).collect::<std::collections::BTreeSet<u32>>())
    });
    match listed {
        Ok(pids) => Reported::Known(u32::try_from(pids.len()).unwrap_or(u32::MAX)),
        Err(e) => Reported::unavailable(format!("nvmlDeviceGetComputeRunningProcesses_v3: {e}")),
    }
}

/// The telemetry of one NVIDIA GPU.
pub struct NvmlSource {
    device: Device<'static>,
    name: String,
    /// Whether the instantaneous power field answered on the first reading.
    instant_power: bool,
    labels: Vec<(String, String)>,
    unavailable: Vec<(String, String)>,
}

/// One reading, with why each missing value is missing (collected only when asked for).
struct Reading {
    sample: Sample,
    missing: Vec<(&'static str, String)>,
}

impl NvmlSource {
    /// The source for the GPU with `uuid`, or why it cannot be had.
    pub fn for_uuid(uuid: &str) -> Result<NvmlSource, NvmlUnavailable> {
        NvmlSource::new(nvml()?, uuid)
    }

    /// The source for the GPU with `uuid`, read through `nvml`.
    pub fn new(nvml: &'static Nvml, uuid: &str) -> Result<NvmlSource, NvmlUnavailable> {
        let device = device(nvml, uuid)?;
        let instant_power = matches!(batched_fields(&device, [NVML_FI_DEV_POWER_INSTANT]), [Ok(_)]);
        let mut source = NvmlSource {
            device,
            name: format!("nvml:{uuid}"),
            instant_power,
            labels: Vec::new(),
            unavailable: Vec::new(),
        };
        let first = source.read(true);
        let memory_sensor = first.missing.iter().find(|(what, _)| *what == "memory_temperature_c");
        let temperature = match memory_sensor {
            None => "the hotter of the GPU and memory (NVML_FI_DEV_MEMORY_TEMP) sensors".to_owned(),
            Some((_, reason)) => format!("the GPU sensor only: the memory sensor does not answer ({reason})"),
        };
        let power = if instant_power {
            "NVML_FI_DEV_POWER_INSTANT (instantaneous board power)"
        } else {
            "averaged power, NVML_FI_DEV_POWER_AVERAGE or else nvmlDeviceGetPowerUsage (a 1-second average on \
             Ampere and newer): the device has no instantaneous field"
        };
        source.labels = vec![
            ("power_w".to_owned(), power.to_owned()),
            (
                "energy_j".to_owned(),
                "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, the total-energy counter (updated every 10-100 ms)".to_owned(),
            ),
            ("temperature_c".to_owned(), temperature),
        ];
        source.unavailable = first
            .missing
            .into_iter()
            .filter(|(what, _)| *what != "memory_temperature_c")
            .map(|(what, reason)| (what.to_owned(), reason))
            .collect();
        Ok(source)
    }

    /// One reading of every value; with `explain`, why each missing one is missing. Each call is
    /// timed, and a reading slower than `SLOW_READING_S` keeps what each took.
    fn read(&self, explain: bool) -> Reading {
        let d = &self.device;
        let mut missing = Missing { explain, list: Vec::new() };
        let mut calls = CallTimer::start();
        let power_field = if self.instant_power { NVML_FI_DEV_POWER_INSTANT } else { NVML_FI_DEV_POWER_AVERAGE };
        let [power, energy, memory_temperature] =
            batched_fields(d, [power_field, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, NVML_FI_DEV_MEMORY_TEMP]);
        calls.lap("nvmlDeviceGetFieldValues");
        // NVML gives power in mW and energy in mJ.
        let power_w = match power {
            Ok(mw) => Ok(mw / 1000.0),
            Err(field) => {
                let power = d.power_usage().map(|mw| f64::from(mw) / 1000.0).map_err(|call| {
                    missing.note(
                        "power_w",
                        &[&format!("power field: {field}"), &format!("nvmlDeviceGetPowerUsage: {call}")],
                    )
                });
                calls.lap("nvmlDeviceGetPowerUsage");
                power
            }
        }
        .ok();
        let energy_j = match energy {
            Ok(mj) => Ok(mj / 1000.0),
            Err(field) => {
                let energy = d.total_energy_consumption().map(|mj| mj as f64 / 1000.0).map_err(|call| {
                    missing.note(
                        "energy_j",
                        &[
                            &format!("NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: {field}"),
                            &format!("nvmlDeviceGetTotalEnergyConsumption: {call}"),
                        ],
                    )
                });
                calls.lap("nvmlDeviceGetTotalEnergyConsumption");
                energy
            }
        }
        .ok();
        let gpu_temperature = d.temperature(TemperatureSensor::Gpu).map(f64::from);
        calls.lap("nvmlDeviceGetTemperature(GPU)");
        if let Err(e) = &memory_temperature {
            missing.note("memory_temperature_c", &[e]);
        }
        let temperature_c = match (&gpu_temperature, &memory_temperature) {
            (Ok(gpu), Ok(memory)) => Some(gpu.max(*memory)),
            (Ok(only), Err(_)) | (Err(_), Ok(only)) => Some(*only),
            (Err(gpu), Err(memory)) => {
                missing.note("temperature_c", &[&format!("GPU sensor: {gpu}"), &format!("memory sensor: {memory}")]);
                None
            }
        };
        let sm_clock_mhz = missing.ok("sm_clock_mhz", d.clock_info(Clock::SM).map(f64::from));
        calls.lap("nvmlDeviceGetClockInfo(SM)");
        let mem_clock_mhz = missing.ok("mem_clock_mhz", d.clock_info(Clock::Memory).map(f64::from));
        calls.lap("nvmlDeviceGetClockInfo(memory)");
        let utilisation = missing.ok("utilisation", d.utilization_rates().map(|u| f64::from(u.gpu) / 100.0));
        calls.lap("nvmlDeviceGetUtilizationRates");
        let memory_used_bytes = missing.ok("memory_used_bytes", d.memory_info().map(|m| m.used));
        calls.lap("nvmlDeviceGetMemoryInfo");
        let throttle = d
            .current_throttle_reasons()
            .map(|reasons| throttle_reasons(reasons.bits()))
            .map_err(|e| missing.note("throttle", &[&format!("nvmlDeviceGetCurrentClocksThrottleReasons: {e}")]))
            .unwrap_or_default();
        calls.lap("nvmlDeviceGetCurrentClocksThrottleReasons");
        Reading {
            sample: Sample {
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
            },
            missing: missing.list,
        }
    }
}

/// Why values of one reading are missing, collected only when the reading is to explain itself
/// (a source's first reading); later readings keep none.
struct Missing {
    explain: bool,
    list: Vec<(&'static str, String)>,
}

impl Missing {
    /// Record that `what` is missing, for `reasons` (joined by "; ").
    fn note(&mut self, what: &'static str, reasons: &[&dyn std::fmt::Display]) {
        if self.explain {
            let text: Vec<String> = reasons.iter().map(|r| r.to_string()).collect();
            self.list.push((what, text.join("; ")));
        }
    }

    /// The value of `result`, or `None` with its error noted against `what`.
    fn ok<T>(&mut self, what: &'static str, result: Result<T, NvmlError>) -> Option<T> {
        result.map_err(|e| self.note(what, &[&e])).ok()
    }
}

/// The values of `ids` from one field-values call, in order, or why each is missing.
fn batched_fields<const N: usize>(device: &Device<'static>, ids: [u32; N]) -> [Result<f64, String>; N] {
    match device.field_values_for(&ids.map(FieldId)) {
        Ok(values) => {
            let mut values = values.into_iter();
            std::array::from_fn(|_| match values.next() {
                Some(value) => {
                    value.and_then(|sample| sample.value).map(|v| sample_value_f64(&v)).map_err(|e| e.to_string())
                }
                None => Err("nvmlDeviceGetFieldValues answered fewer fields".to_owned()),
            })
        }
        Err(e) => {
            let reason = format!("nvmlDeviceGetFieldValues: {e}");
            std::array::from_fn(|_| Err(reason.clone()))
        }
    }
}

fn sample_value_f64(value: &SampleValue) -> f64 {
    match *value {
        SampleValue::F64(v) => v,
        SampleValue::U32(v) => f64::from(v),
        SampleValue::U64(v) => v as f64,
        SampleValue::I64(v) => v as f64,
    }
}

impl TelemetrySource for NvmlSource {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn unavailable(&self) -> Vec<(String, String)> {
        self.unavailable.clone()
    }

    fn labels(&self) -> Vec<(String, String)> {
        self.labels.clone()
    }

    fn sample(&mut self) -> Sample {
        self.read(false).sample
    }
}

/// NVML's clock-event (throttle) reason bits (`nvmlClocksEventReasons` in `nvml.h`).
const THROTTLE_BITS: [(u64, ThrottleReason); 9] = [
    (0x1, ThrottleReason::GpuIdle),
    (0x2, ThrottleReason::ApplicationsClocksSetting),
    (0x4, ThrottleReason::SwPowerCap),
    (0x8, ThrottleReason::HwSlowdown),
    (0x10, ThrottleReason::SyncBoost),
    (0x20, ThrottleReason::SwThermalSlowdown),
    (0x40, ThrottleReason::HwThermalSlowdown),
    (0x80, ThrottleReason::HwPowerBrakeSlowdown),
    (0x100, ThrottleReason::DisplayClockSetting),
];

/// The reasons set in an NVML clock-event reasons bitmask.
pub fn throttle_reasons(bits: u64) -> Vec<ThrottleReason> {
    THROTTLE_BITS.iter().filter(|(bit, _)| bits & bit != 0).map(|&(_, reason)| reason).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_loads_or_says_why_not() {
        match nvml() {
            Ok(nvml) => assert!(nvml.device_count().is_ok()),
            Err(error) => {
                let reason = error.to_string();
                eprintln!("{reason}");
                assert!(matches!(error, NvmlUnavailable::Init(_)) && reason.starts_with("NVML is unavailable: "));
                // Without NVML, a board and a source are unavailable with the same reason.
                assert_eq!(board("GPU-00000000-0000-0000-0000-000000000000"), Reported::unavailable(reason));
                assert_eq!(NvmlSource::for_uuid("GPU-x").err(), Some(error));
            }
        }
    }

    #[test]
    fn a_library_that_is_not_there_is_a_reason() {
        let Err(error) = open(Path::new("/nonexistent/libnvidia-ml.so.1")) else { panic!("no library at that path") };
        let reason = error.to_string();
        assert!(matches!(error, NvmlUnavailable::Open { .. }));
        assert!(reason.starts_with("NVML is unavailable from /nonexistent/libnvidia-ml.so.1: "), "{reason}");
    }

    #[test]
    fn nvml_bits_decode_to_names() {
        assert_eq!(throttle_reasons(0x4 | 0x40), [ThrottleReason::SwPowerCap, ThrottleReason::HwThermalSlowdown]);
        assert!(throttle_reasons(0).is_empty());
        assert!(!ThrottleReason::GpuIdle.is_hardware_slowdown());
    }
}
