//! `lynx models`: the catalogue, and `lynx models import`.

use crate::args::{ModelsAction, ModelsArgs};
use lynx_runner::suite;
use lynx_schema::catalogue::ModelSummary;
use std::path::PathBuf;

pub fn run(args: ModelsArgs) -> anyhow::Result<()> {
    match args.action {
        None => {
            let shapes = suite::Catalogue::new(args.models).models()?;
            let summaries: Vec<_> = shapes.iter().map(ModelSummary::of).collect();
            if args.json {
                sayln!("{}", serde_json::to_string_pretty(&summaries)?);
            } else {
                say!("{}", lynx_report::text::models_table(&summaries));
            }
        }
        Some(ModelsAction::Import { file, name, out, force }) => {
            let name = name.unwrap_or_else(|| suite::model_name_for(&file));
            let out = out.unwrap_or_else(|| PathBuf::from("models").join(format!("{name}.toml")));
            let shape = suite::import_model(&file, &name, &out, force)?;
            sayln!("wrote {} ({})", out.display(), lynx_report::text::parameters_line(&ModelSummary::of(&shape)));
        }
    }
    Ok(())
}
