"""Cluster specs: read, check and describe them, in plain Python (no TensorFlow).

A spec names the *jobs* of a cluster and the address of each *task* of each job, as
TensorFlow's ``tf.train.ClusterSpec`` does. This module accepts three forms:

- a dict of address lists, ``{"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}``;
- a path to a JSON file holding such a dict, like the ``config.json`` of the *Distributed
  Computation in TensorFlow* post (``{"host": [...], "worker": [...]}``);
- counts per job, ``{"worker": 2, "ps": 1}``: that many tasks on this machine, on free ports
  picked when the cluster starts (see :func:`free_ports`). Counts and lists may be mixed.

Every problem is a :class:`ClusterConfigError` (a ``ValueError``) raised before anything
starts, one message per problem, each saying what to do:

- a job name TensorFlow cannot use in a device name. TensorFlow accepts any job name made of
  a letter followed by letters, digits and ``_`` (``worker``, ``ps``, ``chief``,
  ``evaluator``, the ``host`` of the post, ``localhost`` of ``create_local_server``), so this
  module accepts all of them; a job is *unknown* when it is asked for (a task, ``exclude=``,
  the server's ``--job``) but not in the spec;
- ``chief`` or ``evaluator`` with more than one task (TensorFlow's distribution strategies
  allow at most one of each);
- a spec with no ``worker`` job (every cluster of the course has workers; a near miss such
  as ``wroker`` is named in the message);
- a job with no task, a task count that is not a whole number of at least 1;
- more than :data:`MAX_COUNT` tasks on this machine in all, whether given as counts or as
  addresses of this machine (tasks on other hosts do not count);
- an address that is not ``host:port``, a port that is not a whole number from 1 to 65535;
- the same address twice;
- a task index out of range (``worker/2`` in a two-worker job);
- an empty file, a file that is not valid JSON (the message names the file and the line and
  column of the error), JSON that is not an object of jobs, the same key twice in one JSON
  object (``json`` would silently keep the last);
- a path that does not exist, is a directory or cannot be read, a file that is not UTF-8 text
  (a UTF-16 file, as Windows PowerShell's ``>`` writes, gets the command that saves UTF-8;
  a UTF-8 byte-order mark is accepted, since PowerShell's ``-Encoding utf8`` writes one).
"""

from __future__ import annotations

import codecs
import difflib
import errno
import ipaddress
import json
import os
import re
import socket
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from dtf._util import whole_number

#: TensorFlow's syntax for a job name (``DeviceNameUtils``: a letter, then letters, digits, _).
JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
#: Jobs that TensorFlow's distribution strategies allow at most one task of.
SINGLE_TASK_JOBS = ("chief", "evaluator")
#: The jobs a ``tf.distribute`` strategy accepts in a cluster spec, in TensorFlow's words
#: (``multi_worker_util._validate_cluster_spec``); a strategy's ``TF_CONFIG`` holds no other.
STRATEGY_JOBS = ("chief", "worker", "ps", "evaluator")
#: The one job every spec must have.
REQUIRED_JOB = "worker"
#: Most tasks a spec may run on this machine, counted over all jobs: tasks given as counts
#: plus tasks whose address is this machine's. The course's choice, not TensorFlow's: its
#: notebooks start a handful of servers and a 2-core laptop must run them. Memory measured per
#: idle server (TF 2.21, CPU): ~44 MB of its own when forked from a process that imported
#: TensorFlow once (``LocalCluster``'s default), ~0.75 GB when it imports TensorFlow itself
#: (``start_method="spawn"``, ``python -m dtf.cluster.server``): 32 such servers need ~24 GB.
MAX_COUNT = 32
#: The host of tasks given as counts: loopback, so nothing outside this machine reaches them.
DEFAULT_HOST = "127.0.0.1"

_TASK = re.compile(r"^(?P<job>[^/:\s]+)\s*[/:]\s*(?P<index>[^/:\s]+)$")
_DEVICE_TASK = re.compile(r"^/job:(?P<job>[^/]+)(?:/replica:0)?/task:(?P<index>[^/]+)(?:/.*)?$")


class ClusterError(RuntimeError):
    """A cluster could not start, or one of its tasks failed."""


class ClusterConfigError(ValueError):
    """A cluster spec (or a task of it) is wrong; raised before anything starts."""


class PortInUseError(ClusterError):
    """The port of a task is taken by another process on this machine."""

    def __init__(self, task: Task, port: int, detail: str = ""):
        self.task, self.port = task, port
        tail = f" ({detail})" if detail else ""
        super().__init__(
            f"port {port} of task {task} is in use{tail}: another process on this machine "
            "listens on it (a TensorFlow server listens on every interface, so any address "
            "with that port counts). Stop that process, or give the task another port."
        )


