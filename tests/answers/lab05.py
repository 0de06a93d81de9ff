"""Lab 05 answers for tests/test_checks_lab05.py: the solutions, with switches for the usual
mistakes. The tests' worker process imports them (``from tests.answers import lab05``)."""

from __future__ import annotations

import contextlib
import time

import keras
import tensorflow as tf

from dtf import data, profiling
from dtf.checks import lab05
from dtf.lessons import trace_reading


def make_distribute(
    batch="global",
    drop=True,
    distributed=True,
    repeat=False,
    shuffle=False,
    iterator=False,
    from_function=False,
    split=False,
):
    """Task 1: ``distribute``."""

    def distribute(x, y, strategy, per_replica_batch):
        n = strategy.num_replicas_in_sync
        size = per_replica_batch * n if batch == "global" else per_replica_batch
        if split:  # x and y in separate datasets, x shuffled
            xs = tf.data.Dataset.from_tensor_slices(x).shuffle(len(x), seed=1)
            ds = tf.data.Dataset.zip((xs, tf.data.Dataset.from_tensor_slices(y)))
        else:
            ds = tf.data.Dataset.from_tensor_slices((x, y))
        if shuffle:
            ds = ds.shuffle(len(x), seed=1)
        if repeat:
            ds = ds.repeat()
        if from_function:

            def make(context):
                per = context.get_per_replica_batch_size(size)
                return ds.batch(per * n, drop_remainder=drop).rebatch(per)

            return strategy.distribute_datasets_from_function(make)
        ds = ds.batch(size, drop_remainder=drop)
        if not distributed:
            return ds
        dist = strategy.experimental_distribute_dataset(ds)
        return iter(dist) if iterator else dist

    return distribute


def make_loss(kind="global"):
    """Task 2: ``replica_loss`` in several ways, right and wrong."""

    def replica_loss(labels, logits, global_batch_size):
        per_example = keras.losses.sparse_categorical_crossentropy(
            labels, logits, from_logits=kind != "probabilities"
        )
        if kind in ("global", "probabilities"):
            return tf.nn.compute_average_loss(per_example, global_batch_size=global_batch_size)
        if kind == "by-hand":
            return tf.reduce_sum(per_example) / global_batch_size
        if kind == "keras-class":  # as TensorFlow's custom-loop tutorial does
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
            return tf.nn.compute_average_loss(
                loss(labels, logits), global_batch_size=global_batch_size
            )
        if kind == "mean":
            return tf.reduce_mean(per_example)
        if kind == "no-global":
            return tf.nn.compute_average_loss(per_example)
        if kind == "mean-over-4":
            return tf.reduce_mean(per_example) / 4
        if kind == "sum":
            return tf.reduce_sum(per_example)
        if kind == "vector":
            return per_example / global_batch_size
        if kind == "nan-safe-mean-over-4":  # the mean over 4 replicas, without NaN
            size = tf.cast(tf.size(per_example), tf.float32)
            return tf.math.divide_no_nan(tf.reduce_sum(per_example), 4.0 * size)
        raise AssertionError(kind)

    return replica_loss


def make_build(
    model_in=True,
    opt_in=True,
    build="in",
    swap=False,
    optimizer="sgd",
    no_input=False,
    network="lab",
):
    """Task 3: ``make_model_and_optimizer``: where the model and the optimizer are created,
    whether and where the optimizer is built."""

    def make_model_and_optimizer(strategy):
        def scope(inside):
            return strategy.scope() if inside else contextlib.nullcontext()

        with scope(model_in):
            if no_input:
                model = keras.Sequential([keras.layers.Dense(32), keras.layers.Dense(10)])
            elif network == "wider":  # another hidden layer's width
                model = keras.Sequential(
                    [keras.Input((64,)), keras.layers.Dense(48), keras.layers.Dense(10)]
                )
            elif network == "unseeded":  # the lab's layers, Keras' default initial weights
                model = keras.Sequential(
                    [
                        keras.Input((64,)),
                        keras.layers.Dense(32, activation="relu"),
                        keras.layers.Dense(10),
                    ]
                )
            else:
                model = lab05.make_model()
        with scope(opt_in):
            if optimizer == "sgd":
                opt = keras.optimizers.SGD(lab05.LEARNING_RATE, momentum=lab05.MOMENTUM)
            elif optimizer == "nesterov":
                opt = keras.optimizers.SGD(
                    lab05.LEARNING_RATE, momentum=lab05.MOMENTUM, nesterov=True
                )
            else:
                opt = keras.optimizers.Adam(lab05.LEARNING_RATE)
        if build is not None:
            with scope(build == "in"):
                opt.build(model.trainable_variables)
        return (opt, model) if swap else (model, opt)

    return make_model_and_optimizer


