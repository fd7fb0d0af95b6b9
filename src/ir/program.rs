//! The program (`selected`): the chosen plan as buffers on tiles with their lifetimes, supersteps,
//! exchange phases as transfer lists, compute sets of vertices and the host streams. Written by
//! `select_finalist`, read by every later phase.

use crate::exchange::{Pattern, PatternTransfer};
use crate::ids::{BufferId, ExchangeId, OpId, StepId, TileId, ValueId};
use crate::ir::{
    AttentionPartition, AttentionShape, DType, Graph, Grid, Operator, Partition, Rect,
};
use crate::isa::{Run, VertexKind};
use crate::target::Target;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How grid cell (row block, column block) maps to a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    RowMajor,
    ColumnMajor,
    /// The column blocks of a (row block, depth block) adjacent: the tiles that gather the same
    /// activation panel sit on supertile pairs, which receive it at two words a cycle.
    SharedPanels,
}

impl Mapping {
    /// The name in flags and tables: `shared-panels`.
    pub fn name(self) -> &'static str {
        match self {
            Mapping::RowMajor => "row-major",
            Mapping::ColumnMajor => "column-major",
            Mapping::SharedPanels => "shared-panels",
        }
    }

    /// The tile of a grid cell: row-major and column-major order the output blocks, with the depth
    /// blocks of an output block adjacent; shared panels put the column blocks innermost.
    pub fn tile(self, p: &Grid, row_block: u32, col_block: u32, depth_block: u32) -> TileId {
        let block = match self {
            Mapping::RowMajor => row_block * p.col_blocks + col_block,
            Mapping::ColumnMajor => col_block * p.row_blocks + row_block,
            Mapping::SharedPanels => {
                return TileId(
                    (row_block * p.depth_blocks + depth_block) * p.col_blocks + col_block,
                );
            }
        };
        TileId(block * p.depth_blocks + depth_block)
    }

    /// Where each visible (query block, key block) cell of an attention group sits among the group's
    /// tiles (`[query][key]`): key blocks adjacent (row-major) or query blocks adjacent
    /// (column-major), where paired columns leave a tile idle after a column of odd length. Tiles
    /// the cells leave over stay idle.
    pub fn attention_cells(self, p: &AttentionPartition, shape: &AttentionShape) -> Vec<Vec<u32>> {
        let mut cells: Vec<Vec<u32>> = (0..p.query_blocks)
            .map(|q| vec![0; p.visible_blocks(shape, q) as usize])
            .collect();
        let mut next = 0;
        match self {
            Mapping::RowMajor | Mapping::SharedPanels => {
                for cell in cells.iter_mut().flatten() {
                    *cell = next;
                    next += 1;
                }
            }
            Mapping::ColumnMajor => {
                for k in 0..p.key_blocks {
                    for row in cells.iter_mut() {
                        if let Some(cell) = row.get_mut(k as usize) {
                            *cell = next;
                            next += 1;
                        }
                    }
                    if p.paired_columns {
                        next = next.next_multiple_of(2);
                    }
                }
            }
        }
        cells
    }
}

/// What names a buffer, kept in the package for the device's fault messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferLabel {
    pub id: BufferId,
    pub class: BufferClass,
    pub value: ValueId,
    pub rect: Rect,
    pub transposed: bool,
}

impl std::fmt::Display for BufferLabel {
    /// `buf12 APanel of v4 [0..23, 0..1152]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} of {} {}{}",
            self.id,
            self.class,
            self.value,
            self.rect,
            if self.transposed { " transposed" } else { "" }
        )
    }
}

