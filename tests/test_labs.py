"""Tests of the lab system: the generator (tools/make_labs.py) and the committed labs.

- The generator on small synthetic notebooks: regions replaced at their indentation, the
  result compiles, solution-only cells and outputs gone, links rebased, output idempotent,
  bad solutions refused.
- The committed student labs are what their solutions generate (``make_labs.py --check``),
  follow the lab template and call the checkers that ``dtf.checks`` registers for them.

Executing the labs (every solution check "correct", every student check "not attempted")
is in ``tests/test_notebook_runs.py``: one test per lab and version, each in its own xdist
group, so that ``--dist loadgroup`` (``make check``) runs the labs on different workers.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest

from dtf import checks
from tests.helpers import ROOT
from tests.labrun import CHECK_CELL, tasks_of
from tools import make_labs

SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("[0-9][0-9]_*_lab.ipynb"))
STUDENT_LABS = [ROOT / "labs" / p.name for p in SOLUTIONS]


# --------------------------------------------------------------------------- helpers


def code(source: str, tags: list[str] | None = None, outputs: bool = False):
    cell = nbformat.v4.new_code_cell(source)
    if tags:
        cell.metadata["tags"] = tags
    if outputs:
        cell.execution_count = 3
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="old output\n")]
        cell.metadata["execution"] = {"iopub.status.busy": "2024-01-01T00:00:00Z"}
        cell.metadata["scrolled"] = True
    return cell


def markdown(source: str, tags: list[str] | None = None):
    cell = nbformat.v4.new_markdown_cell(source)
    if tags:
        cell.metadata["tags"] = tags
    return cell


TASK_1_CELL = '''\
def predict():
    """Docstring stays."""
    ### BEGIN SOLUTION
    secret = 41
    return secret + 1
    ### END SOLUTION
'''

TASK_2_CELL = """\
import math


class Helper:
    def method(self, x):
        ### BEGIN SOLUTION
        return math.sqrt(x)  # hidden
        ### END SOLUTION


def outer(values):
    def inner(v):
        ### BEGIN SOLUTION
        return v * 2
        ### END SOLUTION

    return [inner(v) for v in values]


def answer_then_more():
	### BEGIN SOLUTION
	total = 1
	### END SOLUTION
	return total
