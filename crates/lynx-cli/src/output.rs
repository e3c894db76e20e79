//! What lynx prints: tables on stdout, progress on stderr.

use lynx_report::escape::{csv_field, markdown_text, terminal_text};
use lynx_runner::libtorch::Runtime;
use lynx_runner::{Device, Outcome};
use lynx_schema::catalogue::ModelSummary;
use lynx_schema::config::Precision;
use lynx_schema::derived::Derived;
use lynx_schema::equilibrium::WindowStats;
use lynx_schema::result::{CellRecord, CellShape, CellStatus, Check, RunResult, RunStatus, WarmupRecord};
use lynx_schema::roofline::{ProbeKind, RooflineRecord};
use lynx_schema::value::Finite;
use lynx_schema::value::Reported;
use std::fmt::Write;
use std::path::PathBuf;

const GIB: f64 = (1u64 << 30) as f64;

/// `lynx devices` as a table.
pub fn devices_table(devices: &[Device], runtime: &Runtime) -> String {
    let libtorch = format!("libtorch {} ({})", runtime.version, display_path(&runtime.lib_dir));
    let mut rows = vec![["DEVICE".to_owned(), "NAME".to_owned(), "MEMORY".to_owned(), "RUNS ON".to_owned()]];
    for device in devices {
        let memory = match &device.record.memory_bytes {
            Reported::Known(bytes) => format!("{:.1} GiB", *bytes as f64 / GIB),
            Reported::Unavailable { .. } => "unavailable".to_owned(),
        };
        rows.push([device.record.device.to_string(), device.record.name.to_string(), memory, libtorch.clone()]);
    }
    let mut out = table(&rows);
    for backend in &runtime.gpu_backends {
        if let Reported::Unavailable { unavailable } = &backend.loaded {
            let _ = writeln!(out, "note: {} not loaded: {unavailable}", backend.library);
        }
    }
    out
}

fn display_path(path: &Reported<PathBuf>) -> String {
    match path {
        Reported::Known(path) => path.display().to_string(),
        Reported::Unavailable { unavailable } => format!("path unavailable: {unavailable}"),
    }
}

