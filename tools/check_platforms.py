"""Check that the pinned requirements install on every platform and Python the README names.

For each (platform, Python, requirements file) the README names, runs uv's resolver for that
target (``uv pip compile --python-platform P --python-version V --only-binary :all:``), which
evaluates the environment markers for the target rather than for this machine and accepts only
wheels, as a workshop laptop needs. Each supported row is resolved together with
requirements-dev.txt, the test and lint tools that ``make test`` installs on top of it, so a
contributor's laptop is checked too. Combinations the README says are *not* supported (an Intel
Mac, Python 3.10 and 3.14) are resolved too and must fail: each row of the table says why it is
not supported, with the README's words, so a claim that stops being true shows up here.

    python -m tools.check_platforms                          # the whole table on stdout
    python -m tools.check_platforms --jobs 4                 # resolver runs at once (default 8)
    python -m tools.check_platforms --platform macos-arm64   # one platform only

Exit status: 0 when every supported row resolves and every unsupported row fails to resolve;
1 otherwise (including a resolver that could not reach the package index); 2 when uv is missing.
Needs uv (pinned in requirements-dev.txt) and access to the package index (uv caches it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

# Run as a file (`python tools/check_platforms.py`), not as `python -m tools.check_platforms`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.nbtools import REPO_ROOT as ROOT

# The README's reasons, word for word (tests/test_check_platforms.py checks README.md has them).
INTEL_MAC = "TensorFlow has no macOS x86-64 (Intel Mac) wheel after 2.16, and the course needs 2.21"
#: Installed on top of each platform's file by make test / check / lint (never on its own).
DEV_FILE = "requirements-dev.txt"
UNSUPPORTED_PYTHONS = {
    "3.10": ("the pinned numpy, pandas, matplotlib and ipykernel need Python 3.11 or newer"),
    "3.14": "TensorFlow 2.21 has no wheels for Python 3.14",
}


@dataclass(frozen=True)
class Platform:
    key: str
    label: str  # as the README names it
    triple: str  # uv's --python-platform
    files: tuple[str, ...]  # requirements files meant for this platform
    unsupported: str | None = None  # the README's reason, for a platform that is not supported


PLATFORMS = (
    Platform(
        "linux-x86_64",
        "Linux x86-64",
        "x86_64-unknown-linux-gnu",
        ("requirements.txt", "requirements-gpu.txt"),
    ),
    Platform("linux-aarch64", "Linux aarch64", "aarch64-unknown-linux-gnu", ("requirements.txt",)),
    Platform("windows-x86_64", "Windows x86-64", "x86_64-pc-windows-msvc", ("requirements.txt",)),
    Platform("macos-arm64", "macOS Apple silicon", "aarch64-apple-darwin", ("requirements.txt",)),
    Platform(
        "macos-x86_64",
        "macOS Intel",
        "x86_64-apple-darwin",
        ("requirements.txt",),
        unsupported=INTEL_MAC,
    ),
)


@dataclass(frozen=True)
class Combo:
    platform: Platform
    python: str
    file: str
    with_dev: bool = False  # resolved together with DEV_FILE

    @property
    def files(self) -> tuple[str, ...]:
        """The files resolved together: ``file``, and DEV_FILE on top where ``with_dev``."""
        return (self.file, DEV_FILE) if self.with_dev else (self.file,)

    @property
    def label(self) -> str:
        return " + ".join(self.files)

    @property
    def reason(self) -> str | None:
        """Why the README says this combination is not supported; None when it is."""
        return self.platform.unsupported or UNSUPPORTED_PYTHONS.get(self.python)


@dataclass(frozen=True)
class Result:
    combo: Combo
    outcome: str  # "resolves", "no solution" or "error"
    detail: str  # the TensorFlow, Keras and JAX versions picked, or the resolver's reason
    seconds: float

    @property
    def ok(self) -> bool:
        """Resolves when supported; finds no solution when not. An error is never ok."""
        expected = "no solution" if self.combo.reason else "resolves"
        return self.outcome == expected


def supported_pythons(root: Path = ROOT) -> list[str]:
    """The 3.x versions the pins install on (pyproject.toml's [tool.dtf.pins] python), oldest
    first. The package's requires-python is wider: Python 3.14 has TensorFlow 2.22 wheels,
    not 2.21 ones."""
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    match = re.search(r'^\[tool\.dtf\.pins\]\s*\npython\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if not match:
        raise ValueError(f"{root / 'pyproject.toml'}: no [tool.dtf.pins] python line")
    spec = SpecifierSet(match.group(1))
    return [f"3.{minor}" for minor in range(6, 30) if f"3.{minor}.0" in spec]


def combos(root: Path = ROOT) -> list[Combo]:
    """Every row of the table: supported Pythons on every platform and file (with DEV_FILE on
    top where the checkout has one), plus the unsupported Pythons on each supported platform's
    CPU file (alone: what fails there is TensorFlow or Python, not a test tool)."""
    pythons = supported_pythons(root)
    overlap = sorted(set(pythons) & set(UNSUPPORTED_PYTHONS))
    if overlap:
        raise ValueError(
            f"{root / 'pyproject.toml'} admits Python {overlap}, which this tool says is "
            "unsupported: update UNSUPPORTED_PYTHONS and the README together"
        )
    dev = (root / DEV_FILE).exists()
    rows = [
        Combo(p, v, f, with_dev=dev and not p.unsupported)
        for p in PLATFORMS
        for f in p.files
        for v in pythons
    ]
    rows += [
        Combo(p, v, "requirements.txt")
        for p in PLATFORMS
        if not p.unsupported
        for v in sorted(UNSUPPORTED_PYTHONS, key=lambda s: int(s.split(".")[1]))
    ]
    return rows


def find_uv() -> str | None:
    """uv's executable: the one the uv package installed beside this Python, else on PATH."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return shutil.which("uv")
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return shutil.which("uv")


def _reason(stderr: str) -> str:
    """The message of uv's error output that says why, on one line, shortened for a table cell.

    uv wraps long messages at the terminal's width (``COLUMNS``, 80 without a terminal), with
    the continuation lines indented: they are joined back before the markers are removed.
    """
    messages: list[str] = []  # each prefixed line with its indented continuation lines
    for raw in stderr.splitlines():
        line = raw.strip()
        if not line:
            continue
        if messages and raw[:1].isspace() and not line.startswith(("cause:", "╰─▶", "hint:")):
            messages[-1] += " " + line
        else:
            messages.append(line)
    for prefix in ("cause:", "╰─▶", "error:"):
        found = [m for m in messages if m.startswith(prefix)]
        if found:
            text = found[0][len(prefix) :].strip()
            break
    else:
        text = messages[-1] if messages else "no output"
    text = re.sub(r"\{[^{}]*\}", "", text)  # markers uv prints after each name
    return text if len(text) <= 200 else text[:197] + "..."


def resolve(combo: Combo, uv: str, root: Path = ROOT, timeout: float = 120) -> Result:
    """Run uv's resolver for one combination; never raises for a resolver failure."""
    cmd = [
        uv,
        "pip",
        "compile",
        *combo.files,
        "--python-platform",
        combo.platform.triple,
        "--python-version",
        combo.python,
        "--only-binary",
        ":all:",
        # Resolve for the target with this interpreter; never download another one.
        "--python",
        sys.executable,
        "--no-python-downloads",
        "--no-header",
        "--no-annotate",
        "--quiet",
    ]
    # A wide "terminal", so uv's messages arrive unwrapped (_reason copes with wrapping too).
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "1000"}
    env.pop("VIRTUAL_ENV", None)
    start = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, cwd=root, capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return Result(combo, "error", f"uv did not finish in {timeout:g} s", timeout)
    seconds = time.monotonic() - start
    if proc.returncode == 0:
        pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", proc.stdout, re.MULTILINE))
        tf = [f"{name} {pins[name]}" for name in ("tensorflow-cpu", "tensorflow") if name in pins]
        # And the Keras and JAX (notebook 15) they come with. jax is pinned for every platform,
        # so one without its wheels fails to resolve; the row names the version it gets.
        picked = tf + [f"{name} {pins[name]}" for name in ("keras", "jax") if name in pins]
        return Result(combo, "resolves", ", ".join(picked) or "no TensorFlow", seconds)
    if "No solution found" in proc.stderr:
        return Result(combo, "no solution", _reason(proc.stderr), seconds)
    return Result(combo, "error", _reason(proc.stderr or proc.stdout), seconds)


