"""When gRPC keepalive reports a task that stops answering, measured with real servers (issue 26).

What the course says about it (notebooks 06 and 07, Setup and section 6; 08b and 11c, a hung
parameter server; 11b; INSTRUCTORS.md, "A cell hangs on a cluster"; the docstring of
:mod:`dtf.cluster.env`) rests on these measurements, so a TensorFlow or gRPC release that
changes them fails here instead of leaving the text wrong.

The mechanism (gRPC's keepalive guide, https://github.com/grpc/grpc/blob/master/doc/keepalive.md):
while a call is open the client pings the server every ``grpc.keepalive_time_ms`` (1 s), and a
ping left unanswered for ``grpc.keepalive_timeout_ms`` (2 s) closes the connection: every call
on it fails with ``UnavailableError: ping timeout``. But after
``grpc.http2.max_pings_without_data`` pings (the course sets 1) the client must send data
before it pings again. The guide says that it then stops pinging; the gRPC inside
TensorFlow 2.21 sends one ping a minute instead (the "throttle" of grpc/grpc#36374, measured
here). And the server counts pings that come more often than every 5 minutes without data
as abuse, closing the connection at the third (``GRPC_ARG_HTTP2_MAX_PING_STRIKES``, 2).

Measured (TensorFlow 2.21, 2-core machine, other work running):

- a task frozen (``SIGSTOP``) *before* a call: ``ping timeout`` ~2 s into the call;
- a task frozen *while* a call waits (after its first ping): ``ping timeout`` ~57 s after the
  freeze, at the first throttled ping;
- a call that waits on a live task without any data for ~3 minutes fails too (the third
  throttled ping is a strike too many: ``Too many pings`` or ``ping timeout``), at ~180 s;
- ``ParameterServerStrategy`` with a frozen ps, as notebook 08b sets it up: ``join()`` raises
  ``UnavailableError`` ~22 s after the freeze (the connection closed by a ping, then gRPC's
  reconnection to the frozen process timed out after its 20 s connect timeout); without the
  course's gRPC options it was still waiting when the test gave up.

Every process is stopped at the end, frozen ones resumed first. The tests take ~3 and ~2
minutes, mostly waiting on gRPC's timers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dtf.cluster import GRPC_ENV

from .helpers import QUIET_ENV, ROOT

#: The clusters here warn that they listen on every interface: tests/test_exposure.py checks it.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.waits,  # minutes, nearly all of it gRPC's ping limit: run first (conftest.py)
    pytest.mark.filterwarnings("ignore::dtf.cluster.ExposureWarning"),
]

#: A call to a task frozen before it must fail within this many seconds (measured: ~2 s).
WITHIN_SECONDS_S = 10.0
#: A task frozen while a call waits is reported at gRPC's next ping, a minute after the first
#: (measured: ~57 s after the freeze): not within seconds, and not much after a minute.
DURING_CALL_S = (20.0, 100.0)
#: A call that waits on a live task without data fails at the third throttled ping
#: (measured: ~180 s alone; once more than 240 s while make check loaded both cores).
LIVE_CALL_S = (120.0, 320.0)
#: A frozen ps under notebook 08b's setup fails join() within this (measured: ~22 s) ...
PS_JOIN_S = 60.0
#: ... and without the course's gRPC options join() is still waiting after this many seconds.
PS_STILL_WAITING_S = 45.0


def _run(code: str, *args: str, timeout: float) -> dict:
    """Run a client script with ``args`` in a fresh process (TensorFlow reads its gRPC options
    once per process); its result is the JSON of its last output line. A crash of the script
    (a signal) shows its Python threads' stacks (``faulthandler``) in the failure."""
    full = {**os.environ, **QUIET_ENV, "GRPC_VERBOSITY": "NONE"}
    for name in (GRPC_ENV, "PYTEST_CURRENT_TEST"):
        full.pop(name, None)
    try:
        done = subprocess.run(
            [sys.executable, "-X", "faulthandler", "-c", code, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired as exc:  # the script bounds every wait: a bug if here
        pytest.fail(f"the client script hung past {timeout} s:\n{exc.stdout}\n{exc.stderr}")
    assert done.returncode == 0, (
        f"the client script ended with status {done.returncode}:\n"
        + done.stdout[-2000:]
        + done.stderr[-6000:]
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


# Three workers, a call that waits (a dequeue from an empty queue) on each: worker 2 frozen
# before its call, worker 1 frozen 5 s into its call (after the call's first ping), worker 0
# left running. Every call runs in a thread; the script waits for them at most WAIT_S.
CALLS = """
import json, os, signal, threading, time
from dtf import quiet
quiet.quiet(3)
import tensorflow as tf
from dtf.cluster import LocalCluster, apply_grpc_options

FREEZE_INTO_CALL_S, WAIT_S = 5.0, 330.0
apply_grpc_options()
out = {"grpc": os.environ["TF_GRPC_DEFAULT_OPTIONS"]}
cluster = LocalCluster({"worker": 3}).start()
pids = [cluster.pid(f"worker/{i}") for i in range(3)]
try:
    tf.config.experimental_connect_to_cluster(cluster.spec)
    queues = []
    for i in range(3):
        with tf.device(f"/job:worker/task:{i}"):
            queues.append(tf.queue.FIFOQueue(1, tf.float32, shapes=[]))
            float(tf.reduce_sum(tf.ones(3)))  # connected, and answered
    ended = {}

    def call(i):
        try:
            with tf.device(f"/job:worker/task:{i}"):
                float(queues[i].dequeue())  # waits: nobody enqueues
            ended[i] = ["no error", time.monotonic()]
        except tf.errors.OpError as err:
            ended[i] = [type(err).__name__ + ": " + str(err).strip().splitlines()[0],
                        time.monotonic()]

    threads = [threading.Thread(target=call, args=(i,), daemon=True) for i in range(3)]
    os.kill(pids[2], signal.SIGSTOP)  # frozen before its call
    began = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(FREEZE_INTO_CALL_S)
    os.kill(pids[1], signal.SIGSTOP)  # frozen while its call waits
    frozen = time.monotonic()
    for thread in threads:
        thread.join(max(0.0, began + WAIT_S - time.monotonic()))
    for key, i, t0 in (("live", 0, began), ("during", 1, frozen), ("before", 2, began)):
        error, t = ended.get(i, ["still waiting", None])
        out[key] = [error, None if t is None else round(t - t0, 2)]
    print(json.dumps(out), flush=True)  # before the teardown, which a crash would follow
finally:
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    cluster.stop()
os._exit(0)  # the eager context still knows the stopped tasks: do not wait on it
"""


@pytest.mark.timeout(400)  # the script waits up to WAIT_S (330 s) for the live call
def test_keepalive_reports_a_task_frozen_before_a_call_in_seconds_during_one_in_a_minute():
    out = _run(CALLS, timeout=370)
    print(f"\n{out}")
    assert "grpc.http2.max_pings_without_data=1" in out["grpc"]
    error, seconds = out["before"]
    assert error == "UnavailableError: ping timeout" and seconds < WITHIN_SECONDS_S, out
    error, seconds = out["during"]
    low, high = DURING_CALL_S
    assert error == "UnavailableError: ping timeout" and low < seconds < high, out
    error, seconds = out["live"]
    low, high = LIVE_CALL_S
    assert error in ("UnavailableError: Too many pings", "UnavailableError: ping timeout"), out
    assert low < seconds < high, out


# Notebook 08b's setup (its Setup applies the course's gRPC options; one ps, two workers, this
# process the chief), a step that reads and updates variables on the ps, steps scheduled,
# then the ps frozen while join() waits. OPTIONS=off: the course's options switched off, in
# this client and in the servers it starts (LocalCluster gives them the same options).
HUNG_PS = """
import json, logging, os, signal, sys, threading, time
from dtf import quiet
quiet.quiet(3)
import numpy as np
import tensorflow as tf
import dtf.cluster.env
from dtf.cluster import LocalCluster, apply_grpc_options

WAIT_S = float(sys.argv[1])
if sys.argv[2] == "off":
    dtf.cluster.env.GRPC_OPTIONS = {}
apply_grpc_options()
out = {"grpc": os.environ.get("TF_GRPC_DEFAULT_OPTIONS", "")}
tf.get_logger().setLevel(logging.CRITICAL)  # the coordinator logs each failed step
sys.unraisablehook = lambda report: None  # a dead connection's executor, at exit
cluster = LocalCluster({"chief": 1, "ps": 1, "worker": 2}, exclude="chief").start()
ps = cluster.pid("ps/0")
try:
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster.spec, task_type="chief", task_id=0, rpc_layer="grpc")
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    rng = np.random.default_rng(0)
    with strategy.scope():
        w = tf.Variable(rng.normal(size=(64, 256)).astype("float32") * 0.05)
        applied = tf.Variable(0, dtype=tf.int64)
    x = rng.normal(size=(64, 64)).astype("float32")

    @tf.function
    def step(iterator):
        batch = next(iterator)
        grad = tf.matmul(batch, tf.nn.relu(tf.matmul(batch, w)), transpose_a=True)
        w.assign_sub(0.001 * grad)
        return applied.assign_add(1)

    iterator = iter(coordinator.create_per_worker_dataset(
        lambda: tf.data.Dataset.from_tensors(x).repeat()))
    scheduled = [coordinator.schedule(step, args=(iterator,)) for _ in range(200)]
    scheduled[9].fetch()  # the workers are busy
    os.kill(ps, signal.SIGSTOP)
    frozen = time.monotonic()
    box = {}

    def join():
        try:
            coordinator.join()
            box["error"] = "no error"
        except Exception as exc:
            box["error"] = type(exc).__name__
            box["message"] = " ".join(str(exc).split())[:300]  # in the failure, if one
        box["seconds"] = round(time.monotonic() - frozen, 2)

    thread = threading.Thread(target=join, daemon=True)
    thread.start()
    thread.join(WAIT_S)
    out.update(box or {"error": "still waiting", "seconds": round(time.monotonic() - frozen, 2)})
    print(json.dumps(out), flush=True)  # before the teardown, which a crash would follow
finally:
    os.kill(ps, signal.SIGCONT)
    cluster.stop()
os._exit(0)  # join() may still wait in its thread
"""


def _run_hung_ps(wait_s: float, options: str) -> dict:
    return _run(HUNG_PS, str(wait_s), options, timeout=wait_s + 120)


def test_a_frozen_parameter_server_ends_join_only_with_the_course_grpc_options():
    on = _run_hung_ps(PS_JOIN_S, "on")
    print(f"\ncourse options: {on}")
    assert "grpc.keepalive_time_ms=1000" in on["grpc"]
    assert on["error"] == "UnavailableError" and on["seconds"] < PS_JOIN_S, on
    off = _run_hung_ps(PS_STILL_WAITING_S, "off")
    print(f"without them: {off}")
    assert off["grpc"] == "" and off["error"] == "still waiting", off
