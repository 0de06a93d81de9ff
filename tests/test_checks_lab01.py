"""Tests of dtf.checks.lab01: right, wrong and missing answers for every task.

Tasks 1 and 2 need no TensorFlow and run here. Tasks 3 and 4 run in a TensorFlow process
set up like the lab (2 logical CPUs, placement logging on), one case at a time, each case
with its own answer (tests/checks_worker.py). Every test stands alone.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from dtf import checks, masking
from dtf.checks import lab01
from tests.answers import stub
from tests.checks_worker import worker_fixture

#: The answers of tasks 3 to 5 are functions of tests/answers/lab01.py, imported in the worker.
tf_worker = worker_fixture(
    num_devices=2, setup="from tests.answers import lab01 as answers, returning, stub\n"
)


LAB_NOTEBOOK = "01_masking_placement_lab.ipynb"

pytestmark = pytest.mark.usefixtures("fresh_scorecard")  # conftest: an empty scorecard


# --------------------------------------------------------------------------- task 1

RIGHT_MAPPINGS = {"2,3": {0: 2, 1: 3}, "1,0": {0: 1, 1: 0}, "0,2,-1,1": {0: 0, 1: 2}, "": {}}


def test_task1_right() -> None:
    verdict = lab01.task1(lambda: RIGHT_MAPPINGS)
    assert verdict.correct and verdict.message == (
        "Task 1: correct. All 4 mappings match CUDA's rules."
    )
    assert lab01.task1(RIGHT_MAPPINGS).correct  # a plain dict works too
    lists = {"2,3": [2, 3], "1,0": (1, 0), "0,2,-1,1": [0, 2], "": []}
    assert lab01.task1(lambda: lists).correct


@pytest.mark.parametrize(
    "mask, wrong, hint",
    [
        ("2,3", {2: 2, 3: 3}, "your ordinals [2, 3] do not count up from 0"),
        ("2,3", {0: 3, 1: 2}, "your ordinals do not follow the order of the list"),
        ("2,3", {0: 0, 1: 1}, "shows physical GPU 0, which the list does not name"),
        ("2,3", {0: 2}, "your mapping hides a GPU that the list makes visible"),
        ("2,3", {0: 2, 1: 2}, "gives one physical GPU two ordinals"),
        ("2,3", {0: "GPU:2"}, "a dict {visible ordinal: physical GPU id} of whole numbers"),
        ("1,0", {0: 0, 1: 1}, "your ordinals do not follow the order of the list"),
        (
            "0,2,-1,1",
            {0: 0, 1: 2, 2: 1},
            "shows GPU 1, listed after the invalid index -1: CUDA stops reading the list at "
            "the first invalid index",
        ),
        ("0,2,-1,1", {0: 0}, "your mapping hides a GPU that the list makes visible"),
        ("", {0: 0, 1: 1, 2: 2, 3: 3}, "is not the same as an unset one"),
        ("", {0: 0}, "shows physical GPU 0, which the list does not name"),
        ("0,2,-1,1", {0: 0, 1: 2, 2: -1}, "shows -1 as a GPU, but an invalid index names no GPU"),
        ("2,3", {0: 2.0, 1: 3.0}, "of whole numbers"),
        ("1,0", {0: True, 1: False}, "of whole numbers"),
        ("2,3", {0: "2", 1: "3"}, "of whole numbers"),
    ],
)
def test_task1_wrong(mask, wrong, hint) -> None:
    """A wrong mapping is named with the rule it misses, never with the right mapping
    (issue 26: the verdict printed the expected value, the hint of '' the empty dict); the
    hint names the slip of that mapping, not one chosen by the mask."""
    verdict = lab01.task1(lambda: {**RIGHT_MAPPINGS, mask: wrong})
    assert verdict.status == checks.WRONG
    assert f"for CUDA_VISIBLE_DEVICES={mask!r}, your mapping {wrong!r}" in verdict.message
    assert hint.lower() in verdict.message.lower()
    assert repr(RIGHT_MAPPINGS[mask]) not in verdict.message.replace(repr(wrong), "")
    assert "expected" not in verdict.message


def test_task1_refuses_the_course_s_own_mapping() -> None:
    verdict = lab01.task1(
        lambda: {m: masking.visible_mapping(m, 4) for m in lab01.MASKS}  # the reference
    )
    assert verdict.status == checks.WRONG
    assert "calls `dtf.masking.visible_mapping`, the course's own code" in verdict.message
    assert "write it yourself" in verdict.message


def test_task1_malformed_and_missing() -> None:
    partial = {k: v for k, v in RIGHT_MAPPINGS.items() if k != "1,0"}
    verdict = lab01.task1(lambda: partial)
    assert verdict.status == checks.WRONG
    assert "no prediction for CUDA_VISIBLE_DEVICES='1,0'" in verdict.message
    verdict = lab01.task1(lambda: [2, 3])
    assert verdict.status == checks.WRONG and "expected a dict" in verdict.message
    assert lab01.task1(stub).status == checks.NOT_ATTEMPTED
    assert lab01.task1(None).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- task 2


def right_env(base):
    return {**base, "CUDA_VISIBLE_DEVICES": "1,3"}


def test_task2_right() -> None:
    verdict = lab01.task2(right_env)
    assert verdict.correct, verdict.message
    assert "child process started with it read CUDA_VISIBLE_DEVICES='1,3'" in verdict.message
    assert "GPU:0 = physical 1, GPU:1 = physical 3" in verdict.message
    assert lab01.task2(right_env) == verdict  # the same verdict, word for word


@pytest.fixture
def child_hook(tmp_path: Path, monkeypatch):
    """``hook(code)``: a folder whose sitecustomize.py runs ``code`` when a Python child
    starts with that folder as its PYTHONPATH: what only a real child process can do. (The
    parent's own PYTHONPATH is removed first, so the answer adds the variable rather than
    changing one of the parent's.)"""
    monkeypatch.delenv("PYTHONPATH", raising=False)

    # ``code`` stays text: it is the start-up file of a child process, not an answer.
    def hook(code: str) -> str:
        (tmp_path / "sitecustomize.py").write_text(textwrap.dedent(code), encoding="utf-8")
        return str(tmp_path)

    return hook


def test_task2_really_starts_a_child_process(tmp_path: Path, child_hook) -> None:
    marker = tmp_path / "child.txt"
    hook = child_hook(
        f"""
        import os
        with open({str(marker)!r}, "w") as f:
            f.write(f"{{os.getpid()}} {{os.environ.get('CUDA_VISIBLE_DEVICES')}}")
        """,
    )
    verdict = lab01.task2(lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,3", "PYTHONPATH": hook})
    assert verdict.correct, verdict.message
    assert marker.exists(), "the checker says a child read the value, but no child started"
    pid, seen = marker.read_text(encoding="utf-8").split()
    assert int(pid) != os.getpid() and seen == "1,3"


@pytest.mark.parametrize(
    "hook, expected",
    [
        (
            "import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n",
            "for what the child process read: expected '1,3', got '0'",
        ),
        (
            "import os, sys\nsys.stderr.write('no GPU driver here')\nos._exit(3)\n",
            "child process started with this environment failed (exit status 3): "
            "no GPU driver here",
        ),
    ],
    ids=["child-reads-another-value", "child-fails"],
)
def test_task2_reports_what_the_child_did(child_hook, hook: str, expected: str) -> None:
    path = child_hook(hook)
    verdict = lab01.task2(lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,3", "PYTHONPATH": path})
    assert verdict.status == checks.WRONG
    assert expected in verdict.message, verdict.message


def test_task2_gives_up_on_a_child_that_hangs(child_hook, monkeypatch) -> None:
    monkeypatch.setattr(lab01, "CHILD_TIMEOUT_S", 1.0)
    path = child_hook("import time\ntime.sleep(30)\n")
    verdict = lab01.task2(lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,3", "PYTHONPATH": path})
    assert verdict.status == checks.WRONG
    assert "did not finish in 1 s" in verdict.message


def test_task2_changing_os_environ_is_wrong_and_undone(monkeypatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)

    def global_change(base):
        os.environ["CUDA_VISIBLE_DEVICES"] = "1,3"
        return dict(os.environ)

    verdict = lab01.task2(global_change)
    assert verdict.status == checks.WRONG
    assert "changed this process's own environment (CUDA_VISIBLE_DEVICES)" in verdict.message
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # put back as it was


@pytest.mark.parametrize(
    "answer, expected",
    [
        (lambda base: base.update(CUDA_VISIBLE_DEVICES="1,3") or base, "changed the base_env dict"),
        (lambda base: {"CUDA_VISIBLE_DEVICES": "1,3"}, "lost or changed"),
        (lambda base: {"CUDA_VISIBLE_DEVICES": "1,3"}, "needs its parent's other variables"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "3,1"}, "expected [1, 3], got [3, 1]"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "3,1"}, "in another order than the task"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,3,-1,2"}, None),  # same GPUs: right
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1"}, "expected [1, 3], got [1]"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1"}, "hides a GPU the child must see"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,2"}, "a GPU it must not see"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": 13}, "environment variables are strings"),
        (lambda base: {**base, "CUDA_VISIBLE_DEVICES": "1,1"}, "lists GPU 1 twice"),
        (lambda base: {k: v for k, v in base.items() if k != "CUDA_VISIBLE_DEVICES"}, "has no"),
        (lambda base: "1,3", "expected a dict"),
    ],
)
def test_task2_wrong(answer, expected) -> None:
    verdict = lab01.task2(answer)
    if expected is None:
        assert verdict.correct, verdict.message
    else:
        assert verdict.status == checks.WRONG
        assert expected in verdict.message, verdict.message
    assert "ambiguous" not in verdict.message
    # The hint names the mistake, never what to write (issue 26 review).
    assert "comma-separated" not in verdict.message and "start from a copy" not in verdict.message


