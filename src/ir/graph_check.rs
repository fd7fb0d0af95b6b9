//! [`Graph::check`]: what every graph must be before a phase, the device or the host reference reads
//! it — ids in range and in order, each value made once and before use, shapes, dtypes and attributes
//! that fit each operation's semantics (`OpKind`'s docs: element-wise operands that broadcast, no
//! i64 on the device, no boolean weight, partials f16 or f32), and a size the host can hold. A workload
//! spec is checked once it is resolved; a package's graph is checked when the package is read, since a
//! package is data and may have been crafted behind a valid hash.

use super::{DType, Graph, OpKind, UnaryFn, Value, ValueRole};
use crate::ids::ValueId;

/// The most elements a value may have: addresses within a value are 32-bit byte offsets.
pub const MAX_ELEMENTS: u64 = (1 << 31) - 1;

impl Graph {
    /// Whether the graph is well formed; the first thing wrong, naming the value or op, if not.
    pub fn check(&self) -> Result<(), String> {
        for (i, v) in self.values.iter().enumerate() {
            let what = format!("value `{}`", v.name);
            if v.id.index() != i {
                return Err(format!("{what}: id {} at position {i}", v.id.index()));
            }
            let elements = v.elements();
            if v.rows == 0 || v.cols == 0 || elements > MAX_ELEMENTS {
                return Err(format!(
                    "{what}: [{}, {}] must be positive with fewer than 2^31 elements",
                    v.rows, v.cols
                ));
            }
            if v.dtype == DType::Bool && v.role == ValueRole::Weight {
                return Err(format!(
                    "{what}: a weight is f16, f32 or i64; a boolean constant is an f16 weight of 1 \
                     and 0"
                ));
            }
            let product = v
                .shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(u64::from(d)));
            if !v.shape.is_empty() && (v.shape.len() > 8 || product != Some(elements)) {
                return Err(format!(
                    "{what}: shape {:?} does not hold rows · cols = {elements} elements",
                    v.shape
                ));
            }
        }
        if !self.partials.is_partials() {
            return Err("partials must be f16 or f32".to_string());
        }
        let mut produced = vec![false; self.values.len()];
        for (i, op) in self.ops.iter().enumerate() {
            let what = format!("op `{}` ({})", op.name, op.kind.name());
            let mut check = || {
                if op.id.index() != i {
                    return Err(format!("id {} at position {i}", op.id.index()));
                }
                for v in op.kind.inputs().into_iter().chain([op.out]) {
                    if v.index() >= self.values.len() {
                        return Err(format!("value id {} is out of range", v.index()));
                    }
                }
                for v in op.kind.inputs() {
                    let value = self.value(v);
                    if matches!(value.role, ValueRole::Intermediate | ValueRole::Output)
                        && !produced[v.index()]
                    {
                        return Err(format!(
                            "input `{}` is not produced by an earlier op",
                            value.name
                        ));
                    }
                }
                let out = self.value(op.out);
                if matches!(out.role, ValueRole::Input | ValueRole::Weight)
                    || produced[op.out.index()]
                {
                    return Err(format!(
                        "output `{}` must be an intermediate or output value no other op produces",
                        out.name
                    ));
                }
                produced[op.out.index()] = true;
                attributes(&op.kind)?;
                shapes(&op.kind, op.out, &self.values)
            };
            check().map_err(|m| format!("{what}: {m}"))?;
        }
        for (v, p) in self.values.iter().zip(&produced) {
            if matches!(v.role, ValueRole::Intermediate | ValueRole::Output) && !p {
                return Err(format!(
                    "value `{}` ({:?}) is produced by no op",
                    v.name, v.role
                ));
            }
        }
        if !self.values.iter().any(|v| v.role == ValueRole::Output) {
            return Err("the graph has no output value".to_string());
        }
        Ok(())
    }
}

/// The op's attributes in their domains.
fn attributes(kind: &OpKind) -> Result<(), String> {
    let finite = |name: &str, v: f32| {
        if v.is_finite() {
            Ok(())
        } else {
            Err(format!("{name} = {v} must be finite"))
        }
    };
    match *kind {
        OpKind::LayerNorm { epsilon, .. } => {
            finite("epsilon", epsilon)?;
            if epsilon < 0.0 {
                return Err("epsilon must not be negative".to_string());
            }
        }
        OpKind::Attention {
            batch,
            heads,
            scale,
            ..
        } => {
            if batch == 0 || heads == 0 {
                return Err("attributes batch and heads must be positive integers".to_string());
            }
            finite("scale", scale)?;
        }
        OpKind::Embed { ref lookups } if lookups.is_empty() => {
            return Err("takes (table, indices) pairs, got 0 inputs".to_string());
        }
        OpKind::MaskBias { fill, .. } => finite("fill", fill)?,
        OpKind::Unary {
            function: UnaryFn::Pow { exponent },
            ..
        } => finite("exponent", exponent)?,
        OpKind::MeanPool { min_count, .. } => {
            finite("min_count", min_count)?;
            if min_count < 0.0 {
                return Err("min_count must not be negative".to_string());
            }
        }
        _ => {}
    }
    Ok(())
}

