"""Tests for ``dtf.profiling`` and ``dtf.lessons.trace_reading`` (notebook 12b's cells): the
XSpace trace that ``tf.profiler.experimental`` writes, read into tables of ops and steps and a
per-step breakdown.

The pure parts (kinds, interval arithmetic, the breakdown's accounting, the plot) run here on
small hand-made tables. The trace itself is real: one fresh interpreter with two logical CPUs
captures two small traces (a step split over both devices, and a step fed by a slow
``py_function`` pipeline), reads them back with the module and prints one JSON line.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import types

import pandas as pd
import pytest

from dtf import profiling
from dtf.lessons import trace_reading
from tests.helpers import last_json, run_script

# --------------------------------------------------------------------------------------------
# No TensorFlow needed


@pytest.mark.parametrize(
    "op, thread, expected",
    [
        ("MatMul", "tf_Compute", "compute"),
        ("_Recv", "tf_Compute", "communication"),
        ("_Send", "tf_Compute", "communication"),
        ("CollectiveReduceV2", "collective_ops", "communication"),
        ("NcclAllReduce", "tf_Compute", "communication"),
        ("IteratorGetNext", "tf_Compute", "input"),
        ("MultiDeviceIteratorGetNextFromShard", "tf_Compute", "input"),
        ("IteratorGetNextAsOptional", "tf_Compute", "input"),
        ("CollectiveGatherV2", "collective_ops", "communication"),
        ("EagerPyFunc", "tf_data_private_threadpool", "input"),  # the pipeline's own work
        ("MatMul", "python", "compute"),
        ("RemoteCall", "tf_data_private_threadpool", "input"),  # tf.data's thread decides
    ],
)
def test_kind(op, thread, expected):
    assert trace_reading.kind(op, thread) == expected


def test_union_and_length():
    """Notebook 12b's interval arithmetic (dtf.lessons.trace_reading): overlaps merge, in order."""
    assert trace_reading.union([(5, 6), (0, 2), (1, 3)]) == [(0, 3), (5, 6)]
    assert trace_reading.union([]) == []
    assert trace_reading.union([(0, 1), (1, 2)]) == [(0, 2)]  # touching intervals merge
    assert trace_reading.length(trace_reading.union([(0, 10), (2, 3), (5, 20)])) == 20
    assert trace_reading.length([]) == 0


def test_the_reader_is_written_from_notebook_12b():
    """One source: the reading functions live in the module 12b's cells write, which imports
    dtf.profiling's plumbing; dtf.profiling, below the lessons, does not hand them out."""
    for name in ("kind", "op_table", "union", "KINDS", "OP_COLUMNS"):
        assert not hasattr(profiling, name), name
    assert trace_reading.events_of is profiling.events_of
    assert trace_reading.in_step is profiling.in_step
    assert "notebooks/12b_profiling_steps.ipynb" in open(trace_reading.__file__).read(400)


class _Stat:
    def __init__(self, metadata_id, field, value):
        self.metadata_id, self._field = metadata_id, field
        setattr(self, field, value)

    def WhichOneof(self, _group):  # noqa: N802 - the protobuf method's name
        return self._field


def _plane(lines):
    """A stand-in for an XPlane: `lines` are (name, timestamp_ns, [(event name, offset_ps,
    duration_ps, {stat: value})]); a str value of the stats "name" and "kernel_type" is stored
    as a reference to a stat name, as the profiler stores them."""
    ns = types.SimpleNamespace
    names, stat_ids = {}, {}

    def meta(table, name):
        return table.setdefault(name, len(table) + 1)

    plane_lines = []
    for line_name, timestamp, events in lines:
        xevents = []
        for name, offset, duration, stats in events:
            xstats = []
            for key, value in stats.items():
                if isinstance(value, str):
                    xstats.append(_Stat(meta(stat_ids, key), "ref_value", meta(stat_ids, value)))
                else:
                    xstats.append(_Stat(meta(stat_ids, key), "int64_value", value))
            xevents.append(
                ns(
                    metadata_id=meta(names, name),
                    offset_ps=offset,
                    duration_ps=duration,
                    stats=xstats,
                )
            )
        plane_lines.append(
            ns(name=line_name, display_name="", timestamp_ns=timestamp, events=xevents)
        )
    return ns(
        lines=plane_lines,
        event_metadata={i: ns(name=n) for n, i in names.items()},
        stat_metadata={i: ns(name=n) for n, i in stat_ids.items()},
    )


