//! Artifacts with their type erased, as the phase table passes them.
//!
//! Contract: a build decodes each artifact from the store at most once ([`Decoded`]), hands back the
//! type asked for, and lets it go once no phase left to run reads it; the phase table's
//! `PhaseArtifacts` decides which of them a phase may see. A phase's result leaves its adapter as an
//! [`Output`]: its store bytes (header first), its value, and the entries it adds to the store beside
//! its output (`lower_exchanges`' schedules), which the driver's writer stores with it.

use super::BuildError;
use crate::store::{self, Artifact, ArtifactKind, ContentHash, Encoded, Expect, Object, Store};
use std::any::Any;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// The graph is the import's output; the phases read it like any other artifact.
/// What a phase's adapters return when they fail: the phase's own error, or a [`BuildError`] from
/// reading their artifacts; its message passes through unchanged.
pub type PhaseError = Box<dyn std::error::Error + Send + Sync>;

/// A phase's result: the artifact's store bytes and its value.
pub struct Output {
    pub(super) kind: ArtifactKind,
    pub(super) schema: u32,
    pub(super) bytes: Encoded,
    pub(super) value: Rc<dyn Any>,
    /// Entries beside the output: each action key with what its object is and the object's bytes.
    pub(super) entries: Vec<(ContentHash, Expect<'static>, Object)>,
}

impl Output {
    pub fn of<A: Artifact + 'static>(artifact: A) -> Output {
        Output {
            kind: ArtifactKind::of::<A>(),
            schema: A::SCHEMA,
            bytes: store::encode(&artifact),
            value: Rc::new(artifact),
            entries: Vec::new(),
        }
    }

    /// The output with an entry beside it: `key` naming `object`, which `expect` describes.
    pub fn with_entry(
        mut self,
        key: ContentHash,
        expect: Expect<'static>,
        object: Object,
    ) -> Output {
        self.entries.push((key, expect, object));
        self
    }

    /// The kind and schema version the artifact was encoded with.
    pub fn kind(&self) -> (ArtifactKind, u32) {
        (self.kind, self.schema)
    }
}

/// Decoded artifacts by content hash, so a build decodes each at most once.
#[derive(Default)]
pub struct Decoded(RefCell<BTreeMap<ContentHash, Rc<dyn Any>>>);

impl Decoded {
    pub fn insert(&self, hash: ContentHash, value: Rc<dyn Any>) {
        self.0.borrow_mut().insert(hash, value);
    }

    /// Lets go of every decoded artifact but those under `kept`.
    pub fn retain(&self, kept: &BTreeSet<ContentHash>) {
        self.0.borrow_mut().retain(|hash, _| kept.contains(hash));
    }

    /// The artifact stored under `hash`, decoded as an `A`.
    pub fn get<A: Artifact + 'static>(
        &self,
        store: &dyn Store,
        hash: &ContentHash,
    ) -> Result<Rc<A>, BuildError> {
        let known = self.0.borrow().get(hash).cloned();
        if let Some(v) = known {
            return v.downcast::<A>().map_err(|_| BuildError::WrongType {
                hash: *hash,
                kind: A::KIND,
            });
        }
        let bytes = store.get(hash)?.ok_or_else(|| BuildError::MissingObject {
            kind: A::KIND,
            hash: *hash,
            store: store.local().root().to_path_buf(),
        })?;
        let value: Rc<A> = Rc::new(store::decode(&bytes, hash)?);
        self.insert(*hash, value.clone());
        Ok(value)
    }
}
