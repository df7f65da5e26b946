# Set-up and main jobs. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-kernels test-hf-tf4 lint bench-loop clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned: 2.13.0 is the CPU build; an open range would pull a CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,plot]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/unmask demo

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

# exact results under every CPU kernel set torch offers here, on 1 and 2 threads
test-kernels: $(STAMP)
	$(PY) scripts/test_kernels.py

# The Hugging Face tests under transformers 4.x (the line diffusion LLM folders' code was
# written for); `make test` runs them under the 5.x release the `hf` extra installs.
TF4_VENV := .venv-tf4
TF4_STAMP := $(TF4_VENV)/.installed

$(TF4_STAMP): pyproject.toml
	$(PYTHON) -m venv $(TF4_VENV)
	$(TF4_VENV)/bin/python -m pip install -q torch==2.13.0
	$(TF4_VENV)/bin/python -m pip install -q 'transformers==4.57.6' einops pytest hypothesis \
		'numpy>=1.24' 'safetensors>=0.4' 'numba>=0.58' 'rich>=13'
	touch $(TF4_STAMP)

test-hf-tf4: $(TF4_STAMP)
	PYTHONPATH=src $(TF4_VENV)/bin/python -m pytest -q tests/hf

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts experiments
	$(VENV)/bin/lint-imports

bench-loop: $(STAMP)
	$(PY) benchmarks/decode_loop.py

clean:
	rm -rf $(VENV) $(TF4_VENV) build *.egg-info
