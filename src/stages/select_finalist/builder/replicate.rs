//! Identical layers built once: the whole program of a mid whose layers repeat exactly
//! (`super::super::model_layers`) has the middle ones copied from the third, not built again.
//!
//! Contract: [`Builder::replicated_layers`] is called with layers 0 to 2 built (their marks taken
//! where each began and ended) and the homes of every operator laid; it appends layers 3 to
//! `count - 2` as copies of layer 2, each exactly what building its operators would append: every
//! buffer, host stream entry, superstep, exchange phase and compute set of layer 2, renamed. Layer
//! `2 + n`'s own buffers and those of the layer before it are layer 2's and layer 1's moved by `n`
//! layers' worth of ids, its weights' home pieces the same pieces of its own operators' homes, any
//! other buffer (an input's home pieces every layer reads) itself; steps move by `n` layers of
//! steps but step 0 (written by the host) and the last step (live throughout); values and operators
//! are those of the operator in the same place in its layer. Layer 2's exchange phases are made
//! when it is copied, and each copy is made from them, not from its sends: a transfer renamed (its
//! destinations and the phase's transfers sorted again, as making a phase sorts them), the lower
//! bound kept (it counts tiles and bytes, which a copy keeps). Each copied transfer extends its
//! source's lifetime to its step, as a gather does, and each value a copied layer produces is held
//! by the copies of layer 2's holders, so the last layer, built as usual, reads it. It returns
//! false, having changed nothing, when the layers are not copies in ids: a layer 1 or 2 of another
//! size, homes of another size, or operators whose values do not correspond one to one.

use super::{Builder, Groups, Holders, Pending};
use crate::ids::{BufferId, ExchangeId, StepId, ValueId};
use crate::ir::{
    Buffer, ComputeSet, Destination, ExchangePhase, HostTransfer, Layers, Operand, Operator, Rect,
    Step, Transfer, Vertex, reads,
};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::ops::Range;

/// Where a layer's appends begin: the lengths of the builder's lists.
#[derive(Clone, Copy)]
pub(in super::super) struct Mark {
    buffers: usize,
    steps: usize,
    exchanges: usize,
    compute_sets: usize,
    initialize: usize,
    run_inputs: usize,
    run_outputs: usize,
}

