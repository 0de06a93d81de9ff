"""The course as a website: ``make site`` writes it to build/site/, a folder of static pages.

Three steps, each a function of this module:

1. :func:`prepare` writes the site's sources to build/site-src/: the tutorials and the student
   labs (never the solutions, which stay in the repository), images/, the instructor guide, a
   home page from the README's introduction and a "Run it on your laptop" page from its
   "Quick start" section (read from the README each time: one source), and ``myst.yml`` with
   the contents: the tutorials in course order grouped as the two-day track of
   INSTRUCTORS.md's agenda (:mod:`tools.agenda`), then the labs, then the guide. The launch
   badges are taken out of the copies (every page has its own launch buttons), so that
   nothing is fetched from the network.
2. :func:`run_jupyter_book` parses them with Jupyter Book 2 (``jupyter-book build --site``,
   the MyST engine, on Node.js): the notebooks' stored outputs as they are (nothing is
   executed), links between notebooks resolved, images and plots extracted. Its own HTML
   theme is downloaded from the internet when used, so this step writes only MyST's parsed
   pages (JSON) and a stub theme of ours (``template.yml``) keeps it offline.
3. :func:`render` turns those parsed pages into HTML of our own: a sidebar with the
   contents, previous and next links, launch buttons on every notebook page ("Open in
   Colab", "Open in Kaggle" from :mod:`tools.hosted`, "Download notebook": the committed
   notebook itself) and one small stylesheet. Every link is relative, so the site works
   under any path (GitHub Pages serves it under the repository's name) and from a local
   server. Links to files that are not pages (README sections, lab solutions, the package)
   go to the file on GitHub.

Then :func:`check_site` reads every page written and fails the build on a link or image that
leads nowhere (anchors included; a link to GitHub must name a file of the repository, and a
README heading it has), an image fetched from another host, a stored error output or output
HTML that would run code; a warning of jupyter-book fails it too. tests/test_site.py checks
the same and more. The build empties its folders first, so it refuses a non-empty folder that
is not an earlier build (``--out .`` leaves the checkout alone).

    python -m tools.site                  # build/site/ (make site)
    python -m tools.site --out DIR        # somewhere else
    python -m http.server -d build/site   # then open http://127.0.0.1:8000

Needs the development tools (``make dev``: jupyter-book is pinned in requirements-dev.txt)
and Node.js 20 (CONTRIBUTING.md, "Building the website").
"""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from importlib import metadata, util
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import agenda, hosted
from tools.contents import labs
from tools.nbtools import REPO_ROOT, session_kwargs, terminate

SOURCE_DIR = Path("build/site-src")
OUT_DIR = Path("build/site")
#: The site's address once CI has published it (README, INSTRUCTORS and CONTRIBUTING link here).
SITE_URL = "https://dtf-hands-on.github.io/distributed-tensorflow-hands-on/"
SITE_TITLE = "Distributed TensorFlow, hands-on"
#: How long one ``jupyter-book build`` may take (the whole course takes a few seconds).
BUILD_TIMEOUT_S = 300.0
#: Node.js majors that jupyter-book runs on (it refuses the odd ones); CI uses 20.
NODE_MAJORS = "18, 20 or 22 and newer"
NODE_HINT = (
    "install Node.js 20 (https://nodejs.org/en/download; a distribution's nodejs package "
    "may be too old, e.g. Node.js 12 on Ubuntu 22.04: check node --version and use NodeSource "
    "or nvm then; macOS: brew install node), then run make site again"
)
JUPYTER_BOOK_HINT = "run make dev (or: python -m pip install -r requirements-dev.txt)"
#: How the build runs jupyter-book: the package of this interpreter's environment.
JUPYTER_BOOK = (sys.executable, "-m", "jupyter_book")
#: The launch badges of tools/hosted.py, as Markdown: [![alt](image)](target).
BADGE = re.compile(r"\[!\[[^\]]*\]\(https?://[^)\s]+\)\]\([^)\s]+\)[ \t]*")
#: Any other image from the network, which the build would try to download.
REMOTE_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<url>https?://[^)\s]+)\)")
#: A link to an anchor of the same file: ](#installing).
SAME_FILE_ANCHOR = re.compile(r"\]\(#")
#: The site's fixed pages (source in build/site-src/, page in build/site/).
HOME, LAPTOP, GUIDE = "index.md", "laptop.md", "INSTRUCTORS.md"
LAPTOP_TITLE = "Run it on your laptop"
QUICK_START = "Quick start"
#: Where the pages' images and plots go in the site.
ASSETS = "assets"
STYLESHEET = "site.css"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
#: jupyter-book's advice on ``[text](#heading)`` links, not a problem: check_site checks them.
ADVICE = "to an implicit heading reference"


class SiteError(Exception):
    """Something the site cannot be built without; the message says what to do."""


# --------------------------------------------------------------------------- the contents


@dataclass(frozen=True)
class Entry:
    source: str  # path in the repository (and in build/site-src/), e.g. notebooks/05_….ipynb
    extra: bool = False  # a part in a day's group that is not in the two-day track


@dataclass(frozen=True)
class Group:
    title: str
    entries: tuple[Entry, ...]


