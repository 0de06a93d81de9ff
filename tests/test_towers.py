"""Tests for ``dtf.towers``: batch splitting, gradient averaging, and a tower step that must
equal a single-device step on the same global batch.

Argument checks run in this process (they fail before TensorFlow is imported). Everything
that runs TensorFlow runs in one fresh interpreter with logical CPUs (TensorFlow fixes its
device layout once per process), which checks several things and prints one JSON line.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from dtf import towers
from tests.helpers import last_json, run_script

# --------------------------------------------------------------------------------------------
# Argument checks: no TensorFlow needed


@pytest.mark.parametrize(
    "num_towers, error, message",
    [
        (0, ValueError, "num_towers must be at least 1, got 0"),
        (-1, ValueError, "num_towers must be at least 1, got -1"),
        (np.int64(0), ValueError, "num_towers must be at least 1, got 0"),
        (2.5, TypeError, "num_towers must be a whole number, got 2.5"),
        (2.0, TypeError, "num_towers must be a whole number"),
        (True, TypeError, "num_towers must be a whole number, got True"),
        ("2", TypeError, "num_towers must be a whole number"),
    ],
)
def test_split_batch_rejects_bad_num_towers(num_towers, error, message):
    """The rules of dtf._util.whole_number, as in every other module."""
    with pytest.raises(error, match=message):
        towers.split_batch([[1.0]], [0], num_towers)


def test_average_gradients_rejects_empty_and_ragged_input():
    with pytest.raises(ValueError, match="empty"):
        towers.average_gradients([])
    with pytest.raises(ValueError, match="one gradient per variable"):
        towers.average_gradients([[1.0, 2.0], [1.0]])


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"devices": []}, ValueError, "devices is empty"),
        ({"variables": []}, ValueError, "variables is empty"),
        ({"optimizer": "sgd"}, TypeError, "optimizer must be"),
        ({"optimizer": True}, TypeError, "optimizer must be"),
    ],
)
def test_make_tower_train_step_rejects_bad_arguments(kwargs, error, message):
    args = {
        "model_fn": lambda x: x,
        "variables": [object()],
        "loss_fn": lambda y, logits: 0.0,
        "optimizer": 0.1,
        "devices": ["/device:CPU:0"],
        **kwargs,
    }
    with pytest.raises(error, match=message):
        towers.make_tower_train_step(**args)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"input_dim": 0}, ValueError, "input_dim must be at least 1, got 0"),
        ({"hidden_units": np.int64(-3)}, ValueError, "hidden_units must be at least 1, got -3"),
        ({"num_classes": 1}, ValueError, "num_classes must be at least 2, got 1"),
        ({"hidden_units": 2.5}, TypeError, "hidden_units must be a whole number, got 2.5"),
        ({"input_dim": 4.0}, TypeError, "input_dim must be a whole number"),
        ({"num_classes": True}, TypeError, "num_classes must be a whole number, got True"),
        ({"device": []}, ValueError, "device must be None"),
    ],
)
def test_init_mlp_rejects_bad_sizes(kwargs, error, message):
    args = {"input_dim": 4, "hidden_units": 3, "num_classes": 2, **kwargs}
    with pytest.raises(error, match=message):
        towers.init_mlp(**args)


def test_import_does_not_import_tensorflow():
    proc = run_script(
        """
        import sys
        import dtf.towers
        print("tensorflow" in sys.modules)
        """
    )
    assert proc.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------
# With TensorFlow, in one fresh process with three logical CPUs

SCRIPT = r"""
import json, os
import numpy as np
out = os.fdopen(os.dup(1), "w")  # placement.capture() reroutes descriptor 1: keep a copy
from dtf import quiet
quiet.quiet()
import tensorflow as tf
from dtf import devices, placement, towers

setup = devices.setup(3, log_placement=True)
names = list(setup.names)
CPU = "/device:CPU:0"
r = {"names": names}

# split_batch: sizes, order, errors
x = np.arange(12, dtype=np.float32).reshape(6, 2)
y = np.arange(6)
shards = towers.split_batch(x, y, 3)
r["split_sizes"] = [int(s[0].shape[0]) for s in shards]
r["split_y"] = [s[1].numpy().tolist() for s in shards]
r["split_x_roundtrip"] = bool(np.array_equal(np.concatenate([s[0].numpy() for s in shards]), x))
r["split_one"] = len(towers.split_batch(x, y, 1))
def error(fn):
    try:
        fn()
    except ValueError as err:
        return str(err)
    return ""
