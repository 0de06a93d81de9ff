"""The diagrams in images/: every one a notebook shows exists, and all are reproducible.

tools/draw_images.py draws them; ``--check`` redraws into a temporary folder and compares
pixel by pixel, so a diagram edited by hand, or a drawing change not re-run, fails here."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from PIL import Image

from tests.conftest import ROOT
from tools import draw_images

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "labs").rglob("*.ipynb"))
# ![alt](path "optional title") in markdown, and <img src="path"> in HTML.
MARKDOWN_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<path>[^)\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_IMAGE = re.compile(r"<img\b[^>]*\bsrc=[\"'](?P<path>[^\"']+)[\"']", re.I)


def image_links(path: Path) -> list[tuple[str, str]]:
    """(alt text, link) of every image in the markdown cells of a notebook."""
    links = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        links += [(m["alt"], m["path"]) for m in MARKDOWN_IMAGE.finditer(cell.source)]
        links += [("<img>", m["path"]) for m in HTML_IMAGE.finditer(cell.source)]
    return links


def local(link: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", link, re.I)  # http:, https:, data:, attachment:


def test_image_links_are_found():
    text = '![a](../images/x.png) ![b](../images/y.png "title") <img src="../images/z.png">'
    found = [m["path"] for m in MARKDOWN_IMAGE.finditer(text)]
    found += [m["path"] for m in HTML_IMAGE.finditer(text)]
    assert found == ["../images/x.png", "../images/y.png", "../images/z.png"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_image_a_notebook_shows_exists(path):
    for alt, link in image_links(path):
        assert local(link), f"{link}: images come from images/, not from the web"
        target = (path.parent / link).resolve()
        assert target.is_file(), (
            f"{link} (alt {alt!r}) does not exist: run python -m tools.draw_images"
        )
        assert target.parent == ROOT / "images", f"{link}: diagrams live in images/"
        assert alt.strip(), f"{link}: give the image an alt text that says what it shows"


def test_every_drawn_image_is_shown_somewhere():
    shown = {
        (path.parent / link).resolve().name
        for path in NOTEBOOKS
        for _, link in image_links(path)
        if local(link)
    }
    unused = sorted(set(draw_images.DIAGRAMS) - shown)
    assert not unused, f"drawn but shown by no notebook: {unused}"


def test_images_are_up_to_date():
    proc = subprocess.run(
        [sys.executable, "-m", "tools.draw_images", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_drawing_is_deterministic(tmp_path):
    first = draw_images.draw_all(tmp_path / "a")
    second = draw_images.draw_all(tmp_path / "b")
    assert [p.name for p in first] == list(draw_images.DIAGRAMS)
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), f"{a.name} differs between two drawings"
        with Image.open(a) as image:
            assert not {"Software", "Creation Time", "date:create"} & set(image.info), image.info


def test_check_reports_a_changed_a_missing_and_an_unknown_image(tmp_path):
    committed, fresh = tmp_path / "committed", tmp_path / "fresh"
    draw_images.draw_all(fresh)
    shutil.copytree(fresh, committed)
    assert draw_images.compare(committed, fresh) == []

    names = list(draw_images.DIAGRAMS)
    changed = committed / names[0]
    with Image.open(changed) as image:
        pixels = np.asarray(image).copy()
    pixels[0, 0] = 255 - pixels[0, 0]
    Image.fromarray(pixels).save(changed)
    (committed / names[1]).unlink()
    shutil.copy(fresh / names[2], committed / "drawn_by_hand.png")

    problems = draw_images.compare(committed, fresh)
    assert any(p.startswith(f"{names[0]}: 1 pixels differ") for p in problems), problems
    assert any(p.startswith(f"{names[1]}: missing") for p in problems), problems
    assert any(p.startswith("drawn_by_hand.png: not drawn") for p in problems), problems
    assert len(problems) == 3, problems


def test_check_exits_1_and_says_how_to_fix(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tools.draw_images", "--check", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "missing" in proc.stderr and "python -m tools.draw_images" in proc.stderr
