//! The model catalogue, `lynx models import`, layer subsets and shards, and weights read from a checkpoint.

mod common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

#[test]
fn models_lists_the_catalogue() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    // Built into the binary: listed from any folder, with no models folder.
    let elsewhere = tempfile::tempdir().unwrap();
    let output =
        lynx_command().arg("models").current_dir(elsewhere.path()).env_remove("LYNX_MODELS_DIR").output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for name in ["llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b", "mixtral-8x7b", "gpt-oss-120b", "deepseek-r1"] {
        assert!(stdout.lines().any(|l| l.starts_with(name)), "{name} missing:\n{stdout}");
    }
    let deepseek = stdout.lines().find(|l| l.starts_with("deepseek-r1")).unwrap();
    assert!(deepseek.contains("671.03 B") && deepseek.contains("8 of 256 +1"), "{deepseek}");

    let output = lynx_command().args(["models", "--json"]).current_dir(elsewhere.path()).output().unwrap();
    let models: Value = serde_json::from_slice(&output.stdout).unwrap();
    let llama = models.as_array().unwrap().iter().find(|m| m["name"] == "llama-3.1-8b").unwrap();
    assert_eq!(llama["parameters"], 8_030_261_248u64);
    assert_eq!(llama["kv_bytes_per_token"]["bf16"], 131_072);
    assert_eq!(llama["weight_bytes"]["fp32"], 4 * 8_030_261_248u64);
}

