"""Generate the student labs (``labs/NN_x_lab.ipynb``) from their solutions (``labs/solutions/``).

Usage::

    python -m tools.make_labs [SOLUTION ...]          # write labs/<same name>
    python -m tools.make_labs --check [SOLUTION ...]  # exit 1 and name the stale labs

The solution notebook is the source of truth; the student lab is derived from it and never
edited by hand. What the generator does to each solution:

- Every answer region, the lines from ``### BEGIN SOLUTION`` to ``### END SOLUTION``
  (markers included), becomes one line at the marker's indentation::

      raise NotImplementedError("Task N: write your code here")

  ``N`` is the task of the nearest markdown cell above the region that introduces one: a
  cell introduces the task named by the first line that starts with ``**Task N**`` (spaces
  before it allowed) or is a heading ``## Task N`` (any level). ``**Task N**`` elsewhere in a line
  ("reuse your answer from **Task 1**") is a mention and changes nothing, so a cell that
  only mentions tasks keeps the current task.
- Cells tagged ``solution`` are dropped (e.g. a note for course authors, or a cell that
  asserts every check passed, so that the headless run of a solution fails on a wrong
  answer), and so is a papermill ``injected-parameters`` cell. Other tags (``parameters``)
  stay.
- Outputs, execution counts and cell metadata other than tags are removed; notebook
  metadata keeps only the kernel spec and the language name.
- Relative links in markdown cells are rebased from ``labs/solutions/`` to ``labs/``, so
  ``[03](../../notebooks/03_x.ipynb)`` in a solution reads ``[03](../notebooks/03_x.ipynb)``
  in the student lab and both work on GitHub and in JupyterLab; a link to another lab
  (``02_x_lab.ipynb``) leads each version to its own kind.

**Why answer regions must sit inside a function.** A student lab must run from top to
bottom ("Run All" in JupyterLab, papermill and nbclient headless) with every check saying
"not attempted". A ``raise`` at the top level of a cell would stop JupyterLab's "Run All" at
the first task (a ``raises-exception`` tag only helps the headless runners). So each task is
a function the learner completes; its body is the stub, the check cell hands the *function*
to a checker in :mod:`dtf.checks`, and the checker calls it and turns ``NotImplementedError``
into the verdict "not attempted". The generator enforces this: a region whose stub would
not be inside a ``def`` is an error, as are unbalanced markers and a region before any
``**Task N**`` cell.

Output is deterministic: the same solution always gives a byte-identical lab (cell ids are
kept from the solution; JSON is written by ``nbformat`` with sorted keys). ``--check``
compares the notebook content (parsed JSON) of each lab with what would be generated, so
it also flags a lab that was opened and saved with outputs, and a lab whose solution is gone.

Exit status: 0 up to date / written, 1 stale labs (``--check``), 2 usage or solution error.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import posixpath
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nbformat

# Run as a file (`python tools/make_labs.py`), not as `python -m tools.make_labs`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import hosted
from tools.nbtools import REPO_ROOT

SOLUTIONS_DIR = REPO_ROOT / "labs" / "solutions"
LABS_DIR = REPO_ROOT / "labs"
LAB_GLOB = "[0-9][0-9]_*_lab.ipynb"
_LAB_NAME = re.compile(r"\d\d_.+_lab\.ipynb")

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
_BEGIN_LINE = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*$")
_END_LINE = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
#: A line that introduces a task: ``**Task N**`` at its start, or a heading ``## Task N``.
_TASK_LINE = re.compile(
    r"^[ \t]*(?:\*\*Task[ \t]+(?P<bold>\d+)\b|#{1,6}[ \t]+Task[ \t]+(?P<heading>\d+)\b)",
    re.MULTILINE,
)
#: Cells with this tag exist only in the solution.
SOLUTION_TAG = "solution"
#: Cells dropped from the student lab: solution-only cells, and the cell papermill adds when
#: a solution executed by it is saved over the original by mistake.
DROP_TAGS = frozenset({SOLUTION_TAG, "injected-parameters"})
STUB = 'raise NotImplementedError("Task {task}: write your code here")'
_LINK = re.compile(r"(?P<head>!?\[[^\]]*\]\()(?P<target>[^)\s]+)(?P<tail>(?:\s+\"[^\"]*\")?\))")


class LabError(Exception):
    """A solution notebook the generator cannot turn into a student lab."""


# --------------------------------------------------------------------------- regions


def task_number(markdown: str) -> int | None:
    """The task a markdown cell introduces (see the module docstring), or None.

    >>> task_number("**Task 2.** Write it; reuse your answer from **Task 1**.")
    2
    >>> task_number("Reuse your answer from **Task 1**.") is None
    True
    """
    match = _TASK_LINE.search(markdown)
    if match is None:
        return None
    return int(match["bold"] or match["heading"])


def stub_regions(source: str, task: int | None, where: str = "cell") -> tuple[str, int]:
    """Replace each answer region of a code cell's ``source`` by a stub; return (new, count).

    Raises :class:`LabError` for unbalanced markers, a region with no task number, or a stub
    that would not be inside a function (it would stop "Run All" at module level).
    """
    out: list[str] = []
    count = 0
    inside = False
    begin_line = 0
    for number, line in enumerate(source.split("\n"), start=1):
        begin = _BEGIN_LINE.match(line)
        if begin:
            if inside:
                raise LabError(f"{where}, line {number}: {BEGIN} inside another region")
            if task is None:
                raise LabError(
                    f"{where}, line {number}: answer region before any '**Task N**' "
                    "markdown cell (the stub needs the task number)"
                )
            inside, begin_line = True, number
            out.append(begin["indent"] + STUB.format(task=task))
            count += 1
        elif _END_LINE.match(line):
            if not inside:
                raise LabError(f"{where}, line {number}: {END} without {BEGIN}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise LabError(f"{where}, line {begin_line}: {BEGIN} is never closed by {END}")
    new = "\n".join(out)
    if count:
        _check_stubs_in_functions(new, count, where)
    return new, count


def _check_stubs_in_functions(source: str, count: int, where: str) -> None:
    """Every stub must compile and sit in a function body (never run at cell level)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise LabError(f"{where}: the student version does not compile: {exc}") from exc
    inside_functions = 0
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for stmt in node.body:  # direct body only: nested blocks may never run
                if _is_stub(stmt):
                    inside_functions += 1
    if inside_functions != count:
        raise LabError(
            f"{where}: every {BEGIN} region must be the body (or the end of the body) of a "
            "function, directly inside its 'def': a stub anywhere else would raise when the "
            "cell runs and stop 'Run All' in the student lab"
        )


