"""Run notebook 12's measurements as programs, each configuration in a fresh process.

Several ``MirroredStrategy`` instances with different device counts cannot live in one process
(their collective all-reduces share a process-wide registry of groups: "... is joining a group
with size 4, but that group has size 2 ... Restart your program", tensorflow#62790), and thread
settings must be made before TensorFlow initialises. So notebook 12 writes its two measurements
as programs in its own cells (``%%writefile``, into ``build/12_programs/``) and runs them with
:func:`run_program`, one process at a time. ``python -m tools.export`` writes the same cells
into the package: :mod:`dtf.lessons.scaling_mirrored` (``MirroredStrategy``'s seconds per
step for one number of replicas), :mod:`dtf.lessons.scaling_chains` (one chain of small matmuls
against two), and section 1's timing loop, which both import, into
:mod:`dtf.lessons.scaling_steps`. Outside the notebook::

    python -m dtf.scaling mirrored '{"replicas": 2}'   # settings not given take DEFAULTS
    python -m dtf.scaling chains

Each prints the program's one line of JSON. This module imports no TensorFlow.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dtf import quiet

#: The exported programs, by the name the command line gives them.
PROGRAMS = {"mirrored": "dtf.lessons.scaling_mirrored", "chains": "dtf.lessons.scaling_chains"}
#: Their settings when run from the command line (notebook 12 passes its parameters).
DEFAULTS: dict[str, dict[str, Any]] = {
    "mirrored": {
        "replicas": 2,
        "batches": [32, 128],
        "hidden": 512,
        "warmup": 5,
        "timed": 10,
        "repeats": 5,
        "seed": 42,
    },
    "chains": {"size": 256, "length": 40, "warmup": 1, "timed": 5, "repeats": 5},
}
TAIL_CHARS = 2000  # how much of a failed program's error output an error shows


class ProgramError(RuntimeError):
    """A measurement program failed, timed out, or printed no JSON line."""


def run_program(program: str | os.PathLike, settings: dict, timeout: float = 180.0) -> dict:
    """Run ``program`` (a ``.py`` file, or a module name run with ``-m``) in a fresh Python
    with ``settings`` as its one JSON argument; return the last JSON line it printed.

    The child inherits this process's environment plus :data:`dtf.quiet.SETTINGS` (so that
    TensorFlow logs nothing), and is killed after ``timeout`` seconds.

    Raises:
        ProgramError: it exited with an error, ran past ``timeout`` or printed no JSON line;
            the message ends with the end of its error output.
        ValueError: ``timeout`` is not positive.
    """
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    path = Path(program)
    name = path.name if path.suffix == ".py" else str(program)
    cmd = [sys.executable, str(path)] if path.suffix == ".py" else [sys.executable, "-m", name]
    cmd.append(json.dumps(settings))
    env = {**os.environ, **quiet.SETTINGS}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        raw = (exc.stderr or b"")[-TAIL_CHARS:]
        tail = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        raise ProgramError(f"{name} did not finish within {timeout:g} s (killed): {tail}") from None
    if done.returncode != 0:
        tail = done.stderr[-TAIL_CHARS:]
        raise ProgramError(f"{name} failed with exit status {done.returncode}:\n{tail}")
    replies = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not replies:
        raise ProgramError(f"{name} printed no JSON line; its output: {done.stdout[-TAIL_CHARS:]}")
    return json.loads(replies[-1])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dtf.scaling", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("what", choices=sorted(PROGRAMS), help="the measurement to run")
    parser.add_argument(
        "settings", nargs="?", default="{}", help="JSON object of settings (default: DEFAULTS)"
    )
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds (default: 180)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        given = json.loads(args.settings)
    except json.JSONDecodeError as exc:
        parser.error(f"settings must be a JSON object, e.g. '{{\"replicas\": 2}}': {exc}")
    if not isinstance(given, dict):
        parser.error("settings must be a JSON object, e.g. '{\"replicas\": 2}'")
    unknown = sorted(set(given) - set(DEFAULTS[args.what]))
    if unknown:
        parser.error(f"unknown settings for {args.what}: {', '.join(unknown)}")
    try:
        result = run_program(PROGRAMS[args.what], {**DEFAULTS[args.what], **given}, args.timeout)
    except (ProgramError, ValueError) as exc:
        print(f"python -m dtf.scaling {args.what}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
