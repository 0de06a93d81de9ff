"""The hosted path, end to end: a simulated Colab or Kaggle runtime runs the one-day track.

`nox -s hosted` runs this module (marker `hosted`; `make test` and `make check` leave it out:
it installs a TensorFlow and takes minutes). It builds what a learner meets in a hosted runtime:

- a virtual environment with Colab's versions only (constraints/colab.txt): TensorFlow, Keras,
  tf_keras, JAX and ipykernel, and whatever they require; no course package, no test tools;
- the runtime's marker variable (`KAGGLE_KERNEL_RUN_TYPE`) set in the kernel;
- the notebooks copied outside the repository, into a folder like Colab's `/content`;
- the course fetched by the setup cell through `DTF_COURSE_URL`, from a local clone of this
  repository's HEAD tagged with the release tag (uncommitted changes are not in it).

Then the one-day track's tutorials (tools/agenda.py) and Lab 02's solution run there,
setup cell included, and must pass; the setup cell must have installed what the runtime lacked
and nothing that it had.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tools import hosted, nbrun
from tools.agenda import ONE_DAY
from tools.versions import canonical, tensorflow_wheel

pytestmark = [pytest.mark.hosted, pytest.mark.slow, pytest.mark.xdist_group("hosted")]
KERNEL = "hosted-sim"
#: The runtime's own stack: what Colab has of the course's requirements (all but the cluster
#: schemas), at Colab's versions, without the course.
TENSORFLOW = tensorflow_wheel()  # as noxfile.py installs it
RUNTIME = (TENSORFLOW, "keras", "jax", "jaxlib", "ipykernel", "matplotlib", "pandas")
RUNTIME += ("scikit-learn", "psutil", "pyyaml")


def freeze(python) -> list[str]:
    """`name==version` of every distribution in `python`'s environment, names normalised."""
    lines = run(python, "-m", "pip", "list", "--format=freeze").splitlines()
    return [
        canonical(line.split("==")[0]) + "==" + line.split("==")[1]
        for line in lines
        if "==" in line
    ]


def run(*cmd, **kw):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """(the runtime's python, the folder the notebooks are opened from, the course's URL)."""
    base = tmp_path_factory.mktemp("hosted")
    env_dir = base / "runtime"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    pip = [python, "-m", "pip", "install", "--quiet", "-c", ROOT / "constraints" / "colab.txt"]
    run(*pip, *RUNTIME)
    run(*pip, "--no-deps", "tf_keras")
    kernels = base / "jupyter" / "kernels" / KERNEL
    kernels.mkdir(parents=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "hosted", "language": "python"}
    (kernels / "kernel.json").write_text(json.dumps(spec))
    clone = base / "course.git"
    run("git", "clone", "--quiet", "--bare", ROOT, clone)
    run("git", "--git-dir", clone, "tag", "-f", hosted.release_ref(), "HEAD")  # HEAD, tagged
    content = base / "content"
    content.mkdir()
    before = freeze(python)
    return python, content, f"file://{clone}", before


def one_day_notebooks() -> list[Path]:
    found = []
    for part in ONE_DAY:
        if part == "Lab 05":
            continue  # one lab is enough to show the labs' path; Lab 02 is the issue's
        if part.startswith("Lab "):
            (path,) = (ROOT / "labs" / "solutions").glob(f"{part[4:]}_*_lab.ipynb")
        else:
            (path,) = (ROOT / "notebooks").glob(f"{part}_*.ipynb")
        found.append(path)
    return found


@pytest.mark.parametrize("path", one_day_notebooks(), ids=lambda p: p.stem)
def test_the_one_day_track_runs_in_a_hosted_runtime(runtime, path, monkeypatch, tmp_path):
    python, content, url, before = runtime
    monkeypatch.setenv("JUPYTER_PATH", str(content.parent / "jupyter"))
    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.setenv("DTF_COURSE_URL", url)
    for var in ("VIRTUAL_ENV", "PYTHONPATH"):  # the runtime is its own Python, not this one
        monkeypatch.delenv(var, raising=False)
    opened = content / path.name  # as Colab opens a notebook: a copy in /content
    shutil.copy(path, opened)
    result = nbrun.execute(opened, cwd=content, kernel=KERNEL, timeout=600)
    assert result.code_cells > 1
    setup = next(c for c in result.nb.cells if hosted.TAG in c.metadata.get("tags", []))
    said = "".join(o.get("text", "") for o in setup.outputs)  # what the learner reads
    assert f"The runtime's own: {TENSORFLOW} 2.20.0, keras 3.13.2." in said, said
    assert (content / "dtf-course" / "src" / "dtf").is_dir(), "the setup cell fetched nothing"
    after = "\n" + "\n".join(freeze(python))
    # what the runtime lacked was added; its own stack kept its versions; one TensorFlow
    for added in ("kubernetes==", "kubeflow-training==", "dtf-hands-on=="):
        assert "\n" + added in after, f"the setup cell did not install {added[:-2]}"
    for kept in before:  # every distribution the runtime had, at its version
        assert "\n" + kept in after, f"the runtime's {kept} was changed"
    assert f"\n{TENSORFLOW}==2.20.0" in after and "\nkeras==3.13.2" in after  # Colab's
    other = "tensorflow" if TENSORFLOW == "tensorflow-cpu" else "tensorflow-cpu"
    assert f"\n{other}==" not in after, "a second TensorFlow was installed"


def test_the_setup_cell_does_nothing_on_a_laptop():
    """Run where the course is installed (this checkout), it prints nothing and stays put."""
    source = hosted.setup_source("notebooks/00_setup_check.ipynb")
    env = {k: v for k, v in os.environ.items() if k != "KAGGLE_KERNEL_RUN_TYPE"}
    code = source + "\nprint(os.getcwd())"
    out = run(sys.executable, "-c", code, cwd=ROOT / "notebooks", env=env)
    assert out.strip() == str(ROOT / "notebooks")
