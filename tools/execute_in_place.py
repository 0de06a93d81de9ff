"""Re-execute tutorial notebooks in place so their stored outputs are fresh (``make outputs``).

Usage (from the repository root; ``python tools/execute_in_place.py`` works too)::

    python -m tools.execute_in_place [PATH ...] [--timeout S]

Notebooks run one after the other, in order (default: ``notebooks/*.ipynb`` sorted), each
top to bottom in a fresh ``python3`` kernel with default parameters and the notebook's folder
as working directory, by the course's one runner (:func:`tools.nbrun.execute`). Outputs and
execution counts are cleared first and volatile metadata (cell timings, papermill and widget
state) removed afterwards, so that re-running on unchanged code gives a minimal diff. A
notebook is replaced only after it ran without error; the first failure stops the run with
exit status 1 and leaves that file untouched.

Exit status: 0 all executed, 1 a notebook failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Run as a file (`python tools/execute_in_place.py`), not as `python -m tools.execute_in_place`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import nbrun, nbtools
from tools.nbtools import UsageError, display_path, say, say_start

DEFAULT_GLOBS = ("notebooks/*.ipynb",)
KERNEL = "python3"
# Cell metadata that changes on every run without the notebook changing.
VOLATILE_CELL_KEYS = ("execution", "papermill", "ExecuteTime")
VOLATILE_NB_KEYS = ("papermill", "widgets")


#: The start of dtf.timing's load line (a copy: tools do not import the course package).
LOAD_LINE = "machine load before timing:"


class NotebookFailed(Exception):
    """A cell raised, timed out or the kernel died; the notebook file was left unchanged."""

    def __init__(self, name: str, cell_index: int | None, error: str) -> None:
        where = f"cell index {cell_index}" if cell_index is not None else "kernel start"
        super().__init__(f"{name} failed at {where}: {error}")
        self.cell_index = cell_index
        self.error = error


def discover(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Notebooks to execute: ``paths`` expanded, or the tutorials in ``notebooks/``."""
    return nbtools.discover(paths, DEFAULT_GLOBS)


def strip_volatile(nb: Any) -> None:
    """Remove metadata that differs between runs (timings, papermill, widget state)."""
    for key in VOLATILE_NB_KEYS:
        nb.metadata.pop(key, None)
    for cell in nb.cells:
        for key in VOLATILE_CELL_KEYS:
            cell.metadata.pop(key, None)


def execute_notebook(path: Path, *, timeout: float = 300, name: str | None = None) -> int:
    """Execute ``path`` in a fresh kernel and replace the file; returns the code cells run.

    Raises :class:`NotebookFailed` (file untouched) if execution fails. Processes the
    notebook left running are stopped and reported on stderr (by the runner).
    """
    name = name or display_path(path)
    try:
        # No metrics file: stored outputs should be what a student sees in JupyterLab.
        run = nbrun.execute(path, timeout=timeout, kernel=KERNEL, record_timing=False)
    except nbrun.NotebookError as exc:
        raise NotebookFailed(name, exc.cell_index, exc.message) from exc
    busy = busy_timing(run.nb)
    if busy:
        raise NotebookFailed(
            name,
            busy[0],
            f"its timings ran on a busy machine ({busy[1]}): stored timings must come from a "
            "quiet one. Stop what else is running, wait a minute and run it again",
        )
    strip_volatile(run.nb)
    nbrun.save(run.nb, path)  # written beside the file and renamed over it
    return run.code_cells


def busy_timing(nb: Any) -> tuple[int, str] | None:
    """(cell index, load) of a timing notebook that ran on a busy machine, else None.

    Timing lessons print :func:`dtf.timing.machine_load` before they time anything; its line
    says BUSY when other programs used more than a quarter of the cores' time just before.
    """
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            for line in str(out.get("text", "")).splitlines():
                if line.startswith(LOAD_LINE) and "BUSY" in line:
                    return index, "load " + line[len(LOAD_LINE) :].split("(")[0].strip()
    return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.execute_in_place",
        description="Re-execute notebooks in place, in order, with default parameters.",
    )
    parser.add_argument("paths", nargs="*", help="notebooks or folders (default: notebooks/)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="limit per cell, s (default: 300)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if not args.timeout > 0:
            raise UsageError(f"--timeout must be > 0, got {args.timeout:g}")
        notebooks = discover(args.paths)
        if not notebooks:
            raise UsageError("no notebooks found in " + (" ".join(args.paths) or "notebooks/"))
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        say(f"{parser.prog}: error: {exc}", err=True)
        return 2

    base = nbtools.common_parent(notebooks)
    start = time.monotonic()
    for index, path in enumerate(notebooks, start=1):
        name = display_path(path, base)
        say_start(index, len(notebooks), name)
        t0 = time.monotonic()
        try:
            cells = execute_notebook(path, timeout=args.timeout, name=name)
        except NotebookFailed as exc:
            say(f"  FAILED: {exc}", err=True)
            say(f"  {name} left unchanged", err=True)
            skipped = len(notebooks) - index
            if skipped:
                say(f"stopped: {skipped} notebook(s) after it were not executed", err=True)
            return 1
        say(f"  done in {time.monotonic() - t0:.1f} s, {cells} code cells")
    say(f"{len(notebooks)} notebook(s) executed in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
