//! lynx-rocm against lynx-fakes' stand-in librocm_smi64 (5.x and 6.x) and a `gpu_metrics`
//! table in a stand-in sysfs folder: the board record, every reading's unit, the power and
//! clock choices by library version, and the throttle status. The expected values are the
//! readings lynx-fakes documents.

use lynx_fakes::{HIP, ROCM_SMI_5, ROCM_SMI_6, ROCM_SMI_6_THREE};
use lynx_rocm::metrics::v1_3_table;
use lynx_rocm::{board_of, open, processes_of, smi_device_of, Hip, RocmSource};
use lynx_schema::telemetry::ThrottleReason;
use lynx_schema::value::Reported;
use lynx_telemetry::TelemetrySource;
use std::collections::BTreeMap;
use std::path::Path;

/// A stand-in `/sys/bus/pci/devices` holding the fake device's function 0000:83:00.0 with
/// `gpu_metrics` = `table`, or without the file.
fn sysfs(table: Option<Vec<u8>>) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let function = root.path().join("0000:83:00.0");
    std::fs::create_dir(&function).unwrap();
    if let Some(table) = table {
        std::fs::write(function.join("gpu_metrics"), table).unwrap();
    }
    root
}

#[test]
fn the_board_record_reads_every_field_in_its_unit() {
    let smi = open(Path::new(ROCM_SMI_5)).expect("the stand-in librocm_smi64 loads");
    assert_eq!(smi.version, (5, 7, 0));
    let Reported::Known(board) = board_of(smi, 0) else { panic!("a board record") };
    assert_eq!(board.serial, Reported::Known("692231000131".to_owned()));
    assert_eq!(board.pci_bus_id, Reported::Known("0000:83:00.0".to_owned()));
    assert_eq!(board.vbios, Reported::Known("113-D67301-063".to_owned()));
    // ROCm SMI's caps are microwatts.
    assert_eq!(board.power_limit_default_w, Reported::Known(300.0));
    assert_eq!(board.power_limit_enforced_w, Reported::Known(290.0));
    let reason = board_of(smi, 1).reason().expect("no device 1").to_owned();
    assert_eq!(reason, "ROCm SMI sees 1 devices; rocm:1 is not among them");
}

#[test]
fn a_5_x_library_gives_average_power_clocks_and_the_throttle_status() {
    let smi = open(Path::new(ROCM_SMI_5)).unwrap();
    // PPT0 (bit 0) and the hotspot temperature (bit 36).
    let root = sysfs(Some(v1_3_table((1 << 36) | 1)));
    let mut source = RocmSource::new(smi, 0, root.path()).expect("the source starts");
    assert_eq!(source.unavailable(), Vec::<(String, String)>::new());
    let labels: BTreeMap<String, String> = source.labels().into_iter().collect();
    assert!(labels["power_w"].starts_with("rsmi_dev_power_ave_get"), "{labels:?}");
    assert!(labels["throttle"].contains("0000:83:00.0/gpu_metrics (gpu_metrics v1.3)"), "{labels:?}");
    let first = source.sample();
    let second = source.sample();
    assert_eq!(first.power_w, Some(280.25));
    // 2^30 counts of 2^-16 J, plus 1 J per read (other tests read the same counter meanwhile).
    let (e1, e2) = (first.energy_j.unwrap(), second.energy_j.unwrap());
    assert!(e1 >= 16384.0 && e2 > e1 && (e2 - e1).fract() == 0.0, "{e1} then {e2}");
    assert_eq!(first.sm_clock_mhz, Some(1700.0));
    assert_eq!(first.mem_clock_mhz, Some(1600.0));
    // The junction sensor is the hottest.
    assert_eq!(first.temperature_c, Some(71.5));
    assert_eq!(first.utilisation, Some(0.93));
    assert_eq!(first.memory_used_bytes, Some(12 << 30));
    assert_eq!(first.throttle, [ThrottleReason::AmdPowerLimit, ThrottleReason::AmdThermalLimit]);

    // The driver rewrites the table; the next reading sees the new status.
    std::fs::write(root.path().join("0000:83:00.0/gpu_metrics"), v1_3_table(0)).unwrap();
    assert!(source.sample().throttle.is_empty());
}

