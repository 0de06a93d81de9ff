"""Checkers of Lab 01 · Masking and placement (``labs/01_masking_placement_lab.ipynb``).

1. :func:`task1`: predict the GPUs a ``CUDA_VISIBLE_DEVICES`` mask shows, and their numbers;
2. :func:`task2`: the environment of a child process that sees physical GPUs 1 and 3;
3. :func:`task3`: a matmul on one device, an addition on another, proven by the placement log;
4. :func:`task4` (diagnose): read a placement log captured in the lab and say which op did not
   run where its code asked, and why;
5. :func:`task5` (optional): what soft placement does with a device that does not exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from dtf.checks.core import (
    Wrong,
    call,
    call_function,
    code_objects,
    default_device,
    device_names,
    devices_of,
    expect_close,
    expect_kind,
    expected_got,
    placement_table,
    reason_key,
    short,
    task,
)
from dtf.placement import short_device

LAB = "lab01"

#: Task 1: the machine has this many GPUs, and these are the masks to predict.
PHYSICAL_GPUS = 4
MASKS = ("2,3", "1,0", "0,2,-1,1", "")
_MASK_HINTS = {
    "2,3": "visible ordinals always start at 0: the first GPU in the list becomes GPU:0",
    "1,0": "the order of the list is the order of the ordinals, even when it is not sorted",
    "0,2,-1,1": "CUDA stops reading the list at the first invalid index (-1): the GPUs listed "
    "after it stay hidden",
    "": "an empty CUDA_VISIBLE_DEVICES is not the same as an unset one: reread the rules",
}
#: Task 2: the physical GPUs the child process must see, in this order.
CHILD_GPUS = [1, 3]
#: Task 2: how long the child process may take (a Python start, no TensorFlow).
CHILD_TIMEOUT_S = 60.0
_MARKER = "DTF_LAB01_PARENT_SETTING"
#: A TensorFlow device name where CUDA wants a physical index: ``GPU:1``, ``/gpu:1``, ...
_TF_DEVICE_NAME = re.compile(r"(?i)^(?:/job:\S+?)?/?(?:device:)?(?:gpu|cpu):\d+$")

#: Task 3: the inputs (the 2×3 and 3×2 matrices of the *Parallel Processing notes*), the
#: bias, and the op types that count as "the addition".
A = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
B = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
BIAS = [0.5, -0.5]
_ADD_TYPES = ("AddV2", "Add", "BiasAdd", "AddN")
#: A GPU named in code: ``/gpu:1``, ``/device:GPU:1``, ``GPU:1``, or ``/gpu:`` of an f-string.
_GPU_IN_CODE = re.compile(r"(?i)/(?:device:)?gpu:(?P<n>\d*)|\bgpu:(?P<m>\d+)")


def _as_mapping(value: Any) -> Any:
    """``{0: 2, 1: 3}`` from a dict (keys/values made ints when they are whole numbers) or a
    list ``[2, 3]``; anything else is returned unchanged (and will not compare equal)."""
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return value
    out = {}
    for key, item in items:
        try:
            out[int(key)] = int(item)
        except (TypeError, ValueError):
            return dict(value) if isinstance(value, Mapping) else value
    return out


# --------------------------------------------------------------------------- task 1


@task(LAB, 1, references=("dtf.masking.visible_mapping", "dtf.masking.parse_mask"))
def task1(answer: Any) -> str:
    """Predicted ``{mask: {visible ordinal: physical id}}`` for :data:`MASKS` on a machine
    with :data:`PHYSICAL_GPUS` GPUs, compared with :func:`dtf.masking.visible_mapping`."""
    from dtf import masking

    got = call(answer)
    expect_kind(got, Mapping, "a dict {mask: {ordinal: physical id}}, as the task's example")
    for mask in MASKS:
        expected = masking.visible_mapping(mask, PHYSICAL_GPUS)
        if mask not in got:
            raise Wrong(
                f"there is no prediction for CUDA_VISIBLE_DEVICES={mask!r}",
                f"the dict needs one key per mask, exactly as written: {list(MASKS)}",
            )
        if _as_mapping(got[mask]) != expected:  # what CUDA shows is the answer: not shown
            raise Wrong(
                f"for CUDA_VISIBLE_DEVICES={mask!r}, your mapping {short(got[mask])} is not "
                "what CUDA shows",
                _MASK_HINTS[mask],
            )
    return f"all {len(MASKS)} mappings match CUDA's rules"


# --------------------------------------------------------------------------- task 2


def _environment_changes(before: Mapping[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))


@task(LAB, 2)
def task2(answer: Any) -> str:
    """``child_env(base_env) -> dict``: the environment of a child process that sees only
    physical GPUs 1 and 3 (in that order). Checked: a new dict of strings that keeps the
    parent's other variables, leaves ``base_env`` and ``os.environ`` alone, and has a
    ``CUDA_VISIBLE_DEVICES`` that :func:`dtf.masking.parse_mask` reads as ``[1, 3]``; then a
    child process is started with it to show the value arrives."""
    base = {**os.environ, "CUDA_VISIBLE_DEVICES": "0,1,2,3", _MARKER: "kept"}
    given = dict(base)
    before = dict(os.environ)
    try:
        env = call(answer, given)
    finally:
        changed = _environment_changes(before)
        if changed:  # undo it: later cells (and their children) must not inherit it
            os.environ.clear()
            os.environ.update(before)
    if changed:
        raise Wrong(
            f"the function changed this process's own environment ({', '.join(changed)})",
            "TensorFlow in this kernel initialised long ago, so that changes nothing here, "
            "and every process started later would inherit it: build and return a new dict",
        )
    if given != base:
        raise Wrong(
            "the function changed the base_env dict it was given",
            "base_env must stay as it was: the child's environment is a new dict",
        )
    expect_kind(env, Mapping, "a dict (the child's environment)")
    if "CUDA_VISIBLE_DEVICES" not in env:
        raise Wrong(
            "the environment has no CUDA_VISIBLE_DEVICES, so the child would see the "
            "parent's setting",
            "the mask is the child's own CUDA_VISIBLE_DEVICES",
        )
    bad = {k: v for k, v in env.items() if not isinstance(k, str) or not isinstance(v, str)}
    if bad:
        key, value = next(iter(bad.items()))
        raise Wrong(
            f"environment variables are strings, got {key!r}: {short(value)} "
            f"({type(value).__name__})",
            "write the value as a string, e.g. '0,1'",
        )
    lost = [k for k in base if k != "CUDA_VISIBLE_DEVICES" and env.get(k) != base[k]]
    if lost:
        raise Wrong(
            f"the child's environment lost or changed {len(lost)} of the parent's "
            f"variables (e.g. {lost[0]})",
            "start from a copy of base_env, so the child still finds PATH, HOME, "
            "Python's settings, ...; change only CUDA_VISIBLE_DEVICES",
        )
    value = env["CUDA_VISIBLE_DEVICES"]
    visible = _parse_child_mask(value)
    if visible != CHILD_GPUS:
        raise Wrong(
            expected_got(
                CHILD_GPUS,
                visible,
                f"the physical GPUs CUDA shows (CUDA_VISIBLE_DEVICES={value!r})",
            ),
            "list the physical indices, comma-separated, in the order the child should number them",
        )
    seen = _child_sees(dict(env))
    mapping = ", ".join(f"GPU:{o} = physical {p}" for o, p in enumerate(visible))
    return f"A child process started with it read CUDA_VISIBLE_DEVICES={seen!r}: {mapping}"


def _parse_child_mask(value: str) -> list[int]:
    """The physical GPUs ``value`` shows on a :data:`PHYSICAL_GPUS`-GPU machine, or a
    :class:`Wrong` that says why CUDA cannot be relied on to read it."""
    from dtf import masking

    names = [t.strip() for t in value.split(",") if _TF_DEVICE_NAME.match(t.strip())]
    if names:
        raise Wrong(
            f"CUDA_VISIBLE_DEVICES={value!r} uses TensorFlow device names ({names[0]!r}); "
            "CUDA reads physical GPU indices, before TensorFlow numbers what it sees",
            "write the physical indices, comma-separated, e.g. '0,2'",
        )
    try:
        return masking.parse_mask(value, PHYSICAL_GPUS)
    except ValueError as exc:
        raise Wrong(str(exc)) from None


def _child_sees(env: dict[str, str]) -> str:
    """Start a small Python child with ``env`` and return the CUDA_VISIBLE_DEVICES it reads."""
    code = "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise Wrong(
            f"a child process started with this environment did not finish in {CHILD_TIMEOUT_S:g} s"
        ) from None
    if proc.returncode != 0:
        raise Wrong(
            f"a child process started with this environment failed (exit status "
            f"{proc.returncode}): {proc.stderr.strip()[-300:] or 'no error message'}"
        )
    seen = proc.stdout.strip()
    if seen != env["CUDA_VISIBLE_DEVICES"]:
        raise Wrong(expected_got(env["CUDA_VISIBLE_DEVICES"], seen, "what the child process read"))
    return seen


# --------------------------------------------------------------------------- task 3


def _strings_in(function: Any) -> list[str]:
    """The string constants of ``function``'s code and of the code nested in it (not its
    docstring): the device names a learner typed, for instance."""
    function = getattr(function, "python_function", function)  # a tf.function
    if not hasattr(function, "__code__"):
        return []
    found = [c for code in code_objects(function.__code__) for c in code.co_consts]
    return [c for c in found if isinstance(c, str) and c != function.__doc__]


def _missing_gpus_asked_for(answer: Any) -> list[str]:
    """The GPU names in ``answer``'s code that name no device of this process: soft
    placement runs their ops elsewhere, without a word."""
    import tensorflow as tf

    here = {short_device(d.name) for d in tf.config.list_logical_devices()}
    missing = []
    for text in _strings_in(answer):
        for m in _GPU_IN_CODE.finditer(text):
            index = m["n"] if m["n"] is not None else m["m"]
            if index == "" or f"GPU:{int(index)}" not in here:
                missing.append(m[0])
    return list(dict.fromkeys(missing))


def _wrong_device(
    what: str, want: str, found: list[str], hint: str, answer: Any, case: str
) -> Wrong:
    detail = case + expected_got(want, ", ".join(found), f"the device of {what}")
    gpus = _missing_gpus_asked_for(answer)
    if gpus:
        detail += (
            f": your code asks for {gpus[0]!r}, which this process does not have, so soft "
            f"placement (on by default) quietly ran the op on {', '.join(found)} instead"
        )
        hint = "use the names in `devices`, which exist here: " + hint
    elif found == [default_device()]:
        hint = (
            f"{found[0]} is TensorFlow's default device, where an op runs when no device "
            "scope is open: " + hint
        )
    return Wrong(detail, hint)


def _check_placement(answer: Any, devices: list[str], case: str) -> tuple[str, str]:
    """One call of ``place_ops(a, b, bias, devices)``, checked; returns the devices of the
    MatMul and of the addition."""
    import tensorflow as tf

    a, b, bias = (tf.constant(v) for v in (A, B, BIAS))
    got = call_function(answer, a, b, bias, list(devices))
    result, table = expect_kind(got, (tuple, list), "a pair (result, placement table)", size=2)
    expected = np.matmul(A, B) + np.asarray(BIAS)
    expect_close(
        expected,
        result,
        what=f"{case}the result",
        atol=1e-5,
        hint="the result is the matrix product of a and b, plus the bias",
    )
    table = placement_table(table)
    want_mm, want_add = short_device(devices[-1]), short_device(devices[0])
    found = {
        "MatMul": devices_of(table, ["MatMul"]),
        "the addition": devices_of(table, _ADD_TYPES),
    }
    for what, where in found.items():
        if not where:
            raise Wrong(
                f"{case}your placement table has no {what}",
                "the table must be that of the capture in which both ops ran (eagerly: a "
                "tf.function logs its placement only when it is traced)",
            )
    if found["MatMul"] != [want_mm]:
        raise _wrong_device(
            "MatMul",
            want_mm,
            found["MatMul"],
            "the product belongs in the scope of devices[-1]",
            answer,
            case,
        )
    if found["the addition"] != [want_add]:
        raise _wrong_device(
            "the addition",
            want_add,
            found["the addition"],
            "the addition belongs in the scope of devices[0]",
            answer,
            case,
        )
    return want_mm, want_add


@task(LAB, 3)
def task3(answer: Any, setup: Any) -> str:
    """``place_ops(a, b, bias, devices) -> (result, placement table)``: the matmul on the last
    of ``devices``, the addition on the first, proven by the log. Checked with
    ``setup.names`` and reversed (so each op once belongs off the default device); an op that
    soft placement moved from a GPU this process lacks is named."""
    names = device_names(setup)  # with one device, both ops belong on it
    runs = [names] if names[0] == names[-1] else [names, names[::-1]]
    placed = []
    for run in runs:
        shown = ", ".join(repr(short_device(d)) for d in run)
        case = f"with devices = [{shown}]: " if run is not names else ""
        placed.append(_check_placement(answer, run, case))
    want_mm, want_add = placed[0]
    note = f"MatMul ran on {want_mm} and the addition on {want_add}"
    if len(placed) > 1:
        note += f", and on {placed[1][0]} and {placed[1][1]} with the devices reversed"
    gpus = _missing_gpus_asked_for(answer)
    if gpus:  # right by luck: soft placement put an op where it was wanted
        note += (
            f"; but your code also asks for {gpus[0]!r}, which this process does not have: "
            "soft placement quietly ran that op elsewhere (use the names in `devices`)"
        )
    return note


# --------------------------------------------------------------------------- task 4

#: Task 4: the device a colleague's code asks for the addition, typed for the machine with
#: 16 GPUs it was written on.
COLLEAGUE_DEVICE = "/gpu:12"
#: Task 4: the colleague's inputs: a batch of 2 examples with 3 features, weights, a bias.
COLLEAGUE_INPUTS = (A, B, BIAS)
#: Task 4: the explanations to choose from, by key.
REASONS = {
    "missing-device": "the device its code asks for does not exist in this process, so soft "
    "placement ran it on one that does",
    "no-scope": "its code asks for no device, so TensorFlow ran it on its default device",
    "follows-input": "TensorFlow ran it where its input tensor was, to save a copy",
    "no-kernel": "the device its code asks for has no kernel for this op, so soft placement "
    "ran it on one that has",
}
#: Task 4: what to look at, when the reason given for the right op is not the right one.
_REASON_HINTS = {
    "no-scope": "its code does ask for a device: read the `with tf.device(...)` around it",
    "follows-input": "an op in a device scope runs on that device whenever it can; so why "
    "could it not?",
    "no-kernel": "before asking whether a device can run an op, ask whether it is there: "
    "compare the name with setup.names",
}


def colleague_forward(x, w, b, devices):
    """A colleague's forward pass, written on a machine with 16 GPUs: ``devices`` are the
    devices to use, in order."""
    import tensorflow as tf

    with tf.device(devices[-1]):
        h = tf.matmul(x, w)
    with tf.device("/gpu:12"):  # the 13th GPU of the colleague's machine
        h = h + b
    y = tf.nn.relu(h)
    with tf.device(devices[0]):
        return tf.reduce_sum(y, axis=1)


def colleague_source() -> str:
    """The source of :func:`colleague_forward`, as the lab shows it."""
    import inspect

    return inspect.getsource(colleague_forward)


def _asked(devices: list[str]) -> dict[str, str | None]:
    """What the colleague's code asks for each op type (None: no device scope)."""
    return {
        "MatMul": devices[-1],
        "AddV2": COLLEAGUE_DEVICE,
        "Relu": None,
        "Sum": devices[0],
    }