@pytest.mark.parametrize("mask", ["GPU:1,GPU:3", "/gpu:1,/gpu:3", "/device:GPU:1,/device:GPU:3"])
def test_task2_tensorflow_device_names_are_not_indices(mask) -> None:
    verdict = lab01.task2(lambda base: {**base, "CUDA_VISIBLE_DEVICES": mask})
    assert verdict.status == checks.WRONG
    assert "uses TensorFlow device names" in verdict.message
    assert "CUDA reads physical GPU indices" in verdict.message
    assert "TensorFlow's device names mean nothing to it" in verdict.message
    assert "e.g." not in verdict.message and "ambiguous" not in verdict.message


def test_task2_missing() -> None:
    assert lab01.task2(stub).status == checks.NOT_ATTEMPTED
    assert lab01.task2(...).status == checks.NOT_ATTEMPTED


# --------------------------------------------------------------------------- task 3
# The answers are functions of tests/answers/lab01.py; each case calls one in the worker
# (where ``answers`` is that module).


def place(answer: str = "answers.make_place()", devices: str = "setup") -> str:
    return f"verdict = checks.lab01.task3({answer}, {devices})\n"


@pytest.mark.slow
def test_task3_right(tf_worker) -> None:
    first = tf_worker.run(place())
    assert first.status == "correct", first.message
    assert first.message == (
        "Task 3: correct. MatMul ran on CPU:1 and the addition on CPU:0, and on CPU:0 and "
        "CPU:1 with the devices reversed."
    )
    assert tf_worker.run(place()).message == first.message  # again: the same verdict


