"""Tests of dtf.checks.core: verdicts, calling the learner's code, the task registry, the
scorecard and the comparison helpers. No TensorFlow is imported here; the one test that needs
autograph runs the learner's functions, written to a module file, in a fresh process.

Every test starts from an empty scorecard; tests that register tasks do it in a throw-away
copy of the registry, so the tests can run in any order.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from dtf import checks
from dtf.checks import core
from tests.answers import stub
from tests.helpers import ROOT, last_json, run_script
from tools import make_labs

pytestmark = pytest.mark.usefixtures("fresh_scorecard")  # conftest: an empty scorecard


@pytest.fixture
def registry(monkeypatch):
    """A copy of the task registry that the test may change freely."""
    copy = {lab: dict(tasks) for lab, tasks in core._registry.items()}
    monkeypatch.setattr(core, "_registry", copy)
    return copy


# --------------------------------------------------------------------------- verdicts


def test_verdict_rejects_unknown_status() -> None:
    with pytest.raises(ValueError, match="status must be one of"):
        checks.Verdict("lab01", 1, "maybe", "Task 1: maybe")


@pytest.mark.parametrize("answer", [None, Ellipsis, stub])
def test_missing_answers_are_not_attempted(answer, capsys) -> None:
    verdict = checks.check("lab01", 1, lambda: checks.call(answer), answer)
    assert verdict.status == checks.NOT_ATTEMPTED
    assert verdict.message.startswith("Task 1: not attempted")
    assert capsys.readouterr().out.strip() == verdict.message  # printed, once
    if answer is stub:
        assert "in `stub`" in verdict.message


def test_an_exception_in_the_learners_code_is_wrong_not_raised() -> None:
    def broken():
        return 1 / 0

    verdict = checks.check("lab01", 1, lambda: checks.call(broken), broken)
    assert verdict.status == checks.WRONG
    assert "`broken` raised ZeroDivisionError: division by zero" in verdict.message
    assert "Hint: Call `broken` in a new cell" in verdict.message


def test_a_stub_of_another_task_is_named() -> None:
    def uses_task_1():
        raise NotImplementedError("Task 1: write your code here")

    verdict = checks.check("lab02", 3, lambda: checks.call(uses_task_1), uses_task_1)
    assert verdict.status == checks.WRONG
    assert "calls code of Task 1" in verdict.message
    assert "Finish Task 1 first" in verdict.message
    assert "(`uses_task_1`)" not in verdict.message  # the function itself: not named twice
    # The task's own stub is "not attempted", and outside a check a stub is never "another".
    own = checks.check("lab02", 1, lambda: checks.call(uses_task_1), uses_task_1)
    assert own.status == checks.NOT_ATTEMPTED
    with pytest.raises(core._NotAttempted):
        checks.call(uses_task_1)


#: What autograph makes of an error raised while a ``tf.function`` is traced (TensorFlow 2.21):
#: the error's type, with a message that starts with a header and the frames.
AUTOGRAPH_MESSAGE = """in user code:

    File "/tmp/ipykernel_41/2713.py", line 8, in tower_step  *
        shards = split_batch(x, y, len(devices))
    File "/tmp/ipykernel_41/1012.py", line 3, in split_batch  *
        {code}

    {error}
