//! One run: its folder and plan (`start`), a worker's turn on it (`work`: parity, warm-up
//! (`warmup`), then every cell the sweep still lacks (`cell`), each journaled before the next),
//! and its assembly into a result (`assemble`).

mod assemble;
mod cell;
mod forecast;
mod graph;
mod serve;
mod start;
mod stopped;
mod warmup;
mod work;

pub use assemble::{assemble, record_worker_death, DiedIn};
pub use forecast::{forecast, forecast_resume, Forecast};
pub(crate) use graph::Graphs;
pub use serve::loop_overhead;
pub use start::{checkpoint_files, estimate, estimate_from_ceilings, start, start_reproduction};
pub use work::work;

use crate::devices::Device;
use crate::RunError;
use lynx_models::ModelError;
use lynx_schema::config::{ModelShape, Suite};
use lynx_schema::equilibrium::WindowStats;
use lynx_schema::result::{CellRecord, CellShape, Check, RunResult, WarmupRecord};
use lynx_schema::telemetry::{Sample, SamplesLine};
use std::path::{Path, PathBuf};

/// What to run.
pub struct Plan {
    pub suite: Suite,
    pub model: ModelShape,
    pub device: Device,
    /// Runs go to `<results_dir>/<device slug>/<run id>/`.
    pub results_dir: PathBuf,
    /// A Hugging Face safetensors checkpoint to read the weights from; drawn from the suite's
    /// seed when `None`.
    pub weights: Option<PathBuf>,
    /// The CPUs the run's processes are bound to (`binding::resolve`), which its plan keeps for
    /// a resume.
    pub cpus: lynx_schema::result::CpuBinding,
    /// How many of a node's runs it runs beside all at once, itself included (1 alone): each
    /// builds its parity reference in the one host's memory at the same time.
    pub runs_at_once: u64,
}

/// Hears how a run goes; the CLI prints from it.
pub trait Observer {
    /// The result file exists and will be kept current.
    fn started(&mut self, _result_path: &std::path::Path, _result: &RunResult) {}
    /// Warm-up is `elapsed_s` seconds in: the detector's last window so far, whether it meets the
    /// criteria (equilibrium then waits only for `min_s`), and the device's latest sample.
    fn warming(&mut self, _progress: &WarmupProgress) {}
    fn warmed(&mut self, _warmup: &WarmupRecord) {}
    /// The warm-up step was timed again after the sweep.
    fn rechecked(&mut self, _warmup: &WarmupRecord) {}
    fn checked(&mut self, _check: &Check) {}
    /// Warm-up is about to begin: what this process did before it, and the seconds each took
    /// (the parity check, the burst probes, building the model, ...), in order.
    fn prepared(&mut self, _phases: &[(&'static str, f64)]) {}
    /// Cell `index` (from 1) of at most `total` is starting (a ladder may stop early).
    fn cell_started(&mut self, _shape: &CellShape, _index: usize, _total: usize) {}
    fn cell_done(&mut self, _cell: &CellRecord) {}
    /// The roofline probes ran (burst before warm-up, sustained after): `result.roofline` holds
    /// what they measured.
    fn probed(&mut self, _result: &RunResult) {}
    /// The serving phase is about to serve `what` (a workload, bound and rate).
    fn serving(&mut self, _what: &str) {}
    /// The serving phase finished a workload and bound.
    fn served(&mut self, _served: &lynx_schema::serving::Served) {}
    /// Something the user should know now, though the run goes on.
    fn warned(&mut self, _warning: &str) {}
}

/// Where warm-up stands, for the observer.
pub struct WarmupProgress<'a> {
    pub elapsed_s: f64,
    pub max_s: f64,
    pub window: Option<&'a WindowStats>,
    /// Whether the window meets every criterion.
    pub holds: bool,
    /// The device's latest telemetry sample.
    pub latest: Option<&'a Sample>,
}

/// A run assembled into its result.
pub struct Outcome {
    pub result: RunResult,
    pub path: PathBuf,
}

/// How a worker's turn on a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkEnd {
    /// The sweep has no cell left to run.
    Done,
    /// The stop flag was raised: the current step finished, the cell it belonged to was left
    /// out (it is measured again on resume), and the files are consistent.
    Stopped,
    /// A GPU error left the device context unusable (the cell it struck is journaled as
    /// failed, or the workload it struck in the serving phase recorded so): this process must
    /// end so a fresh one, with a fresh context, runs the rest.
    Poisoned,
}

/// Whether a failed step's `message` is a CUDA or HIP error that leaves the process's device
/// context unusable: any such error but running out of memory (an illegal address, a launch
/// failure, a device-side assert), after which every later call on the context fails too. A
/// vendor library's kernel that failed to run (`*_STATUS_EXECUTION_FAILED`) is the same error
/// seen through that library; libtorch prefixes cuBLAS's with "CUDA error", but cuDNN's (SDPA's
/// cuDNN attention among them) with "cuDNN error", which names no CUDA error.
pub fn poisons_the_context(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    let gpu_error = [
        "cuda error",
        "hip error",
        "cudaerror",
        "hiperror",
        "illegal memory access",
        "launch failure",
        "_status_execution_failed",
    ]
    .iter()
    .any(|pattern| lower.contains(pattern));
    gpu_error
        && !matches!(
            lynx_schema::result::CellStatus::from_failure(message.to_owned()),
            lynx_schema::result::CellStatus::Oom { .. }
        )
}

/// A test hook: the cell of this shape (as `lynx run` prints it, e.g. `decode batch 8 ctx 512`),
/// or with `serving` the serving phase's first rate (with `serving-over`, each rate 20% above
/// the latency-bounded one), fails with a simulated illegal-address CUDA error in the first
/// worker, as a poisoned device context would, so that the recovery can be tested on a host
/// without a GPU. With `serving-capture` (a CUDA error) or `serving-capture-oom` (out of
/// memory), the first worker's capture of the serving loop's graph steps fails, where it captures
/// them (`LYNX_TEST_GRAPHS=reissue` on a CPU); with `serving-capture-over`, its capture for the
/// rate 20% above the latency-bounded one (a CUDA error). With `after-sweep`, the first worker's
/// warm-up step timed again after the sweep fails so.
pub const SIMULATE_POISON_VAR: &str = "LYNX_TEST_POISON_CELL";

/// A test hook: the first worker's first measurement of the cell of this shape (as `lynx run`
/// prints it) is taken as having contradicted itself, as a layer subset measured no slower than
/// its head alone would, so that the cell's second measurement can be tested on a host whose
/// measurements agree.
pub const SIMULATE_CONTRADICTION_VAR: &str = "LYNX_TEST_CONTRADICTED_CELL";

/// A test hook: a number of milliseconds that each decode step of the serving loop takes longer
/// at the simulation's latency-bounded rate (`bounded`) only, as a device slower there than in
/// its cells would, so that the step down to the rates under it (where the measured p99s break
/// the bound) can be tested on a host whose loads hold it.
pub const SIMULATE_SLOW_SERVING_VAR: &str = "LYNX_TEST_SLOW_SERVING";

/// A test hook: with any value, each step of the serving loop lasts at least the time the step
/// tables give its shape (the loop waits out the rest), as a device that keeps its cells' pace
/// would, so that the crossing of the bound 20% above the latency-bounded rate can be tested on a
/// host whose pace moves between the cells and the loop (three runs of the same suite, one after
/// another on a shared 2-core host, found that rate at 122 to 204 requests/s).
pub const SIMULATE_CELL_PACE_VAR: &str = "LYNX_TEST_CELL_PACE";

/// A test hook: with `serving-plan`, the first worker raises its own stop flag as its serving
/// phase starts planning, as a signal arriving during the phase's simulation would, so that the
/// stop can be tested where no signal can be timed to land.
pub const SIMULATE_STOP_VAR: &str = "LYNX_TEST_STOP_AT";

/// A model that could not be built: bad input when the checkpoint cannot serve it.
pub(crate) fn model_error(context: &str, error: ModelError) -> RunError {
    match error {
        ModelError::Weights(message) => RunError::Weights(format!("weights: {message}")),
        source => RunError::Model { context: context.to_owned(), source },
    }
}

/// The number of the next segment of the samples file at `path`: one more than the segments it
/// holds (a process killed before its sampler started adds none).
fn next_segment(path: &Path) -> Result<u32, RunError> {
    use std::io::BufRead;
    let io = |source| RunError::Io { path: path.to_path_buf(), source };
    // Never through a link (a samples file replaced by a link to /dev/zero would never end), and
    // line by line: a long run's samples file is gigabytes.
    let file = match lynx_attest::files::open_regular(path, lynx_attest::files::Links::Refuse) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(1),
        Err(source) => return Err(io(source)),
    };
    let mut segments = 0u32;
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line.map_err(io)?;
        // A header is serialised with its tag first; only those lines need parsing.
        if line.starts_with(b"{\"kind\":\"segment\"")
            && matches!(serde_json::from_slice(&line), Ok(SamplesLine::Segment { .. }))
        {
            segments += 1;
        }
    }
    Ok(segments + 1)
}

