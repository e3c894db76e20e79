//! The result of one run on one device: the predicate of the signed statement (DESIGN.md
//! section 5). It is written after every measured cell, so a run that stops early keeps what it
//! measured, with a status that says so.

use crate::config::{shard, ModelShape, Precision, Suite, WarmupConfig};
use crate::device::DeviceName;
use crate::equilibrium::WindowStats;
use crate::stats::StepTimeSummary;
use crate::telemetry::WindowSummary;
use crate::value::{Finite, Reported};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// The schema a result follows; also the in-toto predicate type it is published under.
pub const RESULT_SCHEMA: &str = "https://lynxbench.dev/result/v1";

/// One run on one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Always [`RESULT_SCHEMA`].
    pub schema: String,
    /// Unique id of the run: start time and a random suffix.
    pub run_id: String,
    pub status: RunStatus,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// When the last cell was written (RFC 3339, UTC).
    pub updated_at: String,
    pub harness: Harness,
    pub device: DeviceRecord,
    pub host: HostRecord,
    pub config: ConfigRecord,
    /// `None` until warm-up has ended.
    pub warmup: Option<WarmupRecord>,
    /// The warm-ups of the attempts that resumed the run (after a kill or a worker that died):
    /// the device is warmed up again before any more cells are measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed_warmups: Vec<WarmupRecord>,
    /// How telemetry was sampled, and from what.
    pub telemetry: TelemetryRecord,
    /// The device's measured ceilings (memory bandwidth, matmul rates); `None` until probed.
    #[serde(default)]
    pub roofline: Option<crate::roofline::RooflineRecord>,
    /// Measured cells, in the order they ran.
    pub cells: Vec<CellRecord>,
    /// The named checks the run made; a failed one leaves every figure in place, marked by it.
    pub checks: Vec<Check>,
    /// The figures derived from the cells; `None` until the run is assembled at its end.
    #[serde(default)]
    pub derived: Option<crate::derived::Derived>,
    /// The published result this run reproduces, by digest (`lynx reproduce`). Absent, not
    /// null, when none: results published before the field existed still verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reproduces: Option<Reproduces>,
    /// fp8 runs: how the e4m3 layers' input scales were chosen (absent at other precisions, and
    /// in results made before lynx calibrated them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fp8_input_scales: Option<String>,
    /// The serving phase (a suite with `[serve]`): a real serving loop on the device at the
    /// simulation's latency-bounded rates, beside the simulation's prediction there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<crate::serving::ServingRecord>,
}

impl RunResult {
    /// The checks the run failed, in the order it made them (none: every check passed).
    pub fn failed_checks(&self) -> Vec<CheckName> {
        self.checks.iter().filter(|c| !c.passed).map(|c| c.name).collect()
    }

    /// The GPU's PCIe link as the last warm-up that read it found it at its end
    /// ([`WarmupRecord::link_at_end`]); `None` for a CPU, and in results before lynx read it.
    pub fn link_at_end(&self) -> Option<&Reported<TrainedLink>> {
        self.last_link_read()?.link_at_end.as_ref()
    }

    /// The last warm-up (the run's own, then each resumed one's) that read the GPU's link.
    fn last_link_read(&self) -> Option<&WarmupRecord> {
        self.warmup.iter().chain(&self.resumed_warmups).rfind(|w| w.link_at_end.is_some())
    }

    /// Where the GPU sits on the host's PCI tree ([`DeviceRecord::host_link_words`]), and its link
    /// as trained under load where a warm-up read it; `None` for a CPU.
    pub fn host_link_words(&self) -> Option<String> {
        let words = self.device.host_link_words()?;
        Some(match self.link_at_end() {
            Some(read) => format!("{words}; at the end of warm-up {}", read.link_words()),
            None => words,
        })
    }

    /// Where the GPU's link ran slower or narrower under load than it can, as the last warm-up
    /// that read it found it ([`WarmupRecord::link_short`]).
    pub fn link_short(&self) -> Option<String> {
        self.last_link_read()?.link_short(self.device.host_link.as_ref())
    }
}

/// What a run was asked to do, written into its folder before anything runs: the worker process
/// reads it, and `lynx run --resume` re-runs exactly it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    pub run_id: String,
    /// When the run started (RFC 3339, UTC; and seconds since the epoch).
    pub started_at: String,
    pub started_s: u64,
    pub suite: Suite,
    pub model: ModelShape,
    pub device: DeviceName,
    /// The checkpoint folder the weights are read from; drawn from the suite's seed when absent.
    pub weights: Option<String>,
    /// sha256 of the lynx executable that started the run: a resume by another build is refused.
    pub binary_sha256: Reported<String>,
    /// The published result this run reproduces (`lynx reproduce`).
    #[serde(default)]
    pub reproduces: Option<Reproduces>,
    /// The CPUs the run's processes are bound to, decided when it started (`lynx run --cpus`): a
    /// resume binds itself to the same (absent in plans made before lynx could bind them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_binding: Option<CpuBinding>,
}

/// The published result a run reproduces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reproduces {
    /// The published envelope's file name and sha256.
    pub envelope: String,
    pub envelope_sha256: String,
    pub run_id: String,
    /// The published device's name.
    pub device: String,
    /// What the published run's model read of its checkpoint, where it records it: the
    /// reproduction's worker says as soon as its own model is built whether it read the same
    /// weights, not only the comparison hours later. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_read: Option<WeightsRead>,
}

/// Telemetry sampling of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetryRecord {
    /// Target samples per second of each source.
    pub rate_hz: Finite,
    /// The raw-samples file beside the result (one JSON object per line).
    pub samples_file: String,
    pub sources: Vec<SourceRecord>,
    /// The source that speaks for the device: its own (NVML, ROCm SMI) where it started, else
    /// the host's.
    #[serde(default)]
    pub device_source: String,
}

/// One telemetry source, how it measures, and the readings it could not give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceRecord {
    pub name: String,
    /// Reading → how the source measures it, where that matters (NVML's power field).
    pub labels: BTreeMap<String, String>,
    /// Reading → why it is unavailable (`all` when the source could not be started).
    pub unavailable: BTreeMap<String, String>,
}

/// `lynx verify`'s verdict on one envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyVerdict {
    pub file: String,
    pub valid: bool,
    /// The id of the key it was checked against.
    pub key_id: String,
    /// The first step that failed (`read`, `envelope`, `base64`, `signature`, `payload_type`,
    /// `statement`, `subject`, `schema`, `samples`), if one did.
    pub failed_step: Option<String>,
    pub message: Option<String>,
    /// Signatures a valid envelope carries beside the one that verified (none: absent). They
    /// are reported, and trusted only as `also_signed_by` says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_signatures: Option<u32>,
    /// The other trusted keys whose signatures on a valid envelope verify too (a countersigned
    /// result); absent where none does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub also_signed_by: Option<Vec<String>>,
    /// The test hooks a valid result was made with (`Harness::test_hooks`): a valid signature
    /// on a test's figures, not a device's. Absent where none was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_hooks: Option<Vec<String>>,
    /// Where a valid result's run stood when it was signed: `complete`, or `partial` (stopped
    /// before every cell ran) or `incomplete` (written while it was still going). Absent where
    /// the result is not valid (and in verdicts from before December 2026).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// The checks a valid result's run failed, in the result's order: a valid signature on
    /// figures their own run marked as not fit to publish. Absent where it failed none (or the
    /// result is not valid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_checks: Option<Vec<CheckName>>,
}

/// A named check of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: CheckName,
    pub passed: bool,
    /// What was measured and against what, for a reader.
    pub detail: String,
    /// The measured value, where the check measures one.
    pub measured: Option<Finite>,
    /// The bound it was held to.
    pub limit: Option<Finite>,
}

