//! The program builder: one finalist plan under one tile mapping, built into a program of the mid's
//! operators, all of them or its first ones.
//!
//! Contract: [`build`] lays down the home pieces of the weights and host-supplied values the matmuls
//! and layer norms read first (each on the grid of the operator that first reads it), then, in the
//! mid's operator order, each operator's supersteps as [`super::matmul`], [`super::layer_norm`],
//! [`super::vector`], [`super::assemble`] and [`super::attention`] plan them (an attention makes its own home pieces first), and costs the
//! result ([`super::estimate`]). The [`Builder`] hands out
//! dense ids in order of creation: buffers as they are made, exchange phases and compute sets as they
//! are appended as the next step. A gather reads every buffer holding part of a value (its home
//! pieces or its producer's output blocks) and extends the holder's lifetime to the gathering step;
//! an operator's outputs become its value's holders, and the host reads them when the value is a
//! graph output or a host operation's input (`Graph::host_reads`). The same plan, mapping and target give the same program.

mod replicate;

use super::estimate::estimate;
use crate::exchange::Overheads;
use crate::ids::{BufferId, ExchangeId, OpId, StepId, TileId, ValueId};
use crate::ir::{
    Buffer, BufferClass, ComputeSet, DType, Destination, ExchangePhase, Graph, HostTransfer,
    Layers, Mapping, Operator, Orders, Partition, Rect, Selected, Step, Transfer, ValueRole,
    Vertex, value_orders,
};
use crate::target::Target;
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::collections::hash_map::Entry;

/// Transfers of a phase being built: (source buffer, rectangle, destination) triples, grouped into
/// multicast transfers by (source buffer, rectangle) when the phase is appended.
#[derive(Default)]
pub(super) struct Groups(Vec<(BufferId, Rect, Destination)>);

impl Groups {
    /// Sends `rect` of buffer `source` to `destination`.
    pub(super) fn send(&mut self, source: BufferId, rect: Rect, destination: Destination) {
        self.0.push((source, rect, destination));
    }
}

/// An exchange phase of the program under construction.
pub(super) enum Pending {
    /// Its superstep and sends.
    Sends(StepId, Groups),
    Made(ExchangePhase),
}

impl Pending {
    /// The phase, made (from its sends, as the program's `i`th) if it was not.
    pub(super) fn made(self, i: usize, buffers: &[Buffer], target: &Target) -> ExchangePhase {
        match self {
            Pending::Sends(step, groups) => {
                exchange_phase(ExchangeId::from_index(i), step, groups, buffers, target)
            }
            Pending::Made(phase) => phase,
        }
    }
}

/// The program under construction.
pub(super) struct Builder<'a> {
    pub(super) graph: &'a Graph,
    pub(super) target: &'a Target,
    pub(super) mapping: Mapping,
    /// How each value is stored (`crate::ir::layout`).
    pub(super) orders: Orders,
    buffers: Vec<Buffer>,
    /// Resident weight panels by value, tile and rectangle: used where they lie, never gathered.
    resident: BTreeMap<(ValueId, TileId, Rect), BufferId>,
    /// Buffers holding each value's data that transfers may read, by value.
    holders: BTreeMap<ValueId, Holders>,
    initialize: Vec<HostTransfer>,
    run_inputs: Vec<HostTransfer>,
    run_outputs: Vec<HostTransfer>,
    steps: Vec<Step>,
    /// Each exchange phase: its superstep and sends, made into a phase once the program is whole,
    /// or made already (a copied layer's, `builder/replicate.rs`).
    exchanges: Vec<Pending>,
    compute_sets: Vec<ComputeSet>,
    last_step: u32,
}

/// The supersteps of one operator: the exchange gathering its operands and the compute set after
/// it; when its depth (matmul) or its keys (attention) are split over tiles, a second exchange and
/// compute set that reduce the tiles' results, otherwise both are the first compute set.
#[derive(Clone, Copy)]
pub(super) struct Supersteps {
    pub(super) gather: u32,
    pub(super) compute: u32,
    pub(super) reduce_exchange: u32,
    pub(super) reduce: u32,
    pub(super) split: bool,
}

