"""The stack this Python runs: which distribution provides TensorFlow and Keras, at which version.

    python -m tools.versions                        # one line per package, and the verdict
    python -m tools.versions --require keras-nightly   # exit 1 unless that distribution is in

Two distributions can own one module: `tensorflow` or `tensorflow-cpu` (or `tf-nightly`) for
`tensorflow`, `keras` or `keras-nightly` for `keras`. Installed side by side, the one unpacked last
wins file by file, so this tool refuses a stack with two owners of one module. The noxfile prints
it at the start of every session; the weekly report (tools/claims_report.py) names the same
distributions.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import platform
import re
import sys

#: Each module the course depends on, with the distributions that can provide it.
OWNERS: dict[str, tuple[str, ...]] = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu"),
    "keras": ("keras", "keras-nightly"),
    "tf_keras": ("tf-keras", "tf-keras-nightly"),
    "jax": ("jax",),
    "numpy": ("numpy",),
    "pandas": ("pandas",),
}


def canonical(name: str) -> str:
    """A distribution's name as pip compares them: `tf_keras` and `TF-Keras` are `tf-keras`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def tensorflow_wheel() -> str:
    """The CPU TensorFlow distribution for this machine: `tensorflow-cpu` where that wheel
    exists (Linux x86-64, Windows), else `tensorflow` (the CPU build there)."""
    machine = platform.machine().lower()
    if (sys.platform == "linux" and machine in ("x86_64", "amd64")) or sys.platform == "win32":
        return "tensorflow-cpu"
    return "tensorflow"


def installed(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def providers(module: str) -> list[tuple[str, str]]:
    """(distribution, version) of every installed distribution that provides `module`."""
    found = [(d, installed(d)) for d in OWNERS[module]]
    return [(d, v) for d, v in found if v is not None]


def stack() -> list[tuple[str, str]]:
    """(module, "dist version") for every module; raises when two distributions own one."""
    rows = [("python", platform.python_version())]
    for module in OWNERS:
        found = providers(module)
        if len(found) > 1:
            names = " and ".join(f"{d} {v}" for d, v in found)
            raise SystemExit(
                f"{names} are both installed and both own the `{module}` module: uninstall all "
                "of them, then install the one you want"
            )
        rows.append((module, f"{found[0][0]} {found[0][1]}" if found else "not installed"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.versions", description=__doc__)
    parser.add_argument("--require", action="append", default=[], metavar="DIST")
    args = parser.parse_args(argv)
    for module, text in stack():
        print(f"{module:<11} {text}")
    missing = [d for d in args.require if installed(d) is None]
    if missing:
        print(f"error: {', '.join(missing)} not installed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
