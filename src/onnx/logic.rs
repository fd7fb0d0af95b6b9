//! Logic, `Where`, `Cast`, `IsNaN` and `IsInf` of computed tensors, lowered onto the general vector
//! operations ([`super::vector`]); the comparisons the dispatcher ([`super::patterns`]) takes to the
//! binary comparisons directly.
//!
//! A boolean tensor on the device is an f16 value holding exactly 1 and 0 (`DType::Bool`): a
//! comparison gives 1 or 0, and so does everything below made from one, a boolean graph input is
//! bound as 1 and 0, and a boolean constant becomes an f16 weight of 1 and 0. That invariant is what
//! makes the logic exact in f16 arithmetic:
//!
//! | ONNX | lowered to |
//! |---|---|
//! | `Equal`, `Less`, `LessOrEqual`, `Greater`, `GreaterOrEqual` | the binary comparison |
//! | `Not(x)` | `equal(x, 0)` |
//! | `And(a, b)`, `Or(a, b)`, `Xor(a, b)` | `mul`, `max`, `not_equal` |
//! | `Where(c, x, y)` | `select(c, x, y)` |
//! | `Cast(x)` to a float type | `x` itself (a boolean's 1 and 0 are its floats) |
//! | `Cast(x)` to bool | `not_equal(x, 0)` (NaN is true, as ONNX casts it) |
//! | `IsNaN(x)`, `IsInf(x)` | the unary predicate; `IsInf` of one sign `equal(x, ±∞)` |
//!
//! An integer graph input (a mask) reaches none of these: its views and casts are the patterns'
//! ([`super::patterns`]), which take it to the host's mask bias or pooling; a cast of a computed
//! tensor to an integer type is refused, as the device holds floats and booleans only.

use super::opgraph::Node;
use super::patterns::{Ctx, Sym};
use super::proto::data_type;
use super::tensor::Tensor;
use crate::ir::{BinaryFn, DType, OpKind, UnaryFn};
use std::rc::Rc;

impl Ctx {
    /// A float scalar constant for one node's lowering, named after its tensor.
    fn constant(&self, tensor: &str, what: &str, v: f32) -> Sym {
        Sym::Const(format!("{tensor}/{what}"), Rc::new(Tensor::scalar_f32(v)))
    }

    /// `Not`, `And`, `Or`, `Xor`, `Where`, `Cast`, `IsNaN` or `IsInf` of a node whose inputs are not
    /// all constant (module docs; the dispatcher takes a comparison to the binary comparison itself).
    pub(super) fn logic(&mut self, node: &Node, ins: &[Option<Sym>]) -> Result<Sym, String> {
        let (name, tensor, op) = (node.name.as_str(), node.output(), node.op.as_str());
        let input = |i: usize| {
            ins.get(i)
                .and_then(Option::as_ref)
                .ok_or(format!("input {i} is missing"))
        };
        let boolean = |a: &Sym, b: &Sym, f: BinaryFn, cx: &mut Ctx| {
            cx.elementwise(name, tensor, &[a, b], DType::Bool, |v| OpKind::Binary {
                a: v[0],
                b: v[1],
                function: f,
            })
        };
        match op {
            "Not" => {
                let zero = self.constant(tensor, "zero", 0.0);
                self.binary(name, tensor, input(0)?, &zero, BinaryFn::Equal)
            }
            "And" => boolean(input(0)?, input(1)?, BinaryFn::Mul, self),
            "Or" => boolean(input(0)?, input(1)?, BinaryFn::Max, self),
            "Xor" => self.binary(name, tensor, input(0)?, input(1)?, BinaryFn::NotEqual),
            "Where" => {
                let (c, x, y) = (input(0)?, input(1)?, input(2)?);
                let dtype = if self.is_boolean(x) && self.is_boolean(y) {
                    DType::Bool
                } else {
                    DType::F16
                };
                self.elementwise(name, tensor, &[c, x, y], dtype, |v| OpKind::Select {
                    condition: v[0],
                    x: v[1],
                    y: v[2],
                })
            }
            "Cast" => {
                let to = node.attrs.i("to").unwrap_or(0) as i32;
                match to {
                    data_type::FLOAT
                    | data_type::FLOAT16
                    | data_type::DOUBLE
                    | data_type::BFLOAT16 => Ok(input(0)?.clone()),
                    data_type::BOOL => {
                        let zero = self.constant(tensor, "zero", 0.0);
                        self.binary(name, tensor, input(0)?, &zero, BinaryFn::NotEqual)
                    }
                    other => Err(format!(
                        "Cast of {} to {}: the device holds floats and booleans only",
                        input(0)?.what(),
                        super::tensor::element_name(other)
                    )),
                }
            }
            "IsNaN" => self.unary(name, tensor, input(0)?, UnaryFn::IsNan),
            "IsInf" => {
                let x = input(0)?;
                let positive = node.attrs.i("detect_positive").unwrap_or(1) != 0;
                let negative = node.attrs.i("detect_negative").unwrap_or(1) != 0;
                match (positive, negative) {
                    (true, true) => self.unary(name, tensor, x, UnaryFn::IsInf),
                    // One sign: equality with that infinity; neither: equality with NaN, which
                    // nothing equals.
                    (p, n) => {
                        let to = match (p, n) {
                            (true, _) => f32::INFINITY,
                            (_, true) => f32::NEG_INFINITY,
                            _ => f32::NAN,
                        };
                        let sign = self.constant(tensor, "infinity", to);
                        self.binary(name, tensor, x, &sign, BinaryFn::Equal)
                    }
                }
            }
            op => Err(format!("{op} is no logic operator")),
        }
    }

