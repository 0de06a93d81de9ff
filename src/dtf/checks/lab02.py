"""Checkers of Lab 02 · Towers (``labs/02_towers_lab.ipynb``).

1. :func:`task1`: split a global batch into equal, in-order shards;
2. :func:`task2`: average the towers' gradients, variable by variable;
3. :func:`task3`: one synchronous tower step, compared with single-device training;
4. :func:`task4` (diagnose): four tower steps, measured against one device: which one is
   right, and what is wrong with each of the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dtf.checks.core import (
    Wrong,
    as_array,
    call,
    call_function,
    device_names,
    devices_of,
    expect_close,
    expect_kind,
    expected_got,
    full_float32,
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


def loss(y, logits):
    """The mean softmax cross-entropy that the towers of task 3 and the reference both use."""
    import tensorflow as tf

    if _loss_batches is not None:  # Task 3's checker is watching: how big is each shard?
        _loss_batches.append(y.shape[0])
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))


def _count(value: Any) -> str:
    """``"a list of 3 items"`` for lists and tuples, else a short description."""
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} item{'s' if len(value) != 1 else ''}"
    return short(value)


# --------------------------------------------------------------------------- task 1


def _batch(n: int):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64)
    return x, y


@task(LAB, 1, references=("dtf.towers.split_batch",))
def task1(answer: Any) -> str:
    """``split_batch(x, y, num_towers) -> [(x_0, y_0), ...]``: equal, in-order shards, as
    :func:`dtf.towers.split_batch`; a batch that does not divide evenly raises ValueError."""
    from dtf import towers

    for batch, n in SPLITS:
        x, y = _batch(batch)
        got = call_function(answer, x, y, n)
        expected = towers.split_batch(x, y, n)
        what = f"a batch of {batch} over {n} tower(s)"
        if not isinstance(got, (list, tuple)) or len(got) != n:
            raise Wrong(
                f"for {what}: expected a list of {n} (x_i, y_i) pairs, got {_count(got)}",
                "one (x_shard, y_shard) pair per tower",
            )
        for i, (shard, (x_i, y_i)) in enumerate(zip(got, expected, strict=True)):
            if not isinstance(shard, (list, tuple)) or len(shard) != 2:
                raise Wrong(
                    expected_got("a pair (x_i, y_i)", shard, f"shard {i} of {what}"),
                    "each item of the list is one tower's pair: its x shard, then its y shard",
                )
            hint = "the shards keep the examples in order: shard 0 holds the first ones"
            expect_close(x_i, shard[0], what=f"x of shard {i} of {what}", hint=hint)
            expect_close(y_i, shard[1], what=f"y of shard {i} of {what}", hint=hint)
    batch, n = UNEVEN
    x, y = _batch(batch)
    uneven_hint = (
        "unequal shards would make the average of the tower gradients differ from the "
        "gradient of the global batch: the task says how to refuse such a batch"
    )
    try:
        got = answer(x, y, n)
    except ValueError:
        pass
    except Exception as exc:
        raise Wrong(
            f"a batch of {batch} over {n} towers raised {user_error_line(exc)} instead of "
            "ValueError",
            uneven_hint,
        ) from None
    else:
        try:
            shown = f"shards of sizes {[len(as_array(shard[0])) for shard in got]}"
        except Exception:
            shown = short(got)
        raise Wrong(
            f"a batch of {batch} over {n} towers must raise ValueError, got {shown}",
            uneven_hint,
        )
    return (
        f"{len(SPLITS)} splits match dtf.towers.split_batch, and a batch of "
        f"{batch} over {n} towers is refused"
    )


# --------------------------------------------------------------------------- task 2


def _tower_grads(num_towers: int, seed: int) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        [rng.normal(size=(3, 2)).astype(np.float32), rng.normal(size=(2,)).astype(np.float32)]
        for _ in range(num_towers)
    ]


@task(LAB, 2, references=("dtf.towers.average_gradients",))
def task2(answer: Any) -> str:
    """``average_gradients(tower_grads) -> [grad per variable]`` with
    ``tower_grads[t][v]`` tower ``t``'s gradient of variable ``v``; compared with the mean
    over towers for 2, 4 and 1 tower(s)."""
    import tensorflow as tf

    for num_towers in (2, 4, 1):
        grads = _tower_grads(num_towers, seed=num_towers)
        given = [[tf.constant(g) for g in tower] for tower in grads]
        got = call_function(answer, given)
        expected = [np.mean([tower[v] for tower in grads], axis=0) for v in range(2)]
        what = f"{num_towers} tower(s) with 2 variables"
        if not isinstance(got, (list, tuple)) or len(got) != 2:
            raise Wrong(
                f"for {what}: expected a list of 2 gradients (one per variable), got {_count(got)}",
                "average across the towers, variable by variable: the result has one entry "
                "per variable, not one per tower",
            )
        for v, want in enumerate(expected):
            total = np.sum([tower[v] for tower in grads], axis=0)
            hint = (
                "each variable's gradient is the mean, over the towers, of tower_grads[t][v] "
                "for that variable v"
            )
            try:
                if num_towers > 1 and np.allclose(as_array(got[v]), total, atol=1e-5):
                    hint = "that is the sum of the towers' gradients, not their mean"
            except (TypeError, ValueError):
                pass
            expect_close(want, got[v], what=f"variable {v}, {what}", atol=1e-5, hint=hint)
    return "averages over 1, 2 and 4 towers match"


# --------------------------------------------------------------------------- task 3


@dataclass
class _Run:
    """What the learner's steps did: the first step's MatMul devices, the devices after the
    last MatMul (averaging, update) and whether its log shows every op; the variables given
    None gradients; each :func:`loss` call's examples; the error that stopped them, if any."""

    matmul_devices: list[str] = field(default_factory=list)
    update_devices: list[str] = field(default_factory=list)
    complete: bool = False
    none_gradients: dict[str, None] = field(default_factory=dict)
    loss_batches: list[int | None] = field(default_factory=list)
    failure: Wrong | None = None


