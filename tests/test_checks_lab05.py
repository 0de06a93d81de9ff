"""Tests of dtf.checks.lab05: right, wrong and missing answers for every task.

The checkers train on the lab's MirroredStrategy, so the cases run in one TensorFlow process
set up like the lab (2 logical CPUs) whose single MirroredStrategy, ``strategy``, is made once
in the worker's setup: a second MirroredStrategy in the same process would break the
collective all-reduce of both (tensorflow#62790), which is also why the checkers never make
one. Each case calls its own answer, from the switchable answers of tests/answers/lab05.py,
and stands alone.

Besides the typical mistakes, the tests guard what the checkers claim to do, so that a
mutated checker fails here: Task 4's really trains the learner's step on the strategy's two
replicas (a step that runs the model outside ``strategy.run`` is wrong even though its weights
are right; the verdict names two replicas), compares with an independent single-device
reference (the per-replica-mean and MEAN slips are caught) and a mutated Task 4 checker is
shown to let those answers through.
"""

from __future__ import annotations

import enum

import numpy as np
import pytest

from tests.checks_worker import worker_fixture

#: Text: the worker's setup code; the answers are functions of tests/answers/lab05.py.
tf_worker = worker_fixture(
    num_devices=2,
    setup="strategy = tf.distribute.MirroredStrategy(D)\nimport keras\n"
    "from tests.answers import lab05 as answers, stub\nfrom tests.answers.lab05 import lab_trace\n",
)


def verdict_of(tf_worker, code: str):
    return tf_worker.run(code)


def assert_verdict(outcome, status: str, fragments=()) -> None:
    assert outcome.status == status, outcome.message
    for fragment in fragments:
        assert fragment.lower() in outcome.message.lower(), outcome.message


# --------------------------------------------------------------------------- answers
# The answers are functions of tests/answers/lab05.py, with switches for the usual mistakes;
# each case calls one, with its switches, in the worker (where ``answers`` is that module).


def _call(task: int, factory: str, switches: dict, *args: str) -> str:
    made = f"answers.{factory}({', '.join(f'{k}={v!r}' for k, v in switches.items())})"
    return f"verdict = checks.lab05.task{task}({', '.join([made, *args])})\n"


def task1(**switches) -> str:
    return _call(1, "make_distribute", switches, "strategy")


def task2(kind: str) -> str:
    return _call(2, "make_loss", {"kind": kind})


def task3(**switches) -> str:
    return _call(3, "make_build", switches, "strategy")


def task4(**switches) -> str:
    return _call(4, "make_make_train_step", switches, "strategy")


def task5(per_replica_batch: int = 16, **switches) -> str:
    return _call(5, "make_train_epoch", switches, "strategy", str(per_replica_batch))


# --------------------------------------------------------------------------- helpers


@pytest.mark.slow
def test_make_model_gives_the_same_weights_every_time(tf_worker) -> None:
    outcome = tf_worker.run(
        "a, b = checks.lab05.make_model(), checks.lab05.make_model()\n"
        "out['same'] = all(np.array_equal(u, v) for u, v in zip(a.get_weights(), "
        "b.get_weights()))\n"
        "out['shapes'] = [list(w.shape) for w in a.get_weights()]\n"
    )
    assert outcome.out == {"same": True, "shapes": [[64, 32], [32], [32, 10], [10]]}


# --------------------------------------------------------------------------- task 1


def test_task1_right(tf_worker) -> None:
    first = tf_worker.run(task1())
    assert first.message == (
        "Task 1: correct. Global batches of 6 = 3 × 2 and 4 = 2 × 2 examples reached the "
        "replicas as equal shards, and the smaller last batches were dropped."
    )
    assert tf_worker.run(task1()).message == first.message  # again: the same verdict


def test_task1_other_right_answers(tf_worker) -> None:
    assert_verdict(tf_worker.run(task1(from_function=True)), "correct")


