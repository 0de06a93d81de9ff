"""Helpers for ``tf.distribute.MirroredStrategy`` notebooks: one model, one input pipeline,
and the checks that show what the strategy did.

Notebook 09 writes the model (exported into :mod:`dtf.lessons.cnn`) and the batches by hand
first, part 09b the all-reduce's name; from part 09b on the notebooks import them:

- :func:`cnn_arguments`: the checked arguments of notebook 09's ``build_cnn``, with errors
  that say what to change.
- :func:`steps_per_epoch`, :func:`epoch_order` and :func:`make_dataset`: full global batches
  only (as with ``drop_remainder=True``), reshuffled every epoch in an order fixed by a seed,
  so that two trainers (or two iterators) see the same batches.
- :func:`max_weight_difference`: the largest absolute difference between two sets of weights.
- :func:`replica_copies_difference`: the largest difference between the per-replica copies
  of mirrored variables (0.0 when every replica applied the same update).
- :func:`cross_device_ops_name`: which all-reduce a strategy picked, e.g.
  ``"CollectiveAllReduce (RING)"``. It reads private attributes of TensorFlow 2.21
  (``strategy.extended._cross_device_ops``); the tests pin that down.

Importing this module does not import TensorFlow or Keras (each function imports them when
called), so ``import dtf.strategy`` never starts TensorFlow before ``dtf.devices.setup``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from dtf._util import whole_number

__all__ = [
    "cnn_arguments",
    "cross_device_ops_name",
    "epoch_order",
    "make_dataset",
    "max_weight_difference",
    "replica_copies_difference",
    "steps_per_epoch",
]

#: Two 2x2 max-pooling layers halve each side twice: smaller images would vanish.
MIN_IMAGE_SIDE = 4


def cnn_arguments(
    input_shape: Sequence[int], num_classes: int, seed: int = 0
) -> tuple[tuple[int, ...], int, int]:
    """The checked arguments of notebook 09's ``build_cnn`` (:mod:`dtf.lessons.cnn`):
    ``(input_shape, num_classes, seed)``, or an error that says what to change.

    Raises:
        ValueError: ``input_shape`` is not ``(height, width, channels)`` with sides of at
            least :data:`MIN_IMAGE_SIDE` (e.g. flattened images: load them with
            ``flatten=False``), or ``num_classes`` < 2.
        TypeError: a size or ``seed`` is not a whole number.
    """
    shape = tuple(input_shape)
    if len(shape) != 3:
        raise ValueError(
            f"input_shape must be (height, width, channels), got {shape}: the CNN needs "
            "images, e.g. dtf.data.load(name) without flatten=True"
        )
    for label, size in zip(("height", "width", "channels"), shape, strict=True):
        whole_number(f"input_shape {label}", size, minimum=1)
    if min(shape[:2]) < MIN_IMAGE_SIDE:
        raise ValueError(
            f"images of {shape[0]}x{shape[1]} are too small for two 2x2 poolings: "
            f"each side must be at least {MIN_IMAGE_SIDE}"
        )
    num_classes = whole_number(
        "num_classes", num_classes, minimum=2, hint="A classifier needs at least two classes."
    )
    return shape, num_classes, whole_number("seed", seed, minimum=0)


def steps_per_epoch(num_examples: int, global_batch: int) -> int:
    """Full global batches in one pass over ``num_examples`` (the rest is dropped).

    Raises ``ValueError`` when not even one batch fits, with what to change.
    """
    num_examples = whole_number("num_examples", num_examples, minimum=1)
    global_batch = whole_number("global_batch", global_batch, minimum=1)
    steps = num_examples // global_batch
    if steps == 0:
        raise ValueError(
            f"a global batch of {global_batch} is larger than the {num_examples} examples: "
            "lower PER_DEVICE_BATCH or NUM_DEVICES"
        )
    return steps


def epoch_order(num_examples: int, global_batch: int, epochs: int, *, seed: int = 0):
    """Indices of ``epochs`` epochs of full global batches: shape ``(batches, global_batch)``.

    Epoch ``e`` is ``numpy.random.default_rng([seed, e]).permutation(num_examples)`` cut into
    :func:`steps_per_epoch` full batches (the last ``num_examples % global_batch`` indices
    of that permutation are left out, different ones every epoch): the batches of notebook
    03's ``global_batches``.
    """
    steps = steps_per_epoch(num_examples, global_batch)
    epochs = whole_number("epochs", epochs, minimum=1)
    seed = whole_number("seed", seed, minimum=0)
    rows = [
        np.random.default_rng([seed, epoch]).permutation(num_examples)[: steps * global_batch]
        for epoch in range(epochs)
    ]
    return np.concatenate(rows).reshape(epochs * steps, global_batch)


def make_dataset(x, y, global_batch: int, *, epochs: int, seed: int = 0):
    """A ``tf.data.Dataset`` of ``epochs`` epochs of full global batches of ``(x, y)``.

    The batches are those of :func:`epoch_order`: every batch has exactly ``global_batch``
    examples (as ``batch(global_batch, drop_remainder=True)`` would give), so it splits into
    equal shares for any number of replicas that divides it, and the order is fixed by
    ``seed`` alone. Unlike ``shuffle(seed=...)``, which draws a new order for every
    iterator over the same dataset, every iterator over this dataset (or over
    ``strategy.experimental_distribute_dataset(dataset)``) sees the same batches: two
    trainers can be compared step by step. Read :func:`steps_per_epoch` batches per epoch,
    e.g. ``model.fit(dataset, epochs=epochs, steps_per_epoch=steps)``, which then keeps one
    iterator for the whole run.
    """
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} examples but y has {len(y)}")
    order = epoch_order(len(x), global_batch, epochs, seed=seed)
    import tensorflow as tf

    images, labels = tf.constant(x), tf.constant(y)
    dataset = tf.data.Dataset.from_tensor_slices(order)  # one row of indices per batch
    dataset = dataset.map(lambda idx: (tf.gather(images, idx), tf.gather(labels, idx)))
    # No tf.data autotuning thread for this pipeline of arrays already in memory: deleting an
    # iterator waits for that thread, in TensorFlow 2.21 at times until its next round
    # (dtf.devices.calm_replica_iterators says why). The prefetch still sizes its buffer
    # itself; the map is no longer run in parallel by tf.data's default rewrite.
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)


def _arrays(weights, label: str) -> list[np.ndarray]:
    """A model's weights, a list of arrays/variables, or a dict of them (by sorted key)."""
    if hasattr(weights, "get_weights"):
        weights = weights.get_weights()
    elif isinstance(weights, Mapping):
        weights = [weights[k] for k in sorted(weights)]
    elif isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise TypeError(
            f"{label} must be a Keras model, a list of arrays or variables, or a dict of "
            f"them, got {type(weights).__name__}"
        )
    return [np.asarray(w) for w in weights]