/// What an operator's blocks add to its supersteps, collected while they are built.
pub(super) struct Work {
    split: bool,
    /// The gathering exchange.
    pub(super) groups: Groups,
    /// The reducing exchange (split only).
    pub(super) reductions: Groups,
    /// The first compute set.
    pub(super) vertices: Vec<Vertex>,
    /// The reducing compute set (split only).
    reduce_vertices: Vec<Vertex>,
    /// The buffers holding the operator's result.
    pub(super) outputs: Vec<BufferId>,
}

impl Work {
    pub(super) fn new(split: bool) -> Work {
        Work {
            split,
            groups: Groups::default(),
            reductions: Groups::default(),
            vertices: Vec::new(),
            reduce_vertices: Vec::new(),
            outputs: Vec::new(),
        }
    }

    /// Adds a vertex that finishes a share of the output: to the reducing compute set when the
    /// operator is split, otherwise to the first.
    pub(super) fn finishing(&mut self, vertex: Vertex) {
        if self.split {
            self.reduce_vertices.push(vertex);
        } else {
            self.vertices.push(vertex);
        }
    }
}

impl Builder<'_> {
    /// A buffer of `class` live over the steps `[first, last]`, in interleaved memory if the class
    /// must be: the AMP's partials, its stationary operand and the attention's probabilities.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn buffer(
        &mut self,
        tile: TileId,
        value: ValueId,
        class: BufferClass,
        rect: Rect,
        dtype: DType,
        transposed: bool,
        [first, last]: [u32; 2],
    ) -> BufferId {
        let interleaved = matches!(
            class,
            BufferClass::Partials | BufferClass::BPanel | BufferClass::Probabilities
        );
        self.add(Buffer {
            id: BufferId::from_index(0),
            tile,
            value,
            class,
            rect,
            dtype,
            transposed,
            interleaved,
            stride: 0,
            first_step: StepId(first),
            last_step: StepId(last),
        })
    }

    /// Adds `buffer` with the next id and a row stride that starts every row at the buffer's
    /// alignment, so row-by-row loads stay aligned.
    fn add(&mut self, mut buffer: Buffer) -> BufferId {
        let id = BufferId::from_index(self.buffers.len());
        buffer.id = id;
        buffer.stride = aligned_stride(&buffer);
        self.buffers.push(buffer);
        id
    }

    /// Moves buffer `id` into interleaved memory, its rows at 16 bytes: a flash state the AMP
    /// writes.
    pub(super) fn interleave(&mut self, id: BufferId) {
        let b = &mut self.buffers[id.index()];
        b.interleaved = true;
        b.stride = aligned_stride(b);
    }

    /// A home piece of an input or weight, written by the host.
    pub(super) fn home(
        &mut self,
        tile: TileId,
        value: ValueId,
        rect: Rect,
        transposed: bool,
    ) -> BufferId {
        self.streamed(tile, value, rect, transposed, false, true)
    }

    /// A weight panel resident on `tile` for the whole program, streamed at `initialize`, in
    /// interleaved memory when it is the AMP's stationary operand. Replicas of a panel are many;
    /// one of them (`holder`) is what a gather of another operator reads.
    pub(super) fn resident_panel(
        &mut self,
        tile: TileId,
        value: ValueId,
        rect: Rect,
        [transposed, interleaved, holder]: [bool; 3],
    ) {
        let id = self.streamed(tile, value, rect, transposed, interleaved, holder);
        self.resident.insert((value, tile, rect), id);
    }

    /// A buffer the host writes: a weight's at `initialize`, live throughout, anything else's at
    /// every `run`; one that transfers may read when `holder`.
    fn streamed(
        &mut self,
        tile: TileId,
        value: ValueId,
        rect: Rect,
        transposed: bool,
        interleaved: bool,
        holder: bool,
    ) -> BufferId {
        let v = self.graph.value(value);
        let weight = v.role == ValueRole::Weight;
        let (class, last) = if weight {
            (BufferClass::WeightHome, self.last_step)
        } else {
            (BufferClass::InputHome, 0)
        };
        let id = self.add(Buffer {
            id: BufferId::from_index(0),
            tile,
            value,
            class,
            rect,
            dtype: v.dtype,
            transposed,
            interleaved,
            stride: 0,
            first_step: StepId(0),
            last_step: StepId(last),
        });
        if holder {
            self.holders.entry(value).or_default().push(rect, id);
        }
        let t = HostTransfer {
            value,
            rect,
            tile,
            buffer: id,
        };
        if weight {
            self.initialize.push(t)
        } else {
            self.run_inputs.push(t)
        }
        id
    }

    /// The resident panel of exactly `rect` of `value` on `tile`, if there is one.
    pub(super) fn resident_on(&self, value: ValueId, tile: TileId, rect: Rect) -> Option<BufferId> {
        self.resident.get(&(value, tile, rect)).copied()
    }

    /// The order `value` is stored in: transposed when the device reads it so.
    pub(super) fn transposed(&self, value: ValueId) -> bool {
        self.orders.read_order(value).unwrap_or(false)
    }

    /// Whether `value` needs home pieces: the host supplies it (an input or a host operation's
    /// result, streamed at `run`) and no buffer holds it yet.
    pub(super) fn needs_home(&self, value: ValueId) -> bool {
        self.graph.host_provides(value) && !self.is_held(value)
    }

    /// Whether some buffer already holds data of `value` that transfers may read.
    pub(super) fn is_held(&self, value: ValueId) -> bool {
        self.holders.contains_key(&value)
    }

    /// Transfers that fill `dest` (on `tile`) with `rect` of `value`, from every holder intersecting it.
    pub(super) fn gather(
        &mut self,
        value: ValueId,
        rect: Rect,
        dest: BufferId,
        step: u32,
        out: &mut Groups,
    ) {
        let tile = self.buffers[dest.index()].tile;
        let Some(holders) = self.holders.get_mut(&value) else {
            return;
        };
        for (h, piece) in holders.intersecting(rect) {
            out.send(h, piece, Destination { tile, buffer: dest });
            let b = &mut self.buffers[h.index()];
            b.last_step = b.last_step.max(StepId(step));
        }
    }

    /// The supersteps of the operator appended next, `split` when it reduces over tiles.
    pub(super) fn supersteps(&self, split: bool) -> Supersteps {
        let gather = self.steps.len() as u32;
        let compute = gather + 1;
        let (reduce_exchange, reduce) = if split {
            (compute + 1, compute + 2)
        } else {
            (compute, compute)
        };
        Supersteps {
            gather,
            compute,
            reduce_exchange,
            reduce,
            split,
        }
    }

    /// Appends an operator's supersteps from its `work` (the reducing pair, named with `reduction`,
    /// when split) and makes its outputs the holders of `values`, each of those buffers holding.
    pub(super) fn finish(
        &mut self,
        operator: OpId,
        name: &str,
        reduction: &str,
        values: &[ValueId],
        work: Work,
    ) {
        self.exchange(work.groups);
        self.compute(operator, name, work.vertices);
        if work.split {
            self.exchange(work.reductions);
            self.compute(
                operator,
                &format!("{name}.{reduction}"),
                work.reduce_vertices,
            );
        }
        for &value in values {
            let held = (work.outputs.iter().copied())
                .filter(|o| self.buffers[o.index()].value == value)
                .collect();
            self.outputs(value, held);
        }
    }

    /// Appends an exchange phase made of `groups` as the next step.
    fn exchange(&mut self, groups: Groups) {
        let id = ExchangeId::from_index(self.exchanges.len());
        (self.exchanges).push(Pending::Sends(StepId(self.steps.len() as u32), groups));
        self.steps.push(Step::Exchange(id));
    }

    /// Every exchange phase, those not made yet made from their sends side by side (a transfer
    /// reads only what its source buffer was made with: its tile, value and element type).
    fn exchange_phases(&mut self) -> Vec<ExchangePhase> {
        let (buffers, target) = (&self.buffers, self.target);
        (std::mem::take(&mut self.exchanges)
            .into_par_iter()
            .enumerate())
        .map(|(i, pending)| pending.made(i, buffers, target))
        .collect()
    }

    /// Appends a compute set as the next step.
    fn compute(&mut self, operator: OpId, name: &str, vertices: Vec<Vertex>) {
        self.steps
            .push(Step::Compute(self.compute_sets.len() as u32));
        self.compute_sets.push(ComputeSet {
            step: StepId(self.steps.len() as u32 - 1),
            operator,
            name: name.to_string(),
            vertices,
        });
    }

    /// Marks an operator's result buffers: they hold its value, and the host reads them when it is
    /// a graph output or a host operation reads it.
    fn outputs(&mut self, value: ValueId, outputs: Vec<BufferId>) {
        if self.graph.host_reads(value) {
            for &o in &outputs {
                let buf = &mut self.buffers[o.index()];
                buf.last_step = StepId(self.last_step);
                self.run_outputs.push(HostTransfer {
                    value,
                    rect: buf.rect,
                    tile: buf.tile,
                    buffer: o,
                });
            }
        }
        let mut holders = Holders::default();
        for o in outputs {
            holders.push(self.buffers[o.index()].rect, o);
        }
        self.holders.insert(value, holders);
    }
}

