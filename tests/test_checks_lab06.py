"""Tests of dtf.checks.lab06: right, wrong and missing answers for every task.

The checkers of Tasks 2 and 4 start, kill and restart real ``MultiWorkerMirroredStrategy``
workers, and Tasks 1 and 3 save checkpoints and train in the lab's own process. So the cases
run in one TensorFlow process set up like the lab (tests/checks_worker.py), whose setup starts
a worker launcher (``launcher``) that serves every case. Each case calls its own answer, from
the switchable answers of tests/answers/lab06.py, and stands alone. After every case that uses
the launcher, a health check runs: the launcher still runs, and no worker process of any run
is left, so a checker that leaves a worker behind fails the test that caused it.

Besides the typical mistakes, the tests guard what the checkers claim to do, so that a
mutated checker fails here: Task 1's managers really save (a rule-blind checker
still rejects workers that share the real folder) and a restart catches a restore from a
worker's own folder; Task 2 really runs and kills workers, and
its made-up runs and its time comparison are each needed; Task 3's batch comparison and its
resumed training each catch a stream that is not skipped, and the training really runs on
the digits; Task 4's returned-results check and its crash loop are each needed. Task 4's cases
use a short run (``SHORT``) to keep the module quick.
"""

from __future__ import annotations

import pytest

from dtf.checks import lab06
from tests.checks_worker import worker_fixture

#: Text: the worker's setup code; the answers are functions of tests/answers/lab06.py.
SETUP = """
import dataclasses
import json
import os
import tempfile
import time

import psutil

from dtf import multiworker
from dtf.lessons import worker_program
from dtf.multiworker import Launcher, TrainConfig

from tests.answers import lab06 as answers, stub

launcher = Launcher().start()
"""

tf_worker = worker_fixture(num_devices=1, setup=SETUP)

#: Run after every case that uses the launcher: it runs, and every worker it forked is gone
#: (text: a probe of the worker's own launcher, recorded into ``out``; not an answer).
HEALTHY = """
assert launcher.running
def lingers(pid):
    try:
        process = psutil.Process(pid)
        return process.ppid() == launcher.pid and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
left = [p for p in launcher.pids[1:] if lingers(p)]
assert not left, left
out["processes"] = len(launcher.pids)
"""


@pytest.fixture
def lab(tf_worker):
    """The lab's process; after the test, no worker of the launcher may be left."""
    yield tf_worker
    outcome = tf_worker.run(HEALTHY)
    assert outcome.out["processes"] >= 1


def assert_verdict(outcome, status: str, fragments=()) -> None:
    assert outcome.status == status, outcome.message
    for fragment in fragments:
        assert fragment.lower() in outcome.message.lower(), outcome.message


def _call(task: int, factory: str, switches: dict, *args: str) -> str:
    """A case that checks ``answers.<factory>(**switches)`` (tests/answers/lab06.py)."""
    made = f"answers.{factory}({', '.join(f'{k}={v!r}' for k, v in switches.items())})"
    return f"verdict = checks.lab06.task{task}({', '.join([made, *args])})\n"


def mutated(name: str, replacement: str, case: str) -> str:
    """``case`` run with ``checks.lab06.<name>`` replaced by ``replacement``, then restored
    (``original`` is the replaced object). Text, as it patches a checker inside the worker."""
    return (
        f"saved_{name} = original = checks.lab06.{name}\n"
        f"checks.lab06.{name} = {replacement}\n"
        "try:\n"
        + "\n".join("    " + line for line in case.splitlines())
        + f"\nfinally:\n    checks.lab06.{name} = saved_{name}\n"
    )


# --------------------------------------------------------------------------- helpers


def test_chief_of_follows_tensorflows_rule() -> None:
    assert lab06.chief_of({"worker": ["a:1", "a:2"]}) == ("worker", 0)
    assert lab06.chief_of({"chief": ["a:1"], "worker": ["a:2"]}) == ("chief", 0)
    assert lab06.chief_of(None) is None
    for n in (2, 3, 8):
        (what, lab_cluster), (_, with_chief), (_, alone) = lab06.clusters(n)
        assert len(lab_cluster["worker"]) == n and f"{n} workers" in what
        assert list(with_chief) == ["chief", "worker"] and alone is None


