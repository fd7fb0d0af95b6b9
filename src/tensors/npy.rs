//! `.npy` files, format versions 1.0 to 3.0: little-endian `<f2`, `<f4`, `<i8` and `<i4` arrays and
//! `|b1` (bool, a byte each, nonzero true as numpy reads it) in C order. Reading checks the magic,
//! the version, the header (a Python dict literal with `descr`, `fortran_order` and `shape`, nothing
//! else), and that the data is exactly as long as the shape says, before decoding; Fortran order and big-endian data are refused by name. Writing gives version 1.0
//! (2.0 when the header needs more than 65535 bytes), the header padded so the data starts at a
//! multiple of 64 bytes, as numpy writes it.

use super::{ElementType, Elements, Tensor, checked_size};

pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    #[error("not a .npy file (it does not start with \\x93NUMPY)")]
    Magic,
    #[error("truncated: the file ends inside its {0}")]
    Truncated(&'static str),
    #[error("format version {0}.{1} is not supported (1.0, 2.0 and 3.0 are)")]
    Version(u8, u8),
    #[error("its header is not a valid dict literal: {0}")]
    Header(String),
    #[error("element type {0:?} is not supported: use little-endian <f2, <f4, <i8 or <i4, or |b1")]
    DType(String),
    #[error("element type {0:?} is big-endian: save the array little-endian (<f2, <f4, <i8, <i4)")]
    BigEndian(String),
    #[error("the array is in Fortran order: save it in C order (numpy.ascontiguousarray)")]
    Fortran,
    #[error("shape {shape:?} needs {needed} bytes of data, the file holds {actual}")]
    Length {
        shape: Vec<u64>,
        needed: String,
        actual: usize,
    },
}

/// A value of the header's dict.
#[derive(Debug, PartialEq)]
enum Literal {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
}

/// A small parser of the header's Python literal: `{'key': value, ...}` with string, boolean and
/// integer-tuple values.
struct Parser<'a> {
    text: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error<T>(&self, what: &str) -> Result<T, NpyError> {
        Err(NpyError::Header(format!("{what} at byte {}", self.at)))
    }

    fn skip_space(&mut self) {
        while self.text.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.get(self.at).copied()
    }

    fn expect(&mut self, c: u8) -> Result<(), NpyError> {
        if self.peek() == Some(c) {
            self.at += 1;
            Ok(())
        } else {
            self.error(&format!("expected {:?}", c as char))
        }
    }

    fn string(&mut self) -> Result<String, NpyError> {
        let quote = match self.peek() {
            Some(q @ (b'\'' | b'"')) => q,
            _ => return self.error("expected a string"),
        };
        let start = self.at + 1;
        let Some(len) = self.text[start..].iter().position(|&c| c == quote) else {
            return self.error("unterminated string");
        };
        self.at = start + len + 1;
        String::from_utf8(self.text[start..start + len].to_vec())
            .or_else(|_| self.error("a string that is not UTF-8"))
    }

    fn integer(&mut self) -> Result<u64, NpyError> {
        self.skip_space();
        let start = self.at;
        while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        let digits = std::str::from_utf8(&self.text[start..self.at]).unwrap_or_default();
        let n = digits
            .parse::<u64>()
            .or_else(|_| self.error("expected a dimension (a non-negative integer)"))?;
        if self.text.get(self.at) == Some(&b'L') {
            self.at += 1;
        }
        Ok(n)
    }

    fn literal(&mut self) -> Result<Literal, NpyError> {
        match self.peek() {
            Some(b'\'' | b'"') => Ok(Literal::Str(self.string()?)),
            Some(b'(') => {
                self.at += 1;
                let mut dims = Vec::new();
                loop {
                    if self.peek() == Some(b')') {
                        self.at += 1;
                        return Ok(Literal::Tuple(dims));
                    }
                    dims.push(self.integer()?);
                    match self.peek() {
                        Some(b',') => self.at += 1,
                        Some(b')') => {}
                        _ => return self.error("expected ',' or ')' in the shape"),
                    }
                }
            }
            _ => {
                for (word, value) in [("True", true), ("False", false)] {
                    if self.text[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(Literal::Bool(value));
                    }
                }
                self.error("expected a string, a tuple, True or False")
            }
        }
    }

    fn dict(&mut self) -> Result<Vec<(String, Literal)>, NpyError> {
        self.expect(b'{')?;
        let mut entries = Vec::new();
        loop {
            if self.peek() == Some(b'}') {
                self.at += 1;
                break;
            }
            let key = self.string()?;
            self.expect(b':')?;
            entries.push((key, self.literal()?));
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {}
                _ => return self.error("expected ',' or '}'"),
            }
        }
        if self.peek().is_some() {
            return self.error("text after the dict");
        }
        Ok(entries)
    }
}

