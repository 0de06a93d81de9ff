"""Checkers of Lab 07 · From a cluster file to a deployment (``labs/07_deployment_lab.ipynb``).

Tasks: 1 a task's ``TF_CONFIG``, 2 what ``TFConfigClusterResolver`` reads, 3 the cluster spec
inside Kubernetes, 4 repair a hand-edited ``TFJob``, 5 (optional) an Indexed Job pod's
``TF_CONFIG``, 6 the fault of meaning in deployments that validate. A ``TF_CONFIG`` is judged
by TensorFlow itself (:func:`tensorflow_view`), the rest against :mod:`dtf.deploy` and
:mod:`dtf.cluster.spec`, on the lab's inputs and the checker's own. Imports no TensorFlow.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from unittest import mock

from dtf import deploy
from dtf._util import is_whole_number
from dtf.checks.core import (
    Mistake,
    Wrong,
    call_function,
    diagnose,
    expect_kind,
    short,
    task,
)
from dtf.cluster.spec import (
    STRATEGY_JOBS,
    ClusterConfigError,
    Task,
    all_tasks,
    load,
    strategy_jobs,
    tf_config,
)
from dtf.quiet import SETTINGS

LAB = "lab07"
#: The environment variable every tf.distribute strategy reads its cluster and task from.
TF_CONFIG = "TF_CONFIG"

#: The layout of Tasks 4 and 5: a chief, three workers and a parameter server, given as
#: counts (Kubernetes gives the pods their addresses).
LAYOUT = {"chief": 1, "worker": 3, "ps": 1}
#: Task 1: real machines, each with its own DNS name, every server on the same port.
MACHINES = {
    "chief": ["chief.cluster.internal:2222"],
    "worker": [f"worker{i}.cluster.internal:2222" for i in range(3)],
    "ps": ["ps0.cluster.internal:2222"],
}
#: Tasks 3 and 5: the checker's own deployments, ``(name, counts, port)``.
OTHER_DEPLOYMENTS = (
    ("mnist", {"chief": 1, "worker": 3, "ps": 2}, 2222),
    ("train", {"worker": 2}, 5000),
)


_SETUP_HINT = "run the Setup cell (it reads CLUSTER_FILE), then this one"
_PARAMETERS_HINT = "fix NAME or PORT in the parameters cell and run the lab from the top"


def _inputs(make, *args, what: str, fix: str, errors=(ClusterConfigError,)):
    """``make(*args)``: the checker's cases from the lab's inputs, or a :class:`Wrong` that
    says which input is wrong and what to do."""
    try:
        return make(*args)
    except errors as exc:
        raise Wrong(f"the checker cannot use {what}: {exc}", fix) from None


def course_file(relative: str | os.PathLike) -> Path:
    """``relative`` (e.g. ``clusters/host_two_workers.json``) found from the working
    directory: there, or in the first parent folder that has it. The solution
    (``labs/solutions/``) and the student lab (``labs/``) run in different folders; both
    find the course's ``clusters/`` this way."""
    path = Path(relative)
    if path.is_absolute():
        if path.is_file():
            return path
        raise FileNotFoundError(f"{str(path)!r} does not exist")
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / path).is_file():
            return folder / path
    raise FileNotFoundError(
        f"no {str(path)!r} in {here} or any folder above it: give CLUSTER_FILE as a path "
        "relative to the course's folder (clusters/host_two_workers.json) or an absolute one"
    )


# --------------------------------------------------------------------------- task 1


def task1_cases(cluster: Mapping[str, list]) -> list[tuple[str, dict[str, list[str]], Task]]:
    """``(what, cluster, task)`` for every TF_CONFIG Task 1 is checked on: the first and the
    last strategy task (chief, worker, ps, evaluator) of the lab's cluster, the chief, a worker
    and the ps of :data:`MACHINES`, and worker 2 of :data:`LAYOUT` inside Kubernetes."""
    loaded = load(cluster)
    if any(None in addresses for addresses in loaded.values()):
        raise ClusterConfigError("the lab's cluster must give every task's 'host:port'")
    jobs = {job: [a for a in addresses if a is not None] for job, addresses in loaded.items()}
    tasks = all_tasks(strategy_jobs(jobs))  # the post's host has no strategy TF_CONFIG
    cases = [("the lab's cluster", jobs, t) for t in dict.fromkeys([tasks[-1], tasks[0]])]
    cases += [
        ("machines with DNS names", MACHINES, Task(job, index))
        for job, index in (("worker", 1), ("ps", 0), ("chief", 0))
    ]
    pods = deploy.pod_dns_names(LAYOUT)
    cases.append(("the pods of a Kubernetes deployment", pods, Task("worker", 2)))
    return cases


def _parse_tf_config(got: Any, what: str) -> dict:
    if isinstance(got, Mapping):
        raise Wrong(
            f"for {what}: expected JSON text (a str), got a dict",
            "TF_CONFIG is an environment variable, and environment variables hold text: JSON "
            "text, not a dict",
        )
    if isinstance(got, bytes):
        raise Wrong(f"for {what}: expected a str, got bytes", "JSON text is a str")
    expect_kind(got, str, "JSON text (a str)", what=what)
    try:
        value = json.loads(got)
    except json.JSONDecodeError as exc:
        hint = "TF_CONFIG holds JSON text, which every TensorFlow process parses"
        try:
            if isinstance(ast.literal_eval(got), dict):
                hint = (
                    "Python's str() of a dict writes Python (single quotes, True, None), "
                    "not the JSON that every TensorFlow process parses"
                )
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
        raise Wrong(
            f"for {what}: your text is not valid JSON ({exc.msg} at column {exc.colno}): "
            f"{short(got)}",
            hint,
        ) from None
    return expect_kind(value, dict, 'a JSON object {"cluster": ..., "task": ...}', what=what)


