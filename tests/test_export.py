"""tools/export.py: the notebook cells tagged ``export:PATH`` are the source of the package
files they write, and the package must not go stale."""

from __future__ import annotations

import ast

import nbformat
import pytest

from tests.conftest import ROOT, notebook
from tools import export


def _repo(tmp_path, *cells, name="04_x.ipynb"):
    """A throwaway repository with one tutorial whose cells are (source, tags) pairs."""
    (tmp_path / "notebooks").mkdir(exist_ok=True)
    nb = notebook(*(src for src, _ in cells))
    for cell, (_, tags) in zip(nb.cells, cells, strict=True):
        cell.metadata["tags"] = list(tags)
    nbformat.write(nb, tmp_path / "notebooks" / name)
    return tmp_path


def test_the_package_is_fresh():
    assert export.stale() == [], "run: python -m tools.export (make export)"


def test_every_exported_file_parses_and_names_its_notebook():
    for target, (source, _) in export.exports().items():
        text = target.read_text(encoding="utf-8")
        ast.parse(text, filename=str(target))
        assert source.relative_to(ROOT).as_posix() in text.splitlines()[0]


def test_tagged_cells_are_written_in_order_and_untagged_ones_left_out(tmp_path):
    root = _repo(
        tmp_path,
        ("%%writefile build/w.py\nimport math", ["export:dtf/w.py"]),
        ("print('not exported')", []),
        ("%%writefile -a build/w.py\nX = math.pi", ["export:dtf/w.py", "nbval-check-output"]),
    )
    assert export.stale(root) == [root / "src/dtf/w.py"]
    assert export.write(root) == [root / "src/dtf/w.py"]
    text = (root / "src/dtf/w.py").read_text()
    assert text.startswith("# GENERATED from notebooks/04_x.ipynb")
    assert text.endswith("import math\n\n\nX = math.pi\n")
    assert "not exported" not in text and "%%" not in text
    assert export.stale(root) == [] and export.write(root) == []


def test_editing_the_notebook_makes_the_file_stale(tmp_path):
    root = _repo(tmp_path, ("X = 1", ["export:dtf/w.py"]))
    export.write(root)
    _repo(tmp_path, ("X = 2", ["export:dtf/w.py"]))
    assert export.stale(root) == [root / "src/dtf/w.py"]


@pytest.mark.parametrize(
    ("source", "tag", "message"),
    [
        ("%%time\nX = 1", "export:dtf/w.py", "only %%writefile"),
        ("X = 1\n!ls", "export:dtf/w.py", "magics or shell"),
        ("X = 1", "export:../w.py", "under dtf/"),
        ("X = 1", "export:dtf/w.txt", "under dtf/"),
    ],
)
def test_a_malformed_export_is_refused_with_the_cell_named(tmp_path, source, tag, message):
    root = _repo(tmp_path, (source, [tag]))
    with pytest.raises(export.ExportError, match=message) as info:
        export.exports(root)
    assert "notebooks/04_x.ipynb cell 0" in str(info.value)


def test_one_file_has_one_source_notebook(tmp_path):
    _repo(tmp_path, ("X = 1", ["export:dtf/w.py"]), name="04_a.ipynb")
    root = _repo(tmp_path, ("Y = 1", ["export:dtf/w.py"]), name="05_b.ipynb")
    with pytest.raises(export.ExportError, match="one file, one source notebook"):
        export.exports(root)


def test_check_exits_1_on_a_stale_file_and_names_it(tmp_path, monkeypatch, capsys):
    root = _repo(tmp_path, ("X = 1", ["export:dtf/w.py"]))
    monkeypatch.setattr(export, "REPO_ROOT", root)
    monkeypatch.setattr(export, "stale", lambda: [root / "src/dtf/w.py"])
    assert export.main(["--check"]) == 1
    assert "stale: src/dtf/w.py" in capsys.readouterr().out