"""


def synthetic_solution(tmp_path: Path, *cells, name: str = "99_demo_lab.ipynb") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.9"}
    nb.metadata["papermill"] = {"duration": 1.0}
    nb.cells = list(cells)
    path = tmp_path / "labs" / "solutions" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def demo_solution(tmp_path: Path) -> Path:
    return synthetic_solution(
        tmp_path,
        markdown("Solution only: authors' note", tags=["solution"]),
        markdown(
            "# Lab 99 · Demo\n\nPractises [03](../../notebooks/03_x.ipynb), "
            "[a figure](../../images/f.png#top), [the web](https://example.org/a.ipynb), "
            "[here](#task-1) and [a sibling](98_other_lab.ipynb)."
        ),
        code("NUM_DEVICES = 2", tags=["parameters"]),
        markdown("**Task 1.** Return 42."),
        code(TASK_1_CELL, outputs=True),
        code("verdict = check(predict)", outputs=True),
        markdown("**Task 2 (optional).** More."),
        code(TASK_2_CELL, tags=["keep-me"]),
        code("assert_all_correct()", tags=["solution"]),
        code("NUM_DEVICES = 8", tags=["injected-parameters"]),
        markdown("## Summary"),
    )


def student_of(path: Path):
    return nbformat.reads(make_labs.generate(path), as_version=4)


# --------------------------------------------------------------------------- generator


def test_regions_become_stubs_at_their_indentation(tmp_path: Path) -> None:
    student = student_of(demo_solution(tmp_path))
    sources = [c.source for c in student.cells]
    assert sources[3] == (
        "def predict():\n"
        '    """Docstring stays."""\n'
        '    raise NotImplementedError("Task 1: write your code here")\n'
    )
    task2 = sources[6]
    assert '        raise NotImplementedError("Task 2: write your code here")' in task2
    assert task2.count("NotImplementedError") == 3
    assert '\traise NotImplementedError("Task 2: write your code here")\n\treturn total' in task2
    assert "    return [inner(v) for v in values]" in task2  # code after a region stays
    everything = "\n".join(sources)
    for hidden in ("secret", "math.sqrt", "v * 2", "BEGIN SOLUTION", "END SOLUTION"):
        assert hidden not in everything
    for cell in student.cells:
        if cell.cell_type == "code":
            compile(cell.source, "<cell>", "exec")


def test_stubs_raise_only_when_the_function_is_called(tmp_path: Path) -> None:
    student = student_of(demo_solution(tmp_path))
    namespace: dict = {}
    exec(student.cells[3].source, namespace)  # defining the function does not raise
    with pytest.raises(NotImplementedError, match="Task 1: write your code here"):
        namespace["predict"]()


def test_solution_cells_outputs_and_metadata_are_stripped(tmp_path: Path) -> None:
    solution = demo_solution(tmp_path)
    student = student_of(solution)
    assert len(student.cells) == len(nbformat.read(solution, as_version=4).cells) - 3
    assert "NUM_DEVICES = 8" not in "".join(c.source for c in student.cells)
    assert all(
        "Solution only" not in c.source and "assert_all_correct" not in c.source
        for c in student.cells
    )
    assert student.cells[1].metadata == {"tags": ["parameters"]}
    assert student.cells[6].metadata == {"tags": ["keep-me"]}
    for cell in student.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
        assert set(cell.metadata) <= {"tags"}
    assert dict(student.metadata) == {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    }
    nbformat.validate(student)


def test_relative_links_are_rebased_to_labs(tmp_path: Path) -> None:
    title = student_of(demo_solution(tmp_path)).cells[0].source
    assert "[03](../notebooks/03_x.ipynb)" in title
    assert "[a figure](../images/f.png#top)" in title
    assert "[the web](https://example.org/a.ipynb)" in title
    assert "[here](#task-1)" in title
    assert "[a sibling](98_other_lab.ipynb)" in title  # labs sit side by side in both folders
    assert make_labs.rebase_links('![x](../../a.png "t")', "labs/solutions", "labs") == (
        '![x](../a.png "t")'
    )


def test_generation_is_deterministic_and_idempotent(tmp_path: Path) -> None:
    solution = demo_solution(tmp_path)
    first = make_labs.generate(solution)
    assert make_labs.generate(solution) == first
    assert make_labs.write_labs([solution]) == [
        make_labs._display(tmp_path / "labs" / solution.name)
    ]
    lab = tmp_path / "labs" / solution.name
    assert lab.read_text(encoding="utf-8") == first
    assert first.endswith("}\n")
    assert make_labs.write_labs([solution]) == []  # nothing changed the second time
    assert make_labs.stale_labs([solution]) == []
    # Generating from the student lab changes nothing more: no regions are left to replace,
    # which the generator reports instead of writing a lab without tasks.
    again = synthetic_solution(tmp_path / "again", *nbformat.read(lab, as_version=4).cells)
    with pytest.raises(make_labs.LabError, match="no ### BEGIN SOLUTION regions"):
        make_labs.generate(again)


def test_check_names_stale_and_missing_labs(tmp_path: Path, capsys) -> None:
    solution = demo_solution(tmp_path)
    lab = tmp_path / "labs" / solution.name
    assert make_labs.main(["--check", str(solution)]) == 1
    assert f"stale: {make_labs._display(lab)} (missing)" in capsys.readouterr().out
    assert make_labs.main([str(solution)]) == 0
    assert make_labs.main(["--check", str(solution)]) == 0
    # Formatting alone is not a change...
    data = json.loads(lab.read_text(encoding="utf-8"))
    lab.write_text(json.dumps(data, indent=4), encoding="utf-8")
    assert make_labs.main(["--check", str(solution)]) == 0
    # ...but a lab saved with outputs, or an edited solution, is.
    nb = nbformat.read(lab, as_version=4)
    nb.cells[4].outputs = [nbformat.v4.new_output("stream", name="stdout", text="Task 1: correct")]
    nbformat.write(nb, lab)
    capsys.readouterr()
    assert make_labs.main(["--check", str(solution)]) == 1
    assert "differs from" in capsys.readouterr().out
    make_labs.main([str(solution)])
    nb = nbformat.read(solution, as_version=4)
    nb.cells[3].source = "**Task 1.** Return 43."
    nbformat.write(nb, solution)
    assert make_labs.stale_labs([solution]) == [
        f"{make_labs._display(lab)} (differs from {make_labs._display(solution)})"
    ]


@pytest.mark.parametrize(
    "source, message",
    [
        ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION\n", "inside its 'def'"),
        (
            "def f():\n    if True:\n        ### BEGIN SOLUTION\n        pass\n"
            "        ### END SOLUTION\n",
            "inside its 'def'",
        ),
        ("def f():\n    ### BEGIN SOLUTION\n    return 1\n", "never closed"),
        ("def f():\n    return 1\n    ### END SOLUTION\n", "without ### BEGIN SOLUTION"),
        ("def f():\n    ### BEGIN SOLUTION\n    ### BEGIN SOLUTION\n", "inside another region"),
        (
            "def f():\n    ### BEGIN SOLUTION\n    x = (\n    ### END SOLUTION\n    )\n",
            "does not compile",
        ),
    ],
)
def test_bad_regions_are_refused(tmp_path: Path, source: str, message: str) -> None:
    solution = synthetic_solution(tmp_path, markdown("**Task 1.** x"), code(source))
    with pytest.raises(make_labs.LabError, match=re.escape(message)) as info:
        make_labs.generate(solution)
    assert "99_demo_lab.ipynb, cell 1" in str(info.value)
    assert make_labs.main([str(solution)]) == 2


def test_a_region_needs_a_task_number(tmp_path: Path) -> None:
    solution = synthetic_solution(
        tmp_path, code("def f():\n    ### BEGIN SOLUTION\n    pass\n    ### END SOLUTION\n")
    )
    with pytest.raises(make_labs.LabError, match=r"before any '\*\*Task N\*\*'"):
        make_labs.generate(solution)


# --------------------------------------------------------------------------- committed labs


def test_there_are_labs() -> None:
    assert [p.name for p in SOLUTIONS][:2] == [
        "01_masking_placement_lab.ipynb",
        "02_towers_lab.ipynb",
    ]


def test_generated_labs_are_up_to_date() -> None:
    stale = make_labs.stale_labs()
    assert stale == [], "run: python -m tools.make_labs\n" + "\n".join(stale)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_lab_structure(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    num = path.name[:2]
    lab = f"lab{num}"
    student = [c for c in nb.cells if "solution" not in c.metadata.get("tags", [])]
    assert re.match(rf"# Lab {num} · \S", student[0].source), student[0].source
    assert "../../notebooks/" in student[0].source  # links the tutorial(s) it practises
    assert any(c.metadata.get("tags") == ["parameters"] for c in student)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
    tasks = tasks_of(nb)
    assert tasks == list(range(1, len(tasks) + 1)) and tasks
    for task in tasks:
        # The check cell that calls the task's checker follows the cell with the region.
        index = next(
            i
            for i, c in enumerate(student)
            if c.cell_type == "code" and f"checks.{lab}.task{task}(" in c.source
        )
        answer = student[index - 1]
        assert "### BEGIN SOLUTION" in answer.source
        assert f"Task {task}" in "".join(c.source for c in student[: index - 1][-3:])
    assert student[-1].cell_type == "markdown" and "## Summary" in student[-1].source
    # dtf.checks knows the same tasks, optional where the notebook says so.
    registered = checks.tasks(lab)
    assert list(registered) == tasks
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for task, info in registered.items():
        assert info.optional == bool(re.search(rf"\*\*Task {task} \(optional\)", markdown))
    assert len([c for c in student if CHECK_CELL.search(c.source)]) == len(tasks)
    assert f'checks.summary("{lab}")' in "".join(c.source for c in student)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_sources_are_cited_by_name(path: Path) -> None:
    """The source notes are cited by their names in README.md's Sources section."""
    text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
    assert not re.search(r"(?i)\bseeds? \d{3}", text), "cite the notes by name (README Sources)"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sources = readme[readme.index("## Sources") :]
    for found in re.findall(r"\*([A-Z][^*]*(?:notes|TensorFlow))\*", text):
        name = " ".join(found.split())  # a name may wrap across lines
        assert f"*{name}*" in sources, f"{path.name} cites *{name}*, not in README's Sources"


