"""Tests of dtf.checks.lab04: right, wrong and missing answers for every task.

The checkers need TensorFlow, and tasks 2 and 3 a running cluster that the process has joined,
as the lab's kernel has. So the cases run in a TensorFlow process set up like the lab
(tests/checks_worker.py with extra setup code): placement logging on, the gRPC keepalive
defaults, a ``LocalCluster`` of a ``host`` (played by that process) and two workers, connected.
Each case sends its own answer and checker call; after every case that uses the cluster, a
health check runs: every worker answers and computes, so a checker that left a worker frozen,
dead or unreachable fails the test that caused it, and the next case starts from a healthy
cluster. One- and three-worker layouts have their own small cases (a second process with a
one-worker cluster). Every test stands alone.
"""

from __future__ import annotations

import time

import pytest

from dtf.checks import lab04
from tests.checks_worker import worker_fixture

#: The worker's setup, as the lab's Setup cell (a cluster joined); the answers are functions
#: of tests/answers/lab04.py (``answers``).
SETUP = """
import threading
import time

import psutil

from dtf.cluster import LocalCluster, apply_grpc_options
from tests.answers import lab04 as answers, returning, stub

apply_grpc_options()  # before the first connection, as in the lab's Setup
cluster = LocalCluster({{"host": 1, "worker": {workers}}}, exclude="host").start()
tf.config.experimental_connect_to_cluster(cluster.spec, job_name="host", task_index=0)
"""

tf_worker = worker_fixture(num_devices=1, setup=SETUP.format(workers=2))
tf_one_worker = worker_fixture(num_devices=1, setup=SETUP.format(workers=1))

#: Run after every case that uses the cluster: each worker answers and computes (text: it
#: runs in the worker, which holds the cluster).
HEALTHY = """
cluster.check(timeout=10)
for i in range(len(cluster.as_dict()["worker"])):
    with tf.device(f"/job:worker/task:{i}"):
        assert float(tf.reduce_sum(tf.ones([3]))) == 3.0, i
out["pids"] = cluster.pids
"""


pytestmark = pytest.mark.usefixtures("fresh_scorecard")  # conftest: an empty scorecard


@pytest.fixture
def lab(tf_worker):
    """The two-worker process; after the test, its cluster must be healthy."""
    yield tf_worker
    tf_worker.run(HEALTHY)


@pytest.fixture
def lab_one(tf_one_worker):
    """The one-worker process; after the test, its cluster must be healthy."""
    yield tf_one_worker
    tf_one_worker.run(HEALTHY)


# --------------------------------------------------------------------------- helpers


def test_task_of_and_worker_pair() -> None:
    assert lab04.task_of("/job:worker/replica:0/task:1/device:CPU:0") == "/job:worker/task:1"
    assert lab04.task_of("/job:worker/task:3/CPU:0") == "/job:worker/task:3"
    assert lab04.task_of("CPU:0") == lab04.task_of("/device:CPU:0") == "/job:localhost/task:0"
    spec = {"host": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}
    assert lab04.worker_pair(spec) == ["/job:worker/task:0", "/job:worker/task:0"]
    for n in (2, 3, 8):
        spec["worker"] = [f"127.0.0.1:{10 + i}" for i in range(n)]
        assert lab04.worker_pair(spec) == ["/job:worker/task:0", "/job:worker/task:1"]
    with pytest.raises(ValueError, match="'worker' job"):
        lab04.worker_pair({"ps": ["127.0.0.1:1"]})


def test_layouts_and_the_expected_specs() -> None:
    assert lab04.example_ports(2) == [2222, 2223, 2224]
    assert lab04.layouts(2) == [
        (2, (2222, 2223, 2224)),
        (1, (5000, 5001)),
        (3, (7001, 7000, 7003, 7002)),
    ]
    for n in range(1, 5):
        assert len(lab04.layouts(n)) == 3 and lab04.layouts(n)[0][0] == n
    assert lab04.expected_spec(3, (7001, 7000, 7003, 7002)) == {
        "ps": ["127.0.0.1:7001"],
        "worker": ["127.0.0.1:7000", "127.0.0.1:7003", "127.0.0.1:7002"],
    }
    assert lab04.allowed_s() == lab04.TIMEOUT_S + lab04.SLACK_S


# --------------------------------------------------------------------------- task 1


