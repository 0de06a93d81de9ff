"""Tests for ``dtf.parallel``, ``dtf.lessons.model_parallel`` and ``dtf.lessons.pipeline``
(generated from the cells of notebooks 04 and 04b): layer groups, the GPipe schedule and its
bubble, byte counts
against hand-computed values, stages whose variables and backward passes live on their own
devices, and a pipeline that computes the model-parallel (and data-parallel) gradients.

Shapes, schedules and argument checks run in this process without TensorFlow. Everything that
runs TensorFlow (``dtf.lessons.pipeline`` imports it) runs in one fresh interpreter with three
logical CPUs (TensorFlow fixes its device layout once per process), which checks several things and
prints one JSON line.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dtf import arguments, parallel
from tests.helpers import last_json, run_script

# --------------------------------------------------------------------------------------------
# Shapes and layouts: no TensorFlow


def test_count_parameters_by_hand():
    # 4 -> 3: 4*3 + 3 = 15; 3 -> 2: 3*2 + 2 = 8
    assert parallel.count_parameters((4, 3, 2)) == 23
    # the notebook's default network: 64 -> 256 -> 256 -> 256 -> 10
    assert parallel.count_parameters((64, 256, 256, 256, 10)) == (
        64 * 256 + 256 + 2 * (256 * 256 + 256) + 256 * 10 + 10
    )


@pytest.mark.parametrize("sizes", [(), (4,), (4, 0), (4, 2.0), (4, True)])
def test_count_parameters_rejects_bad_sizes(sizes):
    with pytest.raises((TypeError, ValueError), match="layer"):
        parallel.count_parameters(sizes)


@pytest.mark.parametrize(
    "num_layers, num_stages, expected",
    [
        (4, 1, [[0, 1, 2, 3]]),
        (4, 2, [[0, 1], [2, 3]]),
        (4, 3, [[0, 1], [2], [3]]),
        (4, 4, [[0], [1], [2], [3]]),
        (5, 3, [[0, 1], [2, 3], [4]]),
    ],
)
def test_layer_groups_are_contiguous_and_balanced(num_layers, num_stages, expected):
    assert [list(g) for g in parallel.layer_groups(num_layers, num_stages)] == expected


def test_layer_groups_refuse_more_stages_than_layers():
    with pytest.raises(ValueError, match="at most 2 stages"):
        parallel.layer_groups(2, 3)
    with pytest.raises(TypeError, match="num_stages"):
        parallel.layer_groups(4, 2.0)
    with pytest.raises(ValueError, match="num_layers"):
        parallel.layer_groups(0, 1)


@pytest.mark.parametrize(
    "k, m, expected", [(1, 1, 0.0), (1, 8, 0.0), (2, 1, 0.5), (4, 1, 0.75), (4, 4, 3 / 7)]
)
def test_bubble_fraction_by_hand(k, m, expected):
    assert parallel.bubble_fraction(k, m) == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("k, m", [(0, 1), (1, 0), (True, 2), (2, 1.5)])
def test_bubble_fraction_rejects_bad_arguments(k, m):
    with pytest.raises((TypeError, ValueError)):
        parallel.bubble_fraction(k, m)


def test_gpipe_schedule_two_stages_three_micro_batches_by_hand():
    rows = [
        (r["tick"], r["stage"], r["phase"], r["micro_batch"]) for r in parallel.gpipe_schedule(2, 3)
    ]
    assert rows == [
        (0, 0, "F", 0),
        (1, 0, "F", 1),
        (1, 1, "F", 0),
        (2, 0, "F", 2),
        (2, 1, "F", 1),
        (3, 1, "F", 2),
        (4, 1, "B", 2),
        (5, 0, "B", 2),
        (5, 1, "B", 1),
        (6, 0, "B", 1),
        (6, 1, "B", 0),
        (7, 0, "B", 0),
    ]
    assert parallel.schedule_grid(2, 3) == [
        ["F0", "F1", "F2", ".", ".", "B2", "B1", "B0"],
        [".", "F0", "F1", "F2", "B2", "B1", "B0", "."],
    ]


@pytest.mark.parametrize("k, m", list(itertools.product([1, 2, 3, 4], [1, 2, 4, 5])))
def test_gpipe_schedule_respects_dependencies_and_counts_the_bubble(k, m):
    rows = parallel.gpipe_schedule(k, m)
    when = {(r["stage"], r["phase"], r["micro_batch"]): r["tick"] for r in rows}
    assert len(when) == len(rows) == 2 * k * m  # each piece of work exactly once
    busy = {(r["stage"], r["tick"]) for r in rows}
    assert len(busy) == len(rows)  # a stage does one thing per tick
    for s, i in itertools.product(range(k), range(m)):
        if s > 0:  # forward needs the previous stage's output
            assert when[(s, "F", i)] > when[(s - 1, "F", i)]
        if s < k - 1:  # backward needs the next stage's input gradient
            assert when[(s, "B", i)] > when[(s + 1, "B", i)]
        assert when[(s, "B", i)] > when[(k - 1, "F", i)]  # after the loss exists
    ticks = 2 * (m + k - 1)
    assert max(when.values()) == ticks - 1
    assert 1 - len(rows) / (k * ticks) == pytest.approx(parallel.bubble_fraction(k, m))


def test_gradient_bytes_by_hand():
    # 3 replicas, 23 parameters: 2 replicas send 23 floats each, and get 23 back: 4 * 23 * 4
    assert parallel.gradient_bytes_per_step(23, 3) == 368
    assert parallel.gradient_bytes_per_step(23, 1) == 0
    with pytest.raises(ValueError, match="num_replicas"):
        parallel.gradient_bytes_per_step(23, 0)


def test_initial_weights_are_seeded_glorot():
    import numpy as np

    a, b = parallel.initial_weights((4, 3, 2), seed=1), parallel.initial_weights((4, 3, 2), 1)
    c = parallel.initial_weights((4, 3, 2), seed=2)
    assert [w.shape for pair in a for w in pair] == [(4, 3), (3,), (3, 2), (2,)]
    pairs = zip(itertools.chain(*a), itertools.chain(*b), strict=True)
    assert all(np.array_equal(x, y) for x, y in pairs)
    assert not np.array_equal(a[0][0], c[0][0])
    assert np.all(np.abs(a[0][0]) <= np.sqrt(6 / 7)) and not a[0][1].any()


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: parallel.build_stages((4,), ["/device:CPU:0"]), "layer_sizes"),
        (lambda: parallel.build_stages((4, 2), []), "devices is empty"),
        (lambda: parallel.build_stages((4, 3, 2), ["/cpu:0"], num_stages=3), "at most 2"),
        (lambda: parallel.build_replicas((4, 2), []), "devices is empty"),
        (lambda: arguments.check_stages([]), "stages is empty: build them with build_stages"),
        (lambda: arguments.check_stages((), "replicas"), "replicas is empty: .*build_replicas"),
        (lambda: arguments.check_micro_batches(0), "micro_batches must be at least 1"),
        (lambda: arguments.check_micro_batches(2.0), "micro_batches must be a whole number"),
        (lambda: arguments.check_learning_rate(True), "learning_rate must be a number"),
        (lambda: arguments.check_learning_rate("0.1"), "learning_rate must be a number"),
        (lambda: arguments.check_learning_rate(-0.1), "learning_rate must be a finite number"),
        (lambda: arguments.check_learning_rate(0), "learning_rate must be a finite number"),
        (lambda: arguments.check_learning_rate(float("nan")), "learning_rate"),
        (lambda: arguments.check_learning_rate(float("inf")), "learning_rate"),
        (lambda: arguments.check_equal_split(12, 10, 2), "x has 12 examples but y has 10"),
        (lambda: arguments.check_equal_split(12, 12, 0), "micro_batches"),
    ],
)
def test_bad_arguments_fail_before_tensorflow(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call()


def test_the_argument_checks_pass_good_values_through():
    assert arguments.check_stages(iter([1, 2])) == [1, 2]
    assert arguments.check_learning_rate(1) == 1.0
    assert type(arguments.check_learning_rate(1)) is float
    assert arguments.check_micro_batches(np.int64(4)) == 4
    for examples, labels in [(12, 12), (None, None), (None, 12), (12, None)]:
        assert arguments.check_equal_split(examples, labels, 4) is None


def test_an_unequal_split_is_refused_with_the_counts_that_work():
    with pytest.raises(ValueError) as info:
        arguments.check_equal_split(12, 12, 5)
    msg = str(info.value)
    assert "12 examples" in msg and "5 equal micro-batches" in msg and "12 % 5 = 2" in msg
    assert "[1, 2, 3, 4, 6, 12]" in msg


def test_import_does_not_import_tensorflow():
    """``import dtf.parallel`` leaves TensorFlow and the generated lessons alone: it sits
    below them (the layers contract, tests/test_layers.py) and re-exports none of them."""
    proc = run_script(
        """
        import sys
        import dtf.parallel
        loaded = ("tensorflow", "keras", "dtf.lessons.pipeline", "dtf.lessons.model_parallel")
        print(*(name in sys.modules for name in loaded))
        print(hasattr(dtf.parallel, "make_pipeline_step"), hasattr(dtf.parallel, "PIPELINE_NAMES"))
        """
    )
    assert proc.stdout.splitlines() == ["False False False False", "False False"]


def test_the_pipeline_lesson_takes_its_checks_from_dtf_arguments():
    """The generated lesson imports its argument checks from the leaf module, not from
    ``dtf.parallel`` (read without importing it)."""
    import ast

    from tests.helpers import ROOT

    tree = ast.parse((ROOT / "src/dtf/lessons/pipeline.py").read_text(encoding="utf-8"))
    sources = {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
    assert "dtf.arguments" in sources and "dtf.parallel" not in sources


# --------------------------------------------------------------------------------------------
# With TensorFlow, in one fresh process with three logical CPUs

SCRIPT = r"""
import json, os, re
import numpy as np
out = os.fdopen(os.dup(1), "w")  # placement.capture() reroutes descriptor 1: keep a copy
from dtf import quiet
quiet.quiet()
from dtf.lessons import pipeline  # first: the generated module imports all it needs by itself
import tensorflow as tf
from dtf import devices, parallel, placement

