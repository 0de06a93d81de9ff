"""Tests of dtf.checks.lab02: right, wrong and missing answers for every task.

Every task needs TensorFlow, so the cases run in a TensorFlow process set up like the lab
(2 logical CPUs, placement logging on), one case at a time, each with its own answer
(tests/checks_worker.py). Every test stands alone.
"""

from __future__ import annotations

import pytest

from dtf.checks import lab02
from tests.checks_worker import worker_fixture

LAB_NOTEBOOK = "02_towers_lab.ipynb"

#: The answers are functions of tests/answers/lab02.py, imported in the worker (text: the
#: worker's setup code).
tf_worker = worker_fixture(
    num_devices=2, setup="from tests.answers import lab02 as answers, returning, stub\n"
)


# --------------------------------------------------------------------------- task 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "code, status, fragments",
    [
        ("verdict = checks.lab02.task1(answers.split_right)", "correct", ["refused"]),
        (
            "verdict = checks.lab02.task1(answers.split_numpy)",
            "correct",
            [],
        ),
        (
            "verdict = checks.lab02.task1(answers.split_array_split)",
            "wrong",
            ["must raise ValueError, got shards of sizes [3, 3, 2, 2]"],
        ),
        (
            "verdict = checks.lab02.task1(answers.split_strided)",
            "wrong",
            [
                "for x of shard 0 of a batch of 12 over 2 tower(s): your values array of shape",
                "are not the right ones",
                "in order",
            ],
        ),
        (
            "verdict = checks.lab02.task1(answers.split_whole_shards)",
            "wrong",
            [
                "for x of shard 0 of a batch of 12 over 2 tower(s): your shape (12, 3) is not "
                "its shape",
                "not equal parts of the batch",
            ],
        ),
        (
            "verdict = checks.lab02.task1(answers.split_whole)",
            "wrong",
            ["expected a list of 2 (x_i, y_i) pairs, got a list of 1 item."],
        ),
        (
            "verdict = checks.lab02.task1(answers.split_type_error)",
            "wrong",
            ["raised TypeError: uneven instead of ValueError"],
        ),
        ("verdict = checks.lab02.task1(stub)", "not attempted", []),
        (
            "verdict = checks.lab02.task1(towers.split_batch)",
            "wrong",
            ["is `dtf.towers.split_batch`, the course's own code", "write it yourself"],
        ),
        (
            "verdict = checks.lab02.task1(answers.split_by_the_course)",
            "wrong",
            ["calls `dtf.towers.split_batch`, the course's own code"],
        ),
    ],
    ids=[
        "right",
        "numpy",
        "uneven",
        "strided",
        "whole-shards",
        "count",
        "type-error",
        "stub",
        "ref",
        "ref-call",
    ],
)
def test_task1(tf_worker, code, status, fragments) -> None:
    outcome = tf_worker.run(code)
    assert outcome.message.startswith(f"Task 1: {status}"), outcome.message
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message
    assert "expected shape" not in outcome.message  # the right shard is never shown


# --------------------------------------------------------------------------- task 2


@pytest.mark.parametrize(
    "answer, status, fragments",
    [
        ("answers.average_right", "correct", []),
        ("answers.average_numpy", "correct", []),
        ("answers.average_sum", "wrong", ["That is the sum"]),
        (
            "answers.average_first_tower",
            "wrong",
            ["variable 0, 2 tower(s)", "That is tower 0's gradient alone"],
        ),
        ("answers.average_last_tower", "wrong", ["That is tower 1's gradient alone"]),
        (
            "answers.average_over_variables",
            "wrong",
            [
                "for variable 0, 2 tower(s) with 2 variables: your values",
                "neither the towers' mean, nor their sum, nor one tower's gradient",
            ],
        ),
        (
            "answers.average_flat",
            "wrong",
            ["expected a list of 2 gradients (one per variable), got a list of 4"],
        ),
        ("stub", "not attempted", []),
        ("answers.average_by_the_course", "wrong", ["`dtf.towers.average_gradients`"]),
    ],
    ids=[
        "right",
        "numpy",
        "sum",
        "first-tower",
        "last-tower",
        "other",
        "flat",
        "stub",
        "reference",
    ],
)
def test_task2(tf_worker, answer, status, fragments) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab02.task2({answer})")
    assert outcome.message.startswith(f"Task 2: {status}"), outcome.message
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message
    # The right mean is never shown, nor what to compute (issue 26 review).
    assert "expected" not in outcome.message.replace("expected a list of 2", "")
    assert "is the mean, over the towers" not in outcome.message


