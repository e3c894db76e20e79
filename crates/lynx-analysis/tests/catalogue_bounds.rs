//! The catalogue's models and suites against MLPerf's latency bounds: each model borrows the
//! bounds of the nearest MLPerf model, and every suite has both bounds.

use lynx_schema::config::{ModelShape, Suite};
use std::path::PathBuf;

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

fn load(name: &str) -> ModelShape {
    let path = models_dir().join(format!("{name}.toml"));
    ModelShape::from_toml(&std::fs::read_to_string(&path).unwrap(), &path.display().to_string()).unwrap()
}

/// Every catalogue model gets the default latency bounds docs/SWEEPS.md says it does, and every
/// suite in `models/suites/` parses and names a catalogue model.
#[test]
fn default_bounds_come_from_the_nearest_mlperf_model() {
    let expected = [
        ("lynx-ref-small", "Llama 2 70B"),
        ("llama-3.1-8b", "Llama 2 70B"),
        ("llama-3.3-70b", "Llama 2 70B"),
        ("qwen3-32b", "Llama 2 70B"),
        ("llama-3.1-405b", "Llama 3.1 405B"),
        ("mixtral-8x7b", "gpt-oss-120b"),
        ("qwen3-30b-a3b", "gpt-oss-120b"),
        ("gpt-oss-120b", "gpt-oss-120b"),
        ("deepseek-r1", "DeepSeek-R1"),
    ];
    for (model, mlperf) in expected {
        let bounds = lynx_analysis::latency::default_bounds(&load(model));
        let source = bounds[0].source.as_deref().unwrap();
        assert!(source.starts_with(&format!("MLPerf Inference {mlperf} server")), "{model}: {source}");
    }
    for entry in std::fs::read_dir(models_dir().join("suites")).unwrap() {
        let path = entry.unwrap().path();
        let suite = Suite::from_toml(&std::fs::read_to_string(&path).unwrap(), "suite").unwrap();
        let model = load(&suite.model);
        assert!(!suite.workloads.is_empty(), "{}: no workloads", path.display());
        assert_eq!(lynx_analysis::latency::bounds_for(&suite.bounds, &model).len(), 2, "{}", path.display());
    }
}
