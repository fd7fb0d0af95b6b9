//! Reading an `execution.ipuprofile`: [`check`], the consistency a profile must have before `report`
//! reads it, and the profile's file form. What `report` shows lives in the submodules: the summary
//! table and its JSON ([`summary`]), the HTML page with a tile's memory map ([`page`]) and its heat
//! maps with their colour scales (`heat`), the Chrome
//! trace-event JSON ([`trace`]) and the comparison of two runs ([`compare`]); all are pure functions
//! from profiles (and a package, for the memory map) to text, which never panic on a crafted profile.
//!
//! `execution.ipuprofile` checks itself as `model.ipuexe` does: a magic, the body's length and blake3,
//! then the body, the profile's store bytes (its kind and schema). [`write_profile`] makes it and
//! [`read_profile`] refuses a wrong magic, a file cut short or padded and a body that does not match
//! its hash before decoding it, on any bytes without a panic.

pub mod compare;
mod heat;
pub mod page;
pub mod summary;
pub mod trace;

pub use compare::Comparison;
pub use page::{MemoryMap, html};
pub use summary::{FURTHEST, Summary, steps_furthest_off};
pub use trace::trace;

use crate::device::Execution;
use crate::store::{ContentHash, StoreError};

/// The profile as the store encodes it: the body of `execution.ipuprofile`. Schema 6: each step names
/// the graph operations it serves; since 5, each step's sync, executed and estimated.
impl crate::store::Artifact for Execution {
    const KIND: &'static str = "profile";
    const SCHEMA: u32 = 6;
}

/// `execution.ipuprofile`: magic, body length (u64, little-endian), body blake3, then the body.
pub const PROFILE_MAGIC: &[u8; 8] = b"IPUPROF\x01";

/// The bytes before the body.
const PROFILE_HEADER: usize = 8 + 8 + 32;

/// The file form of a profile.
pub fn write_profile(e: &Execution) -> Vec<u8> {
    let body = crate::store::encode(e);
    let mut out = Vec::with_capacity(PROFILE_HEADER + body.len());
    out.extend_from_slice(PROFILE_MAGIC);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&body.hash().0);
    body.parts().for_each(|part| out.extend_from_slice(part));
    out
}

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("not an execution profile (bad magic)")]
    Magic,
    #[error("execution profile is truncated: {have} of {want} bytes")]
    Truncated { have: u64, want: u64 },
    #[error("execution profile has {extra} bytes past its end")]
    Padded { extra: u64 },
    #[error("execution profile is damaged: its body does not match the hash in its header")]
    Hash,
    #[error("execution profile: {0}")]
    Decode(#[from] StoreError),
}

/// The profile a file holds, once its magic, length and hash check.
pub fn read_profile(bytes: &[u8]) -> Result<Execution, ProfileError> {
    let have = bytes.len() as u64;
    let truncated = || ProfileError::Truncated {
        have,
        want: PROFILE_HEADER as u64,
    };
    let Some(rest) = bytes.strip_prefix(PROFILE_MAGIC.as_slice()) else {
        let cut_short = PROFILE_MAGIC.starts_with(bytes);
        return Err(if cut_short {
            truncated()
        } else {
            ProfileError::Magic
        });
    };
    let (length, rest) = rest.split_first_chunk::<8>().ok_or_else(truncated)?;
    let (hash, body) = rest.split_first_chunk::<32>().ok_or_else(truncated)?;
    let want = u64::from_le_bytes(*length).saturating_add(PROFILE_HEADER as u64);
    if have < want {
        return Err(ProfileError::Truncated { have, want });
    }
    if have > want {
        return Err(ProfileError::Padded { extra: have - want });
    }
    let body_hash = ContentHash::of(body);
    if body_hash.0 != *hash {
        return Err(ProfileError::Hash);
    }
    Ok(crate::store::decode(body, &body_hash)?)
}

/// What is inconsistent in a profile, one line each: a package not named by its hash, a clock or
/// column size of zero, a superstep without a figure for every tile, a tile busier than its
/// superstep, or totals that are not the sum of the supersteps and syncs. `report` refuses a profile
/// with any.
pub fn check(e: &Execution) -> Vec<String> {
    let mut errors = Vec::new();
    let tiles = e.memory.len();
    if ContentHash::parse(&e.package).is_none() {
        errors.push(format!("package {:?} is not a blake3 hash", e.package));
    }
    if e.clock_khz == 0 {
        errors.push("clock_khz is 0".to_string());
    }
    if e.tiles_per_column == 0 || tiles == 0 {
        errors.push(format!("{tiles} tiles, {} a column", e.tiles_per_column));
    }
    for (i, s) in e.steps.iter().enumerate() {
        if s.tile_busy.len() != tiles {
            errors.push(format!(
                "step{i}: {} busy figures for {tiles} tiles",
                s.tile_busy.len()
            ));
        }
        if !s.tile_estimates.is_empty() && s.tile_estimates.len() != tiles {
            errors.push(format!(
                "step{i}: {} estimates for {tiles} tiles",
                s.tile_estimates.len()
            ));
        }
        if let Some(&most) = s.tile_busy.iter().max()
            && u64::from(most) > s.cycles
        {
            errors.push(format!(
                "step{i}: a tile busy {most} cycles in a step of {}",
                s.cycles
            ));
        }
    }
    let syncs = e
        .steps
        .iter()
        .try_fold(0u64, |sum, s| sum.checked_add(s.sync_cycles));
    if syncs != Some(e.sync_cycles) {
        errors.push(format!(
            "{} sync cycles are not the sum of the steps' syncs",
            e.sync_cycles
        ));
    }
    let steps = e
        .steps
        .iter()
        .try_fold(0u64, |sum, s| sum.checked_add(s.cycles))
        .unwrap_or(u64::MAX);
    if steps.checked_add(e.sync_cycles) != Some(e.cycles) {
        errors.push(format!(
            "{} cycles are not the supersteps' {steps} and the syncs' {}",
            e.cycles, e.sync_cycles
        ));
    }
    if e.minimum_tile_cycles > e.cycles {
        errors.push(format!(
            "the busiest tile's {} cycles exceed the run's {}",
            e.minimum_tile_cycles, e.cycles
        ));
    }
    errors
}

#[cfg(test)]
mod tests;
