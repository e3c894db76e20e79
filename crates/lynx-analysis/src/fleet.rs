//! A node's runs (`lynx run --all-devices`): one result per device, and how devices of the same
//! model compare with each other (the spread across a node's devices is a figure buyers ask
//! for).

use lynx_schema::fleet::CellSpread;
use lynx_schema::result::{CellStatus, RunResult};

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
