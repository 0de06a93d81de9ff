"""Refuse a bad notebook parameter before the notebook does any work: ``params.check(globals())``.

A notebook's parameters cell (tagged ``parameters``; papermill's ``-p`` and ``make run
ARGS="-p NAME VALUE"`` replace its values) is followed by one line in the next code cell::

    params.check(globals())  # a bad parameter stops here, named with its range

It checks every parameter of the course it finds in the namespace (:data:`RULES`: the
names, what each means and its range) and raises :class:`ParameterError` naming each bad
one, what to choose and what it means::

    NUM_DEVICES=0: choose a whole number from 1 to 8 (the logical devices this notebook
    makes: one replica, tower or stage each)

Without it, a bad value fails later, in the words of whatever received it ("n must be at
least 1", "global_batch must be at least 1"), or only after minutes of work.

Where a notebook needs a narrower range than the course's, the line says so with keywords:
``(low, high)`` bounds, or a :class:`Rule` (:func:`whole`, :func:`wholes`)::

    params.check(globals(), NUM_WORKERS=(2, 8))  # section 2 kills one worker

A bound may be an expression of other parameters, such as ``"STEPS - 1"`` or
``"len(FILE_RECORDS)"`` (names, numbers, ``+ - * // /`` and ``len``); the message shows
its value. In :data:`RULES` such a bound applies where the names it uses are parameters too.

Only the names of :data:`RULES` and the keywords are checked: a notebook must not use those
names for anything but its parameters (``tests/test_params.py`` checks that), so that running
the cell again, after the cells below it, checks the same values. Importing this module
imports no TensorFlow, Keras or JAX: it may run before ``quiet.quiet()`` or before JAX's
settings.
"""

from __future__ import annotations

import ast
import math
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dtf._util import is_whole_number

#: Examples in the training split of ``dtf.data.load("digits")`` (80 % of 1,797).
DIGITS_TRAIN = 1437
#: A bound: a number, an expression of other parameters (text), or None (no bound).
Bound = int | float | str | None

#: What :func:`check` tells the learner to do, after the bad parameters.
ADVICE = (
    "Change {it} in the parameters cell and run from there again (headless: -p NAME VALUE, "
    'for papermill or make run ARGS="-p NAME VALUE").'
)


