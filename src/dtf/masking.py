"""Model what ``CUDA_VISIBLE_DEVICES`` and ``CUDA_DEVICE_ORDER`` do, without a GPU.

CUDA, not TensorFlow, reads both variables, once, when the CUDA driver initialises in a
process. They decide which GPUs the process can see and how they are numbered; TensorFlow
then names what CUDA shows it ``GPU:0``, ``GPU:1``, ... in that order. This module
computes those answers in plain Python so that notebooks can show them on any machine.

Rules for ``CUDA_VISIBLE_DEVICES`` (NVIDIA, CUDA C++ Programming Guide, "CUDA Environment
Variables"):

- unset: every GPU is visible; set to the empty string: none is;
- a comma-separated list of indices: only those GPUs are visible, enumerated in the
  order of the list (``"2,1"`` makes device 2 the first one);
- an invalid index ends the list: only the indices before it count (``"0,2,-1,1"``
  makes devices 0 and 2 visible, not 1).

Choices this model makes where NVIDIA's text says nothing (each raises rather than guess):

- A repeated index (``"0,0"``, ``"1,0,1"``) raises :class:`ValueError`. NVIDIA does not
  document it; PyTorch's own parser of the variable (``torch/cuda/__init__.py``,
  ``_parse_visible_devices``) assumes a repeat makes *no* device visible.
- A token that mixes digits with other characters (``"1a"``, ``"+1"``, ``"1.0"``) raises
  :class:`ValueError`: NVIDIA does not say how such tokens are read.
- GPU UUIDs (``GPU-8932f937...``) and MIG identifiers (``MIG-...``) raise
  :class:`ValueError`: only integer indices are modelled here.
- A token without any digit (``"x"``, an empty token as in ``"0,,1"``) is an invalid
  index, like ``-1``.
- A value with any non-ASCII character raises :class:`ValueError` that names it: CUDA
  reads the variable as ASCII text, so ``"١"`` (Arabic-Indic one) or ``"１"`` (fullwidth
  one) is not the index 1 there, although Python's ``int()`` and ``str.isdigit()``
  accept them; typographic quotes and no-break spaces copied from a web page are caught
  the same way.
- ASCII whitespace around the value and around each index is ignored, and so is one pair
  of straight quotes around the whole value: in a shell ``CUDA_VISIBLE_DEVICES="0,1"`` and
  ``CUDA_VISIBLE_DEVICES=0,1`` are the same (the shell removes the quotes), and a value
  copied together with its quotes is taken to mean the same thing.

``CUDA_DEVICE_ORDER`` (same NVIDIA page) decides the numbering that those indices refer
to: ``FASTEST_FIRST`` (the default) puts the device that a simple heuristic considers
fastest first; ``PCI_BUS_ID`` sorts by PCI bus id, ascending, which is the order
``nvidia-smi`` shows. NVIDIA does not publish the heuristic, so :func:`enumeration_order`
takes the speed ranking as input instead of pretending to compute it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence

from dtf._util import is_whole_number, whole_number

#: Values of ``CUDA_DEVICE_ORDER``; CUDA's default is the first.
ORDERS = ("FASTEST_FIRST", "PCI_BUS_ID")
DEFAULT_ORDER = "FASTEST_FIRST"

# Explicit ASCII classes: ``\d`` and ``str.isdigit`` also match other scripts' digits.
_DIGITS = "0123456789"
_INDEX = re.compile(r"[0-9]+")
_NEGATIVE = re.compile(r"-[0-9]+")
#: What ``str.strip()`` removes that a C parser would also call white space (no NBSP).
_ASCII_SPACE = " \t\n\r\f\v"
_UUID_PREFIXES = ("GPU-", "MIG-")
# [domain:]bus:device.function, all hexadecimal (TensorFlow prints 0000:02:00.0,
# nvidia-smi 00000000:02:00.0).
_PCI = re.compile(
    r"(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
    r"(?P<device>[0-9a-fA-F]{1,2})\.(?P<function>[0-7])"
)


def _check_num_physical(num_physical) -> int:
    return whole_number(
        "num_physical",
        num_physical,
        minimum=0,
        hint="It is the number of GPUs in the machine, e.g. 4.",
    )


def _check_ascii(value: str) -> None:
    """Refuse any non-ASCII character, naming it: CUDA parses the variable as ASCII."""
    for position, ch in enumerate(value):
        if not ch.isascii():
            name = unicodedata.name(ch, f"U+{ord(ch):04X}")
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={value!r} contains the non-ASCII character {ch!r} "
                f"({name}) at position {position}. CUDA reads the value as ASCII text, so "
                "this is not what it looks like to CUDA: type the indices with the digits "
                "0-9, commas and, if any, straight quotes, e.g. '0,1'"
            )


def _unquote(value: str) -> str:
    text = value.strip(_ASCII_SPACE)
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip(_ASCII_SPACE)
    return text


def parse_mask(value: str | None, num_physical: int) -> list[int]:
    """The physical GPU indices CUDA makes visible for ``CUDA_VISIBLE_DEVICES=value``.

    The list is in enumeration order: its item ``k`` is the GPU that TensorFlow calls
    ``GPU:k``. ``value=None`` means the variable is unset. ``num_physical`` is the
    number of GPUs in the machine; indices ``>= num_physical`` are invalid.

    >>> parse_mask("0,2,-1,1", 4)
    [0, 2]
    >>> parse_mask("2,1", 4)
    [2, 1]
    """
    n = _check_num_physical(num_physical)
    if value is None:
        return list(range(n))
    if not isinstance(value, str):
        raise TypeError(
            f"CUDA_VISIBLE_DEVICES is a string (or None for unset), got {type(value).__name__}"
        )
    _check_ascii(value)
    text = _unquote(value)
    if text == "":
        return []
    tokens = [token.strip(_ASCII_SPACE) for token in text.split(",")]
    for token in tokens:
        if token.upper().startswith(_UUID_PREFIXES):
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={value!r} names a GPU by UUID or MIG id ({token!r}); "
                "only integer indices are modelled here (run `nvidia-smi -L` on the machine "
                "to see which index belongs to which UUID)"
            )
    visible: list[int] = []
    for token in tokens:
        if _INDEX.fullmatch(token):
            index = int(token)
        elif _NEGATIVE.fullmatch(token) or not any(ch in _DIGITS for ch in token):
            index = -1  # invalid, like the documented "-1"
        else:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={value!r}: cannot tell how CUDA reads {token!r} "
                "(NVIDIA documents plain integer indices only); write plain indices such as "
                "'0,1'"
            )
        if not 0 <= index < n:
            break  # an invalid index hides itself and everything after it
        if index in visible:
            raise ValueError(
                f"CUDA_VISIBLE_DEVICES={value!r} lists GPU {index} twice. NVIDIA's "
                "documentation does not say what a repeated index does (PyTorch's parser "
                "assumes it makes no GPU visible), so this model refuses to guess: list each "
                "GPU once"
            )
        visible.append(index)
    return visible


def visible_mapping(value: str | None, num_physical: int) -> dict[int, int]:
    """``{visible ordinal: physical index}``; the key ``k`` is TensorFlow's ``GPU:k``.

    >>> visible_mapping("4,5,6,7", 8)
    {0: 4, 1: 5, 2: 6, 3: 7}
    """
    return dict(enumerate(parse_mask(value, num_physical)))


def show_mask(value: str | None) -> str:
    """How a value is written in tables: ``(unset)``, ``""`` or the value itself."""
    if value is None:
        return "(unset)"
    if value == "":
        return '""'
    return value


def _name_lookup(names, num_physical: int) -> Mapping[int, str]:
    if names is None:
        return {}
    if isinstance(names, Mapping):
        lookup = dict(names)
    elif isinstance(names, Sequence) and not isinstance(names, str):
        lookup = dict(enumerate(names))
    else:
        raise TypeError("names must be a list of GPU names or a {physical index: name} dict")
    not_indices = [k for k in lookup if not is_whole_number(k)]
    if not_indices:
        raise TypeError(
            "names must be keyed by physical GPU indices (whole numbers 0, 1, ...), "
            f"got the key(s) {not_indices}"
        )
    lookup = {int(k): v for k, v in lookup.items()}
    bad = [k for k in lookup if not 0 <= k < num_physical]
    if bad:
        raise ValueError(
            f"names has entries for GPUs that do not exist on a {num_physical}-GPU machine: {bad}"
        )
    return lookup


def mapping_table(
    masks: Iterable[str | None],
    num_physical: int,
    names: Sequence[str] | Mapping[int, str] | None = None,
):
    """One row per value of ``CUDA_VISIBLE_DEVICES``: what TensorFlow then sees.

    Columns: ``CUDA_VISIBLE_DEVICES`` (``(unset)`` for None, ``""`` for the empty string),
    ``TensorFlow sees`` (``GPU:0 → physical 4, ...`` or ``no GPU``) and ``count``.
    ``names`` (a list indexed by physical id, or a dict) adds GPU names to the mapping.
    Returns a pandas DataFrame.
    """
    import pandas as pd

    n = _check_num_physical(num_physical)
    lookup = _name_lookup(names, n)
    rows = []
    for mask in masks:
        mapping = visible_mapping(mask, n)
        parts = []
        for ordinal, physical in mapping.items():
            label = f"GPU:{ordinal} → physical {physical}"
            if physical in lookup:
                label += f" ({lookup[physical]})"
            parts.append(label)
        rows.append(
            {
                "CUDA_VISIBLE_DEVICES": show_mask(mask),
                "TensorFlow sees": ", ".join(parts) if parts else "no GPU",
                "count": len(mapping),
            }
        )
    return pd.DataFrame(rows, columns=["CUDA_VISIBLE_DEVICES", "TensorFlow sees", "count"])


# --------------------------------------------------------------------------- device order


def check_order(order: str | None) -> str:
    """Validate a ``CUDA_DEVICE_ORDER`` value; None (unset) means CUDA's default."""
    if order is None:
        return DEFAULT_ORDER
    if not isinstance(order, str) or order.strip(_ASCII_SPACE) not in ORDERS:
        raise ValueError(
            f"CUDA_DEVICE_ORDER must be one of {', '.join(ORDERS)} (unset means "
            f"{DEFAULT_ORDER}), got {order!r}"
        )
    return order.strip(_ASCII_SPACE)


