"""Checkers of Lab 04 · Clusters (``labs/04_clusters_lab.ipynb``).

1. a ``tf.train.ClusterSpec``, read back through TensorFlow's own API; 2. two stages on two
workers of a running cluster; 3. a sum on every worker that never waits for one that is down
(the checker freezes a worker and kills another, then restores the cluster); 4. read real
placement logs of task 2's stages, each run with one mistake. Tasks 2 to 4 run against the
lab's :class:`dtf.cluster.LocalCluster`, whose excluded task (``host/0``) is the notebook.
"""

from __future__ import annotations

import contextvars
import difflib
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dtf._util import error_line, is_whole_number
from dtf.checks.core import (
    Mistake,
    Wrong,
    call_function,
    diagnose,
    eager_rows,
    expect_close,
    expect_kind,
    expect_number,
    expected_got,
    placement_table,
    short,
    task,
)
from dtf.cluster.spec import is_loopback

LAB = "lab04"

#: ``/job:J/replica:0/task:T/...`` or ``/job:J/task:T/...``: the task part of a device name.
_TASK_OF = re.compile(r"^/job:(?P<job>[^/]+)(?:/replica:\d+)?/task:(?P<task>\d+)")
#: Seconds the checkers of tasks 2 and 3 try to get a first op through to every worker.
WARM_UP_S = 15.0
_RESTART_HINT = "run the cells of 'The lab's cluster', then this one"


def task_of(device: str) -> str:
    """``/job:worker/replica:0/task:1/device:CPU:0`` -> ``/job:worker/task:1``; a local name
    -> ``/job:localhost/task:0``, the name of a process that belongs to no cluster."""
    m = _TASK_OF.match(str(device))
    return f"/job:{m['job']}/task:{m['task']}" if m else "/job:localhost/task:0"


def worker_addresses(cluster: Any) -> list[str]:
    """The ``host:port`` of every worker of a ``LocalCluster``, ``ClusterSpec`` or dict."""
    jobs = cluster.as_dict() if hasattr(cluster, "as_dict") else cluster
    if not isinstance(jobs, Mapping) or not jobs.get("worker"):
        raise ValueError(f"expected a cluster with a 'worker' job, got {short(cluster)}")
    return [str(a) for a in jobs["worker"]]


def _run_bounded(function: Callable[[], Any], wait_s: float):
    """Run ``function`` in a daemon thread (in a copy of this context, so that the task being
    checked is known there) and wait at most ``wait_s`` s: ``(finished, result, error,
    seconds)``. A function that has not finished is left running (Python cannot stop a
    thread): the checker then restores the cluster, which lets it finish."""
    context = contextvars.copy_context()
    box: dict[str, Any] = {}

    def target() -> None:
        began = time.monotonic()
        try:
            box["result"] = context.run(function)
        except BaseException as exc:  # noqa: BLE001 - handed to the checker's thread
            box["error"] = exc
        box["seconds"] = time.monotonic() - began

    thread = threading.Thread(target=target, name="dtf-lab04-task3", daemon=True)
    thread.start()
    thread.join(wait_s)
    if thread.is_alive():
        return False, None, None, wait_s
    return True, box.get("result"), box.get("error"), box["seconds"]


def warm_up(count: int) -> None:
    """Run a tiny op (``Max``) on each of the first ``count`` workers until it works, for at
    most :data:`WARM_UP_S` s in all; then raise ``TimeoutError`` or the last ``OpError``.

    An op sent to a worker that is fine can fail *once* with ``UnavailableError``: "ping
    timeout" after the worker was frozen, "Too many pings" after this process left its
    connection idle for ~5 s (measured with :mod:`dtf.cluster`'s keepalive defaults); the
    next op works. The checkers run this before an answer, outside any capture."""
    import tensorflow as tf

    def ops() -> None:
        deadline = time.monotonic() + WARM_UP_S
        for index in range(count):
            while True:
                try:
                    with tf.device(f"/job:worker/task:{index}"):
                        tf.reduce_max(tf.ones([2])).numpy()
                    break
                except tf.errors.OpError:
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.1)

    finished, _, error, _ = _run_bounded(ops, WARM_UP_S + 5.0)
    if not finished:
        raise TimeoutError(f"an op on a worker did not return within {WARM_UP_S + 5.0:g} s")
    if error is not None:
        raise error