/// The checks a run is held to (README, "What a result contains").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckName {
    /// The device's logits against the float64 reference.
    Parity,
    /// Warm-up reached equilibrium.
    Equilibrium,
    /// The device's telemetry source covered the measurement time.
    TelemetryCoverage,
    /// No hardware slowdown during measurement.
    Throttling,
    /// No cell above a measured ceiling.
    Roofline,
    /// A replayed graph step gave the eager step's logits (same weights, same inputs) within
    /// its own bound for the precision, twice the parity bound of December 2026 (results before
    /// December 2026: within the parity bound of the time; the two sides may attend with
    /// different kernels); graph cells are measured only after it passed.
    GraphParity,
    /// The serving phase's measured p99 TTFT and TPOT lie within 15% of the simulation's at the
    /// same rate, and the bound holds at the published rate.
    Simulation,
    /// The serving loop's own time per iteration (scheduling, bookkeeping) stayed under 1 ms at
    /// the median, p90 and p99: the load generator measured the device, not itself.
    ServingOverhead,
    /// Every cell's step-time CV stayed within the suite's bound, and no process but lynx's kept
    /// the host's CPUs busy past its bound while a cell was measured (an unstable cell is
    /// measured once more before it counts against this).
    Stability,
}

impl CheckName {
    /// The name as results and reports spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckName::Parity => "parity",
            CheckName::Equilibrium => "equilibrium",
            CheckName::TelemetryCoverage => "telemetry_coverage",
            CheckName::Throttling => "throttling",
            CheckName::Roofline => "roofline",
            CheckName::GraphParity => "graph_parity",
            CheckName::Simulation => "simulation",
            CheckName::ServingOverhead => "serving_overhead",
            CheckName::Stability => "stability",
        }
    }
}

impl std::fmt::Display for CheckName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// The run was still going when this was written: if it is the last word, the run stopped
    /// early, and only the cells listed were measured.
    Incomplete,
    /// Every cell of the suite ran (each cell's own status says whether it succeeded).
    Complete,
    /// The run was stopped (a signal, or a worker that kept failing) before every cell ran; the
    /// cells listed were measured, and the result was assembled and signed as it stood.
    Partial,
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunStatus::Incomplete => "incomplete",
            RunStatus::Complete => "complete",
            RunStatus::Partial => "partial",
        })
    }
}

/// The software that measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Harness {
    /// Version of lynx.
    pub lynx_version: String,
    /// Git commit lynx was built from.
    pub git_commit: Reported<String>,
    /// sha256 of the running `lynx` executable.
    pub binary_sha256: Reported<String>,
    /// Version of the `tch` crate linked in.
    pub tch_version: String,
    /// libtorch version built against.
    pub libtorch_build_version: Reported<String>,
    /// libtorch version loaded at run time, read beside the library the process mapped.
    pub libtorch_runtime_version: Reported<String>,
    /// Folder of the libtorch libraries loaded at run time.
    pub libtorch_path: Reported<String>,
    /// The GPU backend libraries libtorch loaded (libtorch_cuda, libtorch_hip), or why not.
    pub gpu_backends: Vec<BackendLoad>,
    /// Intra-op threads libtorch uses.
    pub torch_threads: i32,
    /// Compiler that built lynx.
    pub rustc: String,
    /// Whether decode steps could be captured and replayed as CUDA (or HIP) graphs in this
    /// process, or why not (absent in results made before lynx measured graphs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graphs: Option<Reported<bool>>,
    /// Cargo profile of the build (release, debug).
    pub build_profile: String,
    /// The test hooks set in lynx's environment, as `NAME=value`: every variable named
    /// `LYNX_TEST_…`. Each changes what the run measures (a simulated fault, reissued graph steps,
    /// slower or paced serving steps), so a result made with any describes a test, not the
    /// device. Absent where none was set (and in results made before lynx recorded them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_hooks: Option<Vec<String>>,
    /// The variables set in lynx's environment that steer how libtorch, CUDA, ROCm, their
    /// libraries or OpenMP run (`CUDA_LAUNCH_BLOCKING`, `PYTORCH_CUDA_ALLOC_CONF`,
    /// `NVIDIA_TF32_OVERRIDE`, `OMP_NUM_THREADS`, `LD_PRELOAD`, …), as `NAME=value`, sorted; of a
    /// resumed run, every setting any of its processes had. Empty where none was set. Absent in
    /// results made before lynx wrote the empty list (2026-12-06): there none was set, or lynx
    /// did not yet record them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Vec<String>>,
    /// The GPU math libraries libtorch's GPU backend loaded (the CUDA or HIP runtime, cuBLAS,
    /// cuBLASLt, cuDNN, rocBLAS, MIOpen), each with the version it answers: one libtorch release
    /// runs on whichever a node's wheels or library path give it, and they choose the kernels.
    /// Empty where none was loaded (a CPU run); absent in results made before lynx recorded them
    /// (2026-12-06).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_libraries: Option<Vec<GpuLibrary>>,
    /// The CPUs lynx bound the run's processes to (`lynx run --cpus`), or that it bound none (the
    /// CPUs the host gave it: `host.cpu_allowance`). Absent in results made before lynx could
    /// bind them (2026-12-07).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_binding: Option<CpuBinding>,
}

/// How lynx chose the CPUs a run's processes ran on (`lynx run --cpus`). The CPU issuing a GPU's
/// kernels pays for every launch and copy that crosses to another NUMA node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuBinding {
    /// What was asked: [`CpuBinding::GPU_LOCAL`] (the CPUs local to the GPU that the host
    /// allowed), [`CpuBinding::LIST`] (the CPUs given) or [`CpuBinding::NONE`] (lynx bound
    /// nothing).
    pub asked: String,
    /// The CPUs the run's processes were bound to, as Linux lists them ("0-55"); absent where
    /// none was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
}

impl CpuBinding {
    pub const GPU_LOCAL: &'static str = "gpu-local";
    pub const LIST: &'static str = "list";
    pub const NONE: &'static str = "none";

    /// No binding asked: the run runs where the host lets it.
    pub fn none() -> CpuBinding {
        CpuBinding { asked: CpuBinding::NONE.to_owned(), cpus: None }
    }

    /// In words: "CPUs 0-55, those local to the GPU (--cpus gpu-local)", "CPUs 0-3 (--cpus
    /// 0-3)", "none (the CPUs the host gave it)".
    pub fn words(&self) -> String {
        match (self.asked.as_str(), &self.cpus) {
            (CpuBinding::GPU_LOCAL, Some(cpus)) => format!("CPUs {cpus}, those local to the GPU (--cpus gpu-local)"),
            (_, Some(cpus)) => format!("CPUs {cpus} (--cpus {cpus})"),
            (_, None) => "none (the CPUs the host gave it)".to_owned(),
        }
    }
}

/// A result's CPU binding in words ([`CpuBinding::words`]), or that it does not record one.
pub fn cpu_binding_words(binding: Option<&CpuBinding>) -> String {
    binding.map_or_else(|| "not recorded (a result from before lynx could bind its CPUs)".to_owned(), CpuBinding::words)
}

impl Harness {
    /// The CPU binding in words ([`cpu_binding_words`]).
    pub fn cpu_binding_words(&self) -> String {
        cpu_binding_words(self.cpu_binding.as_ref())
    }

    /// What two runs' CPU bindings are compared by: what was asked, and a list's CPUs (not a
    /// GPU's local CPUs, which differ between nodes alike).
    pub fn cpu_binding_compared(&self) -> String {
        match &self.cpu_binding {
            None => "not recorded".to_owned(),
            Some(binding) => match (binding.asked.as_str(), &binding.cpus) {
                (CpuBinding::GPU_LOCAL, Some(_)) => "the GPU's local CPUs".to_owned(),
                (_, Some(cpus)) => format!("CPUs {cpus}"),
                (_, None) => "none".to_owned(),
            },
        }
    }

    /// The test hooks the run was made with, where any was set.
    pub fn test_hooks(&self) -> Option<String> {
        self.test_hooks.as_ref().filter(|hooks| !hooks.is_empty()).map(|hooks| hooks.join(", "))
    }

    /// The steering variables the run was made with, in words: each `NAME=value`, "none set", or
    /// that the result does not record them.
    pub fn environment_words(&self) -> String {
        match self.environment.as_deref() {
            None => "not recorded (none set, or a result from before lynx recorded them)".to_owned(),
            Some([]) => "none set".to_owned(),
            Some(set) => set.join(", "),
        }
    }

    /// The GPU math libraries the run loaded, in words: each name and version, "none loaded", or
    /// that the result does not record them (no folders: two nodes install the same libraries
    /// in different places).
    pub fn gpu_libraries_words(&self) -> String {
        gpu_libraries_words(self.gpu_libraries.as_deref())
    }

