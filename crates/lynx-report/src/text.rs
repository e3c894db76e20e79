//! Results as text for a terminal: the run's summary and its parts, the model catalogue, the
//! roofline, the derived figures, comparisons and a node's summary.

use crate::escape::terminal_text;
use crate::table::Table;
use lynx_schema::catalogue::ModelSummary;
use lynx_schema::config::Precision;
use lynx_schema::derived::Derived;
use lynx_schema::equilibrium::WindowStats;
use lynx_schema::result::{
    AttentionKernel, CellRecord, CellStatus, Check, RunResult, RunStatus, StepMode, WarmupRecord, WeightsRecord,
};
use lynx_schema::roofline::{ProbeKind, RooflineRecord};
use lynx_schema::serving::ServedRate;
use lynx_schema::sweep::LineEnd;
use lynx_schema::value::{Finite, Reported};
use std::fmt::Write;
use std::path::Path;

const GIB: f64 = (1u64 << 30) as f64;

/// `lynx models` as a table.
pub fn models_table(models: &[ModelSummary]) -> String {
    let mut rows = Table::new([
        "MODEL",
        "ATTN",
        "LAYERS",
        "EXPERTS",
        "PARAMS",
        "ACTIVE",
        "WEIGHTS fp32/bf16/fp16/fp8",
        "KV/TOKEN fp32/bf16/fp16/fp8",
    ]);
    for model in models {
        let by_precision = |bytes: &std::collections::BTreeMap<String, u64>, unit: f64, suffix: &str| {
            let values: Vec<String> = Precision::ALL
                .iter()
                .map(|p| bytes.get(&p.to_string()).map_or("-".to_owned(), |&b| format!("{:.1}", b as f64 / unit)))
                .collect();
            format!("{} {suffix}", values.join("/"))
        };
        rows.row([
            model.name.clone(),
            model.attention.to_owned(),
            model.layers.to_string(),
            model.experts.map_or("-".to_owned(), |e| {
                let shared = if e.shared > 0 { format!(" +{}", e.shared) } else { String::new() };
                format!("{} of {}{shared}", e.per_token, e.routed)
            }),
            count(model.parameters),
            count(model.active_parameters),
            by_precision(&model.weight_bytes, GIB, "GiB"),
            by_precision(&model.kv_bytes_per_token, 1024.0, "KiB"),
        ]);
    }
    let mut out = rows.text(usize::MAX);
    out.push_str("ACTIVE counts every parameter a token uses, the embedding table included.\n");
    out
}

/// "8.03 B parameters, 8.03 B active" for one model.
pub fn parameters_line(model: &ModelSummary) -> String {
    format!("{} parameters, {} active", count(model.parameters), count(model.active_parameters))
}

/// A parameter count in B or M.
fn count(n: u64) -> String {
    if n >= 1_000_000_000 {
        format!("{:.2} B", n as f64 / 1e9)
    } else {
        format!("{:.1} M", n as f64 / 1e6)
    }
}

fn scale_words(scale: &lynx_schema::config::Scale) -> String {
    let mut parts = Vec::new();
    if let Some(layers) = scale.layers {
        parts.push(format!("{layers} layer{}", if layers == 1 { "" } else { "s" }));
    }
    if scale.tp > 1 {
        parts.push(format!("the shard of one device of {}-way tensor parallelism", scale.tp));
    }
    parts.join(", ")
}

pub fn check_line(check: &Check) -> String {
    let verdict = if check.passed { "passed" } else { "FAILED" };
    format!("check {} {verdict}: {}", check.name, check.detail)
}

/// The telemetry criteria a window judged: clock and power drift, temperature change, slowdowns.
pub fn telemetry_criteria(w: &WindowStats) -> String {
    let mut parts = Vec::new();
    if let Some(d) = w.clock_drift {
        parts.push(format!("clock {:+.1}%", d * 100.0));
    }
    if let Some(d) = w.power_drift {
        parts.push(format!("power {:+.1}%", d * 100.0));
    }
    if let Some(c) = w.temperature_change_c {
        parts.push(format!("temperature {c:+.1} °C"));
    }
    if !w.slowdown.is_empty() {
        parts.push(format!("SLOWDOWN {:?}", w.slowdown));
    }
    parts.iter().map(|p| format!(", {p}")).collect()
}

pub fn warmup_line(warmup: &WarmupRecord) -> String {
    let state = if warmup.equilibrium_reached { "equilibrium reached" } else { "equilibrium NOT reached" };
    let window = warmup.last_window.as_ref().map_or(String::new(), |w| {
        format!(
            " (last {:.0} s: drift {:+.1}%, spread {:.1}%{})",
            w.span_s,
            w.drift * 100.0,
            w.spread * 100.0,
            telemetry_criteria(w)
        )
    });
    // How alike consecutive steps were: the simulation draws its steps so (docs/SWEEPS.md).
    let persistence = warmup.step_autocorrelation.as_ref().map_or(String::new(), |a| {
        format!(
            "; its last {} steps' autocorrelation {:.2} at lag 1, {:.2} at lag 4",
            a.steps,
            a.lag_1.get(),
            a.lag_4.get()
        )
    });
    // Whether the device kept that pace through the cells (once the sweep was done).
    let again = warmup.after_sweep_words().map_or(String::new(), |words| format!("; {words}"));
    // A GPU's link as trained under load (the run's start read only the fastest it can run).
    let link = warmup.link_words().map_or(String::new(), |words| format!("; {}", terminal_text(&words, 200)));
    format!(
        "warm-up {:.1} s, {} decode steps at batch {} ctx {}: {state}{window}{persistence}{again}{link}",
        warmup.duration_s.get(),
        warmup.steps,
        warmup.batch,
        warmup.ctx
    )
}

/// The table printed at the end of a run.
pub fn run_summary(result: &RunResult, path: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "result: {} ({})", path.display(), status_word(result.status));
    for warmup in result.warmup.iter().chain(&result.resumed_warmups) {
        let _ = writeln!(out, "{}", warmup_line(warmup));
    }
    if let Some(short) = result.link_short() {
        let _ = writeln!(out, "warning: {}", terminal_text(&short, 400));
    }
    if let Some(part) = &result.config.measured {
        let _ = writeln!(
            out,
            "measured: {} ({:.1} M parameters of {:.1} M); not measured: {}",
            scale_words(&result.config.suite.scale),
            part.parameters as f64 / 1e6,
            result.config.model_parameters as f64 / 1e6,
            part.not_measured.join("; ")
        );
    }
    if let WeightsRecord::Checkpoint { dir, read: Some(read), .. } = &result.config.weights {
        let _ = writeln!(
            out,
            "weights: {} read from the checkpoint {}, sha256 {}",
            tensors_words(read),
            terminal_text(dir, 200),
            terminal_text(&read.sha256, 64)
        );
    }
    out.push_str(&cells_section(result));
    out.push_str(&roofline_section(result));
    if let Some(derived) = &result.derived {
        out.push_str(&derived_report(derived));
    }
    if let Some(serving) = &result.serving {
        out.push_str(&serving_section(serving));
    }
    out.push('\n');
    for check in &result.checks {
        let _ = writeln!(out, "{}", check_line(check));
    }
    if result.checks.iter().any(|c| !c.passed) {
        let _ = writeln!(out, "these figures come from a run that FAILED a check: do not publish them as the device's");
    }
    if let Some(hooks) = result.harness.test_hooks() {
        let _ = writeln!(
            out,
            "these figures come from a run made with test hooks set ({}): they describe a test, not the device",
            terminal_text(&hooks, 300)
        );
    }
    out
}

fn status_word(status: RunStatus) -> &'static str {
    match status {
        RunStatus::Complete => "complete",
        RunStatus::Partial => "PARTIAL: stopped before every cell ran",
        RunStatus::Incomplete => "incomplete",
    }
}

