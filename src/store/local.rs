//! The local level of the store: a folder (`cache/`) this machine reads and writes, and every build
//! reads objects from.
//!
//! Contract: see the store's module docs (layout, verification on read, atomic writes, the lock).
//! A lookup here takes an entry only when it is intact, filed under its own key, made for the action
//! and kind asked for, and names an intact object of that kind and schema; any other entry is
//! evicted with a warning and reads as a miss.

use super::{
    ActionEntry, ContentHash, ENTRY, Expect, Found, HEADER_BYTES, Level, OBJECT, Object, Store,
    StoreError, header, io_err,
};
use crate::files;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Marks a store file as used now, so `gc --max-age-days` keeps what builds still use.
fn touch(path: &Path) {
    if let Ok(f) = fs::File::options().write(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// An open local store: its folders, and the lock on them that this value holds until it is dropped.
pub struct LocalStore {
    root: PathBuf,
    _lock: fs::File,
}

impl LocalStore {
    /// Opens (creating) the store at `root`, sharing its lock with other builds. Waits while an
    /// exclusive holder (gc, repair) works.
    pub fn open(root: &Path) -> Result<LocalStore, StoreError> {
        LocalStore::open_locked(root, false)
    }

    /// Opens the store alone: waits until no other process has it open.
    pub fn open_exclusive(root: &Path) -> Result<LocalStore, StoreError> {
        LocalStore::open_locked(root, true)
    }

    fn open_locked(root: &Path, exclusive: bool) -> Result<LocalStore, StoreError> {
        for dir in ["objects", "actions", "tmp"] {
            let p = root.join(dir);
            fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        let path = root.join("lock");
        let lock = fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_err(&path))?;
        let tried = if exclusive {
            lock.try_lock()
        } else {
            lock.try_lock_shared()
        };
        match tried {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                if exclusive {
                    tracing::warn!(store = %root.display(), "waiting for the builds using the store to finish");
                } else {
                    tracing::warn!(store = %root.display(), "waiting for the store's maintenance to finish");
                }
                let waited = if exclusive {
                    lock.lock()
                } else {
                    lock.lock_shared()
                };
                waited.map_err(io_err(&path))?;
            }
            Err(fs::TryLockError::Error(e)) => return Err(io_err(&path)(e)),
        }
        Ok(LocalStore {
            root: root.to_path_buf(),
            _lock: lock,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub(super) fn object_path(&self, hash: &ContentHash) -> PathBuf {
        let hex = hash.hex();
        self.root.join("objects").join(&hex[..2]).join(&hex)
    }

    pub(super) fn action_path(&self, key: &ContentHash) -> PathBuf {
        let hex = key.hex();
        self.root.join("actions").join(&hex[..2]).join(&hex)
    }

    /// Writes the concatenation of `parts` to `path` through a unique temp file in `tmp/` and a
    /// rename ([`crate::files::write_atomic_via`]: the writer locks its temp file, so a build's sweep
    /// of `tmp/` removes only the temps of writers that died).
    fn write_atomic(&self, path: &Path, parts: &[&[u8]]) -> Result<(), StoreError> {
        let dir = path.parent().expect("store paths have parents");
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        Ok(files::write_atomic_via(
            &self.root.join("tmp"),
            path,
            "store file",
            parts,
        )?)
    }

    /// Removes the temp files in `tmp/` of writers that died (a killed build's); how many. Safe
    /// beside running builds: a live writer holds a lock on its temp file.
    pub fn remove_dead_temps(&self) -> usize {
        files::remove_dead_temps(&self.root.join("tmp"))
    }

    /// Stores the concatenation of `parts` under `hash`, which is theirs (no-op when present and
    /// intact).
    pub fn put_hashed(&self, hash: &ContentHash, parts: &[&[u8]]) -> Result<(), StoreError> {
        let path = self.object_path(hash);
        let intact = files::hash(&path, "store object", 0)
            .is_ok_and(|(found, _)| found.as_bytes() == &hash.0);
        if !intact {
            self.write_atomic(&path, parts)?;
        }
        Ok(())
    }

    /// Reads an object, re-hashing it. A damaged object is evicted and reads as `None`.
    pub fn get(&self, hash: &ContentHash) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.object_path(hash);
        let bytes = match files::read(&path, &OBJECT) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(files::FileError::Io { error: source, .. }) => {
                return Err(StoreError::Io { path, source });
            }
            // Not a regular file, or too large: damaged.
            Err(_) => Vec::new(),
        };
        Ok(self.kept_if_intact(&path, hash, ContentHash::of(&bytes), bytes))
    }

    /// The first [`HEADER_BYTES`] of an object, which is re-hashed in pieces (memory does not grow
    /// with it, and nothing of it is kept): what a lookup reads. A damaged object is evicted and
    /// reads as `None`.
    fn head(&self, hash: &ContentHash) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.object_path(hash);
        let (found, head) = match files::hash(&path, OBJECT.what, HEADER_BYTES) {
            Ok((found, head)) => (ContentHash(*found.as_bytes()), head),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(files::FileError::Io { error: source, .. }) => {
                return Err(StoreError::Io { path, source });
            }
            // Not a regular file: damaged.
            Err(_) => (ContentHash([0; 32]), Vec::new()),
        };
        Ok(self.kept_if_intact(&path, hash, found, head))
    }

    /// `bytes` read from the object at `path` when it hashes to `hash` (`found`, and the object is
    /// marked used); otherwise the object is evicted, with a warning, and this is `None`.
    fn kept_if_intact(
        &self,
        path: &Path,
        hash: &ContentHash,
        found: ContentHash,
        bytes: Vec<u8>,
    ) -> Option<Vec<u8>> {
        if found == *hash {
            touch(path);
            return Some(bytes);
        }
        tracing::warn!(object = %hash.short(), path = %path.display(), "evicted damaged store object; it will be recomputed");
        let _ = fs::remove_file(path);
        None
    }

    /// The output recorded for an action key, when its entry is usable and names an intact object
    /// of the kind and schema `expect` asks for. A missing output is a miss; an unusable entry is
    /// evicted, with a warning, and is a miss.
    fn find(&self, key: &ContentHash, expect: Expect) -> Result<Option<ContentHash>, StoreError> {
        let path = self.action_path(key);
        let bytes = match files::read(&path, &ENTRY) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(files::FileError::Io { error: source, .. }) => {
                return Err(StoreError::Io { path, source });
            }
            Err(e) => return self.evict_entry(&path, key, &e.to_string()),
        };
        let entry = match ActionEntry::parse(&bytes, key) {
            Ok(entry) => entry,
            Err(why) => return self.evict_entry(&path, key, &why),
        };
        if let Some(why) = entry.mismatch(expect) {
            return self.evict_entry(&path, key, &why);
        }
        let Some(head) = self.head(&entry.output)? else {
            return Ok(None);
        };
        // The entry answers `expect`, so the object must be of the entry's kind and schema.
        match entry.wrong_object(header(&head).as_ref()) {
            None => {
                touch(&path);
                Ok(Some(entry.output))
            }
            Some(why) => self.evict_entry(&path, key, &why),
        }
    }

    fn evict_entry(
        &self,
        path: &Path,
        key: &ContentHash,
        why: &str,
    ) -> Result<Option<ContentHash>, StoreError> {
        tracing::warn!(action = %key.short(), path = %path.display(), "evicted an unusable action entry ({why}); it will be recomputed");
        let _ = fs::remove_file(path);
        Ok(None)
    }
}

impl Store for LocalStore {
    fn local(&self) -> &LocalStore {
        self
    }

    fn levels(&self) -> &[Level] {
        &[Level::Local]
    }

    fn lookup(&self, key: &ContentHash, expect: Expect) -> Result<Option<Found>, StoreError> {
        Ok(self.find(key, expect)?.map(|output| Found {
            output,
            level: Level::Local,
        }))
    }

    fn put_object(&self, object: &Object) -> Result<(), StoreError> {
        let parts: Vec<&[u8]> = object.bytes().parts().collect();
        self.put_hashed(&object.hash(), &parts)
    }

    fn record(
        &self,
        key: &ContentHash,
        expect: Expect,
        output: &ContentHash,
    ) -> Result<(), StoreError> {
        let entry = ActionEntry::new(key, expect, output);
        let bytes = serde_json::to_vec(&entry).expect("entries serialise");
        self.write_atomic(&self.action_path(key), &[&bytes])
    }
}
