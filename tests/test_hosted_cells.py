"""The hosted setup cell and the launch badges: present everywhere, from one URL, never stale.

Fast (no kernel, no TensorFlow): the end-to-end run of the setup cell in a simulated hosted
runtime is tests/test_hosted.py (`nox -s hosted`). The setup installer's own logic (what it
installs and what it leaves alone) is tested here with a fake `pip`.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

from tests.helpers import ROOT
from tools import contents, hosted

URL = hosted.repo_url()


def test_every_notebook_and_lab_starts_with_the_setup_cell():
    assert hosted.main(["--check"]) == 0
    paths = hosted.notebooks()
    assert len(paths) == len(list(ROOT.glob("notebooks/[0-9]*.ipynb"))) + 2 * 7
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert hosted.TAG in first.metadata.get("tags", []), path.name
        assert f'"{URL}"' in first.source and not first.outputs
        ast.parse(first.source)  # plain Python: it must run before anything is installed
        folder = path.parent.relative_to(ROOT).as_posix()  # the notebook's own folder
        assert f'os.chdir("dtf-course/{folder}")' in first.source


def test_the_badges_come_from_the_project_url():
    for path in contents.tutorials():
        first = nbformat.read(path, as_version=4).cells[0].source
        rel = f"notebooks/{path.name}"
        assert hosted.badges(rel) in first, path.name
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert hosted.badges("notebooks/00_setup_check.ipynb") in readme
    assert hosted.badges("labs/02_towers_lab.ipynb") in readme
    colab = hosted.colab_url("notebooks/00_setup_check.ipynb")
    github = URL.removeprefix("https://github.com/")
    assert colab == (
        f"https://colab.research.google.com/github/{github}/blob/"
        f"{hosted.release_ref()}/notebooks/00_setup_check.ipynb"
    )
    assert hosted.kaggle_url("labs/x.ipynb").startswith(
        f"https://kaggle.com/kernels/welcome?src={URL}/blob/"
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of what the tools read: pyproject, the package's version, notebooks, labs."""
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "src" / "dtf").mkdir(parents=True)
    shutil.copy(ROOT / "src" / "dtf" / "__init__.py", tmp_path / "src" / "dtf" / "__init__.py")
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copytree(ROOT / "labs", tmp_path / "labs")
    return tmp_path


