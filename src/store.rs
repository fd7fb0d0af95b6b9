//! The content-addressed store (`cache/`).
//!
//! - `objects/<2 hex>/<64 hex>`: artifacts by the blake3 hash of their bytes. Every read re-hashes; a
//!   mismatch (a damaged or truncated object) evicts the object and reads as a miss, with a warning.
//! - `actions/<2 hex>/<64 hex>`: action key -> output content hash. An action key is blake3 in derive-key
//!   mode over the phase, its schema version, the compiler version, the canonical config bytes, the target
//!   hash and the content hashes of the inputs. Keys use input *content*, so a phase that reruns and
//!   produces the same bytes stops the cascade.
//! - Every write goes to a unique temp file in `tmp/` and is renamed into place, so readers never see a
//!   partial file and two builds into one store both succeed.
//!
//! Objects are MessagePack: an [`ArtifactHeader`] first, then the body.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Derive-key context: names the project and the store layout version.
const KEY_CONTEXT: &str = "ipu-codegen store v1 action key";

/// A blake3 content hash, printed and serialised as 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    pub fn of(bytes: &[u8]) -> ContentHash {
        ContentHash(*blake3::hash(bytes).as_bytes())
    }
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    pub fn parse(hex: &str) -> Option<ContentHash> {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(ContentHash(out))
    }
    pub fn short(&self) -> String {
        self.hex()[..12].to_string()
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ContentHash({})", self.short())
    }
}

impl Serialize for ContentHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.hex())
    }
}

impl<'de> Deserialize<'de> for ContentHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ContentHash::parse(&s)
            .ok_or_else(|| serde::de::Error::custom(format!("not a content hash: {s:?}")))
    }
}

/// The first field of every stored artifact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactHeader {
    pub kind: String,
    pub schema: u32,
    pub producer: String,
}

/// The package version and a fingerprint of the compiler's source: part of every action key, so a code
/// change never reuses an output of the old code.
pub const COMPILER_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "+",
    env!("IPU_CODEGEN_SOURCE_HASH")
);

