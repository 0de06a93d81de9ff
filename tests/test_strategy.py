"""Tests for ``dtf.strategy``: the CNN, the input pipeline, the weight comparisons, the name
of the cross-device ops and the step timer.

Argument checks run in this process (they fail before TensorFlow is imported). Everything
that needs TensorFlow runs in one fresh interpreter with three logical CPUs (TensorFlow fixes
its device layout once per process), which checks several things and prints one JSON line.
"""

from __future__ import annotations

import numpy as np
import pytest

from dtf import strategy
from tests.helpers import last_json, run_script

# --------------------------------------------------------------------------------------------
# Argument checks: no TensorFlow needed


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        (((64,), 10), {}, ValueError, r"input_shape must be \(height, width, channels\)"),
        (((3, 8, 1), 10), {}, ValueError, "too small for two 2x2 poolings"),
        (((8, 8, 1), 1), {}, ValueError, "num_classes must be at least 2, got 1"),
        (((8, 8.0, 1), 10), {}, TypeError, "input_shape width must be a whole number"),
        (((8, 8, 1), 10), {"seed": -1}, ValueError, "seed must be at least 0"),
        (((8, 8, 1), 10), {"seed": 1.5}, TypeError, "seed must be a whole number"),
    ],
)
def test_build_cnn_rejects_bad_arguments(args, kwargs, error, message):
    """Notebook 09's build_cnn (dtf.lessons.cnn) checks its arguments with cnn_arguments,
    before Keras is touched."""
    with pytest.raises(error, match=message):
        strategy.cnn_arguments(*args, **kwargs)


def test_steps_per_epoch():
    assert strategy.steps_per_epoch(1437, 64) == 22
    assert strategy.steps_per_epoch(np.int64(64), 64) == 1
    with pytest.raises(ValueError, match="larger than the 100 examples: lower PER_DEVICE_BATCH"):
        strategy.steps_per_epoch(100, 128)
    with pytest.raises(ValueError, match="global_batch must be at least 1"):
        strategy.steps_per_epoch(100, 0)
    with pytest.raises(TypeError, match="global_batch must be a whole number"):
        strategy.steps_per_epoch(100, 32.0)


def test_epoch_order_is_notebook_03s_global_batches():
    order = strategy.epoch_order(10, 3, 2, seed=7)
    assert order.shape == (6, 3)  # 3 full batches per epoch, 2 epochs
    for epoch in range(2):
        expected = np.random.default_rng([7, epoch]).permutation(10)[:9].reshape(3, 3)
        np.testing.assert_array_equal(order[3 * epoch : 3 * (epoch + 1)], expected)
    assert not np.array_equal(order[:3], order[3:])  # reshuffled every epoch
    np.testing.assert_array_equal(order, strategy.epoch_order(10, 3, 2, seed=7))
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        strategy.epoch_order(10, 3, 0)


def test_make_dataset_rejects_mismatched_arrays():
    with pytest.raises(ValueError, match="x has 4 examples but y has 5"):
        strategy.make_dataset(np.zeros((4, 2)), np.zeros(5), 2, epochs=1)


def test_max_weight_difference_on_plain_arrays():
    a = [np.zeros((2, 2), np.float32), np.ones(3, np.float32)]
    b = [np.full((2, 2), 0.5, np.float32), np.ones(3, np.float32)]
    assert strategy.max_weight_difference(a, a) == 0.0
    assert strategy.max_weight_difference(a, b) == 0.5
    assert strategy.max_weight_difference({"w": a[0], "b": a[1]}, {"b": b[1], "w": b[0]}) == 0.5
    assert strategy.max_weight_difference([np.zeros(0)], [np.zeros(0)]) == 0.0  # empty weight


@pytest.mark.parametrize(
    "a, b, error, message",
    [
        ([np.zeros(2)], [np.zeros(2), np.zeros(1)], ValueError, "a has 1 weights but b has 2"),
        ([np.zeros(2)], [np.zeros(3)], ValueError, r"weight #0 has shape \(2,\) in a but"),
        ([], [], ValueError, "no weights to compare"),
        ({"w": np.zeros(1)}, {"v": np.zeros(1)}, ValueError, "different keys"),
        ("weights", [np.zeros(1)], TypeError, "a must be a Keras model"),
        ([np.zeros(1)], 3.0, TypeError, "b must be a Keras model"),
    ],
)
def test_max_weight_difference_rejects_what_cannot_be_compared(a, b, error, message):
    with pytest.raises(error, match=message):
        strategy.max_weight_difference(a, b)


def test_replica_copies_difference_of_plain_values_is_zero():
    assert strategy.replica_copies_difference([np.ones(3), np.zeros((2, 2))]) == 0.0


