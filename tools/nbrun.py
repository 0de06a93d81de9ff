"""Execute a notebook in a Jupyter kernel: the one function the course runs notebooks with.

Callers of :func:`execute`:

- ``tools/run_notebooks.py`` (``make run``), in a worker process it supervises (wall-clock
  limit, peak memory, report). The worker passes ``cleanup=False``: the supervisor stops what
  is left, which it must do anyway after killing a worker that ran out of time.
- ``tools/execute_in_place.py`` (``make outputs``), which then replaces the notebook file.
- ``tests/labrun.py``: the lab tests (solutions and student versions), in the test process.
- ``tests/test_notebook_failures.py``, with ``cleanup=False``: there the notebook itself must
  leave no process behind.

nbval is not a caller and stays as it is: a pytest plugin that executes the tutorials as test
items (``--nbval-lax``; ``notebooks/`` is a test path) in a kernel of its own.

papermill parameterizes, nbclient (papermill's own engine) executes. ``parameters`` go in with
papermill's ``parameterize_notebook``: a new cell tagged ``injected-parameters`` right after
the cell tagged ``parameters`` (replacing an injected cell already there; at the top, with a
warning, where no cell is tagged ``parameters``), and the notebook's metadata
(``papermill.parameters``). The cells then run in an ``nbclient.NotebookClient``, as under
``papermill.execute_notebook``, with papermill's bookkeeping kept: each cell records its
``papermill.status`` (``running``, then ``completed`` or ``failed``), and with ``output_path``
the executed notebook is saved as it goes (when each code cell starts, and at the end, also
after a failure), so that a run killed half way shows which cell was running
(:func:`running_cell`). ``papermill.execute_notebook`` itself is not called: it starts the
kernel with the calling process's environment only (this runner gives each run its own), and
it adds banner cells to a notebook that failed.

Each run: outputs and execution counts cleared first; the notebook's folder as working
directory (as in JupyterLab); the environment of :func:`tools.nbtools.child_env` (a run token
that every process the kernel starts inherits, ``DTF_METRICS_FILE`` set or unset) without
``PYTEST_CURRENT_TEST`` (with it, ipykernel does not forward output written to descriptor 1);
a time limit per cell; a kernel name. Afterwards nbclient shuts the kernel down and, with
``cleanup=True``, every process that still carries the run token is stopped and named on
stderr.
"""

from __future__ import annotations

import ast
import keyword
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools import nbtools
from tools.nbtools import error_line, first_line, say

PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
DEFAULT_CELL_TIMEOUT_S = 300.0
#: A cell's ``metadata.papermill.status`` while it runs and after it ran (papermill's values).
RUNNING, COMPLETED, FAILED = "running", "completed", "failed"


class NotebookError(Exception):
    """A cell raised or ran out of time, or the kernel died or did not start.

    ``ename``/``evalue``: the error's type name and message; ``cell_index``: the index in
    ``nb.cells`` of the cell that was running (None if no cell had started); ``exec_count``:
    its execution count (None if it never got one); ``nb``: the notebook as far as it ran;
    ``leftovers``: the processes stopped afterwards. The original exception is ``__cause__``.
    """

    def __init__(
        self,
        ename: str,
        evalue: str,
        *,
        message: str | None = None,
        cell_index: int | None = None,
        exec_count: int | None = None,
        nb: Any = None,
    ) -> None:
        self.ename = ename
        self.evalue = evalue
        self.message = message or (f"{ename}: {evalue}" if evalue else ename)
        self.cell_index = cell_index
        self.exec_count = exec_count
        self.nb = nb
        self.leftovers: list[str] = []
        super().__init__(self.message)


@dataclass
class Run:
    """What :func:`execute` returns."""

    nb: Any  #: the executed notebook (an ``nbformat.NotebookNode``)
    code_cells: int  #: how many code cells ran
    leftovers: list[str] = field(default_factory=list)  #: processes stopped afterwards


# --------------------------------------------------------------------------- parameters


def parameter_line(name: str, value: Any) -> str:
    """``NAME = literal``, the line that sets ``name`` in the injected cell.

    Raises ValueError (with a message for a command line) when ``name`` is no Python name, or
    when ``value`` has no literal that gives it back (``inf``, ``nan``) or cannot be saved.
    """
    if not name.isidentifier():
        raise ValueError("the parameter name is not a Python identifier")
    if keyword.iskeyword(name):
        raise ValueError("the parameter name is a Python keyword")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(
            f"the value reads as {value}, not a finite number, and cannot be written into a "
            "notebook's parameters cell; give a finite number"
        )
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                "the value is not valid UTF-8 text and cannot be saved in a notebook"
            ) from None
    try:
        text = repr(value)
        same = ast.literal_eval(text) == value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        text, same = object.__repr__(value), False
    if not same:
        raise ValueError(f"the value {first_line(text, 40)} has no literal for a parameters cell")
    return f"{name} = {text}"


def _first_tagged(nb: Any, tag: str) -> int | None:
    return next((i for i, c in enumerate(nb.cells) if tag in c.metadata.get("tags", [])), None)


def inject_parameters(nb: Any, parameters: Mapping[str, Any]) -> None:
    """Set ``parameters`` in ``nb`` with papermill's own ``parameterize_notebook`` (what
    ``papermill -p`` does; see the module's docstring), in place.

    Nothing happens without parameters. Raises ValueError for one :func:`parameter_line`
    refuses, before ``nb`` is changed.
    """
    if not parameters:
        return
    from papermill.parameterize import parameterize_notebook

    for name, value in parameters.items():
        parameter_line(name, value)  # refuse what papermill would write but not read back
    if _first_tagged(nb, INJECTED_TAG) is None and _first_tagged(nb, PARAMETERS_TAG) is None:
        warnings.warn(
            f"no cell is tagged {PARAMETERS_TAG!r}: the parameters are set in a first cell",
            stacklevel=2,
        )
    nb.metadata.setdefault("papermill", {})
    untagged = [c for c in nb.cells if "tags" not in c.metadata]
    for cell in untagged:  # papermill reads every cell's tags, as its own runs set them
        cell.metadata["tags"] = []
    done = parameterize_notebook(nb, dict(parameters), kernel_name="python3", language="python")
    nb.cells = done.cells  # papermill returns the notebook; keep the caller's object
    for cell in untagged:
        del cell.metadata["tags"]


