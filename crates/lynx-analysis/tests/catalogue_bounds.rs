//! The catalogue's suites against MLPerf's latency bounds: every suite parses, names a catalogue
//! model and is held to at least a server bound. (Each model's own default bounds are pinned by
//! `latency::tests::every_catalogue_model_gets_its_pinned_bounds`.)

use lynx_schema::config::{ModelShape, Suite};
use std::path::PathBuf;

fn models_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

fn load(name: &str) -> ModelShape {
    let path = models_dir().join(format!("{name}.toml"));
    ModelShape::from_toml(&std::fs::read_to_string(&path).unwrap(), &path.display().to_string()).unwrap()
}

#[test]
fn every_suite_names_a_catalogue_model_and_is_held_to_a_server_bound() {
    for entry in std::fs::read_dir(models_dir().join("suites")).unwrap() {
        let path = entry.unwrap().path();
        let suite = Suite::from_toml(&std::fs::read_to_string(&path).unwrap(), "suite").unwrap();
        let model = load(&suite.model);
        assert!(!suite.workloads.is_empty(), "{}: no workloads", path.display());
        let bounds = lynx_analysis::latency::bounds_for(&suite.bounds, &model);
        assert_eq!(bounds[0].name, "server", "{}", path.display());
    }
}
