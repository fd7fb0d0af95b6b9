#!/usr/bin/env bash
# `make onnx-conformance`: ONNX's backend node tests for the operators tools/onnx_conformance.py names,
# written to target/onnx-conformance/cases, imported and run through the CLI, compared, and tabled in
# target/onnx-conformance/table.md (and results.json). Exits non-zero when a case fails or errors.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ipu-codegen}
DIR=${CONFORMANCE_DIR:-target/onnx-conformance}
ONNX_VERSION=1.23.2   # the cases are the onnx package's: another version writes other cases
mkdir -p "$DIR"
# Python with numpy and onnx: the system's when it has them, else a virtual environment here.
PY=${PYTHON:-python3}
if ! "$PY" -c "import numpy, onnx" >/dev/null 2>&1; then
  if [ ! -x "$DIR/venv/bin/python" ]; then
    python3 -m venv "$DIR/venv" || { echo "make onnx-conformance: python3 -m venv failed (install python3-venv)" >&2; exit 1; }
  fi
  PY="$DIR/venv/bin/python"
  "$PY" -c "import numpy, onnx" >/dev/null 2>&1 || "$PY" -m pip install -q numpy "onnx==$ONNX_VERSION"
fi
rm -rf "$DIR/cases"
"$PY" tools/onnx_conformance.py write "$DIR/cases" ${ONNX_OPS:+--ops "$ONNX_OPS"}
"$PY" tools/onnx_conformance.py run "$DIR/cases" --bin "$BIN" \
  --json "$DIR/results.json" --markdown "$DIR/table.md" --scratch "$DIR/scratch"
