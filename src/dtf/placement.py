"""Capture TensorFlow's device-placement log as a table.

With ``tf.debugging.set_log_device_placement(True)`` (set before TensorFlow initialises),
TensorFlow's placer prints one line per op of every graph it places, eager single-op
graphs and ``tf.function`` graphs alike::

    MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:1

Those lines are written by C++ ``printf`` to the process's file descriptor 1, not to
Python's ``sys.stdout``. Where they end up therefore depends on who runs the kernel:
JupyterLab and papermill forward descriptor 1 into the cell output (late: C's stdout is
block-buffered when it is a pipe), a kernel started by nbval under pytest does not, and a
plain script prints them to the terminal. :func:`capture` makes the result the same
everywhere: it routes descriptor 1 through a pipe read by a thread, keeps the placement
lines that belong to the ``with`` block, passes every other byte through unchanged, and
drops placement lines printed outside any block (so they do not clutter later cells).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field

from dtf._util import error_line

#: ``name: (OpType): /job:.../device:TYPE:N``: TensorFlow's placer, one line per graph node.
LINE = re.compile(r"^(?P<op>[^\s:][^:]*): \((?P<op_type>[A-Za-z0-9_]+)\): (?P<device>/job:\S+)$")
#: ``Executing op OpType in device /job:...``: the eager runtime, one line per eager op run;
#: an op sent to another task of a cluster says ``on task /job:...`` instead.
EAGER = re.compile(
    r"^Executing op (?P<op_type>[A-Za-z0-9_]+) (?:in device|on task) (?P<device>/job:\S+)$"
)
_DEVICE = re.compile(
    r"^/job:(?P<job>[^/]+)(?:/replica:\d+)?/task:(?P<task>\d+)/device:(?P<dev>[A-Za-z_]+:\d+)$"
)
_LOCAL = re.compile(r"^/device:(?P<dev>[A-Za-z_]+:\d+)$")
COLUMNS = ["op", "op_type", "device", "source", "device_full"]
SYNC_TIMEOUT_S = 30.0
#: How long the reader keeps retrying a write that would block (a non-blocking descriptor 1
#: whose reader is slow) before it gives up on descriptor 1 (see :class:`_Interceptor`).
WRITE_TIMEOUT_S = 30.0
_SYNC = "\x00dtf-sync:"


class PlacementLoggingError(RuntimeError):
    """TensorFlow is not logging placement, so there is nothing to capture."""


def short_device(full: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:1`` -> ``CPU:1``; other jobs keep
    their job and task: ``/job:worker/replica:0/task:1/device:CPU:0`` ->
    ``/job:worker/task:1/CPU:0``. A local name as ``devices.setup`` returns it,
    ``/device:CPU:1``, also gives ``CPU:1``, so it compares with the table's column."""
    full = str(full)
    if m := _LOCAL.match(full):
        return m["dev"]
    m = _DEVICE.match(full)
    if not m:
        return full
    if m["job"] == "localhost":
        return m["dev"]
    return f"/job:{m['job']}/task:{m['task']}/{m['dev']}"


def variable_device(variable) -> str:
    """Where a variable lives, short form (``CPU:1``). A ``tf.Variable`` has a ``.device``
    (its ``.value`` is a method); a Keras 3 variable has none, but wraps a ``tf.Variable``,
    its ``.value``, which has one."""
    device = getattr(variable, "device", None)
    if not isinstance(device, str):
        device = getattr(getattr(variable, "value", None), "device", "")
    return short_device(device if isinstance(device, str) else "")


def is_placement_line(line: str) -> bool:
    line = line.strip()
    return bool(LINE.match(line) or EAGER.match(line))


def parse(text: str, include_internal: bool = False):
    """Placement lines in ``text`` as a DataFrame, one row per line, in log order.

    Columns: ``op`` (node name), ``op_type``, ``device`` (short form), ``source`` and
    ``device_full``. ``source`` is ``"graph"`` for placer lines (every node of a
    ``tf.function`` graph when it is first placed; an eager op also runs as a tiny graph,
    placed the first time that op runs with those inputs on that device) and ``"eager"``
    for ``Executing op`` lines (every eager op run; TensorFlow sends these to Python's
    ``sys.stdout`` inside IPython kernels only, and to its C++ log at
    ``TF_CPP_MIN_LOG_LEVEL=0`` elsewhere). Other lines are ignored.

    Internal ops (types that start with ``_``: function arguments, return values, eager
    constants) are dropped unless ``include_internal``.
    """
    import pandas as pd

    rows = []
    for line in text.splitlines():
        line = line.strip()
        if m := LINE.match(line):
            row = (m["op"], m["op_type"], short_device(m["device"]), "graph", m["device"])
        elif m := EAGER.match(line):
            row = (m["op_type"], m["op_type"], short_device(m["device"]), "eager", m["device"])
        else:
            continue
        if include_internal or not row[1].startswith("_"):
            rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


