"""Tests for ``dtf.cluster``: specs and their errors, and real server processes.

The spec tests are plain Python. The process tests start real TensorFlow servers; each start
costs a TensorFlow import in some process (seconds of CPU), so one module-wide cluster serves
the client tests, and the start-up timings double as the tests of leaving a ``with`` block
normally, by an exception and by a ``KeyboardInterrupt``. Clients run in a subprocess:
connecting to a cluster changes a process's TensorFlow context for good.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from dtf.cluster import (
    GRPC_ENV,
    GRPC_OPTIONS,
    ClusterConfigError,
    LocalCluster,
    PortInUseError,
    ReadyTimeoutError,
    Task,
    TaskFailedError,
    answering,
    answers,
    apply_grpc_options,
    free_ports,
    grpc_options_value,
    is_local_host,
    load,
    port_in_use,
    strategy_jobs,
    tf_config,
)
from dtf.cluster import env as cluster_env
from dtf.cluster import local as cluster_local
from dtf.cluster.server import DELAY_ENV, parse_ready_line, ready_line
from dtf.cluster.spec import MAX_COUNT, all_tasks, parse_task, select_tasks, split_address

from .helpers import QUIET_ENV, ROOT, pid_running
from .tf_validation import DISALLOWED, tensorflow_verdicts

POSIX = os.name == "posix"
pytestmark = pytest.mark.timeout(240)
GONE_WITHIN_S = 5.0
#: An interrupt 0.5 s into a start ends it within this many seconds (measured: ~0.6 s).
INTERRUPTED_START_S = 1.5


# --------------------------------------------------------------------------- helpers


def _children() -> list[psutil.Process]:
    return [p for p in psutil.Process().children(recursive=True) if _running(p)]


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_gone(pids, ports, within: float = GONE_WITHIN_S) -> float:
    """Every pid ends (or is a zombie) and no port listens, within ``within`` seconds;
    returns how long it took."""
    began = time.monotonic()
    pids = [p for p in pids if p]
    while time.monotonic() - began < within:
        alive = [p for p in pids if pid_running(p)]
        busy = [p for p in ports if port_in_use(p)]
        if not alive and not busy:
            return time.monotonic() - began
        time.sleep(0.05)
    raise AssertionError(f"still running after {within} s: pids {alive}, listening ports {busy}")


def _everything(cluster: LocalCluster) -> tuple[list[int], list[int]]:
    return [*cluster.pids.values(), cluster.launcher_pid], cluster.ports


def _listening(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


# --------------------------------------------------------------------------- specs


def test_counts_lists_and_files_give_one_layout(tmp_path):
    assert load({"worker": 2, "ps": 1}) == {"worker": [None, None], "ps": [None]}
    spec = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"], "ps": ["127.0.0.1:2224"]}
    assert load(spec) == spec
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps(spec))
    assert load(path) == load(str(path)) == spec
    assert load({"worker": ("[::1]:2222",)}) == {"worker": ["[::1]:2222"]}
    assert split_address("[::1]:2222") == ("::1", 2222)
    assert split_address(" localhost:80 ") == ("localhost", 80)


def test_the_example_file_has_the_layout_of_the_post():
    jobs = load(ROOT / "clusters" / "host_two_workers.json")
    assert list(jobs) == ["host", "worker"]
    assert len(jobs["host"]) == 1 and len(jobs["worker"]) == 2
    assert all(split_address(a)[0] == "127.0.0.1" for a in jobs["host"] + jobs["worker"])


BAD_SPECS = [
    ({}, "is empty"),
    ({"ps": 1}, "has no 'worker' job"),
    ({"wroker": 2}, "Did you mean 'worker' instead of 'wroker'"),
    ({"worker": 2, "bad job": 1}, "job name 'bad job'"),
    ({"worker": 2, "1ps": 1}, "job name '1ps'"),
    ({"worker": 2, 3: 1}, "job name 3"),
    ({"worker": []}, "has no task"),
    ({"worker": 0}, "at least 1"),
    ({"worker": 2.0}, "whole number"),
    ({"worker": True}, "whole number"),
    ({"worker": 33}, "at most 32"),
    ({"worker": "127.0.0.1:2222"}, "not one string"),
    ({"worker": {"0": "127.0.0.1:2222"}}, "dict of task indices"),
    ({"worker": ["127.0.0.1"]}, "is not 'host:port'"),
    ({"worker": [":2222"]}, "is not 'host:port'"),
    ({"worker": ["::1:2222"]}, "brackets"),
    ({"worker": [2222]}, "must be a 'host:port' string"),
    ({"worker": ["127.0.0.1:http"]}, "port 'http'"),
    ({"worker": ["127.0.0.1:-1"]}, "port '-1'"),
    ({"worker": ["127.0.0.1:0"]}, "port 0 in address"),
    ({"worker": ["127.0.0.1:65536"]}, "port 65536 in address"),
    ({"worker": ["127.0.0.1:2222", "127.0.0.1:2222"]}, "tasks worker/0 and worker/1 have the same"),
    ({"worker": ["LOCALHOST:2222"], "ps": ["localhost:2222"]}, "tasks worker/0 and ps/0"),
    ({"worker": 1, "chief": 2}, "at most one chief"),
    ([["127.0.0.1:2222"]], "must be a dict of jobs"),
]


@pytest.mark.parametrize("spec, message", BAD_SPECS, ids=[m for _, m in BAD_SPECS])
def test_every_spec_mistake_is_one_clear_config_error(spec, message):
    with pytest.raises(ClusterConfigError, match=_escape(message)) as info:
        load(spec)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_max_count_tasks_on_this_machine_are_accepted_and_one_more_is_refused():
    assert load({"worker": MAX_COUNT}) == {"worker": [None] * MAX_COUNT}
    assert load({"worker": 1, "ps": MAX_COUNT - 1})["ps"] == [None] * (MAX_COUNT - 1)
    too_many = rf"asks for {MAX_COUNT + 1} tasks on this machine; at most {MAX_COUNT} are allowed"
    with pytest.raises(ClusterConfigError, match=too_many):
        load({"worker": MAX_COUNT + 1})
    with pytest.raises(ClusterConfigError, match=too_many):  # the limit is over all jobs
        load({"worker": 1, "ps": MAX_COUNT})


def _escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "is empty"),
        ("   \n", "is empty"),
        ('{"worker": ["127.0.0.1:2222",]}', "not valid JSON: Expecting value at line 1 column 30"),
        ('{"worker":\n  [1, 2}', "at line 2 column 8"),
        ('["127.0.0.1:2222"]', "must hold one JSON object of jobs"),
    ],
)
def test_bad_json_files_name_the_file_and_the_position(tmp_path, text, message):
    path = tmp_path / "my_cluster.json"
    path.write_text(text)
    with pytest.raises(ClusterConfigError, match=_escape(message)) as info:
        load(path)
    assert "my_cluster.json" in str(info.value)


def test_a_missing_file_and_json_text_given_as_a_path(tmp_path):
    with pytest.raises(ClusterConfigError, match="does not exist"):
        load(tmp_path / "nope.json")
    with pytest.raises(ClusterConfigError, match=r"pass json\.loads\(text\)"):
        load('{"worker": 2}')


def test_tasks_unknown_jobs_and_indices_out_of_range():
    jobs = load({"worker": 2, "host": 1})
    for name in (
        "worker/1",
        "worker:1",
        ("worker", 1),
        "/job:worker/task:1",
        "/job:worker/replica:0/task:1/device:CPU:0",
        Task("worker", 1),
    ):
        assert parse_task(name, jobs) == Task("worker", 1)
    assert str(Task("worker", 1)) == "worker/1" and Task("ps", 0).device == "/job:ps/task:0"
    with pytest.raises(
        ClusterConfigError,
        match=r"task index 2 is out of range for job 'worker', "
        r"which has 2 tasks \(indices 0 to 1\)",
    ):
        parse_task("worker/2", jobs)
    with pytest.raises(ClusterConfigError, match="unknown job 'wroker'.*Did you mean 'worker'"):
        parse_task(("wroker", 0), jobs)
    with pytest.raises(ClusterConfigError, match="not a whole number"):
        parse_task("worker/x", jobs)
    with pytest.raises(ClusterConfigError, match="whole number"):
        parse_task(("worker", 1.0), jobs)
    assert select_tasks("host", jobs) == {Task("host", 0)}
    assert select_tasks(["worker/0", ("host", 0)], jobs) == {Task("worker", 0), Task("host", 0)}
    with pytest.raises(ClusterConfigError, match="unknown job 'hots'"):
        select_tasks("hots", jobs)


def test_tf_config_is_the_json_that_tensorflow_reads():
    jobs = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"]}
    assert json.loads(tf_config(jobs, Task("worker", 1))) == {
        "cluster": jobs,
        "task": {"type": "worker", "index": 1},
    }


def test_tf_config_leaves_out_jobs_no_strategy_accepts():
    jobs = {"host": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}
    assert json.loads(tf_config(jobs, Task("worker", 0)))["cluster"] == {"worker": jobs["worker"]}
    with pytest.raises(ClusterConfigError, match=r"host/0 has no TF_CONFIG.*job_name='host'"):
        tf_config(jobs, Task("host", 0))


def _strategy_tf_configs() -> dict[str, str]:
    """Every strategy TF_CONFIG of the course's cluster files and of a chief/worker/ps spec."""
    specs = {path.name: load(path) for path in sorted((ROOT / "clusters").glob("*.json"))}
    ports = iter(range(2222, 2300))
    layout = {"chief": 1, "worker": 3, "ps": 2, "evaluator": 1}
    specs["ps"] = {job: [f"127.0.0.1:{next(ports)}" for _ in range(n)] for job, n in layout.items()}
    return {
        f"{name} {task}": tf_config(jobs, task)
        for name, jobs in specs.items()
        for task in all_tasks(strategy_jobs(jobs))
    }


