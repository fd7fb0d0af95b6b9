//! The content-addressed store: the local folder (`cache/`, [`LocalStore`]) and, when asked, a shared
//! remote cache behind it ([`TwoLevel`], [`RemoteCache`]), one [`Store`] interface over both. The
//! local folder's layout:
//!
//! - `objects/<2 hex>/<64 hex>`: artifacts by the blake3 hash of their bytes. Every read re-hashes; a
//!   mismatch (a damaged or truncated object) evicts the object and reads as a miss, with a warning.
//! - `actions/<2 hex>/<64 hex>`: action entries ([`ActionEntry`]): an action key, what the action is
//!   (a phase or a schedule), the kind and schema of its output, the output's content hash and a check
//!   over all of them. An action key is blake3 in derive-key mode over the phase, its schema version,
//!   the compiler version, the canonical config bytes, the target hash and the content hashes of the
//!   inputs. Keys use input *content*, so a phase that reruns and produces the same bytes stops the
//!   cascade. A lookup takes an entry only when it is intact, filed under its own key, made for the
//!   action and kind asked for, and names an intact object of that kind and schema; any other entry is
//!   evicted with a warning and reads as a miss.
//! - `tmp/`: every write goes to a unique temp file there, locked by its writer, and is renamed into
//!   place ([`crate::files::write_atomic_via`]), so readers never see a partial file and two builds
//!   into one store both succeed. A build starts by removing the temp files of writers that died
//!   ([`LocalStore::remove_dead_temps`]: those no writer holds a lock on).
//! - Reads go through [`crate::files`]: a store file that is not a regular file is damaged, never
//!   waited on; an object is hashed in pieces where only its hash is wanted.
//! - `lock`: every [`LocalStore`] holds a shared lock on it while it is open; maintenance that removes
//!   files ([`LocalStore::open_exclusive`]: gc, repair) holds it exclusively, so it never removes what a
//!   running build wrote or is about to read, and every temp file it finds belongs to no live writer.
//!
//! Objects are MessagePack: an [`ArtifactHeader`] first, then the body.

use crate::files;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

/// Derive-key context: names the project and the store layout version.
const KEY_CONTEXT: &str = "ipu-codegen store v2 action key";

/// Derive-key context of an action entry's check.
const ENTRY_CONTEXT: &str = "ipu-codegen store v2 action entry";

/// A blake3 content hash, printed and serialised as 64 hex digits.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    pub fn of(bytes: &[u8]) -> ContentHash {
        ContentHash(*blake3::hash(bytes).as_bytes())
    }
    pub fn hex(&self) -> String {
        blake3::Hash::from_bytes(self.0).to_hex().to_string()
    }
    /// 64 lowercase hex digits, the only spelling a hash has.
    pub fn parse(hex: &str) -> Option<ContentHash> {
        let lowercase = hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let hash = blake3::Hash::from_hex(hex).ok().filter(|_| lowercase)?;
        Some(ContentHash(*hash.as_bytes()))
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

    /// Writes the artifact's bytes onto `out`: its `Serialize` form, which a large artifact writes
    /// field by field, its long lists side by side ([`Encoded::list`]); the bytes are the same.
    fn encode_body(&self, out: &mut Encoded) {
        out.value(self);
    }
}

/// An artifact's MessagePack bytes in pieces, in order: joined, they are what `rmp_serde::to_vec`
/// writes. They are hashed and written as they are, never joined.
#[derive(Clone, Debug, Default)]
pub struct Encoded {
    parts: Vec<Vec<u8>>,
}

impl Encoded {
    /// The piece later bytes go onto.
    fn tail(&mut self) -> &mut Vec<u8> {
        if self.parts.is_empty() {
            self.parts.push(Vec::new());
        }
        self.parts.last_mut().expect("a piece was just added")
    }

    /// `value`'s bytes, after those written.
    pub fn value<T: Serialize + ?Sized>(&mut self, value: &T) {
        rmp_serde::encode::write(self.tail(), value).expect("artifacts serialise");
    }

    /// An array's length (a struct's field count, a list's length), as a value's bytes would start.
    pub fn array_len(&mut self, len: usize) {
        let len = u32::try_from(len).expect("a list has at most 2^32 - 1 items");
        rmp::encode::write_array_len(self.tail(), len).expect("a Vec takes every write");
    }

    /// A list, as `value` writes it, its items encoded side by side in up to 64 runs.
    pub fn list<T: Serialize + Sync>(&mut self, items: &[T]) {
        use rayon::prelude::*;
        self.array_len(items.len());
        let run = items.len().div_ceil(64).max(1);
        let runs: Vec<Vec<u8>> = items
            .par_chunks(run)
            .map(|items| {
                let mut out = Vec::new();
                for item in items {
                    rmp_serde::encode::write(&mut out, item).expect("artifacts serialise");
                }
                out
            })
            .collect();
        self.parts.extend(runs);
        self.parts.push(Vec::new());
    }

