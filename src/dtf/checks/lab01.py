"""Checkers of Lab 01 · Masking and placement (``labs/01_masking_placement_lab.ipynb``).

1. the GPUs a ``CUDA_VISIBLE_DEVICES`` mask shows; 2. a child process's environment;
3. two ops on two devices, proven by the placement log; 4. (diagnose) which op of a
colleague's code did not run where it asked, and why; 5. (optional) soft placement.
"""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from dtf._util import is_whole_number
from dtf.checks.core import (
    Mistake,
    Wrong,
    as_array,
    both_ways,
    call,
    call_function,
    code_objects,
    default_device,
    device_names,
    devices_of,
    diagnose,
    expect_close,
    expect_kind,
    expected_got,
    placement_table,
    reason_key,
    run_child,
    short,
    task,
)
from dtf.placement import short_device

LAB = "lab01"

#: Task 1: the machine has this many GPUs, and these are the masks to predict.
PHYSICAL_GPUS = 4
MASKS = ("2,3", "1,0", "0,2,-1,1", "")
#: Task 2: the physical GPUs the child process must see, in this order, and how long the
#: child may take (a Python start, no TensorFlow).
CHILD_GPUS = [1, 3]
CHILD_TIMEOUT_S = 60.0
_MARKER = "DTF_LAB01_PARENT_SETTING"
_CVD = "CUDA_VISIBLE_DEVICES"
#: A TensorFlow device name where CUDA wants a physical index: ``GPU:1``, ``/gpu:1``, ...
_TF_DEVICE_NAME = re.compile(r"(?i)^(?:/job:\S+?)?/?(?:device:)?(?:gpu|cpu):\d+$")
#: Task 3: the inputs (the matrices of the *Parallel Processing notes*) and the bias.
A = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
B = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
BIAS = [0.5, -0.5]
_ADD_TYPES = ("AddV2", "Add", "BiasAdd", "AddN")
#: A GPU named in code: ``/gpu:1``, ``/device:GPU:1``, ``GPU:1``, or ``/gpu:`` of an f-string.
_GPU_IN_CODE = re.compile(r"(?i)/(?:device:)?gpu:(?P<n>\d*)|\bgpu:(?P<m>\d+)")


