"""Read the trace that ``tf.profiler.experimental`` writes: the plumbing around notebook 12b's code.

``tf.profiler.experimental.start(logdir)`` … ``stop()`` writes one run to
``logdir/plugins/profile/<run>/<host>.xplane.pb``: an ``XSpace`` protobuf, whose message
classes TensorFlow ships (``tensorflow.tsl.profiler.protobuf.xplane_pb2``). An XSpace holds
*planes* (``/host:CPU`` for this process's CPU work), a plane holds *lines* (one per thread:
``python``, ``tf_Compute/<id>``, ``collective_ops/<id>``, ``tf_data_…``) and a line holds *events*:
a name (through the plane's ``event_metadata``), a start and a duration in picoseconds, and
*stats* (through ``stat_metadata``).

Reading the ops is the lesson of notebook 12b, so it stands in 12b's cells, which
``python -m tools.export`` writes into :mod:`dtf.lessons.trace_reading`: ``kind`` (compute,
communication or input), ``op_table`` (one row per op, an asynchronous op's
``ExecutorState::ProcessAsync::Start`` and ``…::Done`` events joined by their flow id, so that
its duration includes its wait), ``union`` and ``length`` (interval arithmetic) and
``breakdown`` (each step's compute, communication, input and idle, each moment counted once).
Parts 12c and 12d, lab 05 and the tests import them from there. That module imports this one,
so this one never imports it (the layers contract in ``pyproject.toml`` says so); it holds
the plumbing around the lesson:

- :func:`load` reads the newest run under a log folder, :func:`host_plane` finds a plane,
  :func:`events_of` gives every event of a plane as plain values;
- :func:`steps` lists the step markers, ``tf.profiler.experimental.Trace(name, step_num=i)``;
- :func:`in_step` and :func:`started_in` select the ops of one step;
- :func:`shares` turns a breakdown into shares of the steps' time;
- :func:`plot_step` draws one step's timeline, one row per thread;
- :func:`trace_viewer_events` converts a trace with TensorBoard's profile plugin (``xprof``),
  as its trace viewer does, to check that the plugin reads what this module reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

__all__ = [
    "COLORS",
    "HOST_PLANE",
    "STEP_COLUMNS",
    "TraceError",
    "events_of",
    "host_plane",
    "in_step",
    "load",
    "plot_step",
    "shares",
    "started_in",
    "steps",
    "trace_files",
    "trace_viewer_events",
]

HOST_PLANE = "/host:CPU"
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


def host_plane(space, name: str = HOST_PLANE):
    """The plane ``name`` of ``space``, with events in it.

    Raises:
        TraceError: no such plane, or nothing recorded in it.
    """
    for plane in space.planes:
        if plane.name == name:
            if not any(line.events for line in plane.lines):
                raise TraceError(f"the trace's plane {name!r} holds no events: was anything run?")
            return plane
    names = ", ".join(p.name for p in space.planes) or "none"
    raise TraceError(f"the trace has no plane {name!r} (its planes: {names})")


def events_of(plane) -> Iterator[tuple[str, str, dict, float, float]]:
    """``(thread, event name, stats, start, end)`` of every event of ``plane``: times in
    microseconds from the start of its first line, stats by name (a reference stat gives the
    name it refers to). A line stores its start in nanoseconds, an event its offset in
    picoseconds: lines are subtracted in whole numbers first, so no precision is lost."""
    base = min((line.timestamp_ns for line in plane.lines if line.events), default=0)
    stat_name = {i: meta.name for i, meta in plane.stat_metadata.items()}
    for line in plane.lines:
        for event in line.events:
            stats = {}
            for stat in event.stats:
                field = stat.WhichOneof("value")  # int64_value, str_value, ref_value, ...
                value = getattr(stat, field) if field else None
                stats[stat_name[stat.metadata_id]] = (
                    stat_name[value] if field == "ref_value" else value
                )
            start = ((line.timestamp_ns - base) * 1000 + event.offset_ps) / 1e6
            name = plane.event_metadata[event.metadata_id].name
            yield (
                line.name or line.display_name,
                name,
                stats,
                start,
                start + event.duration_ps / 1e6,
            )


def steps(space, name: str = "train", plane: str = HOST_PLANE) -> pd.DataFrame:
    """The step markers ``tf.profiler.experimental.Trace(name, step_num=i)``, one row each
    (:data:`STEP_COLUMNS`), on the same clock as the lesson's ``op_table`` of the same plane.

    Raises:
        TraceError: no marker called ``name`` with a ``step_num``.
    """
    rows = [
        (int(stats["step_num"]), start, end)
        for _thread, event, stats, start, end in events_of(host_plane(space, plane))
        if event == name and "step_num" in stats
    ]
    if not rows:
        raise TraceError(
            f"no step called {name!r} in the trace: wrap each step in "
            f"tf.profiler.experimental.Trace({name!r}, step_num=i, _r=1)"
        )
    table = pd.DataFrame(rows, columns=["step", "start_us", "end_us"])
    table["duration_us"] = table["end_us"] - table["start_us"]
    return table[STEP_COLUMNS].sort_values("step").reset_index(drop=True)


def in_step(table: pd.DataFrame, step: pd.Series) -> pd.DataFrame:
    """The ops of ``table`` that ran during ``step`` (a row of :func:`steps`), cut to it."""
    inside = table[(table["end_us"] > step["start_us"]) & (table["start_us"] < step["end_us"])]
    inside = inside.assign(
        start_us=inside["start_us"].clip(lower=step["start_us"]),
        end_us=inside["end_us"].clip(upper=step["end_us"]),
    )
    return inside.assign(duration_us=inside["end_us"] - inside["start_us"])


def started_in(table: pd.DataFrame, step: pd.Series) -> pd.DataFrame:
    """The ops of ``table`` that began during ``step``: to count ops, each in one step only
    (an asynchronous op can end after its step has returned its result)."""
    return table[(table["start_us"] >= step["start_us"]) & (table["start_us"] < step["end_us"])]


def shares(table: pd.DataFrame) -> pd.Series:
    """The share of the steps' total time in each kind and idle: ``table`` is the lesson's
    ``breakdown`` (one row per step, a column per kind, then ``idle`` and ``step_ms``)."""
    total = table["step_ms"].sum()
    if total <= 0:
        raise TraceError("the steps last no time")
    return table.drop(columns="step_ms").sum() / total


#: The colour of each kind in :func:`plot_step`, in the order of the lesson's ``KINDS``.
COLORS = {"compute": "tab:blue", "communication": "tab:orange", "input": "tab:red"}


def plot_step(ax, table: pd.DataFrame, step: pd.Series, title: str = "") -> None:
    """Draw the ops of one step on ``ax`` (``table``: the lesson's ``op_table``): a row per
    thread (labelled by its pool's name and a number), a bar per op, coloured by kind, time
    in milliseconds from the step's start. Compute is drawn last, over the waits of
    asynchronous ops started on the same thread."""
    from matplotlib.patches import Patch

    inside = in_step(table, step)
    threads = sorted(set(inside["thread"]))
    labels: list[str] = []
    seen: dict[str, int] = {}
    for thread in threads:  # "tf_Compute/8347..." -> "tf_Compute 1": the thread ids say nothing
        prefix = thread.split("/")[0]
        seen[prefix] = seen.get(prefix, 0) + 1
        labels.append(prefix if "/" not in thread else f"{prefix} {seen[prefix]}")
    for row, thread in enumerate(threads):
        mine = inside[inside["thread"] == thread]
        for k in reversed(COLORS):  # compute last, on top: a wait is drawn under any work
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