    /// Why a result made with test hooks set is kept out of what publishes devices' figures (a
    /// shortlist, a collected results folder), where any was set.
    pub fn test_hooks_reason(&self) -> Option<String> {
        self.test_hooks().map(|hooks| format!("made with {hooks} set: a test's figures, not the device's"))
    }
}

/// GPU math libraries as [`Harness::gpu_libraries_words`] words them.
pub fn gpu_libraries_words(libraries: Option<&[GpuLibrary]>) -> String {
    match libraries {
        None => "not recorded (a result from before lynx recorded them)".to_owned(),
        Some([]) => "none loaded".to_owned(),
        Some(libraries) => libraries.iter().map(GpuLibrary::words).collect::<Vec<_>>().join(", "),
    }
}

/// One GPU math library loaded into the process, and the version it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuLibrary {
    /// What it is: `CUDA runtime`, `cuBLAS`, `cuBLASLt`, `cuDNN`, `HIP runtime`, `rocBLAS`,
    /// `MIOpen`.
    pub name: String,
    /// The file mapped into the process.
    pub file: String,
    /// The version the library itself answers (its own version call), or why it could not.
    pub version: Reported<String>,
}

impl GpuLibrary {
    /// `cuDNN 9.19.0`, or the name and why its version is unknown.
    pub fn words(&self) -> String {
        match &self.version {
            Reported::Known(version) => format!("{} {version}", self.name),
            Reported::Unavailable { unavailable } => format!("{} (version unknown: {unavailable})", self.name),
        }
    }
}

/// Whether one optional libtorch backend library was loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendLoad {
    /// The library's file name, e.g. `libtorch_cuda.so`.
    pub library: String,
    /// Loaded, or why not.
    pub loaded: Reported<bool>,
}

/// The device measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceRecord {
    /// `cpu`, `cuda:N` or `rocm:N`.
    pub device: DeviceName,
    /// Marketing name (`NVIDIA H200`, the CPU's model name).
    pub name: Reported<String>,
    /// Memory the device can use, in bytes.
    pub memory_bytes: Reported<u64>,
    /// Stable identity of the board (GPU UUID), where the device has one.
    pub uuid: Reported<String>,
    /// CUDA compute capability (`9.0`), for NVIDIA devices.
    pub compute_capability: Reported<String>,
    /// The board's management facts (NVML for NVIDIA GPUs).
    pub board: Reported<BoardRecord>,
    /// Where a GPU sits on the host's PCI tree: its NUMA node, the CPUs local to it against those
    /// lynx could run on, and its link's width (from sysfs, by the board's PCI bus id), or why it
    /// could not be read. Absent for a CPU, and in results made before lynx recorded it
    /// (2026-12-06).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link: Option<Reported<HostLink>>,
}

/// A PCIe link's width in lanes as it is written (`x16`), `x?` where unread.
fn lanes(width: Option<u32>) -> String {
    width.map_or("x?".to_owned(), |w| format!("x{w}"))
}

/// Where a GPU sits on the host's PCI tree, as the kernel's sysfs says (`/sys/bus/pci/devices/`).
/// The CPU issuing a GPU's kernels is its host: one on another NUMA node than the GPU's reaches
/// it across the sockets' link, which every launch and copy pays, and a link trained narrower
/// than it can run carries less.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostLink {
    /// The PCI device, as sysfs names it (`0000:19:00.0`).
    pub pci_device: String,
    /// Its NUMA node; absent where the kernel gives it none (−1: a host of one node, or a
    /// virtual machine that does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// The CPUs local to it (`local_cpulist`), as Linux lists them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_cpus: Option<String>,
    /// How many of the CPUs lynx's process could run on are not local to it (absent where either
    /// list could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_cpus_elsewhere: Option<u64>,
    /// Its link's width as trained (`current_link_width`: 16 for x16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_width: Option<u32>,
    /// The widest its link can train (`max_link_width`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_link_width: Option<u32>,
    /// The fastest its link can run (`max_link_speed`: "32.0 GT/s PCIe"). Not the speed as
    /// trained, which GPUs lower while idle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_link_speed: Option<String>,
}

impl HostLink {
    /// In words: "PCI 0000:19:00.0 on NUMA node 1 (CPUs 56-111; 8 CPUs lynx could run on are
    /// elsewhere); link x16 of x16, 32.0 GT/s PCIe at most".
    pub fn words(&self) -> String {
        let elsewhere = match self.allowed_cpus_elsewhere {
            Some(0) => "every CPU lynx could run on is local".to_owned(),
            Some(n) => format!("{n} CPUs lynx could run on are elsewhere"),
            None => "where lynx could run unknown".to_owned(),
        };
        let node = match self.numa_node {
            Some(node) => {
                let cpus = self.local_cpus.as_ref().map_or("its CPUs unread".to_owned(), |cpus| format!("CPUs {cpus}"));
                format!("on NUMA node {node} ({cpus}; {elsewhere})")
            }
            None => format!("on no NUMA node the kernel names ({elsewhere})"),
        };
        let link = format!(
            "link {} of {}{}",
            lanes(self.link_width),
            lanes(self.max_link_width),
            self.max_link_speed.as_ref().map_or(String::new(), |speed| format!(", {speed} at most"))
        );
        format!("PCI {} {node}; {link}", self.pci_device)
    }

    /// What about it makes a GPU's host work or link slower than the host could have it, in
    /// words: lynx allowed onto CPUs of another NUMA node, a link trained narrower than it can.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let (Some(n), Some(node)) = (self.allowed_cpus_elsewhere.filter(|&n| n > 0), self.numa_node) {
            out.push(format!(
                "lynx may run on {n} CPUs outside the GPU's NUMA node {node} ({}): the host work of each step may \
                 cross between sockets; bind it with `lynx run --cpus gpu-local` (or start it under `numactl \
                 --cpunodebind={node} --membind={node}`)",
                self.local_cpus.as_deref().unwrap_or("its CPUs unread")
            ));
        }
        if let (Some(width), Some(max)) = (self.link_width, self.max_link_width) {
            if width < max {
                out.push(format!("the GPU's PCIe link trained at x{width} of the x{max} it can"));
            }
        }
        out
    }
}

/// A GPU's PCIe link as trained at one moment (sysfs's `current_link_speed` and
/// `current_link_width`). GPUs lower their link's speed while idle and raise it under load, so
/// only a reading under load says what the slot, riser and firmware let it run at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainedLink {
    /// Its speed as sysfs writes it ("32.0 GT/s PCIe"; absent where unread, or "Unknown").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed: Option<String>,
    /// Its width in lanes (16 for x16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
}

impl TrainedLink {
    /// In words: "32.0 GT/s PCIe x16".
    pub fn words(&self) -> String {
        format!("{} {}", self.speed.as_deref().unwrap_or("speed unread"), lanes(self.width))
    }

    /// Where it ran slower or narrower under load than `link` says it can, in words: its slot,
    /// a riser or the firmware holds it back, and every copy between host and GPU is slower.
    pub fn short_of(&self, link: &HostLink) -> Option<String> {
        let slower = match (self.speed.as_deref().and_then(gts), link.max_link_speed.as_deref().and_then(gts)) {
            (Some(speed), Some(max)) => speed < max,
            _ => false,
        };
        let narrower = matches!((self.width, link.max_link_width), (Some(width), Some(max)) if width < max);
        (slower || narrower).then(|| {
            format!(
                "the GPU's PCIe link ran at {} under load, short of the {} {} it can (a slower slot, a riser or a \
                 firmware setting): copies between host and GPU are slower than the board allows",
                self.words(),
                link.max_link_speed.as_deref().unwrap_or("speed unread"),
                lanes(link.max_link_width)
            )
        })
    }
}

impl Reported<TrainedLink> {
    /// A reading of a GPU's link as trained, in words: `32.0 GT/s PCIe x16`, or `unread (why)`.
    /// The one wording of it in the warm-up line, the result's host link words, the node summary
    /// and compare.
    pub fn link_words(&self) -> String {
        match self {
            Reported::Known(link) => link.words(),
            Reported::Unavailable { unavailable } => format!("unread ({unavailable})"),
        }
    }
}

