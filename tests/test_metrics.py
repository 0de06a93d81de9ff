import numpy as np
import pytest

from dtf import metrics


def test_record_returns_value_without_runner(monkeypatch):
    monkeypatch.delenv(metrics.ENV_VAR, raising=False)
    assert metrics.record("acc", 0.5) == 0.5


def test_record_writes_lines_and_later_value_wins(monkeypatch, tmp_path):
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv(metrics.ENV_VAR, str(path))
    metrics.record("acc", np.float32(0.25))
    metrics.record("steps", np.int64(7))
    metrics.record("device", "CPU")
    metrics.record("acc", 0.75)
    assert metrics.read(path) == {"acc": 0.75, "steps": 7, "device": "CPU"}
    assert isinstance(metrics.read(path)["steps"], int)


def test_read_missing_file_is_empty(tmp_path):
    assert metrics.read(tmp_path / "absent.jsonl") == {}


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_rejected(bad):
    with pytest.raises(ValueError, match="not finite"):
        metrics.record("loss", bad)


@pytest.mark.parametrize("name", ["", "  ", None, 3])
def test_bad_name(name):
    with pytest.raises(ValueError, match="non-empty string"):
        metrics.record(name, 1)


def test_bad_type():
    with pytest.raises(TypeError, match="number, bool or string"):
        metrics.record("table", [1, 2])