def spec_case(answer: str, num_workers: int = 2) -> str:
    """A case: task 1 checks ``answer``, a function of ``answers`` by default."""
    given = answer if answer in ("stub", "None", "[]") else f"answers.{answer}"
    return f"verdict = checks.lab04.task1({given}, {num_workers})\n"


@pytest.mark.slow
def test_task1_right(tf_worker) -> None:
    first = tf_worker.run(spec_case("right"))
    assert first.status == "correct", first.message
    assert first.message == (
        "Task 1: correct. TensorFlow reads the expected jobs, tasks and addresses from your "
        "ClusterSpec in 3 layouts; yours has the tasks /job:ps/task:0, /job:worker/task:0, "
        "/job:worker/task:1, all on 127.0.0.1."
    )
    assert tf_worker.run(spec_case("right")).message == first.message  # again: the same verdict


@pytest.mark.parametrize("num_workers", [1, 4])
def test_task1_other_worker_counts(tf_worker, num_workers) -> None:
    outcome = tf_worker.run(spec_case("right", num_workers))
    assert outcome.status == "correct", outcome.message
    assert f"/job:worker/task:{num_workers - 1}, all on 127.0.0.1" in outcome.message


@pytest.mark.parametrize(
    "answer",
    [
        "spec_of_tuples",
        "spec_workers_first",
        "spec_of_a_spec",
    ],
    ids=["tuples", "jobs-in-another-order", "spec-of-a-spec"],
)
def test_task1_other_right_answers(tf_worker, answer) -> None:
    outcome = tf_worker.run(spec_case(answer))
    assert outcome.status == "correct", outcome.message


@pytest.mark.parametrize("host", ["localhost", "[::1]", "127.0.0.2"])
def test_task1_another_loopback_name_is_refused(tf_worker, host) -> None:
    """The task names 127.0.0.1; localhost was accepted before issue 26."""
    outcome = tf_worker.run(spec_case(f"make_spec(host={host!r})"))
    assert outcome.status == "wrong", outcome.message
    assert "a loopback address, but not the one the task names" in outcome.message


def test_task1_refuses_the_checker_s_expected_spec(tf_worker) -> None:
    outcome = tf_worker.run(spec_case("spec_expected"))
    assert outcome.status == "wrong", outcome.message
    assert "calls `dtf.checks.lab04.expected_spec`, the course's own code" in outcome.message


@pytest.mark.parametrize(
    "answer, fragments",
    [
        ("right_dict", ["expected a tf.train.ClusterSpec, got a dict", "ClusterSpec built from"]),
        (
            "make_spec(jobs=('ps', 'workers'))",
            ["the jobs: expected ['ps', 'worker'], got ['ps', 'workers']", "did you mean 'worker'"],
        ),
        (
            "spec_int_ports",
            ["raised TypeError", "must be bytes or unicode", "the text 'host:port'"],
        ),
        (
            "spec_one_string",
            ["raised TypeError", "must be a list", "the text 'host:port'"],
        ),
        (
            "spec_sparse_indices",
            ["the tasks of job 'worker' have the indices [1, 2], not 0 to 1", "the i-th address"],
        ),
        (
            "spec_off_by_one",
            ["tasks ps/0 and worker/0 have the same address '127.0.0.1:2222'", "port of its own"],
        ),
        (
            "spec_no_host",
            ["task ps/0 has the address '2222', not 'host:port'"],
        ),
        (
            "spec_ps_last",
            ["your ps took the last port and the workers the first ones"],
        ),
        (
            "spec_sorted_ports",
            [
                "for 3 workers and ports [7001, 7000, 7003, 7002]: the ports are not where",
                "are yours in the order of `ports`?",
            ],
        ),
        (
            "spec_two_workers_always",
            ["for 3 workers and ports", "tasks of 'worker': expected 3, got 2"],
        ),
        (
            "make_spec(host='0.0.0.0')",
            ["which no client can connect to", "listens on every interface anyway"],
        ),
        (
            "make_spec(host='10.1.2.3')",
            ["host '10.1.2.3', which is not a loopback address", "without authentication"],
        ),
        (
            "spec_extra_job",
            ["the jobs: expected ['ps', 'worker'], got ['chief', 'ps', 'worker']"],
        ),
        (
            "spec_no_ps",
            ["the jobs: expected ['ps', 'worker'], got ['worker']"],
        ),
        ("spec_as_json", ["got the text", "not from text"]),
        (
            "spec_as_list",
            ["expected a tf.train.ClusterSpec, got"],
        ),
        ("[]", ["expected a function"]),
    ],
    ids=[
        "a-dict",
        "job-name",
        "int-ports",
        "one-string",
        "sparse-indices",
        "off-by-one",
        "no-host",
        "ps-last",
        "sorted-ports",
        "two-workers-always",
        "any-address",
        "not-loopback",
        "extra-job",
        "no-ps",
        "json-text",
        "list",
        "not-a-function",
    ],
)
def test_task1_wrong(tf_worker, answer, fragments) -> None:
    outcome = tf_worker.run(spec_case(answer))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment.lower() in outcome.message.lower(), outcome.message
    assert "{'ps':" not in outcome.message  # the expected spec, shown before issue 26


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task1_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(spec_case(answer))
    assert outcome.status == "not attempted", outcome.message


