"""Tests of dtf.checks.lab03: right, wrong and missing answers for every task.

Tasks 1 and 2 build Keras layers on devices, so their cases run in a TensorFlow process set
up like the lab (2 logical CPUs, placement logging on), one case at a time, each with its own
answer (tests/checks_worker.py). Task 3 needs no TensorFlow in this process: its checker runs
the script in a fresh child process. Its wrong-answer cases compare with one real
measurement (a module fixture, itself checked against TensorFlow's behaviour), so they need
no child each. Every test stands alone.
"""

from __future__ import annotations

import os

import pytest

from dtf import checks
from dtf.checks import lab03
from tests.checks_worker import worker_fixture

tf_worker = worker_fixture(num_devices=2)

STUB = "def stub(*args):\n    raise NotImplementedError\n"


pytestmark = pytest.mark.usefixtures("fresh_scorecard")  # conftest: an empty scorecard


# --------------------------------------------------------------------------- helpers


def test_device_pair_and_layout_for_every_device_count() -> None:
    names = [f"/device:CPU:{i}" for i in range(8)]
    assert lab03.device_pair(names[:1]) == [names[0], names[0]]
    for n in range(2, 9):
        assert lab03.device_pair(names[:n]) == names[:2]
    with pytest.raises(ValueError):
        lab03.device_pair([])
    expected = {
        1: [0, 0, 0, 0],
        2: [0, 0, 1, 1],
        3: [0, 0, 1, 2],
        4: [0, 1, 2, 3],
        8: [0, 1, 2, 3],
    }
    for n, layout in expected.items():
        assert lab03.layout(names[:n]) == [names[k] for k in layout], n


# --------------------------------------------------------------------------- task 1

#: A ``place_model`` with switches for the usual mistakes. ``build``: "first-call" (built by
#: the first call, in the device scope of that call), "devices" (built beforehand in the
#: right device scopes), "nowhere" (built beforehand, in no device scope), "swapped".
#: ``run``: "devices", "default" (called in no device scope), "reversed".
PLACE = """
import contextlib
import keras


def make_place(build="first-call", run="devices", capture=True, shift=0.0, model=False):
    def place(x, devs):
        a, b = keras.layers.Dense(32, activation="relu"), keras.layers.Dense(10)
        if build != "first-call":
            scopes = {"devices": devs, "swapped": devs[::-1], "nowhere": [None, None]}[build]
            for layer, scope, width in zip((a, b), scopes, (64, 32)):
                with tf.device(scope) if scope else contextlib.nullcontext():
                    layer.build((None, width))
        where = {"devices": devs, "reversed": devs[::-1], "default": [None, None]}[run]
        block = placement.capture() if capture else contextlib.nullcontext()
        with block as log:
            with tf.device(where[0]) if where[0] else contextlib.nullcontext():
                h = a(x)
            with tf.device(where[1]) if where[1] else contextlib.nullcontext():
                y = b(h)
        if not capture:
            with placement.capture() as log:  # a block that saw none of the ops
                pass
        return (keras.Sequential([a, b]) if model else [a, b]), y + shift, log.table

    return place
"""


def place(setup: str = "setup", **switches) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in switches.items())
    return PLACE + f"verdict = checks.lab03.task1(make_place({args}), {setup})\n"


@pytest.mark.slow
def test_task1_right(tf_worker) -> None:
    first = tf_worker.run(place())
    assert first.status == "correct", first.message
    assert first.message == (
        "Task 1: correct. Layer 0's variables live on CPU:0 and layer 1's on CPU:1; the "
        "placement log shows their MatMuls on CPU:0, CPU:1."
    )
    assert tf_worker.run(place()).message == first.message  # again: the same verdict


@pytest.mark.parametrize(
    "switches", [{"build": "devices"}, {"model": True}], ids=["built-first", "sequential"]
)
def test_task1_other_right_answers(tf_worker, switches) -> None:
    outcome = tf_worker.run(place(**switches))
    assert outcome.status == "correct", outcome.message


