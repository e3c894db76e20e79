//! Results as listings a user keeps: a buyer's shortlist (table, Markdown, CSV or JSON) and a
//! verified result exported as Markdown or CSV. Every string from a result is escaped for the
//! format it goes into.

use crate::escape::{markdown_text, terminal_text};
use crate::table::Table;
use crate::text::{derived_report, ms, roofline_table};
use lynx_schema::config::Length;
use lynx_schema::derived::BoundedPoint;
use lynx_schema::result::{CellRecord, CellShape, RunResult, WeightsRecord};
use lynx_schema::shortlist::{Range, Shortlist};
use lynx_schema::value::{Finite, Reported};
use std::fmt::Write;

/// How a listing is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
    Csv,
    Json,
}

/// `lynx shortlist`'s listing in `format`.
pub fn shortlist(list: &Shortlist, format: Format) -> Result<String, serde_json::Error> {
    if format == Format::Json {
        return Ok(format!("{}\n", serde_json::to_string_pretty(list)?));
    }
    let table = ranking(list);
    let request = &list.request;
    let shape = match &request.isl {
        Length::File { file, pairs } => format!("with the {} isl,osl pairs of {file}", pairs.len()),
        isl => format!("{isl}/{}", request.osl),
    };
    let at = request.precision.map_or(String::new(), |p| format!(" at {p}"));
    let title = format!(
        "{}{at} {shape} under p99 TTFT {} and TPOT {}, {:.0}% utilisation",
        request.model,
        ms(request.ttft_p99_s),
        ms(request.tpot_p99_s),
        request.utilisation * 100.0
    );
    let mut out = String::new();
    match format {
        Format::Table => {
            let _ = writeln!(out, "{}", terminal_text(&title, 200));
            out.push_str(&table.text(80));
            if let Some(devices) = by_device(list) {
                let _ = writeln!(out, "\nby device (the ranked results of each device, precision and part measured):");
                out.push_str(&devices.text(80));
            }
            if !list.excluded.is_empty() {
                let _ = writeln!(out, "\nnot ranked:");
                for x in &list.excluded {
                    let (file, reason) = (terminal_text(&x.file, 200), terminal_text(&x.reason, 200));
                    let _ = writeln!(out, "  {file} ({}): {reason}", x.kind);
                }
            }
        }
        Format::Markdown => {
            let _ = writeln!(out, "**{}**\n", markdown_text(&title));
            out.push_str(&table.markdown());
            if let Some(devices) = by_device(list) {
                let _ =
                    writeln!(out, "\nBy device (the ranked results of each device, precision and part measured):\n");
                out.push_str(&devices.markdown());
            }
            if !list.excluded.is_empty() {
                let _ = writeln!(out, "\nNot ranked:\n");
                for x in &list.excluded {
                    let (file, kind, reason) =
                        (markdown_text(&x.file), markdown_text(&x.kind), markdown_text(&x.reason));
                    let _ = writeln!(out, "- {file} ({kind}): {reason}");
                }
            }
        }
        Format::Csv => {
            // Results not ranked follow as rows with the reason where the cost would be.
            let mut table = table;
            for x in &list.excluded {
                let reason = format!("not ranked ({}): {}", x.kind, x.reason);
                table.row(["", "", "", &reason, "", "", "", "", "", "", "", "", &x.file]);
            }
            out.push_str(&table.csv());
        }
        Format::Json => unreachable!("handled above"),
    }
    Ok(out)
}

