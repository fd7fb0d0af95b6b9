//! Stage records, `stages/<build>/<phase>.json`: what a phase of a build made, from what, with which
//! config, with a check over all of it.
//!
//! Contract: a record is read only when it parses and its check matches its fields ([`read`]); any
//! other record is damaged. A build rewrites a record whenever its identity (phase, build, workload,
//! output, key, inputs, config, target) differs from what the build computed, or it is damaged.
//! [`verify`] finds every damaged record under a stages folder. Files are written through a temp
//! file and a rename ([`write_if_changed`], through [`crate::files::prepare_atomic`]); temp files of
//! writers that died are removed by the next build of their folder.

use crate::store::{ArtifactKind, ContentHash, Damage, Tally};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Derive-key context of a record's check.
const CHECK_CONTEXT: &str = "ipu-codegen stage record v1";

/// `stages/<build>/<phase>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRecord {
    pub phase: String,
    pub build: String,
    pub workload: String,
    pub output: ContentHash,
    pub key: ContentHash,
    pub inputs: BTreeMap<String, ContentHash>,
    pub config: serde_json::Value,
    pub target: String,
    pub elapsed_ms: u64,
    pub headline: serde_json::Value,
    /// blake3 over every other field, so that an edited or damaged record is never read.
    pub check: ContentHash,
}

impl StageRecord {
    /// The check over every field but `check`.
    fn sum(&self) -> ContentHash {
        let mut fields = self.clone();
        fields.check = ContentHash([0; 32]);
        let bytes = serde_json::to_vec(&fields).expect("records serialise");
        ContentHash(blake3::derive_key(CHECK_CONTEXT, &bytes))
    }

    /// The record with its check filled in.
    pub fn checked(mut self) -> StageRecord {
        self.check = self.sum();
        self
    }

    /// The file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("records serialise")
    }

    /// Whether this record says what `other` says, its time and headline aside.
    pub fn same_identity(&self, other: &StageRecord) -> bool {
        self.phase == other.phase
            && self.build == other.build
            && self.workload == other.workload
            && self.output == other.output
            && self.key == other.key
            && self.inputs == other.inputs
            && self.config == other.config
            && self.target == other.target
    }
}

/// The file in a build's folder that holds its lookups' hits and misses per level.
pub const LOOKUPS_FILE: &str = "lookups.json";

/// `stages/<build>/lookups.json`: the hits and misses of the build's most recent run's phase
/// lookups, per level of the store.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lookups {
    pub build: String,
    #[serde(flatten)]
    pub tally: Tally,
}

impl Lookups {
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("lookups serialise")
    }
}

/// The lookups of the build under `stages` that ran last (the newest `lookups.json`; by name among
/// equals); none when no build has one. A file that does not read is an error naming it.
pub fn latest_lookups(stages: &Path) -> Result<Option<Lookups>, RecordError> {
    let newest = walkdir::WalkDir::new(stages)
        .min_depth(2)
        .max_depth(2)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_name() == LOOKUPS_FILE)
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.into_path())))
        .max_by(|a, b| a.0.cmp(&b.0));
    let Some((_, path)) = newest else {
        return Ok(None);
    };
    let damaged = |why: String| RecordError::Damaged {
        path: path.clone(),
        why,
    };
    let bytes = crate::files::read(&path, &crate::files::STAGE_RECORD)
        .map_err(|e| damaged(e.to_string()))?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| damaged(e.to_string()))
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("no stage record {}", .path.display())]
    Missing {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("stage record {} is damaged: {why}", .path.display())]
    Damaged { path: PathBuf, why: String },
}

/// Reads a record, refusing one that does not parse or whose check does not match.
pub fn read(path: &Path) -> Result<StageRecord, RecordError> {
    let bytes = match crate::files::read(path, &crate::files::STAGE_RECORD) {
        Ok(bytes) => bytes,
        Err(crate::files::FileError::Io { error: source, .. }) => {
            return Err(RecordError::Missing {
                path: path.to_path_buf(),
                source,
            });
        }
        Err(e) => {
            return Err(RecordError::Damaged {
                path: path.to_path_buf(),
                why: e.to_string(),
            });
        }
    };
    let damaged = |why: String| RecordError::Damaged {
        path: path.to_path_buf(),
        why,
    };
    let record: StageRecord = serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
    if record.check != record.sum() {
        return Err(damaged("its check does not match its fields".to_string()));
    }
    Ok(record)
}