/// `lynx models` as a table.
pub fn models_table(models: &[ModelSummary]) -> String {
    let mut rows = vec![[
        "MODEL",
        "ATTN",
        "LAYERS",
        "EXPERTS",
        "PARAMS",
        "ACTIVE",
        "WEIGHTS fp32/bf16/fp16/fp8",
        "KV/TOKEN fp32/bf16/fp16/fp8",
    ]
    .map(str::to_owned)];
    for model in models {
        let by_precision = |bytes: &std::collections::BTreeMap<String, u64>, unit: f64, suffix: &str| {
            let values: Vec<String> = Precision::ALL
                .iter()
                .map(|p| bytes.get(&p.to_string()).map_or("-".to_owned(), |&b| format!("{:.1}", b as f64 / unit)))
                .collect();
            format!("{} {suffix}", values.join("/"))
        };
        rows.push([
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
    let mut out = table(&rows);
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
    format!(
        "warm-up {:.1} s, {} decode steps at batch {} ctx {}: {state}{window}",
        warmup.duration_s.get(),
        warmup.steps,
        warmup.batch,
        warmup.ctx
    )
}

/// The table printed at the end of a run.
pub fn run_summary(outcome: &Outcome) -> String {
    let result = &outcome.result;
    let mut out = String::new();
    let _ = writeln!(out, "result: {} ({})", outcome.path.display(), status_word(result.status));
    for warmup in result.warmup.iter().chain(&result.resumed_warmups) {
        let _ = writeln!(out, "{}", warmup_line(warmup));
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
    let extrapolated = result.cells.iter().any(|c| c.full_depth.is_some());
    let full_depth_header = if extrapolated { "FULL-DEPTH MEDIAN" } else { "" };
    let mut rows = vec![[
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
    ]
    .map(str::to_owned)];
    for cell in &result.cells {
        let mut row: [String; 11] = Default::default();
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
            }
            (CellStatus::Oom { .. }, _) => row[1] = "out of memory (see below)".to_owned(),
            (CellStatus::Error { .. }, _) => row[1] = "failed (see below)".to_owned(),
            (CellStatus::Ok, None) => row[1] = "no step times".to_owned(),
        }
        rows.push(row);
    }
    out.push_str(&table(&rows));
    if extrapolated {
        let _ = writeln!(out, "tok/s figures come from the full-depth estimates (head-only time + layers scaled)");
    }
    let failed: Vec<&CellRecord> = result.cells.iter().filter(|c| c.status != CellStatus::Ok).collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\ncells that failed:");
        for cell in failed {
            let kind = if matches!(cell.status, CellStatus::Oom { .. }) { "out of memory" } else { "error" };
            let _ = writeln!(out, "  {}: {kind}: {}", cell.shape, cell.status.message().unwrap_or_default());
        }
    }
    if let Some(roofline) = &result.roofline {
        let _ = writeln!(out, "\nroofline (the device's measured ceilings):");
        out.push_str(&indent(&roofline_table(roofline)));
        let mut rows = vec![["CELL", "GB/S", "OF BANDWIDTH", "GFLOP/S", "OF MATMUL"].map(str::to_owned)];
        for cell in &result.cells {
            let Some(r) = &cell.roofline else { continue };
            let share = |f: Option<Finite>| f.map_or("-".to_owned(), |f| format!("{:.1}%", f.get() * 100.0));
            rows.push([
                cell.shape.to_string(),
                format!("{:.1}", r.achieved_bytes_per_s.get() / 1e9),
                share(r.bandwidth_fraction),
                format!("{:.1}", r.achieved_flops_per_s.get() / 1e9),
                share(r.matmul_fraction),
            ]);
        }
        if rows.len() > 1 {
            let _ = writeln!(out, "\ncells against the ceilings (work per step: docs/ROOFLINE.md):");
            out.push_str(&indent(&table(&rows)));
        }
    }
    if let Some(derived) = &result.derived {
        out.push_str(&derived_report(derived));
    }
    out.push('\n');
    for check in &result.checks {
        let _ = writeln!(out, "{}", check_line(check));
    }
    if result.checks.iter().any(|c| !c.passed) {
        let _ = writeln!(out, "these figures come from a run that FAILED a check: do not publish them as the device's");
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
    let mut rows = vec![["PROBE", "DTYPE", "PHASE", "CEILING", "HOW"].map(str::to_owned)];
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
        rows.push([probe.name.clone(), probe.dtype.to_string(), probe.phase.to_string(), value, how]);
    }
    let mut out = table(&rows);
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
    let joules = |j: Option<Finite>| j.map_or("-".to_owned(), |j| format!("{:.3}", j.get()));
    if !derived.frontier.is_empty() {
        let _ = writeln!(out, "\ndecode frontier (Pareto set of tok/s/user against tok/s/device):");
        let mut rows = vec![["CTX", "BATCH", "TOK/S/USER", "TOK/S/DEVICE", "J/TOKEN"].map(str::to_owned)];
        for line in &derived.frontier {
            for p in &line.points {
                rows.push([
                    line.ctx.to_string(),
                    p.batch.to_string(),
                    format!("{:.1}", p.tok_per_s_per_user.get()),
                    format!("{:.1}", p.tok_per_s_per_device.get()),
                    joules(p.joules_per_token),
                ]);
            }
        }
        out.push_str(&indent(&table(&rows)));
    }
    if !derived.prefill.is_empty() {
        let _ = writeln!(out, "\nprefill:");
        let mut rows = vec![["BATCH", "PROMPT", "TTFT", "TOK/S/DEVICE", "J/TOKEN"].map(str::to_owned)];
        for p in &derived.prefill {
            rows.push([
                p.batch.to_string(),
                p.prompt_len.to_string(),
                ms(p.ttft_s.get()),
                format!("{:.1}", p.tok_per_s_per_device.get()),
                joules(p.joules_per_token),
            ]);
        }
        out.push_str(&indent(&table(&rows)));
    }
    if !derived.latency_bounded.is_empty() {
        let price = match derived.price.usd_per_device_hour {
            Some(p) => {
                format!("${:.2}/device-hour at {:.0}% utilisation", p.get(), derived.price.utilisation.get() * 100.0)
            }
            None => "no price given (--price-per-hour)".to_owned(),
        };
        let _ = writeln!(out, "\nlatency-bounded throughput (simulated continuous batching; {price}):");
        let mut rows = vec![[
            "WORKLOAD",
            "BOUND",
            "P99 TTFT/TPOT",
            "BATCH CAP",
            "REQ/S",
            "TOK/S/DEVICE",
            "TOK/S/USER",
            "J/TOKEN",
            "$/M TOKENS",
        ]
        .map(str::to_owned)];
        let mut reasons = Vec::new();
        for lb in &derived.latency_bounded {
            let bound = format!("{} ({} / {})", lb.bound.name, ms(lb.bound.ttft_p99_s), ms(lb.bound.tpot_p99_s));
            let mut row: [String; 9] = Default::default();
            row[0] = lb.workload.to_string();
            row[1] = bound;
            match &lb.point {
                Reported::Known(p) => {
                    row[2] = format!("{} / {}", ms(p.ttft_p99_s.get()), ms(p.tpot_p99_s.get()));
                    row[3] = p.max_batch.to_string();
                    row[4] = format!("{:.4}", p.request_rate_per_s.get());
                    row[5] =
                        format!("{:.1}{}", p.output_tok_per_s_per_device.get(), if p.extrapolated { "*" } else { "" });
                    row[6] = format!("{:.1}", p.tok_per_s_per_user.get());
                    row[7] = match &p.joules_per_output_token {
                        Reported::Known(j) => format!("{:.3}", j.get()),
                        Reported::Unavailable { .. } => "-".to_owned(),
                    };
                    row[8] = match &p.usd_per_million_output_tokens {
                        Reported::Known(c) => format!("{:.2}", c.get()),
                        Reported::Unavailable { .. } => "-".to_owned(),
                    };
                }
                Reported::Unavailable { unavailable } => {
                    reasons.push(format!(
                        "  ({}) {} under {}: {unavailable}",
                        reasons.len() + 1,
                        lb.workload,
                        lb.bound.name
                    ));
                    row[2] = format!("none ({})", reasons.len());
                }
            }
            rows.push(row);
        }
        out.push_str(&indent(&table(&rows)));
        for reason in reasons {
            let _ = writeln!(out, "{reason}");
        }
        if derived.latency_bounded.iter().any(|lb| matches!(&lb.point, Reported::Known(p) if p.extrapolated)) {
            let _ = writeln!(out, "  * the simulation extrapolated step times beyond the measured contexts");
        }
    }
    let stopped: Vec<String> = derived
        .sweep
        .iter()
        .filter(|l| l.end != "ladder end")
        .map(|l| format!("  {} {}: {}", l.step, l.len, l.end))
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
    } else {
        format!("{ms:.2} ms")
    }
}