class _Copies:  # stands in for a MirroredVariable: .values holds one copy per replica
    def __init__(self, *copies):
        self.values = copies


class _KerasLike:  # stands in for a Keras 3 variable: .value is the tf.distribute variable
    def __init__(self, inner):
        self.value = inner


def test_replica_copies_difference_compares_every_copy_with_the_first():
    same = _KerasLike(_Copies(np.ones(2), np.ones(2), np.ones(2)))
    apart = _Copies(np.ones(2), np.ones(2), np.array([1.0, 1.25]))
    assert strategy.replica_copies_difference([same]) == 0.0
    assert strategy.replica_copies_difference([same, apart]) == 0.25


def test_cross_device_ops_name_without_a_tensorflow_strategy():
    class Options:
        implementation = type("Impl", (), {"name": "NCCL"})()

    class CollectiveAllReduce:
        _options = Options()

    class ReductionToOneDevice:
        pass

    def fake(ops):
        return type("S", (), {"extended": type("E", (), {"_cross_device_ops": ops})()})()

    assert strategy.cross_device_ops_name(fake(CollectiveAllReduce())) == (
        "CollectiveAllReduce (NCCL)"
    )
    assert strategy.cross_device_ops_name(fake(ReductionToOneDevice())) == "ReductionToOneDevice"
    with pytest.raises(TypeError, match="has no cross-device ops"):
        strategy.cross_device_ops_name(object())


def test_import_does_not_import_tensorflow():
    proc = run_script(
        """
        import sys
        import dtf.strategy
        print("tensorflow" in sys.modules, "keras" in sys.modules)
        """
    )
    assert proc.stdout.strip() == "False False"


# --------------------------------------------------------------------------------------------
# With TensorFlow, in one fresh process with three logical CPUs

SCRIPT = r"""
import json
import numpy as np
from dtf import quiet
quiet.quiet()
import keras
import tensorflow as tf
from dtf import data, devices, towers
from dtf import strategy as S
from dtf.lessons.cnn import build_cnn  # notebook 09's cells

names = list(devices.setup(3).names)
mirrored = tf.distribute.MirroredStrategy(names)
ds = data.load("digits")
r = {}

# build_cnn: deterministic, the same inside a strategy's scope, another seed differs
a = build_cnn(ds.input_shape, 10, seed=1)
with mirrored.scope():
    b = build_cnn(ds.input_shape, 10, seed=1)
r["same_seed_diff"] = S.max_weight_difference(a, b)
r["other_seed_diff"] = S.max_weight_difference(a, build_cnn(ds.input_shape, 10, seed=2))
r["cnn_output"] = list(a(ds.x_test[:5]).shape)
r["cnn_params"] = a.count_params()
r["cnn_mnist_output"] = list(build_cnn((28, 28, 1), 10)(np.zeros((2, 28, 28, 1))).shape)
r["mirrored_type"] = type(b.weights[0].value).__name__
r["copies_diff"] = S.replica_copies_difference(b)
r["copies"] = len(b.weights[0].value.values)

# make_dataset: full batches, notebook 03b's order, the same for every iterator
G = 48
d = S.make_dataset(ds.x_train, ds.y_train, G, epochs=2, seed=3)
spe = S.steps_per_epoch(len(ds.x_train), G)
batches = [(x.numpy(), y.numpy()) for x, y in d]
order = S.epoch_order(len(ds.x_train), G, 2, seed=3)
r["batches"] = len(batches) == 2 * spe
r["full"] = {x.shape[0] for x, _ in batches} == {G}
r["order"] = all(
    np.array_equal(y, ds.y_train[idx]) and np.array_equal(x, ds.x_train[idx])
    for (x, y), idx in zip(batches, order)
)
again = [y.numpy() for _, y in d]
r["second_iterator_same"] = all(np.array_equal(p[1], q) for p, q in zip(batches, again))
from tensorflow.python.data.ops import multi_device_iterator_ops as mdi
per_replica, calm = [], mdi._create_device_dataset  # what setup() put in place
mdi._create_device_dataset = lambda *a, **k: per_replica.append(calm(*a, **k)) or per_replica[-1]
dist = mirrored.experimental_distribute_dataset(d)
shares = []
for i, (x, y) in enumerate(dist):
    parts = mirrored.experimental_local_results(y)
    shares.append([int(p.shape[0]) for p in parts])
    if i == 0:
        r["distributed_same"] = bool(np.array_equal(np.concatenate(parts), batches[0][1]))
mdi._create_device_dataset = calm
r["shares"] = sorted({tuple(s) for s in shares})
r["autotune"] = [d.options().autotune.enabled] + [p.options().autotune.enabled for p in per_replica]

# cross-device ops: the default on logical CPUs, and an explicit choice
r["default_ops"] = S.cross_device_ops_name(mirrored)
explicit = tf.distribute.MirroredStrategy(
    names, cross_device_ops=tf.distribute.ReductionToOneDevice()
)
r["explicit_ops"] = S.cross_device_ops_name(explicit)
try:
    S.cross_device_ops_name(tf.distribute.get_strategy())
    r["default_strategy"] = "no error"
except TypeError as err:
    r["default_strategy"] = str(err)

# one Mirrored SGD step equals one tower step from the same weights on the same batch
x, y = batches[0]
loss_object = keras.losses.SparseCategoricalCrossentropy(reduction=None)
with mirrored.scope():
    model = build_cnn(ds.input_shape, 10, seed=4)
    opt = keras.optimizers.SGD(0.2)
    opt.build(model.trainable_variables)
start = model.get_weights()

def replica_step(xs, ys):
    with tf.GradientTape() as tape:
        per_example = loss_object(ys, model(xs, training=True))
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=G)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

@tf.function
def mirrored_step(batch):
    return mirrored.reduce("SUM", mirrored.run(replica_step, args=batch), axis=None)

dist_batch = next(iter(mirrored.experimental_distribute_dataset(
    tf.data.Dataset.from_tensors((x, y)))))
mirrored_loss = float(mirrored_step(dist_batch))
with tf.device(names[0]):
    tower_model = build_cnn(ds.input_shape, 10, seed=4)
tower_model.set_weights(start)
step = towers.make_tower_train_step(
    lambda xs: tower_model(xs, training=True), tower_model.trainable_variables,
    lambda ys, p: tf.reduce_mean(loss_object(ys, p)), keras.optimizers.SGD(0.2), names, names[0])
tower_loss = float(step(tf.constant(x), tf.constant(y)))
r["step_weight_diff"] = S.max_weight_difference(model, tower_model)
r["step_loss_diff"] = abs(mirrored_loss - tower_loss)
r["step_moved"] = S.max_weight_difference(model, start)
r["copies_after_step"] = S.replica_copies_difference(model)

# part 12's timing loop (10b times these two steps with it) on real and distributed steps
from dtf.lessons.scaling_steps import step_seconds
both = {"towers": lambda: step(x, y), "mirrored": lambda: mirrored_step(dist_batch)}
seconds = step_seconds(both, warmup=1, timed=2, repeats=3)
r["timed"] = {k: len(v) for k, v in seconds.items()}
r["timed_positive"] = all(t > 0 for v in seconds.values() for t in v)
print(json.dumps(r))
"""