def test_a_ready_report_before_the_forked_one_still_gives_the_servers_pid(tmp_path):
    """Fork mode: the launcher reports "forked" and the child "ready" on one pipe, and under
    load the child's report can come first (a make check run lost a pid so). Either one
    gives the pid, and the later one changes nothing."""
    cluster = LocalCluster({"worker": 1}, start_method="fork")
    task, pid = Task("worker", 0), os.getpid()
    cluster._states[task] = cluster_local._TaskState(task, "127.0.0.1:1", tmp_path / "w0", seq=1)
    head = {"job": "worker", "index": 0, "seq": 1, "pid": pid}
    cluster._on_event({"event": "ready", **head})
    assert cluster.pids == {"worker/0": pid} and cluster._states[task].ready_at is not None
    cluster._on_event({"event": "forked", **head, "pid": pid + 1})  # cannot differ: first wins
    assert cluster.pids == {"worker/0": pid}
    cluster._on_event({"event": "ready", **head, "seq": 0, "pid": pid + 2})  # an earlier run's
    assert cluster.pids == {"worker/0": pid}


@pytest.mark.slow
def test_every_strategy_tf_config_passes_tensorflow_s_own_validation():
    configs = _strategy_tf_configs()
    assert "host_two_workers.json worker/1" in configs and "ps chief/0" in configs
    with_host = json.loads(configs["host_two_workers.json worker/1"])
    with_host["cluster"] = load(ROOT / "clusters" / "host_two_workers.json")
    configs["the whole spec, host included"] = json.dumps(with_host)
    verdicts = tensorflow_verdicts(configs)
    refused = verdicts.pop("the whole spec, host included")
    assert refused is not None and refused.startswith(DISALLOWED)  # the check can fail
    assert verdicts == dict.fromkeys(verdicts), verdicts


