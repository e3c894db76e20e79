//! Two results side by side (`lynx compare`, `lynx reproduce`): every figure both have, the
//! ratio of the second to the first, whether the second lies within the first's own spread and
//! within 2% of it (MLPerf's bar for a materially different result), and the verdict over all.

use lynx_schema::compare::{Comparison, FailedChecks, Outcome, Row, TestHooks, Verdict, Worst, MATERIAL_DIFFERENCE};
use lynx_schema::derived::LatencyBounded;
use lynx_schema::result::{files_bytes, recorded_words, CellStatus, PaceRecheck, RunResult, WeightsRecord};
use lynx_schema::roofline::ProbeKind;
use lynx_schema::serving::{PrefillRecheck, ServedRate};
use lynx_schema::value::Reported;

fn differences(a: &RunResult, b: &RunResult) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what}: {x} vs {y}"));
        }
    };
    differ("device", a.device.name.to_string(), b.device.name.to_string());
    differ("device kind", a.device.device.to_string(), b.device.device.to_string());
    differ("host CPU", a.host.cpu_model.to_string(), b.host.cpu_model.to_string());
    let allowance =
        |r: &RunResult| r.host.cpu_allowance.as_ref().map_or_else(|| "not recorded".to_owned(), |a| a.words());
    differ("host CPUs allowed", allowance(a), allowance(b));
    let link = |r: &RunResult| r.device.host_link_compared().unwrap_or_else(|| "none (a CPU)".to_owned());
    differ("GPU's host link", link(a), link(b));
    // Compared as the host link is: an unread link without its reason, which names the GPU's
    // bus id (different on nodes alike).
    let trained = |r: &RunResult| match r.link_at_end() {
        Some(Reported::Known(link)) => link.words(),
        Some(Reported::Unavailable { .. }) => "unread".to_owned(),
        None if r.device.device == lynx_schema::device::DeviceName::Cpu => "none (a CPU)".to_owned(),
        None => "not recorded".to_owned(),
    };
    differ("GPU's link at the end of warm-up", trained(a), trained(b));
    differ("CPU binding", a.harness.cpu_binding_compared(), b.harness.cpu_binding_compared());
    let (x, y) = (&a.host, &b.host);
    differ("host cpufreq governor", recorded_words(&x.cpufreq_governor), recorded_words(&y.cpufreq_governor));
    differ(
        "host transparent huge pages",
        recorded_words(&x.transparent_hugepages),
        recorded_words(&y.transparent_hugepages),
    );
    differ("host clock source", recorded_words(&x.clocksource), recorded_words(&y.clocksource));
    differ("host memory policy", recorded_words(&x.memory_policy), recorded_words(&y.memory_policy));
    differ("host CPU features", recorded_words(&x.cpu_features), recorded_words(&y.cpu_features));
    differ("lynx", a.harness.lynx_version.clone(), b.harness.lynx_version.clone());
    differ("lynx commit", a.harness.git_commit.to_string(), b.harness.git_commit.to_string());
    differ("libtorch", a.harness.libtorch_runtime_version.to_string(), b.harness.libtorch_runtime_version.to_string());
    differ("libtorch threads", a.harness.torch_threads.to_string(), b.harness.torch_threads.to_string());
    // The variables that steer libtorch and its libraries, and the GPU math libraries it loaded.
    differ("steering environment", a.harness.environment_words(), b.harness.environment_words());
    differ("GPU libraries", a.harness.gpu_libraries_words(), b.harness.gpu_libraries_words());
    differ("configuration digest", a.config.sha256.clone(), b.config.sha256.clone());
    let (x, y) = weights(&a.config.weights, &b.config.weights);
    differ("weights", x, y);
    // A result made with test hooks set describes a test (`Harness::test_hooks`).
    let hooks = |r: &RunResult| r.harness.test_hooks().unwrap_or_else(|| "none".to_owned());
    differ("test hooks", hooks(a), hooks(b));
    // Whether each device kept its equilibrium pace through the cells (EQUILIBRIUM.md).
    differ("warm-up step timed again after the sweep, over its equilibrium median", pace(a), pace(b));
    // And whether it kept that pace through each serving window.
    let warmup_step = |rate: &ServedRate| rate.pace_after.as_ref().map(ratio_words);
    differ(
        "warm-up step timed again after each serving window, over its equilibrium median",
        windows_pace(a, warmup_step),
        windows_pace(b, warmup_step),
    );
    // And their prefill pace, which a decode step's cannot show.
    let prefill_cell = |rate: &ServedRate| rate.prefill_after.as_ref().map(prefill_words);
    differ(
        "prefill cell timed again after each serving window, over the prefill table",
        windows_pace(a, prefill_cell),
        windows_pace(b, prefill_cell),
    );
    out
}

/// Where each run's weights came from, in words: the seed, or the checkpoint by the digest of
/// what its model read where both runs recorded one (by its files otherwise, all that results
/// made before lynx recorded it say of a checkpoint). A checkpoint's folder is not compared:
/// the same weights lie in other folders on other nodes.
fn weights(a: &WeightsRecord, b: &WeightsRecord) -> (String, String) {
    let by_read = a.read().is_some() && b.read().is_some();
    let words = |w: &WeightsRecord| match w {
        WeightsRecord::Random { seed } => format!("drawn from the seed {seed}"),
        WeightsRecord::Checkpoint { read: Some(read), .. } if by_read => {
            format!("{} tensors of {} bytes read from a checkpoint, sha256 {}", read.tensors, read.bytes, read.sha256)
        }
        WeightsRecord::Checkpoint { files, .. } => {
            format!("a checkpoint of {} *.safetensors files, {} bytes", files.len(), files_bytes(files))
        }
    };
    (words(a), words(b))
}