def test_task1_hand_made_layers(tf_worker) -> None:
    outcome = tf_worker.run(
        """
class Layer(tf.Module):
    def __init__(self, n_in, n_out, relu):
        super().__init__()
        self.w = tf.Variable(tf.random.normal((n_in, n_out), seed=1))
        self.b = tf.Variable(tf.zeros(n_out))
        self.relu = relu

    def __call__(self, x):
        y = x @ self.w + self.b
        return tf.nn.relu(y) if self.relu else y


def place(x, devs):
    layers = []
    for d, (n_in, n_out, relu) in zip(devs, [(64, 32, True), (32, 10, False)]):
        with tf.device(d):
            layers.append(Layer(n_in, n_out, relu))
    with placement.capture() as log:
        h = x
        for d, layer in zip(devs, layers):
            with tf.device(d):
                h = layer(h)
    return layers, h, log.table


verdict = checks.lab03.task1(place, setup)
"""
    )
    assert outcome.status == "correct", outcome.message
    assert "layer 1's on CPU:1" in outcome.message


def test_task1_one_device_uses_it_twice(tf_worker) -> None:
    outcome = tf_worker.run(place(setup="D[:1]"))
    assert outcome.status == "correct", outcome.message
    assert "Both layers' variables and MatMuls are on CPU:0, the only device" in outcome.message


@pytest.mark.parametrize(
    "switches, fragments",
    [
        (
            {"build": "nowhere"},
            [
                "for the device of layer 1's kernel: expected 'CPU:1', got 'CPU:0'",
                "on the device that was in scope when it was created",
            ],
        ),
        (
            {"build": "swapped"},
            ["for the device of layer 0's kernel: expected 'CPU:0', got 'CPU:1'"],
        ),
        (
            {"build": "devices", "run": "default"},
            [
                "the MatMuls ran on CPU:0 only, although layer 1's weights live on CPU:1",
                "a layer runs where it is called, not where its weights live",
            ],
        ),
        (
            {"build": "devices", "run": "reversed"},
            ["for the devices of the MatMuls, in order: expected 'CPU:0, CPU:1', got 'CPU:1, "],
        ),
        ({"capture": False}, ["your placement table has no MatMul", "placement.capture()"]),
        ({"shift": 1.0}, ["for the logits: expected", "layer 1 applied to the output of layer 0"]),
    ],
    ids=["built-outside", "built-swapped", "run-outside", "run-reversed", "no-log", "logits"],
)
def test_task1_wrong(tf_worker, switches, fragments) -> None:
    outcome = tf_worker.run(place(**switches))
    assert outcome.status == "wrong", outcome.message
    for fragment in fragments:
        assert fragment.lower() in outcome.message.lower(), outcome.message


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ("lambda x, devs: (None, x)", "expected a triple (layers, logits, placement table)"),
        ("lambda x, devs: ([1, 2, 3], x, None)", "expected the 2 layers"),
        ("lambda x, devs: ([1, 2], x, None)", "layer 0 is not a Keras layer"),
        ("[]", "expected a function"),
    ],
)
def test_task1_malformed(tf_worker, answer, fragment) -> None:
    outcome = tf_worker.run(f"verdict = checks.lab03.task1({answer}, setup)")
    assert outcome.status == "wrong" and fragment in outcome.message, outcome.message


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task1_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(STUB + f"verdict = checks.lab03.task1({answer}, setup)")
    assert outcome.status == "not attempted", outcome.message


# --------------------------------------------------------------------------- task 2

RIGHT_BYTES = """
def right(sizes, devs, key=str, value=int):
    held = {}
    for n_in, n_out, d in zip(sizes[:-1], sizes[1:], devs):
        held[key(d)] = held.get(key(d), 0) + value(4 * (n_in * n_out + n_out))
    return held
"""


def bytes_case(answer: str) -> str:
    return RIGHT_BYTES + f"verdict = checks.lab03.task2({answer}, setup)\n"


def test_task2_right(tf_worker) -> None:
    first = tf_worker.run(bytes_case("right"))
    assert first.status == "correct", first.message
    assert first.message == (
        "Task 2: correct. 4 layouts match the variables TensorFlow creates; on this machine's "
        "layout the largest share is 329,728 bytes on CPU:0, of 603,176 for the whole model."
    )
    assert tf_worker.run(bytes_case("right")).message == first.message


