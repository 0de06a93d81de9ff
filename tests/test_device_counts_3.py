"""Every tutorial and lab solution with NUM_DEVICES = 3 (see tests/device_counts.py)."""

import pytest

from tests.device_counts import cases, run_with

COUNT = 3


@pytest.mark.parametrize("path", cases(COUNT))
def test_runs_to_the_end(path, tmp_path):
    run_with(path, COUNT, tmp_path)