def test_task1_shuffled_batches_are_wrong(tf_worker) -> None:
    """The task asks for the examples in order (tasks 4 and 5 compare with one device on the
    same batches): shuffled batches were accepted before issue 26."""
    outcome = tf_worker.run(task1(shuffle=True))
    assert_verdict(outcome, "wrong", ["in another order than (x, y) holds them", "no shuffle"])


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"distributed": False},
            [
                "you returned a tf.data.Dataset, not a distributed one",
                "every replica whole",
                "the strategy makes one from a dataset",
            ],
        ),
        (
            {"drop": False},
            [
                "the last global batch holds only 3 examples, and the replicas get 2, 1 of them",
                "your last global batch is partial",
            ],
        ),
        (
            {"batch": "per-replica"},
            [
                "each global batch holds 3 examples, which the 2 replicas share as 2, 1",
                "per_replica_batch is what each replica gets",
            ],
        ),
        ({"repeat": True}, ["examples seen twice", "one pass over the data"]),
        ({"iterator": True}, ["an iterator over the distributed dataset"]),
        ({"split": True}, ["the labels no longer belong to their examples"]),
    ],
    ids=[
        "not-distributed",
        "no-drop-remainder",
        "per-replica-batch",
        "repeat",
        "iterator",
        "split",
    ],
)
def test_task1_wrong(tf_worker, switches, fragments) -> None:
    assert_verdict(tf_worker.run(task1(**switches)), "wrong", fragments)


def test_task1_a_smaller_last_batch_can_leave_a_replica_empty(tf_worker) -> None:
    # What the lab and the Task 1 messages say about the strategy: it cuts a batch of 4 into
    # 2 and 2, and a last batch of 1 into 1 and nothing.
    outcome = tf_worker.run(
        "ds = tf.data.Dataset.range(5).batch(4)\n"
        "out['shards'] = [[len(t) for t in strategy.experimental_local_results(b)] "
        "for b in strategy.experimental_distribute_dataset(ds)]\n"
    )
    assert outcome.out["shards"] == [[2, 2], [1, 0]]


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ("answers.distribute_a_number", "expected a distributed dataset"),
        ("[]", "expected a function"),
    ],
)
def test_task1_malformed(tf_worker, answer, fragment) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab05.task1({answer}, strategy)")
    assert_verdict(outcome, "wrong", [fragment])


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task1_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab05.task1({answer}, strategy)")
    assert_verdict(outcome, "not attempted")


# --------------------------------------------------------------------------- task 2


def test_task2_right(tf_worker) -> None:
    first = tf_worker.run(task2("global"))
    assert first.message == (
        "Task 2: correct. For shards of 3, 3, 2 and 2 of a global batch of 10 (and 3 other "
        "splits, one with an empty shard) the replicas' losses add up to the mean loss of the "
        "global batch."
    )
    assert tf_worker.run(task2("global")).message == first.message


@pytest.mark.parametrize("kind", ["by-hand", "keras-class"])
def test_task2_other_right_answers(tf_worker, kind) -> None:
    assert_verdict(tf_worker.run(task2(kind)), "correct")


@pytest.mark.parametrize(
    "kind, fragments",
    [
        (
            "mean",
            [
                "replica 0 of 4, with 3 of a global batch of 12",
                "the mean over this replica's 3 examples only",
                "4 times the mean loss of the global batch",
                "your share is averaged over this replica's examples, not over the global batch",
            ],
        ),
        ("no-global", ["the mean over this replica's 3 examples only"]),
        (
            "mean-over-4",
            [
                "replica 0 of 4, with 3 of a global batch of 10",
                "the replica's mean divided by the number of replicas",
                "here they have 3, 3, 2, 2",
            ],
        ),
        (
            "nan-safe-mean-over-4",
            ["replica 0 of 4, with 3 of a global batch of 10", "divided by the number of replicas"],
        ),
        ("sum", ["your share is", "that is the sum of the losses", "at full weight"]),
        ("probabilities", ["taken for probabilities", "your loss read them as probabilities"]),
        ("vector", ["expected one number, got shape (3,)"]),
    ],
    ids=["mean", "no-global", "mean-over-4", "nan-safe", "sum", "probabilities", "vector"],
)
def test_task2_wrong(tf_worker, kind, fragments) -> None:
    assert_verdict(tf_worker.run(task2(kind)), "wrong", fragments)


def test_task2_an_empty_shard_must_not_give_nan(tf_worker) -> None:
    code = "verdict = checks.lab05.task2(answers.loss_nan_on_empty)\n"
    assert_verdict(
        tf_worker.run(code),
        "wrong",
        [
            "replica 3 of 4, with 0 of a global batch of 3",
            "got NaN",
            "an empty shard must give a scalar 0",
            "divides by the number of examples of the shard, which is 0 here",
        ],
    )


