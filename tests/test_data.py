"""Tests for ``dtf.data``: the bundled digits split and tiny Keras-layout caches.

No test touches the network: the Keras data sets are exercised through small caches written
under ``tmp_path`` in the exact layout Keras 3 uses, and every path that could download has
its downloader replaced by one that fails at once.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import os
import pickle
import struct
import subprocess
import sys
import tarfile
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from dtf import data
from dtf.data import NAMES, Dataset, DatasetUnavailableError, cache_paths, load
from tests.helpers import ROOT

SRC = ROOT / "src"
N_TRAIN, N_TEST = 12, 6
N_DIGITS = 1797


# --------------------------------------------------------------------------------------------
# Tiny caches in Keras' layout


def _pixels(n: int, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Random uint8 images whose first pixels are known: 255, 0, 51 (-> 1.0, 0.0, 0.2)."""
    x = np.random.default_rng(seed).integers(0, 256, size=(n, *shape), dtype=np.uint8)
    x.reshape(n, -1)[0, :3] = (255, 0, 51)
    return x


def _labels(n: int, seed: int) -> np.ndarray:
    return (np.arange(n, dtype=np.uint8) * 7 + seed) % 10


def write_mnist(root: Path) -> dict[str, np.ndarray]:
    raw = {
        "x_train": _pixels(N_TRAIN, (28, 28), 1),
        "y_train": _labels(N_TRAIN, 1),
        "x_test": _pixels(N_TEST, (28, 28), 2),
        "y_test": _labels(N_TEST, 2),
    }
    (root / "datasets").mkdir(parents=True, exist_ok=True)
    np.savez(root / "datasets" / "mnist.npz", **raw)
    return raw


def _write_idx(path: Path, array: np.ndarray) -> None:
    """An idx file as published: big-endian magic, dimensions, then the uint8 bytes."""
    magic = 0x800 | array.ndim  # 0x08 = unsigned byte, then the number of dimensions
    header = struct.pack(f">I{array.ndim}I", magic, *array.shape)
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def write_fashion_mnist(root: Path) -> dict[str, np.ndarray]:
    raw = {
        "x_train": _pixels(N_TRAIN, (28, 28), 3),
        "y_train": _labels(N_TRAIN, 3),
        "x_test": _pixels(N_TEST, (28, 28), 4),
        "y_test": _labels(N_TEST, 4),
    }
    folder = root / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True, exist_ok=True)
    _write_idx(folder / "train-labels-idx1-ubyte.gz", raw["y_train"])
    _write_idx(folder / "train-images-idx3-ubyte.gz", raw["x_train"])
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", raw["y_test"])
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", raw["x_test"])
    return raw


CIFAR_TRAIN_BATCH_SIZES = (3, 3, 2, 2, 2)  # 12 in all; real batches hold 10,000 each


def _write_cifar_batch(path: Path, images_chw: np.ndarray, labels: np.ndarray) -> None:
    # Keys are bytes, as in the original Python 2 pickles (Keras decodes them); protocol 3
    # stores bytes natively, which Keras' restricted unpickler accepts.
    batch = {
        b"batch_label": path.name.encode(),
        b"labels": [int(v) for v in labels],
        b"data": images_chw.reshape(len(images_chw), -1),
        b"filenames": [f"img_{i}.png".encode() for i in range(len(labels))],
    }
    path.write_bytes(pickle.dumps(batch, protocol=3))


def write_cifar10(root: Path) -> dict[str, np.ndarray]:
    """Batches of channels-first images; the expected arrays are channels-last."""
    x_train_chw = _pixels(N_TRAIN, (3, 32, 32), 5)
    x_test_chw = _pixels(N_TEST, (3, 32, 32), 6)
    y_train, y_test = _labels(N_TRAIN, 5), _labels(N_TEST, 6)
    folder = root / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for i, size in enumerate(CIFAR_TRAIN_BATCH_SIZES, start=1):
        part = slice(start, start + size)
        _write_cifar_batch(folder / f"data_batch_{i}", x_train_chw[part], y_train[part])
        start += size
    _write_cifar_batch(folder / "test_batch", x_test_chw, y_test)
    return {
        "x_train": x_train_chw.transpose(0, 2, 3, 1),
        "y_train": y_train,
        "x_test": x_test_chw.transpose(0, 2, 3, 1),
        "y_test": y_test,
    }