class Task(NamedTuple):
    """One task of a cluster: ``Task("worker", 1)``, printed ``worker/1``."""

    job: str
    # TensorFlow's name for it (task_index); it hides tuple.index, which a Task never needs.
    index: int  # type: ignore[assignment]

    def __str__(self) -> str:
        return f"{self.job}/{self.index}"

    @property
    def device(self) -> str:
        """The device-name prefix of the task, ``/job:worker/task:1``."""
        return f"/job:{self.job}/task:{self.index}"


# --------------------------------------------------------------------------- reading


def load(spec) -> dict[str, list[str | None]]:
    """Check ``spec`` and return it as ``{job: [address or None, ...]}``.

    ``None`` stands for a task given as a count: its port is picked when the cluster starts.
    ``spec`` is a dict (of lists or counts), a ``tf.train.ClusterSpec``, or a path (``str``
    or ``os.PathLike``) to a JSON file. Raises :class:`ClusterConfigError`.
    """
    if isinstance(spec, (str, os.PathLike)):
        return normalize(read_json(spec), source=str(spec))
    if hasattr(spec, "as_dict") and callable(spec.as_dict):  # tf.train.ClusterSpec
        return normalize(spec.as_dict(), source="the ClusterSpec")
    return normalize(spec)


def read_json(path: str | os.PathLike) -> dict:
    """The JSON object in the file ``path``; the error names the file and the position."""
    path = Path(path)
    name = f"cluster file {str(path)!r}"
    if path.is_dir():
        raise ClusterConfigError(
            f"{str(path)!r} is a directory, not a cluster file: give the path of the JSON "
            f"file in it (e.g. {str(path / 'cluster.json')!r})."
        )
    if not path.is_file():
        hint = ""
        if str(path).lstrip().startswith("{"):
            hint = " It looks like JSON text: pass json.loads(text) (a dict) instead."
        raise ClusterConfigError(f"{name} does not exist.{hint}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        fix = ": check its permissions." if isinstance(exc, PermissionError) else "."
        raise ClusterConfigError(f"{name} cannot be read ({exc.strerror or exc}){fix}") from None
    return parse_json(_decode(data, name), source=name)


#: Byte-order marks of the encodings a Windows editor or shell may write instead of UTF-8;
#: UTF-32 first, since its little-endian mark starts with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_SAVE_AS_UTF8 = (
    "save it as UTF-8 (in Windows PowerShell, write it with '... | Out-File -Encoding utf8 "
    "FILE' or '... | Set-Content -Encoding utf8 FILE' instead of '>'; in an editor, save "
    "with the encoding UTF-8)."
)


def _decode(data: bytes, name: str) -> str:
    """``data`` as UTF-8 text (a UTF-8 byte-order mark is dropped); any other encoding is a
    :class:`ClusterConfigError` that says how to save the file as UTF-8."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            why = (
                " (Windows PowerShell 5.1's '>' and Out-File write UTF-16 by default)"
                if encoding == "UTF-16"
                else ""
            )
            raise ClusterConfigError(f"{name} is {encoding} text, not UTF-8{why}: {_SAVE_AS_UTF8}")
    if b"\0" in data:
        raise ClusterConfigError(
            f"{name} holds NUL bytes, so it is not UTF-8 text (UTF-16 without a "
            f"byte-order mark?): {_SAVE_AS_UTF8}"
        )
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ClusterConfigError(
            f"{name} is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line} column "
            f"{column} is not UTF-8 (Latin-1 or Windows-1252?): {_SAVE_AS_UTF8}"
        ) from None


def parse_json(text: str, source: str = "the cluster JSON") -> dict:
    """The JSON object in ``text``; errors name ``source`` and the line and column."""
    if not text.strip():
        raise ClusterConfigError(
            f"{source} is empty: write one JSON object of jobs, e.g. "
            '{"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}.'
        )
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        raise ClusterConfigError(
            f"{source} has the key {exc.key!r} twice in one JSON object; JSON readers keep "
            "only the last, so the first would be lost without a word: merge the two into "
            "one key."
        ) from None
    except json.JSONDecodeError as exc:
        raise ClusterConfigError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from None
    except (ValueError, RecursionError) as exc:  # a 5000-digit number, [[[[... nested
        raise ClusterConfigError(f"{source} is not a cluster spec: {exc}.") from None
    if not isinstance(value, dict):
        raise ClusterConfigError(
            f"{source} must hold one JSON object of jobs, e.g. "
            f'{{"worker": ["127.0.0.1:2222"]}}, not a {type(value).__name__}.'
        )
    return value


class _DuplicateKeyError(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``json``'s ``object_pairs_hook``: the object as a dict, refusing a key seen twice."""
    value: dict = {}
    for key, item in pairs:
        if key in value:
            raise _DuplicateKeyError(key)
        value[key] = item
    return value


