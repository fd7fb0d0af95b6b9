//! The patterns of a transformer encoder's export and the graph operations they become. [`Sym`] is what
//! an ONNX tensor stands for; [`Ctx::node`] takes one node that is not constant and either advances a
//! pattern (returns its next step) or emits the operation a pattern's last node completes:
//!
//! - `MatMul(x, W)` → `MatMul`; `Add(x, b[n])` → `AddBias` (`b` a `[1, n]` weight); `Add(x, y)` → `Add`.
//! - `Gather(table, ids)` summed by `Add` → host `Embed` (constant indices become i64 weights).
//! - `Cast(Unsqueeze(mask))` → `Sub(1, ·)` → `Mul(·, fill)` → host `MaskBias` (one per mask and fill).
//! - `Reshape(x, [b, s, h, d])` + `Transpose` for q, k (`[0,2,3,1]` overall) and v;
//!   `MatMul(q, kᵀ)` → `Div`/`Mul` by a scalar → `Add(mask bias)`? → `Softmax(-1)` → `MatMul(·, v)` →
//!   `Transpose([0,2,1,3])` → `Reshape([b, s, h·d])` → one `Attention`.
//! - `Gelu` (every GELU spelling after canonicalisation) → `GeluErf` or `GeluTanh`.
//! - `LayerNormalization` over the last axis (every LayerNorm spelling) → `LayerNorm`.
//! - `MaskedMeanPool` (masked mean pooling after canonicalisation) → host `MeanPool`.
//!
//! What no pattern takes lowers op by op: element-wise operators, reductions and Softmax by
//! [`super::vector`]; comparisons, logic, `Where`, `Cast`, `IsNaN` and `IsInf` of computed tensors by
//! [`super::logic`]; data movement by [`super::movement`].
//!
//! The graph it reads is canonical ([`super::canonical`]): constants folded, one spelling of each
//! computation. A node that fits none, or fits one but for a detail (a head split that does not
//! divide), is an error; the caller names the node.

use super::imported::WeightData;
use super::tensor::{self, Tensor};
use crate::ids::{OpId, ValueId};
use crate::ir::{BinaryFn, DType, Op, OpKind, UnaryFn, Value, ValueRole};
use std::collections::BTreeMap;
use std::rc::Rc;

/// An embedding lookup's indices: a graph input, or a constant (named by its ONNX tensor).
#[derive(Clone, Debug)]
pub enum Indices {
    Input(ValueId),
    Const(String, Rc<Tensor>),
}

/// What an ONNX tensor stands for.
#[derive(Clone, Debug)]
pub enum Sym {
    /// A constant, with its ONNX tensor name.
    Const(String, Rc<Tensor>),
    /// A float value of the graph with its ONNX shape.
    Value { id: ValueId, shape: Vec<usize> },
    /// Float values' elements moved (see [`super::movement`]): for each element, its offset into
    /// `sources` laid end to end.
    View {
        sources: Vec<ValueId>,
        index: Rc<Tensor>,
    },
    /// An integer graph input (`base` its shape) seen through operators that move or repeat its
    /// elements (Unsqueeze, Expand, Reshape, Transpose, Slice, Gather, GatherND, And with true) and
    /// Cast: `index` holds, for each element of the view, the flat index of the input's element it is.
    Host {
        id: ValueId,
        base: Vec<usize>,
        index: Rc<Tensor>,
        float: bool,
    },
    /// `1 − mask`, of a view `index` of the mask.
    InvMask { id: ValueId, index: Rc<Tensor> },
    /// `(1 − mask) · fill`; `name` and `tensor` the node and tensor that completed it.
    MaskBias {
        id: ValueId,
        index: Rc<Tensor>,
        fill: f32,
        name: String,
        tensor: String,
    },
    /// A sum of embedding lookups `(table, indices)`.
    Embed {
        lookups: Vec<(ValueId, Indices)>,
        shape: Vec<usize>,
        name: String,
        tensor: String,
    },
    /// A `[b, s, h, d]` value (`base`) seen through the axis order `perm`.
    Heads {
        id: ValueId,
        base: [usize; 4],
        perm: [usize; 4],
    },
    /// Attention scores `q · kᵀ · scale + mask`, softmaxed or not.
    Scores {
        q: ValueId,
        k: ValueId,
        base: [usize; 4],
        keys: usize,
        scale: f32,
        mask: Option<ValueId>,
        softmax: bool,
    },
}