# --------------------------------------------------------------------------- task 3


def task3(step: str) -> str:
    """A case: task 3 checks ``step``, made of ``answers.make_step(...)``."""
    return (
        f"verdict = checks.lab02.task3({step.replace('make_step', 'answers.make_step')}, setup)\n"
    )


def test_task3_right_tf_function(tf_worker) -> None:
    outcome = tf_worker.run(task3("tf.function(make_step())"))
    assert outcome.status == "correct", outcome.message
    assert "3 tower steps over 2 devices match single-device training" in outcome.message
    assert "the towers' MatMuls ran on CPU:0, CPU:1" in outcome.message


def test_task3_right_eager(tf_worker) -> None:
    outcome = tf_worker.run(task3("make_step()"))
    assert outcome.status == "correct", outcome.message
    assert "the towers' MatMuls ran on CPU:0, CPU:1" in outcome.message


def test_task3_checking_again_gives_the_same_verdict(tf_worker) -> None:
    # The same tf.function, checked twice: traced anew, same weights, same line.
    outcome = tf_worker.run(
        "step = tf.function(answers.make_step(seen=out))\n"
        + "first = checks.lab02.task3(step, setup)\n"
        + "verdict = checks.lab02.task3(step, setup)\n"
        + "out['first'] = first.message\n"
    )
    assert outcome.status == "correct", outcome.message
    assert outcome.message == outcome.out["first"]
    assert "MatMuls ran on CPU:0, CPU:1" in outcome.message
    assert len(set(outcome.out["hidden"])) == 1, outcome.out["hidden"]


def test_task3_gradients_off_the_tower_s_device_are_wrong(tf_worker) -> None:
    outcome = tf_worker.run(task3("tf.function(make_step(gradient_outside=True))"))
    assert outcome.status == "wrong", outcome.message
    assert "no tower's gradient was computed on CPU:1" in outcome.message
    assert "where your code calls tape.gradient" in outcome.message


def test_task3_one_device_is_wrong(tf_worker) -> None:
    outcome = tf_worker.run(task3("tf.function(make_step(on_devices=False))"))
    assert outcome.status == "wrong"
    assert "the weights are right, but no MatMul ran on CPU:1" in outcome.message
    assert "belong on devices[i]" in outcome.message


@pytest.mark.parametrize("wrap", ["make_step(split=False)", "tf.function(make_step(split=False))"])
def test_task3_towers_on_the_whole_batch_are_wrong(tf_worker, wrap) -> None:
    """Every tower on the whole global batch averages to the right weights: accepted before
    issue 26; each tower's loss must see its shard."""
    outcome = tf_worker.run(task3(wrap))
    assert outcome.status == "wrong", outcome.message
    assert "a tower's loss was computed on 32 examples (the whole global batch)" in outcome.message
    assert "not on its shard of 16" in outcome.message


@pytest.mark.parametrize(
    "wrap", ["make_step(update_on='last')", "tf.function(make_step(update_on='last'))"]
)
def test_task3_averaging_on_the_last_device_is_wrong(tf_worker, wrap) -> None:
    """Right weights, gradients averaged and applied on the last tower's device instead of
    /device:CPU:0: accepted before issue 26; the placement log after the towers tells."""
    outcome = tf_worker.run(task3(wrap))
    assert outcome.status == "wrong", outcome.message
    assert "averaged or applied on CPU:1, not on /device:CPU:0" in outcome.message


def test_task3_towers_on_the_wrong_devices_are_wrong(tf_worker) -> None:
    """Tower i's shard belongs on devices[i]: every device running a MatMul is not enough
    (issue 26 review). Seen when the step runs eagerly, from the device of each shard's
    logits."""
    outcome = tf_worker.run(task3("make_step(devices_reversed=True)"))
    assert outcome.status == "wrong", outcome.message
    assert (
        "the weights are right, but the logits of shard 0 were computed on CPU:1, not on "
        "devices[0] (CPU:0)" in outcome.message
    )
    assert "Look at how your loop pairs the shards with the devices" in outcome.message


def test_task3_the_task_s_loss_is_required(tf_worker) -> None:
    outcome = tf_worker.run(task3("make_step(own_loss=True)"))
    assert outcome.status == "wrong", outcome.message
    assert "never called checks.lab02.loss" in outcome.message


