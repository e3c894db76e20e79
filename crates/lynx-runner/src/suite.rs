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

/// Every model shape in `models_dir` (its `*.toml` files; suites live in `suites/`), by name.
pub fn list_models(models_dir: &Path) -> Result<Vec<ModelShape>, RunError> {
    let entries = std::fs::read_dir(models_dir)
        .map_err(|e| RunError::Config(format!("models folder {}: {e}", models_dir.display())))?;
    let mut names = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| RunError::Io { path: models_dir.to_path_buf(), source: e })?.path();
        if path.extension().is_some_and(|e| e == "toml") {
            if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                names.push(stem.to_owned());
            }
        }
    }
    names.sort();
    names.iter().map(|name| load_model(name, models_dir)).collect()
}

/// A model name from a config file's path: its folder's name for a `config.json` (Hugging Face
/// snapshots are folders named after the model), else its file stem; lower case, with anything
/// but letters, digits, `.`, `_` and `-` turned into `-`.
pub fn model_name_for(config: &Path) -> String {
    let stem = config.file_stem().and_then(|s| s.to_str()).unwrap_or("model");
    let base = if stem == "config" {
        config
            .canonicalize()
            .ok()
            .and_then(|p| p.parent().and_then(|d| d.file_name()).map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| stem.to_owned())
    } else {
        stem.to_owned()
    };
    base.chars()
        .map(|c| c.to_ascii_lowercase())
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .collect()
}

/// Import the Hugging Face `config.json` at `config` as model `name` and write it to `out`
/// (refusing to replace a file unless `force`). Returns the shape written.
pub fn import_model(config: &Path, name: &str, out: &Path, force: bool) -> Result<ModelShape, RunError> {
    let json = read(config, "config")?;
    let shape = lynx_core::config::hf::import(&json, &config.display().to_string(), name)
        .map_err(|e| RunError::Config(format!("config file {e}")))?;
    if out.exists() && !force {
        return Err(RunError::Config(format!("{} exists; pass --force to replace it", out.display())));
    }
    let text = format!(
        "# Imported by `lynx models import` from {}.\n{}",
        config.file_name().map_or_else(|| config.display().to_string(), |n| n.to_string_lossy().into_owned()),
        shape.to_toml()
    );
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| RunError::Io { path: dir.to_path_buf(), source: e })?;
    }
    std::fs::write(out, text).map_err(|e| RunError::Io { path: out.to_path_buf(), source: e })?;
    Ok(shape)
}
