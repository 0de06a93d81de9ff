"""The lint commands, defined once: ``python -m tools.lint`` runs every one and fails if any does.

``make lint`` runs this module in the course's venv, with the pinned tools of
``requirements-dev.txt``; CI's lint job and the pre-commit hook run ``make lint``
(``tests/test_environment_files.py`` checks that they do). A new check goes into
:data:`COMMANDS`, and all three run it.

- ``ruff check`` and ``ruff format --check`` over :data:`PATHS`;
- ``lint-imports``: the layers of the ``dtf`` package (``[tool.importlinter]`` in
  ``pyproject.toml``), so that an import circle, even one hidden inside a function, cannot
  come back (``tests/test_layers.py`` plants one and sees it fail);
- ``mypy``: the static types of ``src`` and ``tools`` (``[tool.mypy]`` in ``pyproject.toml``),
  with every third-party package taken as untyped, so that the result does not depend on what
  else is installed.

Each command runs with this interpreter (``python -m ruff``, ``python -m tools.lint_imports``,
``python -m mypy``), so whatever runs this module needs nothing on ``PATH``.

    python -m tools.lint            # every command; exit 1 when one fails
    python -m tools.lint --list     # print the commands, one a line
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Imports nothing of the course: the commands read the checkout's files.
REPO_ROOT = Path(__file__).resolve().parent.parent

#: What the linters read: everything of the course that is Python, notebooks included.
PATHS = ("notebooks", "labs", "src", "tools", "tests")
#: Each command's arguments after ``python -m``.
COMMANDS = (
    ("ruff", "check", *PATHS),
    ("ruff", "format", "--check", *PATHS),
    ("tools.lint_imports",),
    ("mypy",),
)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--list"]:
        for command in COMMANDS:
            print("python -m " + " ".join(command))
        return 0
    if args:
        print("usage: python -m tools.lint [--list]", file=sys.stderr)
        return 2
    failed = []
    for command in COMMANDS:
        print("$ python -m " + " ".join(command), flush=True)
        if subprocess.run([sys.executable, "-m", *command], cwd=REPO_ROOT).returncode:
            failed.append(" ".join(command))
    if failed:
        print(f"lint failed: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