/// The probes of a roofline as a table (bandwidth in GB/s; matmul in TFLOP/s, or GFLOP/s below
/// one TFLOP/s), then the gaps between libtorch and the native probes.
pub fn roofline_table(record: &RooflineRecord) -> String {
    let mut rows = Table::new(["PROBE", "DTYPE", "PHASE", "CEILING", "HOW"]);
    let mut notes = Vec::new();
    for probe in &record.probes {
        let value = match (&probe.value, probe.kind) {
            (Reported::Known(v), ProbeKind::Bandwidth) => format!("{:.1} GB/s", v.get() / 1e9),
            (Reported::Known(v), ProbeKind::Matmul) if v.get() >= 1e12 => format!("{:.1} TFLOP/s", v.get() / 1e12),
            (Reported::Known(v), ProbeKind::Matmul) => format!("{:.1} GFLOP/s", v.get() / 1e9),
            (Reported::Unavailable { unavailable }, _) => {
                notes.push(format!("  ({}) {}: {unavailable}", notes.len() + 1, probe.name));
                format!("unavailable ({})", notes.len())
            }
        };
        let how: String = probe.method.chars().take(70).collect();
        let how = if probe.method.chars().count() > 70 { format!("{how}…") } else { how };
        rows.row([probe.name.clone(), probe.dtype.to_string(), probe.phase.to_string(), value, how]);
    }
    let mut out = rows.text(usize::MAX);
    for note in notes {
        let _ = writeln!(out, "{note}");
    }
    for gap in &record.gaps {
        let _ = writeln!(out, "libtorch reaches {:.0}% of the native {}", gap.ratio.get() * 100.0, gap.what);
    }
    out
}

