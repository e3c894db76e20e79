//! What a result records about the software that measured.

use crate::libtorch::Runtime;
use crate::run::Graphs;
use lynx_schema::result::{gpu_libraries_words, hex, CheckName, Harness, RunResult};
use lynx_schema::value::Reported;
use sha2::{Digest, Sha256};

/// The harness section of a result for this process; `graphs`: whether it can capture decode
/// steps as graphs, or why not.
pub fn describe(runtime: &Runtime, graphs: Reported<bool>) -> Harness {
    Harness {
        lynx_version: env!("CARGO_PKG_VERSION").to_owned(),
        git_commit: non_empty(env!("LYNX_GIT_COMMIT"), "lynx was built outside a git checkout"),
        binary_sha256: binary_sha256(),
        tch_version: env!("LYNX_TCH_VERSION").to_owned(),
        libtorch_build_version: non_empty(
            env!("LYNX_LIBTORCH_BUILD_VERSION"),
            "the libtorch built against declares no version",
        ),
        libtorch_runtime_version: runtime.version.clone(),
        libtorch_path: match &runtime.lib_dir {
            Reported::Known(dir) => Reported::Known(dir.display().to_string()),
            Reported::Unavailable { unavailable } => Reported::unavailable(unavailable.clone()),
        },
        gpu_backends: runtime.gpu_backends.clone(),
        torch_threads: tch::get_num_threads(),
        rustc: env!("LYNX_RUSTC").to_owned(),
        build_profile: env!("LYNX_BUILD_PROFILE").to_owned(),
        graphs: Some(graphs),
        test_hooks: test_hooks_set(),
        environment: Some(steering_environment()),
        gpu_libraries: runtime.gpu_libraries(),
        // The run's plan says (the worker sets it).
        cpu_binding: None,
    }
}

/// Steering variables in words: each `NAME=value`, or "none".
pub fn variables_words(set: &[String]) -> String {
    if set.is_empty() {
        "none".to_owned()
    } else {
        set.join(", ")
    }
}

/// The variables set in this process's environment that steer libtorch, CUDA, ROCm, their
/// libraries or OpenMP, as `NAME=value`, sorted (`Harness::environment`; empty where none is).
pub fn steering_environment() -> Vec<String> {
    named(std::env::vars_os(), steers).unwrap_or_default()
}