class ParameterError(ValueError):
    """One or more parameters are out of range: one line for each, then what to do."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        advice = ADVICE.format(it="it" if len(self.problems) == 1 else "them")
        super().__init__("\n".join([*self.problems, advice]))


@dataclass(frozen=True)
class Rule:
    """What a parameter may be. ``kind``:

    - ``"whole"``: an integer (not ``bool``, not ``2.0``) from ``low`` to ``high``;
    - ``"positive"``: a finite number above 0, at most ``high``;
    - ``"bool"``: ``True`` or ``False``;
    - ``"choice"``: one of ``choices`` (text compared after ``normalize``, if given);
    - ``"wholes"``: a non-empty list or tuple of integers, each from ``low`` to ``high``;
    - ``"file"``: the path of an existing file, from the working directory or a folder above;
    - ``"masks"``: a list of ``CUDA_VISIBLE_DEVICES`` values, each ``None`` or text;
    - ``"name"``: a deployment name, as ``python -m dtf.deploy`` accepts it.

    ``meaning``: what the parameter is, in the learner's words (shown in the error).
    ``optional``: bounds that name a missing parameter are left out (for :data:`RULES`).
    """

    kind: str
    low: Bound = None
    high: Bound = None
    meaning: str = ""
    choices: tuple = ()
    normalize: Callable[[Any], Any] | None = None
    optional: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown kind {self.kind!r}: one of {', '.join(_KINDS)}")


def whole(low: Bound = None, high: Bound = None) -> Rule:
    """A whole number from ``low`` to ``high`` (either may be None: no bound)."""
    return Rule("whole", low, high)


def wholes(low: Bound = None, high: Bound = None) -> Rule:
    """A non-empty list or tuple of whole numbers, each from ``low`` to ``high``."""
    return Rule("wholes", low, high)


def _dataset_name(value: Any) -> Any:
    return value.strip().lower().replace("-", "_") if isinstance(value, str) else value


def _dataset_names() -> tuple[str, ...]:
    from dtf.data import NAMES  # cheap: dtf.data imports no TensorFlow or Keras

    return NAMES


def _rules() -> dict[str, Rule]:
    def rule(kind: str, low: Bound = None, high: Bound = None, **kw) -> Rule:
        return Rule(kind, low, high, optional=True, **kw)

    return {
        # Devices and processes.
        "NUM_DEVICES": rule(
            "whole",
            1,
            8,
            meaning="the logical devices this notebook makes: one replica, tower or stage each",
        ),
        "NUM_WORKERS": rule("whole", 1, 8, meaning="the worker processes this notebook starts"),
        "NUM_PS": rule("whole", 1, 8, meaning="the parameter-server processes it starts"),
        "NUM_PHYSICAL_GPUS": rule(
            "whole", 8, None, meaning="the GPUs of the modelled machine: its tables use GPUs 0-7"
        ),
        "CHILD_MASKS": rule("masks", meaning="CUDA_VISIBLE_DEVICES of each child process"),
        "MODEL_SHARDS": rule(
            "choice",
            choices=(1, 2, 4, 8),
            meaning="devices that share one copy of the model: it must divide the 16 filters",
        ),
        # Data and model.
        "DATASET": rule(
            "choice",
            choices=_dataset_names(),
            normalize=_dataset_name,
            meaning="the data set to train on (all but digits must be in Keras' cache)",
        ),
        "SEED": rule(
            "whole", 0, 2**32 - 2, meaning="the seed of the weights and of the data's order"
        ),
        "HIDDEN_UNITS": rule("whole", 1, None, meaning="units of each hidden layer"),
        "LEARNING_RATE": rule("positive", meaning="the step size of plain SGD"),
        "FILE_RECORDS": rule("wholes", 1, None, meaning="records in each TFRecord file"),
        # Batches: the global batch is derived from them.
        "BATCH": rule(
            "whole", 1, DIGITS_TRAIN, meaning="examples per step, from the training digits"
        ),
        "PER_DEVICE_BATCH": rule("whole", 1, None, meaning="examples per device and step"),
        "SMALL_BATCH": rule(
            "whole", 1, "PER_DEVICE_BATCH - 1", meaning="a second, smaller batch per replica"
        ),
        "PER_DEVICE_BATCHES": rule(
            "wholes", 1, None, meaning="the batches per device to measure, one per run"
        ),
        "PER_REPLICA_BATCH": rule("whole", 1, None, meaning="examples per replica and step"),
        "PER_WORKER_BATCH": rule("whole", 1, None, meaning="examples per worker and step"),
        "MICRO_BATCHES": rule("whole", 1, None, meaning="micro-batches per batch (M)"),
        "MICRO_BATCH_SWEEP": rule("wholes", 1, None, meaning="the values of M to time"),
        # Training length.
        "EPOCHS": rule("whole", 1, None, meaning="passes over the training data"),
        "STEPS": rule("whole", 1, None, meaning="training steps"),
        "FAILURE_STEPS": rule("whole", 1, None, meaning="steps scheduled while a task is down"),
        "CHECKPOINT_EVERY": rule("whole", 1, None, meaning="steps between checkpoints"),
        "FAIL_AT_STEP": rule(
            "whole", 1, "STEPS - 1", meaning="the step after which a worker fails"
        ),
        # Timing.
        "REPEATS": rule("whole", 2, None, meaning="repeats of each timing: a spread needs 2"),
        "TIMING_STEPS": rule("whole", "REPEATS", None, meaning="timed steps, split into repeats"),
        "TIMED_STEPS": rule("whole", 1, None, meaning="steps per timing"),
        "WARMUP_STEPS": rule(
            "whole", 1, None, meaning="steps run before timing: the first one traces"
        ),
        "TRACED_STEPS": rule("whole", 1, None, meaning="steps recorded in each trace"),
        "SLOW_INPUT_MS": rule(
            "positive", meaning="milliseconds of Python work per example of the slow input"
        ),
        # Limits: every wait has one, and every claim a threshold.
        "READY_TIMEOUT_S": rule("positive", meaning="seconds the processes may take to start"),
        "RUN_TIMEOUT_S": rule("positive", meaning="seconds each run and each wait may take"),
        "RUN_TIMEOUT_MS": rule(
            "whole", 1, None, meaning="milliseconds each session.run may take (0: no limit)"
        ),
        "PROGRAM_TIMEOUT_S": rule("positive", meaning="seconds the host program may take"),
        "CHILD_TIMEOUT_S": rule("positive", meaning="seconds each child process may take"),
        "WORKER_TIMEOUT_S": rule("positive", meaning="seconds all worker processes may take"),
        "RECONNECT_TIMEOUT_S": rule(
            "positive", meaning="seconds to keep reconnecting after a restart"
        ),
        "ERROR_WITHIN_S": rule("positive", meaning="seconds for a failure to become an error"),
        "DETECT_WITHIN_S": rule(
            "positive", meaning="seconds within which a killed worker must be reported"
        ),
        "HANG_TIMEOUT_S": rule(
            "positive", meaning="seconds within which a hung worker must be reported"
        ),
        "HANG_LIMIT_S": rule("positive", meaning="seconds to wait for a TF1 chief to exit"),
        "HANG_S": rule("positive", meaning="seconds the client without keepalive is watched"),
        "WEIGHT_TOL": rule("positive", meaning="the largest weight difference accepted"),
        # Clusters and deployments.
        "CLUSTER_FILE": rule("file", meaning="the JSON cluster file to read"),
        "FREE_PORTS": rule("bool", meaning="free ports instead of the file's own"),
        "OPEN_TENSORBOARD": rule("bool", meaning="start TensorBoard in this notebook"),
        "PORT": rule("whole", 1, 65535, meaning="the port every task listens on"),
        "NAME": rule("name", meaning="the deployment's name, the start of its Kubernetes names"),
    }


_KINDS = ("whole", "positive", "bool", "choice", "wholes", "file", "masks", "name")
#: Every parameter of the course's notebooks and lab solutions, with its range and meaning.
RULES: dict[str, Rule] = _rules()


# --------------------------------------------------------------------------- bounds


class _Missing(Exception):
    """A bound names a parameter the namespace does not have."""


_OPERATORS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Div: lambda a, b: a / b,
}


def _evaluate(expression: str, namespace: Mapping[str, Any]) -> Any:
    """The value of a bound: names of ``namespace``, numbers, + - * // /, and len(name)."""

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in namespace:
                raise _Missing(node.id)
            return namespace[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "len"
            and len(node.args) == 1
            and not node.keywords
        ):
            return len(value(node.args[0]))
        raise ValueError(f"bound {expression!r}: only names, numbers, + - * // / and len()")

    return value(ast.parse(expression, mode="eval").body)