def test_truth_of_a_made_up_run() -> None:
    results = lab06.made_up_results(4, (1, 2), {0: 0.012, 3: 0.208}, killed_at=50.0)
    assert [r.returncode for r in results.values()] == [1, -9, -9, 1]
    assert results[1].status == "was killed by signal SIGKILL" and results[1].error is None
    failed, noticed = lab06.truth(results, 50.0)
    assert failed == [1, 2]
    assert noticed == pytest.approx({0: 0.012, 3: 0.208})


# --------------------------------------------------------------------------- task 1


def task1(num_workers: int = 2, **switches) -> str:
    return _call(1, "make_make_manager", switches, str(num_workers))


@pytest.mark.slow
def test_task1_right(tf_worker) -> None:
    first = tf_worker.run(task1())
    assert first.message == (
        "Task 1: correct. For the lab's 2 workers, a cluster with a 'chief' job and a process "
        "alone, the chief's manager saves into base and every other task's into a folder of "
        "its own inside it; all 6 tasks saved, each base then held its chief's checkpoint, and "
        "started again every task restored it."
    )
    assert tf_worker.run(task1()).message == first.message


@pytest.mark.parametrize(
    "switches", [{"kind": "path"}, {"num_workers": 5}], ids=["pathlib", "five-workers"]
)
def test_task1_other_right_answers(tf_worker, switches) -> None:
    assert_verdict(tf_worker.run(task1(**switches)), "correct")


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"chief": "everybody"},
            [
                "for the lab's cluster of 2 workers: worker 1 would save into the real folder",
                "overwrite each other's",
                "a folder of its own, inside base",
            ],
        ),
        (
            {"chief": "worker-0"},
            [
                "for a cluster with a 'chief' job and 2 workers: worker 0 would save into the "
                "real folder too, beside the chief (chief 0)",
                "your test of who is the chief missed this cluster's 'chief' job",
            ],
        ),
        (
            {"chief": "worker-0-only"},
            [
                "the chief, chief 0, would save into base/chief-0-tmp, not the real folder",
                "the task of the 'chief' job if the cluster has one, otherwise worker 0",
            ],
        ),
        ({"chief": "inverted"}, ["the chief, worker 0, would save into base/worker-0-tmp"]),
        (
            {"others": "shared"},
            [
                "a cluster with a 'chief' job and 2 workers: worker 0 and worker 1 would both "
                "save into base/tmp",
                "what tells two tasks apart belongs in the folder's name",
                "saving may run collective ops",
                "only the chief's folder",
            ],
        ),
        ({"others": "outside"}, ["worker 1 would save into base/../worker-1, outside base"]),
        ({"others": "relative"}, ["'worker-1-tmp' is a relative path", "a folder inside it"]),
        (
            {"none": "crash"},
            [
                "for one process without TF_CONFIG: `make_manager` raised TypeError",
                "saves into base",
            ],
        ),
        (
            {"restore": "own"},
            [
                "for the lab's cluster of 2 workers, started again: worker 1 restored the "
                "checkpoint of worker 1 (its own folder's), not the chief's",
                "a manager's latest_checkpoint is that of its own folder",
            ],
        ),
        (
            {"restore": "none"},
            [
                "for the lab's cluster of 2 workers, started again: worker 0 restored nothing",
                "TensorFlow can tell you its path",
            ],
        ),
        ({"restore": "assert"}, ["for worker 0 of the lab's cluster of 2 workers", "raised"]),
        (
            {"returns": "folder"},
            ["expected a tf.train.CheckpointManager, got", "every task gets a tf.train.Checkp"],
        ),
        (
            {"returns": "chief-only"},
            [
                "for worker 1 of the lab's cluster of 2 workers: expected a "
                "tf.train.CheckpointManager, got None",
                "not only the chief",
                "saving may run collective ops",
                "need every worker",
                "overwrite each other's files",
                "only the chief's folder, base, is the real one",
            ],
        ),
        (
            {"returns": "wrapped"},
            [
                "your manager manages another checkpoint than the one the function received",
                "the worker's own",
            ],
        ),
        ({"returns": "no-max-to-keep"}, ["raised TypeError", "in a new cell"]),
    ],
    ids=[
        "everybody-base",
        "worker-0-always",
        "chief-job-ignored",
        "inverted",
        "shared-tmp",
        "outside",
        "relative",
        "none-crashes",
        "restores-own-folder",
        "restores-nothing",
        "asserts-without-checkpoint",
        "returns-the-folder",
        "only-the-chief-saves",
        "manages-another-checkpoint",
        "an-error-not-of-tf-config",
    ],
)
def test_task1_wrong(tf_worker, switches, fragments) -> None:
    outcome = tf_worker.run(task1(**switches))
    assert_verdict(outcome, "wrong", fragments)
    assert "dtf-lab06-" not in outcome.message  # folders shown relative to base: repeatable


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ("answers.manager_a_number", "expected a tf.train.CheckpointManager, got 3"),
        ("[]", "a function"),
    ],
)
def test_task1_malformed(tf_worker, answer, fragment) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab06.task1({answer}, 2)")
    assert_verdict(outcome, "wrong", [fragment])


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task1_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab06.task1({answer}, 2)")
    assert_verdict(outcome, "not attempted")