# --------------------------------------------------------------------------- task 2


def stages_case(who: str = "cluster", **switches) -> str:
    """A case: task 2 checks ``answers.make_stages(**switches)`` on the cluster ``who``."""
    args = ", ".join(f"{k}={v!r}" for k, v in switches.items())
    return f"verdict = checks.lab04.task2(answers.make_stages({args}), {who})\n"


def test_task2_right(lab) -> None:
    first = lab.run(stages_case())
    assert first.status == "correct", first.message
    assert first.message == (
        "Task 2: correct. Stage 1 ran on /job:worker/task:0 and stage 2 on /job:worker/task:1, "
        "as the placement log shows; y lives on /job:worker/task:1 until it is read."
    )
    assert lab.run(stages_case()).message == first.message


@pytest.mark.parametrize(
    "switches", [{"function": True}, {"numpy": True}], ids=["tf-function", "numpy-result"]
)
def test_task2_other_right_answers(lab, switches) -> None:
    outcome = lab.run(stages_case(**switches))
    assert outcome.status == "correct", outcome.message
    assert "stage 2 on /job:worker/task:1" in outcome.message


def test_task2_accepts_maximum_as_the_relu(lab) -> None:
    """tf.maximum(h, 0) is a ReLU: accepted, and placed like tf.nn.relu (issue 18)."""
    outcome = lab.run(stages_case(relu="maximum"))
    assert outcome.status == "correct", outcome.message
    late = lab.run(stages_case(relu="maximum", relu_late=True))
    assert late.status == "wrong", late.message
    assert "for the task of the maximum: expected '/job:worker/task:0'" in late.message.lower()
    host = lab.run(stages_case(relu="numpy"))
    assert host.status == "wrong" and "shows no op for stage 1's ReLU" in host.message


@pytest.mark.slow
def test_task2_one_worker_uses_it_twice(lab_one) -> None:
    outcome = lab_one.run(stages_case())
    assert outcome.status == "correct", outcome.message
    assert "Both stages ran on /job:worker/task:0, the only worker" in outcome.message


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"where": (None, None)},
            ["ran on /job:host/task:0, this notebook's own process", "where each stage runs"],
        ),
        (
            {"where": (0, 0)},
            ["both MatMuls ran on /job:worker/task:0; stage 2 belongs on /job:worker/task:1"],
        ),
        (
            {"where": (1, 0)},
            [
                "for the tasks of the MatMuls, in order: expected '/job:worker/task:0, "
                "/job:worker/task:1', got '/job:worker/task:1, /job:worker/task:0'"
            ],
        ),
        (
            {"relu_late": True},
            ["for the task of the Relu: expected '/job:worker/task:0'", "part of stage 1"],
        ),
        ({"capture": False}, ["your placement table has no MatMul", "both stages ran"]),
        ({"shift": 1.0}, ["for y: expected", "compare each of your stages with its formula"]),
        (
            {"stage2_numpy": True},
            ["shows one MatMul, on /job:worker/task:0: the other stage did not run as a Tens"],
        ),
    ],
    ids=["no-scopes", "one-worker", "reversed", "relu-late", "no-log", "value", "numpy-stage"],
)
def test_task2_wrong(lab, switches, fragments) -> None:
    outcome = lab.run(stages_case(**switches))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment.lower() in outcome.message.lower(), outcome.message
    if "stage2_numpy" in switches:  # said "both MatMuls ran on worker 0" before issue 26
        assert "both MatMuls" not in outcome.message


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ("answers.stages_not_a_pair", "expected a pair (y, placement table)"),
        ("answers.stages_without_table", "for y: expected"),
        ("[]", "expected a function"),
    ],
)
def test_task2_malformed(lab, answer, fragment) -> None:
    outcome = lab.run(f"verdict = checks.lab04.task2({answer}, cluster)")
    assert outcome.status == "wrong" and fragment in outcome.message, outcome.message


