"""The parent side: :class:`Launcher` starts worker processes, :class:`WorkerRun` watches
and provokes them (see :mod:`dtf.multiworker`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from dtf import supervise
from dtf._jsonlines import read_events
from dtf._util import whole_number
from dtf.cluster import env as cluster_env
from dtf.cluster.local import DEFAULT_START_METHOD as CLUSTER_START_METHOD
from dtf.cluster.spec import DEFAULT_HOST, Task, free_ports, tf_config
from dtf.multiworker.worker import EXIT_PREEMPTED, TrainConfig
from dtf.supervise import describe_returncode, log_tail, tail_lines

POSIX = os.name == "posix"
#: ``fork``: one launcher imports TensorFlow once and forks the workers (Linux, as
#: :mod:`dtf.cluster` does); ``spawn``: every worker is a fresh process that imports
#: TensorFlow itself (macOS, Windows).
DEFAULT_START_METHOD = CLUSTER_START_METHOD
#: Seconds the launcher may take to import TensorFlow (a loaded 2-core machine is slow).
READY_TIMEOUT_S = 60.0
_TICK_S = 0.02
_STOP_WAIT_S = 5.0
#: Lines of an exited peer's log that a timeout message shows.
_PEER_TAIL_LINES = 4
_MODULE = "dtf.multiworker._process"
_WORKDIR_PREFIX = "dtf-multiworker-"
#: The program a worker runs unless told otherwise: the package's copy of the one notebook 11
#: writes (generated from its cells by ``python -m tools.export``).
DEFAULT_PROGRAM = Path(__file__).resolve().parent.parent / "lessons" / "worker_program.py"


class WorkerError(RuntimeError):
    """A worker, or the launcher, failed in a way the caller did not ask for."""


class WorkerTimeoutError(WorkerError):
    """A worker did not do what was waited for within the timeout."""


@dataclass
class WorkerResult:
    """How one worker of a run ended: its exit status and its last events."""

    task: int
    returncode: int | None
    events: list[dict] = field(default_factory=list)

    def last(self, event: str) -> dict | None:
        """The last event of that name, or ``None``."""
        return next((e for e in reversed(self.events) if e["event"] == event), None)

    @property
    def error(self) -> dict | None:
        return self.last("error")

    @property
    def status(self) -> str:
        """``"exited with code 0"``, ``"was killed by signal SIGKILL"``, ..."""
        return "still running" if self.returncode is None else describe_returncode(self.returncode)


def _env() -> dict[str, str]:
    """The workers' environment: quiet TensorFlow, the package importable, and TensorFlow's
    own gRPC settings (no keepalive defaults: the failures shown are TensorFlow's own)."""
    env = cluster_env.server_env()
    env.pop(cluster_env.GRPC_ENV, None)
    if cluster_env.GRPC_ENV in os.environ:
        env[cluster_env.GRPC_ENV] = os.environ[cluster_env.GRPC_ENV]
    return env


class WorkerRun:
    """The workers of one run: their addresses, events, signals and results."""

    def __init__(
        self,
        launcher: Launcher,
        number: int,
        config: TrainConfig,
        num_workers: int,
        program: Path = DEFAULT_PROGRAM,
    ):
        self.launcher = launcher
        self.number = number
        self.config = config
        self.program = program  # the file every worker of this run runs
        self.num_workers = num_workers
        workdir = launcher.workdir
        assert workdir is not None, "a run starts on a started launcher (Launcher.run)"
        self.dir = workdir / f"run-{number}"
        self.dir.mkdir(parents=True)
        ports = free_ports(num_workers)
        self.cluster = {"worker": [f"{DEFAULT_HOST}:{p}" for p in ports]}
        self.events: list[dict] = []
        self.pids: dict[int, int] = {}
        self.returncodes: dict[int, int] = {}
        #: When the run started, and when its launcher kills the workers still running
        #: (``config.deadline_s`` later: from outside, whatever a worker is stuck in).
        self.started_at = time.monotonic()
        self.deadline = self.started_at + config.deadline_s
        self._popens: dict[int, subprocess.Popen] = {}
        self._readers: list[threading.Thread] = []

    # ------------------------------------------------------------ what a reader looks at

    @property
    def tasks(self) -> list[int]:
        return list(range(self.num_workers))

    def tf_config(self, task: int) -> str:
        """The ``TF_CONFIG`` of worker ``task``: the cluster, and which task it is."""
        return tf_config(self.cluster, Task("worker", task))

    def log(self, task: int) -> str:
        path = self.dir / f"worker-{task}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""

    def weights(self, name: str, task: int):
        """The weights a worker saved (``"final"``, ``"restored"``, ``"preempted"``,
        ``"checkpoint-STEP"``) as ``(step, [arrays])``."""
        import numpy as np

        with np.load(self.dir / f"{name}-{task}.npz") as data:
            count = len([k for k in data.files if k.startswith("w")])
            return int(data["step"]), [data[f"w{i}"] for i in range(count)]

    def events_of(self, task: int, event: str | None = None) -> list[dict]:
        with self.launcher._cond:
            return [
                e
                for e in self.events
                if e["task"] == task and (event is None or e["event"] == event)
            ]

    # ------------------------------------------------------------ waiting and acting

    def wait_for(self, event: str, task: int, timeout: float) -> dict:
        """The first event ``event`` of worker ``task``, waiting at most ``timeout`` s."""
        deadline = time.monotonic() + timeout

        def found() -> dict | None:
            return next((e for e in self.events if e["task"] == task and e["event"] == event), None)

        def check() -> None:
            if task in self.returncodes:
                raise WorkerError(
                    f"worker {task} {describe_returncode(self.returncodes[task])} before "
                    f"'{event}'.{self._tail(task)}"
                )
            self.launcher._check_alive()

        with self.launcher._cond:
            if not supervise.wait_until(
                self.launcher._cond, lambda: found() is not None, deadline, check
            ):
                raise WorkerTimeoutError(
                    f"worker {task} did not report '{event}' within {timeout} s."
                    f"{self._tail(task)}{self._exited_peers()}"
                )
            first = found()
            assert first is not None, "wait_until returned True: the event is there"
            return first

    def send(self, task: int, sig: int) -> float:
        """Send ``sig`` to worker ``task``; returns the ``time.monotonic()`` of sending."""
        process = self._process(task)
        sent = time.monotonic()
        process.send_signal(sig)
        return sent

    def kill(self, task: int) -> float:
        """Kill worker ``task`` (``SIGKILL``: as a crash or the out-of-memory killer would);
        returns the ``time.monotonic()`` of the kill."""
        process = self._process(task)
        sent = time.monotonic()
        process.kill()
        return sent

    def freeze(self, task: int) -> float:
        """Stop worker ``task`` without ending it (``SIGSTOP``): a hung process; returns the
        ``time.monotonic()`` of freezing. :meth:`kill` ends it."""
        process = self._process(task)
        sent = time.monotonic()
        process.suspend()
        return sent

    def _process(self, task: int):
        import psutil

        with self.launcher._cond:
            if task not in self.pids:
                raise WorkerError(f"worker {task} of run {self.number} has not started.")
            if task in self.returncodes:
                raise WorkerError(
                    f"worker {task} {describe_returncode(self.returncodes[task])} already."
                )
            return psutil.Process(self.pids[task])

    def resume(self, task: int) -> None:
        """Let a paused worker go on."""
        (self.dir / f"go-{task}").touch()

    def wait(self, timeout: float) -> dict[int, WorkerResult]:
        """Wait until every worker has exited; on timeout stop them all and raise
        :class:`WorkerTimeoutError` naming the late workers and those that already exited.

        Raises :class:`WorkerError` for a worker that exited with status 0 without reporting
        ``done`` (it did not train: never a success); a worker whose program merely returns
        early reports that itself (error ``NotDone``, exit status 1)."""
        deadline = time.monotonic() + timeout
        with self.launcher._cond:
            if not supervise.wait_until(
                self.launcher._cond, lambda: not self.running, deadline, self.launcher._check_alive
            ):
                late = [t for t in self.tasks if t not in self.returncodes]
                tail = self._tail(late[0]) + self._exited_peers()
                self.stop()  # the condition's lock is re-entrant
                raise WorkerTimeoutError(
                    f"worker{'s' if len(late) > 1 else ''} {', '.join(map(str, late))} "
                    f"still running after {timeout} s: stopped.{tail}"
                )
            results = self.results()
        for task, result in results.items():
            if result.returncode == 0 and result.last("done") is None:
                raise WorkerError(
                    f"worker {task} of run {self.number} exited with code 0 without reporting "
                    f"'done': it did not finish training.{self._tail(task)}"
                )
        return results

    def results(self) -> dict[int, WorkerResult]:
        with self.launcher._cond:
            return {
                t: WorkerResult(
                    t, self.returncodes.get(t), [e for e in self.events if e["task"] == t]
                )
                for t in self.tasks
            }

    @property
    def running(self) -> bool:
        return len(self.returncodes) < self.num_workers

    def stop(self) -> None:
        """Kill every worker of this run that still runs and wait until it is gone."""
        deadline = time.monotonic() + _STOP_WAIT_S
        with self.launcher._cond:  # a worker just asked for has no process id yet
            while len(self.pids) < self.num_workers and time.monotonic() < deadline:
                if self.launcher._process is not None and self.launcher._process.poll() is not None:
                    break
                self.launcher._cond.wait(_TICK_S)
        for task in self.tasks:
            if task not in self.pids or task in self.returncodes:
                continue
            if task in self._popens:  # spawned: Popen signals only a child it has not reaped
                self._popens[task].kill()
            else:  # forked: the launcher signals it, only if it has not reaped it
                with contextlib.suppress(WorkerError):
                    self.launcher._send(
                        supervise.signal_command(signal.SIGKILL, run=self.number, task=task)
                    )
        deadline = time.monotonic() + _STOP_WAIT_S
        with self.launcher._cond:
            while self.running and time.monotonic() < deadline:
                self.launcher._cond.wait(_TICK_S)

    def _tail(self, task: int) -> str:
        return log_tail(self.dir / f"worker-{task}.log", where=False)

    def _exited_peers(self) -> str:
        """What became of the workers that already exited, for a timeout message: each
        one's index, exit status, error and last log lines (a peer that left is often why
        the others wait)."""
        lines = []
        for task in sorted(self.returncodes):
            error = self._last_error(task)
            said = f": {error['error']}: {error.get('message', '')}" if error else ""
            lines.append(f"worker {task} {describe_returncode(self.returncodes[task])}{said}")
            kept = tail_lines(self.dir / f"worker-{task}.log", _PEER_TAIL_LINES)
            lines += ["    " + ln for ln in kept]
        return "\nAlready exited:\n" + "\n".join(lines) if lines else ""

    def _last_error(self, task: int) -> dict | None:
        return next(
            (e for e in reversed(self.events) if e["task"] == task and e["event"] == "error"),
            None,
        )

    def _exited(self, task: int, returncode: int) -> None:
        """Note that worker ``task`` exited (under the launcher's lock). One that failed
        without reporting an error (it died before its program ran: an import error, a bad
        command) gets an ``error`` event from the last lines of its log, its traceback."""
        self.returncodes.setdefault(task, returncode)
        if returncode > 0 and returncode != EXIT_PREEMPTED and self._last_error(task) is None:
            kept = tail_lines(self.dir / f"worker-{task}.log")
            message = kept[-1] if kept else f"{describe_returncode(returncode)}, log empty"
            self._add_error(task, "Exit", message, lines=kept)

    def _add_error(self, task: int, error: str, message: str, **fields) -> None:
        """An ``error`` event for worker ``task`` that the launcher saw, not the worker."""
        event = {"event": "error", "run": self.number, "task": task, "t": time.monotonic()}
        self.events.append({**event, "error": error, "message": message, **fields})

    def _enforce_deadline(self) -> None:
        """Kill the workers still running at the run's deadline (a thread of the launcher:
        from outside, so a worker stuck in a call that holds its interpreter lock, or blocked
        on a peer that left, ends too); each gets an ``error`` event ``Deadline`` naming the
        peers that had already exited."""
        cond = self.launcher._cond
        with cond:
            while self.running and self.launcher.running:
                if time.monotonic() >= self.deadline:
                    break
                cond.wait(0.1)
            else:
                return
            late = [t for t in self.tasks if t not in self.returncodes]
            gone = ", ".join(
                f"worker {t} {describe_returncode(c)}" for t, c in sorted(self.returncodes.items())
            )
            message = (
                f"still running at the run's deadline (deadline_s={self.config.deadline_s}): "
                f"killed by the launcher{f'; already exited: {gone}' if gone else ''}"
            )
            for task in late:
                self._add_error(task, "Deadline", message)
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "finished"
        return f"WorkerRun({self.number}, {self.num_workers} workers, {state})"


class Launcher(supervise.Supervisor):
    """Starts the worker processes of multi-worker runs (see the module docstring).

    ``start(wait=False)`` returns at once while the launcher imports TensorFlow (a notebook
    can do other work meanwhile); :meth:`run` waits for it, at most ``ready_timeout`` s.
    """

    def __init__(
        self,
        *,
        start_method: str | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        workdir: str | os.PathLike | None = None,
        program: str | os.PathLike | None = None,
    ):
        self.start_method = start_method or DEFAULT_START_METHOD
        if self.start_method not in ("fork", "spawn"):
            raise ValueError(f"start_method must be 'fork' or 'spawn', got {start_method!r}.")
        if self.start_method == "fork" and not hasattr(os, "fork"):
            raise ValueError("start_method='fork' needs os.fork: use 'spawn' on this system.")
        if isinstance(ready_timeout, bool) or not isinstance(ready_timeout, int | float):
            raise ValueError(f"ready_timeout must be a number of seconds, got {ready_timeout!r}.")
        if not ready_timeout > 0:
            raise ValueError(f"ready_timeout must be > 0, got {ready_timeout!r}.")
        self.ready_timeout = float(ready_timeout)
        #: The program file a run's workers run when :meth:`run` names none.
        self.program = Path(program) if program is not None else DEFAULT_PROGRAM
        self._user_workdir = Path(workdir) if workdir is not None else None
        self.workdir: Path | None = None
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self._runs: list[WorkerRun] = []
        self._loaded_s: float | None = None
        self._started_at: float | None = None
        self.metadata_ip = f"{DEFAULT_HOST}:{free_ports(1)[0]}"  # refused at once: not a cloud

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def import_s(self) -> float | None:
        """Seconds the launcher took to import TensorFlow and Keras and load the data."""
        return self._loaded_s

    def start(self, wait: bool = True) -> Launcher:
        self._begin(WorkerError(f"this Launcher is {self._phase}; create a new one."))
        self._started()  # waits and runs may begin while it imports TensorFlow
        self.workdir = supervise.make_folder(self._user_workdir, _WORKDIR_PREFIX)
        self._started_at = time.monotonic()
        if self.start_method == "fork":
            self._process, self._reader = supervise.start_fork_server(
                _MODULE, self.workdir / "launcher.log", _env(), self._cond, self._on_event
            )
        else:
            self._loaded_s = 0.0
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float | None = None) -> float:
        """Wait until the launcher has imported TensorFlow; returns its import seconds."""
        if self._phase != "running":
            raise WorkerError(f"this Launcher is {self._phase}: start() it first.")
        assert self._started_at is not None
        deadline = self._started_at + (timeout or self.ready_timeout)
        with self._cond:
            if not supervise.wait_until(
                self._cond, lambda: self._loaded_s is not None, deadline, self._check_alive
            ):
                raise WorkerTimeoutError(
                    f"the worker launcher did not import TensorFlow within "
                    f"{timeout or self.ready_timeout} s (a busy machine imports slowly: "
                    f"give a larger ready_timeout).{self._launcher_tail()}"
                )
            assert self._loaded_s is not None, "wait_until returned True: it is set"
            return self._loaded_s

    def run(
        self,
        config: TrainConfig,
        num_workers: int,
        program: str | os.PathLike | None = None,
    ) -> WorkerRun:
        """Start ``num_workers`` workers of ``config`` (each with its ``TF_CONFIG``), each
        running the Python file ``program`` (default: the launcher's ``program``) as
        ``python PROGRAM`` would: the file is read when a worker starts, so a changed file
        changes what the next run's workers do.

        Workers of an earlier run that still run are stopped first: one run at a time
        (their ports and the machine's two cores are needed).
        """
        if not isinstance(config, TrainConfig):
            raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}.")
        num_workers = whole_number("num_workers", num_workers, minimum=1, maximum=8)
        if config.pause_task is not None and config.pause_task >= num_workers:
            raise ValueError(f"pause_task {config.pause_task} is not a worker of {num_workers}.")
        path = Path(program).resolve() if program is not None else self.program.resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no program file {str(path)!r}: write it first.")
        self.wait_ready()
        for old in self._runs:
            if old.running:
                old.stop()
        run = WorkerRun(self, len(self._runs) + 1, config, num_workers, path)
        self._runs.append(run)
        for task in run.tasks:
            command = {
                "run": run.number,
                "task": task,
                "tf_config": run.tf_config(task),
                "config": config.to_json(),
                "program": str(run.program),
                "run_dir": str(run.dir),
                "log": str(run.dir / f"worker-{task}.log"),
                "metadata_ip": self.metadata_ip,
            }
            self._start_worker(run, command)
        threading.Thread(
            target=run._enforce_deadline, daemon=True, name=f"dtf-multiworker-{run.number}-deadline"
        ).start()
        return run

    def _send(self, line: bytes) -> None:
        """Write a command line to the fork launcher (one writer at a time)."""
        with self._send_lock:
            try:
                assert self._process is not None and self._process.stdin is not None
                self._process.stdin.write(line)
                self._process.stdin.flush()
            except (OSError, ValueError) as exc:  # ValueError: its stdin was closed
                raise WorkerError(f"the worker launcher is gone.{self._launcher_tail()}") from exc

    def _start_worker(self, run: WorkerRun, command: dict) -> None:
        line = (json.dumps(command) + "\n").encode()
        if self.start_method == "fork":
            self._send(line)
            return
        # Its standard error is its log from the first byte: an import error shows there.
        popen = supervise.start([sys.executable, "-m", _MODULE, "--worker"], command["log"], _env())
        assert popen.stdin is not None
        popen.stdin.write(line)
        popen.stdin.flush()  # kept open: its end of file tells the worker that we are gone
        task = int(command["task"])
        with self._cond:
            run.pids[task] = popen.pid
            run._popens[task] = popen
        reader = threading.Thread(
            target=self._read_spawned,
            args=(run, task, popen),
            daemon=True,
            name=f"dtf-multiworker-{run.number}-{task}",
        )
        reader.start()
        run._readers.append(reader)

    def _read_spawned(self, run: WorkerRun, task: int, popen: subprocess.Popen) -> None:
        assert popen.stdout is not None
        self._read(popen.stdout)
        code = popen.wait()
        with self._cond:
            run._exited(task, code)
            self._cond.notify_all()

    def _read(self, stream) -> None:
        read_events(stream, self._cond, self._on_event)

    def _on_event(self, event: dict) -> None:
        if event.get("event") == "loaded":
            self._loaded_s = float(event["seconds"])
            return
        number = int(event.get("run", 0))
        if not 1 <= number <= len(self._runs):
            return
        run = self._runs[number - 1]
        task = int(event["task"])
        if event["event"] == "forked":
            run.pids[task] = int(event["pid"])
        elif event["event"] == "exit":
            run._exited(task, int(event["returncode"]))
        else:
            run.events.append(event)

    def _check_alive(self) -> None:
        process = self._process
        if process is not None and process.poll() is not None and self._phase == "running":
            raise WorkerError(
                f"the worker launcher {describe_returncode(process.returncode)}."
                f"{self._launcher_tail()}"
            )

    def _launcher_tail(self) -> str:
        if self.workdir is None:
            return ""
        return log_tail(self.workdir / "launcher.log", where=False)

    def stop(self) -> None:
        """Kill every worker and the launcher, wait until they are gone (``SIGKILL`` for any
        that lingers), and remove the temporary folder of the runs."""
        import psutil

        if not self._end():
            return
        try:
            workers = []
            for pid in self.pids[1:] if self._process is not None else self.pids:
                try:
                    workers.append(psutil.Process(pid))
                except psutil.NoSuchProcess:
                    pass
            for run in self._runs:
                for popen in run._popens.values():
                    if popen.poll() is None:
                        popen.kill()
            process = self._process
            if process is not None:
                # End of file: it kills its workers and exits; if not, its session is killed.
                supervise.stop_child(process, 2 * _STOP_WAIT_S)
                if self._reader is not None:
                    self._reader.join(1.0)
                if process.stdout is not None:
                    process.stdout.close()
            # Any worker still there (its launcher gone, say) is killed now.
            supervise.stop_processes(workers, _STOP_WAIT_S, first=signal.SIGKILL)
            for run in self._runs:
                for reader in run._readers:
                    reader.join(1.0)  # it reads until the worker's output ends
                for popen in run._popens.values():
                    popen.wait(_STOP_WAIT_S)
                    for stream in (popen.stdin, popen.stdout):
                        if stream is not None:
                            stream.close()
        finally:
            supervise.remove_folder(self.workdir, self._user_workdir)
            self._ended()

    @property
    def pids(self) -> list[int]:
        """Every process this launcher started: itself and every worker of every run."""
        with self._cond:
            workers = [pid for run in self._runs for pid in run.pids.values()]
        return ([self.pid] if self.pid is not None else []) + workers

    def __repr__(self) -> str:
        ready = f", TensorFlow imported in {self._loaded_s:.1f} s" if self._loaded_s else ""
        return f"Launcher({self.start_method}, {self._phase}{ready})"
