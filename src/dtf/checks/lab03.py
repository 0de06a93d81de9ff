"""Checkers of Lab 03 · Parallelism and memory (``labs/03_parallelism_memory_lab.ipynb``).

1. two Keras layers on two devices (variables and MatMuls); 2. the parameter bytes each
device holds, against the variables TensorFlow creates; 3. which memory-configuration calls
of a script raise, and why, against a fresh TensorFlow process; 4. (decide) the pipeline
layout that trains each network within a memory budget on the fewest devices.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from dtf._util import first_line, is_whole_number
from dtf.checks.core import (
    Mistake,
    Wrong,
    as_array,
    both_ways,
    call,
    call_function,
    default_device,
    device_names,
    devices_of,
    diagnose,
    expect_close,
    expect_kind,
    expected_got,
    listed,
    placement_table,
    plural,
    reason_key,
    run_child,
    short,
    task,
)
from dtf.parallel import variable_device
from dtf.placement import short_device
from dtf.quiet import SETTINGS

LAB = "lab03"

#: Task 1: the input batch (examples × features, like the digits) and the two layers' widths.
BATCH, FEATURES, HIDDEN, CLASSES = 16, 64, 32, 10


def device_pair(setup: Any) -> list[str]:
    """The two devices of task 1: the first two of ``setup``, or its only device twice."""
    names = device_names(setup)
    if not names:
        raise ValueError("the setup has no devices")
    return names[:2] if len(names) >= 2 else [names[0], names[0]]


def _check_variables(layers: list, wanted: list[str], case: str) -> None:
    homes = [{variable_device(v) for v in layer.trainable_variables} for layer in layers]
    if wanted[0] != wanted[1] and homes == [{wanted[1]}, {wanted[0]}]:
        raise Wrong(
            f"{case}layer 0's variables live on {wanted[1]} and layer 1's on {wanted[0]}",
            "each of your two layers has its variables on the device meant for the other",
        )
    for i, (layer, device) in enumerate(zip(layers, wanted, strict=True)):
        if not layer.trainable_variables:
            raise Wrong(
                f"{case}layer {i} has no variables yet",
                "a Keras layer creates its variables when it is built, at its first call: "
                f"was layer {i} ever called?",
            )
        for v in layer.trainable_variables:
            where = variable_device(v)
            if where == device:
                continue
            kinds = [k for k in ("kernel", "bias") if getattr(layer, k, None) is v]
            kind = kinds[0] if kinds else f"variable {getattr(v, 'name', '?')}"
            unscoped = ""
            if where == default_device():
                unscoped = (
                    f"{where} is TensorFlow's default device: a variable lands there when no "
                    "device scope is open as it is created, or when the scope in effect names "
                    "it. "
                )
            raise Wrong(
                case + expected_got(device, where, f"the device of layer {i}'s {kind}"),
                unscoped + "a variable lives, for its whole life, on the device that was "
                f"in scope when it was created: look at the scope in effect at layer {i}'s "
                "first call. A model built before (keras.Sequential with an Input, or an "
                "earlier call) keeps its weights where they are, whatever scope calls it",
            )


def _check_run(answer: Any, x: Any, pair: list[str], case: str) -> list[str]:
    """One call of ``place_model(x, pair)``, checked: the layers' variables, the logits and
    the MatMuls in the placement table; returns the devices the MatMuls ran on."""
    import tensorflow as tf

    wanted = [short_device(d) for d in pair]
    got = call_function(answer, x, list(pair))
    layers, logits, table = expect_kind(got, (tuple, list), "(layers, logits, table)", size=3)
    if hasattr(layers, "layers") and not isinstance(layers, (list, tuple)):  # a Keras model
        layers = [layer for layer in layers.layers if layer.weights]
    expect_kind(layers, (tuple, list), "the 2 layers, [layer 0, layer 1]", size=2)
    for i, layer in enumerate(layers):
        if not hasattr(layer, "trainable_variables") or not callable(layer):
            raise Wrong(f"layer {i} is not a Keras layer: {short(layer)}")
    _check_variables(list(layers), wanted, case)
    try:  # logits are raw scores: a softmax output (rows in [0, 1] summing to 1) is not
        values = np.asarray(as_array(logits), dtype=np.float64)
    except (TypeError, ValueError):
        values = np.zeros(0)  # expect_close says what is wrong with it
    if values.ndim == 2 and values.size and np.all((values >= -1e-6) & (values <= 1 + 1e-6)):
        if np.allclose(values.sum(axis=1), 1.0, atol=1e-4):
            raise Wrong(
                f"{case}your logits are probabilities: every row lies in [0, 1] and sums to 1, "
                "as after a softmax",
                "logits are the raw scores of the output layer, before any softmax: the loss "
                "(and the prediction) apply it themselves. Look at the output layer's activation",
            )
    h, outputs = x, []
    for layer, device in zip(layers, pair, strict=True):
        with tf.device(device):
            h = layer(h)
        outputs.append(np.asarray(as_array(h)))
    for i, (out, units) in enumerate(zip(outputs, (HIDDEN, CLASSES), strict=True)):
        if out.ndim != 2 or out.shape[1] != units:
            raise Wrong(
                f"{case}layer {i} gives outputs of shape {out.shape} for a batch of "
                f"{out.shape[0] if out.ndim else '?'}",
                f"the task gives each layer's number of units: look at layer {i}'s",
            )
    if (outputs[0] < 0).any():
        raise Wrong(
            f"{case}layer 0 gives negative values",
            "the task gives the hidden layer's activation: look at layer 0's",
        )
    expect_close(
        h,
        logits,
        what=f"{case}the logits",
        atol=1e-5,
        rtol=1e-5,
        hint="the logits are x through layer 0, then through layer 1: both layers, in order",
        show_expected=False,
    )
    ran = devices_of(placement_table(table), ["MatMul"], once=True)
    order = list(dict.fromkeys(wanted))
    if not ran:
        raise Wrong(
            f"{case}your placement table has no MatMul",
            "the table must be that of the capture in which both layers ran",
        )
    if ran == order:
        return ran
    if len(order) == 2 and len(ran) == 1 and ran[0] in order:
        other = 1 - order.index(ran[0])  # the layer that ran away from its weights
        raise Wrong(
            f"{case}the MatMuls ran on {ran[0]} only, although layer {other}'s weights live on "
            f"{order[other]}: they were copied to {ran[0]} for the multiplication",
            "a layer runs where it is called, not where its weights live: look at the scope "
            f"in effect where layer {other} is called",
        )
    raise Wrong(
        case
        + expected_got(", ".join(order), ", ".join(ran), "the devices of the MatMuls, in order"),
        "each layer runs in the device scope in effect where it is called: devices[0] for "
        "layer 0, devices[1] for layer 1",
    )


@task(LAB, 1)
def task1(answer: Any, setup: Any) -> str:
    """``place_model(x, devices) -> (layers, logits, placement table)``: a hidden Dense layer
    built and run on ``devices[0]``, an output layer on ``devices[1]``, checked with
    :func:`device_pair` both ways; a Keras model of the two layers is accepted."""
    import tensorflow as tf

    pair = device_pair(setup)
    x = tf.constant(np.random.default_rng(3).normal(size=(BATCH, FEATURES)).astype(np.float32))
    runs = both_ways(pair)
    ran = [_check_run(answer, x, run, case) for run, case in runs]
    wanted = [short_device(d) for d in pair]
    if len(runs) == 1:
        return (
            f"both layers' variables and MatMuls are on {wanted[0]}, the only device here "
            "(with NUM_DEVICES >= 2 they would be on two)"
        )
    return (
        f"layer 0's variables live on {wanted[0]} and layer 1's on {wanted[1]}, and the other "
        f"way round with the devices swapped; the placement log shows their MatMuls on "
        f"{', '.join(ran[0])}, then on {', '.join(ran[1])}"
    )


#: Task 2: the network of notebook 04 (digits in, three hidden layers of 256, 10 classes out),
#: and layouts of a 4-GPU machine: layers taking turns, one layer alone, an uneven cut.
LAYER_SIZES = (64, 256, 256, 256, 10)
OTHER_LAYOUTS = (
    ((784, 512, 512, 10), ("/device:GPU:0", "/device:GPU:1", "/device:GPU:0")),
    ((32, 8), ("/device:GPU:3",)),
    ((100, 64, 64, 64, 64, 2), tuple(f"/device:GPU:{k}" for k in (0, 0, 1, 1, 2))),
)
_BYTES = 4  # float32


def layout(setup: Any) -> list[str]:
    """Each layer of :data:`LAYER_SIZES`'s device when the layers are cut into
    ``min(layers, devices)`` contiguous stages, stage ``k`` on device ``k`` (as
    :func:`dtf.parallel.build_stages`)."""
    from dtf import parallel

    names = device_names(setup)
    num_layers = len(LAYER_SIZES) - 1
    groups = parallel.layer_groups(num_layers, min(num_layers, len(names)))
    return [names[k] for k, group in enumerate(groups) for _ in group]


def _per_device(layer_sizes, layer_devices, per_layer) -> dict[str, int]:
    pairs = zip(layer_sizes[:-1], layer_sizes[1:], strict=True)
    sizes = [per_layer(n_in, n_out) for n_in, n_out in pairs]
    return _shares(sizes, [short_device(device) for device in layer_devices])


def _measured_bytes(layer_sizes, layer_devices, build_on: str | None) -> dict[str, int]:
    """Bytes of the variables TensorFlow creates for each device: the layers built on their
    own devices (``build_on=None``), or on ``build_on`` and counted for the device the layout
    names (for devices this machine does not have)."""
    from dtf import parallel

    num_layers = len(layer_sizes) - 1
    if build_on is None:
        stages = parallel.build_stages(layer_sizes, list(layer_devices), num_stages=num_layers)
        return parallel.parameter_bytes(stages)
    built = iter(parallel.build_stages(layer_sizes, [build_on], num_stages=num_layers))
    return _per_device(
        layer_sizes,
        layer_devices,
        lambda *_: sum(parallel.parameter_bytes([next(built)]).values()),
    )


def _slip(per_layer) -> Any:
    """A test of :data:`TASK2_MISTAKES`: the answer counts ``per_layer(n_in, n_out)``."""
    return lambda got, sizes, devices, **_: got == _per_device(sizes, devices, per_layer)


#: Task 2: the usual slips, recognised by recomputing them; the last one: any other answer.
TASK2_MISTAKES = (
    Mistake(
        _slip(lambda i, o: i * o + o),
        hint="those are numbers of parameters, not of bytes",
    ),
    Mistake(
        _slip(lambda i, o: i * o * _BYTES),
        hint="your count leaves out each Dense layer's bias",
    ),
    Mistake(
        _slip(lambda i, o: i * o),
        hint="your count leaves out the biases, and counts parameters, not bytes",
    ),
    Mistake(
        _slip(lambda i, o: (i * o + i) * _BYTES),
        hint="your count gives each layer's bias one number per *input* unit",
    ),
    Mistake(
        lambda got, devices, total, **_: got == {short_device(d): total for d in devices},
        hint="that is the whole model on every device, as in data parallelism; here each "
        "device holds only the layers the layout puts on it",
    ),
    Mistake(
        lambda **_: True,
        hint="look at which layers your code counts for each device (layer i lives on "
        "layer_devices[i]) and at what it counts for each layer",
    ),
)


def _normalised(got: Any, what: str) -> dict[str, int]:
    """``{short device name: bytes}`` without zero entries, or a :class:`Wrong`."""
    expect_kind(got, Mapping, "a dict {device: bytes}", what=what)
    out: dict[str, int] = {}
    for key, value in got.items():
        number = value.item() if isinstance(value, np.generic) else value
        if isinstance(number, float) and number.is_integer():
            number = int(number)
        if not is_whole_number(number):
            raise Wrong(
                f"for {what}: expected a whole number of bytes for {key!r}, got {short(value)}",
                "a number of bytes is a whole number",
            )
        out[short_device(str(key))] = out.get(short_device(str(key)), 0) + number
    return {k: v for k, v in out.items() if v != 0}


@task(LAB, 2, references=("dtf.parallel.parameter_bytes",))
def task2(answer: Any, setup: Any) -> str:
    """``parameter_bytes(layer_sizes, layer_devices) -> {device: bytes}``: on this machine's
    layout of :data:`LAYER_SIZES`, against the variables TensorFlow creates there, and on
    :data:`OTHER_LAYOUTS`; short device names and left-out zeros are accepted."""
    names = device_names(setup)
    here = layout(names)
    cases = [(LAYER_SIZES, here, None)] + [(s, d, names[0]) for s, d in OTHER_LAYOUTS]
    for sizes, devices, build_on in cases:
        shown = "→".join(str(s) for s in sizes)
        what = f"layers {shown} on {', '.join(short_device(d) for d in devices)}"
        got = _normalised(call_function(answer, tuple(sizes), list(devices)), what)
        expected = _measured_bytes(sizes, devices, build_on)
        if got != expected:
            total = sum(_per_device(sizes, devices, lambda i, o: (i * o + o) * _BYTES).values())
            shown = f"for {what}, your bytes per device {short(got)} are not what those layers hold"
            diagnose(
                TASK2_MISTAKES, got=got, sizes=sizes, devices=devices, total=total, shown=shown
            )
    mine = _measured_bytes(LAYER_SIZES, here, None)
    device, largest = max(mine.items(), key=lambda item: item[1])  # the first of equals
    return (
        f"{len(cases)} layouts match the variables TensorFlow creates; on this machine's "
        f"layout the largest share is {largest:,} bytes on {device}, of "
        f"{sum(mine.values()):,} for the whole model"
    )


#: Task 3: the lines that start the script (in a fresh process that sees no GPU).
PREAMBLE = (
    "import tensorflow as tf\n"
    'cpu = tf.config.list_physical_devices("CPU")[0]  # listing physical devices: no init\n'
    "LDC = tf.config.LogicalDeviceConfiguration\n"
)
#: Task 3: the calls, run in this order in one fresh process, each in its own try/except.
CALLS = {
    1: "tf.config.experimental.set_memory_growth(cpu, True)",
    2: "tf.config.set_logical_device_configuration(cpu, [LDC(memory_limit=512)] * 2)",
    3: "tf.config.set_logical_device_configuration(cpu, [LDC()] * 2)",
    4: "tf.config.experimental.set_memory_growth(cpu, True)",
    5: 'tf.config.list_logical_devices("CPU")',
    6: "tf.config.set_logical_device_configuration(cpu, [LDC()] * 2)",
    7: "tf.config.set_logical_device_configuration(cpu, [LDC()] * 4)",
    8: 'tf.config.experimental.get_memory_info("CPU:0")',
}
#: Task 3: why a call fails, by key.
REASONS = {
    "gpu-only": "a GPU-only memory setting: TensorFlow neither grows nor caps the CPU's memory",
    "split": "the device is split into logical devices, each with fixed memory: "
    "growth cannot apply",
    "initialised": "TensorFlow has initialised: its device layout can no longer change",
    "no-stats": "the CPU's default allocator keeps no statistics "
    "(TF_CPU_ALLOCATOR_USE_BFC was not set before the import)",
}
#: Task 3: which reason TensorFlow's message gives (a fragment of it, case-insensitive).
MESSAGE_REASONS = (
    ("memory growth on non-GPU", "gpu-only"),
    ("memory limit on CPU virtual devices", "gpu-only"),
    ("memory growth on device when virtual devices configured", "split"),
    ("cannot be modified after being initialized", "initialised"),
    ("allocator stats not available", "no-stats"),
)
#: Task 3: what decides each call's outcome, without saying the outcome.
CALL_HINTS = {
    1: "call 1: look at the devices notebook 05 sets memory growth on",
    2: "call 2: look at the devices notebook 05 gives a memory_limit",
    3: "call 3: has anything initialised TensorFlow before it? (every Setup cell's "
    "devices.setup makes a call like it)",
    4: "call 4: look at what call 3 did to the CPU before it",
    5: "call 5: to list the logical devices, TensorFlow must create them: what does that "
    "fix for the calls after it?",
    6: "call 6: compare the split it asks for with the one already in place",
    7: "call 7: compare the split it asks for with the one already in place, and remember "
    "what call 5 did",
    8: "call 8: look at how notebook 05 gets memory figures for the CPU",
}
#: Task 3: how long the child process may take (a TensorFlow import, ~5 s on 2 cores).
CHILD_TIMEOUT_S = 120.0
_MARK = "DTF_LAB03_OUTCOMES "
_CHILD = r"""
import json, sys
preamble, calls, mark = json.loads(sys.argv[1])
namespace = {}
exec(preamble, namespace)
outcomes = {}
for number, code in calls:
    try:
        exec(code, namespace)
        outcomes[number] = None
    except Exception as exc:
        outcomes[number] = [type(exc).__name__, str(exc)]
