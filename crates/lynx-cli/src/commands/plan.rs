//! `lynx run --plan`: a run planned and printed, nothing measured or written (no run folder, no
//! key): for one device, each device of a node, or the rest of a run to resume; and the text
//! `lynx reproduce --plan` prints too.

use crate::args::RunArgs;
use lynx_analysis::estimate::WallTime;
use lynx_analysis::memory::gib;
use lynx_report::escape::terminal_text;
use lynx_report::table::Table;
use lynx_report::text::ms;
use lynx_runner::{devices, suite, Forecast, Plan};
use lynx_schema::device::DeviceName;
use lynx_schema::result::WeightsRecord;
use lynx_schema::value::Reported;
use std::fmt::Write;

pub fn plan(args: &RunArgs) -> anyhow::Result<()> {
    // The run's inputs, its key aside: a plan signs nothing.
    super::folder_or_absent("--out", &args.out)?;
    let host = lynx_runner::host_record();
    let forecasts = match &args.resume {
        Some(dir) => {
            let run = super::run::resumable(dir, args)?;
            let device = devices::find(run.read_plan()?.device, &host)?;
            vec![lynx_runner::forecast_resume(&run, &device)?]
        }
        None => {
            let found = match args.plan_as {
                Some(sheet) => vec![devices::planned(sheet, args.device)?],
                None => {
                    if args.node.is_node() {
                        super::run::node_devices(&args.node, &host)?
                    } else {
                        vec![match args.node.node_device.or(args.device) {
                            Some(name) => devices::find(name, &host)?,
                            None => devices::best(&host),
                        }]
                    }
                }
            };
            let catalogue = suite::Catalogue::new(args.models.clone());
            // A node's runs all at once each build their parity reference at once.
            let runs_at_once = match args.node.is_node() && !args.node.one_at_a_time {
                true => found.len() as u64,
                false => 1,
            };
            let mut forecasts = Vec::new();
            for device in found {
                let default_suite = if device.record.device == DeviceName::Cpu { "cpu" } else { "standard" };
                let (suite, model) = catalogue.suite(args.suite.as_deref().unwrap_or(default_suite))?;
                let weights = args.weights.clone();
                // A datasheet's device sits nowhere: its binding is not checked.
                let cpus = match device.planned {
                    Some(_) => lynx_schema::result::CpuBinding::none(),
                    None => lynx_runner::binding::resolve(args.cpus.as_ref(), &device)?,
                };
                forecasts.push(lynx_runner::forecast(&Plan {
                    suite,
                    model,
                    device,
                    results_dir: args.out.clone(),
                    weights,
                    cpus,
                    runs_at_once,
                })?);
            }
            forecasts
        }
    };
    let estimates: Vec<Estimate> = forecasts
        .iter()
        .filter_map(|f| f.wall_time.as_ref().ok())
        .map(|w| Estimate {
            prepare_s: w.prepare_s,
            first_s: w.total_s,
            longest_s: w.total_s + w.warmup_extra_s + w.under_extra_s,
        })
        .collect();
    let node = args.node.is_node().then(|| node_estimate(&estimates, args.node.one_at_a_time));
    if args.json {
        let mut out = serde_json::json!({ "plans": forecasts.iter().map(plan_json).collect::<Vec<_>>() });
        if let Some((first, longest)) = node {
            out["node"] = serde_json::json!({
                "devices": forecasts.len(),
                "devices_estimated": estimates.len(),
                "one_at_a_time": args.node.one_at_a_time,
                "estimated_s": first,
                "estimated_longest_s": longest,
            });
        }
        sayln!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let texts: Vec<String> = forecasts.iter().map(plan_text).collect();
    say!("{}", texts.join("\n"));
    if let Some(node) = node {
        sayln!("\n{}", node_line(node, estimates.len(), forecasts.len(), args.node.one_at_a_time));
    }
    Ok(())
}

/// A device's estimated wall time, in seconds.
#[derive(Debug, Clone, Copy)]
struct Estimate {
    /// Of `first_s`, what comes before warm-up ([`WallTime::prepare_s`]).
    prepare_s: f64,
    /// The first figure (warm-up at its `min_s`).
    first_s: f64,
    /// The longest case (warm-up to its `max_s`, and the serving loop's step down).
    longest_s: f64,
}

/// A node's wall time in seconds (first figure, longest case) from its devices' `estimates`:
/// their sum where one after another; where all at once, the longest preparation (each device's
/// run waits there for every other's, `lynx_runner::node::prepared_together`) and then the
/// longest of the rest.
fn node_estimate(estimates: &[Estimate], one_at_a_time: bool) -> (f64, f64) {
    let longest = |of: &dyn Fn(&Estimate) -> f64| estimates.iter().map(of).fold(0.0, f64::max);
    if one_at_a_time {
        (estimates.iter().map(|e| e.first_s).sum(), estimates.iter().map(|e| e.longest_s).sum())
    } else {
        let prepare = longest(&|e| e.prepare_s);
        (prepare + longest(&|e| e.first_s - e.prepare_s), prepare + longest(&|e| e.longest_s - e.prepare_s))
    }
}

/// The line saying a node's wall time, `(first, longest)` from [`node_estimate`] over the
/// `estimated` of its `devices` that have an estimate.
fn node_line((first, longest): (f64, f64), estimated: usize, devices: usize, one_at_a_time: bool) -> String {
    let minutes = |s: f64| (s / 60.0).ceil();
    let how = match one_at_a_time {
        true => "one after another, the sum",
        false => "all at once (each warms up once all have prepared), the longest",
    };
    let missing = devices - estimated;
    let unknown =
        if missing > 0 { format!("; {missing} device(s) without an estimate not counted") } else { String::new() };
    format!(
        "node: {devices} device(s), {how} of their estimates: about {} min ({} at the longest){unknown}; an \
         estimate, not a measurement",
        minutes(first),
        minutes(longest)
    )
}

/// The plan as the user reads it.
pub(super) fn plan_text(forecast: &Forecast) -> String {
    let config = &forecast.config;
    let suite = &config.suite;
    let mut out = String::new();
    let device_name = forecast.device.name.known().map_or_else(String::new, |name| format!(" ({name})"));
    let _ = writeln!(
        out,
        "plan: suite {}: {} ({:.0} M parameters) at {} on {}{device_name}; nothing is measured or written",
        suite.name,
        config.model.name,
        config.model_parameters as f64 / 1e6,
        suite.precision,
        forecast.device.device,
    );
    if let Some(sheet) = forecast.planned {
        let _ = writeln!(
            out,
            "planned from lynx's {} datasheet ({:.2} TB/s, {:.0} dense bf16 TFLOP/s, {} GB): the device is not \
             here; its memory is the datasheet's (a run finds less free beside the driver's context), its decode \
             steps are planned eager and graph (as where libtorch's GPU backend loads), and the parity check's \
             host memory, on its own host, is not checked",
            sheet.name,
            sheet.bandwidth_bytes_per_s / 1e12,
            sheet.bf16_flops_per_s / 1e12,
            sheet.memory_gb
        );
    }
    if forecast.done > 0 {
        let _ = writeln!(out, "resuming: {} cells are in the journal; the rest is planned", forecast.done);
    }
    if let Some(binding) = forecast.cpu_binding.as_ref().filter(|b| b.cpus.is_some()) {
        let _ = writeln!(out, "bound to {}", terminal_text(&binding.words(), 200));
    }
    let _ = match &config.weights {
        WeightsRecord::Random { seed } => writeln!(out, "weights: drawn from the seed {seed}"),
        WeightsRecord::Checkpoint { dir, files, .. } => writeln!(
            out,
            "weights: read from the checkpoint {} ({} *.safetensors files, {}; only the tensors the measured \
             part of the model needs are read{})",
            terminal_text(dir, 200),
            files.len(),
            crate::output::checkpoint_size(files),
            match suite.scale.tp {
                1 => String::new(),
                tp => format!(", and of each the part the first of {tp} tensor-parallel devices holds"),
            }
        ),
    };
    if let Some(differences) = lynx_runner::suite::checkpoint_config_warning(config) {
        let _ = writeln!(out, "warning: {differences}");
    }
    let _ = match &forecast.free {
        Reported::Known((bytes, source)) => writeln!(out, "free beside the weights: {} ({source})", gib(*bytes)),
        Reported::Unavailable { unavailable } => writeln!(
            out,
            "free beside the weights: not known ({unavailable}); every cell is planned, and one that does not fit \
             is recorded as out of memory"
        ),
    };
    let _ = match &forecast.graphs {
        Reported::Known(true) => writeln!(out, "decode steps: eager and graph, once the graph parity check passes"),
        Reported::Known(false) => writeln!(out, "decode steps: eager"),
        Reported::Unavailable { unavailable } => writeln!(out, "decode steps: eager (graphs: {unavailable})"),
    };
    for gap in &forecast.gaps {
        let _ = writeln!(out, "warning: {gap}");
    }
    if forecast.nothing_left {
        let _ = writeln!(
            out,
            "nothing is left to measure or serve: a resume assembles the result from its journal and signs it again"
        );
        return out;
    }
    match &forecast.wall_time {
        Ok(wall_time) => out.push_str(&planned_text(wall_time)),
        Err(why) => {
            let _ = writeln!(
                out,
                "no cells planned and no wall-time estimate: {why}; a run plans its cells over the steps it \
                 measures, and estimates its wall time once its probes have measured the device's ceilings"
            );
        }
    }
    out
}

/// The plan as JSON: every figure in it predicted, none measured (`predicted` says from what).
fn plan_json(forecast: &Forecast) -> serde_json::Value {
    use serde_json::{json, Value};
    // A known figure bare, an unknown one as `{"unavailable": why}`, as a result writes them.
    let free = forecast.free.clone().map_known(|(bytes, source)| json!({ "bytes": bytes, "source": source }));
    let config = &forecast.config;
    let mut out = json!({
        "device": forecast.device.device.to_string(),
        "device_name": forecast.device.name.known(),
        "planned_from_datasheet": forecast.planned.map(|sheet| sheet.name),
        "suite": config.suite.name,
        "model": config.model.name,
        "precision": config.suite.precision.to_string(),
        "resumed_cells": forecast.done,
        "nothing_left": forecast.nothing_left,
        "free_beside_weights": free,
        "graphs": forecast.graphs,
        "cpu_binding": forecast.cpu_binding,
        "warnings": forecast.gaps.iter().map(ToString::to_string).collect::<Vec<_>>(),
    });
    match &forecast.wall_time {
        _ if forecast.nothing_left => {}
        Err(why) => out["estimate"] = json!({ "unavailable": why }),
        Ok(wall_time) => {
            out["predicted"] = Value::from(wall_time.basis.clone());
            out["estimate"] = json!({
                "total_s": wall_time.total_s,
                "warmup_extra_s": wall_time.warmup_extra_s,
                "under_extra_s": wall_time.under_extra_s,
                "cells": wall_time.cells,
            });
            out["cells"] = wall_time
                .planned
                .iter()
                .map(|cell| {
                    let mut row = serde_json::to_value(cell.shape).unwrap_or(Value::Null);
                    row["predicted_step_s"] = Value::from(cell.step_s);
                    row["memory_bytes"] = Value::from(cell.memory.total_bytes());
                    row["skipped"] = cell.skipped.clone().map_or(Value::Null, Value::from);
                    row
                })
                .collect();
            out["serving"] = wall_time
                .serving
                .iter()
                .map(|serving| {
                    let mut row = json!({ "workload": serving.workload, "bound": serving.bound });
                    match &serving.rates {
                        Ok(rates) => {
                            row["rates"] =
                                rates.iter().map(|(label, rate)| json!({ "label": label, "per_s": rate })).collect();
                            if !serving.kept.is_empty() {
                                row["kept"] = Value::from(serving.kept.clone());
                            }
                            row["requests"] = Value::from(serving.requests);
                            row["expected_s"] = Value::from(serving.expected_s);
                        }
                        Err(why) => row["not_served"] = Value::from(why.clone()),
                    }
                    row
                })
                .collect();
        }
    }
    out
}

/// The planned cells, serving phase and wall time.
fn planned_text(wall_time: &WallTime) -> String {
    let mut out = String::new();
    let mut cells = Table::new(["CELL", "PREDICTED STEP", "MEMORY BEYOND WEIGHTS", "PLAN"]);
    for cell in &wall_time.planned {
        let planned = match &cell.skipped {
            Some(why) => format!("skip: it {why}"),
            None => "measure".to_owned(),
        };
        cells.row([cell.shape.to_string(), ms(cell.step_s), memory(cell.memory.total_bytes()), planned]);
    }
    if cells.is_empty() {
        let _ = writeln!(out, "cells: none left to measure");
    } else {
        let _ = writeln!(out, "cells, over step times predicted from {}:", wall_time.basis);
        out.push_str(&cells.text(240));
    }
    for serving in &wall_time.serving {
        let what = format!("serving {} under the {} bound", serving.workload, serving.bound);
        let _ = match &serving.rates {
            Ok(rates) => {
                let rates: Vec<String> = rates.iter().map(|(label, rate)| format!("{label} {rate:.3}/s")).collect();
                let kept = match &serving.kept[..] {
                    [] => String::new(),
                    [one] => format!(" (its {one} rate, served before the run was stopped, is kept)"),
                    many => format!(" (its {} rates, served before the run was stopped, are kept)", labels_words(many)),
                };
                if rates.is_empty() {
                    writeln!(out, "{what}: no planned rate left{kept}")
                } else {
                    writeln!(
                        out,
                        "{what}: {}{kept}; {} requests a rate, about {:.0} s",
                        rates.join(", "),
                        serving.requests,
                        serving.expected_s
                    )
                }
            }
            Err(why) => writeln!(out, "{what}: not served: {why}"),
        };
    }
    let _ = writeln!(out, "{wall_time}");
    let _ = writeln!(
        out,
        "the sweep adapts to the steps it measures: a run may measure other cells than these, planned over \
         predicted steps"
    );
    out
}

/// Rate labels in words, each once in the order first served, a label served more than once
/// (the step down's `under`) with its count: `bounded, over and 2 under`.
fn labels_words(labels: &[String]) -> String {
    let mut counted: Vec<(&str, usize)> = Vec::new();
    for label in labels {
        match counted.iter_mut().find(|(seen, _)| seen == label) {
            Some((_, n)) => *n += 1,
            None => counted.push((label, 1)),
        }
    }
    let words: Vec<String> =
        counted.iter().map(|&(label, n)| if n == 1 { label.to_owned() } else { format!("{n} {label}") }).collect();
    match words.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => words.concat(),
    }
}