def test_task3_a_placement_log_works_too(tf_worker) -> None:
    outcome = tf_worker.run(place("answers.make_place(table=False)"))
    assert outcome.status == "correct", outcome.message


def test_task3_refuses_a_tf_function(tf_worker) -> None:
    outcome = tf_worker.run(place("tf.function(answers.make_place())"))
    assert outcome.status == "wrong", outcome.message
    assert "your place_ops is a tf.function" in outcome.message
    assert "ask for the ops to run eagerly" in outcome.message


def test_task3_swapped_devices(tf_worker) -> None:
    outcome = tf_worker.run(place("answers.make_place(matmul=0, add=-1)"))
    assert outcome.status == "wrong"
    assert "for the device of MatMul: expected 'CPU:1', got 'CPU:0'" in outcome.message
    assert "Each of your two ops ran on the device meant for the other" in outcome.message
    assert "soft placement" not in outcome.message and "default device" not in outcome.message


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            "add=None",
            [
                "with devices = ['CPU:1', 'CPU:0']: for the device of the addition: expected "
                "'CPU:1', got 'CPU:0'",
                "CPU:0 is TensorFlow's default device, where an op runs when no device scope "
                "is open",
            ],
        ),
        ("matmul=None", ["for the device of MatMul: expected 'CPU:1', got 'CPU:0'"]),
        ("devices=D", ["with devices = ['CPU:1', 'CPU:0']: for the device of MatMul"]),
    ],
    ids=["addition-unscoped", "matmul-unscoped", "setup-names-not-devices"],
)
def test_task3_sees_a_missing_scope_on_the_default_device(tf_worker, switches, fragments) -> None:
    """An op outside any device scope runs on the default device: the checker also runs the
    answer with the devices reversed, so that the addition's device is not the default one."""
    outcome = tf_worker.run(place(f"answers.make_place({switches})"))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message


