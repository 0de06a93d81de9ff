"""``dtf.params``: a bad notebook parameter is refused in the first code cell after the
parameters, naming the parameter, its range and what it means (issue 26).

The rules themselves, each kind on good and bad values; then the notebooks: every parameter
of every tutorial and lab solution has a rule, its default passes, the check stands first in
the cell after the parameters, and no notebook reuses a parameter's name for something else
(re-running the check cell after later cells must check the same values). Last, a real
kernel: papermill's injected bad value stops the run in that cell, with the message.
"""

from __future__ import annotations

import ast
import json

import numpy as np
import pytest

from dtf import params
from dtf.params import ParameterError, Rule

from .helpers import ROOT, notebook

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOLUTIONS = sorted((ROOT / "labs" / "solutions").glob("*.ipynb"))
ALL = NOTEBOOKS + SOLUTIONS


def refused(namespace: dict, **rules) -> list[str]:
    """The problem lines of ``check``, which must refuse ``namespace``."""
    with pytest.raises(ParameterError) as caught:
        params.check(namespace, **rules)
    message = str(caught.value)
    assert message.splitlines()[:-1] == caught.value.problems
    assert "parameters cell" in message.splitlines()[-1] and "-p NAME VALUE" in message
    return caught.value.problems


# --------------------------------------------------------------------------- the issue's cases


def test_the_issue_s_examples_name_the_parameter_its_range_and_meaning():
    (line,) = refused({"NUM_DEVICES": 0, "SEED": 42})
    assert line.startswith("NUM_DEVICES=0: choose a whole number from 1 to 8 (the logical")
    (line,) = refused({"NUM_DEVICES": 2, "PER_DEVICE_BATCH": 0})
    assert line.startswith("PER_DEVICE_BATCH=0: choose a whole number of at least 1 (examples")
    (line,) = refused({"NUM_WORKERS": 0})
    assert line.startswith("NUM_WORKERS=0: choose a whole number from 1 to 8 (the worker")


def test_good_defaults_pass_and_unknown_names_are_left_alone():
    params.check({"NUM_DEVICES": 4, "SEED": 42, "EPOCHS": 3, "In": [], "_": None, "x": -1})
    params.check({})


def test_every_bad_parameter_is_reported_in_the_cell_s_order():
    problems = refused({"SEED": -1, "NUM_DEVICES": 9, "EPOCHS": 2})
    assert [p.split("=")[0] for p in problems] == ["SEED", "NUM_DEVICES"]
    with pytest.raises(ParameterError, match="Change them in the parameters cell"):
        params.check({"SEED": -1, "NUM_DEVICES": 9})


# --------------------------------------------------------------------------- kinds


@pytest.mark.parametrize("value", [4, np.int64(4), 1, 8])
def test_whole_numbers_accept_python_and_numpy_integers(value):
    params.check({"NUM_DEVICES": value})


@pytest.mark.parametrize("value", [0, 9, -1, 2.0, True, "4", None, [4]])
def test_whole_numbers_refuse_out_of_range_floats_bools_and_text(value):
    (line,) = refused({"NUM_DEVICES": value})
    assert line.startswith(f"NUM_DEVICES={value!r}: choose a whole number from 1 to 8")


def test_open_ranges_and_large_bounds_read_as_numbers():
    (line,) = refused({"SEED": 2**32})
    assert "from 0 to 4294967294" in line  # not 4.29497e+09
    (line,) = refused({"EPOCHS": 0})
    assert "choose a whole number of at least 1 (" in line


@pytest.mark.parametrize("value", [0, -1.5, float("nan"), float("inf"), True, "60"])
def test_positive_numbers(value):
    params.check({"READY_TIMEOUT_S": 0.5, "LEARNING_RATE": 1e-3, "WEIGHT_TOL": 1})
    (line,) = refused({"READY_TIMEOUT_S": value})
    assert "choose a number above 0 (seconds the processes may take to start)" in line


def test_booleans_choices_and_lists():
    params.check({"FREE_PORTS": False, "OPEN_TENSORBOARD": True, "MODEL_SHARDS": 4})
    assert "choose True or False" in refused({"FREE_PORTS": 1})[0]
    assert "choose one of 1, 2, 4, 8" in refused({"MODEL_SHARDS": 3})[0]
    assert "choose one of 1, 2, 4, 8" in refused({"MODEL_SHARDS": True})[0]
    assert "choose one of 1, 2, 4, 8" in refused({"MODEL_SHARDS": 2.0})[0]
    params.check({"DATASET": "digits"})
    params.check({"DATASET": "Fashion-MNIST"})  # as dtf.data.load reads it
    assert "choose one of 'digits', 'mnist'" in refused({"DATASET": "imagenet"})[0]
    params.check({"PER_DEVICE_BATCHES": [64, np.int64(256)], "FILE_RECORDS": (8,)})
    for bad in ([], [64, 0], 64, "64", [64.0]):
        (line,) = refused({"PER_DEVICE_BATCHES": bad})
        assert "choose a list of one or more whole numbers, each at least 1 (" in line
    params.check({"CHILD_MASKS": [None, "1", ""]})
    assert "CUDA_VISIBLE_DEVICES values" in refused({"CHILD_MASKS": [None, 1]})[0]
    assert "CUDA_VISIBLE_DEVICES values" in refused({"CHILD_MASKS": "0,1"})[0]


