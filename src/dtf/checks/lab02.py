"""Checkers of Lab 02 · Towers (``labs/02_towers_lab.ipynb``).

1. split a global batch into equal, in-order shards; 2. average the towers' gradients;
3. one synchronous tower step, against single-device training; 4. (diagnose) four measured
tower steps: which one is right, and what is wrong with each of the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dtf.checks.core import (
    Mistake,
    Wrong,
    all_close,
    as_array,
    call,
    call_function,
    counted,
    device_names,
    devices_of,
    diagnose,
    eager_rows,
    expect_close,
    expect_kind,
    expected_got,
    full_float32,
    listed,
    plural,
    short,
    task,
    user_error_line,
)
from dtf.placement import short_device

LAB = "lab02"

#: Task 1: (batch, towers) pairs that split evenly, and one that does not.
SPLITS = ((12, 1), (12, 2), (12, 3), (12, 4))
UNEVEN = (10, 4)
#: Task 3: network size, global batch per device, steps, learning rate and tolerance.
HIDDEN = 32
PER_DEVICE = 16
STEPS = 3
LEARNING_RATE = 0.5
ATOL = 1e-5
_PARAMETER_DEVICE = "/device:CPU:0"
#: Task 3: while the learner's step runs, the number of examples of every :func:`loss` call.
_loss_batches: list[int | None] | None = None
#: Task 3: while the learner's first step runs eagerly, each :func:`loss` call's labels and
#: the device of its logits.
_loss_calls: list[tuple[np.ndarray, str]] | None = None


def loss(y, logits):
    """The mean softmax cross-entropy that the towers of task 3 and the reference both use."""
    import tensorflow as tf

    if _loss_batches is not None:  # Task 3's checker is watching: how big is each shard?
        _loss_batches.append(y.shape[0])
    device = getattr(logits, "device", None)
    if _loss_calls is not None and tf.executing_eagerly() and isinstance(device, str):
        _loss_calls.append((as_array(y), short_device(device)))  # which shard, on which device
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def _count(value: Any) -> str:
    """``"a list of 3 items"`` for lists and tuples, else a short description."""
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {counted(len(value), 'item')}"
    return short(value)


def _shape_of(value: Any) -> tuple[int, ...] | None:
    """The shape of ``value`` as an array, or None when it is none."""
    try:
        return tuple(as_array(value).shape)
    except (TypeError, ValueError):
        return None


def _average_slip(got: Any, each: list[np.ndarray]) -> str:
    """What a wrong average of the towers' gradients ``each`` (of one variable) is, if a
    known slip: the sum, or one tower's gradient alone; else where to look."""
    try:
        have = as_array(got).astype(np.float64)
    except (TypeError, ValueError):
        have = None
    if have is not None and have.shape == np.shape(each[0]) and len(each) > 1:
        if np.allclose(have, np.sum(each, 0), atol=1e-5):
            return "that is the sum of the towers' gradients, not their mean"
        for t, grad in enumerate(each):
            if np.allclose(have, grad, atol=1e-5):
                return f"that is tower {t}'s gradient alone: the other towers' are left out"
    return (
        "your values are neither the towers' mean, nor their sum, nor one tower's gradient: "
        "look at what your code computes from tower_grads[t][v], tower t's gradient of "
        "variable v"
    )