def pci_key(pci_bus_id: str) -> tuple[int, int, int, int]:
    """``"0000:02:00.0"`` -> ``(0, 2, 0, 0)``: (domain, bus, device, function) as numbers."""
    m = _PCI.fullmatch(pci_bus_id.strip(_ASCII_SPACE)) if isinstance(pci_bus_id, str) else None
    if not m:
        raise ValueError(
            f"not a PCI bus id (expected [domain:]bus:device.function in hexadecimal, "
            f"e.g. '0000:02:00.0'), got {pci_bus_id!r}"
        )
    return (
        int(m["domain"] or "0", 16),
        int(m["bus"], 16),
        int(m["device"], 16),
        int(m["function"], 16),
    )


def _device_record(device) -> dict:
    if isinstance(device, Mapping):
        try:
            name, pci, rank = device["name"], device["pci_bus_id"], device["speed_rank"]
        except KeyError as err:
            raise ValueError(
                f"a device needs the keys name, pci_bus_id and speed_rank; missing {err}"
            ) from None
    elif isinstance(device, Sequence) and not isinstance(device, str) and len(device) == 3:
        name, pci, rank = device
    else:
        raise ValueError(
            "each device must be a dict with name, pci_bus_id and speed_rank, or a tuple "
            f"(name, pci_bus_id, speed_rank); got {device!r}"
        )
    rank = whole_number(
        f"speed_rank of {name!r}", rank, minimum=0, hint="0 is the fastest GPU, 1 the next."
    )
    pci_key(pci)  # validates
    return {"name": str(name), "pci_bus_id": pci, "speed_rank": rank}


