//! The binary form of a tile program: what `build_images` writes into tile memory and the device
//! decodes from it, and how `tile_code` stores its programs.
//!
//! A program is its tile, then its instructions to the end of the bytes. Integers are LEB128 (7 bits a
//! byte, low first, at most 5 bytes for a `u32`) except tile addresses (a [`Run`]'s offset), which are
//! 4 bytes little-endian: a program whose addresses are all [`super::PLACEHOLDER_ADDRESS`] encodes to
//! exactly the length of the same program placed, and `place_storage` reserves code space from that
//! (a vertex's operands are MessagePack, where a placeholder is never shorter than an address).
//!
//! | opcode | instruction | fields |
//! |---|---|---|
//! | 0 | `Sync` | |
//! | 1 | `Exchange` | phase |
//! | 2, 3 | `Send`, wide `Send` | skip, bytes, run |
//! | 4, 5 | `Receive`, wide `Receive` | from, skip, bytes, run |
//! | 6 | `Vertex` | length, then that many bytes of MessagePack [`VertexKind`] |
//! | 7 | `SendReceive` | widths (bit 0 the send's, bit 1 the receive's), then the send's and the receive's fields |
//! | 8 | `Delay` | cycles |
//!
//! A run is offset (4 bytes), bytes, count, stride. Decoding never panics: truncated bytes, an unknown
//! opcode, an integer past `u32`, a width byte above 3 or an undecodable vertex is an error naming the
//! byte where it starts. [`FORMAT`] numbers this form; an artifact that holds programs in it (tile
//! code, the package) moves its schema with it.

use super::{Instr, Placed, Receive, Run, Send, TileProgram, VertexKind};
use crate::ids::{ExchangeId, TileId};

/// The version of this form: 2 since exchange code is timed by its instructions (delays, no cycle
/// fields).
pub const FORMAT: u32 = 2;

const SYNC: u8 = 0;
const EXCHANGE: u8 = 1;
const SEND: u8 = 2;
const SEND_WIDE: u8 = 3;
const RECEIVE: u8 = 4;
const RECEIVE_WIDE: u8 = 5;
const VERTEX: u8 = 6;
const SEND_RECEIVE: u8 = 7;
const DELAY: u8 = 8;

/// Bytes that are not a tile program, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at byte {at}: {what}")]
pub struct DecodeError {
    pub at: usize,
    pub what: String,
}

pub fn encode(program: &TileProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 * program.instrs.len() + 8);
    header(&mut out, program.tile);
    for instr in &program.instrs {
        encode_instr(&mut out, instr);
    }
    out
}

/// Appends the header of a program of `tile`: what its encoding holds before its instructions.
pub fn header(out: &mut Vec<u8>, tile: TileId) {
    varint(out, tile.0);
}

/// The bytes `encode` gives a program of `tile` before its instructions.
pub fn header_bytes(tile: TileId) -> usize {
    let mut out = Vec::new();
    header(&mut out, tile);
    out.len()
}

/// Appends `instr`'s encoding to `out`; a program's encoding is its header and then each of its
/// instructions' encodings in turn.
pub fn encode_instr(out: &mut Vec<u8>, instr: &Instr) {
    match instr {
        Instr::Sync => out.push(SYNC),
        Instr::Exchange { phase } => {
            out.push(EXCHANGE);
            varint(out, phase.0);
        }
        Instr::Send(s) => {
            out.push(if s.wide { SEND_WIDE } else { SEND });
            send(out, s);
        }
        Instr::Receive(r) => {
            out.push(if r.wide { RECEIVE_WIDE } else { RECEIVE });
            receive(out, r);
        }
        Instr::SendReceive(pair) => {
            let (s, r) = &**pair;
            out.push(SEND_RECEIVE);
            out.push(u8::from(s.wide) | u8::from(r.wide) << 1);
            send(out, s);
            receive(out, r);
        }
        Instr::Delay { cycles } => {
            out.push(DELAY);
            varint(out, *cycles);
        }
        Instr::Vertex(v) => {
            out.push(VERTEX);
            let body = rmp_serde::to_vec(v).expect("vertices serialise");
            varint(out, body.len() as u32);
            out.extend_from_slice(&body);
        }
    }
}