/// Remove `path` if it is there.
fn remove(path: &Path) -> Result<(), RunError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(RunError::Io { path: path.to_path_buf(), source: e }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_errors_but_running_out_of_memory_poison_the_context() {
        assert!(poisons_the_context("CUDA error: an illegal memory access was encountered"));
        assert!(poisons_the_context("HIP error: unspecified launch failure"));
        assert!(!poisons_the_context("CUDA out of memory. Tried to allocate 2.00 GiB"));
        assert!(!poisons_the_context("CUDA error: out of memory"));
        assert!(!poisons_the_context("shape mismatch"));
        assert!(poisons_the_context(
            "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, ...)`"
        ));
        assert!(poisons_the_context("cuDNN error: CUDNN_STATUS_EXECUTION_FAILED"));
        assert!(!poisons_the_context(
            "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input."
        ));
    }

    /// Issue 17: the next segment is counted from the headers, line by line; a samples file or a
    /// journal replaced by a link (to /dev/zero, which would never end) is refused at once, as
    /// is a result file that is one.
    #[test]
    fn run_files_are_never_read_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let samples = dir.path().join("r.samples.jsonl");
        assert_eq!(next_segment(&samples).unwrap(), 1);
        let header = |n| format!("{{\"kind\":\"segment\",\"segment\":{n},\"started_at\":\"x\"}}\n");
        let sample = "{\"kind\":\"telemetry\",\"source\":\"host\",\"t_s\":0.05}\n";
        std::fs::write(&samples, format!("{}{sample}{sample}{}{sample}", header(1), header(2))).unwrap();
        assert_eq!(next_segment(&samples).unwrap(), 3);
        let linked = dir.path().join("l.samples.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &linked).unwrap();
        assert!(next_segment(&linked).is_err());
        assert!(crate::journal::Journal::open(&linked).is_err());
        assert!(crate::journal::read_json::<serde_json::Value>(&linked, "result").is_err());
    }
}
