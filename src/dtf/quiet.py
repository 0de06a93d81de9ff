"""Keep TensorFlow's C++ log lines out of notebooks.

TensorFlow's C++ core reads two environment variables once, when it is loaded:

- ``TF_CPP_MIN_LOG_LEVEL``: 0 prints INFO lines, 1 hides INFO, 2 also hides WARNING,
  3 also hides ERROR.
- ``TF_ENABLE_ONEDNN_OPTS``: with oneDNN on, every import prints a notice about
  floating-point round-off; the course turns it off (results are then also bit-for-bit
  reproducible on the CPU, and a replica that receives an empty batch does not crash).

Both must be set *before* ``import tensorflow``; setting them later changes nothing,
which is why :func:`quiet` refuses to pretend it worked when TensorFlow is already loaded.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings

from dtf._util import whole_number

#: Environment variables read by TensorFlow (and gRPC, used by TensorFlow servers).
SETTINGS = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "GRPC_VERBOSITY": "ERROR",
}


class TooLateError(RuntimeError):
    """TensorFlow was imported before :func:`quiet` could set its environment."""


def quiet(level: int = 2) -> dict:
    """Set TensorFlow's logging environment; call it before ``import tensorflow``.

    ``level`` is ``TF_CPP_MIN_LOG_LEVEL``: a whole number 0-3 (a NumPy integer will do).
    ``True`` and ``2.0`` are refused with :class:`TypeError`: Python compares them equal to
    1 and 2, but TensorFlow cannot parse the text ``"True"`` or ``"2.0"`` and falls back to
    0, which prints every INFO line. Returns the settings it applied.
    Calling it again after TensorFlow was imported with the same settings is harmless
    (re-running a notebook's Setup cell); anything else raises :class:`TooLateError`.
    """
    level = _check_level(level)
    wanted = dict(SETTINGS, TF_CPP_MIN_LOG_LEVEL=str(level))
    if "tensorflow" in sys.modules:
        missing = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
        if missing:
            raise TooLateError(
                "TensorFlow is already imported, so its log settings can no longer change "
                f"({', '.join(f'{k}={v}' for k, v in missing.items())} would have been set). "
                "Restart the kernel and run the Setup cell first, before any cell that "
                "imports TensorFlow."
            )
    else:
        os.environ.update(wanted)
    _quiet_python_loggers()
    return wanted


def _check_level(level) -> int:
    """``level`` as an ``int`` 0-3; TypeError for bools, floats and text, ValueError for range."""
    allowed = "level must be one of 0, 1, 2 or 3 (TF_CPP_MIN_LOG_LEVEL)"
    try:
        return whole_number("level", level, minimum=0, maximum=3)
    except TypeError:
        raise TypeError(
            f"{allowed}, got {level!r} ({type(level).__name__}); pass the plain number, "
            "e.g. quiet(2)"
        ) from None
    except ValueError:
        raise ValueError(f"{allowed}, got {level!r}") from None


def _quiet_python_loggers() -> None:
    """Python-side noise: TensorFlow's and absl's loggers, and warnings about deprecated
    internals that a learner cannot act on. In a Jupyter kernel (``sys.ps1`` is defined)
    TensorFlow's import sets its own logger back to INFO, printed to stdout (TF 2.21,
    ``tf_logging.get_logger``): the notebooks set it again after the import, or route it."""
    for name in ("tensorflow", "absl", "h5py"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"tensorflow\..*")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"keras\..*")