@pytest.fixture(scope="module")
def tf_results():
    return last_json(run_script(SCRIPT, timeout=300, forked=True))


@pytest.mark.slow
def test_build_cnn_is_seeded_and_mirrors_in_a_scope(tf_results):
    r = tf_results
    assert r["same_seed_diff"] == 0.0
    assert r["other_seed_diff"] > 0.01
    assert r["cnn_output"] == [5, 10]
    assert r["cnn_params"] == 6090  # the source's CNN with padding="same" on 8x8 digits
    assert r["cnn_mnist_output"] == [2, 10]
    assert r["mirrored_type"] == "MirroredVariable"
    assert r["copies"] == 3 and r["copies_diff"] == 0.0


@pytest.mark.slow
def test_make_dataset_gives_full_batches_in_a_fixed_order(tf_results):
    r = tf_results
    assert r["batches"] and r["full"] and r["order"]
    assert r["second_iterator_same"]  # unlike shuffle(seed=...), which reshuffles per iterator
    assert r["distributed_same"]
    assert r["shares"] == [[16, 16, 16]]  # 48 on 3 replicas: equal shares, every batch
    # No tf.data autotuning thread to wait for when an iterator is deleted (TensorFlow 2.21
    # can sleep through its wake-up): not on the input, not on any of the 3 replicas' datasets.
    assert r["autotune"] == [False] * 4


@pytest.mark.slow
def test_cross_device_ops_name_on_logical_cpus(tf_results):
    r = tf_results
    assert r["default_ops"] == "CollectiveAllReduce (RING)"
    assert r["explicit_ops"] == "ReductionToOneDevice"
    assert "_DefaultDistributionStrategy has no cross-device ops" in r["default_strategy"]


@pytest.mark.slow
def test_a_mirrored_step_equals_a_tower_step(tf_results):
    r = tf_results
    assert r["step_moved"] > 1e-4  # the step changed the weights
    assert r["step_weight_diff"] < 1e-6
    assert r["step_loss_diff"] < 1e-6
    assert r["copies_after_step"] == 0.0


@pytest.mark.slow
def test_the_timing_loop_times_towers_and_a_distributed_step(tf_results):
    assert tf_results["timed"] == {"towers": 3, "mirrored": 3}
    assert tf_results["timed_positive"]
