//! NVIDIA devices through NVML: the board's identity for the result, and a telemetry source.
//!
//! nvml-wrapper loads libnvidia-ml at run time, so this crate builds everywhere and, on a host
//! without the NVIDIA driver, every call reports why NVML is unavailable instead of failing to
//! start. A libtorch `cuda:N` device is matched to its NVML device by the UUID the CUDA driver
//! gives it, never by index (CUDA_VISIBLE_DEVICES and NVML order devices differently).
//!
//! Readings (NVML API reference): power from the instantaneous field `NVML_FI_DEV_POWER_INSTANT`
//! through `nvmlDeviceGetFieldValues` where the device has it, else `nvmlDeviceGetPowerUsage`
//! (a 1-second average on Ampere and newer), labelled as such; the total-energy counter (mJ);
//! SM and memory clocks; the hotter of the GPU and memory (HBM) temperatures; utilisation;
//! memory used; and the clock-event (throttle) reasons, decoded into names. Power, energy and
//! memory temperature come from one batched `nvmlDeviceGetFieldValues` call per sample, each
//! falling back to its own call where the field does not answer.

use lynx_core::result::BoardRecord;
use lynx_core::telemetry::{Sample, ThrottleReason};
use lynx_core::value::Reported;
use lynx_telemetry::TelemetrySource;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_MEMORY_TEMP, NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT, NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION,
};
use nvml_wrapper::{Device, Nvml};
use std::sync::OnceLock;

/// The process's NVML handle, initialised once and kept for the process's life (devices borrow
/// it), or why NVML cannot be used here.
pub fn nvml() -> Result<&'static Nvml, String> {
    static NVML: OnceLock<Result<&'static Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| {
        Nvml::init().map(|nvml| &*Box::leak(Box::new(nvml))).map_err(|e| format!("NVML is unavailable: {e}"))
    })
    .clone()
}

fn device(uuid: &str) -> Result<Device<'static>, String> {
    nvml()?.device_by_uuid(uuid).map_err(|e| format!("NVML has no device {uuid}: {e}"))
}

fn reported<T>(result: Result<T, nvml_wrapper::error::NvmlError>) -> Reported<T> {
    result.map_err(|e| e.to_string()).into()
}

/// The board record of the GPU with `uuid`, or why NVML cannot give it.
pub fn board(uuid: &str) -> Reported<BoardRecord> {
    let (nvml, device) = match nvml().and_then(|nvml| Ok((nvml, device(uuid)?))) {
        Ok(found) => found,
        Err(reason) => return Reported::unavailable(reason),
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

/// The telemetry of one NVIDIA GPU.
pub struct NvmlSource {
    device: Device<'static>,
    name: String,
    /// Whether the instantaneous power field answered on the first reading.
    instant_power: bool,
}

impl NvmlSource {
    /// The source for the GPU with `uuid`, or why it cannot be had.
    pub fn for_uuid(uuid: &str) -> Result<NvmlSource, String> {
        let device = device(uuid)?;
        let instant_power = matches!(power_instant(&device), Some(Ok(_)));
        Ok(NvmlSource { device, name: format!("nvml:{uuid}"), instant_power })
    }
}

/// The instantaneous power field, in watts.
fn power_instant(device: &Device<'static>) -> Option<Result<f64, String>> {
    let values = device.field_values_for(&[FieldId(NVML_FI_DEV_POWER_INSTANT)]).ok()?;
    let value: Result<FieldValueSample, _> = values.into_iter().next()?;
    Some(value.map_err(|e| e.to_string()).and_then(|sample| match sample.value {
        Ok(v) => Ok(sample_value_f64(&v) / 1000.0),
        Err(e) => Err(e.to_string()),
    }))
}

/// Power (W), energy (J) and memory temperature (°C) from one field-values call.
fn batched_fields(device: &Device<'static>, instant_power: bool) -> [Option<f64>; 3] {
    let power = if instant_power { NVML_FI_DEV_POWER_INSTANT } else { NVML_FI_DEV_POWER_AVERAGE };
    let ids = [FieldId(power), FieldId(NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION), FieldId(NVML_FI_DEV_MEMORY_TEMP)];
    let Ok(values) = device.field_values_for(&ids) else { return [None; 3] };
    let mut out = [None; 3];
    for (slot, value) in out.iter_mut().zip(values) {
        *slot = value.ok().and_then(|sample| sample.value.ok()).map(|v| sample_value_f64(&v));
    }
    // NVML gives power in mW and energy in mJ.
    [out[0].map(|mw| mw / 1000.0), out[1].map(|mj| mj / 1000.0), out[2]]
}

fn sample_value_f64(value: &nvml_wrapper::enums::device::SampleValue) -> f64 {
    use nvml_wrapper::enums::device::SampleValue;
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
        Vec::new()
    }

    fn labels(&self) -> Vec<(String, String)> {
        let power = if self.instant_power {
            "NVML_FI_DEV_POWER_INSTANT (instantaneous board power)"
        } else {
            "averaged power, NVML_FI_DEV_POWER_AVERAGE or else nvmlDeviceGetPowerUsage (a 1-second average on \
             Ampere and newer): the device has no instantaneous field"
        };
        vec![
            ("power_w".to_owned(), power.to_owned()),
            (
                "energy_j".to_owned(),
                "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, the total-energy counter (updated every 10-100 ms)".to_owned(),
            ),
            (
                "temperature_c".to_owned(),
                "the hotter of the GPU and memory (NVML_FI_DEV_MEMORY_TEMP) sensors".to_owned(),
            ),
        ]
    }

    fn sample(&mut self) -> Sample {
        let d = &self.device;
        let [power_w, energy_j, memory_temperature_c] = batched_fields(d, self.instant_power);
        let power_w = power_w.or_else(|| d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0));
        let energy_j = energy_j.or_else(|| d.total_energy_consumption().ok().map(|mj| mj as f64 / 1000.0));
        let gpu_temperature_c = d.temperature(TemperatureSensor::Gpu).ok().map(f64::from);
        Sample {
            t_s: 0.0,
            power_w,
            energy_j,
            sm_clock_mhz: d.clock_info(Clock::SM).ok().map(f64::from),
            mem_clock_mhz: d.clock_info(Clock::Memory).ok().map(f64::from),
            temperature_c: gpu_temperature_c.into_iter().chain(memory_temperature_c).reduce(f64::max),
            utilisation: d.utilization_rates().ok().map(|u| f64::from(u.gpu) / 100.0),
            memory_used_bytes: d.memory_info().ok().map(|m| m.used),
            core_utilisation: Vec::new(),
            core_mhz: Vec::new(),
            throttle: d
                .current_throttle_reasons()
                .map(|r| ThrottleReason::from_nvml_bits(r.bits()))
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_loads_or_says_why_not() {
        match nvml() {
            Ok(nvml) => assert!(nvml.device_count().is_ok()),
            Err(reason) => {
                eprintln!("{reason}");
                assert!(reason.starts_with("NVML is unavailable: "), "{reason}");
                // Without NVML, a board and a source are unavailable with the same reason.
                assert_eq!(board("GPU-00000000-0000-0000-0000-000000000000"), Reported::unavailable(reason.clone()));
                assert_eq!(NvmlSource::for_uuid("GPU-x").err(), Some(reason));
            }
        }
    }
}