def _running(cluster: Any, so: str, default: bool = True) -> None:
    """A :class:`Wrong` unless ``cluster`` runs (``so``: why it matters; ``default``: for a
    spec that has no ``running``)."""
    if not getattr(cluster, "running", default):
        raise Wrong(f"the cluster is not running, so {so}", _RESTART_HINT)


def _warm_up_or_wrong(count: int) -> None:
    try:
        warm_up(count)
    except Exception as exc:
        raise Wrong(
            f"the checker could not run an op on every worker ({error_line(exc)})",
            "run the cells of 'The lab's cluster' (they start the cluster and connect this "
            "process to it), then this one; if that does not help, restart the kernel",
        ) from None


def example_ports(num_workers: int) -> list[int]:
    """Task 1's ports for ``num_workers`` workers: one for the ps, then one per worker."""
    return [2222 + i for i in range(1 + num_workers)]


def layouts(num_workers: int) -> list[tuple[int, tuple[int, ...]]]:
    """The ``(num_workers, ports)`` task 1 is checked on: the lab's own, one worker, and
    three workers whose ports are not in order."""
    cases = [(num_workers, tuple(example_ports(num_workers))), (1, (5000, 5001))]
    return list(dict.fromkeys([*cases, (3, (7001, 7000, 7003, 7002))]))


#: Task 1: the host the task names for every task.
HOST = "127.0.0.1"


def expected_spec(num_workers: int, ports) -> dict[str, list[str]]:
    """Task 1's answer: ``ports[0]`` for ``ps/0``, ``ports[1 + i]`` for ``worker/i``."""
    return {
        "ps": [f"{HOST}:{ports[0]}"],
        "worker": [f"{HOST}:{p}" for p in ports[1 : 1 + num_workers]],
    }


#: The messages of the ``TypeError``\s that ``tf.train.ClusterSpec`` raises for a malformed dict.
_CLUSTER_SPEC_TYPE_ERROR = re.compile(
    r"(must be bytes or unicode|must be a list or a dictionary|must be a dictionary mapping)"
)
_NOT_A_SPEC = "for {what}: expected a tf.train.ClusterSpec, got "
_PORTS = "for {what}: the ports are not where the task puts them (yours: {yours})"
#: Task 1: the known mistakes, over the facts of :func:`task1`: what the answer is, then
#: (``host`` not :data:`HOST`) its hosts, then its ports.
TASK1_SPEC_MISTAKES = (
    Mistake(
        lambda got, **_: isinstance(got, Mapping),
        _NOT_A_SPEC + "a dict",
        "the dict is what TensorFlow's cluster is made of; the task asks for the "
        "tf.train.ClusterSpec built from it",
    ),
    Mistake(
        lambda got, **_: isinstance(got, (str, bytes)),
        _NOT_A_SPEC + "the text {shown}",
        "a tf.train.ClusterSpec is built from a dict {{job: [addresses]}}, not from text",
    ),
    Mistake(lambda **_: True, _NOT_A_SPEC + "{shown}", "the task asks for a tf.train.ClusterSpec"),
)
TASK1_HOST_MISTAKES = (
    Mistake(
        lambda host, **_: is_loopback(host),
        "for {what}: task {name} has the host {host!r}, a loopback address, but not the one "
        "the task names",
        "the task names one address for every host: a name such as 'localhost' is "
        "resolved by each machine's own resolver, and is not that address",
    ),
    Mistake(
        lambda host, **_: host in ("0.0.0.0", "::"),
        "for {what}: task {name} has the address {address!r}, which no client can connect to",
        "0.0.0.0 means 'every interface' to a server that listens; a spec names "
        "the address clients connect to (a TensorFlow server listens on every interface "
        "anyway)",
    ),
    Mistake(
        lambda **_: True,
        "for {what}: task {name} has the host {host!r}, which is not a loopback address",
        "every task runs on this machine, and a TensorFlow server runs any graph sent to it "
        "without authentication, so the course keeps clusters on loopback",
    ),
)
TASK1_PORT_MISTAKES = (
    Mistake(
        lambda got, n, ports, **_: got == {"ps": [ports[n]], "worker": list(ports[:n])},
        _PORTS,
        "your ps took the last port and the workers the first ones: read the order again",
    ),
    Mistake(
        lambda got, ports, **_: (
            sorted(got["worker"]) == sorted(ports[1:]) and got["worker"] != list(ports[1:])
        ),
        _PORTS,
        "task i of a job is the i-th address of its list: are yours in the order of `ports`?",
    ),
    Mistake(lambda **_: True, _PORTS, "the task says which port of `ports` each task takes"),
)