impl Builder<'_> {
    pub(in super::super) fn mark(&self) -> Mark {
        Mark {
            buffers: self.buffers.len(),
            steps: self.steps.len(),
            exchanges: self.exchanges.len(),
            compute_sets: self.compute_sets.len(),
            initialize: self.initialize.len(),
            run_inputs: self.run_inputs.len(),
            run_outputs: self.run_outputs.len(),
        }
    }

    /// Layers 3 to `layers.count - 2` copied from layer 2 (module docs); `marks` are where layers 1
    /// and 2 began and layer 2 ended, `homes` each operator's home buffers.
    pub(in super::super) fn replicated_layers(
        &mut self,
        operators: &[Operator],
        layers: Layers,
        marks: [Mark; 3],
        homes: &[Range<usize>],
    ) -> bool {
        let [one, two, end] = marks;
        let period = layers.period as usize;
        let template = layers.start as usize + 2 * period;
        let ids = two.since(&one);
        let copies = (layers.count as usize).saturating_sub(4);
        if copies == 0 || end.since(&two) != ids {
            return false;
        }
        // The home buffers of layer 2 + n, one range (the homes are laid in operator order).
        let ops = |n: usize| template + n * period..template + (n + 1) * period;
        let layer_homes = |n: usize| homes[ops(n).start].start..homes[ops(n).end - 1].end;
        let mut renames = Vec::with_capacity(copies);
        for n in 1..=copies {
            let same_homes = (ops(0).zip(ops(n))).all(|(a, b)| homes[a].len() == homes[b].len());
            let values = corresponding_values(&operators[ops(0)], &operators[ops(n)]);
            let (true, Some(values)) = (same_homes, values) else {
                return false;
            };
            renames.push(Rename {
                n,
                buffers: one.buffers..end.buffers,
                homes: (layer_homes(0), layer_homes(n).start),
                ids,
                last: self.last_step,
                values,
            });
        }
        let made = self.made_phases(two.exchanges..end.exchanges);
        let layer = self.template(&operators[ops(0)], made, two, end);
        for r in &renames {
            self.copy_layer(&layer, r, &operators[ops(0)], &operators[ops(r.n)]);
        }
        true
    }

    /// The exchange phases in `range` made now (side by side), and a copy of each.
    fn made_phases(&mut self, range: Range<usize>) -> Vec<ExchangePhase> {
        let (buffers, target) = (&self.buffers, self.target);
        (self.exchanges[range.clone()].par_iter_mut().zip(range))
            .map(|(pending, i)| {
                let phase =
                    std::mem::replace(pending, Pending::Sends(StepId(0), Groups::default()))
                        .made(i, buffers, target);
                *pending = Pending::Made(phase.clone());
                phase
            })
            .collect()
    }

    /// What layer 2 appended, from mark `two` to mark `end` (its exchange phases `made`), and the
    /// holders of what it produces.
    fn template(
        &self,
        operators: &[Operator],
        made: Vec<ExchangePhase>,
        two: Mark,
        end: Mark,
    ) -> Template {
        Template {
            buffers: self.buffers[two.buffers..end.buffers].to_vec(),
            steps: self.steps[two.steps..end.steps].to_vec(),
            exchanges: made,
            compute_sets: self.compute_sets[two.compute_sets..end.compute_sets].to_vec(),
            host: [
                self.initialize[two.initialize..end.initialize].to_vec(),
                self.run_inputs[two.run_inputs..end.run_inputs].to_vec(),
                self.run_outputs[two.run_outputs..end.run_outputs].to_vec(),
            ],
            produced: (operators.iter().flat_map(Operator::outs))
                .filter_map(|v| Some((v, self.holders.get(&v)?.held.clone())))
                .collect(),
        }
    }

    /// Appends `layer` renamed by `r`: `from` its operators, `to` the copy's.
    fn copy_layer(&mut self, layer: &Template, r: &Rename, from: &[Operator], to: &[Operator]) {
        for b in &layer.buffers {
            self.buffers.push(Buffer {
                id: r.buffer(b.id),
                value: r.value(b.value),
                first_step: r.step(b.first_step),
                last_step: r.step(b.last_step),
                ..b.clone()
            });
        }
        let host = |list: &[HostTransfer]| -> Vec<HostTransfer> {
            (list.iter())
                .map(|t| HostTransfer {
                    value: r.value(t.value),
                    buffer: r.buffer(t.buffer),
                    ..*t
                })
                .collect()
        };
        let [initialize, run_inputs, run_outputs] = &layer.host;
        self.initialize.extend(host(initialize));
        self.run_inputs.extend(host(run_inputs));
        self.run_outputs.extend(host(run_outputs));
        for phase in &layer.exchanges {
            let step = r.step(phase.step);
            let transfers = (phase.transfers.iter()).map(|t| {
                // As a gather does: the source lives until it is sent.
                let source_buffer = r.buffer(t.source_buffer);
                let b = &mut self.buffers[source_buffer.index()];
                b.last_step = b.last_step.max(step);
                let mut destinations: Vec<Destination> = (t.destinations.iter())
                    .map(|d| Destination {
                        buffer: r.buffer(d.buffer),
                        ..*d
                    })
                    .collect();
                destinations.sort_unstable_by_key(|d| (d.tile, d.buffer));
                Transfer {
                    source: t.source,
                    source_buffer,
                    value: b.value,
                    rect: t.rect,
                    destinations,
                    bytes: t.bytes,
                }
            });
            let mut transfers: Vec<Transfer> = transfers.collect();
            transfers.sort_unstable_by_key(|t| (t.source_buffer, t.rect));
            self.exchanges.push(Pending::Made(ExchangePhase {
                id: ExchangeId::from_index(self.exchanges.len()),
                step,
                transfers,
                // The bound counts tiles and bytes, which a copy keeps.
                lower_bound: phase.lower_bound,
            }));
        }
        for cs in &layer.compute_sets {
            let Some(at) = from.iter().position(|op| op.id() == cs.operator) else {
                continue;
            };
            let suffix = cs.name.strip_prefix(from[at].name()).unwrap_or_default();
            let vertices = (cs.vertices.iter()).map(|v| Vertex {
                kind: v.kind.map(|o| Operand {
                    buffer: r.buffer(o.buffer),
                    ..*o
                }),
                ..v.clone()
            });
            self.compute_sets.push(ComputeSet {
                step: r.step(cs.step),
                operator: to[at].id(),
                name: format!("{}{suffix}", to[at].name()),
                vertices: vertices.collect(),
            });
        }
        let [_, _, exchanges, compute_sets] = r.ids;
        self.steps.extend(layer.steps.iter().map(|s| match *s {
            Step::Exchange(x) => {
                Step::Exchange(ExchangeId::from_index(x.index() + r.n * exchanges))
            }
            Step::Compute(c) => Step::Compute(c + (r.n * compute_sets) as u32),
        }));
        for (value, held) in &layer.produced {
            let mut holders = Holders::default();
            for &(rect, id) in held {
                holders.push(rect, r.buffer(id));
            }
            self.holders.insert(r.value(*value), holders);
        }
    }
}