/// An artifact type: its kind name and schema version go in the header and the action key.
pub trait Artifact: Serialize + DeserializeOwned {
    const KIND: &'static str;
    const SCHEMA: u32;
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("object {hash}: cannot decode as {kind}: {message}")]
    Decode {
        hash: String,
        kind: &'static str,
        message: String,
    },
    #[error("object {hash}: header says {found}, expected {kind} schema {schema}")]
    WrongKind {
        hash: String,
        found: String,
        kind: &'static str,
        schema: u32,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Encodes an artifact with its header: canonical bytes (struct fields in order, no maps with unordered keys).
pub fn encode<A: Artifact>(artifact: &A) -> Vec<u8> {
    let header = ArtifactHeader {
        kind: A::KIND.to_string(),
        schema: A::SCHEMA,
        producer: format!("ipu-codegen {COMPILER_VERSION}"),
    };
    rmp_serde::to_vec(&(header, artifact)).expect("artifacts serialise")
}

pub fn decode<A: Artifact>(bytes: &[u8], hash: &ContentHash) -> Result<A, StoreError> {
    let (header, body): (ArtifactHeader, A) =
        rmp_serde::from_slice(bytes).map_err(|e| StoreError::Decode {
            hash: hash.short(),
            kind: A::KIND,
            message: e.to_string(),
        })?;
    if header.kind != A::KIND || header.schema != A::SCHEMA {
        return Err(StoreError::WrongKind {
            hash: hash.short(),
            found: format!("{} schema {}", header.kind, header.schema),
            kind: A::KIND,
            schema: A::SCHEMA,
        });
    }
    Ok(body)
}

/// Computes an action key.
pub fn action_key(
    phase: &str,
    schema: u32,
    config: &[u8],
    target: &ContentHash,
    inputs: &[ContentHash],
) -> ContentHash {
    let mut h = blake3::Hasher::new_derive_key(KEY_CONTEXT);
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(phase.as_bytes());
    field(&schema.to_le_bytes());
    field(COMPILER_VERSION.as_bytes());
    field(config);
    field(&target.0);
    for input in inputs {
        field(&input.0);
    }
    ContentHash(*h.finalize().as_bytes())
}

pub struct Store {
    root: PathBuf,
}

/// Bytes with their content hash, hashed once: what [`Store::put_object`] writes, shareable between
/// threads.
#[derive(Clone)]
pub struct Object {
    hash: ContentHash,
    bytes: std::sync::Arc<Vec<u8>>,
}

impl Object {
    pub fn new(bytes: Vec<u8>) -> Object {
        Object {
            hash: ContentHash::of(&bytes),
            bytes: std::sync::Arc::new(bytes),
        }
    }
    pub fn hash(&self) -> ContentHash {
        self.hash
    }
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Marks a store file as used now, so `gc --max-age-days` keeps what builds still use.
fn touch(path: &Path) {
    if let Ok(f) = fs::File::options().write(true).open(path) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// Temp files younger than this may belong to a running build; gc leaves them.
const TEMP_GRACE: Duration = Duration::from_secs(3600);

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// What `cache stats` and `cache verify` report.
#[derive(Clone, Debug, Default)]
pub struct StoreStats {
    pub objects: u64,
    pub object_bytes: u64,
    pub actions: u64,
    pub damaged: Vec<String>,
}

impl Store {
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        for dir in ["objects", "actions", "tmp"] {
            let p = root.join(dir);
            fs::create_dir_all(&p).map_err(io_err(&p))?;
        }
        Ok(Store {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn object_path(&self, hash: &ContentHash) -> PathBuf {
        let hex = hash.hex();
        self.root.join("objects").join(&hex[..2]).join(&hex)
    }

    fn action_path(&self, key: &ContentHash) -> PathBuf {
        let hex = key.hex();
        self.root.join("actions").join(&hex[..2]).join(&hex)
    }

    /// Writes `bytes` to `path` through a unique temp file and a rename.
    fn write_atomic(&self, path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
        let dir = path.parent().expect("store paths have parents");
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        // A fresh name: the pid and a counter, and `create_new` so that processes with equal pids (in
        // other containers sharing the store) never write into one file.
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("object");
        let (tmp, mut f) = loop {
            let tmp = self.root.join("tmp").join(format!(
                "{}-{}-{name}",
                std::process::id(),
                TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
            ));
            match fs::File::options().write(true).create_new(true).open(&tmp) {
                Ok(f) => break (tmp, f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(StoreError::Io {
                        path: tmp,
                        source: e,
                    });
                }
            }
        };
        f.write_all(bytes).map_err(io_err(&tmp))?;
        f.sync_data().map_err(io_err(&tmp))?;
        drop(f);
        fs::rename(&tmp, path).map_err(io_err(path))
    }

    /// Stores bytes under their content hash (no-op when present and intact).
    pub fn put(&self, bytes: &[u8]) -> Result<ContentHash, StoreError> {
        let hash = ContentHash::of(bytes);
        self.put_hashed(&hash, bytes)?;
        Ok(hash)
    }

    /// Stores an object under its hash (no-op when present and intact).
    pub fn put_object(&self, object: &Object) -> Result<(), StoreError> {
        self.put_hashed(&object.hash, &object.bytes)
    }

    /// `bytes` under `hash`, which is theirs.
    fn put_hashed(&self, hash: &ContentHash, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.object_path(hash);
        let intact = fs::read(&path)
            .map(|b| ContentHash::of(&b) == *hash)
            .unwrap_or(false);
        if !intact {
            self.write_atomic(&path, bytes)?;
        }
        Ok(())
    }

    /// Reads an object, re-hashing it. A damaged object is evicted and reads as `None`.
    pub fn get(&self, hash: &ContentHash) -> Result<Option<Vec<u8>>, StoreError> {
        let path = self.object_path(hash);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::Io { path, source: e }),
        };
        if ContentHash::of(&bytes) == *hash {
            touch(&path);
        } else {
            tracing::warn!(object = %hash.short(), path = %path.display(), "evicted damaged store object; it will be recomputed");
            let _ = fs::remove_file(&path);
            return Ok(None);
        }
        Ok(Some(bytes))
    }

    /// The output recorded for an action key; a missing or damaged action is a miss.
    pub fn lookup(&self, key: &ContentHash) -> Result<Option<ContentHash>, StoreError> {
        let path = self.action_path(key);
        match fs::read(&path) {
            Ok(bytes) => {
                let hash = std::str::from_utf8(&bytes)
                    .ok()
                    .and_then(|s| ContentHash::parse(s.trim()));
                if hash.is_some() {
                    touch(&path);
                }
                Ok(hash)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Io { path, source: e }),
        }
    }

    pub fn record(&self, key: &ContentHash, output: &ContentHash) -> Result<(), StoreError> {
        self.write_atomic(&self.action_path(key), output.hex().as_bytes())
    }

    fn files(&self, dir: &str) -> impl Iterator<Item = walkdir::DirEntry> {
        walkdir::WalkDir::new(self.root.join(dir))
            .sort_by_file_name()
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
    }

    /// Lists objects: (hash, bytes, kind).
    pub fn list(&self) -> Vec<(String, u64, String)> {
        self.files("objects")
            .map(|e| {
                let bytes = e.metadata().map(|m| m.len()).unwrap_or(0);
                let kind = fs::read(e.path())
                    .ok()
                    .and_then(|b| {
                        rmp_serde::from_slice::<(ArtifactHeader, serde::de::IgnoredAny)>(&b).ok()
                    })
                    .map(|(h, _)| format!("{} schema {}", h.kind, h.schema))
                    .unwrap_or_else(|| "raw".to_string());
                (e.file_name().to_string_lossy().into_owned(), bytes, kind)
            })
            .collect()
    }

    /// Counts objects and actions; with `verify`, re-hashes every object and evicts the damaged ones.
    pub fn stats(&self, verify: bool) -> StoreStats {
        let mut stats = StoreStats::default();
        for e in self.files("objects") {
            stats.objects += 1;
            stats.object_bytes += e.metadata().map(|m| m.len()).unwrap_or(0);
            if verify {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(hash) = ContentHash::parse(&name) {
                    if matches!(self.get(&hash), Ok(None) | Err(_)) {
                        stats.damaged.push(name);
                    }
                } else {
                    stats.damaged.push(name);
                }
            }
        }
        stats.actions = self.files("actions").count() as u64;
        stats
    }

    /// Removes objects and actions not used for `max_age`, then the oldest until the store fits in
    /// `max_bytes`. Returns (files removed, bytes removed).
    pub fn gc(&self, max_age: Option<Duration>, max_bytes: Option<u64>) -> (u64, u64) {
        let now = SystemTime::now();
        let mut entries: Vec<(SystemTime, PathBuf, u64)> = ["objects", "actions", "tmp"]
            .into_iter()
            .flat_map(|d| self.files(d))
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                Some((m.modified().ok()?, e.path().to_path_buf(), m.len()))
            })
            .collect();
        entries.sort();
        let mut total: u64 = entries.iter().map(|e| e.2).sum();
        let (mut removed, mut removed_bytes) = (0, 0);
        for (mtime, path, len) in entries {
            let young_temp = path.starts_with(self.root.join("tmp"))
                && now.duration_since(mtime).unwrap_or_default() < TEMP_GRACE;
            if young_temp {
                continue;
            }
            let too_old =
                max_age.is_some_and(|age| now.duration_since(mtime).unwrap_or_default() > age);
            let too_big = max_bytes.is_some_and(|limit| total > limit);
            if (too_old || too_big) && fs::remove_file(&path).is_ok() {
                removed += 1;
                removed_bytes += len;
                total -= len;
            }
        }
        (removed, removed_bytes)
    }
}

/// An artifact a phase reads or writes, named by its store kind (`mid`, `selected`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ArtifactKind(&'static str);

impl ArtifactKind {
    /// The kind of artifact type `A`.
    pub const fn of<A: Artifact>() -> ArtifactKind {
        ArtifactKind(A::KIND)
    }

    /// The name in stage records and messages: `exchange_storage`.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}
