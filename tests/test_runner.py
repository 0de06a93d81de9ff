"""Tests for the headless notebook tools (tools/run_notebooks.py, tools/execute_in_place.py).

The notebooks are tiny and built on the fly (no TensorFlow); each execution still costs a
kernel start (a worker process, nbformat/nbclient imports, the kernel: about 2 s), so several
notebooks share one runner invocation through module-scoped fixtures.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import nbformat
import psutil
import pytest

from tests.helpers import ROOT, notebook
from tools import execute_in_place, nbtools, run_notebooks

# The first cell of a notebook starts ~2 s after the runner starts it on 2 idle cores (it was
# ~6 s when the runner imported papermill), later with both cores busy. The notebook must
# start its subprocess before the limit hits, so a 3 s limit would test nothing.
SLOW_TIMEOUT_S = 15

# Starts `sleep 600` detached from the kernel (sh exits at once, sleep is re-parented to
# init), so ipykernel's own clean-up of its children on shutdown cannot see it; in a session
# of its own, so that Jupyter's signals to the kernel's process group cannot either (a kernel
# slow to exit under load gets SIGTERM there after 2.5 s, which ended the sleep too).
LEAK_SOURCE = """\
import subprocess
out = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
                     capture_output=True, text=True, check=True, timeout=10,
                     start_new_session=True)
open("leak.pid", "w").write(out.stdout.strip())
"""


def make_notebook(path: Path, *sources: str, parameters: str | None = None) -> Path:
    """Write a notebook with one code cell per source (and a `parameters` cell first)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook(*sources, parameters=parameters), path)
    return path


