//! The joint plan search: one candidate per operator, chosen together.
//!
//! Contract: [`shortlist`] keeps, of one operator's candidates that fit a tile alone, the fastest
//! of each (operand form, residency, region of the partials' shares) class and the leanest.
//! [`joint`] searches the product of the shortlists with a beam over the operators in the mid's
//! order. A partial plan carries the value orders its operators read in (`crate::ir::Orders`): a
//! candidate whose reads clash with them is refused, and a matmul whose readers want its output in
//! the other order than its partials is charged its transposing epilogue. It carries the bytes its
//! resident weights keep on a tile, and every chosen operator must still fit beside the sum. Of the partial plans with the same
//! orders, one that is slower than `finalists` others that keep no more resident bytes is dropped;
//! the fastest `BEAM` go on. The result is the fastest `finalists` whole plans, in a total order
//! (cycles, then the choices), so it never depends on the thread count.

use crate::ir::{Graph, Operator, OperatorEstimate, Orders, Partition, Resident, reads};
use crate::target::Target;
use std::collections::{BTreeMap, HashMap};

/// Partial plans kept after each operator.
const BEAM: usize = 64;
/// Candidates kept per operator: the fastest of each class, and the leanest.
const PER_CLASS: usize = 24;
const LEANEST: usize = 8;

/// One partition of an operator with its estimates: with the output in its partials' order, and
/// for a matmul with the output in the other order (its epilogue transposing).
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

#[derive(Clone)]
struct State {
    /// The candidate chosen for each operator so far, and whether its epilogue transposes.
    choice: Vec<usize>,
    transposing: Vec<bool>,
    cycles: u64,
    resident: Resident,
    orders: Orders,
}

/// A whole plan: per operator its partition and the estimate that applies.
pub(super) type Choice = Vec<(Partition, OperatorEstimate)>;

/// The fastest `finalists` whole plans, fastest first; the error says why there is none.
pub(super) fn joint(
    graph: &Graph,
    operators: &[Operator],
    candidates: &[Vec<Candidate>],
    target: &Target,
    finalists: usize,
) -> Result<Vec<Choice>, String> {
    // The earlier matmuls whose outputs each operator reads.
    let producers: Vec<Vec<usize>> = operators
        .iter()
        .map(|op| {
            (0..operators.len())
                .filter(|&j| {
                    matches!(operators[j], Operator::MatMul(_))
                        && reads(op, false)
                            .iter()
                            .any(|&(v, _)| v == operators[j].out())
                })
                .collect()
        })
        .collect();
    let mut beam = vec![State {
        choice: Vec::new(),
        transposing: Vec::new(),
        cycles: 0,
        resident: Resident::default(),
        orders: Orders::new(graph),
    }];
    let mut why = None;
    for (i, op) in operators.iter().enumerate() {
        let mut next = Vec::new();
        for s in &beam {
            for (c_index, c) in candidates[i].iter().enumerate() {
                let mut orders = s.orders.clone();
                if let Err(e) = orders.read(graph, operators, op, &c.partition) {
                    why.get_or_insert(e);
                    continue;
                }
                let mut n = State {
                    choice: s.choice.clone(),
                    transposing: s.transposing.clone(),
                    cycles: s.cycles + c.estimate.cycles,
                    resident: s.resident.plus(c.estimate.resident),
                    orders,
                };
                n.choice.push(c_index);
                n.transposing.push(false);
                for &j in &producers[i] {
                    let cj = &candidates[j][n.choice[j]];
                    let partials = matches!(cj.partition, Partition::Grid(g) if g.transposed);
                    if !n.transposing[j]
                        && n.orders.output(&operators[j], &cj.partition) != partials
                    {
                        n.transposing[j] = true;
                        n.cycles = n.cycles - cj.estimate.cycles + cj.estimate(true).cycles;
                    }
                }
                let fits = (0..=i).all(|j| {
                    candidates[j][n.choice[j]]
                        .estimate(n.transposing[j])
                        .fits_beside(&n.resident, target)
                });
                if !fits {
                    why.get_or_insert_with(|| {
                        "the operators' resident weights and working sets do not fit a tile \
                         together"
                            .to_string()
                    });
                    continue;
                }
                next.push(n);
            }
        }
        next.sort_by(|a, b| (a.cycles, &a.choice).cmp(&(b.cycles, &b.choice)));
        let mut kept: HashMap<Orders, Vec<Resident>> = HashMap::new();
        beam = Vec::new();
        for n in next {
            let front = kept.entry(n.orders.clone()).or_default();
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
            beam.push(n);
            if beam.len() == BEAM {
                break;
            }
        }
        if beam.is_empty() {
            return Err(why.unwrap_or_else(|| format!("{} has no candidate", op.name())));
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
