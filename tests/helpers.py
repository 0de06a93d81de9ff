"""Helpers that test modules import (conftest.py keeps only pytest's hooks and fixtures).

TensorFlow fixes its device layout once per process, so tests of device configuration run
small scripts in processes of their own: fresh, or forked from one that imported TensorFlow
and ran no op (tests/script_server.py). Each checks several things at once."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dtf.quiet import SETTINGS as quiet_settings

ROOT = Path(__file__).resolve().parent.parent
QUIET_ENV = {"TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
#: Seconds the script server may take to import TensorFlow (a loaded 2-core machine: ~10).
LOAD_TIMEOUT_S = 180.0
#: A forked script's TensorFlow was imported under these: dtf.quiet's settings.
FORKED_ENV = dict(quiet_settings)
#: Where ``--record-suite NAME`` writes ``NAME.json`` (``make test`` and ``make check`` pass it);
#: ``python -m tools.measurements`` turns the records into docs/measurements.md.
SUITES_DIR = ROOT / "build" / "suites"


def run_script(
    code: str, timeout: float = 180, env: dict | None = None, forked: bool = False
) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter; fail with its output if it exits non-zero.

    With ``forked``, a script that needs TensorFlow uninitialised, not unimported, is forked
    from a process that already imported it (tests/script_server.py): one import less each.
    It runs with ``quiet()``'s settings, as if its first line called it (a lesson's Setup
    does), and fresh anyway when its environment differs in what is read at import."""
    full_env = {**os.environ, **QUIET_ENV, **(FORKED_ENV if forked else {}), **(env or {})}
    full_env.pop("PYTEST_CURRENT_TEST", None)
    code = textwrap.dedent(code)
    if forked and SCRIPT_SERVER.serves(full_env):
        proc = SCRIPT_SERVER.run(code, full_env, timeout)
    else:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            cwd=ROOT,
        )
    if proc.returncode != 0:
        pytest.fail(f"script failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


class _ScriptServer:
    """This test process's tests/script_server.py, started at its first script and stopped
    at this process's exit; one script at a time."""

    def __init__(self) -> None:
        self.env = {**os.environ, **QUIET_ENV, **FORKED_ENV}  # before any test changed it
        self.env.pop("PYTEST_CURRENT_TEST", None)
        self.lock = threading.Lock()
        self.cond = threading.Condition()
        self.events: dict = {}
        self.popen: subprocess.Popen | None = None
        self.folder: Path | None = None
        self.count = 0
        self._registered = False

    def serves(self, env: dict, ignore: tuple = ()) -> bool:
        """Whether a child with ``env`` can be forked: the variables read at import, but
        those named in ``ignore``, are the server's."""
        from tests.script_server import IMPORT_TIME

        def read_at_import(e: dict) -> dict:
            return {k: v for k, v in e.items() if k.startswith(IMPORT_TIME) and k not in ignore}

        return read_at_import(env) == read_at_import(self.env)

    def _start(self) -> None:
        """Start the server and wait until it imported TensorFlow (at most LOAD_TIMEOUT_S),
        so that a script's timeout counts only the script."""
        from dtf import supervise

        self._stop()  # a server that died: its folder, its pipe
        self.folder = supervise.make_folder(None, "dtf-scripts-")  # a killed owner's go first
        here = os.getcwd()
        os.chdir(ROOT)  # python -m tests.script_server imports from the repository's root
        try:
            self.popen, _ = supervise.start_fork_server(
                "tests.script_server", self.folder / "server.log", self.env, self.cond,
                lambda event: self.events.__setitem__((event.get("event"), event.get("id")), event),
            )  # fmt: skip
        finally:
            os.chdir(here)
        if not self._registered:
            atexit.register(self._stop)
            self._registered = True
        with self.cond:
            loaded = lambda: ("loaded", None) in self.events  # noqa: E731
            if not supervise.wait_until(
                self.cond, loaded, time.monotonic() + LOAD_TIMEOUT_S, self._alive
            ):
                self._stop()
                raise RuntimeError(f"tests/script_server.py did not load in {LOAD_TIMEOUT_S} s")

    def _stop(self) -> None:
        from dtf import supervise

        if self.popen is not None:
            supervise.stop_child(self.popen, 10.0)
            self.popen = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        self.events.clear()

    def _alive(self) -> None:
        """Raise, with the server's log, if the server has ended (the next script starts a
        new one)."""
        from dtf import supervise

        if self.popen is None or self.popen.poll() is not None:
            log = supervise.log_tail(self.folder / "server.log") if self.folder else ""
            raise RuntimeError(f"tests/script_server.py ended:\n{log}")

    def spawn(
        self, code: str, env: dict, argv: tuple = (), stdin: Path | None = None, cwd: Path = ROOT
    ) -> int:
        """Fork a child that runs ``code`` in ``cwd``; its number, whose ``{n}.out`` is its
        standard output and ``{n}.log`` its standard error in :attr:`folder`. With ``stdin``
        (a FIFO) it reads that, and ``{n}.out`` is a FIFO too, created here: open it for
        reading before ``stdin`` for writing, the order the child opens them in."""
        with self.lock:
            if self.popen is None or self.popen.poll() is not None:
                self._start()
            assert self.popen is not None and self.popen.stdin is not None and self.folder
            self.count += 1
            n = self.count
            out, log = self.folder / f"{n}.out", self.folder / f"{n}.log"
            if stdin is not None:
                os.mkfifo(out)
            command = {"id": n, "code": code, "env": env, "cwd": str(cwd), "argv": list(argv)}
            command |= {"stdout": str(out), "log": str(log), "stdin": str(stdin or "")}
            self.popen.stdin.write((json.dumps(command) + "\n").encode())
            self.popen.stdin.flush()
            return n

    def wait(self, n: int, timeout: float) -> int | None:
        """Child ``n``'s exit status, or ``None`` if it still runs after ``timeout`` s."""
        from dtf import supervise

        with self.cond:
            exited = lambda: ("exit", n) in self.events  # noqa: E731
            if not supervise.wait_until(self.cond, exited, time.monotonic() + timeout, self._alive):
                return None
            self.events.pop(("forked", n), None)
            return self.events.pop(("exit", n))["returncode"]

    def kill(self, n: int, sig: int = signal.SIGKILL, group: bool = False) -> None:
        """Send ``sig`` to child ``n`` (with ``group``, to its process group) if it still
        runs. The server sends it, and only to a child it has not reaped, so the signal
        never reaches a process that reused the id."""
        from dtf import supervise

        with self.lock:
            if self.popen is not None and self.popen.poll() is None:
                assert self.popen.stdin is not None
                self.popen.stdin.write(supervise.signal_command(sig, group, id=n))
                self.popen.stdin.flush()

    def run(self, code: str, env: dict, timeout: float) -> subprocess.CompletedProcess:
        n = self.spawn(code, env)
        returncode = self.wait(n, timeout)
        if returncode is None:
            self.kill(n)
            raise subprocess.TimeoutExpired(["script_server", str(n)], timeout)
        assert self.folder is not None

        def text(path: Path) -> str:
            return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

        result = subprocess.CompletedProcess(["script_server", str(n)], returncode)
        result.stdout = text(self.folder / f"{n}.out")
        result.stderr = text(self.folder / f"{n}.log")
        return result


SCRIPT_SERVER = _ScriptServer()


def pid_running(pid: int) -> bool:
    """Whether process ``pid`` runs: a zombie, waiting for its parent's reap, does not."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def processes_gone(pids, within: float = 10.0) -> bool:
    """Whether every process of ``pids`` ended (or is a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while any(pid_running(p) for p in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


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


#: The course website, built once per test process: tests/test_site.py and
#: tests/test_site_browser.py share one xdist group, hence one worker and one build.
_SITE_BUILD: dict[str, object] = {}
#: How long the whole site build may take in a test (it takes seconds).
SITE_BUILD_TIMEOUT_S = 240.0


def site_required(env=os.environ) -> bool:
    """Whether the site's tests must run here (CI, or ``DTF_REQUIRE_BROWSER=1`` as .ci/run
    sets): there a missing tool fails them instead of skipping them."""
    return bool(env.get("CI")) or env.get("DTF_REQUIRE_BROWSER") == "1"


def skip_or_fail(reason: str | None, env=os.environ) -> None:
    """Nothing when ``reason`` is None; else skip the test, or fail it where it must run."""
    if reason is None:
        return
    if site_required(env):
        pytest.fail(f"this test must run here (CI or DTF_REQUIRE_BROWSER=1 is set), but: {reason}")
    pytest.skip(reason)


def site_tools_missing() -> str | None:
    """Why this machine cannot build the site (no jupyter-book, no usable Node.js: the
    message says what to install), or None."""
    from tools import site

    try:
        site.jupyter_book_version()
        site.node_version()
    except site.SiteError as err:
        return f"the website cannot be built here: {err}"
    return None


def built_site(tmp_path_factory: pytest.TempPathFactory):
    """``tools.site.build`` of the checkout into a temporary folder (a ``Result``), its
    problems and warnings kept for the tests to show; skipped (or failed where required)
    without jupyter-book or Node.js."""
    from tools import site

    skip_or_fail(site_tools_missing())
    if "result" not in _SITE_BUILD:
        folder = tmp_path_factory.mktemp("site")
        _SITE_BUILD["result"] = site.build(
            ROOT, folder / "site", folder / "site-src", timeout=SITE_BUILD_TIMEOUT_S, strict=False
        )
    return _SITE_BUILD["result"]
