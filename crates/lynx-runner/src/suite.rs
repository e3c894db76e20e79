//! Finding and reading suites and model shapes: the catalogue built into the binary (`models/`
//! at build time), with a models folder beside it that adds to it or overrides it by name.

use crate::RunError;
use lynx_schema::config::{ModelShape, Suite};
use lynx_schema::result::{ConfigRecord, WeightsRecord};
use std::path::{Path, PathBuf};

include!(concat!(env!("OUT_DIR"), "/catalogue.rs"));

/// Where suites and model shapes come from: `dir` (a models folder: `<name>.toml` and
/// `suites/<name>.toml`) first, where one is given, then the built-in catalogue.
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    /// The models folder that adds to or overrides the built-in catalogue.
    pub dir: Option<PathBuf>,
}

/// A suite's or model's TOML and the name it is reported under.
struct Source {
    text: String,
    shown: String,
}

impl Catalogue {
    /// The built-in catalogue, with `dir` over it.
    pub fn new(dir: Option<PathBuf>) -> Catalogue {
        Catalogue { dir }
    }

    /// The suite `name_or_path` and the model it names. A name is `suites/<name>.toml` of the
    /// models folder, else the built-in suite of that name; anything with a `/` or ending in
    /// `.toml` is a path.
    pub fn suite(&self, name_or_path: &str) -> Result<(Suite, ModelShape), RunError> {
        // The folder a suite's lengths files are relative to: the suite file's (none for a
        // built-in suite).
        let (source, folder) = if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            let path = PathBuf::from(name_or_path);
            let folder = path.parent().map(Path::to_path_buf);
            (Source { text: read(&path, "suite")?, shown: path.display().to_string() }, folder)
        } else {
            let relative = Path::new("suites").join(format!("{name_or_path}.toml"));
            let source = self.find(&relative, name_or_path, EMBEDDED_SUITES, "suite")?;
            let folder =
                self.dir.as_ref().map(|d| d.join("suites")).filter(|_| !source.shown.starts_with("(built-in)"));
            (source, folder)
        };
        let mut suite =
            Suite::from_toml(&source.text, &source.shown).map_err(|e| RunError::Config(format!("suite file {e}")))?;
        read_length_files(&mut suite, folder.as_deref(), &source.shown)?;
        let model = self.model(&suite.model)?;
        serves_known_bounds(&suite, &model)
            .map_err(|e| RunError::Config(format!("suite file {}: {e}", source.shown)))?;
        Ok((suite, model))
    }

    /// The model shape `name`: `<name>.toml` of the models folder, else the built-in one.
    pub fn model(&self, name: &str) -> Result<ModelShape, RunError> {
        let source = self.find(Path::new(&format!("{name}.toml")), name, EMBEDDED_MODELS, "model")?;
        let model = ModelShape::from_toml(&source.text, &source.shown)
            .map_err(|e| RunError::Config(format!("model file {e}")))?;
        if model.name != name {
            return Err(RunError::Config(format!(
                "model file {}: name '{}' does not match the file name '{name}'",
                source.shown, model.name
            )));
        }
        Ok(model)
    }

    /// Every model shape, built-in and in the models folder (which wins on a shared name), by name.
    pub fn models(&self) -> Result<Vec<ModelShape>, RunError> {
        let mut names: Vec<String> = EMBEDDED_MODELS.iter().map(|(name, _)| (*name).to_owned()).collect();
        if let Some(dir) = &self.dir {
            let entries = std::fs::read_dir(dir)
                .map_err(|e| RunError::Config(format!("models folder {}: {e}", dir.display())))?;
            for entry in entries {
                let path = entry.map_err(|e| RunError::Io { path: dir.to_path_buf(), source: e })?.path();
                if path.extension().is_some_and(|e| e == "toml") {
                    if let Some(stem) = path.file_stem().and_then(|s| s.to_str()) {
                        names.push(stem.to_owned());
                    }
                }
            }
        }
        names.sort();
        names.dedup();
        names.iter().map(|name| self.model(name)).collect()
    }

    /// `relative` in the models folder if it is there, else the built-in `name` of `embedded`.
    fn find(&self, relative: &Path, name: &str, embedded: &[(&str, &str)], what: &str) -> Result<Source, RunError> {
        // A models folder that is not there (a typo in --models or LYNX_MODELS_DIR) would
        // otherwise run the built-in shapes in its place, saying nothing.
        if let Some(dir) = &self.dir {
            match std::fs::metadata(dir) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => return Err(RunError::Config(format!("models folder {}: is not a folder", dir.display()))),
                Err(e) => return Err(RunError::Config(format!("models folder {}: {e}", dir.display()))),
            }
        }
        if let Some(path) = self.dir.as_ref().map(|dir| dir.join(relative)).filter(|path| path.exists()) {
            return Ok(Source { text: read(&path, what)?, shown: path.display().to_string() });
        }
        if let Some((_, text)) = embedded.iter().find(|(known, _)| *known == name) {
            return Ok(Source { text: (*text).to_owned(), shown: format!("(built-in) models/{}", relative.display()) });
        }
        Err(RunError::Config(match &self.dir {
            Some(dir) => format!(
                "{what} file {}: does not exist, and no built-in {what} is named '{name}'",
                dir.join(relative).display()
            ),
            None => format!("{what} '{name}': no built-in {what} has that name (a --models folder can add one)"),
        }))
    }
}

