"""tools/nbrun.py, the one runner: papermill's parameter injection, and what a run gets (working
directory, environment, the executed notebook saved), on tiny notebooks without TensorFlow."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import psutil
import pytest

from tests.helpers import notebook
from tools import nbrun, nbtools


def tags(nb) -> list[list[str]]:
    return [c.metadata.get("tags", []) for c in nb.cells]


def test_parameters_go_into_a_cell_after_the_parameters_cell_as_papermill_puts_them():
    nb = notebook("print(EPOCHS)", parameters="EPOCHS = 10\nNAME = 'x'")
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("# Title"))
    values = {"EPOCHS": 2, "NAME": "it's", "RATE": 1e-3, "ON": False, "LIMIT": None}
    nbrun.inject_parameters(nb, values)
    assert tags(nb) == [[], ["parameters"], ["injected-parameters"], []]
    injected = nb.cells[2].source
    assert injected.startswith("# Parameters\n")
    namespace: dict = {}
    exec(injected, namespace)  # the literals give the values back, types included
    assert {k: namespace[k] for k in values} == values
    assert nb.metadata["papermill"]["parameters"] == values

    # Injecting again replaces the injected cell (as papermill does on an executed copy).
    nbrun.inject_parameters(nb, {"EPOCHS": 3})
    assert tags(nb) == [[], ["parameters"], ["injected-parameters"], []]
    assert nb.cells[2].source == "# Parameters\nEPOCHS = 3\n"
    assert nb.metadata["papermill"]["parameters"] == {"EPOCHS": 3}


def test_without_a_parameters_cell_they_go_first_with_a_warning_and_none_change_nothing():
    nb = notebook("x = 1")
    nbrun.inject_parameters(nb, {})
    assert len(nb.cells) == 1 and "papermill" not in nb.metadata
    with pytest.warns(UserWarning, match="no cell is tagged 'parameters'"):
        nbrun.inject_parameters(nb, {"EPOCHS": 1})
    assert tags(nb) == [["injected-parameters"], []]


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("not-a-name", 1, "not a Python identifier"),
        ("class", 1, "is a Python keyword"),
        ("RATE", float("inf"), "not a finite number"),
        ("RATE", float("nan"), "not a finite number"),
        ("TEXT", "\udcff", "not valid UTF-8"),
        ("THING", object(), "has no literal"),
        ("LIST", [1.0, float("inf")], "has no literal"),
    ],
)
def test_values_without_a_literal_are_refused_before_the_notebook_changes(name, value, message):
    nb = notebook("x = 1", parameters="A = 1")
    with pytest.raises(ValueError, match=message):
        nbrun.inject_parameters(nb, {"A": 2, name: value})
    assert tags(nb) == [["parameters"], []]


def test_running_cell_names_the_cell_a_killed_run_was_in():
    cells = [{"metadata": {"papermill": {"status": s}}, "execution_count": n} for s, n in
             [("completed", 1), ("running", None), ("completed", 2)]]  # fmt: skip
    assert nbrun.running_cell({"cells": cells}) == "cell 2 of 3"
    cells[1]["execution_count"] = 7
    assert nbrun.running_cell({"cells": cells}) == "In [7]"
    assert nbrun.running_cell({"cells": cells[:1]}) is None


# One kernel start, under a second on 2 idle cores: the fast suite's check of the runner.
def test_execute_injects_parameters_runs_in_the_notebook_folder_and_saves_the_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    folder = tmp_path / "nbs"
    folder.mkdir()
    path = folder / "tiny.ipynb"
    nb = notebook(
        "import os, json\n"
        "print(json.dumps({'cwd': os.getcwd(), 'epochs': EPOCHS, 'name': NAME,\n"
        "    'token': os.environ.get('DTF_RUN_TOKEN'),\n"
        "    'metrics': os.environ.get('DTF_METRICS_FILE'),\n"
        "    'pytest': os.environ.get('PYTEST_CURRENT_TEST')}))",
        parameters="EPOCHS = 10\nNAME = 'default'",
    )
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="stale\n")]  # cleared first
    nbformat.write(nb, path)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "set by pytest")  # removed for the kernel
    token = nbtools.new_run_token()
    out = tmp_path / "out" / "tiny.ipynb"

    run = nbrun.execute(
        path,
        parameters={"EPOCHS": 2, "NAME": "given"},
        output_path=out,
        token=token,
        metrics_file=tmp_path / "metrics.jsonl",
        timeout=60,
    )

    assert run.code_cells == 3 and run.leftovers == []
    (output,) = run.nb.cells[2].outputs
    seen = json.loads(output["text"])
    assert Path(seen["cwd"]).resolve() == folder.resolve()
    assert (seen["epochs"], seen["name"]) == (2, "given")
    assert seen["token"] == token
    assert Path(seen["metrics"]) == (tmp_path / "metrics.jsonl").resolve()
    assert seen["pytest"] is None
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert saved["metadata"]["papermill"]["parameters"] == {"EPOCHS": 2, "NAME": "given"}
    assert [c["metadata"]["papermill"]["status"] for c in saved["cells"]] == ["completed"] * 3
    assert "".join(saved["cells"][2]["outputs"][0]["text"]) == output["text"]
    assert nbrun.running_cell(saved) is None
    assert nbformat.read(path, as_version=4).cells[1].outputs[0]["text"] == "stale\n"  # untouched


@pytest.mark.slow
def test_a_failing_notebook_raises_after_its_leftovers_are_stopped(tmp_path: Path):
    """The error names the cell; the saved notebook marks it failed; a process the notebook
    left behind (detached from the kernel, so the kernel's shutdown misses it) is stopped."""
    path = tmp_path / "fails.ipynb"
    # A session of its own: a kernel killed at shutdown (slow under load) takes its process
    # group with it, and then there would be nothing left for the runner to find.
    leak = (
        "import subprocess\n"
        "out = subprocess.Popen(['sleep', '600'], start_new_session=True,\n"
        "    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "open('leak.pid', 'w').write(str(out.pid))"
    )
    nbformat.write(notebook(leak, "raise ValueError('boom')", "never = 1"), path)
    out = tmp_path / "executed.ipynb"
    with pytest.raises(nbrun.NotebookError) as failure:
        nbrun.execute(path, output_path=out, timeout=60)
    error = failure.value
    got = (error.ename, error.evalue, error.cell_index, error.exec_count)
    assert got == ("ValueError", "boom", 1, 2), got
    assert str(error) == "ValueError: boom"
    assert any("sleep" in line for line in error.leftovers), error.leftovers
    pid = int((tmp_path / "leak.pid").read_text())
    try:  # stopped before execute returned (a zombie waiting for init to reap it is gone too)
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        pass
    saved = json.loads(out.read_text(encoding="utf-8"))
    statuses = [c["metadata"].get("papermill", {}).get("status") for c in saved["cells"]]
    assert statuses == ["completed", "failed", None]
