"""Run a lab notebook headless and check what it printed; used by tests/test_notebook_runs.py.

That module runs every lab's solution and its student version, each as its own test in its
own xdist group, so that ``pytest -n N --dist loadgroup`` spreads the labs over the workers.

- :func:`check_solution`: the solution runs without error and every check prints "correct";
- :func:`check_student_lab`: the student lab runs to the end and every check prints "not
  attempted", with no traceback in any output;
- neither shows a stderr box in any cell.

Both also run every check cell a second time at the end, in the same kernel, and require
the same output: re-running a check cell must give the same verdict. "At the end" means
before the first cell tagged ``teardown``, if there is one: a cell that releases what the
checks need (lab 04 stops its cluster there), which therefore runs after the re-runs.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat

from tests.forked_kernel import ForkedKernelManager, forkable, stacks_on_nbclient_timeout
from tests.helpers import ROOT
from tools import nbrun

stacks_on_nbclient_timeout()  # a cell that times out shows what its kernel was doing

SOLUTIONS_DIR = ROOT / "labs" / "solutions"
LABS_DIR = ROOT / "labs"
TASK = re.compile(r"\*\*Task (\d+)\b")
#: A check cell: it hands an answer to a checker, ``checks.lab01.task1(...)``.
CHECK_CELL = re.compile(r"\bchecks\.lab\d\d\.task\d+\(")
CELL_TIMEOUT_S = 120
#: Tag of the cells :func:`execute` appends to run each check cell again.
RERUN_TAG = "test-rerun"
#: Tag of the cells that release what the checks need: the re-runs go before the first.
TEARDOWN_TAG = "teardown"


def tasks_of(nb) -> list[int]:
    found: list[int] = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += [int(n) for n in TASK.findall(cell.source) if int(n) not in found]
    return found


def _is_rerun(cell) -> bool:
    return RERUN_TAG in cell.metadata.get("tags", [])


def execute(path: Path, parameters: dict | None = None):
    """Run ``path`` top to bottom in a new kernel (its folder as working directory; forked,
    tests/forked_kernel.py), as JupyterLab's Run All would, then run each check cell once
    more in the same kernel (before the first cell tagged ``teardown``, if any).
    ``parameters`` override the notebook's parameters cell, as ``papermill -p`` would. The
    course's runner does it (:func:`tools.nbrun.execute`: no metrics file, leftover
    processes stopped).

    Returns ``(nb, reruns)``: the executed notebook as it was, and a list of
    ``(check cell, its second run)`` pairs."""
    nb = nbformat.read(path, as_version=4)
    checks = [c for c in nb.cells if c.cell_type == "code" and CHECK_CELL.search(c.source)]
    teardown = [i for i, c in enumerate(nb.cells) if TEARDOWN_TAG in c.metadata.get("tags", [])]
    where = teardown[0] if teardown else len(nb.cells)
    for offset, cell in enumerate(checks):
        again = nbformat.v4.new_code_cell(cell.source)
        again.metadata["tags"] = [RERUN_TAG]
        nb.cells.insert(where + offset, again)
    manager = ForkedKernelManager if forkable(nb) else None
    nb = nbrun.execute(
        path, nb=nb, parameters=parameters, timeout=CELL_TIMEOUT_S, kernel_manager_class=manager
    ).nb
    reruns = list(zip(checks, [c for c in nb.cells if _is_rerun(c)], strict=True))
    lab = copy.deepcopy(nb)
    lab.cells = [c for c in lab.cells if not _is_rerun(c)]
    return lab, reruns


def output_text(nb) -> str:
    return "\n".join(cell_text(cell) for cell in nb.cells)


def cell_text(cell) -> str:
    """A cell's printed text. Stream outputs are joined as they came: the kernel may split one
    ``print`` into several stream messages (under load it does), which must read the same."""
    parts: list[str] = []
    streamed = False
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            if streamed:
                parts[-1] += out.text
            else:
                parts.append(out.text)
            streamed = True
            continue
        streamed = False
        if out.output_type == "error":
            parts.append("\n".join(out.traceback))
        else:
            parts.append(str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def verdict_lines(text: str) -> dict[int, list[str]]:
    lines: dict[int, list[str]] = {}
    for line in text.splitlines():
        m = re.match(r"^Task (\d+): (correct|wrong|not attempted)", line)
        if m:
            lines.setdefault(int(m[1]), []).append(m[2])
    return lines


def _assert_no_stderr(nb) -> None:
    """No cell shows a stderr box (a warning, a log line), as JupyterLab's Run All would show
    it: Lab 04's cluster cell showed an ``ExposureWarning`` before its Setup silenced it."""
    boxes = [
        f"cell {i}: {out.text[:300]}"
        for i, cell in enumerate(nb.cells)
        for out in cell.get("outputs", [])
        if out.output_type == "stream" and out.name == "stderr"
    ]
    assert not boxes, "stderr output:\n" + "\n".join(boxes)


def _assert_reruns_agree(reruns, tasks) -> None:
    assert len(reruns) == len(tasks), [c.source for c, _ in reruns]
    for first, again in reruns:
        assert cell_text(first).strip(), first.source
        assert cell_text(again) == cell_text(first), (
            f"re-running {first.source!r} changed its output:\n"
            f"first: {cell_text(first)}\nagain: {cell_text(again)}"
        )


def check_solution(name: str, parameters: dict | None = None) -> None:
    """The solution ``labs/solutions/<name>`` runs (with ``parameters``, if given), and every
    check prints "correct"."""
    path = SOLUTIONS_DIR / name
    nb, reruns = execute(path, parameters)
    text = output_text(nb)
    tasks = tasks_of(nb)
    verdicts = verdict_lines(text)
    assert set(verdicts) == set(tasks), text
    for task in tasks:
        assert verdicts[task] == ["correct"], text
    assert "Traceback" not in text, text
    assert not any(o.output_type == "error" for c in nb.cells for o in c.get("outputs", []))
    assert f"lab{path.name[:2]}: {len(tasks)} of {len(tasks)} tasks correct" in text
    _assert_no_stderr(nb)
    _assert_reruns_agree(reruns, tasks)


def check_student_lab(name: str) -> None:
    """The student lab ``labs/<name>`` runs to the end, every check "not attempted"."""
    path = LABS_DIR / name
    nb, reruns = execute(path)
    text = output_text(nb)
    tasks = tasks_of(nb)
    verdicts = verdict_lines(text)
    assert set(verdicts) == set(tasks), text
    for task in tasks:
        assert verdicts[task] == ["not attempted"], text
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code_cells)  # ran to the last cell
    assert not any(o.output_type == "error" for c in code_cells for o in c.outputs)
    assert "Traceback" not in text and "NotImplementedError:" not in text, text
    assert f"lab{path.name[:2]}: 0 of {len(tasks)} tasks correct" in text
    _assert_no_stderr(nb)
    _assert_reruns_agree(reruns, tasks)
