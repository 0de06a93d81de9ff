"""Shared test helpers.

TensorFlow fixes its device layout once per process, so tests of device configuration run
small scripts in fresh Python processes (each import of TensorFlow costs ~3 s: the scripts
check several things at once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}


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


def run_script(
    code: str, timeout: float = 180, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; fail with its output if it exits non-zero."""
    full_env = {**os.environ, **QUIET_ENV, **(env or {})}
    full_env.pop("PYTEST_CURRENT_TEST", None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        pytest.fail(f"script failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def netns_cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m dtf.netns ARGS`` from the repository root, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "dtf.netns", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )


def last_json(proc: subprocess.CompletedProcess):
    """The script's result: the last stdout line, as JSON."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


def notebook(*sources: str, parameters: str | None = None):
    """A Python notebook: a cell tagged ``parameters`` (if given), then one cell per source."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    if parameters is not None:
        cell = nbformat.v4.new_code_cell(parameters)
        cell.metadata["tags"] = ["parameters"]
        nb.cells.append(cell)
    nb.cells.extend(nbformat.v4.new_code_cell(src) for src in sources)
    return nb


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


def stub(*args):
    """What tools/make_labs.py leaves in a student lab (a bare raise means the same)."""
    raise NotImplementedError


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
    # Whole-notebook runs (10-40 s each) first, the many short tests after them: xdist hands
    # out groups in this order, so the workers end together instead of one waiting on the
    # other's last notebook. The sort is stable: a notebook's cells keep their order.
    items.sort(key=lambda item: item.get_closest_marker("notebook") is None)


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


def stderr_outputs(cells) -> list[str]:
    """What a learner sees in red stderr boxes in JupyterLab (warnings, logging, prints to
    stderr), one line per code cell of an executed notebook: ``code cell N ('its first
    line'): the text``. ``cells``: nbformat nodes or the notebook's JSON dicts."""
    found = []
    code = [c for c in cells if c["cell_type"] == "code"]
    for number, cell in enumerate(code, 1):
        text = "".join(
            out.get("text", "")
            for out in cell.get("outputs", [])
            if out.get("output_type") == "stream" and out.get("name") == "stderr"
        )
        if text:
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            first = next((line.strip() for line in source.splitlines() if line.strip()), "")
            found.append(f"code cell {number} ({first[:60]!r}): {' '.join(text.split())[:300]}")
    return found


def assert_no_stderr(cells, what: str) -> None:
    """Fail when an executed notebook shows a learner anything on stderr."""
    found = stderr_outputs(cells)
    assert not found, f"{what} wrote to stderr (a red box in JupyterLab):\n" + "\n".join(found)


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


def pytest_configure(config):
    _CONFIG["config"] = config
    if config.pluginmanager.hasplugin("nbval"):
        # Registered as a plugin, not a conftest hook: the notebooks are not under tests/.
        config.pluginmanager.register(_NoStderrUnderNbval(), "dtf-no-stderr-under-nbval")


# --------------------------------------------------------------------------- suite records

#: Where ``--record-suite NAME`` writes ``NAME.json`` (``make test`` and ``make check`` pass it);
#: ``python -m tools.measurements`` turns the records into docs/measurements.md.
SUITES_DIR = ROOT / "build" / "suites"
#: The session's config, for the report hook (which is not given it).
_CONFIG: dict = {}


def suite_group(nodeid: str) -> str:
    """The group of a test in a suite record: what costs what in ``make check``."""
    if nodeid.startswith(("notebooks/", "labs/")):
        return "nbval: tutorials at their default count"
    for name, group in (
        ("test_tutorial_runs_at_another_device_count", "tutorials at another device count"),
        ("test_lab_solution_runs", "lab solutions at another device count"),
        ("test_student_lab_runs", "student labs"),
        ("tests/test_keepalive_claim.py", "keepalive measured (waits on gRPC)"),
    ):
        if name in nodeid:
            return group
    return "every other test"


def pytest_addoption(parser):
    parser.addoption(
        "--record-suite",
        metavar="NAME",
        help="write build/suites/NAME.json: counts, wall time and seconds per group",
    )


def pytest_sessionstart(session):
    session.config._dtf_suite = {"start": time.monotonic(), "groups": {}, "outcomes": {}}


def pytest_runtest_logreport(report):
    record = getattr(_CONFIG.get("config"), "_dtf_suite", None)
    if record is None:
        return
    group = suite_group(report.nodeid.rsplit("@", 1)[0])
    record["groups"][group] = record["groups"].get(group, 0.0) + report.duration
    if report.when == "call" or report.outcome != "passed":
        record["outcomes"][report.nodeid] = report.outcome


def pytest_sessionfinish(session, exitstatus):
    name = session.config.getoption("--record-suite", None)
    record = getattr(session.config, "_dtf_suite", None)
    if not name or record is None or hasattr(session.config, "workerinput"):
        return  # not asked, or an xdist worker: the controller sees every report
    outcomes = list(record["outcomes"].values())
    SUITES_DIR.mkdir(parents=True, exist_ok=True)
    (SUITES_DIR / f"{name}.json").write_text(
        json.dumps(
            {
                "suite": name,
                "markers": session.config.getoption("-m", ""),
                "arguments": list(session.config.invocation_params.args),
                "workers": session.config.getoption("numprocesses", None),
                "cores": os.cpu_count(),
                "passed": outcomes.count("passed"),
                "failed": outcomes.count("failed"),
                "skipped": outcomes.count("skipped"),
                "seconds": round(time.monotonic() - record["start"], 1),
                "group_seconds": {k: round(v, 1) for k, v in sorted(record["groups"].items())},
                "exit_status": int(exitstatus),
                "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            },
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
