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


@pytest.fixture(scope="module")
def tf():
    return pytest.importorskip("tensorflow")


@pytest.mark.parametrize(
    "array",
    [
        np.array([0.1, 0.2]),  # the example: used to raise ValueError from .item()
        np.zeros((2, 2)),
        np.zeros((3, 1), np.int64),
        np.array([]),
        np.zeros((0, 4)),
        np.array(["a", "b"]),
    ],
    ids=lambda a: f"{a.dtype}{a.shape}",
)
def test_non_scalar_array_is_a_type_error(array, monkeypatch, tmp_path):
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv(metrics.ENV_VAR, str(path))
    with pytest.raises(TypeError, match=r"metric 'acc' must be a single value") as info:
        metrics.record("acc", array)
    assert f"shape {array.shape}" in str(info.value)
    assert "float(" in str(info.value)  # says what to do
    assert not path.exists()  # nothing half-written


@pytest.mark.parametrize("shape", [(2,), (2, 3), (0,), (1, 0)])
def test_non_scalar_tensor_is_a_type_error(tf, shape):
    for value in (tf.zeros(shape), tf.Variable(tf.zeros(shape))):
        with pytest.raises(TypeError, match=r"must be a single value.*shape \(") as info:
            metrics.record("loss", value)
        assert str(shape) in str(info.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (np.array(0.5), 0.5),
        (np.array([0.5]), 0.5),
        (np.array([[3]], np.int32), 3),
        (np.float64(2.5), 2.5),
        (np.bool_(True), True),
        (np.str_("GPU:0"), "GPU:0"),
    ],
)
def test_size_one_arrays_and_numpy_scalars_become_python_scalars(value, expected):
    got = metrics.record("x", value)
    assert got == expected and type(got) is type(expected)


def test_size_one_tensors_become_python_scalars(tf, monkeypatch, tmp_path):
    path = tmp_path / "m.jsonl"
    monkeypatch.setenv(metrics.ENV_VAR, str(path))
    assert metrics.record("a", tf.constant(0.5)) == 0.5
    assert metrics.record("b", tf.constant([[7]])) == 7
    assert metrics.record("c", tf.Variable([1.5])) == 1.5
    assert metrics.read(path) == {"a": 0.5, "b": 7, "c": 1.5}
    assert isinstance(metrics.read(path)["b"], int)


def test_non_finite_tensor_rejected(tf):
    with pytest.raises(ValueError, match="not finite"):
        metrics.record("loss", tf.constant(float("nan")))