def test_local_hosts_and_ports():
    assert is_local_host("127.0.0.1") and is_local_host("localhost") and is_local_host("::1")
    assert is_local_host("127.0.0.2") and is_local_host(socket.gethostname())
    assert not is_local_host("192.0.2.1")  # TEST-NET-1: documentation only, never local
    assert not is_local_host("worker0.example.com")
    ports = free_ports(8)
    assert len(set(ports)) == 8 and not any(port_in_use(p) for p in ports)
    with _listening(ports[0]):
        assert port_in_use(ports[0])  # on 127.0.0.1 only: still in use for a server
    assert not port_in_use(ports[0])


def test_grpc_options_for_servers_and_clients(monkeypatch):
    assert grpc_options_value() == (
        "grpc.keepalive_time_ms=1000,grpc.keepalive_timeout_ms=2000,grpc.http2.ping_timeout_ms=2000,"
        "grpc.http2.max_pings_without_data=1"
    )
    assert "max_pings_without_data=0" not in grpc_options_value()  # see dtf.cluster.env
    monkeypatch.setenv(GRPC_ENV, "grpc.keepalive_time_ms=5000,grpc.other=1")
    value = apply_grpc_options()
    assert os.environ[GRPC_ENV] == value
    assert "grpc.keepalive_time_ms=5000" in value and "grpc.other=1" in value
    assert "grpc.http2.ping_timeout_ms=2000" in value
    assert apply_grpc_options(override=True) == grpc_options_value()
    monkeypatch.setenv("TF_CONFIG", '{"task": {}}')
    env = cluster_env.server_env()
    assert "TF_CONFIG" not in env
    assert all(f"{k}={v}" in env[GRPC_ENV] for k, v in GRPC_OPTIONS.items())
    # The servers import the dtf this process imported: the checkout's src/ when the package
    # is installed from it, another one's when an editable install points elsewhere.
    import dtf

    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(Path(dtf.__file__).resolve().parents[1])
    assert env["TF_CPP_MIN_LOG_LEVEL"] and env["TF_ENABLE_ONEDNN_OPTS"]


def test_no_grpc_options_means_no_variable(monkeypatch):
    """TensorFlow rejects an empty TF_GRPC_DEFAULT_OPTIONS ("Invalid GRPC options format"):
    with no options (tests/test_keepalive_claim.py switches the course's off) the variable
    goes, in this process and in the servers' environment."""
    monkeypatch.setenv(GRPC_ENV, "")
    assert apply_grpc_options({}, override=True) == "" and GRPC_ENV not in os.environ
    monkeypatch.setattr(cluster_env, "GRPC_OPTIONS", {})
    assert GRPC_ENV not in cluster_env.server_env({GRPC_ENV: ""})
    assert cluster_env.server_env({GRPC_ENV: "grpc.other=1"})[GRPC_ENV] == "grpc.other=1"


def test_ready_line_round_trip():
    line = ready_line(Task("worker", 1), "127.0.0.1:2223", pid=1234)
    assert line == "dtf-server ready: job=worker task=1 target=grpc://127.0.0.1:2223 pid=1234"
    assert parse_ready_line(line + "\n") == {
        "task": Task("worker", 1),
        "target": "grpc://127.0.0.1:2223",
        "pid": 1234,
    }
    assert parse_ready_line("dtf-server ready: job=worker") is None