_TASK_OBJECT_HINT = 'the task is an object of two keys: its job, "type", and its index, "index"'


def _check_task(got: Any, want: dict, what: str) -> None:
    job, index = want["type"], want["index"]
    if isinstance(got, str):
        raise Wrong(
            f'for {what}: your "task" is the text {got!r}, not an object',
            _TASK_OBJECT_HINT,
        )
    if not isinstance(got, Mapping):
        raise Wrong(f'for {what}: your "task" is {short(got)}, not an object', _TASK_OBJECT_HINT)
    if set(got) != {"type", "index"}:
        raise Wrong(
            f'for {what}: the keys of your "task" are {sorted(got)}',
            'TensorFlow reads task["type"] (the job\'s name) and task["index"]; '
            "job_name/task_index are TF1's command-line flags, not TF_CONFIG keys",
        )
    kind, number = got["type"], got["index"]
    if kind != job:
        shown = f"for {what}: your task's type is {short(kind)}"
        diagnose(TYPE_MISTAKES, shown=shown, got=kind, job=job)
    if number != index or not is_whole_number(number):  # JSON: never a NumPy integer
        shown = f"for {what}: your task's index is {short(number)}"
        diagnose(INDEX_MISTAKES, shown=shown, number=number, index=index)


def _text(value: Any) -> bool:
    return isinstance(value, str)


#: Task 1: the known wrong ``"type"`` of a task (``job``: the right one, ``got``: the answer's).
TYPE_MISTAKES = (
    Mistake(
        lambda got, job, **_: _text(got) and got.lower() == job,
        hint="{got!r} differs from the job's name only in its capitals, and TensorFlow compares "
        "job names exactly (a TFJob capitalises its replica types; a server asked for {got!r} "
        'fails: Job "{got}" was not defined in cluster)',
    ),
    Mistake(
        lambda got, **_: _text(got) and got.startswith("/job:"),
        hint="your type is a device name, not the job's name alone",
    ),
    Mistake(
        lambda **_: True,
        hint='your "type" is not the job the task belongs to: look at the `job` argument',
    ),
)
#: Task 1: the known wrong ``"index"``.
INDEX_MISTAKES = (
    Mistake(
        lambda number, index, **_: _text(number) and number.strip() == str(index),
        hint="your index is the text {number!r}, not a number: TFConfigClusterResolver "
        "happens to convert it with int(), but the server command of the course's manifests, "
        "tf.distribute.Server(..., task_index=...), refuses a str (TypeError)",
    ),
    Mistake(
        lambda number, index, **_: is_whole_number(number) and number == index + 1,
        hint="task indices start at 0: task i is the i-th address of its job's list",
    ),
    Mistake(
        lambda number, **_: isinstance(number, bool | float),
        hint="your index is {number!r}, not a whole number (an int)",
    ),
    Mistake(
        lambda **_: True,
        hint="\"index\" is the task's position in its job's list, the `index` argument",
    ),
)


#: Task 1: the known wrong ``"cluster"`` (``want``: the right one, ``job``: the task's job).
CLUSTER_MISTAKES = (
    Mistake(
        lambda got, want, job, **_: (
            isinstance(got, Mapping) and set(got) == {job} and len(want) > 1
        ),
        hint="every task gets the whole cluster, the same in every TF_CONFIG: every job and every "
        'address; only "task" differs from one task to the next',
    ),
    Mistake(
        lambda got, want, **_: (
            isinstance(got, Mapping)
            and set(got) == set(want)
            and all(
                isinstance(got[j], list) and sorted(map(str, got[j])) == sorted(want[j])
                for j in want
            )
        ),
        hint="keep each job's addresses in their order: task i is the i-th address",
    ),
    Mistake(
        lambda **_: True,
        hint='your "cluster" differs from the one you were given in more than the jobs no '
        "strategy accepts: compare it job by job, address by address",
    ),
)


def _check_cluster(got: Any, want: dict, what: str, task_: Task) -> None:
    if got != want:
        shown = f'for {what}: your "cluster" is {short(got)}'
        diagnose(CLUSTER_MISTAKES, shown=shown, got=got, want=want, job=task_.job)


class TensorFlowRefusal(Exception):
    """TensorFlow could not read a ``TF_CONFIG``, or refused it; the message is TensorFlow's."""


@contextlib.contextmanager
def tf_config_environment(text: str | None):
    """``TF_CONFIG`` set to ``text`` (absent for ``None``) for the ``with`` block, and put back
    as it was after it, whatever happens in the block."""
    old = os.environ.get(TF_CONFIG)
    if text is None:
        os.environ.pop(TF_CONFIG, None)
    else:
        os.environ[TF_CONFIG] = text
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(TF_CONFIG, None)
        else:
            os.environ[TF_CONFIG] = old


def import_tensorflow():
    """TensorFlow, quiet as the course's Setup cells make it (the lab's Setup imports it)."""
    if "tensorflow" not in sys.modules:
        for name, value in SETTINGS.items():  # a learner's own setting wins
            os.environ.setdefault(name, value)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    return tf


def tensorflow_reads(text: str | None) -> tuple[str | None, int | None, dict]:
    """``(task_type, task_id, cluster)`` as TensorFlow's ``TFConfigClusterResolver`` reads them
    with ``TF_CONFIG`` set to ``text`` (for the call only): what every ``tf.distribute``
    strategy asks it. Raises :class:`TensorFlowRefusal` with TensorFlow's message."""
    tf = import_tensorflow()
    try:
        with tf_config_environment(text):
            resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
            return resolver.task_type, resolver.task_id, resolver.cluster_spec().as_dict()
    except Exception as exc:  # noqa: BLE001 - TensorFlow's message is the verdict
        raise TensorFlowRefusal(f"{type(exc).__name__}: {exc}") from None


