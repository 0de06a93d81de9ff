"""The course website (tools/site.py, ``make site``), tested like a web page: every notebook
has a page and no lab solution does, the contents follow the course and the agenda's days,
every link, image and anchor of the built HTML leads somewhere, no page shows an error, every
notebook page launches that notebook, and the home and laptop pages say what the README says.

The tests without the ``slow`` marker check the tool's parts on small inputs; the others build
the real site once (tests/helpers.py ``built_site``, shared with tests/test_site_browser.py in
one xdist group: one build per worker) and read what it wrote."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.helpers import ROOT, built_site, site_tools_missing, skip_or_fail
from tools import agenda, hosted, site
from tools.nbtools import tutorial_paths

pytestmark = [pytest.mark.xdist_group("site")]

TUTORIALS = [f"notebooks/{p.name}" for p in tutorial_paths(ROOT / "notebooks")]
LABS = [f"labs/{p.name}" for p in sorted((ROOT / "labs").glob("[0-9][0-9]_*_lab.ipynb"))]
SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("*.ipynb"))


# --------------------------------------------------------------------------- reading HTML


class Page(HTMLParser):
    """What a test needs of a built page: its links and images with their classes, the
    sidebar's entries with their groups, and its text."""

    def __init__(self, path: Path) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[tuple[str, str, str]] = []  # (href, text, class)
        self.images: list[tuple[str, str]] = []  # (src, class of the enclosing output div)
        self.sidebar: list[tuple[str, str, str]] = []  # (group, href, text)
        self.text: list[str] = []
        self._stack: list[tuple[str, str]] = []  # (tag, class)
        self._link: list[str] | None = None
        self._href = self._class = ""
        self._group = ""
        self._in_group_title = False
        self.feed(path.read_text(encoding="utf-8"))
        self.close()

    def _inside(self, tag: str, css: str) -> bool:
        return any(t == tag and css in c.split() for t, c in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag not in ("img", "br", "hr", "meta", "link", "input", "wbr"):
            self._stack.append((tag, values.get("class", "")))
        if tag == "a":
            self._link = []
            self._href, self._class = values.get("href", ""), values.get("class", "")
        if tag == "img":
            div = next((c for t, c in reversed(self._stack) if t == "div"), "")
            self.images.append((values.get("src", ""), values.get("class", "") or div))
        if tag == "span" and self._inside("nav", "sidebar") and self._stack[-2][1] == "group":
            self._in_group_title, self._group = True, ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._link is not None:
            text = "".join(self._link).strip()
            self.links.append((self._href, text, self._class))
            if self._inside("nav", "sidebar") and self._class != "site-title":
                self.sidebar.append((self._group, self._href, text))
            self._link = None
        if tag == "span":
            self._in_group_title = False
        if tag == "li" and self._stack and self._stack[-1][1] == "group":
            self._group = ""
        while self._stack:
            if self._stack.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._link is not None:
            self._link.append(data)
        if self._in_group_title:
            self._group += data.strip()


def words(text: str) -> str:
    """Text without Markdown's marks, quotes made plain and spaces collapsed."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images: their text
    text = text.replace("`", "").replace("**", "").replace("’", "'").replace("“", '"')
    return " ".join(text.replace("”", '"').split())


# --------------------------------------------------------------------------- the parts, fast


def test_the_contents_follow_the_course_grouped_as_the_agendas_days():
    """Tutorials in course order, in the groups of the two-day track's days (a day ends with
    its last part), parts outside the track marked extra; then the labs, then the guide."""
    items = site.contents(ROOT)
    assert [i.source for i in items[:2]] == [site.HOME, site.LAPTOP]
    assert items[-1] == site.Entry(site.GUIDE)
    groups = [i for i in items if isinstance(i, site.Group)]
    assert [g.title for g in groups[:2]] == ["Day 1", "Day 2"]
    assert groups[-1].title == "Labs" and [e.source for e in groups[-1].entries] == LABS
    tutorials = [e.source for g in groups[:-1] for e in g.entries]
    assert tutorials == TUTORIALS  # every part once, in course order
    days = agenda.two_days([i for i in agenda.measure(ROOT) if i.label in agenda.TWO_DAY])
    for group, day in zip(groups, days, strict=False):
        in_group = {e.source for e in group.entries}
        assert {i.read for i in day if i.kind == "tutorial"} <= in_group, group.title
        for entry in group.entries:
            label = Path(entry.source).name.split("_")[0]
            assert entry.extra == (label not in agenda.TWO_DAY), entry.source


def test_no_lab_solution_is_a_page():
    items = site.contents(ROOT)
    sources = [e.source for i in items for e in (i.entries if isinstance(i, site.Group) else [i])]
    assert SOLUTIONS and not [s for s in sources if "solutions" in s]


def test_the_home_and_laptop_pages_come_from_the_readme(tmp_path):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    title, intro, quick = site.readme_sections(ROOT)
    assert readme.startswith(f"# {title}\n") and quick in readme
    assert all(paragraph in readme for paragraph in intro.split("\n\n"))
    assert site.SITE_URL in readme and site.SITE_URL not in intro
    assert "## " not in intro and "## " not in quick and "make run" in quick
    (tmp_path / "README.md").write_text("# T\n\nIntro.\n\n## Installing\n\nText.\n", "utf-8")
    with pytest.raises(site.SiteError, match="no '## Quick start' section"):
        site.readme_sections(tmp_path)


def test_badges_and_remote_images_leave_the_sources():
    """The build would download a remote image (and wait on it offline)."""
    badges = hosted.badges("notebooks/05_gpu_memory.ipynb")
    text = f"[← 04c](04c.ipynb) | [Contents](../README.md#contents) {badges}\n"
    text += "![plot](../images/x.png)\n![a chart](https://example.org/chart.svg)"
    out = site.offline_markdown(text)
    assert "colab-badge" not in out and "open-in-kaggle" not in out
    assert "![plot](../images/x.png)" in out and "[a chart](https://example.org/chart.svg)" in out
    assert out.startswith("[← 04c](04c.ipynb) | [Contents](../README.md#contents)")


def _one_page_site(tmp_path: Path, mdast: dict, source: str = "notebooks/05_x.ipynb"):
    page = site.Page(source, site.page_path(source), "05 · X", "x", mdast)
    home = site.Page(site.HOME, "index.html", "Home", "index", {"type": "root"})
    return site.Site([home, page], tmp_path, hosted.repo_url(ROOT), ROOT), page


def _text(value: str) -> dict:
    return {"type": "text", "value": value}


def test_links_lead_to_pages_or_to_github(tmp_path):
    course, page = _one_page_site(tmp_path, {"type": "root"})
    renderer = site.Renderer(course, page)
    repo = hosted.repo_url(ROOT)
    assert renderer.resolve("../README.md#contents") == "../index.html#contents"
    assert renderer.resolve("../README.md#installing") == f"{repo}/blob/main/README.md#installing"
    solution = "../labs/solutions/02_towers_lab.ipynb"
    assert renderer.resolve(solution) == f"{repo}/blob/main/labs/solutions/02_towers_lab.ipynb"
    assert renderer.resolve("/index") == "../index.html"
    assert renderer.resolve("/") == "../index.html"  # MyST's address of the home page
    assert renderer.resolve("#setup") == "#setup"
    # A bare word that MyST took for an address stays a word.
    bare = {"type": "link", "url": "http://tf.data", "children": [_text("tf.data")]}
    assert renderer.render(bare) == "tf.data"
    real = {"type": "link", "url": "https://keras.io/", "children": [_text("Keras")]}
    assert 'href="https://keras.io/"' in renderer.render(real)


def test_an_unknown_node_type_is_rendered_as_its_content_and_named(tmp_path):
    node = {"type": "root", "children": [{"type": "aside", "children": [_text("kept")]}]}
    course, page = _one_page_site(tmp_path, node)
    assert "kept" in site.Renderer(course, page).render(node)
    assert course.unknown == {"aside"}


def test_an_error_output_is_shown_and_caught(tmp_path):
    error = {"output_type": "error", "ename": "ValueError", "evalue": "bad", "traceback": []}
    node = {
        "type": "root",
        "children": [{"type": "outputs", "children": [{"type": "output", "jupyter_data": error}]}],
    }
    course, page = _one_page_site(tmp_path, node)
    rendered = site.Renderer(course, page).render(node)
    assert "output-error" in rendered and "ValueError: bad" in rendered
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "page.html").write_text(f"<main>{rendered}</main>", encoding="utf-8")
    assert site.check_site(tmp_path / "out") == ["page.html: shows 1 error output(s)"]


def test_check_site_finds_every_kind_of_broken_reference(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ok.png").write_bytes(b"png")
    (tmp_path / "b.html").write_text('<h2 id="there">B</h2>', encoding="utf-8")
    good = '<a href="b.html#there">b</a> <img src="a/ok.png"> <a href="https://x.org/">x</a>'
    (tmp_path / "a" / "good.html").write_text(
        good.replace('"b.html', '"../b.html').replace('"a/ok', '"ok'), encoding="utf-8"
    )
    assert site.check_site(tmp_path) == []
    bad = (
        '<a href="c.html">c</a> <a href="b.html#nowhere">b</a> <img src="https://x.org/i.png">'
        ' <a href="../outside.html">o</a> <pre>Traceback (most recent call last):</pre>'
    )
    (tmp_path / "bad.html").write_text(bad, encoding="utf-8")
    problems = "\n".join(site.check_site(tmp_path))
    assert "bad.html: c.html leads nowhere" in problems
    assert "no element has the id 'nowhere'" in problems
    assert "https://x.org/i.png is fetched from another host" in problems
    assert "../outside.html leads outside the site" in problems
    assert "bad.html: shows a Python traceback" in problems


def test_output_html_that_would_run_code_fails_the_check(tmp_path):
    """Output HTML is published as the notebook stored it: a script in it is caught."""
    planted = (
        '<table onmouseover="steal()"><tr><td><a href=" JavaScript:go()">x</a></td></tr>'
        "</table><script>steal()</script>"
    )
    outputs = [
        {"type": "output", "jupyter_data": {"output_type": "display_data", "data": data}}
        for data in ({"text/html": {"content": planted}}, {"text/html": {"content": "<b>ok</b>"}})
    ]
    node = {"type": "root", "children": [{"type": "outputs", "children": outputs}]}
    course, page = _one_page_site(tmp_path, node)
    (tmp_path / "out").mkdir()
    rendered = site.Renderer(course, page).render(node)
    (tmp_path / "out" / "page.html").write_text(f"<main>{rendered}</main>", encoding="utf-8")
    assert site.check_site(tmp_path / "out") == [
        "page.html: has an event attribute onmouseover= on <table>",
        "page.html: has a javascript: URL in href= of <a>",
        "page.html: has a <script> element",
    ]
    (tmp_path / "out" / "page.html").write_text("<main><b>ok</b></main>", encoding="utf-8")
    assert site.check_site(tmp_path / "out") == []


def test_links_to_github_must_name_a_file_and_a_heading_of_the_repository(tmp_path):
    repo = hosted.repo_url(ROOT)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "05_gpu_memory.html").write_text("<h1>05</h1>", encoding="utf-8")
    good = [
        "README.md#installing",
        "README.md#sources",
        "labs/solutions/02_towers_lab.ipynb",
        "src/dtf",
    ]
    links = "".join(f'<a href="{repo}/blob/main/{path}">x</a>' for path in good)
    page_on_github = f"{repo}/blob/main/notebooks/05_gpu_memory.ipynb"  # "View on GitHub"
    launch = f'<a class="launch launch-github" href="{page_on_github}">'
    (tmp_path / "index.html").write_text(f"{links}{launch}GitHub</a>", encoding="utf-8")
    assert site.check_site(tmp_path, repo, ROOT) == []
    bad = [
        "notebooks/06_local_srever.ipynb",
        "README.md#no-such-section",
        "/setup-check",
        "notebooks/05_gpu_memory.ipynb",
    ]
    links = "".join(f'<a href="{repo}/blob/main/{path}">x</a>' for path in bad)
    (tmp_path / "bad.html").write_text(links, encoding="utf-8")
    problems = site.check_site(tmp_path, repo, ROOT)
    assert [p.split(" ", 2)[2] for p in problems] == [
        "names no file of the repository",
        "README.md has no heading #no-such-section",
        "names no file of the repository",
        "goes to GitHub, but notebooks/05_gpu_memory.ipynb is a page of the site (a link the "
        "site missed)",
    ]


def test_github_anchors_follow_githubs_rules():
    text = (
        "# Distributed TensorFlow, hands-on\n## In Google Colab (or Kaggle) & on other versions\n"
        "```bash\n# not a heading\n```\n## `make run` and [links](x.md)\n## Setup\n## Setup\n"
        '<a id="kept"></a>\n'
    )
    assert site.github_anchors(text) == {
        "distributed-tensorflow-hands-on",
        "in-google-colab-or-kaggle--on-other-versions",
        "make-run-and-links",
        "setup",
        "setup-1",
        "kept",
    }


def test_the_build_refuses_to_empty_a_folder_that_is_no_earlier_build(tmp_path):
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "precious.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(site.SiteError, match=r"not empty and is no earlier site build"):
        site.render(tmp_path / "built", [], checkout)
    with pytest.raises(site.SiteError, match=r"not empty and is no earlier site build"):
        site.prepare(ROOT, checkout)
    assert [p.name for p in checkout.iterdir()] == ["precious.txt"]
    earlier = tmp_path / "earlier"  # a site of an earlier build is replaced
    earlier.mkdir()
    (earlier / site.STYLESHEET).write_text("old", encoding="utf-8")
    (earlier / "stale.html").write_text("old", encoding="utf-8")
    site.render(tmp_path / "built", [], earlier)
    assert sorted(p.name for p in earlier.iterdir()) == [site.STYLESHEET]
    site.render(tmp_path / "built", [], tmp_path / "new")  # a new folder is made
    assert (tmp_path / "new" / site.STYLESHEET).is_file()


def test_a_warning_of_jupyter_book_fails_the_build_but_its_advice_does_not(tmp_path, monkeypatch):
    script = (
        "import pathlib; p = pathlib.Path('_build/site'); p.mkdir(parents=True, exist_ok=True); "
        "(p / 'config.json').write_text('{}'); "
        'print(\'\u26a0\ufe0f  a.md:5 Linking "setup" to an implicit heading reference, best '
        "practice is'); print('\u26d4\ufe0f a.md Cannot find image \"x.png\"')"
    )
    monkeypatch.setattr(site, "JUPYTER_BOOK", (sys.executable, "-c", script))
    monkeypatch.setattr(site, "node_version", lambda: "v20.0.0")  # runs without Node.js too
    built, warnings = site.run_jupyter_book(tmp_path)
    assert warnings == ['\u26d4\ufe0f a.md Cannot find image "x.png"']
    monkeypatch.setattr(site, "prepare", lambda root, source: [])
    monkeypatch.setattr(site, "render", lambda *args: site.Site([], built, "", ROOT))
    monkeypatch.setattr(site, "check_site", lambda *args: [])
    with pytest.raises(site.SiteError, match=r"1 warning\(s\)[\s\S]*Cannot find image"):
        site.build(ROOT, tmp_path / "out", tmp_path)
    assert site.build(ROOT, tmp_path / "out", tmp_path, strict=False).warnings == warnings
    monkeypatch.setattr(site, "check_site", lambda *args: ["page.html: x leads nowhere"])
    with pytest.raises(site.SiteError, match=r"1 problem\(s\)[\s\S]*page.html: x leads nowhere"):
        site.build(ROOT, tmp_path / "out", tmp_path)


def test_the_site_tests_skip_without_the_tools_and_fail_where_required(tmp_path, monkeypatch):
    """Without Node.js a site test skips and names what to install; CI fails it instead."""

    def outcome(reason: str | None, env: dict) -> tuple[str, str]:
        try:
            skip_or_fail(reason, env)
        except (pytest.skip.Exception, pytest.fail.Exception) as err:  # caught: this test's own
            return type(err).__name__, str(err)
        return "ran", ""

    missing = "no Node.js: install Node.js 20"
    assert outcome(None, {"CI": "true"}) == ("ran", "")
    assert outcome(missing, {}) == ("Skipped", missing)
    assert outcome(missing, {"DTF_REQUIRE_BROWSER": "0"}) == ("Skipped", missing)
    for env in ({"CI": "true"}, {"DTF_REQUIRE_BROWSER": "1"}):
        kind, message = outcome(missing, env)
        assert kind == "Failed" and "must run here" in message and missing in message
    monkeypatch.setenv("PATH", str(tmp_path))  # no node anywhere
    assert "Node.js is not installed" in (site_tools_missing() or "")
    assert "install Node.js 20" in (site_tools_missing() or "")


def test_a_missing_or_unsupported_node_is_named_with_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no node anywhere
    with pytest.raises(site.SiteError, match=r"Node\.js is not installed.*install Node\.js 20"):
        site.node_version()
    node = tmp_path / "node"
    node.write_text("#!/bin/sh\necho v16.20.2\n", encoding="utf-8")
    node.chmod(0o755)
    with pytest.raises(site.SiteError, match=r"Node\.js v16\.20\.2 .* needs Node\.js 18, 20"):
        site.node_version()


def test_a_build_that_hangs_is_stopped_and_one_that_fails_is_shown(tmp_path, monkeypatch):
    sleeper = (sys.executable, "-c", "import time; time.sleep(120)")
    monkeypatch.setattr(site, "node_version", lambda: "v20.0.0")  # runs without Node.js too
    monkeypatch.setattr(site, "JUPYTER_BOOK", sleeper)
    start = time.monotonic()
    with pytest.raises(site.SiteError, match="did not finish in 1 s"):
        site.run_jupyter_book(tmp_path, timeout=1)
    assert time.monotonic() - start < 30
    failing = (sys.executable, "-c", "import sys; print('no myst.yml here'); sys.exit(3)")
    monkeypatch.setattr(site, "JUPYTER_BOOK", failing)
    with pytest.raises(site.SiteError, match=r"failed \(exit 3\)[\s\S]*no myst\.yml here"):
        site.run_jupyter_book(tmp_path)


def test_make_site_installs_the_tools_and_runs_the_tool():
    proc = subprocess.run(
        ["make", "-n", "site", "VENV=build/no-such-venv"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "-r requirements-dev.txt" in proc.stdout
    assert "-m tools.site" in proc.stdout


# --------------------------------------------------------------------------- a tiny site

#: Pages whose headings repeat (MyST's heading labels are project-wide, as in the course,
#: where every notebook has a Setup), with links by path and anchor, and mistyped ones.
TINY = {
    site.HOME: "# Home\n\n## Setup\n\nThe home page has one too.\n",
    "notebooks/05_a.md": (
        "# A\n\n## Overview\n\n[to-b](06_b.md#setup) [to-lab](../labs/02_c_lab.md#setup) "
        "[to-overview](#overview) [to-setup](#setup) [to-b-top](06_b.md) "
        "[typo](06_local_srever.ipynb) [no-section](../README.md#no-such-section)\n\n"
        "## Setup\n\nA's own.\n"
    ),
    "notebooks/06_b.md": "# B\n\n## Overview\n\nB.\n\n## Setup\n\nB's.\n",
    "labs/02_c_lab.md": "# C\n\n## Overview\n\nC.\n\n## Setup\n\nC's.\n",
    "notebooks/07_d.md": "# D\n\n![a diagram](../images/nope.png)\n",
    site.GUIDE: "# Guide\n\nThe home page links here.\n",
}


@pytest.mark.slow
def test_anchored_links_land_on_their_page_and_mistakes_fail_the_check(tmp_path):
    """Through jupyter-book itself: a link's own path decides its page, a heading of this
    page is this page's; a mistyped file or README section is caught; a missing image is
    named with jupyter-book's warning and nothing is read outside its output."""
    skip_or_fail(site_tools_missing())
    source, out = tmp_path / "src", tmp_path / "out"
    for name, text in TINY.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text, encoding="utf-8")
    (source / "template").mkdir()
    (source / "template" / "template.yml").write_text(
        "jtex: v1\ntitle: t\nkind: site\noptions: []\nparts: []\n", encoding="utf-8"
    )
    toc = "".join(f"    - file: {name}\n" for name in TINY)
    (source / "myst.yml").write_text(
        f"version: 1\nproject:\n  title: T\n  toc:\n{toc}site:\n  template: ./template\n",
        encoding="utf-8",
    )
    built, warnings = site.run_jupyter_book(source)
    items: list = [site.Entry(name) for name in TINY if name != "notebooks/07_d.md"]
    site.render(built, items, out, ROOT, warnings)
    links = {text: href for href, text, _ in Page(out / "notebooks/05_a.html").links}
    repo = hosted.repo_url(ROOT)
    assert links["to-b"] == "06_b.html#setup"
    assert links["to-lab"] == "../labs/02_c_lab.html#setup"
    assert links["to-overview"] == "#overview" and links["to-setup"] == "#setup"
    assert links["to-b-top"] == "06_b.html"
    assert links["typo"] == f"{repo}/blob/main/notebooks/06_local_srever.ipynb"
    assert site.check_site(out) == []  # every page and anchor is there
    assert site.check_site(out, repo, ROOT) == [
        f"notebooks/05_a.html: {links['typo']} names no file of the repository",
        f"notebooks/05_a.html: {links['no-section']} README.md has no heading #no-such-section",
    ]
    with pytest.raises(
        site.SiteError,
        match=r"notebooks/07_d\.md shows \.\./images/nope\.png[\s\S]*Cannot find image",
    ):
        site.render(built, [*items, site.Entry("notebooks/07_d.md")], out, ROOT, warnings)


