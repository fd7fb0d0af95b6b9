//! The arithmetic nodes of the patterns (`Add`, `Mul`, `Div`, `MatMul`, `Reshape`) and the graph's
//! completion: which pattern step each combination of operands advances, and the operations emitted
//! when a pattern completes (see [`super::patterns`] for the list).

use super::imported::{ImportConfig, WeightData};
use super::patterns::{Ctx, HEADS_KT, HEADS_QV, IDENTITY, Sym, broadcasts_along};
use super::tensor;
use crate::ids::ValueId;
use crate::ir::{BinaryFn, DType, Graph, OpKind, ValueRole};
use std::collections::BTreeMap;

impl Ctx {
    pub(super) fn add(
        &mut self,
        name: &str,
        tensor: &str,
        a: &Sym,
        b: &Sym,
    ) -> Result<Sym, String> {
        for (a, b) in [(a, b), (b, a)] {
            match (a, b) {
                (
                    Sym::Embed {
                        lookups: la,
                        shape: sa,
                        ..
                    },
                    Sym::Embed {
                        lookups: lb,
                        shape: sb,
                        ..
                    },
                ) => {
                    return Ok(Sym::Embed {
                        lookups: la.iter().chain(lb).cloned().collect(),
                        shape: tensor::broadcast(sa, sb)?,
                        name: name.to_string(),
                        tensor: tensor.to_string(),
                    });
                }
                (
                    Sym::Scores {
                        q,
                        k,
                        base,
                        keys,
                        scale,
                        mask: None,
                        softmax: false,
                    },
                    Sym::MaskBias {
                        id,
                        index,
                        fill,
                        name: bias_name,
                        tensor: bias_tensor,
                    },
                ) => {
                    let scores = [base[0], base[2], base[1], *keys];
                    if !broadcasts_along(index, &[base[0], *keys], &scores, &[0, 3]) {
                        return Err(format!(
                            "the mask bias of shape {:?} is not the [batch, keys] mask broadcast over the scores {scores:?}",
                            index.shape
                        ));
                    }
                    let key = (*id, fill.to_bits());
                    let mask = match self.mask_biases.get(&key) {
                        Some(&m) => m,
                        None => {
                            let out = self.value(
                                bias_tensor,
                                &[base[0], *keys],
                                DType::F16,
                                ValueRole::Intermediate,
                                0,
                            )?;
                            self.op(
                                bias_name,
                                OpKind::MaskBias {
                                    mask: *id,
                                    fill: *fill,
                                },
                                out,
                            );
                            self.mask_biases.insert(key, out);
                            out
                        }
                    };
                    return Ok(Sym::Scores {
                        q: *q,
                        k: *k,
                        base: *base,
                        keys: *keys,
                        scale: *scale,
                        mask: Some(mask),
                        softmax: false,
                    });
                }
                (Sym::Embed { lookups, shape, .. }, Sym::Const(n, t))
                    if t.is_float() && t.shape.last() == shape.last() =>
                {
                    // A constant added to an embedding sum (position embeddings folded to a
                    // constant): one more lookup, of the constant's rows by where each token lies.
                    let out = tensor::broadcast(shape, &t.shape)?;
                    if &out != shape {
                        return Err(format!(
                            "the constant `{n}` of shape {:?} does not broadcast to the embeddings {shape:?}",
                            t.shape
                        ));
                    }
                    let cols = *shape.last().expect("matched");
                    let lead = &t.shape[..t.shape.len() - 1];
                    let rows: usize = lead.iter().product();
                    let table = self.weight(
                        n,
                        &t.reshaped(vec![rows, cols]),
                        &[rows, cols],
                        DType::F32,
                        1,
                    )?;
                    let iota = tensor::Tensor {
                        shape: lead.to_vec(),
                        data: tensor::Data::I64((0..rows as i64).collect()),
                    };
                    let indices = iota.expand(&shape[..shape.len() - 1])?;
                    let mut lookups = lookups.clone();
                    lookups.push((
                        table,
                        super::patterns::Indices::Const(
                            format!("{n}/rows"),
                            std::rc::Rc::new(indices),
                        ),
                    ));
                    return Ok(Sym::Embed {
                        lookups,
                        shape: shape.clone(),
                        name: name.to_string(),
                        tensor: tensor.to_string(),
                    });
                }
                (
                    x @ (Sym::Value { .. } | Sym::Embed { .. } | Sym::View { .. }),
                    Sym::Const(n, t),
                ) => {
                    let (x, shape) = self.materialize(x)?;
                    let cols = *shape.last().ok_or("Add of a scalar")?;
                    let lead_ones = t
                        .shape
                        .split_last()
                        .is_some_and(|(&l, lead)| l == cols && lead.iter().all(|&d| d == 1));
                    if !(t.is_float() && lead_ones && t.shape.len() <= shape.len()) {
                        return self.binary(name, tensor, a, b, BinaryFn::Add);
                    }
                    let fan_in = self.fan_in_of(x);
                    let bias = self.weight(n, t, &t.shape, DType::F16, fan_in)?;
                    let out = self.value(tensor, &shape, DType::F16, ValueRole::Intermediate, 0)?;
                    self.op(name, OpKind::AddBias { x, bias }, out);
                    return Ok(Sym::Value { id: out, shape });
                }
                _ => {}
            }
        }
        let materializable =
            |s: &Sym| matches!(s, Sym::Value { .. } | Sym::Embed { .. } | Sym::View { .. });
        if materializable(a) && materializable(b) {
            let ((x, sx), (y, sy)) = (self.materialize(a)?, self.materialize(b)?);
            if sx != sy {
                return self.binary(name, tensor, a, b, BinaryFn::Add);
            }
            let out = self.value(tensor, &sx, DType::F16, ValueRole::Intermediate, 0)?;
            self.op(name, OpKind::Add { a: x, b: y }, out);
            return Ok(Sym::Value { id: out, shape: sx });
        }
        self.binary(name, tensor, a, b, BinaryFn::Add)
    }

