"""Checkers of Lab 04 · Clusters (``labs/04_clusters_lab.ipynb``).

1. :func:`task1`: a ``tf.train.ClusterSpec``, read back through TensorFlow's own API;
2. :func:`task2`: two stages on two workers of a running cluster, by value and placement log;
3. :func:`task3`: a sum on every worker that never waits for one that is down: the checker
   freezes a worker and kills another, under a hard time limit, and restores the cluster;
4. :func:`task4`: read real placement logs of task 2's stages, each run with one mistake.

Tasks 2 to 4 run against the lab's :class:`dtf.cluster.LocalCluster`, whose excluded task
(``host/0``) is the notebook's own process.
"""

from __future__ import annotations

import contextvars
import difflib
import ipaddress
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from dtf._util import error_line
from dtf.checks.core import (
    Wrong,
    as_array,
    call_function,
    expect_close,
    expect_kind,
    expected_got,
    placement_table,
    short,
    task,
)

LAB = "lab04"

#: ``/job:J/replica:0/task:T/...`` or ``/job:J/task:T/...``: the task part of a device name.
_TASK_OF = re.compile(r"^/job:(?P<job>[^/]+)(?:/replica:\d+)?/task:(?P<task>\d+)")


def task_of(device: str) -> str:
    """``/job:worker/replica:0/task:1/device:CPU:0`` -> ``/job:worker/task:1``; a local name
    (``CPU:0``, ``/device:CPU:0``) -> ``/job:localhost/task:0``, the name of a process that
    belongs to no cluster."""
    m = _TASK_OF.match(str(device))
    return f"/job:{m['job']}/task:{m['task']}" if m else "/job:localhost/task:0"


def worker_addresses(cluster: Any) -> list[str]:
    """The ``host:port`` of every worker of ``cluster``: a running ``LocalCluster``, a
    ``tf.train.ClusterSpec`` or a dict spec."""
    jobs = cluster.as_dict() if hasattr(cluster, "as_dict") else cluster
    if not isinstance(jobs, Mapping) or not jobs.get("worker"):
        raise ValueError(f"expected a cluster with a 'worker' job, got {short(cluster)}")
    return [str(a) for a in jobs["worker"]]


#: Seconds the checkers of tasks 2 and 3 try to get a first op through to every worker.
WARM_UP_S = 15.0


def warm_up(count: int, timeout: float = WARM_UP_S) -> None:
    """Run a tiny op (``Max``) on each of the first ``count`` workers until it works, for at
    most ``timeout`` seconds in all, in a thread; raise ``TimeoutError`` or the last
    ``tf.errors.OpError`` after that.

    Why: an op sent to a worker that is fine can fail *once* with ``UnavailableError``,
    "ping timeout" after the worker was frozen, and "Too many pings" after this process left
    its connection idle for ~5 s or more (measured with :mod:`dtf.cluster`'s keepalive
    defaults: the server closes a connection that pings it too often without data); the next
    op works. The checkers run this before they call your function, so that such a leftover
    error never lands in your answer, and outside any ``placement.capture()`` block."""
    import tensorflow as tf

    def ops() -> None:
        deadline = time.monotonic() + timeout
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

    finished, _, error, _ = _run_bounded(ops, timeout + 5.0)
    if not finished:
        raise TimeoutError(f"an op on a worker did not return within {timeout + 5.0:g} s")
    if error is not None:
        raise error


def _running(cluster: Any, so: str, default: bool = True) -> None:
    """A :class:`Wrong` for a ``LocalCluster`` not started, or stopped: ``so`` says why that
    matters (``running`` absent: ``default``, a spec the checker can use as it is)."""
    if not getattr(cluster, "running", default):
        raise Wrong(
            f"the cluster is not running, so {so}",
            "run the cells of 'The lab's cluster', then this one",
        )


def _warm_up_or_wrong(count: int) -> None:
    try:
        warm_up(count)
    except Exception as exc:
        raise Wrong(
            f"the checker could not run an op on every worker ({error_line(exc)})",
            "run the cells of 'The lab's cluster' (they start the cluster and connect this "
            "process to it), then this one; if that does not help, restart the kernel",
        ) from None


# --------------------------------------------------------------------------- task 1


def example_ports(num_workers: int) -> list[int]:
    """Task 1's ports for ``num_workers`` workers: one for the ps, then one per worker."""
    return [2222 + i for i in range(1 + num_workers)]


