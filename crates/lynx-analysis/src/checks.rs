//! The checks a finished measurement is held to, derived from the result itself.
//!
//! - `equilibrium`: warm-up reached equilibrium (docs/EQUILIBRIUM.md); the detail also says how
//!   the warm-up's step timed again after the sweep compares with its equilibrium pace (not
//!   judged).
//! - `telemetry_coverage`: the device's source covered at least [`MIN_COVERAGE`] of the
//!   measurement windows' total time (gaps as `telemetry::summarise` defines them).
//! - `throttling`: no hardware slowdown reason during any cell's timed steps; each reason found
//!   is named with its largest share of a cell's samples. Made only where the device's source
//!   reports throttle state at all: a check that cannot be evaluated is left out, and the source
//!   record says why, rather than counted as a pass. Power capping (NVIDIA's `SwPowerCap`, AMD's
//!   power limits) at the board's own default power limit is how a stock board runs compute-bound
//!   work (an H200's prefill holds its 700 W): it is named in the detail, with the limit, and does
//!   not fail the check. Below the default limit (an administrator lowered it), or where either
//!   limit is unknown, it fails like any other slowdown: the figures would not describe the board
//!   as it ships.
//! - `stability`: every measured cell's step-time CV within the suite's bound, and no process
//!   but lynx's keeping the host's CPUs busy past its bound during a cell ([`unstable`]).

use lynx_schema::result::{BoardRecord, CellRecord, Check, CheckName, SlowSteps, SourceRecord, WarmupRecord};
use lynx_schema::telemetry::ThrottleReason;
use lynx_schema::value::Finite;
use std::collections::BTreeMap;

/// Share of measurement time telemetry must cover.
pub const MIN_COVERAGE: f64 = 0.95;

fn check(name: CheckName, passed: bool, detail: String, measured: Option<f64>, limit: Option<f64>) -> Check {
    Check {
        name,
        passed,
        detail,
        measured: measured.and_then(|m| Finite::new(m, name.as_str()).ok()),
        limit: limit.and_then(|l| Finite::new(l, name.as_str()).ok()),
    }
}

