"""Shared test helpers have one home, tests/helpers.py; tests/conftest.py is pytest's plugin.

Before issue 27, 37 modules imported ROOT, run_script and friends from conftest.py, which
mixed the suite's hooks with plain functions and defined ``stub`` a second time."""

import ast

from tests.helpers import ROOT

SOURCES = sorted((ROOT / "tests").rglob("*.py")) + sorted((ROOT / "tools").rglob("*.py"))


def _imports_conftest(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        module = node.module or ""
        return module == "tests.conftest" or (node.level > 0 and module == "conftest")
    if isinstance(node, ast.Import):
        return any(alias.name == "tests.conftest" for alias in node.names)
    return False


def test_no_module_imports_from_conftest():
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if _imports_conftest(node)
    ]
    assert not offenders, "import these from tests.helpers instead:\n" + "\n".join(offenders)


def test_conftest_defines_only_hooks_and_fixtures():
    """A public function in conftest.py is a ``pytest_*`` hook or a fixture: any other
    belongs in tests/helpers.py, where test modules can import it."""
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text(encoding="utf-8"))
    others = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and not node.name.startswith(("pytest_", "_"))
        and not any("fixture" in ast.unparse(d) for d in node.decorator_list)
    ]
    assert not others, f"move to tests/helpers.py: {others}"