def layouts(num_workers: int) -> list[tuple[int, tuple[int, ...]]]:
    """The ``(num_workers, ports)`` task 1 is checked on: the lab's own, then one worker,
    then three workers whose ports are not in order."""
    cases = [(num_workers, tuple(example_ports(num_workers))), (1, (5000, 5001))]
    cases.append((3, (7001, 7000, 7003, 7002)))
    return list(dict.fromkeys(cases))


def expected_spec(num_workers: int, ports) -> dict[str, list[str]]:
    """Task 1's answer: ``ports[0]`` for ``ps/0``, ``ports[1 + i]`` for ``worker/i``."""
    return {
        "ps": [f"127.0.0.1:{ports[0]}"],
        "worker": [f"127.0.0.1:{p}" for p in ports[1 : 1 + num_workers]],
    }


#: Task 1: the host the task names for every task.
HOST = "127.0.0.1"


def _is_loopback(host: str) -> bool:
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


#: The messages of the ``TypeError``\s that ``tf.train.ClusterSpec`` raises for a malformed dict.
_CLUSTER_SPEC_TYPE_ERROR = re.compile(
    r"(must be bytes or unicode|must be a list or a dictionary|must be a dictionary mapping)"
)


def _host_port(address: str, name: str, what: str) -> tuple[str, int]:
    """``(host, port)`` of the address TensorFlow holds for task ``name``."""
    host, sep, port = str(address).strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise Wrong(
            f"for {what}: task {name} has the address {address!r}, not 'host:port'",
            "an address is the text 'host:port'",
        )
    return host.strip("[]"), int(port)


def _check_host(host: str, address: str, name: str, what: str) -> None:
    if host == HOST:
        return
    if _is_loopback(host):
        raise Wrong(
            f"for {what}: task {name} has the host {host!r}, a loopback address, but not the "
            f"one the task names",
            "the task names one address for every host: a name such as 'localhost' is "
            "resolved by each machine's own resolver, and is not that address",
        )
    if host in ("0.0.0.0", "::"):
        raise Wrong(
            f"for {what}: task {name} has the address {address!r}, which no client can connect to",
            "0.0.0.0 means 'every interface' to a server that listens; a spec names "
            "the address clients connect to (a TensorFlow server listens on every interface "
            "anyway)",
        )
    raise Wrong(
        f"for {what}: task {name} has the host {host!r}, which is not a loopback address",
        "every task runs on this machine, and a TensorFlow server runs any graph sent to it "
        "without authentication, so the course keeps clusters on loopback",
    )


def _ports_hint(got_ports: Mapping[str, list], num_workers: int, ports) -> str:
    ps_last = {"ps": [ports[num_workers]], "worker": list(ports[:num_workers])}
    if dict(got_ports) == ps_last:
        return "your ps took the last port and the workers the first ones: read the order again"
    workers = got_ports["worker"]
    if sorted(workers) == sorted(ports[1:]) and workers != list(ports[1:]):
        return "task i of a job is the i-th address of its list: are yours in the order of `ports`?"
    return "the task says which port of `ports` each task takes"


def _as_cluster_spec(got: Any, what: str):
    """The learner's answer, which must be a ``tf.train.ClusterSpec``."""
    import tensorflow as tf

    if isinstance(got, tf.train.ClusterSpec):
        return got
    if isinstance(got, Mapping):
        raise Wrong(
            f"for {what}: expected a tf.train.ClusterSpec, got a dict",
            "the dict is what TensorFlow's cluster is made of; the task asks for the "
            "tf.train.ClusterSpec built from it",
        )
    if isinstance(got, (str, bytes)):
        raise Wrong(
            f"for {what}: expected a tf.train.ClusterSpec, got the text {short(got)}",
            "a tf.train.ClusterSpec is built from a dict {job: [addresses]}, not from text",
        )
    raise Wrong(
        f"for {what}: expected a tf.train.ClusterSpec, got {short(got)}",
        "the task asks for a tf.train.ClusterSpec",
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
                "give each job a list of addresses: the i-th address is task i (a dict "
                "{index: address} makes a sparse job, for other uses)",
            )
        jobs[job] = [spec.task_address(job, i) for i in indices]
    return jobs


