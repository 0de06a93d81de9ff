"""One session per stack the course is proven on (`nox -l` lists them; README, "Other stacks").

    nox -s pins      the exact pins a workshop laptop installs (requirements*.txt): every test,
                     as `make check` runs them
    nox -s hosted    Google Colab's published versions (constraints/colab.txt; Kaggle builds
                     on Colab's image): every notebook and lab solution, the stored-claims
                     tests and a simulated hosted runtime that runs the setup cell
    nox -s next      the newest TensorFlow pre-release with keras-nightly in place of keras:
                     every notebook and lab solution and the stored-claims tests

Each session makes its own virtual environment under .nox/ (`-R` reuses it without
reinstalling). Arguments after `--` go to pytest (pins) or to tools.run_notebooks (hosted and
next), e.g. `nox -s hosted -- -k 03`. The Python is the one nox runs under; CI picks it with
setup-python (hosted on 3.13, as Colab).
"""

from __future__ import annotations

import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # nox imports this file by path: make `tools` importable
from tools.versions import tensorflow_wheel  # noqa: E402 (standard library only)

nox.options.sessions = ["pins"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_external_run = True

#: The test tools, from requirements-dev.txt (their exact pins), without the linters.
TEST_TOOLS = ("pytest", "pytest-xdist", "pytest-timeout", "nbval", "packaging")
#: What the headless runner needs beside a notebook's own imports.
RUNNER = ("papermill",)
#: The tests that read stored outputs and claims, run in every stack.
CLAIM_TESTS = ("tests/test_stored_claims.py",)
PYTEST = ("python", "-m", "pytest", "-p", "no:cacheprovider")


def _pins(path: str, names: tuple[str, ...]) -> list[str]:
    """The `name==version` lines of `path` for `names` (the pins stay in one file)."""
    wanted = {n.lower() for n in names}
    lines = (ROOT / path).read_text().splitlines()
    found = [ln.split(";")[0].strip() for ln in lines if ln.split("==")[0].lower() in wanted]
    missing = wanted - {ln.split("==")[0].lower() for ln in found}
    if missing:
        raise SystemExit(f"{path} pins none of {sorted(missing)}: add them there")
    return found


def _run_course(session: nox.Session, name: str) -> None:
    """Every notebook and lab solution headless (report in build/NAME/), then the claims."""
    out = f"build/{name}"
    session.run(
        "python",
        "-m",
        "tools.run_notebooks",
        "--output-dir",
        f"{out}/executed",
        "--report-dir",
        out,
        *session.posargs,
    )
    session.run(*PYTEST, "-n", "2", *CLAIM_TESTS)


@nox.session
def pins(session: nox.Session) -> None:
    """The workshop pins: every test (make check's and make counts' suites)."""
    session.install("-r", "requirements.txt", "-r", "requirements-dev.txt", "-e", ".")
    session.run(
        *PYTEST,
        *("-n", "3", "--dist", "loadgroup", "--no-loadscope-reorder", "-m", "not hosted"),
        *session.posargs,
    )


@nox.session
def hosted(session: nox.Session) -> None:
    """Colab's versions: the notebooks, the labs, the claims and the simulated hosted runtime."""
    constraints = ("-c", "constraints/colab.txt")
    # The runtime's own stack first, exactly as Colab ships it ...
    session.install(*constraints, tensorflow_wheel(), "keras", "jax", "jaxlib", "ipykernel")
    # tf_keras requires `tensorflow`, which would install the full wheel beside tensorflow-cpu.
    session.install(*constraints, "--no-deps", "tf_keras")
    # ... then the course's own requirements (the `hosted` extra), held to Colab's versions
    # where Colab has the package, the course package without its pins, and the test tools.
    session.install(*constraints, "-e", ".[hosted]")
    session.install(*constraints, *RUNNER, *_pins("requirements-dev.txt", TEST_TOOLS))
    session.run("python", "-m", "tools.versions")
    _run_course(session, "hosted")
    session.run(*PYTEST, "-m", "hosted", "tests/test_hosted.py")


@nox.session
def next(session: nox.Session) -> None:  # noqa: A001 - the session's name on the command line
    """The newest TensorFlow pre-release and keras-nightly: the notebooks, labs and claims."""
    # requirements-common.txt, not requirements.txt: TensorFlow comes from the pre-release
    # (on Python 3.14, where the pinned 2.21 has no wheels, too). The whole dev file: the
    # weekly job also runs the whole suite on this stack.
    session.install("-r", "requirements-common.txt", "-r", "requirements-dev.txt")
    # keras and keras-nightly both own the `keras` module: remove keras before its nightly
    # is installed, or uninstalling it later would delete the nightly's files.
    session.run_install("python", "-m", "pip", "uninstall", "--yes", "keras")
    session.install("--pre", "--upgrade", tensorflow_wheel(), "keras-nightly")
    session.install("--no-deps", "-e", ".")
    session.run("python", "-m", "tools.versions", "--require", "keras-nightly")
    _run_course(session, "next")
