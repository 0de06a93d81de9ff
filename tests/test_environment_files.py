"""requirements*.txt, environment.yml and pyproject.toml must agree, and exactly one
TensorFlow line must apply on every platform a workshop laptop may have."""

import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.conftest import ROOT

PLATFORMS = {
    "linux-x86_64": {"sys_platform": "linux", "platform_machine": "x86_64"},
    "linux-aarch64": {"sys_platform": "linux", "platform_machine": "aarch64"},
    "macos-arm64": {"sys_platform": "darwin", "platform_machine": "arm64"},
    "macos-x86_64": {"sys_platform": "darwin", "platform_machine": "x86_64"},
    "windows-amd64": {"sys_platform": "win32", "platform_machine": "AMD64"},
}
EXPECTED_WHEEL = {
    "linux-x86_64": "tensorflow-cpu",
    "windows-amd64": "tensorflow-cpu",
    "linux-aarch64": "tensorflow",
    "macos-arm64": "tensorflow",
    "macos-x86_64": "tensorflow",
}


def requirements(name: str) -> tuple[list[Requirement], list[str]]:
    """Requirement lines of a file, and the files it includes with -r."""
    reqs, includes = [], []
    for raw in (ROOT / name).read_text().splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-r "):
            includes.append(line[3:].strip())
        else:
            reqs.append(Requirement(line))
    return reqs, includes


def all_requirements(name: str) -> list[Requirement]:
    reqs, includes = requirements(name)
    for inc in includes:
        reqs += all_requirements(inc)
    return reqs


@pytest.mark.parametrize("platform", sorted(PLATFORMS))
def test_exactly_one_tensorflow_line_applies(platform):
    env = {**default_environment(), **PLATFORMS[platform]}
    applicable = [
        r
        for r in all_requirements("requirements.txt")
        if r.name.startswith("tensorflow") and (r.marker is None or r.marker.evaluate(env))
    ]
    assert [r.name for r in applicable] == [EXPECTED_WHEEL[platform]]
    assert str(applicable[0].specifier) == "==2.21.0"


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-gpu.txt"])
def test_everything_is_pinned(name):
    for req in all_requirements(name):
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{name}: {req} is not pinned"


def test_gpu_file_differs_only_in_tensorflow():
    cpu = {r.name: str(r.specifier) for r in all_requirements("requirements.txt")}
    gpu = {r.name: str(r.specifier) for r in all_requirements("requirements-gpu.txt")}
    tf_gpu = [r for r in all_requirements("requirements-gpu.txt") if r.name == "tensorflow"]
    assert len(tf_gpu) == 1 and tf_gpu[0].extras == {"and-cuda"} and tf_gpu[0].marker is None
    assert gpu["tensorflow"] == cpu["tensorflow"] == cpu["tensorflow-cpu"]
    for name in set(cpu) | set(gpu):
        if not name.startswith("tensorflow"):
            assert cpu.get(name) == gpu.get(name), name


def test_design_card_packages_are_pinned():
    names = {r.name for r in all_requirements("requirements.txt")}
    for needed in (
        "tensorflow-cpu",
        "jupyterlab",
        "matplotlib",
        "pandas",
        "papermill",
        "nbval",
        "scikit-learn",
        "pytest",
        "pytest-xdist",
        "ruff",
    ):
        assert needed in names


def test_environment_yml_agrees_with_requirements_and_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    # Everything but Python itself comes from requirements.txt, installed by pip.
    assert sorted(pip) == ["-e .", "-r requirements.txt"]
    python = [d for d in conda if re.match(r"python\b", d)]
    assert len(python) == 1 and "pip" in conda
    others = set(conda) - {python[0], "pip"}
    pinned = {r.name for r in all_requirements("requirements.txt")}
    assert not {re.split(r"[=<> ]", o)[0] for o in others} & pinned, "conda duplicates a pip pin"
    version = python[0].split("=", 1)[1]
    requires = re.search(r'requires-python = "([^"]+)"', (ROOT / "pyproject.toml").read_text())
    assert SpecifierSet(requires.group(1)).contains(version + ".0")


# --- Which Pythons: one claim everywhere, and make refuses the others before installing ---

SUPPORTED = ["3.11", "3.12", "3.13"]


