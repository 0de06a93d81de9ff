"""docs/measurements.md: the one page for measured run times (issue 27, section 4).

The page is generated from the records the commands write (build/report.json from ``make
run``, build/suites/NAME.json from ``--record-suite``); the README, CONTRIBUTING and the
Makefile link to it instead of quoting times that go stale."""

from __future__ import annotations

import json
import re

import pytest

from tests.helpers import ROOT, suite_group
from tools import measurements

SUITE = {
    "suite": "check",
    "markers": "not hosted",
    "arguments": ["-m", "not hosted", "--record-suite", "check"],
    "workers": 3,
    "cores": 2,
    "passed": 2700,
    "failed": 1,
    "skipped": 4,
    "seconds": 612.4,
    "group_seconds": {
        "every other test": 300.0,
        "nbval: tutorials at their default count": 900.0,
        "student labs": 0.0,  # a group the run left out: not listed
    },
    "exit_status": 1,
    "finished": "2026-11-28 09:00 UTC",
}
REPORT = {
    "summary": "2 passed in 20.0 s (default parameters)",
    "results": [
        {"notebook": "notebooks/00_a.ipynb", "status": "passed", "seconds": 8.2, "peak_mib": 838.2},
        {"notebook": "labs/solutions/01_b.ipynb", "status": "passed", "seconds": 11.8},
    ],
}


def _records(root, suite=SUITE, report=REPORT):
    (root / "build/suites").mkdir(parents=True)
    (root / "build/suites/check.json").write_text(json.dumps(suite))
    (root / "build/report.json").write_text(json.dumps(report))
    return root


@pytest.mark.parametrize("root, shown", [(True, "| root |"), (False, "| a regular user |")])
def test_the_page_says_whether_a_suite_ran_as_root(tmp_path, root, shown):
    page = measurements.render(_records(tmp_path, suite={**SUITE, "root": root}))
    assert f"| 3 on 2 cores {shown} 2026-11-28 09:00 UTC |" in page


def test_the_page_is_made_from_the_records(tmp_path):
    page = measurements.render(_records(tmp_path))
    assert "| `make check` | 2700 | 1 | 4 | 612 s (10.2 min) | 3 on 2 cores |  |" in page
    # groups, largest first, with their share of the worker seconds
    assert page.index("| nbval: tutorials at their default count | 900 | 75% |") < page.index(
        "| every other test | 300 | 25% |"
    )
    assert "student labs" not in page
    assert "| notebooks/00_a.ipynb | passed | 8.2 | 838 |" in page
    assert "| labs/solutions/01_b.ipynb | passed | 11.8 |  |" in page
    assert page.startswith(measurements.HEADER)


def test_a_narrowed_run_says_so_and_a_missing_record_names_its_command(tmp_path):
    narrowed = {**SUITE, "arguments": [*SUITE["arguments"], "-k", "lab05"]}
    page = measurements.render(_records(tmp_path, suite=narrowed))
    assert "| `make check (only -k lab05)` |" in page
    empty = measurements.render(tmp_path / "nothing")
    assert "No record yet: run `make test`, `make check` or `make counts`." in empty
    assert "No record yet: run `make run`." in empty


@pytest.mark.parametrize(
    ("nodeid", "group"),
    [
        ("notebooks/04_x.ipynb::Cell 3", "nbval: tutorials at their default count"),
        (
            "tests/test_notebook_runs.py::test_tutorial_runs_at_another_device_count[04_x]",
            "tutorials at another device count",
        ),
        (
            "tests/test_notebook_runs.py::test_lab_solution_runs_and_every_check_is_correct[x]",
            "lab solutions at another device count",
        ),
        ("tests/test_keepalive_claim.py::test_x", "keepalive measured (waits on gRPC)"),
        ("tests/test_timing.py::test_x", "every other test"),
    ],
)
def test_each_test_falls_in_one_group(nodeid, group):
    assert suite_group(nodeid) == group


def test_the_committed_page_is_generated_and_the_prose_quotes_no_suite_times():
    page = (ROOT / measurements.PAGE).read_text(encoding="utf-8")
    assert page.startswith(measurements.HEADER), "run: make measurements"
    number = r"(?:[\d.]+|one|two|three|four|five|ten|eleven|twelve|fifteen)(?:\s+and\s+a\s+half)?"
    stale = re.compile(rf"about\s+{number}\s+minutes|\b\d{{3,4}} tests, \d+ s\b|measured: -n \d")
    for name in ("README.md", "CONTRIBUTING.md", "Makefile"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert not stale.findall(text), f"{name} quotes a measured time: link the page instead"
        if name != "Makefile":
            assert "docs/measurements.md" in text


def test_the_machine_names_the_tensorflow_wheel_installed(monkeypatch):
    """requirements.txt installs ``tensorflow-cpu`` on Linux x86-64 and ``tensorflow``
    elsewhere: the page names whichever is installed, not "not installed"."""
    installed = {"tensorflow-cpu": "2.21.0", "keras": "3.15.1"}

    def version(name):
        if name not in installed:
            raise measurements.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(measurements.metadata, "version", version)
    line = "\n".join(measurements.machine_section())
    assert "TensorFlow 2.21.0 (tensorflow-cpu), Keras 3.15.1" in line, line
    installed["tensorflow"] = "2.22.0"
    assert "TensorFlow 2.22.0, Keras" in "\n".join(measurements.machine_section())
    del installed["tensorflow"], installed["tensorflow-cpu"]
    assert "TensorFlow not installed" in "\n".join(measurements.machine_section())
