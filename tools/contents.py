"""Generate the contents table (README) and the prev | contents | next line of each notebook.

Titles come from each notebook's first heading (``# NN · Title``), so renaming a notebook
or adding one needs only ``python -m tools.contents``. The generated parts sit between
marker comments, so running it again changes nothing (idempotent); ``--check`` exits 1
when something is out of date (the structure tests use it).

Every mention of another part or lab in prose ("part 04b", "notebooks 09 and 10", "Lab 02"),
in README.md, INSTRUCTORS.md, the tutorials and the lab solutions, must be a link to it (outside
code, headings and generated regions): the update links each one, ``--check`` reports it as
stale, and a link whose text names another part than the file it leads to is an error. So when a
notebook is split or renamed, every reference to it breaks visibly instead of pointing at the
wrong part.

Both modes also check every relative link in the markdown cells of every notebook
(``notebooks/``, ``labs/``, ``labs/solutions/``) and in ``README.md`` and ``INSTRUCTORS.md``: it
must lead to a file or folder that exists, with the same case (GitHub and Linux are
case-sensitive), inside the repository. Web links (any ``scheme:``) and anchors within a page
(``#x``) are not checked; the anchor of ``file#x`` is ignored. Links in code spans and fenced
code blocks are not links.
A broken link is printed with its file and cell (or line) and makes the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import nbformat

# Run as a file (`python tools/contents.py`), not as `python -m tools.contents`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import hosted
from tools.nbtools import REPO_ROOT, part_of, tutorial_paths

NAV_MARK = "<!--navigation-->"
START, END = "<!-- contents:start -->", "<!-- contents:end -->"
TITLE = re.compile(r"^#\s+(?P<num>\d{2}[a-z]?)\s+·\s+(?P<title>.+?)\s*$", re.M)


def title_of(path: Path) -> tuple[str, str]:
    """``("03", "Manual placement and towers")`` from the notebook's first cell."""
    nb = nbformat.read(path, as_version=4)
    m = TITLE.search(nb.cells[0].source) if nb.cells else None
    if not m:
        raise SystemExit(f"{path}: the first cell must start with '# NN · Title'")
    return m["num"], m["title"]


def tutorials(root: Path = REPO_ROOT) -> list[Path]:
    return tutorial_paths(root / "notebooks")


def labs(root: Path = REPO_ROOT) -> list[Path]:
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
    launch = hosted.badges(f"{paths[i].parent.name}/{paths[i].name}")
    return f"{NAV_MARK}\n" + " | ".join(parts) + " " + launch


def _set_nav(source: str, line: str, where: str) -> str:
    """Replace the navigation block in a markdown cell, or add it at ``where``."""
    pattern = re.compile(re.escape(NAV_MARK) + r"(\n[^\n]*)?")  # a bare marker gets its line
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
PRACTISES = re.compile(r"\(\.\./notebooks/(?P<file>\d{2}[a-z]?_[^)]+\.ipynb)\)")


def lab_info(path: Path) -> tuple[str, str, list[str]]:
    """Number, title and the tutorials a lab links in its first cell (what it practises)."""
    source = nbformat.read(path, as_version=4).cells[0].source
    m = LAB_TITLE.search(source)
    if not m:
        raise SystemExit(f"{path}: the first cell must start with '# Lab NN · Title'")
    return m["num"], m["title"], PRACTISES.findall(source)


def contents_table(root: Path = REPO_ROOT) -> str:
    rows = ["| # | Tutorial | Practised in |", "|---|---|---|"]
    practised: dict[str, list[str]] = {}
    lab_rows = ["| Lab | Practises | Solution |", "|---|---|---|"]
    for lab in labs(root):
        num, title, files = lab_info(lab)
        for name in files:
            practised.setdefault(name, []).append(f"[Lab {num}](labs/{lab.name})")
        lab_rows.append(
            f"| [Lab {num} · {title}](labs/{lab.name}) {hosted.badges(f'labs/{lab.name}')} | "
            + ", ".join(part_of(name) for name in files)
            + f" | [solution](labs/solutions/{lab.name}) |"
        )
    for path in tutorials(root):
        num, title = title_of(path)
        links = ", ".join(practised.get(path.name, []))
        launch = hosted.badges(f"notebooks/{path.name}")
        rows.append(f"| {num} | [{title}](notebooks/{path.name}) {launch} | {links} |")
    table = "\n".join(rows)
    if len(lab_rows) > 2:
        table += "\n\n" + "\n".join(lab_rows)
    return table


