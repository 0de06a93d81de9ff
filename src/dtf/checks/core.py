"""The verdict core shared by every lab's checkers.

A checking function, registered with :func:`task`, receives the learner's answer (and what
its check cell passes), runs it with :func:`call`, computes the reference itself, and on a
disagreement raises :class:`Wrong` (directly, or through a table of known mistakes that
:func:`diagnose` runs); it returns an optional note for the "correct" line.
:func:`check` turns that into a printed, remembered :class:`Verdict` and never raises;
:func:`summary` and :func:`assert_all_correct` read the scorecard. The rest compares values
(:func:`expect_equal`, :func:`expect_close`, :func:`short`), reads device setups and placement
tables, and refuses answers that hand the task to the course's own code
(:func:`reference_reached`). Verdicts depend only on the answer.
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import dis
import functools
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import textwrap
import traceback
import types
from collections.abc import Callable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from dtf._util import LINE_LIMIT, whole_number

CORRECT, WRONG, NOT_ATTEMPTED = "correct", "wrong", "not attempted"
STATUSES = (CORRECT, WRONG, NOT_ATTEMPTED)

#: The message of the stubs ``tools/make_labs.py`` writes.
STUB_MESSAGE = re.compile(r"^Task (?P<task>\d+): write your code here")
#: The same anywhere in an error's text (autograph's ``in user code: <frames> ...``).
_STUB_ANYWHERE = re.compile(STUB_MESSAGE.pattern[1:])
#: The first lines of the errors TensorFlow wraps around the one that matters: autograph's
#: (an error while tracing a ``tf.function``) and the runtime's (an op of a graph failed).
_WRAPPER_HEADERS = ("in user code:", "Graph execution error:")
#: A frame of those wrappers: ``File "x.py", line 8, in step  *`` (``*``: the learner's code,
#: ``**``: a library's code it called).
_FRAME = re.compile(
    r'^\s*File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<function>\S+)(?P<mark>\s+\*+)?\s*$'
)
#: The prefix of an eager op's error: ``{{function_node __wrapped__MatMul_device_/job:...}}``.
_FUNCTION_NODE = re.compile(r"^\{\{function_node [^}]*\}\}\s*")
#: A learner's code quoted in a message: at most this many characters of it.
_CODE_LIMIT = 80
#: Lab names: ``lab`` and the two digits of the lab's notebook (``labs/01_x_lab.ipynb``).
_LAB_NAME = re.compile(r"lab\d\d")
_SHORT_LIMIT = 160


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check. ``message`` is the line the checker printed."""

    lab: str
    task: int
    status: str
    message: str

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    def __str__(self) -> str:
        return self.message


class Wrong(Exception):
    """Raised inside a checker: the answer is wrong. ``detail`` says how, ``hint`` what to try."""

    def __init__(self, detail: str, hint: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.hint = hint


class _NotAttempted(Exception):
    """Raised inside a checker: the task still has its stub."""


#: The latest verdict of every task that was checked, per lab: the scorecard.
_results: dict[str, dict[int, Verdict]] = {}
#: The task being checked, so that :func:`call` can tell a stub of another task apart.
_current_task: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "dtf_checks_current_task", default=None
)


def reset(lab: str | None = None) -> None:
    """Forget the verdicts of ``lab`` (of every lab when None)."""
    if lab is None:
        _results.clear()
    else:
        _results.pop(lab, None)


