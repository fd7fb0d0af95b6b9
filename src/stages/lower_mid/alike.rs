//! Operators alike for the shortlists: a model's repeated layers give operators that differ only in
//! their names, ids and values, and such operators get the same candidates, so each is costed once.
//!
//! Contract: [`alike_key`] is the operator with its id, its name and what it covers blanked and its
//! values renumbered in the order they first appear (so operands that coincide still coincide),
//! followed, for a matmul, by whether each part's weights are a weight of the graph. The shortlist
//! estimates read an operator's shapes, functions and operand structure and, of the graph, only
//! those roles; two operators with one key get one shortlist. A data movement has no key: its
//! estimate reads the values it gathers.

use crate::ids::{OpId, ValueId};
use crate::ir::{Graph, Operator, ValueRole};
use std::collections::BTreeMap;

/// The key operators alike share (module docs), or `None` for one that shares nothing.
pub(super) fn alike_key(op: &Operator, graph: &Graph) -> Option<Vec<u8>> {
    let mut order: BTreeMap<ValueId, ValueId> = BTreeMap::new();
    let mut renumber = |v: &mut ValueId| {
        let next = ValueId(order.len() as u32);
        *v = *order.entry(*v).or_insert(next);
    };
    let mut op = op.clone();
    let mut roles = Vec::new();
    match &mut op {
        Operator::MatMul(o) => {
            (o.id, o.name, o.covers) = (OpId(0), String::new(), Vec::new());
            roles = (o.parts.iter())
                .map(|p| graph.value(p.b).role == ValueRole::Weight)
                .collect();
            renumber(&mut o.a);
            for p in &mut o.parts {
                renumber(&mut p.b);
                p.bias.iter_mut().for_each(&mut renumber);
                renumber(&mut p.out);
            }
            o.residual.iter_mut().for_each(&mut renumber);
        }
        Operator::Attention(o) => {
            (o.id, o.name, o.covers) = (OpId(0), String::new(), Vec::new());
            for v in [&mut o.q, &mut o.k, &mut o.v, &mut o.out] {
                renumber(v);
            }
            o.mask.iter_mut().for_each(&mut renumber);
        }
        Operator::LayerNorm(o) => {
            (o.id, o.name, o.covers) = (OpId(0), String::new(), Vec::new());
            for v in [&mut o.x, &mut o.gamma, &mut o.beta, &mut o.out] {
                renumber(v);
            }
        }
        Operator::Vector(o) => {
            (o.id, o.name, o.covers) = (OpId(0), String::new(), Vec::new());
            for (v, _) in &mut o.operands {
                renumber(v);
            }
            renumber(&mut o.out);
        }
        Operator::Assemble(_) => return None,
    }
    let mut key = rmp_serde::to_vec(&op).ok()?;
    key.extend(roles.into_iter().map(u8::from));
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::super::{candidates, lower_operators};
    use super::*;
    use crate::ir::{OperatorEstimate, Partition};
    use crate::target::Target;

    type Costed = (Partition, OperatorEstimate, Option<OperatorEstimate>);

    #[test]
    fn operators_alike_get_the_same_candidates_each_costed_on_its_own() {
        let graph = crate::workload::small_encoder(3);
        let target = Target::preset("mk2-1500").expect("target");
        let cfg = crate::driver::PhaseConfigs::default().lower_mid;
        let operators = lower_operators(&graph).expect("operators");
        let costed: Vec<Vec<Costed>> = (operators.iter())
            .map(|op| {
                let shortlist = candidates(&graph, op, &target, &cfg, 4096).expect("fits");
                (shortlist.into_iter())
                    .map(|c| (c.partition, c.estimate, c.transposing))
                    .collect()
            })
            .collect();
        let keys: Vec<Option<Vec<u8>>> =
            (operators.iter()).map(|op| alike_key(op, &graph)).collect();
        let mut alike = 0;
        for i in 0..operators.len() {
            for j in 0..i {
                if keys[i].is_some() && keys[i] == keys[j] {
                    alike += 1;
                    assert_eq!(
                        costed[i],
                        costed[j],
                        "{} and {}",
                        operators[i].name(),
                        operators[j].name()
                    );
                }
            }
        }
        // Each of the seven operators of layers 1 and 2 is alike its own in the layers before it.
        assert!(alike >= 7 + 2 * 7, "{alike} pairs alike");
    }
}
