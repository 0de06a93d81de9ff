"""A TensorFlow process that runs checker test cases the way a lab's kernel runs check cells.

TensorFlow fixes its device layout once per process, so the checkers that need TensorFlow
are tested in a separate process set up like a lab (``devices.setup(n, log_placement=True)``
then ``placement.start()``). One process serves a whole test module: each test sends the
code of its case (its answer and the checker call, in a fresh namespace) and gets the
verdict back, so cases are independent of each other and of their order. A test module can
give extra ``setup`` code, run once after that (lab 04 starts a cluster and connects to it
there): the names it defines are in every case's namespace. The process also
logs every eager op run, as TensorFlow does inside Jupyter (``Executing op ...`` lines on
``sys.stdout``); a plain script logs an eager op's placement only the first time it runs
on a device, which would make a case depend on the cases before it.

Every wait has a timeout; on one, or when a case raises, the test fails with the process's
output.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import FORKED_ENV, QUIET_ENV, ROOT, SCRIPT_SERVER

READY_TIMEOUT_S = 180.0
CASE_TIMEOUT_S = 120.0
_MARK = "\x1edtf-reply\x1e"

_WORKER = r"""
import json, linecache, os, sys, traceback

MARK = sys.argv[2]
replies = os.dup(1)  # before placement.start() routes descriptor 1 through its reader


def reply(obj):
    # One write, under PIPE_BUF for a verdict: not split by other writers of the pipe.
    os.write(replies, ("\n" + MARK + json.dumps(obj) + "\n").encode())


from dtf import quiet

quiet.quiet()
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import logging_ops

from dtf import checks, devices, placement, towers

setup = devices.setup(int(sys.argv[1]), log_placement=True)
placement.start()
logging_ops.enable_interactive_logging()  # what TensorFlow does in an IPython kernel
base = {
    "checks": checks, "np": np, "placement": placement, "setup": setup,
    "D": setup.names, "tf": tf, "towers": towers,
}
extra = dict(base)
exec(compile(sys.argv[3], "<setup>", "exec"), extra)
extra = {k: v for k, v in extra.items() if not k.startswith("__")}
reply({"ready": True})
for line in sys.stdin:
    checks.reset()
    namespace = {**extra, "out": {}}
    try:
        code = json.loads(line)["code"]
        # The case's source, as IPython keeps a cell's: inspect.getsource finds it.
        linecache.cache["<case>"] = (len(code), None, code.splitlines(True), "<case>")
        exec(compile(code, "<case>", "exec"), namespace)
        sys.stdout.flush()
        verdict = namespace.get("verdict")
        answer = {"out": namespace["out"]}
        if verdict is not None:
            answer.update(status=verdict.status, message=verdict.message)
        reply(answer)
    except BaseException:
        reply({"error": traceback.format_exc()})