/// The most bytes a lengths file may hold.
const MOST_LENGTHS_BYTES: u64 = 4 << 20;

/// Read the lengths file each workload of `suite` names (relative to `folder`) into its pairs
/// ([`read_length_pairs`]). A suite whose pairs are already there (one from a result) reads none.
/// Whether every bound `[serve]` names is one the run holds to (the suite's own, else its
/// model's defaults): a name that is none, `Server` for `server` say, would serve nothing and say
/// nothing. Its names are known only with the model, so this is checked here, not with the
/// rest of the suite.
fn serves_known_bounds(suite: &Suite, model: &ModelShape) -> Result<(), String> {
    let Some(serve) = &suite.serve else { return Ok(()) };
    let bounds = lynx_analysis::latency::bounds_for(&suite.bounds, model);
    match serve.bounds.iter().find(|name| !bounds.iter().any(|b| &b.name == *name)) {
        None => Ok(()),
        Some(name) => {
            let known: Vec<&str> = bounds.iter().map(|b| b.name.as_str()).collect();
            Err(format!(
                "serve.bounds names '{name}', which is none of the bounds the run holds to ({})",
                known.join(", ")
            ))
        }
    }
}

pub fn read_length_files(suite: &mut Suite, folder: Option<&Path>, shown: &str) -> Result<(), RunError> {
    for (i, workload) in suite.workloads.iter_mut().enumerate() {
        let lynx_schema::config::Length::File { file, pairs } = &mut workload.isl else { continue };
        if !pairs.is_empty() {
            continue;
        }
        let key = format!("suite file {shown}: workload[{i}].isl");
        let Some(folder) = folder else {
            return Err(RunError::Config(format!(
                "{key} names the lengths file {file}, and a built-in suite has no folder to find it in"
            )));
        };
        *pairs =
            read_length_pairs(&folder.join(&*file)).map_err(|reason| RunError::Config(format!("{key}: {reason}")))?;
    }
    suite.validate(shown).map_err(|e| RunError::Config(format!("suite file {e}")))
}

/// The `isl,osl` pairs of the lengths file at `path`, one a line; blank lines, `#` comments and
/// a first line that is not two numbers (a header) are skipped. Or why not, in one line naming
/// the file (and the line at fault).
pub fn read_length_pairs(path: &Path) -> Result<Vec<[u32; 2]>, String> {
    let text = read_bounded(path, MOST_LENGTHS_BYTES)
        .map_err(|reason| format!("lengths file {}: {reason}", path.display()))?;
    let mut read = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let numbers: Option<Vec<u32>> = line.split(',').map(|v| v.trim().parse::<u32>().ok()).collect();
        match numbers.as_deref() {
            Some(&[isl, osl]) if isl > 0 && osl > 0 => read.push([isl, osl]),
            None if n == 0 => {} // a header
            _ => {
                return Err(format!(
                    "lengths file {} line {}: expected two token counts greater than 0, `isl,osl`",
                    path.display(),
                    n + 1
                ));
            }
        }
        if read.len() > lynx_schema::config::MOST_FILE_PAIRS {
            return Err(format!(
                "lengths file {} holds more than {} pairs",
                path.display(),
                lynx_schema::config::MOST_FILE_PAIRS
            ));
        }
    }
    if read.is_empty() {
        return Err(format!("lengths file {} holds no isl,osl pair", path.display()));
    }
    Ok(read)
}

/// A regular file's text, refused past `limit` bytes (a FIFO or a device is refused without
/// waiting on it).
fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    use lynx_attest::files::{read_text_bounded, Links};
    read_text_bounded(path, limit, Links::Follow).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "does not exist".to_owned(),
        _ => e.to_string(),
    })
}