def _tasks_of(spec: Any, what: str) -> dict[str, list[str]]:
    """``{job: [address of task 0, 1, ...]}``, read through TensorFlow's own API."""
    jobs: dict[str, list[str]] = {}
    for job in spec.jobs:
        indices = list(spec.task_indices(job))
        if indices != list(range(len(indices))):
            raise Wrong(
                f"for {what}: the tasks of job {job!r} have the indices {indices}, "
                f"not 0 to {len(indices) - 1}",
                "your job is sparse, as a dict {index: address} makes it: in the task, the "
                "i-th address of a job is task i, counted from 0",
            )
        jobs[job] = [spec.task_address(job, i) for i in indices]
    return jobs


@task(LAB, 1, references=("dtf.checks.lab04.expected_spec",))
def task1(answer: Any, num_workers: int) -> str:
    """``cluster_spec(num_workers, ports) -> tf.train.ClusterSpec``: ``ps/0`` at
    ``HOST:ports[0]``, ``worker/i`` at ``HOST:ports[1 + i]``, checked on :func:`layouts`
    through TensorFlow's view of it: the jobs, tasks 0 to N-1, every address ``host:port``
    with the host :data:`HOST`, no address twice, the ports in order."""
    import tensorflow as tf

    cases = layouts(num_workers)
    for n, ports in cases:
        what = f"{n} worker{'s' if n != 1 else ''} and ports {list(ports)}"
        try:
            got = call_function(answer, n, list(ports))
        except Wrong as exc:
            if "raised TypeError" in exc.detail and _CLUSTER_SPEC_TYPE_ERROR.search(exc.detail):
                raise Wrong(
                    f"for {what}: {exc.detail}",
                    "tf.train.ClusterSpec takes {job: [address, ...]}, each address the "
                    "text 'host:port'",
                ) from None
            raise
        if not isinstance(got, tf.train.ClusterSpec):
            diagnose(TASK1_SPEC_MISTAKES, got=got, what=what, shown=short(got))
        jobs, expected = _tasks_of(got, what), expected_spec(n, ports)
        if sorted(jobs) != sorted(expected):
            extra = sorted(set(jobs) - set(expected))
            close = difflib.get_close_matches(extra[0], list(expected), n=1) if extra else []
            mean = f" ({extra[0]!r}: did you mean {close[0]!r}?)" if close else ""
            raise Wrong(
                expected_got(sorted(expected), sorted(jobs), f"{what}, the jobs") + mean,
                "name the jobs exactly 'ps' and 'worker': a device name says "
                "/job:ps/task:0, and TensorFlow's strategies look for these names",
            )
        seen: dict[str, str] = {}
        got_ports: dict[str, list[int]] = {}
        for job in expected:
            if len(jobs[job]) != len(expected[job]):
                raise Wrong(
                    expected_got(len(expected[job]), len(jobs[job]), f"{what}, tasks of {job!r}"),
                    "one address per task: 1 ps task and num_workers worker tasks",
                )
            got_ports[job] = []
            for index, address in enumerate(jobs[job]):
                name = f"{job}/{index}"
                host, sep, port = str(address).strip().rpartition(":")
                if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                    raise Wrong(
                        f"for {what}: task {name} has the address {address!r}, not 'host:port'",
                        "an address is the text 'host:port'",
                    )
                if host.strip("[]") != HOST:
                    facts = dict(what=what, name=name, host=host.strip("[]"), address=address)
                    diagnose(TASK1_HOST_MISTAKES, **facts)
                if address in seen:
                    raise Wrong(
                        f"for {what}: tasks {seen[address]} and {name} have the same address "
                        f"{address!r}",
                        "every task is a server of its own and needs a port of its own",
                    )
                seen[address] = name
                got_ports[job].append(int(port))
        if got_ports != {
            job: [int(a.rpartition(":")[2]) for a in expected[job]] for job in expected
        }:
            yours = ", ".join(f"{job} {got_ports[job]}" for job in expected)
            diagnose(TASK1_PORT_MISTAKES, got=got_ports, n=n, ports=ports, what=what, yours=yours)
    devices = ", ".join(
        f"/job:{job}/task:{i}"
        for job, addresses in expected_spec(*cases[0]).items()
        for i in range(len(addresses))
    )
    return (
        f"TensorFlow reads the expected jobs, tasks and addresses from your ClusterSpec in "
        f"{len(cases)} layouts; yours has the tasks {devices}, all on {HOST}"
    )


