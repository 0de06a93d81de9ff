"""Tests of dtf.checks: every checker gets right, wrong and missing answers.

Checkers that need no TensorFlow run in this process. Those that do (placement, soft
placement, towers) run together in one fresh interpreter (TensorFlow fixes its device layout
once per process), which prints each verdict as JSON; the tests then look at the verdicts.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from dtf import checks
from tests.conftest import ROOT, last_json, run_script


@pytest.fixture(autouse=True)
def fresh_scorecard():
    checks.reset()
    yield
    checks.reset()


def stub(*args):
    """What tools/make_labs.py leaves in a student lab (a bare raise means the same)."""
    raise NotImplementedError


# --------------------------------------------------------------------------- core


def test_verdict_rejects_unknown_status() -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        checks.Verdict("lab01", 1, "maybe", "Task 1: maybe")


@pytest.mark.parametrize("answer", [None, Ellipsis, stub])
def test_missing_answers_are_not_attempted(answer, capsys) -> None:
    verdict = checks.check("lab01", 1, lambda: checks.call(answer), answer)
    assert verdict.status == checks.NOT_ATTEMPTED
    assert verdict.message.startswith("Task 1: not attempted")
    assert capsys.readouterr().out.strip() == verdict.message  # printed, once
    if answer is stub:
        assert "in `stub`" in verdict.message


def test_an_exception_in_the_learners_code_is_wrong_not_raised() -> None:
    def broken():
        return 1 / 0

    verdict = checks.check("lab01", 1, lambda: checks.call(broken), broken)
    assert verdict.status == checks.WRONG
    assert "`broken` raised ZeroDivisionError: division by zero" in verdict.message
    assert "Hint: Call `broken` in a new cell" in verdict.message


def test_a_stub_of_another_task_is_named() -> None:
    def uses_task_1():
        raise NotImplementedError("Task 1: write your code here")

    verdict = checks.check("lab02", 3, lambda: checks.call(uses_task_1), uses_task_1)
    assert verdict.status == checks.WRONG
    assert "calls code of Task 1" in verdict.message
    assert "Finish Task 1 first" in verdict.message


def test_an_unforeseen_answer_is_wrong_not_raised() -> None:
    def body():
        raise KeyError("surprise")

    verdict = checks.check("lab01", 2, body)
    assert verdict.status == checks.WRONG
    assert "could not be checked (KeyError" in verdict.message


def test_plain_values_are_accepted_and_functions_required_where_needed() -> None:
    assert checks.call({"a": 1}) == {"a": 1}
    verdict = checks.check("lab02", 1, lambda: checks.call_function([1, 2]))
    assert verdict.status == checks.WRONG
    assert "expected a function, got [1, 2]" in verdict.message


def test_message_format() -> None:
    def body():
        raise checks.Wrong("expected 1, got 2", "try harder")

    assert (
        checks.check("lab01", 3, body).message
        == "Task 3: wrong: expected 1, got 2. Hint: Try harder."
    )
    assert checks.check("lab01", 3, lambda: None).message == "Task 3: correct"
    assert checks.check("lab01", 3, lambda: "all good").message == "Task 3: correct. All good."


def test_expect_equal_and_expected_got() -> None:
    checks.expect_equal([1, 3], [1, 3])
    with pytest.raises(checks.Wrong) as info:
        checks.expect_equal([1, 3], [3, 1], what="the order", hint="h")
    assert info.value.detail == "for the order: expected [1, 3], got [3, 1]"
    assert info.value.hint == "h"
    with pytest.raises(checks.Wrong):  # comparing arrays of other shapes does not raise
        checks.expect_equal(np.zeros(2), np.zeros(3))


def test_expect_close_messages() -> None:
    assert checks.expect_close([1.0, 2.0], np.array([1.0, 2.0 + 1e-7]), atol=1e-6) < 1e-6
    with pytest.raises(checks.Wrong, match=r"expected shape \(2, 2\), got shape \(4,\)"):
        checks.expect_close(np.zeros((2, 2)), np.zeros(4))
    with pytest.raises(checks.Wrong) as info:
        checks.expect_close([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.5]], what="w")
    detail = info.value.detail
    assert detail.startswith("for w: expected array of shape (2, 2)")
    assert "largest difference is 0.5 at index (1, 1) (expected 4, got 4.5" in detail
    with pytest.raises(checks.Wrong, match="largest difference is inf"):
        checks.expect_close([1.0], [float("nan")])
    with pytest.raises(checks.Wrong, match="expected numbers, got 'abc'"):
        checks.expect_close([1.0], "abc")


def test_short_descriptions() -> None:
    assert checks.short(np.arange(10, dtype=np.int32)).startswith(
        "array of shape (10,) (int32) [0, 1, 2, 3, 4, 5, ...]"
    )
    long = checks.short(list(range(1000)))
    assert len(long) == 160 and long.endswith("…")
    assert "\n" not in checks.short({"a": "x\ny"})


def test_summary_and_assert_all_correct(capsys) -> None:
    with pytest.raises(AssertionError, match="not checked"):
        checks.assert_all_correct("lab02")
    checks.check("lab02", 1, lambda: None)
    checks.check("lab02", 2, lambda: checks.call(None))
    capsys.readouterr()
    statuses = checks.summary("lab02")
    out = capsys.readouterr().out
    assert statuses == {1: "correct", 2: "not attempted", 3: "not attempted"}
    assert out.splitlines()[0] == "lab02: 1 of 3 tasks correct"
    assert "Task 3: not checked yet" in out
    with pytest.raises(AssertionError, match="Task 2: not attempted"):
        checks.assert_all_correct("lab02")
    checks.check("lab02", 2, lambda: None)
    checks.check("lab02", 3, lambda: None)
    checks.assert_all_correct("lab02")
    assert "(optional)" in _summary_text("lab01", capsys)
    with pytest.raises(ValueError, match="unknown lab"):
        checks.summary("lab99")


def _summary_text(lab, capsys) -> str:
    checks.summary(lab)
    return capsys.readouterr().out


def test_importing_checks_does_not_import_tensorflow() -> None:
    code = "import sys, dtf.checks; sys.exit('tensorflow' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60)
    assert proc.returncode == 0


def test_stub_message_matches_the_generator() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import make_labs
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert checks._STUB_MESSAGE.match(
        make_labs.STUB.format(task=7)[len('raise NotImplementedError("') :]
    )


# --------------------------------------------------------------------------- lab 01, task 1

RIGHT_MAPPINGS = {"2,3": {0: 2, 1: 3}, "1,0": {0: 1, 1: 0}, "0,2,-1,1": {0: 0, 1: 2}, "": {}}


def test_lab01_task1_right() -> None:
    assert checks.lab01_task1(lambda: RIGHT_MAPPINGS).correct
    assert checks.lab01_task1(RIGHT_MAPPINGS).correct  # a plain dict works too
    lists = {"2,3": [2, 3], "1,0": (1, 0), "0,2,-1,1": [0, 2], "": []}
    assert checks.lab01_task1(lambda: lists).correct


@pytest.mark.parametrize(
    "mask, wrong, hint",
    [
        ("2,3", {2: 2, 3: 3}, "start at 0"),
        ("1,0", {0: 0, 1: 1}, "order of the list"),
        ("0,2,-1,1", {0: 0, 1: 2, 2: 1}, "stops reading the list at the first invalid index"),
        ("", {0: 0, 1: 1, 2: 2, 3: 3}, "hides every GPU"),
    ],
)
def test_lab01_task1_wrong(mask, wrong, hint) -> None:
    verdict = checks.lab01_task1(lambda: {**RIGHT_MAPPINGS, mask: wrong})
    assert verdict.status == checks.WRONG
    assert f"for CUDA_VISIBLE_DEVICES={mask!r}: expected" in verdict.message
    assert f"got {wrong!r}" in verdict.message
    assert hint in verdict.message


def test_lab01_task1_malformed_and_missing() -> None:
    partial = {k: v for k, v in RIGHT_MAPPINGS.items() if k != "1,0"}
    verdict = checks.lab01_task1(lambda: partial)
    assert verdict.status == checks.WRONG and "no prediction for CUDA_VISIBLE_DEVICES='1,0'" in (
        verdict.message
    )
    verdict = checks.lab01_task1(lambda: [2, 3])
    assert verdict.status == checks.WRONG and "expected a dict" in verdict.message
    assert checks.lab01_task1(stub).status == checks.NOT_ATTEMPTED
    assert checks.lab01_task1(None).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- lab 01, task 2


def test_lab01_task2_right() -> None:
    verdict = checks.lab01_task2(lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,3"})
    assert verdict.correct, verdict.message
    assert "child process started with it read CUDA_VISIBLE_DEVICES='1,3'" in verdict.message
    assert "GPU:0 = physical 1, GPU:1 = physical 3" in verdict.message


def test_lab01_task2_changing_os_environ_is_wrong_and_undone(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def global_change(base):
        os.environ["CUDA_VISIBLE_DEVICES"] = "1,3"
        return dict(os.environ)

    verdict = checks.lab01_task2(global_change)
    assert verdict.status == checks.WRONG
    assert "changed this process's own environment (CUDA_VISIBLE_DEVICES)" in verdict.message
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # put back as it was


@pytest.mark.parametrize(
    "answer, expected",
    [
        (lambda base: base.update(CUDA_VISIBLE_DEVICES="1,3") or base, "changed the base_env dict"),
        (lambda base: {"CUDA_VISIBLE_DEVICES": "1,3"}, "lost or changed"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "3,1"}, "expected [1, 3], got [3, 1]"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,3,-1,2"}, None),  # same GPUs: right
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1"}, "expected [1, 3], got [1]"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": 13}, "environment variables are strings"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,1"}, "is ambiguous"),
        (lambda base: {k: v for k, v in base.items() if k != "CUDA_VISIBLE_DEVICES"}, "has no"),
        (lambda base: "1,3", "expected a dict"),
    ],
)
def test_lab01_task2_wrong(answer, expected) -> None:
    verdict = checks.lab01_task2(answer)
    if expected is None:
        assert verdict.correct, verdict.message
    else:
        assert verdict.status == checks.WRONG
        assert expected in verdict.message, verdict.message


def test_lab01_task2_missing() -> None:
    assert checks.lab01_task2(stub).status == checks.NOT_ATTEMPTED
    assert checks.lab01_task2(...).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- TensorFlow checkers

TF_CASES = r"""
import json
from dtf import quiet
quiet.quiet()
import numpy as np
import tensorflow as tf
from dtf import checks, devices, placement, towers

