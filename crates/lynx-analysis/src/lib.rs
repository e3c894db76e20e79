//! The pure maths on lynx's schema: step-time statistics, the warm-up equilibrium detector,
//! telemetry window summaries, the adaptive sweep plan, the continuous-batching simulation,
//! MLPerf latency bounds, the derived figures, the roofline's work and check, the measurement
//! checks, comparisons and a node's spreads.
//!
//! Deterministic and free of I/O, devices and libtorch: the same inputs give the same figures.
//! It defines no serialised type (those are lynx-schema's).

pub mod cell;
pub mod checks;
pub mod compare;
pub mod derived;
pub mod equilibrium;
pub mod estimate;
pub mod fleet;
pub mod latency;
pub mod lengths;
pub mod memory;
pub mod rng;
pub mod roofline;
pub mod serving;
pub mod shortlist;
pub mod sim;
pub mod stats;
pub mod sweep;
pub mod telemetry;

/// Where the repository's model catalogue (`models/`) is, for tests of the shipped suites.
#[cfg(test)]
pub(crate) fn catalogue_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models")
}

/// A file of the repository's model catalogue.
#[cfg(test)]
pub(crate) fn catalogue(path: &str) -> String {
    std::fs::read_to_string(catalogue_dir().join(path)).unwrap()
}
