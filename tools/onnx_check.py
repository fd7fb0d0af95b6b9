#!/usr/bin/env python3
"""The independent check of a device run: onnxruntime runs the ONNX model on the same inputs, and each
float output the device wrote (DIR/<name>.npy, names sanitized as `run --output-dir` does) is compared
with it: the largest absolute error and the relative RMS error sqrt(sum (d - r)^2) / sqrt(sum r^2).

  onnx_check.py inputs DIR --tokens 128 [--batch 2] [--token-type-ids]
      writes DIR/input_ids.npy and DIR/attention_mask.npy: real sentences in the uncased BERT
      vocabulary MiniLM uses ([CLS] the quick brown fox jumps over the lazy dog [SEP], and for a second
      sequence [CLS] hello world [SEP]), each padded with [PAD] (id 0, mask 0) to --tokens; with
      --token-type-ids also DIR/token_type_ids.npy (all zeros, one segment).
  onnx_check.py compare MODEL.onnx INPUTS_DIR OUTPUTS_DIR [--limit 0.01]
      prints one line per float output and exits 1 when a relative RMS error exceeds --limit.
  onnx_check.py cycles RUN.txt PRESET.txt [--limit 0.02]
      reads the device cycles from the summary lines two `run`s printed and exits 1 when the first
      differs from the second by more than --limit of the second.
"""
import argparse
import re
import sys
from pathlib import Path

import numpy as np

# bert-base-uncased ids: [CLS] the quick brown fox jumps over the lazy dog [SEP]; [CLS] hello world [SEP]
SENTENCES = [
    [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 102],
    [101, 7592, 2088, 102],
]


def sanitized(name):
    return re.sub(r"[^A-Za-z0-9._-]", "_", name)


def inputs(args):
    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    if not 1 <= args.batch <= len(SENTENCES):
        sys.exit(f"--batch {args.batch}: 1 to {len(SENTENCES)} sentences are known")
    if args.tokens < len(SENTENCES[0]):
        sys.exit(f"--tokens {args.tokens} is shorter than the sentence ({len(SENTENCES[0])} tokens)")
    ids = np.zeros((args.batch, args.tokens), dtype=np.int64)
    for b, sentence in enumerate(SENTENCES[: args.batch]):
        ids[b, : len(sentence)] = sentence
    mask = (ids != 0).astype(np.int64)
    np.save(out / "input_ids.npy", ids)
    np.save(out / "attention_mask.npy", mask)
    if args.token_type_ids:
        np.save(out / "token_type_ids.npy", np.zeros_like(ids))
    real = ",".join(str(len(s)) for s in SENTENCES[: args.batch])
    print(f"inputs={out} batch={args.batch} tokens={args.tokens} realTokens={real}")


def compare(args):
    import onnxruntime as ort

    session = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    feeds = {i.name: np.load(Path(args.inputs) / f"{i.name}.npy") for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feeds)
    failed = False
    compared = 0
    for name, reference in zip(names, results):
        path = Path(args.outputs) / f"{sanitized(name)}.npy"
        if reference.dtype.kind != "f" or not path.exists():
            continue
        device = np.load(path).astype(np.float64)
        reference = reference.astype(np.float64)
        if device.shape != reference.shape:
            print(f"onnxruntimeCheck output={name} shape={list(device.shape)} expected={list(reference.shape)} FAIL")
            failed = True
            continue
        diff = device - reference
        worst = float(np.max(np.abs(diff)))
        relative = float(np.sqrt(np.sum(diff * diff)) / max(np.sqrt(np.sum(reference * reference)), 1e-300))
        verdict = "PASS" if relative <= args.limit else "FAIL"
        failed |= verdict == "FAIL"
        compared += 1
        print(
            f"onnxruntimeCheck output={name} elements={reference.size} maxAbsoluteError={worst:.6f} "
            f"relativeRmsError={relative:.6f} limit={args.limit} {verdict}"
        )
    if compared == 0:
        print("onnxruntimeCheck: no float output of the model was found in", args.outputs)
        failed = True
    sys.exit(1 if failed else 0)


def run_cycles(path):
    found = [int(m.group(1)) for line in open(path) for m in [re.search(r"(?:^| )cycles=(\d+)", line)] if m]
    if not found:
        sys.exit(f"{path}: no line with cycles=N (a `run` summary)")
    return found[-1]


def cycles(args):
    model, preset = run_cycles(args.model_run), run_cycles(args.preset_run)
    ratio = model / preset
    verdict = "PASS" if abs(ratio - 1) <= args.limit else "FAIL"
    print(f"presetCheck cycles={model} presetCycles={preset} ratio={ratio:.4f} limit={args.limit} {verdict}")
    sys.exit(0 if verdict == "PASS" else 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inputs")
    p.add_argument("dir")
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--token-type-ids", action="store_true")
    p.set_defaults(run=inputs)
    p = sub.add_parser("compare")
    p.add_argument("model")
    p.add_argument("inputs")
    p.add_argument("outputs")
    p.add_argument("--limit", type=float, default=0.01)
    p.set_defaults(run=compare)
    p = sub.add_parser("cycles")
    p.add_argument("model_run", metavar="RUN.txt")
    p.add_argument("preset_run", metavar="PRESET.txt")
    p.add_argument("--limit", type=float, default=0.02)
    p.set_defaults(run=cycles)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
