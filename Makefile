# Set-up and common tasks. The pinned CPU torch is installed first so that no
# dependency resolution pulls a CUDA build.
#
# Two environments in one .venv, each installed only when it is out of date: the runtime
# (the pinned torch and `pip install -e .`, all that `make demo` needs; stamp
# $(VENV)/.installed) and the development one (the same with the dev extras: tests, lint,
# docs; stamp $(VENV)/.installed-dev). A stamp is rebuilt when it is missing (a fresh clone,
# a deleted .venv) or older than setup.cfg, pyproject.toml or this Makefile. The dev set-up
# touches both stamps (it installs the runtime too), so `make demo` after `make test`
# installs nothing, and `make test` after `make demo` adds the dev extras to that .venv.
# A second `make demo` or `make test` therefore starts at once. The package is installed
# in editable mode, so changes to its source need no reinstall; `make reinstall` forces one.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed
DEV_STAMP = $(VENV)/.installed-dev

.PHONY: install install-dev reinstall demo test test-fast lint docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip

# a stamp is touched only after its installs succeed, so a failed install is retried
$(STAMP): setup.cfg pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e .
	touch $(STAMP)

# scripts/ensure_postgres.sh adds Debian's PostgreSQL server (the shared-ledger tests start
# one) only where it is missing, and never fails the set-up
$(DEV_STAMP): setup.cfg pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[dev]'
	sh scripts/ensure_postgres.sh
	touch $(STAMP) $(DEV_STAMP)

# the runtime only (what `make demo` uses); install-dev: everything the tests, lint and docs use
install: $(STAMP)

install-dev: $(DEV_STAMP)

reinstall:
	rm -f $(STAMP) $(DEV_STAMP)
	$(MAKE) install-dev

demo: $(STAMP)
	$(BIN)/python -m botorch_dp.demo

test: $(DEV_STAMP)
	$(BIN)/python -m pytest -q

# everything but the tests marked slow (Dask, PostgreSQL, notebooks, subprocesses and other
# long runs): under 90 s on 2 cores, for the edit-test loop; CI runs `make test`
test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# the code checks CI runs next to the tests, each with the project's configuration in
# pyproject.toml: ruff's lint rules, ruff's formatting (check only; `ruff format` applies it) and mypy;
# the python blocks of the docs fit 88 columns (docs/ruff.toml, and the two READMEs here)
lint: $(DEV_STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m ruff format --check .
	$(BIN)/python -m ruff format --check --line-length 88 README.md tutorials/README.md
	$(BIN)/python -m mypy

# the documentation site (docs/, mkdocs.yml) into site/, with every warning an error;
# `$(BIN)/mkdocs serve` previews it
docs: $(DEV_STAMP)
	$(BIN)/python -m mkdocs build --strict

bench: $(DEV_STAMP)
	$(BIN)/python scripts/bench_acquisition.py

clean:
	rm -rf $(VENV) build dist *.egg-info outputs site
