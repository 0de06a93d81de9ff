import subprocess
import sys

import pytest

from dtf import quiet
from tests.conftest import run_script


def test_bad_level():
    with pytest.raises(ValueError, match="TF_CPP_MIN_LOG_LEVEL"):
        quiet.quiet(level=5)


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