names = list(devices.setup(3, log_placement=True).names)
placement.start()  # before any op: its check that TensorFlow logs needs a first placement
SIZES = (4, 6, 5, 3, 2)  # 4 layers: on 3 devices, stages of layers [0, 1], [2], [3]
r = {}
def error(fn):
    try:
        fn()
    except ValueError as err:
        return str(err)
    return ""

def bad(fn):  # bad arguments: the error, raised before any TensorFlow op
    try:
        fn()
    except (TypeError, ValueError) as err:
        return f"{type(err).__name__}: {err}"
    return ""

r["bad"] = [
    bad(lambda: pipeline.make_pipeline_step([], 0.1)),
    bad(lambda: pipeline.make_pipeline_step([object()], 0.1, 0)),
    bad(lambda: pipeline.make_data_parallel_step([], 0.1)),
    bad(lambda: pipeline.make_pipeline_step([object()], True)),
    bad(lambda: pipeline.make_pipeline_step([object()], -0.1)),
    bad(lambda: pipeline.make_data_parallel_step([object()], float("nan"))),
    bad(lambda: pipeline.pipeline_gradients([], None, None)),
    bad(lambda: pipeline.data_parallel_gradients([], None, None)),
]

stages = parallel.build_stages(SIZES, names, seed=3)
r["stages"] = [[list(s.layer_indices), placement.short_device(s.device)] for s in stages]
r["variable_devices"] = [[parallel.variable_device(v) for v in s.variables] for s in stages]
with tf.device(names[2]):
    plain = tf.Variable(1.0)  # a tf.Variable, whose .value is a method