@task(LAB, 1, references=("dtf.towers.split_batch",))
def task1(answer: Any) -> str:
    """``split_batch(x, y, num_towers) -> [(x_0, y_0), ...]``: equal, in-order shards, as
    :func:`dtf.towers.split_batch`; a batch that does not divide evenly raises ValueError."""
    from dtf import towers

    def batch_of(n: int):
        return np.arange(n * 3, dtype=np.float32).reshape(n, 3), np.arange(n, dtype=np.int64)

    for batch, n in SPLITS:
        x, y = batch_of(batch)
        got = call_function(answer, x, y, n)
        what = f"a batch of {batch} over {n} tower(s)"
        if not isinstance(got, (list, tuple)) or len(got) != n:
            raise Wrong(
                f"for {what}: expected a list of {n} (x_i, y_i) pairs, got {_count(got)}",
                "one (x_shard, y_shard) pair per tower",
            )
        for i, (shard, (x_i, y_i)) in enumerate(zip(got, towers.split_batch(x, y, n), strict=True)):
            if not isinstance(shard, (list, tuple)) or len(shard) != 2:
                raise Wrong(
                    expected_got("a pair (x_i, y_i)", shard, f"shard {i} of {what}"),
                    "each item of the list is one tower's pair: its x shard, then its y shard",
                )
            for name, want, have in (("x", x_i, shard[0]), ("y", y_i, shard[1])):
                hint = "the shards keep the examples in order: shard 0 holds the first ones"
                shape = _shape_of(have)
                if shape is not None and shape[:1] != np.shape(want)[:1]:
                    hint = "your shards are not equal parts of the batch, one per tower"
                elif shape not in (None, np.shape(want)):
                    hint = (
                        f"your {name} shard has the right number of examples, but not the shape "
                        "they have in the batch: each pair is (x shard, y shard)"
                    )
                where = f"{name} of shard {i} of {what}"
                expect_close(want, have, what=where, hint=hint, show_expected=False)
    batch, n = UNEVEN
    hint = (
        "unequal shards would make the average of the tower gradients differ from the "
        "gradient of the global batch: the task says how to refuse such a batch"
    )
    try:
        got = answer(*batch_of(batch), n)
    except ValueError:
        return (
            f"{len(SPLITS)} splits match dtf.towers.split_batch, and a batch of "
            f"{batch} over {n} towers is refused"
        )
    except Exception as exc:
        raise Wrong(
            f"a batch of {batch} over {n} towers raised {user_error_line(exc)} instead of "
            "ValueError",
            hint,
        ) from None
    try:
        shown = f"shards of sizes {[len(as_array(shard[0])) for shard in got]}"
    except Exception:
        shown = short(got)
    raise Wrong(f"a batch of {batch} over {n} towers must raise ValueError, got {shown}", hint)


@task(LAB, 2, references=("dtf.towers.average_gradients",))
def task2(answer: Any) -> str:
    """``average_gradients(tower_grads) -> [grad per variable]``, ``tower_grads[t][v]`` tower
    ``t``'s gradient of variable ``v``: the mean over 2, 4 and 1 tower(s); a sum is named."""
    import tensorflow as tf

    for num_towers in (2, 4, 1):
        rng = np.random.default_rng(num_towers)
        grads = [
            [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=(2,)).astype(np.float32)]
            for _ in range(num_towers)
        ]
        got = call_function(answer, [[tf.constant(g) for g in tower] for tower in grads])
        what = f"{num_towers} tower(s) with 2 variables"
        if not isinstance(got, (list, tuple)) or len(got) != 2:
            raise Wrong(
                f"for {what}: expected a list of 2 gradients (one per variable), got {_count(got)}",
                "your list does not hold one entry per variable",
            )
        for v in range(2):
            each = [tower[v] for tower in grads]
            expect_close(
                np.mean(each, 0),
                got[v],
                what=f"variable {v}, {what}",
                atol=1e-5,
                hint=_average_slip(got[v], each),
                show_expected=False,
            )
    return "averages over 1, 2 and 4 towers match"


@dataclass
class _Run:
    """What the learner's steps did: the first step's MatMul and ReluGrad (the hidden layer's
    gradient) devices, the devices after the
    last MatMul (averaging, update) and whether its log shows every op; the variables given
    None gradients; each :func:`loss` call's examples; when the first step ran eagerly, each
    loss call's labels and device, and from them (shard, device of its logits) of each
    tower; the error that stopped them, if any."""

    matmul_devices: list[str] = field(default_factory=list)
    gradient_devices: list[str] = field(default_factory=list)
    update_devices: list[str] = field(default_factory=list)
    complete: bool = False
    none_gradients: dict[str, None] = field(default_factory=dict)
    loss_batches: list[int | None] = field(default_factory=list)
    loss_calls: list[tuple[np.ndarray, str]] = field(default_factory=list)
    towers: list[tuple[int, str]] = field(default_factory=list)
    failure: Wrong | None = None


