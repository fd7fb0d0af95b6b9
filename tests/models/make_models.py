"""Writes the small ONNX models the import tests read, in the node pattern of a PyTorch export of a
BERT sentence encoder (as paraphrase-MiniLM-L3-v2 has it): shape arithmetic that folds once the input
shapes are fixed, embeddings as Gathers summed, the mask chain, per-layer attention split into heads by
Reshape/Transpose, erf-GELU, LayerNormalization, and masked mean pooling.

Run from the repository root with `python3 tests/models/make_models.py` (needs `onnx` and `numpy`); the
outputs are committed, so the Rust tests need no Python:

- encoder.onnx: hidden 64, 2 heads of 32, intermediate 128, 2 layers (the second reuses the first's
  matrices, with biases and norms of its own, to stay small), vocab 100, 32 positions, seq 24.
- unsupported.onnx: the same with one layer and a `Sin` node after the embeddings' LayerNorm.

`python3 tests/models/make_models.py --bert-base OUT.onnx` writes, instead, a BERT-base-shaped encoder
(hidden 768, 12 heads of 64, intermediate 3072, 12 layers each with matrices of its own, vocab 30522,
512 positions, random weights) in the same pattern: what `make bert-base` imports and runs.
"""

import argparse
import json
import os
from collections import namedtuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Dims = namedtuple("Dims", "hidden heads head inter vocab positions")
SMALL = Dims(hidden=64, heads=2, head=32, inter=128, vocab=100, positions=32)
BERT_BASE = Dims(hidden=768, heads=12, head=64, inter=3072, vocab=30522, positions=512)


