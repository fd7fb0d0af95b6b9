"""Writes small models that each spell one part of the test encoder differently from the baseline (the
TorchScript-export pattern of make_models.py), so a failing import names the one rewrite it lacks, and a
ViT-style image encoder. Every model gets `<name>.expected.json` beside it: the fixed inputs and
onnxruntime's outputs (graph optimisations off), each as {"shape", "dtype", "data"} with data flat in
row-major order, plus the largest difference of its float outputs from spell_baseline's.

Run from the repository root with `python3 tests/models/make_spellings.py` (needs numpy, onnx and
onnxruntime); the outputs are committed.

All encoders: hidden 64, 2 heads of 32, intermediate 128, 2 layers (the second reuses the first's
matrices, with biases and norms of its own, as encoder.onnx does), vocab 100, 32 positions; inputs
`input_ids`, `attention_mask` (int64 [batch_size, sequence_length]); outputs `output`, `mask_out` (the
inputs passed through, int64), `last_hidden_state` (float [batch, seq, 64]) and `sentence_embedding`
(masked mean, float [batch, 64]). Every encoder is made from the same seeded weights, so each computes
spell_baseline's function (exactly, up to rounding, unless said otherwise). Fixed inputs: seq 24,
ids (7 i + 3) mod 100, the last 4 tokens masked.

- spell_baseline.onnx: opset 17, the spelling of encoder.onnx (LayerNormalization, erf-GELU as
  Div(x, sqrt 2)/Erf/Add 1/Mul x/Mul 0.5, scores Div by sqrt(32), mask bias (1 - mask) * finfo.min,
  Q/K/V as three MatMul + Add, position embeddings Gathered from sliced position ids).
- spell_split_layernorm.onnx: opset 13, every LayerNorm as ReduceMean(axes attr)/Sub/Pow 2/ReduceMean/
  Add eps/Sqrt/Div/Mul gamma/Add beta, eps 1e-12.
- spell_split_layernorm_opset18.onnx: the same at opset 18 (ReduceMean's axes an input).
- spell_gelu_tanh.onnx: GELU as 0.5x(1 + Tanh(sqrt(2/pi)(x + 0.044715 Pow(x, 3)))) (approximates).
- spell_gelu_tanh_cube.onnx: the same with Mul(Mul(x, x), x) for the cube (approximates).
- spell_gelu_sigmoid.onnx: GELU as x Sigmoid(1.702 x) (approximates, more loosely).
- spell_gelu_erf_variants.onnx: GELU as Mul(Mul(x, 0.5), Add(Erf(Mul(x, 1/sqrt 2)), 1)).
- spell_gelu_op.onnx: opset 20, the Gelu op with approximate="none".
- spell_gelu_op_tanh.onnx: opset 20, the Gelu op with approximate="tanh" (approximates).
- spell_scale_q.onnx: Q's heads Mul 1/sqrt(32) before Q.K^T, the scores not scaled.
- spell_scale_qk.onnx: Q's heads and K^T (after its Transpose) each Mul 32^-1/4, the scores not scaled.
- spell_bool_mask.onnx: Cast(mask to bool), Unsqueeze 1, Unsqueeze 2, Where(mask, 0.0, -1e9) added to the
  scores.
- spell_bool_mask_not.onnx: the same as Where(Not(mask), -1e9, 0.0).
- spell_mask_where_scores.onnx: Where(mask, scores, -inf) on the scaled scores, no Add.
- spell_fused_qkv.onnx: one MatMul by a [64, 192] weight + Add [192] bias, Split (axis 2, split as an
  input [64, 64, 64]) into Q, K, V.
- spell_fused_qkv_slice.onnx: the same with three Slices on axis 2.
- spell_gemm.onnx: every projection as Reshape to [-1, in], Gemm(transB=1, weight stored [out, in], bias
  [out]), Reshape back to [batch, seq, out] (the dims from Shape/Gather/Unsqueeze/Concat).
- spell_transposed_weight.onnx: every projection as MatMul(x, Transpose(W stored [out, in])) + bias.
- spell_position_embedding_const.onnx: position embeddings as Add of a [1, 24, 64] initializer; its inputs
  are declared [batch_size, 24], the only length it takes.
- spell_int8_weights.onnx: every matrix an int8 initializer with a scalar f32 scale, dequantised by
  Cast(to float) then Mul scale (the embeddings stay f32); computes the quantised weights' function.
- spell_dequantize_linear.onnx: every matrix DequantizeLinear(int8, scale, int8 zero point 0), per-tensor
  for query/key/value, per-channel (axis=1, scale [out]) for the attention output, intermediate and
  output matrices; computes the quantised weights' function.
- spell_older_opset11.onnx: the baseline at opset 11: Unsqueeze and ReduceMean/ReduceSum axes as
  attributes, split LayerNorm, Reshape without allowzero.
- spell_older_opset11_fused_qkv.onnx: that with fused Q/K/V and Split's `split` as an attribute.
- vit_tiny.onnx: opset 14 ViT: `pixel_values` float [1, 3, 32, 32]; Conv 3->64, kernel = stride = 8, with
  bias -> [1, 64, 4, 4]; Reshape to [1, 64, 16] (Shape/Gather/Unsqueeze/Concat with -1); Transpose to
  [1, 16, 64]; Concat after a class token [1, 1, 64] Expanded to [batch, 1, 64] -> [1, 17, 64]; Add
  position embeddings [1, 17, 64]; 2 pre-norm layers (split LayerNorm eps 1e-12, attention without mask,
  erf-GELU as the baseline's) sharing matrices; a final split LayerNorm. Outputs `last_hidden_state`
  [1, 17, 64] and `class_token` [1, 64] (Gather index 0 on axis 1).
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_models import HEAD, HEADS, HIDDEN, INTER, POSITIONS, VOCAB  # noqa: E402

SEQ = 24
EPS = 1e-12
MATRICES = {"q": (HIDDEN, HIDDEN), "k": (HIDDEN, HIDDEN), "v": (HIDDEN, HIDDEN), "o": (HIDDEN, HIDDEN),
            "i": (HIDDEN, INTER), "out": (INTER, HIDDEN)}
BIASES = {"q": "attention.self.query.bias", "k": "attention.self.key.bias", "v": "attention.self.value.bias",
          "o": "attention.output.dense.bias", "i": "intermediate.dense.bias", "out": "output.dense.bias"}


def params(seed=0, layers=2):
    """The weights every encoder is built from, independent of spelling."""
    rng = np.random.default_rng(seed)
    f = lambda a: a.astype(np.float32)  # noqa: E731
    p = {
        "word": f(rng.standard_normal((VOCAB, HIDDEN)) * 0.5),
        "ttype": f(rng.standard_normal((2, HIDDEN)) * 0.5),
        "pos": f(rng.standard_normal((POSITIONS, HIDDEN)) * 0.5),
    }
    for name, (rows, cols) in MATRICES.items():
        p[name] = f(rng.standard_normal((rows, cols)) / np.sqrt(rows))
    for prefix in ["embeddings.LayerNorm"] + [f"l{l}.{n}" for l in range(layers)
                                              for n in ("attention.output.LayerNorm", "output.LayerNorm")]:
        p[prefix + ".weight"] = f(1 + 0.1 * rng.standard_normal(HIDDEN))
        p[prefix + ".bias"] = f(0.1 * rng.standard_normal(HIDDEN))
    for l in range(layers):
        for key, name in BIASES.items():
            p[f"l{l}.{name}"] = f(0.02 * rng.standard_normal(MATRICES[key][1]))
    return p


class Spec:
    """One spelling of each part; the defaults are the baseline's."""

    def __init__(self, **kw):
        self.opset, self.ln, self.gelu, self.scale, self.mask = 17, "op", "erf", "div", "sub_mul"
        self.qkv, self.proj, self.pos, self.weights = "separate", "matmul", "gather", "f32"
        for k, v in kw.items():
            assert hasattr(self, k), k
            setattr(self, k, v)


