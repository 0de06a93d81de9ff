# Distributed TensorFlow, hands-on. Every target creates .venv on first use.
#   make run     execute every notebook and lab solution headless, report in build/
#   make test    the whole test suite (unit, structure, notebooks via nbval, labs)
#   make lab     JupyterLab on this folder, bound to localhost
#   make outputs re-execute the tutorial notebooks in place (fresh stored outputs)
#   make labs    regenerate the student labs from labs/solutions
# GPU machine: add GPU=1 to any target (uses .venv-gpu and requirements-gpu.txt).
# Extra arguments: ARGS="..." (e.g. make run ARGS="-p EPOCHS 1 -k 03").

PYTHON ?= python3
ifeq ($(GPU),1)
VENV ?= .venv-gpu
REQUIREMENTS ?= requirements-gpu.txt
else
VENV ?= .venv
REQUIREMENTS ?= requirements.txt
endif
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(REQUIREMENTS)

.PHONY: help venv run test lab outputs labs lint clean

help:
	@sed -n '2,9p' Makefile | sed 's/^# \{0,1\}//'

$(STAMP): $(REQUIREMENTS) requirements-common.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar off -r $(REQUIREMENTS) -e .
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(PY) tools/run_notebooks.py $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile $(ARGS)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 --no-browser $(ARGS)

outputs: $(STAMP)
	$(PY) tools/execute_in_place.py $(ARGS)

labs: $(STAMP)
	$(PY) tools/make_labs.py $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check src tools tests
	$(PY) -m ruff format --check src tools tests

clean:
	rm -rf build
