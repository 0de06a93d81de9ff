"""The package's import layers (``[tool.importlinter]`` in pyproject.toml) hold, and a circle
planted in a copy of the package breaks them, by name.

Two circles were once hidden in functions: ``dtf.cluster`` imported ``dtf.netns`` (for a
private cluster) while ``dtf.netns`` imports ``dtf.cluster``, and ``dtf.parallel`` re-exported
the generated pipeline lesson, which imports ``dtf.parallel``. The contract reads imports
inside functions too, so either would fail ``make lint`` now."""

import shutil
import subprocess
import sys
import tomllib

from tools import lint, lint_imports

from .helpers import ROOT

CONTRACT = "dtf layers: checks > lessons > plumbing > base"
#: The circle the test plants: the cluster package (plumbing) imports the namespace hosts,
#: which import it (one layer above), as dtf.cluster.exposure once did inside PrivateCluster.
PLANTED = "\n\ndef _planted():\n    from dtf import netns  # planted by tests/test_layers.py\n"


def _lint_imports(src, config) -> subprocess.CompletedProcess:
    """tools.lint_imports in a fresh interpreter (this one has imported the real dtf)."""
    args = ["--src", str(src), "--config", str(config)]
    return subprocess.run(
        [sys.executable, "-m", "tools.lint_imports", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_its_layers():
    done = _lint_imports(ROOT / "src", ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{CONTRACT} KEPT" in done.stdout


def test_a_planted_circle_breaks_the_contract(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "dtf", src / "dtf", ignore=shutil.ignore_patterns("__pycache__"))
    with open(src / "dtf" / "cluster" / "exposure.py", "a", encoding="utf-8") as f:
        f.write(PLANTED)  # inside a function: the way the old circle hid
    config = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", config)
    done = _lint_imports(src, config)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{CONTRACT} BROKEN" in done.stdout, done.stdout
    assert "dtf.cluster.exposure -> dtf.netns" in done.stdout, done.stdout


def test_every_module_of_dtf_has_a_layer():
    """exhaustive = true: a new top-level module fails the contract until it is placed."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "layers"]
    assert contract["exhaustive"] is True and contract["containers"] == ["dtf"]
    placed = {m.strip() for layer in contract["layers"] for m in layer.split("|")}
    package = ROOT / "src" / "dtf"
    found = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    found |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert placed == found


def test_make_lint_runs_the_contract():
    assert ("tools.lint_imports",) in lint.COMMANDS
    assert lint_imports.ROOT == ROOT
