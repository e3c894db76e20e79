//! lynx's signed wire format and its configuration: the API boundary.
//!
//! Every type lynx serialises is defined here, once: the result of a run and its sections (the
//! predicate of the signed statement, `https://lynxbench.dev/result/v1`), the run plan, the
//! samples-file line, suites and model shapes (parsed from TOML, or imported from a Hugging Face
//! `config.json`), device names, and the summaries other commands print as JSON. A published
//! result must verify forever: fields are only ever added, as optional ones, never renamed or
//! retyped. This crate computes nothing beyond what defines its values (parsing, validation,
//! a model shape's parameter and byte counts, the configuration's digest); the maths on these
//! types is lynx-analysis.

pub mod catalogue;
pub mod compare;
pub mod config;
pub mod derived;
pub mod device;
pub mod equilibrium;
pub mod fleet;
pub mod result;
pub mod roofline;
pub mod serving;
pub mod shortlist;
pub mod stats;
pub mod sweep;
pub mod telemetry;
pub mod time;
pub mod value;
