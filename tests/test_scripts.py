"""The course's commands: declared in pyproject.toml's ``[project.scripts]``, each pointing at a
function that exists, and each module runs as ``python -m`` too, cleanly (no runpy warning:
``dtf.cluster`` must not import the module ``python -m dtf.cluster.server`` runs)."""

import importlib
import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .helpers import ROOT

SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
#: The shim ``dtf.server`` ("for older imports") is gone: these replace it.
EXPECTED = {"dtf-server", "dtf-deploy", "dtf-netns"}


def test_the_commands_are_declared():
    assert set(SCRIPTS) == EXPECTED
    assert not (ROOT / "src" / "dtf" / "server.py").exists()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_command_points_at_a_function(name):
    module, _, function = SCRIPTS[name].partition(":")
    assert callable(getattr(importlib.import_module(module), function))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_python_m_runs_the_same_program(name):
    """``python -m MODULE --help``: the usage line names that form, and nothing is printed
    on standard error (the runpy warning a package importing its own program would give)."""
    module = SCRIPTS[name].partition(":")[0]
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "100"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: python -m {module} "), done.stdout
    assert done.stderr == ""


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_installed_command_names_itself(name):
    """After ``pip install -e .`` the command is beside this interpreter and says its name."""
    entries = importlib.metadata.entry_points(group="console_scripts")
    installed = {e.name: e.value for e in entries}
    script = Path(sys.executable).with_name(name)
    if installed.get(name) != SCRIPTS[name] or not script.exists():
        pytest.skip(f"{name} is not installed here: pip install -e . adds it")
    done = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: {name} "), done.stdout