@pytest.mark.parametrize(
    "answer",
    [
        "lambda s, d: right(s, d, key=lambda n: n.split('device:')[-1])",  # short names
        "lambda s, d: right(s, d, value=np.int64)",
        "lambda s, d: right(s, d, value=float)",
        "lambda s, d: {**right(s, d), '/device:CPU:7': 0}",  # a device that holds nothing
    ],
    ids=["short-names", "numpy-ints", "whole-floats", "zero-entry"],
)
def test_task2_other_right_answers(tf_worker, answer) -> None:
    outcome = tf_worker.run(bytes_case(answer))
    assert outcome.status == "correct", outcome.message


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ("lambda s, d: {k: v // 4 for k, v in right(s, d).items()}", "numbers of parameters"),
        ("_no_bias", "also has a bias, one number per output unit"),
        ("_no_bias_params", "count the biases too"),
        ("_bias_per_input", "one number per *output* unit"),
        (
            "lambda s, d: {k: sum(right(s, d).values()) for k in d}",
            "the whole model on every device, as in data parallelism",
        ),
        ("lambda s, d: {d[0]: sum(right(s, d).values())}", "added to the entry of layer_devices"),
        ("_overwrites", "added to the entry of layer_devices"),
    ],
    ids=[
        "parameters",
        "no-bias",
        "no-bias-parameters",
        "bias-per-input",
        "everywhere",
        "one-device",
        "overwrites",
    ],
)
def test_task2_wrong(tf_worker, answer, fragment) -> None:
    helpers = """
def _no_bias(s, d):
    held = {}
    for i, o, dd in zip(s[:-1], s[1:], d):
        held[dd] = held.get(dd, 0) + 4 * i * o
    return held


def _no_bias_params(s, d):
    return {k: v // 4 for k, v in _no_bias(s, d).items()}


def _bias_per_input(s, d):
    held = {}
    for i, o, dd in zip(s[:-1], s[1:], d):
        held[dd] = held.get(dd, 0) + 4 * (i * o + i)
    return held


def _overwrites(s, d):
    return {dd: 4 * (i * o + o) for i, o, dd in zip(s[:-1], s[1:], d)}
"""
    outcome = tf_worker.run(
        RIGHT_BYTES + helpers + f"verdict = checks.lab03.task2({answer}, setup)"
    )
    assert outcome.status == "wrong", outcome.message
    assert "expected {'CPU:0': 329728, 'CPU:1': 273448}" in outcome.message, outcome.message
    assert fragment.lower() in outcome.message.lower(), outcome.message


def test_task2_checks_the_other_layouts_too(tf_worker) -> None:
    # Right for this machine's layout only: the layout of a 4-GPU machine gives it away.
    outcome = tf_worker.run(
        bytes_case("lambda s, d: right(s, d) if s == checks.lab03.LAYER_SIZES else {}")
    )
    assert outcome.status == "wrong", outcome.message
    assert "for layers 784→512→512→10 on GPU:0, GPU:1, GPU:0" in outcome.message
    assert "expected {'GPU:0': 1628200, 'GPU:1': 1050624}" in outcome.message


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ("lambda s, d: [1, 2]", "expected a dict {device: bytes}"),
        ("lambda s, d: {k: v + 0.5 for k, v in right(s, d).items()}", "a whole number of bytes"),
        ("lambda s, d: {k: True for k in d}", "a whole number of bytes"),
    ],
)
def test_task2_malformed(tf_worker, answer, fragment) -> None:
    outcome = tf_worker.run(bytes_case(answer))
    assert outcome.status == "wrong" and fragment in outcome.message, outcome.message


@pytest.mark.parametrize("answer", ["stub", "None"])
def test_task2_not_attempted(tf_worker, answer) -> None:
    outcome = tf_worker.run(STUB + f"verdict = checks.lab03.task2({answer}, setup)")
    assert outcome.status == "not attempted", outcome.message


def test_task2_counts_real_variables_on_their_devices(tf_worker) -> None:
    outcome = tf_worker.run(
        "out['here'] = checks.lab03._measured_bytes((5, 3, 2), D, None)\n"
        "out['there'] = checks.lab03._measured_bytes((5, 3, 2), ['GPU:5', 'GPU:5'], D[0])\n"
    )
    assert outcome.out == {"here": {"CPU:0": 72, "CPU:1": 32}, "there": {"GPU:5": 104}}


