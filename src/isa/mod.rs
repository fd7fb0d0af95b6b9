//! The tile instruction set: what `emit` writes, `build_images` encodes into tile memory, and the device
//! decodes and executes. Every address is absolute in the tile's memory. A program is a sequence of
//! supersteps separated by `Sync`; every tile has the same number of syncs. Compute vertices are
//! [`Instr::Vertex`], their kinds defined once in [`vertex`] for the program and tile code alike.
//! An exchange phase's code holds sends, mux switches with the receives they arm, and delays: it is
//! timed by the order and issue of its instructions (see [`Instr`]), as the hardware's compiled,
//! time-deterministic exchange is, and no instruction names a cycle.
//!
//! Encoding: the binary form in [`encoding`], in which a program built with every address at `u32::MAX`
//! ([`PLACEHOLDER_ADDRESS`]) is at least as long as the real one: `place_storage` reserves code space
//! from that. This module depends on no phase and not on the device.

use crate::ids::{ExchangeId, TileId};
use serde::{Deserialize, Serialize};

pub mod encoding;
pub mod vertex;
pub use vertex::*;

pub const PLACEHOLDER_ADDRESS: u32 = u32::MAX;

/// `count` pieces of `bytes` bytes, `stride` bytes apart, from `offset`. Contiguous when `count == 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    pub offset: u32,
    pub bytes: u32,
    pub count: u32,
    pub stride: u32,
}

impl Run {
    /// Bytes in the run's stream, when they fit in u32.
    pub fn total(&self) -> Option<u32> {
        self.bytes.checked_mul(self.count)
    }
    /// One past the last byte touched, relative to the buffer, when the run has a piece and its last
    /// piece ends within u32.
    pub fn end(&self) -> Option<u32> {
        self.stride
            .checked_mul(self.count.checked_sub(1)?)?
            .checked_add(self.offset)?
            .checked_add(self.bytes)
    }
    /// Each piece: (where it starts, its bytes). Every piece of a run whose [`Run::end`] fits; the
    /// pieces before the first that would start past u32 otherwise.
    pub fn pieces(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.count).map_while(|i| {
            let at = i.checked_mul(self.stride)?.checked_add(self.offset)?;
            Some((at, self.bytes))
        })
    }
    /// The pieces holding bytes `skip..skip+len` of the run's stream: all of them for a run whose
    /// [`Run::end`] fits and a window within its [`Run::total`] (the stream's offsets are u64 here, so
    /// nothing wraps whatever the run).
    pub fn window(&self, skip: u32, len: u32) -> impl Iterator<Item = (u32, u32)> + '_ {
        let (skip, end) = (u64::from(skip), u64::from(skip) + u64::from(len));
        self.pieces()
            .zip(0u64..)
            .filter_map(move |((at, bytes), i)| {
                let a = i * u64::from(self.bytes);
                let (lo, hi) = (a.max(skip), (a + u64::from(bytes)).min(end));
                let piece_at = u32::try_from(u64::from(at) + (lo - a)).ok()?;
                let piece_len = u32::try_from(hi.checked_sub(lo)?).ok()?;
                (piece_len > 0).then_some((piece_at, piece_len))
            })
    }
    pub fn shifted(&self, base: u32) -> Run {
        Run {
            offset: base + self.offset,
            ..*self
        }
    }
}

/// Sends bytes `skip..skip+bytes` of the stream read from `run`. It issues once the tile's outgoing
/// port is free (the previous send's last word has left), so sends with nothing between them go back
/// to back; its first word leaves in its issue cycle and one more each cycle after, two a cycle when
/// `wide`, over the supertile pair's shared bus (the pair mate must not send meanwhile). The packets
/// name no destination: every tile whose mux listens to this one when they arrive takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Send {
    pub skip: u32,
    pub bytes: u32,
    pub run: Run,
    pub wide: bool,
}

/// Switches the tile's incoming mux to `from` (set `mux_switch_cycles` after the instruction issues)
/// and stores the next send of `from` whose words reach the tile once the mux is set, which must be
/// bytes `skip..skip+bytes` of `from`'s stream, as the same bytes of the stream written to `run`.
/// `wide` receives a wide send at two words per cycle: the pair mate must not receive other data
/// meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receive {
    pub from: TileId,
    pub skip: u32,
    pub bytes: u32,
    pub run: Run,
    pub wide: bool,
}