def update_readme(root: Path = REPO_ROOT) -> bool:
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


# --------------------------------------------------------------------------- links

#: Folders whose notebooks are checked for broken links (relative to the repository root).
LINK_FOLDERS = ("notebooks", "labs", "labs/solutions")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+).+?\1", re.S)
_TARGET = r"(?:<(?P<{0}a>[^>\n]*)>|(?P<{0}b>[^)\s]+))"
#: ``](target)`` or ``](target "title")``: the end of any inline link or image, so that a
#: link around an image (``[![alt](a.png)](b.md)``) yields both targets.
_INLINE = re.compile(
    r"\]\(\s*" + _TARGET.format("i") + r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)"
)
_REFERENCE = re.compile(r"^ {0,3}\[[^\]\n]+\]:[ \t]*" + _TARGET.format("r"), re.M)
_HTML = re.compile(r"\b(?:href|src)\s*=\s*(?:\"(?P<hq>[^\"]*)\"|'(?P<hs>[^']*)')", re.I)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class BrokenLink:
    """A relative link that leads nowhere: where it is, what it says and why it fails."""

    file: str  # POSIX path relative to the repository root
    where: str  # "cell index N" in a notebook, "line N" in a markdown file
    target: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file} ({self.where}): {self.target}: {self.reason}"


def _without_code(markdown: str) -> str:
    """``markdown`` with fenced code blocks and code spans blanked (offsets and lines kept)."""
    lines = markdown.split("\n")
    fence = None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if fence is None and m:
            fence, lines[i] = m[1], " " * len(line)
        elif fence is not None:
            if m and m[1][0] == fence[0] and len(m[1]) >= len(fence):
                fence = None
            lines[i] = " " * len(line)
    return _CODE_SPAN.sub(_spaces, "\n".join(lines))


def _spaces(match: re.Match) -> str:
    """The matched text as spaces, its line breaks kept."""
    return re.sub(r"[^\n]", " ", match[0])


def link_targets(markdown: str) -> list[tuple[int, str]]:
    """Every link target in ``markdown`` as ``(line number, target)``, in reading order.

    Inline links and images, reference definitions (``[x]: target``) and HTML ``href``/``src``
    attributes; nothing inside code. Web links and anchors are included (the caller skips them).
    """
    text = _without_code(markdown)
    found: list[tuple[int, str]] = []
    for pattern in (_INLINE, _REFERENCE, _HTML):
        for m in pattern.finditer(text):
            target = next(v for k, v in m.groupdict().items() if v is not None)
            found.append((m.start(), target))
    found.sort()
    return [(text.count("\n", 0, start) + 1, target) for start, target in found if target]


def _exact_path_problem(root: Path, relative: str) -> str | None:
    """Why ``relative`` (normalised, inside ``root``) is not an existing path, or None.

    Compares names exactly, folder by folder: a link that differs only in case works on
    macOS and Windows but not on GitHub or Linux.
    """
    current = root
    for part in relative.split("/"):
        if part in ("", "."):
            continue
        try:
            names = os.listdir(current)
        except OSError:
            return "no such file"
        if part not in names:
            near = sorted(n for n in names if n.lower() == part.lower())
            if near:
                return f"no such file (the name differs in case: {near[0]})"
            return "no such file"
        current = current / part
    return None


def check_target(root: Path, file: str, target: str) -> str | None:
    """Why the link ``target`` in ``file`` (relative to ``root``) is broken, or None.

    Web links (``https:``, ``mailto:``, any scheme) and same-page anchors are not checked.
    """
    if _SCHEME.match(target) or target.startswith("#"):
        return None
    path = unquote(target.split("#", 1)[0].split("?", 1)[0])
    if not path:
        return None
    if path.startswith(("/", "\\")):
        return "absolute path: use a path relative to this file"
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(file), path))
    if joined == ".." or joined.startswith("../"):
        return "outside the repository"
    return _exact_path_problem(root, joined)


