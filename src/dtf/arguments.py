"""Argument checks with messages that say what to pass instead, for the pipeline lessons.

Part 04b's cells (generated into :mod:`dtf.lessons.pipeline`) check their arguments before
any TensorFlow runs, so that a learner's mistake reads "micro_batches must be at least 1"
rather than a shape error three calls deep. The checks are plain Python and live here, in a
module that imports nothing of the course but :mod:`dtf._util`: the generated lesson imports
them, and :mod:`dtf.parallel` (plumbing below the lessons) uses them too, so neither has to
import the other.
"""

from __future__ import annotations

import math
import numbers

from dtf._util import whole_number

__all__ = [
    "check_equal_split",
    "check_learning_rate",
    "check_micro_batches",
    "check_stages",
]


def check_learning_rate(learning_rate) -> float:
    """``learning_rate`` as a ``float`` if it is a finite number > 0 (not a bool)."""
    if isinstance(learning_rate, bool) or not isinstance(learning_rate, numbers.Real):
        raise TypeError(f"learning_rate must be a number, got {learning_rate!r}")
    if not (math.isfinite(learning_rate) and float(learning_rate) > 0):
        raise ValueError(f"learning_rate must be a finite number > 0, got {learning_rate!r}")
    return float(learning_rate)


def check_micro_batches(micro_batches) -> int:
    """``micro_batches`` (or any number of equal pieces) as an ``int`` >= 1."""
    return whole_number("micro_batches", micro_batches, minimum=1)


def check_stages(stages, name: str = "stages") -> list:
    """``stages`` (or replicas, ``name="replicas"``) as a list; ``ValueError`` when empty."""
    stages = list(stages)
    if not stages:
        raise ValueError(f"{name} is empty: build them with build_{name}(...)")
    return stages


def check_equal_split(examples, labels, pieces: int) -> None:
    """Refuse to cut a batch of ``examples`` (with ``labels`` labels; ``None`` when unknown
    before the graph runs) into ``pieces`` unequal micro-batches: the accumulated gradient
    equals the whole batch's only for equal ones. The message lists the counts that work."""
    pieces = check_micro_batches(pieces)
    if examples is not None and labels is not None and examples != labels:
        raise ValueError(f"x has {examples} examples but y has {labels}")
    if examples is not None and examples % pieces:
        divisors = [d for d in range(1, examples + 1) if examples % d == 0]
        raise ValueError(
            f"a batch of {examples} examples cannot be cut into {pieces} equal micro-batches "
            f"({examples} % {pieces} = {examples % pieces}): choose micro_batches from {divisors}"
        )