sys.stdout.flush()
print(mark + json.dumps(outcomes), flush=True)
"""


def script(calls: Mapping[int, str] | None = None) -> str:
    """The script of task 3 as the learner reads it: the preamble, then each numbered call."""
    calls = CALLS if calls is None else calls
    lines = [f"{code:<80}# call {number}" for number, code in calls.items()]
    return "\n".join([PREAMBLE.rstrip("\n"), *lines])


def measure(calls: Mapping[int, str] | None = None) -> dict[int, tuple[str, str] | None]:
    """Run :data:`PREAMBLE`, then ``calls`` (default :data:`CALLS`) in order, each in its own
    try/except, in a fresh Python process that sees no GPU: ``{call: None or (exception
    type, first line of its message)}``, or a :class:`Wrong` if the process fails."""
    calls = CALLS if calls is None else calls
    env = {**os.environ, **SETTINGS}  # quiet as the course's Setup cells make TensorFlow
    env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU-only process, also on a GPU machine
    for name in ("TF_CPU_ALLOCATOR_USE_BFC", "TF_FORCE_GPU_ALLOW_GROWTH", "PYTEST_CURRENT_TEST"):
        env.pop(name, None)
    payload = json.dumps([PREAMBLE, [[int(n), code] for n, code in calls.items()], _MARK])
    found = json.loads(
        run_child(
            [_CHILD, payload],
            env,
            CHILD_TIMEOUT_S,
            "the fresh TensorFlow process that runs the calls",
            mark=_MARK,
            late=", so the predictions could not be checked",
            hint="run the check cell again; on a busy machine a TensorFlow import can be slow",
        )
    )
    if sorted(int(n) for n in found) != sorted(int(n) for n in calls):
        raise Wrong(
            f"the fresh TensorFlow process reported calls {sorted(found)}, not {list(calls)}"
        )
    return {int(n): o and (o[0], first_line(o[1])) for n, o in found.items()}


def reason_of(message: str) -> str | None:
    """The :data:`REASONS` key that TensorFlow's ``message`` gives, or None if unknown."""
    found = [reason for part, reason in MESSAGE_REASONS if part.lower() in message.lower()]
    return found[0] if found else None