@pytest.mark.parametrize(
    "answer, reference",
    [
        (
            "answers.step_by_the_course",
            "make_tower_train_step",
        ),
        (
            "answers.step_averaging_by_the_course",
            "average_gradients",
        ),
        ("answers.helper_step", "split_batch` (through `helper`"),
    ],
    ids=["step", "average", "through-a-helper"],
)
def test_task3_refuses_the_course_s_towers(tf_worker, answer, reference) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab02.task3({answer}, setup)")
    assert outcome.status == "wrong", outcome.message
    assert reference in outcome.message and "the course's own code" in outcome.message
    assert "write it yourself" in outcome.message


@pytest.mark.parametrize(
    "wrap", ["make_step(average=False)", "tf.function(make_step(average=False))"]
)
def test_task3_names_summed_gradients(tf_worker, wrap) -> None:
    outcome = tf_worker.run(task3(wrap))
    assert outcome.status == "wrong"
    assert "training with the sum of the 2 towers' gradients" in outcome.message
    assert "a step 2 times too large" in outcome.message
    assert "Hint: Each tower's gradient is already that of a mean loss" in outcome.message


@pytest.mark.parametrize(
    "wrap", ["make_step(tape_records=False)", "tf.function(make_step(tape_records=False))"]
)
def test_task3_names_none_gradients(tf_worker, wrap) -> None:
    outcome = tf_worker.run(task3(wrap))
    assert outcome.status == "wrong"
    assert (
        "tape.gradient returned None instead of a gradient for weights_1, biases_1, "
        "weights_2, biases_2" in outcome.message
    )
    assert "Hint: Look at where each tower's logits and loss are computed" in outcome.message


def test_task3_none_gradients_that_were_skipped(tf_worker) -> None:
    # A step that drops the None gradients: nothing is applied, and the message says why.
    outcome = tf_worker.run(
        "verdict = checks.lab02.task3(answers.step_dropping_none_gradients, setup)"
    )
    assert outcome.status == "wrong"
    assert "returned None instead of a gradient" in outcome.message
    assert "the weights stayed the initial ones" in outcome.message


def test_task3_no_update(tf_worker) -> None:
    outcome = tf_worker.run(task3("make_step(apply=False)"))
    assert outcome.status == "wrong"
    assert "after 3 calls the weights are still the initial ones" in outcome.message
    assert "None" not in outcome.message


def test_task3_other_wrong_weights(tf_worker) -> None:
    outcome = tf_worker.run("verdict = checks.lab02.task3(answers.third_of_the_rate, setup)")
    assert outcome.status == "wrong"
    assert "after 3 steps (vs. single-device training): your values" in outcome.message
    assert "expected" not in outcome.message  # the right weights are never shown
    assert "averaged over the towers" in outcome.message
    assert "sum" not in outcome.message and "None" not in outcome.message


@pytest.mark.parametrize(
    "code, status, fragment",
    [
        (
            "verdict = checks.lab02.task3(answers.uses_split_stub, setup)",
            "wrong",
            "Finish Task 1 first",
        ),
        ("verdict = checks.lab02.task3(stub, setup)", "not attempted", ""),
        ("verdict = checks.lab02.task3(None, setup)", "not attempted", ""),
    ],
    ids=["task1-stub", "stub", "none"],
)
def test_task3_missing(tf_worker, code, status, fragment) -> None:
    outcome = tf_worker.run(code)
    assert outcome.message.startswith(f"Task 3: {status}") and fragment in outcome.message


def test_task3_restores_tensorfloat32(tf_worker) -> None:
    outcome = tf_worker.run(
        task3("make_step()")
        + "out['tf32'] = tf.config.experimental.tensor_float_32_execution_enabled()\n"
        + "out['gradient'] = tf.GradientTape.gradient.__module__\n"
    )
    assert outcome.status == "correct", outcome.message
    assert outcome.out["tf32"] is True  # TensorFlow's default, put back
    assert outcome.out["gradient"].startswith("tensorflow.")  # the tape's method, put back


# --------------------------------------------------------------------------- task 4

DIAGNOSIS = {"A": "summed-loss", "B": "right", "C": "last-tower", "D": "summed-gradients"}


def diagnose(answer: object) -> str:
    """A case: task 4 checks an answer that returns ``answer``."""
    return f"verdict = checks.lab02.task4(returning({answer!r}), setup)\n"