def _sentence(text: str) -> str:
    """``text`` with a capital first letter and a full stop at the end."""
    text = text.strip()
    if text and text[0].islower():
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _verdict(lab: str, number: int, status: str, detail: str = "", hint: str | None = None):
    label = f"Task {number}"
    if status == CORRECT:
        message = f"{label}: correct" + (f". {_sentence(detail)}" if detail else "")
    elif status == NOT_ATTEMPTED:
        message = f"{label}: not attempted" + (f" ({detail})" if detail else "")
    else:
        detail = detail.strip()
        detail = detail if detail.endswith((".", "!", "?")) else detail + "."
        message = f"{label}: wrong: {detail}" + (f" Hint: {_sentence(hint)}" if hint else "")
    return Verdict(lab, number, status, message)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unwrapped(exc: BaseException) -> tuple[str, tuple[str, str] | None]:
    """The line of ``exc``'s message that says what went wrong, and ``(function, code line)``
    of the learner's code when the message shows it: for the errors TensorFlow wraps
    (:data:`_WRAPPER_HEADERS`), the line after the last frame; else the first line."""
    lines = [line.rstrip() for line in str(exc).splitlines()]
    text = next((ln.strip() for ln in lines if ln.strip()), "")
    where = None
    if text in _WRAPPER_HEADERS:
        frames = [(i, frame) for i, ln in enumerate(lines) if (frame := _FRAME.match(ln))]
        start = frames[-1][0] + 1 if frames else 1
        # After the last frame: its code line (if any), a blank line, then the message.
        while start < len(lines) and lines[start].strip():
            start += 1
        text = next((ln.strip() for ln in lines[start:] if ln.strip()), "")
        mine = [(i, frame) for i, frame in frames if (frame["mark"] or "").strip() == "*"]
        if mine and mine[-1][0] + 1 < len(lines):
            last, frame = mine[-1]
            code = lines[last + 1].strip()
            if code and not _FRAME.match(lines[last + 1]):
                where = (frame["function"], code)
        kind = re.match(r"^(?P<type>[A-Za-z_][\w.]*): ?(?P<rest>.*)$", text)
        if kind and kind["type"].rpartition(".")[2] == type(exc).__name__:
            text = kind["rest"].strip()
    text = re.sub(r"\s+name:\s*$", "", _FUNCTION_NODE.sub("", text))  # an eager op's tail
    return text, where


def user_error_line(exc: BaseException) -> str:
    """``TypeName: the line that says what went wrong`` (:func:`_unwrapped`), and the
    learner's line that raised it when the message shows it."""
    text, where = _unwrapped(exc)
    name = type(exc).__name__
    inner = re.match(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception)): ?(?P<rest>.*)$", text)
    if name == "StagingError" and inner:  # autograph could not re-raise the learner's type
        name, text = inner["type"].rpartition(".")[2], inner["rest"].strip()
    place = ""
    if where is not None:
        place = f" (at `{_cut(where[1], _CODE_LIMIT)}` in `{where[0]}`)"
        text = text.rstrip(".")
    line = f"{name}: {text}" if text else name
    return _cut(line, max(LINE_LIMIT - len(place), 40)) + place


def _stub_task(exc: BaseException) -> int | None:
    """The task whose stub raised ``exc`` (the last one named in its message), or None."""
    found = list(_STUB_ANYWHERE.finditer(str(exc)))
    return int(found[-1]["task"]) if found else None


def _stub_function(exc: BaseException) -> str | None:
    """The function whose stub raised ``exc``: the last frame of its message or traceback."""
    frames = [m for ln in str(exc).splitlines() if (m := _FRAME.match(ln))]
    if frames:
        name = frames[-1]["function"]
    else:
        stack = traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []
        name = stack[-1].name if stack else None
    return name if name and name.isidentifier() else None


def _error_hint(exc: BaseException, name: str) -> str:
    text = str(exc)
    if "symbolic" in text and "numpy" in text.lower():
        return (
            "inside a tf.function, tensors have no values yet: NumPy cannot read them. Use "
            "TensorFlow's ops (tf.reduce_mean, tf.split, ...) on tensors"
        )
    return f"call `{name}` in a new cell to see the full traceback"