def tutorial_groups(root: Path = REPO_ROOT) -> list[Group]:
    """The tutorials in course order, grouped as the two-day track's days: a day runs up to
    its last item in course order, so the parts outside the track fall into the day where
    they belong, marked extra; the parts after the second day form a last group."""
    items = agenda.measure(root)
    chosen = [item for item in items if item.label in agenda.TWO_DAY]
    position = {item.rel: index for index, item in enumerate(items)}
    ends = [max(position[item.rel] for item in day) for day in agenda.two_days(chosen) if day]
    titles = [f"Day {number}" for number in range(1, len(ends) + 1)] + ["Beyond the two days"]
    grouped: list[list[Entry]] = [[] for _ in titles]
    for item in items:
        if item.kind != "tutorial":
            continue
        day = next((d for d, end in enumerate(ends) if position[item.rel] <= end), len(ends))
        extra = day < len(ends) and item.label not in agenda.TWO_DAY
        grouped[day].append(Entry(item.rel, extra))
    return [Group(t, tuple(e)) for t, e in zip(titles, grouped, strict=True) if e]


def contents(root: Path = REPO_ROOT) -> list[Entry | Group]:
    """The site's contents in order: pages and groups of pages."""
    return [
        Entry(HOME),
        Entry(LAPTOP),
        *tutorial_groups(root),
        Group("Labs", tuple(Entry(f"labs/{lab.name}") for lab in labs(root))),  # no solutions
        Entry(GUIDE),
    ]


def page_path(source: str) -> str:
    """Where a source's page goes in the site: notebooks/05_x.ipynb -> notebooks/05_x.html."""
    if source == GUIDE:
        return "instructors.html"
    return posixpath.splitext(source)[0] + ".html"


# --------------------------------------------------------------------------- 1. the sources


def _empty(folder: Path, marker: str) -> None:
    """Empty ``folder`` (made if missing), but only if it is empty or an earlier build of
    ours (it has ``marker``): ``--out .`` must not delete a checkout."""
    if folder.is_dir() and any(folder.iterdir()) and not (folder / marker).is_file():
        raise SiteError(
            f"{folder} is not empty and is no earlier site build (it has no {marker}): "
            "the build empties its folder first, so choose a new or empty one"
        )
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def readme_sections(root: Path = REPO_ROOT) -> tuple[str, str, str]:
    """(title, introduction, quick start) of the README: its ``# `` title, the text before its
    first ``## `` section (but the paragraph that links to the site) and the body of its
    ``## Quick start`` section."""
    text = (root / "README.md").read_text(encoding="utf-8")
    title = re.search(r"^# (.+)$", text, re.M)
    sections = re.split(r"^## ", text, flags=re.M)
    if not title or len(sections) < 2:
        raise SiteError("README.md needs a '# ' title and '## ' sections: the home page is made")
    # The README's own pointer to the site is no part of the site's home page.
    paragraphs = sections[0][title.end() :].strip().split("\n\n")
    intro = "\n\n".join(p for p in paragraphs if SITE_URL not in p)
    quick = [s for s in sections[1:] if s.splitlines()[0].strip() == QUICK_START]
    if not quick:
        raise SiteError(
            f"README.md has no '## {QUICK_START}' section: the site's '{LAPTOP_TITLE}' page "
            "is made from it. Restore the section (or change QUICK_START in tools/site.py)."
        )
    return title[1].strip(), intro, quick[0].split("\n", 1)[1].strip()


def offline_markdown(text: str) -> str:
    """``text`` without the launch badges, and with any other remote image turned into a link
    to it, so that the build downloads nothing."""
    text = BADGE.sub("", text)
    return REMOTE_IMAGE.sub(lambda m: f"[{m['alt'] or m['url']}]({m['url']})", text)


def _copy_notebook(src: Path, dest: Path, prefix: str) -> None:
    """A notebook for the site: badges out of its markdown, and cell ids made unique across
    the course (parts split from one lesson share some ids, and MyST's ids are project-wide)."""
    notebook = json.loads(src.read_text(encoding="utf-8"))
    for index, cell in enumerate(notebook.get("cells", [])):
        if "id" in cell:
            cell["id"] = f"{prefix}-{index}"
        if cell.get("cell_type") == "markdown":
            source = cell["source"]
            joined = "".join(source) if isinstance(source, list) else source
            cell["source"] = offline_markdown(joined)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _toc(items: list[Entry | Group]) -> list[dict[str, Any]]:
    toc: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, Group):
            toc.append(
                {"title": item.title, "children": [{"file": e.source} for e in item.entries]}
            )
        else:
            toc.append({"file": item.source})
    return toc