/// Where a variable's name says it steers how libtorch, CUDA, ROCm, their libraries or OpenMP
/// run, and so what a run measures: `CUDA_LAUNCH_BLOCKING=1` makes every eager launch wait for
/// its kernel, `NVIDIA_TF32_OVERRIDE` changes fp32 matmuls, `ONEDNN_MAX_CPU_ISA` which
/// instructions a CPU's matmuls use, `PYTORCH_CUDA_ALLOC_CONF` the caching allocator,
/// `OMP_NUM_THREADS` a CPU's threads, `LD_PRELOAD` puts a library (a profiler, an interposer)
/// under every call. Not a container's other `NVIDIA_…` variables (which GPUs and driver
/// features it was given: the device record says what was measured), nor lynx's own (`LYNX_…`):
/// its test hooks are recorded apart, and the rest name files. Nor, under those prefixes, what
/// an image states of itself and nothing at run time reads: a version (`CUDA_VERSION`,
/// `CUDNN_VERSION`, `NCCL_VERSION`, `PYTORCH_VERSION`, … every name ending `_VERSION`; the
/// libraries loaded are recorded from themselves) or where a toolkit lies for builds of
/// extensions (`CUDA_HOME`, `TORCH_CUDA_ARCH_LIST`, `HIP_PATH`, `PYTORCH_ROCM_ARCH`, …).
/// Recorded, they would make two nodes' runs differ, and a resume be refused, by the image's
/// name for itself. A path that puts a library under the calls (`CUDA_INJECTION64_PATH`, a
/// profiler's) is kept.
fn steers(name: &str) -> bool {
    const IMAGE: [&str; 13] = [
        "CUDA_HOME",
        "CUDA_PATH",
        "CUDA_ROOT",
        "TORCH_HOME",
        "TORCH_EXTENSIONS_DIR",
        "TORCH_CUDA_ARCH_LIST",
        "TORCH_NVCC_FLAGS",
        "PYTORCH_BUILD_NUMBER",
        // ROCm images' own: the GPU architectures extensions are built for (the twin of
        // TORCH_CUDA_ARCH_LIST), and where HIP's toolkit, compiler and device libraries lie for
        // hipcc.
        "PYTORCH_ROCM_ARCH",
        "HIP_PATH",
        "HIP_PLATFORM",
        "HIP_CLANG_PATH",
        "HIP_DEVICE_LIB_PATH",
    ];
    if name.ends_with("_VERSION") || IMAGE.contains(&name) {
        return false;
    }
    const PREFIXES: [&str; 24] = [
        "CUDA_",
        "CUBLAS_",
        "CUBLASLT_",
        "CUDNN_",
        "NCCL_",
        "PYTORCH_",
        "TORCH_",
        // ATen's own CPU kernels (`ATEN_CPU_CAPABILITY` caps the vector width they dispatch to)
        // and the CPU libraries under them: oneDNN (`ONEDNN_MAX_CPU_ISA`, or `DNNL_…` and
        // `MKLDNN_…` in older names, takes AMX or AVX-512 away from its kernels), OpenBLAS.
        "ATEN_",
        "ONEDNN_",
        "DNNL_",
        "MKLDNN_",
        "OPENBLAS_",
        "OMP_",
        "GOMP_",
        "KMP_",
        "MKL_",
        "HIP_",
        "ROCR_",
        "HSA_",
        "MIOPEN_",
        // ROCm's math and collective libraries, as cuBLAS's and NCCL's above.
        "ROCBLAS_",
        "HIPBLASLT_",
        "TENSILE_",
        "RCCL_",
    ];
    // The HIP runtime's own: `AMD_SERIALIZE_KERNEL=3` waits for every kernel, as
    // `CUDA_LAUNCH_BLOCKING=1` does; `GPU_MAX_HW_QUEUES` sets how many hardware queues it uses.
    const NAMES: [&str; 5] =
        ["LD_PRELOAD", "NVIDIA_TF32_OVERRIDE", "AMD_SERIALIZE_KERNEL", "AMD_SERIALIZE_COPY", "GPU_MAX_HW_QUEUES"];
    NAMES.contains(&name) || PREFIXES.iter().any(|prefix| name.starts_with(prefix))
}

/// How this process would measure differently from the ones that left `earlier` (a run's result
/// so far): another libtorch at run time, another number of its threads, graphs captured where
/// they were not (or not where they were), other CPUs or CPU quota, other GPU math libraries
/// (cuBLAS, cuDNN, …), or other variables steering libtorch and its libraries. A resume must not
/// add cells measured so to that result's (each difference in words; none: it may).
pub fn resume_differences(earlier: &RunResult, runtime: &Runtime) -> Vec<String> {
    let mut out = Vec::new();
    let threads = tch::get_num_threads();
    if earlier.harness.torch_threads != threads {
        out.push(format!(
            "its cells were measured on {} libtorch threads, this process has {threads} (OMP_NUM_THREADS sets them)",
            earlier.harness.torch_threads
        ));
    }
    let (was, now) = (earlier.harness.libtorch_runtime_version.to_string(), runtime.version.to_string());
    if was != now {
        out.push(format!("its cells were measured with libtorch {was}, this process loads {now}"));
    }
    out.extend(graph_difference(earlier, &Graphs::for_device(crate::devices::torch_device(earlier.device.device))));
    // Other CPUs, or another quota of CPU time, make other steps (results before the record say
    // nothing of it).
    if let (Some(was), Some(now)) = (&earlier.host.cpu_allowance, lynx_telemetry::cpu_allowance()) {
        if was.words() != now.words() {
            out.push(format!("its cells were measured with {}, this process has {}", was.words(), now.words()));
        }
    }
    // Another memory policy places the tensors elsewhere (`numactl --interleave`; results before
    // the record say nothing of it).
    if let Some(Reported::Known(was)) = &earlier.host.memory_policy {
        if let Reported::Known(now) = crate::binding::memory_policy() {
            if *was != now {
                out.push(format!("its cells were measured under memory policy {was}, this process runs under {now}"));
            }
        }
    }
    // A CPU device's kernels are chosen by what its CPUs offer (a run resumed on another host,
    // or a virtual machine moved to another CPU).
    if earlier.device.device == lynx_schema::device::DeviceName::Cpu {
        if let (Some(Reported::Known(was)), Reported::Known(now)) =
            (&earlier.host.cpu_features, lynx_telemetry::host_cpu_features())
        {
            if *was != now {
                out.push(format!("its cells were measured on CPUs offering {was}, this host's offer {now}"));
            }
        }
    }
    // Another cuBLAS or cuDNN under the same libtorch runs other kernels (a result that does not
    // record them says nothing of them).
    if let (Some(was), Some(now)) = (&earlier.harness.gpu_libraries, &runtime.gpu_libraries()) {
        let (was, now) = (gpu_libraries_words(Some(was)), gpu_libraries_words(Some(now)));
        if was != now {
            out.push(format!("its cells were measured with GPU libraries {was}, this process has {now}"));
        }
    }
    // `CUDA_LAUNCH_BLOCKING`, the allocator's settings, TF32 or a preloaded library change the
    // steps as much (a result that does not record them says nothing of them).
    if let Some(was) = &earlier.harness.environment {
        let now = steering_environment();
        if *was != now {
            out.push(format!(
                "its cells were measured with steering variables {} set, this process has {}",
                variables_words(was),
                variables_words(&now)
            ));
        }
    }
    out
}