/// The buffers holding one value, with an index by rectangle built when first asked (and again
/// after a buffer is added): bands of rows, each from one holder's first row to the next, and in
/// each band the holders overlapping it by first column, with the running maximum of their ends.
#[derive(Default)]
struct Holders {
    held: Vec<(Rect, BufferId)>,
    index: Option<Vec<Band>>,
}

struct Band {
    row0: u32,
    /// (first column, running maximum of end columns, holder index), by first column.
    holders: Vec<(u32, u32, usize)>,
}

impl Holders {
    fn push(&mut self, rect: Rect, id: BufferId) {
        self.held.push((rect, id));
        self.index = None;
    }

    /// Every holder intersecting `rect`, each once, with the intersection, in the order added.
    fn intersecting(&mut self, rect: Rect) -> Vec<(BufferId, Rect)> {
        let held = &self.held;
        let bands = self.index.get_or_insert_with(|| {
            let mut starts: Vec<u32> = held.iter().map(|(r, _)| r.row0).collect();
            starts.sort_unstable();
            starts.dedup();
            let mut bands: Vec<Band> = starts
                .iter()
                .map(|&row0| Band {
                    row0,
                    holders: Vec::new(),
                })
                .collect();
            for (k, (r, _)) in held.iter().enumerate() {
                let first = starts.partition_point(|&s| s < r.row0);
                let last = starts.partition_point(|&s| s < r.row1);
                for band in &mut bands[first..last] {
                    band.holders.push((r.col0, r.col1, k));
                }
            }
            for band in &mut bands {
                band.holders.sort_unstable();
                let mut end = 0;
                for h in &mut band.holders {
                    end = end.max(h.1);
                    h.1 = end;
                }
            }
            bands
        });
        // The bands overlapping rect's rows: from the last starting at or before its first row.
        let first = bands
            .partition_point(|b| b.row0 <= rect.row0)
            .saturating_sub(1);
        let mut found: Vec<usize> = Vec::new();
        for band in bands[first..].iter().take_while(|b| b.row0 < rect.row1) {
            let from = band.holders.partition_point(|h| h.1 <= rect.col0);
            found.extend(
                band.holders[from..]
                    .iter()
                    .take_while(|h| h.0 < rect.col1)
                    .map(|h| h.2),
            );
        }
        found.sort_unstable();
        found.dedup();
        found
            .into_iter()
            .filter_map(|k| {
                let (r, id) = held[k];
                r.intersect(&rect).map(|piece| (id, piece))
            })
            .collect()
    }
}

