"""Run one task of a TensorFlow cluster: ``dtf-server`` or ``python -m dtf.cluster.server``.

``dtf-server`` is the console script that installing the course declares (``pyproject.toml``,
``[project.scripts]``); ``python -m dtf.cluster.server`` is the same command, and works in
any checkout on the import path, also in a virtual environment installed before the script
existed. The notebooks use the second: it names the interpreter of the kernel.

The TensorFlow 2 successor of the ``create_server.py`` of the *Distributed Computation in
TensorFlow* post, with the command-line flags of the *Parallel Processing notes* as well.
On each machine of a cluster, start that machine's task::

    dtf-server --config cluster.json --job worker --task 1
    dtf-server --ps_hosts=ps0:2222 --worker_hosts=w0:2222,w1:2222 \\
        --job_name=worker --task_index=0

It prints one line when the server is up, then serves until ``SIGTERM``, ``SIGINT``
(Ctrl-C) or, with ``--exit-on-stdin-eof``, the end of its standard input (the way
:class:`dtf.cluster.LocalCluster` ties a server's life to its own)::

    dtf-server ready: job=worker task=1 target=grpc://127.0.0.1:2223 pid=1234

Exit status: 0 after a stop, 2 for a wrong command line or cluster spec, 3 when the task's
port is in use, 4 when the server could not start for another reason.

Security: a TensorFlow server listens on *every* interface (``0.0.0.0``), whatever host the
spec names, and runs any computation sent to it, without authentication (TensorFlow's
``SECURITY.md``). Run it only on a network you trust, and let a firewall admit only the
cluster's machines to its port.

The server process never imports Keras or JAX: it only runs the graphs clients send, and
``import tensorflow`` would import both when they are installed (TF 2.21: all of Keras, as
its ``__init__.py`` loads ``keras.src.optimizers`` eagerly; JAX in
``tensorflow/lite/python/util.py``, used only by ``TFLiteConverter.experimental_from_jax``).
:func:`import_tensorflow` leaves them out, so each server process starts sooner and spends
less CPU. Servers also get the gRPC keepalive defaults of :mod:`dtf.cluster.env`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence

from dtf._util import command_name, error_line
from dtf.cluster import deadline, exposure
from dtf.cluster import env as cluster_env
from dtf.cluster.protocol import (  # the words a parent reads: part of this command's interface
    EXIT_FAILED,
    EXIT_PORT_IN_USE,
    EXIT_STOPPED,
    EXIT_USAGE,
    READY_LINE,
    READY_PREFIX,
    parse_ready_line,
    ready_line,
)
from dtf.cluster.spec import (
    ClusterConfigError,
    ClusterError,
    PortInUseError,
    Task,
    load,
    parse_json,
    parse_task,
    port_in_use,
    split_address,
)
from dtf.supervise import watch_lifeline

__all__ = [
    "BLOCKED_MODULES",
    "DELAY_ENV",
    "EXIT_FAILED",
    "EXIT_PORT_IN_USE",
    "EXIT_STOPPED",
    "EXIT_USAGE",
    "READY_LINE",
    "READY_PREFIX",
    "build_parser",
    "cluster_from_args",
    "import_tensorflow",
    "main",
    "parse_ready_line",
    "ready_line",
    "run",
    "start_server",
    "watch_lifeline",
]

#: Modules a server process never imports (see the module docstring).
BLOCKED_MODULES = ("keras", "tf_keras", "jax")
#: For tests and demonstrations of a slow start: ``"worker/1=30,ps/0=2"`` makes those tasks
#: wait that many seconds before they create their server.
DELAY_ENV = "DTF_SERVER_START_DELAY"


def import_tensorflow():
    """Import TensorFlow for a server process, without Keras or JAX; returns the module."""
    if "tensorflow" not in sys.modules:
        for name in BLOCKED_MODULES:
            sys.modules.setdefault(name, None)  # ``import keras`` now raises ImportError
    import tensorflow as tf

    return tf


def _start_delay(task: Task) -> float:
    for item in os.environ.get(DELAY_ENV, "").split(","):
        name, sep, seconds = item.partition("=")
        if sep and name.strip() == str(task):
            return float(seconds)
    return 0.0


def start_server(jobs: Mapping[str, Sequence[str]], task: Task):
    """Create and start the ``tf.distribute.Server`` of ``task`` in this process.

    Raises :class:`PortInUseError` when the task's port is taken (checked before TensorFlow
    tries, and recognised when its bind fails), :class:`ClusterError` when the server cannot
    start for another reason.
    """
    _, port = split_address(jobs[task.job][task.index], task)
    delay = _start_delay(task)
    if delay:
        time.sleep(delay)
    if port_in_use(port):
        raise PortInUseError(task, port)
    tf = import_tensorflow()
    spec = tf.train.ClusterSpec({job: list(addresses) for job, addresses in jobs.items()})
    try:
        return tf.distribute.Server(spec, job_name=task.job, task_index=task.index, start=True)
    except tf.errors.OpError as exc:
        if port_in_use(port):
            raise PortInUseError(task, port, "the server could not bind it") from None
        raise ClusterError(
            f"task {task} could not start its server on port {port}: {error_line(exc)} "
            "(ports below 1024 need administrator rights)."
        ) from None


# --------------------------------------------------------------------------- command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=command_name("dtf-server", "dtf.cluster.server"),
        description="Start one task of a TensorFlow cluster and serve until stopped.",
        epilog="Security: the server listens on every interface and runs any computation "
        "sent to it, unauthenticated; use it only on a trusted network.",
    )
    spec = parser.add_argument_group("the cluster (one of)")
    spec.add_argument("--config", metavar="FILE", help="JSON file: {job: [host:port, ...]}")
    spec.add_argument("--cluster-json", metavar="JSON", help="the same, as JSON text")
    spec.add_argument("--ps_hosts", "--ps-hosts", metavar="H:P,...", help="TF1 style")
    spec.add_argument("--worker_hosts", "--worker-hosts", metavar="H:P,...", help="TF1 style")
    task = parser.add_argument_group("this task")
    task.add_argument("--job", "--job_name", "--job-name", dest="job", help="e.g. worker")
    task.add_argument(
        "--task", "--task_index", "--task-index", dest="task", default="0", help="default 0"
    )
    parser.add_argument(
        "--exit-on-stdin-eof",
        action="store_true",
        help="exit when standard input reaches end of file (the parent is gone)",
    )
    parser.add_argument(
        "--no-grpc-defaults",
        action="store_true",
        help=f"do not add the keepalive defaults to {cluster_env.GRPC_ENV}",
    )
    return parser


def _hosts(text: str) -> list[str]:
    return [h.strip() for h in text.split(",") if h.strip()]


def cluster_from_args(args: argparse.Namespace) -> tuple[dict[str, list[str]], Task]:
    """The cluster spec and this task from the parsed command line (ClusterConfigError)."""
    sources = [
        name
        for name, given in (
            ("--config", args.config),
            ("--cluster-json", args.cluster_json),
            ("--ps_hosts/--worker_hosts", args.ps_hosts or args.worker_hosts),
        )
        if given
    ]
    if len(sources) != 1:
        raise ClusterConfigError(
            "give the cluster exactly once: --config FILE, --cluster-json JSON, or "
            f"--worker_hosts (with --ps_hosts) (got {', '.join(sources) or 'none'})."
        )
    if args.config:
        jobs = load(args.config)
    elif args.cluster_json:
        jobs = load(parse_json(args.cluster_json, source="--cluster-json"))
    else:
        raw = {"ps": _hosts(args.ps_hosts or ""), "worker": _hosts(args.worker_hosts or "")}
        jobs = load({job: hosts for job, hosts in raw.items() if hosts})
    if any(a is None for addresses in jobs.values() for a in addresses):
        raise ClusterConfigError(
            "a server needs every task's address; task counts are for dtf.cluster.LocalCluster."
        )
    if not args.job:
        raise ClusterConfigError(f"give this task's job with --job (one of {', '.join(jobs)}).")
    text = str(args.task).strip()
    index = int(text) if text.isdigit() else text
    task = parse_task((args.job, index), jobs)
    return {job: [a for a in addresses if a is not None] for job, addresses in jobs.items()}, task


def _serve(args: argparse.Namespace, jobs: dict[str, list[str]], task: Task) -> int:
    if args.exit_on_stdin_eof:
        watch_lifeline(sys.stdin.fileno(), "the parent")
    stop = threading.Event()
    reason: list[str] = []

    def on_signal(signum, _frame) -> None:
        reason.append(signal.Signals(signum).name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    start_server(jobs, task)
    address = jobs[task.job][task.index]
    _, port = split_address(address)
    # The warnings first: whoever is told the server is ready finds them in the log already.
    print(
        f"dtf-server: listening on every interface, port {port}; it runs any computation sent "
        "to it, unauthenticated: allow only the cluster's machines to reach it.",
        file=sys.stderr,
        flush=True,
    )
    where = command_name("dtf-server", "dtf.cluster.server")
    exposure.warn_exposed([port], where)  # once (issue 19)
    hint = deadline.client_hint(jobs, task)  # what a client must do not to wait forever
    if hint:
        print(f"dtf-server: {hint}", file=sys.stderr, flush=True)
    sys.stderr.flush()  # the ExposureWarning too
    print(ready_line(task, address), flush=True)
    while not stop.wait(1.0):
        pass
    print(f"dtf-server stopped: job={task.job} task={task.index} ({reason[0]})", file=sys.stderr)
    return EXIT_STOPPED


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        jobs, task = cluster_from_args(args)
    except ClusterConfigError as exc:
        parser.print_usage(sys.stderr)
        print(f"dtf-server: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not args.no_grpc_defaults:
        cluster_env.apply_grpc_options()  # before TensorFlow creates its first channel
    for name, value in cluster_env.quiet.SETTINGS.items():
        os.environ.setdefault(name, value)
    try:
        return _serve(args, jobs, task)
    except PortInUseError as exc:
        print(f"dtf-server: error: {exc}", file=sys.stderr)
        return EXIT_PORT_IN_USE
    except Exception as exc:  # noqa: BLE001 - one clear line, then the exit status says it
        print(f"dtf-server: error: {error_line(exc, 2000)}", file=sys.stderr)
        return EXIT_FAILED


def run() -> None:
    """Entry point: run :func:`main`, then leave without interpreter shutdown.

    A started TensorFlow server cannot be stopped, and Python's normal exit can wait for its
    threads forever; ``os._exit`` ends the process at once.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
