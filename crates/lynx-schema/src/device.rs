//! The names users give devices: `cpu`, `cuda:N`, `rocm:N`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A device as named on the command line and in results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DeviceName {
    Cpu,
    /// An NVIDIA GPU by CUDA ordinal.
    Cuda(u32),
    /// An AMD GPU by HIP ordinal (libtorch exposes it through its CUDA device type).
    Rocm(u32),
}

/// A device name that is not `cpu`, `cuda:N` or `rocm:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown device '{0}': expected cpu, cuda:N or rocm:N (N a device index, e.g. cuda:0)")]
pub struct DeviceNameError(pub String);

impl FromStr for DeviceName {
    type Err = DeviceNameError;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || DeviceNameError(text.to_owned());
        if text == "cpu" {
            return Ok(DeviceName::Cpu);
        }
        let (kind, index) = text.split_once(':').ok_or_else(error)?;
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return Err(error());
        }
        let index: u32 = index.parse().map_err(|_| error())?;
        match kind {
            "cuda" => Ok(DeviceName::Cuda(index)),
            "rocm" => Ok(DeviceName::Rocm(index)),
            _ => Err(error()),
        }
    }
}

impl fmt::Display for DeviceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceName::Cpu => f.write_str("cpu"),
            DeviceName::Cuda(index) => write!(f, "cuda:{index}"),
            DeviceName::Rocm(index) => write!(f, "rocm:{index}"),
        }
    }
}

impl TryFrom<String> for DeviceName {
    type Error = DeviceNameError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl From<DeviceName> for String {
    fn from(name: DeviceName) -> String {
        name.to_string()
    }
}

/// `text` in lower-case kebab form (`NVIDIA H200` → `nvidia-h200`), for folder names.
pub fn slug(text: &str) -> String {
    safe_name(text).to_ascii_lowercase()
}

/// `text` as a name safe in a path, its case kept: ASCII letters and digits, every other run of
/// characters one `-`, none at either end (`20261207T104416Z-1e82de47` is itself; `../x` is
/// `x`).
pub fn safe_name(text: &str) -> String {
    let mut name = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            name.push(c);
        } else if !name.is_empty() && !name.ends_with('-') {
            name.push('-');
        }
    }
    while name.ends_with('-') {
        name.pop();
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_device_names() {
        for text in ["cpu", "cuda:0", "cuda:7", "rocm:3"] {
            assert_eq!(text.parse::<DeviceName>().unwrap().to_string(), text);
        }
    }

    #[test]
    fn rejects_malformed_device_names() {
        for text in ["", "gpu", "cuda", "cuda:", "cuda:-1", "cuda:x", "cuda:+1", "tpu:0", "cpu:0"] {
            assert_eq!(text.parse::<DeviceName>(), Err(DeviceNameError(text.to_owned())), "{text}");
        }
    }

    #[test]
    fn slugs_are_kebab_case() {
        assert_eq!(slug("NVIDIA H200"), "nvidia-h200");
        assert_eq!(slug("AMD EPYC 7763 64-Core Processor"), "amd-epyc-7763-64-core-processor");
        assert_eq!(slug("  Intel(R) Xeon(R)  "), "intel-r-xeon-r");
    }

    #[test]
    fn safe_names_keep_case_and_nothing_that_leaves_a_folder() {
        assert_eq!(safe_name("20261207T104416Z-1e82de47"), "20261207T104416Z-1e82de47");
        assert_eq!(safe_name("../../etc/Passwd"), "etc-Passwd");
        assert_eq!(safe_name("a/\\b\0c. "), "a-b-c");
        assert_eq!(safe_name("Ünïcode ok"), "n-code-ok");
        assert_eq!(safe_name("..."), "");
    }
}