def _as_mapping(value: Any) -> dict[int, int] | None:
    """``{0: 2, 1: 3}`` from a dict or a list ``[2, 3]`` of whole numbers, else None (not
    ``value``: ``{0: 2.0}`` would equal the right mapping)."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return None
    pairs = list(items)
    if all(is_whole_number(n) for pair in pairs for n in pair):
        return {int(key): int(item) for key, item in pairs}
    return None


def _mask_hint(mask: str, got: dict[int, int] | None, right: dict[int, int]) -> str:
    """What is wrong with ``got`` (:func:`_as_mapping` of the answer), a wrong mapping of
    ``mask``, as its slip: never ``right``."""
    if got is None:
        return "each mapping is a dict {visible ordinal: physical GPU id} of whole numbers"
    if not mask and got == {i: i for i in range(PHYSICAL_GPUS)}:
        return "an empty CUDA_VISIBLE_DEVICES is not the same as an unset one: reread the rules"
    if sorted(got) != list(range(len(got))):
        return (
            f"your ordinals {sorted(got)} do not count up from 0: visible ordinals always "
            "start at 0, with no gaps"
        )
    listed = [int(t) for t in mask.split(",")] if mask else []
    first_invalid = next((i for i, t in enumerate(listed) if t < 0), len(listed))
    ids = list(got.values())
    extra = [g for g in ids if g not in right.values()]
    if len(set(ids)) != len(ids):
        return "your mapping gives one physical GPU two ordinals"
    if extra and first_invalid < len(listed) and extra[0] == listed[first_invalid]:
        return f"your mapping shows {extra[0]} as a GPU, but an invalid index names no GPU"
    if extra and extra[0] in listed[first_invalid + 1 :]:
        return (
            f"your mapping shows GPU {extra[0]}, listed after the invalid index "
            f"{listed[first_invalid]}: CUDA stops reading the list at the first invalid index"
        )
    if extra:
        return f"your mapping shows physical GPU {extra[0]}, which the list does not name"
    if len(ids) < len(right):
        return "your mapping hides a GPU that the list makes visible"
    return "your ordinals do not follow the order of the list, which need not be sorted"


@task(LAB, 1, references=("dtf.masking.visible_mapping", "dtf.masking.parse_mask"))
def task1(answer: Any) -> str:
    """``{mask: {visible ordinal: physical id}}`` for :data:`MASKS`, against
    :func:`dtf.masking.visible_mapping`; a wrong mapping is never shown the right one."""
    from dtf import masking

    got = call(answer)
    expect_kind(got, Mapping, "a dict {mask: {ordinal: physical id}}, as the task's example")
    for mask in MASKS:
        if mask not in got:
            raise Wrong(
                f"there is no prediction for CUDA_VISIBLE_DEVICES={mask!r}",
                f"the dict needs one key per mask, exactly as written: {list(MASKS)}",
            )
        right = masking.visible_mapping(mask, PHYSICAL_GPUS)
        mapping = _as_mapping(got[mask])
        if mapping != right:
            raise Wrong(
                f"for CUDA_VISIBLE_DEVICES={mask!r}, your mapping {short(got[mask])} is not "
                "what CUDA shows",
                _mask_hint(mask, mapping, right),
            )
    return f"all {len(MASKS)} mappings match CUDA's rules"


#: Task 2: the known mistakes, over the facts of :func:`task2`.
TASK2_MISTAKES = (
    Mistake(
        lambda changed, **_: bool(changed),
        "the function changed this process's own environment ({changed})",
        "TensorFlow in this kernel initialised long ago, so that changes nothing here, "
        "and every process started later would inherit it: the constraints forbid it",
    ),
    Mistake(
        lambda given, base, **_: given != base,
        "the function changed the base_env dict it was given",
        "the constraints say base_env stays as it was: look for where your function writes "
        "into the dict it received",
    ),
    Mistake(
        lambda env, **_: not isinstance(env, Mapping),
        "expected a dict (the child's environment), got {shown}",
    ),
    Mistake(
        lambda env, **_: _CVD not in env,
        "the environment has no CUDA_VISIBLE_DEVICES, so the child would see the parent's setting",
        "the mask is the child's own CUDA_VISIBLE_DEVICES",
    ),
    Mistake(
        lambda not_text, **_: bool(not_text),
        "environment variables are strings, got {not_text[0]!r}: {not_text[1]} ({not_text[2]})",
        "a process's environment holds only text: look at the type of each value you set",
    ),
    Mistake(
        lambda lost, **_: bool(lost),
        "the child's environment lost or changed {count} of the parent's variables "
        "(e.g. {lost[0]})",
        "a child process needs its parent's other variables too: PATH, HOME, Python's "
        "settings, ...",
    ),
)


@task(LAB, 2)
def task2(answer: Any) -> str:
    """``child_env(base_env) -> dict``: a new dict, ``base_env`` and ``os.environ`` left
    alone, the parent's other variables kept, a mask :func:`dtf.masking.parse_mask` reads as
    :data:`CHILD_GPUS`; then a child process started with it must read that mask."""
    base = {**os.environ, _CVD: "0,1,2,3", _MARKER: "kept"}
    given, before = dict(base), dict(os.environ)
    try:
        env = call(answer, given)
    finally:
        changed = sorted(k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k))
        # Undo it (later cells and their children must not inherit it), but only then: unlike
        # mock.patch.dict, which always empties os.environ first, while the kernel's threads
        # (TensorFlow's among them) may read the environment.
        if changed:
            os.environ.clear()
            os.environ.update(before)
    is_dict = isinstance(env, Mapping)
    items = env.items() if is_dict else ()
    not_text = [
        (k, short(v), type(v).__name__)
        for k, v in items
        if not isinstance(k, str) or not isinstance(v, str)
    ]
    lost = [k for k in base if k != _CVD and env.get(k) != base[k]] if is_dict else []
    facts = dict(changed=", ".join(changed), given=given, base=base, env=env, shown=short(env))
    facts.update(not_text=not_text[0] if not_text else (), lost=lost, count=len(lost))
    diagnose(TASK2_MISTAKES, **facts)
    value = env[_CVD]
    names = [t.strip() for t in value.split(",") if _TF_DEVICE_NAME.match(t.strip())]
    if names:
        raise Wrong(
            f"CUDA_VISIBLE_DEVICES={value!r} uses TensorFlow device names ({names[0]!r}); "
            "CUDA reads physical GPU indices, before TensorFlow numbers what it sees",
            "CUDA reads the mask before TensorFlow starts: TensorFlow's device names mean "
            "nothing to it",
        )
    from dtf import masking

    try:
        visible = masking.parse_mask(value, PHYSICAL_GPUS)
    except ValueError as exc:
        raise Wrong(str(exc)) from None
    if visible != CHILD_GPUS:
        if sorted(visible) == sorted(CHILD_GPUS):
            hint = "your mask shows the child its GPUs in another order than the task's"
        elif set(visible) < set(CHILD_GPUS):
            hint = "your mask hides a GPU the child must see"
        else:
            hint = "your mask shows the child a GPU it must not see"
        raise Wrong(
            expected_got(
                CHILD_GPUS,
                visible,
                f"the physical GPUs CUDA shows (CUDA_VISIBLE_DEVICES={value!r})",
            ),
            hint,
        )
    code = f"import os; print({_MARKER!r}, os.environ.get('CUDA_VISIBLE_DEVICES'))"
    what = "a child process started with this environment"
    seen = run_child([code], dict(env), CHILD_TIMEOUT_S, what, mark=_MARKER + " ")
    if seen != value:
        raise Wrong(expected_got(value, seen, "what the child process read"))
    mapping = ", ".join(f"GPU:{o} = physical {p}" for o, p in enumerate(visible))
    return f"A child process started with it read CUDA_VISIBLE_DEVICES={seen!r}: {mapping}"


def _missing_gpus_asked_for(answer: Any) -> list[str]:
    """The GPU names in the string constants of ``answer``'s code (nested code included)
    that name no device of this process: soft placement runs their ops elsewhere."""
    import tensorflow as tf

    function = getattr(answer, "python_function", answer)  # a tf.function
    if not hasattr(function, "__code__"):
        return []
    here = {short_device(d.name) for d in tf.config.list_logical_devices()}
    missing = []
    for code in code_objects(function.__code__):
        for text in code.co_consts:
            if not isinstance(text, str) or text == function.__doc__:
                continue
            for m in _GPU_IN_CODE.finditer(text):
                index = m["n"] if m["n"] is not None else m["m"]
                if index == "" or f"GPU:{int(index)}" not in here:
                    missing.append(m[0])
    return list(dict.fromkeys(missing))


def _check_placement(answer: Any, devices: list[str], case: str) -> tuple[str, str]:
    """One call of ``place_ops(a, b, bias, devices)``, checked; returns the devices of the
    MatMul and of the addition."""
    import tensorflow as tf

    got = call_function(answer, *(tf.constant(v) for v in (A, B, BIAS)), list(devices))
    result, table = expect_kind(got, (tuple, list), "a pair (result, placement table)", size=2)
    hint = "the result is the matrix product of a and b, plus the bias"
    try:
        product, have = np.matmul(A, B), as_array(result)
        if have.shape == product.shape and np.allclose(have, product, atol=1e-5):
            hint = "your result is the product of a and b without the bias"
    except (TypeError, ValueError):
        pass
    expect_close(
        np.matmul(A, B) + np.asarray(BIAS),
        result,
        what=f"{case}the result",
        atol=1e-5,
        hint=hint,
        show_expected=False,
    )
    table = placement_table(table)
    wanted = {"MatMul": short_device(devices[-1]), "the addition": short_device(devices[0])}
    found = {"MatMul": devices_of(table, ["MatMul"]), "the addition": devices_of(table, _ADD_TYPES)}
    for what in found:
        if not found[what]:
            raise Wrong(
                f"{case}your placement table has no {what}",
                "the table must be that of the capture in which both ops ran (eagerly: a "
                "tf.function logs its placement only when it is traced)",
            )
    scope = {"MatMul": "the product belongs in the scope of devices[-1]"}
    scope["the addition"] = "the addition belongs in the scope of devices[0]"
    for what, want in wanted.items():
        if found[what] != [want]:
            ran = ", ".join(found[what])
            detail, hint = case + expected_got(want, ran, f"the device of {what}"), scope[what]
            gpus = _missing_gpus_asked_for(answer)
            if gpus:
                detail += (
                    f": your code asks for {gpus[0]!r}, which this process does not have, so "
                    f"soft placement (on by default) quietly ran the op on {ran} instead"
                )
                hint = (
                    "your code writes a device name of its own instead of taking it from "
                    "`devices`: " + hint
                )
            elif found["MatMul"] == [wanted["the addition"]] and found["the addition"] == [
                wanted["MatMul"]
            ]:
                hint = "each of your two ops ran on the device meant for the other"
            elif found[what] == [default_device()]:
                hint = (
                    f"{ran} is TensorFlow's default device, where an op runs when no device "
                    "scope is open: " + hint
                )
            raise Wrong(detail, hint)
    return wanted["MatMul"], wanted["the addition"]


@task(LAB, 3)
def task3(answer: Any, setup: Any) -> str:
    """``place_ops(a, b, bias, devices) -> (result, placement table)``: the matmul on the last
    of ``devices``, the addition on the first, proven by the log; checked with the devices
    as given and reversed (:func:`dtf.checks.core.both_ways`); the task asks for eager ops,
    so a ``tf.function`` is refused."""
    if hasattr(answer, "get_concrete_function"):
        raise Wrong(
            "your place_ops is a tf.function, so its ops run as a graph",
            "the constraints ask for the ops to run eagerly",
        )
    placed = [_check_placement(answer, run, case) for run, case in both_ways(device_names(setup))]
    note = f"MatMul ran on {placed[0][0]} and the addition on {placed[0][1]}"
    if len(placed) > 1:
        note += f", and on {placed[1][0]} and {placed[1][1]} with the devices reversed"
    gpus = _missing_gpus_asked_for(answer)
    if gpus:  # right by luck: soft placement put an op where it was wanted
        note += (
            f"; but your code also asks for {gpus[0]!r}, which this process does not have: "
            "soft placement quietly ran that op elsewhere (a device name of its own, not "
            "one of `devices`)"
        )
    return note


#: Task 4: the device a colleague's code asks for the addition (on its 16-GPU machine), its
#: inputs (2 examples with 3 features, weights, a bias) and the explanations to choose from.
COLLEAGUE_DEVICE = "/gpu:12"
COLLEAGUE_INPUTS = (A, B, BIAS)
REASONS = {
    "missing-device": "the device its code asks for does not exist in this process, so soft "
    "placement ran it on one that does",
    "no-scope": "its code asks for no device, so TensorFlow ran it on its default device",
    "follows-input": "TensorFlow ran it where its input tensor was, to save a copy",
    "no-kernel": "the device its code asks for has no kernel for this op, so soft placement "
    "ran it on one that has",
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
    return inspect.getsource(colleague_forward)


def _asked(devices: list[str]) -> dict[str, str | None]:
    """What the colleague's code asks for each op type (None: no device scope)."""
    return {"MatMul": devices[-1], "AddV2": COLLEAGUE_DEVICE, "Relu": None, "Sum": devices[0]}


def _same_device(asked: str, ran: str) -> bool:
    """``asked`` (as code writes it: ``/gpu:1``, ``/device:CPU:0``) names the device ``ran``."""
    name = short_device(asked)
    m = re.fullmatch(r"(?i)/?(?:device:)?(?P<kind>cpu|gpu):(?P<n>\d+)", name)
    return (f"{m['kind'].upper()}:{int(m['n'])}" if m else name) == ran


_LOOK_HINT = (
    "compare, op by op, the device in the log with the device its `tf.device` asks "
    "for (setup.names shows this process's devices)"
)
_WHY = "{op_type} is the op that did not run where its code asks, but {reason!r} is not why"
#: Task 4: the known mistakes, over the facts of :func:`task4`, the first ones about the op.
TASK4_MISTAKES = (
    Mistake(
        lambda op_type, asked, **_: (
            op_type not in asked and op_type.lower() in {op.lower() for op in asked}
        ),
        "colleague_forward runs no {op_type!r}: op types are case-sensitive",
        "your op type is not written as the log's op_type column writes it",
    ),
    Mistake(
        lambda op_type, asked, **_: op_type not in asked,
        "colleague_forward runs no {op_type!r}",
        "its ops are {ops}: " + _LOOK_HINT,
    ),
    Mistake(
        lambda op_type, asked, **_: asked[op_type] is None,
        "{op_type} ran on {ran}, but its code asks for no device, so no device it asked for "
        "was refused",
        _LOOK_HINT,
    ),
    Mistake(
        lambda op_type, moved, **_: op_type not in moved,
        "{op_type} ran on {ran}, the device its code asks for ({wanted})",
        _LOOK_HINT,
    ),
    Mistake(
        lambda reason, **_: reason == "no-scope",
        _WHY,
        "its code does ask for a device: read the `with tf.device(...)` around it",
    ),
    Mistake(
        lambda reason, **_: reason == "follows-input",
        _WHY,
        "an op in a device scope runs on that device whenever it can; so why could it not?",
    ),
    Mistake(
        lambda reason, **_: reason == "no-kernel",
        _WHY,
        "the device this op asks for does not fail for lack of a kernel here",
    ),
)