@task(LAB, 1, references=("dtf.checks.lab04.expected_spec",))
def task1(answer: Any, num_workers: int) -> str:
    """``cluster_spec(num_workers, ports) -> tf.train.ClusterSpec``: one ``ps`` task at
    ``127.0.0.1:ports[0]`` and worker ``i`` at ``127.0.0.1:ports[1 + i]``. Checked on
    :func:`layouts`, through TensorFlow's own view of the answer (``jobs``,
    ``task_indices``, ``task_address``): the expected jobs, tasks 0 to N-1, every address
    ``host:port`` with the host :data:`HOST` (another loopback name is refused), no address
    twice, and the expected ports in order."""
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
        spec = _as_cluster_spec(got, what)
        jobs = _tasks_of(spec, what)
        expected = expected_spec(n, ports)
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
                host, port = _host_port(address, name, what)
                _check_host(host, address, name, what)
                if address in seen:
                    raise Wrong(
                        f"for {what}: tasks {seen[address]} and {name} have the same address "
                        f"{address!r}",
                        "every task is a server of its own and needs a port of its own",
                    )
                seen[address] = name
                got_ports[job].append(port)
        want_ports = {job: [int(a.rpartition(":")[2]) for a in expected[job]] for job in expected}
        if got_ports != want_ports:
            raise Wrong(  # the expected spec is the answer: not shown
                f"for {what}: the ports are not where the task puts them (yours: "
                f"{', '.join(f'{job} {got_ports[job]}' for job in expected)})",
                _ports_hint(got_ports, n, ports),
            )
    devices = ", ".join(
        f"/job:{job}/task:{i}"
        for job, addresses in expected_spec(*cases[0]).items()
        for i in range(len(addresses))
    )
    return (
        f"TensorFlow reads the expected jobs, tasks and addresses from your ClusterSpec in "
        f"{len(cases)} layouts; yours has the tasks {devices}, all on {HOST}"
    )


# --------------------------------------------------------------------------- task 2

#: Task 2: the batch and the widths of the two stages.
BATCH, FEATURES, HIDDEN, OUTPUTS = 4, 3, 5, 2


def worker_pair(cluster: Any) -> list[str]:
    """Task 2's two workers: ``/job:worker/task:0`` and ``/job:worker/task:1``, or task 0
    twice when the cluster has one worker."""
    count = len(worker_addresses(cluster))
    return [f"/job:worker/task:{i}" for i in ((0, 1) if count >= 2 else (0, 0))]


def stage_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Task 2's ``x``, ``w1`` and ``w2`` (float32, the same on every run)."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(BATCH, FEATURES)).astype(np.float32)
    w1 = rng.normal(size=(FEATURES, HIDDEN)).astype(np.float32)
    w2 = rng.normal(size=(HIDDEN, OUTPUTS)).astype(np.float32)
    return x, w1, w2


def _rows(table, op_type: str):
    """The rows of ``op_type``: the eager ones if there are any, else the placer's (a
    ``tf.function``), so that every op run counts once."""
    rows = table[table["op_type"] == op_type]
    eager = rows[rows["source"] == "eager"] if "source" in rows else rows
    return eager if len(eager) else rows


def _tasks_that_ran(table, op_type: str) -> list[str]:
    """The tasks (``/job:J/task:T``, in log order, each once) that ran ops of ``op_type``."""
    rows = _rows(table, op_type)
    column = "device_full" if "device_full" in rows else "device"
    return list(dict.fromkeys(task_of(d) for d in rows[column]))


#: Ops that compute stage 1's ReLU: ``tf.nn.relu`` runs ``Relu``; ``tf.maximum(h, 0)``,
#: just as right, runs ``Maximum``.
ACTIVATION_OPS = ("Relu", "Maximum")


def _activation(table) -> tuple[str | None, list[str]]:
    """``(op type, tasks that ran it)`` of the first of :data:`ACTIVATION_OPS` that the
    table shows, or ``(None, [])``."""
    for kind in ACTIVATION_OPS:
        tasks = _tasks_that_ran(table, kind)
        if tasks:
            return kind, tasks
    return None, []


def _local_task(cluster: Any) -> str | None:
    excluded = sorted(getattr(cluster, "excluded", ()) or ())
    return excluded[0].device if len(excluded) == 1 else None


