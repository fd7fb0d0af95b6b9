#!/usr/bin/env python3
"""ONNX's own backend node tests, run through `ipu-codegen import` and `ipu-codegen run`.

The cases are ONNX's (onnx.backend.test.case.node.collect_testcases(): each a one-node model, its
inputs and the outputs ONNX expects); this script only writes them out, runs them through the CLI and
compares. It needs numpy and onnx (onnx.reference checks every case as it is written); running needs
only numpy and the binary.

  onnx_conformance.py write DIR [--ops Add,Sub,...] [--cases test_add,...]
      Writes, for every case of the operators (OPERATORS below, or --ops; --cases picks cases by
      name, which is how tests/conformance/ is written), DIR/<case>/ with
        model.onnx            the case's model, some inputs made initializers (the rule below)
        inputs/<name>.npy     every remaining graph input, as ONNX gives it
        expected/<name>.npy   every output, as ONNX expects it (float32 for float outputs)
        case.json             operator, opset, every input (name, shape, dtype, role "input" or
                              "initializer", file), every output (name, shape, dtype, file, the file
                              `run --output-dir` writes), the tolerance (rtol, atol, reason), the f16
                              floor (below), whether the outputs are constant, and notes.
      Only the one-node cases: ONNX's `_expanded` variants (the operator's function body, several
      nodes) test other operators and are left out. Cases are written in sorted order; the same onnx
      version writes the same files.

  onnx_conformance.py run DIR --bin PATH [--json OUT] [--markdown OUT] [--scratch DIR] [--timeout S]
      For every DIR/<case>/ in sorted order: `import model.onnx --shape NAME=AxB ...` (one --shape per
      graph input, from its .npy's shape), then `run <spec> --input NAME=inputs/NAME.npy ...
      --output-dir ...`, each with a timeout (120 s), in a scratch folder (cwd, IPU_CODEGEN_CACHE,
      IPU_CODEGEN_STAGES all inside it; a temporary folder removed afterwards unless --scratch names
      one), then compares every output. Each case is
        passed       every output within its tolerance;
        failed       the run reached the device and an output is off (max abs/rel error reported),
                     missing, mis-shaped, or the device reported a fault (hardwareTest=FAIL);
        unsupported  import or build refused the case: the CLI exited non-zero, cleanly, before a
                     device run; the reason is its first `error:` line;
        error        a panic, a signal, a timeout, or a missing binary: reported loudly.
      Prints the per-operator table; --json writes every result, --markdown the per-operator table,
      every case with its status and reason, and the tolerance table. Exits 1 when
      any case is failed or error, 0 otherwise (unsupported cases are reported, not failed).

Which operands become initializers (the device, not a constant folder, must compute every output, so
an operand stays a graph input bound at run time unless a real model would hold it constant):
  * weights: MatMul's B; Gemm's B and C; Conv's W and B; LayerNormalization's Scale and B;
    Gather's data when it is a table (2-D float data gathered along axis 0, an embedding: then the
    indices are the run-time ids and stay an input).
  * shape-like operands: Reshape's shape; Slice's starts, ends, axes, steps; ReduceMean/Sum/Max's
    axes (an input from opset 18); Gather's indices (when the data is not a table).
  * any 0-d operand (Pow's scalar exponent, Gemm's scalar bias): a scalar operand of a real model is a
    constant, and `--shape` cannot spell a 0-d shape.
  * everything else (both operands of Add/Sub/Mul/Div/Pow and of the comparisons and logic, Where's
    three, Concat's, the unary operators' input) stays a graph input. A zero-size input (a 0 in its shape) stays one too, and
    `import` is asked for it as written (`--shape x=2x0x4`), so the CLI gives the reason.
  A case whose every operand became an initializer has constant outputs; case.json says so
  (`constant_outputs`) and the markdown marks it. None of the operators above gives one today.

Comparison, "after the documented cast": the device rounds f32 inputs and weights to f16 and computes
in f16 (README, "Data binds at run time"); the expected outputs stay ONNX's float32 values, and an
element passes when |device - expected| <= atol + rtol * |expected| with the operator's (rtol, atol)
from TOLERANCES; NaN must meet NaN and an infinity the same infinity. Integer and bool outputs must
be exact. `write` also records the f16 floor of every output: the largest ratio of error to allowance
that the cast alone causes (onnx.reference evaluated on inputs and initializers rounded to f16, its
outputs rounded to f16). A floor above 1 means even an exact f16 device misses ONNX's expectation
(test_softmax_large_number: 10001 and 10002 round to 10000 in f16, 10003 to 10004); such an output is
compared instead with the reference's output on the f16-cast inputs (expected/<name>.cast.npy, ONNX's
file kept beside it as `onnx_file`), and the reason column says so. That keeps the case able to fail
(a wrong softmax still fails) without making the suite permanently red for a limit of f16 itself.

Why `run` exits 1 on failed and error but not on unsupported: a case the importer refuses says
nothing about the numbers, and most of them are refused today; one it accepts and gets wrong is a bug,
and a crash is always one. The cost: a case that passed and is now refused (a regression in the
importer) does not change the exit status; the committed subset in tests/conformance.rs guards
against that for its cases, and comparing two --json files shows it for the rest.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

OPERATORS = [
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Exp", "Erf", "Tanh", "Sigmoid", "Relu",
    "Neg", "Abs", "Where", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And",
    "Or", "Xor", "IsNaN", "IsInf", "ReduceMean", "ReduceSum", "ReduceMax", "Softmax", "Transpose",
    "Reshape", "Concat", "Slice", "Gather", "MatMul", "Gemm", "LayerNormalization", "Gelu", "Conv",
]

# f16's unit roundoff is u = 2^-11 ~ 4.9e-4: one rounding moves a value by at most u relative (or 3e-8
# absolute among subnormals, below 6.1e-5). Every f32 input is rounded once and every output once.
EXACT_AFTER_CAST = (1e-3, 1e-7, "moves or selects data: the cast to f16 (<= 2^-11 relative) is the only rounding")
PREDICATE = (0.0, 0.0, "a predicate: its bool output must be exact (a comparison of inputs that the cast to f16 made equal or swapped would show here)")
TOLERANCES = {
    # operator: (rtol, atol, why)
    "default": (1e-2, 1e-3, "input and output each rounded to f16 (~3 roundings, 1.5e-3 relative) with headroom for the vector unit's own arithmetic"),
    "Add": (1e-2, 4e-3, "operands are rounded before they are added: where the sum cancels, the error is 2^-11*(|a|+|b|) (randn operands up to ~4), not relative to the result"),
    "Sub": (1e-2, 4e-3, "as Add: rounded operands, cancellation"),
    "Mul": (1e-2, 1e-3, "default: a product's relative error is the sum of its operands' (~3 roundings)"),
    "Div": (1e-2, 1e-3, "default: a quotient's relative error is the sum of its operands' (~3 roundings)"),
    "Pow": (2e-2, 1e-3, "x^y moves by y*dx/x + ln(x)*dy relative: the exponent's rounding is amplified by ln x (x up to 59)"),
    "Sqrt": (1e-2, 1e-3, "default: sqrt halves the input's relative error"),
    "Reciprocal": (1e-2, 1e-3, "default: 1/x keeps the input's relative error"),
    "Exp": (2e-2, 1e-3, "exp(x) moves by |x|*dx relative: the input's rounding is amplified by |x| (up to ~3), plus the device's f16 exponential"),
    "Erf": (2e-2, 2e-3, "transcendental: the device's f16 approximation, a few ulp, and the input's rounding times erf' (<= 1.13)"),
    "Tanh": (2e-2, 2e-3, "transcendental: the device's f16 approximation, a few ulp"),
    "Sigmoid": (2e-2, 2e-3, "transcendental: the device's f16 exponential and division"),
    "Gelu": (2e-2, 2e-3, "transcendental (erf or tanh form) and two products, each in f16"),
    "Relu": EXACT_AFTER_CAST,
    "Neg": EXACT_AFTER_CAST,
    "Abs": EXACT_AFTER_CAST,
    "Where": EXACT_AFTER_CAST,
    **{op: PREDICATE for op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf")},
    "Transpose": EXACT_AFTER_CAST,
    "Reshape": EXACT_AFTER_CAST,
    "Concat": EXACT_AFTER_CAST,
    "Slice": EXACT_AFTER_CAST,
    "Gather": EXACT_AFTER_CAST,
    "ReduceMax": EXACT_AFTER_CAST,
    "ReduceSum": (2e-2, 5e-3, "a sum of n rounded terms: its error grows with n*2^-11*max|x| where terms cancel, and with each f16 partial sum"),
    "ReduceMean": (2e-2, 5e-3, "as ReduceSum, then a division"),
    "Softmax": (2e-2, 2e-3, "the exponents and the probabilities are stored in f16 (README), and the sum over a row is rounded"),
    "MatMul": (1e-2, 1e-2, "the AMP multiplies rounded operands exactly and sums in f32 partials, so without cancellation the error is ~3 roundings (rtol as default); where the sum cancels it scales with 2^-10*sum|a*b| (~6e-3 for k <= 10, randn), not with the result (atol)"),
    "Gemm": (1e-2, 1e-2, "as MatMul, plus the scaled bias (alpha, beta 0.5..2), rounded like a weight"),
    "Conv": (1e-2, 1e-2, "as MatMul: 9 products per output, summed"),
    "LayerNormalization": (2e-2, 1e-2, "mean and variance of rounded inputs, then (x - mean)/std amplifies the input's rounding by 1/std, times a rounded scale"),
}
INTEGER_TOLERANCE = (0.0, 0.0, "integer or bool output: must be exact")


def tolerance(operator, dtype):
    if np.dtype(dtype).kind in "iub":
        return INTEGER_TOLERANCE
    return TOLERANCES.get(operator, TOLERANCES["default"])


def sanitized(name):
    """A tensor name as `run --output-dir` and this script spell it in a file name."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