/// At most `parts` chunks of `0..len`, each a multiple of `multiple` long but the last.
pub(super) fn chunks(len: u32, parts: u32, multiple: u32) -> Vec<(u32, u32)> {
    let width = len.div_ceil(parts).next_multiple_of(multiple).max(multiple);
    (0..parts)
        .map(|i| (i * width, ((i + 1) * width).min(len)))
        .filter(|(a, b)| a < b)
        .collect()
}

/// Supersteps an operator takes under a partition.
pub(super) fn steps_of(p: &Partition) -> u32 {
    match p {
        Partition::Attention(a) if a.key_blocks > 1 => 4,
        Partition::Grid(g) if g.depth_blocks > 1 => 4,
        _ => 2,
    }
}

/// The program of `operators` under one finalist plan (`partitions`, number `finalist`) under
/// `mapping`: the whole program for all of the mid's operators. With `layers` (the mid's, when they
/// repeat exactly), the middle layers are copies of the third ([`replicate`]): the same program;
/// and whether they were.
pub(super) fn build(
    graph: &Graph,
    operators: &[Operator],
    partitions: &[Partition],
    finalist: u32,
    mapping: Mapping,
    target: &Target,
    layers: Option<Layers>,
) -> (Selected, bool) {
    let mut b = Builder::new(graph, operators, partitions, mapping, target);
    let copied = b.lay_out(operators, partitions, layers);
    (b.into_selected(operators, partitions, finalist), copied)
}