def tensorflow_view(text: str) -> dict:
    """What a ``tf.distribute`` program makes of the ``TF_CONFIG`` ``text``.

    ``TFConfigClusterResolver`` reads it from the environment (:func:`tensorflow_reads`);
    ``multi_worker_util._validate_cluster_spec`` checks the cluster and the task, as
    ``MultiWorkerMirroredStrategy`` and ``ParameterServerStrategy`` do when they are created;
    and for a ``chief`` or ``worker`` task, the cluster logic ``MultiWorkerMirroredStrategy``
    runs next (``worker_count``, ``id_in_cluster``, ``is_chief``). Returns ``{"type", "index",
    "cluster"}``, plus ``"workers"``, ``"id"`` and ``"chief"`` for a chief or worker task.
    Raises :class:`TensorFlowRefusal` with TensorFlow's message. Starts no server."""
    task_type, task_id, cluster = tensorflow_reads(text)
    from tensorflow.python.distribute import multi_worker_util as rules

    seen: dict[str, Any] = {"type": task_type, "index": task_id, "cluster": cluster}
    try:
        rules._validate_cluster_spec(cluster, task_type, task_id)
        if task_type in ("chief", "worker"):
            seen["workers"] = rules.worker_count(cluster, task_type)
            seen["id"] = rules.id_in_cluster(cluster, task_type, task_id)
            seen["chief"] = rules.is_chief(cluster, task_type, task_id)
    except Exception as exc:  # noqa: BLE001 - TensorFlow's message is the verdict
        message = f"{type(exc).__name__}: {exc}"
        raise TensorFlowRefusal(message.split(" and the cluster spec is")[0]) from None
    return seen


def _hint_of(check, *args) -> str | None:
    try:
        check(*args)
    except Wrong as exc:
        return exc.hint or exc.detail
    return None


def _tensorflow_check(text: str, value: dict, want: dict, where: str, task_: Task) -> dict:
    """The answer's ``TF_CONFIG`` given to TensorFlow (:func:`tensorflow_view`); a refusal is
    wrong, with TensorFlow's message and the course's hint for the mistake behind it."""
    try:
        return tensorflow_view(text)
    except TensorFlowRefusal as exc:
        refusal = str(exc)
    cluster = value["cluster"]
    hint: str | None
    if isinstance(cluster, Mapping) and not set(cluster) <= set(STRATEGY_JOBS):
        other = sorted(str(job) for job in cluster if job not in STRATEGY_JOBS)
        hint = (
            f'your "cluster" keeps {", ".join(map(repr, other))}, a job no strategy accepts '
            f"(a strategy knows only {', '.join(STRATEGY_JOBS)}; a client job such as 'host' "
            "belongs only in the ClusterSpec of plain servers)"
        )
    else:
        hint = _hint_of(_check_task, value["task"], want["task"], where) or _hint_of(
            _check_cluster, value["cluster"], want["cluster"], where, task_
        )
    raise Wrong(
        f"for {where}: TensorFlow refuses your TF_CONFIG, as every tf.distribute strategy "
        f"would: {refusal}",
        hint
        or "the task must be one of the cluster's tasks: its job, and an index below "
        "that job's number of tasks",
    )


@task(LAB, 1, references=("dtf.cluster.spec.tf_config", "dtf.deploy.tf_configs"))
def task1(answer: Any, cluster: Any) -> str:
    """``tf_config_for(cluster, job, index) -> str``: the ``TF_CONFIG`` JSON of one task,
    checked on :func:`task1_cases`: TensorFlow must read and accept it
    (:func:`tensorflow_view`), and read the task and the cluster of
    :func:`dtf.cluster.spec.tf_config`; a refusal shows TensorFlow's message and a hint."""
    cases = _inputs(task1_cases, cluster, what="the lab's cluster", fix=_SETUP_HINT)
    views: list[tuple[Task, dict]] = []
    for what, jobs, task_ in cases:
        where = f"{task_} of {what}"
        got = call_function(answer, copy.deepcopy(jobs), task_.job, task_.index)
        value = _parse_tf_config(got, where)
        want = json.loads(tf_config(jobs, task_))
        if set(value) != {"cluster", "task"}:
            tf1 = {"job_name", "task_index", "task_type", "type", "index"} & set(value)
            hint = 'a TF_CONFIG has two keys, "cluster" and "task": yours has others'
            if tf1:
                hint += f"; the task's own keys ({', '.join(sorted(tf1))}) are at its top level"
            raise Wrong(f"for {where}: your TF_CONFIG has the keys {sorted(value)}", hint)
        seen = _tensorflow_check(got, value, want, where, task_)
        _check_task(value["task"], want["task"], where)  # the index a number, as JSON
        if (seen["type"], seen["index"]) != (task_.job, task_.index):
            raise Wrong(
                f"for {where}: TensorFlow reads your TF_CONFIG as the task "
                f"{seen['type']}/{seen['index']}, not the one asked for",
                'look at the job and the index your "task" holds',
            )
        _check_cluster(seen["cluster"], want["cluster"], where, task_)
        views.append((task_, seen))
    clusters = len(dict.fromkeys(what for what, _, _ in cases))
    task_, seen = views[0]
    role = "the chief" if seen.get("chief") else f"not the chief, worker id {seen.get('id')}"
    return (
        f"{len(cases)} tasks of {clusters} clusters: TensorFlow's TFConfigClusterResolver reads "
        "from each TF_CONFIG the task and the cluster that task must see, and TensorFlow "
        f"accepts it; for {task_} of the lab's cluster, MultiWorkerMirroredStrategy would count "
        f"{seen.get('workers')} workers, this one {role}"
    )


