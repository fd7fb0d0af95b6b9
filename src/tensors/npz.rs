//! `.npz` archives: a zip of `.npy` entries, one per named array (`NAME.npy`), as numpy's `savez`
//! (stored) and `savez_compressed` (deflated) write them. Reading ([`read`]) takes every entry,
//! refuses one that is not `NAME.npy`, a folder, a name given twice, and entries whose inflated sizes
//! (declared, then as read) add up to more than a limit, before more is allocated; each entry is read
//! by [`npy::read`]; an error names the entry and never panics on damaged bytes. Writing ([`write`])
//! gives a stored (uncompressed) zip of the arrays in the order given, each entry's time 1980-01-01,
//! so the same arrays give the same bytes.

use super::{Tensor, npy};
use std::io::{Cursor, Read as _, Write as _};

pub const MAGIC: &[u8; 2] = b"PK";

#[derive(Debug, thiserror::Error)]
pub enum NpzError {
    #[error("not a .npz archive (a zip of .npy files): {0}")]
    Archive(String),
    #[error("entry {entry:?} is not an array: numpy names each NAME.npy")]
    NotAnArray { entry: String },
    #[error("entry {entry:?} is in the archive twice")]
    Twice { entry: String },
    #[error("entry {entry:?} cannot be read: {reason}")]
    Entry { entry: String, reason: String },
    #[error("entry {entry:?} makes the arrays more than {limit} bytes once inflated")]
    TooLarge { entry: String, limit: u64 },
    /// The `.npy` error is part of the message, not a source, so it is said once.
    #[error("entry {entry:?}: {error}")]
    Npy { entry: String, error: npy::NpyError },
}

/// Every array of the archive `bytes`, by name (the entry's name without `.npy`), in the archive's
/// order; `limit` bounds the bytes of all entries once inflated.
pub fn read(bytes: &[u8], limit: u64) -> Result<Vec<(String, Tensor)>, NpzError> {
    let mut archive =
        zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| NpzError::Archive(e.to_string()))?;
    let mut tensors: Vec<(String, Tensor)> = Vec::new();
    let mut inflated = 0u64;
    for index in 0..archive.len() {
        let mut file = archive
            .by_index(index)
            .map_err(|e| NpzError::Archive(format!("entry {index}: {e}")))?;
        let entry = file
            .name()
            .map_err(|e| NpzError::Archive(format!("entry {index}: {e}")))?
            .into_owned();
        let name = match entry.strip_suffix(".npy") {
            Some(name) if !name.is_empty() && !file.is_dir() => name.to_string(),
            _ => return Err(NpzError::NotAnArray { entry }),
        };
        if tensors.iter().any(|(n, _)| *n == name) {
            return Err(NpzError::Twice { entry });
        }
        let left = limit - inflated;
        if file.size() > left {
            return Err(NpzError::TooLarge { entry, limit });
        }
        let mut data = Vec::with_capacity(file.size() as usize);
        (&mut file)
            .take(left + 1)
            .read_to_end(&mut data)
            .map_err(|e| NpzError::Entry {
                entry: entry.clone(),
                reason: e.to_string(),
            })?;
        if data.len() as u64 > left {
            return Err(NpzError::TooLarge { entry, limit });
        }
        inflated += data.len() as u64;
        let tensor = npy::read(&data).map_err(|error| NpzError::Npy {
            entry: entry.clone(),
            error,
        })?;
        tensors.push((name, tensor));
    }
    Ok(tensors)
}

/// A stored zip with each tensor as `NAME.npy`, in the order given.
pub fn write(tensors: &[(String, Tensor)]) -> Result<Vec<u8>, NpzError> {
    let error = |e: &dyn std::fmt::Display| NpzError::Archive(e.to_string());
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Stored)
        .last_modified_time(zip::DateTime::default())
        .large_file(true);
    for (name, tensor) in tensors {
        zip.start_file(format!("{name}.npy"), options)
            .map_err(|e| error(&e))?;
        zip.write_all(&npy::write(tensor)).map_err(|e| error(&e))?;
    }
    Ok(zip.finish().map_err(|e| error(&e))?.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensors::Elements;

    fn tensor(values: &[f32]) -> Tensor {
        Tensor {
            shape: vec![values.len() as u64],
            elements: Elements::F32(values.to_vec()),
        }
    }

    #[test]
    fn arrays_come_back_by_name_in_order() {
        let arrays = vec![
            ("b".to_string(), tensor(&[1.0, 2.0])),
            ("a/x".to_string(), tensor(&[3.0])),
        ];
        let bytes = write(&arrays).unwrap();
        assert!(bytes.starts_with(MAGIC));
        assert_eq!(
            write(&arrays).unwrap(),
            bytes,
            "the same arrays, the same bytes"
        );
        let back = read(&bytes, 1 << 20).unwrap();
        assert_eq!(back, arrays);
    }

    #[test]
    fn damaged_archives_and_entries_are_errors_naming_the_entry() {
        let bytes = write(&[("x".to_string(), tensor(&[1.0; 16]))]).unwrap();
        for cut in [0, 3, 30, bytes.len() / 2, bytes.len() - 1] {
            assert!(read(&bytes[..cut], 1 << 20).is_err(), "cut at {cut}");
        }
        let error = read(&bytes, 100).unwrap_err();
        assert!(matches!(error, NpzError::TooLarge { .. }), "{error}");
        // The .npy's magic damaged inside the archive.
        let at = bytes.windows(6).position(|w| w == npy::MAGIC).unwrap();
        let mut damaged = bytes.clone();
        damaged[at + 1] = b'X';
        let error = read(&damaged, 1 << 20).unwrap_err().to_string();
        assert!(error.starts_with("entry \"x.npy\""), "{error}");
    }
}