/// The checks of a run whose warm-up and cells are done; `device_source` is the source the
/// device's telemetry came from (the first of the run's sources), `board` what the GPU's
/// management library says of its board (its power limits), where known.
pub fn measurement_checks(
    warmups: &[&WarmupRecord],
    cells: &[CellRecord],
    device_source: Option<&SourceRecord>,
    board: Option<&BoardRecord>,
) -> Vec<Check> {
    let mut checks = Vec::new();
    let reached = !warmups.is_empty() && warmups.iter().all(|w| w.equilibrium_reached);
    let describe = |w: &WarmupRecord| {
        // Whether the device kept that pace through the cells: said, not judged.
        let again = w.after_sweep_words().map_or(String::new(), |words| format!("; {words}"));
        if w.equilibrium_reached {
            format!("reached after {:.1} s of warm-up{again}", w.duration_s.get())
        } else {
            format!("not reached in {:.1} s of warm-up (see its last_window){again}", w.duration_s.get())
        }
    };
    checks.push(check(
        CheckName::Equilibrium,
        reached,
        match warmups {
            [] => "the run did not warm up".to_owned(),
            [only] => describe(only),
            all => format!(
                "{} warm-ups (the run was resumed): {}",
                all.len(),
                all.iter().map(|w| describe(w)).collect::<Vec<_>>().join("; ")
            ),
        },
        None,
        None,
    ));

    let Some(source) = device_source else { return checks };
    let windows: Vec<_> = cells
        .iter()
        .flat_map(|c| c.telemetry.iter().filter(|w| w.source == source.name).map(move |w| (c, w)))
        .collect();
    let total: f64 = windows.iter().map(|(_, w)| w.end_s.get() - w.start_s.get()).sum();
    let covered: f64 = windows.iter().map(|(_, w)| (w.end_s.get() - w.start_s.get()) * w.coverage.get()).sum();
    checks.push(if windows.is_empty() || total <= 0.0 {
        // Nothing measured (a run stopped before its first cell): no coverage to state.
        check(
            CheckName::TelemetryCoverage,
            false,
            format!("{} sampled no measured cell: the run has no cell measured yet", source.name),
            None,
            Some(MIN_COVERAGE),
        )
    } else {
        let coverage = covered / total;
        check(
            CheckName::TelemetryCoverage,
            coverage >= MIN_COVERAGE,
            format!(
                "{} covered {:.1}% of {:.1} s of measurement in {} windows (limit {:.0}%)",
                source.name,
                coverage * 100.0,
                total,
                windows.len(),
                MIN_COVERAGE * 100.0
            ),
            Some(coverage),
            Some(MIN_COVERAGE),
        )
    });

    if !source.unavailable.contains_key("throttle") {
        let mut worst: BTreeMap<ThrottleReason, (f64, String)> = BTreeMap::new();
        for (cell, window) in &windows {
            for (reason, share) in window.throttle.iter().filter(|(r, _)| r.is_hardware_slowdown()) {
                let entry = worst.entry(*reason).or_insert((0.0, String::new()));
                if share.get() > entry.0 {
                    *entry = (share.get(), cell.shape.to_string());
                }
            }
        }
        let at_default = default_power_limit(board);
        let (capped, slowed): (BTreeMap<_, _>, BTreeMap<_, _>) =
            worst.into_iter().partition(|(reason, _)| reason.is_power_cap() && at_default.is_some());
        let named = |reasons: &BTreeMap<ThrottleReason, (f64, String)>| {
            reasons
                .iter()
                .map(|(reason, (share, cell))| format!("{reason:?} in {:.0}% of samples of {cell}", share * 100.0))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let mut detail = if slowed.is_empty() {
            format!("no hardware slowdown reported by {} during measurement", source.name)
        } else {
            named(&slowed)
        };
        if let Some(watts) = at_default.filter(|_| !capped.is_empty()) {
            detail.push_str(&format!(
                "; held at the board's default {watts:.0} W power limit, as a stock board runs: {}",
                named(&capped)
            ));
        }
        let share = slowed.values().map(|(s, _)| *s).fold(0.0, f64::max);
        checks.push(check(CheckName::Throttling, slowed.is_empty(), detail, Some(share), Some(0.0)));
    }
    checks
}

/// The board's power limit in watts where it enforces its own default one (within half a watt),
/// else `None`: a lowered limit, or either limit unknown.
fn default_power_limit(board: Option<&BoardRecord>) -> Option<f64> {
    let board = board?;
    let (default, enforced) = (*board.power_limit_default_w.known()?, *board.power_limit_enforced_w.known()?);
    ((default - enforced).abs() <= 0.5).then_some(enforced)
}

/// What makes a cell stable: a suite's `[measure]` bounds, on a GPU or a CPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StabilityBounds {
    pub max_cv: f64,
    pub max_other_cpu_cores: f64,
    pub max_cpu_throttled_s: f64,
}

impl StabilityBounds {
    /// `measure`'s bounds for a cell on a GPU (`gpu`) or a CPU.
    pub fn of(measure: &lynx_schema::config::MeasureConfig, gpu: bool) -> StabilityBounds {
        StabilityBounds {
            max_cv: measure.max_cv_on(gpu),
            max_other_cpu_cores: measure.max_other_cpu_cores(),
            max_cpu_throttled_s: measure.max_cpu_throttled_s(),
        }
    }
}

/// How long a CFS quota on lynx's cgroup held it off its CPUs, in words, with what to do.
pub struct Throttled(pub f64);

impl std::fmt::Display for Throttled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "its cgroup's CPU quota held lynx off its CPUs for {:.1} ms (give the run more CPU time: the container's \
             CPU limit)",
            1e3 * self.0
        )
    }
}

