//! The canonicalisation passes that recognise a computation spelt over several nodes: a split
//! LayerNorm, the GELUs, and boolean attention masks made from an integer graph input (see the table
//! in [`super::canonical`]; a `Where` on any other condition is left to the lowering, a select). Each
//! matches from the chain's last node, checks every intermediate is read only inside the chain, and
//! replaces the last node by the canonical one; the rest is left to pruning.

use super::OnnxError;
use super::opgraph::{Elem, Info, Node, OpGraph};
use super::patterns::near;
use super::proto::data_type;
use super::tensor::{Attrs, Tensor};

/// The node computing `t` when it is an `op` node that only the chain reads.
fn inner<'g>(g: &'g OpGraph, t: &str, op: &str) -> Option<&'g Node> {
    g.produced_by(t, op).filter(|_| g.uses(t) == 1)
}

/// `a` and `b` of a commutative node, the one that is constant scalar `v` first.
fn with_scalar<'n>(g: &OpGraph, n: &'n Node, v: f32) -> Option<&'n str> {
    let (a, b) = (n.input(0)?, n.input(1)?);
    if g.scalar(a).is_some_and(|c| near(c, v)) {
        Some(b)
    } else if g.scalar(b).is_some_and(|c| near(c, v)) {
        Some(a)
    } else {
        None
    }
}

/// The factors of a product: the leaves of the tree of Mul nodes under `t` read only inside it.
fn factors(g: &OpGraph, t: &str, root: bool, out: &mut Vec<String>) {
    let node = if root {
        g.produced_by(t, "Mul")
    } else {
        inner(g, t, "Mul")
    };
    match node {
        Some(n) if n.inputs.len() == 2 => {
            let (a, b) = (n.inputs[0].clone(), n.inputs[1].clone());
            factors(g, &a, false, out);
            factors(g, &b, false, out);
        }
        _ => out.push(t.to_string()),
    }
}

/// The factors of `t`, with one constant scalar `v` among them removed; `None` if it is not there.
fn without_scalar(g: &OpGraph, mut fs: Vec<String>, v: f32) -> Option<Vec<String>> {
    let i = fs
        .iter()
        .position(|f| g.scalar(f).is_some_and(|c| near(c, v)))?;
    fs.remove(i);
    Some(fs)
}

/// Whether `t` is `ReduceMean` of `x` over its last axis only, keeping it.
fn mean_of_last(g: &OpGraph, t: &str, single: bool) -> Option<String> {
    let n = if single {
        inner(g, t, "ReduceMean")?
    } else {
        g.produced_by(t, "ReduceMean")?
    };
    let x = n.input(0)?;
    let rank = g.shape(x)?.len() as i64;
    let axes = match n.input(1) {
        Some(a) => g.consts.get(a)?.ints(),
        None => n.attrs.ints("axes")?,
    };
    (axes.len() == 1
        && (axes[0] == -1 || axes[0] == rank - 1)
        && n.attrs.i("keepdims").unwrap_or(1) == 1)
        .then(|| x.to_string())
}

/// `x − mean(x)` over the last axis: `(x, mean)`.
fn centred(g: &OpGraph, t: &str) -> Option<(String, String)> {
    let sub = g.produced_by(t, "Sub")?;
    let (x, m) = (sub.input(0)?, sub.input(1)?);
    (mean_of_last(g, m, false)? == x).then(|| (x.to_string(), m.to_string()))
}

