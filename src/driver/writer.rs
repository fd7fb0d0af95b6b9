//! A build's writes, done on one background thread so that the next phase computes while the last
//! one's output reaches the disk.
//!
//! Contract: writes happen in the order they are asked for, which is the order a synchronous build
//! would make them: an object before the action entry naming it, a stage record after the output it
//! names. A fresh package object and `model.ipuexe` are one write, the two files written side by side
//! (they are the build's largest and its last, with nothing else left to compute). The first failed write stops the rest, so nothing
//! written names what was not, and is returned by [`Writer::finish`]. A build reads nothing it has
//! queued: what it just produced it holds in memory. (`lower_exchanges` stores the schedules it reuses
//! across builds itself, as it makes them: a cache that no action entry or record names.)

use super::{BuildError, LOG_TARGET, write_if_changed};
use crate::ir::ipuexe_header;
use crate::store::{ContentHash, Expect, Object, Store};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::{Scope, ScopedJoinHandle};

pub(super) enum Write {
    /// An artifact into the store.
    Object(Object),
    /// An action entry: `key` -> `output`, an output `expect` describes.
    Action {
        key: ContentHash,
        expect: Expect<'static>,
        output: ContentHash,
    },
    /// A stage record, unless the file holds these bytes already.
    Record { path: PathBuf, bytes: Vec<u8> },
    /// `model.ipuexe` from the package object's bytes, unless the file holds them already; with
    /// `store`, the object into the store at the same time, on a second thread.
    Package {
        path: PathBuf,
        body: Object,
        tiles: u32,
        store: bool,
    },
}

pub(super) struct Writer<'scope> {
    queue: mpsc::Sender<Write>,
    thread: ScopedJoinHandle<'scope, Result<(), BuildError>>,
    failed: Arc<AtomicBool>,
}

impl<'scope> Writer<'scope> {
    pub fn spawn<'env>(
        scope: &'scope Scope<'scope, 'env>,
        store: &'env dyn Store,
    ) -> Writer<'scope> {
        let (queue, writes) = mpsc::channel::<Write>();
        let failed = Arc::new(AtomicBool::new(false));
        let flag = failed.clone();
        let thread = scope.spawn(move || {
            for write in writes {
                perform(store, write).inspect_err(|_| flag.store(true, Ordering::Relaxed))?;
            }
            Ok(())
        });
        Writer {
            queue,
            thread,
            failed,
        }
    }

    /// Whether a write has failed: the build need not go on.
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Queues a write. After a failed write the queue is closed and this does nothing; the failure
    /// comes back from [`Writer::finish`].
    pub fn push(&self, write: Write) {
        let _ = self.queue.send(write);
    }

    /// Waits for every queued write; the first failure.
    pub fn finish(self) -> Result<(), BuildError> {
        drop(self.queue);
        match self.thread.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

fn perform(store: &dyn Store, write: Write) -> Result<(), BuildError> {
    match write {
        Write::Object(object) => store.put_object(&object)?,
        Write::Action {
            key,
            expect,
            output,
        } => store.record(&key, expect, &output)?,
        Write::Record { path, bytes } => {
            write_if_changed(&path, &[&bytes])?;
        }
        Write::Package {
            path,
            body,
            tiles,
            store: with_object,
        } => {
            let header = ipuexe_header(body.hash());
            let (stored, written) = std::thread::scope(|scope| {
                let stored = scope.spawn(|| match with_object {
                    true => store.put_object(&body),
                    false => Ok(()),
                });
                let written = write_if_changed(&path, &[&header, body.bytes()]);
                (stored.join(), written)
            });
            stored.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            if written? {
                tracing::info!(target: LOG_TARGET, tiles, path = %path.display(), "application package written");
            }
        }
    }
    Ok(())
}