@pytest.mark.parametrize(
    "empty, shown",
    [("labels", "a tensor of shape (0,)"), ("none", "None")],
    ids=["empty-tensor", "none"],
)
def test_task2_an_empty_shard_must_give_a_scalar_zero(tf_worker, empty, shown) -> None:
    """An empty shard answered with an empty tensor or None: the message says a scalar 0
    (issue 18)."""
    code = f"verdict = checks.lab05.task2(answers.make_loss_on_empty({empty!r}))\n"
    assert_verdict(
        tf_worker.run(code),
        "wrong",
        [
            "replica 3 of 4, with 0 of a global batch of 3 (shards of 1, 1, 1, 0): "
            f"expected a scalar 0, got {shown}",
            "must be one number, 0",
        ],
    )


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task2_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab05.task2({answer})")
    assert_verdict(outcome, "not attempted")


# --------------------------------------------------------------------------- task 3


def test_task3_right(tf_worker) -> None:
    first = tf_worker.run(task3())
    assert first.message == (
        "Task 3: correct. The model's 4 variables and the optimizer's 6 (step counter, "
        "learning rate, 4 momentums) are mirrored variables, one copy on each of the 2 replicas."
    )
    assert tf_worker.run(task3()).message == first.message


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"model_in": False, "opt_in": False, "build": "out"},
            [
                "the model's variables (layer 0's kernel, layer 0's bias, layer 1's kernel, "
                "layer 1's bias) were created outside strategy.scope()",
                "not a mirrored copy on each of the 2 replicas",
            ],
        ),
        (
            {"model_in": False},
            ["colocate_vars_with", "where was the model created?"],
        ),
        (
            {"opt_in": False, "build": "out"},
            [
                "the optimizer was created outside strategy.scope()",
                "once per replica and step (here 2 times per step)",
                "without any error",
            ],
        ),
        ({"opt_in": False}, ["Mixing different tf.distribute.Strategy objects", "belongs to"]),
        ({"build": "out"}, ['Need to be inside "with strategy.scope()"', "where was it built?"]),
        (
            {"build": None},
            [
                "the optimizer is not built",
                "You must feed a value for placeholder tensor",
                "the task says when and where that must happen",
            ],
        ),
        ({"swap": True}, ["you returned (optimizer, model)"]),
        ({"optimizer": "adam"}, ["your optimizer (type, learning rate, momentum", "('Adam', 0.1"]),
        (
            {"optimizer": "nesterov"},
            [
                "nesterov, weight decay) is ('SGD', 0.1, ",
                "True, None), not the one the task names",
                "and no other setting",
            ],
        ),
        ({"no_input": True}, ["the model has no variables yet", "the lab's network"]),
        (
            {"network": "wider"},
            [
                "the first item is not the lab's network: its weights have the shapes "
                "[(64, 48), (48,), (48, 10), (10,)]",
                "yours has other layers",
            ],
        ),
        (
            {"network": "unseeded"},
            ["the layers of the lab's network but other initial weights", "seeded weights"],
        ),
    ],
    ids=[
        "all-outside",
        "model-outside",
        "optimizer-outside",
        "optimizer-outside-built-inside",
        "built-outside",
        "not-built",
        "swapped",
        "adam",
        "nesterov",
        "no-input",
        "another-network",
        "unseeded-network",
    ],
)
def test_task3_wrong(tf_worker, switches, fragments) -> None:
    outcome = tf_worker.run(task3(**switches))
    assert_verdict(outcome, "wrong", fragments)
    assert " at 0x" not in outcome.message  # no object addresses: the verdict is repeatable


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ("answers.build_a_number", "expected a pair (model, optimizer)"),
        ("answers.build_numbers", "a Keras model"),
    ],
)
def test_task3_malformed(tf_worker, answer, fragment) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab05.task3({answer}, strategy)")
    assert_verdict(outcome, "wrong", [fragment])


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task3_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab05.task3({answer}, strategy)")
    assert_verdict(outcome, "not attempted")


# --------------------------------------------------------------------------- task 4


