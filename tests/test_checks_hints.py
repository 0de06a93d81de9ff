"""No hint and no task text hands out a lab's answer (issue 26).

The lab template: a task states its goal, constraints and check, never the code; a hint names
the mistake and where to look, never the fix or the expected value. Checked here, without
TensorFlow, against each solution's answer regions (``### BEGIN SOLUTION`` ... ``### END
SOLUTION``):

- the *hints*: every message text of a lab's checker module (``dtf/checks/labNN.py``, and
  ``core.py`` for every lab), the hints of its ``Mistake`` tables included; the details that
  describe the learner's own answer left out (the first argument of ``Wrong`` and
  ``expected_got``, the test and detail of a ``Mistake``), as are docstrings, the "correct"
  notes and the data tables the lab prints;
- the *task texts*: the docstring of every answer function (the student lab keeps it), and
  each markdown cell against the answers of the tasks above it; against every answer, for
  whole lines only (the text above a task teaches the API its answer uses).

Each is compared with the answer: its statements, its code fragments (a window of tokens, the
answer's own names made anonymous, so ``v.assign_sub(learning_rate * g)`` is
``variable.assign_sub(learning_rate * grad)``), its f-strings' patterns and the literal values
its functions return (a prediction's answer).
"""

from __future__ import annotations

import ast
import builtins
import io
import keyword
import re
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from tests.helpers import ROOT
from tools.make_labs import task_number

SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("[0-9][0-9]_*_lab.ipynb"))
CHECKS = ROOT / "src" / "dtf" / "checks"
_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
#: A window of this many tokens of an answer, found in a text, is its code.
WINDOW = 7
#: Names that mean the same in a text and in code: kept, not made anonymous.
KNOWN = set(dir(builtins)) | {
    "tf", "np", "keras", "os", "json", "copy", "deploy", "checks", "towers", "placement",
    "profiling", "multiworker", "devices", "parallel", "answering", "answers", "strategy",
}  # fmt: skip
#: Calls whose first argument describes the learner's answer, not what to do.
DETAIL_CALLS = {"Wrong", "expected_got", "_expected", "TensorFlowRefusal"}


# --------------------------------------------------------------------------- answers


@dataclass
class Answer:
    """What a task's solution answers, in the forms a text could give it away."""

    statements: set[str] = field(default_factory=set)  # whole lines, spaces collapsed
    windows: set[tuple[str, ...]] = field(default_factory=set)
    patterns: list[re.Pattern] = field(default_factory=list)  # f-strings' shapes
    values: set[str] = field(default_factory=set)  # returned literals, normalised
    docstrings: list[str] = field(default_factory=list)
    cell: int = 0  # the index of its (last) answer cell

    def __ior__(self, other: Answer) -> Answer:
        self.statements |= other.statements
        self.windows |= other.windows
        self.patterns += other.patterns
        self.values |= other.values
        return self


@dataclass
class Lab:
    """A solution notebook: each task's :class:`Answer`, and its markdown cells by index."""

    tasks: dict[int, Answer]
    markdown: dict[int, str]

    def every(self, before: int | None = None) -> Answer:
        """All tasks' answers together; with ``before``, of the tasks answered above it."""
        merged = Answer()
        for answer in self.tasks.values():
            if before is None or answer.cell < before:
                merged |= answer
        return merged


def _flat(text: str) -> str:
    return " ".join(text.split())


def _literal(node: ast.AST) -> bool:
    """Written out in the answer: constants, and builtin names such as ``ValueError``."""
    return all(
        isinstance(n, ast.Constant | ast.Attribute | ast.expr_context)
        or (isinstance(n, ast.Name) and n.id in KNOWN)
        or isinstance(n, ast.Dict | ast.List | ast.Tuple | ast.JoinedStr | ast.FormattedValue)
        for n in ast.walk(node)
    )


def _value_text(node: ast.AST) -> str:
    """A returned value as a text would write it: no spaces, no quotes."""
    return re.sub(r"[\s'\"]", "", ast.unparse(node))


