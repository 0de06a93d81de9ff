"""tests/script_server.py through ``run_script(..., forked=True)``: a forked script runs as
``python -c`` would, and a script whose environment differs in what is read at import runs
in a fresh process instead."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.helpers import run_script

pytestmark = pytest.mark.slow  # the server imports TensorFlow once (~4 CPU-s)

PROBE = """
import atexit, json, os, sys
imported = "tensorflow" in sys.modules  # before this script imports anything
atexit.register(lambda: print("at exit", flush=True))
print("to stderr", file=sys.stderr)
print(json.dumps({"imported": imported, "argv": sys.argv, "main": __name__,
                  "cwd": os.getcwd(), "level": os.environ.get("TF_CPP_MIN_LOG_LEVEL"),
                  "mine": os.environ.get("DTF_PROBE")}))
"""


def test_a_forked_script_runs_as_python_c_with_tensorflow_already_imported():
    proc = run_script(PROBE, env={"DTF_PROBE": "given"}, forked=True)
    *_, line, last = proc.stdout.splitlines()
    assert last == "at exit", proc.stdout  # exit handlers run, after the script
    out = json.loads(line)
    assert out["imported"] is True  # forked: TensorFlow came with the process
    assert out["argv"] == ["-c"] and out["main"] == "__main__"
    assert out["level"] == "2" and out["mine"] == "given"  # the environment the test gave
    assert proc.stderr.strip() == "to stderr"  # standard error apart from standard output


def test_a_script_that_changes_what_is_read_at_import_runs_fresh():
    proc = run_script(PROBE, env={"TF_CPP_MIN_LOG_LEVEL": "3"}, forked=True)
    out = json.loads(proc.stdout.splitlines()[-2])
    assert out["imported"] is False and out["level"] == "3"


@pytest.mark.parametrize(
    ("code", "status", "shown"),
    [
        ("import sys; sys.exit(3)", 3, ""),
        ("import sys; sys.exit('gave up')", 1, "gave up"),
        ("raise ValueError('bad value')", 1, "ValueError: bad value"),
    ],
)
def test_a_failing_forked_script_fails_the_test_with_its_status_and_output(code, status, shown):
    with pytest.raises(pytest.fail.Exception) as failed:
        run_script(code, forked=True)
    assert f"script failed ({status})" in str(failed.value)
    assert shown in str(failed.value)


def test_a_forked_script_past_its_timeout_is_killed_and_the_next_one_runs():
    began = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_script("import time; time.sleep(60)", timeout=1.0, forked=True)
    assert time.monotonic() - began < 10
    assert run_script("print('next')", forked=True).stdout == "next\n"


def test_threads_are_joined_and_tmpdir_is_the_script_s(tmp_path):
    code = """
        import tempfile, threading, time
        threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
        print(tempfile.gettempdir())
    """
    out = run_script(code, env={"TMPDIR": str(tmp_path)}, forked=True).stdout
    assert out.splitlines() == [str(tmp_path), "thread done"], out


def test_a_server_killed_between_scripts_is_replaced():
    from tests.helpers import SCRIPT_SERVER

    run_script("print('first')", forked=True)
    assert SCRIPT_SERVER.popen is not None
    SCRIPT_SERVER.popen.kill()
    SCRIPT_SERVER.popen.wait(10)
    assert run_script("print('second')", forked=True).stdout == "second\n"