/// Why `cell` is not stable under the bounds: its step-time CV above `max_cv`, other processes
/// keeping more than `max_other_cpu_cores` of the host's CPUs busy while it was measured,
/// another process holding a context on the device, or a CPU quota throttling lynx; `None` when
/// it is stable (or was not measured).
pub fn unstable(cell: &CellRecord, bounds: &StabilityBounds) -> Option<String> {
    let StabilityBounds { max_cv, max_other_cpu_cores, max_cpu_throttled_s } = *bounds;
    let mut reasons = Vec::new();
    if let Some(cv) = cell.step_time.as_ref().and_then(|t| t.cv).map(Finite::get).filter(|&cv| cv > max_cv) {
        // As many decimals as it takes for a CV just above the bound not to print as the bound
        // ("10.0% above 10.0%").
        let (cv, max_cv) = (100.0 * cv, 100.0 * max_cv);
        let decimals = (1..=4).find(|&d| format!("{cv:.d$}") != format!("{max_cv:.d$}")).unwrap_or(4);
        reasons.push(format!("step-time CV {cv:.decimals$}% above {max_cv:.decimals$}%"));
    }
    if let Some(cores) = cell.other_cpu_cores.map(Finite::get).filter(|&c| c > max_other_cpu_cores) {
        let of_them: String = of_the_other_load(cell.stolen_cpu_cores, cell.other_cpu_cores_elsewhere)
            .iter()
            .map(|part| format!("; {part}"))
            .collect();
        reasons.push(format!(
            "other processes kept {cores:.2} host CPU cores busy (limit {max_other_cpu_cores:.2}){of_them}"
        ));
    }
    // The device is lynx's alone while it measures: any other context on it shares its time.
    if let Some(others) = cell.other_device_processes.filter(|&n| n > 0) {
        reasons.push(format!("{others} other process(es) held a context on the device"));
    }
    // A CFS quota that throttled lynx stopped its steps for the rest of a period: the cell timed
    // the quota as much as the device.
    if let Some(throttled) = cell.cpu_throttled_s.map(Finite::get).filter(|&s| s > max_cpu_throttled_s) {
        let limit = if max_cpu_throttled_s > 0.0 {
            format!(" (limit {:.1} ms)", 1e3 * max_cpu_throttled_s)
        } else {
            String::new()
        };
        reasons.push(format!("{}{limit}", Throttled(throttled)));
    }
    (!reasons.is_empty()).then(|| reasons.join(", "))
}

/// What is said apart of a host's other load (a cell's, a served rate's), in words: what a
/// virtual machine's hypervisor stole (its steal is in that load), and how much at least was on
/// CPUs lynx could not run on (a shared node's other jobs: the load counts the whole host, as a
/// node measured alone has none); each where it came to 0.005 cores or more.
pub fn of_the_other_load(stolen: Option<Finite>, elsewhere: Option<Finite>) -> Vec<String> {
    let said = |figure: Option<Finite>| figure.map(Finite::get).filter(|&c| c >= 0.005);
    let mut parts = Vec::new();
    if let Some(stolen) = said(stolen) {
        parts.push(format!("the hypervisor stole {stolen:.2} of them"));
    }
    if let Some(elsewhere) = said(elsewhere) {
        parts.push(format!(
            "at least {elsewhere:.2} of them on CPUs lynx could not run on (another job's? a node is measured \
             alone)"
        ));
    }
    parts
}

/// Where a cell's slow steps fell, in words: "9 of its 94 steps over 1.2× the median; of them, 8
/// overlapped nvml:0's readings (the others: 10%), 1 host's (the others: 9%)".
pub fn slow_steps_words(slow: &SlowSteps) -> String {
    slow.words("the median")
}

/// How a cell's `remeasured` begins where its first measurement was set aside because it
/// contradicted itself (a layer subset measured no slower than its head alone), not because it
/// was unstable.
pub const CONTRADICTED: &str = "the first measurement contradicted itself";