def prepare(root: Path = REPO_ROOT, dest: Path | None = None) -> list[Entry | Group]:
    """Write the site's sources to ``dest`` (emptied first); return the contents."""
    import yaml

    dest = dest or root / SOURCE_DIR
    _empty(dest, "template/template.yml")
    items = contents(root)
    title, intro, quick = readme_sections(root)
    repo = hosted.repo_url(root)
    folder = repo.rsplit("/", 1)[-1]
    home = (
        f"# {title}\n\n{offline_markdown(intro)}\n\n"
        "Every page of this site is one notebook of the course, shown with the outputs of its "
        "last full run. The buttons at the top of a page open it in Google Colab or Kaggle, or "
        f"download it. To run the whole course on your own machine: [{LAPTOP_TITLE}]({LAPTOP}). "
        f"The sources are on [GitHub]({repo}).\n"
    )
    # The README's own anchors (#installing) are its sections: the renderer sends them there.
    laptop = (
        f"# {LAPTOP_TITLE}\n\nGet the course first: `git clone {repo}.git`, then "
        f"`cd {folder}`. The rest is the README's {QUICK_START.lower()}:\n\n"
        + SAME_FILE_ANCHOR.sub("](README.md#", offline_markdown(quick))
        + "\n"
    )
    (dest / HOME).write_text(home, encoding="utf-8")
    (dest / LAPTOP).write_text(laptop, encoding="utf-8")
    guide = (root / GUIDE).read_text(encoding="utf-8")
    (dest / GUIDE).write_text(offline_markdown(guide), encoding="utf-8")
    for item in items:
        for entry in item.entries if isinstance(item, Group) else ():
            prefix = re.sub(r"[^A-Za-z0-9]", "", Path(entry.source).stem.split("_")[0])
            prefix = f"lab{prefix}" if entry.source.startswith("labs/") else f"nb{prefix}"
            _copy_notebook(root / entry.source, dest / entry.source, prefix)
    shutil.copytree(root / "images", dest / "images")
    template = dest / "template"
    template.mkdir()
    # A theme of ours with nothing in it: `jupyter-book build --site` then writes the parsed
    # pages and downloads no theme.
    (template / "template.yml").write_text(
        "jtex: v1\ntitle: dtf static pages\nkind: site\noptions: []\nparts: []\n",
        encoding="utf-8",
    )
    config = {
        "version": 1,
        "project": {"title": SITE_TITLE, "github": repo, "toc": _toc(items)},
        "site": {"template": "./template"},
    }
    (dest / "myst.yml").write_text(
        yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    return items


# --------------------------------------------------------------------------- 2. the parse


def node_version() -> str:
    """The installed Node.js version (``v20.20.2``); SiteError when jupyter-book cannot use it."""
    node = shutil.which("node")
    if node is None:
        raise SiteError(f"Node.js is not installed (jupyter-book runs on it): {NODE_HINT}")
    try:
        done = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=True
        )
    except (subprocess.SubprocessError, OSError) as err:
        raise SiteError(f"{node} --version failed ({err}): {NODE_HINT}") from err
    found = re.match(r"v(\d+)\.", done.stdout.strip())
    major = int(found[1]) if found else 0
    if major not in (18, 20) and major < 22:
        raise SiteError(
            f"Node.js {done.stdout.strip() or '?'} at {node} is too old or unsupported: "
            f"jupyter-book needs Node.js {NODE_MAJORS}; {NODE_HINT}"
        )
    return done.stdout.strip()


def jupyter_book_version() -> str:
    if util.find_spec("jupyter_book") is None:
        raise SiteError(f"jupyter-book is not installed in {sys.executable}: {JUPYTER_BOOK_HINT}")
    version = metadata.version("jupyter-book")
    if not version.startswith("2."):
        raise SiteError(
            f"jupyter-book {version} is installed; the site needs 2.x: {JUPYTER_BOOK_HINT}"
        )
    return version


