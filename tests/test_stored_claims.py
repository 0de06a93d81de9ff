"""The stored outputs of the tutorials agree with the words beside them (issue 17, section 3).

A number a notebook prints is measured in that run, so a sentence that interprets it can be
contradicted by the run. The notebooks print such conclusions from the measured value ("little
overlap (1.96 >= 1.6)") or state them as conditions, and assert what their text claims. These
tests read the *stored* outputs only (no kernel, no TensorFlow: fast) and fail when they disagree
with the interpretation:

- a generic check: every comparison of numbers a notebook printed ("(0.03 < 1 GB/s)",
  "(0.95 <= 1.01 <= 1.05)") holds for the printed numbers, allowing for their rounding;
- one test per measured claim the text keeps (the table below): the values are read from the
  stored output, the printed verdict must follow from them, and the markdown must still state
  the condition the verdict is read against;
- doctored copies of stored outputs (a verdict that contradicts its number) must fail, so none
  of these checks is one that cannot fail.
"""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser

import nbformat
import pytest

from tests.helpers import ROOT
from tests.test_timing_outputs import VERDICT, verdict_errors

NOTEBOOKS = ROOT / "notebooks"
NUMBER = r"-?\d+(?:\.\d+)?"
OPERATOR = r"<=|>=|≤|≥|<|>"
COMPARISON = re.compile(rf"(?<![\w.]){NUMBER}(?:\s*(?:{OPERATOR})\s*{NUMBER})+(?![\w.])")


# ----------------------------------------------------------------------------- reading outputs
def load(prefix: str):
    (path,) = NOTEBOOKS.glob(f"{prefix}_*.ipynb")
    return nbformat.read(path, as_version=4)


def cell(nb, cell_id: str):
    found = [c for c in nb.cells if c.get("id") == cell_id]
    assert found, f"no cell {cell_id!r}: the claim table below must follow the notebook"
    return found[0]


def text_of(code_cell) -> str:
    """Everything a code cell printed or displayed as text, in order."""
    parts = []
    for out in code_cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
    return "\n".join(parts)


def markdown_after(nb, cell_id: str) -> str:
    """The next markdown cell after `cell_id`: where the interpretation of its output stands."""
    ids = [c.get("id") for c in nb.cells]
    following = nb.cells[ids.index(cell_id) + 1 :]
    return next(c.source for c in following if c.cell_type == "markdown")


def parameter(nb, cell_id: str, name: str) -> float:
    """A constant assigned in a cell's source (`NAME = 1.6  # ...`)."""
    found = re.search(rf"^{name} = ({NUMBER})", cell(nb, cell_id).source, re.M)
    assert found, f"{name} not assigned in cell {cell_id}"
    return float(found.group(1))


