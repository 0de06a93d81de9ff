"""Tests for ``dtf.multiworker``: configurations, error summaries, and real worker processes.

The configuration and message tests are plain Python. The process tests start real
``MultiWorkerMirroredStrategy`` workers: one module-wide launcher (fork: one TensorFlow
import) serves most of them; the spawn start method, a killed parent and a killed launcher
get processes of their own. Every test checks that what it started is gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

from dtf.lessons import worker_program as mw_program
from dtf.multiworker import (
    DEFAULT_PROGRAM,
    DEFAULT_START_METHOD,
    EXIT_DEADLINE,
    EXIT_PREEMPTED,
    Launcher,
    TrainConfig,
    WorkerError,
    WorkerTimeoutError,
    error_summary,
)
from dtf.multiworker import launcher as mw_launcher
from dtf.multiworker import worker as mw_worker

from .helpers import QUIET_ENV, ROOT

POSIX = os.name == "posix"
pytestmark = pytest.mark.timeout(240)
GONE_WITHIN_S = 10.0
RUN_S = 90.0


def _alive(pid: int) -> bool:
    try:
        process = psutil.Process(pid)
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_gone(pids, within: float = GONE_WITHIN_S) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return
        time.sleep(0.05)
    raise AssertionError(f"still running after {within} s: {[p for p in pids if _alive(p)]}")


def assert_all_ok(run, results) -> None:
    """Every worker of ``run`` exited with code 0; otherwise show what each one logged."""
    codes = [r.returncode for r in results.values()]
    logs = "\n".join(f"--- worker {t}: {run.log(t)[-1500:]}" for t in run.tasks)
    assert codes == [0] * len(codes), f"{codes}\n{logs}"


def max_diff(a, b) -> float:
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))


# --------------------------------------------------------------------------- plain Python


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"steps": 0}, "steps must be at least 1"),
        ({"steps": 2.0}, "steps must be a whole number"),
        ({"per_worker_batch": True}, "per_worker_batch must be a whole number"),
        ({"learning_rate": 0}, "learning_rate must be a number > 0"),
        ({"deadline_s": "10"}, "deadline_s must be a number > 0"),
        ({"checkpoint_every": 5}, "need a checkpoint_dir"),
        ({"preemption": True}, "need a checkpoint_dir"),
        (
            {"checkpoint_every": 5, "preemption": True, "checkpoint_dir": "x"},
            "choose checkpoint_every",
        ),
        ({"pause_task": 1}, "give pause_task and pause_after together"),
        ({"pause_task": 1, "pause_after": 40}, "pause_after must be at most 39"),
        ({"pause_task": -1, "pause_after": 3}, "pause_task must be at least 0"),
    ],
)
def test_a_wrong_config_is_refused_before_anything_starts(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        TrainConfig(**kwargs)


def test_a_config_travels_as_json_unchanged():
    config = TrainConfig(
        steps=7, checkpoint_dir="/somewhere", checkpoint_every=2, pause_task=1, pause_after=3
    )
    assert TrainConfig.from_json(config.to_json()) == config
    assert json.loads(config.to_json())["pause_after"] == 3


KILLED_MESSAGE = """Graph execution error:

