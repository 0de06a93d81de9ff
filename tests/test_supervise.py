"""Tests for ``dtf.supervise``, the one module that starts, ties, stops and reaps every child
process of the package, with plain Python children (no TensorFlow: each test takes well under
a second or two). LocalCluster and the multi-worker Launcher test it with real servers and
workers (tests/test_cluster.py, tests/test_multiworker.py)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from dtf import supervise

from .helpers import ROOT, processes_gone

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(os.name != "posix", reason="signals and sessions of POSIX"),
]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _python(code: str, log) -> subprocess.Popen:
    return supervise.start([sys.executable, "-c", textwrap.dedent(code)], log, _env())


def _ready(popen: subprocess.Popen) -> None:
    assert popen.stdout.readline().strip() == b"ready", "the child did not start"


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_how_a_child_ended_is_said_in_words():
    assert supervise.describe_returncode(0) == "exited with code 0"
    assert supervise.describe_returncode(3) == "exited with code 3"
    assert supervise.describe_returncode(-9) == "was killed by signal SIGKILL"
    assert supervise.describe_returncode(-200) == "was killed by signal 200"


def test_a_child_s_stderr_is_its_log_from_the_first_byte(tmp_path):
    """An import error before any code of the child runs is in its log, and the log's tail
    (what error messages show) ends with it."""
    log = tmp_path / "child.log"
    popen = _python("import a_module_that_is_not_there", log)
    code = popen.wait(30)
    popen.stdin.close()
    popen.stdout.close()
    assert supervise.describe_returncode(code) == "exited with code 1"
    tail = supervise.log_tail(log)
    assert tail.startswith(f"\nLast lines of its log ({log}):\n    Traceback")
    assert supervise.tail_lines(log)[-1] == (
        "ModuleNotFoundError: No module named 'a_module_that_is_not_there'"
    )
    assert supervise.log_tail(tmp_path / "none.log") == ""


def test_terminate_then_kill_after_the_grace_and_reap(tmp_path):
    """A child that ends at SIGTERM ends then; one that ignores it is killed after the grace
    period; both are reaped, and their exit statuses are returned."""
    polite = _python("import time; print('ready', flush=True); time.sleep(60)", tmp_path / "a")
    stubborn = _python(
        """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(60)
        """,
        tmp_path / "b",
    )
    try:
        _ready(polite)
        _ready(stubborn)
        began = time.monotonic()
        codes = supervise.stop_processes([polite.pid, stubborn.pid], grace=0.5)
        took = time.monotonic() - began
    finally:
        for popen in (polite, stubborn):
            popen.kill()
            popen.wait(10)
            popen.stdin.close()
            popen.stdout.close()
    assert codes == {polite.pid: -signal.SIGTERM, stubborn.pid: -signal.SIGKILL}
    assert 0.5 <= took < 5.0, took


def test_a_child_that_ignores_end_of_file_loses_its_whole_session(tmp_path):
    """stop_child closes the child's standard input; a child that does not exit then is
    killed with everything in its session (here: a grandchild)."""
    popen = _python(
        """
        import subprocess, sys, time
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print("ready", grandchild.pid, flush=True)
        time.sleep(60)
        """,
        tmp_path / "child.log",
    )
    words = popen.stdout.readline().split()
    assert words[0] == b"ready"
    grandchild = int(words[1])
    try:
        supervise.stop_child(popen, wait_s=0.5)
        assert popen.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 5.0
        while not _gone(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(grandchild)
    finally:
        popen.kill()
        popen.wait(10)
        popen.stdout.close()


def test_a_child_watching_its_lifeline_exits_when_the_parent_is_gone(tmp_path):
    log = tmp_path / "child.log"
    popen = _python(
        """
        import time
        from dtf.supervise import watch_lifeline
        watch_lifeline(0, "the test")  # standard input: the parent's pipe
        print("ready", flush=True)
        time.sleep(60)
        """,
        log,
    )
    try:
        _ready(popen)
        popen.stdin.close()  # as if the parent died: only it held the write end
        assert popen.wait(10) == 0
    finally:
        popen.kill()
        popen.wait(10)
        popen.stdout.close()
    assert "the test is gone (end of file on its pipe); exiting" in log.read_text()


FORK_SERVER = """
import os, sys, time
from dtf import supervise
from dtf._jsonlines import emit