# --------------------------------------------------------------------------- the real site


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return built_site(tmp_path_factory)


def _page_of(source: str) -> str:
    return site.page_path(source)


@pytest.mark.slow
def test_every_notebook_and_student_lab_has_a_page_and_no_solution_does(built):
    pages = {p.relative_to(built.out).as_posix() for p in built.out.rglob("*.html")}
    expected = {_page_of(s) for s in [*TUTORIALS, *LABS]} | {
        "index.html",
        "laptop.html",
        "instructors.html",
    }
    assert pages == expected
    assert not list(built.out.rglob("solutions"))


@pytest.mark.slow
def test_the_sidebar_lists_the_course_in_order_grouped_by_day(built):
    source = TUTORIALS[0]
    folder = Path(_page_of(source)).parent.as_posix()
    sidebar = Page(built.out / _page_of(source)).sidebar
    targets = [posixpath.normpath(posixpath.join(folder, href)) for _, href, _ in sidebar]
    pages = [_page_of(s) for s in [*TUTORIALS, *LABS]]
    assert targets == ["laptop.html", *pages, "instructors.html"]
    groups = [group for group, _, _ in sidebar]
    assert groups[0] == "" and groups[-1] == ""
    assert list(dict.fromkeys(g for g in groups if g))[:2] == ["Day 1", "Day 2"]
    assert groups[-1 - len(LABS) : -1] == ["Labs"] * len(LABS)
    titles = {href: text for _, href, text in sidebar}
    assert titles[Path(_page_of(source)).name].startswith("00 · ")


