"""Read the trace that ``tf.profiler.experimental`` writes: a table of ops, steps, a breakdown.

``tf.profiler.experimental.start(logdir)`` … ``stop()`` writes one run to
``logdir/plugins/profile/<run>/<host>.xplane.pb``: an ``XSpace`` protobuf, whose message
classes TensorFlow ships (``tensorflow.tsl.profiler.protobuf.xplane_pb2``). An XSpace holds
*planes* (``/host:CPU`` for this process's CPU work), a plane holds *lines* (one per thread:
``python``, ``tf_Compute/<id>``, ``collective_ops/<id>``, ``tf_data_…``) and a line holds *events*:
a name (through the plane's ``event_metadata``), a start and a duration in picoseconds, and
*stats* (through ``stat_metadata``). Notebook 12b shows the file itself; this module turns it
into tables (used by notebook 12b and lab 05's checker):

- :func:`load` reads the newest run under a log folder;
- :func:`ops` lists every TensorFlow op that ran, one row each: its thread, name, type, start,
  end and :func:`kind` (``compute``, ``communication`` or ``input``). Synchronous kernels are
  one event (``"name:Type"``); asynchronous ones (``_Recv``, collectives, ``IteratorGetNext``)
  are two, ``ExecutorState::ProcessAsync::Start`` and ``…::Done``, joined here, so their
  duration includes the wait for the data;
- :func:`steps` lists the step markers, ``tf.profiler.experimental.Trace(name, step_num=i)``;
- :func:`breakdown` splits each step's time into compute, communication, input and idle
  (no op running: Python, dispatch, waiting), each moment counted once;
- :func:`plot_step` draws one step's timeline, one row per thread;
- :func:`trace_viewer_events` converts a trace with TensorBoard's profile plugin (``xprof``),
  as its trace viewer does, to check that the plugin reads what this module reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd

HOST_PLANE = "/host:CPU"
#: Op types that move data between devices or processes.
COMMUNICATION_OPS = frozenset(
    {"_Send", "_Recv", "_HostSend", "_HostRecv", "Send", "Recv", "NcclAllReduce"}
)
#: Op types that hand the step its next batch (the step waits in them for the input pipeline).
INPUT_OPS = frozenset(
    {
        "IteratorGetNext",
        "IteratorGetNextSync",
        "IteratorGetNextAsOptional",
        "MultiDeviceIteratorGetNextFromShard",
    }
)
#: The kinds of time :func:`breakdown` reports, in the order a moment is attributed: when ops
#: of several kinds run at once, the moment counts for the first (compute hides the rest).
KINDS = ("compute", "communication", "input")
_ASYNC_START = "ExecutorState::ProcessAsync::Start"
_ASYNC_DONE = "ExecutorState::ProcessAsync::Done"
_EAGER = "EagerLocalExecute: "
OP_COLUMNS = ["thread", "name", "op", "kind", "start_us", "end_us", "duration_us"]
STEP_COLUMNS = ["step", "start_us", "end_us", "duration_us"]


class TraceError(ValueError):
    """No trace where one was expected, or a trace without what was asked for."""


def xplane_pb2():
    """TensorFlow's ``xplane_pb2`` module (the ``XSpace`` message classes)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2 as module

    return module


def trace_files(logdir: str | os.PathLike) -> list[Path]:
    """The ``.xplane.pb`` files under ``logdir``, oldest run first (run folders sort by time)."""
    root = Path(logdir)
    return sorted(root.glob("plugins/profile/*/*.xplane.pb"), key=lambda p: (p.parent.name, p))


def load(path: str | os.PathLike):
    """The ``XSpace`` of ``path``: an ``.xplane.pb`` file, or a log folder (its newest run).

    Raises:
        TraceError: no trace file there.
    """
    path = Path(path)
    if path.is_dir():
        files = trace_files(path)
        if not files:
            raise TraceError(
                f"no trace under {path}: expected plugins/profile/<run>/*.xplane.pb, which "
                "tf.profiler.experimental.stop() writes"
            )
        path = files[-1]
    elif not path.is_file():
        raise TraceError(f"no trace file {path}")
    space = xplane_pb2().XSpace()
    space.ParseFromString(path.read_bytes())
    return space


def kind(op_type: str, thread: str = "") -> str:
    """``"communication"``, ``"input"`` or ``"compute"`` for an op of type ``op_type`` that ran
    on ``thread``: every op on one of tf.data's threads works for the input pipeline."""
    if op_type in INPUT_OPS or thread.startswith("tf_data"):
        return "input"
    if op_type in COMMUNICATION_OPS or op_type.startswith(("Collective", "Nccl")):
        return "communication"
    return "compute"


