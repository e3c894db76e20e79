//! `lynx report`: a self-contained static site of published results (no network, no CDN, no
//! script): `index.html` with every result's verification status, per-workload frontier plots,
//! latency-bounded throughput and cost tables, roofline bars; and one page per verified result
//! with its metadata, checks, cells and a telemetry timeline from its samples file. Plots are
//! SVG written here.
//!
//! Results come from other people: every string taken from a result is HTML-escaped, and every
//! page forbids scripts outright (Content-Security-Policy `default-src 'none'`), so hostile
//! content is shown as text and never executed. Only verified results contribute figures.

use crate::escape::html as escape;
use lynx_schema::device::slug;
use lynx_schema::result::{CellStatus, RunResult};
use lynx_schema::roofline::ProbeKind;
use lynx_schema::value::Reported;
use std::fmt::Write;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Most points a timeline series is drawn with (the samples are thinned evenly beyond it).
const MAX_POINTS: usize = 1500;
/// Most samples-file bytes read for a timeline.
const MAX_SAMPLES_BYTES: u64 = 512 << 20;

fn reported(value: &Reported<String>) -> String {
    match value {
        Reported::Known(v) => escape(v),
        Reported::Unavailable { unavailable } => format!("<i>unavailable</i> ({})", escape(unavailable)),
    }
}

/// One envelope's fate.
struct Entry {
    file: PathBuf,
    /// The verified result, or (kind, reason).
    verdict: Result<(RunResult, String), (String, String)>,
    /// The page of a verified result, relative to the site.
    page: String,
}

const PALETTE: [&str; 8] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"];

/// The width `text` takes at `font_px`, estimated from the widths of sans-serif glyphs (wide
/// capitals, narrow lower case) and kept on the generous side, so text laid out by it fits.
fn text_width(text: &str, font_px: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'W' | 'M' | 'm' | 'w' | '@' | '%' => 0.95,
            c if c.is_ascii_uppercase() => 0.75,
            c if c.is_ascii_digit() => 0.6,
            'i' | 'l' | 'j' | 't' | 'f' | 'r' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' => 0.35,
            c if c.is_ascii() => 0.6,
            _ => 1.0,
        })
        .sum();
    em * font_px
}

