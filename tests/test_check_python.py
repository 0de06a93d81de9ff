"""tools/check_python.py: the message make prints for an interpreter that cannot install the
pins, tested without installing another Python: through its function with the version and
platform as inputs, and as a script with a supported range that excludes this interpreter.
(tests/test_environment_files.py also runs it from `make venv` with a fake interpreter.)"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tools import check_python as cp

SCRIPT = ROOT / "tools" / "check_python.py"
HINT = "Install Python 3.11 to 3.13 and name it, e.g. make PYTHON=python3.11 run."


def message(version, system="linux", machine="x86_64", hint=HINT):
    return cp.problem(version, system, machine, "python3", "/usr/bin/python3", "3.11", "3.13", hint)


@pytest.mark.parametrize("version", [(3, 11, 0), (3, 12, 5), (3, 13, 9)])
def test_a_supported_python_passes(version):
    assert message(version) is None
    assert message(version, "darwin", "arm64") is None  # Apple silicon
    assert message(version, "win32", "AMD64") is None


@pytest.mark.parametrize("version", [(2, 7, 18), (3, 9, 18), (3, 10, 12), (3, 14, 0)])
def test_an_unsupported_version_is_named_with_what_to_do(version):
    text = message(version)
    shown = ".".join(map(str, version))
    assert text == (
        f"make: python3 (/usr/bin/python3) is Python {shown}, which this course does not "
        "support: it needs Python 3.11 to 3.13 (TensorFlow 2.21 and the pinned packages have no "
        f"wheels for other versions). {HINT}"
    )
    assert "\n" not in text


def test_an_intel_mac_is_told_why_and_what_to_use():
    text = message((3, 11, 9), "darwin", "x86_64")
    assert text.startswith("make: python3 (/usr/bin/python3) is Python 3.11.9 for Intel (x86-64)")
    assert cp.INTEL_MAC in text and "arm64 Python" in text and "Rosetta" in text
    assert "README.md, Installing" in text
    # The version comes first: an old Python on an Intel Mac is told about the version.
    assert "does not support" in message((3, 10, 1), "darwin", "x86_64")


def test_the_intel_mac_reason_is_the_one_the_platform_check_and_readme_give():
    from tools import check_platforms

    assert cp.INTEL_MAC == check_platforms.INTEL_MAC
    assert cp.INTEL_MAC in (ROOT / "README.md").read_text(encoding="utf-8")


def run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=30
    )


def test_the_script_passes_this_interpreter_and_refuses_it_outside_the_range():
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"
    ok = run("python3", this, this, HINT)
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")
    older = f"3.{sys.version_info[1] - 2}"
    refused = run("python3", older, older, HINT)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1  # one line
    assert f"python3 ({sys.executable}) is Python {this}." in refused.stderr
    assert f"it needs Python {older} to {older}" in refused.stderr and HINT in refused.stderr
    usage = run("python3")
    assert usage.returncode == 2 and "usage" in usage.stderr


# Syntax that Python 2.7 (and 3.0-3.5) cannot parse: the script must run under the very
# interpreters it refuses, or they would print a SyntaxError instead of its message.
NEWER_SYNTAX = (
    ast.JoinedStr,  # f-strings (3.6)
    ast.AnnAssign,  # x: int = 1 (3.6)
    ast.NamedExpr,  # := (3.8)
    ast.AsyncFunctionDef,
    ast.Await,
    ast.Nonlocal,  # 3.0
    ast.YieldFrom,  # 3.3
    ast.Match,  # 3.10
)


def test_the_script_uses_only_syntax_python_2_7_parses():
    source = SCRIPT.read_text(encoding="ascii")  # also: no non-ASCII (Python 2 needs a coding line)
    tree = ast.parse(source)
    for node in ast.walk(tree):
        assert not isinstance(node, NEWER_SYNTAX), f"line {node.lineno}: {type(node).__name__}"
        if isinstance(node, ast.FunctionDef):
            args = node.args
            assert node.returns is None and not args.kwonlyargs and not args.posonlyargs
            assert all(a.annotation is None for a in args.args), node.name
        if isinstance(node, ast.Call):
            starred = [a for a in node.args if isinstance(a, ast.Starred)]
            assert not starred or node.args[-1] is starred[0], "f(*a, b) needs Python 3.5"
        if isinstance(node, ast.ImportFrom):
            assert node.module != "__future__" or all(
                a.name in ("print_function", "division", "absolute_import") for a in node.names
            )
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes):
            raise AssertionError("bytes literals differ between Python 2 and 3")
    assert "print(" not in source or "print_function" in source
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert modules <= {"platform", "sys"}, "only modules every Python has"