/// Left-aligned columns separated by two spaces.
fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row.iter().zip(widths).map(|(cell, width)| format!("{cell:width$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// How a listing is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
    Csv,
    Json,
}

/// `lynx shortlist`'s listing in `format`.
pub fn shortlist(list: &lynx_schema::shortlist::Shortlist, format: Format) -> anyhow::Result<String> {
    if format == Format::Json {
        return Ok(format!("{}\n", serde_json::to_string_pretty(list)?));
    }
    let request = &list.request;
    let header = [
        "RANK",
        "DEVICE",
        "$/M TOKENS",
        "TOK/S/DEVICE",
        "TOK/S/USER",
        "P99 TTFT / TPOT",
        "BATCH CAP",
        "J/TOKEN",
        "CHECKS",
        "MEASURED",
        "RESULT",
    ];
    let mut rows: Vec<[String; 11]> = Vec::new();
    for (i, entry) in list.ranked.iter().enumerate() {
        let mut row: [String; 11] = Default::default();
        row[0] = (i + 1).to_string();
        row[1] = entry.device.clone();
        match &entry.point {
            Reported::Known(p) => {
                row[2] = match &p.usd_per_million_output_tokens {
                    Reported::Known(c) => format!("{:.4}", c.get()),
                    Reported::Unavailable { .. } => "no price".to_owned(),
                };
                row[3] = format!("{:.1}", p.output_tok_per_s_per_device.get());
                row[4] = format!("{:.1}", p.tok_per_s_per_user.get());
                row[5] = format!("{} / {}", ms(p.ttft_p99_s.get()), ms(p.tpot_p99_s.get()));
                row[6] = p.max_batch.to_string();
                row[7] = match &p.joules_per_output_token {
                    Reported::Known(j) => format!("{:.3}", j.get()),
                    Reported::Unavailable { .. } => "-".to_owned(),
                };
            }
            Reported::Unavailable { unavailable } => row[2] = format!("none: {unavailable}"),
        }
        row[8] = if entry.checks_passed {
            "passed".to_owned()
        } else {
            format!("FAILED {}", entry.failed_checks.join(", "))
        };
        row[9] = entry.measured_part.clone().unwrap_or_else(|| "whole model".to_owned());
        row[10] = entry.file.clone();
        rows.push(row);
    }
    let title = format!(
        "{} {}/{} under p99 TTFT {} and TPOT {}, {:.0}% utilisation",
        request.model,
        request.isl,
        request.osl,
        ms(request.ttft_p99_s),
        ms(request.tpot_p99_s),
        request.utilisation * 100.0
    );
    let mut out = String::new();
    match format {
        Format::Table => {
            let _ = writeln!(out, "{}", terminal_text(&title, 200));
            let mut all = vec![header.map(str::to_owned)];
            all.extend(rows.iter().map(|r| r.clone().map(|c| terminal_text(&c, 80))));
            out.push_str(&table(&all));
            if !list.excluded.is_empty() {
                let _ = writeln!(out, "\nnot ranked:");
                for x in &list.excluded {
                    let _ = writeln!(
                        out,
                        "  {} ({}): {}",
                        terminal_text(&x.file, 200),
                        x.kind,
                        terminal_text(&x.reason, 200)
                    );
                }
            }
        }
        Format::Markdown => {
            let _ = writeln!(out, "**{}**\n", markdown_text(&title));
            let _ = writeln!(out, "| {} |", header.join(" | "));
            let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
            for row in &rows {
                let cells: Vec<String> = row.iter().map(|c| markdown_text(c)).collect();
                let _ = writeln!(out, "| {} |", cells.join(" | "));
            }
            if !list.excluded.is_empty() {
                let _ = writeln!(out, "\nNot ranked:\n");
                for x in &list.excluded {
                    let _ = writeln!(
                        out,
                        "- {} ({}): {}",
                        markdown_text(&x.file),
                        markdown_text(&x.kind),
                        markdown_text(&x.reason)
                    );
                }
            }
        }
        Format::Csv => {
            let _ = writeln!(out, "{}", header.map(csv_field).join(","));
            for row in &rows {
                let _ = writeln!(out, "{}", row.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(","));
            }
            for x in &list.excluded {
                let _ = writeln!(
                    out,
                    "{}",
                    ["", "", &format!("not ranked ({}): {}", x.kind, x.reason), "", "", "", "", "", "", "", &x.file]
                        .map(csv_field)
                        .join(",")
                );
            }
        }
        Format::Json => unreachable!("handled above"),
    }
    Ok(out)
}

/// Two results side by side, `first` and `second` naming their columns (e.g. published, local).
pub fn comparison(comparison: &lynx_schema::compare::Comparison, first: &str, second: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{first}: {}", terminal_text(&comparison.first, 200));
    let _ = writeln!(out, "{second}: {}", terminal_text(&comparison.second, 200));
    for difference in &comparison.differences {
        let _ = writeln!(out, "differs: {}", terminal_text(difference, 300));
    }
    let ratio_header = format!("{second}/{first}");
    let spread_header = format!("WITHIN {}'S SPREAD", first.to_uppercase());
    let mut rows = vec![[
        "FIGURE".to_owned(),
        first.to_uppercase(),
        second.to_uppercase(),
        ratio_header.to_uppercase(),
        spread_header,
    ]];
    let value =
        |v: f64| if v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-2) { format!("{v:.4e}") } else { format!("{v:.4}") };
    for row in &comparison.rows {
        rows.push([
            terminal_text(&row.figure, 90),
            value(row.first),
            value(row.second),
            format!("{:.3}", row.ratio),
            match row.within_spread {
                Some(true) => "yes".to_owned(),
                Some(false) => "no".to_owned(),
                None => "-".to_owned(),
            },
        ]);
    }
    out.push_str(&table(&rows));
    for figure in &comparison.unmatched {
        let _ = writeln!(out, "not compared: {}", terminal_text(figure, 200));
    }
    out
}