/// The frontier, the prefill table, latency-bounded throughput and cost, and how the sweep's
/// lines ended.
pub fn derived_report(derived: &Derived) -> String {
    let mut out = String::new();
    out.push_str(&frontier_section(derived));
    out.push_str(&prefill_section(derived));
    out.push_str(&bounded_section(derived));
    let stopped: Vec<String> = derived
        .sweep
        .iter()
        .filter(|l| l.end != LineEnd::LadderEnd)
        .map(|l| match l.mode {
            StepMode::Eager => format!("  {} {}: {}", l.step, l.len, l.end),
            mode => format!("  {} {} {mode}: {}", l.step, l.len, l.end),
        })
        .collect();
    if !stopped.is_empty() {
        let _ = writeln!(out, "\nsweep lines that stopped before their ladder's end:\n{}", stopped.join("\n"));
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// Milliseconds with three significant figures' worth of precision for typical step times.
pub fn ms(seconds: f64) -> String {
    let ms = seconds * 1e3;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else if ms >= 0.01 {
        format!("{ms:.2} ms")
    } else {
        // Under 10 µs (a bound a buyer gave, never a step lynx timed): in µs, not "0.00 ms".
        format!("{:.1} µs", ms * 1e3)
    }
}

/// A size in bytes in decimal units, with two decimals in the unit that keeps at least one whole
/// digit (`2.97 GB`, `12.58 MB`): a tiny model's weights read as megabytes, not `0.01 GB`.
pub fn bytes_words(bytes: u64) -> String {
    let b = bytes as f64;
    // A unit is taken where the next smaller one would read 1000.00 or more once rounded.
    let reaches = |unit: f64| (b / unit * 1e5).round() >= 1e5;
    if reaches(1e9) {
        format!("{:.2} GB", b / 1e9)
    } else if reaches(1e6) {
        format!("{:.2} MB", b / 1e6)
    } else if bytes >= 1_000 {
        format!("{:.2} kB", b / 1e3)
    } else {
        format!("{bytes} bytes")
    }
}

/// How much a model read of a checkpoint, in words: `21 tensors of 2.97 GB`.
pub fn tensors_words(read: &lynx_schema::result::WeightsRead) -> String {
    format!("{} tensors of {}", read.tensors, bytes_words(read.bytes))
}

/// A reported figure with `digits` decimals, or `none` where it is unavailable.
pub fn figure(value: &Reported<Finite>, digits: usize, none: &str) -> String {
    match value {
        Reported::Known(v) => format!("{:.digits$}", v.get()),
        Reported::Unavailable { .. } => none.to_owned(),
    }
}

/// Two results side by side, `first` and `second` naming their columns (e.g. published, local).
pub fn comparison(comparison: &lynx_schema::compare::Comparison, first: &str, second: &str) -> String {
    let mut out = String::new();
    let signer = |side: usize| {
        comparison
            .signers
            .as_ref()
            .map_or(String::new(), |keys| format!(" (signed by key {})", terminal_text(&keys[side], 80)))
    };
    let _ = writeln!(out, "{first}: {}{}", terminal_text(&comparison.first, 200), signer(0));
    let _ = writeln!(out, "{second}: {}{}", terminal_text(&comparison.second, 200), signer(1));
    for difference in &comparison.differences {
        let _ = writeln!(out, "differs: {}", terminal_text(difference, 300));
    }
    let ratio_header = format!("{second}/{first}");
    let spread_header = format!("WITHIN {}'S SPREAD", first.to_uppercase());
    let mut rows = Table::new([
        "FIGURE".to_owned(),
        first.to_uppercase(),
        second.to_uppercase(),
        ratio_header.to_uppercase(),
        format!("WITHIN {}", percent(comparison.tolerance)),
        spread_header,
    ]);
    let value =
        |v: f64| if v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-2) { format!("{v:.4e}") } else { format!("{v:.4}") };
    for row in &comparison.rows {
        rows.row([
            terminal_text(&row.figure, 90),
            value(row.first),
            value(row.second),
            // Undefined where the first figure is zero (a signed result may say so).
            if row.ratio.is_finite() { format!("{:.3}", row.ratio) } else { "-".to_owned() },
            if row.within_tolerance { "yes" } else { "no" }.to_owned(),
            match row.within_spread {
                Some(true) => "yes".to_owned(),
                Some(false) => "no".to_owned(),
                None => "-".to_owned(),
            },
        ]);
    }
    out.push_str(&rows.text(usize::MAX));
    for figure in &comparison.unmatched {
        let _ = writeln!(out, "not compared: {}", terminal_text(figure, 200));
    }
    let _ = writeln!(out, "verdict: {}", verdict(comparison, first, second));
    out
}

/// Checks named in words, as a run that failed them is said to have: `simulation check`,
/// `equilibrium, stability checks`.
pub fn checks_named(names: &[lynx_schema::result::CheckName]) -> String {
    let joined: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
    format!("{} check{}", joined.join(", "), if names.len() == 1 { "" } else { "s" })
}

/// A tolerance as a percentage: `2%`.
fn percent(fraction: f64) -> String {
    format!("{}%", (fraction * 1000.0).round() / 10.0)
}

/// The verdict over a comparison's figures in one line, its tolerance named; `first` and
/// `second` name the two results (e.g. published, local).
pub fn verdict(comparison: &lynx_schema::compare::Comparison, first: &str, second: &str) -> String {
    let figures = figures_verdict(comparison, first, second);
    // A run that failed its own checks is said after the figures: they are compared as they are.
    let failed = comparison.verdict.failed_checks.as_ref().map_or(String::new(), |failed| {
        let sides: Vec<String> = [(first, &failed.first), (second, &failed.second)]
            .into_iter()
            .filter_map(|(name, checks)| Some(format!("{name}'s run FAILED its {}", checks_named(checks.as_deref()?))))
            .collect();
        format!("; {}", sides.join(", and "))
    });
    let figures = figures + &failed;
    // Whatever the figures say, a result made with test hooks set is a test's (`Harness::test_hooks`).
    let Some(hooks) = &comparison.verdict.test_hooks else { return figures };
    let hooked: Vec<String> = [(first, &hooks.first), (second, &hooks.second)]
        .into_iter()
        .filter_map(|(name, hooks)| hooks.as_ref().map(|h| format!("{name} ({})", terminal_text(h, 300))))
        .collect();
    let were = if hooked.len() == 1 { "was" } else { "were" };
    format!(
        "NOT A COMPARISON OF DEVICES: {} {were} made with test hooks set, a test's figures, not a device's; of the \
         figures, {figures}",
        hooked.join(" and ")
    )
}

/// The verdict over a comparison's figures alone.
fn figures_verdict(comparison: &lynx_schema::compare::Comparison, first: &str, second: &str) -> String {
    use lynx_schema::compare::Outcome;
    let v = &comparison.verdict;
    let tolerance = percent(comparison.tolerance);
    let bar = "MLPerf's bar for a materially different result";
    match v.outcome {
        Outcome::Reproduced => {
            format!("reproduced: all {} figures of {second} within {tolerance} of {first}'s ({bar})", v.figures)
        }
        Outcome::WithinSpread => format!(
            "within {first}'s spread: {} of {} figures within {tolerance} of {first}'s ({bar}); the other {} beyond \
             {tolerance} but within {first}'s own spread",
            v.within_tolerance, v.figures, v.within_spread_only
        ),
        Outcome::Different => {
            let worst = v.worst.as_ref().map_or(String::new(), |w| {
                let ratio = if w.ratio.is_finite() { format!("{:.3}", w.ratio) } else { "undefined".to_owned() };
                format!("; farthest: {} at {ratio}", terminal_text(&w.figure, 120))
            });
            format!(
                "MATERIALLY DIFFERENT: {} of {} figures beyond {tolerance} of {first}'s ({bar}) and outside its \
                 spread, {} of them worse and {} better; {} within {tolerance}{worst}",
                v.different,
                v.figures,
                v.different_worse,
                v.different - v.different_worse,
                v.within_tolerance
            )
        }
        Outcome::NothingCompared => format!("nothing compared: {first} and {second} have no figure in common"),
    }
}

/// A node's runs, and the spread across its devices of the same model.
pub fn node_summary(summary: &lynx_schema::fleet::NodeSummary) -> String {
    // Each GPU's link as trained under load, where any device's run read one: a node's device
    // whose link trained short stands out beside the others.
    let links = summary.runs.iter().any(|run| run.link_at_end.is_some());
    let mut header = vec!["DEVICE", "NAME", "STATUS", "EXIT", "CHECKS"];
    if links {
        header.push("LINK UNDER LOAD");
    }
    header.push("RESULT");
    let mut rows = Table::new(header);
    for run in &summary.runs {
        let mut row = vec![
            run.device.clone(),
            terminal_text(run.name.as_deref().unwrap_or("-"), 60),
            run.status.to_string(),
            run.exit.to_string(),
            if run.checks_passed { "passed".to_owned() } else { "not all passed".to_owned() },
        ];
        if links {
            row.push(terminal_text(run.link_at_end.as_deref().unwrap_or("-"), 60));
        }
        row.push(run.envelope.clone().or_else(|| run.run_dir.clone()).unwrap_or_else(|| "-".to_owned()));
        rows.row(row);
    }
    let mut out = format!("node {}\n", terminal_text(&summary.node, 80));
    out.push_str(&rows.text(usize::MAX));
    for run in &summary.runs {
        if let Some(short) = &run.link_short {
            let _ = writeln!(out, "warning: {}: {}", terminal_text(&run.device, 20), terminal_text(short, 400));
        }
    }
    if !summary.spreads.is_empty() {
        let _ = writeln!(out, "\nspread across devices of the same model (median step time):");
        let mut rows = Table::new(["NAME", "CELL", "DEVICES", "MIN", "MEDIAN", "MAX", "SPREAD"]);
        for s in &summary.spreads {
            rows.row([
                terminal_text(&s.name, 40),
                s.cell.clone(),
                s.devices.to_string(),
                ms(s.min_s),
                ms(s.median_s),
                ms(s.max_s),
                format!("{:.1}%", s.spread * 100.0),
            ]);
        }
        out.push_str(&indent(&rows.text(usize::MAX)));
    }
    out
}

/// The cells' step times, and the cells that failed with why.
fn cells_section(result: &RunResult) -> String {
    let mut out = String::new();
    let extrapolated = result.cells.iter().any(|c| c.full_depth.is_some());
    let full_depth_header = if extrapolated { "FULL-DEPTH MEDIAN" } else { "" };
    let mut rows = Table::new([
        "CELL",
        "N",
        "MEDIAN",
        "P90",
        "P99",
        "MIN",
        "MAX",
        "CV",
        full_depth_header,
        "TOK/S/USER",
        "TOK/S/DEVICE",
        "KERNELS",
        "HOST ISSUE",
    ]);
    for cell in &result.cells {
        let mut row: [String; 13] = Default::default();
        row[0] = cell.shape.to_string();
        match (&cell.status, &cell.step_time) {
            (CellStatus::Ok, Some(t)) => {
                row[1] = t.n.to_string();
                row[2] = ms(t.median_s.get());
                row[3] = ms(t.p90_s.get());
                row[4] = ms(t.p99_s.get());
                row[5] = ms(t.min_s.get());
                row[6] = ms(t.max_s.get());
                row[7] = t.cv.map_or("-".to_owned(), |cv| format!("{:.1}%", cv.get() * 100.0));
                row[8] = cell.full_depth.as_ref().map_or(String::new(), |f| ms(f.median_s.get()));
                row[9] = cell.tok_per_s_per_user.map_or("-".to_owned(), |v| format!("{:.1}", v.get()));
                row[10] = cell.tok_per_s_per_device.map_or("-".to_owned(), |v| format!("{:.1}", v.get()));
                row[11] = match (cell.attention, cell.experts) {
                    (Some(a), Some(e)) => match cell.experts_touched {
                        Some(touched) => format!("{a}, experts {e} ({:.0} touched)", touched.get()),
                        None => format!("{a}, experts {e}"),
                    },
                    (Some(a), None) => a.to_string(),
                    (None, _) => "-".to_owned(),
                };
                row[12] = match (cell.issue_median_s, cell.launch_bound) {
                    (Some(issue), Some(true)) => format!("{} LAUNCH-BOUND", ms(issue.get())),
                    (Some(issue), _) => ms(issue.get()),
                    (None, _) => "-".to_owned(),
                };
            }
            (CellStatus::Ok, None) => row[1] = "no step times".to_owned(),
            (status, _) => row[1] = format!("{} (see below)", status.failure().unwrap_or_default()),
        }
        rows.row(row);
    }
    out.push_str(&rows.text(usize::MAX));
    if extrapolated {
        let _ = writeln!(out, "tok/s figures come from the full-depth estimates (head-only time + layers scaled)");
    }
    if result.cells.iter().any(|c| c.launch_bound == Some(true)) {
        let _ = writeln!(
            out,
            "LAUNCH-BOUND: issuing the step took at least 90% of it; the device waited on the host, so those \
             step times describe the host and the dispatcher more than the device"
        );
    }
    let failed: Vec<&CellRecord> = result.cells.iter().filter(|c| c.status != CellStatus::Ok).collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\ncells that failed:");
        for cell in failed {
            let kind = cell.status.failure().unwrap_or_default();
            let _ = writeln!(out, "  {}: {kind}: {}", cell.shape, cell.status.message().unwrap_or_default());
        }
    }
    out
}

/// The device's ceilings and each cell against them.
fn roofline_section(result: &RunResult) -> String {
    let mut out = String::new();
    if let Some(roofline) = &result.roofline {
        let _ = writeln!(out, "\nroofline (the device's measured ceilings):");
        out.push_str(&indent(&roofline_table(roofline)));
        let mut rows = Table::new(["CELL", "GB/S", "OF BANDWIDTH", "GFLOP/S", "OF MATMUL"]);
        for cell in &result.cells {
            let Some(r) = &cell.roofline else { continue };
            let share = |f: Option<Finite>| f.map_or("-".to_owned(), |f| format!("{:.1}%", f.get() * 100.0));
            rows.row([
                cell.shape.to_string(),
                format!("{:.1}", r.achieved_bytes_per_s.get() / 1e9),
                share(r.bandwidth_fraction),
                format!("{:.1}", r.achieved_flops_per_s.get() / 1e9),
                share(r.matmul_fraction),
            ]);
        }
        if !rows.is_empty() {
            let _ = writeln!(out, "\ncells against the ceilings (work per step: docs/ROOFLINE.md):");
            out.push_str(&indent(&rows.text(usize::MAX)));
        }
    }
    out
}