class B:
    """Graph builder that spells opset-dependent nodes for its opset."""

    def __init__(self, opset):
        self.opset, self.nodes, self.inits, self.count, self.cache = opset, [], [], 0, {}

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def node(self, op, inputs, prefix, outputs=1, **attrs):
        name = self.name(f"{prefix}/{op}")
        outs = [f"{name}:{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def const(self, value, prefix, dtype=np.int64):
        name = self.name(f"{prefix}/Constant")
        out = f"{name}:0"
        tensor = numpy_helper.from_array(np.array(value, dtype=dtype), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=tensor))
        return out

    def fconst(self, value, prefix):
        return self.const(value, prefix, np.float32)

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def dim(self, tensor, index, prefix):
        shape = self.node("Shape", [tensor], prefix)
        return self.node("Gather", [shape, self.const(index, prefix)], prefix, axis=0)

    def unsqueeze(self, x, axes, prefix):
        if self.opset < 13:
            return self.node("Unsqueeze", [x], prefix, axes=axes)
        return self.node("Unsqueeze", [x, self.const(axes, prefix)], prefix)

    def unsqueeze0(self, scalar, prefix):
        return self.unsqueeze(scalar, [0], prefix)

    def reduce(self, op, x, axes, prefix, keepdims):
        axes_input = 18 if op == "ReduceMean" else 13
        if self.opset < axes_input:
            return self.node(op, [x], prefix, axes=axes, keepdims=keepdims)
        return self.node(op, [x, self.const(axes, prefix)], prefix, keepdims=keepdims)

    def reshape(self, x, shape, prefix):
        if self.opset >= 14:
            return self.node("Reshape", [x, shape], prefix, allowzero=0)
        return self.node("Reshape", [x, shape], prefix)

    def split(self, x, sizes, axis, prefix):
        if self.opset < 13:
            return self.node("Split", [x], prefix, outputs=len(sizes), axis=axis, split=sizes)
        return self.node("Split", [x, self.const(sizes, prefix)], prefix, outputs=len(sizes), axis=axis)

    def shape_of(self, x, dims, tail, prefix):
        """Concat of x's first `dims` dims (Shape/Gather/Unsqueeze) and the constants `tail`."""
        parts = [self.unsqueeze0(self.dim(x, i, prefix), prefix) for i in range(dims)]
        return self.node("Concat", parts + [self.const(tail, prefix)], prefix, axis=0)