def _same_device(asked: str, ran: str) -> bool:
    """``asked`` (as code writes it: ``/gpu:1``, ``/device:CPU:0``) names the device ``ran``."""
    name = short_device(asked)
    m = re.fullmatch(r"(?i)/?(?:device:)?(?P<kind>cpu|gpu):(?P<n>\d+)", name)
    if m:
        name = f"{m['kind'].upper()}:{int(m['n'])}"
    return name == ran


def _exists(asked: str) -> bool:
    import tensorflow as tf

    return any(_same_device(asked, short_device(d.name)) for d in tf.config.list_logical_devices())


def _moved_ops(table: Any, devices: list[str]) -> dict[str, tuple[str, str]]:
    """``{op type: (device asked for, device it ran on)}`` for the colleague's ops that did not
    run where their code asked, read from the placement ``table``; a :class:`Wrong` when the
    table is not the log of :func:`colleague_forward`."""
    eager = table[table["source"] == "eager"]
    moved = {}
    for op_type, asked in _asked(devices).items():
        ran = devices_of(eager, [op_type]) or devices_of(table, [op_type])
        if not ran:
            raise Wrong(
                f"the placement log given to the checker has no {op_type}, so it is not the "
                "log of colleague_forward",
                "run the cell that captures `colleague_log` again, then this one",
            )
        if asked is not None and not all(_same_device(asked, r) for r in ran):
            if _exists(asked):
                raise Wrong(
                    f"the placement log given to the checker shows {op_type} on "
                    f"{', '.join(ran)}, although its code asks for {short_device(asked)}, "
                    "which exists: it is not the log of colleague_forward as the lab runs it",
                    "run the cell that captures `colleague_log` again, then this one",
                )
            moved[op_type] = (asked, ", ".join(ran))
    return moved