/// Joules per token, or `-`.
fn joules(j: Option<Finite>) -> String {
    j.map_or("-".to_owned(), |j| format!("{:.3}", j.get()))
}

/// The decode frontier.
fn frontier_section(derived: &Derived) -> String {
    let mut out = String::new();
    if !derived.frontier.is_empty() {
        let _ = writeln!(out, "\ndecode frontier (Pareto set of tok/s/user against tok/s/device):");
        let graphs = derived.decode_modes.is_some();
        let mut rows =
            Table::new(["CTX", "BATCH", "TOK/S/USER", "TOK/S/DEVICE", "J/TOKEN", if graphs { "MODE" } else { "" }]);
        for line in &derived.frontier {
            for p in &line.points {
                rows.row([
                    line.ctx.to_string(),
                    p.batch.to_string(),
                    format!("{:.1}", p.tok_per_s_per_user.get()),
                    format!("{:.1}", p.tok_per_s_per_device.get()),
                    joules(p.joules_per_token),
                    if graphs { p.mode.to_string() } else { String::new() },
                ]);
            }
        }
        out.push_str(&indent(&rows.text(usize::MAX)));
    }
    if let Some(modes) = &derived.decode_modes {
        let _ = writeln!(out, "  decode figures use {modes}");
    }
    out.push_str(&eager_graph_section(derived));
    out
}

/// Each decode shape measured eager and as a graph: what the host and the dispatcher cost a
/// step on the device, and each mode's attention kernel.
fn eager_graph_section(derived: &Derived) -> String {
    let mut out = String::new();
    if derived.eager_graph.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\neager against graph (median step; the ratio is what issuing each kernel from the host costs, and where \
         ATTENTION names two kernels, their difference too):"
    );
    let mut rows = Table::new(["CTX", "BATCH", "EAGER", "GRAPH", "EAGER/GRAPH", "ATTENTION"]);
    for pair in &derived.eager_graph {
        rows.row([
            pair.ctx.to_string(),
            pair.batch.to_string(),
            ms(pair.eager_step_s.get()),
            ms(pair.graph_step_s.get()),
            format!("{:.2}x", pair.eager_over_graph.get()),
            attention_pair(pair.eager_attention, pair.graph_attention),
        ]);
    }
    out.push_str(&indent(&rows.text(usize::MAX)));
    out
}

/// Each mode's attention kernel, eager first: one name where both ran the same, `-` where
/// neither cell says.
pub(crate) fn attention_pair(eager: Option<AttentionKernel>, graph: Option<AttentionKernel>) -> String {
    let name = |k: Option<AttentionKernel>| k.map_or("-", AttentionKernel::as_str);
    match (eager, graph) {
        (None, None) => "-".to_owned(),
        (e, g) if e == g => name(e).to_owned(),
        (e, g) => format!("{} eager, {} graph", name(e), name(g)),
    }
}

/// The prefill table.
fn prefill_section(derived: &Derived) -> String {
    let mut out = String::new();
    if !derived.prefill.is_empty() {
        let _ = writeln!(out, "\nprefill:");
        let mut rows = Table::new(["BATCH", "PROMPT", "TTFT", "TOK/S/DEVICE", "J/TOKEN"]);
        for p in &derived.prefill {
            rows.row([
                p.batch.to_string(),
                p.prompt_len.to_string(),
                ms(p.ttft_s.get()),
                format!("{:.1}", p.tok_per_s_per_device.get()),
                joules(p.joules_per_token),
            ]);
        }
        out.push_str(&indent(&rows.text(usize::MAX)));
    }
    out
}

/// A measured figure beside the simulated one and its error relative to it: `12.0 / 10.0 (+20%)`.
fn measured_and_simulated(measured: f64, simulated: Option<f64>, show: &dyn Fn(f64) -> String) -> String {
    match simulated {
        // A signed result can hold a simulated figure of zero: no error is relative to it.
        Some(s) if s > 0.0 => format!("{} / {} ({:+.0}%)", show(measured), show(s), 100.0 * (measured / s - 1.0)),
        Some(s) => format!("{} / {}", show(measured), show(s)),
        None => format!("{} / -", show(measured)),
    }
}

/// A served rate's steady state in words, beside its window: the simulation at the rate of as
/// many requests as the latency-bounded search simulates, and whether the window's measurement
/// came to the same verdict on the bound; `None` where the result does not hold it.
pub fn steady_words(rate: &ServedRate) -> Option<String> {
    let steady = rate.steady.as_ref()?;
    let s = &steady.simulated;
    let verdict = |held: bool| if held { "held" } else { "broken" };
    let window = if rate.within_bound == steady.within_bound {
        format!("as measured over this window of {} requests", rate.requests)
    } else {
        format!(
            "where this window of {} requests measured it {}: the window is too short to show the steady state",
            rate.requests,
            verdict(rate.within_bound)
        )
    };
    Some(format!(
        "the steady state, simulated over {} requests: p99 TTFT {}, p99 TPOT {}, {:.1} tok/s, the bound {} {window}",
        steady.requests,
        ms(s.ttft_p99_s.get()),
        ms(s.tpot_p99_s.get()),
        s.output_tok_per_s_per_device.get(),
        verdict(steady.within_bound)
    ))
}

/// A served rate's output tok/s over the window's steady part in words, measured and simulated
/// (the same requests and arrivals), beside the whole window's, or why the window had none;
/// `None` where the result does not record it.
pub fn steady_part_words(rate: &ServedRate) -> Option<String> {
    let measured = rate.measured.steady_output_tok_per_s_per_device.as_ref()?;
    Some(match measured {
        Reported::Known(tok) => {
            let simulated = match rate.simulated.known().and_then(|s| s.steady_output_tok_per_s_per_device.as_ref()) {
                Some(Reported::Known(sim)) => format!("{:.1} simulated", sim.get()),
                _ => "none simulated".to_owned(),
            };
            format!(
                "{:.1} tok/s measured, {simulated} (the whole window's {:.1})",
                tok.get(),
                rate.measured.output_tok_per_s_per_device.get()
            )
        }
        Reported::Unavailable { unavailable } => format!("none measured: {}", terminal_text(unavailable, 300)),
    })
}