/// What a buffer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferClass {
    /// A piece of a weight, streamed at `initialize`, resident across runs.
    WeightHome,
    /// A piece of the input, streamed at `run`.
    InputHome,
    /// The rows an AMP streams: a matmul's block rows of `a` over its depth block in the normal form,
    /// its block columns of the weights `b` (transposed) in the transposed form; a layer norm's rows.
    APanel,
    /// The AMP's stationary operand, read by 128-bit weight loads: a matmul's depth block of the
    /// weights `b` over its block columns in the normal form, its block rows of `a` (transposed) in the
    /// transposed form.
    BPanel,
    /// An operator's bias for its block columns (a layer norm's gamma and beta; an attention's key
    /// mask for its keys; a vector operator's row, column or value spread over its rows).
    BiasPanel,
    /// A matmul epilogue's residual for its share of the output block; a vector operator's second
    /// whole operand.
    Residual,
    /// AMP partials.
    Partials,
    /// A share of the rows of another depth block's partials, to be summed by the epilogue, in
    /// either region.
    PartialsShare,
    /// Attention: f16 probabilitiesᵀ of a key sub-block, the AMP's weights.
    Probabilities,
    /// Attention: the f32 rescale factor of each query for the current key sub-block.
    Rescale,
    /// Attention: a tile's f32 flash state, `head_dim` rows of accumulatorᵀ then the running max and
    /// the running sum, one column per query; with float partials, whose first key sub-block the
    /// AMP writes into the accumulator, stored as AMP partials are.
    FlashState,
    /// Another tile's flash state for a share of the same queries, received to be merged, in either
    /// region.
    FlashStateShare,
    /// A split layer norm's f32 moments of its column block's rows, two floats a row (the mean and
    /// the squared deviations), written by its compute set.
    Moments,
    /// Another column block's moments of the same rows, received.
    MomentsShare,
    /// An operator's f16 output block.
    Output,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    pub id: BufferId,
    pub tile: TileId,
    pub value: ValueId,
    pub class: BufferClass,
    /// The region of the value held; for tile-local scratch (scores, probabilities, rescale factors,
    /// flash states) the shape `[0..rows, 0..cols]` of the data instead, and for a flash state
    /// received to be merged, the columns `[0..rows, c0..c1]` of its share of the queries.
    pub rect: Rect,
    pub dtype: DType,
    /// Stored column-major: the rectangle's transpose, one stored row per column of the value.
    pub transposed: bool,
    /// Placed in interleaved memory, every stored row at 16 bytes: the AMP's partials and its
    /// stationary operand (read by 128-bit loads), an attention's probabilities, and its flash
    /// state when the AMP writes the accumulator.
    pub interleaved: bool,
    /// Stored row stride in elements: every stored row starts at the buffer's alignment.
    pub stride: u32,
    /// First and last step the buffer is live in (inclusive). Host-written buffers are live from step 0;
    /// buffers the host reads stay live to the last step.
    pub first_step: StepId,
    pub last_step: StepId,
}