def test_task2_a_cluster_that_does_not_run(tf_worker) -> None:
    outcome = tf_worker.run(stages_case(who="LocalCluster({'worker': 2})"))
    assert outcome.status == "wrong", outcome.message
    assert "the cluster is not running" in outcome.message


@pytest.mark.slow
def test_checks_get_past_an_idle_connection(lab) -> None:
    # With dtf.cluster's keepalive defaults, the first op after ~5 s without traffic can fail
    # once with "UnavailableError: Too many pings" (measured): the checkers warm the
    # connections up first, so a right answer stays right after a pause.
    outcome = lab.run("time.sleep(7)\n" + stages_case())
    assert outcome.status == "correct", outcome.message


@pytest.mark.slow
def test_warm_up_absorbs_the_error_a_frozen_worker_leaves(lab) -> None:
    # Text: the scenario (a worker frozen, then resumed) runs where the cluster is.
    outcome = lab.run(
        """
process = psutil.Process(cluster.pid("worker/0"))
with tf.device("/job:worker/task:0"):
    tf.reduce_sum(tf.ones([2])).numpy()  # the connection is open
process.suspend()
time.sleep(3.5)  # its keepalive ping times out meanwhile
process.resume()
checks.lab04.warm_up(2)
with tf.device("/job:worker/task:0"):
    out["sum"] = float(tf.reduce_sum(tf.ones([2])))
"""
    )
    assert outcome.out == {"sum": 2.0}


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task2_not_attempted(lab, answer) -> None:
    outcome = lab.run(f"verdict = checks.lab04.task2({answer}, cluster)")
    assert outcome.status == "not attempted", outcome.message


# --------------------------------------------------------------------------- task 3


def sums_case(answer: str, who: str = "cluster") -> str:
    """A case: task 3 checks ``answer`` on the cluster ``who``."""
    return f"verdict = checks.lab04.task3({answer}, {who})\n"


@pytest.mark.slow
def test_task3_right(lab) -> None:
    before = lab.run("out['pids'] = cluster.pids").out["pids"]
    first = lab.run(sums_case("answers.right_sums"))
    assert first.status == "correct", first.message
    assert first.message == (
        "Task 3: correct. With every worker up you returned the 2 sums, computed on the "
        "workers; a frozen worker 0 and a killed worker 1 were reported down (None), each time "
        "within the 4 s allowed. The checker has resumed worker 0, restarted worker 1 and "
        "connected again."
    )
    after = lab.run("out['pids'] = cluster.pids").out["pids"]
    assert after["worker/0"] == before["worker/0"]  # resumed, not restarted
    assert after["worker/1"] != before["worker/1"]  # killed and started again
    assert lab.run(sums_case("answers.right_sums")).message == first.message  # the same verdict


@pytest.mark.slow
@pytest.mark.parametrize(
    "switches",
    [
        "key='task-name'",
        "key='device-name'",
        "value='tensor'",  # a tensor left on the worker
    ],
    ids=["task-names", "device-names", "tensors"],
)
def test_task3_other_right_answers(lab, switches) -> None:
    outcome = lab.run(sums_case(f"answers.make_sums({switches})"))
    assert outcome.status == "correct", outcome.message


@pytest.mark.slow
def test_task3_one_worker(lab_one) -> None:
    outcome = lab_one.run(sums_case("answers.right_sums"))
    assert outcome.status == "correct", outcome.message
    assert "worker 0, the only one, was reported down while frozen and while killed" in (
        outcome.message
    )


@pytest.mark.slow
def test_task3_really_freezes_and_kills_the_workers(lab) -> None:
    # The answer records what it finds at each call: every worker answering, then worker 0
    # stopped (SIGSTOP) and silent, then worker 1 gone.
    outcome = lab.run(
        "seen = []\n" + sums_case("answers.make_recording(cluster, seen)") + "out['seen'] = seen\n"
    )
    assert outcome.status == "correct", outcome.message
    seen = outcome.out["seen"]
    assert [row["answering"] for row in seen] == [[True, True], [False, True], [True, False]]
    assert seen[1]["0"] == "stopped" and seen[1]["1"] != "stopped"
    assert seen[2]["1"] in ("gone", "zombie") and seen[2]["0"] != "stopped"