def make_make_train_step(
    loss="global", reduce="SUM", run=True, apply=True, function=True, result="reduced"
):
    """Task 4: ``make_train_step``."""
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def make_train_step(strategy, model, optimizer, global_batch_size):
        def step_fn(batch):
            x, y = batch
            with tf.GradientTape() as tape:
                per_example = ce(y, model(x, training=True))
                if loss == "global":
                    value = tf.nn.compute_average_loss(
                        per_example, global_batch_size=global_batch_size
                    )
                else:
                    value = tf.reduce_mean(per_example)
            grads = tape.gradient(value, model.trainable_variables)
            if apply:
                optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return value

        def train_step(batch):
            if not run:  # the whole global batch in the cross-replica context
                x = tf.concat(strategy.experimental_local_results(batch[0]), axis=0)
                y = tf.concat(strategy.experimental_local_results(batch[1]), axis=0)
                with tf.GradientTape() as tape:
                    value = tf.reduce_mean(ce(y, model(x, training=True)))
                grads = tape.gradient(value, model.trainable_variables)
                optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
                return value
            per_replica = strategy.run(step_fn, args=(batch,))
            if result == "per-replica":
                return per_replica
            if result == "none":
                return None
            op = getattr(tf.distribute.ReduceOp, reduce)
            return strategy.reduce(op, per_replica, axis=None)

        return tf.function(train_step) if function else train_step

    return make_train_step


def make_train_epoch(drop=True, loss="global", per_replica=True):
    """Task 5: ``train_epoch`` from the pieces above."""
    distribute = make_distribute(drop=drop)
    make_model_and_optimizer = make_build()
    make_train_step = make_make_train_step(loss=loss)

    def train_epoch(strategy, x, y, per_replica_batch):
        global_batch = per_replica_batch * strategy.num_replicas_in_sync
        model, optimizer = make_model_and_optimizer(strategy)
        train_step = make_train_step(strategy, model, optimizer, global_batch)
        batches = distribute(x, y, strategy, per_replica_batch if per_replica else global_batch)
        return model, [float(train_step(batch)) for batch in batches]

    return train_epoch


def find_bottleneck(logdir):
    """Task 7: the solution."""
    space = profiling.load(logdir)
    table = trace_reading.breakdown(
        trace_reading.op_table(profiling.host_plane(space)), profiling.steps(space)
    )
    shares = profiling.shares(table)
    kind = shares.idxmax()
    return kind, float(shares[kind])


def in_milliseconds(logdir):
    """Task 7: the kind's milliseconds, not its share."""
    space = profiling.load(logdir)
    table = trace_reading.breakdown(
        trace_reading.op_table(profiling.host_plane(space)), profiling.steps(space)
    )
    kind = profiling.shares(table).idxmax()
    return kind, float(table[kind].sum())


_traces: dict[str, str] = {}