/// The split LayerNorm: `(x − μ) / √(mean((x − μ)²) + ε) · γ + β` → `LayerNormalization`.
pub fn layer_norm(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let div = &g.nodes[at - 1];
        if div.op != "Div" {
            continue;
        }
        let (Some(d), Some(s)) = (div.input(0), div.input(1)) else {
            continue;
        };
        let Some((x, mean)) = centred(g, d) else {
            continue;
        };
        // √(var + ε), var = mean(d'²) with d' = x − μ (the same Sub or another over the same μ).
        let Some(sqrt) = inner(g, s, "Sqrt") else {
            continue;
        };
        let Some(add) = g.produced_by(&sqrt.inputs[0], "Add") else {
            continue;
        };
        let (var, eps) = match (g.scalar(&add.inputs[0]), g.scalar(&add.inputs[1])) {
            (None, Some(e)) => (add.inputs[0].clone(), e),
            (Some(e), None) => (add.inputs[1].clone(), e),
            _ => continue,
        };
        let squares = mean_of_last(g, &var, false).and_then(|sq| {
            let n = g.producer(&sq).map(|i| &g.nodes[i])?;
            let base = match n.op.as_str() {
                "Pow" if g.scalar(n.input(1)?).is_some_and(|p| p == 2.0) => n.input(0)?,
                "Mul" if n.input(0) == n.input(1) => n.input(0)?,
                _ => return None,
            };
            centred(g, base).filter(|(x2, m2)| *x2 == x && *m2 == mean)
        });
        if squares.is_none() {
            continue;
        }
        // Then `· γ` and `+ β`, when they follow with constants of the row's length.
        let cols = g.shape(&x).and_then(|s| s.last().copied()).unwrap_or(0);
        let row_const = |g: &OpGraph, t: &str| {
            g.consts
                .get(t)
                .filter(|c| c.is_float() && c.len() == cols && c.shape.last() == Some(&cols))
                .is_some()
        };
        let mut last = at - 1;
        let mut out = div.output().to_string();
        let mut param = |g: &OpGraph, op: &str| -> Option<String> {
            if g.uses(&out) != 1 {
                return None;
            }
            let p = g.nodes.iter().position(|n| n.inputs.contains(&out))?;
            let n = &g.nodes[p];
            if n.op != op {
                return None;
            }
            let other = if n.inputs[0] == out {
                &n.inputs[1]
            } else {
                &n.inputs[0]
            };
            row_const(g, other).then(|| {
                last = p;
                out = n.output().to_string();
                other.clone()
            })
        };
        let gamma = param(g, "Mul");
        let beta = gamma.as_ref().and_then(|_| param(g, "Add"));
        let ones = |g: &mut OpGraph, v: f32| {
            g.constant(
                &x,
                Tensor {
                    shape: vec![cols],
                    data: super::tensor::Data::F32(vec![v; cols]),
                },
            )
        };
        let gamma = gamma.unwrap_or_else(|| ones(g, 1.0));
        let beta = beta.unwrap_or_else(|| ones(g, 0.0));
        let shape = g.shape(&x).unwrap_or_default();
        let ln = g.step(
            &x,
            "LayerNormalization",
            vec![x.clone(), gamma, beta],
            Attrs::default()
                .with_float("epsilon", eps)
                .with_int("axis", -1),
            Info {
                shape,
                elem: Elem::Float,
            },
        );
        g.replace(last, vec![ln]);
        at = last + 1;
        count += 1;
    }
    Ok(count)
}

/// erf-GELU `x · ½ · (1 + erf(x/√2))` and tanh-GELU `x · ½ · (1 + tanh(√(2/π) · (x + 0.044715 x³)))`,
/// their products in any order → `Gelu`.
pub fn gelu(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        if g.nodes[at - 1].op != "Mul" {
            continue;
        }
        let root = g.nodes[at - 1].output().to_string();
        let mut fs = Vec::new();
        factors(g, &root, true, &mut fs);
        let Some(fs) = without_scalar(g, fs, 0.5) else {
            continue;
        };
        if fs.len() != 2 {
            continue;
        }
        let found = [(0, 1), (1, 0)].into_iter().find_map(|(i, j)| {
            let x = &fs[i];
            let one_plus = inner(g, &fs[j], "Add")?;
            let f = with_scalar(g, one_plus, 1.0)?;
            if let Some(erf) = inner(g, f, "Erf") {
                let s = erf.input(0)?;
                let scaled = inner(g, s, "Div")
                    .filter(|d| {
                        d.input(0) == Some(x)
                            && d.input(1)
                                .and_then(|c| g.scalar(c))
                                .is_some_and(|c| near(c, std::f32::consts::SQRT_2))
                    })
                    .or_else(|| {
                        inner(g, s, "Mul").filter(|m| {
                            with_scalar(g, m, std::f32::consts::FRAC_1_SQRT_2) == Some(x)
                        })
                    });
                return scaled.map(|_| (x.clone(), "none"));
            }
            let tanh = inner(g, f, "Tanh")?;
            let u = inner(g, tanh.input(0)?, "Mul")?;
            let v = with_scalar(g, u, (2.0 / std::f32::consts::PI).sqrt())?;
            let sum = inner(g, v, "Add")?;
            let w = if sum.input(0) == Some(x) {
                sum.input(1)?
            } else if sum.input(1) == Some(x) {
                sum.input(0)?
            } else {
                return None;
            };
            let mut cube = Vec::new();
            factors(g, w, false, &mut cube);
            let cube = without_scalar(g, cube, 0.044715)?;
            let is_cube = match cube.as_slice() {
                [a, b, c] => [a, b, c].iter().all(|t| *t == x),
                [p] => inner(g, p, "Pow").is_some_and(|n| {
                    n.input(0) == Some(x) && n.input(1).and_then(|e| g.scalar(e)) == Some(3.0)
                }),
                _ => false,
            };
            is_cube.then(|| (x.clone(), "tanh"))
        });
        let Some((x, approximate)) = found else {
            continue;
        };
        let shape = g.shape(&root).unwrap_or_default();
        let node = g.step(
            &x,
            "Gelu",
            vec![x.clone()],
            Attrs::default().with_str("approximate", approximate),
            Info {
                shape,
                elem: Elem::Float,
            },
        );
        g.replace(at - 1, vec![node]);
        count += 1;
    }
    Ok(count)
}

