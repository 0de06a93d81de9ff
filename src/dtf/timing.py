"""Timing verdicts that respect their noise: repeats, their spread, and a quiet machine.

A step time measured once says little: on a laptop the same step can take twice as long a
minute later (another program, a CPU that clocks down, the garbage collector). The timing
lessons therefore time each configuration in several *repeats*, taking turns, and read a
comparison as a ratio per repeat. :func:`verdict` claims a difference only when every repeat
agrees on its side of 1; when the repeats' range contains 1, the honest verdict is "no
measurable difference". With 5 repeats, a difference that is only noise puts all five ratios
on one chosen side with probability 1/32, on either side 1/16.

Timings taken on a busy machine measure the queue, not the step. :func:`machine_load` reads the
one-minute load average (runnable threads, averaged) before the timing starts; the notebooks
print it, ``make outputs`` stores a timing notebook only when it is at most
:data:`QUIET_LOAD_PER_CORE` per core, and a test rejects stored timing outputs above it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

QUIET_LOAD_PER_CORE = 1.0  # at most one runnable thread per core, averaged over a minute
LOAD_LINE = "machine load before timing:"  # what tests/test_stored_claims.py reads back


@dataclass(frozen=True)
class Load:
    """The one-minute load average and the number of cores it is shared by."""

    one_minute: float
    cores: int

    @property
    def limit(self) -> float:
        return QUIET_LOAD_PER_CORE * self.cores

    @property
    def quiet(self) -> bool:
        return self.one_minute <= self.limit

    def __str__(self) -> str:
        verdict = "quiet" if self.quiet else "BUSY: timings below measure waiting, not work"
        return (
            f"{LOAD_LINE} {self.one_minute:.2f} on {self.cores} cores "
            f"({verdict}; quiet means at most {self.limit:.2f})"
        )


def machine_load() -> Load:
    """The machine's one-minute load average and its usable cores (``os.getloadavg``)."""
    try:
        one_minute = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows has no load average: report none
        one_minute = 0.0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return Load(round(one_minute, 2), cores or 1)


def repeat_medians(seconds: Sequence[float], repeats: int) -> np.ndarray:
    """Split per-step times into ``repeats`` consecutive blocks; the median of each block."""
    values = np.asarray(seconds, dtype=float)
    if repeats < 2 or len(values) < repeats:
        raise ValueError(
            f"need at least 2 repeats and one step per repeat, got {len(values)} steps "
            f"for repeats={repeats}: time more steps or fewer repeats"
        )
    return np.array([np.median(block) for block in np.array_split(values, repeats)])


@dataclass(frozen=True)
class Verdict:
    """``a`` against ``b``: the ratio of their times in each repeat, and what follows."""

    a: str
    b: str
    ratios: np.ndarray  # time of a / time of b: one per repeat, or one per pair if not paired
    counts: tuple[int, ...] = ()  # (repeats of a, repeats of b) when not paired
    center: float | None = None  # the ratio of the medians when not paired

    @property
    def median(self) -> float:
        return float(np.median(self.ratios)) if self.center is None else self.center

    @property
    def low(self) -> float:
        return float(self.ratios.min())

    @property
    def high(self) -> float:
        return float(self.ratios.max())

    @property
    def winner(self) -> str | None:
        """The faster of the two when every repeat says so, else None."""
        if self.high < 1:
            return self.a
        if self.low > 1:
            return self.b
        return None

    def __str__(self) -> str:
        kind, unit = ("all pairs", "pair") if self.counts else ("repeats", "repeat")
        n = "x".join(map(str, self.counts)) if self.counts else str(len(self.ratios))
        spread = (
            f"{self.a} / {self.b} time {self.median:.2f} "
            f"({kind} {self.low:.2f} to {self.high:.2f}, n={n})"
        )
        if self.winner == self.a:
            return f"{spread}: {self.a} faster, every {unit} below 1"
        if self.winner == self.b:
            return f"{spread}: {self.b} faster, every {unit} above 1"
        return f"{spread}: no measurable difference, the {unit}s span 1"


def verdict(
    a: str, a_times: Sequence[float], b: str, b_times: Sequence[float], *, paired: bool = True
) -> Verdict:
    """Compare two configurations, one time per repeat each.

    ``paired=True`` (the default): the two were timed in the same repeats, taking turns, and
    repeat ``i`` of ``a`` is compared with repeat ``i`` of ``b``. ``paired=False``: they were
    timed one after the other, so no repeat of one belongs to a repeat of the other; every
    time of ``a`` is compared with every time of ``b``, and ``a`` is faster only if its slowest
    repeat beat ``b``'s fastest. The median is then the ratio of the two medians.
    """
    a_times, b_times = np.asarray(a_times, float), np.asarray(b_times, float)
    same = a_times.shape == b_times.shape or not paired
    if not same or a_times.ndim != 1 or b_times.ndim != 1 or min(len(a_times), len(b_times)) < 2:
        raise ValueError(
            f"give one time per repeat for both, at least 2 repeats: got {a_times.shape} "
            f"and {b_times.shape}"
        )
    if (a_times <= 0).any() or (b_times <= 0).any():
        raise ValueError("times must be positive seconds")
    if paired:
        return Verdict(a, b, a_times / b_times)
    center = float(np.median(a_times) / np.median(b_times))
    ratios = np.ravel(np.divide.outer(a_times, b_times))
    return Verdict(a, b, ratios, counts=(len(a_times), len(b_times)), center=center)