#[test]
fn models_import_writes_a_catalogue_file() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    // A Hugging Face snapshot folder: the model is named after it.
    let snapshot = dir.path().join("Qwen3-32B");
    std::fs::create_dir(&snapshot).unwrap();
    std::fs::copy(repo_path("crates/lynx-schema/tests/data/hf/Qwen3-32B.json"), snapshot.join("config.json")).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_lynx"))
        .args(["models", "import", "Qwen3-32B/config.json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("32.76 B parameters"));
    let written = std::fs::read_to_string(dir.path().join("models/qwen3-32b.toml")).unwrap();
    let catalogue = std::fs::read_to_string(repo_path("models/qwen3-32b.toml")).unwrap();
    let parse = |text: &str| lynx_schema::config::ModelShape::from_toml(text, "x").unwrap();
    assert_eq!(parse(&written), parse(&catalogue));

    // The file now exists: importing again is refused without --force.
    let again = |extra: &[&str]| {
        let mut args = vec!["models", "import", "Qwen3-32B/config.json"];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_lynx")).args(&args).current_dir(dir.path()).output().unwrap()
    };
    let refused = again(&[]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("pass --force"));
    assert!(again(&["--force"]).status.success());

    // --out and --name.
    let out = dir.path().join("elsewhere/ds.toml");
    let output = lynx(&[
        "models",
        "import",
        &repo_path("crates/lynx-schema/tests/data/hf/DeepSeek-R1.json"),
        "--name",
        "my-r1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(parse(&std::fs::read_to_string(&out).unwrap()).name, "my-r1");
}

#[test]
fn importing_what_lynx_cannot_model_is_bad_input() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"model_type": "gemma2", "hidden_size": 8}"#).unwrap();
    let out = dir.path().join("m.toml");
    let line = bad_input(&["models", "import", config.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(line.contains("model_type 'gemma2' is not supported"), "{line}");
    assert!(!out.exists());
    let line = bad_input(&["models", "import", "/no/such/config.json"]);
    assert!(line.contains("/no/such/config.json") && line.contains("does not exist"), "{line}");
}

/// A models folder whose suite measures 2 of the test model's 8 layers, as the shard of one
/// device of 2-way tensor parallelism, at one prefill and one decode batch.
fn scaled_models() -> tempfile::TempDir {
    let models = models(|suite| {
        format!("{suite}\n[scale]\nlayers = 2\ntp = 2\n")
            .replace("batches = [1, 8]", "batches = [2]")
            .replace("prompt_lens = [16, 256]", "prompt_lens = [64]")
    });
    // Layers heavy enough that two of them clearly outweigh the embedding and lm head.
    let wide = common::fixture("models/test-small.toml")
        .replace("num_layers = 2", "num_layers = 8")
        .replace("intermediate_size = 704", "intermediate_size = 4096");
    std::fs::write(models.path().join("test-small.toml"), wide).unwrap();
    models
}

#[test]
fn a_scaled_run_states_what_it_measured_and_extrapolated() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = scaled_models();
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.push("--unsigned");
    let output = lynx(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(stdout.contains("UNSIGNED: "), "{stdout}");
    let envelope = result_file(out.path()).with_extension("intoto.json");
    let output = lynx(&["verify", envelope.to_str().unwrap(), "--pubkey", &pubkey()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stdout).contains("INVALID at unsigned"), "{output:?}");
    assert!(stdout.contains("measured: 2 layers, the shard of one device of 2-way tensor parallelism"), "{stdout}");
    // What came before warm-up, timed, in the order it ran (no probes or graphs in this suite).
    let before = stderr.lines().find(|l| l.contains("before warm-up: ")).unwrap_or_else(|| panic!("{stderr}"));
    let parity = before.find("parity ").unwrap_or_else(|| panic!("{before}"));
    let build = before.find(", building the model ").unwrap_or_else(|| panic!("{before}"));
    assert!(parity < build && before.ends_with(" s"), "{before}");
    // Where parity's seconds went, after it: a CPU run runs no second set of CPU kernels.
    let mut at = parity;
    for part in ["parity's float64 weights ", "parity's device copy ", "parity's float64 run ", "parity's device run "]
    {
        let found = before.find(part).unwrap_or_else(|| panic!("{part}: {before}"));
        assert!(at < found && found < build, "{part}: {before}");
        at = found;
    }
    assert!(!before.contains("parity's CPU kernels"), "{before}");

    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let measured = &result["config"]["measured"];
    assert_eq!(measured["shape"]["num_layers"], 2);
    assert_eq!(measured["shape"]["attention"]["num_heads"], 4);
    assert_eq!(measured["shape"]["mlp"]["intermediate_size"], 2048);
    let not_measured: Vec<&str> =
        measured["not_measured"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(not_measured.iter().any(|n| n.contains("tensor-parallel collectives")), "{not_measured:?}");
    assert!(not_measured.iter().any(|n| n.contains("6 of the model's 8 layers")), "{not_measured:?}");

    let mut host_readings = 0;
    for cell in result["cells"].as_array().unwrap() {
        assert_eq!(cell["status"], "ok", "{cell}");
        // Issue 15: every cell names the attention kernel its steps ran, and its host issue time,
        // which cannot exceed the step; a CPU runs kernels as they are issued, so no cell there
        // is judged launch-bound.
        assert!(["flash", "math"].contains(&cell["attention"].as_str().unwrap_or_default()), "{cell}");
        let issue = seconds(&cell["issue_median_s"]);
        assert!(issue > 0.0 && issue <= seconds(&cell["step_time"]["max_s"]), "{cell}");
        assert!(cell.get("launch_bound").is_none(), "{cell}");
        // Every measured cell says where its slow steps fell against the host sampler's timed
        // readings (the GPU's source beside it on a GPU), so that an unstable cell shows whether
        // they line up.
        let slow = &cell["slow_steps"];
        assert_eq!(slow["steps"], cell["step_time"]["n"], "{cell}");
        assert!(slow["slow"].as_u64().unwrap() <= slow["steps"].as_u64().unwrap(), "{cell}");
        // And what the thread running the steps did in them: never more steps preempted or
        // waiting than there were, never more time on its CPU and waiting to run together than
        // wall time (a thread is one or the other, and each is counted within the step), the
        // steps' wall time that of the cell.
        let thread = &slow["thread"];
        let count = |key: &str| thread[key].as_u64().unwrap_or_else(|| panic!("{key}: {cell}"));
        let (steps, slow_steps) = (slow["steps"].as_u64().unwrap(), slow["slow"].as_u64().unwrap());
        assert!(count("slow_preempted") <= slow_steps && count("slow_blocked") <= slow_steps, "{cell}");
        assert!(count("others_preempted") + slow_steps <= steps && count("others_blocked") + slow_steps <= steps);
        let at_least_zero =
            |key: String| thread[&key].as_f64().filter(|s| *s >= 0.0).unwrap_or_else(|| panic!("{key}"));
        for part in ["slow", "others"] {
            let (cpu, wall) = (at_least_zero(format!("{part}_cpu_s")), at_least_zero(format!("{part}_wall_s")));
            let waited = at_least_zero(format!("{part}_runnable_s"));
            assert!(cpu + waited <= wall + 1e-6 * steps as f64, "{part}: {cell}");
        }
        // A CPU has no caching allocator to ask, and runs its kernels as they are issued: nothing
        // is said of either.
        assert!(slow.get("allocator").is_none() && slow.get("issue").is_none(), "{cell}");
        // The steal is part of the other processes' load, never more than it.
        if let (Some(stolen), Some(other)) = (cell["stolen_cpu_cores"].as_f64(), cell["other_cpu_cores"].as_f64()) {
            assert!(stolen >= 0.0 && stolen <= other + 1e-9, "{cell}");
        }
        let wall = at_least_zero("slow_wall_s".into()) + at_least_zero("others_wall_s".into());
        assert!(wall > 0.0 && wall <= seconds(&cell["measured_s"]), "{cell}");
        // A sampler starved on a busy host may miss a short cell, so the host's readings are
        // required of the run, below, not of each cell.
        if let Some(host) = slow["during_readings"].as_array().unwrap().iter().find(|r| r["source"] == "host") {
            assert!(host["readings"].as_u64().unwrap() >= 1 && seconds(&host["reading_median_s"]) > 0.0, "{cell}");
            host_readings += 1;
        }
        let full = &cell["full_depth"];
        let (measured_median, head, estimate) = (
            seconds(&cell["step_time"]["median_s"]),
            seconds(&full["head_only"]["median_s"]),
            seconds(&full["median_s"]),
        );
        assert!(head < measured_median && measured_median < estimate, "{cell}");
        assert!((estimate - (head + 4.0 * (measured_median - head))).abs() < 1e-12, "{cell}");
        let batch = cell["batch"].as_f64().unwrap();
        let tokens = batch * cell["prompt_len"].as_f64().unwrap_or(1.0);
        assert!((seconds(&cell["tok_per_s_per_device"]) - tokens / estimate).abs() < 1e-9 * tokens / estimate);
    }
    assert!(host_readings > 0, "no cell's steps were set against the host's readings");
}

#[test]
fn a_scale_the_model_cannot_take_is_bad_input() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    bad_suite(|s| format!("{s}\n[scale]\ntp = 3\n"), &["not divisible by scale.tp (3)"]);
    bad_suite(|s| format!("{s}\n[scale]\nlayers = 5\n"), &["scale.layers (5)"]);
}

/// Write `tensors` (name, shape) as an F32 safetensors file, values from a fixed sequence; the
/// format as published (8-byte header length, JSON header, raw little-endian data).
fn write_safetensors(path: &Path, tensors: &[(&str, Vec<usize>)], skip: &str) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    let mut state = 12345u64;
    for (name, shape) in tensors.iter().filter(|(n, _)| *n != skip) {
        let count: usize = shape.iter().product();
        let begin = data.len();
        let is_norm = name.ends_with("norm.weight");
        for _ in 0..count {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let uniform = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            let value = if is_norm { 1.0 + 0.1 * uniform } else { 0.1 * uniform };
            data.extend_from_slice(&value.to_le_bytes());
        }
        header.insert(
            (*name).to_owned(),
            serde_json::json!({"dtype": "F32", "shape": shape, "data_offsets": [begin, data.len()]}),
        );
    }
    let header = serde_json::to_vec(&header).unwrap();
    let mut file = (header.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&header);
    file.extend_from_slice(&data);
    std::fs::write(path, file).unwrap();
}

/// The Hugging Face tensors of the test model (2 layers, GQA 8/2 heads of 32, MLP 704).
fn test_small_tensors() -> Vec<(&'static str, Vec<usize>)> {
    let mut tensors = vec![
        ("model.embed_tokens.weight", vec![4096, 256]),
        ("model.norm.weight", vec![256]),
        ("lm_head.weight", vec![4096, 256]),
    ];
    for layer in ["model.layers.0", "model.layers.1"] {
        for (name, shape) in [
            ("input_layernorm.weight", vec![256]),
            ("post_attention_layernorm.weight", vec![256]),
            ("self_attn.q_proj.weight", vec![256, 256]),
            ("self_attn.k_proj.weight", vec![64, 256]),
            ("self_attn.v_proj.weight", vec![64, 256]),
            ("self_attn.o_proj.weight", vec![256, 256]),
            ("mlp.gate_proj.weight", vec![704, 256]),
            ("mlp.up_proj.weight", vec![704, 256]),
            ("mlp.down_proj.weight", vec![256, 704]),
        ] {
            tensors.push((Box::leak(format!("{layer}.{name}").into_boxed_str()), shape));
        }
    }
    tensors
}

/// A run reads its weights from a checkpoint and records what its model read (every tensor of
/// the test model here, and their digest). Stopped and resumed, it goes on with the same
/// checkpoint and refuses one that changed since it began (one byte of a tensor here): its cells
/// would describe two sets of weights as one.
#[test]
fn a_run_reads_weights_from_a_checkpoint() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| {
        suite.replace("batches = [1, 8]", "batches = [2]").replace("prompt_lens = [16, 256]", "prompt_lens = [32]")
    });
    let weights = tempfile::tempdir().unwrap();
    let file = weights.path().join("model.safetensors");
    write_safetensors(&file, &test_small_tensors(), "");
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.extend(["--weights", weights.path().to_str().unwrap()]);
    let mut child = lynx_command()
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Stopped once the result records what the model read (it warms up next, for a second).
    let read_of = |out: &Path| -> Value {
        let result: Value = result_files(out)
            .pop()
            .and_then(|path| serde_json::from_slice(&std::fs::read(path).ok()?).ok())
            .unwrap_or_default();
        result["config"]["weights"]["read"].clone()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while read_of(out.path()).is_null() {
        assert!(std::time::Instant::now() < deadline, "no weights read within 120 s");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it recorded its weights");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: kill takes no pointers; the pid is our child's, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let stopped = child.wait_with_output().unwrap();
    assert_eq!(stopped.status.code(), Some(130), "{}", String::from_utf8_lossy(&stopped.stderr));
    let read = read_of(out.path());
    let tensors = test_small_tensors();
    let bytes: usize = tensors.iter().map(|(_, shape)| 4 * shape.iter().product::<usize>()).sum();
    assert_eq!((read["tensors"].as_u64(), read["bytes"].as_u64()), (Some(tensors.len() as u64), Some(bytes as u64)));
    let sha256 = read["sha256"].as_str().unwrap().to_owned();
    assert!(sha256.len() == 64 && sha256.bytes().all(|b| b.is_ascii_hexdigit()), "{sha256}");

    let dir = run_dirs(out.path()).pop().unwrap();
    let resume = ["run", "--resume", dir.to_str().unwrap(), "--weights", weights.path().to_str().unwrap()];
    let journal = journal_of(&dir);
    let original = std::fs::read(&file).unwrap();
    let mut changed = original.clone();
    *changed.last_mut().unwrap() ^= 1;
    std::fs::write(&file, &changed).unwrap();
    // Found as the model is built, after the resumed run's first lines: its last line, exit 2.
    let refused = lynx(&resume);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    let line = stderr.lines().last().unwrap_or_default();
    let said = format!(
        "lynx: error: {}: the checkpoint changed since this run began: the model read {} tensors of {bytes} bytes",
        weights.path().display(),
        tensors.len()
    );
    assert!(line.starts_with(&said), "{stderr}");
    assert!(line.ends_with(&format!("where the run's first worker read {} of {bytes}, sha256 {sha256}", tensors.len())));
    assert!(journal_of(&dir) == journal, "the refused resume wrote to the journal");

    // The same checkpoint at another path (moved, or another node's mount of it) is taken once
    // the run has recorded what its model read, and held to it; before that, refused.
    std::fs::write(&file, &original).unwrap();
    let moved = tempfile::tempdir().unwrap();
    std::fs::copy(&file, moved.path().join("model.safetensors")).unwrap();
    let resume = ["run", "--resume", dir.to_str().unwrap(), "--weights", moved.path().to_str().unwrap()];
    let result_path = result_file(out.path());
    let recorded = std::fs::read(&result_path).unwrap();
    let mut unrecorded: Value = serde_json::from_slice(&recorded).unwrap();
    unrecorded["config"]["weights"].as_object_mut().unwrap().remove("read");
    std::fs::write(&result_path, serde_json::to_vec(&unrecorded).unwrap()).unwrap();
    let line = bad_input(&resume);
    let said = "(a checkpoint at another path is taken only once the run has recorded what its model read of it)";
    assert!(line.trim_end().ends_with(said), "{line}");
    std::fs::write(&result_path, &recorded).unwrap();
    let output = lynx(&resume);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = format!("weights: {} tensors of {:.2} MB read", tensors.len(), bytes as f64 / 1e6);
    assert!(stdout.contains(&summary) && stdout.contains(&sha256), "{stdout}");
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    let record = &result["config"]["weights"];
    assert_eq!(record["origin"], "checkpoint", "{record}");
    assert_eq!(record["files"][0][0], "model.safetensors");
    assert_eq!(record["read"], read);
    let plan: Value = serde_json::from_slice(
        &std::fs::read(dir.join(format!("{}.plan.json", dir.file_name().unwrap().to_string_lossy()))).unwrap(),
    )
    .unwrap();
    assert_eq!(plan["weights"], moved.path().to_str().unwrap(), "the workers read the moved checkpoint");
    assert_eq!(record["dir"], weights.path().to_str().unwrap(), "the result keeps the folder the run began with");
    assert_eq!(result["status"], "complete");
    assert_eq!(result["checks"][0]["passed"], true, "{}", result["checks"]);
    assert!(result["cells"].as_array().unwrap().iter().all(|c| c["status"] == "ok"));

    // Reproduced on a checkpoint of the same files and sizes, one byte changed: no warning
    // before the run (names and sizes agree), one as soon as the model is built, and the
    // comparison names the weights as a difference.
    std::fs::write(&file, &changed).unwrap();
    let published = result_file(out.path()).with_extension("intoto.json");
    let local = tempfile::tempdir().unwrap();
    let key = pubkey();
    let reproduce = [
        "reproduce",
        published.to_str().unwrap(),
        "--pubkey",
        &key,
        "--weights",
        weights.path().to_str().unwrap(),
        "--out",
        local.path().to_str().unwrap(),
    ];
    // Its plan says what the published model read, which it cannot check before the build.
    let planned = lynx(&[reproduce.as_slice(), &["--plan"]].concat());
    let plan = String::from_utf8_lossy(&planned.stdout);
    assert!(planned.status.success(), "{}", String::from_utf8_lossy(&planned.stderr));
    let said = format!(
        "weights read: the published run's model read {} tensors of {:.2} MB, sha256 {sha256}; this node's model is \
         held to that once it is built",
        tensors.len(),
        bytes as f64 / 1e6
    );
    assert!(plan.contains(&said), "{plan}");
    let output = lynx(&reproduce);
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{stderr}");
    let warning = format!(
        "lynx: warning: the weights this reproduction read are not the published run's: {} tensors of {bytes} bytes",
        tensors.len()
    );
    let warned: Vec<&str> = stderr.lines().filter(|l| l.contains("warning: the weights")).collect();
    assert!(warned.len() == 1 && warned[0].starts_with(&warning), "{stderr}");
    assert!(warned[0].contains(&format!("where the published run read {} of {bytes}, sha256 {sha256}", tensors.len())));
    let local_read: Value = serde_json::from_slice(&std::fs::read(result_file(local.path())).unwrap()).unwrap();
    let local_sha256 = local_read["config"]["weights"]["read"]["sha256"].as_str().unwrap().to_owned();
    let differs = format!(
        "differs: weights: {} tensors of {bytes} bytes read from a checkpoint, sha256 {sha256} vs",
        tensors.len()
    );
    assert!(stdout.contains(&differs) && stdout.contains(&local_sha256) && local_sha256 != sha256, "{stdout}");

    // A checkpoint without one of the model's tensors is bad input, found before any result.
    let broken = tempfile::tempdir().unwrap();
    write_safetensors(
        &broken.path().join("model.safetensors"),
        &test_small_tensors(),
        "model.layers.1.mlp.down_proj.weight",
    );
    let line = refused_weights(models.path(), broken.path());
    assert!(line.contains("no tensor model.layers.1.mlp.down_proj.weight"), "{line}");
}

/// A checkpoint (with no index file) missing a tensor of a layer past the parity check's, or
/// holding it in another shape, is refused once the parity check has read its layers, from the
/// headers alone: before the probes and before any result, not when the model is built.
#[test]
fn a_layer_past_the_parity_checks_is_held_to_the_layers_it_read() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| format!("{suite}\n[parity]\nlayers = 1\n"));
    let missing = tempfile::tempdir().unwrap();
    let down = "model.layers.1.mlp.down_proj.weight";
    write_safetensors(&missing.path().join("model.safetensors"), &test_small_tensors(), down);
    let line = refused_weights(models.path(), missing.path());
    assert!(
        line.contains(&format!("no tensor {down} (the model reads it as it read model.layers.0.mlp.down_proj.weight)")),
        "{line}"
    );
    let misshapen = tempfile::tempdir().unwrap();
    let tensors: Vec<(&str, Vec<usize>)> = test_small_tensors()
        .into_iter()
        .map(|(name, shape)| if name == down { (name, vec![256, 700]) } else { (name, shape) })
        .collect();
    write_safetensors(&misshapen.path().join("model.safetensors"), &tensors, "");
    let line = refused_weights(models.path(), misshapen.path());
    assert!(
        line.contains(&format!(
            "tensor {down} is F32 [256, 700], where model.layers.0.mlp.down_proj.weight, which the model read as it \
             will read it, is F32 [256, 704]"
        )),
        "{line}"
    );
}