impl<'a> Builder<'a> {
    fn new(
        graph: &'a Graph,
        operators: &[Operator],
        partitions: &[Partition],
        mapping: Mapping,
        target: &'a Target,
    ) -> Builder<'a> {
        Builder {
            graph,
            target,
            mapping,
            // lower_mid's verifier (run on the mid before any build) refuses a plan whose orders
            // clash.
            orders: value_orders(graph, operators, partitions)
                .unwrap_or_else(|_| Orders::new(graph)),
            buffers: Vec::new(),
            resident: BTreeMap::new(),
            holders: BTreeMap::new(),
            initialize: Vec::new(),
            run_inputs: Vec::new(),
            run_outputs: Vec::new(),
            steps: Vec::new(),
            exchanges: Vec::new(),
            compute_sets: Vec::new(),
            last_step: partitions.iter().map(steps_of).sum::<u32>() - 1,
        }
    }

    /// The homes, then every operator's supersteps in order, or with `layers` (five or more, ending
    /// the program) layers 3 to `count - 2` copied from layer 2: whether they were.
    fn lay_out(
        &mut self,
        operators: &[Operator],
        partitions: &[Partition],
        layers: Option<Layers>,
    ) -> bool {
        // Home pieces of weights and inputs, on the grid of the matmul that first reads them;
        // each operator's home buffers.
        let mut homes = Vec::with_capacity(operators.len());
        for (op, p) in operators.iter().zip(partitions) {
            let first = self.buffers.len();
            match (op, p) {
                (Operator::MatMul(op), Partition::Grid(p)) => self.matmul_homes(op, p),
                (Operator::LayerNorm(op), Partition::Grid(p)) => self.layer_norm_homes(op, p),
                (Operator::Vector(op), Partition::Grid(p)) => self.vector_homes(op, p),
                (Operator::Assemble(op), Partition::Grid(p)) => self.assemble_homes(op, p),
                _ => {}
            }
            homes.push(first..self.buffers.len());
        }
        let ops = || operators.iter().zip(partitions);
        let Some(l) = layers.filter(|l| l.count >= 5 && l.end() == operators.len()) else {
            ops().for_each(|(op, p)| self.operator(op, p));
            return false;
        };
        // Through layer 2, marking where layers 1 and 2 begin and where layer 2 ends; then the
        // copies, then the last layer (or, not copied, the rest).
        let layer = |k: u32| (l.start + k * l.period) as usize;
        let mut built = 0;
        let marks = [1, 2, 3].map(|k| {
            (ops().take(layer(k)).skip(built)).for_each(|(op, p)| self.operator(op, p));
            built = layer(k);
            self.mark()
        });
        let copied = self.replicated_layers(operators, l, marks, &homes);
        let next = layer(if copied { l.count - 1 } else { 3 });
        ops().skip(next).for_each(|(op, p)| self.operator(op, p));
        copied
    }

    /// The program laid out, its exchange phases made and costed.
    fn into_selected(
        mut self,
        operators: &[Operator],
        partitions: &[Partition],
        finalist: u32,
    ) -> Selected {
        let exchanges = self.exchange_phases();
        let estimate = estimate(&self.steps, &exchanges, &self.compute_sets, self.target);
        Selected {
            workload: self.graph.workload.clone(),
            graph: self.graph.clone(),
            operators: operators.to_vec(),
            finalist,
            mapping: self.mapping,
            partitions: partitions.to_vec(),
            buffers: self.buffers,
            steps: self.steps,
            exchanges,
            compute_sets: self.compute_sets,
            initialize: self.initialize,
            run_inputs: self.run_inputs,
            run_outputs: self.run_outputs,
            estimate,
        }
    }
}