def check(lab: str, number: int, body: Callable[[], str | None], answer: Any = None) -> Verdict:
    """Run ``body()`` and print and remember its :class:`Verdict`: a :class:`Wrong` it raises
    is "wrong", a stub "not attempted", any other exception "wrong" with its line; never
    raises. ``answer`` names the function in the "not attempted" message."""
    token = _current_task.set(number)
    try:
        note = body()
        verdict = _verdict(lab, number, CORRECT, note or "")
    except _NotAttempted:
        name = getattr(answer, "__name__", None)
        where = f" in `{name}`" if callable(answer) and name else ""
        detail = (
            f"replace `raise NotImplementedError(...)`{where} with your code, "
            "run that cell, then this one"
        )
        verdict = _verdict(lab, number, NOT_ATTEMPTED, detail)
    except Wrong as exc:
        verdict = _verdict(lab, number, WRONG, exc.detail, exc.hint)
    except Exception as exc:  # a malformed answer the checker did not foresee: never raise
        verdict = _verdict(
            lab, number, WRONG, f"your answer could not be checked ({user_error_line(exc)})"
        )
    finally:
        _current_task.reset(token)
    _results.setdefault(lab, {})[number] = verdict
    print(verdict.message, flush=True)
    return verdict


def call(answer: Any, *args: Any, **kwargs: Any) -> Any:
    """``answer(*args, **kwargs)`` if it is callable, else ``answer``. ``None``, ``...``, the
    task's stub and a bare ``NotImplementedError`` are "not attempted"; the stub of another
    task is a :class:`Wrong` that names it; any other exception a :class:`Wrong` with its
    line (:func:`user_error_line`)."""
    if answer is None or answer is Ellipsis:
        raise _NotAttempted
    if not callable(answer):
        return answer
    name = getattr(answer, "__name__", "your function")
    try:
        result = answer(*args, **kwargs)
    except NotImplementedError as exc:
        other = _stub_task(exc)
        current = _current_task.get()
        if other is not None and current is not None and other != current:
            function = _stub_function(exc)
            via = f" (`{function}`)" if function and function != name else ""
            raise Wrong(
                f"`{name}` calls code of Task {other}{via}, which still raises NotImplementedError",
                f"finish Task {other} first, run its cell, then this one again",
            ) from None
        if other is None and _unwrapped(exc)[0]:
            raise _raised(exc, name) from None
        raise _NotAttempted from None
    except Exception as exc:
        raise _raised(exc, name) from None
    return result


def _raised(exc: BaseException, name: str) -> Wrong:
    """The :class:`Wrong` for the function ``name`` that raised ``exc``."""
    return Wrong(f"`{name}` raised {user_error_line(exc)}", hint=_error_hint(exc, name))


def call_function(
    answer: Any, *args: Any, hints: Sequence[tuple[str, str]] = (), where: str = ""
) -> Any:
    """:func:`call` for an answer that must be a function. ``hints``: ``(pattern, hint)``, the
    hint for an error whose text has the pattern; ``where``: what the call was for."""
    if answer is not None and answer is not Ellipsis and not callable(answer):
        raise Wrong(
            f"expected a function, got {short(answer)}",
            "pass the function itself to the checker, without calling it (no parentheses)",
        )
    try:
        return call(answer, *args)
    except Wrong as exc:
        detail = f"for {where}: {exc.detail}" if where else exc.detail
        hint = next((h for pattern, h in hints if re.search(pattern, exc.detail)), exc.hint)
        raise Wrong(re.sub(r" object at 0x[0-9a-fA-F]+", "", detail), hint) from None


@dataclass(frozen=True)
class Task:
    """One registered task; ``source``: the ``module.qualname`` its checker runs."""

    lab: str
    number: int
    optional: bool
    checker: Callable[..., Verdict]
    source: str


_registry: dict[str, dict[int, Task]] = {}


def _check_lab(lab: Any) -> str:
    if not isinstance(lab, str) or not _LAB_NAME.fullmatch(lab):
        raise ValueError(
            f"a lab is named 'lab' and the two digits of its notebook, e.g. 'lab01', got {lab!r}"
        )
    return lab


