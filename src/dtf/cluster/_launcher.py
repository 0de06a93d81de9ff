"""The "zygote" of a local cluster: ``python -m dtf.cluster._launcher`` (POSIX only).

A :func:`dtf.supervise.fork_server` that imports TensorFlow once (no op, no server, no Keras),
then forks one child per task; each child creates its ``tf.distribute.Server`` and reports.
The commands, from :class:`dtf.cluster.LocalCluster`: ``{"cmd": "start", "cluster": {job:
[address, ...]}, "job": ..., "index": ..., "seq": n, "log": path}``. Besides the fork
server's ``loaded``, ``forked`` and ``exit`` events (each with ``job``, ``index`` and ``seq``,
which echoes the command's, so the events of a restarted task never mix with its
predecessor's), a child reports ``{"event": "ready", ..., "pid"}`` or ``{"event": "error",
..., "kind", "message"}`` (``kind`` is ``"port"`` for a port in use). At the end of its
standard input the launcher sends ``SIGTERM`` to its servers and ``SIGKILL`` after
:data:`~dtf.cluster.protocol.LAUNCHER_GRACE_S` seconds.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

from dtf import supervise
from dtf._jsonlines import emit
from dtf.cluster.protocol import LAUNCHER_GRACE_S


def _head(command: dict) -> dict | None:
    if command.get("cmd") != "start":
        return None
    return {"job": command["job"], "index": int(command["index"]), "seq": command.get("seq")}


def _serve(command: dict, proto: int) -> int:
    """The forked child: become the server of one task; returns only on failure."""
    from dtf.cluster import server
    from dtf.cluster.spec import PortInUseError, Task

    task = Task(command["job"], int(command["index"]))
    fields = _head(command)
    assert fields is not None, "the fork server forks a child only for a start command"
    head = {**fields, "pid": os.getpid()}
    try:
        server.start_server(command["cluster"], task)
    except PortInUseError as exc:
        emit(proto, {"event": "error", **head, "kind": "port", "message": str(exc)})
        print(f"dtf-server: error: {exc}", file=sys.stderr, flush=True)
        return server.EXIT_PORT_IN_USE
    except BaseException as exc:
        message = f"{type(exc).__name__}: {exc}"
        emit(proto, {"event": "error", **head, "kind": "start", "message": message})
        traceback.print_exc()
        return server.EXIT_FAILED
    address = command["cluster"][task.job][task.index]
    print(server.ready_line(task, address), flush=True)
    emit(proto, {"event": "ready", **head})
    while True:  # the lifeline thread or a signal ends the process
        time.sleep(3600)


def _preload() -> None:
    from dtf.cluster import server

    server.import_tensorflow()


if __name__ == "__main__":
    supervise.run_main(
        lambda: supervise.fork_server(
            _preload, _serve, _head, what="the cluster launcher", grace=LAUNCHER_GRACE_S
        )
    )