def test_constructor_errors_start_nothing():
    before = {p.pid for p in _children()}
    cases = [
        (dict(spec={"worker": 1}, start_method="thread"), "start_method must be"),
        (dict(spec={"worker": 1}, ready_timeout=0), "ready_timeout must be"),
        (dict(spec={"worker": 1}, ready_timeout=True), "ready_timeout must be"),
        (dict(spec={"worker": ["192.0.2.1:2222"]}), "which is not this machine"),
        (dict(spec={"worker": ["127.0.0.1:2222", "localhost:2222"]}), "both use port 2222"),
        (dict(spec={"worker": 1}, exclude="worker"), "every task is excluded"),
        (dict(spec={"worker": 1, "host": 1}, exclude="hots"), "unknown job 'hots'"),
        (dict(spec={"worker": 1, "host": 1}, exclude="host/1"), "task index 1 is out of range"),
        (dict(spec={"worker": 1}, host="192.0.2.1"), "not an address of this machine"),
    ]
    for kwargs, message in cases:
        spec = kwargs.pop("spec")
        with pytest.raises(ClusterConfigError, match=_escape(message)):
            LocalCluster(spec, **kwargs)
    # A remote task is fine when this process plays it (excluded).
    cluster = LocalCluster({"worker": 1, "host": ["192.0.2.1:2222"]}, exclude="host")
    assert cluster.started_tasks == [Task("worker", 0)]
    with pytest.raises(Exception, match="has not started yet"):
        cluster.as_dict()
    assert {p.pid for p in _children()} == before


def test_a_port_in_use_is_found_before_anything_starts():
    (port,) = free_ports(1)
    before = {p.pid for p in _children()}
    with _listening(port):
        cluster = LocalCluster({"worker": ["127.0.0.1:" + str(port)]})
        with pytest.raises(PortInUseError, match=f"port {port} of task worker/0 is in use"):
            cluster.start()
    assert cluster.launcher_pid is None and cluster.pids == {}
    assert {p.pid for p in _children()} == before


# --------------------------------------------------------------------------- real servers

CLIENT = r"""
import json, os, signal, sys, time
from dtf import quiet
quiet.quiet()
from dtf.cluster import apply_grpc_options
import tensorflow as tf            # importing TensorFlow first is fine...
apply_grpc_options()               # ...the options count from the first connection on
import keras
request = json.loads(sys.stdin.readline())
jobs = request["jobs"]
out = {}

# TF1: a graph whose ops are placed on two workers, run through worker/0's master. The spec
# lists host/0, which has no server yet: a master waits for every task it may use, forever,
# unless device_filters leave that task out.
graph = tf.compat.v1.Graph()
with graph.as_default():
    with tf.device("/job:worker/task:0"):
        a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with tf.device("/job:worker/task:1"):
        c = tf.matmul(a, tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    config = tf.compat.v1.ConfigProto(device_filters=["/job:worker", "/job:ps"])
    with tf.compat.v1.Session(request["target"], graph=graph, config=config) as session:
        out["tf1"] = session.run(c).tolist()

# TF_CONFIG as the cluster wrote it, checked as the strategies check it.
from tensorflow.python.distribute import multi_worker_util
os.environ["TF_CONFIG"] = request["tf_config"]
resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
out["resolver"] = [resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id]
multi_worker_util._validate_cluster_spec(
    resolver.cluster_spec(), resolver.task_type, resolver.task_id
)

# TF2: connect (for good) as the host task, then place eager ops and a Keras layer on worker/1.
tf.config.experimental_connect_to_cluster(tf.train.ClusterSpec(jobs), job_name="host")
with tf.device("/job:worker/task:1"):
    x = tf.matmul(tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
                  tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    layer = keras.layers.Dense(2, kernel_initializer="ones")
    y = layer(tf.ones((1, 3)))
out["tf2"] = [x.numpy().tolist(), x.device]
out["keras"] = [y.numpy().tolist(), layer.kernel.value.device]

# A worker that stops answering (SIGSTOP): the keepalive options turn a hang into an error.
pid = request["stop_pid"]
os.kill(pid, signal.SIGSTOP)
began = time.monotonic()
try:
    with tf.device("/job:ps/task:0"):
        tf.reduce_sum(tf.ones((3, 3))).numpy()
    out["frozen"] = ["no error", time.monotonic() - began]
except Exception as exc:
    out["frozen"] = [type(exc).__name__ + ": " + str(exc).splitlines()[0], time.monotonic() - began]
finally:
    os.kill(pid, signal.SIGCONT)
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)  # do not wait on the eager context of a cluster with a frozen task
"""


@pytest.fixture(scope="module")
def client():
    """A client process that imports TensorFlow while the cluster starts."""
    env = {**os.environ, **QUIET_ENV}
    env.pop("PYTEST_CURRENT_TEST", None)
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


@pytest.fixture(scope="module")
def cluster(client):
    """Three workers and a ps on free loopback ports (fork), plus a client task ``host``."""
    with LocalCluster(
        {"worker": 3, "ps": 1, "host": 1}, exclude="host", start_method="fork"
    ) as running:
        yield running
    pids, ports = _everything(running)
    assert_gone(pids, ports)


