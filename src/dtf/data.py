"""Offline-first data sets for the notebooks: one call, one ``Dataset``, the same shapes everywhere.

The course runs on laptops, in CI and on cluster nodes that often have no internet access.
So the default data set, ``"digits"``, ships with this package (a copy of scikit-learn's, in
``digits.csv.gz``) and never needs a download, and
the real Keras data sets (``"mnist"``, ``"fashion_mnist"``, ``"cifar10"``) are read straight
from Keras' on-disk cache when the files are already there::

    from dtf.data import load
    ds = load("digits")                 # bundled: always works
    ds = load("mnist", flatten=True)    # cached or downloaded by Keras
    print(ds)                           # one line: name, sizes, input shape, classes

Every data set comes back the same way, so a notebook can switch data sets by changing one
string: images are ``float32`` in ``[0, 1]`` with shape ``(N, H, W, C)`` (``C == 1`` for grey
images) or ``(N, H*W*C)`` with ``flatten=True``, and labels are ``int64`` vectors of shape
``(N,)``.

Importing this module does not import TensorFlow or Keras: :func:`load` imports Keras only for
a download, so ``import dtf.data`` stays cheap and does not start TensorFlow before
``dtf.quiet`` has had a chance to silence it. scikit-learn is not needed at all (see
:data:`DIGITS_FILE`).
"""

from __future__ import annotations

import contextlib
import difflib
import gzip
import os
import pickle
import socket
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dtf._util import error_line

__all__ = [
    "DIGITS_FILE",
    "NAMES",
    "Dataset",
    "DatasetUnavailableError",
    "cache_paths",
    "cache_root",
    "load",
]

#: The names :func:`load` accepts (``"fashion-mnist"`` and upper case are accepted too).
NAMES: tuple[str, ...] = ("digits", "mnist", "fashion_mnist", "cifar10")

#: The digits: a byte-for-byte copy of ``sklearn/datasets/data/digits.csv.gz`` from
#: scikit-learn 1.9.1 (BSD-3-Clause), itself the test set of the UCI "Optical Recognition of
#: Handwritten Digits" data set (E. Alpaydin and C. Kaynak, 1998; CC BY 4.0): 1,797 rows of 64
#: pixel counts 0..16 and the digit. Copied rather than imported because Keras imports
#: scikit-learn, when it is installed, on every ``import tensorflow`` (its scikit-learn
#: wrappers; about 1 s of CPU per process, measured with TensorFlow 2.21 and Keras 3.15), and
#: every kernel, server and worker of the course imports TensorFlow.
DIGITS_FILE = Path(__file__).with_name("digits.csv.gz")

_DIGITS = tuple(str(i) for i in range(10))
_CLASS_NAMES: dict[str, tuple[str, ...]] = {
    "digits": _DIGITS,
    "mnist": _DIGITS,
    "fashion_mnist": (
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ),
    "cifar10": (
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
    ),
}

# Where Keras 3 keeps each data set, relative to ``<cache root>/datasets``. These are the
# files its loaders *read* (after download and, for CIFAR-10, extraction), so a copy of them
# is all an offline machine needs.
_FASHION_DIR = "fashion-mnist"
_FASHION_FILES = (
    "train-labels-idx1-ubyte.gz",
    "train-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz",
    "t10k-images-idx3-ubyte.gz",
)
_CIFAR_DIR = ("cifar-10-batches-py-target", "cifar-10-batches-py")
_CIFAR_FILES = tuple(f"data_batch_{i}" for i in range(1, 6)) + ("test_batch",)
_CACHE_LAYOUT: dict[str, tuple[str, ...]] = {
    "mnist": ("mnist.npz",),
    "fashion_mnist": tuple(f"{_FASHION_DIR}/{f}" for f in _FASHION_FILES),
    "cifar10": tuple("/".join((*_CIFAR_DIR, f)) for f in _CIFAR_FILES),
}

_MNIST_KEYS = ("x_train", "y_train", "x_test", "y_test")
#: One image as ``keras.datasets.<name>.load_data()`` returns it (channels-last); the caches
#: hold uint8 pixels of exactly this shape and integer labels below the number of classes.
_IMAGE_SHAPES: dict[str, tuple[int, ...]] = {
    "mnist": (28, 28),
    "fashion_mnist": (28, 28),
    "cifar10": (32, 32, 3),
}
_IDX_LABEL_MAGIC, _IDX_IMAGE_MAGIC = 2049, 2051  # idx1 (uint8 vector), idx3 (uint8 3-D array)
_CIFAR_SIDE = 32

