//! The tile instruction set: what `emit` writes, `build_images` encodes into tile memory, and the device
//! decodes and executes. Every address is absolute in the tile's memory. A program is a sequence of
//! supersteps separated by `Sync`; every tile has the same number of syncs.
//!
//! Encoding: MessagePack of [`TileProgram`]. Integers encode by magnitude, so a program built with every
//! address at `u32::MAX` ([`PLACEHOLDER_ADDRESS`]) is at least as long as the real one: `place_storage`
//! reserves code space from that.

use crate::ids::{ExchangeId, TileId};
use crate::ir::DType;
use crate::ir::Run;
use serde::{Deserialize, Serialize};

pub const PLACEHOLDER_ADDRESS: u32 = u32::MAX;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Instr {
    /// AMP matmul vertex: `partials[r][c] = Σ_k a[r][k] b[k][c]`, row strides in bytes.
    Amp {
        a: u32,
        a_stride: u32,
        b: u32,
        b_stride: u32,
        partials: u32,
        partials_stride: u32,
        partials_type: DType,
        rows: u32,
        depth: u32,
        cols: u32,
    },
    /// Vector vertex: `out[r][c] = f16(gelu?(Σ_i partials_i[r][c] + bias?[c]))`, the partials at
    /// (address, row stride), summed in f32 in order.
    Epilogue {
        partials: Vec<(u32, u32)>,
        partials_type: DType,
        bias: Option<u32>,
        out: u32,
        out_stride: u32,
        rows: u32,
        cols: u32,
        gelu: bool,
    },
    /// Vector vertex: one step of the online softmax over `keys x queries` scoresᵀ
    /// ([`crate::numerics::softmax_block`]): reads the scores and (unless `first`) the running max and
    /// sum, rows `head_dim` and `head_dim + 1` of the state; writes the f16 probabilitiesᵀ, the f32
    /// rescale factors and the new max and sum.
    Softmax {
        scores: u32,
        scores_stride: u32,
        scores_type: DType,
        probabilities: u32,
        probabilities_stride: u32,
        state: u32,
        state_stride: u32,
        rescale: u32,
        keys: u32,
        queries: u32,
        head_dim: u32,
        /// Causal mask: (first key, first query) of the block.
        mask: Option<(u32, u32)>,
        first: bool,
        scale_bits: u32,
    },
    /// Vector vertex: `state[r][c] = state[r][c] · rescale[c] + partials[r][c]` in f32 over the state's
    /// `rows` accumulator rows; `first` writes the partials alone.
    Accumulate {
        partials: u32,
        partials_stride: u32,
        partials_type: DType,
        state: u32,
        state_stride: u32,
        rescale: u32,
        rows: u32,
        cols: u32,
        first: bool,
    },
    /// Vector vertex: merges flash states of `rows + 2` rows, each at (address, row stride), into the
    /// f16 output ([`crate::numerics::combine`]).
    Combine {
        states: Vec<(u32, u32)>,
        out: u32,
        out_stride: u32,
        rows: u32,
        cols: u32,
        scale_bits: u32,
    },
    /// Starts exchange phase `phase`, which lasts `horizon` cycles.
    Exchange { phase: ExchangeId, horizon: u32 },
    /// Sends bytes `skip..skip+bytes` of the stream read from `run`, one word per cycle from cycle
    /// `start` of the phase; two words per cycle when `wide`, over the supertile pair's shared bus
    /// (the pair mate must not send meanwhile).
    Send {
        start: u32,
        skip: u32,
        bytes: u32,
        run: Run,
        wide: bool,
    },
    /// Switches the receive mux to `from` at cycle `switch`, then stores the bytes that `from` sends from
    /// cycle `sent` (arriving `transit` cycles later) as bytes `skip..skip+bytes` of the stream written
    /// to `run`. `wide` receives a wide send at two words per cycle: the pair mate must not receive
    /// meanwhile, unless it receives the same data.
    Receive {
        switch: u32,
        from: TileId,
        sent: u32,
        skip: u32,
        bytes: u32,
        run: Run,
        wide: bool,
    },
    /// Ends a superstep: wait for every tile.
    Sync,
}

