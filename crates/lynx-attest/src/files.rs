//! Reading the files lynx is handed (issue 17): regular files only, each read with a size bound,
//! so that no path (`/dev/zero`, a FIFO, a sparse file of a terabyte) makes a command grow
//! without limit or wait for ever. Evidence (envelopes, samples files) is also never read through
//! a final symbolic link: a published result is the files in its folder, not what a link in that
//! folder points at.

use std::fs::File;
use std::io::{Error, ErrorKind, Read, Take};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// The most bytes of a key file (a PEM key is a few hundred).
pub const MOST_KEY_BYTES: u64 = 64 * 1024;
/// The most bytes of a configuration file: a suite, a model shape, a Hugging Face config.json.
pub const MOST_CONFIG_BYTES: u64 = 4 * 1024 * 1024;

/// Whether a final symbolic link in the path is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Followed: configuration and keys, which a user may keep anywhere.
    Follow,
    /// Refused: evidence, which is the file in the result's folder itself.
    Refuse,
}

/// Open `path` for reading if it is a regular file. Opening never blocks (a FIFO is opened
/// non-blocking and then refused), and with [`Links::Refuse`] a final symbolic link is refused.
pub fn open_regular(path: &Path, links: Links) -> std::io::Result<File> {
    let mut flags = libc::O_NONBLOCK;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path).map_err(|e| {
        if links == Links::Refuse && e.raw_os_error() == Some(libc::ELOOP) {
            Error::new(ErrorKind::InvalidInput, "is a symbolic link; evidence is read only from the file itself")
        } else {
            e
        }
    })?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, format!("is not a regular file (it is {})", kind_name(kind))));
    }
    Ok(file)
}

/// The regular file `path` ([`open_regular`]) for reading, refused unread where it holds more
/// than `most`; a file growing while it is read ends one byte past the bound.
pub fn open_bounded(path: &Path, most: u64, links: Links) -> std::io::Result<Take<File>> {
    let file = open_regular(path, links)?;
    let size = file.metadata()?.len();
    if size > most {
        return Err(too_big(size, most));
    }
    Ok(file.take(most + 1))
}

/// The bytes of the regular file `path`, refused unread where it holds more than `most`.
pub fn read_bounded(path: &Path, most: u64, links: Links) -> std::io::Result<Vec<u8>> {
    let mut file = open_bounded(path, most, links)?;
    let mut bytes = Vec::with_capacity(file.get_ref().metadata()?.len() as usize);
    // A file that grew while it was read is refused.
    file.read_to_end(&mut bytes)?;
    if bytes.len() as u64 > most {
        return Err(too_big(bytes.len() as u64, most));
    }
    Ok(bytes)
}

/// [`read_bounded`] as UTF-8 text.
pub fn read_text_bounded(path: &Path, most: u64, links: Links) -> std::io::Result<String> {
    String::from_utf8(read_bounded(path, most, links)?).map_err(|e| {
        Error::new(ErrorKind::InvalidData, format!("is not UTF-8 text (byte {})", e.utf8_error().valid_up_to()))
    })
}

fn too_big(size: u64, most: u64) -> Error {
    Error::new(ErrorKind::InvalidInput, format!("holds {size} bytes or more, more than the {most} it may have"))
}

fn kind_name(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/dev/zero`, a FIFO (which would block an ordinary open for ever), a folder, a link to
    /// evidence and a file past its bound are each refused with one line saying what it is.
    #[test]
    fn special_files_links_and_oversized_files_are_refused() {
        let error = read_bounded(Path::new("/dev/zero"), 1024, Links::Follow).unwrap_err().to_string();
        assert_eq!(error, "is not a regular file (it is a character device)");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        assert!(read_bounded(&fifo, 1024, Links::Follow).unwrap_err().to_string().contains("a FIFO"));
        assert!(read_bounded(dir.path(), 1024, Links::Follow).unwrap_err().to_string().contains("a folder"));

        let file = dir.path().join("samples.jsonl");
        std::fs::write(&file, b"0123456789").unwrap();
        let link = dir.path().join("link.jsonl");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_bounded(&link, 1024, Links::Follow).unwrap(), b"0123456789");
        let error = read_bounded(&link, 1024, Links::Refuse).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");
        let error = read_bounded(&file, 9, Links::Refuse).unwrap_err().to_string();
        assert!(error.contains("10 bytes") && error.contains("the 9"), "{error}");
        assert_eq!(read_text_bounded(&file, 10, Links::Refuse).unwrap(), "0123456789");
    }
}
