"""The notebooks' GPU-only branches, run against a stand-in for TensorFlow's devices (issue 26).

This machine has no GPU, so the cells that only do something on a GPU machine never ran for
the stored outputs. Here they run from the notebooks' own source, with ``tf`` replaced by
:class:`tests.test_devices.FakeTF` (``tf.config`` with TensorFlow's rules for device
settings, and as many GPUs as the test says), and the child processes they start replaced by
the child's own program run in this process against a stand-in of its own. What is tested
is the branch logic (which GPUs a child sees, which attempt runs, what the cell asserts),
not a GPU: every real GPU path stays "not run here". ``dtf.devices``' GPU branches are
tested the same way in tests/test_devices.py.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pandas as pd
import pytest

from dtf import masking, quiet
from tests.helpers import ROOT, last_json, run_script
from tests.test_devices import FakeTF

NB01 = "01_masking_cuda_visible_devices.ipynb"
NB05 = "05_gpu_memory.ipynb"
NB14 = "14_appendix_tf1_to_tf2.ipynb"
MACHINE = 8  # GPUs of the modelled machine


def source(notebook: str, cell_id: str) -> str:
    nb = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))
    (cell,) = [c for c in nb["cells"] if c.get("id") == cell_id]
    return "".join(cell["source"])


def run_cell(notebook: str, cell_id: str, namespace: dict) -> str:
    """Execute one code cell of a notebook in ``namespace``; return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source(notebook, cell_id), f"{notebook} [{cell_id}]", "exec"), namespace)
    return out.getvalue()


def run_program(script: str, fake_tf: FakeTF, monkeypatch, argv=()) -> str:
    """Run a child's program (a script a notebook passes to ``python -c``) in this process,
    with ``import tensorflow`` giving ``fake_tf``; return what it printed."""
    monkeypatch.setitem(sys.modules, "tensorflow", fake_tf)
    monkeypatch.setattr(sys, "argv", ["-c", *argv])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(script, "<child>", "exec"), {"__name__": "__main__"})
    return out.getvalue()


def fake_device_lib(monkeypatch, fake_tf: FakeTF) -> None:
    """``from tensorflow.python.client import device_lib`` (the TF1 idiom 01's children run):
    one CPU and every GPU the process sees, as TensorFlow's default configuration has."""
    names = ["/device:CPU:0"] + [f"/device:GPU:{i}" for i in range(len(fake_tf.gpus))]
    lib = types.ModuleType("tensorflow.python.client.device_lib")
    lib.list_local_devices = lambda: [types.SimpleNamespace(name=n) for n in names]
    client = types.ModuleType("tensorflow.python.client")
    client.device_lib = lib
    python = types.ModuleType("tensorflow.python")
    python.client = client
    for name, module in [
        ("python", python),
        ("python.client", client),
        ("python.client.device_lib", lib),
    ]:
        monkeypatch.setitem(sys.modules, f"tensorflow.{name}", module)


def machine_child(monkeypatch, started: list, cuda: bool = True):
    """01's ``run_child`` on a modelled machine of ``MACHINE`` GPUs: the child sees the GPUs
    its ``CUDA_VISIBLE_DEVICES`` leaves (``dtf.masking``, NVIDIA's rules), numbered from 0."""

    def run_child(mask, script):
        started.append(mask)
        child_tf = FakeTF(gpus=len(masking.parse_mask(mask, MACHINE)) if cuda else 0, cuda=cuda)
        fake_device_lib(monkeypatch, child_tf)
        if mask is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", mask)
        out = run_program(script, child_tf, monkeypatch)
        return {"mask": mask, **json.loads(out.strip().splitlines()[-1]), "stderr": ""}

    return run_child


# --------------------------------------------------------------------------------------------
# 01: the child that keeps the first GPU


@pytest.mark.parametrize("kernel_mask", [None, "3", "4,5,6,7", "2,0"])
def test_01_the_child_sees_the_kernels_gpus_and_keeps_one(kernel_mask, monkeypatch):
    """The kernel runs masked (or not); its child gets the same mask, so it lists as many
    GPUs as the kernel does, and keeps the first one for TensorFlow."""
    started = []
    kernel = FakeTF(gpus=len(masking.parse_mask(kernel_mask, MACHINE)))
    namespace = {
        "tf": kernel,
        "KERNEL_MASK": kernel_mask,
        "run_child": machine_child(monkeypatch, started),
    }
    printed = run_cell(NB01, "40c459a8", namespace)
    assert started == [kernel_mask]
    kept = namespace["kept"]
    assert kept["logical"] == ["/device:GPU:0"]
    assert len(kept["physical"]) == len(kernel.gpus)
    assert printed.startswith("physical: ['/physical_device:GPU:0'")