#: Task 2: the batch and the widths of the two stages.
BATCH, FEATURES, HIDDEN, OUTPUTS = 4, 3, 5, 2
#: Ops that compute stage 1's ReLU: ``tf.nn.relu`` runs ``Relu``, ``tf.maximum(h, 0)``
#: ``Maximum``.
ACTIVATION_OPS = ("Relu", "Maximum")


def worker_pair(cluster: Any) -> list[str]:
    """Task 2's workers: ``/job:worker/task:0`` and ``task:1``, or task 0 twice if alone."""
    count = len(worker_addresses(cluster))
    return [f"/job:worker/task:{i}" for i in ((0, 1) if count >= 2 else (0, 0))]


def stage_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Task 2's ``x``, ``w1`` and ``w2`` (float32, the same on every run)."""
    rng = np.random.default_rng(4)
    shapes = ((BATCH, FEATURES), (FEATURES, HIDDEN), (HIDDEN, OUTPUTS))
    x, w1, w2 = (rng.normal(size=shape).astype(np.float32) for shape in shapes)
    return x, w1, w2


def _tasks_that_ran(table, op_type: str) -> list[str]:
    """The tasks (``/job:J/task:T``, in log order, each once) that ran ops of ``op_type``."""
    rows = eager_rows(table, [op_type])
    column = "device_full" if "device_full" in rows else "device"
    return list(dict.fromkeys(task_of(d) for d in rows[column]))


def _local_task(cluster: Any) -> str:
    excluded = sorted(getattr(cluster, "excluded", ()) or ())
    return excluded[0].device if len(excluded) == 1 else "/job:localhost/task:0"


@task(LAB, 2)
def task2(answer: Any, cluster: Any) -> str:
    """``two_stages(x, w1, w2, workers) -> (y, placement table)``: ``h = relu(x @ w1)`` on
    ``workers[0]``, ``y = h @ w2`` on ``workers[1]`` (:func:`worker_pair`); checked: ``y``,
    and the tasks of both MatMuls and of the ReLU in the log."""
    import tensorflow as tf

    _running(cluster, "there is no worker to place the stages on")
    pair = worker_pair(cluster)
    _warm_up_or_wrong(len(worker_addresses(cluster)))
    arrays = stage_inputs()
    got = call_function(answer, *(tf.constant(a) for a in arrays), list(pair))
    y, table = expect_kind(got, (tuple, list), "a pair (y, placement table)", size=2)
    a, b, c = arrays
    expect_close(
        np.maximum(a @ b, 0.0) @ c,
        y,
        what="y",
        atol=1e-5,
        rtol=1e-5,
        hint="your y is not what the task's two stages give: compare each of your stages with "
        "its formula",
    )
    table = placement_table(table)
    ran = _tasks_that_ran(table, "MatMul")
    order = list(dict.fromkeys(pair))
    here = _local_task(cluster)
    if not ran:
        raise Wrong(
            "your placement table has no MatMul",
            "the table must be that of the capture in which both stages ran",
        )
    if len(eager_rows(table, ["MatMul"])) < 2:
        raise Wrong(
            f"your placement table shows one MatMul, on {ran[0]}: the other stage did not run "
            "as a TensorFlow op (a product in NumPy runs in this notebook's process, and no "
            "log sees it)",
            "both stages are TensorFlow ops, each in the device scope of its worker",
        )
    if ran != order and here in ran:
        raise Wrong(
            f"a MatMul ran on {here}, this notebook's own process, not on a worker "
            f"(the MatMuls ran on {', '.join(ran)})",
            "ops run in the client unless a device scope sends them elsewhere: look at "
            "the scope in effect where each stage runs",
        )
    if ran != order and len(order) == 2 and ran == order[:1]:
        raise Wrong(
            f"both MatMuls ran on {order[0]}; stage 2 belongs on {order[1]}",
            "look at the device scope in effect where stage 2 runs",
        )
    if ran != order:
        raise Wrong(
            expected_got(", ".join(order), ", ".join(ran), "the tasks of the MatMuls, in order"),
            "stage 1 belongs on workers[0], stage 2 on workers[1]: look at the scope of each",
        )
    found = [(kind, _tasks_that_ran(table, kind)) for kind in ACTIVATION_OPS]
    kind, relu = next(((k, t) for k, t in found if t), (None, []))
    if kind is None:
        raise Wrong(
            "y is right, but your placement table shows no op for stage 1's ReLU (a Relu or "
            f"a Maximum), so it did not run on {order[0]} as a TensorFlow op",
            "stage 1's ReLU did not run as a TensorFlow op inside the capture: look at how "
            "your stage 1 computes it",
        )
    if relu != [order[0]]:
        raise Wrong(
            expected_got(order[0], ", ".join(relu), f"the task of the {kind}"),
            f"the {kind} is part of stage 1 (its ReLU), yet it ran outside stage 1's device scope",
        )
    lives = f"; y lives on {task_of(y.device)} until it is read" if getattr(y, "device", "") else ""
    if len(order) == 1:
        return (
            f"both stages ran on {order[0]}, the only worker (with NUM_WORKERS >= 2 they "
            f"would run on two){lives}"
        )
    return f"stage 1 ran on {order[0]} and stage 2 on {order[1]}, as the placement log shows{lives}"