class _Tables(HTMLParser):
    """Rows of the HTML tables pandas displays: (header cells, data cells) per row."""

    def __init__(self):
        super().__init__()
        self.rows, self._row, self._cell, self._kind = [], None, None, None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row = ([], [])
        elif tag in ("th", "td") and self._row is not None:
            self._cell, self._kind = [], tag

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self._cell is not None:
            self._row[0 if self._kind == "th" else 1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row[1]:  # header rows have no data cells
                self.rows.append(self._row)
            self._row = None


def table_of(code_cell) -> list[tuple[list[str], list[str]]]:
    html = [
        o.data["text/html"]
        for o in code_cell.get("outputs", [])
        if o.output_type == "execute_result" and "text/html" in o.data
    ]
    assert html, "the cell stores no table"
    parser = _Tables()
    parser.feed(html[-1])
    return parser.rows


def lines_matching(text: str, pattern: str) -> list[re.Match]:
    found = [m for m in (re.search(pattern, line) for line in text.splitlines()) if m]
    assert found, f"no stored line matches {pattern!r} in:\n{text}"
    return found


# ----------------------------------------------------------------------------- the generic check
def _decimals(number: str) -> int:
    return len(number.split(".")[1]) if "." in number else 0


def comparison_holds(expression: str) -> bool:
    """True when `a op b [op c ...]` can hold for the values the printed numbers were rounded
    from. The numbers with the most decimals are the rounded measurements (within half a unit of
    their last digit); the others are thresholds, printed exactly ("1.60 < 1.6" holds for 1.597,
    "1.5 >= 1.6" does not hold for anything printed as 1.5)."""
    tokens = re.findall(rf"{NUMBER}|{OPERATOR}", expression)
    most = max(_decimals(t) for t in tokens[::2])
    slack = 0.5 * 10**-most if most else 0.0  # integers are taken as exact
    values = [(float(t), slack if _decimals(t) == most else 0.0) for t in tokens[::2]]
    for i, op in enumerate(tokens[1::2]):
        (a, da), (b, db) = values[i], values[i + 1]
        if op in ("<", "<=", "≤"):
            ok = a - da < b + db if op == "<" else a - da <= b + db
        else:
            ok = a + da > b - db if op == ">" else a + da >= b - db
        if not ok:
            return False
    return True


def false_comparisons(nb) -> list[str]:
    bad = []
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        for found in COMPARISON.finditer(text_of(c)):
            if not comparison_holds(found.group(0)):
                bad.append(f"cell {c.get('id')}: {found.group(0)!r}")
    return bad


TUTORIALS = sorted(NOTEBOOKS.glob("[0-9][0-9]*_*.ipynb"))  # 11b_... too


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name.split("_")[0] for p in TUTORIALS])
def test_printed_comparisons_hold(path):
    """Every comparison of numbers in a stored output holds for the numbers printed with it."""
    assert not false_comparisons(nbformat.read(path, as_version=4))


@pytest.mark.parametrize(
    ("expression", "holds"),
    [
        ("1.96 >= 1.6", True),
        ("1.50 >= 1.6", False),
        ("1.59 >= 1.6", False),
        ("1.60 < 1.6", True),  # 1.597 printed with two decimals
        ("1.62 < 1.6", False),
        ("0.95 <= 1.01 <= 1.05", True),
        ("0.95 <= 1.21 <= 1.05", False),
        ("49116 < 109341", True),
        ("19 >= 20", False),
    ],
)
def test_comparison_reading(expression, holds):
    assert comparison_holds(expression) is holds
    assert COMPARISON.fullmatch(expression)


# ----------------------------------------------------------------------------- claim by claim
def check_12_scaling(nb):
    """12, section 2: each towers N's verdict (grew, flat, fell) follows from the range of the
    table's T(N) repeats against the range of T(1)'s; MirroredStrategy's N, one process each,
    are not judged; E matches, and the text reads it as such; the efficiency plot shows every
    measured point (no fixed upper limit that clips E > 1)."""
    way, rows = None, {}
    for heads, data in table_of(cell(nb, "12-10")):
        way = heads[0] if len(heads) == 2 else way
        median, low, high, efficiency = map(float, data)
        rows[way, int(heads[-1])] = (median, low, high, efficiency)
    verdicts = lines_matching(
        text_of(cell(nb, "12-11b")),
        r"^(\w+), N = (\d+): E = ([\d.]+), throughput (not judged|\w+):",
    )
    assert len(verdicts) == len(rows) - len({w for w, _ in rows})  # one per way and N > 1
    for found in verdicts:
        name, n, e, trend = found.group(1), int(found.group(2)), float(found.group(3)), found[4]
        _, low_n, high_n, efficiency = rows[name, n]
        _, low, high, _ = rows[name, 1]
        if name != "towers":  # one process per N
            expected = "not judged"
        else:
            expected = "grew" if low_n > high else "fell" if high_n < low else "flat"
        assert trend == expected, f"{name}, N = {n}: printed {trend!r}, the table says {expected}"
        assert e == pytest.approx(efficiency, abs=0.006)
    assert "against the whole range of $T(1)$'s repeats" in markdown_after(nb, "12-11b")
    plot = cell(nb, "12-11").source
    assert "ylim=(0, 1.1)" not in plot and 'summary["efficiency"].max()' in plot