/// Whether `graphs` would measure decode where the processes that left `earlier` did not (graph
/// lines beside eager ones), or not where they did: in words, or none. Processes could capture
/// graphs where one of them ran the graph parity check or the harness says graphs are available
/// (a stand-in that a test hook makes available runs the check too); a result with no cells yet
/// has nothing to mix with.
fn graph_difference(earlier: &RunResult, graphs: &Graphs) -> Option<String> {
    let could = earlier.checks.iter().any(|c| c.name == CheckName::GraphParity)
        || matches!(earlier.harness.graphs, Some(Reported::Known(true)));
    if earlier.cells.is_empty() || could == graphs.available() {
        return None;
    }
    Some(if could {
        let reason = match graphs.record() {
            Reported::Unavailable { unavailable } => unavailable,
            Reported::Known(_) => String::new(),
        };
        format!(
            "its decode cells were measured eagerly and as graphs, and this process cannot capture graphs ({reason})"
        )
    } else {
        let reason = match &earlier.harness.graphs {
            Some(Reported::Unavailable { unavailable }) => unavailable.as_str(),
            _ => "not recorded",
        };
        format!("its decode cells were measured eagerly only (graphs: {reason}), and this process can capture graphs")
    })
}

/// The test hooks set in this process's environment, as a result made now would record them
/// (`Harness::test_hooks`), or none.
pub fn test_hooks_set() -> Option<Vec<String>> {
    named(std::env::vars_os(), |name| name.starts_with("LYNX_TEST_"))
}

/// The variables among `vars` whose name `keep` keeps, as `NAME=value` (a value cut at 1000
/// characters), sorted; or none.
fn named(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
    keep: impl Fn(&str) -> bool,
) -> Option<Vec<String>> {
    let mut kept: Vec<String> = vars
        .filter(|(name, _)| keep(&name.to_string_lossy()))
        .map(|(name, value)| {
            let value: String = value.to_string_lossy().chars().take(1000).collect();
            format!("{}={value}", name.to_string_lossy())
        })
        .collect();
    kept.sort();
    (!kept.is_empty()).then_some(kept)
}

/// The test hooks of a run some of whose cells one process measured under `earlier` and the
/// rest another under `now`: every one of either, sorted, once each (none where neither had any).
pub(crate) fn every_setting(earlier: Option<Vec<String>>, now: Option<Vec<String>>) -> Option<Vec<String>> {
    let settings = union(earlier.into_iter().chain(now).flatten());
    (!settings.is_empty()).then_some(settings)
}

/// The steering variables of a run some of whose cells one process measured under `earlier`
/// and the rest another under `now`: every one of either, sorted, once each (empty where
/// neither had any); not recorded where the earlier processes' were not (a resume refuses other
/// variables, so the two are the same set wherever both were recorded).
pub(crate) fn every_variable(earlier: Option<Vec<String>>, now: Option<Vec<String>>) -> Option<Vec<String>> {
    Some(union(earlier?.into_iter().chain(now?)))
}

fn union(settings: impl Iterator<Item = String>) -> Vec<String> {
    let mut settings: Vec<String> = settings.collect();
    settings.sort();
    settings.dedup();
    settings
}