impl Builder<'_> {
    /// Appends `op`'s supersteps under its partition `p`.
    fn operator(&mut self, op: &Operator, p: &Partition) {
        match (op, p) {
            (Operator::MatMul(op), Partition::Grid(p)) => self.matmul(op, p),
            (Operator::LayerNorm(op), Partition::Grid(p)) => self.layer_norm(op, p),
            (Operator::Vector(op), Partition::Grid(p)) => self.vector(op, p),
            (Operator::Assemble(op), Partition::Grid(p)) => self.assemble(op, p),
            (Operator::Attention(a), Partition::Attention(p)) => self.attention(a, p),
            // lower_mid's verifier pairs every operator with a partition of its kind.
            _ => unreachable!("{}: partition of another kind", op.id()),
        }
    }
}

/// The row stride, in elements, that starts every stored row of `b` at its alignment.
fn aligned_stride(b: &Buffer) -> u32 {
    b.storage_cols()
        .next_multiple_of(b.alignment() / b.dtype.bytes())
}

/// Exchange phase `id` at superstep `step`, made of `groups`: the sends grouped by (source buffer,
/// rectangle), the groups in that order and each group's destinations by (tile, buffer); grouping
/// first leaves far fewer, shorter lists to sort.
fn exchange_phase(
    id: ExchangeId,
    step: StepId,
    groups: Groups,
    buffers: &[Buffer],
    target: &Target,
) -> ExchangePhase {
    // Keys are small integers: a multiplicative hash is enough, and far cheaper than SipHash.
    let mut index: FxHashMap<(BufferId, Rect), usize> = FxHashMap::default();
    let mut grouped: Vec<((BufferId, Rect), Vec<Destination>)> = Vec::new();
    for (h, rect, d) in groups.0 {
        match index.entry((h, rect)) {
            Entry::Occupied(e) => grouped[*e.get()].1.push(d),
            Entry::Vacant(e) => {
                e.insert(grouped.len());
                grouped.push(((h, rect), vec![d]));
            }
        }
    }
    grouped.sort_unstable_by_key(|g| g.0);
    let transfers: Vec<Transfer> = grouped
        .into_iter()
        .map(|((h, rect), mut destinations)| {
            destinations.sort_unstable_by_key(|d| (d.tile, d.buffer));
            let src = &buffers[h.index()];
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
        step,
        transfers,
        lower_bound: 0,
    };
    phase.lower_bound = phase.pattern(target).lower_bound(Overheads::of(target));
    phase
}
