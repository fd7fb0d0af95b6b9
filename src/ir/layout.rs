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

/// How the values read so far are stored: `Some(true)` transposed, by value index; with a digest of
/// them kept as they are recorded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Orders {
    reads: Vec<Option<bool>>,
    key: u64,
}

impl Orders {
    pub fn new(graph: &Graph) -> Orders {
        Orders {
            reads: vec![None; graph.values.len()],
            key: 0,
        }
    }

    /// The order `v` is read in, once some operator reads it on the device.
    pub fn read_order(&self, v: ValueId) -> Option<bool> {
        self.reads.get(v.index()).copied().flatten()
    }

    /// A 64-bit digest of the recorded orders, updated as each is recorded (Zobrist hashing: the
    /// exclusive or of a mixed word per value and order), so equal orders have equal keys whatever
    /// order they were recorded in, and comparing two costs nothing.
    pub fn key(&self) -> u64 {
        self.key
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
        let fixed = |v: ValueId| {
            (operators.iter())
                .find(|o| o.outs().any(|out| out == v))
                .and_then(fixed_output_order)
        };
        let changes = self.changes(graph, op, p, &fixed)?;
        self.record(&changes);
        Ok(())
    }

    /// The reads of `op` under `p` not recorded yet, each value once with its order, without
    /// recording them; refused as [`Orders::read`] refuses. `fixed(v)`: the order `v`'s producer
    /// writes whatever its readers want, if it has one ([`fixed_output_order`]).
    pub fn changes(
        &self,
        graph: &Graph,
        op: &Operator,
        p: &Partition,
        fixed: &dyn Fn(ValueId) -> Option<bool>,
    ) -> Result<Vec<(ValueId, bool)>, String> {
        let mut changes: Vec<(ValueId, bool)> = Vec::new();
        for (v, transposed) in reads(op, matches!(p, Partition::Grid(g) if g.transposed)) {
            if fixed(v).is_some_and(|f| f != transposed) {
                return Err(format!(
                    "{} reads {} {}, which its producer writes only {}",
                    op.name(),
                    graph.value(v).name,
                    order_name(transposed),
                    order_name(!transposed)
                ));
            }
            let recorded = match self.reads.get(v.index()) {
                Some(r) => r.or(changes.iter().find(|c| c.0 == v).map(|c| c.1)),
                None => return Err(format!("{}: value {v} out of range", op.name())),
            };
            match recorded {
                None => changes.push((v, transposed)),
                Some(o) if o != transposed => {
                    return Err(format!(
                        "{} reads {} {}, another operator {}",
                        op.name(),
                        graph.value(v).name,
                        order_name(transposed),
                        order_name(o)
                    ));
                }
                Some(_) => {}
            }
        }
        Ok(changes)
    }

    /// Records `changes` (from [`Orders::changes`] on these orders).
    pub fn record(&mut self, changes: &[(ValueId, bool)]) {
        for &(v, transposed) in changes {
            if let Some(slot @ None) = self.reads.get_mut(v.index()) {
                *slot = Some(transposed);
                self.key ^= Orders::word(v, transposed);
            }
        }
    }

    /// The word one value's order adds to [`Orders::key`]: splitmix64's finaliser of the value and
    /// order, so every pair gets an unrelated 64-bit word.
    pub fn word(v: ValueId, transposed: bool) -> u64 {
        let mut z =
            (v.index() as u64 * 2 + u64::from(transposed)).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
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

/// Each value's producing operator, by value index: the index in `operators` of the first that
/// writes it, or none for a value no operator writes (a weight, an input).
pub fn producing_operators(graph: &Graph, operators: &[Operator]) -> Vec<Option<usize>> {
    let mut producer: Vec<Option<usize>> = vec![None; graph.values.len()];
    for (j, op) in operators.iter().enumerate() {
        for out in op.outs() {
            if let Some(slot) = producer.get_mut(out.index()) {
                slot.get_or_insert(j);
            }
        }
    }
    producer
}

/// The order a producer writes in regardless of its readers: a layer norm and a data movement
/// row-major, an attention as its operator says; a matmul and a vector operator follow their
/// readers.
pub fn fixed_output_order(op: &Operator) -> Option<bool> {
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
            let parts = || m.parts.iter();
            [(m.a, t)]
                .into_iter()
                .chain(parts().map(|p| (p.b, t)))
                .chain(m.residual.map(|r| (r, t)))
                .chain(parts().filter_map(|p| p.bias.map(|b| (b, false))))
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
