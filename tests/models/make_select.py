"""Writes select_activations.onnx: Where and comparisons on activations (computed tensors), with
`select_activations.expected.json` beside it (the fixed inputs and onnxruntime's outputs, graph
optimisations off, as make_spellings.py writes them).

Run from the repository root with `python3 tests/models/make_select.py` (needs numpy, onnx and
onnxruntime); the outputs are committed.

The model (opset 17), `x` float [2, 8, 16] and `keep` bool [2, 8, 1]:
  h = MatMul(x, W1) + b1;  g = Tanh(MatMul(x, W2))
  c = Greater(h, t)                    t [16], one threshold a column
  z = Where(c, h, g)                   an output (float)
  both = And(c, Not(Less(g, s)))       s a scalar; an output (bool)
  out = MatMul(Where(keep, z, 0), W3)  keep spread over each row; an output (float)
Each threshold lies in the middle of the widest gap between the values it is compared with, so no
comparison is within f16's reach of a tie: the device's booleans must equal onnxruntime's exactly.
"""

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_spellings import write  # noqa: E402

D = 16


def gap_middle(values):
    """The middle of the widest gap between neighbours among the middle half of `values`, and the
    distance from it to the nearest value."""
    v = np.sort(values.ravel())
    n = len(v)
    lo, hi = n // 4, 3 * n // 4
    gaps = v[lo + 1:hi + 1] - v[lo:hi]
    i = lo + int(np.argmax(gaps))
    middle = (v[i] + v[i + 1]) / 2
    return np.float32(middle), float(np.min(np.abs(values - middle)))


def model_and_feeds():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 8, D)).astype(np.float32)
    keep = rng.random((2, 8, 1)) < 0.6
    w1 = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    b1 = (0.1 * rng.standard_normal(D)).astype(np.float32)
    w2 = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    w3 = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    h = x @ w1 + b1
    g = np.tanh(x @ w2)
    columns = [gap_middle(h[..., j]) for j in range(D)]
    t = np.array([m for m, _ in columns], np.float32)
    s, s_margin = gap_middle(g)
    margin = min(min(d for _, d in columns), s_margin)
    assert margin > 0.01, margin

    inits = [numpy_helper.from_array(a, n) for n, a in
             [("W1", w1), ("b1", b1), ("W2", w2), ("W3", w3), ("t", t), ("s", np.array(s, np.float32)),
              ("zero", np.array(0.0, np.float32))]]
    node = helper.make_node
    nodes = [
        node("MatMul", ["x", "W1"], ["xw1"]),
        node("Add", ["xw1", "b1"], ["h"]),
        node("MatMul", ["x", "W2"], ["xw2"]),
        node("Tanh", ["xw2"], ["g"]),
        node("Greater", ["h", "t"], ["c"]),
        node("Where", ["c", "h", "g"], ["z"]),
        node("Less", ["g", "s"], ["small"]),
        node("Not", ["small"], ["large"]),
        node("And", ["c", "large"], ["both"]),
        node("Where", ["keep", "z", "zero"], ["kept"]),
        node("MatMul", ["kept", "W3"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "select_activations",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "tokens", D]),
         helper.make_tensor_value_info("keep", TensorProto.BOOL, ["batch", "tokens", 1])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", "tokens", D]),
         helper.make_tensor_value_info("both", TensorProto.BOOL, ["batch", "tokens", D]),
         helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "tokens", D])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, {"x": x, "keep": keep}, margin


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    model, feeds, margin = model_and_feeds()
    write(here, "select_activations", model, feeds)
    print(f"smallest distance of a compared value from its threshold: {margin:.3g}")