def normalize(spec, source: str = "the cluster spec") -> dict[str, list[str | None]]:
    """Check a dict spec (see :func:`load`) and return ``{job: [address or None, ...]}``."""
    if not isinstance(spec, Mapping):
        raise ClusterConfigError(
            f"{source} must be a dict of jobs, a JSON file path or a tf.train.ClusterSpec, "
            f"not {type(spec).__name__}: e.g. {{'worker': 2}} or "
            "{'worker': ['127.0.0.1:2222', '127.0.0.1:2223']}."
        )
    if not spec:
        raise ClusterConfigError(
            f"{source} is empty: give at least one worker, e.g. {{'worker': 2}}."
        )
    jobs: dict[str, list[str | None]] = {}
    for job, tasks in spec.items():
        _check_job_name(job, source)
        jobs[job] = _tasks_of(job, tasks, source)
    if REQUIRED_JOB not in jobs:
        near = difflib.get_close_matches(REQUIRED_JOB, list(jobs), n=1, cutoff=0.6)
        hint = f" Did you mean 'worker' instead of {near[0]!r}?" if near else ""
        raise ClusterConfigError(
            f"{source} has no 'worker' job (its jobs: {', '.join(jobs)}); every cluster of the "
            f"course runs its computation on workers: add e.g. 'worker': 2.{hint}"
        )
    for job in SINGLE_TASK_JOBS:
        if job in jobs and len(jobs[job]) > 1:
            raise ClusterConfigError(
                f"job {job!r} has {len(jobs[job])} tasks in {source}; TensorFlow's distribution "
                f"strategies allow at most one {job} task. Use one, or name the others 'worker'."
            )
    _check_duplicates(jobs, source)
    _check_local_task_count(jobs, source)
    return jobs


def _check_job_name(job, source: str) -> None:
    if not isinstance(job, str) or not JOB_NAME.fullmatch(job):
        raise ClusterConfigError(
            f"job name {job!r} in {source} is not valid: TensorFlow job names start with a "
            "letter and hold only letters, digits and '_' (e.g. 'worker', 'ps', 'host')."
        )


def _tasks_of(job: str, tasks, source: str) -> list[str | None]:
    if isinstance(tasks, (str, bytes)):
        raise ClusterConfigError(
            f"job {job!r} in {source} must be a list of 'host:port' addresses or a number of "
            f"tasks, not one string: write [{tasks!r}]."
        )
    if isinstance(tasks, Mapping):
        raise ClusterConfigError(
            f"job {job!r} in {source} is given as a dict of task indices; give a list of "
            "addresses instead (task i is the i-th address), or a number of tasks."
        )
    if isinstance(tasks, Iterable):
        addresses = list(tasks)
        if not addresses:
            raise ClusterConfigError(
                f"job {job!r} in {source} has no task: give at least one address, or leave "
                "the job out."
            )
        for index, address in enumerate(addresses):
            split_address(address, Task(job, index))
        return [str(a).strip() for a in addresses]
    try:
        count = whole_number(f"the number of tasks of job {job!r}", tasks, minimum=1)
    except (TypeError, ValueError) as exc:
        raise ClusterConfigError(
            f"{exc} In {source}, give a job a number of tasks or a list of 'host:port' addresses."
        ) from None
    if count > MAX_COUNT:  # before the list is built: {"worker": 10**12} must not take memory
        _refuse_local_tasks(count, source)
    return [None] * count


def _check_local_task_count(jobs: Mapping[str, list[str | None]], source: str) -> None:
    """One limit for counts and addresses: at most :data:`MAX_COUNT` tasks on this machine."""
    local = sum(
        1
        for addresses in jobs.values()
        for address in addresses
        if address is None or is_local_host(split_address(address)[0])
    )
    if local > MAX_COUNT:
        _refuse_local_tasks(local, source)


def _refuse_local_tasks(count: int, source: str) -> None:
    raise ClusterConfigError(
        f"{source} asks for {count} tasks on this machine; at most {MAX_COUNT} are allowed "
        "(the course's limit, far above what its notebooks start; an idle server takes ~44 MB of "
        "its own when forked, as LocalCluster does, but ~0.75 GB when it imports TensorFlow "
        "itself, with start_method='spawn' or python -m dtf.cluster.server). Use fewer tasks, or "
        "give the others addresses on other hosts."
    )