def verdicts_in(text: str) -> dict[str, re.Match]:
    """The dtf.timing verdict lines of a stored output, by the name of their first side."""
    found = (VERDICT.match(line.strip()) for line in text.splitlines())
    return {m["a"]: m for m in found if m}


def check_12_fixed_cost(nb):
    """12, section 2: each towers block's conclusion follows from its verdict lines and numbers
    ("overlapped" only when the time per example with N replicas was smaller in every repeat;
    else "explained" or "inconclusive", with how many repeats gained more than the fixed cost
    alone gives; "more fixed cost" only when one replica's was smaller in every repeat); each
    MirroredStrategy block, one process per N, gives no verdict; T(N)/T(1) is the table's; the
    text reads the three outcomes as conditions."""
    medians = {}
    way = None
    for heads, data in table_of(cell(nb, "12-10")):
        way = heads[0] if len(heads) == 2 else way
        medians[way, int(heads[-1])] = float(data[0])
    out = text_of(cell(nb, "12-12c"))
    blocks = re.split(r"\n(?=\w+, N = \d+: T\(N\))", out.strip())
    heads = [
        re.match(
            r"^(\w+), N = (\d+): T\(N\) = ([\d.]+) x T\(1\); the fixed cost alone: ([\d.]+)", b
        )
        for b in blocks
    ]
    assert all(heads) and len(heads) == len(medians) - len({w for w, _ in medians}), out
    for head, block in zip(heads, blocks, strict=True):
        way, n, gained = head[1], int(head[2]), float(head[3])
        assert gained == pytest.approx(medians[way, n] / medians[way, 1], abs=0.006)
        said = lines_matching(block, r"-> (.*)$")[0].group(1)
        if way != "towers":
            assert said.startswith("no verdict") and not verdicts_in(block), block
            continue
        verdicts = verdicts_in(block)
        per_example = verdicts.get(f"time per example, N = {n}")
        fixed = verdicts.get(f"fixed cost, N = {n}")
        overlapped = per_example is not None and per_example["rest"].startswith(per_example["a"])
        if overlapped:
            assert said.startswith("the replicas' arithmetic overlapped"), block
        else:  # repeat by repeat against the fixed cost alone: every one within, or not
            found = re.match(r"inconclusive: (\d+) of (\d+) repeats", said)
            assert found or said.startswith("explained by the fixed cost"), block
            assert not found or 1 <= int(found[1]) <= int(found[2]), block
        more_fixed = fixed is not None and fixed["rest"].startswith(f"{fixed['b']} smaller")
        assert ("also paid more fixed cost" in said) == more_fixed, block
    text = markdown_after(nb, "12-12c")
    for reading in ("*Overlapped*", "*Explained by the fixed cost*", "*Inconclusive*"):
        assert reading in text, reading


def check_12e_chains(nb):
    """12e, section 2: 'overlapped' is printed exactly when the two chains on two logical CPUs
    beat one chain twice in every repeat; then 'more on two logical CPUs' exactly when they also
    beat the same two chains on one logical CPU (the control) in every repeat, 'one logical CPU
    ran them faster' exactly when the control won every repeat, 'as much' otherwise; the text
    states the conditions."""
    out = text_of(cell(nb, "12-17"))
    found = verdicts_in(out)
    overlap, control = found["two chains, two devices"], found["two devices"]
    faster = overlap["rest"].startswith("two chains, two devices faster")
    assert faster == (float(overlap["hi"]) < 1.005), out  # every repeat below 1
    devices_won = control["rest"].startswith("two devices faster")
    lines = out.splitlines()
    assert any(line.startswith("no overlap measured") for line in lines) == (not faster), out
    more = any("more on two logical CPUs than on one" in line for line in lines)
    assert more == (faster and devices_won), out
    device_lost = control["rest"].startswith("one device faster")
    slower = any("yet one logical CPU ran them faster" in line for line in lines)
    assert slower == (faster and device_lost), out
    same = any(line.startswith("the chains overlapped, as much") for line in lines)
    assert same == (faster and not devices_won and not device_lost), out
    text = markdown_after(nb, "12-17")
    assert "The second is the control" in text and "two devices beat one device" in text


