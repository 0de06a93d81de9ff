"""Install the course into a hosted runtime (Google Colab, Kaggle) without touching its stack.

The first code cell of every notebook and lab runs this file in a hosted runtime, after it has
fetched the course; on a laptop that cell does nothing. It

1. refuses a runtime without TensorFlow (the course never installs a second one: Colab's
   `tensorflow` and the course's `tensorflow-cpu` would both own the `tensorflow` module);
2. installs only those of the course's requirements (pyproject.toml: `dependencies` and the
   `hosted` extra) that the runtime lacks, with every distribution the runtime already has
   held at its version (a constraints file), so nothing is upgraded or downgraded;
3. installs the course package itself with `--no-deps`, editable, so that the worker
   processes the notebooks start import it too.

Standard library only (with tools/versions.py): it runs under whatever Python the runtime
has (3.11 or newer).
"""

from __future__ import annotations

import importlib.metadata as md
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

# Run as a file from the fetched course (`python tools/hosted_setup.py`): put the course's
# root first on the import path, so that `tools` below is its package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.versions import OWNERS, canonical  # noqa: E402 (standard library only, too)

ROOT = Path(__file__).resolve().parent.parent

OWN = "dtf-hands-on"
TENSORFLOW, KERAS = OWNERS["tensorflow"], OWNERS["keras"]


def requirements(root: Path = ROOT) -> list[str]:
    """The course's requirements for a hosted runtime: dependencies + the `hosted` extra."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["hosted"]]


def installed() -> dict[str, str]:
    """Every installed distribution's canonical name and version (the first one found)."""
    found: dict[str, str] = {}
    for dist in md.distributions():
        name = dist.metadata["Name"]
        if name and canonical(name) not in found:
            found[canonical(name)] = dist.version
    return found


def lacking(reqs: list[str], have: dict[str, str]) -> list[str]:
    """The requirements whose distribution is not installed at all (any version counts)."""
    names = [re.split(r"[^A-Za-z0-9._-]", r, maxsplit=1)[0] for r in reqs]  # "a==1" -> "a"
    return [r for r, name in zip(reqs, names, strict=True) if canonical(name) not in have]


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True)
    if proc.returncode:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(
            f"Installing the course failed (pip install {' '.join(args)}): see pip's message "
            "above. On Kaggle, switch Internet on (Settings, Internet) and run the cell again."
        )


def main() -> int:
    have = installed()
    tensorflow = [f"{d} {have[d]}" for d in TENSORFLOW if d in have]
    if not tensorflow:
        raise SystemExit(
            "This runtime has no TensorFlow. The hosted setup uses the runtime's own TensorFlow "
            "and never installs one: pick a runtime that has it (Colab and Kaggle do), or follow "
            "the README's quick start on your own machine."
        )
    need = lacking(requirements(), have)
    if need:
        frozen = "\n".join(f"{n}=={v}" for n, v in sorted(have.items()) if n != OWN)
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(frozen + "\n")
        try:
            pip(*need, "--constraint", f.name)
        finally:
            Path(f.name).unlink()
    pip("--no-deps", "--editable", str(ROOT))
    keras = [f"{d} {have[d]}" for d in KERAS if d in have]
    print(
        f"Course ready in {ROOT}. Added: {', '.join(need) or 'nothing'}. "
        f"The runtime's own: {', '.join(tensorflow + keras)}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