Detected at node sgd/CollectiveReduceV2 defined at (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main

  File "/home/someone/dtf/lessons/worker_program.py", line 179, in train_step

Collective ops is aborted by: recvmsg:Connection reset by peer
Additional GRPC error information from remote target /job:worker/replica:0/task:1 while calling \
/tensorflow.WorkerService/RecvBuf:
:UNKNOWN:Error received from peer  {grpc_message:"recvmsg:Connection reset by peer", grpc_status:14}
The error could be from a previous operation. Restart your program to reset.
\t [[{{node sgd/CollectiveReduceV2}}]] [Op:__inference_train_step_374]"""


def test_an_error_summary_keeps_what_happened_and_drops_paths_and_grpc_internals():
    lines = error_summary(KILLED_MESSAGE)
    assert lines == [
        "at node sgd/CollectiveReduceV2",
        "Collective ops is aborted by: recvmsg:Connection reset by peer",
        "Additional GRPC error information from remote target /job:worker/replica:0/task:1 "
        "while calling /tensorflow.WorkerService/RecvBuf:",
        "The error could be from a previous operation. Restart your program to reset.",
    ]
    assert error_summary("") == ["(no message)"]


def test_a_fit_error_is_one_line_without_the_per_replica_values():
    text = (
        "Attempt to convert a value (PerReplica:{\n  0: <tf.Tensor: shape=(2, 2), "
        "numpy=\narray([[0., 1.],\n       [1., 0.]])>\n}) with an unsupported type "
        "(<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor."
    )
    message = mw_worker.fit_message(ValueError(text))
    assert message == (
        "Attempt to convert a value (PerReplica:{...}) with an unsupported type "
        "(<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor."
    )


def test_initial_weights_are_seeded_glorot_and_zero_biases():
    first, again, other = (mw_program.initial_weights(s) for s in (3, 3, 4))
    assert [w.shape for w in first] == [(64, 32), (32,), (32, 10), (10,)]
    assert max_diff(first, again) == 0.0 and max_diff(first, other) > 0.0
    assert not first[1].any() and not first[3].any()
    assert np.abs(first[0]).max() <= np.sqrt(6.0 / (64 + 32))


def test_launcher_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="start_method"):
        Launcher(start_method="thread")
    for bad in (0, -1, True, "5"):
        with pytest.raises(ValueError, match="ready_timeout"):
            Launcher(ready_timeout=bad)
    launcher = Launcher(start_method="spawn", workdir=tmp_path)
    with pytest.raises(WorkerError, match="start"):
        launcher.wait_ready()
    with launcher:
        with pytest.raises(TypeError, match="TrainConfig"):
            launcher.run({"steps": 3}, num_workers=2)
        with pytest.raises(ValueError, match="pause_task 2 is not a worker of 2"):
            launcher.run(TrainConfig(pause_task=2, pause_after=3), num_workers=2)
        with pytest.raises(ValueError, match="num_workers must be at least 1"):
            launcher.run(TrainConfig(), num_workers=0)
        with pytest.raises(FileNotFoundError, match="no program file"):
            launcher.run(TrainConfig(), num_workers=2, program=tmp_path / "missing.py")
    assert tmp_path.is_dir(), "a folder given by the caller is the caller's"


def test_the_default_program_is_the_one_notebook_11_exports():
    """The launcher's default program is the package module generated from notebook 11."""
    text = DEFAULT_PROGRAM.read_text(encoding="utf-8")
    header = "".join(line for line in text.splitlines()[:3])
    assert "GENERATED" in header and "notebooks/11_multi_worker_and_fault_tolerance.ipynb" in header
    for api in (
        "MultiWorkerMirroredStrategy()",
        "CheckpointManager",
        "PreemptionCheckpointHandler",
    ):
        assert api in text
    assert mw_program.EXIT_PREEMPTED == EXIT_PREEMPTED == 42


def test_a_worker_run_by_hand_prints_its_events(capsys, monkeypatch):
    """Outside a launcher, Worker.current() reads DTF_TRAIN_CONFIG and TF_CONFIG and prints."""
    monkeypatch.setattr(mw_worker, "_CURRENT", None)
    monkeypatch.setenv(mw_worker.CONFIG_ENV, TrainConfig(steps=3).to_json())
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {}, "task": {"index": 1}}))
    worker = mw_worker.Worker.current()
    assert worker.config.steps == 3 and worker.task == 1 and worker.run_dir is None
    worker.emit("step", step=2, loss=0.5)
    assert json.loads(capsys.readouterr().out) == {
        "event": "step",
        "task": 1,
        "step": 2,
        "loss": 0.5,
    }
    assert worker.step == 2


# --------------------------------------------------------------------------- real workers


@pytest.fixture(scope="module")
def launcher_tmp(tmp_path_factory):
    """The temporary folder (``TMPDIR``) of the module's launcher and of its workers."""
    return tmp_path_factory.mktemp("launcher-tmp")


@pytest.fixture(scope="module")
def launcher(launcher_tmp):
    began = time.monotonic()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TMPDIR", str(launcher_tmp))  # read once, when the launcher starts
        started = Launcher().start(wait=False)
    with started as launcher:
        print(f"\nlauncher ready in {launcher.wait_ready():.1f} s ({time.monotonic() - began:.1f})")
        yield launcher
        pids = launcher.pids
    assert_gone(pids)
    assert not launcher.workdir.exists()


