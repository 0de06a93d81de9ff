import subprocess
import sys

import nbformat
import pytest

from dtf import placement
from tests.conftest import QUIET_ENV, ROOT, last_json, run_script

LOG = """\
a: (_Arg): /job:localhost/replica:0/task:0/device:CPU:0
MatMul: (MatMul): /job:localhost/replica:0/task:0/device:CPU:1
product_RetVal: (_Retval): /job:localhost/replica:0/task:0/device:CPU:1
some other output: not a placement line
Executing op AddV2 in device /job:localhost/replica:0/task:0/device:CPU:0
gradients/add_grad/Sum: (Sum): /job:worker/replica:0/task:1/device:GPU:0
"""


def test_parse_user_ops():
    table = placement.parse(LOG)
    assert list(table.columns) == placement.COLUMNS
    assert table[["op", "op_type", "device", "source"]].values.tolist() == [
        ["MatMul", "MatMul", "CPU:1", "graph"],
        ["AddV2", "AddV2", "CPU:0", "eager"],
        ["gradients/add_grad/Sum", "Sum", "/job:worker/task:1/GPU:0", "graph"],
    ]


def test_parse_internal_ops_on_request():
    table = placement.parse(LOG, include_internal=True)
    assert list(table.op_type) == ["_Arg", "MatMul", "_Retval", "AddV2", "Sum"]


def test_parse_seed_style_lines():
    # TF1 logs (seed 001) used lowercase device names; they still parse.
    table = placement.parse("b: (Const): /job:localhost/replica:0/task:0/gpu:0\n")
    assert table.values.tolist() == [
        [
            "b",
            "Const",
            "/job:localhost/replica:0/task:0/gpu:0",
            "graph",
            "/job:localhost/replica:0/task:0/gpu:0",
        ]
    ]


@pytest.mark.parametrize(
    "full, short",
    [
        ("/job:localhost/replica:0/task:0/device:CPU:3", "CPU:3"),
        ("/job:worker/replica:0/task:2/device:CPU:0", "/job:worker/task:2/CPU:0"),
        ("/job:ps/task:0/device:CPU:0", "/job:ps/task:0/CPU:0"),
        ("/device:GPU:2", "GPU:2"),
        ("not a device", "not a device"),
    ],
)
def test_short_device(full, short):
    assert placement.short_device(full) == short


def test_capture_in_a_script():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices, placement
        s = devices.setup(2, log_placement=True)
        a = tf.constant([[1., 2, 3], [4, 5, 6]])
        b = tf.constant([[1., 2], [3, 4], [5, 6]])
        with placement.capture() as log:
            with tf.device(s.names[1]):
                c = tf.matmul(a, b)
            print("user output inside the block")

        @tf.function
        def f(x, y):
            with tf.device(s.names[1]):
                z = tf.matmul(x, y)
            return z + 1

        with placement.capture() as log2:
            f(a, b)
        with placement.capture(echo=True) as log3:
            tf.add(a, 1.0)
            inside = log3.counts(source="graph").to_dict()  # usable inside the block
        print("ECHO DONE")
        tf.matmul(b, a)  # outside any block: its placement lines must not be printed
        print(json.dumps({
            "eager": log.table[["op_type", "device"]].values.tolist(),
            "graph": log2.table[["op", "device"]].values.tolist(),
            "counts": log2.counts().to_dict(),
            "matmul_on": log2.device_of("MatMul"),
            "c": c.numpy().tolist(),
            "echoed": log3.text,
        }))
        """
    )
    r = last_json(proc)
    assert r["eager"] == [["MatMul", "CPU:1"]]
    assert ["MatMul", "CPU:1"] in r["graph"] and ["add", "CPU:0"] in r["graph"]
    assert r["counts"]["CPU:1"] == 1 and r["matmul_on"] == ["CPU:1"]
    assert r["c"] == [[22.0, 28.0], [49.0, 64.0]]
    assert "user output inside the block" in proc.stdout
    # Only lines printed before the first capture (TensorFlow's own, raw) may be
    # placement lines; none from after it.
    after = proc.stdout.split("user output inside the block", 1)[1]
    echoed, after = after.split("ECHO DONE", 1)
    assert r["echoed"] and r["echoed"] in echoed  # echo=True shows the raw lines
    assert not any(placement.LINE.match(line) for line in after.splitlines())


def test_capture_refuses_without_logging_and_when_enabled_too_late():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices, placement
        devices.setup(2)
        out = {}
        try:
            with placement.capture():
                pass
        except placement.PlacementLoggingError as err:
            out["off"] = str(err)
        tf.debugging.set_log_device_placement(True)  # after initialisation: ignored
        try:
            with placement.capture():
                pass
        except placement.PlacementLoggingError as err:
            out["late"] = str(err)
        print(json.dumps(out))
        """
    )
    r = last_json(proc)
    assert "log_placement=True" in r["off"]
    assert "after TensorFlow had initialised" in r["late"] and "Restart the kernel" in r["late"]


CELLS = [
    "from dtf import quiet\nquiet.quiet()\nimport tensorflow as tf\n"
    "from dtf import devices, placement\ns = devices.setup(2, log_placement=True)",
    "a = tf.constant([[1., 2, 3], [4, 5, 6]])\nb = tf.constant([[1., 2], [3, 4], [5, 6]])",
    "# NBVAL_CHECK_OUTPUT\nwith placement.capture() as log:\n    with tf.device(s.names[1]):\n"
    "        c = tf.matmul(a, b)\nprint(log.table[['op', 'op_type', 'device', 'source']])",
    "# NBVAL_CHECK_OUTPUT\n@tf.function\ndef f(x):\n    with tf.device(s.names[1]):\n"
    "        y = x * 2\n    return y + 1\n\nwith placement.capture() as log:\n    f(a)\n"
    "print(log.table[['op', 'op_type', 'device', 'source']])",
    "# NBVAL_CHECK_OUTPUT\nprint(c.numpy())",
]


def test_same_rows_in_a_jupyter_kernel_and_under_nbval(tmp_path):
    """Executed like JupyterLab/papermill do (nbclient, descriptor 1 forwarded), then
    re-executed by nbval (a kernel under pytest, descriptor 1 not forwarded): the
    placement tables must be identical."""
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    NotebookClient(nb, timeout=180, kernel_name="python3").execute()
    tables = [c.outputs[-1]["text"] for c in nb.cells[2:4]]
    assert "MatMul" in tables[0] and "CPU:1" in tables[0]
    assert "Mul" in tables[1] and "AddV2" in tables[1]
    path = tmp_path / "placement.ipynb"
    nbformat.write(nb, path)
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(QUIET_ENV)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--rootdir",
            str(tmp_path),
            "-c",
            "/dev/null",
            "--nbval-lax",
            "--nbval-current-env",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "5 passed" in proc.stdout


def test_script_output_is_complete_at_exit():
    """The reader thread is a daemon: without draining at exit a script lost its last
    lines (seen: the final JSON line of a test script)."""
    proc = run_script(
        """
        import tensorflow as tf
        from dtf import devices, placement
        devices.setup(2, log_placement=True)
        placement.start()
        for i in range(3000):
            print("line", i)
        print("END")
        """
    )
    lines = proc.stdout.splitlines()
    assert lines[-1] == "END"
    assert [line for line in lines if line.startswith("line ")] == [
        f"line {i}" for i in range(3000)
    ]