def layer_norm(b, spec_ln, x, gamma, beta, prefix):
    if spec_ln == "op":
        return b.node("LayerNormalization", [x, gamma, beta], prefix, axis=-1, epsilon=EPS)
    mean = b.reduce("ReduceMean", x, [-1], prefix, keepdims=1)
    d = b.node("Sub", [x, mean], prefix)
    var = b.reduce("ReduceMean", b.node("Pow", [d, b.fconst(2.0, prefix)], prefix), [-1], prefix, keepdims=1)
    std = b.node("Sqrt", [b.node("Add", [var, b.fconst(EPS, prefix)], prefix)], prefix)
    y = b.node("Div", [d, std], prefix)
    return b.node("Add", [b.node("Mul", [y, gamma], prefix), beta], prefix)


def gelu(b, kind, h, prefix):
    c = lambda v: b.fconst(v, prefix)  # noqa: E731
    if kind == "erf":  # the baseline: x * (1 + erf(x / sqrt 2)) * 0.5
        g = b.node("Erf", [b.node("Div", [h, c(1.4142135381698608)], prefix)], prefix)
        g = b.node("Mul", [h, b.node("Add", [g, c(1.0)], prefix)], prefix)
        return b.node("Mul", [g, c(0.5)], prefix)
    if kind == "erf_variants":  # x * 0.5 * (1 + erf(x * (1 / sqrt 2)))
        half = b.node("Mul", [h, c(0.5)], prefix)
        g = b.node("Erf", [b.node("Mul", [h, c(0.7071067811865476)], prefix)], prefix)
        return b.node("Mul", [half, b.node("Add", [g, c(1.0)], prefix)], prefix)
    if kind in ("tanh", "tanh_cube"):
        half = b.node("Mul", [h, c(0.5)], prefix)
        if kind == "tanh":
            cube = b.node("Pow", [h, c(3.0)], prefix)
        else:
            cube = b.node("Mul", [b.node("Mul", [h, h], prefix), h], prefix)
        inner = b.node("Add", [h, b.node("Mul", [cube, c(0.044715)], prefix)], prefix)
        t = b.node("Tanh", [b.node("Mul", [inner, c(np.sqrt(2.0 / np.pi))], prefix)], prefix)
        return b.node("Mul", [half, b.node("Add", [t, c(1.0)], prefix)], prefix)
    if kind == "sigmoid":
        return b.node("Mul", [h, b.node("Sigmoid", [b.node("Mul", [h, c(1.702)], prefix)], prefix)], prefix)
    if kind in ("op_none", "op_tanh"):
        return b.node("Gelu", [h], prefix, approximate=kind[3:])
    raise ValueError(kind)


