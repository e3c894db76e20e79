//! What the binary prints about this host's devices and runtime (the views of results are
//! lynx-report's).

use lynx_report::escape::terminal_text;
use lynx_report::table::Table;
use lynx_runner::libtorch::Runtime;
use lynx_runner::Device;
use lynx_schema::device::DeviceName;
use lynx_schema::result::{gpu_libraries_words, RunResult, WeightsRecord};
use lynx_schema::value::Reported;
use std::fmt::Write;
use std::path::PathBuf;

const GIB: f64 = (1u64 << 30) as f64;

/// `lynx devices` as a table.
pub fn devices_table(devices: &[Device], runtime: &Runtime) -> String {
    let libtorch = format!("libtorch {} ({})", runtime.version, display_path(&runtime.lib_dir));
    let mut rows = Table::new(["DEVICE", "NAME", "MEMORY", "DATASHEET", "RUNS ON"].map(str::to_owned));
    let mut without = Vec::new();
    for device in devices {
        let memory = match &device.record.memory_bytes {
            Reported::Known(bytes) => format!("{:.1} GiB", *bytes as f64 / GIB),
            Reported::Unavailable { .. } => "unavailable".to_owned(),
        };
        let sheet = match (lynx_runner::devices::datasheet_of(&device.record), device.record.device) {
            (Some(sheet), _) => format!(
                "{} ({} TB/s, {} bf16 TFLOP/s)",
                sheet.name,
                sheet.bandwidth_bytes_per_s / 1e12,
                sheet.bf16_flops_per_s / 1e12
            ),
            (None, DeviceName::Cpu) => "-".to_owned(),
            (None, _) => {
                without.push(device.record.name_or_kind());
                "none".to_owned()
            }
        };
        rows.row([device.record.device.to_string(), device.record.name.to_string(), memory, sheet, libtorch.clone()]);
    }
    let mut out = rows.text(usize::MAX);
    for name in without {
        let _ = writeln!(
            out,
            "note: lynx has no datasheet for {}: its wall-time estimate waits for the measured ceilings, \
             and scripts/gpu-check.sh needs --datasheet-tbs",
            terminal_text(&name, 200)
        );
    }
    for backend in &runtime.gpu_backends {
        if let Reported::Unavailable { unavailable } = &backend.loaded {
            let _ = writeln!(out, "note: {} not loaded: {unavailable}", backend.library);
        }
    }
    // Where each GPU sits on the host's PCI tree, and what of it slows a GPU's host work.
    for device in devices {
        out.push_str(&host_link_lines(&device.record));
    }
    // The libraries a GPU backend brought, which a run records (`harness.gpu_libraries`).
    if let Some(libraries) = runtime.gpu_libraries().filter(|l| !l.is_empty()) {
        let _ = writeln!(out, "GPU libraries: {}", terminal_text(&gpu_libraries_words(Some(&libraries)), 300));
    }
    let gpus = devices.iter().any(|d| !matches!(d.record.device, DeviceName::Cpu));
    match lynx_runner::cuda::shim() {
        Ok(_) if gpus => out.push_str("CUDA graphs: available\n"),
        // A CUDA libtorch on a host whose driver shows it no GPU: the shim is asked for device
        // 0's memory anyway, so that what the CUDA runtime says about it is printed.
        Ok(_) => {
            let why = match lynx_runner::cuda::free_memory(0) {
                Err(error) => format!("the CUDA runtime says: {}", terminal_text(&error, 300)),
                Ok((free, total)) => format!("yet the CUDA runtime says device 0 has {free} of {total} bytes free"),
            };
            let _ = writeln!(out, "CUDA graphs: unavailable (the CUDA shim loaded, but libtorch sees no GPU; {why})");
        }
        Err(reason) => {
            let _ = writeln!(out, "CUDA graphs: unavailable ({reason})");
        }
    }
    out
}

/// A GPU's host link in a line (`cuda:0: PCI 0000:19:00.0 on NUMA node 0 …`), and a warning line
/// for each thing about it that slows the GPU's host work; nothing for a CPU.
pub fn host_link_lines(device: &lynx_schema::result::DeviceRecord) -> String {
    let mut out = String::new();
    if let Some(words) = device.host_link_words() {
        let _ = writeln!(out, "{}: {}", device.device, terminal_text(&words, 400));
    }
    if let Some(Reported::Known(link)) = &device.host_link {
        for warning in link.warnings() {
            let _ = writeln!(out, "warning: {}: {}", device.device, terminal_text(&warning, 400));
        }
    }
    out
}

