"""Lab 02 answers for tests/test_checks_lab02.py, with switches for the usual mistakes. The
tests' worker process imports them (``from tests.answers import lab02 as answers``)."""

from __future__ import annotations

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


def make_step(
    on_devices=True,
    average=True,
    apply=True,
    tape_records=True,
    split=True,
    update_on="/device:CPU:0",
    own_loss=False,
    seen=None,
):
    """Task 3: a tower step; ``seen`` (a dict) records the width of the hidden layer of each
    call; ``own_loss``: the loss written out instead of ``checks.lab02.loss``."""

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
        for d, (x_i, y_i) in zip(devs, shards, strict=False):
            with tf.device(d if on_devices else None):
                if tape_records:
                    with tf.GradientTape() as tape:
                        tower_loss = loss(y_i, towers.mlp_logits(params, x_i))
                else:  # the loss computed outside the tape: every gradient is None
                    tower_loss = loss(y_i, towers.mlp_logits(params, x_i))
                    with tf.GradientTape() as tape:
                        pass
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
