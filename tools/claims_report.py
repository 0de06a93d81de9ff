"""Which of the course's claims changed: a Markdown summary of a pytest JUnit XML report.

The scheduled CI job (.github/workflows/prerelease.yml) installs the newest TensorFlow and Keras
pre-releases on top of the pins, runs the whole suite with ``--junitxml``, and calls this tool.
Each test asserts something the course states (a notebook's text, a measured fact, a helper's
behaviour), so each failure is a claim that no longer holds, or holds differently:

    python tools/claims_report.py build/junit.xml                # Markdown on stdout
    python tools/claims_report.py build/junit.xml --output F     # appended to F
    python tools/claims_report.py build/junit.xml --github       # to $GITHUB_STEP_SUMMARY, plus
                                                                 # a warning annotation

For every failed test the summary gives its id, the claim it guards (the first line of the
test function's docstring, read from the source with ``ast`` without importing it; else its
name in words; for a notebook cell, the notebook's title) and the first line of its error.

Exit status: 0 when the report was written, whatever it says (the job reports, it does not
gate); 2 when the XML file is missing or unreadable.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Distributions whose installed versions head the report: each module's possible owners
#: (tools/versions.py), so that a weekly run on keras-nightly names keras-nightly.
PACKAGES = (
    *("tensorflow", "tensorflow-cpu", "tf-nightly", "tf-nightly-cpu"),
    *("keras", "keras-nightly", "tf-keras", "tf-keras-nightly"),
)


@dataclass(frozen=True)
class Failure:
    test: str  # pytest's id, e.g. tests/test_x.py::test_y[param]
    claim: str
    error: str
    kind: str  # "failure" or "error" (an error outside the test itself, e.g. in a fixture)


@dataclass(frozen=True)
class Counts:
    tests: int
    failures: int
    errors: int
    skipped: int


def first_line(text: str | None) -> str:
    """The first line with content, stripped; '' if none."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _error_line(element: ET.Element) -> str:
    """The first line of the error: pytest's message, else the first ``E`` line of the text."""
    message = first_line(element.get("message"))
    if message:
        return message
    for line in (element.text or "").splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    return first_line(element.text) or "(no message)"


def source_of(classname: str, root: Path = ROOT) -> tuple[Path | None, list[str]]:
    """The file a JUnit ``classname`` names, and the class names inside it.

    pytest writes ``tests.test_x`` or ``tests.test_x.TestClass`` for a test function, and the
    notebook's path without the suffix's dot for an nbval cell (``notebooks.05_x.ipynb``).
    """
    parts = classname.split(".")
    if parts[-1] == "ipynb":
        path = root.joinpath(*parts[:-2], parts[-2] + ".ipynb")
        return (path if path.exists() else None), []
    for cut in range(len(parts), 0, -1):
        path = root.joinpath(*parts[:cut]).with_suffix(".py")
        if path.exists():
            return path, parts[cut:]
    return None, []


@cache
def _docstrings(path: Path) -> dict[str, str]:
    """``{"test_x": doc, "TestClass.test_y": doc}`` for the functions of a test module."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return {}
    found = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = ast.get_docstring(node) or ""
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    found[f"{node.name}.{item.name}"] = ast.get_docstring(item) or ""
    return found


@cache
def _notebook_title(path: Path) -> str:
    """The first heading of a notebook, without its ``#``."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return ""
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            source = "".join(cell.get("source", []))
            match = re.search(r"^#+\s+(.+)$", source, re.MULTILINE)
            if match:
                return match.group(1).strip()
    return ""


def in_words(name: str) -> str:
    """``test_make_refuses_a_venv[3.10]`` -> ``make refuses a venv [3.10]``."""
    base, _, params = name.partition("[")
    words = re.sub(r"^test_?", "", base).replace("_", " ").strip()
    return f"{words} [{params}" if params else words


