//! A node's runs (`lynx run --all-devices`): one result per device, and how devices of the same
//! model compare with each other (the spread across a node's devices is a figure buyers ask
//! for).

use serde::{Deserialize, Serialize};

/// One device's run on a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceRun {
    /// `cpu`, `cuda:N`, `rocm:N`.
    pub device: String,
    /// The device's name, where its run wrote a result.
    pub name: Option<String>,
    /// The run's folder (resume it with `lynx run --resume`), if the run got that far.
    pub run_dir: Option<String>,
    /// The signed envelope, if one was written.
    pub envelope: Option<String>,
    pub status: DeviceRunStatus,
    /// How the device's process ended.
    pub exit: DeviceExit,
    /// Every check of its result passed.
    pub checks_passed: bool,
    /// Its GPU's PCIe link as trained at the end of warm-up, in words ("32.0 GT/s PCIe x16", or
    /// "unread (why)"), where its result read it: the one device of a node whose link
    /// trained short (a board not fully seated, a riser) stands out beside the others. Absent
    /// for a CPU, and in summaries made before lynx read it (2026-12-07).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_at_end: Option<String>,
    /// Where that link ran slower or narrower than its board can, in words
    /// (`RunResult::link_short`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_short: Option<String>,
}

/// Where a device's run ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceRunStatus {
    /// Its result was sealed, and every cell ran.
    Complete,
    /// Its result was sealed with cells left (stopped).
    Partial,
    /// It wrote a result but no envelope.
    Incomplete,
    /// It wrote no result.
    Failed,
}

impl std::fmt::Display for DeviceRunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DeviceRunStatus::Complete => "complete",
            DeviceRunStatus::Partial => "partial",
            DeviceRunStatus::Incomplete => "incomplete",
            DeviceRunStatus::Failed => "failed",
        })
    }
}

/// How a device's process ended, written as `exit 0`, `signal 9`, `not started (stopped by a
/// signal)` or `unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceExit {
    Code(i32),
    Signal(i32),
    /// A stop signal came before the device's turn.
    NotStarted,
    Unknown,
}

impl DeviceExit {
    /// Whether the process exited successfully.
    pub fn succeeded(self) -> bool {
        self == DeviceExit::Code(0)
    }
}

impl std::fmt::Display for DeviceExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceExit::Code(code) => write!(f, "exit {code}"),
            DeviceExit::Signal(signal) => write!(f, "signal {signal}"),
            DeviceExit::NotStarted => f.write_str("not started (stopped by a signal)"),
            DeviceExit::Unknown => f.write_str("unknown"),
        }
    }
}

impl std::str::FromStr for DeviceExit {
    type Err = String;
    fn from_str(text: &str) -> Result<DeviceExit, String> {
        let number = |n: &str| n.parse::<i32>().map_err(|_| format!("not a device exit: {text}"));
        match text {
            "not started (stopped by a signal)" => Ok(DeviceExit::NotStarted),
            "unknown" => Ok(DeviceExit::Unknown),
            _ => match (text.strip_prefix("exit "), text.strip_prefix("signal ")) {
                (Some(code), _) => Ok(DeviceExit::Code(number(code)?)),
                (_, Some(signal)) => Ok(DeviceExit::Signal(number(signal)?)),
                _ => Err(format!("not a device exit: {text}")),
            },
        }
    }
}

impl Serialize for DeviceExit {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceExit {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<DeviceExit, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// A cell's step time across the devices of one model on the node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSpread {
    /// The devices' name.
    pub name: String,
    pub cell: String,
    pub devices: usize,
    pub min_s: f64,
    pub median_s: f64,
    pub max_s: f64,
    /// max / min − 1.
    pub spread: f64,
}

/// The summary of a node's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    pub node: String,
    pub started_at: String,
    pub runs: Vec<DeviceRun>,
    /// Per model of device with at least two results, per cell all of them measured.
    pub spreads: Vec<CellSpread>,
}

/// One result in a collected results folder's index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Collected {
    /// The envelope, relative to the folder.
    pub envelope: String,
    pub run_id: String,
    pub device: String,
    pub model: String,
    pub suite: String,
    pub status: String,
    pub checks_passed: bool,
    /// The trusted key that signed it.
    pub key_id: String,
    /// The other trusted keys that countersigned it (absent where none did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub also_signed_by: Option<Vec<String>>,
}

/// `index.json` of a collected results folder: every verified result in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectIndex {
    pub updated_at: String,
    pub results: Vec<Collected>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_exits_are_written_as_words_and_read_back() {
        for exit in [
            DeviceExit::Code(0),
            DeviceExit::Code(143),
            DeviceExit::Signal(9),
            DeviceExit::NotStarted,
            DeviceExit::Unknown,
        ] {
            let json = serde_json::to_string(&exit).unwrap();
            assert_eq!(serde_json::from_str::<DeviceExit>(&json).unwrap(), exit, "{json}");
        }
        assert_eq!(serde_json::to_string(&DeviceExit::Code(0)).unwrap(), "\"exit 0\"");
        assert!(serde_json::from_str::<DeviceExit>("\"exit x\"").is_err());
    }
}