def _values(function: ast.FunctionDef) -> set[str]:
    """The literal values ``function`` returns, their parts and their ``key: value`` pairs."""
    found: set[str] = set()
    for ret in (n for n in ast.walk(function) if isinstance(n, ast.Return) and n.value):
        for node in ast.walk(ret.value):
            if isinstance(node, (ast.Dict, ast.List, ast.Tuple)) and _literal(node):
                found.add(_value_text(node))
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    plain = isinstance(value, ast.Constant | ast.Attribute)
                    if key is not None and not plain and _literal(value):
                        found.add(f"{_value_text(key)}:{_value_text(value)}")
    return {v for v in found if len(v) >= 2}


def _pattern(node: ast.JoinedStr) -> re.Pattern | None:
    """The shape of an f-string with two or more fields between literal text
    (``f"{job}-{i}.{name}:{port}"``), as a regular expression; None for a looser one."""
    parts = node.values
    fields = sum(isinstance(p, ast.FormattedValue) for p in parts)
    literal = "".join(p.value for p in parts if isinstance(p, ast.Constant))
    if fields < 2 or len(literal) < 2 or " " in literal:
        return None
    shape = "".join(
        r"[\w<>{}$()-]+?" if isinstance(p, ast.FormattedValue) else re.escape(p.value)
        for p in parts
    )
    return re.compile(shape + r"(?![\w])")


def lab_of(path: Path) -> Lab:
    nb = nbformat.read(path, as_version=4)
    lab = Lab({}, {})
    task = None
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            task = task_number(cell.source) or task
            lab.markdown[index] = cell.source
            continue
        regions = _REGION.findall(cell.source)
        if not regions or "solution" in cell.metadata.get("tags", []):
            continue
        answer = lab.tasks.setdefault(task, Answer())
        answer.cell = index
        tree = ast.parse(cell.source)
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            body = ast.get_source_segment(cell.source, function) or ""
            if "### BEGIN SOLUTION" not in body:
                continue
            if doc := ast.get_docstring(function):
                answer.docstrings.append(doc)
            answer.values |= _values(function)
            for node in ast.walk(function):
                if isinstance(node, ast.JoinedStr) and (pattern := _pattern(node)):
                    answer.patterns.append(pattern)
        for region in regions:
            code = textwrap.dedent(region)
            for line in code.splitlines():
                line = line.split("#")[0].strip()
                if len(line) >= 16:
                    answer.statements.add(_flat(line))
            for statement in _logical_lines(code):
                answer.windows |= _windows(statement)
    return lab


def _logical_lines(code: str) -> list[list[str]]:
    """The answer's statements as normalised tokens (:func:`_normalise`)."""
    lines, current = [], []
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
            if current:
                lines.append(_normalise(current))
            current = []
        elif tok.type in (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING):
            current.append(tok.string)
        elif tok.type == getattr(tokenize, "FSTRING_START", -1):
            current.append(tok.string)  # Python 3.12+: an f-string is several tokens
    return lines


def _normalise(tokens: list[str]) -> list[str]:
    """Names other than attributes, keywords and :data:`KNOWN` become ``_``; strings use one
    kind of quotes, an f-string's fields are empty; ``...`` is a name."""
    out = []
    for i, tok in enumerate(tokens):
        after_dot = i > 0 and tokens[i - 1] == "."
        if tok == "...":
            out.append("_")
        elif tok.isidentifier() and not after_dot and not keyword.iskeyword(tok):
            out.append(tok if tok in KNOWN else "_")
        elif tok[:1] in "'\"" or tok[:2].lower() in ("f'", 'f"'):
            out.append(re.sub(r"\{[^{}]*\}", "{}", tok.replace('"', "'")).lstrip("fF"))
        else:
            out.append(tok)
    return out


