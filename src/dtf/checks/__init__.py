"""Checkers for the lab notebooks: each task's answer in, a clear verdict out.

A lab task asks the learner to complete a **function**; in the student lab its body is a
stub, ``raise NotImplementedError("Task 1: write your code here")`` (why a function:
``tools/make_labs.py``). The check cell below it hands the function itself to the task's
checker, in the lab's module of this package: ``verdict = checks.lab01.task1(predict)``.

The checker calls the function and always *returns* a :class:`Verdict` (and prints it);
it never raises, so a lab runs from top to bottom whatever state it is in:

- ``not attempted``: the answer is ``None`` or ``...``, or calling it raised
  ``NotImplementedError`` (the stub is still there);
- ``wrong``: the answer differs from what the checker computes, the learner's code raised
  (the line of the error that says what went wrong, :func:`user_error_line`), it calls the
  stub of an earlier task, or it hands the task to the course's own reference code; the
  message says what is wrong, and a hint names the mistake and where to look, never the fix;
- ``correct``.

Checking the same answer again gives the same verdict, word for word. Checkers also accept
a plain value instead of a function. Verdicts are remembered per lab; :func:`summary`
prints the lab's scorecard and :func:`assert_all_correct` (used by the solution notebooks)
raises if any task is not correct; both know a lab's tasks from the :func:`task` decorator.

Layout: :mod:`dtf.checks.core` holds the verdicts, the registry and the shared helpers;
``dtf.checks.labNN`` the checkers of lab NN. TensorFlow is imported lazily, inside the
checkers that need it.
"""

from __future__ import annotations

from dtf.checks import lab01, lab02, lab03, lab04, lab05, lab06, lab07
from dtf.checks.core import (
    CORRECT,
    NOT_ATTEMPTED,
    STATUSES,
    WRONG,
    Verdict,
    Wrong,
    assert_all_correct,
    call,
    call_function,
    check,
    expect_close,
    expect_equal,
    expected_got,
    known_labs,
    reset,
    short,
    summary,
    task,
    tasks,
    user_error_line,
)

__all__ = [
    "CORRECT",
    "NOT_ATTEMPTED",
    "STATUSES",
    "WRONG",
    "Verdict",
    "Wrong",
    "assert_all_correct",
    "call",
    "call_function",
    "check",
    "expect_close",
    "expect_equal",
    "expected_got",
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