def quantise(w, axis=None):
    """Symmetric int8: scale max|w| / 127 per tensor, or per column (axis=1) of a [in, out] matrix."""
    m = np.abs(w).max() if axis is None else np.abs(w).max(axis=0)
    scale = (m / 127.0).astype(np.float32)
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    return q, scale


PER_CHANNEL = ("o", "i", "out")


def matrix(b, spec, p, key):
    """The [in, out] f32 matrix `key` as a tensor name, dequantised once if the spec quantises."""
    if key in b.cache:
        return b.cache[key]
    w, name = p[key], f"onnx::MatMul_{key}"
    if spec.weights == "f32":
        out = b.init(name, w)
    elif spec.weights == "int8_cast":
        q, scale = quantise(w)
        f = b.node("Cast", [b.init(name + "_q", q)], f"/dq/{key}", to=TensorProto.FLOAT)
        out = b.node("Mul", [f, b.init(name + "_scale", scale)], f"/dq/{key}")
    elif spec.weights == "dql":
        axis = 1 if key in PER_CHANNEL else None
        q, scale = quantise(w, axis)
        zp = b.init(name + "_zero_point", np.zeros(scale.shape, np.int8))
        ins = [b.init(name + "_q", q), b.init(name + "_scale", scale), zp]
        attrs = {"axis": 1} if axis is not None else {}
        out = b.node("DequantizeLinear", ins, f"/dq/{key}", **attrs)
    else:
        raise ValueError(spec.weights)
    b.cache[key] = out
    return out


def linear(b, spec, p, x, key, bias, prefix):
    """x @ W[key] + bias in the spec's spelling of a projection."""
    rows, cols = MATRICES[key]
    if spec.proj == "matmul":
        return b.node("Add", [bias, b.node("MatMul", [x, matrix(b, spec, p, key)], prefix)], prefix)
    stored = b.cache.get(key + ".T") or b.init(f"onnx::Linear_{key}.weight", np.ascontiguousarray(p[key].T))
    b.cache[key + ".T"] = stored
    if spec.proj == "transposed":
        w = b.node("Transpose", [stored], prefix, perm=[1, 0])
        return b.node("Add", [b.node("MatMul", [x, w], prefix), bias], prefix)
    if spec.proj == "gemm":
        x2 = b.reshape(x, b.const([-1, rows], prefix), prefix)
        y2 = b.node("Gemm", [x2, stored, bias], prefix, alpha=1.0, beta=1.0, transB=1)
        return b.reshape(y2, b.shape_of(x, 2, [cols], prefix), prefix)
    raise ValueError(spec.proj)


def heads(b, x, prefix, perm):
    shape = b.node("Concat", [b.unsqueeze0(b.dim(x, 0, prefix), prefix), b.unsqueeze0(b.dim(x, 1, prefix), prefix),
                              b.const([HEADS], prefix), b.const([HEAD], prefix)], prefix, axis=0)
    return b.node("Transpose", [b.reshape(x, shape, prefix)], prefix, perm=perm)


def qkv(b, spec, p, x, l, prefix):
    if spec.qkv == "separate":
        return [linear(b, spec, p, x, k, b.init(f"l{l}.{BIASES[k]}", p[f"l{l}.{BIASES[k]}"]), f"{prefix}/{n}")
                for k, n in (("q", "query"), ("k", "key"), ("v", "value"))]
    if "qkv" not in b.cache:
        b.cache["qkv"] = b.init("onnx::MatMul_qkv", np.concatenate([p["q"], p["k"], p["v"]], axis=1))
    bias = np.concatenate([p[f"l{l}.{BIASES[k]}"] for k in "qkv"])
    y = b.node("MatMul", [x, b.cache["qkv"]], f"{prefix}/qkv")
    y = b.node("Add", [b.init(f"l{l}.attention.self.qkv.bias", bias), y], f"{prefix}/qkv")
    if spec.qkv == "fused_split":
        return b.split(y, [HIDDEN] * 3, 2, f"{prefix}/qkv")
    one = b.const([1], f"{prefix}/qkv")
    axis = b.const([2], f"{prefix}/qkv")
    return [b.node("Slice", [y, b.const([i * HIDDEN], f"{prefix}/qkv"), b.const([(i + 1) * HIDDEN], f"{prefix}/qkv"),
                             axis, one], f"{prefix}/qkv") for i in range(3)]


