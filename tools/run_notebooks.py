"""Run the course notebooks headless and write a run report (``make run``).

Usage (from the repository root; ``python tools/run_notebooks.py`` works too, from anywhere)::

    python -m tools.run_notebooks [PATH ...] [-p NAME VALUE ...] [-k PATTERN]
        [--timeout S] [--cell-timeout S] [--output-dir DIR] [--report-dir DIR] [--kernel NAME]

Each notebook runs in its own child process and process group (on Linux, macOS and Windows),
executed there by the course's one runner (:func:`tools.nbrun.execute`), with its folder as
the working directory (as in JupyterLab), a fresh ``DTF_METRICS_FILE`` and a wall-clock
limit. Everything the notebook started is stopped afterwards. The report
(``report.md``, ``report.html``, ``report.json`` in ``--report-dir``) lists status, wall time,
peak memory of the whole process tree, the metrics the notebook recorded with
``dtf.metrics.record`` and the first error.

``-p NAME VALUE`` values are typed as papermill's own ``-p`` types them: ``True``, ``False``,
``None``, an integer, a float, else the text as a string (``[1, 2]`` stays text). Values that
have no literal in a parameters cell (``inf``, ``nan``, ``1e400``) are refused (exit status 2).

Exit status: 0 all passed, 1 some failed or timed out, 2 usage error. Ctrl-C stops the
notebook that is running and every process it started, says so in one line (no report is
written) and ends the runner by SIGINT, as a shell and ``make`` expect (status 130 where there
are no signals).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

# Run as a file (`python tools/run_notebooks.py`), not as `python -m tools.run_notebooks`:
# put the repository root first on the import path, so that `tools` below is this package.
if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools import nbrun, nbtools
from tools.nbtools import REPO_ROOT, UsageError, display_path, first_line, say, say_start

DEFAULT_GLOBS = ("notebooks/*.ipynb", "labs/solutions/*.ipynb")
WORKER_FLAG = "--_worker"  # internal: run one notebook in this (child) process
SAMPLE_INTERVAL_S = 0.25
SUMMARY_MAX = 200
STATUSES = ("passed", "failed", "timeout")
#: The exit status after Ctrl-C where a process cannot end by its signal (128 + SIGINT).
EXIT_INTERRUPTED = 130


@dataclass
class Result:
    """The outcome of one notebook, as shown in the report (paths relative, never absolute)."""

    notebook: str
    status: str
    seconds: float
    peak_mib: float
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    executed: str | None = None
    log: str | None = None
    returncode: int | None = None

    @property
    def note(self) -> str:
        """Error and warnings in one line, for the report's last column."""
        return "; ".join([*([self.error] if self.error else []), *self.warnings])


# --------------------------------------------------------------------------- helpers