def _predictions(got: Any) -> dict[int, tuple[str, str] | None]:
    """``{call: None or (exception type name, reason key)}`` from the learner's dict."""
    expect_kind(got, Mapping, "a dict {call number: None or (exception type, reason)}")
    out: dict[int, tuple[str, str] | None] = {}
    for key, value in got.items():
        try:
            number = int(key)
        except (TypeError, ValueError):
            raise Wrong(f"{key!r} is not a call number", f"the calls are {list(CALLS)}") from None
        if value is None:
            out[number] = None
            continue
        kind, reason = expect_kind(
            value,
            (tuple, list),
            "None or a pair (exception type, reason)",
            "a pair (exception type, key of REASONS) for a call that raises, None for one "
            "that does not",
            size=2,
            what=f"call {number}",
        )
        if isinstance(kind, type) and issubclass(kind, BaseException):
            kind = kind.__name__
        if not isinstance(kind, str) or not isinstance(reason, str):
            raise Wrong(
                f"for call {number}: expected (exception type, reason), got {short(value)}",
                "name the type as ValueError or 'ValueError', and the reason by its key in REASONS",
            )
        out[number] = (kind.strip(), reason_key(reason, REASONS, f"for call {number}: "))
    missing = [n for n in CALLS if n not in out]
    if missing:
        raise Wrong(
            f"there is no prediction for call {missing[0]}",
            f"give one entry per call, {list(CALLS)}: None where a call raises nothing",
        )
    extra = sorted(set(out) - set(CALLS))
    if extra:
        raise Wrong(f"there is no call {extra[0]}", f"the calls are {list(CALLS)}")
    return out