def test_the_cluster_exposes_what_clients_need(cluster):
    jobs = cluster.as_dict()
    assert list(jobs) == ["worker", "ps", "host"]
    assert cluster.started_tasks == [Task("worker", i) for i in range(3)] + [Task("ps", 0)]
    assert cluster.excluded == {Task("host", 0)} and cluster.pid("host/0") is None
    assert len({a for addresses in jobs.values() for a in addresses}) == 5
    assert all(a.startswith("127.0.0.1:") for addresses in jobs.values() for a in addresses)
    assert cluster.target("worker/1") == "grpc://" + jobs["worker"][1]
    assert cluster.targets["ps/0"] == "grpc://" + jobs["ps"][0]
    assert json.loads(cluster.tf_config("worker/2")) == {
        "cluster": {"worker": jobs["worker"], "ps": jobs["ps"]},  # the servers keep host
        "task": {"type": "worker", "index": 2},
    }
    with pytest.raises(ClusterConfigError, match="host/0 has no TF_CONFIG"):
        cluster.tf_config("host/0")
    assert all(port_in_use(p) for p in cluster.ports)
    assert len(set(cluster.pids.values())) == 4 and cluster.launcher_pid
    assert cluster.import_s is not None and cluster.startup_s >= cluster.import_s
    text = repr(cluster)
    assert "worker/2" in text and "ready" in text and "excluded" in text
    cluster.check()
    assert cluster.alive() and cluster.alive("worker/0")


@pytest.mark.slow
def test_tf1_and_tf2_clients_keras_and_a_frozen_worker(cluster, client):
    request = {
        "jobs": cluster.as_dict(),
        "target": cluster.target("worker/0"),
        "tf_config": cluster.tf_config("worker/1"),  # a strategy's: no host
        "stop_pid": cluster.pid("ps/0"),
    }
    try:
        stdout, stderr = client.communicate(json.dumps(request) + "\n", timeout=120)
    except subprocess.TimeoutExpired:
        client.kill()
        stdout, stderr = client.communicate()
        pytest.fail(f"the client hung:\n{stdout}\n{stderr[-3000:]}")
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"client failed ({client.returncode}):\n{stdout}\n{stderr[-3000:]}"
    out = json.loads(lines[-1][len("RESULT ") :])
    product = [[22.0, 28.0], [49.0, 64.0]]  # 2x3 . 3x2, the matmul of the Parallel Processing notes
    assert out["tf1"] == product
    assert out["resolver"] == [strategy_jobs(cluster.as_dict()), "worker", 1]
    assert out["tf2"] == [product, "/job:worker/replica:0/task:1/device:CPU:0"]
    assert out["keras"] == [[[3.0, 3.0]], "/job:worker/replica:0/task:1/device:CPU:0"]
    error, seconds = out["frozen"]
    print(f"\nfrozen ps/0: {error} after {seconds:.1f} s")
    assert error.startswith("UnavailableError") and seconds < 10
    cluster.check(timeout=5)  # SIGCONT: it runs, and answers, again