    /// Whether `s` holds booleans: a boolean value (or a view of one), or a constant of 1s and 0s
    /// that is not a float.
    fn is_boolean(&self, s: &Sym) -> bool {
        match s {
            Sym::Value { id, .. } => self.values[id.index()].dtype == DType::Bool,
            Sym::View { sources, .. } => sources
                .iter()
                .all(|id| self.values[id.index()].dtype == DType::Bool),
            Sym::Const(_, t) => !t.is_float() && t.ints().iter().all(|&v| v == 0 || v == 1),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fold::tests::{model, n};
    use super::super::imported::ImportConfig;
    use super::super::proto::{AttributeProto, NodeProto, TensorProto, data_type};
    use crate::ir::{BinaryFn, DType, Graph, OpKind, UnaryFn};

    fn with_int(node: NodeProto, name: &str, v: i64) -> NodeProto {
        let mut node = node;
        node.attribute.push(AttributeProto {
            name: name.into(),
            r#type: 2,
            i: v,
            ..Default::default()
        });
        node
    }

    fn scalar(name: &str, v: f32) -> TensorProto {
        TensorProto {
            dims: vec![],
            data_type: data_type::FLOAT,
            float_data: vec![v],
            name: name.into(),
            ..Default::default()
        }
    }

    /// An import of `inputs`, each `[2, 3]`.
    fn config(inputs: &[(&str, i32)]) -> ImportConfig {
        ImportConfig {
            name: "t".into(),
            model: "t".into(),
            shapes: inputs
                .iter()
                .map(|(n, _)| (n.to_string(), vec![2, 3]))
                .collect(),
            external: Default::default(),
        }
    }

    /// The graph of `nodes` over `inputs` (each `[2, 3]`), or the import's error.
    fn lowered(
        nodes: Vec<NodeProto>,
        inputs: &[(&str, i32)],
        outputs: &[&str],
        inits: Vec<TensorProto>,
    ) -> Result<Graph, String> {
        let config = config(inputs);
        let m = model(nodes, inputs, outputs, inits);
        super::super::lower::lower(&m, &config)
            .map(|i| i.graph)
            .map_err(|e| e.to_string())
    }

    /// Each op's function (or kind) and its output's name and type, in order.
    fn ops(g: &Graph) -> Vec<(String, String, DType)> {
        (g.ops.iter())
            .map(|op| {
                let what = match &op.kind {
                    OpKind::Binary { function, .. } => function.name().to_string(),
                    OpKind::Unary { function, .. } => function.name().to_string(),
                    k => k.name().to_string(),
                };
                let out = g.value(op.out);
                (what, out.name.clone(), out.dtype)
            })
            .collect()
    }

    fn op(what: &str, out: &str, dtype: DType) -> (String, String, DType) {
        (what.to_string(), out.to_string(), dtype)
    }

    #[test]
    fn where_on_a_comparison_of_activations_is_a_select() {
        let float = data_type::FLOAT;
        let g = lowered(
            vec![
                n("Greater", &["x", "t"], "c"),
                n("Where", &["c", "x", "y"], "z"),
            ],
            &[("x", float), ("y", float)],
            &["z"],
            vec![scalar("t", 0.25)],
        )
        .unwrap();
        assert_eq!(
            ops(&g),
            vec![
                op("greater", "c", DType::Bool),
                op("select", "z", DType::F16)
            ]
        );
        let OpKind::Select { condition, x, y } = g.ops[1].kind else {
            panic!("{:?}", g.ops[1])
        };
        assert_eq!(
            [condition, x, y].map(|v| g.value(v).name.clone()),
            ["c", "x", "y"]
        );
    }

    #[test]
    fn logic_on_booleans_is_arithmetic_and_comparison_of_ones_and_zeros() {
        let boolean = data_type::BOOL;
        let g = lowered(
            vec![
                n("Not", &["a"], "not"),
                n("And", &["a", "b"], "and"),
                n("Or", &["a", "b"], "or"),
                n("Xor", &["a", "b"], "xor"),
            ],
            &[("a", boolean), ("b", boolean)],
            &["not", "and", "or", "xor"],
            vec![],
        )
        .unwrap();
        assert_eq!(g.value(g.ops[0].kind.inputs()[0]).dtype, DType::Bool);
        assert_eq!(
            ops(&g),
            vec![
                op("equal", "not", DType::Bool),
                op("mul", "and", DType::Bool),
                op("max", "or", DType::Bool),
                op("not_equal", "xor", DType::Bool),
            ]
        );
    }

    #[test]
    fn casts_between_floats_and_booleans_and_predicates() {
        let float = data_type::FLOAT;
        let cast =
            |x: &str, to: i32, out: &str| with_int(n("Cast", &[x], out), "to", i64::from(to));
        let g = lowered(
            vec![
                cast("x", data_type::BOOL, "nonzero"),
                n("Less", &["x", "y"], "less"),
                cast("less", data_type::FLOAT, "less_float"),
                n("IsNaN", &["x"], "nan"),
                n("IsInf", &["y"], "inf"),
                with_int(n("IsInf", &["y"], "positive"), "detect_negative", 0),
            ],
            &[("x", float), ("y", float)],
            &["nonzero", "less_float", "nan", "inf", "positive"],
            vec![],
        )
        .unwrap();
        // The cast to float is the comparison itself, written out as a float.
        assert_eq!(
            ops(&g),
            vec![
                op("not_equal", "nonzero", DType::Bool),
                op("less", "less_float", DType::F16),
                op(UnaryFn::IsNan.name(), "nan", DType::Bool),
                op(UnaryFn::IsInf.name(), "inf", DType::Bool),
                op(BinaryFn::Equal.name(), "positive", DType::Bool),
            ]
        );
    }

    #[test]
    fn a_cast_to_an_integer_is_refused_naming_the_node() {
        let e = lowered(
            vec![with_int(
                n("Cast", &["x"], "ints"),
                "to",
                i64::from(data_type::INT64),
            )],
            &[("x", data_type::FLOAT)],
            &["ints"],
            vec![],
        )
        .unwrap_err();
        assert!(
            e.contains("node 0 `ints` (Cast)")
                && e.contains("the device holds floats and booleans only"),
            "{e}"
        );
    }

    #[test]
    fn a_where_on_an_integer_mask_is_the_mask_chain_and_on_activations_a_select() {
        use super::super::opgraph::OpGraph;
        let rewrites = |c: NodeProto, inputs: &[(&str, i32)]| {
            let nodes = vec![c, n("Where", &["c", "zero", "fill"], "bias")];
            let inits = vec![scalar("zero", 0.0), scalar("fill", -1e4)];
            let m = model(nodes, inputs, &["bias"], inits);
            let config = config(inputs);
            let mut g = OpGraph::load(&m, &config).unwrap();
            super::super::fold::fold(&mut g).unwrap();
            super::super::spellings::bool_mask(&mut g).unwrap()
        };
        let to_bool = with_int(n("Cast", &["m"], "c"), "to", i64::from(data_type::BOOL));
        assert_eq!(rewrites(to_bool, &[("m", data_type::INT64)]), 1);
        let computed = n("Greater", &["x", "zero"], "c");
        assert_eq!(rewrites(computed, &[("x", data_type::FLOAT)]), 0);
        let boolean_input = n("Identity", &["b"], "c");
        assert_eq!(rewrites(boolean_input, &[("b", data_type::BOOL)]), 0);
    }
}