def test_task4_right_on_both_replicas(tf_worker) -> None:
    first = tf_worker.run(task4())
    assert first.status == "correct", first.message
    assert first.message.startswith(
        "Task 4: correct. 3 steps over 2 replicas match single-device training on the same "
        "global batches of 16 (losses "
    )
    assert "not a tf.function" not in first.message
    assert tf_worker.run(task4()).message == first.message


def test_task4_losses_are_those_of_single_device_training(tf_worker) -> None:
    # An independent reference, written in tests/answers/lab05.py: Keras on one device, the
    # same batches.
    outcome = tf_worker.run('out["losses"] = answers.single_device_losses()\n' + task4())
    assert outcome.status == "correct", outcome.message
    shown = ", ".join(f"{v:.4f}" for v in outcome.out["losses"])
    assert f"(losses {shown};" in outcome.message


def test_task4_a_step_that_is_no_tf_function_is_wrong(tf_worker) -> None:
    """The task requires a tf.function: a plain function was "correct" before issue 26."""
    outcome = tf_worker.run(task4(function=False))
    assert_verdict(outcome, "wrong", ["train_step is a plain Python function", "not a tf.fun"])


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"loss": "mean"},
            [
                "the weights after 3 steps are those of single-device training with steps 2 "
                "times too large",
                "each replica's loss was the mean over its own shard",
                "look at the loss your step computes and at what it divides by",
            ],
        ),
        (
            {"loss": "mean", "reduce": "MEAN"},
            ["steps 2 times too large", "what it divides by"],
        ),
        (
            {"reduce": "MEAN"},
            [
                "the weights are right, but the loss is 2 times too small",
                "ReduceOp.MEAN averaged the replicas' losses",
                "which ReduceOp turns the shares into the whole?",
            ],
        ),
        (
            {"run": False},
            [
                "your step never ran the model inside strategy.run",
                "one device computes the whole global batch",
                "the function that strategy.run runs on every replica",
            ],
        ),
        (
            {"apply": False},
            ["the weights are still the initial ones", "where the gradients should be applied"],
        ),
        (
            {"result": "per-replica"},
            ["returned the replicas' losses, one per replica", "returned them without that"],
        ),
        ({"result": "none"}, ["returned None", "the loss of the global batch, one number"]),
    ],
    ids=[
        "mean-loss",
        "mean-loss-and-mean",
        "reduce-mean",
        "outside-run",
        "no-update",
        "per-replica",
        "none",
    ],
)
def test_task4_wrong(tf_worker, switches, fragments) -> None:
    outcome = tf_worker.run(task4(**switches))
    assert_verdict(outcome, "wrong", fragments)
    hint = outcome.message.split("Hint:")[-1]  # names the mistake, not the code of the fix
    for code in ("ReduceOp.SUM", "compute_average_loss(", "strategy.run(step_fn", "zip(grads"):
        assert code not in hint, outcome.message


def test_task4_names_an_unfinished_task2(tf_worker) -> None:
    code = "verdict = checks.lab05.task4(answers.make_train_step_on_unfinished_loss, strategy)"
    assert_verdict(tf_worker.run(code), "wrong", ["calls code of Task 2", "finish Task 2 first"])


def test_task4_a_step_that_raises(tf_worker) -> None:
    outcome = tf_worker.run(
        "verdict = checks.lab05.task4(answers.make_train_step_that_raises, strategy)"
    )
    assert_verdict(outcome, "wrong", ["raised ZeroDivisionError"])


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task4_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab05.task4({answer}, strategy)")
    assert_verdict(outcome, "not attempted")