def test_a_task_that_dies_is_named_and_can_restart(cluster):
    old_pid = cluster.pid("worker/2")
    assert cluster.kill("worker/2") == -signal.SIGKILL
    assert not cluster.alive("worker/2") and cluster.alive("worker/0") and not cluster.alive()
    with pytest.raises(
        TaskFailedError,
        match=r"task worker/2 is down: its server \(pid \d+\) "
        "was killed by signal SIGKILL",
    ) as info:
        cluster.check()
    assert info.value.task == Task("worker", 2)
    address = cluster.address("worker/2")
    cluster.restart("worker/2")
    assert cluster.pid("worker/2") != old_pid and cluster.address("worker/2") == address
    assert not pid_running(old_pid)
    cluster.check()
    with pytest.raises(Exception, match="still running: kill"):
        cluster.restart("worker/2")
    with pytest.raises(ClusterConfigError, match="excluded"):
        cluster.kill("host/0")


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGSTOP")
def test_a_frozen_task_is_named_when_asked_with_a_timeout(cluster):
    assert cluster.alive(timeout=5) and answers(cluster.address("worker/0"), timeout=5)
    pid = cluster.pid("worker/1")
    os.kill(pid, signal.SIGSTOP)
    try:
        # The signal is delivered asynchronously: until the kernel has stopped the process it
        # may still answer a handshake (seen in 1-3 of 10-15 tries), so wait for "stopped".
        deadline = time.monotonic() + 5
        while psutil.Process(pid).status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline, "SIGSTOP did not stop the server within 5 s"
            time.sleep(0.001)
        assert cluster.alive()  # the process runs...
        began = time.monotonic()
        assert not cluster.alive("worker/1", timeout=1)  # ...but does not answer
        with pytest.raises(
            TaskFailedError,
            match=r"task worker/1 does not answer within 1.0 s, though its server "
            rf"\(pid {pid}\) is stopped \(by SIGSTOP",
        ):
            cluster.check(timeout=1)
        assert time.monotonic() - began < 4
        assert answering(cluster.as_dict()["worker"], timeout=1) == {
            a: a != cluster.address("worker/1") for a in cluster.as_dict()["worker"]
        }
    finally:
        os.kill(pid, signal.SIGCONT)
    cluster.check(timeout=5)
    assert not answers(f"127.0.0.1:{free_ports(1)[0]}", timeout=0.5)  # nobody there


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGSTOP")
def test_a_frozen_server_gets_sigkill_after_the_stop_grace_and_is_gone():
    """A server frozen by SIGSTOP acts neither on its closed stdin nor on SIGTERM: stop()
    waits ``stop_grace`` seconds, then sends SIGKILL, and the process is gone (reaped).

    stop() runs in a thread with a deadline: a stop() that never kills the server would block
    for good (closing the pipe its reader thread reads), where pytest-timeout cannot end it."""
    grace = 1.0
    cluster = LocalCluster({"worker": 1}, start_method="spawn", stop_grace=grace).start()
    pid, ports = cluster.pid("worker/0"), cluster.ports
    process = psutil.Process(pid)
    stopper = threading.Thread(target=cluster.stop, daemon=True)
    try:
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 5  # the signal is delivered asynchronously
        while process.status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline, "SIGSTOP did not stop the server within 5 s"
            time.sleep(0.001)
        began = time.monotonic()
        stopper.start()
        stopper.join(grace + 10)
        took = time.monotonic() - began
        left = pid_running(pid)  # a stopped process runs; a zombie does not
    finally:
        if pid_running(pid):  # a broken stop(), or a failure before it: leave nothing behind
            process.kill()
        if stopper.ident is None:
            cluster.stop()
        stopper.join(GONE_WITHIN_S + 5)
        if psutil.pid_exists(pid):
            try:
                process.wait(GONE_WITHIN_S)  # reap it
            except (psutil.NoSuchProcess, psutil.TimeoutExpired):
                pass
    assert not left, f"the frozen server (pid {pid}) survived stop() ({took:.1f} s)"
    assert not stopper.is_alive() and not cluster.running
    assert grace <= took < grace + 3.0, f"stop() took {took:.2f} s with stop_grace={grace}"
    assert "worker/0" in repr(cluster) and "was killed by signal SIGKILL" in repr(cluster)
    assert not psutil.pid_exists(pid)  # reaped, not a zombie
    assert_gone([pid], ports)


def _ready_time(spec, method, ending=None) -> tuple[float, float | None]:
    """Start a cluster, leave the ``with`` block (normally or by raising ``ending``) and check
    that nothing is left; returns (ready seconds, TensorFlow import seconds)."""
    cluster = LocalCluster(spec, start_method=method)
    expected = (type(ending),) if ending is not None else ()
    try:
        with cluster:
            assert len(cluster.pids) == sum(spec.values())
            pids, ports = _everything(cluster)
            if ending is not None:
                raise ending
    except expected:
        pass
    took = assert_gone(pids, ports)
    assert took < GONE_WITHIN_S
    return cluster.startup_s, cluster.import_s


@pytest.mark.slow
def test_start_up_times_and_every_way_out_leaves_nothing():
    times = {
        ("fork", 1): _ready_time({"worker": 1}, "fork", RuntimeError("a failing cell")),
        ("fork", 4): _ready_time({"worker": 3, "ps": 1}, "fork"),
        ("spawn", 1): _ready_time({"worker": 1}, "spawn", KeyboardInterrupt()),
        ("spawn", 4): _ready_time({"worker": 3, "ps": 1}, "spawn"),
    }
    print()
    for (method, n), (ready, imported) in times.items():
        extra = f" (TensorFlow import {imported:.1f} s)" if imported else ""
        print(f"{method:>5} {n} task{'s' if n > 1 else ' '}: ready in {ready:.1f} s{extra}")
    fork_ratio = times["fork", 4][0] / times["fork", 1][0]
    spawn_ratio = times["spawn", 4][0] / times["spawn", 1][0]
    print(f"fork 4/1: {fork_ratio:.2f}, spawn 4/1: {spawn_ratio:.2f}")
    # One TensorFlow import serves every task: forking 3 more servers costs well under a second.
    # A 1-task cluster needs at least that one import, so on a machine whose load changes
    # between the two starts, the import of the 4-task start is the fairer 1-task baseline.
    fork_4, import_4 = times["fork", 4]
    assert fork_4 - import_4 < 1.5
    assert fork_4 <= 1.5 * max(times["fork", 1][0], import_4)


def test_an_interrupted_start_leaves_nothing():
    cluster = LocalCluster({"worker": 2}, start_method="fork")
    # interrupt_main() does nothing while SIGINT is ignored, as it is in a background job of a
    # shell (and in every process started from one): install Python's handler for the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.5, lambda: __import__("_thread").interrupt_main())
    began = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            cluster.start()
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    took = time.monotonic() - began
    assert cluster.launcher_pid is not None
    assert_gone([cluster.launcher_pid, *cluster.pids.values()], [])
    assert not cluster.running
    # Interrupted while its launcher imports TensorFlow (~3 s alone, more under load): the
    # launcher has started nothing and is stopped at once, not after its import.
    assert cluster.import_s is None and took < INTERRUPTED_START_S, f"{took:.1f} s"