/// An exchange phase's code is timed by its instructions alone: the tile issues them in order from the
/// sync that opens the phase (cycle 0), one every `exchange_issue_cycles` cycles; a send (alone or with
/// a receive) waits for the outgoing port, and a delay idles. No instruction names a cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Instr {
    /// A compute vertex with its operands placed.
    Vertex(Box<VertexKind<Placed>>),
    /// Labels the superstep as exchange phase `phase`; not executed, it takes no cycle.
    Exchange { phase: ExchangeId },
    /// A send of the tile's part of an exchange phase.
    Send(Send),
    /// A mux switch and the receive it arms, of the tile's part of an exchange phase.
    Receive(Receive),
    /// A send and a mux switch issued as one instruction, in one slot (an exchange instruction may
    /// carry both the send and the switch-control function): what a tile does when its schedule
    /// starts a send and switches its mux in one cycle.
    /// Boxed, as a rare kind, so that an instruction takes 32 bytes.
    SendReceive(Box<(Send, Receive)>),
    /// Idles `cycles` cycles after its own issue slot (`delay 0` is a nop): the padding between
    /// exchange instructions that makes each issue at its compiled cycle.
    Delay { cycles: u32 },
    /// Ends a superstep: wait for every tile.
    Sync,
}

// An instruction is 32 bytes: a large program holds tens of millions of them.
const _: () = assert!(std::mem::size_of::<Instr>() <= 32);

/// The stable text form of a run: `offset+bytes`, or `offset+countxbytes/stride`.
fn run_text(r: &Run) -> String {
    if r.count == 1 {
        format!("{:#x}+{}", r.offset, r.bytes)
    } else {
        format!("{:#x}+{}x{}/{}", r.offset, r.count, r.bytes, r.stride)
    }
}

impl std::fmt::Display for Send {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Send {
            skip,
            bytes,
            run,
            wide,
        } = self;
        let wide = if *wide { " wide" } else { "" };
        write!(f, "send {bytes}B+{skip} from {}{wide}", run_text(run))
    }
}

impl std::fmt::Display for Receive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Receive {
            from,
            skip,
            bytes,
            run,
            wide,
        } = self;
        let wide = if *wide { " wide" } else { "" };
        write!(
            f,
            "receive from {from} {bytes}B+{skip} to {}{wide}",
            run_text(run)
        )
    }
}

impl std::fmt::Display for Instr {
    /// The stable text form used in dumps; an exchange phase's instructions are indented under its
    /// label.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Instr::Vertex(v) => v.fmt(f),
            Instr::Exchange { phase } => write!(f, "exchange {phase}"),
            Instr::Send(s) => write!(f, "  {s}"),
            Instr::Receive(r) => write!(f, "  {r}"),
            Instr::SendReceive(pair) => write!(f, "  {} | {}", pair.0, pair.1),
            Instr::Delay { cycles } => write!(f, "  delay {cycles}"),
            Instr::Sync => write!(f, "sync"),
        }
    }
}

/// A tile's program, decoded: what the device runs a superstep of and tests edit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileProgram {
    pub tile: TileId,
    pub instrs: Vec<Instr>,
}

/// A tile's program in its binary form ([`encoding`]), as `tile_code` holds and stores it: a quarter
/// of the decoded program's memory. Made by [`EncodedProgram::start`] and [`EncodedProgram::push`], or
/// from bytes checked to decode ([`EncodedProgram::from_bytes`]), so that its instructions always decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedProgram {
    tile: TileId,
    bytes: Vec<u8>,
    instructions: usize,
}

impl EncodedProgram {
    /// The program of `tile` with no instructions yet.
    pub fn start(tile: TileId) -> EncodedProgram {
        let mut bytes = Vec::new();
        encoding::header(&mut bytes, tile);
        EncodedProgram {
            tile,
            bytes,
            instructions: 0,
        }
    }

    /// Appends `instr`.
    pub fn push(&mut self, instr: &Instr) {
        encoding::encode_instr(&mut self.bytes, instr);
        self.instructions += 1;
    }

    /// `bytes` as a program, when the whole of them decodes.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<EncodedProgram, encoding::DecodeError> {
        let (tile, mut at) = encoding::decode_header(&bytes)?;
        let mut instructions = 0;
        while at < bytes.len() {
            at = encoding::decode_instr(&bytes, at)?.1;
            instructions += 1;
        }
        Ok(EncodedProgram {
            tile,
            bytes,
            instructions,
        })
    }

    pub fn tile(&self) -> TileId {
        self.tile
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// How many instructions the program holds.
    pub fn instruction_count(&self) -> usize {
        self.instructions
    }

    /// Whether the program does more than sync.
    pub fn has_work(&self) -> bool {
        self.instrs().any(|i| !matches!(i, Instr::Sync))
    }

    /// The instructions, decoded one at a time.
    pub fn instrs(&self) -> impl Iterator<Item = Instr> + '_ {
        let mut at = encoding::decode_header(&self.bytes).map_or(self.bytes.len(), |(_, at)| at);
        // Every instruction decodes (see the type), so the walk stops only at the end.
        std::iter::from_fn(move || {
            let (instr, next) = encoding::decode_instr(&self.bytes, at).ok()?;
            at = next;
            Some(instr)
        })
    }

    pub fn decode(&self) -> TileProgram {
        TileProgram {
            tile: self.tile,
            instrs: self.instrs().collect(),
        }
    }
}