"""


def autograph_error(kind: type, code: str, error: str) -> BaseException:
    return kind(AUTOGRAPH_MESSAGE.format(code=code, error=error))


def raises(exc: BaseException):
    def answer(*args):
        raise exc

    answer.__name__ = "tower_step"
    return answer


def test_a_stub_of_another_task_inside_a_tf_function_is_named() -> None:
    """Autograph puts the stub's message after "in user code:" and the frames: the task it
    names is found there, not only at the start."""
    stub_error = autograph_error(
        NotImplementedError,
        'raise NotImplementedError("Task 1: write your code here")',
        "NotImplementedError: Task 1: write your code here",
    )
    verdict = checks.check("lab02", 3, lambda: checks.call(raises(stub_error)))
    assert verdict.status == checks.WRONG, verdict.message
    assert "`tower_step` calls code of Task 1 (`split_batch`)" in verdict.message
    assert "Hint: Finish Task 1 first" in verdict.message
    own = checks.check("lab02", 1, lambda: checks.call(raises(stub_error)))
    assert own.status == checks.NOT_ATTEMPTED, own.message


def test_an_error_autograph_could_not_re_raise_shows_its_own_type() -> None:
    """Autograph re-raises most errors as their own type; one it cannot (a ZeroDivisionError
    in a traced step) comes as a StagingError, which says nothing to a learner: the line
    names the learner's error instead (seen in lab 05, task 4)."""

    class StagingError(Exception):  # tensorflow.python.autograph's, by name
        pass

    zero = autograph_error(StagingError, "return 1 / 0", "ZeroDivisionError: division by zero")
    assert checks.user_error_line(zero) == (
        "ZeroDivisionError: division by zero (at `return 1 / 0` in `split_batch`)"
    )
    other = StagingError("in user code:\n\n    something went wrong\n")
    assert checks.user_error_line(other).startswith("StagingError: ")


def test_error_lines_skip_what_tensorflow_wraps_around_them() -> None:
    """The learner sees the line that says what went wrong, not "in user code:"."""
    shape = autograph_error(
        ValueError,
        "return tf.matmul(x, x)",
        "ValueError: Dimensions must be equal, but are 3 and 2 for '{{node MatMul}}'.",
    )
    assert checks.user_error_line(shape) == (
        "ValueError: Dimensions must be equal, but are 3 and 2 for '{{node MatMul}}' "
        "(at `return tf.matmul(x, x)` in `split_batch`)"
    )
    verdict = checks.check("lab02", 3, lambda: checks.call(raises(shape)))
    assert "`tower_step` raised ValueError: Dimensions must be equal" in verdict.message
    assert "in user code" not in verdict.message
    graph = RuntimeError(
        "Graph execution error:\n\nDetected at node GatherV2 defined at (most recent call "
        'last):\n  File "<stdin>", line 5, in <module>\n\n  File "/tmp/x.py", line 21, in '
        "step\n\nindices = 5 is not in [0, 2)\n\t [[{{node GatherV2}}]] [Op:__inference_step]"
    )
    assert checks.user_error_line(graph) == "RuntimeError: indices = 5 is not in [0, 2)"
    eager = ValueError(
        "{{function_node __wrapped__MatMul_device_/job:localhost/replica:0/task:0/device:CPU:0}}"
        " Matrix size-incompatible: In[0]: [2,2], In[1]: [3,3] [Op:MatMul] name: "
    )
    assert checks.user_error_line(eager) == (
        "ValueError: Matrix size-incompatible: In[0]: [2,2], In[1]: [3,3] [Op:MatMul]"
    )
    assert checks.user_error_line(KeyError("surprise")) == "KeyError: 'surprise'"
    verdict = checks.check("lab01", 2, lambda: (_ for _ in ()).throw(shape))
    assert "could not be checked (ValueError: Dimensions must be equal" in verdict.message


def test_a_not_implemented_error_that_is_no_stub_is_wrong() -> None:
    """NumPy on a symbolic tensor raises NotImplementedError: the learner did attempt it."""
    numpy_error = autograph_error(
        NotImplementedError,
        "return np.mean(x)",
        "NotImplementedError: Cannot convert a symbolic tf.Tensor (x:0) to a numpy array.",
    )
    verdict = checks.check("lab02", 3, lambda: checks.call(raises(numpy_error)))
    assert verdict.status == checks.WRONG, verdict.message
    assert "raised NotImplementedError: Cannot convert a symbolic tf.Tensor" in verdict.message
    assert "Hint: Inside a tf.function, tensors have no values yet" in verdict.message
    bare = autograph_error(
        NotImplementedError, "raise NotImplementedError", "NotImplementedError: "
    )
    assert checks.check("lab02", 3, lambda: checks.call(raises(bare))).status == (
        checks.NOT_ATTEMPTED
    )