@pytest.mark.slow
def test_a_task_that_never_becomes_ready_is_named(monkeypatch):
    monkeypatch.setenv(DELAY_ENV, "worker/1=60")
    cluster = LocalCluster({"worker": 2}, start_method="spawn", ready_timeout=3)
    began = time.monotonic()
    with pytest.raises(
        ReadyTimeoutError, match="worker/1 did not report ready within 3.0 s"
    ) as info:
        cluster.start()
    assert time.monotonic() - began < 3 + GONE_WITHIN_S
    assert Task("worker", 1) in info.value.tasks
    assert_gone(cluster.pids.values(), [])


def test_the_launcher_import_is_under_the_timeout_too():
    cluster = LocalCluster({"worker": 1}, start_method="fork", ready_timeout=0.3)
    with pytest.raises(ReadyTimeoutError, match="still importing TensorFlow"):
        cluster.start()
    assert_gone([cluster.launcher_pid], [])


def test_a_task_that_fails_to_start_shows_its_exit_status_and_log(monkeypatch):
    monkeypatch.setenv(DELAY_ENV, "worker/0=not-a-number")  # the server raises ValueError
    cluster = LocalCluster({"worker": 1}, start_method="spawn")
    with pytest.raises(
        TaskFailedError,
        match=r"(?s)task worker/0 failed before it was ready: "
        r"its server \(pid \d+\) exited with code 4.*Last lines of its log.*"
        "ValueError",
    ):
        cluster.start()
    assert_gone(cluster.pids.values(), [])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_picked_port_taken_before_its_server_binds_it_is_replaced(monkeypatch, method):
    (taken,) = free_ports(1)
    real, calls = cluster_local.free_ports, []

    def first_pick_is_taken(count):
        calls.append(count)
        ports = real(count)
        return [taken, *ports[1:]] if len(calls) == 1 else ports

    monkeypatch.setattr(cluster_local, "free_ports", first_pick_is_taken)
    with _listening(taken), LocalCluster({"worker": 1}, start_method=method) as cluster:
        assert len(calls) == 2 and taken not in cluster.ports
        cluster.check()
        pids, ports = _everything(cluster)
    assert_gone(pids, ports)


def test_a_given_port_taken_after_the_check_is_an_error_not_a_retry(monkeypatch):
    (port,) = free_ports(1)
    monkeypatch.setattr(cluster_local, "port_in_use", lambda p: False)  # the check misses it
    cluster = LocalCluster({"worker": [f"127.0.0.1:{port}"]}, start_method="spawn")
    with _listening(port), pytest.raises(PortInUseError, match=f"port {port} of task worker/0"):
        cluster.start()
    assert_gone(cluster.pids.values(), [])


@pytest.mark.slow
def test_two_clusters_at_once_even_racing_for_one_port(monkeypatch):
    """Both clusters are handed the same "free" port first: one server binds it, the other
    finds it taken and its cluster starts again on new ports."""
    (shared,) = free_ports(1)
    real = cluster_local.free_ports
    calls: list[int] = []
    lock = threading.Lock()

    def racing_free_ports(count):
        with lock:
            calls.append(count)
            first = len(calls) <= 2
        ports = real(count)
        return [shared, *ports[1:]] if first else ports

    monkeypatch.setattr(cluster_local, "free_ports", racing_free_ports)
    clusters = [LocalCluster({"worker": 2}, start_method=m) for m in ("fork", "spawn")]
    errors = []

    def start(c):
        try:
            c.start()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(c,)) for c in clusters]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert not errors, errors
        ports = [set(c.ports) for c in clusters]
        assert not ports[0] & ports[1] and all(len(p) == 2 for p in ports)
        assert shared in ports[0] | ports[1] and len(calls) == 3  # exactly one retry
        for c in clusters:
            c.check()
    finally:
        everything = [_everything(c) for c in clusters]
        for c in clusters:
            c.stop()
    for pids, ports in everything:
        assert_gone(pids, ports)


