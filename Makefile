# Set-up and main jobs. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow test-kernels lint bench-loop clean

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

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts experiments
	$(VENV)/bin/lint-imports

bench-loop: $(STAMP)
	$(PY) benchmarks/decode_loop.py

clean:
	rm -rf $(VENV) build *.egg-info
