//! A ROCm SMI reading slower than `SLOW_READING_S` names where its time went, call by call, as
//! an NVML one does; a quick reading keeps nothing. Against lynx-fakes' stand-in librocm_smi64
//! (5.x), whose busy-percent query is made to take 3 ms. Its own test binary: the slowdown is the
//! loaded library's, for every test beside it.

use lynx_rocm::{open, RocmSource};
use lynx_telemetry::TelemetrySource;
use std::path::Path;

#[test]
fn a_slow_reading_names_the_call_that_took_the_time() {
    let smi = open(Path::new(lynx_fakes::ROCM_SMI_5)).expect("the stand-in librocm_smi64 loads");
    // A stand-in /sys/bus/pci/devices with the device's function and no gpu_metrics table.
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("0000:83:00.0")).unwrap();
    let mut source = RocmSource::new(smi, 0, root.path()).unwrap();
    // One of five: a preemption inside a reading on a busy host makes it slow.
    assert!((0..5).any(|_| source.sample().slow_calls.is_empty()), "a quick reading keeps no call times");

    lynx_fakes::slow_down(lynx_fakes::ROCM_SMI_5, "lynx_fake_rocm_slow_busy", 3000);
    let sample = source.sample();
    lynx_fakes::slow_down(lynx_fakes::ROCM_SMI_5, "lynx_fake_rocm_slow_busy", 0);

    let calls: Vec<&str> = sample.slow_calls.iter().map(|c| c.call.as_str()).collect();
    assert_eq!(
        calls,
        [
            "rsmi_dev_power_ave_get",
            "rsmi_dev_energy_count_get",
            "rsmi_dev_gpu_clk_freq_get(system)",
            "rsmi_dev_gpu_clk_freq_get(memory)",
            "rsmi_dev_temp_metric_get(edge, junction, memory)",
            "rsmi_dev_busy_percent_get",
            "rsmi_dev_memory_usage_get",
            "gpu_metrics (throttle status)",
        ]
    );
    let took = |name: &str| sample.slow_calls.iter().find(|c| c.call == name).unwrap().s;
    assert!(took("rsmi_dev_busy_percent_get") >= 3e-3, "{:?}", sample.slow_calls);
    let others: f64 = sample.slow_calls.iter().filter(|c| c.call != "rsmi_dev_busy_percent_get").map(|c| c.s).sum();
    assert!(others < took("rsmi_dev_busy_percent_get"), "{:?}", sample.slow_calls);
    assert_eq!(sample.utilisation, Some(0.93), "the reading as a quick one's");
    assert!((0..5).any(|_| source.sample().slow_calls.is_empty()), "quick again");
}
