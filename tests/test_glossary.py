"""Jargon comes after its definition: the first cell in course order that uses a term defines it.

For each term of the table below, the test finds the first cell of the tutorials, in course
order (``tools.contents.tutorials``, the order of the contents table), whose text or code
mentions it, and asserts that that cell, or the markdown cell just before it, defines the term
or links to where it is defined. A title cell's one-line summary may name a topic that the
Overview right after it defines. So a later edit that uses a term earlier than its definition,
without defining it there, fails here and names the cell.
"""

import re
from dataclasses import dataclass

import nbformat
import pytest

from tests.helpers import ROOT
from tools.contents import tutorials


@dataclass(frozen=True)
class Term:
    name: str
    use: str  # regex: where the term is used (case-sensitive)
    definitions: tuple[str, ...]  # regexes: any one of them found near the first use defines it


TERMS = [
    Term(
        "keepalive",
        r"(?i)keep-?alive",
        (r"\*keepalive\*, gRPC's check[^.]*alive: [^.]*pings",),
    ),
    Term(
        "TF_GRPC_DEFAULT_OPTIONS",
        r"TF_GRPC_DEFAULT_OPTIONS",
        (r"TF_GRPC_DEFAULT_OPTIONS`, an environment variable of gRPC channel settings",),
    ),
    Term(
        "all-reduce",
        r"(?i)all-?reduc",
        (r"\*all-reduce\*\*?,? (?:\(a collective operation that )?sums a value across all",),
    ),
    Term(
        "NCCL",
        r"NCCL",
        (r"NCCL(?:`|\*)*,? \(?NVIDIA's Collective Communications Library",),
    ),
    Term(
        "GPipe",
        r"GPipe",
        (r"\*GPipe\* \(Google's pipeline-parallel training scheme",),
    ),
    Term(
        "bubble",
        r"(?i)\bbubble\b",
        (r"its idle time, the \*bubble\*",),
    ),
    Term(
        "1F1B",
        r"1F1B",
        (r"\*1F1B\*, one forward then one backward",),
    ),
    Term(
        "AUTO sharding",
        r"\bAUTO\b",
        (r"Left at `AUTO`, the default, TensorFlow first tries", r"11d_input_sharding\.ipynb"),
    ),
    Term(
        "DATA sharding",
        r"`DATA`|AutoShardPolicy\.DATA|\bDATA (?:shard|polic)",
        (r"`DATA` here, which means that every worker", r"11d_input_sharding\.ipynb"),
    ),
    Term(
        "heartbeat",
        r"(?i)heartbeat",
        (r"\*heartbeat\*, the short message each worker sends at a fixed interval",),
    ),
    Term(
        "coordination service",
        r"(?i)coordination service",
        (r"\*coordination service\*, a service in the chief's TensorFlow runtime",),
    ),
    Term(
        "XSpace",
        r"XSpace",
        (r"\*\*`XSpace`\*\*, a protocol buffer",),
    ),
    Term(
        "SPMD",
        r"SPMD",
        (r"\*SPMD\*, single program, multiple data",),
    ),
    Term(
        "device mesh",
        r"(?i)device mesh",
        (r"\*device mesh\*, an array of devices with a name for each axis",),
    ),
]


def cells_in_course_order():
    """(notebook name, index, cell) of every cell of every tutorial, in course order."""
    for path in tutorials(ROOT):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            yield path.name, index, cell


def first_use(term: Term, cells):
    for name, index, cell in cells:
        if re.search(term.use, cell.source):
            return name, index
    return None


def defining_cells(cells, index):
    """The cells where a term first used in ``cells[index]`` may be defined."""
    near = [cells[index]]
    before = [c for c in cells[:index] if c.cell_type == "markdown"]
    if before:
        near.append(before[-1])
    if index == 0 and len(cells) > 1:  # the title cell's summary: the Overview defines it
        near.append(next(c for c in cells[1:] if c.cell_type == "markdown"))
    return near


def defined_near(term: Term, cells, index) -> bool:
    return any(
        re.search(pattern, cell.source)
        for cell in defining_cells(cells, index)
        for pattern in term.definitions
    )


@pytest.mark.parametrize("term", TERMS, ids=lambda t: t.name)
def test_first_use_defines_the_term(term):
    """Each glossary term is defined, or linked to its definition, at its first use."""
    found = first_use(term, cells_in_course_order())
    assert found, f"{term.name}: no tutorial uses it any more; drop it from TERMS"
    name, index = found
    nb_cells = nbformat.read(ROOT / "notebooks" / name, as_version=4).cells
    assert defined_near(term, nb_cells, index), (
        f"{term.name}: first used in notebooks/{name}, cell {index}, which (with the markdown "
        f"cell before it) does not define it: define it there or link to its definition.\n"
        f"The cell begins: {nb_cells[index].source[:300]!r}"
    )


def _cells(*sources):
    return [
        nbformat.v4.new_markdown_cell(s)
        if not s.startswith("#code ")
        else nbformat.v4.new_code_cell(s.removeprefix("#code "))
        for s in sources
    ]


def test_a_use_before_the_definition_is_caught():
    """The check fails for a term used in a cell that neither it nor the one before defines."""
    term = Term("widget", r"widget", (r"\*widget\*, a small thing",))
    good = _cells("# 00 · T", "## Overview", "A *widget*, a small thing.", "#code widget()")
    assert first_use(term, [("x", i, c) for i, c in enumerate(good)]) == ("x", 2)
    assert defined_near(term, good, 2) and defined_near(term, good, 3)
    early = _cells("# 00 · T", "Use a widget.", "Later: a *widget*, a small thing.")
    assert not defined_near(term, early, 1)
    title = _cells("# 00 · T\n\nAll about the widget.", "## Overview\n\nA *widget*, a small thing.")
    assert defined_near(term, title, 0)
