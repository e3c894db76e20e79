//! `lynx report`: a self-contained static site of published results (no network, no CDN, no
//! script): `index.html` with every result's verification status, per-workload frontier plots,
//! latency-bounded throughput and cost tables, roofline bars; and one page per verified result
//! with its metadata, checks, cells and a telemetry timeline from its samples file. Plots are
//! the SVG of [`crate::chart`].
//!
//! Results come from other people: pages are maud templates, so every string taken from a
//! result is escaped by construction (and shown through [`Html`], which adds control
//! characters), and every page forbids scripts outright (Content-Security-Policy `default-src
//! 'none'`), so hostile content is shown as text and never executed. Only verified results
//! contribute figures.

use crate::chart::{bar_chart, line_chart};
use crate::escape::Html;
use crate::Signers;
use lynx_schema::compare::{Comparison, Outcome};
use lynx_schema::config::Workload;
use lynx_schema::derived::LatencyBounded;
use lynx_schema::device::slug;
use lynx_schema::result::{CellStatus, RunResult};
use lynx_schema::roofline::{ProbeKind, RooflineRecord};
use lynx_schema::telemetry::SamplesLine;
use lynx_schema::value::Reported;
use maud::{html, Markup, PreEscaped, DOCTYPE};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Most points a timeline series is drawn with (the samples are thinned evenly beyond it).
const MAX_POINTS: usize = 1500;
/// Most samples-file bytes read for a timeline.
const MAX_SAMPLES_BYTES: u64 = 512 << 20;
/// Most characters of a device name the site shows.
const MAX_NAME: usize = 160;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}\
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}\
th{background:#f3f3f3}.bad{color:#b00}.ok{color:#070}svg{display:block;margin:1em 0}.long{overflow-wrap:anywhere;min-width:16em}code{font-size:12px}\
pre{font-size:12px;overflow-x:auto}";

/// One envelope as the site lists it: its file, and its verified result with who signed it, or
/// why it is not believed (the kind in a word, and the reason).
pub type Listed = (PathBuf, Result<(RunResult, Signers), (String, String)>);

/// A verified result that reproduces another listed one (its `reproduces` names that envelope's
/// sha256): their places in the listing, and the two side by side (published first).
pub struct Reproduction {
    pub published: usize,
    pub local: usize,
    pub comparison: Comparison,
}

/// One envelope's fate, and the page of a verified result (relative to the site).
struct Entry {
    file: PathBuf,
    verdict: Result<(RunResult, Signers), (String, String)>,
    page: String,
}

/// A verified result and the page it has.
struct Verified<'a> {
    result: &'a RunResult,
    page: &'a str,
}

/// A site built: its `index.html`, and the pages an earlier build had left in its folder that
/// this one removed (results it does not list, or lists at another place).
#[derive(Debug)]
pub struct Built {
    pub index: PathBuf,
    pub removed: Vec<PathBuf>,
}

/// Build the site of `listed` (verified by the caller) into `out`, each published result's page
/// showing the `reproductions` of it. A page an earlier build left there and this one did not
/// write is removed: a site copied to a web server must not keep serving the page of a result
/// that is no longer among the verified ones. Nothing else in `out` is touched, and no page is
/// written through a symbolic link.
pub fn build_site(listed: Vec<Listed>, reproductions: &[Reproduction], out: &Path) -> std::io::Result<Built> {
    std::fs::create_dir_all(out)?;
    let entries: Vec<Entry> = listed
        .into_iter()
        .enumerate()
        .map(|(i, (file, verdict))| {
            let page = match &verdict {
                // File names from result text stay short whatever the result holds.
                Ok((result, _)) => {
                    format!("result-{i}-{}.html", slug(&result.run_id).chars().take(64).collect::<String>())
                }
                Err(_) => String::new(),
            };
            Entry { file, verdict, page }
        })
        .collect();
    let index = out.join("index.html");
    write_page(&index, &page("lynx results", index_body(&entries)))?;
    for (i, entry) in entries.iter().enumerate() {
        if let Ok((result, signers)) = &entry.verdict {
            let related = Related { index: i, entries: &entries, reproductions };
            write_page(
                &out.join(&entry.page),
                &page(&format!("lynx: {}", device_label(result)), result_body(entry, result, signers, &related)),
            )?;
        }
    }
    let written: std::collections::HashSet<&str> = entries.iter().map(|e| e.page.as_str()).collect();
    let mut removed = Vec::new();
    for dir_entry in std::fs::read_dir(out)? {
        let dir_entry = dir_entry?;
        let name = dir_entry.file_name().to_string_lossy().into_owned();
        if is_result_page(&name) && !written.contains(name.as_str()) && !dir_entry.file_type()?.is_dir() {
            std::fs::remove_file(dir_entry.path())?;
            removed.push(dir_entry.path());
        }
    }
    removed.sort();
    Ok(Built { index, removed })
}