def _is_stub(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Raise) or not isinstance(stmt.exc, ast.Call):
        return False
    func, args = stmt.exc.func, stmt.exc.args
    return (
        isinstance(func, ast.Name)
        and func.id == "NotImplementedError"
        and len(args) == 1
        and isinstance(args[0], ast.Constant)
        and str(args[0].value).endswith(": write your code here")
    )


# --------------------------------------------------------------------------- links


def rebase_links(markdown: str, src_dir: str, dst_dir: str) -> str:
    """Rewrite relative link targets written for ``src_dir`` so they work from ``dst_dir``.

    Both directories are POSIX paths relative to the repository root. A link to another
    lab in ``src_dir`` points to that lab's student version in ``dst_dir``. Absolute URLs,
    anchors (``#x``) and absolute paths are left alone.
    """

    def fix(match: re.Match) -> str:
        target = match["target"]
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith(("#", "/")):
            return match[0]
        path, sep, anchor = target.partition("#")
        if not path:
            return match[0]
        resolved = posixpath.normpath(posixpath.join(src_dir, path))
        folder, name = posixpath.split(resolved)
        if folder == posixpath.normpath(src_dir) and _LAB_NAME.fullmatch(name):
            resolved = posixpath.join(dst_dir, name)  # another lab: its student version
        new = posixpath.relpath(resolved, dst_dir)
        return f"{match['head']}{new}{sep}{anchor}{match['tail']}"

    return _LINK.sub(fix, markdown)


# --------------------------------------------------------------------------- notebooks


