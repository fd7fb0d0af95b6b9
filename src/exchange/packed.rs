//! The stored form of a schedule's pieces: one byte string of little-endian columns, so that reading a
//! stored schedule back is little more than a copy.
//!
//! Layout, for `n` pieces of which `m` name a destination range: `n` as a u32; the columns `start`,
//! `transfer`, `word` and `words`, `n` u32s each; one flag byte per piece ([`WIDE`], [`RANGE`]); then
//! the `m` destination ranges `(a, b)` as pairs of u32s, in piece order. Reading checks the length and
//! the flags: damaged bytes are an error, never a panic.

use super::Piece;
use serde::de::Error as _;
use serde::{Deserializer, Serializer};
use std::borrow::Cow;

/// Flag bit: the piece is wide.
const WIDE: u8 = 1;
/// Flag bit: the piece names a destination range (`destinations: Some`).
const RANGE: u8 = 2;

/// The number of u32 columns.
const COLUMNS: usize = 4;

pub fn serialize<S: Serializer>(pieces: &[Piece], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bytes(&pack(pieces))
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Piece>, D::Error> {
    let bytes: Cow<[u8]> = serde_bytes::deserialize(d)?;
    unpack(&bytes).map_err(|e| D::Error::custom(format!("schedule pieces: {e}")))
}

/// The packed bytes of `pieces`.
pub fn pack(pieces: &[Piece]) -> Vec<u8> {
    let n = u32::try_from(pieces.len()).expect("fewer than 2^32 pieces");
    let ranges = pieces.iter().filter(|p| p.destinations.is_some()).count();
    let mut bytes = Vec::with_capacity(4 + (4 * COLUMNS + 1) * pieces.len() + 8 * ranges);
    bytes.extend(n.to_le_bytes());
    let columns: [fn(&Piece) -> u32; COLUMNS] =
        [|p| p.start, |p| p.transfer, |p| p.word, |p| p.words];
    for column in columns {
        bytes.extend(pieces.iter().flat_map(|p| column(p).to_le_bytes()));
    }
    bytes.extend(pieces.iter().map(|p| {
        let range = if p.destinations.is_some() { RANGE } else { 0 };
        range | if p.wide { WIDE } else { 0 }
    }));
    for (a, b) in pieces.iter().filter_map(|p| p.destinations) {
        bytes.extend(a.to_le_bytes());
        bytes.extend(b.to_le_bytes());
    }
    bytes
}

/// The pieces packed in `bytes`, or what is wrong with them.
pub fn unpack(bytes: &[u8]) -> Result<Vec<Piece>, String> {
    let Some((&n, rest)) = bytes.split_first_chunk::<4>() else {
        return Err(format!(
            "{} bytes, too short for a piece count",
            bytes.len()
        ));
    };
    let n = u32::from_le_bytes(n) as usize;
    if rest.len() / (4 * COLUMNS + 1) < n {
        return Err(format!("{n} pieces in {} bytes", bytes.len()));
    }
    let (columns, rest) = rest.split_at(4 * COLUMNS * n);
    let (flags, ranges) = rest.split_at(n);
    if let Some(f) = flags.iter().find(|&&f| f & !(WIDE | RANGE) != 0) {
        return Err(format!("unknown piece flags {f:#04x}"));
    }
    let (ranges, tail) = ranges.as_chunks::<8>();
    let named = flags.iter().filter(|&&f| f & RANGE != 0).count();
    if ranges.len() != named || !tail.is_empty() {
        return Err(format!(
            "{named} destination ranges expected, {} bytes found",
            8 * ranges.len() + tail.len()
        ));
    }
    let (words, _) = columns.as_chunks::<4>();
    let column = |k: usize| {
        words[k * n..(k + 1) * n]
            .iter()
            .map(|&w| u32::from_le_bytes(w))
    };
    // A range's `a` is the low half of its little-endian u64, `b` the high half.
    let mut ranges = ranges.iter().map(|&r| {
        let r = u64::from_le_bytes(r);
        (r as u32, (r >> 32) as u32)
    });
    let pieces = column(0)
        .zip(column(1))
        .zip(column(2).zip(column(3)))
        .zip(flags)
        .map(|(((start, transfer), (word, words)), &f)| Piece {
            start,
            transfer,
            destinations: if f & RANGE != 0 { ranges.next() } else { None },
            word,
            words,
            wide: f & WIDE != 0,
        })
        .collect();
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces() -> Vec<Piece> {
        (0..5)
            .map(|i| Piece {
                start: 3 * i,
                transfer: 7 - i,
                destinations: (i % 2 == 1).then_some((i, i + 2)),
                word: 10 * i,
                words: u32::MAX - i,
                wide: i % 3 == 0,
            })
            .collect()
    }

    #[test]
    fn round_trips() {
        for n in [0, 1, 5] {
            let pieces = &pieces()[..n];
            assert_eq!(unpack(&pack(pieces)).unwrap(), pieces);
        }
    }

    #[test]
    fn damaged_bytes_are_errors() {
        let bytes = pack(&pieces());
        // Every truncation, every extension, and every byte garbled.
        for len in 0..bytes.len() {
            assert!(unpack(&bytes[..len]).is_err(), "truncated to {len}");
        }
        assert!(unpack(&[bytes.as_slice(), &[0]].concat()).is_err());
        for i in 0..bytes.len() {
            for x in [0x01, 0x80, 0xff] {
                let mut garbled = bytes.clone();
                garbled[i] ^= x;
                // A garbled value may still read as pieces; it must never panic.
                let _ = unpack(&garbled);
            }
        }
        // A count too large for the bytes.
        let mut huge = bytes.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(unpack(&huge).is_err());
    }

    #[test]
    fn a_damaged_stored_schedule_is_an_error() {
        use crate::exchange::Schedule;
        use crate::store::{ContentHash, decode, encode};
        let schedule = Schedule {
            pieces: pieces(),
            horizon: 40,
            lower_bound: 30,
            kind: "test".to_string(),
            initial_horizon: 50,
        };
        let bytes = encode(&schedule).joined();
        let hash = ContentHash::of(&bytes);
        assert_eq!(decode::<Schedule>(&bytes, &hash).unwrap(), schedule);
        // A garbled piece count, and bytes cut inside the pieces.
        let blob = pack(&schedule.pieces);
        let at = bytes.windows(blob.len()).position(|w| w == blob).unwrap();
        let mut garbled = bytes.clone();
        garbled[at] ^= 0x40;
        let e = decode::<Schedule>(&garbled, &hash).unwrap_err().to_string();
        assert!(e.contains("schedule pieces"), "{e}");
        assert!(decode::<Schedule>(&bytes[..at + 10], &hash).is_err());
    }
}