setup = devices.setup(2, log_placement=True)
with placement.capture():
    pass
D = setup.names
out = {}

def record(name, verdict):
    out[name] = [verdict.status, verdict.message]

def stub(*args):
    raise NotImplementedError

# Lab 01, task 3 first: outside Jupyter an eager op's placement is logged only the first
# time it runs on a device, so each case below uses a (op, device) pair not seen before.
def place_right(a, b, bias):
    with placement.capture() as log:
        with tf.device(D[1]):
            c = tf.matmul(a, b)
        with tf.device(D[0]):
            d = c + bias
    return d, log.table

def place_swapped(a, b, bias):
    with placement.capture() as log:
        with tf.device(D[0]):
            c = tf.matmul(a, b)
        with tf.device(D[1]):
            d = c + bias
    return d, log

record("l1t3_right", checks.lab01_task3(place_right, setup))
record("l1t3_swapped", checks.lab01_task3(place_swapped, setup))
record("l1t3_value", checks.lab01_task3(lambda a, b, bias: (tf.matmul(a, b), None), setup))
record("l1t3_not_pair", checks.lab01_task3(lambda a, b, bias: tf.matmul(a, b) + bias, setup))
record("l1t3_no_table", checks.lab01_task3(
    lambda a, b, bias: (tf.matmul(a, b) + bias, "table"), setup))