def test_task3_names_soft_placement_that_replaced_a_gpu(tf_worker) -> None:
    outcome = tf_worker.run(place("answers.place_matmul_on_gpu1"))
    assert outcome.status == "wrong"
    assert "for the device of MatMul: expected 'CPU:1', got 'CPU:0'" in outcome.message
    assert "your code asks for '/gpu:1', which this process does not have" in outcome.message
    assert "soft placement (on by default) quietly ran the op on CPU:0" in outcome.message
    assert "a device name of its own instead of taking it from `devices`" in outcome.message


def test_task3_names_soft_placement_in_an_f_string(tf_worker) -> None:
    outcome = tf_worker.run(place("answers.place_on_gpus_by_f_string"))
    assert outcome.status == "wrong"
    assert "which this process does not have" in outcome.message


def test_task3_a_gpu_moved_to_the_right_device_by_luck_is_seen(tf_worker) -> None:
    """'/gpu:0' on a CPU machine lands on CPU:0 by soft placement: right for the lab's
    devices, wrong once the devices are reversed, and the message says why."""
    outcome = tf_worker.run(place("answers.place_add_on_gpu0"))
    assert outcome.status == "wrong", outcome.message
    assert "with devices = ['CPU:1', 'CPU:0']: for the device of the addition" in outcome.message
    assert "your code asks for '/gpu:0', which this process does not have" in outcome.message


def test_task3_right_by_luck_with_one_device_says_so(tf_worker) -> None:
    outcome = tf_worker.run(place("answers.place_add_on_gpu0", "D[:1]"))
    assert outcome.status == "correct", outcome.message
    assert "your code also asks for '/gpu:0', which this process does not have" in (outcome.message)


@pytest.mark.parametrize(
    "answer, fragments",
    [
        (
            "value_only",
            [
                "for the result: your values tensor of shape (2, 2)",
                "are not the right ones",
                "Your result is the product of a and b without the bias",
            ],
        ),
        ("not_a_pair", ["expected a pair (result, placement"]),
        ("no_table", ["expected the placement"]),
        ("no_devices_argument", ["raised TypeError"]),
    ],
    ids=["value", "not-a-pair", "no-table", "no-devices-argument"],
)
def test_task3_wrong(tf_worker, answer, fragments) -> None:
    outcome = tf_worker.run(place(f"answers.{answer}"))
    assert outcome.status == "wrong"
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message
    if answer == "value_only":
        assert "22.5" not in outcome.message  # the right result is never shown