#: Ops placed with their variable (or constants), wherever the scope asks: not a choice.
_PLACED_WITH_VARIABLE = ("Const", "NoOp", "_Arg", "_Retval", "VarHandleOp", "ReadVariableOp")


def _update_devices(table) -> list[str]:
    """The devices of the ops after the towers' last MatMul (the end of the last tower's
    backward pass), in the order of the log: where the gradients were averaged and applied."""
    if (table["source"] == "eager").any():
        table = table[table["source"] == "eager"]
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


def _fresh_trace(answer: Any) -> Any:
    """A ``tf.function`` answer as a new ``tf.function`` of the same Python function, so that
    every check traces it anew (a trace is what logs the placement of the ops inside a
    function), with the same weights and the same verdict each time; anything else as is."""
    python_function = getattr(answer, "python_function", None)
    if python_function is None or not hasattr(answer, "get_concrete_function"):
        return answer
    import tensorflow as tf

    return tf.function(python_function)


@contextmanager
def _watching(params, run: _Run):
    """Within the block, note in ``run`` the variables ``tape.gradient`` returns None for (a
    loss computed outside the tape) and the examples of every :func:`loss` call."""
    import tensorflow as tf

    global _loss_batches
    found, _loss_batches = run.none_gradients, run.loss_batches
    tape_class = tf.GradientTape
    original = tape_class.gradient
    names = {id(v): k for k, v in params.items()}

    @tf.autograph.experimental.do_not_convert
    def gradient(self, target, sources, *args, **kwargs):
        grads = original(self, target, sources, *args, **kwargs)
        try:
            pairs = zip(tf.nest.flatten(sources), tf.nest.flatten(grads), strict=True)
            for i, (source, grad) in enumerate(pairs):
                if grad is None:
                    found[names.get(id(source), f"source {i}")] = None
        except (TypeError, ValueError):  # an odd structure: nothing to note
            pass
        return grads

    tape_class.gradient = gradient
    try:
        yield
    finally:
        tape_class.gradient = original
        _loss_batches = None


