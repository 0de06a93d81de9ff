"""Tests for ``dtf.devices``.

TensorFlow fixes its device layout once per process, so what needs the real TensorFlow
runs in fresh processes (``run_script``, ~4 s each). The GPU branches of :func:`setup` and
:func:`inventory` cannot run on this CPU-only machine: their logic is tested in-process
against :class:`FakeTF`, a stand-in for the part of ``tf.config`` they use, which follows
TensorFlow's own rules (``tensorflow/python/eager/context.py``: a setter that changes nothing
is allowed after initialisation, one that changes something raises ``RuntimeError``; memory
growth that differs between visible GPUs fails at initialisation unless a GPU is split).
tests/test_gpu_branches.py runs the notebooks' GPU-only cells against it too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import pytest

from dtf import devices
from tests.helpers import last_json, run_script

# --------------------------------------------------------------------------------------------
# A stand-in for tf.config


@dataclass(frozen=True)
class Device:
    name: str
    device_type: str


@dataclass(frozen=True)
class LogicalDeviceConfiguration:
    memory_limit: int | None = None
    experimental_priority: int | None = None
    experimental_device_ordinal: int | None = None


class _Namespace:
    def __init__(self, **attrs) -> None:
        self.__dict__.update(attrs)


class FakeTF:
    """``tf`` with ``gpus`` physical GPUs and one CPU. ``calls`` records every call that
    configures something, in order; ``initialised=True`` behaves like TensorFlow after its
    first op (the layout is the default one: every GPU visible, one device each).
    ``details`` is what ``get_device_details`` reports for each GPU; ``cuda`` is what
    ``tf.test.is_built_with_cuda()`` says."""

    #: Attribute paths of the real TensorFlow this fake stands in for (checked against the
    #: real module in a subprocess, so the fake cannot drift from the API).
    API = (
        "config.list_physical_devices",
        "config.list_logical_devices",
        "config.get_visible_devices",
        "config.set_visible_devices",
        "config.set_logical_device_configuration",
        "config.LogicalDeviceConfiguration",
        "config.experimental.set_memory_growth",
        "config.experimental.get_device_details",
        "debugging.set_log_device_placement",
        "test.is_built_with_cuda",
        "constant",
    )
    #: Attributes of ``tf`` itself (the rest of the API lives in namespaces).
    TOP_LEVEL = ("constant",)
    #: TensorFlow's messages that the stand-in raises; each is checked against the installed
    #: ``context.py`` (tests/test_gpu_branches.py), so that the stand-in cannot drift.
    GROWTH_DIFFERS = "Memory growth cannot differ between GPU devices"
    GROWTH_ON_CPU = "Cannot set memory growth on non-GPU and non-Pluggable devices"
    GROWTH_WITH_SPLIT = "Cannot set memory growth on device when virtual devices configured"

    def __init__(
        self,
        gpus: int = 0,
        initialised: bool = False,
        details: dict | None = None,
        cuda: bool = True,
    ) -> None:
        self.cpu = Device("/physical_device:CPU:0", "CPU")
        self.gpus = [Device(f"/physical_device:GPU:{i}", "GPU") for i in range(gpus)]
        self.initialised = initialised
        self.visible = list(self.gpus)
        self.growth: dict[Device, bool] = {}
        self.virtual: dict[Device, list] = {}
        self.log_placement = False
        self.details = dict(details or {})
        self.calls: list[tuple] = []
        self.config = _Namespace(
            list_physical_devices=self.list_physical_devices,
            list_logical_devices=self.list_logical_devices,
            get_visible_devices=self.get_visible_devices,
            set_visible_devices=self.set_visible_devices,
            set_logical_device_configuration=self.set_logical_device_configuration,
            LogicalDeviceConfiguration=LogicalDeviceConfiguration,
            experimental=_Namespace(
                set_memory_growth=self.set_memory_growth,
                get_device_details=self.get_device_details,
            ),
        )
        self.debugging = _Namespace(set_log_device_placement=self.set_log_device_placement)
        self.test = _Namespace(is_built_with_cuda=lambda: cuda)

    def list_physical_devices(self, device_type=None):
        return [d for d in [self.cpu, *self.gpus] if device_type in (None, d.device_type)]

    def _initialise(self) -> None:
        """What TensorFlow checks when it initialises (``context.py``,
        ``_compute_device_options``): memory growth must be the same on every visible GPU,
        unless a GPU is split, in which case growth is ignored."""
        if self.initialised:
            return
        split = bool(self.virtual) and bool(self.visible)
        if not split and len({self.growth.get(d) for d in self.visible}) > 1:
            raise ValueError(self.GROWTH_DIFFERS)
        self.initialised = True

    def constant(self, value):
        self._initialise()  # as in TensorFlow: the first op initialises
        return value

    def get_visible_devices(self, device_type=None):
        return [d for d in [self.cpu, *self.visible] if device_type in (None, d.device_type)]

    def get_device_details(self, device):
        return dict(self.details) if device.device_type == "GPU" else {}

    def list_logical_devices(self, device_type=None):
        self._initialise()  # as in TensorFlow: listing logical devices initialises
        names = []
        for kind, physical in (("CPU", [self.cpu]), ("GPU", self.visible)):
            if device_type in (None, kind):
                count = sum(len(self.virtual.get(d, [None])) for d in physical)
                names += [Device(f"/device:{kind}:{i}", kind) for i in range(count)]
        return names

    def _change(self, what: str, same: bool) -> bool:
        if same:
            return False
        if self.initialised:
            raise RuntimeError(f"{what} cannot be modified after being initialized")
        return True

    def set_visible_devices(self, devices_, device_type=None):
        self.calls.append(("set_visible_devices", [d.name for d in devices_], device_type))
        if self._change("Visible devices", list(devices_) == self.visible):
            self.visible = list(devices_)

    def set_memory_growth(self, device, enable):
        self.calls.append(("set_memory_growth", device.name, enable))
        if device in self.virtual:
            raise ValueError(self.GROWTH_WITH_SPLIT)
        if device.device_type != "GPU":
            raise ValueError(self.GROWTH_ON_CPU)
        if self._change("Physical devices", self.growth.get(device) == enable):
            self.growth[device] = enable

    def set_logical_device_configuration(self, device, logical_devices):
        self.calls.append(("set_logical_device_configuration", device.name, list(logical_devices)))
        if self._change("Virtual devices", self.virtual.get(device) == list(logical_devices)):
            self.virtual[device] = list(logical_devices)

    def set_log_device_placement(self, enabled):
        self.calls.append(("set_log_device_placement", enabled))
        self.log_placement = enabled


def _exposed(namespace, prefix: str):
    for name, value in vars(namespace).items():
        if isinstance(value, _Namespace):
            yield from _exposed(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def test_the_stand_in_exposes_exactly_its_api():
    """Every tf-like attribute path of the stand-in is in FakeTF.API, which
    test_setup_makes_exactly_n_devices checks against the real TensorFlow."""
    fake = FakeTF(gpus=1)
    top = {name: v for name, v in vars(fake).items() if isinstance(v, _Namespace)}
    assert set(top) == {"config", "debugging", "test"}
    exposed = [path for name, v in top.items() for path in _exposed(v, f"{name}.")]
    assert all(callable(getattr(fake, name)) for name in FakeTF.TOP_LEVEL)
    assert sorted(exposed + list(FakeTF.TOP_LEVEL)) == sorted(FakeTF.API)


def configure(tf: FakeTF, n: int, **kwargs) -> devices.DeviceSetup:
    args = {"kind": "auto", "gpu_memory_mb": 1024, "log_placement": False, **kwargs}
    return devices._configure(tf, devices.Request(n, **args))


def gpu(i: int) -> str:
    return f"/physical_device:GPU:{i}"


# --------------------------------------------------------------------------------------------
# The branches of setup, against the stand-in


@pytest.mark.parametrize("physical, n", [(4, 2), (2, 2), (8, 8)])
def test_enough_gpus_hides_the_extra_ones_and_grows_memory(physical, n):
    tf = FakeTF(gpus=physical)
    s = configure(tf, n)
    assert (s.device_type, s.source) == ("GPU", "physical GPUs")
    assert s.names == tuple(f"/device:GPU:{i}" for i in range(n))
    assert tf.calls == [
        ("set_visible_devices", [gpu(i) for i in range(n)], "GPU"),
        *[("set_memory_growth", gpu(i), True) for i in range(n)],
    ]
    assert not tf.virtual  # no GPU is split


@pytest.mark.parametrize("physical, n, memory", [(1, 3, 1024), (2, 4, 512), (1, 1 + 1, 64)])
def test_fewer_gpus_splits_one_into_logical_gpus(physical, n, memory):
    tf = FakeTF(gpus=physical)
    s = configure(tf, n, gpu_memory_mb=memory)
    assert (s.device_type, s.source) == ("GPU", "logical GPUs on one physical GPU")
    assert s.names == tuple(f"/device:GPU:{i}" for i in range(n))
    assert tf.calls == [
        ("set_visible_devices", [gpu(0)], "GPU"),
        (
            "set_logical_device_configuration",
            gpu(0),
            [LogicalDeviceConfiguration(memory_limit=memory)] * n,
        ),
    ]
    assert not tf.growth  # memory growth and memory limits do not mix


@pytest.mark.parametrize("physical", [0, 2])
def test_cpu_kind_hides_gpus_and_splits_the_cpu(physical):
    tf = FakeTF(gpus=physical)
    s = configure(tf, 3, kind="cpu")
    assert (s.device_type, s.source) == ("CPU", "logical CPUs")
    assert s.names == ("/device:CPU:0", "/device:CPU:1", "/device:CPU:2")
    hide = [("set_visible_devices", [], "GPU")] if physical else []
    assert tf.calls == [
        *hide,
        (
            "set_logical_device_configuration",
            "/physical_device:CPU:0",
            [LogicalDeviceConfiguration()] * 3,
        ),
    ]
    assert tf.visible == []


def test_auto_without_gpus_splits_the_cpu():
    tf = FakeTF(gpus=0)
    s = configure(tf, 2)
    assert (s.device_type, s.names) == ("CPU", ("/device:CPU:0", "/device:CPU:1"))
    assert [c[0] for c in tf.calls] == ["set_logical_device_configuration"]


def test_gpu_kind_without_a_gpu_raises_before_configuring_anything():
    tf = FakeTF(gpus=0)
    with pytest.raises(devices.DeviceConfigError, match="sees no GPU.*kind='auto'"):
        configure(tf, 2, kind="gpu", log_placement=True)
    assert tf.calls == []


def test_gpu_kind_with_gpus_uses_them():
    tf = FakeTF(gpus=1)
    s = configure(tf, 2, kind="gpu")
    assert s.source == "logical GPUs on one physical GPU" and s.n == 2


def test_log_placement_is_turned_on_before_the_layout_is_fixed():
    tf = FakeTF(gpus=2)
    configure(tf, 2, log_placement=True)
    assert tf.calls[0] == ("set_log_device_placement", True)
    assert tf.log_placement


@pytest.mark.parametrize(
    "physical, n, kind, accepted",
    [
        (0, 3, "auto", False),  # one CPU already: cannot become three
        (0, 1, "auto", True),  # one CPU already: that is what was asked
        (2, 2, "auto", True),  # both GPUs visible already, growth cannot be changed
        (2, 1, "auto", False),  # cannot hide a GPU any more: two GPUs, not one
        (1, 4, "auto", False),  # cannot split the GPU any more
        (2, 1, "cpu", True),  # GPUs cannot be hidden, but there is one CPU as asked
    ],
)
def test_after_initialisation_only_the_current_layout_is_accepted(physical, n, kind, accepted):
    tf = FakeTF(gpus=physical, initialised=True)
    if accepted:
        s = configure(tf, n, kind=kind)
        assert s.n == n and s.source.endswith("found already initialised")
    else:
        with pytest.raises(devices.DeviceConfigError, match="Restart the kernel") as info:
            configure(tf, n, kind=kind)
        assert isinstance(info.value.__cause__, RuntimeError)
        assert f"setup(n={n})" in str(info.value)


def test_setup_uses_the_tensorflow_module_and_keeps_its_layout(monkeypatch):
    """setup() itself, wired to the stand-in: NumPy integers are whole numbers, the layout is
    made once, the same request again returns it, another one is refused."""
    tf = FakeTF(gpus=1)
    monkeypatch.setitem(sys.modules, "tensorflow", tf)
    monkeypatch.setattr(devices, "_current", None)
    calmed = []  # the real workaround needs the real TensorFlow (tests/test_strategy.py)
    monkeypatch.setattr(devices, "calm_replica_iterators", calmed.append)
    s = devices.setup(np.int64(2), gpu_memory_mb=np.int32(256))
    assert calmed == [tf]
    assert s.request.n == 2 and type(s.request.n) is int
    assert s.request.gpu_memory_mb == 256 and type(s.request.gpu_memory_mb) is int
    assert s.names == ("/device:GPU:0", "/device:GPU:1") and devices.current() is s
    calls = len(tf.calls)
    assert devices.setup(2, gpu_memory_mb=256) is s and len(tf.calls) == calls
    with pytest.raises(devices.DeviceConfigError, match="Restart the kernel"):
        devices.setup(3)


# --------------------------------------------------------------------------------------------
# The GPU branch of inventory, against the stand-in


H100 = {"device_name": "NVIDIA H100 80GB HBM3", "compute_capability": (9, 0)}


def test_inventory_names_each_gpu_and_marks_the_hidden_ones():
    """On a machine with three GPUs where setup(2) kept two: one row per physical device
    (the hidden GPU marked not visible, each GPU with its model and compute capability),
    then one per logical device."""
    tf = FakeTF(gpus=3, details=H100)
    configure(tf, 2)
    rows = devices._inventory_rows(tf)
    physical = [r for r in rows if r["level"] == "physical"]
    assert [(r["name"], r["visible"]) for r in physical] == [
        ("/physical_device:CPU:0", True),
        (gpu(0), True),
        (gpu(1), True),
        (gpu(2), False),
    ]
    assert [r["details"] for r in physical] == [""] + ["NVIDIA H100 80GB HBM3 (compute 9.0)"] * 3
    logical = [r["name"] for r in rows if r["level"] == "logical"]
    assert logical == ["/device:CPU:0", "/device:GPU:0", "/device:GPU:1"]


@pytest.mark.parametrize(
    "details, shown",
    [
        ({"device_name": "Tesla T4", "compute_capability": (7, 5)}, "Tesla T4 (compute 7.5)"),
        ({"device_name": "AMD Instinct MI300X"}, "AMD Instinct MI300X"),  # no CUDA capability
        ({}, ""),  # the driver reported nothing
    ],
)
def test_inventory_shows_what_the_driver_reports(details, shown):
    tf = FakeTF(gpus=1, details=details)
    configure(tf, 2)  # one GPU split into two logical GPUs
    rows = devices._inventory_rows(tf)
    assert [r["details"] for r in rows if r["device_type"] == "GPU"] == [shown, "", ""]
    assert sum(r["level"] == "logical" and r["device_type"] == "GPU" for r in rows) == 2


# --------------------------------------------------------------------------------------------
# Bad requests: refused before TensorFlow is touched


class Untouchable:
    """Put in place of the ``tensorflow`` module: any use of it fails the test."""

    def __getattr__(self, name):
        if name.startswith("__"):  # the import system's look-ups (__spec__, ...)
            raise AttributeError(name)
        pytest.fail(f"setup() used tensorflow.{name} before refusing a bad request")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"n": 0}, ValueError, "n must be at least 1"),
        ({"n": -2}, ValueError, "n must be at least 1"),
        ({"n": 20000}, ValueError, "n must be at most 64, got 20000"),
        ({"n": np.int64(65)}, ValueError, "n must be at most 64"),
        ({"n": 2.5}, TypeError, "n must be a whole number"),
        ({"n": 2.0}, TypeError, "n must be a whole number"),
        ({"n": True}, TypeError, "n must be a whole number"),
        ({"n": "2"}, TypeError, "n must be a whole number"),
        ({"n": 2, "kind": "tpu"}, ValueError, "kind must be one of"),
        ({"n": 2, "gpu_memory_mb": 10}, ValueError, "gpu_memory_mb must be at least 64"),
        ({"n": 2, "gpu_memory_mb": 2**31}, ValueError, "gpu_memory_mb must be at most"),
        ({"n": 2, "gpu_memory_mb": 1024.0}, TypeError, "gpu_memory_mb must be a whole number"),
        ({"n": 2, "gpu_memory_mb": False}, TypeError, "gpu_memory_mb must be a whole number"),
    ],
)
def test_bad_requests_are_refused_before_tensorflow_starts(monkeypatch, kwargs, error, message):
    monkeypatch.setitem(sys.modules, "tensorflow", Untouchable())
    monkeypatch.setattr(devices, "_current", None)
    with pytest.raises(error, match=message) as info:
        devices.setup(**kwargs)
    if message.startswith("n "):
        assert "1 to 64" in str(info.value)  # says what to give instead


# --------------------------------------------------------------------------------------------
# The real TensorFlow, in fresh processes


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 3, 8])
def test_setup_makes_exactly_n_devices(n):
    """A setup that ignored n (or made another number and cut the list) is caught: the count
    TensorFlow reports must be n, and every device must compute. Also checks that the
    stand-in above names only what the real TensorFlow has."""
    proc = run_script(
        f"""
        import functools, json
        import numpy as np
        import tensorflow as tf
        from dtf import devices
        s = devices.setup(np.int64({n}))
        outs = []
        for name in s.names:
            with tf.device(name):
                outs.append(tf.reduce_sum(tf.ones([2, 2])).device.split("device:")[-1])
        def has(path):
            try:
                functools.reduce(getattr, path.split("."), tf)
                return True
            except AttributeError:
                return False
        print(json.dumps({{
            "names": list(s.names), "n": s.n, "request_n": s.request.n,
            "logical": [d.name for d in tf.config.list_logical_devices("CPU")],
            "outs": outs, "missing_api": [p for p in {list(FakeTF.API)!r} if not has(p)],
        }}))
        """,
        forked=True,
    )
    r = last_json(proc)
    expected = [f"/device:CPU:{i}" for i in range(n)]
    assert r["logical"] == expected and r["names"] == expected
    assert r["n"] == r["request_n"] == n
    assert r["outs"] == [f"CPU:{i}" for i in range(n)]
    assert r["missing_api"] == []


@pytest.mark.slow
def test_four_logical_cpus_inventory_and_repeat():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices
        s = devices.setup(4)
        again = devices.setup(4)
        table = devices.inventory()
        counts = devices.counts(table)
        try:
            devices.setup(2)
            refused = ""
        except devices.DeviceConfigError as err:
            refused = str(err)
        # every logical device really computes
        outs = []
        for name in s.names:
            with tf.device(name):
                outs.append(tf.reduce_sum(tf.ones([3, 3])).device)
        print(json.dumps({
            "names": list(s.names), "type": s.device_type, "source": s.source,
            "same": again is s, "physical_cpu": int(counts.loc["CPU", "physical"]),
            "logical_cpu": int(counts.loc["CPU", "logical"]), "refused": refused,
            "levels": sorted(set(table.level)), "outs": outs,
            "current": devices.current() is s,
        }))
        """,
        forked=True,
    )
    r = last_json(proc)
    assert r["names"] == [f"/device:CPU:{i}" for i in range(4)]
    assert (r["type"], r["source"]) == ("CPU", "logical CPUs")
    assert r["same"] and r["current"]
    assert (r["physical_cpu"], r["logical_cpu"]) == (1, 4)
    assert r["levels"] == ["logical", "physical"]
    assert "Restart the kernel" in r["refused"] and "setup(2" in r["refused"]
    assert [o.split("device:")[-1] for o in r["outs"]] == [f"CPU:{i}" for i in range(4)]