@task(LAB, 3, references=("dtf.checks.lab03.measure", "dtf.checks.lab03.reason_of"))
def task3(answer: Any) -> str:
    """``predict_failures() -> {call: None or (exception type, reason)}`` for :func:`script`,
    against a fresh TensorFlow process (:func:`measure`, :data:`MESSAGE_REASONS`); a wrong
    verdict names the calls predicted wrongly (and those with only the reason wrong), never
    their outcome. A message this checker does not know is compared by its type only."""
    predicted = _predictions(call(answer))
    measured = measure()
    unknown, wrong, reason_only, type_only = [], [], [], []
    for number in CALLS:
        outcome, got = measured[number], predicted[number]
        expected = outcome and (outcome[0], reason_of(outcome[1]))
        compared: tuple[str, str | None] | None = got
        if expected and expected[1] is None:
            unknown.append(number)
            compared = got and (got[0], None)  # a message this checker does not know: its type
        if compared != expected:
            wrong.append(number)
            if compared and expected and compared[0] == expected[0]:
                reason_only.append(number)
            elif compared and expected and expected[1] is not None and compared[1] == expected[1]:
                type_only.append(number)
    if wrong:
        detail = f"{len(wrong)} of {len(CALLS)} predictions are wrong: "
        detail += f"{plural(len(wrong), 'call')} {listed(wrong)}"
        if reason_only:
            detail += (
                f" (for {plural(len(reason_only), 'call')} {listed(reason_only)} the "
                "exception type is right, the reason is not)"
            )
        if type_only:
            detail += (
                f" (for {plural(len(type_only), 'call')} {listed(type_only)} the reason is "
                "right, the exception type is not)"
            )
        if wrong[0] in type_only:
            raise Wrong(
                detail,
                f"start with call {wrong[0]}: your reason is right, and the task states which "
                "exception type goes with which kind of failure",
            )
        raise Wrong(detail, "start with " + CALL_HINTS[wrong[0]])
    raised = [n for n in CALLS if measured[n] is not None]
    note = f"all {len(CALLS)} predictions match a fresh TensorFlow process"
    if raised:
        note += f": {plural(len(raised), 'call')} {listed(raised)} raised, the others did not"
    if unknown:
        note += (
            f" (TensorFlow's message for call(s) {', '.join(map(str, unknown))} is new to "
            "this checker: only the exception type was compared)"
        )
    return note


