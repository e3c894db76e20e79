//! Two results side by side (`lynx compare`, `lynx reproduce`): every figure both have, the
//! ratio of the second to the first, and whether the second lies within the first's own spread.

use lynx_schema::compare::{Comparison, Row};
use lynx_schema::result::{CellStatus, RunResult};
use lynx_schema::roofline::ProbeKind;
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
    differ("lynx", a.harness.lynx_version.clone(), b.harness.lynx_version.clone());
    differ("lynx commit", a.harness.git_commit.to_string(), b.harness.git_commit.to_string());
    differ("libtorch", a.harness.libtorch_runtime_version.to_string(), b.harness.libtorch_runtime_version.to_string());
    differ("libtorch threads", a.harness.torch_threads.to_string(), b.harness.torch_threads.to_string());
    differ("configuration digest", a.config.sha256.clone(), b.config.sha256.clone());
    out
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
        rows.push(Row {
            figure: format!("{}: median step (s)", cell.shape),
            higher_is_better: false,
            first: t,
            second: u,
            ratio: u / t,
            within_spread: cell.full_depth.is_none().then_some(u >= low && u <= high),
        });
        if let (Some(x), Some(y)) = (cell.tok_per_s_per_device, other.tok_per_s_per_device) {
            rows.push(Row {
                figure: format!("{}: tok/s/device", cell.shape),
                higher_is_better: true,
                first: x.get(),
                second: y.get(),
                ratio: y.get() / x.get(),
                within_spread: cell.full_depth.is_none().then_some(u >= low && u <= high),
            });
        }
    }
    for cell in b.cells.iter().filter(|c| c.status == CellStatus::Ok) {
        if !a.cells.iter().any(|c| c.shape == cell.shape && c.status == CellStatus::Ok) {
            unmatched.push(format!("{} (only in {second})", cell.shape));
        }
    }
    if let (Some(da), Some(db)) = (&a.derived, &b.derived) {
        for lb in &da.latency_bounded {
            let other = db.latency_bounded.iter().find(|o| {
                o.workload == lb.workload && o.bound.name == lb.bound.name && o.bound.tpot_p99_s == lb.bound.tpot_p99_s
            });
            match (other.map(|o| &o.point), &lb.point) {
                (Some(Reported::Known(q)), Reported::Known(p)) => rows.push(Row {
                    figure: format!("{} under {}: output tok/s/device", lb.workload, lb.bound.name),
                    higher_is_better: true,
                    first: p.output_tok_per_s_per_device.get(),
                    second: q.output_tok_per_s_per_device.get(),
                    ratio: q.output_tok_per_s_per_device.get() / p.output_tok_per_s_per_device.get(),
                    within_spread: None,
                }),
                _ => unmatched.push(format!("{} under {}: latency-bounded throughput", lb.workload, lb.bound.name)),
            }
        }
    }
    if let (Some(ra), Some(rb)) = (&a.roofline, &b.roofline) {
        for probe in &ra.probes {
            let Some(x) = probe.value.known() else { continue };
            let other =
                rb.probes.iter().find(|p| p.name == probe.name && p.dtype == probe.dtype && p.phase == probe.phase);
            let Some(y) = other.and_then(|p| p.value.known()) else { continue };
            let unit = if probe.kind == ProbeKind::Bandwidth { "bytes/s" } else { "FLOP/s" };
            rows.push(Row {
                figure: format!("roofline {} {} {} ({unit})", probe.name, probe.dtype, probe.phase),
                higher_is_better: true,
                first: x.get(),
                second: y.get(),
                ratio: y.get() / x.get(),
                within_spread: None,
            });
        }
    }
    Comparison { first: first.to_owned(), second: second.to_owned(), differences: differences(a, b), rows, unmatched }
}
