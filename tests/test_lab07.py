"""Lab 07 · From a cluster file to a deployment, executed headless: the solution, then the
student lab.

One module per lab, so that ``pytest -n N --dist loadfile`` runs the labs on different
workers (tests/labrun.py has the checks). The lab imports no TensorFlow and starts nothing
(no server, no network namespace, no root needed): each run takes a few seconds."""

from __future__ import annotations

from tests import labrun

LAB = "07_deployment_lab.ipynb"


def test_solution_runs_and_every_check_is_correct() -> None:
    labrun.check_solution(LAB)


def test_student_lab_runs_to_the_end_with_every_check_not_attempted() -> None:
    labrun.check_student_lab(LAB)
