"""Tests for tools/nbtools.py: stopping every process a notebook started, on POSIX and elsewhere.

The tools run after every notebook, so a POSIX-only call there (``os.getuid``, ``os.killpg``,
``signal.SIGKILL``) would break ``make run`` and ``make outputs`` on Windows. The Windows path is
tested here on this machine by switching ``nbtools.POSIX`` off and removing those functions, then
checking that a real tree of processes (a child and the grandchild it started) is still stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from tests.helpers import ROOT
from tools import nbtools

START_TIMEOUT_S = 30
GONE_TIMEOUT_S = 15

# A child that starts a grandchild, writes the grandchild's pid to a file and waits.
TREE_SOURCE = """\
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(str(grandchild.pid))
import os
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""


def is_gone(pid: int) -> bool:
    """True if ``pid`` has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pid: int, timeout: float = GONE_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if is_gone(pid):
            return True
        time.sleep(0.05)
    return is_gone(pid)


def wait_for_file(path: Path, proc: subprocess.Popen, timeout: float = START_TIMEOUT_S) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text()
        if proc.poll() is not None:
            pytest.fail(f"the test process exited early with status {proc.returncode}")
        time.sleep(0.05)
    pytest.fail(f"{path.name} did not appear within {timeout} s")


class Tree:
    """A child process (started like the tools start a notebook) and its grandchild."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None) -> None:
        pid_file = tmp_path / "grandchild.pid"
        self.child = subprocess.Popen(
            [sys.executable, "-c", TREE_SOURCE, str(pid_file)],
            env=env,
            stdin=subprocess.DEVNULL,
            **nbtools.session_kwargs(),
        )
        self.grandchild = int(wait_for_file(pid_file, self.child))

    def cleanup(self) -> None:
        """Kill whatever a failing test left running (never leaves processes behind)."""
        for pid in (self.grandchild, self.child.pid):
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
        try:
            self.child.wait(timeout=GONE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass


@pytest.fixture
def trees(tmp_path: Path) -> Iterator[list[Tree]]:
    started: list[Tree] = []
    yield started
    for tree in started:
        tree.cleanup()


@pytest.fixture
def not_posix(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make this process look like Windows to nbtools: no POSIX flag, no getuid/killpg/SIGKILL."""
    monkeypatch.setattr(nbtools, "POSIX", False)
    for name in ("getuid", "killpg", "getpgid"):
        monkeypatch.delattr(os, name, raising=False)
    # Only nbtools' view of the signal module loses SIGKILL: subprocess and psutil use it
    # for their own kill() on this (POSIX) machine.
    monkeypatch.setattr(nbtools, "signal", SimpleNamespace(SIGTERM=signal.SIGTERM))


def test_session_kwargs() -> None:
    if os.name == "posix":
        assert nbtools.session_kwargs() == {"start_new_session": True}
    else:
        assert nbtools.session_kwargs() == {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}


def test_session_kwargs_without_posix(not_posix: None) -> None:
    flags = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
    assert nbtools.session_kwargs() == {"creationflags": flags}


@pytest.mark.parametrize("posix", [True, False], ids=["posix", "not-posix"])
def test_terminate_stops_the_child_and_its_children(
    tmp_path: Path,
    trees: list[Tree],
    request: pytest.FixtureRequest,
    posix: bool,
) -> None:
    if posix and os.name != "posix":
        pytest.skip("process groups exist only on POSIX")
    if not posix:
        request.getfixturevalue("not_posix")
    tree = Tree(tmp_path)
    trees.append(tree)
    start = time.monotonic()
    # Nothing but the child is passed in: the tree must be found from it.
    nbtools.terminate([], child=tree.child, grace=5)
    assert tree.child.poll() is not None, "the child is still running"
    assert wait_gone(tree.grandchild), "the grandchild is still running"
    assert time.monotonic() - start < 5, "SIGTERM/terminate should be enough here"


def test_leftovers_are_found_by_token_and_stopped_without_posix(
    tmp_path: Path, trees: list[Tree], not_posix: None
) -> None:
    token = nbtools.new_run_token()
    tree = Tree(tmp_path, env=nbtools.child_env(token, metrics_file=None))
    trees.append(tree)
    found = {p.pid for p in nbtools.find_tagged(token)}
    assert found == {tree.child.pid, tree.grandchild}  # inherited by the grandchild
    stopped = nbtools.kill_leftovers(token)
    assert len(stopped) == 1 and f"(pid {tree.grandchild})" in stopped[0]
    assert wait_gone(tree.grandchild) and wait_gone(tree.child.pid)
    assert nbtools.find_tagged(token) == []
    tree.child.wait(timeout=GONE_TIMEOUT_S)  # reap it


def test_find_tagged_skips_other_users_processes(
    tmp_path: Path, trees: list[Tree], not_posix: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without uids the owner is compared by user name: another user's process is skipped."""
    token = nbtools.new_run_token()
    tree = Tree(tmp_path, env=nbtools.child_env(token, metrics_file=None))
    trees.append(tree)
    assert {p.pid for p in nbtools.find_tagged(token)} == {tree.child.pid, tree.grandchild}
    monkeypatch.setattr(nbtools, "_current_user", lambda: "someone-else")
    assert nbtools.find_tagged(token) == []


def test_tools_find_dtf_in_src_when_it_is_not_installed() -> None:
    """A checkout without `pip install -e .`: nbtools (only) adds src/ to the import path."""
    code = f"""
import sys
from pathlib import Path
src = Path({str(ROOT / "src")!r}).resolve()
# No entry that dtf imports from: this checkout's src/, nor where dtf is installed (an
# editable install may point at another checkout).
sys.path[:] = [p for p in sys.path if p and not (Path(p) / "dtf" / "__init__.py").is_file()]
try:
    import dtf
    raise SystemExit("dtf is still importable: the test would prove nothing")
except ImportError:
    pass
sys.path.insert(0, {str(ROOT)!r})  # as `python -m` from the root (the path was cleared above)
from tools import run_notebooks, make_labs, contents, execute_in_place, nbrun
import dtf
assert Path(dtf.__file__).resolve().parent == src / "dtf", dtf.__file__
assert sys.path.count(str(src)) == 1, sys.path
assert run_notebooks.first_line("a\\nb") == "a"
print("ok")
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