/// How this node differs from the one that published `original`.
pub fn reproduction_warnings(original: &RunResult, device: &Device, runtime: &Runtime) -> Vec<String> {
    let mut warnings = Vec::new();
    let (published, local) = (original.device.name.to_string(), device.record.name.to_string());
    if published != local || original.device.device != device.record.device {
        warnings.push(format!(
            "the published device is {} ({}), this one {} ({})",
            terminal_text(&published, 100),
            original.device.device,
            terminal_text(&local, 100),
            device.record.device
        ));
    }
    if original.harness.lynx_version != env!("CARGO_PKG_VERSION") {
        warnings.push(format!(
            "published with lynx {}, this is lynx {}",
            terminal_text(&original.harness.lynx_version, 40),
            env!("CARGO_PKG_VERSION")
        ));
    }
    let (theirs, ours) = (original.harness.libtorch_runtime_version.to_string(), runtime.version.to_string());
    if theirs != ours {
        warnings.push(format!("published with libtorch {}, this node runs {ours}", terminal_text(&theirs, 60)));
    }
    warnings
}

/// The columns of a result's cell export, in order.
pub const CELL_COLUMNS: [&str; 21] = [
    "step",
    "batch",
    "prompt_len",
    "ctx",
    "status",
    "message",
    "steps",
    "median_s",
    "p90_s",
    "p99_s",
    "min_s",
    "max_s",
    "cv",
    "full_depth_median_s",
    "tok_per_s_per_user",
    "tok_per_s_per_device",
    "joules_per_token",
    "achieved_gb_per_s",
    "bandwidth_fraction",
    "achieved_gflop_per_s",
    "matmul_fraction",
];

