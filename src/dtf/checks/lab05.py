"""Checkers of Lab 05 · The mirrored training step (``labs/05_mirrored_step_lab.ipynb``).

Tasks: 1 the distributed dataset, 2 a replica's loss, 3 model and optimizer in the scope,
4 the distributed step and 5 (optional) one epoch, both compared with single-device training,
6 auto-shard policies (:func:`policy_outcome`), 7 a trace's bottleneck. The checkers use the
lab's strategy and never create one: a second ``MirroredStrategy`` in the process breaks the
all-reduce of both ("shape mismatch", tensorflow#62790, TensorFlow 2.21).
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from dtf._util import whole_number
from dtf.checks._shared import expect_weights, numbered_labels, pair
from dtf.checks.core import (
    Mistake,
    Wrong,
    all_close,
    as_array,
    call,
    call_function,
    counted,
    diagnose,
    expect_close,
    expect_kind,
    expect_number,
    full_float32,
    numbered,
    short,
    task,
)

LAB = "lab05"

#: The lab's network (:func:`make_model`): digits' 64 features, one hidden layer, 10 classes.
FEATURES, HIDDEN, CLASSES = 64, 32, 10
#: The optimizer of tasks 3 to 5: plain SGD with momentum.
LEARNING_RATE = 0.1
MOMENTUM = 0.9
#: Tasks 4 and 5: tolerance of the comparison with single-device training.
ATOL = 1e-5
#: Task 1: the per-replica batches the learner's function is called with.
TASK1_PER_REPLICA = (3, 2)
#: Task 2: global batches split among replicas as experimental_distribute_dataset splits
#: 12, 10 and 3 over 4 replicas, and 5 over one (the last one with an empty shard).
SHARD_CASES = ((3, 3, 3, 3), (3, 3, 2, 2), (1, 1, 1, 0), (5,))
#: Task 4: examples per replica and steps of the comparison.
TASK4_PER_REPLICA = 8
STEPS = 3


def make_model(probe: Any = None):
    """The lab's network: 64 inputs, ``Dense(32, relu)``, ``Dense(10)`` (logits), with seeded
    initializers (the same weights every call) and an ``Input``, so its variables are created
    where it is created (mirrored inside ``strategy.scope()``). ``probe``: a layer put first."""
    import keras

    glorot = keras.initializers.GlorotUniform
    return keras.Sequential(
        [keras.Input((FEATURES,))]
        + ([probe] if probe is not None else [])
        + [
            keras.layers.Dense(HIDDEN, activation="relu", kernel_initializer=glorot(seed=1)),
            keras.layers.Dense(CLASSES, kernel_initializer=glorot(seed=2)),
        ]
    )


def _optimizer(learning_rate: float = LEARNING_RATE):
    import keras

    return keras.optimizers.SGD(learning_rate, momentum=MOMENTUM)


def _replicas(strategy: Any) -> int:
    import tensorflow as tf

    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f"pass the lab's tf.distribute strategy, got {short(strategy)}")
    return int(strategy.num_replicas_in_sync)


def _on_replicas(n: int) -> str:
    return "on the only replica" if n == 1 else f"on each of the {n} replicas"


def _counts(numbers: Sequence[int]) -> str:
    """``"1,000, 2,500"``."""
    return ", ".join(f"{r:,}" for r in numbers)


def _created_in_scope(strategy: Any, variable: Any) -> bool:
    """Whether ``variable`` is a distributed (mirrored) variable of ``strategy``."""
    try:
        return bool(
            strategy.extended.variable_created_in_scope(getattr(variable, "value", variable))
        )
    except Exception:  # not a TensorFlow variable at all
        return False


def _variable_label(model: Any, variable: Any) -> str:
    """``"layer 0's kernel"`` for a variable of ``model``'s Dense layers."""
    dense = [layer for layer in getattr(model, "layers", []) if layer.weights]
    for i, layer in enumerate(dense):
        for kind in ("kernel", "bias"):
            if getattr(layer, kind, None) is variable:
                return f"layer {i}'s {kind}"
    return f"the variable {getattr(variable, 'path', getattr(variable, 'name', '?'))}"


def _global_batches(x, y, global_batch: int):
    import tensorflow as tf

    return tf.data.Dataset.from_tensor_slices((x, y)).batch(global_batch, drop_remainder=True)


def _single_device(batches, initial: list, learning_rate: float = LEARNING_RATE):
    """The reference: the network trained from ``initial`` on ``batches`` on one device, with
    each global batch's mean loss; ``(losses, final weights)``. The step is notebook 11's
    (:func:`worker_program.make_train_step`) under the default strategy, one replica: its
    ``compute_average_loss`` over the whole global batch is that batch's mean loss."""
    import tensorflow as tf

    from dtf.lessons import worker_program

    if tf.distribute.has_strategy():  # a scope left open would run the step on its replicas
        raise RuntimeError("run the check outside strategy.scope()")
    model = make_model()
    model.set_weights(initial)
    optimizer = _optimizer(learning_rate)
    optimizer.build(model.trainable_variables)
    # The step divides by one fixed global batch and runs once per batch: only a dataset of
    # known length and full batches (_global_batches' drop_remainder) keeps that exact.
    global_batch, count = batches.element_spec[1].shape[0], int(batches.cardinality())
    assert global_batch is not None and count >= 0, "the reference needs full, counted batches"
    one_device = tf.distribute.get_strategy()  # the default strategy, one replica
    step = worker_program.make_train_step(one_device, model, optimizer, int(global_batch))
    iterator = iter(batches)
    losses = [float(step(iterator)) for _ in range(count)]
    return losses, model.get_weights()


# --------------------------------------------------------------------------- task 1