#: Task 4: the machine (this many devices of this many bytes); what training keeps per
#: parameter, each as large as the weights (the weight, its gradient and Adam's two slots:
#: notebook 05 measured the rule); the networks to place (``layer_sizes``), by name.
PLAN_DEVICES = 4
BUDGET = 1_500_000
TRAINING_COPIES = 4
NETWORKS = {
    "A": (64, 256, 256, 256, 10),  # notebook 04's network
    "B": (100, 200, 200, 200, 200, 200, 2),
    "C": (512, 1024, 10),
    "D": (256, 256, 256, 256, 256, 256),
}


def _shares(per_layer: Sequence[int], layout: Sequence[Hashable]) -> dict[Any, int]:
    """The bytes of ``per_layer`` summed per device of ``layout`` (the device of each layer)."""
    out: dict[Any, int] = {}
    for size, device in zip(per_layer, layout, strict=True):
        out[device] = out.get(device, 0) + size
    return out


def fewest_devices(per_layer: Sequence[int], budget: int = BUDGET) -> int | None:
    """The fewest devices a contiguous cut of layers of ``per_layer`` bytes needs, none over
    ``budget`` (greedy), or None when a single layer is over the budget."""
    if any(size > budget for size in per_layer):
        return None
    devices, held = 1, 0
    for size in per_layer:
        if held + size > budget:
            devices, held = devices + 1, 0
        held += size
    return devices


