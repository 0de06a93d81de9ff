# Distributed TensorFlow, hands-on. Every target creates .venv on first use.
#   make run     execute every notebook and lab solution headless, report in build/
#   make test    the whole test suite (unit, structure, notebooks via nbval, labs)
#   make lab     JupyterLab on this folder, bound to localhost, README open, no pop-ups
#   make outputs re-execute the tutorial notebooks in place (fresh stored outputs)
#   make labs    regenerate the student labs from labs/solutions
# GPU machine: add GPU=1 to any target (uses .venv-gpu and requirements-gpu.txt).
# Extra arguments: ARGS="..." (e.g. make run ARGS="-p EPOCHS 1 -k 03").

PYTHON ?= python3
# Pythons that can install the pins (keep in step with requires-python in pyproject.toml;
# tests/test_environment_files.py checks it). tools/check_platforms.py proves it per platform.
PYTHON_MIN := 3.11
PYTHON_MAX := 3.13
# One clear message, before anything is created or downloaded, when an interpreter cannot
# install the pins: $(call check_python,INTERPRETER,WHAT TO DO). Plain Python 2/3 syntax and
# no single quotes, so any python prints it; a missing interpreter gets its own message.
check_python = { command -v $(1) >/dev/null 2>&1 || { \
  echo "make: $(1) not found. $(2)" >&2; exit 1; }; }; \
  $(1) -c 'import platform, sys; \
  v = sys.version_info; lo = tuple(map(int, "$(PYTHON_MIN)".split("."))); \
  hi = tuple(map(int, "$(PYTHON_MAX)".split("."))); \
  who = "$(1) (%s) is Python %d.%d.%d" % (sys.executable, v[0], v[1], v[2]); \
  old = not (lo <= tuple(v[:2]) <= hi); \
  intel = sys.platform == "darwin" and platform.machine() == "x86_64"; \
  sys.exit(("make: %s, which this course does not support: it needs Python $(PYTHON_MIN) to \
$(PYTHON_MAX) (TensorFlow 2.21 and the pinned packages have no wheels for other versions). \
$(2)" % who) if old else ("make: %s for Intel (x86-64) macOS: $(INTEL_MAC), so nothing can \
be installed. On Apple silicon use an arm64 Python, not one under Rosetta; on an Intel Mac use \
a Linux machine or container, or a cloud notebook (README.md, Installing)." % who) if intel \
else 0)'
INTEL_MAC := TensorFlow has no macOS x86-64 (Intel Mac) wheel after 2.16, and the course needs 2.21
INSTALL_HINT := Install Python $(PYTHON_MIN) to $(PYTHON_MAX) and name it, e.g. make PYTHON=python$(PYTHON_MIN) run \
(Ubuntu 22.04: sudo apt install python$(PYTHON_MIN) python$(PYTHON_MIN)-venv; any system: \
conda env create -f environment.yml). See README.md, Installing.
VENV_HINT = $(VENV) was made by an earlier attempt with it: delete $(VENV), then run make \
again with a supported Python, e.g. make PYTHON=python$(PYTHON_MIN) run.
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
	@if test -x $(PY); then $(call check_python,$(PY),$(VENV_HINT)); \
	  else $(call check_python,$(PYTHON),$(INSTALL_HINT)); fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar off -r $(REQUIREMENTS) -e .
	touch $@

venv: $(STAMP)

run: $(STAMP)
	$(PY) tools/run_notebooks.py $(ARGS)

test: $(STAMP)
	$(PY) -m pytest -n 2 --dist loadfile $(ARGS)

# The course's JupyterLab settings (no news or update pop-ups, README rendered), then JupyterLab
# on localhost with the README open.
lab: $(STAMP)
	$(PY) tools/lab_settings.py
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(ARGS) README.md

outputs: $(STAMP)
	$(PY) tools/execute_in_place.py $(ARGS)

labs: $(STAMP)
	$(PY) tools/make_labs.py $(ARGS)

lint: $(STAMP)
	$(PY) -m ruff check src tools tests
	$(PY) -m ruff format --check src tools tests

clean:
	rm -rf build
