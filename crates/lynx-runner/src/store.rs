//! Durable result files: a reader never sees a half-written file under its final name.

use crate::RunError;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Write `value` as pretty JSON to `path`: to a temporary file beside it, then [`commit`]ted.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), RunError> {
    let io = |source| RunError::Io { path: path.to_path_buf(), source };
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io)?;
    let mut json = serde_json::to_vec_pretty(value).map_err(|e| io(std::io::Error::other(e)))?;
    json.push(b'\n');
    write_atomic(path, |file| file.write_all(&json))
}

/// Write `path` through `write` into a temporary file beside it, then [`commit`] it. A write
/// that fails (a full disk) leaves no temporary behind; the file under its final name is the
/// last whole one.
pub fn write_atomic(path: &Path, write: impl FnOnce(&mut File) -> std::io::Result<()>) -> Result<(), RunError> {
    let temporary = with_suffix(path, ".tmp");
    let written = File::create(&temporary)
        .and_then(|mut file| write(&mut file))
        .map_err(|source| RunError::Io { path: path.to_path_buf(), source });
    let committed = written.and_then(|()| commit(&temporary, path));
    if committed.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    committed
}

/// Open (or create) a file of the run folder that lynx appends to, the journal or the samples
/// file, for reading and appending: never through a symbolic link, never waiting on a FIFO, and
/// refused unless it is a regular file (a link to /dev/zero in its place would never end).
pub fn open_appending(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("is not a regular file"));
    }
    Ok(file)
}

/// Write `value` as one JSON line to `file` (opened for appending, [`open_appending`]) and make
/// it durable before returning; errors name `path`, the file's.
pub fn write_json_line<T: serde::Serialize>(file: &mut File, path: &Path, value: &T) -> Result<(), RunError> {
    let io = |source| RunError::Io { path: path.to_path_buf(), source };
    let mut line = serde_json::to_vec(value).map_err(|e| io(std::io::Error::other(e)))?;
    line.push(b'\n');
    file.write_all(&line).and_then(|()| file.sync_data()).map_err(io)
}

/// Append `value` to `path` as one JSON line, durable before returning ([`open_appending`],
/// [`write_json_line`]). A write that fails (a full disk) is cut off, so the file holds whole
/// lines only.
pub fn append_json_line<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), RunError> {
    let io = |source| RunError::Io { path: path.to_path_buf(), source };
    let mut file = open_appending(path).map_err(io)?;
    let before = file.metadata().map_err(io)?.len();
    write_json_line(&mut file, path, value).inspect_err(|_| {
        let _ = file.set_len(before);
    })
}

/// `path` with `suffix` appended to its file name: where it is written before it is committed.
pub fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Make the finished file `temporary` durable as `path`: fsynced, renamed over `path`, and the
/// folder fsynced so the rename itself survives a crash.
pub fn commit(temporary: &Path, path: &Path) -> Result<(), RunError> {
    let io = |source| RunError::Io { path: path.to_path_buf(), source };
    File::open(temporary).and_then(|file| file.sync_all()).map_err(io)?;
    fs::rename(temporary, path).map_err(io)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    File::open(dir).and_then(|d| d.sync_all()).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_lines_are_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.served.jsonl");
        append_json_line(&path, &vec![1, 2]).unwrap();
        append_json_line(&path, &"two").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "[1,2]\n\"two\"\n");
        std::os::unix::fs::symlink(&path, dir.path().join("link")).unwrap();
        assert!(append_json_line(&dir.path().join("link"), &1).is_err(), "never through a link");
    }

    #[test]
    fn replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/result.json");
        write_json_atomic(&path, &vec![1, 2]).unwrap();
        write_json_atomic(&path, &vec![3]).unwrap();
        let back: Vec<i32> = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(back, [3]);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["result.json"]);
    }
}
