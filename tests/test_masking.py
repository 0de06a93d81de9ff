"""Tests for ``dtf.masking``: the CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER model.

The documented cases come from NVIDIA's CUDA C++ Programming Guide ("CUDA Environment
Variables") and from the course's sources (README, "Sources"): the value table of the
*TensorFlow multi-GPU notes* ("4,5,6,7" renumbered from 0) and the TITAN X + GTX 970 machine
of the *Distributed TensorFlow notes* and the *Parallel Processing notes*. Pure Python: no
TensorFlow, fast.
"""

from __future__ import annotations

import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from dtf import masking
from dtf.masking import (
    enumeration_order,
    mapping_table,
    order_table,
    parse_mask,
    pci_key,
    visible_mapping,
)
from tests.helpers import ROOT

SRC = ROOT / "src"

# The two-GPU machine of the Distributed TensorFlow and Parallel Processing notes, with a
# speed ranking we supply.
TITAN_X = {"name": "GeForce GTX TITAN X", "pci_bus_id": "0000:02:00.0", "speed_rank": 0}
GTX_970 = {"name": "GeForce GTX 970", "pci_bus_id": "0000:05:00.0", "speed_rank": 1}


# --------------------------------------------------------------------------- parse_mask


@pytest.mark.parametrize(
    ("value", "n", "expected"),
    [
        # NVIDIA's documented examples
        (None, 4, [0, 1, 2, 3]),  # unset: all devices
        ("", 4, []),  # empty: none
        ("2,1", 4, [2, 1]),  # order of the list is the enumeration order
        ("0,2,-1,1", 4, [0, 2]),  # an invalid index ends the list
        # the TensorFlow multi-GPU notes' table
        ("1", 4, [1]),
        ("0,1", 4, [0, 1]),
        ('"0,1"', 4, [0, 1]),  # quotation marks are optional
        ("'0,1'", 4, [0, 1]),
        ("0,2,3", 4, [0, 2, 3]),
        ("4,5,6,7", 8, [4, 5, 6, 7]),
        # invalid indices
        ("-1", 4, []),
        ("4", 4, []),  # index == num_physical
        ("0,1,9", 4, [0, 1]),
        ("9,0", 4, []),
        ("x", 4, []),
        ("NoDevFiles", 4, []),
        ("0,,1", 4, [0]),  # an empty token is not an index
        ("0,1,", 4, [0, 1]),
        # whitespace
        (" 0 , 1 ", 4, [0, 1]),
        ("   ", 4, []),
        ('" "', 4, []),
        # leading zeros are still the same index
        ("01", 4, [1]),
        # a machine without GPUs sees nothing, whatever the mask
        (None, 0, []),
        ("0", 0, []),
        # what comes after an invalid index is never read
        ("0,-1,0", 4, [0]),
        ("0,-1,1a", 4, [0]),
    ],
)
def test_parse_mask_documented_cases(value, n, expected):
    assert parse_mask(value, n) == expected


@pytest.mark.parametrize("value", ["0,0", "1,0,1", "0,00", " 2 , 2 "])
def test_repeated_index_is_refused_not_guessed(value):
    with pytest.raises(ValueError, match="twice.*does not say"):
        parse_mask(value, 4)


@pytest.mark.parametrize(
    "value",
    [
        "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6",
        "gpu-8932f937",
        "0,GPU-89",
        "MIG-GPU-8932f937/1/2",
        "0,-1,GPU-89",  # refused even after an invalid index: the model does not do UUIDs
    ],
)
def test_uuid_and_mig_forms_are_refused(value):
    with pytest.raises(ValueError, match="only integer indices are modelled"):
        parse_mask(value, 4)


@pytest.mark.parametrize("value", ["1a", "+1", "1.0", "0,2gpu", "--1"])
def test_undocumented_tokens_are_refused(value):
    with pytest.raises(ValueError, match="cannot tell how CUDA reads"):
        parse_mask(value, 4)


@pytest.mark.parametrize(
    "value",
    [
        "٣",  # ARABIC-INDIC DIGIT THREE: int() and str.isdigit() accept it, CUDA does not
        "１",  # FULLWIDTH DIGIT ONE
        "0,１",
        "０,1",
        "0,-1,１",  # refused even after an invalid index, like UUIDs: the value is malformed
        "²",  # SUPERSCRIPT TWO: isdigit() is True, int() fails
        "\u200b0",  # a zero-width space pasted in front
        "0\u00a0",  # a no-break space
        "“0,1”",  # typographic quotes, as copied from a web page
        "0，1",  # FULLWIDTH COMMA
    ],
)
def test_non_ascii_is_refused_with_the_character_named(value):
    with pytest.raises(ValueError, match="non-ASCII character") as info:
        parse_mask(value, 4)
    message = str(info.value)
    assert "0-9" in message
    bad = next(ch for ch in value if not ch.isascii())
    assert repr(bad) in message and unicodedata.name(bad) in message


