//! The two-level store: the local folder in front of a shared remote cache ([`RemoteCache`]).
//!
//! Contract:
//! - A lookup reads the local folder, then (unless `recache`) the remote level. With `recache`, an
//!   output the local folder holds is sent again, overwriting the remote level's blob and entry.
//! - A remote entry is an REAPI `ActionResult` naming one output file, `<kind>/<blake3 hex>`, by its
//!   `/cas/` digest. Nothing from the remote level enters the local folder unchecked: the entry must decode and name
//!   one output of the kind asked for; its blob must have the digest's size and SHA-256, the blake3
//!   hash the entry names, and a header of the kind and schema asked for. Only then are the object
//!   and a local entry written, and the lookup answers. Any failed check, a blob missing behind an
//!   entry, a timeout or an HTTP error is a warning and a miss, never an error.
//! - Writes go to the local folder first (a failure there is an error), then, unless read-only, to
//!   the remote level: an object after a `HEAD` says the server lacks it (always, with `recache`),
//!   and an entry only after the object it names is there. A remote failure is a warning.
//! - A server that cannot be reached, or does not answer in time, is left alone for the rest of the
//!   process after one warning; a server that refuses an upload gets no more from it.

use super::reapi::{ActionResult, Digest, OutputFile};
use super::remote::{RemoteCache, RemoteError, RemoteOptions, Trouble, sha256};
use super::{
    ContentHash, ENTRY, Expect, Found, Level, LocalStore, Object, Store, StoreError, header,
};
use prost::Message as _;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The local folder, then a remote cache.
pub struct TwoLevel {
    local: LocalStore,
    remote: RemoteCache,
    read_only: bool,
    recache: bool,
    /// The server could not be reached: the rest of this process goes without it.
    down: AtomicBool,
    /// The server refused an upload: no more are tried.
    refused: AtomicBool,
    /// The digest of every object this process knows the server holds, by content hash.
    held: Mutex<BTreeMap<ContentHash, Digest>>,
}

impl TwoLevel {
    /// The local folder in front of the remote cache `options` describe.
    pub fn new(local: LocalStore, options: &RemoteOptions) -> Result<TwoLevel, RemoteError> {
        Ok(TwoLevel {
            local,
            remote: RemoteCache::new(options)?,
            read_only: options.read_only,
            recache: options.recache,
            down: AtomicBool::new(false),
            refused: AtomicBool::new(false),
            held: Mutex::new(BTreeMap::new()),
        })
    }

    fn uploading(&self) -> bool {
        !self.read_only
            && !self.down.load(Ordering::Relaxed)
            && !self.refused.load(Ordering::Relaxed)
    }

