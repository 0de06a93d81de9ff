"""Model, data and pipeline parallelism for one small Keras network, and what each one costs.

Notebook 04 trains the same stack of ``Dense`` layers three ways on the same devices and
batches, from the same initial weights:

- **data parallel**: a full copy of the network (a *replica*) on every device; the global
  batch is cut into one equal shard per replica, each computes its gradients, the gradients
  are averaged on the first device and every replica applies the same update
  (:func:`build_replicas`, :func:`data_parallel_gradients`);
- **model parallel**: the layers cut into ``K`` contiguous groups (*stages*), stage ``k``'s
  variables created on its own device, the whole batch flowing through the stages in turn
  (:func:`build_stages`, :func:`pipeline_gradients` with one micro-batch);
- **pipelined model parallel** (GPipe): the batch cut into ``M`` equal micro-batches that
  flow through the ``K`` stages one after the other, so that stage ``k`` can work on
  micro-batch ``m`` while stage ``k + 1`` works on ``m - 1``; the micro-batch gradients are
  accumulated and the variables updated once per batch (:func:`pipeline_gradients`).

Why the pipeline computes exactly the model-parallel gradient: the loss is the mean over the
``B`` examples of the batch. With ``M`` equal micro-batches of ``B / M`` examples,

    L = (1/B) sum_i l_i = (1/M) sum_m [ (M/B) sum_{i in m} l_i ] = (1/M) sum_m L_m,

so ``grad L = (1/M) sum_m grad L_m``: accumulate the micro-batch gradients and divide by
``M``. (With unequal micro-batches the plain mean of means would weight examples unequally,
which is why :func:`split_micro_batches` refuses them.)

Every stage runs its backward pass on its own device. That needs saying: TensorFlow 2's
``GradientTape.gradient`` creates the gradient ops in the device scope of the *call*, not
of the forward ops (TensorFlow 1's ``tf.gradients`` had ``colocate_gradients_with_ops``), so
one tape around the whole network would run every stage's backward pass on one device.
Here each stage keeps its own tape and is differentiated under its own ``tf.device``; only
activations (forward) and their gradients (backward) cross from stage to stage.

The cost model, computed from shapes (float32, 4 bytes per number):

- :func:`parameter_bytes`: bytes of variables on each device;
- :func:`activation_bytes_per_step`: model and pipeline parallel move, at every boundary
  between two stages on different devices, the activations forward and their gradients
  backward: ``2 * B * width * 4`` bytes per boundary, whatever ``M`` is;
- :func:`gradient_bytes_per_step`: data parallel, as done here, sends every other replica's
  gradients to the first device and the average back: ``2 * (N - 1) * P * 4`` bytes for
  ``P`` parameters and ``N`` replicas, the same total as a ring all-reduce;
- :func:`gpipe_schedule` and :func:`bubble_fraction`: which stage works on which micro-batch
  at each tick, and the share of idle stage-ticks, ``(K - 1) / (M + K - 1)``.

Importing this module does not import TensorFlow (each function imports it when called), so
``import dtf.parallel`` never starts TensorFlow before ``dtf.devices.setup`` has run.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dtf._util import whole_number
from dtf.placement import short_device

__all__ = [
    "ACTIVATION",
    "BYTES_PER_NUMBER",
    "Stage",
    "accuracy",
    "activation_bytes_per_step",
    "apply_sgd",
    "build_replicas",
    "build_stages",
    "bubble_fraction",
    "count_parameters",
    "data_parallel_gradients",
    "gpipe_schedule",
    "gradient_bytes_per_step",
    "initial_weights",
    "layer_groups",
    "make_data_parallel_step",
    "make_pipeline_step",
    "max_weight_difference",
    "parameter_bytes",
    "pipeline_gradients",
    "schedule_grid",
    "split_micro_batches",
    "variable_device",
    "weights",
]

#: float32: every variable, activation and gradient here.
BYTES_PER_NUMBER = 4

#: Between layers. Smooth on purpose: the ways of training add the same numbers in different
#: orders, and with ReLU a unit that sits within round-off of 0 can switch on in one run and
#: off in the other, which moves a weight by ~1e-4 at once. With tanh round-off stays round-off.
ACTIVATION = "tanh"


# --------------------------------------------------------------------------------------------
# Shapes and layouts: plain Python, no TensorFlow


def _check_layer_sizes(layer_sizes) -> tuple[int, ...]:
    sizes = tuple(layer_sizes)
    if len(sizes) < 2:
        raise ValueError(
            f"layer_sizes must list the input width then one width per layer, e.g. "
            f"(64, 128, 10), got {sizes!r}"
        )
    return tuple(whole_number("each layer size", s, minimum=1) for s in sizes)


def count_parameters(layer_sizes: Sequence[int]) -> int:
    """Weights and biases of a stack of ``Dense`` layers ``layer_sizes[0] -> ... -> [-1]``."""
    sizes = _check_layer_sizes(layer_sizes)
    return sum(n_in * n_out + n_out for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True))


def layer_groups(num_layers: int, num_stages: int) -> list[range]:
    """Cut layers ``0 .. num_layers - 1`` into ``num_stages`` contiguous groups of nearly
    equal size (the first groups get one more when it does not divide), in order.

    Raises ``ValueError`` when there are more stages than layers: a stage without a layer
    would only pass its input on.
    """
    num_layers = whole_number("num_layers", num_layers, minimum=1)
    num_stages = whole_number("num_stages", num_stages, minimum=1)
    if num_stages > num_layers:
        raise ValueError(
            f"cannot cut {num_layers} layer(s) into {num_stages} stages: use at most "
            f"{num_layers} stages (one layer each), e.g. num_stages=min(layers, devices)"
        )
    base, extra = divmod(num_layers, num_stages)
    groups, start = [], 0
    for k in range(num_stages):
        size = base + (1 if k < extra else 0)
        groups.append(range(start, start + size))
        start += size
    return groups


def bubble_fraction(num_stages: int, micro_batches: int) -> float:
    """Idle share of a GPipe schedule: ``(K - 1) / (M + K - 1)``.

    Each of the forward and backward phases takes ``M + K - 1`` ticks; in each tick each of
    the ``K`` stages either works on one micro-batch or waits. A stage works ``M`` ticks per
    phase, so ``K - 1`` of its ``M + K - 1`` ticks are idle: the pipeline filling up and
    draining.
    """
    k = whole_number("num_stages", num_stages, minimum=1)
    m = whole_number("micro_batches", micro_batches, minimum=1)
    return (k - 1) / (m + k - 1)


def gpipe_schedule(num_stages: int, micro_batches: int) -> list[dict]:
    """The GPipe schedule as a list of ``{"tick", "stage", "phase", "micro_batch"}`` rows,
    one per unit of work, in tick order.

    Forward: at tick ``t`` stage ``k`` runs micro-batch ``t - k`` (when ``0 <= t - k < M``).
    Backward starts once the last stage has done its last forward pass and runs the other
    way: at tick ``T + t`` (``T = M + K - 1``) stage ``k`` runs the backward pass of
    micro-batch ``M - 1 - (t - (K - 1 - k))``. Idle stage-ticks have no row.
    """
    k_stages = whole_number("num_stages", num_stages, minimum=1)
    m = whole_number("micro_batches", micro_batches, minimum=1)
    ticks = m + k_stages - 1
    rows = []
    for t in range(ticks):
        for k in range(k_stages):
            if 0 <= t - k < m:
                rows.append({"tick": t, "stage": k, "phase": "F", "micro_batch": t - k})
    for t in range(ticks):
        for k in range(k_stages):
            j = t - (k_stages - 1 - k)  # how many backward passes stage k has started
            if 0 <= j < m:
                rows.append({"tick": ticks + t, "stage": k, "phase": "B", "micro_batch": m - 1 - j})
    return rows


def schedule_grid(num_stages: int, micro_batches: int) -> list[list[str]]:
    """:func:`gpipe_schedule` as text: ``grid[k][t]`` is ``"F2"`` (forward of micro-batch 2),
    ``"B0"`` or ``"."`` (idle), one row per stage."""
    rows = gpipe_schedule(num_stages, micro_batches)
    ticks = 2 * (micro_batches + num_stages - 1)
    grid = [["."] * ticks for _ in range(num_stages)]
    for row in rows:
        grid[row["stage"]][row["tick"]] = f"{row['phase']}{row['micro_batch']}"
    return grid


def gradient_bytes_per_step(num_parameters: int, num_replicas: int) -> int:
    """Bytes data parallelism moves between devices per step, as :func:`make_data_parallel_step`
    does it: ``N - 1`` replicas send their gradients (``P`` numbers each) to the first device,
    which sends the average back to them: ``2 * (N - 1) * P * 4``. A ring all-reduce moves the
    same total, shared evenly between the devices."""
    p = whole_number("num_parameters", num_parameters, minimum=0)
    n = whole_number("num_replicas", num_replicas, minimum=1)
    return 2 * (n - 1) * p * BYTES_PER_NUMBER


def _check_learning_rate(learning_rate) -> float:
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, numbers.Real):
        raise TypeError(f"learning_rate must be a number, got {learning_rate!r}")
    if not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate!r}")
    return float(learning_rate)


def _boundary_bytes(widths: Sequence[int], batch: int) -> int:
    return sum(2 * batch * w * BYTES_PER_NUMBER for w in widths)


# --------------------------------------------------------------------------------------------
# Building the network on devices


def variable_device(variable) -> str:
    """Where a variable lives, short form (``CPU:1``). A ``tf.Variable`` has a ``.device``
    (its ``.value`` is a method); a Keras 3 variable has none, but wraps a ``tf.Variable``,
    its ``.value``, which has one."""
    device = getattr(variable, "device", None)
    if not isinstance(device, str):
        device = getattr(getattr(variable, "value", None), "device", "")
    return short_device(device if isinstance(device, str) else "")


def initial_weights(layer_sizes: Sequence[int], seed: int = 0) -> list[tuple]:
    """Glorot-uniform kernels and zero biases, drawn with NumPy from ``seed``: the same
    arguments give the same values, so every way of training starts from the same weights."""
    sizes = _check_layer_sizes(layer_sizes)
    rng = np.random.default_rng(seed)
    weights = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
        limit = np.sqrt(6.0 / (n_in + n_out))
        kernel = rng.uniform(-limit, limit, size=(n_in, n_out)).astype(np.float32)
        weights.append((kernel, np.zeros(n_out, np.float32)))
    return weights


@dataclass
class Stage:
    """A group of consecutive ``Dense`` layers whose variables live on ``device``.

    Calling a stage runs its layers under ``tf.device(device)``. A data-parallel *replica* is
    a stage that holds every layer.
    """

    index: int
    device: str
    layers: list = field(default_factory=list)
    layer_indices: tuple[int, ...] = ()

    @property
    def variables(self) -> list:
        return [v for layer in self.layers for v in layer.trainable_variables]

    @property
    def output_width(self) -> int:
        return int(self.layers[-1].units)

    def __call__(self, x):
        import tensorflow as tf

        with tf.device(self.device):
            for layer in self.layers:
                x = layer(x)
        return x

    def __repr__(self) -> str:
        layers = ", ".join(str(i) for i in self.layer_indices)
        return f"Stage({self.index}, {short_device(self.device)}, layers {layers})"


def _make_layers(sizes, indices, device, weights, prefix, activation):
    import keras
    import tensorflow as tf

    layers = []
    last = len(sizes) - 2
    with tf.device(device):  # variables are created here, and stay here
        for i in indices:
            layer = keras.layers.Dense(
                sizes[i + 1],
                activation=None if i == last else activation,
                name=f"{prefix}_dense_{i}",
            )
            layer.build((None, sizes[i]))
            layer.set_weights(list(weights[i]))
            layers.append(layer)
    return layers


def _check_devices(devices) -> list[str]:
    devices = [devices] if isinstance(devices, str) else list(devices)
    if not devices:
        raise ValueError("devices is empty: give at least one device name, e.g. setup.names")
    return devices


def build_stages(
    layer_sizes: Sequence[int],
    devices: Sequence[str],
    *,
    num_stages: int | None = None,
    seed: int = 0,
    activation: str = ACTIVATION,
) -> list[Stage]:
    """The network ``layer_sizes[0] -> ... -> layer_sizes[-1]`` (ReLU between layers, logits
    out) cut into stages: stage ``k`` holds the layers of ``layer_groups(...)[k]`` and is built
    under ``tf.device(devices[k % len(devices)])``, so its variables live there.

    ``num_stages`` defaults to ``min(number of layers, len(devices))``: one device per stage
    while there are enough of both. Weights come from :func:`initial_weights` with ``seed``.
    """
    sizes = _check_layer_sizes(layer_sizes)
    devices = _check_devices(devices)
    num_layers = len(sizes) - 1
    k = min(num_layers, len(devices)) if num_stages is None else num_stages
    groups = layer_groups(num_layers, k)
    weights = initial_weights(sizes, seed)
    stages = []
    for index, group in enumerate(groups):
        device = devices[index % len(devices)]
        layers = _make_layers(sizes, group, device, weights, f"stage_{index}", activation)
        stages.append(Stage(index, device, layers, tuple(group)))
    return stages


def build_replicas(
    layer_sizes: Sequence[int],
    devices: Sequence[str],
    *,
    seed: int = 0,
    activation: str = ACTIVATION,
) -> list[Stage]:
    """One full copy of the network per device (data parallelism), all from the same
    :func:`initial_weights`: replica ``r`` holds every layer, on ``devices[r]``."""
    sizes = _check_layer_sizes(layer_sizes)
    devices = _check_devices(devices)
    weights = initial_weights(sizes, seed)
    everything = range(len(sizes) - 1)
    return [
        Stage(r, d, layers, tuple(everything))
        for r, d in enumerate(devices)
        for layers in [_make_layers(sizes, everything, d, weights, f"replica_{r}", activation)]
    ]


def parameter_bytes(stages: Sequence[Stage]) -> dict[str, int]:
    """Bytes of variables on each device (short names), from the variables' shapes and the
    device each one really lives on (:func:`variable_device`)."""
    out: dict[str, int] = {}
    for stage in stages:
        for v in stage.variables:
            nbytes = int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize
            out[variable_device(v)] = out.get(variable_device(v), 0) + nbytes
    return out


def activation_bytes_per_step(stages: Sequence[Stage], batch: int) -> int:
    """Bytes model (and pipeline) parallelism moves between devices for one batch of
    ``batch`` examples: at each boundary between consecutive stages on different devices,
    the activations ``(batch, width)`` forward and their gradients backward. Cutting the batch
    into micro-batches changes when they move, not how many bytes move."""
    batch = whole_number("batch", batch, minimum=1)
    widths = [
        a.output_width
        for a, b in zip(stages[:-1], stages[1:], strict=True)
        if short_device(a.device) != short_device(b.device)
    ]
    return _boundary_bytes(widths, batch)


# --------------------------------------------------------------------------------------------
# Gradients and training steps (call inside a tf.function)


def _mean_cross_entropy(y, logits):
    import tensorflow as tf

    y = tf.cast(y, tf.int64)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def split_micro_batches(x, y, micro_batches: int) -> list[tuple]:
    """Cut a batch into ``micro_batches`` equal, consecutive pieces ``[(x_0, y_0), ...]``.

    Raises ``ValueError`` when the batch does not divide evenly: the accumulated gradient
    equals the whole batch's only for equal micro-batches (see the module's docstring).
    """
    m = whole_number("micro_batches", micro_batches, minimum=1)
    import tensorflow as tf

    x, y = tf.convert_to_tensor(x), tf.convert_to_tensor(y)
    batch = x.shape[0]
    if batch is not None and y.shape[0] is not None and batch != y.shape[0]:
        raise ValueError(f"x has {batch} examples but y has {y.shape[0]}")
    if batch is not None and batch % m:
        divisors = [d for d in range(1, batch + 1) if batch % d == 0]
        raise ValueError(
            f"a batch of {batch} examples cannot be cut into {m} equal micro-batches "
            f"({batch} % {m} = {batch % m}): choose micro_batches from {divisors}"
        )
    return list(zip(tf.split(x, m), tf.split(y, m), strict=True))


def pipeline_gradients(
    stages: Sequence[Stage], x, y, micro_batches: int = 1, loss_fn: Callable | None = None
):
    """``(mean loss, gradients)`` of the batch ``(x, y)`` through ``stages``, GPipe style.

    The batch is cut into ``micro_batches`` equal pieces. Forward: each micro-batch goes
    through stage 0, 1, ..., each stage under its own device and its own tape. Backward, in
    reverse: the last stage differentiates ``loss_m / M``; every stage turns the gradient of
    its output into gradients of its variables and of its input, under its own device, and
    hands the input gradient to the stage before. Each variable's micro-batch gradients are
    summed on its device. ``gradients[k]`` lists stage ``k``'s, in ``stage.variables`` order.

    With ``micro_batches=1`` this is plain model parallelism. Nothing here forces an order
    between micro-batches: in a ``tf.function`` TensorFlow runs every op whose inputs are
    ready, so stage ``k`` can work on micro-batch ``m + 1`` while stage ``k + 1`` works on
    ``m``, which is the pipeline.
    """
    stages = list(stages)
    if not stages:
        raise ValueError("stages is empty: build them with build_stages(...)")
    loss_fn = loss_fn or _mean_cross_entropy
    m = whole_number("micro_batches", micro_batches, minimum=1)
    import tensorflow as tf

    with tf.device(stages[0].device):
        pieces = split_micro_batches(x, y, m)

    last = len(stages) - 1
    tapes, inputs, outputs, losses = [], [], [], []  # [i][k]: micro-batch i, stage k
    for x_i, y_i in pieces:  # forward: micro-batch by micro-batch, stage by stage
        row = ([], [], [])
        h = x_i
        for k, stage in enumerate(stages):
            with tf.device(stage.device), tf.GradientTape() as tape:
                if k > 0:
                    tape.watch(h)  # the previous stage needs the gradient of its output
                out = stage(h)
                if k == last:
                    losses.append(loss_fn(y_i, out))
                    out = losses[-1] / m  # this micro-batch's share of the batch's mean
            for seq, item in zip(row, (tape, h, out), strict=True):
                seq.append(item)
            h = out
        for seq, item in zip((tapes, inputs, outputs), row, strict=True):
            seq.append(item)

    per_stage = [[] for _ in stages]  # per_stage[k]: stage k's gradients, one list per piece
    for i in reversed(range(m)):  # backward: last micro-batch first, last stage first
        upstream = None  # d(loss)/d(output of stage k), from stage k + 1
        for k in reversed(range(len(stages))):
            stage = stages[k]
            sources = stage.variables if k == 0 else [*stage.variables, inputs[i][k]]
            with tf.device(stage.device):  # the backward pass runs where the stage lives
                grads = tapes[i][k].gradient(outputs[i][k], sources, output_gradients=upstream)
            per_stage[k].append(grads[: len(stage.variables)])
            upstream = grads[-1] if k > 0 else None

    gradients = []
    for k, stage in enumerate(stages):
        with tf.device(stage.device):  # accumulate where the variables live
            gradients.append([tf.add_n(list(gs)) for gs in zip(*per_stage[k], strict=True)])
    with tf.device(stages[-1].device):
        loss = tf.add_n(losses) / m
    return loss, gradients


def data_parallel_gradients(replicas: Sequence[Stage], x, y, loss_fn: Callable | None = None):
    """``(mean loss, averaged gradients)``: the batch cut into one equal shard per replica
    (:func:`dtf.towers.split_batch`), each replica's loss and gradients computed on its own
    device, the gradients averaged on the first replica's device.

    With equal shards the average of the shard-mean gradients is the gradient of the mean
    loss over the whole batch: the same gradient as one device (or the stages) on the batch.
    """
    replicas = list(replicas)
    if not replicas:
        raise ValueError("replicas is empty: build them with build_replicas(...)")
    loss_fn = loss_fn or _mean_cross_entropy
    import tensorflow as tf

    from dtf.towers import average_gradients, split_batch

    with tf.device(replicas[0].device):
        shards = split_batch(x, y, len(replicas))
    losses, grads = [], []
    for replica, (x_r, y_r) in zip(replicas, shards, strict=True):
        with tf.device(replica.device):
            with tf.GradientTape() as tape:
                losses.append(loss_fn(y_r, replica(x_r)))
            grads.append(tape.gradient(losses[-1], replica.variables))
    with tf.device(replicas[0].device):  # gather, average (and send back, when applied)
        return tf.add_n(losses) / len(losses), average_gradients(grads)


def apply_sgd(variables: Sequence, gradients: Sequence, learning_rate: float) -> None:
    """Plain SGD, ``v -= learning_rate * g``, each update on the device that holds ``v``."""
    import tensorflow as tf

    for v, g in zip(variables, gradients, strict=True):
        with tf.device(variable_device(v)):
            v.assign_sub(learning_rate * g)


def make_pipeline_step(
    stages: Sequence[Stage],
    learning_rate: float,
    micro_batches: int = 1,
    loss_fn: Callable | None = None,
) -> Callable:
    """``step(x, y) -> mean loss``: one ``tf.function`` training step of model parallelism
    (``micro_batches=1``) or of a GPipe pipeline: :func:`pipeline_gradients`, then one SGD
    update of every stage's variables on its own device."""
    stages = list(stages)
    if not stages:
        raise ValueError("stages is empty: build them with build_stages(...)")
    m = whole_number("micro_batches", micro_batches, minimum=1)
    learning_rate = _check_learning_rate(learning_rate)
    import tensorflow as tf

    @tf.function
    def step(x, y):
        loss, gradients = pipeline_gradients(stages, x, y, m, loss_fn)
        for stage, grads in zip(stages, gradients, strict=True):
            apply_sgd(stage.variables, grads, learning_rate)
        return loss

    return step