r["plain_variable_device"] = parallel.variable_device(plain)
r["stage_bytes"] = parallel.parameter_bytes(stages)
r["moved"] = parallel.activation_bytes_per_step(stages, 8)
r["moved_one_device"] = parallel.activation_bytes_per_step(
    parallel.build_stages(SIZES, names[:1] * 3, seed=3), 8
)
cycled = parallel.build_stages(SIZES, names[:2], num_stages=4, seed=3)
r["cycled"] = [placement.short_device(s.device) for s in cycled]
r["cycled_moved"] = parallel.activation_bytes_per_step(cycled, 8)
replicas = parallel.build_replicas(SIZES, names, seed=3)
r["replica_bytes"] = parallel.parameter_bytes(replicas)
r["same_init"] = [
    parallel.max_weight_difference(stages, [replicas[2]]),
    parallel.max_weight_difference(stages, cycled),
]

rng = np.random.default_rng(0)
xs = rng.normal(size=(12, 12, 4)).astype(np.float32)
ys = np.argmax(xs[:, :, :2], axis=-1)  # a rule the network can learn: the loss must fall
x, y = tf.constant(xs[0]), tf.constant(ys[0])

@tf.function
def reference(x, y):  # one tape, no devices: the textbook gradient
    with tf.GradientTape() as tape:
        h = x
        for s in stages:
            for layer in s.layers:
                h = layer(h)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, h))
    return loss, tape.gradient(loss, [v for s in stages for v in s.variables])

