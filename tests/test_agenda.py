"""tools/agenda.py and INSTRUCTORS.md: the workshop agenda lists every notebook and lab."""

from __future__ import annotations

from tests.conftest import ROOT
from tools import agenda


def test_the_guide_lists_every_tutorial_and_lab():
    assert agenda.main(["--check"]) == 0, "run make run, then python -m tools.agenda"


def test_agenda_from_a_report_in_course_order():
    items = agenda.course_items(ROOT)
    first = items[0][2].relative_to(ROOT).as_posix()
    report = {"results": [{"notebook": first, "status": "passed", "seconds": 12.4}]}
    table = agenda.agenda(report, ROOT)
    rows = table.splitlines()[2:-1]
    assert len(rows) == len(items)
    assert rows[0].startswith("| 00 | [Setup check](notebooks/00_setup_check.ipynb) | 12 |")
    assert "not run" in rows[1]  # a notebook missing from the report says so
    labs = [i for i, (kind, _, _) in enumerate(items) if kind == "lab"]
    lab01 = next(i for i in labs if items[i][1] == "Lab 01")
    assert items[lab01 - 1][2].name.startswith("02_")  # after the last tutorial it practises
    assert "(labs/01_masking_placement_lab.ipynb)" in rows[lab01]  # the student lab is linked


def test_check_names_what_is_missing(tmp_path, monkeypatch, capsys):
    guide = tmp_path / "INSTRUCTORS.md"
    guide.write_text(f"x\n{agenda.START}\n| 00 | 00_setup_check.ipynb |\n{agenda.END}\n")
    monkeypatch.setattr(agenda, "GUIDE", guide)
    assert agenda.main(["--check"]) == 1
    assert "lacks 01_masking_cuda_visible_devices.ipynb" in capsys.readouterr().out
