//! `lynx shortlist`: verify every result against the trusted keys, re-derive latency-bounded
//! throughput for the buyer's request shape and bound from each verified result's measured
//! cells, and rank by cost per million output tokens. Nothing unverified is ranked.

use crate::envelope::{verify, Envelope, VerifyError};
use lynx_core::config::{LatencyBound, Workload};
use lynx_core::derived::{latency_bounded_from_cells, PriceInputs};
use lynx_core::device::slug;
use lynx_core::shortlist::{Entry, Excluded, Request, Shortlist};
use lynx_core::value::{Finite, Reported};
use p256::ecdsa::VerifyingKey;
use std::path::{Path, PathBuf};

/// Every `*.intoto.json` under `dirs` (files given directly are taken as they are), sorted.
pub fn find_envelopes(dirs: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let mut stack: Vec<PathBuf> = dirs.to_vec();
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                stack.push(entry?.path());
            }
        } else if path.to_string_lossy().ends_with(".intoto.json") {
            found.push(path);
        }
    }
    found.sort();
    Ok(found)
}

/// Verify `path` against whichever trusted key its signature names: the error says whether it
/// is unsigned, signed by a key not trusted, or fails verification under a trusted key.
pub(crate) fn verify_trusted(
    path: &Path,
    keys: &[VerifyingKey],
) -> Result<(crate::Verified, &'static str), (String, String)> {
    let named: Vec<String> = std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<Envelope>(&bytes).ok())
        .map(|e| e.signatures.into_iter().map(|s| s.keyid).collect())
        .unwrap_or_default();
    let trusted = keys.iter().find(|k| named.contains(&crate::keys::key_id(k)));
    match trusted {
        Some(key) => verify(path, key).map(|v| (v, "")).map_err(|e| ("rejected".to_owned(), e.to_string())),
        None => match keys.first().map(|key| verify(path, key)) {
            Some(Err(VerifyError::Unsigned(reason))) => Err(("unsigned".to_owned(), reason)),
            Some(Err(e @ (VerifyError::Read(_) | VerifyError::Envelope(_) | VerifyError::Base64(_)))) => {
                Err(("rejected".to_owned(), e.to_string()))
            }
            _ => Err((
                "untrusted".to_owned(),
                format!(
                    "signed by {}, not one of the {} trusted keys",
                    if named.is_empty() { "no key".to_owned() } else { format!("key {}", named.join(", ")) },
                    keys.len()
                ),
            )),
        },
    }
}

/// The shortlist of the results in `files` for `request`, trusting `keys`.
pub fn shortlist(files: &[PathBuf], keys: &[VerifyingKey], request: &Request) -> Shortlist {
    let workload = Workload { name: "request".to_owned(), isl: request.isl, osl: request.osl };
    let bound = LatencyBound {
        name: "buyer".to_owned(),
        ttft_p99_s: request.ttft_p99_s,
        tpot_p99_s: request.tpot_p99_s,
        source: None,
    };
    let mut ranked = Vec::new();
    let mut excluded = Vec::new();
    for file in files {
        let shown = file.display().to_string();
        let (verified, _) = match verify_trusted(file, keys) {
            Ok(v) => v,
            Err((kind, reason)) => {
                excluded.push(Excluded { file: shown, kind, reason });
                continue;
            }
        };
        let result = verified.result;
        if result.config.model.name != request.model {
            excluded.push(Excluded {
                file: shown,
                kind: "other model".to_owned(),
                reason: format!("measured {}, not {}", result.config.model.name, request.model),
            });
            continue;
        }
        let device = result.device.name.known().cloned().unwrap_or_else(|| result.device.device.to_string());
        let device_slug = slug(&device);
        let price = request.prices.iter().find(|(d, _)| slug(d) == device_slug).map(|(_, p)| *p);
        let inputs = PriceInputs {
            usd_per_device_hour: price.and_then(|p| Finite::new(p, "price").ok()),
            utilisation: Finite::new(request.utilisation, "utilisation")
                .unwrap_or_else(|_| Finite::new(1.0, "utilisation").expect("1 is finite")),
        };
        let suite = &result.config.suite;
        let point =
            latency_bounded_from_cells(&result.cells, &suite.simulation, suite.seed, &workload, &bound, &inputs);
        let failed_checks: Vec<String> = result.checks.iter().filter(|c| !c.passed).map(|c| c.name.clone()).collect();
        let measured_part = result.config.measured.as_ref().map(|part| {
            let mut words = Vec::new();
            if let Some(layers) = suite.scale.layers {
                words
                    .push(format!("{layers} of {} layers, extrapolated to full depth", result.config.model.num_layers));
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
        });
        ranked.push(Entry {
            file: shown,
            device,
            device_slug,
            run_id: result.run_id.clone(),
            key_id: verified.key_id,
            usd_per_device_hour: price,
            point,
            checks_passed: failed_checks.is_empty(),
            failed_checks,
            measured_part,
        });
    }
    // Cheapest first among priced entries with a figure; then unpriced by throughput; then
    // entries with no figure at the bound.
    let key = |e: &Entry| -> (u8, f64) {
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
