//! Element types, rectangles and the element-wise and row-wise functions of the general vector
//! operations (unary, binary with the comparisons, reductions): the vocabulary of 2-D values that the IR, the ISA and the target share. It depends on
//! nothing in the crate.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F16,
    F32,
    /// Integers (token ids, masks): host values only, never on the device.
    I64,
    /// Booleans (ONNX `bool`: a boolean graph input, a comparison's result), held as f16 0.0 and
    /// 1.0 wherever the device holds them, so every device operation takes them as f16; only what
    /// the user binds and reads differs: `.npy` files of `|b1`.
    Bool,
}

impl DType {
    /// Bytes per element as the device holds it.
    pub fn bytes(self) -> u32 {
        match self {
            DType::F16 | DType::Bool => 2,
            DType::F32 => 4,
            DType::I64 => 8,
        }
    }

    /// Whether the device holds it as f16: f16 itself and booleans.
    pub fn held_as_f16(self) -> bool {
        matches!(self, DType::F16 | DType::Bool)
    }

    /// Whether the AMP may accumulate in it: f16 or f32.
    pub fn is_partials(self) -> bool {
        matches!(self, DType::F16 | DType::F32)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DType::F16 => "f16",
            DType::F32 => "f32",
            DType::I64 => "i64",
            DType::Bool => "bool",
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

/// A function of one element ([`crate::ir::OpKind::Unary`]).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnaryFn {
    Neg,
    Abs,
    Sqrt,
    Reciprocal,
    Exp,
    Erf,
    Tanh,
    Sigmoid,
    Relu,
    GeluErf,
    GeluTanh,
    /// 1 where `x` is NaN, else 0.
    IsNan,
    /// 1 where `x` is an infinity of either sign, else 0.
    IsInf,
    /// `x^exponent`.
    Pow {
        exponent: f32,
    },
}

/// Exponents compare by their bits, so equality is an equivalence.
impl PartialEq for UnaryFn {
    fn eq(&self, other: &UnaryFn) -> bool {
        match (self, other) {
            (UnaryFn::Pow { exponent: a }, UnaryFn::Pow { exponent: b }) => {
                a.to_bits() == b.to_bits()
            }
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl Eq for UnaryFn {}

impl UnaryFn {
    /// Every function but `pow`, whose exponent is an attribute.
    pub const PLAIN: [UnaryFn; 13] = [
        UnaryFn::Neg,
        UnaryFn::Abs,
        UnaryFn::Sqrt,
        UnaryFn::Reciprocal,
        UnaryFn::Exp,
        UnaryFn::Erf,
        UnaryFn::Tanh,
        UnaryFn::Sigmoid,
        UnaryFn::Relu,
        UnaryFn::GeluErf,
        UnaryFn::GeluTanh,
        UnaryFn::IsNan,
        UnaryFn::IsInf,
    ];

    /// The name in dumps and graph specs: `gelu_erf`.
    pub fn name(self) -> &'static str {
        match self {
            UnaryFn::Neg => "neg",
            UnaryFn::Abs => "abs",
            UnaryFn::Sqrt => "sqrt",
            UnaryFn::Reciprocal => "reciprocal",
            UnaryFn::Exp => "exp",
            UnaryFn::Erf => "erf",
            UnaryFn::Tanh => "tanh",
            UnaryFn::Sigmoid => "sigmoid",
            UnaryFn::Relu => "relu",
            UnaryFn::GeluErf => "gelu_erf",
            UnaryFn::GeluTanh => "gelu_tanh",
            UnaryFn::IsNan => "is_nan",
            UnaryFn::IsInf => "is_inf",
            UnaryFn::Pow { .. } => "pow",
        }
    }
}

/// A function of two elements ([`crate::ir::OpKind::Binary`]). The comparisons give 1 where they
/// hold and 0 where not (a NaN compares unequal to everything, itself included).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinaryFn {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Max,
    Min,
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

impl BinaryFn {
    pub const ALL: [BinaryFn; 13] = [
        BinaryFn::Add,
        BinaryFn::Sub,
        BinaryFn::Mul,
        BinaryFn::Div,
        BinaryFn::Pow,
        BinaryFn::Max,
        BinaryFn::Min,
        BinaryFn::Equal,
        BinaryFn::NotEqual,
        BinaryFn::Less,
        BinaryFn::LessEqual,
        BinaryFn::Greater,
        BinaryFn::GreaterEqual,
    ];

    /// The name in dumps and graph specs: `sub`, `less_equal`.
    pub fn name(self) -> &'static str {
        match self {
            BinaryFn::Add => "add",
            BinaryFn::Sub => "sub",
            BinaryFn::Mul => "mul",
            BinaryFn::Div => "div",
            BinaryFn::Pow => "pow",
            BinaryFn::Max => "max",
            BinaryFn::Min => "min",
            BinaryFn::Equal => "equal",
            BinaryFn::NotEqual => "not_equal",
            BinaryFn::Less => "less",
            BinaryFn::LessEqual => "less_equal",
            BinaryFn::Greater => "greater",
            BinaryFn::GreaterEqual => "greater_equal",
        }
    }

    /// Whether `f(a, b) = f(b, a)`.
    pub fn commutes(self) -> bool {
        matches!(
            self,
            BinaryFn::Add
                | BinaryFn::Mul
                | BinaryFn::Max
                | BinaryFn::Min
                | BinaryFn::Equal
                | BinaryFn::NotEqual
        )
    }

    /// Whether it is a comparison, whose result is 1 or 0.
    pub fn compares(self) -> bool {
        matches!(
            self,
            BinaryFn::Equal
                | BinaryFn::NotEqual
                | BinaryFn::Less
                | BinaryFn::LessEqual
                | BinaryFn::Greater
                | BinaryFn::GreaterEqual
        )
    }
}

/// A reduction of a row to one value ([`crate::ir::OpKind::Reduce`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceFn {
    Sum,
    Mean,
    Max,
}

impl ReduceFn {
    pub const ALL: [ReduceFn; 3] = [ReduceFn::Sum, ReduceFn::Mean, ReduceFn::Max];

