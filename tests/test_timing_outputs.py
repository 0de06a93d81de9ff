"""Stored timing outputs: measured on a quiet machine, and every verdict follows from its repeats.

Issue 26, section 2: a timing verdict read from noise teaches the noise. The timing lessons print
:func:`dtf.timing.machine_load` before they time, and their comparisons as
:class:`dtf.timing.Verdict` lines (a median ratio, the range of the repeats, and a conclusion).
These tests read the stored outputs only (fast, no kernel) and fail when a timing notebook was
stored from a busy machine, has no load line, or prints a conclusion its own repeats do not
support.
"""

from __future__ import annotations

import copy
import re

import nbformat
import pytest

from dtf import timing
from tests.helpers import ROOT

#: The tutorials whose lessons rest on timings; each must print the load before it times.
TIMING_NOTEBOOKS = ("03b", "04c", "09b", "10b", "12", "12b", "12c", "12d", "12e")
VERDICT = re.compile(
    r"^(?P<a>.+?) / (?P<b>.+?) time (?P<med>[\d.]+) \((?:repeats|all pairs) (?P<lo>[\d.]+) to "
    r"(?P<hi>[\d.]+), n=(?P<n>\d+)(?:x\d+)?\): (?P<rest>.+)$"
)
LOAD = re.compile(rf"^{re.escape(timing.LOAD_LINE)} (?P<load>[\d.]+) of (?P<cores>\d+) cores")
HALF = 0.005  # the ratios are printed with two decimals


def load(prefix: str):
    (path,) = (ROOT / "notebooks").glob(f"{prefix}_*.ipynb")
    return nbformat.read(path, as_version=4)


def printed_lines(nb):
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text") or out.get("data", {}).get("text/plain", "")
            yield from str(text).splitlines()


def verdict_errors(nb) -> list[str]:
    """Every verdict line whose conclusion does not follow from its printed repeats."""
    errors = []
    for line in printed_lines(nb):
        found = VERDICT.match(line.strip())
        if not found:
            continue
        lo, med, hi = (float(found[k]) for k in ("lo", "med", "hi"))
        a, b, rest = found["a"], found["b"], found["rest"]
        if not lo - HALF <= med <= hi + HALF or int(found["n"]) < 2:
            errors.append(f"median outside its repeats, or one repeat: {line}")
        elif rest.startswith((f"{a} faster", f"{a} smaller")):
            ok = hi - HALF < 1
        elif rest.startswith((f"{b} faster", f"{b} smaller")):
            ok = lo + HALF > 1
        elif rest.startswith("no measurable difference"):
            ok = lo - HALF <= 1 <= hi + HALF
        else:
            ok = False
        if not ok:
            errors.append(line)
    return errors


def load_lines(nb) -> list[re.Match]:
    return [m for m in map(LOAD.match, printed_lines(nb)) if m]


@pytest.mark.parametrize("prefix", TIMING_NOTEBOOKS)
def test_timing_notebook_was_stored_from_a_quiet_machine(prefix):
    found = load_lines(load(prefix))
    assert found, f"notebook {prefix} prints no '{timing.LOAD_LINE}' line before it times"
    for m in found:
        value = float(m["load"])
        assert value <= timing.QUIET_SHARE, (
            f"notebook {prefix}'s stored timings ran while other programs used {value} of the "
            "cores' time: re-run `make outputs ARGS=...` on a quiet machine"
        )


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_stored_verdict_follows_from_its_repeats(path):
    assert verdict_errors(nbformat.read(path, as_version=4)) == []


def test_doctored_verdicts_and_loads_fail():
    nb = load("04c")
    line = next((x.strip() for x in printed_lines(nb) if VERDICT.match(x.strip())), None)
    assert line, "04c prints its bubble verdicts as dtf.timing.Verdict lines"
    found = VERDICT.match(line)
    opposite = found["b"] if found["rest"].startswith(found["a"]) else found["a"]
    doctored = copy.deepcopy(nb)
    for cell in doctored.cells:
        for out in cell.get("outputs", []):
            if line in out.get("text", ""):
                out["text"] = out["text"].replace(found["rest"], f"{opposite} faster")
    assert verdict_errors(doctored), f"a flipped verdict passed: {line}"
    assert not timing.Load(0.9, 2).quiet and LOAD.match(str(timing.Load(0.9, 2)))
