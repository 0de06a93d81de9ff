"""Checkers of Lab 06 · Surviving a killed worker (``labs/06_fault_tolerance_lab.ipynb``).

Tasks: 1 each worker's ``CheckpointManager`` and its restore, 2 who failed and how fast the
others noticed (made-up runs, then a real one whose chief the checker kills), 3 the stream of
global batches from the first one not trained yet, 4 the supervisor that restarts every
worker, a bounded number of times. Verdicts hold no measured time, so that they repeat.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import numpy as np

from dtf._util import error_line, is_whole_number, whole_number
from dtf.checks._shared import expect_weights, numbered_labels
from dtf.checks.core import (
    Mistake,
    Wrong,
    all_close,
    call_function,
    counted,
    diagnose,
    expect_kind,
    expect_number,
    listed,
    numbered,
    short,
    task,
)

LAB = "lab06"

#: Task 1: the example addresses of the clusters whose ``TF_CONFIG`` the function receives.
EXAMPLE_HOST = "127.0.0.1"
#: Task 2: the real run: its steps, and the step after which the checker kills the chief.
KILL_STEPS, KILL_AFTER = 8, 3
#: Task 2: the time a survivor of a killed peer should take to notice it (measured: ~0.1 s).
DETECT_WITHIN_S = 5.0
#: Task 2: tolerance on the learner's seconds (they are differences of the same stamps).
TIME_ATOL = 1e-6
#: Task 2: the made-up runs' kill happened this long before the check.
MADE_UP_AGO_S = 100.0
#: Task 3: numbered examples of the batch-by-batch comparison, and batches compared.
STREAM_EXAMPLES = 300
STREAM_BATCHES = 3
#: Task 3: (global batch, restored step) compared besides the lab's own; 7 × 48 crosses an
#: epoch of :data:`STREAM_EXAMPLES`, so a stream that drops the end of each epoch differs.
STREAM_CASES = ((48, 7), (32, 0))
#: Task 3: examples read at most to recognise a stream that skipped ``restored_step ×
#: global_batch`` batches.
FAR_EXAMPLES = 2_000_000
#: Task 3: resumed training must end this close to an uninterrupted run (bit for bit on CPU).
RESUME_ATOL = 1e-6
#: Task 4: restarts the supervisor may make when one worker is killed once.
MAX_RESTARTS = 2
#: Task 4: the workers' final weights versus one process trained on the same global batches
#: (measured: ~2e-7, float32 round-off of the all-reduce's sum).
WEIGHT_TOL = 1e-5
#: Task 4, second case: the restarts allowed when every run ends with a worker killed (the
#: same crash again and again). Made-up runs: only the supervisor's counting is checked there.
CRASH_LOOP_RESTARTS = 1


def _states(results: Mapping[int, Any]) -> str:
    return "; ".join(f"worker {t} {r.status}" for t, r in results.items())


def _workers(tasks) -> str:
    return listed([f"worker {t}" for t in sorted(tasks)]) or "none"


# --------------------------------------------------------------------------- task 1


def clusters(num_workers: int) -> list[tuple[str, dict | None]]:
    """Task 1's clusters, ``(description, cluster)``: the lab's workers, a cluster with a
    ``chief`` job and 2 workers, and one process alone (no ``TF_CONFIG``: ``None``)."""
    n = whole_number("num_workers", num_workers, minimum=1)
    return [
        (
            f"the lab's cluster of {counted(n, 'worker')}",
            {"worker": [f"{EXAMPLE_HOST}:{2222 + i}" for i in range(n)]},
        ),
        (
            "a cluster with a 'chief' job and 2 workers",
            {
                "chief": [f"{EXAMPLE_HOST}:3333"],
                "worker": [f"{EXAMPLE_HOST}:{p}" for p in (3334, 3335)],
            },
        ),
        ("one process without TF_CONFIG", None),
    ]


def chief_of(cluster: Mapping[str, list] | None) -> tuple[str, int] | None:
    """TensorFlow's rule (``multi_worker_util.is_chief``): the task of the ``chief`` job if
    the cluster has one, otherwise worker 0; ``None`` for a process without a cluster."""
    if cluster is None:
        return None
    return ("chief", 0) if "chief" in cluster else ("worker", 0)


def _label(task_: tuple[str, int] | None) -> str:
    return "the process" if task_ is None else f"{task_[0]} {task_[1]}"


def _shown(path: str, base: str) -> str:
    """``path`` as the learner wrote it relative to the ``base`` it received."""
    if path == base:
        return "base"
    root = os.path.dirname(os.path.dirname(base))  # the checker's temporary folder
    if path.startswith(root + os.sep):  # built from base: shown so, the same every time
        return "base/" + os.path.relpath(path, base).replace(os.sep, "/")
    return repr(path)


#: Why task 1 has every task save, each into a folder of its own (issue 18).
_WHY_EVERY_TASK_SAVES_HINT = (
    "Every task saves, because saving may run collective ops (of mirrored variables) that "
    "need every worker to take part; each into a folder of its own, because tasks that "
    "write the same folder overwrite each other's files; and only the chief's folder, "
    "base, is the real one, restored after a restart"
)


def _manager(answer: Any, base: str, cluster: dict | None, t: Any, where: str):
    """``(checkpoint, manager, folder)``: the learner's ``CheckpointManager`` of a fresh
    checkpoint for task ``t`` of ``cluster``, and its folder (normalised)."""
    import tensorflow as tf

    checkpoint = tf.train.Checkpoint(task=tf.Variable(-1, dtype=tf.int64))  # -1: nobody's
    text = (
        None
        if t is None
        else json.dumps({"cluster": cluster, "task": {"type": t[0], "index": t[1]}})
    )
    hint = (
        "with no TF_CONFIG (tf_config is None) the process is alone, and its own chief: its "
        "manager saves into base"
        if t is None
        else "tf_config is JSON text: its task says who this process is, its cluster who the "
        "others are"
    )
    # Only errors of reading tf_config get its hint; any other error keeps the general one.
    reading = (
        r"JSONDecodeError|NoneType|JSON object must be str|KeyError: '(cluster|task|type|index)'"
    )
    got = call_function(answer, checkpoint, base, text, hints=((reading, hint),), where=where[4:])
    if got is None:
        raise Wrong(
            f"{where}: expected a tf.train.CheckpointManager, got None",
            "every task needs a manager, not only the chief. " + _WHY_EVERY_TASK_SAVES_HINT,
        )
    if not isinstance(got, tf.train.CheckpointManager):
        folder = isinstance(got, str | os.PathLike)
        shown = (
            f"the folder {_shown(os.path.normpath(os.fspath(got)), base)}" if folder else short(got)
        )
        raise Wrong(
            f"{where}: expected a tf.train.CheckpointManager, got {shown}",
            "every task gets a tf.train.CheckpointManager of its checkpoint, not a folder",
        )
    if got.checkpoint is not checkpoint:
        raise Wrong(
            f"{where}: your manager manages another checkpoint than the one the function received",
            "the manager saves and restores the checkpoint it is given: the worker's own",
        )
    path = os.fspath(got.directory)
    if not os.path.isabs(path):
        raise Wrong(
            f"{where}: its folder {path!r} is a relative path, which TensorFlow would resolve "
            "against whatever folder the worker happens to run in",
            "every folder is base, or a folder inside it",
        )
    return checkpoint, got, os.path.normpath(path)


def _check_folders(folders: dict, base: str, what: str, cluster: dict | None) -> None:
    """The rule: the chief's folder is ``base``, every other task's its own, inside it."""
    chief = chief_of(cluster)
    if folders[chief] != base:
        raise Wrong(
            f"for {what}: the chief, {_label(chief)}, would save into "
            f"{_shown(folders[chief], base)}, not the real folder: a restarted job restores "
            "from the real folder, so it would never find the chief's checkpoints",
            "the chief's manager saves into base: "
            + (
                "a process without TF_CONFIG is its own chief"
                if cluster is None
                else "the chief is the task of the 'chief' job if the cluster has one, "
                "otherwise worker 0"
            ),
        )
    seen: dict[str, tuple] = {}
    for t, folder in folders.items():
        if t == chief:
            continue
        if folder == base and cluster is not None and "chief" in cluster and t == ("worker", 0):
            raise Wrong(
                f"for {what}: worker 0 would save into the real folder too, beside the chief "
                "(chief 0): two processes writing the same checkpoint files",
                "worker 0 is the chief only in a cluster without a 'chief' job (TensorFlow's "
                "rule): your test of who is the chief missed this cluster's 'chief' job",
            )
        if folder == base:
            raise Wrong(
                f"for {what}: {_label(t)} would save into the real folder too: every worker "
                "saves (saving may run collective ops), so the workers would write the same "
                "files at once and overwrite each other's",
                "every task but the chief saves into a folder of its own, inside base",
            )
        if not folder.startswith(base + os.sep):
            raise Wrong(
                f"for {what}: {_label(t)} would save into {_shown(folder, base)}, outside base",
                "keep the other workers' folders inside base: the run's checkpoints stay in "
                "one place and go away together",
            )
        if folder in seen:
            raise Wrong(
                f"for {what}: {_label(seen[folder])} and {_label(t)} would both save into "
                f"{_shown(folder, base)}, and overwrite each other's files",
                "what tells two tasks apart belongs in the folder's name. "
                + _WHY_EVERY_TASK_SAVES_HINT,
            )
        seen[folder] = t


def _start(answer: Any, base: str, what: str, cluster: dict | None, again: str = "") -> dict:
    """``{task: (checkpoint, manager, folder)}`` for every task of ``cluster``."""
    tasks = (
        [None] if cluster is None else [(j, i) for j, a in cluster.items() for i in range(len(a))]
    )
    return {
        t: _manager(
            answer,
            base,
            cluster,
            t,
            f"for {what if t is None else f'{_label(t)} of {what}'}{again}",
        )
        for t in tasks
    }


def _save_everywhere(started: dict, chief: Any, base: str, what: str) -> list:
    """Every task saves a checkpoint holding its number, the chief first, as every worker
    does; then the real folder must hold the chief's. Returns the order."""
    import tensorflow as tf

    order = [chief] + [t for t in started if t != chief]
    for number, t in enumerate(order):
        checkpoint, manager, folder = started[t]
        checkpoint.task.assign(number)
        try:
            manager.save()
        except (tf.errors.OpError, OSError) as exc:
            raise Wrong(
                f"for {what}: {_label(t)}'s manager could not save into {_shown(folder, base)} "
                f"({error_line(exc)})",
                "saving failed in a folder the rules allow: look at how you made that manager",
            ) from None
    latest = tf.train.latest_checkpoint(base)
    holds = latest and int(tf.train.load_variable(latest, "task/.ATTRIBUTES/VARIABLE_VALUE"))
    if holds != 0:
        raise Wrong(
            f"for {what}: after every task saved, the real folder holds the checkpoint of "
            f"{'nobody' if latest is None else _label(order[holds])}, not the chief's",
            "the chief's manager saves into base, every other task's into a folder of its own",
        )
    return order