fn permute(base: &[usize; 4], perm: &[usize; 4]) -> Vec<usize> {
    perm.iter().map(|&p| base[p]).collect()
}

pub(super) const HEADS_QV: [usize; 4] = [0, 2, 1, 3];
pub(super) const HEADS_KT: [usize; 4] = [0, 2, 3, 1];
pub(super) const IDENTITY: [usize; 4] = [0, 1, 2, 3];

impl Sym {
    /// The tensor's ONNX shape.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Sym::Const(_, t) => t.shape.clone(),
            Sym::Value { shape, .. } | Sym::Embed { shape, .. } => shape.clone(),
            Sym::Host { index, .. }
            | Sym::InvMask { index, .. }
            | Sym::MaskBias { index, .. }
            | Sym::View { index, .. } => index.shape.clone(),
            Sym::Heads { base, perm, .. } => permute(base, perm),
            Sym::Scores { base, keys, .. } => vec![base[0], base[2], base[1], *keys],
        }
    }

    pub(super) fn what(&self) -> &'static str {
        match self {
            Sym::Const(..) => "a constant",
            Sym::Value { .. } | Sym::View { .. } => "a computed tensor",
            Sym::Host { .. } => "an integer graph input",
            Sym::InvMask { .. } | Sym::MaskBias { .. } => "the mask-bias chain",
            Sym::Embed { .. } => "an embedding sum",
            Sym::Heads { .. } => "a head split of attention",
            Sym::Scores { .. } => "attention scores",
        }
    }

    pub(super) fn scalar(&self) -> Option<f32> {
        match self {
            Sym::Const(_, t) if t.is_float() || t.len() == 1 => t.scalar(),
            _ => None,
        }
    }
}

/// The view of a whole input of shape `base`: each element its own flat index.
pub(super) fn iota(base: &[usize]) -> Rc<Tensor> {
    let n: usize = base.iter().product();
    Rc::new(Tensor {
        shape: base.to_vec(),
        data: tensor::Data::I64((0..n as i64).collect()),
    })
}

/// Whether the view `index` of an input of shape `base` is the input itself.
pub(super) fn is_whole(index: &Tensor, base: &[usize]) -> bool {
    index.shape == base && index.ints().iter().enumerate().all(|(i, &j)| j == i as i64)
}

/// Whether the view `index` of an input of shape `base`, broadcast to `out`, is the input broadcast
/// so that axis `axes[i]` of `out` runs along axis `i` of the input (a `[batch, keys]` mask over
/// `[batch, heads, queries, keys]` scores: axes `[0, 3]`).
pub(super) fn broadcasts_along(
    index: &Tensor,
    base: &[usize],
    out: &[usize],
    axes: &[usize],
) -> bool {
    let Ok(full) = index.expand(out) else {
        return false;
    };
    if full.shape != out
        || axes.len() != base.len()
        || axes.iter().zip(base).any(|(&a, &d)| out.get(a) != Some(&d))
    {
        return false;
    }
    let mut coord = vec![0usize; out.len()];
    for &j in &full.ints() {
        let want = axes
            .iter()
            .zip(base)
            .fold(0usize, |f, (&a, &d)| f * d + coord[a]);
        if j != want as i64 {
            return false;
        }
        for k in (0..out.len()).rev() {
            coord[k] += 1;
            if coord[k] < out[k] {
                break;
            }
            coord[k] = 0;
        }
    }
    true
}

pub(super) fn near(a: f32, b: f32) -> bool {
    (a - b).abs() <= 1e-3 * b.abs().max(1.0)
}

