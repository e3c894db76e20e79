//! A run's folder and its journal.
//!
//! `<out>/<device slug>/<run id>/` holds, each named `<run id>.<kind>`:
//! - `plan.json`: what the run was asked to do (written once, before anything runs);
//! - `journal.jsonl`: every finished cell, one JSON line each, appended and fsynced before the
//!   next cell starts; lines are never rewritten, so a cell once journaled stays byte-identical;
//! - `current.json`: the cell being measured, while it is (how a worker's death is pinned on it);
//! - `json`: the result as it stands; `samples.jsonl`: the raw telemetry samples;
//! - `served.jsonl`: the serving loop's requests and steps, a line a rate served (a diagnostic,
//!   not signed);
//! - `intoto.json`: the signed envelope, once the run is assembled.
//!
//! One process at a time works on a run: the journal is held under an exclusive lock.

use crate::RunError;
use lynx_schema::result::{CellRecord, CellShape, RunPlan};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a worker waits for the journal's lock (a killed predecessor is still exiting).
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// The files of one run.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub dir: PathBuf,
    pub run_id: String,
}

impl RunDir {
    /// The folder of run `run_id` of the device `slug` under `out`.
    pub fn new(out: &Path, slug: &str, run_id: &str) -> RunDir {
        RunDir { dir: out.join(slug).join(run_id), run_id: run_id.to_owned() }
    }

    /// An existing run folder, named by its path: its plan must be there.
    pub fn open(dir: &Path) -> Result<RunDir, RunError> {
        let run_id = dir
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| RunError::Config(format!("--resume {}: not a run folder", dir.display())))?
            .to_owned();
        let run = RunDir { dir: dir.to_path_buf(), run_id };
        if !run.plan_path().is_file() {
            return Err(RunError::Config(format!(
                "--resume {}: not a run folder (no {} in it)",
                dir.display(),
                run.file("plan.json").file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            )));
        }
        Ok(run)
    }

    fn file(&self, kind: &str) -> PathBuf {
        self.dir.join(format!("{}.{kind}", self.run_id))
    }

    pub fn plan_path(&self) -> PathBuf {
        self.file("plan.json")
    }
    pub fn journal_path(&self) -> PathBuf {
        self.file("journal.jsonl")
    }
    pub fn current_path(&self) -> PathBuf {
        self.file("current.json")
    }
    pub fn result_path(&self) -> PathBuf {
        self.file("json")
    }
    /// While the serving phase serves a workload under a bound: what to record for it should the
    /// worker die before it is done (as `current.json` names the cell in progress).
    pub fn serving_path(&self) -> PathBuf {
        self.file("serving.json")
    }
    pub fn samples_path(&self) -> PathBuf {
        self.file("samples.jsonl")
    }
    /// The serving loop's requests and steps, a line a rate served (`ServedTrace`).
    pub fn served_trace_path(&self) -> PathBuf {
        self.file("served.jsonl")
    }

    pub fn read_plan(&self) -> Result<RunPlan, RunError> {
        read_json(&self.plan_path(), "run plan")
    }

    /// The cell a worker was measuring when it stopped, if it left one.
    pub fn current_cell(&self) -> Result<Option<CellShape>, RunError> {
        let path = self.current_path();
        if !path.exists() {
            return Ok(None);
        }
        read_json(&path, "current cell").map(Some)
    }
}

/// The most bytes a run's plan or result file may hold (a result is tens of kilobytes).
const MOST_RUN_FILE_BYTES: u64 = 256 << 20;

/// Read and parse a JSON file the run wrote; a file that does not parse is corrupt input. It is
/// the run folder's own regular file, never read through a symbolic link, and bounded.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T, RunError> {
    use lynx_attest::files::{read_bounded, Links};
    let bytes = read_bounded(path, MOST_RUN_FILE_BYTES, Links::Refuse)
        .map_err(|source| RunError::Io { path: path.to_path_buf(), source })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| RunError::Corrupt { path: path.to_path_buf(), detail: format!("{what}: {e}") })
}

/// The journal, open for appending and locked for this process.
pub struct Journal {
    file: File,
    path: PathBuf,
}

impl Journal {
    /// Open (or create) the journal at `path`, wait for its lock, and read its cells. A last line
    /// cut short by a kill is cut off (it was never acknowledged); a damaged line before it is a
    /// corrupt journal.
    pub fn open(path: &Path) -> Result<(Journal, Vec<CellRecord>), RunError> {
        Journal::open_waiting(path, LOCK_WAIT)
    }