/// A run with `--weights dir` that is refused as bad input before any result: its one line.
fn refused_weights(models: &Path, dir: &Path) -> String {
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models, out.path());
    args.extend(["--weights", dir.to_str().unwrap()]);
    let line = bad_input(&args);
    assert!(result_files(out.path()).is_empty());
    line
}

/// A tensor-parallel shard reads the first device's part of each tensor from the whole
/// checkpoint (heads, MLP widths and vocabulary halved here); a file that is not a safetensors
/// file is bad input naming it, found before any result.
#[test]
fn a_run_reads_a_tensor_parallel_shard_of_a_checkpoint() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = models(|suite| {
        let suite =
            suite.replace("batches = [1, 8]", "batches = [2]").replace("prompt_lens = [16, 256]", "prompt_lens = [32]");
        format!("{suite}\n[scale]\ntp = 2\n")
    });
    let weights = tempfile::tempdir().unwrap();
    write_safetensors(&weights.path().join("model.safetensors"), &test_small_tensors(), "");
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.extend(["--weights", weights.path().to_str().unwrap()]);
    // The plan says where the weights come from and how much of them is read, and that the
    // folder's config.json (Llama 3.1 8B's here) describes another model than the one measured.
    let llama = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lynx-schema/tests/data/hf/Llama-3.1-8B.json");
    std::fs::copy(llama, weights.path().join("config.json")).unwrap();
    let plan = lynx(&[args.as_slice(), &["--plan"]].concat());
    let stdout = String::from_utf8_lossy(&plan.stdout);
    assert!(
        stdout.contains("warning: the checkpoint's config.json describes another model than test-small: "),
        "{stdout}"
    );
    let size = std::fs::metadata(weights.path().join("model.safetensors")).unwrap().len();
    let said = format!(
        "1 *.safetensors files, {:.2} MB; only the tensors the measured part of the model needs are read, and of \
         each the part the first of 2 tensor-parallel devices holds)",
        size as f64 / 1e6
    );
    assert!(stdout.contains(&said), "{stdout}");
    let output = lynx(&args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    assert_eq!(result["config"]["weights"]["origin"], "checkpoint");
    assert_eq!(result["config"]["suite"]["scale"]["tp"], 2);
    // Every tensor read, most of them a part of it.
    let tensors = test_small_tensors();
    let whole: usize = tensors.iter().map(|(_, shape)| 4 * shape.iter().product::<usize>()).sum();
    let read = &result["config"]["weights"]["read"];
    assert_eq!(read["tensors"].as_u64(), Some(tensors.len() as u64), "{read}");
    assert!(read["bytes"].as_u64().unwrap() < whole as u64 * 3 / 5, "{read} of {whole} bytes");
    assert_eq!(result["checks"][0]["passed"], true, "{}", result["checks"]);
    assert!(result["cells"].as_array().unwrap().iter().all(|c| c["status"] == "ok"));

    let garbage = tempfile::tempdir().unwrap();
    std::fs::write(garbage.path().join("model.safetensors"), b"\xff\xff\xff\xff\xff\xff\xff\x7fnot a header").unwrap();
    let line = refused_weights(models.path(), garbage.path());
    assert!(line.contains("model.safetensors: not a safetensors file"), "{line}");
}