def test_01_a_child_started_without_the_kernels_mask_is_caught(monkeypatch):
    """Issue 26's bug: a kernel masked to GPUs 4-7 whose child starts unmasked. The child
    then lists all eight GPUs, and the cell's assertion must say so instead of passing."""
    kernel = FakeTF(gpus=len(masking.parse_mask("4,5,6,7", MACHINE)))
    namespace = {"tf": kernel, "KERNEL_MASK": None, "run_child": machine_child(monkeypatch, [])}
    with pytest.raises(AssertionError) as info:
        run_cell(NB01, "40c459a8", namespace)
    assert len(namespace["kept"]["physical"]) == MACHINE and "physical" in str(info.value)


def test_01_without_a_gpu_no_child_is_started(monkeypatch):
    started = []
    namespace = {
        "tf": FakeTF(gpus=0),
        "KERNEL_MASK": "",
        "run_child": machine_child(monkeypatch, started),
    }
    printed = run_cell(NB01, "40c459a8", namespace)
    assert started == [] and "skipped" in printed


@pytest.mark.parametrize("cuda", [True, False])
def test_01_the_children_table_and_its_checks_on_a_gpu_machine(cuda, monkeypatch):
    """The children of section 3 (unset, "1", "") on an eight-GPU machine with a CUDA build
    of TensorFlow, and on a CPU build: the cells that tabulate and check them pass, with the
    GPU counts the mapping model predicts."""
    namespace = {"os": os, "quiet": quiet, "pd": pd, "masking": masking}
    run_cell(NB01, "4398e8c2", namespace)  # the parameters: CHILD_MASKS
    run_cell(NB01, "7715ade3", namespace)  # LIST_DEVICES, the children's program
    run_child = machine_child(monkeypatch, [], cuda=cuda)
    namespace["results"] = [
        run_child(m, namespace["LIST_DEVICES"]) for m in namespace["CHILD_MASKS"]
    ]
    run_cell(NB01, "5cc6cd86", namespace)
    run_cell(NB01, "1cbf333d", namespace)  # its asserts hold
    counts = namespace["children"]["GPUs"].tolist()
    expected = [
        len(masking.parse_mask(m, MACHINE)) if cuda else 0 for m in namespace["CHILD_MASKS"]
    ]
    assert counts == expected
    assert namespace["n_gpus_unset"] == (MACHINE if cuda else 0)


# --------------------------------------------------------------------------------------------
# 05: the GPU memory settings and the GPU-only errors


def test_05_configure_gpu_memory_sets_growth_or_a_cap_on_every_gpu():
    tf = FakeTF(gpus=2)
    namespace = {"tf": tf, "GPUS": tf.gpus}
    run_cell(NB05, "650fbe3f", namespace)
    namespace["configure_gpu_memory"](tf.gpus)
    assert tf.growth == {gpu: True for gpu in tf.gpus}
    tf.constant(1.0)  # the same growth everywhere: initialises

    capped = FakeTF(gpus=2)
    namespace["tf"] = capped
    namespace["configure_gpu_memory"](capped.gpus, limit_mib=2048)
    assert list(capped.virtual.values()) == [[capped.config.LogicalDeviceConfiguration(2048)]] * 2
    assert not capped.growth


class FakeSubprocess:
    """``subprocess`` for 05's GPU cells: ``run`` executes the child's program against a
    fresh stand-in with ``gpus`` GPUs (the child inherits the kernel's GPUs)."""

    def __init__(self, gpus: int, monkeypatch, tf_class=FakeTF) -> None:
        self.gpus, self.monkeypatch, self.tf_class, self.ran = gpus, monkeypatch, tf_class, []

    def run(self, command, capture_output, text, timeout):
        assert capture_output and text and timeout  # every wait has a limit
        _, flag, script, *argv = command
        assert flag == "-c"
        self.ran.append(argv[0])
        out = run_program(script, self.tf_class(gpus=self.gpus), self.monkeypatch, argv)
        return subprocess.CompletedProcess(command, 0, out, "")


def run_05_gpu_cells(gpus: int, monkeypatch, tf_class=FakeTF):
    fake = FakeSubprocess(gpus, monkeypatch, tf_class)
    kernel = FakeTF(gpus=gpus)
    namespace = {"GPUS": kernel.gpus, "subprocess": fake, "sys": sys, "json": json}
    run_cell(NB05, "ba18dcc0", namespace)
    printed = run_cell(NB05, "05-gpu-attempts", namespace)
    return fake.ran, printed, namespace