/// The last warm-up step timed again after the sweep, over its warm-up's equilibrium median, in
/// words: `1.15×`, or that it was not timed or not recorded (results before it).
fn pace(r: &RunResult) -> String {
    let last = r.warmup.iter().chain(&r.resumed_warmups).filter_map(|w| w.after_sweep.as_ref()).next_back();
    last.map_or_else(|| "not recorded".to_owned(), ratio_words)
}

/// What each served rate timed again after its window (`timed`: the warm-up step of
/// [`ServedRate::pace_after`], or the prefill cell of [`ServedRate::prefill_after`]) in words:
/// `short server bounded 0.98×, short server over 1.01×`, or that no rate recorded it (nothing
/// served, or results before it).
fn windows_pace(r: &RunResult, timed: impl Fn(&ServedRate) -> Option<String>) -> String {
    let served = r.serving.iter().flat_map(|s| &s.served);
    let rates = served.flat_map(|s| {
        let entry = format!("{} {}", s.workload.name, s.bound.name);
        s.rates.known().into_iter().flatten().map(move |rate| (entry.clone(), rate))
    });
    let words: Vec<String> =
        rates.filter_map(|(entry, rate)| Some(format!("{entry} {} {}", rate.label, timed(rate)?))).collect();
    if words.is_empty() {
        "not recorded".to_owned()
    } else {
        words.join(", ")
    }
}

/// A warm-up step timed again, over its warm-up's equilibrium median: `1.15×`, or that it was
/// not timed (a reason that names the node, as a memory error does, is not compared).
fn ratio_words(again: &Reported<PaceRecheck>) -> String {
    match again {
        Reported::Known(again) => {
            again.ratio.map_or_else(|| "timed, with no equilibrium median".to_owned(), |x| format!("{:.2}×", x.get()))
        }
        Reported::Unavailable { .. } => "not timed".to_owned(),
    }
}

/// A prefill cell timed again, over the prefill table's time there, with its shape: `1.04× at
/// batch 2, prompt 64`, or that it was not timed.
fn prefill_words(again: &Reported<PrefillRecheck>) -> String {
    match again {
        Reported::Known(again) => {
            let at = format!("at batch {}, prompt {}", again.batch, again.prompt_len);
            again.ratio.map_or_else(|| format!("timed {at}, with no table time"), |x| format!("{:.2}× {at}", x.get()))
        }
        Reported::Unavailable { .. } => "not timed".to_owned(),
    }
}

/// Every figure of `a` and `b` side by side; `first`/`second` name them.
pub fn compare(first: &str, a: &RunResult, second: &str, b: &RunResult) -> Comparison {
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for cell in a.cells.iter().filter(|c| c.status == CellStatus::Ok) {
        let other = b.cells.iter().find(|c| c.shape == cell.shape && c.status == CellStatus::Ok);
        let (Some(other), Some(t), Some(step)) = (other, cell.median_s(), cell.step_time.as_ref()) else {
            unmatched.push(format!("{} (only in {first}, or failed in {second})", cell.shape));
            continue;
        };
        let Some(u) = other.median_s() else { continue };
        let (low, high) = (step.min_s.get(), step.p99_s.get());
        let within_spread = cell.full_depth.is_none().then_some(u >= low && u <= high);
        rows.push(row(format!("{}: median step (s)", cell.shape), false, t, u, within_spread));
        if let (Some(x), Some(y)) = (cell.tok_per_s_per_device, other.tok_per_s_per_device) {
            rows.push(row(format!("{}: tok/s/device", cell.shape), true, x.get(), y.get(), within_spread));
        }
    }
    for cell in b.cells.iter().filter(|c| c.status == CellStatus::Ok) {
        if !a.cells.iter().any(|c| c.shape == cell.shape && c.status == CellStatus::Ok) {
            unmatched.push(format!("{} (only in {second})", cell.shape));
        }
    }
    if let (Some(da), Some(db)) = (&a.derived, &b.derived) {
        latency_bounded((first, &da.latency_bounded), (second, &db.latency_bounded), &mut rows, &mut unmatched);
    }
    if let (Some(ra), Some(rb)) = (&a.roofline, &b.roofline) {
        for probe in &ra.probes {
            let Some(x) = probe.value.known() else { continue };
            let other =
                rb.probes.iter().find(|p| p.name == probe.name && p.dtype == probe.dtype && p.phase == probe.phase);
            let Some(y) = other.and_then(|p| p.value.known()) else { continue };
            let unit = if probe.kind == ProbeKind::Bandwidth { "bytes/s" } else { "FLOP/s" };
            let figure = format!("roofline {} {} {} ({unit})", probe.name, probe.dtype, probe.phase);
            rows.push(row(figure, true, x.get(), y.get(), None));
        }
    }
    let mut verdict = verdict(&rows);
    let (hooks_a, hooks_b) = (a.harness.test_hooks(), b.harness.test_hooks());
    if hooks_a.is_some() || hooks_b.is_some() {
        verdict.test_hooks = Some(TestHooks { first: hooks_a, second: hooks_b });
    }
    let failed = |r: &RunResult| Some(r.failed_checks()).filter(|f| !f.is_empty());
    let (failed_a, failed_b) = (failed(a), failed(b));
    if failed_a.is_some() || failed_b.is_some() {
        verdict.failed_checks = Some(FailedChecks { first: failed_a, second: failed_b });
    }
    Comparison {
        first: first.to_owned(),
        second: second.to_owned(),
        differences: differences(a, b),
        rows,
        unmatched,
        tolerance: MATERIAL_DIFFERENCE,
        verdict,
        signers: None,
    }
}