def test_task1_the_real_save_catches_what_the_rule_checks_miss(tf_worker) -> None:
    # Without the rule checks, the managers still save for real: a worker that saves into
    # the real folder after the chief leaves its own checkpoint there.
    blind = "lambda folders, base, what, cluster: None"
    outcome = tf_worker.run(mutated("_check_folders", blind, task1(chief="everybody")))
    assert_verdict(
        outcome,
        "wrong",
        [
            "after every task saved, the real folder holds the checkpoint of worker 1, not "
            "the chief's"
        ],
    )


def test_task1_the_restart_is_needed_to_catch_a_restore_from_the_own_folder(tf_worker) -> None:
    """Without the restart, restoring each manager's own folder passes: the restart is what
    catches it."""
    wrong = task1(restore="own")
    skip = "lambda started, order, what: None"
    assert tf_worker.run(mutated("_check_restored", skip, wrong)).status == "correct"
    assert tf_worker.run(wrong).status == "wrong"


def test_task1_mutated_rule_is_caught(tf_worker) -> None:
    """A checker that takes worker 0 for the chief whatever the cluster lets the tutorial's
    shortcut through, which test_task1_wrong rejects."""
    wrong = task1(chief="worker-0-only")
    assert (
        tf_worker.run(
            mutated("chief_of", "lambda c: None if c is None else ('worker', 0)", wrong)
        ).status
        == "correct"
    )
    assert tf_worker.run(wrong).status == "wrong"


# --------------------------------------------------------------------------- task 2


def task2(**switches) -> str:
    return _call(2, "make_diagnose", switches, "launcher", "2")


def test_task2_right(lab) -> None:
    first = lab.run(task2())
    assert first.message == (
        "Task 2: correct. Right for two made-up runs and for a real run of 2 workers in which "
        "the checker killed the chief: you named it, and every survivor noticed within 5 s, as "
        "your numbers say."
    )
    assert lab.run(task2()).message == first.message