def _plane(space, name: str):
    for plane in space.planes:
        if plane.name == name:
            return plane
    names = ", ".join(p.name for p in space.planes) or "none"
    raise TraceError(f"the trace has no plane {name!r} (its planes: {names})")


def _stats(plane, event) -> dict:
    """An event's stats by name; a reference value becomes the name it refers to."""
    out = {}
    for stat in event.stats:
        field = stat.WhichOneof("value")
        value = getattr(stat, field) if field else None
        if field == "ref_value":
            value = plane.stat_metadata[value].name
        out[plane.stat_metadata[stat.metadata_id].name] = value
    return out


def _events(plane) -> Iterable[tuple[str, str, dict, int, int]]:
    """``(thread, event name, stats, start_ns, end_ns)`` for every event of ``plane``."""
    for line in plane.lines:
        thread = line.name or line.display_name
        for event in line.events:
            start = line.timestamp_ns + event.offset_ps / 1000
            meta = plane.event_metadata[event.metadata_id]
            yield thread, meta.name, event, start, start + event.duration_ps / 1000


def _origin(plane) -> float:
    starts = [line.timestamp_ns + e.offset_ps / 1000 for line in plane.lines for e in line.events]
    if not starts:
        raise TraceError("the trace's host plane holds no events: was anything run?")
    return min(starts)


def ops(space, plane: str = HOST_PLANE) -> pd.DataFrame:
    """Every op that ran, one row each (:data:`OP_COLUMNS`), in order of start; times in
    microseconds from the first event of the trace."""
    p = _plane(space, plane)
    origin = _origin(p)
    rows, pending = [], {}
    for thread, name, event, start, end in _events(p):
        if name == _ASYNC_START:
            stats = _stats(p, event)
            op = (thread, stats.get("name", "?"), stats.get("kernel_type"), start)
            pending[stats.get("_p")] = op
        elif name.startswith(_EAGER):  # an op run eagerly, from Python
            op = name[len(_EAGER) :].strip()
            if not op.startswith("__inference"):  # a tf.function call: its ops are listed
                rows.append((thread, op, op, start, end))
        elif ":" in name and "::" not in name:  # a kernel: "name:Type"
            op_name, _, op_type = name.rpartition(":")
            rows.append((thread, op_name, op_type, start, end))
    for _thread, name, event, _start, end in _events(p):
        if name == _ASYNC_DONE:
            begun = pending.pop(_stats(p, event).get("_c"), None)
            if begun is not None:  # the async op lasted from its start to its done callback
                t, op_name, op_type, began = begun
                rows.append((t, op_name, op_type or op_name, began, end))
    table = pd.DataFrame(rows, columns=["thread", "name", "op", "start_ns", "end_ns"])
    table["kind"] = [kind(o, t) for o, t in zip(table["op"], table["thread"], strict=True)]
    table["start_us"] = (table["start_ns"] - origin) / 1e3
    table["end_us"] = (table["end_ns"] - origin) / 1e3
    table["duration_us"] = table["end_us"] - table["start_us"]
    return table[OP_COLUMNS].sort_values("start_us", kind="stable").reset_index(drop=True)


def steps(space, name: str = "train", plane: str = HOST_PLANE) -> pd.DataFrame:
    """The step markers ``tf.profiler.experimental.Trace(name, step_num=i)``, one row each
    (:data:`STEP_COLUMNS`), on the same clock as :func:`ops`.

    Raises:
        TraceError: no marker called ``name`` with a ``step_num``.
    """
    p = _plane(space, plane)
    origin = _origin(p)
    rows = []
    for _thread, event_name, event, start, end in _events(p):
        if event_name == name:
            stats = _stats(p, event)
            if "step_num" in stats:
                rows.append((int(stats["step_num"]), (start - origin) / 1e3, (end - origin) / 1e3))
    if not rows:
        raise TraceError(
            f"no step called {name!r} in the trace: wrap each step in "
            f"tf.profiler.experimental.Trace({name!r}, step_num=i, _r=1)"
        )
    table = pd.DataFrame(rows, columns=["step", "start_us", "end_us"])
    table["duration_us"] = table["end_us"] - table["start_us"]
    return table[STEP_COLUMNS].sort_values("step").reset_index(drop=True)


def _union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in intervals)


def _minus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> list:
    """The parts of the disjoint sorted intervals ``a`` outside the disjoint sorted ``b``."""
    out = []
    for start, end in a:
        cursor = start
        for s, e in b:
            if e <= cursor or s >= end:
                continue
            if s > cursor:
                out.append((cursor, s))
            cursor = max(cursor, e)
        if cursor < end:
            out.append((cursor, end))
    return out


