"""A fork server for the tests' TensorFlow scripts (``run_script(..., forked=True)``).

Importing TensorFlow costs a fresh process ~4 CPU-s, and ``make check`` is CPU-bound. The
scripts that test device layouts need a process whose TensorFlow has not *initialised*, not
one that has never imported it: TensorFlow fixes its devices at the first op, not at the
import. So this process imports TensorFlow once, runs no op, and forks a child per script
with :func:`dtf.supervise.fork_server`, the zygote the course's launchers run. A child runs
its script as ``python -c`` would: ``__main__`` of its own, ``sys.argv == ["-c"]``, the
working directory, arguments and environment the test asked for, standard output to its own
file (or FIFO), standard error to its log, standard input from a FIFO if it names one, then
its non-daemon threads joined and its exit handlers run, and the script's exit status. Unlike
``python -c``, it ends with ``os._exit`` (no interpreter finalisation), and the test reads its
output when it exits, not when every process holding its output has closed it.

What a forked script cannot test is what TensorFlow reads when it is imported (its log
level, oneDNN, Keras' backend) or whether a module imports TensorFlow: those scripts run in
a fresh process (``forked=False``, the default), and so does any script whose environment
differs from this process's in a variable read at import (:data:`IMPORT_TIME`).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import tempfile
import threading
import traceback
import types

#: Environment variables that TensorFlow, Keras, JAX or Python read when they are imported
#: (prefixes): a script that sets one differently gets a fresh process.
IMPORT_TIME = ("TF_", "GRPC_", "KERAS_", "JAX_", "XLA_", "CUDA_", "PYTHON", "OMP_", "MKL", "LD_")
IMPORT_TIME += ("MPL", "MATPLOTLIB")  # Matplotlib's backend, configuration and cache folder


_replaced: list = []
#: What TensorFlow's import added to the environment (``TF2_BEHAVIOR``, ``TPU_ML_PLATFORM``
#: ...): a child keeps it, as its own import would have set it.
_SET_AT_IMPORT: dict = {}


def _preload() -> None:
    before = dict(os.environ)
    import tensorflow  # noqa: F401 - imported once, for every child; no op runs here

    _SET_AT_IMPORT.update({k: v for k, v in os.environ.items() if k not in before})


def _head(command: dict) -> dict | None:
    return {"id": command["id"]} if "code" in command else None


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)  # sys.exit("message"), as Python prints it
    return 1


def _child(command: dict, proto: int) -> int:
    os.close(proto)  # the script's output is its own, never the protocol
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C: KeyboardInterrupt
    os.chdir(command["cwd"])
    os.environ.clear()
    os.environ.update({**_SET_AT_IMPORT, **command["env"]})
    tempfile.tempdir = None  # found again from this environment's TMPDIR
    sys.path[0] = ""  # python -c: the working directory
    sys.stdout.flush()
    _replaced.append(sys.stdout)  # kept: collected, it would close descriptor 1
    out = os.open(command["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(out, 1)
    os.close(out)
    sys.stdout = os.fdopen(1, "w", closefd=False)  # block-buffered, as `python -c` to a file
    if command.get("stdin"):  # a FIFO the test writes to (opened after stdout: see helpers)
        fd = os.open(command["stdin"], os.O_RDONLY)
        os.dup2(fd, 0)
        os.close(fd)
        sys.stdin = os.fdopen(0, "r", closefd=False)
    sys.argv = ["-c", *command.get("argv", [])]
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    try:
        exec(compile(command["code"], "<string>", "exec"), main.__dict__)
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc)
    except BaseException:
        traceback.print_exc()
        status = 1
    threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as at exit
    atexit._run_exitfuncs()  # what Python runs at the end of `python -c`
    for stream in (sys.__stdout__, sys.__stderr__):
        if stream is not None:
            stream.flush()
    return status


def kernel_main() -> None:
    """A Jupyter kernel in a forked child (tests/forked_kernel.py): what ``python -m
    ipykernel_launcher -f FILE`` runs, then what TensorFlow's import does only when it runs
    inside IPython, which this process's import did not see (TensorFlow 2.21):

    - ``logging_ops`` sends the eager "Executing op" placement lines to ``sys.stdout``;
    - ``tf_logging`` logs at INFO to ``sys.stdout`` (not to the server's ``stderr``): its
      logger is made again at its first use (a fresh kernel makes it at the import, after
      the Setup cell's ``quiet()``, and so ends at INFO either way);
    - AutoGraph echoes its log to ``sys.stdout``;
    - pandas shows at most 20 columns (its default where it cannot measure a terminal);
    - Matplotlib draws with the backend ipykernel names in ``MPLBACKEND`` (read at import).

    The working directory leaves ``sys.path`` while ipykernel loads (IPython puts it back).
    A fresh process seeds NumPy's global generator anew; a forked one would share the
    server's. ``SIGUSR1`` writes every thread's Python stack to the kernel's log
    (:func:`tests.forked_kernel.stacks`: what a cell that timed out was doing)."""
    import faulthandler
    import logging

    import numpy

    os.setsid()  # a session leader, as Jupyter starts a kernel: signals reach its group
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    del sys.path[0]
    numpy.random.seed()
    from ipykernel import kernelapp

    app = kernelapp.IPKernelApp.instance()
    app.initialize()  # sys.stdout is the kernel's stream from here on
    from tensorflow.python.autograph.utils import ag_logging
    from tensorflow.python.ops import logging_ops
    from tensorflow.python.platform import tf_logging

    logging_ops.enable_interactive_logging()
    ag_logging.echo_log_to_stdout = hasattr(sys, "ps1") or hasattr(sys, "ps2")
    if tf_logging._logger is not None:  # made at the import, for a process without IPython
        tf_logging._logger.handlers.clear()
        tf_logging._logger.setLevel(logging.NOTSET)
        tf_logging._logger = None  # made again at its first use, as in a kernel
    _replay_pandas_and_matplotlib()
    app.start()


def _replay_pandas_and_matplotlib() -> None:
    import matplotlib
    import pandas
    from matplotlib import pyplot
    from pandas._config import config

    key = "display.max_columns"
    columns = 20  # pandas 2.x's default when it is imported in a kernel's cell (config_init.py)
    config._registered_options[key] = config._registered_options[key]._replace(defval=columns)
    pandas.set_option(key, columns)
    # pyplot loads its backend at the first figure, from rcParams: set what matplotlib's
    # import reads from the environment (matplotlib.use() would load the inline backend now,
    # before it is the current one, and inline display would stay off).
    assert pyplot._backend_mod is None, "the server chose a Matplotlib backend"
    if os.environ.get("MPLBACKEND"):
        matplotlib.rcParams["backend"] = os.environ["MPLBACKEND"]


if __name__ == "__main__":
    from dtf import supervise

    supervise.run_main(
        lambda: supervise.fork_server(_preload, _child, _head, what="the tests' script server")
    )