@task(LAB, 4)
def task4(answer: Any, log: Any, setup: Any) -> str:
    """``diagnose_placement() -> (op type, reason)``: the op of :func:`colleague_forward`
    that the placement ``log`` shows off the device its code asks for, and why (a key of
    :data:`REASONS`), read from the same log; a wrong verdict never names the op."""
    import tensorflow as tf

    got = call(answer)
    op_type, reason = expect_kind(got, (tuple, list), "a pair (op_type, key of REASONS)", size=2)
    if not isinstance(op_type, str) or not isinstance(reason, str):
        raise Wrong(
            f"expected two strings (op type, reason), got {short(got)}",
            "e.g. ('Sum', 'no-kernel')",
        )
    op_type, reason = op_type.strip(), reason_key(reason, REASONS)
    table = placement_table(log)
    asked = _asked(device_names(setup))
    here = [short_device(d.name) for d in tf.config.list_logical_devices()]
    again = "run the cell that captures `colleague_log` again, then this one"
    moved = {}  # {op type: (device asked for, devices it ran on)}
    for kind, device in asked.items():
        ran = devices_of(table, [kind], once=True)
        if not ran:
            raise Wrong(
                f"the placement log given to the checker has no {kind}, so it is not the "
                "log of colleague_forward",
                again,
            )
        if device is not None and not all(_same_device(device, r) for r in ran):
            if any(_same_device(device, d) for d in here):
                raise Wrong(
                    f"the placement log given to the checker shows {kind} on "
                    f"{', '.join(ran)}, although its code asks for {short_device(device)}, "
                    "which exists: it is not the log of colleague_forward as the lab runs it",
                    again,
                )
            moved[kind] = (device, ", ".join(ran))
    op_ran = ", ".join(devices_of(table, [op_type]))
    facts = dict(op_type=op_type, reason=reason, asked=asked, moved=moved, ran=op_ran)
    diagnose(TASK4_MISTAKES, **facts, ops=", ".join(asked), wanted=asked.get(op_type))
    # Right: "missing-device" is the only way an op of colleague_forward moves.
    others = [o for o in moved if o != op_type]
    note = f"{op_type} asked for {moved[op_type][0]!r} and ran on {moved[op_type][1]}: "
    note += REASONS[reason]
    return note + (f" (the log shows {', '.join(others)} moved too)" if others else "")