# --------------------------------------------------------------------------- executed notebooks


def clear_outputs(nb: Any) -> None:
    """Drop outputs and execution counts, so that nothing from an earlier run survives."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None


def save(nb: Any, path: Path) -> None:
    """Write ``nb`` next to ``path`` and rename it over, so a kill never leaves half a file."""
    import nbformat

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            nbformat.write(nb, fh)
        if path.exists():
            shutil.copymode(path, tmp)  # mkstemp creates 0600 files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def running_cell(nb: Mapping[str, Any]) -> str | None:
    """``In [n]`` or ``cell i of n``: the cell a saved notebook was running (JSON is enough)."""
    cells = nb.get("cells", [])
    for index, cell in enumerate(cells):
        if cell.get("metadata", {}).get("papermill", {}).get("status") == RUNNING:
            count = cell.get("execution_count")
            return f"In [{count}]" if count else f"cell {index + 1} of {len(cells)}"
    return None


# --------------------------------------------------------------------------- the runner


def execute(
    path: str | os.PathLike[str],
    *,
    nb: Any = None,
    parameters: Mapping[str, Any] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    output_path: str | os.PathLike[str] | None = None,
    token: str | None = None,
    metrics_file: str | os.PathLike[str] | None = None,
    timeout: float | None = DEFAULT_CELL_TIMEOUT_S,
    kernel: str = "python3",
    kernel_manager_class: type | None = None,
    record_timing: bool = True,
    cleanup: bool = True,
) -> Run:
    """Execute the notebook ``path`` top to bottom in a fresh kernel; return the result.

    - ``nb``: the notebook to run, already read from ``path`` (and changed) by the caller;
      by default ``path`` is read. It is executed in place, outputs cleared first.
    - ``parameters``: injected after the cell tagged ``parameters`` (:func:`inject_parameters`).
    - ``cwd``: the kernel's working directory, by default the notebook's folder.
    - ``output_path``: where the executed notebook is saved as it runs and at the end.
    - ``token``: the run token the kernel's processes carry (:data:`nbtools.RUN_TOKEN_ENV`),
      by default a new one; ``metrics_file``: ``DTF_METRICS_FILE``, by default unset.
    - ``timeout``: limit per cell, s (None: none); ``kernel``: the Jupyter kernel's name;
      ``kernel_manager_class``: nbclient's ``AsyncKernelManager`` by default (the tests fork
      their kernels: tests/forked_kernel.py);
      ``record_timing``: nbclient's per-cell timestamps in the cells' metadata.
    - ``cleanup``: stop every process left with the run token and name it on stderr.

    Raises :class:`NotebookError` if a cell fails or times out or the kernel dies or does not
    start (the output notebook is saved and the processes cleaned up first).
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    path = Path(path)
    if nb is None:
        nb = nbformat.read(path, as_version=4)
    inject_parameters(nb, parameters or {})
    clear_outputs(nb)
    output = Path(output_path).resolve() if output_path is not None else None
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
    current: dict[str, int | None] = {"index": None}

    def on_cell_execute(cell: Any, cell_index: int) -> None:
        current["index"] = cell_index
        cell.metadata["papermill"] = {"status": RUNNING}
        if output is not None:
            save(nb, output)

    def on_cell_executed(cell: Any, cell_index: int, execute_reply: dict[str, Any]) -> None:
        ok = execute_reply.get("content", {}).get("status") == "ok"
        cell.metadata["papermill"] = {"status": COMPLETED if ok else FAILED}

    client = NotebookClient(
        nb,
        # whole seconds: nbclient 0.10.4 (Colab's) refuses a float
        timeout=None if timeout is None else math.ceil(timeout),
        kernel_name=kernel,
        resources={"metadata": {"path": str(Path(cwd or path.parent).resolve())}},
        record_timing=record_timing,
        on_cell_execute=on_cell_execute,
        on_cell_executed=on_cell_executed,
        **({"kernel_manager_class": kernel_manager_class} if kernel_manager_class else {}),
    )
    token = token or nbtools.new_run_token()
    env = nbtools.child_env(token, metrics_file)
    env.pop("PYTEST_CURRENT_TEST", None)
    failure: NotebookError | None = None
    leftovers: list[str] = []
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        index = current["index"]
        failure = NotebookError(
            exc.ename,
            exc.evalue,
            cell_index=index,
            exec_count=nb.cells[index].get("execution_count") if index is not None else None,
            nb=nb,
        )
        failure.__cause__ = exc
    except Exception as exc:  # a cell timed out, the kernel died or did not start
        failure = NotebookError(
            type(exc).__name__,
            str(exc),
            message=error_line(exc),
            cell_index=current["index"],
            nb=nb,
        )
        failure.__cause__ = exc
    finally:  # also on Ctrl-C
        if output is not None:
            save(nb, output)
        if cleanup:
            leftovers = nbtools.kill_leftovers(token)
            for line in leftovers:
                say(f"  warning: stopped leftover processes: {line}", err=True)
    if failure is not None:
        failure.leftovers = leftovers
        raise failure
    return Run(nb=nb, code_cells=client.code_cells_executed, leftovers=leftovers)
