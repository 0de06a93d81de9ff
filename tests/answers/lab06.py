"""Lab 06 answers for tests/test_checks_lab06.py: the solutions, with switches for the usual
mistakes. The tests' worker process imports them (``from tests.answers import lab06``)."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import time

import tensorflow as tf

from dtf.lessons import worker_program


def make_make_manager(
    chief="rule", others="own", none="base", kind="str", restore="base", returns="manager"
):
    """Task 1: ``make_manager``."""

    def make_manager(checkpoint, base, tf_config):
        if tf_config is None:
            if none == "crash":
                json.loads(tf_config)
            is_chief, task_type, index = True, "worker", 0
        else:
            config = json.loads(tf_config)
            task_type, index = config["task"]["type"], config["task"]["index"]
            if chief == "rule":
                first = ("chief", 0) if "chief" in config["cluster"] else ("worker", 0)
                is_chief = (task_type, index) == first
            elif chief == "worker-0":  # the tutorial's shortcut: worker 0, whatever the cluster
                is_chief = task_type == "chief" or (task_type == "worker" and index == 0)
            elif chief == "worker-0-only":
                is_chief = task_type == "worker" and index == 0
            elif chief == "inverted":
                is_chief = (task_type, index) != ("worker", 0)
            else:
                is_chief = True  # everybody writes the real folder
        if is_chief:
            folder = base
        elif others == "own":
            folder = os.path.join(base, f"{task_type}-{index}-tmp")
        elif others == "shared":
            folder = os.path.join(base, "tmp")
        elif others == "outside":
            folder = os.path.join(os.path.dirname(base), f"{task_type}-{index}")
        elif others == "relative":
            folder = f"{task_type}-{index}-tmp"
        if kind == "path":
            folder = pathlib.Path(folder)
        if returns == "no-max-to-keep":  # TypeError: max_to_keep has no default
            tf.train.CheckpointManager(checkpoint, folder)
        managed = tf.train.Checkpoint(inner=checkpoint) if returns == "wrapped" else checkpoint
        manager = tf.train.CheckpointManager(managed, folder, max_to_keep=2)
        if restore == "base":
            latest = tf.train.latest_checkpoint(base)
            if latest:
                checkpoint.restore(latest)
        elif restore == "own":  # the manager's own folder: the chief's only for the chief
            manager.restore_or_initialize()
        elif restore == "assert":  # fails while there is no checkpoint yet
            checkpoint.restore(tf.train.latest_checkpoint(base)).assert_consumed()
        if returns == "chief-only" and folder != base:
            return None  # only the chief saves: the others return no manager
        return folder if returns == "folder" else manager

    return make_manager


def make_diagnose(failed="signal", noticed="stamp-diff", only_first=False, one=False):
    """Task 2: ``diagnose``."""

    def diagnose(results, killed_at):
        if failed == "signal":
            dead = sorted(t for t, r in results.items() if r.returncode < 0)
        elif failed == "errored":
            dead = sorted(t for t, r in results.items() if r.error is not None)
        elif failed == "nonzero":
            dead = sorted(t for t, r in results.items() if r.returncode != 0)
        elif failed == "single":
            dead = [next(t for t, r in results.items() if r.returncode < 0)]
        elif failed == "one-survivor-too":  # the killed workers and the first survivor
            alive = next(t for t, r in results.items() if r.returncode >= 0)
            dead = sorted([t for t, r in results.items() if r.returncode < 0] + [alive])
        elif failed == "hardcoded":  # the lab's run: the last worker killed, the chief survived
            return [1], {0: results[0].error["t"] - killed_at}
        seen = {}
        for t, r in results.items():
            if (t in dead or r.error is None) and noticed != "everyone":
                continue
            stamp = (r.error or r.events[-1])["t"]
            if noticed in ("stamp-diff", "everyone"):
                seen[t] = stamp - killed_at
            elif noticed == "stamp":
                seen[t] = stamp
            elif noticed == "millis":
                seen[t] = (stamp - killed_at) * 1000
            elif noticed == "now":
                seen[t] = time.monotonic() - killed_at
            elif noticed == "wall-clock":
                seen[t] = time.time() - killed_at
            if only_first:
                break
        return (dead[0] if one else dead), seen

    return diagnose


def make_resumed(how="skip", shift=0, seed_shift=0, repeat=True, batch=None):
    """Task 3: ``resumed_batches``."""

    def resumed_batches(x, y, global_batch, seed, restored_step):
        g = batch or global_batch
        skip = restored_step + shift
        if how == "split":
            xs = tf.data.Dataset.from_tensor_slices(x).shuffle(len(x), seed=1)
            ds = tf.data.Dataset.zip((xs, tf.data.Dataset.from_tensor_slices(y)))
            return ds.repeat().batch(g, drop_remainder=True)
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        if how == "before-shuffle":
            ds = ds.skip(skip)
        ds = ds.shuffle(len(x), seed=seed + seed_shift, reshuffle_each_iteration=True)
        if how == "batch-first":
            return ds.batch(g, drop_remainder=True).repeat().skip(skip)
        if repeat:
            ds = ds.repeat()
        if how == "examples":  # skip examples before batching: the same, batch-aligned
            return ds.skip(skip * g).batch(g, drop_remainder=True)
        if how == "examples-unscaled":
            return ds.skip(skip).batch(g, drop_remainder=True)
        ds = ds.batch(g, drop_remainder=True)
        if how == "iterator":
            return iter(ds.skip(skip))
        if how == "batches-times-g":
            return ds.skip(skip * g)
        if how == "no-skip":
            return ds
        return ds.skip(skip)

    return resumed_batches


def make_supervise(
    loop="bounded",
    stop=True,
    workers="all",
    folder="same",
    returns="all",
    give_up="return",
    which=None,
    success="all",
    wait="bounded",
):
    """Task 4: ``supervise``; ``which``: a launcher to use instead of the one received;
    ``success``: whose exit codes say that a run succeeded ("all", "chief", "last") or
    "signals" (no worker killed by one); ``wait``: "bounded" or "long" (ten times the
    timeout)."""

    def supervise(launcher_, config, num_workers, max_restarts, timeout):
        use = which or launcher_
        attempts = []
        runs = 1 + max_restarts if loop == "bounded" else max_restarts if loop == "short" else None
        while runs is None or len(attempts) < runs:
            n = num_workers
            if attempts and workers == "failed":
                n = sum(r.returncode < 0 for r in attempts[-1].values())
            if attempts and folder == "new":
                config = dataclasses.replace(
                    config, checkpoint_dir=os.path.join(config.checkpoint_dir, "new")
                )
            try:
                bound = timeout if wait == "bounded" else 10 * timeout
                results = use.run(config, n).wait(timeout=bound)
            except Exception:
                if loop == "swallow":
                    continue
                raise
            attempts.append(results)
            judged = {"chief": [results[0]], "last": [results[max(results)]]}.get(
                success, results.values()
            )
            if stop and all(
                (r.returncode >= 0) if success == "signals" else (r.returncode == 0) for r in judged
            ):
                break
            if loop == "once":
                break
        if give_up == "raise" and any(r.returncode for r in attempts[-1].values()):
            raise RuntimeError(f"gave up after {len(attempts)} runs")
        return attempts[-1] if returns == "last" else attempts

    return supervise


def manager_a_number(checkpoint, base, tf_config):
    """Task 1, a number instead of a manager."""
    return 3


def make_spying_diagnose(seen):
    """Task 2's solution that appends to ``seen``, at each call, each task's status."""
    diagnose = make_diagnose()

    def spy(results, killed_at):
        seen.append({t: r.status for t, r in results.items()})
        return diagnose(results, killed_at)

    return spy


def resumed_by_the_course(x, y, g, seed, r):
    """Task 3 handed to the course's own skip."""
    return worker_program.global_batches(x, y, g, seed, skip=r)


def resumed_by_the_course_positionally(x, y, g, seed, r):
    """Task 3 handed to the course's own skip, passed by position."""
    return worker_program.global_batches(x, y, g, seed, r)


def make_spying_resumed(calls):
    """Task 3's solution that appends to ``calls``, at each call, its arguments (the shape of
    ``x`` for ``x``, without ``y``)."""
    resumed_batches = make_resumed()

    def spy(x, y, global_batch, seed, restored_step):
        calls.append([list(x.shape), global_batch, seed, restored_step])
        return resumed_batches(x, y, global_batch, seed, restored_step)

    return spy


def rude(launcher_, config, num_workers, max_restarts, timeout):
    """Task 4, a supervisor that stops the launcher it received."""
    launcher_.stop()
