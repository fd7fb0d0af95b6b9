//! Artifacts with their type erased, as the phase table passes them.
//!
//! Contract: a phase's adapters see its artifacts through [`PhaseArtifacts`], which decodes each from
//! the store at most once per build (through [`Decoded`]) and hands back the type the adapter asks
//! for. An adapter may read only the inputs its row of the table declares (the action key covers
//! exactly those); asking for any other artifact is an error, never a silent dependency. A phase's
//! result leaves its adapter as an [`Output`]: its store bytes (header first) and its value.

use super::BuildError;
use crate::pipeline::{ArtifactKind, Phase};
use crate::store::{self, Artifact, ContentHash, Store};
use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The graph is the import's output; the phases read it like any other artifact.
/// What a phase's adapters return when they fail: the phase's own error, or a [`BuildError`] from
/// reading their artifacts; its message passes through unchanged.
pub type PhaseError = Box<dyn std::error::Error + Send + Sync>;

/// A phase's result: the artifact's store bytes and its value.
pub struct Output {
    pub(super) kind: ArtifactKind,
    pub(super) schema: u32,
    pub(super) bytes: Vec<u8>,
    pub(super) value: Rc<dyn Any>,
}

impl Output {
    pub fn of<A: Artifact + 'static>(artifact: A) -> Output {
        Output {
            kind: ArtifactKind::of::<A>(),
            schema: A::SCHEMA,
            bytes: store::encode(&artifact),
            value: Rc::new(artifact),
        }
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

    /// The artifact stored under `hash`, decoded as an `A`.
    pub fn get<A: Artifact + 'static>(
        &self,
        store: &Store,
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
            store: store.root().to_path_buf(),
        })?;
        let value: Rc<A> = Rc::new(store::decode(&bytes, hash)?);
        self.insert(*hash, value.clone());
        Ok(value)
    }
}

/// The artifacts one phase sees: the build's outputs so far (its inputs, and its own output once it
/// has one), decoded on demand.
pub struct PhaseArtifacts<'a> {
    pub(super) phase: Phase,
    pub(super) outputs: &'a BTreeMap<ArtifactKind, ContentHash>,
    pub(super) store: &'a Store,
    pub(super) decoded: &'a Decoded,
}

impl PhaseArtifacts<'_> {
    /// The phase's input of type `A`.
    pub fn input<A: Artifact + 'static>(&self) -> Result<Rc<A>, BuildError> {
        let kind = ArtifactKind::of::<A>();
        if !self.phase.inputs().contains(&kind) {
            return Err(BuildError::Undeclared {
                phase: self.phase,
                kind,
            });
        }
        self.get(kind)
    }

    /// The phase's output, as an `A`.
    pub fn output<A: Artifact + 'static>(&self) -> Result<Rc<A>, BuildError> {
        let kind = ArtifactKind::of::<A>();
        if self.phase.output() != kind {
            return Err(BuildError::Undeclared {
                phase: self.phase,
                kind,
            });
        }
        self.get(kind)
    }

    fn get<A: Artifact + 'static>(&self, kind: ArtifactKind) -> Result<Rc<A>, BuildError> {
        let hash = self
            .outputs
            .get(&kind)
            .ok_or(BuildError::NoArtifact { kind })?;
        self.decoded.get::<A>(self.store, hash)
    }

    /// The store, for a phase that reuses results of earlier builds by their own keys
    /// (`lower_exchanges`' schedules).
    pub fn store(&self) -> &Store {
        self.store
    }
}