def attention(b, spec, p, x, mask, l, prefix):
    """Self-attention without the output projection; `mask` is the bias to add, the bool mask, or None."""
    q, k, v = qkv(b, spec, p, x, l, prefix)
    kt = heads(b, k, f"{prefix}/self", [0, 2, 3, 1])
    vh = heads(b, v, f"{prefix}/self", [0, 2, 1, 3])
    qh = heads(b, q, f"{prefix}/self", [0, 2, 1, 3])
    if spec.scale == "q":
        qh = b.node("Mul", [qh, b.fconst(1.0 / np.sqrt(HEAD), f"{prefix}/self")], f"{prefix}/self")
    elif spec.scale == "qk":
        c = b.fconst(HEAD ** -0.25, f"{prefix}/self")
        qh = b.node("Mul", [qh, c], f"{prefix}/self")
        kt = b.node("Mul", [kt, c], f"{prefix}/self")
    s = b.node("MatMul", [qh, kt], f"{prefix}/self")
    if spec.scale == "div":
        s = b.node("Div", [s, b.fconst(np.sqrt(HEAD), f"{prefix}/self")], f"{prefix}/self")
    if spec.mask == "where_scores":
        s = b.node("Where", [mask, s, b.fconst(-np.inf, f"{prefix}/self")], f"{prefix}/self")
    elif mask is not None:
        s = b.node("Add", [s, mask], f"{prefix}/self")
    s = b.node("Softmax", [s], f"{prefix}/self", axis=-1)
    o = b.node("Transpose", [b.node("MatMul", [s, vh], f"{prefix}/self")], f"{prefix}/self", perm=[0, 2, 1, 3])
    return b.reshape(o, b.shape_of(o, 2, [HIDDEN], f"{prefix}/self"), f"{prefix}/self")


def mask_input(b, spec):
    if spec.mask == "sub_mul":  # (1 - mask[:, None, None, :]) * finfo(float32).min
        m = b.unsqueeze(b.unsqueeze("attention_mask", [1], "/mask"), [2], "/mask")
        m = b.node("Sub", [b.fconst(1.0, "/mask"), b.node("Cast", [m], "/mask", to=TensorProto.FLOAT)], "/mask")
        return b.node("Mul", [m, b.fconst(np.finfo(np.float32).min, "/mask")], "/mask")
    m = b.node("Cast", ["attention_mask"], "/mask", to=TensorProto.BOOL)
    m = b.unsqueeze(b.unsqueeze(m, [1], "/mask"), [2], "/mask")
    if spec.mask == "bool_where":
        return b.node("Where", [m, b.fconst(0.0, "/mask"), b.fconst(-1e9, "/mask")], "/mask")
    if spec.mask == "bool_where_not":
        m = b.node("Not", [m], "/mask")
        return b.node("Where", [m, b.fconst(-1e9, "/mask"), b.fconst(0.0, "/mask")], "/mask")
    if spec.mask == "where_scores":
        return m
    raise ValueError(spec.mask)