r["split_uneven"] = error(lambda: towers.split_batch(np.zeros((65, 2)), np.zeros(65), 2))
r["split_mismatch"] = error(lambda: towers.split_batch(np.zeros((4, 2)), np.zeros(5), 2))

# average_gradients: known numbers, None, IndexedSlices
avg = towers.average_gradients(
    [[tf.constant(1.0), tf.constant([2.0, 4.0]), None],
     [tf.constant(3.0), tf.constant([4.0, 8.0]), None]]
)
r["avg"] = [avg[0].numpy().tolist(), avg[1].numpy().tolist(), avg[2]]
r["avg_partial_none"] = error(
    lambda: towers.average_gradients([[tf.constant(1.0)], [None]])
)
sparse = tf.IndexedSlices(tf.constant([[2.0, 2.0]]), tf.constant([1]), tf.constant([2, 2]))
dense = tf.constant([[4.0, 0.0], [0.0, 0.0]])
r["avg_sparse"] = towers.average_gradients([[sparse], [dense]])[0].numpy().tolist()
r["avg_single"] = towers.average_gradients([[tf.constant(5.0)]])[0].numpy().tolist()

# A tower step on 3 devices equals a single-device step on the same global batch
rng = np.random.default_rng(0)
xs = rng.normal(size=(10, 24, 8)).astype(np.float32)
ys = np.argmax(xs[:, :, :4], axis=-1)  # a rule the network can learn: the loss must fall

def loss_fn(y, logits):
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    )

def train(devs, param_device, spread=False, optimizer=0.3, steps=10):
    p = towers.init_mlp(8, 16, 4, seed=7, device=devs if spread else param_device)
    variables = [p[k] for k in towers.MLP_VARIABLES]
    step = towers.make_tower_train_step(
        lambda x: towers.mlp_logits(p, x), variables, loss_fn, optimizer, devs, param_device
    )
    losses = [float(step(xs[i], ys[i])) for i in range(steps)]
    return p, losses, step

first_loss = float(loss_fn(ys[0], towers.mlp_logits(towers.init_mlp(8, 16, 4, seed=7), xs[0])))
with placement.capture() as log:
    towered, tower_losses, tower_step = train(names, CPU)
single, single_losses, _ = train(names[:1], CPU)
with placement.capture() as spread_log:
    spread, _, spread_step = train(names, None, spread=True)
keras_sgd, _, _ = train(names, CPU, optimizer=tf.keras.optimizers.SGD(0.3))

def diff(a, b):
    return max(float(np.max(np.abs(a[k].numpy() - b[k].numpy()))) for k in towers.MLP_VARIABLES)

r["first_loss"] = [first_loss, tower_losses[0], single_losses[0]]
r["loss_fell"] = tower_losses[-1] < tower_losses[0]
r["diff_single"] = diff(towered, single)
r["diff_spread"] = diff(towered, spread)
r["diff_keras"] = diff(towered, keras_sgd)
r["moved"] = diff(towered, towers.init_mlp(8, 16, 4, seed=7))
t = log.table
r["matmul_devices"] = sorted(set(t.loc[t.op_type == "MatMul", "device"]))
r["addn_devices"] = sorted(set(t.loc[t.op_type == "AddN", "device"]))
r["update_devices"] = sorted(set(t.loc[t.op_type == "AssignSubVariableOp", "device"]))
r["spread_vars"] = [spread[k].device.split("device:")[-1] for k in towers.MLP_VARIABLES]
t = spread_log.table
r["spread_addn_devices"] = sorted(set(t.loc[t.op_type == "AddN", "device"]))


# For each update in a step's graph (v -= lr * AddN(tower grads) / n): the variable it
# updates, that variable's device, and the devices requested for that AddN and division.
def averaged_where(step, variables):
    graph = step.get_concrete_function(xs[0], ys[0]).graph
    captured = {}
    for external, internal in graph.captures:
        for v in variables:
            if external is v.handle:
                captured[internal.ref()] = v
    rows = []
    for op in graph.get_operations():
        if op.type != "AssignSubVariableOp":
            continue
        v = captured[op.inputs[0].ref()]
        found, stack, seen = {}, [op.inputs[1].op], set()
        while stack:  # back from the update's value to the sum of the tower gradients
            o = stack.pop()
            if o.name in seen:
                continue
            seen.add(o.name)
            if o.type in ("AddN", "RealDiv"):
                found[o.type] = placement.short_device(o.device)
            if o.type != "AddN":  # beyond the AddN lie the towers
                stack.extend(i.op for i in o.inputs)
        where = placement.short_device(v.device)
        rows.append([v.name, where, found.get("AddN"), found.get("RealDiv")])
    return rows


