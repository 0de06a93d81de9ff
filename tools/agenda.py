"""Compute the workshop agenda of INSTRUCTORS.md: each part's minutes, its slot, and two tracks.

Every tutorial notebook (a *part*) and every lab gets minutes from one formula, in minutes::

    tutorial:  words / 180  +  code lines / 12  +  measured run time
    lab:       words / 180  +  code lines / 12  +  measured run time  +  6 per task

and a slot, its minutes rounded up to 5. *Words* are those of the markdown cells a learner
reads, *code lines* those of the code cells (and of fenced code in markdown) that they read;
:func:`count` defines both precisely. A lab is read in its student version (the stubs, not the
solution), and each task adds :data:`LAB_TASK_MIN` minutes of working time: write the answer,
run the check, read a hint, fix it once. The run time is the headless time of one ``make run``
(default parameters) of the notebook, or of the lab's solution, stored with its date, machine
and TensorFlow version in ``tools/run_times.json``, so the agenda is recomputed offline.

From the slots it writes, between ``<!-- agenda:start -->`` and ``<!-- agenda:end -->`` of
INSTRUCTORS.md, the table of every part and lab, a one-day track (the :data:`ONE_DAY` core
path, checked to fit a 7-hour day with its :data:`BREAKS`; the rest listed as optional) and a
two-day track (the :data:`TWO_DAY` parts and labs in course order, cut where the two days are
closest to equal, each day checked to fit; the rest listed as reading for home). The whole
course is longer than two days: the text says how long.

    python -m tools.agenda                                  # rewrite the agenda, print minutes
    python -m tools.agenda --from-report build/report.json  # after `make run`: store its times
    python -m tools.agenda --check                          # exit 1 if the agenda is stale

Each part must fit a 30-minute slot (:data:`PART_MAX_MIN`): ``--check`` fails on a part that
runs over. A long lesson is split into parts (``11_…``, ``11b_…``; see :mod:`tools.nbtools`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# Run as a file (`python tools/agenda.py`), not as `python -m tools.agenda`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.hosted import TAG as HOSTED_TAG
from tools.nbtools import REPO_ROOT, part_of, tutorial_paths

GUIDE = REPO_ROOT / "INSTRUCTORS.md"
RUN_TIMES = REPO_ROOT / "tools" / "run_times.json"
START, END = "<!-- agenda:start -->", "<!-- agenda:end -->"
TITLE = re.compile(r"^#\s+(?:Lab\s+)?\d{2}[a-z]?\s+·\s+(?P<title>.+?)\s*$", re.M)

#: Reading speeds of the formula: words of prose and lines of code a learner reads per minute.
WORDS_PER_MIN = 180
CODE_LINES_PER_MIN = 12
#: A lab's working time per task, on top of reading it and running it (minutes).
LAB_TASK_MIN = 6
#: Slots are the computed minutes rounded up to this many minutes.
SLOT_STEP = 5
#: Every tutorial part should fit a slot of this many minutes.
PART_MAX_MIN = 30
#: A workshop day: 7 hours from 09:00, with these breaks (start time, minutes, name). A break
#: is taken at the end of the part or lab closest to its start time.
DAY_START = "09:00"
DAY_MIN = 7 * 60
BREAKS = (("10:30", 15, "Coffee break"), ("12:30", 60, "Lunch"), ("15:00", 15, "Coffee break"))
TEACHING_MIN = DAY_MIN - sum(minutes for _, minutes, _ in BREAKS)
#: The one-day track, a core path: the parts and labs (by label) a one-day room works through.
#: Everything else is optional in a one-day room (read at home, or shown from the front).
ONE_DAY = ("00", "03", "03b", "Lab 02", "06", "09", "10", "11", "12b", "Lab 05")
#: The two-day track: the one-day core plus what a second day adds (masking and placement with
#: their lab, model parallelism, memory, remote servers, parameter servers, what
#: MirroredStrategy does underneath, failures, input sharding). Each day is checked to fit.
TWO_DAY = (
    "00", "01", "02", "02b", "Lab 01", "03", "03b", "Lab 02", "04", "05", "06",
    "07", "08", "09", "09b", "10", "11", "11b", "11d", "12b", "Lab 05",
)  # fmt: skip

TASK = re.compile(r"^(?:#+\s*|\*\*)Task\s+(\d+)", re.M)


# --------------------------------------------------------------------------- counting

_FENCE = re.compile(r"^\s*(```|~~~)")
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_WORD = re.compile(r"\w")
NAV_MARK = "<!--navigation-->"


def markdown_counts(source: str) -> tuple[int, int]:
    """(words, code lines) a learner reads in one markdown cell.

    Code lines are the non-blank lines inside fenced code blocks (they are read as code).
    Words are the whitespace-separated tokens with at least one letter or digit in the rest,
    after removing HTML comments, the navigation line (the line after ``<!--navigation-->``),
    images, HTML tags and link targets (a link's text counts); words in code spans count.
    """
    words = code = 0
    prose: list[str] = []
    fenced = navigation = False
    for line in source.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            code += bool(line.strip())
            continue
        if navigation:  # the prev | contents | next line after the marker
            navigation = False
            continue
        if NAV_MARK in line:
            navigation = True
            continue
        prose.append(line)
    text = _COMMENT.sub(" ", "\n".join(prose))
    text = _LINK.sub(r"\1", _IMAGE.sub(" ", text))
    text = _TAG.sub(" ", text)
    words = sum(1 for token in text.split() if _WORD.search(token))
    return words, code


def code_lines(source: str) -> int:
    """Lines a learner reads in one code cell: not blank, not only a comment, not an IPython
    magic (``%%writefile path`` names a file; the lines below it are counted)."""
    count = 0
    for line in source.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "%")):
            count += 1
    return count


def count(path: Path) -> tuple[int, int]:
    """(words, code lines) of a notebook: its markdown and code cells (raw cells and outputs
    are not counted, nor the hosted setup cell: nobody reads it in a room, tools/hosted.py)."""
    import nbformat

    words = lines = 0
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            w, c = markdown_counts(cell.source)
            words, lines = words + w, lines + c
        elif cell.cell_type == "code" and HOSTED_TAG not in cell.metadata.get("tags", []):
            lines += code_lines(cell.source)
    return words, lines


def tasks(path: Path) -> int:
    """How many tasks a lab has (distinct ``Task N`` headings or ``**Task N**`` lines)."""
    import nbformat

    numbers = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            numbers.update(TASK.findall(cell.source))
    return len(numbers)


# --------------------------------------------------------------------------- course items


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


@dataclass
class Item:
    kind: str  # "tutorial" or "lab"
    label: str  # "03", "11b", "Lab 02"
    path: Path  # the notebook, or the lab's solution (whose run is measured)
    rel: str  # its path from the repository root, the key of run_times.json
    read: str  # what the learner reads: the notebook, or the student lab
    title: str
    words: int
    code: int
    tasks: int
    seconds: float | None  # measured run time; None: never measured

    @property
    def minutes(self) -> float:
        run = (self.seconds or 0.0) / 60
        work = LAB_TASK_MIN * self.tasks if self.kind == "lab" else 0
        return self.words / WORDS_PER_MIN + self.code / CODE_LINES_PER_MIN + run + work

    @property
    def slot(self) -> int:
        return SLOT_STEP * math.ceil(round(self.minutes, 6) / SLOT_STEP)


def measure(root: Path = REPO_ROOT, times: dict | None = None) -> list[Item]:
    """Every part and lab in course order, counted, with its stored run time."""
    stored = (times if times is not None else load_times())["notebooks"]
    items = []
    for kind, label, path in course_items(root):
        rel = path.relative_to(root).as_posix()
        read = rel.replace("labs/solutions/", "labs/")
        words, code = count(root / read)
        n_tasks = tasks(root / read) if kind == "lab" else 0
        seconds = stored.get(rel, {}).get("seconds")
        items.append(
            Item(kind, label, path, rel, read, title_of(path), words, code, n_tasks, seconds)
        )
    return items


# --------------------------------------------------------------------------- run times


def load_times(path: Path | None = None) -> dict:
    path = path or RUN_TIMES
    if not path.exists():
        return {"about": "", "runs": [], "notebooks": {}}
    return json.loads(path.read_text(encoding="utf-8"))


def dump_times(times: dict, path: Path | None = None) -> None:
    """Write run_times.json with one notebook per line (readable diffs)."""
    path = path or RUN_TIMES
    lines = ["{", f'  "about": {json.dumps(times["about"])},', '  "runs": [']
    runs = [f"    {json.dumps(run, ensure_ascii=False)}" for run in times["runs"]]
    lines += [",\n".join(runs)] if runs else []
    lines += ["  ],", '  "notebooks": {']
    entries = [
        f"    {json.dumps(name)}: {json.dumps(entry)}"
        for name, entry in sorted(times["notebooks"].items())
    ]
    lines += [",\n".join(entries)] if entries else []
    lines += ["  }", "}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def tensorflow_version() -> str:
    from importlib import metadata

    for dist in ("tensorflow-cpu", "tensorflow", "tensorflow-macos"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return "not installed"


def this_machine() -> str:
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores"


def from_report(times: dict, report_path: Path, root: Path = REPO_ROOT) -> list[str]:
    """Store the run times of a run report's passed notebooks in ``times`` (in place), as a new
    run with the report's date and this machine's description and TensorFlow version (run it
    where ``make run`` ran). Returns the notebooks it updated. A report with other than the
    default parameters is refused: its times are not the workshop's."""
    report = json.loads(report_path.read_text(encoding="utf-8"))
    if report.get("parameters"):
        raise SystemExit(
            f"{report_path} was run with parameters {report['parameters']}: the agenda needs "
            "default parameters (`make run`)"
        )
    known = {item[2].relative_to(root).as_posix() for item in course_items(root)}
    passed = {
        r["notebook"]: r["seconds"]
        for r in report["results"]
        if r["status"] == "passed" and r["notebook"] in known
    }
    if not passed:
        raise SystemExit(f"{report_path} has no passed notebook of the course")
    stamp = dt.datetime.fromtimestamp(report_path.stat().st_mtime, dt.UTC)
    run_id = max((run["id"] for run in times["runs"]), default=0) + 1
    times["runs"].append(
        {
            "id": run_id,
            "date": stamp.strftime("%Y-%m-%d %H:%M UTC"),
            "machine": this_machine(),
            "tensorflow": tensorflow_version(),
            "source": f"{report_path.name}: {report.get('summary', '')}",
        }
    )
    for name, seconds in passed.items():
        times["notebooks"][name] = {"seconds": round(seconds, 1), "run": run_id}
    prune(times, root)
    return sorted(passed)


def prune(times: dict, root: Path = REPO_ROOT) -> None:
    """Drop times of notebooks that no longer exist, and runs no time refers to."""
    known = {item[2].relative_to(root).as_posix() for item in course_items(root)}
    times["notebooks"] = {k: v for k, v in times["notebooks"].items() if k in known}
    used = {entry["run"] for entry in times["notebooks"].values()}
    times["runs"] = [run for run in times["runs"] if run["id"] in used]


# --------------------------------------------------------------------------- tracks


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _minutes_of(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


def schedule(items: list[Item]) -> list[tuple[str, str, int]]:
    """One day's timetable: (start, what, minutes) for the items in order, each break taken
    after the item whose end is closest to the break's start time (none after the last item:
    a day whose breaks come too late ends early instead)."""
    rows: list[tuple[str, str, int]] = []
    now = _minutes_of(DAY_START)
    pending = list(BREAKS)
    for index, item in enumerate(items):
        rows.append((_clock(now), f"{item.label} · {item.title}", item.slot))
        now += item.slot
        while pending:
            at, length, name = pending[0]
            target = _minutes_of(at)
            if index + 1 == len(items):
                break  # no break after the last item: the day ends
            later = now + items[index + 1].slot
            last = index + 2 == len(items)  # no break would follow the next item
            if not last and abs(later - target) < abs(now - target):
                break  # ending the next item is closer to the break's time
            rows.append((_clock(now), f"*{name}*", length))
            now += length
            pending.pop(0)
    rows.append((_clock(now), "*End*", 0))
    return rows


def two_days(items: list[Item]) -> tuple[list[Item], list[Item]]:
    """Everything in course order, cut after the item that makes the two days closest."""
    total = sum(item.slot for item in items)
    best, first = 0, 0
    best_gap = None
    for index, item in enumerate(items):
        first += item.slot
        gap = abs(total - 2 * first)
        # never cut between a tutorial and the lab that follows it
        follows_lab = index + 1 < len(items) and items[index + 1].kind == "lab"
        if not follows_lab and (best_gap is None or gap < best_gap):
            best, best_gap = index + 1, gap
    return items[:best], items[best:]


def _day_table(items: list[Item]) -> list[str]:
    lines = ["| Start | Part or lab | Slot (min) |", "|---|---|---|"]
    for start, what, minutes in schedule(items):
        lines.append(f"| {start} | {what} | {minutes or ''} |")
    teaching = sum(item.slot for item in items)
    over = f", {teaching - TEACHING_MIN} over" if teaching > TEACHING_MIN else ""
    lines.append(f"| | **Teaching time** | **{teaching}** of {TEACHING_MIN}{over} |")
    return lines


# --------------------------------------------------------------------------- the agenda


def provenance(times: dict) -> list[str]:
    lines = []
    for run in times["runs"]:
        lines.append(
            f"- run {run['id']}: {run['date']}, {run['machine']}, TensorFlow {run['tensorflow']}"
            f" ({run['source']})"
        )
    return lines


def agenda(items: list[Item], times: dict) -> str:
    """The Markdown that goes between the markers."""
    lines = [
        "### Every part and lab",
        "",
        "| # | Notebook | Words | Code lines | Tasks | Run (s) | Minutes | Slot (min) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for item in items:
        run = f"{item.seconds:.0f}" if item.seconds is not None else "not measured"
        mark = " ⚠" if item.kind == "tutorial" and item.minutes > PART_MAX_MIN else ""
        lines.append(
            f"| {item.label} | [{item.title}]({item.read}) | {item.words} | {item.code} | "
            f"{item.tasks or ''} | {run} | {item.minutes:.1f}{mark} | {item.slot} |"
        )
    total_min = sum(item.minutes for item in items)
    total_slot = sum(item.slot for item in items)
    lines += [
        f"| | **Total** | | | | | **{total_min:.0f}** | **{total_slot}** "
        f"({total_slot / 60:.1f} h) |",
        "",
        f"⚠: over the {PART_MAX_MIN}-minute slot a part must fit (split it or cut it).",
        "Run times (`tools/run_times.json`):",
        *provenance(times),
        "",
    ]
    core = [item for item in items if item.label in ONE_DAY]
    optional = [item for item in items if item.label not in ONE_DAY]
    chosen = [item for item in items if item.label in TWO_DAY]
    home = [item for item in items if item.label not in TWO_DAY]
    lines += [
        "### One-day track",
        "",
        f"The core path, {sum(i.slot for i in core)} minutes of slots in a day of "
        f"{DAY_MIN // 60} hours from {DAY_START} with {len(BREAKS)} breaks "
        f"({', '.join(f'{n.lower()} {m} min' for _, m, n in BREAKS)}).",
        "",
        *_day_table(core),
        "",
        "Optional in a one-day room (read at home, or shown from the front): "
        + ", ".join(f"{i.label} ({i.slot} min)" for i in optional)
        + ".",
        "",
        "### Two-day track",
        "",
        f"The one-day core and {len(chosen) - len(core)} more parts and labs, "
        f"{sum(i.slot for i in chosen)} minutes of slots in course order, cut where the two "
        "days are closest to equal.",
    ]
    for number, day in enumerate(two_days(chosen), 1):
        lines += ["", f"Day {number}:", "", *_day_table(day)]
    lines += [
        "",
        "Not in the two-day track (reading for home, or a third and fourth day): "
        + ", ".join(f"{i.label} ({i.slot} min)" for i in home)
        + f". The whole course takes {total_slot} minutes of slots, "
        f"{total_slot / TEACHING_MIN:.1f} days of {TEACHING_MIN} teaching minutes.",
    ]
    return "\n".join(lines)


def problems(items: list[Item], times: dict, text: str) -> list[str]:
    """Everything ``--check`` fails on, one line each."""
    found = []
    for item in items:
        if item.seconds is None:
            found.append(
                f"{item.rel} has no measured run time: `make run`, then "
                "`python -m tools.agenda --from-report build/report.json`"
            )
    known = {item.rel for item in items}
    for name in sorted(set(times["notebooks"]) - known):
        found.append(f"tools/run_times.json has a time for {name}, which is not in the course")
    labels = {item.label for item in items}
    for name, track in (("ONE_DAY", ONE_DAY), ("TWO_DAY", TWO_DAY)):
        for label in track:
            if label not in labels:
                found.append(f"{name} lists {label}, which is not a part or lab")
    for item in items:
        if item.kind != "tutorial":
            continue
        if item.minutes > PART_MAX_MIN:
            found.append(
                f"part {item.label} takes {item.minutes:.1f} min, over the {PART_MAX_MIN}-minute "
                "slot: split it into parts or cut what does not teach"
            )
    core = sum(item.slot for item in items if item.label in ONE_DAY)
    if core > TEACHING_MIN:
        found.append(
            f"the one-day track takes {core} min of slots, over the day's {TEACHING_MIN}: "
            "move a part out of ONE_DAY"
        )
    chosen = [item for item in items if item.label in TWO_DAY]
    for number, day in enumerate(two_days(chosen), 1):
        minutes = sum(item.slot for item in day)
        if minutes > TEACHING_MIN:
            found.append(
                f"day {number} of the two-day track takes {minutes} min of slots, over the "
                f"day's {TEACHING_MIN}: move a part out of TWO_DAY"
            )
    if START not in text or END not in text:
        found.append(f"INSTRUCTORS.md needs the markers {START} and {END}")
    elif text.split(START, 1)[1].split(END, 1)[0].strip() != agenda(items, times).strip():
        found.append("INSTRUCTORS.md's agenda is stale: run `python -m tools.agenda`")
    return found


def report_minutes(items: list[Item]) -> None:
    print(f"{'part':<7} {'words':>6} {'code':>5} {'tasks':>5} {'run s':>6} {'min':>6} {'slot':>5}")
    for item in items:
        over = (
            f"  over {PART_MAX_MIN}"
            if item.kind == "tutorial" and item.minutes > PART_MAX_MIN
            else ""
        )
        run = f"{item.seconds:.0f}" if item.seconds is not None else "-"
        print(
            f"{item.label:<7} {item.words:>6} {item.code:>5} {item.tasks or '':>5} {run:>6} "
            f"{item.minutes:>6.1f} {item.slot:>5}{over}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--from-report",
        type=Path,
        metavar="REPORT",
        help="store the run times of a `make run` report (build/report.json) first",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if the agenda is stale")
    args = parser.parse_args(argv)
    text = GUIDE.read_text(encoding="utf-8")
    times = load_times()
    if args.from_report:
        if not args.from_report.exists():
            raise SystemExit(f"{args.from_report} not found: run `make run` first")
        updated = from_report(times, args.from_report)
        dump_times(times)
        print(f"stored {len(updated)} run times from {args.from_report} in {RUN_TIMES.name}")
    items = measure(times=times)
    report_minutes(items)
    if args.check:
        found = problems(items, times, text)
        for line in found:
            print(line)
        return 1 if found else 0
    if START not in text or END not in text:
        raise SystemExit(f"{GUIDE} needs the markers {START} and {END}")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    GUIDE.write_text(f"{head}{START}\n{agenda(items, times)}\n{END}{tail}", encoding="utf-8")
    print(f"updated {GUIDE.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