@pytest.mark.parametrize(
    "gpus, ran",
    [
        (0, []),
        (1, ["growth, then a split"]),
        (2, ["growth on one GPU of two", "growth, then a split"]),
        (4, ["growth on one GPU of two", "growth, then a split"]),
    ],
)
def test_05_each_gpu_attempt_runs_where_it_can_and_holds(gpus, ran, monkeypatch):
    """Growth on one GPU of two fails at the first op; growth before a split is accepted and
    gives two logical GPUs; each attempt runs when the process has the GPUs it needs, in a
    child of its own, and says "not run here" otherwise."""
    started, printed, namespace = run_05_gpu_cells(gpus, monkeypatch)
    assert started == ran
    for name in namespace["GPU_ATTEMPTS"]:
        line = next(line for line in printed.splitlines() if line.startswith(name + ":"))
        assert ("not run here" in line) == (name not in ran), line
    if "growth on one GPU of two" in ran:
        assert "ValueError, Memory growth cannot differ between GPU devices" in printed


class GrowthNotChecked(FakeTF):
    """A TensorFlow that let differing memory growth pass (not 2.21's behaviour)."""

    def _initialise(self) -> None:
        self.initialised = True


def test_05_the_cells_assertion_fails_when_tensorflow_behaves_otherwise(monkeypatch):
    with pytest.raises(AssertionError, match="growth on one GPU of two"):
        run_05_gpu_cells(2, monkeypatch, tf_class=GrowthNotChecked)


def test_the_stand_in_raises_tensorflows_own_messages():
    """The messages of the stand-in, and the one 05 expects from a GPU, are in the installed
    TensorFlow's context.py (read, not imported)."""
    spec = importlib.util.find_spec("tensorflow")
    context = Path(spec.submodule_search_locations[0], "python", "eager", "context.py")
    text = context.read_text(encoding="utf-8")
    for message in (FakeTF.GROWTH_DIFFERS, FakeTF.GROWTH_ON_CPU, FakeTF.GROWTH_WITH_SPLIT):
        assert f'"{message}"' in text, message
    namespace: dict = {}
    run_cell(NB05, "ba18dcc0", namespace)
    (_, (error, start)), _ = namespace["GPU_ATTEMPTS"].values()
    assert error == "ValueError" and start in text


# --------------------------------------------------------------------------------------------
# 14: a TF1 session with the devices of each layout


@pytest.mark.slow
def test_14_tf1_config_describes_each_layout_and_a_real_session_gets_it():
    """``tf1_config`` with the real ``ConfigProto`` for the three layouts of devices.setup
    (the GPU ones built by hand: no GPU here), then a real TF1 session on three logical CPUs
    that has all three, so that ``DEVICES[-1]`` exists in it."""
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices
        exec(CELL)

        def layout(n, kind, where, memory=1024):
            request = devices.Request(n, "auto", memory, False)
            names = tuple(f"/device:{kind}:{i}" for i in range(n))
            return devices.DeviceSetup(request, kind, where, names)

        out = {}
        for label, setup in [
            ("cpu", layout(3, "CPU", "logical CPUs")),
            ("split", layout(2, "GPU", "logical GPUs on one physical GPU", memory=512)),
            ("physical", layout(4, "GPU", "physical GPUs")),
        ]:
            c = tf1_config(setup, log_device_placement=True)
            split = c.gpu_options.experimental.virtual_devices
            out[label] = {
                "cpu": c.device_count.get("CPU"),
                "visible": c.gpu_options.visible_device_list,
                "limits": [list(v.memory_limit_mb) for v in split],
                "growth": c.gpu_options.allow_growth,
                "log": c.log_device_placement,
            }
        real = devices.setup(3)
        graph = tf.Graph()
        with graph.as_default(), tf.compat.v1.Session(graph=graph, config=tf1_config(real)) as s:
            out["session"] = [d.name.split("device:")[-1] for d in s.list_devices()]
        print(json.dumps(out))
        """.replace("CELL", repr(source(NB14, "13-05b"))),
        forked=True,
    )
    r = last_json(proc)
    assert r["cpu"] == {"cpu": 3, "visible": "", "limits": [], "growth": False, "log": True}
    assert r["split"] == {
        "cpu": None,
        "visible": "0",
        "limits": [[512.0, 512.0]],
        "growth": False,
        "log": True,
    }
    assert r["physical"] == {
        "cpu": None,
        "visible": "0,1,2,3",
        "limits": [],
        "growth": True,
        "log": True,
    }
    assert r["session"] == ["CPU:0", "CPU:1", "CPU:2"]