record("l1t3_stub", checks.lab01_task3(stub, setup))

# Lab 01, task 4
record("l1t4_right", checks.lab01_task4(lambda: {True: False, False: True}, setup))
record("l1t4_wrong", checks.lab01_task4(lambda: {True: True, False: True}, setup))
record("l1t4_keys", checks.lab01_task4(lambda: {"on": False, "off": True}, setup))
record("l1t4_values", checks.lab01_task4(lambda: {True: "runs", False: "raises"}, setup))
record("l1t4_stub", checks.lab01_task4(stub, setup))
out["soft_placement_after"] = tf.config.get_soft_device_placement()
out["missing_device"] = checks.missing_device(setup)

# Lab 02, task 1
def split_right(x, y, n):
    if len(x) % n:
        raise ValueError("uneven")
    return list(zip(tf.split(x, n), tf.split(y, n)))

record("l2t1_right", checks.lab02_task1(split_right))
record("l2t1_numpy", checks.lab02_task1(
    lambda x, y, n: list(zip(np.split(x, n), np.split(y, n)))))
record("l2t1_uneven", checks.lab02_task1(
    lambda x, y, n: list(zip(np.array_split(x, n), np.array_split(y, n)))))
record("l2t1_strided", checks.lab02_task1(
    lambda x, y, n: [(x[i::n], y[i::n]) for i in range(n)]))