@tf.function
def piped(x, y, m):
    loss, grads = pipeline.pipeline_gradients(stages, x, y, m)
    return loss, [g for gs in grads for g in gs]

@tf.function
def data_par(x, y):
    return pipeline.data_parallel_gradients(replicas, x, y)

def gap(a, b):
    return max(float(np.max(np.abs(p.numpy() - q.numpy()))) for p, q in zip(a, b, strict=True))

ref_loss, ref = reference(x, y)
r["grad_gaps"] = {}
for m in (1, 2, 3, 4, 12):
    with placement.capture() as log:
        loss, grads = piped(x, y, m)
    r["grad_gaps"][m] = [abs(float(loss) - float(ref_loss)), gap(grads, ref)]
    if m == 4:
        t = log.table[log.table.source == "graph"]
        ops = t[t.op.str.startswith("gradient_tape/") & t.op.str.contains("stage_")]
        r["backward"] = sorted(
            {(int(re.search(r"stage_(\d+)_", op).group(1)), dev)
             for op, dev in zip(ops.op, ops.device)}
        )
dp_loss, dp = data_par(x, y)
r["data_gap"] = [abs(float(dp_loss) - float(ref_loss)), gap(dp, ref)]
r["uneven"] = error(lambda: piped(x, y, 5))
r["labels"] = ys[0].tolist()
r["split"] = [
    [int(p[0].shape[0]), p[1].numpy().tolist()]
    for p in pipeline.split_micro_batches(xs[0], ys[0], 3)
]

# Training: plain model parallel, a 4-micro-batch pipeline and data parallel, same batches
mp = parallel.build_stages(SIZES, names, seed=3)
pp = parallel.build_stages(SIZES, names, seed=3)
dp_reps = parallel.build_replicas(SIZES, names, seed=3)
steps = [
    pipeline.make_pipeline_step(mp, 0.5),
    pipeline.make_pipeline_step(pp, 0.5, 4),
    pipeline.make_data_parallel_step(dp_reps, 0.5),
]
first = [float(pipeline.pipeline_gradients(mp, x, y)[0])]
with placement.capture() as log:
    losses = [[float(step(xs[i], ys[i])) for step in steps] for i in range(12)]
