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
    /// `complete`, `partial`, `incomplete` or `failed` (no result).
    pub status: String,
    /// How the device's process ended: `exit 0`, `exit 1`, `signal 9`.
    pub exit: String,
    /// Every check of its result passed.
    pub checks_passed: bool,
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
}

/// `index.json` of a collected results folder: every verified result in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectIndex {
    pub updated_at: String,
    pub results: Vec<Collected>,
}