fn element_type(descr: &str) -> Result<ElementType, NpyError> {
    match descr {
        "<f2" => Ok(ElementType::F16),
        "<f4" => Ok(ElementType::F32),
        "<i8" => Ok(ElementType::I64),
        "<i4" => Ok(ElementType::I32),
        "|b1" => Ok(ElementType::Bool),
        ">f2" | ">f4" | ">i8" | ">i4" => Err(NpyError::BigEndian(descr.to_string())),
        _ => Err(NpyError::DType(descr.to_string())),
    }
}

fn descr(elements: &Elements) -> &'static str {
    match elements {
        Elements::F16(_) => "<f2",
        Elements::F32(_) => "<f4",
        Elements::I64(_) => "<i8",
        Elements::I32(_) => "<i4",
        Elements::Bool(_) => "|b1",
    }
}

/// Reads a `.npy` file's bytes.
pub fn read(bytes: &[u8]) -> Result<Tensor, NpyError> {
    if bytes.len() < MAGIC.len() {
        return Err(if MAGIC.starts_with(bytes) {
            NpyError::Truncated("magic")
        } else {
            NpyError::Magic
        });
    }
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(NpyError::Magic)?;
    let (&major, &minor) = match rest {
        [major, minor, ..] => (major, minor),
        _ => return Err(NpyError::Truncated("version")),
    };
    let (len_bytes, rest) = match major {
        1 => (2, &rest[2..]),
        2 | 3 => (4, &rest[2..]),
        _ => return Err(NpyError::Version(major, minor)),
    };
    let len = rest
        .get(..len_bytes)
        .ok_or(NpyError::Truncated("header length"))?;
    let header_len = len
        .iter()
        .rev()
        .fold(0usize, |n, &b| n << 8 | usize::from(b));
    let rest = &rest[len_bytes..];
    let header = rest
        .get(..header_len)
        .ok_or(NpyError::Truncated("header"))?;
    let data = &rest[header_len..];

    let mut parser = Parser {
        text: header,
        at: 0,
    };
    let (mut kind, mut fortran, mut shape) = (None, None, None);
    for (key, value) in parser.dict()? {
        match (key.as_str(), value) {
            ("descr", Literal::Str(d)) => kind = Some(element_type(&d)?),
            ("fortran_order", Literal::Bool(f)) => fortran = Some(f),
            ("shape", Literal::Tuple(s)) => shape = Some(s),
            (key, value) => {
                return Err(NpyError::Header(format!(
                    "unexpected entry {key:?}: {value:?} (a header has descr, fortran_order and shape)"
                )));
            }
        }
    }
    let (Some(kind), Some(fortran), Some(shape)) = (kind, fortran, shape) else {
        return Err(NpyError::Header(
            "it lacks one of descr, fortran_order and shape".to_string(),
        ));
    };
    if fortran {
        return Err(NpyError::Fortran);
    }
    match checked_size(&shape, kind.bytes()) {
        Some((_, needed)) if needed == data.len() as u64 => Ok(Tensor {
            elements: kind.decode(data),
            shape,
        }),
        size => Err(NpyError::Length {
            needed: size.map_or("more than 2^64".to_string(), |(_, b)| b.to_string()),
            shape,
            actual: data.len(),
        }),
    }
}

