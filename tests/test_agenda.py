"""tools/agenda.py and INSTRUCTORS.md: every part's minutes come from one formula (words/180 +
code lines/12 + measured run time), the agenda and its tracks are generated and fresh, and no
part runs over its 30-minute slot."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tools import agenda


@pytest.fixture(scope="module")
def times():
    return agenda.load_times()


@pytest.fixture(scope="module")
def items(times):
    return agenda.measure(ROOT, times)


def guide_text():
    return agenda.GUIDE.read_text(encoding="utf-8")


def item(label, minutes_of_words=0.0, seconds=0.0, kind="tutorial", tasks=0, words=None):
    """A made-up part whose minutes are ``minutes_of_words`` (as words) plus its run."""
    words = round(minutes_of_words * agenda.WORDS_PER_MIN) if words is None else words
    path = Path(f"notebooks/{label}_x.ipynb")
    return agenda.Item(kind, label, path, path.as_posix(), path.as_posix(), f"Part {label}",
                       words, 0, tasks, seconds)  # fmt: skip


def test_the_agenda_in_instructors_md_is_computed_and_fresh(items, times):
    """INSTRUCTORS.md's agenda and tracks equal what the tool computes today; every notebook
    and lab has a measured run time; no part runs over 30 minutes; the one-day track fits its
    day and each day of the two-day track fits too."""
    found = agenda.problems(items, times, guide_text())
    assert not found, "\n".join(found)
    assert agenda.main(["--check"]) == 0, "run python -m tools.agenda"


def test_markdown_words_and_code_are_counted_as_documented():
    source = (
        "# 03 · Title of `tf.device` use\n"  # 5 words: the code span counts
        "\n"
        "<!--navigation-->\n"
        "[← 02 · Prev](02_x.ipynb) | [Contents](../README.md) | [04 · Next →](04_x.ipynb)\n"
        "\n"
        "Read [the guide](https://example.org/a/b) now. <!-- not read -->\n"  # 4 words
        "![a diagram of towers](../images/towers.png)\n"  # an image: no words
        "<details><summary>More</summary>\n"  # 1 word; tags removed
        "\n"
        "| Device | Time |\n"  # 2 words; the pipes are not words
        "|---|---|\n"
        "```python\n"
        "x = 1\n"
        "\n"
        "# a comment in a fence is read as code\n"
        "```\n"
        "- two words\n"
    )
    assert agenda.markdown_counts(source) == (5 + 4 + 1 + 2 + 2, 2)


def test_code_lines_skip_blanks_comments_and_magics():
    source = "%%writefile worker.py\nimport os\n\n# why\n    # indented comment\nx = 1  # two\n"
    assert agenda.code_lines(source) == 2


def test_the_hosted_setup_cell_adds_no_minutes(tmp_path):
    import nbformat

    path = ROOT / "notebooks" / "00_setup_check.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells = [c for c in nb.cells if agenda.HOSTED_TAG not in c.metadata.get("tags", [])]
    without = tmp_path / path.name
    nbformat.write(nb, without)
    assert agenda.count(path) == agenda.count(without)


def test_counts_of_a_real_notebook_follow_its_cells():
    import nbformat

    path = ROOT / "notebooks" / "00_setup_check.ipynb"
    cells = nbformat.read(path, as_version=4).cells
    code = [c for c in cells if c.cell_type == "code"]
    taught = [c for c in code if agenda.HOSTED_TAG not in c.metadata.get("tags", [])]
    assert len(taught) == len(code) - 1  # the hosted setup cell is nobody's reading
    words, lines = agenda.count(path)
    assert lines >= sum(agenda.code_lines(c.source) for c in taught) > 0
    assert words > 100
    # the navigation lines of the first and last cells add no words
    first = cells[0].source
    nav = first[first.index(agenda.NAV_MARK) :]
    assert agenda.markdown_counts(first)[0] == agenda.markdown_counts(first.replace(nav, ""))[0]


def test_the_formula_and_the_slot():
    part = item("03", words=360, seconds=90)
    part.code = 24
    assert part.minutes == pytest.approx(360 / 180 + 24 / 12 + 90 / 60)  # 5.5
    assert part.slot == 10
    lab = item("Lab 02", words=180, seconds=60, kind="lab", tasks=3)
    assert lab.minutes == pytest.approx(1 + 1 + 3 * agenda.LAB_TASK_MIN)
    assert lab.slot == 20  # exactly 20 stays 20
    assert item("05", words=181).slot == 5  # 1.006 minutes
    assert item("05", words=180 * 25 + 1).slot == 30


def test_labs_are_read_in_their_student_version_and_count_their_tasks(items):
    labs = [i for i in items if i.kind == "lab"]
    assert len(labs) == len(list((ROOT / "labs" / "solutions").glob("[0-9][0-9]_*.ipynb")))
    for lab in labs:
        assert lab.read.startswith("labs/") and "solutions" not in lab.read
        assert lab.rel.startswith("labs/solutions/")  # the solution's run is measured
        assert lab.tasks >= 1, f"{lab.label}: no 'Task N' heading found"


def test_a_part_over_its_slot_fails_and_so_do_tracks_that_do_not_fit(monkeypatch):
    monkeypatch.setattr(agenda, "ONE_DAY", ("01", "09"))
    monkeypatch.setattr(agenda, "TWO_DAY", ("01", "02", "03"))
    parts = [item("01", 31), item("02", 30), item("03", 12)]
    found = agenda.problems(parts, {"notebooks": {}}, "")
    assert any(line.startswith("part 01 takes 31.0 min, over the 30-minute") for line in found)
    assert not any(line.startswith(("part 02", "part 03")) for line in found)
    assert "ONE_DAY lists 09, which is not a part or lab" in found
    monkeypatch.setattr(agenda, "TEACHING_MIN", 40)  # slots 35 | 30 + 15: day 2 does not fit
    found = agenda.problems(parts, {"notebooks": {}}, "")
    assert any(line.startswith("day 2 of the two-day track takes 45 min") for line in found)
    assert agenda.PART_MAX_MIN == 30


def test_a_part_without_a_run_time_or_a_stale_table_fails(items, times):
    text = guide_text()
    fewer = copy.deepcopy(times)
    newest = items[-1].rel
    del fewer["notebooks"][newest]
    found = agenda.problems(agenda.measure(ROOT, fewer), fewer, text)
    assert any(line.startswith(f"{newest} has no measured run time") for line in found)
    changed = copy.deepcopy(items)
    changed[0].words += 2 * agenda.WORDS_PER_MIN  # two more minutes of reading
    found = agenda.problems(changed, times, text)
    assert found == ["INSTRUCTORS.md's agenda is stale: run `python -m tools.agenda`"]


def test_the_tracks(items):
    one_day = [i for i in items if i.label in agenda.ONE_DAY]
    assert [i.label for i in one_day] == list(agenda.ONE_DAY)  # listed in course order
    assert agenda.TEACHING_MIN == 7 * 60 - 15 - 60 - 15
    rows = agenda.schedule(one_day)
    assert rows[0][0] == agenda.DAY_START
    assert rows[-1][1] == "*End*" and rows[-1][0] <= "16:00"
    breaks = [row for row in rows if row[1] in ("*Coffee break*", "*Lunch*")]
    assert len(breaks) == len(agenda.BREAKS)
    assert rows[-2][1] not in ("*Coffee break*", "*Lunch*")  # the day does not end on a break
    text = guide_text()
    for i in items:
        if i.label not in agenda.ONE_DAY:
            assert f"{i.label} ({i.slot} min)" in text.split("Optional in a one-day room")[1]
    chosen = [i for i in items if i.label in agenda.TWO_DAY]
    assert [i.label for i in chosen] == list(agenda.TWO_DAY)  # listed in course order
    assert set(agenda.ONE_DAY) <= set(agenda.TWO_DAY)  # the second day adds to the core
    first, second = agenda.two_days(chosen)
    assert first + second == chosen
    assert second[0].kind == "tutorial"  # a lab stays on the day of its tutorial
    for day in (first, second):
        assert sum(i.slot for i in day) <= agenda.TEACHING_MIN
        assert agenda.schedule(day)[-1][0] <= "16:00"
    home = text.split("Not in the two-day track")[1]
    for i in items:
        if i.label not in agenda.TWO_DAY:
            assert f"{i.label} ({i.slot} min)" in home


def test_from_report_stores_passed_default_runs(tmp_path, items, times):
    report = tmp_path / "report.json"
    passed, failed = items[0].rel, items[1].rel
    results = [
        {"notebook": passed, "status": "passed", "seconds": 3.21},
        {"notebook": failed, "status": "failed", "seconds": 1.0},
        {"notebook": "notebooks/99_gone.ipynb", "status": "passed", "seconds": 1.0},
    ]
    report.write_text(json.dumps({"summary": "1 passed", "parameters": {}, "results": results}))
    os.utime(report, (1_700_000_000, 1_700_000_000))
    stored = copy.deepcopy(times)
    stored["notebooks"]["notebooks/98_removed.ipynb"] = {"seconds": 5.0, "run": 1}
    assert agenda.from_report(stored, report, ROOT) == [passed]
    run = stored["runs"][-1]
    assert run["date"] == "2023-11-14 22:13 UTC"
    assert run["tensorflow"] == agenda.tensorflow_version()
    assert stored["notebooks"][passed] == {"seconds": 3.2, "run": run["id"]}
    assert stored["notebooks"][failed] == times["notebooks"][failed]  # kept from before
    assert "notebooks/98_removed.ipynb" not in stored["notebooks"]  # pruned
    out = tmp_path / "run_times.json"
    agenda.dump_times(stored, out)
    assert json.loads(out.read_text()) == stored


def test_from_report_refuses_other_parameters(tmp_path, times):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"parameters": {"NUM_DEVICES": 1}, "results": []}))
    with pytest.raises(SystemExit, match="default parameters"):
        agenda.from_report(copy.deepcopy(times), report, ROOT)


def test_the_committed_run_times_say_where_they_come_from(times):
    assert times["runs"], "tools/run_times.json names no run"
    for run in times["runs"]:
        assert {"id", "date", "machine", "tensorflow", "source"} <= set(run)
    used = {entry["run"] for entry in times["notebooks"].values()}
    assert used == {run["id"] for run in times["runs"]}
    tmp = copy.deepcopy(times)
    agenda.prune(tmp, ROOT)
    assert tmp == times  # nothing to prune


def test_course_order_puts_a_lab_after_its_tutorial(items):
    labels = [i.label for i in items]
    lab01 = labels.index("Lab 01")
    assert items[lab01 - 1].path.name.startswith("02b_")  # after the last tutorial it practises
    assert "(labs/01_masking_placement_lab.ipynb)" in guide_text()  # the student lab is linked


def test_check_names_a_stale_guide(tmp_path, monkeypatch, capsys):
    guide = tmp_path / "INSTRUCTORS.md"
    guide.write_text(f"x\n{agenda.START}\n| 00 | 00_setup_check.ipynb |\n{agenda.END}\n")
    monkeypatch.setattr(agenda, "GUIDE", guide)
    assert agenda.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "INSTRUCTORS.md's agenda is stale" in out
    assert "part    " in out and "00 " in out  # the minutes of every part are printed
