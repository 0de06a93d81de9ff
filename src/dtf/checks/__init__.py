"""Checkers for the lab notebooks: each task's answer in, a clear verdict out.

A lab task asks for a **function** (a stub, ``raise NotImplementedError("Task 1: write your
code here")``, in the student lab: ``tools/make_labs.py``); its check cell hands the function
to the task's checker, ``checks.lab01.task1(predict)``, which calls it and prints and returns
a :class:`Verdict`, never raises: ``not attempted`` (``None``, ``...``, the stub), ``wrong``
(what is wrong, and a hint that names the mistake and where to look, never the fix) or
``correct``; the same answer always gets the same line. :func:`summary` prints a lab's
scorecard, :func:`assert_all_correct` ends the solution notebooks. :mod:`dtf.checks.core`
holds the verdicts, the registry and the shared helpers, ``dtf.checks.labNN`` the checkers
of lab NN; TensorFlow is imported inside the checkers that need it.
"""

from __future__ import annotations

from dtf.checks import lab01, lab02, lab03, lab04, lab05, lab06, lab07
from dtf.checks.core import (
    NOT_ATTEMPTED,
    WRONG,
    Verdict,
    Wrong,
    assert_all_correct,
    call,
    call_function,
    check,
    expect_close,
    expect_equal,
    known_labs,
    reset,
    short,
    summary,
    task,
    tasks,
    user_error_line,
)

__all__ = [
    "NOT_ATTEMPTED",
    "WRONG",
    "Verdict",
    "Wrong",
    "assert_all_correct",
    "call",
    "call_function",
    "check",
    "expect_close",
    "expect_equal",
    "known_labs",
    "lab01",
    "lab02",
    "lab03",
    "lab04",
    "lab05",
    "lab06",
    "lab07",
    "reset",
    "short",
    "summary",
    "task",
    "tasks",
    "user_error_line",
]
