"""The Makefile: `make help` lists every target, and only the contributors' targets install
the test and lint tools (students' `make run` and `make lab` never get pytest, ruff or uv)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")

MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")


def make(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    for var in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # when the suite itself runs under make
        env.pop(var, None)
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def phony_targets() -> list[str]:
    names = []
    for line in re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.MULTILINE):
        names += line.split()
    return names


def test_help_lists_every_phony_target_with_a_description():
    proc = make("help")
    assert proc.returncode == 0, proc.stderr
    listed = dict(re.findall(r"^  ([a-z]+) +(\S.*)$", proc.stdout, re.MULTILINE))
    targets = phony_targets()
    assert {"help", "venv", "dev", "run", "test", "lab", "outputs", "labs", "lint", "clean"} <= set(
        targets
    )
    missing = [t for t in targets if t not in listed]
    assert not missing, f"make help does not list {missing}: add '## what it does' to their lines"
    listed_once = re.findall(r"^  ([a-z]+) ", proc.stdout, re.MULTILINE)
    assert len(listed_once) == len(set(listed_once)), "a target is listed twice"
    assert "GPU=1" in proc.stdout and "ARGS=" in proc.stdout and "PYTHON=" in proc.stdout


def test_every_target_in_help_is_phony():
    """A target listed by help but not .PHONY would stop working once a file of its name exists."""
    listed = re.findall(r"^([a-z]+):.*## ", MAKEFILE, re.MULTILINE)
    assert set(listed) <= set(phony_targets())


def install_commands(target: str, *variables: str) -> str:
    """What `make -n TARGET` would run in a venv that does not exist yet (nothing runs)."""
    proc = make("-n", target, "VENV=build/no-such-venv", *variables)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("target", ["venv", "run", "lab", "outputs", "labs"])
def test_student_targets_do_not_install_the_test_tools(target):
    commands = install_commands(target)
    assert "-r requirements.txt" in commands  # it does install the course's own pins
    assert "requirements-dev.txt" not in commands


@pytest.mark.parametrize("target", ["test", "check", "netns", "lint", "dev"])
@pytest.mark.parametrize("gpu", [False, True])
def test_contributor_targets_install_the_tools_on_top_of_the_right_pins(target, gpu):
    commands = install_commands(target, *(["GPU=1"] if gpu else []))
    runtime = "requirements-gpu.txt" if gpu else "requirements.txt"
    assert f"-r {runtime} -r requirements-dev.txt" in commands
    other = "requirements.txt" if gpu else "requirements-gpu.txt"
    assert f"-r {other}" not in commands  # never the CPU TensorFlow into the GPU venv


def test_netns_runs_the_root_tests_as_root_and_never_skips_them():
    """CI's only run of the namespace tests (make check leaves them out): without
    DTF_REQUIRE_NETNS, a runner that cannot make namespaces would skip them all, and pass.
    It goes through sudo unless make already runs as root (a container without sudo)."""
    commands = install_commands("netns")
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert re.search(rf"^{sudo}DTF_REQUIRE_NETNS=1 \S+ -m pytest .*-m root\b", commands, re.M)


def test_check_leaves_out_the_root_tests_whoever_runs_it():
    """make check runs the same tests for every user: the tests marked root are make netns'."""
    (line,) = [c for c in install_commands("check").splitlines() if " -m pytest " in c]
    assert re.search(r'-m "[^"]*\bnot root\b[^"]*"', line), line