def check_12d_pipeline(nb):
    """12d, section 2: the table's last column follows from each pipeline's slowest and fastest
    repeat against the consumption printed above it, as the text before the cell defines it;
    only the pipeline that caches after the random step replays its first epoch."""
    out = text_of(cell(nb, "12d-17"))
    needed = float(lines_matching(out, r"consumed ([\d.]+) examples/s")[0].group(1))
    rows = table_of(cell(nb, "12d-17"))
    assert len(rows) == 4, rows
    for heads, data in rows:
        low, high, said = float(data[0]), float(data[2]), data[-1]
        expected = "enough" if low >= needed else "starves it" if high < needed else "within"
        assert said.startswith(expected), f"{heads[0]}: {said!r}, expected {expected!r}"
    assert "*enough* when even its slowest repeat" in cell(nb, "12d-16").source
    replays = lines_matching(text_of(cell(nb, "12d-13")), r"^(.*): epoch 2 (repeats|differs)")
    assert {m[1] for m in replays if m[2] == "repeats"} == {"augment, then cache (wrong)"}
    assert len(replays) == 4


def check_12e_copying(nb):
    """12e, section 1: 'not the copying' only when the needed bandwidth is below 1 GB/s."""
    out = text_of(cell(nb, "12-15"))
    if "no time left to explain" in out:
        return
    needed = float(lines_matching(out, r"a link of only ([\d.]+) GB/s")[0].group(1))
    assert ("not the copying" in out) == (needed < 1.0), out


def check_12e_mixed_precision(nb):
    """12e, section 1: under mixed_float16 the gradients of the float32 variables are float32
    (what the text says Keras 3 all-reduces), and 16-bit gradients are half the bytes."""
    out = text_of(cell(nb, "12-14b"))
    assert "activations float16, variables float32, gradients float32" in out
    for found in lines_matching(out, r"([\d.]+) MB per replica .* ([\d.]+) MB cast to 16 bits"):
        assert float(found.group(2)) == pytest.approx(float(found.group(1)) / 2, abs=0.001)
    assert "keeps the **variables** in float32" in cell(nb, "12-14").source


def check_12c_step_verdicts(nb):
    """12c, section 3: each verdict's ratio of medians is the ratio of the two cases' median
    steps printed above it, the sides named as printed (a swapped pair reads backwards)."""
    out = text_of(cell(nb, "12c-23"))
    medians = {m[1]: float(m[2]) for m in lines_matching(out, r"^(.*): ([\d.]+) ms per step,")}
    sides = {"packs": "MirroredStrategy, packs", "one pack": "MirroredStrategy"}
    for verdict in verdicts_in(out).values():
        a, b = (sides.get(verdict[k], verdict[k]) for k in ("a", "b"))
        ratio = medians[a] / medians[b]
        assert float(verdict["med"]) == pytest.approx(ratio, rel=0.02, abs=0.01), (verdict[0], out)


def check_12c_packs(nb):
    """12c, section 2: with a pack per gradient a step runs twice the all-reduces of one pack
    (two gradients), and 'was launched during the backward pass in X of Y steps' counts the printed
    gaps below zero; one pack never began before the last gradient op."""
    counts = {
        m[1]: json.loads(m[2])
        for m in lines_matching(text_of(cell(nb, "12c-16")), r"^(.*): all-reduce ops .*: (\[.*\])$")
    }
    one, packs = counts["MirroredStrategy"], counts["MirroredStrategy, packs"]
    assert len(set(one)) == len(set(packs)) == 1 and packs[0] == 2 * one[0], counts
    out = text_of(cell(nb, "12c-18"))
    if one[0] == 0:  # one device: no all-reduce to place
        return
    gaps = {
        m[1]: [float(v) for v in m[2].split()]
        for m in lines_matching(out, r"^(one pack|packs):\s+first all-reduce.*: \[(.*)\]$")
    }
    assert min(gaps["one pack"]) >= 0, out
    during, total = map(
        int, lines_matching(out, r"backward pass in (\d+) of (\d+) steps")[0].groups()
    )
    assert (during, total) == (sum(g < 0 for g in gaps["packs"]), len(gaps["packs"]))
    assert "so it is printed, not asserted" in markdown_after(nb, "12c-18")