def is_gone(pid: int) -> bool:
    """True if ``pid`` has exited (a zombie waiting for init to reap it counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# What the batch's -p arguments must arrive as, with their types (bool is not int here).
BATCH_PARAMETERS = {
    "EPOCHS": 2,
    "MODE": "fast",
    "RATE": 0.001,
    "SHUFFLE": False,
    "LIMIT": None,
    "LAYERS": "[1, 2]",
    "NAME": "'q'",
    "BIG": 10**30,
}


def rows_by_notebook(report_json: dict) -> dict[str, dict]:
    return {row["notebook"]: row for row in report_json["results"]}


# --------------------------------------------------------------------------- runner: one batch


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """Start the timeout scenario through the command line, in the background.

    Once its kernel is up it only sleeps, so it overlaps with the batch below instead of
    adding its whole time limit to the test run.
    """
    tmp = tmp_path_factory.mktemp("slow")
    nb = make_notebook(
        tmp / "nbs" / "slow.ipynb",
        "import subprocess\nchild = subprocess.Popen(['sleep', '600'])\n"
        "open('child.pid', 'w').write(str(child.pid))",
        "import time\ntime.sleep(600)",
    )
    # As a file, from another folder (the bootstrap; names relative to the current directory).
    cmd = [sys.executable, str(ROOT / "tools" / "run_notebooks.py"), "nbs/slow.ipynb"]
    cmd += ["--timeout", str(SLOW_TIMEOUT_S), "--report-dir", "reports", "--output-dir", "out"]
    proc = subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    yield SimpleNamespace(proc=proc, nb=nb, reports=tmp / "reports")
    if proc.poll() is None:
        proc.kill()
        proc.communicate(timeout=30)


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory, slow_run: SimpleNamespace) -> SimpleNamespace:
    """Run three notebooks (pass + metric + leak, parameters, failure) in one invocation."""
    tmp = tmp_path_factory.mktemp("batch")
    nbs = tmp / "nbs"
    make_notebook(
        nbs / "a_metrics.ipynb",
        "import dtf.metrics\ndtf.metrics.record('acc', 0.9)\n"
        "dtf.metrics.record('label', '<b>x</b> | y')",
        LEAK_SOURCE,
    )
    make_notebook(
        nbs / "b_params.ipynb",
        "assert EPOCHS == 2, EPOCHS\nassert MODE == 'fast', MODE\n"
        "import dtf.metrics\ndtf.metrics.record('epochs', EPOCHS)",
        # Each type papermill's command line produces, and text that looks like Python.
        "assert type(EPOCHS) is int and type(RATE) is float and RATE == 1e-3, RATE\n"
        "assert SHUFFLE is False and LIMIT is None, (SHUFFLE, LIMIT)\n"
        "assert LAYERS == '[1, 2]' and NAME == \"'q'\", (LAYERS, NAME)\n"
        "assert BIG == 10**30 and type(BIG) is int, BIG",
        parameters="EPOCHS = 10\nMODE = 'slow'\nRATE = 0.1\nSHUFFLE = True\nLIMIT = 5\n"
        "LAYERS = [4]\nNAME = 'x'\nBIG = 0",
    )
    make_notebook(nbs / "c_fail.ipynb", "x = 1", "raise ValueError('boom <script>')")
    (nbs / ".ipynb_checkpoints").mkdir()
    make_notebook(nbs / ".ipynb_checkpoints" / "a_metrics-checkpoint.ipynb", "1/0")
    out, reports = tmp / "out", tmp / "reports"
    argv = [str(nbs), "-p", "EPOCHS", "2", "-p", "MODE", "fast", "--timeout", "120"]
    argv += ["-p", "RATE", "1e-3", "-p", "SHUFFLE", "False", "-p", "LIMIT", "None"]
    argv += ["-p", "LAYERS", "[1, 2]", "-p", "NAME", "'q'", "-p", "BIG", str(10**30)]
    argv += ["--output-dir", str(out), "--report-dir", str(reports)]
    rc = run_notebooks.main(argv)
    return SimpleNamespace(
        tmp=tmp,
        nbs=nbs,
        out=out,
        rc=rc,
        md=(reports / "report.md").read_text(encoding="utf-8"),
        html=(reports / "report.html").read_text(encoding="utf-8"),
        data=json.loads((reports / "report.json").read_text(encoding="utf-8")),
        reports=reports,
    )


@pytest.mark.slow
def test_exit_code_is_1_when_a_notebook_fails(batch: SimpleNamespace) -> None:
    assert batch.rc == 1


@pytest.mark.slow
def test_statuses_metrics_and_errors(batch: SimpleNamespace) -> None:
    rows = rows_by_notebook(batch.data)
    assert list(rows) == ["a_metrics.ipynb", "b_params.ipynb", "c_fail.ipynb"]
    assert [r["status"] for r in rows.values()] == ["passed", "passed", "failed"]
    assert rows["a_metrics.ipynb"]["metrics"] == {"acc": 0.9, "label": "<b>x</b> | y"}
    assert rows["b_params.ipynb"]["metrics"] == {"epochs": 2}
    assert rows["c_fail.ipynb"]["error"].startswith("ValueError: boom <script>")
    assert batch.data["counts"] == {"passed": 2, "failed": 1, "timeout": 0}
    assert batch.data["parameters"] == BATCH_PARAMETERS
    for row in rows.values():
        assert row["seconds"] > 0 and row["peak_mib"] > 10


@pytest.mark.slow
def test_leftover_process_is_stopped_and_reported(batch: SimpleNamespace) -> None:
    pid = int((batch.nbs / "leak.pid").read_text())  # written relative to the notebook's dir
    assert is_gone(pid)
    row = rows_by_notebook(batch.data)["a_metrics.ipynb"]
    assert row["status"] == "passed"
    assert any("leftover" in w and "sleep" in w for w in row["warnings"])


@pytest.mark.slow
def test_report_md(batch: SimpleNamespace) -> None:
    lines = batch.md.splitlines()
    assert any(line.startswith("**2 passed, 1 failed** in ") for line in lines)
    assert "(parameters: EPOCHS=2, MODE='fast', RATE=0.001, SHUFFLE=False, LIMIT=None, " in batch.md
    table = {line.split("|")[1].strip(): line for line in lines if line.startswith("| ")}
    assert "| passed |" in table["a_metrics.ipynb"] and "acc=0.9" in table["a_metrics.ipynb"]
    assert "epochs=2" in table["b_params.ipynb"]
    assert "| failed |" in table["c_fail.ipynb"] and "ValueError: boom" in table["c_fail.ipynb"]
    assert "x\\</b> \\| y" in table["a_metrics.ipynb"]  # a pipe must not split the row
    assert all(line.count("|") - line.count("\\|") == 7 for line in table.values())


@pytest.mark.slow
def test_report_html_escapes(batch: SimpleNamespace) -> None:
    assert batch.html.startswith("<!DOCTYPE html>")
    assert "<script>" not in batch.html
    assert "boom &lt;script&gt;" in batch.html
    assert "label=&lt;b&gt;x&lt;/b&gt; | y" in batch.html
    assert 'class="failed"' in batch.html


@pytest.mark.slow
def test_reports_use_relative_paths(batch: SimpleNamespace) -> None:
    for text in (batch.md, batch.html, json.dumps(batch.data)):
        assert str(batch.tmp) not in text
        assert str(ROOT) not in text


@pytest.mark.slow
def test_executed_copies_and_progress(batch: SimpleNamespace) -> None:
    executed = nbformat.read(batch.out / "b_params.ipynb", as_version=4)
    assert executed.metadata["papermill"]["parameters"] == BATCH_PARAMETERS
    assert (batch.out / "c_fail.ipynb").exists()  # the runner saves the failing notebook
    assert not (batch.out / "a_metrics-checkpoint.ipynb").exists()


def test_write_reports_directly(tmp_path: Path) -> None:
    results = [
        run_notebooks.Result("x.ipynb", "passed", 1.25, 100.0, {"acc": 0.951234}),
        run_notebooks.Result("y.ipynb", "timeout", 3.0, 50.0, error="timed out after 3 s"),
    ]
    written = run_notebooks.write_reports(results, tmp_path, params={}, total_seconds=4.25)
    assert [p.name for p in written] == ["report.md", "report.html", "report.json"]
    md = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert "**1 passed, 1 timeout** in 4.2 s (default parameters)" in md
    assert "acc=0.9512" in md


# --------------------------------------------------------------------------- runner: timeout


@pytest.mark.slow
def test_timeout_kills_the_whole_tree(slow_run: SimpleNamespace) -> None:
    out, err = slow_run.proc.communicate(timeout=SLOW_TIMEOUT_S + 90)
    assert slow_run.proc.returncode == 1, err
    pid_file = slow_run.nb.parent / "child.pid"
    assert pid_file.exists(), "the kernel did not get to the first cell before the timeout"
    assert is_gone(int(pid_file.read_text()))
    (row,) = json.loads((slow_run.reports / "report.json").read_text(encoding="utf-8"))["results"]
    assert row["notebook"] == "nbs/slow.ipynb"  # relative to the current directory
    assert row["status"] == "timeout"
    assert row["seconds"] < SLOW_TIMEOUT_S + nbtools.KILL_GRACE_S + 5
    assert f"timed out after {SLOW_TIMEOUT_S} s" in row["error"]
    assert "**1 timeout**" in (slow_run.reports / "report.md").read_text(encoding="utf-8")
    assert "[1/1] nbs/slow.ipynb ..." in out and "  timeout in " in out


# --------------------------------------------------------------------------- runner: Ctrl-C

# Waits of the Ctrl-C test: the kernel reaching its first cell (a kernel start, ~2 s idle,
# far more with both cores busy), and the runner's exit once interrupted (its clean-up
# waits up to KILL_GRACE_S per stage).
INTERRUPT_READY_S = 90
INTERRUPT_EXIT_S = 60


@pytest.mark.slow
@pytest.mark.skipif(not nbtools.POSIX, reason="os.killpg: a terminal's Ctrl-C on POSIX")
def test_ctrl_c_is_one_line_and_leaves_no_process(tmp_path: Path) -> None:
    """Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the runner
    (started here in a group of its own, as a terminal starts ``make``) and make, not the
    worker or kernel, which run in sessions of their own. The runner must stop the notebook's
    processes and say so in one line, with no ``KeyboardInterrupt`` traceback."""
    nb = make_notebook(
        tmp_path / "nbs" / "waits.ipynb",
        "import os, subprocess\nchild = subprocess.Popen(['sleep', '600'])\n"
        "open('pids.txt.tmp', 'w').write(f'{os.getpid()} {child.pid}')\n"
        "os.replace('pids.txt.tmp', 'pids.txt')",
        "import time\ntime.sleep(600)",
    )
    cmd = [sys.executable, "-m", "tools.run_notebooks", str(nb), "--timeout", "300"]
    cmd += ["--report-dir", str(tmp_path / "reports"), "--output-dir", str(tmp_path / "out")]
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pids_file = nb.parent / "pids.txt"
    try:
        deadline = time.monotonic() + INTERRUPT_READY_S
        while not pids_file.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the notebook's first cell did not run"
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        out, err = proc.communicate(timeout=INTERRUPT_EXIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=30)
    kernel, child = map(int, pids_file.read_text().split())
    assert is_gone(kernel) and is_gone(child)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith("python -m tools.run_notebooks: interrupted (Ctrl-C): "), line
    assert "waits.ipynb stopped, with every process it started" in line, line
    assert "0 of 1 notebooks finished, no report written" in line, line
    assert "[1/1]" in out and "Traceback" not in out, out
    # Killed by SIGINT, as a shell or make expects of a program the user interrupted.
    assert proc.returncode == -signal.SIGINT
    assert not (tmp_path / "reports" / "report.json").exists()  # no report of a partial run


# --------------------------------------------------------------------------- runner: usage


def test_discover_expands_and_sorts(tmp_path: Path) -> None:
    for name in ("b.ipynb", "a.ipynb", ".ipynb_checkpoints/a-checkpoint.ipynb"):
        make_notebook(tmp_path / name, "1")
    (tmp_path / "notes.txt").write_text("not a notebook")
    found = run_notebooks.discover([tmp_path, tmp_path / "a.ipynb"])
    assert [p.name for p in found] == ["a.ipynb", "b.ipynb"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["does/not/exist.ipynb"], "no such file or directory"),
        (["{tmp}"], "no notebooks found"),
        (["{tmp}/x.ipynb", "-k", "zzz"], "no notebook matches"),
        (["{tmp}/x.ipynb", "-p", "not-a-name", "1"], "not a Python identifier"),
        (["{tmp}/x.ipynb", "-p", "class", "1"], "is a Python keyword"),
        (["{tmp}/x.ipynb", "--timeout", "0"], "must be > 0"),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    if any("x.ipynb" in a for a in argv):
        make_notebook(tmp_path / "x.ipynb", "1")
    argv = [a.replace("{tmp}", str(tmp_path if "x.ipynb" in a else empty)) for a in argv]
    assert run_notebooks.main([*argv, "--report-dir", str(tmp_path / "r")]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3", 3),
        ("-7", -7),
        ("-1e-3", -0.001),
        (str(10**30), 10**30),
        ("0.5", 0.5),
        ("1e-3", 0.001),
        ("True", True),
        ("False", False),
        ("None", None),
        ("true", "true"),  # only Python's spelling, as papermill's CLI
        ("adam", "adam"),
        ("[1, 2]", "[1, 2]"),  # no Python literals: text, as papermill's CLI
        ("'quoted'", "'quoted'"),
        ("", ""),
    ],
)
def test_parse_value_like_papermill_cli(text: str, value: object) -> None:
    from papermill.cli import _resolve_type

    parsed = run_notebooks.parse_value(text)
    assert parsed == value and type(parsed) is type(value)
    assert parsed == _resolve_type(text) and type(parsed) is type(_resolve_type(text))


@pytest.mark.parametrize("text", ["1e400", "-1e400", "inf", "-Infinity", "nan", "9" * 5000])
def test_values_that_cannot_reach_a_notebook_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """inf/nan have no literal in a parameters cell: refused before any notebook runs."""
    nb = make_notebook(tmp_path / "x.ipynb", "1")
    argv = [str(nb), "-p", "EPOCHS", "1", "-p", "LEARNING_RATE", text]
    assert run_notebooks.main([*argv, "--report-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "-p LEARNING_RATE" in err and "finite" in err, err
    assert not (tmp_path / "r").exists()


def test_take_parameters_keeps_values_that_look_like_options() -> None:
    argv = ["nb.ipynb", "-p", "LR", "-1e-3", "--parameter", "NAME", "-x", "-k", "03"]
    rest, pairs = run_notebooks.take_parameters(argv)
    assert rest == ["nb.ipynb", "-k", "03"]
    assert pairs == [("LR", "-1e-3"), ("NAME", "-x")]
    assert run_notebooks.take_parameters(["x", "--", "-p", "A", "1"]) == (
        ["x", "--", "-p", "A", "1"],
        [],
    )
    assert run_notebooks.take_parameters(["x", "-p", "A"]) == (["x", "-p", "A"], [])


def test_help_describes_parameter_values(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_notebooks.main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "True/False/None, an integer or a float" in text and "else a string" in text
    assert "inf and nan are refused" in text


# --------------------------------------------------------------------------- execute in place


def test_execute_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok = make_notebook(tmp_path / "1_ok.ipynb", "x = 21", "", "print(x * 2)", "x")
    nb = nbformat.read(ok, as_version=4)
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="stale\n")]
    nb.cells[0].execution_count = 7
    nb.cells[0].metadata["execution"] = {"iopub.status.busy": "2020-01-01T00:00:00Z"}
    nb.metadata["papermill"] = {"parameters": {}}
    nbformat.write(nb, ok)
    bad = make_notebook(tmp_path / "2_bad.ipynb", "y = 1", "raise ValueError('boom')")
    later = make_notebook(tmp_path / "3_later.ipynb", "z = 3")
    before = {p: p.read_bytes() for p in (bad, later)}

    assert execute_in_place.main([str(ok), str(bad), str(later), "--timeout", "60"]) == 1

    after = nbformat.read(ok, as_version=4)
    code = [c for c in after.cells if c.cell_type == "code" and c.source.strip()]
    assert [c.execution_count for c in code] == [1, 2, 3]
    assert code[0].outputs == []
    assert code[1].outputs[0]["text"] == "42\n"
    assert code[2].outputs[0]["data"]["text/plain"] == "21"
    assert all("execution" not in c.metadata for c in after.cells)
    assert "papermill" not in after.metadata
    assert after.metadata["kernelspec"]["name"] == "python3"
    assert after.metadata["language_info"]["name"] == "python"
    assert {p: p.read_bytes() for p in (bad, later)} == before
    assert not list(tmp_path.glob(".*.tmp"))  # no temp files left behind
    captured = capsys.readouterr()
    assert "[1/3] 1_ok.ipynb ..." in captured.out
    assert "2_bad.ipynb failed at cell index 1: ValueError: boom" in captured.err
    assert "[3/3]" not in captured.out


# --------------------------------------------------------------------------- not POSIX


@pytest.mark.slow
def test_runner_without_posix_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Windows path: no getuid/killpg/SIGKILL, and a leftover process is still stopped."""
    monkeypatch.setattr(nbtools, "POSIX", False)
    for name in ("getuid", "killpg", "getpgid"):
        monkeypatch.delattr(os, name, raising=False)
    monkeypatch.setattr(nbtools, "signal", SimpleNamespace(SIGTERM=signal.SIGTERM))
    nb = make_notebook(tmp_path / "leak.ipynb", LEAK_SOURCE)
    argv = [str(nb), "--timeout", "120", "--report-dir", str(tmp_path / "r")]
    assert run_notebooks.main([*argv, "--output-dir", str(tmp_path / "out")]) == 0
    assert is_gone(int((tmp_path / "leak.pid").read_text()))
    assert "stopped leftover processes: sleep" in capsys.readouterr().out