def child(command, proto):
    print("to the log", command["n"], flush=True)
    more = {}
    if command.get("group"):  # a session leader with a child of its own, as a kernel
        import subprocess
        os.setsid()
        sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
        more["grandchild"] = subprocess.Popen(sleeper).pid
    emit(proto, {"event": "hello", "n": command["n"], "pid": os.getpid(), **more})
    if command.get("sleep"):
        time.sleep(60)
    return command["n"]

head = lambda command: {"n": command["n"]} if "n" in command else None
supervise.run_main(lambda: supervise.fork_server(lambda: None, child, head, what="the test"))
"""


@contextlib.contextmanager
def _fork_server(tmp_path):
    """A fork server of :data:`FORK_SERVER`; at the end of the block, end of file must end it
    with status 0, and it is killed whatever happened."""
    server = _python(FORK_SERVER, tmp_path / "server.log")
    try:
        yield server
        server.stdin.close()
        assert server.wait(10) == 0
    finally:
        server.kill()
        server.wait(10)
        server.stdout.close()


def _command(tmp_path, n: int, **more) -> bytes:
    return (json.dumps({"n": n, "log": str(tmp_path / f"child-{n}.log"), **more}) + "\n").encode()


def test_the_fork_server_forks_reports_reaps_and_stops_at_end_of_file(tmp_path):
    """The protocol both launchers speak: loaded, forked, the child's own events, exit with
    its status; a line that is not a command is skipped; end of file ends the server."""
    with _fork_server(tmp_path) as server:
        server.stdin.write(_command(tmp_path, 3) + _command(tmp_path, 5))
        server.stdin.write(b'{"not": "a command"}\n')
        server.stdin.flush()
        events = []
        while sum(e["event"] == "exit" for e in events) < 2:
            events.append(json.loads(server.stdout.readline()))
    assert events[0]["event"] == "loaded"
    for n in (3, 5):
        mine = [e for e in events if e.get("n") == n]
        assert [e["event"] for e in mine] == ["forked", "hello", "exit"]
        assert mine[0]["pid"] == mine[1]["pid"] == mine[2]["pid"]
        assert mine[2]["returncode"] == n
        assert (tmp_path / f"child-{n}.log").read_text() == f"to the log {n}\n"


def test_the_fork_server_signals_only_the_children_it_has_not_reaped(tmp_path):
    """A signal command reaches the running child it names; one that names a child already
    reaped, or none, is ignored, and the server goes on."""
    with _fork_server(tmp_path) as server:

        def send(line: bytes) -> None:
            server.stdin.write(line)
            server.stdin.flush()

        def until(event: str, n: int) -> dict:
            while (got := json.loads(server.stdout.readline()))["event"] != event or got["n"] != n:
                pass
            return got

        send(_command(tmp_path, 3))
        assert until("exit", 3)["returncode"] == 3
        send(supervise.signal_command(signal.SIGKILL, n=3))  # reaped: its id is not its own
        send(supervise.signal_command(signal.SIGKILL, n=99))  # never forked
        send(_command(tmp_path, 4, sleep=True))
        until("hello", 4)
        send(supervise.signal_command(signal.SIGKILL, n=4))
        assert until("exit", 4)["returncode"] == -signal.SIGKILL
        # to a child's process group: the child and what it started
        send(_command(tmp_path, 5, sleep=True, group=True))
        grandchild = until("hello", 5)["grandchild"]
        send(supervise.signal_command(signal.SIGKILL, group=True, n=5))
        assert until("exit", 5)["returncode"] == -signal.SIGKILL
        assert processes_gone([grandchild])


def test_a_temporary_folder_is_named_after_its_owner_and_a_dead_owner_s_is_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(30)
    prefix = f"dtf-test-supervise-{os.getpid()}-"
    left = Path(tempfile.gettempdir()) / f"{prefix}{dead.pid}-left"  # its owner was killed
    left.mkdir()
    mine = supervise.make_folder(None, prefix)
    try:
        assert mine.name.startswith(f"{prefix}{os.getpid()}-")
        assert not left.exists()
    finally:
        supervise.remove_folder(mine, None)
        shutil.rmtree(left, ignore_errors=True)
    assert not mine.exists()
    given = tmp_path / "given"
    assert supervise.make_folder(given, prefix) == given and given.is_dir()
    supervise.remove_folder(given, given)
    assert given.is_dir(), "a folder the caller gave is the caller's"
