"""tools/claims_report.py: a small JUnit XML file, as pytest writes it, becomes a Markdown
summary naming each failed test, the claim it guards and the first line of its error."""

from __future__ import annotations

import json

import pytest

from tools import claims_report as cr

# Two test modules (one with a class), a notebook and the JUnit XML of a run over them.
MODULE = '''
def test_loss_goes_down():
    """Training on the digits lowers the loss within one epoch.

    More words that the report leaves out.
    """


def test_without_docstring():
    pass


class TestServers:
    def test_join(self):
        """A killed ps fails join() with UnavailableError."""
'''

NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "source": ["x = 1"], "metadata": {}, "outputs": []},
        {"cell_type": "markdown", "source": ["# 05 · GPU memory\n", "What it teaches."]},
    ],
    "metadata": {},
    "nbformat": 4,
    "nbformat_minor": 5,
}

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests">
<testsuite name="pytest" errors="1" failures="4" skipped="1" tests="8" time="12.3">
<testcase classname="tests.test_claims" name="test_loss_goes_down" time="1.0">
  <failure message="AssertionError: loss 2.31 &gt;= 2.30&#10;assert 2.31 &lt; 2.3">def test...
E   AssertionError: loss 2.31 &gt;= 2.30</failure>
</testcase>
<testcase classname="tests.test_claims" name="test_without_docstring[3-devices]" time="0.1">
  <failure message="">    x = 1
E   ValueError: a | pipe</failure>
</testcase>
<testcase classname="tests.test_claims.TestServers" name="test_join" time="0.1">
  <failure message="tensorflow.python.framework.errors_impl.UnavailableError: peer died"/>
</testcase>
<testcase classname="tests.test_claims" name="test_passes" time="0.1"/>
<testcase classname="tests.test_claims" name="test_skipped" time="0.0">
  <skipped message="needs root"/>
</testcase>
<testcase classname="tests.test_gone" name="test_fixture_broke" time="0.0">
  <error message="failed on setup with &quot;RuntimeError: no free port&quot;">...</error>
</testcase>
<testcase classname="notebooks.05_gpu_memory.ipynb" name="Cell 7" time="2.0">
  <failure message="Cell outputs differ">Cell outputs differ</failure>
</testcase>
<testcase classname="notebooks.05_gpu_memory.ipynb" name="Cell 8" time="2.0"/>
</testsuite>
</testsuites>
"""


@pytest.fixture
def run(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_claims.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "05_gpu_memory.ipynb").write_text(json.dumps(NOTEBOOK))
    xml = tmp_path / "junit.xml"
    xml.write_text(JUNIT, encoding="utf-8")
    return tmp_path, xml


def test_every_failure_is_named_with_its_claim_and_first_error_line(run):
    root, xml = run
    counts, failures = cr.read(xml, root)
    assert counts == cr.Counts(tests=8, failures=4, errors=1, skipped=1)
    assert [(f.test, f.claim, f.error, f.kind) for f in failures] == [
        (
            "tests/test_claims.py::test_loss_goes_down",
            "Training on the digits lowers the loss within one epoch.",
            "AssertionError: loss 2.31 >= 2.30",
            "failure",
        ),
        (
            "tests/test_claims.py::test_without_docstring[3-devices]",
            "without docstring [3-devices]",
            "ValueError: a | pipe",
            "failure",
        ),
        (
            "tests/test_claims.py::TestServers::test_join",
            "A killed ps fails join() with UnavailableError.",
            "tensorflow.python.framework.errors_impl.UnavailableError: peer died",
            "failure",
        ),
        (
            "tests.test_gone::test_fixture_broke",  # no such file: named as JUnit names it
            "fixture broke",
            'failed on setup with "RuntimeError: no free port"',
            "error",
        ),
        (
            "notebooks/05_gpu_memory.ipynb::Cell 7",
            "05 · GPU memory (Cell 7)",
            "Cell outputs differ",
            "failure",
        ),
    ]


def test_the_markdown_summary(run):
    root, xml = run
    counts, failures = cr.read(xml, root)
    text = cr.markdown(counts, failures, ["tensorflow-cpu 2.22.0rc0", "keras 3.16.0.dev1"])
    lines = text.splitlines()
    assert lines[0] == "## Course claims under tensorflow-cpu 2.22.0rc0, keras 3.16.0.dev1"
    assert "8 tests: 2 passed, 4 failed, 1 errors, 1 skipped." in text
    assert "5 claims changed (or could not be checked):" in text
    assert "| Test | Claim it guards | First line of the error |" in lines
    row = next(line for line in lines if "test_without_docstring" in line)
    assert row.count(" | ") == 2 and "a \\| pipe" in row  # the pipe does not split the row
    assert "`(error) failed on setup with" in text
    clean = cr.markdown(cr.Counts(3, 0, 0, 0), [], [])
    assert "Every claim the suite checks still holds." in clean


def test_main_appends_to_the_step_summary_and_warns(run, monkeypatch, capsys):
    root, xml = run
    summary = root / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert cr.main([str(xml), "--github"], root=root) == 0
    text = summary.read_text()
    assert text.startswith("earlier step\n## Course claims under")
    assert "Training on the digits lowers the loss" in text
    out = capsys.readouterr().out
    assert "::warning title=Course claims::5 tests fail" in out


def test_stdout_without_github_and_a_missing_file(run, tmp_path, capsys):
    _, xml = run
    assert cr.main([str(xml)]) == 0
    assert capsys.readouterr().out.startswith("## Course claims under")
    assert cr.main([str(tmp_path / "absent.xml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_the_report_names_keras_nightly_when_it_provides_keras(monkeypatch):
    """The weekly run replaces keras by keras-nightly: the heading must name the nightly."""
    installed = {"tensorflow-cpu": "2.22.0rc0", "keras-nightly": "3.16.0.dev2026102704"}

    def version(name):
        if name not in installed:
            raise cr.importlib.metadata.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(cr.importlib.metadata, "version", version)
    assert cr.versions() == ["tensorflow-cpu 2.22.0rc0", "keras-nightly 3.16.0.dev2026102704"]
    # and the module's owners are the ones tools/versions.py knows
    from tools.versions import OWNERS

    owners = {*OWNERS["tensorflow"], *OWNERS["keras"], *OWNERS["tf_keras"]}
    assert owners == set(cr.PACKAGES)