def missing_device(setup: Any) -> str:
    """A device name that does not exist in ``setup``: one past its last device."""
    names = device_names(setup)
    return f"/device:{short_device(names[-1]).split(':')[0]}:{len(names)}"


@task(LAB, 5, optional=True)
def task5(answer: Any, setup: Any) -> str:
    """``predict_soft_placement() -> {True: raises?, False: raises?}``: will a matmul on a
    device that does not exist raise, with soft placement on and off? Both run now (and
    the setting is restored); what happened is never shown for a wrong prediction."""
    import tensorflow as tf

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
    device, original = missing_device(setup), tf.config.get_soft_device_placement()
    raised, notes = {}, {}
    try:
        for soft in (True, False):
            tf.config.set_soft_device_placement(soft)
            try:
                with tf.device(device):
                    c = tf.matmul(tf.constant(A), tf.constant(A), transpose_b=True)
                raised[soft], notes[soft] = False, f"ran on {short_device(c.device)}"
            except (tf.errors.InvalidArgumentError, RuntimeError, ValueError) as exc:
                raised[soft], notes[soft] = True, f"raised {type(exc).__name__}"
    finally:
        tf.config.set_soft_device_placement(original)
    for soft in (True, False):
        if bool(got[soft]) != raised[soft]:
            raise Wrong(
                f"your prediction for soft placement {'on' if soft else 'off'} is not what "
                "TensorFlow does",
                "notebook 02b shows what each setting does with a device a process lacks",
            )
    on, off = (f"a MatMul on {device} {notes[soft]}" for soft in (True, False))
    return f"Soft placement on: {on}; off: {off}"