/// The transfer rate a sysfs link speed names, in GT/s ("16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s");
/// `None` where it names none ("Unknown").
fn gts(speed: &str) -> Option<f64> {
    let (rate, rest) = speed.trim().split_once(' ')?;
    rest.starts_with("GT/s").then_some(())?;
    rate.parse::<f64>().ok().filter(|r| r.is_finite() && *r > 0.0)
}

impl DeviceRecord {
    /// Where a GPU sits on the host's PCI tree, in words ([`HostLink::words`]), why that is
    /// unknown, or that the result does not record it; `None` for a CPU.
    pub fn host_link_words(&self) -> Option<String> {
        if self.device == crate::device::DeviceName::Cpu {
            return None;
        }
        Some(match &self.host_link {
            Some(Reported::Known(link)) => link.words(),
            Some(Reported::Unavailable { unavailable }) => format!("unknown: {unavailable}"),
            None => "not recorded (a result from before lynx recorded it)".to_owned(),
        })
    }

    /// What two GPUs' host links are compared by: the link's width and speed, and how many of
    /// the CPUs lynx could run on were off the GPU's NUMA node (not the bus ids or CPU numbers,
    /// which differ between nodes alike); `None` for a CPU.
    pub fn host_link_compared(&self) -> Option<String> {
        if self.device == crate::device::DeviceName::Cpu {
            return None;
        }
        Some(match &self.host_link {
            Some(Reported::Known(link)) => {
                let elsewhere = link.allowed_cpus_elsewhere.map_or("unknown".to_owned(), |n| n.to_string());
                format!(
                    "link {} of {}, {}; CPUs off its NUMA node {elsewhere}",
                    lanes(link.link_width),
                    lanes(link.max_link_width),
                    link.max_link_speed.as_deref().unwrap_or("speed unread")
                )
            }
            Some(Reported::Unavailable { .. }) => "unknown".to_owned(),
            None => "not recorded".to_owned(),
        })
    }

    /// The device's name, or its kind (`cuda:0`) where the name is unavailable.
    pub fn name_or_kind(&self) -> String {
        self.name.known().cloned().unwrap_or_else(|| self.device.to_string())
    }
}

/// What a GPU's management library says about its board.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoardRecord {
    pub serial: Reported<String>,
    pub pci_bus_id: Reported<String>,
    pub vbios: Reported<String>,
    pub driver_version: Reported<String>,
    /// Highest CUDA version the driver supports.
    pub cuda_driver_version: Reported<String>,
    pub power_limit_default_w: Reported<f64>,
    pub power_limit_enforced_w: Reported<f64>,
    pub ecc_enabled: Reported<bool>,
    pub mig_enabled: Reported<bool>,
    pub persistence_mode: Reported<bool>,
}

/// The host the device sits in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostRecord {
    pub cpu_model: Reported<String>,
    pub physical_cores: Reported<u64>,
    pub logical_cpus: u64,
    pub memory_bytes: u64,
    pub os: Reported<String>,
    pub kernel: Reported<String>,
    /// What the host let the run use of its CPUs: which CPUs, and how much CPU time its control
    /// groups allow (absent where the OS does not say, and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_allowance: Option<CpuAllowance>,
    /// The cpufreq scaling governor of the CPUs the run could use ("performance", "schedutil";
    /// each one where they differ), which sets how fast an idle CPU comes back to speed (absent
    /// in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpufreq_governor: Option<Reported<String>>,
    /// The kernel's transparent huge page mode (`always`, `madvise` or `never`), which sets what
    /// touching fresh memory costs a CPU device (absent in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transparent_hugepages: Option<Reported<String>>,
    /// The kernel's clock source (`tsc`, `kvm-clock`, `hpet`), which sets what reading the clock
    /// costs every host timing lynx takes: a step's issue time, the serving loop's own time
    /// (absent in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocksource: Option<Reported<String>>,
    /// The memory policy the run allocated under and the memory nodes its cpuset allowed ("local
    /// (the default) on memory nodes 0-1", "interleave over nodes 0-1 on memory nodes 0-1"),
    /// which set where a CPU device's tensors and a GPU's host buffers live (absent in older
    /// results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_policy: Option<Reported<String>>,
    /// The instruction-set extensions the host's CPUs offer that libtorch's CPU kernels (ATen's
    /// and oneDNN's) choose by ("avx2 fma avx512f … amx_bf16 amx_int8", as /proc/cpuinfo names
    /// them; "none" where it offers none of them): a CPU device's kernels are chosen by them, and
    /// a virtual machine's model name ("Intel(R) Xeon(R) Processor") may not say (absent in
    /// older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_features: Option<Reported<String>>,
}

/// A fact a result may hold, in words: its value, why it was unavailable, or "not recorded" (a
/// result from before lynx recorded it).
pub fn recorded_words(value: &Option<Reported<String>>) -> String {
    value.as_ref().map_or_else(|| "not recorded".to_owned(), Reported::to_string)
}

/// The CPUs a run could run on and the CPU time it was allowed: a CPU device's figures, and a
/// GPU's host issue times, were measured within them (a container's CPU limit is a quota).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuAllowance {
    /// The CPUs its process could run on (its affinity), as Linux lists them: "0-15", "0,2,4-7".
    pub cpus: String,
    /// How many CPUs `cpus` names.
    pub cpu_count: u64,
    /// The CPU time a second its control groups allow it, in cores: the least CFS quota over its
    /// period among its cgroup and those above it; absent where none sets one or none could be
    /// read (`quota` says which).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_cores: Option<Finite>,
    /// Where the quota was read, that none applies, or why it could not be read.
    pub quota: String,
}

impl CpuAllowance {
    /// How many CPUs and how much CPU time, in words: "16 CPUs, no CPU quota", "16 CPUs, a CPU
    /// quota of 2.00 cores" (what two runs' allowances are compared by: the same count on other
    /// CPUs is the same allowance).
    pub fn words(&self) -> String {
        match self.quota_cores {
            Some(cores) => format!("{} CPUs, a CPU quota of {:.2} cores", self.cpu_count, cores.get()),
            None if self.quota.starts_with("none") => format!("{} CPUs, no CPU quota", self.cpu_count),
            None => format!("{} CPUs, CPU quota unknown", self.cpu_count),
        }
    }
}

impl HostRecord {
    /// The clock source, the transparent huge page mode, the cpufreq governor, the memory policy
    /// and the CPU features, in words ("clock source tsc; transparent huge pages madvise; cpufreq
    /// governor performance; memory policy local (the default) on memory nodes 0; CPU features
    /// avx2 fma"), each "not recorded" in older results.
    pub fn settings_words(&self) -> String {
        format!(
            "clock source {}; transparent huge pages {}; cpufreq governor {}; memory policy {}; CPU features {}",
            recorded_words(&self.clocksource),
            recorded_words(&self.transparent_hugepages),
            recorded_words(&self.cpufreq_governor),
            recorded_words(&self.memory_policy),
            recorded_words(&self.cpu_features)
        )
    }

    /// [`CpuAllowance::words`], with the CPUs listed; or that the result does not say.
    pub fn cpu_allowance_words(&self) -> String {
        match &self.cpu_allowance {
            Some(allowed) => format!("{} ({}; quota {})", allowed.words(), allowed.cpus, allowed.quota),
            None => "not recorded".to_owned(),
        }
    }
}

/// The whole configuration as run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigRecord {
    pub suite: Suite,
    pub model: ModelShape,
    /// sha256 of the JSON of `suite` and `model` (see [`config_sha256`]).
    pub sha256: String,
    /// Parameters of the model at this shape.
    pub model_parameters: u64,
    /// Parameters one token's forward pass uses (all but idle experts; embedding included).
    pub model_active_parameters: u64,
    /// Bytes of weights at the suite's precision.
    pub weight_bytes: u64,
    /// KV-cache bytes one more token of context adds, at the suite's precision.
    pub kv_bytes_per_token: u64,
    /// What one device actually ran when the suite measures a layer subset or a
    /// tensor-parallel shard (`suite.scale`); `None` for the whole model.
    pub measured: Option<MeasuredPart>,
    /// Where the weights came from.
    pub weights: WeightsRecord,
}

