//! A node's runs (`lynx run --all-devices`): one result per device, and how devices of the same
//! model compare with each other (the spread across a node's devices is a figure buyers ask
//! for).

use crate::result::{CellStatus, RunResult};
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

/// The spread of each cell's median step time across results of devices with the same name.
pub fn spreads(results: &[RunResult]) -> Vec<CellSpread> {
    let mut out = Vec::new();
    let mut names: Vec<String> = results.iter().filter_map(|r| r.device.name.known().cloned()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let same: Vec<&RunResult> = results.iter().filter(|r| r.device.name.known() == Some(&name)).collect();
        if same.len() < 2 {
            continue;
        }
        for cell in same[0].cells.iter().filter(|c| c.status == CellStatus::Ok) {
            let times: Vec<f64> = same
                .iter()
                .filter_map(|r| r.cells.iter().find(|c| c.shape == cell.shape && c.status == CellStatus::Ok))
                .filter_map(|c| c.median_s())
                .collect();
            if times.len() != same.len() {
                continue;
            }
            let Ok(times) = crate::stats::Sorted::new(times) else { continue };
            let (min, max) = (times.min(), times.max());
            out.push(CellSpread {
                name: name.clone(),
                cell: cell.shape.to_string(),
                devices: times.len(),
                min_s: min,
                median_s: times.median(),
                max_s: max,
                spread: max / min - 1.0,
            });
        }
    }
    out
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