def _windows(tokens: list[str]) -> set[tuple[str, ...]]:
    """The answer's windows of :data:`WINDOW` tokens that read as code: a call, an index or
    an operation, with at least three tokens that are not an anonymous name or a comma."""
    found = set()
    for start in range(len(tokens) - WINDOW + 1):
        window = tuple(tokens[start : start + WINDOW])
        telling = [t for t in window if t not in ("_", ",")]
        if len(telling) >= 3 and any(t in window for t in ("(", "[", "*", "-", "/", "+")):
            found.add(window)
    return found


_TEXT_TOKEN = re.compile(
    r"""[fF]?'[^'\n]*'|[fF]?"[^"\n]*"|\.\.\.|\d+(?:\.\d+)?|[A-Za-z_]\w*|==|!=|<=|>=|\*\*|\S"""
)


def _text_windows(text: str) -> set[tuple[str, ...]]:
    tokens = _normalise(_TEXT_TOKEN.findall(text))
    return {tuple(tokens[i : i + WINDOW]) for i in range(len(tokens) - WINDOW + 1)}


def handed_out(text: str, answer: Answer, whole_lines_only: bool = False) -> list[str]:
    """What of ``answer`` the ``text`` gives away (empty: nothing)."""
    flat = _flat(text)
    found = [f"the statement {s!r}" for s in answer.statements if s in flat]
    if whole_lines_only:
        return found
    found += [f"the code {' '.join(w)!r}" for w in answer.windows & _text_windows(text)]
    found += [f"the f-string shape {p.pattern!r}" for p in answer.patterns if p.search(text)]
    plain = re.sub(r"[\s'\"]", "", text)
    found += [f"the value {v!r}" for v in answer.values if v in plain]
    return found


# --------------------------------------------------------------------------- hints


def _docstring_nodes(tree: ast.Module) -> set[int]:
    nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                nodes.add(id(first.value))
    return nodes


def _ids(node: ast.AST | None) -> set[int]:
    return {id(n) for n in ast.walk(node)} if node is not None else set()


def _skipped(tree: ast.Module) -> set[int]:
    """The nodes whose strings are no hint: docstrings, the details of a verdict (the first
    argument of :data:`DETAIL_CALLS`, the test and detail of a ``Mistake``), the "correct"
    notes of the checkers, and the data of module-level constants that are not hint tables
    (a ``Mistake``'s hint in them is read)."""
    skip = _docstring_nodes(tree)
    hints: set[int] = set()  # the hints of Mistake(test, detail, hint)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name in DETAIL_CALLS and node.args:
                skip |= _ids(node.args[0])
            if name == "Mistake":
                parts = dict(zip(("test", "detail", "hint"), node.args, strict=False))
                parts.update((k.arg, k.value) for k in node.keywords)
                skip |= _ids(parts.get("test")) | _ids(parts.get("detail"))
                hints |= _ids(parts.get("hint"))
        if isinstance(node, ast.FunctionDef) and any(
            "task" in ast.unparse(d) for d in node.decorator_list
        ):
            for ret in (n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value):
                skip |= {id(n) for n in ast.walk(ret.value)}
    for node in tree.body:
        targets = [
            t.id
            for t in getattr(node, "targets", [getattr(node, "target", None)])
            if isinstance(t, ast.Name)
        ]
        if targets and not any("HINT" in t for t in targets):
            skip |= _ids(node) - hints
    return skip


def hints_of(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every message text of a checker module that could be a hint; an
    f-string's fields read ``_``."""
    tree = ast.parse(source)
    skip = _skipped(tree)
    found = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.JoinedStr):
            skip |= {id(n) for n in ast.walk(node)}
            text = "".join(
                p.value if isinstance(p, ast.Constant) else "_"
                for p in node.values
                if isinstance(p, (ast.Constant, ast.FormattedValue))
            )
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if " " in text.strip():  # a message, not a key, a name or a pattern
            found.append((node.lineno, text))
    return found


LAB_HINTS = {
    path.name[:2]: hints_of((CHECKS / f"lab{path.name[:2]}.py").read_text(encoding="utf-8"))
    for path in SOLUTIONS
}
CORE_HINTS = hints_of((CHECKS / "core.py").read_text(encoding="utf-8"))
LABS = {path.name[:2]: lab_of(path) for path in SOLUTIONS}