# --------------------------------------------------------------------------- task 2

#: What ``TF_CONFIG`` holds while Task 2's answer is called: absent, or another task's text.
OTHER_TF_CONFIG = json.dumps(
    {
        "cluster": {"worker": ["elsewhere:2222", "elsewhere:2223"]},
        "task": {"type": "worker", "index": 1},
    }
)


def task2_cases(cluster: Mapping[str, list]) -> list[tuple[str, str, str | None]]:
    """``(what, TF_CONFIG text, TF_CONFIG before the call)``: the texts of
    :func:`dtf.cluster.spec.tf_config` for Task 1's tasks, each called once with
    ``TF_CONFIG`` absent and, for the first, once more with it set to :data:`OTHER_TF_CONFIG`."""
    texts = [(f"{t} of {what}", tf_config(jobs, t)) for what, jobs, t in task1_cases(cluster)]
    cases: list[tuple[str, str, str | None]] = [(what, text, None) for what, text in texts]
    what, text = texts[0]
    cases.append((f"{what}, with TF_CONFIG already set", text, OTHER_TF_CONFIG))
    return cases


#: Task 2: the known wrong readings (``before``: TF_CONFIG before the call, or None).
READS_MISTAKES = (
    Mistake(
        lambda got, before, **_: before is not None and got == tensorflow_reads(before),
        hint="that is what the TF_CONFIG already set before your function holds: what does the "
        "environment hold when the resolver is asked?",
    ),
    Mistake(
        lambda got, **_: got == (None, None, {}),
        hint="the resolver found no TF_CONFIG: it reads the environment variable when asked, and "
        "takes no TF_CONFIG argument",
    ),
    Mistake(
        lambda got, **_: (
            isinstance(got, tuple) and len(got) == 3 and not isinstance(got[2], Mapping)
        ),
        hint="your cluster is not a dict, and the task asks for the cluster as a dict",
    ),
    Mistake(
        lambda **_: True,
        hint="the three things the resolver answers, in the task's order, asked while TF_CONFIG "
        "holds tf_config",
    ),
)


def _counting_reads():
    """A mock that counts how often ``TFConfigClusterResolver`` reads ``TF_CONFIG`` (its
    module's ``_load_tf_config``, behind every question to it); counts 1 where it is gone."""
    from tensorflow.python.distribute.cluster_resolver import tfconfig_cluster_resolver as m

    if not hasattr(m, "_load_tf_config"):  # another TensorFlow: nothing to count
        return contextlib.nullcontext(mock.Mock(call_count=1))
    return mock.patch.object(m, "_load_tf_config", wraps=m._load_tf_config)


@task(LAB, 2, references=("dtf.checks.lab07.tensorflow_reads", "dtf.checks.lab07.tensorflow_view"))
def task2(answer: Any, cluster: Any) -> str:
    """``tensorflow_reads(tf_config) -> (task_type, task_id, cluster dict)``: what TensorFlow's
    ``TFConfigClusterResolver`` reads with ``TF_CONFIG`` set to ``tf_config`` for the call
    only. Checked on :func:`task2_cases` against the resolver's own answer
    (:func:`tensorflow_reads`); the answer must have asked the resolver (it read
    ``TF_CONFIG`` during the call, :func:`_counting_reads`); ``TF_CONFIG`` must be as before
    after every call."""
    cases = _inputs(task2_cases, cluster, what="the lab's cluster", fix=_SETUP_HINT)
    for what, text, before in cases:
        want = tensorflow_reads(text)
        with tf_config_environment(before), _counting_reads() as reads:
            got = call_function(answer, text)
            after = os.environ.get(TF_CONFIG)
        if after != before:
            was = "absent" if before is None else "another task's TF_CONFIG"
            raise Wrong(
                f"for {what}: TF_CONFIG was {was} before your function and "
                f"{'absent' if after is None else short(after)} after it",
                "TF_CONFIG must be as it was, also when the resolver raises: every strategy "
                "this process creates later reads it too",
            )
        if isinstance(got, list):
            got = tuple(got)
        if got != want:
            shown = f"for {what}: your function returned {short(got)}"
            diagnose(READS_MISTAKES, shown=shown, got=got, before=before)
        if reads.call_count == 0:
            raise Wrong(
                f"for {what}: your function read the text itself and never asked TensorFlow's "
                "TFConfigClusterResolver, so it says what you think TensorFlow reads",
                "the task asks what TensorFlow's resolver reads: ask it",
            )
    what, text, _ = cases[0]
    task_type, task_id, jobs = tensorflow_reads(text)
    return (
        f"{len(cases)} TF_CONFIGs read as TensorFlow reads them, TF_CONFIG left as it was; "
        f"for {what}: task_type {task_type!r}, task_id {task_id}, jobs {sorted(jobs)}"
    )


# --------------------------------------------------------------------------- task 3


def task3_cases(name: str, counts: Mapping[str, int], port: int) -> list[tuple[str, dict, int]]:
    """``(name, counts, port)`` of the deployments Task 3 is checked on: the lab's, then
    :data:`OTHER_DEPLOYMENTS` (one with a ``ps`` job)."""
    cases = [(name, dict(counts), port), *((n, dict(c), p) for n, c, p in OTHER_DEPLOYMENTS)]
    unique: list[tuple[str, dict, int]] = []
    for case in cases:
        if case not in unique:
            unique.append(case)
    return unique


def _address_hint(got: Any, name: str, job: str, index: int, port: int) -> str:
    pod = f"{name}-{job}-{index}"
    if not isinstance(got, str):
        return "each address is text, 'host:port'"
    host, sep, port_text = got.rpartition(":")
    if not sep or not port_text.isdigit():
        return "an address is 'host:port': yours has no port"
    if port_text != str(port):
        return "every pod listens on the same port, `port`: each has its own address"
    if host == pod:
        return (
            "a pod's host name has a DNS record only under its subdomain, the headless "
            "Service: reread the second item of the list above the task"
        )
    if host.startswith(f"{pod}.{name}."):
        return (
            "your address names the namespace and the cluster domain, which the pods' DNS "
            "search path adds: the same spec must work in any namespace"
        )
    if host == f"{job}-{index}.{name}":
        return (
            "an Indexed Job's pod host name is <Job name>-<index>: what is the name of the "
            "Job of this job?"
        )
    if host == f"{name}-{job}-{index + 1}.{name}":
        return "completion indices start at 0: task i runs in the pod with index i"
    if host == f"{name}-{index}.{name}" or host == f"{name}-{job}.{name}":
        return "the pod host name holds the deployment, the job and the index"
    return "compare yours with the names the list above the task describes, part by part"


@task(LAB, 3, references=("dtf.deploy.pod_dns_names",))
def task3(answer: Any, name: str, counts: Any, port: int) -> str:
    """``pod_addresses(name, counts, port) -> {job: [address, ...]}``: each task's address
    is the DNS name of its pod (the pod of its index of the Indexed Job of its job, under
    the headless Service ``name``), with ``port``. Checked against
    :func:`dtf.deploy.pod_dns_names` on :func:`task3_cases`; a wrong address is named, never
    the right one."""
    what = f"the lab's deployment (NAME={name!r}, counts={counts!r}, PORT={port!r})"
    cases = _inputs(task3_cases, name, counts, port, what=what, fix=_PARAMETERS_HINT)
    expected = [
        _inputs(deploy.pod_dns_names, c, n, p, what=what, fix=_PARAMETERS_HINT, errors=(Exception,))
        for n, c, p in cases
    ]
    for (n, c, p), want in zip(cases, expected, strict=True):
        what = f"name={n!r}, counts={c}, port={p}"
        got = call_function(answer, n, dict(c), p)
        expect_kind(got, Mapping, "a dict {job: ['host:port', ...]}", what=what)
        if sorted(got) != sorted(want):
            raise Wrong(
                f"for {what}: your jobs are {sorted(got)}, not those of `counts`",
                "one entry per job of `counts`, with the same names: a cluster spec keeps "
                "TensorFlow's job names",
            )
        for job, addresses in want.items():
            have = got[job]
            if isinstance(have, (str, bytes)) or not hasattr(have, "__len__"):
                raise Wrong(
                    f"for {what}: job {job!r} must be a list of addresses, got {short(have)}",
                    "one address per task, in index order",
                )
            have = list(have)
            if len(have) != len(addresses):
                raise Wrong(
                    f"for {what}: job {job!r} has {len(have)} address(es), not counts[{job!r}]",
                    "one address per task: counts[job] of them, indices 0 to counts[job] - 1",
                )
            for index, (a, b) in enumerate(zip(addresses, have, strict=True)):
                if a != b:  # the expected address is the answer: not shown
                    raise Wrong(
                        f"for {what}: {short(b)} is not the address of {job}/{index}'s pod",
                        _address_hint(b, n, job, index, p),
                    )
    first = expected[0]
    job = "worker" if "worker" in first else next(iter(first))
    last = len(first[job]) - 1
    return (
        f"{len(cases)} deployments match dtf.deploy.pod_dns_names; in yours, {job}/{last} is "
        f"{first[job][last]}"
    )


# --------------------------------------------------------------------------- task 4


def _containers(spec: dict) -> list[dict]:
    return spec["template"]["spec"]["containers"]


def break_tfjob(manifest: Mapping, variant: int = 0) -> dict:
    """A copy of a valid ``TFJob`` of :data:`LAYOUT` (``chief``, ``worker``, ``ps``) with three
    mistakes of hand-edited manifests, which :func:`dtf.deploy.validate` reports.

    ``variant`` 0 (the lab's): the replica type ``Workers`` (a plural), its ``replicas`` the
    string ``"3"`` (a quoted YAML number), and the ``PS`` container renamed ``tf``.
    ``variant`` 1: ``chief`` (TensorFlow's job name, not the replica type), the ``Worker``
    container renamed ``main``, and the ``PS`` replicas a string."""
    broken = copy.deepcopy(dict(manifest))
    specs = broken["spec"]["tfReplicaSpecs"]
    if variant == 0:
        specs["Workers"] = specs.pop("Worker")
        specs["Workers"]["replicas"] = str(specs["Workers"]["replicas"])
        _containers(specs["PS"])[0]["name"] = "tf"
    elif variant == 1:
        specs["chief"] = specs.pop("Chief")
        _containers(specs["Worker"])[0]["name"] = "main"
        specs["PS"]["replicas"] = str(specs["PS"]["replicas"])
    else:
        raise ValueError(f"variant must be 0 or 1, got {variant!r}")
    return broken


