//! The joint plan search: one candidate per operator, chosen together.
//!
//! Contract: [`shortlist`] keeps, of one operator's candidates that fit a tile alone, the fastest
//! of each (operand form, residency, region of the partials' shares) class and the leanest.
//! [`joint`] searches the product of the shortlists with a beam over the operators in the mid's
//! order; an operator that copies one a layer before it (`Layers::copies`) takes, in each partial
//! plan, that operator's candidate, so every whole plan plans its layers alike. A partial plan
//! carries the value orders its operators read in (`crate::ir::Orders`): a candidate whose reads
//! clash with them is refused, and a matmul whose readers want its output in the other order than
//! its partials is charged its transposing epilogue. It carries the bytes its resident weights keep
//! on a tile, and every chosen operator must still fit beside the sum. Of the partial plans with
//! the same orders, one that is slower than `finalists` others that keep no more resident bytes is
//! dropped; the fastest `BEAM` go on. Orders are compared by their digest (`Orders::key`), and a
//! partial plan is built whole only once kept, so each operator costs the same whatever came before
//! it. The result is the fastest `finalists` whole plans, in a total order (cycles, then the
//! choices), so it never depends on the thread count.

use crate::ids::ValueId;
use crate::ir::{
    CODE_RESERVE_BYTES, Graph, Layers, Operator, OperatorEstimate, Orders, Partition, Resident,
};
use crate::ir::{fixed_output_order, producing_operators, reads};
use crate::target::Target;
use std::collections::{BTreeMap, HashMap};

/// Partial plans kept after each operator.
const BEAM: usize = 64;
/// Candidates kept per operator: the fastest of each class, and the leanest.
const PER_CLASS: usize = 24;
const LEANEST: usize = 8;

/// One partition of an operator with its estimates: with the output in its partials' order, and
/// for a matmul with the output in the other order (its epilogue transposing).
#[derive(Clone)]
pub struct Candidate {
    pub partition: Partition,
    pub estimate: OperatorEstimate,
    pub transposing: Option<OperatorEstimate>,
}

impl Candidate {
    fn estimate(&self, transposing: bool) -> &OperatorEstimate {
        match &self.transposing {
            Some(e) if transposing => e,
            _ => &self.estimate,
        }
    }
}

/// The fastest candidates of each (operand form, residency) class and the leanest, fastest first.
pub(super) fn shortlist(mut candidates: Vec<Candidate>) -> Vec<Candidate> {
    candidates.sort_by_key(|c| {
        (
            c.estimate.cycles,
            c.partition.tiles(),
            c.estimate.total_bytes(),
            c.partition,
        )
    });
    let class = |p: &Partition| match p {
        Partition::Grid(g) => (g.transposed, g.resident),
        Partition::Attention(_) => (false, false),
    };
    let mut keep = vec![false; candidates.len()];
    let mut counts: BTreeMap<(bool, bool), usize> = BTreeMap::new();
    for (k, c) in keep.iter_mut().zip(&candidates) {
        let n = counts.entry(class(&c.partition)).or_default();
        if *n < PER_CLASS {
            *k = true;
            *n += 1;
        }
    }
    let mut lean: Vec<usize> = (0..candidates.len()).collect();
    lean.sort_by_key(|&i| (candidates[i].estimate.total_bytes(), i));
    for &i in lean.iter().take(LEANEST) {
        keep[i] = true;
    }
    candidates
        .into_iter()
        .zip(keep)
        .filter_map(|(c, k)| k.then_some(c))
        .collect()
}

/// A partial plan of the beam.
struct State {
    /// The candidate chosen for each operator so far, and whether its epilogue transposes.
    choice: Vec<usize>,
    transposing: Vec<bool>,
    cycles: u64,
    resident: Resident,
    orders: Orders,
    /// Where the resident bytes may grow to beside the operators no later choice can change (those
    /// whose epilogues no later reader can make transpose).
    closed: Room,
}

/// The resident bytes beside which operators' working sets still fit a tile: at most `interleaved`
/// of them interleaved-only and `total` in all. For one operator, [`Room::holds`] is exactly
/// [`OperatorEstimate::fits_beside`] (a test checks it); for several, the least of their rooms.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Room {
    interleaved: i128,
    total: i128,
}

impl Room {
    /// Room for anything: no operator's.
    const ANY: Room = Room {
        interleaved: i128::MAX,
        total: i128::MAX,
    };

    /// The room `e`'s working set leaves: interleaved memory less its interleaved-only bytes (less
    /// its A panel too, when the panel is larger than standard memory), and both regions less all
    /// of its bytes.
    fn of(e: &OperatorEstimate, target: &Target) -> Room {
        let standard = i128::from(target.interleaved_base - target.memory_base)
            .saturating_sub(i128::from(CODE_RESERVE_BYTES))
            .max(0);
        let interleaved = i128::from(target.memory_end - target.interleaved_base);
        let (panel, other, only) = (
            i128::from(e.panel_bytes),
            i128::from(e.other_bytes),
            i128::from(e.interleaved_bytes),
        );
        Room {
            interleaved: if panel <= standard {
                interleaved - only
            } else {
                interleaved - only - panel
            },
            total: standard + interleaved - panel - other - only,
        }
    }