    /// The cells of the journal at `path` (none where there is none yet), read and nothing
    /// written: a last line cut short is left out, as [`Journal::open`] would cut it off.
    pub fn read(path: &Path) -> Result<Vec<CellRecord>, RunError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(RunError::Io { path: path.to_path_buf(), source }),
        };
        Ok(complete_cells(&bytes, path)?.0)
    }

    /// [`Journal::open`], waiting at most `wait` for the lock before saying another process holds
    /// it.
    fn open_waiting(path: &Path, wait: Duration) -> Result<(Journal, Vec<CellRecord>), RunError> {
        let io = |source| RunError::Io { path: path.to_path_buf(), source };
        let mut file = crate::store::open_appending(path).map_err(io)?;
        // The journal's own name must survive a crash too.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir).and_then(|d| d.sync_all()).map_err(io)?;
        }
        let deadline = Instant::now() + wait;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(std::fs::TryLockError::WouldBlock) => return Err(RunError::Locked(path.to_path_buf())),
                Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
            }
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io)?;
        let (cells, complete) = complete_cells(&bytes, path)?;
        if complete < bytes.len() {
            file.set_len(complete as u64).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        file.seek(SeekFrom::End(0)).map_err(io)?;
        Ok((Journal { file, path: path.to_path_buf() }, cells))
    }

    /// Append `cell` as one line and make it durable before returning.
    pub fn append(&mut self, cell: &CellRecord) -> Result<(), RunError> {
        crate::store::write_json_line(&mut self.file, &self.path, cell)
    }
}

/// The cells of a journal's `bytes` (read from `path`), its complete lines only, and the length
/// of those lines (a last line cut short lies beyond it).
fn complete_cells(bytes: &[u8], path: &Path) -> Result<(Vec<CellRecord>, usize), RunError> {
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut cells = Vec::new();
    for (number, line) in bytes[..complete].split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let cell = serde_json::from_slice(line).map_err(|e| RunError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("journal line {}: {e}", number + 1),
        })?;
        cells.push(cell);
    }
    Ok((cells, complete))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(batch: u32) -> CellRecord {
        CellRecord::failed(CellShape::decode(batch, 8), "x".into())
    }

    #[test]
    fn appends_survive_reopening_and_a_torn_last_line_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.journal.jsonl");
        {
            let (mut journal, cells) = Journal::open(&path).unwrap();
            assert!(cells.is_empty());
            journal.append(&cell(1)).unwrap();
            journal.append(&cell(2)).unwrap();
        }
        let whole = std::fs::read(&path).unwrap();
        // A kill in the middle of the third append.
        let mut torn = whole.clone();
        torn.extend_from_slice(br#"{"step":"decode","batch":4,"#);
        std::fs::write(&path, &torn).unwrap();
        let (mut journal, cells) = Journal::open(&path).unwrap();
        assert_eq!(cells, [cell(1), cell(2)]);
        assert_eq!(std::fs::read(&path).unwrap(), whole, "the torn line is gone, the rest untouched");
        journal.append(&cell(4)).unwrap();
        drop(journal);
        let (_, cells) = Journal::open(&path).unwrap();
        assert_eq!(cells, [cell(1), cell(2), cell(4)]);
    }

    #[test]
    fn a_damaged_line_is_corrupt_input_and_a_second_opener_waits_for_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.journal.jsonl");
        std::fs::write(&path, b"{not json}\n").unwrap();
        let error = Journal::open(&path).err().unwrap();
        assert!(matches!(error, RunError::Corrupt { .. }), "{error}");
        assert!(error.is_bad_input() && error.to_string().contains("corrupt (journal line 1: "), "{error}");

        let path = dir.path().join("s.journal.jsonl");
        let (first, _) = Journal::open(&path).unwrap();
        let opener = std::thread::spawn({
            let path = path.clone();
            move || Journal::open(&path).map(|(_, cells)| cells.len())
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(!opener.is_finished(), "the second opener must wait while the first holds the lock");
        drop(first);
        assert_eq!(opener.join().unwrap().unwrap(), 0);

        // A lock held past the wait is its own error, naming the journal.
        let (_held, _) = Journal::open(&path).unwrap();
        let error = Journal::open_waiting(&path, Duration::from_millis(100)).err().unwrap();
        assert!(matches!(&error, RunError::Locked(p) if *p == path) && !error.is_bad_input(), "{error}");
    }
}
