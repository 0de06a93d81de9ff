"""requirements*.txt, environment.yml and pyproject.toml must agree, and exactly one
TensorFlow line must apply on every platform a workshop laptop may have."""

import re

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