def test_files_are_found_from_the_notebook_s_folder_or_above(tmp_path, monkeypatch):
    (tmp_path / "clusters").mkdir()
    (tmp_path / "clusters" / "c.json").write_text("{}")
    (tmp_path / "labs").mkdir()
    monkeypatch.chdir(tmp_path / "labs")
    params.check({"CLUSTER_FILE": "clusters/c.json"})  # lab 07: from the course's folder
    params.check({"CLUSTER_FILE": "../clusters/c.json"})  # the tutorials: from notebooks/
    params.check({"CLUSTER_FILE": tmp_path / "clusters" / "c.json"})
    for bad in ("clusters/nope.json", "", 3, str(tmp_path / "nope.json")):
        (line,) = refused({"CLUSTER_FILE": bad})
        assert "choose the path of a file that exists" in line


def test_deployment_names_follow_dtf_deploy():
    params.check({"NAME": "dtf-cluster", "PORT": 2222})
    for bad in ("Bad_Name", "", "x" * 41, "1job", None):
        assert "at most 40 characters" in refused({"NAME": bad})[0]
    assert "from 1 to 65535" in refused({"PORT": 0})[0]


# --------------------------------------------------------------------------- bounds and own rules


def test_a_bound_can_be_another_parameter():
    params.check({"STEPS": 40, "FAIL_AT_STEP": 39})
    (line,) = refused({"STEPS": 40, "FAIL_AT_STEP": 40})
    assert line.startswith("FAIL_AT_STEP=40: choose a whole number from 1 to 39 (STEPS - 1) (")
    params.check({"FAIL_AT_STEP": 1000})  # RULES' bound: only where STEPS is a parameter too
    # A bad STEPS is reported once, not as a broken bound of FAIL_AT_STEP.
    (line,) = refused({"STEPS": "40", "FAIL_AT_STEP": 5})
    assert line.startswith("STEPS='40'")
    (line,) = refused({"REPEATS": 5, "TIMING_STEPS": 4})
    assert "choose a whole number of at least 5 (REPEATS)" in line


def test_a_notebook_s_own_range_replaces_the_course_s():
    own = {"NUM_WORKERS": (2, 8)}
    params.check({"NUM_WORKERS": 2}, **own)
    (line,) = refused({"NUM_WORKERS": 1}, **own)
    assert line.startswith("NUM_WORKERS=1: choose a whole number from 2 to 8 (the worker")
    spec = {"NUM_WORKERS": 3, "FILE_RECORDS": [8, 12]}
    (line,) = refused(spec, NUM_WORKERS=(2, "len(FILE_RECORDS)"))
    assert "from 2 to 2 (len(FILE_RECORDS))" in line
    units = {"HIDDEN_UNITS": (256, 256)}
    params.check(units, HIDDEN_UNITS=params.wholes(1))
    assert "choose a whole number of at least 1" in refused(units)[0]
    assert (
        "each at least 1 (units of each hidden layer)"
        in refused({"HIDDEN_UNITS": 256}, HIDDEN_UNITS=params.wholes(1))[0]
    )
    rule = Rule("whole", 0, 3, meaning="my own")
    assert refused({"MINE": 4}, MINE=rule) == [
        "MINE=4: choose a whole number from 0 to 3 (my own)."
    ]


def test_mistakes_in_the_check_line_itself_are_type_errors():
    with pytest.raises(TypeError, match="NUM_WORKERS has a rule here but is not a parameter"):
        params.check({}, NUM_WORKERS=(2, 8))
    with pytest.raises(TypeError, match=r"takes \(low, high\)"):
        params.check({"MINE": 1}, MINE=(1, 2))  # not in RULES: needs a Rule
    with pytest.raises(TypeError, match="names STEPS, which is not a parameter here"):
        params.check({"FAIL_AT_STEP": 5}, FAIL_AT_STEP=(1, "STEPS - 1"))
    with pytest.raises(ValueError, match="only names, numbers"):
        params.check({"STEPS": 4, "FAIL_AT_STEP": 1}, FAIL_AT_STEP=(1, "__import__('os')"))
    with pytest.raises(ValueError, match="unknown kind"):
        Rule("integer")


def test_a_batch_taken_from_the_digits_fits_in_them():
    from dtf import data

    assert params.DIGITS_TRAIN == len(data.load("digits").x_train)
    params.check({"BATCH": params.DIGITS_TRAIN})
    assert "from 1 to 1437 (examples per step" in refused({"BATCH": 1438})[0]


def test_importing_params_imports_no_tensorflow_keras_or_jax():
    from .helpers import run_script

    proc = run_script(
        "import sys\nfrom dtf import params\n"
        "params.check({'NAME': 'x', 'DATASET': 'digits', 'NUM_DEVICES': 2})\n"
        "print(sorted(m for m in ('tensorflow', 'keras', 'jax') if m in sys.modules))",
        timeout=60,
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]"