#: Ops placed with their variable (or constants), wherever the scope asks: not a choice.
_PLACED_WITH_VARIABLE = ("Const", "NoOp", "_Arg", "_Retval", "VarHandleOp", "ReadVariableOp")


def _update_devices(table) -> list[str]:
    """The devices of the ops after the last MatMul (the end of the last tower's backward
    pass), in log order: where the gradients were averaged and applied."""
    table = eager_rows(table)
    kinds = list(table["op_type"])
    if "MatMul" not in kinds:
        return []
    after = table.iloc[len(kinds) - kinds[::-1].index("MatMul") :]
    chosen = [
        device
        for kind, device in zip(after["op_type"], after["device"], strict=True)
        if kind not in _PLACED_WITH_VARIABLE and not kind.endswith("VariableOp")
    ]
    return list(dict.fromkeys(chosen))


@contextmanager
def _watching(params, run: _Run, calls: bool = False):
    """Within the block, note in ``run`` the variables ``tape.gradient`` returns None for (a
    loss computed outside the tape) and the examples of every :func:`loss` call (``calls``:
    also its labels and device, when eager)."""
    import tensorflow as tf

    global _loss_batches, _loss_calls
    _loss_batches = run.loss_batches
    _loss_calls = run.loss_calls if calls else None
    original = tf.GradientTape.gradient
    names = {id(v): k for k, v in params.items()}

    @tf.autograph.experimental.do_not_convert
    def gradient(self, target, sources, *args, **kwargs):
        grads = original(self, target, sources, *args, **kwargs)
        try:
            pairs = zip(tf.nest.flatten(sources), tf.nest.flatten(grads), strict=True)
            for i, (source, grad) in enumerate(pairs):
                if grad is None:
                    run.none_gradients[names.get(id(source), f"source {i}")] = None
        except (TypeError, ValueError):  # an odd structure: nothing to note
            pass
        return grads

    tf.GradientTape.gradient = gradient
    try:
        yield
    finally:
        tf.GradientTape.gradient = original
        _loss_batches = _loss_calls = None


def _sgd_step(params, x, y, factor: float = 1.0) -> None:
    """One single-device step of :func:`loss` on ``params``, ``factor`` times the rate."""
    import tensorflow as tf

    from dtf import towers

    with tf.device(_PARAMETER_DEVICE):
        with tf.GradientTape() as tape:
            reference_loss = loss(y, towers.mlp_logits(params, x))
        grads = tape.gradient(reference_loss, list(params.values()))
        for g, v in zip(grads, params.values(), strict=True):
            v.assign_sub(LEARNING_RATE * factor * g)


def _train(step, learner, references, digits, batch, names, logging_on) -> _Run:
    """Run the learner's step and the single-device ``references`` (parameters, factor of the
    learning rate) side by side for :data:`STEPS` steps."""
    import tensorflow as tf

    from dtf import placement

    run = _Run()
    for i in range(STEPS):
        x = tf.constant(digits.x_train[i * batch : (i + 1) * batch])
        y = tf.constant(digits.y_train[i * batch : (i + 1) * batch])
        args = (learner, x, y, list(names), LEARNING_RATE)
        try:
            with _watching(learner, run, calls=i == 0):
                if i == 0 and logging_on:
                    with placement.capture() as log:
                        call_function(step, *args)
                    run.matmul_devices = devices_of(log.table, ["MatMul"])
                    run.gradient_devices = devices_of(log.table, ["ReluGrad"])
                    run.update_devices = _update_devices(log.table)
                    # Every op run was logged: eager ops in Jupyter, or a tf.function traced
                    # just now (a plain script logs an eager op only once per device).
                    eager = bool((log.table["source"] == "eager").any())
                    run.complete = eager or hasattr(step, "get_concrete_function")
                else:
                    call_function(step, *args)
        except Wrong as exc:
            run.failure = exc
            return run
        if i == 0:
            run.towers = _towers(run.loss_calls, as_array(y), len(names))
        for params, factor in references:
            _sgd_step(params, x, y, factor)
    return run


