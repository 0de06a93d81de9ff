"""``lint-imports`` (import-linter) on this checkout: the layers contract of ``pyproject.toml``.

import-linter finds the ``dtf`` package on the import path; this puts ``src/`` first, so that it
reads this checkout's files whether or not the course is installed (an installed copy
may be older), and keeps no cache folder. Exit status: 0 when every contract is kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None, src: Path = ROOT / "src") -> int:
    """Check the contracts of ``--config FILE`` (default: ``pyproject.toml`` in the current
    folder) against the package under ``src``; ``--contract ID`` limits it, ``--verbose``."""
    import argparse

    from importlinter.cli import lint_imports

    parser = argparse.ArgumentParser(prog="python -m tools.lint_imports")
    parser.add_argument("--config", help="a file with the contracts (default: pyproject.toml)")
    parser.add_argument("--contract", action="append", default=[], help="check only this id")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--src", type=Path, default=src, help="the folder that holds dtf/")
    args = parser.parse_args(argv)
    src = args.src.resolve()
    sys.path.insert(0, str(src))
    try:
        return lint_imports(
            config_filename=args.config,
            limit_to_contracts=tuple(args.contract),
            no_cache=True,
            no_logo=True,
            verbose=args.verbose,
        )
    finally:
        sys.path.remove(str(src))


if __name__ == "__main__":
    sys.exit(main())
