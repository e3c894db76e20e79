//! Telemetry samples (one line of the samples file) and their per-window summaries (DESIGN.md
//! section 5, `telemetry`); lynx-analysis's `telemetry` computes the summaries.

use crate::value::Finite;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Why a device ran below its clocks: NVML's clock-event reasons (`nvmlClocksEventReasons`;
/// decoded by lynx-nvml), and the groups of AMD's ASIC-independent throttler bits
/// (`SMU_THROTTLER_*` in the amdgpu driver, reported in `gpu_metrics`' `indep_throttle_status`;
/// decoded by lynx-rocm).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleReason {
    GpuIdle,
    ApplicationsClocksSetting,
    SwPowerCap,
    HwSlowdown,
    SyncBoost,
    SwThermalSlowdown,
    HwThermalSlowdown,
    HwPowerBrakeSlowdown,
    DisplayClockSetting,
    /// AMD: a package power tracking or sustained/fast power limit (PPT0-3, SPL, FPPT, SPPT).
    AmdPowerLimit,
    /// AMD: a thermal or electrical design current limit, or APCC (TDC, EDC, APCC).
    AmdCurrentLimit,
    /// AMD: a temperature limit (GPU, core, memory, edge, hotspot, SoC, voltage regulators,
    /// liquid) or a voltage regulator's VRHOT.
    AmdThermalLimit,
    /// AMD: an external PROCHOT assertion.
    AmdProchot,
    /// AMD: platform power management (PPM) or the reliability (FIT) limiter.
    AmdPlatformLimit,
}

impl ThrottleReason {
    /// Whether the reason is the board holding its power limit (NVIDIA's software power cap, AMD's
    /// package power limits): a slowdown, but the one a board at its rated power runs under.
    pub fn is_power_cap(self) -> bool {
        matches!(self, ThrottleReason::SwPowerCap | ThrottleReason::AmdPowerLimit)
    }

    /// Whether the reason is the hardware slowing the device down (as opposed to idling or a
    /// setting): these block equilibrium.
    pub fn is_hardware_slowdown(self) -> bool {
        matches!(
            self,
            ThrottleReason::HwSlowdown
                | ThrottleReason::HwThermalSlowdown
                | ThrottleReason::HwPowerBrakeSlowdown
                | ThrottleReason::SwThermalSlowdown
                | ThrottleReason::SwPowerCap
                | ThrottleReason::AmdPowerLimit
                | ThrottleReason::AmdCurrentLimit
                | ThrottleReason::AmdThermalLimit
                | ThrottleReason::AmdProchot
                | ThrottleReason::AmdPlatformLimit
        )
    }
}

/// One reading of a telemetry source. Absent fields are values the source does not provide
/// (the source's `unavailable` list says why); present ones are finite.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Seconds on the run's monotonic clock, as the reading ended.
    pub t_s: f64,
    /// How long the reading took, ending at `t_s` (absent in samples written before lynx timed
    /// its readings). A cell's slow steps are set against these intervals (`CellRecord`'s
    /// `slow_steps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_s: Option<f64>,
    /// Board (GPU) or package (CPU, RAPL) power.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    /// Cumulative energy counter (its zero is arbitrary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j: Option<f64>,
    /// SM clock (GPU) or mean core frequency (CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_mhz: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_clock_mhz: Option<f64>,
    /// Hottest sensor of the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<f64>,
    /// Busy share, 0 to 1 (GPU utilisation, or mean CPU core utilisation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilisation: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<u64>,
    /// Per-core utilisation, 0 to 1 (host only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_utilisation: Vec<f64>,
    /// Per-core frequency, MHz (host only); `sm_clock_mhz` is their mean.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub core_mhz: Vec<f64>,
    /// Active clock-event reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle: Vec<ThrottleReason>,
    /// Where a slow reading's time went: each call a source that times its calls (NVML's) made
    /// for a reading that took longer than [`SLOW_READING_S`], in order, with its seconds. Empty
    /// for every quicker reading, from other sources, and in samples written before lynx kept
    /// them: a vendor library's call that holds a driver lock for milliseconds can hold up the
    /// steps measured beside it, and this names the call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slow_calls: Vec<CallTime>,
}

/// A reading that took longer than this (seconds) keeps what each of its calls took
/// ([`Sample::slow_calls`]): a millisecond, a tenth of a launch-bound eager step on the H200 and
/// half of what its slow steps lost. What a GPU library's reading usually takes has not been
/// timed on a device yet; each sample's `read_s` will say.
pub const SLOW_READING_S: f64 = 1e-3;

/// One call of a reading, and how long it took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallTime {
    /// The library's entry point, with what it was asked where one entry point is called more
    /// than once (`nvmlDeviceGetClockInfo(SM)`).
    pub call: String,
    pub s: f64,
}