pub fn decode(bytes: &[u8]) -> Result<TileProgram, DecodeError> {
    let (tile, at) = decode_header(bytes)?;
    let instrs = decode_instrs(bytes, at)?;
    Ok(TileProgram { tile, instrs })
}

/// The instructions from byte `at` of a program's bytes to their end.
pub fn decode_instrs(bytes: &[u8], mut at: usize) -> Result<Vec<Instr>, DecodeError> {
    let mut instrs = Vec::new();
    while at < bytes.len() {
        let (instr, next) = decode_instr(bytes, at)?;
        instrs.push(instr);
        at = next;
    }
    Ok(instrs)
}

/// A program's header: its tile and where its first instruction starts.
pub fn decode_header(bytes: &[u8]) -> Result<(TileId, usize), DecodeError> {
    let mut r = Reader { bytes, at: 0 };
    let tile = TileId(r.varint().map_err(|f| f.error(bytes))?);
    Ok((tile, r.at))
}

/// The instruction starting at byte `at` of a program's bytes, and where the next one starts.
pub fn decode_instr(bytes: &[u8], at: usize) -> Result<(Instr, usize), DecodeError> {
    let mut r = Reader { bytes, at };
    let instr = r.instr().map_err(|f| f.error(bytes))?;
    Ok((instr, r.at))
}

fn varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn run(out: &mut Vec<u8>, r: &Run) {
    out.extend_from_slice(&r.offset.to_le_bytes());
    for field in [r.bytes, r.count, r.stride] {
        varint(out, field);
    }
}

/// A send's fields after its opcode (its width is the opcode's).
fn send(out: &mut Vec<u8>, s: &Send) {
    varint(out, s.skip);
    varint(out, s.bytes);
    run(out, &s.run);
}

/// A receive's fields after its opcode (its width is the opcode's).
fn receive(out: &mut Vec<u8>, r: &Receive) {
    for field in [r.from.0, r.skip, r.bytes] {
        varint(out, field);
    }
    run(out, &r.run);
}

/// Why bytes are not an instruction, and the byte where that shows: small, so that the reader's
/// every step returns it cheaply; made a [`DecodeError`] once, by [`Fault::error`].
#[derive(Clone, Copy)]
enum Fault {
    Truncated(usize),
    PastU32(usize),
    TooLong(usize),
    UnknownOpcode(usize, u8),
    Widths(usize, u8),
    /// The vertex's opcode byte; the MessagePack decoder's message is made again from the bytes.
    Vertex(usize),
}

