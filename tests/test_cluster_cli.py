"""Tests for the command-line server, ``python -m dtf.cluster.server`` (``dtf-server``).

Wrong command lines are refused before TensorFlow is imported, so they are tested in this
process through ``main``. Real servers run as subprocesses (a started server cannot be
stopped): three of them, started from a config file and from the TF1-era flags of the
*Parallel Processing notes*, form one cluster that a TF1 client uses, and each is stopped a
different way (``SIGTERM``, ``SIGINT``, end of file on its standard input).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from dtf.cluster import free_ports, port_in_use, server
from dtf.cluster.protocol import parse_ready_line

from .helpers import QUIET_ENV, ROOT

pytestmark = pytest.mark.timeout(180)
READY_WITHIN_S = 90.0


def _env() -> dict:
    env = {**os.environ, **QUIET_ENV}
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _server(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "dtf.cluster.server", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )


def _ready(proc: subprocess.Popen) -> str:
    """The server's first stdout line (its ready line), or fail with its stderr."""
    line = proc.stdout.readline()  # the subprocess is killed by the test's timeout at worst
    if not line:
        proc.wait(10)
        pytest.fail(f"server exited with {proc.returncode}:\n{proc.stderr.read()[-3000:]}")
    return line.strip()


# --------------------------------------------------------------------------- refused


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"worker": ["127.0.0.1:2223", "127.0.0.1:2224"]}))
    return str(path)


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give the cluster exactly once"),
        (["--config", "{c}", "--worker_hosts", "a:1", "--job", "worker"], "exactly once"),
        (["--config", "{c}"], "give this task's job with --job (one of worker)"),
        (["--config", "{c}", "--job", "wroker"], "unknown job 'wroker'"),
        (["--config", "{c}", "--job", "worker", "--task", "2"], "task index 2 is out of range"),
        (["--config", "{c}", "--job", "worker", "--task", "one"], "whole number"),
        (["--cluster-json", '{"worker": 2}', "--job", "worker"], "every task's address"),
        (["--cluster-json", '{"worker": [}', "--job", "worker"], "--cluster-json is not valid"),
        (["--worker_hosts", "w0:2222,w0:2222", "--job_name", "worker"], "the same address"),
        (["--ps_hosts", "p:2222", "--job_name", "ps"], "has no 'worker' job"),
        (["--config", "missing.json", "--job", "worker"], "'missing.json' does not exist"),
    ],
)
def test_wrong_command_lines_exit_2_with_one_message(config, capsys, args, message):
    args = [a.replace("{c}", config) for a in args]
    assert server.main(args) == server.EXIT_USAGE
    err = capsys.readouterr().err
    assert "dtf-server: error: " in err and message in err


def test_a_bad_config_file_is_named_with_the_position(tmp_path, capsys):
    path = tmp_path / "broken.json"
    path.write_text('{"worker": ["127.0.0.1:2222"],\n "ps": }')
    assert server.main(["--config", str(path), "--job", "worker"]) == server.EXIT_USAGE
    err = capsys.readouterr().err
    assert "broken.json" in err and "line 2 column 8" in err


