"""Notebook 13 (parts 13, 13b and 13c) runs from top to bottom without the capabilities network
namespaces need.

Its hosts are Linux network namespaces, which need root (precisely ``CAP_SYS_ADMIN`` and
``CAP_NET_ADMIN``). A learner without them must still be able to "Run all": every cell that
needs namespaces prints one ``skipped: ...`` line instead, which says how to get the full
lesson (the course's dev container, or on Linux a JupyterLab run as root), and no cell
raises. The stored outputs and nbval's run in the test suite cover the path with root (where
the tests run as root); this test covers the other one. As root it drops the two
capabilities with ``setpriv`` (or ``capsh``) for the course's runner, ``python -m
tools.run_notebooks``, and everything it starts, then checks the report, the skip lines,
that no cell stored an error, and that the outputs nbval compares (cells tagged
``nbval-check-output``) are the stored ones: the same on both paths. About 7 s on an idle
machine per part (24 s beside other test runs).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys

import nbformat
import pytest

from tests.helpers import ROOT, assert_no_stderr

#: Each part of notebook 13, and how many of its cells need hosts (each must print the skip line).
PARTS = {
    "13_hosts_on_one_machine.ipynb": 7,
    "13b_cut_cable.ipynb": 7,
    "13c_open_door_and_deployment.ipynb": 3,
}
CAPS = ("sys_admin", "net_admin")
CHECK_TAG = "nbval-check-output"

pytestmark = [pytest.mark.timeout(360), pytest.mark.notebook, pytest.mark.root]  # make netns


def dropping(argv: list[str]) -> list[str] | None:
    """``argv`` run without ``CAPS`` (for it and every process it starts), or ``None`` when
    neither ``setpriv`` (util-linux) nor ``capsh`` (libcap) is installed."""
    if shutil.which("setpriv"):
        caps = ",".join(f"-{c}" for c in CAPS)
        return ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", *argv]
    if shutil.which("capsh"):
        drop = ",".join(f"cap_{c}" for c in CAPS)
        return ["capsh", f"--drop={drop}", "--", "-c", shlex.join(argv)]
    return None


def _skip_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "Linux only: network namespaces and capabilities are Linux's"
    if os.geteuid() != 0:
        return "not root: there is nothing to drop, and nbval's run already takes the skip path"
    if dropping(["true"]) is None:
        return "neither setpriv (util-linux) nor capsh (libcap) is installed to drop capabilities"
    return None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))
@pytest.mark.parametrize("part", sorted(PARTS))
def test_notebook_13_runs_and_skips_cleanly_without_the_capabilities(tmp_path, part):
    notebook = ROOT / "notebooks" / part
    # What the notebook's processes will be told (and proof that the capabilities are gone).
    code = "from dtf import netns; print(netns.unavailable_reason()); print(netns.FULL_LESSON)"
    probe = dropping([sys.executable, "-c", code])
    reason, lesson = subprocess.run(
        probe, capture_output=True, text=True, timeout=60, cwd=ROOT, env=_env()
    ).stdout.splitlines()
    assert reason.startswith("needs root:"), f"the capabilities were not dropped: {reason!r}"
    skip_line = f"skipped: {reason}; {lesson}"
    # ...and where the learner gets the full lesson: the dev container, or root on Linux.
    assert "dev container" in lesson and "README.md, Installing" in lesson, lesson
    assert "sudo .venv/bin/jupyter lab --allow-root" in lesson, lesson

    out, reports = tmp_path / "out", tmp_path / "reports"
    runner = [sys.executable, "-m", "tools.run_notebooks", str(notebook), "--timeout", "240"]
    runner += ["--output-dir", str(out), "--report-dir", str(reports)]
    done = subprocess.run(
        dropping(runner), capture_output=True, text=True, timeout=300, cwd=ROOT, env=_env()
    )
    report = json.loads((reports / "report.json").read_text(encoding="utf-8"))
    (row,) = report["results"]
    assert done.returncode == 0 and row["status"] == "passed", (row, done.stdout, done.stderr)
    assert not row["warnings"], row["warnings"]  # e.g. leftover processes the runner stopped
    print(f"\n{part} without {', '.join(CAPS)}: {row['seconds']} s")

    (executed_path,) = out.rglob(notebook.name)
    executed = nbformat.read(executed_path, as_version=4)
    stored = nbformat.read(notebook, as_version=4)
    cells = [c for c in executed.cells if c.cell_type == "code"]
    needs_hosts = [c for c in cells if "can_run()" in c.source and "def can_run" not in c.source]
    assert len(needs_hosts) >= PARTS[part]
    for cell in needs_hosts:  # every such cell: the skip line, and nothing else
        assert _text(cell) == skip_line + "\n", cell.source
    for cell in cells:
        assert all(o.output_type != "error" for o in cell.outputs), cell.source
    assert_no_stderr(cells, f"{part} without {', '.join(CAPS)}")  # shows the text, not the cell
    checked = [
        (mine, theirs)
        for mine, theirs in zip(executed.cells, stored.cells, strict=True)
        if CHECK_TAG in theirs.metadata.get("tags", [])
    ]
    assert checked, "no cell tagged nbval-check-output"
    for mine, theirs in checked:  # what nbval compares is path-independent
        assert _text(mine) == _text(theirs), mine.source
