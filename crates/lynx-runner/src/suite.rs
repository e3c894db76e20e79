//! Finding and reading suite and model files.

use crate::RunError;
use lynx_core::config::{ModelShape, Suite};
use std::path::{Path, PathBuf};

/// The suite `name_or_path` and the model it names. A name is looked up as
/// `<models_dir>/suites/<name>.toml`; anything with a `/` or ending in `.toml` is a path. The
/// model is `<models_dir>/<model>.toml`.
pub fn load(name_or_path: &str, models_dir: &Path) -> Result<(Suite, ModelShape), RunError> {
    let suite_path = if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
        PathBuf::from(name_or_path)
    } else {
        models_dir.join("suites").join(format!("{name_or_path}.toml"))
    };
    let suite = Suite::from_toml(&read(&suite_path, "suite")?, &suite_path.display().to_string())
        .map_err(|e| RunError::Config(format!("suite file {e}")))?;
    let model = load_model(&suite.model, models_dir)?;
    Ok((suite, model))
}

/// The model shape `<models_dir>/<name>.toml`.
pub fn load_model(name: &str, models_dir: &Path) -> Result<ModelShape, RunError> {
    let path = models_dir.join(format!("{name}.toml"));
    let model = ModelShape::from_toml(&read(&path, "model")?, &path.display().to_string())
        .map_err(|e| RunError::Config(format!("model file {e}")))?;
    if model.name != name {
        return Err(RunError::Config(format!(
            "model file {}: name '{}' does not match the file name '{name}'",
            path.display(),
            model.name
        )));
    }
    Ok(model)
}

fn read(path: &Path, what: &str) -> Result<String, RunError> {
    std::fs::read_to_string(path).map_err(|error| {
        let reason = match error.kind() {
            std::io::ErrorKind::NotFound => "does not exist".to_owned(),
            _ => error.to_string(),
        };
        RunError::Config(format!("{what} file {}: {reason}", path.display()))
    })
}