/// Every damaged stage record under `stages` (files named after a phase, one folder per build): one
/// that does not read, or that is another phase's or another build's (copied from another folder);
/// every `model.ipuexe` that is not the package its folder's `package_phase` record names; and
/// every folder or file that could not be read. How many records it read.
pub fn verify(
    stages: &Path,
    phases: &[&str],
    package_phase: &str,
) -> (u64, Vec<Damage>, Vec<Damage>) {
    let (mut read_count, mut damaged, mut unreadable) = (0, Vec::new(), Vec::new());
    if !stages.exists() {
        return (0, damaged, unreadable);
    }
    // Per build folder: the package its record names, and its `model.ipuexe`.
    let mut packages: BTreeMap<PathBuf, (Option<ContentHash>, Option<PathBuf>)> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(stages)
        .min_depth(2)
        .max_depth(2)
        .sort_by_file_name()
    {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                unreadable.push(Damage {
                    path: e.path().unwrap_or(stages).to_path_buf(),
                    what: e.to_string(),
                });
                continue;
            }
        };
        let path = entry.path();
        let folder = path.parent().unwrap_or(stages).to_path_buf();
        let build = folder.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let file = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if file == "model.ipuexe" {
            packages.entry(folder).or_default().1 = Some(path.to_path_buf());
            continue;
        }
        let Some(phase) = file.strip_suffix(".json").filter(|n| phases.contains(n)) else {
            continue;
        };
        read_count += 1;
        let why = match read(path) {
            Ok(record) if record.build != build => Some(format!(
                "it is a record of build {}, in the folder of build {build}",
                record.build
            )),
            Ok(record) if record.phase != phase => Some(format!(
                "it is a record of phase {}, under the name of {phase}",
                record.phase
            )),
            Ok(record) => {
                if phase == package_phase {
                    packages.entry(folder).or_default().0 = Some(record.output);
                }
                None
            }
            Err(RecordError::Missing { source, .. }) => {
                unreadable.push(Damage {
                    path: path.to_path_buf(),
                    what: source.to_string(),
                });
                None
            }
            Err(RecordError::Damaged { why, .. }) => Some(why),
        };
        if let Some(what) = why {
            damaged.push(Damage {
                path: path.to_path_buf(),
                what,
            });
        }
    }
    for (recorded, package) in packages.into_values() {
        let Some(path) = package else { continue };
        let why = match (package_body_hash(&path), recorded) {
            (Err(why), _) => why,
            (Ok(_), None) => format!("no intact {package_phase} record in its folder names it"),
            (Ok(found), Some(recorded)) if found != recorded => format!(
                "it holds package {}, and its build's {package_phase} record names {}",
                found.short(),
                recorded.short()
            ),
            (Ok(_), Some(_)) => continue,
        };
        damaged.push(Damage { path, what: why });
    }
    (read_count, damaged, unreadable)
}

/// The hash of the body of the `model.ipuexe` at `path` (which names its package), read in pieces;
/// why not, when its header does not check.
fn package_body_hash(path: &Path) -> Result<ContentHash, String> {
    use std::io::Read as _;
    let (mut file, _) =
        crate::files::open(path, "application package").map_err(|e| e.to_string())?;
    let mut head = [0u8; 12];
    file.read_exact(&mut head)
        .map_err(|_| "it is cut short in its header".to_string())?;
    if head[..8] != crate::ir::IPUEXE_MAGIC[..] {
        return Err("it is not an application package (bad magic)".to_string());
    }
    let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if len > 4096 {
        return Err("its header names a compiler version of more than 4096 bytes".to_string());
    }
    let mut version_and_hash = vec![0u8; len as usize + 32];
    file.read_exact(&mut version_and_hash)
        .map_err(|_| "it is cut short in its header".to_string())?;
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(&mut file).map_err(|e| e.to_string())?;
    let body = ContentHash(*hasher.finalize().as_bytes());
    if body.0[..] != version_and_hash[len as usize..] {
        return Err("its body does not match the hash in its header".to_string());
    }
    Ok(body)
}

