"""Refuse, with one clear message, a Python that cannot install the course's pins.

    python tools/check_python.py NAME MIN MAX [HINT]

NAME is how the interpreter was named (``python3``, ``.venv/bin/python``), MIN and MAX the
oldest and newest supported ``3.x`` (the Makefile's PYTHON_MIN and PYTHON_MAX), HINT what to
do instead. Exit status 0 when the interpreter running this script can install the pins;
otherwise one line on stderr and exit status 1.

The Makefile runs it with the interpreter it is about to use, before it creates the venv or
downloads anything. So it must run under the very interpreters it refuses: it is written in
syntax that every Python from 2.7 on parses (no f-strings, annotations or keyword-only
arguments) and uses only modules every one of them has. tests/test_check_python.py checks
its messages and its syntax.
"""

import platform
import sys

INTEL_MAC = "TensorFlow has no macOS x86-64 (Intel Mac) wheel after 2.16, and the course needs 2.21"


def parse_version(text):
    """``"3.11"`` -> ``(3, 11)``."""
    return tuple(int(part) for part in text.split("."))


def problem(version, system, machine, name, executable, lowest, highest, hint=""):
    """Why this interpreter cannot install the pins, as the message make prints; None if it can.

    ``version`` is a ``sys.version_info``-like sequence, ``system`` a ``sys.platform`` value,
    ``machine`` what ``platform.machine()`` returns.
    """
    who = "%s (%s) is Python %d.%d.%d" % (name, executable, version[0], version[1], version[2])
    if not parse_version(lowest) <= tuple(version[:2]) <= parse_version(highest):
        return (
            "make: %s, which this course does not support: it needs Python %s to %s "
            "(TensorFlow 2.21 and the pinned packages have no wheels for other versions). %s"
            % (who, lowest, highest, hint)
        ).rstrip()
    if system == "darwin" and machine == "x86_64":
        return (
            "make: %s for Intel (x86-64) macOS: %s, so nothing can be installed. On Apple "
            "silicon use an arm64 Python, not one under Rosetta; on an Intel Mac use a Linux "
            "machine or container, or a cloud notebook (README.md, Installing)." % (who, INTEL_MAC)
        )
    return None


def main(argv):
    if len(argv) not in (3, 4):
        sys.stderr.write("usage: check_python.py NAME MIN MAX [HINT]\n")
        return 2
    hint = argv[3] if len(argv) == 4 else ""
    message = problem(
        sys.version_info,
        sys.platform,
        platform.machine(),
        argv[0],
        sys.executable,
        argv[1],
        argv[2],
        hint,
    )
    if message:
        sys.stderr.write(message + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
