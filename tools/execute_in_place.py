"""Re-execute tutorial notebooks in place so their stored outputs are fresh (``make outputs``).

Usage (from the repository root; ``python tools/execute_in_place.py`` works too)::

    python -m tools.execute_in_place [PATH ...] [--timeout S]

Notebooks run one after the other, in order (default: ``notebooks/*.ipynb`` sorted), each
top to bottom in a fresh ``python3`` kernel with default parameters and the notebook's folder
as working directory. Outputs and execution counts are cleared first and volatile metadata
(cell timings, papermill and widget state) removed afterwards, so that re-running on
unchanged code gives a minimal diff. A notebook is replaced only after it ran without error;
the first failure stops the run with exit status 1 and leaves that file untouched.

Exit status: 0 all executed, 1 a notebook failed, 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Run as a file (`python tools/execute_in_place.py`), not as `python -m tools.execute_in_place`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import nbtools
from tools.nbtools import UsageError, display_path, error_line, say, say_start

DEFAULT_GLOBS = ("notebooks/*.ipynb",)
KERNEL = "python3"
# Cell metadata that changes on every run without the notebook changing.
VOLATILE_CELL_KEYS = ("execution", "papermill", "ExecuteTime")
VOLATILE_NB_KEYS = ("papermill", "widgets")


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


def clear_outputs(nb: Any) -> None:
    """Drop outputs and execution counts so nothing from an earlier run survives."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    strip_volatile(nb)


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
    notebook left running are stopped and reported on stderr.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    name = name or display_path(path)
    nb = nbformat.read(path, as_version=4)
    clear_outputs(nb)
    current: dict[str, int | None] = {"index": None}

    def on_cell_execute(cell: Any, cell_index: int) -> None:
        current["index"] = cell_index

    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=KERNEL,
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,
        on_cell_execute=on_cell_execute,
    )
    token = nbtools.new_run_token()
    # The metrics file is unset: stored outputs should be what a student sees in JupyterLab.
    env = nbtools.child_env(token, metrics_file=None)
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        raise NotebookFailed(name, current["index"], f"{exc.ename}: {exc.evalue}") from exc
    except Exception as exc:  # cell timeout, dead kernel, kernel failed to start
        raise NotebookFailed(name, current["index"], error_line(exc)) from exc
    finally:
        for leftover in nbtools.kill_leftovers(token):
            say(f"  warning: stopped leftover processes: {leftover}", err=True)
    strip_volatile(nb)
    _replace(path, nb)
    return client.code_cells_executed


def _replace(path: Path, nb: Any) -> None:
    """Write ``nb`` next to ``path`` and rename it over, so a crash never leaves half a file."""
    import nbformat

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            nbformat.write(nb, fh)
        shutil.copymode(path, tmp)  # mkstemp creates 0600 files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