def _shards(strategy: Any, got: Any, n: int, limit: int, what: str) -> list[list[np.ndarray]]:
    """Up to ``limit`` batches of the distributed dataset ``got``: each replica's example
    numbers."""
    import tensorflow as tf

    if isinstance(got, tf.distribute.DistributedIterator):
        raise Wrong(
            f"for {what}: you returned an iterator over the distributed dataset",
            "the checker iterates over the distributed dataset itself, not over an iterator",
        )
    if isinstance(got, tf.data.Dataset):
        raise Wrong(
            f"for {what}: you returned a tf.data.Dataset, not a distributed one: given to "
            "strategy.run, each of its batches would reach every replica whole, and each "
            "replica would train on the whole global batch",
            "the task asks for a distributed dataset: the strategy makes one from a dataset, "
            "and splits each global batch of it into one shard per replica",
        )
    expect_kind(got, tf.distribute.DistributedDataset, "a distributed dataset", what=what)
    together = (
        "somewhere between the arrays and the replicas x and y were ordered apart: each label "
        "must stay with its example"
    )
    batches: list[list[np.ndarray]] = []
    for element in got:
        if len(batches) == limit:
            break
        local = [strategy.experimental_local_results(t) for t in pair(element, what)]
        if len(local[0]) != n:
            raise Wrong(
                f"for {what}: expected one shard per replica ({n}), got {len(local[0])}",
                "distribute the dataset with the strategy the function receives",
            )
        batches.append([numbered_labels(xy, what, together) for xy in zip(*local, strict=True)])
    return batches


#: Task 1: the known wrong datasets, over the facts of :func:`task1` (``sizes``: the examples
#: per replica of each batch read; ``even``: those of a full global batch).
TASK1_MISTAKES = (
    Mistake(
        lambda sizes, **_: not sizes,
        "for {what}: the dataset is empty",
        "no example of (x, y) reached the replicas: look at what your dataset leaves out",
    ),
    Mistake(
        lambda sizes, per, n, **_: n > 1 and sum(sizes[0]) == per,
        "for {what}: each global batch holds {per} examples, which the {n} replicas share as "
        "{first}: that is a batch of per_replica_batch examples",
        "per_replica_batch is what each replica gets: the strategy splits each batch of your "
        "dataset among the replicas",
    ),
    Mistake(
        lambda ids, **_: len(np.unique(ids)) != len(ids),
        "for {what}: your dataset gave more global batches of {g} than one pass holds, with "
        "examples seen twice",
        "one pass over the data: every example once",
    ),
    Mistake(
        lambda sizes, full, even, **_: (
            len(sizes) == full + 1 and sizes[-1] != even and all(s == even for s in sizes[:-1])
        ),
        "for {what}: the last global batch holds only {last_total} examples, and the replicas "
        "get {last} of them{empty}: unequal shards, a loss that must be divided by another "
        "global batch size, and a new input shape for the tf.function to trace",
        "the task asks for full global batches only: your last global batch is partial",
    ),
    Mistake(
        lambda uneven, **_: uneven is not None,
        "for {what}: in batch {uneven} the replicas get {shown_uneven} examples, not "
        "per_replica_batch={per} each",
        "every step is one full global batch of {g} examples, split equally among the replicas",
    ),
    Mistake(
        lambda sizes, full, **_: len(sizes) != full,
        "for {what}: your dataset gave {count} global batch(es) of {g}, which is not one pass "
        "over (x, y) in full global batches",
        "every full global batch of (x, y) is a step: your dataset leaves some out",
    ),
    Mistake(
        lambda **_: True,
        "for {what}: the replicas got the examples in another order than (x, y) holds them: "
        "the task asks for them in order, so that tasks 4 and 5 can compare with one device "
        "on the same batches",
        "something between the arrays and the batches reorders the examples: no shuffle here",
    ),
)