/// One cell's export fields, in [`CELL_COLUMNS`] order (empty where the cell has no such figure).
fn cell_fields(cell: &CellRecord) -> [String; 21] {
    let f = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v}"));
    let (prompt_len, ctx) = match cell.shape {
        CellShape::Prefill { prompt_len, .. } => (prompt_len.to_string(), String::new()),
        CellShape::Decode { ctx, .. } => (String::new(), ctx.to_string()),
    };
    let status = match &cell.status {
        CellStatus::Ok => "ok",
        CellStatus::Oom { .. } => "oom",
        CellStatus::Error { .. } => "error",
    };
    let t = cell.step_time.as_ref();
    let r = cell.roofline.as_ref();
    [
        if matches!(cell.shape, CellShape::Prefill { .. }) { "prefill" } else { "decode" }.to_owned(),
        cell.shape.batch().to_string(),
        prompt_len,
        ctx,
        status.to_owned(),
        cell.status.message().unwrap_or_default().to_owned(),
        t.map_or(String::new(), |t| t.n.to_string()),
        f(t.map(|t| t.median_s.get())),
        f(t.map(|t| t.p90_s.get())),
        f(t.map(|t| t.p99_s.get())),
        f(t.map(|t| t.min_s.get())),
        f(t.map(|t| t.max_s.get())),
        f(t.and_then(|t| t.cv).map(Finite::get)),
        f(cell.full_depth.as_ref().map(|d| d.median_s.get())),
        f(cell.tok_per_s_per_user.map(Finite::get)),
        f(cell.tok_per_s_per_device.map(Finite::get)),
        f(cell.joules_per_token.map(Finite::get)),
        f(r.map(|r| r.achieved_bytes_per_s.get() / 1e9)),
        f(r.and_then(|r| r.bandwidth_fraction).map(Finite::get)),
        f(r.map(|r| r.achieved_flops_per_s.get() / 1e9)),
        f(r.and_then(|r| r.matmul_fraction).map(Finite::get)),
    ]
}