def _towers(calls, y, num_towers: int) -> list[tuple[int, str]]:
    """``(shard, device)`` of each loss call whose labels are exactly one shard of ``y``, the
    global batch's labels cut into ``num_towers`` in order."""
    shards = np.split(y, num_towers) if len(y) % num_towers == 0 else []
    out = []
    for labels, device in calls:
        same = [j for j, shard in enumerate(shards) if np.array_equal(labels, shard)]
        if len(same) == 1:
            out.append((same[0], device))
    return out


def _matches(params, reference) -> bool:
    keys = list(reference)
    return all_close([as_array(params[k]) for k in keys], [as_array(reference[k]) for k in keys])


#: Task 3: the known mistakes behind wrong weights, over the facts of :func:`task3`.
TASK3_MISTAKES = (
    Mistake(
        lambda summed, **_: summed,
        "the weights after {steps} steps are those of training with the sum of the {towers} "
        "towers' gradients, a step {towers} times too large",
        "each tower's gradient is already that of a mean loss: adding them up makes "
        "the step as many times too large as there are towers",
    ),
    Mistake(
        lambda none, **_: bool(none),
        "tape.gradient returned None instead of a gradient for {none}, and then {happened}. "
        "A None gradient means the tape did not record the loss being computed from that "
        "variable, as when the loss is computed outside the `with tf.GradientTape()` block",
        "look at where each tower's logits and loss are computed, and at what the tape "
        "records there",
    ),
)