/// The ranked entries of a shortlist as a table.
fn ranking(list: &Shortlist) -> Table {
    let mut table = Table::new([
        "RANK",
        "DEVICE",
        "PRECISION",
        "$/M TOKENS",
        "TOK/S/DEVICE",
        "STEADY TOK/S",
        "TOK/S/USER",
        "P99 TTFT / TPOT",
        "BATCH CAP",
        "J/TOKEN",
        "CHECKS",
        "MEASURED",
        "RESULT",
        "FIGURE",
    ]);
    for (i, entry) in list.ranked.iter().enumerate() {
        let figures = match &entry.measured {
            Some(m) => [
                crate::text::figure(&m.usd_per_million_output_tokens, 4, "no price"),
                format!("{:.1}", m.output_tok_per_s_per_device.get()),
                steady_tok_per_s(m.steady_output_tok_per_s_per_device.as_ref()),
                format!("{:.1}", m.tok_per_s_per_user.get()),
                format!("{} / {}", ms(m.ttft_p99_s.get()), ms(m.tpot_p99_s.get())),
                m.max_batch.map_or("-".to_owned(), |b| b.to_string()),
                crate::text::figure(&m.joules_per_output_token, 3, "-"),
            ],
            None => simulated_figures(&entry.point),
        };
        let checks = if entry.checks_passed {
            "passed".to_owned()
        } else {
            format!("FAILED {}", entry.failed_checks.join(", "))
        };
        let precision = entry.precision.map_or("-".to_owned(), |p| p.to_string());
        let mut row = vec![(i + 1).to_string(), entry.device.clone(), precision.clone()];
        row.extend(figures);
        row.extend([
            checks,
            entry.measured_part.clone().unwrap_or_else(|| "whole model".to_owned()),
            entry.file.clone(),
            match (&entry.measured, &entry.point) {
                (Some(m), _) => format!("{}{}{}", m.how(), m.window(), m.under_simulated_rate()),
                (None, Reported::Known(p)) => p.how().to_owned(),
                (None, Reported::Unavailable { .. }) => "simulated".to_owned(),
            },
        ]);
        table.row(row);
        // Beside a measured figure, the simulated one, unranked, as the summary and the site
        // show them.
        if entry.measured.is_some() {
            let mut row = vec![String::new(), entry.device.clone(), precision];
            row.extend(simulated_figures(&entry.point));
            let how = match &entry.point {
                Reported::Known(p) => p.how_beside_measured(),
                Reported::Unavailable { .. } => "simulated".to_owned(),
            };
            row.extend([String::new(), String::new(), entry.file.clone(), format!("{how}, beside the measured")]);
            table.row(row);
        }
    }
    table.keep_tail("RESULT");
    table
}

/// The shortlist's per-device summaries as a table, where a device has more than one ranked
/// result (with one each, the summary would repeat the ranking).
fn by_device(list: &Shortlist) -> Option<Table> {
    if list.devices.iter().all(|d| d.results < 2) {
        return None;
    }
    let mut table = Table::new([
        "DEVICE",
        "PRECISION",
        "MEASURED",
        "RESULTS",
        "CHECKS PASSED",
        "FIGURES",
        "$/M TOKENS MEDIAN (MIN-MAX)",
        "TOK/S/DEVICE MEDIAN (MIN-MAX)",
    ]);
    let spread = |r: &Range, digits: usize| format!("{:.digits$} ({:.digits$}-{:.digits$})", r.median, r.min, r.max);
    for d in &list.devices {
        let simulated = d.results - d.measured;
        table.row([
            d.device.clone(),
            d.precision.to_string(),
            d.measured_part.clone().unwrap_or_else(|| "whole model".to_owned()),
            d.results.to_string(),
            d.checks_passed.to_string(),
            format!("{} measured, {simulated} simulated", d.measured),
            d.usd_per_million_output_tokens.as_ref().map_or("no price".to_owned(), |r| spread(r, 4)),
            spread(&d.output_tok_per_s_per_device, 1),
        ]);
    }
    Some(table)
}

/// A steady part's output tok/s as the ranking shows it: the figure, or `-` where the window had
/// none or the result predates it.
fn steady_tok_per_s(steady: Option<&Reported<Finite>>) -> String {
    match steady {
        Some(Reported::Known(tok)) => format!("{:.1}", tok.get()),
        _ => "-".to_owned(),
    }
}

/// A simulated point's figures as the ranking shows them: cost, tok/s/device, its steady part's,
/// tok/s/user, p99 TTFT / TPOT, batch cap, J/token; or why there is none.
fn simulated_figures(point: &Reported<BoundedPoint>) -> [String; 7] {
    match point {
        Reported::Known(p) => [
            crate::text::figure(&p.usd_per_million_output_tokens, 4, "no price"),
            format!("{:.1}", p.output_tok_per_s_per_device.get()),
            steady_tok_per_s(p.steady_output_tok_per_s_per_device.as_ref()),
            format!("{:.1}", p.tok_per_s_per_user.get()),
            format!("{} / {}", ms(p.ttft_p99_s.get()), ms(p.tpot_p99_s.get())),
            p.max_batch.to_string(),
            crate::text::figure(&p.joules_per_output_token, 3, "-"),
        ],
        Reported::Unavailable { unavailable } => {
            let mut figures: [String; 7] = Default::default();
            figures[0] = format!("none: {unavailable}");
            figures
        }
    }
}