/// The serving phase: each rate served, measured beside the simulation at that rate.
pub fn serving_section(serving: &lynx_schema::serving::ServingRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nserving phase (measured at the simulation's latency-bounded rate, 20% above it, and under it where the \
         bound broke there; the p99s over each window's requests after its first tenth, which fill the idle server, \
         as the simulation's are; server: {}):",
        terminal_text(&serving.server, 300)
    );
    if let Some(reason) = &serving.graph_steps_failed {
        // Where the capture failed at a later rate, the workload it failed in keeps the rates it
        // had served with graph steps.
        let graph: Vec<String> = serving
            .served
            .iter()
            .filter(|s| s.mode == lynx_schema::result::StepMode::Graph)
            .map(|s| format!("{} under {}", terminal_text(&s.workload.name, 60), terminal_text(&s.bound.name, 60)))
            .collect();
        let kept = if graph.is_empty() {
            String::new()
        } else {
            format!(" (but the rates of {} served before it, with graph steps)", graph.join(", "))
        };
        let _ = writeln!(
            out,
            "  eager steps although graph cells passed their check{kept}: capturing the loop's graph steps failed: {}",
            terminal_text(reason, 300)
        );
    }
    let mut rows = Table::new([
        "WORKLOAD",
        "BOUND",
        "RATE",
        "P99 TTFT MEASURED/SIM",
        "P99 TPOT MEASURED/SIM",
        "TOK/S MEASURED/SIM",
        "LOOP P50/P99",
        "STEPS/TABLE",
        "J/OUT TOKEN",
        "J/TOKEN",
    ]);
    let mut reasons = Vec::new();
    let mut spreads = Vec::new();
    let mut steadies = Vec::new();
    let mut steady_parts = Vec::new();
    let pair = measured_and_simulated;
    for served in &serving.served {
        let name = terminal_text(&served.workload.to_string(), 60);
        if let Some(window) = &served.window {
            steadies.push(format!(
                "  {name} {}: the window: {}",
                terminal_text(&served.bound.name, 60),
                terminal_text(window, 400)
            ));
        }
        if let Some(step_down) = &served.step_down {
            steadies.push(format!(
                "  {name} {}: {}",
                terminal_text(&served.bound.name, 60),
                terminal_text(step_down, 400)
            ));
        }
        // A later rate failed (or the worker died in it): said under the table, beside the rates
        // served before it.
        if let Some(cut_short) = &served.cut_short {
            reasons.push(format!(
                "  {name} under {}: the rates after those in the table were not served: {}",
                terminal_text(&served.bound.name, 60),
                terminal_text(cut_short, 300)
            ));
        }
        match &served.rates {
            Reported::Known(rates) => {
                for r in rates {
                    // Which rate a line under the table is about.
                    let at = format!(
                        "  {name} {} at {:.4} ({})",
                        terminal_text(&served.bound.name, 60),
                        r.rate_per_s.get(),
                        terminal_text(&r.label, 20)
                    );
                    if let Some(words) = steady_part_words(r) {
                        steady_parts.push(format!("{at}: {words}"));
                    }
                    if let Some(words) = steady_words(r) {
                        steadies.push(format!("{at}: {words}"));
                    }
                    let (m, sim) = (&r.measured, r.simulated.known());
                    let tok = |v: f64| format!("{v:.1}");
                    let ratio = |v: Option<Finite>| v.map_or("-".to_owned(), |v| format!("{:.2}", v.get()));
                    rows.row([
                        name.clone(),
                        served.bound.name.clone(),
                        format!(
                            "{:.4} ({}{})",
                            r.rate_per_s.get(),
                            r.label,
                            if r.within_bound { "" } else { ", bound broken" }
                        ),
                        pair(m.ttft_p99_s.get(), sim.map(|s| s.ttft_p99_s.get()), &ms),
                        pair(m.tpot_p99_s.get(), sim.map(|s| s.tpot_p99_s.get()), &ms),
                        pair(
                            m.output_tok_per_s_per_device.get(),
                            sim.map(|s| s.output_tok_per_s_per_device.get()),
                            &tok,
                        ),
                        format!("{} / {}", ms(r.overhead_s[0].get()), ms(r.overhead_s[2].get())),
                        format!("{} / {}", ratio(r.decode_step_ratio), ratio(r.prefill_step_ratio)),
                        figure(&r.joules_per_output_token, 3, "-"),
                        figure(&r.joules_per_token, 3, "-"),
                    ]);
                    let range = |[low, high]: [Finite; 2]| format!("{}–{}", ms(low.get()), ms(high.get()));
                    let draws = r.simulated_draws.as_ref().map(|d| {
                        format!(
                            "p99 TTFT {}, p99 TPOT {} over {} draws",
                            range(d.ttft_p99_s),
                            range(d.tpot_p99_s),
                            d.draws
                        )
                    });
                    let against = |how: &str, p: &lynx_schema::serving::AtLoopPace| {
                        format!(
                            "{how}: {}, {}",
                            pair(m.ttft_p99_s.get(), Some(p.simulated.ttft_p99_s.get()), &ms),
                            pair(m.tpot_p99_s.get(), Some(p.simulated.tpot_p99_s.get()), &ms)
                        )
                    };
                    let paced = r.loop_paced().map(|(how, p)| against(how, p));
                    let replayed =
                        r.at_loop_replay.as_ref().map(|p| against("replaying them in the order they ran", p));
                    let spread = r
                        .step_spread_words()
                        .map(|words| format!("steps' 90th percentile over the tables' median {words}"));
                    let off_line = r
                        .batches_off_line_words()
                        .map(|words| format!("batches no cell measured, off the table's line: {words}"));
                    // The loop's slow steps and what its thread did in them (a result's source
                    // names are its own text: made inert).
                    let slow = r.slow_steps_words().map(|words| format!("slow steps {}", terminal_text(&words, 2000)));
                    let both: Vec<String> = draws
                        .into_iter()
                        .chain(paced)
                        .chain(replayed)
                        .chain(spread)
                        .chain(r.prefill_order_words())
                        .chain(slow)
                        .chain(off_line)
                        .chain(r.pace_after_words())
                        .chain(r.prefill_after_words())
                        .collect();
                    if !both.is_empty() {
                        spreads.push(format!("{at}: {}", both.join("; ")));
                    }
                }
            }
            Reported::Unavailable { unavailable } => {
                reasons.push(format!(
                    "  ({}) {name} under {}: {}",
                    reasons.len() + 1,
                    terminal_text(&served.bound.name, 60),
                    terminal_text(unavailable, 300)
                ));
                let mut row: [String; 10] = Default::default();
                row[0] = name;
                row[1] = served.bound.name.clone();
                row[2] = format!("not served ({})", reasons.len());
                rows.row(row);
            }
        }
    }
    out.push_str(&indent(&rows.text(usize::MAX)));
    for reason in reasons {
        let _ = writeln!(out, "{reason}");
    }
    if !spreads.is_empty() {
        let _ = writeln!(
            out,
            "  SIM: each figure's median over draws of the steps' variation (the same requests and arrivals each \
             time); the simulated p99s' 10th–90th percentiles over the draws; measured / simulated p99 TTFT and \
             TPOT fed the loop's own steps (their pace and spread at each batch; in older results every step at their \
             median pace, STEPS/TABLE) and replaying them in the order they ran, diagnostics; the loop's steps' \
             90th percentile over the tables' median beside the cells' own; its prefill steps after a prefill and \
             after a decode step (a cell's follow prefills only); its slow steps, with what its thread did in \
             them; the batches no cell measured that ran off the table's line; and the warm-up's step and the \
             nearest prefill cell timed again after the window:"
        );
        for spread in spreads {
            let _ = writeln!(out, "  {spread}");
        }
    }
    if !steady_parts.is_empty() {
        let _ = writeln!(
            out,
            "  STEADY PART: TOK/S is over the whole window, the server's fill and drain included; over its steady \
             part (from one request lifetime after the first arrival to the last arrival) it leaves them out, the \
             measured and the simulated over the same arrivals (a Poisson draw: over a short part, not the rate's \
             mean):"
        );
        for part in steady_parts {
            let _ = writeln!(out, "  {part}");
        }
    }
    if !steadies.is_empty() {
        let _ = writeln!(
            out,
            "  STEADY STATE: a window starts from an idle server and its p99 is over its own requests; the bound is \
             defined in the steady state, which the simulation gives at each rate served:"
        );
        for steady in steadies {
            let _ = writeln!(out, "  {steady}");
        }
    }
    let _ = writeln!(
        out,
        "  STEPS/TABLE: the loop's decode / prefill steps over the step tables' times at their shapes (median); J/TOKEN \
         counts input and output tokens; energy is the whole window's, idle gaps included"
    );
    out
}