def check(rows: list[Combo], uv: str, root: Path = ROOT, jobs: int = 8) -> list[Result]:
    """Resolve every row, ``jobs`` at a time (uv spends most of its time waiting on the index)."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda combo: resolve(combo, uv, root), rows))


def table(results: list[Result]) -> str:
    """A Markdown table, one row per combination, with a verdict column."""
    lines = [
        "| Platform | Python | Files | README says | Resolver | Verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.combo
        claim = f"not supported: {c.reason}" if c.reason else "supported"
        verdict = "ok" if r.ok else "FAIL"
        lines.append(
            f"| {c.platform.label} | {c.python} | {c.label} | {claim} "
            f"| {r.outcome}: {r.detail} | {verdict} |"
        )
    return "\n".join(lines)


def summary(results: list[Result]) -> str:
    bad = [r for r in results if not r.ok]
    if not bad:
        return f"All {len(results)} combinations are as the README says."
    out = [f"{len(bad)} of {len(results)} combinations are not as the README says:"]
    for r in bad:
        c = r.combo
        if r.outcome == "error":
            what = f"the resolver failed ({r.detail}); is the package index reachable?"
        elif c.reason:
            what = "resolves, but the README says it is not supported: update both"
        else:
            what = f"does not resolve ({r.detail}): fix the pins or narrow the README's claim"
        out.append(f"  {c.platform.label}, Python {c.python}, {c.label}: {what}")
    return "\n".join(out)


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=8, help="resolver runs at once (default 8)")
    parser.add_argument(
        "--platform",
        action="append",
        choices=[p.key for p in PLATFORMS],
        help="check only this platform (repeatable; default: every platform)",
    )
    args = parser.parse_args(argv)
    uv = find_uv()
    if not uv:
        print(
            "uv not found: install the pinned one with "
            "`python -m pip install -r requirements-dev.txt` (or `make dev`)",
            file=sys.stderr,
        )
        return 2
    start = time.monotonic()
    rows = [c for c in combos(root) if not args.platform or c.platform.key in args.platform]
    results = check(rows, uv, root, args.jobs)
    print(table(results))
    print()
    print(summary(results))
    print(f"({time.monotonic() - start:.1f} s, {uv})")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