def discover(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Notebooks to run: ``paths`` expanded, or the tutorials then the lab solutions."""
    return nbtools.discover(paths, DEFAULT_GLOBS)


def parse_value(text: str) -> bool | int | float | str | None:
    """A ``-p`` value typed the way papermill's command line types it.

    ``True``, ``False`` and ``None`` (exactly so spelled), else an integer, else a float,
    else the text itself: no other Python literal is evaluated (``"[1, 2]"`` stays text).
    """
    if text in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[text]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:  # also int() of more digits than Python converts (4300)
            continue
    return text


def parse_parameter(name: str, text: str) -> bool | int | float | str | None:
    """The value of ``-p name text``, or :class:`UsageError` if it cannot reach a notebook.

    The value is written into the notebook's injected parameters cell and its metadata
    (JSON), so it must be a valid name, a finite number (``inf``/``nan``, e.g. ``1e400``,
    have no literal) or text that can be saved as UTF-8 (:func:`tools.nbrun.parameter_line`).
    """
    value = parse_value(text)
    try:
        nbrun.parameter_line(name, value)
    except ValueError as exc:
        raise UsageError(f"-p {name}: {exc}") from None
    return value


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def one_line(text: str, limit: int = SUMMARY_MAX, scrub: Sequence[Path] = ()) -> str:
    """All of ``text`` on one short line, without colour codes or absolute directories.

    Unlike ``dtf._util.first_line`` (which it uses to cut) it keeps every line: a
    report's error column should show the whole message, collapsed.
    """
    text = _ANSI.sub("", text)
    for directory in scrub:
        text = text.replace(str(directory) + os.sep, "")
    return first_line(" ".join(text.split()), limit)


def format_value(value: Any) -> str:
    """Metric values for humans: floats to 4 significant digits."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def format_metrics(metrics: dict[str, Any], sep: str = ", ") -> str:
    return sep.join(f"{k}={format_value(v)}" for k, v in metrics.items())


def format_params(params: dict[str, Any]) -> str:
    if not params:
        return "default parameters"
    return "parameters: " + ", ".join(f"{k}={v!r}" for k, v in params.items())


class TreeSampler:
    """Samples the summed RSS of a process and all its descendants in a background thread.

    It also remembers every descendant it saw, so processes that outlive their parent (and
    get re-parented to init) can still be found and stopped.
    """

    def __init__(self, pid: int, interval: float = SAMPLE_INTERVAL_S) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_bytes = 0
        self.seen: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"sampler-{pid}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def sample(self) -> None:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return
        total = 0
        for proc in procs:
            self.seen.setdefault(proc.pid, proc)
            try:
                total += proc.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        self.peak_bytes = max(self.peak_bytes, total)

    def _loop(self) -> None:
        while True:
            self.sample()
            if self._stop.wait(self.interval):
                return


@contextlib.contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """Ignore Ctrl-C while the processes of a run are being stopped: a second Ctrl-C must
    not cut the clean-up short and leave a kernel running. Signal handlers belong to the main
    thread; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- worker (child)


def _worker(spec_json: str) -> int:
    """Execute one notebook (:func:`tools.nbrun.execute`); runs in the child started by run_one.

    The parent stops what the notebook left running (``cleanup=False`` here). On failure the
    error (name, message, cell) goes to ``spec["error_file"]`` as JSON, which is more reliable
    than parsing tracebacks out of stderr.
    """
    spec = json.loads(spec_json)
    error: dict[str, Any]
    try:
        nbrun.execute(
            spec["input"],
            parameters=spec["parameters"],  # JSON keeps bool, int, float, str and None
            cwd=spec["cwd"],
            output_path=spec["output"],
            token=spec["token"],
            metrics_file=spec["metrics"],
            timeout=spec["cell_timeout"],
            kernel=spec["kernel"],
            cleanup=False,
        )
        return 0
    except nbrun.NotebookError as exc:  # a cell failed or timed out, the kernel died
        error = {"ename": exc.ename, "evalue": exc.evalue, "exec_count": exc.exec_count}
    except Exception as exc:  # a notebook file that cannot be read, ...
        error = {"ename": type(exc).__name__, "evalue": str(exc), "exec_count": None}
    Path(spec["error_file"]).write_text(json.dumps(error), encoding="utf-8")
    print(f"{error['ename']}: {error['evalue']}", file=sys.stderr, flush=True)
    return 1


# --------------------------------------------------------------------------- parent


def _load_json(path: Path) -> dict[str, Any] | None:
    """A JSON file, e.g. an executed notebook (importing nbformat would cost the parent ~1 s)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _error_from_notebook(path: Path) -> dict[str, Any] | None:
    """The first error output of an executed notebook (the runner saves it before raising)."""
    nb = _load_json(path) or {}
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                return {
                    "ename": output.get("ename", "Error"),
                    "evalue": output.get("evalue", ""),
                    "exec_count": cell.get("execution_count"),
                }
    return None


def _last_error_line(log_path: Path) -> str | None:
    """Fallback summary: the last ``SomeError: message`` line of the child's output."""
    try:
        lines = log_path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    pattern = re.compile(r"^\s*[\w.]*(Error|Exception|Interrupt|Exit)\b")
    for line in reversed(lines):
        if pattern.match(_ANSI.sub("", line)):
            return line
    return next((line for line in reversed(lines) if line.strip()), None)


def _read_metrics(path: Path) -> dict[str, Any]:
    """Metrics the notebook recorded; a line cut off by a kill must not crash the report."""
    import dtf.metrics as dtf_metrics  # here, not at the top: nbtools made dtf importable

    try:
        return dtf_metrics.read(path)
    except (ValueError, KeyError, TypeError):
        pass  # keep the lines that are intact
    metrics: dict[str, Any] = {}
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return metrics
    for line in lines:
        try:
            item = json.loads(line)
            metrics[item["name"]] = item["value"]
        except (ValueError, KeyError, TypeError):
            continue
    return metrics


def _summarise(error: dict[str, Any]) -> str:
    text = f"{error['ename']}: {error['evalue']}" if error.get("evalue") else error["ename"]
    if error.get("exec_count"):
        text += f" (In [{error['exec_count']}])"
    return text


def run_one(
    path: Path,
    params: dict[str, Any],
    *,
    output_path: Path,
    metrics_path: Path,
    log_path: Path,
    timeout: float = 300,
    cell_timeout: float | None = None,
    kernel: str = "python3",
    name: str | None = None,
) -> Result:
    """Run one notebook in a child process and return what happened.

    The child gets its own session (process group on Windows) so that a timeout can stop it
    and its tree together (:func:`nbtools.terminate`); the kernel (which jupyter_client puts
    in yet another session) and whatever the
    notebook started are found through the sampler and the run token and stopped as well.
    """
    path = path.resolve()
    name = name or display_path(path)
    for target in (output_path, metrics_path, log_path):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
    error_file = log_path.with_suffix(".error.json")
    error_file.unlink(missing_ok=True)
    token = nbtools.new_run_token()
    spec = {
        "input": str(path),
        "output": str(output_path.resolve()),
        "parameters": params,
        "kernel": kernel,
        "cwd": str(path.parent),
        "token": token,
        "metrics": str(metrics_path.resolve()),
        "cell_timeout": cell_timeout if cell_timeout is not None else timeout,
        "error_file": str(error_file.resolve()),
    }
    cmd = [sys.executable, "-m", "tools.run_notebooks", WORKER_FLAG, json.dumps(spec)]
    start = time.monotonic()
    with open(log_path, "wb") as log:
        child = subprocess.Popen(
            cmd,
            cwd=REPO_ROOT,  # where `-m tools.run_notebooks` is found; the kernel gets "cwd"
            env=nbtools.child_env(token, metrics_path),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            **nbtools.session_kwargs(),
        )
        sampler = TreeSampler(child.pid)
        timed_out = False
        try:
            sampler.start()
            child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with _ctrl_c_deferred():
                sampler.stop()
                sampler.sample()  # one last look at the tree, now that the thread is done
                procs = [*sampler.seen.values(), *nbtools.find_tagged(token)]
                nbtools.terminate(procs, child=child)
        except BaseException:  # Ctrl-C: do not leave a kernel behind
            with _ctrl_c_deferred():
                sampler.stop()
                procs = [*sampler.seen.values(), *nbtools.find_tagged(token)]
                nbtools.terminate(procs, child=child)
            raise
        finally:
            sampler.stop()
        seconds = time.monotonic() - start
    with _ctrl_c_deferred():
        leftovers = nbtools.kill_leftovers(token, also=sampler.seen.values())

    scrub = [path.parent, REPO_ROOT]
    report_dir = log_path.parent.parent  # logs live in <report-dir>/logs
    result = Result(
        notebook=name,
        status="passed",
        seconds=round(seconds, 2),
        peak_mib=round(sampler.peak_bytes / 2**20, 1),
        metrics=_read_metrics(metrics_path),
        executed=(
            display_path(output_path, report_dir, output_path.parent)
            if output_path.exists()
            else None
        ),
        log=display_path(log_path, report_dir),
        returncode=child.returncode,
    )
    if timed_out:
        result.status = "timeout"
        running = nbrun.running_cell(_load_json(output_path) or {})
        where = f" while {running} was running" if running else ""
        result.error = f"timed out after {timeout:g} s{where}"
    elif child.returncode != 0:
        result.status = "failed"
        error = None
        error = _load_json(error_file) or _error_from_notebook(output_path)
        if error is not None:
            if error["ename"] == "CellTimeoutError":
                result.status = "timeout"
            result.error = one_line(_summarise(error), scrub=scrub)
        else:
            line = _last_error_line(log_path) or ""
            result.error = one_line(f"exit status {child.returncode}: {line}", scrub=scrub)
    if leftovers and not timed_out:
        result.warnings.append(one_line("stopped leftover processes: " + "; ".join(leftovers)))
    return result


# --------------------------------------------------------------------------- reports


def _md_cell(text: str) -> str:
    """Make text safe inside a Markdown table cell (pipes split cells, `<` starts HTML)."""
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "\\<")