def test_task3_ops_outside_the_capture_block(tf_worker) -> None:
    outcome = tf_worker.run(place("answers.ops_outside_the_capture"))
    assert outcome.status == "wrong"
    assert "your placement table has no MatMul" in outcome.message


def test_task3_missing(tf_worker) -> None:
    assert tf_worker.run(place("stub")).status == "not attempted"


def test_task3_with_one_device_both_ops_belong_on_it(tf_worker) -> None:
    """NUM_DEVICES = 1: the last device is the first, so both ops go there."""
    one = tf_worker.run(place("answers.make_place(matmul=0)", "D[:1]"))
    assert one.status == "correct", one.message
    assert one.message == "Task 3: correct. MatMul ran on CPU:0 and the addition on CPU:0."
    moved = tf_worker.run(place("answers.make_place(matmul=1, devices=D)", "D[:1]"))
    assert moved.status == "wrong"
    assert "for the device of MatMul: expected 'CPU:0', got 'CPU:1'" in moved.message


# --------------------------------------------------------------------------- task 4


COLLEAGUE_LOG = "answers.colleague_log(setup.names)"


def task4_case(given: str, log: str = COLLEAGUE_LOG, setup: str = "setup") -> str:
    """A case: task 4 checks ``given`` with the placement ``log`` of the colleague's code,
    captured live as the lab captures it."""
    return f"verdict = checks.lab01.task4({given}, {log}, {setup})\n"


def diagnose(answer, log: str = COLLEAGUE_LOG, setup: str = "setup") -> str:
    """A case: task 4 checks an answer that returns ``answer``."""
    return task4_case(f"returning({answer!r})", log, setup)


def test_task4_right(tf_worker) -> None:
    outcome = tf_worker.run(diagnose(("AddV2", "missing-device")))
    assert outcome.status == "correct", outcome.message
    assert outcome.message == (
        "Task 4: correct. AddV2 asked for '/gpu:12' and ran on CPU:0: the device its code "
        "asks for does not exist in this process, so soft placement ran it on one that does."
    )
    again = tf_worker.run(diagnose(["AddV2", " Missing-Device "]))
    assert again.message == outcome.message


def test_task4_reads_the_log_captured_live(tf_worker) -> None:
    """The verdict comes from the log the lab captured: with one device (NUM_DEVICES = 1)
    the same answer holds, and a log that is not colleague_forward's is refused."""
    right = ("AddV2", "missing-device")
    one = tf_worker.run(diagnose(right, log="answers.colleague_log(D[:1])", setup="D[:1]"))
    assert one.status == "correct", one.message
    other = tf_worker.run(diagnose(right, log="answers.colleague_log(D[::-1])"))
    assert other.status == "wrong", other.message
    assert (
        "shows MatMul on CPU:0, although its code asks for CPU:1, which exists: it is not the "
        "log of colleague_forward as the lab runs it" in other.message
    )


@pytest.mark.parametrize(
    "answer, fragments",
    [
        (
            ("Relu", "no-scope"),
            [
                "Relu ran on CPU:0, but its code asks for no device, so no device it asked "
                "for was refused",
                "Compare, op by op, the device in the log with the device its `tf.device`",
            ],
        ),
        (("MatMul", "missing-device"), ["MatMul ran on CPU:1, the device its code asks for"]),
        (("Sum", "no-kernel"), ["Sum ran on CPU:0, the device its code asks for"]),
        (("Conv2D", "missing-device"), ["colleague_forward runs no 'Conv2D'"]),
        (("addv2", "no-kernel"), ["runs no 'addv2': op types are case-sensitive"]),
        (
            ("AddV2", "no-kernel"),
            [
                "AddV2 is the op that did not run where its code asks, but 'no-kernel' is not why",
                "The device this op asks for does not fail for lack of a kernel here",
            ],
        ),
        (("AddV2", "no-scope"), ["read the `with tf.device(...)` around it"]),
        (("AddV2", "follows-input"), ["so why could it not?"]),
    ],
    ids=[
        "no-scope-op",
        "matmul",
        "sum",
        "unknown-op",
        "op-type-case",
        "no-kernel",
        "no-scope",
        "follows-input",
    ],
)
def test_task4_wrong(tf_worker, answer, fragments) -> None:
    outcome = tf_worker.run(diagnose(answer))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment in outcome.message, outcome.message
    if answer[0] in ("Relu", "MatMul", "Sum"):
        assert "AddV2" not in outcome.message  # the op to blame is not revealed


