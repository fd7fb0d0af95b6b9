//! Repeated layers: the run of the mid's operators that repeats one layer's operators.
//!
//! Contract: [`repeated`] returns the [`Layers`] whose copies cover the most operators (among
//! equals the shorter layer, then the later end), or none when no operator matches the one a
//! whole number of operators before it for a whole layer. Operator `i` matches operator `j` when
//! both have the same shortlist (partitions and estimates alike, so a plan of one is a plan of the
//! other at the same estimated cost) and read the same values in the same way relative to
//! themselves: each value produced the same number of operators before it (as the same of its
//! producer's outputs), or produced by no operator and of the same role (a weight, an input). A
//! value every layer reads from an operator before the layers is read from a different distance
//! in each, so such layers are not found. The joint search then plans every copy as
//! the layer before it, which is what makes a model's layers share their plans.

use super::search::Candidate;
use crate::ids::ValueId;
use crate::ir::{Graph, Layers, Operator, ValueRole, producing_operators, reads};

/// Where a value an operator reads comes from, relative to the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Source {
    /// Produced this many operators before the reader, as that operator's output of this index.
    Before(usize, usize),
    /// Produced by no operator (a weight, a graph input), of this role.
    Outside(ValueRole),
    /// Produced by the reader itself or a later operator.
    Later,
}

pub(super) fn repeated(
    graph: &Graph,
    operators: &[Operator],
    shortlists: &[Vec<Candidate>],
) -> Option<Layers> {
    let n = operators.len();
    let producer = producing_operators(graph, operators);
    let source = |i: usize, v: ValueId| match producer.get(v.index()).copied().flatten() {
        Some(j) if j < i => {
            let index = operators[j].outs().position(|out| out == v).unwrap_or(0);
            Some(Source::Before(i - j, index))
        }
        Some(_) => Some(Source::Later),
        None => graph.values.get(v.index()).map(|x| Source::Outside(x.role)),
    };
    let wiring: Vec<Vec<Option<Source>>> = (operators.iter().enumerate())
        .map(|(i, op)| {
            reads(op, false)
                .iter()
                .map(|&(v, _)| source(i, v))
                .collect()
        })
        .collect();
    // Each operator's class: the first operator it matches.
    let mut class: Vec<usize> = Vec::with_capacity(n);
    let mut firsts: Vec<usize> = Vec::new();
    for i in 0..n {
        let same = |&&j: &&usize| wiring[j] == wiring[i] && alike(&shortlists[j], &shortlists[i]);
        match firsts.iter().find(same) {
            Some(&j) => class.push(j),
            None => {
                firsts.push(i);
                class.push(i);
            }
        }
    }
    let mut best: Option<(Rank, Layers)> = None;
    for period in 1..=n / 2 {
        // How many operators up to `i` in a row match the one `period` after them.
        let mut run = 0;
        for i in 0..n - period {
            run = if class[i] == class[i + period] {
                run + 1
            } else {
                0
            };
            if run < period {
                continue;
            }
            let count = run / period + 1;
            let end = i + period + 1;
            let key = ((count - 1) * period, std::cmp::Reverse(period), end);
            if best.as_ref().is_none_or(|(k, _)| key > *k) {
                let layers = Layers {
                    start: (end - count * period) as u32,
                    period: period as u32,
                    count: count as u32,
                };
                best = Some((key, layers));
            }
        }
    }
    best.map(|(_, layers)| layers)
}

/// How repeated layers rank: the operators their copies cover, the shorter layer, the later end.
type Rank = (usize, std::cmp::Reverse<usize>, usize);

/// Whether two shortlists offer the same partitions at the same estimates, in the same order.
fn alike(a: &[Candidate], b: &[Candidate]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.partition == y.partition && x.estimate == y.estimate && x.transposing == y.transposing
        })
}

#[cfg(test)]
mod tests {
    use super::repeated;
    use crate::ir::{Layers, Partition, verify_mid};
    use crate::stages::lower_mid::{LowerMidConfig, lower_mid, shortlists};
    use crate::target::Target;
    use crate::workload::small_encoder as encoder;

    fn target() -> Target {
        Target::preset("mk2-1500").expect("target")
    }

    #[test]
    fn an_encoders_layers_are_found_whole() {
        for layers in [2, 4] {
            let graph = encoder(layers);
            let (operators, lists) =
                shortlists(&graph, &target(), &LowerMidConfig::default()).expect("shortlists");
            assert_eq!(operators.len(), 1 + 7 * layers as usize);
            let found = repeated(&graph, &operators, &lists);
            let whole = Layers {
                start: 1,
                period: 7,
                count: layers,
            };
            assert_eq!(found, Some(whole), "{layers} layers");
        }
    }

    #[test]
    fn an_operator_unlike_its_counterpart_ends_the_layers_before_it() {
        let graph = encoder(4);
        let (operators, mut lists) =
            shortlists(&graph, &target(), &LowerMidConfig::default()).expect("shortlists");
        // The last layer's attention offered one candidate fewer: three layers remain copies.
        let attention = 1 + 3 * 7 + 1;
        lists[attention].pop();
        let found = repeated(&graph, &operators, &lists).expect("layers");
        assert_eq!((found.period, found.count), (7, 3), "{found:?}");
        assert!(found.end() <= attention, "{found:?} covers op{attention}");
    }

    #[test]
    fn every_finalist_plans_its_layers_alike_and_the_verifier_holds_it() {
        let graph = encoder(3);
        let mut mid = lower_mid(&graph, &target(), &LowerMidConfig::default()).expect("mid");
        let layers = mid.layers.expect("layers");
        assert_eq!((layers.start, layers.period, layers.count), (1, 7, 3));
        assert!(mid.finalists.len() > 1);
        // The finalists differ, and each the same way in every layer.
        let distinct: std::collections::BTreeSet<&Vec<Partition>> =
            mid.finalists.iter().map(|f| &f.partitions).collect();
        assert!(distinct.len() > 1, "the finalists are one plan");
        assert!(verify_mid(&mid, &graph, &target()).is_empty());
        // A finalist planning its last layer's attention unlike the layer before it is refused.
        let attention = 1 + 2 * 7 + 1;
        let plan = &mut mid.finalists[0].partitions;
        plan[attention] = plan[0];
        let errors = verify_mid(&mid, &graph, &target());
        assert!(
            errors
                .iter()
                .any(|e| e.contains(&format!("op{attention}: not planned as"))),
            "{errors:?}"
        );
    }
}
