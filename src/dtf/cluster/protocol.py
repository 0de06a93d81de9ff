"""What a cluster's server processes and their parent agree on: the ready line a server
prints, its exit statuses, and how long the launcher waits for its servers to stop.

A module of its own so that :class:`~dtf.cluster.LocalCluster` (imported with the package)
reads a server's words without importing :mod:`dtf.cluster.server` or
:mod:`dtf.cluster._launcher`: those two run as programs (``python -m dtf.cluster.server``,
``python -m dtf.cluster._launcher``), and Python's ``-m`` warns ("found in sys.modules
after import of package") when the package it imports first has already imported the module
it is asked to run.
"""

from __future__ import annotations

import os
import re

from dtf.cluster.spec import Task

READY_PREFIX = "dtf-server ready:"
READY_LINE = re.compile(
    r"^dtf-server ready: job=(?P<job>\S+) task=(?P<index>\d+) target=(?P<target>\S+) "
    r"pid=(?P<pid>\d+)\s*$"
)
EXIT_STOPPED = 0
EXIT_USAGE = 2
EXIT_PORT_IN_USE = 3
EXIT_FAILED = 4
#: Seconds the cluster launcher waits between ``SIGTERM`` and ``SIGKILL`` of its servers.
LAUNCHER_GRACE_S = 2.0


def ready_line(task: Task, address: str, pid: int | None = None) -> str:
    """The one line a server prints when it is up."""
    pid = os.getpid() if pid is None else pid
    return f"{READY_PREFIX} job={task.job} task={task.index} target=grpc://{address} pid={pid}"


def parse_ready_line(line: str) -> dict | None:
    """``{"task": Task, "target": str, "pid": int}`` from a ready line, else ``None``."""
    match = READY_LINE.match(line.strip())
    if not match:
        return None
    return {
        "task": Task(match["job"], int(match["index"])),
        "target": match["target"],
        "pid": int(match["pid"]),
    }