class _PythonStreamFilter:
    """Stands in for ``sys.stdout``: placement lines go to the interceptor, everything
    else to the real stream, a line at a time (an unterminated line when flushed)."""

    def __init__(self, stream, deliver) -> None:
        self._stream = stream
        self._deliver = deliver
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *complete, self._pending = self._pending.split("\n")
        for line in complete:
            if is_placement_line(line):
                self._deliver(line + "\n")
            else:
                self._stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        if self._pending:  # an unterminated line (a prompt): let it through now
            self._stream.write(self._pending)
            self._pending = ""
        self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


@dataclass
class PlacementLog:
    """What one :func:`capture` block saw: the raw ``lines`` and, parsed, ``table``."""

    include_internal: bool = False
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.lines)

    @property
    def table(self):
        """One row per logged op (see :func:`parse`): placer rows first, then eager rows,
        each in log order. (The two kinds reach Python by different routes, so their
        interleaving is not reproducible; this order is.) Complete once the block ends."""
        table = parse(self.text, include_internal=self.include_internal)
        order = table.source.map({"graph": 0, "eager": 1})
        return table.iloc[order.argsort(kind="stable")].reset_index(drop=True)

    def counts(self, source: str | None = None):
        """Number of ops per device (a pandas Series), for a bar chart. ``source``:
        ``"graph"`` or ``"eager"`` to count one kind of line only (an eager op's first
        run appears as both)."""
        table = self.table
        if source is not None:
            if source not in ("graph", "eager"):
                raise ValueError(f"source must be 'graph', 'eager' or None, got {source!r}")
            table = table[table.source == source]
        return table.groupby("device").size().rename("ops")

    def device_of(self, op_type: str) -> list[str]:
        """Devices on which ops of this type ran, in table order."""
        table = self.table
        return list(table.loc[table.op_type == op_type, "device"])


def _libc_fflush() -> None:
    """Flush C stdio buffers: placement lines sit there until flushed."""
    for name in (None, "ucrtbase", "msvcrt"):
        try:
            lib = ctypes.CDLL(name)
            lib.fflush(None)
            return
        except (OSError, AttributeError, TypeError):
            continue


