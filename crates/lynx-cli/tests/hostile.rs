//! Signed results whose numbers a hostile (or broken) publisher chose: every command that reads
//! a result answers with its figures or with one line, and never panics or hangs.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The published result the mutations start from: one with every part a result can hold
/// (cells, roofline, derived figures, a serving phase with its steady states and window).
const PUBLISHED: &str = "results/amd-epyc/20261203T010753Z-dd076e65/20261203T010753Z-dd076e65.json";

/// A small deterministic generator (splitmix64): the same mutations on every run.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What a mutation puts in place of one number: values at the edges of what each type holds.
fn hostile_number(original: &Value, draw: &mut Draw) -> Value {
    if original.is_u64() || original.is_i64() {
        // The largest every integer field holds (some are i32).
        let largest = i32::MAX as u64;
        match draw.below(4) {
            0 => Value::from(0),
            1 => Value::from(1),
            2 => Value::from(largest),
            _ => Value::from(original.as_u64().unwrap_or(1).saturating_mul(1000).min(largest)),
        }
    } else {
        let x = original.as_f64().unwrap_or(1.0);
        match draw.below(8) {
            0 => Value::from(0.0),
            1 => Value::from(-x),
            2 => Value::from(1e300),
            3 => Value::from(-1e300),
            4 => Value::from(1e-300),
            5 => Value::from(x * 1e6),
            6 => Value::from(x * 1e-6),
            _ => Value::from(f64::MIN_POSITIVE),
        }
    }
}

/// `value` with about one number in `one_in` replaced by a hostile one, and about one array in
/// `one_in` emptied or cut to its first element.
fn mutate(value: &mut Value, draw: &mut Draw, one_in: u64) {
    match value {
        Value::Number(_) if draw.below(one_in) == 0 => *value = hostile_number(value, draw),
        Value::Array(items) => {
            if draw.below(one_in) == 0 {
                items.truncate(draw.below(2) as usize);
            }
            items.iter_mut().for_each(|item| mutate(item, draw, one_in));
        }
        Value::Object(fields) => fields.values_mut().for_each(|field| mutate(field, draw, one_in)),
        _ => {}
    }
}

/// Beside every output tok/s in `value`, a steady part's: alternately a figure and why there is
/// none.
fn with_steady_parts(value: &mut Value, count: &mut u32) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|item| with_steady_parts(item, count)),
        Value::Object(fields) => {
            if let Some(tok) = fields.get("output_tok_per_s_per_device").and_then(Value::as_f64) {
                *count += 1;
                let steady = if count.is_multiple_of(2) {
                    serde_json::json!({"unavailable": "no steady part: the arrivals spanned 3.0 s"})
                } else {
                    Value::from(tok * 1.07)
                };
                fields.insert("steady_output_tok_per_s_per_device".to_owned(), steady);
            }
            fields.values_mut().for_each(|field| with_steady_parts(field, count));
        }
        _ => {}
    }
}

/// Every number in `value` replaced by `f(number)`.
fn every_number(value: &mut Value, f: &dyn Fn(&Value) -> Value) {
    match value {
        Value::Number(_) => *value = f(value),
        Value::Array(items) => items.iter_mut().for_each(|item| every_number(item, f)),
        Value::Object(fields) => fields.values_mut().for_each(|field| every_number(field, f)),
        _ => {}
    }
}

