"""Lab 04 · Clusters, executed headless: the solution, then the student lab.

One module per lab, so that ``pytest -n N --dist loadfile`` runs the labs on different
workers (tests/labrun.py has the checks). Each run starts a cluster of server processes,
which its last cell stops (tagged ``teardown``: the re-runs of the check cells go before it);
each takes ~25 s on 2 cores, and no server process is left afterwards."""

from __future__ import annotations

from tests import labrun

LAB = "04_clusters_lab.ipynb"


def test_solution_runs_and_every_check_is_correct() -> None:
    labrun.check_solution(LAB)


def test_student_lab_runs_to_the_end_with_every_check_not_attempted() -> None:
    labrun.check_student_lab(LAB)