@task(
    LAB,
    3,
    references=(
        "dtf.towers.split_batch",
        "dtf.towers.average_gradients",
        "dtf.towers.make_tower_train_step",
    ),
)
def task3(answer: Any, setup: Any) -> str:
    """``tower_step(params, x, y, devices, learning_rate)``: :data:`STEPS` steps beside
    single-device training (weights to :data:`ATOL`, TensorFloat-32 off); then each
    :func:`loss` call must see one shard and, when the log shows every op, a MatMul must run
    on every device and the averaging and the update on the CPU."""
    import tensorflow as tf

    from dtf import data, towers

    names = device_names(setup)
    digits = data.load("digits", flatten=True)
    batch = PER_DEVICE * len(names)
    dims = (digits.x_train.shape[1], HIDDEN, digits.num_classes)
    with tf.device(_PARAMETER_DEVICE):
        learner, reference, summed = (towers.init_mlp(*dims, seed=1) for _ in range(3))
    initial = {k: v.numpy() for k, v in learner.items()}
    step = answer
    if hasattr(answer, "python_function") and hasattr(answer, "get_concrete_function"):
        # A new tf.function of the same Python function: every check traces it anew (a trace
        # logs the placement of the ops inside), with the same weights and verdict.
        step = tf.function(answer.python_function)
    logging_on = bool(tf.debugging.get_log_device_placement())
    references = [(reference, 1), (summed, len(names))]
    with full_float32():
        run = _train(step, learner, references, digits, batch, names, logging_on)

    nones = list(run.none_gradients)
    facts = dict(steps=STEPS, towers=len(names), summed=False, happened="")
    facts["none"] = ", ".join(nones[:4]) + (", ..." if len(nones) > 4 else "")
    if run.failure is not None:
        diagnose(TASK3_MISTAKES, **{**facts, "happened": run.failure.detail.rstrip(".")})
        raise run.failure
    if all(np.array_equal(initial[k], learner[k].numpy()) for k in learner):
        diagnose(TASK3_MISTAKES, **{**facts, "happened": "the weights stayed the initial ones"})
        raise Wrong(
            f"after {STEPS} calls the weights are still the initial ones",
            "the step itself updates the variables of params, in place, with the averaged "
            "gradients",
        )
    try:
        worst = max(
            expect_close(
                reference[key],
                learner[key],
                what=f"{key} after {STEPS} steps (vs. single-device training)",
                atol=ATOL,
                hint="each tower's loss is the mean over its shard (checks.lab02.loss), "
                "the gradients are averaged over the towers, and they are applied once "
                "per step",
                show_expected=False,
            )
            for key in towers.MLP_VARIABLES
        )
    except Wrong as exc:
        facts.update(summed=len(names) > 1 and _matches(learner, summed))
        diagnose(TASK3_MISTAKES, **{**facts, "happened": "the weights went wrong"})
        raise exc from None
    if not run.loss_batches:
        raise Wrong(
            "the weights are right, but your step never called checks.lab02.loss",
            "the task names the loss each tower computes",
        )
    shards = sorted({size for size in run.loss_batches if size != PER_DEVICE and size})
    if len(names) > 1 and shards:
        whole = " (the whole global batch)" if shards[-1] == batch else ""
        raise Wrong(
            f"the weights are right, but a tower's loss was computed on {shards[-1]} "
            f"examples{whole}, not on its shard of {PER_DEVICE}: averaging the towers' "
            "gradients of the same examples hides it, while every device did the work of all",
            "look at what your loop hands each tower: tower i takes the i-th shard of (x, y)",
        )
    wanted = [short_device(n) for n in names]
    note = ""
    missing = [d for d in wanted if d not in run.matmul_devices]
    # No MatMul at all in a "complete" log means a function traced before the check ran
    # (its ops are not logged again): the weights prove the MatMuls ran, so say nothing.
    if logging_on and ((run.complete and run.matmul_devices) or not missing):
        if missing:
            raise Wrong(
                f"the weights are right, but no MatMul ran on {', '.join(missing)} "
                f"(MatMuls ran on {', '.join(run.matmul_devices)})",
                "tower i's forward pass and gradients belong on devices[i]: look at the "
                "device scope around them",
            )
        no_gradient = [d for d in wanted if d not in run.gradient_devices]
        if run.complete and run.gradient_devices and no_gradient:
            raise Wrong(
                f"the weights are right, but no tower's gradient was computed on "
                f"{', '.join(no_gradient)}: the ReLU's gradient (ReluGrad) ran on "
                f"{', '.join(run.gradient_devices)} only",
                "a tower's gradients belong on its device too: look at the device scope in "
                "effect where your code calls tape.gradient",
            )
        elsewhere = [d for d in run.update_devices if d != short_device(_PARAMETER_DEVICE)]
        if run.complete and elsewhere:
            raise Wrong(
                f"the weights are right, but after the towers the gradients were averaged or "
                f"applied on {', '.join(elsewhere)}, not on {_PARAMETER_DEVICE}, where the "
                "parameters live",
                "look at the device scope in effect where you average and apply the "
                "gradients, after the loop over the towers",
            )
        note = f"; the towers' MatMuls ran on {', '.join(wanted)}"
    elif logging_on:
        note = (
            "; placement only partly visible (outside Jupyter TensorFlow logs an eager "
            "op's placement only the first time it runs on a device)"
        )
    for shard, device in run.towers if len(names) > 1 else ():
        if device != wanted[shard]:
            raise Wrong(
                f"the weights are right, but the logits of shard {shard} were computed on "
                f"{device}, not on devices[{shard}] ({wanted[shard]})",
                "look at how your loop pairs the shards with the devices",
            )
    return (
        f"{STEPS} tower steps over {len(names)} devices match single-device "
        f"training (largest difference {worst:.1e}){note}"
    )