def encoder(spec, p, layers=2):
    b = B(spec.opset)
    ln = lambda x, name: layer_norm(b, spec.ln, x, b.init(name + ".weight", p[name + ".weight"]),  # noqa: E731
                                    b.init(name + ".bias", p[name + ".bias"]), f"/{name}")
    seq_dim = SEQ if spec.pos == "const" else "sequence_length"
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", seq_dim])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", seq_dim])
    # The buffered token-type ids sliced to the sequence length and expanded to the batch, as exported.
    seq = b.dim("input_ids", 1, "/emb")
    buffered = b.init("embeddings.token_type_ids", np.zeros((1, POSITIONS), np.int64))
    tt = b.node("Slice", [buffered, b.const([0], "/emb"), b.unsqueeze0(seq, "/emb"), b.const([1], "/emb"),
                          b.const([1], "/emb")], "/emb")
    batch = b.dim("input_ids", 0, "/emb")
    shape = b.node("Concat", [b.unsqueeze0(batch, "/emb"), b.unsqueeze0(seq, "/emb")], "/emb", axis=0)
    shape = b.reshape(shape, b.const([-1], "/emb"), "/emb")
    ones = b.node("ConstantOfShape", [b.node("Shape", [shape], "/emb")], "/emb",
                  value=numpy_helper.from_array(np.array([1], np.int64)))
    neg = b.node("Mul", [ones, b.const(-1, "/emb")], "/emb")
    where = b.node("Where", [b.node("Equal", [shape, neg], "/emb"), ones, shape], "/emb")
    tt = b.node("Expand", [tt, where], "/emb")
    mask_value = mask_input(b, spec)
    word = b.init("embeddings.word_embeddings.weight", p["word"])
    ttype = b.init("embeddings.token_type_embeddings.weight", p["ttype"])
    e = b.node("Add", [b.node("Gather", [word, "input_ids"], "/emb/word"), b.node("Gather", [ttype, tt], "/emb/tt")],
               "/emb")
    if spec.pos == "gather":
        positions = b.init("embeddings.position_ids", np.arange(POSITIONS, dtype=np.int64)[None, :])
        pos = b.node("Slice", [positions, b.const([0], "/emb"), b.unsqueeze0(seq, "/emb"), b.const([1], "/emb"),
                               b.const([1], "/emb")], "/emb")
        ptable = b.init("embeddings.position_embeddings.weight", p["pos"])
        pos = b.node("Gather", [ptable, pos], "/emb/pos")
    else:
        pos = b.init("embeddings.position_embeddings.folded", p["pos"][None, :SEQ])
    x = ln(b.node("Add", [e, pos], "/emb"), "embeddings.LayerNorm")
    for l in range(layers):
        pre = f"/l{l}"
        a = attention(b, spec, p, x, mask_value, l, pre)
        a = linear(b, spec, p, a, "o", b.init(f"l{l}.{BIASES['o']}", p[f"l{l}.{BIASES['o']}"]),
                   f"{pre}/attention/output")
        x = ln(b.node("Add", [a, x], f"{pre}/attention/output"), f"l{l}.attention.output.LayerNorm")
        h = linear(b, spec, p, x, "i", b.init(f"l{l}.{BIASES['i']}", p[f"l{l}.{BIASES['i']}"]),
                   f"{pre}/intermediate")
        g = gelu(b, spec.gelu, h, f"{pre}/act")
        o = linear(b, spec, p, g, "out", b.init(f"l{l}.{BIASES['out']}", p[f"l{l}.{BIASES['out']}"]), f"{pre}/output")
        x = ln(b.node("Add", [o, x], f"{pre}/output"), f"l{l}.output.LayerNorm")
    hidden = "last_hidden_state"
    b.nodes.append(helper.make_node("Identity", [x], [hidden], name="/hidden/Identity"))
    # Mean pooling over the mask.
    pm = b.unsqueeze("attention_mask", [-1], "/pool")
    dims = [b.unsqueeze0(b.dim(hidden, i, "/pool"), "/pool") for i in range(3)]
    pm = b.node("Cast", [b.node("Expand", [pm, b.node("Concat", dims, "/pool", axis=0)], "/pool")], "/pool",
                to=TensorProto.FLOAT)
    total = b.reduce("ReduceSum", b.node("Mul", [hidden, pm], "/pool"), [1], "/pool", keepdims=0)
    count = b.node("Clip", [b.reduce("ReduceSum", pm, [1], "/pool", keepdims=0), b.fconst(1e-9, "/pool"), ""],
                   "/pool")
    pooled = b.node("Div", [total, count], "/pool")
    b.nodes.append(helper.make_node("Concat", [pooled], ["sentence_embedding"], name="/pool/Concat", axis=1))
    b.nodes.append(helper.make_node("Identity", ["input_ids"], ["output"], name="Identity_ids"))
    b.nodes.append(helper.make_node("Identity", ["attention_mask"], ["mask_out"], name="Identity_mask"))
    outputs = [
        helper.make_tensor_value_info("output", TensorProto.INT64, ["batch_size", seq_dim]),
        helper.make_tensor_value_info("mask_out", TensorProto.INT64, ["batch_size", seq_dim]),
        helper.make_tensor_value_info(hidden, TensorProto.FLOAT, ["batch_size", seq_dim, HIDDEN]),
        helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch_size", HIDDEN]),
    ]
    return finish(b, "encoder", [ids, mask], outputs)


