"""Every notebook follows the course template, and stored outputs are clean.

Tutorials are committed with outputs from one fresh in-order run (make outputs); these
tests fail when a notebook was edited without re-running it, when an output holds an error,
a machine path or TensorFlow's C++ log noise, or when the navigation is stale."""

import re
import subprocess
import sys

import nbformat
import pytest

from tests.helpers import ROOT
from tools.nbtools import TUTORIAL_NAME, part_of

TUTORIALS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("*.ipynb"))
STUDENT_LABS = sorted((ROOT / "labs").glob("*.ipynb"))
MACHINE_PATH = re.compile(
    r"(/root\b|/home/|/tmp/|/Users/|/private/var/|[A-Z]:\\\\Users|site-packages)"
)
TF_NOISE = re.compile(
    r"(^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] |^[IWEF]\d{4} |oneDNN custom operations"
    r"|Unable to register cu|cuda_driver|computation_placer|absl::InitializeLog)",
    re.M,
)


def load(path):
    return nbformat.read(path, as_version=4)


def output_text(output) -> str:
    if output.output_type == "stream":
        return output.text
    if output.output_type == "error":
        return "\n".join(output.traceback)
    data = output.get("data", {})
    return "\n".join(str(v) for k, v in data.items() if k.startswith("text/"))


def test_there_are_tutorials():
    assert [p.name[:2] for p in TUTORIALS][:1] == ["00"]


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_template(path):
    nb = load(path)
    assert TUTORIAL_NAME.fullmatch(path.name), "name: NN_topic.ipynb (a part: NNb_topic.ipynb)"
    first = nb.cells[0]
    assert first.cell_type == "markdown"
    m = re.match(r"# (\d{2}[a-z]?) · \S", first.source)
    assert m and m.group(1) == part_of(path), "first line: '# NN · Title' matching the file"
    assert "<!--navigation-->" in first.source and "<!--navigation-->" in nb.cells[-1].source
    headings = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown"]
    assert "## Overview" in headings and "## Setup" in headings
    assert nb.cells[-1].cell_type == "markdown" and nb.cells[-1].source.startswith("## Summary")
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and nb.cells[tagged[0]].cell_type == "code", "one parameters cell"
    setup_md = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Setup"))
    assert tagged[0] < setup_md, "parameters come before Setup"
    setup_code = next(c for c in nb.cells[setup_md:] if c.cell_type == "code").source
    if JAX_BACKEND in setup_code:
        check_jax_setup(nb, setup_code)
        return
    assert "quiet.quiet(" in setup_code and "import tensorflow" in setup_code  # any level
    assert setup_code.index("quiet.quiet(") < setup_code.index("import tensorflow"), (
        "TensorFlow's log settings must be set before it is imported"
    )
    before = "\n".join(c.source for c in nb.cells[:setup_md] if c.cell_type == "code")
    assert "import tensorflow" not in before


# The one declared exception to the Setup template: a notebook that runs Keras 3 on JAX
# (notebook 15) in its own kernel. It never imports TensorFlow, so it has nothing for
# quiet() to silence; instead Keras' backend and XLA's host device count, both read once per
# process, must be set before Keras and JAX are imported.
JAX_BACKEND = 'os.environ["KERAS_BACKEND"] = "jax"'
TF_IMPORT = re.compile(r"^\s*(import tensorflow|from tensorflow)\b", re.M)


def check_jax_setup(nb, setup_code):
    for setting in ('os.environ["KERAS_BACKEND"]', 'os.environ["XLA_FLAGS"]'):
        assert setting in setup_code, f"Setup must set {setting}"
        for module in ("import keras", "import jax"):
            statement = re.search(rf"^{module}\b", setup_code, re.M)  # a statement, not a comment
            assert statement, f"Setup must {module}"
            assert setup_code.index(setting) < statement.start(), (
                f"{setting} must be set before `{module}`: it is read once per process"
            )
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert not TF_IMPORT.search(code), "a Keras-on-JAX notebook must not import TensorFlow"