def _check_restored(started: dict, order: list, what: str) -> None:
    """Started again, every task's checkpoint must hold the chief's (0), restored from base."""
    for t, (checkpoint, _, _) in started.items():
        got = int(checkpoint.task.numpy())
        if got == -1:
            raise Wrong(
                f"for {what}, started again: {_label(t)} restored nothing, though the real "
                "folder holds the chief's checkpoint",
                "when make_manager returns, checkpoint must hold the latest checkpoint of the "
                "real folder: TensorFlow can tell you its path",
            )
        if got != 0:
            raise Wrong(
                f"for {what}, started again: {_label(t)} restored the checkpoint of "
                f"{_label(order[got])} (its own folder's), not the chief's",
                "every task restores the chief's checkpoint, the latest of base: a manager's "
                "latest_checkpoint is that of its own folder",
            )


@task(LAB, 1)
def task1(answer: Any, num_workers: int) -> str:
    """``make_manager(checkpoint, base, tf_config) -> tf.train.CheckpointManager``, for every
    task of :func:`clusters`: the folders, then every task saves (chief first) and the real
    folder holds the chief's, then every task started again restores it."""
    n = whole_number("num_workers", num_workers, minimum=1)
    saves = 0
    with tempfile.TemporaryDirectory(prefix="dtf-lab06-") as tmp:
        for k, (what, cluster) in enumerate(clusters(n)):
            base = os.path.join(os.path.realpath(tmp), f"case-{k}", "checkpoints")
            os.makedirs(base)
            started = _start(answer, base, what, cluster)
            if any(int(s[0].task.numpy()) != -1 for s in started.values()):
                raise Wrong(
                    f"for {what}: a checkpoint changed although base held no checkpoint",
                    "your function restored something although there was nothing to restore: "
                    "look at what it restores when base is empty",
                )
            _check_folders({t: s[2] for t, s in started.items()}, base, what, cluster)
            order = _save_everywhere(started, chief_of(cluster), base, what)
            _check_restored(_start(answer, base, what, cluster, ", started again"), order, what)
            saves += len(started)
    return (
        f"for the lab's {counted(n, 'worker')}, a cluster with a 'chief' job and a process "
        "alone, the chief's manager saves into base and every other task's into a folder of "
        f"its own inside it; all {saves} tasks saved, each base then held its chief's "
        "checkpoint, and started again every task restored it"
    )


