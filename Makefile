# Set-up and common tasks. The pinned CPU torch is installed first so that no
# dependency resolution pulls a CUDA build.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin

.PHONY: install demo test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'

demo: install
	$(BIN)/python -m botorch_dp.demo

test: install
	$(BIN)/python -m pytest -q

bench: install
	$(BIN)/python scripts/bench_acquisition.py

clean:
	rm -rf $(VENV) build dist *.egg-info outputs