/// A suite, model or config file's text: a regular file of at most
/// [`lynx_attest::files::MOST_CONFIG_BYTES`].
fn read(path: &Path, what: &str) -> Result<String, RunError> {
    read_bounded(path, lynx_attest::files::MOST_CONFIG_BYTES)
        .map_err(|reason| RunError::Config(format!("{what} file {}: {reason}", path.display())))
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
    let shape = lynx_schema::config::hf::import(&json, &config.display().to_string(), name)
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

/// Where a run reads its weights from a checkpoint whose folder describes its model other than
/// the run's model does ([`checkpoint_config_differences`]), the warning that says so.
pub fn checkpoint_config_warning(config: &ConfigRecord) -> Option<String> {
    match &config.weights {
        WeightsRecord::Checkpoint { dir, .. } => checkpoint_config_differences(Path::new(dir), &config.model),
        WeightsRecord::Random { .. } => None,
    }
}

/// Where the checkpoint folder `dir` describes its model other than `model` does: its
/// `config.json`, imported as `lynx models import` imports it, against `model` field by field,
/// as one line naming each field that differs with both values (at most `MOST_NAMED` of them).
/// `None` where they agree, where the folder has no `config.json`, or where lynx cannot import
/// it. Tensor shapes that differ fail the run; these would not (a RoPE base, a norm's epsilon, a
/// sliding window): the run measures `model`'s shape with the checkpoint's weights.
fn checkpoint_config_differences(dir: &Path, model: &ModelShape) -> Option<String> {
    const MOST_NAMED: usize = 6;
    let json = std::fs::read_to_string(dir.join("config.json")).ok()?;
    let imported = lynx_schema::config::hf::import(&json, "config.json", &model.name).ok()?;
    // The initialiser's scale is lynx's own, not the checkpoint's.
    let imported = ModelShape { init_std: model.init_std, ..imported };
    let fields = |shape: &ModelShape| {
        let mut fields = std::collections::BTreeMap::new();
        flatten("", &serde_json::to_value(shape).unwrap_or_default(), &mut fields);
        fields
    };
    let (theirs, ours) = (fields(&imported), fields(model));
    let names: std::collections::BTreeSet<&String> = theirs.keys().chain(ours.keys()).collect();
    let differ: Vec<String> = names
        .into_iter()
        .filter(|name| theirs.get(*name) != ours.get(*name))
        .map(|name| {
            let value = |fields: &std::collections::BTreeMap<String, String>| {
                fields.get(name).cloned().unwrap_or_else(|| "absent".to_owned())
            };
            format!("{name} {} there, {} here", value(&theirs), value(&ours))
        })
        .collect();
    if differ.is_empty() {
        return None;
    }
    let more = match differ.len().saturating_sub(MOST_NAMED) {
        0 => String::new(),
        n => format!("; and {n} more"),
    };
    Some(format!(
        "the checkpoint's config.json describes another model than {}: {}{more}; the run measures {}'s shape with the \
         checkpoint's weights",
        model.name,
        differ.iter().take(MOST_NAMED).cloned().collect::<Vec<_>>().join("; "),
        model.name
    ))
}

/// Every leaf of `value` under its dotted path, as JSON text.
fn flatten(path: &str, value: &serde_json::Value, into: &mut std::collections::BTreeMap<String, String>) {
    match value {
        serde_json::Value::Object(fields) => {
            for (name, field) in fields {
                let path = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                flatten(&path, field, into);
            }
        }
        leaf => {
            into.insert(path.to_owned(), leaf.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint's config.json that imports to the run's model says nothing; one that
    /// describes another model is named field by field; a folder without one, nothing.
    #[test]
    fn a_checkpoint_whose_config_describes_another_model_is_named() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let llama_text = std::fs::read_to_string(root.join("models/llama-3.1-8b.toml")).unwrap();
        let llama = ModelShape::from_toml(&llama_text, "llama-3.1-8b").unwrap();
        let config = |file: &str, edit: &dyn Fn(String) -> String| {
            let dir = tempfile::tempdir().unwrap();
            let json = std::fs::read_to_string(root.join("crates/lynx-schema/tests/data/hf").join(file)).unwrap();
            std::fs::write(dir.path().join("config.json"), edit(json)).unwrap();
            dir
        };
        let same = config("Llama-3.1-8B.json", &|json| json);
        assert_eq!(checkpoint_config_differences(same.path(), &llama), None);
        let base = config("Llama-3.1-8B.json", &|json| json.replace("500000.0", "10000.0"));
        let said = checkpoint_config_differences(base.path(), &llama).unwrap();
        assert_eq!(
            said,
            "the checkpoint's config.json describes another model than llama-3.1-8b: attention.rope_theta 10000.0 there, \
             500000.0 here; the run measures llama-3.1-8b's shape with the checkpoint's weights"
        );
        let mistral = config("Mistral-7B-v0.1.json", &|json| json);
        let said = checkpoint_config_differences(mistral.path(), &llama).unwrap();
        assert!(said.contains("attention.rope_scaling.type absent there, \"llama3\" here"), "{said}");
        assert!(said.contains(" more; the run measures"), "{said}");
        assert_eq!(checkpoint_config_differences(tempfile::tempdir().unwrap().path(), &llama), None);
        let broken = config("Llama-3.1-8B.json", &|_| "{".to_owned());
        assert_eq!(checkpoint_config_differences(broken.path(), &llama), None);
    }

    /// The built-in catalogue is the repository's `models/`, file for file.
    #[test]
    fn the_built_in_catalogue_is_the_models_folder() {
        let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models");
        for (folder, embedded) in [(models.clone(), EMBEDDED_MODELS), (models.join("suites"), EMBEDDED_SUITES)] {
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "toml") {
                    let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
                    let (_, text) = embedded.iter().find(|(known, _)| *known == name).unwrap();
                    assert_eq!(*text, std::fs::read_to_string(&path).unwrap(), "{}", path.display());
                    names.push(name);
                }
            }
            assert_eq!(names.len(), embedded.len(), "{}", folder.display());
        }
        let (suite, model) = Catalogue::default().suite("cpu").unwrap();
        assert_eq!((suite.name.as_str(), model.name.as_str()), ("cpu", "lynx-ref-small"));
        // Every built-in suite passes the checks `lynx run --suite` applies (the GPU check's
        // suites run nowhere else before a GPU host).
        for (name, _) in EMBEDDED_SUITES {
            let (suite, _) = Catalogue::default().suite(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(suite.name, *name);
        }
    }

    /// A models folder adds models and overrides a built-in one by name.
    #[test]
    fn a_models_folder_adds_to_and_overrides_the_built_in_catalogue() {
        let dir = tempfile::tempdir().unwrap();
        let builtin = EMBEDDED_MODELS.iter().find(|(name, _)| *name == "lynx-ref-small").unwrap().1;
        let layers = Catalogue::default().model("lynx-ref-small").unwrap().num_layers;
        let overridden = layers + 1;
        let changed = builtin.replace(&format!("num_layers = {layers}\n"), &format!("num_layers = {overridden}\n"));
        assert_ne!(changed, builtin);
        std::fs::write(dir.path().join("lynx-ref-small.toml"), &changed).unwrap();
        let extra = builtin.replace("name = \"lynx-ref-small\"", "name = \"extra\"");
        std::fs::write(dir.path().join("extra.toml"), extra).unwrap();
        let catalogue = Catalogue::new(Some(dir.path().to_path_buf()));
        assert_eq!(catalogue.model("lynx-ref-small").unwrap().num_layers, overridden);
        let names: Vec<String> = catalogue.models().unwrap().into_iter().map(|m| m.name).collect();
        assert!(names.contains(&"extra".to_owned()) && names.contains(&"llama-3.1-8b".to_owned()), "{names:?}");
        assert!(matches!(Catalogue::default().model("extra"), Err(RunError::Config(_))));
    }

    /// A suite's lengths file is read relative to the suite file into the workload's pairs (a
    /// header and comments skipped); a bad line, a missing or empty file is refused naming it.
    #[test]
    fn a_lengths_file_is_read_into_the_suite() {
        let dir = tempfile::tempdir().unwrap();
        let suite = |lengths: &str| {
            let text = "name = \"s\"\nmodel = \"lynx-ref-small\"\nprecision = \"fp32\"\nseed = 1\n\
                 [prefill]\nbatches = [1]\nprompt_lens = [16]\n[decode]\nbatches = [1]\nctxs = [16]\n\
                 [[workload]]\nname = \"logs\"\nisl = { file = \"lengths.csv\" }\nosl = { file = \"lengths.csv\" }\n";
            std::fs::write(dir.path().join("s.toml"), text).unwrap();
            std::fs::write(dir.path().join("lengths.csv"), lengths).unwrap();
            Catalogue::default().suite(dir.path().join("s.toml").to_str().unwrap()).map(|(suite, _)| suite)
        };
        let read = suite("isl,osl\n# from the logs\n100,20\n\n7, 3\n").unwrap();
        assert_eq!(read.workloads[0].file_pairs(), [[100, 20], [7, 3]]);
        assert_eq!(read.workloads[0].max_lengths(), (100, 20));
        for (lengths, needle) in
            [("1,2\n3\n", "line 2"), ("1,0\n5,5\n", "line 1"), ("# nothing\n", "holds no isl,osl pair")]
        {
            let error = suite(lengths).unwrap_err().to_string();
            assert!(error.contains("lengths.csv") && error.contains(needle), "{lengths:?}: {error}");
        }
        std::fs::remove_file(dir.path().join("lengths.csv")).unwrap();
        let error = Catalogue::default().suite(dir.path().join("s.toml").to_str().unwrap()).unwrap_err().to_string();
        assert!(error.contains("does not exist"), "{error}");
    }
}