fn display_path(path: &Reported<PathBuf>) -> String {
    match path {
        Reported::Known(path) => path.display().to_string(),
        Reported::Unavailable { unavailable } => format!("path unavailable: {unavailable}"),
    }
}

/// How this node differs from the one that published `original`.
pub fn reproduction_warnings(
    original: &RunResult,
    host: &lynx_schema::result::HostRecord,
    device: &Device,
    runtime: &Runtime,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let (published, local) = (original.device.name.to_string(), device.record.name.to_string());
    if published != local || original.device.device != device.record.device {
        warnings.push(format!(
            "the published device is {} ({}), this one {} ({})",
            terminal_text(&published, 100),
            original.device.device,
            terminal_text(&local, 100),
            device.record.device
        ));
    }
    if original.harness.lynx_version != env!("CARGO_PKG_VERSION") {
        warnings.push(format!(
            "published with lynx {}, this is lynx {}",
            terminal_text(&original.harness.lynx_version, 40),
            env!("CARGO_PKG_VERSION")
        ));
    }
    let (theirs, ours) = (original.harness.libtorch_runtime_version.to_string(), runtime.version.to_string());
    if theirs != ours {
        warnings.push(format!("published with libtorch {}, this node runs {ours}", terminal_text(&theirs, 60)));
    }
    // What the publisher's host allowed the run of its CPUs, and the variables that steered its
    // libraries, against this node's: each changes the steps (said again in the comparison).
    if let (Some(theirs), Some(ours)) = (&original.host.cpu_allowance, &host.cpu_allowance) {
        if theirs.words() != ours.words() {
            warnings.push(format!(
                "the published run was allowed {}, this node allows {}",
                theirs.words(),
                ours.words()
            ));
        }
    }
    let words = lynx_runner::variables_words;
    let ours = lynx_runner::steering_environment();
    match &original.harness.environment {
        Some(theirs) if *theirs != ours => warnings.push(format!(
            "the published run was made with {} set, this node has {}",
            terminal_text(&words(theirs), 300),
            terminal_text(&words(&ours), 300)
        )),
        // A result that does not record them may have been made with none set, or with any.
        None if !ours.is_empty() => warnings.push(format!(
            "the published result does not record the variables steering its libraries, and this node has {} set",
            terminal_text(&words(&ours), 300)
        )),
        _ => {}
    }
    // Another memory policy places the tensors elsewhere (`numactl --interleave` against the
    // default); the node lists follow each host's NUMA layout, so only the policy's kind counts.
    if let (Some(Reported::Known(theirs)), Some(Reported::Known(ours))) =
        (&original.host.memory_policy, &host.memory_policy)
    {
        if lynx_runner::binding::policy_kind(theirs) != lynx_runner::binding::policy_kind(ours) {
            warnings.push(format!(
                "the published run allocated under memory policy {}, this node under {ours}",
                terminal_text(theirs, 200)
            ));
        }
    }
    // A CPU device's kernels are chosen by what its CPUs offer (AVX-512, AMX): a model name
    // may say nothing of it in a virtual machine.
    if let (DeviceName::Cpu, Some(Reported::Known(theirs)), Some(Reported::Known(ours))) =
        (original.device.device, &original.host.cpu_features, &host.cpu_features)
    {
        if theirs != ours {
            warnings.push(format!(
                "the published run's CPUs offered {} to libtorch's CPU kernels, this node's offer {ours}",
                terminal_text(theirs, 300)
            ));
        }
    }
    // Another cuBLAS or cuDNN under the same libtorch runs other kernels.
    if let (Some(theirs), Some(ours)) = (&original.harness.gpu_libraries, &runtime.gpu_libraries()) {
        let (theirs, ours) = (gpu_libraries_words(Some(theirs)), gpu_libraries_words(Some(ours)));
        if theirs != ours {
            warnings.push(format!(
                "the published run loaded GPU libraries {}, this node has {ours}",
                terminal_text(&theirs, 300)
            ));
        }
    }
    // Said before the run's minutes are spent, not only in the verdict after them.
    if let Some(hooks) = original.harness.test_hooks() {
        warnings.push(format!(
            "the published result was made with test hooks set ({}): its figures are a test's, not its device's, \
             so this reproduction compares no device with it",
            terminal_text(&hooks, 300)
        ));
    }
    warnings
}

/// The size of a checkpoint's files, as a result records them, in words.
pub fn checkpoint_size(files: &[(String, u64)]) -> String {
    lynx_report::text::bytes_words(lynx_schema::result::files_bytes(files))
}