    /// The fan-in of the matmul that produced `x`, else its columns.
    fn fan_in_of(&self, x: ValueId) -> u32 {
        self.ops
            .iter()
            .rev()
            .find(|op| op.out == x)
            .and_then(|op| match op.kind {
                OpKind::MatMul { a, .. } => Some(self.values[a.index()].cols),
                _ => None,
            })
            .unwrap_or(self.values[x.index()].cols)
    }

    /// `MaskedMeanPool(x, m)` (the canonical form of masked mean pooling) → host `MeanPool`: `x`
    /// `[batch, tokens, dim]`, `m` the `[batch, tokens]` mask broadcast over it.
    pub(super) fn mean_pool(
        &mut self,
        name: &str,
        tensor: &str,
        x: &Sym,
        m: &Sym,
        min_count: f32,
    ) -> Result<Sym, String> {
        let (x, shape) = self.materialize(x)?;
        let Sym::Host {
            id: mask,
            base,
            index,
            float: true,
        } = m
        else {
            return Err(format!(
                "mean pooling's mask must be the float mask input, not {}",
                m.what()
            ));
        };
        if shape.len() != 3 || !broadcasts_along(index, base, &shape, &[0, 1]) {
            return Err(format!(
                "mean pooling multiplies [batch, tokens, dim] by the [batch, tokens] mask; got {shape:?} and {:?}",
                index.shape
            ));
        }
        let out_shape = vec![shape[0], shape[2]];
        let out = self.value(tensor, &out_shape, DType::F32, ValueRole::Intermediate, 0)?;
        self.op(
            name,
            OpKind::MeanPool {
                x,
                mask: *mask,
                min_count,
            },
            out,
        );
        Ok(Sym::Value {
            id: out,
            shape: out_shape,
        })
    }

    /// `Gelu` (the canonical form of every GELU spelling): erf, or tanh when `approximate` says so.
    pub(super) fn gelu(
        &mut self,
        name: &str,
        tensor: &str,
        x: &Sym,
        approximate: &str,
    ) -> Result<Sym, String> {
        let (x, shape) = self.materialize(x)?;
        let kind = match approximate {
            "none" => OpKind::GeluErf { x },
            "tanh" => OpKind::GeluTanh { x },
            other => {
                return Err(format!(
                    "Gelu approximation `{other}` is not one of none, tanh"
                ));
            }
        };
        let out = self.value(tensor, &shape, DType::F16, ValueRole::Intermediate, 0)?;
        self.op(name, kind, out);
        Ok(Sym::Value { id: out, shape })
    }