def check_09_epoch_time(nb):
    """09b, section 4: the timing verdict compares every later epoch of one run with every one
    of the other (tests/test_timing_outputs.py checks that it follows from them); its ratio is
    the table's, and the text reads the verdict; a first epoch of the strategy that beat one
    device's is explained, not passed over."""
    out = text_of(cell(nb, "09-20"))
    found = lines_matching(
        out,
        r"^MirroredStrategy / one device time ([\d.]+) \(all pairs .*\): (MirroredStrategy "
        r"faster|one device faster|no measurable difference)",
    )
    ratio = float(found[0].group(1))
    assert verdict_errors(nb) == []  # the verdict follows from the pairs it prints
    table = {heads[0]: [float(v) for v in data] for heads, data in table_of(cell(nb, "09-19"))}
    (single, strategy) = table["one device"], next(v for k, v in table.items() if k != "one device")
    assert ratio == pytest.approx(strategy[2] / single[2], rel=0.05)  # time per epoch column
    gap = float(lines_matching(out, r"loss curves: ([\d.]+)")[0].group(1))
    assert gap < 0.1
    assert "only when all of those pairs agree" in markdown_after(nb, "09-20")
    if strategy[1] < single[1]:  # first epoch (with tracing)
        assert "the strategy's can come out faster" in cell(nb, "09-09").source


def check_10_step_time(nb):
    """10b, section 5: which way was faster (or neither) is printed from the repeats, and the
    text reads that verdict."""
    out = text_of(cell(nb, "10-22"))
    lines_matching(
        out,
        r"^notebook 03b's towers / MirroredStrategy time [\d.]+ \(repeats .*\): "
        r"(notebook 03b's towers faster|MirroredStrategy faster|no measurable difference)",
    )
    assert verdict_errors(nb) == []
    assert "*no measurable difference* when the repeats fall on both sides of 1" in (
        markdown_after(nb, "10-22")
    )


def check_10_bitwise(nb):
    """10b, section 5: with one or two devices the towers and MirroredStrategy are equal to the
    last bit, step by step and over the whole run, as the text says (the cells assert it)."""
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    devices = parameter(nb, params.get("id"), "NUM_DEVICES")
    step = lines_matching(text_of(cell(nb, "10-19c")), r"MirroredStrategy\| weight: (\S+)$")
    run = lines_matching(text_of(cell(nb, "10-19e")), r"over all weights: (\S+)$")
    if devices <= 2:
        assert float(step[0].group(1)) == 0.0 and float(run[0].group(1)) == 0.0
    assert "With one or two devices the numbers are even equal to the last bit" in (
        markdown_after(nb, "10-20")
    )


def check_08_staleness(nb):
    """08, section 4: 'most updates were not stale' is printed exactly when under half were."""
    out = text_of(cell(nb, "08-27"))
    share = float(lines_matching(out, r"stale updates: ([\d.]+) of them")[0].group(1))
    not_stale = "most updates were not stale" in out
    assert not_stale == (share < 0.5) and not_stale != ("most updates were stale" in out), out
    assert "when the line above says *most updates were not stale*" in markdown_after(nb, "08-27")


def check_08_killed_worker(nb):
    """08b, section 2: 'the killed one stopped early': one worker ran far fewer of the steps
    scheduled around the kill than an even share; '(a step ran twice)' only with extra updates."""
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    steps, workers = (parameter(nb, params.get("id"), n) for n in ("FAILURE_STEPS", "NUM_WORKERS"))
    ((_, per_worker),) = table_of(cell(nb, "08-32"))
    assert min(int(v) for v in per_worker) < steps / workers
    out = text_of(cell(nb, "08-32"))
    extra = int(lines_matching(out, r"beyond the steps scheduled: (\d+)")[0].group(1))
    assert ("(a step ran twice)" in out) == (extra > 0), out


