"""``python -m dtf.server``: the course's command-line server for one task of a cluster.

The code is :mod:`dtf.cluster.server`; this module is the command's short name, and keeps
the names notebooks import from it (``from dtf.server import import_tensorflow``).
"""

from dtf.cluster.server import *  # noqa: F403 - the same names, for older imports
from dtf.cluster.server import __all__, run  # noqa: F401

if __name__ == "__main__":
    run()