# --------------------------------------------------------------------------- task 2


def made_up_results(
    num_workers: int, killed: tuple[int, ...], delays: Mapping[int, float], killed_at: float
) -> dict:
    """Results like a launcher's: the ``killed`` workers ended by ``SIGKILL`` after step 5;
    every other worker reported ``UnavailableError`` ``delays[task]`` s after ``killed_at``
    and exited with code 1."""
    from dtf.multiworker import WorkerResult

    lines = ["at node sgd/CollectiveReduceV2", "Collective ops is aborted by: Socket closed"]
    results = {}
    for t in range(num_workers):
        events = [
            dict(
                event="started",
                t=killed_at - 4.0,
                replicas=num_workers,
                global_batch=32 * num_workers,
            ),
            *(
                dict(event="step", t=killed_at - 1 + 0.02 * s, step=s, loss=2.3 - 0.1 * s)
                for s in range(1, 6)
            ),
        ]
        if t not in killed:
            error = dict(error="UnavailableError", message=lines[0], lines=lines)
            events.append(dict(event="error", t=killed_at + delays[t], step=6, **error))
        events = [{"run": 1, "task": t, **e} for e in events]
        results[t] = WorkerResult(t, -9 if t in killed else 1, events)
    return results


def truth(results: Mapping[int, Any], killed_at: float) -> tuple[list[int], dict[int, float]]:
    """What :func:`task2` expects: the workers ended by a signal, and the seconds from
    ``killed_at`` to the error of every other worker that reported one."""
    failed = sorted(t for t, r in results.items() if r.returncode is not None and r.returncode < 0)
    noticed = {
        t: r.error["t"] - killed_at
        for t, r in results.items()
        if t not in failed and r.error is not None
    }
    return failed, noticed


def _as_tasks(value: Any, what: str) -> list[int]:
    if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
        raise Wrong(
            f"for {what}: expected the failed workers as a list of task numbers, "
            f"got {short(value)}",
            "failed is a list of task numbers: several workers can fail together",
        )
    if not all(is_whole_number(t) for t in value):
        raise Wrong(
            f"for {what}: expected task numbers in the failed list, got {short(list(value))}",
            "list the keys of results (task numbers) whose worker failed",
        )
    return sorted(int(t) for t in value)


#: Task 2: the known wrong ``failed`` lists, over the facts of :func:`_compare_diagnosis`.
FAILED_MISTAKES = (
    Mistake(
        lambda failed, errored, **_: failed == errored,
        "for {what}: you named {named}, the workers that reported an error: a worker that "
        "reports an error noticed the failure, it did not cause it",
        "a killed process reports nothing: how each worker ended shows in its result's returncode",
    ),
    Mistake(
        lambda failed, nonzero, **_: failed == nonzero,
        "for {what}: you named {named}, but {noticers} exited with code 1 after reporting "
        "UnavailableError: they noticed the failure, they did not cause it",
        "a worker ended by a signal has an exit status of its own: look at each result's "
        "returncode",
    ),
    Mistake(
        lambda unknown, **_: unknown,
        "for {what}: your failed list {failed} names {unknown}, not a task of results",
        "failed lists keys of results",
    ),
    Mistake(
        lambda extra, **_: extra,
        "for {what}: your failed list {failed} names a worker that reported an error",
        "a worker that reports an error noticed the failure: what does each result's "
        "returncode say?",
    ),
    Mistake(
        lambda missing, **_: missing,
        "for {what}: your failed list {failed} leaves out a worker that reported no error",
        "a worker that reported no error was ended by a signal: what does each result's "
        "returncode say?",
    ),
    Mistake(
        lambda **_: True,
        "for {what}: your failed list {failed} names a worker more than once",
        "one entry for each worker that failed",
    ),
)
#: Task 2: the known wrong ``noticed`` dicts, then seconds, over the same facts.
NOTICED_MISTAKES = (
    Mistake(
        lambda dead, **_: dead,
        "for {what}: noticed has an entry for {dead}, which was killed and noticed nothing",
        "only the workers that reported an error noticed the failure",
    ),
    Mistake(
        lambda unknown, **_: unknown,
        "for {what}: noticed has an entry for {unknown}, not a task number of results",
        "noticed is keyed by the task numbers of results",
    ),
    Mistake(
        lambda missing, **_: missing,
        "for {what}: your noticed, with entries for {named}, leaves out a worker that reported "
        "an error",
        "one entry for every worker that reported an error, the failed ones left out",
    ),
    Mistake(
        lambda **_: True,
        "for {what}: your noticed, with entries for {named}, is not one entry for each worker "
        "that reported an error",
        "one entry for every worker that reported an error, the failed ones left out",
    ),
)
SECONDS_MISTAKES = (
    Mistake(
        lambda value, want, killed_at, **_: abs(value - (want + killed_at)) <= 1e-3,
        "{who}: you returned the stamp of its error, a reading of time.monotonic(), not the "
        "seconds since the kill",
        "the task asks for seconds from the kill, not a moment",
    ),
    Mistake(
        lambda value, **_: value > 1e8,
        "{who}: you returned a number the size of a time.time() reading; the events and "
        "killed_at come from time.monotonic(), another clock",
        "use the stamps you are given, of one clock: the error event's and the kill's",
    ),
    Mistake(
        lambda value, want, **_: want > 0 and abs(value - 1000 * want) <= 1e-3,
        "{who}: you returned {value:.4f}, a time in milliseconds",
        "the task asks for seconds",
    ),
    Mistake(
        lambda value, after, **_: after - 1e-3 <= value <= after + 10,
        "{who}: you measured up to when your function ran (about {after:.0f} s after the kill "
        "here), not up to the worker's error",
        "the moment a worker noticed is stamped in its error event",
    ),
    Mistake(
        lambda **_: True,
        "{who}: you returned {value:.4f} s, which is not the time from the kill to its error",
        "from the kill to the worker's error: look at which stamps you subtract",
    ),
)


