//! Looking after a store: listing it, counting it, checking every file in it, repairing it and
//! collecting garbage.
//!
//! Contract: every folder and file the store should hold is read or reported as unreadable, never
//! skipped in silence; an action entry naming an object the store does not hold, or a damaged one,
//! is damaged itself, and gc removes the entries whose objects it removed. [`LocalStore::verify`] only reads; [`LocalStore::repair`] and [`LocalStore::gc`] remove files,
//! and ask for a store opened with [`LocalStore::open_exclusive`], so that no build is running: every temp
//! file is then the remains of a writer that died, and gc removes them all.

use super::{
    ActionEntry, ArtifactHeader, ContentHash, HEADER_BYTES, LocalStore, StoreError, header,
};
use crate::files;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A file or folder of the store that is damaged or could not be read, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    pub path: PathBuf,
    pub what: String,
}

/// What `cache stats` and `cache verify` report.
#[derive(Clone, Debug, Default)]
pub struct Health {
    pub objects: u64,
    pub object_bytes: u64,
    pub actions: u64,
    /// Temp files: the remains of writes that never finished (or are under way).
    pub temp_files: u64,
    pub temp_bytes: u64,
    /// Files whose contents are wrong (only [`LocalStore::verify`] looks).
    pub damaged: Vec<Damage>,
    /// Files and folders that could not be read.
    pub unreadable: Vec<Damage>,
}

/// A store file with its size and modification time.
struct File {
    path: PathBuf,
    bytes: u64,
    modified: SystemTime,
}

impl LocalStore {
    /// Every file under `dir`, in name order, and every folder or file it could not read.
    fn walk(&self, dir: &str) -> (Vec<File>, Vec<Damage>) {
        let (mut files, mut unreadable) = (Vec::new(), Vec::new());
        for entry in walkdir::WalkDir::new(self.root().join(dir)).sort_by_file_name() {
            match entry.and_then(|e| Ok((e.metadata()?, e))) {
                Ok((m, e)) if m.is_file() => files.push(File {
                    path: e.into_path(),
                    bytes: m.len(),
                    modified: m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                }),
                Ok((m, e)) if !m.is_dir() => unreadable.push(Damage {
                    path: e.into_path(),
                    what: "not a regular file or folder".to_string(),
                }),
                Ok(_) => {}
                Err(e) => unreadable.push(Damage {
                    path: e
                        .path()
                        .map_or_else(|| self.root().join(dir), Path::to_path_buf),
                    what: e
                        .io_error()
                        .map_or_else(|| e.to_string(), ToString::to_string),
                }),
            }
        }
        (files, unreadable)
    }

    /// Lists objects: (hash, bytes, kind).
    pub fn list(&self) -> (Vec<(String, u64, String)>, Vec<Damage>) {
        let (files, unreadable) = self.walk("objects");
        let listed = files
            .into_iter()
            .map(|f| {
                let kind = first_bytes(&f.path).and_then(|b| header(&b)).map_or_else(
                    || "raw".to_string(),
                    |h| format!("{} schema {}", h.kind, h.schema),
                );
                (name(&f.path), f.bytes, kind)
            })
            .collect();
        (listed, unreadable)
    }

    /// Counts objects, actions and temp files, and names what could not be read.
    pub fn stats(&self) -> Health {
        self.census().0
    }

    /// [`LocalStore::stats`] with the object and action files it counted.
    fn census(&self) -> (Health, Vec<File>, Vec<File>) {
        let mut health = Health::default();
        let (objects, mut unreadable) = self.walk("objects");
        let (actions, more) = self.walk("actions");
        unreadable.extend(more);
        let (temps, more) = self.walk("tmp");
        unreadable.extend(more);
        health.objects = objects.len() as u64;
        health.object_bytes = objects.iter().map(|f| f.bytes).sum();
        health.actions = actions.len() as u64;
        health.temp_files = temps.len() as u64;
        health.temp_bytes = temps.iter().map(|f| f.bytes).sum();
        health.unreadable = unreadable;
        (health, objects, actions)
    }

