//! `select_finalist`: graph + mid + target -> `selected`.
//!
//! For every finalist plan and every tile mapping (grid cell to tile, row- or column-major), builds the
//! whole program: buffers on tiles with their lifetimes, supersteps (an exchange phase then a compute set
//! per operator), the exchange phases as transfer lists and the host streams; then costs it with the more
//! exact model (per-tile exchange load of the actual transfers, compute per tile) and keeps the cheapest.
//!
//! Storage layout: every buffer holds a rectangle of one value, row-major, every row at the buffer's
//! alignment (8 bytes; 16 for weight panels and partials). Weights and the input live in *home* pieces spread over the grid (weights persist across
//! runs); each operator gathers its A panel (its rows, all of `k`) and its B panel (all of `k`, its
//! columns) with multicast transfers from wherever those rectangles live.
//!
//! Invariants (checked by [`verify`]): every transfer's rectangle lies inside its source buffer and every
//! destination buffer; every panel is covered exactly once by its incoming transfers; every buffer read
//! in a step was written in an earlier step (or by the host) and is live across its uses; AMP partials and
//! weight panels are marked interleaved.

use crate::exchange::{Overheads, Pattern, PatternTransfer};
use crate::ids::{BufferId, ExchangeId, OpId, StepId, TileId, ValueId};
use crate::ir::{DType, Graph, Rect, ValueRole};
use crate::stages::lower_mid::{Mid, Operator, Partition};
use crate::target::Target;
use crate::verify::Verifier;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum MappingChoice {
    /// Try every mapping, keep the one with the least estimated cycles.
    Auto,
    RowMajor,
    ColumnMajor,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SelectFinalistConfig {
    pub mapping: MappingChoice,
}

/// How grid cell (row block, column block) maps to a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    RowMajor,
    ColumnMajor,
}