def _compare_diagnosis(
    got: Any, results: Mapping[int, Any], killed_at: float, called_at: float, what: str
) -> None:
    want_failed, want_noticed = truth(results, killed_at)
    expect_kind(got, (tuple, list), "a pair (failed, noticed)", size=2, what=what)
    failed = _as_tasks(got[0], what)
    if failed != want_failed:
        errored = sorted(t for t, r in results.items() if r.error is not None)
        unknown = [t for t in failed if t not in results]
        diagnose(
            FAILED_MISTAKES,
            what=what, failed=failed, errored=errored,
            nonzero=sorted(t for t, r in results.items() if r.returncode != 0),
            named=_workers(failed), noticers=_workers(errored),
            unknown=listed([str(t) for t in unknown]),
            extra=[t for t in failed if t in results and t not in want_failed],
            missing=[t for t in want_failed if t not in failed],
        )  # fmt: skip
    noticed = dict(expect_kind(got[1], Mapping, "noticed as a dict {task: seconds}", what=what))
    keys = sorted(int(k) if isinstance(k, (int, np.integer)) else k for k in noticed)
    want_keys = sorted(want_noticed)
    if keys != want_keys:
        dead = [k for k in keys if k in want_failed]
        unknown = [k for k in keys if k not in want_keys and k not in want_failed]
        diagnose(
            NOTICED_MISTAKES,
            what=what, dead=_workers(dead) if dead else "",
            unknown=listed([repr(k) for k in unknown]), named=_workers(keys) if keys else "none",
            missing=[t for t in want_keys if t not in keys],
        )  # fmt: skip
    for t in want_keys:
        value = expect_number(
            noticed[t], f"for {what}: noticed[{t}] is {short(noticed[t])}, not a number of seconds"
        )
        if abs(value - want_noticed[t]) > TIME_ATOL:
            diagnose(
                SECONDS_MISTAKES,
                who=f"for worker {t} of {what}", value=value, want=want_noticed[t],
                killed_at=killed_at, after=called_at - killed_at,
            )  # fmt: skip


#: Task 2's made-up runs: (description, workers, killed, seconds each survivor took).
MADE_UP = (
    ("a made-up run of 3 workers whose chief was killed", 3, (0,), {1: 0.031, 2: 0.047}),
    (
        "a made-up run of 4 workers, of which workers 1 and 2 were killed",
        4,
        (1, 2),
        {0: 0.012, 3: 0.208},
    ),
)


def _real_kill(launcher: Any, num_workers: int, timeout: float):
    """``(results, killed_at)`` of a real run whose chief the checker kills after step
    :data:`KILL_AFTER`."""
    from dtf.multiworker import TrainConfig

    run = launcher.run(
        TrainConfig(steps=KILL_STEPS, pause_task=0, pause_after=KILL_AFTER), num_workers
    )
    try:
        run.wait_for("paused", 0, timeout=timeout)
        killed_at = run.kill(0)
        results = run.wait(timeout=timeout)
    finally:
        if run.running:
            run.stop()
    failed, noticed = truth(results, killed_at)
    if failed != [0] or sorted(noticed) != list(range(1, num_workers)):
        raise RuntimeError(f"the checker's run did not fail as planned ({_states(results)})")
    return results, killed_at


def _ask(answer: Any, results: dict, killed_at: float, what: str, hint: str) -> None:
    called_at = time.monotonic()
    got = call_function(answer, results, killed_at, hints=(("raised", hint),), where=what)
    _compare_diagnosis(got, results, killed_at, called_at, what)


@task(LAB, 2, references=("dtf.checks.lab06.truth",))
def task2(answer: Any, launcher: Any, num_workers: int, timeout: float = 60.0) -> str:
    """``diagnose(results, killed_at) -> (failed, noticed)``, compared with :func:`truth` on
    the :data:`MADE_UP` runs, then on a real run whose chief (worker 0) the checker kills."""
    n = whole_number("num_workers", num_workers, minimum=2, maximum=8)
    hint = (
        "results maps each task to a WorkerResult: .returncode, .status, .error (its last "
        "error event, or None), .events"
    )
    for what, workers, killed, delays in MADE_UP:
        killed_at = time.monotonic() - MADE_UP_AGO_S
        _ask(answer, made_up_results(workers, killed, delays, killed_at), killed_at, what, hint)
    results, killed_at = _real_kill(launcher, n, timeout)
    what = f"a real run of {counted(n, 'worker')} whose chief the checker killed"
    _ask(answer, results, killed_at, what, hint)
    slowest = max(truth(results, killed_at)[1].values())
    pace = (
        f"every survivor noticed within {DETECT_WITHIN_S:g} s"
        if slowest <= DETECT_WITHIN_S
        else f"the survivors took more than {DETECT_WITHIN_S:g} s here (a busy machine)"
    )
    return (
        f"right for two made-up runs and for a real run of {counted(n, 'worker')} in which the "
        f"checker killed the chief: you named it, and {pace}, as your numbers say"
    )


# --------------------------------------------------------------------------- task 3


def _ids(stream, batches: int) -> list[np.ndarray]:
    return [yb.numpy() for _, yb in stream.take(batches)]


def _batch_before_repeat(x, y, g: int, seed: int, skip: int, batches: int) -> list[np.ndarray]:
    """The workers' stream with ``batch`` before ``repeat``: the end of every epoch dropped."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    return _ids(ds.batch(g, drop_remainder=True).repeat().skip(skip), batches)


def _skips_before_shuffling(stream: Any) -> bool:
    """Whether ``stream``'s chain of datasets skips elements before it shuffles them."""
    kinds = []
    while stream is not None:
        kinds.append(type(stream).__name__)
        stream = getattr(stream, "_input_dataset", None)
    shuffled = kinds.index("_ShuffleDataset") if "_ShuffleDataset" in kinds else len(kinds)
    return "_SkipDataset" in kinds[shuffled:]


def _learner_ids(stream: Any, batches: int, what: str) -> list[np.ndarray]:
    import tensorflow as tf

    if isinstance(stream, (tf.distribute.DistributedDataset, tf.distribute.DistributedIterator)):
        raise Wrong(
            f"for {what}: you returned a distributed dataset; the workers distribute it themselves",
            "the task asks for the tf.data.Dataset of global batches",
        )
    hint = "the task asks for the tf.data.Dataset itself"
    expect_kind(stream, tf.data.Dataset, "a tf.data.Dataset", hint, what=what)
    together = (
        "somewhere in your stream x and y were ordered apart: each label must stay with its example"
    )
    return [numbered_labels(element, what, together) for element in stream.take(batches)]


def _offset(flat: np.ndarray, batch: np.ndarray) -> int | None:
    """Where ``batch`` starts in ``flat``, or ``None``."""
    if len(batch) == 0 or len(flat) < len(batch):
        return None
    windows = np.lib.stride_tricks.sliding_window_view(flat, len(batch))
    hits = np.flatnonzero((windows == batch).all(axis=1))
    return int(hits[0]) if len(hits) else None


