"""dtf.scaling: the timing rule of notebook 12 and its child-process measurements."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dtf import scaling
from tests.conftest import QUIET_ENV, ROOT


class FakeResult:
    def __init__(self, log):
        self.log = log

    def numpy(self):
        self.log.append("wait")
        return 0.0


def test_throughput_excludes_the_warm_up_and_waits_for_each_timing():
    log = []

    def step(x):
        log.append(("step", x))
        return FakeResult(log)

    rates = scaling.throughput(step, ["batch"], 10, warmup=2, timed=3, repeats=4)
    assert len(rates) == 4 and all(r > 0 for r in rates)
    steps = [e for e in log if e != "wait"]
    assert len(steps) == 2 + 4 * 3 and steps[0] == ("step", "batch")
    # the two warm-up steps are each waited for, then one wait per timed repeat
    assert log.count("wait") == 2 + 4
    assert log[:4] == [("step", "batch"), "wait", ("step", "batch"), "wait"]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dtf.scaling", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, **QUIET_ENV},
    )


@pytest.mark.slow
def test_mirrored_in_a_child_process():
    proc = _run("mirrored", "--replicas", "2", "--warmup", "1", "--timed", "3", "--repeats", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["replicas"] == 2 and len(result["rates"]) == 2
    assert all(r > 0 for r in result["rates"])
    assert result["cross_device_ops"]  # what MirroredStrategy picked, e.g. CollectiveAllReduce


@pytest.mark.slow
def test_chains_in_a_child_process():
    proc = _run("chains", "--size", "32", "--length", "4", "--repeats", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["one chain"] > 0 and result["two chains"] > 0


@pytest.mark.parametrize("args", [[], ["mirrored"], ["nonsense"]])
def test_bad_arguments_are_a_usage_error(args):
    with pytest.raises(SystemExit) as exit_info:
        scaling.main(args)
    assert exit_info.value.code == 2
