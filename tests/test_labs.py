"""Tests of the lab system: the generator (tools/make_labs.py), the committed labs, and every
lab executed headless.

- The generator on small synthetic notebooks: regions replaced at their indentation, the
  result compiles, solution-only cells and outputs gone, links rebased, output idempotent,
  bad solutions refused.
- The committed student labs are what their solutions generate (``make_labs.py --check``).
- Every solution runs without error and every check prints "correct"; every student lab runs
  to the end and every check prints "not attempted", with no traceback in any output.

Executing the four labs takes about a minute on 2 cores (a TensorFlow import per kernel).
With pytest-xdist use ``--dist loadfile`` (as ``make test`` does): this file then stays on
one worker while the others run other files.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
make_labs = importlib.import_module("make_labs")

SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("[0-9][0-9]_*_lab.ipynb"))
STUDENT_LABS = [ROOT / "labs" / p.name for p in SOLUTIONS]
TASK = re.compile(r"\*\*Task (\d+)\b")
CELL_TIMEOUT_S = 120


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
    assert stale == [], "run: python tools/make_labs.py\n" + "\n".join(stale)


def tasks_of(nb) -> list[int]:
    found = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            found += [int(n) for n in TASK.findall(cell.source) if int(n) not in found]
    return found


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
            if c.cell_type == "code" and f"checks.{lab}_task{task}(" in c.source
        )
        answer = student[index - 1]
        assert "### BEGIN SOLUTION" in answer.source
        assert f"Task {task}" in "".join(c.source for c in student[: index - 1][-3:])
    assert student[-1].cell_type == "markdown" and "## Summary" in student[-1].source


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


# --------------------------------------------------------------------------- executing labs


def execute(path: Path):
    """Run ``path`` top to bottom in a fresh kernel (its folder as working directory), as
    JupyterLab's Run All would, and return the executed notebook."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.pop("DTF_METRICS_FILE", None)
    client = NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute(env=env)
    return nb


def output_text(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                parts.append(out.text)
            elif out.output_type == "error":
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


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_solution_runs_and_every_check_is_correct(path: Path) -> None:
    nb = execute(path)
    text = output_text(nb)
    tasks = tasks_of(nb)
    verdicts = verdict_lines(text)
    assert set(verdicts) == set(tasks), text
    for task in tasks:
        assert verdicts[task] == ["correct"], text
    assert "Traceback" not in text, text
    assert not any(o.output_type == "error" for c in nb.cells for o in c.get("outputs", []))
    assert f"lab{path.name[:2]}: {len(tasks)} of {len(tasks)} tasks correct" in text


@pytest.mark.parametrize("path", STUDENT_LABS, ids=lambda p: p.name)
def test_student_lab_runs_to_the_end_with_every_check_not_attempted(path: Path) -> None:
    nb = execute(path)
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


def test_student_answer_cells_are_valid_python() -> None:
    for path in STUDENT_LABS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                ast.parse(cell.source)