@pytest.mark.parametrize("n", [1.5, 4.0, "4", None, True, False])
def test_num_physical_must_be_a_whole_number(n):
    with pytest.raises(TypeError, match="num_physical must be a whole number"):
        parse_mask("0", n)


def test_negative_num_physical():
    with pytest.raises(ValueError, match="num_physical must be at least 0"):
        parse_mask("0", -1)


def test_numpy_integers_count_as_whole_numbers():
    assert parse_mask("2,1", np.int64(4)) == [2, 1]
    assert parse_mask(None, np.uint8(2)) == [0, 1]
    assert mapping_table(["1"], np.int32(2), names={np.int64(1): "B"})["count"].tolist() == [1]


@pytest.mark.parametrize("value", [0, ["0"], b"0"])
def test_value_must_be_a_string_or_none(value):
    with pytest.raises(TypeError, match="string"):
        parse_mask(value, 4)


# --------------------------------------------------------------------------- mapping


def test_visible_mapping_renumbers_from_zero():
    # TensorFlow multi-GPU notes: "4,5,6,7" on an 8-GPU machine shows up as GPU:0..3
    assert visible_mapping("4,5,6,7", 8) == {0: 4, 1: 5, 2: 6, 3: 7}
    assert visible_mapping("2,1", 4) == {0: 2, 1: 1}
    assert visible_mapping("", 4) == {}


def test_mapping_table_rows_and_columns():
    table = mapping_table(["0", "1", "0,1", "0,2,3", "", "-1", "4,5,6,7", None], 8)
    assert list(table.columns) == ["CUDA_VISIBLE_DEVICES", "TensorFlow sees", "count"]
    assert table["CUDA_VISIBLE_DEVICES"].tolist() == [
        "0",
        "1",
        "0,1",
        "0,2,3",
        '""',
        "-1",
        "4,5,6,7",
        "(unset)",
    ]
    assert table["count"].tolist() == [1, 1, 2, 3, 0, 0, 4, 8]
    assert table.loc[6, "TensorFlow sees"] == (
        "GPU:0 → physical 4, GPU:1 → physical 5, GPU:2 → physical 6, GPU:3 → physical 7"
    )
    assert table.loc[4, "TensorFlow sees"] == "no GPU"


def test_mapping_table_with_names():
    names = [TITAN_X["name"], GTX_970["name"]]
    table = mapping_table(["0", "1"], 2, names=names)
    assert table["TensorFlow sees"].tolist() == [
        "GPU:0 → physical 0 (GeForce GTX TITAN X)",
        "GPU:0 → physical 1 (GeForce GTX 970)",
    ]
    table = mapping_table(["1,0"], 2, names={1: "B"})
    assert table.loc[0, "TensorFlow sees"] == "GPU:0 → physical 1 (B), GPU:1 → physical 0"


def test_mapping_table_bad_input():
    with pytest.raises(ValueError, match="do not exist"):
        mapping_table(["0"], 2, names={5: "ghost"})
    with pytest.raises(TypeError, match="names"):
        mapping_table(["0"], 2, names="TITAN X")
    with pytest.raises(ValueError, match="num_physical"):
        mapping_table(["0"], -2)
    with pytest.raises(TypeError, match="num_physical"):
        mapping_table(["0"], 2.0)
    with pytest.raises(ValueError, match="twice"):
        mapping_table(["0,0"], 2)


@pytest.mark.parametrize("key", [True, "0", 0.0, None])
def test_mapping_table_names_keys_must_be_indices(key):
    # True used to pass as index 1 (bool is an int to Python)
    with pytest.raises(TypeError, match="names.*physical GPU indices"):
        mapping_table(["0"], 2, names={key: "ghost"})


def test_mapping_table_empty_list():
    table = mapping_table([], 4)
    assert table.empty
    assert list(table.columns) == ["CUDA_VISIBLE_DEVICES", "TensorFlow sees", "count"]


def test_show_mask():
    assert masking.show_mask(None) == "(unset)"
    assert masking.show_mask("") == '""'
    assert masking.show_mask("0,1") == "0,1"


# --------------------------------------------------------------------------- device order