/// Whether `t` is an integer graph input (a mask) seen through the operators the lowering follows a
/// mask's elements by ([`super::patterns`]' host views: Cast, the movements, And with a constant).
fn from_integer_input(g: &OpGraph, t: &str) -> bool {
    let mut t = t.to_string();
    loop {
        if g.inputs.iter().any(|(n, _, _)| *n == t) {
            return g.infos.get(&t).is_some_and(|i| i.elem == Elem::Int);
        }
        let Some(node) = g.producer(&t).map(|i| &g.nodes[i]) else {
            return false;
        };
        let next = match node.op.as_str() {
            "Cast" | "Unsqueeze" | "Expand" | "Reshape" | "Squeeze" | "Transpose" | "Flatten"
            | "Slice" | "GatherND" | "Identity" => node.input(0),
            "And" => node
                .inputs
                .iter()
                .find(|i| !g.consts.contains_key(*i))
                .map(String::as_str),
            _ => None,
        };
        match next {
            Some(n) => t = n.to_string(),
            None => return false,
        }
    }
}

/// Boolean masks as the arithmetic mask chain: `Where(c, scores, f)` → `scores + Where(c, 0, f)`;
/// `Where(Not(c), f, 0)` → `Where(c, 0, f)`; `Where(c, 0, f)` → `(1 − Cast(c)) · f`, where `c` is a
/// mask made from an integer graph input and `f` a constant scalar (so that the lowering takes it
/// to the host's mask bias). A `Where` on any other condition is a select.
pub fn bool_mask(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = g.nodes[at - 1].clone();
        if node.op != "Where" || node.inputs.len() != 3 {
            continue;
        }
        let (c, a, b) = (
            node.inputs[0].clone(),
            node.inputs[1].clone(),
            node.inputs[2].clone(),
        );
        if g.consts.contains_key(&c) {
            continue;
        }
        let shape = g.shape(node.output()).unwrap_or_default();
        let float = |shape: Vec<usize>| Info {
            shape,
            elem: Elem::Float,
        };
        // The condition and the fill where it is false (mask 0): `Where(c, 0, f)` or `Where(Not(c), f, 0)`.
        let (cond, fill, scores) = match (g.scalar(&a), g.scalar(&b)) {
            (Some(0.0), Some(f)) => (c.clone(), f, None),
            (Some(f), Some(0.0)) => match g.produced_by(&c, "Not") {
                Some(not) => (not.inputs[0].clone(), f, None),
                None => continue,
            },
            (None, Some(f))
                if f <= -1e4 && g.infos.get(&a).is_some_and(|i| i.elem == Elem::Float) =>
            {
                (c.clone(), f, Some(a.clone()))
            }
            _ => continue,
        };
        if !from_integer_input(g, &cond) {
            continue;
        }
        // −∞ (or any fill past the float range) is the most negative finite float: a softmax over a
        // row whose keys are all padding then stays defined, and the mask bias saturates to its type.
        let fill = fill.max(f32::MIN);
        let cshape = g.shape(&cond).unwrap_or_default();
        let cast = g.step(
            &node.name,
            "Cast",
            vec![cond],
            Attrs::default().with_int("to", i64::from(data_type::FLOAT)),
            float(cshape.clone()),
        );
        let one = g.scalar_const(&node.name, 1.0);
        let inv = g.step(
            &node.name,
            "Sub",
            vec![one, cast.output().to_string()],
            Attrs::default(),
            float(cshape.clone()),
        );
        let f = g.scalar_const(&node.name, fill);
        let bias = g.step(
            &node.name,
            "Mul",
            vec![inv.output().to_string(), f],
            Attrs::default(),
            float(cshape),
        );
        let mut steps = vec![cast, inv, bias.clone()];
        if let Some(s) = scores {
            steps.push(g.step(
                &node.name,
                "Add",
                vec![s, bias.output().to_string()],
                Attrs::default(),
                float(shape),
            ));
        }
        let added = steps.len();
        g.replace(at - 1, steps);
        at += added - 1;
        count += 1;
    }
    Ok(count)
}