@pytest.mark.slow
def test_two_workers_end_equal_to_each_other_and_to_one_process(launcher, launcher_tmp):
    import tensorflow as tf

    config = TrainConfig(steps=6, per_worker_batch=8, try_fit=True)
    run = launcher.run(config, num_workers=2)
    results = run.wait(timeout=RUN_S)
    assert_all_ok(run, results)
    # autograph's file of each converted function goes with the worker that wrote it
    assert not list(launcher_tmp.iterdir()) and not list(run.dir.glob("tmp-*"))
    started = results[1].last("started")
    assert started["replicas"] == 2 and started["global_batch"] == 16
    assert json.loads(run.tf_config(1))["task"] == {"type": "worker", "index": 1}
    fit = results[0].last("fit")
    assert not fit["ok"] and fit["error"] == "ValueError" and "PerReplica" in fit["message"]
    (s0, w0), (s1, w1) = run.weights("final", 0), run.weights("final", 1)
    assert s0 == s1 == 6 and max_diff(w0, w1) == 0.0

    x, y = mw_program.digits_arrays()
    model = mw_program.build_model(config.seed)
    optimizer = mw_program.make_optimizer(config)
    optimizer.build(model.trainable_variables)
    batches = iter(mw_program.global_batches(x, y, 16, config.seed))
    step = mw_program.make_train_step(tf.distribute.get_strategy(), model, optimizer, 16)
    losses = [float(step(batches)) for _ in range(6)]
    assert max_diff(model.get_weights(), w0) < 1e-5
    reported = [e["loss"] for e in results[0].events if e["event"] == "step"]
    assert np.allclose(losses, reported, atol=1e-5)


TINY_PROGRAM = """
import sys
from dtf.multiworker.worker import Worker
worker = Worker.current()
worker.emit("hello", name=__name__, argv=sys.argv, steps=worker.config.steps, task=worker.task)
sys.exit(7 if __name__ == "__main__" else 0)
"""


@pytest.mark.slow
def test_the_launcher_runs_the_program_file_it_is_given(launcher, tmp_path):
    """A run's workers run the file named by ``program`` as ``python FILE``: a changed file
    changes what they do (here: SGD without momentum), and the next run reads it again."""
    import runpy

    import tensorflow as tf

    tiny = tmp_path / "tiny.py"
    tiny.write_text(TINY_PROGRAM, encoding="utf-8")
    run = launcher.run(TrainConfig(steps=5), num_workers=2, program=tiny)
    results = run.wait(timeout=RUN_S)
    assert [r.returncode for r in results.values()] == [7, 7], run.log(0)[-2000:]
    hello = results[1].last("hello")
    assert hello["name"] == "__main__" and hello["argv"] == [str(tiny.resolve())]
    assert hello["steps"] == 5 and hello["task"] == 1 and run.program == tiny.resolve()

    changed = tmp_path / "no_momentum.py"
    text = DEFAULT_PROGRAM.read_text(encoding="utf-8")
    assert text.count("momentum=0.9") == 1
    changed.write_text(text.replace("momentum=0.9", "momentum=0.0"), encoding="utf-8")
    config = TrainConfig(steps=4, per_worker_batch=8)
    runs = {}
    for name, program in (("default", None), ("changed", changed)):
        run = launcher.run(config, num_workers=2, program=program)
        assert_all_ok(run, run.wait(timeout=RUN_S))
        runs[name] = run.weights("final", 0)[1]
    assert max_diff(runs["default"], runs["changed"]) > 1e-4  # the file made a difference
    # ...and it is the difference the file says: one process with the changed file's code
    ns = runpy.run_path(str(changed))
    model = ns["build_model"](config.seed)
    optimizer = ns["make_optimizer"](config)
    assert float(optimizer.momentum) == 0.0
    optimizer.build(model.trainable_variables)
    x, y = ns["digits_arrays"]()
    batches = iter(ns["global_batches"](x, y, 16, config.seed))
    step = ns["make_train_step"](tf.distribute.get_strategy(), model, optimizer, 16)
    for _ in range(config.steps):
        step(batches)
    assert max_diff(model.get_weights(), runs["changed"]) < 1e-5