def _layout_of(network: str, value: Any, num_layers: int) -> list[int] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise Wrong(
            f"for network {network}: expected None or a list of device numbers, one per "
            f"layer, got {short(value)}",
            "e.g. [0, 0, 1] puts the first two layers on device 0 and the third on device 1",
        )
    layout = [item.item() if isinstance(item, np.generic) else item for item in value]
    for item in layout:
        if not is_whole_number(item):
            raise Wrong(
                f"for network {network}: device numbers are whole numbers, got {short(item)}",
                f"number the devices 0 to {PLAN_DEVICES - 1}",
            )
    if len(layout) != num_layers:
        raise Wrong(
            f"for network {network}: expected one device number per layer ({num_layers} "
            f"layers), got {len(layout)}",
            "layer i maps layer_sizes[i] inputs to layer_sizes[i + 1] outputs: a network of "
            "n + 1 sizes has n layers",
        )
    return layout


_OVER = "for network {network}: device {over[0]} would hold {over[1]:,} bytes, over the budget"
#: Task 4: what is wrong with a layout, over the facts of :func:`task4`.
TASK4_MISTAKES = (
    Mistake(
        lambda outside, **_: bool(outside),
        "for network {network}: there is no device {outside[0]}: the machine has "
        f"{PLAN_DEVICES}, numbered 0 to {PLAN_DEVICES - 1}",
        "your layout uses a device the machine does not have",
    ),
    Mistake(
        lambda layout, **_: (
            layout[0] != 0
            or any(b - a not in (0, 1) for a, b in zip(layout[:-1], layout[1:], strict=True))
        ),
        "for network {network}: {layout} is not a pipeline of contiguous stages",
        "{broken}",
    ),
    Mistake(
        lambda over, weights_fit, **_: bool(over) and weights_fit,
        _OVER + f" of {BUDGET:,}",
        "that layout fits the weights alone; training also keeps each parameter's "
        "gradient and Adam's two slots",
    ),
    Mistake(
        lambda over, **_: bool(over),
        _OVER + f" of {BUDGET:,}",
        "a device's share is the training bytes of every layer on it, and no device "
        "holds more than the budget",
    ),
    Mistake(
        lambda used, need, **_: need is not None and used > need,
        "network {network} fits on your {used} devices, but fewer devices are enough",
        "look at how much of the budget each of your devices leaves unused",
    ),
)


