"""``LocalCluster``: real TensorFlow server processes on this machine (see :mod:`dtf.cluster`)."""

from __future__ import annotations

import json
import numbers
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from dtf import supervise
from dtf.cluster import env as cluster_env
from dtf.cluster import exposure
from dtf.cluster.protocol import EXIT_PORT_IN_USE, LAUNCHER_GRACE_S, parse_ready_line
from dtf.cluster.spec import (
    DEFAULT_HOST,
    ClusterConfigError,
    ClusterError,
    PortInUseError,
    Task,
    all_tasks,
    free_ports,
    is_local_host,
    load,
    parse_task,
    port_in_use,
    select_tasks,
    split_address,
    tf_config,
)
from dtf.supervise import EXIT_WAIT_S as _EXIT_WAIT_S
from dtf.supervise import describe_returncode, log_tail

POSIX = os.name == "posix"
START_METHODS = ("fork", "spawn")
#: ``fork`` (one TensorFlow import for the whole cluster) where it is known to work.
DEFAULT_START_METHOD = "fork" if sys.platform.startswith("linux") else "spawn"
#: Seconds a cluster may take to be ready; a loaded 2-core machine imports TensorFlow slowly.
READY_TIMEOUT_S = 60.0
#: Seconds between ``SIGTERM`` and ``SIGKILL`` when a cluster stops.
STOP_GRACE_S = 3.0
#: Starts tried when a server finds a port picked for it already taken (a race with another
#: process between picking the port and binding it).
PORT_ATTEMPTS = 3
_TICK_S = 0.05
_LOG_PREFIX = "dtf-cluster-"


class TaskFailedError(ClusterError):
    """A task of the cluster died, or could not start."""

    def __init__(self, task: Task, message: str):
        self.task = task
        super().__init__(message)


class ReadyTimeoutError(ClusterError):
    """Some tasks did not report ready within the cluster's ``ready_timeout``."""

    def __init__(self, tasks: list[Task], message: str):
        self.tasks = tasks
        super().__init__(message)


@dataclass
class _TaskState:
    task: Task
    address: str
    log: Path
    started_at: float = field(default_factory=time.monotonic)
    pid: int | None = None
    process: psutil.Process | None = None
    popen: subprocess.Popen | None = None
    reader: threading.Thread | None = None
    ready_at: float | None = None
    returncode: int | None = None
    error_kind: str | None = None
    error: str | None = None
    gone: bool = False
    seq: int = 0

    @property
    def down(self) -> bool:
        return self.returncode is not None or self.error_kind is not None


