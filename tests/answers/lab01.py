"""Lab 01 answers for tests/test_checks_lab01.py (tasks 3 and 4, which need TensorFlow), with
switches for the usual mistakes. The tests' worker process imports them
(``from tests.answers import lab01 as answers``)."""

from __future__ import annotations

import contextlib

import tensorflow as tf

from dtf import placement
from dtf.checks import lab01


def _scope(device):
    return tf.device(device) if device is not None else contextlib.nullcontext()


def _place(a, b, bias, matmul_on, add_on, table=True):
    with placement.capture() as log:
        with _scope(matmul_on):
            c = tf.matmul(a, b)
        with _scope(add_on):
            d = c + bias
    return d, (log.table if table else log)


def make_place(matmul=-1, add=0, table=True, devices=None):
    """Task 3: ``place_ops``. ``matmul``, ``add``: the index, into ``devs``, of the device of
    the MatMul and of the addition (None: no device scope); ``devices``: the list indexed
    instead of ``devs`` (the lab's own device list, a slip); ``table``: the table, else the
    placement log itself."""

    def place_ops(a, b, bias, devs):
        names = devs if devices is None else devices
        pick = [None if k is None else names[k] for k in (matmul, add)]
        return _place(a, b, bias, *pick, table=table)

    return place_ops


# The GPU names below must be constants of each answer's own code: the checker reads them there.


def place_matmul_on_gpu1(a, b, bias, devs):
    """Task 3, the MatMul on a GPU this process does not have."""
    return _place(a, b, bias, "/gpu:1", devs[0])


def place_on_gpus_by_f_string(a, b, bias, devs):
    """Task 3, both ops on GPUs named by f-strings."""
    first, second = 0, 1
    return _place(a, b, bias, f"/gpu:{second}", f"/device:GPU:{first}")


def place_add_on_gpu0(a, b, bias, devs):
    """Task 3, the addition on a GPU that soft placement moves to CPU:0 (right by luck)."""
    return _place(a, b, bias, devs[-1], "/gpu:0")


def value_only(a, b, bias, devs):
    """Task 3, no addition and no table."""
    return tf.matmul(a, b), None


def not_a_pair(a, b, bias, devs):
    """Task 3, the result alone."""
    return tf.matmul(a, b) + bias


def no_table(a, b, bias, devs):
    """Task 3, a string for the table."""
    return tf.matmul(a, b) + bias, "table"


def no_devices_argument(a, b, bias):
    """Task 3, a function without the ``devices`` parameter."""


def ops_outside_the_capture(a, b, bias, devs):
    """Task 3, the ops run after the capture block."""
    with placement.capture() as log:
        pass
    with tf.device(devs[-1]):
        c = tf.matmul(a, b)
    return c + bias, log.table


def colleague_log(devices):
    """Task 4's placement log, captured as the lab captures it: ``colleague_forward`` run on
    ``devices``."""
    x, w, b = (tf.constant(v) for v in lab01.COLLEAGUE_INPUTS)
    with placement.capture() as log:
        lab01.colleague_forward(x, w, b, devices)
    return log