/// `text` broken into lines no wider than `width` at `font_px`: at spaces where it can, inside a
/// word where one word alone is wider.
fn wrap(text: &str, width: f64, font_px: f64) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let joined = if line.is_empty() { word.to_owned() } else { format!("{line} {word}") };
        if text_width(&joined, font_px) <= width {
            line = joined;
            continue;
        }
        if !line.is_empty() {
            lines.push(std::mem::take(&mut line));
        }
        for c in word.chars() {
            line.push(c);
            if text_width(&line, font_px) > width {
                let last = line.pop().unwrap_or(c);
                lines.push(std::mem::replace(&mut line, last.to_string()));
            }
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// `<text>` of `lines` from (`x`, `y`), one `line_px` apart, escaped.
fn text_lines(lines: &[String], x: f64, y: f64, line_px: f64, attributes: &str) -> String {
    let mut out = format!(r#"<text x="{x}" y="{y}" {attributes}>"#);
    for (i, line) in lines.iter().enumerate() {
        let dy = if i == 0 { 0.0 } else { line_px };
        let _ = write!(out, r#"<tspan x="{x}" dy="{dy}">{}</tspan>"#, escape(line));
    }
    out.push_str("</text>");
    out
}

/// A round step for about `ticks` ticks over `span`.
fn nice_step(span: f64, ticks: f64) -> f64 {
    let raw = (span / ticks).max(f64::MIN_POSITIVE);
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    magnitude
        * if fraction <= 1.0 {
            1.0
        } else if fraction <= 2.0 {
            2.0
        } else if fraction <= 5.0 {
            5.0
        } else {
            10.0
        }
}

fn tick_label(value: f64) -> String {
    let a = value.abs();
    let (number, suffix) = if a >= 1e9 {
        (format!("{:.3}", value / 1e9), "G")
    } else if a >= 1e6 {
        (format!("{:.3}", value / 1e6), "M")
    } else if a >= 1e4 {
        (format!("{:.1}", value / 1e3), "k")
    } else if a >= 10.0 || a == 0.0 {
        (format!("{value:.0}"), "")
    } else {
        (format!("{value:.2}"), "")
    };
    let number = if number.contains('.') { number.trim_end_matches('0').trim_end_matches('.') } else { &number };
    format!("{number}{suffix}")
}

/// A line chart with markers: each series (name, points) in its colour, axes from zero (or
/// the data's minimum when `from_zero` is false), ticks, labels and a legend.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    from_zero: bool,
) -> String {
    let (w, plot_h, left, right, top, bottom) = (720.0, 360.0, 70.0, 20.0, 30.0, 50.0);
    // The legend goes under the plot, each series' whole name wrapped to the chart's width.
    let legend: Vec<Vec<String>> = series.iter().map(|(name, _)| wrap(name, w - 40.0, 11.0)).collect();
    let h = plot_h + 10.0 + 14.0 * legend.iter().map(Vec::len).sum::<usize>() as f64 + 6.0 * legend.len() as f64;
    let points = || series.iter().flat_map(|(_, p)| p.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY);
    for &(x, y) in points() {
        (x0, x1, y0, y1) = (x0.min(x), x1.max(x), y0.min(y), y1.max(y));
    }
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{}"><title>{}</title>"#,
        escape(title),
        escape(title)
    );
    if !x0.is_finite() {
        let _ = write!(svg, r#"<text x="{left}" y="{}">no data</text></svg>"#, h / 2.0);
        return svg;
    }
    if from_zero {
        (x0, y0) = (x0.min(0.0), y0.min(0.0));
    }
    // A flat series gets a span of at least 2% of its value (or 1), centred on it, so its ticks
    // are distinct numbers.
    let widen = |lo: f64, hi: f64| {
        let least = (0.02 * lo.abs().max(hi.abs())).max(1.0);
        if hi - lo >= least {
            (lo, hi)
        } else {
            let middle = (lo + hi) / 2.0;
            let lo = if from_zero && lo >= 0.0 { (middle - least / 2.0).max(0.0) } else { middle - least / 2.0 };
            (lo, lo + least)
        }
    };
    (x0, x1) = widen(x0, x1);
    (y0, y1) = widen(y0, y1);
    let (pw, ph) = (w - left - right, plot_h - top - bottom);
    let sx = |x: f64| left + (x - x0) / (x1 - x0) * pw;
    let sy = |y: f64| top + ph - (y - y0) / (y1 - y0) * ph;
    let _ = write!(
        svg,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/><text x="{}" y="18" font-size="14" text-anchor="middle">{}</text>"##,
        left + pw / 2.0,
        escape(title)
    );
    for (axis, lo, hi) in [("x", x0, x1), ("y", y0, y1)] {
        let step = nice_step(hi - lo, 6.0);
        let mut v = (lo / step).ceil() * step;
        while v <= hi + step * 1e-9 {
            let label = tick_label(v);
            if axis == "x" {
                let _ = write!(
                    svg,
                    r##"<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#ddd"/><text x="{0}" y="{3}" font-size="11" text-anchor="middle">{label}</text>"##,
                    sx(v),
                    top,
                    top + ph,
                    top + ph + 16.0
                );
            } else {
                let _ = write!(
                    svg,
                    r##"<line x1="{1}" x2="{2}" y1="{0}" y2="{0}" stroke="#ddd"/><text x="{3}" y="{4}" font-size="11" text-anchor="end">{label}</text>"##,
                    sy(v),
                    left,
                    left + pw,
                    left - 6.0,
                    sy(v) + 4.0
                );
            }
            v += step;
        }
    }
    let _ = write!(
        svg,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{}</text><text x="16" y="{}" font-size="12" text-anchor="middle" transform="rotate(-90 16 {})">{}</text>"#,
        left + pw / 2.0,
        plot_h - 10.0,
        escape(x_label),
        top + ph / 2.0,
        top + ph / 2.0,
        escape(y_label)
    );
    for (i, (_, points)) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let path: Vec<String> = points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = write!(
            svg,
            r#"<polyline class="series" fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            path.join(" ")
        );
        if points.len() <= 64 {
            for p in &path {
                let (cx, cy) = p.split_once(',').unwrap_or(("0", "0"));
                let _ = write!(svg, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{colour}"/>"#);
            }
        }
        let above: usize = legend[..i].iter().map(Vec::len).sum();
        let ly = plot_h + 20.0 + 14.0 * above as f64 + 6.0 * i as f64;
        let _ = write!(svg, r#"<rect x="10" y="{}" width="12" height="12" fill="{colour}"/>"#, ly - 10.0);
        svg.push_str(&text_lines(&legend[i], 28.0, ly, 14.0, r#"font-size="11""#));
    }
    svg.push_str("</svg>");
    svg
}

/// A horizontal bar chart of (label, value) in `unit` (values divided by `scale`).
pub fn bar_chart(title: &str, unit: &str, scale: f64, bars: &[(String, f64)]) -> String {
    let (w, left, right, line) = (720.0, 260.0, 90.0, 13.0);
    // Each label whole, wrapped into the space left of the bars; a bar's row is as tall as its
    // label.
    let labels: Vec<Vec<String>> = bars.iter().map(|(label, _)| wrap(label, left - 16.0, 11.0)).collect();
    let rows: Vec<f64> = labels.iter().map(|l| (line * l.len() as f64 + 9.0).max(22.0)).collect();
    let h = 40.0 + rows.iter().sum::<f64>().max(22.0) + 10.0;
    let max = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(f64::MIN_POSITIVE);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" aria-label="{}"><title>{}</title><text x="{}" y="18" font-size="14" text-anchor="middle">{}</text>"#,
        escape(title),
        escape(title),
        w / 2.0,
        escape(title)
    );
    let mut y = 30.0;
    for (i, (_, value)) in bars.iter().enumerate() {
        let length = (value / max * (w - left - right)).max(0.0);
        svg.push_str(&text_lines(&labels[i], left - 6.0, y + 15.0, line, r#"font-size="11" text-anchor="end""#));
        let _ = write!(
            svg,
            r#"<rect class="bar" x="{left}" y="{}" width="{length:.1}" height="16" fill="{}"/><text x="{}" y="{}" font-size="11">{:.1} {}</text>"#,
            y + 3.0,
            PALETTE[i % PALETTE.len()],
            left + length + 4.0,
            y + 15.0,
            value / scale,
            escape(unit)
        );
        y += rows[i];
    }
    svg.push_str("</svg>");
    svg
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}\
th{background:#f3f3f3}.bad{color:#b00}.ok{color:#070}svg{display:block;margin:1em 0}code{font-size:12px}";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\
<meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style></head>\
<body>{body}</body></html>\n",
        escape(title)
    )
}

/// The device's name and kind, cut to [`MAX_NAME`] characters (names come from other people).
fn device_label(result: &RunResult) -> String {
    match &result.device.name {
        Reported::Known(name) => {
            let cut: String = name.chars().take(MAX_NAME).collect();
            let more = if name.chars().count() > MAX_NAME { "…" } else { "" };
            format!("{cut}{more} ({})", result.device.device)
        }
        Reported::Unavailable { .. } => result.device.device.to_string(),
    }
}

/// Most characters of a device name the site shows.
const MAX_NAME: usize = 160;

/// Power, SM clock and temperature over the run from the device's source in the samples file
/// beside `envelope`, segments laid end to end.
fn timeline(envelope: &Path, result: &RunResult) -> Vec<(String, Vec<(f64, f64)>)> {
    let path = envelope.with_file_name(&result.telemetry.samples_file);
    let Ok(file) = std::fs::File::open(&path) else { return Vec::new() };
    let source = &result.telemetry.device_source;
    let mut power = Vec::new();
    let mut clock = Vec::new();
    let mut temperature = Vec::new();
    let (mut offset, mut last) = (0.0, 0.0);
    let mut read = 0u64;
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        read += line.len() as u64 + 1;
        if read > MAX_SAMPLES_BYTES {
            break;
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if value["kind"] == "segment" {
            offset = last;
            continue;
        }
        if value["kind"] != "telemetry" || value["source"].as_str() != Some(source.as_str()) {
            continue;
        }
        let Some(t) = value["t_s"].as_f64() else { continue };
        let t = offset + t;
        last = t;
        for (series, field) in
            [(&mut power, "power_w"), (&mut clock, "sm_clock_mhz"), (&mut temperature, "temperature_c")]
        {
            if let Some(v) = value[field].as_f64() {
                series.push((t, v));
            }
        }
    }
    let thin = |points: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
        let every = points.len().div_ceil(MAX_POINTS).max(1);
        points.into_iter().step_by(every).collect()
    };
    [("power (W)", power), ("SM clock (MHz)", clock), ("temperature (°C)", temperature)]
        .into_iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(name, p)| (name.to_owned(), thin(p)))
        .collect()
}

fn result_page(entry: &Entry, result: &RunResult, key_id: &str) -> String {
    let mut body = format!("<p><a href=\"index.html\">all results</a></p><h1>{}</h1>", escape(&device_label(result)));
    let config = &result.config;
    let _ = write!(body, "<table>");
    let rows = [
        ("envelope", escape(&entry.file.display().to_string())),
        ("signed by key", escape(key_id)),
        ("run", escape(&result.run_id)),
        ("status", result.status.to_string()),
        ("started", escape(&result.started_at)),
        ("device", escape(&device_label(result))),
        (
            "memory",
            match &result.device.memory_bytes {
                Reported::Known(b) => format!("{:.1} GiB", *b as f64 / (1u64 << 30) as f64),
                Reported::Unavailable { unavailable } => format!("unavailable ({})", escape(unavailable)),
            },
        ),
        ("host", reported(&result.host.cpu_model)),
        ("suite", escape(&config.suite.name)),
        ("model", format!("{} at {}", escape(&config.model.name), config.suite.precision)),
        (
            "measured",
            match &config.measured {
                Some(part) => escape(&part.not_measured.join("; ")),
                None => "the whole model".to_owned(),
            },
        ),
        ("configuration sha256", format!("<code>{}</code>", escape(&config.sha256))),
        ("lynx", format!("{} ({})", escape(&result.harness.lynx_version), reported(&result.harness.git_commit))),
        ("libtorch", reported(&result.harness.libtorch_runtime_version)),
    ];
    for (what, value) in rows {
        let _ = write!(body, "<tr><th>{what}</th><td>{value}</td></tr>");
    }
    let _ = write!(body, "</table><h2>Checks</h2><table><tr><th>check</th><th>verdict</th><th>detail</th></tr>");
    for check in &result.checks {
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
            escape(check.name.as_str()),
            if check.passed { "ok" } else { "bad" },
            if check.passed { "passed" } else { "FAILED" },
            escape(&check.detail)
        );
    }
    let _ = write!(
        body,
        "</table><h2>Cells</h2><table><tr><th>cell</th><th>status</th><th>median</th><th>p99</th><th>tok/s/user</th>\
<th>tok/s/device</th><th>of bandwidth</th><th>of matmul</th></tr>"
    );
    for cell in &result.cells {
        let f = |v: Option<f64>, scale: f64, digits: usize| {
            v.map_or("-".to_owned(), |v| format!("{:.*}", digits, v * scale))
        };
        let r = cell.roofline.as_ref();
        let status = match &cell.status {
            CellStatus::Ok => "ok".to_owned(),
            other => format!("<span class=\"bad\">{}</span>", escape(other.message().unwrap_or_default())),
        };
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{status}</td><td>{} ms</td><td>{} ms</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            cell.shape,
            f(cell.median_s(), 1e3, 3),
            f(cell.step_time.as_ref().map(|t| t.p99_s.get()), 1e3, 3),
            f(cell.tok_per_s_per_user.map(|v| v.get()), 1.0, 1),
            f(cell.tok_per_s_per_device.map(|v| v.get()), 1.0, 1),
            f(r.and_then(|r| r.bandwidth_fraction).map(|v| v.get()), 100.0, 1) + "%",
            f(r.and_then(|r| r.matmul_fraction).map(|v| v.get()), 100.0, 1) + "%",
        );
    }
    body.push_str("</table><h2>Telemetry</h2>");
    let series = timeline(&entry.file, result);
    if series.is_empty() {
        body.push_str("<p>no device telemetry in the samples file</p>");
    }
    for (name, points) in series {
        body.push_str(&line_chart(&name, "seconds into the run", &name, &[(name.clone(), points)], false));
    }
    if let Some(roofline) = &result.roofline {
        body.push_str("<h2>Roofline</h2>");
        body.push_str(&roofline_section(std::slice::from_ref(&(device_label(result), roofline.clone()))));
    }
    page(&format!("lynx: {}", device_label(result)), &body)
}

fn roofline_section(results: &[(String, lynx_schema::roofline::RooflineRecord)]) -> String {
    let mut out = String::new();
    let mut bandwidth = Vec::new();
    let mut matmul = Vec::new();
    for (label, record) in results {
        for probe in &record.probes {
            let Some(v) = probe.value.known() else { continue };
            let name = format!("{label}: {} {} {}", probe.name, probe.dtype, probe.phase);
            match probe.kind {
                ProbeKind::Bandwidth => bandwidth.push((name, v.get())),
                ProbeKind::Matmul => matmul.push((name, v.get())),
            }
        }
    }
    out.push_str(&bar_chart("memory bandwidth", "GB/s", 1e9, &bandwidth));
    let (unit, scale) = if matmul.iter().any(|(_, v)| *v >= 1e12) { ("TFLOP/s", 1e12) } else { ("GFLOP/s", 1e9) };
    out.push_str(&bar_chart("matmul rate", unit, scale, &matmul));
    out
}

/// One envelope as the site lists it: its file, and its verified result with the id of the key
/// it verified under, or why it is not believed (the kind in a word, and the reason).
pub type Listed = (PathBuf, Result<(RunResult, String), (String, String)>);

/// Build the site of `listed` (verified by the caller) into `out`. Returns the path of
/// `index.html`.
pub fn build_site(listed: Vec<Listed>, out: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(out)?;
    let mut entries = Vec::new();
    for (i, (file, verdict)) in listed.into_iter().enumerate() {
        let page = match &verdict {
            // File names from result text stay short whatever the result holds.
            Ok((result, _)) => format!("result-{i}-{}.html", slug(&result.run_id).chars().take(64).collect::<String>()),
            Err(_) => String::new(),
        };
        entries.push(Entry { file, verdict, page });
    }

    let mut body = String::from(
        "<h1>lynx results</h1><p>Every result below was verified against the trusted keys; only verified \
results contribute figures. Text from results is shown as text.</p><h2>Results</h2><table><tr><th>device</th>\
<th>model</th><th>suite</th><th>verification</th><th>checks</th><th>run</th></tr>",
    );
    for entry in &entries {
        match &entry.verdict {
            Ok((result, key_id)) => {
                let failed: Vec<&str> = result.checks.iter().filter(|c| !c.passed).map(|c| c.name.as_str()).collect();
                let checks = if failed.is_empty() {
                    "<span class=\"ok\">all passed</span>".to_owned()
                } else {
                    format!("<span class=\"bad\">FAILED {}</span>", escape(&failed.join(", ")))
                };
                let _ = write!(
                    body,
                    "<tr class=\"result\"><td><a href=\"{}\">{}</a></td><td>{} {}</td><td>{}</td><td class=\"ok\">verified (key {})</td><td>{checks}</td><td>{}</td></tr>",
                    entry.page,
                    escape(&device_label(result)),
                    escape(&result.config.model.name),
                    result.config.suite.precision,
                    escape(&result.config.suite.name),
                    escape(&key_id[..key_id.len().min(12)]),
                    escape(&result.run_id)
                );
            }
            Err((kind, reason)) => {
                let _ = write!(
                    body,
                    "<tr class=\"result\"><td>{}</td><td>-</td><td>-</td><td class=\"bad\">{}: {}</td><td>-</td><td>-</td></tr>",
                    escape(&entry.file.display().to_string()),
                    escape(kind),
                    escape(reason)
                );
            }
        }
    }
    body.push_str("</table>");

    let verified: Vec<(&Entry, &RunResult)> =
        entries.iter().filter_map(|e| e.verdict.as_ref().ok().map(|(r, _)| (e, r))).collect();
    // Per workload (model, ISL/OSL): the frontier at the decode context nearest the workload's
    // mean context, one series per device, and the latency-bounded and cost table.
    let mut workloads: Vec<(String, u32, u32, String)> = Vec::new();
    for (_, result) in &verified {
        for w in &result.config.suite.workloads {
            let key = (result.config.model.name.clone(), w.isl, w.osl, w.name.clone());
            if !workloads.contains(&key) {
                workloads.push(key);
            }
        }
    }
    for (model, isl, osl, name) in &workloads {
        let _ = write!(body, "<h2>{} {} {isl}/{osl}</h2>", escape(model), escape(name));
        let mean_ctx = f64::from(*isl) + f64::from(*osl) / 2.0;
        let mut series = Vec::new();
        let mut rows = String::new();
        for (entry, result) in verified.iter().filter(|(_, r)| &r.config.model.name == model) {
            let Some(derived) = &result.derived else { continue };
            if let Some(line) = derived
                .frontier
                .iter()
                .min_by(|a, b| (f64::from(a.ctx) - mean_ctx).abs().total_cmp(&(f64::from(b.ctx) - mean_ctx).abs()))
            {
                let points: Vec<(f64, f64)> =
                    line.points.iter().map(|p| (p.tok_per_s_per_user.get(), p.tok_per_s_per_device.get())).collect();
                series.push((format!("{} (ctx {})", device_label(result), line.ctx), points));
            }
            for lb in derived.latency_bounded.iter().filter(|lb| lb.workload.isl == *isl && lb.workload.osl == *osl) {
                let cells = match &lb.point {
                    Reported::Known(p) => format!(
                        "<td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td>",
                        p.output_tok_per_s_per_device.get(),
                        p.tok_per_s_per_user.get(),
                        match &p.joules_per_output_token {
                            Reported::Known(j) => format!("{:.3}", j.get()),
                            Reported::Unavailable { .. } => "-".to_owned(),
                        },
                        match &p.usd_per_million_output_tokens {
                            Reported::Known(c) => format!("{:.3}", c.get()),
                            Reported::Unavailable { .. } => "no price".to_owned(),
                        }
                    ),
                    Reported::Unavailable { unavailable } => {
                        format!("<td colspan=\"4\">none: {}</td>", escape(unavailable))
                    }
                };
                let _ = write!(
                    rows,
                    "<tr><td><a href=\"{}\">{}</a></td><td>{} ({:.0} ms / {:.0} ms)</td>{cells}</tr>",
                    entry.page,
                    escape(&device_label(result)),
                    escape(&lb.bound.name),
                    lb.bound.ttft_p99_s * 1e3,
                    lb.bound.tpot_p99_s * 1e3
                );
            }
        }
        body.push_str(&line_chart(
            &format!("decode frontier, {} {isl}/{osl}", model),
            "tok/s/user",
            "tok/s/device",
            &series,
            true,
        ));
        let _ = write!(
            body,
            "<table><tr><th>device</th><th>p99 bound (TTFT / TPOT)</th><th>output tok/s/device</th><th>tok/s/user</th>\
<th>J/token</th><th>$/M tokens</th></tr>{rows}</table>"
        );
    }
    let rooflines: Vec<(String, lynx_schema::roofline::RooflineRecord)> =
        verified.iter().filter_map(|(_, r)| r.roofline.clone().map(|roof| (device_label(r), roof))).collect();
    if !rooflines.is_empty() {
        body.push_str("<h2>Roofline</h2>");
        body.push_str(&roofline_section(&rooflines));
    }
    let index = out.join("index.html");
    std::fs::write(&index, page("lynx results", &body))?;
    for entry in &entries {
        if let Ok((result, key_id)) = &entry.verdict {
            std::fs::write(out.join(&entry.page), result_page(entry, result, key_id))?;
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 14): a long device name was cut to 28 characters in a chart's legend
    /// ("Intel(R) Xeon(R) Processor ("); it is wrapped whole into lines that fit.
    #[test]
    fn long_names_wrap_into_lines_that_fit_and_keep_every_character() {
        let name = "Intel(R) Xeon(R) Processor (Icelake) with a board name far longer than any legend line";
        let lines = wrap(name, 200.0, 11.0);
        assert!(lines.len() > 1, "{lines:?}");
        assert!(lines.iter().all(|l| text_width(l, 11.0) <= 200.0), "{lines:?}");
        assert_eq!(lines.join(" "), name);
        let word = "H".repeat(160);
        let lines = wrap(&word, 200.0, 11.0);
        assert!(lines.iter().all(|l| text_width(l, 11.0) <= 200.0) && lines.concat() == word, "{lines:?}");
        assert_eq!(wrap("", 100.0, 11.0), [""]);
        let chart = line_chart("t", "x", "y", &[(name.to_owned(), vec![(1.0, 2.0), (2.0, 3.0)])], true);
        assert!(chart.contains("far longer") && chart.contains("(Icelake)"), "{chart}");
        let bars = bar_chart("t", "GB/s", 1e9, &[(name.to_owned(), 1e9)]);
        assert!(bars.contains("far longer"), "{bars}");
    }

    #[test]
    fn a_flat_series_gets_distinct_ticks() {
        let svg = line_chart("clock", "s", "MHz", &[("clock".into(), vec![(0.0, 2596.1), (10.0, 2596.1)])], false);
        let labels: Vec<&str> =
            svg.split("text-anchor=\"end\">").skip(1).map(|rest| rest.split('<').next().unwrap()).collect();
        let mut distinct = labels.clone();
        distinct.dedup();
        assert!(labels.len() >= 3 && distinct.len() == labels.len(), "{labels:?}");
    }

    #[test]
    fn tick_labels_keep_their_zeros() {
        assert_eq!(tick_label(10.0), "10");
        assert_eq!(tick_label(2500.0), "2500");
        assert_eq!(tick_label(20000.0), "20k");
        assert_eq!(tick_label(0.5), "0.5");
        assert_eq!(tick_label(3e9), "3G");
    }

    #[test]
    fn escaping_leaves_no_markup() {
        assert_eq!(escape("<img src=x onerror=\"a()\">&'"), "&lt;img src=x onerror=&quot;a()&quot;&gt;&amp;&#39;");
        assert_eq!(escape("a\u{1b}b"), "a\\u{1b}b");
    }

    #[test]
    fn charts_are_svg_with_every_series_and_escaped_labels() {
        let svg = line_chart(
            "t<1>",
            "x",
            "y",
            &[("<b>".into(), vec![(0.0, 1.0), (2.0, 3.0)]), ("b".into(), vec![(1.0, 1.0)])],
            true,
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("class=\"series\"").count(), 2);
        assert!(svg.contains("&lt;b&gt;") && !svg.contains("<b>"));
        let bars = bar_chart("bw", "GB/s", 1e9, &[("a".into(), 2e9), ("b".into(), 1e9)]);
        assert_eq!(bars.matches("class=\"bar\"").count(), 2);
        assert!(bars.contains("2.0 GB/s"));
        assert!(line_chart("empty", "x", "y", &[], true).contains("no data"));
    }
}