/// A view's sources and element indices, by which an assembled view is found again.
pub(super) type ViewKey = (Vec<ValueId>, Rc<Tensor>);

/// The graph under construction.
pub struct Ctx {
    pub(super) opset: i64,
    pub values: Vec<Value>,
    pub(super) ops: Vec<Op>,
    pub(super) weights: BTreeMap<String, WeightData>,
    /// Weight values by ONNX initializer name.
    pub(super) weight_ids: BTreeMap<String, ValueId>,
    /// Mask-bias values by (mask, fill bits).
    pub(super) mask_biases: BTreeMap<(ValueId, u32), ValueId>,
    pub(super) layers: usize,
    /// Views assembled so far, with the value each became.
    pub(super) assembled: Vec<(ViewKey, (ValueId, Vec<usize>))>,
    pub(super) views: usize,
}

impl Ctx {
    pub fn new(opset: i64) -> Ctx {
        Ctx {
            opset,
            values: Vec::new(),
            ops: Vec::new(),
            weights: BTreeMap::new(),
            weight_ids: BTreeMap::new(),
            mask_biases: BTreeMap::new(),
            layers: 0,
            assembled: Vec::new(),
            views: 0,
        }
    }

    /// A new value with ONNX shape `shape` (leading dimensions flattened into rows).
    pub fn value(
        &mut self,
        name: &str,
        shape: &[usize],
        dtype: DType,
        role: ValueRole,
        fan_in: u32,
    ) -> Result<ValueId, String> {
        let (lead, last) = match shape.split_last() {
            Some((last, lead)) => (lead.iter().product::<usize>(), *last),
            None => (1, 1),
        };
        self.value_with(name, lead, last, shape, dtype, role, fan_in)
    }