def _diagnosis(got: Any) -> tuple[str, str]:
    op_type, reason = expect_kind(got, (tuple, list), "a pair (op_type, key of REASONS)", size=2)
    if not isinstance(op_type, str) or not isinstance(reason, str):
        raise Wrong(
            f"expected two strings (op type, reason), got {short(got)}",
            "e.g. ('Sum', 'no-kernel')",
        )
    return op_type.strip(), reason_key(reason, REASONS)


@task(LAB, 4)
def task4(answer: Any, log: Any, setup: Any) -> str:
    """``diagnose_placement() -> (op type, reason)``: which op of :func:`colleague_forward`
    did not run on the device its code asks for, as the placement ``log`` captured in the
    lab shows, and why (a key of :data:`REASONS`). The checker reads the same log: the op
    whose device differs from what its code asks for, and whether the device asked for
    exists in this process. The messages say where the ops the learner named ran, never
    which op it is."""
    op_type, reason = _diagnosis(call(answer))
    devices = device_names(setup)
    table = placement_table(log)
    moved = _moved_ops(table, devices)
    asked = _asked(devices)
    if op_type not in moved:
        look = (
            "compare, op by op, the device in the log with the device its `tf.device` asks "
            "for (setup.names shows this process's devices)"
        )
        if op_type not in asked:
            raise Wrong(
                f"colleague_forward runs no {op_type!r}", f"its ops are {', '.join(asked)}: " + look
            )
        ran = ", ".join(devices_of(table, [op_type]))
        if asked[op_type] is None:
            raise Wrong(
                f"{op_type} ran on {ran}, but its code asks for no device, so no device it "
                "asked for was refused",
                look,
            )
        raise Wrong(
            f"{op_type} ran on {ran}, the device its code asks for ({asked[op_type]})", look
        )
    wanted, ran = moved[op_type]
    truth = "missing-device"  # the only way an op of colleague_forward moves (_moved_ops)
    if reason != truth:
        raise Wrong(
            f"{op_type} is the op that did not run where its code asks, but {reason!r} is not why",
            _REASON_HINTS.get(reason, "compare the device it asks for with setup.names"),
        )
    others = [o for o in moved if o != op_type]
    note = f"{op_type} asked for {wanted!r} and ran on {ran}: {REASONS[reason]}"
    if others:
        note += f" (the log shows {', '.join(others)} moved too)"
    return note


