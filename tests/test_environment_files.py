"""requirements*.txt, environment.yml and pyproject.toml must agree, and exactly one
TensorFlow line must apply on every platform a workshop laptop may have."""

import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.helpers import ROOT
from tools.check_platforms import supported_pythons
from tools.versions import canonical

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


@pytest.mark.parametrize(
    "name", ["requirements.txt", "requirements-gpu.txt", "requirements-dev.txt"]
)
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


# Test and lint tools: contributors and CI install them (requirements-dev.txt), students never.
DEV_TOOLS = {"pytest", "pytest-xdist", "pytest-timeout", "nbval", "ruff", "uv", "pre-commit"}
DEV_TOOLS |= {"import-linter", "mypy"}


def test_design_card_packages_are_pinned():
    names = {r.name for r in all_requirements("requirements.txt")}
    for needed in ("tensorflow-cpu", "jupyterlab", "matplotlib", "pandas", "papermill"):
        assert needed in names
    assert "kubernetes" in names  # dtf.deploy.validate
    # Keras imports scikit-learn on every `import tensorflow` when it is installed (~1 s of
    # CPU a process): the digits ship with dtf instead (dtf/data.py, DIGITS_FILE).
    assert "scikit-learn" not in names
    dev = {r.name for r in all_requirements("requirements-dev.txt")}
    assert DEV_TOOLS <= dev


@pytest.mark.parametrize("name", ["requirements.txt", "requirements-gpu.txt"])
def test_students_do_not_install_test_or_lint_tools(name):
    """make run / make lab install only these files: no pytest, ruff or uv in them."""
    names = {r.name for r in all_requirements(name)}
    assert not names & (DEV_TOOLS | {"packaging"}), f"{name} installs test tools"


def test_dev_file_holds_only_the_tools_and_goes_on_top_of_either_runtime_file():
    """Installed on top of requirements.txt or requirements-gpu.txt (make test GPU=1), so it
    includes neither (that would put the CPU TensorFlow into the GPU venv) and repeats no pin."""
    reqs, includes = requirements("requirements-dev.txt")
    assert includes == [], "requirements-dev.txt must not include another requirements file"
    names = {r.name for r in reqs}
    assert not any(n.startswith("tensorflow") for n in names)
    assert not names & {r.name for r in all_requirements("requirements-gpu.txt")}


# --- pyproject.toml: the package's own metadata ---


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def pins() -> dict[str, str]:
    """Every pinned name in requirements.txt, requirements-gpu.txt and requirements-dev.txt."""
    found = {}
    for name in ("requirements.txt", "requirements-gpu.txt", "requirements-dev.txt"):
        for req in all_requirements(name):
            found[req.name] = next(iter(req.specifier)).version
    return found


def test_package_dependencies_are_ranges_that_hold_the_pins():
    project = pyproject()["project"]
    deps = [Requirement(d) for d in project["dependencies"]]
    extras = {k: [Requirement(d) for d in v] for k, v in project["optional-dependencies"].items()}
    pinned = pins()
    for req in deps + [r for rs in extras.values() for r in rs]:
        ops = sorted(s.operator for s in req.specifier)
        assert ops == ["<", ">="], f"{req}: not a range (exact pins belong in requirements files)"
        assert req.name in pinned, f"{req.name} is in pyproject.toml but pinned nowhere"
        assert req.specifier.contains(pinned[req.name]), (
            f"the pin {pinned[req.name]} is not in {req}"
        )
    # TensorFlow only through the extras: a plain `tensorflow` requirement would pull the ~570 MB
    # GPU wheel in beside tensorflow-cpu wherever the course installs that.
    assert not [r for r in deps if r.name.startswith("tensorflow")]
    assert {r.name for r in deps} >= {"numpy", "psutil"}  # imported at module level by dtf