def test_pci_key():
    assert pci_key("0000:02:00.0") == (0, 2, 0, 0)
    assert pci_key("00000000:0A:1f.3") == (0, 10, 31, 3)  # nvidia-smi's 8-digit domain
    assert pci_key("05:00.0") == (0, 5, 0, 0)
    assert pci_key("0000:81:00.0") > pci_key("0000:0a:00.0")  # numeric, not text, order


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "0000:02:00",
        "02-00.0",
        "0000:02:00.8",
        "zz:00.0",
        2,
        "０000:02:00.0",  # fullwidth digit
        "0000:٠2:00.0",  # Arabic-Indic digit
        "0000:02:00.0\u00a0",  # no-break space: not whitespace to a C parser
    ],
)
def test_pci_key_bad(bad):
    with pytest.raises(ValueError, match="PCI bus id"):
        pci_key(bad)


def test_notes_machine_both_orders_agree():
    # On the notes' machine the faster card also sits on the lower bus.
    for order in ("FASTEST_FIRST", "PCI_BUS_ID", None):
        names = [d["name"] for d in enumeration_order([GTX_970, TITAN_X], order)]
        assert names == ["GeForce GTX TITAN X", "GeForce GTX 970"]


def test_orders_disagree_when_the_slower_card_is_on_the_lower_bus():
    swapped = [
        ("GeForce GTX 970", "0000:02:00.0", 1),
        ("GeForce GTX TITAN X", "0000:05:00.0", 0),
    ]
    fastest = [d["name"] for d in enumeration_order(swapped)]
    pci = [d["name"] for d in enumeration_order(swapped, "PCI_BUS_ID")]
    assert fastest == ["GeForce GTX TITAN X", "GeForce GTX 970"]
    assert pci == ["GeForce GTX 970", "GeForce GTX TITAN X"]
    table = order_table(swapped)
    assert table["name"].tolist() == ["GeForce GTX 970", "GeForce GTX TITAN X"]
    assert table["nvidia-smi"].tolist() == [0, 1]
    assert table["CUDA (FASTEST_FIRST)"].tolist() == [1, 0]
    assert table["CUDA (PCI_BUS_ID)"].tolist() == [0, 1]


def test_fastest_first_ties_broken_by_pci():
    same = [("B", "0000:81:00.0", 0), ("A", "0000:0a:00.0", 0), ("C", "0000:03:00.0", 1)]
    assert [d["name"] for d in enumeration_order(same)] == ["A", "B", "C"]


@pytest.mark.parametrize("order", ["fastest_first", "PCI", "", 1, "PCI_BUS_ID\u3000"])
def test_bad_order_name(order):
    with pytest.raises(ValueError, match="CUDA_DEVICE_ORDER must be one of"):
        enumeration_order([TITAN_X], order)


def test_check_order():
    assert masking.check_order(None) == "FASTEST_FIRST"
    assert masking.check_order(" PCI_BUS_ID ") == "PCI_BUS_ID"


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ([{"name": "a", "pci_bus_id": "0000:01:00.0"}], "missing"),
        ([("a", "0000:01:00.0")], "tuple"),
        (["a"], "tuple"),
        ([("a", "0000:01:00.0", -1)], "speed_rank of 'a' must be at least 0"),
        ([("a", "bus 1", 0)], "PCI bus id"),
        ([("a", "0000:01:00.0", 0), ("b", "00000000:01:00.0", 1)], "same PCI bus id"),
    ],
)
def test_bad_devices(devices, message):
    with pytest.raises(ValueError, match=message):
        enumeration_order(devices)


@pytest.mark.parametrize("rank", [1.5, 1.0, True, "0", None])
def test_speed_rank_must_be_a_whole_number(rank):
    with pytest.raises(TypeError, match="speed_rank of 'a' must be a whole number"):
        enumeration_order([("a", "0000:01:00.0", rank)])


def test_speed_rank_accepts_numpy_integers():
    tflops = np.array([2.5, 9.0])  # slow, fast
    ranks = np.argsort(np.argsort(-tflops))  # int64 ranks from a NumPy computation: [1, 0]
    devices = [("slow", "0000:01:00.0", ranks[0]), ("fast", "0000:02:00.0", ranks[1])]
    order = enumeration_order(devices)
    assert [d["name"] for d in order] == ["fast", "slow"]
    assert all(type(d["speed_rank"]) is int for d in order)


def test_enumeration_order_empty():
    assert enumeration_order([]) == []


def test_module_does_not_import_tensorflow():
    code = "import sys; import dtf.masking; print('tensorflow' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(SRC)},
        check=True,
    )
    assert out.stdout.strip() == "False"