impl Fault {
    /// The error, with its message, of a fault in `bytes`.
    fn error(self, bytes: &[u8]) -> DecodeError {
        let (at, what) = match self {
            Fault::Truncated(at) => (at, "truncated".to_string()),
            Fault::PastU32(at) => (at, "integer past u32".to_string()),
            Fault::TooLong(at) => (at, "integer longer than 5 bytes".to_string()),
            Fault::UnknownOpcode(at, op) => (at, format!("unknown opcode {op}")),
            Fault::Widths(at, widths) => (
                at,
                format!("width byte {widths} of a send-receive (0 to 3)"),
            ),
            Fault::Vertex(at) => {
                let mut r = Reader { bytes, at: at + 1 };
                let body = r.varint().and_then(|len| r.take(len as usize));
                let why = body
                    .ok()
                    .and_then(|body| rmp_serde::from_slice::<VertexKind<Placed>>(body).err());
                let why = why.map_or_else(String::new, |e| format!(": {e}"));
                (at, format!("vertex does not decode{why}"))
            }
        };
        DecodeError { at, what }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn instr(&mut self) -> Result<Instr, Fault> {
        let at = self.at;
        Ok(match self.byte()? {
            SYNC => Instr::Sync,
            EXCHANGE => Instr::Exchange {
                phase: ExchangeId(self.varint()?),
            },
            op @ (SEND | SEND_WIDE) => Instr::Send(self.send(op == SEND_WIDE)?),
            op @ (RECEIVE | RECEIVE_WIDE) => Instr::Receive(self.receive(op == RECEIVE_WIDE)?),
            SEND_RECEIVE => {
                let widths = self.byte()?;
                if widths > 3 {
                    return Err(Fault::Widths(at + 1, widths));
                }
                let pair = (self.send(widths & 1 != 0)?, self.receive(widths & 2 != 0)?);
                Instr::SendReceive(Box::new(pair))
            }
            DELAY => Instr::Delay {
                cycles: self.varint()?,
            },
            VERTEX => {
                let len = self.varint()? as usize;
                let body = self.take(len)?;
                let vertex: VertexKind<Placed> =
                    rmp_serde::from_slice(body).map_err(|_| Fault::Vertex(at))?;
                Instr::Vertex(Box::new(vertex))
            }
            op => return Err(Fault::UnknownOpcode(at, op)),
        })
    }

    fn byte(&mut self) -> Result<u8, Fault> {
        let b = *self.bytes.get(self.at).ok_or(Fault::Truncated(self.at))?;
        self.at += 1;
        Ok(b)
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8], Fault> {
        let truncated = Fault::Truncated(self.at);
        let end = self.at.checked_add(len).ok_or(truncated)?;
        let slice = self.bytes.get(self.at..end).ok_or(truncated)?;
        self.at = end;
        Ok(slice)
    }

    fn varint(&mut self) -> Result<u32, Fault> {
        let start = self.at;
        // Most fields are below 128: one byte.
        if let Some(&b) = self.bytes.get(start)
            && b < 0x80
        {
            self.at += 1;
            return Ok(u32::from(b));
        }
        let mut value = 0u64;
        for shift in (0..35).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return u32::try_from(value).map_err(|_| Fault::PastU32(start));
            }
        }
        Err(Fault::TooLong(start))
    }

    fn send(&mut self, wide: bool) -> Result<Send, Fault> {
        Ok(Send {
            skip: self.varint()?,
            bytes: self.varint()?,
            run: self.run()?,
            wide,
        })
    }

    fn receive(&mut self, wide: bool) -> Result<Receive, Fault> {
        Ok(Receive {
            from: TileId(self.varint()?),
            skip: self.varint()?,
            bytes: self.varint()?,
            run: self.run()?,
            wide,
        })
    }

    fn run(&mut self) -> Result<Run, Fault> {
        let offset = self.take(4)?;
        Ok(Run {
            offset: u32::from_le_bytes([offset[0], offset[1], offset[2], offset[3]]),
            bytes: self.varint()?,
            count: self.varint()?,
            stride: self.varint()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elements::DType;
    use crate::isa::{Amp, PLACEHOLDER_ADDRESS};

    fn run(offset: u32) -> Run {
        Run {
            offset,
            bytes: 300,
            count: 3,
            stride: 640,
        }
    }

    fn program(address: u32) -> TileProgram {
        let placed = |a: u32| Placed {
            address: a,
            stride: 64,
            dtype: DType::F16,
        };
        let send = Send {
            skip: 0,
            bytes: 128,
            run: run(address),
            wide: true,
        };
        let receive = Receive {
            from: TileId(17),
            skip: 4,
            bytes: 8,
            run: run(address),
            wide: false,
        };
        TileProgram {
            tile: TileId(1471),
            instrs: vec![
                Instr::Vertex(Box::new(VertexKind::Amp(Amp {
                    a: placed(address),
                    b: placed(address),
                    partials: placed(address),
                    rows: 16,
                    depth: 64,
                    cols: 16,
                }))),
                Instr::Sync,
                Instr::Exchange {
                    phase: ExchangeId(3),
                },
                Instr::Delay { cycles: 70_000 },
                Instr::Send(send),
                Instr::SendReceive(Box::new((send, receive))),
                Instr::SendReceive(Box::new((
                    Send {
                        wide: false,
                        ..send
                    },
                    Receive {
                        wide: true,
                        ..receive
                    },
                ))),
                Instr::Delay { cycles: 0 },
                Instr::Receive(receive),
                Instr::Sync,
            ],
        }
    }

    #[test]
    fn a_program_decodes_to_itself() {
        for address in [0x4_c000, 0, u32::MAX - 1] {
            let p = program(address);
            assert_eq!(decode(&encode(&p)), Ok(p));
        }
    }

    #[test]
    fn a_placeholder_program_is_never_shorter_than_the_placed_one() {
        let sized = encode(&program(PLACEHOLDER_ADDRESS)).len();
        for address in [0, 0x4_c000, 0x7_ffff] {
            let placed = encode(&program(address)).len();
            assert!(placed <= sized, "{placed} > {sized}");
        }
    }

    #[test]
    fn every_truncation_and_damaged_byte_is_an_error_or_another_program_never_a_panic() {
        let bytes = encode(&program(0x4_c000));
        for len in 0..bytes.len() {
            // A cut between instructions is a shorter program; anywhere else an error.
            let _ = decode(&bytes[..len]);
        }
        // The program ends with a receive (its stride the last byte) and a sync.
        let e = decode(&bytes[..bytes.len() - 2]).unwrap_err();
        assert_eq!((e.at, e.what.as_str()), (bytes.len() - 2, "truncated"));
        for i in 0..bytes.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut damaged = bytes.clone();
                damaged[i] ^= flip;
                let _ = decode(&damaged);
            }
        }
    }

    #[test]
    fn an_unknown_opcode_and_an_overlong_integer_name_their_byte() {
        let mut bytes = encode(&program(0));
        let tile_len = 2; // 1471 in LEB128.
        bytes[tile_len] = 9;
        let e = decode(&bytes).unwrap_err();
        assert_eq!((e.at, e.what.as_str()), (tile_len, "unknown opcode 9"));
        let e = decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).unwrap_err();
        assert_eq!(e.at, 0);
        let e = decode(&[0xff, 0xff, 0xff, 0xff, 0x7f]).unwrap_err();
        assert_eq!((e.at, e.what.as_str()), (0, "integer past u32"));
    }

    #[test]
    fn an_encoded_program_is_its_encoding_and_refuses_bytes_that_do_not_decode() {
        let p = program(0x4_c000);
        let mut built = crate::isa::EncodedProgram::start(p.tile);
        p.instrs.iter().for_each(|i| built.push(i));
        assert_eq!(built.bytes(), encode(&p));
        assert_eq!(
            (built.instruction_count(), built.tile()),
            (p.instrs.len(), p.tile)
        );
        assert_eq!(built.decode(), p);
        assert_eq!(
            crate::isa::EncodedProgram::from_bytes(encode(&p)),
            Ok(built)
        );
        // Cut inside the final receive: refused where decoding the bytes is.
        let bytes = encode(&p);
        let cut = bytes[..bytes.len() - 2].to_vec();
        let e = crate::isa::EncodedProgram::from_bytes(cut).unwrap_err();
        assert_eq!((e.at, e.what.as_str()), (bytes.len() - 2, "truncated"));
    }

    #[test]
    fn a_send_receive_width_byte_above_three_names_its_byte() {
        // Tile 1, a send-receive whose width byte is 4.
        let e = decode(&[1, SEND_RECEIVE, 4]).unwrap_err();
        assert_eq!(
            (e.at, e.what.as_str()),
            (2, "width byte 4 of a send-receive (0 to 3)")
        );
    }

    #[test]
    fn a_vertex_that_does_not_decode_names_its_byte_and_why() {
        // Tile 1, a vertex of one byte that is no MessagePack (0xc1 is never used).
        let e = decode(&[1, VERTEX, 1, 0xc1]).unwrap_err();
        assert_eq!(e.at, 1);
        let why = e.what.strip_prefix("vertex does not decode: ");
        assert!(why.is_some_and(|why| !why.is_empty()), "{}", e.what);
        // Its body cut short: truncated where the body starts.
        let e = decode(&[1, VERTEX, 5, 0x92]).unwrap_err();
        assert_eq!((e.at, e.what.as_str()), (3, "truncated"));
    }
}