#: Task 3: seconds a worker may take to answer before it counts as down (your ``timeout``);
#: how much longer your function may take, whatever the workers do; how much longer still
#: the checker waits for it to return at all before it reports that it hangs.
TIMEOUT_S = 2.0
SLACK_S = 2.0
GRACE_S = 3.0
#: Task 3: the tensor every worker sums.
SUM_INPUT = np.arange(12, dtype=np.float32).reshape(3, 4)


def allowed_s() -> float:
    """The seconds your task 3 function may take: :data:`TIMEOUT_S` + :data:`SLACK_S`."""
    return TIMEOUT_S + SLACK_S


def _worker_index(key: Any, count: int, jobs: Mapping[str, list]) -> int:
    """The worker index a key names: ``1``, ``"worker/1"``, ``"/job:worker/task:1"``, ..."""
    from dtf.cluster import ClusterConfigError
    from dtf.cluster.spec import parse_task

    if is_whole_number(key):
        if not 0 <= int(key) < count:
            raise Wrong(
                f"there is no worker {int(key)}: the cluster has {count} worker(s)",
                f"use the indices 0 to {count - 1} of spec['worker']",
            )
        return int(key)
    try:
        found = parse_task(key, jobs)
    except ClusterConfigError as exc:
        raise Wrong(
            f"{key!r} does not name a worker ({exc})", "key your dict by worker index: 0, 1, ..."
        ) from None
    if found.job != "worker":
        raise Wrong(
            f"your dict has an entry for {found}, which is not a worker",
            "one entry per worker of spec['worker'], and nothing else",
        )
    return found.index


def _sums(got: Any, jobs: Mapping[str, list], situation: str) -> dict[int, float | None]:
    count = len(jobs["worker"])
    if not isinstance(got, Mapping):
        raise Wrong(
            f"with {situation}: expected a dict {{worker index: sum or None}}, got {short(got)}",
            "one entry per worker index: its sum, or None",
        )
    out: dict[int, float | None] = {}
    for key, value in got.items():
        index = _worker_index(key, count, jobs)
        if value is None:
            out[index] = None
            continue
        out[index] = expect_number(
            value,
            f"with {situation}: for worker {index}, expected a number or None, got {short(value)}",
            shape_detail=f"with {situation}: for worker {index}, expected one number (the sum "
            f"of x), got {short(value)}",
            shape_hint="your value is not one number: it keeps axes of x",
        )
    missing = [i for i in range(count) if i not in out]
    if missing:
        raise Wrong(
            f"with {situation}: your dict has no entry for worker {missing[0]}",
            "one entry per worker of spec['worker']: None for a worker that is down",
        )
    return out