def finish(b, name, inputs, outputs):
    graph = helper.make_graph(b.nodes, name, inputs, outputs, b.inits)
    opset = [helper.make_opsetid("", b.opset)]
    model = helper.make_model(graph, opset_imports=opset, producer_name="make_spellings.py")
    model.ir_version = helper.find_min_ir_version_for(opset)
    onnx.checker.check_model(model, full_check=True)
    return model


def vit(seed=1, layers=2, patch=8, image=32):
    """A ViT image encoder (HF ViTModel's pattern) at opset 14, pre-norm blocks, split LayerNorm."""
    rng = np.random.default_rng(seed)
    f = lambda a: a.astype(np.float32)  # noqa: E731
    b = B(14)
    spec = Spec(opset=14, ln="split")
    patches = (image // patch) ** 2
    p = {k: f(rng.standard_normal(s) / np.sqrt(s[0])) for k, s in MATRICES.items()}

    def ln(x, name):
        g = b.init(name + ".weight", f(1 + 0.1 * rng.standard_normal(HIDDEN)))
        beta = b.init(name + ".bias", f(0.1 * rng.standard_normal(HIDDEN)))
        return layer_norm(b, "split", x, g, beta, f"/{name}")

    pix = helper.make_tensor_value_info("pixel_values", TensorProto.FLOAT, [1, 3, image, image])
    conv_w = b.init("embeddings.patch_embeddings.projection.weight",
                    f(rng.standard_normal((HIDDEN, 3, patch, patch)) / np.sqrt(3 * patch * patch)))
    conv_b = b.init("embeddings.patch_embeddings.projection.bias", f(0.02 * rng.standard_normal(HIDDEN)))
    e = b.node("Conv", ["pixel_values", conv_w, conv_b], "/emb/projection", dilations=[1, 1], group=1,
               kernel_shape=[patch, patch], pads=[0, 0, 0, 0], strides=[patch, patch])
    e = b.reshape(e, b.shape_of(e, 2, [-1], "/emb"), "/emb")  # flatten(2)
    e = b.node("Transpose", [e], "/emb", perm=[0, 2, 1])
    cls = b.init("embeddings.cls_token", f(0.5 * rng.standard_normal((1, 1, HIDDEN))))
    batch = b.unsqueeze0(b.dim("pixel_values", 0, "/emb"), "/emb")
    cls = b.node("Expand", [cls, b.node("Concat", [batch, b.const([1, HIDDEN], "/emb")], "/emb", axis=0)], "/emb")
    e = b.node("Concat", [cls, e], "/emb", axis=1)
    pos = b.init("embeddings.position_embeddings", f(0.5 * rng.standard_normal((1, patches + 1, HIDDEN))))
    x = b.node("Add", [e, pos], "/emb")
    for l in range(layers):
        pre = f"/l{l}"
        for key in MATRICES:
            p[f"l{l}.{BIASES[key]}"] = f(0.02 * rng.standard_normal(MATRICES[key][1]))
        bias = lambda key: b.init(f"l{l}.{BIASES[key]}", p[f"l{l}.{BIASES[key]}"])  # noqa: E731
        a = attention(b, spec, p, ln(x, f"l{l}.layernorm_before"), None, l, pre)
        a = linear(b, spec, p, a, "o", bias("o"), f"{pre}/attention/output")
        x = b.node("Add", [a, x], f"{pre}/attention/output")
        h = linear(b, spec, p, ln(x, f"l{l}.layernorm_after"), "i", bias("i"), f"{pre}/intermediate")
        o = linear(b, spec, p, gelu(b, "erf", h, f"{pre}/act"), "out", bias("out"), f"{pre}/output")
        x = b.node("Add", [o, x], f"{pre}/output")
    x = ln(x, "layernorm")
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/hidden/Identity"))
    b.nodes.append(helper.make_node("Gather", ["last_hidden_state", b.const(0, "/pool")], ["class_token"],
                                    name="/pool/Gather", axis=1))
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, patches + 1, HIDDEN]),
               helper.make_tensor_value_info("class_token", TensorProto.FLOAT, [1, HIDDEN])]
    return finish(b, "vit", [pix], outputs)


