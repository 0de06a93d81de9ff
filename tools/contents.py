"""Generate the contents table (README) and the prev | contents | next line of each notebook.

Titles come from each notebook's first heading (``# NN · Title``), so renaming a notebook
or adding one needs only ``python tools/contents.py``. The generated parts sit between
marker comments, so running it again changes nothing (idempotent); ``--check`` exits 1
when something is out of date (the structure tests use it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NAV_MARK = "<!--navigation-->"
START, END = "<!-- contents:start -->", "<!-- contents:end -->"
TITLE = re.compile(r"^#\s+(?P<num>\d{2})\s+·\s+(?P<title>.+?)\s*$", re.M)


def title_of(path: Path) -> tuple[str, str]:
    """``("03", "Manual placement and towers")`` from the notebook's first cell."""
    nb = nbformat.read(path, as_version=4)
    m = TITLE.search(nb.cells[0].source) if nb.cells else None
    if not m:
        raise SystemExit(f"{path}: the first cell must start with '# NN · Title'")
    return m["num"], m["title"]


def tutorials(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def labs(root: Path = ROOT) -> list[Path]:
    """Student labs (generated from labs/solutions; they link back to their tutorial)."""
    return sorted((root / "labs").glob("[0-9][0-9]_*_lab.ipynb"))


def nav_line(paths: list[Path], i: int, contents_link: str) -> str:
    parts = []
    if i > 0:
        num, title = title_of(paths[i - 1])
        parts.append(f"[← {num} · {title}]({paths[i - 1].name})")
    parts.append(f"[Contents]({contents_link})")
    if i + 1 < len(paths):
        num, title = title_of(paths[i + 1])
        parts.append(f"[{num} · {title} →]({paths[i + 1].name})")
    return f"{NAV_MARK}\n" + " | ".join(parts)


def _set_nav(source: str, line: str, where: str) -> str:
    """Replace the navigation block in a markdown cell, or add it at ``where``."""
    pattern = re.compile(re.escape(NAV_MARK) + r"\n[^\n]*")
    if NAV_MARK in source:
        return pattern.sub(line.replace("\\", "\\\\"), source, count=1)
    return f"{source.rstrip()}\n\n{line}" if where == "end" else f"{line}\n\n{source}"


def update_notebook(paths: list[Path], i: int, contents_link: str) -> bool:
    """Put the navigation line in the first cell (after the title) and in the last cell."""
    path = paths[i]
    nb = nbformat.read(path, as_version=4)
    line = nav_line(paths, i, contents_link)
    changed = False
    first = nb.cells[0]
    new = _set_nav(first.source, line, "end")
    if new != first.source:
        first.source, changed = new, True
    last = nb.cells[-1]
    if last.cell_type != "markdown" or last is first:
        raise SystemExit(f"{path}: the last cell must be a markdown cell (Summary + navigation)")
    new = _set_nav(last.source, line, "end")
    if new != last.source:
        last.source, changed = new, True
    if changed:
        nbformat.write(nb, path)
    return changed


LAB_TITLE = re.compile(r"^#\s+Lab\s+(?P<num>\d{2})\s+·\s+(?P<title>.+?)\s*$", re.M)
PRACTISES = re.compile(r"\(\.\./notebooks/(?P<file>\d{2}_[^)]+\.ipynb)\)")


def lab_info(path: Path) -> tuple[str, str, list[str]]:
    """Number, title and the tutorials a lab links in its first cell (what it practises)."""
    source = nbformat.read(path, as_version=4).cells[0].source
    m = LAB_TITLE.search(source)
    if not m:
        raise SystemExit(f"{path}: the first cell must start with '# Lab NN · Title'")
    return m["num"], m["title"], PRACTISES.findall(source)


def contents_table(root: Path = ROOT) -> str:
    rows = ["| # | Tutorial | Practised in |", "|---|---|---|"]
    practised: dict[str, list[str]] = {}
    lab_rows = ["| Lab | Practises | Solution |", "|---|---|---|"]
    for lab in labs(root):
        num, title, files = lab_info(lab)
        for name in files:
            practised.setdefault(name, []).append(f"[Lab {num}](labs/{lab.name})")
        lab_rows.append(
            f"| [Lab {num} · {title}](labs/{lab.name}) | "
            + ", ".join(name[:2] for name in files)
            + f" | [solution](labs/solutions/{lab.name}) |"
        )
    for path in tutorials(root):
        num, title = title_of(path)
        links = ", ".join(practised.get(path.name, []))
        rows.append(f"| {num} | [{title}](notebooks/{path.name}) | {links} |")
    table = "\n".join(rows)
    if len(lab_rows) > 2:
        table += "\n\n" + "\n".join(lab_rows)
    return table


def update_readme(root: Path = ROOT) -> bool:
    readme = root / "README.md"
    text = readme.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"README.md needs the markers {START} and {END}")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{contents_table(root)}\n{END}{tail}"
    if new != text:
        readme.write_text(new, encoding="utf-8")
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if anything is stale")
    args = parser.parse_args(argv)
    stale = []
    if args.check:
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp)
            shutil.copy(ROOT / "README.md", copy / "README.md")
            for sub in ("notebooks", "labs"):
                if (ROOT / sub).exists():
                    shutil.copytree(ROOT / sub, copy / sub)
            stale = _update_all(copy)
        for name in stale:
            print(f"stale: {name} (run: python tools/contents.py)")
        return 1 if stale else 0
    for name in _update_all(ROOT):
        print(f"updated {name}")
    return 0


def _update_all(root: Path) -> list[str]:
    changed = []
    paths = tutorials(root)
    for i in range(len(paths)):
        if update_notebook(paths, i, "../README.md#contents"):
            changed.append(f"notebooks/{paths[i].name}")
    if update_readme(root):
        changed.append("README.md")
    return changed


if __name__ == "__main__":
    sys.exit(main())