#: Task 4: the measured steps have this many towers (tower ``i`` on device ``i % n``: the
#: measurement is the same for any number of devices), with this many examples each.
DIAGNOSE_TOWERS = 4
DIAGNOSE_PER_TOWER = 16
#: Task 4: the diagnoses to choose from, by key.
DIAGNOSES = {
    "right": "it trains as one device does on the global batch",
    "summed-gradients": "it adds the towers' gradients instead of averaging them",
    "summed-loss": "each tower's loss is the sum over its examples instead of their mean",
    "last-tower": "it applies one tower's gradients only (each tower's overwrite the one before)",
}
#: Task 4: the candidate steps, by name, and what each one does (the checker's verdict comes
#: from measuring them, :func:`measured_diagnoses`).
CANDIDATES = {"A": "summed-loss", "B": "right", "C": "last-tower", "D": "summed-gradients"}
#: Task 4: an update whose cosine with one device's is above this points the same way.
_SAME_DIRECTION = 0.9999
_SCALE_TOLERANCE = 1e-3
_SIZE, _COSINE = "update size / one device's", "cosine with one device's update"


def _mystery_step(kind: str):
    """The tower step of :data:`CANDIDATES` ``kind``: ``step(params, x, y, devices, lr)``."""
    import tensorflow as tf

    from dtf import towers

    def step(params, x, y, devices, learning_rate):
        variables = list(params.values())
        tower_grads = []
        for i, (x_i, y_i) in enumerate(towers.split_batch(x, y, DIAGNOSE_TOWERS)):
            with tf.device(devices[i % len(devices)]):
                with tf.GradientTape() as tape:
                    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                        labels=y_i, logits=towers.mlp_logits(params, x_i)
                    )
                    reduce = tf.reduce_sum if kind == "summed-loss" else tf.reduce_mean
                    tower_loss = reduce(per_example)
                grads = tape.gradient(tower_loss, variables)
            tower_grads = [grads] if kind == "last-tower" else [*tower_grads, grads]
        with tf.device(_PARAMETER_DEVICE):
            if kind == "summed-gradients":
                update = [tf.add_n(list(g)) for g in zip(*tower_grads, strict=True)]
            else:
                update = towers.average_gradients(tower_grads)
            for g, v in zip(update, variables, strict=True):
                v.assign_sub(learning_rate * g)

    return step