#: Text: each replacement patches a checker function inside the worker (mutation tests).
MUTATIONS = {
    # The probe's verdict ignored: a step outside strategy.run would pass.
    "no-probe": ("_ran_on_replicas", "lambda *args: None", {"run": False}),
    # A reference trained like the per-replica-mean slip: that slip would pass.
    "scaled-reference": (
        "_single_device",
        "lambda batches, initial, lr=checks.lab05.LEARNING_RATE: original(batches, initial, "
        "lr * strategy.num_replicas_in_sync)",
        {"loss": "mean", "reduce": "MEAN"},
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_task4_mutated_checker_is_caught(tf_worker, mutation) -> None:
    """The same wrong answer that test_task4_wrong rejects passes a mutated checker: the
    tests above are what would catch that mutation."""
    name, replacement, switches = MUTATIONS[mutation]
    code = (
        f"original = checks.lab05.{name}\n"
        f"checks.lab05.{name} = {replacement}\n"
        "try:\n"
        + "\n".join("    " + line for line in task4(**switches).splitlines())
        + "\nfinally:\n"
        f"    checks.lab05.{name} = original\n"
    )
    assert tf_worker.run(code).status == "correct"
    assert tf_worker.run(task4(**switches)).status == "wrong"


# --------------------------------------------------------------------------- task 5


def test_task5_right(tf_worker) -> None:
    first = tf_worker.run(task5())
    assert first.status == "correct", first.message
    assert first.message.startswith(
        "Task 5: correct. One epoch of 44 steps over 2 replicas matches single-device "
        "training: loss 2.3"
    ), first.message
    assert tf_worker.run(task5()).message == first.message


@pytest.mark.parametrize(
    "switches, fragments",
    [
        ({"loss": "mean"}, ["for the losses: expected", "their checks say which piece is wrong"]),
        (
            {"drop": False},
            ["your epoch ran 45 steps, not one per full global batch of 32 of the 1437 examples"],
        ),
        ({"per_replica": False}, ["your epoch ran 22 steps", "takes the per-replica batch"]),
    ],
    ids=["mean-loss", "no-drop-remainder", "global-as-per-replica"],
)
def test_task5_wrong(tf_worker, switches, fragments) -> None:
    assert_verdict(tf_worker.run(task5(**switches)), "wrong", fragments)


def test_task5_a_batch_larger_than_the_data(tf_worker) -> None:
    outcome = tf_worker.run(task5(per_replica_batch=1000))
    assert_verdict(outcome, "wrong", ["1000 × 2 = 2000 examples is more than the 1437"])


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task5_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab05.task5({answer}, strategy, 16)")
    assert_verdict(outcome, "not attempted")


def test_task5_names_an_unfinished_task(tf_worker) -> None:
    code = "verdict = checks.lab05.task5(answers.train_epoch_on_unfinished_task3, strategy, 16)"
    assert_verdict(tf_worker.run(code), "wrong", ["finish Task 3 first"])


# --------------------------------------------------------------------------- task 6
# A decision, checked in this process: the checker needs no TensorFlow.

RIGHT_POLICIES = {"a": "DATA", "b": "FILE", "c": "DATA", "d": "DATA", "e": "OFF"}


def policies(**changes):
    chosen = {**RIGHT_POLICIES, **changes}
    return lambda: chosen


def test_task6_right() -> None:
    from dtf.checks import lab05

    verdict = lab05.task6(policies())
    assert verdict.correct, verdict.message
    assert verdict.message == (
        "Task 6: correct. Every layout gets a policy that meets its goal (a: DATA, b: FILE, "
        "c: DATA, d: DATA, e: OFF)."
    )
    assert lab05.task6(policies(b="AUTO")).correct  # AUTO finds the files: FILE
    # AutoShardPolicy members are read by their name (an enum like it, without importing
    # TensorFlow here; the lab's solution run uses the real one).
    policy = enum.Enum("AutoShardPolicy", ["OFF", "AUTO", "FILE", "DATA"])
    assert lab05.task6(lambda: {k: policy[v] for k, v in RIGHT_POLICIES.items()}).correct


@pytest.mark.parametrize(
    "changes, fragments",
    [
        ({"a": "AUTO"}, ["for layout 'a'", "AUTO works here only by falling back to DATA"]),
        ({"a": "FILE"}, ["for layout 'a'", "unshardable source dataset"]),
        ({"b": "DATA"}, ["for layout 'b'", "reads and parses all 16,000 records"]),
        ({"b": "OFF"}, ["each of the 4 workers receives all 16,000", "4 times"]),
        ({"c": "FILE"}, ["for layout 'c'", "with 2 file(s) for 4 workers", "InvalidArgumentError"]),
        ({"d": "FILE"}, ["for layout 'd'", "9,500, 500 records", "largest share"]),
        ({"d": "AUTO"}, ["for layout 'd'", "AUTO gives whole files"]),
        ({"e": "DATA"}, ["for layout 'e'", "no worker's metric is that of the whole set"]),
        ({"a": "OFF", "e": "FILE"}, ["for layout 'a'", "(1 other layout(s) too)"]),
    ],
)
def test_task6_wrong(changes, fragments) -> None:
    from dtf.checks import lab05

    verdict = lab05.task6(policies(**changes))
    assert verdict.status == "wrong", verdict.message
    for fragment in fragments:
        assert fragment in verdict.message, verdict.message
    assert "Hint: For each layout, ask what each worker would read" in verdict.message


def test_task6_malformed_and_not_attempted() -> None:
    from dtf.checks import lab05

    def stub():
        raise NotImplementedError("Task 6: write your code here")

    assert lab05.task6(stub).status == "not attempted"
    assert lab05.task6(None).status == "not attempted"
    for answer, fragment in [
        (lambda: ["DATA"], "expected a dict {layout: policy}"),
        (lambda: {"a": "DATA"}, "no policy for layout 'b'"),
        (policies(c="SHARD"), "for layout 'c': expected an auto-shard policy, got 'SHARD'"),
        (policies(c="HINT"), "HINT is not one of the four policies this task compares"),
    ]:
        verdict = lab05.task6(answer)
        assert verdict.status == "wrong" and fragment in verdict.message, verdict.message


def test_task6_shows_even_enough_to_the_learner() -> None:
    """The goal names EVEN_ENOUGH: the task text and the cell's output give its value (it was
    used but never shown before issue 26)."""
    import nbformat

    from dtf.checks import lab05
    from tests.helpers import ROOT

    nb = nbformat.read(ROOT / "labs" / "solutions" / "05_mirrored_step_lab.ipynb", as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert f"`EVEN_ENOUGH` = {lab05.EVEN_ENOUGH:g} times the smallest" in " ".join(text.split())
    assert 'print(f"EVEN_ENOUGH = {EVEN_ENOUGH}")' in text


def test_tasks_4_6_and_7_refuse_the_course_s_own_code() -> None:
    """Answers that hand the task to the course's reference are refused before they run."""
    from dtf.checks import lab05

    verdict = lab05.task7(lambda logdir: lab05.trace_bottleneck(logdir), "/no/trace")
    assert "calls `dtf.checks.lab05.trace_bottleneck`, the course's own code" in verdict.message
    verdict = lab05.task6(lambda: {k: lab05.policy_outcome(k, "DATA") for k in "abcde"})
    assert "calls `dtf.checks.lab05.policy_outcome`" in verdict.message

    def make_train_step(strategy, model, optimizer, global_batch):
        from dtf.lessons import worker_program

        return worker_program.make_train_step(strategy, model, optimizer, global_batch)

    verdict = lab05.task4(make_train_step, None)
    assert verdict.status == "wrong", verdict.message
    assert "calls `dtf.lessons.worker_program.make_train_step`" in verdict.message


def test_task6_rules_follow_the_measured_file_split() -> None:
    """FILE gives file i to worker i mod N (notebook 11d): the shares the rules use."""
    from dtf.checks import lab05

    assert lab05.file_shares([8, 12, 16, 20], 2) == [24, 32]
    assert lab05.file_shares([5], 2) == [5, 0]
    for key, layout in lab05.SHARDING_LAYOUTS.items():
        accepted = [p for p in ("AUTO", "FILE", "DATA", "OFF") if lab05.policy_outcome(key, p)[0]]
        assert accepted, key  # every layout has an answer
        if layout["source"] == "memory" or len(layout["records"]) < layout["workers"]:
            assert "FILE" not in accepted and "AUTO" not in accepted, key


# --------------------------------------------------------------------------- task 7


def _breakdown(rows):
    import pandas as pd

    table = pd.DataFrame(rows, columns=["compute", "communication", "input", "idle"])
    table["step_ms"] = table.sum(axis=1)
    table.index.name = "step"
    return table


#: Two steps: input 12 of 20 ms (0.6), compute 4 (0.2), communication 1, idle 3.
INPUT_BOUND = [[1.0, 0.5, 7.0, 1.5], [3.0, 0.5, 5.0, 1.5]]


def test_task7_judge_accepts_the_traces_answer() -> None:
    """The bottleneck is the largest share over all steps, within SHARE_TOLERANCE."""
    from dtf.checks import lab05

    table = _breakdown(INPUT_BOUND)
    assert lab05.bottleneck(table) == ("input", pytest.approx(0.6))
    assert "input, 60%" in lab05.judge_bottleneck(("input", 0.605), table)
    assert "input" in lab05.judge_bottleneck(["input", np.float32(0.6)], table)


@pytest.mark.parametrize(
    "got, summed, fragments",
    [
        (
            ("compute", 0.2),
            {"compute": 50.0, "communication": 1.0, "input": 12.0},
            ["compute is 20% of the steps' time, not the largest", "added up the ops' durations"],
        ),
        (
            ("communication", 0.05),
            None,
            [
                "communication is 5%",
                "your kind is not the one with the largest share of the traced steps' total time",
            ],
        ),
        (("input", 12.0), None, ["your share of input, 12.000", "between 0 and 1"]),
        (("input", 0.7), None, ["share in one step; the task asks for"]),  # step 0: 7/10
        (("input", 0.45), None, ["look at how you add up the steps, and what you divide by"]),
        ("input", None, ["expected a pair (kind, share)"]),
        (("bandwidth", 0.6), None, ["expected a kind of time, got 'bandwidth'"]),
        (("input", "most"), None, ["expected the share as a number"]),
    ],
)
def test_task7_judge_names_the_mistake_not_the_answer(got, summed, fragments) -> None:
    from dtf.checks import lab05
    from dtf.checks.core import Wrong

    with pytest.raises(Wrong) as caught:
        lab05.judge_bottleneck(got, _breakdown(INPUT_BOUND), summed)
    message = f"{caught.value.detail} {caught.value.hint}"
    for fragment in fragments:
        assert fragment in message, message
    if isinstance(got, tuple) and got[0] in ("compute", "communication"):  # a wrong kind:
        # the message never names the right one
        assert "input" not in caught.value.detail, message


def test_task7_idle_counts() -> None:
    """When no op runs most of the time, the answer is idle, and forgetting it is named."""
    from dtf.checks import lab05
    from dtf.checks.core import Wrong

    table = _breakdown([[2.0, 0.0, 1.0, 7.0]])
    assert lab05.bottleneck(table) == ("idle", pytest.approx(0.7))
    with pytest.raises(Wrong, match="in this trace compute is 20%") as caught:
        lab05.judge_bottleneck(("compute", 0.2), table)
    assert "which kinds of time your comparison leaves out" in caught.value.hint
    assert "idle" not in f"{caught.value.detail} {caught.value.hint}"  # the answer is not named


@pytest.mark.slow
def test_task7_right_on_both_traces(tf_worker) -> None:
    """The solution is right on the lab's (input-bound) trace and on the checker's own."""
    outcome = verdict_of(
        tf_worker, "verdict = checks.lab05.task7(answers.find_bottleneck, lab_trace())"
    )
    assert_verdict(outcome, "correct", ["the slow step: input", "a second trace, of matrix"])


@pytest.mark.slow
def test_task7_wrong(tf_worker) -> None:
    """An answer fixed in advance passes the lab's trace but not the checker's own; a share in
    milliseconds is named; a stub is not attempted; no trace is said so."""
    hard_coded = (
        "fixed = answers.make_fixed_bottleneck(checks.lab05.trace_bottleneck(lab_trace()))\n"
        "verdict = checks.lab05.task7(fixed, lab_trace())"
    )
    assert_verdict(
        verdict_of(tf_worker, hard_coded),
        "wrong",
        [
            "right for the lab's trace, but for a second trace",
            "does not come from the trace under the logdir you are given",
        ],
    )
    assert_verdict(
        verdict_of(
            tf_worker,
            "verdict = checks.lab05.task7(answers.in_milliseconds, lab_trace())",
        ),
        "wrong",
        ["between 0 and 1"],
    )
    assert_verdict(
        verdict_of(tf_worker, "verdict = checks.lab05.task7(stub, lab_trace())"),
        "not attempted",
    )
    assert_verdict(
        verdict_of(tf_worker, "verdict = checks.lab05.task7(answers.find_bottleneck, '/nowhere')"),
        "wrong",
        ["no trace to judge", "run the cell that traces the slow step first"],
    )