def check_14_sync_replicas(nb):
    """14, section 4: the line on the chief (still closing, or exited) follows from the table,
    and the text states it as a condition (its close may outlast the cell's wait); every global
    step the workers read is at least STEPS (the text says it can pass STEPS), and the TF2
    comparison ran as many steps as the ps counted."""
    steps = parameter(nb, "13-02", "STEPS")
    rows = {heads[0]: data for heads, data in table_of(cell(nb, "13-22"))}
    hung = rows["worker 0 (chief)"][0].startswith("did not exit")
    said = lines_matching(text_of(cell(nb, "13-22")), r"^the chief: (.*)$")[0].group(1)
    assert said == ("still closing, killed" if hung else "closed its session and exited")
    counted = [int(float(data[2])) for data in rows.values() if data[2] not in ("", "NaN")]
    assert counted and min(counted) >= steps
    tf2 = text_of(cell(nb, "13-24"))
    ran = int(lines_matching(tf2, r"SyncReplicasOptimizer, (\d+) steps")[0].group(1))
    assert ran in counted
    text = markdown_after(nb, "13-22")
    assert "can be higher than `STEPS`" in text
    assert "If the line above says the chief was *still closing its session*" in text


def check_05_activation_memory(nb):
    """05, section 4: the slope of a step's memory is one to about two times the layer outputs
    per example, as the text says (the cell asserts 1.0 to 2.2); the text says "roughly"
    linear and points at the printed range of the cost between successive batch sizes."""
    out = text_of(cell(nb, "63b8e40bb"))
    times = float(lines_matching(out, r"layer outputs: \d+ bytes \(([\d.]+) x\)")[0].group(1))
    assert 1.0 <= times <= 2.2
    low, high = map(float, lines_matching(out, r"batches: ([\d.]+) to ([\d.]+) x")[0].groups())
    assert 0 < low <= times <= high, out
    text = markdown_after(nb, "63b8e40bb")
    assert "between one and about two times the layer outputs" in text
    assert "roughly linearly" in text and "the range printed above" in text


CLAIMS = {
    "12 throughput grew, flat or fell": ("12", check_12_scaling),
    "12 growth: fixed cost or overlapped arithmetic": ("12", check_12_fixed_cost),
    "12c all-reduces per pack, and before the backward pass ends": ("12c", check_12c_packs),
    "12c step verdicts read the medians printed": ("12c", check_12c_step_verdicts),
    "12d pipeline enough or not, cache replays its epoch": ("12d", check_12d_pipeline),
    "12e two chains overlapped or not": ("12e", check_12e_chains),
    "12e all-reduce time is copying or not": ("12e", check_12e_copying),
    "12e mixed precision and all-reduce bytes": ("12e", check_12e_mixed_precision),
    "09b MirroredStrategy slower, tie or faster": ("09b", check_09_epoch_time),
    "10b towers or MirroredStrategy faster": ("10b", check_10_step_time),
    "10b towers equal MirroredStrategy to the bit": ("10b", check_10_bitwise),
    "08 most updates stale or not": ("08", check_08_staleness),
    "08b the killed worker stopped early": ("08b", check_08_killed_worker),
    "14 chief hung or exited, final step >= STEPS": ("14", check_14_sync_replicas),
    "05 activation memory one to two times": ("05", check_05_activation_memory),
}


@pytest.mark.parametrize("claim", list(CLAIMS))
def test_stored_outputs_agree_with_the_text(claim):
    prefix, check = CLAIMS[claim]
    check(load(prefix))


# ----------------------------------------------------------------------------- the checks can fail
def _doctor(nb, cell_id: str, old: str, new: str):
    """A copy of `nb` whose stored output of `cell_id` says `new` where it said `old`."""
    nb = copy.deepcopy(nb)
    for out in cell(nb, cell_id).outputs:
        if out.output_type == "stream" and old in out.text:
            out.text = out.text.replace(old, new)
            return nb
        if out.output_type == "execute_result":
            kinds = [k for k in ("text/plain", "text/html") if old in out.data.get(k, "")]
            for kind in kinds:  # both forms of a table, so every reader sees the change
                out.data[kind] = out.data[kind].replace(old, new)
            if kinds:
                return nb
    pytest.fail(f"{old!r} is not in the stored output of {cell_id}")


