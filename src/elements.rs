//! Element types and rectangles: the vocabulary of 2-D values that the IR, the ISA and the target share.
//! It depends on nothing in the crate.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F16,
    F32,
    /// Integers (token ids, masks): host values only, never on the device.
    I64,
}

impl DType {
    pub fn bytes(self) -> u32 {
        match self {
            DType::F16 => 2,
            DType::F32 => 4,
            DType::I64 => 8,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::I64 => "i64",
        })
    }
}

/// A rectangle `[row0, row1) x [col0, col1)` of a 2-D value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Rect {
    pub row0: u32,
    pub row1: u32,
    pub col0: u32,
    pub col1: u32,
}

impl Rect {
    pub fn new(row0: u32, row1: u32, col0: u32, col1: u32) -> Rect {
        Rect {
            row0,
            row1,
            col0,
            col1,
        }
    }
    pub fn rows(&self) -> u32 {
        self.row1 - self.row0
    }
    pub fn cols(&self) -> u32 {
        self.col1 - self.col0
    }
    pub fn elements(&self) -> u64 {
        u64::from(self.rows()) * u64::from(self.cols())
    }
    pub fn is_empty(&self) -> bool {
        self.row0 >= self.row1 || self.col0 >= self.col1
    }
    pub fn intersect(&self, other: &Rect) -> Option<Rect> {
        let r = Rect::new(
            self.row0.max(other.row0),
            self.row1.min(other.row1),
            self.col0.max(other.col0),
            self.col1.min(other.col1),
        );
        (!r.is_empty()).then_some(r)
    }
    pub fn contains(&self, other: &Rect) -> bool {
        other.row0 >= self.row0
            && other.row1 <= self.row1
            && other.col0 >= self.col0
            && other.col1 <= self.col1
    }
}

impl fmt::Display for Rect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}..{}, {}..{}]",
            self.row0, self.row1, self.col0, self.col1
        )
    }
}