impl Mapping {
    fn tile(self, p: &Partition, row_block: u32, col_block: u32) -> TileId {
        TileId(match self {
            Mapping::RowMajor => row_block * p.col_blocks + col_block,
            Mapping::ColumnMajor => col_block * p.row_blocks + row_block,
        })
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
    /// An operator's A operand: its block rows, all of `k`.
    APanel,
    /// An operator's B operand (weights): all of `k`, its block columns. Read by 128-bit weight loads.
    BPanel,
    /// An operator's bias for its block columns.
    BiasPanel,
    /// AMP partials.
    Partials,
    /// An operator's f16 output block.
    Output,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    pub id: BufferId,
    pub tile: TileId,
    pub value: ValueId,
    pub class: BufferClass,
    pub rect: Rect,
    pub dtype: DType,
    /// Row stride in elements: every row starts at the buffer's alignment.
    pub stride: u32,
    /// First and last step the buffer is live in (inclusive). Host-written buffers are live from step 0;
    /// buffers the host reads stay live to the last step.
    pub first_step: StepId,
    pub last_step: StepId,
}

impl Buffer {
    pub fn bytes(&self) -> u32 {
        self.rect.rows() * self.stride * self.dtype.bytes()
    }
    /// Byte offset of element (row, col) of the value inside this buffer.
    pub fn offset(&self, row: u32, col: u32) -> u32 {
        ((row - self.rect.row0) * self.stride + (col - self.rect.col0)) * self.dtype.bytes()
    }
    pub fn needs_interleaved(&self) -> bool {
        matches!(self.class, BufferClass::Partials | BufferClass::BPanel)
    }
    /// Partials own whole memory elements, so an AMP's input and output never share one.
    pub fn owns_elements(&self) -> bool {
        self.class == BufferClass::Partials
    }
    /// `buf12 APanel of v4 [0..23, 0..1152]`: how logs, errors and device faults name a buffer.
    pub fn describe(&self) -> String {
        format!(
            "{} {:?} of {} {}",
            self.id, self.class, self.value, self.rect
        )
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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VertexKind {
    /// `partials = a · b` on the AMP.
    AmpMatMul {
        a: BufferId,
        b: BufferId,
        partials: BufferId,
        rows: u32,
        depth: u32,
        cols: u32,
    },
    /// `out = f16(gelu?(partials + bias?))` on the vector unit.
    Epilogue {
        partials: BufferId,
        bias: Option<BufferId>,
        out: BufferId,
        gelu: bool,
        rows: u32,
        cols: u32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vertex {
    pub tile: TileId,
    pub kind: VertexKind,
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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

impl crate::store::Artifact for Selected {
    const KIND: &'static str = "selected";
    const SCHEMA: u32 = 1;
}

#[derive(Debug, thiserror::Error)]
pub enum SelectFinalistError {
    #[error("mid has no finalist")]
    NoFinalist,
    #[error("select_finalist produced an invalid selection:\n{0}")]
    Invalid(String),
}

pub fn select_finalist(
    graph: &Graph,
    mid: &Mid,
    target: &Target,
    cfg: &SelectFinalistConfig,
) -> Result<Selected, SelectFinalistError> {
    let mappings: &[Mapping] = match cfg.mapping {
        MappingChoice::Auto => &[Mapping::RowMajor, Mapping::ColumnMajor],
        MappingChoice::RowMajor => &[Mapping::RowMajor],
        MappingChoice::ColumnMajor => &[Mapping::ColumnMajor],
    };
    let mut best: Option<Selected> = None;
    for (f, plan) in mid.finalists.iter().enumerate() {
        for &mapping in mappings {
            let s = build(graph, mid, &plan.partitions, f as u32, mapping, target);
            tracing::info!(
                finalist = f,
                mapping = ?mapping,
                analytical_cycles = plan.estimate.cycles,
                modelled_cycles = s.estimate.cycles,
                modelled_exchange_cycles = s.estimate.exchange_cycles,
                "modelled operator-plan finalist"
            );
            if best
                .as_ref()
                .is_none_or(|b| s.estimate.cycles < b.estimate.cycles)
            {
                best = Some(s);
            }
        }
    }
    let selected = best.ok_or(SelectFinalistError::NoFinalist)?;
    tracing::info!(
        selected = selected.finalist,
        mapping = ?selected.mapping,
        estimated_cycles = selected.estimate.cycles,
        estimated_exchange_cycles = selected.estimate.exchange_cycles,
        "selected operator-plan finalist"
    );
    let errors = verify(&selected, target);
    if !errors.is_empty() {
        return Err(SelectFinalistError::Invalid(errors.join("\n")));
    }
    Ok(selected)
}

/// Home pieces of a value: (row block, column block, rectangle) on the operator's grid.
type HomePieces = Vec<(u32, u32, Rect)>;

struct Builder {
    buffers: Vec<Buffer>,
    /// Buffers holding each value's data that transfers may read, by value.
    holders: BTreeMap<ValueId, Vec<BufferId>>,
}

impl Builder {
    fn buffer(
        &mut self,
        tile: TileId,
        value: ValueId,
        class: BufferClass,
        rect: Rect,
        dtype: DType,
        [first, last]: [u32; 2],
    ) -> BufferId {
        let id = BufferId::from_index(self.buffers.len());
        let mut buffer = Buffer {
            id,
            tile,
            value,
            class,
            rect,
            dtype,
            stride: 0,
            first_step: StepId(first),
            last_step: StepId(last),
        };
        // Every row starts at the buffer's alignment, so row-by-row loads stay aligned.
        buffer.stride = rect
            .cols()
            .next_multiple_of(buffer.alignment() / dtype.bytes());
        self.buffers.push(buffer);
        id
    }

    /// Transfers that fill `dest` (on `tile`) with `rect` of `value`, from every holder intersecting it.
    fn gather(
        &mut self,
        value: ValueId,
        rect: Rect,
        dest: BufferId,
        step: u32,
        out: &mut BTreeMap<(BufferId, Rect), Vec<Destination>>,
    ) {
        let tile = self.buffers[dest.index()].tile;
        for &h in self.holders.get(&value).map(Vec::as_slice).unwrap_or(&[]) {
            if let Some(piece) = self.buffers[h.index()].rect.intersect(&rect) {
                out.entry((h, piece))
                    .or_default()
                    .push(Destination { tile, buffer: dest });
                let b = &mut self.buffers[h.index()];
                b.last_step = b.last_step.max(StepId(step));
            }
        }
    }
}

/// Column chunk boundaries: `parts` chunks of a multiple of 16 columns covering `cols`.
fn chunks(len: u32, parts: u32, multiple: u32) -> Vec<(u32, u32)> {
    let width = len.div_ceil(parts).next_multiple_of(multiple).max(multiple);
    (0..parts)
        .map(|i| (i * width, ((i + 1) * width).min(len)))
        .filter(|(a, b)| a < b)
        .collect()
}

fn build(
    graph: &Graph,
    mid: &Mid,
    partitions: &[Partition],
    finalist: u32,
    mapping: Mapping,
    target: &Target,
) -> Selected {
    let mut b = Builder {
        buffers: Vec::new(),
        holders: BTreeMap::new(),
    };
    let ops = &mid.operators;
    let last_step = 2 * ops.len() as u32 - 1;
    let mut initialize = Vec::new();
    let mut run_inputs = Vec::new();
    let mut run_outputs = Vec::new();
    let mut steps = Vec::new();
    let mut exchanges = Vec::new();
    let mut compute_sets = Vec::new();

    // Home pieces of weights and inputs, on the grid of the operator that first reads them.
    for (op, p) in ops.iter().zip(partitions) {
        let homes: Vec<(ValueId, HomePieces)> = {
            let mut h = Vec::new();
            let bv = graph.value(op.b);
            if bv.role == ValueRole::Weight {
                let mut pieces = Vec::new();
                for cb in 0..p.col_blocks {
                    let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                    for (rb, (r0, r1)) in chunks(op.k, p.row_blocks, 1).into_iter().enumerate() {
                        pieces.push((rb as u32, cb, Rect::new(r0, r1, cols.0, cols.1)));
                    }
                }
                h.push((op.b, pieces));
            }
            if let Some(bias) = op.bias {
                let pieces = (0..p.col_blocks)
                    .map(|cb| {
                        (
                            0,
                            cb,
                            Rect::new(0, 1, cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n)),
                        )
                    })
                    .collect();
                h.push((bias, pieces));
            }
            let av = graph.value(op.a);
            if av.role == ValueRole::Input && !b.holders.contains_key(&op.a) {
                let mut pieces = Vec::new();
                for rb in 0..p.row_blocks {
                    let rows = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.m));
                    for (cb, (c0, c1)) in chunks(op.k, p.col_blocks, target.amp_block_width)
                        .into_iter()
                        .enumerate()
                    {
                        pieces.push((rb, cb as u32, Rect::new(rows.0, rows.1, c0, c1)));
                    }
                }
                h.push((op.a, pieces));
            }
            h
        };
        for (value, pieces) in homes {
            let role = graph.value(value).role;
            for (rb, cb, rect) in pieces {
                let tile = mapping.tile(p, rb, cb);
                let (class, last) = match role {
                    ValueRole::Weight => (BufferClass::WeightHome, last_step),
                    _ => (BufferClass::InputHome, 0),
                };
                let id = b.buffer(
                    tile,
                    value,
                    class,
                    rect,
                    graph.value(value).dtype,
                    [0, last],
                );
                b.holders.entry(value).or_default().push(id);
                let t = HostTransfer {
                    value,
                    rect,
                    tile,
                    buffer: id,
                };
                if role == ValueRole::Weight {
                    initialize.push(t)
                } else {
                    run_inputs.push(t)
                }
            }
        }
    }

    for (j, (op, p)) in ops.iter().zip(partitions).enumerate() {
        let ex_step = 2 * j as u32;
        let cs_step = ex_step + 1;
        let mut groups: BTreeMap<(BufferId, Rect), Vec<Destination>> = BTreeMap::new();
        let mut vertices = Vec::new();
        let mut outputs = Vec::new();
        for rb in 0..p.row_blocks {
            for cb in 0..p.col_blocks {
                let tile = mapping.tile(p, rb, cb);
                let rows = (rb * p.block_rows, ((rb + 1) * p.block_rows).min(op.m));
                let cols = (cb * p.block_cols, ((cb + 1) * p.block_cols).min(op.n));
                let (nr, nc) = (rows.1 - rows.0, cols.1 - cols.0);
                let a_rect = Rect::new(rows.0, rows.1, 0, op.k);
                let a = b.buffer(
                    tile,
                    op.a,
                    BufferClass::APanel,
                    a_rect,
                    DType::F16,
                    [ex_step, cs_step],
                );
                b.gather(op.a, a_rect, a, ex_step, &mut groups);
                let b_rect = Rect::new(0, op.k, cols.0, cols.1);
                let bp = b.buffer(
                    tile,
                    op.b,
                    BufferClass::BPanel,
                    b_rect,
                    DType::F16,
                    [ex_step, cs_step],
                );
                b.gather(op.b, b_rect, bp, ex_step, &mut groups);
                let bias = op.bias.map(|bias| {
                    let rect = Rect::new(0, 1, cols.0, cols.1);
                    let id = b.buffer(
                        tile,
                        bias,
                        BufferClass::BiasPanel,
                        rect,
                        DType::F16,
                        [ex_step, cs_step],
                    );
                    b.gather(bias, rect, id, ex_step, &mut groups);
                    id
                });
                let out_rect = Rect::new(rows.0, rows.1, cols.0, cols.1);
                let partials = b.buffer(
                    tile,
                    op.out,
                    BufferClass::Partials,
                    out_rect,
                    op.partials,
                    [cs_step, cs_step],
                );
                let amp = VertexKind::AmpMatMul {
                    a,
                    b: bp,
                    partials,
                    rows: nr,
                    depth: op.k,
                    cols: nc,
                };
                vertices.push(Vertex {
                    tile,
                    estimated_cycles: target.amp_cycles(nr, op.k, nc, op.partials),
                    kind: amp,
                });
                let out = if op.has_epilogue() {
                    let out = b.buffer(
                        tile,
                        op.out,
                        BufferClass::Output,
                        out_rect,
                        DType::F16,
                        [cs_step, cs_step],
                    );
                    let (ops_per, trans) = op.epilogue_ops();
                    vertices.push(Vertex {
                        tile,
                        estimated_cycles: target.vector_cycles(
                            u64::from(nr * nc),
                            DType::F16,
                            ops_per,
                            trans,
                        ),
                        kind: VertexKind::Epilogue {
                            partials,
                            bias,
                            out,
                            gelu: op.gelu,
                            rows: nr,
                            cols: nc,
                        },
                    });
                    out
                } else {
                    partials
                };
                outputs.push(out);
            }
        }
        let id = ExchangeId::from_index(exchanges.len());
        let transfers: Vec<Transfer> = groups
            .into_iter()
            .map(|((h, rect), mut destinations)| {
                destinations.sort_by_key(|d| (d.tile, d.buffer));
                let src = &b.buffers[h.index()];
                Transfer {
                    source: src.tile,
                    source_buffer: h,
                    value: src.value,
                    rect,
                    destinations,
                    bytes: rect.rows() * rect.cols() * src.dtype.bytes(),
                }
            })
            .collect();
        let mut phase = ExchangePhase {
            id,
            step: StepId(ex_step),
            transfers,
            lower_bound: 0,
        };
        phase.lower_bound = phase.pattern(target).lower_bound(Overheads::of(target));
        exchanges.push(phase);
        steps.push(Step::Exchange(id));
        steps.push(Step::Compute(compute_sets.len() as u32));
        compute_sets.push(ComputeSet {
            step: StepId(cs_step),
            operator: op.id,
            name: op.name.clone(),
            vertices,
        });
        // The operator's outputs become the holders of its value.
        let is_output = graph.value(op.out).role == ValueRole::Output;
        for &o in &outputs {
            let buf = &mut b.buffers[o.index()];
            if is_output {
                buf.last_step = StepId(last_step);
                run_outputs.push(HostTransfer {
                    value: op.out,
                    rect: buf.rect,
                    tile: buf.tile,
                    buffer: o,
                });
            }
        }
        b.holders.insert(op.out, outputs);
    }

    let estimate = estimate(&steps, &exchanges, &compute_sets, target);
    Selected {
        workload: graph.workload.clone(),
        graph: graph.clone(),
        operators: ops.clone(),
        finalist,
        mapping,
        partitions: partitions.to_vec(),
        buffers: b.buffers,
        steps,
        exchanges,
        compute_sets,
        initialize,
        run_inputs,
        run_outputs,
        estimate,
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

fn estimate(
    steps: &[Step],
    exchanges: &[ExchangePhase],
    compute_sets: &[ComputeSet],
    target: &Target,
) -> SelectedEstimate {
    let mut per_step = Vec::new();
    let (mut compute, mut exchange) = (0, 0);
    for step in steps {
        let cycles = match step {
            Step::Exchange(id) => {
                let c = u64::from(exchanges[id.index()].lower_bound);
                exchange += c;
                c
            }
            Step::Compute(i) => {
                let mut per_tile: BTreeMap<TileId, u64> = BTreeMap::new();
                for v in &compute_sets[*i as usize].vertices {
                    *per_tile.entry(v.tile).or_default() += v.estimated_cycles;
                }
                let c = per_tile.values().copied().max().unwrap_or(0);
                compute += c;
                c
            }
        };
        per_step.push(cycles);
    }
    let sync = steps.len() as u64 * target.sync_cycles;
    SelectedEstimate {
        cycles: compute + exchange + sync,
        compute_cycles: compute,
        exchange_cycles: exchange,
        sync_cycles: sync,
        steps: per_step,
    }
}

/// Checks a selection; returns every problem found.
pub fn verify(s: &Selected, target: &Target) -> Vec<String> {
    let mut v = Verifier::default();
    for buf in &s.buffers {
        v.check(buf.tile.0 < target.tiles, || {
            format!(
                "{}: on {} beyond the {} tiles",
                buf.id, buf.tile, target.tiles
            )
        });
        v.check(buf.first_step <= buf.last_step, || {
            format!(
                "{}: lifetime {}..{} is empty",
                buf.id, buf.first_step, buf.last_step
            )
        });
        v.check(!buf.rect.is_empty(), || {
            format!("{}: empty rectangle", buf.id)
        });
        v.check(
            (buf.stride * buf.dtype.bytes()).is_multiple_of(buf.alignment())
                && buf.stride >= buf.rect.cols(),
            || {
                format!(
                    "{}: stride {} elements breaks its {}-byte row alignment",
                    buf.id,
                    buf.stride,
                    buf.alignment()
                )
            },
        );
    }
    // Coverage of every gathered buffer, and liveness of sources and destinations.
    let mut incoming: Vec<Vec<Rect>> = vec![Vec::new(); s.buffers.len()];
    for ex in &s.exchanges {
        for t in &ex.transfers {
            let src = &s.buffers[t.source_buffer.index()];
            v.check(
                src.tile == t.source && src.value == t.value && src.rect.contains(&t.rect),
                || {
                    format!(
                        "{} transfer from {} {}: {} {} not inside {}",
                        ex.id, t.source, src.id, t.value, t.rect, src.rect
                    )
                },
            );
            v.check(
                src.first_step < ex.step || src.first_step == StepId(0),
                || {
                    format!(
                        "{}: source {} is written in {} after it is sent",
                        ex.id, src.id, src.first_step
                    )
                },
            );
            v.check(src.last_step >= ex.step, || {
                format!(
                    "{}: source {} dies at {} before it is sent",
                    ex.id, src.id, src.last_step
                )
            });
            v.check(
                t.bytes == t.rect.rows() * t.rect.cols() * src.dtype.bytes(),
                || format!("{}: transfer bytes", ex.id),
            );
            for d in &t.destinations {
                let dst = &s.buffers[d.buffer.index()];
                v.check(
                    dst.tile == d.tile && dst.value == t.value && dst.rect.contains(&t.rect),
                    || {
                        format!(
                            "{} transfer {} -> {} {}: {} not inside {}",
                            ex.id, t.source, d.tile, dst.id, t.rect, dst.rect
                        )
                    },
                );
                v.check(dst.first_step == ex.step, || {
                    format!(
                        "{}: destination {} is not born in this phase",
                        ex.id, dst.id
                    )
                });
                incoming[d.buffer.index()].push(t.rect);
            }
        }
    }
    for buf in &s.buffers {
        if !matches!(
            buf.class,
            BufferClass::APanel | BufferClass::BPanel | BufferClass::BiasPanel
        ) {
            continue;
        }
        let rects = &incoming[buf.id.index()];
        let covered: u64 = rects.iter().map(Rect::elements).sum();
        v.check(covered == buf.rect.elements(), || {
            format!(
                "{} on {}: incoming transfers cover {covered} of {} elements",
                buf.id,
                buf.tile,
                buf.rect.elements()
            )
        });
        for (i, a) in rects.iter().enumerate() {
            for b in &rects[i + 1..] {
                v.check(a.intersect(b).is_none(), || {
                    format!("{} on {}: transfers {a} and {b} overlap", buf.id, buf.tile)
                });
            }
        }
    }
    for cs in &s.compute_sets {
        for vx in &cs.vertices {
            let (reads, writes): (Vec<BufferId>, Vec<BufferId>) = match &vx.kind {
                VertexKind::AmpMatMul { a, b, partials, .. } => (vec![*a, *b], vec![*partials]),
                VertexKind::Epilogue {
                    partials,
                    bias,
                    out,
                    ..
                } => (
                    std::iter::once(*partials).chain(*bias).collect(),
                    vec![*out],
                ),
            };
            for r in reads.iter().chain(&writes) {
                let buf = &s.buffers[r.index()];
                v.check(buf.tile == vx.tile, || {
                    format!(
                        "{}: vertex on {} uses {} on {}",
                        cs.step, vx.tile, buf.id, buf.tile
                    )
                });
                v.check(
                    buf.first_step <= cs.step && buf.last_step >= cs.step,
                    || {
                        format!(
                            "{}: vertex on {} uses {} outside its lifetime {}..{}",
                            cs.step, vx.tile, buf.id, buf.first_step, buf.last_step
                        )
                    },
                );
            }
            if let VertexKind::AmpMatMul { partials, b, .. } = &vx.kind {
                v.check(
                    s.buffers[partials.index()].needs_interleaved()
                        && s.buffers[b.index()].needs_interleaved(),
                    || {
                        format!(
                            "{}: AMP on {} has operands outside interleaved memory",
                            cs.step, vx.tile
                        )
                    },
                );
            }
        }
    }
    v.finish()
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
            let _ = writeln!(
                s,
                "  {} {}: {}x{} blocks of {}x{}",
                o.id, o.name, p.row_blocks, p.col_blocks, p.block_rows, p.block_cols
            );
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