def _write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``: a descriptor may take part of it (a signal, a non-blocking
    pipe) or refuse for a moment (``BlockingIOError``); retry for up to
    :data:`WRITE_TIMEOUT_S`. Other errors (a closed pipe, a full disk) propagate."""
    view = memoryview(data)
    deadline = None
    while view:
        try:
            written = os.write(fd, view)
        except BlockingIOError:
            written = 0
        if written:
            view = view[written:]
            deadline = None
            continue
        now = time.monotonic()
        if deadline is None:
            deadline = now + WRITE_TIMEOUT_S
        elif now > deadline:
            raise TimeoutError(
                f"descriptor {fd} accepted nothing for {WRITE_TIMEOUT_S:.0f} s "
                "(whatever reads it is stuck)"
            )
        time.sleep(0.005)


class _Interceptor:
    """Descriptor 1 routed through a pipe; a thread sorts placement lines from the rest.

    If the reader cannot forward output (the consumer of a ``python script.py | head -1``
    pipeline went away, a full disk, ...), it gives descriptor 1 and ``sys.stdout`` back at
    once, so the program's own writes meet the real error instead of blocking on a pipe that
    nobody reads; from then on :meth:`sync` (and every :func:`capture`) raises
    :class:`PlacementLoggingError` immediately, and the exit hook does not wait.
    """

    def __init__(self) -> None:
        self._saved = os.dup(1)
        read_fd, write_fd = os.pipe()
        self._read = read_fd
        self._lock = threading.Lock()  # guards the sinks
        self._sinks: list[PlacementLog] = []
        self._sync_lock = threading.Lock()  # guards the waiting syncs and the error
        self._sync: dict[str, threading.Event] = {}
        self._error: BaseException | None = None  # why the reader stopped forwarding
        try:
            sys.stdout.flush()
        except (AttributeError, ValueError):
            pass
        _libc_fflush()
        os.dup2(write_fd, 1)
        # sync() writes its token through a descriptor of its own into the same pipe (so it
        # is ordered after everything written to descriptor 1 before it): once the reader has
        # given descriptor 1 back, a token must never reach the real output.
        self._token_fd = write_fd
        self._token_lock = threading.Lock()
        # Inside IPython kernels TensorFlow writes its eager "Executing op" lines to
        # Python's sys.stdout: filter that stream too, for as long as the process lives.
        self._stream = sys.stdout
        self._filter = _PythonStreamFilter(self._stream, self.deliver)
        sys.stdout = self._filter
        self._thread = threading.Thread(target=self._pump, name="dtf-placement", daemon=True)
        self._thread.start()
        # The reader is a daemon thread: at exit, forward what is still in the pipe and
        # give descriptor 1 back, or a script's last lines would be lost.
        atexit.register(self.close)

    @property
    def error(self) -> BaseException | None:
        """Why the reader stopped forwarding output, or None while it works."""
        return self._error

    def _dead(self) -> PlacementLoggingError:
        cause = error_line(self._error) if self._error else "no error recorded"
        return PlacementLoggingError(
            f"the placement log reader stopped: it could not write this program's output "
            f"({cause}). Standard output was given back as it was, and "
            "placement capture is off in this process. Restart the kernel (or the script) "
            "with its output going somewhere that accepts it."
        )

    def _restore_stdout(self) -> None:
        if sys.stdout is self._filter:
            sys.stdout = self._stream

    def close(self) -> None:
        """Forward everything pending, then restore ``sys.stdout`` and descriptor 1."""
        if self._error is not None:  # the reader gave everything back already: no waiting
            self._restore_stdout()
            return
        try:  # at interpreter exit a stream may already be closed
            if isinstance(sys.stdout, _PythonStreamFilter):
                sys.stdout.flush()
            self._stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
        self._restore_stdout()
        try:
            self.sync()
        except PlacementLoggingError:
            pass
        with self._token_lock:
            if self._error is None:
                os.dup2(self._saved, 1)
            if self._token_fd >= 0:  # the reader sees the end of its pipe and returns
                os.close(self._token_fd)
                self._token_fd = -1

    def echo(self, text: str) -> None:
        """Print placement lines to the user, past both filters."""
        try:
            fd = self._stream.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd == 1:  # a plain script: the stream writes into our own pipe
            self._stream.flush()
            os.write(self._saved, text.encode())
        else:  # IPython: the kernel's stream object
            self._stream.write(text)
            self._stream.flush()

    def _pump(self) -> None:
        try:
            self._sort()
        except BaseException as err:  # noqa: BLE001 - whatever stopped it, give fd 1 back
            self._stop(err)

    def _sort(self) -> None:
        pending = b""
        while True:
            chunk = os.read(self._read, 65536)
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            passthrough, synced = [], []
            for raw in complete:
                line = raw.decode("utf-8", "replace")
                if _SYNC in line:
                    before, token = line.split(_SYNC, 1)
                    if before:  # an unterminated line written just before the sync
                        passthrough.append(before.encode())
                    synced.append(token)
                elif is_placement_line(line):
                    self.deliver(line + "\n")
                else:
                    passthrough.append(raw + b"\n")
            if passthrough:  # before waking a waiter: output stays in its own cell
                _write_all(self._saved, b"".join(passthrough))
            with self._sync_lock:
                events = [self._sync.get(token) for token in synced]
            for event in events:
                if event:
                    event.set()

    def _stop(self, err: BaseException) -> None:
        """The reader cannot go on: give descriptor 1 and ``sys.stdout`` back, wake every
        waiting :meth:`sync` (it raises), then drain the pipe so that a writer blocked on it
        (the program's own print) returns, and forward what it can. Both are given back
        before the error is set: a :meth:`sync` that sees the error must find them back."""
        os.dup2(self._saved, 1)  # new writes go to the real destination and meet its error
        self._restore_stdout()
        with self._sync_lock:
            self._error = err
            events = list(self._sync.values())
        for event in events:
            event.set()
        while True:
            if self._token_fd >= 0 and self._token_lock.acquire(blocking=False):
                try:  # no sync() can write a token any more (it checks the error first)
                    if self._token_fd >= 0:
                        os.close(self._token_fd)
                        self._token_fd = -1
                finally:
                    self._token_lock.release()
            try:
                chunk = os.read(self._read, 65536)
            except OSError:
                break
            if not chunk:  # every write end is closed
                break
            try:  # best effort: the destination failed once, it may fail again
                os.write(self._saved, chunk.replace(b"\x00dtf-sync:", b""))
            except OSError:
                pass
        os.close(self._read)

    def deliver(self, line: str) -> None:
        with self._lock:
            for sink in self._sinks:
                sink.lines.append(line)

    def sync(self) -> None:
        """Wait until everything written to descriptor 1 so far has been sorted.

        Raises :class:`PlacementLoggingError` at once if the reader has stopped, and after
        :data:`SYNC_TIMEOUT_S` if it does not answer."""
        if self._error is not None:
            raise self._dead()
        _libc_fflush()
        token = uuid.uuid4().hex
        event = threading.Event()
        with self._sync_lock:
            self._sync[token] = event  # before the error check: _stop() wakes it
        try:
            with self._token_lock:
                if self._error is not None:
                    raise self._dead()
                if self._token_fd < 0:
                    raise PlacementLoggingError(
                        "placement capture was closed (the interpreter is exiting)"
                    )
                _write_all(self._token_fd, f"{_SYNC}{token}\n".encode())
            answered = event.wait(SYNC_TIMEOUT_S)
            if self._error is not None:
                raise self._dead()
            if not answered:
                raise PlacementLoggingError(
                    f"the placement log reader did not answer within {SYNC_TIMEOUT_S:.0f} s; "
                    "restart the kernel"
                )
        finally:
            with self._sync_lock:
                self._sync.pop(token, None)

    def add(self, sink: PlacementLog) -> None:
        with self._lock:
            self._sinks.append(sink)

    def remove(self, sink: PlacementLog) -> None:
        with self._lock:
            self._sinks.remove(sink)


_interceptor: _Interceptor | None = None
_checked = False


def _ensure_logging() -> _Interceptor:
    """Install the interceptor once, and check once that TensorFlow really logs."""
    global _interceptor, _checked
    import tensorflow as tf

    if not tf.debugging.get_log_device_placement():
        raise PlacementLoggingError(
            "TensorFlow is not logging device placement. Call "
            "tf.debugging.set_log_device_placement(True) (or dtf.devices.setup(..., "
            "log_placement=True)) in the Setup cell before any other TensorFlow op, "
            "then restart the kernel and run again."
        )
    if _interceptor is None:
        _interceptor = _Interceptor()
    if _interceptor.error is not None:
        raise _interceptor._dead()
    if not _checked:
        with _collect(_interceptor, include_internal=True) as probe:
            tf.identity(tf.constant(0.0))
        if not probe.lines:
            raise PlacementLoggingError(
                "set_log_device_placement(True) ran after TensorFlow had initialised, so "
                "TensorFlow ignores it. Restart the kernel and turn it on in the Setup cell "
                "before any other TensorFlow op (dtf.devices.setup(..., log_placement=True))."
            )
        _checked = True
    return _interceptor


def start() -> None:
    """Start routing placement lines now (and check that TensorFlow logs them).

    Call it in the Setup cell, after ``devices.setup(..., log_placement=True)``, so that
    no raw placement lines reach the notebook outside :func:`capture` blocks. Without it,
    the first :func:`capture` starts the routing.
    """
    _ensure_logging()


@contextmanager
def _collect(interceptor: _Interceptor, include_internal: bool):
    log = PlacementLog(include_internal=include_internal)
    interceptor.sync()  # lines printed before the block belong to nobody
    interceptor.add(log)
    try:
        yield log
    finally:
        try:
            interceptor.sync()
        finally:
            interceptor.remove(log)


@contextmanager
def capture(include_internal: bool = False, echo: bool = False):
    """Collect the placement log of the ops run inside the block.

    >>> with capture() as log:          # doctest: +SKIP
    ...     c = tf.matmul(a, b)
    >>> log.table[["op", "op_type", "device"]]  # doctest: +SKIP
           op op_type device
    0  MatMul  MatMul  CPU:0

    The first call checks that TensorFlow really logs placement and from then on keeps
    placement lines out of the notebook outside ``capture`` blocks.
    ``echo=True`` also prints the raw lines, as TensorFlow wrote them.
    """
    interceptor = _ensure_logging()
    with _collect(interceptor, include_internal) as log:
        yield log
    if echo:
        interceptor.echo(log.text)