# --------------------------------------------------------------------------- task 3

#: What TensorFlow 2.21 does with the script, and why: the answer of the solution.
SOLUTION = {
    1: ("ValueError", "gpu-only"),
    2: ("ValueError", "gpu-only"),
    3: None,
    4: ("ValueError", "split"),
    5: None,
    6: None,
    7: ("RuntimeError", "initialised"),
    8: ("ValueError", "no-stats"),
}


@pytest.fixture(scope="module")
def measured():
    """One real run of the script in a fresh TensorFlow process."""
    return lab03.measure()


@pytest.mark.slow
def test_measurement_matches_tensorflow_and_the_reasons(measured) -> None:
    kinds = {n: None if o is None else o[0] for n, o in measured.items()}
    assert kinds == {n: None if p is None else p[0] for n, p in SOLUTION.items()}
    for number, outcome in measured.items():
        if outcome is not None:
            assert lab03.reason_of(outcome[1]) == SOLUTION[number][1], outcome
    assert "Virtual devices cannot be modified after being initialized" in measured[7][1]


@pytest.mark.slow
def test_measure_really_runs_the_calls_in_a_fresh_cpu_process(monkeypatch) -> None:
    monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", "true")  # the child must not inherit it
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    outcomes = lab03.measure(
        {
            1: f"import os\nif os.getpid() == {os.getpid()}: raise RuntimeError('same process')",
            2: "import os\nassert os.environ['CUDA_VISIBLE_DEVICES'] == '', 'GPUs visible'",
            3: "tf.config.set_logical_device_configuration(cpu, [LDC()] * 3)",  # not initialised
            4: "assert len(tf.config.list_logical_devices('CPU')) == 3",
            5: "raise KeyError('from call 5')",
            6: "tf.config.experimental.get_memory_info('CPU:0')",
        }
    )
    assert outcomes == {
        1: None,
        2: None,
        3: None,
        4: None,
        5: ("KeyError", "'from call 5'"),
        6: ("ValueError", "Allocator stats not available for device 'CPU:0'"),
    }


def test_measure_gives_up_on_a_child_that_hangs(monkeypatch) -> None:
    monkeypatch.setattr(lab03, "CHILD_TIMEOUT_S", 1.0)
    with pytest.raises(checks.Wrong, match="did not finish in 1 s"):
        lab03.measure({1: "import time\ntime.sleep(60)"})


@pytest.mark.slow
def test_measure_reports_a_child_that_fails() -> None:
    with pytest.raises(checks.Wrong, match=r"failed \(exit status 3\)"):
        lab03.measure({1: "import os\nos._exit(3)"})


@pytest.mark.slow
def test_task3_right_against_a_real_process() -> None:
    verdict = lab03.task3(lambda: SOLUTION)
    assert verdict.message == (
        "Task 3: correct. All 8 predictions match a fresh TensorFlow process: calls 1, 2, 4, "
        "7 and 8 raised, the others did not."
    )


def test_task3_a_hanging_process_is_reported_not_raised(monkeypatch) -> None:
    monkeypatch.setattr(lab03, "CHILD_TIMEOUT_S", 1.0)
    verdict = lab03.task3(SOLUTION)
    assert verdict.status == checks.WRONG
    assert "did not finish in 1 s, so the predictions could not be checked" in verdict.message


@pytest.fixture
def replay(monkeypatch, measured):
    """task3 compares with the real measurement, without starting a child each time."""
    monkeypatch.setattr(lab03, "measure", lambda calls=None: dict(measured))
    return measured


def test_task3_other_right_answers(replay) -> None:
    classes = {
        n: None if p is None else ({"ValueError": ValueError}.get(p[0], RuntimeError), p[1].upper())
        for n, p in SOLUTION.items()
    }
    assert lab03.task3(classes).correct
    assert lab03.task3({str(n): p for n, p in SOLUTION.items()}).correct