record("l2t1_count", checks.lab02_task1(lambda x, y, n: [(x, y)]))
def split_type_error(x, y, n):
    if len(x) % n:
        raise TypeError("uneven")
    return split_right(x, y, n)
record("l2t1_type_error", checks.lab02_task1(split_type_error))
record("l2t1_stub", checks.lab02_task1(stub))

# Lab 02, task 2
record("l2t2_right", checks.lab02_task2(
    lambda tg: [tf.add_n(list(g)) / len(g) for g in zip(*tg)]))
record("l2t2_numpy", checks.lab02_task2(
    lambda tg: [np.mean([t.numpy() for t in g], axis=0) for g in zip(*tg)]))
record("l2t2_sum", checks.lab02_task2(lambda tg: [tf.add_n(list(g)) for g in zip(*tg)]))
record("l2t2_first", checks.lab02_task2(lambda tg: list(tg[0])))
record("l2t2_flat", checks.lab02_task2(lambda tg: [g for tower in tg for g in tower]))
record("l2t2_stub", checks.lab02_task2(stub))

# Lab 02, task 3
def make_step(on_devices=True, average=True, apply=True):
    def step(params, x, y, devs, lr):
        variables = list(params.values())
        grads = []
        for d, (x_i, y_i) in zip(devs, towers.split_batch(x, y, len(devs))):
            with tf.device(d if on_devices else None):
                with tf.GradientTape() as tape:
                    loss = checks.lab02_loss(y_i, towers.mlp_logits(params, x_i))
                grads.append(tape.gradient(loss, variables))
        with tf.device("/device:CPU:0"):
            for g, v in zip(towers.average_gradients(grads), variables):
                if apply:
                    v.assign_sub(lr * g * (1 if average else len(devs)))
    return step

record("l2t3_right_function", checks.lab02_task3(tf.function(make_step()), setup))
record("l2t3_right_again", checks.lab02_task3(tf.function(make_step()), setup))
record("l2t3_one_device", checks.lab02_task3(tf.function(make_step(on_devices=False)), setup))
record("l2t3_right_eager", checks.lab02_task3(make_step(), setup))
record("l2t3_summed", checks.lab02_task3(make_step(average=False), setup))
record("l2t3_no_update", checks.lab02_task3(make_step(apply=False), setup))
def uses_split_stub(*args):
    raise NotImplementedError("Task 1: write your code here")
