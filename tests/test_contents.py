"""Tests for tools/contents.py: the contents table, navigation lines and the link check.

Every relative link in a notebook (notebooks/, labs/, labs/solutions/) or in README.md must
lead to a file that exists, so that no sentence points to a notebook that is not there yet.
The check runs on a small temporary course tree here; ``--check`` on the real repository is
run by tests/test_structure.py.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from tools import contents

README = """\
# Course

See [notebook 00](notebooks/00_start.ipynb) and the [labs](labs/).

## Contents

<!-- contents:start -->
<!-- contents:end -->
"""


def write_notebook(path: Path, *markdown: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(m) for m in markdown]
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A course with two tutorials, one lab and its solution, all links good, all up to date."""
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "mask.png").write_bytes(b"png")
    write_notebook(
        tmp_path / "notebooks" / "00_start.ipynb",
        '# 00 · Start\n\nThe picture: ![mask](../images/mask.png "a title").',
        "## Summary\n\nNext: [01](01_next.ipynb#overview), [the web](https://example.org/x.ipynb).",
    )
    write_notebook(
        tmp_path / "notebooks" / "01_next.ipynb",
        "# 01 · Next\n\n[Overview](#overview), [a mail](mailto:a@example.org)",
        "## Summary",
    )
    write_notebook(
        tmp_path / "labs" / "solutions" / "01_next_lab.ipynb",
        "# Lab 01 · Next\n\nPractises [01](../../notebooks/01_next.ipynb).",
    )
    write_notebook(
        tmp_path / "labs" / "01_next_lab.ipynb",
        "# Lab 01 · Next\n\nPractises [01](../notebooks/01_next.ipynb).",
    )
    assert contents.main([], root=tmp_path) == 0  # write the contents table and navigation
    return tmp_path


def add_markdown(path: Path, source: str) -> None:
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(source))
    nbformat.write(nb, path)


def test_a_good_tree_passes_check(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert contents.broken_links(tree) == []
    assert contents.main(["--check"], root=tree) == 0
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    "folder",
    ["notebooks/01_next.ipynb", "labs/01_next_lab.ipynb", "labs/solutions/01_next_lab.ipynb"],
)
def test_check_fails_on_a_broken_link_in_any_notebook(
    tree: Path, capsys: pytest.CaptureFixture[str], folder: str
) -> None:
    add_markdown(tree / folder, "More in [the next notebook](02_missing.ipynb).")
    capsys.readouterr()
    assert contents.main(["--check"], root=tree) == 1
    out = capsys.readouterr().out
    assert f"broken link: {folder} (cell index 1): 02_missing.ipynb: no such file" in out
    assert "stale" not in out  # the link check does not make the generated parts stale