def counts_text(results: Sequence[Result]) -> str:
    """``3 passed, 1 failed``: only the statuses that occurred, in a fixed order."""
    counts = {s: sum(r.status == s for r in results) for s in STATUSES}
    return ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "0 notebooks"


def summary_line(
    results: Sequence[Result], total_seconds: float, params: dict[str, Any], *, bold: bool = False
) -> str:
    """``3 passed, 1 failed in 74.2 s (parameters: EPOCHS=1)``, counts in bold for Markdown."""
    counts = f"**{counts_text(results)}**" if bold else counts_text(results)
    return f"{counts} in {total_seconds:.1f} s ({format_params(params)})"


def _markdown(results: Sequence[Result], total_seconds: float, params: dict[str, Any]) -> str:
    lines = [
        "# Notebook run report",
        "",
        _md_cell(summary_line(results, total_seconds, params, bold=True)),
        "",
        "| notebook | status | time s | peak MiB | metrics | note |",
        "|---|---|--:|--:|---|---|",
    ]
    for r in results:
        metrics = "<br>".join(_md_cell(f"{k}={format_value(v)}") for k, v in r.metrics.items())
        lines.append(
            f"| {_md_cell(r.notebook)} | {r.status} | {r.seconds:.1f} | {r.peak_mib:.0f} "
            f"| {metrics} | {_md_cell(r.note)} |"
        )
    return "\n".join(lines) + "\n"