/// The origin of a run's weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "origin", rename_all = "lowercase")]
pub enum WeightsRecord {
    /// Drawn from Normal(0, init_std) with the suite's seed.
    Random { seed: u64 },
    /// Read from a Hugging Face safetensors checkpoint.
    Checkpoint {
        /// The folder given.
        dir: String,
        /// Its `*.safetensors` files and their sizes in bytes.
        files: Vec<(String, u64)>,
        /// The tensors the measured model read from it, and a digest of their contents. Absent
        /// in results made before lynx recorded it, which name a checkpoint by its files alone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read: Option<WeightsRead>,
    },
}

impl WeightsRecord {
    /// What the measured model read of its checkpoint, where the result records it.
    pub fn read(&self) -> Option<&WeightsRead> {
        match self {
            WeightsRecord::Checkpoint { read, .. } => read.as_ref(),
            WeightsRecord::Random { .. } => None,
        }
    }
}

/// The bytes of a checkpoint's `*.safetensors` files, as a result records them (name, size).
pub fn files_bytes(files: &[(String, u64)]) -> u64 {
    files.iter().map(|(_, size)| size).sum()
}

/// What a run read of a checkpoint: the tensors the measured model was built from (in a layer
/// subset its layers, in a tensor-parallel shard the first device's part of each), and a digest
/// of their contents, so that two runs' weights can be compared without either checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WeightsRead {
    /// Tensors read (a stacked tensor's entries counted one by one).
    pub tensors: u64,
    /// Their bytes as stored (a shard's part of each).
    pub bytes: u64,
    /// sha256 (hex) of one line a tensor, in name order: `name dtype [shape] sha256-of-its-bytes`,
    /// each line ending in a newline; the bytes are those read, row-major as stored.
    pub sha256: String,
}

/// The part of the model a scaled run measured, and what it leaves out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredPart {
    /// The shape the device ran.
    pub shape: ModelShape,
    pub parameters: u64,
    pub weight_bytes: u64,
    pub kv_bytes_per_token: u64,
    /// Work a real deployment does that this run did not time.
    pub not_measured: Vec<String>,
}

impl ConfigRecord {
    /// The record of `suite` on `model` with `weights`, or why the suite's scale cannot cut the
    /// model.
    pub fn new(suite: Suite, model: ModelShape, weights: WeightsRecord) -> Result<ConfigRecord, String> {
        let precision: Precision = suite.precision;
        let depth = suite.scale.layers.unwrap_or(model.num_layers).min(model.num_layers);
        if suite.parity.layers > depth {
            return Err(format!(
                "parity.layers ({}) must be at most the {depth} layers the run measures of {}",
                suite.parity.layers, suite.model
            ));
        }
        let parameters = model.parameters();
        let measured = if suite.scale.is_full() {
            None
        } else {
            let part = shard(&model, &suite.scale)?;
            let mut not_measured = Vec::new();
            if suite.scale.tp > 1 {
                not_measured.push(format!(
                    "tensor-parallel collectives across {} devices (all-reduce after attention and MLP, \
                     all-gather of logits)",
                    suite.scale.tp
                ));
            }
            if let Some(k) = suite.scale.layers {
                not_measured.push(format!(
                    "{} of the model's {} layers: full-depth step times are extrapolated (see each cell)",
                    model.num_layers - k,
                    model.num_layers
                ));
            }
            Some(MeasuredPart {
                parameters: part.parameters().total,
                weight_bytes: part.weight_bytes(precision),
                kv_bytes_per_token: part.kv_bytes_per_token(precision),
                shape: part,
                not_measured,
            })
        };
        Ok(ConfigRecord {
            sha256: config_sha256(&suite, &model),
            model_parameters: parameters.total,
            model_active_parameters: parameters.active,
            weight_bytes: model.weight_bytes(precision),
            kv_bytes_per_token: model.kv_bytes_per_token(precision),
            measured,
            weights,
            suite,
            model,
        })
    }

    /// The shape the device runs: the measured part, or the whole model.
    pub fn device_shape(&self) -> &ModelShape {
        self.measured.as_ref().map_or(&self.model, |part| &part.shape)
    }
}

/// sha256 (hex) of the JSON `{"suite": …, "model": …}`. Field order is the structs' declaration
/// order, so equal configurations hash equally whatever their TOML looked like.
pub fn config_sha256(suite: &Suite, model: &ModelShape) -> String {
    #[derive(Serialize)]
    struct Config<'a> {
        suite: &'a Suite,
        model: &'a ModelShape,
    }
    let json = serde_json::to_vec(&Config { suite, model }).expect("configuration serialises");
    hex(&Sha256::digest(json))
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// How warm-up went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmupRecord {
    /// How long warm-up ran.
    pub duration_s: Finite,
    /// Decode steps it ran.
    pub steps: u64,
    /// The decode batch warm-up ran at.
    pub batch: u32,
    /// The context the warm-up decode steps ran at.
    pub ctx: u32,
    /// Whether equilibrium was reached before `criteria.max_s`.
    pub equilibrium_reached: bool,
    /// The thresholds judged against.
    pub criteria: WarmupConfig,
    /// The criteria values over the last window; `None` if warm-up ran too few steps to judge.
    pub last_window: Option<WindowStats>,
    /// Each telemetry source over the warm-up.
    pub telemetry: Vec<WindowSummary>,
    /// The segment of the samples file (the process) that warmed up.
    #[serde(default)]
    pub segment: Option<u32>,
    /// How alike its consecutive steps were after its first half (absent where too few steps
    /// ran, and in results made before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_autocorrelation: Option<crate::stats::StepAutocorrelation>,
    /// The warm-up's step timed again once this process had measured every cell the sweep
    /// lacked (before any serving): whether the device still ran at the pace it reached at
    /// equilibrium after the cells, or why it could not be timed. Said in the `equilibrium`
    /// check's detail, not judged. Absent where the sweep did not finish in this process, and in
    /// older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_sweep: Option<Reported<PaceRecheck>>,
    /// A GPU's PCIe link as trained at the end of warm-up, after its minute or more of steps
    /// (the device record holds the fastest it can run: at the run's start an idle GPU's link
    /// runs slower), or why it could not be read. Absent for a CPU, and in results made before
    /// lynx recorded it (2026-12-07).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_at_end: Option<Reported<TrainedLink>>,
}

impl WarmupRecord {
    /// Where the GPU's link ran slower or narrower at its end than `host_link` (the device
    /// record's, read at the run's start) says it can ([`TrainedLink::short_of`]); `None` where
    /// either is not known.
    pub fn link_short(&self, host_link: Option<&Reported<HostLink>>) -> Option<String> {
        match (self.link_at_end.as_ref()?, host_link?) {
            (Reported::Known(trained), Reported::Known(link)) => trained.short_of(link),
            _ => None,
        }
    }

    /// [`WarmupRecord::link_at_end`] in words: `the GPU's PCIe link at its end 32.0 GT/s PCIe
    /// x16`, or `… unread (why)`; `None` where the record has none (a CPU).
    pub fn link_words(&self) -> Option<String> {
        Some(format!("the GPU's PCIe link at its end {}", self.link_at_end.as_ref()?.link_words()))
    }

    /// [`WarmupRecord::after_sweep`] in words: `its step timed again after the sweep took 1.02×
    /// its equilibrium median (67.1 ms over 31 steps)`, or why it could not be; `None` where
    /// the record has none.
    pub fn after_sweep_words(&self) -> Option<String> {
        Some(self.after_sweep.as_ref()?.recheck_words("its step", "after the sweep"))
    }
}

impl Reported<PaceRecheck> {
    /// The warm-up's step timed again in words, `step` naming it and `when` saying when: `its
    /// step timed again after the sweep took 1.02× its equilibrium median (67.1 ms over 31
    /// steps)`, or `its step could not be timed again after the sweep: why`.
    pub fn recheck_words(&self, step: &str, when: &str) -> String {
        match self {
            Reported::Known(again) => {
                let over = format!("{:.1} ms over {} steps", 1e3 * again.median_s.get(), again.steps);
                match again.ratio {
                    Some(ratio) => {
                        format!("{step} timed again {when} took {:.2}× its equilibrium median ({over})", ratio.get())
                    }
                    None => format!("{step} timed again {when} took {over}"),
                }
            }
            Reported::Unavailable { unavailable } => format!("{step} could not be timed again {when}: {unavailable}"),
        }
    }
}