@pytest.mark.slow
def test_a_killed_worker_fails_its_peer_and_a_restart_resumes_the_checkpoint(launcher, tmp_path):
    ckpt = dict(steps=8, per_worker_batch=8, checkpoint_dir=str(tmp_path), checkpoint_every=2)
    run = launcher.run(TrainConfig(**ckpt, pause_task=1, pause_after=5), num_workers=2)
    run.wait_for("paused", 1, timeout=RUN_S)
    killed_at = run.kill(1)
    results = run.wait(timeout=RUN_S)
    assert results[1].returncode == (-signal.SIGKILL if POSIX else results[1].returncode)
    error = results[0].error
    assert results[0].returncode == 1 and error["error"] == "UnavailableError"
    assert error["step"] == 6 and error["t"] - killed_at < 5.0
    assert any("Restart your program" in line for line in error["lines"])
    with pytest.raises(WorkerError, match="already"):
        run.kill(1)
    saved = run.weights("checkpoint-4", 0)

    again = launcher.run(TrainConfig(**ckpt), num_workers=2)
    results = again.wait(timeout=RUN_S)
    assert_all_ok(again, results)
    for task in again.tasks:
        step, weights = again.weights("restored", task)
        assert step == saved[0] == 4 and max_diff(weights, saved[1]) == 0.0
        first = next(e for e in results[task].events if e["event"] == "step")
        assert first["step"] == 5
    # The batches of steps 1-4 were skipped, not trained on again: the resumed run ends with
    # the weights of a run of the same config (steps, seed, batch) that nobody killed.
    resumed = again.weights("final", 0)
    whole = launcher.run(TrainConfig(**{**ckpt, "checkpoint_dir": str(tmp_path / "whole")}), 2)
    assert_all_ok(whole, whole.wait(timeout=RUN_S))
    uninterrupted = whole.weights("final", 0)
    assert resumed[0] == uninterrupted[0] == 8
    assert max_diff(resumed[1], uninterrupted[1]) <= 1e-6, max_diff(resumed[1], uninterrupted[1])


@pytest.mark.slow
def test_a_preempted_worker_makes_every_worker_save_at_one_step(launcher, tmp_path):
    cfg = dict(steps=8, per_worker_batch=8, checkpoint_dir=str(tmp_path), preemption=True)
    run = launcher.run(TrainConfig(**cfg, pause_task=1, pause_after=3), num_workers=2)
    run.wait_for("paused", 1, timeout=RUN_S)
    run.send(1, signal.SIGTERM)
    run.resume(1)
    results = run.wait(timeout=RUN_S)
    assert [r.returncode for r in results.values()] == [EXIT_PREEMPTED] * 2
    assert [r.last("preempted")["step"] for r in results.values()] == [4, 4]
    again = launcher.run(TrainConfig(**cfg), num_workers=2)
    assert_all_ok(again, again.wait(timeout=RUN_S))
    step, weights = again.weights("restored", 1)
    assert step == 4 and max_diff(weights, run.weights("preempted", 1)[1]) == 0.0


@pytest.mark.slow
def test_waits_are_bounded_and_a_timed_out_run_is_stopped(launcher):
    run = launcher.run(
        TrainConfig(steps=6, per_worker_batch=8, pause_task=1, pause_after=2), num_workers=2
    )
    run.wait_for("paused", 1, timeout=RUN_S)
    with pytest.raises(WorkerTimeoutError, match="did not report 'done' within 0.2 s"):
        run.wait_for("done", 1, timeout=0.2)
    pids = list(run.pids.values())
    with pytest.raises(WorkerTimeoutError, match="still running after 0.5 s: stopped"):
        run.wait(timeout=0.5)
    assert not run.running
    assert_gone(pids)


@pytest.mark.slow
def test_a_stuck_worker_ends_itself_and_its_peer_ends_by_the_deadline(launcher):
    config = TrainConfig(
        steps=6, per_worker_batch=8, pause_task=1, pause_after=2, pause_timeout_s=1.0, deadline_s=8
    )
    run = launcher.run(config, num_workers=2)
    results = run.wait(timeout=RUN_S)
    # The paused worker gives up after pause_timeout_s; its peer, blocked in the all-reduce,
    # fails (the peer is gone) or is killed by the launcher at the run's deadline.
    assert results[1].returncode == EXIT_DEADLINE
    assert results[1].error["error"] == "PauseTimeout"
    assert results[0].returncode in (1, -signal.SIGKILL if POSIX else 1)
    if results[0].returncode != 1:
        assert results[0].error["error"] == "Deadline"
        assert "already exited: worker 1 exited with code 3" in results[0].error["message"]


LEAVES_EARLY = """
import re, sys
from dtf.multiworker.worker import Worker
worker = Worker.current()
worker.emit("started")
if worker.task == 1:
    print("worker 1 leaves early", file=sys.stderr, flush=True)
    sys.exit(5)
re.match(r"(a+)+$", "a" * 64 + "b")  # worker 0: stuck in a call that holds the GIL for hours
"""