# ---------------------------------------------------------------------------------------------- write

def initializer_names(node, arrays):
    """The node inputs (by name) that become initializers: the rule in the module docstring."""
    op = node.op_type
    names = list(node.input)

    def at(*positions):
        return {names[p] for p in positions if p < len(names) and names[p]}

    chosen = set()
    if op == "MatMul":
        chosen |= at(1)
    elif op in ("Gemm", "Conv", "LayerNormalization"):
        chosen |= at(1, 2)
    elif op == "Reshape":
        chosen |= at(1)
    elif op == "Slice":
        chosen |= at(1, 2, 3, 4)
    elif op in ("ReduceMean", "ReduceSum", "ReduceMax"):
        chosen |= at(1)
    elif op == "Gather":
        data = arrays[names[0]]
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        table = data.ndim == 2 and data.dtype.kind == "f" and axis == 0
        chosen |= at(0) if table else at(1)
    chosen |= {n for n in names if n and n in arrays and arrays[n].ndim == 0}
    return chosen


def as_array(value):
    from onnx import numpy_helper

    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):  # some cases give a numpy scalar for a 0-d tensor
        return np.asarray(value)
    return numpy_helper.to_array(value)


def f16_floor(model, feeds, expected, operator):
    """Per output: (the largest |error| / allowance that rounding every float input to f16 and the
    output to f16 causes on its own, 0 for an integer output; the reference's output on the rounded
    inputs, float32). (None, None) when onnx.reference cannot evaluate the case."""
    from onnx.reference import ReferenceEvaluator

    rounded = {k: (v.astype(np.float16).astype(v.dtype) if v.dtype.kind == "f" else v) for k, v in feeds.items()}
    try:
        with np.errstate(all="ignore"):
            got = ReferenceEvaluator(model).run(None, rounded)
    except Exception:  # noqa: BLE001 - the floor is advisory
        return {o.name: (None, None) for o in model.graph.output}
    floors = {}
    for out, e, g in zip(model.graph.output, expected, got):
        if e.dtype.kind != "f":
            floors[out.name] = (0.0, None)
            continue
        with np.errstate(all="ignore"):
            g16 = np.asarray(g).astype(np.float16).astype(np.float64)
        ratio = worst_ratio(g16, e.astype(np.float64), *tolerance(operator, e.dtype)[:2])
        floors[out.name] = (round(ratio, 4), np.asarray(g, dtype=e.dtype))
    return floors