def test_op_table_joins_async_start_and_done_across_threads():
    """12b's op_table: a kernel is one event; an async op lasts from its Start (flow id _p)
    to its Done (the same id as _c), even when the Done's thread comes first in the file; a
    Start without its Done is left out; eager ops count, a tf.function's call does not; times
    are µs from the first line's start, exact for timestamps near 1.7e18 ns."""
    base = 1_700_000_000_000_000_123
    start = (
        "ExecutorState::ProcessAsync::Start",
        2_000_000,
        1_000,
        {"_p": 7, "name": "r", "kernel_type": "_Recv"},
    )
    plane = _plane(
        [
            (
                "collective_ops/1",
                base + 5_000,
                [("ExecutorState::ProcessAsync::Done", 0, 500, {"_c": 7})],
            ),
            (
                "tf_Compute/2",
                base,
                [
                    ("MatMul:MatMul", 1_000_000, 2_000_000, {}),
                    start,
                    (
                        "ExecutorState::ProcessAsync::Start",
                        3_000_000,
                        10,
                        {"_p": 9, "name": "lost"},
                    ),
                ],
            ),
            (
                "python",
                base + 1,
                [
                    ("EagerLocalExecute: Mul", 0, 1_000, {}),
                    ("EagerLocalExecute: __inference_step_12", 0, 9_000_000, {}),
                ],
            ),
        ]
    )
    table = trace_reading.op_table(plane)
    assert list(table.columns) == trace_reading.OP_COLUMNS
    rows = {r.name: r for r in table.itertuples()}
    assert set(rows) == {"MatMul", "r", "Mul"}
    assert (rows["r"].op, rows["r"].kind, rows["r"].thread) == (
        "_Recv",
        "communication",
        "tf_Compute/2",
    )
    assert rows["r"].start_us == pytest.approx(2.0) and rows["r"].end_us == pytest.approx(5.0005)
    assert rows["MatMul"].start_us == 1.0 and rows["MatMul"].duration_us == 2.0
    assert rows["Mul"].start_us == pytest.approx(0.001)
    assert table["start_us"].is_monotonic_increasing


def test_started_in_counts_each_op_in_one_step_only():
    ops = _table([("a", "x", "MatMul", 900, 1100), ("a", "y", "MatMul", 1000, 1200)])
    first, second = (STEPS.iloc[i] for i in (0, 1))
    assert list(profiling.started_in(ops, first)["name"]) == ["x"]
    assert list(profiling.started_in(ops, second)["name"]) == ["y"]
    assert len(profiling.in_step(ops, second)) == 2  # in_step keeps what overlaps, cut


def _table(rows):
    table = pd.DataFrame(rows, columns=["thread", "name", "op", "start_us", "end_us"])
    table["kind"] = [
        trace_reading.kind(o, t) for o, t in zip(table["op"], table["thread"], strict=True)
    ]
    table["duration_us"] = table["end_us"] - table["start_us"]
    return table[trace_reading.OP_COLUMNS]


STEPS = pd.DataFrame(
    [(0, 0.0, 1000.0, 1000.0), (1, 1000.0, 3000.0, 2000.0)], columns=profiling.STEP_COLUMNS
)


def test_breakdown_counts_each_moment_once_compute_first():
    """Overlapping kinds count once, compute first; idle is the rest; ops are clipped to
    their step; each row adds up to the step."""
    ops = _table(
        [
            ("a", "m", "MatMul", 100, 400),  # step 0: 300 us compute
            ("b", "r", "_Recv", 300, 600),  # 100 us hidden under the MatMul: 200 us counted
            ("c", "g", "IteratorGetNext", 900, 1500),  # split: 100 us in step 0, 500 in 1
            ("a", "m2", "MatMul", 1600, 1700),
            ("a", "m3", "MatMul", 1650, 1800),  # the same thread, overlapping: 200 us in all
        ]
    )
    table = trace_reading.breakdown(ops, STEPS)
    assert table.loc[0, "compute"] == pytest.approx(0.3)
    assert table.loc[0, "communication"] == pytest.approx(0.2)
    assert table.loc[0, "input"] == pytest.approx(0.1)
    assert table.loc[0, "idle"] == pytest.approx(0.4)
    assert table.loc[1].to_dict() == pytest.approx(
        {"compute": 0.2, "communication": 0.0, "input": 0.5, "idle": 1.3, "step_ms": 2.0}
    )
    parts = table[[*trace_reading.KINDS, "idle"]].sum(axis=1)
    assert parts.to_numpy() == pytest.approx(table["step_ms"].to_numpy())
    share = profiling.shares(table)
    assert share.sum() == pytest.approx(1.0)
    assert share["idle"] == pytest.approx(1.7 / 3.0)