@task(LAB, 2)
def task2(answer: Any, cluster: Any) -> str:
    """``two_stages(x, w1, w2, workers) -> (y, placement table)``: stage 1,
    ``h = relu(x @ w1)``, on ``workers[0]`` and stage 2, ``y = h @ w2``, on ``workers[1]``
    (:func:`worker_pair`), run inside ``placement.capture()``. Checked: ``y``, and that the
    log shows the first MatMul and the Relu on ``workers[0]``'s task and the second MatMul
    on ``workers[1]``'s."""
    import tensorflow as tf

    _running(cluster, "there is no worker to place the stages on")
    pair = worker_pair(cluster)
    _warm_up_or_wrong(len(worker_addresses(cluster)))
    arrays = stage_inputs()
    x, w1, w2 = (tf.constant(a) for a in arrays)
    got = call_function(answer, x, w1, w2, list(pair))
    y, table = expect_kind(got, (tuple, list), "a pair (y, placement table)", size=2)
    a, b, c = arrays
    expect_close(
        np.maximum(a @ b, 0.0) @ c,
        y,
        what="y",
        atol=1e-5,
        rtol=1e-5,
        hint="compare each stage with the formulas of the task: the ReLU belongs to stage 1",
    )
    table = placement_table(table)
    ran = _tasks_that_ran(table, "MatMul")
    order = list(dict.fromkeys(pair))
    here = _local_task(cluster) or "/job:localhost/task:0"
    if not ran:
        raise Wrong(
            "your placement table has no MatMul",
            "the table must be that of the capture in which both stages ran",
        )
    if len(_rows(table, "MatMul")) < 2:
        raise Wrong(
            f"your placement table shows one MatMul, on {ran[0]}: the other stage did not run "
            "as a TensorFlow op (a product in NumPy runs in this notebook's process, and no "
            "log sees it)",
            "both stages are TensorFlow ops, each in the device scope of its worker",
        )
    if ran != order:
        if here in ran:
            raise Wrong(
                f"a MatMul ran on {here}, this notebook's own process, not on a worker "
                f"(the MatMuls ran on {', '.join(ran)})",
                "ops run in the client unless a device scope sends them elsewhere: look at "
                "the scope in effect where each stage runs",
            )
        if len(order) == 2 and ran == order[:1]:
            raise Wrong(
                f"both MatMuls ran on {order[0]}; stage 2 belongs on {order[1]}",
                "look at the device scope in effect where stage 2 runs",
            )
        raise Wrong(
            expected_got(", ".join(order), ", ".join(ran), "the tasks of the MatMuls, in order"),
            "stage 1 belongs on workers[0], stage 2 on workers[1]: look at the scope of each",
        )
    kind, relu = _activation(table)
    if kind is None:
        raise Wrong(
            "y is right, but your placement table shows no op for stage 1's ReLU (a Relu or "
            f"a Maximum), so it did not run on {order[0]} as a TensorFlow op",
            "compute the ReLU with TensorFlow (tf.nn.relu or tf.maximum with 0), inside "
            "the capture and in stage 1's device scope",
        )
    if relu != [order[0]]:
        raise Wrong(
            expected_got(order[0], ", ".join(relu), f"the task of the {kind}"),
            f"the {kind} is part of stage 1 (its ReLU): compute h, ReLU included, entirely "
            "in stage 1's device scope",
        )
    lives = ""
    if hasattr(y, "device") and y.device:
        lives = f"; y lives on {task_of(y.device)} until it is read"
    if len(order) == 1:
        return (
            f"both stages ran on {order[0]}, the only worker (with NUM_WORKERS >= 2 they "
            f"would run on two){lives}"
        )
    return f"stage 1 ran on {order[0]} and stage 2 on {order[1]}, as the placement log shows{lives}"


# --------------------------------------------------------------------------- task 3

#: Task 3: seconds a worker may take to answer before it counts as down (your ``timeout``).
TIMEOUT_S = 2.0
#: Task 3: how much longer than ``timeout`` your function may take, whatever the workers do.
SLACK_S = 2.0
#: Task 3: seconds, beyond the time allowed, that the checker waits for your function to
#: return at all before it reports that it hangs (it never waits longer).
GRACE_S = 3.0
#: Task 3: the tensor every worker sums.
SUM_INPUT = np.arange(12, dtype=np.float32).reshape(3, 4)


def allowed_s(timeout: float | None = None) -> float:
    """The seconds your task 3 function may take: ``timeout`` + :data:`SLACK_S`."""
    return (TIMEOUT_S if timeout is None else timeout) + SLACK_S