def run_jupyter_book(source: Path, timeout: float = BUILD_TIMEOUT_S) -> tuple[Path, list[str]]:
    """Run ``jupyter-book build --site`` in ``source``: (its output folder, its warnings)."""
    jupyter_book_version()
    node_version()
    env = {**os.environ, "JB_ALLOW_NODEENV": "no", "NO_COLOR": "1", "FORCE_COLOR": "0"}
    proc = subprocess.Popen(
        [*JUPYTER_BOOK, "build", "--site"],
        cwd=source,
        stdin=subprocess.DEVNULL,  # it asks on stdin when Node.js is missing: never wait there
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
        env=env,
        **session_kwargs(),
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as err:
        terminate([], child=proc)
        raise SiteError(
            f"jupyter-book build did not finish in {timeout:.0f} s (in {source}); "
            "run it there by hand to see where it stops: python -m jupyter_book build --site"
        ) from err
    except BaseException:
        terminate([], child=proc)
        raise
    built = source / "_build" / "site"
    if proc.returncode or not (built / "config.json").exists():
        raise SiteError(
            f"jupyter-book build --site failed (exit {proc.returncode}) in {source}:\n"
            + ANSI.sub("", output).strip()
        )
    lines = ANSI.sub("", output).splitlines()
    warnings = [
        line.strip()
        for index, line in enumerate(lines)
        if (line.lstrip().startswith(("⚠", "⛔", "🚫")) and ADVICE not in line)
        or (line.lstrip().startswith("In files:") and index)
    ]
    return built, warnings


# --------------------------------------------------------------------------- 3. the pages


@dataclass
class Page:
    source: str  # its path in the sources: notebooks/05_gpu_memory.ipynb, index.md
    output: str  # its path in the site: notebooks/05_gpu_memory.html
    title: str
    slug: str
    mdast: dict[str, Any]
    group: str = ""
    extra: bool = False

    @property
    def notebook(self) -> bool:
        return self.source.endswith(".ipynb")


@dataclass
class Site:
    """Everything the renderer knows: the pages in contents order, the parsed folder."""

    pages: list[Page]
    built: Path
    repo: str
    root: Path
    unknown: set[str] = field(default_factory=set)  # AST node types rendered as their content
    assets: dict[str, Path] = field(default_factory=dict)  # site path -> file to copy there
    warnings: list[str] = field(default_factory=list)  # jupyter-book's, for error messages

    def by_slug(self, slug: str) -> Page | None:
        return next((p for p in self.pages if p.slug == slug), None)

    def by_source(self, source: str) -> Page | None:
        return next((p for p in self.pages if p.source == source), None)


def load_pages(built: Path, items: list[Entry | Group]) -> list[Page]:
    """The parsed pages of ``built`` in the order of ``items`` (the contents)."""
    parsed: dict[str, dict[str, Any]] = {}
    for path in sorted((built / "content").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        parsed[data["location"].lstrip("/")] = data
    pages = []
    for item in items:
        group, entries = (item.title, item.entries) if isinstance(item, Group) else ("", (item,))
        for entry in entries:
            data = parsed.get(entry.source)
            if data is None:
                raise SiteError(f"jupyter-book made no page of {entry.source} (see its output)")
            title = data["frontmatter"].get("title") or Path(entry.source).stem
            pages.append(
                Page(
                    entry.source,
                    page_path(entry.source),
                    title,
                    data["slug"],
                    data["mdast"],
                    group,
                    entry.extra,
                )
            )
    return pages


def _href(target: str, page: Page) -> str:
    """``target`` (a path in the site) relative to ``page``."""
    return posixpath.relpath(target, posixpath.dirname(page.output) or ".")


def _heading_ids(node: dict[str, Any]) -> set[str]:
    """The ids of the headings under ``node``: the anchors a page has of its own."""
    ident = node.get("html_id") or node.get("identifier") or ""
    ids = {ident} if ident and node.get("type") == "heading" else set()
    for child in node.get("children", []) or []:
        ids |= _heading_ids(child)
    return ids


def _text_of(node: dict[str, Any]) -> str:
    if "value" in node and isinstance(node["value"], str):
        return node["value"]
    return "".join(_text_of(child) for child in node.get("children", []) or [])


class Renderer:
    """One page's HTML from its MyST AST (see ``mdast`` in MyST's JSON)."""

    def __init__(self, site: Site, page: Page) -> None:
        self.site, self.page = site, page
        self.ids = _heading_ids(page.mdast)
        self.handlers: dict[str, Callable[[dict[str, Any]], str]] = {
            "root": self.children,
            "block": self.block,
            "paragraph": self.tag("p"),
            "heading": self.heading,
            "text": lambda n: html.escape(n["value"].replace("\u200b", ""), quote=False),
            "emphasis": self.tag("em"),
            "strong": self.tag("strong"),
            "underline": self.tag("u"),
            "delete": self.tag("del"),
            "superscript": self.tag("sup"),
            "subscript": self.tag("sub"),
            "span": self.tag("span"),
            "abbreviation": self.tag("abbr"),
            "inlineCode": lambda n: f"<code>{html.escape(n['value'])}</code>",
            "break": lambda n: "<br>",
            "thematicBreak": lambda n: "<hr>",
            "blockquote": self.tag("blockquote"),
            "list": self.list,
            "listItem": self.tag("li"),
            "table": self.table,
            "tableRow": self.tag("tr"),
            "tableCell": self.cell,
            "code": self.code,
            "outputs": self.tag("div", "outputs"),
            "output": self.output,
            "inlineMath": self.math,
            "math": self.math,
            "comment": lambda n: "",
            "html": lambda n: n.get("value", ""),
            "image": self.image,
            "link": self.link,
            "crossReference": self.link,
        }

    # -- generic

    def render(self, node: dict[str, Any]) -> str:
        handler = self.handlers.get(node.get("type", ""))
        if handler is None:
            self.site.unknown.add(str(node.get("type")))
            return self.children(node)
        return handler(node)

    def children(self, node: dict[str, Any]) -> str:
        return "".join(self.render(child) for child in node.get("children", []) or [])

    def tag(self, name: str, css: str = "") -> Callable[[dict[str, Any]], str]:
        attrs = f' class="{css}"' if css else ""
        return lambda node: f"<{name}{attrs}>{self.children(node)}</{name}>"

    # -- blocks

    def block(self, node: dict[str, Any]) -> str:
        tags = (node.get("data") or {}).get("tags", [])
        kind = "code" if node.get("kind") == "notebook-code" else "markdown"
        inner = self.children(node)
        if hosted.TAG in tags:
            return (
                '<details class="cell code hosted-setup"><summary>The setup cell for Colab and '
                "Kaggle (it does nothing on your laptop)</summary>"
                f"{inner}</details>\n"
            )
        return f'<div class="cell {kind}">{inner}</div>\n'

    def heading(self, node: dict[str, Any]) -> str:
        depth = min(max(int(node.get("depth", 2)), 1), 6)
        ident = node.get("html_id") or node.get("identifier") or ""
        anchor = (
            f' <a class="anchor" href="#{html.escape(ident)}" aria-label="Link to this section">'
            "#</a>"
            if ident
            else ""
        )
        attrs = f' id="{html.escape(ident)}"' if ident else ""
        return f"<h{depth}{attrs}>{self.children(node)}{anchor}</h{depth}>\n"

    def list(self, node: dict[str, Any]) -> str:
        if node.get("ordered"):
            start = node.get("start")
            attrs = f' start="{int(start)}"' if start not in (None, 1) else ""
            return f"<ol{attrs}>{self.children(node)}</ol>\n"
        return f"<ul>{self.children(node)}</ul>\n"

    def table(self, node: dict[str, Any]) -> str:
        rows = node.get("children", []) or []
        head = [r for r in rows if all(c.get("header") for c in r.get("children", []) or [])]
        body = [r for r in rows if r not in head]
        parts = ['<div class="table"><table>']
        if head:
            parts.append("<thead>" + "".join(self.render(r) for r in head) + "</thead>")
        parts.append("<tbody>" + "".join(self.render(r) for r in body) + "</tbody></table></div>\n")
        return "".join(parts)

    def cell(self, node: dict[str, Any]) -> str:
        name = "th" if node.get("header") else "td"
        align = node.get("align")
        attrs = f' style="text-align: {align}"' if align in ("left", "center", "right") else ""
        return f"<{name}{attrs}>{self.children(node)}</{name}>"

    def code(self, node: dict[str, Any]) -> str:
        lang = re.sub(r"[^A-Za-z0-9_+-]", "", node.get("lang") or "")
        css = "code-cell" if node.get("executable") else "code-block"
        code_class = f' class="language-{lang}"' if lang else ""
        value = html.escape(node.get("value", ""), quote=False)
        return f'<pre class="{css}"><code{code_class}>{value}</code></pre>\n'

    def math(self, node: dict[str, Any]) -> str:
        # MyST renders math with KaTeX; the stylesheet shows its MathML, which browsers draw.
        if node.get("html"):
            return node["html"]
        return f'<code class="math">{html.escape(node.get("value", ""))}</code>'

    # -- outputs

    def output(self, node: dict[str, Any]) -> str:
        data = node.get("jupyter_data") or {}
        kind = data.get("output_type")
        if kind == "stream":
            name = "stderr" if data.get("name") == "stderr" else "stdout"
            return self._pre(_joined(data.get("text", "")), f"output stream {name}")
        if kind == "error":
            traceback = "\n".join(_joined(line) for line in data.get("traceback", []))
            text = traceback or f"{data.get('ename', 'Error')}: {data.get('evalue', '')}"
            return self._pre(text, "output output-error")
        bundle = data.get("data") or {}
        for mime in ("image/png", "image/jpeg", "image/gif", "image/svg+xml"):
            if mime in bundle:
                src = self._output_asset(bundle[mime], mime)
                alt = html.escape(self._mime_text(bundle.get("text/plain", {})) or "plot")
                return f'<div class="output image"><img src="{src}" alt="{alt}"></div>\n'
        if "text/html" in bundle:
            return f'<div class="output html">{self._mime_text(bundle["text/html"])}</div>\n'
        if "text/plain" in bundle:
            return self._pre(self._mime_text(bundle["text/plain"]), "output text")
        for mime in bundle:
            self.site.unknown.add(f"output {mime}")
        return ""

    def _pre(self, text: str, css: str) -> str:
        return f'<pre class="{css}">{html.escape(ANSI.sub("", text), quote=False)}</pre>\n'

    def _mime_text(self, entry: dict[str, Any]) -> str:
        if "content" in entry:
            return _joined(entry["content"])
        if "path" in entry:
            return self._public(entry["path"]).read_text("utf-8")
        return ""

    def _public(self, url: str) -> Path:
        """The file of ``url`` in MyST's public/ folder; SiteError for one outside it or missing."""
        public = (self.site.built / "public").resolve()
        path = (public / url.lstrip("/")).resolve()
        if not path.is_relative_to(public) or not path.is_file():
            said = "".join(f"\n  jupyter-book: {line}" for line in self.site.warnings)
            raise SiteError(
                f"{self.page.source} shows {url}, which jupyter-book did not copy into the "
                f"site (a missing file or a wrong path?){said}"
            )
        return path

    def _output_asset(self, entry: dict[str, Any], mime: str) -> str:
        if "path" in entry:
            return self._asset(entry["path"])
        # An image MyST left inline: write it out under a name made from its bytes.
        import base64

        content = _joined(entry.get("content", ""))
        raw = content.encode() if mime == "image/svg+xml" else base64.b64decode(content)
        name = hashlib.sha256(raw).hexdigest()[:32] + "." + mime.split("/")[1].split("+")[0]
        path = self.site.built / "inline" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
        self.site.assets[f"{ASSETS}/{name}"] = path
        return _href(f"{ASSETS}/{name}", self.page)

    def _asset(self, url: str) -> str:
        """A file MyST put in public/ (``/name-hash.png``), copied to assets/."""
        path = self._public(url)
        name = path.relative_to((self.site.built / "public").resolve()).as_posix()
        self.site.assets[f"{ASSETS}/{name}"] = path
        return _href(f"{ASSETS}/{name}", self.page)

    # -- links and images

    def image(self, node: dict[str, Any]) -> str:
        url = node.get("url", "")
        alt = html.escape(node.get("alt") or "", quote=True)
        if re.match(r"https?://", url):  # never fetched: a link to it instead
            return f'<a href="{html.escape(url)}">{alt or html.escape(url)}</a>'
        title = f' title="{html.escape(node["title"])}"' if node.get("title") else ""
        return f'<img class="figure" src="{self._asset(url)}" alt="{alt}"{title}>'

    def link(self, node: dict[str, Any]) -> str:
        url, source = node.get("url") or "", node.get("urlSource") or ""
        text = self.children(node)
        ident = node.get("html_id") if node.get("type") == "crossReference" else None
        if ident:
            # MyST's heading labels are project-wide (every notebook has #setup): the link's
            # own source says which page, and a heading of this page is this page's.
            url = f"#{ident}" if not url or (not source and ident in self.ids) else f"{url}#{ident}"
        # MyST turns bare words that look like addresses (tf.data) into links: text again.
        if url.startswith("http://") and url[len("http://") :] == _text_of(node).replace(
            "\u200b", ""
        ):
            return text
        page = self.site.by_source(self._relpath(source.partition("#")[0])) if source else None
        href = self.resolve(source if page is not None else url)
        css = ' class="external"' if re.match(r"[a-z][a-z0-9+.-]*:", href) else ""
        return f'<a href="{html.escape(href)}"{css}>{text}</a>'

    def _relpath(self, path: str) -> str:
        """``path``, a link's target relative to this page's source, from the repository."""
        base = posixpath.dirname(self.page.source)
        return posixpath.normpath(posixpath.join(base, path)) if path else self.page.source

    def resolve(self, url: str) -> str:
        """Where a link of this page's source leads in the site (or on GitHub)."""
        if not url or url.startswith("#") or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", url):
            return url
        path, _, anchor = url.partition("#")
        fragment = f"#{anchor}" if anchor else ""
        if path.startswith("/"):  # a page MyST resolved (/slug, / the home page)
            target = self.site.by_slug(path.strip("/") or self.site.pages[0].slug)
            if target is not None:
                return _href(target.output, self.page) + fragment
            return self._asset(path) + fragment  # a file MyST copied to public/
        relpath = self._relpath(path)
        target = self.site.by_source(relpath)
        if target is not None:
            return _href(target.output, self.page) + fragment
        if relpath == "README.md" and anchor in ("", "contents"):
            return _href("index.html", self.page) + "#contents"
        if relpath == "README.md" and anchor == "quick-start":
            return _href(page_path(LAPTOP), self.page)
        if relpath.startswith("../"):
            return url  # outside the repository: left as written (check_site reports it)
        return f"{self.site.repo}/blob/main/{relpath}{fragment}"


def _joined(text: Any) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


# --------------------------------------------------------------------------- the page frame


def _toc_html(site: Site, page: Page, css: str = "toc") -> str:
    parts = [f'<ul class="{css}">']
    group = None
    for other in site.pages[1:]:  # the home page is the site's title
        if other.group != group:
            if group:
                parts.append("</ul></li>")
            if other.group:
                parts.append(f'<li class="group"><span>{html.escape(other.group)}</span><ul>')
            group = other.group
        current = ' aria-current="page"' if other is page else ""
        extra = ' class="extra" title="Not in the two-day track"' if other.extra else ""
        mark = ' <span class="mark">extra</span>' if other.extra else ""
        parts.append(
            f'<li{extra}><a href="{html.escape(_href(other.output, page))}"{current}>'
            f"{html.escape(other.title)}</a>{mark}</li>"
        )
    if group:
        parts.append("</ul></li>")
    parts.append("</ul>")
    return "".join(parts)


def _launch_html(site: Site, page: Page) -> str:
    name = posixpath.basename(page.source)
    buttons = [
        ("launch-colab", hosted.colab_url(page.source, site.root), "Open in Colab", ""),
        ("launch-kaggle", hosted.kaggle_url(page.source, site.root), "Open in Kaggle", ""),
        ("launch-download", name, "Download notebook", " download"),
        ("launch-github", f"{site.repo}/blob/main/{page.source}", "View on GitHub", ""),
    ]
    links = "".join(
        f'<a class="launch {css}" href="{html.escape(href)}"{extra}>{label}</a>'
        for css, href, label, extra in buttons
    )
    return f'<nav class="launch-buttons" aria-label="Run this notebook">{links}</nav>\n'


def _pager_html(site: Site, page: Page) -> str:
    index = site.pages.index(page)
    links = []
    if index > 0:
        prev = site.pages[index - 1]
        links.append(
            f'<a class="prev" rel="prev" href="{html.escape(_href(prev.output, page))}">'
            f"← {html.escape(prev.title)}</a>"
        )
    if index + 1 < len(site.pages):
        nxt = site.pages[index + 1]
        links.append(
            f'<a class="next" rel="next" href="{html.escape(_href(nxt.output, page))}">'
            f"{html.escape(nxt.title)} →</a>"
        )
    return f'<nav class="pager" aria-label="Previous and next">{"".join(links)}</nav>\n'


def render_page(site: Site, page: Page) -> str:
    """The whole HTML document of one page."""
    body = Renderer(site, page).render(page.mdast)
    if page.source == HOME:
        body += (
            '<h2 id="contents">Contents <a class="anchor" href="#contents" '
            'aria-label="Link to this section">#</a></h2>\n'
            "<p>The tutorials in course order, grouped as the two-day workshop of the "
            f'<a href="{_href(page_path(GUIDE), page)}">instructor guide</a>; the parts marked '
            "<em>extra</em> are not in that track (reading for home). Then the labs.</p>\n"
            + _toc_html(site, page, "contents")
            + "\n"
        )
    launch = _launch_html(site, page) if page.notebook else ""
    kind = "notebook" if page.notebook else "text"
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(page.title)} · {html.escape(SITE_TITLE)}</title>
<link rel="stylesheet" href="{html.escape(_href(STYLESHEET, page))}">
</head>
<body>
<nav class="sidebar" aria-label="Contents">
<a class="site-title" href="{html.escape(_href("index.html", page))}">{html.escape(SITE_TITLE)}</a>
{_toc_html(site, page)}
</nav>
<main class="{kind}">
<h1>{html.escape(page.title)}</h1>
{launch}{body}
{_pager_html(site, page)}</main>
</body>
</html>
"""


STYLE = """\
/* The course site's only stylesheet (tools/site.py writes it). */
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; --accent: #0b5cad; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); font: 16px/1.55 system-ui, -apple-system, "Segoe UI",
  Roboto, sans-serif; display: grid; grid-template-columns: 19rem minmax(0, 1fr); }