def test_task3_compares_with_the_measurement(monkeypatch, measured) -> None:
    changed = {**measured, 6: ("RuntimeError", "Virtual devices cannot be modified after x")}
    monkeypatch.setattr(lab03, "measure", lambda calls=None: changed)
    verdict = lab03.task3(SOLUTION)
    assert verdict.status == checks.WRONG
    assert "for call 6" in verdict.message and "got None" in verdict.message


def test_task3_an_unknown_message_compares_the_type_only(monkeypatch, measured) -> None:
    changed = {**measured, 8: ("ValueError", "a message of another TensorFlow version")}
    monkeypatch.setattr(lab03, "measure", lambda calls=None: changed)
    verdict = lab03.task3(SOLUTION)
    assert verdict.correct, verdict.message
    assert "message for call(s) 8 is new to this checker" in verdict.message
    assert lab03.task3({**SOLUTION, 8: None}).status == checks.WRONG


@pytest.mark.parametrize(
    "change, fragments",
    [
        (
            {6: ("RuntimeError", "initialised")},
            [
                "for call 6",
                "expected None, got ('RuntimeError', 'initialised')",
                "What happened: it raised nothing",
                "the split already in place changes nothing",
            ],
        ),
        (
            {5: ("RuntimeError", "initialised")},
            ["for call 5", "it initialises TensorFlow"],
        ),
        (
            {1: None},
            [
                "for call 1",
                "expected ('ValueError', 'gpu-only'), got None",
                "it raised ValueError: Cannot set memory growth on non-GPU",
            ],
        ),
        (
            {4: ("ValueError", "gpu-only")},
            [
                "for call 4",
                "the exception type is right, the reason is not: expected 'split', got 'gpu-only'",
                "each logical device has a fixed memory limit",
            ],
        ),
        (
            {7: ("ValueError", "initialised")},
            [
                "expected ('RuntimeError', 'initialised'), got ('ValueError', 'initialised')",
                "call 5 initialised TensorFlow",
            ],
        ),
        (
            {8: ("ValueError", "gpu-only")},
            ["expected 'no-stats', got 'gpu-only'", "TF_CPU_ALLOCATOR_USE_BFC=true"],
        ),
    ],
    ids=["same-split", "listing", "growth-cpu", "reason", "type", "stats"],
)
def test_task3_wrong(replay, change, fragments) -> None:
    verdict = lab03.task3({**SOLUTION, **change})
    assert verdict.status == checks.WRONG
    for fragment in fragments:
        assert fragment in verdict.message, verdict.message


@pytest.mark.parametrize(
    "answer, fragment",
    [
        ([1, 2], "expected a dict {call number: None or (exception type, reason)}"),
        ({n: p for n, p in SOLUTION.items() if n != 8}, "there is no prediction for call 8"),
        ({**SOLUTION, 9: None}, "there is no call 9"),
        ({**SOLUTION, "x": None}, "'x' is not a call number"),
        ({**SOLUTION, 2: "ValueError"}, "for call 2: expected None or a pair"),
        ({**SOLUTION, 2: ("ValueError", "oom")}, "'oom' is not one of the reasons"),
        ({**SOLUTION, 2: (3, "gpu-only")}, "expected (exception type, reason)"),
    ],
    ids=["list", "missing", "extra", "key", "single", "reason", "type"],
)
def test_task3_malformed(replay, answer, fragment) -> None:
    verdict = lab03.task3(answer)
    assert verdict.status == checks.WRONG
    assert fragment in verdict.message, verdict.message


def stub():
    raise NotImplementedError


@pytest.mark.parametrize("answer", [stub, None, ...])
def test_task3_not_attempted_starts_no_process(monkeypatch, answer) -> None:
    def no_child(calls=None):
        raise AssertionError("no child process for an answer that is not there")

    monkeypatch.setattr(lab03, "measure", no_child)
    assert lab03.task3(answer).status == checks.NOT_ATTEMPTED


def test_script_shows_every_call() -> None:
    text = lab03.script()
    assert text.startswith(lab03.PREAMBLE.rstrip("\n"))
    for number, code in lab03.CALLS.items():
        assert f"{code}" in text and f"# call {number}" in text
    assert set(lab03.CALL_HINTS) == set(lab03.CALLS)
    assert {reason for _, reason in lab03.MESSAGE_REASONS} == set(lab03.REASONS)