def _broken_pipeline(layout: list[int]) -> str:
    """Where ``layout`` (inside the machine) stops being contiguous stages from device 0."""
    if layout and layout[0] != 0:
        return f"your layout starts on device {layout[0]}, not on device 0"
    for i, (a, b) in enumerate(zip(layout[:-1], layout[1:], strict=True), start=1):
        if b < a:
            return f"your layer {i} goes back to device {b} after device {a}"
        if b > a + 1:
            return f"your layer {i} skips from device {a} to device {b}"
    return ""


@task(LAB, 4, references=("dtf.checks.lab03.fewest_devices",))
def task4(answer: Any, setup: Any) -> str:
    """``choose_layouts() -> {network: layout or None}``: for each of :data:`NETWORKS`, a
    contiguous layout on the fewest of :data:`PLAN_DEVICES` devices of :data:`BUDGET` bytes
    (a layer's share: its variables' bytes times :data:`TRAINING_COPIES`), or None when none
    fits. Any such layout is right; a message never shows one."""
    got = call(answer)
    expect_kind(got, Mapping, "a dict {network: layout or None}")
    missing = [n for n in NETWORKS if n not in got]
    if missing:
        raise Wrong(
            f"there is no decision for network {missing[0]}",
            f"give one entry per network, {list(NETWORKS)}: None where no layout fits",
        )
    build_on = device_names(setup)[0]
    notes = []
    for network, sizes in NETWORKS.items():
        layout = _layout_of(network, got[network], len(sizes) - 1)
        gpus = [f"/device:GPU:{i}" for i in range(len(sizes) - 1)]
        measured = _measured_bytes(sizes, gpus, build_on)
        per_layer = [TRAINING_COPIES * measured[short_device(n)] for n in gpus]
        need = fewest_devices(per_layer)
        fits = need is not None and need <= PLAN_DEVICES
        if layout is None:
            if fits:
                raise Wrong(
                    f"network {network} can be trained on these {PLAN_DEVICES} devices: "
                    "some layout fits the budget",
                    "compare each layer's training bytes, and the layers' sums, with the budget",
                )
            why = f"it needs {need} devices"
            if need is None:
                why = f"a layer alone needs {max(per_layer):,} bytes"
            notes.append(f"{network} fits nowhere ({why})")
            continue
        shares = _shares(per_layer, layout)
        weights = [b // TRAINING_COPIES for b in per_layer]
        diagnose(
            TASK4_MISTAKES,
            network=network,
            layout=layout,
            broken=_broken_pipeline(layout),
            outside=[d for d in layout if not 0 <= d < PLAN_DEVICES],
            over=next(((d, b) for d, b in shares.items() if b > BUDGET), ()),
            weights_fit=len(shares) == fewest_devices(weights),
            used=len(shares),
            need=need if fits else None,
        )
        notes.append(f"{network} on {len(shares)} ({max(shares.values()):,} bytes at most)")
    return (
        f"every decision holds at {TRAINING_COPIES * _BYTES} bytes per parameter of the "
        f"variables TensorFlow creates, within {BUDGET:,} bytes per device: " + "; ".join(notes)
    )