# A stalled connection must not hang a notebook forever: ``urlretrieve`` has no timeout of its
# own. This bounds each socket operation, not the whole (170 MB for CIFAR-10) download.
_DOWNLOAD_SOCKET_TIMEOUT_S = 60.0


class DatasetUnavailableError(RuntimeError):
    """A Keras data set is neither in the local cache nor downloadable right now.

    The message lists the exact files that were looked for and what to do about it; the
    download error is chained as ``__cause__``.
    """


@dataclass(frozen=True, eq=False, repr=False)
class Dataset:
    """A train/test split ready for ``model.fit``: float32 images in [0, 1], int64 labels.

    Frozen so that a notebook cannot rebind ``ds.x_train`` by accident and silently train on
    something other than what the summary line printed. (The arrays themselves stay writable:
    freezing them would surprise code that normalises or augments in place.) Equality is
    identity, because element-wise array comparison has no single truth value.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    class_names: tuple[str, ...]

    def __post_init__(self) -> None:
        for split in ("train", "test"):
            x, y = getattr(self, f"x_{split}"), getattr(self, f"y_{split}")
            if len(x) != len(y):
                raise ValueError(
                    f"{self.name}: x_{split} has {len(x)} examples but y_{split} has {len(y)}"
                )
        if self.x_train.shape[1:] != self.x_test.shape[1:]:
            raise ValueError(
                f"{self.name}: train examples have shape {self.x_train.shape[1:]} "
                f"but test examples {self.x_test.shape[1:]}"
            )
        if self.num_classes != len(self.class_names):
            raise ValueError(
                f"{self.name}: num_classes={self.num_classes} but {len(self.class_names)} "
                "class names"
            )

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one example, e.g. ``(28, 28, 1)``: what ``keras.Input(shape=...)`` wants."""
        return tuple(int(d) for d in self.x_train.shape[1:])

    def summary(self) -> str:
        """One line for a notebook: name, train/test sizes, input shape and classes."""
        names = self.class_names
        shown = ", ".join(names) if len(names) <= 5 else f"{', '.join(names[:3])}, ..., {names[-1]}"
        return (
            f"{self.name}: {len(self.x_train):,} train / {len(self.x_test):,} test, "
            f"input_shape={self.input_shape}, {self.num_classes} classes ({shown})"
        )

    def __repr__(self) -> str:
        return f"Dataset({self.summary()})"


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory that plays the role of Keras' cache root (files live in its ``datasets/``).

    ``cache_dir`` wins when given. Otherwise this mirrors ``keras.src.backend.config``:
    ``$KERAS_HOME`` if set, else ``~/.keras`` (``/tmp/.keras`` when the home directory is not
    writable). Unlike Keras, which reads ``KERAS_HOME`` once when it is imported, this reads it
    on every call, so setting it in a running notebook (or a test) takes effect.
    """
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("KERAS_HOME")
    if env:
        return Path(env).expanduser()
    home = os.path.expanduser("~")
    if not os.access(home, os.W_OK):
        home = "/tmp"
    return Path(home) / ".keras"


def cache_paths(name: str, cache_dir: str | os.PathLike[str] | None = None) -> tuple[Path, ...]:
    """The files :func:`load` reads for a Keras data set: copy these to work offline.

    Returns ``()`` for ``"digits"``, which needs no files.
    """
    canonical = _canonical_name(name)
    datasets_dir = cache_root(cache_dir) / "datasets"
    return tuple(datasets_dir / rel for rel in _CACHE_LAYOUT.get(canonical, ()))


def load(
    name: str = "digits",
    *,
    flatten: bool = False,
    cache_dir: str | os.PathLike[str] | None = None,
    test_fraction: float = 0.2,
    seed: int = 0,
) -> Dataset:
    """Load a data set by name (one of :data:`NAMES`) as a :class:`Dataset`.

    ``"digits"`` is scikit-learn's 8x8 digits, copied into this package (1,797 images, values
    0..16 scaled to [0, 1]; :data:`DIGITS_FILE`). It has no official split, so it is split
    here as scikit-learn's stratified ``train_test_split(test_size=test_fraction,
    random_state=seed)`` splits it: the same arguments always give identical arrays, and
    every class appears in both halves.

    ``"mnist"``, ``"fashion_mnist"`` and ``"cifar10"`` are the real Keras data sets with
    their own official train/test split; ``test_fraction`` and ``seed`` are ignored for them.
    If the files Keras would read (see :func:`cache_paths`) are all under the cache root
    (``cache_dir`` if given, else ``$KERAS_HOME`` or ``~/.keras``), they are read directly by
    small readers that mirror Keras' own. That is what makes a cache copied from another
    machine work offline: Keras' ``get_file`` checks a sha256 of ``mnist.npz`` and of the
    CIFAR-10 archive and tries to re-download on any mismatch (so a cut-down file for a quick
    run, or an extracted CIFAR-10 folder without its archive, would fail offline), and it
    ignores a cache root it cannot write to. Otherwise the real
    ``keras.datasets.<name>.load_data()`` downloads and caches the data in Keras' own cache
    (``$KERAS_HOME`` as it was when Keras was imported, or ``~/.keras``; not ``cache_dir``).
    If that fails for any reason, :class:`DatasetUnavailableError` says which files were
    looked for and how to provide them. There is no retry: offline, this fails at once.

    Args:
        name: one of :data:`NAMES` (case-insensitive; ``-`` may replace ``_``).
        flatten: return images as vectors ``(N, H*W*C)`` instead of ``(N, H, W, C)``.
        cache_dir: a directory to use as the Keras cache root instead of the default.
        test_fraction: share of ``"digits"`` held out for testing, in (0, 1).
        seed: random state of the ``"digits"`` split.

    Raises:
        ValueError: unknown name, bad ``test_fraction``, or a malformed cache file: not
            readable, images that are not uint8 or not of the data set's size, labels that
            are not integers or not class indices, no examples, or different numbers of
            images and labels (the message names the file, and for ``mnist.npz`` the array).
        DatasetUnavailableError: a Keras data set is not cached and cannot be downloaded.
    """
    canonical = _canonical_name(name)
    if canonical == "digits":
        return _load_digits(flatten=flatten, test_fraction=test_fraction, seed=seed)

    paths = cache_paths(canonical, cache_dir)
    if all(p.is_file() for p in paths):
        arrays = _CACHE_READERS[canonical](paths)
    else:
        arrays = _download_with_keras(canonical, paths)
    source = str(paths[0].parent) if len(paths) > 1 else str(paths[0])
    return _make_dataset(canonical, *arrays, scale=255.0, flatten=flatten, source=source)


# --------------------------------------------------------------------------------------------
# Names


def _canonical_name(name: str) -> str:
    """Map ``"Fashion-MNIST"`` to ``"fashion_mnist"``; reject unknown names with a suggestion."""
    if not isinstance(name, str):
        raise TypeError(f"data set name must be a string, got {type(name).__name__}")
    canonical = name.strip().lower().replace("-", "_")
    if canonical in NAMES:
        return canonical
    close = difflib.get_close_matches(canonical, NAMES, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    raise ValueError(
        f"unknown data set {name!r}; supported names: {', '.join(NAMES)}.{hint}"
        " ('digits' is bundled with scikit-learn and works offline.)"
    )


# --------------------------------------------------------------------------------------------
# Building the Dataset


def _make_dataset(
    name: str,
    x_train: np.ndarray,
    y_train: np.ndarray,
    x_test: np.ndarray,
    y_test: np.ndarray,
    *,
    scale: float,
    flatten: bool,
    source: str,
) -> Dataset:
    """Normalise raw arrays (any source) into the one layout every notebook relies on."""

    def images(x: np.ndarray) -> np.ndarray:
        out = np.asarray(x).astype(np.float32)  # always a copy, so never aliases the input
        out /= np.float32(scale)  # in place: no second full-size temporary (CIFAR-10: 600 MB)
        if out.ndim == 3:  # grey images: add the channel axis Conv2D expects
            out = out[..., np.newaxis]
        if out.ndim != 4:
            raise ValueError(f"{source}: expected 3-D or 4-D image arrays, got shape {x.shape}")
        return out.reshape(len(out), -1) if flatten else out

    def labels(y: np.ndarray) -> np.ndarray:
        y = _label_vector(np.asarray(y))
        if y.ndim != 1:
            raise ValueError(f"{source}: expected a label vector, got shape {y.shape}")
        return y.astype(np.int64)

    classes = _CLASS_NAMES[name]
    ds = Dataset(
        name=name,
        x_train=images(x_train),
        y_train=labels(y_train),
        x_test=images(x_test),
        y_test=labels(y_test),
        num_classes=len(classes),
        class_names=classes,
    )
    for split, y in (("train", ds.y_train), ("test", ds.y_test)):
        if len(y) and (y.min() < 0 or y.max() >= ds.num_classes):
            raise ValueError(
                f"{source}: {split} labels must be in 0..{ds.num_classes - 1}, "
                f"found {y.min()}..{y.max()}"
            )
    return ds


def _load_digits(*, flatten: bool, test_fraction: float, seed: int) -> Dataset:
    if isinstance(test_fraction, bool) or not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must be strictly between 0 and 1, got {test_fraction!r}")
    table = np.loadtxt(DIGITS_FILE, delimiter=",")  # numpy reads the .gz itself
    images, digits = table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)
    n, n_test = len(digits), int(np.ceil(float(test_fraction) * len(digits)))
    if min(n_test, n - n_test) < len(_DIGITS):  # scikit-learn refused these too
        raise ValueError(
            f"test_fraction={test_fraction!r} holds out {n_test} of the {n} digits, leaving "
            f"{n - n_test} to train on: each half needs at least one example of each of the "
            f"{len(_DIGITS)} digits, so choose a fraction between {len(_DIGITS) / n:.3f} and "
            f"{1 - len(_DIGITS) / n:.3f}"
        )
    train, test = _stratified_split(digits, float(test_fraction), seed)
    return _make_dataset(
        "digits",
        images[train],
        digits[train],
        images[test],
        digits[test],
        scale=16.0,
        flatten=flatten,
        source=str(DIGITS_FILE),
    )


def _shares(counts: np.ndarray, total: int, rng: np.random.RandomState) -> np.ndarray:
    """``total`` examples shared among the classes in proportion to ``counts``: each class
    gets the whole part of its share, and what is left goes one each to the classes with the
    largest fractional parts, ties drawn by ``rng``."""
    exact = counts / counts.sum() * total
    shares = np.floor(exact)
    left = int(total - shares.sum())
    fractions = exact - shares
    for value in np.unique(fractions)[::-1]:
        if left <= 0:
            break
        (tied,) = np.nonzero(fractions == value)
        take = min(len(tied), left)
        shares[rng.choice(tied, size=take, replace=False)] += 1
        left -= take
    return shares.astype(np.int64)


def _stratified_split(labels: np.ndarray, test_fraction: float, seed: int):
    """``(train, test)`` indices: ``ceil(test_fraction × N)`` examples held out, every class in
    both halves in proportion to its size, each class shuffled and both halves shuffled by one
    ``RandomState(seed)``. It draws the same numbers in the same order as scikit-learn's
    ``train_test_split(..., stratify=labels, random_state=seed)``, so it gives the same split
    (tests/test_data.py holds fingerprints of scikit-learn 1.9.1's splits): the course's
    stored outputs did not change when it stopped using scikit-learn."""
    n_test = int(np.ceil(test_fraction * len(labels)))
    _, inverse = np.unique(labels, return_inverse=True)
    counts = np.bincount(inverse)
    members = np.split(np.argsort(inverse, kind="mergesort"), np.cumsum(counts)[:-1])
    rng = np.random.RandomState(seed)
    train_shares = _shares(counts, len(labels) - n_test, rng)
    test_shares = _shares(counts - train_shares, n_test, rng)
    train: list[int] = []
    test: list[int] = []
    for indices, n_train_class, n_test_class in zip(
        members, train_shares, test_shares, strict=True
    ):
        shuffled = indices[rng.permutation(len(indices))]
        train.extend(shuffled[:n_train_class])
        test.extend(shuffled[n_train_class : n_train_class + n_test_class])
    return rng.permutation(train), rng.permutation(test)


# --------------------------------------------------------------------------------------------
# Readers for Keras' cache files. Each returns (x_train, y_train, x_test, y_test) with uint8
# images, (N, H, W) or (N, H, W, C), and integer labels: the values that
# keras.datasets.<name>.load_data() returns (channels-last). Each array is checked as it is
# read (dtype, shape, not empty, labels in range): a malformed file raises a ValueError that
# names it, instead of an anonymous reshape error or, worse, silently wrong data (float
# pixels divided by 255 again, float labels truncated).

_Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _replace_hint(name: str) -> str:
    return (
        f" Replace the file with the original that keras.datasets.{name}.load_data() "
        f"downloads (dtf.data.cache_paths({name!r}) lists them), or delete it so that Keras "
        "downloads it again."
    )


def _check_split(
    name: str,
    split: str,
    x: np.ndarray,
    x_where: str,
    y: np.ndarray,
    y_where: str,
    *,
    hint: str = "",
) -> None:
    """Raise a ValueError that names where ``x``/``y`` came from unless they are what
    ``keras.datasets.<name>.load_data()`` returns for ``split``: uint8 images of the data
    set's shape, a non-empty vector of integer labels of the same length, every label a
    class index."""
    shape = _IMAGE_SHAPES[name]
    num_classes = len(_CLASS_NAMES[name])
    if x.dtype != np.uint8:
        raise ValueError(
            f"{x_where}: {split} images must be uint8 pixels (0..255), got {x.dtype}; "
            f"scaling them by 1/255 would silently give wrong inputs.{hint}"
        )
    if x.shape[1:] != shape:
        want = ", ".join(str(d) for d in ("N", *shape))
        raise ValueError(
            f"{x_where}: {split} images must have shape ({want}), got {x.shape}.{hint}"
        )
    if len(x) == 0:
        raise ValueError(f"{x_where}: no {split} images (the array is empty).{hint}")
    if y.dtype == np.bool_ or not np.issubdtype(y.dtype, np.integer):
        raise ValueError(
            f"{y_where}: {split} labels must be integers (class indices 0..{num_classes - 1}), "
            f"got {y.dtype}; converting them would silently change them.{hint}"
        )
    if y.ndim != 1:
        raise ValueError(f"{y_where}: {split} labels must have shape (N,), got {y.shape}.{hint}")
    if len(y) == 0:
        raise ValueError(f"{y_where}: no {split} labels (the array is empty).{hint}")
    if len(x) != len(y):
        where = x_where if x_where == y_where else f"{x_where} and {y_where}"
        raise ValueError(
            f"{where}: {len(x)} images but {len(y)} labels in the {split} split.{hint}"
        )
    outside = (y < 0) | (y >= num_classes)
    if outside.any():
        i = int(np.argmax(outside))
        raise ValueError(
            f"{y_where}: {split} label {int(y[i])} at index {i} is outside "
            f"0..{num_classes - 1} ({name} has {num_classes} classes).{hint}"
        )


def _read_mnist(paths: Sequence[Path]) -> _Arrays:
    """``mnist.npz``: four uint8 arrays, read as ``keras.datasets.mnist`` does (no pickles)."""
    (path,) = paths
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in _MNIST_KEYS if k not in npz.files]
            arrays = {k: npz[k] for k in _MNIST_KEYS if k in npz.files}
    except Exception as exc:  # a zip/npy error of any kind means the same: a bad file
        raise ValueError(f"{path}: not a readable .npz file ({error_line(exc)})") from exc
    if missing:
        raise ValueError(
            f"{path}: malformed MNIST cache file: missing key(s) {missing} "
            f"(expected {list(_MNIST_KEYS)}, found {sorted(arrays)})"
        )
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        _check_split(
            "mnist",
            split,
            x,
            f"{path} (x_{split})",
            y,
            f"{path} (y_{split})",
            hint=_replace_hint("mnist"),
        )
    return arrays["x_train"], arrays["y_train"], arrays["x_test"], arrays["y_test"]


def _read_idx(path: Path, *, magic: int, header: int, item_shape: tuple[int, ...]) -> np.ndarray:
    """One gzipped idx file, read like ``keras.datasets.fashion_mnist`` plus size checks.

    Keras just skips the header (8 bytes for labels, 16 for images) and reshapes; a truncated
    file would then fail with an anonymous reshape error, so the byte count is checked here
    against the header, the image size in the header against ``item_shape``, and the magic
    number (which also fixes the type: unsigned bytes) catches a labels file swapped with an
    images one.
    """
    try:
        with gzip.open(path, "rb") as fh:
            raw = fh.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: not a readable gzip file ({error_line(exc)})") from exc
    item_size = int(np.prod(item_shape))
    if len(raw) < header:
        raise ValueError(f"{path}: malformed idx file: {len(raw)} bytes, shorter than its header")
    head = np.frombuffer(raw, dtype=">u4", count=header // 4)
    if int(head[0]) != magic:
        raise ValueError(f"{path}: malformed idx file: magic number {int(head[0])}, not {magic}")
    count = int(head[1])
    dims = tuple(int(d) for d in head[2:])
    if dims != item_shape:
        raise ValueError(
            f"{path}: malformed idx file: its header says items of "
            f"{'x'.join(map(str, dims))} values, expected {'x'.join(map(str, item_shape))} "
            "(is this the Fashion-MNIST file?)"
        )
    body = len(raw) - header
    if body != count * item_size:
        raise ValueError(
            f"{path}: malformed idx file: header says {count} items of {item_size} byte(s) "
            f"({count * item_size} bytes) but {body} bytes follow the {header}-byte header"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(count, *item_shape)


def _read_fashion_mnist(paths: Sequence[Path]) -> _Arrays:
    """The four idx files of Fashion-MNIST (28x28 grey images, uint8 labels)."""
    train_labels, train_images, test_labels, test_images = paths
    out: list[np.ndarray] = []
    pairs = (("train", train_labels, train_images), ("test", test_labels, test_images))
    for split, labels_path, images_path in pairs:
        y = _read_idx(labels_path, magic=_IDX_LABEL_MAGIC, header=8, item_shape=())
        x = _read_idx(images_path, magic=_IDX_IMAGE_MAGIC, header=16, item_shape=(28, 28))
        _check_split(
            "fashion_mnist",
            split,
            x,
            str(images_path),
            y,
            str(labels_path),
            hint=_replace_hint("fashion_mnist"),
        )
        out += [x, y]
    return out[0], out[1], out[2], out[3]


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """Unpickle CIFAR batches without running arbitrary code: only numpy arrays may be built.

    The same allow-list as ``keras.src.datasets.npz_utils.RestrictedUnpickler`` (both numpy
    1 and numpy 2 module spellings), re-implemented so that reading a cache needs no Keras.
    """

    _ALLOWED = frozenset(
        {
            ("numpy", "ndarray"),
            ("numpy", "dtype"),
            ("numpy.core.multiarray", "_reconstruct"),
            ("numpy._core.multiarray", "_reconstruct"),
        }
    )

    def find_class(self, module: str, name: str):
        if (module, name) in self._ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a data set file")


def _read_cifar_batch(path: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """One CIFAR-10 pickle: ``{b"data": uint8 (N, 3072), b"labels": [N ints]}``, N > 0.

    Rows are channels-first 3x32x32 (as ``keras.src.datasets.cifar.load_batch`` reshapes
    them); they are transposed to channels-last here, as ``keras.datasets.cifar10`` does with
    the default ``image_data_format``.
    """
    try:
        with open(path, "rb") as fh:
            batch = _NumpyOnlyUnpickler(fh, encoding="bytes").load()
    except Exception as exc:  # pickle can fail in many ways; all mean "bad file"
        raise ValueError(f"{path}: not a readable CIFAR-10 batch ({error_line(exc)})") from exc
    if not isinstance(batch, dict):
        raise ValueError(f"{path}: malformed CIFAR-10 batch: a {type(batch).__name__}, not a dict")
    batch = {k.decode("utf8") if isinstance(k, bytes) else k: v for k, v in batch.items()}
    missing = [k for k in ("data", "labels") if k not in batch]
    if missing:
        raise ValueError(f"{path}: malformed CIFAR-10 batch: missing key(s) {missing}")
    data, labels = np.asarray(batch["data"]), np.asarray(batch["labels"])
    row = 3 * _CIFAR_SIDE * _CIFAR_SIDE
    hint = _replace_hint("cifar10")
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != row:
        raise ValueError(
            f"{path}: malformed CIFAR-10 batch: data must be uint8 (N, {row}), "
            f"got {data.dtype} {data.shape}.{hint}"
        )
    images = data.reshape(len(data), 3, _CIFAR_SIDE, _CIFAR_SIDE).transpose(0, 2, 3, 1)
    _check_split("cifar10", split, images, str(path), labels, str(path), hint=hint)
    return images, labels


def _read_cifar10(paths: Sequence[Path]) -> _Arrays:
    """Five training batches and one test batch; unlike Keras, batches may have any size > 0."""
    *train_paths, test_path = paths
    train = [_read_cifar_batch(p, "train") for p in train_paths]
    x_test, y_test = _read_cifar_batch(test_path, "test")
    x_train = np.concatenate([x for x, _ in train])
    y_train = np.concatenate([y for _, y in train])
    return x_train, y_train, x_test, y_test


_CACHE_READERS: dict[str, Callable[[Sequence[Path]], _Arrays]] = {
    "mnist": _read_mnist,
    "fashion_mnist": _read_fashion_mnist,
    "cifar10": _read_cifar10,
}


# --------------------------------------------------------------------------------------------
# Falling back to Keras


@contextlib.contextmanager
def _bounded_socket_wait(seconds: float) -> Iterator[None]:
    """Give sockets a timeout for the duration of a download, if the process has none."""
    if socket.getdefaulttimeout() is not None:
        yield
        return
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(None)


def _download_with_keras(name: str, paths: Sequence[Path]) -> _Arrays:
    """Let the real Keras loader download and cache; turn any failure into advice."""
    loader = f"keras.datasets.{name}.load_data()"
    try:
        import keras

        load_data = getattr(keras.datasets, name).load_data
        with _bounded_socket_wait(_DOWNLOAD_SOCKET_TIMEOUT_S):
            (x_train, y_train), (x_test, y_test) = load_data()
    except Exception as exc:
        raise DatasetUnavailableError(_unavailable_message(name, paths, loader, exc)) from exc
    x_train, x_test = np.asarray(x_train), np.asarray(x_test)
    if name == "cifar10" and x_train.ndim == 4 and x_train.shape[1] == 3:
        # keras.config.image_data_format() == "channels_first": keep our layout fixed.
        x_train, x_test = x_train.transpose(0, 2, 3, 1), x_test.transpose(0, 2, 3, 1)
    y_train, y_test = (_label_vector(np.asarray(y)) for y in (y_train, y_test))
    # What Keras returns gets the same checks as a cache file (a patched or future loader).
    _check_split(name, "train", x_train, loader, y_train, loader)
    _check_split(name, "test", x_test, loader, y_test, loader)
    return x_train, y_train, x_test, y_test


def _label_vector(y: np.ndarray) -> np.ndarray:
    """Keras' CIFAR-10 labels are (N, 1): make them (N,)."""
    return y[:, 0] if y.ndim == 2 and y.shape[1] == 1 else y


def _unavailable_message(name: str, paths: Sequence[Path], loader: str, exc: BaseException) -> str:
    """The text of :class:`DatasetUnavailableError`: what was missing, why, and the ways out."""
    looked = "\n".join(f"  {p}  ({'found' if p.is_file() else 'missing'})" for p in paths)
    depth = _CACHE_LAYOUT[name][0].count("/")  # how far below <root>/datasets the files are
    datasets_dir = paths[0].parents[depth]
    archive_hint = ""
    if name == "cifar10":
        # Keras itself only looks in its own cache root, so point there, not at cache_dir.
        archive = cache_root() / "datasets" / "cifar-10-batches-py-target_archive"
        archive_hint = (
            f"  - or put the original cifar-10-python.tar.gz at {archive}:\n"
            "    Keras checks its hash and extracts it without a download\n"
        )
    return (
        f"data set {name!r} is not in the local cache and could not be downloaded.\n"
        f"Looked for these files:\n{looked}\n"
        f"Downloading with {loader} failed: {error_line(exc)}\n"
        "What to do (any one of):\n"
        f"  - run {loader} on a machine with internet access and copy what it leaves in\n"
        f"    ~/.keras/datasets/ to {datasets_dir}, keeping the layout (the paths above)\n"
        f"{archive_hint}"
        "  - set KERAS_HOME (or pass cache_dir=) to a directory whose datasets/ folder holds them\n"
        '  - use dtf.data.load("digits"), which is bundled with scikit-learn: no download needed'
    )