def test_task2_really_runs_and_kills_the_workers(lab) -> None:
    # A spy answer sees what the real run gave it: the chief killed, the other worker's
    # error; the run's two worker processes were started, and are gone (the health check).
    spy = (
        "seen = []\n"
        + "before = len(launcher.pids)\n"
        + "verdict = checks.lab06.task2(answers.make_spying_diagnose(seen), launcher, 3)\n"
        + "out['started'] = len(launcher.pids) - before\n"
        + "out['real'] = seen[-1]\n"
    )
    outcome = lab.run(spy)
    assert_verdict(outcome, "correct", ["a real run of 3 workers"])
    assert outcome.out["started"] == 3
    assert outcome.out["real"] == {
        "0": "was killed by signal SIGKILL",
        "1": "exited with code 1",
        "2": "exited with code 1",
    }


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"failed": "errored"},
            [
                "for a made-up run of 3 workers whose chief was killed: you named worker 1 and "
                "worker 2, the workers that reported an error",
                "a worker that reports an error noticed the failure, it did not cause it",
                "how each worker ended shows in its result's returncode",
            ],
        ),
        (
            {"failed": "nonzero"},
            ["exited with code 1 after reporting UnavailableError", "each result's returncode"],
        ),
        (
            {"failed": "single"},
            [
                "for a made-up run of 4 workers, of which workers 1 and 2 were killed: your "
                "failed list [1] leaves out a worker that reported no error",
            ],
        ),
        (
            {"failed": "one-survivor-too"},
            [
                "for a made-up run of 3 workers whose chief was killed: your failed list [0, 1] "
                "names a worker that reported an error",
                "noticed the failure",
            ],
        ),
        ({"one": True}, ["expected the failed workers as a list", "several workers can fail"]),
        ({"failed": "hardcoded"}, ["raised TypeError", "WorkerResult"]),
        (
            {"noticed": "stamp"},
            ["for worker 1 of", "the stamp of its error", "seconds from the kill, not a moment"],
        ),
        ({"noticed": "now"}, ["measured up to when your function ran (about 100 s"]),
        ({"noticed": "millis"}, ["a time in milliseconds", "the task asks for seconds"]),
        ({"noticed": "wall-clock"}, ["time.time()", "another clock"]),
        ({"noticed": "everyone"}, ["noticed has an entry for worker 0, which was killed"]),
        (
            {"only_first": True},
            ["your noticed, with entries for worker 1, leaves out a worker that reported an error"],
        ),
    ],
    ids=[
        "errored-as-failed",
        "nonzero-as-failed",
        "single-failure",
        "a-survivor-too",
        "not-a-list",
        "hardcoded",
        "absolute-stamp",
        "now",
        "milliseconds",
        "wall-clock",
        "dead-noticed",
        "first-survivor-only",
    ],
)
def test_task2_wrong(lab, switches, fragments) -> None:
    first = lab.run(task2(**switches))
    assert_verdict(first, "wrong", fragments)
    assert lab.run(task2(**switches)).message == first.message  # repeatable, times and all


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task2_not_attempted(lab, answer) -> None:
    before = lab.run("out['n'] = len(launcher.pids)").out["n"]
    outcome = lab.run(f"verdict = checks.lab06.task2({answer}, launcher, 2)")
    assert_verdict(outcome, "not attempted")
    assert lab.run("out['n'] = len(launcher.pids)").out["n"] == before  # no run started


TASK2_MUTATIONS = {
    # Only the first made-up run: an answer that assumes one failed worker would pass.
    "one-made-up-run": ("MADE_UP", "original[:1]", {"failed": "single"}),
    # Times compared loosely: seconds measured when the function ran would pass.
    "loose-times": ("TIME_ATOL", "1e9", {"noticed": "now"}),
}


@pytest.mark.parametrize("mutation", sorted(TASK2_MUTATIONS))
def test_task2_mutated_checker_is_caught(lab, mutation) -> None:
    name, replacement, switches = TASK2_MUTATIONS[mutation]
    assert lab.run(mutated(name, replacement, task2(**switches))).status == "correct"
    assert lab.run(task2(**switches)).status == "wrong"


# --------------------------------------------------------------------------- task 3


def task3(global_batch: int = 64, restored: int = 20, steps: int = 40, **switches) -> str:
    return _call(3, "make_resumed", switches, str(global_batch), str(restored), str(steps))