    pub(super) fn mul(
        &mut self,
        name: &str,
        tensor: &str,
        a: &Sym,
        b: &Sym,
    ) -> Result<Sym, String> {
        for (a, b) in [(a, b), (b, a)] {
            let c = b.scalar();
            match (a, b) {
                (Sym::InvMask { id, index }, _) if c.is_some() => {
                    return Ok(Sym::MaskBias {
                        id: *id,
                        index: index.clone(),
                        fill: c.expect("checked"),
                        name: name.to_string(),
                        tensor: tensor.to_string(),
                    });
                }
                (
                    Sym::Scores {
                        q,
                        k,
                        base,
                        keys,
                        scale,
                        mask: None,
                        softmax: false,
                    },
                    _,
                ) if c.is_some() => {
                    let scale = scale * c.expect("checked");
                    return Ok(Sym::Scores {
                        q: *q,
                        k: *k,
                        base: *base,
                        keys: *keys,
                        scale,
                        mask: None,
                        softmax: false,
                    });
                }
                _ => {}
            }
        }
        self.binary(name, tensor, a, b, BinaryFn::Mul)
    }

    pub(super) fn div(
        &mut self,
        name: &str,
        tensor: &str,
        a: &Sym,
        b: &Sym,
    ) -> Result<Sym, String> {
        match (a, b) {
            (
                Sym::Scores {
                    q,
                    k,
                    base,
                    keys,
                    scale,
                    mask: None,
                    softmax: false,
                },
                c,
            ) if c.scalar().is_some() => {
                let scale = scale / c.scalar().expect("checked");
                Ok(Sym::Scores {
                    q: *q,
                    k: *k,
                    base: *base,
                    keys: *keys,
                    scale,
                    mask: None,
                    softmax: false,
                })
            }
            _ => self.binary(name, tensor, a, b, BinaryFn::Div),
        }
    }

    pub(super) fn matmul(
        &mut self,
        name: &str,
        tensor: &str,
        a: &Sym,
        b: &Sym,
    ) -> Result<Sym, String> {
        match (a, b) {
            (
                Sym::Heads {
                    id: q,
                    base,
                    perm: HEADS_QV,
                },
                Sym::Heads {
                    id: k,
                    base: kb,
                    perm: HEADS_KT,
                },
            ) => {
                if (base[0], base[2], base[3]) != (kb[0], kb[2], kb[3]) {
                    return Err(format!(
                        "queries {base:?} and keys {kb:?} differ in batch, heads or head size"
                    ));
                }
                Ok(Sym::Scores {
                    q: *q,
                    k: *k,
                    base: *base,
                    keys: kb[1],
                    scale: 1.0,
                    mask: None,
                    softmax: false,
                })
            }
            (Sym::Heads { .. }, Sym::Heads { .. }) => Err(
                "attention scores take queries as [b, h, s, d] and keys as [b, h, d, s]"
                    .to_string(),
            ),
            (
                Sym::Scores {
                    q,
                    k,
                    base,
                    keys,
                    scale,
                    mask,
                    softmax: true,
                },
                Sym::Heads {
                    id: v,
                    base: vb,
                    perm: HEADS_QV,
                },
            ) => {
                if (vb[0], vb[1], vb[2], vb[3]) != (base[0], *keys, base[2], base[3]) {
                    return Err(format!(
                        "values {vb:?} do not match the scores' batch, keys, heads and head size"
                    ));
                }
                let [b, s, h, d] = *base;
                let out = self.value(
                    tensor,
                    &[b, s, h * d],
                    DType::F16,
                    ValueRole::Intermediate,
                    0,
                )?;
                let kind = OpKind::Attention {
                    q: *q,
                    k: *k,
                    v: *v,
                    batch: b as u32,
                    heads: h as u32,
                    causal: false,
                    scale: *scale,
                    mask: *mask,
                };
                self.op(name, kind, out);
                self.layers += 1;
                Ok(Sym::Heads {
                    id: out,
                    base: *base,
                    perm: HEADS_QV,
                })
            }
            (x @ (Sym::Value { .. } | Sym::Embed { .. } | Sym::View { .. }), Sym::Const(n, w))
                if w.is_float() && w.shape.len() == 2 =>
            {
                let (x, mut shape) = self.materialize(x)?;
                let (kk, nn) = (w.shape[0], w.shape[1]);
                if shape.last() != Some(&kk) {
                    return Err(format!(
                        "MatMul of {shape:?} by the weight `{n}` of shape {:?}",
                        w.shape
                    ));
                }
                let w = self.weight(n, w, &[kk, nn], DType::F16, kk as u32)?;
                *shape.last_mut().expect("checked") = nn;
                let out = self.value(tensor, &shape, DType::F16, ValueRole::Intermediate, 0)?;
                self.op(name, OpKind::MatMul { a: x, b: w }, out);
                Ok(Sym::Value { id: out, shape })
            }
            (x @ (Sym::Value { .. } | Sym::Embed { .. } | Sym::View { .. }), Sym::Const(n, w))
                if w.is_float() =>
            {
                self.batched_matmul(name, tensor, x, n, w)
            }
            _ => Err(format!(
                "MatMul of {} by {} fits no pattern (a weight must be a constant [k, n])",
                a.what(),
                b.what()
            )),
        }
    }