def in_step(table: pd.DataFrame, step: pd.Series) -> pd.DataFrame:
    """The ops of ``table`` that overlap ``step`` (a row of :func:`steps`), clipped to it."""
    inside = table[(table["end_us"] > step["start_us"]) & (table["start_us"] < step["end_us"])]
    inside = inside.copy()
    inside["start_us"] = inside["start_us"].clip(lower=step["start_us"])
    inside["end_us"] = inside["end_us"].clip(upper=step["end_us"])
    inside["duration_us"] = inside["end_us"] - inside["start_us"]
    return inside


def breakdown(table: pd.DataFrame, step_table: pd.DataFrame) -> pd.DataFrame:
    """Each step's time in milliseconds: ``compute``, ``communication``, ``input``, ``idle``
    and ``step``, one row per step. A moment counts once, for the first of :data:`KINDS`
    with an op running then; ``idle`` is the rest of the step, when no op ran."""
    rows = []
    for _, step in step_table.iterrows():
        inside = in_step(table, step)
        covered: list[tuple[float, float]] = []
        row = {"step": int(step["step"])}
        for k in KINDS:
            mine = inside[inside["kind"] == k]
            spans = _union(zip(mine["start_us"], mine["end_us"], strict=True))
            row[k] = _length(_minus(spans, covered)) / 1e3
            covered = _union(covered + spans)
        row["step"] = int(step["step"])
        row["idle"] = (step["duration_us"] - _length(covered)) / 1e3
        row["step_ms"] = step["duration_us"] / 1e3
        rows.append(row)
    return pd.DataFrame(rows, columns=["step", *KINDS, "idle", "step_ms"]).set_index("step")


def shares(table: pd.DataFrame) -> pd.Series:
    """The share of the steps' total time in each kind and idle (from :func:`breakdown`)."""
    total = table["step_ms"].sum()
    if total <= 0:
        raise TraceError("the steps last no time")
    return table[[*KINDS, "idle"]].sum() / total


#: The colour of each kind in :func:`plot_step`.
COLORS = {"compute": "tab:blue", "communication": "tab:orange", "input": "tab:red"}


def plot_step(ax, table: pd.DataFrame, step: pd.Series, title: str = "") -> None:
    """Draw the ops of one step on ``ax``: a row per thread (labelled by its pool's name and a
    number), a bar per op, coloured by kind, time in milliseconds from the step's start.
    Compute is drawn last, over the waits of asynchronous ops started on the same thread."""
    from matplotlib.patches import Patch

    inside = in_step(table, step)
    threads = sorted(set(inside["thread"]))
    labels, seen = [], {}
    for thread in threads:  # "tf_Compute/8347..." -> "tf_Compute 1": the thread ids say nothing
        prefix = thread.split("/")[0]
        seen[prefix] = seen.get(prefix, 0) + 1
        labels.append(prefix if "/" not in thread else f"{prefix} {seen[prefix]}")
    for row, thread in enumerate(threads):
        mine = inside[inside["thread"] == thread]
        for k in reversed(KINDS):  # compute last, on top: a wait is drawn under any work
            colour = COLORS[k]
            bars = mine[mine["kind"] == k]
            starts = (bars["start_us"] - step["start_us"]) / 1e3
            spans = list(zip(starts, bars["duration_us"] / 1e3, strict=True))
            ax.broken_barh(spans, (row - 0.4, 0.8), color=colour)
    ax.set_yticks(range(len(threads)), labels, fontsize=7)
    ax.set_xlim(0, step["duration_us"] / 1e3)
    ax.set_xlabel("ms from the step's start")
    ax.set_title(title, fontsize=9)
    handles = [Patch(color=c, label=k) for k, c in COLORS.items()]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))


def trace_viewer_events(path: str | os.PathLike) -> list[dict]:
    """The events of the ``.xplane.pb`` file ``path`` as the profile plugin's trace viewer
    gets them (``xprof.convert.raw_to_tool_data``, tool ``trace_viewer``): one dict per event,
    an op's ``"name:Type"`` in ``args["long_name"]``. The plugin's C++ library logs to file
    descriptor 2, which TensorFlow's log settings do not reach: silenced during the call.

    Raises:
        ImportError: ``xprof`` is not installed (it has no Linux aarch64 wheel).
    """
    from xprof.convert import raw_to_tool_data

    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            converted, _ = raw_to_tool_data.xspace_to_tool_data([str(path)], "trace_viewer", {})
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return json.loads(converted)["traceEvents"]
