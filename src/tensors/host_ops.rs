//! The host's operations ([`OpKind::on_host`]): embedding lookups, mask biases and mean pooling, run
//! in f32 over the host data (one `Vec<f32>` per value, indexed by value id), each result rounded to
//! its value's type.
//!
//! Contract: [`HostOps::of`] splits a graph's host operations into those that run before the device
//! (every input an input, a weight or the result of an earlier one) and those that run after it (on
//! what the device streams out). [`HostOps::run`] runs one group in graph order; an input whose data is
//! missing or of the wrong length, or an embedding index outside its table, is an error naming the
//! tensor (and the index's position), never a panic. Sums run in f32, in index order.

use crate::ids::OpId;
use crate::ir::{Graph, Op, OpKind, ValueRole};
use crate::numerics::{round_to, saturate};

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostOpError {
    #[error(
        "{op}: index {index} at position {position} of {tensor} is outside table {table}, which has \
         {entries} rows"
    )]
    IndexOutOfRange {
        op: String,
        tensor: String,
        position: usize,
        index: i64,
        table: String,
        entries: u32,
    },
    #[error("{op}: the host holds {actual} elements of {tensor}, which has {expected}")]
    Missing {
        op: String,
        tensor: String,
        actual: usize,
        expected: u64,
    },
}

/// A graph's host operations, by when they run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostOps {
    pub before: Vec<OpId>,
    pub after: Vec<OpId>,
}

impl HostOps {
    pub fn of(graph: &Graph) -> HostOps {
        let mut known: Vec<bool> = graph
            .values
            .iter()
            .map(|v| matches!(v.role, ValueRole::Input | ValueRole::Weight))
            .collect();
        let mut ops = HostOps::default();
        for op in graph.ops.iter().filter(|op| op.kind.on_host()) {
            if op.kind.inputs().iter().all(|v| known[v.index()]) {
                known[op.out.index()] = true;
                ops.before.push(op.id);
            } else {
                ops.after.push(op.id);
            }
        }
        ops
    }

    /// Runs `ops` (host operations of `graph`) in order, writing each result into `data`.
    pub fn run(graph: &Graph, ops: &[OpId], data: &mut [Vec<f32>]) -> Result<(), HostOpError> {
        for &id in ops {
            let op = &graph.ops[id.index()];
            for v in op.kind.inputs() {
                let value = graph.value(v);
                let actual = data.get(v.index()).map_or(0, Vec::len);
                if actual as u64 != value.elements() {
                    return Err(HostOpError::Missing {
                        op: op.name.clone(),
                        tensor: value.name.clone(),
                        actual,
                        expected: value.elements(),
                    });
                }
            }
            let out = graph.value(op.out);
            let result = run_one(graph, op, data)?;
            data[op.out.index()] = result.into_iter().map(|x| round_to(out.dtype, x)).collect();
        }
        Ok(())
    }
}