    /// The pieces, in order.
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> {
        self.parts.iter().map(Vec::as_slice)
    }

    /// How many bytes the pieces hold.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The content hash of the bytes joined.
    pub fn hash(&self) -> ContentHash {
        let mut h = blake3::Hasher::new();
        for part in self.parts() {
            h.update(part);
        }
        ContentHash(*h.finalize().as_bytes())
    }

    /// The bytes joined, for a reader that needs them in one piece.
    pub fn joined(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

impl From<Vec<u8>> for Encoded {
    fn from(bytes: Vec<u8>) -> Encoded {
        Encoded { parts: vec![bytes] }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {}", .path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    File(#[from] files::FileError),
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

/// Encodes an artifact with its header: canonical bytes (struct fields in order, no maps with unordered
/// keys), a MessagePack array of the two.
pub fn encode<A: Artifact>(artifact: &A) -> Encoded {
    let header = ArtifactHeader {
        kind: A::KIND.to_string(),
        schema: A::SCHEMA,
        producer: format!("ipu-codegen {COMPILER_VERSION}"),
    };
    let mut out = Encoded::default();
    out.array_len(2);
    out.value(&header);
    artifact.encode_body(&mut out);
    out
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

/// The header of stored bytes, when they have one: read from their first bytes alone (an artifact is
/// a MessagePack array of two, the header first), so a prefix of [`HEADER_BYTES`] will do.
pub fn header(bytes: &[u8]) -> Option<ArtifactHeader> {
    let rest = bytes.strip_prefix(&[0x92])?;
    ArtifactHeader::deserialize(&mut rmp_serde::Deserializer::from_read_ref(rest)).ok()
}

/// Enough of an artifact's bytes to hold its header.
pub const HEADER_BYTES: usize = 4096;

/// A store object, as the store reads it: at most a package's size and more.
const OBJECT: files::Kind = files::Kind {
    what: "store object",
    limit: 4 << 30,
    magic: b"",
    format: "a store object",
};

/// An action entry: one line of JSON.
const ENTRY: files::Kind = files::Kind {
    what: "action entry",
    limit: 1 << 20,
    magic: b"",
    format: "an action entry",
};

/// What an action's output must be: the action (a phase's name, or `schedule`), and the kind and
/// schema of the artifact it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect<'a> {
    pub action: &'a str,
    pub kind: &'a str,
    pub schema: u32,
}

impl<'a> Expect<'a> {
    /// An action whose output is an `A`.
    pub fn of<A: Artifact>(action: &'a str) -> Expect<'a> {
        Expect {
            action,
            kind: A::KIND,
            schema: A::SCHEMA,
        }
    }
}

/// An action entry as stored: one line of JSON.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionEntry {
    pub key: ContentHash,
    pub action: String,
    pub kind: String,
    pub schema: u32,
    pub output: ContentHash,
    pub check: ContentHash,
}

impl ActionEntry {
    pub fn new(key: &ContentHash, expect: Expect, output: &ContentHash) -> ActionEntry {
        let mut entry = ActionEntry {
            key: *key,
            action: expect.action.to_string(),
            kind: expect.kind.to_string(),
            schema: expect.schema,
            output: *output,
            check: ContentHash([0; 32]),
        };
        entry.check = entry.sum();
        entry
    }

    fn sum(&self) -> ContentHash {
        let mut h = blake3::Hasher::new_derive_key(ENTRY_CONTEXT);
        for field in [
            &self.key.0[..],
            self.action.as_bytes(),
            self.kind.as_bytes(),
            &self.schema.to_le_bytes(),
            &self.output.0,
        ] {
            h.update(&(field.len() as u64).to_le_bytes());
            h.update(field);
        }
        ContentHash(*h.finalize().as_bytes())
    }

    /// Parses an entry file found under `key`; why it cannot be used, if it cannot.
    pub fn parse(bytes: &[u8], key: &ContentHash) -> Result<ActionEntry, String> {
        let entry: ActionEntry =
            serde_json::from_slice(bytes).map_err(|e| format!("not an action entry: {e}"))?;
        if entry.check != entry.sum() {
            return Err("its check does not match its fields".to_string());
        }
        if entry.key != *key {
            return Err(format!(
                "it is the entry of key {}, filed under another key",
                entry.key.short()
            ));
        }
        Ok(entry)
    }

    /// Why this entry does not answer `expect`, if it does not.
    fn mismatch(&self, expect: Expect) -> Option<String> {
        (self.action != expect.action || self.kind != expect.kind || self.schema != expect.schema)
            .then(|| {
                format!(
                    "it names a {} schema {} output of {}, where {} schema {} of {} was asked for",
                    self.kind, self.schema, self.action, expect.kind, expect.schema, expect.action
                )
            })
    }

    /// Why the object this entry names, whose header is `found`, is not the kind and schema the
    /// entry says, if it is not.
    fn wrong_object(&self, found: Option<&ArtifactHeader>) -> Option<String> {
        match found {
            Some(h) if h.kind == self.kind && h.schema == self.schema => None,
            _ => Some(format!(
                "it names a {} schema {} output, and object {} holds {}",
                self.kind,
                self.schema,
                self.output.short(),
                found.map_or("no artifact".to_string(), |h| format!(
                    "{} schema {}",
                    h.kind, h.schema
                ))
            )),
        }
    }
}

/// Bytes (in pieces) with their content hash, hashed once: what [`Store::put_object`] writes,
/// shareable between threads.
#[derive(Clone)]
pub struct Object {
    hash: ContentHash,
    bytes: std::sync::Arc<Encoded>,
}

impl Object {
    pub fn new(bytes: impl Into<Encoded>) -> Object {
        let bytes = bytes.into();
        Object {
            hash: bytes.hash(),
            bytes: std::sync::Arc::new(bytes),
        }
    }
    pub fn hash(&self) -> ContentHash {
        self.hash
    }
    pub fn bytes(&self) -> &Encoded {
        &self.bytes
    }
}

/// A level of the store: the local folder, or the shared remote cache behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    Local,
    Remote,
}

impl Level {
    /// Its name in summaries and records: `local`, `remote`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Local => "local",
            Level::Remote => "remote",
        }
    }
}

/// An action's output as a lookup found it: its content hash, now in the local folder, and the
/// level that answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub output: ContentHash,
    pub level: Level,
}