#: Functions of a learner's lab, written to a module file so that autograph can read their
#: source and convert them, as it does for the functions a notebook cell defines.
LEARNER_MODULE = """
import numpy as np
import tensorflow as tf


def split_batch(x, y, num_towers):
    raise NotImplementedError("Task 1: write your code here")


@tf.function
def tower_step(x):
    shards = split_batch(x, x, 2)
    return x


@tf.function
def own_stub(x):
    raise NotImplementedError("Task 3: write your code here")


@tf.function
def shape_bug(x):
    return tf.matmul(x, x)


@tf.function
def numpy_bug(x):
    return np.mean(x)
"""

AUTOGRAPH_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import tensorflow as tf
import learner
from dtf import checks

x = tf.ones((2, 3))
out = {}
for name in ("tower_step", "own_stub", "shape_bug", "numpy_bug"):
    function = getattr(learner, name)
    try:
        function(x)
    except Exception as exc:
        out[name + ":raw"] = str(exc)
    out[name] = checks.check("lab02", 3, lambda: checks.call(function, x), function).message
print(json.dumps(out))
"""


@pytest.mark.slow
def test_stubs_and_errors_inside_autograph_converted_functions(tmp_path) -> None:
    """A task that calls an unfinished task from inside a tf.function (autograph-converted,
    as in a notebook) names the unfinished task; the errors shown skip "in user code:"."""
    (tmp_path / "learner.py").write_text(LEARNER_MODULE, encoding="utf-8")
    proc = run_script(
        f"import sys; sys.argv[1:] = [{str(tmp_path)!r}]\n" + AUTOGRAPH_SCRIPT,
        timeout=180,
        forked=True,
    )
    out = last_json(proc)
    for name in ("tower_step", "own_stub", "shape_bug", "numpy_bug"):
        # The precondition of the test: autograph converted the function and wrapped its error.
        assert out[f"{name}:raw"].startswith("in user code:"), out[f"{name}:raw"]
    assert out["tower_step"] == (
        "Task 3: wrong: `tower_step` calls code of Task 1 (`split_batch`), which still raises "
        "NotImplementedError. Hint: Finish Task 1 first, run its cell, then this one again."
    )
    assert out["own_stub"].startswith("Task 3: not attempted (replace")
    assert out["shape_bug"].startswith(
        "Task 3: wrong: `shape_bug` raised ValueError: Dimensions must be equal"
    )
    assert "(at `return tf.matmul(x, x)` in `shape_bug`)" in out["shape_bug"]
    assert "in user code" not in out["shape_bug"] + out["numpy_bug"]
    assert "raised NotImplementedError: Cannot convert a symbolic tf.Tensor" in out["numpy_bug"]


def test_an_unforeseen_answer_is_wrong_not_raised() -> None:
    def body():
        raise KeyError("surprise")

    verdict = checks.check("lab01", 2, body)
    assert verdict.status == checks.WRONG
    assert "could not be checked (KeyError: 'surprise')" in verdict.message


def test_plain_values_are_accepted_and_functions_required_where_needed() -> None:
    assert checks.call({"a": 1}) == {"a": 1}
    verdict = checks.check("lab02", 1, lambda: checks.call_function([1, 2]))
    assert verdict.status == checks.WRONG
    assert "expected a function, got [1, 2]" in verdict.message


def test_message_format() -> None:
    def body():
        raise checks.Wrong("expected 1, got 2", "try harder")

    assert (
        checks.check("lab01", 3, body).message
        == "Task 3: wrong: expected 1, got 2. Hint: Try harder."
    )
    assert checks.check("lab01", 3, lambda: None).message == "Task 3: correct"
    assert checks.check("lab01", 3, lambda: "all good").message == "Task 3: correct. All good."


def test_the_same_answer_gives_the_same_verdict() -> None:
    calls = []

    def answer():
        calls.append(1)
        return 42

    def body():
        checks.expect_equal(41, checks.call(answer), what="the answer", hint="one less")

    first, second = (checks.check("lab01", 1, body, answer) for _ in range(2))
    assert first == second and len(calls) == 2


def test_expect_equal_and_expected_got() -> None:
    checks.expect_equal([1, 3], [1, 3])
    with pytest.raises(checks.Wrong) as info:
        checks.expect_equal([1, 3], [3, 1], what="the order", hint="h")
    assert info.value.detail == "for the order: expected [1, 3], got [3, 1]"
    assert info.value.hint == "h"
    with pytest.raises(checks.Wrong):  # comparing arrays of other shapes does not raise
        checks.expect_equal(np.zeros(2), np.zeros(3))


def test_expect_close_messages() -> None:
    assert checks.expect_close([1.0, 2.0], np.array([1.0, 2.0 + 1e-7]), atol=1e-6) < 1e-6
    with pytest.raises(checks.Wrong, match=r"expected shape \(2, 2\), got shape \(4,\)"):
        checks.expect_close(np.zeros((2, 2)), np.zeros(4))
    with pytest.raises(checks.Wrong) as info:
        checks.expect_close([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.5]], what="w")
    detail = info.value.detail
    assert detail.startswith("for w: expected array of shape (2, 2)")
    assert "largest difference is 0.5 at index (1, 1) (expected 4, got 4.5" in detail
    with pytest.raises(checks.Wrong, match="largest difference is inf"):
        checks.expect_close([1.0], [float("nan")])
    with pytest.raises(checks.Wrong, match="expected numbers, got 'abc'"):
        checks.expect_close([1.0], "abc")
    assert checks.expect_close([], []) == 0.0


def test_short_descriptions() -> None:
    assert checks.short(np.arange(10, dtype=np.int32)).startswith(
        "array of shape (10,) (int32) [0, 1, 2, 3, 4, 5, ...]"
    )
    long = checks.short(list(range(1000)))
    assert len(long) == 160 and long.endswith("…")
    assert "\n" not in checks.short({"a": "x\ny"})


def test_device_names_and_placement_tables() -> None:
    class Setup:
        names = ("/device:CPU:0", "/device:CPU:1")

    assert core.device_names(Setup()) == ["/device:CPU:0", "/device:CPU:1"]
    assert core.device_names(["a"]) == ["a"]
    with pytest.raises(TypeError, match="DeviceSetup"):
        core.device_names("/device:CPU:0")
    pd = pytest.importorskip("pandas")
    table = pd.DataFrame({"op_type": ["MatMul", "AddV2", "MatMul"], "device": ["b", "a", "b"]})
    assert core.placement_table(table) is table
    assert core.devices_of(table, ["MatMul"]) == ["b"]
    with pytest.raises(checks.Wrong, match="expected the placement table"):
        core.placement_table("table")


# --------------------------------------------------------------------------- registry


def test_the_task_decorator_registers_a_checker(registry, capsys) -> None:
    @checks.task("lab98", 2, optional=True)
    def second(answer, offset):
        """Checks task 2."""
        checks.expect_equal(2 + offset, checks.call(answer), what="the sum")
        return "two"

    @checks.task("lab98", 1)
    def first(answer):
        checks.call(answer)

    assert second.__name__ == "second" and second.__doc__ == "Checks task 2."
    assert list(checks.tasks("lab98")) == [1, 2]  # by number, whatever the order of definition
    assert checks.tasks("lab98")[2].optional and not checks.tasks("lab98")[1].optional
    verdict = second(lambda: 5, 3)
    assert verdict == checks.Verdict("lab98", 2, "correct", "Task 2: correct. Two.")
    assert second(lambda: 4, offset=3).message.startswith("Task 2: wrong: for the sum:")
    capsys.readouterr()
    assert checks.summary("lab98") == {1: "not attempted", 2: "wrong"}
    out = capsys.readouterr().out
    assert "Task 2 (optional): wrong" in out and "Task 1: not checked yet" in out


def test_the_registry_refuses_a_second_checker_for_a_task(registry) -> None:
    @checks.task("lab98", 1)
    def first(answer):
        pass

    def other(answer):
        pass

    with pytest.raises(ValueError, match=r"task 1 of lab98 is already checked by .*first"):
        checks.task("lab98", 1)(other)
    checks.task("lab98", 1)(first)  # the same function again (a reload) replaces it


@pytest.mark.parametrize(
    "lab, number, error, match",
    [
        ("lab1", 1, ValueError, "e.g. 'lab01'"),
        ("Lab01", 1, ValueError, "e.g. 'lab01'"),
        (1, 1, ValueError, "e.g. 'lab01'"),
        ("lab98", 0, ValueError, "at least 1"),
        ("lab98", True, TypeError, "whole number"),
        ("lab98", "1", TypeError, "whole number"),
    ],
)
def test_the_task_decorator_refuses_bad_names(registry, lab, number, error, match) -> None:
    with pytest.raises(error, match=match):
        checks.task(lab, number)


def test_labs_are_known_by_their_modules() -> None:
    assert {"lab01", "lab02"} <= set(checks.known_labs())
    assert list(checks.tasks("lab01")) == [1, 2, 3, 4, 5]
    assert [t.optional for t in checks.tasks("lab01").values()] == [False] * 4 + [True]
    assert checks.tasks("lab01")[1].checker is checks.lab01.task1
    assert list(checks.tasks("lab02")) == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="unknown lab 'lab99'; known: lab01, lab02"):
        checks.summary("lab99")
    with pytest.raises(ValueError, match="unknown lab"):
        checks.assert_all_correct("lab99")


def test_a_lab_module_is_imported_when_its_tasks_are_asked_for(registry, monkeypatch) -> None:
    # As if dtf/checks/__init__.py did not import lab02: asking for its tasks imports it.
    registry.pop("lab02")
    monkeypatch.delitem(sys.modules, "dtf.checks.lab02")
    monkeypatch.setattr(checks, "lab02", checks.lab02)  # the import rebinds the attribute
    assert list(checks.tasks("lab02")) == [1, 2, 3, 4]
    assert registry["lab02"][3].source == "dtf.checks.lab02.task3"


# --------------------------------------------------------------------------- scorecard


def test_summary_and_assert_all_correct(capsys) -> None:
    with pytest.raises(AssertionError, match="Task 1: not checked"):
        checks.assert_all_correct("lab02")
    checks.check("lab02", 1, lambda: None)
    checks.check("lab02", 2, lambda: checks.call(None))
    capsys.readouterr()
    statuses = checks.summary("lab02")
    out = capsys.readouterr().out
    assert statuses == {1: "correct", 2: "not attempted", 3: "not attempted", 4: "not attempted"}
    assert out.splitlines()[0] == "lab02: 1 of 4 tasks correct"
    assert "Task 3: not checked yet" in out
    with pytest.raises(AssertionError, match="Task 2: not attempted"):
        checks.assert_all_correct("lab02")
    checks.check("lab02", 2, lambda: None)
    checks.check("lab02", 3, lambda: None)
    checks.check("lab02", 4, lambda: None)
    checks.assert_all_correct("lab02")


def test_the_scorecard_lists_optional_tasks(capsys) -> None:
    checks.summary("lab01")
    assert "Task 5 (optional): not checked yet" in capsys.readouterr().out


def test_the_scorecard_keeps_the_latest_verdict_and_reset_forgets(capsys) -> None:
    checks.check("lab02", 1, lambda: checks.call(None))
    checks.check("lab02", 1, lambda: None)
    checks.check("lab01", 1, lambda: None)
    assert checks.summary("lab02")[1] == "correct"
    checks.reset("lab02")
    assert checks.summary("lab02")[1] == "not attempted"
    assert checks.summary("lab01")[1] == "correct"  # other labs keep theirs


# --------------------------------------------------------------------------- imports


def test_importing_checks_does_not_import_tensorflow() -> None:
    code = (
        "import sys, dtf.checks; from dtf.checks import lab01, lab02; "
        "sys.exit('tensorflow' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60)
    assert proc.returncode == 0


def test_stub_message_matches_the_generator() -> None:
    stub_line = make_labs.STUB.format(task=7)
    assert core.STUB_MESSAGE.match(stub_line[len('raise NotImplementedError("') :])


# --------------------------------------------------------------------------- references

#: Answers, in a notebook's namespace of their own, that reach (or do not) the course's code.
ANSWERS = """
import dtf
from dtf import towers
from dtf.lessons import worker_program
from dtf.towers import split_batch as renamed


