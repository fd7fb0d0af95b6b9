//! The one way a file a user or a build names is read, and the one way one is written.
//!
//! Reading ([`read`], [`read_text`], [`hash`]): the path is opened non-blocking and `fstat`ed before
//! a byte is read, so anything but a regular file (a FIFO, a device, a folder) is refused at once and
//! never blocks; a link the user made to a regular file is followed. Each [`Kind`] of file has a size
//! limit, checked against `fstat` before anything is allocated and again while reading (a file that
//! grows is cut off, not followed), and, where its format has one, a magic its first bytes must hold,
//! checked before the rest is read: a 6 GB file that is not a `.npy` costs a few bytes.
//!
//! Writing ([`write_atomic`], [`write_atomic_parts`], [`write_atomic_via`], and [`prepare_atomic`],
//! whose rename waits for [`Prepared::persist`]): the bytes (or the parts whose concatenation they
//! are, written one after the other) go to a new, uniquely named temp file
//! (`.NAME.XXXXXX.tmp`, created with `O_EXCL`), which its writer holds an exclusive `flock` on while
//! it writes, then `fsync`, then a rename over the final name. A link planted at the final name is
//! replaced, never written through; a failed write (a full disk) removes its temp file and leaves the
//! final name as it was. [`remove_dead_temps`] removes the temp files whose writer died (their lock
//! is free) and never one a live writer holds: it holds each one's lock until the file is unlinked.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// A kind of file a command reads: what it is called, its size limit and its magic (the format
/// modules' own, which a test holds equal; this module depends on nothing of the crate).
#[derive(Clone, Copy, Debug)]
pub struct Kind {
    /// What the file is to the command, in messages: `input file`.
    pub what: &'static str,
    /// The most bytes such a file may sensibly hold.
    pub limit: u64,
    /// The bytes every such file starts with; empty when the format has none.
    pub magic: &'static [u8],
    /// What a file without the magic is not: `a .npy file`.
    pub format: &'static str,
}

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// A workload file (TOML): the largest imported graph spec is a few hundred KiB.
pub const WORKLOAD: Kind = Kind {
    what: "workload file",
    limit: 64 * MIB,
    magic: b"",
    format: "a workload",
};
/// An ONNX model: protobuf refuses messages of 2 GiB and more.
pub const ONNX_MODEL: Kind = Kind {
    what: "ONNX model",
    limit: 2 * GIB,
    magic: b"",
    format: "an ONNX model",
};
/// A file of an ONNX model's external tensor data: weights that must fit the device in f16 (below a
/// GiB on every target), held in f32.
pub const EXTERNAL_DATA: Kind = Kind {
    what: "external tensor data",
    limit: 2 * GIB,
    magic: b"",
    format: "tensor data",
};
/// A weights file (`.safetensors`, f32 or i64 weights the device holds in f16).
pub const WEIGHTS: Kind = Kind {
    what: "weights file",
    limit: 2 * GIB,
    magic: b"",
    format: "a .safetensors file",
};
/// An input bound with `--input` (`.npy`): a value the device holds, within 2^31 elements.
pub const INPUT: Kind = Kind {
    what: "input file",
    limit: 2 * GIB,
    magic: b"\x93NUMPY",
    format: "a .npy file",
};
/// Inputs bound with `--inputs` (`.npz`, a zip of `.npy` files): every input of a run, which
/// together are what the device holds (the archive's reader bounds them again once inflated).
pub const INPUTS_ARCHIVE: Kind = Kind {
    what: "inputs archive",
    limit: 2 * GIB,
    magic: b"PK",
    format: "a .npz archive",
};
/// An application package (`model.ipuexe`): tile images of at most the device's memory.
pub const PACKAGE: Kind = Kind {
    what: "application package",
    limit: 2 * GIB,
    magic: b"IPUEXE\0\x01",
    format: "an application package",
};
/// An execution profile (`execution.ipuprofile`): per step and tile a few figures.
pub const PROFILE: Kind = Kind {
    what: "execution profile",
    limit: GIB,
    magic: b"IPUPROF\x01",
    format: "an execution profile",
};
/// A stage record (`stages/<build>/<phase>.json`): a few KiB.
pub const STAGE_RECORD: Kind = Kind {
    what: "stage record",
    limit: 16 * MIB,
    magic: b"",
    format: "a stage record",
};

