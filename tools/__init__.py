"""The course's command-line tools: ``python -m tools.NAME`` from the repository root (what
``make`` runs), or ``python tools/NAME.py`` from anywhere (each script's bootstrap).

Shared code: :mod:`tools.nbtools` (finding notebooks, progress lines, stopping every process a
notebook started) and :mod:`tools.nbrun` (the one function that executes a notebook). The
tests import the tools as ``from tools import NAME``. ``tools/check_python.py`` stays a plain
script that any Python 2.7 or 3.x runs (the Makefile's interpreter check, before any venv):
it imports nothing from this package and needs no bootstrap.
"""