/// A layer subset holds its head-only model, so a cell whose layers measured no slower than the
/// head alone contradicted itself (the pace moved between the two measurements): it is measured
/// once more, and says why, rather than recorded as an error at once. The contradiction is the
/// test hook's here (this host's measurements agree); the second measurement is real, and its
/// full-depth figures stand.
#[test]
fn a_scaled_cell_that_contradicted_itself_is_measured_once_more() {
    let _device = DEVICE.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let models = scaled_models();
    let out = tempfile::tempdir().unwrap();
    let mut args = run_args(models.path(), out.path());
    args.push("--unsigned");
    let output = common::lynx_command()
        .args(&args)
        .env("LYNX_TEST_CONTRADICTED_CELL", "decode batch 2 ctx 512")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    // Said as it happens, as an unstable cell's second measurement is.
    let said_now = "decode batch 2 ctx 512 was measured once more: the first measurement contradicted itself";
    assert!(stderr.contains(said_now), "{stderr}");
    let result: Value = serde_json::from_slice(&std::fs::read(result_file(out.path())).unwrap()).unwrap();
    assert_eq!(
        result["harness"]["test_hooks"],
        serde_json::json!(["LYNX_TEST_CONTRADICTED_CELL=decode batch 2 ctx 512"])
    );
    let cells = result["cells"].as_array().unwrap();
    let said = "the first measurement contradicted itself: simulated by LYNX_TEST_CONTRADICTED_CELL";
    let again: Vec<&Value> = cells
        .iter()
        .filter(|c| c["remeasured"].as_str().is_some_and(|r| r.starts_with("the first measurement contradicted")))
        .collect();
    assert_eq!(again.len(), 1, "{cells:?}");
    let cell = again[0];
    assert_eq!(
        (cell["step"].as_str(), cell["batch"].as_u64(), cell["ctx"].as_u64()),
        (Some("decode"), Some(2), Some(512))
    );
    assert_eq!(cell["remeasured"], said, "{cell}");
    assert_eq!(cell["status"], "ok", "{cell}");
    assert_eq!(cell["full_depth"]["model_layers"], 8, "{cell}");
    assert!(seconds(&cell["full_depth"]["median_s"]) > seconds(&cell["step_time"]["median_s"]), "{cell}");
    // The stability check (passed: the run exited 0) counts it apart from the cells measured
    // again for their spread.
    let checks = result["checks"].as_array().unwrap();
    let stability = checks.iter().find(|c| c["name"] == "stability").unwrap_or_else(|| panic!("{checks:?}"));
    let detail = stability["detail"].as_str().unwrap();
    assert!(detail.ends_with(" more because its first measurement contradicted itself"), "{detail}");
}