def test_task4_the_measurements_tell_the_steps_apart(tf_worker) -> None:
    """One step of each, measured against one device: the right one matches, summing the
    gradients multiplies the update by the towers, summing the losses by the examples per
    tower, and one tower's gradients turn it."""
    outcome = tf_worker.run(
        "table = checks.lab02.measure_steps(setup)\n"
        "out['table'] = table.to_dict(orient='index')\n"
        "out['again'] = checks.lab02.measure_steps(setup).equals(table)\n"
        "out['one'] = checks.lab02.measure_steps(D[:1]).to_dict(orient='index')\n"
        "out['diagnoses'] = checks.lab02.measured_diagnoses(table)\n"
    )
    table = outcome.out["table"]
    size, cosine = "update size / one device's", "cosine with one device's update"
    assert table["B"][size] == 1.0 and table["B"][cosine] == 1.0
    assert table["D"][size] == 4.0 and table["D"][cosine] == 1.0
    assert table["A"][size] == 16.0 and table["A"][cosine] == 1.0
    assert table["C"][cosine] < 0.999
    assert float(table["B"]["largest weight difference"]) < 1e-6
    assert outcome.out["again"] is True
    assert outcome.out["diagnoses"] == DIAGNOSIS == lab02.CANDIDATES
    one = outcome.out["one"]  # the same towers on one device: the same measurements
    assert {k: (v[size], v[cosine]) for k, v in one.items()} == {
        k: (v[size], v[cosine]) for k, v in table.items()
    }


def test_task4_refuses_the_checker_s_own_table() -> None:
    """The steps' mistakes are a table of the checker's: an answer that reads it is refused
    before it runs (no TensorFlow needed)."""
    verdict = lab02.task4(lambda: dict(lab02.CANDIDATES), None)
    assert verdict.status == "wrong"
    assert "reads `dtf.checks.lab02.CANDIDATES`, the course's own code" in verdict.message


def test_task4_right(tf_worker) -> None:
    outcome = tf_worker.run(diagnose(DIAGNOSIS))
    assert outcome.status == "correct", outcome.message
    assert outcome.message == (
        "Task 4: correct. Step B trains as one device does; the measurements give away each "
        "of the others' mistakes (A: summed-loss, C: last-tower, D: summed-gradients)."
    )
    again = tf_worker.run(diagnose({k: f" {v.upper()} " for k, v in DIAGNOSIS.items()}))
    assert again.message == outcome.message


@pytest.mark.parametrize(
    "change, fragments",
    [
        (
            {"D": "right"},
            [
                "1 of 4 diagnoses are wrong: step D.",
                "Step D's update is 4.000 times one device's, at a cosine of 1.0000",
            ],
        ),
        (
            {"A": "summed-gradients", "D": "summed-loss"},
            [
                "2 of 4 diagnoses are wrong: steps A and D.",
                "Step A's update is 16.000 times one device's: that factor is not the one the "
                "mistake you chose makes",
            ],
        ),
        (
            {"C": "summed-gradients"},
            ["Step C's update points elsewhere than one device's (cosine 0."],
        ),
        (
            {"B": "last-tower", "C": "right"},
            ["steps B and C.", "Step B's update points where one device's does (cosine 1.0000)"],
        ),
    ],
    ids=["summed-called-right", "factors-swapped", "turned-called-scaled", "swapped"],
)
def test_task4_wrong(tf_worker, change, fragments) -> None:
    outcome = tf_worker.run(diagnose({**DIAGNOSIS, **change}))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message
    assert "number of towers" not in outcome.message  # nor which factor is which mistake's
    for step in change:  # the right diagnosis of a step answered wrongly is never given
        assert repr(DIAGNOSIS[step]) not in outcome.message
        assert f"{step}: {DIAGNOSIS[step]}" not in outcome.message


@pytest.mark.parametrize(
    "answer, fragment",
    [
        (["A"], "expected a dict {step: key of DIAGNOSES}"),
        ({"A": "right"}, "there is no diagnosis for step B"),
        ({**DIAGNOSIS, "C": "broken"}, "for step C: 'broken' is not one of the diagnoses"),
        ({**DIAGNOSIS, "C": 3}, "for step C: 3 is not one of the diagnoses"),
    ],
    ids=["list", "missing", "unknown", "number"],
)
def test_task4_malformed(tf_worker, answer, fragment) -> None:
    outcome = tf_worker.run(diagnose(answer))
    assert outcome.status == "wrong" and fragment in outcome.message, outcome.message


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task4_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab02.task4({answer}, setup)")
    assert outcome.status == "not attempted", outcome.message


def test_task4_calling_an_unfinished_task_names_it(tf_worker) -> None:
    outcome = tf_worker.run("verdict = checks.lab02.task4(answers.diagnose_steps, setup)")
    assert outcome.message.startswith(
        "Task 4: wrong: `diagnose_steps` calls code of Task 1 (`split_batch`)"
    ), outcome.message