def test_refused_command_lines_do_not_import_tensorflow():
    code = textwrap.dedent(
        """
        import sys
        from dtf.cluster import server
        code = server.main(["--cluster-json", '{"worker": ["127.0.0.1:2222"]}', "--job", "ps"])
        print(code, "tensorflow" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=60
    )
    assert out.stdout.split() == ["2", "False"], out.stderr


def test_a_server_imports_tensorflow_without_keras_or_jax():
    """Keras and JAX are installed, and ``import_tensorflow`` leaves both out: TF's TFLite
    helper found no JAX, and TensorFlow still runs ops."""
    code = textwrap.dedent(
        """
        import importlib.metadata, json, sys
        from dtf.cluster import server
        tf = server.import_tensorflow()
        from tensorflow.lite.python import util
        roots = {m.split(".")[0] for m, module in sys.modules.items() if module is not None}
        print(json.dumps({
            "installed": [importlib.metadata.version(n) > "" for n in ("keras", "jax")],
            "loaded": sorted(roots & {"keras", "tf_keras", "jax", "jaxlib"}),
            "tflite_jit": util._jit is not None,
            "works": float(tf.reduce_sum(tf.ones([3]))),
        }))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=90
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen == {"installed": [True, True], "loaded": [], "tflite_jit": False, "works": 3.0}


def test_python_m_names_the_module_in_its_usage():
    """``python -m dtf.cluster.server`` is the command the notebooks run (``dtf-server`` once
    installed, tests/test_scripts.py): a usage error names it, with nothing before it."""
    out = subprocess.run(
        [sys.executable, "-m", "dtf.cluster.server", "--job", "worker"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert out.returncode == server.EXIT_USAGE, out.stderr
    assert out.stderr.startswith("usage: python -m dtf.cluster.server"), out.stderr


def test_a_port_in_use_exits_3_and_names_the_task():
    (port,) = free_ports(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        proc = _server("--worker_hosts", f"127.0.0.1:{port}", "--job_name", "worker")
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == server.EXIT_PORT_IN_USE
    assert f"port {port} of task worker/0 is in use" in err


BIND_RACE = r"""
import socket, sys
from dtf.cluster import server
from dtf.cluster import PortInUseError, Task
port = int(sys.argv[1])
holder = socket.socket(); holder.bind(("127.0.0.1", port)); holder.listen()
real, seen = server.port_in_use, []
def first_check_misses(p):         # the check before TensorFlow misses the holder (a race)...
    seen.append(p)
    return False if len(seen) == 1 else real(p)
server.port_in_use = first_check_misses
try:
    server.start_server({"worker": [f"127.0.0.1:{port}"]}, Task("worker", 0))
    print("STARTED")
except PortInUseError as exc:      # ...so TensorFlow's failed bind is recognised instead
    print("ERROR", exc)
sys.stdout.flush()
import os; os._exit(0)
"""


def test_a_failed_bind_inside_tensorflow_is_reported_as_port_in_use():
    (port,) = free_ports(1)
    out = subprocess.run(
        [sys.executable, "-c", BIND_RACE, str(port)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=120,
    )
    assert (
        f"ERROR port {port} of task worker/0 is in use (the server could not bind it)" in out.stdout
    ), out.stdout + out.stderr[-2000:]


WARNED_THEN_READY = r"""
import os, signal, sys, threading
from dtf.cluster import server
def start_server(jobs, task):  # no TensorFlow: only the order of the lines is tested
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM)).start()  # handlers are set
server.start_server = start_server
sys.exit(server.main(["--worker_hosts", "127.0.0.1:2222", "--job_name", "worker"]))
"""


def test_the_exposure_warning_is_written_before_the_ready_line():
    """A cluster reads a server's ready line on stdout and its warnings in the log (stderr):
    written after the ready line, a warning could still be missing when the cluster reports
    the server ready (seen once under load). One pipe for both shows the order."""
    out = subprocess.run(
        [sys.executable, "-c", WARNED_THEN_READY],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=60,
    )
    lines = out.stdout.splitlines()
    ready = [i for i, ln in enumerate(lines) if parse_ready_line(ln)]
    for warning in ("listening on every interface", "ExposureWarning"):
        warned = [i for i, ln in enumerate(lines) if warning in ln]
        assert warned and ready and warned[0] < ready[0], out.stdout


# --------------------------------------------------------------------------- real servers

TF1_CLIENT = r"""
import json, os, sys
from dtf import quiet
quiet.quiet()
import tensorflow as tf
target = sys.argv[1]
graph = tf.compat.v1.Graph()
with graph.as_default():
    with tf.device("/job:ps/task:0"):
        a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    with tf.device("/job:worker/task:1"):
        b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    with tf.device("/job:worker/task:0"):
        c = tf.matmul(a, b)
    with tf.compat.v1.Session(target, graph=graph) as session:
        print("RESULT " + json.dumps(session.run(c).tolist()), flush=True)
os._exit(0)
"""


@pytest.mark.slow
def test_three_servers_from_a_file_and_tf1_flags_form_one_cluster(tmp_path):
    ports = free_ports(3)
    workers = [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"]
    ps = f"127.0.0.1:{ports[2]}"
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"ps": [ps], "worker": workers}))
    began = time.monotonic()
    procs = {
        "worker/0": _server("--config", str(path), "--job", "worker", "--task", "0"),
        "worker/1": _server("--config", str(path), "--job", "worker", "--task", "1"),
        "ps/0": _server(
            f"--ps_hosts={ps}",
            f"--worker_hosts={','.join(workers)}",
            "--job_name=ps",
            "--task_index=0",
            "--exit-on-stdin-eof",
        ),
    }
    try:
        lines = {name: _ready(proc) for name, proc in procs.items()}
        print(f"\n3 command-line servers ready in {time.monotonic() - began:.1f} s")
        for (name, proc), address in zip(procs.items(), [*workers, ps], strict=True):
            job, index = name.split("/")
            assert lines[name] == (
                f"dtf-server ready: job={job} task={index} target=grpc://{address} pid={proc.pid}"
            )
            assert server.parse_ready_line(lines[name])["pid"] == proc.pid
        assert all(port_in_use(p) for p in ports)

        client = subprocess.run(
            [sys.executable, "-c", TF1_CLIENT, "grpc://" + workers[0]],
            capture_output=True,
            text=True,
            env=_env(),
            cwd=ROOT,
            timeout=120,
        )
        results = [ln for ln in client.stdout.splitlines() if ln.startswith("RESULT ")]
        assert results, client.stderr[-3000:]
        assert json.loads(results[-1][len("RESULT ") :]) == [[22.0, 28.0], [49.0, 64.0]]

        # Three ways to stop a server.
        procs["worker/0"].send_signal(signal.SIGTERM)
        procs["worker/1"].send_signal(signal.SIGINT)
        procs["ps/0"].stdin.close()
        outcomes = {name: (proc.wait(30), proc.stderr.read()) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert {name: proc.returncode for name, proc in procs.items()} == {
        "worker/0": 0,
        "worker/1": 0,
        "ps/0": 0,
    }
    assert "dtf-server stopped: job=worker task=0 (SIGTERM)" in outcomes["worker/0"][1]
    assert "dtf-server stopped: job=worker task=1 (SIGINT)" in outcomes["worker/1"][1]
    assert "end of file" in outcomes["ps/0"][1]
    assert "listening on every interface" in outcomes["worker/0"][1]
    deadline = time.monotonic() + 5
    while any(port_in_use(p) for p in ports) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(port_in_use(p) for p in ports)
