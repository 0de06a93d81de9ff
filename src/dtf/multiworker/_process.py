"""The worker processes: ``python -m dtf.multiworker._process`` (the launcher, POSIX) and
``python -m dtf.multiworker._process --worker`` (one spawned worker).

The launcher is a :func:`dtf.supervise.fork_server`, the same as the cluster's: it imports
TensorFlow, Keras and the digits data once (no op, no server), then forks one worker per
command read from its standard input: ``{"run", "task", "tf_config", "config", "program",
"run_dir", "log", "metadata_ip"}`` from :class:`dtf.multiworker.Launcher`. Its events carry
``run`` and ``task``; between the fork server's ``loaded``, ``forked`` and ``exit`` come the
events a worker emits (:class:`dtf.multiworker.worker.Worker`). At the end of its standard
input it kills its workers with ``SIGKILL`` (``SIGTERM`` would start a preemption save). A
spawned worker reads its command from standard input, whose end of file tells it that the
parent is gone; its standard error is its log from its first byte (the parent opened it).

A worker runs the command's program file with ``runpy``, as ``python PROGRAM`` would. A
program that ends without reporting ``done`` has not trained: the worker reports an error
(``NotDone``) and exits with :data:`~dtf.multiworker.worker.EXIT_ERROR` instead of 0. The
deadline of a run (``TrainConfig.deadline_s``) is enforced by the parent, from outside.

The worker exits as soon as the program ends. Waiting for the other workers first (so that
none leaves while a peer still fetches its share of the last all-reduce) is the program's
own business: notebook 11's program does it at a barrier of the coordination service
(``leave_together`` in :mod:`dtf.lessons.worker_program`), where the learner reads it.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import NoReturn

from dtf import supervise
from dtf._jsonlines import emit
from dtf.multiworker.worker import (
    EXIT_ERROR,
    TrainConfig,
    Worker,
    digits_arrays,
    exit_now,
    set_current,
    short_message,
)

#: The variable ``PreemptionCheckpointHandler`` reads the cloud metadata host from.
METADATA_ENV = "GCE_METADATA_IP"
_STOP_WAIT_S = 5.0


def _emitter(fd: int, run: int, task: int, sent: set[str]):
    def send(event: str, **fields) -> None:
        sent.add(event)
        emit(fd, {"event": event, "run": run, "task": task, "t": time.monotonic(), **fields})

    return send


def _worker_main(command: dict, proto: int) -> NoReturn:
    """Run one worker in this process (forked or spawned): the program file of the command,
    as ``python PROGRAM`` would (``runpy``, ``__name__ == "__main__"``); never returns."""
    code = EXIT_ERROR
    task = int(command["task"])
    sent: set[str] = set()
    emit = _emitter(proto, int(command["run"]), task, sent)
    worker = None
    # A temporary folder of the worker's own, removed on its way out. TensorFlow's autograph
    # writes each function it converts (the program's train step) to a file there and
    # removes the files at interpreter exit, which a worker never reaches (exit_now).
    private = tempfile.mkdtemp(prefix=f"tmp-{task}-", dir=command["run_dir"])
    tempfile.tempdir = private
    try:
        os.environ["TF_CONFIG"] = command["tf_config"]
        os.environ[METADATA_ENV] = command["metadata_ip"]
        config = TrainConfig.from_json(command["config"])
        worker = Worker(config, task, Path(command["run_dir"]), emit)
        set_current(worker)  # what Worker.current() returns in the program
        program = command["program"]
        sys.argv = [program]
        folder = os.path.dirname(program)
        if folder != os.path.dirname(os.path.abspath(__file__)):  # not the package's own
            sys.path.insert(0, folder)  # as `python PROGRAM` does: it may import its neighbours
        runpy.run_path(program, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else EXIT_ERROR)
    except BaseException as exc:
        traceback.print_exc()
        if worker is not None:
            worker.crashed(exc)
        else:
            emit("error", error=type(exc).__name__, message=short_message(exc))
    finally:
        if code == 0 and "done" not in sent:  # it ended, but it did not train: not a success
            message = "the program ended (exit status 0) without reporting 'done'"
            print(f"dtf: worker {task}: {message}", file=sys.stderr, flush=True)
            emit("error", error="NotDone", message=message)
            code = EXIT_ERROR
        shutil.rmtree(private, ignore_errors=True)
        exit_now(code)


def _preload() -> None:
    import keras  # noqa: F401 - imported once here, for every worker
    import tensorflow  # noqa: F401

    digits_arrays()


def _head(command: dict) -> dict:
    return {"run": command["run"], "task": command["task"]}


def _spawned_worker_main() -> None:
    """``python -m dtf.multiworker._process --worker``: one worker, its command on stdin;
    its standard error is already its log (the parent opened it)."""
    command = json.loads(sys.stdin.readline())
    proto = os.dup(1)
    supervise.redirect_output(command["log"], stdin=False)
    supervise.watch_lifeline(0, "the parent")  # end of file on standard input
    _worker_main(command, proto)


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        supervise.run_main(_spawned_worker_main)
    else:
        supervise.run_main(
            lambda: supervise.fork_server(
                _preload,
                _worker_main,
                _head,
                what="the worker launcher",
                stop_signals=(signal.SIGKILL,),  # SIGTERM would start a preemption save
                grace=_STOP_WAIT_S,
            )
        )