    fn and(self, other: Room) -> Room {
        Room {
            interleaved: self.interleaved.min(other.interleaved),
            total: self.total.min(other.total),
        }
    }

    fn holds(self, r: &Resident) -> bool {
        let interleaved = i128::from(r.interleaved);
        interleaved <= self.interleaved && interleaved + i128::from(r.either) <= self.total
    }
}

/// A partial plan one operator longer than a state of the beam, before it is kept or dropped: what
/// it adds to its parent, so that only the kept ones are built whole.
struct Child {
    parent: usize,
    candidate: usize,
    /// The reads it records ([`Orders::changes`]).
    changes: Vec<(ValueId, bool)>,
    /// The earlier matmuls whose epilogues it makes transpose.
    transposes: Vec<usize>,
    cycles: u64,
    resident: Resident,
    /// Its orders' [`Orders::key`].
    key: u64,
}

/// A whole plan: per operator its partition and the estimate that applies.
pub(super) type Choice = Vec<(Partition, OperatorEstimate)>;

/// The fastest `finalists` whole plans, fastest first; the error says why there is none.
pub(super) fn joint(
    graph: &Graph,
    operators: &[Operator],
    candidates: &[Vec<Candidate>],
    layers: Option<Layers>,
    target: &Target,
    finalists: usize,
) -> Result<Vec<Choice>, String> {
    // Each value's producing operator, and the earlier matmuls whose outputs each operator reads.
    let producer = producing_operators(graph, operators);
    let produced = |v: ValueId| producer.get(v.index()).copied().flatten();
    let fixed = |v: ValueId| produced(v).and_then(|j| fixed_output_order(&operators[j]));
    let producers: Vec<Vec<usize>> = (operators.iter())
        .map(|op| {
            let mut js: Vec<usize> = (reads(op, false).iter())
                .filter_map(|&(v, _)| produced(v))
                .filter(|&j| matches!(operators[j], Operator::MatMul(_)))
                .collect();
            js.sort_unstable();
            js.dedup();
            js
        })
        .collect();
    // The last operator that can make each matmul's epilogue transpose: until then it stays open.
    let mut last_reader: Vec<Option<usize>> = vec![None; operators.len()];
    for (i, js) in producers.iter().enumerate() {
        for &j in js {
            last_reader[j] = Some(i);
        }
    }
    let mut beam = vec![State {
        choice: Vec::new(),
        transposing: Vec::new(),
        cycles: 0,
        resident: Resident::default(),
        orders: Orders::new(graph),
        closed: Room::ANY,
    }];
    let mut why = None;
    // The earlier operators a later reader may still make transpose, kept as the search goes.
    let mut open: Vec<usize> = Vec::new();
    for (i, op) in operators.iter().enumerate() {
        open.retain(|&j| last_reader[j] >= Some(i));
        let mut next = Vec::new();
        let copies = layers.and_then(|l| l.copies(i));
        for (parent, s) in beam.iter().enumerate() {
            for (c_index, c) in candidates[i].iter().enumerate() {
                if copies.is_some_and(|j| s.choice[j] != c_index) {
                    continue;
                }
                let changes = match s.orders.changes(graph, op, &c.partition, &fixed) {
                    Ok(changes) => changes,
                    Err(e) => {
                        why.get_or_insert(e);
                        continue;
                    }
                };
                // The order a value is read in once this candidate's reads are recorded.
                let read_order = |v: ValueId| {
                    (s.orders.read_order(v))
                        .or_else(|| changes.iter().find(|c| c.0 == v).map(|c| c.1))
                };
                let mut cycles = s.cycles + c.estimate.cycles;
                let mut transposes = Vec::new();
                for &j in &producers[i] {
                    let cj = &candidates[j][s.choice[j]];
                    let partials = matches!(cj.partition, Partition::Grid(g) if g.transposed);
                    // A matmul writes each output as its readers read it, else as its partials.
                    let transposing = (operators[j].outs())
                        .any(|out| read_order(out).unwrap_or(partials) != partials);
                    if !s.transposing[j] && transposing {
                        transposes.push(j);
                        cycles = cycles - cj.estimate.cycles + cj.estimate(true).cycles;
                    }
                }
                let key =
                    (changes.iter()).fold(s.orders.key(), |k, &(v, t)| k ^ Orders::word(v, t));
                next.push(Child {
                    parent,
                    candidate: c_index,
                    changes,
                    transposes,
                    cycles,
                    resident: s.resident.plus(c.estimate.resident),
                    key,
                });
            }
        }
        // Children in the order of (cycles, choices): a parent's choices rank it among the others.
        let mut by_choice: Vec<usize> = (0..beam.len()).collect();
        by_choice.sort_by(|&a, &b| beam[a].choice.cmp(&beam[b].choice));
        let mut rank = vec![0; beam.len()];
        for (r, &p) in by_choice.iter().enumerate() {
            rank[p] = r;
        }
        next.sort_by_key(|n| (n.cycles, rank[n.parent], n.candidate));
        let mut kept: HashMap<u64, Vec<Resident>> = HashMap::new();
        let mut chosen = Vec::new();
        for n in next {
            // Every chosen operator must still fit beside the resident bytes: the closed ones
            // within the parent's room, the open ones and this one each within its own.
            let s = &beam[n.parent];
            let estimate = |j: usize| {
                if j == i {
                    candidates[i][n.candidate].estimate(false)
                } else {
                    candidates[j][s.choice[j]]
                        .estimate(s.transposing[j] || n.transposes.contains(&j))
                }
            };
            let fits = s.closed.holds(&n.resident)
                && (open.iter().chain([&i]))
                    .all(|&j| Room::of(estimate(j), target).holds(&n.resident));
            if !fits {
                why.get_or_insert_with(|| {
                    "the operators' resident weights and working sets do not fit a tile together"
                        .to_string()
                });
                continue;
            }
            let front = kept.entry(n.key).or_default();
            let dominating = front
                .iter()
                .filter(|r| {
                    r.interleaved <= n.resident.interleaved && r.either <= n.resident.either
                })
                .count();
            if dominating >= finalists.max(1) {
                continue;
            }
            front.push(n.resident);
            chosen.push(n);
            if chosen.len() == BEAM {
                break;
            }
        }
        if chosen.is_empty() {
            return Err(why.unwrap_or_else(|| format!("{} has no candidate", op.name())));
        }
        beam = (chosen.into_iter())
            .map(|n| {
                let s = &beam[n.parent];
                let mut choice = s.choice.clone();
                choice.push(n.candidate);
                let mut transposing = s.transposing.clone();
                transposing.push(false);
                for &j in &n.transposes {
                    transposing[j] = true;
                }
                let mut orders = s.orders.clone();
                orders.record(&n.changes);
                // This operator closes when no later one reads it, and so do those it reads last.
                let closing = (open.iter().copied())
                    .filter(|&j| last_reader[j] == Some(i))
                    .chain((last_reader[i].is_none()).then_some(i));
                let closed = closing.fold(s.closed, |room, j| {
                    let c = &candidates[j][choice[j]];
                    room.and(Room::of(c.estimate(transposing[j]), target))
                });
                State {
                    choice,
                    transposing,
                    cycles: n.cycles,
                    resident: n.resident,
                    orders,
                    closed,
                }
            })
            .collect();
        if last_reader[i].is_some() {
            open.push(i);
        }
    }
    Ok(beam
        .into_iter()
        .take(finalists.max(1))
        .map(|s| {
            (s.choice.iter().zip(&s.transposing).enumerate())
                .map(|(j, (&c, &t))| {
                    let c = &candidates[j][c];
                    (c.partition, c.estimate(t).clone())
                })
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::{Resident, Room};
    use crate::ir::OperatorEstimate;
    use crate::target::Target;

    #[test]
    fn an_operators_room_holds_exactly_the_residents_it_fits_beside() {
        let target = Target::preset("mk2-1500").expect("a preset");
        let kib = |n: u64| n * 1024;
        let standard =
            u64::from(target.interleaved_base - target.memory_base) - crate::ir::CODE_RESERVE_BYTES;
        let (mut checked, mut big_panel_fits) = ([0usize; 2], 0);
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut draw = |most: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % (most + 1)
        };
        for _ in 0..20_000 {
            let e = OperatorEstimate {
                panel_bytes: kib(draw(600)),
                other_bytes: kib(draw(200)),
                interleaved_bytes: kib(draw(100)),
                compute_cycles: 0,
                vector_cycles: 0,
                exchange_cycles: 0,
                receive_bytes: 0,
                resident: Resident::default(),
                cycles: 0,
            };
            let r = Resident {
                interleaved: kib(draw(100)),
                either: kib(draw(200)),
            };
            let room = Room::of(&e, &target);
            assert_eq!(
                room.holds(&r),
                e.fits_beside(&r, &target),
                "{e:?} beside {r:?}"
            );
            let fits = e.fits_beside(&r, &target);
            checked[usize::from(fits)] += 1;
            // A panel larger than standard memory fits only in interleaved memory.
            big_panel_fits += usize::from(fits && e.panel_bytes > standard);
        }
        assert!(
            checked.iter().all(|&n| n > 1000) && big_panel_fits > 100,
            "too few draws of each kind to test anything: {checked:?}, {big_panel_fits}"
        );
    }
}