def _number(value: Any) -> str:
    """``8``, ``0.5``, ``5999`` (not ``5999.0``, nor ``4.29497e+09``)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value) if isinstance(value, numbers.Integral) else f"{value:g}"


def _bound(bound: Bound, namespace: Mapping[str, Any], optional: bool) -> tuple[Any, str]:
    """(value, how it is shown) of ``bound``; (None, "") where it does not apply."""
    if bound is None or not isinstance(bound, str):
        return bound, "" if bound is None else _number(bound)
    try:
        got = _evaluate(bound, namespace)
    except _Missing as exc:
        if optional:
            return None, ""
        raise TypeError(
            f"params.check: the bound {bound!r} names {exc}, which is not a parameter here"
        ) from None
    except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        if isinstance(exc, ValueError) and str(exc).startswith("bound "):
            raise
        return None, ""  # a parameter it uses is itself bad: that one is reported
    if isinstance(got, bool) or not isinstance(got, numbers.Real) or not math.isfinite(got):
        return None, ""
    shown = _number(got)
    return got, shown if bound.strip() == shown else f"{shown} ({bound.strip()})"


# --------------------------------------------------------------------------- one parameter


def _range_text(noun: str, low: str, high: str) -> str:
    if low and high:
        return f"{noun} from {low} to {high}"
    if low:
        return f"{noun} of at least {low}"
    if high:
        return f"{noun} of at most {high}"
    return noun


def _within(value: Any, low: Any, high: Any) -> bool:
    return (low is None or value >= low) and (high is None or value <= high)


def _find_file(value: Any) -> Path | None:
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        return None
    path = Path(value)
    if path.is_absolute():
        return path if path.is_file() else None
    here = Path.cwd()
    return next((d / path for d in (here, *here.parents) if (d / path).is_file()), None)


def _problem(name: str, value: Any, rule: Rule, namespace: Mapping[str, Any]) -> str | None:
    """None if ``value`` is allowed, else what to choose instead."""
    low, low_text = _bound(rule.low, namespace, rule.optional)
    high, high_text = _bound(rule.high, namespace, rule.optional)
    kind = rule.kind
    if kind == "whole":
        if is_whole_number(value) and _within(value, low, high):
            return None
        return _range_text("a whole number", low_text, high_text)
    if kind == "positive":
        real = isinstance(value, numbers.Real) and not isinstance(value, bool)
        if real and math.isfinite(value) and value > 0 and _within(value, None, high):
            return None
        return "a number above 0" + (f" and at most {high_text}" if high_text else "")
    if kind == "bool":
        return None if value is True or value is False else "True or False"
    if kind == "choice":
        given = rule.normalize(value) if rule.normalize else value
        wholes_only = all(is_whole_number(c) for c in rule.choices)  # then 2.0 is not 2
        if (is_whole_number(value) if wholes_only else not isinstance(value, bool)) and (
            given in rule.choices
        ):
            return None
        return "one of " + ", ".join(map(repr, rule.choices))
    if kind == "wholes":
        items = value if isinstance(value, (list, tuple)) else None
        if items and all(is_whole_number(v) and _within(v, low, high) for v in items):
            return None
        each = _range_text("each", low_text, high_text).replace("each of ", "each ")
        return "a list of one or more whole numbers" + ("" if each == "each" else f", {each}")
    if kind == "file":
        if _find_file(value) is not None:
            return None
        return "the path of a file that exists, from this notebook's folder"
    if kind == "masks":
        items = value if isinstance(value, (list, tuple)) else None
        if items is not None and all(v is None or isinstance(v, str) for v in items):
            return None
        return 'a list of CUDA_VISIBLE_DEVICES values, each None (unset) or text, e.g. "0,1"'
    # kind == "name"
    from dtf.cluster.spec import ClusterConfigError
    from dtf.deploy import check_name

    try:
        check_name(value)
        return None
    except ClusterConfigError:
        return (
            "a name of lowercase letters, digits and '-', starting with a letter and ending "
            "with a letter or digit, at most 40 characters"
        )


# --------------------------------------------------------------------------- check


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def check(namespace: Mapping[str, Any], **rules: tuple[Bound, Bound] | Rule) -> None:
    """Raise :class:`ParameterError` if a parameter in ``namespace`` is out of its range.

    ``namespace``: the notebook's ``globals()``; every name of :data:`RULES` in it is checked.
    ``rules``: this notebook's own ranges, by parameter name: ``(low, high)`` (the same kind
    as in :data:`RULES`, these bounds) or a :class:`Rule`; a name given here must be defined.
    All bad parameters are reported at once, each on a line of its own, in the order of
    ``namespace`` (the parameters cell's order).
    """
    own: dict[str, Rule] = {}
    for name, given in rules.items():
        base = RULES.get(name)
        if isinstance(given, Rule):
            meaning = given.meaning or (base.meaning if base else "")
            own[name] = replace(given, meaning=meaning, optional=False)
        elif isinstance(given, tuple) and len(given) == 2 and base is not None:
            own[name] = replace(base, low=given[0], high=given[1], optional=False)
        else:
            raise TypeError(
                f"params.check: {name}= takes (low, high) for a parameter of params.RULES, "
                f"or a params.Rule; got {given!r}"
            )
        if name not in namespace:
            raise TypeError(f"params.check: {name} has a rule here but is not a parameter")
    problems = []
    for name, value in namespace.items():
        rule = own.get(name) or RULES.get(name)
        if rule is None:
            continue
        what = _problem(name, value, rule, namespace)
        if what is not None:
            meaning = f" ({rule.meaning})" if rule.meaning else ""
            problems.append(f"{name}={_shown(value)}: choose {what}{meaning}.")
    if problems:
        raise ParameterError(problems)