@pytest.mark.slow
def test_every_link_image_and_anchor_resolves_and_no_page_shows_an_error(built):
    assert built.problems == []
    assert site.check_site(built.out) == []
    for path in built.out.rglob("*.html"):
        text = path.read_text(encoding="utf-8")
        assert "output-error" not in text and "Traceback" not in text, path


@pytest.mark.slow
def test_jupyter_book_warned_about_nothing_and_every_node_type_is_rendered(built):
    assert built.warnings == []
    assert built.site.unknown == set(), "teach tools/site.py's Renderer these node types"


@pytest.mark.slow
def test_every_notebook_page_launches_that_notebook(built):
    for source in [*TUTORIALS, *LABS]:
        page = Page(built.out / _page_of(source))
        launch = {cls.split()[-1]: href for href, _, cls in page.links if "launch" in cls.split()}
        assert launch["launch-colab"] == hosted.colab_url(source), source
        assert launch["launch-kaggle"] == hosted.kaggle_url(source), source
        assert source in launch["launch-colab"] and source in launch["launch-kaggle"]
        download = built.out / Path(_page_of(source)).parent / launch["launch-download"]
        assert download.read_bytes() == (ROOT / source).read_bytes(), source


@pytest.mark.slow
def test_plots_and_diagrams_are_images_in_the_site(built):
    for source in [*TUTORIALS, *LABS]:
        notebook = json.loads((ROOT / source).read_text(encoding="utf-8"))
        plots = sum(
            "image/png" in out.get("data", {})
            for cell in notebook["cells"]
            for out in cell.get("outputs", [])
        )
        markdown = "".join(
            "".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"
        )
        diagrams = len(re.findall(r"!\[[^\]]*\]\(\.\./images/", markdown))
        page = Page(built.out / _page_of(source))
        shown = [src for src, css in page.images if "image" in css.split()]
        figures = [src for src, css in page.images if "figure" in css.split()]
        assert (len(shown), len(figures)) == (plots, diagrams), source
        for src in shown + figures:
            data = (built.out / Path(_page_of(source)).parent / src).read_bytes()
            assert data.startswith(b"\x89PNG"), (source, src)