@pytest.mark.slow
def test_setup_after_tensorflow_initialised():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices
        tf.ones([1]) + 1  # an op before setup: TensorFlow initialises with 1 CPU
        try:
            devices.setup(3)
            msg = ""
        except devices.DeviceConfigError as err:
            msg = str(err)
        print(json.dumps({"msg": msg}))
        """,
        forked=True,
    )
    msg = last_json(proc)["msg"]
    assert "initialised before devices.setup(n=3)" in msg and "Restart the kernel" in msg


@pytest.mark.slow
def test_one_device_after_initialisation_is_accepted_and_gpu_request_fails_clearly():
    proc = run_script(
        """
        import json
        import tensorflow as tf
        from dtf import devices
        try:
            devices.setup(2, kind="gpu")
            gpu_msg = ""
        except devices.DeviceConfigError as err:
            gpu_msg = str(err)
        tf.ones([1]) + 1
        s = devices.setup(1)  # the layout TensorFlow already has: fine
        print(json.dumps({"gpu_msg": gpu_msg, "names": list(s.names)}))
        """,
        forked=True,
    )
    r = last_json(proc)
    assert "sees no GPU" in r["gpu_msg"] and "kind='auto'" in r["gpu_msg"]
    assert r["names"] == ["/device:CPU:0"]
