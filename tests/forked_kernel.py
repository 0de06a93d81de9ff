"""Notebook kernels forked from the tests' script server, which imported TensorFlow once.

Each kernel that ``make check`` starts (nbval's run of a tutorial, a lab's run through
tests/labrun.py) would spend seconds of CPU importing TensorFlow, and ``make check`` is
CPU-bound. A kernel only needs TensorFlow *uninitialised* (devices are fixed at the first
op, not at the import), so these kernels are forked from tests/script_server.py instead:
the child runs what ``python -m ipykernel_launcher -f CONNECTION_FILE`` runs, in the
notebook's folder, with the environment Jupyter gave it plus ``quiet()``'s settings (its
TensorFlow was imported under them, as a lesson's Setup cell imports it). TensorFlow,
pandas and Matplotlib decide a few things at import by whether they run in IPython; the
child replays those decisions (:func:`tests.script_server.kernel_main`), and
tests/test_forked_kernel.py compares a forked kernel with a fresh one.

Jupyter manages such a kernel through :class:`ForkedProvisioner`: its process is the script
server's child, so signals (an interrupt, a kill) go through the server, which sends them
only to a child it has not reaped.

A notebook runs in a fresh kernel, as in JupyterLab, when it sets a variable that is read at
import (:data:`tests.script_server.IMPORT_TIME`: notebook 05's allocator setting, notebook
15's Keras backend), when it asks ``quiet()`` for another log level (08's ``quiet(3)``), or
when ``DTF_FRESH_KERNELS=1`` is set: ``DTF_FRESH_KERNELS=1 make check`` starts every kernel
as JupyterLab does. ``make run`` always does.
"""

from __future__ import annotations

import os
import re
import signal
import time
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import KernelProvisionerFactory, LocalProvisioner

from tests.helpers import FORKED_ENV, SCRIPT_SERVER
from tests.script_server import IMPORT_TIME

PROVISIONER = "dtf-forked-kernel"
#: Set to 1 to start every notebook's kernel fresh, as JupyterLab does.
FRESH_ENV = "DTF_FRESH_KERNELS"
#: The child's code: ipykernel's launcher, and what TensorFlow's import does in IPython.
KERNEL_CODE = "from tests.script_server import kernel_main\nkernel_main()\n"
#: Python's own buffering of its standard streams: a kernel replaces them, so a kernel
#: forked from a server started without ``PYTHONUNBUFFERED`` (tools.nbtools sets it) is fine.
NOT_READ_BY_A_KERNEL = ("PYTHONUNBUFFERED",)
_PREFIXES = "(?:" + "|".join(re.escape(prefix) for prefix in IMPORT_TIME) + ")"
#: ``os.environ[...] =``, ``.setdefault``, ``.update``, ``|=``, ``os.putenv``, ``%env``.
_SETS_IMPORT_TIME = re.compile(
    r"os\.environ(?:\[\s*|\.setdefault\(\s*|\.update\(\s*(?:\{|dict\()?\s*|\s*\|=\s*\{\s*)"
    rf"[\"']?{_PREFIXES}|os\.putenv\(\s*[\"']{_PREFIXES}|^\s*%(?:set_)?env\s+{_PREFIXES}",
    re.MULTILINE,
)
#: ``quiet.quiet(LEVEL)`` with a level other than the server's (2, the default).
_OTHER_QUIET_LEVEL = re.compile(r"quiet\.quiet\((?!\s*\)|\s*(?:level\s*=\s*)?2\s*\))")
#: How long a forked kernel may take to write its stacks to its log (:func:`stacks`).
STACKS_TIMEOUT_S = 5.0
#: The heading of those stacks in a timed-out cell's report or error.
STACKS_TITLE = "the kernel's threads when the cell timed out"


def forkable(nb: Any) -> bool:
    """Whether the notebook ``nb`` (nbformat or JSON) may run in a forked kernel: it sets
    no variable read at import, outside the files its ``%%writefile`` cells write, and
    asks ``quiet()`` for the log level the server's TensorFlow was imported with."""
    if os.environ.get(FRESH_ENV) == "1":
        return False
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or source.startswith("%%writefile"):
            continue
        if _SETS_IMPORT_TIME.search(source) or _OTHER_QUIET_LEVEL.search(source):
            return False
    return True


class _ForkedProcess:
    """The part of :class:`subprocess.Popen` that :class:`LocalProvisioner` uses, for the
    script server's child ``n``."""

    stdin = stdout = stderr = None

    def __init__(self, n: int) -> None:
        self.n = n
        self.pid = None  # not for os.kill: only the server may signal its child
        self.server = SCRIPT_SERVER.popen  # the server that forked it
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                if SCRIPT_SERVER.popen is not self.server:
                    raise RuntimeError("the server that forked this kernel ended")
                self.returncode = SCRIPT_SERVER.wait(self.n, 0)
            except RuntimeError:  # the server ended, and its children with it
                self.returncode = -signal.SIGKILL
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        return self.poll()  # LocalProvisioner.wait calls it once poll() has a status

    def send_signal(self, sig: int) -> None:
        """To the kernel's process group, as Jupyter signals a kernel it started (a kernel
        is a session leader: interrupts and kills reach what its cells started too)."""
        if self.poll() is None:
            SCRIPT_SERVER.kill(self.n, sig, group=True)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class ForkedProvisioner(LocalProvisioner):
    """Jupyter's local provisioner, but the kernel is forked by the script server (a fresh
    process where the server cannot serve the kernel's environment)."""

    async def launch_kernel(self, cmd: list[str], **kwargs: Any):
        module = cmd.index("ipykernel_launcher")  # [python, -m, ipykernel_launcher, -f, FILE]
        env = {**FORKED_ENV, **kwargs["env"]}
        if not SCRIPT_SERVER.serves(env, ignore=NOT_READ_BY_A_KERNEL):
            return await super().launch_kernel(cmd, **kwargs)
        cwd = Path(kwargs.get("cwd") or Path.cwd())
        n = SCRIPT_SERVER.spawn(KERNEL_CODE, env, tuple(cmd[module + 1 :]), cwd=cwd)
        self.process = _ForkedProcess(n)  # type: ignore[assignment]
        self.pid, self.pgid, self.cwd = None, None, cwd
        return self.connection_info