@pytest.mark.slow
def test_the_home_and_laptop_pages_say_what_the_readme_says(built):
    _, intro, quick = site.readme_sections(ROOT)
    home = words("".join(Page(built.out / "index.html").text))
    for paragraph in intro.split("\n\n"):
        assert words(paragraph) in home
    laptop = words("".join(Page(built.out / "laptop.html").text))
    for paragraph in quick.split("\n\n"):
        if not paragraph.startswith("```"):
            assert words(paragraph) in laptop
        else:
            for line in paragraph.strip("`").splitlines()[1:]:
                assert " ".join(line.split()) in laptop


@pytest.mark.slow
def test_a_broken_link_planted_in_a_copy_is_caught(built, tmp_path):
    copy = tmp_path / "site"
    shutil.copytree(built.out, copy)
    page = copy / _page_of(TUTORIALS[1])
    text = page.read_text(encoding="utf-8")
    assert 'href="../index.html#contents"' in text
    page.write_text(
        text.replace('href="../index.html#contents"', 'href="../index.html#nowhere"', 1).replace(
            f'href="{Path(TUTORIALS[2]).stem}.html"', 'href="99_missing.html"', 1
        ),
        encoding="utf-8",
    )
    plot = next(copy.joinpath("assets").glob("*.png"))
    plot.unlink()
    problems = "\n".join(site.check_site(copy))
    assert "no element has the id 'nowhere'" in problems
    assert "99_missing.html leads nowhere" in problems
    assert f"assets/{plot.name} leads nowhere" in problems