    /// Notes that the server cannot be reached; whether this is the first time (then it warns).
    fn unreachable(&self, doing: &str, why: &str) {
        if !self.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                remote = self.remote.base(),
                "remote cache unreachable while {doing} ({why}); this process goes on without it"
            );
        }
    }

    /// A failed read: a warning, and the lookup is a miss.
    fn read_failed(&self, doing: &str, trouble: Trouble) {
        match trouble {
            Trouble::Unreachable(why) => self.unreachable(doing, &why),
            trouble => tracing::warn!(
                remote = self.remote.base(),
                "remote cache: {doing}: {trouble}; taken as a miss"
            ),
        }
    }

    /// A failed upload: a warning; after a refusal, no more uploads.
    fn upload_failed(&self, doing: &str, trouble: Trouble) {
        match trouble {
            Trouble::Unreachable(why) => self.unreachable(doing, &why),
            Trouble::Status(..) if self.refused.swap(true, Ordering::Relaxed) => {}
            Trouble::Status(..) => tracing::warn!(
                remote = self.remote.base(),
                "remote cache refused {doing} ({trouble}); this process uploads nothing more"
            ),
            Trouble::Bad(why) => tracing::warn!(remote = self.remote.base(), "{why}"),
        }
    }

    /// The output the remote level records for `key`, checked, with its bytes and digest.
    fn fetch(
        &self,
        key: &ContentHash,
        expect: Expect,
    ) -> Result<Option<(ContentHash, Vec<u8>, Digest)>, Trouble> {
        let entry_url = self
            .remote
            .entry_url(&self.remote.entry_key(expect.action, key));
        let Some(bytes) = self.remote.get(&entry_url, ENTRY.limit)? else {
            return Ok(None);
        };
        let (output, digest) = named_output(&bytes, expect, self.remote.max_blob_bytes())
            .map_err(|why| Trouble::Bad(format!("entry {entry_url} {why}")))?;
        let blob_url = self.remote.blob_url(&digest.hash);
        let Some(blob) = self.remote.get(&blob_url, self.remote.max_blob_bytes())? else {
            return Err(Trouble::Bad(format!(
                "entry {entry_url} names {blob_url}, which the server does not hold"
            )));
        };
        check_blob(&blob, &output, &digest, expect)
            .map_err(|why| Trouble::Bad(format!("blob {blob_url} {why}")))?;
        Ok(Some((output, blob, digest)))
    }

    /// Sends an object to the server unless it holds it; its digest.
    fn send(&self, hash: &ContentHash, bytes: &[u8]) -> Result<Digest, Trouble> {
        if let Some(digest) = self.held.lock().expect("not poisoned").get(hash) {
            return Ok(digest.clone());
        }
        let limit = self.remote.max_blob_bytes();
        if bytes.len() as u64 > limit {
            return Err(Trouble::Bad(format!(
                "object {} has {} bytes, over the blob size limit of {limit}; it stays local",
                hash.short(),
                bytes.len()
            )));
        }
        let digest = Digest {
            hash: sha256(bytes),
            size_bytes: bytes.len() as i64,
        };
        let url = self.remote.blob_url(&digest.hash);
        if self.recache || !self.remote.has(&url)? {
            self.remote.put(&url, bytes)?;
        }
        self.held
            .lock()
            .expect("not poisoned")
            .insert(*hash, digest.clone());
        Ok(digest)
    }

    /// Sends the entry of action `key` to the server, after the object it names.
    fn upload_entry(
        &self,
        key: &ContentHash,
        expect: Expect,
        output: &ContentHash,
    ) -> Result<(), StoreError> {
        if !self.uploading() {
            return Ok(());
        }
        let known = self.held.lock().expect("not poisoned").get(output).cloned();
        let digest = match known {
            Some(digest) => digest,
            None => {
                let Some(bytes) = self.local.get(output)? else {
                    return Ok(());
                };
                match self.send(output, &bytes) {
                    Ok(digest) => digest,
                    Err(trouble) => {
                        self.upload_failed(
                            &format!("uploading object {}", output.short()),
                            trouble,
                        );
                        return Ok(());
                    }
                }
            }
        };
        let result = entry(expect, output, digest);
        let url = self
            .remote
            .entry_url(&self.remote.entry_key(expect.action, key));
        if let Err(trouble) = self.remote.put(&url, &result.encode_to_vec()) {
            self.upload_failed(
                &format!("uploading the entry of {} {}", expect.action, key.short()),
                trouble,
            );
        }
        Ok(())
    }
}

impl Store for TwoLevel {
    fn local(&self) -> &LocalStore {
        &self.local
    }

    fn levels(&self) -> &[Level] {
        if self.recache {
            &[Level::Local]
        } else {
            &[Level::Local, Level::Remote]
        }
    }

    fn lookup(&self, key: &ContentHash, expect: Expect) -> Result<Option<Found>, StoreError> {
        if let Some(found) = self.local.lookup(key, expect)? {
            if self.recache {
                // What this machine holds overwrites what the remote level has.
                self.upload_entry(key, expect, &found.output)?;
            }
            return Ok(Some(found));
        }
        if self.recache || self.down.load(Ordering::Relaxed) {
            return Ok(None);
        }
        match self.fetch(key, expect) {
            Ok(None) => Ok(None),
            Ok(Some((output, bytes, digest))) => {
                self.local.put_hashed(&output, &[&bytes])?;
                self.local.record(key, expect, &output)?;
                self.held
                    .lock()
                    .expect("not poisoned")
                    .insert(output, digest);
                Ok(Some(Found {
                    output,
                    level: Level::Remote,
                }))
            }
            Err(trouble) => {
                self.read_failed(
                    &format!("reading {} {}", expect.action, key.short()),
                    trouble,
                );
                Ok(None)
            }
        }
    }

    fn put_object(&self, object: &Object) -> Result<(), StoreError> {
        self.local.put_object(object)?;
        if self.uploading()
            && let Err(trouble) = self.send(&object.hash(), &object.bytes().joined())
        {
            self.upload_failed(
                &format!("uploading object {}", object.hash().short()),
                trouble,
            );
        }
        Ok(())
    }

    fn record(
        &self,
        key: &ContentHash,
        expect: Expect,
        output: &ContentHash,
    ) -> Result<(), StoreError> {
        self.local.record(key, expect, output)?;
        self.upload_entry(key, expect, output)
    }
}

/// The `/ac/` entry of an output of `expect`'s kind: one output file, `<kind>/<blake3 hex>`, with
/// the `/cas/` digest of its bytes.
fn entry(expect: Expect, output: &ContentHash, digest: Digest) -> ActionResult {
    ActionResult {
        output_files: vec![OutputFile {
            path: format!("{}/{}", expect.kind, output.hex()),
            digest: Some(digest),
            is_executable: false,
            contents: Vec::new(),
        }],
        exit_code: 0,
    }
}

/// The output an `/ac/` entry's bytes name for `expect`, with its blob's digest; why not, when they
/// are not such an entry or name a blob over `max_blob_bytes`.
fn named_output(
    bytes: &[u8],
    expect: Expect,
    max_blob_bytes: u64,
) -> Result<(ContentHash, Digest), String> {
    let result =
        ActionResult::decode(bytes).map_err(|e| format!("is not an REAPI ActionResult: {e}"))?;
    let [file] = &result.output_files[..] else {
        return Err(format!(
            "names {} output files, where one is expected",
            result.output_files.len()
        ));
    };
    let output = (file.path.strip_prefix(expect.kind))
        .and_then(|rest| rest.strip_prefix('/'))
        .and_then(ContentHash::parse)
        .ok_or_else(|| {
            format!(
                "names output {:?}, which is not a {} object",
                file.path, expect.kind
            )
        })?;
    let digest = file.digest.clone().unwrap_or_default();
    // A SHA-256 in hex is what a content hash is spelled as: 64 lowercase digits.
    let size = u64::try_from(digest.size_bytes)
        .ok()
        .filter(|_| ContentHash::parse(&digest.hash).is_some())
        .ok_or("names no valid SHA-256 digest")?;
    if size > max_blob_bytes {
        return Err(format!(
            "names a blob of {size} bytes, over the blob size limit of {max_blob_bytes}"
        ));
    }
    Ok((output, digest))
}

/// Why `blob` is not the output an entry names (`output`, by its blob's `digest`), of the kind and
/// schema `expect` asks for, if it is not.
fn check_blob(
    blob: &[u8],
    output: &ContentHash,
    digest: &Digest,
    expect: Expect,
) -> Result<(), String> {
    if i64::try_from(blob.len()) != Ok(digest.size_bytes) {
        return Err(format!(
            "has {} bytes, where its entry says {}",
            blob.len(),
            digest.size_bytes
        ));
    }
    if sha256(blob) != digest.hash {
        return Err("does not hash to its SHA-256 name".to_string());
    }
    if ContentHash::of(blob) != *output {
        return Err(format!(
            "does not hash to the blake3 hash {} its entry names",
            output.short()
        ));
    }
    match header(blob) {
        Some(h) if h.kind == expect.kind && h.schema == expect.schema => Ok(()),
        found => Err(format!(
            "holds {}, where {} schema {} was asked for",
            found.map_or("no artifact".to_string(), |h| format!(
                "{} schema {}",
                h.kind, h.schema
            )),
            expect.kind,
            expect.schema
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Artifact, encode};

    #[derive(serde::Serialize, serde::Deserialize)]
    struct Note(String);

    impl Artifact for Note {
        const KIND: &'static str = "note";
        const SCHEMA: u32 = 3;
    }

    const EXPECT: Expect = Expect {
        action: "write_note",
        kind: "note",
        schema: 3,
    };

    /// A note's bytes, its blake3 hash and its `/cas/` digest.
    fn note(text: &str) -> (Vec<u8>, ContentHash, Digest) {
        let bytes = encode(&Note(text.to_string())).joined();
        let digest = Digest {
            hash: sha256(&bytes),
            size_bytes: bytes.len() as i64,
        };
        let output = ContentHash::of(&bytes);
        (bytes, output, digest)
    }

    #[test]
    fn an_entry_decodes_as_an_action_result_whose_digest_names_the_blob() {
        let (bytes, output, digest) = note("remote");
        let payload = entry(EXPECT, &output, digest).encode_to_vec();
        let decoded = ActionResult::decode(&payload[..]).expect("an ActionResult");
        assert_eq!(decoded.exit_code, 0);
        let [file] = &decoded.output_files[..] else {
            panic!("{decoded:?}")
        };
        assert_eq!(file.path, format!("note/{}", ContentHash::of(&bytes).hex()));
        let named = file.digest.as_ref().expect("a digest");
        assert_eq!(named.hash, sha256(&bytes));
        assert_eq!(named.size_bytes, bytes.len() as i64);
        let (found, found_digest) = named_output(&payload, EXPECT, 1 << 20).expect("usable");
        assert_eq!((found, &found_digest), (output, named));
        assert_eq!(check_blob(&bytes, &found, &found_digest, EXPECT), Ok(()));
    }

    #[test]
    fn an_entry_that_is_not_one_for_the_kind_asked_for_is_refused() {
        let (bytes, output, digest) = note("remote");
        let good = entry(EXPECT, &output, digest.clone());
        let mut two = good.clone();
        two.output_files.push(two.output_files[0].clone());
        let mut other_kind = good.clone();
        other_kind.output_files[0].path = format!("mid/{}", output.hex());
        let mut no_digest = good.clone();
        no_digest.output_files[0].digest = None;
        let mut upper = good.clone();
        upper.output_files[0].digest.as_mut().unwrap().hash = digest.hash.to_uppercase();
        let mut negative = good.clone();
        negative.output_files[0].digest.as_mut().unwrap().size_bytes = -1;
        for (result, says) in [
            (two, "names 2 output files"),
            (other_kind, "which is not a note object"),
            (no_digest, "no valid SHA-256 digest"),
            (upper, "no valid SHA-256 digest"),
            (negative, "no valid SHA-256 digest"),
        ] {
            let why = named_output(&result.encode_to_vec(), EXPECT, 1 << 20).unwrap_err();
            assert!(why.contains(says), "{says}: {why}");
        }
        let why = named_output(&good.encode_to_vec(), EXPECT, bytes.len() as u64 - 1).unwrap_err();
        assert!(why.contains("over the blob size limit"), "{why}");
        let why = named_output(b"\xff\xff\xff", EXPECT, 1 << 20).unwrap_err();
        assert!(why.contains("not an REAPI ActionResult"), "{why}");
    }

    #[test]
    fn a_blob_enters_only_with_its_size_sha256_blake3_kind_and_schema() {
        let (bytes, output, digest) = note("remote");
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let (other, other_output, other_digest) = note("other");
        let cases = [
            (
                &bytes[..bytes.len() - 1],
                &output,
                &digest,
                EXPECT,
                "where its entry says",
            ),
            (&flipped[..], &output, &digest, EXPECT, "SHA-256"),
            (&other[..], &output, &other_digest, EXPECT, "blake3"),
            (
                &other[..],
                &other_output,
                &other_digest,
                Expect {
                    schema: 4,
                    ..EXPECT
                },
                "holds note schema 3, where note schema 4",
            ),
        ];
        for (blob, output, digest, expect, says) in cases {
            let why = check_blob(blob, output, digest, expect).unwrap_err();
            assert!(why.contains(says), "{says}: {why}");
        }
    }
}