class LocalCluster(supervise.Supervisor):
    """Start a TensorFlow cluster of real server processes on this machine.

    ``spec``: ``{"worker": 2, "ps": 1}`` (free ports on ``host``), ``{"worker":
    ["127.0.0.1:2222", ...]}``, a ``tf.train.ClusterSpec`` or a JSON file path (see
    :mod:`dtf.cluster.spec`). ``exclude``: tasks or whole jobs this process plays itself (the
    ``host`` of the *Distributed Computation in TensorFlow* post): they stay in the spec, with
    a port, but no server is started for them. ``start_method``: ``"fork"`` or ``"spawn"``
    (see :mod:`dtf.cluster`). Use it as a context manager, or call :meth:`start` and
    :meth:`stop` (notebook cells); :meth:`stop` also runs at interpreter exit.

    ``pick_ports=True`` keeps the jobs and hosts of ``spec`` (a config file's layout) but
    gives every task on this machine a free port, so two runs of one notebook never clash.
    ``ready_timeout``: seconds :meth:`start` waits for every server; ``stop_grace``: seconds
    between ``SIGTERM`` and ``SIGKILL``; ``log_dir``: where the servers' logs go (default: a
    temporary folder removed by :meth:`stop`).

    ``command_prefix``: ``{task or job: ["ip", "netns", "exec", "ns1"], ...}`` runs those
    tasks' servers as ``[*prefix, python, "-m", "dtf.cluster.server", ...]``, e.g. in a network
    namespace of their own (:mod:`dtf.netns`). Such a task runs on the host its prefix puts it
    on, so its address need not be one of this machine's, its port is checked there (by the
    server: a port in use is a :class:`PortInUseError`) and not here, and tasks with different
    prefixes may share a port. It needs an address (not a count) and the ``spawn`` start
    method (the default when ``command_prefix`` is given).
    """

    def __init__(
        self,
        spec,
        *,
        exclude=None,
        start_method: str | None = None,
        ready_timeout: float = READY_TIMEOUT_S,
        stop_grace: float = STOP_GRACE_S,
        host: str = DEFAULT_HOST,
        pick_ports: bool = False,
        log_dir: str | os.PathLike | None = None,
        command_prefix=None,
    ):
        jobs = load(spec)
        self._prefix = _command_prefixes(command_prefix, jobs)
        if start_method is None:
            start_method = "spawn" if self._prefix else DEFAULT_START_METHOD
        elif self._prefix and start_method != "spawn":
            raise ClusterConfigError(
                "command_prefix needs start_method='spawn': each prefixed task is a process of "
                "its own, started through its prefix."
            )
        self.start_method = start_method
        if self.start_method not in START_METHODS:
            raise ClusterConfigError(
                f"start_method must be 'fork' or 'spawn', got {start_method!r}."
            )
        if self.start_method == "fork" and not hasattr(os, "fork"):
            raise ClusterConfigError(
                "start_method='fork' needs os.fork, which this system does not have: use "
                "start_method='spawn'."
            )
        self.ready_timeout = _positive_seconds("ready_timeout", ready_timeout)
        self.stop_grace = _positive_seconds("stop_grace", stop_grace)
        if not isinstance(host, str) or not is_local_host(host):
            raise ClusterConfigError(
                f"host {host!r} is not an address of this machine; tasks given as counts run "
                "here (use the default, 127.0.0.1)."
            )
        self.host = host
        self.pick_ports = bool(pick_ports)
        # Tasks whose port is picked at start, with their host: counted tasks, and with
        # pick_ports=True every task on this machine (a config file's layout, fresh ports).
        self._auto_hosts: dict[Task, str] = {}
        for task in all_tasks(jobs):
            address = jobs[task.job][task.index]
            if address is None:
                if task in self._prefix:
                    raise ClusterConfigError(
                        f"task {task} has a command_prefix but no address: give it the "
                        "'host:port' where its prefix runs it."
                    )
                self._auto_hosts[task] = host
            elif self.pick_ports and task not in self._prefix:
                task_host, _ = split_address(address, task)
                if is_local_host(task_host):
                    self._auto_hosts[task] = task_host
                    jobs[task.job][task.index] = None
        self._given = jobs
        self.excluded = frozenset(select_tasks(exclude, jobs))
        self.tasks = all_tasks(jobs)
        self.started_tasks = [t for t in self.tasks if t not in self.excluded]
        if not self.started_tasks:
            raise ClusterConfigError(
                "every task is excluded, so there is nothing to start: exclude only the tasks "
                "this process plays itself."
            )
        ports: dict[int, Task] = {}
        prefixed_ports: dict[tuple, Task] = {}
        for task in self.started_tasks:
            address = jobs[task.job][task.index]
            if address is None:
                continue
            task_host, port = split_address(address, task)
            if task in self._prefix:  # runs where its prefix puts it: checked there
                key = (self._prefix[task], port)
                if key in prefixed_ports:
                    raise ClusterConfigError(
                        f"tasks {prefixed_ports[key]} and {task} both use port {port} under "
                        f"the command prefix {list(self._prefix[task])}; a TensorFlow server "
                        "listens on every interface, so they need two ports."
                    )
                prefixed_ports[key] = task
                continue
            if not is_local_host(task_host):
                raise ClusterConfigError(
                    f"task {task} has host {task_host!r}, which is not this machine: a "
                    "LocalCluster starts servers only here. Start that task on its machine "
                    "with `dtf-server` (or `python -m dtf.cluster.server`), and pass "
                    "exclude=[...] for it."
                )
            if port in ports:
                raise ClusterConfigError(
                    f"tasks {ports[port]} and {task} both use port {port} on this machine; a "
                    "TensorFlow server listens on every interface, so two servers on one "
                    "machine need two ports."
                )
            ports[port] = task
        self._explicit_ports = ports
        self._user_log_dir = Path(log_dir) if log_dir is not None else None
        self._jobs: dict[str, list[str]] | None = None
        self._states: dict[Task, _TaskState] = {}
        self._cond = threading.Condition()
        self._launcher: subprocess.Popen | None = None
        self._launcher_reader: threading.Thread | None = None
        self._launcher_loaded: float | None = None
        self._log_dir: Path | None = None
        self._seq = 0
        self.startup_s: float | None = None
        self.import_s: float | None = None

    # ------------------------------------------------------------------ life cycle

    def start(self) -> LocalCluster:
        """Start every task's server and wait until all are ready; returns ``self``.

        Raises :class:`PortInUseError`, :class:`TaskFailedError` or
        :class:`ReadyTimeoutError` (after stopping whatever it started).
        """
        self._begin(
            ClusterError(
                f"this LocalCluster is {self._phase}; a cluster starts once: create a new one."
            )
        )
        cluster_env.apply_grpc_options()  # keepalive for this process's clients too (issue 19)
        began = time.monotonic()
        deadline = began + self.ready_timeout
        try:
            for port, task in self._explicit_ports.items():
                if port_in_use(port):
                    raise PortInUseError(task, port)
            self._log_dir = supervise.make_folder(self._user_log_dir, _LOG_PREFIX)
            if self.start_method == "fork":
                self._start_launcher(deadline)
            for attempt in range(1, PORT_ATTEMPTS + 1):
                self._jobs = self._resolve_ports()
                for task in self.started_tasks:
                    self._start_task(task)
                try:
                    self._wait_ready(self.started_tasks, deadline)
                    break
                except PortInUseError as exc:
                    if attempt == PORT_ATTEMPTS or exc.task not in self._auto_hosts:
                        raise
                    self._stop_tasks(self.started_tasks)  # a race for a picked port: again
            self.startup_s = time.monotonic() - began
            self._started()
            exposure.warn_exposed(  # once per process; prefixed tasks run elsewhere (issue 19)
                [
                    int(self.address(t).rsplit(":", 1)[1])
                    for t in self.started_tasks
                    if t not in self._prefix
                ]
            )
            return self
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process this cluster started (``SIGTERM``, then ``SIGKILL``)."""
        if not self._end():
            return
        try:
            if self._launcher is not None:
                self._stop_launcher()
            self._stop_tasks(list(self._states))
        finally:
            supervise.remove_folder(self._log_dir, self._user_log_dir)
            self._ended()

    # ------------------------------------------------------------------ what a client needs

    def as_dict(self) -> dict[str, list[str]]:
        """The cluster as ``{job: ["host:port", ...]}`` (ports are known once it started)."""
        if self._jobs is None:
            raise ClusterError(
                "this cluster has not started yet: its free ports are picked by start()."
            )
        return {job: list(addresses) for job, addresses in self._jobs.items()}

    @property
    def spec(self):
        """The ``tf.train.ClusterSpec`` (imports TensorFlow)."""
        import tensorflow as tf

        return tf.train.ClusterSpec(self.as_dict())

    def task(self, task) -> Task:
        """``task`` (``"worker/1"``, ``("worker", 1)``, ...) as a :class:`Task` of this cluster."""
        return parse_task(task, self._given)

    def address(self, task) -> str:
        task = self.task(task)
        return self.as_dict()[task.job][task.index]

    def target(self, task) -> str:
        """``grpc://host:port`` of ``task``: for ``tf.compat.v1.Session(target)``."""
        return f"grpc://{self.address(task)}"

    @property
    def targets(self) -> dict[str, str]:
        """``{"worker/0": "grpc://127.0.0.1:port", ...}`` for every task."""
        return {str(t): self.target(t) for t in self.tasks}

    def tf_config(self, task) -> str:
        """The strategy ``TF_CONFIG`` JSON of ``task`` in this cluster: the chief, worker, ps
        and evaluator jobs only (see :func:`dtf.cluster.spec.tf_config`; the servers keep the
        whole spec, :attr:`spec`, ``host`` included)."""
        return tf_config(self.as_dict(), self.task(task))

    def pid(self, task) -> int | None:
        """The process id of ``task``'s server (``None`` for an excluded task)."""
        state = self._states.get(self.task(task))
        return None if state is None else state.pid

    @property
    def pids(self) -> dict[str, int]:
        return {str(t): s.pid for t, s in self._states.items() if s.pid is not None}

    @property
    def launcher_pid(self) -> int | None:
        """The process id of the launcher (``fork`` start method), else ``None``."""
        return None if self._launcher is None else self._launcher.pid

    @property
    def ports(self) -> list[int]:
        """The ports of the tasks this cluster started."""
        return [split_address(self.address(t))[1] for t in self.started_tasks]

    @property
    def log_dir(self) -> Path | None:
        """The folder of the servers' logs (a temporary one is removed by :meth:`stop`)."""
        return self._log_dir

    def __repr__(self) -> str:
        when = f", ready in {self.startup_s:.1f} s" if self.startup_s is not None else ""
        lines = [f"LocalCluster({self.start_method}, {self._phase}{when})"]
        jobs = self._jobs or self._given
        for task in self.tasks:
            address = jobs[task.job][task.index] or "(port picked at start)"
            state = self._states.get(task)
            if task in self.excluded:
                status, pid = "not started (excluded: played by the client)", "-"
            elif state is None:
                status, pid = "not started", "-"
            else:
                status = (
                    describe_returncode(state.returncode)
                    if state.returncode is not None
                    else "failed"
                    if state.down
                    else "ready"
                    if state.ready_at
                    else "starting"
                )
                pid = str(state.pid or "-")
            lines.append(f"  {str(task):<12} {address:<24} pid {pid:<8} {status}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ health

    def check(self, timeout: float | None = None) -> None:
        """Raise :class:`TaskFailedError` naming the first task that is down, with its exit
        status and the end of its log; return quietly when every task runs.

        With ``timeout`` (seconds), also ask every server for a gRPC handshake (see
        :func:`answers`): a task whose process runs but does not answer in time (stopped by
        ``SIGSTOP``, frozen, swamped) is named as well.
        """
        down = self._down_tasks()
        if down:
            state = self._states[down[0]]
            raise TaskFailedError(state.task, self._down_message(state, "is down"))
        if timeout is None:
            return
        timeout = _positive_seconds("timeout", timeout)
        states = list(self._states.values())
        replies = answering([s.address for s in states], timeout)
        for state in states:
            if not replies[state.address]:
                self.check()  # it may have died meanwhile: then say so
                raise TaskFailedError(
                    state.task,
                    f"task {state.task} does not answer within {timeout} s, though its server "
                    f"(pid {state.pid}) is {_process_status(state.process)}.",
                )

    def alive(self, task=None, timeout: float | None = None) -> bool:
        """Whether ``task`` (default: every started task) is running, and with ``timeout``
        also answers a gRPC handshake within that many seconds."""
        down = self._down_tasks()
        tasks = list(self._states) if task is None else [self._state_of(task).task]
        if any(t in down for t in tasks):
            return False
        if timeout is None:
            return True
        timeout = _positive_seconds("timeout", timeout)
        replies = answering([self._states[t].address for t in tasks], timeout)
        return all(replies.values())

    def kill(self, task, sig: int | None = None, timeout: float = _EXIT_WAIT_S) -> int:
        """Send ``sig`` (default ``SIGKILL``) to ``task``'s server, wait until it is gone and
        return its exit status (negative: the signal). For demonstrations of failures."""
        state = self._state_of(task)
        if not state.down and state.process is not None:
            try:
                if sig is None:
                    state.process.kill()
                else:
                    state.process.send_signal(sig)
            except psutil.NoSuchProcess:
                pass
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                self._poll_locked()
                if state.returncode is not None:
                    return state.returncode
                if time.monotonic() >= deadline:
                    raise TaskFailedError(
                        state.task, f"task {state.task} did not exit within {timeout} s."
                    )
                self._cond.wait(_TICK_S)

    def restart(self, task, timeout: float | None = None) -> None:
        """Start a task that is down again, at the same address, and wait until it is ready."""
        state = self._state_of(task)
        if not self.running:
            raise ClusterError(f"the cluster is {self._phase}; restart works on a running one.")
        if state.task not in self._down_tasks():
            raise ClusterError(f"task {state.task} is still running: kill() it first.")
        _, port = split_address(state.address)
        if state.task not in self._prefix and port_in_use(port):
            raise PortInUseError(state.task, port)
        self._start_task(state.task)
        self._wait_ready([state.task], time.monotonic() + (timeout or self.ready_timeout))

    # ------------------------------------------------------------------ internals: ports

    def _resolve_ports(self) -> dict[str, list[str]]:
        missing = len(self._auto_hosts)
        taken = {split_address(a)[1] for addresses in self._given.values() for a in addresses if a}
        picked = [p for p in free_ports(missing + len(taken)) if p not in taken][:missing]
        auto = {}
        for task, host in self._auto_hosts.items():
            host = f"[{host}]" if ":" in host else host
            auto[task] = f"{host}:{picked.pop(0)}"
        return {
            job: [auto[Task(job, i)] if a is None else a for i, a in enumerate(addresses)]
            for job, addresses in self._given.items()
        }

    # ------------------------------------------------------------------ internals: processes

    def _start_launcher(self, deadline: float) -> None:
        log_dir = self._log_dir
        assert log_dir is not None, "start() makes the log folder before the launcher"
        self._launcher, self._launcher_reader = supervise.start_fork_server(
            "dtf.cluster._launcher",
            log_dir / "launcher.log",
            cluster_env.server_env(),
            self._cond,
            self._on_event,
        )
        launcher = self._launcher

        def check() -> None:
            if launcher.poll() is not None:
                raise ClusterError(
                    f"the cluster launcher {describe_returncode(launcher.returncode)} while "
                    f"importing TensorFlow.{log_tail(log_dir / 'launcher.log')}"
                )

        with self._cond:
            if not supervise.wait_until(
                self._cond, lambda: self._launcher_loaded is not None, deadline, check
            ):
                raise ReadyTimeoutError(
                    list(self.started_tasks),
                    f"no task is ready after {self.ready_timeout} s: the launcher was still "
                    "importing TensorFlow (tasks "
                    f"{', '.join(map(str, self.started_tasks))}). A busy machine imports "
                    "TensorFlow slowly: give a larger ready_timeout.",
                )
        self.import_s = self._launcher_loaded

    def _start_task(self, task: Task) -> None:
        assert self._jobs is not None and self._log_dir is not None
        log = self._log_dir / f"{task.job}-{task.index}.log"
        with self._cond:
            self._seq += 1
            state = _TaskState(task, self._jobs[task.job][task.index], log, seq=self._seq)
            self._states[task] = state
        if self.start_method == "fork":
            command = {
                "cmd": "start",
                "cluster": self._jobs,
                "job": task.job,
                "index": task.index,
                "seq": state.seq,
                "log": str(log),
            }
            assert self._launcher is not None and self._launcher.stdin is not None
            try:
                self._launcher.stdin.write((json.dumps(command) + "\n").encode())
                self._launcher.stdin.flush()
            except (BrokenPipeError, OSError):
                with self._cond:
                    state.error_kind = "launcher"
                    state.error = "the cluster launcher is gone"
            return
        args = [
            *self._prefix.get(task, ()),
            sys.executable,
            "-m",
            "dtf.cluster.server",
            "--cluster-json",
            json.dumps(self._jobs),
            "--job",
            task.job,
            "--task",
            str(task.index),
            "--exit-on-stdin-eof",
        ]
        state.popen = supervise.start(args, log, cluster_env.server_env())
        state.pid = state.popen.pid
        try:
            state.process = psutil.Process(state.pid)
        except psutil.NoSuchProcess:
            pass
        state.reader = threading.Thread(
            target=self._read_server,
            args=(state, state.popen.stdout),
            daemon=True,
            name=f"dtf-cluster-{task.job}-{task.index}",
        )
        state.reader.start()

    def _on_event(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "loaded":
            self._launcher_loaded = float(event.get("seconds", 0.0))
            return
        task = Task(str(event.get("job")), int(event.get("index", -1)))
        state = self._states.get(task)
        if state is None or event.get("seq") != state.seq:
            return  # an earlier incarnation of a restarted task
        # The launcher reports "forked" and the child "ready" (both with the pid) on one
        # pipe: under load the child's report can come first.
        if kind in ("forked", "ready", "error") and "pid" in event and state.pid is None:
            state.pid = int(event["pid"])
            try:
                state.process = psutil.Process(state.pid)
            except psutil.NoSuchProcess:
                state.gone = True
        if kind == "ready":
            state.ready_at = time.monotonic()
        elif kind == "error":
            state.error_kind = str(event.get("kind", "start"))
            state.error = str(event.get("message", ""))
        elif kind == "exit":
            state.returncode = int(event.get("returncode", 1))

    def _read_server(self, state: _TaskState, stream) -> None:
        for raw in stream:
            ready = parse_ready_line(raw.decode("utf-8", "replace"))
            if ready and ready["task"] == state.task:
                with self._cond:
                    state.ready_at = time.monotonic()
                    self._cond.notify_all()

    def _poll_locked(self) -> None:
        for state in self._states.values():
            if state.popen is not None and state.returncode is None:
                code = state.popen.poll()
                if code is not None:
                    state.returncode = code
                    if code == EXIT_PORT_IN_USE:
                        state.error_kind = "port"
        if self._launcher is not None and self._launcher.poll() is not None:
            message = (
                f"the cluster launcher {describe_returncode(self._launcher.returncode)}, and its "
                f"servers with it{log_tail(self._log_dir / 'launcher.log')}"
                if self._log_dir
                else "the cluster launcher is gone"
            )
            for state in self._states.values():
                if not state.down:
                    state.error_kind, state.error = "launcher", message
        for state in self._states.values():
            if state.process is not None and not state.down and not state.gone:
                try:
                    gone = (
                        not state.process.is_running()
                        or state.process.status() == psutil.STATUS_ZOMBIE
                    )
                except psutil.NoSuchProcess:
                    gone = True
                state.gone = gone

    def _down_tasks(self) -> list[Task]:
        with self._cond:
            self._poll_locked()
            # A dead fork-mode server is reaped by the launcher, which then reports its exit
            # status; wait a moment for that report.
            deadline = time.monotonic() + 1.0
            while any(s.gone and not s.down for s in self._states.values()):
                if time.monotonic() >= deadline:
                    break
                self._cond.wait(_TICK_S)
                self._poll_locked()
            return [t for t, s in self._states.items() if s.down or s.gone]

    def _state_of(self, task) -> _TaskState:
        task = self.task(task)
        if task in self.excluded:
            raise ClusterConfigError(
                f"task {task} is excluded: this cluster did not start it (the client plays it)."
            )
        state = self._states.get(task)
        if state is None:
            raise ClusterError(f"task {task} has not been started: start() the cluster first.")
        return state

    def _down_message(self, state: _TaskState, what: str) -> str:
        if state.error_kind == "launcher":
            status = state.error or "the cluster launcher is gone"
        elif state.returncode is not None:
            status = describe_returncode(state.returncode)
        else:
            status = "is gone"
        detail = f": {state.error}" if state.error and state.error_kind != "launcher" else ""
        pid = f" (pid {state.pid})" if state.pid else ""
        return f"task {state.task} {what}: its server{pid} {status}{detail}.{log_tail(state.log)}"

    def _wait_ready(self, tasks: list[Task], deadline: float) -> None:
        with self._cond:
            while True:
                self._poll_locked()
                for task in tasks:
                    state = self._states[task]
                    if state.error_kind == "port":
                        _, port = split_address(state.address)
                        raise PortInUseError(task, port)
                    if state.down:
                        raise TaskFailedError(
                            task, self._down_message(state, "failed before it was ready")
                        )
                pending = [t for t in tasks if self._states[t].ready_at is None]
                if not pending:
                    return
                if time.monotonic() >= deadline:
                    ready = [t for t in tasks if t not in pending]
                    state = self._states[pending[0]]
                    raise ReadyTimeoutError(
                        pending,
                        f"task{'s' if len(pending) > 1 else ''} "
                        f"{', '.join(map(str, pending))} did not report ready within "
                        f"{self.ready_timeout} s (ready: "
                        f"{', '.join(map(str, ready)) or 'none'}). A busy machine imports "
                        "TensorFlow slowly: give a larger ready_timeout."
                        f"{log_tail(state.log)}",
                    )
                self._cond.wait(_TICK_S)

    def _stop_tasks(self, tasks: Iterable[Task]) -> None:
        states = [self._states[t] for t in tasks if t in self._states]
        for state in states:
            if state.popen is not None and state.popen.stdin is not None:
                try:
                    state.popen.stdin.close()  # the server's lifeline: it exits by itself
                except OSError:
                    pass
        # psutil reaps the servers that are this process's children, so their Popen sees
        # no exit status any more: keep the one psutil got (negative: the signal).
        codes = supervise.stop_processes(
            [s.process for s in states if s.process is not None and s.returncode is None],
            self.stop_grace,
        )
        deadline = time.monotonic() + _EXIT_WAIT_S
        with self._cond:
            for state in states:
                if state.popen is not None:
                    try:
                        state.popen.wait(max(0.0, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        pass
                    if state.returncode is None and state.pid in codes:
                        state.returncode = codes[state.pid]
                    self._poll_locked()
                elif self._launcher is not None and self._launcher.poll() is None:
                    while state.returncode is None and time.monotonic() < deadline:
                        self._cond.wait(_TICK_S)
            for state in states:
                if state.returncode is None:
                    state.error_kind, state.error = "stopped", "stopped by the cluster"
        for state in states:
            if state.reader is not None:
                state.reader.join(1.0)
            if state.popen is not None and state.popen.stdout is not None:
                state.popen.stdout.close()

    def _stop_launcher(self) -> None:
        launcher = self._launcher
        assert launcher is not None
        # End of file: the launcher stops its servers and exits; if not, its session is killed.
        # One still importing TensorFlow has started nothing and would read its end of file
        # only once imported, seconds later: its session is killed at once.
        loaded = self._launcher_loaded is not None
        supervise.stop_child(launcher, self.stop_grace + 2 * LAUNCHER_GRACE_S if loaded else 0.0)
        if self._launcher_reader is not None:
            self._launcher_reader.join(1.0)
        if launcher.stdout is not None:
            launcher.stdout.close()


def answering(addresses: Iterable[str], timeout: float = 2.0) -> dict[str, bool]:
    """For each ``host:port``, whether a gRPC server there completes a connection handshake
    within ``timeout`` seconds (all are asked at once).

    The handshake needs the server process to run: a process stopped by ``SIGSTOP`` still
    has its port open (the kernel accepts the TCP connection) but never answers. Works for
    servers on other machines too; it uses the ``grpcio`` package that TensorFlow depends on,
    not TensorFlow.
    """
    import grpc

    timeout = _positive_seconds("timeout", timeout)
    addresses = list(dict.fromkeys(addresses))
    channels = [grpc.insecure_channel(a) for a in addresses]
    futures = [grpc.channel_ready_future(c) for c in channels]
    deadline = time.monotonic() + timeout
    replies = {}
    try:
        for address, future in zip(addresses, futures, strict=True):
            try:
                future.result(timeout=max(0.0, deadline - time.monotonic()))
                replies[address] = True
            except grpc.FutureTimeoutError:
                replies[address] = False
    finally:
        for future in futures:
            future.cancel()
        for channel in channels:
            channel.close()
    return replies


def answers(address: str, timeout: float = 2.0) -> bool:
    """Whether the gRPC server at ``address`` (``host:port``) answers within ``timeout`` s."""
    return answering([address], timeout)[address]


def _process_status(process: psutil.Process | None) -> str:
    if process is None:
        return "in an unknown state"
    try:
        status = process.status()
    except psutil.NoSuchProcess:
        return "gone"
    if status == psutil.STATUS_STOPPED:
        return "stopped (by SIGSTOP or Ctrl-Z: SIGCONT resumes it)"
    return f"{status} (frozen or too busy to answer)"


def _command_prefixes(prefixes, jobs) -> dict[Task, tuple[str, ...]]:
    """``{Task: (arg, ...)}`` from a ``command_prefix`` mapping of tasks or jobs to commands."""
    if prefixes is None:
        return {}
    if not isinstance(prefixes, Mapping):
        raise ClusterConfigError(
            "command_prefix must be a dict of tasks or jobs to commands, e.g. "
            "{'worker/0': ['ip', 'netns', 'exec', 'ns0']}, not "
            f"{type(prefixes).__name__}."
        )
    found: dict[Task, tuple[str, ...]] = {}
    for key, command in prefixes.items():
        if (
            isinstance(command, (str, bytes))
            or not isinstance(command, Iterable)
            or not (command := tuple(command))
            or not all(isinstance(arg, str) and arg for arg in command)
        ):
            raise ClusterConfigError(
                f"the command_prefix of {key!r} must be a non-empty list of strings, e.g. "
                f"['ip', 'netns', 'exec', 'ns0'], got {prefixes[key]!r}."
            )
        for task in select_tasks([key], jobs):
            found[task] = command
    return found


def _positive_seconds(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) > 0:
        raise ClusterConfigError(f"{name} must be a number of seconds > 0, got {value!r}.")
    return float(value)
