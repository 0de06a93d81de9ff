"""No wait without a bound, and a way out that Ctrl-C cannot give (issue 19, item 2).

Provoked for real: a worker frozen with ``SIGSTOP`` under clients in fresh processes.

- A client that never applied the course's gRPC options, in a process that started its
  cluster with ``LocalCluster.start()``, still gets an error within seconds (start applied
  them).
- A client of a cluster started elsewhere, without keepalive, blocked on the frozen worker,
  ignores two ``SIGINT`` (what Ctrl-C and Jupyter's kernel interrupt send), eager and TF1.
- ``run_with_deadline`` returns within its deadline with an error naming the task and its
  address, its wait is broken by ``SIGINT``, and TF1's ``RunOptions(timeout_in_ms)`` /
  ``ConfigProto(operation_timeout_in_ms)`` end a run on the frozen worker within their bound.

Every process is stopped at the end, the frozen worker resumed first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from dtf.cluster import GRPC_ENV, LocalCluster, TaskTimeoutError, run_with_deadline
from dtf.cluster.deadline import abandoned, client_hint, describe

from .helpers import QUIET_ENV, ROOT

#: The clusters here warn that they listen on every interface: tests/test_exposure.py checks it.
pytestmark = pytest.mark.filterwarnings("ignore::dtf.cluster.ExposureWarning")
#: A frozen worker must be reported within this many seconds (keepalive: ~3 s).
ERROR_WITHIN_S = 15.0
#: How long a blocked client must go on blocking after the first SIGINT.
STILL_BLOCKED_S = 6.0
#: The helper's deadline, and the slack allowed beyond it (a loaded 2-core machine).
DEADLINE_S, SLACK_S = 3.0, 2.0
READY_S = 120.0


# --------------------------------------------------------------------------- pure


class UnavailableError(Exception):  # named like TensorFlow's: the helper checks the name
    pass


def test_run_with_deadline_returns_the_result_and_passes_other_errors():
    assert run_with_deadline(lambda x: x * 2, 5, 21) == 42
    with pytest.raises(KeyError):
        run_with_deadline({}.__getitem__, 5, "missing", task="worker/0")
    with pytest.raises(ValueError, match="positive"):
        run_with_deadline(lambda: None, 0)


def test_run_with_deadline_names_the_task_when_nothing_answers():
    release = threading.Event()
    began = time.monotonic()
    with pytest.raises(TaskTimeoutError) as info:
        run_with_deadline(release.wait, 0.5, task="worker/1", address="127.0.0.1:2223")
    assert time.monotonic() - began < 0.5 + SLACK_S
    assert str(info.value).startswith("worker/1 at 127.0.0.1:2223 did not answer within 0.5 s")
    assert isinstance(info.value, TimeoutError) and info.value.address == "127.0.0.1:2223"
    assert any(t.is_alive() for t in abandoned())  # still waiting: it cannot be stopped
    release.set()


def test_an_unavailable_error_becomes_one_that_names_the_task():
    def fails():
        raise UnavailableError("ping timeout")

    with pytest.raises(TaskTimeoutError, match=r"^worker/0 at h:1 did not answer: Unavail") as e:
        run_with_deadline(fails, 5, task="worker/0", address="h:1")
    assert "ping timeout" in str(e.value) and isinstance(e.value.__cause__, UnavailableError)
    assert describe() == "the remote task" and describe("ps/0") == "ps/0"


def test_client_hint_names_the_task_a_client_must_play():
    hint = client_hint({"host": ["a:1"], "worker": ["b:2", "c:3"]}, "worker/1")
    assert "host/0" in hint and "job_name='host', task_index=0" in hint
    assert "device_filters=['/job:worker']" in hint and "timeout_in_ms" in hint
    assert "worker/1 too" in client_hint({"worker": ["b:2", "c:3"]}, "worker/0")
    assert client_hint({"worker": ["b:2"]}, "worker/0") is None


# --------------------------------------------------------------------------- frozen worker

#: A client of worker/0 at ADDRESS (argv[1]), mode argv[2]. It connects, runs one op, says
#: "ready", waits for a line on stdin (the worker is frozen meanwhile), then does its mode's
#: calls, printing one JSON object per event.
CLIENT = textwrap.dedent(
    """
    import json, os, sys, time
    from dtf.cluster.server import import_tensorflow
    from dtf.cluster import TaskTimeoutError, run_with_deadline
    tf = import_tensorflow()
    address, mode = sys.argv[1], sys.argv[2]

    def say(event, **fields):
        print(json.dumps({"event": event, "t": time.monotonic(), **fields}), flush=True)

    def tf1_session(**config):  # created, and run once, while the worker answers
        graph = tf.Graph()
        with graph.as_default():
            with tf.device("/job:worker/task:0"):
                total = tf.reduce_sum(tf.ones([2, 2]))
        proto = tf.compat.v1.ConfigProto(device_filters=["/job:worker"], **config)
        session = tf.compat.v1.Session("grpc://" + address, graph=graph, config=proto)
        session.run(total)
        return session, total

    def eager_op():
        with tf.device("/job:worker/task:0"):
            return float(tf.reduce_sum(tf.ones([2, 2])).numpy())

    if mode == "tf1":
        plain = tf1_session()
    else:
        tf.config.experimental_connect_to_host(address, job_name="worker")
        eager_op()
        if mode != "eager":
            plain = tf1_session()
            bounded = tf1_session(operation_timeout_in_ms=2000)
    say("ready")
    sys.stdin.readline()  # the worker is frozen now
    began = time.monotonic()
    try:
        say("calling")
        if mode == "eager":
            eager_op()
        elif mode == "tf1":
            plain[0].run(plain[1])
        else:  # the ways out
            try:
                run_with_deadline(eager_op, float(mode), task="worker/0", address=address)
            except TaskTimeoutError as err:
                say("deadline", seconds=time.monotonic() - began, message=str(err))
            for name, (session, total), options in (
                ("timeout_in_ms", plain, tf.compat.v1.RunOptions(timeout_in_ms=2000)),
                ("operation_timeout_in_ms", bounded, None),
            ):
                began = time.monotonic()
                try:
                    session.run(total, options=options)
                except tf.errors.OpError as err:
                    say(name, seconds=time.monotonic() - began, error=type(err).__name__)
            say("waiting")
            began = time.monotonic()
            run_with_deadline(eager_op, 120, task="worker/0", address=address)
        say("returned", seconds=time.monotonic() - began)
    except KeyboardInterrupt:
        say("interrupted", seconds=time.monotonic() - began)
    sys.stdout.flush()
    os._exit(0)  # a thread may still wait on the frozen worker
    """
)


class Client:
    """The program above in a fresh process, without the course's gRPC options."""

    def __init__(self, address: str, mode: str):
        env = {**os.environ, **QUIET_ENV, "GRPC_VERBOSITY": "ERROR"}
        for name in (GRPC_ENV, "PYTEST_CURRENT_TEST", "TF_CONFIG"):
            env.pop(name, None)  # a client that never applied the course's options
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
        self.mode = mode
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CLIENT, address, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=ROOT,
            start_new_session=True,
        )
        self.events: list[dict] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                with self._cond:
                    self.events.append(json.loads(line))
                    self._cond.notify_all()

    def wait_for(self, event: str, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while time.monotonic() < deadline:
                found = [e for e in self.events if e["event"] == event]
                if found:
                    return found[0]
                if self.proc.poll() is not None:
                    self._cond.wait(0.2)  # the reader's last lines
                    found = [e for e in self.events if e["event"] == event]
                    return found[0] if found else None
                self._cond.wait(0.1)
        return None

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # what Ctrl-C and a kernel interrupt send

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_blocked_client_ignores_sigint_and_the_ways_out_are_bounded():
    clients: list[Client] = []
    frozen = None
    with LocalCluster({"worker": 1}, ready_timeout=READY_S) as cluster:
        address = cluster.address("worker/0")
        try:
            clients = [Client(address, m) for m in ("eager", "tf1", str(DEADLINE_S))]
            for client in clients:
                assert client.wait_for("ready", READY_S), f"{client.mode} client never ready"
            frozen = psutil.Process(cluster.pid("worker/0"))
            frozen.suspend()  # SIGSTOP: the port stays open, nothing answers
            for client in clients:
                client.go()
            plain, tf1, helper = clients
            for client in (plain, tf1):
                assert client.wait_for("calling", 30)
            time.sleep(1.0)  # both are inside their call now
            for client in (plain, tf1):
                client.interrupt()
            time.sleep(1.5)
            for client in (plain, tf1):
                client.interrupt()  # twice, as an impatient user does
            time.sleep(STILL_BLOCKED_S - 1.0)
            for client in (plain, tf1):  # Ctrl-C did nothing: still blocked, no KeyboardInterrupt
                assert client.proc.poll() is None, f"{client.mode} client exited"
                assert not [e for e in client.events if e["event"] != "ready"][1:], client.events

            deadline = helper.wait_for("deadline", 60)
            assert deadline, helper.events
            assert deadline["seconds"] < DEADLINE_S + SLACK_S, deadline
            assert deadline["message"].startswith(
                f"worker/0 at {address} did not answer within {DEADLINE_S:g} s"
            )
            for name in ("timeout_in_ms", "operation_timeout_in_ms"):
                event = helper.wait_for(name, 60)
                assert event and event["error"] == "DeadlineExceededError", helper.events
                assert event["seconds"] < 2.0 + SLACK_S, event
            assert helper.wait_for("waiting", 30)
            time.sleep(1.0)
            helper.interrupt()  # the helper's wait is a Python wait: SIGINT ends it
            stopped = helper.wait_for("interrupted", 30)
            assert stopped and stopped["seconds"] < 1.0 + SLACK_S, helper.events
            print(
                f"\nhelper: TaskTimeoutError after {deadline['seconds']:.2f} s (deadline "
                f"{DEADLINE_S} s); TF1 deadlines after "
                + ", ".join(
                    f"{helper.wait_for(n, 1)['seconds']:.2f} s"
                    for n in ("timeout_in_ms", "operation_timeout_in_ms")
                )
                + f"; SIGINT ended the helper's wait after {stopped['seconds']:.2f} s"
            )
        finally:
            if frozen is not None and frozen.is_running():
                frozen.resume()
            for client in clients:
                client.kill()
    for client in clients:
        assert client.proc.returncode is not None


#: A process that starts its own cluster and never applies the gRPC options itself.
STARTS_ITS_CLUSTER = f"""
import json, os, time
assert {GRPC_ENV!r} not in os.environ
from dtf.cluster import LocalCluster
from dtf.cluster.server import import_tensorflow
tf = import_tensorflow()
with LocalCluster({{"worker": 1}}, ready_timeout={READY_S}) as cluster:
    applied = os.environ.get({GRPC_ENV!r}, "")
    tf.config.experimental_connect_to_host(cluster.address("worker/0"), job_name="worker")
    with tf.device("/job:worker/task:0"):
        tf.reduce_sum(tf.ones([2])).numpy()
    pid = cluster.pid("worker/0")
    os.kill(pid, 19)  # SIGSTOP
    began = time.monotonic()
    try:
        with tf.device("/job:worker/task:0"):
            tf.reduce_sum(tf.ones([2])).numpy()
        error = None
    except tf.errors.OpError as err:
        error = type(err).__name__
    finally:
        os.kill(pid, 18)  # SIGCONT
    print(json.dumps({{"applied": applied, "error": error, "seconds": time.monotonic() - began}}))
os._exit(0)
"""


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_start_applies_keepalive_so_a_frozen_worker_is_an_error_within_seconds():
    env = {**os.environ, **QUIET_ENV, "GRPC_VERBOSITY": "ERROR"}
    for name in (GRPC_ENV, "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", STARTS_ITS_CLUSTER],
        capture_output=True,
        text=True,
        timeout=200,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\nfrozen worker reported after {result['seconds']:.2f} s: {result['error']}")
    assert "grpc.keepalive_time_ms=1000" in result["applied"]
    assert result["error"] == "UnavailableError" and result["seconds"] < ERROR_WITHIN_S