@pytest.mark.parametrize("lab", sorted(LABS))
def test_no_hint_hands_out_the_answer(lab: str) -> None:
    answer = LABS[lab].every()
    bad = [
        f"{where} line {line}: {text!r} gives away {', '.join(given)}"
        for where, hints in ((f"lab{lab}.py", LAB_HINTS[lab]), ("core.py", CORE_HINTS))
        for line, text in hints
        if (given := handed_out(text, answer))
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("lab", sorted(LABS))
def test_no_task_text_hands_out_the_answer(lab: str) -> None:
    """Docstrings against every answer; a markdown cell against the answers above it, in
    full, and against all of them for whole lines."""
    notebook = LABS[lab]
    every = notebook.every()
    bad = [
        f"the docstring of task {task}: {given}"
        for task, answer in notebook.tasks.items()
        for doc in answer.docstrings
        if (given := handed_out(doc, every))
    ]
    for index, text in notebook.markdown.items():
        bad += [f"markdown cell {index}: {g}" for g in handed_out(text, notebook.every(index))]
        bad += [f"markdown cell {index}: {g}" for g in handed_out(text, every, True)]
    assert not bad, "\n".join(dict.fromkeys(bad))


# --------------------------------------------------------------------------- the test's teeth

DOCTORED = """
def task1(answer):
    raise Wrong("wrong", hint="{hint}")
"""


@pytest.mark.parametrize(
    "lab, hint",
    [
        ("02", "return list(zip(tf.split(x, num_towers), tf.split(y, num_towers)))"),
        ("02", "apply them: v.assign_sub(learning_rate * g) for each variable"),
        ("05", "use tf.nn.compute_average_loss(losses, global_batch_size=global_batch_size)"),
        ("06", "a folder of its own: os.path.join(base, f'{type}-{index}-tmp')"),
        ("07", "task i of job J is NAME-J-i.NAME:PORT"),
        ("01", "an empty CUDA_VISIBLE_DEVICES hides every GPU: the mapping is {}"),
        ("03", "e.g. {1: ('ValueError', 'gpu-only'), 2: None}"),
    ],
    ids=["line", "code", "call", "f-string", "shape", "empty-value", "pair"],
)
def test_a_doctored_hint_is_caught(lab: str, hint: str) -> None:
    """Each way of giving an answer away is caught, in a hint planted in a checker."""
    hints = hints_of(DOCTORED.format(hint=hint.replace('"', '\\"')))
    assert [text for _, text in hints] == [hint]
    assert handed_out(hint, LABS[lab].every())


def test_what_is_no_hint_is_left_out() -> None:
    source = '''
"""Module docstring: return list(zip(tf.split(x, num_towers), tf.split(y, num_towers)))."""
TABLE = {"a": "return list(zip(tf.split(x, num_towers), tf.split(y, num_towers)))"}
_HINTS = {"a": "a hint table is read"}
def f(got):
    raise Wrong(f"your {got} ran", "the hint is read")
'''
    assert [text for _, text in hints_of(source)] == ["a hint table is read", "the hint is read"]


def test_the_hints_of_a_mistake_table_are_read() -> None:
    """A task's known mistakes (``Mistake(test, detail, hint)`` in a module-level table): the
    hints are read, the tests and the details (the learner's own answer) are not."""
    source = """
TASK1_MISTAKES = (
    Mistake(lambda got, **_: got == "x y", "your {got} is not it", "the hint of a table"),
    Mistake(test=lambda **_: True, detail="a detail", hint=f"a keyword hint {1}"),
)
"""
    assert sorted(text for _, text in hints_of(source)) == [
        "a keyword hint _",
        "the hint of a table",
    ]
    doctored = source.replace("the hint of a table", "apply them: v.assign_sub(learning_rate * g)")
    assert any(handed_out(text, LABS["02"].every()) for _, text in hints_of(doctored))
