//! A reading slower than `SLOW_READING_S` names where its time went, call by call, so that a run
//! whose steps stall beside NVML's readings can name the call that held them; a quick reading
//! keeps nothing. Against lynx-fakes' stand-in libnvidia-ml, whose SM clock query is made to
//! take 3 ms. Its own test binary: the slowdown is the loaded library's, for every test beside it.

use lynx_nvml::NvmlSource;
use lynx_schema::telemetry::SLOW_READING_S;
use lynx_telemetry::TelemetrySource;
use std::path::Path;

#[test]
fn a_slow_reading_names_the_call_that_took_the_time() {
    let nvml = lynx_nvml::open(Path::new(lynx_fakes::NVML)).expect("the stand-in libnvidia-ml loads");
    let mut source = NvmlSource::new(nvml, lynx_fakes::NVML_FULL_UUID).unwrap();
    // A quick reading keeps no call times (one of five: a preemption inside a reading on a busy
    // host makes it slow).
    let mut quick = || (0..5).any(|_| source.sample().slow_calls.is_empty());
    assert!(quick(), "a quick reading keeps no call times");

    lynx_fakes::slow_down(lynx_fakes::NVML, "lynx_fake_nvml_slow_sm_clock", 3000);
    let sample = source.sample();
    lynx_fakes::slow_down(lynx_fakes::NVML, "lynx_fake_nvml_slow_sm_clock", 0);

    let calls: Vec<&str> = sample.slow_calls.iter().map(|c| c.call.as_str()).collect();
    assert_eq!(
        calls,
        [
            "nvmlDeviceGetFieldValues",
            "nvmlDeviceGetTemperature(GPU)",
            "nvmlDeviceGetClockInfo(SM)",
            "nvmlDeviceGetClockInfo(memory)",
            "nvmlDeviceGetUtilizationRates",
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
        ]
    );
    let took = |name: &str| sample.slow_calls.iter().find(|c| c.call == name).unwrap().s;
    assert!(took("nvmlDeviceGetClockInfo(SM)") >= 3e-3, "{:?}", sample.slow_calls);
    // The clock query took the time, not the others.
    let others: f64 = sample.slow_calls.iter().filter(|c| c.call != "nvmlDeviceGetClockInfo(SM)").map(|c| c.s).sum();
    assert!(others < took("nvmlDeviceGetClockInfo(SM)"), "{:?}", sample.slow_calls);
    assert!(sample.slow_calls.iter().map(|c| c.s).sum::<f64>() > SLOW_READING_S);
    // Readings were as they are on a quick reading.
    assert_eq!(sample.sm_clock_mhz, Some(1980.0));

    // The sample as the samples file holds it: the calls, each with its seconds.
    let json = serde_json::to_value(&sample).unwrap();
    assert_eq!(json["slow_calls"][2]["call"], "nvmlDeviceGetClockInfo(SM)", "{json}");
    assert!(json["slow_calls"][2]["s"].as_f64().is_some_and(|s| s >= 3e-3), "{json}");
    assert!((0..5).any(|_| source.sample().slow_calls.is_empty()), "quick again");
}
