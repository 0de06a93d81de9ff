"""``--dist loadgroup`` really groups: make test and make check depend on it.

tests/conftest.py gives every test an xdist group (a notebook's nbval cells share one, a
module's tests share one, each notebook run in tests/test_notebook_runs.py has its own), and
pytest-xdist keeps a group on one worker by appending ``@group`` to the node id that the
worker reports. pytest 9.2 ignores that change (pytest-dev/pytest-xdist#1386): the tests then
run ungrouped, nbval's cells of one notebook land on different workers and fail with
``NameError``s. This test fails first, with the reason.
"""

from __future__ import annotations

import os

import pytest


def test_this_test_carries_its_module_s_group(request: pytest.FixtureRequest) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ or not request.config.getvalue("loadgroup"):
        pytest.skip("runs under pytest-xdist with --dist loadgroup (make test, make check)")
    assert request.node.nodeid.endswith("@tests/test_xdist_groups.py"), (
        f"{request.node.nodeid}: --dist loadgroup did not group this test; is pytest newer "
        "than requirements-dev.txt pins (pytest-dev/pytest-xdist#1386)?"
    )
    assert not request.config.getoption("loadscopereorder"), (
        "pytest-xdist hands out the groups with the most tests first, which leaves the "
        "whole-notebook runs (one test each) to the end: pass --no-loadscope-reorder, as make "
        "test and make check do, so that tests/conftest.py's order holds"
    )


def test_tests_that_wait_go_first_then_notebooks_then_the_rest() -> None:
    """The order xdist hands groups out in (tests/conftest.py): a test marked ``waits`` (its
    whole module group with it) before the notebook runs, the short tests after them, so
    that minutes of waiting overlap the other workers' work instead of ending the run."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    paths = ["tests/test_timing.py", "notebooks/00_setup_check.ipynb"]
    paths.append("tests/test_keepalive_claim.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    kinds = [
        "waits" if "keepalive" in i else "notebook" if i.startswith("notebooks/") else "rest"
        for i in ids
    ]
    assert kinds and kinds == sorted(kinds, key=["waits", "notebook", "rest"].index), ids
    assert set(kinds) == {"waits", "notebook", "rest"}
