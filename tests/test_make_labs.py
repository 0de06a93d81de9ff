"""More tests of the lab generator (tools/make_labs.py): which task a stub belongs to.

(The generator's other tests, and the tests of the committed labs, are in tests/test_labs.py.)

A stub's task number must be the task its markdown cell *introduces*: the first line that
starts with ``**Task N**`` (or a ``## Task N`` heading). A cell that mentions another task
("reuse your answer from **Task 1**") must not move the stub to that task, or the untouched
task is graded "wrong" instead of "not attempted".
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tools import make_labs

STUB = re.compile(r'raise NotImplementedError\("Task (\d+): write your code here"\)')


def answer_cell(function: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(
        f"def {function}():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"
    )


def solution(tmp_path: Path, *cells: nbformat.NotebookNode) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = list(cells)
    path = tmp_path / "labs" / "solutions" / "99_demo_lab.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def stub_tasks(path: Path) -> list[int]:
    """The task number of every stub in the generated lab, in order."""
    student = nbformat.reads(make_labs.generate(path), as_version=4)
    return [int(n) for cell in student.cells for n in STUB.findall(cell.source)]


def md(source: str) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell(source)


def test_a_reference_to_an_earlier_task_does_not_renumber_the_stub(tmp_path: Path) -> None:
    path = solution(
        tmp_path,
        md("**Task 1.** Write `first`."),
        answer_cell("first"),
        md("**Task 2.** Write `second`; reuse your answer from **Task 1**."),
        answer_cell("second"),
    )
    assert stub_tasks(path) == [1, 2]


def test_headings_and_intro_text(tmp_path: Path) -> None:
    path = solution(
        tmp_path,
        md("## Task 1 · Masks\n\nSome text.\n\n**Task 1.** Write `first`."),
        answer_cell("first"),
        # The task is introduced on a later line; a line-start reference comes after it.
        md("Now the second part.\n\n**Task 2 (optional).** Like **Task 1**, but\n**Task 1** again"),
        answer_cell("second"),
        md("## Task 3 · Towers\n\nThe same as in **Task 2**."),
        answer_cell("third"),
        # A cell that only mentions a task introduces none: the current task stays 3.
        md("A note: compare with **Task 1** before you go on."),
        answer_cell("third_more"),
    )
    assert stub_tasks(path) == [1, 2, 3, 3]


@pytest.mark.parametrize(
    ("source", "task"),
    [
        ("**Task 2.** Do it; reuse **Task 1**.", 2),
        ("**Task 12**", 12),
        ("**Task 0** warm-up", 0),
        ("  **Task 4 (optional).** Soft placement", 4),
        ("## Task 3 · Towers\n\n**Task 3.** Write it, unlike **Task 1**.", 3),
        ("# Lab 01 · Masks\n\nIntro.\n\n**Task 5:** go", 5),
        ("Reuse your answer from **Task 1**.", None),
        ("See the **Task 1** cell.\n- **Task 2** in a list is a mention", None),
        ("**Tasks 1 and 2** are related", None),
        ("## Tasks", None),
        ("", None),
    ],
)
def test_task_number(source: str, task: int | None) -> None:
    assert make_labs.task_number(source) == task


def test_the_rule_is_documented() -> None:
    doc = " ".join((make_labs.__doc__ or "").split())
    assert "the first line that starts with ``**Task N**``" in doc
    assert "the last" not in doc