def dumps(meta):
    """JSON with one key a line and each list of numbers (a shape) on one line."""
    text = json.dumps(meta, indent=1)

    def one_line(m):
        return "[" + ", ".join(t for t in re.split(r"[\s,]+", m.group(1)) if t) + "]"

    return re.sub(r"\[([-0-9.,\s]*)\]", one_line, text) + "\n"


def write(args):
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.case.node import collect_testcases
    from onnx.reference import ReferenceEvaluator

    wanted = args.ops.split(",") if args.ops else OPERATORS
    unknown = [o for o in wanted if o not in OPERATORS]
    if unknown:
        sys.exit(f"--ops names {', '.join(unknown)}, not among {', '.join(OPERATORS)}")
    # Collecting runs every operator's case generator; some (Cast, ReduceLogSum) warn on purpose.
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    chosen = sorted(
        (c for c in cases if len(c.model.graph.node) == 1 and c.model.graph.node[0].op_type in wanted),
        key=lambda c: c.name,
    )
    if args.cases:
        names = args.cases.split(",")
        missing = sorted(set(names) - {c.name for c in chosen})
        if missing:
            sys.exit(f"--cases names {', '.join(missing)}, not a one-node case of the operators")
        chosen = [c for c in chosen if c.name in names]
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    for case in chosen:
        model = onnx.ModelProto()
        model.CopyFrom(case.model)
        graph, node = model.graph, model.graph.node[0]
        ins, outs = case.data_sets[0]
        arrays = {vi.name: as_array(a) for vi, a in zip(graph.input, ins)}
        expected = [as_array(a) for a in outs]
        operator = node.op_type
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        inits = initializer_names(node, arrays)
        kept = [vi for vi in graph.input if vi.name not in inits]
        del graph.input[:]
        graph.input.extend(kept)
        for name in sorted(inits):
            graph.initializer.append(numpy_helper.from_array(arrays[name], name))
        onnx.checker.check_model(model)

        # The rewritten model must still give ONNX's expected outputs.
        feeds = {vi.name: arrays[vi.name] for vi in graph.input}
        with np.errstate(all="ignore"):
            got = ReferenceEvaluator(model).run(None, feeds)
        for o, e, g in zip(graph.output, expected, got):
            if not np.allclose(np.asarray(g, dtype=np.float64), e.astype(np.float64), rtol=1e-4, atol=1e-6, equal_nan=True):
                sys.exit(f"{case.name}: the model with initializers does not reproduce output {o.name}")

        out = root / case.name
        if out.exists():
            shutil.rmtree(out)
        (out / "inputs").mkdir(parents=True)
        (out / "expected").mkdir()
        onnx.save(model, out / "model.onnx")
        inputs = []
        for vi in case.model.graph.input:
            a = arrays[vi.name]
            entry = {"name": vi.name, "shape": list(a.shape), "dtype": str(a.dtype)}
            if vi.name in inits:
                entry["role"] = "initializer"
            else:
                entry["role"] = "input"
                entry["file"] = f"inputs/{sanitized(vi.name)}.npy"
                np.save(out / entry["file"], np.ascontiguousarray(a))
            inputs.append(entry)
        floors = f16_floor(case.model, arrays, expected, operator)
        outputs = []
        for o, e in zip(graph.output, expected):
            rtol, atol, why = tolerance(operator, e.dtype)
            floor, on_cast = floors[o.name]
            entry = {
                "name": o.name,
                "shape": list(e.shape),
                "dtype": str(e.dtype),
                "file": f"expected/{sanitized(o.name)}.npy",
                "device_file": f"{sanitized(o.name)}.npy",
                "rtol": rtol,
                "atol": atol,
                "f16_floor": floor,
            }
            np.save(out / entry["file"], np.ascontiguousarray(e))
            if floor is not None and floor > 1:
                # ONNX's float32 expectation is out of f16's reach: compare with the reference's
                # output on the inputs the device receives, and keep ONNX's file beside it.
                entry["onnx_file"] = entry["file"]
                entry["file"] = f"expected/{sanitized(o.name)}.cast.npy"
                np.save(out / entry["file"], np.ascontiguousarray(on_cast))
            outputs.append(entry)
        rtol, atol, why = tolerance(operator, expected[0].dtype)
        notes = []
        constant = not kept
        if constant:
            notes.append("every operand is an initializer: the outputs are constant")
        if any(0 in a.shape for a in arrays.values()):
            notes.append("a zero-size operand")
        if any((f or 0) > 1 for f, _ in floors.values()):
            notes.append(
                "the f16 floor exceeds the tolerance (an exact f16 device misses ONNX's expectation): "
                "compared with the reference on the f16-cast inputs instead (`file`; ONNX's is `onnx_file`)"
            )
        meta = {
            "case": case.name,
            "operator": operator,
            "opset": opset,
            "onnx": onnx.__version__,
            "inputs": inputs,
            "outputs": outputs,
            "tolerance": {"rtol": rtol, "atol": atol, "reason": why},
            "constant_outputs": constant,
            "notes": notes,
        }
        (out / "case.json").write_text(dumps(meta))
    print(f"cases={len(chosen)} operators={len({c.model.graph.node[0].op_type for c in chosen})} dir={root}")