def _run_bounded(function: Callable[[], Any], wait_s: float):
    """Run ``function`` in a daemon thread (in a copy of this context, so that the checks'
    task number is known there) and wait at most ``wait_s`` seconds.

    Returns ``(finished, result, error, seconds)``. A function that has not finished keeps
    running in its thread, which is left behind (Python cannot stop a thread): the checker
    then restores the cluster, which lets a function that waits for a worker finish."""
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


def _worker_index(key: Any, count: int, jobs: Mapping[str, list]) -> int:
    """The worker index a key of the learner's dict names: ``1``, ``"worker/1"``,
    ``"/job:worker/task:1"`` or ``("worker", 1)``."""
    from dtf.cluster import ClusterConfigError
    from dtf.cluster.spec import parse_task

    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        index = int(key)
        if not 0 <= index < count:
            raise Wrong(
                f"there is no worker {index}: the cluster has {count} worker(s)",
                f"use the indices 0 to {count - 1} of spec['worker']",
            )
        return index
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
        try:
            number = as_array(value).astype(np.float64)
        except (TypeError, ValueError):
            raise Wrong(
                f"with {situation}: for worker {index}, expected a number or None, "
                f"got {short(value)}"
            ) from None
        if number.shape != ():
            raise Wrong(
                f"with {situation}: for worker {index}, expected one number (the sum of x), "
                f"got {short(value)}",
                "tf.reduce_sum(x) sums over every axis",
            )
        out[index] = float(number)
    missing = [i for i in range(count) if i not in out]
    if missing:
        raise Wrong(
            f"with {situation}: your dict has no entry for worker {missing[0]}",
            "one entry per worker of spec['worker']: None for a worker that is down",
        )
    return out


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
    """``SIGSTOP`` ``process`` and wait until the system says it is stopped.

    Measured: a handshake started right after the signal was sent was still answered in ~1
    call of 5 (the process ran on for a moment); once its status reads "stopped", never."""
    import psutil

    process.suspend()
    deadline = time.monotonic() + timeout
    while process.status() != psutil.STATUS_STOPPED:
        if time.monotonic() >= deadline:
            raise Wrong(f"the checker could not freeze worker process {process.pid}")
        time.sleep(0.005)
    time.sleep(0.05)


def _restore(cluster: Any, frozen, killed: str) -> None:
    """Resume the ``frozen`` process, restart the ``killed`` task if it is down (and connect
    this process to the cluster again), then run an op on every worker until each answers
    (:func:`warm_up`). A failure is a :class:`Wrong` that says what to do."""
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


def _expect_sums(
    sums: dict[int, float | None], expected: float, down: dict[int, str], situation: str
) -> None:
    for index, value in sorted(sums.items()):
        if index in down:
            if value is not None:
                raise Wrong(
                    f"with {situation}: for worker {index}, expected None, got {value:g}",
                    f"worker {index} is {down[index]}: a worker that does not answer within "
                    "`timeout` is down, and its entry is None",
                )
        elif value is None:
            raise Wrong(
                f"with {situation}: for worker {index}, which is up, expected {expected:g}, "
                "got None",
                "worker i is task /job:worker/task:i at spec['worker'][i]; ask that address, "
                "with the `timeout` you were given",
            )
        elif abs(value - expected) > 1e-4:
            raise Wrong(
                f"with {situation}: for worker {index}, expected {expected:g}, got {value:g}",
                "each worker that is up sums x: the sum of all its elements, as a float",
            )


def _check_sum_placement(table, count: int) -> None:
    ran = set(_tasks_that_ran(table, "Sum"))
    for index in range(count):
        where = f"/job:worker/task:{index}"
        if where not in ran:
            shown = ", ".join(sorted(ran)) or "nowhere"
            raise Wrong(
                f"with every worker up: the sum for worker {index} was not computed on "
                f"{where} (the placement log shows Sum on {shown})",
                "each sum belongs on its worker: look at the device scope in effect where you "
                "sum for worker i",
            )