def _flip(text: str, pairs: list[tuple[str, str]]) -> tuple[str, str]:
    """The first of `pairs` whose left side occurs in `text`: (that, its opposite)."""
    return next((a, b) for a, b in pairs + [(b, a) for a, b in pairs] if a in text)


def test_a_verdict_that_contradicts_its_number_fails():
    nb = load("12e")
    out = text_of(cell(nb, "12-17"))
    old, new = _flip(
        out,
        [
            (
                "no overlap measured",
                "the chains overlapped, and more on two logical CPUs than on one",
            ),
            ("the chains overlapped, as much", "more on two logical CPUs than on one, as much"),
        ],
    )
    with pytest.raises(AssertionError):
        check_12e_chains(_doctor(nb, "12-17", old, new))
    nb = load("09b")
    out = text_of(cell(nb, "09-20"))
    if "no measurable difference" in out:
        old, new = "no measurable difference", "one device faster"
    else:
        old, new = _flip(out, [("one device faster", "MirroredStrategy faster")])
    with pytest.raises(AssertionError):
        check_09_epoch_time(_doctor(nb, "09-20", old, new))


def test_a_conclusion_that_contradicts_its_verdicts_fails():
    """12 and 12c: a flipped conclusion, or a count of steps that the gaps do not give."""
    nb = load("12")
    out = text_of(cell(nb, "12-12c"))
    old, new = _flip(
        out,
        [
            ("-> explained by the fixed cost", "-> the replicas' arithmetic overlapped"),
            ("-> inconclusive", "-> the replicas' arithmetic overlapped"),
        ],
    )
    with pytest.raises(AssertionError):
        check_12_fixed_cost(_doctor(nb, "12-12c", old, new))
    nb = load("12c")
    found = re.search(r"backward pass in (\d+) of", text_of(cell(nb, "12c-18")))
    assert found, "12c-18 prints in how many steps an all-reduce began during the backward pass"
    wrong = f"backward pass in {int(found[1]) + 1} of"
    with pytest.raises(AssertionError):
        check_12c_packs(_doctor(nb, "12c-18", found[0], wrong))


def test_a_printed_comparison_that_does_not_hold_fails():
    nb = load("12")
    found = COMPARISON.search(text_of(cell(nb, "12-11b")))
    assert found, "12-11b prints each T(N) against the range of T(1)"
    a, op, b = re.findall(rf"{NUMBER}|{OPERATOR}", found.group(0))[:3]
    flipped = {"<": ">=", ">=": "<", ">": "<=", "<=": ">"}[op]
    doctored = _doctor(nb, "12-11b", found.group(0), f"{a} {flipped} {b}")
    assert false_comparisons(doctored)


def test_text_that_loses_its_condition_fails():
    nb = copy.deepcopy(load("12e"))
    text = cell(nb, "12-18")
    text.source = text.source.replace("The second is the control", "The second is a line")
    with pytest.raises(AssertionError):
        check_12e_chains(nb)


def test_a_table_that_contradicts_its_verdicts_fails():
    nb = load("12d")
    rows = table_of(cell(nb, "12d-17"))
    said = rows[0][1][-1]
    other = "enough" if said != "enough" else "starves it"
    doctored = _doctor(nb, "12d-17", f"<td>{said}</td>", f"<td>{other}</td>")
    with pytest.raises(AssertionError):
        check_12d_pipeline(doctored)
    nb = load("14")
    old, new = _flip(
        text_of(cell(nb, "13-22")),
        [("still closing, killed", "closed its session and exited")],
    )
    doctored = _doctor(nb, "13-22", old, new)
    with pytest.raises(AssertionError):
        check_14_sync_replicas(doctored)


def test_every_claim_names_a_notebook():
    assert {prefix for prefix, _ in CLAIMS.values()} <= {p.name.split("_")[0] for p in TUTORIALS}