def _until_exited(run, task: int, within: float = RUN_S) -> None:
    deadline = time.monotonic() + within
    while task not in run.returncodes:
        assert time.monotonic() < deadline, f"worker {task} did not exit: {run.log(task)}"
        time.sleep(0.05)


@pytest.mark.slow
def test_the_launcher_kills_a_survivor_at_the_deadline_and_names_the_peer_that_left(
    launcher, tmp_path
):
    """A worker stuck where no timer of its own could run (the regex holds its interpreter
    lock) is killed from outside at ``deadline_s``; every message names the peer that left,
    its exit status and its last log lines."""
    program = tmp_path / "leaves_early.py"
    program.write_text(LEAVES_EARLY, encoding="utf-8")
    run = launcher.run(TrainConfig(deadline_s=4.0), num_workers=2, program=program)
    _until_exited(run, 1)
    named = r"\nAlready exited:\nworker 1 exited with code 5: Exit: worker 1 leaves early\n"
    with pytest.raises(
        WorkerTimeoutError, match=r"(?s)did not report 'done' within 0.2 s.*" + named
    ):
        run.wait_for("done", 0, timeout=0.2)
    results = run.wait(timeout=RUN_S)
    ended = time.monotonic() - run.started_at
    assert 4.0 <= ended < 4.0 + GONE_WITHIN_S, ended
    assert results[0].returncode == (-signal.SIGKILL if POSIX else results[0].returncode)
    error = results[0].error
    assert error["error"] == "Deadline" and "deadline_s=4.0" in error["message"]
    assert "already exited: worker 1 exited with code 5" in error["message"]
    assert results[1].returncode == 5 and results[1].error["message"] == "worker 1 leaves early"

    again = launcher.run(TrainConfig(deadline_s=60.0), num_workers=2, program=program)
    _until_exited(again, 1)
    pids = list(again.pids.values())
    with pytest.raises(
        WorkerTimeoutError, match=r"(?s)still running after 0.5 s: stopped.*" + named
    ):
        again.wait(timeout=0.5)
    assert_gone(pids)


NO_DONE = """
import os
from dtf.multiworker.worker import Worker
worker = Worker.current()
worker.emit("started")
if worker.task == 1:
    os._exit(0)  # gone without a word: only the launcher can tell
"""


@pytest.mark.slow
def test_an_exit_without_done_is_a_failure_never_a_success(launcher, tmp_path):
    """Worker 0's program returns without training: it reports NotDone and exits with 1.
    Worker 1 leaves with status 0 and no word: waiting for the run raises, naming it."""
    program = tmp_path / "no_done.py"
    program.write_text(NO_DONE, encoding="utf-8")
    run = launcher.run(TrainConfig(), num_workers=2, program=program)
    with pytest.raises(WorkerError, match="worker 1 of run .* code 0 without reporting"):
        run.wait(timeout=RUN_S)
    results = run.results()
    assert results[0].returncode == 1 and results[0].error["error"] == "NotDone"
    assert "without reporting 'done'" in run.log(0)
    assert results[1].returncode == 0 and results[1].last("done") is None


def test_a_spawned_worker_that_cannot_start_shows_its_traceback(monkeypatch):
    """A spawned worker's standard error is its log from its first byte: an import error
    before any worker code runs is in the log and in the error."""
    monkeypatch.setattr(mw_launcher, "_MODULE", "dtf.multiworker._no_such_module")
    with Launcher(start_method="spawn") as launcher:
        run = launcher.run(TrainConfig(), num_workers=1)
        with pytest.raises(WorkerError, match="(?s)exited with code 1 before 'started'.*No module"):
            run.wait_for("started", 0, timeout=RUN_S)
        results = run.wait(timeout=RUN_S)
        pids = launcher.pids
    assert results[0].error["error"] == "Exit"
    assert "No module named dtf.multiworker._no_such_module" in results[0].error["message"]
    assert_gone(pids)


@pytest.mark.slow
def test_a_new_run_stops_the_workers_of_the_previous_one(launcher):
    first = launcher.run(
        TrainConfig(steps=6, per_worker_batch=8, pause_task=0, pause_after=2), num_workers=2
    )
    first.wait_for("paused", 0, timeout=RUN_S)
    pids = list(first.pids.values())
    second = launcher.run(TrainConfig(steps=2, per_worker_batch=8), num_workers=2)
    assert not first.running
    assert_gone(pids)
    assert_all_ok(second, second.wait(timeout=RUN_S))