# ------------------------------------------------------------------------------------------ compare

def worst_ratio(device, expected, rtol, atol):
    """The largest |device - expected| / (atol + rtol*|expected|) over finite pairs; inf where a NaN or
    an infinity is not matched (or where the allowance is 0 and the values differ)."""
    nan_e, nan_d = np.isnan(expected), np.isnan(device)
    if np.any(nan_e != nan_d):
        return float("inf")
    inf_e = np.isinf(expected)
    if np.any(inf_e != np.isinf(device)) or np.any(device[inf_e] != expected[inf_e]):
        return float("inf")
    finite = ~(nan_e | inf_e)
    if not np.any(finite):
        return 0.0
    diff = np.abs(device[finite] - expected[finite])
    allowance = atol + rtol * np.abs(expected[finite])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(diff == 0, 0.0, diff / allowance)
    return float(np.max(ratio))


def compare(device, expected, rtol, atol):
    """(passes, max abs error, max relative error, elements beyond the tolerance) of one output."""
    d = device.astype(np.float64)
    e = expected.astype(np.float64)
    ratio_ok = worst_ratio(d, e, rtol, atol) <= 1.0
    finite = np.isfinite(d) & np.isfinite(e)
    diff = np.abs(d - e)
    with np.errstate(divide="ignore", invalid="ignore"):
        beyond = int(np.sum(~(diff <= atol + rtol * np.abs(e)) & ~(np.isnan(d) & np.isnan(e)) & ~(d == e)))
        max_abs = float(np.max(diff[finite])) if np.any(finite) else 0.0
        rel = diff[finite] / np.maximum(np.abs(e[finite]), np.finfo(np.float32).tiny)
        max_rel = float(np.max(rel)) if rel.size else 0.0
    return ratio_ok, max_abs, max_rel, beyond


