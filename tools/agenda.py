"""Write the workshop agenda of INSTRUCTORS.md from a run report (``make run`` writes it).

The agenda lists every tutorial and lab in course order with the time its headless run took
(``build/report.json``, from ``python -m tools.run_notebooks``) and a suggested slot for the
room: reading and discussion take longer than execution. It goes between the markers
``<!-- agenda:start -->`` and ``<!-- agenda:end -->``.

    python -m tools.agenda                       # from build/report.json
    python -m tools.agenda --report other.json
    python -m tools.agenda --check               # exit 1 if the agenda lacks a notebook or lab
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# Run as a file (`python tools/agenda.py`), not as `python -m tools.agenda`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.nbtools import REPO_ROOT, part_of, tutorial_paths

GUIDE = REPO_ROOT / "INSTRUCTORS.md"
START, END = "<!-- agenda:start -->", "<!-- agenda:end -->"
TITLE = re.compile(r"^#\s+(?:Lab\s+)?\d{2}[a-z]?\s+·\s+(?P<title>.+?)\s*$", re.M)
#: Suggested minutes in the room: a tutorial is read and discussed, a lab is worked through.
SLOT_MIN = {"tutorial": 20, "lab": 30}


def course_items(root: Path = REPO_ROOT) -> list[tuple[str, str, Path]]:
    """(kind, label, path) of every tutorial, then every lab solution, in course order; a lab
    comes right after the last tutorial it practises."""
    import nbformat

    tutorials = tutorial_paths(root / "notebooks")
    items = []
    labs = sorted((root / "labs" / "solutions").glob("[0-9][0-9]_*.ipynb"))
    practised = {}
    for lab in labs:
        first = nbformat.read(lab, as_version=4).cells[0].source
        names = re.findall(r"\(\.\./\.\./notebooks/(\d{2}[a-z]?_[^)]+\.ipynb)\)", first)
        practised[lab] = max(names) if names else ""
    for tutorial in tutorials:
        items.append(("tutorial", part_of(tutorial), tutorial))
        for lab in labs:
            if practised[lab] == tutorial.name:
                items.append(("lab", f"Lab {lab.name[:2]}", lab))
    return items


def title_of(path: Path) -> str:
    import nbformat

    match = TITLE.search(nbformat.read(path, as_version=4).cells[0].source)
    return match["title"] if match else path.stem


def agenda(report: dict, root: Path = REPO_ROOT) -> str:
    seconds = {r["notebook"]: r["seconds"] for r in report["results"] if r["status"] == "passed"}
    lines = [
        "| # | Notebook | Headless run (s) | Suggested slot (min) |",
        "|---|---|---|---|",
    ]
    total_run, total_slot = 0.0, 0
    for kind, label, path in course_items(root):
        rel = path.relative_to(root).as_posix()
        run = seconds.get(rel)
        link = f"[{title_of(path)}]({rel.replace('labs/solutions/', 'labs/')})"
        lines.append(
            f"| {label} | {link} | {run:.0f} |"
            if run is not None
            else f"| {label} | {link} | not run |"
        )
        lines[-1] += f" {SLOT_MIN[kind]} |"
        total_run += run or 0.0
        total_slot += SLOT_MIN[kind]
    lines.append(
        f"| | **Total** | **{total_run:.0f}** | **{total_slot}** ({total_slot / 60:.1f} h) |"
    )
    return "\n".join(lines)


def missing(text: str, root: Path = REPO_ROOT) -> list[str]:
    """Notebooks and labs the agenda does not list (by file name)."""
    block = text.split(START, 1)[-1].split(END, 1)[0]
    return [p.name for _, _, p in course_items(root) if p.name not in block]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report", type=Path, default=REPO_ROOT / "build" / "report.json")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = GUIDE.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise SystemExit(f"{GUIDE} needs the markers {START} and {END}")
    if args.check:
        absent = missing(text)
        for name in absent:
            print(f"INSTRUCTORS.md agenda lacks {name}: run make run, then python -m tools.agenda")
        return 1 if absent else 0
    if not args.report.exists():
        raise SystemExit(f"{args.report} not found: run `make run` first (it writes the report)")
    report = json.loads(args.report.read_text(encoding="utf-8"))
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    GUIDE.write_text(f"{head}{START}\n{agenda(report)}\n{END}{tail}", encoding="utf-8")
    print(f"updated {GUIDE.name} from {args.report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