_HTML_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; }
table { border-collapse: collapse; }
th, td { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.passed { background: #d8f5d8; } .failed { background: #f8d0d0; } .timeout { background: #fde7c0; }
"""


def _html(results: Sequence[Result], total_seconds: float, params: dict[str, Any]) -> str:
    esc = html.escape
    rows = []
    for r in results:
        metrics = "<br>".join(esc(f"{k}={format_value(v)}") for k, v in r.metrics.items())
        rows.append(
            f'<tr class="{esc(r.status)}"><td>{esc(r.notebook)}</td><td>{esc(r.status)}</td>'
            f'<td class="num">{r.seconds:.1f}</td><td class="num">{r.peak_mib:.0f}</td>'
            f"<td>{metrics}</td><td>{esc(r.note)}</td></tr>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Notebook run report</title>\n<style>{_HTML_STYLE}</style>\n</head>\n<body>\n"
        "<h1>Notebook run report</h1>\n"
        f"<p><strong>{esc(summary_line(results, total_seconds, params))}</strong></p>\n"
        "<table>\n<thead><tr><th>notebook</th><th>status</th><th>time s</th><th>peak MiB</th>"
        "<th>metrics</th><th>note</th></tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody>\n</table>\n</body>\n</html>\n"
    )


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


def write_reports(
    results: Sequence[Result],
    report_dir: Path,
    *,
    params: dict[str, Any] | None = None,
    total_seconds: float | None = None,
) -> list[Path]:
    """Write ``report.md``, ``report.html`` and ``report.json`` into ``report_dir``."""
    params = params or {}
    if total_seconds is None:
        total_seconds = sum(r.seconds for r in results)
    report_dir.mkdir(parents=True, exist_ok=True)
    data = {
        "summary": summary_line(results, total_seconds, params),
        "counts": {s: sum(r.status == s for r in results) for s in STATUSES},
        "total_seconds": round(total_seconds, 2),
        "parameters": {k: _jsonable(v) for k, v in params.items()},
        "results": [{**asdict(r), "note": r.note} for r in results],
    }
    outputs = {
        "report.md": _markdown(results, total_seconds, params),
        "report.html": _html(results, total_seconds, params),
        "report.json": json.dumps(data, indent=2, ensure_ascii=False) + "\n",
    }
    written = []
    for filename, text in outputs.items():
        target = report_dir / filename
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return written


# --------------------------------------------------------------------------- CLI


def _positive(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.run_notebooks",
        description="Run notebooks headless and write build/report.{md,html,json}.",
    )
    parser.add_argument(
        "paths",
        nargs="*",
        help="notebooks or folders (default: notebooks/*.ipynb, then labs/solutions/*.ipynb)",
    )
    parser.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="notebook parameter (repeatable); VALUE becomes True/False/None, an integer or a "
        "float where it reads as one (as with papermill -p), else a string; inf and nan are "
        "refused",
    )
    parser.add_argument(
        "-k",
        dest="patterns",
        action="append",
        default=[],
        metavar="PATTERN",
        help="only notebooks whose path contains PATTERN (repeatable: any of them)",
    )
    parser.add_argument(
        "--timeout", type=_positive, default=300.0, help="wall-clock limit per notebook, s"
    )
    parser.add_argument(
        "--cell-timeout",
        type=_positive,
        default=None,
        help="limit per cell, s (default: --timeout)",
    )
    parser.add_argument("--output-dir", type=Path, default=Path("build/executed"))
    parser.add_argument("--report-dir", type=Path, default=Path("build"))
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    return parser


PARAMETER_FLAGS = ("-p", "--parameter")


def take_parameters(argv: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """Split ``-p NAME VALUE`` triples off ``argv``: (the other arguments, the pairs).

    argparse would take a VALUE such as ``-1e-3`` for an option and refuse it (it accepts
    only ``-1`` and ``-0.5`` as negative numbers); papermill's ``-p`` takes any text, so the
    two words after ``-p`` are taken verbatim here. Anything after ``--`` is left alone, and
    an incomplete ``-p`` at the end is left for argparse to report.
    """
    rest: list[str] = []
    pairs: list[tuple[str, str]] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--":
            rest.extend(argv[i:])
            break
        if argv[i] in PARAMETER_FLAGS and i + 2 < len(argv):
            pairs.append((argv[i + 1], argv[i + 2]))
            i += 3
        else:
            rest.append(argv[i])
            i += 1
    return rest, pairs


def _unique_stems(paths: Sequence[Path]) -> list[str]:
    """File stems, suffixed where two notebooks share one, for metrics and log file names."""
    seen: dict[str, int] = {}
    out = []
    for path in paths:
        n = seen.get(path.stem, 0) + 1
        seen[path.stem] = n
        out.append(path.stem if n == 1 else f"{path.stem}-{n}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == [WORKER_FLAG] and len(argv) == 2:
        return _worker(argv[1])
    parser = build_parser()
    argv, pairs = take_parameters(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the message
        return int(exc.code or 0)
    try:
        params: dict[str, Any] = {}
        for pname, text in [*pairs, *args.parameter]:
            params[pname] = parse_parameter(pname, text)
        notebooks = discover(args.paths)
        if not notebooks:
            raise UsageError("no notebooks found in " + (" ".join(args.paths) or "the defaults"))
        base = nbtools.common_parent(notebooks)
        names = [display_path(p, base) for p in notebooks]
        if args.patterns:
            keep = [i for i, n in enumerate(names) if any(pat in n for pat in args.patterns)]
            if not keep:
                raise UsageError(f"no notebook matches -k {' / '.join(args.patterns)}")
            notebooks = [notebooks[i] for i in keep]
            names = [names[i] for i in keep]
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        say(f"{parser.prog}: error: {exc}", err=True)
        return 2

    output_dir: Path = args.output_dir.resolve()
    report_dir: Path = args.report_dir.resolve()
    results: list[Result] = []
    start = time.monotonic()
    running: str | None = None
    try:
        for index, (path, name, stem) in enumerate(
            zip(notebooks, names, _unique_stems(notebooks), strict=True), start=1
        ):
            running = name
            say_start(index, len(notebooks), name)
            result = run_one(
                path,
                params,
                output_path=output_dir / name,
                metrics_path=report_dir / "metrics" / f"{stem}.jsonl",
                log_path=report_dir / "logs" / f"{stem}.log",
                timeout=args.timeout,
                cell_timeout=args.cell_timeout,
                kernel=args.kernel,
                name=name,
            )
            running = None
            results.append(result)
            details = [f"peak {result.peak_mib:.0f} MiB"]
            if result.metrics:
                details.append(format_metrics(result.metrics))
            line = f"  {result.status} in {result.seconds:.1f} s, " + ", ".join(details)
            if result.note:
                line += f": {result.note}"
            say(line)
    except KeyboardInterrupt:  # run_one has stopped the notebook's processes
        where = f"{running} stopped, with every process it started" if running else "stopped"
        say(
            f"{parser.prog}: interrupted (Ctrl-C): {where}; {len(results)} of {len(notebooks)}"
            " notebooks finished, no report written.",
            err=True,
        )
        return EXIT_INTERRUPTED
    total = time.monotonic() - start
    written = write_reports(results, report_dir, params=params, total_seconds=total)
    say(summary_line(results, total, params))
    say("report: " + ", ".join(display_path(p, report_dir.parent) for p in written))
    return 0 if all(r.status == "passed" for r in results) else 1


def _exit(status: int) -> None:
    """End the process with ``status``; after Ctrl-C, by SIGINT itself where there are
    signals, so that a shell loop or ``make`` sees an interrupted program, not a failure."""
    if status == EXIT_INTERRUPTED and nbtools.POSIX:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(status)


if __name__ == "__main__":
    _exit(main())