/// The latency-bounded throughput of each workload and bound both results have: the simulated
/// figure, and the serving loop's measured one (the published figure) where both served it.
fn latency_bounded(
    (first, a): (&str, &[LatencyBounded]),
    (second, b): (&str, &[LatencyBounded]),
    rows: &mut Vec<Row>,
    unmatched: &mut Vec<String>,
) {
    let same = |x: &LatencyBounded, y: &LatencyBounded| {
        x.workload == y.workload && x.bound.name == y.bound.name && x.bound.tpot_p99_s == y.bound.tpot_p99_s
    };
    for lb in a {
        let name = format!("{} under {}", lb.workload, lb.bound.name);
        let other = b.iter().find(|o| same(o, lb));
        match (other.map(|o| &o.point), &lb.point) {
            (Some(Reported::Known(q)), Reported::Known(p)) => rows.push(row(
                format!("{name}: simulated output tok/s/device"),
                true,
                p.output_tok_per_s_per_device.get(),
                q.output_tok_per_s_per_device.get(),
                None,
            )),
            _ => unmatched.push(format!("{name}: simulated latency-bounded throughput")),
        }
        match (&lb.measured, other.and_then(|o| o.measured.as_ref())) {
            (Some(p), Some(q)) => {
                rows.push(row(
                    format!("{name}: measured output tok/s/device"),
                    true,
                    p.output_tok_per_s_per_device.get(),
                    q.output_tok_per_s_per_device.get(),
                    None,
                ));
                // And over the window's steady part, where both windows had one (a run at the
                // same seed serves the same arrivals).
                if let (Some(Reported::Known(x)), Some(Reported::Known(y))) =
                    (&p.steady_output_tok_per_s_per_device, &q.steady_output_tok_per_s_per_device)
                {
                    rows.push(row(
                        format!("{name}: measured steady-part output tok/s/device"),
                        true,
                        x.get(),
                        y.get(),
                        None,
                    ));
                }
            }
            (Some(_), None) => unmatched.push(format!("{name}: measured latency-bounded throughput (only in {first})")),
            (None, _) => {}
        }
    }
    for lb in b.iter().filter(|lb| lb.measured.is_some()) {
        if !a.iter().any(|o| same(o, lb) && o.measured.is_some()) {
            unmatched.push(format!(
                "{} under {}: measured latency-bounded throughput (only in {second})",
                lb.workload, lb.bound.name
            ));
        }
    }
}

/// A figure of both results, judged against [`MATERIAL_DIFFERENCE`] (never within it where the
/// ratio is not finite).
fn row(figure: String, higher_is_better: bool, first: f64, second: f64, within_spread: Option<bool>) -> Row {
    // Two equal figures are the same figure, two zeros among them (whose quotient is undefined).
    let ratio = if first == second { 1.0 } else { second / first };
    // 2% itself is within (1.02 − 1 is a hair above 0.02 in binary).
    let within_tolerance = ratio.is_finite() && (ratio - 1.0).abs() <= MATERIAL_DIFFERENCE + 1e-12;
    Row { figure, higher_is_better, first, second, ratio, within_spread, within_tolerance }
}

