"""Small validators and text helpers shared by every ``dtf`` module and by ``tools/``.

One rule for "a whole number" everywhere: Python and NumPy integers are accepted
(``np.int64(2)`` from a NumPy computation is a whole number), ``bool`` is not (``True`` is
an ``int`` to Python, but never what a learner meant), nor are floats, even ``2.0``.
"""

from __future__ import annotations

import numbers
import os
import sys

#: Longest first line kept by :func:`first_line` (a report cell, a checker verdict).
LINE_LIMIT = 300


def is_whole_number(value) -> bool:
    """Whether ``value`` is a whole number by this module's one rule (NumPy integers yes,
    bools and floats no): :func:`whole_number`'s test, for callers that word a refusal
    themselves (a checker's verdict)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def whole_number(
    name: str, value, *, minimum: int | None = None, maximum: int | None = None, hint: str = ""
) -> int:
    """``value`` as a Python ``int`` if it is a whole number in ``[minimum, maximum]``.

    Raises ``TypeError`` for anything that is not an integer (floats and bools included) and
    ``ValueError`` for one out of range; both messages name ``name`` and, when given, end
    with ``hint`` (what to do instead).
    """
    tail = f" {hint}" if hint else ""
    if not is_whole_number(value):
        raise TypeError(f"{name} must be a whole number, got {value!r}.{tail}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}.{tail}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {value}.{tail}")
    return value


def first_line(text, limit: int = LINE_LIMIT) -> str:
    """The first non-blank line of ``text``, stripped and cut to ``limit`` characters."""
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def error_line(exc: BaseException, limit: int = LINE_LIMIT) -> str:
    """``TypeName: first line of the message``, for one-line reports of an exception."""
    text = first_line(exc, limit)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def command_name(script: str, module: str) -> str:
    """How this command was started, for its usage and warning lines: ``script`` when run as
    the console script of that name (``pyproject.toml``, ``[project.scripts]``), else
    ``python -m module`` (name the module: run so, its ``__name__`` is ``"__main__"``)."""
    if os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0] == script:
        return script
    return f"python -m {module}"
