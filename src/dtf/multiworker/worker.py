"""The worker's side of a run: what a worker program needs besides TensorFlow. Its
configuration (:class:`TrainConfig`), its link to whoever runs it (:class:`Worker`: events,
saved weights, the pause that lets a notebook provoke a failure at a known step), its exit
statuses and its data (:func:`digits_arrays`).

The worker program itself, the TensorFlow of the lesson, is written by notebook 11
(:mod:`dtf.lessons.worker_program` is generated from its cells). It gets one :class:`Worker`
from :meth:`Worker.current` and uses it for everything that is not training:

- ``worker.config``: the :class:`TrainConfig` of the run, the same for every worker;
- ``worker.emit(event, **fields)``: report what happens (``started``, ``step``, ...), stamped
  with ``time.monotonic()``, one clock for every process of a machine;
- ``worker.report(event, step, model)``: the same, after saving the model's weights to a
  file the notebook compares (``restored``, ``checkpoint``, ``preempted``, ``done``);
- ``worker.failed(event, exc)``: report an exception on one line (Keras ``fit``'s);
- ``worker.maybe_pause(step)``: the failure demonstrations: the worker named by
  ``config.pause_task`` waits after step ``config.pause_after`` until resumed.

Run by :class:`dtf.multiworker.Launcher`, the worker's events go to the launcher; run by
hand (``python program.py`` with ``TF_CONFIG`` set), they are printed as JSON lines, and the
configuration is ``DTF_TRAIN_CONFIG`` (JSON) or the defaults. Nothing here imports
TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from dtf._util import error_line, whole_number

#: Exit status of a worker that stopped after an error it reported (``NotDone`` included:
#: a program that ended without reporting ``done``).
EXIT_ERROR = 1
#: Exit status of a worker that waited longer than ``pause_timeout_s`` while paused.
EXIT_DEADLINE = 3
#: Exit status after ``PreemptionCheckpointHandler`` saved a checkpoint (its default is 42).
EXIT_PREEMPTED = 42
#: The variable a worker run by hand reads its :class:`TrainConfig` from (JSON).
CONFIG_ENV = "DTF_TRAIN_CONFIG"
_TICK_S = 0.02
#: ``(x, y)``, the digits arrays, loaded once (in the launcher: before forking).
_DATA: tuple[Any, Any] | None = None
_CURRENT: Worker | None = None  # set by the process that runs the program for a launcher


@dataclass(frozen=True)
class TrainConfig:
    """What every worker of a run does; the same for all of them (one program).

    ``steps``: the step to train up to (a restored run continues from its checkpoint);
    ``per_worker_batch``: examples per worker and step (the global batch is this times the
    number of workers); ``checkpoint_every``: save with a ``CheckpointManager`` every that
    many steps into ``checkpoint_dir`` (0: never); ``preemption``: use a
    ``PreemptionCheckpointHandler`` on ``checkpoint_dir`` instead; ``pause_task`` /
    ``pause_after``: that worker waits after that step until resumed (``pause_timeout_s`` at
    most); ``try_fit``: first try Keras ``model.fit`` under the strategy; ``deadline_s``: the
    launcher kills (``SIGKILL``) the workers still running that many seconds after the run
    started, from outside, whatever they are stuck in (their ``error`` event: ``Deadline``).
    """

    steps: int = 40
    per_worker_batch: int = 32
    learning_rate: float = 0.1
    seed: int = 42
    checkpoint_dir: str | None = None
    checkpoint_every: int = 0
    preemption: bool = False
    pause_task: int | None = None
    pause_after: int | None = None
    pause_timeout_s: float = 60.0
    try_fit: bool = False
    deadline_s: float = 120.0

    def __post_init__(self) -> None:
        whole_number("steps", self.steps, minimum=1)
        whole_number("per_worker_batch", self.per_worker_batch, minimum=1)
        whole_number("seed", self.seed, minimum=0)
        whole_number("checkpoint_every", self.checkpoint_every, minimum=0)
        for name in ("learning_rate", "pause_timeout_s", "deadline_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(f"{name} must be a number > 0, got {value!r}.")
        if (self.checkpoint_every or self.preemption) and not self.checkpoint_dir:
            raise ValueError("checkpoint_every and preemption need a checkpoint_dir.")
        if self.checkpoint_every and self.preemption:
            raise ValueError(
                "choose checkpoint_every (a CheckpointManager) or preemption (a "
                "PreemptionCheckpointHandler, which manages its own checkpoints), not both."
            )
        if (self.pause_task is None) != (self.pause_after is None):
            raise ValueError("give pause_task and pause_after together.")
        if self.pause_task is not None:
            whole_number("pause_task", self.pause_task, minimum=0)
            whole_number("pause_after", self.pause_after, minimum=1, maximum=self.steps - 1)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> TrainConfig:
        return cls(**json.loads(text))


def digits_arrays() -> tuple[Any, Any]:
    """``(x, y)``: the digits training split as float32 ``(N, 64)`` in [0, 1] and int64,
    loaded once per process (the forking launcher loads them before it forks)."""
    global _DATA
    if _DATA is None:
        from dtf.data import load

        ds = load("digits", flatten=True)
        _DATA = (ds.x_train, ds.y_train)
    return _DATA


class Worker:
    """One worker's link to whoever runs it (see the module docstring)."""

    def __init__(self, config: TrainConfig, task: int, run_dir: Path | None, send) -> None:
        self.config = config
        self.task = task
        self.run_dir = run_dir
        self.step = 0  # the last step reported (or restored): an error is in the next one
        self._send = send

    @classmethod
    def current(cls) -> Worker:
        """The worker this process is: the launcher's, or one run by hand."""
        if _CURRENT is not None:
            return _CURRENT
        text = os.environ.get(CONFIG_ENV)
        config = TrainConfig.from_json(text) if text else TrainConfig()
        task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {}).get("index", 0)

        def send(event: str, **fields) -> None:
            print(json.dumps({"event": event, "task": task, **fields}), flush=True)

        return cls(config, int(task), None, send)

    def emit(self, event: str, **fields) -> None:
        if event in ("step", "restored") and "step" in fields:
            self.step = int(fields["step"])
        self._send(event, **fields)

    def report(self, event: str, step: int, model, **fields) -> None:
        """Save ``model``'s weights (for the notebook to compare), then emit ``event``."""
        weights = None
        if self.run_dir is not None:
            import numpy as np

            name = {"checkpoint": f"checkpoint-{step}", "done": "final"}.get(event, event)
            path = self.run_dir / f"{name}-{self.task}.npz"
            arrays = {f"w{i}": w for i, w in enumerate(model.get_weights())}
            np.savez(path, step=np.int64(step), **arrays)
            weights = path.name
        self.emit(event, step=step, weights=weights, **fields)

    def failed(self, event: str, exc: BaseException) -> None:
        """Report ``exc`` as ``event`` on one line (and in full in the worker's log)."""
        print(f"{event}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        self.emit(event, ok=False, error=type(exc).__name__, message=fit_message(exc))

    def maybe_pause(self, step: int) -> None:
        """Wait here if this is the worker and the step the configuration names, until
        the notebook resumes it (``WorkerRun.resume``), kills, freezes or signals it."""
        config = self.config
        if config.pause_task != self.task or config.pause_after != step:
            return
        go = None if self.run_dir is None else self.run_dir / f"go-{self.task}"
        self.emit("paused", step=step)
        deadline = time.monotonic() + config.pause_timeout_s
        while go is None or not go.exists():
            if time.monotonic() >= deadline:
                message = f"not resumed in {config.pause_timeout_s} s"
                self.emit("error", step=step, error="PauseTimeout", message=message)
                exit_now(EXIT_DEADLINE)
            time.sleep(_TICK_S)
        self.emit("resumed", step=step)

    def crashed(self, exc: BaseException) -> None:
        """Report an exception that ended the program: for a TensorFlow runtime error, the
        lines of its message that say what happened (:func:`error_summary`)."""
        tf = sys.modules.get("tensorflow")
        if tf is not None and isinstance(exc, tf.errors.OpError):
            lines = error_summary(str(exc))
            name = type(exc).__name__
            self.emit("error", step=self.step + 1, error=name, message=lines[0], lines=lines)
        else:
            name, message = type(exc).__name__, short_message(exc)
            self.emit("error", step=self.step + 1, error=name, message=message)


def set_current(worker: Worker | None) -> None:
    """Make ``worker`` the one :meth:`Worker.current` returns (the launcher's side)."""
    global _CURRENT
    _CURRENT = worker


def short_message(exc: BaseException, limit: int = 400) -> str:
    return error_line(exc, limit).split(": ", 1)[-1]


def fit_message(exc: BaseException) -> str:
    """The message of ``exc`` on one line, a ``PerReplica:{...}`` value's repr cut out."""
    text = re.sub(r"\(PerReplica:\{.*?\n\}\)", "(PerReplica:{...})", str(exc), flags=re.S)
    return " ".join(text.split())[:600]


_NODE = re.compile(r"^Detected at node (\S+)")
_NOISE = re.compile(r"^(Graph execution error:|File |\[\[\{\{node |:UNKNOWN:|\{grpc_)")


def error_summary(text: str) -> list[str]:
    """The lines of a TensorFlow runtime error that say what happened.

    TensorFlow's message holds the Python stack where the failing op was defined (file
    paths of this machine), gRPC internals and the op's graph name; kept are the failing
    node, the cause (``Collective ops is aborted by: ...``), the remote task involved and
    TensorFlow's advice.
    """
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        node = _NODE.match(line)
        if node:
            lines.append(f"at node {node[1]}")
        elif line and not _NOISE.match(line):
            lines.append(line[:300])
    return lines or ["(no message)"]


def exit_now(code: int) -> NoReturn:
    """Leave the process at once: never wait on TensorFlow's threads or its shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