def _train(step, learner, references, digits, batch, names, logging_on) -> _Run:
    """Run the learner's step and the single-device reference steps side by side.

    ``references`` maps a name to parameters and a factor of the learning rate: the
    ``averaged`` reference is the right answer; the ``summed`` one is what summing the tower
    gradients instead of averaging them gives (``len(names)`` times the step)."""
    import tensorflow as tf

    from dtf import placement, towers

    run = _Run()
    for i in range(STEPS):
        x = tf.constant(digits.x_train[i * batch : (i + 1) * batch])
        y = tf.constant(digits.y_train[i * batch : (i + 1) * batch])
        args = (learner, x, y, list(names), LEARNING_RATE)
        try:
            with _watching(learner, run):
                if i == 0 and logging_on:
                    with placement.capture() as log:
                        call_function(step, *args)
                    run.matmul_devices = devices_of(log.table, ["MatMul"])
                    run.update_devices = _update_devices(log.table)
                    # Complete when every op run was logged: eager ops in Jupyter
                    # ("Executing op" lines), or a tf.function traced just now. In a plain
                    # script an eager op's placement is printed only the first time it runs
                    # on a device.
                    run.complete = bool((log.table["source"] == "eager").any()) or hasattr(
                        step, "get_concrete_function"
                    )
                else:
                    call_function(step, *args)
        except Wrong as exc:
            run.failure = exc
            return run
        with tf.device(_PARAMETER_DEVICE):
            for params, factor in references.values():
                with tf.GradientTape() as tape:
                    reference_loss = loss(y, towers.mlp_logits(params, x))
                grads = tape.gradient(reference_loss, list(params.values()))
                for g, v in zip(grads, params.values(), strict=True):
                    v.assign_sub(LEARNING_RATE * factor * g)
    return run


def _none_gradients_wrong(run: _Run, what_happened: str) -> Wrong:
    names = list(run.none_gradients)
    shown = ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")
    return Wrong(
        f"tape.gradient returned None instead of a gradient for {shown}, and then "
        f"{what_happened}. A None gradient means the tape did not record the loss being "
        "computed from that variable, as when the loss is computed outside the "
        "`with tf.GradientTape()` block",
        "look at where each tower's logits and loss are computed: inside the tape's block, "
        "from the variables of params, before tape.gradient asks for their gradients",
    )