/// Latency-bounded throughput and cost.
fn bounded_section(derived: &Derived) -> String {
    let mut out = String::new();
    if !derived.latency_bounded.is_empty() {
        let price = match derived.price.usd_per_device_hour {
            Some(p) => {
                format!("${:.2}/device-hour at {:.0}% utilisation", p.get(), derived.price.utilisation.get() * 100.0)
            }
            None => "no price given (--price-per-hour)".to_owned(),
        };
        let _ = writeln!(
            out,
            "\nlatency-bounded throughput (simulated continuous batching, and measured by the serving phase where it \
             ran; {price}):"
        );
        let mut rows = Table::new([
            "WORKLOAD",
            "BOUND",
            "HOW",
            "P99 TTFT/TPOT",
            "BATCH CAP",
            "REQ/S",
            "TOK/S/DEVICE",
            "TOK/S/USER",
            "J/TOKEN",
            "$/M TOKENS",
        ]);
        let mut reasons = Vec::new();
        for lb in &derived.latency_bounded {
            let bound = format!("{} ({} / {})", lb.bound.name, ms(lb.bound.ttft_p99_s), ms(lb.bound.tpot_p99_s));
            let mut row: [String; 10] = Default::default();
            row[0] = lb.workload.to_string();
            row[1] = bound;
            row[2] = lb.point_how();
            if let Some(m) = &lb.measured {
                // The published figure first: what the serving loop measured at the rate.
                let within = if m.within_bound { "" } else { " (bound broken)" };
                rows.row([
                    lb.workload.to_string(),
                    row[1].clone(),
                    format!("{}{}{}", m.how(), m.window(), m.under_simulated_rate()),
                    format!("{} / {}{within}", ms(m.ttft_p99_s.get()), ms(m.tpot_p99_s.get())),
                    m.max_batch.map_or("-".to_owned(), |b| b.to_string()),
                    format!("{:.4}", m.request_rate_per_s.get()),
                    m.tok_per_s(),
                    format!("{:.1}", m.tok_per_s_per_user.get()),
                    figure(&m.joules_per_output_token, 3, "-"),
                    figure(&m.usd_per_million_output_tokens, 2, "-"),
                ]);
            }
            match &lb.point {
                Reported::Known(p) => {
                    row[3] = format!("{} / {}", ms(p.ttft_p99_s.get()), ms(p.tpot_p99_s.get()));
                    row[4] = p.max_batch.to_string();
                    row[5] = format!("{:.4}", p.request_rate_per_s.get());
                    row[6] = format!("{}{}", p.tok_per_s(), if p.extrapolated { "*" } else { "" });
                    row[7] = format!("{:.1}", p.tok_per_s_per_user.get());
                    row[8] = figure(&p.joules_per_output_token, 3, "-");
                    row[9] = figure(&p.usd_per_million_output_tokens, 2, "-");
                }
                Reported::Unavailable { unavailable } => {
                    reasons.push(format!(
                        "  ({}) {} under {}: {unavailable}",
                        reasons.len() + 1,
                        lb.workload,
                        lb.bound.name
                    ));
                    row[3] = format!("none ({})", reasons.len());
                }
            }
            rows.row(row);
        }
        out.push_str(&indent(&rows.text(usize::MAX)));
        for reason in reasons {
            let _ = writeln!(out, "{reason}");
        }
        if derived.latency_bounded.iter().any(|lb| matches!(&lb.point, Reported::Known(p) if p.extrapolated)) {
            let _ = writeln!(out, "  * the simulation extrapolated step times beyond the measured contexts");
        }
        let steady = |s: &Option<Reported<Finite>>| matches!(s, Some(Reported::Known(_)));
        if derived.latency_bounded.iter().any(|lb| {
            lb.measured.as_ref().is_some_and(|m| steady(&m.steady_output_tok_per_s_per_device))
                || matches!(&lb.point, Reported::Known(p) if steady(&p.steady_output_tok_per_s_per_device))
        }) {
            let _ = writeln!(
                out,
                "  TOK/S/DEVICE: output tokens from the first arrival to the last token, the server's fill and drain \
                 included; (steady …): over the steady part, from one request lifetime after the first arrival to \
                 the last arrival, without them"
            );
        }
    }
    out
}