#: Task 3: the known mistakes of one worker's entry, over the facts of :func:`_run_case`.
TASK3_MISTAKES = (
    Mistake(
        lambda state, value, **_: state and value is not None,
        "with {situation}: for worker {index}, which is {state}, you returned {value:g}",
        "worker {index} is {state}: a worker that does not answer within `timeout` is down, "
        "and its entry is None",
    ),
    Mistake(
        lambda state, value, **_: not state and value is None,
        "with {situation}: for worker {index}, which is up, you returned None",
        "worker {index} answers within `timeout`, yet your function took it for down: look at "
        "which address you ask for worker i, and how long you wait",
    ),
    Mistake(
        lambda state, value, expected, **_: not state and abs(value - expected) > 1e-4,
        "with {situation}: for worker {index}, your {value:g} is not the sum of x",
        "each worker that is up sums x: the sum of all its elements, as a float",
    ),
)


def _client(cluster: Any):
    excluded = sorted(getattr(cluster, "excluded", ()) or ())
    if len(excluded) != 1:
        raise Wrong(
            "the checker needs the lab's cluster: one task (host/0) played by this notebook, "
            f"got {short(cluster)}",
            "pass `cluster`, the LocalCluster started in 'The lab's cluster'",
        )
    return excluded[0]


def _freeze(process, timeout: float = 5.0) -> None:
    """``SIGSTOP`` ``process`` and wait until the system says it is stopped (measured: right
    after the signal a handshake was still answered in ~1 call of 5; once stopped, never)."""
    import psutil

    process.suspend()
    deadline = time.monotonic() + timeout
    while process.status() != psutil.STATUS_STOPPED:
        if time.monotonic() >= deadline:
            raise Wrong(f"the checker could not freeze worker process {process.pid}")
        time.sleep(0.005)
    time.sleep(0.05)


def _restore(cluster: Any, frozen, killed: str) -> None:
    """Resume ``frozen``, restart ``killed`` if it is down (and connect again), then wait
    until every worker answers (:func:`warm_up`); a :class:`Wrong` says what to do if not."""
    import psutil
    import tensorflow as tf

    try:
        try:
            if frozen.status() == psutil.STATUS_STOPPED:
                frozen.resume()
        except psutil.NoSuchProcess:
            pass
        if not cluster.alive(killed):
            cluster.restart(killed)
            client = _client(cluster)
            tf.config.experimental_connect_to_cluster(
                cluster.spec, job_name=client.job, task_index=client.index
            )
        warm_up(len(cluster.as_dict()["worker"]))
    except Exception as exc:
        raise Wrong(
            f"the checker could not restore the cluster after its check ({error_line(exc)})",
            "restart the kernel and run the lab from the top",
        ) from None


def _run_case(answer, x, jobs, down: dict[int, str], situation: str, if_hangs: str):
    """Call the learner's function in a thread, bounded in time, and check its sums."""
    limit = allowed_s()
    spec = {j: list(a) for j, a in jobs.items()}
    finished, result, error, seconds = _run_bounded(
        lambda: call_function(answer, x, spec, TIMEOUT_S), limit + GRACE_S
    )
    if not finished:
        raise Wrong(
            f"with {situation}: your function did not return within {limit + GRACE_S:g} s "
            f"(it may take {limit:g} s: timeout + {SLACK_S:g} s), so it would hang",
            if_hangs,
        )
    if isinstance(error, Wrong) and error.detail.startswith("`") and " raised " in error.detail:
        if not down:  # every worker up: the error is the learner's own
            raise Wrong(f"with {situation}: {error.detail}", error.hint)
        raise Wrong(
            f"with {situation}: {error.detail}",
            "a worker that is down must give None, not an exception: your function let the "
            "error of a worker that is down out (an op can fail too on a worker that dies "
            "after it answered)",
        )
    if error is not None:
        raise error
    if seconds > limit:
        raise Wrong(
            f"with {situation}: your function returned, but after more than the "
            f"{limit:g} s allowed (timeout = {TIMEOUT_S:g} s, plus {SLACK_S:g} s)",
            if_hangs,
        )
    expected = float(SUM_INPUT.sum())
    for index, value in sorted(_sums(result, jobs, situation).items()):
        facts = dict(index=index, value=value, state=down.get(index), expected=expected)
        diagnose(TASK3_MISTAKES, **facts, situation=situation)