/// The `.npy` bytes of a tensor.
pub fn write(tensor: &Tensor) -> Vec<u8> {
    let dims: Vec<String> = tensor.shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!(
        "{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}",
        descr(&tensor.elements)
    );
    let version: u8 = if header.len() + 1 + 10 <= usize::from(u16::MAX) {
        1
    } else {
        2
    };
    let prefix = MAGIC.len() + 2 + if version == 1 { 2 } else { 4 };
    let padded = (prefix + header.len() + 1).div_ceil(64) * 64;
    header.extend(std::iter::repeat_n(' ', padded - prefix - header.len() - 1));
    header.push('\n');
    let mut out =
        Vec::with_capacity(padded + tensor.elements.len() * tensor.elements.element_bytes());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&tensor.elements.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn every_type_round_trips() {
        for (shape, elements) in [
            (
                vec![2, 3],
                Elements::F16((0..6).map(|i| f16::from_f32(i as f32 / 4.0)).collect()),
            ),
            (vec![3], Elements::F32(vec![1.5, -2.0, 1e-7])),
            (vec![], Elements::I64(vec![-(1 << 40)])),
            (vec![1, 0, 4], Elements::I32(vec![])),
            (vec![2, 1, 2], Elements::I32(vec![1, -2, 3, i32::MAX])),
            (vec![2, 2], Elements::Bool(vec![true, false, false, true])),
        ] {
            let t = Tensor { shape, elements };
            let bytes = write(&t);
            assert_eq!(bytes.iter().position(|&b| b == b'\n').unwrap() % 64, 63);
            assert_eq!(read(&bytes).unwrap(), t);
        }
    }

    #[test]
    fn numpy_headers_read() {
        let mut file = b"\x93NUMPY\x03\x00".to_vec();
        let header = b"{\"descr\": '<i8', \"shape\": (2L,), 'fortran_order': False}  \n";
        file.extend_from_slice(&(header.len() as u32).to_le_bytes());
        file.extend_from_slice(header);
        file.extend_from_slice(&[
            7, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255,
        ]);
        let t = read(&file).unwrap();
        assert_eq!((t.shape, t.elements), (vec![2], Elements::I64(vec![7, -1])));
    }

    #[test]
    fn numpy_bool_arrays_read_nonzero_bytes_as_true() {
        let mut file = b"\x93NUMPY\x01\x00".to_vec();
        let header = b"{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }\n";
        file.extend_from_slice(&(header.len() as u16).to_le_bytes());
        file.extend_from_slice(header);
        file.extend_from_slice(&[1, 0, 2]);
        let t = read(&file).unwrap();
        assert_eq!(t.elements, Elements::Bool(vec![true, false, true]));
        file.pop();
        assert!(matches!(read(&file), Err(NpyError::Length { .. })));
    }

    #[test]
    fn fortran_order_big_endian_and_other_types_are_refused() {
        let t = Tensor {
            shape: vec![2],
            elements: Elements::F32(vec![1.0, 2.0]),
        };
        let good = write(&t);
        let with = |from: &str, to: &str| {
            let at = good
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .unwrap();
            let mut bytes = good[..at].to_vec();
            bytes.extend_from_slice(to.as_bytes());
            bytes.extend_from_slice(&good[at + from.len()..]);
            read(&bytes)
        };
        // Same length replacements keep the header length right.
        assert_eq!(with("False", "True "), Err(NpyError::Fortran));
        assert_eq!(with("<f4", ">f4"), Err(NpyError::BigEndian(">f4".into())));
        assert_eq!(with("<f4", "<f8"), Err(NpyError::DType("<f8".into())));
        assert!(matches!(with("(2,)", "(9,)"), Err(NpyError::Length { .. })));
        let huge = with("(2,)", "(99999999999999999,99999999999999999)");
        assert!(matches!(
            huge,
            Err(NpyError::Header(_) | NpyError::Length { .. })
        ));
    }
}