def test_the_jax_setup_check_fails_on_a_late_backend_or_a_tensorflow_import():
    """The exception is a check of its own, not a way around the template."""
    good = (
        'import os\n\nos.environ["KERAS_BACKEND"] = "jax"\nos.environ["XLA_FLAGS"] = "x"\n'
        "import jax\nimport keras\n"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(good)])
    check_jax_setup(nb, good)
    late = "import keras\n" + good  # Keras imported before its backend is chosen
    with pytest.raises(AssertionError, match="before `import keras`"):
        check_jax_setup(nb, late)
    nb.cells.append(nbformat.v4.new_code_cell("import tensorflow as tf"))
    with pytest.raises(AssertionError, match="must not import TensorFlow"):
        check_jax_setup(nb, good)


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_stored_outputs_from_one_clean_in_order_run(path):
    nb = load(path)
    code = [c for c in nb.cells if c.cell_type == "code"]
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), "re-run with: make outputs"
    assert not any("injected-parameters" in c.metadata.get("tags", []) for c in code)
    for i, cell in enumerate(code, 1):
        for out in cell.outputs:
            assert out.output_type != "error", f"cell [{i}] stored an error"
            text = output_text(out)
            assert not MACHINE_PATH.search(text), f"cell [{i}] shows a machine path: {text[:300]}"
            assert not TF_NOISE.search(text), f"cell [{i}] shows TensorFlow log noise: {text[:300]}"
            assert not (out.output_type == "stream" and out.name == "stderr"), (
                f"cell [{i}] wrote to stderr: {out.text[:300]}"
            )


@pytest.mark.parametrize(
    "path", SOLUTIONS + STUDENT_LABS, ids=lambda p: p.parent.name + "/" + p.name
)
def test_labs_are_committed_without_outputs(path):
    nb = load(path)
    assert re.match(r"# Lab (\d{2}) · \S", nb.cells[0].source), "first line: '# Lab NN · Title'"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None


MAX_CODE_LINES = 30
# nbval's comment markers (# NBVAL_CHECK_OUTPUT, ...): nbval strips the leading #s of a line.
NBVAL_COMMENT = re.compile(r"^\s*#+\s*(NBVAL|PYTEST_VALIDATE)_[A-Z_]+\s*$", re.M)
ALL_NOTEBOOKS = TUTORIALS + SOLUTIONS + STUDENT_LABS


def notebook_id(path):
    return path.relative_to(ROOT).as_posix()


def code_cells(path):
    return [c for c in load(path).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=notebook_id)
def test_code_cells_are_short(path):
    """A learner reads a code cell at a glance: split long ones, with prose in between."""
    long = [
        f"code cell {i} ({len(c.source.splitlines())} lines): {c.source.splitlines()[0][:60]!r}"
        for i, c in enumerate(code_cells(path), 1)
        if len(c.source.splitlines()) > MAX_CODE_LINES
    ]
    assert not long, f"code cells longer than {MAX_CODE_LINES} lines: " + "; ".join(long)


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=notebook_id)
def test_nbval_markers_are_tags_not_comments(path):
    """nbval reads its markers from cell tags too; a tag keeps the code free of test plumbing."""
    marked = [i for i, c in enumerate(code_cells(path), 1) if NBVAL_COMMENT.search(c.source)]
    assert not marked, (
        f"code cells {marked} carry an nbval comment: delete the comment and give the cell "
        "the matching tag instead (e.g. nbval-check-output)"
    )


def test_nbval_comment_pattern_matches_what_nbval_reads():
    from nbval.plugin import comment_markers, metadata_tags

    for marker in comment_markers:
        assert NBVAL_COMMENT.search(f"x = 1\n  ## {marker}\n"), marker
    assert not NBVAL_COMMENT.search('print("# NBVAL_CHECK_OUTPUT")')
    assert "nbval-check-output" in metadata_tags


def test_navigation_and_contents_are_up_to_date():
    proc = subprocess.run(
        [sys.executable, "-m", "tools.contents", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "src", "tools", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout
