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
    levels: Vec<Level>,
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
        let levels = if options.recache {
            vec![Level::Local]
        } else {
            vec![Level::Local, Level::Remote]
        };
        Ok(TwoLevel {
            local,
            remote: RemoteCache::new(options)?,
            levels,
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
        let bad = |why: String| Trouble::Bad(format!("entry {entry_url} {why}"));
        let result = ActionResult::decode(&bytes[..])
            .map_err(|e| bad(format!("is not an REAPI ActionResult: {e}")))?;
        let [file] = &result.output_files[..] else {
            return Err(bad(format!(
                "names {} output files, where one is expected",
                result.output_files.len()
            )));
        };
        let output = (file.path.strip_prefix(expect.kind))
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(ContentHash::parse)
            .ok_or_else(|| {
                bad(format!(
                    "names output {:?}, which is not a {} object",
                    file.path, expect.kind
                ))
            })?;
        let digest = file.digest.clone().unwrap_or_default();
        let lowercase_hex =
            |s: &str| s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let size = u64::try_from(digest.size_bytes)
            .ok()
            .filter(|_| lowercase_hex(&digest.hash));
        let Some(size) = size else {
            return Err(bad("names no valid SHA-256 digest".to_string()));
        };
        if size > self.remote.max_blob_bytes() {
            return Err(bad(format!(
                "names a blob of {size} bytes, over the blob size limit of {}",
                self.remote.max_blob_bytes()
            )));
        }
        let blob_url = self.remote.blob_url(&digest.hash);
        let Some(blob) = self.remote.get(&blob_url, self.remote.max_blob_bytes())? else {
            return Err(bad(format!(
                "names {blob_url}, which the server does not hold"
            )));
        };
        let damaged = |why: String| Trouble::Bad(format!("blob {blob_url} {why}"));
        if blob.len() as u64 != size {
            return Err(damaged(format!(
                "has {} bytes, where its entry says {size}",
                blob.len()
            )));
        }
        if sha256(&blob) != digest.hash {
            return Err(damaged("does not hash to its SHA-256 name".to_string()));
        }
        if ContentHash::of(&blob) != output {
            return Err(damaged(format!(
                "does not hash to the blake3 hash {} its entry names",
                output.short()
            )));
        }
        match header(&blob) {
            Some(h) if h.kind == expect.kind && h.schema == expect.schema => {}
            found => {
                return Err(damaged(format!(
                    "holds {}, where {} schema {} was asked for",
                    found.map_or("no artifact".to_string(), |h| format!(
                        "{} schema {}",
                        h.kind, h.schema
                    )),
                    expect.kind,
                    expect.schema
                )));
            }
        }
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
        let result = ActionResult {
            output_files: vec![OutputFile {
                path: format!("{}/{}", expect.kind, output.hex()),
                digest: Some(digest),
                is_executable: false,
                contents: Vec::new(),
            }],
            exit_code: 0,
        };
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
        &self.levels
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
                self.local.put_hashed(&output, &bytes)?;
                self.local.write_entry(key, expect, &output)?;
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
            && let Err(trouble) = self.send(&object.hash(), object.bytes())
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
        self.local.write_entry(key, expect, output)?;
        self.upload_entry(key, expect, output)
    }
}
