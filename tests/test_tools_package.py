"""tools/ is a package: the tests import ``from tools import NAME`` and ``make`` runs
``python -m tools.NAME``; each script still runs as a file, ``python tools/NAME.py`` (as the
notebooks' prose says), through a bootstrap that puts the repository root on the import path."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ROOT

TOOLS = ROOT / "tools"
#: The bootstrap, word for word: the one place a script changes the import path.
BOOTSTRAP = (
    'if __package__ in (None, ""):\n'
    "    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))\n"
)
SCRIPTS = sorted(p for p in TOOLS.glob("*.py") if 'if __name__ == "__main__":' in p.read_text())


def test_every_script_that_imports_the_package_bootstraps_first():
    using = []
    for path in SCRIPTS:
        text = path.read_text(encoding="utf-8")
        first_import = text.find("\nfrom tools")
        if first_import < 0:
            continue  # a standalone script (check_python, which any Python 2.7/3.x runs)
        using.append(path.name)
        assert text.count(BOOTSTRAP) == 1, f"{path.name}: no bootstrap (or more than one)"
        assert text.index(BOOTSTRAP) < first_import, f"{path.name}: bootstrap after the import"
    assert {"run_notebooks.py", "execute_in_place.py", "make_labs.py"} <= set(using), using


def test_check_python_stays_a_plain_script():
    text = (TOOLS / "check_python.py").read_text(encoding="utf-8")
    assert "from tools" not in text and "import tools" not in text


def test_a_script_runs_as_a_module_from_the_root_and_as_a_file_from_elsewhere(tmp_path):
    def run(cmd, cwd):
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    as_module = run([sys.executable, "-m", "tools.run_notebooks", "--help"], ROOT)
    as_file = run([sys.executable, str(TOOLS / "run_notebooks.py"), "--help"], tmp_path)
    assert as_module == as_file
    assert as_module.startswith("usage: python -m tools.run_notebooks ")