/// Shapes and dtypes consistent with the op's semantics; every id is in range.
fn shapes(kind: &OpKind, out: ValueId, values: &[Value]) -> Result<(), String> {
    let v = |id: ValueId| &values[id.index()];
    let dims = |id: ValueId| (v(id).rows, v(id).cols);
    let float = |id: ValueId| {
        if v(id).dtype == DType::I64 {
            Err(format!("`{}` must be a float value, not i64", v(id).name))
        } else {
            Ok(())
        }
    };
    let want = |id: ValueId, rows: u32, cols: u32| {
        if dims(id) == (rows, cols) {
            Ok(())
        } else {
            Err(format!(
                "`{}` is [{}, {}], expected [{rows}, {cols}]",
                v(id).name,
                v(id).rows,
                v(id).cols
            ))
        }
    };
    // Element-wise operands broadcast to `out`, `[max rows, max cols]`.
    let broadcast = |operands: &[ValueId]| {
        let rows = operands.iter().map(|&id| v(id).rows).max().unwrap_or(1);
        let cols = operands.iter().map(|&id| v(id).cols).max().unwrap_or(1);
        for &id in operands {
            let (r, c) = dims(id);
            if !(r == rows || r == 1) || !(c == cols || c == 1) {
                return Err(format!(
                    "`{}` is [{r}, {c}], which does not broadcast to [{rows}, {cols}] \
                     (operands are [rows, cols], [1, cols], [rows, 1] or [1, 1])",
                    v(id).name
                ));
            }
        }
        want(out, rows, cols)
    };
    if !kind.on_host() {
        for id in kind.inputs().into_iter().chain([out]) {
            float(id)?;
        }
    }
    match *kind {
        OpKind::MatMul { a, b } => {
            want(b, v(a).cols, v(b).cols)?;
            want(out, v(a).rows, v(b).cols)
        }
        OpKind::AddBias { x, bias } => {
            want(bias, 1, v(x).cols)?;
            want(out, v(x).rows, v(x).cols)
        }
        OpKind::GeluTanh { x } | OpKind::GeluErf { x } => want(out, v(x).rows, v(x).cols),
        OpKind::Add { a, b } => {
            want(b, v(a).rows, v(a).cols)?;
            want(out, v(a).rows, v(a).cols)
        }
        OpKind::LayerNorm { x, gamma, beta, .. } => {
            want(gamma, 1, v(x).cols)?;
            want(beta, 1, v(x).cols)?;
            want(out, v(x).rows, v(x).cols)
        }
        OpKind::Unary { x, .. } | OpKind::Softmax { x } => want(out, v(x).rows, v(x).cols),
        OpKind::Reduce { x, .. } => want(out, v(x).rows, 1),
        OpKind::Binary { a, b, .. } => broadcast(&[a, b]),
        OpKind::Select { condition, x, y } => broadcast(&[condition, x, y]),
        OpKind::Attention {
            q,
            k,
            v: vv,
            batch,
            heads,
            mask,
            ..
        } => {
            let (qr, qc) = dims(q);
            if qr % batch != 0 || v(k).rows % batch != 0 {
                return Err(format!(
                    "the rows of q ({qr}) and k ({}) must be multiples of batch {batch}",
                    v(k).rows
                ));
            }
            if qc % heads != 0 {
                return Err(format!("q's {qc} columns do not split into {heads} heads"));
            }
            want(k, v(k).rows, qc)?;
            want(vv, v(k).rows, qc)?;
            if let Some(m) = mask {
                want(m, batch, v(k).rows / batch)?;
            }
            want(out, qr, qc)
        }
        OpKind::Embed { ref lookups } => {
            let cols = v(out).cols;
            for &(table, indices) in lookups {
                float(table)?;
                want(table, v(table).rows, cols)?;
                if v(indices).dtype != DType::I64 || v(indices).elements() != u64::from(v(out).rows)
                {
                    return Err(format!(
                        "indices `{}` must be {} i64 values",
                        v(indices).name,
                        v(out).rows
                    ));
                }
            }
            float(out)
        }
        OpKind::MaskBias { mask, .. } => {
            float(out)?;
            want(out, v(mask).rows, v(mask).cols)
        }
        OpKind::Assemble { ref pieces } => assembled(pieces, out, values),
        OpKind::MeanPool { x, mask, .. } => {
            float(x)?;
            float(out)?;
            if u64::from(v(x).rows) != v(mask).elements() {
                return Err(format!(
                    "x's {} rows are not batch · tokens of the mask [{}, {}]",
                    v(x).rows,
                    v(mask).rows,
                    v(mask).cols
                ));
            }
            want(out, v(mask).rows, v(x).cols)
        }
    }
}