a { color: var(--accent); }
.sidebar { position: sticky; top: 0; height: 100vh; overflow-y: auto; padding: 1rem;
  border-right: 1px solid var(--line); background: var(--soft); font-size: 0.9rem; }
.site-title { display: block; font-weight: 700; font-size: 1.05rem; margin-bottom: 0.8rem;
  text-decoration: none; color: var(--ink); }
.toc, .toc ul, .contents, .contents ul { list-style: none; padding-left: 0; margin: 0; }
.toc li { margin: 0.15rem 0; }
.toc .group > span, .contents .group > span { display: block; margin-top: 0.8rem;
  font-weight: 700; color: var(--muted); text-transform: uppercase; font-size: 0.75rem; }
.toc a { text-decoration: none; }
.toc a[aria-current="page"] { font-weight: 700; color: var(--ink); }
.contents ul { padding-left: 1rem; }
.contents li { margin: 0.2rem 0; }
.mark { font-size: 0.7rem; color: var(--muted); border: 1px solid var(--line);
  border-radius: 0.6rem; padding: 0 0.35rem; }
main { padding: 1.5rem 2.5rem 4rem; max-width: 60rem; }
h1 { font-size: 1.9rem; line-height: 1.25; }
h2 { border-bottom: 1px solid var(--line); padding-bottom: 0.2rem; margin-top: 2rem; }
.anchor { visibility: hidden; text-decoration: none; color: var(--muted); }
h1:hover .anchor, h2:hover .anchor, h3:hover .anchor, h4:hover .anchor { visibility: visible; }
.launch-buttons { display: flex; flex-wrap: wrap; gap: 0.5rem; margin: 0 0 1.2rem; }
.launch { border: 1px solid var(--line); border-radius: 0.4rem; padding: 0.25rem 0.7rem;
  text-decoration: none; background: var(--soft); font-size: 0.9rem; }