@pytest.mark.slow
def test_freeze_stops_a_worker_without_ending_it(launcher):
    run = launcher.run(
        TrainConfig(steps=6, per_worker_batch=8, pause_task=1, pause_after=2), num_workers=2
    )
    run.wait_for("paused", 1, timeout=RUN_S)
    run.freeze(1)
    process = psutil.Process(run.pids[1])
    try:
        deadline = time.monotonic() + 5.0  # the signal is delivered asynchronously
        while process.status() != psutil.STATUS_STOPPED and time.monotonic() < deadline:
            time.sleep(0.01)
        assert process.status() == psutil.STATUS_STOPPED
    finally:
        run.kill(1)
    run.wait(timeout=RUN_S)


@pytest.mark.slow
def test_the_spawn_start_method_runs_the_same_program(tmp_path):
    with Launcher(start_method="spawn") as launcher:
        run = launcher.run(TrainConfig(steps=3, per_worker_batch=8), num_workers=2)
        results = run.wait(timeout=RUN_S)
        assert_all_ok(run, results)
        assert max_diff(run.weights("final", 0)[1], run.weights("final", 1)[1]) == 0.0
        tiny = tmp_path / "tiny.py"  # a spawned worker runs the file it is given too
        tiny.write_text(TINY_PROGRAM, encoding="utf-8")
        other = launcher.run(TrainConfig(steps=2), num_workers=2, program=tiny)
        results = other.wait(timeout=RUN_S)
        assert [r.returncode for r in results.values()] == [7, 7], other.log(0)[-2000:]
        assert results[0].last("hello")["name"] == "__main__"
        pids = launcher.pids
    assert len(pids) == 4
    assert_gone(pids)


@pytest.mark.slow
def test_the_program_runs_by_hand_as_one_worker(tmp_path):
    """``python program.py`` without a launcher: one worker (no TF_CONFIG), its
    configuration from DTF_TRAIN_CONFIG, its events printed as JSON lines."""
    env = {**os.environ, **QUIET_ENV, mw_worker.CONFIG_ENV: TrainConfig(steps=3).to_json()}
    env.pop("TF_CONFIG", None)
    done = subprocess.run(
        [sys.executable, str(DEFAULT_PROGRAM)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [e["event"] for e in events] == ["started", "step", "step", "step", "done"]
    assert events[0]["replicas"] == 1 and events[-1]["step"] == 3


PARENT = """
import json, sys
from dtf.multiworker import Launcher, TrainConfig
launcher = Launcher().start()
config = TrainConfig(steps=6, per_worker_batch=8, pause_task=1, pause_after=2)
run = launcher.run(config, num_workers=2)
run.wait_for("paused", 1, timeout=90)
print(json.dumps({"pids": launcher.pids, "workdir": str(launcher.workdir)}), flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
@pytest.mark.skipif(DEFAULT_START_METHOD != "fork", reason="the fork launcher runs on Linux")
def test_workers_and_launcher_exit_when_their_parent_is_killed():
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(PARENT)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **QUIET_ENV},
        cwd=ROOT,
    )
    try:
        line = parent.stdout.readline()
        assert line, parent.stderr.read()
        started = json.loads(line)
        assert len(started["pids"]) == 3 and all(_alive(p) for p in started["pids"])
    finally:
        parent.kill()
        parent.wait(10)
        parent.stdin.close()
    assert_gone(started["pids"])
    # Its folder is left behind; the next launcher removes it.
    with Launcher(start_method="spawn") as other:
        assert other.workdir.exists()
    assert not os.path.exists(started["workdir"])


@pytest.mark.slow
@pytest.mark.skipif(DEFAULT_START_METHOD != "fork", reason="only the fork method has a launcher")
def test_a_dead_launcher_is_reported_and_takes_its_workers_along(tmp_path):
    with Launcher() as launcher:
        run = launcher.run(
            TrainConfig(steps=6, per_worker_batch=8, pause_task=1, pause_after=2), num_workers=2
        )
        run.wait_for("paused", 1, timeout=RUN_S)
        pids = launcher.pids
        psutil.Process(launcher.pid).kill()
        with pytest.raises(WorkerError, match="launcher was killed by signal"):
            run.wait(timeout=RUN_S)
    assert_gone(pids)