WRITERS = {"mnist": write_mnist, "fashion_mnist": write_fashion_mnist, "cifar10": write_cifar10}
IMAGE_SHAPES = {"mnist": (28, 28, 1), "fashion_mnist": (28, 28, 1), "cifar10": (32, 32, 3)}


@pytest.fixture
def keras_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "keras_home"
    root.mkdir()
    monkeypatch.setenv("KERAS_HOME", str(root))
    return root


@pytest.fixture
def no_download(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading a complete cache must never fall back to Keras: the fallback, the only code
    of dtf.data that imports Keras, fails the test."""

    def fail(name, paths):
        raise AssertionError(f"unexpected Keras fallback for {name}")

    monkeypatch.setattr(data, "_download_with_keras", fail)


@pytest.fixture(scope="module")
def keras():
    return pytest.importorskip("keras")


def _expected_images(raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    return (raw.astype(np.float32) / np.float32(255)).reshape(len(raw), *shape)


def _assert_matches(ds: Dataset, raw: dict[str, np.ndarray], name: str) -> None:
    shape = IMAGE_SHAPES[name]
    assert ds.name == name
    assert ds.input_shape == shape
    assert ds.x_train.shape == (N_TRAIN, *shape) and ds.x_test.shape == (N_TEST, *shape)
    for split in ("train", "test"):
        x, y = getattr(ds, f"x_{split}"), getattr(ds, f"y_{split}")
        assert x.dtype == np.float32 and y.dtype == np.int64 and y.shape == (len(x),)
        np.testing.assert_array_equal(x, _expected_images(raw[f"x_{split}"], shape))
        np.testing.assert_array_equal(y, raw[f"y_{split}"].astype(np.int64))
    first = ds.x_train[0].reshape(-1)  # channels-last order
    expected_first = raw["x_train"][0].reshape(-1)
    assert expected_first[0] == 255 and first[0] == 1.0
    np.testing.assert_allclose(first[:3], expected_first[:3] / 255.0, rtol=1e-6)
    assert ds.num_classes == 10 and len(ds.class_names) == 10


# --------------------------------------------------------------------------------------------
# digits


def test_digits_shapes_dtypes_and_range() -> None:
    ds = load("digits")
    assert ds.name == "digits"
    assert ds.x_train.shape == (1437, 8, 8, 1) and ds.x_test.shape == (360, 8, 8, 1)
    assert ds.input_shape == (8, 8, 1)
    assert ds.x_train.dtype == np.float32 and ds.x_test.dtype == np.float32
    assert ds.y_train.dtype == np.int64 and ds.y_train.shape == (1437,)
    assert ds.y_test.dtype == np.int64 and ds.y_test.shape == (360,)
    for x in (ds.x_train, ds.x_test):
        assert x.min() == 0.0 and x.max() == 1.0  # 16 / 16
    assert set(np.unique(np.concatenate([ds.y_train, ds.y_test]))) == set(range(10))
    assert ds.num_classes == 10 and ds.class_names == tuple("0123456789")


#: Fingerprints of scikit-learn 1.9.1's digits and of its stratified splits, recorded from
#: ``sklearn.datasets.load_digits()`` and ``train_test_split(range(1797), test_size=f,
#: random_state=seed, stratify=target)``: the sha256 of the uint8 images and int64 digits, and
#: the first 16 hex digits of the sha256 of the int64 train indices then test indices.
SKLEARN_DIGITS_SHA256 = "65e5b4619795efb40c1082f4c350c049e4ad552200d369b6ae99e21eef5e72c5"
SKLEARN_SPLITS = {
    (0.2, 0): "c2c37eddf53c5760",
    (0.5, 3): "40d21fd7ea862069",
    (0.06, 0): "b65f319bd19dcec9",
    (0.25, 7): "a2fbc4a331ceaa1e",
}


def test_digits_file_is_scikit_learn_s() -> None:
    from dtf.data import DIGITS_FILE

    table = np.loadtxt(DIGITS_FILE, delimiter=",")
    images, digits = table[:, :-1].astype(np.uint8), table[:, -1].astype(np.int64)
    digest = hashlib.sha256(images.tobytes() + digits.tobytes()).hexdigest()
    assert digest == SKLEARN_DIGITS_SHA256
    ds = load("digits", test_fraction=0.5, seed=3)
    x = np.concatenate([ds.x_train, ds.x_test]).reshape(N_DIGITS, 64).astype(np.float64) * 16
    assert sorted(map(bytes, x.astype(np.uint8))) == sorted(map(bytes, images))


@pytest.mark.parametrize(("fraction", "seed"), sorted(SKLEARN_SPLITS))
def test_digits_split_is_scikit_learn_s(fraction: float, seed: int) -> None:
    from dtf.data import DIGITS_FILE, _stratified_split

    digits = np.loadtxt(DIGITS_FILE, delimiter=",")[:, -1].astype(np.int64)
    train, test = _stratified_split(digits, fraction, seed)
    digest = hashlib.sha256(train.astype(np.int64).tobytes() + test.astype(np.int64).tobytes())
    assert digest.hexdigest()[:16] == SKLEARN_SPLITS[fraction, seed]


def test_digits_split_is_deterministic() -> None:
    a, b = load("digits", seed=7), load("digits", seed=7)
    for field in ("x_train", "y_train", "x_test", "y_test"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_digits_other_seed_gives_other_split() -> None:
    a, b = load("digits", seed=0), load("digits", seed=1)
    assert a.x_train.shape == b.x_train.shape
    assert not np.array_equal(a.y_test, b.y_test) or not np.array_equal(a.x_test, b.x_test)


@pytest.mark.parametrize("fraction", [0.1, 0.25, 0.5])
def test_digits_test_fraction_respected(fraction: float) -> None:
    ds = load("digits", test_fraction=fraction)
    assert len(ds.x_train) + len(ds.x_test) == N_DIGITS
    assert len(ds.x_test) == int(np.ceil(fraction * N_DIGITS))  # sklearn rounds the test up


@pytest.mark.parametrize("fraction", [0.001, 0.999])
def test_digits_fraction_too_small_or_large_for_every_digit_in_each_half(fraction) -> None:
    with pytest.raises(ValueError, match="each half needs at least one example of each"):
        load("digits", test_fraction=fraction)
    load("digits", test_fraction=10 / N_DIGITS)  # the smallest that gives every digit


@pytest.mark.parametrize("fraction", [0, 1, 1.5, -0.2, True])
def test_digits_bad_test_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        load("digits", test_fraction=fraction)


def test_digits_flatten() -> None:
    flat, grid = load("digits", flatten=True), load("digits")
    assert flat.x_train.shape == (1437, 64) and flat.x_test.shape == (360, 64)
    assert flat.input_shape == (64,)
    np.testing.assert_array_equal(flat.x_train, grid.x_train.reshape(1437, 64))
    np.testing.assert_array_equal(flat.y_test, grid.y_test)


def test_digits_split_is_stratified() -> None:
    ds = load("digits", test_fraction=0.06)  # 108 test images: still every class
    assert set(ds.y_test.tolist()) == set(range(10))
    train_share = np.bincount(ds.y_train, minlength=10) / len(ds.y_train)
    test_share = np.bincount(ds.y_test, minlength=10) / len(ds.y_test)
    np.testing.assert_allclose(train_share, test_share, atol=0.01)


def test_dataset_is_frozen_and_summarised() -> None:
    ds = load("digits")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.x_train = ds.x_test  # type: ignore[misc]
    line = ds.summary()
    assert "\n" not in line
    for part in ("digits", "1,437", "360", "(8, 8, 1)", "10 classes"):
        assert part in line
    assert repr(ds) == f"Dataset({line})"


def test_dataset_rejects_inconsistent_arrays() -> None:
    x = np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match="y_train has 2"):
        Dataset("t", x, np.zeros(2, np.int64), x, np.zeros(3, np.int64), 1, ("a",))


# --------------------------------------------------------------------------------------------
# Names


def test_unknown_name_lists_supported_names_and_suggests() -> None:
    with pytest.raises(ValueError) as info:
        load("mnsit")
    message = str(info.value)
    assert all(name in message for name in NAMES)
    assert "Did you mean 'mnist'?" in message


def test_unknown_name_without_close_match() -> None:
    with pytest.raises(ValueError, match="supported names: digits, mnist"):
        load("imagenet")


def test_names_and_cache_paths(tmp_path: Path) -> None:
    assert NAMES == ("digits", "mnist", "fashion_mnist", "cifar10")
    assert cache_paths("digits") == ()
    assert cache_paths("mnist", tmp_path) == (tmp_path / "datasets" / "mnist.npz",)
    assert len(cache_paths("fashion_mnist", tmp_path)) == 4
    assert cache_paths("cifar10", tmp_path)[-1] == (
        tmp_path / "datasets/cifar-10-batches-py-target/cifar-10-batches-py/test_batch"
    )


def test_cache_root_follows_keras_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert data.cache_root() == tmp_path
    monkeypatch.delenv("KERAS_HOME")
    assert data.cache_root().name == ".keras"
    assert data.cache_root(tmp_path / "x") == tmp_path / "x"


# --------------------------------------------------------------------------------------------
# Keras data sets from a tiny cache


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_reads_cache_under_keras_home(name: str, keras_home: Path, no_download: None) -> None:
    raw = WRITERS[name](keras_home)
    ds = load(name, seed=5, test_fraction=0.5)  # both ignored: the official split is kept
    _assert_matches(ds, raw, name)
    flat = load(name, flatten=True)
    assert flat.x_train.shape == (N_TRAIN, int(np.prod(IMAGE_SHAPES[name])))
    np.testing.assert_array_equal(flat.x_test, ds.x_test.reshape(N_TEST, -1))


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_reads_cache_dir_argument(
    name: str, tmp_path: Path, keras_home: Path, no_download: None
) -> None:
    root = tmp_path / "elsewhere"
    raw = WRITERS[name](root)
    _assert_matches(load(name, cache_dir=root), raw, name)
    _assert_matches(load(name, cache_dir=str(root)), raw, name)


def test_name_aliases(keras_home: Path, no_download: None) -> None:
    raw = write_fashion_mnist(keras_home)
    _assert_matches(load("Fashion-MNIST"), raw, "fashion_mnist")


def test_class_names(keras_home: Path, no_download: None) -> None:
    write_fashion_mnist(keras_home)
    write_cifar10(keras_home)
    assert load("fashion_mnist").class_names[0] == "T-shirt/top"
    assert load("fashion_mnist").class_names[-1] == "Ankle boot"
    assert load("cifar10").class_names == (
        "airplane",
        "automobile",
        "bird",
        "cat",
        "deer",
        "dog",
        "frog",
        "horse",
        "ship",
        "truck",
    )


# --------------------------------------------------------------------------------------------
# Format fidelity against the real Keras code (no network)


@pytest.fixture
def offline_keras(keras, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point Keras' own cache root at a tmp dir and make any download fail immediately.

    Keras reads KERAS_HOME once, at import, so its module global is patched instead.
    """
    from keras.src.backend import config
    from keras.src.utils import file_utils

    root = tmp_path / "keras_root"
    root.mkdir()
    monkeypatch.setattr(config, "_KERAS_DIR", str(root))

    def refuse(url, *args, **kwargs):
        raise urllib.error.URLError(f"offline test: refused {url}")

    monkeypatch.setattr(file_utils, "urlretrieve", refuse)
    monkeypatch.setenv("KERAS_HOME", str(root))
    return root


def test_fashion_mnist_matches_keras_loader(keras, offline_keras: Path) -> None:
    write_fashion_mnist(offline_keras)
    (x_train, y_train), (x_test, y_test) = keras.datasets.fashion_mnist.load_data()
    ds = load("fashion_mnist")
    np.testing.assert_array_equal(ds.x_train, _expected_images(x_train, (28, 28, 1)))
    np.testing.assert_array_equal(ds.x_test, _expected_images(x_test, (28, 28, 1)))
    np.testing.assert_array_equal(ds.y_train, y_train)
    np.testing.assert_array_equal(ds.y_test, y_test)


def test_mnist_matches_keras_loader(
    keras, offline_keras: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import keras.src.datasets.mnist as keras_mnist

    write_mnist(offline_keras)
    # The tiny file fails Keras' sha256 check, so hand Keras the path get_file would return.
    asked: list[str] = []

    def get_file(fname, origin, file_hash):
        asked.append(fname)
        return str(offline_keras / "datasets" / fname)

    monkeypatch.setattr(keras_mnist, "get_file", get_file)
    (x_train, y_train), (x_test, y_test) = keras.datasets.mnist.load_data()
    assert asked == ["mnist.npz"]
    ds = load("mnist")
    np.testing.assert_array_equal(ds.x_train, _expected_images(x_train, (28, 28, 1)))
    np.testing.assert_array_equal(ds.x_test, _expected_images(x_test, (28, 28, 1)))
    np.testing.assert_array_equal(ds.y_train, y_train)
    np.testing.assert_array_equal(ds.y_test, y_test)


def test_cifar10_matches_keras_load_batch_and_extraction_layout(
    keras, offline_keras: Path, tmp_path: Path
) -> None:
    from keras.src.datasets.cifar import load_batch
    from keras.src.utils.file_utils import get_file

    # Build an archive like the real one and let Keras' own get_file extract it (no hash
    # given, so the present archive is used as is): the files must land where we look.
    staging = tmp_path / "staging"
    write_cifar10(staging)
    batches = staging / "datasets" / "cifar-10-batches-py-target" / "cifar-10-batches-py"
    datasets_dir = offline_keras / "datasets"
    datasets_dir.mkdir()
    with tarfile.open(datasets_dir / "cifar-10-batches-py-target_archive", "w:gz") as tar:
        tar.add(batches, arcname="cifar-10-batches-py")
    extracted = get_file(
        fname="cifar-10-batches-py-target",
        origin="https://example.invalid/cifar-10-python.tar.gz",
        extract=True,
    )
    assert all(p.is_file() for p in cache_paths("cifar10"))
    assert Path(extracted) == cache_paths("cifar10")[0].parent.parent

    ds = load("cifar10")
    xs, ys = [], []
    for path in cache_paths("cifar10")[:-1]:
        x, y = load_batch(str(path))
        xs.append(x)
        ys.append(y)
    x_train = np.concatenate(xs).transpose(0, 2, 3, 1)  # as keras.datasets.cifar10 does
    x_test, y_test = load_batch(str(cache_paths("cifar10")[-1]))
    np.testing.assert_array_equal(ds.x_train, _expected_images(x_train, (32, 32, 3)))
    np.testing.assert_array_equal(ds.y_train, np.concatenate(ys))
    np.testing.assert_array_equal(
        ds.x_test, _expected_images(x_test.transpose(0, 2, 3, 1), (32, 32, 3))
    )
    np.testing.assert_array_equal(ds.y_test, y_test)


# --------------------------------------------------------------------------------------------
# Missing cache: the Keras fallback


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_missing_cache_raises_unavailable(
    name: str, keras, keras_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offline = urllib.error.URLError("offline")

    def load_data():
        raise offline

    monkeypatch.setattr(getattr(keras.datasets, name), "load_data", load_data)
    with pytest.raises(DatasetUnavailableError) as info:
        load(name)
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert info.value.__cause__ is offline
    for path in cache_paths(name):
        assert str(path) in message and str(path).startswith(str(keras_home))
    assert "digits" in message and "KERAS_HOME" in message
    assert "URLError" in message and "offline" in message


def test_partial_cache_marks_found_and_missing(
    keras, keras_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_fashion_mnist(keras_home)
    missing = cache_paths("fashion_mnist")[3]
    missing.unlink()

    def load_data():
        raise urllib.error.URLError("offline")

    monkeypatch.setattr(keras.datasets.fashion_mnist, "load_data", load_data)
    with pytest.raises(DatasetUnavailableError) as info:
        load("fashion_mnist")
    assert f"{missing}  (missing)" in str(info.value)
    assert f"{cache_paths('fashion_mnist')[0]}  (found)" in str(info.value)


def test_missing_cache_through_real_keras_download(offline_keras: Path) -> None:
    """The real loader and get_file run; only the socket-level fetch is refused."""
    with pytest.raises(DatasetUnavailableError) as info:
        load("mnist")
    message = str(info.value)
    assert str(offline_keras / "datasets" / "mnist.npz") in message
    assert "URL fetch failure" in message and "digits" in message
    assert info.value.__cause__ is not None


def test_keras_fallback_result_is_normalised(
    keras, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What Keras returns (CIFAR-10 labels are (N, 1)) gets the same layout as the cache."""
    x_train, x_test = _pixels(4, (32, 32, 3), 7), _pixels(2, (32, 32, 3), 8)
    y_train, y_test = np.array([[1], [2], [3], [9]], np.uint8), np.array([[0], [5]], np.uint8)
    monkeypatch.setattr(
        keras.datasets.cifar10, "load_data", lambda: ((x_train, y_train), (x_test, y_test))
    )
    ds = load("cifar10", cache_dir=tmp_path / "empty")
    assert ds.y_train.shape == (4,) and ds.y_train.dtype == np.int64
    np.testing.assert_array_equal(ds.y_test, [0, 5])
    np.testing.assert_array_equal(ds.x_train, _expected_images(x_train, (32, 32, 3)))


# --------------------------------------------------------------------------------------------
# Malformed cache files


def test_mnist_missing_key(keras_home: Path, no_download: None) -> None:
    path = keras_home / "datasets" / "mnist.npz"
    path.parent.mkdir(parents=True)
    np.savez(path, x_train=np.zeros((2, 28, 28), np.uint8), y_train=np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="missing key") as info:
        load("mnist")
    assert str(path) in str(info.value) and "x_test" in str(info.value)


def test_mnist_length_mismatch(keras_home: Path, no_download: None) -> None:
    raw = write_mnist(keras_home)
    path = keras_home / "datasets" / "mnist.npz"
    np.savez(path, **{**raw, "y_test": raw["y_test"][:-1]})
    with pytest.raises(ValueError, match=f"{N_TEST} images but {N_TEST - 1} labels") as info:
        load("mnist")
    assert str(path) in str(info.value)


def test_mnist_not_an_npz(keras_home: Path, no_download: None) -> None:
    path = keras_home / "datasets" / "mnist.npz"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"<html>captive portal</html>")
    with pytest.raises(ValueError, match="not a readable .npz") as info:
        load("mnist")
    assert str(path) in str(info.value)


def test_fashion_mnist_wrong_byte_count(keras_home: Path, no_download: None) -> None:
    write_fashion_mnist(keras_home)
    path = cache_paths("fashion_mnist")[1]  # train images
    with gzip.open(path, "rb") as fh:
        content = fh.read()
    with gzip.open(path, "wb") as fh:
        fh.write(content[:-5])  # truncated
    with pytest.raises(ValueError, match="malformed idx file") as info:
        load("fashion_mnist")
    assert str(path) in str(info.value)


def test_fashion_mnist_count_mismatch_between_files(keras_home: Path, no_download: None) -> None:
    write_fashion_mnist(keras_home)
    labels_path = cache_paths("fashion_mnist")[2]  # test labels
    _write_idx(labels_path, _labels(N_TEST + 1, 0))
    with pytest.raises(ValueError, match="images but") as info:
        load("fashion_mnist")
    assert str(labels_path) in str(info.value)


def test_fashion_mnist_not_gzip(keras_home: Path, no_download: None) -> None:
    write_fashion_mnist(keras_home)
    path = cache_paths("fashion_mnist")[0]
    path.write_bytes(b"not gzip at all")
    with pytest.raises(ValueError, match="gzip") as info:
        load("fashion_mnist")
    assert str(path) in str(info.value)


def test_cifar10_malformed_batch(keras_home: Path, no_download: None) -> None:
    write_cifar10(keras_home)
    path = cache_paths("cifar10")[2]
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}))
    with pytest.raises(ValueError, match="uint8") as info:
        load("cifar10")
    assert str(path) in str(info.value)


# What a reader must refuse, on small files: every error names the file it comes from (and,
# in the one-file MNIST cache, the array).


def _rewrite_mnist(root: Path, **changes: np.ndarray) -> Path:
    raw = write_mnist(root)
    path = root / "datasets" / "mnist.npz"
    np.savez(path, **{**raw, **changes})
    return path


_MNIST_BAD = {
    "float images": (
        {"x_train": _pixels(N_TRAIN, (28, 28), 1).astype(np.float32)},
        "x_train",
        r"must be uint8 .*got float32",
    ),
    "pre-scaled float images": (
        {"x_test": _pixels(N_TEST, (28, 28), 2) / np.float64(255)},
        "x_test",
        r"must be uint8 .*got float64",
    ),
    "int32 images": (
        {"x_train": _pixels(N_TRAIN, (28, 28), 1).astype(np.int32)},
        "x_train",
        r"must be uint8 .*got int32",
    ),
    "float labels": (
        {"y_train": _labels(N_TRAIN, 1) + 0.7},
        "y_train",
        r"labels must be integers.*got float64",
    ),
    "bool labels": ({"y_test": np.ones(N_TEST, bool)}, "y_test", r"labels must be integers"),
    "label 10": (
        {"y_train": np.full(N_TRAIN, 10, np.uint8)},
        "y_train",
        r"label 10 .*outside 0\.\.9",
    ),
    "label -1": ({"y_test": np.full(N_TEST, -1, np.int8)}, "y_test", r"label -1 .*outside 0\.\.9"),
    "no test images": (
        {"x_test": np.zeros((0, 28, 28), np.uint8), "y_test": np.zeros(0, np.uint8)},
        "x_test",
        r"no test images",
    ),
    "no labels": ({"y_train": np.zeros(0, np.uint8)}, "y_train", r"no train labels"),
    "fewer labels": ({"y_test": _labels(N_TEST - 2, 2)}, "y_test", rf"{N_TEST} images but 4"),
    "32x32 images": (
        {"x_test": np.zeros((N_TEST, 32, 32), np.uint8)},
        "x_test",
        r"shape \(N, 28, 28\).*\(6, 32, 32\)",
    ),
    "4-D images": (
        {"x_train": np.zeros((N_TRAIN, 28, 28, 1), np.uint8)},
        "x_train",
        r"shape \(N, 28, 28\)",
    ),
    "2-D labels": ({"y_train": np.zeros((N_TRAIN, 1), np.uint8)}, "y_train", r"shape \(N,\)"),
}


@pytest.mark.parametrize("case", sorted(_MNIST_BAD))
def test_mnist_refuses_bad_arrays_naming_file_and_key(
    case: str, keras_home: Path, no_download: None
) -> None:
    changes, key, pattern = _MNIST_BAD[case]
    path = _rewrite_mnist(keras_home, **changes)
    with pytest.raises(ValueError, match=pattern) as info:
        load("mnist")
    assert f"{path} ({key})" in str(info.value)


def test_fashion_mnist_label_out_of_range_names_the_labels_file(
    keras_home: Path, no_download: None
) -> None:
    write_fashion_mnist(keras_home)
    labels_path = cache_paths("fashion_mnist")[0]  # train labels
    _write_idx(labels_path, np.full(N_TRAIN, 12, np.uint8))
    with pytest.raises(ValueError, match=r"label 12 .*outside 0\.\.9") as info:
        load("fashion_mnist")
    assert str(labels_path) in str(info.value)


@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_fashion_mnist_empty_file_is_refused(
    which: int, keras_home: Path, no_download: None
) -> None:
    write_fashion_mnist(keras_home)
    path = cache_paths("fashion_mnist")[which]
    shape = (0,) if "labels" in path.name else (0, 28, 28)
    _write_idx(path, np.zeros(shape, np.uint8))
    with pytest.raises(ValueError, match=r"no (train|test) (images|labels)") as info:
        load("fashion_mnist")
    assert str(path) in str(info.value)


def test_fashion_mnist_header_with_other_image_size(keras_home: Path, no_download: None) -> None:
    write_fashion_mnist(keras_home)
    path = cache_paths("fashion_mnist")[3]  # test images
    # 8 images of 14x14 hold as many bytes as 2 of 28x28: only the header's sizes tell
    _write_idx(path, np.zeros((8, 14, 14), np.uint8))
    with pytest.raises(ValueError, match=r"14x14.*28x28") as info:
        load("fashion_mnist")
    assert str(path) in str(info.value)


def _rewrite_cifar_batch(root: Path, index: int, images_chw: np.ndarray, labels) -> Path:
    write_cifar10(root)
    path = cache_paths("cifar10", root)[index]
    row = int(np.prod(images_chw.shape[1:]))  # not -1: that cannot reshape 0 images
    batch = {b"data": images_chw.reshape(len(images_chw), row), b"labels": labels}
    path.write_bytes(pickle.dumps(batch, protocol=3))
    return path


_CIFAR_BAD = {
    "float labels": (np.zeros((2, 3, 32, 32), np.uint8), [0.0, 1.5], r"integers.*float64"),
    "label 10": (np.zeros((2, 3, 32, 32), np.uint8), [3, 10], r"label 10 .*outside 0\.\.9"),
    "label -1": (np.zeros((2, 3, 32, 32), np.uint8), [-1, 0], r"label -1 .*outside 0\.\.9"),
    "empty batch": (np.zeros((0, 3, 32, 32), np.uint8), [], r"no (train|test) images"),
    "float data": (np.zeros((2, 3, 32, 32), np.float32), [0, 1], r"uint8"),
    "count mismatch": (np.zeros((2, 3, 32, 32), np.uint8), [0, 1, 2], r"2 images but 3 labels"),
}


@pytest.mark.parametrize("index", [0, 5])  # a training batch and the test batch
@pytest.mark.parametrize("case", sorted(_CIFAR_BAD))
def test_cifar10_refuses_bad_batches_naming_the_file(
    case: str, index: int, keras_home: Path, no_download: None
) -> None:
    images, labels, pattern = _CIFAR_BAD[case]
    path = _rewrite_cifar_batch(keras_home, index, images, labels)
    with pytest.raises(ValueError, match=pattern) as info:
        load("cifar10")
    assert str(path) in str(info.value)


def test_keras_fallback_arrays_are_checked_too(
    keras, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    x = _pixels(4, (28, 28), 7).astype(np.float32)
    y = np.array([1, 2, 3, 4], np.uint8)
    monkeypatch.setattr(keras.datasets.mnist, "load_data", lambda: ((x, y), (x, y)))
    with pytest.raises(ValueError, match=r"keras\.datasets\.mnist\.load_data\(\).*uint8"):
        load("mnist", cache_dir=tmp_path / "empty")


class _Gadget:
    """A pickle that would run code when loaded by an unrestricted unpickler."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_cifar10_refuses_code_in_pickles(keras_home: Path, no_download: None) -> None:
    write_cifar10(keras_home)
    path = cache_paths("cifar10")[-1]
    path.write_bytes(pickle.dumps({b"data": _Gadget(), b"labels": []}))
    with pytest.raises(ValueError, match="refusing") as info:
        load("cifar10")
    assert str(path) in str(info.value)


# --------------------------------------------------------------------------------------------
# Import cost


def test_import_does_not_import_tensorflow_keras_or_sklearn() -> None:
    code = (
        "import sys, dtf.data\n"
        "dtf.data.load('digits')\n"
        "heavy = [m for m in ('tensorflow', 'keras', 'sklearn') if m in sys.modules]\n"
        "print(heavy)\n"
        "sys.exit(1 if heavy else 0)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