def makefile_var(name: str) -> str:
    match = re.search(rf"^{name} := (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile has no {name}"
    return match.group(1).strip()


def test_supported_pythons_agree_everywhere():
    from check_platforms import supported_pythons

    text = (ROOT / "pyproject.toml").read_text()
    assert supported_pythons() == SUPPORTED
    assert [makefile_var("PYTHON_MIN"), makefile_var("PYTHON_MAX")] == [SUPPORTED[0], SUPPORTED[-1]]
    target = re.search(r'^target-version = "py3(\d+)"', text, re.MULTILINE).group(1)
    assert f"3.{target}" == SUPPORTED[0], "ruff's target-version is not the oldest supported Python"
    readme = (ROOT / "README.md").read_text()
    assert f"Python {SUPPORTED[0]}–{SUPPORTED[-1]}" in readme
    assert "3.10–" not in readme, "README still claims Python 3.10"


# A stand-in for `python`: answers the Makefile's -c check as the Python it pretends to be
# (FAKE_VERSION, FAKE_PLATFORM, FAKE_MACHINE) and logs every call; anything else (such as
# `-m venv`) is logged and refused, so a test sees whether make got past the check.
FAKE_PYTHON = """\
#!{python}
import os, platform, sys
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(" ".join(sys.argv[1:3]).split(";")[0] + "\\n")
if sys.argv[1:2] != ["-c"]:
    sys.exit(3)
major, minor, micro = (int(x) for x in os.environ["FAKE_VERSION"].split("."))
sys.version_info = (major, minor, micro, "final", 0)
sys.platform = os.environ.get("FAKE_PLATFORM", "linux")
platform.machine = lambda: os.environ.get("FAKE_MACHINE", "x86_64")
code = sys.argv[2]
sys.argv = ["-c"] + sys.argv[3:]
exec(compile(code, "<string>", "exec"), {{"__name__": "__main__"}})
"""


@pytest.fixture
def make_copy(tmp_path):
    """A copy of what the Makefile's install step reads, and a runner for `make venv` there
    with PYTHON set to a fake interpreter."""
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml", "requirements.txt", "requirements-common.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    fake = tmp_path / "fakepython"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()

    def run(version, python="./fakepython", **env):
        full = {**os.environ, "FAKE_LOG": str(log), "FAKE_VERSION": version, **env}
        for var in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL"):  # when the suite runs under make
            full.pop(var, None)
        proc = subprocess.run(
            ["make", f"PYTHON={python}", "venv"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            env=full,
        )
        return proc, log.read_text().splitlines()

    run.root = tmp_path
    return run


@pytest.mark.parametrize("version", ["3.10.12", "3.14.0", "3.9.18", "2.7.18"])
def test_make_refuses_an_unsupported_python_before_creating_the_venv(make_copy, version):
    proc, calls = make_copy(version)
    assert proc.returncode != 0
    make_own = re.compile(r"make(\[\d+\])?: \*\*\*")  # make's "Error 1" line
    messages = [line for line in proc.stderr.splitlines() if not make_own.match(line)]
    assert len(messages) == 1, proc.stderr  # one clear message, and nothing else ran
    (message,) = messages
    assert f"is Python {version}" in message and "does not support" in message
    assert "it needs Python 3.11 to 3.13" in message
    assert "make PYTHON=python3.11 run" in message and "README.md" in message
    assert calls == ["-c import platform, sys"], "make went past the check"
    assert not (make_copy.root / ".venv").exists()
    assert proc.stdout == ""


@pytest.mark.parametrize("version", SUPPORTED)
def test_make_accepts_a_supported_python_and_goes_on_to_create_the_venv(make_copy, version):
    proc, calls = make_copy(version + ".4")
    # The fake refuses `-m venv` (exit 3): what matters is that make got that far.
    assert calls == ["-c import platform, sys", "-m venv"], proc.stderr
    assert "does not support" not in proc.stderr


def test_make_explains_an_intel_mac(make_copy):
    proc, calls = make_copy("3.11.9", FAKE_PLATFORM="darwin", FAKE_MACHINE="x86_64")
    assert proc.returncode != 0 and calls == ["-c import platform, sys"]
    assert "Intel (x86-64) macOS" in proc.stderr
    assert "no macOS x86-64 (Intel Mac) wheel after 2.16" in proc.stderr
    assert "arm64 Python" in proc.stderr and "Rosetta" in proc.stderr
    # Apple silicon with the same Python version goes on.
    proc, calls = make_copy("3.11.9", FAKE_PLATFORM="darwin", FAKE_MACHINE="arm64")
    assert calls[-1] == "-m venv", proc.stderr


def test_make_names_a_missing_interpreter(make_copy):
    proc, calls = make_copy("3.11.0", python="python3.99-not-installed")
    assert proc.returncode != 0 and calls == []
    assert "python3.99-not-installed not found" in proc.stderr
    assert "make PYTHON=python3.11 run" in proc.stderr


def test_make_refuses_a_venv_left_by_an_unsupported_python(make_copy):
    """An earlier attempt with Python 3.10 left .venv behind: make must not reuse it."""
    venv_bin = make_copy.root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    shutil.copy(make_copy.root / "fakepython", venv_bin / "python")
    proc, calls = make_copy("3.10.12", python="python3-unused")
    assert proc.returncode != 0 and calls == ["-c import platform, sys"]
    assert "delete .venv" in proc.stderr and "is Python 3.10.12" in proc.stderr


def test_ci_workflow_runs_the_readmes_test_command_with_a_supported_python():
    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "test.yml").read_text())
    steps = workflow["jobs"]["make-test"]["steps"]
    python = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))
    version = python["with"]["python-version"]
    assert "make test" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert any(s.get("run", "").startswith("make test") for s in steps)
    assert f"PYTHON=python{version}" in next(s["run"] for s in steps if "run" in s)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert 'requires-python = ">=3.11,<3.14"' in text and version in ("3.11", "3.12", "3.13")


def test_licenses_are_stated():
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[Apache License 2.0](LICENSE)" in readme
    assert "creativecommons.org/licenses/by/4.0" in readme
    assert (ROOT / "CONTRIBUTING.md").exists() and "(CONTRIBUTING.md)" in readme