def split_address(address, task: Task | str = "") -> tuple[str, int]:
    """``"127.0.0.1:2222"`` -> ``("127.0.0.1", 2222)``; ``"[::1]:2222"`` -> ``("::1", 2222)``."""
    who = f" of task {task}" if task != "" else ""
    if not isinstance(address, str):
        raise ClusterConfigError(f"address{who} must be a 'host:port' string, got {address!r}.")
    text = address.strip()
    host, sep, port_text = text.rpartition(":")
    if text.startswith("["):  # [IPv6]:port
        host = host[1:-1] if host.endswith("]") else ""
    if not sep or not host or (":" in host and not text.startswith("[")):
        raise ClusterConfigError(
            f"address {address!r}{who} is not 'host:port' (e.g. '127.0.0.1:2222'; an IPv6 "
            "host goes in brackets: '[::1]:2222')."
        )
    if not port_text.isdigit() or not port_text.isascii():
        raise ClusterConfigError(
            f"port {port_text!r} in address {address!r}{who} is not a whole number: ports "
            "are whole numbers from 1 to 65535."
        )
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ClusterConfigError(
            f"port {port} in address {address!r}{who} is out of range: ports are whole "
            "numbers from 1 to 65535."
        )
    return host, port


def _address_key(address: str) -> tuple[str, int]:
    host, port = split_address(address)
    host = host.lower()
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        pass
    return host, port


def _check_duplicates(jobs: Mapping[str, list[str | None]], source: str) -> None:
    seen: dict[tuple[str, int], Task] = {}
    for job, addresses in jobs.items():
        for index, address in enumerate(addresses):
            if address is None:
                continue
            key = _address_key(address)
            if key in seen:
                raise ClusterConfigError(
                    f"tasks {seen[key]} and {Task(job, index)} have the same address "
                    f"{address!r} in {source}; every task needs its own address "
                    "(on one machine: its own port)."
                )
            seen[key] = Task(job, index)


# --------------------------------------------------------------------------- tasks


def parse_task(task, jobs: Mapping[str, list]) -> Task:
    """``task`` as a :class:`Task` of ``jobs``; accepts ``Task``, ``("worker", 1)``,
    ``"worker/1"``, ``"worker:1"`` and ``"/job:worker/task:1"``.

    Raises :class:`ClusterConfigError` for a job that is not in ``jobs`` (unknown job) and
    for an index out of range.
    """
    if isinstance(task, str):
        match = _DEVICE_TASK.match(task.strip()) or _TASK.match(task.strip())
        if not match:
            raise ClusterConfigError(
                f"task {task!r} is not a task name: write 'worker/1', ('worker', 1) or "
                "'/job:worker/task:1'."
            )
        job, index_text = match["job"], match["index"]
        if not index_text.isdigit():
            raise ClusterConfigError(
                f"task index {index_text!r} in {task!r} is not a whole number."
            )
        index = int(index_text)
    elif isinstance(task, tuple) and len(task) == 2:
        job, index = task
        try:
            index = whole_number(f"the task index of {task!r}", index, minimum=0)
        except (TypeError, ValueError) as exc:
            raise ClusterConfigError(str(exc)) from None
    else:
        raise ClusterConfigError(
            f"task {task!r} is not a task name: write 'worker/1', ('worker', 1) or "
            "'/job:worker/task:1'."
        )
    check_job(job, jobs)
    count = len(jobs[job])
    if index >= count:
        raise ClusterConfigError(
            f"task index {index} is out of range for job {job!r}, which has {count} "
            f"task{'s' if count != 1 else ''} (indices 0 to {count - 1})."
        )
    return Task(job, index)


def check_job(job, jobs: Mapping[str, list]) -> str:
    """``job`` if it is a job of ``jobs``; else a :class:`ClusterConfigError` naming the jobs."""
    if not isinstance(job, str) or job not in jobs:
        near = difflib.get_close_matches(str(job), list(jobs), n=1, cutoff=0.6)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise ClusterConfigError(
            f"unknown job {job!r}: the cluster's jobs are {', '.join(map(repr, jobs))}.{hint}"
        )
    return job


def all_tasks(jobs: Mapping[str, list]) -> list[Task]:
    """Every task of ``jobs``, job by job, in index order."""
    return [Task(job, i) for job, addresses in jobs.items() for i in range(len(addresses))]


