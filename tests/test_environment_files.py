"""requirements*.txt, environment.yml and pyproject.toml must agree, and exactly one
TensorFlow line must apply on every platform a workshop laptop may have."""

import importlib.util
import inspect
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

from tests.conftest import ROOT
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
DEV_TOOLS |= {"import-linter"}


def test_design_card_packages_are_pinned():
    names = {r.name for r in all_requirements("requirements.txt")}
    for needed in ("tensorflow-cpu", "jupyterlab", "matplotlib", "pandas", "papermill"):
        assert needed in names
    assert "scikit-learn" in names and "kubernetes" in names  # digits; dtf.deploy.validate
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
    makefile = (ROOT / "Makefile").read_text()
    install = "-m pip install --progress-bar off -r $(REQUIREMENTS) -r requirements-dev.txt"
    assert install in makefile


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
    from tools.check_platforms import supported_pythons

    text = (ROOT / "pyproject.toml").read_text()
    assert supported_pythons() == SUPPORTED
    assert [makefile_var("PYTHON_MIN"), makefile_var("PYTHON_MAX")] == [SUPPORTED[0], SUPPORTED[-1]]
    target = re.search(r'^target-version = "py3(\d+)"', text, re.MULTILINE).group(1)
    assert f"3.{target}" == SUPPORTED[0], "ruff's target-version is not the oldest supported Python"
    readme = (ROOT / "README.md").read_text()
    assert f"Python {SUPPORTED[0]}–{SUPPORTED[-1]}" in readme
    assert "3.10–" not in readme, "README still claims Python 3.10"


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
    assert "it needs Python 3.11 to 3.13" in message
    assert "make PYTHON=python3.11 run" in message and "README.md" in message
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


def workflow(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text(encoding="utf-8"))


def test_ci_runs_make_check_on_the_oldest_and_newest_supported_python():
    job = workflow("test.yml")["jobs"]["make-check"]
    pythons = job["strategy"]["matrix"]["python"]
    assert pythons == [SUPPORTED[0], SUPPORTED[-1]]
    steps = job["steps"]
    setup = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))
    assert setup["with"]["python-version"] == "${{ matrix.python }}"
    runs = [s["run"] for s in steps if "run" in s]
    assert "make check PYTHON=python${{ matrix.python }}" in runs
    # Namespace tests run as root, and fail rather than skip where namespaces cannot be made.
    root = [r for r in runs if r.startswith("sudo ")]
    assert root and "DTF_REQUIRE_NETNS=1" in root[0] and "-m root" in root[0]
    # pip's cache is keyed on every file that decides what is installed.
    keyed = setup["with"]["cache-dependency-path"].split()
    assert {"requirements.txt", "requirements-common.txt", "requirements-dev.txt"} <= set(keyed)
    assert "make check" in (ROOT / ".ci" / "run").read_text()


def test_ci_runs_make_run_on_an_apple_silicon_mac_without_the_test_tools():
    job = workflow("test.yml")["jobs"]["make-run-macos"]
    assert job["runs-on"] in ("macos-14", "macos-15")  # arm64 runners (macos-15-intel is not)
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert "make run PYTHON=python3.11" in runs
    assert any("pytest ruff uv" in r for r in runs)


def test_lint_runs_the_same_commands_everywhere():
    """make lint, CI's lint job and the pre-commit hook run one module, tools/lint.py, with the
    pinned tools: the commands themselves are written there only."""
    from tools import lint

    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^lint:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    assert [line.strip() for line in recipe.splitlines()] == ["$(PY) -m tools.lint"]
    steps = workflow("test.yml")["jobs"]["lint"]["steps"]
    assert [s["run"] for s in steps if "tools.lint" in s.get("run", "")] == ["python -m tools.lint"]
    pins = {r.name: r for r in all_requirements("requirements-dev.txt")}
    installs = " ".join(s["run"] for s in steps if "pip install" in s.get("run", ""))
    assert "ruff|import-linter" in installs and "requirements-dev.txt" in installs
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    hooks = [h for r in config["repos"] for h in r["hooks"]]
    (hook,) = [h for h in hooks if h["id"] == "lint"]
    assert hook["entry"] == "python -m tools.lint" and hook["pass_filenames"] is False
    assert "jupyter" in hook["types_or"]
    assert sorted(hook["additional_dependencies"]) == sorted(
        str(pins[name]) for name in ("ruff", "import-linter")
    ), "pre-commit's lint tools are not the pinned ones"
    assert not any("ruff" in h["id"] for h in hooks), "one lint hook, the module's commands"
    assert lint.PATHS == ("notebooks", "labs", "src", "tools", "tests")
    assert ("tools.lint_imports",) in lint.COMMANDS


def noxfile_session(name):
    """A session function of noxfile.py, imported without running it."""
    pytest.importorskip("nox")
    spec = importlib.util.spec_from_file_location("noxfile", ROOT / "noxfile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    session = getattr(module, name)
    return getattr(session, "func", session)


def test_prerelease_job_runs_weekly_and_reports():
    flow = workflow("prerelease.yml")
    triggers = flow[True]  # YAML 1.1 reads the key `on` as True
    assert "workflow_dispatch" in triggers and triggers["schedule"][0]["cron"]
    text = (ROOT / ".github" / "workflows" / "prerelease.yml").read_text()
    assert "tensorflow/tensorflow#72388" in text
    steps = flow["jobs"]["claims"]["steps"]
    runs = [s.get("run", "") for s in steps]
    assert any(r.strip().startswith("nox -s next") for r in runs)
    # keras-nightly replaces keras: uninstalled first (both own the `keras` module), and the
    # session refuses a stack with both (tools/versions.py)
    source = inspect.getsource(noxfile_session("next"))
    uninstall = source.index('"uninstall", "--yes", "keras"')
    assert uninstall < source.index('"keras-nightly"')
    assert '"--require", "keras-nightly"' in source
    suite = next(s for s in steps if "--junitxml=build/junit.xml" in s.get("run", ""))
    assert suite.get("continue-on-error") is True  # the report says what failed
    report = next(s for s in steps if "tools/claims_report.py" in s.get("run", ""))
    assert report.get("if") == "always()" and "--github" in report["run"]


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
    assert SpecifierSet(proven["python"]).contains(f"{SUPPORTED[0]}.0")
    assert SpecifierSet(proven["python"]).contains(f"{SUPPORTED[-1]}.0")
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    assert SpecifierSet(requires) == SpecifierSet(proven["python"])
