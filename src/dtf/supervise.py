"""Process supervision, in one place: how the course starts a child process, ties its life
to its parent's, waits for it, stops it and tells what became of it.

The package's supervisors (:class:`dtf.cluster.LocalCluster`: servers and their launcher;
:class:`dtf.multiworker.Launcher`: workers and their launcher; :class:`dtf.netns.Hosts`: the
processes left in its namespaces when it goes down) share one life cycle,
:class:`Supervisor`, and these functions:

- :func:`start` runs a command in a session of its own (a Ctrl-C in a terminal reaches only
  the parent), its standard input a pipe the parent holds (end of file: the parent is gone),
  its standard output a pipe, and its standard error the child's log file from its first
  byte, so an import error's traceback is never lost;
- :func:`wait_until` waits for something a child reports, with a deadline, while checking
  that the child still lives;
- :func:`stop_processes` sends ``SIGTERM`` (or another signal), waits a grace period, then
  ``SIGKILL``, and reaps; :func:`stop_child` ends a child that stops when its standard input
  closes (a launcher), and kills its whole session if it does not;
- :func:`describe_returncode` and :func:`log_tail` say how a child ended and what it
  printed last, for error messages; :func:`make_folder` and :func:`remove_folder` own the
  temporary folder of their logs (one a killed parent left behind is removed next time).

The child side: :func:`watch_lifeline` exits a process when its parent is gone, however the
parent died; :func:`set_parent_death_signal` asks Linux for ``SIGKILL`` at the parent's death;
:func:`redirect_output` sends a child's output to its log.

:func:`fork_server` is the "zygote" both launchers run (``python -m dtf.cluster._launcher``,
``python -m dtf.multiworker._process``): it imports TensorFlow once, then forks a fresh child
per command read from its standard input and reports on its standard output, one JSON object
per line (:mod:`dtf._jsonlines`): ``{"event": "loaded", "seconds"}`` once imported,
``{"event": "forked", **head, "pid"}`` per child, whatever the children emit, and ``{"event":
"exit", **head, "pid", "returncode"}`` (negative: killed by that signal) once it reaped one.
A command ``{"signal": SIG, "to": {**head}}`` (:func:`signal_command`) sends ``SIG`` to the
children whose head has those fields and that it has not reaped yet: a process id it has not
reaped cannot belong to another process, which a parent's own ``os.kill`` of a reported
process id cannot promise once that child has exited. With ``"group": true`` it signals the
child's process group, for a child that made itself a session leader (``os.setsid``), as a
Jupyter kernel is, and the child alone if it has not yet. End of file on its standard input
means stop: it signals its children, reaps them and exits, so when the parent dies, however
it dies, its children go too. Each child also watches a
lifeline pipe whose only write end the fork server holds, and on Linux asks for ``SIGKILL``
when the fork server dies. The fork server stays single-threaded in Python and forks only
from its main loop, while nothing runs (see :mod:`dtf.cluster` for why that is safe enough).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from dtf._jsonlines import commands, emit, read_events

POSIX = os.name == "posix"
#: Seconds a child may take to exit once killed before it counts as lost.
EXIT_WAIT_S = 5.0
#: How many non-empty lines of a log an error message shows.
LOG_TAIL_LINES = 12
TICK_S = 0.02
_PR_SET_PDEATHSIG = 1


# --------------------------------------------------------------------------- telling


def describe_returncode(returncode: int) -> str:
    """``"exited with code 1"`` or ``"was killed by signal SIGKILL"`` (negative codes)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"was killed by signal {name}"
    return f"exited with code {returncode}"