PARENT = r"""
import json, sys, threading, time
from dtf.cluster import LocalCluster
clusters = [LocalCluster({"worker": 2}, start_method="fork"),
            LocalCluster("clusters/host_two_workers.json", exclude="host", pick_ports=True,
                         start_method="spawn")]
threads = [threading.Thread(target=c.start) for c in clusters]
[t.start() for t in threads]
[t.join() for t in threads]
pids = [p for c in clusters for p in [*c.pids.values(), c.launcher_pid] if p]
print(json.dumps({"pids": pids, "ports": [p for c in clusters for p in c.ports],
                  "file": clusters[1].as_dict(),
                  "logs": [str(c.log_dir) for c in clusters]}), flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.skipif(not POSIX, reason="SIGKILL")
def test_servers_exit_by_themselves_when_their_parent_is_killed():
    env = {**os.environ, **QUIET_ENV}
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(PARENT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        line = parent.stdout.readline()
        assert line, parent.stderr.read()
        started = json.loads(line)
        assert len(started["pids"]) == 5 and all(port_in_use(p) for p in started["ports"])
        # pick_ports=True: the file's layout and hosts, with free ports instead of its own.
        layout = started["file"]
        assert list(layout) == ["host", "worker"] and len(layout["worker"]) == 2
        assert all(a.startswith("127.0.0.1:") for a in layout["host"] + layout["worker"])
        assert not {split_address(a)[1] for a in layout["worker"]} & {2222, 2223, 2224}
    finally:
        parent.kill()
        parent.wait(10)
    took = assert_gone(started["pids"], started["ports"])
    print(f"\nservers gone {took:.2f} s after their parent was killed")
    # Its temporary log folders are left behind; the next cluster's start removes them.
    logs = [Path(p) for p in started["logs"]]
    assert all(p.is_dir() for p in logs)
    with pytest.raises(ReadyTimeoutError):
        LocalCluster({"worker": 1}, start_method="spawn", ready_timeout=0.01).start()
    assert not any(p.exists() for p in logs)


def test_module_docs_name_the_trade_offs():
    import dtf.cluster as module

    doc = module.__doc__
    for phrase in (
        "fork",
        "spawn",
        "macOS",
        "SECURITY.md",
        "interface",
        "end of file",
        "device_filters",
        "job_name=",
    ):
        assert phrase in doc
    assert "Too many pings" in cluster_env.__doc__
    assert Path(module.__file__).parent.name == "cluster"


def _client_result(code: str) -> dict:
    """Run a client script in a fresh process (TensorFlow connects once per process); its
    result is the JSON of its last output line."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **QUIET_ENV},
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


RESTARTED_PS = """
import json, time
from dtf import quiet
quiet.quiet()
import tensorflow as tf
from dtf.cluster import LocalCluster, apply_grpc_options

apply_grpc_options()
out = {}
with LocalCluster({"chief": 1, "worker": 1, "ps": 1}, exclude="chief") as cluster:
    def connect():
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            cluster.spec, task_type="chief", task_id=0, rpc_layer="grpc")
        strategy = tf.distribute.ParameterServerStrategy(resolver)
        with strategy.scope():
            v = tf.Variable(0.0)
        step = tf.function(lambda: v.assign_add(1.0))
        return tf.distribute.coordinator.ClusterCoordinator(strategy), v, step

    coordinator, v, step = connect()
    for _ in range(5):
        coordinator.schedule(step)
    coordinator.join()
    cluster.kill("ps/0")
    began = time.monotonic()
    try:
        for _ in range(5):
            coordinator.schedule(step)
        coordinator.join()
        out["join"] = "no error"
    except tf.errors.UnavailableError:
        out["join"] = "UnavailableError"
    cluster.restart("ps/0")  # at once: its address was refused a moment ago
    restarted = time.monotonic()
    attempts = 0
    while True:  # the workers retry a refused address only after gRPC's back-off
        attempts += 1
        try:
            coordinator, v, step = connect()
            for _ in range(3):
                coordinator.schedule(step)
            coordinator.join()
            break
        except tf.errors.UnavailableError:
            if time.monotonic() - restarted > 60:
                raise
    out["after"] = float(v.numpy())
    out["attempts"] = attempts
    out["seconds"] = time.monotonic() - restarted
print(json.dumps(out), flush=True)
"""


@pytest.mark.slow
@pytest.mark.waits  # and with it this module's group, the longest of the plain tests
def test_a_restarted_parameter_server_is_reached_again_at_once():
    """Kill the ps under a ParameterServerStrategy coordinator, restart it at the same
    address and reconnect: the first attempts may still fail with 'Connection refused' (gRPC
    retries a refused address after a back-off), so the client retries with a deadline, and
    training goes on within seconds (measured: 2-4 attempts, ~0.2 s)."""
    out = _client_result(RESTARTED_PS)
    assert out["join"] == "UnavailableError"
    assert out["after"] == 3.0  # a fresh variable on the restarted ps, three steps
    assert 1 <= out["attempts"] and out["seconds"] < 30, out


IDLE_CLIENT = """
import json, time
from dtf import quiet
quiet.quiet(3)
import tensorflow as tf
from dtf.cluster import LocalCluster, apply_grpc_options

apply_grpc_options()
out = {}
with LocalCluster({"worker": 1}) as cluster:
    tf.config.experimental_connect_to_cluster(cluster.spec)
    with tf.device("/job:worker/task:0"):
        out["first"] = float(tf.reduce_sum(tf.ones(3)))
    time.sleep(10)  # a learner reading between two cells: the connection is idle
    try:
        with tf.device("/job:worker/task:0"):
            out["after_idle"] = float(tf.reduce_sum(tf.ones(3)))
    except tf.errors.OpError as err:
        out["after_idle"] = type(err).__name__ + ": " + str(err).splitlines()[0]
print(json.dumps(out), flush=True)
"""


@pytest.mark.slow
def test_an_idle_client_is_not_cut_off_by_its_keepalive_pings():
    """With gRPC's default of two pings without data, the first op after several seconds of
    idleness failed with 'UnavailableError: Too many pings'; GRPC_OPTIONS allows one."""
    out = _client_result(IDLE_CLIENT)
    assert out == {"first": 3.0, "after_idle": 3.0}, out
