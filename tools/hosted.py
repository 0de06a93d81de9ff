"""The hosted path: the setup cell at the top of every notebook and lab, and the launch badges.

    python -m tools.hosted           # write the setup cells and the labs' badge lines
    python -m tools.hosted --check   # exit 1 when one is missing or out of date (tests use it)

Everything comes from one place, pyproject.toml's `[project.urls] Repository` (the course's
home) and `dtf.__version__` (its release tag, `v<version>`):

- the **setup cell**, the first code cell of every notebook, lab and lab solution, tagged
  `hosted-setup`. On a laptop with the course installed it does nothing. In a hosted runtime
  (`google.colab` importable, or `KAGGLE_KERNEL_RUN_TYPE` set) it clones the course at its
  tag (`DTF_COURSE_URL` and `DTF_COURSE_REF` override both, for tests and forks), runs
  tools/hosted_setup.py and works from the course's own folder, so relative paths hold;
- the **badges** "Open in Colab" and "Open in Kaggle": tools/contents.py puts them in each
  tutorial's navigation line and the README's contents; this tool in each lab's first cell.

tools/agenda.py leaves the setup cell out of a part's reading time: nobody reads it aloud.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path
from urllib.parse import quote

import nbformat

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.nbtools import REPO_ROOT

TAG = "hosted-setup"
CELL_ID = "hosted-setup"
BADGE_MARK = "<!--badges-->"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
KAGGLE_BADGE = "https://kaggle.com/static/images/open-in-kaggle.svg"


def repo_url(root: Path = REPO_ROOT) -> str:
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)["project"]["urls"]["Repository"].rstrip("/")


def release_ref(root: Path = REPO_ROOT) -> str:
    init = (root / "src" / "dtf" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', init, re.M)
    if not found:
        raise ValueError("src/dtf/__init__.py has no __version__ line")
    return "v" + found[1]


def blob_url(relpath: str, root: Path = REPO_ROOT) -> str:
    """The notebook on GitHub at the release tag (`relpath` from the repository root)."""
    return f"{repo_url(root)}/blob/{release_ref(root)}/{relpath}"


def colab_url(relpath: str, root: Path = REPO_ROOT) -> str:
    github = repo_url(root).removeprefix("https://github.com/")
    return f"https://colab.research.google.com/github/{github}/blob/{release_ref(root)}/{relpath}"


def kaggle_url(relpath: str, root: Path = REPO_ROOT) -> str:
    return "https://kaggle.com/kernels/welcome?src=" + quote(blob_url(relpath, root), safe=":/")


def badges(relpath: str, root: Path = REPO_ROOT) -> str:
    """The two launch badges, Markdown, for the notebook at `relpath`."""
    return (
        f"[![Open in Colab]({COLAB_BADGE})]({colab_url(relpath, root)}) "
        f"[![Open in Kaggle]({KAGGLE_BADGE})]({kaggle_url(relpath, root)})"
    )


def setup_source(relpath: str, root: Path = REPO_ROOT) -> str:
    """The setup cell of the notebook at `relpath` (e.g. notebooks/00_setup_check.ipynb)."""
    folder = Path(relpath).parent.as_posix()
    up = "/".join([".."] * len(Path(folder).parts))
    return f"""\
# Colab or Kaggle: fetch the course, install only what the runtime lacks (never a second
# TensorFlow) and work in the course's {folder}/ folder. Elsewhere this cell does nothing.
import os
import subprocess
import sys

try:
    import google.colab  # importable only in Colab

    HOSTED = True
except ImportError:
    HOSTED = "KAGGLE_KERNEL_RUN_TYPE" in os.environ
if HOSTED and not os.path.isdir("{up}/src/dtf"):
    URL, REF = "{repo_url(root)}", "{release_ref(root)}"
    URL = os.environ.get("DTF_COURSE_URL", URL)  # a fork, or a local clone (tests)
    REF = os.environ.get("DTF_COURSE_REF", REF)
    clone = ["git", "clone", "-q", "--depth=1", "-b", REF, URL, "dtf-course"]
    steps = [] if os.path.isdir("dtf-course") else [clone]
    for step in [*steps, [sys.executable, "dtf-course/tools/hosted_setup.py"]]:
        done = subprocess.run(step, capture_output=True, text=True)  # printed here: Colab
        print(done.stdout, end="")  # shows no output of a child process by itself
        if done.returncode:
            hint = " (on Kaggle: Settings, Internet on)" if step is clone else ""
            raise SystemExit(f"{{' '.join(step)}} failed{{hint}}: {{done.stderr.strip()}}")
    os.chdir("dtf-course/{folder}")
    sys.path.insert(0, os.path.abspath("{up}/src"))  # the kernel started before the install"""


def notebooks(root: Path = REPO_ROOT) -> list[Path]:
    """Every notebook a learner opens: tutorials, student labs, lab solutions."""
    return [
        *sorted((root / "notebooks").glob("[0-9][0-9]*.ipynb")),
        *sorted((root / "labs").glob("[0-9][0-9]_*_lab.ipynb")),
        *sorted((root / "labs" / "solutions").glob("[0-9][0-9]_*_lab.ipynb")),
    ]


def _set_badges(source: str, line: str) -> str:
    if BADGE_MARK in source:
        return re.sub(re.escape(BADGE_MARK) + r"(\n[^\n]*)?", lambda _: line, source, count=1)
    return f"{source.rstrip()}\n\n{line}"


def update(path: Path, root: Path = REPO_ROOT, write: bool = True) -> bool:
    """Make the setup cell the first code cell (and a lab's badges); True if that changed
    anything (with ``write=False``: would change; the file is left as it is)."""
    nb = nbformat.read(path, as_version=4)
    rel = path.relative_to(root).as_posix()
    before = nbformat.writes(nb)
    source = setup_source(rel, root)
    existing = [c for c in nb.cells if TAG in c.metadata.get("tags", [])]
    for cell in existing[1:]:
        nb.cells.remove(cell)
    if existing:  # new source; its execution count stays (it printed nothing where it ran)
        cell = existing[0]
        cell.source = source
        nb.cells.remove(cell)
    else:
        cell = nbformat.v4.new_code_cell(source, id=CELL_ID)
        cell.metadata["tags"] = [TAG]
    cell.outputs = []
    codes = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    nb.cells.insert(codes[0] if codes else len(nb.cells), cell)  # before the parameters cell
    if rel.startswith("labs/"):
        student = "labs/" + path.name  # a solution's badges open the student version
        line = f"{BADGE_MARK}\n{badges(student, root)}"
        nb.cells[0].source = _set_badges(nb.cells[0].source, line)
    if nbformat.writes(nb) == before:
        return False
    if write:
        nbformat.write(nb, path)
    return True


def main(argv: list[str] | None = None, root: Path = REPO_ROOT) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.hosted", description=__doc__)
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = parser.parse_args(argv)
    stale = []
    for path in notebooks(root):
        if update(path, root, write=not args.check):
            rel = path.relative_to(root).as_posix()
            if args.check:
                stale.append(rel)
            else:
                print(f"updated {rel}")
    if stale:
        print("setup cell or badges out of date (run python -m tools.hosted):", *stale, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