#[test]
fn a_6_x_library_gives_current_power_and_no_clocks() {
    let smi = open(Path::new(ROCM_SMI_6)).unwrap();
    assert_eq!(smi.version, (6, 2, 0));
    let root = sysfs(Some(v1_3_table(0)));
    let mut source = RocmSource::new(smi, 0, root.path()).unwrap();
    let labels: BTreeMap<String, String> = source.labels().into_iter().collect();
    assert!(labels["power_w"].starts_with("rsmi_dev_current_socket_power_get"), "{labels:?}");
    let unavailable: BTreeMap<String, String> = source.unavailable().into_iter().collect();
    assert_eq!(unavailable.keys().map(String::as_str).collect::<Vec<_>>(), ["mem_clock_mhz", "sm_clock_mhz"]);
    assert!(unavailable["sm_clock_mhz"].contains("ROCm SMI 6.2 is not a layout lynx knows"), "{unavailable:?}");
    let sample = source.sample();
    assert_eq!(sample.power_w, Some(287.5));
    assert_eq!((sample.sm_clock_mhz, sample.mem_clock_mhz), (None, None));
    assert!(sample.throttle.is_empty());
}

#[test]
fn without_a_readable_independent_status_throttle_is_unavailable_with_the_reason() {
    let smi = open(Path::new(ROCM_SMI_5)).unwrap();
    let missing = sysfs(None);
    let mut v1_2 = v1_3_table(1);
    v1_2[3] = 2;
    let older = sysfs(Some(v1_2));
    for (root, expected) in
        [(&missing, "No such file or directory"), (&older, "gpu_metrics v1.2 has no ASIC-independent throttle status")]
    {
        let mut source = RocmSource::new(smi, 0, root.path()).unwrap();
        let unavailable: BTreeMap<String, String> = source.unavailable().into_iter().collect();
        let reason = &unavailable["throttle"];
        assert!(reason.starts_with("the driver's gpu_metrics table: "), "{reason}");
        assert!(reason.contains("0000:83:00.0/gpu_metrics") && reason.contains(expected), "{reason}");
        assert!(source.sample().throttle.is_empty());
    }
}

#[test]
fn a_library_that_is_not_there_is_a_reason() {
    let Err(reason) = open(Path::new("/nonexistent/librocm_smi64.so.1")) else { panic!("no library there") };
    assert!(
        reason.starts_with("ROCm SMI is unavailable: librocm_smi64 cannot be loaded from /nonexistent/"),
        "{reason}"
    );
}

/// Issue 15: `rocm:N` is HIP ordinal N, which `HIP_VISIBLE_DEVICES` renumbers while ROCm SMI
/// numbers every device: the SMI device is found by PCI bus id. With the stand-in HIP runtime of
/// a process started with `HIP_VISIBLE_DEVICES=2,0` on three GPUs, ordinal 0 is SMI device 2 and
/// ordinal 1 is SMI device 0 (by index both would be the wrong board); an ordinal HIP does not
/// have, or a bus SMI does not see, is an error naming it, never another board.
#[test]
fn a_hip_ordinal_is_its_smi_device_by_pci_bus_id_not_by_index() {
    let hip = Hip::open(Path::new(HIP)).expect("the stand-in libamdhip64 loads");
    assert_eq!(hip.pci_bus_id(0).unwrap(), "0000:85:00.0");
    assert_eq!(hip.pci_bus_id(1).unwrap(), "0000:83:00.0");
    assert!(hip.pci_bus_id(2).unwrap_err().contains("HIP ordinal 2"));

    let three = open(Path::new(ROCM_SMI_6_THREE)).unwrap();
    assert_eq!(three.device_count().unwrap(), 3);
    assert_eq!(smi_device_of(three, &hip, 0), Ok(2));
    assert_eq!(smi_device_of(three, &hip, 1), Ok(0));
    let Reported::Known(board) = board_of(three, smi_device_of(three, &hip, 0).unwrap()) else { panic!() };
    assert_eq!(board.pci_bus_id, Reported::Known("0000:85:00.0".to_owned()));

    // A node where SMI sees only the board on bus 0x83: ordinal 0 (bus 0x85) has no SMI device.
    let one = open(Path::new(ROCM_SMI_6)).unwrap();
    let missing = smi_device_of(one, &hip, 0).unwrap_err();
    assert!(missing.contains("0000:85:00.0") && missing.contains("none of the 1 devices"), "{missing}");
    assert_eq!(smi_device_of(one, &hip, 1), Ok(0));
}

/// The processes holding compute resources on a device: of the three the stand-in lists (5001 on
/// device 0, 5002 on devices 0 and 1, 5003 on device 1), those on it; a device the library does
/// not see says so.
#[test]
fn the_processes_on_a_device_are_those_rocm_smi_lists_on_it() {
    let one = open(Path::new(ROCM_SMI_6)).unwrap();
    assert_eq!(processes_of(one, 0), Reported::Known(2));
    assert!(processes_of(one, 1).reason().is_some_and(|r| r.contains("rocm:1 is not among them")));
    let three = open(Path::new(ROCM_SMI_6_THREE)).unwrap();
    assert_eq!(
        (processes_of(three, 0), processes_of(three, 1), processes_of(three, 2)),
        (Reported::Known(2), Reported::Known(2), Reported::Known(0))
    );
}