def _skipped_batches(x, y, g: int, seed: int, r: int, got: list) -> bool:
    """Whether ``got`` starts ``r × g`` batches into the workers' stream."""
    from dtf.lessons.worker_program import global_batches

    if not 0 < r * g * g <= FAR_EXAMPLES:
        return False
    far = _ids(global_batches(x, y, g, seed, skip=r * g), 1)
    return bool(far) and np.array_equal(far[0], got[0])


_RAISED_STREAM_HINT = (
    "your function raised before returning a stream: call it in a new cell to see where"
)
_COUNT_BATCHES_HINT = "each step trained on one global batch: count what you skip in batches"

#: Task 3: the known wrong streams, over the facts of :func:`_check_stream` (``start``: where
#: the learner's first batch starts in the workers' stream, in examples; ``batch``: in batches).
STREAM_MISTAKES = (
    Mistake(
        lambda stream, **_: _skips_before_shuffling(stream),
        "for {what}: your stream leaves out examples before it shuffles them, so it skips "
        "examples of the arrays, not the batches the restored steps trained on (and what "
        "remains is shuffled into other batches)",
        "the restored steps trained on batches of the shuffled stream: look at where your skip "
        "stands in it",
    ),
    Mistake(
        lambda got, k, **_: len(got) < k,
        "for {what}: the stream ended after {count} batch(es)",
        "training goes on for many epochs: the workers' stream never ends",
    ),
    Mistake(
        lambda got, g, **_: any(len(b) != g for b in got),
        "for {what}: batches of {size} examples, expected global batches of {g}",
        "each element of the stream is one global batch",
    ),
    Mistake(
        lambda got, x, y, g, seed, r, k, **_: all_close(
            _batch_before_repeat(x, y, g, seed, r, k), got, 0, 0
        ),
        "for {what}: your batches leave out the last examples of every epoch: batch() before "
        "repeat() drops each epoch's remainder, the workers' stream does not",
        "the workers' stream, shown above the task, repeats before it batches: a global batch "
        "may span two epochs",
    ),
    Mistake(
        lambda start, got, x, y, g, seed, r, **_: (
            start is None and _skipped_batches(x, y, g, seed, r, got)
        ),
        "for {what}: your stream starts with batch {far}: you skipped restored_step × "
        "global_batch = {skipped} batches; after batch() skip() counts batches",
        _COUNT_BATCHES_HINT,
    ),
    Mistake(
        lambda start, **_: start is None,
        "for {what}: your first batch is none of the workers' first {read} batches: it is not "
        "their stream",
        "the restarted workers build the stream shown above the task, the same seeded one, and "
        "leave out what was trained on: compare yours with it",
    ),
    Mistake(
        lambda start, g, **_: start % g,
        "for {what}: your stream starts {start} examples into the workers' stream, inside a "
        "batch: skip() before batch() counts examples",
        _COUNT_BATCHES_HINT,
    ),
    Mistake(
        lambda batch, r, **_: batch == r,
        "for {what}: your first batch is right, but batch {bad} of your stream is not the "
        "workers' next one",
        "your stream drifts from the workers' after its first batch: look at what comes after "
        "your skip",
    ),
    Mistake(
        lambda batch, **_: batch == 0,
        "for {what}: your stream starts with the first batch of the run again: the restarted "
        "workers would train steps {r1}, {r2}, ... on batches 1, 2, ... a second time, and "
        "never on the batches of steps {r1} onwards of the uninterrupted run",
        "the restarted workers must leave out the batches the restored steps trained on",
    ),
    Mistake(
        lambda batch, r, **_: batch < r,
        "for {what}: your stream starts with batch {batch1} of the workers' stream, which a "
        "restored step already trained on",
        "steps 1 to restored_step trained on exactly restored_step batches: count again",
    ),
    Mistake(
        lambda **_: True,
        "for {what}: your stream starts with batch {batch1} of the workers' stream: it leaves "
        "out batches that no restored step trained on",
        "steps 1 to restored_step trained on exactly restored_step batches: count again",
    ),
)


def _check_stream(answer: Any, global_batch: int, restored: int, seed: int) -> None:
    """The learner's stream against the workers' (numbered examples), batch by batch."""
    from dtf.lessons.worker_program import global_batches

    g, r, k = global_batch, restored, STREAM_BATCHES
    what = f"a global batch of {g} resumed after step {r}"
    x, y = numbered(STREAM_EXAMPLES)
    hint = _RAISED_STREAM_HINT
    stream = call_function(answer, x, y, g, seed, r, hints=(("raised", hint),), where=what)
    got = _learner_ids(stream, k, what)
    reference = _ids(global_batches(x, y, g, seed), r + k + 2)
    expected = reference[r : r + k]
    if all_close(expected, got, 0, 0):
        return
    start = _offset(np.concatenate(reference), got[0]) if got else None
    batch = None if start is None else start // g
    bad = next(
        (
            j
            for j, (e, h) in enumerate(zip(expected, got, strict=False))
            if not np.array_equal(e, h)
        ),
        0,
    )
    diagnose(
        STREAM_MISTAKES,
        what=what, stream=stream, got=got, x=x, y=y, g=g, r=r, k=k, seed=seed, start=start,
        batch=batch, batch1=None if batch is None else batch + 1, bad=bad + 1,
        count=len(got), size=len(got[0]) if got else 0, far=r * g + 1, skipped=r * g,
        read=r + k + 2, r1=r + 1, r2=r + 2,
    )  # fmt: skip


def _fresh(seed: int):
    """The workers' model and optimizer, built (one process, the default strategy)."""
    from dtf.lessons.worker_program import build_model, make_optimizer
    from dtf.multiworker import TrainConfig

    model = build_model(seed)
    optimizer = make_optimizer(TrainConfig(seed=seed))
    optimizer.build(model.trainable_variables)
    return model, optimizer


def _train(model, optimizer, stream, steps: int, global_batch: int) -> None:
    import tensorflow as tf

    from dtf.lessons.worker_program import make_train_step

    step = make_train_step(tf.distribute.get_strategy(), model, optimizer, global_batch)
    batches = iter(stream)
    for _ in range(steps):
        step(batches)