def test_a_new_url_makes_every_cell_stale_until_written(tree: Path):
    pyproject = tree / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(URL, "https://github.com/fork/course"))
    path = tree / "notebooks" / "00_setup_check.ipynb"
    assert hosted.update(path, tree) is True  # rewritten with the fork's URL ...
    source = next(c for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert '"https://github.com/fork/course"' in source.source
    assert hosted.update(path, tree) is False  # ... and then up to date (idempotent)
    lab = tree / "labs" / "solutions" / "02_towers_lab.ipynb"
    assert hosted.update(lab, tree) is True
    first = nbformat.read(lab, as_version=4).cells[0].source
    assert "colab.research.google.com/github/fork/course/blob/" in first
    assert first.count(hosted.BADGE_MARK) == 1


def test_a_removed_setup_cell_comes_back_first(tree: Path):
    path = tree / "notebooks" / "03_manual_placement_and_towers.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if hosted.TAG not in c.metadata.get("tags", [])]
    nbformat.write(nb, path)
    assert hosted.update(path, tree) is True
    cells = nbformat.read(path, as_version=4).cells
    codes = [c for c in cells if c.cell_type == "code"]
    assert hosted.TAG in codes[0].metadata["tags"] and "parameters" in codes[1].metadata["tags"]


# --------------------------------------------------------------------------- the installer


@pytest.fixture
def setup_module():
    spec = importlib.util.spec_from_file_location("hosted_setup", ROOT / "tools/hosted_setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_installer_adds_only_what_the_runtime_lacks(setup_module, monkeypatch, capsys):
    have = {"tensorflow": "2.20.0", "keras": "3.13.2", "numpy": "2.1.3", "pandas": "2.2.3"}
    have |= {"psutil": "5.9.5", "pyyaml": "6.0.3", "scikit-learn": "1.6.1", "jax": "0.7.2"}
    have |= {"matplotlib": "3.10.0", "dtf-hands-on": "0.0.1"}
    calls = []
    monkeypatch.setattr(setup_module, "installed", lambda: dict(have))
    monkeypatch.setattr(setup_module, "pip", lambda *args: calls.append(args))
    assert setup_module.main() == 0
    first, second = calls
    assert [a for a in first if not a.startswith("-") and "/" not in a] == [
        "kubernetes>=35.0,<36",
        "kubeflow-training>=1.9,<2",
    ]
    assert first[first.index("--constraint") + 1].endswith(".txt")
    assert second == ("--no-deps", "--editable", str(setup_module.ROOT))
    said = capsys.readouterr().out
    assert "The runtime's own: tensorflow 2.20.0, keras 3.13.2" in said


def test_the_installer_holds_the_runtime_at_its_versions(setup_module, monkeypatch):
    """The constraints file pins every installed distribution but the course's own."""
    have = {"tensorflow": "2.20.0", "numpy": "2.1.3", "dtf-hands-on": "0.0.1"}
    written = {}

    def pip(*args):
        if "--constraint" in args:
            written["text"] = Path(args[args.index("--constraint") + 1]).read_text()

    monkeypatch.setattr(setup_module, "installed", lambda: dict(have))
    monkeypatch.setattr(setup_module, "pip", pip)
    setup_module.main()
    assert written["text"].split() == ["numpy==2.1.3", "tensorflow==2.20.0"]


def test_a_runtime_without_tensorflow_gets_a_clear_refusal(setup_module, monkeypatch):
    monkeypatch.setattr(setup_module, "installed", lambda: {"numpy": "2.1.3"})
    monkeypatch.setattr(setup_module, "pip", lambda *a: pytest.fail("nothing may be installed"))
    with pytest.raises(SystemExit, match="This runtime has no TensorFlow.*never installs one"):
        setup_module.main()


@pytest.mark.parametrize("name", ["hosted_setup.py", "versions.py"])
def test_the_installer_runs_on_the_standard_library_alone(name):
    """It runs before anything is installed: the standard library and tools/versions.py."""
    tree = ast.parse((ROOT / "tools" / name).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    outside = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names}
    assert outside - {"__future__"} <= {"tools.versions"}


# --------------------------------------------------------------------------- the room


def expand(cell: str, order: list[str]) -> list[str]:
    """The parts a table cell names: "02, 05, 11–11e; labs 01, 06" (a range in course order)."""
    parts, labs = [], False
    for chunk in re.split(r"[,;]\s*", re.sub(r"\([^)]*\)", "", cell)):
        chunk = chunk.strip()
        if re.match(r"labs? ", chunk):
            labs, chunk = True, chunk.split(" ", 1)[1]
        if not chunk:
            continue
        if labs:
            parts.append(f"Lab {chunk}")
        elif "–" in chunk:
            first, last = chunk.split("–")
            parts += order[order.index(first) : order.index(last) + 1]
        else:
            parts.append(chunk)
    return parts


def test_the_room_section_names_every_part_once_in_its_memory_table():
    guide = (ROOT / "INSTRUCTORS.md").read_text(encoding="utf-8")
    section = guide.split("## A room that cannot install")[1].split("\n## ")[0]
    for needed in ("Binder is not supported", "constraints/colab.txt", "Not run here", "13c"):
        assert needed in section, needed
    order = [contents.title_of(p)[0] for p in contents.tutorials()]
    labs = [f"Lab {contents.lab_info(p)[0]}" for p in contents.labs()]
    rows = [ln for ln in section.splitlines() if re.match(r"\s*\| [0-9]", ln)]
    rows = [re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", row) for row in rows]  # links: their text
    named = [part for row in rows for part in expand(row.split("|")[1], order)]
    assert sorted(named) == sorted(order + labs), "every part and lab once in the memory table"


def test_check_reports_a_stale_cell_and_changes_nothing(tree: Path, capsys):
    """--check is update() without writing: the same rules, so the two cannot drift apart."""
    path = tree / "notebooks" / "10_mirrored_strategy_custom_loop.ipynb"
    nb = nbformat.read(path, as_version=4)
    setup = next(c for c in nb.cells if hosted.TAG in c.metadata.get("tags", []))
    setup.source += "\nprint('changed')"
    nbformat.write(nb, path)
    before = path.read_bytes()
    assert hosted.main(["--check"], root=tree) == 1
    assert "notebooks/10_mirrored_strategy_custom_loop.ipynb" in capsys.readouterr().out
    assert path.read_bytes() == before
    assert hosted.main([], root=tree) == 0 and hosted.main(["--check"], root=tree) == 0
