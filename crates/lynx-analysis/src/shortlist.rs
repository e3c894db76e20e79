//! A buyer's shortlist: latency-bounded throughput re-derived for the buyer's request shape and
//! bound from each verified result's measured cells, ranked by cost per million output tokens.
//! Nothing unverified is ranked.

use crate::derived::latency_bounded_from_cells;
use crate::stats::Sorted;
use lynx_schema::config::{LatencyBound, Workload};
use lynx_schema::derived::PriceInputs;
use lynx_schema::device::slug;
use lynx_schema::result::RunResult;
use lynx_schema::shortlist::{DeviceSummary, Entry, Excluded, Range, Request, Shortlist};
use lynx_schema::value::{Finite, Reported};

/// One envelope as a buyer sees it: its file, and its verified result with the id of the key it
/// verified under, or why it is not believed (the kind in a word, and the reason).
pub type Listed = (String, Result<(RunResult, String), (String, String)>);

/// The shortlist of `listed` (verified by the caller) for `request`: every verified result of
/// the requested model, with latency-bounded throughput re-derived at the buyer's bound and
/// shape, ranked by cost; the rest listed with the reason. Each result's figure is derived on
/// its own thread, up to the host's cores (a figure is a simulation of thousands of requests:
/// about 0.5–2 s for a CPU result), and the listing's order does not depend on which finished
/// first.
pub fn rank(listed: Vec<Listed>, request: &Request) -> Shortlist {
    let asked = request.workload();
    let bound = LatencyBound {
        name: "buyer".to_owned(),
        ttft_p99_s: request.ttft_p99_s,
        tpot_p99_s: request.tpot_p99_s,
        source: None,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let judged = in_parallel(listed, cores, |(shown, verdict)| judge(shown, verdict, request, &asked, &bound));
    let mut ranked = Vec::new();
    let mut excluded = Vec::new();
    for entry in judged {
        match entry {
            Ok(entry) => ranked.push(entry),
            Err(left_out) => excluded.push(left_out),
        }
    }
    // Entries with no figure at the bound last.
    let key = |e: &Entry| ranked_by(e).map_or((2, 0.0), |(tok_per_s, cost, _)| order(tok_per_s, cost));
    ranked.sort_by(|a, b| in_order(key(a), key(b)));
    let devices = by_device(&ranked);
    Shortlist { request: request.clone(), ranked, excluded, devices }
}

/// The figures an entry is ranked by: output tok/s per device and, where priced, the cost of a
/// million output tokens, and whether they were measured (else simulated); `None` without a
/// figure.
fn ranked_by(entry: &Entry) -> Option<(f64, Option<f64>, bool)> {
    let cost = |c: &Reported<Finite>| c.known().map(|c| c.get());
    if let Some(m) = &entry.measured {
        return Some((m.output_tok_per_s_per_device.get(), cost(&m.usd_per_million_output_tokens), true));
    }
    let p = entry.point.known()?;
    Some((p.output_tok_per_s_per_device.get(), cost(&p.usd_per_million_output_tokens), false))
}

/// Where a figure ranks: cheapest first among the priced, then the unpriced by throughput.
fn order(tok_per_s: f64, usd_per_million: Option<f64>) -> (u8, f64) {
    usd_per_million.map_or((1, -tok_per_s), |cost| (0, cost))
}

fn in_order(a: (u8, f64), b: (u8, f64)) -> std::cmp::Ordering {
    a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
}

/// The smallest, median and largest of `values`, by the project's one median
/// ([`Sorted::median`]); `None` where there are none (or one is not finite).
fn range(values: Vec<f64>) -> Option<Range> {
    let sorted = Sorted::new(values).ok()?;
    Some(Range { min: sorted.min(), median: sorted.median(), max: sorted.max() })
}

/// The `ranked` entries with a figure, one summary per device, precision and part measured,
/// cheapest median first among the priced, then by median throughput (as the ranking orders
/// its entries).
fn by_device(ranked: &[Entry]) -> Vec<DeviceSummary> {
    type Key = (String, Option<lynx_schema::config::Precision>, Option<String>);
    type Ranked<'a> = (&'a Entry, (f64, Option<f64>, bool));
    let mut groups: Vec<(Key, Vec<Ranked>)> = Vec::new();
    for (entry, figures) in ranked.iter().filter_map(|e| Some((e, ranked_by(e)?))) {
        let key = (entry.device_slug.clone(), entry.precision, entry.measured_part.clone());
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push((entry, figures)),
            None => groups.push((key, vec![(entry, figures)])),
        }
    }
    let mut devices: Vec<DeviceSummary> = groups
        .into_iter()
        .filter_map(|((device_slug, precision, measured_part), members)| {
            let costs: Option<Vec<f64>> = members.iter().map(|(_, f)| f.1).collect();
            let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            Some(DeviceSummary {
                device: members[0].0.device.clone(),
                device_slug,
                precision: precision?,
                measured_part,
                results: count(members.len()),
                checks_passed: count(members.iter().filter(|(e, _)| e.checks_passed).count()),
                measured: count(members.iter().filter(|(_, f)| f.2).count()),
                output_tok_per_s_per_device: range(members.iter().map(|(_, f)| f.0).collect())?,
                usd_per_million_output_tokens: costs.and_then(range),
            })
        })
        .collect();
    let key = |d: &DeviceSummary| {
        order(d.output_tok_per_s_per_device.median, d.usd_per_million_output_tokens.map(|cost| cost.median))
    };
    devices.sort_by(|a, b| in_order(key(a), key(b)));
    devices
}