/// A result's cells as a table: one column per figure, each with how it is read from a cell
/// (empty where the cell has no such figure).
fn cells_table(cells: &[CellRecord]) -> Table {
    type Field = fn(&CellRecord) -> String;
    let columns: [(&str, Field); 28] = [
        ("step", |c| if matches!(c.shape, CellShape::Prefill { .. }) { "prefill" } else { "decode" }.to_owned()),
        ("batch", |c| c.shape.batch().to_string()),
        ("prompt_len", |c| match c.shape {
            CellShape::Prefill { prompt_len, .. } => prompt_len.to_string(),
            CellShape::Decode { .. } => String::new(),
        }),
        ("ctx", |c| match c.shape {
            CellShape::Prefill { .. } => String::new(),
            CellShape::Decode { ctx, .. } => ctx.to_string(),
        }),
        ("status", |c| c.status.as_str().to_owned()),
        ("message", |c| c.status.message().unwrap_or_default().to_owned()),
        ("n", |c| c.step_time.as_ref().map_or(String::new(), |t| t.n.to_string())),
        ("median_s", |c| number(c.step_time.as_ref().map(|t| t.median_s.get()))),
        ("p90_s", |c| number(c.step_time.as_ref().map(|t| t.p90_s.get()))),
        ("p99_s", |c| number(c.step_time.as_ref().map(|t| t.p99_s.get()))),
        ("min_s", |c| number(c.step_time.as_ref().map(|t| t.min_s.get()))),
        ("max_s", |c| number(c.step_time.as_ref().map(|t| t.max_s.get()))),
        ("cv", |c| number(c.step_time.as_ref().and_then(|t| t.cv).map(Finite::get))),
        ("full_depth_median_s", |c| number(c.full_depth.as_ref().map(|d| d.median_s.get()))),
        ("tok_per_s_per_user", |c| number(c.tok_per_s_per_user.map(Finite::get))),
        ("tok_per_s_per_device", |c| number(c.tok_per_s_per_device.map(Finite::get))),
        ("joules_per_token", |c| number(c.joules_per_token.map(Finite::get))),
        ("achieved_gb_per_s", |c| number(c.roofline.as_ref().map(|r| r.achieved_bytes_per_s.get() / 1e9))),
        ("bandwidth_fraction", |c| number(c.roofline.as_ref().and_then(|r| r.bandwidth_fraction).map(Finite::get))),
        ("achieved_gflop_per_s", |c| number(c.roofline.as_ref().map(|r| r.achieved_flops_per_s.get() / 1e9))),
        ("matmul_fraction", |c| number(c.roofline.as_ref().and_then(|r| r.matmul_fraction).map(Finite::get))),
        ("attention", |c| c.attention.map_or(String::new(), |a| a.to_string())),
        ("experts", |c| c.experts.map_or(String::new(), |e| e.to_string())),
        ("issue_median_s", |c| number(c.issue_median_s.map(Finite::get))),
        ("launch_bound", |c| c.launch_bound.map_or(String::new(), |b| b.to_string())),
        ("mode", |c| if c.shape.is_decode() { c.shape.mode().to_string() } else { String::new() }),
        ("attended", |c| c.attended.map_or(String::new(), |n| n.to_string())),
        ("experts_touched", |c| number(c.experts_touched.map(Finite::get))),
    ];
    let mut table = Table::new(columns.iter().map(|(name, _)| *name));
    for cell in cells {
        table.row(columns.iter().map(|(_, field)| field(cell)));
    }
    table
}

/// A figure as exported: Rust's shortest round-trip form, or empty when there is none.
fn number(value: Option<f64>) -> String {
    value.map_or(String::new(), |v| format!("{v}"))
}

/// Each warm-up of a run (the first, then one for each process that resumed it) as its line:
/// its time, steps and shape, whether it reached equilibrium, and its step timed again after the
/// sweep; `not run` where the run has none.
pub fn warmups(result: &RunResult) -> Vec<String> {
    let lines: Vec<String> =
        result.warmup.iter().chain(&result.resumed_warmups).map(crate::text::warmup_line).collect();
    if lines.is_empty() {
        vec!["not run".to_owned()]
    } else {
        lines
    }
}

/// Where a run's weights came from, for a published page: the seed, or a checkpoint by its files
/// and what its model read of it (its folder is the publisher's, and says nothing of the weights).
/// Unescaped: the caller escapes it for its format.
pub fn weights_words(weights: &WeightsRecord) -> String {
    match weights {
        WeightsRecord::Random { seed } => format!("drawn from the seed {seed}"),
        WeightsRecord::Checkpoint { files, read, .. } => {
            let stored = format!(
                "a checkpoint of {} *.safetensors files, {}",
                files.len(),
                crate::text::bytes_words(lynx_schema::result::files_bytes(files))
            );
            match read {
                Some(read) => {
                    format!("{stored}; its model read {}, sha256 {}", crate::text::tensors_words(read), read.sha256)
                }
                None => {
                    format!("{stored}; what its model read is not recorded (a result made before lynx recorded it)")
                }
            }
        }
    }
}

