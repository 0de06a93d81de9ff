"""Lab 02 answers for tests/test_checks_lab02.py, with switches for the usual mistakes. The
tests' worker process imports them (``from tests.answers import lab02 as answers``)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from dtf import towers
from dtf.checks import lab02


def split_right(x, y, n):
    """Task 1: ``split_batch``."""
    if len(x) % n:
        raise ValueError("uneven")
    return list(zip(tf.split(x, n), tf.split(y, n), strict=True))


def split_type_error(x, y, n):
    """Task 1, refusing an uneven batch with the wrong exception."""
    if len(x) % n:
        raise TypeError("uneven")
    return split_right(x, y, n)


def split_numpy(x, y, n):
    """Task 1 with numpy, which refuses an uneven split itself."""
    return list(zip(np.split(x, n), np.split(y, n), strict=True))


def split_array_split(x, y, n):
    """Task 1 accepting an uneven batch."""
    return list(zip(np.array_split(x, n), np.array_split(y, n), strict=True))


def split_strided(x, y, n):
    """Task 1, every n-th example: the shards out of order."""
    return [(x[i::n], y[i::n]) for i in range(n)]


def split_whole(x, y, n):
    """Task 1, one shard: the whole batch."""
    return [(x, y)]


def split_whole_shards(x, y, n):
    """Task 1, every tower given the whole batch."""
    if len(x) % n:
        raise ValueError("uneven")
    return [(x, y)] * n


def split_by_the_course(x, y, n):
    """Task 1 handed to the course's own code."""
    return towers.split_batch(x, y, n)


def average_right(tower_grads):
    """Task 2: ``average_gradients``."""
    return [tf.add_n(list(g)) / len(g) for g in zip(*tower_grads, strict=True)]


def average_numpy(tower_grads):
    """Task 2 with numpy."""
    return [np.mean([t.numpy() for t in g], axis=0) for g in zip(*tower_grads, strict=True)]


def average_sum(tower_grads):
    """Task 2, the sum instead of the mean."""
    return [tf.add_n(list(g)) for g in zip(*tower_grads, strict=True)]


def average_first_tower(tower_grads):
    """Task 2, the first tower's gradients only."""
    return list(tower_grads[0])


def average_last_tower(tower_grads):
    """Task 2, the last tower's gradients only (each tower's overwrite the one before)."""
    return list(tower_grads[-1])


def average_over_variables(tower_grads):
    """Task 2, the mean off by one: neither the sum nor one tower's gradients."""
    return [tf.add_n(list(g)) / len(g) + 1.0 for g in zip(*tower_grads, strict=True)]


def average_flat(tower_grads):
    """Task 2, every tower's gradients in one list."""
    return [g for tower in tower_grads for g in tower]


def average_by_the_course(tower_grads):
    """Task 2 handed to the course's own code."""
    return towers.average_gradients(tower_grads)


def step_by_the_course(params, x, y, devs, lr):
    """Task 3 handed to the course's own step."""
    return towers.make_tower_train_step(None, [], None, None, devs)


def step_averaging_by_the_course(params, x, y, devs, lr):
    """Task 3 averaging with the course's own code."""
    return towers.average_gradients([towers.split_batch(x, y, 2)])


def make_step(
    on_devices=True,
    average=True,
    apply=True,
    tape_records=True,
    split=True,
    update_on="/device:CPU:0",
    own_loss=False,
    seen=None,
    devices_reversed=False,
    gradient_outside=False,
):
    """Task 3: a tower step; ``seen`` (a dict) records the width of the hidden layer of each
    call; ``own_loss``: the loss written out instead of ``checks.lab02.loss``;
    ``devices_reversed``: tower i's shard on devices[-1 - i] (every device still used);
    ``gradient_outside``: tape.gradient called after the tower's device scope."""

    def loss(y, logits):
        if own_loss:
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            return tf.reduce_mean(per_example)
        return lab02.loss(y, logits)

    def step(params, x, y, devs, lr):
        if seen is not None:
            seen.setdefault("hidden", []).append(int(params["biases_1"].shape[0]))
        variables = list(params.values())
        grads = []
        n = len(devs)
        shards = zip(tf.split(x, n), tf.split(y, n), strict=True) if split else [(x, y)] * 2
        for d, (x_i, y_i) in zip(devs[::-1] if devices_reversed else devs, shards, strict=False):
            with tf.device(d if on_devices else None):
                if tape_records:
                    with tf.GradientTape() as tape:
                        tower_loss = loss(y_i, towers.mlp_logits(params, x_i))
                else:  # the loss computed outside the tape: every gradient is None
                    tower_loss = loss(y_i, towers.mlp_logits(params, x_i))
                    with tf.GradientTape() as tape:
                        pass
                if not gradient_outside:
                    grads.append(tape.gradient(tower_loss, variables))
            if gradient_outside:
                grads.append(tape.gradient(tower_loss, variables))
        with tf.device(devs[-1] if update_on == "last" else update_on):
            averaged = [tf.add_n(list(g)) / len(g) for g in zip(*grads, strict=True)]
            for g, v in zip(averaged, variables, strict=True):
                if apply:
                    v.assign_sub(lr * g * (1 if average else n))

    return step


def step_dropping_none_gradients(params, x, y, devs, lr):
    """Task 3: the loss outside the tape, and the None gradients skipped: nothing applied."""
    variables = list(params.values())
    loss = lab02.loss(y, towers.mlp_logits(params, x))
    with tf.GradientTape() as tape:
        pass
    for g, v in zip(tape.gradient(loss, variables), variables, strict=True):
        if g is not None:
            v.assign_sub(lr * g)


def helper(x, y, n):
    """Hands task 3's split to the course's own code, one call away."""
    return towers.split_batch(x, y, n)


def helper_step(params, x, y, devs, lr):
    """Task 3 through :func:`helper`."""
    helper(x, y, len(devs))


def third_of_the_rate(params, x, y, devs, lr):
    """Task 3 with the wrong learning rate."""
    make_step()(params, x, y, devs, lr / 3)


def uses_split_stub(*args):
    """Task 3 reaching task 1's stub."""
    raise NotImplementedError("Task 1: write your code here")


def split_batch(*args):
    """Task 1's stub."""
    raise NotImplementedError("Task 1: write your code here")


def diagnose_steps():
    """Task 4 calling task 1's stub."""
    split_batch()