/// The warm-up's step timed again ([`WarmupRecord::after_sweep`], and after each served rate's
/// window, `ServedRate::pace_after`): the same batch and context, its cache cycling as the
/// warm-up's did, for as many steps and seconds as a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaceRecheck {
    pub steps: u64,
    pub median_s: Finite,
    /// `median_s` over the median step of the warm-up's last window (absent where it has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Finite>,
}

/// What a cell measured: a prefill or a decode step at one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "lowercase")]
pub enum CellShape {
    /// A forward pass over `batch` prompts of `prompt_len` tokens into an empty KV cache.
    Prefill { batch: u32, prompt_len: u32 },
    /// One token for each of `batch` sequences whose KV cache holds `ctx` tokens at the first
    /// measured step and one more at each following step, issued as `mode` says (absent in a
    /// result: eager, as every decode cell was before lynx measured graphs).
    Decode {
        batch: u32,
        ctx: u32,
        #[serde(default, skip_serializing_if = "StepMode::is_eager")]
        mode: StepMode,
    },
}

/// How a decode cell's steps were issued to the device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepMode {
    /// Each step's kernels launched one by one by the host, through libtorch's dispatcher.
    #[default]
    Eager,
    /// The step captured once as a CUDA graph (a HIP graph on ROCm) and replayed: one launch a
    /// step, with the cache position and the step's tokens updated in place on the device.
    Graph,
}

impl StepMode {
    pub const ALL: [StepMode; 2] = [StepMode::Eager, StepMode::Graph];

    pub fn is_eager(&self) -> bool {
        *self == StepMode::Eager
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StepMode::Eager => "eager",
            StepMode::Graph => "graph",
        }
    }
}

impl std::fmt::Display for StepMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl CellShape {
    /// The step's length: the prompt length of a prefill, the starting context of a decode.
    pub fn length(&self) -> u32 {
        match *self {
            CellShape::Prefill { prompt_len, .. } => prompt_len,
            CellShape::Decode { ctx, .. } => ctx,
        }
    }

    pub fn batch(&self) -> u32 {
        match *self {
            CellShape::Prefill { batch, .. } | CellShape::Decode { batch, .. } => batch,
        }
    }

    pub fn is_decode(&self) -> bool {
        matches!(self, CellShape::Decode { .. })
    }

    /// How the steps were issued: prefill is always eager.
    pub fn mode(&self) -> StepMode {
        match *self {
            CellShape::Prefill { .. } => StepMode::Eager,
            CellShape::Decode { mode, .. } => mode,
        }
    }

    /// An eager decode cell.
    pub fn decode(batch: u32, ctx: u32) -> CellShape {
        CellShape::Decode { batch, ctx, mode: StepMode::Eager }
    }

    /// Tokens one step produces (decode: one per sequence) or reads (prefill: every prompt token).
    pub fn tokens_per_step(&self) -> u64 {
        match *self {
            CellShape::Prefill { batch, prompt_len } => u64::from(batch) * u64::from(prompt_len),
            CellShape::Decode { batch, .. } => u64::from(batch),
        }
    }
}

impl std::fmt::Display for CellShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CellShape::Prefill { batch, prompt_len } => write!(f, "prefill batch {batch} prompt {prompt_len}"),
            CellShape::Decode { batch, ctx, mode: StepMode::Eager } => write!(f, "decode batch {batch} ctx {ctx}"),
            CellShape::Decode { batch, ctx, mode } => write!(f, "decode batch {batch} ctx {ctx} {mode}"),
        }
    }
}

/// Whether a cell was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum CellStatus {
    Ok,
    /// The device (or the host, for a CPU) ran out of memory; the batch ladder stops here.
    Oom {
        message: String,
    },
    /// A step failed, or the worker process died in the cell; the message says how. A failed
    /// step fails its cell.
    Error {
        message: String,
    },
    /// The worker process was killed in the cell by SIGKILL with no sign of an out-of-memory
    /// kill (the cgroup's and the kernel's counts of OOM kills did not rise): something outside
    /// lynx killed it. Unlike out of memory, the batch ladder goes on.
    Killed {
        message: String,
    },
    /// Not run: the memory the cell was estimated to need beyond the model's weights (its KV
    /// cache and workspace) exceeded the device's free memory. The batch ladder stops here, as
    /// it does on out of memory, without allocating anything.
    Skipped {
        message: String,
        needed_bytes: u64,
        free_bytes: u64,
    },
}

impl CellStatus {
    /// The status of a cell whose step failed with `message`: out of memory where the message
    /// says so (libtorch's CPU, CUDA and HIP allocators), else an error.
    pub fn from_failure(message: String) -> CellStatus {
        let lower = message.to_ascii_lowercase();
        let oom = ["out of memory", "can't allocate memory", "cannot allocate memory", "failed to allocate"]
            .iter()
            .any(|pattern| lower.contains(pattern));
        if oom {
            CellStatus::Oom { message }
        } else {
            CellStatus::Error { message }
        }
    }

    /// The status as the result writes it (`ok`, `oom`, `error`, `killed`, `skipped`).
    pub fn as_str(&self) -> &'static str {
        match self {
            CellStatus::Ok => "ok",
            CellStatus::Oom { .. } => "oom",
            CellStatus::Error { .. } => "error",
            CellStatus::Killed { .. } => "killed",
            CellStatus::Skipped { .. } => "skipped",
        }
    }

    /// What happened to a cell that was not measured, in words.
    pub fn failure(&self) -> Option<&'static str> {
        match self {
            CellStatus::Ok => None,
            CellStatus::Oom { .. } => Some("out of memory"),
            CellStatus::Error { .. } => Some("error"),
            CellStatus::Killed { .. } => Some("killed"),
            CellStatus::Skipped { .. } => Some("does not fit"),
        }
    }

    pub fn message(&self) -> Option<&str> {
        match self {
            CellStatus::Ok => None,
            CellStatus::Oom { message }
            | CellStatus::Error { message }
            | CellStatus::Killed { message }
            | CellStatus::Skipped { message, .. } => Some(message),
        }
    }
}

