//! The sampler over an NVML source (lynx-fakes' stand-in libnvidia-ml), from the samples file to
//! the window summary: energy by the board's counter, power, clocks and throttle shares. Its own
//! test binary, so no other test reads the stand-in's energy counter meanwhile.

use lynx_analysis::telemetry::summarise;
use lynx_fakes::{NVML, NVML_FULL_UUID};
use lynx_nvml::{open, NvmlSource};
use lynx_schema::telemetry::ThrottleReason;
use lynx_telemetry::Sampler;
use std::path::Path;
use std::time::{Duration, Instant};

#[test]
fn a_window_of_nvml_samples_is_summarised_from_the_counter() {
    let nvml = open(Path::new(NVML)).expect("the stand-in libnvidia-ml loads");
    let source = NvmlSource::new(nvml, NVML_FULL_UUID).expect("the source starts");
    let file = tempfile::NamedTempFile::new().unwrap();
    let clock = Instant::now();
    let sampler =
        Sampler::start(vec![Box::new(source)], 100.0, clock, Box::new(file.reopen().unwrap())).expect("sampler starts");
    std::thread::sleep(Duration::from_millis(600));
    let samples = sampler.stop().expect("sampler stops").remove(0);
    // The window from the first reading to the last holds every sample taken.
    let name = format!("nvml:{NVML_FULL_UUID}");
    let (first, last) = (samples[0].t_s, samples[samples.len() - 1].t_s);
    let summary = summarise(&name, &samples, first, last, 100.0).unwrap();
    let n = summary.samples;
    assert_eq!(n, samples.len() as u64);
    assert!(n >= 30, "{n} samples in {:.2} s at 100 Hz", last - first);
    let energy = summary.energy.expect("the board has an energy counter");
    assert_eq!(energy.method, "counter");
    // Each reading reads the counter once, and it gains 125 mJ per read.
    let joules = energy.joules.get();
    assert!((joules - 0.125 * (n - 1) as f64).abs() < 1e-6, "{joules} J over {n} samples");
    // A window wider than the readings is bridged at each edge with the power read there.
    let end = clock.elapsed().as_secs_f64();
    let wider = summarise(&name, &samples, 0.0, end, 100.0).unwrap().energy.unwrap().joules.get();
    let bridged = joules + 412.345 * (first + (end - last));
    assert!((wider - bridged).abs() < 1e-6, "{wider} J against {bridged}");
    let power = summary.power_mean_w.expect("power").get();
    assert!((power - 412.345).abs() < 1e-9, "{power}");
    let sm = summary.sm_clock_mhz.expect("SM clock");
    assert_eq!((sm.min.get(), sm.median.get(), sm.max.get()), (1980.0, 1980.0, 1980.0));
    assert_eq!(summary.temperature_max_c.map(|c| c.get()), Some(61.0));
    let shares: Vec<(ThrottleReason, f64)> = summary.throttle.iter().map(|(r, s)| (*r, s.get())).collect();
    assert_eq!(shares, [(ThrottleReason::SwPowerCap, 1.0), (ThrottleReason::HwThermalSlowdown, 1.0)]);
    // Every reading went to the samples file as it was taken.
    let lines = std::fs::read_to_string(file.path()).unwrap();
    assert_eq!(lines.lines().count() as u64, n);
    let decoded = "\"throttle\":[\"sw_power_cap\",\"hw_thermal_slowdown\"]";
    assert!(lines.lines().all(|l| l.contains("\"power_w\":412.345") && l.contains(decoded)), "{lines}");
}