/// The verdict over `rows`, each already judged against the tolerance.
pub fn verdict(rows: &[Row]) -> Verdict {
    let within_tolerance = rows.iter().filter(|r| r.within_tolerance).count();
    let beyond: Vec<&Row> = rows.iter().filter(|r| !r.within_tolerance).collect();
    let within_spread_only = beyond.iter().filter(|r| r.within_spread == Some(true)).count();
    let different: Vec<&&Row> = beyond.iter().filter(|r| r.within_spread != Some(true)).collect();
    // Worse: a time that grew or a throughput that shrank (an undefined ratio counts as worse).
    let worse = |r: &Row| !r.ratio.is_finite() || if r.higher_is_better { r.ratio < 1.0 } else { r.ratio > 1.0 };
    // How far a row lies from the first result: |ln ratio|, so that 0.5 and 2 are as far; an
    // undefined or non-positive ratio is farthest.
    let distance = |r: &Row| if r.ratio.is_finite() && r.ratio > 0.0 { r.ratio.ln().abs() } else { f64::INFINITY };
    let worst = rows
        .iter()
        .max_by(|a, b| distance(a).total_cmp(&distance(b)))
        .map(|r| Worst { figure: r.figure.clone(), ratio: r.ratio });
    let outcome = if rows.is_empty() {
        Outcome::NothingCompared
    } else if !different.is_empty() {
        Outcome::Different
    } else if within_spread_only > 0 {
        Outcome::WithinSpread
    } else {
        Outcome::Reproduced
    };
    Verdict {
        outcome,
        figures: rows.len(),
        within_tolerance,
        within_spread_only,
        different: different.len(),
        different_worse: different.iter().filter(|r| worse(r)).count(),
        worst,
        test_hooks: None,
        failed_checks: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run published from this project's host (results/amd-epyc).
    fn published() -> RunResult {
        let run = "20261203T010753Z-dd076e65";
        let path = crate::catalogue_dir().join(format!("../results/amd-epyc/{run}/{run}.json"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// A latency-bounded entry of `workload` (16/4) under the server bound, its simulated
    /// throughput `simulated` (unavailable where `None`) and its measured one `measured`.
    fn bounded(workload: &str, simulated: Option<f64>, measured: Option<f64>) -> LatencyBounded {
        let point = match simulated {
            Some(tok) => serde_json::json!({"request_rate_per_s": 1.0, "output_tok_per_s_per_device": tok,
                "tok_per_s_per_user": 10.0, "ttft_p99_s": 0.5, "tpot_p99_s": 0.05, "max_batch": 8,
                "max_prefill_batch": 8, "chunked_prefill": null, "requests": 100,
                "joules_per_output_token": {"unavailable": "no power"},
                "usd_per_million_output_tokens": {"unavailable": "no price"}, "extrapolated": false}),
            None => serde_json::json!({"unavailable": "no rate keeps this bound"}),
        };
        let measured = measured.map(|tok| {
            serde_json::json!({"request_rate_per_s": 1.0, "output_tok_per_s_per_device": tok,
                "tok_per_s_per_user": 10.0, "ttft_p99_s": 0.5, "tpot_p99_s": 0.05, "within_bound": true,
                "joules_per_output_token": {"unavailable": "no power"},
                "usd_per_million_output_tokens": {"unavailable": "no price"}})
        });
        serde_json::from_value(serde_json::json!({
            "workload": {"name": workload, "isl": 16, "osl": 4},
            "bound": {"name": "server", "ttft_p99_s": 2.0, "tpot_p99_s": 0.1},
            "point": point,
            "measured": measured,
        }))
        .unwrap()
    }

    /// Issue 16: where both results served a workload, its measured latency-bounded throughput
    /// (the figure published) is compared beside the simulated one; where only one served it,
    /// the comparison says which, rather than leaving the published figure out silently.
    #[test]
    fn measured_latency_bounded_throughput_is_compared_where_both_served_it() {
        let a = [bounded("chat", Some(100.0), Some(90.0)), bounded("long", None, Some(10.0))];
        let b = [
            bounded("chat", Some(101.0), Some(81.0)),
            bounded("long", Some(5.0), None),
            bounded("new", None, Some(1.0)),
        ];
        let (mut rows, mut unmatched) = (Vec::new(), Vec::new());
        latency_bounded(("published", &a), ("local", &b), &mut rows, &mut unmatched);
        let figures: Vec<(&str, f64, bool)> =
            rows.iter().map(|r| (r.figure.as_str(), r.ratio, r.within_tolerance)).collect();
        assert_eq!(
            figures,
            [
                ("chat 16/4 under server: simulated output tok/s/device", 1.01, true),
                ("chat 16/4 under server: measured output tok/s/device", 0.9, false),
            ]
        );
        assert_eq!(
            unmatched,
            [
                "long 16/4 under server: simulated latency-bounded throughput",
                "long 16/4 under server: measured latency-bounded throughput (only in published)",
                "new 16/4 under server: measured latency-bounded throughput (only in local)",
            ]
        );
        assert_eq!(verdict(&rows).outcome, Outcome::Different, "the published figure is 10% down");
    }

    /// Where both windows had a steady part, its throughput is compared beside the window's; where
    /// either had none (or predates the field), it is not.
    #[test]
    fn the_steady_parts_throughput_is_compared_where_both_windows_had_one() {
        let with = |tok: f64, steady: Option<serde_json::Value>| {
            let mut entry = bounded("chat", Some(100.0), Some(tok));
            if let (Some(m), Some(steady)) = (entry.measured.as_mut(), steady) {
                m.steady_output_tok_per_s_per_device = Some(serde_json::from_value(steady).unwrap());
            }
            entry
        };
        let figures = |a: &LatencyBounded, b: &LatencyBounded| {
            let (mut rows, mut unmatched) = (Vec::new(), Vec::new());
            latency_bounded(
                ("published", std::slice::from_ref(a)),
                ("local", std::slice::from_ref(b)),
                &mut rows,
                &mut unmatched,
            );
            rows.iter().map(|r| (r.figure.clone(), r.ratio)).collect::<Vec<(String, f64)>>()
        };
        let (a, b) = (with(90.0, Some(serde_json::json!(95.0))), with(90.0, Some(serde_json::json!(114.0))));
        let rows = figures(&a, &b);
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[2].0, "chat 16/4 under server: measured steady-part output tok/s/device");
        assert!((rows[2].1 - 1.2).abs() < 1e-12, "{rows:?}");
        let none = with(90.0, Some(serde_json::json!({"unavailable": "no steady part: the arrivals spanned 3.0 s"})));
        assert_eq!(figures(&a, &none).len(), 2);
        assert_eq!(figures(&a, &with(90.0, None)).len(), 2, "a result from before the field");
    }

    /// How two runs differ includes whether each device kept its equilibrium pace through its
    /// cells, where either recorded it; two results from before the field show no such line.
    #[test]
    fn the_differences_say_how_each_warm_up_step_timed_again_after_the_sweep() {
        use lynx_schema::result::PaceRecheck;
        use lynx_schema::value::Finite;
        let published = published();
        let line = |a: &RunResult, b: &RunResult| {
            differences(a, b).into_iter().find(|d| d.starts_with("warm-up step timed again after the sweep"))
        };
        assert_eq!(line(&published, &published), None, "neither recorded it");
        let mut local = published.clone();
        let again = |ratio: Option<f64>| {
            Some(Reported::Known(PaceRecheck {
                steps: 26,
                median_s: Finite::new(0.08, "t").unwrap(),
                ratio: ratio.map(|r| Finite::new(r, "r").unwrap()),
            }))
        };
        local.warmup.as_mut().unwrap().after_sweep = again(Some(1.153));
        assert_eq!(
            line(&published, &local).unwrap(),
            "warm-up step timed again after the sweep, over its equilibrium median: not recorded vs 1.15×"
        );
        // A resumed run's says the last warm-up's.
        let mut resumed = local.clone();
        let mut second = resumed.warmup.clone().unwrap();
        second.after_sweep = Some(Reported::unavailable("out of memory"));
        resumed.resumed_warmups.push(second);
        assert!(line(&local, &resumed).unwrap().ends_with(": 1.15× vs not timed"));
        resumed.resumed_warmups[0].after_sweep = again(None);
        assert!(line(&local, &resumed).unwrap().ends_with(": 1.15× vs timed, with no equilibrium median"));
    }

    /// And whether it kept that pace through each serving window, where either run recorded it.
    #[test]
    fn the_differences_say_how_each_warm_up_step_timed_again_after_each_window() {
        use lynx_schema::value::Finite;
        let published = published();
        assert!(published.serving.as_ref().is_some_and(|s| !s.served.is_empty()), "the fixture served");
        let line = |a: &RunResult, b: &RunResult| {
            differences(a, b).into_iter().find(|d| d.starts_with("warm-up step timed again after each serving window"))
        };
        assert_eq!(line(&published, &published), None, "neither recorded it");
        let mut local = published.clone();
        let served = &mut local.serving.as_mut().unwrap().served[0];
        let entry = format!("{} {}", served.workload.name, served.bound.name);
        let Reported::Known(rates) = &mut served.rates else { panic!("the fixture's first entry served") };
        rates[0].pace_after = Some(Reported::Known(PaceRecheck {
            steps: 14,
            median_s: Finite::new(0.109, "t").unwrap(),
            ratio: Some(Finite::new(0.984, "r").unwrap()),
        }));
        let label = rates[0].label.clone();
        if let Some(second) = rates.get_mut(1) {
            second.pace_after = Some(Reported::unavailable("out of memory on node-7"));
        }
        let second = rates.get(1).map_or(String::new(), |r| format!(", {entry} {} not timed", r.label));
        assert_eq!(
            line(&published, &local).unwrap(),
            format!(
                "warm-up step timed again after each serving window, over its equilibrium median: not recorded vs \
                 {entry} {label} 0.98×{second}"
            )
        );
        // And the prefill cell timed again after each window, with its shape.
        let prefill = |a: &RunResult, b: &RunResult| {
            differences(a, b).into_iter().find(|d| d.starts_with("prefill cell timed again after each serving window"))
        };
        assert_eq!(prefill(&published, &local), None, "neither recorded it");
        let served = &mut local.serving.as_mut().unwrap().served[0];
        let Reported::Known(rates) = &mut served.rates else { unreachable!() };
        rates[0].prefill_after = Some(Reported::Known(lynx_schema::serving::PrefillRecheck {
            batch: 2,
            prompt_len: 64,
            steps: 17,
            median_s: Finite::new(0.0931, "t").unwrap(),
            ratio: Some(Finite::new(1.043, "r").unwrap()),
        }));
        assert_eq!(
            prefill(&published, &local).unwrap(),
            format!(
                "prefill cell timed again after each serving window, over the prefill table: not recorded vs {entry} \
                 {label} 1.04× at batch 2, prompt 64"
            )
        );
    }

    /// How two runs differ says whose weights differ: the seed's, a checkpoint's by the digest of
    /// what was read where both recorded one, by its files where either did not; the folder a
    /// checkpoint lay in is not a difference.
    #[test]
    fn the_differences_say_whose_weights_differ() {
        use lynx_schema::result::WeightsRead;
        let read = |sha256: &str| Some(WeightsRead { tensors: 291, bytes: 2_970_000_000, sha256: sha256.to_owned() });
        let checkpoint = |dir: &str, size: u64, read: Option<WeightsRead>| WeightsRecord::Checkpoint {
            dir: dir.to_owned(),
            files: vec![("model.safetensors".to_owned(), size)],
            read,
        };
        let differ = |a: &WeightsRecord, b: &WeightsRecord| {
            let (x, y) = weights(a, b);
            (x != y).then(|| format!("{x} vs {y}"))
        };
        let lab = checkpoint("/lab/llama", 16_000_000_000, read("aa"));
        assert_eq!(differ(&lab, &checkpoint("/vendor/llama", 16_000_000_000, read("aa"))), None);
        assert_eq!(
            differ(&lab, &checkpoint("/vendor/llama", 16_000_000_000, read("bb"))).unwrap(),
            "291 tensors of 2970000000 bytes read from a checkpoint, sha256 aa vs 291 tensors of 2970000000 bytes \
             read from a checkpoint, sha256 bb"
        );
        // An older result names a checkpoint by its files: so are both, then.
        assert_eq!(differ(&lab, &checkpoint("/old", 16_000_000_000, None)), None);
        assert_eq!(
            differ(&lab, &checkpoint("/old", 15_000_000_000, None)).unwrap(),
            "a checkpoint of 1 *.safetensors files, 16000000000 bytes vs a checkpoint of 1 *.safetensors files, \
             15000000000 bytes"
        );
        let seed = |seed: u64| WeightsRecord::Random { seed };
        assert_eq!(differ(&seed(7), &seed(7)), None);
        assert_eq!(differ(&seed(7), &seed(8)).unwrap(), "drawn from the seed 7 vs drawn from the seed 8");
        assert!(differ(&seed(7), &lab).unwrap().starts_with("drawn from the seed 7 vs a checkpoint of 1"));
    }

    /// How two runs differ says which was made with test hooks set, and which; so does the
    /// verdict, whose figures may all be within 2% of a test's.
    #[test]
    fn the_differences_name_the_test_hooks_either_was_made_with() {
        let published = published();
        let line = |a: &RunResult, b: &RunResult| differences(a, b).into_iter().find(|d| d.starts_with("test hooks"));
        assert_eq!(line(&published, &published), None);
        let mut hooked = published.clone();
        hooked.harness.test_hooks =
            Some(vec!["LYNX_TEST_CELL_PACE=1".to_owned(), "LYNX_TEST_GRAPHS=reissue".to_owned()]);
        assert_eq!(
            line(&published, &hooked).unwrap(),
            "test hooks: none vs LYNX_TEST_CELL_PACE=1, LYNX_TEST_GRAPHS=reissue"
        );

        let itself = compare("a", &published, "b", &published).verdict;
        assert!(itself.of_devices() && itself.test_hooks.is_none());
        // The same figures: every one within 2%, yet not a comparison of two devices.
        let verdict = compare("a", &hooked, "b", &published).verdict;
        assert_eq!(verdict.outcome, Outcome::Reproduced);
        assert!(!verdict.of_devices());
        let hooks = verdict.test_hooks.unwrap();
        assert_eq!(hooks.first.as_deref(), Some("LYNX_TEST_CELL_PACE=1, LYNX_TEST_GRAPHS=reissue"));
        assert_eq!(hooks.second, None);
        let hooks = compare("a", &published, "b", &hooked).verdict.test_hooks.unwrap();
        assert_eq!((hooks.first, hooks.second.is_some()), (None, true));
    }

    /// How two runs differ says what each was allowed of its host's CPUs: how many, and how much
    /// CPU time (the same count on other CPUs is the same allowance); a result before the record
    /// says it has none.
    #[test]
    fn the_differences_say_what_each_run_was_allowed_of_the_cpus() {
        let published = published();
        let line = |a: &RunResult, b: &RunResult| differences(a, b).into_iter().find(|d| d.starts_with("host CPUs"));
        assert_eq!(line(&published, &published), None);
        let allowed = |cpus: &str, quota: Option<f64>| {
            let mut r = published.clone();
            r.host.cpu_allowance = Some(lynx_schema::result::CpuAllowance {
                cpus: cpus.to_owned(),
                cpu_count: 2,
                quota_cores: quota.map(|q| lynx_schema::value::Finite::new(q, "cores").unwrap()),
                quota: quota.map_or("none: cpu.max says max".to_owned(), |q| format!("{q:.2} cores: cpu.max")),
            });
            r
        };
        assert_eq!(line(&allowed("0-1", None), &allowed("2-3", None)), None);
        assert_eq!(
            line(&allowed("0-1", None), &allowed("0-1", Some(1.5))).unwrap(),
            "host CPUs allowed: 2 CPUs, no CPU quota vs 2 CPUs, a CPU quota of 1.50 cores"
        );
        assert_eq!(
            line(&published, &allowed("0-1", None)).unwrap(),
            "host CPUs allowed: not recorded vs 2 CPUs, no CPU quota"
        );
        // And the variables that steer libtorch and its libraries.
        let mut blocking = published.clone();
        blocking.harness.environment = Some(vec!["CUDA_LAUNCH_BLOCKING=1".to_owned()]);
        let mut unset = published.clone();
        unset.harness.environment = Some(Vec::new());
        let said = |a: &RunResult, b: &RunResult| differences(a, b).into_iter().find(|d| d.starts_with("steering"));
        assert_eq!(said(&unset, &blocking).unwrap(), "steering environment: none set vs CUDA_LAUNCH_BLOCKING=1");
        assert_eq!(said(&unset, &unset.clone()), None);
        // A result from before the record says none was known.
        assert_eq!(
            said(&published, &unset).unwrap(),
            "steering environment: not recorded (none set, or a result from before lynx recorded them) vs none set"
        );
        // And the GPU math libraries, by name and version (not where they lie).
        let library = |file: &str, version: &str| lynx_schema::result::GpuLibrary {
            name: "cuDNN".to_owned(),
            file: file.to_owned(),
            version: Reported::Known(version.to_owned()),
        };
        let (mut a, mut b) = (published.clone(), published.clone());
        a.harness.gpu_libraries = Some(vec![library("/a/libcudnn.so.9", "9.19.0")]);
        b.harness.gpu_libraries = Some(vec![library("/b/libcudnn.so.9", "9.19.0")]);
        let libraries = |a: &RunResult, b: &RunResult| differences(a, b).into_iter().find(|d| d.starts_with("GPU"));
        assert_eq!(libraries(&a, &b), None);
        b.harness.gpu_libraries = Some(vec![library("/b/libcudnn.so.9", "9.10.2")]);
        assert_eq!(libraries(&a, &b).unwrap(), "GPU libraries: cuDNN 9.19.0 vs cuDNN 9.10.2");
        b.harness.gpu_libraries = Some(Vec::new());
        assert_eq!(libraries(&a, &b).unwrap(), "GPU libraries: cuDNN 9.19.0 vs none loaded");
        // And where each GPU sat on its host's PCI tree, by its link and how many of the CPUs
        // lynx could run on were off its NUMA node (not by bus ids or CPU numbers).
        let link = |bus: &str, cpus: &str, elsewhere: u64, width: u32| {
            Some(Reported::Known(lynx_schema::result::HostLink {
                pci_device: bus.to_owned(),
                numa_node: Some(0),
                local_cpus: Some(cpus.to_owned()),
                allowed_cpus_elsewhere: Some(elsewhere),
                link_width: Some(width),
                max_link_width: Some(16),
                max_link_speed: Some("32.0 GT/s PCIe".to_owned()),
            }))
        };
        let (mut a, mut b) = (published.clone(), published.clone());
        a.device.device = lynx_schema::device::DeviceName::Cuda(0);
        b.device.device = lynx_schema::device::DeviceName::Cuda(0);
        a.device.host_link = link("0000:19:00.0", "0-55", 0, 16);
        b.device.host_link = link("0000:9a:00.0", "0-63", 0, 16);
        let placed = |a: &RunResult, b: &RunResult| differences(a, b).into_iter().find(|d| d.starts_with("GPU's"));
        assert_eq!(placed(&a, &b), None);
        b.device.host_link = link("0000:9a:00.0", "0-63", 64, 8);
        assert_eq!(
            placed(&a, &b).unwrap(),
            "GPU's host link: link x16 of x16, 32.0 GT/s PCIe; CPUs off its NUMA node 0 vs link x8 of x16, 32.0 GT/s \
             PCIe; CPUs off its NUMA node 64"
        );
        // And the link as trained at the end of warm-up (an idle GPU's runs slower): compared,
        // said after the host link in words, and warned of where it ran short of the board's.
        use lynx_schema::result::TrainedLink;
        let trained =
            |speed: &str| Some(Reported::Known(TrainedLink { speed: Some(speed.to_owned()), width: Some(16) }));
        b.device.host_link = link("0000:9a:00.0", "0-63", 0, 16);
        a.warmup.as_mut().expect("a warm-up").link_at_end = trained("32.0 GT/s PCIe");
        b.warmup.as_mut().expect("a warm-up").link_at_end = trained("16.0 GT/s PCIe");
        assert_eq!(
            placed(&a, &b).unwrap(),
            "GPU's link at the end of warm-up: 32.0 GT/s PCIe x16 vs 16.0 GT/s PCIe x16"
        );
        assert_eq!(a.link_short(), None);
        let short = b.link_short().expect("16 of 32 GT/s");
        assert!(
            short.starts_with(
                "the GPU's PCIe link ran at 16.0 GT/s PCIe x16 under load, short of the 32.0 GT/s PCIe x16"
            ),
            "{short}"
        );
        let words = b.host_link_words().unwrap();
        assert!(words.ends_with("32.0 GT/s PCIe at most; at the end of warm-up 16.0 GT/s PCIe x16"), "{words}");
        // A resumed warm-up's reading is the latest.
        let mut again = b.warmup.clone().unwrap();
        again.link_at_end = Some(Reported::unavailable("no /sys/bus/pci/devices/0000:9a:00.0"));
        b.resumed_warmups.push(again);
        assert_eq!(b.link_short(), None);
        assert!(b
            .host_link_words()
            .unwrap()
            .ends_with("; at the end of warm-up unread (no /sys/bus/pci/devices/0000:9a:00.0)"));
        assert_eq!(placed(&a, &b).unwrap(), "GPU's link at the end of warm-up: 32.0 GT/s PCIe x16 vs unread");
        b.resumed_warmups.clear();
        b.warmup.as_mut().unwrap().link_at_end = None;
        assert_eq!(placed(&a, &b).unwrap(), "GPU's link at the end of warm-up: 32.0 GT/s PCIe x16 vs not recorded");
        assert_eq!(b.host_link_words(), b.device.host_link_words(), "nothing read: the start's words alone");
        assert_eq!(published.link_at_end(), None);
        // And how lynx bound its CPUs: by what was asked (not the GPU's local CPUs, which differ
        // between nodes alike), or a list's CPUs.
        use lynx_schema::result::CpuBinding;
        let bound = |asked: &str, cpus: Option<&str>| {
            Some(CpuBinding { asked: asked.to_owned(), cpus: cpus.map(str::to_owned) })
        };
        let (mut a, mut b) = (published.clone(), published.clone());
        a.harness.cpu_binding = bound("gpu-local", Some("0-55"));
        b.harness.cpu_binding = bound("gpu-local", Some("56-111"));
        let binding = |a: &RunResult, b: &RunResult| differences(a, b).into_iter().find(|d| d.starts_with("CPU b"));
        assert_eq!(binding(&a, &b), None);
        b.harness.cpu_binding = Some(CpuBinding::none());
        assert_eq!(binding(&a, &b).unwrap(), "CPU binding: the GPU's local CPUs vs none");
        b.harness.cpu_binding = bound("list", Some("0-3"));
        assert_eq!(binding(&a, &b).unwrap(), "CPU binding: the GPU's local CPUs vs CPUs 0-3");
        assert_eq!(binding(&published, &b).unwrap(), "CPU binding: not recorded vs CPUs 0-3");
        // And the governor and huge page mode, where either says another.
        let mut tuned = published.clone();
        tuned.host.cpufreq_governor = Some(Reported::Known("performance".to_owned()));
        let lines: Vec<String> =
            differences(&published, &tuned).into_iter().filter(|d| d.starts_with("host ")).collect();
        assert_eq!(lines, ["host cpufreq governor: not recorded vs performance"]);
        // And the memory policy a run ran under (numactl's interleave against the default).
        let mut local = tuned.clone();
        local.host.memory_policy = Some(Reported::Known("local (the default) on memory nodes 0-1".to_owned()));
        let mut interleaved = local.clone();
        interleaved.host.memory_policy =
            Some(Reported::Known("interleave over nodes 0-1 on memory nodes 0-1".to_owned()));
        let lines: Vec<String> =
            differences(&local, &interleaved).into_iter().filter(|d| d.starts_with("host ")).collect();
        assert_eq!(
            lines,
            ["host memory policy: local (the default) on memory nodes 0-1 vs interleave over nodes 0-1 on memory \
              nodes 0-1"]
        );
        // And the CPU features libtorch's kernels choose by (AMX's tiles on one host only).
        let mut amx = local.clone();
        local.host.cpu_features = Some(Reported::Known("avx2 fma avx512f".to_owned()));
        amx.host.cpu_features = Some(Reported::Known("avx2 fma avx512f amx_tile amx_bf16".to_owned()));
        let lines: Vec<String> = differences(&local, &amx).into_iter().filter(|d| d.starts_with("host ")).collect();
        assert_eq!(lines, ["host CPU features: avx2 fma avx512f vs avx2 fma avx512f amx_tile amx_bf16"]);
    }

    fn judged(ratio: f64, higher_is_better: bool, within_spread: Option<bool>) -> Row {
        row(format!("figure at {ratio}"), higher_is_better, 1.0, ratio, within_spread)
    }

    /// Within 2% (both ends included), beyond it within the spread, beyond both: the outcome is
    /// the worst row's, and the counts add up.
    #[test]
    fn the_verdict_is_the_worst_rows_and_names_the_tolerance() {
        assert!(judged(1.02, true, None).within_tolerance && judged(0.98, false, None).within_tolerance);
        assert!(!judged(1.0201, true, None).within_tolerance && !judged(f64::INFINITY, true, None).within_tolerance);
        assert!(!judged(f64::NAN, true, None).within_tolerance);
        // Two zeros are the same figure (a run compared with itself); a zero against a figure
        // that is not has no ratio, and is never within.
        let zeros = row("energy".to_owned(), false, 0.0, 0.0, None);
        assert!(zeros.within_tolerance && zeros.ratio == 1.0, "{zeros:?}");
        assert!(!row("energy".to_owned(), false, 0.0, 0.5, None).within_tolerance);
        assert!(!row("energy".to_owned(), false, 0.5, 0.0, None).within_tolerance);

        assert_eq!(verdict(&[]).outcome, Outcome::NothingCompared);
        let all_within = verdict(&[judged(1.01, true, Some(false)), judged(0.99, false, None)]);
        assert_eq!(
            (all_within.outcome, all_within.within_tolerance, all_within.different),
            (Outcome::Reproduced, 2, 0)
        );

        let spread = verdict(&[judged(1.0, true, None), judged(1.05, false, Some(true))]);
        assert_eq!((spread.outcome, spread.within_spread_only, spread.different), (Outcome::WithinSpread, 1, 0));
        assert_eq!(spread.worst.unwrap().ratio, 1.05);

        // A throughput 10% down and a time 3% down: both materially different, one of them worse.
        let rows = [judged(1.0, true, None), judged(0.9, true, Some(false)), judged(0.97, false, None)];
        let different = verdict(&rows);
        assert_eq!(different.outcome, Outcome::Different);
        assert_eq!((different.figures, different.within_tolerance, different.different), (3, 1, 2));
        assert_eq!(different.different_worse, 1);
        assert_eq!(different.worst.unwrap().figure, "figure at 0.9");
        // Half and double are as far from 1; an undefined ratio is farther than either.
        let far = verdict(&[judged(0.5, true, None), judged(2.0, true, None), judged(f64::INFINITY, true, None)]);
        assert!(far.worst.unwrap().ratio.is_infinite());
        assert_eq!(far.different_worse, 2, "half the throughput, and an undefined ratio");
    }
}
