//! Reading a file a user or a stored record names, within bounds: only a regular file (never a
//! device, a FIFO or a folder), and never more bytes than its kind can sensibly have, checked before
//! the read and again while reading (a file that grows is cut off, not followed).

use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The largest workload file (TOML): the largest imported graph spec is a few hundred KiB.
pub const WORKLOAD_LIMIT: u64 = 64 << 20;
/// The largest model, weights, inputs, package or profile file.
pub const DATA_LIMIT: u64 = 8 << 30;

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("reading {what} {}: {source}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} {} is not a regular file", .path.display())]
    NotAFile { what: &'static str, path: PathBuf },
    #[error("{what} {} has more than {limit} bytes, the most a {what} may have", .path.display())]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        limit: u64,
    },
}

/// The bytes of the regular file `path`, a `what` of at most `limit` bytes.
pub fn read(path: &Path, what: &'static str, limit: u64) -> Result<Vec<u8>, FileError> {
    let io = |source| FileError::Io {
        what,
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotAFile {
            what,
            path: path.to_path_buf(),
        });
    }
    let too_large = || FileError::TooLarge {
        what,
        path: path.to_path_buf(),
        limit,
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The text of the regular file `path`, a `what` of at most `limit` bytes, which must be UTF-8.
pub fn read_text(path: &Path, what: &'static str, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read(path, what, limit)?).map_err(|e| FileError::Io {
        what,
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_folders_and_oversized_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read(Path::new("/dev/zero"), "workload", 10),
            Err(FileError::NotAFile { .. })
        ));
        assert!(matches!(
            read(dir.path(), "workload", 10),
            Err(FileError::NotAFile { .. })
        ));
        let f = dir.path().join("w.toml");
        std::fs::write(&f, [b'x'; 11]).unwrap();
        let e = read(&f, "workload", 10).unwrap_err();
        assert!(e.to_string().contains("w.toml"), "{e}");
        assert!(matches!(e, FileError::TooLarge { limit: 10, .. }));
        assert_eq!(read(&f, "workload", 11).unwrap().len(), 11);
        assert!(read_text(&f, "workload", 11).is_ok());
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(read_text(&f, "workload", 11).is_err());
    }
}
