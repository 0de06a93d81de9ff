"""tests/forked_kernel.py: notebook kernels forked from the script server.

A forked kernel must behave as a fresh one where a notebook can tell: its working directory,
its environment, an interrupt, a kill. What it cannot hide (TensorFlow already imported) is
why a notebook that sets a variable read at import gets a fresh kernel instead."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from tests import labrun
from tests.forked_kernel import (
    FRESH_ENV,
    STACKS_TITLE,
    ForkedKernelManager,
    ForkedSpecs,
    forkable,
)
from tests.helpers import ROOT, SCRIPT_SERVER, notebook
from tools import nbrun

READY_S = 120


def test_a_notebook_that_sets_what_is_read_at_import_gets_a_fresh_kernel(monkeypatch):
    monkeypatch.delenv(FRESH_ENV, raising=False)
    assert forkable(notebook("import os", "x = 1"))
    for line in (
        'os.environ["KERAS_BACKEND"] = "jax"',
        "os.environ['TF_CPU_ALLOCATOR_USE_BFC'] = 'true'",
        'os.environ.update(TF_CPP_MIN_LOG_LEVEL="0")',
        'os.environ.update({"XLA_FLAGS": "--xla_force_host_platform_device_count=2"})',
        'os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")',
        'os.environ |= {"KERAS_BACKEND": "jax"}',
        'os.putenv("TF_CPP_MIN_LOG_LEVEL", "0")',
        "%env KERAS_BACKEND=jax",
    ):
        assert not forkable(notebook("import os", line)), line
    # quiet() at another level than the one the server imported TensorFlow with
    assert not forkable(notebook("quiet.quiet(3)")) and not forkable(
        notebook("quiet.quiet(level=0)")
    )
    assert forkable(notebook("quiet.quiet()")) and forkable(notebook("quiet.quiet(level=2)"))
    # a variable read later, or one written into a file for another process, is no reason
    assert forkable(notebook('os.environ["DTF_METRICS_FILE"] = "m.json"'))
    assert forkable(notebook('%%writefile w.py\nimport os\nos.environ["KERAS_BACKEND"] = "jax"'))
    monkeypatch.setenv(FRESH_ENV, "1")
    assert not forkable(notebook("x = 1"))


def test_the_course_notebooks_that_set_what_is_read_at_import_run_fresh(monkeypatch):
    import nbformat

    monkeypatch.delenv(FRESH_ENV, raising=False)

    def read(name: str):
        return nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4)

    # the Keras backend, the CPU allocator's statistics, quiet(3)
    for name in ("15_keras3_on_jax", "05_gpu_memory", "08_parameter_servers_sync_async"):
        assert not forkable(read(name)), name
    assert forkable(read("09_mirrored_strategy_keras"))


class _Kernel:
    """A kernel started as nbrun starts one, and a way to run code in it."""

    def __init__(self, cwd: Path, env: dict) -> None:
        self.km = KernelManager(kernel_name="python3", kernel_spec_manager=ForkedSpecs())
        self.km.start_kernel(cwd=str(cwd), env=env)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=READY_S)

    def run(self, code: str, timeout: float = 60) -> tuple[dict, str]:
        """The execute reply's content and what the code printed."""
        msg_id = self.kc.execute(code)
        printed = []
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                printed.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        return self.kc.get_shell_msg(timeout=timeout)["content"], "".join(printed)

    def started(self, code: str, timeout: float = 60) -> None:
        """Send ``code`` and return once it printed something. (An interrupt that arrives
        before the cell's code runs, even after ``execute_input``, ends ipykernel's handler
        with no reply: ipykernel 7, kernelbase.py.)

        The cell does not stop on error: after a cell fails, ipykernel aborts each request
        that reaches it before it has drained its queue (``_abort_queues``), and a request
        sent as soon as the error's reply arrives can land in that window."""
        msg_id = self.kc.execute(code, stop_on_error=False)
        while True:
            msg = self.kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                return

    def close(self) -> None:
        self.kc.stop_channels()
        if self.km.has_kernel:
            self.km.shutdown_kernel(now=True)