impl Sample {
    /// The sample with every non-finite reading dropped: a reading that is not a number is a
    /// reading the source did not give.
    pub fn sanitised(mut self) -> Sample {
        let keep = |v: Option<f64>| v.filter(|x| x.is_finite());
        self.power_w = keep(self.power_w);
        self.energy_j = keep(self.energy_j);
        self.sm_clock_mhz = keep(self.sm_clock_mhz);
        self.mem_clock_mhz = keep(self.mem_clock_mhz);
        self.temperature_c = keep(self.temperature_c);
        self.utilisation = keep(self.utilisation);
        if self.core_utilisation.iter().any(|x| !x.is_finite()) {
            self.core_utilisation.clear();
        }
        if self.core_mhz.iter().any(|x| !x.is_finite()) {
            self.core_mhz.clear();
        }
        self.slow_calls.retain(|c| c.s.is_finite());
        self
    }
}

/// One line of a run's samples file (JSON Lines, the file a result names in
/// `telemetry.samples_file`). Each process that works on a run opens its part with a segment
/// line; the times of the samples after it count from that line. Borrowed when written (the
/// sampler writes 100 a second), owned when read (`SamplesLine<'static>`). Nearly every line is a
/// sample: boxing the large variant would only add an allocation to each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)]
pub enum SamplesLine<'a> {
    /// `{"kind":"segment","segment":…,"started_at":…}`
    Segment {
        /// 1 for the process that started the run, then one more for each resume.
        segment: u32,
        /// When this segment's clock (`t_s` = 0) started (RFC 3339, UTC).
        started_at: Cow<'a, str>,
        /// Bytes of a line torn by the end of the segment before (a kill or a full disk) that
        /// were cut off before this segment began (absent: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut_bytes: Option<u64>,
    },
    /// `{"kind":"telemetry","source":…,<the sample's fields>}`
    Telemetry {
        source: Cow<'a, str>,
        #[serde(flatten)]
        sample: Cow<'a, Sample>,
    },
}

/// Minimum, median and maximum of a reading over a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: Finite,
    pub median: Finite,
    pub max: Finite,
}

/// Energy over a window and how it was obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Energy {
    pub joules: Finite,
    /// `counter` (the source's cumulative energy) or `power integration` (trapezoids over the
    /// power samples).
    pub method: String,
}

/// One source's telemetry over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowSummary {
    pub source: String,
    pub start_s: Finite,
    pub end_s: Finite,
    pub samples: u64,
    pub target_hz: Finite,
    pub achieved_hz: Finite,
    /// Share of the window not inside a gap (see the module's definitions).
    pub coverage: Finite,
    /// Intervals without a sample longer than twice the target period.
    pub gaps: u64,
    pub power_mean_w: Option<Finite>,
    pub power_max_w: Option<Finite>,
    pub energy: Option<Energy>,
    pub sm_clock_mhz: Option<Spread>,
    pub mem_clock_mhz: Option<Spread>,
    pub temperature_max_c: Option<Finite>,
    pub utilisation_mean: Option<Finite>,
    /// Share of samples with each reason active (reasons never seen are absent).
    pub throttle: BTreeMap<ThrottleReason, Finite>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_drops_what_is_not_finite() {
        let sample = Sample { power_w: Some(f64::NAN), sm_clock_mhz: Some(1.0), ..Sample::default() }.sanitised();
        assert_eq!((sample.power_w, sample.sm_clock_mhz), (None, Some(1.0)));
        assert!(!ThrottleReason::GpuIdle.is_hardware_slowdown());
        assert_eq!(serde_json::to_string(&ThrottleReason::AmdThermalLimit).unwrap(), "\"amd_thermal_limit\"");
    }

    /// The samples file's two kinds of line keep the bytes the sampler and runner wrote before
    /// they shared this type (the samples of published results are read with it).
    #[test]
    fn samples_lines_keep_their_bytes() {
        let sample =
            Sample { t_s: 1.5, power_w: Some(300.0), throttle: vec![ThrottleReason::SwPowerCap], ..Sample::default() };
        let line = SamplesLine::Telemetry { source: Cow::Borrowed("nvml"), sample: Cow::Borrowed(&sample) };
        let json = serde_json::to_string(&line).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"telemetry","source":"nvml","t_s":1.5,"power_w":300.0,"throttle":["sw_power_cap"]}"#
        );
        assert_eq!(serde_json::from_str::<SamplesLine>(&json).unwrap(), line);
        let segment = SamplesLine::Segment { segment: 2, started_at: "2026-12-01T00:00:00Z".into(), cut_bytes: None };
        let json = serde_json::to_string(&segment).unwrap();
        assert_eq!(json, r#"{"kind":"segment","segment":2,"started_at":"2026-12-01T00:00:00Z"}"#);
        assert_eq!(serde_json::from_str::<SamplesLine>(&json).unwrap(), segment);
        assert!(serde_json::from_str::<SamplesLine>(r#"{"kind":"telemetry","source":"nvml","t_s":1.5,"pow"#).is_err());
    }
}