/// `contents` into `path`, replacing a symbolic link there rather than writing through it.
fn write_page(path: &Path, contents: &str) -> std::io::Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
        std::fs::remove_file(path)?;
    }
    std::fs::write(path, contents)
}

/// Whether `name` is one [`build_site`] gives a result's page: `result-N-SLUG.html`.
fn is_result_page(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("result-").and_then(|rest| rest.strip_suffix(".html")) else {
        return false;
    };
    let Some((index, slug)) = rest.split_once('-') else {
        return false;
    };
    !index.is_empty()
        && index.bytes().all(|b| b.is_ascii_digit())
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// A whole page: the strict policy, the style, `title` and `body`.
fn page(title: &str, body: Markup) -> String {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:";
                meta name="viewport" content="width=device-width";
                title { (Html(title)) }
                style { (PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    };
    markup.into_string() + "\n"
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

fn reported(value: &Reported<String>) -> Markup {
    match value {
        Reported::Known(v) => html! { (Html(v)) },
        Reported::Unavailable { unavailable } => html! { i { "unavailable" } " (" (Html(unavailable)) ")" },
    }
}

/// The index: every envelope with its verdict, a section per workload, and the roofline bars.
fn index_body(entries: &[Entry]) -> Markup {
    let verified: Vec<Verified> = entries
        .iter()
        .filter_map(|e| e.verdict.as_ref().ok().map(|(result, _)| Verified { result, page: &e.page }))
        .collect();
    // Each workload (model, ISL/OSL) once, in the order results name them.
    let mut workloads: Vec<(&str, &Workload)> = Vec::new();
    for v in &verified {
        for w in &v.result.config.suite.workloads {
            let model = v.result.config.model.name.as_str();
            if !workloads
                .iter()
                .any(|(m, seen)| *m == model && seen.isl == w.isl && seen.osl == w.osl && seen.name == w.name)
            {
                workloads.push((model, w));
            }
        }
    }
    let rooflines: Vec<(String, RooflineRecord)> =
        verified.iter().filter_map(|v| v.result.roofline.clone().map(|roof| (device_label(v.result), roof))).collect();
    html! {
        h1 { "lynx results" }
        p {
            "Every result below was verified against the trusted keys; only verified results contribute \
             figures. Text from results is shown as text."
        }
        h2 { "Results" }
        table {
            tr { th { "device" } th { "model" } th { "suite" } th { "verification" } th { "checks" } th { "run" } }
            @for entry in entries { (result_row(entry)) }
        }
        @for (model, workload) in &workloads { (workload_section(model, workload, &verified)) }
        @if !rooflines.is_empty() {
            h2 { "Roofline" }
            (roofline_section(&rooflines))
        }
    }
}

/// An envelope's row in the index: a verified result with its key and checks, or why not.
fn result_row(entry: &Entry) -> Markup {
    match &entry.verdict {
        Ok((result, signers)) => {
            let failed: Vec<&str> = result.failed_checks().iter().map(|c| c.as_str()).collect();
            html! {
                tr.result {
                    td.long { a href=(entry.page) { (Html(&device_label(result))) } }
                    td { (Html(&result.config.model.name)) " " (result.config.suite.precision) }
                    td { (Html(&result.config.suite.name)) }
                    td.ok { "verified (key " (Html(&signers.short())) ")" }
                    td {
                        @if failed.is_empty() { span.ok { "all passed" } }
                        @else { span.bad { "FAILED " (failed.join(", ")) } }
                        @if let Some(hooks) = result.harness.test_hooks() {
                            " " span.bad { "made with test hooks (" (Html(&hooks)) ")" }
                        }
                    }
                    td { (Html(&result.run_id)) }
                }
            }
        }
        Err((kind, reason)) => html! {
            tr.result {
                td.long { (Html(&entry.file.display().to_string())) }
                td { "-" } td { "-" }
                td.bad.long { (Html(kind)) ": " (Html(reason)) }
                td { "-" } td { "-" }
            }
        },
    }
}

/// A workload's section: the decode frontier of each device at the context nearest the
/// workload's mean context, and the latency-bounded throughput and cost table.
fn workload_section(model: &str, workload: &Workload, verified: &[Verified]) -> Markup {
    let (isl, osl) = (&workload.isl, &workload.osl);
    let (typical_isl, typical_osl) = workload.typical_lengths();
    let mean_ctx = typical_isl + typical_osl / 2.0;
    let mut series = Vec::new();
    let mut rows = Vec::new();
    for v in verified.iter().filter(|v| v.result.config.model.name == model) {
        let Some(derived) = &v.result.derived else { continue };
        let distance = |ctx: u32| (f64::from(ctx) - mean_ctx).abs();
        if let Some(line) = derived.frontier.iter().min_by(|a, b| distance(a.ctx).total_cmp(&distance(b.ctx))) {
            let points =
                line.points.iter().map(|p| (p.tok_per_s_per_user.get(), p.tok_per_s_per_device.get())).collect();
            series.push((format!("{} (ctx {})", device_label(v.result), line.ctx), points));
        }
        let bounded = derived.latency_bounded.iter().filter(|lb| lb.workload.isl == *isl && lb.workload.osl == *osl);
        rows.extend(bounded.map(|lb| latency_row(v, lb)));
    }
    html! {
        h2 { (Html(model)) " " (Html(&workload.name)) " " (isl) "/" (osl) }
        (line_chart(&format!("decode frontier, {model} {isl}/{osl}"), "tok/s/user", "tok/s/device", &series, true))
        table {
            tr {
                th { "device" } th { "p99 bound (TTFT / TPOT)" } th { "how" } th { "output tok/s/device" }
                th { "tok/s/user" } th { "J/token" } th { "$/M tokens" }
            }
            @for row in &rows { (row) }
        }
    }
}

/// One device's latency-bounded figures under one bound: measured by its serving phase where it
/// ran (the published figure), and simulated.
fn latency_row(v: &Verified, lb: &LatencyBounded) -> Markup {
    let figure = |value, none| crate::text::figure(value, 3, none);
    // A result made with test hooks set says so beside each of its figures.
    let device = html! {
        a href=(v.page) { (Html(&device_label(v.result))) }
        @if v.result.harness.test_hooks().is_some() { " " span.bad { "(test hooks)" } }
    };
    html! {
        @if let Some(m) = &lb.measured {
            tr {
                td.long { (device) }
                td {
                    (Html(&lb.bound.name))
                    (format!(" ({:.0} ms / {:.0} ms)", lb.bound.ttft_p99_s * 1e3, lb.bound.tpot_p99_s * 1e3))
                }
                td { (m.how()) (m.window()) (m.under_simulated_rate()) @if !m.within_bound { " (bound broken)" } }
                td { (m.tok_per_s()) }
                td { (format!("{:.1}", m.tok_per_s_per_user.get())) }
                td { (figure(&m.joules_per_output_token, "-")) }
                td { (figure(&m.usd_per_million_output_tokens, "no price")) }
            }
        }
        tr {
            td.long { (device) }
            td {
                (Html(&lb.bound.name))
                (format!(" ({:.0} ms / {:.0} ms)", lb.bound.ttft_p99_s * 1e3, lb.bound.tpot_p99_s * 1e3))
            }
            td { (lb.point_how()) }
            @match &lb.point {
                Reported::Known(p) => {
                    td { (p.tok_per_s()) }
                    td { (format!("{:.1}", p.tok_per_s_per_user.get())) }
                    td { (figure(&p.joules_per_output_token, "-")) }
                    td { (figure(&p.usd_per_million_output_tokens, "no price")) }
                }
                Reported::Unavailable { unavailable } => td colspan="4" { "none: " (Html(unavailable)) },
            }
        }
    }
}

/// Bars of every measured bandwidth and matmul ceiling of `results` (label, record).
fn roofline_section(results: &[(String, RooflineRecord)]) -> Markup {
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
    let (unit, scale) = if matmul.iter().any(|(_, v)| *v >= 1e12) { ("TFLOP/s", 1e12) } else { ("GFLOP/s", 1e9) };
    html! {
        (bar_chart("memory bandwidth", "GB/s", 1e9, &bandwidth))
        (bar_chart("matmul rate", unit, scale, &matmul))
    }
}

/// A verified result's page: what ran where, its checks, its cells, its telemetry, its
/// roofline.
fn result_body(entry: &Entry, result: &RunResult, signers: &Signers, related: &Related) -> Markup {
    let series = timeline(&entry.file, result);
    html! {
        p { a href="index.html" { "all results" } }
        h1 { (Html(&device_label(result))) }
        (facts(entry, result, signers))
        (reproduces(result, related))
        (reproductions(related))
        h2 { "Checks" }
        table {
            tr { th { "check" } th { "verdict" } th { "detail" } }
            @for check in &result.checks {
                tr {
                    td { (check.name.as_str()) }
                    @if check.passed { td.ok { "passed" } } @else { td.bad { "FAILED" } }
                    td { (Html(&check.detail)) }
                }
            }
        }
        h2 { "Cells" }
        (cells(result))
        @if let Some(derived) = &result.derived { (modes(derived)) }
        @if let Some(serving) = &result.serving { (serving_section(serving)) }
        h2 { "Telemetry" }
        @if series.is_empty() { p { "no device telemetry in the samples file" } }
        @for (name, points) in &series {
            (line_chart(name, "seconds into the run", name, &[(name.clone(), points.clone())], false))
        }
        @if let Some(roofline) = &result.roofline {
            h2 { "Roofline" }
            (roofline_section(&[(device_label(result), roofline.clone())]))
        }
    }
}

/// The serving phase as the run's summary prints it: each rate served, measured beside the
/// simulation (with the draws' spread, the simulation fed the loop's own steps and replaying
/// them, the steps' spread and the batches off the table's line where the result has them), as
/// preformatted text.
fn serving_section(serving: &lynx_schema::serving::ServingRecord) -> Markup {
    html! {
        h2 { "Serving phase" }
        // Line by line: each line's characters made inert, the line breaks kept (made inert
        // whole, the section read as one line with `\u{a}` between its lines).
        pre {
            @for line in crate::text::serving_section(serving).trim_start_matches('\n').lines() {
                (Html(line)) "\n"
            }
        }
    }
}

/// A result's place among the site's entries, and the reproductions the site was given.
struct Related<'a> {
    index: usize,
    entries: &'a [Entry],
    reproductions: &'a [Reproduction],
}

/// `text` marked good (the comparison's figures reproduced, or lie within the spread) or bad.
/// (A comparison with a result made with test hooks set is never good: `Verdict::of_devices`.)
fn marked(comparison: &Comparison, text: &str) -> Markup {
    match comparison.verdict.outcome {
        Outcome::Reproduced | Outcome::WithinSpread if comparison.verdict.of_devices() && sound(comparison) => {
            html! { span.ok { (Html(text)) } }
        }
        _ => html! { span.bad { (Html(text)) } },
    }
}

/// Whether the reproduction (a comparison's second result) passed its own run's checks: one
/// that failed any is never marked good, whatever its figures' outcome.
fn sound(comparison: &Comparison) -> bool {
    comparison.verdict.failed_checks.as_ref().is_none_or(|failed| failed.second.is_none())
}

/// A comparison's verdict in a few words, marked good or bad.
fn outcome(comparison: &Comparison) -> Markup {
    let v = &comparison.verdict;
    let within = format!("{} of {} figures within {}%", v.within_tolerance, v.figures, comparison.tolerance * 100.0);
    let hooks = if v.of_devices() { "" } else { "made with test hooks: " };
    let failed = if sound(comparison) { "" } else { "its run failed a check: " };
    html! { (marked(comparison, &format!("{hooks}{failed}{}", v.outcome.as_str()))) " (" (within) ")" }
}

/// For a reproduction: the published result it reproduces, with the verdict, or that it is not
/// among the site's results.
fn reproduces(result: &RunResult, related: &Related) -> Markup {
    let Some(of) = &result.reproduces else { return html! {} };
    let listed = related.reproductions.iter().find(|r| r.local == related.index);
    html! {
        h2 { "Reproduces" }
        @match listed {
            Some(r) => p {
                "This run reproduces "
                a href=(related.entries[r.published].page) { (Html(&of.device)) " run " (Html(&of.run_id)) }
                ", running its signed configuration again. "
                (marked(&r.comparison, &crate::text::verdict(&r.comparison, "the published result", "this reproduction")))
            },
            None => p {
                "This run reproduces " (Html(&of.device)) " run " (Html(&of.run_id)) " (envelope "
                (Html(&of.envelope)) ", sha256 " code { (Html(&of.envelope_sha256)) } "), which is not among \
                 the verified results this site was built from."
            },
        }
    }
}

/// For a published result: every reproduction of it the site was given, with each verdict.
fn reproductions(related: &Related) -> Markup {
    let of_this: Vec<&Reproduction> = related.reproductions.iter().filter(|r| r.published == related.index).collect();
    if of_this.is_empty() {
        return html! {};
    }
    html! {
        h2 { "Reproductions" }
        p {
            "Runs of this result's signed configuration on other nodes, each against this result: a figure \
             within 2% is not materially different (MLPerf's bar for an audit); beyond it, a figure may still \
             lie within this result's own spread."
        }
        table {
            tr { th { "device" } th { "host" } th { "run" } th { "signed by key" } th { "verdict" } th { "farthest figure" } }
            @for r in &of_this {
                @let entry = &related.entries[r.local];
                @if let Ok((local, signers)) = &entry.verdict {
                    tr.reproduction {
                        td.long { a href=(entry.page) { (Html(&device_label(local))) } }
                        td { (reported(&local.host.cpu_model)) }
                        td { (Html(&local.run_id)) }
                        td { (Html(&signers.short())) }
                        td { (outcome(&r.comparison)) }
                        td.long {
                            @match &r.comparison.verdict.worst {
                                Some(w) if w.ratio.is_finite() => { (Html(&w.figure)) " at " (format!("{:.3}", w.ratio)) }
                                Some(w) => { (Html(&w.figure)) " (undefined ratio)" }
                                None => "-",
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The table of what ran where, signed by whom.
fn facts(entry: &Entry, result: &RunResult, signers: &Signers) -> Markup {
    let config = &result.config;
    let rows: [(&str, Markup); 20] = [
        ("envelope", html! { (Html(&entry.file.display().to_string())) }),
        (
            "signed by key",
            html! {
                (Html(&signers.key_id))
                @for id in &signers.also { br; "countersigned by key " (Html(id)) }
            },
        ),
        ("run", html! { (Html(&result.run_id)) }),
        ("status", html! { (result.status) }),
        ("started", html! { (Html(&result.started_at)) }),
        ("device", html! { (Html(&device_label(result))) }),
        (
            "memory",
            match &result.device.memory_bytes {
                Reported::Known(b) => html! { (format!("{:.1} GiB", *b as f64 / (1u64 << 30) as f64)) },
                Reported::Unavailable { unavailable } => html! { "unavailable (" (Html(unavailable)) ")" },
            },
        ),
        ("host", reported(&result.host.cpu_model)),
        ("host CPUs allowed", html! { (Html(&result.host.cpu_allowance_words())) }),
        ("host settings", html! { (Html(&result.host.settings_words())) }),
        ("GPU's host link", html! { (Html(&result.host_link_words().unwrap_or_else(|| "-".to_owned()))) }),
        ("suite", html! { (Html(&config.suite.name)) }),
        ("model", html! { (Html(&config.model.name)) " at " (config.suite.precision) }),
        (
            "measured",
            match &config.measured {
                Some(part) => html! { (Html(&part.not_measured.join("; "))) },
                None => html! { "the whole model" },
            },
        ),
        ("configuration sha256", html! { code { (Html(&config.sha256)) } }),
        ("weights", html! { (Html(&crate::listing::weights_words(&config.weights))) }),
        ("lynx", html! { (Html(&result.harness.lynx_version)) " (" (reported(&result.harness.git_commit)) ")" }),
        ("libtorch", reported(&result.harness.libtorch_runtime_version)),
        (
            "warm-up",
            html! { @for (i, line) in crate::listing::warmups(result).iter().enumerate() { @if i > 0 { br; } (Html(line)) } },
        ),
        (
            "graphs",
            match &result.harness.graphs {
                Some(Reported::Known(true)) => html! { "captured and replayed" },
                Some(Reported::Known(false)) => html! { "not captured" },
                Some(Reported::Unavailable { unavailable }) => html! { "unavailable (" (Html(unavailable)) ")" },
                None => html! { "not measured (a result made before lynx measured graphs)" },
            },
        ),
    ];
    let hooks = result.harness.test_hooks();
    let rows: Vec<(&str, Markup)> = rows
        .into_iter()
        .chain(hooks.map(|hooks| ("test hooks", html! { (Html(&hooks)) ": a test's figures, not the device's" })))
        .chain([
            ("environment", html! { (Html(&result.harness.environment_words())) }),
            ("GPU libraries", html! { (Html(&result.harness.gpu_libraries_words())) }),
            ("CPU binding", html! { (Html(&result.harness.cpu_binding_words())) }),
        ])
        .collect();
    html! {
        table {
            @for (what, value) in &rows { tr { th { (what) } td { (value) } } }
        }
    }
}

/// Every cell's status, step time, throughput and share of the roofline.
fn cells(result: &RunResult) -> Markup {
    let figure =
        |v: Option<f64>, scale: f64, digits: usize| v.map_or("-".to_owned(), |v| format!("{:.*}", digits, v * scale));
    html! {
        table {
            tr {
                th { "cell" } th { "status" } th { "median" } th { "p99" } th { "tok/s/user" } th { "tok/s/device" }
                th { "of bandwidth" } th { "of matmul" } th { "attention" }
            }
            @for cell in &result.cells {
                @let roofline = cell.roofline.as_ref();
                tr {
                    td { (cell.shape) }
                    td {
                        @match &cell.status {
                            CellStatus::Ok => "ok",
                            other => span.bad { (Html(other.message().unwrap_or_default())) },
                        }
                    }
                    td { (figure(cell.median_s(), 1e3, 3)) " ms" }
                    td { (figure(cell.step_time.as_ref().map(|t| t.p99_s.get()), 1e3, 3)) " ms" }
                    td { (figure(cell.tok_per_s_per_user.map(|v| v.get()), 1.0, 1)) }
                    td { (figure(cell.tok_per_s_per_device.map(|v| v.get()), 1.0, 1)) }
                    td { (figure(roofline.and_then(|r| r.bandwidth_fraction).map(|v| v.get()), 100.0, 1)) "%" }
                    td { (figure(roofline.and_then(|r| r.matmul_fraction).map(|v| v.get()), 100.0, 1)) "%" }
                    td { (cell.attention.map_or("-", |a| a.as_str())) }
                }
            }
        }
    }
}

/// Which decode mode the derived figures use, and each shape measured eager and as a graph.
fn modes(derived: &lynx_schema::derived::Derived) -> Markup {
    html! {
        @if let Some(modes) = &derived.decode_modes { p { "Derived decode figures use " (Html(modes)) "." } }
        @if !derived.eager_graph.is_empty() {
            h2 { "Eager against graph" }
            p {
                "The median decode step issued kernel by kernel (eager) and replayed as one captured graph: the "
                "ratio is what the host CPU and libtorch's dispatcher cost a step on this device, and where the "
                "attention column names two kernels, their difference too."
            }
            table {
                tr { th { "ctx" } th { "batch" } th { "eager" } th { "graph" } th { "eager/graph" } th { "attention" } }
                @for pair in &derived.eager_graph {
                    tr {
                        td { (pair.ctx) } td { (pair.batch) }
                        td { (format!("{:.3} ms", pair.eager_step_s.get() * 1e3)) }
                        td { (format!("{:.3} ms", pair.graph_step_s.get() * 1e3)) }
                        td { (format!("{:.2}x", pair.eager_over_graph.get())) }
                        td { (crate::text::attention_pair(pair.eager_attention, pair.graph_attention)) }
                    }
                }
            }
        }
    }
}

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
        let Ok(line) = serde_json::from_str::<SamplesLine>(&line) else { continue };
        let sample = match line {
            SamplesLine::Segment { .. } => {
                offset = last;
                continue;
            }
            SamplesLine::Telemetry { source: from, sample } if from == source.as_str() => sample,
            SamplesLine::Telemetry { .. } => continue,
        };
        let t = offset + sample.t_s;
        last = t;
        for (series, value) in
            [(&mut power, sample.power_w), (&mut clock, sample.sm_clock_mhz), (&mut temperature, sample.temperature_c)]
        {
            if let Some(v) = value {
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

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::value::Finite;

    #[test]
    fn only_the_names_the_site_gives_result_pages_are_its_pages() {
        for name in ["result-0-20261203t010753z-dd076e65.html", "result-12-.html", "result-3-a-b.html"] {
            assert!(is_result_page(name), "{name}");
        }
        for name in [
            "index.html",
            "result-notes.html",
            "result--x.html",
            "result-1-Mine.html",
            "result-1-x.htm",
            "result-1-x.html.bak",
            "my-result-1-x.html",
            "result-1_x.html",
        ] {
            assert!(!is_result_page(name), "{name}");
        }
    }

    /// A result's page shows its serving phase as the summary prints it, a hostile workload
    /// name as inert text.
    #[test]
    fn a_result_page_shows_its_serving_phase_with_hostile_names_as_text() {
        let mut serving = crate::text::serving_fixture("batch cap 8 <b>", "x<script>\u{1b}[31m");
        let Reported::Known(rates) = &mut serving.served[0].rates else { unreachable!() };
        let f = |v: f64| Finite::new(v, "t").unwrap();
        rates[0].simulated_draws = Some(lynx_schema::serving::SimulatedDraws {
            draws: 101,
            ttft_p99_s: [f(0.8), f(0.9)],
            tpot_p99_s: [f(0.08), f(0.09)],
        });
        let html = serving_section(&serving).into_string();
        assert!(html.starts_with("<h2>Serving phase</h2><pre>serving phase (measured at"), "{html}");
        assert!(html.contains("P99 TTFT MEASURED/SIM") && html.contains("over 101 draws"), "{html}");
        assert!(!html.contains("<script>") && !html.contains("<b>") && !html.contains('\u{1b}'), "{html}");
        assert!(html.contains("&lt;script&gt;") && html.contains("&lt;b&gt;"), "{html}");
        // A line a line: the section's line breaks are kept, not shown as escapes.
        assert!(!html.contains("\\u{a}") && html.matches('\n').count() >= 4, "{html}");
    }
}
