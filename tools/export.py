"""Write the notebook cells marked for export into the course package (d2l's ``#@save``, as tags).

A lesson's TensorFlow stands in the notebook, where the learner reads, runs and changes it.
When the package needs the same code (a checker, a test, another notebook, a worker process),
the notebook stays the source: its code cell carries the tag ``export:PATH`` (``PATH``
relative to ``src/``, e.g. ``export:dtf/multiworker/program.py``) and this tool writes every
such cell, in notebook order, into that file under a header that says where the code comes
from. A ``%%writefile`` line (the notebook writing a program to disk to run it as a process)
is dropped; any other cell magic is refused. One file has one source notebook.

    python -m tools.export            # rewrite the exported files
    python -m tools.export --check    # exit 1 and name the stale files (tests/test_export.py)

Edit the notebook, never the exported file: ``make export`` (or the command above) rewrites it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

# Run as a file (`python tools/export.py`), not as `python -m tools.export`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.nbtools import REPO_ROOT

TAG = "export:"
HEADER = (
    "# GENERATED from {source} by `python -m tools.export` (`make export`): do not edit here.\n"
    "# The notebook's cells tagged `export:{target}` are the source: change them there, run\n"
    "# the cells, then the command above; tests/test_export.py fails while this file is stale.\n"
)
_WRITEFILE = re.compile(r"^%%writefile(\s+-a)?\s+\S+\s*$")
_TARGET = re.compile(r"^[A-Za-z0-9_]+(/[A-Za-z0-9_]+)*\.py$")


class ExportError(Exception):
    """A malformed export tag or cell; the message names the notebook and the cell."""


def cell_code(source: str, where: str) -> str:
    """The Python of one exported cell: a leading ``%%writefile`` line dropped, no other magic."""
    lines = source.strip("\n").splitlines()
    if lines and lines[0].startswith("%%"):
        if not _WRITEFILE.match(lines[0]):
            raise ExportError(f"{where}: only %%writefile may start an exported cell")
        lines = lines[1:]
    if any(line.lstrip().startswith(("%", "!")) for line in lines):
        raise ExportError(f"{where}: an exported cell cannot hold IPython magics or shell lines")
    return "\n".join(lines).strip("\n")


def exports(root: Path = REPO_ROOT) -> dict[Path, tuple[Path, list[str]]]:
    """{target file: (source notebook, [cell code, ...])} for every ``export:`` tag under
    ``notebooks/`` (tutorials are the lessons; labs are generated and export nothing)."""
    import nbformat

    found: dict[Path, tuple[Path, list[str]]] = {}
    for nb_path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(nb_path, as_version=4)
        for index, cell in enumerate(nb.cells):
            tags = [t for t in cell.get("metadata", {}).get("tags", []) if t.startswith(TAG)]
            if not tags:
                continue
            where = f"{nb_path.relative_to(root)} cell {index}"
            if cell.cell_type != "code" or len(tags) != 1:
                raise ExportError(f"{where}: one export tag, on a code cell")
            name = tags[0][len(TAG) :]
            if not _TARGET.match(name) or not name.startswith("dtf/"):
                raise ExportError(f"{where}: {tags[0]!r} must name a .py file under dtf/")
            target = root / "src" / name
            source, cells = found.setdefault(target, (nb_path, []))
            if source != nb_path:
                raise ExportError(
                    f"{where}: {name} is already exported from {source.relative_to(root)};"
                    " one file, one source notebook"
                )
            cells.append(cell_code(cell.source, where))
    return found


def render(root: Path, target: Path, source: Path, cells: list[str]) -> str:
    name = target.relative_to(root / "src").as_posix()
    header = HEADER.format(source=source.relative_to(root).as_posix(), target=name)
    return header + "\n" + "\n\n\n".join(c for c in cells if c) + "\n"


def stale(root: Path = REPO_ROOT) -> list[Path]:
    """The exported files whose text differs from what their notebook would write."""
    old = []
    for target, (source, cells) in exports(root).items():
        text = render(root, target, source, cells)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            old.append(target)
    return old


def write(root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite every stale exported file; return those written."""
    written = []
    for target, (source, cells) in exports(root).items():
        text = render(root, target, source, cells)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if an exported file is stale")
    args = parser.parse_args(argv)
    try:
        if args.check:
            old = stale()
            for path in old:
                print(f"stale: {path.relative_to(REPO_ROOT)} (run: python -m tools.export)")
            return 1 if old else 0
        for path in write():
            print(f"wrote {path.relative_to(REPO_ROOT)}")
    except ExportError as exc:
        print(f"export: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
