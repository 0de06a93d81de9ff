"""The dev container gives every learner notebook 13's full lesson, and installs the course the
way the Makefile does.

CI cannot build it (no step builds containers, and a build downloads the base image), so this
checks its configuration against what it must agree with: the Makefile's install (the
``postCreateCommand`` is a ``make`` target that creates the Makefile's venv and installs the
course's pins), the capabilities ``dtf.netns`` needs
(:data:`dtf.netns.REQUIRED_CAPABILITIES`: when the code needs another one, this fails), the
``ip`` command those hosts are made with, and the README's and the skip lines' pointers to it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess

import pytest

from dtf import netns
from tests.helpers import ROOT

FOLDER = ROOT / ".devcontainer"
DOCKERFILE = (FOLDER / "Dockerfile").read_text(encoding="utf-8")


def strip_jsonc(text: str) -> str:
    """JSON with comments (``//``, ``/* */``) and trailing commas, as devcontainer.json allows
    it, made plain JSON; comment markers inside strings are kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':  # a string, escapes included, copied as it is
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i) if "\n" in text[i:] else n
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            assert end >= 0, "a /* comment is never closed"
            i = end + 2
        else:
            out.append(ch)
            i += 1
    plain = "".join(out)
    # Trailing commas: the strings are intact here, so mask them before looking for ", }".
    masked = re.sub(r'"(?:\\.|[^"\\])*"', lambda m: "_" * len(m.group()), plain)
    drop = {m.start() for m in re.finditer(r",(?=\s*[}\]])", masked)}
    return "".join(c for k, c in enumerate(plain) if k not in drop)


CONFIG = json.loads(strip_jsonc((FOLDER / "devcontainer.json").read_text(encoding="utf-8")))


def make(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def makefile_value(name: str) -> str:
    """A variable's value as make computes it (defaults, not GPU=1)."""
    return make(f"--eval=_value_of: ; @echo $({name})", "_value_of").strip()


def make_commands() -> list[list[str]]:
    """The ``make`` invocations in postCreateCommand (a string or a list of argv)."""
    command = CONFIG["postCreateCommand"]
    parts = [command] if isinstance(command, list) else re.split(r"&&|;", command)
    argvs = [part if isinstance(part, list) else shlex.split(part) for part in parts]
    return [argv[1:] for argv in argvs if argv and argv[0] == "make"]


def test_jsonc_is_read_as_vs_code_reads_it():
    text = '{"a": "http://x/*y*/", // c\n /* b */ "b": [1, 2,],}'
    assert json.loads(strip_jsonc(text)) == {"a": "http://x/*y*/", "b": [1, 2]}


needs_make = pytest.mark.skipif(not shutil.which("make"), reason="make is not installed")


@needs_make
def test_post_create_runs_the_makefiles_own_install():
    """postCreateCommand is one make target that creates the Makefile's venv and installs
    requirements.txt and the package into it, as `make venv` on a laptop does."""
    (args,) = make_commands()
    # The image's Python makes the venv (tests/test_environment_files.py checks its version).
    assert not any(a.startswith("PYTHON=") for a in args), args
    targets = [a for a in args if "=" not in a and not a.startswith("-")]
    assert targets and all(
        re.search(rf"^\.PHONY:.*\b{re.escape(t)}\b", (ROOT / "Makefile").read_text(), re.M)
        for t in targets
    ), targets
    probe = "build/devcontainer-probe-venv"  # never created: make -n runs nothing
    commands = make("-n", *args, f"VENV={probe}")
    assert f"-m venv {probe}" in commands
    assert re.search(
        rf"^{re.escape(probe)}/bin/python -m pip install .*-r requirements\.txt "
        r".*-e \.",
        commands,
        re.M,
    ), commands


@needs_make
def test_vs_code_uses_the_venv_the_install_makes():
    settings = CONFIG["customizations"]["vscode"]["settings"]
    venv = makefile_value("VENV")
    path = settings["python.defaultInterpreterPath"]
    assert path == f"${{containerWorkspaceFolder}}/{venv}/bin/python", path
    extensions = CONFIG["customizations"]["vscode"]["extensions"]
    assert {"ms-python.python", "ms-toolsai.jupyter"} <= set(extensions)
    assert 8888 in CONFIG["forwardPorts"]  # make lab's JupyterLab


def test_it_grants_exactly_the_capabilities_the_namespace_code_needs():
    run_args = CONFIG["runArgs"]
    added = {a.split("=", 1)[1] for a in run_args if a.startswith("--cap-add=")}
    added |= set(CONFIG.get("capAdd", []))
    assert added == {c.removeprefix("CAP_") for c in netns.REQUIRED_CAPABILITIES}
    assert not CONFIG.get("privileged") and "--privileged" not in run_args
    # Docker's default AppArmor profile denies `ip netns add`'s mount even with SYS_ADMIN.
    options = [a.split("=", 1)[1] for a in run_args if a.startswith("--security-opt=")]
    assert "apparmor=unconfined" in options + CONFIG.get("securityOpt", [])
    # Added capabilities reach root's processes only: the kernel must run as root.
    assert CONFIG.get("remoteUser", CONFIG.get("containerUser")) == "root"


def test_the_image_has_ip_and_jupyterlab_may_run_as_root():
    installs = " ".join(re.findall(r"apt-get install ([^&\n]*)", DOCKERFILE))
    assert {"iproute2", "make"} <= set(installs.split()), installs
    assert '{"ServerApp": {"allow_root": true}}' in DOCKERFILE


def test_the_skip_lines_and_the_readme_point_to_it():
    assert "dev container" in netns.FULL_LESSON and "README.md, Installing" in netns.FULL_LESSON
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    installing = readme.split("\n## Installing\n", 1)[1].split("\n## ", 1)[0]
    assert ".devcontainer/" in installing and "dev container" in installing
    for capability in netns.REQUIRED_CAPABILITIES:
        assert capability in installing