/// Why the weights a reproduction reads may not be the published run's: a checkpoint whose
/// `*.safetensors` files or their sizes differ from those the published result records (or a
/// checkpoint where it drew its weights, or the reverse). Names and sizes are what a result
/// records of a checkpoint; the same names and sizes say nothing of the contents.
pub fn weights_warning(published: &WeightsRecord, local: Option<&[(String, u64)]>) -> Option<String> {
    match (published, local) {
        (WeightsRecord::Random { seed }, Some(_)) => Some(format!(
            "the published run drew its weights from its suite's seed ({seed}); this reproduction reads them from \
             a checkpoint"
        )),
        (WeightsRecord::Checkpoint { files, .. }, Some(local)) if files.as_slice() != local => {
            let differ = files
                .iter()
                .zip(local)
                .find(|(a, b)| a != b)
                .map(|((name, size), (local_name, local_size))| {
                    format!(
                        ": the first that differs is {} ({size} bytes) against {} ({local_size} bytes)",
                        terminal_text(name, 100),
                        terminal_text(local_name, 100)
                    )
                })
                .unwrap_or_default();
            Some(format!(
                "the checkpoint given is not the published run's: {} *.safetensors files of {} against its {} of \
                 {}{differ}",
                local.len(),
                checkpoint_size(local),
                files.len(),
                checkpoint_size(files)
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lynx_schema::result::HostRecord;

    /// The run published from this project's host (results/amd-epyc).
    fn published() -> RunResult {
        let run = "20261203T010753Z-dd076e65";
        let path = format!("{}/../../results/amd-epyc/{run}/{run}.json", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// The table names the datasheet lynx holds each GPU to, a CPU none, and says what a GPU
    /// lynx has none for goes without (GPUs stood in for by their records on this CPU).
    #[test]
    fn the_devices_table_names_each_gpus_datasheet() {
        let host = lynx_runner::host_record();
        let cpu = lynx_runner::devices::list(&host).swap_remove(0);
        let gpu = |index: u32, name: &str| {
            let mut device = cpu.clone();
            device.record.device = DeviceName::Cuda(index);
            device.record.name = Reported::Known(name.to_owned());
            device
        };
        let devices = [cpu.clone(), gpu(0, "NVIDIA H200"), gpu(1, "NVIDIA A100-SXM4-80GB")];
        let table = devices_table(&devices, lynx_runner::libtorch::load_gpu_backends());
        let line = |device: &str| {
            table.lines().find(|l| l.starts_with(&format!("{device} "))).unwrap_or_else(|| panic!("{table}")).to_owned()
        };
        assert!(table.lines().next().unwrap().contains(" DATASHEET "), "{table}");
        assert!(line("cuda:0").contains(" H200 (4.8 TB/s, 989 bf16 TFLOP/s) "), "{table}");
        assert!(line("cuda:1").contains(" none "), "{table}");
        assert!(line("cpu").contains(" - "), "{table}");
        assert!(
            table.contains(
                "note: lynx has no datasheet for NVIDIA A100-SXM4-80GB: its wall-time estimate waits for the \
                 measured ceilings, and scripts/gpu-check.sh needs --datasheet-tbs"
            ),
            "{table}"
        );
        assert_eq!(table.matches("note: lynx has no datasheet").count(), 1, "the A100's alone: {table}");
    }

    /// A reproduction reading other weights than the published run's is warned of: another
    /// checkpoint's files, a checkpoint where the published run drew its weights.
    #[test]
    fn weights_other_than_the_published_runs_are_warned_of() {
        let files = |sizes: &[u64]| -> Vec<(String, u64)> {
            sizes.iter().enumerate().map(|(i, &size)| (format!("model-{i}.safetensors"), size)).collect()
        };
        let published =
            WeightsRecord::Checkpoint { dir: "/published".to_owned(), files: files(&[4_000_000_000, 10]), read: None };
        assert_eq!(weights_warning(&published, Some(&files(&[4_000_000_000, 10]))), None);
        let warning = weights_warning(&published, Some(&files(&[4_000_000_000, 12]))).unwrap();
        assert!(
            warning.contains(
                "2 *.safetensors files of 4.00 GB against its 2 of 4.00 GB: the first that differs is \
                 model-1.safetensors (10 bytes) against model-1.safetensors (12 bytes)"
            ),
            "{warning}"
        );
        let warning = weights_warning(&published, Some(&files(&[4_000_000_000]))).unwrap();
        assert!(warning.contains("1 *.safetensors files of 4.00 GB against its 2 of 4.00 GB"), "{warning}");
        let random = WeightsRecord::Random { seed: 7 };
        assert_eq!(weights_warning(&random, None), None);
        assert!(weights_warning(&random, Some(&files(&[1])))
            .unwrap()
            .contains("drew its weights from its suite's seed (7)"));
    }

    /// A node like the publisher's gets no warning; a published result made with test hooks set
    /// gets one naming them, before anything runs.
    #[test]
    fn a_published_result_made_with_test_hooks_is_warned_of_before_it_is_reproduced() {
        let mut published = published();
        let runtime = lynx_runner::libtorch::load_gpu_backends();
        let host = lynx_runner::host_record();
        let device = lynx_runner::devices::best(&host);
        let before = reproduction_warnings(&published, &host, &device, runtime);
        assert!(!before.iter().any(|w| w.contains("test hooks")), "{before:?}");
        published.harness.test_hooks = Some(vec!["LYNX_TEST_SLOW_SERVING=25".to_owned()]);
        let after = reproduction_warnings(&published, &host, &device, runtime);
        assert_eq!(after.len(), before.len() + 1);
        assert_eq!(
            after.last().unwrap(),
            "the published result was made with test hooks set (LYNX_TEST_SLOW_SERVING=25): its figures are a \
             test's, not its device's, so this reproduction compares no device with it"
        );
    }

    /// A GPU's host link is a line and a warning where lynx may run off the GPU's NUMA node; a
    /// CPU has none, and a GPU result from before the record says so.
    #[test]
    fn a_gpus_host_link_is_said_with_what_slows_its_host_work() {
        use lynx_schema::result::HostLink;
        let mut gpu = published().device;
        assert_eq!(host_link_lines(&gpu), "", "a CPU has no host link");
        gpu.device = DeviceName::Cuda(0);
        assert_eq!(host_link_lines(&gpu), "cuda:0: not recorded (a result from before lynx recorded it)\n");
        gpu.host_link = Some(Reported::Known(HostLink {
            pci_device: "0000:9a:00.0".to_owned(),
            numa_node: Some(1),
            local_cpus: Some("56-111".to_owned()),
            allowed_cpus_elsewhere: Some(56),
            link_width: Some(16),
            max_link_width: Some(16),
            max_link_speed: Some("32.0 GT/s PCIe".to_owned()),
        }));
        let lines = host_link_lines(&gpu);
        let lines: Vec<&str> = lines.lines().collect();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].starts_with("cuda:0: PCI 0000:9a:00.0 on NUMA node 1 (CPUs 56-111; 56 CPUs"), "{lines:?}");
        assert!(lines[1].starts_with("warning: cuda:0: lynx may run on 56 CPUs outside the GPU's NUMA node 1"));
        gpu.host_link = Some(Reported::unavailable("no /sys/bus/pci/devices/0000:9a:00.0"));
        assert_eq!(host_link_lines(&gpu), "cuda:0: unknown: no /sys/bus/pci/devices/0000:9a:00.0\n");
    }

    /// A node allowed other CPU time than the publisher's, or with other variables steering its
    /// libraries, is warned of each before it is reproduced.
    #[test]
    fn another_cpu_allowance_or_environment_is_warned_of_before_a_reproduction() {
        let mut published = published();
        let runtime = lynx_runner::libtorch::load_gpu_backends();
        let host = lynx_runner::host_record();
        let device = lynx_runner::devices::best(&host);
        let Some(ours) = host.cpu_allowance.clone() else { return };
        published.host.cpu_allowance = Some(ours.clone());
        published.harness.environment = Some(lynx_runner::steering_environment());
        let alike = reproduction_warnings(&published, &host, &device, runtime);
        assert!(!alike.iter().any(|w| w.contains("allowed") || w.contains(" set, this node has")), "{alike:?}");
        let quota = lynx_schema::value::Finite::new(0.5, "cores").unwrap();
        published.host.cpu_allowance = Some(lynx_schema::result::CpuAllowance { quota_cores: Some(quota), ..ours });
        published.harness.environment = Some(vec!["CUDA_LAUNCH_BLOCKING=1".to_owned()]);
        let warned = reproduction_warnings(&published, &host, &device, runtime);
        let allowed =
            format!("a CPU quota of 0.50 cores, this node allows {}", host.cpu_allowance.as_ref().unwrap().words());
        assert!(warned.iter().any(|w| w.ends_with(&allowed)), "{warned:?}");
        assert!(
            warned
                .iter()
                .any(|w| w.starts_with("the published run was made with CUDA_LAUNCH_BLOCKING=1 set, this node")),
            "{warned:?}"
        );
        // A result that records none set, on a node with none set, is not warned of; one that
        // does not record them is only where this node has some set.
        published.harness.environment = Some(Vec::new());
        let steering = |published: &RunResult| {
            let warned = reproduction_warnings(published, &host, &device, runtime);
            warned.into_iter().find(|w| w.contains("steering") || w.contains(" set, this node has"))
        };
        let ours = lynx_runner::steering_environment();
        assert_eq!(steering(&published).is_some(), !ours.is_empty());
        // Other GPU math libraries are warned of; a result that does not record them is not.
        let gpu = |published: &RunResult| {
            let warned = reproduction_warnings(published, &host, &device, runtime);
            warned.into_iter().find(|w| w.contains("GPU libraries"))
        };
        assert_eq!(gpu(&published), None, "the fixture records no GPU libraries");
        published.harness.gpu_libraries = runtime.gpu_libraries();
        assert_eq!(gpu(&published), None);
        published.harness.gpu_libraries = Some(vec![lynx_schema::result::GpuLibrary {
            name: "cuBLAS".to_owned(),
            file: "/elsewhere/libcublas.so.13".to_owned(),
            version: Reported::Known("13.0.2".to_owned()),
        }]);
        assert_eq!(
            gpu(&published).unwrap(),
            format!(
                "the published run loaded GPU libraries cuBLAS 13.0.2, this node has {}",
                gpu_libraries_words(runtime.gpu_libraries().as_deref())
            )
        );
        published.harness.environment = None;
        match steering(&published) {
            None => assert!(ours.is_empty()),
            Some(said) => assert_eq!(
                said,
                format!(
                    "the published result does not record the variables steering its libraries, and this node has \
                     {} set",
                    ours.join(", ")
                )
            ),
        }
    }

    /// The warning that says `words` of those a reproduction of `published` on `host` gets here
    /// (this node's best device and libtorch).
    fn warning(published: &RunResult, host: &HostRecord, words: &str) -> Option<String> {
        let device = lynx_runner::devices::best(host);
        let warned = reproduction_warnings(published, host, &device, lynx_runner::libtorch::load_gpu_backends());
        warned.into_iter().find(|w| w.contains(words))
    }

    /// A published run made under another kind of memory policy is warned of before it is
    /// reproduced; the same kind over another host's NUMA nodes, or a result that does not
    /// record one, is not.
    #[test]
    fn another_memory_policy_is_warned_of_before_a_reproduction() {
        let mut published = published();
        let mut host = lynx_runner::host_record();
        let policy = |published: &RunResult, host: &HostRecord| warning(published, host, "memory policy");
        assert_eq!(policy(&published, &host), None, "the fixture records no policy");
        let known = |words: &str| Some(Reported::Known(words.to_owned()));
        host.memory_policy = known("local (the default) on memory nodes 0");
        published.host.memory_policy = known("local (the default) on memory nodes 0-7");
        assert_eq!(policy(&published, &host), None, "the default on one node or on eight");
        published.host.memory_policy = known("interleave over nodes 0-7 on memory nodes 0-7");
        assert_eq!(
            policy(&published, &host).unwrap(),
            "the published run allocated under memory policy interleave over nodes 0-7 on memory nodes 0-7, this \
             node under local (the default) on memory nodes 0"
        );
        host.memory_policy = known("interleave over nodes 0-1 on memory nodes 0-1");
        assert_eq!(policy(&published, &host), None, "numactl --interleave=all on either");
        host.memory_policy = Some(Reported::unavailable("get_mempolicy: not permitted"));
        assert_eq!(policy(&published, &host), None, "this node's unread");
    }

    /// A CPU device published on CPUs that offered libtorch's kernels other features (AMX, where
    /// this node has none) is warned of before it is reproduced; a GPU's, or the same features,
    /// or a result that does not record them, is not.
    #[test]
    fn other_cpu_features_are_warned_of_before_a_cpus_reproduction() {
        let mut published = published();
        let mut host = lynx_runner::host_record();
        let features = |published: &RunResult, host: &HostRecord| warning(published, host, "libtorch's CPU kernels");
        assert_eq!(published.device.device, DeviceName::Cpu);
        assert_eq!(features(&published, &host), None, "the fixture records no features");
        let known = |words: &str| Some(Reported::Known(words.to_owned()));
        host.cpu_features = known("avx2 fma");
        published.host.cpu_features = known("avx2 fma");
        assert_eq!(features(&published, &host), None);
        published.host.cpu_features = known("avx2 fma avx512f amx_tile amx_bf16");
        assert_eq!(
            features(&published, &host).unwrap(),
            "the published run's CPUs offered avx2 fma avx512f amx_tile amx_bf16 to libtorch's CPU kernels, this \
             node's offer avx2 fma"
        );
        published.device.device = DeviceName::Cuda(0);
        assert_eq!(features(&published, &host), None, "a GPU's kernels are its own");
    }
}