@pytest.fixture
def kernel_env():
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    return {**env, "DTF_TEST_MARK": "forked-kernel-test"}


@pytest.mark.slow
def test_a_forked_kernel_runs_where_and_as_it_was_asked_and_obeys_signals(tmp_path, kernel_env):
    kernel = _Kernel(tmp_path, kernel_env)
    try:
        reply, printed = kernel.run(
            "import os, sys\n"
            "from dtf import quiet\n"
            "quiet.quiet()  # harmless: TensorFlow was imported under these settings\n"
            "print(os.getppid(), os.getpid(), 'tensorflow' in sys.modules)\n"
            "print(os.getcwd())\n"
            "print(os.environ['DTF_TEST_MARK'])"
        )
        assert reply["status"] == "ok", reply
        ids, cwd, mark = printed.splitlines()
        parent, pid, imported = ids.split()
        assert SCRIPT_SERVER.popen is not None and int(parent) == SCRIPT_SERVER.popen.pid
        assert imported == "True" and Path(cwd) == tmp_path and mark == "forked-kernel-test"
        # An interrupt reaches the cell as KeyboardInterrupt, and the kernel lives on.
        kernel.started("import time\nprint('sleeping', flush=True)\ntime.sleep(60)")
        kernel.km.interrupt_kernel()
        reply = kernel.kc.get_shell_msg(timeout=30)["content"]
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
        reply, printed = kernel.run("print(1 + 1)")
        assert reply["status"] == "ok" and printed == "2\n", (reply, printed)
        # A kill ends it: the server reaps it, and Jupyter sees it gone.
        kernel.km.shutdown_kernel(now=True)
        assert not kernel.km.is_alive()
        assert not Path(f"/proc/{pid}").exists()
    finally:
        kernel.close()


@pytest.mark.slow
def test_a_kernel_whose_environment_differs_at_import_starts_fresh(tmp_path, kernel_env):
    kernel = _Kernel(tmp_path, {**kernel_env, "TF_CPP_MIN_LOG_LEVEL": "0"})
    try:
        reply, printed = kernel.run(
            "import os, sys\nprint(os.getppid(), 'tensorflow' in sys.modules)"
        )
        assert reply["status"] == "ok", reply
        parent, imported = printed.split()
        assert int(parent) == os.getpid() and imported == "False"
    finally:
        kernel.close()


#: What a notebook can see of how its kernel started, after the Setup cell's two steps:
#: ``quiet()``, then ``import tensorflow``.
PROBE = """
import json, logging, os, sys, warnings
import matplotlib, pandas
from tensorflow.python.autograph.utils import ag_logging
logger = tf.get_logger()
pandas.reset_option("display.max_columns")
print(json.dumps({
    "tf logger": [logger.level, [type(h.stream).__name__ for h in logger.handlers]],
    "autograph echo": ag_logging.echo_log_to_stdout,
    "pandas max_columns": pandas.get_option("display.max_columns"),
    "matplotlib backend": matplotlib.get_backend(),
    "shell": [type(get_ipython()).__name__, hasattr(sys, "ps1"), type(sys.stdout).__name__],
    "warning filters": sorted(repr(f) for f in warnings.filters),
    "sys.path": sys.path,
    "cwd": os.getcwd(),
    "environment": sorted(set(os.environ) - {"JPY_PARENT_PID", "JPY_SESSION_NAME"}),
}))
"""
PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint(plt.isinteractive(), os.getppid())"