record("l2t3_task1_stub", checks.lab02_task3(uses_split_stub, setup))
record("l2t3_stub", checks.lab02_task3(stub, setup))
record("l2t3_none", checks.lab02_task3(None, setup))
out["tf32_after"] = tf.config.experimental.tensor_float_32_execution_enabled()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def tf_verdicts() -> dict:
    return last_json(run_script(TF_CASES, timeout=240))


CASES = {
    # name: (status, fragments of the message)
    "l1t3_right": ("correct", ["MatMul ran on CPU:1 and the addition on CPU:0"]),
    "l1t3_swapped": ("wrong", ["for the device of MatMul: expected 'CPU:1', got 'CPU:0'"]),
    "l1t3_value": ("wrong", ["for the result: expected array of shape (2, 2)", "0.5"]),
    "l1t3_not_pair": ("wrong", ["expected a pair (result, placement table)"]),
    "l1t3_no_table": ("wrong", ["expected the placement table", "log.table"]),
    "l1t3_stub": ("not attempted", []),
    "l1t4_right": ("correct", ["raised InvalidArgumentError", "ran on CPU:0"]),
    "l1t4_wrong": ("wrong", ["soft placement on (raises?): expected False, got True"]),
    "l1t4_keys": ("wrong", ["keys True and False"]),
    "l1t4_values": ("wrong", ["expected True (it raises) or False"]),
    "l1t4_stub": ("not attempted", []),
    "l2t1_right": ("correct", ["refused"]),
    "l2t1_numpy": ("correct", []),
    "l2t1_uneven": ("wrong", ["must raise ValueError, got shards of sizes [3, 3, 2, 2]"]),
    "l2t1_strided": ("wrong", ["x of shard 0 of a batch of 12 over 2 tower(s)", "in order"]),
    "l2t1_count": ("wrong", ["expected a list of 2 (x_i, y_i) pairs, got a list of 1 item."]),
    "l2t1_type_error": ("wrong", ["raised TypeError: uneven instead of ValueError"]),
    "l2t1_stub": ("not attempted", []),
    "l2t2_right": ("correct", []),
    "l2t2_numpy": ("correct", []),
    "l2t2_sum": ("wrong", ["That is the sum"]),
    "l2t2_first": ("wrong", ["variable 0, 2 tower(s)"]),
    "l2t2_flat": ("wrong", ["expected a list of 2 gradients (one per variable), got a list of 4"]),
    "l2t2_stub": ("not attempted", []),
    "l2t3_right_function": ("correct", ["the towers' MatMuls ran on CPU:0, CPU:1"]),
    "l2t3_right_again": ("correct", ["MatMuls ran on CPU:0, CPU:1"]),
    "l2t3_one_device": ("wrong", ["no MatMul ran on CPU:1", "with tf.device(devices[i])"]),
    "l2t3_right_eager": ("correct", ["match single-device training"]),
    "l2t3_summed": ("wrong", ["after 3 steps (vs. single-device training)", "not summed"]),
    "l2t3_no_update": ("wrong", ["still the initial ones"]),
    "l2t3_task1_stub": ("wrong", ["Finish Task 1 first"]),
    "l2t3_stub": ("not attempted", []),
    "l2t3_none": ("not attempted", []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tensorflow_checkers(tf_verdicts, name) -> None:
    status, fragments = CASES[name]
    got_status, message = tf_verdicts[name]
    task = re.match(r"l\dt(\d)", name)[1]
    assert message.startswith(f"Task {task}: {status}"), message
    assert got_status == status, message
    for fragment in fragments:
        assert fragment in message, message
    assert "Traceback" not in message


def test_settings_the_checkers_change_are_restored(tf_verdicts) -> None:
    assert tf_verdicts["soft_placement_after"] is True
    assert tf_verdicts["tf32_after"] is True  # TensorFlow's default
    assert tf_verdicts["missing_device"] == "/device:CPU:2"