def test_the_cpu_extra_picks_the_wheel_requirements_txt_picks():
    cpu = {
        Requirement(d).name: Requirement(d)
        for d in pyproject()["project"]["optional-dependencies"]["cpu"]
    }
    pinned = {
        r.name: r for r in all_requirements("requirements.txt") if r.name.startswith("tensorflow")
    }
    assert set(cpu) == set(pinned) == {"tensorflow", "tensorflow-cpu"}
    for name, req in cpu.items():
        assert req.marker == pinned[name].marker, name
    for platform, env in PLATFORMS.items():
        env = {**default_environment(), **env, "extra": "cpu"}
        applicable = [n for n, r in cpu.items() if r.marker.evaluate(env)]
        assert applicable == [EXPECTED_WHEEL[platform]], platform
    gpu = [Requirement(d) for d in pyproject()["project"]["optional-dependencies"]["gpu"]]
    assert [(r.name, r.extras) for r in gpu] == [("tensorflow", {"and-cuda"})]


def test_the_version_is_stated_once():
    import importlib.metadata

    import dtf

    data = pyproject()
    assert "version" not in data["project"] and data["project"]["dynamic"] == ["version"]
    assert data["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dtf.__version__"}
    assert importlib.metadata.version("dtf-hands-on") == dtf.__version__
    stated = re.findall(r"^__version__ = ", (ROOT / "src/dtf/__init__.py").read_text(), re.M)
    assert len(stated) == 1


def test_license_metadata_is_pep_639():
    data = pyproject()
    assert data["project"]["license"] == "Apache-2.0"
    assert data["project"]["license-files"] == ["LICENSE"]
    assert not [c for c in data["project"].get("classifiers", []) if c.startswith("License ::")]
    (setuptools,) = [r for r in data["build-system"]["requires"] if r.startswith("setuptools")]
    assert Requirement(setuptools).specifier == SpecifierSet(">=77")  # PEP 639 support


def test_environment_yml_agrees_with_requirements_and_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    # Everything but Python itself comes from requirements.txt, installed by pip; the file is
    # for students (what make run needs) and says how to add the test tools.
    assert sorted(pip) == ["-e .", "-r requirements.txt"]
    assert "-r requirements-dev.txt" in (ROOT / "environment.yml").read_text()
    python = [d for d in conda if re.match(r"python\b", d)]
    assert len(python) == 1 and "pip" in conda
    others = set(conda) - {python[0], "pip"}
    pinned = {r.name for r in all_requirements("requirements.txt")}
    assert not {re.split(r"[=<> ]", o)[0] for o in others} & pinned, "conda duplicates a pip pin"


# --- Which Pythons: one source, and make refuses the others before installing ---

#: pyproject.toml's [tool.dtf.pins] python, the one place that states it: the Makefile reads it
#: (PYTHON_MIN, PYTHON_MAX; the make tests below run make on a copy) and ruff reads
#: requires-python. The files that cannot read it are checked against it here.
SUPPORTED = supported_pythons()


