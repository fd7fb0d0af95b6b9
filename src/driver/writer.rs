//! A build's writes, done on one background thread so that the next phase computes while the last
//! one's output reaches the disk.
//!
//! Contract: writes happen in the order they are asked for, which is the order a synchronous build
//! would make them: an object before the action entry naming it, a stage record after the output it
//! names, `model.ipuexe` after its package object and its record. Only its bytes go ahead: they are
//! written to its temp file on a thread of their own, beside the package object (the two largest
//! files of a build), and take the name only once every write asked for before has landed. The
//! first failed write stops the rest (a `model.ipuexe` begun then never takes its name), so nothing
//! written names what was not, and is returned by [`Writer::finish`]. A build reads nothing it has
//! queued: what it just produced it holds in memory, and a build that runs again from
//! `select_finalist` (another finalist tried) first waits for every queued write to land
//! ([`Writer::landed`]), since it reads the outputs it carries from the store. (`lower_exchanges` stores the schedules it reuses
//! across builds itself, as it makes them: a cache that no action entry or record names.)

use super::records::prepare_if_changed;
use super::{BuildError, LOG_TARGET, write_if_changed};
use crate::files::Prepared;
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
    /// `model.ipuexe` from the package object's bytes, unless the file holds them already: written
    /// to its temp file at once, beside the writes asked for after this one.
    PackageBegin { path: PathBuf, body: Object },
    /// The `model.ipuexe` begun last takes its name.
    Package { path: PathBuf, tiles: u32 },
    /// Answers once every write asked for before it has landed.
    Landed(mpsc::Sender<()>),
}

/// The `model.ipuexe` being written beside the other writes.
type Begun = std::thread::JoinHandle<Result<Option<Prepared>, BuildError>>;

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
            let mut begun: Option<Begun> = None;
            let mut done = Ok(());
            for write in writes {
                done = perform(store, write, &mut begun);
                if done.is_err() {
                    flag.store(true, Ordering::Relaxed);
                    break;
                }
            }
            // A package begun and never named: its temp file goes.
            if let Some(begun) = begun {
                let _ = begun.join();
            }
            done
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

    /// Waits until every write queued so far has landed, or the writes have stopped on a failure
    /// (then the queue drops the question unanswered).
    pub fn landed(&self) {
        let (answer, wait) = mpsc::channel();
        self.push(Write::Landed(answer));
        let _ = wait.recv();
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

fn perform(store: &dyn Store, write: Write, begun: &mut Option<Begun>) -> Result<(), BuildError> {
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
        Write::PackageBegin { path, body } => {
            *begun = Some(std::thread::spawn(move || {
                let header = ipuexe_header(body.hash());
                let parts: Vec<&[u8]> = std::iter::once(&header[..])
                    .chain(body.bytes().parts())
                    .collect();
                prepare_if_changed(&path, &parts)
            }));
        }
        Write::Package { path, tiles } => {
            if let Some(begun) = begun.take() {
                name_package(begun, &path, tiles)?;
            }
        }
        Write::Landed(answer) => {
            let _ = answer.send(());
        }
    }
    Ok(())
}

/// Waits for the `model.ipuexe` begun and gives it its name.
fn name_package(begun: Begun, path: &std::path::Path, tiles: u32) -> Result<(), BuildError> {
    let prepared = begun
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
    if let Some(prepared) = prepared {
        prepared.persist()?;
        tracing::info!(target: LOG_TARGET, tiles, path = %path.display(), "application package written");
    }
    Ok(())
}
