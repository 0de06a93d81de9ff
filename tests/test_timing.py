"""dtf.timing: a verdict follows from every repeat, and a busy machine is named busy."""

import os
import signal
import subprocess
import sys
from collections import namedtuple
from types import SimpleNamespace

import numpy as np
import pytest

from dtf import timing


def test_faster_only_when_every_repeat_agrees():
    v = timing.verdict("a", [1.0, 1.1, 0.9, 1.0, 1.05], "b", [2.0, 2.0, 1.9, 2.1, 2.0])
    assert v.winner == "a" and v.high < 1
    assert "a faster" in str(v)
    v = timing.verdict("a", [2.0, 2.2, 2.1], "b", [1.0, 1.0, 1.1])
    assert v.winner == "b" and "b faster" in str(v)


def test_repeats_that_span_one_give_no_verdict():
    v = timing.verdict("a", [1.0, 1.3, 0.9], "b", [1.1, 1.0, 1.0])
    assert v.winner is None
    assert "no measurable difference" in str(v)
    assert f"{v.low:.2f} to {v.high:.2f}" in str(v)


def test_unpaired_needs_every_pair_to_agree():
    v = timing.verdict("a", [1.0, 1.2], "b", [1.3, 1.5, 1.4], paired=False)
    assert v.winner == "a" and v.median == 1.1 / 1.4
    assert "(all pairs 0.67 to 0.92, n=2x3): a faster, every pair below 1" in str(v)
    v = timing.verdict("a", [1.0, 1.4], "b", [1.3, 1.5, 1.4], paired=False)
    assert v.winner is None and str(v).endswith("no measurable difference, the pairs span 1")


def test_a_quantity_other_than_time_is_smaller_not_faster():
    v = timing.verdict("cost, N = 2", [2.0, 2.2], "cost, N = 1", [1.0, 1.1], word="smaller")
    assert str(v).endswith("cost, N = 1 smaller, every repeat above 1")


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one time per repeat"):
        timing.verdict("a", [1.0], "b", [1.0])
    with pytest.raises(ValueError, match="one time per repeat"):
        timing.verdict("a", [1.0, 2.0], "b", [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="positive"):
        timing.verdict("a", [1.0, 0.0], "b", [1.0, 2.0])
    with pytest.raises(ValueError, match="fewer repeats"):
        timing.repeat_medians([1.0, 2.0], 3)


def test_repeat_medians_are_block_medians():
    got = timing.repeat_medians([1, 2, 3, 10, 20, 30], 2)
    np.testing.assert_allclose(got, [2, 20])


def test_load_line_says_busy_above_a_quarter_of_the_cores():
    assert timing.Load(0.25, 2).quiet and "quiet" in str(timing.Load(0.1, 2))
    busy = timing.Load(0.6, 2)
    assert not busy.quiet and "BUSY" in str(busy)
    assert str(busy).startswith(timing.LOAD_LINE)


def test_another_program_counts():
    """A spinning program that is not our child takes about a core: it shows in the share."""
    spin = "import time\nend = time.time() + 20\nwhile time.time() < end: pass"
    script = f"{sys.executable} -c '{spin}' >/dev/null 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", script], capture_output=True, text=True).stdout)
    try:  # sh has exited: the spinner is init's child now, another program
        other = timing.machine_load(1.0)
    finally:
        os.kill(pid, signal.SIGKILL)
    assert other.share >= 1 / other.cores - 0.2, other  # about one whole core, or more


def test_this_process_tree_does_not_count(monkeypatch):
    """The machine's busy time in the window, minus what this process and its children used,
    per core-second: 3 core-seconds busy, 1 + 0.5 of them ours, over 1 s on 4 cores."""
    import psutil

    phase = {"now": 0}  # 0 before the window, 1 after it
    Times = namedtuple("Times", "user system idle iowait")
    machine = [Times(10.0, 0.0, 90.0, 0.0), Times(13.0, 0.0, 91.0, 0.0)]
    mine = [SimpleNamespace(user=1.0, system=0.0), SimpleNamespace(user=2.0, system=0.0)]
    child = [SimpleNamespace(user=1.0, system=0.0), SimpleNamespace(user=1.5, system=0.0)]

    class Proc:
        def __init__(self, times):
            self.times = times

        def cpu_times(self):
            return self.times[phase["now"]]

        def children(self, recursive):
            return [Proc(child)]

    monkeypatch.setattr(psutil, "Process", lambda: Proc(mine))
    monkeypatch.setattr(psutil, "cpu_times", lambda: machine[phase["now"]])
    monkeypatch.setattr(psutil, "cpu_count", lambda: 4)
    clock = iter([0.0, 1.0])
    window = SimpleNamespace(perf_counter=lambda: next(clock), sleep=lambda s: phase.update(now=1))
    monkeypatch.setattr(timing, "time", window)
    load = timing.machine_load(1.0)
    assert load.cores == 4 and load.share == pytest.approx((3 - 1.5) / 4, abs=0.006), load


# ------------------------------------------------------------ make outputs keeps busy timings out
def test_execute_in_place_refuses_timings_from_a_busy_machine(tmp_path, capsys):
    import nbformat

    from tools import execute_in_place

    assert execute_in_place.LOAD_LINE == timing.LOAD_LINE  # tools keep a copy of the line
    path = tmp_path / "timing.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    busy = str(timing.Load(0.9, 2))
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_code_cell(f"print({busy!r})")]
    nbformat.write(nb, path)
    before = path.read_bytes()
    assert execute_in_place.main([str(path), "--timeout", "60"]) == 1
    assert path.read_bytes() == before  # the busy outputs were not stored
    err = capsys.readouterr().err
    assert "failed at cell index 1" in err and "busy machine (load 0.90 of 2 cores" in err
    quiet = str(timing.Load(0.05, 2))
    nb.cells[1] = nbformat.v4.new_code_cell(f"print({quiet!r})")
    nbformat.write(nb, path)
    assert execute_in_place.main([str(path), "--timeout", "60"]) == 0
    stored = nbformat.read(path, as_version=4).cells[1].outputs[0]["text"]
    assert stored.startswith(timing.LOAD_LINE) and "quiet" in stored