@pytest.mark.slow
@pytest.mark.parametrize(
    "answer, fragments",
    [
        (
            "sums_uncaught",
            [
                "with worker 0 frozen: `sums_uncaught` raised UnavailableError",
                "must give None, not an exception",
            ],
        ),
        (
            "sums_zero_for_down",
            [
                "with worker 0 frozen: for worker 0, which is frozen, you returned 0",
                "worker 0 is frozen",
            ],
        ),
        (
            "sums_all_or_nothing",
            [
                "with worker 0 frozen: for worker 1, which is up, you returned None",
                "worker 1 answers within `timeout`, yet your function took it for down",
            ],
        ),
        (
            "sums_computed_here",
            [
                "with every worker up: the sum for worker 0 was not computed on "
                "/job:worker/task:0 (the placement log shows Sum on nowhere)"
            ],
        ),
        ("sums_one_for_all", ["the sum for worker 1 was not computed on /job:worker/task:1"]),
        (
            "sums_down_left_out",
            ["with worker 0 frozen: your dict has no entry for worker 0", "None for a worker"],
        ),
        ("sums_extra_task", ["an entry for host/0, which is not a worker"]),
        ("sums_extra_index", ["there is no worker 5"]),
        (
            "sums_sent_blindly",
            [
                "with worker 0 frozen: your function sent it an op (Sum)",
                "not from a wait your function bounded",
                "a worker it had not seen answer within `timeout`",
            ],
        ),
        ("sums_as_list", ["expected a dict {worker index"]),
        ("sums_not_summed", ["expected one number (the sum of x)"]),
        ("sums_of_the_ps", ["with every worker up: `sums_of_the_ps` raised KeyError"]),
        (None, ["expected a function"]),
    ],
    ids=[
        "no-catch",
        "zero-for-down",
        "all-or-nothing",
        "computed-here",
        "one-sum-for-all",
        "down-left-out",
        "extra-task",
        "extra-index",
        "keepalive-only",
        "list",
        "not-summed",
        "raises",
        "not-a-function",
    ],
)
def test_task3_wrong(lab, answer, fragments) -> None:
    outcome = lab.run(sums_case("[]" if answer is None else f"answers.{answer}"))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment.lower() in outcome.message.lower(), outcome.message
    if "with every worker up" in fragments[0]:  # no worker is down: no hint says one is
        assert "down" not in outcome.message, outcome.message


@pytest.mark.slow
def test_task3_a_slow_answer_is_wrong(lab) -> None:
    outcome = lab.run(sums_case("answers.sums_late"))
    assert outcome.status == "wrong", outcome.message
    assert "with worker 0 frozen: your function returned, but after more than the 4 s allowed" in (
        outcome.message
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "answer, fragment",
    [
        # Waits with a timeout of its own, far longer than the one it was given.
        ("answers.make_sums(own_timeout=30.0)", "the `timeout` you were given"),
        # Waits for an event that only the test sets: a function that never returns.
        (
            "answers.make_waiting(gate)",
            "your function's wait for it is not bounded by the `timeout` you were given",
        ),
    ],
    ids=["own-timeout", "never-returns"],
)
def test_task3_a_function_that_hangs_is_reported_not_waited_for(lab, answer, fragment) -> None:
    began = time.monotonic()
    outcome = lab.run(
        "gate = threading.Event()\n"
        + sums_case(answer)
        + "gate.set()  # lets the thread the checker left behind end\n"
    )
    seconds = time.monotonic() - began
    assert outcome.status == "wrong", outcome.message
    limit = lab04.allowed_s() + lab04.GRACE_S
    assert f"with worker 0 frozen: your function did not return within {limit:g} s" in (
        outcome.message
    )
    assert fragment in outcome.message, outcome.message
    assert seconds < limit + 10, seconds  # the checker itself never waits much longer


def test_task3_a_cluster_that_does_not_run(tf_worker) -> None:
    outcome = tf_worker.run(sums_case("answers.right_sums", who="LocalCluster({'worker': 1})"))
    assert outcome.status == "wrong", outcome.message
    assert "the cluster is not running" in outcome.message


def test_task3_needs_the_client_task(tf_worker) -> None:
    outcome = tf_worker.run(
        "import types\n"
        + sums_case(
            "answers.right_sums",
            who="types.SimpleNamespace(running=True, excluded=frozenset(), "
            "as_dict=cluster.as_dict)",
        )
    )
    assert outcome.status == "wrong", outcome.message
    assert "the checker needs the lab's cluster: one task (host/0)" in outcome.message