#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The OS error is part of the message, not a source, so it is said once.
    #[error("reading {what} {}: {error}", .path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{what} {} is not a regular file", .path.display())]
    NotAFile { what: &'static str, path: PathBuf },
    #[error("{what} {} has more than {limit} bytes, the most this kind of file may have", .path.display())]
    TooLarge {
        what: &'static str,
        path: PathBuf,
        limit: u64,
    },
    #[error("{what} {} is not {format} (bad magic: it does not start with {magic})", .path.display())]
    NotFormat {
        what: &'static str,
        path: PathBuf,
        format: &'static str,
        magic: String,
    },
    /// The OS error follows as the source (`{:#}` prints it once).
    #[error("writing {what} {}", .path.display())]
    Write {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl FileError {
    /// Whether the file is simply not there.
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound)
    }
}

/// Opens the regular file `path` (through links) for reading without blocking: anything else is
/// refused before a byte is read. The file and its size.
pub fn open(path: &Path, what: &'static str) -> Result<(File, u64), FileError> {
    let io = |error| FileError::Io {
        what,
        path: path.to_path_buf(),
        error,
    };
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(FileError::NotAFile {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok((file, meta.len()))
}

/// The bytes of the regular file `path`, a file of `kind`: within its limit, its magic first.
pub fn read(path: &Path, kind: &Kind) -> Result<Vec<u8>, FileError> {
    let what = kind.what;
    let io = |error| FileError::Io {
        what,
        path: path.to_path_buf(),
        error,
    };
    let too_large = || FileError::TooLarge {
        what,
        path: path.to_path_buf(),
        limit: kind.limit,
    };
    let (file, len) = open(path, what)?;
    if len > kind.limit {
        return Err(too_large());
    }
    let mut file = file.take(kind.limit + 1);
    let mut head = Vec::with_capacity(kind.magic.len());
    (&mut file)
        .take(kind.magic.len() as u64)
        .read_to_end(&mut head)
        .map_err(io)?;
    // A file shorter than its magic but a prefix of it is cut short: its format's reader says so.
    if !head.starts_with(kind.magic) && !kind.magic.starts_with(&head) {
        return Err(FileError::NotFormat {
            what,
            path: path.to_path_buf(),
            format: kind.format,
            magic: kind.magic.escape_ascii().to_string(),
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    bytes.extend_from_slice(&head);
    file.read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > kind.limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The text of the regular file `path`, a file of `kind`, which must be UTF-8.
pub fn read_text(path: &Path, kind: &Kind) -> Result<String, FileError> {
    String::from_utf8(read(path, kind)?).map_err(|e| FileError::Io {
        what: kind.what,
        path: path.to_path_buf(),
        error: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// The blake3 hash of the regular file `path`, read in pieces (memory does not grow with the file),
/// and its first `head` bytes.
pub fn hash(
    path: &Path,
    what: &'static str,
    head: usize,
) -> Result<(blake3::Hash, Vec<u8>), FileError> {
    let io = |error| FileError::Io {
        what,
        path: path.to_path_buf(),
        error,
    };
    let (mut file, _) = open(path, what)?;
    let mut first = Vec::with_capacity(head);
    (&mut file)
        .take(head as u64)
        .read_to_end(&mut first)
        .map_err(io)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(&first);
    hasher.update_reader(&mut file).map_err(io)?;
    Ok((hasher.finalize(), first))
}

/// Writes `bytes` to `path` through a unique temp file in `path`'s folder, `fsync` and a rename: a
/// link at `path` is replaced, a failed write leaves nothing behind. Dead writers' temp files for
/// the same name go first.
pub fn write_atomic(path: &Path, what: &'static str, bytes: &[u8]) -> Result<(), FileError> {
    write_atomic_parts(path, what, &[bytes])
}

/// [`write_atomic`] of the concatenation of `parts`, which is never made: a header and a large body
/// held elsewhere are written as they are.
pub fn write_atomic_parts(
    path: &Path,
    what: &'static str,
    parts: &[&[u8]],
) -> Result<(), FileError> {
    prepare_atomic(path, what, parts)?.persist()
}

/// [`write_atomic_parts`] but for the rename: the temp file written and `fsync`ed, to take its name
/// when [`Prepared::persist`] is called, or to be removed when dropped.
pub fn prepare_atomic(
    path: &Path,
    what: &'static str,
    parts: &[&[u8]],
) -> Result<Prepared, FileError> {
    let dir = folder(path);
    let _ = remove_dead_temps_of(dir, Some(&temp_prefix(path)));
    prepare_via(dir, path, what, parts)
}

/// [`write_atomic_parts`] with the temp file in `temp_dir`, which must be on `path`'s file system
/// (the store keeps its temp files in `cache/tmp`).
pub fn write_atomic_via(
    temp_dir: &Path,
    path: &Path,
    what: &'static str,
    parts: &[&[u8]],
) -> Result<(), FileError> {
    prepare_via(temp_dir, path, what, parts)?.persist()
}

/// A file written to its temp file and `fsync`ed, not yet under its name; dropped, it is removed.
pub struct Prepared {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
    what: &'static str,
}

impl Prepared {
    /// Renames the temp file over the final name.
    pub fn persist(self) -> Result<(), FileError> {
        let Prepared { tmp, path, what } = self;
        // On failure the temp file goes with the error's handle.
        tmp.persist(&path).map_err(|e| FileError::Write {
            what,
            source: os_error(e.error),
            path,
        })?;
        Ok(())
    }
}

fn prepare_via(
    temp_dir: &Path,
    path: &Path,
    what: &'static str,
    parts: &[&[u8]],
) -> Result<Prepared, FileError> {
    let failed = |source| FileError::Write {
        what,
        path: path.to_path_buf(),
        source: os_error(source),
    };
    let prefix = temp_prefix(path);
    let mut tmp = loop {
        // Made as `File::create` makes files (0o666 less the umask), not private as temp files are.
        let tmp = tempfile::Builder::new()
            .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
            .prefix(&prefix)
            .suffix(TEMP_SUFFIX)
            .tempfile_in(temp_dir)
            .map_err(failed)?;
        // The lock says the writer lives. A sweeper that took the file between its creation and the
        // lock has unlinked it, or holds it: start again with another name.
        match tmp.as_file().try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => continue,
            // A file system without locks: no sweeper can take the file either.
            Err(std::fs::TryLockError::Error(_)) => break tmp,
        }
        if tmp.as_file().metadata().map_err(failed)?.nlink() > 0 {
            break tmp;
        }
    };
    for part in parts {
        tmp.as_file_mut().write_all(part).map_err(failed)?;
    }
    tmp.as_file().sync_data().map_err(failed)?;
    Ok(Prepared {
        tmp,
        path: path.to_path_buf(),
        what,
    })
}

/// The OS error without `tempfile`'s wrapper, which names the temp file ("… at path …"), not the file
/// being written.
fn os_error(e: std::io::Error) -> std::io::Error {
    if e.raw_os_error().is_some() || e.get_ref().is_none() {
        return e;
    }
    match e.to_string().split_once(" at path ") {
        Some((plain, _)) => std::io::Error::new(e.kind(), plain.to_string()),
        None => e,
    }
}

/// Holds an exclusive lock on a folder while alive: writers of files that belong together (a graph
/// spec and its weights) take it so that their pairs never interleave.
pub struct FolderLock {
    _file: File,
}

/// Locks `dir` exclusively, waiting for another holder.
pub fn lock_folder(dir: &Path) -> Result<FolderLock, FileError> {
    let failed = |source| FileError::Write {
        what: "folder",
        path: dir.to_path_buf(),
        source,
    };
    let file = File::open(dir).map_err(failed)?;
    file.lock().map_err(failed)?;
    Ok(FolderLock { _file: file })
}

/// The suffix of every temp file [`write_atomic_via`] makes.
const TEMP_SUFFIX: &str = ".tmp";

/// `.NAME.`: what the temp files for `path` start with.
fn temp_prefix(path: &Path) -> String {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    format!(".{name}.")
}

fn folder(path: &Path) -> &Path {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    }
}

/// Removes the temp files in `dir` (`.NAME.….tmp`) whose writer died between creating and renaming
/// them: those whose lock is free. A live writer holds its lock from before it writes until after
/// its rename, so its file is never removed. How many it removed.
pub fn remove_dead_temps(dir: &Path) -> usize {
    remove_dead_temps_of(dir, None)
}

fn remove_dead_temps_of(dir: &Path, prefix: Option<&str>) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = name.starts_with('.')
            && name.ends_with(TEMP_SUFFIX)
            && prefix.is_none_or(|p| name.starts_with(p) && name.len() > p.len() + 4);
        if ours && remove_if_dead(&entry.path()) {
            removed += 1;
        }
    }
    removed
}

/// Removes the temp file at `path` if no writer holds its lock, holding the lock until the file is
/// unlinked: a writer that takes the lock up afterwards finds its file has no link and starts again
/// ([`prepare_via`]). Let go before the unlink, the lock would let a writer that had just made the
/// file go on and lose it to the unlink before its rename.
fn remove_if_dead(path: &Path) -> bool {
    let Some(_held) = lock_if_dead(path) else {
        return false;
    };
    std::fs::remove_file(path).is_ok()
}

/// The temp file at `path`, its lock held, when it is a regular file no writer holds a lock on.
fn lock_if_dead(path: &Path) -> Option<File> {
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    (file.metadata().is_ok_and(|m| m.is_file()) && file.try_lock().is_ok()).then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_folders_and_oversized_files_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read(Path::new("/dev/zero"), &WORKLOAD),
            Err(FileError::NotAFile { .. })
        ));
        assert!(matches!(
            read(dir.path(), &WORKLOAD),
            Err(FileError::NotAFile { .. })
        ));
        let fifo = dir.path().join("f.npy");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read(&fifo, &INPUT).unwrap_err();
        assert!(matches!(e, FileError::NotAFile { .. }), "{e}");
        assert!(e.to_string().contains("f.npy is not a regular file"), "{e}");
        let small = Kind {
            limit: 10,
            ..WORKLOAD
        };
        let f = dir.path().join("w.toml");
        std::fs::write(&f, [b'x'; 11]).unwrap();
        let e = read(&f, &small).unwrap_err();
        assert!(e.to_string().contains("w.toml"), "{e}");
        assert!(matches!(e, FileError::TooLarge { limit: 10, .. }));
        assert_eq!(read(&f, &WORKLOAD).unwrap().len(), 11);
        assert!(read_text(&f, &WORKLOAD).is_ok());
        std::fs::write(&f, [0xff, 0xfe]).unwrap();
        assert!(read_text(&f, &WORKLOAD).is_err());
    }

    #[test]
    fn the_magics_are_the_formats() {
        assert_eq!(INPUT.magic, crate::tensors::npy::MAGIC);
        assert_eq!(INPUTS_ARCHIVE.magic, crate::tensors::npz::MAGIC);
        assert_eq!(PACKAGE.magic, crate::ir::IPUEXE_MAGIC);
        assert_eq!(PROFILE.magic, crate::report::PROFILE_MAGIC);
    }

    #[test]
    fn a_file_without_its_magic_is_refused_after_its_first_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("x.npy");
        let file = File::create(&f).unwrap();
        file.write_all_at(b"PK\x03\x04", 0).unwrap();
        file.set_len(INPUT.limit).unwrap();
        let e = read(&f, &INPUT).unwrap_err();
        assert!(matches!(e, FileError::NotFormat { .. }), "{e}");
        assert!(e.to_string().contains("is not a .npy file"), "{e}");
        // A prefix of the magic is left to the format's reader, which says it is cut short.
        std::fs::write(&f, b"\x93NU").unwrap();
        assert_eq!(read(&f, &INPUT).unwrap(), b"\x93NU");
    }

    use std::os::unix::fs::FileExt as _;

    #[test]
    fn writes_replace_a_planted_link_and_leave_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("precious");
        std::fs::write(&target, b"keep").unwrap();
        let out = dir.path().join("y.npy");
        std::os::unix::fs::symlink(&target, &out).unwrap();
        write_atomic(&out, "output", b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
        assert_eq!(std::fs::read(&out).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // A folder that cannot be written to fails and leaves the old file.
        let missing = dir.path().join("no/such/y.npy");
        assert!(matches!(
            write_atomic(&missing, "output", b"x"),
            Err(FileError::Write { .. })
        ));
    }

    #[test]
    fn only_temp_files_whose_writer_died_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dead_temp = dir.path().join(".y.npy.abc123.tmp");
        std::fs::write(&dead_temp, b"half").unwrap();
        let live_temp = dir.path().join(".z.npy.def456.tmp");
        let live = File::create(&live_temp).unwrap();
        live.lock().unwrap();
        let users = dir.path().join("notes.tmp");
        std::fs::write(&users, b"mine").unwrap();
        assert_eq!(remove_dead_temps(dir.path()), 1);
        assert!(!dead_temp.exists() && live_temp.exists() && users.exists());
        drop(live);
        assert_eq!(remove_dead_temps(dir.path()), 1);
        assert!(!live_temp.exists());
    }

    #[test]
    fn a_writer_cannot_lock_a_temp_file_the_sweeper_holds_until_it_is_unlinked() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let temp = dir.path().join(".y.npy.abc123.tmp");
        // A writer's temp file, made and not yet locked: the sweeper may take it.
        let writer = File::create(&temp).unwrap();
        let held = lock_if_dead(&temp).expect("no writer holds its lock yet");
        assert!(
            writer.try_lock().is_err(),
            "the writer took the lock of a file about to be unlinked"
        );
        std::fs::remove_file(&temp).unwrap();
        drop(held);
        // Its lock free again, the writer finds the file gone and starts again with another.
        writer.try_lock().unwrap();
        assert_eq!(writer.metadata().unwrap().nlink(), 0);
        assert!(lock_if_dead(&temp).is_none(), "no file, nothing to take");
    }
}
