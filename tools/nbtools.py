"""Shared helpers of the notebook tools: the runner (``nbrun``), ``run_notebooks`` and
``execute_in_place``; the other tools take :data:`REPO_ROOT` from here.

The tools find notebooks the same way, print the same kind of progress lines and must clean
up every process a notebook started. That last part needs care: ``jupyter_client`` starts each
kernel in a *new session* (``start_new_session=True``), so killing the process group of our
own child does not reach the kernel, and a subprocess the notebook started is re-parented to
init as soon as the kernel exits. We therefore tag every child with a per-run token in its
environment (inherited by the kernel and everything it starts, unless a notebook wipes its
environment) and find leftovers by that token.

The tools run on Linux, macOS and Windows. Process groups, sessions and ``SIGKILL`` exist only
on POSIX (:data:`POSIX`); elsewhere the child gets its own process group (so Ctrl-C in the
console does not reach it directly) and its process tree is stopped through ``psutil``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import psutil

#: The repository root (tools/ is one level below it); the other tools import it from here.
REPO_ROOT = Path(__file__).resolve().parent.parent
#: True where processes have POSIX sessions, process groups and signals (Linux, macOS).
#: Elsewhere (Windows) only psutil is used to stop processes; tests set it to False to
#: exercise that path on a POSIX machine.
POSIX = os.name == "posix"

# The tools use the course package (its one-line helpers are re-exported from here). In a
# checkout without `pip install -e .` it is found in src/: the one place that adds it to the
# import path, which is why the tools import dtf only after nbtools.
try:
    from dtf._util import error_line, first_line  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO_ROOT / "src"))
    from dtf._util import error_line, first_line  # noqa: F401
#: A tutorial's file name: two digits, an optional part letter (a long lesson split into parts,
#: ``11_…``, ``11b_…``), an underscore and a topic; its title starts ``# 11b · Title``.
TUTORIAL_NAME = re.compile(r"(?P<part>\d{2}[a-z]?)_[a-z0-9_]+\.ipynb")
#: The glob that finds the candidates (sorting names puts ``11_…`` before ``11b_…``).
TUTORIAL_GLOB = "[0-9][0-9]*_*.ipynb"


def tutorial_paths(folder: Path) -> list[Path]:
    """The tutorials of ``folder`` in course order (names that match :data:`TUTORIAL_NAME`)."""
    return sorted(p for p in folder.glob(TUTORIAL_GLOB) if TUTORIAL_NAME.fullmatch(p.name))


def part_of(path: Path | str) -> str:
    """``"11d"`` for ``11d_input_sharding.ipynb``, ``"04"`` for ``04_….ipynb``."""
    return Path(path).name.split("_", 1)[0]


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


def session_kwargs() -> dict[str, Any]:
    """``Popen`` arguments that detach a child from the console's Ctrl-C.

    POSIX: a new session (and process group), which :func:`terminate` signals as a whole.
    Windows: a new process group (``CREATE_NEW_PROCESS_GROUP``); its tree is found via psutil.
    """
    if POSIX:
        return {"start_new_session": True}
    return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}


def _current_user() -> str | None:
    """This process's user name, or None if the system will not say (then nothing is skipped)."""
    try:
        return psutil.Process().username()
    except (psutil.Error, KeyError, OSError):
        return None


def _owner_filter() -> tuple[list[str], Callable[[dict[str, Any]], bool]]:
    """The ``process_iter`` attribute and a test for "started by this user".

    Real uids where they exist (POSIX); otherwise the user name, as psutil reports it on
    Windows. An owner the system hides from us (``None``) is not excluded here: reading the
    process's environment then fails with ``AccessDenied`` and skips it anyway.
    """
    if POSIX and hasattr(os, "getuid"):
        uid = os.getuid()
        return ["uids"], lambda info: info.get("uids") is None or info["uids"].real == uid
    user = _current_user()

    def same_user(info: dict[str, Any]) -> bool:
        return user is None or info.get("username") is None or info["username"] == user

    return ["username"], same_user


def find_tagged(token: str) -> list[psutil.Process]:
    """Live processes of this user whose environment carries ``token`` (our own excluded)."""
    me = os.getpid()
    attrs, mine = _owner_filter()
    out = []
    for proc in psutil.process_iter(attrs):
        try:
            if proc.pid == me or not mine(proc.info):
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


def _descendants(pid: int) -> list[psutil.Process]:
    """Every process below ``pid`` now (found before it dies: orphans lose the link)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def terminate(
    procs: Iterable[psutil.Process],
    *,
    child: subprocess.Popen | None = None,
    grace: float = KILL_GRACE_S,
) -> None:
    """Ask ``child``'s tree and ``procs`` to stop; kill what is left after ``grace`` s.

    On POSIX, ``child`` (started with :func:`session_kwargs`) is stopped with its whole
    process group (SIGTERM, then SIGKILL). Elsewhere its descendants are collected through
    psutil first and stopped with ``procs``. ``child`` is reaped with ``Popen.wait`` so its
    return code stays meaningful; the other processes are only polled.
    """
    running = child is not None and child.poll() is None
    tree = _descendants(child.pid) if child is not None and running and not POSIX else []
    by_pid = {p.pid: p for p in alive([*procs, *tree])}
    if child is not None:
        by_pid.pop(child.pid, None)
    others = list(by_pid.values())
    if child is not None and running:
        if POSIX:
            _signal_group(child.pid, signal.SIGTERM)
        else:
            _quietly(child.terminate)
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
        if POSIX:
            _signal_group(child.pid, signal.SIGKILL)
        _quietly(child.kill)
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


def _quietly(action: Callable[[], None]) -> None:
    """Run ``Popen.terminate``/``kill``, ignoring a process that exited meanwhile."""
    try:
        action()
    except (ProcessLookupError, PermissionError):
        pass  # Windows: PermissionError (access denied) once the process has exited


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