def make_data_parallel_step(
    replicas: Sequence[Stage], learning_rate: float, loss_fn: Callable | None = None
) -> Callable:
    """``step(x, y) -> mean loss``: one ``tf.function`` step of data parallelism:
    :func:`data_parallel_gradients`, then every replica applies the same averaged gradients
    to its own copy of the variables, on its own device, so the copies stay identical."""
    replicas = list(replicas)
    if not replicas:
        raise ValueError("replicas is empty: build them with build_replicas(...)")
    learning_rate = _check_learning_rate(learning_rate)
    import tensorflow as tf

    @tf.function
    def step(x, y):
        loss, averaged = data_parallel_gradients(replicas, x, y, loss_fn)
        for replica in replicas:
            apply_sgd(replica.variables, averaged, learning_rate)
        return loss

    return step


# --------------------------------------------------------------------------------------------
# Checking results


def weights(stages: Sequence[Stage]) -> list[np.ndarray]:
    """Every variable of ``stages`` as a NumPy array, in layer order (kernel, bias, ...)."""
    return [np.asarray(v.numpy()) for stage in stages for v in stage.variables]


def max_weight_difference(a: Sequence[Stage], b: Sequence[Stage]) -> float:
    """Largest ``|a - b|`` over all weights of two builds of the same network (stages or
    one replica, ``[replicas[r]]``)."""
    wa, wb = weights(a), weights(b)
    if [w.shape for w in wa] != [w.shape for w in wb]:
        raise ValueError("the two networks do not have the same variables (shapes differ)")
    return max(float(np.max(np.abs(p - q))) for p, q in zip(wa, wb, strict=True))


def accuracy(stages: Sequence[Stage], x, y) -> float:
    """Share of examples whose largest logit is the label, the network run through
    ``stages`` in order (a data-parallel replica: ``[replica]``)."""
    h = x
    for stage in stages:
        h = stage(h)
    predicted = np.argmax(np.asarray(h), axis=1)
    return float(np.mean(predicted == np.asarray(y)))