def claim_of(classname: str, name: str, root: Path = ROOT) -> str:
    """What the test guards: its docstring's first line, a notebook's title, or its name."""
    path, classes = source_of(classname, root)
    if path is not None and path.suffix == ".ipynb":
        title = _notebook_title(path)
        return f"{title} ({name})" if title else name
    if path is not None:
        function = name.split("[", 1)[0]
        doc = _docstrings(path).get(".".join([*classes, function]), "")
        if first_line(doc):
            return first_line(doc)
    return in_words(name)


def node_id(classname: str, name: str, root: Path = ROOT) -> str:
    path, classes = source_of(classname, root)
    if path is None:
        return f"{classname}::{name}"
    where = path.relative_to(root).as_posix()
    if path.suffix == ".ipynb":
        return f"{where}::{name}"
    return "::".join([where, *classes, name])


def read(xml_path: Path, root: Path = ROOT) -> tuple[Counts, list[Failure]]:
    """Counts and failures of a JUnit XML file (one ``testsuite`` or several in ``testsuites``)."""
    tree = ET.parse(xml_path)
    suites = [tree.getroot()] if tree.getroot().tag == "testsuite" else tree.getroot()
    tests = skipped = 0
    failures: list[Failure] = []
    for suite in suites:
        for case in suite.iter("testcase"):
            tests += 1
            if case.find("skipped") is not None:
                skipped += 1
            for kind in ("failure", "error"):
                for element in case.findall(kind):
                    classname, name = case.get("classname", ""), case.get("name", "")
                    failures.append(
                        Failure(
                            test=node_id(classname, name, root),
                            claim=claim_of(classname, name, root),
                            error=_error_line(element),
                            kind=kind,
                        )
                    )
    counts = Counts(
        tests=tests,
        failures=sum(f.kind == "failure" for f in failures),
        errors=sum(f.kind == "error" for f in failures),
        skipped=skipped,
    )
    return counts, failures


def versions(packages=PACKAGES) -> list[str]:
    """``name version`` of each installed distribution among ``packages``."""
    found = []
    for name in packages:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def _cell(text: str, limit: int = 300) -> str:
    """Text for one Markdown table cell: one line, pipes escaped, shortened."""
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def markdown(counts: Counts, failures: list[Failure], installed: list[str]) -> str:
    against = ", ".join(installed) or "the installed packages"
    lines = [f"## Course claims under {against}", ""]
    passed = counts.tests - counts.failures - counts.errors - counts.skipped
    lines.append(
        f"{counts.tests} tests: {passed} passed, {counts.failures} failed, "
        f"{counts.errors} errors, {counts.skipped} skipped."
    )
    lines.append("")
    if not failures:
        lines.append("Every claim the suite checks still holds.")
        return "\n".join(lines) + "\n"
    lines.append(f"{len(failures)} claims changed (or could not be checked):")
    lines.append("")
    lines.append("| Test | Claim it guards | First line of the error |")
    lines.append("|---|---|---|")
    for f in failures:
        error = f.error if f.kind == "failure" else f"(error) {f.error}"
        lines.append(f"| `{_cell(f.test, 200)}` | {_cell(f.claim)} | `{_cell(error)}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("xml", type=Path, help="pytest's --junitxml file")
    parser.add_argument("--output", type=Path, help="append the Markdown to this file")
    parser.add_argument(
        "--github",
        action="store_true",
        help="append to $GITHUB_STEP_SUMMARY and print a warning annotation when claims changed",
    )
    args = parser.parse_args(argv)
    try:
        counts, failures = read(args.xml, root)
    except (OSError, ET.ParseError) as err:
        print(f"claims_report: cannot read {args.xml}: {err}", file=sys.stderr)
        return 2
    text = markdown(counts, failures, versions())
    target = args.output
    if args.github and os.environ.get("GITHUB_STEP_SUMMARY"):
        target = Path(os.environ["GITHUB_STEP_SUMMARY"])
    if target is None:
        sys.stdout.write(text)
    else:
        with open(target, "a", encoding="utf-8") as out:
            out.write(text)
        print(f"claims_report: {len(failures)} changed claims, summary in {target}")
    if args.github and failures:
        print(f"::warning title=Course claims::{len(failures)} tests fail under the pre-releases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
