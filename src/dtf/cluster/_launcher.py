"""The "zygote" of a local cluster: ``python -m dtf.cluster._launcher`` (POSIX only).

It imports TensorFlow once (no op, no server), then forks one child per task; each child
creates its ``tf.distribute.Server`` and reports. Protocol, one JSON object per line:

- standard input, from :class:`dtf.cluster.LocalCluster`: ``{"cmd": "start", "cluster":
  {job: [address, ...]}, "job": ..., "index": ..., "seq": n, "log": path}``; end of file means stop:
  the launcher sends ``SIGTERM`` to its children, ``SIGKILL`` after a grace period, reaps
  them and exits. So when the parent dies, however it dies, the launcher stops its servers.
- standard output, to the parent: ``{"event": "loaded", "seconds": s}`` once TensorFlow is
  imported; ``{"event": "forked", "job", "index", "seq", "pid"}`` (``seq`` echoes the
  command's, so the events of a restarted task never mix with its predecessor's); from the
  child itself ``{"event": "ready", ..., "pid"}`` or ``{"event": "error", ..., "kind", "message"}``
  (``kind`` is ``"port"`` for a port in use); ``{"event": "exit", ..., "returncode"}``
  (negative: killed by that signal) when the launcher has reaped a child.

Each child also watches a pipe whose only write end the launcher holds ("lifeline"): when the
launcher dies, even by ``SIGKILL``, the pipe reaches end of file and the child exits. On Linux
the child also asks for ``SIGKILL`` when the launcher dies (``prctl(PR_SET_PDEATHSIG)``).

The launcher stays single-threaded in Python (TensorFlow's import starts a few idle native
threads) and forks only from its main loop, while nothing runs: see :mod:`dtf.cluster` for
why forking is safe enough here and where the ``spawn`` start method is used instead.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import traceback
import warnings

from dtf._jsonlines import commands, emit

STOP_GRACE_S = 2.0
_POLL_S = 0.05
_PR_SET_PDEATHSIG = 1


def _set_parent_death_signal(parent: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the launcher died before prctl took effect
        os._exit(0)


def _child(command: dict, proto: int, lifeline_r: int, lifeline_w: int, launcher: int) -> None:
    """The forked child: become the server of one task. Never returns."""
    code = 4
    try:
        os.close(lifeline_w)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        log = os.open(command["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        os.close(devnull)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        _set_parent_death_signal(launcher)

        from dtf import server
        from dtf.cluster.spec import PortInUseError, Task

        server.watch_lifeline(lifeline_r, "the cluster launcher")
        task = Task(command["job"], int(command["index"]))
        head = {"job": task.job, "index": task.index, "seq": command.get("seq"), "pid": os.getpid()}
        try:
            server.start_server(command["cluster"], task)
        except PortInUseError as exc:
            emit(proto, {"event": "error", **head, "kind": "port", "message": str(exc)})
            print(f"dtf-server: error: {exc}", file=sys.stderr, flush=True)
            code = server.EXIT_PORT_IN_USE
            raise
        except BaseException as exc:
            message = f"{type(exc).__name__}: {exc}"
            emit(proto, {"event": "error", **head, "kind": "start", "message": message})
            raise
        address = command["cluster"][task.job][task.index]
        print(server.ready_line(task, address), flush=True)
        emit(proto, {"event": "ready", **head})
        while True:  # the lifeline thread or a signal ends the process
            time.sleep(3600)
    except BaseException:
        try:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def _reap(children: dict[int, dict], proto: int) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        head = children.pop(pid, {"job": "?", "index": -1, "seq": None})
        emit(proto, {"event": "exit", **head, "pid": pid, "returncode": _returncode(status)})


def _stop_children(children: dict[int, dict], proto: int) -> None:
    """SIGTERM every child, SIGKILL those still there after the grace period."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in list(children):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_GRACE_S
        while children and time.monotonic() < deadline:
            _reap(children, proto)
            time.sleep(_POLL_S)


def main() -> None:
    proto = os.dup(1)  # the protocol pipe; stray prints of TensorFlow go to the log instead
    os.dup2(2, 1)
    launcher = os.getpid()
    lifeline_r, lifeline_w = os.pipe()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the parent

    started = time.monotonic()
    from dtf import server

    server.import_tensorflow()
    emit(proto, {"event": "loaded", "seconds": round(time.monotonic() - started, 3)})

    children: dict[int, dict] = {}
    try:
        for command in commands(stopping, lambda: _reap(children, proto), _POLL_S):
            if command.get("cmd") != "start":
                continue
            with warnings.catch_warnings():
                # Python 3.12+ warns that forking a multi-threaded process may deadlock;
                # this one is idle (see the module docstring).
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                _child(command, proto, lifeline_r, lifeline_w, launcher)
            head = {
                "job": command["job"],
                "index": int(command["index"]),
                "seq": command.get("seq"),
            }
            children[pid] = head
            emit(proto, {"event": "forked", **head, "pid": pid})
    finally:
        _stop_children(children, proto)
        os.close(lifeline_w)


if __name__ == "__main__":
    _code = 0
    try:
        main()
    except BaseException:
        traceback.print_exc()
        _code = 1
    finally:
        sys.stderr.flush()
        os._exit(_code)  # never wait on TensorFlow's threads at interpreter exit
