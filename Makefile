# archbench: `make demo` runs the main job, `make test` the tests; both install what is missing first.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
ARCHBENCH := $(VENV)/bin/archbench
# Open MPI refuses root unless told; the tests and the demo run as root on a fresh machine.
export OMPI_ALLOW_RUN_AS_ROOT := 1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM := 1
export TF_CPP_MIN_LOG_LEVEL := 2
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
PYTEST_ARGS ?=

.PHONY: setup demo test lint clean

setup:
	@bash scripts/setup.sh

# The demo's cluster is calibrated first (reused while it holds one of this kind of cluster), so
# `archbench model validate runs/demo/` prices its runs from measured terms.
demo: setup
	$(ARCHBENCH) microbench --study runs/demo.yaml
	$(ARCHBENCH) sweep runs/demo.yaml
	$(ARCHBENCH) report runs/demo/

test: setup
	$(PYTHON) -m pytest -ra $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf runs/*/ .pytest_cache