/// `bytes` in GiB from 1 GiB up, else in MiB: a small cell's memory is not "0.00 GiB".
fn memory(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        gib(bytes)
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A workload a stop cut short is listed with the rates left, and the rates kept named.
    #[test]
    fn the_plan_lists_a_stopped_workloads_rates_left_and_those_kept() {
        let serving = |rates: &[(&str, f64)], kept: &[&str]| lynx_analysis::estimate::PlannedServing {
            workload: "short".to_owned(),
            bound: "server".to_owned(),
            rates: Ok(rates.iter().map(|&(l, r)| (l.to_owned(), r)).collect()),
            kept: kept.iter().map(|&l| l.to_owned()).collect(),
            requests: 48,
            expected_s: 20.0,
        };
        let wall_time = WallTime {
            total_s: 60.0,
            prepare_s: 5.0,
            under_extra_s: 0.0,
            warmup_extra_s: 0.0,
            cells: 0,
            basis: "a test".to_owned(),
            planned: Vec::new(),
            serving: vec![
                serving(&[("bounded", 4.9), ("over", 5.88)], &[]),
                serving(&[("over", 5.88)], &["bounded"]),
                serving(&[], &["bounded", "over"]),
                serving(&[], &["bounded", "over", "under", "under"]),
            ],
        };
        let text = planned_text(&wall_time);
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("serving")).collect();
        assert_eq!(
            lines,
            [
                "serving short under the server bound: bounded 4.900/s, over 5.880/s; 48 requests a rate, about 20 s",
                "serving short under the server bound: over 5.880/s (its bounded rate, served before the run was \
                 stopped, is kept); 48 requests a rate, about 20 s",
                "serving short under the server bound: no planned rate left (its bounded and over rates, served before \
                 the run was stopped, are kept)",
                "serving short under the server bound: no planned rate left (its bounded, over and 2 under rates, \
                 served before the run was stopped, are kept)",
            ]
        );
    }

    /// A node's devices run at once take the longest one's time, one after another the sum;
    /// a device without an estimate is said to be left out, not counted as nothing.
    #[test]
    fn a_nodes_estimate_is_its_longest_device_or_their_sum() {
        let estimate = |prepare_s, first_s, longest_s| Estimate { prepare_s, first_s, longest_s };
        let estimates = [estimate(20.0, 61.0, 130.0), estimate(20.0, 300.0, 400.0)];
        let line = |devices, one_at_a_time| {
            node_line(node_estimate(&estimates, one_at_a_time), estimates.len(), devices, one_at_a_time)
        };
        assert_eq!(
            line(2, false),
            "node: 2 device(s), all at once (each warms up once all have prepared), the longest of their estimates: \
             about 5 min (7 at the longest); an estimate, not a measurement"
        );
        assert!(line(2, true).contains("one after another, the sum of their estimates: about 7 min (9 at"));
        assert!(line(3, true).contains("; 1 device(s) without an estimate not counted;"));
        // One device prepares longer (a larger share of weights to draw, its burst probes), the
        // other measures longer: at once, the node waits for the first's preparation and then for
        // the second's rest, longer than either alone.
        let uneven = [estimate(200.0, 260.0, 300.0), estimate(20.0, 290.0, 320.0)];
        assert_eq!(node_estimate(&uneven, false), (200.0 + 270.0, 200.0 + 300.0));
        assert_eq!(node_estimate(&uneven, true), (550.0, 620.0));
    }
}