def measure_steps(setup: Any):
    """One step of each of :data:`CANDIDATES` and of one device on the same global batch, from
    the same weights: a DataFrame with the size of each update over one device's, the cosine
    between the two, and the largest weight difference (TensorFloat-32 off)."""
    import pandas as pd
    import tensorflow as tf

    from dtf import data, towers

    names = device_names(setup)
    digits = data.load("digits", flatten=True)
    batch = DIAGNOSE_TOWERS * DIAGNOSE_PER_TOWER
    x, y = tf.constant(digits.x_train[:batch]), tf.constant(digits.y_train[:batch])
    dims = (digits.x_train.shape[1], HIDDEN, digits.num_classes)

    def update_of(step) -> np.ndarray:
        with tf.device(_PARAMETER_DEVICE):
            params = towers.init_mlp(*dims, seed=2)
        before = np.concatenate([v.numpy().ravel() for v in params.values()])
        step(params, x, y, list(names), LEARNING_RATE)
        after = np.concatenate([v.numpy().ravel() for v in params.values()])
        return (after - before).astype(np.float64)

    with full_float32():
        reference = update_of(lambda params, x, y, *_: _sgd_step(params, x, y))
        rows = {}
        for name, kind in CANDIDATES.items():
            update = update_of(_mystery_step(kind))
            norms = np.linalg.norm(update) * np.linalg.norm(reference)
            rows[name] = {
                _SIZE: round(float(np.linalg.norm(update) / np.linalg.norm(reference)), 3),
                _COSINE: round(float(update @ reference / norms), 4),
                "largest weight difference": f"{np.max(np.abs(update - reference)):.1e}",
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "step"
    return table


def measured_diagnoses(table: Any) -> dict[str, str]:
    """Each step's diagnosis from :func:`measure_steps`: one device's direction and size
    (right), :data:`DIAGNOSE_TOWERS` times it (summed gradients), :data:`DIAGNOSE_PER_TOWER`
    times (summed losses); another direction: one tower's gradients."""
    by_factor = {1: "right", DIAGNOSE_TOWERS: "summed-gradients"}
    by_factor[DIAGNOSE_PER_TOWER] = "summed-loss"
    out = {}
    for name, row in table.iterrows():
        if row[_COSINE] < _SAME_DIRECTION:
            out[str(name)] = "last-tower"
            continue
        size = row[_SIZE]
        close = [f for f in by_factor if abs(size - f) <= _SCALE_TOLERANCE * f]
        out[str(name)] = by_factor[close[0]] if close else "unknown"
    return out


_STEPS_WRONG = "{wrong} of {total} diagnoses are wrong: {steps}"
_SUMMED = ("summed-gradients", "summed-loss")
#: Task 4: what the measurements of the first step diagnosed wrongly say against its claim.
TASK4_MISTAKES = (
    Mistake(
        lambda claim, **_: claim == "right",
        _STEPS_WRONG,
        "step {name}'s update is {size:.3f} times one device's, at a cosine of {cosine:.4f}: "
        "a step that trains as one device does makes one device's update, in size and in "
        "direction",
    ),
    Mistake(
        lambda claim, cosine, **_: claim in _SUMMED and cosine < _SAME_DIRECTION,
        _STEPS_WRONG,
        "step {name}'s update points elsewhere than one device's (cosine {cosine:.4f}): "
        "adding instead of averaging scales an update, it cannot turn it",
    ),
    Mistake(
        lambda claim, **_: claim in _SUMMED,
        _STEPS_WRONG,
        "step {name}'s update is {size:.3f} times one device's: that factor is not the one "
        "the mistake you chose makes",
    ),
    Mistake(
        lambda **_: True,
        _STEPS_WRONG,
        "step {name}'s update points where one device's does (cosine {cosine:.4f}): one "
        "tower's gradients, from its share of the batch only, would point elsewhere",
    ),
)


@task(LAB, 4, references=("dtf.checks.lab02.measured_diagnoses", "dtf.checks.lab02.CANDIDATES"))
def task4(answer: Any, setup: Any) -> str:
    """``diagnose_steps() -> {step: key of DIAGNOSES}`` for :data:`CANDIDATES`, against the
    diagnoses the checker derives from measuring the steps again; a wrong verdict names the
    steps diagnosed wrongly, and what the numbers of the first say against its claim."""
    got = call(answer)
    expect_kind(got, Mapping, "a dict {step: key of DIAGNOSES}")
    claims = {}
    for name in CANDIDATES:
        if name not in got:
            raise Wrong(
                f"there is no diagnosis for step {name}",
                f"give one entry per step: {', '.join(CANDIDATES)}",
            )
        claim = got[name]
        if not isinstance(claim, str) or claim.strip().lower() not in DIAGNOSES:
            raise Wrong(
                f"for step {name}: {short(claim)} is not one of the diagnoses",
                f"choose a key of DIAGNOSES: {', '.join(DIAGNOSES)}",
            )
        claims[name] = claim.strip().lower()
    table = measure_steps(setup)
    truth = measured_diagnoses(table)
    wrong = [name for name in CANDIDATES if claims[name] != truth[name]]
    if wrong:
        first = table.loc[wrong[0]]
        diagnose(
            TASK4_MISTAKES,
            wrong=len(wrong),
            total=len(CANDIDATES),
            steps=f"{plural(len(wrong), 'step')} {listed(wrong)}",
            name=wrong[0],
            claim=claims[wrong[0]],
            size=first[_SIZE],
            cosine=first[_COSINE],
        )
    right = next(name for name in CANDIDATES if truth[name] == "right")
    others = ", ".join(f"{n}: {truth[n]}" for n in CANDIDATES if n != right)
    return (
        f"step {right} trains as one device does; the measurements give away each of the "
        f"others' mistakes ({others})"
    )
