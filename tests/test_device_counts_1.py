"""Every tutorial and lab solution with NUM_DEVICES = 1 (see tests/device_counts.py)."""

import pytest

from tests.device_counts import cases, run_with

COUNT = 1


@pytest.mark.parametrize("path", cases(COUNT))
def test_runs_to_the_end(path, tmp_path):
    run_with(path, COUNT, tmp_path)


def test_every_notebook_that_sets_up_devices_takes_the_count_as_a_parameter():
    """A notebook that calls devices.setup must let NUM_DEVICES be changed, or the runs
    above would silently skip it."""
    from tests.device_counts import ROOT, notebooks

    paths = sorted(ROOT.glob("notebooks/*.ipynb")) + sorted(ROOT.glob("labs/solutions/*.ipynb"))
    uses_setup = [p for p in paths if "devices.setup(" in p.read_text(encoding="utf-8")]
    assert uses_setup, "no notebook calls devices.setup: has the API changed?"
    assert set(uses_setup) <= set(notebooks()), sorted(
        str(p.relative_to(ROOT)) for p in set(uses_setup) - set(notebooks())
    )


def test_every_notebook_gets_two_counts_other_than_its_default():
    from tests.device_counts import COUNTS, cases, notebooks, parameters

    runs = {count: {param.values[0] for param in cases(count)} for count in COUNTS}
    for path in notebooks():
        counts = [c for c in COUNTS if path in runs[c]]
        assert len(counts) == 2 and parameters(path)["NUM_DEVICES"] not in counts, (path, counts)
    assert all(runs[c] for c in COUNTS), "every count is run for some notebook"
