"""Lab 06 · Surviving a killed worker, executed headless: the solution, then the student lab.

One module per lab, so that ``pytest -n N --dist loadfile`` runs the labs on different
workers (tests/labrun.py has the checks). Each run starts the worker launcher, whose workers
the lab's demonstration and the checkers of Tasks 2 and 4 start and kill; its last cell
(tagged ``teardown``: the re-runs of the check cells go before it) stops them all and asserts
that no process and no temporary folder is left. Each takes ~15 s on 2 cores."""

from __future__ import annotations

from tests import labrun

LAB = "06_fault_tolerance_lab.ipynb"


def test_solution_runs_and_every_check_is_correct() -> None:
    labrun.check_solution(LAB)


def test_student_lab_runs_to_the_end_with_every_check_not_attempted() -> None:
    labrun.check_student_lab(LAB)
