# Distributed TensorFlow, hands-on. `make help` prints the `## ` lines below and the `## `
# text on each target's line: a target without one is missing there (tests/test_makefile.py).
## Usage: make TARGET [GPU=1] [PYTHON=python3.11] [ARGS="..."]
##   GPU=1       on a GPU machine: .venv-gpu and requirements-gpu.txt instead of .venv
##   PYTHON=...  the interpreter that creates the venv (a Python that pyproject.toml allows)
##   ARGS="..."  extra arguments, e.g. make run ARGS="-p EPOCHS 1 -k 03"
## Targets (all but help and clean create the venv on first use):

PYTHON ?= python3
# The Pythons that can install the pins, written once: pyproject.toml's [tool.dtf.pins]
# python = ">=3.X,<3.Y" gives 3.X to 3.(Y-1) here (awk, as make must work before any Python
# is known to be usable). tools/check_platforms.py reads the same line and proves it per platform.
PYTHON_RANGE := $(shell awk -F'"' '{ sub(/\r$$/, ""); sub(/[ \t]+#.*$$/, "") } \
  /^\[/ { pins = ($$0 == "[tool.dtf.pins]") } \
  pins && $$1 ~ /^python *= *$$/ && $$2 ~ /^>=3\.[0-9]+,<3\.[0-9]+$$/ \
  { split($$2, v, /[^0-9]+/); print v[2] "." v[3], v[4] "." v[5] - 1 }' pyproject.toml)
PYTHON_MIN := $(word 1,$(PYTHON_RANGE))
PYTHON_MAX := $(word 2,$(PYTHON_RANGE))
ifeq ($(PYTHON_MAX),)
$(error pyproject.toml: [tool.dtf.pins] needs a line python = ">=3.X,<3.Y")
endif
# One clear message, before anything is created or downloaded, when an interpreter cannot
# install the pins: $(call check_python,INTERPRETER,WHAT TO DO). tools/check_python.py runs
# under any Python 2.7 or 3.x; a missing interpreter gets its own message.
check_python = { command -v $(1) >/dev/null 2>&1 || { \
  echo "make: $(1) not found. $(2)" >&2; exit 1; }; }; \
  $(1) tools/check_python.py '$(1)' $(PYTHON_MIN) $(PYTHON_MAX) '$(2)'
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
# The test and lint tools (requirements-dev.txt), installed only for the targets that need
# them: run, lab, outputs and labs never install pytest, ruff or uv.
DEV_STAMP := $(VENV)/.installed-requirements-dev.txt

.PHONY: help venv dev run test check counts netns lab outputs labs measurements export lint site clean

help: ## list the targets and options (this text)
	@sed -n 's/^## //p' $(firstword $(MAKEFILE_LIST))
	@grep -E '^[a-z]+:.*## ' $(firstword $(MAKEFILE_LIST)) | \
	  awk 'BEGIN { FS = ":.*## " } !seen[$$1]++ { printf "  %-8s %s\n", $$1, $$2 }'

$(STAMP): $(REQUIREMENTS) requirements-common.txt pyproject.toml
	@if test -x $(PY); then $(call check_python,$(PY),$(VENV_HINT)); \
	  else $(call check_python,$(PYTHON),$(INSTALL_HINT)); fi
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar off -r $(REQUIREMENTS) -e .
	touch $@

venv: $(STAMP) ## create .venv and install what the notebooks and labs need

run: $(STAMP) ## execute every notebook and lab solution headless, report in build/
	$(PY) -m tools.run_notebooks $(ARGS)

# Installed with $(REQUIREMENTS) in one pip call, so that pip resolves the two files together.
$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(PY) -m pip install --progress-bar off -r $(REQUIREMENTS) -r requirements-dev.txt
	touch $@

dev: $(DEV_STAMP) ## also install the test and lint tools (requirements-dev.txt, pre-commit)