def _matches(params, reference) -> bool:
    return all(
        np.allclose(as_array(params[k]), as_array(reference[k]), rtol=1e-4, atol=1e-4)
        for k in reference
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
    """``tower_step(params, x, y, devices, learning_rate)``: one synchronous step, a tower per
    device, the gradients averaged and applied on the CPU. Run for :data:`STEPS` steps beside
    a single-device step (weights to 1e-5, TensorFloat-32 off); then each :func:`loss` call
    must see one shard and, when the log shows every op, a MatMul must run on every device and
    the ops after the last one (the averaging and the update) on the CPU. Summed and None
    gradients are named."""
    import tensorflow as tf

    from dtf import data, towers

    names = device_names(setup)
    digits = data.load("digits", flatten=True)
    batch = PER_DEVICE * len(names)
    dims = (digits.x_train.shape[1], HIDDEN, digits.num_classes)
    with tf.device(_PARAMETER_DEVICE):
        learner = towers.init_mlp(*dims, seed=1)
        references = {
            "averaged": (towers.init_mlp(*dims, seed=1), 1),
            "summed": (towers.init_mlp(*dims, seed=1), len(names)),
        }
    initial = {k: v.numpy() for k, v in learner.items()}
    step = _fresh_trace(answer)

    logging_on = bool(tf.debugging.get_log_device_placement())
    with full_float32():
        run = _train(step, learner, references, digits, batch, names, logging_on)

    if run.failure is not None:
        if run.none_gradients:
            raise _none_gradients_wrong(run, run.failure.detail.rstrip("."))
        raise run.failure
    if all(np.array_equal(initial[k], learner[k].numpy()) for k in learner):
        if run.none_gradients:
            raise _none_gradients_wrong(run, "the weights stayed the initial ones")
        raise Wrong(
            f"after {STEPS} calls the weights are still the initial ones",
            "the step itself updates the variables of params, in place, with the averaged "
            "gradients",
        )
    reference, _ = references["averaged"]
    summed, _ = references["summed"]
    worst = 0.0
    try:
        for key in towers.MLP_VARIABLES:
            worst = max(
                worst,
                expect_close(
                    reference[key],
                    learner[key],
                    what=f"{key} after {STEPS} steps (vs. single-device training)",
                    atol=ATOL,
                    hint="each tower's loss is the mean over its shard (checks.lab02.loss), "
                    "the gradients are averaged over the towers, and they are applied once "
                    "per step",
                ),
            )
    except Wrong as exc:
        if len(names) > 1 and _matches(learner, summed):
            raise Wrong(
                f"the weights after {STEPS} steps are those of training with the sum of the "
                f"{len(names)} towers' gradients, a step {len(names)} times too large",
                "each tower's gradient is already that of a mean loss: adding them up makes "
                "the step as many times too large as there are towers",
            ) from None
        if run.none_gradients:
            raise _none_gradients_wrong(run, "the weights went wrong") from None
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
    return (
        f"{STEPS} tower steps over {len(names)} devices match single-device "
        f"training (largest difference {worst:.1e}){note}"
    )


# --------------------------------------------------------------------------- task 4

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
#: Task 4: the candidate steps, by name, and what each one does (the checker's verdict comes from
#: measuring them, :func:`measured_diagnoses`).
CANDIDATES = {"A": "summed-loss", "B": "right", "C": "last-tower", "D": "summed-gradients"}
#: Task 4: an update whose cosine with one device's is above this points the same way.
_SAME_DIRECTION = 0.9999
_SCALE_TOLERANCE = 1e-3


def _mystery_step(kind: str):
    """The tower step of :data:`CANDIDATES` ``kind``: ``step(params, x, y, devices, lr)``."""
    import tensorflow as tf

    from dtf import towers

    def step(params, x, y, devices, learning_rate):
        variables = list(params.values())
        tower_grads = []
        shards = towers.split_batch(x, y, DIAGNOSE_TOWERS)
        for i, (x_i, y_i) in enumerate(shards):
            with tf.device(devices[i % len(devices)]):
                with tf.GradientTape() as tape:
                    logits = towers.mlp_logits(params, x_i)
                    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                        labels=y_i, logits=logits
                    )
                    if kind == "summed-loss":
                        tower_loss = tf.reduce_sum(per_example)
                    else:
                        tower_loss = tf.reduce_mean(per_example)
                grads = tape.gradient(tower_loss, variables)
            if kind == "last-tower":
                tower_grads = [grads]
            else:
                tower_grads.append(grads)
        with tf.device(_PARAMETER_DEVICE):
            if kind == "summed-gradients":
                update = [tf.add_n(list(g)) for g in zip(*tower_grads, strict=True)]
            else:
                update = towers.average_gradients(tower_grads)
            for g, v in zip(update, variables, strict=True):
                v.assign_sub(learning_rate * g)

    return step


def measure_steps(setup: Any):
    """One step of each of :data:`CANDIDATES` and of one device on the same global batch, from the
    same initial weights: a DataFrame, one row per step, with the size of its update over
    one device's, the cosine between the two updates, and the largest weight difference
    from one device after the step. TensorFloat-32 is off while it runs."""
    import pandas as pd
    import tensorflow as tf

    from dtf import data, towers

    names = device_names(setup)
    digits = data.load("digits", flatten=True)
    batch = DIAGNOSE_TOWERS * DIAGNOSE_PER_TOWER
    x = tf.constant(digits.x_train[:batch])
    y = tf.constant(digits.y_train[:batch])
    dims = (digits.x_train.shape[1], HIDDEN, digits.num_classes)

    def update_of(step) -> np.ndarray:
        with tf.device(_PARAMETER_DEVICE):
            params = towers.init_mlp(*dims, seed=2)
        before = np.concatenate([v.numpy().ravel() for v in params.values()])
        step(params, x, y, list(names), LEARNING_RATE)
        after = np.concatenate([v.numpy().ravel() for v in params.values()])
        return (after - before).astype(np.float64)

    def one_device(params, x, y, devices, learning_rate):
        with tf.device(_PARAMETER_DEVICE):
            with tf.GradientTape() as tape:
                reference_loss = loss(y, towers.mlp_logits(params, x))
            grads = tape.gradient(reference_loss, list(params.values()))
            for g, v in zip(grads, params.values(), strict=True):
                v.assign_sub(learning_rate * g)

    with full_float32():
        reference = update_of(one_device)
        rows = {}
        for name, kind in CANDIDATES.items():
            update = update_of(_mystery_step(kind))
            size = float(np.linalg.norm(update) / np.linalg.norm(reference))
            cosine = float(
                update @ reference / (np.linalg.norm(update) * np.linalg.norm(reference))
            )
            rows[name] = {
                "update size / one device's": round(size, 3),
                "cosine with one device's update": round(cosine, 4),
                "largest weight difference": f"{np.max(np.abs(update - reference)):.1e}",
            }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "step"
    return table