def make_student(
    nb: Any, name: str = "notebook", src_dir: str = "labs/solutions", dst_dir: str = "labs"
) -> Any:
    """The student version of the solution notebook ``nb`` (a new notebook; ``nb`` is kept)."""
    student = nbformat.v4.new_notebook()
    student.nbformat, student.nbformat_minor = 4, max(5, int(nb.get("nbformat_minor", 5)))
    metadata: dict[str, Any] = {}
    if "kernelspec" in nb.metadata:
        metadata["kernelspec"] = dict(nb.metadata["kernelspec"])
    language = nb.metadata.get("language_info", {}).get("name")
    if language:
        metadata["language_info"] = {"name": language}
    student.metadata = nbformat.from_dict(metadata)

    task: int | None = None
    regions = 0
    cells = []
    for index, cell in enumerate(nb.cells):
        tags = list(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "markdown":
            introduced = task_number(cell.source)
            if introduced is not None:
                task = introduced
        if DROP_TAGS.intersection(tags):
            continue
        where = f"{name}, cell {index}"
        cell_id = cell.get("id") or f"cell-{index}"
        if cell.cell_type == "code" and hosted.TAG in tags:  # it opens the student's folder
            source, count = hosted.setup_source(f"{dst_dir}/{Path(name).name}"), 0
            new = nbformat.v4.new_code_cell(source)
        elif cell.cell_type == "code":
            source, count = stub_regions(cell.source, task, where)
            regions += count
            new = nbformat.v4.new_code_cell(source)
        elif cell.cell_type == "markdown":
            if BEGIN in cell.source:
                raise LabError(f"{where}: answer regions belong in code cells")
            new = nbformat.v4.new_markdown_cell(rebase_links(cell.source, src_dir, dst_dir))
        else:
            new = nbformat.v4.new_raw_cell(cell.source)
        new.id = cell_id
        if tags:
            new.metadata["tags"] = tags
        cells.append(new)
    if not regions:
        raise LabError(f"{name}: no {BEGIN} regions: a lab needs at least one task to fill in")
    student.cells = cells
    nbformat.validate(student)
    return student


def render(nb: Any) -> str:
    """The file content for ``nb``: nbformat's JSON (sorted keys, indent 1) and a newline."""
    text = nbformat.writes(nb)
    return text if text.endswith("\n") else text + "\n"


def generate(solution: Path) -> str:
    """The student lab's file content for the solution notebook at ``solution``."""
    nb = nbformat.read(solution, as_version=4)
    src_dir = _rel_dir(solution.parent)
    return render(
        make_student(
            nb,
            name=_display(solution),
            src_dir=src_dir,
            dst_dir=_rel_dir(_lab_path(solution).parent),
        )
    )


def _lab_path(solution: Path) -> Path:
    return solution.resolve().parent.parent / solution.name


def _rel_dir(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.resolve().as_posix()


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return path.name


def _normalised(text: str) -> Any:
    """Notebook JSON as data (formatting differences do not count as changes)."""
    return json.loads(text)


def stale_labs(solutions: Sequence[Path] | None = None) -> list[str]:
    """Names of labs that differ from what their solutions generate, are missing, or have no
    solution (only when checking the default set). Raises :class:`LabError` for a bad
    solution."""
    default = solutions is None
    solutions = list(solutions) if solutions is not None else discover()
    problems = []
    for solution in solutions:
        lab = _lab_path(solution)
        expected = generate(solution)
        if not lab.exists():
            problems.append(f"{_display(lab)} (missing)")
        elif _normalised(lab.read_text(encoding="utf-8")) != _normalised(expected):
            problems.append(f"{_display(lab)} (differs from {_display(solution)})")
    if default:
        names = {s.name for s in solutions}
        for lab in sorted(LABS_DIR.glob(LAB_GLOB)):
            if lab.name not in names:
                problems.append(f"{_display(lab)} (no solution in labs/solutions/)")
    return problems


def write_labs(solutions: Sequence[Path] | None = None) -> list[str]:
    """Generate every lab; returns the names of the files that changed."""
    changed = []
    for solution in list(solutions) if solutions is not None else discover():
        lab = _lab_path(solution)
        text = generate(solution)
        if not lab.exists() or lab.read_text(encoding="utf-8") != text:
            tmp = lab.with_name(f".{lab.name}.tmp")
            with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            os.replace(tmp, lab)
            changed.append(_display(lab))
    return changed


def discover() -> list[Path]:
    return sorted(SOLUTIONS_DIR.glob(LAB_GLOB))


def _solutions_from_args(paths: Sequence[str]) -> list[Path]:
    out = []
    for raw in paths:
        path = Path(raw)
        if not path.is_file() or path.suffix != ".ipynb":
            raise LabError(f"not a notebook: {raw}")
        if path.resolve().parent.name != "solutions":
            raise LabError(f"{raw}: solutions live in a folder named 'solutions'")
        out.append(path)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.make_labs", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("solutions", nargs="*", help="solution notebooks (default: all)")
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if a lab is stale"
    )
    args = parser.parse_args(argv)
    try:
        solutions = _solutions_from_args(args.solutions) if args.solutions else None
        if args.check:
            stale = stale_labs(solutions)
            for problem in stale:
                print(f"stale: {problem} (run: python -m tools.make_labs)")
            if not stale:
                print("labs are up to date")
            return 1 if stale else 0
        changed = write_labs(solutions)
    except LabError as exc:
        print(f"make_labs.py: error: {exc}", file=sys.stderr)
        return 2
    for name in changed:
        print(f"wrote {name}")
    if not changed:
        print("labs are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