def enumeration_order(devices: Iterable, order: str | None = DEFAULT_ORDER) -> list[dict]:
    """The GPUs in the order CUDA numbers them (item ``i`` is CUDA device ``i``).

    ``devices``: dicts ``{"name", "pci_bus_id", "speed_rank"}`` or tuples in that order;
    ``speed_rank`` 0 is the fastest. ``order``: ``"FASTEST_FIRST"`` (CUDA's default) or
    ``"PCI_BUS_ID"`` (ascending bus id: the order ``nvidia-smi`` shows).

    NVIDIA describes ``FASTEST_FIRST`` only as "a simple heuristic" and does not publish
    it, so the caller supplies the ranking; ties are broken by PCI bus id here, which is
    a modelling choice, not documented CUDA behaviour.
    """
    mode = check_order(order)
    records = [_device_record(d) for d in devices]
    keys = [pci_key(r["pci_bus_id"]) for r in records]
    if len(set(keys)) != len(keys):
        raise ValueError("two devices have the same PCI bus id")
    if mode == "PCI_BUS_ID":
        return sorted(records, key=lambda r: pci_key(r["pci_bus_id"]))
    return sorted(records, key=lambda r: (r["speed_rank"], pci_key(r["pci_bus_id"])))


def order_table(devices: Iterable):
    """Each GPU's number under both orders, next to ``nvidia-smi``'s (a pandas DataFrame).

    Columns: ``name``, ``pci_bus_id``, ``nvidia-smi`` (PCI order), ``CUDA (FASTEST_FIRST)``
    and ``CUDA (PCI_BUS_ID)``; rows in PCI order, as ``nvidia-smi`` lists them.
    """
    import pandas as pd

    devices = list(devices)
    by_pci = enumeration_order(devices, "PCI_BUS_ID")
    fastest = enumeration_order(devices, "FASTEST_FIRST")
    fast_index = {r["pci_bus_id"]: i for i, r in enumerate(fastest)}
    rows = [
        {
            "name": r["name"],
            "pci_bus_id": r["pci_bus_id"],
            "nvidia-smi": i,
            "CUDA (FASTEST_FIRST)": fast_index[r["pci_bus_id"]],
            "CUDA (PCI_BUS_ID)": i,
        }
        for i, r in enumerate(by_pci)
    ]
    return pd.DataFrame(rows)
