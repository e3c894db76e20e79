//! lynx-nvml against lynx-fakes' stand-in libnvidia-ml: the board record, every reading's unit,
//! the fallbacks of an older board and the throttle reasons, through the same nvml-wrapper
//! calls a real driver answers. The expected values are the readings lynx-fakes documents.

use lynx_fakes::{NVML, NVML_FULL_UUID, NVML_OLDER_UUID};
use lynx_nvml::{board_of, open, processes_of, NvmlSource};
use lynx_schema::telemetry::{Sample, ThrottleReason};
use lynx_schema::value::Reported;
use lynx_telemetry::TelemetrySource;
use std::collections::BTreeMap;
use std::path::Path;

fn fake() -> &'static nvml_wrapper::Nvml {
    open(Path::new(NVML)).expect("the stand-in libnvidia-ml loads")
}

#[test]
fn the_board_record_reads_every_field_in_its_unit() {
    let Reported::Known(board) = board_of(fake(), NVML_FULL_UUID) else { panic!("a board record") };
    assert_eq!(board.serial, Reported::Known("1650924000001".to_owned()));
    assert_eq!(board.pci_bus_id, Reported::Known("00000000:19:00.0".to_owned()));
    assert_eq!(board.vbios, Reported::Known("96.00.AF.00.01".to_owned()));
    assert_eq!(board.driver_version, Reported::Known("580.95.05".to_owned()));
    assert_eq!(board.cuda_driver_version, Reported::Known("13.0".to_owned()));
    // NVML's limits are milliwatts.
    assert_eq!(board.power_limit_default_w, Reported::Known(700.0));
    assert_eq!(board.power_limit_enforced_w, Reported::Known(650.0));
    assert_eq!(board.ecc_enabled, Reported::Known(true));
    assert_eq!(board.mig_enabled, Reported::Known(false));
    assert_eq!(board.persistence_mode, Reported::Known(true));
}

#[test]
fn what_an_older_board_lacks_is_unavailable_with_nvml_s_reason() {
    let Reported::Known(board) = board_of(fake(), NVML_OLDER_UUID) else { panic!("a board record") };
    for reason in [board.serial.reason(), board.ecc_enabled.reason(), board.mig_enabled.reason()] {
        // NVML_ERROR_NOT_SUPPORTED, as nvml-wrapper words it.
        assert_eq!(reason, Some("the requested operation is not available on the target device"));
    }
    assert_eq!(board.persistence_mode, Reported::Known(false));
    assert_eq!(board.power_limit_enforced_w, Reported::Known(400.0));
}

#[test]
fn a_uuid_nvml_does_not_know_is_a_reason_not_a_device() {
    let uuid = "GPU-00000000-0000-0000-0000-00000000dead";
    let reason = board_of(fake(), uuid).reason().expect("unavailable").to_owned();
    assert!(reason.starts_with(&format!("NVML has no device {uuid}: ")), "{reason}");
    assert_eq!(NvmlSource::new(fake(), uuid).err().map(|e| e.to_string()), Some(reason));
}

#[test]
fn a_full_board_s_reading_has_every_value_in_its_unit() {
    let mut source = NvmlSource::new(fake(), NVML_FULL_UUID).expect("the source starts");
    assert_eq!(source.name(), format!("nvml:{NVML_FULL_UUID}"));
    assert_eq!(source.unavailable(), Vec::<(String, String)>::new());
    let labels: BTreeMap<String, String> = source.labels().into_iter().collect();
    assert!(labels["power_w"].starts_with("NVML_FI_DEV_POWER_INSTANT"), "{labels:?}");
    assert!(labels["temperature_c"].starts_with("the hotter of the GPU and memory"), "{labels:?}");

    let first = source.sample();
    let second = source.sample();
    // The counter in mJ gains 125 mJ per read.
    let (e1, e2) = (first.energy_j.unwrap(), second.energy_j.unwrap());
    assert!(e1 >= 5000.0, "{e1}");
    assert!((e2 - e1 - 0.125).abs() < 1e-9, "{e1} then {e2}");
    assert_eq!(
        first,
        Sample {
            t_s: 0.0,
            read_s: None,
            // The instantaneous field (412345 mW), not the averaged one or nvmlDeviceGetPowerUsage.
            power_w: Some(412.345),
            energy_j: first.energy_j,
            sm_clock_mhz: Some(1980.0),
            mem_clock_mhz: Some(3201.0),
            // The memory sensor (61 °C) is hotter than the GPU's (55 °C).
            temperature_c: Some(61.0),
            utilisation: Some(0.87),
            memory_used_bytes: Some(80 << 30),
            core_utilisation: vec![],
            core_mhz: vec![],
            // 0x44: bits 0x4 and 0x40.
            throttle: vec![ThrottleReason::SwPowerCap, ThrottleReason::HwThermalSlowdown],
            // Kept only where the reading was slow (tests/slow_reading.rs): a preemption in it can
            // make it so on a busy host.
            slow_calls: first.slow_calls.clone(),
        }
    );
}

#[test]
fn an_older_board_falls_back_and_says_what_it_lacks() {
    let mut source = NvmlSource::new(fake(), NVML_OLDER_UUID).expect("the source starts");
    let labels: BTreeMap<String, String> = source.labels().into_iter().collect();
    assert!(labels["power_w"].starts_with("averaged power"), "{labels:?}");
    assert!(labels["temperature_c"].starts_with("the GPU sensor only"), "{labels:?}");
    let unavailable: BTreeMap<String, String> = source.unavailable().into_iter().collect();
    assert_eq!(unavailable.keys().map(String::as_str).collect::<Vec<_>>(), ["energy_j", "throttle"]);
    assert!(unavailable["throttle"].starts_with("nvmlDeviceGetCurrentClocksThrottleReasons: "), "{unavailable:?}");
    assert!(unavailable["energy_j"].contains("nvmlDeviceGetTotalEnergyConsumption: "), "{unavailable:?}");
    let sample = source.sample();
    // No power field: nvmlDeviceGetPowerUsage's 250500 mW.
    assert_eq!(sample.power_w, Some(250.5));
    assert_eq!(sample.energy_j, None);
    assert_eq!(sample.temperature_c, Some(48.0));
    assert_eq!(sample.utilisation, Some(0.0));
    assert!(sample.throttle.is_empty());
}

/// The processes holding a context on a device, each once whether compute, graphics or both
/// (the full board: 4001, 4002 and 4003, the last in both lists); a device whose driver lists
/// none says why; a device NVML does not know says so.
#[test]
fn the_processes_on_a_device_are_counted_once_each() {
    assert_eq!(processes_of(fake(), NVML_FULL_UUID), Reported::Known(3));
    let older = processes_of(fake(), NVML_OLDER_UUID).reason().expect("unavailable").to_owned();
    assert!(
        older.starts_with("nvmlDeviceGetComputeRunningProcesses_v3: ") && older.contains("not available"),
        "{older}"
    );
    let unknown = processes_of(fake(), "GPU-00000000-0000-0000-0000-000000000000");
    assert!(unknown.reason().is_some_and(|r| r.starts_with("NVML has no device")), "{unknown:?}");
}
