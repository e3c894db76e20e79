//! What a result records about the software that measured.

use crate::libtorch::Runtime;
use lynx_schema::result::{hex, Harness};
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
    }
}

/// How this process would measure differently from the one that left `earlier` (a run's result
/// so far): another libtorch at run time, or another number of its threads. A resume must not
/// add cells measured so to that result's (each difference in words; none: it may).
pub fn resume_differences(earlier: &Harness, runtime: &Runtime) -> Vec<String> {
    let mut out = Vec::new();
    let threads = tch::get_num_threads();
    if earlier.torch_threads != threads {
        out.push(format!(
            "its cells were measured on {} libtorch threads, this process has {threads} (OMP_NUM_THREADS sets them)",
            earlier.torch_threads
        ));
    }
    let (was, now) = (earlier.libtorch_runtime_version.to_string(), runtime.version.to_string());
    if was != now {
        out.push(format!("its cells were measured with libtorch {was}, this process loads {now}"));
    }
    out
}

/// The test hooks set in this process's environment, as a result made now would record them
/// (`Harness::test_hooks`), or none.
pub fn test_hooks_set() -> Option<Vec<String>> {
    test_hooks(std::env::vars_os())
}

/// The test hooks among `vars` (every `LYNX_TEST_…` variable, as `NAME=value`, sorted), or
/// none.
fn test_hooks(vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>) -> Option<Vec<String>> {
    let mut hooks: Vec<String> = vars
        .filter(|(name, _)| name.to_string_lossy().starts_with("LYNX_TEST_"))
        .map(|(name, value)| format!("{}={}", name.to_string_lossy(), value.to_string_lossy()))
        .collect();
    hooks.sort();
    (!hooks.is_empty()).then_some(hooks)
}

/// The test hooks of a run some of whose cells one process measured under `earlier` and the
/// rest another under `now`: every hook of either, sorted, once each (none where neither had
/// any).
pub(crate) fn every_hook(earlier: Option<Vec<String>>, now: Option<Vec<String>>) -> Option<Vec<String>> {
    let mut hooks: Vec<String> = earlier.into_iter().chain(now).flatten().collect();
    hooks.sort();
    hooks.dedup();
    (!hooks.is_empty()).then_some(hooks)
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
        assert_eq!(
            test_hooks(set.into_iter()),
            Some(vec!["LYNX_TEST_GRAPHS=reissue".to_owned(), "LYNX_TEST_SLOW_SERVING=25".to_owned()])
        );
        assert_eq!(test_hooks(vars(&[("PATH", "/bin")]).into_iter()), None);
    }

    /// A resume in this process may add to a result this process's libtorch and thread count
    /// made, and not to one another libtorch or thread count made, each difference named.
    #[test]
    fn a_resume_is_told_what_would_measure_differently() {
        let runtime = crate::libtorch::load_gpu_backends();
        let same = describe(runtime, Reported::unavailable("a test"));
        assert_eq!(resume_differences(&same, runtime), Vec::<String>::new());
        let mut other = same.clone();
        other.torch_threads += 5;
        other.libtorch_runtime_version = Reported::Known("2.10.0+cpu".to_owned());
        let said = resume_differences(&other, runtime);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].starts_with(&format!("its cells were measured on {} libtorch threads", same.torch_threads + 5)));
        assert!(said[1].starts_with("its cells were measured with libtorch 2.10.0+cpu, this process loads 2.11.0"));
    }

    /// A resumed run keeps the hooks its earlier processes ran under, and adds its own.
    #[test]
    fn a_resumed_run_has_every_hook_any_of_its_processes_had() {
        let hooks = |names: &[&str]| Some(names.iter().map(|n| (*n).to_owned()).collect::<Vec<String>>());
        assert_eq!(every_hook(None, None), None);
        assert_eq!(every_hook(Some(Vec::new()), None), None);
        assert_eq!(every_hook(hooks(&["LYNX_TEST_B=1"]), None), hooks(&["LYNX_TEST_B=1"]));
        assert_eq!(every_hook(None, hooks(&["LYNX_TEST_B=1"])), hooks(&["LYNX_TEST_B=1"]));
        assert_eq!(
            every_hook(hooks(&["LYNX_TEST_B=1", "LYNX_TEST_C=2"]), hooks(&["LYNX_TEST_A=3", "LYNX_TEST_B=1"])),
            hooks(&["LYNX_TEST_A=3", "LYNX_TEST_B=1", "LYNX_TEST_C=2"])
        );
    }
}
