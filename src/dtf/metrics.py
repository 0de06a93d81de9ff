"""Record the numbers a notebook measured, for the headless run report.

The runner (``tools/run_notebooks.py``) sets ``DTF_METRICS_FILE`` for each notebook it
executes; :func:`record` appends one JSON line per metric there. In JupyterLab the
variable is unset and :func:`record` only returns the value, so notebooks call it
unconditionally.
"""

from __future__ import annotations

import json
import math
import numbers
import os

ENV_VAR = "DTF_METRICS_FILE"


def record(name: str, value):
    """Record ``name = value`` for the run report and return ``value`` unchanged.

    ``value`` must be a finite number, a bool or a short string: the report is a table.
    NumPy scalars, and NumPy arrays, TensorFlow tensors and variables that hold exactly one
    element (any shape: ``()``, ``(1,)``, ``(1, 1)``), become the Python scalar they hold.

    Raises:
        ValueError: ``name`` is empty or not a string, or ``value`` is NaN or infinite.
        TypeError: ``value`` is anything else, including an array or tensor with zero or
            several elements (record one number, e.g. its mean, or one metric per element).
    """
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"metric name must be a non-empty string, got {name!r}")
    value = _scalar(name, value)
    if isinstance(value, bool) or isinstance(value, str):
        pass
    elif isinstance(value, numbers.Real):
        value = float(value) if not isinstance(value, numbers.Integral) else int(value)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"metric {name!r} is not finite: {value}")
    else:
        raise TypeError(
            f"metric {name!r} must be a number, bool or string, got {type(value).__name__}"
        )
    path = os.environ.get(ENV_VAR)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"name": name, "value": value}) + "\n")
    return value


def _scalar(name: str, value):
    """The Python scalar in a tensor, variable, NumPy array or scalar; other values as given."""
    if hasattr(value, "numpy"):  # a TensorFlow tensor or variable
        value = value.numpy()
    if hasattr(value, "item") and hasattr(value, "shape"):  # a NumPy array or scalar
        shape = tuple(value.shape)
        if math.prod(shape) != 1:
            raise TypeError(
                f"metric {name!r} must be a single value, got an array of shape {shape} "
                f"({math.prod(shape)} elements): record one number, e.g. float(x.mean()) "
                f"or float(x[0]), or one metric per element"
            )
        value = value.item()
    return value


def read(path) -> dict:
    """Read a metrics file written by :func:`record`; a later value of a name wins."""
    out: dict = {}
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                item = json.loads(line)
                out[item["name"]] = item["value"]
    return out