.launch:hover { border-color: var(--accent); }
code { font: 0.88em/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  background: var(--soft); padding: 0.1em 0.3em; border-radius: 0.25rem; }
pre { overflow-x: auto; padding: 0.7rem 0.9rem; border-radius: 0.4rem; margin: 0.6rem 0;
  font: 0.85rem/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre code { background: none; padding: 0; font-size: inherit; }
.code-cell { background: var(--soft); border: 1px solid var(--line);
  border-left: 3px solid var(--accent); }
.code-block { background: var(--soft); border: 1px solid var(--line); }
.output { margin: 0.3rem 0 1rem; }
pre.output { border-left: 3px solid var(--line); background: #fff; }
pre.stderr { background: #fff8e6; }
pre.output-error { background: #fde8e8; border-left-color: #c62828; }
.output img, img.figure { max-width: 100%; height: auto; }
.output.html { overflow-x: auto; }
.table { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.8rem 0; font-size: 0.9rem; }
th, td { border: 1px solid var(--line); padding: 0.3rem 0.6rem; vertical-align: top; }
td code { overflow-wrap: anywhere; }  /* a long name must not squeeze its neighbours */
thead th, .output.html thead th { background: var(--soft); }
.output.html table { border: none; }
details.hosted-setup { margin: 0.6rem 0; color: var(--muted); }
details.hosted-setup summary { cursor: pointer; font-size: 0.9rem; }
li > p { margin: 0.2rem 0; }
.katex-html { display: none; }  /* MyST's KaTeX output: the MathML part is drawn instead */
.pager { display: flex; justify-content: space-between; gap: 1rem; margin-top: 3rem;
  padding-top: 1rem; border-top: 1px solid var(--line); }
.pager .next { margin-left: auto; text-align: right; }
@media (max-width: 50rem) {
  body { display: block; }
  .sidebar { position: static; height: auto; border-right: none;
    border-bottom: 1px solid var(--line); }
  main { padding: 1rem; }
}
"""


def render(
    built: Path,
    items: list[Entry | Group],
    out: Path,
    root: Path = REPO_ROOT,
    warnings: list[str] | None = None,
) -> Site:
    """Write every page of ``built`` (jupyter-book's output) as HTML into ``out`` (emptied
    first, if it is an earlier site), with the assets the pages use, the committed notebooks
    and the stylesheet; ``warnings``: jupyter-book's, shown when a page's file is missing."""
    site = Site(load_pages(built, items), built, hosted.repo_url(root), root)
    site.warnings = list(warnings or [])
    _empty(out, STYLESHEET)
    for page in site.pages:
        target = out / page.output
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render_page(site, page), encoding="utf-8")
        if page.notebook:  # "Download notebook": the committed notebook, as it is
            shutil.copyfile(root / page.source, target.with_suffix(".ipynb"))
    for name, path in sorted(site.assets.items()):
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / name)
    (out / STYLESHEET).write_text(STYLE, encoding="utf-8")
    return site


# --------------------------------------------------------------------------- checking a site


class _Collector(HTMLParser):
    """The ids, links and images of one HTML page, whether it shows an error output, and
    what in it would run code (output HTML is published as the notebook stored it)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str]] = []  # (attribute, value, class of the tag)
        self.errors = 0
        self.text: list[str] = []
        self.unsafe: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if values.get("id"):
            self.ids.add(values["id"])
        if tag == "a" and values.get("name"):
            self.ids.add(values["name"])
        if "output-error" in values.get("class", "").split():
            self.errors += 1
        if tag == "script":
            self.unsafe.append("a <script> element")
        for name, value in values.items():
            if name.startswith("on"):
                self.unsafe.append(f"an event attribute {name}= on <{tag}>")
            if re.sub(r"[\x00-\x20]", "", value).lower().startswith("javascript:"):
                self.unsafe.append(f"a javascript: URL in {name}= of <{tag}>")
        for name in ("href", "src"):
            if name in values and tag in ("a", "img", "link", "script", "source", "iframe"):
                self.refs.append((name, values[name].strip(), values.get("class", "")))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _collect(path: Path) -> _Collector:
    collector = _Collector()
    collector.feed(path.read_text(encoding="utf-8"))
    collector.close()
    return collector


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file: lowercase, punctuation but
    ``-`` and ``_`` dropped, spaces to hyphens, ``-1``, ``-2`` on repeats; and ``<a id>``s."""
    anchors = set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))
    seen: dict[str, int] = {}
    fence = ""
    for line in text.splitlines():
        mark = re.match(r" {0,3}(```|~~~)", line)
        if mark and (not fence or mark[1] == fence):
            fence = "" if fence else mark[1]
        heading = None if fence else re.match(r" {0,3}#{1,6}\s+(.*?)(\s+#+)?\s*$", line)
        if heading:
            words = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading[1]).lower()
            slug = re.sub(r"[^\w\- ]", "", words).replace(" ", "-")
            anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _check_github(
    value: str, css: str, out: Path, repo: str, root: Path, anchors: dict[str, set[str]]
) -> str | None:
    """What is wrong with a link to ``{repo}/blob/main/PATH``, or None; ``anchors``: the
    Markdown files' anchors found so far, each file read once."""
    path, _, anchor = value[len(f"{repo}/blob/main/") :].partition("#")
    if not path or "//" in path or not (root / path).exists():
        return "names no file of the repository"
    if "launch-github" not in css.split() and (out / page_path(path)).is_file():
        return f"goes to GitHub, but {path} is a page of the site (a link the site missed)"
    if anchor and path.endswith(".md"):
        if path not in anchors:
            anchors[path] = github_anchors((root / path).read_text(encoding="utf-8"))
        if anchor not in anchors[path]:
            return f"{path} has no heading #{anchor}"
    return None


def check_site(out: Path, repo: str = "", root: Path = REPO_ROOT) -> list[str]:
    """Every problem of the site in ``out``, one line each: a link or image to a file that
    is not there (or outside the site), an anchor that no element has, an image from another
    host, an error output or a Python traceback on a page, HTML that runs code (a script,
    an ``on*=`` attribute, a ``javascript:`` URL), and, given the ``repo`` address, a link
    to a file of ``root`` on GitHub that it has not (or to a README heading it has not)."""
    problems: list[str] = []
    anchors: dict[str, set[str]] = {}
    pages = {path: _collect(path) for path in sorted(out.rglob("*.html"))}
    site_root = out.resolve()
    for path, page in pages.items():
        name = path.relative_to(out).as_posix()
        if page.errors:
            problems.append(f"{name}: shows {page.errors} error output(s)")
        if "Traceback (most recent call last)" in "".join(page.text):
            problems.append(f"{name}: shows a Python traceback")
        problems.extend(f"{name}: has {what}" for what in dict.fromkeys(page.unsafe))
        for attribute, value, css in page.refs:
            scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):", value)
            if repo and value.startswith(f"{repo}/blob/main/"):
                wrong = _check_github(value, css, out, repo, root, anchors)
                if wrong:
                    problems.append(f"{name}: {value} {wrong}")
            if scheme:
                if attribute == "src" and scheme[1].lower() != "data":
                    problems.append(f"{name}: {value} is fetched from another host")
                continue
            if value.startswith("//"):
                problems.append(f"{name}: {value} is fetched from another host")
                continue
            target, _, anchor = value.partition("#")
            resolved = (path.parent / target).resolve() if target else path.resolve()
            if not resolved.is_relative_to(site_root):
                problems.append(f"{name}: {value} leads outside the site")
                continue
            if not resolved.is_file():
                problems.append(f"{name}: {value} leads nowhere")
                continue
            if anchor and resolved.suffix == ".html":
                ids = pages[resolved].ids if resolved in pages else _collect(resolved).ids
                if anchor not in ids:
                    problems.append(f"{name}: {value}: no element has the id {anchor!r}")
    return problems


# --------------------------------------------------------------------------- command line


@dataclass
class Result:
    site: Site
    out: Path
    warnings: list[str]
    problems: list[str]
    seconds: float


def build(
    root: Path = REPO_ROOT,
    out: Path | None = None,
    source: Path | None = None,
    timeout: float = BUILD_TIMEOUT_S,
    strict: bool = True,
) -> Result:
    """The three steps and the check: the site of ``root`` in ``out``. ``strict``: a
    SiteError listing them when jupyter-book warned or the check found problems."""
    start = time.monotonic()
    out = out or root / OUT_DIR
    source = source or root / SOURCE_DIR
    items = prepare(root, source)
    built, warnings = run_jupyter_book(source, timeout)
    site = render(built, items, out, root, warnings)
    problems = check_site(out, site.repo, root)
    if strict and (warnings or problems):
        raise SiteError(
            f"the site in {out} has {len(problems)} problem(s) and jupyter-book "
            f"{len(warnings)} warning(s); fix them in the notebooks or the tool:\n"
            + "\n".join([*(f"  jupyter-book: {w}" for w in warnings), *problems])
        )
    return Result(site, out, warnings, problems, time.monotonic() - start)


def main(argv: list[str] | None = None, root: Path = REPO_ROOT) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.site", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--out", type=Path, help=f"where the site goes (default: {OUT_DIR})")
    parser.add_argument(
        "--timeout",
        type=float,
        default=BUILD_TIMEOUT_S,
        help=f"seconds jupyter-book may take (default: {BUILD_TIMEOUT_S:.0f})",
    )
    args = parser.parse_args(argv)
    try:
        result = build(root, args.out.resolve() if args.out else None, timeout=args.timeout)
    except SiteError as err:
        print(f"make site: {err}", file=sys.stderr)
        return 1
    if result.site.unknown:
        print(
            "site: rendered as plain content (teach tools/site.py's Renderer these): "
            + ", ".join(sorted(result.site.unknown))
        )
    shown = os.path.relpath(result.out)
    print(
        f"site: {len(result.site.pages)} pages in {shown} ({result.seconds:.1f} s). Open "
        f"{shown}/index.html, or serve it: python -m http.server -d {shown}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