def test_task3_right(tf_worker) -> None:
    first = tf_worker.run(task3())
    assert first.message == (
        "Task 3: correct. Resumed after step 20 (batches of 64), step 7 (batches of 48) and "
        "step 0 (batches of 32), your stream starts at the first batch not trained yet; "
        "restored from a step-20 checkpoint and trained on it to step 40, the model ends with "
        "the weights of an uninterrupted run (to 1e-06)."
    )
    assert tf_worker.run(task3()).message == first.message


@pytest.mark.parametrize(
    "switches",
    [
        {"how": "examples"},
        {"restored": 0, "steps": 5},
        {"global_batch": 48, "restored": 7},
    ],
    ids=["skip-examples-before-batch", "from-step-0", "a-stream-case"],
)
def test_task3_other_right_answers(tf_worker, switches) -> None:
    assert_verdict(tf_worker.run(task3(**switches)), "correct")


def test_task3_the_course_s_own_skip_is_refused(tf_worker) -> None:
    """``worker_program.global_batches(..., skip=...)`` does the task: accepted before issue 26.
    The same stream without its skip argument, skipped by the answer, is the solution."""
    for answer in ("resumed_by_the_course", "resumed_by_the_course_positionally"):
        outcome = tf_worker.run(f"verdict = checks.lab06.task3(answers.{answer}, 64, 20, 40)\n")
        assert_verdict(
            outcome,
            "wrong",
            ["calls `dtf.lessons.worker_program.global_batches` with `skip`", "yourself"],
        )


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"how": "no-skip"},
            [
                "for a global batch of 64 resumed after step 20: your stream starts with the "
                "first batch of the run again",
                "steps 21, 22, ... on batches 1, 2, ... a second time",
                "must leave out the batches the restored steps trained on",
            ],
        ),
        (
            {"shift": -1},
            [
                "starts with batch 20 of the workers' stream, which a restored step already "
                "trained on",
                "exactly restored_step batches",
            ],
        ),
        (
            {"shift": 1},
            [
                "starts with batch 22 of the workers' stream: it leaves out batches that no "
                "restored step trained on",
            ],
        ),
        (
            {"how": "examples-unscaled"},
            ["starts 20 examples into the workers' stream, inside a batch", "counts examples"],
        ),
        (
            {"how": "batches-times-g"},
            ["starts with batch 1281: you skipped restored_step × global_batch = 1280 batches"],
        ),
        (
            {"how": "batch-first"},
            ["leave out the last examples of every epoch", "repeats before it batches"],
        ),
        (
            {"how": "before-shuffle"},  # its hint talked about repeat() before issue 26
            ["leaves out examples before it shuffles them", "where your skip stands"],
        ),
        ({"seed_shift": 1}, ["it is not their stream"]),
        ({"batch": 32}, ["batches of 32 examples, expected global batches of 64"]),
        ({"repeat": False}, ["the stream ended after 0 batch(es)", "never ends"]),
        ({"how": "iterator"}, ["expected a tf.data.Dataset"]),
        ({"how": "split"}, ["the labels no longer belong to their examples"]),
    ],
    ids=[
        "no-skip",
        "one-too-few",
        "one-too-many",
        "examples-not-batches",
        "batches-times-g",
        "batch-before-repeat",
        "skip-before-shuffle",
        "other-seed",
        "per-worker-batch",
        "no-repeat",
        "iterator",
        "split",
    ],
)
def test_task3_wrong(tf_worker, switches, fragments) -> None:
    assert_verdict(tf_worker.run(task3(**switches)), "wrong", fragments)


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task3_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab06.task3({answer}, 64, 20, 40)")
    assert_verdict(outcome, "not attempted")


def test_task3_resumes_real_training_on_the_digits(tf_worker) -> None:
    # The checker calls the stream for its three comparisons (300 numbered examples), then
    # once more on the digits, with the step a real checkpoint restored.
    spy = (
        "calls = []\n"
        + "verdict = checks.lab06.task3(answers.make_spying_resumed(calls), 64, 20, 40)\n"
        + "out['calls'] = calls\n"
    )
    outcome = tf_worker.run(spy)
    assert outcome.status == "correct", outcome.message
    assert outcome.out["calls"] == [
        [[300, 2], 64, 42, 20],
        [[300, 2], 48, 42, 7],
        [[300, 2], 32, 42, 0],
        [[1437, 64], 64, 42, 20],
    ]


