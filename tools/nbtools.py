"""Shared helpers for the notebook tools (``run_notebooks.py``, ``execute_in_place.py``).

Both tools find notebooks the same way, print the same kind of progress lines and must clean
up every process a notebook started. That last part needs care: ``jupyter_client`` starts each
kernel in a *new session* (``start_new_session=True``), so killing the process group of our
own child does not reach the kernel, and a subprocess the notebook started is re-parented to
init as soon as the kernel exits. We therefore tag every child with a per-run token in its
environment (inherited by the kernel and everything it starts, unless a notebook wipes its
environment) and find leftovers by that token.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import psutil

REPO_ROOT = Path(__file__).resolve().parent.parent
RUN_TOKEN_ENV = "DTF_RUN_TOKEN"
KILL_GRACE_S = 5.0


class UsageError(Exception):
    """A problem with the command line; the tools report it and exit with status 2."""


# --------------------------------------------------------------------------- discovery


def _in_checkpoints(path: Path) -> bool:
    return ".ipynb_checkpoints" in path.parts


def discover(paths: Sequence[str | os.PathLike[str]], default_globs: Sequence[str]) -> list[Path]:
    """Expand notebook files and directories into an ordered, de-duplicated list of notebooks.

    With no ``paths`` the ``default_globs`` are matched against the repository root (not the
    current directory), so the tools behave the same wherever they are started from.
    Raises :class:`UsageError` for a path that does not exist or is not a notebook.
    """
    found: list[Path] = []
    if not paths:
        for pattern in default_globs:
            found.extend(sorted(p for p in REPO_ROOT.glob(pattern) if p.is_file()))
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"no such file or directory: {raw}")
        if path.is_dir():
            found.extend(sorted(p for p in path.glob("*.ipynb") if p.is_file()))
        elif path.suffix != ".ipynb":
            raise UsageError(f"not a notebook (expected a .ipynb file): {raw}")
        else:
            found.append(path)
    out: list[Path] = []
    seen: set[Path] = set()
    for path in found:
        resolved = path.resolve()
        if resolved not in seen and not _in_checkpoints(resolved):
            seen.add(resolved)
            out.append(resolved)
    return out


def display_path(path: str | os.PathLike[str], *bases: str | os.PathLike[str]) -> str:
    """A relative, POSIX-style name for ``path`` for reports and messages.

    Tries the repository root, the current directory and then ``bases``; reports must not
    leak absolute paths (they differ per machine and make diffs noisy).
    """
    resolved = Path(path).resolve()
    for base in (REPO_ROOT, Path.cwd(), *bases):
        try:
            return resolved.relative_to(Path(base).resolve()).as_posix()
        except ValueError:
            continue
    return Path(os.path.relpath(resolved, REPO_ROOT)).as_posix()


def common_parent(paths: Iterable[Path]) -> Path:
    """The deepest directory containing all ``paths`` (a base for :func:`display_path`)."""
    parents = [str(p.resolve().parent) for p in paths]
    return Path(os.path.commonpath(parents)) if parents else REPO_ROOT


# --------------------------------------------------------------------------- progress


def say(message: str = "", *, err: bool = False) -> None:
    """Print one progress line immediately (``make`` pipes stdout, which would buffer it)."""
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


def say_start(index: int, total: int, name: str) -> None:
    """The line printed when a notebook starts, e.g. ``[2/5] notebooks/01_x.ipynb ...``."""
    say(f"[{index}/{total}] {name} ...")


# --------------------------------------------------------------------------- processes


def new_run_token() -> str:
    """A unique value for :data:`RUN_TOKEN_ENV`, identifying the processes of one notebook."""
    return uuid.uuid4().hex


def child_env(token: str, metrics_file: str | os.PathLike[str] | None) -> dict[str, str]:
    """Environment for a notebook run: unbuffered output, run token, metrics file (or unset)."""
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    env[RUN_TOKEN_ENV] = token
    if metrics_file is None:
        env.pop("DTF_METRICS_FILE", None)
    else:
        env["DTF_METRICS_FILE"] = str(Path(metrics_file).resolve())
    return env


def find_tagged(token: str) -> list[psutil.Process]:
    """Live processes of this user whose environment carries ``token`` (our own excluded)."""
    me = os.getpid()
    uid = os.getuid()
    out = []
    for proc in psutil.process_iter(["uids"]):
        try:
            uids = proc.info.get("uids")
            if proc.pid == me or (uids is not None and uids.real != uid):
                continue
            if proc.environ().get(RUN_TOKEN_ENV) == token:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def alive(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """The processes still running (``is_running`` also guards against PID reuse)."""
    out = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


def describe(procs: Iterable[psutil.Process]) -> str:
    """``name (pid N)`` for each process, for warnings in reports."""
    parts = []
    for proc in procs:
        try:
            parts.append(f"{proc.name()} (pid {proc.pid})")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            parts.append(f"pid {proc.pid}")
    return ", ".join(parts)


def _signal_group(pgid: int | None, sig: int) -> None:
    if pgid is None:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def terminate(
    procs: Iterable[psutil.Process],
    *,
    child: subprocess.Popen | None = None,
    grace: float = KILL_GRACE_S,
) -> None:
    """SIGTERM ``child``'s process group and ``procs``; SIGKILL what is left after ``grace`` s.

    ``child`` (started with ``start_new_session=True``) is reaped with ``Popen.wait`` so its
    return code stays meaningful; the other processes are only polled.
    """
    pgid = child.pid if child is not None and child.poll() is None else None
    others = [p for p in alive(procs) if child is None or p.pid != child.pid]
    _signal_group(pgid, signal.SIGTERM)
    for proc in others:
        try:
            proc.terminate()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    deadline = time.monotonic() + grace
    if child is not None:
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _, still = psutil.wait_procs(others, timeout=max(0.1, deadline - time.monotonic()))
    if child is not None and child.poll() is None:
        _signal_group(child.pid, signal.SIGKILL)
        child.kill()
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    for proc in still:
        try:
            proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    psutil.wait_procs(still, timeout=grace)


def kill_leftovers(token: str, also: Iterable[psutil.Process] = ()) -> list[str]:
    """Stop every process tagged with ``token`` (plus ``also``) and name what was stopped.

    Repeats a few times because a dying process may still start another one.
    """
    stopped: list[str] = []
    extra = list(also)
    for _ in range(3):
        procs = {p.pid: p for p in alive(extra)}
        procs.update((p.pid, p) for p in find_tagged(token))
        if not procs:
            break
        stopped.append(describe(procs.values()))
        terminate(procs.values())
        extra = []
    return stopped
