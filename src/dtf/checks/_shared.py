"""Helpers shared by the checkers of labs 05 and 06."""

from __future__ import annotations

from typing import Any

import numpy as np

from dtf.checks.core import Wrong, as_array, expect_close, short


def pair(element: Any, what: str) -> Any:
    """``element`` when it is a pair ``(x, y)``, else :class:`Wrong`."""
    if not isinstance(element, (tuple, list)) or len(element) != 2:
        raise Wrong(
            f"for {what}: each element must be a pair (x, y), got {short(element)}",
            "each element of the dataset is a pair: the examples, then their labels",
        )
    return element


def numbered_labels(element: Any, what: str, together: str) -> np.ndarray:
    """The labels of a pair ``(x, y)`` of :func:`dtf.checks.core.numbered` examples, after
    checking that they still belong to their examples."""
    x, y = (as_array(t) for t in pair(element, what))
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise Wrong(
            f"for {what}: expected x of shape (examples, features) and y of shape (examples,), "
            f"got {x.shape} and {y.shape}",
            "batch the (x, y) pairs as they are: no reshaping",
        )
    if not np.array_equal(x[:, 0].astype(np.int64), y):
        raise Wrong(f"for {what}: the labels no longer belong to their examples", together)
    return y


def expect_weights(expected, got, labels, atol: float, hint: str) -> float:
    """Each array of ``got`` close to ``expected``'s (named by ``labels``); the largest
    difference. A message shows the learner's values, never the reference's: they are what
    a right answer ends with."""
    pairs = zip(expected, got, labels, strict=True)
    return max(
        expect_close(w, h, what=n, atol=atol, hint=hint, show_expected=False) for w, h, n in pairs
    )
