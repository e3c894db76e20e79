//! A buyer's shortlist: latency-bounded throughput re-derived for the buyer's request shape and
//! bound from each verified result's measured cells, ranked by cost per million output tokens.
//! Nothing unverified is ranked.

use crate::derived::latency_bounded_from_cells;
use lynx_schema::config::LatencyBound;
use lynx_schema::derived::PriceInputs;
use lynx_schema::device::slug;
use lynx_schema::result::RunResult;
use lynx_schema::shortlist::{Entry, Excluded, Request, Shortlist};
use lynx_schema::value::{Finite, Reported};

/// One envelope as a buyer sees it: its file, and its verified result with the id of the key it
/// verified under, or why it is not believed (the kind in a word, and the reason).
pub type Listed = (String, Result<(RunResult, String), (String, String)>);

/// The shortlist of `listed` (verified by the caller) for `request`: every verified result of
/// the requested model, with latency-bounded throughput re-derived at the buyer's bound and
/// shape, ranked by cost; the rest listed with the reason.
pub fn rank(listed: Vec<Listed>, request: &Request) -> Shortlist {
    let asked = request.workload();
    let bound = LatencyBound {
        name: "buyer".to_owned(),
        ttft_p99_s: request.ttft_p99_s,
        tpot_p99_s: request.tpot_p99_s,
        source: None,
    };
    let mut ranked = Vec::new();
    let mut excluded = Vec::new();
    for (shown, verdict) in listed {
        let (result, key_id) = match verdict {
            Ok(verified) => verified,
            Err((kind, reason)) => {
                excluded.push(Excluded { file: shown, kind, reason });
                continue;
            }
        };
        if result.config.model.name != request.model {
            excluded.push(Excluded {
                file: shown,
                kind: "other model".to_owned(),
                reason: format!("measured {}, not {}", result.config.model.name, request.model),
            });
            continue;
        }
        if let Some(reason) = result.harness.test_hooks_reason() {
            excluded.push(Excluded { file: shown, kind: "test hooks".to_owned(), reason });
            continue;
        }
        let device = result.device.name_or_kind();
        let device_slug = slug(&device);
        let price = request.prices.iter().find(|(d, _)| slug(d) == device_slug).map(|(_, p)| *p);
        let inputs = PriceInputs {
            usd_per_device_hour: price.and_then(|p| Finite::new(p, "price").ok()),
            utilisation: Finite::new(request.utilisation, "utilisation")
                .unwrap_or_else(|_| Finite::new(1.0, "utilisation").expect("1 is finite")),
        };
        let suite = &result.config.suite;
        // The serving phase's measurement where it served this request shape (lengths drawn
        // alike: `Workload::same_lengths`) under exactly this bound.
        let served_here = result.serving.as_ref().and_then(|serving| {
            serving.served.iter().find(|s| {
                s.workload.same_lengths(&asked)
                    && s.bound.ttft_p99_s == bound.ttft_p99_s
                    && s.bound.tpot_p99_s == bound.tpot_p99_s
            })
        });
        let measured = served_here.and_then(|s| crate::derived::measured_at_published_rate(s, &inputs));
        // Beside a measurement, the simulation models the server that measured it, serving the
        // lengths it served (the same draws as the run's own simulated figure).
        let served = measured.as_ref().map(|m| m.mode);
        let workload = match (served_here, &measured) {
            (Some(s), Some(_)) => &s.workload,
            _ => &asked,
        };
        let point = latency_bounded_from_cells(
            (&result.cells, result.warmup.as_ref()),
            &suite.simulation,
            suite.seed,
            (workload, &bound, served),
            &inputs,
        );
        let failed_checks: Vec<String> =
            result.checks.iter().filter(|c| !c.passed).map(|c| c.name.to_string()).collect();
        let measured_part = measured_part(&result);
        ranked.push(Entry {
            file: shown,
            device,
            device_slug,
            run_id: result.run_id.clone(),
            key_id,
            usd_per_device_hour: price,
            point,
            measured,
            checks_passed: failed_checks.is_empty(),
            failed_checks,
            measured_part,
        });
    }
    // Cheapest first among priced entries with a figure; then unpriced by throughput; then
    // entries with no figure at the bound.
    let key = |e: &Entry| -> (u8, f64) {
        if let Some(m) = &e.measured {
            return match &m.usd_per_million_output_tokens {
                Reported::Known(cost) => (0, cost.get()),
                Reported::Unavailable { .. } => (1, -m.output_tok_per_s_per_device.get()),
            };
        }
        match &e.point {
            Reported::Known(p) => match &p.usd_per_million_output_tokens {
                Reported::Known(cost) => (0, cost.get()),
                Reported::Unavailable { .. } => (1, -p.output_tok_per_s_per_device.get()),
            },
            Reported::Unavailable { .. } => (2, 0.0),
        }
    };
    ranked.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    });
    Shortlist { request: request.clone(), ranked, excluded }
}

/// What part of the model a result measured, in words; `None` for the whole model.
fn measured_part(result: &RunResult) -> Option<String> {
    let suite = &result.config.suite;
    result.config.measured.as_ref().map(|part| {
        let mut words = Vec::new();
        if let Some(layers) = suite.scale.layers {
            words.push(format!("{layers} of {} layers, extrapolated to full depth", result.config.model.num_layers));
        }
        if suite.scale.tp > 1 {
            words.push(format!(
                "one device's shard of {}-way tensor parallelism (collectives not measured)",
                suite.scale.tp
            ));
        }
        if words.is_empty() {
            part.not_measured.join("; ")
        } else {
            words.join("; ")
        }
    })
}