/// An assembly's pieces: ranks that agree, every index inside its value, every output element
/// written by exactly one piece.
fn assembled(pieces: &[super::Piece], out: ValueId, values: &[Value]) -> Result<(), String> {
    if pieces.is_empty() {
        return Err("takes at least one piece".to_string());
    }
    let out_value = &values[out.index()];
    let total = out_value.elements();
    let mut written = 0u128;
    for (k, p) in pieces.iter().enumerate() {
        let x = &values[p.x.index()];
        let rank = p.shape.len();
        if p.from.strides.len() != rank || p.to.strides.len() != rank || rank > 16 {
            return Err(format!(
                "piece {k}: shape {:?} (rank {rank}, at most 16) with {} from strides and {} to \
                 strides; the ranks must agree",
                p.shape,
                p.from.strides.len(),
                p.to.strides.len()
            ));
        }
        for (side, s, v) in [("from", &p.from, x), ("to", &p.to, out_value)] {
            if let Some((lo, hi)) = s.span(&p.shape)
                && (lo < 0 || hi >= i128::from(v.elements()))
            {
                return Err(format!(
                    "piece {k} ({side} `{}`): elements {lo}..={hi} fall outside its {} elements",
                    v.name,
                    v.elements()
                ));
            }
        }
        written += p.shape.iter().map(|&n| u128::from(n)).product::<u128>();
    }
    if written > u128::from(total) {
        return Err(format!(
            "the pieces write {written} elements, more than `{}`'s {total}, so some overlap",
            out_value.name
        ));
    }
    let mut seen = vec![0u64; total.div_ceil(64) as usize];
    for (k, p) in pieces.iter().enumerate() {
        let mut twice = None;
        crate::elements::for_each_pair(&p.shape, &p.to, &p.to, |e, _| {
            let (word, bit) = ((e / 64) as usize, e % 64);
            if seen[word] >> bit & 1 == 1 {
                twice = Some(e);
                return false;
            }
            seen[word] |= 1 << bit;
            true
        });
        if let Some(e) = twice {
            return Err(format!(
                "piece {k} writes element {e} of `{}`, which an earlier piece or itself also \
                 writes; pieces must not overlap",
                out_value.name
            ));
        }
    }
    if written < u128::from(total) {
        let e = (0..total)
            .find(|&e| seen[(e / 64) as usize] >> (e % 64) & 1 == 0)
            .unwrap_or(0);
        return Err(format!(
            "no piece writes element {e} of `{}` (row {}, column {}); every element needs one",
            out_value.name,
            e / u64::from(out_value.cols),
            e % u64::from(out_value.cols)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::OpId;
    use crate::ir::Op;

    fn value(i: usize, name: &str, rows: u32, cols: u32, role: ValueRole) -> Value {
        Value {
            id: ValueId::from_index(i),
            name: name.to_string(),
            rows,
            cols,
            dtype: DType::F16,
            role,
            fan_in: 3,
            shape: Vec::new(),
        }
    }

    /// `y = x · w`, `x: [2, 3]`, `w: [3, 4]`.
    fn matmul() -> Graph {
        Graph {
            workload: "g".to_string(),
            values: vec![
                value(0, "x", 2, 3, ValueRole::Input),
                value(1, "w", 3, 4, ValueRole::Weight),
                value(2, "y", 2, 4, ValueRole::Output),
            ],
            ops: vec![Op {
                id: OpId::from_index(0),
                name: "mm".to_string(),
                kind: OpKind::MatMul {
                    a: ValueId::from_index(0),
                    b: ValueId::from_index(1),
                },
                out: ValueId::from_index(2),
            }],
            partials: DType::F32,
            parameters: Vec::new(),
        }
    }

    /// What a malformation is refused with, and the malformation.
    type Craft<T> = (&'static str, fn(&mut T));

    #[test]
    fn a_well_formed_graph_passes_and_each_malformation_is_named() {
        assert_eq!(matmul().check(), Ok(()));
        let cases: [Craft<Graph>; 8] = [
            ("value `w`: id 7 at position 1", |g| {
                g.values[1].id = ValueId::from_index(7)
            }),
            ("op `mm` (matmul): value id 9 is out of range", |g| {
                g.ops[0].out = ValueId::from_index(9)
            }),
            ("`y` is [2, 4], expected [2, 5]", |g| g.values[1].cols = 5),
            ("value `x`: [0, 3] must be positive", |g| {
                g.values[0].rows = 0
            }),
            ("value `w`: [3, 2147483648] must be positive", |g| {
                g.values[1].cols = 1 << 31
            }),
            ("output `x` must be an intermediate", |g| {
                g.ops[0].out = ValueId::from_index(0)
            }),
            ("value `y` (Output) is produced by no op", |g| g.ops.clear()),
            ("shape [5] does not hold", |g| g.values[2].shape = vec![5]),
        ];
        for (said, damage) in cases {
            let mut g = matmul();
            damage(&mut g);
            let error = g.check().unwrap_err();
            assert!(error.contains(said), "{said}: {error}");
        }
    }
}