@pytest.mark.parametrize(
    "path", SOLUTIONS + STUDENT_LABS, ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_relative_links_resolve(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for target in re.findall(r"\]\(([^)\s]+)\)", cell.source):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            assert (path.parent / target.split("#")[0]).exists(), f"{path.name}: {target}"


def test_student_answer_cells_are_valid_python() -> None:
    for path in STUDENT_LABS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                ast.parse(cell.source)


def test_a_print_split_into_several_stream_messages_reads_as_one():
    """Under load the kernel may send one ``print`` as two stream messages; a re-run whose
    output arrived in one piece must compare equal (labrun's re-run check)."""
    from tests.labrun import cell_text

    def cell(*texts):
        c = nbformat.v4.new_code_cell("verdict = check()")
        c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=t) for t in texts]
        return c

    assert cell_text(cell("Task 1: not", " attempted\n")) == cell_text(
        cell("Task 1: not attempted\n")
    )
    shown = nbformat.v4.new_output("execute_result", data={"text/plain": "1"}, execution_count=1)
    mixed = cell("a\n")
    mixed.outputs.append(shown)
    assert cell_text(mixed) == "a\n\n1"


#: Labs whose tasks are written as *Goal*, *Your answer*, *Constraints*, *How it is checked*.
STATED_PARTS_LABS = ("01", "02", "03", "04", "05", "06", "07")


# The lab's text, hints and docstrings against the solution code: tests/test_checks_hints.py.


@pytest.mark.parametrize(
    "path", [p for p in SOLUTIONS if p.name[:2] in STATED_PARTS_LABS], ids=lambda p: p.name[:2]
)
def test_each_task_states_its_goal_answer_and_check(path):
    nb = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    tasks = sorted({int(n) for n in re.findall(r"\*\*Task (\d+)\b", text)})
    assert tasks, "no **Task N** in the lab"
    for number in tasks:
        task = re.search(rf"\*\*Task {number}\b.*?(?=\n## |\Z)", text, re.S)
        for part in ("*Goal:*", "*Your answer:*", "*How it is checked:*"):
            assert part in task[0], f"Task {number} does not state {part}"