/// One host operation over inputs of the right lengths.
fn run_one(graph: &Graph, op: &Op, data: &[Vec<f32>]) -> Result<Vec<f32>, HostOpError> {
    let out = graph.value(op.out);
    let n = out.cols as usize;
    Ok(match op.kind {
        OpKind::Embed { ref lookups } => {
            let mut result = vec![0f32; out.elements() as usize];
            for &(table, indices) in lookups {
                let t = graph.value(table);
                let rows = &data[table.index()];
                for (position, (o, &i)) in
                    result.chunks_mut(n).zip(&data[indices.index()]).enumerate()
                {
                    if !(i >= 0.0 && i < t.rows as f32) {
                        return Err(HostOpError::IndexOutOfRange {
                            op: op.name.clone(),
                            tensor: graph.value(indices).name.clone(),
                            position,
                            index: i as i64,
                            table: t.name.clone(),
                            entries: t.rows,
                        });
                    }
                    let at = i as usize * t.cols as usize;
                    let row = rows.get(at..at + n).ok_or_else(|| HostOpError::Missing {
                        op: op.name.clone(),
                        tensor: t.name.clone(),
                        actual: rows.len(),
                        expected: (i as u64 + 1) * u64::from(t.cols),
                    })?;
                    o.iter_mut().zip(row).for_each(|(o, x)| *o += x);
                }
            }
            result
        }
        OpKind::MaskBias { mask, fill } => data[mask.index()]
            .iter()
            .map(|m| saturate(out.dtype, f64::from((1.0 - m) * fill)) as f32)
            .collect(),
        OpKind::MeanPool { x, mask, min_count } => {
            let tokens = graph.value(mask).cols as usize;
            let (x, mask) = (&data[x.index()], &data[mask.index()]);
            let mut result = vec![0f32; out.elements() as usize];
            for (b, o) in result.chunks_mut(n).enumerate() {
                let keep = mask.get(b * tokens..(b + 1) * tokens).unwrap_or_default();
                let rows = x
                    .get(b * tokens * n..(b + 1) * tokens * n)
                    .unwrap_or_default()
                    .chunks(n);
                for (row, m) in rows.zip(keep) {
                    o.iter_mut().zip(row).for_each(|(o, v)| *o += m * v);
                }
                let count = keep.iter().sum::<f32>().max(min_count);
                o.iter_mut().for_each(|o| *o /= count);
            }
            result
        }
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ValueId;
    use crate::ir::{DType, Value};

    fn value(id: usize, name: &str, rows: u32, cols: u32, dtype: DType, role: ValueRole) -> Value {
        Value {
            id: ValueId::from_index(id),
            name: name.to_string(),
            rows,
            cols,
            dtype,
            role,
            fan_in: 1,
            shape: Vec::new(),
        }
    }

    /// An encoder's host ends with no device part: embedding, mask bias, mean pool of the embedding.
    fn encoder_ends() -> Graph {
        use ValueRole::*;
        let v = |i| ValueId::from_index(i);
        let op = |i: usize, name: &str, kind, out| Op {
            id: OpId::from_index(i),
            name: name.to_string(),
            kind,
            out,
        };
        Graph {
            workload: "ends".to_string(),
            values: vec![
                value(0, "input_ids", 2, 3, DType::I64, Input),
                value(1, "mask", 2, 3, DType::F16, Input),
                value(2, "table", 5, 4, DType::F16, Weight),
                value(3, "embedded", 6, 4, DType::F16, Intermediate),
                value(4, "bias", 2, 3, DType::F16, Intermediate),
                value(5, "pooled", 2, 4, DType::F16, Output),
            ],
            ops: vec![
                op(
                    0,
                    "embed",
                    OpKind::Embed {
                        lookups: vec![(v(2), v(0))],
                    },
                    v(3),
                ),
                op(
                    1,
                    "bias",
                    OpKind::MaskBias {
                        mask: v(1),
                        fill: -1e4,
                    },
                    v(4),
                ),
                op(
                    2,
                    "pool",
                    OpKind::MeanPool {
                        x: v(3),
                        mask: v(1),
                        min_count: 1e-9,
                    },
                    v(5),
                ),
            ],
            partials: DType::F16,
            parameters: Vec::new(),
        }
    }

    #[test]
    fn host_operations_match_the_reference() {
        let g = encoder_ends();
        let ops = HostOps::of(&g);
        assert_eq!(ops.before, vec![OpId(0), OpId(1), OpId(2)]);
        // Without the embedding on the host, its result comes from the device: pooling runs after.
        let mut device_embedding = g.clone();
        device_embedding.ops.remove(0);
        assert_eq!(HostOps::of(&device_embedding).after, vec![OpId(2)]);
        let mut data = vec![
            vec![0.0, 4.0, 2.0, 1.0, 1.0, 3.0],
            vec![1.0, 1.0, 0.0, 1.0, 0.0, 0.0],
            (0..20).map(|i| i as f32 / 8.0).collect(),
            vec![],
            vec![],
            vec![],
        ];
        // The reference keeps outputs only: every value it is compared on is made one.
        let mut compared = g.clone();
        (compared.values[3..].iter_mut()).for_each(|v| v.role = ValueRole::Output);
        let reference = crate::numerics::reference(&compared, &data, &crate::progress::Silent);
        HostOps::run(&g, &ops.before, &mut data).unwrap();
        for (v, (data, reference)) in data.iter().zip(&reference.data).enumerate().skip(3) {
            assert_eq!(data.len(), reference.len());
            for (d, r) in data.iter().zip(reference) {
                assert!(
                    (f64::from(*d) - r).abs() <= r.abs() * 1e-3,
                    "v{v}: {d} against {r}"
                );
            }
        }
        assert_eq!(data[4], vec![0.0, 0.0, -1e4, 0.0, -1e4, -1e4]);
    }

    #[test]
    fn an_index_outside_its_table_names_the_tensor_and_position() {
        let g = encoder_ends();
        let mut data = vec![
            vec![0.0, 4.0, 5.0, 1.0, 1.0, 3.0],
            vec![1.0; 6],
            vec![0.0; 20],
        ];
        data.resize(6, Vec::new());
        let e = HostOps::run(&g, &[OpId(0)], &mut data).unwrap_err();
        assert_eq!(
            e.to_string(),
            "embed: index 5 at position 2 of input_ids is outside table table, which has 5 rows"
        );
        // Pooling before the device produced its input is an error, not a panic.
        let e = HostOps::run(&g, &[OpId(2)], &mut data).unwrap_err();
        assert!(
            e.to_string().contains("holds 0 elements of embedded"),
            "{e}"
        );
    }
}