impl Buffer {
    /// The run of `rect` inside the buffer, merged into one piece when the rows are contiguous.
    /// A transposed buffer stores the rectangle's columns as rows, so its run goes column by column.
    pub fn run(&self, rect: &Rect) -> Run {
        let elem = self.dtype.bytes();
        let (rows, cols) = if self.transposed {
            (rect.cols(), rect.rows())
        } else {
            (rect.rows(), rect.cols())
        };
        let bytes = cols * elem;
        let stride = self.stride * elem;
        let offset = self.offset(rect.row0, rect.col0);
        if bytes == stride || rows == 1 {
            Run {
                offset,
                bytes: bytes * rows,
                count: 1,
                stride: 0,
            }
        } else {
            Run {
                offset,
                bytes,
                count: rows,
                stride,
            }
        }
    }
    /// Stored rows and columns: the rectangle's, swapped when transposed.
    pub fn storage_rows(&self) -> u32 {
        if self.transposed {
            self.rect.cols()
        } else {
            self.rect.rows()
        }
    }
    pub fn storage_cols(&self) -> u32 {
        if self.transposed {
            self.rect.rows()
        } else {
            self.rect.cols()
        }
    }
    pub fn bytes(&self) -> u32 {
        self.storage_rows() * self.stride * self.dtype.bytes()
    }
    /// Byte offset of element (row, col) of the value inside this buffer.
    pub fn offset(&self, row: u32, col: u32) -> u32 {
        let (r, c) = (row - self.rect.row0, col - self.rect.col0);
        let (r, c) = if self.transposed { (c, r) } else { (r, c) };
        (r * self.stride + c) * self.dtype.bytes()
    }
    /// Byte offset of an operand's first element.
    pub fn operand_offset(&self, o: &Operand) -> u32 {
        (o.row * self.stride + o.col) * self.dtype.bytes()
    }
    pub fn needs_interleaved(&self) -> bool {
        self.interleaved
    }
    /// What the AMP writes owns whole memory elements, so an AMP's input and output never share
    /// one: partials, and a flash state in interleaved memory (whose accumulator the AMP writes
    /// with float partials).
    pub fn owns_elements(&self) -> bool {
        match self.class {
            BufferClass::Partials => true,
            BufferClass::FlashState => self.interleaved,
            _ => false,
        }
    }
    /// `buf12 APanel of v4 [0..23, 0..1152]`: how logs, errors and device faults name a buffer.
    pub fn describe(&self) -> String {
        self.label().to_string()
    }
    pub fn label(&self) -> BufferLabel {
        BufferLabel {
            id: self.id,
            class: self.class,
            value: self.value,
            rect: self.rect,
            transposed: self.transposed,
        }
    }
    pub fn alignment(&self) -> u32 {
        if self.needs_interleaved() { 16 } else { 8 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Destination {
    pub tile: TileId,
    pub buffer: BufferId,
}

/// One rectangle sent by one tile to one or more tiles (multicast) in an exchange phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub source: TileId,
    pub source_buffer: BufferId,
    pub value: ValueId,
    pub rect: Rect,
    pub destinations: Vec<Destination>,
    pub bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangePhase {
    pub id: ExchangeId,
    pub step: StepId,
    pub transfers: Vec<Transfer>,
    /// Endpoint lower bound of the phase in cycles (`crate::exchange`), the estimate used here.
    pub lower_bound: u32,
}

/// A vertex's view of a buffer: its stored rows and columns from (`row`, `col`) on, at the buffer's
/// stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operand {
    pub buffer: BufferId,
    pub row: u32,
    pub col: u32,
}

impl Operand {
    pub fn whole(buffer: BufferId) -> Operand {
        Operand {
            buffer,
            row: 0,
            col: 0,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vertex {
    pub tile: TileId,
    pub kind: VertexKind<Operand>,
    pub estimated_cycles: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeSet {
    pub step: StepId,
    pub operator: OpId,
    pub name: String,
    pub vertices: Vec<Vertex>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Step {
    Exchange(ExchangeId),
    Compute(u32),
}

/// A rectangle the host writes into (or reads from) a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostTransfer {
    pub value: ValueId,
    pub rect: Rect,
    pub tile: TileId,
    pub buffer: BufferId,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectedEstimate {
    pub cycles: u64,
    pub compute_cycles: u64,
    pub exchange_cycles: u64,
    pub sync_cycles: u64,
    /// Estimated cycles of every step, in program order.
    pub steps: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selected {
    pub workload: String,
    pub graph: Graph,
    pub operators: Vec<Operator>,
    pub finalist: u32,
    pub mapping: Mapping,
    pub partitions: Vec<Partition>,
    pub buffers: Vec<Buffer>,
    pub steps: Vec<Step>,
    pub exchanges: Vec<ExchangePhase>,
    pub compute_sets: Vec<ComputeSet>,
    pub initialize: Vec<HostTransfer>,
    pub run_inputs: Vec<HostTransfer>,
    pub run_outputs: Vec<HostTransfer>,
    pub estimate: SelectedEstimate,
}

/// Schema 10: flash states received to be merged are `FlashStateShare`; a flash state the AMP
/// writes is interleaved; 9: a matmul's weights side by side (`MatMulPart`); 8: a split layer
/// norm's `Moments` and `MomentsShare` buffers and its two vertex kinds.
impl crate::store::Artifact for Selected {
    const KIND: &'static str = "selected";
    const SCHEMA: u32 = 10;

    fn encode_body(&self, out: &mut crate::store::Encoded) {
        // Every field, in declaration order (the destructuring names them all).
        let Selected {
            workload,
            graph,
            operators,
            finalist,
            mapping,
            partitions,
            buffers,
            steps,
            exchanges,
            compute_sets,
            initialize,
            run_inputs,
            run_outputs,
            estimate,
        } = self;
        out.array_len(14);
        out.value(workload);
        out.value(graph);
        out.value(operators);
        out.value(finalist);
        out.value(mapping);
        out.value(partitions);
        out.list(buffers);
        out.value(steps);
        out.list(exchanges);
        out.list(compute_sets);
        out.value(initialize);
        out.value(run_inputs);
        out.value(run_outputs);
        out.value(estimate);
    }
}

impl ExchangePhase {
    /// The phase's transfer pattern: endpoints and word counts.
    pub fn pattern(&self, target: &Target) -> Pattern {
        Pattern {
            transfers: self
                .transfers
                .iter()
                .map(|t| PatternTransfer {
                    source: t.source.0,
                    destinations: t.destinations.iter().map(|d| d.tile.0).collect(),
                    words: target.exchange_words(u64::from(t.bytes)) as u32,
                })
                .collect(),
        }
    }
}

impl Selected {
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let e = &self.estimate;
        let _ = writeln!(
            s,
            "selected {} finalist={} mapping={:?} estimated_cycles={} compute={} exchange={} sync={}",
            self.workload,
            self.finalist,
            self.mapping,
            e.cycles,
            e.compute_cycles,
            e.exchange_cycles,
            e.sync_cycles
        );
        for (o, p) in self.operators.iter().zip(&self.partitions) {
            let _ = writeln!(s, "  {} {}: {p}", o.id(), o.name());
        }
        let mut by_class: BTreeMap<BufferClass, (u64, u64)> = BTreeMap::new();
        for b in &self.buffers {
            let e = by_class.entry(b.class).or_default();
            e.0 += 1;
            e.1 += u64::from(b.bytes());
        }
        for (class, (n, bytes)) in by_class {
            let _ = writeln!(s, "  buffers {class:?}: {n} holding {bytes} bytes");
        }
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::Exchange(id) => {
                    let ex = &self.exchanges[id.index()];
                    let multicast = ex
                        .transfers
                        .iter()
                        .filter(|t| t.destinations.len() > 1)
                        .count();
                    let bytes: u64 = ex.transfers.iter().map(|t| u64::from(t.bytes)).sum();
                    let _ = writeln!(
                        s,
                        "  step{i} exchange {}: transfers={} multicast={} bytes={} lower_bound={} estimate={}",
                        id,
                        ex.transfers.len(),
                        multicast,
                        bytes,
                        ex.lower_bound,
                        self.estimate.steps[i]
                    );
                }
                Step::Compute(c) => {
                    let cs = &self.compute_sets[*c as usize];
                    let _ = writeln!(
                        s,
                        "  step{i} compute {} ({}): vertices={} estimate={}",
                        cs.operator,
                        cs.name,
                        cs.vertices.len(),
                        self.estimate.steps[i]
                    );
                }
            }
        }
        let _ = writeln!(
            s,
            "  host: initialize={} run_inputs={} run_outputs={}",
            self.initialize.len(),
            self.run_inputs.len(),
            self.run_outputs.len()
        );
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer holding `rect` of a value, stored `transposed` or not, with `pad` elements of padding
    /// after every stored row.
    fn buffer(rect: Rect, dtype: DType, transposed: bool, pad: u32) -> Buffer {
        let cols = if transposed { rect.rows() } else { rect.cols() };
        Buffer {
            id: BufferId(0),
            tile: TileId(0),
            value: ValueId(0),
            class: BufferClass::APanel,
            rect,
            dtype,
            transposed,
            interleaved: false,
            stride: cols + pad,
            first_step: StepId(0),
            last_step: StepId(0),
        }
    }

    /// The bytes of a run, piece by piece.
    fn bytes_of(run: &Run) -> Vec<u32> {
        run.pieces().flat_map(|(at, n)| at..at + n).collect()
    }

    #[test]
    fn a_rectangles_run_is_the_bytes_its_elements_are_stored_at() {
        let whole = Rect::new(3, 9, 5, 12);
        for (dtype, transposed, pad) in [
            (DType::F16, false, 0),
            (DType::F16, false, 3),
            (DType::F32, true, 0),
            (DType::F32, true, 2),
            (DType::F16, true, 1),
        ] {
            let buf = buffer(whole, dtype, transposed, pad);
            let elem = dtype.bytes();
            // Pieces that tile the buffer's rectangle, whole rows, whole columns and single cells
            // among them.
            let pieces = [
                Rect::new(3, 4, 5, 12),
                Rect::new(4, 9, 5, 6),
                Rect::new(4, 6, 6, 12),
                Rect::new(6, 9, 6, 11),
                Rect::new(6, 7, 11, 12),
                Rect::new(7, 9, 11, 12),
            ];
            let mut seen = vec![false; buf.bytes() as usize];
            for rect in pieces {
                let run = buf.run(&rect);
                let mut want: Vec<u32> = (rect.row0..rect.row1)
                    .flat_map(|r| (rect.col0..rect.col1).map(move |c| (r, c)))
                    .flat_map(|(r, c)| {
                        let at = buf.offset(r, c);
                        at..at + elem
                    })
                    .collect();
                want.sort_unstable();
                let mut have = bytes_of(&run);
                have.sort_unstable();
                assert_eq!(
                    have, want,
                    "{rect} in {dtype:?} transposed={transposed} pad={pad}"
                );
                assert_eq!(run.total(), Some(rect.elements() as u32 * elem));
                assert!(run.end().is_some_and(|end| end <= buf.bytes()));
                for b in have {
                    assert!(
                        !std::mem::replace(&mut seen[b as usize], true),
                        "byte {b} twice"
                    );
                }
            }
            // Without padding, the pieces fill the buffer.
            if pad == 0 {
                assert!(seen.iter().all(|&s| s), "{dtype:?} transposed={transposed}");
            }
        }
    }
}