def workflow(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8"))


def test_every_file_that_names_a_python_names_the_pins_range():
    """CI tests the oldest and the newest; the README claims the range (it once still claimed
    3.10); conda and the dev container install the oldest, the version the course is tested
    with; the package and its proven range admit every one of them."""
    low, high = SUPPORTED[0], SUPPORTED[-1]
    matrix = workflow("test.yml")["jobs"]["make-check"]["strategy"]["matrix"]["python"]
    assert matrix == [low, high], "CI's make check runs on other Pythons than the pins'"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    claims = set(re.findall(r"\b(3\.\d+)–(3\.\d+)\b", readme))
    assert claims == {(low, high)}, f"the README claims {claims}"
    conda = yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
    assert f"python={low}" in conda["dependencies"], "environment.yml's Python"
    dockerfile = (ROOT / ".devcontainer" / "Dockerfile").read_text(encoding="utf-8")
    assert re.findall(r"^FROM \S+/python:(?:\d+-)?(\d+\.\d+)\b", dockerfile, re.M) == [low]
    project = pyproject()
    assert project["tool"]["mypy"]["python_version"] == low, "mypy checks the oldest's types"
    for spec in (project["project"]["requires-python"], project["tool"]["dtf"]["proven"]["python"]):
        assert all(SpecifierSet(spec).contains(f"{v}.0") for v in SUPPORTED), spec


# A stand-in for `python`: runs the Makefile's check (tools/check_python.py) as the Python it
# pretends to be (FAKE_VERSION, FAKE_PLATFORM, FAKE_MACHINE) and logs every call; anything
# else (such as `-m venv`) is logged and refused, so a test sees whether make got past the check.
CHECK = "tools/check_python.py"
FAKE_PYTHON = """\
#!{python}
import os, platform, sys
script = sys.argv[1]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write((script if script.endswith(".py") else " ".join(sys.argv[1:3])) + "\\n")
if not script.endswith("check_python.py"):
    sys.exit(3)
major, minor, micro = (int(x) for x in os.environ["FAKE_VERSION"].split("."))
sys.version_info = (major, minor, micro, "final", 0)
sys.platform = os.environ.get("FAKE_PLATFORM", "linux")
platform.machine = lambda: os.environ.get("FAKE_MACHINE", "x86_64")
sys.argv = sys.argv[1:]
with open(script) as f:
    code = f.read()
exec(compile(code, script, "exec"), {{"__name__": "__main__"}})
"""


@pytest.fixture
def make_copy(tmp_path):
    """A copy of what the Makefile's install step reads, and a runner for `make venv` there
    with PYTHON set to a fake interpreter."""
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    for name in ("Makefile", "pyproject.toml", "requirements.txt", "requirements-common.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / CHECK, tmp_path / CHECK)
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
    assert f"it needs Python {SUPPORTED[0]} to {SUPPORTED[-1]}" in message
    assert f"make PYTHON=python{SUPPORTED[0]} run" in message and "README.md" in message
    assert calls == [CHECK], "make went past the check"
    assert not (make_copy.root / ".venv").exists()
    assert proc.stdout == ""


@pytest.mark.parametrize("version", SUPPORTED)
def test_make_accepts_a_supported_python_and_goes_on_to_create_the_venv(make_copy, version):
    proc, calls = make_copy(version + ".4")
    # The fake refuses `-m venv` (exit 3): what matters is that make got that far.
    assert calls == [CHECK, "-m venv"], proc.stderr
    assert "does not support" not in proc.stderr


def test_make_explains_an_intel_mac(make_copy):
    proc, calls = make_copy("3.11.9", FAKE_PLATFORM="darwin", FAKE_MACHINE="x86_64")
    assert proc.returncode != 0 and calls == [CHECK]
    assert "Intel (x86-64) macOS" in proc.stderr
    assert "no macOS x86-64 (Intel Mac) wheel after 2.16" in proc.stderr
    assert "arm64 Python" in proc.stderr and "Rosetta" in proc.stderr
    # Apple silicon with the same Python version goes on.
    proc, calls = make_copy("3.11.9", FAKE_PLATFORM="darwin", FAKE_MACHINE="arm64")
    assert calls[-1] == "-m venv", proc.stderr


def test_make_reads_the_range_from_pyproject(make_copy):
    """The Makefile states no version: another [tool.dtf.pins] range is the one make applies,
    and a range it cannot read stops it before anything runs."""
    pyproject_copy = make_copy.root / "pyproject.toml"
    text = pyproject_copy.read_text(encoding="utf-8")
    pins_line = re.compile(r'^(\[tool\.dtf\.pins\]\s*\npython = )"[^"]*"', re.M)
    assert pins_line.search(text)
    pyproject_copy.write_text(pins_line.sub(r'\1">=3.12,<3.15"', text))
    proc, calls = make_copy("3.11.4")
    assert "it needs Python 3.12 to 3.14" in proc.stderr and calls == [CHECK], proc.stderr
    pyproject_copy.write_text(pins_line.sub(r'\1"~=3.11"', text))
    proc, calls = make_copy("3.11.4")
    # The log holds every call of this test: the second make called nothing.
    assert "[tool.dtf.pins] needs a line" in proc.stderr and calls == [CHECK], proc.stderr


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
    assert proc.returncode != 0 and calls == [CHECK]
    assert "delete .venv" in proc.stderr and "is Python 3.10.12" in proc.stderr


def test_ci_and_pre_commit_run_the_makefiles_targets():
    """The commands live in the Makefile (and tools/lint.py): CI's jobs and the pre-commit hook
    call its targets, so no step repeats a pytest, ruff or lint command that could drift."""
    runs = [
        step["run"]
        for job in workflow("test.yml")["jobs"].values()
        for step in job["steps"]
        if "run" in step
    ]
    targets = {run.split()[1] for run in runs if run.startswith("make ")}
    assert {"check", "netns", "run", "lint"} <= targets, targets
    direct = [r for r in runs if re.search(r"-m (pytest|ruff|mypy|tools\.lint)\b", r)]
    assert not direct, f"call a make target instead: {direct}"
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    (lint,) = [h for r in config["repos"] for h in r["hooks"] if h["id"] == "lint"]
    assert lint["entry"] == "make lint"


def test_prerelease_job_runs_weekly():
    """TensorFlow's own tutorials broke silently when Keras 3 arrived, because nothing ran them
    (tensorflow/tensorflow#72388): the weekly job runs the course on the next stack (noxfile.py's
    `next` session holds what that stack is)."""
    flow = workflow("prerelease.yml")
    assert flow[True]["schedule"][0]["cron"]  # YAML 1.1 reads the key `on` as True
    runs = [s.get("run", "") for s in flow["jobs"]["claims"]["steps"]]
    assert any(r.startswith("nox -s next") for r in runs)


def test_licenses_are_stated():
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "[Apache License 2.0](LICENSE)" in readme
    assert "creativecommons.org/licenses/by/4.0" in readme
    assert (ROOT / "CONTRIBUTING.md").exists() and "(CONTRIBUTING.md)" in readme


# --- The declared range: pyproject.toml's [tool.dtf.proven], the Colab constraints, the pins ---


def colab_pins() -> dict[str, str]:
    lines = (ROOT / "constraints" / "colab.txt").read_text().splitlines()
    pins = [Requirement(ln) for ln in lines if ln.strip() and not ln.startswith("#")]
    return {canonical(r.name): next(iter(r.specifier)).version for r in pins}


def test_colab_constraints_name_their_source_and_lie_in_every_range():
    text = (ROOT / "constraints" / "colab.txt").read_text()
    assert "googlecolab/backend-info" in text and re.search(r"20\d\d-\d\d-\d\d", text)
    colab = colab_pins()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    proven = project["tool"]["dtf"]["proven"]
    assert SpecifierSet(proven["tensorflow"]).contains(colab["tensorflow"])
    assert SpecifierSet(proven["keras"]).contains(colab["keras"])
    # every package requirement of the course admits Colab's version (the setup cell never
    # upgrades or downgrades the runtime's own stack)
    deps = [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["hosted"],
    ]
    for dep in map(Requirement, deps):
        if canonical(dep.name) in colab:
            assert dep.specifier.contains(colab[canonical(dep.name)], prereleases=True), dep


def test_the_pins_lie_in_the_proven_range():
    proven = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dtf"]["proven"]
    pins = {
        canonical(r.name): next(iter(r.specifier)).version
        for r in all_requirements("requirements.txt")
    }
    tensorflow = pins.get("tensorflow-cpu") or pins["tensorflow"]
    assert SpecifierSet(proven["tensorflow"]).contains(tensorflow)
    # Notebook 00 reads the proven range: it must be the package's own (requires-python).
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert SpecifierSet(requires) == SpecifierSet(proven["python"])
