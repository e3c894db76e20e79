//! What is done with signed results: `lynx shortlist`, `collect`, `report`, `export`, `compare`, `reproduce`, and the published record under results/.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A copy of the run at `result_path` as another device's result: `name` for the device, step
/// times multiplied by `slower`, written as `<stem>.json` with its samples file into `dir`, and
/// sealed with `key` (unsigned when `None`). Returns the envelope's path.
fn publish_as(
    result_path: &Path,
    dir: &Path,
    stem: &str,
    name: &str,
    slower: f64,
    key: Option<&lynx_attest::SigningKey>,
) -> PathBuf {
    let rename_and_slow = |json: &mut Value| {
        json["device"]["name"] = Value::from(name);
        for cell in json["cells"].as_array_mut().unwrap() {
            if let Some(step) = cell["step_time"].as_object_mut() {
                for field in ["median_s", "p90_s", "p99_s", "min_s", "max_s"] {
                    let t = step[field].as_f64().unwrap();
                    step.insert(field.to_owned(), Value::from(t * slower));
                }
            }
        }
    };
    publish_edited(result_path, dir, stem, rename_and_slow, key)
}

/// The result at `result_path`, changed by `edit`, written into `dir` as `stem` with its samples
/// and sealed (signed by `key`, or unsigned): its envelope's path.
fn publish_edited(
    result_path: &Path,
    dir: &Path,
    stem: &str,
    edit: impl FnOnce(&mut Value),
    key: Option<&lynx_attest::SigningKey>,
) -> PathBuf {
    let mut json: Value = serde_json::from_slice(&std::fs::read(result_path).unwrap()).unwrap();
    edit(&mut json);
    let samples = result_path.with_file_name(json["telemetry"]["samples_file"].as_str().unwrap());
    let samples_name = format!("{stem}.samples.jsonl");
    std::fs::copy(samples, dir.join(&samples_name)).unwrap();
    json["telemetry"]["samples_file"] = Value::from(samples_name);
    let result: lynx_schema::result::RunResult = serde_json::from_value(json).unwrap();
    let path = dir.join(format!("{stem}.json"));
    std::fs::write(&path, serde_json::to_vec_pretty(&result).unwrap()).unwrap();
    let envelope = lynx_attest::seal(&path, &result, key).unwrap();
    let envelope_path = lynx_attest::envelope_path(&path);
    std::fs::write(&envelope_path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    envelope_path
}

#[test]
fn shortlist_ranks_verified_results_by_cost_and_lists_the_rest_with_reasons() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_models, _out, measured) = measured_run();

    let trusted = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    lynx_attest::generate(other_dir.path(), false).unwrap();
    let untrusted = lynx_attest::read_signing_key(&other_dir.path().join("lynx.key")).unwrap();
    let published = tempfile::tempdir().unwrap();
    let dir = published.path();
    let hostile = "<script>document.body.setAttribute('data-pwned','1')</script>\
                   <img src=x onerror=\"document.body.setAttribute('data-pwned','2')\">\u{1b}[2J";
    publish_as(&measured, dir, "alpha", "Alpha GPU", 1.0, Some(&trusted));
    publish_as(&measured, dir, "beta", "Beta GPU", 3.0, Some(&trusted));
    publish_as(&measured, dir, "hostile", hostile, 1.0, Some(&trusted));
    let tampered = publish_as(&measured, dir, "tampered", "Tampered GPU", 0.1, Some(&trusted));
    let samples = dir.join("tampered.samples.jsonl");
    let mut bytes = std::fs::read(&samples).unwrap();
    bytes.extend_from_slice(b"{}\n");
    std::fs::write(&samples, bytes).unwrap();
    publish_as(&measured, dir, "unsigned", "Unsigned GPU", 0.1, None);
    publish_as(&measured, dir, "untrusted", "Untrusted GPU", 0.1, Some(&untrusted));
    // Deeply nested JSON where an envelope should be: refused unparsed, never a crash.
    std::fs::write(dir.join("nested.intoto.json"), format!("{}{}", "[".repeat(100_000), "]".repeat(100_000))).unwrap();
    // A device name of a megabyte, signed: ranked, but shown cut short.
    publish_as(&measured, dir, "huge", &"H".repeat(1 << 20), 1.0, Some(&trusted));

    let dir_arg = dir.to_str().unwrap();
    let args = |format: &str| {
        vec![
            "shortlist".to_owned(),
            dir_arg.to_owned(),
            "--workload".to_owned(),
            "test-small:256/64".to_owned(),
            "--ttft-p99".to_owned(),
            "2s".to_owned(),
            "--tpot-p99".to_owned(),
            "200ms".to_owned(),
            "--price".to_owned(),
            "Alpha GPU=2.0,beta-gpu=1.0".to_owned(),
            "--price".to_owned(),
            // Its name holds commas, the price list's separator: priced by its slug.
            format!("{}=5.0", lynx_schema::device::slug(hostile)),
            "--utilisation".to_owned(),
            "0.5".to_owned(),
            "--pubkey".to_owned(),
            pubkey(),
            "--format".to_owned(),
            format.to_owned(),
        ]
    };
    let run = |format: &str| {
        let output = lynx_command().args(args(format)).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let list: Value = serde_json::from_str(&run("json")).unwrap();
    let ranked = list["ranked"].as_array().unwrap();
    let devices: Vec<&str> = ranked.iter().map(|e| e["device"].as_str().unwrap()).collect();
    // The three priced devices first, in whichever order their costs put them (Beta's steps
    // are three times Alpha's, so how its cost compares with the hostile one's five-fold price
    // depends on how fast this host ran the measured run); the unpriced one after them.
    let mut priced: Vec<&str> = devices[..3].to_vec();
    priced.sort_unstable();
    let mut expected = vec!["Alpha GPU", "Beta GPU", hostile];
    expected.sort_unstable();
    let shown: Vec<String> = devices.iter().map(|d| d.chars().take(40).collect()).collect();
    assert!(priced == expected, "the priced devices do not rank first: {shown:?}");
    assert_eq!(devices[3].len(), 1 << 20, "the unpriced device ranks after the priced ones");
    let price_of = |device: &str| match device {
        "Alpha GPU" => 2.0,
        "Beta GPU" => 1.0,
        _ => 5.0,
    };
    // The ranking matches costs computed by hand from the same figures, cheapest first.
    let mut costs = Vec::new();
    for (entry, price) in ranked.iter().map(|e| (e, price_of(e["device"].as_str().unwrap()))).take(3) {
        let point = &entry["point"];
        let tok_per_s = seconds(&point["output_tok_per_s_per_device"]);
        let by_hand = price / (3600.0 * tok_per_s * 0.5) * 1e6;
        let cost = seconds(&point["usd_per_million_output_tokens"]);
        assert!((cost - by_hand).abs() <= 1e-9 * by_hand, "{entry}");
        assert!(seconds(&point["ttft_p99_s"]) <= 2.0 && seconds(&point["tpot_p99_s"]) <= 0.2, "{entry}");
        assert_eq!(entry["checks_passed"], true);
        costs.push(by_hand);
    }
    assert!(costs.windows(2).all(|w| w[0] <= w[1]), "{costs:?}");
    // Every price named a ranked device: no warning. A misspelt one leaves its device unpriced,
    // and says so.
    let output = lynx_command().args(args("table")).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains("warning"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = lynx_command().args(args("table")).args(["--price", "alpah-gpu=3"]).output().unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{said}");
    assert!(
        said.starts_with("lynx: warning: --price alpah-gpu=3 names no device among the ranked results (they are ")
            && said.contains("alpha-gpu, beta-gpu")
            && said.lines().count() == 1,
        "{said}"
    );
    // The same bound and shape as the run's own chat workload under its server bound: the same
    // figure the run derived.
    let own: Value = serde_json::from_slice(&std::fs::read(&measured).unwrap()).unwrap();
    let server =
        own["derived"]["latency_bounded"].as_array().unwrap().iter().find(|b| b["bound"]["name"] == "server").unwrap();
    let alpha = ranked.iter().find(|e| e["device"] == "Alpha GPU").unwrap();
    assert_eq!(alpha["point"]["output_tok_per_s_per_device"], server["point"]["output_tok_per_s_per_device"]);

    let excluded = list["excluded"].as_array().unwrap();
    let kind = |stem: &str| {
        excluded
            .iter()
            .find(|x| x["file"].as_str().unwrap().ends_with(&format!("{stem}.intoto.json")))
            .map(|x| (x["kind"].as_str().unwrap().to_owned(), x["reason"].as_str().unwrap().to_owned()))
            .unwrap_or_else(|| panic!("{stem} not excluded: {list}"))
    };
    let (k, reason) = kind("tampered");
    assert!(k == "rejected" && reason.starts_with("subject"), "{k}: {reason}");
    assert_eq!(kind("unsigned").0, "unsigned");
    let (k, reason) = kind("untrusted");
    assert!(k == "untrusted" && reason.contains("not one of the 1 trusted keys"), "{k}: {reason}");
    let (k, reason) = kind("nested");
    assert!(k == "rejected" && reason.starts_with("envelope"), "{k}: {reason}");
    assert_eq!(excluded.len(), 4, "{excluded:?}");

    // Text from results is text: no escape sequence reaches the terminal, no tag the Markdown.
    let table = run("table");
    assert!(!table.contains('\u{1b}'), "{table}");
    assert!(table.contains("Alpha GPU") && table.contains("not ranked:"), "{table}");
    let markdown = run("markdown");
    assert!(!markdown.contains("<script>") && markdown.contains("&lt;script&gt;"), "{markdown}");
    assert!(!markdown.contains("<img"), "{markdown}");
    let csv = run("csv");
    assert_eq!(csv.lines().next().unwrap().split(',').count(), 14, "{csv}");
    assert!(csv.lines().next().unwrap().starts_with("RANK,DEVICE,PRECISION,"), "{csv}");
    // Each throughput and its steady part's in columns of their own, each a number (or `-`).
    assert!(csv.lines().next().unwrap().contains(",TOK/S/DEVICE,STEADY TOK/S,"), "{csv}");
    let plain = |c: &Vec<&str>| c[1] == "Alpha GPU" || c[1] == "Beta GPU";
    let ranked_rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).filter(plain).collect();
    assert_eq!(ranked_rows.len(), 2, "{csv}");
    for row in &ranked_rows {
        assert!(row[2] == "fp32", "{csv}");
        assert!(row[4].parse::<f64>().is_ok() && (row[5] == "-" || row[5].parse::<f64>().is_ok()), "{csv}");
    }
    // No result here served the buyer's shape: every figure is the simulated one, and says so.
    assert!(csv.lines().next().unwrap().ends_with(",FIGURE") && csv.contains(",simulated\n"), "{csv}");
    assert!(csv.contains("Beta GPU"), "{csv}");

    // Exports of one result from the one schema: a CSV row per cell with every column, and
    // Markdown whose hostile device name is text.
    let hostile_envelope = dir.join("hostile.intoto.json");
    let export = |format: &str| {
        let output = lynx(&["export", hostile_envelope.to_str().unwrap(), "--pubkey", &pubkey(), "--format", format]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let csv = export("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + own["cells"].as_array().unwrap().len(), "{csv}");
    assert!(lines.iter().all(|l| l.split(',').count() == 28), "{csv}");
    assert!(lines[0].starts_with("step,batch,prompt_len,ctx,status"), "{csv}");
    let markdown = export("markdown");
    assert!(markdown.contains("&lt;script&gt;") && !markdown.contains("<script>") && !markdown.contains('\u{1b}'));
    assert!(markdown.contains("## Cells") && markdown.contains("## Checks"), "{markdown}");
    assert!(markdown.contains(&format!("| weights | drawn from the seed {} |", own["config"]["suite"]["seed"])));
    // Its warm-up, and its step timed again after the sweep.
    let warmup = markdown.split("## Warm-up\n\n```text\n").nth(1).and_then(|rest| rest.split("```").next());
    let warmup = warmup.unwrap_or_else(|| panic!("{markdown}"));
    assert!(warmup.starts_with("warm-up ") && warmup.contains("equilibrium reached"), "{warmup}");
    assert!(warmup.contains("; its step timed again after the sweep took "), "{warmup}");
    let output = lynx(&["export", tampered.to_str().unwrap(), "--pubkey", &pubkey()]);
    assert_eq!(output.status.code(), Some(1), "a tampered result is not exported");

    // The site, from the same folder, in a real headless browser: every result listed with its
    // verification, every plot drawn, the hostile name shown as text and no script run.
    let site = tempfile::tempdir().unwrap();
    let output = lynx(&["report", dir_arg, "--out", site.path().to_str().unwrap(), "--pubkey", &pubkey()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = site.path().join("index.html");
    let (dom, console) = chromium(&["--dump-dom", &format!("file://{}", index.display())]);
    // The hostile text names the attribute; only a script that ran would set it on <body>.
    assert!(!dom.contains("data-pwned=\""), "a script from a result ran: {dom}");
    assert!(!dom.contains("<script") && !dom.contains("<img"), "markup from a result became elements");
    assert!(dom.contains("&lt;script&gt;document.body"), "the hostile name is shown as text");
    assert_eq!(dom.matches("class=\"result\"").count(), 8, "four verified, four excluded");
    assert!(!dom.contains(&"H".repeat(1000)), "a megabyte name is cut short in the site");
    for shown in ["Alpha GPU", "Beta GPU", "rejected: subject", "unsigned", "untrusted"] {
        assert!(dom.contains(shown), "no {shown} in the site");
    }
    // One frontier plot (one workload), bandwidth and matmul bars.
    assert_eq!(dom.matches("<svg").count(), 3, "{dom}");
    assert_eq!(dom.matches("class=\"series\"").count(), 4, "one frontier series per verified device");
    let errors: Vec<&str> = console.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(errors.is_empty(), "console messages: {errors:?}");
    let page = std::fs::read_dir(site.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("result-"))
        .unwrap();
    let (dom, console) = chromium(&["--dump-dom", &format!("file://{}", page.display())]);
    assert!(dom.contains("Telemetry") && dom.contains("<svg") && !dom.contains("data-pwned=\""), "{dom}");
    assert!(!console.contains("CONSOLE"), "{console}");
    // Every label of every chart (the index's and a result page's) lies inside its chart, as the
    // browser lays it out (the site forbids scripts, so its charts are measured on a page of the
    // test's own).
    let html = std::fs::read_to_string(&index).unwrap() + &std::fs::read_to_string(&page).unwrap();
    let charts: Vec<&str> =
        html.match_indices("<svg").map(|(at, _)| &html[at..at + html[at..].find("</svg>").unwrap() + 6]).collect();
    let probe = site.path().join("measure.html");
    std::fs::write(
        &probe,
        format!(
            "<!DOCTYPE html><html><body>{}<script>let worst = -1e9;\
             for (const svg of document.querySelectorAll('svg')) {{ const r = svg.getBoundingClientRect();\
             for (const t of svg.querySelectorAll('text')) {{ const b = t.getBoundingClientRect();\
             const out = Math.max(b.right - r.right, r.left - b.left, b.bottom - r.bottom, r.top - b.top);\
             if (out > worst) {{ worst = out; document.body.setAttribute('data-worst', t.textContent.slice(0, 80)); }} }} }}\
             document.body.setAttribute('data-overflow', worst.toFixed(1));</script></body></html>",
            charts.concat()
        ),
    )
    .unwrap();
    let (measured_dom, _) = chromium(&["--dump-dom", &format!("file://{}", probe.display())]);
    let overflow: f64 = measured_dom
        .split("data-overflow=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("the measuring page did not run: {measured_dom}"));
    let worst = measured_dom.split("data-worst=\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("");
    assert!(overflow <= 0.0, "a chart label runs {overflow} px outside its chart: {worst}");
    // Regression (issue 14): legends and bar labels cut a long device name to 28 and 40
    // characters; each is now wrapped whole (up to the site's cut of a name).
    assert!(charts.concat().contains(&"H".repeat(60)), "a long device name is cut short in a chart");
    let screenshot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("site-index.png");
    chromium(&[
        &format!("--screenshot={}", screenshot.display()),
        "--window-size=1200,2000",
        &format!("file://{}", index.display()),
    ]);
    assert!(std::fs::metadata(&screenshot).unwrap().len() > 10_000, "screenshot {}", screenshot.display());
    println!("screenshot of the site: {}", screenshot.display());

    // Collect the folder into one results folder: the four verified results, nothing else;
    // collecting again skips identical copies; a different copy of a collected run is refused.
    // A serving trace beside a result goes with it; one that is a link stays behind.
    let trace = b"{\"label\":\"bounded\"}\n";
    std::fs::write(dir.join("alpha.served.jsonl"), trace).unwrap();
    std::os::unix::fs::symlink(dir.join("alpha.served.jsonl"), dir.join("beta.served.jsonl")).unwrap();
    let collected = tempfile::tempdir().unwrap();
    let into = collected.path().to_str().unwrap();
    let output = lynx(&["collect", dir_arg, "--into", into, "--pubkey", &pubkey()]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("collected ")).count(), 4, "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("REFUSED ")).count(), 4, "{said}");
    let index: Value = serde_json::from_slice(&std::fs::read(collected.path().join("index.json")).unwrap()).unwrap();
    assert_eq!(index["results"].as_array().unwrap().len(), 4, "{index}");
    let traces: Vec<PathBuf> = index["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| collected.path().join(r["envelope"].as_str().unwrap().replace(".intoto.json", ".served.jsonl")))
        .filter(|path| path.exists())
        .collect();
    assert_eq!(traces.len(), 1, "one trace collected: {traces:?}");
    assert_eq!(std::fs::read(&traces[0]).unwrap(), trace, "{}", traces[0].display());
    assert!(traces[0].to_string_lossy().contains("alpha"), "{}", traces[0].display());
    let again = lynx(&["collect", dir_arg, "--into", into, "--pubkey", &pubkey()]);
    let said = String::from_utf8_lossy(&again.stdout).into_owned();
    assert_eq!(said.lines().filter(|l| l.starts_with("already collected ")).count(), 4, "{said}");
    // Collected into a folder inside the source, named by another path: what is already there
    // is never read back as a source (it would be "already collected", identical to itself).
    let inside = dir.join("all");
    let aliased = format!("{dir_arg}/../{}", dir.file_name().unwrap().to_string_lossy());
    for round in ["collected ", "already collected "] {
        let output = lynx(&["collect", &aliased, "--into", inside.to_str().unwrap(), "--pubkey", &pubkey()]);
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        assert_eq!(said.lines().filter(|l| l.starts_with(round)).count(), 4, "{said}");
        let sources = said.lines().filter(|l| !l.starts_with("index: "));
        let sources = sources.map(|l| l.split(" -> ").next().unwrap().split(" (identical to ").next().unwrap());
        let sources: Vec<&str> = sources.collect();
        assert!(sources.iter().all(|l| !l.contains("/all/")), "{said}");
        assert_eq!(said.lines().filter(|l| l.starts_with("REFUSED ")).count(), 4, "{said}");
    }
    std::fs::remove_dir_all(&inside).unwrap();
    let other = tempfile::tempdir().unwrap();
    publish_as(&measured, other.path(), "alpha-again", "Alpha GPU", 2.0, Some(&trusted));
    let output = lynx(&["collect", other.path().to_str().unwrap(), "--into", into, "--pubkey", &pubkey()]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.code() == Some(1) && said.contains("REFUSED") && said.contains("different contents"),
        "{said}"
    );
    // Two runs whose ids differ only in case are two runs: the one in lower case, collected
    // first, is not taken for the other as collect named runs before 2026-12-07.
    let cased = tempfile::tempdir().unwrap();
    let cased_envelopes: Vec<PathBuf> = ["run-b", "Run-B"]
        .iter()
        .map(|&id| {
            let edit = |json: &mut Value| {
                json["run_id"] = Value::from(id);
                json["device"]["name"] = Value::from("Cased GPU");
            };
            publish_edited(&measured, cased.path(), id, edit, Some(&trusted))
        })
        .collect();
    let cased_into = tempfile::tempdir().unwrap();
    for envelope in &cased_envelopes {
        let output = lynx(&[
            "collect",
            envelope.to_str().unwrap(),
            "--into",
            cased_into.path().to_str().unwrap(),
            "--pubkey",
            &pubkey(),
        ]);
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success() && said.starts_with("collected "), "{said}");
    }
    for id in ["run-b", "Run-B"] {
        let collected = cased_into.path().join("cased-gpu").join(id).join(format!("{id}.intoto.json"));
        assert!(collected.exists(), "{}", collected.display());
    }
    let report =
        lynx(&["report", into, "--out", site.path().join("collected").to_str().unwrap(), "--pubkey", &pubkey()]);
    assert!(report.status.success(), "the collected folder still verifies and builds a site");

    // Bad input: exit 2, one line naming it.
    let key = pubkey();
    let bad = |workload: &str, ttft: &str, key: &str| {
        bad_input(&[
            "shortlist",
            dir_arg,
            "--workload",
            workload,
            "--ttft-p99",
            ttft,
            "--tpot-p99",
            "1s",
            "--pubkey",
            key,
        ])
    };
    assert!(bad("test-small", "2s", &key).contains("MODEL:ISL/OSL"));
    assert!(bad("test-small:0/64", "2s", &key).contains("workload.isl must be greater than 0"));
    assert!(bad("test-small:64-16/64", "2s", &key).contains("must have lo <= hi"));
    assert!(bad("test-small:256/64", "fast", &key).contains("--ttft-p99"));
    assert!(bad("test-small:256/64", "2s", "/no/such.pub").contains("/no/such.pub"));
    // A model none of the results measured (a typo), every one verified, is named with those
    // they did measure, not ranked empty with exit 0; where some did not verify, the listing
    // says why each is not ranked (one may be of that model).
    let (published, keys) = (repo_path("results"), repo_path("results/keys"));
    let args = ["shortlist", &published, "--workload", "lynx-ref-smal:256/64", "--ttft-p99", "2s", "--tpot-p99", "1s"];
    let line = bad_input(&[args.as_slice(), &["--keys", &keys]].concat());
    assert!(line.contains("--workload lynx-ref-smal:") && line.contains("(they measured lynx-ref-small)"), "{line}");
    let output = lynx(&[
        "shortlist",
        dir_arg,
        "--workload",
        "test-smal:256/64",
        "--ttft-p99",
        "2s",
        "--tpot-p99",
        "1s",
        "--pubkey",
        &key,
    ]);
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && said.contains("(other model): measured test-small, not test-smal"), "{said}");
    let line = bad_input(&["shortlist", dir_arg, "--workload", "m:1/2", "--ttft-p99", "1s", "--tpot-p99", "1s"]);
    assert!(line.contains("no trusted keys"), "{line}");
}

/// Issue 17: a published result's suite goes through exactly the validation a suite file does:
/// a signed suite with a batch of 0 and no contexts is refused before anything runs (exit 2,
/// naming the key), where it used to run and sign a `complete` result of 0 tok/s.
#[test]
fn reproduce_refuses_a_signed_suite_that_a_suite_file_could_not_hold() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_models, out, published_result) = measured_run();
    let mut json: Value = serde_json::from_slice(&std::fs::read(&published_result).unwrap()).unwrap();
    json["config"]["suite"]["decode"] = serde_json::json!({ "batches": [0], "ctxs": [] });
    json["config"]["suite"]["measure"]["min_steps"] = Value::from(0);
    let result: lynx_schema::result::RunResult = serde_json::from_value(json).unwrap();
    let path = out.path().join("odd.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&result).unwrap()).unwrap();
    let samples = published_result.with_file_name(result.telemetry.samples_file.clone());
    std::fs::copy(samples, out.path().join(&result.telemetry.samples_file)).unwrap();
    let trusted = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let envelope = lynx_attest::seal(&path, &result, Some(&trusted)).unwrap();
    let envelope_path = lynx_attest::envelope_path(&path);
    std::fs::write(&envelope_path, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let local_out = tempfile::tempdir().unwrap();
    let line = bad_input(&[
        "reproduce",
        envelope_path.to_str().unwrap(),
        "--pubkey",
        &pubkey(),
        "--out",
        local_out.path().to_str().unwrap(),
    ]);
    assert!(line.contains("the suite of") && line.contains("measure.min_steps"), "{line}");
    assert!(
        std::fs::read_dir(local_out.path()).unwrap().next().is_none(),
        "a run started from a suite no file could hold"
    );
}

#[test]
fn reproduce_reruns_the_published_configuration_and_gives_the_ratio_of_every_figure() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_models, _out, published_result) = measured_run();
    let published = published_result.with_extension("intoto.json");
    let original: Value = serde_json::from_slice(&std::fs::read(&published_result).unwrap()).unwrap();

    // The reproduction needs no models folder: the configuration comes from the signed result.
    let local_out = tempfile::tempdir().unwrap();
    let key = pubkey();
    let reproduce =
        ["reproduce", published.to_str().unwrap(), "--pubkey", &key, "--out", local_out.path().to_str().unwrap()];
    // Planned first: the published suite and model, and nothing written.
    let planned = lynx(&[reproduce.as_slice(), &["--plan"]].concat());
    let plan = String::from_utf8_lossy(&planned.stdout);
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let suite = original["config"]["suite"]["name"].as_str().unwrap();
    let model = original["config"]["model"]["name"].as_str().unwrap();
    assert!(plan.starts_with(&format!("plan: suite {suite}: {model} (")), "{plan}");
    assert!(plan.contains("estimated wall time about "), "{plan}");
    assert!(std::fs::read_dir(local_out.path()).unwrap().next().is_none(), "a plan wrote a run");
    let output = lynx(&reproduce);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let local_result = result_file(local_out.path());
    let local: Value = serde_json::from_slice(&std::fs::read(&local_result).unwrap()).unwrap();
    assert_eq!(local["config"]["sha256"], original["config"]["sha256"], "the same configuration, by digest");
    // Each side names the key that vouches for it: here the publisher's and this node's are one.
    let key_id = lynx_attest::key_id(&lynx_attest::read_verifying_key(Path::new(&key)).unwrap());
    assert!(stdout.contains(&format!("published: {} (signed by key {key_id})\n", published.display())), "{stdout}");
    assert!(stdout.contains(&format!("local: {} (signed by key {key_id})\n", local_result.display())), "{stdout}");
    let digest = lynx_attest::envelope::file_sha256(&published).unwrap();
    assert_eq!(local["reproduces"]["envelope_sha256"], Value::from(digest));
    assert_eq!(local["reproduces"]["run_id"], original["run_id"]);
    let verify = lynx(&["verify", local_result.with_extension("intoto.json").to_str().unwrap(), "--pubkey", &key]);
    assert!(verify.status.success(), "the reproduction is signed");

    // The ratio table is complete: every cell both measured, both ways, and the derived and
    // roofline figures; `lynx compare` gives the same rows.
    let output = lynx(&[
        "compare",
        published.to_str().unwrap(),
        local_result.with_extension("intoto.json").to_str().unwrap(),
        "--pubkey",
        &key,
        "--json",
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = comparison["rows"].as_array().unwrap();
    let cells = original["cells"].as_array().unwrap().len();
    assert_eq!(rows.iter().filter(|r| r["figure"].as_str().unwrap().ends_with("median step (s)")).count(), cells);
    assert_eq!(rows.iter().filter(|r| r["figure"].as_str().unwrap().ends_with("tok/s/device")).count(), cells + 2);
    assert!(rows.iter().any(|r| r["figure"].as_str().unwrap().starts_with("roofline torch matmul")));
    for row in rows {
        let (first, second, ratio) =
            (row["first"].as_f64().unwrap(), row["second"].as_f64().unwrap(), row["ratio"].as_f64().unwrap());
        assert!((ratio - second / first).abs() <= 1e-9 * ratio, "{row}");
    }
    assert!(comparison["unmatched"].as_array().unwrap().is_empty(), "{comparison}");
    assert!(stdout.contains("LOCAL/PUBLISHED") && stdout.contains("WITHIN PUBLISHED'S SPREAD"), "{stdout}");
    let table_rows = stdout.lines().filter(|l| l.contains(": median step (s)") && !l.starts_with("verdict: "));
    assert_eq!(table_rows.count(), cells, "{stdout}");

    // Issue 16 item 7: each figure judged within 2% of the published one (MLPerf's bar for a
    // materially different result) and within its spread, and one verdict naming the tolerance.
    assert_eq!(comparison["tolerance"], Value::from(0.02));
    for row in rows {
        let ratio = row["ratio"].as_f64().unwrap();
        assert_eq!(row["within_tolerance"], Value::from((ratio - 1.0).abs() <= 0.02 + 1e-12), "{row}");
    }
    let verdict = &comparison["verdict"];
    let count = |what: &str| verdict[what].as_u64().unwrap() as usize;
    assert_eq!(count("figures"), rows.len());
    assert_eq!(count("within_tolerance") + count("within_spread_only") + count("different"), rows.len(), "{verdict}");
    assert_eq!(count("within_tolerance"), rows.iter().filter(|r| r["within_tolerance"] == true).count());
    let said = stdout.lines().find(|l| l.starts_with("verdict: ")).unwrap_or_else(|| panic!("no verdict: {stdout}"));
    let expected = match verdict["outcome"].as_str().unwrap() {
        "reproduced" => "verdict: reproduced: all ",
        "within_spread" => "verdict: within published's spread: ",
        "different" => "verdict: MATERIALLY DIFFERENT: ",
        other => panic!("outcome {other}"),
    };
    assert!(said.starts_with(expected) && said.contains("2%"), "{said}");
    assert!(stdout.contains("WITHIN 2%"), "{stdout}");

    // Two made reproductions with known verdicts: the published figures exactly (reproduced),
    // and every step far slower (materially different, worse, and outside any spread). Each
    // passed its run's checks, as a reproduction the site marks good must (this host's run may
    // not have); a third, the exact figures from a run that failed one, is not marked good.
    let local_json: Value = serde_json::from_slice(&std::fs::read(&local_result).unwrap()).unwrap();
    let mut exact_json = original.clone();
    exact_json["reproduces"] = local_json["reproduces"].clone();
    for check in exact_json["checks"].as_array_mut().unwrap() {
        check["passed"] = Value::from(true);
    }
    let mut unsound_json = exact_json.clone();
    unsound_json["checks"][0]["passed"] = Value::from(false);
    let unsound_source = published_result.with_file_name("unsound-source.json");
    std::fs::write(&unsound_source, serde_json::to_vec(&unsound_json).unwrap()).unwrap();
    let exact_source = published_result.with_file_name("exact-source.json");
    std::fs::write(&exact_source, serde_json::to_vec(&exact_json).unwrap()).unwrap();
    let site_dir = tempfile::tempdir().unwrap();
    let trusted = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let exact = publish_as(&exact_source, site_dir.path(), "exact", "Exact GPU", 1.0, Some(&trusted));
    // Ten times the published run's slowest step over its median at any shape: on a busy host a
    // cell's p99 can lie several times above its median, and a reproduction only ten times
    // slower then lies within the spread (run at 92e631b: 3 of 4 cells did).
    let outliers = original["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| Some(c["step_time"]["max_s"].as_f64()? / c["step_time"]["median_s"].as_f64()?))
        .fold(1.0, f64::max);
    let slow = publish_as(&exact_source, site_dir.path(), "slow", "Slow GPU", 10.0 * outliers, Some(&trusted));
    // And the exact figures made with a test hook set: the figures reproduce, the device does not.
    let mut hooked = exact_json;
    hooked["harness"]["test_hooks"] = serde_json::json!(["LYNX_TEST_CELL_PACE=1"]);
    let hooked_source = published_result.with_file_name("hooked-source.json");
    std::fs::write(&hooked_source, serde_json::to_vec(&hooked).unwrap()).unwrap();
    let hooked = publish_as(&hooked_source, site_dir.path(), "hooked", "Hooked GPU", 1.0, Some(&trusted));
    publish_as(&unsound_source, site_dir.path(), "unsound", "Unsound GPU", 1.0, Some(&trusted));
    let published_copy = site_dir.path().join(published.file_name().unwrap());
    std::fs::copy(&published, &published_copy).unwrap();
    for name in
        [published_result.file_name().unwrap(), original["telemetry"]["samples_file"].as_str().unwrap().as_ref()]
    {
        std::fs::copy(published_result.with_file_name(name), site_dir.path().join(name)).unwrap();
    }
    let compare_text = |second: &Path| {
        let output = lynx(&["compare", published_copy.to_str().unwrap(), second.to_str().unwrap(), "--pubkey", &key]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let said = compare_text(&exact);
    let figures = rows.len();
    assert!(
        said.contains(&format!("verdict: reproduced: all {figures} figures of second within 2% of first's")),
        "{said}"
    );
    let said = compare_text(&slow);
    assert!(said.contains(&format!("verdict: MATERIALLY DIFFERENT: {cells} of {figures} figures beyond 2%")), "{said}");
    assert!(said.contains(&format!("{cells} of them worse and 0 better")), "{said}");
    let said = compare_text(&hooked);
    let verdict = format!(
        "verdict: NOT A COMPARISON OF DEVICES: second (LYNX_TEST_CELL_PACE=1) was made with test hooks set, a test's \
         figures, not a device's; of the figures, reproduced: all {figures} figures of second within 2% of first's"
    );
    assert!(said.contains(&verdict), "{said}");

    // The site shows, on the published result's page, each reproduction of it it was given, and on
    // each reproduction's page what it reproduces.
    let site = tempfile::tempdir().unwrap();
    let output =
        lynx(&["report", site_dir.path().to_str().unwrap(), "--out", site.path().to_str().unwrap(), "--pubkey", &key]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let pages = result_pages(site.path());
    let published_page =
        pages.iter().find(|p| p.contains("<h2>Reproductions</h2>")).expect("a page lists reproductions");
    assert_eq!(published_page.matches("class=\"reproduction\"").count(), 4, "{published_page}");
    assert!(published_page.contains("Exact GPU") && published_page.contains("Slow GPU"), "{published_page}");
    assert_eq!(published_page.matches("class=\"ok\">reproduced</span>").count(), 1, "{published_page}");
    assert!(published_page.contains("class=\"bad\">materially different</span>"), "{published_page}");
    assert!(published_page.contains("class=\"bad\">made with test hooks: reproduced</span>"), "{published_page}");
    assert!(published_page.contains("class=\"bad\">its run failed a check: reproduced</span>"), "{published_page}");
    let reproducing: Vec<&String> = pages.iter().filter(|p| p.contains("<h2>Reproduces</h2>")).collect();
    assert_eq!(reproducing.len(), 4);
    let hooked_page = reproducing.iter().find(|p| p.contains("Hooked GPU")).unwrap();
    assert!(hooked_page.contains("class=\"bad\">NOT A COMPARISON OF DEVICES: this reproduction"), "{hooked_page}");
    assert!(reproducing.iter().all(|p| p.contains("This run reproduces <a href=\"result-")), "{reproducing:?}");
    // Without the published result beside it, a reproduction's page says so.
    std::fs::remove_file(&published_copy).unwrap();
    let site = tempfile::tempdir().unwrap();
    let output =
        lynx(&["report", site_dir.path().to_str().unwrap(), "--out", site.path().to_str().unwrap(), "--pubkey", &key]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = std::fs::read_to_string(site.path().join("index.html")).unwrap();
    assert!(!index.contains("Reproductions"));
    let page = std::fs::read_dir(site.path())
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .find(|p| p.contains("Slow GPU") && p.contains("<h2>Reproduces</h2>"))
        .expect("the slow reproduction's page");
    assert!(page.contains("which is not among the verified results"), "{page}");

    // A published result that does not verify is not reproduced.
    let other = tempfile::tempdir().unwrap();
    lynx_attest::generate(other.path(), false).unwrap();
    let output =
        lynx(&["reproduce", published.to_str().unwrap(), "--pubkey", other.path().join("lynx.pub").to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("INVALID at signature"));
}

/// A result made with a test hook set (a `LYNX_TEST_…` variable) records it
/// (`harness.test_hooks`) and says so wherever it is shown: its Markdown export, its row in the
/// site's index and beside its figures there, its page; a shortlist leaves it out, naming the
/// hook. Here the published record's last run, signed as two devices' results, one given the
/// hook.
#[test]
fn a_result_made_with_test_hooks_says_so_and_is_never_shortlisted() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let record = PathBuf::from(repo_path("results/amd-epyc/20261203T010753Z-dd076e65/20261203T010753Z-dd076e65.json"));
    let mut json: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    assert!(json["harness"].get("test_hooks").is_none(), "the record was made without test hooks");
    json["harness"]["test_hooks"] = serde_json::json!(["LYNX_TEST_CELL_PACE=1"]);
    // And made with a variable that steers CUDA set, which its record shows.
    json["harness"]["environment"] = serde_json::json!(["CUDA_LAUNCH_BLOCKING=1"]);
    // The hooked copy beside a copy of its samples file, where publish_as looks for it.
    let work = tempfile::tempdir().unwrap();
    let samples = json["telemetry"]["samples_file"].as_str().unwrap();
    std::fs::copy(record.with_file_name(samples), work.path().join(samples)).unwrap();
    let hooked = work.path().join("hooked.json");
    std::fs::write(&hooked, serde_json::to_vec(&json).unwrap()).unwrap();
    let trusted = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let published = tempfile::tempdir().unwrap();
    let dir = published.path();
    publish_as(&record, dir, "plain", "Plain CPU", 1.0, Some(&trusted));
    let hooked = publish_as(&hooked, dir, "hooked", "Hooked CPU", 1.0, Some(&trusted));

    let dir_arg = dir.to_str().unwrap();
    let key = pubkey();
    let shortlist = lynx(&[
        "shortlist",
        dir_arg,
        "--workload",
        "lynx-ref-small:128/128",
        "--ttft-p99",
        "2s",
        "--tpot-p99",
        "100ms",
        "--pubkey",
        &key,
        "--format",
        "json",
    ]);
    assert!(shortlist.status.success(), "{}", String::from_utf8_lossy(&shortlist.stderr));
    let list: Value = serde_json::from_slice(&shortlist.stdout).unwrap();
    let devices: Vec<&str> = list["ranked"].as_array().unwrap().iter().map(|e| e["device"].as_str().unwrap()).collect();
    assert_eq!(devices, ["Plain CPU"], "{list}");
    let excluded = list["excluded"].as_array().unwrap();
    assert_eq!(excluded.len(), 1, "{list}");
    assert_eq!(excluded[0]["kind"], "test hooks", "{list}");
    let reason = excluded[0]["reason"].as_str().unwrap();
    assert_eq!(reason, "made with LYNX_TEST_CELL_PACE=1 set: a test's figures, not the device's");

    let markdown = |envelope: &Path| {
        let output = lynx(&["export", envelope.to_str().unwrap(), "--pubkey", &key, "--format", "markdown"]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let said = markdown(&hooked);
    assert!(
        said.contains("| test hooks | LYNX\\_TEST\\_CELL\\_PACE=1: a test's figures, not the device's |"),
        "{said}"
    );
    assert!(said.contains("| environment | CUDA\\_LAUNCH\\_BLOCKING=1 |"), "{said}");
    let plain = markdown(&dir.join("plain.intoto.json"));
    // The published record is from before lynx wrote "none set"; its export says so.
    assert!(!plain.contains("test hooks"), "{plain}");
    assert!(
        plain.contains("| environment | not recorded (none set, or a result from before lynx recorded them) |"),
        "{plain}"
    );
    assert!(plain.contains("| GPU libraries | not recorded (a result from before lynx recorded them) |"), "{plain}");

    let site = tempfile::tempdir().unwrap();
    let output = lynx(&["report", dir_arg, "--out", site.path().to_str().unwrap(), "--pubkey", &key]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = std::fs::read_to_string(site.path().join("index.html")).unwrap();
    assert_eq!(index.matches("made with test hooks (LYNX_TEST_CELL_PACE=1)").count(), 1, "{index}");
    // Beside each of its latency-bounded figures (measured and simulated), and no one else's.
    let figures = index.matches("(test hooks)").count();
    assert!(figures >= 2 && figures == index.matches("Hooked CPU (cpu)</a> <span").count(), "{index}");
    assert!(index.contains("Plain CPU (cpu)</a></td>") && !index.contains("Plain CPU (cpu)</a> <span"), "{index}");
    let pages = result_pages(site.path());
    let row = "<th>test hooks</th><td>LYNX_TEST_CELL_PACE=1: a test's figures, not the device's</td>";
    assert_eq!(pages.len(), 2);
    assert_eq!(pages.iter().filter(|page| page.contains(row)).count(), 1, "{pages:?}");

    // Collecting the folder into a results folder refuses it (exit 1), and collects the other.
    let collected = tempfile::tempdir().unwrap();
    let output = lynx(&["collect", dir_arg, "--into", collected.path().to_str().unwrap(), "--pubkey", &key]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{said}");
    let refused = format!(
        "REFUSED {}: test hooks: made with LYNX_TEST_CELL_PACE=1 set: a test's figures, not the device's",
        hooked.display()
    );
    assert!(said.lines().any(|l| l == refused), "{said}");
    assert_eq!(said.lines().filter(|l| l.starts_with("collected ")).count(), 1, "{said}");

    // Its signature is valid, and lynx verify says on the same line whose figures it vouches for.
    let plain = dir.join("plain.intoto.json");
    let output = lynx(&["verify", plain.to_str().unwrap(), hooked.to_str().unwrap(), "--pubkey", &key]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{said}");
    let lines: Vec<&str> = said.lines().collect();
    assert!(lines.len() == 2 && lines[0].ends_with(')') && !lines[0].contains("test hooks"), "{said}");
    let tail = "; made with test hooks set (LYNX_TEST_CELL_PACE=1): a test's figures, not the device's";
    assert!(lines[1].contains(": valid (signed by key ") && lines[1].ends_with(tail), "{said}");
    let output = lynx(&["verify", hooked.to_str().unwrap(), "--pubkey", &key, "--json"]);
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts[0]["test_hooks"], serde_json::json!(["LYNX_TEST_CELL_PACE=1"]), "{verdicts}");
}

/// A lab publishes a result under its key, and a vendor signs its reproduction under its own:
/// `lynx compare` takes both keys (`--pubkey` twice, or `--keys DIR`), verifies each result under
/// the key its signature names and says which; `verify`, `export` and `reproduce` take the same
/// trusted keys. Given only the lab's key, the vendor's result is refused, naming its signer.
#[test]
fn results_signed_by_two_parties_verify_and_compare_under_their_own_keys() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let record = PathBuf::from(repo_path("results/amd-epyc/20261203T010753Z-dd076e65/20261203T010753Z-dd076e65.json"));
    let lab_signing = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let vendor_keys = tempfile::tempdir().unwrap();
    lynx_attest::generate(vendor_keys.path(), false).unwrap();
    let vendor_signing = lynx_attest::read_signing_key(&vendor_keys.path().join("lynx.key")).unwrap();
    let (lab_key, vendor_key) = (pubkey(), vendor_keys.path().join("lynx.pub").to_str().unwrap().to_owned());
    let id = |key: &str| lynx_attest::key_id(&lynx_attest::read_verifying_key(Path::new(key)).unwrap());
    let (lab_id, vendor_id) = (id(&lab_key), id(&vendor_key));
    let published = tempfile::tempdir().unwrap();
    let lab = publish_as(&record, published.path(), "lab", "Lab CPU", 1.0, Some(&lab_signing));
    let vendor = publish_as(&record, published.path(), "vendor", "Vendor CPU", 1.0, Some(&vendor_signing));
    let (lab, vendor) = (lab.to_str().unwrap(), vendor.to_str().unwrap());
    let trusted = tempfile::tempdir().unwrap();
    std::fs::copy(&lab_key, trusted.path().join("lab.pub")).unwrap();
    std::fs::copy(&vendor_key, trusted.path().join("vendor.pub")).unwrap();
    let keys_dir = trusted.path().to_str().unwrap();

    for keys in [vec!["--pubkey", &lab_key, "--pubkey", &vendor_key], vec!["--keys", keys_dir]] {
        let output = lynx(&[["compare", lab, vendor].as_slice(), &keys].concat());
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{keys:?}: {}", String::from_utf8_lossy(&output.stderr));
        assert!(said.starts_with(&format!("first: {lab} (signed by key {lab_id})\n")), "{said}");
        assert!(said.contains(&format!("\nsecond: {vendor} (signed by key {vendor_id})\n")), "{said}");
        assert!(said.contains("verdict: reproduced: all "), "{said}");
        assert!(String::from_utf8_lossy(&output.stderr).is_empty(), "two results, not one");
        let output = lynx(&[["compare", lab, vendor, "--json"].as_slice(), &keys].concat());
        let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(comparison["signers"], serde_json::json!([lab_id, vendor_id]), "{comparison}");

        let output = lynx(&[["verify", lab, vendor].as_slice(), &keys].concat());
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{said}");
        assert_eq!(
            said.lines().collect::<Vec<_>>(),
            [format!("{lab}: valid (signed by key {lab_id})"), format!("{vendor}: valid (signed by key {vendor_id})")]
        );
        let output = lynx(&[["export", vendor, "--format", "csv"].as_slice(), &keys].concat());
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }

    // A result compared with itself is said to be so: its verdict holds by construction.
    let output = lynx(&["compare", lab, lab, "--pubkey", &lab_key]);
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success() && said.contains("both are the same result (run "), "{said}");

    // Only the lab's key: the vendor's result does not verify, and the line names its signer.
    let output = lynx(&["compare", lab, vendor, "--pubkey", &lab_key]);
    let said = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(said.contains(&format!("{vendor}: INVALID at signature: ")) && said.contains(&vendor_id), "{said}");
    // Two keys, neither the vendor's: its JSON verdict names both as what it was checked against.
    let stranger = tempfile::tempdir().unwrap();
    lynx_attest::generate(stranger.path(), false).unwrap();
    let stranger_key = stranger.path().join("lynx.pub").to_str().unwrap().to_owned();
    let output = lynx(&["verify", vendor, "--pubkey", &lab_key, "--pubkey", &stranger_key, "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts[0]["key_id"], Value::from(format!("{lab_id}, {}", id(&stranger_key))), "{verdicts}");
    assert_eq!(verdicts[0]["failed_step"], "signature", "{verdicts}");
    let message = verdicts[0]["message"].as_str().unwrap();
    assert!(message.contains("names one of the 2 trusted keys") && message.contains(&vendor_id), "{message}");
    // A published result under a keys folder that lacks its publisher: refused before anything runs.
    let local_out = tempfile::tempdir().unwrap();
    let only_lab = tempfile::tempdir().unwrap();
    std::fs::copy(&lab_key, only_lab.path().join("lab.pub")).unwrap();
    let output = lynx(&[
        "reproduce",
        vendor,
        "--keys",
        only_lab.path().to_str().unwrap(),
        "--out",
        local_out.path().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("INVALID at signature"));
    assert!(std::fs::read_dir(local_out.path()).unwrap().next().is_none(), "a reproduction of an unverified result");
    // No trusted key at all is bad input, for each of them.
    let empty = tempfile::tempdir().unwrap();
    for args in [
        vec!["compare", lab, vendor],
        vec!["verify", lab],
        vec!["export", lab],
        vec!["reproduce", lab, "--keys", empty.path().to_str().unwrap()],
    ] {
        let line = bad_input(&args);
        assert!(line.contains("no trusted keys: give --pubkey KEY or --keys DIR"), "{args:?}: {line}");
    }

    // The lab's result countersigned by the vendor: valid under either key, the other named
    // where both are trusted, and a signature by a key not given counted as unverified.
    let mut envelope: lynx_attest::Envelope = serde_json::from_slice(&std::fs::read(lab).unwrap()).unwrap();
    use base64::Engine as _;
    let payload = base64::engine::general_purpose::STANDARD.decode(&envelope.payload).unwrap();
    envelope.signatures.push(lynx_attest::sign(&payload, &vendor_signing).signatures.remove(0));
    let countersigned = Path::new(lab).with_file_name("countersigned.intoto.json");
    std::fs::write(&countersigned, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let countersigned = countersigned.to_str().unwrap();
    for (keys, line) in [
        (vec!["--keys", keys_dir], format!("valid (signed by key {lab_id}; also by key {vendor_id})")),
        (
            vec!["--pubkey", &vendor_key, "--pubkey", &lab_key],
            format!("valid (signed by key {vendor_id}; also by key {lab_id})"),
        ),
        (
            vec!["--pubkey", &vendor_key],
            format!(
                "valid (signed by key {vendor_id}; it also carries 1 other signature that no trusted key verifies)"
            ),
        ),
    ] {
        let output = lynx(&[["verify", countersigned].as_slice(), &keys].concat());
        let said = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(output.status.success(), "{said}");
        assert_eq!(said, format!("{countersigned}: {line}\n"), "{keys:?}");
    }
    let output = lynx(&["verify", countersigned, "--keys", keys_dir, "--json"]);
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(verdicts[0]["also_signed_by"], serde_json::json!([vendor_id]), "{verdicts}");
    assert_eq!(verdicts[0]["other_signatures"], 1, "{verdicts}");
    // Its export names both; the lab's own names one.
    let output = lynx(&["export", countersigned, "--keys", keys_dir]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        said.contains(&format!("| signed by key | {lab_id} |\n| countersigned by key | {vendor_id} |\n")),
        "{said}"
    );
    let output = lynx(&["export", lab, "--keys", keys_dir]);
    assert!(!String::from_utf8_lossy(&output.stdout).contains("countersigned"));
    // Collected where the lab's own copy is: refused, saying it is the same result signed
    // otherwise, and the lab's copy kept.
    let beside_lab = tempfile::tempdir().unwrap();
    let into = beside_lab.path().to_str().unwrap();
    let output = lynx(&["collect", lab, "--into", into, "--keys", keys_dir]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index_before = std::fs::read(beside_lab.path().join("index.json")).unwrap();
    let output = lynx(&["collect", countersigned, "--into", into, "--keys", keys_dir]);
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "the same signed result with other signatures (this copy: signed by key {lab_id}, also by key {vendor_id})"
        )),
        "{said}"
    );
    let index_after: Value =
        serde_json::from_slice(&std::fs::read(beside_lab.path().join("index.json")).unwrap()).unwrap();
    let index_before: Value = serde_json::from_slice(&index_before).unwrap();
    assert_eq!(index_after["results"], index_before["results"]);
    // Collected, its index entry names the countersigner; the vendor's own names none.
    let collected = tempfile::tempdir().unwrap();
    let into = collected.path().to_str().unwrap();
    let output = lynx(&["collect", countersigned, vendor, "--into", into, "--keys", keys_dir]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index: Value = serde_json::from_slice(&std::fs::read(collected.path().join("index.json")).unwrap()).unwrap();
    let entries = index["results"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{index}");
    for entry in entries {
        match entry["key_id"].as_str().unwrap() {
            id if id == lab_id => assert_eq!(entry["also_signed_by"], serde_json::json!([vendor_id]), "{entry}"),
            _ => assert!(entry.get("also_signed_by").is_none(), "{entry}"),
        }
    }
    // The site names the countersigner beside the signer, in the index and on the result's page;
    // the results signed once name one key.
    let site = tempfile::tempdir().unwrap();
    let output = lynx(&[
        "report",
        published.path().to_str().unwrap(),
        "--keys",
        keys_dir,
        "--out",
        site.path().to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = std::fs::read_to_string(site.path().join("index.html")).unwrap();
    assert_eq!(
        index.matches(&format!("verified (key {}; also {})", &lab_id[..12], &vendor_id[..12])).count(),
        1,
        "{index}"
    );
    assert_eq!(index.matches(&format!("verified (key {})", &lab_id[..12])).count(), 1, "{index}");
    assert_eq!(index.matches(&format!("verified (key {})", &vendor_id[..12])).count(), 1, "{index}");
    let pages = result_pages(site.path());
    let countersigned_page: Vec<&String> = pages.iter().filter(|p| p.contains("countersigned.intoto.json")).collect();
    assert_eq!(countersigned_page.len(), 1);
    assert!(
        countersigned_page[0].contains(&format!("{lab_id}<br>countersigned by key {vendor_id}")),
        "{}",
        countersigned_page[0]
    );
    assert_eq!(pages.iter().filter(|p| p.contains("countersigned by key")).count(), 1);
}

/// `lynx verify` given folders verifies every envelope under them, as the commands that read
/// results folders do: each one's line, in name order; a folder with none is bad input (a
/// verification that checked nothing must not pass), and one bad envelope among good ones fails
/// the whole, naming it.
#[test]
fn verify_given_a_folder_verifies_every_envelope_under_it() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (results, keys) = (repo_path("results"), repo_path("results/keys"));
    let envelopes = lynx_attest::trust::find_envelopes(&[PathBuf::from(&results)]).unwrap();
    assert!(envelopes.len() >= 2, "{envelopes:?}");
    let output = lynx(&["verify", &results, "--keys", &keys]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{said}{}", String::from_utf8_lossy(&output.stderr));
    let named: Vec<&str> = said.lines().map(|line| line.split(": valid (signed by key ").next().unwrap()).collect();
    let expected: Vec<String> = envelopes.iter().map(|e| e.display().to_string()).collect();
    assert_eq!(named, expected, "{said}");
    assert!(said.lines().all(|line| line.contains(": valid (signed by key ")), "{said}");

    // So do the other commands that read results folders: an empty folder, or one that is not
    // there (a typo), is bad input, not an empty site, ranking or collection that exits 0.
    let empty = tempfile::tempdir().unwrap();
    let (empty, missing) = (empty.path().to_str().unwrap(), "/no/such/results");
    let into = tempfile::tempdir().unwrap();
    let (site, collected) = (into.path().join("site"), into.path().join("collected"));
    for (folder, says) in [(empty, "a folder with no *.intoto.json envelope under it"), (missing, "No such file")] {
        let shortlist = ["shortlist", folder, "--workload", "m:1/2", "--ttft-p99", "1s", "--tpot-p99", "1s"];
        for args in [
            &["verify", folder][..],
            &shortlist,
            &["report", folder, "--out", site.to_str().unwrap()],
            &["collect", folder, "--into", collected.to_str().unwrap()],
        ] {
            let line = bad_input(&[args, &["--keys", &keys]].concat());
            assert!(line.contains(&format!("{folder}: {says}")), "{args:?}: {line}");
        }
    }
    assert!(!site.exists() && !collected.exists(), "nothing is written for bad input");
    // And the commands that read one result: a folder, or a file that is not there.
    let one = envelopes[0].to_str().unwrap();
    for (path, says) in [(results.as_str(), "is a folder; give one envelope"), (missing, "No such file")] {
        for args in
            [&["export", path][..], &["compare", one, path], &["reproduce", path, "--out", collected.to_str().unwrap()]]
        {
            let line = bad_input(&[args, &["--keys", &keys]].concat());
            assert!(line.contains(&format!("{path}: {says}")), "{args:?}: {line}");
        }
    }
    assert!(!collected.exists(), "nothing is written for bad input");

    // A copy of one published result, beside an envelope that is no envelope, in a subfolder.
    let mixed = tempfile::tempdir().unwrap();
    let source = envelopes[0].parent().unwrap();
    for entry in std::fs::read_dir(source).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), mixed.path().join(entry.file_name())).unwrap();
    }
    std::fs::create_dir(mixed.path().join("later")).unwrap();
    let junk = mixed.path().join("later/junk.intoto.json");
    std::fs::write(&junk, "{}").unwrap();
    let output = lynx(&["verify", mixed.path().to_str().unwrap(), "--keys", &keys]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert_eq!(output.status.code(), Some(1), "{said}");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert!(lines[0].contains(": valid (signed by key "), "{said}");
    assert!(lines[1].starts_with(&format!("{}: INVALID at ", junk.display())), "{said}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("1 of 2 results failed verification"));
}

/// A site built again into its folder keeps no page of a result it no longer lists (a site
/// copied to a web server must not keep serving a result that is no longer among the verified
/// ones), touches nothing else there, and replaces a symbolic link where a page goes rather than
/// writing through it.
#[test]
fn a_site_built_again_keeps_no_page_of_a_result_it_no_longer_lists() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (results, keys) = (repo_path("results"), repo_path("results/keys"));
    let envelopes = lynx_attest::trust::find_envelopes(&[PathBuf::from(&results)]).unwrap();
    assert!(envelopes.len() >= 2, "{envelopes:?}");
    let site = tempfile::tempdir().unwrap();
    let out = site.path().to_str().unwrap();
    let pages = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("result-"))
            .collect();
        names.sort();
        names
    };
    let output = lynx(&["report", &results, "--keys", &keys, "--out", out]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(pages(site.path()).len(), envelopes.len());
    // What the site's owner keeps there, and a link where the index goes.
    std::fs::write(site.path().join("result-notes.html"), "mine").unwrap();
    std::fs::create_dir(site.path().join("result-0-a-folder.html")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("target.html");
    std::fs::write(&target, "not the site's").unwrap();
    std::fs::remove_file(site.path().join("index.html")).unwrap();
    std::os::unix::fs::symlink(&target, site.path().join("index.html")).unwrap();

    let last = envelopes.last().unwrap().parent().unwrap().to_str().unwrap().to_owned();
    let output = lynx(&["report", &last, "--keys", &keys, "--out", out]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        said.contains(&format!(
            "removed {} result pages an earlier build left in {out} that this one does not list there",
            envelopes.len()
        )),
        "{said}"
    );
    let left = pages(site.path());
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(left.contains(&"result-notes.html".to_owned()) && left.contains(&"result-0-a-folder.html".to_owned()));
    let page = left.iter().find(|n| n.ends_with(".html") && n.starts_with("result-0-2")).unwrap();
    let index = std::fs::read_to_string(site.path().join("index.html")).unwrap();
    assert!(index.contains(page.as_str()), "{index}");
    assert_eq!(index.matches("class=\"result\"").count(), 1);
    assert!(!std::fs::symlink_metadata(site.path().join("index.html")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "not the site's");
    assert_eq!(std::fs::read_to_string(site.path().join("result-notes.html")).unwrap(), "mine");
}

/// A lab publishes one result per device of a node: the shortlist says each result's
/// precision, ranks only the precision asked for where one is, and summarises the results of
/// each device, precision and part measured (how many, how many passed their checks, and the
/// median and range of the figure each was ranked by).
#[test]
fn a_shortlist_says_each_results_precision_and_sums_up_each_devices_results() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let record = PathBuf::from(repo_path("results/amd-epyc/20261203T010753Z-dd076e65/20261203T010753Z-dd076e65.json"));
    let lab = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let published = tempfile::tempdir().unwrap();
    let dir = published.path();
    for (stem, slower) in [("fleet-0", 1.0), ("fleet-1", 2.0), ("fleet-2", 4.0)] {
        publish_as(&record, dir, stem, "Fleet GPU", slower, Some(&lab));
    }
    publish_as(&record, dir, "lone", "Lone GPU", 1.5, Some(&lab));
    // The same device measured at another precision (the record re-labelled, then signed).
    let relabelled = tempfile::tempdir().unwrap();
    let mut json: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    json["config"]["suite"]["precision"] = Value::from("bf16");
    let samples = json["telemetry"]["samples_file"].as_str().unwrap().to_owned();
    std::fs::copy(record.with_file_name(&samples), relabelled.path().join(&samples)).unwrap();
    let bf16 = relabelled.path().join("bf16.json");
    std::fs::write(&bf16, serde_json::to_vec(&json).unwrap()).unwrap();
    publish_as(&bf16, dir, "fleet-bf16", "Fleet GPU", 1.0, Some(&lab));

    let key = pubkey();
    let args = |more: &[&str]| -> Vec<String> {
        let base = [
            "shortlist",
            dir.to_str().unwrap(),
            "--workload",
            "lynx-ref-small:128/64",
            "--ttft-p99",
            "2s",
            "--tpot-p99",
            "200ms",
            "--price",
            "fleet-gpu=2",
            "--pubkey",
            &key,
        ];
        base.iter().chain(more).map(|s| s.to_string()).collect()
    };
    let output = lynx_command().args(args(&["--format", "json"])).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let list: Value = serde_json::from_slice(&output.stdout).unwrap();
    let ranked = list["ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 5, "{list}");
    let precisions: Vec<(&str, &str)> =
        ranked.iter().map(|e| (e["device"].as_str().unwrap(), e["precision"].as_str().unwrap())).collect();
    assert_eq!(precisions.iter().filter(|p| **p == ("Fleet GPU", "fp32")).count(), 3, "{precisions:?}");
    assert_eq!(precisions.iter().filter(|p| **p == ("Fleet GPU", "bf16")).count(), 1, "{precisions:?}");
    // The fp32 Fleet GPU's summary: its three results' costs, median and range, by hand.
    let cost = |e: &Value| e["point"]["usd_per_million_output_tokens"].as_f64().unwrap();
    let mut costs: Vec<f64> =
        ranked.iter().filter(|e| e["device"] == "Fleet GPU" && e["precision"] == "fp32").map(cost).collect();
    costs.sort_by(f64::total_cmp);
    let devices = list["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 3, "{devices:?}");
    let fleet = devices.iter().find(|d| d["device"] == "Fleet GPU" && d["precision"] == "fp32").unwrap();
    assert_eq!((fleet["results"].as_u64(), fleet["checks_passed"].as_u64()), (Some(3), Some(3)), "{fleet}");
    let range = &fleet["usd_per_million_output_tokens"];
    assert_eq!(
        [range["min"].as_f64(), range["median"].as_f64(), range["max"].as_f64()],
        [costs[0], costs[1], costs[2]].map(Some),
        "{fleet}"
    );
    let lone = devices.iter().find(|d| d["device"] == "Lone GPU").unwrap();
    assert!(lone["usd_per_million_output_tokens"].is_null() && lone["results"] == 1, "{lone}");
    // Priced devices first, cheapest median first; then the unpriced.
    assert_eq!(devices[2]["device"], "Lone GPU", "{devices:?}");

    let output = lynx_command().args(args(&[])).output().unwrap();
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success() && said.contains("\nby device ("), "{said}");
    let row = said.lines().find(|l| l.starts_with("Fleet GPU") && l.contains(" fp32 ")).unwrap();
    assert!(row.contains(&format!("{:.4} ({:.4}-{:.4})", costs[1], costs[0], costs[2])), "{row}");

    // Only bf16: the one result at it is ranked, the rest are not, each saying why.
    let output = lynx_command().args(args(&["--precision", "bf16", "--format", "json"])).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let list: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(list["ranked"].as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list["request"]["precision"], "bf16");
    let excluded = list["excluded"].as_array().unwrap();
    assert_eq!(excluded.len(), 4, "{list}");
    assert!(excluded.iter().all(|x| x["kind"] == "other precision" && x["reason"] == "measured at fp32, not bf16"));
    let bad = args(&["--precision", "int4"]);
    let line = bad_input(&bad.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(line.contains("expected one of fp32, bf16, fp16, fp8"), "{line}");
}

/// The text of every result page of the site in `site`.
fn result_pages(site: &Path) -> Vec<String> {
    std::fs::read_dir(site)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("result-"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

#[test]
fn the_published_record_verifies_and_builds_the_site() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let results = repo_path("results");
    let keys = repo_path("results/keys");
    let unverified = common::unverified(Path::new(&results), Path::new(&keys));
    assert!(unverified.is_empty(), "{unverified:?} do not verify against results/keys");
    let envelopes = lynx_attest::trust::find_envelopes(&[PathBuf::from(&results)]).unwrap();
    let site = tempfile::tempdir().unwrap();
    let output = lynx(&["report", &results, "--keys", &keys, "--out", site.path().to_str().unwrap()]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = std::fs::read_to_string(site.path().join("index.html")).unwrap();
    assert_eq!(index.matches("class=\"result\"").count(), envelopes.len());
    assert!(!index.contains("class=\"bad\">rejected") && !index.contains("untrusted"), "{index}");
    // Each result's page says how its warm-up went.
    let run = "-20261203t010753z-dd076e65.html";
    let page = std::fs::read_dir(site.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(run))
        .unwrap_or_else(|| panic!("no page ending {run} in {}", site.path().display()));
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.contains("<th>warm-up</th><td>warm-up 60.2 s, "), "{page}");
}

/// `lynx collect` copies each run as `lynx run` wrote it: the published record (folders laid out
/// as `lynx run` writes them), collected, is the same files under the same names, its run ids'
/// case kept, with each run's plan and journal. A run collected before 2026-12-07, when collect
/// named it by its id in lower case, is found under that name and not collected twice.
#[test]
fn collecting_the_published_record_copies_each_run_as_lynx_run_wrote_it() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (results, keys) = (repo_path("results"), repo_path("results/keys"));
    let into = tempfile::tempdir().unwrap();
    let collect = || lynx(&["collect", &results, "--into", into.path().to_str().unwrap(), "--keys", &keys]);
    let output = collect();
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{said}{}", String::from_utf8_lossy(&output.stderr));
    let relative = |root: &str, files: Vec<PathBuf>| -> Vec<String> {
        let mut names: Vec<String> =
            files.iter().map(|f| f.strip_prefix(root).unwrap().display().to_string()).collect();
        names.sort();
        names
    };
    let published: Vec<String> = relative(&results, files_under(Path::new(&results)))
        .into_iter()
        .filter(|name| name.contains('/') && !name.starts_with("keys/"))
        .collect();
    let into_root = into.path().to_str().unwrap();
    let collected: Vec<String> =
        relative(into_root, files_under(into.path())).into_iter().filter(|name| name != "index.json").collect();
    assert_eq!(collected, published, "{said}");
    assert!(published.iter().any(|name| name.ends_with("Z-1e82de47/20261207T104416Z-1e82de47.plan.json")));
    assert!(published.iter().any(|name| name.ends_with(".journal.jsonl")));
    for name in &published {
        let (from, to) = (Path::new(&results).join(name), into.path().join(name));
        assert!(std::fs::read(from).unwrap() == std::fs::read(to).unwrap(), "{name} is not copied as it was");
    }

    // One run as collect used to name it: its folder and files in lower case, but for the
    // samples file, which kept the name its envelope signs.
    let run = "20261207T104416Z-1e82de47";
    let (device_dir, lower) = (into.path().join("intel-r-xeon-r-processor"), run.to_ascii_lowercase());
    std::fs::rename(device_dir.join(run), device_dir.join(&lower)).unwrap();
    for file in
        files_under(&device_dir.join(&lower)).into_iter().filter(|f| !f.ends_with(format!("{run}.samples.jsonl")))
    {
        let name = file.file_name().unwrap().to_string_lossy().replace(run, &lower);
        std::fs::rename(&file, file.with_file_name(name)).unwrap();
    }
    let again = collect();
    let said = String::from_utf8_lossy(&again.stdout).into_owned();
    assert!(again.status.success(), "{said}{}", String::from_utf8_lossy(&again.stderr));
    let envelopes = lynx_attest::trust::find_envelopes(&[PathBuf::from(&results)]).unwrap();
    assert_eq!(said.lines().filter(|l| l.starts_with("already collected ")).count(), envelopes.len(), "{said}");
    assert!(said.contains(&format!("/{lower}/{lower}.intoto.json")), "{said}");
    assert!(!device_dir.join(run).exists(), "the run is collected a second time beside its old copy: {said}");
}

/// A buyer shortlisting at the length mix a published result served, under the bound it served
/// it under, gets the measured figure, with the result's own simulated figure beside it; written
/// as the uniform range it draws or as InferenceX's range ratio of the same range. Another mix
/// gets the simulation alone.
#[test]
fn a_shortlist_at_a_served_length_mix_ranks_the_measured_figure() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let results = repo_path("results");
    let keys = repo_path("results/keys");
    let run = "20261202T182418Z-bb6a46e8";
    let result: Value =
        serde_json::from_slice(&std::fs::read(Path::new(&results).join(format!("amd-epyc/{run}/{run}.json"))).unwrap())
            .unwrap();
    let published = result["derived"]["latency_bounded"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["workload"]["name"] == "short" && b["bound"]["name"] == "server")
        .unwrap()
        .clone();
    assert_eq!(published["workload"]["isl"], serde_json::json!({"uniform": [16, 64]}), "{published}");
    // The shortlist at `shape` under the bound run 42 served it under, in `format`.
    let shortlist = |shape: &str, format: &str| {
        let workload = format!("lynx-ref-small:{shape}");
        let output = lynx(&[
            "shortlist",
            &results,
            "--keys",
            &keys,
            "--workload",
            &workload,
            "--ttft-p99",
            "2s",
            "--tpot-p99",
            "100ms",
            "--format",
            format,
        ]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8(output.stdout).unwrap()
    };
    let entry = |shape: &str| {
        let list: Value = serde_json::from_str(&shortlist(shape, "json")).unwrap();
        list["ranked"].as_array().unwrap().iter().find(|e| e["run_id"] == run).unwrap().clone()
    };
    // Run 42's derived figures predate the window's request count, which the shortlist gives.
    let requests = result["serving"]["served"][0]["rates"][0]["requests"].clone();
    assert_eq!(requests, 24, "{}", result["serving"]);
    // The simulated point is the shortlist's own simulation's: the same server as run 42's,
    // its figures near the ones the simulation of that day gave (since, a decode group ends at
    // an arrival: docs/SWEEPS.md, "A decode group ends at an arrival").
    let figures =
        ["request_rate_per_s", "output_tok_per_s_per_device", "tok_per_s_per_user", "ttft_p99_s", "tpot_p99_s"];
    let mut simulated = Vec::new();
    for shape in ["16-64/16", "0.25x64/16"] {
        let mut entry = entry(shape);
        let measured = entry["measured"].as_object_mut().unwrap();
        assert_eq!(measured.remove("requests"), Some(requests.clone()), "{shape}");
        assert_eq!(entry["measured"], published["measured"], "{shape}: {entry}");
        // And the simulated point's steady part, which the shortlist's simulation gives and
        // run 42's derived figures predate.
        let mut point = entry["point"].as_object().unwrap().clone();
        let steady = point.remove("steady_output_tok_per_s_per_device");
        assert!(steady.as_ref().and_then(Value::as_f64).is_some_and(|tok| tok > 0.0), "{shape}: {steady:?}");
        let mut then = published["point"].as_object().unwrap().clone();
        for figure in figures {
            let (now, was) = (seconds(&point.remove(figure).unwrap()), seconds(&then.remove(figure).unwrap()));
            assert!((now / was - 1.0).abs() < 0.05, "{shape}: {figure} {now} against run 42's {was}");
        }
        assert_eq!(point, then, "{shape}: {entry}");
        simulated.push(entry["point"].clone());
    }
    assert_eq!(simulated[0], simulated[1], "one mix, two spellings");
    let other = entry("20-64/16");
    assert!(other.get("measured").is_none() && other["point"]["output_tok_per_s_per_device"].is_number(), "{other}");
    // The table ranks the measured figure and shows the simulated one beside it, unranked, each
    // saying over how many requests (a short window's, and the steady state's).
    let table = shortlist("16-64/16", "table");
    let rows: Vec<&str> = table.lines().filter(|l| l.contains(run)).collect();
    let shown = |figure: &Value| format!(" {:.1} ", seconds(&figure["output_tok_per_s_per_device"]));
    assert!(rows.len() == 2 && rows[0].ends_with(" measured over 24 requests"), "{table}");
    assert!(rows[0].contains(&shown(&published["measured"])), "{table}");
    assert!(
        rows[1].starts_with(' ') && rows[1].ends_with("simulated over 2000 requests, beside the measured"),
        "{table}"
    );
    assert!(rows[1].contains(&shown(&simulated[0])), "{table}");
}

/// A signature vouches for who made a result's figures, not that they passed: `lynx verify`'s
/// line for a valid result says where its own run fell short (stopped early, checks failed),
/// and its JSON verdict gives the status and the failed checks; the exit status stays the
/// signatures' alone. `lynx compare`'s verdict names the checks either run failed.
#[test]
fn verify_says_where_a_valid_results_run_fell_short() {
    let record = PathBuf::from(repo_path("results/amd-epyc/20261203T010753Z-dd076e65/20261203T010753Z-dd076e65.json"));
    let signing = lynx_attest::read_signing_key(&config_home().join("lynx/lynx.key")).unwrap();
    let key = pubkey();
    let dir = tempfile::tempdir().unwrap();
    let fail = |json: &mut Value, names: &[&str]| {
        for check in json["checks"].as_array_mut().unwrap() {
            if names.contains(&check["name"].as_str().unwrap()) {
                check["passed"] = Value::from(false);
            }
        }
    };
    let passed = publish_edited(&record, dir.path(), "passed", |_| {}, Some(&signing));
    let failed = publish_edited(
        &record,
        dir.path(),
        "failed",
        |json| {
            json["run_id"] = Value::from("20261203T010753Z-failed00");
            fail(json, &["simulation"]);
        },
        Some(&signing),
    );
    let partial = publish_edited(
        &record,
        dir.path(),
        "partial",
        |json| {
            json["status"] = Value::from("partial");
            fail(json, &["stability", "equilibrium"]);
        },
        Some(&signing),
    );
    let files: Vec<&str> = [&passed, &failed, &partial].iter().map(|p| p.to_str().unwrap()).collect();
    let output = lynx(&["verify", files[0], files[1], files[2], "--pubkey", &key]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "valid signatures, whatever their runs said: {said}");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 3, "{said}");
    assert!(lines[0].starts_with(&format!("{}: valid (signed by key ", files[0])) && lines[0].ends_with(')'), "{said}");
    let failed_tail = "; its run FAILED its simulation check: figures it marked not to publish as the device's";
    assert!(lines[1].starts_with(&format!("{}: valid (", files[1])) && lines[1].ends_with(failed_tail), "{said}");
    let partial_tail = "); a partial result: its run stopped before every cell ran; its run FAILED its \
                        equilibrium, stability checks: figures it marked not to publish as the device's";
    assert!(lines[2].starts_with(&format!("{}: valid (", files[2])) && lines[2].ends_with(partial_tail), "{said}");

    let output = lynx(&["verify", files[0], files[1], files[2], "--pubkey", &key, "--json"]);
    assert!(output.status.success());
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    let field = |i: usize, name: &str| verdicts[i][name].clone();
    assert_eq!((field(0, "status"), field(0, "failed_checks")), (Value::from("complete"), Value::Null), "{verdicts}");
    assert_eq!(field(1, "failed_checks"), serde_json::json!(["simulation"]), "{verdicts}");
    assert_eq!(field(2, "status"), Value::from("partial"), "{verdicts}");
    assert_eq!(field(2, "failed_checks"), serde_json::json!(["equilibrium", "stability"]), "{verdicts}");

    // `lynx compare` (and so `lynx reproduce`) says it in its verdict, after what the figures
    // say: the same figures, so a reproduction by them, whose second run failed a check.
    let output = lynx(&["compare", files[0], files[1], "--pubkey", &key]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let verdict = said.lines().find(|l| l.starts_with("verdict: ")).unwrap_or_else(|| panic!("{said}"));
    assert!(verdict.starts_with("verdict: reproduced: all "), "{verdict}");
    assert!(verdict.ends_with("; second's run FAILED its simulation check"), "{verdict}");
    let output = lynx(&["compare", files[2], files[0], "--pubkey", &key, "--json"]);
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        comparison["verdict"]["failed_checks"],
        serde_json::json!({"first": ["equilibrium", "stability"]}),
        "{comparison}"
    );
    let output = lynx(&["compare", files[0], files[0], "--pubkey", &key, "--json"]);
    let comparison: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(comparison["verdict"].get("failed_checks").is_none(), "{comparison}");

    // `lynx collect` publishes it as it marks itself, and says so on its line.
    let collected = tempfile::tempdir().unwrap();
    let into = collected.path().to_str().unwrap();
    let output = lynx(&["collect", files[0], files[1], "--into", into, "--pubkey", &key]);
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "{said}{}", String::from_utf8_lossy(&output.stderr));
    let line = |stem: &str| {
        let from = format!("collected {} -> ", dir.path().join(format!("{stem}.intoto.json")).display());
        said.lines().find(|l| l.starts_with(&from)).unwrap_or_else(|| panic!("{stem}: {said}"))
    };
    assert!(line("passed").ends_with(".intoto.json"), "{said}");
    let tail = ".intoto.json; its run FAILED its simulation check (checks_passed: false in the index)";
    assert!(line("failed").ends_with(tail), "{said}");

    // An invalid one says neither: its figures are not vouched for at all.
    let mut envelope: Value = serde_json::from_slice(&std::fs::read(&failed).unwrap()).unwrap();
    envelope["signatures"][0]["sig"] = Value::from("AAAA");
    std::fs::write(&failed, serde_json::to_vec(&envelope).unwrap()).unwrap();
    let output = lynx(&["verify", files[1], "--pubkey", &key, "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let verdicts: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(verdicts[0].get("status").is_none() && verdicts[0].get("failed_checks").is_none(), "{verdicts}");
}
