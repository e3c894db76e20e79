//! A lynx run: load the suite, warm the device up to equilibrium, measure every cell, and keep
//! the result file current after each one.
//!
//! The runner owns the timing discipline: every timed step ends when its generated tokens are on
//! the host (a device-to-host copy, which waits for the device), so asynchronous GPU work is never
//! under-counted; each cell runs one untimed step first, so one-time work for a new shape
//! (allocation, kernel selection) is not charged to it. It reports progress through [`Observer`]
//! and never prints.

pub mod binding;
pub mod collect;
pub mod cuda;
pub mod devices;
mod harness;
mod host_load;
pub mod journal;
pub mod libtorch;
pub mod node;
pub mod parity;
mod run;
mod store;
pub mod suite;
pub mod supervisor;
mod telemetry;

pub use devices::Device;
pub use harness::{
    binary_sha256 as harness_binary_sha256, resume_differences, steering_environment, test_hooks_set, variables_words,
};
pub use host_load::{ThreadUsage, NODE_PID_VAR};
pub use journal::RunDir;
pub use run::{
    assemble, checkpoint_files, estimate, estimate_from_ceilings, forecast, forecast_resume, loop_overhead,
    record_worker_death, start, start_reproduction, work, Forecast, Observer, Outcome, Plan, WarmupProgress, WorkEnd,
};
pub use store::write_json_atomic;

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// The host's identity ([`lynx_telemetry::host_record`]), with the memory policy lynx runs
/// under ([`binding::memory_policy`]).
pub fn host_record() -> lynx_schema::result::HostRecord {
    let mut host = lynx_telemetry::host_record();
    host.memory_policy = Some(binding::memory_policy());
    host
}

/// Seconds spent before warm-up (or within one of its phases), each under its name, in the
/// order they were spent: what `lynx run`'s `before warm-up:` line prints.
pub type Phases = Vec<(&'static str, f64)>;

/// `work`'s outcome, with the seconds it took pushed onto `phases` under `name`.
fn timed<T>(phases: &mut Phases, name: &'static str, work: impl FnOnce() -> T) -> T {
    let start = std::time::Instant::now();
    let out = work();
    phases.push((name, start.elapsed().as_secs_f64()));
    out
}

/// Seconds since the Unix epoch (0 if the clock is before it), for run ids and timestamps.
fn unix_now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A suite or model file that is missing or invalid.
    #[error("{0}")]
    Config(String),
    /// A device that is not there.
    #[error("{0}")]
    UnknownDevice(String),
    /// A checkpoint that cannot serve the model (missing, misshapen or quantised tensors).
    #[error("{0}")]
    Weights(String),
    /// The model could not be built or warmed up on the device.
    #[error("{context}: {source}")]
    Model { context: String, source: lynx_models::ModelError },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("warm-up: {0}")]
    Warmup(#[from] lynx_analysis::stats::StatsError),
    #[error("telemetry: {0}")]
    Telemetry(String),
    /// A run that stopped before it measured anything.
    #[error("{0}")]
    Incomplete(String),
    /// Another process holds the run's journal (it is working on the run).
    #[error("{0}: another lynx process is working on this run")]
    Locked(PathBuf),
    /// A file of the run folder that does not read as what lynx wrote there.
    #[error("{path}: corrupt ({detail})")]
    Corrupt { path: PathBuf, detail: String },
}

impl RunError {
    /// Whether the error is in what the user gave (exit code 2), not in the run itself. A run
    /// folder whose files are corrupt is bad input (a damaged file was given); one that another
    /// process holds is not (the folder is fine, and busy).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            RunError::Config(_) | RunError::UnknownDevice(_) | RunError::Weights(_) | RunError::Corrupt { .. }
        )
    }

    /// Whether the error is a full disk (or quota) under `path`: the run stops there, everything
    /// written before is whole, and a resume once space is back goes on.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, RunError::Io { source, .. } if is_disk_full(source))
    }
}

/// Whether `error` says the disk (or the user's quota) is full.
pub fn is_disk_full(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || error.kind() == std::io::ErrorKind::StorageFull
}
