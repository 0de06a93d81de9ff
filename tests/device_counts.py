"""Each notebook runs unchanged at a device count other than its default.

The course promises that a notebook runs unchanged on 1 to 8 devices. Every tutorial and lab
solution that has a ``NUM_DEVICES`` parameter is run once more at one other count, the counts
taking turns in course order: 3 (odd: a batch derived the wrong way does not divide), 8 (the
most the course supports) and 1 (no second device at all), skipping a notebook's own default
(no default is 1, 3 or 8). A tutorial's other run is its nbval run at the default; a lab's
solution runs at its other count through ``tests/labrun.py`` (every check must still say
"correct"), and its student version at the default. Tutorials run headless through the
course's own runner (``python -m tools.run_notebooks``, as ``make run ARGS="-p NUM_DEVICES n"``
does). :data:`CHEAP` shortens timing loops, which do not depend on the count; every result the
notebooks assert (accuracy, equal weights, placements) is still computed in full.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import nbformat

from tests.helpers import ROOT

#: The counts, in the order they take turns. Starting at 3 keeps the 8-replica run off notebook 11,
#: whose Keras fits with 8 replicas on 2 cores take minutes.
COUNTS = (3, 8, 1)
#: Notebooks given a count of their own instead of a turn; they leave the turns of the others as
#: they were. 11d's count only changes its in-kernel MirroredStrategy (its worker processes
#: have one replica each on CPUs), so its 8-replica run is cheap. 12 measures every count from
#: 1 to NUM_DEVICES, each in a process of its own, so its cost grows with the count (at 8 the
#: most of any run): it takes 3, which still has a second and a third replica.
FIXED = {"11d_input_sharding.ipynb": 8, "12_scaling_and_performance.ipynb": 3}
#: Parameters that only set how long a timing loop runs (applied where a notebook declares them).
CHEAP = {"TIMING_STEPS": 10, "TIMED_STEPS": 5, "REPEATS": 2, "WARMUP_STEPS": 2}
RUN_TIMEOUT_S = 240


def parameters(path: Path) -> dict:
    """The literal assignments of the notebook's ``parameters`` cell."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if not cells:
        return {}
    found = {}
    for node in ast.parse(cells[0].source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def notebooks() -> list[Path]:
    """Tutorials and lab solutions that have a NUM_DEVICES parameter, in run order."""
    paths = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("labs/solutions/*.ipynb"))
    return [p for p in paths if "NUM_DEVICES" in parameters(p)]


def count_for(index: int, default: int) -> int:
    """The other device count of the notebook at ``index`` in course order: the counts take
    turns (:data:`COUNTS`), and a notebook whose default is its turn's count takes the next."""
    turn = index % len(COUNTS)
    if COUNTS[turn] == default:
        turn = (turn + 1) % len(COUNTS)
    return COUNTS[turn]


def other_counts() -> dict[Path, int]:
    """Every notebook with a ``NUM_DEVICES`` parameter and the count it is run with: its
    :data:`FIXED` count, or its turn among the notebooks that take turns."""
    paths = notebooks()
    unknown = set(FIXED) - {p.name for p in paths}
    if unknown:  # a renamed notebook would silently lose its count
        raise ValueError(f"FIXED names notebooks without a NUM_DEVICES parameter: {unknown}")
    taking_turns = [p for p in paths if p.name not in FIXED]
    counts = {p: count_for(i, parameters(p)["NUM_DEVICES"]) for i, p in enumerate(taking_turns)}
    return {p: FIXED.get(p.name) or counts[p] for p in paths}


def run_with(path: Path, count: int, tmp_path: Path) -> None:
    """Run ``path`` with ``NUM_DEVICES = count``; fail with the runner's report if it fails."""
    cmd = [sys.executable, "-m", "tools.run_notebooks", str(path)]
    cmd += ["-p", "NUM_DEVICES", str(count), "--timeout", str(RUN_TIMEOUT_S - 30)]
    for name, value in CHEAP.items():
        if name in parameters(path):
            cmd += ["-p", name, str(value)]
    cmd += ["--output-dir", str(tmp_path / "out"), "--report-dir", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    report = tmp_path / "report.json"
    rows = json.loads(report.read_text(encoding="utf-8"))["results"] if report.exists() else []
    assert proc.returncode == 0 and [r["status"] for r in rows] == ["passed"], (
        f"{path.relative_to(ROOT)} with NUM_DEVICES={count}:\n{proc.stdout}\n{proc.stderr}"
    )