/// Hits and misses of lookups at one level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    pub hits: u64,
    pub misses: u64,
}

/// Hits and misses of lookups per level: the local folder's, and the remote level's when one was
/// read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tally {
    pub local: Counts,
    pub remote: Option<Counts>,
}

impl Tally {
    /// Counts one lookup over `levels` (in the order it read them) that `found` answered: a miss
    /// at every level before, a hit there; a miss at every level when none did.
    pub fn count(&mut self, levels: &[Level], found: Option<Level>) {
        for &level in levels {
            let counts = match level {
                Level::Local => &mut self.local,
                Level::Remote => self.remote.get_or_insert_default(),
            };
            if Some(level) == found {
                counts.hits += 1;
                return;
            }
            counts.misses += 1;
        }
    }
}

/// The store a build reads and writes, whatever its levels: the local folder alone
/// ([`LocalStore`]), or the local folder in front of a shared remote cache ([`TwoLevel`]).
///
/// Contract: every object a build reads comes from the local folder ([`Store::get`]); a lookup that
/// another level answers has put the output, checked, into the local folder before it returns.
/// Writes reach the local folder before anything else, and a failure there is an error.
pub trait Store: Sync {
    /// The local folder.
    fn local(&self) -> &LocalStore;

    /// The levels a lookup reads, in the order it reads them.
    fn levels(&self) -> &[Level];

    /// The output recorded for action `key`, when some level holds a usable entry naming an intact
    /// object of the kind and schema `expect` asks for; anything else is a miss.
    fn lookup(&self, key: &ContentHash, expect: Expect) -> Result<Option<Found>, StoreError>;

    /// Stores an object under its hash.
    fn put_object(&self, object: &Object) -> Result<(), StoreError>;

    /// Records `output`, an object already put, as the result of action `key`.
    fn record(
        &self,
        key: &ContentHash,
        expect: Expect,
        output: &ContentHash,
    ) -> Result<(), StoreError>;

    /// Reads an object from the local folder, re-hashing it; a damaged object is evicted and reads
    /// as `None`.
    fn get(&self, hash: &ContentHash) -> Result<Option<Vec<u8>>, StoreError> {
        self.local().get(hash)
    }
}

mod levels;
mod local;
mod maintain;
pub mod reapi;
mod remote;
pub use levels::TwoLevel;
pub use local::LocalStore;
pub use maintain::{Damage, Gc, Health};
pub use remote::{RemoteCache, RemoteError, RemoteOptions};

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

#[cfg(test)]
mod tests {
    use super::ContentHash;

    #[test]
    fn a_hash_has_one_spelling_64_lowercase_hex_digits() {
        let h = ContentHash::of(b"ipu");
        assert_eq!(ContentHash::parse(&h.hex()), Some(h));
        assert_eq!(h.hex(), blake3::hash(b"ipu").to_hex().as_str());
        for bad in [
            h.hex().to_uppercase(),
            h.hex()[..63].to_string(),
            format!("{}0", h.hex()),
            format!("{}g", &h.hex()[..63]),
            String::new(),
        ] {
            assert_eq!(ContentHash::parse(&bad), None, "{bad:?}");
        }
    }
}