def task(lab: str, number: int, *, optional: bool = False, references: Sequence[str] = ()):
    """Decorator: register ``body(answer, ...)`` as the checker of task ``number`` of ``lab``;
    the decorated function returns the :class:`Verdict` of :func:`check`. ``references``: the
    course's own code for the task (``"module.name"``, or ``"module.name(arg)"`` when a call
    passes ``arg``) or a table of the checker's answers, refused before the answer runs.
    Another function for a registered task raises ``ValueError``; reloading the same module
    replaces the checker."""
    lab = _check_lab(lab)
    number = whole_number("a task number", number, minimum=1)
    if not isinstance(optional, bool):
        raise TypeError(f"optional must be True or False, got {optional!r}")
    for reference in references:
        if not _REFERENCE.fullmatch(reference):
            raise ValueError(f"a reference is 'module.name' or 'module.name(arg)': {reference!r}")

    def register(body: Callable[..., str | None]) -> Callable[..., Verdict]:
        where = f"{body.__module__}.{body.__qualname__}"
        known = _registry.get(lab, {}).get(number)
        if known is not None and known.source != where:
            raise ValueError(
                f"task {number} of {lab} is already checked by {known.source}; "
                f"give {where} another number"
            )

        def run(answer: Any, args: tuple, kwargs: dict) -> str | None:
            found = reference_reached(answer, references)
            if found:
                raise Wrong(
                    f"`{getattr(answer, '__name__', 'your function')}` {found}, the course's own "
                    "code for this task",
                    "the task asks you to write it yourself: the checker compares your answer "
                    "with that code, so calling it proves nothing",
                )
            return body(answer, *args, **kwargs)

        @functools.wraps(body)
        def checker(answer: Any, *args: Any, **kwargs: Any) -> Verdict:
            return check(lab, number, lambda: run(answer, args, kwargs), answer)

        _registry.setdefault(lab, {})[number] = Task(lab, number, optional, checker, where)
        return checker

    return register


#: A task's reference: ``package.module.name``, and optionally ``(arg)``, the argument that
#: makes a call to it a shortcut.
_REFERENCE = re.compile(r"(?P<path>\w+(?:\.\w+)+)(?:\((?P<arg>\w+)\))?")
_MISSING = object()
_SPACES = (types.ModuleType, type)  # what an answer reads a reference from


