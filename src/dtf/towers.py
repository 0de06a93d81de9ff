"""In-graph replication ("towers"): one model copy per device, gradients averaged, one update.

This is the design of TensorFlow 1's ``cifar10_multi_gpu_train.py``, written for TF2 in a
handful of plain functions (notebook 03b builds the same thing by hand first)::

    global batch ──split──► tower 0 on device 0: loss, gradients ─┐
                      └───► tower 1 on device 1: loss, gradients ─┴─► average on the
                                                                      parameter device,
                                                                      apply once

- :func:`split_batch` cuts a global batch into equal shards, one per tower.
- :func:`average_gradients` averages the towers' gradients variable by variable.
- :func:`make_tower_train_step` builds the ``tf.function`` that does one synchronous step.
- :func:`init_mlp` / :func:`mlp_logits` are a tiny two-layer network made of explicit
  ``tf.Variable`` s (``weights_1``, ``biases_1``, ``weights_2``, ``biases_2``), so that where
  each variable lives is plain to see.

Each tower's loss is the *mean* over its shard. With equal shards the average of the tower
gradients is then exactly the gradient of the mean loss over the whole global batch, so a
tower step equals a single-device step on the same batch (up to float round-off).

``tf.distribute.MirroredStrategy`` does all of this for you (with NCCL all-reduce on GPUs);
these helpers exist to show what it does.

Importing this module does not import TensorFlow (each function imports it when called), so
``import dtf.towers`` never starts TensorFlow before ``dtf.devices.setup`` has run.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from dtf._util import whole_number

__all__ = [
    "MLP_VARIABLES",
    "average_gradients",
    "init_mlp",
    "make_tower_train_step",
    "mlp_logits",
    "split_batch",
]

#: Names (and order) of the variables :func:`init_mlp` creates, as in the seed notes (000).
MLP_VARIABLES: tuple[str, ...] = ("weights_1", "biases_1", "weights_2", "biases_2")


def _check_num_towers(num_towers) -> int:
    return whole_number(
        "num_towers", num_towers, minimum=1, hint="Give one tower per device, e.g. len(devices)."
    )


def split_batch(x, y, num_towers: int) -> list[tuple]:
    """Cut a global batch into ``num_towers`` equal shards ``[(x_0, y_0), (x_1, y_1), ...]``.

    Shard ``i`` holds examples ``i*k .. (i+1)*k - 1`` of the batch (``k = batch // num_towers``),
    in order. ``x`` and ``y`` may be NumPy arrays or tensors; the shards are tensors, made in
    the current device scope.

    Raises:
        ValueError: ``x`` and ``y`` have different batch sizes, or the batch size does not
            divide evenly by ``num_towers``. Unequal shards would make the average of the
            tower gradients differ from the gradient of the global mean loss, so this is
            refused rather than padded: choose a global batch that is a multiple of the
            number of devices (and drop the last, smaller batch of an epoch).
        TypeError / ValueError: ``num_towers`` is not a whole number >= 1.
    """
    n = _check_num_towers(num_towers)
    import tensorflow as tf

    x = tf.convert_to_tensor(x)
    y = tf.convert_to_tensor(y)
    batch, batch_y = x.shape[0], y.shape[0]
    if batch is not None and batch_y is not None and batch != batch_y:
        raise ValueError(f"x has {batch} examples but y has {batch_y}")
    if batch is None:
        # Unknown while tracing: tf.split checks divisibility when the step runs.
        return list(zip(tf.split(x, n), tf.split(y, n), strict=True))
    if batch % n:
        lower, upper = (batch // n) * n, -(-batch // n) * n
        raise ValueError(
            f"a global batch of {batch} examples cannot be split evenly across {n} towers "
            f"({batch} % {n} = {batch % n}). Choose a global batch that is a multiple of "
            f"the number of devices (e.g. {lower or n} or {upper}), and drop the last "
            "smaller batch (drop_remainder=True)."
        )
    return list(zip(tf.split(x, n), tf.split(y, n), strict=True))


def average_gradients(tower_grads: Sequence[Sequence]) -> list:
    """Average gradients variable by variable: ``tower_grads[t][v]`` is tower ``t``'s gradient
    for variable ``v`` (every tower lists its variables in the same order).

    Returns one gradient per variable, ``sum_t tower_grads[t][v] / num_towers``, computed in
    the current device scope (call it under ``tf.device(param_device)`` to average there).

    - ``IndexedSlices`` (the sparse gradients of an embedding lookup) are converted to dense
      tensors with ``tf.convert_to_tensor`` first: simple and correct, though a large
      embedding would rather be averaged sparsely.
    - ``None`` (the variable does not affect the loss): if every tower gives ``None`` the
      result for that variable is ``None`` too, and :func:`make_tower_train_step` skips it,
      as ``optimizer.apply_gradients`` would. If only some towers give ``None`` the towers
      are not copies of one model, and this raises ``ValueError``.

    Raises:
        ValueError: no towers, towers with different numbers of gradients, or ``None`` for
            a variable in some towers but not in others.
    """
    towers = [list(grads) for grads in tower_grads]
    if not towers:
        raise ValueError("tower_grads is empty: expected one list of gradients per tower")
    sizes = {len(grads) for grads in towers}
    if len(sizes) != 1:
        raise ValueError(
            f"every tower must give one gradient per variable, got lists of lengths "
            f"{[len(g) for g in towers]}"
        )
    import tensorflow as tf

    averaged: list = []
    for index, grads in enumerate(zip(*towers, strict=True)):
        missing = [t for t, g in enumerate(grads) if g is None]
        if len(missing) == len(grads):
            averaged.append(None)
            continue
        if missing:
            raise ValueError(
                f"variable #{index} has no gradient in tower(s) {missing} but has one in the "
                "others: all towers must run the same model"
            )
        dense = [tf.convert_to_tensor(g) for g in grads]  # IndexedSlices -> dense
        averaged.append(tf.add_n(dense) / len(dense) if len(dense) > 1 else dense[0])
    return averaged


def init_mlp(
    input_dim: int,
    hidden_units: int,
    num_classes: int,
    *,
    seed: int = 0,
    device: str | Sequence[str] | None = None,
) -> dict:
    """A two-layer perceptron as four ``tf.Variable`` s (:data:`MLP_VARIABLES`).

    Weights are drawn with NumPy from ``seed`` (Glorot-uniform), biases are zero, so the same
    arguments always give the same values, whatever TensorFlow's global seed.

    ``device``: where to create the variables. ``None``: TensorFlow's default; a string:
    all four there (e.g. the CPU as parameter device); a sequence of devices: layer ``i``
    (its weights and biases) on ``device[i % len(device)]``, the seed notes' layout
    (``weights_1``/``biases_1`` on one device, ``weights_2``/``biases_2`` on the next).

    Sizes follow :func:`dtf._util.whole_number` (NumPy integers are fine): ``TypeError`` for a
    float or bool, ``ValueError`` for ``input_dim``/``hidden_units`` < 1, ``num_classes`` < 2
    or an empty ``device`` list.
    """
    input_dim = whole_number("input_dim", input_dim, minimum=1)
    hidden_units = whole_number("hidden_units", hidden_units, minimum=1)
    num_classes = whole_number(
        "num_classes", num_classes, minimum=2, hint="A classifier needs at least two classes."
    )
    if device is None or isinstance(device, str):
        layer_devices = [device, device]
    else:
        device = list(device)
        if not device:
            raise ValueError("device must be None, a device name or a non-empty list of names")
        layer_devices = [device[i % len(device)] for i in range(2)]

    import tensorflow as tf

    rng = np.random.default_rng(seed)

    def glorot(fan_in: int, fan_out: int) -> np.ndarray:
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, size=(fan_in, fan_out)).astype(np.float32)

    shapes = [(input_dim, hidden_units), (hidden_units, num_classes)]
    layers = zip(shapes, layer_devices, strict=True)
    params = {}
    for layer, ((fan_in, fan_out), dev) in enumerate(layers, start=1):
        w, b = glorot(fan_in, fan_out), np.zeros(fan_out, np.float32)
        with tf.device(dev):
            params[f"weights_{layer}"] = tf.Variable(w, name=f"weights_{layer}")
            params[f"biases_{layer}"] = tf.Variable(b, name=f"biases_{layer}")
    return params


def mlp_logits(params: Mapping, x):
    """Forward pass of :func:`init_mlp`'s network: ``relu(x W1 + b1) W2 + b2`` (logits).

    Each matmul runs in the caller's device scope; the variables are read where they live.
    (The seed notes also put a ReLU on the logits; a classifier's logits must be able to go
    negative, so there is none here.)
    """
    import tensorflow as tf

    hidden = tf.nn.relu(tf.matmul(x, params["weights_1"]) + params["biases_1"])
    return tf.matmul(hidden, params["weights_2"]) + params["biases_2"]


def make_tower_train_step(
    model_fn: Callable,
    variables: Sequence,
    loss_fn: Callable,
    optimizer,
    devices: Sequence[str],
    param_device: str | None = None,
) -> Callable:
    """Build ``step(x, y) -> loss``: one synchronous in-graph-replicated training step.

    Inside one ``tf.function``, ``step`` splits the global batch into ``len(devices)`` equal
    shards (:func:`split_batch`), and for tower ``i`` under ``tf.device(devices[i])`` computes
    ``loss_i = loss_fn(y_i, model_fn(x_i))`` (a mean over the shard) and its gradients with
    respect to ``variables``. It then averages the gradients (:func:`average_gradients`) and
    applies them once. It returns the mean of the tower losses, i.e. the mean loss over the
    global batch.

    Args:
        model_fn: ``x -> logits``, reading the ``variables`` (e.g. a closure over
            :func:`mlp_logits`).
        variables: the trainable ``tf.Variable`` s, created by the caller where they should
            live (``with tf.device(param_device)``, or spread over the devices).
        loss_fn: ``(y, logits) -> scalar``, the mean loss over the examples it is given.
        optimizer: a Keras optimizer (built here, in ``param_device``'s scope, if it is not
            built yet), or a number: the learning rate of plain SGD (``v -= lr * g``).
        devices: one tower per device name, e.g. ``dtf.devices.setup(...).names``.
        param_device: where gradients are averaged (and the optimizer's own variables live),
            e.g. ``"/device:CPU:0"``. ``None``: each variable's gradients are averaged on
            the device that holds that variable (variables spread over the devices).

    The global batch passed to ``step`` must be a multiple of ``len(devices)``
    (:func:`split_batch` raises ``ValueError`` otherwise, when the step is traced).
    """
    devices = [devices] if isinstance(devices, str) else list(devices)
    if not devices:
        raise ValueError("devices is empty: give at least one device name (one tower each)")
    variables = list(variables)
    if not variables:
        raise ValueError("variables is empty: nothing to train")

    is_rate = isinstance(optimizer, numbers.Real) and not isinstance(optimizer, bool)
    if not is_rate and not hasattr(optimizer, "apply_gradients"):
        raise TypeError(
            "optimizer must be a Keras optimizer (with apply_gradients) or a learning rate, "
            f"got {type(optimizer).__name__}"
        )
    import tensorflow as tf

    if is_rate:
        learning_rate = float(optimizer)

        def apply(grads_and_vars):
            for g, v in grads_and_vars:
                with tf.device(v.device):  # update each variable where it lives
                    v.assign_sub(learning_rate * g)

    else:
        if hasattr(optimizer, "build") and not getattr(optimizer, "built", True):
            # Keras 3 creates its slot variables on first use; doing that inside the
            # tf.function would create variables while tracing. Build them now, here.
            with tf.device(param_device):
                optimizer.build(variables)

        def apply(grads_and_vars):
            optimizer.apply_gradients(grads_and_vars)

    @tf.function
    def step(x, y):
        with tf.device(param_device):
            shards = split_batch(x, y, len(devices))
        tower_losses, tower_grads = [], []
        for device, (x_i, y_i) in zip(devices, shards, strict=True):
            with tf.device(device):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y_i, model_fn(x_i))
                tower_losses.append(loss)
                tower_grads.append(tape.gradient(loss, variables))
        if param_device is not None:
            with tf.device(param_device):
                grads = average_gradients(tower_grads)
                mean_loss = tf.add_n(tower_losses) / len(tower_losses)
        else:  # average each variable's gradients where that variable lives
            grads = []
            for index, v in enumerate(variables):
                with tf.device(v.device):
                    grads += average_gradients([[g[index]] for g in tower_grads])
            with tf.device(devices[0]):
                mean_loss = tf.add_n(tower_losses) / len(tower_losses)
        apply([(g, v) for g, v in zip(grads, variables, strict=True) if g is not None])
        return mean_loss

    return step
