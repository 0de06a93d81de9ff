"""Lab 03 answers for tests/test_checks_lab03.py, with switches for the usual mistakes. The
tests' worker process imports them (``from tests.answers import lab03 as answers``)."""

from __future__ import annotations

import contextlib

import keras
import numpy as np
import tensorflow as tf

from dtf import placement
from dtf.checks import lab03


def _scope(device):
    return tf.device(device) if device else contextlib.nullcontext()


def make_place(
    build="first-call",
    run="devices",
    capture=True,
    shift=0.0,
    model=False,
    output=None,
    units=(32, 10),
    hidden="relu",
):
    """Task 1: ``place_model``. ``build``: "first-call" (built by the first call, in its
    device scope), "devices" (built beforehand in the right scopes), "nowhere" (beforehand, in
    no scope), "swapped". ``run``: "devices", "default" (called in no scope), "reversed",
    "first-default" and "second-default" (one layer called in no scope). ``output``: the
    output layer's activation; ``units``: the layers' widths; ``hidden``: the hidden layer's
    activation."""

    def place(x, devs):
        a = keras.layers.Dense(units[0], activation=hidden)
        b = keras.layers.Dense(units[1], activation=output)
        if build != "first-call":
            scopes = {"devices": devs, "swapped": devs[::-1], "nowhere": [None, None]}[build]
            for layer, scope, width in zip((a, b), scopes, (64, units[0]), strict=True):
                with _scope(scope):
                    layer.build((None, width))
        where = {
            "devices": devs,
            "reversed": devs[::-1],
            "default": [None, None],
            "first-default": [None, devs[1]],
            "second-default": [devs[0], None],
        }[run]
        with placement.capture() if capture else contextlib.nullcontext() as log:
            with _scope(where[0]):
                h = a(x)
            with _scope(where[1]):
                y = b(h)
        if not capture:
            with placement.capture() as log:  # a block that saw none of the ops
                pass
        return (keras.Sequential([a, b]) if model else [a, b]), y + shift, log.table

    return place


class Layer(tf.Module):
    """A hand-made dense layer."""

    def __init__(self, n_in, n_out, relu):
        super().__init__()
        self.w = tf.Variable(tf.random.normal((n_in, n_out), seed=1))
        self.b = tf.Variable(tf.zeros(n_out))
        self.relu = relu

    def __call__(self, x):
        y = x @ self.w + self.b
        return tf.nn.relu(y) if self.relu else y


def place_hand_made(x, devs):
    """Task 1 with hand-made layers."""
    layers = []
    for d, (n_in, n_out, relu) in zip(devs, [(64, 32, True), (32, 10, False)], strict=True):
        with tf.device(d):
            layers.append(Layer(n_in, n_out, relu))
    with placement.capture() as log:
        h = x
        for d, layer in zip(devs, layers, strict=True):
            with tf.device(d):
                h = layer(h)
    return layers, h, log.table


def place_not_a_triple(x, devs):
    """Task 1, a pair instead of (layers, logits, table)."""
    return None, x


def place_three_layers(x, devs):
    """Task 1, three things for the layers."""
    return [1, 2, 3], x, None


def place_numbers_for_layers(x, devs):
    """Task 1, two numbers for the layers."""
    return [1, 2], x, None


def right(sizes, devs, key=str, value=int):
    """Task 2: ``parameter_bytes``; ``key`` names a device, ``value`` makes a number."""
    held = {}
    for n_in, n_out, d in zip(sizes[:-1], sizes[1:], devs, strict=True):
        held[key(d)] = held.get(key(d), 0) + value(4 * (n_in * n_out + n_out))
    return held


def no_bias(s, d):
    """Task 2 without the biases."""
    held = {}
    for i, o, dd in zip(s[:-1], s[1:], d, strict=True):
        held[dd] = held.get(dd, 0) + 4 * i * o
    return held


def no_bias_params(s, d):
    """Task 2 without the biases, in parameters."""
    return {k: v // 4 for k, v in no_bias(s, d).items()}


def bias_per_input(s, d):
    """Task 2 with a bias per input unit."""
    held = {}
    for i, o, dd in zip(s[:-1], s[1:], d, strict=True):
        held[dd] = held.get(dd, 0) + 4 * (i * o + i)
    return held


def overwrites(s, d):
    """Task 2 where a device's later layer replaces its earlier one."""
    return {dd: 4 * (i * o + o) for i, o, dd in zip(s[:-1], s[1:], d, strict=True)}


def right_short_names(s, d):
    """Task 2 with short device names (``CPU:0``)."""
    return right(s, d, key=lambda n: n.split("device:")[-1])


def right_numpy_ints(s, d):
    """Task 2 with numpy integers."""
    return right(s, d, value=np.int64)


def right_whole_floats(s, d):
    """Task 2 with whole floats."""
    return right(s, d, value=float)


def right_zero_entry(s, d):
    """Task 2 with a device that holds nothing."""
    return {**right(s, d), "/device:CPU:7": 0}


def in_parameters(s, d):
    """Task 2 in parameters, not bytes."""
    return {k: v // 4 for k, v in right(s, d).items()}


def everywhere(s, d):
    """Task 2, the whole model on every device."""
    return {k: sum(right(s, d).values()) for k in d}


def one_device(s, d):
    """Task 2, the whole model on the first device."""
    return {d[0]: sum(right(s, d).values())}


def right_for_this_layout_only(s, d):
    """Task 2, right for the lab's layer sizes only."""
    return right(s, d) if s == lab03.LAYER_SIZES else {}


def bytes_as_list(s, d):
    """Task 2, a list instead of a dict."""
    return [1, 2]


def half_bytes(s, d):
    """Task 2, half a byte more on every device."""
    return {k: v + 0.5 for k, v in right(s, d).items()}


def booleans(s, d):
    """Task 2, True for every device."""
    return {k: True for k in d}


def layouts_with_numpy_ints():
    """Task 4, network A's layout of numpy integers."""
    return {"A": list(np.array([0, 0, 1, 1])), "B": [0, 0, 1, 1, 2, 2], "C": None, "D": None}
