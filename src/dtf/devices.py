"""Make any machine look like N devices, and list what is there.

Multi-device TensorFlow code needs several devices to show anything. A workshop has
laptops without a GPU, machines with one GPU and the odd multi-GPU box, so
:func:`setup` picks, in this order:

1. ``n`` physical GPUs, when there are at least ``n`` (extra GPUs are hidden);
2. one physical GPU split into ``n`` *logical* GPUs, each with a memory limit;
3. the CPU split into ``n`` *logical* CPUs.

``n`` may be 1 to :data:`MAX_DEVICES` (64; the course uses 1 to 8). Logical devices are
cheap to make, but code that uses them builds one replica per device (measured on 2 CPU
cores: a ``MirroredStrategy`` variable and first step took 0.1 s over 8 logical CPUs and
0.9 s over 64), and a count like 20000 is a typo: it is refused before TensorFlow starts.

TensorFlow fixes its device layout when it initialises (at the first op, or the first
call that lists logical devices), once per process. So :func:`setup` must run before any
other TensorFlow call; running it again with the same request is harmless (re-running a
notebook's Setup cell), and a different request raises :class:`DeviceConfigError` telling
you to restart the kernel.

The plain TensorFlow calls behind it (shown in notebook 00) are
``tf.config.set_logical_device_configuration``, ``tf.config.set_visible_devices`` and
``tf.config.experimental.set_memory_growth``. :func:`setup` also works around a TensorFlow
2.21 stall when a distributed dataset's iterator is deleted (:func:`calm_replica_iterators`).
"""

from __future__ import annotations

from dataclasses import dataclass

from dtf._util import whole_number

KINDS = ("auto", "gpu", "cpu")
#: Most devices :func:`setup` makes (the course needs 1 to 8; see the module docstring).
MAX_DEVICES = 64
#: Smallest and largest memory limit (MiB) of one logical GPU: below 64 MiB nothing useful
#: fits; above 1 TiB the number is surely in the wrong unit (bytes, or KiB).
MIN_GPU_MEMORY_MB = 64
MAX_GPU_MEMORY_MB = 1024 * 1024


class DeviceConfigError(RuntimeError):
    """The requested device layout cannot be had in this process."""


@dataclass(frozen=True)
class Request:
    n: int
    kind: str
    gpu_memory_mb: int
    log_placement: bool

    def __str__(self) -> str:
        return (
            f"setup({self.n}, kind={self.kind!r}, gpu_memory_mb={self.gpu_memory_mb}, "
            f"log_placement={self.log_placement})"
        )


@dataclass(frozen=True)
class DeviceSetup:
    """What :func:`setup` made: ``names`` are the ``n`` devices to use, in order."""

    request: Request
    device_type: str  # "GPU" or "CPU"
    source: str  # "physical GPUs", "logical GPUs on one physical GPU" or "logical CPUs"
    names: tuple[str, ...]

    @property
    def n(self) -> int:
        return len(self.names)

    def __str__(self) -> str:
        return f"{self.n} device(s), {self.source}: {', '.join(self.names)}"


_current: DeviceSetup | None = None


def _validate(n, kind, gpu_memory_mb) -> tuple[int, int]:
    """``(n, gpu_memory_mb)`` as Python ints; raises before anything touches TensorFlow."""
    n = whole_number(
        "n",
        n,
        minimum=1,
        maximum=MAX_DEVICES,
        hint=f"Give the number of devices to make, 1 to {MAX_DEVICES} (the notebooks use 1 to 8).",
    )
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    gpu_memory_mb = whole_number(
        "gpu_memory_mb",
        gpu_memory_mb,
        minimum=MIN_GPU_MEMORY_MB,
        maximum=MAX_GPU_MEMORY_MB,
        hint="Give the memory of each logical GPU in MiB, e.g. 1024 for 1 GiB.",
    )
    return n, gpu_memory_mb