    pub(super) fn reshape(
        &mut self,
        x: &Sym,
        spec: &Sym,
        attrs: &tensor::Attrs,
    ) -> Result<Sym, String> {
        let Sym::Const(_, spec) = spec else {
            return Err("Reshape's shape must be constant".to_string());
        };
        let spec = spec.ints();
        let allowzero = attrs.i("allowzero") == Some(1);
        match x {
            Sym::Heads {
                id,
                base,
                perm: IDENTITY,
            } => {
                let target = tensor::reshape(base, &spec, allowzero)?;
                let rows: usize = target[..target.len().saturating_sub(1)].iter().product();
                if target.last() != Some(&(base[2] * base[3])) || rows != base[0] * base[1] {
                    return Err(format!(
                        "heads {base:?} merge only into rows of batch·tokens and heads·size columns; got {target:?}"
                    ));
                }
                Ok(Sym::Value {
                    id: *id,
                    shape: target,
                })
            }
            Sym::Heads { perm, .. } => Err(format!(
                "heads seen in axis order {perm:?} must be transposed back ([0, 2, 1, 3]) before the merge"
            )),
            Sym::Value { .. } | Sym::Embed { .. } => {
                let (id, shape) = self.materialize(x)?;
                let last = *shape.last().ok_or("Reshape of a scalar")?;
                if spec.len() == 4
                    && shape.len() == 3
                    && spec[2] > 0
                    && last % spec[2] as usize != 0
                {
                    return Err(format!(
                        "the head count {} does not divide the hidden size {last}",
                        spec[2]
                    ));
                }
                let target = tensor::reshape(&shape, &spec, allowzero)?;
                if target.len() == 4 {
                    // Rows stay rows (batch·tokens) and the last dimension splits into heads.
                    let rows: usize = shape[..shape.len() - 1].iter().product();
                    if rows != target[0] * target[1] || target[2] * target[3] != last {
                        return Err(format!(
                            "a split into heads keeps [batch, tokens] and splits the last dimension; {shape:?} into {target:?} does not"
                        ));
                    }
                    return Ok(Sym::Heads {
                        id,
                        base: [target[0], target[1], target[2], target[3]],
                        perm: IDENTITY,
                    });
                }
                if target.last() != Some(&last) {
                    return Err(format!(
                        "Reshape of {shape:?} into {target:?} changes the last dimension"
                    ));
                }
                Ok(Sym::Value { id, shape: target })
            }
            other => Err(format!("Reshape of {} fits no pattern", other.what())),
        }
    }

    /// The finished graph and its weights.
    pub(super) fn finish(self, config: &ImportConfig) -> (Graph, BTreeMap<String, WeightData>) {
        let host = self.ops.iter().filter(|o| o.kind.on_host()).count();
        let tokens = self.ops.iter().find_map(|o| match o.kind {
            OpKind::Attention { q, batch, .. } => Some(self.values[q.index()].rows / batch.max(1)),
            _ => None,
        });
        let inputs: Vec<String> = self
            .values
            .iter()
            .filter(|v| v.role == ValueRole::Input)
            .map(|v| {
                format!(
                    "{}={}",
                    v.name,
                    v.shape
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join("x")
                )
            })
            .collect();
        let mut parameters = vec![
            ("model".to_string(), config.model.clone()),
            ("inputs".to_string(), inputs.join(",")),
            ("layers".to_string(), self.layers.to_string()),
        ];
        if let Some(t) = tokens {
            parameters.push(("tokens".to_string(), t.to_string()));
        }
        parameters.push(("deviceOps".to_string(), (self.ops.len() - host).to_string()));
        parameters.push(("hostOps".to_string(), host.to_string()));
        parameters.push(("partials".to_string(), DType::F32.to_string()));
        let graph = Graph {
            workload: config.name.clone(),
            values: self.values,
            ops: self.ops,
            partials: DType::F32,
            parameters,
        };
        (graph, self.weights)
    }
}