t = log.table
t = t[t.source == "graph"]
r["updates"] = sorted(set(t.loc[t.op_type.str.startswith("Assign"), "device"]))
update_math = t[(t.op_type == "Sub") & ~t.op.str.startswith("gradient_tape/")]
r["update_math"] = sorted(set(update_math.device))
r["loss_fell"] = [losses[-1][j] < losses[0][j] for j in range(3)]
r["weights"] = [
    parallel.max_weight_difference(mp, pp),
    parallel.max_weight_difference(mp, dp_reps[:1]),
    max(parallel.max_weight_difference(dp_reps[:1], [rep]) for rep in dp_reps),
    parallel.max_weight_difference(mp, parallel.build_stages(SIZES, names, seed=3)),
]
r["accuracy"] = [
    parallel.accuracy(s, xs[11], ys[11], pipeline.stage_forward) for s in (mp, pp, dp_reps[:1])
]
out.write(json.dumps(r) + "\n")
out.flush()
"""


@pytest.fixture(scope="module")
def result() -> dict:
    return last_json(run_script(SCRIPT, timeout=240, forked=True))


@pytest.mark.slow
def test_bad_arguments_of_the_notebooks_functions_fail_before_any_op(result):
    """The step builders and gradient functions written in notebooks 04 and 04b check their
    arguments (with ``dtf.parallel``'s checks) before they build anything."""
    expected = [
        "ValueError: stages is empty",
        "ValueError: micro_batches must be at least 1",
        "ValueError: replicas is empty",
        "TypeError: learning_rate must be a number",
        "ValueError: learning_rate must be a finite number > 0",
        "ValueError: learning_rate must be a finite number > 0",
        "ValueError: stages is empty",
        "ValueError: replicas is empty",
    ]
    assert len(result["bad"]) == len(expected)
    for got, start in zip(result["bad"], expected, strict=True):
        assert got.startswith(start), (got, start)


@pytest.mark.slow
def test_stages_hold_their_layers_on_their_devices(result):
    assert result["stages"] == [[[0, 1], "CPU:0"], [[2], "CPU:1"], [[3], "CPU:2"]]
    assert result["variable_devices"] == [["CPU:0"] * 4, ["CPU:1"] * 2, ["CPU:2"] * 2]
    assert result["cycled"] == ["CPU:0", "CPU:1", "CPU:0", "CPU:1"]
    assert result["plain_variable_device"] == "CPU:2"  # a tf.Variable as much as a Keras one


@pytest.mark.slow
def test_parameter_bytes_by_hand(result):
    # stage 0: 4*6+6 + 6*5+5 = 65 floats; stage 1: 5*3+3 = 18; stage 2: 3*2+2 = 8
    assert result["stage_bytes"] == {"CPU:0": 260, "CPU:1": 72, "CPU:2": 32}
    # every replica holds all 91 floats
    assert result["replica_bytes"] == {"CPU:0": 364, "CPU:1": 364, "CPU:2": 364}


@pytest.mark.slow
def test_activation_bytes_by_hand(result):
    # boundaries after widths 5 and 3, batch 8: 2 directions * 8 * (5 + 3) * 4 bytes
    assert result["moved"] == 512
    assert result["moved_one_device"] == 0  # stages on the same device move nothing
    # cycled over 2 devices: all 3 boundaries cross (widths 6, 5, 3)
    assert result["cycled_moved"] == 2 * 8 * (6 + 5 + 3) * 4


@pytest.mark.slow
def test_every_build_starts_from_the_same_weights(result):
    assert result["same_init"] == [0.0, 0.0]


@pytest.mark.slow
def test_pipeline_gradients_equal_the_whole_batch_gradient(result):
    for m, (loss_gap, grad_gap) in result["grad_gaps"].items():
        assert loss_gap < 1e-6, f"M={m}"
        assert grad_gap < 1e-5, f"M={m}: gradients differ by {grad_gap:.1e}"
    loss_gap, grad_gap = result["data_gap"]
    assert loss_gap < 1e-6 and grad_gap < 1e-5


@pytest.mark.slow
def test_each_stage_runs_its_backward_pass_on_its_own_device(result):
    assert [tuple(p) for p in result["backward"]] == [(0, "CPU:0"), (1, "CPU:1"), (2, "CPU:2")]
    # every variable updated where it lives, the arithmetic of the update included
    assert result["updates"] == ["CPU:0", "CPU:1", "CPU:2"]
    assert result["update_math"] == ["CPU:0", "CPU:1", "CPU:2"]


@pytest.mark.slow
def test_micro_batches_must_be_equal(result):
    msg = result["uneven"]
    assert "12 examples" in msg and "5 equal micro-batches" in msg
    assert "[1, 2, 3, 4, 6, 12]" in msg
    assert [size for size, _ in result["split"]] == [4, 4, 4]
    assert sum((labels for _, labels in result["split"]), []) == result["labels"]  # in order


@pytest.mark.slow
def test_three_ways_train_to_the_same_weights(result):
    assert all(result["loss_fell"])
    pipeline_vs_model, data_vs_model, between_replicas, moved = result["weights"]
    assert moved > 1e-3  # it really trained
    assert pipeline_vs_model < 1e-5
    assert data_vs_model < 1e-5
    assert between_replicas == 0.0
    assert len(set(result["accuracy"])) == 1