def test_task3_the_resumed_training_alone_catches_a_stream_not_skipped(tf_worker) -> None:
    outcome = tf_worker.run(mutated("_check_stream", "lambda *args: None", task3(how="no-skip")))
    assert_verdict(
        outcome,
        "wrong",
        [
            "weight array 0 after resuming at step 20 and training to step 40 (vs. an "
            "uninterrupted run)"
        ],
    )


def test_task3_mutated_checker_is_caught(tf_worker) -> None:
    """Without the batch comparison and the resumed training, a stream that is not skipped
    would pass: the two tests above are what would catch either mutation."""
    case = mutated("_resume_on", "lambda *args: 0.0", task3(how="no-skip"))
    assert tf_worker.run(mutated("_check_stream", "lambda *args: None", case)).status == "correct"


# --------------------------------------------------------------------------- task 4

#: Task 4's short run: restored from the step-4 checkpoint after a kill after step 6.
SHORT = "steps=12, per_worker_batch=16, checkpoint_every=4, fail_at_step=6, timeout=60"


def task4(num_workers: int = 2, **switches) -> str:
    return _call(4, "make_supervise", switches, "launcher", str(num_workers), SHORT)


@pytest.mark.slow
def test_task4_right(lab) -> None:
    first = lab.run(task4())
    assert first.message == (
        "Task 4: correct. Run 1 failed when the checker killed worker 1 after step 6; run 2 "
        "restarted both workers, which restored the step-4 checkpoint (step and weights equal "
        "to the checkpoint's, bit for bit) and trained to step 12, ending with the weights of "
        "an uninterrupted run (to 1e-05); with a worker killed in every run, it gave up after "
        "max_restarts=1 restart."
    )
    assert lab.run(task4()).message == first.message


@pytest.mark.slow
def test_task4_giving_up_by_raising_is_right_too(lab) -> None:
    assert_verdict(lab.run(task4(give_up="raise")), "correct")