# --------------------------------------------------------------------------- task 5


def missing_device(setup: Any) -> str:
    """A device name that does not exist in ``setup``: one past its last device."""
    names = device_names(setup)
    kind = short_device(names[-1]).split(":")[0]
    return f"/device:{kind}:{len(names)}"


@task(LAB, 5, optional=True)
def task5(answer: Any, setup: Any) -> str:
    """``predict_soft_placement() -> {True: raises?, False: raises?}``: for each setting of
    ``tf.config.set_soft_device_placement``, will a matmul placed on a device that does not
    exist raise an error? The checker runs both cases now (and restores the setting)."""
    got = call(answer)
    if not isinstance(got, Mapping) or set(got) != {True, False}:
        raise Wrong(
            f"expected a dict with the keys True and False (soft placement on/off), "
            f"got {short(got)}",
            "one prediction per setting of soft placement, keyed True (on) and False (off)",
        )
    if not all(isinstance(v, (bool, np.bool_)) for v in got.values()):
        raise Wrong(
            f"expected True (it raises) or False (it runs) for each setting, got {short(got)}"
        )
    measured, notes = _soft_placement_outcomes(missing_device(setup))
    for soft in (True, False):
        if bool(got[soft]) != measured[soft]:
            state = "on" if soft else "off"
            raise Wrong(  # what happened is the answer: not shown
                f"your prediction for soft placement {state} is not what TensorFlow does",
                "notebook 02b shows what each setting does with a device a process lacks",
            )
    return f"Soft placement on: {notes[True]}; off: {notes[False]}"


def _soft_placement_outcomes(device: str) -> tuple[dict[bool, bool], dict[bool, str]]:
    import tensorflow as tf

    original = tf.config.get_soft_device_placement()
    raised, notes = {}, {}
    a = tf.constant(A)
    try:
        for soft in (True, False):
            tf.config.set_soft_device_placement(soft)
            try:
                with tf.device(device):
                    c = tf.matmul(a, a, transpose_b=True)
                raised[soft] = False
                notes[soft] = f"a MatMul on {device} ran on {short_device(c.device)}"
            except (tf.errors.InvalidArgumentError, RuntimeError, ValueError) as exc:
                raised[soft] = True
                notes[soft] = f"a MatMul on {device} raised {type(exc).__name__}"
    finally:
        tf.config.set_soft_device_placement(original)
    return raised, notes