impl std::fmt::Display for Instr {
    /// The stable text form used in dumps.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let run = |r: &Run| {
            if r.count == 1 {
                format!("{:#x}+{}", r.offset, r.bytes)
            } else {
                format!("{:#x}+{}x{}/{}", r.offset, r.count, r.bytes, r.stride)
            }
        };
        match self {
            Instr::Amp {
                a,
                a_stride,
                b,
                b_stride,
                partials,
                partials_stride,
                partials_type,
                rows,
                depth,
                cols,
            } => write!(
                f,
                "amp {rows}x{depth}x{cols} a={a:#x}/{a_stride} b={b:#x}/{b_stride} partials={partials:#x}/{partials_stride} {partials_type}"
            ),
            Instr::Epilogue {
                partials,
                partials_type,
                bias,
                out,
                out_stride,
                rows,
                cols,
                gelu,
            } => {
                let parts: Vec<String> = partials
                    .iter()
                    .map(|(a, stride)| format!("{a:#x}/{stride}"))
                    .collect();
                let parts = match parts.as_slice() {
                    [one] => one.clone(),
                    many => format!("[{}]", many.join(",")),
                };
                write!(f, "epilogue {rows}x{cols} partials={parts} {partials_type}")?;
                if let Some(b) = bias {
                    write!(f, " bias={b:#x}")?;
                }
                write!(
                    f,
                    " out={out:#x}/{out_stride}{}",
                    if *gelu { " gelu" } else { "" }
                )
            }
            Instr::Softmax {
                scores,
                scores_stride,
                scores_type,
                probabilities,
                probabilities_stride,
                state,
                state_stride,
                rescale,
                keys,
                queries,
                head_dim,
                mask,
                first,
                scale_bits,
            } => {
                write!(
                    f,
                    "softmax {keys}x{queries} scores={scores:#x}/{scores_stride} {scores_type} \
                     probabilities={probabilities:#x}/{probabilities_stride} \
                     state={state:#x}/{state_stride}+{head_dim} rescale={rescale:#x} scale={}",
                    f32::from_bits(*scale_bits)
                )?;
                if let Some((k, q)) = mask {
                    write!(f, " causal(key{k}, query{q})")?;
                }
                if *first {
                    write!(f, " first")?;
                }
                Ok(())
            }
            Instr::Accumulate {
                partials,
                partials_stride,
                partials_type,
                state,
                state_stride,
                rescale,
                rows,
                cols,
                first,
            } => write!(
                f,
                "accumulate {rows}x{cols} partials={partials:#x}/{partials_stride} {partials_type} \
                 state={state:#x}/{state_stride} rescale={rescale:#x}{}",
                if *first { " first" } else { "" }
            ),
            Instr::Combine {
                states,
                out,
                out_stride,
                rows,
                cols,
                scale_bits,
            } => {
                let states: Vec<String> = states
                    .iter()
                    .map(|(a, stride)| format!("{a:#x}/{stride}"))
                    .collect();
                write!(
                    f,
                    "combine {rows}x{cols} states=[{}] out={out:#x}/{out_stride} scale={}",
                    states.join(","),
                    f32::from_bits(*scale_bits)
                )
            }
            Instr::Exchange { phase, horizon } => write!(f, "exchange {phase} horizon={horizon}"),
            Instr::Send {
                start,
                skip,
                bytes,
                run: r,
                wide,
            } => {
                write!(
                    f,
                    "  send @{start} {bytes}B+{skip} from {}{}",
                    run(r),
                    if *wide { " wide" } else { "" }
                )
            }
            Instr::Receive {
                switch,
                from,
                sent,
                skip,
                bytes,
                run: r,
                wide,
            } => write!(
                f,
                "  receive @{switch} from {from} sent@{sent} {bytes}B+{skip} to {}{}",
                run(r),
                if *wide { " wide" } else { "" }
            ),
            Instr::Sync => write!(f, "sync"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TileProgram {
    pub tile: TileId,
    pub instrs: Vec<Instr>,
}

impl TileProgram {
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).expect("tile programs serialise")
    }

    pub fn decode(bytes: &[u8]) -> Result<TileProgram, rmp_serde::decode::Error> {
        rmp_serde::from_slice(bytes)
    }

    pub fn syncs(&self) -> usize {
        self.instrs
            .iter()
            .filter(|i| matches!(i, Instr::Sync))
            .count()
    }
}

/// A rectangle of a value the host writes into tile memory (or reads back), stored rows `stride` bytes
/// apart from `address`; `transposed` stores one row per column of the rectangle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTransfer {
    pub value: crate::ids::ValueId,
    pub rect: crate::ir::Rect,
    pub tile: TileId,
    pub address: u32,
    pub stride: u32,
    pub transposed: bool,
}

impl HostTransfer {
    /// The stored rows: (element indices into the row-major value of `cols` columns, tile address).
    pub fn stored_rows(&self, cols: u32) -> impl Iterator<Item = (Vec<usize>, u32)> + '_ {
        let r = self.rect;
        let count = if self.transposed { r.cols() } else { r.rows() };
        (0..count).map(move |i| {
            let elements: Vec<usize> = if self.transposed {
                (r.row0..r.row1)
                    .map(|row| (row * cols + r.col0 + i) as usize)
                    .collect()
            } else {
                let start = ((r.row0 + i) * cols + r.col0) as usize;
                (start..start + r.cols() as usize).collect()
            };
            (elements, self.address + i * self.stride)
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
