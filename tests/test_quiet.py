import subprocess
import sys

import numpy as np
import pytest

from dtf import quiet
from tests.helpers import run_script


@pytest.mark.parametrize("level", [5, -1, 4])
def test_bad_level(level):
    with pytest.raises(ValueError, match="TF_CPP_MIN_LOG_LEVEL"):
        quiet.quiet(level=level)


@pytest.mark.parametrize("level", [True, False, 2.0, 1.0, "2", None])
def test_level_must_be_an_int_not_bool_float_or_text(level, monkeypatch):
    # True == 1 and 2.0 == 2 to Python: they used to pass and set TF_CPP_MIN_LOG_LEVEL to
    # "True"/"2.0", which TensorFlow 2.21 cannot parse and reads as 0 (measured: its
    # cpu_feature_guard INFO line comes back), turning its INFO lines back on.
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    with pytest.raises(TypeError, match=r"level must be one of 0, 1, 2 or 3"):
        quiet.quiet(level=level)
    assert quiet.os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"  # nothing was changed


@pytest.mark.parametrize("level", [0, 1, 2, 3, np.int64(3)])
def test_good_levels_are_written_as_digits(level, monkeypatch):
    monkeypatch.delitem(quiet.sys.modules, "tensorflow", raising=False)
    for key in quiet.SETTINGS:
        monkeypatch.delenv(key, raising=False)
    applied = quiet.quiet(level)
    assert applied["TF_CPP_MIN_LOG_LEVEL"] == str(int(level))
    assert quiet.os.environ["TF_CPP_MIN_LOG_LEVEL"] == str(int(level))


@pytest.mark.slow
def test_import_is_silent_and_quiet_is_idempotent():
    # No TF variables inherited: quiet() alone must silence the import.
    env = {"TF_CPP_MIN_LOG_LEVEL": "", "TF_ENABLE_ONEDNN_OPTS": ""}
    code = """
        import os
        for k in ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS"):
            os.environ.pop(k, None)
        from dtf import quiet
        quiet.quiet()
        import tensorflow as tf
        x = tf.linalg.matmul(tf.ones([64, 64]), tf.ones([64, 64]))  # first op, device init
        quiet.quiet()  # re-running the Setup cell: harmless
        try:
            quiet.quiet(level=0)
        except quiet.TooLateError as err:
            print("TOO LATE:", err)
        print("done")
    """
    proc = run_script(code, env=env)
    assert proc.stdout.strip().endswith("done")
    assert "TOO LATE:" in proc.stdout and "Restart the kernel" in proc.stdout
    assert proc.stderr.strip() == "", proc.stderr


@pytest.mark.slow
def test_without_quiet_tensorflow_is_noisy():
    """The control: the same import without quiet() prints C++ log lines (so the test
    above can fail)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import tensorflow as tf; tf.ones([2]) + 1"],
        capture_output=True,
        text=True,
        timeout=180,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "oneDNN" in proc.stderr or "I0000" in proc.stderr or "tensorflow/" in proc.stderr