def max_weight_difference(a, b) -> float:
    """``max |a_i - b_i|`` over all weights: 0.0 when they are identical.

    ``a`` and ``b`` may be Keras models, lists of arrays or variables (mirrored ones are
    read on their first replica), or dicts with the same keys.

    Raises:
        ValueError: different numbers of weights, different shapes, or nothing to compare.
        TypeError: an argument is none of the above.
    """
    left, right = _arrays(a, "a"), _arrays(b, "b")
    if isinstance(a, Mapping) and isinstance(b, Mapping) and set(a) != set(b):
        raise ValueError(f"the dicts have different keys: {sorted(set(a) ^ set(b))}")
    if len(left) != len(right):
        raise ValueError(f"a has {len(left)} weights but b has {len(right)}")
    if not left:
        raise ValueError("no weights to compare")
    worst = 0.0
    for i, (p, q) in enumerate(zip(left, right, strict=True)):
        if p.shape != q.shape:
            raise ValueError(f"weight #{i} has shape {p.shape} in a but {q.shape} in b")
        if p.size:
            worst = max(worst, float(np.max(np.abs(p.astype(np.float64) - q))))
    return worst


def _replica_values(variable) -> tuple:
    """The per-replica copies of a (Keras or TensorFlow) variable; one value if not mirrored."""
    inner = getattr(variable, "value", variable)  # a Keras 3 variable wraps a tf.Variable
    if callable(inner):  # tf.Variable.value is a method: the variable itself is what we want
        inner = variable
    return tuple(getattr(inner, "values", (inner,)))


def replica_copies_difference(variables) -> float:
    """The largest ``|copy_r - copy_0|`` over the replicas' copies of each variable.

    ``variables``: a Keras model (its weights) or a list of variables. A mirrored variable
    (created in ``MirroredStrategy.scope()``) has one copy per replica; after synchronous
    training they must be identical, so this returns 0.0. Plain variables count as one copy.
    """
    if hasattr(variables, "weights"):
        variables = variables.weights
    worst = 0.0
    for variable in variables:
        copies = [np.asarray(c) for c in _replica_values(variable)]
        for copy in copies[1:]:
            if copy.size:
                worst = max(worst, float(np.max(np.abs(copy.astype(np.float64) - copies[0]))))
    return worst


def cross_device_ops_name(strategy) -> str:
    """Which cross-device reduction ``strategy`` uses, e.g. ``"CollectiveAllReduce (RING)"``.

    ``MirroredStrategy`` keeps it in the private ``strategy.extended._cross_device_ops``
    (TensorFlow 2.21). For ``CollectiveAllReduce`` the implementation (``RING`` or
    ``NCCL``) is added from its private ``_options``. Raises ``TypeError`` for a strategy
    without cross-device ops (e.g. the default strategy or ``OneDeviceStrategy``).
    """
    extended = getattr(strategy, "extended", None)
    ops = getattr(extended, "_cross_device_ops", None)
    if ops is None:
        raise TypeError(
            f"{type(strategy).__name__} has no cross-device ops: only strategies with "
            "several replicas (MirroredStrategy) reduce across devices"
        )
    name = type(ops).__name__
    implementation = getattr(getattr(ops, "_options", None), "implementation", None)
    if implementation is not None:
        name += f" ({getattr(implementation, 'name', implementation)})"
    return name