def _sent_to(table, where: str) -> list[str]:
    """The op types the placement log shows on task ``where``, each run once."""
    table = eager_rows(table)
    rows = table[[task_of(d) == where for d in table["device"]]] if len(table) else table
    return sorted(set(map(str, rows["op_type"])))


@task(LAB, 3)
def task3(answer: Any, cluster: Any) -> str:
    """``sums_on_workers(x, spec, timeout) -> {worker index: sum or None}``: the sum of ``x``
    on every worker that is up, None for one that does not answer within ``timeout``, within
    :func:`allowed_s`, without raising. Called with every worker up (a Sum on each), worker 0
    frozen (no op may be sent to it) and the last worker killed; then the cluster is
    restored, also after a failed check."""
    import psutil
    import tensorflow as tf

    from dtf import placement

    _running(cluster, "the check cannot freeze and kill its workers", default=False)
    _client(cluster)
    jobs = cluster.as_dict()
    count = len(jobs["worker"])
    x = tf.constant(SUM_INPUT)
    frozen, killed = 0, count - 1
    _warm_up_or_wrong(count)  # outside the capture: its ops are not the answer's
    with placement.capture() as log:
        _run_case(
            answer,
            x,
            jobs,
            {},
            "every worker up",
            "with every worker up, each answers within milliseconds: does your function "
            "wait for something else?",
        )
    ran = set(_tasks_that_ran(log.table, "Sum"))
    for index in range(count):
        if f"/job:worker/task:{index}" not in ran:
            raise Wrong(
                f"with every worker up: the sum for worker {index} was not computed on "
                f"/job:worker/task:{index} (the placement log shows Sum on "
                f"{', '.join(sorted(ran)) or 'nowhere'})",
                "each sum belongs on its worker: look at the device scope in effect where you "
                "sum for worker i",
            )
    process = psutil.Process(cluster.pid(f"worker/{frozen}"))
    try:
        _warm_up_or_wrong(count)  # a leftover error of an idle connection goes first
        _freeze(process)
        with placement.capture() as frozen_log:
            _run_case(
                answer,
                x,
                jobs,
                {frozen: "frozen"},
                f"worker {frozen} frozen",
                "a frozen process keeps its port open, so connecting works and nothing "
                "answers: your function's wait for it is not bounded by the `timeout` you were "
                "given",
            )
        # An op sent to the frozen worker (logged when sent, before it waits) relied on the
        # keepalive; Max is the checker's own warm-up op, whose log line can come late.
        sent = [
            op for op in _sent_to(frozen_log.table, f"/job:worker/task:{frozen}") if op != "Max"
        ]
        if sent:
            raise Wrong(
                f"with worker {frozen} frozen: your function sent it an op ({', '.join(sent)}), "
                "which waited until the gRPC keepalive of apply_grpc_options() gave up; the "
                "None came from TensorFlow's error, not from a wait your function bounded",
                "without that keepalive the op would wait forever: your function sent an op to "
                "a worker it had not seen answer within `timeout`",
            )
        _restore(cluster, process, f"worker/{killed}")  # worker 0 resumed, answering
        cluster.kill(f"worker/{killed}")
        _run_case(
            answer,
            x,
            jobs,
            {killed: "killed"},
            f"worker {killed} killed",
            "a killed worker never answers again: your function kept waiting for it, or "
            "asking it again, past the `timeout` you were given",
        )
    finally:
        _restore(cluster, process, f"worker/{killed}")
    story = f"a frozen worker {frozen} and a killed worker {killed} were reported down"
    if count == 1:
        story = "worker 0, the only one, was reported down while frozen and while killed"
    sums = f"{count} sums" if count > 1 else "sum"
    return (
        f"with every worker up you returned the {sums}, computed on the workers; {story} "
        f"(None), each time within the {allowed_s():g} s allowed. The checker has resumed "
        f"worker {frozen}, restarted worker {killed} and connected again"
    )


