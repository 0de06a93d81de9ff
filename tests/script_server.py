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


_replaced: list = []


def _preload() -> None:
    import tensorflow  # noqa: F401 - imported once, for every child; no op runs here


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
    os.environ.update(command["env"])
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


if __name__ == "__main__":
    from dtf import supervise

    supervise.run_main(
        lambda: supervise.fork_server(_preload, _child, _head, what="the tests' script server")
    )