class Builder:
    def __init__(self, seed, dims):
        self.nodes, self.inits, self.rng, self.count = [], [], np.random.default_rng(seed), 0
        self.d = dims

    def name(self, base):
        self.count += 1
        return f"{base}_{self.count}"

    def node(self, op, inputs, prefix, **attrs):
        name = self.name(f"{prefix}/{op}")
        out = f"{name}:0"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def const(self, value, prefix, dtype=np.int64):
        name = self.name(f"{prefix}/Constant")
        out = f"{name}:0"
        tensor = numpy_helper.from_array(np.array(value, dtype=dtype), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=tensor))
        return out

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(array.astype(array.dtype), name))
        return name

    def weight(self, name, *shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return self.init(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def dim(self, tensor, index, prefix):
        shape = self.node("Shape", [tensor], prefix)
        return self.node("Gather", [shape, self.const(index, prefix)], prefix, axis=0)

    def unsqueeze0(self, scalar, prefix):
        return self.node("Unsqueeze", [scalar, self.const([0], prefix)], prefix)


def layer_norm(b, x, prefix):
    g = b.init(f"{prefix}.weight", (1 + 0.1 * b.rng.standard_normal(b.d.hidden)).astype(np.float32))
    beta = b.init(f"{prefix}.bias", (0.1 * b.rng.standard_normal(b.d.hidden)).astype(np.float32))
    return b.node("LayerNormalization", [x, g, beta], prefix, axis=-1, epsilon=1e-12)


def dense(b, x, weight, bias_name, prefix):
    bias = b.init(bias_name, (0.02 * b.rng.standard_normal(b.width(weight))).astype(np.float32))
    y = b.node("MatMul", [x, weight], prefix)
    return b.node("Add", [bias, y], prefix)


def heads(b, x, prefix, transpose_perm):
    batch, seq = b.dim(x, 0, prefix), b.dim(x, 1, prefix)
    shape = b.node(
        "Concat",
        [b.unsqueeze0(batch, prefix), b.unsqueeze0(seq, prefix), b.const([b.d.heads], prefix), b.const([b.d.head], prefix)],
        prefix,
        axis=0,
    )
    r = b.node("Reshape", [x, shape], prefix, allowzero=0)
    return b.node("Transpose", [r], prefix, perm=transpose_perm)


def layer(b, x, mask_bias, l, mats):
    p = f"/l{l}"
    q = dense(b, x, mats["q"], f"l{l}.query.bias", f"{p}/query")
    k = dense(b, x, mats["k"], f"l{l}.key.bias", f"{p}/key")
    v = dense(b, x, mats["v"], f"l{l}.value.bias", f"{p}/value")
    kt = heads(b, k, f"{p}/self", [0, 2, 3, 1])
    vh = heads(b, v, f"{p}/self", [0, 2, 1, 3])
    qh = heads(b, q, f"{p}/self", [0, 2, 1, 3])
    s = b.node("MatMul", [qh, kt], f"{p}/self")
    s = b.node("Div", [s, b.const(np.sqrt(b.d.head), f"{p}/self", np.float32)], f"{p}/self")
    s = b.node("Add", [s, mask_bias], f"{p}/self")
    s = b.node("Softmax", [s], f"{p}/self", axis=-1)
    o = b.node("MatMul", [s, vh], f"{p}/self")
    o = b.node("Transpose", [o], f"{p}/self", perm=[0, 2, 1, 3])
    batch, seq = b.dim(o, 0, f"{p}/self"), b.dim(o, 1, f"{p}/self")
    shape = b.node(
        "Concat",
        [b.unsqueeze0(batch, f"{p}/self"), b.unsqueeze0(seq, f"{p}/self"), b.const([b.d.hidden], f"{p}/self")],
        f"{p}/self",
        axis=0,
    )
    o = b.node("Reshape", [o, shape], f"{p}/self", allowzero=0)
    o = dense(b, o, mats["o"], f"l{l}.attention.output.dense.bias", f"{p}/attention/output")
    x = layer_norm(b, b.node("Add", [o, x], f"{p}/attention/output"), f"l{l}.attention.output.LayerNorm")
    h = dense(b, x, mats["i"], f"l{l}.intermediate.dense.bias", f"{p}/intermediate")
    g = b.node("Div", [h, b.const(1.4142135381698608, f"{p}/act", np.float32)], f"{p}/act")
    g = b.node("Erf", [g], f"{p}/act")
    g = b.node("Add", [g, b.const(1.0, f"{p}/act", np.float32)], f"{p}/act")
    g = b.node("Mul", [h, g], f"{p}/act")
    g = b.node("Mul", [g, b.const(0.5, f"{p}/act", np.float32)], f"{p}/act")
    o = dense(b, g, mats["out"], f"l{l}.output.dense.bias", f"{p}/output")
    return layer_norm(b, b.node("Add", [o, x], f"{p}/output"), f"l{l}.output.LayerNorm")


def encoder(layers, unsupported=False, seed=0, dims=SMALL, shared=True):
    """`layers` layers; with `shared` every layer reads the same six matrices, else each its own."""
    b = Builder(seed, dims)
    d = dims
    widths = {}
    b.width = lambda w: widths[w]

    def matrix(name, rows, cols):
        widths[name] = cols
        return b.weight(name, rows, cols)

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "sequence_length"])
    # The export's buffered token-type ids and position ids, sliced to the sequence length.
    seq = b.dim("input_ids", 1, "/emb")
    buffered = b.init("embeddings.token_type_ids", np.zeros((1, d.positions), np.int64))
    tt = b.node("Slice", [buffered, b.const([0], "/emb"), b.unsqueeze0(seq, "/emb"), b.const([1], "/emb"), b.const([1], "/emb")], "/emb")
    batch = b.dim("input_ids", 0, "/emb")
    shape = b.node("Concat", [b.unsqueeze0(batch, "/emb"), b.unsqueeze0(seq, "/emb")], "/emb", axis=0)
    shape = b.node("Reshape", [shape, b.const([-1], "/emb")], "/emb", allowzero=0)
    ones = b.node("ConstantOfShape", [b.node("Shape", [shape], "/emb")], "/emb", value=numpy_helper.from_array(np.array([1], np.int64)))
    neg = b.node("Mul", [ones, b.const(-1, "/emb")], "/emb")
    where = b.node("Where", [b.node("Equal", [shape, neg], "/emb"), ones, shape], "/emb")
    tt = b.node("Expand", [tt, where], "/emb")
    positions = b.init("embeddings.position_ids", np.arange(d.positions, dtype=np.int64)[None, :])
    pos = b.node("Slice", [positions, b.const([0], "/emb"), b.unsqueeze0(seq, "/emb"), b.const([1], "/emb"), b.const([1], "/emb")], "/emb")
    # The mask bias: (1 - mask[:, None, None, :]) * finfo(float32).min.
    m = b.node("Unsqueeze", ["attention_mask", b.const([1], "/mask")], "/mask")
    m = b.node("Unsqueeze", [m, b.const([2], "/mask")], "/mask")
    m = b.node("Cast", [m], "/mask", to=TensorProto.FLOAT)
    m = b.node("Sub", [b.const(1.0, "/mask", np.float32), m], "/mask")
    mask_bias = b.node("Mul", [m, b.const(np.finfo(np.float32).min, "/mask", np.float32)], "/mask")
    word = b.weight("embeddings.word_embeddings.weight", d.vocab, d.hidden, scale=0.5)
    ttype = b.weight("embeddings.token_type_embeddings.weight", 2, d.hidden, scale=0.5)
    ptable = b.weight("embeddings.position_embeddings.weight", d.positions, d.hidden, scale=0.5)
    e = b.node("Add", [b.node("Gather", [word, "input_ids"], "/emb/word"), b.node("Gather", [ttype, tt], "/emb/tt")], "/emb")
    e = b.node("Add", [e, b.node("Gather", [ptable, pos], "/emb/pos")], "/emb")
    x = layer_norm(b, e, "embeddings.LayerNorm")
    if unsupported:
        x = b.node("Sin", [x], "/emb/odd")
    def matrices(suffix):
        return {
            "q": matrix(f"onnx::MatMul_q{suffix}", d.hidden, d.hidden),
            "k": matrix(f"onnx::MatMul_k{suffix}", d.hidden, d.hidden),
            "v": matrix(f"onnx::MatMul_v{suffix}", d.hidden, d.hidden),
            "o": matrix(f"onnx::MatMul_o{suffix}", d.hidden, d.hidden),
            "i": matrix(f"onnx::MatMul_i{suffix}", d.hidden, d.inter),
            "out": matrix(f"onnx::MatMul_out{suffix}", d.inter, d.hidden),
        }

    mats = matrices("") if shared else None
    for l in range(layers):
        x = layer(b, x, mask_bias, l, mats or matrices(f"_{l}"))
    hidden = "last_hidden_state"
    b.nodes.append(helper.make_node("Identity", [x], [hidden], name="/hidden/Identity"))
    # Mean pooling over the mask.
    pm = b.node("Unsqueeze", ["attention_mask", b.const([-1], "/pool")], "/pool")
    dims = [b.unsqueeze0(b.dim(hidden, i, "/pool"), "/pool") for i in range(3)]
    shape = b.node("Concat", dims, "/pool", axis=0)
    pm = b.node("Cast", [b.node("Expand", [pm, shape], "/pool")], "/pool", to=TensorProto.FLOAT)
    axes = b.const([1], "/pool")
    total = b.node("ReduceSum", [b.node("Mul", [hidden, pm], "/pool"), axes], "/pool", keepdims=0)
    count = b.node("Clip", [b.node("ReduceSum", [pm, axes], "/pool", keepdims=0), b.const(1e-9, "/pool", np.float32), ""], "/pool")
    pooled = b.node("Div", [total, count], "/pool")
    b.nodes.append(helper.make_node("Concat", [pooled], ["sentence_embedding"], name="/pool/Concat", axis=1))
    b.nodes.append(helper.make_node("Identity", ["input_ids"], ["output"], name="Identity_ids"))
    b.nodes.append(helper.make_node("Identity", ["attention_mask"], ["mask_out"], name="Identity_mask"))
    outputs = [
        helper.make_tensor_value_info("output", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("mask_out", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info(hidden, TensorProto.FLOAT, ["batch_size", "sequence_length", d.hidden]),
        helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch_size", d.hidden]),
    ]
    graph = helper.make_graph(b.nodes, "encoder", [ids, mask], outputs, b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_models.py")
    model.ir_version = 8
    if not unsupported:
        onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bert-base", metavar="OUT.onnx", help="write the BERT-base-shaped encoder there instead")
    args = parser.parse_args()
    if args.bert_base:
        model = encoder(12, dims=BERT_BASE, shared=False)
        onnx.save(model, args.bert_base)
        print(f"{args.bert_base}: {os.path.getsize(args.bert_base)} bytes, {len(model.graph.node)} nodes")
        raise SystemExit(0)
    here = os.path.dirname(os.path.abspath(__file__))
    for file, model in [("encoder.onnx", encoder(2)), ("unsupported.onnx", encoder(1, unsupported=True))]:
        path = os.path.join(here, file)
        onnx.save(model, path)
        print(f"{path}: {os.path.getsize(path)} bytes, {len(model.graph.node)} nodes")
    # The encoder's outputs for one padded sentence, from onnx's reference evaluator, for the test that
    # evaluates the imported graph.
    from onnx.reference import ReferenceEvaluator

    ids = (np.arange(24, dtype=np.int64)[None, :] * 7 + 3) % SMALL.vocab
    mask = np.ones((1, 24), np.int64)
    mask[0, 18:] = 0
    model = onnx.load(os.path.join(here, "encoder.onnx"))
    _, _, hidden, pooled = ReferenceEvaluator(model).run(None, {"input_ids": ids, "attention_mask": mask})
    expected = {
        "input_ids": ids.ravel().tolist(),
        "attention_mask": mask.ravel().tolist(),
        "last_hidden_state": [round(float(x), 6) for x in hidden.ravel()],
        "sentence_embedding": [round(float(x), 6) for x in pooled.ravel()],
    }
    with open(os.path.join(here, "encoder.expected.json"), "w") as f:
        json.dump(expected, f)
        f.write("\n")