# Three workers on two cores: many tests wait (servers starting, timeouts waited out, peers
# frozen), so two workers leave the cores idle part of the time. --dist loadgroup keeps a
# notebook's cells, and a module's tests, on one worker (tests/conftest.py). make test leaves
# out what is marked slow, notebook, root or hosted; make check what is marked hosted (a
# simulated Colab runtime: nox -s hosted runs it) or counts (make counts). All need the test tools
# (requirements-dev.txt), and both record their counts and times in build/suites/ for
# docs/measurements.md (make measurements), where every measured time of the course lives.
# --no-loadscope-reorder: pytest-xdist would otherwise hand out the groups with the most tests
# first, which put every whole-notebook run (one test each, 10-40 s) and the waiting tests at
# the end of the run, one worker busy and two idle; tests/conftest.py orders them instead.
PYTEST := $(PY) -m pytest -n 3 --dist loadgroup --no-loadscope-reorder
# The test targets let Python cache compiled modules (__pycache__/, ignored by git) even where
# the shell sets PYTHONDONTWRITEBYTECODE: make check starts hundreds of Python processes (kernels,
# servers, workers, checker processes) that import the course's modules, and each would compile
# them again (docs/measurements.md has make check's time).
test check counts: export PYTHONDONTWRITEBYTECODE =
FAST := not slow and not notebook and not root and not hosted

test: $(DEV_STAMP) ## the fast tests (times: docs/measurements.md): run them after every change
	$(PYTEST) -m "$(FAST)" --record-suite test $(ARGS)

check: $(DEV_STAMP) ## every test but the device-count sweep and root's: nbval, labs, clusters (CI)
	$(PYTEST) -m "not hosted and not counts and not root" --record-suite check $(ARGS)

# The promise that every tutorial runs unchanged on 1 to 8 devices: each one again at another
# count (3, 8 or 1, tests/device_counts.py). A fifth of make check's CPU time when it was part
# of it, so it is a target of its own, like nox -s hosted; CI runs it after make check.
counts: $(DEV_STAMP) ## every tutorial again at another device count (3, 8 or 1; CI runs it)
	$(PYTEST) -m counts --record-suite counts $(ARGS)

# The tests marked root (network namespaces, tests/test_netns.py; notebook 13 with root's
# capabilities dropped) are left out of make check, so that it runs the same tests whoever runs
# it (docs/measurements.md says who ran each suite).
# This runs them as root, through sudo unless make already runs as root (a container, CI), and
# DTF_REQUIRE_NETNS=1 makes a machine that cannot create namespaces fail them instead of
# skipping them: CI runs it after make check.
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
netns: $(DEV_STAMP) ## the tests marked root (network namespaces), as root (through sudo)
	$(SUDO) DTF_REQUIRE_NETNS=1 $(PY) -m pytest -n 3 --dist loadgroup -q -p no:cacheprovider -m root $(ARGS)

# The course's JupyterLab settings (no news or update pop-ups, README rendered), then JupyterLab
# on localhost with the README open.
lab: $(STAMP) ## JupyterLab on this folder, bound to 127.0.0.1, README open, no pop-ups
	$(PY) -m tools.lab_settings
	$(VENV)/bin/jupyter lab --ip=127.0.0.1 $(ARGS) README.md

outputs: $(STAMP) ## re-execute the tutorial notebooks in place (fresh stored outputs)
	$(PY) -m tools.execute_in_place $(ARGS)

labs: $(STAMP) ## regenerate the student labs from labs/solutions
	$(PY) -m tools.make_labs $(ARGS)

measurements: $(STAMP) ## write docs/measurements.md from the last run, test and check records
	$(PY) -m tools.measurements $(ARGS)

export: $(STAMP) ## rewrite dtf/lessons/ from the cells marked # export: dtf/lessons/NAME.py
	$(PY) -m tools.export $(ARGS)

# The course as a website (tools/site.py): Jupyter Book 2 parses the notebooks with their
# stored outputs (nothing is executed; it runs on Node.js, CONTRIBUTING.md names the version),
# our own renderer writes static pages, and a check fails the build on a link that leads
# nowhere. CI builds it on every push and publishes it from main (.github/workflows/site.yml).
site: $(DEV_STAMP) ## the course website in build/site/ (needs Node.js 20; CONTRIBUTING.md)
	$(PY) -m tools.site $(ARGS)

# tools/lint.py defines the lint commands; CI's lint job (.github/workflows/test.yml) and the
# pre-commit hook run this target.
lint: $(DEV_STAMP) ## ruff check, ruff format --check, the import layers, mypy (tools/lint.py)
	$(PY) -m tools.lint

clean: ## remove build/ (executed copies, reports)
	rm -rf build