def setup(
    n: int = 2,
    *,
    kind: str = "auto",
    gpu_memory_mb: int = 1024,
    log_placement: bool = False,
) -> DeviceSetup:
    """Configure TensorFlow so that ``n`` devices are available; call before any op.

    ``kind``: ``"auto"`` (GPUs when there are any, else CPUs), ``"gpu"`` (fail when
    there is no GPU) or ``"cpu"`` (logical CPUs even on a GPU machine; GPUs are hidden).
    ``gpu_memory_mb``: memory limit of each logical GPU when one GPU is split.
    ``log_placement``: turn on ``tf.debugging.set_log_device_placement`` now, since
    TensorFlow only honours it before it initialises (see :mod:`dtf.placement`).

    Raises ``TypeError`` (not a whole number) or ``ValueError`` (out of range, unknown
    ``kind``) before TensorFlow is imported, and :class:`DeviceConfigError` when the layout
    cannot be had in this process.
    """
    global _current
    n, gpu_memory_mb = _validate(n, kind, gpu_memory_mb)
    request = Request(n, kind, gpu_memory_mb, bool(log_placement))
    if _current is not None:
        if _current.request == request:
            return _current
        raise DeviceConfigError(
            f"Devices are already configured in this process by {_current.request}. "
            f"TensorFlow cannot change its device layout to {request} once it has "
            "initialised. Restart the kernel, then run the Setup cell with the new values."
        )

    import tensorflow as tf

    _current = _configure(tf, request)
    calm_replica_iterators(tf)
    return _current


def calm_replica_iterators(tf) -> bool:
    """Turn off tf.data autotuning in the per-replica datasets of ``MirroredStrategy``.

    Why: ``experimental_distribute_dataset`` (and ``fit``/``predict`` under a strategy) feed
    each replica through a small dataset of its own (a fixed-size ``prefetch``, 1 by
    default), and TensorFlow starts an autotuning thread for each one, though there is
    nothing to tune (plus one for the input pipeline, which follows that dataset's own
    options). Deleting the iterator must stop those threads. In TensorFlow 2.21 (the code
    reads the same in earlier releases) a thread can miss that wake-up:
    ``CancellationManager::StartCancelWithStatus`` runs the callback that wakes it before it
    marks itself cancelled, so a thread that wakes at once sees "not cancelled" and sleeps
    out its autotuning period (10 ms, doubling each round up to 60 s), while the deletion
    waits for it: on busy cores with 8 logical CPUs, for tens of seconds. This wraps
    TensorFlow's private ``multi_device_iterator_ops._create_device_dataset`` so that each
    per-replica dataset gets ``autotune.enabled = False``; the input dataset keeps its own
    options. Returns whether the wrapper is in place (False where that function is missing:
    another TensorFlow version). Calling it again changes nothing.
    """
    from tensorflow.python.data.ops import multi_device_iterator_ops as mdi

    make = getattr(mdi, "_create_device_dataset", None)
    if make is None:
        return False
    if getattr(make, "calm", False):
        return True

    def calm_device_dataset(*args, **kwargs):
        options = tf.data.Options()
        options.autotune.enabled = False
        return make(*args, **kwargs).with_options(options)

    calm_device_dataset.calm = True  # type: ignore[attr-defined]
    mdi._create_device_dataset = calm_device_dataset
    return True


