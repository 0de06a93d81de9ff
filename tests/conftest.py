"""pytest's hooks and fixtures for the whole suite, and nothing else: what test modules import
(ROOT, run_script, notebook, ...) is in tests/helpers.py, so that this file reads as the
suite's plugin and a helper has one home (tests/test_structure.py checks the imports)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, SUITES_DIR, stderr_outputs, suite_group


def _restore(saved: dict) -> None:
    if dict(os.environ) != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(autouse=True, scope="module")
def _module_environment_restored():
    """A module leaves ``os.environ`` as it found it: what its module-scoped fixtures set
    (a cluster they start) is undone after their teardown (autouse fixtures are set up
    first in their scope, and so torn down last)."""
    saved = dict(os.environ)
    yield
    _restore(saved)


@pytest.fixture(autouse=True)
def _environment_restored():
    """Every test leaves ``os.environ`` as it found it. ``LocalCluster.start()`` sets
    ``TF_GRPC_DEFAULT_OPTIONS`` in the process that calls it (``apply_grpc_options``), and
    every process a later test starts on the same xdist worker (a notebook's kernel, a
    server) would inherit it: notebook 11b's frozen worker was then ended by gRPC keepalive
    ("ping timeout", ~2 s) instead of the heartbeat that the notebook teaches and asserts."""
    saved = dict(os.environ)
    yield
    _restore(saved)


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def fresh_scorecard():
    """An empty lab scorecard (dtf.checks) before and after the test."""
    from dtf import checks

    checks.reset()
    yield
    checks.reset()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Markers and xdist groups, before ``-m`` selects (hence ``tryfirst``).

    - nbval's cells of a notebook are marked ``notebook`` and share one xdist group: they run
      in one kernel, in order, on one worker.
    - Every other test without its own ``xdist_group`` joins its module's group, so that
      ``--dist loadgroup`` sets up a module's fixtures (clusters, launchers) once, as
      ``--dist loadfile`` did, while parametrized notebook runs spread over the workers.
    - Tests marked ``notebook`` run first (see the end)."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = Path(str(item.path)).resolve()
        try:
            group = path.relative_to(ROOT).as_posix()
        except ValueError:
            group = path.as_posix()
        if path.suffix == ".ipynb":
            item.add_marker(pytest.mark.notebook)
        item.add_marker(pytest.mark.xdist_group(group))
    # Tests that mostly wait (marked ``waits``: minutes of a gRPC ping limit, a frozen peer)
    # first, so that their wait overlaps the others' work instead of ending the run alone;
    # then whole-notebook runs (10-40 s each); the many short tests last. xdist hands out
    # groups in this order, so the workers end together. The sort is stable: a notebook's
    # cells keep their order.
    items.sort(
        key=lambda item: (
            item.get_closest_marker("waits") is None,
            item.get_closest_marker("notebook") is None,
        )
    )


#: An unmarked test slower than this is named at the end of the run: mark it ``slow``.
FAST_TEST_LIMIT_S = 5.0


def pytest_terminal_summary(terminalreporter):
    """Name the tests that ``make test`` runs (no ``slow``, ``notebook`` or ``root`` marker;
    ``smoke`` marks the one kept on purpose) but whose own run took longer than
    :data:`FAST_TEST_LIMIT_S` (a module fixture's setup, e.g. a lab checker's TensorFlow
    process, is shared by the module and not counted)."""
    total: dict[str, float] = {}
    marked: set[str] = set()
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "call":
                continue
            keywords = getattr(report, "keywords", {}) or {}
            if {"slow", "notebook", "root", "smoke"} & set(keywords):
                marked.add(report.nodeid)
            total[report.nodeid] = total.get(report.nodeid, 0.0) + report.duration
    slow = sorted((s, n) for n, s in total.items() if n not in marked and s > FAST_TEST_LIMIT_S)
    if slow:
        terminalreporter.section("unmarked tests slower than the fast suite allows")
        for seconds, nodeid in reversed(slow):
            grouped = nodeid.rfind("@") > nodeid.rfind("]")  # pytest-xdist appends "@group"
            name = nodeid.rsplit("@", 1)[0] if grouped else nodeid
            terminalreporter.write_line(f"{seconds:6.1f} s  {name}  (mark it slow?)")


# --------------------------------------------------------------------------- stderr, as seen


class _NoStderrUnderNbval:
    """nbval runs every tutorial in a fresh kernel at its default parameters (``notebooks/``
    is a test path): a cell that writes to stderr there fails, as a cell error would.

    Under nbval, ``PYTEST_CURRENT_TEST`` is set in the kernel, and ipykernel then does not
    forward what C code writes to descriptor 2 (TensorFlow's C++ log): this sees Python's
    warnings, logging and prints. The runs through ``tools.nbrun`` (the labs, the tutorials'
    second device count in tests/test_notebook_runs.py) forward both, as JupyterLab does."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        result = yield
        outputs = getattr(item, "test_outputs", None)
        if type(item).__name__ == "IPyNbCell" and outputs:
            cell = {"cell_type": "code", "source": "", "outputs": outputs}
            for found in stderr_outputs([cell]):
                from nbval.plugin import NbCellError

                raise NbCellError(
                    item.cell_num,
                    "the cell wrote to stderr, which JupyterLab shows in a red box: "
                    + found.split(": ", 1)[1],
                    item.cell.source,
                )
        return result


class _KernelStacksOnTimeout:
    """A tutorial's cell that timed out under nbval gets its kernel's thread stacks in its
    report, taken before nbval interrupts the kernel (tests/forked_kernel.py): a kernel stuck
    in C++ or in ipykernel's own threads answers no interrupt, and would leave no trace."""

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = yield
        running = getattr(item.parent, "kernel", None)
        text = getattr(running, "stacks_at_timeout", None)
        if text and call.when == "call":
            from tests.forked_kernel import STACKS_TITLE

            report.sections.append((STACKS_TITLE, text))
            running.stacks_at_timeout = None
        return report


def pytest_configure(config):
    name = config.getoption("--record-suite", None)
    if name and not hasattr(config, "workerinput"):  # an xdist worker has no whole picture
        config.pluginmanager.register(_SuiteRecord(name), "dtf-suite-record")
    if config.pluginmanager.hasplugin("nbval"):
        # Registered as a plugin, not a conftest hook: the notebooks are not under tests/.
        config.pluginmanager.register(_NoStderrUnderNbval(), "dtf-no-stderr-under-nbval")
        config.pluginmanager.register(_KernelStacksOnTimeout(), "dtf-kernel-stacks")
        from tests.forked_kernel import use_in_nbval

        use_in_nbval()  # a tutorial's kernel forked from a process that imported TensorFlow


# --------------------------------------------------------------------------- suite records


def pytest_addoption(parser):
    parser.addoption(
        "--record-suite",
        metavar="NAME",
        help="write build/suites/NAME.json: counts, wall time and seconds per group",
    )


class _SuiteRecord:
    """``--record-suite NAME``: counts, wall time and the seconds of each group of tests
    (:func:`suite_group`), written to ``build/suites/NAME.json`` at the end. Registered on the
    controller only: under xdist it sees every worker's reports."""

    def __init__(self, name: str) -> None:
        self.name, self.start = name, time.monotonic()
        self.groups: dict[str, float] = {}
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        group = suite_group(report.nodeid.rsplit("@", 1)[0])
        self.groups[group] = self.groups.get(group, 0.0) + report.duration
        if report.when == "call" or report.outcome != "passed":
            self.outcomes[report.nodeid] = report.outcome

    def pytest_sessionfinish(self, session, exitstatus):
        config, outcomes = session.config, list(self.outcomes.values())
        record = {
            "suite": self.name,
            "markers": config.getoption("-m", ""),
            "arguments": list(config.invocation_params.args),
            "workers": config.getoption("numprocesses", None),
            "cores": os.cpu_count(),
            # As root, notebooks 13-13c run their namespace cells: a user's run skips them.
            "root": hasattr(os, "geteuid") and os.geteuid() == 0,
            "passed": outcomes.count("passed"),
            "failed": outcomes.count("failed"),
            "skipped": outcomes.count("skipped"),
            "seconds": round(time.monotonic() - self.start, 1),
            "group_seconds": {k: round(v, 1) for k, v in sorted(self.groups.items())},
            "exit_status": int(exitstatus),
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        }
        SUITES_DIR.mkdir(parents=True, exist_ok=True)
        text = json.dumps(record, indent=1) + "\n"
        (SUITES_DIR / f"{self.name}.json").write_text(text, encoding="utf-8")