@functools.lru_cache(maxsize=4)
def _uninterrupted(steps: int, global_batch: int, seed: int) -> tuple:
    """The weights after ``steps`` uninterrupted steps on the workers' stream, in one process
    (notebook 11 shows the workers match it to round-off)."""
    from dtf.lessons.worker_program import global_batches
    from dtf.multiworker import digits_arrays

    model, optimizer = _fresh(seed)
    stream = global_batches(*digits_arrays(), global_batch, seed)
    _train(model, optimizer, stream, steps, global_batch)
    weights = tuple(model.get_weights())
    for w in weights:
        w.setflags(write=False)
    return weights


def _resume_on(answer: Any, global_batch: int, restored: int, steps: int, seed: int) -> float:
    """Train ``restored`` steps, checkpoint, restore into fresh objects, train on the learner's
    stream to ``steps``: the largest difference from an uninterrupted run."""
    import tensorflow as tf

    from dtf.lessons.worker_program import global_batches
    from dtf.multiworker import digits_arrays

    x, y = digits_arrays()
    model, optimizer = _fresh(seed)
    _train(model, optimizer, global_batches(x, y, global_batch, seed), restored, global_batch)
    step = tf.Variable(restored, dtype=tf.int64)
    with tempfile.TemporaryDirectory(prefix="dtf-lab06-") as tmp:
        path = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step).save(
            os.path.join(tmp, "ckpt")
        )
        model, optimizer = _fresh(seed)  # a restarted worker: fresh objects, then restore
        step = tf.Variable(0, dtype=tf.int64)
        restore = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step).restore(path)
        restore.assert_consumed()
    start = int(step.numpy())
    raised = (("raised", _RAISED_STREAM_HINT),)
    where = f"the digits resumed after step {start}"
    stream = call_function(answer, x, y, global_batch, seed, start, hints=raised, where=where)
    _train(model, optimizer, stream, steps - start, global_batch)
    names = [
        f"weight array {i} after resuming at step {start} and training to step {steps} (vs. an "
        "uninterrupted run)"
        for i in range(len(model.get_weights()))
    ]
    return expect_weights(
        _uninterrupted(steps, global_batch, seed),
        model.get_weights(),
        names,
        RESUME_ATOL,
        "your stream must continue the workers' stream exactly where the checkpoint left it",
    )


@task(LAB, 3, references=("dtf.lessons.worker_program.global_batches(skip)",))
def task3(answer: Any, global_batch: int, restored_step: int, steps: int, seed: int = 42) -> str:
    """``resumed_batches(x, y, global_batch, seed, restored_step) -> tf.data.Dataset``: compared
    batch by batch with the workers' stream for the lab's case and :data:`STREAM_CASES`; then
    training restored from a checkpoint and continued on it must end as an uninterrupted run."""
    g = whole_number("global_batch", global_batch, minimum=1)
    steps = whole_number("steps", steps, minimum=1)
    r = whole_number("restored_step", restored_step, minimum=0, maximum=steps - 1)
    seed = whole_number("seed", seed, minimum=0)
    cases = [(g, r)] + [c for c in STREAM_CASES if c != (g, r)]
    for case_g, case_r in cases:
        _check_stream(answer, case_g, case_r, seed)
    _resume_on(answer, g, r, steps, seed)
    shown = listed([f"step {cr} (batches of {cg})" for cg, cr in cases])
    return (
        f"resumed after {shown}, your stream starts at the first batch not trained yet; "
        f"restored from a step-{r} checkpoint and trained on it to step {steps}, the model "
        f"ends with the weights of an uninterrupted run (to {RESUME_ATOL:g})"
    )


# --------------------------------------------------------------------------- task 4


class TooManyRuns(BaseException):
    """A run beyond the restarts allowed: a ``BaseException``, so that a supervisor's
    ``except Exception`` cannot swallow it and loop forever."""