# ---------------------------------------------------------------------------------------------- run

def first_error(stderr, *paths):
    """The first `error:` line (else the last line), with `paths` cut out so reasons do not depend on
    where the cases or the scratch folder are."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip()]
    line = next((l for l in lines if l.startswith(("error:", "Error:"))), lines[-1] if lines else "(no message)")
    for p in paths:
        line = line.replace(f"{p}/", "")
    return line


def crashed(proc):
    if proc.returncode < 0:
        return f"killed by signal {-proc.returncode}"
    for l in proc.stderr.splitlines():
        if "panicked" in l:
            return l.strip()
    return None


def step(cmd, cwd, env, timeout):
    """Runs one CLI step: (CompletedProcess or None, error text or None)."""
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout), None
    except subprocess.TimeoutExpired:
        return None, f"`{cmd[1]}` timed out after {timeout:g} s"
    except OSError as e:
        return None, f"`{cmd[1]}` could not start: {e}"


def run_case(case_dir, meta, binary, scratch, timeout):
    """One case: its status, reason and per-output figures."""
    work = scratch / meta["case"]
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    env = dict(os.environ, IPU_CODEGEN_CACHE=str(scratch / "cache"), IPU_CODEGEN_STAGES=str(scratch / "stages"), RUST_LOG="warn")
    graph_inputs = [i for i in meta["inputs"] if i["role"] == "input"]
    spec = work / f"{meta['case']}.toml"
    cmd = [str(binary), "import", str(case_dir / "model.onnx")]
    for i in graph_inputs:
        cmd += ["--shape", f"{i['name']}={'x'.join(str(d) for d in i['shape'])}"]
    cmd += ["-o", str(spec)]
    proc, fault = step(cmd, work, env, timeout)
    if fault:
        return "error", fault, []
    if (why := crashed(proc)):
        return "error", f"import crashed: {why}", []
    if proc.returncode != 0:
        return "unsupported", first_error(proc.stderr, case_dir, work), []

    out_dir = work / "out"
    cmd = [str(binary), "run", str(spec), "--output-dir", str(out_dir)]
    for i in graph_inputs:
        cmd += ["--input", f"{i['name']}={(case_dir / i['file']).resolve()}"]
    proc, fault = step(cmd, work, env, timeout)
    if fault:
        return "error", fault, []
    if (why := crashed(proc)):
        return "error", f"run crashed: {why}", []
    if proc.returncode != 0:
        if "hardwareTest=FAIL" in proc.stdout:
            line = next(l for l in proc.stdout.splitlines() if "hardwareTest=FAIL" in l)
            return "failed", f"device fault: {line.strip()}", []
        if "hardwareTest=" not in proc.stdout and not out_dir.exists():
            return "unsupported", first_error(proc.stderr, case_dir, work), []
        return "failed", f"run exited {proc.returncode}: {first_error(proc.stderr, case_dir, work)}", []

    figures, problems = [], []
    for o in meta["outputs"]:
        expected = np.load(case_dir / o["file"])
        path = out_dir / o["device_file"]
        if not path.exists():
            problems.append(f"output {o['name']} not written")
            continue
        device = np.load(path)
        if list(device.shape) != list(expected.shape):
            problems.append(f"output {o['name']} has shape {list(device.shape)}, expected {list(expected.shape)}")
            continue
        ok, max_abs, max_rel, beyond = compare(device, expected, o["rtol"], o["atol"])
        figures.append({"name": o["name"], "max_abs": max_abs, "max_rel": max_rel, "beyond": beyond, "elements": int(expected.size), "pass": ok})
        cast = " against the reference on f16-cast inputs" if "onnx_file" in o else ""
        if not ok:
            problems.append(
                f"output {o['name']}: {beyond} of {expected.size} elements beyond rtol {o['rtol']:g} atol {o['atol']:g}, "
                f"max abs {max_abs:.3g}, max rel {max_rel:.3g}{cast}"
            )
    if problems:
        return "failed", "; ".join(problems), figures
    worst = max((f["max_abs"] for f in figures), default=0.0)
    cast = " (against the reference on f16-cast inputs)" if any("onnx_file" in o for o in meta["outputs"]) else ""
    return "passed", f"max abs {worst:.3g}{cast}", figures


def load_cases(root):
    cases = []
    for case_json in sorted(Path(root).glob("*/case.json")):
        cases.append((case_json.parent, json.loads(case_json.read_text())))
    if not cases:
        sys.exit(f"no cases in {root} (run `write` first)")
    return cases


STATUSES = ["passed", "failed", "unsupported", "error"]


def markdown(results):
    ops = sorted({r["operator"] for r in results}, key=OPERATORS.index)
    lines = ["| operator | cases | passed | failed | unsupported | error |", "|---|---:|---:|---:|---:|---:|"]
    totals = dict.fromkeys(STATUSES, 0)
    for op in ops:
        mine = [r for r in results if r["operator"] == op]
        counts = {s: sum(r["status"] == s for r in mine) for s in STATUSES}
        for s in STATUSES:
            totals[s] += counts[s]
        lines.append(f"| {op} | {len(mine)} | " + " | ".join(str(counts[s]) for s in STATUSES) + " |")
    lines.append(f"| **all** | {len(results)} | " + " | ".join(str(totals[s]) for s in STATUSES) + " |")
    lines += ["", "| case | operator | opset | status | reason |", "|---|---|---:|---|---|"]
    for r in results:
        reason = r["reason"].replace("|", "\\|").replace("`", "'")
        if r["constant_outputs"]:
            reason += " (constant outputs)"
        status = f"**{r['status']}**" if r["status"] in ("failed", "error") else r["status"]
        lines.append(f"| {r['case']} | {r['operator']} | {r['opset']} | {status} | {reason} |")
    lines += ["", tolerance_table()]
    return "\n".join(lines)


def tolerance_table():
    """TOLERANCES as a markdown table, operators in OPERATORS' order."""
    lines = ["| operator | rtol | atol | why |", "|---|---:|---:|---|"]
    for op in ["default", *OPERATORS]:
        rtol, atol, why = TOLERANCES.get(op, TOLERANCES["default"])
        lines.append(f"| {op} | {rtol:g} | {atol:g} | {why.replace('|', chr(92) + '|')} |")
    rtol, atol, why = INTEGER_TOLERANCE
    lines.append(f"| integer or bool output | {rtol:g} | {atol:g} | {why} |")
    return "\n".join(lines) + "\n"


