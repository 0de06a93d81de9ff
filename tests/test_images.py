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

from tests.helpers import ROOT
from tools import draw_images, hosted

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


#: The only web images a notebook shows: the Colab and Kaggle launch badges of its navigation.
LAUNCH_BADGES = (hosted.COLAB_BADGE, hosted.KAGGLE_BADGE)


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
        if link in LAUNCH_BADGES:  # the services' own badges (tools/hosted.py), with alt text
            assert alt in ("Open in Colab", "Open in Kaggle")
            continue
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


def test_check_reports_a_changed_a_missing_and_an_unknown_image(tmp_path, monkeypatch):
    # Three diagrams are enough to see each kind of problem, and drawing them all is slow.
    first_three = dict(list(draw_images.DIAGRAMS.items())[:3])
    monkeypatch.setattr(draw_images, "DIAGRAMS", first_three)
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


def _parameters(path: Path) -> dict:
    """The literal assignments of a notebook's cell tagged ``parameters``."""
    import ast

    for cell in nbformat.read(path, as_version=4).cells:
        if "parameters" in cell.metadata.get("tags", []):
            tree = ast.parse(cell.source)
            return {
                target.id: ast.literal_eval(node.value)
                for node in tree.body
                if isinstance(node, ast.Assign)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
    return {}


def test_failure_timeline_shows_the_multi_worker_notebooks_defaults():
    """The kill → resume timeline (11b) draws the steps that notebook's parameters give."""
    found = [
        params
        for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
        if "CHECKPOINT_EVERY" in (params := _parameters(path))
    ]
    assert len(found) == 1, "one notebook defines CHECKPOINT_EVERY (11b, the killed worker)"
    params = found[0]
    assert draw_images.TIMELINE == {
        "steps": params["STEPS"],
        "checkpoint_every": params["CHECKPOINT_EVERY"],
        "fail_at": params["FAIL_AT_STEP"],
    }, "redraw the timeline with the notebook's defaults (draw_images.TIMELINE)"


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_ring_all_reduce_diagram_follows_the_algorithm(n):
    """The chunk-by-chunk diagram (12): 2(N-1) steps, one chunk sent per device and step,
    and every device ends with the sum of every chunk."""
    states = draw_images.ring_all_reduce_states(n)
    assert len(states) == 2 * (n - 1) + 1  # the start, then one state per step
    for _, _, sent in states[:-1]:
        assert all(0 <= c < n for c in sent)  # each device sends exactly one chunk
    every = frozenset(range(n))
    assert all(chunk == every for row in states[-1][1] for chunk in row)
    # after the reduce-scatter, each device holds the full sum of exactly one chunk
    after_rs = states[n - 1][1]
    assert all(sum(chunk == every for chunk in row) == 1 for row in after_rs)