def stacks(km: Any) -> str:
    """Every thread's Python stack in ``km``'s kernel, as ``faulthandler`` writes them when
    the kernel gets ``SIGUSR1`` (:func:`tests.script_server.kernel_main`); "" for a kernel
    that was not forked (it has no such handler: the signal would end it) or has ended."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    if not isinstance(process, _ForkedProcess) or process.poll() is not None:
        return ""
    assert SCRIPT_SERVER.folder is not None
    log = SCRIPT_SERVER.folder / f"{process.n}.log"

    def size() -> int:
        return log.stat().st_size if log.exists() else 0

    start = last = size()
    SCRIPT_SERVER.kill(process.n, signal.SIGUSR1)
    deadline = time.monotonic() + STACKS_TIMEOUT_S
    while time.monotonic() < deadline:
        time.sleep(0.2)  # polls the log: faulthandler writes it from a signal handler
        now = size()
        if now > start and now == last:  # written, and no longer growing
            break
        last = now
    with log.open("rb") as file:
        file.seek(start)
        return file.read().decode("utf-8", errors="replace")


def stacks_on_nbclient_timeout() -> None:
    """A cell that times out under nbclient (:func:`tools.nbrun.execute`: the lab runs of
    tests/labrun.py) raises ``CellTimeoutError`` with its forked kernel's thread stacks in
    the message, taken before the kernel is stopped, as nbval's reports get them."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError

    parent = NotebookClient._async_handle_timeout
    if getattr(parent, "with_stacks", False):
        return

    async def handle_timeout(self, timeout, cell=None):
        dump = stacks(self.km)
        try:
            return await parent(self, timeout, cell)
        except CellTimeoutError as exc:
            if not dump:
                raise
            raise CellTimeoutError(f"{exc}\n\n{STACKS_TITLE}:\n{dump}") from None

    handle_timeout.with_stacks = True  # type: ignore[attr-defined]
    NotebookClient._async_handle_timeout = handle_timeout  # type: ignore[method-assign]


def forked_spec() -> KernelSpec:
    """This environment's Python kernel (ipykernel's own spec), started by
    :class:`ForkedProvisioner`."""
    import ipykernel.kernelspec

    spec = ipykernel.kernelspec.get_kernel_dict()
    spec["metadata"] = {
        **spec.get("metadata", {}),
        "kernel_provisioner": {"provisioner_name": PROVISIONER, "config": {}},
    }
    _register()
    return KernelSpec(resource_dir=ipykernel.kernelspec.RESOURCES, **spec)


def _register() -> None:
    """Make :data:`PROVISIONER` known to Jupyter, as an installed entry point would."""
    KernelProvisionerFactory.provisioners[PROVISIONER] = EntryPoint(
        PROVISIONER, f"{__name__}:ForkedProvisioner", KernelProvisionerFactory.GROUP_NAME
    )


class ForkedSpecs(KernelSpecManager):
    """Kernel specs whose ``python3`` kernel is forked."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return forked_spec() if kernel_name == "python3" else super().get_kernel_spec(kernel_name)


class ForkedKernelManager(AsyncKernelManager):
    """nbclient's kernel manager (asynchronous, so that its cell timeouts and its checks
    that the kernel lives keep working) for :func:`tools.nbrun.execute`, with
    :class:`ForkedSpecs`."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("kernel_spec_manager", ForkedSpecs())
        super().__init__(**kwargs)


def use_in_nbval() -> None:
    """nbval's kernel for the current environment is forked, for each notebook that
    :func:`forkable` allows (called from tests/conftest.py when nbval is loaded)."""
    from nbval import kernel, plugin

    chosen: list[bool] = []
    parent_spec = kernel.NbvalKernelspecManager.get_kernel_spec
    parent_setup = plugin.IPyNbFile.setup

    def get_kernel_spec(self, kernel_name):
        if kernel_name == kernel.CURRENT_ENV_KERNEL_NAME and chosen and chosen[-1]:
            return forked_spec()
        return parent_spec(self, kernel_name)

    def setup(self):
        chosen.append(forkable(self.nb))
        try:
            parent_setup(self)
        finally:
            chosen.pop()

    parent_interrupt = kernel.RunningKernel.interrupt

    def interrupt(self):  # nbval interrupts only a kernel whose cell timed out
        self.stacks_at_timeout = stacks(self.km)  # shown in the report (tests/conftest.py)
        parent_interrupt(self)

    kernel.NbvalKernelspecManager.get_kernel_spec = get_kernel_spec
    plugin.IPyNbFile.setup = setup
    kernel.RunningKernel.interrupt = interrupt
