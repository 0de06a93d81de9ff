"""Timing verdicts that respect their noise: repeats, their spread, and a quiet machine.

A step time measured once says little: on a laptop the same step can take twice as long a
minute later (another program, a CPU that clocks down, the garbage collector). The timing
lessons therefore time each configuration in several *repeats*, taking turns, and read a
comparison as a ratio per repeat. :func:`verdict` claims a difference only when every repeat
agrees on its side of 1; when the repeats' range contains 1, the honest verdict is "no
measurable difference". With 5 repeats, a difference that is only noise puts all five ratios
on one chosen side with probability 1/32, on either side 1/16.

Timings taken on a busy machine measure the queue, not the step. :func:`machine_load` measures,
over one second before the timing starts, how much of the cores' time programs *other* than this
notebook used; the notebooks print it, ``make outputs`` stores a timing notebook only when it is
at most :data:`QUIET_SHARE`, and a test rejects stored timing outputs above it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

QUIET_SHARE = 0.25  # other programs may use at most a quarter of all cores' time
LOAD_LINE = "machine load before timing:"  # what tests/test_timing_outputs.py reads back


@dataclass(frozen=True)
class Load:
    """The share of all cores' time that programs outside this process tree used."""

    share: float
    cores: int

    @property
    def quiet(self) -> bool:
        return self.share <= QUIET_SHARE

    def __str__(self) -> str:
        verdict = "quiet" if self.quiet else "BUSY: timings below measure waiting, not work"
        return (
            f"{LOAD_LINE} {self.share:.2f} of {self.cores} cores' time used by other programs "
            f"({verdict}; quiet means at most {QUIET_SHARE:.2f})"
        )


def machine_load(window_s: float = 1.0) -> Load:
    """What other programs used of the machine's cores during the next ``window_s`` seconds.

    The machine's busy time (all cores, from ``psutil.cpu_times``) minus the CPU time of this
    process and every process it started, over the window, as a share of all cores' time. So
    the notebook's own kernel, servers and workers do not count, whatever they did before;
    another program, or another notebook, does. The wait is the measurement: a sampling window.
    """
    import psutil

    me = psutil.Process()

    def own() -> float:
        total = 0.0
        for process in [me, *me.children(recursive=True)]:
            try:
                times = process.cpu_times()
            except psutil.Error:  # ended during the window
                continue
            total += times.user + times.system
        return total

    def busy() -> float:
        times = psutil.cpu_times()
        return sum(times) - times.idle - getattr(times, "iowait", 0.0)

    start, busy0, own0 = time.perf_counter(), busy(), own()
    time.sleep(window_s)
    elapsed = time.perf_counter() - start
    cores = psutil.cpu_count() or 1
    other = max(0.0, (busy() - busy0) - (own() - own0)) / (elapsed * cores)
    return Load(round(min(other, 1.0), 2), cores)


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
    word: str = "faster"  # what a ratio below 1 makes `a`: "faster" for times, "smaller" else

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
            return f"{spread}: {self.a} {self.word}, every {unit} below 1"
        if self.winner == self.b:
            return f"{spread}: {self.b} {self.word}, every {unit} above 1"
        return f"{spread}: no measurable difference, the {unit}s span 1"


def verdict(
    a: str,
    a_times: Sequence[float],
    b: str,
    b_times: Sequence[float],
    *,
    paired: bool = True,
    word: str = "faster",
) -> Verdict:
    """Compare two configurations, one time per repeat each.

    ``paired=True`` (the default): the two were timed in the same repeats, taking turns, and
    repeat ``i`` of ``a`` is compared with repeat ``i`` of ``b``. ``paired=False``: they were
    timed one after the other, so no repeat of one belongs to a repeat of the other; every
    time of ``a`` is compared with every time of ``b``, and ``a`` is faster only if its slowest
    repeat beat ``b``'s fastest. The median is then the ratio of the two medians. ``word`` names
    the side with the smaller values: "faster" for times, e.g. "smaller" for a fitted cost.
    """
    a_s, b_s = np.asarray(a_times, float), np.asarray(b_times, float)
    same = a_s.shape == b_s.shape or not paired
    if not same or a_s.ndim != 1 or b_s.ndim != 1 or min(len(a_s), len(b_s)) < 2:
        raise ValueError(
            f"give one time per repeat for both, at least 2 repeats: got {a_s.shape} "
            f"and {b_s.shape}"
        )
    if (a_s <= 0).any() or (b_s <= 0).any():
        raise ValueError("times must be positive seconds")
    if paired:
        return Verdict(a, b, a_s / b_s, word=word)
    center = float(np.median(a_s) / np.median(b_s))
    ratios = np.ravel(np.divide.outer(a_s, b_s))
    return Verdict(a, b, ratios, counts=(len(a_s), len(b_s)), center=center, word=word)