# --------------------------------------------------------------------------- the notebooks


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell) -> str:
    return "".join(cell["source"])


def _parameters_index(cells) -> int:
    (index,) = [i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", [])]
    return index


def _defaults(path) -> dict:
    cells = _cells(path)
    tree = ast.parse(_source(cells[_parameters_index(cells)]))
    return {
        target.id: ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
    }


def _check_call(path) -> ast.Call | None:
    """The ``params.check(...)`` call in the first code cell after the parameters."""
    cells = _cells(path)
    start = _parameters_index(cells) + 1
    cell = next(c for c in cells[start:] if c["cell_type"] == "code")
    for node in ast.walk(ast.parse(_source(cell))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "check"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "params"
        ):
            return node
    return None


def _own_rules(call: ast.Call | None) -> dict:
    """The keywords of a notebook's check line: literals, or params.whole(s)(literals)."""
    rules = {}
    for keyword in call.keywords if call else []:
        value = keyword.value
        if isinstance(value, ast.Call):
            make = getattr(params, value.func.attr)
            rules[keyword.arg] = make(*[ast.literal_eval(a) for a in value.args])
        else:
            rules[keyword.arg] = ast.literal_eval(value)
    return rules


def _name(path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", ALL, ids=_name)
def test_every_parameter_has_a_rule_and_its_default_passes(path, monkeypatch):
    defaults = _defaults(path)
    own = _own_rules(_check_call(path))
    missing = sorted(set(defaults) - set(params.RULES) - set(own))
    assert not missing, f"no rule in dtf.params.RULES for {missing}: add one (range, meaning)"
    monkeypatch.chdir(path.parent)  # CLUSTER_FILE is relative to the notebook's folder
    params.check(defaults, **own)


@pytest.mark.parametrize("path", ALL, ids=_name)
def test_the_first_code_cell_after_the_parameters_checks_them(path):
    call = _check_call(path)
    assert call is not None, (
        "the first code cell after the parameters must call params.check(globals(), ...): "
        "a bad parameter is refused there, before any work"
    )
    (namespace,) = call.args
    assert ast.unparse(namespace) == "globals()"


#: Names of RULES that a notebook assigns outside its parameters cell, where that notebook
#: has no such parameter, and why re-running its check cell after them is still right.
REUSED = {
    # PER_REPLICA_BATCH x replicas / workers, with replicas a multiple of the workers: >= 1.
    ("notebooks/11d_input_sharding.ipynb", "PER_WORKER_BATCH"),
    # The workers of CLUSTER_FILE: two in the default file (one of more than 8 would be
    # refused when the Setup cell runs again: a name of its own would be better).
    ("notebooks/07_remote_servers.ipynb", "NUM_WORKERS"),
    # The checker's learning rate (> 0) and a fixed count of traced steps (4): constants.
    ("labs/solutions/05_mirrored_step_lab.ipynb", "LEARNING_RATE"),
    ("labs/solutions/05_mirrored_step_lab.ipynb", "TRACED_STEPS"),
}


def _assigned(source: str) -> set[str]:
    """Module-level names a cell binds (assignments, loops, with, imports, functions)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: not Python
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


@pytest.mark.parametrize("path", ALL, ids=_name)
def test_no_notebook_uses_a_parameter_s_name_for_anything_else(path):
    cells = _cells(path)
    index = _parameters_index(cells)
    own = set(_defaults(path))
    found = set()
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "code" and i != index:
            found |= _assigned(_source(cell)) & (set(params.RULES) | own)
    found -= {name for where, name in REUSED if where == _name(path)}
    assert not found, (
        f"{sorted(found)} assigned outside the parameters cell: params.check(globals()) would "
        "check that value when the cell runs again; rename it"
    )


# --------------------------------------------------------------------------- a real kernel


@pytest.mark.slow
def test_papermill_s_bad_value_stops_the_run_in_the_cell_after_the_parameters(tmp_path):
    """As ``make run -p NUM_DEVICES 0`` does: the injected value reaches the check, which
    stops the run there, before the cell's work (a file it would write) and the cells after."""
    from tools import nbrun

    nb = notebook(
        "from dtf import params\n\nparams.check(globals())\nopen('worked', 'w').close()",
        "open('later', 'w').close()",
        parameters="NUM_DEVICES = 2  # devices\nSEED = 42",
    )
    with pytest.raises(nbrun.NotebookError) as caught:
        nbrun.execute(tmp_path / "x.ipynb", nb=nb, parameters={"NUM_DEVICES": 0}, timeout=120)
    error = caught.value
    assert error.ename == "ParameterError"
    assert error.evalue.startswith("NUM_DEVICES=0: choose a whole number from 1 to 8 (")
    cells = error.nb.cells
    assert "injected-parameters" in cells[error.cell_index - 1].metadata["tags"]
    assert "params.check" in cells[error.cell_index].source
    assert not (tmp_path / "worked").exists() and not (tmp_path / "later").exists()