@task(LAB, 1)
def task1(answer: Any, strategy: Any) -> str:
    """``distribute(x, y, strategy, per_replica_batch)``: full global batches, in order,
    distributed by the strategy. Called on numbered examples (two global batches and a half)
    for two per-replica batches; compared with the shards the task's dataset gives."""
    n = _replicas(strategy)
    shapes = []
    for per in TASK1_PER_REPLICA:
        g = per * n
        size = 2 * g + max(1, g // 2)
        x, y = numbered(size)
        what = f"{size} examples and per_replica_batch={per}"
        got = call_function(answer, x, y, strategy, per)
        batches = _shards(strategy, got, n, size // g + 2, what)
        want = [np.arange(b * g, (b + 1) * g).reshape(n, per) for b in range(size // g)]
        if not (len(batches) == len(want) and all(map(all_close, want, batches))):
            sizes = [[len(shard) for shard in batch] for batch in batches]
            even = [per] * n
            last = sizes[-1] if sizes else []
            uneven = next((i for i, s in enumerate(sizes) if s != even), None)
            diagnose(
                TASK1_MISTAKES,
                what=what, per=per, n=n, g=g, full=size // g, sizes=sizes, even=even,
                ids=np.concatenate([s for b in batches for s in b]) if batches else [],
                first=_counts(sizes[0]) if sizes else "", last=_counts(last),
                last_total=sum(last), empty=" (some get an empty batch)" if 0 in last else "",
                uneven=uneven, count=len(sizes),
                shown_uneven=repr(_counts(sizes[uneven])) if uneven is not None else "",
            )  # fmt: skip
        shapes.append(f"{g} = {per} × {n}")
    return (
        f"global batches of {' and '.join(shapes)} examples reached the replicas as equal "
        "shards, and the smaller last batches were dropped"
    )


# --------------------------------------------------------------------------- task 2


def _near(a: float, b: float, atol: float = 1e-5) -> bool:
    return bool(np.isclose(a, b, atol=atol, rtol=0))


#: Task 2: the known wrong shares, over the facts of :func:`task2` (``shard``: the replica's
#: per-example losses, ``probs``: those of logits taken for probabilities).
TASK2_MISTAKES = (
    Mistake(
        lambda value, shard, **_: len(shard) > 0 and _near(value, shard.mean()),
        "{shown}: that is the mean over this replica's {size} examples only. Summed over the "
        "{n} replicas it is {n} times the mean loss of the global batch, and so are the "
        "gradients the all-reduce adds up",
        "your share is averaged over this replica's examples, not over the global batch",
    ),
    Mistake(
        lambda value, shard, **_: len(shard) == 0 and not np.isfinite(value),
        "{shown}: a replica whose shard is empty (a global batch smaller than the number of "
        "replicas) got NaN, the mean of no numbers, which would spoil every weight at the "
        "all-reduce; an empty shard must give a scalar 0",
        "your function divides by the number of examples of the shard, which is 0 here",
    ),
    Mistake(
        lambda value, shard, n, **_: len(shard) > 0 and _near(value, shard.mean() / n),
        "{shown}: that is the replica's mean divided by the number of replicas, right only "
        "when every replica has as many examples; here they have {shards}",
        "your share assumes equal shards: the number of replicas does not count the global "
        "batch's examples",
    ),
    Mistake(
        lambda value, shard, **_: len(shard) > 0 and _near(value, shard.sum(), 1e-4),
        "{shown}: that is the sum of the losses",
        "your share is this replica's losses at full weight, not a share of the global "
        "batch's mean",
    ),
    Mistake(
        lambda value, shard, probs, total, **_: (
            len(shard) > 0 and _near(value, probs.sum() / total)
        ),
        "{shown}: the logits were taken for probabilities",
        "the model returns logits, not probabilities: your loss read them as probabilities",
    ),
    Mistake(
        lambda **_: True,
        hint="your share is none of the usual slips (a mean of the shard, a plain sum): look at "
        "the per-example losses you compute, then at what you divide them by",
    ),
)


def _scalar(got: Any, size: int, what: str) -> float:
    """The learner's share as one number; an empty shard's must be a scalar (issue 18)."""
    detail = f"for {what}: expected one number, got {short(got)}"
    try:
        if got is None or isinstance(got, (str, bytes)):  # NumPy reads them as nan, "0.5" as 0.5
            raise Wrong(detail)
        return expect_number(
            got,
            detail,
            shape_detail=f"for {what}: expected one number, got shape {{shape}}",
            shape_hint="a replica's share of the loss is one number, however many examples it has",
        )
    except Wrong:
        if size:
            raise
    shape = getattr(got, "shape", None)
    raise Wrong(
        f"for {what}: expected a scalar 0, got "
        + (f"a tensor of shape {tuple(shape)}" if shape is not None else short(got)),
        "a replica whose shard is empty adds nothing to the mean loss, yet it still takes "
        "part in the step and the all-reduce: its share must be one number, 0, the same "
        "shape as every other replica's (a sum over no examples is 0)",
    )


@task(LAB, 2)
def task2(answer: Any) -> str:
    """``replica_loss(labels, logits, global_batch_size)``: the shard's summed cross-entropies
    over the global batch, called on each shard of :data:`SHARD_CASES`; the shares must add up
    to the global batch's mean loss, and an empty shard must give 0."""
    import keras
    import tensorflow as tf

    for case, sizes in enumerate(SHARD_CASES):
        rng = np.random.default_rng(case)
        total = sum(sizes)
        logits = rng.normal(scale=2.0, size=(total, CLASSES)).astype(np.float32)
        labels = rng.integers(0, CLASSES, size=total).astype(np.int64)
        losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits).numpy()
        probs = as_array(keras.losses.sparse_categorical_crossentropy(labels, logits))
        start, values = 0, []
        for r, size in enumerate(sizes):
            stop = start + size
            what = (
                f"replica {r} of {len(sizes)}, with {size} of a global batch of {total} "
                f"(shards of {_counts(sizes)})"
            )
            got = call_function(
                answer, tf.constant(labels[start:stop]), tf.constant(logits[start:stop]), total
            )
            value = _scalar(got, size, what)
            shard = losses[start:stop]
            expected = shard.sum() / total if size else 0.0
            if not _near(value, expected):
                diagnose(
                    TASK2_MISTAKES,
                    shown=f"for {what}: your share is {value:.6g}",
                    value=value, shard=shard, probs=probs[start:stop], total=total,
                    n=len(sizes), size=size, shards=_counts(sizes),
                )  # fmt: skip
            values.append(value)
            start = stop
        expect_close(losses.mean(), sum(values), what=f"the sum over shards of {_counts(sizes)}")
    return (
        "for shards of 3, 3, 2 and 2 of a global batch of 10 (and 3 other splits, one with an "
        "empty shard) the replicas' losses add up to the mean loss of the global batch"
    )


# --------------------------------------------------------------------------- task 3

_TASK3_ERRORS = (
    (
        r"Need to be inside .*strategy\.scope\(\)",
        "the optimizer's build creates its momentum variables: where was it built?",
    ),
    (
        r"Mixing different tf\.distribute\.Strategy objects",
        "an optimizer created outside the strategy's scope belongs to the default strategy "
        "and cannot make variables for the mirrored model: where was it created?",
    ),
    (
        r"colocate_vars_with.*must only be passed a variable created in this",
        "the optimizer's variables are mirrored like the model's, so the model's must be "
        "mirrored as well: where was the model created?",
    ),
)

#: Task 3: the known wrong pairs, over the facts of :func:`task3`, in the order they are met.
TASK3_MISTAKES = (
    Mistake(
        lambda variables, **_: not variables,
        "the model has no variables yet: it is built (and its variables created) at its first "
        "call, which would be inside the tf.function on the first step",
        "the task names the lab's network: it has an Input, so its variables are created at "
        "once, where it is created",
    ),
    Mistake(
        lambda shapes, lab_shapes, **_: shapes != lab_shapes,
        "the first item is not the lab's network: its weights have the shapes {shapes}",
        "the task names the network to return: yours has other layers",
    ),
    Mistake(
        lambda same_weights, **_: not same_weights,
        "the first item has the layers of the lab's network but other initial weights",
        "the lab's network starts from seeded weights, the same at every call, so that tasks "
        "4 and 5 can compare it with one device: your model was made another way",
    ),
    Mistake(
        lambda outside, **_: outside,
        "the model's variables ({outside}) were created outside strategy.scope(): each is one "
        "variable on one device, not a mirrored copy {on}",
        "a variable is mirrored when it is created in the strategy's scope: where was the "
        "model created?",
    ),
    Mistake(
        lambda optimizer_outside, **_: optimizer_outside,
        "the optimizer was created outside strategy.scope(): its own variables (its step "
        "counter, and the momentum of every weight) are single variables, not mirrored "
        "ones{consequence}",
        "its variables are mirrored only if it is created in the strategy's scope, as the model is",
    ),
    Mistake(
        lambda settings, **_: (
            settings[0] != "SGD"
            or not np.allclose(settings[1:3], (LEARNING_RATE, MOMENTUM))
            or settings[3:] != (False, None)
        ),
        "your optimizer (type, learning rate, momentum, nesterov, weight decay) is {settings}, "
        "not the one the task names",
        "the task names the optimizer and its settings, LEARNING_RATE and MOMENTUM, and no "
        "other setting",
    ),
    Mistake(
        lambda built, **_: not built,
        "the optimizer is not built: Keras 3 would create its momentum variables in the "
        "tf.function at the first step, on every replica at once (with more than one replica "
        "the step fails with 'You must feed a value for placeholder tensor')",
        "an optimizer creates its momentum variables when it is built: the task says when and "
        "where that must happen",
    ),
    Mistake(
        lambda momentums, variables, **_: (
            [tuple(m.shape) for m in momentums] != [tuple(v.shape) for v in variables]
        ),
        "the optimizer was built for other variables than the model's",
        "an optimizer is built for the variables it will update: the model's",
    ),
    Mistake(
        lambda optimizer_mirrored, **_: not optimizer_mirrored,
        "some of the optimizer's variables were created outside strategy.scope()",
        "every variable of the optimizer is created where it is created and built: in the "
        "strategy's scope",
    ),
)


@task(LAB, 3)
def task3(answer: Any, strategy: Any) -> str:
    """``make_model_and_optimizer(strategy) -> (model, optimizer)``: :func:`make_model` and
    the task's SGD created in the scope, the optimizer built there; checked on the variables
    themselves (each a mirrored variable of the strategy)."""
    import keras

    n = _replicas(strategy)
    try:  # TensorFlow quotes a variable after "not:", its name with Keras' layer counter
        got = call_function(answer, strategy, hints=_TASK3_ERRORS)
    except Wrong as exc:
        raise Wrong(re.sub(r",? not: <tf\.Variable.*$", "", exc.detail), exc.hint) from None
    model, optimizer = expect_kind(got, (tuple, list), "a pair (model, optimizer)", size=2)
    if isinstance(model, keras.optimizers.Optimizer) and isinstance(optimizer, keras.Model):
        raise Wrong("you returned (optimizer, model)", "the model comes first")
    expect_kind(model, keras.Model, "a Keras model", what="the first item")
    expect_kind(optimizer, keras.optimizers.Optimizer, "a Keras optimizer", what="the second item")
    variables = list(model.trainable_variables)
    weights = [as_array(v) for v in model.get_weights()]
    lab_weights = make_model().get_weights()
    outside = [_variable_label(model, v) for v in variables if not _created_in_scope(strategy, v)]
    momentums = list(getattr(optimizer, "momentums", []))
    settings = (
        type(optimizer).__name__,
        round(float(as_array(optimizer.learning_rate)), 7),
        float(getattr(optimizer, "momentum", 0.0)),
        bool(getattr(optimizer, "nesterov", False)),
        getattr(optimizer, "weight_decay", None),
    )
    diagnose(
        TASK3_MISTAKES,
        variables=variables, momentums=momentums, settings=settings, built=optimizer.built,
        outside=", ".join(outside[:4]) + (", ..." if len(outside) > 4 else ""),
        on=_on_replicas(n),
        consequence=(
            ": every replica updates them in turn, once per replica and step"
            + (f" (here {n} times per step)" if n > 1 else "")
            + ", so training drifts away from single-device training without any error"
            if optimizer.built
            else ", and its first apply_gradients inside strategy.run fails when the step is "
            "traced"
        ),
        optimizer_outside=not _created_in_scope(strategy, optimizer.iterations),
        optimizer_mirrored=all(_created_in_scope(strategy, v) for v in optimizer.variables),
        shapes=[tuple(w.shape) for w in weights], lab_shapes=[w.shape for w in lab_weights],
        same_weights=all_close(lab_weights, weights, 0, 0),
    )  # fmt: skip
    return (
        f"the model's {len(variables)} variables and the optimizer's "
        f"{len(optimizer.variables)} (step counter, learning rate, {len(momentums)} momentums) "
        f"are mirrored variables, one copy {_on_replicas(n)}"
    )


# --------------------------------------------------------------------------- task 4


def _probe() -> tuple[Any, list[tuple[Any, Any]]]:
    """An identity Keras layer that notes ``(strategy, replica)`` of every call in a replica
    context (in a ``tf.function``, of every trace), and the list it notes them in."""
    import keras
    import tensorflow as tf

    calls: list[tuple[Any, Any]] = []

    class ReplicaProbe(keras.layers.Layer):
        def call(self, x):
            context = tf.distribute.get_replica_context()
            if context is not None:
                replica = tf.get_static_value(context.replica_id_in_sync_group)
                calls.append((context.strategy, None if replica is None else int(replica)))
            return x

    return ReplicaProbe(), calls


def _loss_of(value: Any, what: str) -> float:
    import tensorflow as tf

    if value is None:
        raise Wrong(
            f"{what} returned None", "train_step returns the loss of the global batch, one number"
        )
    if isinstance(value, tf.distribute.DistributedValues):
        raise Wrong(
            f"{what} returned the replicas' losses, one per replica, not the loss of the "
            "global batch",
            "the strategy turns per-replica values into one: your step returned them without that",
        )
    return expect_number(
        value,
        f"{what} returned {short(value)}, not the loss, one number",
        shape_detail=what + " returned shape {shape}, expected one number",
        shape_hint="each replica's loss is already one number: reduce over the replicas only",
    )


def _ran_on_replicas(calls: list, strategy: Any, n: int) -> None:
    replicas = {replica for s, replica in calls if s is strategy}
    if not replicas:
        raise Wrong(
            "your step never ran the model inside strategy.run: it ran in the cross-replica "
            "context, where one device computes the whole global batch and nothing is "
            "distributed",
            "the forward pass, the loss and the gradients belong in the function that "
            "strategy.run runs on every replica",
        )
    if replicas != set(range(n)):
        raise Wrong(
            f"the model ran on replicas {sorted(replicas)} only, of {n}",
            "strategy.run runs a function on every replica: does your step go through it?",
        )


#: Task 4: the known wrong steps, over the facts of :func:`task4` (``expected``/``scaled``:
#: single-device weights with the learning rate, and with it times the replicas).
TASK4_MISTAKES = (
    Mistake(
        lambda initial, got, **_: all_close(initial, got, 0, 0),
        "after {steps} steps the weights are still the initial ones",
        "your step never updated the weights: look at where the gradients should be applied",
    ),
    Mistake(
        lambda n, expected, scaled, got, **_: (
            n > 1 and not all_close(expected, got) and all_close(scaled, got)
        ),
        "the weights after {steps} steps are those of single-device training with steps {n} "
        "times too large: each replica's loss was the mean over its own shard, and the "
        "all-reduce adds up the {n} replicas' gradients",
        "each replica's loss is a mean over its own shard: look at the loss your step computes "
        "and at what it divides by",
    ),
    Mistake(
        lambda n, expected, got, expected_losses, losses, **_: (
            n > 1
            and all_close(expected, got, ATOL, 0)
            and all_close(np.array(expected_losses) / n, losses, ATOL, 0)
        ),
        "for the loss train_step returned at each of the {steps} steps, {shown_losses}: the "
        "weights are right, but the loss is {n} times too small: ReduceOp.MEAN averaged the "
        "replicas' losses, each of which is already divided by the global batch",
        "each replica's loss is already a share of the global batch's loss: which ReduceOp "
        "turns the shares into the whole?",
    ),
)


@task(LAB, 4, references=("dtf.lessons.worker_program.make_train_step",))
def task4(answer: Any, strategy: Any) -> str:
    """``make_train_step(strategy, model, optimizer, global_batch_size) -> train_step``, a
    ``tf.function`` returning the global batch's mean loss: run for :data:`STEPS` global
    batches of digits beside :func:`_single_device` (losses and weights to :data:`ATOL`); a
    probe layer checks that the model ran inside ``strategy.run`` on every replica."""
    from dtf import data

    n = _replicas(strategy)
    g = TASK4_PER_REPLICA * n
    digits = data.load("digits", flatten=True)
    batches = _global_batches(digits.x_train[: STEPS * g], digits.y_train[: STEPS * g], g)
    probe, calls = _probe()
    with strategy.scope():
        model = make_model(probe)
        optimizer = _optimizer()
        optimizer.build(model.trainable_variables)
    initial = model.get_weights()
    step = call_function(answer, strategy, model, optimizer, g)
    if not callable(step):
        raise Wrong(f"make_train_step returned {short(step)}, not the function train_step")
    if not hasattr(step, "get_concrete_function"):
        raise Wrong(
            "train_step is a plain Python function, not a tf.function: each call would run "
            "the replicas' step eagerly, op by op, from Python",
            "the task says what kind of function train_step must be",
        )
    with full_float32():
        losses = [
            _loss_of(call(step, element), f"train_step, step {i},")
            for i, element in enumerate(strategy.experimental_distribute_dataset(batches))
        ]
        expected_losses, expected = _single_device(batches, initial)
        scaled = _single_device(batches, initial, LEARNING_RATE * n)[1] if n > 1 else None
    got = model.get_weights()
    _ran_on_replicas(calls, strategy, n)
    diagnose(
        TASK4_MISTAKES,
        steps=STEPS, n=n, initial=initial, got=got, expected=expected, scaled=scaled,
        losses=losses, expected_losses=expected_losses,
        shown_losses=short(np.array(losses)),
    )  # fmt: skip
    names = [
        f"{_variable_label(model, v)} after {STEPS} steps (vs. single-device training)"
        for v in model.trainable_variables
    ]
    worst = expect_weights(
        expected,
        got,
        names,
        ATOL,
        "look at the order inside the function each replica runs: the logits, the loss (your "
        "replica_loss) and the gradients inside the tape, then one update",
    )
    expect_close(
        np.array(expected_losses),
        np.array(losses),
        what=f"the loss train_step returned at each of the {STEPS} steps",
        atol=ATOL,
        hint="train_step returns the loss of the global batch: look at how you combine the "
        "replicas' losses",
    )
    return (
        f"{STEPS} steps over {counted(n, 'replica')} match single-device training on the same "
        f"global batches of {g} (losses {', '.join(f'{v:.4f}' for v in losses)}; largest "
        f"weight difference {worst:.1e})"
    )


# --------------------------------------------------------------------------- task 5


@task(LAB, 5, optional=True, references=("dtf.lessons.worker_program.make_train_step",))
def task5(answer: Any, strategy: Any, per_replica_batch: int) -> str:
    """``train_epoch(strategy, x, y, per_replica_batch) -> (model, losses)``: one epoch over
    the digits with the learner's pieces, compared with :func:`_single_device` from
    :func:`make_model`'s weights on the same global batches (to :data:`ATOL`)."""
    from dtf import data

    n = _replicas(strategy)
    per = whole_number("per_replica_batch", per_replica_batch, minimum=1)
    digits = data.load("digits", flatten=True)
    x, y = digits.x_train, digits.y_train
    g = per * n
    steps = len(x) // g
    if steps < 1:
        raise Wrong(
            f"a global batch of {per} × {n} = {g} examples is more than the {len(x)} "
            "training examples",
            "use a smaller PER_DEVICE_BATCH",
        )
    got = call_function(answer, strategy, x, y, per)
    model, losses = expect_kind(got, (tuple, list), "a pair (model, losses)", size=2)
    try:
        losses = [float(as_array(v)) for v in losses]
    except (TypeError, ValueError):
        raise Wrong(f"expected a list of numbers, one loss per step, got {short(losses)}") from None
    if len(losses) != steps:
        raise Wrong(
            f"your epoch ran {len(losses)} steps, not one per full global batch of {g} of the "
            f"{len(x)} examples",
            "one step per full global batch of your distribute(...) (Task 1)"
            if len(losses) > steps
            else "your distribute(...) takes the per-replica batch, not the global one"
            if len(losses) == len(x) // (g * n)
            else "one loss per step: your list has fewer losses than the epoch has steps",
        )
    variables = list(getattr(model, "trainable_variables", []))
    if not variables or not all(_created_in_scope(strategy, v) for v in variables):
        raise Wrong(
            "the model's variables are not mirrored variables of this strategy",
            "your make_model_and_optimizer (Task 3) makes mirrored ones: does the epoch use it?",
        )
    with full_float32():
        expected_losses, expected = _single_device(
            _global_batches(x, y, g), make_model().get_weights()
        )
    hint = (
        "train with your pieces of tasks 1, 3 and 4, one pass over the data; their checks "
        "say which piece is wrong"
    )
    expect_close(expected_losses, losses, what="the losses", atol=ATOL, hint=hint)
    names = [f"{_variable_label(model, v)} after the epoch" for v in variables]
    worst = expect_weights(expected, model.get_weights(), names, ATOL, hint)
    return (
        f"one epoch of {steps} steps over {counted(n, 'replica')} matches single-device "
        f"training: loss {losses[0]:.3f} → {losses[-1]:.3f}, largest weight difference "
        f"{worst:.1e}"
    )


# --------------------------------------------------------------------------- task 6

#: Task 6: the input layouts to choose an auto-shard policy for: the workers
#: (``MultiWorkerMirroredStrategy`` processes), the source (``"memory"``: NumPy arrays
#: through ``from_tensor_slices``; ``"files"``: TFRecord files), the records of each file,
#: and what every worker must see.
SHARDING_LAYOUTS: dict[str, dict[str, Any]] = {
    "a": {"workers": 2, "source": "memory", "records": (1437,), "goal": "train"},
    "b": {"workers": 4, "source": "files", "records": (1000,) * 16, "goal": "train"},
    "c": {"workers": 4, "source": "files", "records": (6000, 6000), "goal": "train"},
    "d": {"workers": 2, "source": "files", "records": (9000, 500, 500), "goal": "train"},
    "e": {"workers": 3, "source": "files", "records": (500,) * 6, "goal": "evaluate"},
}
#: Task 6: FILE is even enough when its largest share is at most this times its smallest.
EVEN_ENOUGH = 1.5
_POLICIES = ("AUTO", "FILE", "DATA", "OFF")


def describe_layout(key: str) -> str:
    """One line that says what layout ``key`` of :data:`SHARDING_LAYOUTS` is."""
    layout = SHARDING_LAYOUTS[key]
    records = layout["records"]
    if layout["source"] == "memory":
        source = f"{records[0]:,} examples in NumPy arrays (from_tensor_slices)"
    elif len(set(records)) == 1:
        source = f"{len(records)} TFRecord files of {records[0]:,} records each"
    else:
        source = f"{len(records)} TFRecord files of {_counts(records)} records"
    goal = (
        "train: every record once per epoch"
        if layout["goal"] == "train"
        else "evaluate: every worker computes the metric on the whole set by itself"
    )
    return f"{key}: {layout['workers']} workers, {source}; {goal}"


def file_shares(records: Sequence[int], workers: int) -> list[int]:
    """The records each worker receives under FILE: file ``i`` goes to worker ``i mod workers``
    (measured in notebook 11d)."""
    shares = [0] * workers
    for i, n in enumerate(records):
        shares[i % workers] += n
    return shares


def _even(records: Sequence[int], workers: int) -> bool:
    shares = file_shares(records, workers)
    return min(shares) > 0 and max(shares) <= EVEN_ENOUGH * min(shares)


def policy_outcome(key: str, policy: str) -> tuple[bool, str]:
    """``(acceptable, what happens)`` with ``policy`` for layout ``key``, by the rules notebooks
    11d and 11e measured (TensorFlow 2.21): FILE gives file ``i`` to worker ``i mod N`` and
    fails without files or with fewer files than workers; DATA makes every worker read
    everything and keep its part; OFF gives every worker everything; AUTO is FILE where FILE
    applies to a pipeline of files, else a silent fallback to DATA."""
    layout = SHARDING_LAYOUTS[key]
    n, records, total = layout["workers"], layout["records"], sum(layout["records"])
    files = layout["source"] == "files"
    can_file = files and len(records) >= n
    if layout["goal"] == "evaluate":
        if policy == "OFF":
            return True, "every worker receives every record"
        return False, (
            f"{policy} divides the records among the {n} workers, so each one sees only its "
            "part, and no worker's metric is that of the whole set"
        )
    if policy == "OFF":
        return False, (
            f"OFF divides nothing: each of the {n} workers receives all {total:,} records, "
            f"so every global batch holds each record {n} times"
        )
    if policy == "DATA":
        if can_file and _even(records, n):
            return False, (
                f"DATA works, but every worker reads and parses all {total:,} records to keep "
                f"1/{n} of them, while whole files would divide evenly here "
                f"({_counts(file_shares(records, n))} records per worker)"
            )
        return True, "every worker reads everything and keeps its part: even shares"
    if policy == "FILE" and not files:
        return False, (
            "FILE divides files, and a pipeline that starts from from_tensor_slices has none: "
            "TensorFlow cannot apply it ('Found an unshardable source dataset', the reason "
            "AUTO's fallback gives in notebook 11e)"
        )
    if policy == "FILE" and not can_file:
        return False, (
            f"FILE needs at least as many files as workers: with {len(records)} file(s) for "
            f"{n} workers TensorFlow raises InvalidArgumentError ('Could not apply FILE based "
            "sharding') and the workers' collective ops abort"
        )
    if not can_file:  # AUTO
        return False, (
            "AUTO works here only by falling back to DATA, silently (TensorFlow 2.21 logs it "
            "at verbose level 2 only): a choice you cannot see in the log"
        )
    shares = _counts(file_shares(records, n))
    if not _even(records, n):
        return False, (
            f"{policy} gives whole files, file i to worker i mod {n}: the workers receive "
            f"{shares} records, and since every step is collective the epoch lasts as long as "
            "the largest share"
        )
    return True, f"whole files per worker: {shares} records"


def _policy_name(value: Any) -> str | None:
    """``"FILE"`` for ``AutoShardPolicy.FILE``, ``"file"`` or ``"FILE"``; None otherwise."""
    name = getattr(value, "name", value)
    if isinstance(name, str) and name.strip().upper() in _POLICIES:
        return name.strip().upper()
    return None


@task(LAB, 6, references=("dtf.checks.lab05.policy_outcome",))
def task6(answer: Any) -> str:
    """``shard_policies() -> {layout: policy}``: each choice judged by
    :func:`policy_outcome`; the first layout whose choice misses its goal is named."""
    got = expect_kind(call_function(answer), dict, "a dict {layout: policy}")
    missing = [k for k in SHARDING_LAYOUTS if k not in got]
    if missing:
        raise Wrong(
            f"your dict has no policy for layout {missing[0]!r}",
            "one entry per layout: " + ", ".join(repr(k) for k in SHARDING_LAYOUTS),
        )
    wrong = []
    for key in SHARDING_LAYOUTS:
        name = _policy_name(got[key])
        if name is None:
            raise Wrong(
                f"for layout {key!r}: expected an auto-shard policy, got {short(got[key])}",
                "HINT is not one of the four policies this task compares"
                if str(getattr(got[key], "name", got[key])).strip().upper() == "HINT"
                else "use a member of tf.data.experimental.AutoShardPolicy (AUTO, FILE, DATA, OFF)",
            )
        ok, why = policy_outcome(key, name)
        if not ok:
            wrong.append(f"for layout {key!r} ({describe_layout(key)}), {name}: {why}")
    if wrong:
        more = f" ({len(wrong) - 1} other layout(s) too)" if len(wrong) > 1 else ""
        raise Wrong(
            wrong[0] + more,
            "for each layout, ask what each worker would read and receive under your policy, "
            "and whether that meets the layout's goal (notebook 11d, section 5, and 11e, "
            "sections 5 and 6)",
        )
    chosen = ", ".join(f"{k}: {_policy_name(got[k])}" for k in SHARDING_LAYOUTS)
    return f"every layout gets a policy that meets its goal ({chosen})"


# --------------------------------------------------------------------------- task 7

#: Task 7: the kinds of time a step is split into (the columns of
#: ``dtf.lessons.trace_reading.breakdown``).
BOTTLENECK_KINDS = ("compute", "communication", "input", "idle")
#: Task 7: how far the learner's share may be from the trace's.
SHARE_TOLERANCE = 0.01
#: Task 7: the checker's own trace: steps of ``CHAIN`` products of ``SIZE`` x ``SIZE``
#: matrices on one device, no input pipeline, nothing to copy.
CHAIN, SIZE, TRACED_STEPS = 4, 384, 3


def bottleneck(table) -> tuple[str, float]:
    """``(kind, share)``: the column of ``dtf.lessons.trace_reading.breakdown``'s ``table`` (idle
    included) with the largest share of the steps' total time, and that share."""
    from dtf import profiling

    shares = profiling.shares(table)
    kind = str(shares.idxmax())
    return kind, float(shares[kind])


def trace_bottleneck(logdir: Any) -> tuple[str, float]:
    """:func:`bottleneck` of the newest trace under ``logdir``."""
    from dtf import profiling
    from dtf.lessons import trace_reading

    space = profiling.load(logdir)
    table = trace_reading.op_table(profiling.host_plane(space))
    return bottleneck(trace_reading.breakdown(table, profiling.steps(space)))


def _summed_durations(table_ops, steps) -> dict[str, float]:
    """The slip of Task 7: each kind's op durations inside the steps simply added up
    (overlapping ops, and the waits of asynchronous ops, counted several times)."""
    from dtf import profiling

    sums = dict.fromkeys(BOTTLENECK_KINDS[:3], 0.0)
    for _, step in steps.iterrows():
        inside = profiling.in_step(table_ops, step)
        for kind, total in inside.groupby("kind")["duration_us"].sum().items():
            sums[kind] += float(total)
    return sums


_NOT_LARGEST = "in this trace {kind} is {kind_share:.0%} of the steps' time, not the largest share"
_NOT_SHARE = "your share of {kind}, {share:.3f}, is not its share in the trace"

#: Task 7: the known wrong answers, over the facts of :func:`judge_bottleneck`: a wrong kind
#: (the first three), then a wrong share of the right kind.
TASK7_MISTAKES = (
    Mistake(
        lambda kind, want_kind, summed, busiest, **_: (
            kind != want_kind
            and kind != busiest
            and bool(summed)
            and kind == max(summed, key=summed.get)
        ),
        _NOT_LARGEST,
        "you added up the ops' durations: ops on several threads run at the same time, and an "
        "asynchronous op's duration is mostly waiting, so your share counts overlapping time "
        "several times",
    ),
    Mistake(
        lambda kind, want_kind, **_: kind != want_kind == "idle",
        _NOT_LARGEST,
        "your kind is not the one with the largest share: look at which kinds of time your "
        "comparison leaves out",
    ),
    Mistake(
        lambda kind, want_kind, **_: kind != want_kind,
        _NOT_LARGEST,
        "your kind is not the one with the largest share of the traced steps' total time, all "
        "steps together",
    ),
    Mistake(
        lambda share, **_: share > 1,
        _NOT_SHARE,
        "your share is more than 1: a share is a fraction of the steps' time, between 0 and 1, "
        "not milliseconds",
    ),
    Mistake(
        lambda share, per_step, **_: any(
            abs(share - float(v)) <= SHARE_TOLERANCE / 10 for v in per_step
        ),
        _NOT_SHARE,
        "that is the share in one step; the task asks for the share over all the traced "
        "steps together",
    ),
    Mistake(
        lambda **_: True,
        _NOT_SHARE,
        "the share is over all the traced steps together: look at how you add up the steps, "
        "and what you divide by",
    ),
)


def judge_bottleneck(got: Any, table, summed: dict[str, float] | None = None) -> str:
    """Judge ``got`` (the learner's ``(kind, share)``) against ``table``, a
    ``dtf.lessons.trace_reading.breakdown`` of the trace (``summed``: its
    :func:`_summed_durations`):
    :class:`Wrong` with a hint that names the mistake, or the kind and share."""
    from dtf import profiling

    kind, share = expect_kind(got, (tuple, list), "a pair (kind, share)", size=2)
    if not isinstance(kind, str) or kind not in BOTTLENECK_KINDS:
        raise Wrong(
            f"expected a kind of time, got {short(kind)}",
            "name it as trace_reading.breakdown's columns do: " + ", ".join(BOTTLENECK_KINDS),
        )
    share = expect_number(
        share,
        f"expected the share as a number, got {short(share)}",
        "the share is one number, between 0 and 1",
    )
    want_kind, want_share = bottleneck(table)
    if kind != want_kind or abs(share - want_share) > SHARE_TOLERANCE:
        shares = profiling.shares(table)
        diagnose(
            TASK7_MISTAKES,
            kind=kind, share=share, want_kind=want_kind, summed=summed,
            busiest=max(BOTTLENECK_KINDS[:3], key=lambda k: float(shares[k])),
            kind_share=float(shares[kind]),
            per_step=table[kind] / table["step_ms"],
        )  # fmt: skip
    return f"{kind}, {share:.0%} of the steps' time"


def trace_slow_step(strategy: Any, x: Any, y: Any, global_batch: int, steps: int) -> str:
    """Task 7's trace: Task 4's step, fed by a pipeline that blurs every digit in Python,
    ``steps`` steps traced (after two untraced ones) into a new temporary folder, returned;
    the folder is removed when the kernel exits. It is built here, not in the lab, so that
    its code does not show Tasks 1 to 4's answers."""
    import keras
    import tensorflow as tf

    def blur_in_python(image):  # a 3x3 mean filter, pixel by pixel, in Python
        image = image.numpy().reshape(8, 8)
        out = np.empty_like(image)
        for i in range(8):
            for j in range(8):
                out[i, j] = image[max(i - 1, 0) : i + 2, max(j - 1, 0) : j + 2].mean()
        return out.reshape(FEATURES)

    def blur(x, y):
        x = tf.py_function(blur_in_python, [x], tf.float32)
        x.set_shape([FEATURES])
        return x, y

    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().map(blur)
    distributed = strategy.experimental_distribute_dataset(data.batch(global_batch, True))
    batches = {"iterator": iter(distributed)}  # cleared at the end, whoever still holds it
    with strategy.scope():
        model, optimizer = make_model(), _optimizer()
        optimizer.build(model.trainable_variables)

    @tf.function
    def slow_step(batch):
        def replica_step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x)
                losses = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
                loss = tf.nn.compute_average_loss(losses, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        return strategy.reduce("sum", strategy.run(replica_step, args=batch), axis=None)

    logdir = tempfile.mkdtemp(prefix="lab05_slow_step_")
    atexit.register(shutil.rmtree, logdir, ignore_errors=True)
    try:
        for _ in range(2):  # the first call traces the tf.function
            slow_step(next(batches["iterator"])).numpy()
        _trace_steps(logdir, lambda: slow_step(next(batches["iterator"])).numpy(), steps)
    finally:
        batches.clear()  # an iterator over a py_function left to kernel shutdown can hang it
    return logdir


def _trace_steps(logdir: Any, step: Any, steps: int) -> None:
    """Profile ``steps`` calls of ``step`` into ``logdir``, each marked ``Trace("train",
    step_num=i)``, the markers :mod:`dtf.profiling` reads."""
    import tensorflow as tf

    tf.profiler.experimental.start(str(logdir))
    try:
        for i in range(steps):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                step()
    finally:
        tf.profiler.experimental.stop()  # writes the trace; also if a step failed


def compute_bound_trace(logdir: Any) -> None:
    """Trace :data:`TRACED_STEPS` steps of chained matrix products under ``logdir``, each
    marked ``Trace("train", step_num=i)``: a trace with no input and no copies."""
    import tensorflow as tf

    a = tf.random.stateless_normal([SIZE, SIZE], seed=[7, 7]) / SIZE**0.5

    @tf.function
    def chain(m):
        for _ in range(CHAIN):
            m = tf.matmul(m, a)
        return tf.reduce_sum(m)

    chain(a).numpy()  # traced before the profile
    _trace_steps(logdir, lambda: chain(a).numpy(), TRACED_STEPS)


def _judge_trace(answer: Any, logdir: Any, answers: list | None = None) -> str:
    from dtf import profiling
    from dtf.lessons import trace_reading

    space = profiling.load(logdir)
    table_ops, steps = trace_reading.op_table(profiling.host_plane(space)), profiling.steps(space)
    got = call_function(answer, str(logdir))
    if answers is not None:
        answers.append(got)
    return judge_bottleneck(
        got, trace_reading.breakdown(table_ops, steps), _summed_durations(table_ops, steps)
    )


@task(LAB, 7, references=("dtf.checks.lab05.trace_bottleneck", "dtf.checks.lab05.bottleneck"))
def task7(answer: Any, logdir: Any) -> str:
    """``find_bottleneck(logdir) -> (kind, share)``: judged on the lab's trace, then on one the
    checker captures (:func:`compute_bound_trace`), so that only an answer read from the trace
    passes."""
    from dtf import profiling

    try:
        profiling.load(logdir)
    except (profiling.TraceError, TypeError) as error:
        raise Wrong(
            f"no trace to judge: {error}",
            "run the cell that traces the slow step first, and pass its SLOW_TRACE",
        ) from None
    answers: list = []
    first = _judge_trace(answer, logdir, answers)
    with tempfile.TemporaryDirectory(prefix="lab05_check_") as other:
        compute_bound_trace(other)
        try:
            _judge_trace(answer, other, answers)
        except Wrong as wrong:
            same = len(answers) == 2 and repr(answers[0]) == repr(answers[1])
            raise Wrong(
                "right for the lab's trace, but for a second trace (matrix products on one "
                f"device, captured by the checker): {wrong.args[0]}",
                "your answer is the same for both traces: it does not come from the trace "
                "under the logdir you are given"
                if same
                else wrong.hint,
            ) from None
    # Not the second trace's numbers: they change from one capture to the next.
    return (
        f"the slow step: {first}; right again for a second trace, of matrix products, that "
        "the checker captured"
    )