def returncode_of(status: int) -> int:
    """The return code (negative: the signal) of a status from ``os.waitpid``."""
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def tail_lines(path: Path | None, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last ``lines`` non-empty lines of the file at ``path`` ([] if there is none)."""
    if path is None or not path.is_file():
        return []
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES, where: bool = True) -> str:
    """``"\\nLast lines of its log (PATH):\\n    ..."`` for an error message, or ``""``."""
    kept = tail_lines(path, lines)
    if not kept:
        return ""
    return f"\nLast lines of its log{f' ({path})' if where else ''}:\n" + "\n".join(
        "    " + ln for ln in kept
    )


# --------------------------------------------------------------------------- the parent's side


def start(
    args: Sequence[str], log: str | os.PathLike, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """Start ``args`` in a session of its own with pipes for standard input and output, and
    standard error appended to the file ``log`` from the child's first byte."""
    kwargs = (
        {"start_new_session": True}
        if POSIX
        else {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}  # type: ignore[attr-defined]
    )
    with open(log, "ab") as stderr:  # the child holds its own copy
        return subprocess.Popen(
            list(args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
            **kwargs,
        )


def start_fork_server(
    module: str,
    log: str | os.PathLike,
    env: dict[str, str],
    cond: threading.Condition,
    on_event: Callable[[dict], None],
) -> tuple[subprocess.Popen, threading.Thread]:
    """Start ``python -m module``, a :func:`fork_server`, with :func:`start`, and a thread
    that hands each of its events to ``on_event`` under ``cond`` (and wakes its waiters)."""
    popen = start([sys.executable, "-m", module], log, env)
    reader = threading.Thread(
        target=read_events, args=(popen.stdout, cond, on_event), daemon=True, name=module
    )
    reader.start()
    return popen, reader


def wait_until(
    cond: threading.Condition,
    done: Callable[[], bool],
    deadline: float,
    check: Callable[[], None] = lambda: None,
) -> bool:
    """Wait on ``cond`` (held by the caller) until ``done()`` (True) or ``time.monotonic()``
    passes ``deadline`` (False); ``check()`` runs at every tick while not done, and raises if
    the awaited process died."""
    while True:
        if done():
            return True
        check()
        if time.monotonic() >= deadline:
            return False
        cond.wait(TICK_S)


def stop_processes(
    processes: Iterable, grace: float, first: int = signal.SIGTERM
) -> dict[int, int]:
    """Send ``first`` to every process (``psutil.Process`` or pid), ``SIGKILL`` to those still
    there after ``grace`` seconds, and wait until they are gone; returns ``{pid: returncode}``
    of those that were this process's children (psutil reaps them: their ``Popen`` no longer
    sees the status)."""
    import psutil

    found, codes = [], {}
    for process in processes:
        try:
            process = process if isinstance(process, psutil.Process) else psutil.Process(process)
            process.send_signal(first)
            found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass

    def note(process) -> None:
        if getattr(process, "returncode", None) is not None:
            codes[process.pid] = process.returncode

    _, alive = psutil.wait_procs(found, timeout=grace, callback=note)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=EXIT_WAIT_S, callback=note)
    return codes


def stop_child(popen: subprocess.Popen, wait_s: float) -> None:
    """Close the standard input of ``popen``, a child that exits (with whatever it started)
    at its end of file; after ``wait_s`` seconds kill its session (it and its children)."""
    try:
        if popen.stdin is not None:
            popen.stdin.close()
    except OSError:
        pass
    try:
        popen.wait(wait_s)
    except subprocess.TimeoutExpired:
        try:
            if POSIX:
                os.killpg(popen.pid, signal.SIGKILL)
            else:
                popen.kill()
        except (ProcessLookupError, PermissionError):
            pass
        try:
            popen.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass


def make_folder(given: Path | None, prefix: str) -> Path:
    """The folder of a group of children's logs: ``given`` (created if missing), or a new
    temporary folder ``PREFIX<pid>-...`` that :func:`remove_folder` removes. Temporary
    folders of this prefix whose process is gone without removing them (killed) go first."""
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        return given
    import psutil

    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*-*"):
        owner = path.name[len(prefix) :].split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not psutil.pid_exists(int(owner)):
            shutil.rmtree(path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))


def remove_folder(folder: Path | None, given: Path | None) -> None:
    """Remove ``folder`` if :func:`make_folder` made it (not a folder the caller gave)."""
    if folder is not None and given is None:
        shutil.rmtree(folder, ignore_errors=True)


class Supervisor:
    """The life cycle of an object that starts processes (:class:`dtf.cluster.LocalCluster`,
    :class:`dtf.multiworker.Launcher`, :class:`dtf.netns.Hosts`): ``new``, ``starting``,
    ``running``, ``stopping``, ``stopped``, once. A context manager whose ``stop()`` also runs
    at interpreter exit. A subclass calls :meth:`_begin` first in ``start()`` and
    :meth:`_started` when it runs; its ``stop()`` returns at once when :meth:`_end` is false
    and calls :meth:`_ended` last. ``_START``/``_STOP`` and ``_RUNNING``/``_STOPPED`` name
    the two methods and phases where a subclass calls them otherwise (``Hosts``: up, down)."""

    _phase = "new"
    _START, _STOP, _RUNNING, _STOPPED = "start", "stop", "running", "stopped"

    def __enter__(self):
        if self._phase == "new":
            getattr(self, self._START)()
        return self

    def __exit__(self, *exc) -> None:
        getattr(self, self._STOP)()

    @property
    def running(self) -> bool:
        return self._phase == self._RUNNING

    def _begin(self, error: Exception) -> None:
        """Enter ``starting`` (raise ``error`` unless new) and stop at interpreter exit."""
        if self._phase != "new":
            raise error
        self._phase = "starting"
        atexit.register(getattr(self, self._STOP))

    def _started(self) -> None:
        self._phase = self._RUNNING

    def _end(self) -> bool:
        """Enter ``stopping`` if there is something to stop (starting or running)."""
        if self._phase not in ("starting", self._RUNNING):
            return False
        self._phase = "stopping"
        atexit.unregister(getattr(self, self._STOP))
        return True

    def _ended(self) -> None:
        self._phase = self._STOPPED


# --------------------------------------------------------------------------- the child's side