def task4_cases(name: str) -> list[tuple[str, dict, dict]]:
    """``(what, broken, expected)``: the lab's broken TFJob (variant 0, named ``name``),
    variant 1 of another layout, and a valid TFJob, which must come back unchanged."""
    good = deploy.tfjob(LAYOUT, name=name)
    other = deploy.tfjob({"chief": 1, "worker": 2, "ps": 2}, name="mnist", image="my/trainer:1")
    valid = deploy.tfjob({"worker": 2, "ps": 1}, name="valid")
    return [
        ("the lab's broken TFJob", break_tfjob(good, 0), good),
        (
            "a TFJob broken in other ways ('chief', 'main', PS replicas \"2\")",
            break_tfjob(other, 1),
            other,
        ),
        ("a valid TFJob", copy.deepcopy(valid), valid),
    ]


def _replica_counts(manifest: Any) -> dict | None:
    try:
        return {r: s["replicas"] for r, s in manifest["spec"]["tfReplicaSpecs"].items()}
    except (KeyError, TypeError, AttributeError):
        return None


def _first_difference(want: Any, got: Any, path: str = "") -> str | None:
    """The path of the first place where ``got`` differs from ``want``, or None."""
    if isinstance(want, Mapping) and isinstance(got, Mapping):
        for key in list(want) + [k for k in got if k not in want]:
            if key not in got or key not in want:
                return f"{path}.{key}".lstrip(".")
            found = _first_difference(want[key], got[key], f"{path}.{key}")
            if found:
                return found.lstrip(".")
        return None
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got, strict=True)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if want == got and type(want) is type(got) else (path.lstrip(".") or "(top)")


def _lookup(value: Any, path: str) -> Any:
    for part in path.replace("[", ".[").split("."):
        if not part:
            continue
        try:
            value = value[int(part[1:-1])] if part.startswith("[") else value[part]
        except (KeyError, IndexError, TypeError):
            return "(missing)"
    return value


def _replica_type_slip(bad: str) -> str:
    """What is wrong with the replica type ``bad``, when it is a known slip (issue 18): an S
    too many (a plural), an S taken from 'PS' (which is not a plural), or capitals."""
    known = list(deploy.TFJOB_REPLICA_TYPES.values())
    low = bad.lower()
    if any(low == t.lower() for t in known):
        return (
            f"; {bad!r} differs from a replica type only in its capitals, and the operator "
            "compares them exactly"
        )
    if any(low == t.lower() + "s" for t in known):
        return f"; {bad!r} has an S too many: a replica type is singular, however many replicas"
    if any(t.endswith("S") and low + "s" == t.lower() for t in known):
        return "; careful: 'PS' ends with an S too, and it is not a plural"
    return ""


def _validator_hint(message: str) -> str:
    if "expected int, got '" in message:
        return "a replicas value is text (a quoted YAML number) where the schema wants a number"
    if "not a replica type" in message:
        hint = (
            "a replica type is one of the operator's names, spelled exactly: "
            "deploy.TFJOB_REPLICA_TYPES holds them"
        )
        bad = re.findall(r"tfReplicaSpecs\.([^.:\s]+): not a replica type", message)
        return hint + "".join(_replica_type_slip(b) for b in bad)
    if "no container named" in message:
        return (
            "the operator writes TF_CONFIG only into the container with the name "
            "deploy.TFJOB_CONTAINER holds: which of this replica's containers has it?"
        )
    return "read the validator's message: each problem is one path and what is wrong there"


@task(LAB, 4, references=("dtf.deploy.tfjob",))
def task4(answer: Any, name: str) -> str:
    """``repair(manifest) -> dict``: a fixed copy of a broken ``TFJob``, the input unchanged.
    Checked on :func:`task4_cases`: the input must be left as it was, the result must pass
    :func:`dtf.deploy.validate`, have the replica counts of the valid manifest and equal it
    (a repair changes nothing else)."""
    cases = _inputs(task4_cases, name, what="the lab's TFJob", fix=_PARAMETERS_HINT)
    for what, broken, good in cases:
        given = copy.deepcopy(broken)
        got = call_function(answer, given)
        if given != broken:
            changed = _first_difference(broken, given) or "(top)"
            raise Wrong(
                f"for {what}: your function changed the manifest it was given (at {changed})",
                "the task asks for a repaired copy: the caller may still need the original (to "
                "show a diff, or to retry), nested dicts and lists included",
            )
        expect_kind(got, Mapping, "the repaired manifest (a dict)", what=what)
        try:
            deploy.validate(got)
        except deploy.ManifestError as exc:
            raise Wrong(
                f"for {what}: deploy.validate still refuses your repair: {exc}",
                _validator_hint(str(exc)),
            ) from None
        want_counts, got_counts = _replica_counts(good), _replica_counts(got)
        if got_counts != want_counts:
            raise Wrong(
                f"for {what}: your repair changed the replicas, to {got_counts}",
                "a repair leaves every replica spec and its number of replicas as they were",
            )
        place = _first_difference(good, got)
        if place is not None:
            raise Wrong(
                f"for {what}: your repair also changed {place}, to {short(_lookup(got, place))}",
                "a repair fixes what the validator names and leaves everything else as it "
                "was (image, command, ports, labels, the other containers)",
            )
    return (
        f"{len(cases)} TFJobs pass deploy.validate after your repair, with the replicas "
        f"{_replica_counts(cases[0][2])}, and their inputs are unchanged"
    )


# --------------------------------------------------------------------------- task 5