@pytest.mark.parametrize(
    "answer, log, fragment",
    [
        ("AddV2", None, "expected a pair (op_type, key of REASONS)"),
        (("AddV2", 3), None, "expected two strings"),
        (("AddV2", "soft"), None, "'soft' is not one of the reasons"),
        (("AddV2", "missing-device"), "None", "expected the placement table"),
        (
            ("AddV2", "missing-device"),
            "placement.parse('')",
            "has no MatMul, so it is not the log of colleague_forward",
        ),
    ],
    ids=["single", "reason-type", "reason-key", "no-log", "empty-log"],
)
def test_task4_malformed(tf_worker, answer, log, fragment) -> None:
    outcome = tf_worker.run(diagnose(answer) if log is None else diagnose(answer, log=log))
    assert outcome.status == "wrong", outcome.message
    assert fragment in outcome.message, outcome.message


def test_task4_missing(tf_worker) -> None:
    outcome = tf_worker.run(task4_case("stub"))
    assert outcome.status == "not attempted", outcome.message
    assert tf_worker.run(task4_case("None")).status == "not attempted"


def test_task4_colleague_code_is_shown_as_it_runs() -> None:
    source = lab01.colleague_source()
    assert source.startswith("def colleague_forward(x, w, b, devices):")
    assert f'tf.device("{lab01.COLLEAGUE_DEVICE}")' in source
    assert set(lab01._asked(["/device:CPU:0", "/device:CPU:1"])) == {
        "MatMul",
        "AddV2",
        "Relu",
        "Sum",
    }


# --------------------------------------------------------------------------- task 5


def soft(answer) -> str:
    """A case: task 5 checks an answer that returns ``answer``; ``out`` records the soft
    placement setting afterwards and the device the checker asked for."""
    return (
        f"verdict = checks.lab01.task5(returning({answer!r}), setup)\n"
        'out["soft_placement_after"] = tf.config.get_soft_device_placement()\n'
        'out["missing_device"] = checks.lab01.missing_device(setup)\n'
    )


def test_task5_right_and_the_setting_is_restored(tf_worker) -> None:
    outcome = tf_worker.run(soft({True: False, False: True}))
    assert outcome.status == "correct", outcome.message
    assert "raised InvalidArgumentError" in outcome.message and "ran on CPU:0" in outcome.message
    assert outcome.out == {"soft_placement_after": True, "missing_device": "/device:CPU:2"}


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ({True: True, False: True}, "your prediction for soft placement on is not what"),
        ({"on": False, "off": True}, "keys True and False"),
        ({True: "runs", False: "raises"}, "expected True (it raises) or False"),
    ],
)
def test_task5_wrong(tf_worker, answer, fragment) -> None:
    outcome = tf_worker.run(soft(answer))
    assert outcome.status == "wrong" and fragment in outcome.message, outcome.message
    assert outcome.out["soft_placement_after"] is True
    # What happened is the answer: neither the outcome nor the device it ran on is told.
    assert "What happened" not in outcome.message and "ran on" not in outcome.message


def test_task5_missing(tf_worker) -> None:
    outcome = tf_worker.run("verdict = checks.lab01.task5(None, setup)")
    assert outcome.status == "not attempted"


def test_missing_device_is_one_past_the_last() -> None:
    assert lab01.missing_device(["/device:GPU:0", "/device:GPU:1"]) == "/device:GPU:2"
