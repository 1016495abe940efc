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

.PHONY: setup demo test test-all docs docs-serve doctor schema lock llama-wheel rebuild-llama flite clean

$(STAMP): pyproject.toml $(LOCK) $(NODEPS)
	@echo "[1/4] creating $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) install pip==$(PIP_VERSION)
	@# The compile (CPU) and the installs (network, disk) overlap: about 3 minutes less on 2 cores.
	@echo "[2/4] compiling llama.cpp $(LLAMA_VERSION) for any AVX2 x86-64 CPU, in the background (log: $(VENV)/llama-build.log)"
	@echo "[3/4] installing the locked environment ($(LOCK)), about 2 minutes"
	@# $(NODEPS): the embedded simulator's model file, and moshi for the trainer, both declare
	@# dependencies we do not need (moshi pins torch<2.10 and huggingface-hub<1.0; see pyproject.toml).
	@grep -v '^llama-cpp-python==' $(LOCK) > $(VENV)/lock-without-llama.txt
	@$(MAKE) --no-print-directory llama-wheel > $(VENV)/llama-build.log 2>&1 & llama=$$!; \
	  $(PIP) install -r $(VENV)/lock-without-llama.txt && $(PIP) install --no-deps -e . \
	  && $(PIP) install --no-deps -r $(NODEPS) || { kill $$llama 2>/dev/null; exit 1; }; \
	  echo "      waiting for the llama.cpp compile"; \
	  wait $$llama || { tail -n 40 $(VENV)/llama-build.log; echo "llama.cpp did not compile (whole log: $(VENV)/llama-build.log)"; exit 1; }
	@$(PIP) install --no-deps $(WHEELS)/llama_cpp_python-*.whl
	@$(MAKE) --no-print-directory flite
	@echo "[4/4] kame-data is installed in $(VENV)"
	@touch $(STAMP)

setup: $(STAMP)

# flite, an optional TTS engine (rms in the default user pool; awb, rms, slt, kal in `speakers`), is a Debian
# package, not a wheel: installed here where this user may (root, apt-get); elsewhere a note, never a
# failure (the pool goes without those voices and says so; `kame-data doctor` shows the row).
flite:
	@if command -v flite >/dev/null 2>&1 || ldconfig -p 2>/dev/null | grep -q 'libflite\.so'; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "      installing the optional TTS engine flite (Debian package)"; \
	  { apt-get install -y -qq flite >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq flite >/dev/null 2>&1; }; } \
	    || echo "note: could not install flite (optional): the voice pools go without awb, rms, slt and kal"; \
	else echo "note: flite (optional, Debian: sudo apt-get install flite) is not installed: the voice pools go without awb, rms, slt and kal"; fi

# Never from pip's cache: a cached wheel may have been compiled for another CPU.
# The Python package loads libllama and ggml only, but its CMakeLists forces llama.cpp's `common`
# library on (chat templates, argument parsing, an HTTP client: 52 of 135 compile units, half the
# compile time); the build below turns it off. Where a release no longer has that line it builds as is.
LLAMA_SRC := $(VENV)/llama-src
llama-wheel:
	@rm -rf $(WHEELS) $(LLAMA_SRC) && mkdir -p $(LLAMA_SRC)
	$(PIP) download --no-cache-dir --no-deps --no-binary :all: -d $(LLAMA_SRC) llama-cpp-python==$(LLAMA_VERSION)
	tar -xzf $(LLAMA_SRC)/llama_cpp_python-$(LLAMA_VERSION).tar.gz -C $(LLAMA_SRC)
	@f=$(LLAMA_SRC)/llama_cpp_python-$(LLAMA_VERSION)/CMakeLists.txt; \
	  if grep -q 'set(LLAMA_BUILD_COMMON ON CACHE' $$f; then sed -i 's/set(LLAMA_BUILD_COMMON ON CACHE/set(LLAMA_BUILD_COMMON OFF CACHE/' $$f; \
	  else echo "note: $$f no longer forces llama.cpp's common library on; building it unchanged"; fi
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel --no-cache-dir --no-deps -w $(WHEELS) $(LLAMA_SRC)/llama_cpp_python-$(LLAMA_VERSION)

rebuild-llama:
	@echo "compiling llama.cpp $(LLAMA_VERSION) for any AVX2 x86-64 CPU (about 3 minutes on 2 cores)"
	@$(MAKE) --no-print-directory llama-wheel
	$(PIP) install --force-reinstall --no-deps $(WHEELS)/llama_cpp_python-*.whl

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

# The docs site (mkdocs.yml, pages in docs/) into site/ (ignored). --strict: a broken link, a missing
# anchor or a page outside the navigation fails. The reference pages are generated from the code at
# every build (docs/scripts/), so none can be stale. The two variables quiet notices printed by the
# mkdocs packages themselves about mkdocs 2, which are not warnings about this site.
DOCS_ENV := NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true
docs: setup
	$(DOCS_ENV) $(BIN)/mkdocs build --strict --site-dir site

docs-serve: setup
	$(DOCS_ENV) $(BIN)/mkdocs serve --strict

# Re-resolve the locks from pyproject.toml's ranges (plus requirements/pins.in) and strip local
# version labels (torch 2.13.0+cpu -> 2.13.0), so the locks name releases, not one machine's files.
lock: setup
	@$(PIP) install pip-tools==7.6.2
	$(BIN)/pip-compile -q --strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
	    -o requirements/core.lock pyproject.toml
	$(BIN)/pip-compile -q --strip-extras --no-emit-index-url --no-emit-find-links --no-emit-trusted-host \
	    --extra tts,qa,llm,dev,train,acoustics,variants,docs -o $(LOCK) pyproject.toml requirements/pins.in
	sed -i -E 's/^([A-Za-z0-9_.-]+==[^+ ]+)\+[A-Za-z0-9.]+/\1/' requirements/core.lock $(LOCK)

clean:
	rm -rf $(VENV) out build dist site *.egg-info