def task5_cases(name: str, port: int) -> list[tuple[str, list[dict], dict, Task]]:
    """``(what, manifests, cluster, task)``: pods of the lab's Indexed Jobs of
    :data:`LAYOUT` (``name``, ``port``), and of another deployment whose manifests come in
    another order."""
    mine = deploy.indexed_jobs(LAYOUT, name=name, port=port)
    mine_cluster = deploy.pod_dns_names(LAYOUT, name, port)
    other_name, other_counts, other_port = OTHER_DEPLOYMENTS[0]
    other = deploy.indexed_jobs(other_counts, name=other_name, port=other_port)[::-1]
    other_cluster = deploy.pod_dns_names(other_counts, other_name, other_port)
    lab = f"the lab's Indexed Jobs ({name})"
    rest = f"another deployment ({other_name}, manifests in reverse order)"
    return [
        (lab, mine, mine_cluster, Task("worker", 2)),
        (lab, mine, mine_cluster, Task("chief", 0)),
        (rest, other, other_cluster, Task("ps", 1)),
        (rest, other, other_cluster, Task("worker", 0)),
    ]


@task(
    LAB,
    5,
    optional=True,
    references=("dtf.deploy.expand_tf_config", "dtf.cluster.spec.tf_config"),
)
def task5(answer: Any, name: str, port: int) -> str:
    """``tf_config_in_pod(manifests, job, index) -> dict``: the ``TF_CONFIG`` (parsed) of the
    pod of ``index`` of the Indexed Job of ``job``, once Kubernetes has replaced
    ``$(TASK_INDEX)``. Checked on :func:`task5_cases`: it must equal Task 1's ``TF_CONFIG``
    of that task for Task 3's cluster (:func:`dtf.cluster.spec.tf_config` of
    :func:`dtf.deploy.pod_dns_names`), and TensorFlow must read it as that task
    (:func:`tensorflow_view`)."""
    cases = _inputs(task5_cases, name, port, what="the lab's Indexed Jobs", fix=_PARAMETERS_HINT)
    views: list[dict] = []
    for what, manifests, cluster, task_ in cases:
        where = f"pod {task_.index} of the {task_.job!r} Job of {what}"
        want = json.loads(tf_config(cluster, task_))
        try:
            got = call_function(answer, copy.deepcopy(manifests), task_.job, task_.index)
        except Wrong as exc:
            if "JSONDecodeError" in exc.detail:
                raise Wrong(
                    f"for {where}: {exc.detail}",
                    "the value holds $(TASK_INDEX), which is not JSON until Kubernetes "
                    "replaces it with the pod's index: what does your function parse?",
                ) from None
            if not re.search(r"raised (KeyError|IndexError|TypeError|StopIteration)", exc.detail):
                raise
            if what == cases[0][0]:  # the lab's own manifests, in their order: not the order
                raise Wrong(f"for {where}: {exc.detail}", exc.hint) from None
            raise Wrong(
                f"for {where}: {exc.detail}",
                "the manifests can come in any order (here "
                + ", ".join(f"{m['kind']} {m['metadata']['name']}" for m in manifests)
                + "): your function depends on their order",
            ) from None
        if isinstance(got, str):
            hint = "the task asks for the TF_CONFIG parsed, a dict"
            if "$(" in got:
                hint = (
                    "Kubernetes replaces $(TASK_INDEX) with the pod's index when it starts "
                    "the container: yours still holds it"
                )
            raise Wrong(f"for {where}: expected a dict, got the text {short(got)}", hint)
        expect_kind(got, Mapping, "a dict", what=where)
        if "task" not in got:
            raise Wrong(
                f'for {where}: your dict has no "task" (its keys: {sorted(got)})',
                "the task asks for the whole TF_CONFIG, parsed",
            )
        if got.get("task") != want["task"]:
            hint = (
                "the TF_CONFIG comes from the Job of `job`, whatever the manifests' order: "
                "which manifest did yours come from?"
            )
            task_of = got.get("task")
            if isinstance(task_of, Mapping) and task_of.get("type") == task_.job:
                hint = "the right Job, but another pod's index: which index did you expand?"
            raise Wrong(f'for {where}: your "task" is {short(task_of)}, not this pod\'s', hint)
        if dict(got) != want:
            raise Wrong(
                f"for {where}: your TF_CONFIG differs from this pod's at "
                f"{_first_difference(want, dict(got)) or '(top)'}",
                "the task asks for the whole TF_CONFIG of that container, parsed",
            )
        # What the pod's strategy will make of it: TensorFlow's own reading and validation.
        try:
            seen = tensorflow_view(json.dumps(dict(got)))
        except TensorFlowRefusal as exc:  # equal to the course's: only if TensorFlow changed
            raise Wrong(f"for {where}: TensorFlow refuses the pod's TF_CONFIG: {exc}") from None
        views.append(seen)
    what, _, cluster, task_ = cases[0]
    seen = views[0]
    return (
        f"{len(cases)} pods get the TF_CONFIG that Task 1 writes for Task 3's cluster; "
        f"pod {task_.index} of {name}-{task_.job} is {task_} at {cluster[task_.job][task_.index]}, "
        f"read by TensorFlow's resolver as {seen['type']}/{seen['index']}"
    )


# --------------------------------------------------------------------------- task 6

