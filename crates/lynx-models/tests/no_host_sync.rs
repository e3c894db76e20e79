//! Regression (issue 15): a step must never wait on the host. MoE layers copied per-expert
//! counts to the host in every layer (and CUDA's `bincount` read its largest id back), which
//! stalls the device's queue and makes a step impossible to capture as a graph.
//!
//! No CPU can observe a device-to-host copy, so this test reads the source instead: every call
//! that copies a tensor to the host or waits for the device (docs/ARCHITECTURE.md, "What a step
//! may not call") is refused anywhere in lynx-models' library code, except in the functions
//! listed below, which never run inside a step (loading weights, probing what a device can do,
//! checking one expert). A new helper is forbidden the calls by default.

use std::path::Path;

/// Calls that copy to the host, or wait for the device to finish, in tch's spelling.
const FORBIDDEN: [&str; 13] = [
    "try_from(",
    "double_value",
    "int64_value",
    "f_item",
    "bincount",
    "nonzero",
    "masked_select",
    "f_unique",
    "f_equal(",
    "allclose",
    "Device::Cpu)",
    "f_from_slice",
    "synchronize",
];

/// (file, function) pairs that never run inside a step.
const OUTSIDE_A_STEP: [(&str, &str); 9] = [
    ("linear.rs", "fp8_format"),
    ("linear.rs", "scaled_mm_runs"),
    ("rope.rs", "new"),
    ("mla.rs", "rope_half_order"),
    ("experts.rs", "scaled_grouped_mm_runs"),
    ("experts.rs", "expert"),
    ("model.rs", "reference"),
    ("model.rs", "load"),
    // Counts only while `Model::tally_experts` tallies a cell's untimed step.
    ("moe.rs", "tally_routing"),
];

/// Files that only load weights or describe the runtime.
const NOT_STEP_FILES: [&str; 3] = ["weights.rs", "checkpoint.rs", "runtime.rs"];

/// The name of the innermost function around each line of `source` (None outside any).
fn enclosing_functions(source: &str) -> Vec<Option<String>> {
    let mut stack: Vec<(String, i64)> = Vec::new();
    let mut depth = 0i64;
    let mut pending: Option<String> = None;
    let mut owners = Vec::new();
    for line in source.lines() {
        let code = line.split("//").next().unwrap_or("");
        if let Some(at) = code.find("fn ") {
            let name: String = code[at + 3..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                pending = Some(name);
            }
        }
        for c in code.chars() {
            match c {
                '{' => {
                    depth += 1;
                    if let Some(name) = pending.take() {
                        stack.push((name, depth));
                    }
                }
                '}' => {
                    if stack.last().is_some_and(|(_, d)| *d == depth) {
                        stack.pop();
                    }
                    depth -= 1;
                }
                ';' if stack.last().is_none_or(|(_, d)| *d < depth) => pending = None,
                _ => {}
            }
        }
        owners.push(stack.last().map(|(name, _)| name.clone()).or_else(|| pending.clone()));
    }
    owners
}

#[test]
fn no_step_code_copies_to_the_host_or_waits_for_the_device() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if NOT_STEP_FILES.contains(&file.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // Unit tests sit at the end of each file.
        let library = text.split("#[cfg(test)]").next().unwrap();
        let owners = enclosing_functions(library);
        for (number, line) in library.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for call in FORBIDDEN.iter().filter(|call| code.contains(*call)) {
                let owner = owners[number].clone().unwrap_or_default();
                if !OUTSIDE_A_STEP.contains(&(file.as_str(), owner.as_str())) {
                    found.push(format!("{file}:{} in fn {owner}: {call}", number + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "host copies or device waits in step code:\n{}", found.join("\n"));
}

#[test]
fn the_scan_finds_a_copy_and_names_its_function() {
    let source = "impl X {\n    fn step(&self) -> R {\n        let counts = Vec::<i64>::try_from(t)?;\n    }\n}\n";
    let owners = enclosing_functions(source);
    assert_eq!(owners[2].as_deref(), Some("step"));
    assert!(FORBIDDEN.iter().any(|call| source.lines().nth(2).unwrap().contains(call)));
    let signature = "    pub fn run(\n        x: &Tensor,\n    ) -> R {\n        body();\n    }\n";
    assert_eq!(enclosing_functions(signature)[3].as_deref(), Some("run"));
}