def code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """``code`` and every code object nested in it (functions, lambdas, comprehensions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from code_objects(const)


def _loaded(function: types.FunctionType) -> Iterator[tuple[Any, types.CodeType]]:
    """``(object, code)`` for every global, closure cell, imported module, and attribute of a
    module or class that ``function``'s code (nested code included) loads."""
    closure = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or (), strict=True):
        try:
            closure[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            pass
    for code in code_objects(function.__code__):
        value = module = previous = _MISSING
        local: dict[str, Any] = {}  # names bound here to an import or to another name
        for ins in dis.get_instructions(code):
            name, kind = ins.argval, ins.opname
            if kind == "IMPORT_NAME":  # with a fromlist, the module itself; else its package
                top = name if getattr(previous, "argval", None) else name.partition(".")[0]
                value = module = sys.modules.get(top, _MISSING)
            elif kind == "IMPORT_FROM" and isinstance(module, types.ModuleType):
                value = getattr(module, name, _MISSING)
            elif kind.startswith("STORE_") and value is not _MISSING:
                local[name], value = value, _MISSING
            elif kind.startswith(("LOAD_FAST", "LOAD_DEREF")) and name in local:
                value = local[name]
            elif kind in ("LOAD_GLOBAL", "LOAD_NAME"):
                value = function.__globals__.get(name, _MISSING)
            elif kind == "LOAD_DEREF" and name not in function.__code__.co_cellvars:
                value = closure.get(name, _MISSING)  # nested code: the same cell
            elif kind in ("LOAD_ATTR", "LOAD_METHOD") and isinstance(value, _SPACES):
                value = getattr(value, name, _MISSING)
            else:
                value = _MISSING
            previous = ins
            if value is not _MISSING:
                yield value, code


def _passes(function: Any, code: types.CodeType, reference: Any, arg: str) -> bool:
    """Whether ``function`` passes ``arg`` to ``reference``, by keyword or by position."""
    if any(isinstance(c, tuple) and arg in c for c in code.co_consts):
        return True
    position = list(inspect.signature(reference).parameters).index(arg)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return False
    name = reference.__name__
    return any(
        isinstance(node, ast.Call)
        and getattr(node.func, "attr", getattr(node.func, "id", None)) == name
        and len(node.args) > position
        for node in ast.walk(tree)
    )


def reference_reached(answer: Any, references: Sequence[str]) -> str | None:
    """How ``answer`` calls one of ``references`` (``"calls `x.y`"``) or None, read from the
    names its code (and that of the notebook's functions it calls) loads, before it runs."""
    targets = []
    for reference in references:
        match = _REFERENCE.fullmatch(reference)
        if match is None:
            raise ValueError(f"not `module.name` or `module.name(arg)`: {reference!r}")
        path, arg = match.group("path", "arg")
        module, _, name = path.rpartition(".")
        targets.append((getattr(importlib.import_module(module), name), path, arg))
    for target, path, arg in targets:
        if arg is None and inspect.unwrap(getattr(answer, "python_function", answer)) is target:
            return f"is `{path}`"
    todo: list[tuple[Any, str | None]] = [(answer, None)]
    seen: set[int] = set()
    while todo and targets:
        function, via = todo.pop()
        function = inspect.unwrap(getattr(function, "python_function", function))
        if not isinstance(function, types.FunctionType) or id(function) in seen:
            continue
        seen.add(id(function))
        scope = function.__globals__
        for value, code in _loaded(function):
            for target, path, arg in targets:
                if value is target and (arg is None or _passes(function, code, target, arg)):
                    verb = "calls" if callable(target) else "reads"  # a function, or a table
                    how = f"{verb} `{path}`" + (f" with `{arg}`" if arg else "")
                    return how + (f" (through `{via}`)" if via else "")
            helper = value.python_function if hasattr(type(value), "python_function") else value
            if isinstance(helper, types.FunctionType) and helper.__globals__ is scope:
                todo.append((helper, via or helper.__name__))
    return None


def known_labs() -> list[str]:
    """The labs registered, and the ``labNN`` modules of this package."""
    package = __name__.rpartition(".")[0]
    modules = {
        info.name
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
        if _LAB_NAME.fullmatch(info.name)
    }
    return sorted(modules | set(_registry))


def tasks(lab: str) -> dict[int, Task]:
    """The registered tasks of ``lab``, by number. The lab's module is imported if needed."""
    lab = _check_lab(lab)
    if lab not in _registry and lab in known_labs():
        importlib.import_module(f"{__name__.rpartition('.')[0]}.{lab}")
    if lab not in _registry:
        raise ValueError(f"unknown lab {lab!r}; known: {', '.join(known_labs())}")
    return dict(sorted(_registry[lab].items()))


def summary(lab: str) -> dict[int, str]:
    """Print the lab's scorecard (one line per task) and return ``{task: status}``."""
    registered = tasks(lab)
    seen = _results.get(lab, {})
    statuses = {}
    lines = []
    for number, info in registered.items():
        verdict = seen.get(number)
        status = verdict.status if verdict else "not checked yet (run its check cell)"
        statuses[number] = verdict.status if verdict else NOT_ATTEMPTED
        label = f"Task {number}" + (" (optional)" if info.optional else "")
        lines.append(f"  {label}: {status}")
    done = sum(s == CORRECT for s in statuses.values())
    print(f"{lab}: {done} of {len(registered)} tasks correct")
    print("\n".join(lines), flush=True)
    return statuses


def assert_all_correct(lab: str) -> None:
    """Raise AssertionError unless every task of ``lab`` was checked and is correct (the
    last cell of a solution notebook, so a wrong solution fails its headless run)."""
    registered = tasks(lab)
    seen = _results.get(lab, {})
    bad = [
        seen[number].message if number in seen else f"Task {number}: not checked"
        for number in registered
        if number not in seen or not seen[number].correct
    ]
    if bad:
        raise AssertionError(f"{lab}: tasks not correct: " + "; ".join(bad))


def as_array(value: Any) -> np.ndarray:
    """A NumPy array from a tensor, variable, array, list or number."""
    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value)