#: Task 6: one fault per broken deployment of :data:`LAYOUT`, each of which
#: :func:`dtf.deploy.validate` accepts: ``(case, job whose manifest is broken ('' for the
#: Service), the fields that name the fault, what the fault does)``.
FAULTS = (
    (
        "a",
        "worker",
        ("subdomain",),
        "the worker pods' host names live under another subdomain than the headless "
        "Service's name, so no DNS record is made for them and no task can reach a worker",
    ),
    (
        "b",
        "",
        ("clusterIP",),
        "the Service is not headless: it gets one virtual address that balances between the "
        "pods, and no DNS record per pod, so the per-task addresses of TF_CONFIG resolve to "
        "nothing",
    ),
    (
        "c",
        "chief",
        ("TF_CONFIG",),
        "the chief's TF_CONFIG says it is a worker: two processes play the same worker task "
        "and the chief task is played by nobody",
    ),
    (
        "d",
        "worker",
        ("restartPolicy", "podFailurePolicy"),
        "a failed worker's container is restarted in place, alone, by the kubelet, while "
        "multi-worker training needs all workers to restart together, and a preempted "
        "worker's exit (42) now counts as a failure",
    ),
    (
        "e",
        "worker",
        ("parallelism",),
        "the Job runs one worker pod at a time, so the others never start while it waits "
        "for them: the cluster never forms",
    ),
)


def _tf_config_env(manifest: dict) -> dict:
    return next(
        e
        for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]
        if e["name"] == TF_CONFIG
    )


def broken_deployments(name: str, port: int) -> dict[str, list[dict]]:
    """``{case: manifests}``: the Indexed Jobs of :data:`LAYOUT` (``name``, ``port``), each
    case with the one fault of :data:`FAULTS`; every one passes :func:`dtf.deploy.validate`."""
    out = {}
    for case, job, _, _ in FAULTS:
        manifests = deploy.indexed_jobs(LAYOUT, name=name, port=port)
        target = next(
            m for m in manifests if m["metadata"]["name"] == (f"{name}-{job}" if job else name)
        )
        spec = target["spec"]
        if case == "a":
            spec["template"]["spec"]["subdomain"] = f"{name}-workers"
        elif case == "b":
            del spec["clusterIP"]
        elif case == "c":
            env = _tf_config_env(target)
            env["value"] = env["value"].replace('"type": "chief"', '"type": "worker"')
        elif case == "d":
            spec["template"]["spec"]["restartPolicy"] = "OnFailure"
            del spec["podFailurePolicy"]
        elif case == "e":
            spec["parallelism"] = 1
        out[case] = manifests
    return out


def show_deployment(manifests: list[dict]) -> str:
    """The fields of a deployment that decide whether its pods find each other and how
    they restart, one line per manifest."""
    lines = []
    for m in manifests:
        spec = m["spec"]
        if m["kind"] == "Service":
            lines.append(
                f"  Service {m['metadata']['name']}: clusterIP={spec.get('clusterIP', '(unset)')}, "
                f"selector={spec.get('selector')}"
            )
            continue
        pod = spec["template"]["spec"]
        task_ = deploy.expand_tf_config(_tf_config_env(m)["value"], 0)["task"]
        lines.append(
            f"  Job {m['metadata']['name']}: completions={spec['completions']}, "
            f"parallelism={spec['parallelism']}, subdomain={pod.get('subdomain')}, "
            f"restartPolicy={pod.get('restartPolicy')}, "
            f"podFailurePolicy={'yes' if spec.get('podFailurePolicy') else 'none'}, "
            f"TF_CONFIG task={task_['type']}/$(TASK_INDEX)"
        )
    return "\n".join(lines)


def _field_of(text: str) -> str:
    """``"subdomain"`` for ``"spec.template.spec.subdomain"``; ``"TF_CONFIG"`` for a path
    into the container's ``env``; the text itself otherwise."""
    text = text.strip()
    if "env" in text.split(".")[-1] or text.endswith("]") and ".env[" in text:
        return TF_CONFIG
    return re.sub(r"\[.*?\]", "", text.split(".")[-1])


@task(LAB, 6, references=("dtf.checks.lab07.FAULTS",))
def task6(answer: Any, name: str, port: int) -> str:
    """``whats_wrong() -> {case: (manifest name, field)}``: for each deployment of
    :func:`broken_deployments`, the manifest (its ``metadata.name``) and the field (its name,
    or a path ending with it) that breaks multi-worker training. Every broken deployment
    passes :func:`dtf.deploy.validate`: the fault is one of meaning, not of schema."""
    cases = _inputs(
        broken_deployments, name, port, what="the lab's Indexed Jobs", fix=_PARAMETERS_HINT
    )
    got = call_function(answer)
    expect_kind(got, Mapping, "a dict {case: (manifest name, field)}")
    for case, job, fields, _why in FAULTS:
        if case not in got:
            raise Wrong(f"your dict has no entry for case {case!r}", "one entry per case")
        pair = expect_kind(got[case], (tuple, list), "(manifest, field)", size=2, what=repr(case))
        manifest, field = (str(x) for x in pair)
        want = f"{name}-{job}" if job else name
        names = [m["metadata"]["name"] for m in cases[case]]
        if manifest not in names:
            raise Wrong(
                f"for case {case!r}: there is no manifest named {manifest!r} (there are "
                f"{', '.join(names)})",
                "name the manifest by its metadata.name, as printed",
            )
        if manifest != want:
            raise Wrong(
                f"for case {case!r}: {manifest} is as a working deployment needs it",
                "for each manifest, ask what its fields make Kubernetes do: which pods run "
                "and when, which names resolve, which task each pod plays, who restarts "
                "what after a failure",
            )
        if _field_of(field).lower() not in [f.lower() for f in fields]:
            raise Wrong(
                f"for case {case!r}: the field {field!r} of {manifest} is as a working "
                "deployment needs it; another field of that manifest is not",
                "compare that manifest's fields with what multi-worker training needs from "
                "it (notebook 13c, section 4, and the Indexed Jobs' docstring, "
                "help(deploy.indexed_jobs))",
            )
    return (
        f"you found the fault of all {len(FAULTS)} deployments, each of which passes the "
        "schema's validation; e.g. case 'b': " + FAULTS[1][3]
    )
