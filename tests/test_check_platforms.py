"""tools/check_platforms.py: every platform x Python the README names resolves with uv's
resolver for that target, and the combinations the README rules out fail, with its reasons.

The resolver runs need the package index (uv caches it): about 15-30 s for the whole table."""

from __future__ import annotations

import re
import sys

import pytest

from tests.helpers import ROOT
from tools import check_platforms as cp

README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def uv():
    path = cp.find_uv()
    assert path, "uv is not installed: it is pinned in requirements-common.txt (make venv)"
    return path


@pytest.fixture(scope="module")
def results(uv):
    """The tool's whole table for this checkout, resolved once for the module."""
    return cp.check(cp.combos(), uv)


@pytest.mark.slow
def test_every_platform_and_python_the_readme_names_resolves(results):
    supported = [r for r in results if not r.combo.reason]
    failed = [r for r in supported if r.outcome != "resolves"]
    assert not failed, cp.summary(results)
    # The matrix is the README's: every supported platform, Python 3.11-3.13, GPU file on
    # Linux x86-64; and the wheel the markers pick is the one the README promises.
    seen = {(r.combo.platform.key, r.combo.python, r.combo.file) for r in supported}
    expected = {
        (p, v, "requirements.txt")
        for p in ("linux-x86_64", "linux-aarch64", "windows-x86_64", "macos-arm64")
        for v in ("3.11", "3.12", "3.13")
    } | {("linux-x86_64", v, "requirements-gpu.txt") for v in ("3.11", "3.12", "3.13")}
    assert seen == expected
    for r in supported:
        wheel = r.detail.split(",")[0]
        cpu_wheel = r.combo.platform.key in ("linux-x86_64", "windows-x86_64")
        if cpu_wheel and r.combo.file == "requirements.txt":
            assert wheel == "tensorflow-cpu 2.21.0", r
        else:
            assert wheel == "tensorflow 2.21.0", r
    for platform in cp.PLATFORMS:
        assert f"| {platform.label} |" in README, f"README's table lacks {platform.label}"


@pytest.mark.slow
def test_jax_resolves_with_tensorflow_on_every_supported_row(results):
    """Notebook 15's JAX, pinned in requirements-common.txt, installs beside TensorFlow on
    every supported platform and Python, at the pinned version (jaxlib the same)."""
    common = (ROOT / "requirements-common.txt").read_text(encoding="utf-8")
    pinned = dict(re.findall(r"^(jax|jaxlib)==(\S+)$", common, re.MULTILINE))
    assert pinned.get("jax") and pinned.get("jaxlib") == pinned["jax"], pinned
    for r in results:
        if not r.combo.reason:
            assert r.outcome == "resolves" and f"jax {pinned['jax']}" in r.detail, r


@pytest.mark.slow
def test_unsupported_combinations_are_reported_with_the_readmes_reason(results):
    """Not silently skipped: each is resolved, fails, and its row says why, in README words."""
    unsupported = [r for r in results if r.combo.reason]
    keys = {(r.combo.platform.key, r.combo.python) for r in unsupported}
    assert {("macos-x86_64", v) for v in ("3.11", "3.12", "3.13")} <= keys
    assert {("linux-x86_64", "3.10"), ("linux-x86_64", "3.14")} <= keys
    for r in unsupported:
        assert r.outcome == "no solution", cp.summary(results)
        assert r.ok
    text = cp.table(results)
    intel = [line for line in text.splitlines() if line.startswith("| macOS Intel |")]
    assert len(intel) == 3
    for line in intel:
        assert f"not supported: {cp.INTEL_MAC}" in line and line.endswith("| ok |")
        assert "tensorflow==2.21.0" in line  # the resolver's own reason: no such wheel
    reasons = [cp.INTEL_MAC, *cp.UNSUPPORTED_PYTHONS.values()]
    for reason in reasons:
        assert reason in README, f"README does not give the reason {reason!r}"