def run(args):
    binary = Path(args.bin).resolve()
    cases = load_cases(args.dir)
    scratch = Path(args.scratch).resolve() if args.scratch else Path(tempfile.mkdtemp(prefix="onnx-conformance-"))
    scratch.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for case_dir, meta in cases:
            start = time.monotonic()
            status, reason, figures = run_case(case_dir.resolve(), meta, binary, scratch, args.timeout)
            results.append({
                "case": meta["case"], "operator": meta["operator"], "opset": meta["opset"], "status": status,
                "reason": reason, "outputs": figures, "constant_outputs": meta["constant_outputs"],
                "seconds": round(time.monotonic() - start, 2),
            })
            line = f"{status:<11} {meta['case']}: {reason}"
            print(("!!! " + line) if status == "error" else line, file=sys.stderr if status == "error" else sys.stdout, flush=True)
    finally:
        if not args.scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    table = markdown(results)
    print()
    print(table.split("\n\n")[0])
    if args.json:
        Path(args.json).write_text(json.dumps({"binary": str(binary), "results": results}, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(table)
    bad = [r for r in results if r["status"] in ("failed", "error")]
    errors = [r for r in results if r["status"] == "error"]
    if errors:
        print(f"\n!!! {len(errors)} case(s) crashed or timed out: " + ", ".join(r["case"] for r in errors), file=sys.stderr)
    counts = " ".join(f"{s}={sum(r['status'] == s for r in results)}" for s in STATUSES)
    print(f"onnxConformance cases={len(results)} {counts} {'FAIL' if bad else 'PASS'}")
    sys.exit(1 if bad else 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write the cases")
    w.add_argument("dir")
    w.add_argument("--ops", help="comma-separated operators (default: all of OPERATORS)")
    w.add_argument("--cases", help="comma-separated case names (default: every case of the operators)")
    r = sub.add_parser("run", help="import, run and compare every case")
    r.add_argument("dir")
    r.add_argument("--bin", required=True, help="the ipu-codegen binary")
    r.add_argument("--json")
    r.add_argument("--markdown")
    r.add_argument("--scratch", help="keep the scratch folder (store, stages, specs, outputs) here")
    r.add_argument("--timeout", type=float, default=120.0, help="seconds per import or run (default 120)")
    args = parser.parse_args()
    {"write": write, "run": run}[args.command](args)


if __name__ == "__main__":
    main()