/// One measured cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRecord {
    #[serde(flatten)]
    pub shape: CellShape,
    #[serde(flatten)]
    pub status: CellStatus,
    /// Step-time distribution; `None` when the cell failed.
    pub step_time: Option<StepTimeSummary>,
    /// Wall time spent on timed steps.
    pub measured_s: Option<Finite>,
    /// Decode only: KV-cache length at the last measured step.
    pub ctx_end: Option<u32>,
    /// For a layer subset: the full-depth estimate, from which the tok/s figures are derived.
    pub full_depth: Option<FullDepth>,
    /// Each telemetry source over the cell's timed steps.
    pub telemetry: Vec<WindowSummary>,
    /// Energy of the timed steps over the tokens they produced (decode) or read (prefill),
    /// where a source measured energy (the device's source before the host's).
    pub joules_per_token: Option<Finite>,
    /// Decode: 1 / median step time. Prefill: undefined (`None`).
    pub tok_per_s_per_user: Option<Finite>,
    /// Decode: batch / median step time. Prefill: batch × prompt length / median step time.
    pub tok_per_s_per_device: Option<Finite>,
    /// The segment of the samples file (the process) that measured the cell: its telemetry
    /// windows' times count from that segment's start. `None` for a cell whose worker died.
    #[serde(default)]
    pub segment: Option<u32>,
    /// The step's work and the cell's figures against the device's measured ceilings; set when
    /// the run is assembled.
    #[serde(default)]
    pub roofline: Option<crate::roofline::CellRoofline>,
    /// The attention kernel the cell's steps ran (absent in results made before lynx recorded
    /// it, and for a cell that failed before asking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<AttentionKernel>,
    /// How a mixture of experts' layers ran their experts in the cell's steps (absent for dense
    /// models, and in results made before lynx recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<ExpertKernel>,
    /// A mixture of experts' cells: the distinct experts its first untimed step routed its tokens
    /// to, averaged over the model's MoE layers. The roofline work counts these experts' weights
    /// as read; absent (dense models, results made before lynx tallied it), the number expected
    /// under uniform routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_touched: Option<Finite>,
    /// The host's issue time of a timed step: from the step's call to the model's step function
    /// returning, before its tokens are copied to the host (which waits for the device); the
    /// median over the timed steps. Absent in results made before lynx recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_median_s: Option<Finite>,
    /// Whether issuing the step took at least 90% of the step (the median issue time against
    /// the median step time): the device then waits on the host and the dispatcher, and the step
    /// time describes them more than the device. Absent on a CPU, which runs each kernel as it
    /// is issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_bound: Option<bool>,
    /// Graph cells: the keys each step's attention spans. A graph step attends over the cache's
    /// whole capacity with the keys past its position masked out, so that one capture serves
    /// every position; its roofline work counts these padded keys, not the context. Absent for
    /// eager cells, which attend the context alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attended: Option<u32>,
    /// Host CPU cores that processes other than lynx's kept busy on average while the cell was
    /// measured, a hypervisor's steal included (from /proc; absent where the host does not say,
    /// and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_cores: Option<Finite>,
    /// Of `other_cpu_cores`, the cores the hypervisor of a virtual machine ran something else on
    /// while the host could have run (steal, from /proc/stat; absent where the host does not say,
    /// and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stolen_cpu_cores: Option<Finite>,
    /// Of `other_cpu_cores`, at least this many on host CPUs the worker could not run on (a
    /// cpuset's or `--cpus`'s others: a shared node's other jobs): those CPUs' busy time from
    /// /proc/stat, less that of lynx's processes other than the worker, which may have run
    /// there. Absent where the worker could run on every CPU, and in older results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_cores_elsewhere: Option<Finite>,
    /// Seconds a CFS quota on lynx's cgroup, or on one above it (a container's CPU limit), held
    /// it off its CPUs while the cell was measured: the cgroups' `cpu.stat` (absent where no
    /// cgroup counts its throttling, and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_throttled_s: Option<Finite>,
    /// Processes other than the worker measuring that held a context on the device while the
    /// cell was measured: the larger of the driver's count less one, asked as the cell began and
    /// as it ended (NVML, ROCm SMI; absent where the device does not say, a CPU's included, and
    /// in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_device_processes: Option<u32>,
    /// Why the cell's first measurement was set aside and the cell measured once more (it was
    /// not stable: its CV or the host's other load passed the suite's bound; or it contradicted
    /// itself: a layer subset measured no slower than its head alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remeasured: Option<String>,
    /// Where the cell's slow steps fell against the telemetry sampler's readings (absent in
    /// older results, and where the cell kept no step times).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_steps: Option<SlowSteps>,
}

/// A cell's steps slower than `factor` times its median step, and for each telemetry source how
/// many of them overlapped one of its readings, beside the share of the cell's other steps that
/// did. A source whose readings hold the steps up (a driver call that waits on a lock the step's
/// launches also take, say) shows most slow steps during its readings against a small share of
/// the others; where the two shares are alike, the slow steps fell where the readings did by
/// chance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowSteps {
    /// A step is slow above this many times the cell's median step.
    pub factor: Finite,
    /// The cell's timed steps.
    pub steps: u32,
    /// Those above `factor` times the median.
    pub slow: u32,
    /// Each source that timed its readings during the cell.
    pub during_readings: Vec<ReadingOverlap>,
    /// What the thread that ran the steps did during the slow steps and during the others: off
    /// its CPU against its will, off it waiting, or on it (absent in older results, and where the
    /// host does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadOverSteps>,
    /// Where libtorch's caching allocator called the device's driver for memory during the steps
    /// (a GPU's, where lynx could ask it; absent on a CPU and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<AllocatorOverSteps>,
    /// How much of the slow steps' time, and of the others', the host spent issuing them (a
    /// GPU's cells; absent on a CPU, whose kernels run as they are issued, in the serving loop's
    /// steps and in older results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<IssueOverSteps>,
}

/// The host's issue time (until the model's call returned, before the step's tokens were copied
/// to the host) over a cell's slow steps and over the others, beside their wall time. A
/// launch-bound step is mostly issue time; a slow one that the host issued as fast as the others
/// waited longer for the device (its clocks, another context, the copy), one that took longer to
/// issue lost its time on the host (the thread, the dispatcher, a lock, the allocator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IssueOverSteps {
    pub slow_issue_s: Finite,
    pub slow_wall_s: Finite,
    pub others_issue_s: Finite,
    pub others_wall_s: Finite,
}

/// libtorch's caching allocator over a cell's steps: its calls to the driver for memory
/// (allocations and frees). A step whose blocks the allocator already held makes none; one that
/// makes some waits on the driver, and a failed allocation's retry frees the cached blocks and
/// synchronises the device first. Slow steps that made calls where the others made none say the
/// allocator held them up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocatorOverSteps {
    /// Slow steps during which it called the driver at least once.
    pub slow: u32,
    /// The other steps during which it did.
    pub others: u32,
    /// Its calls over all the steps.
    pub calls: u64,
}

impl SlowSteps {
    /// Where the slow steps fell, in words, `median` naming what the factor multiplies (`the
    /// median` for a cell's steps, `their median measured / table time` for the serving loop's):
    /// "9 of its 94 steps over 1.2× the median; of them, 8 overlapped nvml:0's readings (the
    /// others: 10%), 1 host's (the others: 9%); the thread running them was preempted in …".
    pub fn words(&self, median: &str) -> String {
        let mut words = format!("{} of its {} steps over {}× {median}", self.slow, self.steps, self.factor.get());
        if self.slow > 0 && !self.during_readings.is_empty() {
            let during: Vec<String> = self
                .during_readings
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    let (verb, noun) = if i == 0 { (" overlapped", " readings") } else { ("", "") };
                    let over = r.over_s.map_or(String::new(), |over| format!(" over {} ms", 1e3 * over.get()));
                    let share = 100.0 * r.others_share.get();
                    format!("{}{verb} {}'s{noun}{over} (the others: {share:.0}%)", r.slow, r.source)
                })
                .collect();
            words.push_str(&format!("; of them, {}", during.join(", ")));
        }
        if let Some(thread) = self.thread.as_ref().filter(|_| self.slow > 0) {
            let others = self.steps.saturating_sub(self.slow);
            let of_others = |n: u32| if others == 0 { 0.0 } else { 100.0 * f64::from(n) / f64::from(others) };
            let on_cpu =
                |cpu: Finite, wall: Finite| if wall.get() > 0.0 { 100.0 * cpu.get() / wall.get() } else { 0.0 };
            words.push_str(&format!(
                "; the thread running them was preempted in {} (the others: {:.0}%), waited off its CPU in {} (the \
                 others: {:.0}%), and was on its CPU for {:.0}% of their time (the others: {:.0}%)",
                thread.slow_preempted,
                of_others(thread.others_preempted),
                thread.slow_blocked,
                of_others(thread.others_blocked),
                on_cpu(thread.slow_cpu_s, thread.slow_wall_s),
                on_cpu(thread.others_cpu_s, thread.others_wall_s)
            ));
            // How long of it the thread waited to run, where the kernel said.
            if let (Some(slow), Some(others)) = (thread.slow_runnable_s, thread.others_runnable_s) {
                words.push_str(&format!(
                    ", waiting to run for {:.0}% (the others: {:.0}%)",
                    on_cpu(slow, thread.slow_wall_s),
                    on_cpu(others, thread.others_wall_s)
                ));
            }
        }
        if let Some(issue) = self.issue.as_ref().filter(|_| self.slow > 0) {
            let share =
                |issue: Finite, wall: Finite| if wall.get() > 0.0 { 100.0 * issue.get() / wall.get() } else { 0.0 };
            let per_step = |seconds: Finite, steps: u32| 1e3 * seconds.get() / f64::from(steps.max(1));
            words.push_str(&format!(
                "; the host issued them in {:.0}% of their time, {:.2} ms a step (the others: {:.0}%, {:.2} ms)",
                share(issue.slow_issue_s, issue.slow_wall_s),
                per_step(issue.slow_issue_s, self.slow),
                share(issue.others_issue_s, issue.others_wall_s),
                per_step(issue.others_issue_s, self.steps.saturating_sub(self.slow))
            ));
        }
        if let Some(allocator) = self.allocator.as_ref().filter(|_| self.slow > 0) {
            let others = self.steps.saturating_sub(self.slow);
            let share = if others == 0 { 0.0 } else { 100.0 * f64::from(allocator.others) / f64::from(others) };
            words.push_str(&format!(
                "; libtorch's allocator called the driver for memory in {} of them (the others: {share:.0}%; {} calls \
                 over all the steps)",
                allocator.slow, allocator.calls
            ));
        }
        words
    }
}