def _check_no_op_on_frozen(table, index: int) -> None:
    """Wrong if the placement log shows an op sent to the frozen worker ``index``: the
    answer then relied on TensorFlow's keepalive (~2 s here; without it, forever), not on a
    wait of its own. Measured: such an op is logged when it is sent, before it waits."""
    where = f"/job:worker/task:{index}"
    if "source" in table and (table["source"] == "eager").any():
        table = table[table["source"] == "eager"]  # one row per op run, as in task 2
    rows = table[[task_of(d) == where for d in table["device"]]] if len(table) else table
    # Max is the checker's own warm-up op (warm_up), run just before the freeze: a late
    # log line of it is not the answer's.
    sent = sorted(set(map(str, rows["op_type"])) - {"Max"})
    if sent:
        raise Wrong(
            f"with worker {index} frozen: your function sent it an op ({', '.join(sent)}), "
            "which waited until the gRPC keepalive of apply_grpc_options() gave up; the None "
            "came from TensorFlow's error, not from a wait your function bounded",
            "without that keepalive the op would wait forever. Before you send a worker "
            "anything, find out whether it answers at all, waiting at most `timeout` (the "
            "text of Task 3 names a tool for it)",
        )


def _situation_case(
    answer: Any,
    x: Any,
    jobs: dict,
    expected: float,
    down: dict[int, str],
    situation: str,
    hint_if_hangs: str,
) -> dict[int, float | None]:
    """Call the learner's function in a thread, bounded in time; check its sums."""
    limit = allowed_s()
    finished, result, error, seconds = _run_bounded(
        lambda: call_function(answer, x, {j: list(a) for j, a in jobs.items()}, TIMEOUT_S),
        limit + GRACE_S,
    )
    if not finished:
        raise Wrong(
            f"with {situation}: your function did not return within {limit + GRACE_S:g} s "
            f"(it may take {limit:g} s: timeout + {SLACK_S:g} s), so it would hang",
            hint_if_hangs,
        )
    if isinstance(error, Wrong):
        if error.detail.startswith("`") and " raised " in error.detail:  # from call()
            raise Wrong(
                f"with {situation}: {error.detail}",
                "a worker that is down must give None, not an exception: does your function "
                "ask each worker first, with a bounded wait, and expect an op to fail on a "
                "worker that dies after it answered?",
            )
        raise error
    if error is not None:
        raise error
    if seconds > limit:
        raise Wrong(
            f"with {situation}: your function returned, but after more than the "
            f"{limit:g} s allowed (timeout = {TIMEOUT_S:g} s, plus {SLACK_S:g} s)",
            hint_if_hangs,
        )
    sums = _sums(result, jobs, situation)
    _expect_sums(sums, expected, down, situation)
    return sums


@task(LAB, 3)
def task3(answer: Any, cluster: Any) -> str:
    """``sums_on_workers(x, spec, timeout) -> {worker index: sum or None}``: the sum of ``x``
    on every worker that is up, ``None`` for one that does not answer within ``timeout``,
    within ``timeout`` + :data:`SLACK_S` seconds, without raising. Called, each time in a
    thread waited for at most :func:`allowed_s` + :data:`GRACE_S`, with every worker up (a
    Sum on every worker), worker 0 frozen (``SIGSTOP``: no op may be sent to it) and the last
    worker killed; afterwards, also after a failed check, the cluster is restored."""
    import psutil
    import tensorflow as tf

    from dtf import placement

    _running(cluster, "the check cannot freeze and kill its workers", default=False)
    _client(cluster)
    jobs = cluster.as_dict()
    count = len(jobs["worker"])
    x = tf.constant(SUM_INPUT)
    expected = float(SUM_INPUT.sum())
    frozen, killed = 0, count - 1

    _warm_up_or_wrong(count)  # outside the capture: its ops are not the answer's
    with placement.capture() as log:
        _situation_case(
            answer,
            x,
            jobs,
            expected,
            {},
            "every worker up",
            "with every worker up, each answers within milliseconds: does your function "
            "wait for something else?",
        )
    _check_sum_placement(log.table, count)

    process = psutil.Process(cluster.pid(f"worker/{frozen}"))
    try:
        _warm_up_or_wrong(count)  # a leftover error of an idle connection goes first
        _freeze(process)
        with placement.capture() as frozen_log:
            _situation_case(
                answer,
                x,
                jobs,
                expected,
                {frozen: "frozen"},
                f"worker {frozen} frozen",
                "a frozen process keeps its port open, so connecting works and nothing "
                "answers: find out whether each worker answers, with a wait that you bound "
                "by the `timeout` you were given, and send no op to a worker that did not",
            )
        _check_no_op_on_frozen(frozen_log.table, frozen)
        _restore(cluster, process, f"worker/{killed}")  # worker 0 resumed, answering
        cluster.kill(f"worker/{killed}")
        _situation_case(
            answer,
            x,
            jobs,
            expected,
            {killed: "killed"},
            f"worker {killed} killed",
            "a killed worker never answers again: a loop that retries until it does never "
            "ends. Ask with a wait that you bound (the text of Task 3 names a tool for it) "
            "and give up on a worker that did not answer",
        )
    finally:
        _restore(cluster, process, f"worker/{killed}")
    if count == 1:
        story = "worker 0, the only one, was reported down while frozen and while killed"
    else:
        story = f"a frozen worker {frozen} and a killed worker {killed} were reported down"
    sums = f"{count} sums" if count > 1 else "sum"
    return (
        f"with every worker up you returned the {sums}, computed on the workers; {story} "
        f"(None), each time within the {allowed_s():g} s allowed. The checker has resumed "
        f"worker {frozen}, restarted worker {killed} and connected again"
    )