def link_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files whose links are checked: README.md, INSTRUCTORS.md and the notebooks of
    LINK_FOLDERS."""
    files = [root / name for name in MENTION_FILES if (root / name).exists()]
    for folder in LINK_FOLDERS:
        files.extend(sorted((root / folder).glob("*.ipynb")))
    return files


def broken_links(root: Path = REPO_ROOT) -> list[BrokenLink]:
    """Every broken relative link in :func:`link_files`, in file order."""
    root = root.resolve()
    problems = []
    for path in link_files(root):
        name = path.resolve().relative_to(root).as_posix()
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            blocks = [
                (f"cell index {i}", cell.source, False)
                for i, cell in enumerate(nb.cells)
                if cell.cell_type == "markdown"
            ]
        else:
            blocks = [("", path.read_text(encoding="utf-8"), True)]
        for where, text, by_line in blocks:
            for line, target in link_targets(text):
                reason = check_target(root, name, target)
                if reason:
                    problems.append(
                        BrokenLink(name, f"line {line}" if by_line else where, target, reason)
                    )
    return problems


# --------------------------------------------------------------------------- part references
#: "part 04b", "notebooks 09 and 10", "Lab 02", "parts 11–11e": a word, then numbers.
_NUMBER = r"\d{2}[a-e]?"
MENTION = re.compile(
    rf"\b(?P<kind>[Nn]otebooks?|[Pp]arts?|[Ll]abs?)\s+(?P<nums>{_NUMBER}"
    rf"(?:(?:,\s*|,?\s+and\s+|,?\s+or\s+|\s*[–-]\s*|\s+to\s+){_NUMBER})*)(?![\w.]*\d)"
)
_LINK_SPAN = re.compile(r"!?\[[^\]]*\]\([^)\s]*(?:\s+\"[^\"]*\")?\)")  # text may wrap
MENTION_FILES = ("README.md", "INSTRUCTORS.md")


@dataclass(frozen=True)
class Mention:
    """A reference to another part or lab that is not a link to it."""

    file: str
    where: str  # "cell index N" in a notebook; empty in a markdown file
    problem: str

    def __str__(self) -> str:
        where = f" ({self.where})" if self.where else ""
        return f"{self.file}{where}: {self.problem}"


def part_files(root: Path) -> tuple[dict[str, str], dict[str, str]]:
    """``{"04b": "notebooks/04b_x.ipynb"}`` and ``{"02": "labs/02_x_lab.ipynb"}``."""
    notebooks = {p.name[:3].rstrip("_"): f"notebooks/{p.name}" for p in tutorials(root)}
    lab_files = {p.name[:2]: f"labs/{p.name}" for p in labs(root)}
    return notebooks, lab_files


def _target_for(kind: str, number: str, file: str, index) -> str | None:
    """The relative link from ``file`` to the part or lab ``number``; None if there is none."""
    notebooks, lab_files = index
    found = (lab_files if kind.lower().startswith("lab") else notebooks).get(number)
    if found is None:
        return None
    if file.startswith("labs/solutions/") and found.startswith("labs/"):
        return posixpath.basename(found)  # make_labs points it at the student lab
    return posixpath.relpath(found, posixpath.dirname(file) or ".")


def _blank(text: str) -> str:
    """``text`` with code, headings and generated regions (``<!-- x:start -->`` to
    ``<!-- x:end -->``) turned into spaces: every offset stays where it was."""
    blank = re.sub(r"(?m)^ {0,3}#.*$", _spaces, _without_code(text))
    return re.sub(r"<!-- (\w+):start -->.*?<!-- \1:end -->", _spaces, blank, flags=re.S)


def _mentions(text: str):
    """(start, end, kind, [(number start, number)]) of each mention outside code and headings."""
    blank = _blank(text)
    links = [(m.start(), m.end(), m[0]) for m in _LINK_SPAN.finditer(blank)]
    for m in MENTION.finditer(blank):
        numbers = [(m.start("nums") + n.start(), n[0]) for n in re.finditer(_NUMBER, m["nums"])]
        inside = next((link for link in links if link[0] <= m.start() < link[1]), None)
        yield m.start(), m.end(), m["kind"], numbers, inside


def link_mentions(text: str, file: str, index) -> tuple[str, list[str]]:
    """``text`` with every unlinked mention linked to its part or lab, and the problems left:
    a mention of a part that does not exist, and a link whose text names another part."""
    problems, edits = [], []
    for start, end, kind, numbers, inside in _mentions(text):
        if inside is not None:
            target = re.search(r"\]\(([^)#\s]*)", inside[2])
            name = posixpath.basename(target[1]) if target else ""
            if inside[2].startswith("!") or not name.endswith(".ipynb"):
                continue  # image alt text, or a link to something else
            if len(numbers) == 1 and not name.startswith(numbers[0][1] + "_"):
                problems.append(f"{text[start:end]!r} links to {name}")
            continue
        targets = [_target_for(kind, number, file, index) for _, number in numbers]
        if None in targets:
            missing = [n for (_, n), t in zip(numbers, targets, strict=True) if t is None]
            problems.append(f"{text[start:end]!r}: no {kind.lower().rstrip('s')} {missing[0]}")
            continue
        if len(numbers) == 1:
            edits.append((start, end, f"[{text[start:end]}]({targets[0]})"))
        else:
            for (at, number), link in zip(numbers, targets, strict=True):
                edits.append((at, at + len(number), f"[{number}]({link})"))
    for a, b, new in sorted(edits, reverse=True):
        text = text[:a] + new + text[b:]
    return text, problems


def mention_files(root: Path = REPO_ROOT) -> list[Path]:
    """The files whose mentions of parts and labs must be links."""
    files = [root / name for name in MENTION_FILES if (root / name).exists()]
    return files + tutorials(root) + sorted((root / "labs" / "solutions").glob("*.ipynb"))


def update_mentions(root: Path = REPO_ROOT, write: bool = True) -> tuple[list[str], list[Mention]]:
    """Link every unlinked mention of a part or lab; returns (files changed, problems left)."""
    root = root.resolve()
    index = part_files(root)
    changed, problems = [], []
    for path in mention_files(root):
        name = path.relative_to(root).as_posix()
        if path.suffix == ".ipynb":
            nb = nbformat.read(path, as_version=4)
            cells = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]
            dirty = False
            for i, c in cells:
                new, found = link_mentions(c.source, name, index)
                problems += [Mention(name, f"cell index {i}", f) for f in found]
                if new != c.source:
                    c.source, dirty = new, True
            if dirty:
                changed.append(name)
                if write:
                    nbformat.write(nb, path)
        else:
            old = path.read_text(encoding="utf-8")
            new, found = link_mentions(old, name, index)
            problems += [Mention(name, "", f) for f in found]
            if new != old:
                changed.append(name)
                if write:
                    path.write_text(new, encoding="utf-8")
    return changed, problems


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None, root: Path = REPO_ROOT) -> int:
    """Update (or with ``--check`` verify) the generated parts and check links under ``root``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 if anything is stale"
    )
    args = parser.parse_args(argv)
    stale = []
    if args.check:
        import shutil
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp)
            shutil.copy(root / "README.md", copy / "README.md")
            for sub in ("notebooks", "labs"):
                if (root / sub).exists():
                    shutil.copytree(root / sub, copy / sub)
            stale = _update_all(copy)
        for name in stale:
            print(f"stale: {name} (run: python -m tools.contents)")
    else:
        for name in _update_all(root):
            print(f"updated {name}")
    linked, problems = update_mentions(root, write=not args.check)
    for name in linked:
        print(
            f"stale: {name} mentions a part or lab without a link (run: python -m tools.contents)"
            if args.check
            else f"linked the mentions of parts and labs in {name}"
        )
    for problem in problems:
        print(f"part reference: {problem}")
    stale += linked if args.check else []
    broken = broken_links(root)
    for link in broken:
        print(f"broken link: {link}")
    if broken:
        print(f"{len(broken)} broken link(s): fix the link or add the file it points to")
    return 1 if stale or broken or problems else 0


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