@pytest.mark.slow
def test_a_forked_kernel_looks_like_a_fresh_one_to_a_notebook(tmp_path):
    """Fresh and forked, side by side: what TensorFlow, pandas and Matplotlib decide at
    import in a Jupyter kernel is the same, and so are the eager placement lines."""
    setup = "from dtf import quiet\nquiet.quiet()\nimport tensorflow as tf"
    placement = "tf.debugging.set_log_device_placement(True)\nprint((tf.ones(2) + 1).numpy())"
    nb = notebook(setup, PROBE, placement, PLOT)
    seen, parents = {}, {}
    for name, manager in (("fresh", None), ("forked", ForkedKernelManager)):
        run = nbrun.execute(
            tmp_path / "probe.ipynb", nb=nb, timeout=120, kernel_manager_class=manager
        )
        probe, placed, plotted = (run.nb.cells[i].outputs for i in (1, 2, 3))
        seen[name] = json.loads(probe[0]["text"])
        seen[name]["eager lines"] = "Executing op AddV2" in "".join(
            o.get("text", "") for o in placed
        )
        text = "".join(o.get("text", "") for o in plotted)
        seen[name]["interactive pyplot"] = text.split()[0]
        seen[name]["figure shown"] = any("image/png" in o.get("data", {}) for o in plotted)
        parents[name] = int(text.split()[1])
    differ = {
        k: (seen["fresh"][k], seen["forked"].get(k))
        for k in seen["fresh"]
        if seen["fresh"][k] != seen["forked"].get(k)
    }
    if "environment" in differ:
        fresh, forked = (set(seen[k]["environment"]) for k in ("fresh", "forked"))
        differ["environment"] = (sorted(fresh - forked), sorted(forked - fresh))
    assert not differ, differ
    assert seen["forked"]["eager lines"] and seen["forked"]["tf logger"][0] == logging.INFO
    assert seen["forked"]["figure shown"]
    # and the forked one was forked (a difference read at import would start it fresh)
    assert SCRIPT_SERVER.popen is not None and parents["forked"] == SCRIPT_SERVER.popen.pid
    assert parents["fresh"] != parents["forked"]


#: A cell that no interrupt can stop: SIGINT blocked, then asleep past nbval's timeouts.
STUCK_CELL = (
    "import signal, time\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\n"
    "time.sleep(60)  # stuck here"
)
#: That cell's line 3 in faulthandler's stacks: what the kernel was doing when it timed out.
STUCK_LINE = re.compile(r"ipykernel_\d+/\d+\.py\", line 3 in <module>")


@pytest.mark.slow
def test_a_cell_that_times_out_under_nbval_reports_its_kernels_stacks(tmp_path):
    """nbval interrupts a kernel whose cell timed out; a kernel that cannot take the
    interrupt (stuck in C++, or in ipykernel's threads) would leave only "failing without
    traceback". Before that interrupt, a forked kernel's thread stacks join the report."""
    path = tmp_path / "stuck.ipynb"
    path.write_text(json.dumps(notebook(STUCK_CELL, "print(1)")), encoding="utf-8")
    cmd = [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider"]
    cmd += ["-n", "0", "-q", "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout", "3"]
    cmd += ["--rootdir", str(tmp_path), str(path)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", FRESH_ENV)}
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240, env=env)
    out = done.stdout
    assert done.returncode == 1 and "Failed to interrupt kernel" in out, out + done.stderr
    assert STACKS_TITLE in out, out
    assert STUCK_LINE.search(out), out  # the cell


def test_nbval_times_a_cell_out_before_pytest_timeout_does(pytestconfig):
    """The stacks above come with nbval's timeout only: a cell still running when
    pytest-timeout ends the test leaves nothing of its kernel (seen once in make check)."""
    assert float(pytestconfig.getoption("nbval_cell_timeout")) < float(
        pytestconfig.getini("timeout")
    )


@pytest.mark.slow
def test_a_lab_cell_that_times_out_reports_its_kernels_stacks(tmp_path, monkeypatch):
    """The same for the lab runs (tests/labrun.py, through nbclient): the timeout's error
    carries the forked kernel's thread stacks."""
    path = tmp_path / "stuck.ipynb"
    path.write_text(json.dumps(notebook(STUCK_CELL)), encoding="utf-8")
    monkeypatch.setattr(labrun, "CELL_TIMEOUT_S", 3)
    with pytest.raises(nbrun.NotebookError) as caught:
        labrun.execute(path)
    cause = str(caught.value.__cause__)
    assert STACKS_TITLE in cause, cause
    assert STUCK_LINE.search(cause), cause