@pytest.mark.slow
def test_a_combination_that_does_not_resolve_fails_the_check(tmp_path, uv, capsys):
    """tensorflow-cpu has no macOS wheel: a requirements file that asks for it everywhere must
    make the tool fail for macOS, and say which row and what to do."""
    (tmp_path / "pyproject.toml").write_text('[tool.dtf.pins]\npython = ">=3.11,<3.12"\n')
    (tmp_path / "requirements.txt").write_text("tensorflow-cpu==2.21.0\n")
    code = cp.main(["--platform", "macos-arm64"], root=tmp_path)
    out = capsys.readouterr().out
    assert code == 1
    assert "| macOS Apple silicon | 3.11 | requirements.txt | supported | no solution:" in out
    assert "| FAIL |" in out
    assert "macOS Apple silicon, Python 3.11, requirements.txt: does not resolve" in out
    assert "narrow the README's claim" in out


def test_a_resolver_error_is_never_taken_for_the_expected_failure(tmp_path):
    """An unreachable index is not 'no solution': the row fails even where failure is expected."""
    fake = tmp_path / "uv"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "print('error: Failed to fetch: `https://pypi.org/simple/numpy/`', file=sys.stderr)\n"
        "sys.exit(2)\n"
    )
    fake.chmod(0o755)
    intel = next(p for p in cp.PLATFORMS if p.key == "macos-x86_64")
    result = cp.resolve(cp.Combo(intel, "3.11", "requirements.txt"), str(fake), ROOT)
    assert result.outcome == "error" and not result.ok
    assert "Failed to fetch" in result.detail
    assert "is the package index reachable?" in cp.summary([result])


def test_missing_uv_is_a_clear_error(monkeypatch, capsys):
    monkeypatch.setattr(cp, "find_uv", lambda: None)
    assert cp.main([]) == 2
    assert "uv not found" in capsys.readouterr().err


def test_supported_pythons_come_from_pyproject(tmp_path):
    """The pins' Pythons: [tool.dtf.pins], narrower than the package's requires-python."""
    assert cp.supported_pythons() == ["3.11", "3.12", "3.13"]
    (tmp_path / "pyproject.toml").write_text('[tool.dtf.pins]\npython = ">=3.10,<3.14"\n')
    with pytest.raises(ValueError, match="unsupported"):
        cp.combos(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.11,<3.14"\n')
    with pytest.raises(ValueError, match="no \\[tool.dtf.pins\\] python"):
        cp.supported_pythons(tmp_path)


def test_a_wrapped_resolver_message_is_joined_back():
    """uv wraps its messages at the terminal width (80 columns in CI, without a terminal):
    the reason in the table is the whole message, markers removed, not its first line."""
    stderr = (
        "error: No solution found when resolving dependencies\n"
        "  cause: Because tensorflow{(platform_machine != 'x86_64' and sys_platform\n"
        "         == 'linux') or (sys_platform != 'linux')}==2.21.0 has no wheels with a\n"
        "         matching platform tag and you require tensorflow{(sys_platform !=\n"
        "         'linux')}==2.21.0, we can conclude that your requirements are unsatisfiable.\n"
        "\n"
        "hint: Wheels are available for `tensorflow` (v2.21.0) on the following platforms\n"
    )
    reason = cp._reason(stderr)
    assert reason.startswith("Because tensorflow==2.21.0 has no wheels with a matching")
    assert "{" not in reason and "hint" not in reason
    assert cp._reason("") == "no output"
    assert cp._reason("error: Failed to fetch: `https://x`\n") == "Failed to fetch: `https://x`"


@pytest.mark.slow
def test_the_table_does_not_depend_on_the_terminal_width(uv, monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    intel = next(p for p in cp.PLATFORMS if p.key == "macos-x86_64")
    result = cp.resolve(cp.Combo(intel, "3.11", "requirements.txt"), uv, ROOT)
    assert result.outcome == "no solution" and "tensorflow==2.21.0 has no wheels" in result.detail