fn non_empty(value: &str, reason: &str) -> Reported<String> {
    if value.is_empty() {
        Reported::unavailable(reason)
    } else {
        Reported::Known(value.to_owned())
    }
}

/// sha256 of the running executable's file.
pub fn binary_sha256() -> Reported<String> {
    std::env::current_exe().and_then(std::fs::read).map(|bytes| hex(&Sha256::digest(bytes))).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::result::CpuAllowance;
    use lynx_schema::value::Finite;
    use std::ffi::OsString;

    #[test]
    fn test_hooks_are_the_lynx_test_variables_sorted() {
        let vars = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs.iter().map(|(n, v)| (OsString::from(n), OsString::from(v))).collect()
        };
        let set = vars(&[
            ("PATH", "/bin"),
            ("LYNX_TEST_SLOW_SERVING", "25"),
            ("LYNX_FREE_MEMORY_BYTES", "1000"),
            ("LYNX_TEST_GRAPHS", "reissue"),
            ("MY_LYNX_TEST_X", "1"),
        ]);
        let hooks = |set: Vec<(OsString, OsString)>| named(set.into_iter(), |name| name.starts_with("LYNX_TEST_"));
        assert_eq!(
            hooks(set),
            Some(vec!["LYNX_TEST_GRAPHS=reissue".to_owned(), "LYNX_TEST_SLOW_SERVING=25".to_owned()])
        );
        assert_eq!(hooks(vars(&[("PATH", "/bin")])), None);
    }

    /// The variables that steer libtorch, CUDA, ROCm or OpenMP are recorded, sorted, and nothing
    /// else of the environment (lynx's own included: its test hooks are recorded apart).
    #[test]
    fn the_steering_variables_are_recorded_and_nothing_else() {
        let set: Vec<(OsString, OsString)> = [
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("HF_TOKEN", "secret"),
            ("LYNX_TEST_GRAPHS", "reissue"),
            ("LYNX_MODELS_DIR", "/models"),
            ("OMP_NUM_THREADS", "4"),
            ("CUDA_LAUNCH_BLOCKING", "1"),
            ("LD_PRELOAD", "/usr/lib/libprofiler.so"),
            ("LD_LIBRARY_PATH", "/opt/torch/lib"),
            ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
            ("NVIDIA_TF32_OVERRIDE", "0"),
            ("NVIDIA_VISIBLE_DEVICES", "all"),
            // What an image says of itself, read by nothing at run time.
            ("CUDA_VERSION", "13.0.1"),
            ("CUDNN_VERSION", "9.19.0"),
            ("PYTORCH_BUILD_VERSION", "2.11.0"),
            ("CUDA_HOME", "/usr/local/cuda"),
            ("TORCH_CUDA_ARCH_LIST", "9.0"),
            ("PYTORCH_ROCM_ARCH", "gfx942"),
            ("HIP_PATH", "/opt/rocm"),
            // Which GPUs a ROCm process sees is kept, as CUDA_VISIBLE_DEVICES is.
            ("HIP_VISIBLE_DEVICES", "0"),
            // A profiler injected under every CUDA call is kept.
            ("CUDA_INJECTION64_PATH", "/opt/nsight/libinjection.so"),
            // A CPU's kernels capped below what the CPU can do, and a HIP runtime that waits.
            ("ATEN_CPU_CAPABILITY", "avx2"),
            ("ONEDNN_MAX_CPU_ISA", "AVX512_CORE"),
            ("AMD_SERIALIZE_KERNEL", "3"),
            ("AMD_VENDOR", "x"),
        ]
        .iter()
        .map(|(n, v)| (OsString::from(n), OsString::from(v)))
        .collect();
        assert_eq!(
            named(set.into_iter(), steers).unwrap(),
            [
                "AMD_SERIALIZE_KERNEL=3",
                "ATEN_CPU_CAPABILITY=avx2",
                "CUDA_INJECTION64_PATH=/opt/nsight/libinjection.so",
                "CUDA_LAUNCH_BLOCKING=1",
                "HIP_VISIBLE_DEVICES=0",
                "LD_PRELOAD=/usr/lib/libprofiler.so",
                "NVIDIA_TF32_OVERRIDE=0",
                "OMP_NUM_THREADS=4",
                "ONEDNN_MAX_CPU_ISA=AVX512_CORE",
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
            ]
        );
        let long = [(OsString::from("TORCH_X"), OsString::from("y".repeat(5000)))];
        assert_eq!(named(long.into_iter(), steers).unwrap()[0].len(), "TORCH_X=".len() + 1000);
    }

    /// The run published from this host, eager only on its CPU, as an earlier process left it.
    fn published() -> RunResult {
        let run = "20261203T010753Z-dd076e65";
        let path = format!("{}/../../results/amd-epyc/{run}/{run}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// A resume in this process may add to a result this process's libtorch and thread count
    /// made, and not to one another libtorch or thread count made, each difference named.
    #[test]
    fn a_resume_is_told_what_would_measure_differently() {
        let runtime = crate::libtorch::load_gpu_backends();
        let mut same = published();
        same.harness = describe(runtime, Reported::unavailable("a test"));
        assert_eq!(resume_differences(&same, runtime), Vec::<String>::new());
        let mut other = same.clone();
        other.harness.torch_threads += 5;
        other.harness.libtorch_runtime_version = Reported::Known("2.10.0+cpu".to_owned());
        let said = resume_differences(&other, runtime);
        assert_eq!(said.len(), 2, "{said:?}");
        let threads = same.harness.torch_threads + 5;
        assert!(said[0].starts_with(&format!("its cells were measured on {threads} libtorch threads")));
        assert!(said[1].starts_with("its cells were measured with libtorch 2.10.0+cpu, this process loads 2.11.0"));
        // Other steering variables; a result that does not record them says nothing of them.
        let mut steered = same.clone();
        steered.harness.environment = Some(vec!["CUDA_LAUNCH_BLOCKING=1".to_owned()]);
        let ours = steering_environment();
        let now = if ours.is_empty() { "none".to_owned() } else { ours.join(", ") };
        assert_eq!(
            resume_differences(&steered, runtime),
            [format!(
                "its cells were measured with steering variables CUDA_LAUNCH_BLOCKING=1 set, this process has {now}"
            )]
        );
        steered.harness.environment = None;
        assert_eq!(resume_differences(&steered, runtime), Vec::<String>::new());
        // Other GPU math libraries, named by version; a result that does not record them says
        // nothing of them.
        let mut libraries = same.clone();
        libraries.harness.gpu_libraries = Some(vec![lynx_schema::result::GpuLibrary {
            name: "cuDNN".to_owned(),
            file: "/elsewhere/libcudnn.so.9".to_owned(),
            version: Reported::Known("9.10.2".to_owned()),
        }]);
        let now = gpu_libraries_words(runtime.gpu_libraries().as_deref());
        assert_eq!(
            resume_differences(&libraries, runtime),
            [format!("its cells were measured with GPU libraries cuDNN 9.10.2, this process has {now}")]
        );
        libraries.harness.gpu_libraries = None;
        assert_eq!(resume_differences(&libraries, runtime), Vec::<String>::new());
        // Another memory policy than this process runs under; a result without one says nothing.
        let policy = crate::binding::memory_policy();
        assert!(policy.known().is_some(), "Linux says a thread's memory policy: {policy:?}");
        let mut placed = same.clone();
        placed.host.memory_policy = Some(policy.clone());
        assert_eq!(resume_differences(&placed, runtime), Vec::<String>::new());
        placed.host.memory_policy = Some(Reported::Known("interleave over nodes 0-7 on memory nodes 0-7".to_owned()));
        assert_eq!(
            resume_differences(&placed, runtime),
            [format!(
                "its cells were measured under memory policy interleave over nodes 0-7 on memory nodes 0-7, this \
                 process runs under {policy}"
            )]
        );
        // Other CPU features than this host's, for the CPU device the result measured.
        let features = lynx_telemetry::host_cpu_features();
        let mut moved = same.clone();
        assert_eq!(moved.device.device, lynx_schema::device::DeviceName::Cpu);
        moved.host.cpu_features = Some(features.clone());
        assert_eq!(resume_differences(&moved, runtime), Vec::<String>::new());
        // No CPU offers both x86's and Arm's.
        moved.host.cpu_features = Some(Reported::Known("avx2 amx_tile asimd sme".to_owned()));
        let Reported::Known(now) = &features else { panic!("Linux's /proc/cpuinfo names features: {features:?}") };
        assert_eq!(
            resume_differences(&moved, runtime),
            [format!("its cells were measured on CPUs offering avx2 amx_tile asimd sme, this host's offer {now}")]
        );
        // This process's CPUs and quota, or others.
        let Some(now) = lynx_telemetry::cpu_allowance() else { return };
        same.host.cpu_allowance = Some(now.clone());
        assert_eq!(resume_differences(&same, runtime), Vec::<String>::new());
        let quota = Finite::new(0.5, "cores").unwrap();
        same.host.cpu_allowance = Some(CpuAllowance { cpu_count: now.cpu_count + 1, quota_cores: Some(quota), ..now });
        let said = resume_differences(&same, runtime);
        let was = format!("{} CPUs, a CPU quota of 0.50 cores", same.host.cpu_allowance.as_ref().unwrap().cpu_count);
        assert!(
            said.len() == 1 && said[0].starts_with(&format!("its cells were measured with {was}, this")),
            "{said:?}"
        );
    }

    /// Graph lines are measured by every process of a run or by none: a resume that could
    /// capture graphs where the earlier processes could not, or not where they could, is told.
    #[test]
    fn a_resume_is_told_when_graphs_would_be_measured_differently() {
        let eager = published();
        // The reason the published fixture recorded (as lynx then worded it), quoted as it stands.
        let cpu = "graphs are captured on CUDA and ROCm devices only, and this run is on Cpu";
        let unavailable = Graphs::Unavailable("the CUDA shim did not load".to_owned());
        assert_eq!(graph_difference(&eager, &Graphs::Unavailable(cpu.to_owned())), None);
        assert_eq!(
            graph_difference(&eager, &Graphs::Reissue).as_deref(),
            Some(
                format!(
                    "its decode cells were measured eagerly only (graphs: {cpu}), and this process can capture graphs"
                )
                .as_str()
            )
        );
        assert!(graph_difference(&eager, &Graphs::Cuda(0)).is_some());
        // Before any cell there is nothing to mix with.
        let mut empty = eager.clone();
        empty.cells.clear();
        assert_eq!(graph_difference(&empty, &Graphs::Reissue), None);
        // An earlier process that ran the graph parity check could capture graphs.
        let mut graphs = eager.clone();
        let mut check = graphs.checks[0].clone();
        check.name = CheckName::GraphParity;
        graphs.checks.push(check);
        assert_eq!(graph_difference(&graphs, &Graphs::Reissue), None);
        assert_eq!(graph_difference(&graphs, &Graphs::Cuda(0)), None);
        assert_eq!(
            graph_difference(&graphs, &unavailable).as_deref(),
            Some(
                "its decode cells were measured eagerly and as graphs, and this process cannot capture graphs (the \
                 CUDA shim did not load)"
            )
        );
        // So could one whose harness says graphs are available.
        let mut available = eager.clone();
        available.harness.graphs = Some(Reported::Known(true));
        assert!(graph_difference(&available, &unavailable).is_some());
        assert_eq!(graph_difference(&available, &Graphs::Cuda(0)), None);
    }

    /// A resumed run keeps the hooks and steering variables its earlier processes ran under, and
    /// adds its own; variables an earlier process did not record are not recorded of the run.
    #[test]
    fn a_resumed_run_has_every_setting_any_of_its_processes_had() {
        let hooks = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect::<Vec<String>>());
        assert_eq!(every_setting(None, None), None);
        assert_eq!(every_setting(Some(Vec::new()), None), None);
        assert_eq!(every_setting(hooks(&["LYNX_TEST_B=1"]), None), hooks(&["LYNX_TEST_B=1"]));
        assert_eq!(every_setting(None, hooks(&["LYNX_TEST_B=1"])), hooks(&["LYNX_TEST_B=1"]));
        assert_eq!(
            every_setting(hooks(&["LYNX_TEST_B=1", "LYNX_TEST_C=2"]), hooks(&["LYNX_TEST_A=3", "LYNX_TEST_B=1"])),
            hooks(&["LYNX_TEST_A=3", "LYNX_TEST_B=1", "LYNX_TEST_C=2"])
        );
        assert_eq!(every_variable(Some(Vec::new()), Some(Vec::new())), Some(Vec::new()));
        assert_eq!(
            every_variable(hooks(&["OMP_NUM_THREADS=1"]), hooks(&["CUDA_X=1"])),
            hooks(&["CUDA_X=1", "OMP_NUM_THREADS=1"])
        );
        assert_eq!(every_variable(None, hooks(&["CUDA_X=1"])), None);
    }
}
