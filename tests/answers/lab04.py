"""Lab 04 answers for tests/test_checks_lab04.py, with switches for the usual mistakes. The
tests' worker process imports them (``from tests.answers import lab04 as answers``); tasks 2
and 3 run them against the cluster that process has joined."""

from __future__ import annotations

import contextlib
import json
import time

import numpy as np
import psutil
import tensorflow as tf

from dtf import placement
from dtf.checks import lab04
from dtf.cluster import answering

# --------------------------------------------------------------------------- task 1


def right_dict(n, ports, host="127.0.0.1", jobs=("ps", "worker")):
    """The jobs of Task 1's ``ClusterSpec``: one ps on the first port, then the workers."""
    return {
        jobs[0]: [f"{host}:{ports[0]}"],
        jobs[1]: [f"{host}:{p}" for p in ports[1 : 1 + n]],
    }


def right(n, ports):
    """Task 1: ``make_cluster_spec``."""
    return tf.train.ClusterSpec(right_dict(n, ports))


def make_spec(host="127.0.0.1", jobs=("ps", "worker")):
    """Task 1 with another ``host`` or other job names."""

    def make_cluster_spec(n, ports):
        return tf.train.ClusterSpec(right_dict(n, ports, host=host, jobs=jobs))

    return make_cluster_spec


def spec_of_tuples(n, p):
    return tf.train.ClusterSpec({k: tuple(v) for k, v in right_dict(n, p).items()})


def spec_workers_first(n, p):
    return tf.train.ClusterSpec(
        {"worker": right_dict(n, p)["worker"], "ps": right_dict(n, p)["ps"]}
    )


def spec_of_a_spec(n, p):
    return tf.train.ClusterSpec(tf.train.ClusterSpec(right_dict(n, p)))


def spec_expected(n, p):
    """Task 1 handed to the checker's own reference."""
    return tf.train.ClusterSpec(lab04.expected_spec(n, p))


def spec_int_ports(n, p):
    return tf.train.ClusterSpec({"ps": [p[0]], "worker": list(p[1:])})


def spec_one_string(n, p):
    return tf.train.ClusterSpec({"ps": f"127.0.0.1:{p[0]}", "worker": right_dict(n, p)["worker"]})


def spec_sparse_indices(n, p):
    workers = {i + 1: f"127.0.0.1:{q}" for i, q in enumerate(p[1 : 1 + n])}
    return tf.train.ClusterSpec({"ps": [f"127.0.0.1:{p[0]}"], "worker": workers})


def spec_off_by_one(n, p):
    return tf.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{p[0]}"], "worker": [f"127.0.0.1:{q}" for q in p[:n]]}
    )


def spec_no_host(n, p):
    return tf.train.ClusterSpec({"ps": [f"{p[0]}"], "worker": right_dict(n, p)["worker"]})


def spec_ps_last(n, p):
    return tf.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{p[n]}"], "worker": [f"127.0.0.1:{q}" for q in p[:n]]}
    )


def spec_sorted_ports(n, p):
    return tf.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{p[0]}"], "worker": [f"127.0.0.1:{q}" for q in sorted(p[1:])]}
    )


def spec_two_workers_always(n, p):
    return tf.train.ClusterSpec(
        {"ps": [f"127.0.0.1:{p[0]}"], "worker": [f"127.0.0.1:{q}" for q in p[1:3]]}
    )


def spec_extra_job(n, p):
    return tf.train.ClusterSpec({**right_dict(n, p), "chief": ["127.0.0.1:9999"]})


def spec_no_ps(n, p):
    return tf.train.ClusterSpec({"worker": right_dict(n, p)["worker"]})


def spec_as_json(n, p):
    return json.dumps(right_dict(n, p))


def spec_as_list(n, p):
    return list(right_dict(n, p).values())


# --------------------------------------------------------------------------- task 2


def make_stages(
    where=(0, 1),
    relu_late=False,
    capture=True,
    shift=0.0,
    function=False,
    numpy=False,
    relu="relu",
    stage2_numpy=False,
):
    """Task 2: ``two_stages``. ``where``: the device scopes of stage 1 and stage 2 (indices
    into ``workers``, or None for no scope); ``relu_late``: the ReLU under stage 2's scope;
    ``function``: the stages in a ``tf.function``; ``relu``: "relu" (``tf.nn.relu``),
    "maximum" (``tf.maximum(h, 0)``) or "numpy" (computed outside TensorFlow)."""

    def activation(h):
        if relu == "maximum":
            return tf.maximum(h, 0)
        if relu == "numpy":
            return tf.constant(np.maximum(h.numpy(), 0))
        return tf.nn.relu(h)

    def scope(workers, k):
        return tf.device(workers[k]) if k is not None else contextlib.nullcontext()

    def stages(x, w1, w2, workers):
        with scope(workers, where[0]):
            h = tf.matmul(x, w1)
            if not relu_late:
                h = activation(h)
        with scope(workers, where[1]):
            if relu_late:
                h = activation(h)
            if stage2_numpy:  # stage 2 outside TensorFlow: no op, no log line
                return tf.constant(h.numpy() @ w2.numpy())
            return tf.matmul(h, w2)

    def two_stages(x, w1, w2, workers):
        run = tf.function(stages) if function else stages
        block = placement.capture() if capture else contextlib.nullcontext()
        with block as log:
            y = run(x, w1, w2, workers)
        if not capture:
            with placement.capture() as log:  # a block that saw none of the ops
                pass
        y = y.numpy() if numpy else y
        return (y + shift if shift else y), log.table

    return two_stages