/// The thread that ran a cell's steps (issued them, on a GPU), over its slow steps and over the
/// others, as the kernel accounts for it (the thread's CPU clock, and the context switches
/// `getrusage(RUSAGE_THREAD)` counts). A slow step the thread was preempted in (another thread or
/// process took its CPU) says the host's scheduler held the step up; one it blocked in (it gave
/// up its CPU to wait: a lock, a sleep, I/O, a blocking wait on the device) says it waited on
/// something; one it ran through, on its CPU all along, says the step's own work on the host was
/// longer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadOverSteps {
    /// Slow steps during which the thread was switched out at least once while it could run
    /// (an involuntary context switch).
    pub slow_preempted: u32,
    /// The other steps during which it was.
    pub others_preempted: u32,
    /// Slow steps during which the thread gave up its CPU to wait at least once (a voluntary
    /// context switch).
    pub slow_blocked: u32,
    /// The other steps during which it did.
    pub others_blocked: u32,
    /// The thread's CPU time over the slow steps.
    pub slow_cpu_s: Finite,
    /// The slow steps' wall time.
    pub slow_wall_s: Finite,
    /// The thread's CPU time over the other steps.
    pub others_cpu_s: Finite,
    /// The other steps' wall time.
    pub others_wall_s: Finite,
    /// How long the thread waited to run over the slow steps: runnable but not running (the
    /// kernel's run-queue delay), so off its CPU against its will, for how long where
    /// `slow_preempted` says how often. Within the steps' own wall time: a wait that fell in
    /// the readings around a step is not the step's (results before 2026-12-06 counted it).
    /// What is left of their wall time, neither on its CPU nor waiting to run, is time it
    /// waited of its own (where `slow_blocked` says it did) or time its CPU was not the guest's
    /// to give (a hypervisor's steal, interrupts). Absent in older results and where the kernel
    /// does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_runnable_s: Option<Finite>,
    /// The same over the other steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_runnable_s: Option<Finite>,
}

/// One telemetry source's readings against a cell's steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadingOverlap {
    pub source: String,
    /// The readings that overlapped the cell's timed steps.
    pub readings: u32,
    /// Their median duration.
    pub reading_median_s: Finite,
    /// Slow steps that overlapped one of them.
    pub slow: u32,
    /// The share of the other steps that overlapped one (0 where every step was slow).
    pub others_share: Finite,
    /// Where set, the figures are over the source's readings that took longer than this only
    /// (seconds; those that kept their calls' times, `Sample::slow_calls`), beside its entry for
    /// all of them: whether the slow steps fell on the slow readings in particular. Absent for a
    /// source's entry over all its readings (and in results from before lynx kept it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_s: Option<Finite>,
}

/// How a step runs a mixture of experts' routed experts, none of them copying per-expert counts
/// to the host (lynx-models' `experts` module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpertKernel {
    /// The pairs sorted by expert through libtorch's `_grouped_mm`, offsets on the device.
    Grouped,
    /// Each (token, expert) pair through its own expert's gathered weights.
    Gathered,
    /// Every token through every expert, weighted zero where not chosen.
    Every,
}

impl std::fmt::Display for ExpertKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExpertKernel::Grouped => "grouped",
            ExpertKernel::Gathered => "gathered",
            ExpertKernel::Every => "every",
        })
    }
}

/// The attention kernel of a step: the scaled-dot-product-attention kernel libtorch chose for
/// the step's shapes (ATen's `_fused_sdp_choice`, whose `SDPBackend` numbers these follow), or
/// lynx's explicit matmuls where no fused kernel serves the model (MLA decode, attention sinks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKernel {
    Math,
    Flash,
    MemoryEfficient,
    Cudnn,
    /// A kernel a device backend registered in place of ATen's.
    Overrideable,
    Explicit,
}

impl AttentionKernel {
    /// The kernel of ATen's `SDPBackend` number; `None` for its `error` (-1), or a number it does
    /// not define.
    pub fn from_sdp_backend(number: i64) -> Option<AttentionKernel> {
        match number {
            0 => Some(AttentionKernel::Math),
            1 => Some(AttentionKernel::Flash),
            2 => Some(AttentionKernel::MemoryEfficient),
            3 => Some(AttentionKernel::Cudnn),
            4 => Some(AttentionKernel::Overrideable),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AttentionKernel::Math => "math",
            AttentionKernel::Flash => "flash",
            AttentionKernel::MemoryEfficient => "memory_efficient",
            AttentionKernel::Cudnn => "cudnn",
            AttentionKernel::Overrideable => "overrideable",
            AttentionKernel::Explicit => "explicit",
        }
    }
}

impl std::fmt::Display for AttentionKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl CellRecord {
    /// The median step time the figures use: the full-depth estimate for a layer subset, else
    /// the measured one; `None` for a failed cell.
    pub fn median_s(&self) -> Option<f64> {
        match (&self.full_depth, &self.step_time) {
            (Some(full), _) => Some(full.median_s.get()),
            (None, Some(step)) => Some(step.median_s.get()),
            (None, None) => None,
        }
    }

    /// Mean power over the timed steps from the first source that measured it (the device's
    /// own before the host's).
    pub fn power_mean_w(&self) -> Option<f64> {
        self.telemetry.iter().find_map(|w| w.power_mean_w).map(Finite::get)
    }
}

/// A full-depth step time extrapolated from a layer subset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FullDepth {
    /// Layers measured, and layers the model has.
    pub measured_layers: u32,
    pub model_layers: u32,
    /// Step time of the same cell with no layers: embedding, final norm, lm head, sampling.
    pub head_only: StepTimeSummary,
    /// Estimated full-depth step time statistics.
    pub median_s: Finite,
    pub p90_s: Finite,
    pub p99_s: Finite,
    pub min_s: Finite,
    pub max_s: Finite,
    /// How the estimate was made, in words.
    pub method: String,
}

impl CellRecord {
    /// A cell whose measurement failed: out of memory or an error, as the message says.
    pub fn failed(shape: CellShape, message: String) -> CellRecord {
        CellRecord {
            shape,
            status: CellStatus::from_failure(message),
            step_time: None,
            measured_s: None,
            ctx_end: None,
            full_depth: None,
            telemetry: Vec::new(),
            joules_per_token: None,
            tok_per_s_per_user: None,
            tok_per_s_per_device: None,
            segment: None,
            roofline: None,
            attention: None,
            experts: None,
            experts_touched: None,
            issue_median_s: None,
            launch_bound: None,
            attended: None,
            other_cpu_cores: None,
            stolen_cpu_cores: None,
            other_cpu_cores_elsewhere: None,
            cpu_throttled_s: None,
            other_device_processes: None,
            remeasured: None,
            slow_steps: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_serialise_flat_with_step_and_status() {
        let cell = CellRecord::failed(CellShape::Prefill { batch: 1, prompt_len: 4 }, "oom".into());
        let json = serde_json::to_value(&cell).unwrap();
        assert_eq!(json["step"], "prefill");
        assert_eq!(json["status"], "error");
        assert_eq!(json["message"], "oom");
        let back: CellRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, cell);
    }

    /// A link speed as every kernel writes it, and what names none.
    #[test]
    fn link_speeds_are_read_in_gts() {
        assert_eq!(gts("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(gts("8 GT/s"), Some(8.0));
        assert_eq!(gts(" 2.5 GT/s PCIe\n"), Some(2.5));
        for none in ["", "Unknown", "Unknown speed", "16.0 Gb/s", "GT/s", "-1 GT/s", "NaN GT/s"] {
            assert_eq!(gts(none), None, "{none:?}");
        }
    }
}