# --------------------------------------------------------------------------- task 4

#: Task 4: what a placement log can say is wrong with Task 2's two stages.
DIAGNOSES = {
    "correct": "nothing: each stage ran where it belongs",
    "all-on-client": "no op of either stage ran on a worker",
    "relu-on-client": "the ReLU of stage 1 ran in this notebook's process",
    "stage-2-outside-tensorflow": "stage 2 is not in the log: it did not run as TensorFlow ops",
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


#: Task 4: the mistake behind each case (a fixed order, so that the printed cases and the
#: expected answers stay the same from run to run).
PUZZLE_CASES = {
    "a": "relu-on-client",
    "b": "correct",
    "c": "stage-2-outside-tensorflow",
    "d": "all-on-client",
}


def placement_puzzles(cluster: Any) -> dict[str, Any]:
    """``{case: placement table}``: Task 2's stages run for real on ``cluster``'s first two
    workers (:func:`worker_pair`), each case with the mistake of :data:`PUZZLE_CASES`, each
    in its own ``placement.capture()``. Only the columns a learner needs are kept."""
    import tensorflow as tf

    from dtf import placement

    pair = worker_pair(cluster)
    x, w1, w2 = (tf.constant(a) for a in stage_inputs())
    _warm_up_or_wrong(len(worker_addresses(cluster)))
    tables = {}
    for case, kind in PUZZLE_CASES.items():
        with placement.capture() as log:
            _puzzle_stages(kind, x, w1, w2, pair)
        table = log.table
        if "source" in table and (table["source"] == "eager").any():
            table = table[table["source"] == "eager"]  # one row per op run (as in Task 2)
        tables[case] = table[["op_type", "device"]].reset_index(drop=True)
    return tables


@task(LAB, 4)
def task4(answer: Any, cluster: Any) -> str:
    """``diagnose_logs() -> {case: diagnosis}``: for each placement log of
    :func:`placement_puzzles` (Task 2's stages run with the mistake of
    :data:`PUZZLE_CASES`), the key of :data:`DIAGNOSES` that says what is wrong. The checker
    makes the logs again and checks first that each shows what its mistake leaves, so a
    verdict never rests on a log that TensorFlow did not write."""
    _running(cluster, "the logs cannot be made")
    tables = placement_puzzles(cluster)
    here = _local_task(cluster) or "/job:localhost/task:0"
    for case, table in tables.items():
        tasks = {task_of(d) for d in table["device"]}
        kind = PUZZLE_CASES[case]
        shown = (kind == "all-on-client") == (tasks == {here})
        if not shown:  # the checker's own premise: never judge on a log that says otherwise
            raise Wrong(
                f"the checker's log of case {case!r} does not show its mistake ({short(tasks)})",
                "restart the kernel and run the lab from the top",
            )
    got = call_function(answer)
    expect_kind(got, Mapping, "a dict {case: key of DIAGNOSES}")
    wrong = []
    for case, kind in PUZZLE_CASES.items():
        if case not in got:
            raise Wrong(f"your dict has no diagnosis for case {case!r}", "one entry per case")
        said = got[case]
        if said not in DIAGNOSES:
            raise Wrong(
                f"for case {case!r}: {short(said)} is not one of the diagnoses",
                "use a key of DIAGNOSES: " + ", ".join(repr(k) for k in DIAGNOSES),
            )
        if said != kind:
            wrong.append((case, said))
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