def lab_trace() -> str:
    """A trace of an input-bound step (8 examples of 2 ms of Python each per step), captured
    once, by the first case that asks for it; its folder is removed when the process exits."""
    import atexit
    import shutil
    import tempfile

    if "input" in _traces:
        return _traces["input"]

    def slow(v):
        began = time.perf_counter()
        while time.perf_counter() - began < 0.002:
            pass
        return v

    def slow_map(v):
        v = tf.py_function(slow, [v], tf.float32)
        v.set_shape([4])
        return v

    data = tf.data.Dataset.from_tensors(tf.ones([4])).repeat().map(slow_map).batch(8)
    batches = {"it": iter(data)}

    @tf.function
    def step(it):
        return tf.reduce_sum(next(it))

    logdir = tempfile.mkdtemp(prefix="lab05_test_trace_")
    atexit.register(shutil.rmtree, logdir, ignore_errors=True)
    step(batches["it"]).numpy()
    tf.profiler.experimental.start(logdir)
    try:
        for i in range(3):
            with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
                step(batches["it"]).numpy()
    finally:
        tf.profiler.experimental.stop()
    batches.clear()  # a py_function iterator left to interpreter exit can hang it
    _traces["input"] = logdir
    return logdir


def replica_loss_unfinished(labels, logits, global_batch_size):
    """Task 2 left as its stub."""
    raise NotImplementedError("Task 2: write your code here")


def make_train_step_on_unfinished_loss(strategy, model, optimizer, global_batch_size):
    """Task 4 right, calling a Task 2 that still raises its stub."""

    def step_fn(batch):
        x, y = batch
        with tf.GradientTape() as tape:
            loss = replica_loss_unfinished(y, model(x, training=True), global_batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(batch):
        return strategy.reduce("SUM", strategy.run(step_fn, args=(batch,)), axis=None)

    return train_step


def make_model_and_optimizer_unfinished(strategy):
    """Task 3 left as its stub."""
    raise NotImplementedError("Task 3: write your code here")


def train_epoch_on_unfinished_task3(strategy, x, y, per_replica_batch):
    """Task 5 calling a Task 3 that still raises its stub."""
    model, optimizer = make_model_and_optimizer_unfinished(strategy)
    return model, []


def distribute_a_number(x, y, strategy, per_replica_batch):
    """Task 1, a number instead of a distributed dataset."""
    return 3


def loss_nan_on_empty(labels, logits, global_batch_size):
    """Task 2, NaN for an empty shard."""
    if len(labels) == 0:
        return tf.constant(float("nan"))
    return make_loss()(labels, logits, global_batch_size)


def make_loss_on_empty(empty="labels"):
    """Task 2 giving, for an empty shard, its ``labels`` (an empty tensor) or None."""

    def replica_loss(labels, logits, global_batch_size):
        if len(labels) == 0:
            return labels if empty == "labels" else None
        return make_loss()(labels, logits, global_batch_size)

    return replica_loss


def build_a_number(strategy):
    """Task 3, a number instead of (model, optimizer)."""
    return 3


def build_numbers(strategy):
    """Task 3, two numbers for (model, optimizer)."""
    return 1, 2


def make_train_step_that_raises(strategy, model, optimizer, global_batch_size):
    """Task 4, a step that divides by zero: AutoGraph, which traces it, cannot re-raise a
    ZeroDivisionError as itself and wraps it in a StagingError; the verdict names the
    learner's error all the same."""

    def train_step(batch):
        return 1 / 0

    return tf.function(train_step)


def make_fixed_bottleneck(found):
    """Task 7, an answer fixed in advance: ``found`` whatever the trace."""

    def find_bottleneck(logdir):
        return found

    return find_bottleneck


def single_device_losses():
    """Not an answer: Task 4's independent reference, Keras on one device on the same 3
    batches of 16 digits, written here rather than taken from the checker."""
    digits = data.load("digits", flatten=True)
    model = lab05.make_model()
    opt = keras.optimizers.SGD(lab05.LEARNING_RATE, momentum=lab05.MOMENTUM)
    losses = []
    for i in range(3):
        x, y = digits.x_train[i * 16 : (i + 1) * 16], digits.y_train[i * 16 : (i + 1) * 16]
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(
                keras.losses.sparse_categorical_crossentropy(y, model(x), from_logits=True)
            )
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        losses.append(float(loss))
    return losses