def stages_not_a_pair(x, w1, w2, workers):
    return x


def stages_without_table(x, w1, w2, workers):
    return x @ w1 @ w2, None


# --------------------------------------------------------------------------- task 3


def right_sums(x, spec, timeout):
    """Task 3: ``worker_sums``, the lab's solution."""
    return make_sums()(x, spec, timeout)


def make_sums(key="index", value="float", own_timeout=None):
    """Task 3 in the lab's way: ``key``: "index", "task-name" (``worker/0``) or "device-name"
    (``/job:worker/task:0``) for the dict's keys; ``value``: "float", or "tensor" (left on
    the worker); ``own_timeout``: a wait of its own instead of the one given."""
    name = {
        "index": lambda i: i,
        "task-name": lambda i: f"worker/{i}",
        "device-name": lambda i: f"/job:worker/task:{i}",
    }[key]

    def worker_sums(x, spec, timeout):
        up = answering(spec["worker"], timeout=timeout if own_timeout is None else own_timeout)
        sums = {}
        for i, address in enumerate(spec["worker"]):
            sums[name(i)] = None
            if not up[address]:
                continue
            try:
                with tf.device(f"/job:worker/task:{i}"):
                    total = tf.reduce_sum(x)
                    sums[name(i)] = float(total) if value == "float" else total
            except tf.errors.OpError:
                pass
        return sums

    return worker_sums


def sums_sent_blindly(x, spec, timeout):
    """Task 3 sending every op and catching the error (the keepalive defaults bound a frozen
    worker at ~3 s): no wait bounded by ``timeout``."""
    sums = {}
    for i in range(len(spec["worker"])):
        try:
            with tf.device(f"/job:worker/task:{i}"):
                sums[i] = float(tf.reduce_sum(x))
        except tf.errors.OpError:
            sums[i] = None
    return sums


def sums_uncaught(x, spec, timeout):
    sums = {}
    for i in range(len(spec["worker"])):
        with tf.device(f"/job:worker/task:{i}"):
            sums[i] = float(tf.reduce_sum(x))
    return sums


def sums_zero_for_down(x, spec, timeout):
    return {i: 0.0 if v is None else v for i, v in right_sums(x, spec, timeout).items()}


def sums_all_or_nothing(x, spec, timeout):
    sums = right_sums(x, spec, timeout)
    return sums if None not in sums.values() else {i: None for i in sums}


def sums_computed_here(x, spec, timeout):
    up = answering(spec["worker"], timeout=timeout)
    return {i: float(np.sum(x)) if up[a] else None for i, a in enumerate(spec["worker"])}


def sums_one_for_all(x, spec, timeout):
    with tf.device("/job:worker/task:0"):
        total = float(tf.reduce_sum(x))
    return {i: total for i in range(len(spec["worker"]))}


def sums_down_left_out(x, spec, timeout):
    return {i: v for i, v in right_sums(x, spec, timeout).items() if v is not None}


def sums_extra_task(x, spec, timeout):
    return {**right_sums(x, spec, timeout), "host/0": None}


def sums_extra_index(x, spec, timeout):
    return {**right_sums(x, spec, timeout), 5: None}


def sums_as_list(x, spec, timeout):
    return list(right_sums(x, spec, timeout).values())


def sums_not_summed(x, spec, timeout):
    return {0: x, 1: x}


def sums_of_the_ps(x, spec, timeout):
    return spec["ps"]


def sums_late(x, spec, timeout):
    """Task 3, right but 3.5 s late when a worker is down."""
    sums = right_sums(x, spec, timeout)
    if None in sums.values():
        time.sleep(3.5)
    return sums


def make_waiting(gate):
    """Task 3, right but, when a worker is down, waiting for ``gate`` (a threading.Event that
    only the test sets): a function that does not return."""

    def worker_sums(x, spec, timeout):
        sums = right_sums(x, spec, timeout)
        if None in sums.values():
            gate.wait()
        return sums

    return worker_sums


def make_recording(cluster, seen):
    """Task 3's solution that appends to ``seen``, at each call, what it finds: whether each
    worker answers, and the state of its process (``gone`` once it has ended)."""

    def worker_sums(x, spec, timeout):
        row = {"answering": list(answering(spec["worker"], timeout=1.0).values())}
        for i in range(len(spec["worker"])):
            try:
                row[i] = psutil.Process(cluster.pid(f"worker/{i}")).status()
            except psutil.NoSuchProcess:
                row[i] = "gone"
        seen.append(row)
        return right_sums(x, spec, timeout)

    return worker_sums