def _configure(tf, request: Request) -> DeviceSetup:
    """Make the layout ``request`` asks for with the TensorFlow module ``tf`` (passed in so
    that the GPU branches can be tested against a stand-in for ``tf.config``)."""
    n, kind, gpu_memory_mb, log_placement = (
        request.n,
        request.kind,
        request.gpu_memory_mb,
        request.log_placement,
    )
    gpus = tf.config.list_physical_devices("GPU")
    if kind == "gpu" and not gpus:
        raise DeviceConfigError(
            "kind='gpu' was requested but TensorFlow sees no GPU (CPU-only build, no driver, "
            "or CUDA_VISIBLE_DEVICES hides them). Use kind='auto' to fall back to logical CPUs."
        )
    if log_placement:
        tf.debugging.set_log_device_placement(True)
    use_gpu = bool(gpus) and kind != "cpu"
    device_type = "GPU" if use_gpu else "CPU"
    try:
        if use_gpu and len(gpus) >= n:
            tf.config.set_visible_devices(gpus[:n], "GPU")
            for gpu in gpus[:n]:
                # Take GPU memory as needed instead of all of it: several notebooks (and
                # several attendees) can then share a GPU.
                tf.config.experimental.set_memory_growth(gpu, True)
            source = "physical GPUs"
        elif use_gpu:
            tf.config.set_visible_devices(gpus[:1], "GPU")
            config = tf.config.LogicalDeviceConfiguration(memory_limit=gpu_memory_mb)
            tf.config.set_logical_device_configuration(gpus[0], [config] * n)
            source = "logical GPUs on one physical GPU"
        else:
            if gpus:
                tf.config.set_visible_devices([], "GPU")
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * n
            )
            source = "logical CPUs"
    except RuntimeError as err:
        # TensorFlow has initialised already (an op ran before setup). Accept the layout
        # only if it already is the one requested; otherwise say how to recover.
        logical = tf.config.list_logical_devices(device_type)
        if len(logical) != n:
            raise DeviceConfigError(
                f"TensorFlow initialised before devices.setup(n={n}) could configure it "
                f"(it now has {len(logical)} {device_type} device(s)). Restart the kernel and "
                "call setup() in the Setup cell, before any other TensorFlow call."
            ) from err
        source = f"{device_type} devices found already initialised"
    names = tuple(d.name for d in tf.config.list_logical_devices(device_type))[:n]
    return DeviceSetup(request, device_type, source, names)


def current() -> DeviceSetup | None:
    """The layout :func:`setup` made in this process, or None."""
    return _current


def inventory():
    """Physical and logical devices as a pandas DataFrame, one row per device.

    Columns: ``level`` (physical/logical), ``device_type``, ``name``, ``visible``
    (physical devices hidden with ``set_visible_devices`` show False) and ``details``
    (GPU model and compute capability, when TensorFlow reports them).
    Listing logical devices initialises TensorFlow: call it after :func:`setup`.
    """
    import pandas as pd
    import tensorflow as tf

    return pd.DataFrame(_inventory_rows(tf), columns=list(_INVENTORY_COLUMNS))


_INVENTORY_COLUMNS = ("level", "device_type", "name", "visible", "details")


def _gpu_details(info: dict) -> str:
    """``"NVIDIA H100 80GB HBM3 (compute 9.0)"`` from ``get_device_details``' dict; either part
    may be missing (TensorFlow reports what the driver gives it)."""
    cc = info.get("compute_capability")
    return info.get("device_name", "") + (f" (compute {cc[0]}.{cc[1]})" if cc else "")


def _inventory_rows(tf) -> list[dict]:
    """The rows of :func:`inventory`, read from the TensorFlow module ``tf`` (passed in so
    that the GPU branch can be tested against a stand-in for ``tf.config``)."""
    visible = {d.name for d in tf.config.get_visible_devices()}
    rows = []
    for dev in tf.config.list_physical_devices():
        details = ""
        if dev.device_type == "GPU":
            details = _gpu_details(tf.config.experimental.get_device_details(dev))
        rows.append(
            {
                "level": "physical",
                "device_type": dev.device_type,
                "name": dev.name,
                "visible": dev.name in visible,
                "details": details,
            }
        )
    for dev in tf.config.list_logical_devices():
        rows.append(
            {
                "level": "logical",
                "device_type": dev.device_type,
                "name": dev.name,
                "visible": True,
                "details": "",
            }
        )
    return rows


def counts(table=None):
    """Devices per type and level (a small pivot of :func:`inventory`)."""
    table = inventory() if table is None else table
    return (
        table.groupby(["device_type", "level"])
        .size()
        .unstack("level", fill_value=0)
        .reindex(columns=["physical", "logical"], fill_value=0)
    )