"""


@dataclass(frozen=True)
class Outcome:
    """The verdict of one case (``status``, ``message``) and what it put in ``out``."""

    status: str | None
    message: str
    out: dict


class CheckWorker:
    """A TensorFlow process with ``num_devices`` logical CPUs, serving checker cases;
    ``setup``: code run once before the first case, whose names every case sees.

    It is forked from the tests' script server (tests/script_server.py: TensorFlow imported,
    no op run) and talks through two FIFOs; where the server cannot serve this process's
    environment, it is a fresh ``python -c`` with pipes."""

    def __init__(self, num_devices: int = 2, setup: str = "") -> None:
        env = {**os.environ, **QUIET_ENV, **FORKED_ENV}
        env.pop("PYTEST_CURRENT_TEST", None)
        argv = (str(num_devices), _MARK, setup)
        self._proc: subprocess.Popen | None = None
        self._forked: int | None = None
        self._fifos = Path(tempfile.mkdtemp(prefix="dtf-checks-"))
        try:
            self._begin(env, argv)
        except BaseException:
            self.close()  # the folder, the pipes, the process: nothing left behind
            raise

    def _begin(self, env: dict, argv: tuple) -> None:
        if SCRIPT_SERVER.serves(env):
            self._fork(env, argv)
        else:
            self._stderr_path = self._fifos / "stderr"
            with open(self._stderr_path, "wb") as stderr:
                self._proc = subprocess.Popen(
                    [sys.executable, "-c", _WORKER, *argv],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    env=env, cwd=ROOT,
                )  # fmt: skip
            assert self._proc.stdin is not None and self._proc.stdout is not None
            self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self._replies: queue.Queue = queue.Queue()
        self._printed: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait(READY_TIMEOUT_S, "start")

    def _fork(self, env: dict, argv: tuple) -> None:
        """Fork the worker and open its FIFOs in the order it opens them: its output, then
        its input (the open of which waits until the child reads, at most READY_TIMEOUT_S)."""
        stdin = self._fifos / "stdin"
        os.mkfifo(stdin)
        n = self._forked = SCRIPT_SERVER.spawn(_WORKER, env, argv, stdin=stdin)
        assert SCRIPT_SERVER.folder is not None
        self._stderr_path = SCRIPT_SERVER.folder / f"{n}.log"
        out = os.open(SCRIPT_SERVER.folder / f"{n}.out", os.O_RDONLY | os.O_NONBLOCK)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:
            try:
                into = os.open(stdin, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as err:  # ENXIO: the child has not opened its input yet
                status = SCRIPT_SERVER.wait(n, 0.05)
                if err.errno != errno.ENXIO or status is not None or time.monotonic() > deadline:
                    os.close(out)
                    if status is not None:
                        self._forked = None  # it exited, and its status was taken: no wait
                    pytest.fail(  # __init__ closes what is open
                        f"the checker worker did not start ({status})\n{self._diagnostics()}"
                    )
        os.set_blocking(out, True)
        os.set_blocking(into, True)
        self._stdin, self._stdout = os.fdopen(into, "wb"), os.fdopen(out, "rb")

    def _read(self) -> None:
        for raw in self._stdout:
            line = raw.decode("utf-8", "replace")
            before, mark, reply = line.partition(_MARK)
            if before.strip():
                self._printed.append(before.rstrip("\n"))
            if mark:
                self._replies.put(json.loads(reply))
        self._replies.put(None)  # the process closed its output: it ended

    def _diagnostics(self) -> str:
        path = self._stderr_path
        stderr = path.read_text("utf-8", "replace") if path.exists() else ""
        printed = "\n".join(self._printed[-40:])
        return f"printed:\n{printed}\nstderr:\n{stderr[-4000:]}"

    def _wait(self, timeout: float, what: str) -> dict:
        try:
            reply = self._replies.get(timeout=timeout)
        except queue.Empty:
            self.close()
            pytest.fail(
                f"the checker worker did not {what} in {timeout:g} s\n{self._diagnostics()}"
            )
        if reply is None:
            pytest.fail(f"the checker worker ended during {what}\n{self._diagnostics()}")
        if "error" in reply:
            pytest.fail(f"the case raised:\n{reply['error']}\n{self._diagnostics()}")
        return reply

    def run(self, code: str, timeout: float = CASE_TIMEOUT_S) -> Outcome:
        """Run ``code`` (which sets ``verdict``, and may fill the dict ``out``) in a fresh
        namespace that has ``checks``, ``np``, ``tf``, ``placement``, ``towers``, ``setup``
        and ``D`` (the device names)."""
        self._printed.clear()
        self._stdin.write((json.dumps({"code": code}) + "\n").encode())
        self._stdin.flush()
        reply = self._wait(timeout, "finish the case")
        return Outcome(reply.get("status"), reply.get("message", ""), reply["out"])

    def close(self) -> None:
        """End the worker: end of file on its input ends its loop; killed after 30 s."""
        try:
            if hasattr(self, "_stdin"):
                self._stdin.close()
        except OSError:
            pass
        if self._proc is not None:
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=30)
            self._proc = None
        if self._forked is not None:
            n, self._forked = self._forked, None  # a second close() has nothing to wait for
            try:
                if SCRIPT_SERVER.wait(n, 30) is None:
                    SCRIPT_SERVER.kill(n)
                    SCRIPT_SERVER.wait(n, 30)
            except RuntimeError:  # the server is gone: its children went with it
                pass
            reader = getattr(self, "_reader", None)
            if reader is not None:
                reader.join(timeout=5)  # the child is gone: its output ends
            if hasattr(self, "_stdout") and (reader is None or not reader.is_alive()):
                self._stdout.close()  # the FIFO this process opened
        shutil.rmtree(self._fifos, ignore_errors=True)

    def __enter__(self) -> CheckWorker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def worker_fixture(num_devices: int = 2, setup: str = ""):
    """A module-scoped fixture that yields a :class:`CheckWorker` (see its ``setup``)."""

    @pytest.fixture(scope="module")
    def tf_worker():
        with CheckWorker(num_devices, setup) as worker:
            yield worker

    return tf_worker


__all__ = ["CASE_TIMEOUT_S", "CheckWorker", "Outcome", "READY_TIMEOUT_S", "worker_fixture"]