    /// [`LocalStore::stats`], and every object re-hashed (in pieces: memory does not grow with the object)
    /// and every action entry checked: intact, under its own key, naming an object the store holds,
    /// intact and of the entry's kind and schema. Reads each file once; removes nothing.
    pub fn verify(&self) -> Health {
        let (mut health, objects, actions) = self.census();
        let mut damaged = Vec::new();
        let mut unreadable = Vec::new();
        // The header of every intact object, for the entries that name it.
        let mut intact = BTreeMap::new();
        let mut broken = BTreeSet::new();
        for f in objects {
            match object(&f.path) {
                Ok(Some((hash, head))) => {
                    intact.insert(hash, head);
                }
                Ok(None) => {
                    if let Some(hash) = ContentHash::parse(&name(&f.path)) {
                        broken.insert(hash);
                    }
                    damaged.push(Damage {
                        path: f.path,
                        what: "its bytes do not hash to its name".to_string(),
                    });
                }
                Err(e) => unreadable.push(Damage {
                    path: f.path,
                    what: e.to_string(),
                }),
            }
        }
        for f in actions {
            let Some(key) = ContentHash::parse(&name(&f.path)) else {
                damaged.push(Damage {
                    path: f.path,
                    what: "its name is not an action key".to_string(),
                });
                continue;
            };
            let bytes = match files::read(&f.path, &super::ENTRY) {
                Ok(bytes) => bytes,
                Err(e @ files::FileError::Io { .. }) => {
                    unreadable.push(Damage {
                        path: f.path,
                        what: e.to_string(),
                    });
                    continue;
                }
                Err(e) => {
                    damaged.push(Damage {
                        path: f.path,
                        what: e.to_string(),
                    });
                    continue;
                }
            };
            let why = match ActionEntry::parse(&bytes, &key) {
                Err(why) => Some(why),
                Ok(entry) if broken.contains(&entry.output) => Some(format!(
                    "it names object {}, which is damaged",
                    entry.output.short()
                )),
                Ok(entry) => match intact.get(&entry.output) {
                    Some(found) => entry.wrong_object(found.as_ref()),
                    // A build beside this one may have written the object since the walk: look
                    // again before calling it missing.
                    None => match object(&self.object_path(&entry.output)) {
                        Ok(Some((_, found))) => entry.wrong_object(found.as_ref()),
                        _ => Some(format!(
                            "it names object {}, which the store does not hold",
                            entry.output.short()
                        )),
                    },
                },
            };
            if let Some(what) = why {
                damaged.push(Damage { path: f.path, what });
            }
        }
        health.damaged = damaged;
        health.unreadable.extend(unreadable);
        health
    }

    /// Removes damaged files (as [`LocalStore::verify`] found them); how many it removed. The store must
    /// be open alone ([`LocalStore::open_exclusive`]).
    pub fn repair(&self, damaged: &[Damage]) -> Result<u64, StoreError> {
        let mut removed = 0;
        for d in damaged {
            match fs::remove_file(&d.path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(StoreError::Io {
                        path: d.path.clone(),
                        source: e,
                    });
                }
            }
        }
        Ok(removed)
    }

    /// Removes every temp file, then objects and actions not used for `max_age`, then the oldest
    /// until the store fits in `max_bytes`. The store must be open alone
    /// ([`LocalStore::open_exclusive`]). Returns (files removed, bytes removed) and what it could not read.
    pub fn gc(&self, max_age: Option<Duration>, max_bytes: Option<u64>) -> Gc {
        let now = SystemTime::now();
        let mut gc = Gc::default();
        let (temps, unreadable) = self.walk("tmp");
        gc.unreadable.extend(unreadable);
        for f in temps {
            if fs::remove_file(&f.path).is_ok() {
                gc.files += 1;
                gc.bytes += f.bytes;
            }
        }
        let mut entries = Vec::new();
        for dir in ["objects", "actions"] {
            let (files, unreadable) = self.walk(dir);
            entries.extend(files);
            gc.unreadable.extend(unreadable);
        }
        entries.sort_by(|a, b| (a.modified, &a.path).cmp(&(b.modified, &b.path)));
        let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
        for f in entries {
            let too_old =
                max_age.is_some_and(|age| now.duration_since(f.modified).unwrap_or_default() > age);
            let too_big = max_bytes.is_some_and(|limit| total > limit);
            if (too_old || too_big) && fs::remove_file(&f.path).is_ok() {
                gc.files += 1;
                gc.bytes += f.bytes;
                total -= f.bytes;
            }
        }
        // An entry whose object went names nothing: it goes too.
        let (actions, unreadable) = self.walk("actions");
        gc.unreadable.extend(unreadable);
        for f in actions {
            let names_nothing = (ContentHash::parse(&name(&f.path)))
                .zip(files::read(&f.path, &super::ENTRY).ok())
                .and_then(|(key, bytes)| ActionEntry::parse(&bytes, &key).ok())
                .is_some_and(|entry| !self.object_path(&entry.output).exists());
            if names_nothing && fs::remove_file(&f.path).is_ok() {
                gc.files += 1;
                gc.bytes += f.bytes;
            }
        }
        gc
    }
}

/// What [`LocalStore::gc`] did.
#[derive(Clone, Debug, Default)]
pub struct Gc {
    pub files: u64,
    pub bytes: u64,
    pub unreadable: Vec<Damage>,
}

/// An object file's hash and header when its bytes hash to its name, `None` when they do not.
fn object(path: &Path) -> Result<Option<(ContentHash, Option<ArtifactHeader>)>, files::FileError> {
    let (hash, head) = match files::hash(path, "store object", HEADER_BYTES) {
        Ok(found) => found,
        Err(e @ files::FileError::Io { .. }) => return Err(e),
        Err(_) => return Ok(None),
    };
    let hash = ContentHash(*hash.as_bytes());
    Ok((ContentHash::parse(&name(path)) == Some(hash)).then(|| (hash, header(&head))))
}

/// The first bytes of a store file, enough for its header.
fn first_bytes(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let (file, _) = files::open(path, "store object").ok()?;
    let mut head = Vec::new();
    file.take(HEADER_BYTES as u64).read_to_end(&mut head).ok()?;
    Some(head)
}

fn name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