def select_tasks(items, jobs: Mapping[str, list]) -> set[Task]:
    """Tasks named by ``items``: each a task (see :func:`parse_task`) or a whole job name."""
    if items is None:
        return set()
    if isinstance(items, (str, Task)) or (
        isinstance(items, tuple) and len(items) == 2 and isinstance(items[1], int)
    ):
        items = [items]
    chosen: set[Task] = set()
    for item in items:
        if isinstance(item, str) and JOB_NAME.fullmatch(item.strip()):
            job = check_job(item.strip(), jobs)
            chosen.update(Task(job, i) for i in range(len(jobs[job])))
        else:
            chosen.add(parse_task(item, jobs))
    return chosen


def strategy_jobs(jobs: Mapping[str, list]) -> dict[str, list]:
    """The jobs of ``jobs`` that a ``tf.distribute`` strategy accepts (:data:`STRATEGY_JOBS`),
    in their order; any other job, such as the post's client job ``host``, is left out."""
    return {job: list(addresses) for job, addresses in jobs.items() if job in STRATEGY_JOBS}


def tf_config(jobs: Mapping[str, list[str]], task: Task) -> str:
    """The ``TF_CONFIG`` JSON of ``task`` for a ``tf.distribute`` strategy:
    ``{"cluster": {...}, "task": {"type", "index"}}``.

    The cluster holds only the jobs of :data:`STRATEGY_JOBS`, because the strategies that read
    ``TF_CONFIG`` (``MultiWorkerMirroredStrategy``, ``ParameterServerStrategy``) validate the
    cluster spec and refuse any other job: ``ValueError: Disallowed task type found in
    cluster spec. Allowed types are ('chief', 'worker', 'evaluator', 'ps', None) ...``
    (``multi_worker_util._validate_cluster_spec``). A client job such as the post's ``host``
    belongs only in the ``tf.train.ClusterSpec`` of plain ``tf.distribute.Server`` processes
    (:class:`~dtf.cluster.LocalCluster`, ``python -m dtf.cluster.server``), which keep the whole
    spec. A ``task`` of such a job has no strategy ``TF_CONFIG``: :class:`ClusterConfigError`.
    """
    if task.job not in STRATEGY_JOBS:
        raise ClusterConfigError(
            f"{task} has no TF_CONFIG: a tf.distribute strategy accepts only the jobs "
            f"{', '.join(STRATEGY_JOBS)} (TensorFlow: 'Disallowed task type found in cluster "
            f"spec'). A client job such as {task.job!r} plays its task with a plain server "
            "or tf.config.experimental_connect_to_cluster(cluster_spec, "
            f"job_name={task.job!r}); ask for the TF_CONFIG of a strategy task (e.g. "
            "'worker/0')."
        )
    return json.dumps(
        {
            "cluster": strategy_jobs(jobs),
            "task": {"type": task.job, "index": task.index},
        }
    )


# --------------------------------------------------------------------------- this machine


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (no lookup, no probe)."""
    name = host.strip().strip("[]").lower()
    if name in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost``, this machine's host name, a
    loopback address (:func:`is_loopback`), or an IP address of one of its interfaces
    (tested by binding to it, so no name lookup can hang)."""
    name = host.strip().strip("[]").lower()
    if is_loopback(name) or name == socket.gethostname().lower():
        return True
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return False
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((str(ip), 0))
    except OSError:
        return False
    return True


def port_in_use(port: int) -> bool:
    """Whether a TensorFlow server could not bind ``port`` now.

    A TensorFlow server listens on every interface (``[::]`` or ``0.0.0.0``) with
    ``SO_REUSEADDR``, so a port is in use when anything listens on it at any address;
    connections in ``TIME_WAIT`` from an earlier server do not count.
    """
    port = whole_number("port", port, minimum=1, maximum=65535)
    tried = False
    for family, any_address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with probe:
            if os.name == "posix":  # on Windows SO_REUSEADDR would allow stealing the port
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((any_address, port))
                tried = True
            except OSError as exc:
                if exc.errno in (errno.EADDRINUSE, getattr(errno, "WSAEADDRINUSE", -1)) or (
                    os.name == "nt" and exc.errno == errno.EACCES
                ):
                    return True
                # EADDRNOTAVAIL / EAFNOSUPPORT: no IPv6 here; the other family decides.
    return not tried


def free_ports(count: int) -> list[int]:
    """``count`` different ports that are free on every interface right now.

    The operating system picks them (binding to port 0), so two clusters started at the same
    time almost never get the same port; the short window between picking and the server
    binding the port is closed by :class:`~dtf.cluster.LocalCluster`, which picks new ports
    and starts again when a server finds its port taken.
    """
    count = whole_number("count", count, minimum=0)
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind(("0.0.0.0", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