@pytest.mark.slow
def test_task4_three_workers_and_no_checkpoint_before_the_kill(lab) -> None:
    code = task4(num_workers=3).replace("fail_at_step=6", "fail_at_step=3")
    assert_verdict(
        lab.run(code),
        "correct",
        [
            "killed worker 2 after step 3",
            "restarted all 3 workers, which found no checkpoint (none was written before the "
            "failure) and started from step 0",
        ],
    )


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"loop": "once"},
            [
                "for a run of 2 workers whose worker 1 was killed after step 6: the run failed "
                "(worker 0 exited with code 1; worker 1 was killed by signal SIGKILL) and your "
                "function did not start the workers again",
            ],
        ),
        ({"workers": "failed"}, ["run 2 had 1 worker, the job has 2", "restart every worker"]),
        (
            {"folder": "new"},
            [
                "run 2 was started with another configuration (checkpoint_dir changed)",
                "the chief's latest checkpoint",
            ],
        ),
        ({"stop": False}, ["run 2 trained to the end", "yet your function started 1 more"]),
        (
            {"loop": "forever"},
            [
                "for a made-up launcher whose every run ends with worker 1 killed, with "
                "max_restarts=1: your function tried a run beyond the 1 restart it may make",
                "1 + max_restarts runs in all",
            ],
        ),
        ({"loop": "swallow"}, ["tried a run beyond the 1 restart it may make"]),
        ({"loop": "short"}, ["gave up after 1 run(s), before the 1 restart it may make"]),
        (
            {"returns": "last"},
            ["expected a list with the results of each of the 2 runs, got a dict: the results"],
        ),
        (
            {"which": "launcher"},  # the lab's launcher, not the one it received
            ["your function started no run with the launcher it received"],
        ),
        (
            {"success": "chief"},  # "correct" before issue 26: the chief failed too in real runs
            [
                "a made-up run whose chief exited with code 0 and worker 1 was killed: your "
                "function did not start the workers again",
                "the chief's exit code alone does not say that a run succeeded",
            ],
        ),
        (
            {"success": "last"},  # passed before this case had a run 2 that failed so
            [
                "for a made-up run in which worker 0 exited with code 1 and every other worker, "
                "worker 1 too, with code 0: your function did not start the workers again, "
                "although worker 0 failed without a signal",
            ],
        ),
        ({"success": "signals"}, ["although worker 0 failed without a signal"]),
        (
            {"wait": "long"},  # a real run's wait takes any timeout
            [
                "for a made-up launcher whose every run ends with worker 1 killed, with "
                "max_restarts=1: your function waited for a run with timeout=600, although it "
                "was given timeout=60",
            ],
        ),
    ],
    ids=[
        "no-restart",
        "only-the-failed-worker",
        "new-folder",
        "restart-after-success",
        "unbounded",
        "unbounded-swallowing",
        "one-run-too-few",
        "returns-last",
        "global-launcher",
        "chief-decides",
        "last-worker-decides",
        "signals-decide",
        "wait-too-long",
    ],
)
@pytest.mark.slow  # each case starts real worker runs: 5 to 7 s
def test_task4_wrong(lab, switches, fragments) -> None:
    code = task4(**switches)
    if switches.get("which") == "launcher":
        code = code.replace("(which='launcher')", "(which=launcher)")
    assert_verdict(lab.run(code), "wrong", fragments)


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task4_not_attempted(lab, answer) -> None:
    before = lab.run("out['n'] = len(launcher.pids)").out["n"]
    code = f"verdict = checks.lab06.task4({answer}, launcher, 2, {SHORT})"
    assert_verdict(lab.run(code), "not attempted")
    assert lab.run("out['n'] = len(launcher.pids)").out["n"] == before  # no run started


#: Text: each replacement patches a checker object inside the worker (mutation tests).
TASK4_MUTATIONS = {
    # The returned list not checked: a supervisor that returns only the last results passes.
    "no-returned-check": ("_check_returned", "lambda *args: None", {"returns": "last"}),
    # The crash loop's second run succeeds: a supervisor that restarts forever passes.
    "crash-loop-kills-once": (
        "_crash_loop",
        "lambda n, victim: checks.lab06.MadeUpLauncher([original(n, victim).script[0], "
        "{t: __import__('dataclasses').replace(r, returncode=0) "
        "for t, r in original(n, victim).script[0].items()}])",
        {"loop": "forever"},
    ),
    # No bound checked on the made-up runs' waits: a supervisor that waits 10 × longer passes.
    "waits-unchecked": ("_check_waits", "lambda *args: None", {"wait": "long"}),
    # Run 2 of the last case fails as run 1 does: a supervisor that reads the last worker passes.
    "second-failure-shown-by-the-victim": (
        "_failures_without_the_victim",
        "lambda n, victim: checks.lab06.MadeUpLauncher("
        "[original(n, victim).script[i] for i in (0, 0, 2)])",
        {"success": "last"},
    ),
}


@pytest.mark.slow  # each mutation starts real worker runs: up to 7 s
@pytest.mark.parametrize("mutation", sorted(TASK4_MUTATIONS))
def test_task4_mutated_checker_is_caught(lab, mutation) -> None:
    """The same wrong answer that test_task4_wrong rejects passes a mutated checker."""
    name, replacement, switches = TASK4_MUTATIONS[mutation]
    assert lab.run(mutated(name, replacement, task4(**switches))).status == "correct"


def test_task4_a_supervisor_cannot_stop_the_labs_launcher(lab) -> None:
    code = f"verdict = checks.lab06.task4(answers.rude, launcher, 2, {SHORT})\n"
    assert_verdict(
        lab.run(code), "wrong", ["raised WorkerError: the lab's launcher serves every task"]
    )  # and the health check finds the launcher running