/// Whether the `model.ipuexe` at `path` is exactly package `body`'s, as this compiler writes it:
/// its header ([`crate::ir::ipuexe_header`]), then bytes that hash to `body` (read in pieces,
/// nothing kept).
pub fn holds_package(path: &Path, body: &ContentHash) -> bool {
    use std::io::Read as _;
    let Ok((mut file, _)) = crate::files::open(path, "application package") else {
        return false;
    };
    let want = crate::ir::ipuexe_header(*body);
    let mut head = vec![0u8; want.len()];
    if file.read_exact(&mut head).is_err() || head != want {
        return false;
    }
    let mut hasher = blake3::Hasher::new();
    hasher.update_reader(&mut file).is_ok() && hasher.finalize().as_bytes() == &body.0
}

/// The staleness rule: a stage record continues a build when it was made for the same workload and
/// target, from exactly the outputs the build has recorded (or imported) before it.
pub fn record_continues(
    record: &StageRecord,
    workload: &str,
    target: &str,
    inputs: &[ArtifactKind],
    outputs: &BTreeMap<ArtifactKind, ContentHash>,
) -> bool {
    record.workload == workload
        && record.target == target
        && inputs
            .iter()
            .all(|k| record.inputs.get(k.name()) == outputs.get(k))
}

/// Writes the concatenation of `parts` to `path` ([`prepare_if_changed`], then the rename), unless
/// the file holds it already; whether it wrote.
pub fn write_if_changed(path: &Path, parts: &[&[u8]]) -> Result<bool, super::BuildError> {
    match prepare_if_changed(path, parts)? {
        Some(prepared) => prepared.persist().map(|()| true).map_err(Into::into),
        None => Ok(false),
    }
}

/// The concatenation of `parts` written to a temp file beside `path`, to take its name when
/// persisted ([`crate::files::prepare_atomic`]), unless the file holds it already.
pub fn prepare_if_changed(
    path: &Path,
    parts: &[&[u8]],
) -> Result<Option<crate::files::Prepared>, super::BuildError> {
    use super::BuildError;
    if holds(path, parts) {
        return Ok(None);
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| BuildError::CreateDir {
        path: dir.to_path_buf(),
        source,
    })?;
    Ok(Some(crate::files::prepare_atomic(
        path,
        "build file",
        parts,
    )?))
}

/// Whether the regular file at `path` holds exactly the concatenation of `parts`: read only when
/// its size matches, a piece at a time, up to the first difference.
fn holds(path: &Path, parts: &[&[u8]]) -> bool {
    use std::io::Read as _;
    let Ok((mut file, len)) = crate::files::open(path, "build file") else {
        return false;
    };
    if len != parts.iter().map(|p| p.len() as u64).sum::<u64>() {
        return false;
    }
    const PIECE: usize = 1 << 20;
    let mut piece = vec![0; PIECE];
    parts.iter().flat_map(|p| p.chunks(PIECE)).all(|want| {
        let old = &mut piece[..want.len()];
        file.read_exact(old).is_ok() && old == want
    })
}

#[cfg(test)]
mod tests {
    use super::write_if_changed;

    #[test]
    fn a_file_is_written_unless_it_holds_the_parts_joined() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model.ipuexe");
        // A body longer than the piece `holds` compares at a time.
        let body: Vec<u8> = (0..(3 << 20) + 5).map(|i| (i % 251) as u8).collect();
        let joined = [b"head".as_slice(), &body].concat();
        assert!(write_if_changed(&path, &[b"head", &body]).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), joined);
        assert!(!write_if_changed(&path, &[b"head", &body]).unwrap());
        // The same bytes split elsewhere are the same file.
        assert!(!write_if_changed(&path, &[&joined[..7], &joined[7..]]).unwrap());
        // One byte changed, in the last piece, and the size kept: written again.
        let mut changed = body.clone();
        *changed.last_mut().unwrap() ^= 1;
        assert!(write_if_changed(&path, &[b"head", &changed]).unwrap());
        assert_eq!(std::fs::read(&path).unwrap()[4..], changed[..]);
        // A file one byte shorter than the parts: written again.
        assert!(write_if_changed(&path, &[b"head", &changed, b"!"]).unwrap());
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            joined.len() as u64 + 1
        );
    }
}