impl From<&TileProgram> for EncodedProgram {
    fn from(p: &TileProgram) -> EncodedProgram {
        EncodedProgram {
            tile: p.tile,
            bytes: p.encode(),
            instructions: p.instrs.len(),
        }
    }
}

impl Serialize for EncodedProgram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.bytes)
    }
}

impl<'de> Deserialize<'de> for EncodedProgram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<EncodedProgram, D::Error> {
        let bytes = serde_bytes::ByteBuf::deserialize(d)?;
        EncodedProgram::from_bytes(bytes.into_vec()).map_err(serde::de::Error::custom)
    }
}

impl TileProgram {
    /// The binary form ([`encoding`]).
    pub fn encode(&self) -> Vec<u8> {
        encoding::encode(self)
    }

    pub fn decode(bytes: &[u8]) -> Result<TileProgram, encoding::DecodeError> {
        encoding::decode(bytes)
    }
}

/// A rectangle of a value the host writes into tile memory (or reads back), stored rows `stride` bytes
/// apart from `address`; `transposed` stores one row per column of the rectangle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTransfer {
    pub value: crate::ids::ValueId,
    pub rect: crate::elements::Rect,
    pub tile: TileId,
    pub address: u32,
    pub stride: u32,
    pub transposed: bool,
}

/// One stored row of a host transfer: `len` elements of the row-major value, `step` apart from
/// element `first`, stored from tile address `address` (`None` for a row that would start past u32).
/// Indices are usize, so a value of more than 2^32 elements cannot wrap them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredRow {
    pub first: usize,
    pub step: usize,
    pub len: usize,
    pub address: Option<u32>,
}

impl StoredRow {
    /// The row's elements of `data`, the value in row-major order; `None` when the row reaches past
    /// its end.
    pub fn of<'d, T>(&self, data: &'d [T]) -> Option<impl Iterator<Item = &'d T>> {
        let rest = data.get(self.first..).filter(|_| self.fits(data.len()))?;
        Some(rest.iter().step_by(self.step).take(self.len))
    }

    /// [`StoredRow::of`], to write.
    pub fn of_mut<'d, T>(&self, data: &'d mut [T]) -> Option<impl Iterator<Item = &'d mut T>> {
        let fits = self.fits(data.len());
        let rest = data.get_mut(self.first..).filter(|_| fits)?;
        Some(rest.iter_mut().step_by(self.step).take(self.len))
    }

    /// Whether every element of the row lies within a value of `elements` elements.
    fn fits(&self, elements: usize) -> bool {
        let last = match self.len.checked_sub(1) {
            None => return self.step > 0,
            Some(n) => self
                .step
                .checked_mul(n)
                .and_then(|o| o.checked_add(self.first)),
        };
        self.step > 0 && last.is_some_and(|last| last < elements)
    }
}

impl HostTransfer {
    /// The stored rows, of a value of `cols` columns.
    pub fn stored_rows(&self, cols: u32) -> impl Iterator<Item = StoredRow> + '_ {
        let r = self.rect;
        let cols = cols as usize;
        let count = if self.transposed { r.cols() } else { r.rows() };
        (0..count).map(move |i| {
            // Row times columns fits a 64-bit usize.
            let (first, step, len) = if self.transposed {
                let first = r.row0 as usize * cols + (r.col0 + i) as usize;
                (first, cols, r.rows() as usize)
            } else {
                let first = (r.row0 + i) as usize * cols + r.col0 as usize;
                (first, 1, r.cols() as usize)
            };
            StoredRow {
                first,
                step,
                len,
                address: i
                    .checked_mul(self.stride)
                    .and_then(|o| o.checked_add(self.address)),
            }
        })
    }
}

/// The host side of the package: the streaming calls.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostProgram {
    /// `initialize`: weights, once.
    pub initialize: Vec<HostTransfer>,
    /// `run`: activations in...
    pub run_inputs: Vec<HostTransfer>,
    /// ... and results out.
    pub run_outputs: Vec<HostTransfer>,
}