/// A verified result (signed by `key_id`) as CSV or Markdown. Every string from the result is
/// escaped for the format.
pub fn export(result: &RunResult, key_id: &str, format: Format) -> String {
    let mut out = String::new();
    if format == Format::Csv {
        let _ = writeln!(out, "{}", CELL_COLUMNS.join(","));
        for cell in &result.cells {
            let _ = writeln!(out, "{}", cell_fields(cell).iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(","));
        }
        return out;
    }
    let text = |r: &Reported<String>| match r {
        Reported::Known(v) => markdown_text(v),
        Reported::Unavailable { unavailable } => format!("unavailable ({})", markdown_text(unavailable)),
    };
    let config = &result.config;
    let _ = writeln!(out, "# {} on {}\n", markdown_text(&config.suite.name), text(&result.device.name));
    let _ = writeln!(out, "| | |\n|---|---|");
    let facts = [
        ("run", markdown_text(&result.run_id)),
        ("status", format!("{:?}", result.status).to_lowercase()),
        ("signed by key", markdown_text(key_id)),
        ("device", format!("{} ({})", text(&result.device.name), result.device.device)),
        ("host", text(&result.host.cpu_model)),
        ("model", format!("{} at {}", markdown_text(&config.model.name), config.suite.precision)),
        ("configuration sha256", markdown_text(&config.sha256)),
        ("lynx", format!("{} ({})", markdown_text(&result.harness.lynx_version), text(&result.harness.git_commit))),
        ("libtorch", text(&result.harness.libtorch_runtime_version)),
        ("started", markdown_text(&result.started_at)),
    ];
    for (what, value) in facts {
        let _ = writeln!(out, "| {what} | {value} |");
    }
    let _ = writeln!(out, "\n## Cells\n");
    let _ = writeln!(out, "| {} |", CELL_COLUMNS.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(CELL_COLUMNS.len()));
    for cell in &result.cells {
        let fields: Vec<String> = cell_fields(cell).iter().map(|c| markdown_text(c)).collect();
        let _ = writeln!(out, "| {} |", fields.join(" | "));
    }
    // Tables of figures in code blocks; result text in them was escaped for the terminal, and
    // no fence inside can close the block.
    let fenced = |text: String| text.replace("```", "'''");
    if let Some(roofline) = &result.roofline {
        let _ = writeln!(out, "\n## Roofline\n\n```text\n{}```", fenced(roofline_table(roofline)));
    }
    if let Some(derived) = &result.derived {
        let _ = writeln!(out, "\n## Derived figures\n\n```text{}```", fenced(derived_report(derived)));
    }
    let _ = writeln!(out, "\n## Checks\n");
    for check in &result.checks {
        let verdict = if check.passed { "passed" } else { "FAILED" };
        let _ =
            writeln!(out, "- **{}** {verdict}: {}", markdown_text(check.name.as_str()), markdown_text(&check.detail));
    }
    out
}

/// A node's runs, and the spread across its devices of the same model.
pub fn node_summary(summary: &lynx_schema::fleet::NodeSummary) -> String {
    let mut rows = vec![["DEVICE", "NAME", "STATUS", "EXIT", "CHECKS", "RESULT"].map(str::to_owned)];
    for run in &summary.runs {
        rows.push([
            run.device.clone(),
            terminal_text(run.name.as_deref().unwrap_or("-"), 60),
            run.status.to_string(),
            run.exit.to_string(),
            if run.checks_passed { "passed".to_owned() } else { "not all passed".to_owned() },
            run.envelope.clone().or_else(|| run.run_dir.clone()).unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    let mut out = format!("node {}\n", terminal_text(&summary.node, 80));
    out.push_str(&table(&rows));
    if !summary.spreads.is_empty() {
        let _ = writeln!(out, "\nspread across devices of the same model (median step time):");
        let mut rows = vec![["NAME", "CELL", "DEVICES", "MIN", "MEDIAN", "MAX", "SPREAD"].map(str::to_owned)];
        for s in &summary.spreads {
            rows.push([
                terminal_text(&s.name, 40),
                s.cell.clone(),
                s.devices.to_string(),
                ms(s.min_s),
                ms(s.median_s),
                ms(s.max_s),
                format!("{:.1}%", s.spread * 100.0),
            ]);
        }
        out.push_str(&indent(&table(&rows)));
    }
    out
}
