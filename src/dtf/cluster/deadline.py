"""No wait without a bound: run a remote op with a deadline, and say what a client must do.

Why a helper? A client op sent to a task that stopped answering (a frozen process, a cut
link) waits inside TensorFlow's C++ code, and Python handles a signal only between two
bytecodes of the main thread: Ctrl-C in a terminal, or Jupyter's "interrupt the kernel"
(also a ``SIGINT``), sets a flag that nobody reads until the call returns. Measured by
``tests/test_deadlines.py``: a client blocked on a ``SIGSTOP``-ed worker, without the course's
keepalive options, still blocks after two ``SIGINT`` several seconds later, in eager and in
TF1 mode. Only three things end such a wait:

* gRPC keepalive (:func:`dtf.cluster.apply_grpc_options`, which ``LocalCluster.start()`` now
  also calls): ``UnavailableError`` ~3 s into a call to a task that stopped answering, but
  about a minute after the task stopped for a call that was already waiting
  (:mod:`dtf.cluster.env`);
* a TF1 deadline: ``Session.run(..., options=tf.compat.v1.RunOptions(timeout_in_ms=N))`` or
  ``ConfigProto(operation_timeout_in_ms=N)`` for every run of a session: ``DeadlineExceededError``;
* :func:`run_with_deadline`: the op runs in a background thread while the caller waits on an
  event with a timeout, a wait that Ctrl-C *does* interrupt, and raises
  :class:`TaskTimeoutError` naming the task, its address and what to do. The thread cannot be
  stopped (nothing can stop a blocked gRPC call from Python): it ends when the call ends,
  and its result is dropped; :func:`abandoned` lists the ones still running.

The classic TF1 client, ``tf.compat.v1.Session("grpc://worker0:2222")``, waits before its
first run until *every* task of the cluster answers, forever and silently if one has no
server, e.g. the ``host`` task of *Distributed Computation in TensorFlow*, which a client
plays. :func:`client_hint` is the line ``python -m dtf.cluster.server`` and
``python -m dtf.netns up`` print about it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from dtf.cluster.spec import STRATEGY_JOBS, ClusterError, Task, all_tasks, parse_task

#: TensorFlow errors that mean "the task did not answer" (checked by name: no TF import).
NO_ANSWER_ERRORS = ("UnavailableError", "DeadlineExceededError")
_abandoned: list[threading.Thread] = []


class TaskTimeoutError(ClusterError, TimeoutError):
    """A remote op's task did not answer in time; ``task``, ``address``, ``seconds``."""

    def __init__(self, message: str, task=None, address=None, seconds=None):
        super().__init__(message)
        self.task, self.address, self.seconds = task, address, seconds


def describe(task=None, address: str | None = None, cluster=None) -> str:
    """``"worker/1 at 127.0.0.1:2223"`` (what is known of it) for messages."""
    if cluster is not None and task is not None:
        task = cluster.task(task)
        address = address or cluster.address(task)
    name = str(task) if task is not None else "the remote task"
    return f"{name} at {address}" if address else name


def run_with_deadline(
    fn: Callable, seconds: float, *args, task=None, address=None, cluster=None, **kwargs
):
    """Return ``fn(*args, **kwargs)``, run in a background thread, or raise
    :class:`TaskTimeoutError` when it has not returned within ``seconds``.

    ``task`` (``"worker/1"`` or a :class:`~dtf.cluster.Task`), ``address`` or ``cluster`` (a
    ``LocalCluster``, to look the address up) name what the op waits for in the error. An
    ``UnavailableError`` / ``DeadlineExceededError`` raised by ``fn`` becomes a
    :class:`TaskTimeoutError` naming the task too (the original is its ``__cause__``); other
    exceptions pass unchanged. The caller's wait is interruptible (Ctrl-C, a kernel
    interrupt); the thread is not (see the module docstring).
    """
    seconds = float(seconds)
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    who = describe(task, address, cluster)
    if cluster is not None and task is not None:
        task, address = cluster.task(task), address or cluster.address(task)
    done = threading.Event()
    box: dict = {}

    def call() -> None:
        try:
            box["result"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc
        finally:
            done.set()

    began = time.monotonic()
    thread = threading.Thread(target=call, name=f"dtf-deadline {who}", daemon=True)
    thread.start()
    if not done.wait(seconds):  # a lock wait with a timeout: Ctrl-C interrupts it
        _abandoned.append(thread)
        raise TaskTimeoutError(
            f"{who} did not answer within {seconds:g} s: its process may be frozen, swamped "
            "or cut off. Check it (cluster.check(timeout=2), or dtf.cluster.answers(address)), "
            "restart it, or reconnect; the call goes on in a background thread until gRPC "
            "gives up, and its result is dropped.",
            task,
            address,
            seconds,
        )
    if "error" in box:
        error = box["error"]
        if type(error).__name__ in NO_ANSWER_ERRORS:
            first = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
            raise TaskTimeoutError(
                f"{who} did not answer: {type(error).__name__} after "
                f"{time.monotonic() - began:.1f} s ({first}). Check that its process runs and "
                "answers (cluster.check(timeout=2)); restart it or reconnect.",
                task,
                address,
                seconds,
            ) from error
        raise error
    return box["result"]


def abandoned() -> list[threading.Thread]:
    """Threads of :func:`run_with_deadline` that timed out and still wait on their call."""
    _abandoned[:] = [t for t in _abandoned if t.is_alive()]
    return list(_abandoned)


def client_hint(jobs: Mapping[str, list], task=None) -> str | None:
    """What a client of ``jobs`` must do so that a TF1 session does not wait forever, or
    ``None`` when the spec has a single task.

    ``task``: the task this process serves. Tasks of jobs a strategy does not know (``host``)
    are the ones a client usually plays: they are named first.
    """
    served = None if task is None else parse_task(task, jobs)
    others = [t for t in all_tasks(jobs) if t != served]
    if not others:
        return None
    client_tasks = [t for t in others if t.job not in STRATEGY_JOBS]
    if client_tasks:
        first = client_tasks[0]
        filters = sorted({f"/job:{t.job}" for t in all_tasks(jobs) if t.job in STRATEGY_JOBS})
        who = ", ".join(map(str, client_tasks))
        return (
            f"clients: no server of this spec plays {who} unless a client does: a TF1 "
            f"Session('grpc://...') waits forever until every task answers. Play {first} "
            f"(tf.distribute.Server(spec, job_name={first.job!r}, task_index={first.index}) "
            "then Session(server.target), or tf.config.experimental_connect_to_cluster(spec, "
            f"job_name={first.job!r}, task_index={first.index})), or give the session "
            f"config=tf.compat.v1.ConfigProto(device_filters={filters}) (the jobs it uses), "
            "and bound every run with RunOptions(timeout_in_ms=...)."
        )
    listed = ", ".join(map(str, others[:6])) + (", ..." if len(others) > 6 else "")
    return (
        f"clients: a TF1 Session('grpc://...') waits until every task answers ({listed} "
        "too): start them all, or give the session config=tf.compat.v1.ConfigProto("
        f"device_filters=['/job:{(served or others[0]).job}/task:{(served or others[0]).index}'])"
        ", and bound every run with RunOptions(timeout_in_ms=...)."
    )


__all__ = [
    "NO_ANSWER_ERRORS",
    "Task",
    "TaskTimeoutError",
    "abandoned",
    "client_hint",
    "describe",
    "run_with_deadline",
]