#: Task 4: what a placement log can say is wrong with Task 2's two stages, and the mistake
#: behind each case (a fixed order: the printed cases and the answers stay the same).
DIAGNOSES = {
    "correct": "nothing: each stage ran where it belongs",
    "all-on-client": "no op of either stage ran on a worker",
    "relu-on-client": "the ReLU of stage 1 ran in this notebook's process",
    "stage-2-outside-tensorflow": "stage 2 is not in the log: it did not run as TensorFlow ops",
}
PUZZLE_CASES = {
    "a": "relu-on-client",
    "b": "correct",
    "c": "stage-2-outside-tensorflow",
    "d": "all-on-client",
}


def _puzzle_stages(kind: str, x, w1, w2, workers):
    """Task 2's two stages, with the mistake ``kind`` of :data:`DIAGNOSES`."""
    import tensorflow as tf

    if kind == "all-on-client":
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)
    with tf.device(workers[0]):
        h = tf.matmul(x, w1)
        if kind != "relu-on-client":
            h = tf.nn.relu(h)
    if kind == "relu-on-client":
        h = tf.nn.relu(h)  # outside every scope: in the client
    if kind == "stage-2-outside-tensorflow":
        return h.numpy() @ w2.numpy()  # NumPy, in the client: no op, no log line
    with tf.device(workers[1]):
        return tf.matmul(h, w2)


def placement_puzzles(cluster: Any) -> dict[str, Any]:
    """``{case: placement table}``: Task 2's stages run on ``cluster``'s :func:`worker_pair`,
    each case with the mistake of :data:`PUZZLE_CASES` (the columns a learner needs)."""
    import tensorflow as tf

    from dtf import placement

    pair = worker_pair(cluster)
    x, w1, w2 = (tf.constant(a) for a in stage_inputs())
    _warm_up_or_wrong(len(worker_addresses(cluster)))
    tables = {}
    for case, kind in PUZZLE_CASES.items():
        with placement.capture() as log:
            _puzzle_stages(kind, x, w1, w2, pair)
        tables[case] = eager_rows(log.table)[["op_type", "device"]].reset_index(drop=True)
    return tables


@task(LAB, 4, references=("dtf.checks.lab04.PUZZLE_CASES",))
def task4(answer: Any, cluster: Any) -> str:
    """``diagnose_logs() -> {case: key of DIAGNOSES}`` for :func:`placement_puzzles`; the
    checker makes the logs again and first checks that each shows its mistake."""
    _running(cluster, "the logs cannot be made")
    tables = placement_puzzles(cluster)
    here = _local_task(cluster)
    for case, table in tables.items():
        tasks = {task_of(d) for d in table["device"]}
        if (PUZZLE_CASES[case] == "all-on-client") != (tasks == {here}):
            raise Wrong(  # the checker's premise: never judge on a log that says otherwise
                f"the checker's log of case {case!r} does not show its mistake ({short(tasks)})",
                "restart the kernel and run the lab from the top",
            )
    got = call_function(answer)
    expect_kind(got, Mapping, "a dict {case: key of DIAGNOSES}")
    wrong = []
    for case, kind in PUZZLE_CASES.items():
        if case not in got:
            raise Wrong(f"your dict has no diagnosis for case {case!r}", "one entry per case")
        if got[case] not in DIAGNOSES:
            raise Wrong(
                f"for case {case!r}: {short(got[case])} is not one of the diagnoses",
                "use a key of DIAGNOSES: " + ", ".join(repr(k) for k in DIAGNOSES),
            )
        if got[case] != kind:
            wrong.append((case, got[case]))
    if wrong:
        case, said = wrong[0]
        more = f" ({len(wrong) - 1} other case(s) too)" if len(wrong) > 1 else ""
        raise Wrong(
            f"for case {case!r}: your diagnosis {said!r} ({DIAGNOSES[said]}) does not fit its "
            f"log{more}",
            "for each log, find the ops of stage 1 (a MatMul and a ReLU) and of stage 2 (a "
            f"MatMul), and the task each ran on; {here} is this notebook's process, and an op "
            "that is missing did not run as TensorFlow",
        )
    return (
        f"you read all {len(PUZZLE_CASES)} placement logs right, each made by running Task "
        "2's stages on the lab's cluster"
    )