def watch_lifeline(fd: int, what: str = "its parent") -> threading.Thread:
    """Exit this process (``os._exit(0)``) as soon as ``fd`` reaches end of file.

    ``fd`` is the read end of a pipe whose write end only the parent holds: when the parent
    exits, however it dies, the pipe reaches end of file. ``os._exit`` skips interpreter
    shutdown, which could wait forever on TensorFlow's threads (a server cannot be stopped).
    """

    def watch() -> None:
        try:
            while os.read(fd, 4096):
                pass
        except OSError:
            pass
        try:
            os.write(2, f"dtf: {what} is gone (end of file on its pipe); exiting\n".encode())
        finally:
            os._exit(0)

    thread = threading.Thread(target=watch, name="dtf-lifeline", daemon=True)
    thread.start()
    return thread


def set_parent_death_signal(parent: int) -> None:
    """On Linux, ask for ``SIGKILL`` when the parent dies; exit now if ``parent`` is gone
    already (it died before the request took effect)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(0)


def redirect_output(log: str | os.PathLike, stdin: bool = True) -> None:
    """Send this process's standard output and error (the descriptors and ``sys``'s) to the
    file ``log``, and with ``stdin`` read standard input from ``/dev/null``."""
    if stdin:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


def run_main(main: Callable[[], object]) -> None:
    """``python -m`` entry of a supervised process: run ``main()``, print a traceback if it
    raises, and leave with ``os._exit`` (never wait on TensorFlow's threads at exit)."""
    code = 0
    try:
        main()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


# --------------------------------------------------------------------------- the fork server


def fork_server(
    preload: Callable[[], None],
    child: Callable[[dict, int], int],
    head: Callable[[dict], dict | None],
    *,
    what: str,
    stop_signals: Sequence[int] = (signal.SIGTERM, signal.SIGKILL),
    grace: float = 2.0,
) -> None:
    """Run this process as a fork server (see the module docstring); returns at end of file.

    ``preload()`` imports what every child shares; ``head(command)`` gives the fields that
    name a command's child in every event (``None``: not a command, skipped); in the forked
    child, after its output went to ``command["log"]`` and its lifeline is watched,
    ``child(command, proto)`` runs and returns the exit status (``proto``: the descriptor its
    events go to). ``stop_signals`` are sent in turn at the end, ``grace`` seconds apart;
    ``what`` names this process in a child's log when it is gone.
    """
    proto = os.dup(1)  # the protocol pipe; stray prints go to this process's log instead
    os.dup2(2, 1)
    parent = os.getpid()
    lifeline_r, lifeline_w = os.pipe()
    stopping: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the parent
    began = time.monotonic()
    preload()
    emit(proto, {"event": "loaded", "seconds": round(time.monotonic() - began, 3)})
    children: dict[int, dict] = {}

    def reap() -> None:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            event = {"event": "exit", **children.pop(pid, {}), "pid": pid}
            emit(proto, {**event, "returncode": returncode_of(status)})

    try:
        for command in commands(stopping, reap, 0.05):
            if "signal" in command:
                _signal_children(children, command)
                continue
            fields = head(command)
            if fields is None:
                continue
            with warnings.catch_warnings():
                # Python 3.12+ warns that forking a multi-threaded process may deadlock;
                # this one is idle (see the module docstring).
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:
                _forked(command, proto, (lifeline_r, lifeline_w), parent, child, what)
            children[pid] = fields
            emit(proto, {"event": "forked", **fields, "pid": pid})
    finally:
        for sig in stop_signals:
            for pid in list(children):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace
            while children and time.monotonic() < deadline:
                reap()
                time.sleep(TICK_S)
        os.close(lifeline_w)


def signal_command(sig: int, group: bool = False, **to: object) -> bytes:
    """The line that asks a :func:`fork_server` to send ``sig`` to its children whose head
    fields equal ``to`` (those already reaped are left alone); with ``group``, to each one's
    process group."""
    return (json.dumps({"signal": int(sig), "to": to, "group": group}) + "\n").encode()


def _signal_children(children: dict[int, dict], command: dict) -> None:
    to, sig = command.get("to", {}), int(command["signal"])
    for pid, fields in list(children.items()):
        if all(fields.get(key) == value for key, value in to.items()):
            try:
                if command.get("group"):
                    try:  # an unreaped leader's group id is its own process id
                        os.killpg(pid, sig)
                        continue
                    except OSError:  # not a group leader (yet): the child alone
                        pass
                os.kill(pid, sig)
            except ProcessLookupError:  # cannot happen before the reap; harmless if it does
                pass


def _forked(command, proto, lifeline, parent, child, what) -> None:
    """In a forked child: output to the log, tied to the fork server; run ``child``. Never
    returns."""
    code = 1
    try:
        os.close(lifeline[1])
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        redirect_output(command["log"])
        set_parent_death_signal(parent)
        watch_lifeline(lifeline[0], what)
        code = child(command, proto)
    except BaseException:
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001 - the exit below must happen
            pass
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code if isinstance(code, int) else 1)