@pytest.mark.slow
def test_task3_says_when_it_cannot_restore_the_cluster(lab) -> None:
    # Text: it breaks the worker's own cluster object (its restart), then mends it by hand.
    outcome = lab.run(
        """
def broken(task, timeout=None):
    raise RuntimeError("no restart today")


cluster.restart = broken
try:
    verdict = checks.lab04.task3(answers.right_sums, cluster)
finally:
    del cluster.restart  # the method again; then restore by hand
    checks.lab04._restore(cluster, psutil.Process(cluster.pid("worker/0")), "worker/1")
"""
    )
    assert outcome.status == "wrong", outcome.message
    assert "could not restore the cluster after its check (RuntimeError: no restart today)" in (
        outcome.message
    )
    assert "Restart the kernel" in outcome.message


@pytest.mark.slow
@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task3_not_attempted_touches_no_worker(lab, answer) -> None:
    before = lab.run("out['pids'] = cluster.pids").out["pids"]
    began = time.monotonic()
    outcome = lab.run(sums_case(answer))
    assert outcome.status == "not attempted", outcome.message
    assert time.monotonic() - began < lab04.TIMEOUT_S  # no worker was frozen or killed
    assert lab.run("out['pids'] = cluster.pids").out["pids"] == before


# --------------------------------------------------------------------------- task 4

RIGHT_DIAGNOSES = dict(lab04.PUZZLE_CASES)


def diagnoses_case(**changes) -> str:
    chosen = {**RIGHT_DIAGNOSES, **changes}
    return f"verdict = checks.lab04.task4(returning({chosen!r}), cluster)\n"


def test_task4_the_logs_show_each_mistake(lab) -> None:
    """The logs are real: the client's task, the workers' tasks and the missing MatMul
    appear where each mistake puts them."""
    outcome = lab.run(
        "tables = checks.lab04.placement_puzzles(cluster)\n"
        "out['ops'] = {c: [f'{o}@{checks.lab04.task_of(d)}' for o, d in "
        "zip(t['op_type'], t['device'])] for c, t in tables.items()}\n"
    )
    ops = outcome.out["ops"]
    client, w0, w1 = "/job:host/task:0", "/job:worker/task:0", "/job:worker/task:1"
    assert ops["b"] == [f"MatMul@{w0}", f"Relu@{w0}", f"MatMul@{w1}"], ops
    assert ops["a"] == [f"MatMul@{w0}", f"Relu@{client}", f"MatMul@{w1}"], ops
    assert ops["c"] == [f"MatMul@{w0}", f"Relu@{w0}"], ops
    assert ops["d"] == [f"MatMul@{client}", f"Relu@{client}", f"MatMul@{client}"], ops


def test_task4_refuses_the_checker_s_own_table() -> None:
    verdict = lab04.task4(lambda: dict(lab04.PUZZLE_CASES), None)
    assert verdict.status == "wrong"
    assert "reads `dtf.checks.lab04.PUZZLE_CASES`, the course's own code" in verdict.message


def test_task4_right(lab) -> None:
    outcome = lab.run(diagnoses_case())
    assert outcome.status == "correct", outcome.message
    assert "you read all 4 placement logs right" in outcome.message.lower()


@pytest.mark.parametrize(
    "changes, fragments",
    [
        (
            {"a": "correct"},
            ["for case 'a': your diagnosis 'correct'", "does not fit its log", "/job:host/task:0"],
        ),
        ({"c": "all-on-client", "d": "correct"}, ["for case 'c'", "(1 other case(s) too)"]),
        ({"b": "fine"}, ["'fine' is not one of the diagnoses"]),
    ],
    ids=["missed-mistake", "two-wrong", "unknown"],
)
def test_task4_wrong(lab, changes, fragments) -> None:
    outcome = lab.run(diagnoses_case(**changes))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message
    if "Hint:" in outcome.message and "not one of" not in outcome.message:
        assert "relu-on-client" not in outcome.message.split("Hint:")[1]  # no answer in it


def test_task4_malformed_and_not_attempted(lab) -> None:
    outcome = lab.run("verdict = checks.lab04.task4(returning(['correct']), cluster)")
    assert outcome.status == "wrong" and "a dict {case: key of DIAGNOSES}" in outcome.message
    outcome = lab.run("verdict = checks.lab04.task4(stub, cluster)")
    assert outcome.status == "not attempted", outcome.message