/// A serving record of one workload (`workload`, 64/16) served at one rate under the server
/// bound, measured and simulated alike (p99 TTFT 870 ms, TPOT 84 ms), by `server`.
#[cfg(test)]
pub(crate) fn serving_fixture(server: &str, workload: &str) -> lynx_schema::serving::ServingRecord {
    let figures = serde_json::json!({"ttft_p50_s": 0.2, "ttft_p99_s": 0.87, "tpot_p50_s": 0.07, "tpot_p99_s": 0.084,
        "output_tok_per_s_per_device": 68.0, "tok_per_s_per_user": 14.0});
    let lengths = |n: u32| serde_json::json!({"mean": n, "p50": n, "p90": n, "p99": n, "min": n, "max": n});
    serde_json::from_value(serde_json::json!({"server": server, "served": [{
        "workload": {"name": workload, "isl": 64, "osl": 16},
        "bound": {"name": "server", "ttft_p99_s": 2.0, "tpot_p99_s": 0.1},
        "isl": lengths(64), "osl": lengths(16), "max_batch": 8,
        "rates": [{"label": "bounded", "rate_per_s": 4.6357, "requests": 24, "window_s": 5.7, "measured": figures,
            "simulated": figures, "relative_error": null, "within_bound": true, "overhead_s": [1e-6, 1e-5, 1e-4],
            "iterations": 107, "joules_per_output_token": {"unavailable": "no power"},
            "joules_per_token": {"unavailable": "no power"}}]}]}))
    .expect("the schema's serving record")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::compare::{Comparison, Outcome, Row, TestHooks, Verdict};

    /// Sizes read in the unit that keeps a whole digit, at the edges of each unit.
    #[test]
    fn sizes_are_said_in_the_unit_that_keeps_a_whole_digit() {
        let said: Vec<String> =
            [0, 999, 1_000, 999_994, 999_995, 12_580_000, 999_994_999, 999_995_000, 141_000_000_000]
                .into_iter()
                .map(bytes_words)
                .collect();
        assert_eq!(
            said,
            [
                "0 bytes",
                "999 bytes",
                "1.00 kB",
                "999.99 kB",
                "1.00 MB",
                "12.58 MB",
                "999.99 MB",
                "1.00 GB",
                "141.00 GB"
            ]
        );
    }

    /// The eager/graph table names one kernel where both modes ran it, both where they differ,
    /// and says nothing where neither cell recorded one (results made before kernels were).
    #[test]
    fn the_eager_graph_table_names_each_modes_attention_kernel() {
        use AttentionKernel::{Cudnn, Flash};
        assert_eq!(attention_pair(Some(Flash), Some(Cudnn)), "flash eager, cudnn graph");
        assert_eq!(attention_pair(Some(Flash), Some(Flash)), "flash");
        assert_eq!(attention_pair(None, Some(Cudnn)), "- eager, cudnn graph");
        assert_eq!(attention_pair(None, None), "-");
    }

    /// The warm-up line names how alike the warm-up's steps were, and how its step timed again
    /// after the sweep compares, where it recorded them, and reads as before where it did not
    /// (results made before the fields).
    #[test]
    fn the_warm_up_line_prints_its_steps_autocorrelation_where_recorded() {
        let text = r#"{"duration_s": 64.5, "steps": 759, "batch": 16, "ctx": 1152, "equilibrium_reached": true,
            "criteria": {"min_s": 60.0, "max_s": 120.0, "window_s": 10.0, "max_drift": 0.02, "max_spread": 0.1},
            "last_window": null, "telemetry": []}"#;
        let mut warmup: WarmupRecord = serde_json::from_str(text).unwrap();
        let before = "warm-up 64.5 s, 759 decode steps at batch 16 ctx 1152: equilibrium reached";
        assert_eq!(warmup_line(&warmup), before);
        warmup.step_autocorrelation = Some(lynx_schema::stats::StepAutocorrelation {
            steps: 354,
            median_s: lynx_schema::value::Finite::new(0.09, "t").unwrap(),
            lag_1: lynx_schema::value::Finite::new(0.66, "t").unwrap(),
            lag_4: lynx_schema::value::Finite::new(0.39, "t").unwrap(),
        });
        let persistence = format!("{before}; its last 354 steps' autocorrelation 0.66 at lag 1, 0.39 at lag 4");
        assert_eq!(warmup_line(&warmup), persistence);
        // And, in the run's summary, its step timed again after the sweep.
        warmup.after_sweep = Some(lynx_schema::value::Reported::Known(lynx_schema::result::PaceRecheck {
            steps: 26,
            median_s: lynx_schema::value::Finite::new(0.0793, "t").unwrap(),
            ratio: Some(lynx_schema::value::Finite::new(1.107, "r").unwrap()),
        }));
        assert_eq!(
            warmup_line(&warmup),
            format!(
                "{persistence}; its step timed again after the sweep took 1.11× its equilibrium median (79.3 ms over \
                 26 steps)"
            )
        );
        // And a GPU's link as trained at its end, its words cleaned of a hostile file's controls.
        let again = warmup_line(&warmup);
        warmup.link_at_end = Some(lynx_schema::value::Reported::Known(lynx_schema::result::TrainedLink {
            speed: Some("16.0 GT/s\u{1b}[2J PCIe".to_owned()),
            width: Some(16),
        }));
        let line = warmup_line(&warmup);
        assert!(line.starts_with(&format!("{again}; the GPU's PCIe link at its end 16.0 GT/s")), "{line}");
        assert!(line.ends_with(" PCIe x16") && !line.contains('\u{1b}'), "{line:?}");
    }

    /// A node's summary gives each GPU's link as trained under load, where any device's run read
    /// one, and warns of a device whose link ran short of its board; a node of CPUs has no such
    /// column.
    #[test]
    fn a_nodes_summary_shows_each_gpus_link_under_load_and_warns_of_a_short_one() {
        use lynx_schema::fleet::{DeviceExit, DeviceRun, DeviceRunStatus, NodeSummary};
        let run = |device: &str, link: Option<&str>, short: Option<&str>| DeviceRun {
            device: device.to_owned(),
            name: Some("NVIDIA H200".to_owned()),
            run_dir: None,
            envelope: Some(format!("/r/{device}.intoto.json")),
            status: DeviceRunStatus::Complete,
            exit: DeviceExit::Code(0),
            checks_passed: true,
            link_at_end: link.map(str::to_owned),
            link_short: short.map(str::to_owned),
        };
        let short = "the GPU's PCIe link ran at 16.0 GT/s PCIe x16 under load, short of the 32.0 GT/s PCIe x16 it can";
        let mut summary = NodeSummary {
            node: "gpu-node-1".to_owned(),
            started_at: "2026-12-07T00:00:00Z".to_owned(),
            runs: vec![
                run("cuda:0", Some("32.0 GT/s PCIe x16"), None),
                run("cuda:1", Some("16.0 GT/s PCIe x16"), Some(short)),
            ],
            spreads: Vec::new(),
        };
        let text = node_summary(&summary);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].contains("CHECKS  LINK UNDER LOAD     RESULT"), "{text}");
        assert!(lines[2].contains("passed  32.0 GT/s PCIe x16  /r/cuda:0.intoto.json"), "{text}");
        assert!(lines[3].contains("passed  16.0 GT/s PCIe x16  /r/cuda:1.intoto.json"), "{text}");
        assert_eq!(lines[4], format!("warning: cuda:1: {short}"), "{text}");
        for run in &mut summary.runs {
            (run.link_at_end, run.link_short) = (None, None);
        }
        let text = node_summary(&summary);
        assert!(!text.contains("LINK") && !text.contains("warning"), "{text}");
    }

    /// Where a later rate failed after others were served, the section keeps those and says why
    /// the rest were not served, under the table.
    #[test]
    fn the_serving_section_says_why_the_rates_after_those_served_were_not() {
        let mut serving = serving_fixture("batch cap 8, whole prompts", "short");
        assert!(!serving_section(&serving).contains("were not served"));
        serving.served[0].cut_short = Some("serving over failed: CUDA error: an illegal memory access".to_owned());
        let section = serving_section(&serving);
        assert!(section.contains("bounded"), "the rate served before is kept: {section}");
        assert!(
            section.contains(
                "\n  short 64/16 under server: the rates after those in the table were not served: serving over \
                 failed: CUDA error: an illegal memory access\n"
            ),
            "{section}"
        );
    }

    /// Where the simulated figures of a served rate are medians over draws of the steps, the
    /// section says so and gives the simulated p99s' spread over them, and the simulation fed the
    /// loop's own steps (or at its pace) where it was run; a result from before either has no
    /// such lines.
    #[test]
    fn the_serving_section_gives_the_spread_of_the_simulated_p99s_over_their_draws() {
        let mut serving = serving_fixture("batch cap 8, whole prompts", "short");
        let before = serving_section(&serving);
        assert!(!before.contains("draws"), "{before}");
        // Which requests the p99s are over is said, as it is for the simulation's.
        assert!(before.contains("the p99s over each window's requests after its first tenth"), "{before}");
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        let f = |v: f64| Finite::new(v, "t").unwrap();
        rates[0].simulated_draws = Some(lynx_schema::serving::SimulatedDraws {
            draws: 31,
            ttft_p99_s: [f(0.863), f(0.949)],
            tpot_p99_s: [f(0.0854), f(0.0914)],
        });
        let after = serving_section(&serving);
        assert!(after.contains("SIM: each figure's median over draws of the steps' variation"), "{after}");
        assert!(
            after.contains(
                "    short 64/16 server at 4.6357 (bounded): p99 TTFT 863 ms–949 ms, p99 TPOT 85.4 ms–91.4 ms over 31 \
                 draws\n"
            ),
            "{after}"
        );
        // And the simulation at the loop's own pace, where it was run.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        let mut paced = rates[0].measured.clone();
        paced.ttft_p99_s = f(0.829);
        let relative =
            lynx_schema::serving::RelativeError { ttft_p99: f(0.05), tpot_p99: f(0.0), output_tok_per_s: f(0.0) };
        let paced = lynx_schema::serving::AtLoopPace { simulated: paced, relative_error: relative };
        rates[0].at_loop_pace = Some(paced.clone());
        let older = serving_section(&serving);
        assert!(
            older.contains(
                "over 31 draws; at the loop's own step pace: 870 ms / 829 ms (+5%), 84.0 ms / 84.0 ms (+0%)\n"
            ),
            "{older}"
        );
        // A result that has it fed the loop's own steps says so instead.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].at_loop_steps = Some(paced);
        let paced = serving_section(&serving);
        assert!(
            paced.contains("over 31 draws; fed the loop's own steps: 870 ms / 829 ms (+5%), 84.0 ms / 84.0 ms (+0%)\n"),
            "{paced}"
        );
        // And the simulation replaying them in order, after it.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        let mut replayed = rates[0].at_loop_steps.clone().unwrap();
        replayed.simulated.ttft_p99_s = f(0.861);
        rates[0].at_loop_replay = Some(replayed);
        let replayed = serving_section(&serving);
        assert!(
            replayed.contains(
                "fed the loop's own steps: 870 ms / 829 ms (+5%), 84.0 ms / 84.0 ms (+0%); replaying them in the order \
                 they ran: 870 ms / 861 ms (+1%), 84.0 ms / 84.0 ms (+0%)\n"
            ),
            "{replayed}"
        );
        // And batches no cell measured whose steps ran off the table's line.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].batches_off_line =
            Some(vec![lynx_schema::serving::BatchOffLine { prefill: false, batch: 3, steps: 225, pace: f(1.32) }]);
        let off = serving_section(&serving);
        assert!(
            off.contains("; batches no cell measured, off the table's line: decode batch 3 at 1.32× (225 steps)\n"),
            "{off}"
        );
        // And the loop's steps' spread against the cells'.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].batches_off_line = None;
        rates[0].decode_step_spread = Some(lynx_schema::serving::StepSpread { loop_p90: f(1.45), cells_p90: f(1.08) });
        let spread = serving_section(&serving);
        assert!(
            spread.contains(
                "84.0 ms / 84.0 ms (+0%); steps' 90th percentile over the tables' median decode 1.45× (the cells' \
                 1.08×)\n"
            ),
            "{spread}"
        );
        // And its prefill steps by the step before them, after the spread.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].prefill_step_ratio_after_decode = Some(f(1.04));
        let order = serving_section(&serving);
        assert!(
            order.contains("(the cells' 1.08×); prefill steps after a decode step 1.04× their tables\n"),
            "{order}"
        );
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].prefill_step_ratio_after_prefill = Some(f(1.02));
        let order = serving_section(&serving);
        assert!(
            order.contains(
                "(the cells' 1.08×); prefill steps after a prefill 1.02×, after a decode step 1.04× their tables\n"
            ),
            "{order}"
        );
        assert!(
            order.contains("its prefill steps after a prefill and after a decode step (a cell's follow"),
            "{order}"
        );
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        (rates[0].prefill_step_ratio_after_prefill, rates[0].prefill_step_ratio_after_decode) = (None, None);
        // And the loop's slow steps, what its thread did in them, and the readings they overlapped,
        // whose source names a result holds as its own text: control characters made inert.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].decode_slow_steps = Some(lynx_schema::result::SlowSteps {
            factor: f(1.2),
            steps: 40,
            slow: 4,
            during_readings: vec![lynx_schema::result::ReadingOverlap {
                source: "host\u{1b}[2J".to_owned(),
                readings: 30,
                reading_median_s: f(0.001),
                slow: 2,
                others_share: f(0.5),
                over_s: None,
            }],
            thread: None,
            allocator: None,
            issue: None,
        });
        let slow = serving_section(&serving);
        assert!(
            slow.contains(
                "(the cells' 1.08×); slow steps decode: 4 of its 40 steps over 1.2× their median measured / table \
                 time; of them, 2 overlapped host\\u{1b}[2J's readings (the others: 50%)\n"
            ),
            "{slow}"
        );
        assert!(slow.contains("its slow steps, with what its thread did in them;"), "{slow}");
        // And the warm-up's step timed again after the window, last.
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].pace_after = Some(Reported::unavailable("out of memory"));
        rates[0].prefill_after = Some(Reported::Known(lynx_schema::serving::PrefillRecheck {
            batch: 2,
            prompt_len: 64,
            steps: 17,
            median_s: Finite::new(0.0931, "t").unwrap(),
            ratio: Some(Finite::new(1.04, "t").unwrap()),
        }));
        let again = serving_section(&serving);
        assert!(
            again.contains(
                "their median measured / table time; of them, 2 overlapped host\\u{1b}[2J's readings (the \
                 others: 50%); the warm-up's step could not be timed again after the window: out of memory; the \
                 prefill cell at batch 2, prompt 64, timed again after the window, took 1.04× the table (93.1 ms over \
                 17 steps)\n"
            ),
            "{again}"
        );
        assert!(
            again.contains("and the warm-up's step and the nearest prefill cell timed again after the window:\n"),
            "{again}"
        );
    }

    /// Where a served rate records its steady part's throughput, the section gives it measured and
    /// simulated beside the whole window's, or why the window had none; a result from before the
    /// field has no such line.
    #[test]
    fn the_serving_section_gives_the_steady_parts_throughput_beside_the_windows() {
        let mut serving = serving_fixture("batch cap 8, whole prompts", "short");
        let before = serving_section(&serving);
        assert!(!before.contains("STEADY PART"), "{before}");
        let f = |v: f64| Finite::new(v, "t").unwrap();
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].measured.steady_output_tok_per_s_per_device = Some(Reported::Known(f(73.2)));
        if let Reported::Known(simulated) = &mut rates[0].simulated {
            simulated.steady_output_tok_per_s_per_device = Some(Reported::Known(f(74.0)));
        }
        let after = serving_section(&serving);
        assert!(after.contains("STEADY PART: TOK/S is over the whole window"), "{after}");
        assert!(
            after.contains(
                "    short 64/16 server at 4.6357 (bounded): 73.2 tok/s measured, 74.0 simulated (the whole window's \
                 68.0)\n"
            ),
            "{after}"
        );
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        rates[0].measured.steady_output_tok_per_s_per_device =
            Some(Reported::Unavailable { unavailable: "no steady part: the arrivals spanned 5.2 s".to_owned() });
        let none = serving_section(&serving);
        assert!(none.contains("(bounded): none measured: no steady part: the arrivals spanned 5.2 s\n"), "{none}");
    }

    /// Milliseconds with the decimals their size needs; under 10 µs, microseconds.
    #[test]
    fn durations_print_in_ms_or_under_10_us_in_us() {
        assert_eq!(ms(2.0), "2000 ms");
        assert_eq!(ms(0.0123), "12.3 ms");
        assert_eq!(ms(0.00049), "0.49 ms");
        assert_eq!(ms(1e-5), "0.01 ms");
        assert_eq!(ms(1e-6), "1.0 µs");
    }

    /// A signed result may hold zeros where figures should be: no NaN or infinity is printed for
    /// a ratio or a relative error over them. And a comparison's verdict says what each run said
    /// of itself: test hooks set, checks failed.
    #[test]
    fn ratios_over_zero_print_as_undefined() {
        let show = |v: f64| format!("{v:.1}");
        assert_eq!(measured_and_simulated(12.0, Some(10.0), &show), "12.0 / 10.0 (+20%)");
        assert_eq!(measured_and_simulated(0.0, Some(0.0), &show), "0.0 / 0.0");
        assert_eq!(measured_and_simulated(1.0, None, &show), "1.0 / -");
        let row = Row {
            figure: "decode batch 1 ctx 128: median step (s)".to_owned(),
            higher_is_better: false,
            first: 0.0,
            second: 0.1,
            ratio: f64::INFINITY,
            within_spread: None,
            within_tolerance: false,
        };
        let verdict = Verdict {
            outcome: Outcome::Different,
            figures: 1,
            within_tolerance: 0,
            within_spread_only: 0,
            different: 1,
            different_worse: 1,
            worst: Some(lynx_schema::compare::Worst { figure: row.figure.clone(), ratio: row.ratio }),
            test_hooks: None,
            failed_checks: None,
        };
        let comparison = Comparison {
            first: "a".into(),
            second: "b".into(),
            differences: Vec::new(),
            rows: vec![row],
            unmatched: Vec::new(),
            tolerance: 0.02,
            verdict,
            signers: None,
        };
        let text = super::comparison(&comparison, "first", "second");
        assert!(text.starts_with("first: a\nsecond: b\n"), "{text}");
        // Each side names the key it verified under, where it came from an envelope.
        let signed = Comparison { signers: Some(["lab\u{1b}".into(), "vendor".into()]), ..comparison.clone() };
        let said = super::comparison(&signed, "first", "second");
        assert!(said.starts_with("first: a (signed by key lab\\u{1b})\nsecond: b (signed by key vendor)\n"), "{said}");
        assert!(!text.contains("inf") && !text.contains("NaN"), "{text}");
        assert!(text.contains("0.1000  -  "), "{text}");
        assert!(text.contains("farthest: decode batch 1 ctx 128: median step (s) at undefined"), "{text}");

        // Made with test hooks set, the verdict says so before what the figures say, naming
        // each result that was and its hooks, its control characters inert.
        let mut hooked = comparison.clone();
        hooked.verdict.test_hooks =
            Some(TestHooks { first: None, second: Some("LYNX_TEST_CELL_PACE=1\u{1b}[2J".to_owned()) });
        assert_eq!(
            super::verdict(&hooked, "published", "local"),
            format!(
                "NOT A COMPARISON OF DEVICES: local (LYNX_TEST_CELL_PACE=1\\u{{1b}}[2J) was made with test hooks set, a \
                 test's figures, not a device's; of the figures, {}",
                super::verdict(&comparison, "published", "local")
            )
        );
        hooked.verdict.test_hooks = Some(TestHooks { first: Some("A=1".to_owned()), second: Some("B=2".to_owned()) });
        assert!(super::verdict(&hooked, "first", "second")
            .starts_with("NOT A COMPARISON OF DEVICES: first (A=1) and second (B=2) were made with test hooks set"));

        // A run that failed its own checks is named after what the figures say, each side's
        // checks in its result's order.
        use lynx_schema::compare::FailedChecks;
        use lynx_schema::result::CheckName;
        let mut failed = comparison.clone();
        let figures = super::verdict(&comparison, "published", "local");
        failed.verdict.failed_checks = Some(FailedChecks { first: None, second: Some(vec![CheckName::Stability]) });
        assert_eq!(
            super::verdict(&failed, "published", "local"),
            format!("{figures}; local's run FAILED its stability check")
        );
        failed.verdict.failed_checks = Some(FailedChecks {
            first: Some(vec![CheckName::Equilibrium, CheckName::Simulation]),
            second: Some(vec![CheckName::Stability]),
        });
        assert_eq!(
            super::verdict(&failed, "published", "local"),
            format!(
                "{figures}; published's run FAILED its equilibrium, simulation checks, and local's run FAILED its \
                 stability check"
            )
        );
    }
}
