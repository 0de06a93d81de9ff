"""The worker processes: ``python -m dtf.multiworker._process`` (the launcher, POSIX) and
``python -m dtf.multiworker._process --worker`` (one spawned worker).

The launcher imports TensorFlow, Keras and the digits data once (no op, no server), then
forks one worker per command read from its standard input. Protocol, one JSON object per
line: standard input, from :class:`dtf.multiworker.Launcher`: ``{"run", "task",
"tf_config", "config", "program", "run_dir", "log", "metadata_ip"}``, end of file meaning stop (the
launcher then kills its workers and exits, so they never outlive the notebook); standard
output: ``{"event": "loaded", "seconds"}`` once imported, ``{"event": "forked", "run",
"task", "pid"}``, every event a worker emits (:class:`dtf.multiworker.hooks.Worker`), and
``{"event": "exit", "run", "task", "pid", "returncode"}`` (negative: killed by that signal)
once the launcher has reaped a worker. A worker runs the command's program file with
``runpy``, as ``python PROGRAM`` would. Each worker also watches a lifeline pipe whose only
write end the launcher holds, and on Linux asks for ``SIGKILL`` when the launcher dies.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from dtf._jsonlines import commands, emit
from dtf.multiworker import hooks
from dtf.multiworker.hooks import (
    EXIT_DEADLINE,
    EXIT_ERROR,
    EXIT_PREEMPTED,
    TrainConfig,
    Worker,
    digits_arrays,
    exit_now,
    short_message,
)

#: The variable ``PreemptionCheckpointHandler`` reads the cloud metadata host from.
METADATA_ENV = "GCE_METADATA_IP"
_TICK_S = 0.02
_STOP_WAIT_S = 5.0
#: Seconds a worker that ended its program waits for the others before it exits.
_LEAVE_TIMEOUT_S = 20.0


def _emitter(fd: int, run: int, task: int):
    def send(event: str, **fields) -> None:
        emit(fd, {"event": event, "run": run, "task": task, "t": time.monotonic(), **fields})

    return send


def _watch_deadline(seconds: float, emit) -> None:
    def watch() -> None:
        time.sleep(seconds)
        try:
            emit("error", error="Deadline", message=f"still running after {seconds} s")
        finally:
            os._exit(EXIT_DEADLINE)

    threading.Thread(target=watch, name="dtf-deadline", daemon=True).start()


def _worker_main(command: dict, proto: int) -> None:
    """Run one worker in this process (forked or spawned): the program file of the command,
    as ``python PROGRAM`` would (``runpy``, ``__name__ == "__main__"``); never returns."""
    code = EXIT_ERROR
    task = int(command["task"])
    emit = _emitter(proto, int(command["run"]), task)
    worker = None
    try:
        os.environ["TF_CONFIG"] = command["tf_config"]
        os.environ[METADATA_ENV] = command["metadata_ip"]
        config = TrainConfig.from_json(command["config"])
        worker = Worker(config, task, Path(command["run_dir"]), emit)
        hooks.set_current(worker)  # what Worker.current() returns in the program
        _watch_deadline(config.deadline_s, emit)
        program = command["program"]
        sys.argv = [program]
        folder = os.path.dirname(program)
        if folder != os.path.dirname(os.path.abspath(__file__)):  # not the package's own
            sys.path.insert(0, folder)  # as `python PROGRAM` does: it may import its neighbours
        runpy.run_path(program, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
    except BaseException as exc:
        traceback.print_exc()
        if worker is not None:
            worker.crashed(exc)
        else:
            emit("error", error=type(exc).__name__, message=short_message(exc))
    finally:
        if code in (0, EXIT_PREEMPTED):
            _leave_together()
        exit_now(code)


def _leave_together(timeout_s: float = _LEAVE_TIMEOUT_S) -> None:
    """Wait at the coordination service's barrier until every worker of the run has ended
    its program (at most ``timeout_s``), so that none exits while a peer may still fetch its
    share of the last all-reduce (measured: a peer that left at once failed the last
    collective of the other with ``Socket closed``, now and then, on a busy machine). The
    outcome does not matter: every collective of this worker has completed."""
    if "tensorflow" not in sys.modules:
        return
    try:
        from tensorflow.python.eager import context

        ctx = context.context()
        if ctx.coordination_service is not None:  # a multi-worker strategy configured it
            ctx.wait_at_barrier("dtf-multiworker-exit", int(timeout_s * 1000))
    except Exception:  # noqa: BLE001 - a peer that already left: nothing to wait for
        pass


def _redirect(log_path: str) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


def _fork_worker(command: dict, proto: int, lifeline_r: int, lifeline_w: int, parent: int):
    """In the forked child: become the worker of ``command``. Never returns."""
    try:
        os.close(lifeline_w)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        _redirect(command["log"])
        from dtf.cluster._launcher import _set_parent_death_signal
        from dtf.server import watch_lifeline

        _set_parent_death_signal(parent)
        watch_lifeline(lifeline_r, "the worker launcher")
    except BaseException:
        os._exit(EXIT_ERROR)
    _worker_main(command, proto)


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _launcher_main() -> None:
    """``python -m dtf.multiworker._process``: import once, fork a worker per command (POSIX)."""
    proto = os.dup(1)  # the protocol pipe; stray prints go to the launcher's log instead
    os.dup2(2, 1)
    parent = os.getpid()
    lifeline_r, lifeline_w = os.pipe()
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the parent
    began = time.monotonic()
    import keras  # noqa: F401 - imported once here, for every worker
    import tensorflow  # noqa: F401

    digits_arrays()
    emit(proto, {"event": "loaded", "seconds": time.monotonic() - began})
    children: dict[int, dict] = {}

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            head = children.pop(pid, {})
            emit(proto, {"event": "exit", **head, "pid": pid, "returncode": _returncode(status)})

    try:
        for command in commands(stopping, reap, 0.05):
            pid = os.fork()
            if pid == 0:
                _fork_worker(command, proto, lifeline_r, lifeline_w, parent)
            head = {"run": command["run"], "task": command["task"]}
            children[pid] = head
            emit(proto, {"event": "forked", **head, "pid": pid})
    finally:
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGKILL)  # SIGTERM would start a preemption save
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + _STOP_WAIT_S
        while children and time.monotonic() < deadline:
            reap()
            time.sleep(_TICK_S)
        os.close(lifeline_w)


def _spawned_worker_main() -> None:
    """``python -m dtf.multiworker._process --worker``: one worker, its command on stdin."""
    from dtf.server import watch_lifeline

    command = json.loads(sys.stdin.readline())
    proto = os.dup(1)
    _redirect_keep_stdin(command["log"])
    watch_lifeline(0, "the parent")  # end of file on standard input: the parent is gone
    _worker_main(command, proto)


def _redirect_keep_stdin(log_path: str) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


if __name__ == "__main__":
    _code = 0
    try:
        if sys.argv[1:] == ["--worker"]:
            _spawned_worker_main()
        else:
            _launcher_main()
    except BaseException:
        traceback.print_exc()
        _code = 1
    finally:
        sys.stderr.flush()
        os._exit(_code)