    /// A new f16 intermediate value stored as `[rows, cols]` with ONNX shape `shape` (a reduction
    /// without its kept axis: `[rows, 1]` shown as `shape`).
    pub(super) fn value_2d(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
        shape: &[usize],
    ) -> Result<ValueId, String> {
        self.value_with(
            name,
            rows,
            cols,
            shape,
            DType::F16,
            ValueRole::Intermediate,
            0,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn value_with(
        &mut self,
        name: &str,
        lead: usize,
        last: usize,
        shape: &[usize],
        dtype: DType,
        role: ValueRole,
        fan_in: u32,
    ) -> Result<ValueId, String> {
        let limit = 1usize << 31;
        if lead.checked_mul(last).is_none_or(|n| n >= limit) || shape.iter().any(|&d| d >= limit) {
            return Err(format!(
                "tensor `{name}` of shape {shape:?} has 2^31 elements or more"
            ));
        }
        if lead == 0 || last == 0 {
            return Err(format!(
                "tensor `{name}` of shape {shape:?} has no elements"
            ));
        }
        if self.values.iter().any(|v| v.name == name) {
            return Err(format!("a value named `{name}` exists already"));
        }
        let id = ValueId::from_index(self.values.len());
        self.values.push(Value {
            id,
            name: name.to_string(),
            rows: lead as u32,
            cols: last as u32,
            dtype,
            role,
            fan_in,
            shape: shape.iter().map(|&d| d as u32).collect(),
        });
        Ok(id)
    }

    pub(super) fn op(&mut self, name: &str, kind: OpKind, out: ValueId) {
        let id = OpId::from_index(self.ops.len());
        self.ops.push(Op {
            id,
            name: name.to_string(),
            kind,
            out,
        });
    }

    /// The weight value of initializer `name` (made on first use), with `rows` × `cols` elements.
    pub(super) fn weight(
        &mut self,
        name: &str,
        t: &Tensor,
        shape: &[usize],
        dtype: DType,
        fan_in: u32,
    ) -> Result<ValueId, String> {
        if let Some(&id) = self.weight_ids.get(name) {
            if self.values[id.index()].dtype != dtype {
                return Err(format!(
                    "constant `{name}` is used both as {dtype} and as another type"
                ));
            }
            return Ok(id);
        }
        let id = self.value(name, shape, dtype, ValueRole::Weight, fan_in)?;
        let data = match dtype {
            DType::I64 => WeightData::I64(t.ints()),
            _ => WeightData::F32(t.floats()),
        };
        self.weights.insert(name.to_string(), data);
        self.weight_ids.insert(name.to_string(), id);
        Ok(id)
    }

    /// A float value for `s`: a value as it is, an embedding sum as its host `Embed`.
    pub(super) fn materialize(&mut self, s: &Sym) -> Result<(ValueId, Vec<usize>), String> {
        match s {
            Sym::Value { id, shape } => Ok((*id, shape.clone())),
            Sym::Heads { .. } => {
                let view = self.as_view(s)?;
                self.materialize(&Sym::View {
                    sources: view.0,
                    index: view.1,
                })
            }
            Sym::View { sources, index } => {
                // A view is assembled where it is read; the same view read twice is assembled once.
                let key = (sources.clone(), index.clone());
                if let Some((id, shape)) = self
                    .assembled
                    .iter()
                    .find(|(k, _)| k.0 == key.0 && k.1 == key.1)
                    .map(|(_, v)| v.clone())
                {
                    return Ok((id, shape));
                }
                self.views += 1;
                let name = format!("assembled_{}", self.views);
                let made = self.assemble(&name, &name, sources, index)?;
                self.assembled.push((key, made.clone()));
                Ok(made)
            }
            Sym::Embed {
                lookups,
                shape,
                name,
                tensor,
            } => {
                let lead = &shape[..shape.len() - 1];
                let mut pairs = Vec::new();
                for (table, indices) in lookups {
                    let ids = match indices {
                        Indices::Input(id) => {
                            if self.values[id.index()]
                                .shape
                                .iter()
                                .map(|&d| d as usize)
                                .ne(lead.iter().copied())
                            {
                                return Err(format!(
                                    "the lookup of `{}` is not of shape {lead:?}",
                                    self.values[id.index()].name
                                ));
                            }
                            *id
                        }
                        Indices::Const(n, t) => {
                            let full = t.expand(lead)?;
                            if full.shape != lead {
                                return Err(format!("indices `{n}` do not broadcast to {lead:?}"));
                            }
                            self.weight(n, &full, lead, DType::I64, 0)?
                        }
                    };
                    pairs.push((*table, ids));
                }
                let out = self.value(tensor, shape, DType::F16, ValueRole::Intermediate, 0)?;
                self.op(name, OpKind::Embed { lookups: pairs }, out);
                Ok((out, shape.clone()))
            }
            Sym::Host { id, .. } => Err(format!(
                "`{}` is an integer graph input, which the device never holds (it computes floats \
                 and booleans): integers reach it only as an embedding's ids or an attention mask",
                self.values[id.index()].name
            )),
            other => Err(format!("{} cannot be used as a tensor here", other.what())),
        }
    }

    /// One node whose inputs are not all constant.
    pub fn node(
        &mut self,
        node: &super::opgraph::Node,
        ins: &[Option<Sym>],
    ) -> Result<Sym, String> {
        let attrs = &node.attrs;
        let name = &node.name;
        let tensor = node.output();
        let input = |i: usize| {
            ins.get(i)
                .and_then(Option::as_ref)
                .ok_or(format!("input {i} is missing"))
        };
        let op = node.op.as_str();
        match op {
            "Identity" => Ok(input(0)?.clone()),
            "Concat" if ins.len() == 1 => Ok(input(0)?.clone()),
            "Cast" | "Unsqueeze" | "Expand" | "Reshape" | "Squeeze" | "Transpose" | "Flatten"
            | "Slice" | "GatherND" | "And"
                if matches!(ins.first(), Some(Some(Sym::Host { .. })))
                    || (op == "And" && matches!(ins.get(1), Some(Some(Sym::Host { .. })))) =>
            {
                self.host_view(node, ins)
            }
            "Not" | "And" | "Or" | "Xor" | "Where" | "Cast" | "IsNaN" | "IsInf" => self.logic(node, ins),
            op if comparison_fn(op).is_some() => {
                let f = comparison_fn(op).expect("matched");
                self.binary(name, tensor, input(0)?, input(1)?, f)
            }
            "Gather" if matches!(input(0), Ok(Sym::Const(..))) => match (input(0)?, input(1)?) {
                (Sym::Const(n, t), idx) if t.is_float() && t.shape.len() == 2 && attrs.i("axis").unwrap_or(0) == 0 => {
                    let table = self.weight(n, t, &t.shape, DType::F32, 1)?;
                    let (indices, lead) = match idx {
                        Sym::Host { id, base, index, float: false } if is_whole(index, base) => (Indices::Input(*id), base.clone()),
                        Sym::Const(m, i) if !i.is_float() => (Indices::Const(m.clone(), i.clone()), i.shape.clone()),
                        other => return Err(format!("an embedding lookup takes graph-input or constant indices, not {}", other.what())),
                    };
                    let mut shape = lead;
                    shape.push(t.shape[1]);
                    Ok(Sym::Embed { lookups: vec![(table, indices)], shape, name: name.clone(), tensor: tensor.to_string() })
                }
                _ => Err("Gather lowers only as an embedding lookup (a constant float [entries, dim] table, axis 0)".to_string()),
            },
            "Add" => self.add(name, tensor, input(0)?, input(1)?),
            "Sub" => match (input(0)?, input(1)?) {
                (c, Sym::Host { id, index, float: true, .. }) if c.scalar().is_some_and(|v| v == 1.0) => {
                    Ok(Sym::InvMask { id: *id, index: index.clone() })
                }
                (a, b) => self.binary(name, tensor, a, b, crate::ir::BinaryFn::Sub),
            },
            op if unary_fn(op).is_some() => {
                self.unary(name, tensor, input(0)?, unary_fn(op).expect("matched"))
            }
            "Pow" => match input(1)?.scalar() {
                Some(exponent) => self.unary(name, tensor, input(0)?, crate::ir::UnaryFn::Pow { exponent }),
                None => self.binary(name, tensor, input(0)?, input(1)?, crate::ir::BinaryFn::Pow),
            },
            "Max" | "Min" if ins.len() == 2 => {
                let f = binary_fn(op).expect("Max and Min are binary");
                self.binary(name, tensor, input(0)?, input(1)?, f)
            }
            "ReduceMean" | "ReduceMax" => {
                let axes = match ins.get(1).and_then(Option::as_ref) {
                    Some(Sym::Const(_, t)) => t.ints(),
                    Some(_) => return Err(format!("{op}'s axes must be constant")),
                    None => attrs.ints("axes").unwrap_or_default(),
                };
                let f = if op == "ReduceMean" { crate::ir::ReduceFn::Mean } else { crate::ir::ReduceFn::Max };
                self.reduce(name, tensor, input(0)?, &axes, attrs.i("keepdims").unwrap_or(1) != 0, f)
            }
            "Mul" => self.mul(name, tensor, input(0)?, input(1)?),
            "Div" => self.div(name, tensor, input(0)?, input(1)?),
            "Gelu" => self.gelu(name, tensor, input(0)?, attrs.s("approximate").unwrap_or("none")),
            "MatMul" => self.matmul(name, tensor, input(0)?, input(1)?),
            "Reshape" => match self.reshape(input(0)?, input(1)?, attrs) {
                Ok(s) => Ok(s),
                Err(_) if matches!(input(0)?, Sym::Value { .. } | Sym::View { .. }) => self.movement(node, ins),
                Err(e) => Err(e),
            },
            "Concat" if ins.iter().flatten().any(|s| matches!(s, Sym::Value { .. } | Sym::View { .. } | Sym::Embed { .. })) => {
                self.concat(node, ins)
            }
            op if moves(op) && matches!(input(0)?, Sym::Value { .. } | Sym::View { .. } | Sym::Embed { .. }) => {
                self.movement(node, ins)
            }
            "Transpose" if !matches!(input(0)?, Sym::Heads { .. }) => self.movement(node, ins),
            "Transpose" => {
                let perm = attrs.ints("perm").ok_or("Transpose needs its perm")?;
                let p: [usize; 4] = perm
                    .iter()
                    .map(|&a| usize::try_from(a).ok().filter(|&a| a < 4))
                    .collect::<Option<Vec<_>>>()
                    .and_then(|v| v.try_into().ok())
                    .ok_or(format!("Transpose perm {perm:?} is not a 4-D permutation"))?;
                match input(0)? {
                    Sym::Heads { id, base, perm } => Ok(Sym::Heads { id: *id, base: *base, perm: p.map(|i| perm[i]) }),
                    _ => Err("Transpose lowers only on attention heads".to_string()),
                }
            }
            "Softmax" => {
                let default = if self.opset >= 13 { -1 } else { 1 };
                let axis = attrs.i("axis").unwrap_or(default);
                match input(0)? {
                    Sym::Scores { softmax: false, .. } if axis == -1 || axis == 3 => {
                        let mut s = input(0)?.clone();
                        if let Sym::Scores { softmax, .. } = &mut s {
                            *softmax = true;
                        }
                        Ok(s)
                    }
                    Sym::Scores { .. } => Err(format!("Softmax over axis {axis}: attention takes it over the keys (-1)")),
                    other => self.softmax(name, tensor, other, axis),
                }
            }
            "LayerNormalization" => {
                let (x, shape) = self.materialize(input(0)?)?;
                let cols = *shape.last().ok_or("LayerNormalization of a scalar")?;
                let axis = attrs.i("axis").unwrap_or(-1);
                if tensor::axis(axis, shape.len())? != shape.len() - 1 {
                    return Err(format!("LayerNormalization over axis {axis}: only the last axis lowers"));
                }
                let mut param = |i: usize| match ins.get(i).and_then(Option::as_ref) {
                    Some(Sym::Const(n, t)) if t.is_float() && t.len() == cols && t.shape.last() == Some(&cols) => self.weight(n, t, &t.shape, DType::F16, 1),
                    _ => Err(format!("LayerNormalization input {i} must be a constant of {cols} floats")),
                };
                let (gamma, beta) = (param(1)?, param(2)?);
                let epsilon = attrs.f("epsilon").unwrap_or(1e-5);
                let out = self.value(tensor, &shape, DType::F16, ValueRole::Intermediate, 0)?;
                self.op(name, OpKind::LayerNorm { x, gamma, beta, epsilon }, out);
                Ok(Sym::Value { id: out, shape })
            }
            "ReduceSum" => {
                let axes = match ins.get(1).and_then(Option::as_ref) {
                    Some(Sym::Const(_, t)) => t.ints(),
                    Some(_) => return Err("ReduceSum's axes must be constant".to_string()),
                    None => attrs.ints("axes").unwrap_or_default(),
                };
                self.reduce(name, tensor, input(0)?, &axes, attrs.i("keepdims").unwrap_or(1) != 0, crate::ir::ReduceFn::Sum)
            }
            "MaskedMeanPool" => self.mean_pool(name, tensor, input(0)?, input(1)?, attrs.f("min_count").unwrap_or(0.0)),
            "Conv" => Err(
                "a Conv lowers only as a patch embedding: its kernel equal to its stride, no padding, dilation or groups, a constant kernel"
                    .to_string(),
            ),
            other => Err(format!(
                "operator {other} on {} does not lower onto the graph (no pattern takes it, and it has no vector operation yet)",
                ins.iter().flatten().map(Sym::what).collect::<Vec<_>>().join(" and ")
            )),
        }
    }

    /// An integer graph input seen through an operator that moves its elements (evaluated on its
    /// view's indices), Cast, or And with a constant that is true everywhere (the mask chains).
    fn host_view(
        &mut self,
        node: &super::opgraph::Node,
        ins: &[Option<Sym>],
    ) -> Result<Sym, String> {
        let op = node.op.as_str();
        let host = ins.iter().flatten().find(|s| matches!(s, Sym::Host { .. }));
        let Some(Sym::Host {
            id,
            base,
            index,
            float,
        }) = host
        else {
            return Err(format!(
                "{op} lowers only on an integer graph input (a mask) or on constants"
            ));
        };
        let view = |index: Tensor, float: bool| Sym::Host {
            id: *id,
            base: base.clone(),
            index: Rc::new(index),
            float,
        };
        match op {
            "Cast" => {
                use super::proto::data_type as d;
                let to = node.attrs.i("to").unwrap_or(0) as i32;
                Ok(view(
                    index.as_ref().clone(),
                    matches!(to, d::FLOAT | d::DOUBLE | d::FLOAT16 | d::BFLOAT16),
                ))
            }
            "And" => {
                let other = ins
                    .iter()
                    .flatten()
                    .find(|s| !matches!(s, Sym::Host { .. }));
                match other {
                    Some(Sym::Const(_, t)) if t.ints().iter().all(|&v| v != 0) => {
                        let out = tensor::broadcast(&index.shape, &t.shape)?;
                        Ok(view(index.expand(&out)?, *float))
                    }
                    _ => Err(
                        "And lowers on a mask only with a constant that is true everywhere"
                            .to_string(),
                    ),
                }
            }
            _ => {
                let mut consts = vec![Some(index.as_ref())];
                for s in &ins[1..] {
                    match s {
                        Some(Sym::Const(_, t)) => consts.push(Some(t.as_ref())),
                        None => consts.push(None),
                        Some(_) => {
                            return Err(format!(
                                "{op} of a mask takes constant operands besides it"
                            ));
                        }
                    }
                }
                let moved = super::eval::eval(op, &consts, &node.attrs, self.opset)?;
                Ok(view(moved.into_iter().next().ok_or("no output")?, *float))
            }
        }
    }
}

/// The vector function of an element-wise unary ONNX operator.
fn unary_fn(op: &str) -> Option<UnaryFn> {
    Some(match op {
        "Neg" => UnaryFn::Neg,
        "Abs" => UnaryFn::Abs,
        "Sqrt" => UnaryFn::Sqrt,
        "Reciprocal" => UnaryFn::Reciprocal,
        "Exp" => UnaryFn::Exp,
        "Erf" => UnaryFn::Erf,
        "Tanh" => UnaryFn::Tanh,
        "Sigmoid" => UnaryFn::Sigmoid,
        "Relu" => UnaryFn::Relu,
        _ => return None,
    })
}

/// The vector function of a binary ONNX operator.
fn binary_fn(op: &str) -> Option<BinaryFn> {
    Some(match op {
        "Add" => BinaryFn::Add,
        "Sub" => BinaryFn::Sub,
        "Mul" => BinaryFn::Mul,
        "Div" => BinaryFn::Div,
        "Pow" => BinaryFn::Pow,
        "Max" => BinaryFn::Max,
        "Min" => BinaryFn::Min,
        _ => return None,
    })
}

/// The comparison of an ONNX comparison operator (its result boolean: [`super::logic`]).
fn comparison_fn(op: &str) -> Option<BinaryFn> {
    Some(match op {
        "Equal" => BinaryFn::Equal,
        "Less" => BinaryFn::Less,
        "LessOrEqual" => BinaryFn::LessEqual,
        "Greater" => BinaryFn::Greater,
        "GreaterOrEqual" => BinaryFn::GreaterEqual,
        _ => return None,
    })
}

/// The operators a view passes through, evaluated on its indices.
fn moves(op: &str) -> bool {
    matches!(
        op,
        "Transpose"
            | "Reshape"
            | "Slice"
            | "Expand"
            | "Squeeze"
            | "Unsqueeze"
            | "Flatten"
            | "Gather"
            | "Identity"
    )
}
