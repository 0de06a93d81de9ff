"""Every tutorial at a second device count, and every lab: its solution and its student version.

A tutorial's first run is nbval's, at its default parameters (``notebooks/`` is a test path).
Here each tutorial and lab solution with a ``NUM_DEVICES`` parameter runs once more at the
count :mod:`tests.device_counts` gives it (3, 8 or 1, taking turns), and each lab's student
version runs at its default. Every run is its own test in its own xdist group, so that
``pytest -n 3 --dist loadgroup`` spreads them over the workers; all are marked ``notebook``
(``make check``), except the one smoke run of a lab kernel that ``make test`` keeps, marked
``smoke``: the solution of :data:`SMOKE_LAB`, about 5 s (its kernel imports TensorFlow).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import labrun
from tests.conftest import ROOT
from tests.device_counts import COUNTS, notebooks, other_counts, parameters, run_with

SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("*.ipynb"))
TUTORIALS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: The lab whose solution run stays in the fast suite (the quickest: no TensorFlow training,
#: though since issue 17 its checks hand TF_CONFIG to TensorFlow's own resolver).
SMOKE_LAB = "07_deployment_lab.ipynb"


def _param(path: Path, *marks, kind: str):
    group = pytest.mark.xdist_group(f"{kind}:{path.name}")
    return pytest.param(path, id=path.stem, marks=[group, *marks])


def _notebook_marks(path: Path) -> list:
    return [pytest.mark.smoke] if path.name == SMOKE_LAB else [pytest.mark.notebook]


TUTORIAL_RUNS = [
    _param(p, pytest.mark.notebook, kind="count")
    for p, _ in other_counts().items()
    if p.parent.name == "notebooks"
]


@pytest.mark.parametrize("path", TUTORIAL_RUNS)
def test_tutorial_runs_at_another_device_count(path, tmp_path):
    run_with(path, other_counts()[path], tmp_path)


@pytest.mark.parametrize(
    "path", [_param(p, *_notebook_marks(p), kind="solution") for p in SOLUTIONS]
)
def test_lab_solution_runs_and_every_check_is_correct(path):
    count = other_counts().get(path)
    labrun.check_solution(path.name, {"NUM_DEVICES": count} if count else None)


@pytest.mark.parametrize(
    "path", [_param(p, pytest.mark.notebook, kind="student") for p in SOLUTIONS]
)
def test_student_lab_runs_to_the_end_with_every_check_not_attempted(path):
    labrun.check_student_lab(path.name)


def test_every_notebook_that_sets_up_devices_takes_the_count_as_a_parameter():
    """A notebook that calls devices.setup must let NUM_DEVICES be changed, or the runs
    above would silently skip it."""
    uses_setup = [p for p in TUTORIALS + SOLUTIONS if "devices.setup(" in p.read_text("utf-8")]
    assert uses_setup, "no notebook calls devices.setup: has the API changed?"
    missing = set(uses_setup) - set(notebooks())
    assert not missing, sorted(str(p.relative_to(ROOT)) for p in missing)


def test_each_notebook_gets_one_other_count_and_every_count_is_run():
    counts = other_counts()
    for path, count in counts.items():
        assert count in COUNTS and count != parameters(path)["NUM_DEVICES"], (path, count)
    assert set(counts.values()) == set(COUNTS), "every count is run for some notebook"
    assert {p for p in counts if p.parent.name == "notebooks"} == {
        p.values[0] for p in TUTORIAL_RUNS
    }


def test_there_is_a_lab_and_the_smoke_lab_exists():
    assert SOLUTIONS and (ROOT / "labs" / "solutions" / SMOKE_LAB).exists()
    assert (ROOT / "labs" / SMOKE_LAB).exists()
