"""Every tutorial at a second device count, and every lab: its solution and its student version.

A tutorial's first run is nbval's, at its default parameters (``notebooks/`` is a test path).
Here each tutorial and lab solution with a ``NUM_DEVICES`` parameter runs once more at the
count :mod:`tests.device_counts` gives it (3, 8 or 1, taking turns), and each lab's student
version runs at its default. Every run is its own test in its own xdist group, so that
``pytest -n 3 --dist loadgroup`` spreads them over the workers; all are marked ``notebook``
(``make check``), except the one smoke run of a lab kernel that ``make test`` keeps, marked
``smoke``: the solution of :data:`SMOKE_LAB`, about 5 s (its kernel imports TensorFlow). The
tutorials' runs at another count are also marked ``counts``: ``make counts`` runs them, not
``make check``, and CI runs both.

No run may show a learner anything on stderr (issue 26: a warning box under a cluster cell):
each run here asserts it on the notebook it executed, as JupyterLab's Run All would show it
(``tools.nbrun`` forwards C-level output too), and nbval's run of each tutorial fails a cell
that writes to stderr (``tests/conftest.py``). No extra run is needed for that. A lab's kernel
is forked from a process that imported TensorFlow (tests/forked_kernel.py), so what the
import itself prints is seen by the tutorials' runs at another count, in fresh kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import labrun
from tests.device_counts import COUNTS, notebooks, other_counts, parameters, run_with
from tests.helpers import ROOT, assert_no_stderr, notebook, stderr_outputs

SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("*.ipynb"))
TUTORIALS = sorted((ROOT / "notebooks").glob("*.ipynb"))
#: The lab whose solution run stays in the fast suite (the quickest: no TensorFlow training,
#: though since issue 17 its checks hand TF_CONFIG to TensorFlow's own resolver).
SMOKE_LAB = "07_deployment_lab.ipynb"


def _param(path: Path, *marks, kind: str):
    group = pytest.mark.xdist_group(f"{kind}:{path.name}")
    return pytest.param(path, id=path.stem, marks=[group, *marks])


def _notebook_marks(path: Path) -> list:
    return [pytest.mark.smoke] if path.name == SMOKE_LAB else [pytest.mark.notebook]


TUTORIAL_RUNS = [
    _param(p, pytest.mark.notebook, pytest.mark.counts, kind="count")
    for p, _ in other_counts().items()
    if p.parent.name == "notebooks"
]


@pytest.fixture
def lab_runs(monkeypatch):
    """The notebooks :mod:`tests.labrun` executed in this test, as they ran."""
    runs = []
    execute = labrun.execute

    def recorded(path, parameters=None):
        nb, reruns = execute(path, parameters)
        runs.append((path, nb, reruns))
        return nb, reruns

    monkeypatch.setattr(labrun, "execute", recorded)
    return runs


def _assert_lab_runs_show_no_stderr(runs) -> None:
    assert runs, "the lab did not run through tests.labrun.execute"
    for path, nb, reruns in runs:
        assert_no_stderr(nb.cells, path.relative_to(ROOT).as_posix())
        assert_no_stderr([again for _, again in reruns], f"{path.name}'s check cells, run again")


@pytest.mark.parametrize("path", TUTORIAL_RUNS)
def test_tutorial_runs_at_another_device_count(path, tmp_path):
    run_with(path, other_counts()[path], tmp_path)
    (executed,) = (tmp_path / "out").rglob("*.ipynb")
    cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
    assert_no_stderr(cells, f"{path.name} at NUM_DEVICES={other_counts()[path]}")


@pytest.mark.parametrize(
    "path", [_param(p, *_notebook_marks(p), kind="solution") for p in SOLUTIONS]
)
def test_lab_solution_runs_and_every_check_is_correct(path, lab_runs):
    count = other_counts().get(path)
    labrun.check_solution(path.name, {"NUM_DEVICES": count} if count else None)
    _assert_lab_runs_show_no_stderr(lab_runs)


@pytest.mark.parametrize(
    "path", [_param(p, pytest.mark.notebook, kind="student") for p in SOLUTIONS]
)
def test_student_lab_runs_to_the_end_with_every_check_not_attempted(path, lab_runs):
    labrun.check_student_lab(path.name)
    _assert_lab_runs_show_no_stderr(lab_runs)


def test_every_notebook_that_sets_up_devices_takes_the_count_as_a_parameter():
    """A notebook that calls devices.setup must let NUM_DEVICES be changed, or the runs
    above would silently skip it."""
    uses_setup = [p for p in TUTORIALS + SOLUTIONS if "devices.setup(" in p.read_text("utf-8")]
    assert uses_setup, "no notebook calls devices.setup: has the API changed?"
    missing = {p for p in set(uses_setup) - set(notebooks()) if p.name not in ONE_DEVICE}
    assert not missing, sorted(str(p.relative_to(ROOT)) for p in missing)
    for name in ONE_DEVICE:  # their one device is the lesson: setup(1), said in the notebook
        (path,) = [p for p in TUTORIALS if p.name == name]
        assert "devices.setup(1)" in path.read_text("utf-8"), name


#: Notebooks that run on one device by design, with no NUM_DEVICES to change: their steps run on
#: one device of the kernel's process (12d's input pipelines; its ps step runs in a server).
ONE_DEVICE = {"12d_input_and_ps_traces.ipynb"}


def test_each_notebook_gets_one_other_count_and_every_count_is_run():
    counts = other_counts()
    for path, count in counts.items():
        assert count in COUNTS and count != parameters(path)["NUM_DEVICES"], (path, count)
    assert set(counts.values()) == set(COUNTS), "every count is run for some notebook"
    assert {p for p in counts if p.parent.name == "notebooks"} == {
        p.values[0] for p in TUTORIAL_RUNS
    }


def test_there_is_a_lab_and_the_smoke_lab_exists():
    assert SOLUTIONS and (ROOT / "labs" / "solutions" / SMOKE_LAB).exists()
    assert (ROOT / "labs" / SMOKE_LAB).exists()


# --------------------------------------------------------------------------- stderr, as seen

#: A notebook doctored as issue 26 found two: a clean cell, then output a learner sees in a red
#: box: a warning (ExposureWarning is one), a print to stderr, and C code writing to fd 2.
DOCTORED = (
    "print('fine')",
    "import warnings\nwarnings.warn('servers listen on every interface', UserWarning)",
    "import sys\nprint('a note on stderr', file=sys.stderr)",
    # ipykernel's reader thread takes fd 2's text from a pipe: the cell waits (at most 10 s)
    # until the pipe is empty, or on a busy machine the text can reach the kernel's stream
    # after the cell ended, and nbclient, done with the cell, no longer records it.
    "import fcntl, os, struct, termios, time\n"
    "os.write(2, b'from C: fd 2\\n')\n"
    "deadline = time.monotonic() + 10\n"
    "while time.monotonic() < deadline:\n"
    "    try:\n"
    "        if not struct.unpack('i', fcntl.ioctl(2, termios.FIONREAD, bytes(4)))[0]:\n"
    "            break\n"
    "    except OSError:  # not a pipe: nbval's kernel does not forward fd 2\n"
    "        break\n"
    "    time.sleep(0.01)\n"
    "print('after')",
)


@pytest.mark.slow
def test_a_run_that_writes_to_stderr_fails_with_the_cell_and_its_text(tmp_path):
    """The assertion the lab and second-count runs make, on a notebook run as they run one
    (``tools.nbrun``, as JupyterLab: a fresh kernel, descriptor 2 forwarded)."""
    from tools import nbrun

    nb = nbrun.execute(tmp_path / "doctored.ipynb", nb=notebook(*DOCTORED), timeout=60).nb
    found = stderr_outputs(nb.cells)
    assert [line.split(" (")[0] for line in found] == ["code cell 2", "code cell 3", "code cell 4"]
    assert "UserWarning: servers listen on every interface" in found[0]
    assert found[1].endswith(": a note on stderr") and found[2].endswith(": from C: fd 2")
    with pytest.raises(AssertionError, match=r"doctored wrote to stderr .*\n\s*code cell 2 "):
        assert_no_stderr(nb.cells, "doctored")
    assert_no_stderr(nb.cells[:1], "its first cell")


@pytest.mark.slow
def test_nbval_fails_a_tutorial_cell_that_writes_to_stderr(tmp_path):
    """nbval's run of a tutorial, with tests/conftest.py loaded as in ``make check``: the
    clean cell passes; the warning and the print to stderr fail, naming their text. (Under
    nbval the kernel does not forward descriptor 2: the fd cell passes there.)"""
    path = tmp_path / "doctored.ipynb"
    path.write_text(json.dumps(notebook(*DOCTORED)), encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    cmd += ["-n", "0", "-q", "--nbval-lax", "--rootdir", str(tmp_path), str(path)]
    env = {**os.environ, "DTF_FRESH_KERNELS": "1"}  # no script server for one small notebook
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "2 failed, 2 passed" in out, out
    assert "Cell 1: the cell wrote to stderr" in out and "servers listen on every interface" in out
    assert "Cell 2: the cell wrote to stderr, which JupyterLab shows in a red box: a note" in out