def _is_arraylike(value: Any) -> bool:
    return hasattr(value, "numpy") or isinstance(value, np.ndarray)


def short(value: Any, limit: int = _SHORT_LIMIT) -> str:
    """``value`` in one line for messages (arrays: shape, dtype, first values)."""
    if _is_arraylike(value):
        array = as_array(value)
        flat = array.ravel()
        shown = np.array2string(flat[:6], precision=4, separator=", ")
        if flat.size > 6:
            shown = shown[:-1] + ", ...]"
        kind = "tensor" if hasattr(value, "numpy") else "array"
        text = f"{kind} of shape {tuple(array.shape)} ({array.dtype}) {shown}"
    else:
        text = repr(value)
    return _cut(" ".join(text.split()), limit)


def listed(items: Sequence[Any]) -> str:
    """``"1, 4 and 6"``."""
    shown = [str(item) for item in items]
    return ", ".join(shown[:-1]) + " and " + shown[-1] if len(shown) > 1 else "".join(shown)


def numbered(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``x[i] = [i, -i]`` and ``y[i] = i``: every example says which one it is."""
    i = np.arange(size)
    return np.stack([i, -i], axis=1).astype(np.float32), i.astype(np.int64)


def _prefix(what: str | None) -> str:
    return f"for {what}: " if what else ""


def expected_got(expected: Any, got: Any, what: str | None = None) -> str:
    """``"for <what>: expected X, got Y"`` with both values shortened."""
    return f"{_prefix(what)}expected {short(expected)}, got {short(got)}"


def expect_kind(
    got: Any,
    kind: type | tuple[type, ...],
    described: str,
    hint: str | None = None,
    *,
    size: int | None = None,
    what: str | None = None,
) -> Any:
    """``got`` when it is a ``kind`` (of ``size`` items, when given), else :class:`Wrong`."""
    if not isinstance(got, kind) or (size is not None and len(cast(Sized, got)) != size):
        raise Wrong(f"{_prefix(what)}expected {described}, got {short(got)}", hint)
    return got


def all_close(a: Any, b: Any, atol: float = 1e-4, rtol: float = 1e-4) -> bool:
    """Whether ``a`` and ``b`` hold as many arrays, each of the other's shape and close to it
    (``atol=0, rtol=0``: equal)."""
    try:
        pairs = zip(a, b, strict=True)
        return all(
            np.shape(u) == np.shape(v) and np.allclose(u, v, rtol=rtol, atol=atol) for u, v in pairs
        )
    except (TypeError, ValueError):
        return False


def expect_number(
    value: Any,
    detail: str,
    hint: str | None = None,
    *,
    shape_detail: str | None = None,
    shape_hint: str | None = None,
) -> float:
    """``value`` (a tensor, an array or a number) as one float, else :class:`Wrong`: ``detail``
    and ``hint`` when it is no number; when it holds numbers of another shape, the same, or
    ``shape_detail`` (where ``{shape}`` stands for that shape) and ``shape_hint`` if given."""
    try:
        array = as_array(value).astype(np.float64)
    except (TypeError, ValueError):
        raise Wrong(detail, hint) from None
    if array.shape == ():
        return float(array)
    if shape_detail is None:
        raise Wrong(detail, hint)
    raise Wrong(shape_detail.replace("{shape}", str(array.shape)), shape_hint)


def expect_equal(expected: Any, got: Any, *, what: str | None = None, hint: str | None = None):
    """Raise :class:`Wrong` unless ``got == expected``."""
    try:
        same = bool(got == expected)
    except Exception:  # e.g. arrays of different shapes
        same = False
    if not same:
        raise Wrong(expected_got(expected, got, what), hint)


def expect_close(
    expected: Any,
    got: Any,
    *,
    what: str | None = None,
    atol: float = 1e-6,
    rtol: float = 0.0,
    hint: str | None = None,
    show_expected: bool = True,
) -> float:
    """Raise :class:`Wrong` unless ``got`` has ``expected``'s shape and every element is
    within ``atol + rtol * |expected|``; return the largest absolute difference.
    ``show_expected=False``: the message shows the learner's values only (where the expected
    values are the answer of a task), never ``expected``'s values, shape or difference."""
    want = as_array(expected).astype(np.float64)
    try:
        have = as_array(got).astype(np.float64)
    except (TypeError, ValueError):
        raise Wrong(f"{_prefix(what)}expected numbers, got {short(got)}", hint) from None
    if have.shape != want.shape:
        if not show_expected:
            raise Wrong(f"{_prefix(what)}your shape {tuple(have.shape)} is not its shape", hint)
        raise Wrong(
            f"{_prefix(what)}expected shape {tuple(want.shape)}, got shape {tuple(have.shape)}",
            hint,
        )
    if want.size == 0:
        return 0.0
    diff = np.abs(have - want)
    diff = np.where(np.isnan(diff), np.inf, diff)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
    largest = float(diff[worst])
    if largest > atol + rtol * abs(float(want[worst])):
        where = f" at index {tuple(int(i) for i in worst)}" if want.ndim else ""
        if not show_expected:
            raise Wrong(
                f"{_prefix(what)}your values {short(got)} are not the right ones: the one "
                f"furthest off{where} is {float(have[worst]):.6g}",
                hint,
            )
        raise Wrong(
            f"{_prefix(what)}expected {short(want.astype(as_array(expected).dtype))}, "
            f"got {short(got)}; the largest difference is {largest:.3g}{where} "
            f"(expected {float(want[worst]):.6g}, got {float(have[worst]):.6g}; "
            f"tolerance {atol:g})",
            hint,
        )
    return largest


@dataclass(frozen=True)
class Mistake:
    """One known wrong answer of a task, as data: when ``test(**facts)`` is true, the answer
    made this mistake. ``detail`` and ``hint`` are format strings over the same facts; the
    hint names the mistake, never the fix or the expected value (tests/test_checks_hints.py).
    ``detail`` is ``"{shown}"`` (the answer as the facts show it) unless given, so a table
    can write ``Mistake(test, hint=...)``; an empty ``hint`` gives none."""

    test: Callable[..., bool]
    detail: str = "{shown}"
    hint: str = ""


def diagnose(mistakes: Sequence[Mistake], fallback: str | None = None, /, **facts: Any) -> None:
    """Raise :class:`Wrong` for the first of ``mistakes`` whose test holds on ``facts``; when
    none does and ``fallback`` is given, raise :class:`Wrong` with it (formatted, no hint).
    A task's table lists its mistakes in the order a learner should meet them. Both are
    positional-only, so any name (``mistakes``, ``fallback`` too) can be a fact."""
    for mistake in mistakes:
        if mistake.test(**facts):
            raise Wrong(mistake.detail.format(**facts), mistake.hint.format(**facts))
    if fallback is not None:
        raise Wrong(fallback.format(**facts))


def reason_key(reason: str, reasons: Mapping[str, str], where: str = "") -> str:
    """``reason`` trimmed and lower-cased, which must be a key of ``reasons``."""
    key = reason.strip().lower()
    if key not in reasons:
        raise Wrong(
            f"{where}{key!r} is not one of the reasons",
            f"choose a key of REASONS: {', '.join(reasons)}",
        )
    return key


@contextlib.contextmanager
def full_float32():
    """TensorFloat-32 off within the block (its 3 digits exceed a comparison's tolerance)."""
    import tensorflow as tf

    tf32 = tf.config.experimental.tensor_float_32_execution_enabled()
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        yield
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(tf32)


def default_device() -> str:
    """Where TensorFlow puts an op or a variable when no device scope is open (short name)."""
    import tensorflow as tf

    from dtf.placement import short_device

    with tf.device(None):  # no scope, whatever scope the caller opened
        return short_device(tf.zeros(()).device)


def device_names(setup_or_names: Any) -> list[str]:
    """The device names of a ``DeviceSetup`` (``devices.setup(...)``) or of a list."""
    names = getattr(setup_or_names, "names", setup_or_names)
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise TypeError("pass the DeviceSetup from devices.setup(...) or a list of device names")
    return [str(n) for n in names]


def placement_table(value: Any):
    """A placement table from what the learner returned (a DataFrame or a PlacementLog)."""
    table = getattr(value, "table", value)
    if not hasattr(table, "columns") or not {"op_type", "device"} <= set(table.columns):
        raise Wrong(
            f"expected the placement table (a DataFrame with op_type and device columns), "
            f"got {short(value)}",
            "the placement table is the .table of the log that placement.capture() fills",
        )
    return table


def eager_rows(table, op_types: Sequence[str] | None = None):
    """The rows of ``op_types`` (every row when None): the eager ones when there are any, else
    the placer's (a ``tf.function``), so that every op run counts once."""
    if op_types is not None:
        table = table[table["op_type"].isin(list(op_types))]
    eager = table[table["source"] == "eager"] if "source" in table else table
    return eager if len(eager) else table


def devices_of(table, op_types: Sequence[str], once: bool = False) -> list[str]:
    """The devices (short names, in log order, each once) that ran ops of ``op_types``;
    ``once``: each op run counted once (:func:`eager_rows`)."""
    rows = eager_rows(table, op_types) if once else table[table["op_type"].isin(list(op_types))]
    return list(dict.fromkeys(rows["device"]))


def both_ways(names: Sequence[str]) -> list[tuple[list[str], str]]:
    """``(devices, case)`` to check a placement with: ``names``, and reversed when its first
    and last devices differ (each op then once belongs off the default device); ``case``
    starts the messages of the reversed run."""
    from dtf.placement import short_device

    runs = [(list(names), "")]
    if names[0] != names[-1]:
        shown = ", ".join(repr(short_device(d)) for d in names[::-1])
        runs.append((list(names[::-1]), f"with devices = [{shown}]: "))
    return runs


def run_child(
    args: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
    what: str,
    *,
    mark: str,
    late: str = "",
    hint: str | None = None,
) -> str:
    """Run ``python -c *args`` with ``env`` and return what it printed after its last
    ``mark``; :class:`Wrong` (``what``, the child, starts its text) when it does not finish
    in ``timeout`` s (``late`` and ``hint`` added), fails, or prints no ``mark``."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", *args],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise Wrong(f"{what} did not finish in {timeout:g} s{late}", hint) from None
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(mark)]
    if proc.returncode != 0 or not lines:
        raise Wrong(
            f"{what} failed (exit status {proc.returncode}): "
            f"{proc.stderr.strip()[-300:] or 'no error message'}"
        )
    return lines[-1][len(mark) :]


def plural(count: int, word: str) -> str:
    """``"call"`` or ``"calls"``, by ``count``."""
    return word if count == 1 else word + "s"


def counted(count: int, word: str) -> str:
    """``"1 replica"``, ``"4 replicas"``."""
    return f"{count} {plural(count, word)}"