r["spread_averaged"] = averaged_where(spread_step, [spread[k] for k in towers.MLP_VARIABLES])
r["param_averaged"] = averaged_where(tower_step, [towered[k] for k in towers.MLP_VARIABLES])
r["numpy_ints"] = [
    len(towers.split_batch(x, y, np.int64(2))),
    [int(v.shape[-1]) for v in towers.init_mlp(np.int64(3), np.int32(5), np.int64(2)).values()],
]
r["init_same"] = diff(towers.init_mlp(8, 16, 4, seed=7), towers.init_mlp(8, 16, 4, seed=7))
r["init_other_seed"] = diff(towers.init_mlp(8, 16, 4, seed=7), towers.init_mlp(8, 16, 4, seed=8))
r["step_uneven"] = error(lambda: tower_step(np.zeros((25, 8), np.float32), np.zeros(25, np.int64)))
out.write(json.dumps(r) + "\n")
out.flush()
"""


@pytest.fixture(scope="module")
def result() -> dict:
    return last_json(run_script(SCRIPT, timeout=180, forked=True))


@pytest.mark.slow
def test_split_batch_sizes_order_and_errors(result):
    assert result["split_sizes"] == [2, 2, 2]
    assert result["split_y"] == [[0, 1], [2, 3], [4, 5]]
    assert result["split_x_roundtrip"] and result["split_one"] == 1
    msg = result["split_uneven"]
    assert "65" in msg and "multiple of the number of devices" in msg and "64 or 66" in msg
    assert "4 examples but y has 5" in result["split_mismatch"]


@pytest.mark.slow
def test_average_gradients_of_known_numbers(result):
    assert result["avg"] == [2.0, [3.0, 6.0], None]
    assert "no gradient in tower(s) [1]" in result["avg_partial_none"]
    assert result["avg_sparse"] == [[2.0, 0.0], [1.0, 1.0]]
    assert result["avg_single"] == 5.0


@pytest.mark.slow
def test_tower_step_equals_single_device_step(result):
    first, tower, single = result["first_loss"]
    assert tower == pytest.approx(first, abs=1e-6) and single == pytest.approx(first, abs=1e-6)
    assert result["loss_fell"] and result["moved"] > 1e-3  # it really trained
    assert result["diff_single"] < 1e-5
    assert result["diff_spread"] < 1e-5
    assert result["diff_keras"] < 1e-5


@pytest.mark.slow
def test_tower_step_places_work_on_every_device(result):
    assert result["matmul_devices"] == ["CPU:0", "CPU:1", "CPU:2"]
    assert result["addn_devices"] == ["CPU:0"]  # gradients averaged on the parameter device
    assert result["update_devices"] == ["CPU:0"]  # and applied there
    assert result["spread_vars"] == ["CPU:0", "CPU:0", "CPU:1", "CPU:1"]


@pytest.mark.slow
def test_gradients_are_averaged_where_each_variable_lives(result):
    """param_device=None: each variable's tower gradients are summed and divided on the
    variable's own device (a step that averaged everything on the first device was not
    caught before). Followed in the step's graph from each update back to its AddN."""
    spread = result["spread_averaged"]
    assert [row[0].split(":")[0] for row in spread] == list(towers.MLP_VARIABLES)
    assert [row[1] for row in spread] == ["CPU:0", "CPU:0", "CPU:1", "CPU:1"]
    for name, variable_device, sum_device, divide_device in spread:
        assert sum_device == divide_device == variable_device, name
    # and where TensorFlow really ran them: the averages on both variables' devices
    assert result["spread_addn_devices"] == ["CPU:0", "CPU:1"]
    # with a parameter device, every average is there
    assert [row[1:] for row in result["param_averaged"]] == [["CPU:0"] * 3] * 4


@pytest.mark.slow
def test_numpy_integers_are_whole_numbers(result):
    assert result["numpy_ints"] == [2, [5, 5, 2, 2]]


@pytest.mark.slow
def test_init_mlp_is_seeded(result):
    assert result["init_same"] == 0.0 and result["init_other_seed"] > 0.0


@pytest.mark.slow
def test_tower_step_refuses_a_batch_that_does_not_divide(result):
    msg = result["step_uneven"]
    assert "25" in msg and "multiple of the number of devices" in msg


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
