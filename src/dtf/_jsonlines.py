"""The JSON-lines protocol between a parent process and the launchers it starts.

Both of the course's launchers (:mod:`dtf.cluster._launcher` for servers,
:mod:`dtf.multiworker._process` for multi-worker programs) are one fork server,
:func:`dtf.supervise.fork_server`: it imports TensorFlow once and forks children on request.
The parent writes one JSON command per line to the launcher's standard input; the launcher and
its children write one JSON event per line to a protocol pipe, which the parent reads in a
thread. End of file on the launcher's standard input means the parent is gone: the launcher
stops its children and exits.
"""

from __future__ import annotations

import json
import os
import select
import threading
from collections.abc import Callable, Iterable, Iterator


def emit(fd: int, event: dict) -> None:
    """Write ``event`` as one line. One ``write`` of less than ``PIPE_BUF`` bytes, so lines
    written by several processes to the same pipe never mix."""
    os.write(fd, (json.dumps(event) + "\n").encode())


def commands(stopping, on_tick: Callable[[], None], poll_s: float) -> Iterator[dict]:
    """The commands written to this process's standard input, one JSON object per line.

    Polls standard input every ``poll_s`` seconds, calling ``on_tick()`` between polls (to reap
    children, say). Ends at end of file (the parent is gone) or as soon as ``stopping`` is true
    (a list a signal handler appends to)."""
    buffer = b""
    while not stopping:
        try:
            readable, _, _ = select.select([0], [], [], poll_s)
        except InterruptedError:
            readable = []
        on_tick()
        if not readable:
            continue
        chunk = os.read(0, 65536)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)


def read_events(
    stream: Iterable[str], cond: threading.Condition, on_event: Callable[[dict], None]
) -> None:
    """Hand every JSON event line of ``stream`` to ``on_event`` under ``cond``, then wake the
    threads waiting on it; lines that are not JSON (stray output) are skipped."""
    for raw in stream:
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        with cond:
            on_event(event)
            cond.notify_all()
