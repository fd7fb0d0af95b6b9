//! Value orders under a plan: which values the device stores transposed.
//!
//! Contract: [`Orders::read`] records, operator by operator in the mid's order, the order each
//! operator reads its operands in (a matmul its `a`, its weights `b` and its residual in its form's
//! order, its bias as a row; an attention its queries and values transposed, its keys and key mask
//! row-major; a layer norm its rows, gamma and beta row-major; a vector operator and a data
//! movement their operands row-major) and refuses a value read both ways,
//! or read in an order its producer cannot write (a layer norm and a data movement write
//! row-major, an attention in its own fixed order). A matmul writes its output in the order its device readers read it, or in
//! its partials' order when only the host reads it, and a vector operator in its readers' order or
//! row-major ([`Orders::output`]); the host streams either
//! order. [`value_orders`] records a whole plan, and [`verify_mid`] checks every finalist of a
//! mid that way (`lower_mid` on its output, `select_finalist` on its input). Both `lower_mid`'s
//! search and `select_finalist`'s builder take their orders from here.

use crate::ids::ValueId;
use crate::ir::{Graph, Mid, Operator, Partition};
use crate::target::Target;

/// How the values read so far are stored: `Some(true)` transposed, by value index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Orders {
    reads: Vec<Option<bool>>,
}

impl Orders {
    pub fn new(graph: &Graph) -> Orders {
        Orders {
            reads: vec![None; graph.values.len()],
        }
    }

    /// The order `v` is read in, once some operator reads it on the device.
    pub fn read_order(&self, v: ValueId) -> Option<bool> {
        self.reads.get(v.index()).copied().flatten()
    }

    /// Records the reads of `op` under `p`; the error names the value read both ways or that its
    /// producer cannot write in the order asked.
    pub fn read(
        &mut self,
        graph: &Graph,
        operators: &[Operator],
        op: &Operator,
        p: &Partition,
    ) -> Result<(), String> {
        for (v, transposed) in reads(op, matches!(p, Partition::Grid(g) if g.transposed)) {
            let fixed = operators
                .iter()
                .find(|o| o.out() == v)
                .and_then(fixed_output_order);
            if fixed.is_some_and(|f| f != transposed) {
                return Err(format!(
                    "{} reads {} {}, which its producer writes only {}",
                    op.name(),
                    graph.value(v).name,
                    order_name(transposed),
                    order_name(!transposed)
                ));
            }
            match self.reads.get_mut(v.index()) {
                Some(slot @ None) => *slot = Some(transposed),
                Some(Some(o)) if *o != transposed => {
                    return Err(format!(
                        "{} reads {} {}, another operator {}",
                        op.name(),
                        graph.value(v).name,
                        order_name(transposed),
                        order_name(*o)
                    ));
                }
                Some(Some(_)) => {}
                None => return Err(format!("{}: value {v} out of range", op.name())),
            }
        }
        Ok(())
    }

    /// The order `op` writes its output in under `p`, once every reader is recorded.
    pub fn output(&self, op: &Operator, p: &Partition) -> bool {
        fixed_output_order(op).unwrap_or_else(|| {
            self.matmul_output(op.out(), matches!(p, Partition::Grid(g) if g.transposed))
        })
    }

    /// The order a matmul writes its output `out` in: as its device readers read it, or its
    /// partials' order (`transposed_form`) when only the host reads it.
    pub fn matmul_output(&self, out: ValueId, transposed_form: bool) -> bool {
        self.read_order(out).unwrap_or(transposed_form)
    }
}

/// The orders of a whole plan, or the first value read both ways.
pub fn value_orders(
    graph: &Graph,
    operators: &[Operator],
    partitions: &[Partition],
) -> Result<Orders, String> {
    let mut orders = Orders::new(graph);
    for (op, p) in operators.iter().zip(partitions) {
        orders.read(graph, operators, op, p)?;
    }
    Ok(orders)
}

/// The mid's whole check: [`Mid::verify`], then every finalist whose values some operators read in
/// both orders, one line each.
pub fn verify_mid(mid: &Mid, graph: &Graph, target: &Target) -> Vec<String> {
    let mut errors = mid.verify(graph, target);
    errors.extend((mid.finalists.iter().enumerate()).filter_map(|(f, plan)| {
        value_orders(graph, &mid.operators, &plan.partitions)
            .err()
            .map(|e| format!("finalist {f}: {e}"))
    }));
    errors
}

/// The order a producer writes in regardless of its readers: a layer norm and a data movement
/// row-major, an attention as its operator says; a matmul and a vector operator follow their
/// readers.
fn fixed_output_order(op: &Operator) -> Option<bool> {
    match op {
        Operator::MatMul(_) | Operator::Vector(_) => None,
        Operator::LayerNorm(_) | Operator::Assemble(_) => Some(false),
        Operator::Attention(a) => Some(a.transposed_out),
    }
}

/// The values `op` reads on the device, each with the order it reads it in (a matmul's in its
/// operand form, transposed when `transposed_form`).
pub fn reads(op: &Operator, transposed_form: bool) -> Vec<(ValueId, bool)> {
    match op {
        Operator::MatMul(m) => {
            let t = transposed_form;
            [(m.a, t), (m.b, t)]
                .into_iter()
                .chain(m.residual.map(|r| (r, t)))
                .chain(m.bias.map(|b| (b, false)))
                .collect()
        }
        Operator::Attention(a) => [(a.q, true), (a.v, true), (a.k, false)]
            .into_iter()
            .chain(a.mask.map(|m| (m, false)))
            .collect(),
        Operator::LayerNorm(l) => vec![(l.x, false), (l.gamma, false), (l.beta, false)],
        Operator::Vector(v) => v.operands.iter().map(|&(x, _)| (x, false)).collect(),
        Operator::Assemble(a) => a.sources().into_iter().map(|x| (x, false)).collect(),
    }
}

fn order_name(transposed: bool) -> &'static str {
    if transposed {
        "transposed"
    } else {
        "row by row"
    }
}