/// `json` as a result signed with the test key, written as `<stem>.json` beside its samples
/// file (already there); `None` where it is not a result the schema reads (refused before
/// any figure is read: the envelope tests cover that).
fn sign(json: &Value, dir: &Path, stem: &str) -> Option<PathBuf> {
    let result: lynx_schema::result::RunResult = match serde_json::from_value(json.clone()) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{stem}: {e}");
            return None;
        }
    };
    let path = dir.join(format!("{stem}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&result).unwrap()).unwrap();
    let key = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let envelope = lynx_attest::seal(&path, &result, Some(&key)).ok()?;
    let envelope_path = lynx_attest::envelope_path(&path);
    std::fs::write(&envelope_path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    Some(envelope_path)
}

/// `lynx args` within `limit`: its exit code and stderr, or a failure naming the command where
/// it panicked, hung, or said more than one line on bad input.
fn answers(args: &[&str], limit: Duration) -> Result<i32, String> {
    // Into a file, not a pipe: a command that says much would fill a pipe nobody reads yet and
    // wait, and read as hung.
    let stderr_file = tempfile::tempfile().unwrap();
    let mut child = lynx_command()
        .args(args)
        .stdout(Stdio::null())
        .stderr(stderr_file.try_clone().unwrap())
        .spawn()
        .map_err(|e| format!("lynx {args:?}: {e}"))?;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("lynx {args:?} ran past {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    let mut stderr_file = stderr_file;
    std::io::Seek::rewind(&mut stderr_file).unwrap();
    std::io::Read::read_to_string(&mut stderr_file, &mut stderr).unwrap();
    let code = status.code().unwrap_or(-1);
    if stderr.contains("panicked") || !(0..=2).contains(&code) {
        return Err(format!("lynx {args:?} exit {code}: {stderr}"));
    }
    if code == 2 && stderr.trim_end().lines().count() != 1 {
        return Err(format!("lynx {args:?} exit 2 with more than one line: {stderr}"));
    }
    Ok(code)
}

#[test]
fn hostile_numbers_in_a_signed_result_get_figures_or_one_line_never_a_panic() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let published_path = PathBuf::from(repo_path(PUBLISHED));
    let mut published: Value = serde_json::from_slice(&std::fs::read(&published_path).unwrap()).unwrap();
    // Every output tok/s given its steady part's, as results record it now (the published one
    // predates the field): a figure, or one in two the reason there is none.
    with_steady_parts(&mut published, &mut 0);
    // Weights read from a checkpoint, as results record them now (the published run drew its
    // own), for the mutations to reach the counts, with a digest that is not one.
    published["config"]["weights"] = serde_json::json!({
        "origin": "checkpoint", "dir": "/lab/\u{1b}[2J", "files": [["model.safetensors", 14_029_824]],
        "read": {"tensors": 21, "bytes": 14_029_824, "sha256": "\u{1b}[31m<script>"},
    });
    // And every served rate the simulation replaying the loop's steps and a batch off the
    // table's line, as results record them now (the published one predates the fields), for the
    // mutations to reach them too.
    for served in published["serving"]["served"].as_array_mut().unwrap() {
        for rate in served["rates"].as_array_mut().into_iter().flatten() {
            rate["at_loop_replay"] = rate["at_loop_steps"].clone();
            assert!(rate["at_loop_replay"].is_object(), "{rate}");
            rate["batches_off_line"] = serde_json::json!([{"prefill": false, "batch": 3, "steps": 225, "pace": 1.32}]);
        }
    }
    let samples_path = published_path.with_file_name(published["telemetry"]["samples_file"].as_str().unwrap());
    // The signed samples file is mutated with the result: each telemetry sample given a power
    // and an energy counter (as a GPU's are) for the mutations to reach.
    let samples: Vec<Value> = std::fs::read_to_string(&samples_path)
        .unwrap()
        .lines()
        .map(|line| {
            let mut sample: Value = serde_json::from_str(line).unwrap();
            if sample["kind"] == "telemetry" {
                let t = sample["t_s"].as_f64().unwrap();
                sample["power_w"] = Value::from(400.0 + t.sin());
                sample["energy_j"] = Value::from(400.0 * t);
            }
            sample
        })
        .collect();

    // Whole-result mutations, then seeded scattered ones; and the samples in reverse order.
    let mut cases: Vec<(String, Value, Vec<Value>)> =
        vec![("reversed".to_owned(), published.clone(), samples.iter().rev().cloned().collect())];
    for (name, f) in [
        ("zero", &(|_: &Value| Value::from(0)) as &dyn Fn(&Value) -> Value),
        ("one", &|_: &Value| Value::from(1)),
        ("largest", &|v: &Value| if v.is_f64() { Value::from(1e300) } else { Value::from(i32::MAX) }),
        ("negative", &|v: &Value| if v.is_f64() { Value::from(-v.as_f64().unwrap()) } else { v.clone() }),
        ("tiny", &|v: &Value| if v.is_f64() { Value::from(1e-300) } else { Value::from(1) }),
    ] {
        let (mut json, mut samples) = (published.clone(), samples.clone());
        every_number(&mut json, f);
        samples.iter_mut().for_each(|sample| every_number(sample, f));
        cases.push((name.to_owned(), json, samples));
    }
    for seed in 0..24u64 {
        let (mut json, mut samples) = (published.clone(), samples.clone());
        let (mut draw, one_in) = (Draw(seed), [5, 20, 100][seed as usize % 3]);
        mutate(&mut json, &mut draw, one_in);
        samples.iter_mut().for_each(|sample| mutate(sample, &mut draw, one_in));
        cases.push((format!("seed{seed}"), json, samples));
    }

    let mut failures = Vec::new();
    let mut signed = 0;
    for (name, json, samples) in cases {
        signed += u32::from(read_by_every_command(&name, json, &samples, &mut failures));
    }
    assert!(signed >= 15, "only {signed} mutations were results the schema reads");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

/// `json` signed (with `samples` beside it) and given to every command that reads a result:
/// whether the schema read it, and each command that panicked, hung or said more than one line
/// of bad input added to `failures`.
fn read_by_every_command(name: &str, mut json: Value, samples: &[Value], failures: &mut Vec<String>) -> bool {
    let (pubkey, limit) = (pubkey(), Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    json["telemetry"]["samples_file"] = Value::from(format!("{name}.samples.jsonl"));
    let lines: Vec<String> = samples.iter().map(Value::to_string).collect();
    std::fs::write(dir.path().join(format!("{name}.samples.jsonl")), lines.join("\n") + "\n").unwrap();
    let Some(envelope) = sign(&json, dir.path(), name) else { return false };
    let envelope = envelope.to_str().unwrap();
    let dir_arg = dir.path().to_str().unwrap();
    let (site, collected) = (dir.path().join("site"), dir.path().join("collected"));
    let commands: Vec<Vec<&str>> = vec![
        vec!["verify", envelope, "--pubkey", &pubkey],
        vec!["export", envelope, "--pubkey", &pubkey, "--format", "markdown"],
        vec!["export", envelope, "--pubkey", &pubkey, "--format", "csv"],
        vec!["compare", envelope, envelope, "--pubkey", &pubkey],
        vec!["collect", envelope, "--into", collected.to_str().unwrap(), "--pubkey", &pubkey],
        vec!["report", dir_arg, "--out", site.to_str().unwrap(), "--pubkey", &pubkey],
        vec![
            "shortlist",
            dir_arg,
            "--workload",
            "lynx-ref-small:128/16",
            "--ttft-p99",
            "2s",
            "--tpot-p99",
            "200ms",
            "--pubkey",
            &pubkey,
        ],
    ];
    for args in &commands {
        match answers(args, limit) {
            Ok(code) => eprintln!("{name}: lynx {} exit {code}", args[0]),
            Err(failure) => failures.push(format!("{name}: {failure}")),
        }
    }
    true
}

/// A signed result whose model shape no model file could hold (sizes whose parameter and byte
/// counts overflow 64 bits, experts whose count overflows 32): the commands that read results
/// answer without a panic (the debug build checks every overflow).
#[test]
fn a_signed_result_of_an_impossible_model_shape_never_panics() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let published_path = PathBuf::from(repo_path(PUBLISHED));
    let published: Value = serde_json::from_slice(&std::fs::read(&published_path).unwrap()).unwrap();
    let samples_path = published_path.with_file_name(published["telemetry"]["samples_file"].as_str().unwrap());
    let samples: Vec<Value> =
        std::fs::read_to_string(&samples_path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let most = Value::from(u32::MAX);
    let mut huge = published.clone();
    for key in ["vocab_size", "hidden_size", "num_layers"] {
        huge["config"]["model"][key] = most.clone();
    }
    huge["config"]["model"]["mlp"]["intermediate_size"] = most.clone();
    huge["config"]["model"]["attention"]["head_dim"] = Value::from(u32::MAX - 1);
    let mut experts = published.clone();
    experts["config"]["model"]["moe"] = serde_json::json!({
        "num_experts": u32::MAX, "experts_per_token": 2, "intermediate_size": u32::MAX,
        "shared_experts": u32::MAX, "first_dense_layers": 1, "router": {"kind": "softmax"}
    });
    let mut latent = published.clone();
    latent["config"]["model"]["attention"] = serde_json::json!({
        "kind": "mla", "num_heads": u32::MAX, "q_lora_rank": u32::MAX, "kv_lora_rank": u32::MAX,
        "qk_nope_head_dim": u32::MAX, "qk_rope_head_dim": u32::MAX, "v_head_dim": u32::MAX, "rope_theta": 1e4
    });
    let mut failures = Vec::new();
    for (name, json) in [("huge", huge), ("experts", experts), ("latent", latent)] {
        assert!(read_by_every_command(name, json, &samples, &mut failures), "{name}: the schema reads it");
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