SPELLINGS = [
    ("spell_baseline", {}),
    ("spell_split_layernorm", dict(opset=13, ln="split")),
    ("spell_split_layernorm_opset18", dict(opset=18, ln="split")),
    ("spell_gelu_tanh", dict(gelu="tanh")),
    ("spell_gelu_tanh_cube", dict(gelu="tanh_cube")),
    ("spell_gelu_sigmoid", dict(gelu="sigmoid")),
    ("spell_gelu_erf_variants", dict(gelu="erf_variants")),
    ("spell_gelu_op", dict(opset=20, gelu="op_none")),
    ("spell_gelu_op_tanh", dict(opset=20, gelu="op_tanh")),
    ("spell_scale_q", dict(scale="q")),
    ("spell_scale_qk", dict(scale="qk")),
    ("spell_bool_mask", dict(mask="bool_where")),
    ("spell_bool_mask_not", dict(mask="bool_where_not")),
    ("spell_mask_where_scores", dict(mask="where_scores")),
    ("spell_fused_qkv", dict(qkv="fused_split")),
    ("spell_fused_qkv_slice", dict(qkv="fused_slice")),
    ("spell_gemm", dict(proj="gemm")),
    ("spell_transposed_weight", dict(proj="transposed")),
    ("spell_position_embedding_const", dict(pos="const")),
    ("spell_int8_weights", dict(weights="int8_cast")),
    ("spell_dequantize_linear", dict(weights="dql")),
    ("spell_older_opset11", dict(opset=11, ln="split")),
    ("spell_older_opset11_fused_qkv", dict(opset=11, ln="split", qkv="fused_split")),
]


def run(model, feeds):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def tensor_json(a):
    data = [float(f"{x:.9g}") for x in a.ravel()] if a.dtype.kind == "f" else a.ravel().tolist()
    return {"shape": list(a.shape), "dtype": str(a.dtype), "data": data}


def write(here, name, model, feeds, reference=None):
    path = os.path.join(here, name + ".onnx")
    onnx.save(model, path)
    outputs = run(onnx.load(path), feeds)
    for k, v in outputs.items():
        assert np.isfinite(v).all(), (name, k)
    record = {"model": name + ".onnx", "opset": model.opset_import[0].version,
              "inputs": {k: tensor_json(v) for k, v in feeds.items()},
              "outputs": {k: tensor_json(v) for k, v in outputs.items()}}
    if reference is not None:
        record["max_abs_diff_from_baseline"] = {k: float(np.abs(v - reference[k]).max())
                                                for k, v in outputs.items() if v.dtype.kind == "f"}
    with open(os.path.join(here, name + ".expected.json"), "w") as f:
        json.dump(record, f)
        f.write("\n")
    nodes = len(model.graph.node)
    diff = record.get("max_abs_diff_from_baseline", {}).get("last_hidden_state")
    print(f"{name}.onnx: opset {record['opset']}, {os.path.getsize(path)} bytes, {nodes} nodes"
          + (f", max |diff| from baseline {diff:.3g}" if diff is not None else ""))
    return outputs


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    ids = (np.arange(SEQ, dtype=np.int64)[None, :] * 7 + 3) % VOCAB
    mask = np.ones((1, SEQ), np.int64)
    mask[0, SEQ - 4:] = 0
    feeds = {"input_ids": ids, "attention_mask": mask}
    p = params()
    baseline = None
    for name, kw in SPELLINGS:
        out = write(here, name, encoder(Spec(**kw), p), feeds, baseline)
        baseline = baseline or out
    pixels = np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)
    write(here, "vit_tiny", vit(), {"pixel_values": pixels})