def test_check_fails_on_a_broken_link_in_the_readme(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tree / "README.md"
    readme.write_text(
        readme.read_text(encoding="utf-8") + "\nInstall: see [setup](docs/setup.md#linux).\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    assert contents.main(["--check"], root=tree) == 1
    line = len(readme.read_text(encoding="utf-8").splitlines())
    assert f"broken link: README.md (line {line}): docs/setup.md#linux: no such file" in (
        capsys.readouterr().out
    )


def test_updating_also_reports_broken_links(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    add_markdown(tree / "notebooks" / "00_start.ipynb", "[gone](../labs/09_gone_lab.ipynb)")
    capsys.readouterr()
    assert contents.main([], root=tree) == 1
    assert "broken link: notebooks/00_start.ipynb (cell index 1)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("link", "reason"),
    [
        ("[x](02_missing.ipynb)", "no such file"),
        ("[x](01_Next.ipynb)", "no such file (the name differs in case: 01_next.ipynb)"),
        ("[x](../../../outside.md)", "outside the repository"),
        ("[x](/etc/hosts)", "absolute path: use a path relative to this file"),
        ("[x](../images/missing.png)", "no such file"),
        ("![x](<../images/no such.png>)", "no such file"),
    ],
)
def test_reasons(tree: Path, link: str, reason: str) -> None:
    add_markdown(tree / "notebooks" / "00_start.ipynb", f"Text {link} more.")
    (problem,) = contents.broken_links(tree)
    assert problem.file == "notebooks/00_start.ipynb" and problem.where == "cell index 1"
    assert problem.reason == reason


def test_links_that_resolve(tree: Path) -> None:
    (tree / "images" / "two words.png").write_bytes(b"png")
    add_markdown(
        tree / "notebooks" / "00_start.ipynb",
        "[dir](../labs/) [dir2](../labs) [enc](../images/two%20words.png) "
        "[angle](<../images/two words.png>) [self](00_start.ipynb#top) [ftp](ftp://x/y) "
        "[top](#summary) [http](http://example.org/missing.ipynb)",
    )
    assert contents.broken_links(tree) == []


def test_link_targets() -> None:
    text = (
        "[a](one.ipynb) ![b](img/two.png 'title') [c](<three four.md>)\n"
        'Inline `[not](code.md)` and <a href="five.html">x</a> <img src="six.png"/>\n'
        "```\n[not](fenced.md)\n```\n"
        "[ref]: seven.md [![alt](pic.png)](target.md)\n"
        "[http](https://example.org) [anchor](#x) [e]()\n"
    )
    assert contents.link_targets(text) == [
        (1, "one.ipynb"),
        (1, "img/two.png"),
        (1, "three four.md"),
        (2, "five.html"),
        (2, "six.png"),
        (6, "seven.md"),
        (6, "pic.png"),
        (6, "target.md"),
        (7, "https://example.org"),
        (7, "#x"),
    ]


@pytest.mark.parametrize(
    "source",
    ["# 01 · T\n\n<!--navigation-->", "# 01 · T\n\n<!--navigation-->\n[old line](x.ipynb)"],
    ids=["bare marker", "marker and old line"],
)
def test_the_navigation_marker_gets_its_line(source: str) -> None:
    """A new notebook may end its first cell with the bare marker: it gets the line, once."""
    line = "<!--navigation-->\n[Contents](../README.md#contents)"
    new = contents._set_nav(source, line, "end")
    assert new == "# 01 · T\n\n" + line
    assert contents._set_nav(new, line, "end") == new  # idempotent


def test_a_part_follows_its_lesson_in_the_table_and_the_navigation(tree: Path) -> None:
    """A long lesson split into parts (``01_…``, ``01b_…``): the part comes right after it."""
    write_notebook(tree / "notebooks" / "01b_more.ipynb", "# 01b · More", "## Summary")
    write_notebook(tree / "notebooks" / "01c-bad.ipynb", "# 01c · Not a tutorial name")
    assert [p.name for p in contents.tutorials(tree)] == [
        "00_start.ipynb",
        "01_next.ipynb",
        "01b_more.ipynb",
    ]
    assert contents.main([], root=tree) == 0
    readme = (tree / "README.md").read_text(encoding="utf-8")
    assert readme.index("| 01 | [Next]") < readme.index("| 01b | [More](notebooks/01b_more.ipynb)")
    nav = nbformat.read(tree / "notebooks" / "01_next.ipynb", as_version=4).cells[0].source
    assert "01b_more.ipynb" in nav


# --------------------------------------------------------------------------- part references
def markdown_of(path: Path) -> str:
    return "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)


def test_a_mention_of_a_part_becomes_a_link(tree: Path, capsys) -> None:
    first = tree / "notebooks" / "00_start.ipynb"
    add_markdown(first, "As part 01 shows, and parts 00 and 01 both say; `part 01` is code.")
    add_markdown(tree / "labs" / "solutions" / "01_next_lab.ipynb", "Part 00 and Lab 01 again.")
    capsys.readouterr()
    assert contents.main(["--check"], root=tree) == 1
    assert "00_start.ipynb mentions a part or lab without a link" in capsys.readouterr().out
    assert contents.main([], root=tree) == 0
    text = markdown_of(first)
    assert "As [part 01](01_next.ipynb) shows" in text
    assert "parts [00](00_start.ipynb) and [01](01_next.ipynb) both say" in text
    assert "`part 01` is code" in text
    solution = markdown_of(tree / "labs" / "solutions" / "01_next_lab.ipynb")
    assert "[Part 00](../../notebooks/00_start.ipynb) and [Lab 01](01_next_lab.ipynb)" in solution
    assert "# Lab 01 · Next" in solution  # headings are left alone
    assert contents.main(["--check"], root=tree) == 0


def test_a_link_that_names_another_part_or_a_missing_part_fails(tree: Path, capsys) -> None:
    first = tree / "notebooks" / "00_start.ipynb"
    add_markdown(first, "See [part 01](00_start.ipynb), and part 07.")
    capsys.readouterr()
    assert contents.main([], root=tree) == 1
    out = capsys.readouterr().out
    assert "'part 01' links to 00_start.ipynb" in out
    assert "'part 07': no part 07" in out


def test_a_split_breaks_every_reference_to_the_old_part(tree: Path, capsys) -> None:
    add_markdown(tree / "notebooks" / "00_start.ipynb", "Part 01 does it.")
    assert contents.main([], root=tree) == 0
    old = tree / "notebooks" / "01_next.ipynb"
    old.rename(tree / "notebooks" / "01b_next.ipynb")  # the part is split or renamed
    capsys.readouterr()
    assert contents.main(["--check"], root=tree) == 1
    assert "[Part 01](01_next.ipynb)" in markdown_of(tree / "notebooks" / "00_start.ipynb")
    assert "01_next.ipynb: no such file" in capsys.readouterr().out


def test_generated_regions_are_not_linked() -> None:
    text = "<!-- agenda:start -->\n| Lab 01 | x |\n<!-- agenda:end -->\nLab 01 here."
    index = ({}, {"01": "labs/01_x_lab.ipynb"})
    new, problems = contents.link_mentions(text, "INSTRUCTORS.md", index)
    assert problems == []
    assert new == text.replace("Lab 01 here", "[Lab 01](labs/01_x_lab.ipynb) here")


def test_a_link_whose_text_wraps_a_line_is_a_link() -> None:
    text = "See [notebook\n11](11_x.ipynb) and [part 11](11_x.ipynb)."
    index = ({"11": "notebooks/11_x.ipynb"}, {})
    assert contents.link_mentions(text, "notebooks/05_y.ipynb", index) == (text, [])