def test_shares_of_empty_steps_is_an_error():
    columns = [*trace_reading.KINDS, "idle", "step_ms"]
    empty = pd.DataFrame([[0.0, 0.0, 0.0, 0.0, 0.0]], columns=columns)
    with pytest.raises(profiling.TraceError, match="no time"):
        profiling.shares(empty)


def test_plot_step_draws_a_row_per_thread():
    import matplotlib.pyplot as plt

    ops = _table([("a", "m", "MatMul", 100, 400), ("b", "r", "_Recv", 300, 600)])
    fig, ax = plt.subplots()
    profiling.plot_step(ax, ops, STEPS.iloc[0], title="step 0")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert ax.get_xlim() == (0.0, 1.0)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(profiling.COLORS)
    plt.close(fig)


def test_load_without_a_trace_is_an_error(tmp_path):
    """The error names the layout tf.profiler writes, before TensorFlow is imported."""
    with pytest.raises(profiling.TraceError, match="plugins/profile"):
        profiling.load(tmp_path)
    with pytest.raises(profiling.TraceError, match="no trace file"):
        profiling.load(tmp_path / "missing.xplane.pb")


# --------------------------------------------------------------------------------------------
# A real trace, captured in a fresh process with two logical CPUs

SCRIPT = r"""
import json, sys, tempfile, time
from dtf import quiet
quiet.quiet()
import numpy as np
import tensorflow as tf
from dtf import devices, profiling
from dtf.lessons import trace_reading

setup = devices.setup(2)
D = list(setup.names)
logdir = tempfile.mkdtemp()
out = {}
x = tf.random.stateless_normal([256, 256], seed=[1, 2])


@tf.function
def two_devices(x):
    with tf.device(D[0]):
        a = tf.matmul(x, x)
    with tf.device(D[1]):  # a is copied to the second device
        return tf.reduce_sum(tf.matmul(a, x))


def trace(folder, step):
    step()  # traced and placed before the profile
    walls = []
    tf.profiler.experimental.start(f"{logdir}/{folder}")
    for i in range(3):
        began = time.perf_counter()
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            step()
        walls.append(1e3 * (time.perf_counter() - began))
    tf.profiler.experimental.stop()
    space = profiling.load(f"{logdir}/{folder}")
    ops = trace_reading.op_table(profiling.host_plane(space))
    steps = profiling.steps(space)
    table = trace_reading.breakdown(ops, steps)
    return space, ops, steps, table, walls


space, ops, steps, table, walls = trace("devices", lambda: two_devices(x).numpy())
ops_devices = ops
out["planes"] = [p.name for p in space.planes]
out["steps"] = steps["step"].tolist()
out["walls"] = walls
out["step_ms"] = table["step_ms"].tolist()
out["rows_add_up"] = bool(
    np.allclose(table[[*trace_reading.KINDS, "idle"]].sum(axis=1), table["step_ms"])
)
out["kinds"] = sorted(set(zip(ops["op"], ops["kind"])))
out["matmuls_per_step"] = [
    int((profiling.in_step(ops, s)["op"] == "MatMul").sum()) for _, s in steps.iterrows()
]
recv = ops[ops["op"] == "_Recv"]
out["recv_positive"] = bool(len(recv) and (recv["duration_us"] > 0).all())
out["columns"] = list(ops.columns)
out["sorted"] = bool(ops["start_us"].is_monotonic_increasing)
try:
    profiling.steps(space, name="no such step")
except profiling.TraceError as error:
    out["no_step"] = str(error)
try:
    profiling.host_plane(space, "/device:GPU:0")
except profiling.TraceError as error:
    out["no_plane"] = str(error)


def slow(value):  # a slow input pipeline: 5 ms of Python per example
    began = time.perf_counter()
    while time.perf_counter() - began < 0.005:
        pass
    return value


def slow_map(v):
    v = tf.py_function(slow, [v], tf.float32)
    v.set_shape([4])
    return v


data = tf.data.Dataset.from_tensors(tf.ones([4])).repeat().map(slow_map).batch(8)
it = iter(data)


@tf.function
def fed_step(it):
    return tf.reduce_sum(tf.matmul(next(it), tf.ones([4, 4])))


_, ops, steps, table, walls = trace("input", lambda: fed_step(it).numpy())
out["input_shares"] = profiling.shares(table).to_dict()
try:
    viewer = profiling.trace_viewer_events(profiling.trace_files(f"{logdir}/devices")[-1])
    out["viewer_matmuls"] = sum(
        1 for e in viewer if e.get("args", {}).get("long_name", "").endswith(":MatMul")
    )
except ImportError:  # no xprof here (Linux aarch64)
    out["viewer_matmuls"] = None
out["our_matmuls"] = int((ops_devices["op"] == "MatMul").sum())
out["input_walls"] = walls
out["input_step_ms"] = table["step_ms"].tolist()
del it  # an iterator over a py_function left to interpreter exit can hang it (measured)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def result():
    return last_json(run_script(SCRIPT, timeout=180, forked=True))


@pytest.mark.slow
def test_a_real_trace_has_its_steps_and_ops(result):
    """The three step markers come back, on the host plane, each with its two MatMuls; the
    copy between the devices is a _Recv (joined from its async start and done events) and a
    _Send, both communication; ops come sorted, with the documented columns."""
    assert "/host:CPU" in result["planes"]
    assert result["steps"] == [0, 1, 2]
    assert result["matmuls_per_step"] == [2, 2, 2]
    kinds = dict(map(tuple, result["kinds"]))
    assert kinds["MatMul"] == "compute"
    assert kinds["_Recv"] == kinds["_Send"] == "communication"
    assert result["recv_positive"]
    assert result["columns"] == trace_reading.OP_COLUMNS and result["sorted"]
    assert result["rows_add_up"]


@pytest.mark.slow
def test_trace_durations_agree_with_the_wall_clock(result):
    """A step lasts in the trace no longer than the wall clock around it measured (the marker
    sits inside that interval), and not much shorter."""
    for wall, traced in zip(
        result["walls"] + result["input_walls"],
        result["step_ms"] + result["input_step_ms"],
        strict=True,
    ):
        assert traced <= wall + 0.05
        assert traced >= 0.5 * wall - 2.0  # a preempted exit from the marker costs ms


@pytest.mark.slow
def test_an_input_bound_step_waits_for_its_input(result):
    """8 examples of 5 ms of Python each against one tiny matmul: most of the steps' time is
    input. (tf.data fuses map and batch into MapAndBatch, which works ahead in the background,
    so a single step may find part of its batch ready: the bound is on all steps together.)"""
    shares = result["input_shares"]
    assert shares["input"] > 0.5, shares
    assert max(shares, key=shares.get) == "input", shares
    assert sum(shares.values()) == pytest.approx(1.0)


@pytest.mark.slow
def test_the_profile_plugin_reads_the_same_ops(result):
    """xprof's trace viewer conversion of the same file has the same MatMuls (skipped where
    xprof is not installed: it has no Linux aarch64 wheel)."""
    if result["viewer_matmuls"] is None:
        pytest.skip("xprof is not installed")
    assert result["viewer_matmuls"] == result["our_matmuls"] == 6


@pytest.mark.slow
def test_missing_step_or_plane_is_an_error(result):
    assert "no step called 'no such step'" in result["no_step"]
    assert "tf.profiler.experimental.Trace" in result["no_step"]
    assert "/device:GPU:0" in result["no_plane"] and "/host:CPU" in result["no_plane"]


def test_plot_colours_follow_the_lessons_kinds():
    """plot_step draws the kinds in COLORS' order, which must be the lesson's KINDS (compute
    drawn last, on top): the plumbing cannot import the lesson to ask."""
    assert tuple(profiling.COLORS) == trace_reading.KINDS