def by_module(x, y, n):
    return towers.split_batch(x, y, n)


def renamed_import(x, y, n):
    return renamed(x, y, n)


def own(x, y, n):
    return list(zip(x, y))


def uses_own(x, y, n):
    return own(x, y, n)


def other_function(x, y, n):
    return towers.mlp_logits(x, y)


def skipped_after(x, y, g, seed, r):
    return worker_program.global_batches(x, y, g, seed).skip(r)


def skip_keyword(x, y, g, seed, r):
    return worker_program.global_batches(x, y, g, seed, skip=r)


def skip_position(x, y, g, seed, r):
    return worker_program.global_batches(x, y, g, seed, r)


def dotted(x):
    return dtf.cluster.spec.tf_config(x, 1)


def helper(x, y, n):
    return towers.split_batch(x, y, n)


def through_a_helper(p, x, y, devices, lr):
    def inner():
        return helper(x, y, len(devices))

    return inner()


def local_import(v, i):
    from dtf.deploy import expand_tf_config as expand

    return expand(v, i)


def local_module(v, i):
    import dtf.deploy

    return dtf.deploy.expand_tf_config(v, i)
"""

REFERENCES = (
    "dtf.towers.split_batch",
    "dtf.lessons.worker_program.global_batches(skip)",
    "dtf.cluster.spec.tf_config",
    "dtf.deploy.expand_tf_config",
)


@pytest.fixture(scope="module")
def answers():
    import linecache

    linecache.cache["<answers>"] = (len(ANSWERS), None, ANSWERS.splitlines(True), "<answers>")
    namespace: dict = {}
    exec(compile(ANSWERS, "<answers>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    "name, found",
    [
        ("by_module", "calls `dtf.towers.split_batch`"),
        ("renamed_import", "calls `dtf.towers.split_batch`"),
        ("own", None),
        ("uses_own", None),
        ("other_function", None),
        ("skipped_after", None),  # the stream, skipped by the answer: the lab's solution
        ("skip_keyword", "calls `dtf.lessons.worker_program.global_batches` with `skip`"),
        ("skip_position", "calls `dtf.lessons.worker_program.global_batches` with `skip`"),
        ("dotted", "calls `dtf.cluster.spec.tf_config`"),
        ("through_a_helper", "calls `dtf.towers.split_batch` (through `helper`)"),
        ("local_import", "calls `dtf.deploy.expand_tf_config`"),
        ("local_module", "calls `dtf.deploy.expand_tf_config`"),
    ],
)
def test_reference_reached_reads_the_answer_s_code(answers, name, found) -> None:
    assert core.reference_reached(answers[name], REFERENCES) == found


def test_the_reference_itself_and_a_tf_function_of_it_are_found(answers) -> None:
    from dtf import towers

    assert core.reference_reached(towers.split_batch, REFERENCES) == "is `dtf.towers.split_batch`"
    assert core.reference_reached(lambda x: towers.split_batch(x, x, 1), REFERENCES)
    assert core.reference_reached({"not": "a function"}, REFERENCES) is None
    assert core.reference_reached(answers["by_module"], ()) is None


def test_a_task_refuses_an_answer_that_calls_its_reference(registry, answers) -> None:
    ran = []

    @checks.task("lab98", 1, references=("dtf.towers.split_batch",))
    def first(answer):
        ran.append(answer)
        return "fine"

    verdict = first(answers["by_module"])
    assert verdict.message == (
        "Task 1: wrong: `by_module` calls `dtf.towers.split_batch`, the course's own code for "
        "this task. Hint: The task asks you to write it yourself: the checker compares your "
        "answer with that code, so calling it proves nothing."
    )
    assert not ran  # refused before the answer or the checker ran
    assert first(answers["own"]).correct and ran == [answers["own"]]
    with pytest.raises(ValueError, match="a reference is 'module.name'"):
        checks.task("lab98", 2, references=("split_batch",))


def test_expect_kind_and_call_function_hints() -> None:
    assert core.expect_kind((1, 2), (tuple, list), "a pair", size=2) == (1, 2)
    with pytest.raises(checks.Wrong, match=r"^for step 1: expected a pair, got \(1,\)$"):
        core.expect_kind((1,), (tuple, list), "a pair", size=2, what="step 1")

    class Thing:
        pass

    def raises(x):
        raise ValueError(f"no {Thing()} here")  # an address in the message

    with pytest.raises(checks.Wrong) as info:
        core.call_function(raises, 1, hints=(("no .* here", "look at x"),), where="call 1")
    assert info.value.hint == "look at x" and " at 0x" not in info.value.detail
    assert info.value.detail.startswith("for call 1: `raises` raised ValueError")


def test_diagnose_raises_the_first_mistake_that_holds():
    from dtf.checks.core import Mistake, Wrong, diagnose

    table = [
        Mistake(lambda got, want: got == 2 * want, "got {got}, twice {want}", "counted twice"),
        Mistake(lambda got, want: got > want, "got {got}, above {want}", "too many"),
    ]
    with pytest.raises(Wrong) as raised:
        diagnose(table, got=8, want=4)
    assert (raised.value.detail, raised.value.hint) == ("got 8, twice 4", "counted twice")
    with pytest.raises(Wrong) as raised:
        diagnose(table, got=5, want=4)
    assert raised.value.hint == "too many"
    diagnose(table, got=3, want=4)  # no mistake and no fallback: nothing raised
    with pytest.raises(Wrong) as raised:
        diagnose(table, "expected {want}, got {got}", got=3, want=4)
    assert (raised.value.detail, raised.value.hint) == ("expected 4, got 3", None)
    shown = Mistake(lambda **_: True, hint="a hint only")  # the detail defaults to "{shown}"
    with pytest.raises(Wrong) as raised:
        diagnose([shown], shown="expected 4, got 3")
    assert (raised.value.detail, raised.value.hint) == ("expected 4, got 3", "a hint only")


def test_expect_number_says_which_way_a_value_is_not_one_number():
    assert core.expect_number(np.float32(1.5), "no number") == 1.5
    with pytest.raises(checks.Wrong) as raised:
        core.expect_number("abc", "no number", "a hint")
    assert (raised.value.detail, raised.value.hint) == ("no number", "a hint")
    with pytest.raises(checks.Wrong) as raised:
        core.expect_number([1.0], "no number", "a hint")  # another shape, no text of its own
    assert (raised.value.detail, raised.value.hint) == ("no number", "a hint")
    with pytest.raises(checks.Wrong) as raised:
        core.expect_number([1.0, 2.0], "no number", shape_detail="shape {shape}", shape_hint="h")
    assert (raised.value.detail, raised.value.hint) == ("shape (2,)", "h")


def test_all_close_and_counted():
    assert core.all_close([np.zeros(2)], [np.full(2, 1e-5)])
    assert not core.all_close([np.zeros(2)], [np.full(2, 1e-5)], 0, 0)  # 0, 0: equal
    assert not core.all_close([np.zeros(2)], [np.zeros(2), np.zeros(2)])  # not as many
    assert not core.all_close([np.zeros(2)], [np.zeros((2, 1))])  # another shape
    assert (core.counted(1, "replica"), core.counted(4, "replica")) == ("1 replica", "4 replicas")