def _scale(size: float) -> int | None:
    """The whole factor an update is off by, or None."""
    for factor in (1, DIAGNOSE_TOWERS, DIAGNOSE_PER_TOWER):
        if abs(size - factor) <= _SCALE_TOLERANCE * factor:
            return factor
    return None


def measured_diagnoses(table: Any) -> dict[str, str]:
    """The diagnosis of each step from its measurements (:func:`measure_steps`): same
    direction as one device and the same size (right), :data:`DIAGNOSE_TOWERS` times the size
    (summed gradients) or :data:`DIAGNOSE_PER_TOWER` times (summed losses); another
    direction: one tower's gradients."""
    out = {}
    for name, row in table.iterrows():
        same_way = row["cosine with one device's update"] >= _SAME_DIRECTION
        factor = _scale(row["update size / one device's"]) if same_way else None
        out[str(name)] = {
            1: "right",
            DIAGNOSE_TOWERS: "summed-gradients",
            DIAGNOSE_PER_TOWER: "summed-loss",
        }.get(factor, "last-tower" if not same_way else "unknown")
    return out


def _claim_hint(name: str, claim: str, row: Any) -> str:
    """What the measurements of step ``name`` say against the learner's ``claim``."""
    size = row["update size / one device's"]
    cosine = row["cosine with one device's update"]
    same_way = cosine >= _SAME_DIRECTION
    if claim == "right":
        return (
            f"step {name}'s update is {size:.3f} times one device's, at a cosine of "
            f"{cosine:.4f}: a step that trains as one device does makes one device's "
            "update, in size and in direction"
        )
    if claim in ("summed-gradients", "summed-loss") and not same_way:
        return (
            f"step {name}'s update points elsewhere than one device's (cosine {cosine:.4f}): "
            "adding instead of averaging scales an update, it cannot turn it"
        )
    if claim in ("summed-gradients", "summed-loss"):
        return (
            f"step {name}'s update is {size:.3f} times one device's: compare that factor "
            f"with the number of towers ({DIAGNOSE_TOWERS}) and of examples per tower "
            f"({DIAGNOSE_PER_TOWER}), and ask which mistake multiplies by which"
        )
    return (
        f"step {name}'s update points where one device's does (cosine {cosine:.4f}): one "
        "tower's gradients, from its share of the batch only, would point elsewhere"
    )


@task(LAB, 4, references=("dtf.checks.lab02.measured_diagnoses",))
def task4(answer: Any, setup: Any) -> str:
    """``diagnose_steps() -> {step: diagnosis}``: for each step of :data:`CANDIDATES`, a key of
    :data:`DIAGNOSES`. The checker measures the steps again (:func:`measure_steps`) and
    derives each diagnosis from the numbers (:func:`measured_diagnoses`); a wrong verdict
    names the steps diagnosed wrongly and, for the first, what its numbers say against
    the diagnosis given, never the right one."""
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
        shown = ", ".join(wrong[:-1]) + " and " + wrong[-1] if len(wrong) > 1 else wrong[0]
        first = wrong[0]
        raise Wrong(
            f"{len(wrong)} of {len(CANDIDATES)} diagnoses are wrong: "
            f"step{'s' if len(wrong) > 1 else ''} {shown}",
            _claim_hint(first, claims[first], table.loc[first]),
        )
    right = next(name for name in CANDIDATES if truth[name] == "right")
    return (
        f"step {right} trains as one device does; the measurements give away each of the "
        "others' mistakes (" + ", ".join(f"{n}: {truth[n]}" for n in CANDIDATES if n != right) + ")"
    )