/// One envelope of the listing: its entry, with the figure re-derived at the buyer's `bound`
/// for the `asked` lengths, or why it is left out.
fn judge(
    shown: String,
    verdict: Result<(RunResult, String), (String, String)>,
    request: &Request,
    asked: &Workload,
    bound: &LatencyBound,
) -> Result<Entry, Excluded> {
    let (result, key_id) = match verdict {
        Ok(verified) => verified,
        Err((kind, reason)) => return Err(Excluded { file: shown, kind, reason }),
    };
    if result.config.model.name != request.model {
        return Err(Excluded {
            file: shown,
            kind: "other model".to_owned(),
            reason: format!("measured {}, not {}", result.config.model.name, request.model),
        });
    }
    let precision = result.config.suite.precision;
    if let Some(asked) = request.precision.filter(|&asked| asked != precision) {
        return Err(Excluded {
            file: shown,
            kind: "other precision".to_owned(),
            reason: format!("measured at {precision}, not {asked}"),
        });
    }
    if let Some(reason) = result.harness.test_hooks_reason() {
        return Err(Excluded { file: shown, kind: "test hooks".to_owned(), reason });
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
            s.workload.same_lengths(asked)
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
        _ => asked,
    };
    let point = latency_bounded_from_cells(
        (&result.cells, result.warmup.as_ref()),
        &suite.simulation,
        suite.seed,
        (workload, bound, served),
        &inputs,
    );
    let failed_checks: Vec<String> = result.failed_checks().iter().map(ToString::to_string).collect();
    let measured_part = measured_part(&result);
    Ok(Entry {
        file: shown,
        device,
        device_slug,
        run_id: result.run_id.clone(),
        precision: Some(precision),
        key_id,
        usd_per_device_hour: price,
        point,
        measured,
        checks_passed: failed_checks.is_empty(),
        failed_checks,
        measured_part,
    })
}

/// `f` over `items` on up to `threads` threads, in `items`' order. Each thread takes every n-th
/// item, so that results of unequal cost spread over the threads.
fn in_parallel<T: Send, U: Send>(items: Vec<T>, threads: usize, f: impl Fn(T) -> U + Sync) -> Vec<U> {
    let threads = threads.min(items.len());
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let total = items.len();
    let mut shares: Vec<Vec<(usize, T)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, item) in items.into_iter().enumerate() {
        shares[i % threads].push((i, item));
    }
    let f = &f;
    let mut done: Vec<(usize, U)> = std::thread::scope(|scope| {
        let running: Vec<_> = shares
            .into_iter()
            .map(|share| scope.spawn(move || share.into_iter().map(|(i, item)| (i, f(item))).collect::<Vec<_>>()))
            .collect();
        running
            .into_iter()
            .flat_map(|thread| thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    debug_assert_eq!(done.len(), total);
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, u)| u).collect()
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

#[cfg(test)]
mod tests {
    use super::{in_parallel, range};

    #[test]
    fn a_range_is_the_smallest_the_median_and_the_largest() {
        let r = range(vec![4.0, 1.0, 3.0]).unwrap();
        assert_eq!((r.min, r.median, r.max), (1.0, 3.0, 4.0));
        // An even count's median is the mean of its middle two.
        let r = range(vec![8.0, 2.0, 4.0, 1.0]).unwrap();
        assert_eq!((r.min, r.median, r.max), (1.0, 3.0, 8.0));
        let r = range(vec![5.0]).unwrap();
        assert_eq!((r.min, r.median, r.max), (5.0, 5.0, 5.0));
        assert!(range(Vec::new()).is_none());
    }

    #[test]
    fn work_shared_over_threads_comes_back_in_the_listings_order() {
        // Items of very unequal cost, so that threads finish out of order.
        let cost = |i: u64| (0..(i % 7) * 20_000).fold(i, |acc, k| acc.wrapping_mul(31).wrapping_add(k));
        let items: Vec<u64> = (0..37).collect();
        let alone: Vec<u64> = items.iter().map(|&i| cost(i)).collect();
        for threads in [0, 1, 2, 4, 64] {
            assert_eq!(in_parallel(items.clone(), threads, cost), alone, "{threads} threads");
        }
        assert!(in_parallel(Vec::<u64>::new(), 4, cost).is_empty());
    }
}