impl Mark {
    /// What was appended from `earlier` to this mark: buffers, steps, exchange phases and compute
    /// sets.
    fn since(&self, earlier: &Mark) -> [usize; 4] {
        [
            self.buffers - earlier.buffers,
            self.steps - earlier.steps,
            self.exchanges - earlier.exchanges,
            self.compute_sets - earlier.compute_sets,
        ]
    }
}

/// What layer 2 appended, to be copied: its buffers (their lifetimes as its own operators left
/// them), steps, exchange phases (made), compute sets and host stream entries (`initialize`,
/// `run` inputs and outputs), and the holders of each value it produces.
struct Template {
    buffers: Vec<Buffer>,
    steps: Vec<Step>,
    exchanges: Vec<ExchangePhase>,
    compute_sets: Vec<ComputeSet>,
    host: [Vec<HostTransfer>; 3],
    produced: Vec<(ValueId, Vec<(Rect, BufferId)>)>,
}

/// How layer 2's ids become layer `2 + n`'s.
struct Rename {
    n: usize,
    /// Layers 1 and 2's own buffers.
    buffers: Range<usize>,
    /// Layer 2's home buffers, and where layer `2 + n`'s begin.
    homes: (Range<usize>, usize),
    /// Buffers, steps, exchange phases and compute sets a layer takes.
    ids: [usize; 4],
    last: u32,
    values: FxHashMap<ValueId, ValueId>,
}

impl Rename {
    fn buffer(&self, b: BufferId) -> BufferId {
        let i = b.index();
        if self.buffers.contains(&i) {
            BufferId::from_index(i + self.n * self.ids[0])
        } else if self.homes.0.contains(&i) {
            BufferId::from_index(i - self.homes.0.start + self.homes.1)
        } else {
            b
        }
    }

    fn step(&self, s: StepId) -> StepId {
        if s.0 == 0 || s.0 == self.last {
            s
        } else {
            StepId(s.0 + (self.n * self.ids[1]) as u32)
        }
    }

    fn value(&self, v: ValueId) -> ValueId {
        self.values.get(&v).copied().unwrap_or(v)
    }
}

/// Each value `from`'s operators read or write, paired with the value in the same place of `to`'s;
/// none when a value would pair with two.
fn corresponding_values(from: &[Operator], to: &[Operator]) -> Option<FxHashMap<ValueId, ValueId>> {
    let mut values = FxHashMap::default();
    for (a, b) in from.iter().zip(to) {
        let (ra, rb) = (reads(a, false), reads(b, false));
        let (oa, ob): (Vec<ValueId>, Vec<ValueId>) = (a.outs().collect(), b.outs().collect());
        if ra.len() != rb.len() || oa.len() != ob.len() {
            return None;
        }
        let pairs = (ra.iter().zip(&rb)).map(|((x, _), (y, _))| (*x, *y));
        for (x, y) in pairs.chain(oa.into_iter().zip(ob)) {
            if *values.entry(x).or_insert(y) != y {
                return None;
            }
        }
    }
    Some(values)
}