    /// The name in dumps and graph specs: `mean`.
    pub fn name(self) -> &'static str {
        match self {
            ReduceFn::Sum => "sum",
            ReduceFn::Mean => "mean",
            ReduceFn::Max => "max",
        }
    }
}

/// Element offsets and strides over a value's elements in row-major order (its `rows · cols`
/// elements laid end to end): the multi-index `i` names element `offset + Σ i_k·strides_k`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Strided {
    pub offset: u64,
    pub strides: Vec<i64>,
}

impl Strided {
    /// The least and the greatest element the multi-indices over `shape` name (as `i128`, which
    /// no sum of `u32` extents and `i64` strides overflows); `None` for an empty shape's no elements.
    pub fn span(&self, shape: &[u32]) -> Option<(i128, i128)> {
        if shape.contains(&0) {
            return None;
        }
        let (mut lo, mut hi) = (i128::from(self.offset), i128::from(self.offset));
        for (&n, &s) in shape.iter().zip(&self.strides) {
            let reach = i128::from(s) * (i128::from(n) - 1);
            if reach < 0 {
                lo += reach;
            } else {
                hi += reach;
            }
        }
        Some((lo, hi))
    }
}

/// Calls `f(a, b)` for every multi-index over `shape` in row-major order, with the elements `a` and
/// `b` name (`a.offset + Σ i_k·a.strides_k`, likewise `b`), as long as `f` returns `true`; the
/// indices are signed, so a caller checks them against its value. Strides beyond `shape`'s rank
/// are ignored, missing ones are 0. Visits nothing when an extent is 0.
pub fn for_each_pair(
    shape: &[u32],
    a: &Strided,
    b: &Strided,
    mut f: impl FnMut(i128, i128) -> bool,
) {
    if shape.contains(&0) {
        return;
    }
    let stride = |s: &Strided, k: usize| i128::from(s.strides.get(k).copied().unwrap_or(0));
    let rank = shape.len();
    let mut index = vec![0u32; rank];
    let (mut x, mut y) = (i128::from(a.offset), i128::from(b.offset));
    loop {
        if !f(x, y) {
            return;
        }
        // The odometer: the last dimension turns fastest.
        let mut k = rank;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            index[k] += 1;
            x += stride(a, k);
            y += stride(b, k);
            if index[k] < shape[k] {
                break;
            }
            let back = i128::from(shape[k]);
            x -= stride(a, k) * back;
            y -= stride(b, k) * back;
            index[k] = 0;
        }
    }
}