/// The `stability` check over the measured cells, under the bounds `unstable` takes; none when no
/// cell was measured.
pub fn stability(cells: &[CellRecord], bounds: &StabilityBounds) -> Option<Check> {
    let StabilityBounds { max_cv, max_other_cpu_cores, .. } = *bounds;
    let measured: Vec<&CellRecord> = cells.iter().filter(|c| c.step_time.is_some()).collect();
    if measured.is_empty() {
        return None;
    }
    let faults: Vec<String> = measured
        .iter()
        .filter_map(|c| {
            let why = unstable(c, bounds)?;
            let fell = c.slow_steps.as_ref().map_or_else(String::new, |s| format!(" ({})", slow_steps_words(s)));
            Some(format!("{}: {why}{fell}", c.shape))
        })
        .collect();
    // Cells measured again for their spread or the host's load, and those measured again because
    // their first measurement contradicted itself: said apart, since only the first are this
    // check's.
    let remeasured: Vec<&str> = measured.iter().filter_map(|c| c.remeasured.as_deref()).collect();
    let contradicted = remeasured.iter().filter(|why| why.starts_with(CONTRADICTED)).count();
    let unstable = remeasured.len() - contradicted;
    let again = match contradicted {
        0 => format!("{unstable} cell(s) measured once more to get there"),
        n => format!(
            "{unstable} cell(s) measured once more to get there, and {n} more because {} first measurement \
             contradicted itself",
            if n == 1 { "its" } else { "their" }
        ),
    };
    let worst_cv = measured.iter().filter_map(|c| c.step_time.as_ref()?.cv.map(Finite::get)).fold(0.0, f64::max);
    // Said where the device says who else holds a context on it (NVML), never assumed.
    let mut device = if measured.iter().any(|c| c.other_device_processes.is_some()) {
        ", with no other process on the device".to_owned()
    } else {
        String::new()
    };
    // Said where the cgroups count their throttling, never assumed.
    if measured.iter().any(|c| c.cpu_throttled_s.is_some()) {
        device.push_str(&if bounds.max_cpu_throttled_s > 0.0 {
            format!(" and a CPU quota throttling lynx for {:.1} ms at most", 1e3 * bounds.max_cpu_throttled_s)
        } else {
            " and no CPU quota throttling lynx".to_owned()
        });
    }
    let detail = if faults.is_empty() {
        format!(
            "every cell's step-time CV within {:.1}% (worst {:.1}%) and the host's other load within {:.2} cores{device}; \
             {again}",
            100.0 * max_cv,
            100.0 * worst_cv,
            max_other_cpu_cores
        )
    } else {
        format!("unstable after being measured once more: {}", faults.join("; "))
    };
    Some(check(CheckName::Stability, faults.is_empty(), detail, Some(worst_cv), Some(max_cv)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::summarise;
    use lynx_schema::config::WarmupConfig;
    use lynx_schema::result::CellShape;
    use lynx_schema::telemetry::Sample;
    use lynx_schema::value::Reported;

    fn source(throttle_known: bool) -> SourceRecord {
        let mut unavailable = BTreeMap::new();
        if !throttle_known {
            unavailable.insert("throttle".to_owned(), "not exposed".to_owned());
        }
        SourceRecord { name: "gpu".to_owned(), labels: BTreeMap::new(), unavailable }
    }

    /// A decode cell whose window [0, 1] s holds samples every `period` s, throttled after 0.5 s.
    fn cell(period: f64, reason: Option<ThrottleReason>) -> CellRecord {
        let samples: Vec<Sample> = (0..=(1.0 / period).round() as usize)
            .map(|i| {
                let t = i as f64 * period;
                Sample { t_s: t, throttle: reason.filter(|_| t > 0.5).into_iter().collect(), ..Sample::default() }
            })
            .collect();
        let summary = crate::stats::summarise(&[0.01; 4]).unwrap();
        let mut cell =
            crate::cell::measured(CellShape::decode(1, 8), summary, Finite::new(1.0, "t").unwrap(), Some(11), None)
                .unwrap();
        cell.telemetry = vec![summarise("gpu", &samples, 0.0, 1.0, 20.0).unwrap()];
        cell
    }

    fn warmup(reached: bool) -> WarmupRecord {
        WarmupRecord {
            duration_s: Finite::new(61.0, "t").unwrap(),
            steps: 100,
            batch: 1,
            ctx: 8,
            equilibrium_reached: reached,
            criteria: WarmupConfig::default(),
            last_window: None,
            telemetry: Vec::new(),
            segment: Some(1),
            step_autocorrelation: None,
            after_sweep: None,
            link_at_end: None,
        }
    }

    fn named<'a>(checks: &'a [Check], name: &str) -> Option<&'a Check> {
        checks.iter().find(|c| c.name.as_str() == name)
    }

    #[test]
    fn every_warm_up_of_a_resumed_run_must_reach_equilibrium() {
        let checks =
            measurement_checks(&[&warmup(true), &warmup(false)], &[cell(0.05, None)], Some(&source(true)), None);
        let equilibrium = named(&checks, "equilibrium").unwrap();
        assert!(!equilibrium.passed && equilibrium.detail.starts_with("2 warm-ups"), "{equilibrium:?}");
    }

    /// The warm-up's step timed again after the sweep is said in the check's detail, against
    /// the equilibrium median where the warm-up has one, and never decides the check.
    #[test]
    fn the_warm_up_step_timed_again_is_said_not_judged() {
        use lynx_schema::result::PaceRecheck;
        use lynx_schema::value::Reported;
        let equilibrium = |warmups: &[&WarmupRecord]| {
            named(&measurement_checks(warmups, &[cell(0.05, None)], Some(&source(true)), None), "equilibrium")
                .unwrap()
                .clone()
        };
        let mut slower = warmup(true);
        slower.after_sweep = Some(Reported::Known(PaceRecheck {
            steps: 31,
            median_s: Finite::new(0.0671, "t").unwrap(),
            ratio: Some(Finite::new(1.25, "r").unwrap()),
        }));
        let check = equilibrium(&[&slower]);
        assert!(check.passed, "{check:?}");
        assert_eq!(
            check.detail,
            "reached after 61.0 s of warm-up; its step timed again after the sweep took 1.25× its equilibrium median \
             (67.1 ms over 31 steps)"
        );
        let mut failed = warmup(false);
        failed.after_sweep = Some(Reported::unavailable("out of memory"));
        let check = equilibrium(&[&failed]);
        assert!(!check.passed, "{check:?}");
        assert!(
            check.detail.ends_with("; its step could not be timed again after the sweep: out of memory"),
            "{check:?}"
        );
        // A resumed run says it of the warm-up that has it.
        let mut no_window = warmup(true);
        no_window.after_sweep =
            Some(Reported::Known(PaceRecheck { steps: 5, median_s: Finite::new(0.002, "t").unwrap(), ratio: None }));
        let check = equilibrium(&[&warmup(true), &no_window]);
        assert!(check.detail.ends_with("its step timed again after the sweep took 2.0 ms over 5 steps"), "{check:?}");
        assert_eq!(equilibrium(&[&warmup(true)]).detail, "reached after 61.0 s of warm-up");
    }

    #[test]
    fn a_steady_covered_run_passes_every_check() {
        let checks = measurement_checks(&[&warmup(true)], &[cell(0.05, None)], Some(&source(true)), None);
        assert!(checks.iter().all(|c| c.passed), "{checks:?}");
        assert_eq!(checks.len(), 3);
    }

    #[test]
    fn throttling_names_the_reason_and_its_share() {
        let checks = measurement_checks(
            &[&warmup(true)],
            &[cell(0.05, Some(ThrottleReason::HwThermalSlowdown))],
            Some(&source(true)),
            None,
        );
        let throttling = named(&checks, "throttling").unwrap();
        assert!(!throttling.passed);
        assert!(
            throttling.detail.starts_with("HwThermalSlowdown in 48% of samples of decode batch 1 ctx 8"),
            "{}",
            throttling.detail
        );
        // GpuIdle is not a slowdown.
        let idle = measurement_checks(
            &[&warmup(true)],
            &[cell(0.05, Some(ThrottleReason::GpuIdle))],
            Some(&source(true)),
            None,
        );
        assert!(named(&idle, "throttling").unwrap().passed);
    }

    /// The first H200 run: prefill held the board's default 700 W limit (`SwPowerCap` in every
    /// sample). At the default limit that is named and passes; below it, or with a limit unknown,
    /// it fails as a slowdown does; and a thermal slowdown beside it still fails.
    #[test]
    fn power_capping_at_the_default_limit_is_named_and_passes() {
        let board = |default: f64, enforced: Reported<f64>| BoardRecord {
            serial: Reported::unavailable("-"),
            pci_bus_id: Reported::unavailable("-"),
            vbios: Reported::unavailable("-"),
            driver_version: Reported::unavailable("-"),
            cuda_driver_version: Reported::unavailable("-"),
            power_limit_default_w: Reported::Known(default),
            power_limit_enforced_w: enforced,
            ecc_enabled: Reported::unavailable("-"),
            mig_enabled: Reported::unavailable("-"),
            persistence_mode: Reported::unavailable("-"),
        };
        let capped = [cell(0.05, Some(ThrottleReason::SwPowerCap))];
        let throttling = |board: Option<&BoardRecord>, cells: &[CellRecord]| {
            named(&measurement_checks(&[&warmup(true)], cells, Some(&source(true)), board), "throttling")
                .unwrap()
                .clone()
        };
        let stock = throttling(Some(&board(700.0, Reported::Known(700.0))), &capped);
        assert!(stock.passed, "{stock:?}");
        assert_eq!(stock.measured.unwrap().get(), 0.0);
        assert_eq!(
            stock.detail,
            "no hardware slowdown reported by gpu during measurement; held at the board's default 700 W power limit, \
             as a stock board runs: SwPowerCap in 48% of samples of decode batch 1 ctx 8"
        );
        let lowered = throttling(Some(&board(700.0, Reported::Known(500.0))), &capped);
        assert!(!lowered.passed && lowered.detail.starts_with("SwPowerCap in 48%"), "{lowered:?}");
        let unknown = throttling(Some(&board(700.0, Reported::unavailable("not exposed"))), &capped);
        assert!(!unknown.passed, "{unknown:?}");
        assert!(!throttling(None, &capped).passed);
        let hot = throttling(
            Some(&board(700.0, Reported::Known(700.0))),
            &[cell(0.05, Some(ThrottleReason::HwThermalSlowdown))],
        );
        assert!(!hot.passed, "{hot:?}");
    }

    /// Issue 17: a run with no cell measured says so, instead of "0.0% of -0.0 s".
    #[test]
    fn no_cells_means_no_coverage_to_state() {
        let checks = measurement_checks(&[&warmup(true)], &[], Some(&source(true)), None);
        let coverage = named(&checks, "telemetry_coverage").unwrap();
        assert!(!coverage.passed && coverage.measured.is_none(), "{coverage:?}");
        assert!(coverage.detail.contains("no cell measured") && !coverage.detail.contains("-0.0"), "{coverage:?}");
    }

    #[test]
    fn a_source_without_throttle_state_gets_no_throttling_check() {
        let checks = measurement_checks(&[&warmup(true)], &[cell(0.05, None)], Some(&source(false)), None);
        assert!(named(&checks, "throttling").is_none());
    }

    #[test]
    fn sparse_telemetry_and_no_equilibrium_fail() {
        // Samples every 0.25 s at a 20 Hz target: every interval is a gap.
        let checks = measurement_checks(&[&warmup(false)], &[cell(0.25, None)], Some(&source(true)), None);
        assert!(!named(&checks, "equilibrium").unwrap().passed);
        let coverage = named(&checks, "telemetry_coverage").unwrap();
        assert!(!coverage.passed && coverage.measured.unwrap().get() < 0.95, "{coverage:?}");
    }

    /// A cell is unstable past the CV bound or with the host busy elsewhere; the check names the
    /// unstable cells and says how many were measured again.
    /// The bounds with no throttling allowed (the default).
    fn bounds(max_cv: f64, max_other_cpu_cores: f64) -> StabilityBounds {
        StabilityBounds { max_cv, max_other_cpu_cores, max_cpu_throttled_s: 0.0 }
    }

    #[test]
    fn stability_names_cells_whose_steps_varied_or_whose_host_was_busy() {
        let measured = |steps: &[f64], other: Option<f64>, again: bool| {
            let summary = crate::stats::summarise(steps).unwrap();
            let mut cell =
                crate::cell::measured(CellShape::decode(1, 8), summary, Finite::new(1.0, "t").unwrap(), None, None)
                    .unwrap();
            cell.other_cpu_cores = other.map(|c| Finite::new(c, "cores").unwrap());
            cell.remeasured = again.then(|| "step-time CV 40% above 10%".to_owned());
            cell
        };
        let steady = measured(&[1.0, 1.01, 0.99, 1.0], Some(0.02), true);
        assert_eq!(unstable(&steady, &bounds(0.1, 0.25)), None);
        let varied = measured(&[1.0, 2.0, 1.0, 2.0], None, false);
        assert!(unstable(&varied, &bounds(0.1, 0.25)).unwrap().contains("CV 38.5% above 10.0%"));
        // A CV just above its bound is not printed as the bound.
        let just = unstable(&varied, &bounds(0.3846, 0.25)).unwrap();
        assert!(just.contains("CV 38.49% above 38.46%"), "{just}");
        let mut busy = measured(&[1.0, 1.0, 1.0, 1.0], Some(1.3), false);
        assert_eq!(
            unstable(&busy, &bounds(0.1, 0.25)).unwrap(),
            "other processes kept 1.30 host CPU cores busy (limit 0.25)"
        );
        // A hypervisor's steal is in that count, and said apart where there was any.
        busy.stolen_cpu_cores = Some(Finite::new(0.004, "cores").unwrap());
        assert_eq!(
            unstable(&busy, &bounds(0.1, 0.25)).unwrap(),
            "other processes kept 1.30 host CPU cores busy (limit 0.25)"
        );
        busy.stolen_cpu_cores = Some(Finite::new(0.4, "cores").unwrap());
        assert_eq!(
            unstable(&busy, &bounds(0.1, 0.25)).unwrap(),
            "other processes kept 1.30 host CPU cores busy (limit 0.25); the hypervisor stole 0.40 of them"
        );
        // And the part of it on CPUs lynx could not run on (a shared node's other jobs).
        busy.other_cpu_cores_elsewhere = Some(Finite::new(1.1, "cores").unwrap());
        assert_eq!(
            unstable(&busy, &bounds(0.1, 0.25)).unwrap(),
            "other processes kept 1.30 host CPU cores busy (limit 0.25); the hypervisor stole 0.40 of them; at \
             least 1.10 of them on CPUs lynx could not run on (another job's? a node is measured alone)"
        );
        busy.stolen_cpu_cores = None;
        busy.other_cpu_cores_elsewhere = Some(Finite::new(0.001, "cores").unwrap());
        assert_eq!(
            unstable(&busy, &bounds(0.1, 0.25)).unwrap(),
            "other processes kept 1.30 host CPU cores busy (limit 0.25)"
        );
        // Another process on the device (NVML's count less the worker) makes a cell unstable,
        // however steady its steps; none, or a device that does not say, does not.
        let mut shared = measured(&[1.0, 1.0, 1.0, 1.0], Some(0.0), false);
        assert_eq!(unstable(&shared, &bounds(0.1, 0.25)), None);
        shared.other_device_processes = Some(0);
        assert_eq!(unstable(&shared, &bounds(0.1, 0.25)), None);
        let alone = stability(std::slice::from_ref(&shared), &bounds(0.1, 0.25)).unwrap();
        assert!(
            alone.passed && alone.detail.contains("cores, with no other process on the device;"),
            "{}",
            alone.detail
        );
        shared.other_device_processes = Some(2);
        assert_eq!(unstable(&shared, &bounds(0.1, 0.25)).unwrap(), "2 other process(es) held a context on the device");
        let failed = stability(std::slice::from_ref(&shared), &bounds(0.1, 0.25)).unwrap();
        assert!(!failed.passed && failed.detail.contains("2 other process(es) held a context"), "{}", failed.detail);
        // A CPU quota that throttled lynx while the cell ran makes it unstable too, saying what
        // to do; a cgroup that counted no throttling does not.
        let mut quota = measured(&[1.0, 1.0, 1.0, 1.0], Some(0.0), false);
        quota.cpu_throttled_s = Some(Finite::new(0.0, "s").unwrap());
        assert_eq!(unstable(&quota, &bounds(0.1, 0.25)), None);
        quota.cpu_throttled_s = Some(Finite::new(0.0372, "s").unwrap());
        assert_eq!(
            unstable(&quota, &bounds(0.1, 0.25)).unwrap(),
            "its cgroup's CPU quota held lynx off its CPUs for 37.2 ms (give the run more CPU time: the container's CPU \
             limit)"
        );
        // A suite that allows some throttling (as the test suite's loose bounds do) says its limit.
        let allowing = |most: f64| StabilityBounds { max_cpu_throttled_s: most, ..bounds(0.1, 0.25) };
        assert_eq!(unstable(&quota, &allowing(0.05)), None);
        assert!(unstable(&quota, &allowing(0.01)).unwrap().ends_with("CPU limit) (limit 10.0 ms)"));
        let allowed = stability(std::slice::from_ref(&quota), &allowing(0.05)).unwrap();
        assert!(allowed.passed && allowed.detail.contains("a CPU quota throttling lynx for 50.0 ms at most"));
        let unthrottled = Some(Finite::new(0.0, "s").unwrap());
        let counted = stability(&[CellRecord { cpu_throttled_s: unthrottled, ..steady.clone() }], &bounds(0.1, 0.25));
        let counted = counted.unwrap().detail;
        assert!(counted.contains("0.25 cores and no CPU quota throttling lynx; 1 cell(s)"), "{counted}");
        let passed = stability(std::slice::from_ref(&steady), &bounds(0.1, 0.25)).unwrap();
        assert!(passed.detail.ends_with("; 1 cell(s) measured once more to get there"), "{}", passed.detail);
        // A cell measured again because its first measurement contradicted itself is counted
        // apart: its spread was not why.
        let mut contradicted = steady.clone();
        contradicted.remeasured = Some(format!("{CONTRADICTED}: decode batch 1 ctx 8 measured no slower than …"));
        let passed = stability(&[steady.clone(), contradicted], &bounds(0.1, 0.25)).unwrap();
        let said = "; 1 cell(s) measured once more to get there, and 1 more because its first measurement \
                    contradicted itself";
        assert!(passed.passed && passed.detail.ends_with(said), "{}", passed.detail);
        let failed = stability(&[steady, varied, busy], &bounds(0.1, 0.25)).unwrap();
        assert!(!failed.passed && failed.detail.matches("decode batch 1 ctx 8:").count() == 2, "{}", failed.detail);
        assert!(stability(&[CellRecord::failed(CellShape::decode(1, 8), "x".into())], &bounds(0.1, 0.25)).is_none());
    }

    /// An unstable cell's entry says where its slow steps fell against each source's readings,
    /// so that a run shows whether the sampler's readings line up with them; a stable cell's
    /// record keeps the figures without the check naming it.
    #[test]
    fn an_unstable_cell_says_where_its_slow_steps_fell() {
        let summary = crate::stats::summarise(&[1.0, 2.0, 1.0, 2.0]).unwrap();
        let mut varied =
            crate::cell::measured(CellShape::decode(1, 8), summary, Finite::new(1.0, "t").unwrap(), None, None)
                .unwrap();
        let starts = [0.0, 1.5, 4.0, 5.5];
        let readings = [
            crate::cell::Readings::all("nvml:0", vec![(2.0, 2.1), (6.0, 6.1)]),
            crate::cell::Readings::all("host", vec![(0.2, 0.3)]),
        ];
        // The thread was preempted in one slow step (waiting to run for 1 s of it) and waited in
        // the other, on its CPU for 0.5 s of each; it ran through the others.
        let thread = [(1.0, 0, 0, 0.0), (0.5, 0, 3, 1.0), (1.0, 0, 0, 0.0), (0.5, 1, 0, 0.0)].map(
            |(cpu_s, voluntary, involuntary, runnable_s)| crate::cell::ThreadStep {
                cpu_s,
                voluntary,
                involuntary,
                runnable_s: Some(runnable_s),
            },
        );
        varied.slow_steps = crate::cell::slow_steps(
            &starts,
            &[1.0, 2.0, 1.0, 2.0],
            &readings,
            crate::cell::StepRecords { thread: &thread, ..Default::default() },
        );
        let failed = stability(std::slice::from_ref(&varied), &bounds(0.1, 0.25)).unwrap();
        assert!(
            failed.detail.contains(
                "CV 38.5% above 10.0% (2 of its 4 steps over 1.2× the median; of them, 2 overlapped nvml:0's \
                 readings (the others: 0%), 0 host's (the others: 50%); the thread running them was preempted in 1 \
                 (the others: 0%), waited off its CPU in 1 (the others: 0%), and was on its CPU for 25% of their \
                 time (the others: 100%), waiting to run for 25% (the others: 0%))"
            ),
            "{}",
            failed.detail
        );
        let steady = crate::cell::slow_steps(
            &starts,
            &[1.0; 4],
            &readings,
            crate::cell::StepRecords { thread: &thread, ..Default::default() },
        )
        .unwrap();
        assert_eq!(slow_steps_words(&steady), "0 of its 4 steps over 1.2× the median");
    }
}