class FailingLauncher:
    """The lab's launcher as the learner's supervisor sees it: it kills worker ``victim``
    after step ``fail_at`` of the first run, as a crash would, and starts at most
    ``max_runs`` runs."""

    def __init__(
        self, launcher: Any, victim: int, fail_at: int, max_runs: int, timeout: float
    ) -> None:
        self._launcher = launcher
        self.victim, self.fail_at, self.max_runs, self.timeout = victim, fail_at, max_runs, timeout
        self.runs: list[tuple[Any, Any, int]] = []  # (run, the config it was given, num_workers)
        self.kills: list[float] = []
        self.problems: list[str] = []
        self.refused = 0
        self._threads: list[threading.Thread] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_launcher":
            raise AttributeError(name)
        return getattr(self._launcher, name)

    def run(self, config: Any, num_workers: int):
        if len(self.runs) >= self.max_runs:
            self.refused += 1
            raise TooManyRuns(f"the checker's launcher starts at most {self.max_runs} runs here")
        fail = not self.runs and self.victim < num_workers
        started = config
        if fail:
            try:
                started = dataclasses.replace(
                    config, pause_task=self.victim, pause_after=self.fail_at
                )
            except (TypeError, ValueError) as exc:  # not a TrainConfig, or too few steps
                self.problems.append(error_line(exc))
                fail = False
        run = self._launcher.run(started, num_workers)
        self.runs.append((run, config, num_workers))
        if fail:
            thread = threading.Thread(target=self._kill, args=(run,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return run

    def stop(self) -> None:
        """Refused: the launcher serves the whole lab (its last cell stops it)."""
        from dtf.multiworker import WorkerError

        raise WorkerError(
            "the lab's launcher serves every task: stop runs with run.stop(), not the launcher"
        )

    def _kill(self, run: Any) -> None:
        try:
            run.wait_for("paused", self.victim, timeout=self.timeout)
            self.kills.append(run.kill(self.victim))
        except Exception as exc:  # noqa: BLE001 - reported by the checker
            self.problems.append(error_line(exc))

    def close(self) -> None:
        """Stop every run still running, then wait for the killing threads."""
        for run, _, _ in self.runs:
            if run.running:
                run.stop()
        for thread in self._threads:
            thread.join(self.timeout)


class MadeUpLauncher:
    """A launcher that starts no process: its runs end with the results of ``script``."""

    def __init__(self, script: list[dict]) -> None:
        self.script, self.max_runs, self.refused = script, len(script), 0
        self.runs: list[tuple[Any, Any, int]] = []  # (run, the config it was given, num_workers)
        self.waits: list[Any] = []  # the timeout of each run.wait(...) call

    def run(self, config: Any, num_workers: int) -> Any:
        if len(self.runs) == len(self.script):
            self.refused += 1
            raise TooManyRuns(f"the checker's launcher starts at most {len(self.script)} runs here")
        done = self.script[len(self.runs)]

        def wait(timeout=None):
            self.waits.append(timeout)
            return done

        run = SimpleNamespace(running=False, wait=wait, results=lambda: done, stop=lambda: None)
        self.runs.append((run, config, num_workers))
        return run

    def close(self) -> None:
        pass


def _supervise(
    answer, failing, config, n: int, max_restarts: int, timeout, what, allow_raise=False
):
    """Call the learner's supervisor with ``failing``: ``(returned, why it stopped)``, the
    latter None, "too many", or (``allow_raise``) the message it raised once every run ran."""
    raised = (("raised", "the text of Task 4 lists the launcher's and run's methods you need"),)
    try:
        args = (failing, config, n, max_restarts, timeout)
        return call_function(answer, *args, hints=raised, where=what), None
    except TooManyRuns:
        return None, "too many"
    except Wrong as exc:
        if allow_raise and len(failing.runs) == failing.max_runs and not failing.refused:
            return None, exc.detail
        raise
    finally:
        failing.close()


def _check_waits(made_up: MadeUpLauncher, timeout: float, what: str) -> None:
    """The task's rule that every wait is bounded by the ``timeout`` the function was given
    (a real run's ``wait`` needs a timeout, but accepts any)."""
    for got in made_up.waits:
        try:
            bounded = got is not None and float(got) <= timeout
        except (TypeError, ValueError):
            bounded = False
        if not bounded:
            shown = "no timeout" if got is None else f"timeout={got!r}"
            raise Wrong(
                f"for {what}: your function waited for a run with {shown}, although it was "
                f"given timeout={timeout!r}",
                "the task bounds every wait by the timeout your function receives",
            )


def _kind(value: Any) -> str:
    """What ``value`` is, without its contents (results hold time stamps)."""
    from dtf.multiworker import WorkerRun

    if isinstance(value, Mapping):
        return "a dict: the results of one run"
    if isinstance(value, WorkerRun):
        return "a WorkerRun, not its results"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return "None" if value is None else f"a {type(value).__name__}"


def _check_returned(returned: Any, runs: list, what: str) -> None:
    hint = "the task asks for a list: what waiting for each run returned, in order"
    if not isinstance(returned, (list, tuple)) or len(returned) != len(runs):
        raise Wrong(
            f"for {what}: expected a list with the results of each of the {len(runs)} runs, "
            f"got {_kind(returned)}",
            hint,
        )
    for i, (got, (run, _, _)) in enumerate(zip(returned, runs, strict=True)):
        try:
            have = {int(t): r.returncode for t, r in dict(got).items()}
        except (TypeError, ValueError, AttributeError):
            have = None
        if have != {t: r.returncode for t, r in run.results().items()}:
            shown = "not" if have is not None else f"{_kind(got)}, not"
            raise Wrong(
                f"for {what}: item {i} of your list is {shown} the results of run {i + 1}", hint
            )


def _config_change(given: Any, used: Any) -> str | None:
    """The fields in which ``used`` differs from ``given``, or ``None``."""
    if not dataclasses.is_dataclass(used) or type(used) is not type(given):
        return f"a {type(used).__name__} instead of the TrainConfig it was given"
    fields = dataclasses.fields(given)
    return (
        ", ".join(f.name for f in fields if getattr(given, f.name) != getattr(used, f.name)) or None
    )


def _check_restart(failing: FailingLauncher, config, n: int, steps: int, fail_at: int, what):
    """Case 1's runs: run 1 failed, run 2 restarted every worker with the same config, from the
    chief's latest checkpoint, and ended with an uninterrupted run's weights; a note."""
    runs = failing.runs
    if not runs:
        raise Wrong(
            "your function started no run with the launcher it received",
            "start the workers with the launcher your function receives",
        )
    for i, (_, used, workers) in enumerate(runs):
        if change := _config_change(config, used):
            raise Wrong(
                f"for {what}: run {i + 1} was started with another configuration ({change} "
                "changed)",
                "the restarted workers look for the chief's latest checkpoint in the "
                "checkpoint_dir of the config your function received",
            )
        if workers != n:
            raise Wrong(
                f"for {what}: run {i + 1} had {counted(workers, 'worker')}, the job has {n}",
                "restart every worker, with the same num_workers: a synchronous job cannot go on "
                "with a worker missing, nor take a new one into a running all-reduce",
            )
    if not failing.kills:
        if len(runs) > 1:
            raise Wrong(
                f"for {what}: your function started run 2 while run 1 was still training "
                "(starting a run stops the workers of the one before)",
                "a run's workers are done only once waiting for the run has returned",
            )
        problems = "; ".join(failing.problems or ["it never paused"])
        raise RuntimeError(f"the checker could not kill worker {failing.victim}: {problems}")
    first = runs[0][0]
    if len(runs) == 1:
        raise Wrong(
            f"for {what}: the run failed ({_states(first.results())}) and your function did not "
            "start the workers again",
            "a run in which any worker did not exit with code 0 failed: what does a synchronous "
            "job need after a failure?",
        )
    second = runs[1][0]
    if not all(r.returncode == 0 for r in second.results().values()):
        raise Wrong(
            f"for {what}: the restarted run did not finish: {_states(second.results())}",
            "a run's workers are done only once waiting for the run has returned",
        )
    if len(runs) > 2:
        raise Wrong(
            f"for {what}: run 2 trained to the end (every worker exited with code 0), yet your "
            f"function started {len(runs) - 2} more",
            "a run in which every worker exited with code 0 succeeded: the job is done",
        )
    saved = max([e["step"] for e in first.events_of(0, "checkpoint")], default=0)
    reference = _uninterrupted(steps, config.per_worker_batch * n, config.seed)
    for t in second.tasks:
        restored = second.events_of(t, "restored")
        got = restored[0]["step"] if restored else 0
        if got != saved:
            raise Wrong(
                f"for {what}: worker {t} resumed run 2 from step {got}, not from the chief's "
                "latest checkpoint",
                "the restarted workers restore the chief's latest checkpoint from the "
                "checkpoint_dir of the config they are started with",
            )
        if saved and not all_close(
            first.weights(f"checkpoint-{saved}", 0)[1], second.weights("restored", t)[1], 0, 0
        ):
            raise Wrong(
                f"for {what}: worker {t} restored other weights than the chief's step-{saved} "
                "checkpoint holds"
            )
        step, final = second.weights("final", t)
        expect_weights(
            reference,
            final,
            [
                f"worker {t}'s weight array {i} at step {step} (vs. an uninterrupted run)"
                for i in range(len(final))
            ],
            WEIGHT_TOL,
            "the restart must be every worker, with the same config, once the failed run has ended",
        )
    resumed = (
        f"restored the step-{saved} checkpoint (step and weights equal to the checkpoint's, "
        "bit for bit)"
        if saved
        else "found no checkpoint (none was written before the failure) and started from step 0"
    )
    return (
        f"run 1 failed when the checker killed worker {failing.victim} after step {fail_at}; "
        f"run 2 restarted {'both workers' if n == 2 else f'all {n} workers'}, which {resumed} "
        f"and trained to step {steps}, ending with the weights of an uninterrupted run (to "
        f"{WEIGHT_TOL:g})"
    )


def _crash_loop(n: int, victim: int) -> MadeUpLauncher:
    """Task 4's crash loop: every run ends as case 1's real first run did, worker ``victim``
    killed and the others failed with it. Only the supervisor's counting is checked there, so
    its runs are made up: real ones would cost seconds each and show nothing more."""
    from dtf.multiworker import EXIT_ERROR, WorkerResult

    failed = {t: WorkerResult(t, -9 if t == victim else EXIT_ERROR) for t in range(n)}
    return MadeUpLauncher([failed] * (CRASH_LOOP_RESTARTS + 1))


def _failures_without_the_victim(n: int, victim: int) -> MadeUpLauncher:
    """Task 4's last case: run 1 ends with the chief at code 0 and worker ``victim`` killed,
    run 2 with worker 0 at ``EXIT_ERROR`` and every other worker, the last too, at 0 (a
    failure that neither the last worker's code nor a signal shows), run 3 succeeds."""
    from dtf.multiworker import EXIT_ERROR, WorkerResult

    return MadeUpLauncher(
        [
            {t: WorkerResult(t, -9 if t == victim else 0) for t in range(n)},
            {t: WorkerResult(t, EXIT_ERROR if t == 0 else 0) for t in range(n)},
            {t: WorkerResult(t, 0) for t in range(n)},
        ]
    )


def _fresh_dir(launcher: Any) -> str:
    where = getattr(launcher, "workdir", None)
    where = where if where and os.path.isdir(where) else None
    return tempfile.mkdtemp(prefix="lab06-checkpoints-", dir=where)


@task(LAB, 4)
def task4(
    answer: Any,
    launcher: Any,
    num_workers: int,
    *,
    steps: int,
    per_worker_batch: int,
    checkpoint_every: int,
    fail_at_step: int,
    timeout: float = 60.0,
) -> str:
    """``supervise(launcher, config, num_workers, max_restarts, timeout) -> [results, ...]``.
    Case 1: a :class:`FailingLauncher` kills the last worker after ``fail_at_step``
    (:func:`_check_restart`); then two :class:`MadeUpLauncher` cases: a worker killed in every
    run, ``max_restarts=1`` (:func:`_crash_loop`), and failures that the chief's, or the last
    worker's, exit code alone does not show (:func:`_failures_without_the_victim`). Each wait
    of a made-up run must be bounded by ``timeout`` (:func:`_check_waits`)."""
    from dtf.multiworker import TrainConfig

    n = whole_number("num_workers", num_workers, minimum=2, maximum=8)
    steps = whole_number("steps", steps, minimum=2)
    fail_at = whole_number("fail_at_step", fail_at_step, minimum=1, maximum=steps - 1)
    every = whole_number("checkpoint_every", checkpoint_every, minimum=1)
    victim = n - 1
    folder = _fresh_dir(launcher)
    done = "a run in which every worker exited with code 0 succeeded: the job is done"
    try:
        config = TrainConfig(
            steps=steps,
            per_worker_batch=per_worker_batch,
            checkpoint_dir=folder,
            checkpoint_every=every,
        )
        failing = FailingLauncher(launcher, victim, fail_at, MAX_RESTARTS + 1, timeout)
        what = (
            f"a run of {counted(n, 'worker')} whose worker {victim} was killed after step {fail_at}"
        )
        returned, refused = _supervise(answer, failing, config, n, MAX_RESTARTS, timeout, what)
        if refused:
            raise Wrong(
                f"for {what}: your function started more than 1 + max_restarts = "
                f"{MAX_RESTARTS + 1} runs",
                "a run in which every worker exited with code 0 ends the job, and so does the "
                "failure after max_restarts restarts",
            )
        note = _check_restart(failing, config, n, steps, fail_at, what)
        _check_returned(returned, failing.runs, what)
        loop = _crash_loop(n, victim)
        what = (
            f"a made-up launcher whose every run ends with worker {victim} killed, with "
            f"max_restarts={CRASH_LOOP_RESTARTS}"
        )
        returned, raised = _supervise(
            answer, loop, config, n, CRASH_LOOP_RESTARTS, timeout, what, allow_raise=True
        )
        if raised == "too many":
            raise Wrong(
                f"for {what}: your function tried a run beyond the {CRASH_LOOP_RESTARTS} restart "
                "it may make: a crash that comes back in every run would restart the job forever",
                "the job gets 1 + max_restarts runs in all: count them",
            )
        if len(loop.runs) < CRASH_LOOP_RESTARTS + 1:
            raise Wrong(
                f"for {what}: your function gave up after {len(loop.runs)} run(s), before the "
                f"{CRASH_LOOP_RESTARTS} restart it may make",
                "a failed run is followed by a restart until max_restarts restarts are spent",
            )
        if raised is None:
            _check_returned(returned, loop.runs, what)
        _check_waits(loop, timeout, what)
        made_up = _failures_without_the_victim(n, victim)
        what = "a made-up launcher whose first two runs failed and whose third succeeded"
        returned, refused = _supervise(answer, made_up, config, n, MAX_RESTARTS, timeout, what)
        if refused:
            raise Wrong(
                f"for {what}: your function started a fourth run, although the third succeeded",
                done,
            )
        if len(made_up.runs) == 1:
            raise Wrong(
                f"for a made-up run whose chief exited with code 0 and worker {victim} was "
                f"killed: your function did not start the workers again, although worker "
                f"{victim} failed: the chief's exit code alone does not say that a run succeeded",
                "look at which workers' results your test of success reads",
            )
        if len(made_up.runs) == 2:
            code = made_up.script[1][0].returncode
            raise Wrong(
                f"for a made-up run in which worker 0 exited with code {code} "
                f"and every other worker, worker {victim} too, with code 0: your function did not "
                "start the workers again, although worker 0 failed without a signal",
                "look at which workers' results your test of success reads, and which exit "
                "codes it takes for success",
            )
        _check_returned(returned, made_up.runs, what)
        _check_waits(made_up, timeout, what)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return (
        f"{note}; with a worker killed in every run, it gave up after "
        f"max_restarts={CRASH_LOOP_RESTARTS} restart"
    )