/// `Where(IsNaN(p), 0, p)` → `p`: the guard the dynamo exporter puts after a Softmax, for rows whose
/// every key is masked with −∞; the masks here are finite, so no such row makes a NaN.
pub fn nan_guard(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = &g.nodes[at - 1];
        if node.op != "Where" || node.inputs.len() != 3 {
            continue;
        }
        let (c, z, p) = (&node.inputs[0], &node.inputs[1], &node.inputs[2]);
        let guarded = g.scalar(z) == Some(0.0)
            && g.produced_by(c, "IsNaN")
                .is_some_and(|n| n.input(0) == Some(p.as_str()));
        if !guarded {
            continue;
        }
        let p = p.clone();
        let info = g.infos.get(&p).cloned().unwrap_or(Info {
            shape: Vec::new(),
            elem: Elem::Float,
        });
        let id = g.step(&p, "Identity", vec![p.clone()], Attrs::default(), info);
        g.replace(at - 1, vec![id]);
        count += 1;
    }
    Ok(count)
}

/// Whether `t` is `ReduceSum` over axis 1 of a rank-3 tensor without keeping it: its input.
fn token_sum(g: &OpGraph, t: &str) -> Option<String> {
    let n = g.produced_by(t, "ReduceSum")?;
    let x = n.input(0)?;
    let axes = match n.input(1) {
        Some(a) => g.consts.get(a)?.ints(),
        None => n.attrs.ints("axes")?,
    };
    let rank = g.shape(x)?.len();
    (rank == 3
        && axes.len() == 1
        && (axes[0] == 1 || axes[0] == -2)
        && n.attrs.i("keepdims") == Some(0))
    .then(|| x.to_string())
}

/// Masked mean pooling `Σ_t x·m / max(Σ_t m, min)` (`Clip` or `Max` for the bound, or none) →
/// `MaskedMeanPool(x, m)` with `min_count`, the front end's own canonical operator, which the
/// lowering makes a host `MeanPool`.
pub fn mean_pool(g: &mut OpGraph) -> Result<usize, OnnxError> {
    let mut count = 0;
    let mut at = 0;
    while at < g.nodes.len() {
        at += 1;
        let node = g.nodes[at - 1].clone();
        if node.op != "Div" || node.inputs.len() != 2 {
            continue;
        }
        let Some(product) = token_sum(g, &node.inputs[0]) else {
            continue;
        };
        let Some(mul) = g.produced_by(&product, "Mul") else {
            continue;
        };
        let (bounded, min) = match g.producer(&node.inputs[1]).map(|i| &g.nodes[i]) {
            Some(n) if (n.op == "Clip" || n.op == "Max") && n.inputs.len() >= 2 => {
                match g.scalar(&n.inputs[1]) {
                    Some(min) if n.inputs.get(2).is_none_or(|s| s.is_empty()) => {
                        (n.inputs[0].clone(), min)
                    }
                    _ => continue,
                }
            }
            _ => (node.inputs[1].clone(), 0.0),
        };
        let Some(m) = token_sum(g, &bounded) else {
            continue;
        };
        let x = if mul.inputs[1] == m {
            mul.inputs[0].clone()
        } else if mul.inputs[0] == m {
            mul.inputs[1].clone()
        } else {
            continue;
        };
        let shape = g.shape(node.output()).unwrap_or_default();
        let pool = g.step(
            &node.name,
            "MaskedMeanPool",
            vec![x, m],
            Attrs::default().with_float("min_count", min),
            Info {
                shape,
                elem: Elem::Float,
            },
        );
        g.replace(at - 1, vec![pool]);
        count += 1;
    }
    Ok(count)
}