/// A verified result (signed by `signers`) as CSV or Markdown. Every string from the result is
/// escaped for the format.
pub fn export(result: &RunResult, signers: &crate::Signers, format: Format) -> String {
    let mut out = String::new();
    let cells = cells_table(&result.cells);
    if format == Format::Csv {
        return cells.csv();
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
        ("status", result.status.to_string()),
        ("signed by key", markdown_text(&signers.key_id)),
        ("device", format!("{} ({})", text(&result.device.name), result.device.device)),
        ("host", text(&result.host.cpu_model)),
        ("host CPUs allowed", markdown_text(&result.host.cpu_allowance_words())),
        ("host settings", markdown_text(&result.host.settings_words())),
        ("GPU's host link", result.host_link_words().map_or_else(|| "-".to_owned(), |w| markdown_text(&w))),
        ("model", format!("{} at {}", markdown_text(&config.model.name), config.suite.precision)),
        ("configuration sha256", markdown_text(&config.sha256)),
        ("weights", markdown_text(&weights_words(&config.weights))),
        ("lynx", format!("{} ({})", markdown_text(&result.harness.lynx_version), text(&result.harness.git_commit))),
        ("libtorch", text(&result.harness.libtorch_runtime_version)),
        ("started", markdown_text(&result.started_at)),
    ];
    for (what, value) in facts {
        let _ = writeln!(out, "| {what} | {value} |");
        if what == "signed by key" && !signers.also.is_empty() {
            let _ = writeln!(out, "| countersigned by key | {} |", markdown_text(&signers.also.join(", ")));
        }
    }
    if let Some(hooks) = result.harness.test_hooks() {
        let _ = writeln!(out, "| test hooks | {}: a test's figures, not the device's |", markdown_text(&hooks));
    }
    let _ = writeln!(out, "| environment | {} |", markdown_text(&result.harness.environment_words()));
    let _ = writeln!(out, "| GPU libraries | {} |", markdown_text(&result.harness.gpu_libraries_words()));
    let _ = writeln!(out, "| CPU binding | {} |", markdown_text(&result.harness.cpu_binding_words()));
    // Tables of figures in code blocks; result text in them was escaped for the terminal, and
    // no fence inside can close the block.
    let fenced = |text: String| text.replace("```", "'''");
    // The warm-up: how long, whether it reached equilibrium, and its step timed again after
    // the sweep (numbers only: no text from the result).
    let _ = writeln!(out, "\n## Warm-up\n\n```text\n{}\n```", fenced(warmups(result).join("\n")));
    let _ = writeln!(out, "\n## Cells\n");
    out.push_str(&cells.markdown());
    if let Some(roofline) = &result.roofline {
        let _ = writeln!(out, "\n## Roofline\n\n```text\n{}```", fenced(roofline_table(roofline)));
    }
    if let Some(derived) = &result.derived {
        let _ = writeln!(out, "\n## Derived figures\n\n```text{}```", fenced(derived_report(derived)));
    }
    if let Some(serving) = &result.serving {
        let _ = writeln!(out, "\n## Serving phase\n\n```text{}```", fenced(crate::text::serving_section(serving)));
    }
    let _ = writeln!(out, "\n## Checks\n");
    for check in &result.checks {
        let verdict = if check.passed { "passed" } else { "FAILED" };
        let _ =
            writeln!(out, "- **{}** {verdict}: {}", markdown_text(check.name.as_str()), markdown_text(&check.detail));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::result::WeightsRead;

    /// A published page says where the weights came from: the seed, or the checkpoint's files
    /// and what its model read of them, or that a result from before lynx recorded it does not
    /// say; never the publisher's folder.
    #[test]
    fn weights_are_named_by_seed_or_by_what_was_read() {
        assert_eq!(weights_words(&WeightsRecord::Random { seed: 7 }), "drawn from the seed 7");
        let files =
            vec![("model-1.safetensors".to_owned(), 5_000_000_000), ("model-2.safetensors".to_owned(), 1_060_000_000)];
        let read = WeightsRead { tensors: 21, bytes: 2_973_802_496, sha256: "b0b1".to_owned() };
        let checkpoint =
            |read| WeightsRecord::Checkpoint { dir: "/home/lab/llama".to_owned(), files: files.clone(), read };
        assert_eq!(
            weights_words(&checkpoint(Some(read))),
            "a checkpoint of 2 *.safetensors files, 6.06 GB; its model read 21 tensors of 2.97 GB, sha256 b0b1"
        );
        let older = weights_words(&checkpoint(None));
        assert!(older.ends_with("GB; what its model read is not recorded (a result made before lynx recorded it)"));
        assert!(!older.contains("/home/lab"));
    }
}
